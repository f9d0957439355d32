"""Indexing and iteration of vdev tensors (``x[0]``, ``x[2:5]``, ``x[:, ::2]``,
``x[..., None, -1]``, ``for row in x``), as TensorFlow's eager tensors do them:
each index is TensorFlow's StridedSlice (``vdev_strided_slice``), built from
the key as TensorFlow's ``_slice_helper`` builds it (an int takes one index
and drops its axis, a slice is a range with its step, ``...`` stands for the
axes no other index names, ``None`` adds an axis of 1), a copy on the
tensor's device that tapes differentiate (the gradient is zeros with the
slice's gradient where it took its elements), a Tensor for a Variable too.

Rules, as TensorFlow's: an int counts from the end when negative, and one
outside its axis is TensorFlow's InvalidArgumentError ("slice index 5 of
dimension 0 out of bounds.", a negative one printed after adding the axis's
size, as TensorFlow prints it); a slice clamps as Python's (``x[1:100]``,
``x[5:2]`` is empty, shape ``[0, ...]``), a step of 0 is "strides[0] must be
non-zero"; more indices than dimensions is "Index out of range using input
dim 2; input has only 2 dims"; two ``...`` "Multiple ellipses in slice spec
not allowed". A list as the whole key is a tuple, as TensorFlow reads it
(``x[[1, 2]]`` is ``x[1, 2]``, not numpy's gather). An index that TensorFlow
refuses too (a float, a string, a list inside the key, a tensor that is not
an int32 scalar) is its TypeError, in its words. An int outside int64 (in
the key, or ``end = index + 1`` of an int index, so ``x[2**63 - 1]`` too) is
the ValueError of TensorFlow's conversion of begin, end and strides to a
tensor ("Can't convert Python sequence with out-of-range integer to
Tensor."), and a mask of ``strided_slice`` outside int32 its
InvalidArgumentError ("Attr begin_mask has value 4294967296 out of range
for an int32").
A boolean mask as the whole key (a bool tensor, a numpy array of bools, or
a Python bool, which TensorFlow's ``_slice_helper`` sends there too) is
TensorFlow's boolean_mask (vdev.boolean_mask, vdev/_masking.py): ``x[x >
0]`` and ``x[np.array([True, False, True])]`` take the elements or rows
where the mask is True, and ``x[True]`` is its ValueError "mask cannot be
scalar.". A bool inside the key is refused as TensorFlow refuses
it: a numpy bool (``np.True_``, a bool array beside other indices) is its
TypeError "Only integers, ...", and a Python bool there (``x[True, 0]``,
``x[[True, False]]``, a list being read as a tuple) a TypeError saying how
to give a mask. A result of more than 4 dimensions is vdev's
UnimplementedError (vdev tensors have at most 4).
"""

import ctypes
import numbers
import operator

import numpy as np

from . import _lib, errors
from ._lib import lib

# TensorFlow's TypeError for an index of a type it refuses (_check_index).
_TF_TYPE = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
            "tf.int32/tf.int64 tensors are valid indices, got %r")

# A Python bool inside the key: TensorFlow takes it as an int there, then
# fails making StridedSlice's begin of bools; a mask is the whole key.
_BOOL_INSIDE = ("a Python bool inside an index (%r) is refused, as TensorFlow refuses it; a "
                "boolean mask is the whole key, a numpy array (x[np.array([True, False])]), "
                "or vdev.boolean_mask(x, mask)")


def _index(k):
    """k as an int when TensorFlow takes it as one (an int, a numpy integer,
    a scalar int32 tensor); None for a slice, ``...`` or None; a Python bool
    (which TensorFlow fails on here) or anything else TensorFlow refuses
    (a numpy bool included) a TypeError."""
    from ._tensor import Tensor
    if isinstance(k, bool):
        raise TypeError(_BOOL_INSIDE % (k,))
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


# The prefix of vdev's C messages for this op; TensorFlow's eager messages
# start with the error itself.
_PREFIX = "StridedSlice: "


def getitem(t, key):
    """t[key] (see the module's doc)."""
    # a mask as the whole key, as TensorFlow's _slice_helper tests it: a
    # Python bool, a bool tensor (t[t > 0]) or a numpy bool array
    from ._tensor import Tensor
    if (isinstance(key, bool) or (isinstance(key, np.ndarray) and key.dtype == bool)
            or (isinstance(key, Tensor) and key.dtype.name == "bool")):
        from ._masking import boolean_mask
        return boolean_mask(t, key)
    # a list is read as a tuple, as TensorFlow's _slice_helper reads it (t[[1, 2]]
    # is t[1, 2], not numpy's gather)
    keys = tuple(key) if isinstance(key, (tuple, list)) else (key,)
    begin, end, strides = [], [], []
    masks = {"begin": 0, "end": 0, "ellipsis": 0, "new_axis": 0, "shrink": 0}
    for pos, k in enumerate(keys):
        bit = 1 << pos
        if isinstance(k, slice):
            start, stop, step = _bound(k.start), _bound(k.stop), _bound(k.step)
            begin.append(0 if start is None else start)
            end.append(0 if stop is None else stop)
            strides.append(1 if step is None else step)
            masks["begin"] |= bit if start is None else 0
            masks["end"] |= bit if stop is None else 0
            continue
        if k is Ellipsis or k is None:
            masks["ellipsis" if k is Ellipsis else "new_axis"] |= bit
            begin.append(0)
            end.append(0)
            strides.append(1)
            continue
        i = _index(k)
        begin.append(i)
        end.append(i + 1)
        strides.append(1)
        masks["shrink"] |= bit
    return _strided(t, begin, end, strides, masks["begin"], masks["end"], masks["ellipsis"],
                    masks["new_axis"], masks["shrink"])


# TensorFlow's eager conversion of begin, end and strides to an int64 tensor
# (a ValueError), and its check of an int32 attr (InvalidArgumentError).
_OUT_OF_RANGE = "Can't convert Python sequence with out-of-range integer to Tensor."
_ATTR_RANGE = "Attr %s has value %d out of range for an int32"
_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def _strided(t, begin, end, strides, *masks):
    n = len(begin)
    # ctypes would wrap a value outside int64 silently (x[2**64] was x[0])
    if any(not -2**63 <= v < 2**63 for v in (*begin, *end, *strides)):
        raise ValueError(_OUT_OF_RANGE)
    for what, m in zip(_MASKS, masks):
        if not -2**31 <= m < 2**31:
            raise errors.InvalidArgumentError(_ATTR_RANGE % (what, m), "VDEV_ERR_INVALID_ARG")
    arr = (lambda v: (ctypes.c_int64 * max(n, 1))(*v))
    h = lib.vdev_strided_slice(t._handle, n, arr(begin), arr(end), arr(strides), *masks)
    if not h:
        from ._ops import _made_op  # the error path only: _ops imports this module
        _made_op(h, _PREFIX)
    return _new(h)


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):
    """tf.strided_slice: the slice of input_ that begin, end and strides (lists
    of ints of one length; strides None: all 1) and the masks (bit i for
    entry i) describe, by TensorFlow's rules (see vdev_strided_slice in
    vdev/ops.h and this module's doc); ``var`` and ``name`` change nothing,
    as in eager TensorFlow. Lists of other lengths, or values of other
    ranks (a scalar, a nested list), are TensorFlow's InvalidArgumentError
    "Expected begin, end, and strides to be 1D equal size tensors, but got
    shapes [2], [3], and [2] instead." (a scalar's shape is [], a 1x2 list's
    [1,2])."""
    from ._ops import _t
    t = _t(input_)
    arrays = []
    for what, v in (("begin", begin), ("end", end), ("strides", strides)):
        if v is None and what == "strides":
            v = np.ones_like(arrays[0])  # TensorFlow's ones_like(begin)
        if hasattr(v, "numpy"):
            v = v.numpy()
        v = np.asarray(v)  # ints past int64 make an object array: checked in _strided
        ints = v.dtype.kind in "iu" or (v.dtype.kind == "O" and all(
            isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in v.flat))
        if v.size and not ints:
            raise TypeError("tf.strided_slice's %s must be a list of ints, not %r" % (what, v))
        arrays.append(v)
    shapes = [a.shape for a in arrays]
    if any(len(s) != 1 for s in shapes) or not shapes[0] == shapes[1] == shapes[2]:
        raise errors.InvalidArgumentError(
            "Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
            "%s, %s, and %s instead." % tuple("[%s]" % ",".join(map(str, s)) for s in shapes),
            "VDEV_ERR_INVALID_ARG")
    vals = [[int(x) for x in a] for a in arrays]
    masks = [_lib.index(m, "tf.strided_slice's %s" % w) for m, w in (
        (begin_mask, "begin_mask"), (end_mask, "end_mask"), (ellipsis_mask, "ellipsis_mask"),
        (new_axis_mask, "new_axis_mask"), (shrink_axis_mask, "shrink_axis_mask"))]
    return _strided(t, *vals, *masks)


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
