"""TensorFlow's statistics and norms, made of vdev's ops in TensorFlow's own
composition (so the values and gradients are the tape's of those ops):
``reduce_variance``, ``reduce_std``, ``reduce_logsumexp``,
``squared_difference``, ``l2_normalize``, ``norm``, ``count_nonzero``
(``vdev.math``), and ``nn.l2_loss``.
"""

import numbers

from ._ops import (_t, add, divide, log, multiply, reduce_mean, reduce_sum, reshape, sqrt,
                   square, stop_gradient, subtract, exp, maximum)


def _logic():
    from . import _logic_ops
    return _logic_ops


def _more():
    from . import _more_ops
    return _more_ops


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_variance: the mean of the squared deviations from the
    mean over axis (TensorFlow's composition: the mean kept as dims)."""
    x = _t(input_tensor)
    m = reduce_mean(x, axis=axis, keepdims=True)
    return reduce_mean(square(subtract(x, m)), axis=axis, keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_std: sqrt(reduce_variance)."""
    return sqrt(reduce_variance(input_tensor, axis, keepdims))


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_logsumexp: log(sum(exp(x - m))) + m, m the maximum
    over axis (0 where it is infinite), held out of the gradient, as
    TensorFlow's."""
    x = _t(input_tensor)
    lg = _logic()
    raw = _more().reduce_max(x, axis=axis, keepdims=True)
    m = stop_gradient(lg.where(lg.is_finite(raw), raw, 0.0))
    s = log(reduce_sum(exp(subtract(x, m)), axis=axis, keepdims=keepdims))
    if not keepdims:
        m = reshape(m, list(s.shape))
    return add(s, m)


def squared_difference(x, y, name=None):
    """tf.math.squared_difference: (x - y)^2, broadcast."""
    return square(subtract(x, y))


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """tf.math.l2_normalize: x / sqrt(max(sum(x^2) over axis, epsilon))."""
    x = _t(x)
    axis = dim if axis is None else axis
    ss = reduce_sum(square(x), axis=axis, keepdims=True)
    return multiply(x, _more().rsqrt(maximum(ss, float(epsilon))))


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None):
    """tf.norm of vectors: 'euclidean' (or 2) sqrt(sum(x^2)), 1 sum(|x|),
    np.inf max(|x|), over axis (None: all, as one vector) or one axis."""
    x = _t(tensor)
    keep = bool(keepdims)
    if isinstance(axis, (list, tuple)) and len(axis) != 1:
        raise NotImplementedError("vdev's norm takes vector norms (one axis or all), not matrix "
                                  "norms over %r" % (axis,))
    if ord in ("euclidean", 2, 2.0):
        return sqrt(reduce_sum(square(x), axis=axis, keepdims=keep))
    if ord in (1, 1.0):
        return reduce_sum(_more().abs(x), axis=axis, keepdims=keep)
    if isinstance(ord, numbers.Real) and ord == float("inf"):
        return _more().reduce_max(_more().abs(x), axis=axis, keepdims=keep)
    raise ValueError("'ord' must be a supported vector norm, got %s" % (ord,))


def count_nonzero(input, axis=None, keepdims=None, dtype=None, name=None):
    """tf.math.count_nonzero: the elements other than 0 (or True) over axis,
    int32 (TensorFlow's default int64 is not a vdev dtype): NotEqual, Cast,
    Sum and Cast, exact to 2^24 elements a count."""
    lg = _logic()
    from ._tensor import float32, int32
    x = _t(input)
    nz = lg.cast(lg.not_equal(x, False if x.dtype.is_bool else 0), float32)
    return lg.cast(reduce_sum(nz, axis=axis, keepdims=bool(keepdims)), dtype or int32)


def l2_loss(t, name=None):
    """tf.nn.l2_loss: sum(t^2) / 2."""
    return divide(reduce_sum(square(_t(t))), 2.0)
