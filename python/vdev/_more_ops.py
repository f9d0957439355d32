"""More of TensorFlow's everyday ops, under its names: ``reduce_max``,
``reduce_min``, ``abs``, ``sign`` (vdev ops of their own: Max, Min, Abs,
Sign, src/ops/extreme.c), and ``clip_by_value``, ``expand_dims``,
``squeeze``, ``one_hot``, ``range``, ``tile``, ``argmin``, ``split``,
``unstack``, ``reverse``, ``reciprocal``, ``rsqrt`` made of vdev's ops as
TensorFlow's Python makes them or as exactly (the placement log shows the
ops they are made of: Reshape for expand_dims and squeeze, Minimum and
Maximum for clip_by_value, Equal and Cast or SelectV2 for one_hot, ConcatV2
for tile, StridedSlice for split, unstack and reverse, RealDiv (and Sqrt)
for reciprocal and rsqrt), and ``shape``, ``size``, ``rank``, ``eye``,
``linspace``, constants made on the host. Each runs where vdev's
rule puts its inputs' ops and is differentiated by the tape as the ops it is
made of; errors are TensorFlow's, in its words where it has them.
"""

import builtins
import numbers

import numpy as np

from . import errors
from ._indexing import strided_slice
from ._lib import lib
from ._ops import (_axis_value, _near, _new, _reduce, _t, argmax, concat, maximum, minimum,
                   negative, reshape)
from ._tensor import Tensor, as_dtype, constant, convert_to_tensor, float32, int32


def reduce_max(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_max: the largest element over axis (an int or a list;
    None: every axis), float32 or int32; a NaN in a row gives NaN, and a row
    of no element the identity, -inf (int32's least value), as TensorFlow's.
    The gradient is TensorFlow's: shared equally among the elements equal to
    the result."""
    return _reduce(lib.vdev_max, lib.vdev_max_all, input_tensor, axis, keepdims)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_min: as reduce_max, the smallest (+inf over nothing)."""
    return _reduce(lib.vdev_min, lib.vdev_min_all, input_tensor, axis, keepdims)


def abs(x, name=None):  # noqa: A001 (TensorFlow's name)
    """tf.math.abs: |x|, float32 (|-0| is +0, NaN stays NaN) or int32
    (|-2147483648| is -2147483648, as two's complement gives); the gradient
    dy sign(x)."""
    x = _t(x)
    return _new(lib.vdev_abs(x._handle))


def sign(x, name=None):
    """tf.math.sign: -1, 0 or 1 (float32: +0 for -0, NaN for NaN); the
    gradient is zeros, as TensorFlow's."""
    x = _t(x)
    return _new(lib.vdev_sign(x._handle))


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """tf.clip_by_value: minimum(t, max), then maximum(that, min), as
    TensorFlow's Python composes it (so the gradient is theirs: dy where t
    is within the bounds, on either bound where t equals it, 0 outside)."""
    t = _t(t)
    return maximum(minimum(t, clip_value_max), clip_value_min)


def _rank_error(msg):
    return errors.InvalidArgumentError(msg, "VDEV_ERR_INVALID_ARG")


def expand_dims(input, axis, name=None):
    """tf.expand_dims: a dimension of 1 inserted at axis (in [-rank - 1,
    rank]); a view (Reshape)."""
    x = _t(input)
    a = _int_axis(axis)
    nd = x.ndim
    if not -nd - 1 <= a <= nd:
        raise _rank_error("Tried to expand dim index %d for tensor with %d dimensions." % (a, nd))
    a = a + nd + 1 if a < 0 else a
    shape = list(x.shape)
    return reshape(x, shape[:a] + [1] + shape[a:])


def squeeze(input, axis=None, name=None):
    """tf.squeeze: the dimensions of size 1 removed (all of them, or those
    axis names, each of which must be 1); a view (Reshape)."""
    x = _t(input)
    shape = list(x.shape)
    nd = len(shape)
    if axis is None:
        return reshape(x, [d for d in shape if d != 1])
    axes = _axis_value(axis)
    axes = axes if isinstance(axes, list) else [axes]
    keep = [True] * nd
    for a in axes:
        a = _int_axis(a)
        if not -nd <= a < nd:
            raise _rank_error("Tried to squeeze dim index %d for tensor with %d dimensions."
                              % (a, nd))
        a %= nd
        if shape[a] != 1:
            raise _rank_error("Can not squeeze dim[%d], expected a dimension of 1, got %d"
                              % (a, shape[a]))
        keep[a] = False
    return reshape(x, [d for d, k in zip(shape, keep) if k])


def _int_axis(axis):
    if isinstance(axis, Tensor):
        axis = axis.numpy()
    if isinstance(axis, np.ndarray) and axis.ndim == 0:
        axis = axis.item()
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError("axis must be an int, not %r" % (axis,))
    return int(axis)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    """tf.range: start, start + delta, ... up to limit (excluded); one
    argument is the limit. int32 when every argument is an int, else
    float32 (or dtype). Made on the host, a constant on the current device,
    as TensorFlow's Range kernel runs on the CPU. TensorFlow's errors: delta
    0, or a direction that never reaches the limit."""
    if limit is None:
        start, limit = 0, start
    vals = [v.numpy().item() if isinstance(v, Tensor) else v for v in (start, limit, delta)]
    if dtype is None:
        is_int = all(isinstance(v, numbers.Integral) for v in vals)
        dt = int32 if is_int else float32
    else:
        dt = as_dtype(dtype)
    start, limit, delta = vals
    fmt = "%d" if dt is int32 else "%g"
    if delta == 0:
        raise _rank_error(("Requires delta != 0: " + fmt) % delta)
    if delta > 0 and start > limit:
        raise _rank_error(("Requires start <= limit when delta > 0: " + fmt + "/" + fmt)
                          % (start, limit))
    if delta < 0 and start < limit:
        raise _rank_error(("Requires start >= limit when delta < 0: " + fmt + "/" + fmt)
                          % (start, limit))
    return constant(np.arange(start, limit, delta).astype(dt.as_numpy_dtype))


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """tf.one_hot: a new axis (last by default, or axis) of depth entries,
    on_value where the entry is the index, off_value elsewhere (an index
    outside [0, depth), a negative one too, gives a row of off_value). float32
    of 1 and 0 by default: Equal against the positions and Cast; other values
    go through SelectV2. The indices are int32."""
    idx = _t(indices)
    if idx.dtype is not int32:
        raise TypeError("vdev.one_hot takes int32 indices, not %s" % idx.dtype.name)
    depth = int(depth.numpy()) if isinstance(depth, Tensor) else int(depth)
    if depth < 0:
        raise _rank_error("depth must be non-negative, got: %d" % depth)
    nd = idx.ndim
    a = -1 if axis is None else _int_axis(axis)
    if not -1 <= a <= nd:
        raise _rank_error("Expected axis to be -1 or between [0, %d).  But received: %d"
                          % (nd + 1, a))
    a = nd if a == -1 else a
    if dtype is None:  # TensorFlow's: the on or off value's own dtype, else float32
        given = [v for v in (on_value, off_value) if v is not None]
        dtype = _t(given[0]).dtype if given else float32
    dt = as_dtype(dtype)
    with _near(idx):
        pos_shape = [1] * (nd + 1)
        pos_shape[a] = depth
        positions = constant(np.arange(depth, dtype=np.int32).reshape(pos_shape))
        hit = _logic().equal(expand_dims(idx, a), positions)
        if on_value is None and off_value is None:
            return _logic().cast(hit, dt)
        on = convert_to_tensor(1 if on_value is None else on_value, dt)
        off = convert_to_tensor(0 if off_value is None else off_value, dt)
        return _logic().where(hit, on, off)


def _logic():
    from . import _logic_ops
    return _logic_ops


def tile(input, multiples, name=None):
    """tf.tile: the tensor repeated multiples[d] times along each axis d,
    made of ConcatV2 ops (so the gradient sums the copies back)."""
    x = _t(input)
    m = multiples.numpy() if isinstance(multiples, Tensor) else np.asarray(multiples)
    m = [int(v) for v in np.ravel(m)]
    if len(m) != x.ndim:
        raise _rank_error("Expected multiples argument to be a vector of length %d but got "
                          "length %d" % (x.ndim, len(m)))
    for d, k in enumerate(m):
        if k < 0:
            raise _rank_error("Expected multiples[%d] >= 0, but got %d" % (d, k))
    y = x
    for d, k in enumerate(m):
        if k > 1:
            y = concat([y] * k, d)
        elif k == 0:  # nothing along d: an empty slice
            end = list(y.shape)
            end[d] = 0
            y = strided_slice(y, [0] * len(end), end, [1] * len(end))
    return y if y is not x else _new(lib.vdev_identity(x._handle))


def argmin(input, axis=None, output_type=int32, name=None):
    """tf.math.argmin: the index of the smallest element along axis (int32,
    as vdev's argmax): argmax of the negated values, so a tie gives the
    first index, as TensorFlow's. float32 only, as vdev's ArgMax."""
    return argmax(negative(_t(input)), axis, output_type)


def shape(input, out_type=int32, name=None):
    """tf.shape: the dimensions as a 1-D int32 tensor (a constant made on
    the host, where TensorFlow keeps its Shape op's output too)."""
    _int32_only(out_type, "shape")
    return constant(np.array(_t(input).shape, np.int32))


def size(input, out_type=int32, name=None):
    """tf.size: the element count as a 0-d int32 tensor."""
    _int32_only(out_type, "size")
    return constant(np.int32(_t(input).shape.num_elements()))


def rank(input, name=None):
    """tf.rank: the number of dimensions as a 0-d int32 tensor."""
    return constant(np.int32(_t(input).ndim))


def _int32_only(out_type, what):
    if as_dtype(out_type) is not int32:
        raise TypeError("vdev's %s returns int32 (TensorFlow's int64 is not a vdev dtype), "
                        "not %r" % (what, out_type))


def _slice_along(x, axis, lo, hi, step=1):
    """x's entries lo..hi (step) along axis, every other axis whole: one
    StridedSlice."""
    nd = x.ndim
    begin, end, strides = [0] * nd, list(x.shape), [1] * nd
    begin[axis], end[axis], strides[axis] = lo, hi, step
    mask = 0 if step > 0 or hi >= 0 else 1 << axis  # a backward slice to the start
    return strided_slice(x, begin, end, strides, end_mask=mask)


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """tf.split: value cut along axis into num_or_size_splits equal parts
    (an int dividing the axis) or parts of the given sizes (one may be -1,
    the rest), each a StridedSlice. TensorFlow's errors in its words."""
    x = _t(value)
    nd = x.ndim
    a = _int_axis(axis)
    if not -nd <= a < nd:
        raise _rank_error("-%d <= axis < %d Received: axis = %d" % (nd, nd, a))
    a %= nd
    n = x.shape[a]
    if isinstance(num_or_size_splits, numbers.Integral) and not isinstance(
            num_or_size_splits, bool):
        k = int(num_or_size_splits)
        if k <= 0 or n % k:
            raise _rank_error("Number of ways to split should evenly divide the split "
                              "dimension, but got split_dim %d (size = %d) and num_split %d"
                              % (a, n, k))
        sizes = [n // k] * k
    else:
        sizes = [int(v) for v in np.ravel(num_or_size_splits.numpy() if isinstance(
            num_or_size_splits, Tensor) else num_or_size_splits)]
        if sizes.count(-1) > 1:
            raise _rank_error("Determined shape must either match input shape along split_dim "
                              "exactly if fully specified, or be less than the size of the "
                              "input along split_dim if not fully specified.  Got: %d" % n)
        if -1 in sizes:
            sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
        if sum(sizes) != n or any(v < 0 for v in sizes):
            raise _rank_error("Determined shape must either match input shape along split_dim "
                              "exactly if fully specified, or be less than the size of the "
                              "input along split_dim if not fully specified.  Got: %d" % n)
    out, at = [], 0
    for k in sizes:
        out.append(_slice_along(x, a, at, at + k))
        at += k
    return out


def unstack(value, num=None, axis=0, name="unstack"):
    """tf.unstack: the tensors along axis, that axis removed (a StridedSlice
    with shrink_axis_mask each)."""
    x = _t(value)
    nd = x.ndim
    a = _int_axis(axis)
    if not -nd <= a < nd:
        raise ValueError("Argument `axis` = %d not in range [%d, %d)" % (a, -nd, nd))
    a %= nd
    n = x.shape[a]
    if num is not None and num != n:
        raise ValueError("Cannot infer argument `num` from shape %s" % (tuple(x.shape),))
    out = []
    for i in builtins.range(n):  # this module's own range is tf.range
        begin, end, strides = [0] * nd, list(x.shape), [1] * nd
        begin[a], end[a] = i, i + 1
        out.append(strided_slice(x, begin, end, strides, shrink_axis_mask=1 << a))
    return out


def reverse(tensor, axis, name=None):
    """tf.reverse: the entries along each axis in axis (a list of ints)
    taken backwards (StridedSlice of stride -1)."""
    x = _t(tensor)
    nd = x.ndim
    axes = _axis_value(axis)
    axes = axes if isinstance(axes, list) else [axes]
    seen = set()
    for a in axes:
        a = _int_axis(a)
        if not -nd <= a < nd:
            raise _rank_error("'axis'[0] = %d is out of valid range [0, %d)" % (a, nd))
        a %= nd
        if a in seen:
            raise _rank_error("axis %d specified more than once." % a)
        seen.add(a)
    y = x
    for a in sorted(seen):
        y = _slice_along(y, a, y.shape[a] - 1, -1, -1) if y.shape[a] else y
    return y if y is not x else _new(lib.vdev_identity(x._handle))


def eye(num_rows, num_columns=None, batch_shape=None, dtype=float32, name=None):
    """tf.eye: ones on the diagonal, a constant made on the host."""
    cols = num_rows if num_columns is None else num_columns
    dt = as_dtype(dtype)
    m = np.eye(num_rows, cols, dtype=dt.as_numpy_dtype)
    if batch_shape is not None:
        m = np.broadcast_to(m, tuple(batch_shape) + m.shape).copy()
    return constant(m)


def linspace(start, stop, num, name=None, axis=0):
    """tf.linspace for scalars: num evenly spaced float32 values from start
    to stop (both included), computed on the host in double as numpy's and
    rounded once."""
    if axis != 0:
        raise NotImplementedError("vdev's linspace takes scalar start and stop (axis 0)")
    return constant(np.linspace(float(start), float(stop), int(num)).astype(np.float32))


def reciprocal(x, name=None):
    """tf.math.reciprocal: 1 / x (RealDiv, the same bits as TensorFlow's
    Reciprocal, a correctly rounded division)."""
    from ._ops import divide
    return divide(1.0, _t(x))


def rsqrt(x, name=None):
    """tf.math.rsqrt: 1 / sqrt(x) (Sqrt, then RealDiv: both correctly
    rounded, so within one float ulp of the exact value; TensorFlow's Eigen
    kernel computes the same quotient)."""
    from ._ops import divide, sqrt
    return divide(1.0, sqrt(_t(x)))


def floor(x, name=None):
    """tf.math.floor (op Floor): float32 (an int32 tensor gives its own
    values); no gradient, as TensorFlow's."""
    x = _t(x)
    return _new(lib.vdev_floor(x._handle))


def ceil(x, name=None):
    """tf.math.ceil (op Ceil)."""
    x = _t(x)
    return _new(lib.vdev_ceil(x._handle))


def round(x, name=None):  # noqa: A001 (TensorFlow's name)
    """tf.math.round (op Round): to the nearest integer, ties to even, as
    TensorFlow's (numpy's round too)."""
    x = _t(x)
    return _new(lib.vdev_round(x._handle))


def floordiv(x, y, name=None):
    """tf.math.floordiv (op FloorDiv, Python's //): floor(x / y), float32 or
    int32 broadcast as add; an int32 division by zero gives 0 (TensorFlow's
    CPU kernel fails there). No gradient, as TensorFlow's."""
    from ._ops import _operands
    x, y = _operands(x, y)
    return _new(lib.vdev_floor_div(x._handle, y._handle))


def floormod(x, y, name=None):
    """tf.math.floormod (op FloorMod, Python's %): the remainder with y's
    sign; its gradient TensorFlow's (dy for x, -dy floor(x / y) for y)."""
    from ._ops import _operands
    x, y = _operands(x, y)
    return _new(lib.vdev_floor_mod(x._handle, y._handle))


mod = floormod  # tf.math.mod


