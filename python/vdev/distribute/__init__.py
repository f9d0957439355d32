"""Data parallel training on one machine, as ``tf.distribute``:
``MirroredStrategy`` (one replica of the model on each of several logical
devices, each step run on every replica at once, gradients summed by vdev's
ring all-reduce, the same update on each so the replicas stay identical),
its values (``PerReplica``, ``MirroredVariable``), ``ReduceOp``, the
context queries, and ``Communicator`` for collectives of one's own.

    strategy = vdev.distribute.MirroredStrategy()        # every logical GPU
    with strategy.scope():
        model = vdev.models.MLP([32, 256, 4], seed=1)
        optimizer = vdev.optimizers.Adam(0.003)
    loss_fn = vdev.losses.CategoricalCrossentropy(from_logits=True, reduction="none")

    def step(x, y):
        with vdev.GradientTape() as tape:
            loss = vdev.nn.compute_average_loss(loss_fn(y, model(x)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for x, y in strategy.experimental_distribute_dataset(batches):
        loss = strategy.reduce("SUM", strategy.run(step, args=(x, y)), axis=None)

The C strategy runs the step function on each replica's own host thread
(see vdev/distribute/_mirrored.py for how Python code runs there).
"""

from .. import _strategy_context as _context
from ._comm import Communicator
from ._mirrored import MirroredStrategy, ReplicaContext, ValueContext
from ._values import (DistributedBatch, DistributedValues, MirroredVariable, PerReplica,
                      ReduceOp)


def get_replica_context():
    """The ReplicaContext of the step function running on this thread, else
    None (vdev has no default strategy, so None outside strategy.run too)."""
    return _context.replica()


def get_strategy():
    """The strategy of the running step function, else that of the
    innermost strategy.scope() on this thread, else None (vdev has no
    default strategy)."""
    ctx = _context.replica()
    return ctx.strategy if ctx is not None else _context.scope_strategy()


def has_strategy():
    """Whether a strategy's scope is open (or a step of its is running) here."""
    return get_strategy() is not None


def in_cross_replica_context():
    """True inside strategy.scope() outside a step function."""
    return _context.replica() is None and _context.scope_strategy() is not None


__all__ = ["MirroredStrategy", "ReplicaContext", "ValueContext", "Communicator", "ReduceOp",
           "DistributedValues", "PerReplica", "MirroredVariable", "DistributedBatch",
           "get_replica_context", "get_strategy", "has_strategy", "in_cross_replica_context"]
