"""Indexing and iteration of vdev tensors (``x[0]``, ``x[2:5]``, ``x[1, 2:4]``,
``for row in x``), as TensorFlow's eager tensors do them, for the forms that
pick one contiguous range of vdev's row-major layout: ints, then at most one
slice of step 1, then at most a trailing ``...``. Each is vdev's Slice op
(``vdev_slice_rows``; an int drops its axis, ``vdev_row``): a copy on the
tensor's device, differentiated by tapes (the gradient is zeros with the
slice's gradient in its rows), a Tensor for a Variable too.

Rules, as TensorFlow's: an int counts from the end when negative, and one
outside the dimension is TensorFlow's InvalidArgumentError ("slice index 5
of dimension 0 out of bounds."); a slice clamps as Python's (``x[1:100]``,
``x[5:2]`` is empty, shape ``[0, ...]``); more indices than dimensions is
"Index out of range using input dim 2; input has only 2 dims". An index that
TensorFlow refuses too (a float, a string, a list, a tensor that is not an
int32 scalar) is its TypeError, in its words. What TensorFlow takes but vdev
does not (a step other than 1, an index after a slice such as ``x[:, 0]``,
``None``/newaxis, ``...`` anywhere but last, a bool: a mask) is NotImplementedError naming
what vdev supports: the program is valid, vdev lacks the op (strided and
gathering slices), and the host copy ``x.numpy()[...]`` does it.
"""

import numbers
import operator

import numpy as np

from . import _lib
from ._lib import lib
from .errors import InvalidArgumentError

# TensorFlow's TypeError for an index of a type it refuses (_check_index).
_TF_TYPE = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
            "tf.int32/tf.int64 tensors are valid indices, got %r")

SUPPORTED = ("vdev indexes along the leading axes only: ints, then at most one slice of step "
             "1, then at most a trailing `...` (x[0], x[-1], x[2:5], x[1, 2:4], x[0, ...], "
             "x[...]); %s is not supported (vdev has no strided or gathering slice ops): index "
             "the host copy, x.numpy()[...]")


def _unsupported(what):
    return NotImplementedError(SUPPORTED % what)


def _index(k):
    """k as an int when TensorFlow takes it as one (an int, a numpy integer,
    a scalar int32 tensor); None for a slice, ``...`` or None; a bool (a
    mask to TensorFlow) NotImplementedError; else TensorFlow's TypeError."""
    from ._tensor import Tensor
    if isinstance(k, (bool, np.bool_)) or getattr(getattr(k, "dtype", None), "name", "") == "bool":
        # TensorFlow's boolean_mask (x[True] is [1, ...], as numpy's)
        raise _unsupported("a boolean index or mask (%r)" % (k,))
    if isinstance(k, numbers.Integral):
        return int(k)
    if k is None or k is Ellipsis or isinstance(k, slice):
        return None
    if isinstance(k, Tensor):
        if k.dtype.name == "int32" and not k.shape:
            return int(k.numpy())
        raise TypeError(_TF_TYPE % (k,))
    if isinstance(k, np.integer) or (isinstance(k, np.ndarray) and k.ndim == 0 and
                                     k.dtype.kind in "iu"):
        return operator.index(k)
    raise TypeError(_TF_TYPE % (k,))


def _bound(v):
    """A slice's start or stop: None or an int, checked as an index."""
    if v is None:
        return None
    i = _index(v)
    if i is None:
        raise TypeError(_TF_TYPE % (v,))
    return i


def _new(h):
    from ._tensor import Tensor
    return Tensor(_lib.made(h))


def getitem(t, key):
    """t[key] (see the module's doc)."""
    keys = key if isinstance(key, tuple) else (key,)
    shape = list(t.shape)
    ints, last = [], None
    for pos, k in enumerate(keys):
        if k is Ellipsis:
            if pos != len(keys) - 1:
                raise _unsupported("`...` before another index (%r)" % (key,))
            continue
        if k is None:
            raise _unsupported("tf.newaxis (None)")
        if last is not None:
            raise _unsupported("an index after a slice (%r)" % (key,))
        if isinstance(k, slice):
            start, stop, step = _bound(k.start), _bound(k.stop), _bound(k.step)
            if step not in (None, 1):
                raise _unsupported("a slice of step %d" % step)
            last = (start, stop)
        else:
            ints.append(_index(k))
    # every index in range before any op runs, in TensorFlow's words
    n_axes = len(ints) + (last is not None)
    if n_axes > len(shape):
        raise InvalidArgumentError("Index out of range using input dim %d; input has only %d "
                                   "dims" % (len(shape), len(shape)), "VDEV_ERR_INVALID_ARG")
    for axis, i in enumerate(ints):
        if not -shape[axis] <= i < shape[axis]:
            raise InvalidArgumentError("slice index %d of dimension %d out of bounds."
                                       % (i, axis), "VDEV_ERR_INVALID_ARG")
    if not ints and last is None:  # x[...] (or x[()]): the whole tensor, a new one
        return _new(lib.vdev_identity(t._handle))
    out = t
    for axis, i in enumerate(ints):
        out = _new(lib.vdev_row(out._handle, i + shape[axis] if i < 0 else i))
    if last is not None:
        begin, stop, _ = slice(*last).indices(shape[len(ints)])
        out = _new(lib.vdev_slice_rows(out._handle, begin, max(stop - begin, 0)))
    return out


def iterate(t):
    """iter(t), as TensorFlow's eager tensors: t[0], t[1], ... along axis 0,
    each made when asked for; a scalar is TensorFlow's TypeError."""
    shape = t.shape
    if not shape:
        raise TypeError("Cannot iterate over a scalar tensor.")
    return (getitem(t, i) for i in range(shape[0]))


def refuse_contains(t, value):
    """``value in t``: refused. Python would iterate and compare each row
    with ``==``, which for vdev tensors compares identity (not values, as
    TensorFlow's element-wise == would), so the answer would be False
    whatever the values: a TypeError pointing to the host copy instead."""
    raise TypeError("`x in t` is not supported for vdev tensors (== compares identity, not "
                    "values): test the host copy, x in t.numpy()")
