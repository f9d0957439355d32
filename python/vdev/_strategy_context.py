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
    step function (in one, making variables is refused)."""
    return scope_strategy() if replica() is None else None


# The words of the refusals that keep the replicas identical, shared by the
# places that make variables (Variable, Dense.build).
_MADE_IN_STEP = ("%s inside strategy.run: variables must be made once for every replica, not "
                 "once by each. %s under strategy.scope(), before strategy.run")


def variable_in_step_error(what, advice="Make it"):
    """The RuntimeError for variables made inside a step function: each
    replica would make its own plain variables, with different initial
    values, and they would drift apart (TensorFlow makes one MirroredVariable
    there; vdev refuses)."""
    return RuntimeError(_MADE_IN_STEP % (what, advice))


# TensorFlow's _require_cross_replica_or_default_context_extended, whose
# advice (merge_call) vdev's ReplicaContext does not have.
CROSS_REPLICA = ("Method requires being in cross-replica context: call it outside strategy.run "
                 "(vdev's ReplicaContext has no merge_call)")


def require_cross_replica(strategy):
    """As TensorFlow's _require_cross_replica_or_default_context_extended:
    inside another strategy's step or scope, RuntimeError "Mixing different
    tf.distribute.Strategy objects: <current> is not <strategy>"; inside this
    strategy's step, RuntimeError CROSS_REPLICA."""
    ctx = replica()
    current = ctx.strategy if ctx is not None else scope_strategy()
    if current is not None and current is not strategy:
        raise RuntimeError("Mixing different tf.distribute.Strategy objects: %s is not %s"
                           % (current, strategy))
    if ctx is not None:
        raise RuntimeError(CROSS_REPLICA)
