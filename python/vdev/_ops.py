"""Ops as functions, under TensorFlow's names (``vdev.matmul``, ``vdev.add``,
``vdev.reduce_mean``, ``vdev.nn.relu``, ...), each one vdev op or a short,
exact composition of them.

Each returns a new tensor. Where it runs is vdev's rule: the innermost
``vdev.device`` scope, else where its inputs are (and where their variables
live when they disagree). A Python number next to a tensor is that tensor's
scalar operand (``x + 1`` is AddScalar on x's device; beside an int32 x, an
int32 tensor of one element and AddV2, which computes on int32 with
two's complement wrapping, as Sub, Mul, Maximum and Minimum), checked as TensorFlow
converts it with x's dtype (``1.5 - i`` for an int32 i is TensorFlow's
TypeError, never 1.5 truncated); where an op needs it as a tensor, the tensor
is made on x's device, so a scalar never drags work to another device. Inputs
that are not tensors (lists, numpy arrays) are made into tensors as
TensorFlow's op wrappers make them (args_to_matching_eager): beside a tensor,
with that tensor's dtype (``f + [1, 2, 3]`` and ``f * np.arange(3)`` are
float32 for a float32 f; a float value beside an int32 tensor is TensorFlow's
TypeError), made on that tensor's device unless a device scope is open; with no
tensor among the operands, the first is converted on its own and the second
with the first's dtype. ``matmul`` converts as ``tf.matmul``: a on its own, b
with a's dtype as a hint (so ``matmul([[1., 2.]], [[1], [2]])`` is float32).
Two tensors of different dtypes are refused (InvalidArgumentError), as in
TensorFlow.
"""

import ctypes
import math
import numbers

import numpy as np

from . import _lib
from ._device import current_device as _current_device, on_device_of as _on_device_of
from ._lib import lib
from ._tensor import (Tensor, _to_numpy, _wrap, constant, convert_to_tensor, float32,
                      int32)


def _t(x):
    return x if isinstance(x, Tensor) else convert_to_tensor(x)


class _near:
    """Context manager: the device of tensor t when no device scope is open
    (a value converted beside t is made where t is, so that it does not
    drag the op to another device); nothing inside a scope, which decides."""

    __slots__ = ("_scope",)

    def __init__(self, t):
        self._scope = _on_device_of(t) if _current_device() is None else None

    def __enter__(self):
        if self._scope is not None:
            self._scope.__enter__()
        return self

    def __exit__(self, *exc):
        if self._scope is not None:
            self._scope.__exit__(*exc)
        return False


def _like(value, t, hint=False):
    """value (not a tensor) as a tensor of t's dtype, made near t, as
    TensorFlow converts an operand beside a tensor: a value that cannot have
    t's dtype (a float for int32) is TensorFlow's TypeError, or, as a hint
    (hint=True, tf.matmul's b), converted with its own dtype instead, for the
    op to refuse."""
    with _near(t):
        try:
            return convert_to_tensor(value, t.dtype)
        except (TypeError, ValueError):
            if not hint:
                raise
            return convert_to_tensor(value)


def _operands(x, y):
    """x and y as tensors for an element-wise op: a value beside a tensor
    takes the tensor's dtype; with no tensor, y takes x's."""
    if isinstance(x, Tensor):
        return x, (y if isinstance(y, Tensor) else _like(y, x))
    if isinstance(y, Tensor):
        return _like(x, y), y
    x = convert_to_tensor(x)
    return x, _like(y, x)


def _cast(x, dtype):
    """x (a tensor or a value) as a tensor of dtype, as ``tf.cast`` (a float
    to int32 truncates toward zero). A tensor of dtype already is returned
    as it is; another one goes through the op Cast (vdev.cast), on x's
    device unless a device scope is open (a cast has no gradient between
    dtypes, as TensorFlow's into and out of integers); a value is converted
    with its own dtype, then cast on the host."""
    from ._tensor import as_dtype
    dtype = as_dtype(dtype)
    if isinstance(x, Tensor):
        if x.dtype is dtype:
            return x
        return _new(lib.vdev_cast(x._handle, dtype._code))
    arr, _ = _to_numpy(x, None)
    return constant(arr.astype(dtype.as_numpy_dtype))


def _cast_like(x, t):
    """x as a tensor of t's dtype, made near t: how Keras's losses take
    y_true (tf.cast(y_true, y_pred.dtype))."""
    if isinstance(x, Tensor) and x.dtype is t.dtype:
        return x
    with _near(t):
        return _cast(x, t.dtype)


_new = _wrap  # the Tensor over the handle a C op made, else its error


def _is_scalar(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _number(x, t):
    """Python number x beside tensor t, checked as TensorFlow converts it
    with t's dtype: a float beside an int32 tensor is TensorFlow's TypeError
    ("Cannot convert 1.5 to EagerTensor of dtype int32"), whichever side it
    is on, as a list of floats is (an int beyond int32 its ValueError)."""
    if t.dtype is int32:
        _to_numpy(x, int32)
    return x


def _fill_like(x, value):
    """A tensor of x's shape and dtype, every element value, on x's device."""
    from ._device import on_device_of
    from ._tensor import fill
    with on_device_of(x):
        t = fill(x.shape, int(value) if x.dtype is int32 else
                 (value != 0) if x.dtype.is_bool else float(value))
    return t


def _unary(cfn, doc):
    def op(x, name=None):
        x = _t(x)
        return _new(cfn(x._handle))
    # named as the module names it, so pickle finds it (a layer's activation)
    op.__name__ = op.__qualname__ = cfn.__name__[len("vdev_"):]
    op.__doc__ = doc
    return op


def _tf_bool(value, arg):
    """value, a bool, as TensorFlow's op attributes take it (its make_bool):
    anything else, 'false' or 1 included, is its TypeError, so that a
    misplaced argument is never read as a switch."""
    if not isinstance(value, bool):
        raise TypeError("Expected bool for argument '%s' not %r." % (arg, value))
    return value


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, output_type=None, grad_a=False, grad_b=False,
           name=None):
    """a @ b, either operand transposed (OpenBLAS on CPU and simulated
    GPUs); operands of rank 3 or 4 (either one) are TensorFlow's batched
    product, BatchMatMulV2, its batch axes broadcast (vdev/ops.h:
    vdev_batch_matmul). With tf.matmul's
    parameters in its order: adjoint_a/adjoint_b
    transpose (vdev's tensors are real, so the adjoint is the transpose;
    one operand both transposed and adjointed is TensorFlow's ValueError);
    a_is_sparse, b_is_sparse, grad_a and grad_b are TensorFlow's hints, which
    change no result (checked, then unused); output_type may be None or the
    operands' dtype (TensorFlow's other output types are its int8 products,
    which vdev has not: a TypeError). Every switch is a bool, as TensorFlow's
    op attributes: another value is its TypeError. As tf.matmul: a value for
    a is converted on its own, one for b with a's dtype as a hint."""
    if (adjoint_a is False and adjoint_b is False and a_is_sparse is False
            and b_is_sparse is False and grad_a is False and grad_b is False
            and output_type is None and type(transpose_a) is bool
            and type(transpose_b) is bool and isinstance(a, Tensor) and isinstance(b, Tensor)):
        # the common call, which passes every check below as it is
        return _new(lib.vdev_matmul_nd(a._handle, b._handle, transpose_a, transpose_b))
    flags = dict(transpose_a=transpose_a, transpose_b=transpose_b, adjoint_a=adjoint_a,
                 adjoint_b=adjoint_b, a_is_sparse=a_is_sparse, b_is_sparse=b_is_sparse,
                 grad_a=grad_a, grad_b=grad_b)
    for k, v in flags.items():
        _tf_bool(v, k)
    for x in "ab":
        if flags["transpose_" + x] and flags["adjoint_" + x]:
            raise ValueError("Only one of `transpose_%s` and `adjoint_%s` can be True. "
                             "Received `transpose_%s`=True, `adjoint_%s`=True." % ((x,) * 4))
    a = _t(a)
    if not isinstance(b, Tensor):
        b = _like(b, a, hint=True)
    if output_type is not None:
        from ._tensor import as_dtype
        try:
            out = as_dtype(output_type)
        except TypeError:
            out = None
        if out is not a.dtype or out is not b.dtype:
            raise TypeError("vdev's matmul returns its operands' dtype (%s, %s): output_type "
                            "must be None or that dtype, not %r"
                            % (a.dtype.name, b.dtype.name, output_type))
    return _new(lib.vdev_matmul_nd(a._handle, b._handle, bool(transpose_a or adjoint_a),
                                   bool(transpose_b or adjoint_b)))


def add(x, y, name=None):
    """x + y: same shape, a row broadcast over the last axis, or one element."""
    if isinstance(x, Tensor) and isinstance(y, Tensor):  # neither is a Python number
        return _new(lib.vdev_add(x._handle, y._handle))
    if _is_scalar(y) and isinstance(x, Tensor) and x.dtype is float32:
        return _new(lib.vdev_add_scalar(x._handle, float(y)))
    if _is_scalar(x) and isinstance(y, Tensor) and y.dtype is float32:
        return _new(lib.vdev_add_scalar(y._handle, float(x)))
    x, y = _operands(x, y)
    return _new(lib.vdev_add(x._handle, y._handle))


def subtract(x, y, name=None):
    """x - y, broadcast as add."""
    if isinstance(x, Tensor) and isinstance(y, Tensor):  # neither is a Python number
        return _new(lib.vdev_sub(x._handle, y._handle))
    if _is_scalar(y) and isinstance(x, Tensor) and x.dtype is float32:
        return _new(lib.vdev_add_scalar(x._handle, -float(y)))
    if _is_scalar(x) and isinstance(y, Tensor):
        f = _fill_like(y, _number(x, y))
        return _new(lib.vdev_sub(f._handle, y._handle))
    x, y = _operands(x, y)
    return _new(lib.vdev_sub(x._handle, y._handle))


def multiply(x, y, name=None):
    """x * y elementwise, broadcast as add."""
    if isinstance(x, Tensor) and isinstance(y, Tensor):  # neither is a Python number
        return _new(lib.vdev_mul(x._handle, y._handle))
    if _is_scalar(y) and isinstance(x, Tensor) and x.dtype is float32:
        return _new(lib.vdev_mul_scalar(x._handle, float(y)))
    if _is_scalar(x) and isinstance(y, Tensor) and y.dtype is float32:
        return _new(lib.vdev_mul_scalar(y._handle, float(x)))
    x, y = _operands(x, y)
    return _new(lib.vdev_mul(x._handle, y._handle))


def divide(x, y, name=None):
    """x / y, computed as a division (not a multiplication by 1/y)."""
    if isinstance(x, Tensor) and isinstance(y, Tensor):  # neither is a Python number
        return _new(lib.vdev_div(x._handle, y._handle))
    if _is_scalar(y) and isinstance(x, Tensor):
        from ._device import on_device_of
        from ._tensor import fill
        with on_device_of(x):
            s = fill((), float(_number(y, x)))
        return _new(lib.vdev_div(x._handle, s._handle))
    if _is_scalar(x) and isinstance(y, Tensor):
        f = _fill_like(y, _number(x, y))
        return _new(lib.vdev_div(f._handle, y._handle))
    x, y = _operands(x, y)
    return _new(lib.vdev_div(x._handle, y._handle))


def maximum(x, y, name=None):
    """tf.maximum: the larger of x and y elementwise (float32), broadcast as
    add. NaN in either gives NaN, as TensorFlow's CPU kernel; of an equal pair
    (-0 and +0 too) the result is x's. The gradient goes to x where x >= y,
    to y elsewhere (TensorFlow's rule), summed to each input's shape."""
    x, y = _operands(x, y)
    return _new(lib.vdev_maximum(x._handle, y._handle))


def minimum(x, y, name=None):
    """tf.minimum: the smaller of x and y elementwise, as maximum; the
    gradient goes to x where x <= y, to y elsewhere."""
    x, y = _operands(x, y)
    return _new(lib.vdev_minimum(x._handle, y._handle))


def negative(x, name=None):
    """-x elementwise (an int32 x: 0 - x, wrapping at -2147483648 as
    TensorFlow's Neg)."""
    x = _t(x)
    if x.dtype is int32:
        zero = _fill_like(x, 0)  # held: its handle must outlive the call
        return _new(lib.vdev_sub(zero._handle, x._handle))
    return _new(lib.vdev_mul_scalar(x._handle, -1.0))


def pow(x, y, name=None):
    """x ** y for a scalar exponent y (PowScalar: C's pow), or a scalar base
    x and a tensor exponent t (``2 ** t``), as TensorFlow's Pow (std::pow)
    on float32: x is rounded to float32 first, and every special case is
    std::pow's (1 ** t is 1 for every t, NaN and inf included; x ** 0 is 1
    for every x; a negative base gives NaN for an exponent that is not a
    whole number and a negative result for an odd one; a base of 0 or inf
    gives 0 or inf by the exponent's sign).

    How x ** t runs, and its gradient (TensorFlow's: grad * x**t * log(x)
    for x > 0, grad * x**t * 0 otherwise):
      x = 1: pow(relu(t) + 1, 0) on t's device; gradient 0 everywhere.
      other finite x > 0: exp(t * log(x)) on t's device, within a few float
        roundings of std::pow (about 4e-6 relative), not exact for whole
        exponents; TensorFlow's gradient.
      x = inf: exp(t * FLT_MAX * FLT_MAX) (0, 1 or inf, exactly); gradient
        inf for t >= 0, 0 for t < 0 (TensorFlow's is NaN there).
      x <= 0 or NaN: std::pow on the host (t is read back; the result is
        made on t's device), times 1 + 0 * tanh(t), which is exactly 1 and
        carries the gradient to t: 0 where x**t is finite, NaN where it is
        not, as TensorFlow's."""
    if _is_scalar(x) and isinstance(y, Tensor):
        _number(x, y)
        with np.errstate(over="ignore"):
            b = np.float32(x)  # TensorFlow's float32 base (1e40: inf)
        if b == 1:
            # pow(u, 0) is 1 for every u (NaN too). Its gradient, 0 * u^-1,
            # is 0 for u = relu(t) + 1 >= 1, and relu's drops the NaN of t NaN.
            u = add(relu(y), 1.0)
            return _new(lib.vdev_pow_scalar(u._handle, 0.0))
        if 0 < b < math.inf:
            scaled = multiply(y, math.log(b))
            return _new(lib.vdev_exp(scaled._handle))
        if b == math.inf:
            big = float(np.finfo(np.float32).max)
            scaled = multiply(multiply(y, big), big)  # +-inf for any t != 0, 0 for t = 0
            return _new(lib.vdev_exp(scaled._handle))
        # 1 for every t but NaN (where x ** t is NaN too); gradient 0 * (1 - tanh(t)^2)
        one = add(multiply(tanh(y), 0.0), 1.0)
        from ._device import on_device_of
        from ._tensor import constant
        with np.errstate(all="ignore"):
            value = np.power(b, y.numpy())
        with on_device_of(y):
            value = constant(value)
        return multiply(value, one)
    if not _is_scalar(y):
        raise TypeError("vdev.pow takes a scalar exponent, not %r" % (y,))
    x = _t(x)
    return _new(lib.vdev_pow_scalar(x._handle, float(_number(y, x))))


def square(x, name=None):
    """x * x elementwise."""
    x = _t(x)
    return _new(lib.vdev_mul(x._handle, x._handle))


def relu(features, name=None):
    """max(features, 0), as ``tf.nn.relu(features)``."""
    features = _t(features)  # held: a converted value lives through the call
    return _new(lib.vdev_relu(features._handle))


tanh = _unary(lib.vdev_tanh, """The hyperbolic tangent of x, elementwise.""")
sigmoid = _unary(lib.vdev_sigmoid, """1 / (1 + exp(-x)), elementwise.""")


def lstm_gates(z):
    """The fused LSTM cell's gates (op LSTMGates): of z [..., 4 units], the
    pre-activations of i, f, g, o, [sigmoid(i), sigmoid(f), tanh(g),
    sigmoid(o)]; the bits of those ops composed (src/ops/lstm_cell.c)."""
    return _new(lib.vdev_lstm_gates(_t(z)._handle))


def lstm_cell_state(gates, c_prev):
    """The fused LSTM cell's new state (op LSTMCellState): f c_prev + i g."""
    return _new(lib.vdev_lstm_cell_state(_t(gates)._handle, _t(c_prev)._handle))


def select_mask(mask, a, b):
    """tf.where on a float mask (op SelectByMask): a's element where the
    mask's is not 0, else b's; a and b one shape, the mask its rank with
    axes of 1 or theirs (src/ops/select.c)."""
    return _new(lib.vdev_select_mask(_t(mask)._handle, _t(a)._handle, _t(b)._handle))


def gru_gates(xw, inner):
    """The fused GRU cell's gates (op GRUGates, reset_after): [z, r, hh] of
    the step's input product xw and recurrent product inner [..., 3 units]
    (src/ops/gru_cell.c)."""
    return _new(lib.vdev_gru_gates(_t(xw)._handle, _t(inner)._handle))


def gru_cell_output(gates, h_prev):
    """The fused GRU cell's output (op GRUCellOutput): z h_prev + (1 - z) hh."""
    return _new(lib.vdev_gru_cell_output(_t(gates)._handle, _t(h_prev)._handle))


def lstm_cell_output(gates, tanh_c):
    """The fused LSTM cell's output (op LSTMCellOutput): o tanh(c)."""
    return _new(lib.vdev_lstm_cell_output(_t(gates)._handle, _t(tanh_c)._handle))
exp = _unary(lib.vdev_exp, """e ** x, elementwise.""")
log = _unary(lib.vdev_log, """The natural logarithm of x, elementwise (-inf at 0, NaN below).""")
# std::sqrt: NaN below 0 (-inf too), -0 for -0
sqrt = _unary(lib.vdev_sqrt, """The square root of x, elementwise (NaN below 0).""")


def _last_axis(op, logits, axis):
    """axis as tf.nn.softmax takes it (None: the last axis, TensorFlow's
    default), checked to be the last axis, the one vdev's op runs over."""
    if axis is not None and axis not in (-1, logits.ndim - 1):
        raise ValueError("vdev's %s runs over the last axis (axis=-1 or None), not axis %r"
                         % (op, axis))


def softmax(logits, axis=None, name=None):
    """exp(logits) / sum(exp(logits)) over the last axis, as ``tf.nn.softmax``
    (axis: None or the last axis; another is a ValueError)."""
    logits = _t(logits)
    _last_axis("softmax", logits, axis)
    return _new(lib.vdev_softmax(logits._handle))


def log_softmax(logits, axis=None, name=None):
    """logits - log(sum(exp(logits))) over the last axis, as
    ``tf.nn.log_softmax`` (axis: None or the last axis)."""
    logits = _t(logits)
    _last_axis("log_softmax", logits, axis)
    return _new(lib.vdev_log_softmax(logits._handle))


def _axis(axis):
    if isinstance(axis, (list, tuple)):
        if len(axis) != 1:
            raise ValueError("vdev reduces over one axis or all of them, not %r" % (axis,))
        axis = axis[0]
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError("axis must be an int, not %r" % (axis,))
    return int(axis)


def _axis_value(axis):
    """An axis given as TensorFlow takes it, an int32 tensor or an integer
    numpy array too (0-d: one axis; 1-d: a list), as an int or a list."""
    if isinstance(axis, Tensor):
        if axis.dtype != int32:
            raise TypeError("axis must be an int32 tensor, an int or a list of ints, not a %s "
                            "tensor" % axis.dtype.name)
        axis = axis.numpy()
    if isinstance(axis, np.ndarray):
        if axis.dtype.kind not in "iu" or axis.ndim > 1:
            raise TypeError("axis must be ints in at most one dimension, not an array of %s "
                            "with shape %s" % (axis.dtype, list(axis.shape)))
        return axis.tolist()
    return axis


def _reduce(cfn, cfn_all, x, axis, keepdims):
    """x reduced by cfn over axis (an int, or a list or tuple of ints, as
    TensorFlow takes), by cfn_all over every axis (axis None, or all of
    them). Several axes are reduced one at a time, the highest first, so
    that the others keep their numbers; no axis ([]) reduces nothing."""
    x = _t(x)
    keepdims = bool(keepdims)
    axis = _axis_value(axis)
    if isinstance(axis, (list, tuple)) and len(axis) != 1:
        nd = x.ndim
        axes = [_axis(a) for a in axis]
        for a in axes:
            if not -nd <= a < nd:
                return _new(cfn(x._handle, a, keepdims))  # vdev's out-of-range error
        axes = [a % nd for a in axes]
        for i, a in enumerate(axes):
            if a in axes[:i]:
                from .errors import InvalidArgumentError
                raise InvalidArgumentError("Invalid reduction arguments: Axes contains "
                                           "duplicate dimension: %d" % a, "VDEV_ERR_INVALID_ARG")
        if not axes:
            return _new(lib.vdev_identity(x._handle))
        if len(axes) < nd:
            y = x
            for a in sorted(axes, reverse=True):
                y = _new(cfn(y._handle, a, keepdims))
            return y
        axis = None
    if axis is None:
        if keepdims:
            return reshape(_new(cfn_all(x._handle)), [1] * x.ndim)
        return _new(cfn_all(x._handle))
    return _new(cfn(x._handle, _axis(axis), keepdims))


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None):
    """The sum over axis (an int or a list of ints; None: every axis)."""
    return _reduce(lib.vdev_sum, lib.vdev_sum_all, input_tensor, axis, keepdims)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    """The mean over axis (an int or a list of ints; None: every axis): over
    several axes, the mean of the means, one axis at a time."""
    return _reduce(lib.vdev_mean, lib.vdev_mean_all, input_tensor, axis, keepdims)


def reshape(tensor, shape, name=None):
    """Same elements, new shape (one dimension may be -1); a view, no copy."""
    from ._tensor import _shape_arg
    s, n = _lib.shape_array(_shape_arg(shape))
    tensor = _t(tensor)
    return _new(lib.vdev_reshape(tensor._handle, s, n))


def _without(prefix, msg):
    return msg[len(prefix):] if msg.startswith(prefix) else msg


def _made_op(h, prefix):
    """The tensor a C op made, or its error with the C prefix (``Pack: ``,
    ``Transpose: ``) dropped: TensorFlow's eager messages start with the
    error itself."""
    if not h:
        from . import errors
        raise errors.from_status(lib.vdev_last_status(), _without(prefix, _lib.last_error()))
    return _new(h)


def _values(values):
    """A list of tensors from tf.concat's or tf.stack's values: a tensor
    alone is a list of one, a value beside a tensor takes its dtype (made
    near the first tensor), as TensorFlow converts an op's list."""
    if isinstance(values, Tensor) or not isinstance(values, (list, tuple)):
        values = [values]
    first = next((v for v in values if isinstance(v, Tensor)), None)
    if first is None:
        return [convert_to_tensor(v) for v in values]
    return [v if isinstance(v, Tensor) else _like(v, first) for v in values]


def _handles(ts):
    arr = (_lib.c_handle * len(ts))(*[t._handle for t in ts])
    return arr, len(ts)


def concat(values, axis, name="concat"):
    """tf.concat: the tensors of values (a list; one dtype, one rank, equal
    dimensions but along axis) joined along axis (negative: from the end);
    scalars join along axis 0 into a vector; one tensor is its copy, the
    axis unchecked, as in TensorFlow. TensorFlow's errors in its words:
    InvalidArgumentError "ConcatOp : Dimension 1 in both shapes must be
    equal: shape[0] = [2,3] vs. shape[1] = [2,4]", "ConcatOp : Expected
    concatenating dimensions in the range [-2, 2), but got 2", mixed dtypes
    "cannot compute ConcatV2 as input #1(zero-based) was expected to be a
    float tensor but is a int32 tensor". More than 4 tensors are joined by
    a tree of ConcatV2 ops (vdev_concat in vdev/ops.h)."""
    ts = _values(values)
    if not ts:
        raise ValueError("vdev.concat needs at least one tensor; values is empty")
    arr, n = _handles(ts)
    return _new(lib.vdev_concat(arr, n, _lib.index(axis, "axis")))


def stack(values, axis=0, name="stack"):
    """tf.stack: the tensors of values (one dtype and shape) stacked along a
    new axis (negative counts from the end of the result's axes), with
    TensorFlow's errors: ValueError "Argument `axis` = 3 not in range [-3,
    3)" (before anything runs, as tf.stack checks it), InvalidArgumentError
    "Shapes of all inputs must match: values[0].shape = [2] !=
    values[1].shape = [3]"; an empty list is tf.stack's empty float32
    tensor of shape [0]. values a tensor or an array rather than a list is,
    as in TensorFlow, itself at axis 0 (converted) and at any other axis a
    TypeError "Expected list for 'values' argument to 'pack' Op, not ..."."""
    axis = _lib.index(axis, "axis")
    if not isinstance(values, (list, tuple)):
        # one tensor (or array): tf.stack's axis 0 converts it as it is;
        # any other axis checks it against values[0] and then refuses a
        # non-list, as TensorFlow's Pack op does
        t = convert_to_tensor(values)
        if axis == 0:
            return t
        nd = t.ndim
        if t.ndim and (axis < -nd or axis >= nd):
            raise ValueError("Argument `axis` = %d not in range [%d, %d)" % (axis, -nd, nd))
        raise TypeError("Expected list for 'values' argument to 'pack' Op, not %r." % (values,))
    ts = _values(values)
    if not ts:
        return constant(np.zeros(0, np.float32))
    nd = ts[0].ndim + 1
    if axis < -nd or axis >= nd:
        raise ValueError("Argument `axis` = %d not in range [%d, %d)" % (axis, -nd, nd))
    arr, n = _handles(ts)
    return _made_op(lib.vdev_stack(arr, n, axis), "Pack: ")


def transpose(a, perm=None, conjugate=False, name="transpose"):
    """tf.transpose: output axis d is a's axis perm[d] (a list of ints, a
    numpy array or an int32 tensor); perm None reverses the axes, as
    TensorFlow. 0 to 4 dimensions, any dtype. conjugate changes nothing
    for vdev's real tensors, as in TensorFlow (which conjugates complex
    tensors only). TensorFlow's errors (InvalidArgumentError): "perm must
    be a vector, not [1,3]", "transpose expects a vector of size 3. But
    input(1) is a vector of size 2", "3 is out of range [0 .. 3)", "1 is
    missing from {0,0,2}."."""
    a = _t(a)
    if perm is None:
        perm = list(range(a.ndim))[::-1]
    elif isinstance(perm, Tensor):
        if perm.dtype != int32:
            raise TypeError("perm must be an int32 tensor or a list of ints, not a %s tensor"
                            % perm.dtype.name)
        perm = perm.numpy()
    shape = np.shape(perm)
    if len(shape) != 1:
        from . import errors
        raise errors.InvalidArgumentError(
            "perm must be a vector, not [%s]" % ",".join(str(d) for d in shape),
            "VDEV_ERR_INVALID_ARG")
    perm = [_lib.index(p, "perm") for p in np.asarray(perm).tolist()]
    if any(p < -2 ** 31 or p >= 2 ** 31 for p in perm):
        raise ValueError("perm entries must fit int32, not %r" % (perm,))
    arr = (ctypes.c_int * max(len(perm), 1))(*perm)
    return _made_op(lib.vdev_transpose_perm(a._handle, arr, len(perm)), "Transpose: ")


def _check_wide_ids(x, rows):
    """TensorFlow keeps int64 ids as they are, so an id outside int32 (which
    vdev's int32 indices cannot hold) in a value x (a list, a NumPy array or
    scalar) is TensorFlow's InvalidArgumentError for the first id outside
    [0, rows), "indices[0,1] = 4294967296 is not in [0, 10)", as an id in
    int32 but outside the rows is; other values pass on unchanged."""
    a = np.asarray(x) if isinstance(x, (list, tuple, np.ndarray, np.generic)) else None
    if a is None or a.dtype.kind not in "iu" or not a.size:
        return
    if a.min() >= -2 ** 31 and a.max() < 2 ** 31:
        return
    flat = a.reshape(-1)
    k = int(np.flatnonzero((flat < 0) | (flat >= rows))[0])
    at = "[%s]" % ",".join(str(int(i)) for i in np.unravel_index(k, a.shape)) if a.ndim else ""
    from .errors import InvalidArgumentError
    raise InvalidArgumentError(None, None, "indices%s = %d is not in [0, %d)"
                               % (at, int(flat[k]), rows))


def gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """tf.gather with batch_dims=0: the slices of params along axis (None:
    0; negative counts from the end) at indices (int32, any shape), shape
    params.shape[:axis] + indices.shape + params.shape[axis + 1:] (4
    dimensions at most); params float32 or int32. Along axis 0 it is one
    GatherV2 op (vdev_gather in vdev/ops.h); along another axis, that axis
    is brought first with a transpose, gathered, and the result transposed
    back (two copies more). The gradient of params is a dense tensor
    (TensorFlow's is IndexedSlices; converted to a tensor they are equal):
    the output's gradient rows added to their indices' rows, in the order of
    the indices. validate_indices is ignored, as TensorFlow ignores it.
    TensorFlow's errors in its words: InvalidArgumentError "indices[1] = 7
    is not in [0, 5)" (on the CPU and simulated GPUs; a CUDA GPU gives a
    row of zeros, as TensorFlow's GPUs), "params must be at least 1
    dimensional", "Expected axis in the range [-2, 2), but got 2"; an int64
    id outside int32 (a NumPy array or a list; vdev's indices are int32) is
    the same InvalidArgumentError for the first id outside the axis; TypeError
    "Value passed to parameter 'indices' has DataType float32 not in list
    of allowed values: int16, int32, int64". batch_dims other than 0 is
    NotImplementedError."""
    if isinstance(batch_dims, Tensor):
        batch_dims = batch_dims.numpy()
    if _lib.index(batch_dims, "batch_dims") != 0:
        raise NotImplementedError("vdev.gather takes batch_dims=0 only, not %r (gathers of "
                                  "whole slices along one axis)" % (batch_dims,))
    params = _t(params)
    if not isinstance(indices, Tensor):
        # an int64 id outside int32: TensorFlow's error for the first id
        # outside the gathered axis, not a conversion error
        a = axis.numpy() if isinstance(axis, Tensor) else (0 if axis is None else axis)
        nd = params.ndim
        if nd >= 1 and isinstance(a, numbers.Integral) and -nd <= a < nd:
            _check_wide_ids(indices, int(params.shape[a]))
        with _near(params):
            indices = convert_to_tensor(indices)
    if indices.dtype is not int32:
        raise TypeError("Value passed to parameter 'indices' has DataType %s not in list of "
                        "allowed values: int16, int32, int64" % indices.dtype.name)
    if isinstance(axis, Tensor):
        axis = axis.numpy()
    axis = 0 if axis is None else _lib.index(axis, "axis")
    nd = params.ndim
    if nd >= 1 and axis != 0:
        if axis < -nd or axis >= nd:
            from . import errors
            raise errors.InvalidArgumentError(
                None, None, "Expected axis in the range [%d, %d), but got %d" % (-nd, nd, axis))
        axis %= nd
    if nd < 1 or axis == 0:
        return _made_op(lib.vdev_gather(params._handle, indices._handle), "GatherV2: ")
    ni = indices.ndim
    if ni + nd - 1 > 4:  # the C op's words, before any copy
        from . import errors
        raise errors.UnimplementedError(
            None, None, "the result would have %d dimensions; vdev tensors have at most 4"
            % (ni + nd - 1))
    first = transpose(params, [axis] + [d for d in range(nd) if d != axis])
    g = _made_op(lib.vdev_gather(first._handle, indices._handle), "GatherV2: ")
    back = list(range(ni, ni + axis)) + list(range(ni)) + list(range(ni + axis, ni + nd - 1))
    return transpose(g, back)


def argmax(input, axis=None, output_type=int32, name=None):
    """Index of the largest element along axis, int32 (TensorFlow's default
    output_type is int64, which vdev has not: output_type, tf.math.argmax's
    third parameter, must be int32, and another is a TypeError).
    axis=None means 0, as in TensorFlow. vdev's ArgMax runs over the last
    axis; another axis is brought last with reshapes and 2-D transposes
    (copies of the input), so every axis works."""
    from ._tensor import as_dtype
    try:
        out = as_dtype(output_type)
    except TypeError:
        out = None
    if out is not int32:
        raise TypeError("vdev's argmax returns int32 indices: output_type must be int32 "
                        "(TensorFlow's default int64 is not a vdev dtype), not %r"
                        % (output_type,))
    x = _t(input)
    nd = x.ndim
    if x.dtype is not float32:
        # vdev's ArgMax's own error, naming the caller's shape (the reshapes
        # below would name theirs)
        from .errors import InvalidArgumentError
        raise InvalidArgumentError("ArgMax: input #0 (shape [%s]) is %s, expected float"
                                   % (",".join(str(d) for d in x.shape), x.dtype.name),
                                   "VDEV_ERR_SHAPE")
    a = 0 if axis is None else _axis(axis)
    if not -nd <= a < nd:
        from .errors import InvalidArgumentError
        raise InvalidArgumentError("Expected dimension in the range [%d, %d), but got %d"
                                   % (-nd, nd, a), "VDEV_ERR_INVALID_ARG")
    shape = x.shape
    if shape[a] == 0:
        # TensorFlow's words: the axis as given, the shape as its DebugString
        from .errors import InvalidArgumentError
        raise InvalidArgumentError("Reduction axis %d is empty in shape [%s]"
                                   % (a, ",".join(str(d) for d in shape)), "VDEV_ERR_INVALID_ARG")
    a %= nd
    if a == nd - 1:
        return _new(lib.vdev_argmax(x._handle))
    before, after = 1, 1
    for d in shape[:a]:
        before *= d
    for d in shape[a + 1:]:
        after *= d
    # [before, n, after] -> [before*n, after] -> [after, before*n] -> [after, before, n]
    # -> argmax [after, before] -> [before, after] -> shape without axis a
    t = reshape(transpose(reshape(x, [before * shape[a], after])), [after, before, shape[a]])
    m = _new(lib.vdev_argmax(t._handle))
    return reshape(transpose(m), shape[:a] + shape[a + 1:])


def identity(input, name=None):
    """A copy on the device of the current scope (an explicit copy between
    devices), else on the input's device, as ``tf.identity``."""
    input = _t(input)
    return _new(lib.vdev_identity(input._handle))


def stop_gradient(input, name=None):
    """input's values as a tensor a tape treats as a constant, as
    ``tf.stop_gradient``: a copy on input's device (vdev_stop_gradient), so
    no gradient flows back through it."""
    input = _t(input)  # held: a converted value lives through the call
    return _new(lib.vdev_stop_gradient(input._handle))


def mean_squared_error_scalar(y_true, y_pred):
    """mean((y_pred - y_true)^2) over every element: a 0-d tensor. y_true
    is cast to y_pred's dtype, as Keras's losses do."""
    y_pred = _t(y_pred)
    y_true = _cast_like(y_true, y_pred)
    return _new(lib.vdev_mse(y_pred._handle, y_true._handle))


def sparse_softmax_cross_entropy_mean(labels, logits):
    """The mean over rows of -log softmax(logits)[label] (labels int32)."""
    logits = _t(logits)
    if isinstance(labels, Tensor):
        lab = labels
    else:
        with _near(logits):  # made beside the logits, not on the default device
            lab = convert_to_tensor(labels, int32)
    return _new(lib.vdev_softmax_cross_entropy(logits._handle, lab._handle))


__all__ = ["matmul", "add", "subtract", "multiply", "divide", "negative", "pow", "square", "sqrt",
           "relu", "tanh", "sigmoid", "exp", "log", "softmax", "log_softmax", "reduce_sum",
           "reduce_mean", "reshape", "transpose", "concat", "stack", "argmax", "identity",
           "stop_gradient", "float32"]
