"""Comparisons, logic, casts and ``where`` under TensorFlow's names:
``vdev.equal``, ``not_equal``, ``less``, ``less_equal``, ``greater``,
``greater_equal`` (float32 or int32 operands, bool too for the first two,
broadcast as ``add``; a bool tensor out), ``logical_and``, ``logical_or``,
``logical_xor``, ``logical_not`` (bool), ``cast`` between float32, int32 and
bool, ``where`` (TensorFlow 2's, SelectV2 with its three-way broadcast, or
the true positions of a condition), ``reduce_any``, ``reduce_all``, and
``math.is_nan``, ``is_inf``, ``is_finite``. Each is a vdev op on the device
the usual rule picks (src/ops/compare.c); operands that are not tensors are
converted as ``add`` converts them. None of them but ``where`` (and ``cast``
to a tensor's own dtype, which is the tensor itself) has a gradient, as in
TensorFlow: a tape sees their results as constants.
"""

import numpy as np

from ._lib import lib
from ._ops import _cast, _new, _near, _operands, _t, reduce_sum
from ._tensor import Tensor, constant, convert_to_tensor, float32


def _binary(fn, x, y):
    x, y = _operands(x, y)
    return _new(fn(x._handle, y._handle))


def equal(x, y, name=None):
    """tf.math.equal: x == y elementwise, a bool tensor; IEEE's answer on
    floats (NaN equals nothing, itself included; -0 equals +0)."""
    return _binary(lib.vdev_equal, x, y)


def not_equal(x, y, name=None):
    """tf.math.not_equal: x != y elementwise (NaN differs from everything)."""
    return _binary(lib.vdev_not_equal, x, y)


def less(x, y, name=None):
    """tf.math.less: x < y elementwise, float32 or int32."""
    return _binary(lib.vdev_less, x, y)


def less_equal(x, y, name=None):
    """tf.math.less_equal: x <= y elementwise."""
    return _binary(lib.vdev_less_equal, x, y)


def greater(x, y, name=None):
    """tf.math.greater: x > y elementwise."""
    return _binary(lib.vdev_greater, x, y)


def greater_equal(x, y, name=None):
    """tf.math.greater_equal: x >= y elementwise."""
    return _binary(lib.vdev_greater_equal, x, y)


def logical_and(x, y, name=None):
    """tf.math.logical_and on bool tensors, broadcast."""
    return _binary(lib.vdev_logical_and, x, y)


def logical_or(x, y, name=None):
    """tf.math.logical_or on bool tensors, broadcast."""
    return _binary(lib.vdev_logical_or, x, y)


def logical_not(x, name=None):
    """tf.math.logical_not on a bool tensor."""
    x = _t(x)
    return _new(lib.vdev_logical_not(x._handle))


def logical_xor(x, y, name=None):
    """tf.math.logical_xor: (x or y) and not (x and y), as TensorFlow composes
    it (LogicalOr, LogicalAnd, LogicalNot, LogicalAnd: the placement log
    shows those four)."""
    x, y = _operands(x, y)
    return logical_and(logical_or(x, y), logical_not(logical_and(x, y)))


def cast(x, dtype, name=None):
    """tf.cast: x (a tensor or a value) as dtype (float32, int32 or bool).
    A tensor of that dtype already is returned as it is (so a tape sees
    through it); otherwise the op Cast, on x's device: a float to int32 is
    truncated toward zero and saturated beyond int32's range (NaN gives 0,
    where TensorFlow's CPU kernel leaves that to the processor); int32 to
    float32 rounds to nearest; anything to bool is "not 0"; a bool to a number
    is 0 or 1. A value that is not a tensor is converted first with its own
    dtype (``cast(1.7, vdev.int32)`` is 1), as TensorFlow's."""
    return _cast(x if isinstance(x, Tensor) else convert_to_tensor(x), dtype)


def _true_positions(condition):
    """tf.where(condition): the multi-indices of condition's true (non-zero)
    elements in row-major order, [count, rank]; int32 (TensorFlow's are
    int64, which vdev has not). The condition is read to the host (its count
    decides the shape), as eager TensorFlow's Where waits for it."""
    if isinstance(condition, Tensor):
        c = np.asarray(condition.numpy())
        near = condition
    else:
        c = np.asarray(condition)
        near = None
    idx = np.argwhere(c).astype(np.int32).reshape(-1, c.ndim)
    if near is None:
        return constant(idx)
    with _near(near):
        return constant(idx)


def where(condition, x=None, y=None, name=None):
    """tf.where (TensorFlow 2's where_v2). With x and y: x's element where
    condition's is true, else y's, the three broadcast together (op
    SelectV2); condition a bool tensor (or a bool array or list), x and y of
    one dtype (a value beside a tensor takes its dtype). The gradient goes to
    x where condition holds and to y elsewhere, summed to each one's shape;
    unlike ``c * x + (1 - c) * y``, a NaN or infinity not chosen stays out.
    With neither: the positions of condition's true elements (see
    ``_true_positions``). One without the other is TensorFlow's ValueError."""
    if x is None and y is None:
        return _true_positions(condition)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    x, y = _operands(x, y)
    if not isinstance(condition, Tensor):
        with _near(x):
            condition = convert_to_tensor(condition)
    return _new(lib.vdev_where(condition._handle, x._handle, y._handle))


def _any(input_tensor, axis, keepdims):
    """The count of true elements over axis as float32 (exact to 2^24, and
    above zero whenever one is true), for reduce_any and reduce_all."""
    t = _t(input_tensor)
    return reduce_sum(cast(t, float32), axis=axis, keepdims=keepdims)


def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_any: whether any element over axis is true (a bool
    tensor; None: every axis), as Sum of the bools cast to float32 and
    Greater than 0."""
    return greater(_any(input_tensor, axis, keepdims), 0.0)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_all: whether every element over axis is true: not any
    false one (an empty axis gives True, as TensorFlow's)."""
    return logical_not(reduce_any(logical_not(input_tensor), axis, keepdims))


def is_nan(x, name=None):
    """tf.math.is_nan: x != x (NaN is the one value unequal to itself)."""
    x = _t(x)
    _floats_only(x, "IsNan")
    return not_equal(x, x)


def is_finite(x, name=None):
    """tf.math.is_finite: x - x == 0 (an infinity or NaN gives NaN there)."""
    x = _t(x)
    _floats_only(x, "IsFinite")
    return equal(_new(lib.vdev_sub(x._handle, x._handle)), 0.0)


def is_inf(x, name=None):
    """tf.math.is_inf: neither finite nor NaN."""
    x = _t(x)
    _floats_only(x, "IsInf")
    return logical_not(logical_or(is_finite(x), is_nan(x)))


def _floats_only(x, op):
    """TensorFlow registers IsNan, IsInf and IsFinite for floats only (its
    InvalidArgumentError, in its words)."""
    if not x.dtype.is_floating:
        from . import errors
        raise errors.InvalidArgumentError(
            "Value for attr 'T' of %s is not in the list of allowed values: bfloat16, half, "
            "float, double [Op:%s]" % (x.dtype.name, op), "VDEV_ERR_INVALID_ARG")
