"""Losses, as ``tf.keras.losses``, called ``loss(y_true, y_pred)``: the mean
over the batch (Keras's default reduction, 'auto' or
'sum_over_batch_size'; 0 for an empty batch, as Keras's divide_no_nan
gives), the sum over the batch ('sum'), or one loss per example (reduction
'none', what ``vdev.nn.compute_average_loss`` takes in a data-parallel step;
an empty tensor for an empty batch). As in Keras, y_true is cast to y_pred's
dtype (int labels or one-hot rows given as ints are float32 beside float32
predictions); SparseCategoricalCrossentropy takes int32 labels.

As Keras's ``Loss._get_reduction``, a loss whose reduction is 'auto' or
'sum_over_batch_size' is refused when called under a strategy (inside
``strategy.run``, or inside ``strategy.scope()``) with Keras's ValueError: a
replica's mean over its own rows, summed over the replicas by
apply_gradients, would make the gradients num_replicas_in_sync times too
large. Use 'none' with ``vdev.nn.compute_average_loss``, or 'sum' divided by
the global batch size. vdev's built-in loops (``Model.fit`` and ``evaluate``,
vdev/_fit.py) do that themselves, as Keras's do: there a loss's mean is its
sum over the rows divided by them."""

import numpy as np

from . import _ops, _strategy_context
from .errors import InvalidArgumentError
from ._tensor import Tensor, int32

__all__ = ["BinaryCrossentropy", "CategoricalCrossentropy", "CosineSimilarity", "Hinge", "Huber",
           "KLDivergence", "LogCosh", "MeanAbsoluteError", "MeanAbsolutePercentageError",
           "MeanSquaredError", "MeanSquaredLogarithmicError", "Poisson", "Reduction",
           "SquaredHinge",
           "SparseCategoricalCrossentropy"]


class Reduction:
    """``tf.keras.losses.Reduction``'s names: AUTO and SUM_OVER_BATCH_SIZE
    (the mean over the batch), SUM (the sum over the batch) and NONE (one
    loss per example)."""

    AUTO = "auto"
    NONE = "none"
    SUM = "sum"
    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"


def _check_reduction(reduction, per_example=True):
    allowed = ("auto", "sum_over_batch_size", "sum") + (("none",) if per_example else ())
    if reduction not in allowed:
        hint = ""
        if not per_example and reduction == "none":
            hint = ("; for one loss per example, use CategoricalCrossentropy(from_logits=True, "
                    "reduction='none') with one-hot labels")
        raise ValueError("vdev's losses average over the batch (reduction 'auto' or "
                         "'sum_over_batch_size'), sum over it ('sum')%s, not %r%s"
                         % (" or give one loss per example ('none')" if per_example else "",
                            reduction, hint))
    return reduction


# Keras's Loss._get_reduction, word for word.
_MEAN_UNDER_STRATEGY = (
    "Please use `tf.keras.losses.Reduction.SUM` or `tf.keras.losses.Reduction.NONE` for loss "
    "reduction when losses are used with `tf.distribute.Strategy` outside of the built-in "
    "training loops. You can implement `tf.keras.losses.Reduction.SUM_OVER_BATCH_SIZE` using "
    "global batch size like:\n```\nwith strategy.scope():\n    loss_obj = "
    "tf.keras.losses.CategoricalCrossentropy(reduction=tf.keras.losses.Reduction.NONE)\n....\n"
    "    loss = tf.reduce_sum(loss_obj(labels, predictions)) * (1. / global_batch_size)\n```\n"
    "Please see https://www.tensorflow.org/tutorials/distribute/custom_training for more "
    "details.")


def _reduction_now(loss):
    """The loss's reduction for this call: 'auto' and 'sum_over_batch_size'
    are Keras's ValueError under a strategy, as outside Keras's built-in
    loops (vdev's, fit and evaluate, call the loss with 'sum' there and
    divide by the rows themselves)."""
    r = loss.reduction
    if r in ("auto", "sum_over_batch_size") and (
            _strategy_context.replica() is not None
            or _strategy_context.scope_strategy() is not None):
        raise ValueError(_MEAN_UNDER_STRATEGY)
    return r


def _no_weights(sample_weight):
    if sample_weight is not None:
        raise ValueError("vdev's losses take no sample_weight")


def _shape_str(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


# Keras's backend.epsilon(): the clip of probabilities away from 0 and 1
_EPSILON = 1e-7


def _clip_probs(p):
    """Keras's clip of probabilities, tf.clip_by_value(p, epsilon, 1 -
    epsilon) with epsilon and 1 - epsilon in float32 (1e-7 and 1 - 1e-7
    rounded, 0.99999988): TensorFlow's minimum with the top, then maximum
    with the bottom, so the gradient passes where p lies inside the range
    (ends included) and is 0 outside it."""
    eps = np.float32(_EPSILON)
    return _ops.maximum(_ops.minimum(p, float(np.float32(1.0) - eps)), float(eps))


def _smoothing(label_smoothing, cls):
    """label_smoothing as a float: Keras's argument, a number (0 for none)."""
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float,
                                                                              np.floating)):
        raise TypeError("%s's label_smoothing is a number, not %r" % (cls, label_smoothing))
    return float(label_smoothing)


def _smooth(y, label_smoothing, addend):
    """Keras's smoothed labels, y * (1 - s) + addend in float32 (addend: s
    divided by the classes for the categorical loss, 0.5 * s for the
    binary one, as the caller computes it in float32); y as it is when s
    is 0."""
    if not label_smoothing:
        return y
    s = np.float32(label_smoothing)
    return _ops.add(_ops.multiply(y, float(np.float32(1.0) - s)), float(addend))


def _cast_like_and_rank(y_true, y_pred, who):
    """The targets cast to the predictions' dtype, both brought to one rank
    (_same_rank), as every loss of one value per example takes them."""
    y_pred = _ops._t(y_pred)
    return _same_rank(_ops._cast_like(y_true, y_pred), y_pred, who)


def _same_rank(y_true, y_pred, who="MeanSquaredError"):
    """y_true and y_pred brought to one rank as Keras's losses do (Keras 3's
    squeeze_or_expand_to_same_rank): where the ranks differ by one and the
    larger ends in 1, a rank-1 operand gains a trailing 1 ([N] beside
    [N, 1] becomes [N, 1]) and otherwise the larger loses its trailing 1,
    so targets [N] against predictions [N, 1] compare row by row instead of
    broadcasting to [N, N]. The one reshaped is a view (a tape sees through
    it). What still does not broadcast is refused naming the shapes given,
    prediction first, the same for every reduction."""
    st, sp = list(y_true.shape), list(y_pred.shape)
    nt, np_ = len(st), len(sp)
    if nt == np_ + 1 and st[-1] == 1:
        if np_ == 1:
            y_pred = _ops.reshape(y_pred, sp + [1])
        else:
            y_true = _ops.reshape(y_true, st[:-1])
    elif np_ == nt + 1 and sp[-1] == 1:
        if nt == 1:
            y_true = _ops.reshape(y_true, st + [1])
        else:
            y_pred = _ops.reshape(y_pred, sp[:-1])
    try:
        np.broadcast_shapes(tuple(y_true.shape), tuple(y_pred.shape))
    except ValueError:
        raise InvalidArgumentError(
            "%s: incompatible shapes %s and %s (prediction and target must "
            "broadcast, once a trailing 1 is added or dropped to match their ranks)"
            % (who, _shape_str(sp), _shape_str(st)), "VDEV_ERR_SHAPE") from None
    return y_true, y_pred


class _Config:
    """Keras's Loss.get_config / from_config: the constructor's arguments
    (the reduction and name, then the loss function's own)."""

    _args = ()

    def get_config(self):
        config = {"reduction": self.reduction, "name": self.name}
        config.update({a: getattr(self, a) for a in self._args})
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class MeanSquaredError(_Config):
    """mean((y_pred - y_true)^2). With reduction 'none', the mean over the
    last axis of each example, as Keras (a 0-d pair is its own loss). As in
    Keras, y_true and y_pred first get the same rank (a trailing 1 added or
    dropped: targets [N] against predictions [N, 1] are one loss per row),
    then broadcast, under every reduction alike; equal shapes take one vdev
    op, MeanSquaredError."""

    def __init__(self, reduction="auto", name="mean_squared_error"):
        self.reduction = _check_reduction(reduction)
        self.name = name

    def __call__(self, y_true, y_pred, sample_weight=None):
        _no_weights(sample_weight)
        reduction = _reduction_now(self)
        y_pred = _ops._t(y_pred)
        y_true = _ops._cast_like(y_true, y_pred)
        y_true, y_pred = _same_rank(y_true, y_pred)
        if reduction in ("auto", "sum_over_batch_size") and y_true.shape == y_pred.shape:
            return _ops.mean_squared_error_scalar(y_true, y_pred)
        d = _ops.subtract(y_pred, y_true)
        sq = _ops.multiply(d, d)
        per_example = sq if sq.ndim == 0 else _ops.reduce_mean(sq, axis=sq.ndim - 1)
        if reduction == "none":
            return per_example
        if reduction == "sum":
            return _ops.reduce_sum(per_example)
        if per_example.shape.num_elements() == 0:
            # Keras's divide_no_nan: an empty batch's loss is 0
            return _ops.reduce_sum(per_example)
        return _ops.reduce_mean(per_example)


class CategoricalCrossentropy(_Config):
    """Keras's categorical cross-entropy over the last axis: y_true holds
    one-hot (or probability) rows. With from_logits=True,
    -sum(y_true * log_softmax(logits)); with from_logits=False (Keras's
    default), y_pred holds probabilities and the loss is Keras's
    backend.categorical_crossentropy: each row divided by its sum, clipped
    to [1e-7, 1 - 1e-7], then -sum(y_true * log(p)). label_smoothing s
    replaces y_true by y_true * (1 - s) + s / classes, as Keras. Reduction
    'none' gives one loss per example."""

    _args = ("from_logits", "label_smoothing", "axis")

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto",
                 name="categorical_crossentropy"):
        self.reduction = _check_reduction(reduction)
        if isinstance(axis, bool) or axis != -1:
            raise ValueError("vdev's CategoricalCrossentropy takes axis=-1 only (the classes "
                             "on the last axis), not %r" % (axis,))
        self.axis = -1
        self.label_smoothing = _smoothing(label_smoothing, "CategoricalCrossentropy")
        self.from_logits = bool(from_logits)
        self.name = name

    def __call__(self, y_true, y_pred, sample_weight=None):
        _no_weights(sample_weight)
        reduction = _reduction_now(self)
        y_pred = _ops._t(y_pred)
        y_true = _ops._cast_like(y_true, y_pred)
        st, sp = tuple(int(d) for d in y_true.shape), tuple(int(d) for d in y_pred.shape)
        if st != sp:
            # tf.keras: target.shape.assert_is_compatible_with(output.shape),
            # so [C] labels against [N, C] logits are refused, not broadcast.
            raise ValueError("Shapes %s and %s are incompatible" % (st, sp))
        last = y_pred.ndim - 1
        if self.label_smoothing:
            s = np.float32(self.label_smoothing)
            y_true = _smooth(y_true, s, s / np.float32(sp[-1] if sp else 1))
        if self.from_logits:
            lp = _ops.log_softmax(y_pred)
        else:
            # Keras scales each row to sum to 1, then clips and takes the log
            p = _ops.divide(y_pred, _ops.reduce_sum(y_pred, axis=last, keepdims=True))
            lp = _ops.log(_clip_probs(p))
        per_example = _ops.negative(_ops.reduce_sum(_ops.multiply(y_true, lp), axis=last))
        if reduction == "none":
            return per_example
        if reduction == "sum":
            return _ops.reduce_sum(per_example)
        if per_example.shape.num_elements() == 0:
            # Keras divides the sum by the batch size with divide_no_nan: an
            # empty batch's loss is 0, not the NaN of a mean over nothing.
            return _ops.reduce_sum(per_example)
        return _ops.reduce_mean(per_example)


class BinaryCrossentropy(_Config):
    """Keras's binary cross-entropy, then the mean over the last axis of
    each example, as Keras. With from_logits=True, from logits z (tf.nn's
    sigmoid_cross_entropy_with_logits): max(z, 0) - z * y + log(1 +
    exp(-|z|)) per element, written with vdev's ops (relu, exp, log). With
    from_logits=False (Keras's default), y_pred holds probabilities and the
    loss is Keras's backend.binary_crossentropy: p clipped to [1e-7,
    1 - 1e-7], then -(y * log(p + 1e-7) + (1 - y) * log(1 - p + 1e-7)).
    y_true and y_pred first get the same rank as in MeanSquaredError ([N]
    labels against [N, 1] predictions), then must have the same shape (a
    ValueError otherwise: TensorFlow's for logits; vdev does not broadcast
    probabilities either). label_smoothing s replaces y_true by
    y_true * (1 - s) + 0.5 * s, as Keras. Reduction 'none' gives one loss
    per example."""

    _args = ("from_logits", "label_smoothing", "axis")

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto",
                 name="binary_crossentropy"):
        self.reduction = _check_reduction(reduction)
        if isinstance(axis, bool) or axis != -1:
            raise ValueError("vdev's BinaryCrossentropy takes axis=-1 only (the mean over the "
                             "last axis), not %r" % (axis,))
        self.axis = -1
        self.label_smoothing = _smoothing(label_smoothing, "BinaryCrossentropy")
        self.from_logits = bool(from_logits)
        self.name = name

    def __call__(self, y_true, y_pred, sample_weight=None):
        _no_weights(sample_weight)
        reduction = _reduction_now(self)
        z = _ops._t(y_pred)
        y = _ops._cast_like(y_true, z)
        st, sp = list(y.shape), list(z.shape)
        if len(st) == len(sp) + 1 and st[-1] == 1:
            y = _ops.reshape(y, st[:-1])
        elif len(sp) == len(st) + 1 and sp[-1] == 1:
            y = _ops.reshape(y, st + [1])
        if tuple(y.shape) != tuple(z.shape):
            if self.from_logits:
                raise ValueError("`logits` and `labels` must have the same shape, received "
                                 "(%s vs %s)." % (tuple(int(d) for d in z.shape),
                                                  tuple(int(d) for d in y.shape)))
            raise ValueError("BinaryCrossentropy: y_pred %s and y_true %s must have the same "
                             "shape (vdev does not broadcast them)"
                             % (tuple(int(d) for d in z.shape), tuple(int(d) for d in y.shape)))
        if self.label_smoothing:
            s = np.float32(self.label_smoothing)
            y = _smooth(y, s, np.float32(0.5) * s)
        if self.from_logits:
            # |z| as 2 relu(z) - z: with relu's gradient 0 at 0, the gradient
            # at z = 0 is sigmoid(0) - y, as tf.nn's (which takes z >= 0 as
            # positive); relu(z) + relu(-z) would give -y there
            relu_z = _ops.relu(z)
            abs_z = _ops.subtract(_ops.multiply(relu_z, 2.0), z)
            softplus = _ops.log(_ops.add(_ops.exp(_ops.negative(abs_z)), 1.0))
            per_element = _ops.add(_ops.subtract(relu_z, _ops.multiply(z, y)), softplus)
        else:
            # Keras: clipped, then epsilon added again inside each log
            p = _clip_probs(z)
            eps = float(np.float32(_EPSILON))
            pos = _ops.multiply(y, _ops.log(_ops.add(p, eps)))
            neg = _ops.multiply(_ops.subtract(1.0, y),
                                _ops.log(_ops.add(_ops.subtract(1.0, p), eps)))
            per_element = _ops.negative(_ops.add(pos, neg))
        per_example = (per_element if per_element.ndim == 0
                       else _ops.reduce_mean(per_element, axis=per_element.ndim - 1))
        if reduction == "none":
            return per_example
        if reduction == "sum" or per_example.shape.num_elements() == 0:
            # an empty batch's mean is 0, Keras's divide_no_nan
            return _ops.reduce_sum(per_example)
        return _ops.reduce_mean(per_example)


def _keras_labels(y):
    """Labels as Keras takes them: a trailing dimension of 1 dropped ([N, 1]
    -> [N]) and float labels cast to int32 (Keras casts y_true to int, which
    truncates); int32 labels of shape [N] pass as they are."""
    if isinstance(y, Tensor) and y.dtype == int32 and len(y.shape) == 1:
        return y
    a = np.asarray(y.numpy() if isinstance(y, Tensor) else y)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.dtype.kind == "f":
        a = a.astype(np.int32)
    return a


class SparseCategoricalCrossentropy(_Config):
    """The mean over the batch of Keras's sparse categorical cross-entropy
    (reduction 'sum': the sum, the mean times the examples); y_true holds
    int32 labels in [0, classes). With from_logits=True, -log
    softmax(logits)[label]; with from_logits=False (Keras's default),
    y_pred holds probabilities and, as Keras's
    backend.sparse_categorical_crossentropy, they are clipped to [1e-7,
    1 - 1e-7] and their log taken as the logits (so each row is in effect
    divided by its sum). vdev's op gives the mean only: for one loss per
    example, use CategoricalCrossentropy with one-hot labels."""

    _args = ("from_logits", "ignore_class")

    def __init__(self, from_logits=False, ignore_class=None, reduction="auto",
                 name="sparse_categorical_crossentropy"):
        self.reduction = _check_reduction(reduction, per_example=False)
        if ignore_class is not None:
            raise ValueError("vdev's SparseCategoricalCrossentropy takes ignore_class=None "
                             "only, not %r: vdev's op counts every label" % (ignore_class,))
        self.ignore_class = None
        self.from_logits = bool(from_logits)
        self.name = name

    def __call__(self, y_true, y_pred, sample_weight=None):
        _no_weights(sample_weight)
        reduction = _reduction_now(self)
        labels = _keras_labels(y_true)
        if not self.from_logits:
            y_pred = _ops.log(_clip_probs(_ops._t(y_pred)))
        mean = _ops.sparse_softmax_cross_entropy_mean(labels, y_pred)
        if reduction != "sum":
            return mean
        # vdev's op gives the mean: the sum is the mean times the examples
        n = labels.shape.num_elements() if isinstance(labels, Tensor) else int(labels.size)
        return _ops.multiply(mean, float(n))


# Keras's other losses of one value per example (vdev/_more_losses.py)
from ._more_losses import (CosineSimilarity, Hinge, Huber, KLDivergence, LogCosh,  # noqa: E402
                           MeanAbsoluteError, MeanAbsolutePercentageError,
                           MeanSquaredLogarithmicError, Poisson, SquaredHinge)
