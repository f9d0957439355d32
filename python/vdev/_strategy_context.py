"""Where the calling thread stands with strategies, as TensorFlow's
distribution context: inside a step function (replica context: the replica
it runs for), inside ``strategy.scope()`` (cross-replica context: variables
and optimizers made here are mirrored), or neither.

Both are per thread. A step function runs on a replica thread of vdev's own
(the C strategy's), where ctypes gives each call a fresh Python thread state;
the replica context is set when the call starts and cleared when it ends.
The rest of the package (Variable, Dense, optimizers, compute_average_loss,
vdev.distribute) asks here, so this module imports nothing of vdev's.
"""

import threading

_tls = threading.local()


def replica():
    """The ReplicaContext of the step function running on this thread, or None."""
    return getattr(_tls, "replica", None)


def set_replica(ctx):
    _tls.replica = ctx


def scope_strategy():
    """The strategy whose scope() this thread is in (the innermost), or None."""
    stack = getattr(_tls, "scopes", None)
    return stack[-1] if stack else None


def push_scope(strategy):
    stack = getattr(_tls, "scopes", None)
    if stack is None:
        stack = _tls.scopes = []
    stack.append(strategy)


def pop_scope(strategy):
    stack = getattr(_tls, "scopes", None)
    if not stack or stack[-1] is not strategy:
        raise RuntimeError("strategy scopes closed out of order")
    stack.pop()


def mirroring_strategy():
    """The strategy that mirrors variables made now: the scope's, outside a
    step function (a step makes plain variables of its replica)."""
    return scope_strategy() if replica() is None else None
