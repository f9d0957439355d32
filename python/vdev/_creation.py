"""Conversion of Python values to vdev tensors and the creation functions
(TensorFlow's tf.constant, convert_to_tensor, zeros, ones, fill, zeros_like,
ones_like), moved out of _tensor.py, which re-exports every name here (its
Tensor methods and the other modules import them from there). Values become
C-contiguous float32, int32 or bool arrays by TensorFlow's default dtypes
(Python floats float32, ints int32, bools bool, float64 narrowed, int64 when
it fits), then one copy to the current device; a bool array goes as vdev's
bool, one 32-bit word (0 or 1) an element."""

import numbers

import numpy as np

from . import _lib
from ._lib import lib
from ._tensor import (_NP_BOOL, _NP_F32, _NP_I32, Tensor, _ops, as_dtype, bool_, float32,
                      int32)

_KINDS = "float32, int32 or bool"  # vdev's dtypes, as its messages name them


def _to_numpy(value, dtype):
    """value as a C-contiguous float32, int32 or bool array and its DType
    (TensorFlow's defaults: Python floats → float32, Python ints → int32,
    Python and numpy bools → bool; float64 is narrowed to float32, int64 to
    int32 when it fits). Values mixing kinds take numpy's promotion, as ints
    and floats do: ``[True, 1]`` is int32, ``[True, 1.5]`` float32.

    With a dtype, as TensorFlow's conversion: bools convert to float32 (1.0,
    0.0) and to int32 (1, 0), ints to float32; a float to int32 is
    TensorFlow's TypeError ("Cannot convert [1.5] to EagerTensor of dtype
    int32"), and only bools convert to bool ("Cannot convert 1 to
    EagerTensor of dtype bool"), numpy arrays as Python lists (TensorFlow
    casts a numpy array; vdev refuses the values a list could not hold). An
    empty value takes any dtype, as in TensorFlow."""
    if type(value) is np.ndarray and value.ndim <= 4 and value.flags.c_contiguous:
        # an array that is already what vdev takes passes every check below
        # as it is (an int32 array's values fit int32)
        d = value.dtype
        if d is _NP_F32 and (dtype is None or as_dtype(dtype) is float32):
            return value, float32
        if d is _NP_I32 and (dtype is None or as_dtype(dtype) is int32):
            return value, int32
        if d is _NP_BOOL and (dtype is None or as_dtype(dtype) is bool_):
            return value, bool_
    if isinstance(value, Tensor):
        raise TypeError("already a tensor")
    if isinstance(value, (str, bytes)) or (isinstance(value, np.ndarray) and
                                           value.dtype.kind in "USO"):
        raise TypeError("vdev tensors are %s; cannot convert %r" % (_KINDS, value))
    want = as_dtype(dtype) if dtype is not None else None
    arr = np.asarray(value)
    kind = arr.dtype.kind
    if kind in "OUScVmM":  # datetime64 and timedelta64 too, as TensorFlow
        raise TypeError("vdev tensors are %s; cannot convert %r (%s)"
                        % (_KINDS, value, arr.dtype))
    if want is None:
        want = bool_ if kind == "b" else int32 if kind in "iu" else float32
    if want is bool_:
        if kind != "b" and arr.size:
            raise TypeError("Cannot convert %r to EagerTensor of dtype bool" % (value,))
    elif want is int32 and kind != "b":
        if kind == "f" and arr.size:
            raise TypeError("Cannot convert %r to EagerTensor of dtype int32" % (value,))
        if arr.size and (arr.min() < -2**31 or arr.max() > 2**31 - 1):
            raise ValueError("Can't convert Python int to C int32: a value is outside "
                             "[-2147483648, 2147483647]")
    if arr.ndim > 4:
        raise ValueError("vdev tensors have 0 to 4 dimensions, not %d" % arr.ndim)
    # (np.ascontiguousarray would make a 0-d array 1-d)
    return np.require(arr, dtype=want.as_numpy_dtype, requirements="C"), want


def _from_value(value, dtype=None):
    """A new tensor handle holding value (as _to_numpy reads it), on the
    current device scope; a bool array goes as 32-bit words, 0 or 1."""
    arr, dt = _to_numpy(value, dtype)
    if dt is bool_:
        arr = arr.astype(np.int32)
    shape, n = _lib.shape_array(arr.shape)
    return _lib.made(lib.vdev_tensor_from_host(arr.ctypes.data, shape, n, dt._code))


def constant(value, dtype=None, shape=None, name="Const"):
    """A tensor holding a copy of value (a number, a nested list, a numpy
    array, or a tensor), on the current device scope (else the default
    device), as ``tf.constant``. shape reshapes value, or fills it with a
    single value. name is taken as TensorFlow's (eager tensors have none)."""
    if isinstance(value, Tensor):
        value = value.numpy()
    if shape is not None:
        arr, dt = _to_numpy(value, dtype)
        shape = _shape_arg(shape)
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        elif arr.size == int(np.prod(shape, dtype=np.int64)):
            arr = arr.reshape(shape)
        else:
            raise TypeError("Eager execution of tf.constant with unsupported shape. Tensor %r "
                            "(converted from %r) has %d elements, but got `shape` %s with %d "
                            "elements)." % (arr, value, arr.size, shape,
                                            int(np.prod(shape, dtype=np.int64))))
        value, dtype = arr, dt
    return Tensor(_from_value(value, dtype))


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None):
    """value itself when it is a tensor (of dtype, if given), else
    constant(value, dtype). dtype_hint, as TensorFlow's, is the dtype to try
    when dtype is None: a value it cannot hold (1.5 for int32) converts
    with its own dtype instead. name changes nothing."""
    if isinstance(value, Tensor):
        if dtype is not None and as_dtype(dtype) is not value.dtype:
            raise ValueError("Tensor conversion requested dtype %s for Tensor with dtype %s"
                             % (as_dtype(dtype).name, value.dtype.name))
        return value
    if dtype is None and dtype_hint is not None:
        try:
            return constant(value, dtype_hint)
        except (TypeError, ValueError):
            pass
    return constant(value, dtype)


def _shape_arg(shape):
    if isinstance(shape, Tensor):
        shape = shape.numpy().tolist()
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in shape):
        raise TypeError("shape must be a sequence of ints, not %r" % (shape,))
    return tuple(int(s) for s in shape)


def zeros(shape, dtype=float32, name=None):
    """A tensor of shape ``shape`` filled with zeros, on the current device
    scope (else the default device), as ``tf.zeros`` (False for
    ``vdev.bool``)."""
    s, n = _lib.shape_array(_shape_arg(shape))
    return Tensor(_lib.made(lib.vdev_tensor_zeros(s, n, as_dtype(dtype)._code)))


def ones(shape, dtype=float32, name=None):
    """A tensor of shape ``shape`` filled with ones, as ``tf.ones`` (True
    for ``vdev.bool``)."""
    s, n = _lib.shape_array(_shape_arg(shape))
    return Tensor(_lib.made(lib.vdev_tensor_ones(s, n, as_dtype(dtype)._code)))


def fill(dims, value, name=None):
    """A tensor of shape dims, every element value, its dtype value's as
    tf.fill's: a Python or numpy bool gives bool, an int int32, another
    number float32; a 0-d tensor gives its own dtype and value."""
    if isinstance(value, Tensor):
        dt, value = value.dtype, value.numpy()
    elif isinstance(value, (bool, np.bool_)):
        dt = bool_
    else:
        dt = int32 if isinstance(value, numbers.Integral) else float32
    s, n = _lib.shape_array(_shape_arg(dims))
    return Tensor(_lib.made(lib.vdev_tensor_fill(s, n, dt._code, float(value))))


def zeros_like(input, dtype=None, name=None):
    """Zeros of input's shape and dtype (or ``dtype``), made on input's
    device unless a device scope is open (vdev's rule: an unscoped op
    follows its input), so that an accumulator Variable(zeros_like(v))
    lives beside v."""
    t = convert_to_tensor(input)
    with _ops()._near(t):
        return zeros(t.shape, t.dtype if dtype is None else dtype)


def ones_like(input, dtype=None, name=None):
    """Ones of input's shape and dtype (or ``dtype``), where zeros_like
    makes its zeros."""
    t = convert_to_tensor(input)
    with _ops()._near(t):
        return ones(t.shape, t.dtype if dtype is None else dtype)
