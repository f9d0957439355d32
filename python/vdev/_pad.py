"""``tf.pad`` as ``vdev.pad(tensor, paddings, mode="CONSTANT",
constant_values=0)`` (vdev/ops.h: vdev_pad, made of ConcatV2 ops, so its
gradient is the input's part of the output's; modes "REFLECT" and
"SYMMETRIC" are vdev_mirror_pad, made of StridedSlice and ConcatV2 ops, whose
gradient folds the mirrored parts back as TensorFlow's MirrorPadGrad), and
the explicit padding of
``vdev.nn.conv2d`` and ``depthwise_conv2d`` (a list of four [before, after]
pairs, TensorFlow's form), which is that pad followed by the "VALID"
convolution: the same values as TensorFlow's Conv2D with
padding="EXPLICIT". paddings is an int matrix of [before, after] rows, one
per axis (a list, a numpy array or an int32 tensor); constant_values a
scalar of the tensor's kind. TensorFlow's refusals in its words:
InvalidArgumentError "paddings must be a matrix with 2 columns: [4]",
"The first dimension of paddings must be the rank of inputs[3,2], [2,2]",
"Paddings must be non-negative: -1 0", and MirrorPad's "paddings must be
less than the dimension size: 3, 0 not less than 3" (REFLECT), "paddings
must be no greater than the dimension size: 4, 0 greater than 3"
(SYMMETRIC); ValueError for an unknown mode. As in TensorFlow, the mode is
taken in any case and constant_values is not used by the mirror modes.
"""

import numbers

import numpy as np

from . import _lib, errors
from ._lib import lib
from ._ops import _new, _t
from ._tensor import Tensor, int32

__all__ = ["pad"]


def _paddings(paddings):
    """paddings as a flat list of ints (before, after, ...), and its rows."""
    vals = paddings.numpy() if isinstance(paddings, Tensor) else np.asarray(paddings)
    if vals.dtype.kind not in "iu" and not (vals.size == 0 and vals.dtype.kind == "f"):
        raise errors.InvalidArgumentError(
            "Value for attr 'Tpaddings' of %s is not in the list of allowed values: int32, int64"
            % ("float" if vals.dtype.kind == "f" else vals.dtype.name), "VDEV_ERR_INVALID_ARG")
    if vals.ndim != 2 or vals.shape[1] != 2:
        raise errors.InvalidArgumentError(
            "paddings must be a matrix with 2 columns: [%s]" % ",".join(str(d) for d in vals.shape),
            "VDEV_ERR_INVALID_ARG")
    return [int(v) for v in vals.reshape(-1)], vals.shape[0]


def _scalar(value, tensor):
    """constant_values as the number vdev_pad takes (a double) for tensor."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise errors.InvalidArgumentError(
                "constant_values must be a scalar. Shape of constant_values is [%s]"
                % ",".join(str(int(d)) for d in value.shape), "VDEV_ERR_INVALID_ARG")
        value = value.numpy().item()
    elif np.ndim(value) != 0:
        raise errors.InvalidArgumentError(
            "constant_values must be a scalar. Shape of constant_values is [%s]"
            % ",".join(str(d) for d in np.shape(value)), "VDEV_ERR_INVALID_ARG")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number)):
        raise TypeError("Cannot convert %r to EagerTensor of dtype %s"
                        % (value, tensor.dtype.name))
    if tensor.dtype is int32 and float(value) != int(value):
        raise TypeError("Cannot convert %r to EagerTensor of dtype int32" % (value,))
    return float(value)


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """tensor with paddings[d][0] entries before and paddings[d][1] after
    along each axis d, as ``tf.pad``: filled with constant_values (mode
    "CONSTANT"), or the tensor's own entries mirrored at its edges, the edge
    left out ("REFLECT") or repeated ("SYMMETRIC")."""
    mode = mode.upper() if isinstance(mode, str) else mode
    if mode not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError('Value of argument `mode` expected to be one of "CONSTANT", "REFLECT", '
                         'or "SYMMETRIC". Received `mode` = %s' % (mode,))
    x = _t(tensor)
    flat, rows = _paddings(paddings)
    arr, _ = _lib.shape_array(flat)
    if mode != "CONSTANT":
        return _new(lib.vdev_mirror_pad(x._handle, arr, rows, mode.encode()))
    value = _scalar(constant_values, x)
    return _new(lib.vdev_pad(x._handle, arr, rows, value))


def explicit(fn, padding):
    """TensorFlow's _convert_padding and its Conv2D kernel's checks of an
    explicit padding (a list of 4 [before, after] pairs, NHWC): the pad of
    the spatial dimensions, [[0, 0], [top, bottom], [left, right], [0, 0]]."""
    for i, p in enumerate(padding):
        if not isinstance(p, (list, tuple)):
            raise ValueError("When `padding` is a list, each element of `padding` must be a "
                             "list/tuple of size 2. Received: padding=%s with element at index "
                             "%d of type %s" % (padding, i, type(p)))
        if len(p) != 2:
            raise ValueError("When `padding` is a list, each element of `padding` must be a "
                             "list/tuple of size 2. Received: padding=%s with element at index "
                             "%d of size %d" % (padding, i, len(p)))
    if len(padding) != 4:
        raise ValueError("When `padding` is a list, it must be of size 4. Received: padding=%s "
                         "of size %d" % (padding, len(padding)))
    flat = []
    for p in padding:
        for v in p:
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError("Expected int for argument 'explicit_paddings' not %r." % (v,))
            flat.append(int(v))
    if any(v < 0 for v in flat):
        raise errors.InvalidArgumentError("%s: All elements of explicit_paddings must be "
                                          "nonnegative" % fn, "VDEV_ERR_INVALID_ARG")
    if flat[0] or flat[1] or flat[6] or flat[7]:
        raise errors.InvalidArgumentError("%s: Nonzero explicit padding in the batch or depth "
                                          "dimensions is not supported" % fn,
                                          "VDEV_ERR_INVALID_ARG")
    return [[0, 0], flat[2:4], flat[4:6], [0, 0]]
