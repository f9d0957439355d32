"""vdev.boolean_mask (TensorFlow's tf.boolean_mask) and the boolean-mask form
of indexing (``x[mask]``): the slices of a tensor where a mask is True, by
TensorFlow's rules (array_ops.boolean_mask), built from vdev's own ops. The
mask is read to the host, since it decides the result's shape; its True
positions become int32 indices, and one GatherV2 along axis 0 (with its
gradient, so tapes differentiate through a mask) takes the rows of the
tensor reshaped so that the masked dimensions are one axis; a reshape gives
the result its shape. It runs on the tensor's device, as the gather does.
"""

import numpy as np

from . import _lib
from ._ops import _t, gather, reshape
from ._shape import TensorShape
from ._tensor import Tensor


def _tf_str(shape):
    """A shape as TensorFlow 2 prints a TensorShape in its messages:
    ``()``, ``(3,)``, ``(2, 3)``."""
    if len(shape) == 1:
        return "(%s,)" % shape[0]
    return "(%s)" % ", ".join(str(d) for d in shape)


def _host_mask(mask):
    """The mask as a numpy array on the host: a tensor's values (reading
    them waits for the work that makes them), else the value as numpy reads
    it (a list of bools is a bool array)."""
    if isinstance(mask, Tensor):
        return mask.numpy()
    a = np.asarray(mask)
    if a.dtype.kind not in "biuf":
        raise TypeError("vdev.boolean_mask's mask must hold booleans or numbers (a number "
                        "other than 0 is True, as TensorFlow's Where reads it), not %r"
                        % (mask,))
    return a


def boolean_mask(tensor, mask, axis=None, name="boolean_mask"):
    """tf.boolean_mask: the slices of tensor where mask is True, numpy's
    ``tensor[mask]`` for axis 0. mask has K >= 1 dimensions, which must
    equal tensor's dimensions axis .. axis + K - 1 (axis: an int or a 0-d
    int32 tensor, None meaning 0); those K dimensions are flattened into
    one, of the mask's True count, its rows in the row-major order of the
    mask's True positions, so the result has tensor's rank - K + 1
    dimensions. The usual mask is a bool tensor (``x > 0``), a numpy array
    or a list of bools; as TensorFlow's Where reads one, a mask of numbers
    (an int32 or float32 tensor, a numpy array, a list) is True where it is
    not 0. ``name`` changes nothing, as in eager TensorFlow.

    TensorFlow's errors in its words: a mask of 0 dimensions is ValueError
    "mask cannot be scalar."; dimensions that do not match are the
    ValueError of TensorFlow's shape check on ``tensor.shape[axis:axis + K]``
    (a Python slice, so an axis past the last dimension, or a negative one
    with axis + K >= 0, gives a shorter shape): "Shapes (4,) and (3,) are
    incompatible". TensorFlow's "Number of mask dimensions must be
    specified, ..." is for a graph tensor of unknown rank, which vdev (as
    eager TensorFlow) never has. As TensorFlow's, a negative axis with a mask
    of 2 or more dimensions gathers along the axis that axis names in the
    reshaped tensor (its rank is K - 1 smaller), not the masked one.

    The mask is read to the host, its True positions made int32 indices:
    this waits for the work that makes the mask (a graph-mode TensorFlow
    would keep the shape unknown until run time; eager TensorFlow's Where
    waits for the True count too). The slices are one GatherV2 along axis 0 of the tensor
    reshaped to [rows, ...] (the masked dimensions, with those before them,
    made one axis), so a tape differentiates it (the gradient, zeros but the
    rows taken, reaches a variable) and it runs where the tensor lives."""
    del name
    t = _t(tensor)
    m = _host_mask(mask)
    k = m.ndim
    if k == 0:
        raise ValueError("mask cannot be scalar.")
    if isinstance(axis, Tensor):
        axis = axis.numpy()
    axis = 0 if axis is None else _lib.index(axis, "axis")
    shape = t.shape
    masked = shape[axis:axis + k]
    if not masked.is_compatible_with(TensorShape(m.shape)):
        raise ValueError("Shapes %s and %s are incompatible" % (_tf_str(masked),
                                                                _tf_str(m.shape)))
    before, after = list(shape[:axis]), list(shape[axis + k:])
    size = int(np.prod(m.shape, dtype=np.int64))
    ids = np.flatnonzero(m.reshape(-1))  # != 0, as TensorFlow's Where
    n = len(ids)
    outer = int(np.prod(before, dtype=np.int64))
    if (axis < 0 and k > 1) or outer * size >= 2 ** 31:
        # TensorFlow gathers the reshaped tensor along `axis`, which for a
        # negative axis and a mask of 2+ dimensions is another axis than the
        # masked one; and rows past int32 cannot be one axis-0 gather's ids
        return gather(reshape(t, before + [size] + after), ids, axis=axis)
    if outer != 1:
        # the True positions in each of the `outer` blocks of `size` rows
        ids = (np.arange(outer, dtype=np.int64)[:, None] * size + ids).reshape(-1)
    rows = [outer * size] + after
    flat = t if list(shape) == rows else reshape(t, rows)
    got = gather(flat, ids.astype(np.int32))
    want = before + [n] + after
    return got if list(got.shape) == want else reshape(got, want)
