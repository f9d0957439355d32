"""Neural-network ops under ``tf.nn``'s names, and ``compute_average_loss``.

``compute_average_loss(per_example_loss)`` is the loss of a replica's rows
scaled to the global batch: sum(per_example_loss) / global_batch_size, so
that the gradients, summed over the replicas by apply_gradients, are those
of the mean loss over the global batch. Inside strategy.run, without
global_batch_size, it divides by the rows of the global batch (a
DistributedBatch) the replica took its rows from in this step, when that
batch is the loss's: every distributed batch the step was given has the same
rows (one batch, or several of one size, such as inputs and labels) and
per_example_loss has as many rows as the replica took. Otherwise it divides
by per_example_loss's rows times the number of replicas, TensorFlow's rule
(an empty per_example_loss then is TensorFlow's "global_batch_size must be
positive."). The global batch's rows are right where the split is uneven (a
batch that does not divide by the replicas, or batch proportions), where
TensorFlow's rule weighs rows unequally. The choice is each replica's own:
with an uneven split, a loss of rows unrelated to the batch whose count
happens to equal some replicas' rows is divided differently on those
replicas; pass global_batch_size for such a loss. Outside a strategy it is
the mean over the rows (one replica), 0 for an empty batch (TensorFlow's
div_no_nan, as vdev's losses give).
"""

import numbers

from . import _lib, _strategy_context, errors
from ._lib import lib
from ._ops import divide, log_softmax, multiply, reduce_sum, relu, sigmoid, softmax, tanh
from ._tensor import Tensor, convert_to_tensor


def _replica_global_batch(ctx, rows):
    """The divisor of a per-example loss of `rows` rows on replica ctx,
    without global_batch_size (see the module's notes)."""
    batches = ctx._batches
    if len(batches) == 1:
        (global_rows, mine), = batches
        if rows == mine and global_rows > 0:
            return global_rows
    n = rows * ctx.num_replicas_in_sync
    if n <= 0:
        raise errors.InvalidArgumentError("global_batch_size must be positive.",
                                          "VDEV_ERR_INVALID_ARG")
    return n


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """sum(per_example_loss * sample_weight) / global_batch_size, a
    0-dimensional tensor (see the module's notes for the default
    global_batch_size). per_example_loss has at least one dimension."""
    t = convert_to_tensor(per_example_loss)
    if sample_weight is not None:
        t = multiply(t, sample_weight)
    if global_batch_size is not None:
        if isinstance(global_batch_size, Tensor):
            global_batch_size = int(global_batch_size)
        if isinstance(global_batch_size, bool) or not isinstance(global_batch_size,
                                                                 numbers.Integral):
            raise TypeError("global_batch_size must be an integer, not %r"
                            % (global_batch_size,))
        if global_batch_size <= 0:
            raise errors.InvalidArgumentError("global_batch_size must be positive.",
                                              "VDEV_ERR_INVALID_ARG")
    ctx = _strategy_context.replica()
    if ctx is not None:
        h = ctx._check()
        if global_batch_size is None and len(t.shape) > 0:
            global_batch_size = _replica_global_batch(ctx, int(t.shape[0]))
        # C's own rule (global_batch_size 0) is not used: its "last batch
        # split" may be a batch the loss has nothing to do with
        return Tensor(_lib.made(lib.vdev_replica_compute_average_loss(
            h, t._handle, int(global_batch_size or 0))))
    if global_batch_size is None and _strategy_context.scope_strategy() is not None:
        raise RuntimeError("You are calling `compute_average_loss` in cross replica context, "
                           "while it was expected to be called in replica context.")
    shape = t.shape
    if len(shape) == 0:
        raise errors.InvalidArgumentError(
            "Invalid value passed for `per_example_loss`. Expected a tensor with at least "
            "rank 1. Received per_example_loss of shape [] with rank 0", "VDEV_ERR_INVALID_ARG")
    total = reduce_sum(t)
    if global_batch_size is None and shape[0] == 0:
        return total  # 0, as TensorFlow's div_no_nan(0, 0), not the NaN of 0 / 0
    return divide(total, float(global_batch_size or shape[0]))


__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "compute_average_loss"]
