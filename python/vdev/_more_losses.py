"""Keras 2.11's losses of one value per example beside vdev's first four,
exported by ``vdev.losses`` and taken by ``compile`` by their Keras names
('mae', 'mape', 'msle', 'huber', 'log_cosh', 'kld', 'poisson',
'cosine_similarity', 'hinge', 'squared_hinge', or the class names):
``MeanAbsoluteError``, ``MeanAbsolutePercentageError``,
``MeanSquaredLogarithmicError``, ``Huber(delta=1.0)``, ``LogCosh``,
``KLDivergence``, ``Poisson``, ``CosineSimilarity(axis=-1)``, ``Hinge``
and ``SquaredHinge``. Each is Keras's function written with vdev's ops, so
the tape differentiates it on every backend: the value per example (the
mean over the last axis, KL's sum, cosine's negated sum), then the
reduction ('auto'/'sum_over_batch_size': the mean, 'sum', 'none'), the
targets cast to the predictions' dtype and brought to their rank first,
as vdev's MeanSquaredError does. Keras's epsilon is 1e-7; Huber's
``where`` is a select of vdev's ops (its gradient Keras's on each side);
the hinge losses take 0/1 targets as -1/1, Keras's check made on the
host.
"""

import numpy as np

from . import _ops
from ._keras_masks import select

_EPSILON = 1e-7


def _abs(x):
    return _ops.maximum(x, _ops.negative(x))


def _mean_last(x):
    return _ops.reduce_mean(x, axis=x.ndim - 1) if x.ndim else x


def _l2_normalize(x, axis):
    ss = _ops.reduce_sum(_ops.multiply(x, x), axis=axis, keepdims=True)
    return _ops.divide(x, _ops.sqrt(_ops.maximum(ss, 1e-12)))


def _base():
    from .losses import _Config
    return _Config


class _PerExample(_base()):
    """A loss of one value per example, reduced as Keras's."""

    def __init__(self, reduction="auto", name=None):
        from .losses import _check_reduction
        self.reduction = _check_reduction(reduction)
        self.name = name or self._default_name

    def __call__(self, y_true, y_pred, sample_weight=None):
        from .losses import _cast_like_and_rank, _no_weights, _reduction_now
        _no_weights(sample_weight)
        reduction = _reduction_now(self)
        y_true, y_pred = _cast_like_and_rank(y_true, y_pred, type(self).__name__)
        values = self._values(y_true, y_pred)
        if reduction == "none":
            return values
        if reduction == "sum" or values.shape.num_elements() == 0:
            return _ops.reduce_sum(values)  # (Keras's divide_no_nan: an empty batch's is 0)
        return _ops.reduce_mean(values)


class MeanAbsoluteError(_PerExample):
    """mean(|y_pred - y_true|) over the last axis."""

    _default_name = "mean_absolute_error"

    def _values(self, t, p):
        return _mean_last(_abs(_ops.subtract(p, t)))


class MeanAbsolutePercentageError(_PerExample):
    """100 * mean(|(y_true - y_pred) / max(|y_true|, eps)|)."""

    _default_name = "mean_absolute_percentage_error"

    def _values(self, t, p):
        d = _abs(_ops.divide(_ops.subtract(t, p), _ops.maximum(_abs(t), _EPSILON)))
        return _ops.multiply(_mean_last(d), 100.0)


class MeanSquaredLogarithmicError(_PerExample):
    """mean((log(max(y_pred, eps) + 1) - log(max(y_true, eps) + 1)) ** 2)."""

    _default_name = "mean_squared_logarithmic_error"

    def _values(self, t, p):
        first = _ops.log(_ops.add(_ops.maximum(p, _EPSILON), 1.0))
        second = _ops.log(_ops.add(_ops.maximum(t, _EPSILON), 1.0))
        d = _ops.subtract(first, second)
        return _mean_last(_ops.multiply(d, d))


class Huber(_PerExample):
    """mean(0.5 e^2 where |e| <= delta, else delta |e| - 0.5 delta^2),
    e = y_pred - y_true."""

    _default_name = "huber_loss"
    _args = ("delta",)

    def __init__(self, delta=1.0, reduction="auto", name=None):
        super().__init__(reduction, name)
        self.delta = float(delta)

    def _values(self, t, p):
        from ._core_layers import _step
        e = _ops.subtract(p, t)
        a = _abs(e)
        small = _step(_ops.subtract(self.delta, a), strict=False)  # |e| <= delta
        quad = _ops.multiply(_ops.multiply(e, e), 0.5)
        lin = _ops.subtract(_ops.multiply(a, self.delta), 0.5 * self.delta * self.delta)
        return _mean_last(select(small, quad, lin))


class LogCosh(_PerExample):
    """mean(x + softplus(-2x) - log 2), x = y_pred - y_true."""

    _default_name = "log_cosh"

    def _values(self, t, p):
        from ._activation_ops import softplus
        x = _ops.subtract(p, t)
        v = _ops.add(x, softplus(_ops.multiply(x, -2.0)))
        return _mean_last(_ops.subtract(v, float(np.log(2.0))))


class KLDivergence(_PerExample):
    """sum(y_true log(y_true / y_pred)) over the last axis, both clipped to
    [eps, 1]."""

    _default_name = "kl_divergence"

    def _values(self, t, p):
        t = _ops.maximum(_ops.minimum(t, 1.0), _EPSILON)
        p = _ops.maximum(_ops.minimum(p, 1.0), _EPSILON)
        v = _ops.multiply(t, _ops.log(_ops.divide(t, p)))
        return _ops.reduce_sum(v, axis=v.ndim - 1) if v.ndim else v


class Poisson(_PerExample):
    """mean(y_pred - y_true log(y_pred + eps))."""

    _default_name = "poisson"

    def _values(self, t, p):
        return _mean_last(_ops.subtract(p, _ops.multiply(t, _ops.log(_ops.add(p, _EPSILON)))))


class CosineSimilarity(_PerExample):
    """-sum(l2_normalize(y_true) l2_normalize(y_pred)) over ``axis``."""

    _default_name = "cosine_similarity"
    _args = ("axis",)

    def __init__(self, axis=-1, reduction="auto", name=None):
        super().__init__(reduction, name)
        self.axis = axis

    def _values(self, t, p):
        axis = self.axis % p.ndim
        prod = _ops.multiply(_l2_normalize(t, axis), _l2_normalize(p, axis))
        return _ops.negative(_ops.reduce_sum(prod, axis=axis))


def _signed(t):
    """Keras's _maybe_convert_labels: 0/1 targets as -1/1 (all of them 0
    or 1, read on the host), others as they are."""
    values = t.numpy()
    if np.all((values == 0) | (values == 1)):
        return _ops.subtract(_ops.multiply(t, 2.0), 1.0)
    return t


class Hinge(_PerExample):
    """mean(max(1 - y_true y_pred, 0))."""

    _default_name = "hinge"

    def _values(self, t, p):
        return _mean_last(_ops.relu(_ops.subtract(1.0, _ops.multiply(_signed(t), p))))


class SquaredHinge(_PerExample):
    """mean(max(1 - y_true y_pred, 0) ** 2)."""

    _default_name = "squared_hinge"

    def _values(self, t, p):
        h = _ops.relu(_ops.subtract(1.0, _ops.multiply(_signed(t), p)))
        return _mean_last(_ops.multiply(h, h))


# compile's names of them (Keras's function names, aliases and class names)
NAMES = {}
for _cls, _names in ((MeanAbsoluteError, ("mae", "MAE", "mean_absolute_error")),
                     (MeanAbsolutePercentageError, ("mape", "MAPE",
                                                    "mean_absolute_percentage_error")),
                     (MeanSquaredLogarithmicError, ("msle", "MSLE",
                                                    "mean_squared_logarithmic_error")),
                     (Huber, ("huber", "huber_loss")), (LogCosh, ("log_cosh", "logcosh")),
                     (KLDivergence, ("kld", "KLD", "kl_divergence",
                                     "kullback_leibler_divergence")),
                     (Poisson, ("poisson",)), (CosineSimilarity, ("cosine_similarity",)),
                     (Hinge, ("hinge",)), (SquaredHinge, ("squared_hinge",))):
    for _n in _names + (_cls.__name__,):
        NAMES[_n] = _cls
