"""Losses, as ``tf.keras.losses``, called ``loss(y_true, y_pred)`` and
returning the mean over the batch (Keras's default reduction)."""

from . import _ops


def _check_reduction(reduction):
    if reduction not in ("auto", "sum_over_batch_size"):
        raise ValueError("vdev's losses average over the batch (reduction 'auto' or "
                         "'sum_over_batch_size'), not %r" % (reduction,))


class MeanSquaredError:
    """mean((y_pred - y_true)^2): one vdev op, MeanSquaredError."""

    def __init__(self, reduction="auto", name="mean_squared_error"):
        _check_reduction(reduction)
        self.name = name

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("vdev's losses take no sample_weight")
        return _ops.mean_squared_error_scalar(y_true, y_pred)


class SparseCategoricalCrossentropy:
    """The mean over the batch of -log softmax(logits)[label]; y_true holds
    int32 labels in [0, classes). vdev computes it from logits, so
    from_logits must be True."""

    def __init__(self, from_logits=False, reduction="auto",
                 name="sparse_categorical_crossentropy"):
        _check_reduction(reduction)
        if not from_logits:
            raise ValueError("vdev computes the cross-entropy from logits: pass "
                             "from_logits=True (and give the model no softmax at its end)")
        self.from_logits = True
        self.name = name

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("vdev's losses take no sample_weight")
        return _ops.sparse_softmax_cross_entropy_mean(y_true, y_pred)
