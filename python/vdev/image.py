"""``tf.image.resize`` as ``vdev.image.resize(images, size, method="bilinear",
preserve_aspect_ratio=False, antialias=False)`` for the methods "bilinear"
and "nearest", made of vdev's own ops as TensorFlow's kernels compute them
(ResizeBilinear and ResizeNearestNeighbor with half_pixel_centers=True, what
TensorFlow 2's resize runs). The source positions, the neighbours and the
weights are worked out on the host in float32 with the kernels' formulas
(scale in / out; bilinear: (i + 0.5) scale - 0.5, its floor and ceiling
clamped to the image, the weight its distance from the floor; nearest: the
floor of (i + 0.5) scale, clamped); the image is then gathered along its
columns and rows (vdev.gather) and mixed as TensorFlow mixes it, left +
(right - left) x_weight for the top and bottom rows, then top + (bottom -
top) y_weight, in float32, so the values are TensorFlow's CPU kernel's to
the bit, and the gradient (a recording tape) is that of gathers and
element-wise ops: each output's gradient shared out to its four
neighbours, ResizeBilinearGrad's values up to rounding. Bilinear resizes
give float32 (an int32 image is converted first, as the kernel reads it);
nearest keeps the dtype. TensorFlow's checks and words: ValueError
"'images' must have either 3 or 4 dimensions.", "'size' must be a 1-D
int32 Tensor", "'size' must be a 1-D Tensor of 2 elements: new_height,
new_width", "Resize method is not implemented: cubic"; the kernels'
InvalidArgumentError "output dimensions must be positive", "image must
have at least one channel", "input image must be of non-zero size". vdev
lacks the other methods (bicubic, area, lanczos3, lanczos5, gaussian,
mitchellcubic) and bilinear with antialias=True (TensorFlow's
ScaleAndTranslate): an UnimplementedError naming them.

Also ``flip_left_right`` and ``flip_up_down`` (a StridedSlice of stride -1
along the width or the height), ``central_crop(image, central_fraction)``
(TensorFlow's window: start int((size - size * fraction) / 2) on each side)
and ``per_image_standardization`` ((x - mean) / max(stddev, 1 / sqrt(N)) per
image, in TensorFlow's steps), for 3-D and 4-D images, with TensorFlow's
checks and words.
"""

import numpy as np

from . import _ops, errors
from ._tensor import Tensor, float32, int32

__all__ = ["ResizeMethod", "central_crop", "flip_left_right", "flip_up_down",
           "per_image_standardization", "resize"]


class ResizeMethod:
    """The names ``tf.image.ResizeMethod`` gives the methods (strings)."""
    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"
    AREA = "area"
    LANCZOS3 = "lanczos3"
    LANCZOS5 = "lanczos5"
    GAUSSIAN = "gaussian"
    MITCHELLCUBIC = "mitchellcubic"


_LACKING = (ResizeMethod.BICUBIC, ResizeMethod.AREA, ResizeMethod.LANCZOS3,
            ResizeMethod.LANCZOS5, ResizeMethod.GAUSSIAN, ResizeMethod.MITCHELLCUBIC)


def _size(size):
    """size as two Python ints, with TensorFlow's conversion errors."""
    if isinstance(size, Tensor):
        if size.dtype is not int32:
            raise ValueError("'size' must be a 1-D int32 Tensor")
        vals = np.asarray(size.numpy())
    else:
        try:
            vals = np.asarray(size)
        except (TypeError, ValueError):
            raise ValueError("'size' must be a 1-D int32 Tensor") from None
        if vals.dtype == object or vals.dtype.kind not in "iu" or \
                (vals.size and (vals.min() < -2**31 or vals.max() >= 2**31)):
            raise ValueError("'size' must be a 1-D int32 Tensor")
    if vals.shape != (2,):
        raise ValueError("'size' must be a 1-D Tensor of 2 elements: new_height, new_width")
    return int(vals[0]), int(vals[1])


def _aspect(h, w, size):
    """TensorFlow's preserve_aspect_ratio: the largest size within `size`
    of the image's aspect, computed in float32 and rounded half to even."""
    f = np.float32
    scale = min(f(size[0]) / f(h), f(size[1]) / f(w))
    return int(np.round(scale * f(h))), int(np.round(scale * f(w)))


def _bilinear_steps(n_in, n_out):
    """TensorFlow's compute_interpolation_weights with half-pixel centres,
    in float32: for each output index its lower and upper source indices
    and the weight of the upper one."""
    f = np.float32
    scale = f(n_in) / f(n_out)
    pos = (np.arange(n_out, dtype=f) + f(0.5)) * scale - f(0.5)
    floor = np.floor(pos)
    lower = np.maximum(floor.astype(np.int64), 0).astype(np.int32)
    upper = np.minimum(np.ceil(pos).astype(np.int64), n_in - 1).astype(np.int32)
    return lower, upper, (pos - floor).astype(f)


def _nearest_steps(n_in, n_out):
    """ResizeNearestNeighbor's source index with half-pixel centres:
    floor((i + 0.5) scale) in float32, clamped to the image."""
    f = np.float32
    scale = f(n_in) / f(n_out)
    pos = np.floor((np.arange(n_out, dtype=f) + f(0.5)) * scale).astype(np.int64)
    return np.clip(pos, 0, n_in - 1).astype(np.int32)


def _mix(a, b, weight):
    """a + (b - a) weight, TensorFlow's lerp, in that order."""
    return _ops.add(a, _ops.multiply(_ops.subtract(b, a), weight))


def _weights(w, axis):
    """The weights as a float32 tensor broadcasting along `axis` of NHWC."""
    shape = [1, 1, 1, 1]
    shape[axis] = len(w)
    return w.reshape(shape)


def _bilinear(x, h, w, oh, ow):
    left, right, xw = _bilinear_steps(w, ow)
    top, bottom, yw = _bilinear_steps(h, oh)
    with _ops._near(x):
        xw_t = _ops.constant(_weights(xw, 2))
        yw_t = _ops.constant(_weights(yw, 1))
    cols = _mix(_ops.gather(x, left, axis=2), _ops.gather(x, right, axis=2), xw_t)
    return _mix(_ops.gather(cols, top, axis=1), _ops.gather(cols, bottom, axis=1), yw_t)


def _nearest(x, h, w, oh, ow):
    rows = _ops.gather(x, _nearest_steps(h, oh), axis=1)
    return _ops.gather(rows, _nearest_steps(w, ow), axis=2)


def resize(images, size, method=ResizeMethod.BILINEAR, preserve_aspect_ratio=False,
           antialias=False, name=None):
    """``tf.image.resize``: images ([batch, height, width, channels] or
    [height, width, channels]) resized to size = (new_height, new_width)
    by bilinear interpolation (float32 out) or the nearest pixel (the
    images' dtype), half-pixel centres, as TensorFlow 2 resizes."""
    x = _ops._t(images)
    if x.ndim not in (3, 4):
        raise ValueError("'images' must have either 3 or 4 dimensions.")
    batched = x.ndim == 4
    if not batched:
        x = _ops.reshape(x, (1,) + tuple(int(d) for d in x.shape))
    _, h, w, c = (int(d) for d in x.shape)
    oh, ow = _size(size)
    if preserve_aspect_ratio and h > 0 and w > 0:
        oh, ow = _aspect(h, w, (oh, ow))
    if method == ResizeMethod.BILINEAR and antialias:
        raise errors.UnimplementedError(
            "vdev.image.resize: bilinear with antialias=True (TensorFlow's ScaleAndTranslate "
            "with a triangle kernel) is not supported; vdev resizes with antialias=False",
            "VDEV_ERR_UNSUPPORTED")
    if method in _LACKING:
        raise errors.UnimplementedError(
            "vdev.image.resize: method %r is not supported; vdev resizes with 'bilinear' or "
            "'nearest'" % (method,), "VDEV_ERR_UNSUPPORTED")
    if method not in (ResizeMethod.BILINEAR, ResizeMethod.NEAREST_NEIGHBOR):
        raise ValueError("Resize method is not implemented: {}".format(method))
    for ok, msg in ((oh > 0 and ow > 0, "output dimensions must be positive"),
                    (c > 0, "image must have at least one channel"),
                    (h > 0 and w > 0, "input image must be of non-zero size")):
        if not ok:
            raise errors.InvalidArgumentError(msg, "VDEV_ERR_INVALID_ARG")
    if method == ResizeMethod.NEAREST_NEIGHBOR:
        y = _nearest(x, h, w, oh, ow)
    else:
        if x.dtype is not float32:
            x = _ops._cast(x, float32)
        y = _bilinear(x, h, w, oh, ow)
    if not batched:
        y = _ops.reshape(y, (oh, ow, c))
    return y


def _at_least_3d(image):
    """TensorFlow's _CheckAtLeast3DImage: rank 3 or more, its inner three
    sizes above 0."""
    x = _ops._t(image)
    shape = tuple(int(d) for d in x.shape)
    if len(shape) < 3:
        raise ValueError("'image' (shape %s) must be at least three-dimensional." % (shape,))
    if any(d == 0 for d in shape[-3:]):
        raise ValueError("inner 3 dims of 'image.shape' must be > 0: %s" % (shape,))
    return x


def flip_left_right(image):
    """``tf.image.flip_left_right``: each image's columns in reverse order."""
    x = _at_least_3d(image)
    return x[..., ::-1, :]


def flip_up_down(image):
    """``tf.image.flip_up_down``: each image's rows in reverse order."""
    x = _at_least_3d(image)
    return x[..., ::-1, :, :]


def central_crop(image, central_fraction):
    """``tf.image.central_crop``: the central window of each image holding
    central_fraction of its height and of its width."""
    if central_fraction <= 0.0 or central_fraction > 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    x = _ops._t(image)
    if x.ndim not in (3, 4):
        raise ValueError("`image` should either be a Tensor with rank = 3 or rank = 4. Had "
                         "rank = %d." % x.ndim)
    if central_fraction == 1.0:
        return x
    h, w = (float(d) for d in tuple(x.shape)[-3:-1])
    top = int((h - h * central_fraction) / 2)
    left = int((w - w * central_fraction) / 2)
    return x[..., top:int(h) - top, left:int(w) - left, :]


def per_image_standardization(image):
    """``tf.image.per_image_standardization``: each image (its last three
    axes) less its mean, divided by its standard deviation, that at least
    1 / sqrt(its number of elements) (a uniform image stays finite); float32
    out."""
    x = _at_least_3d(image)
    if x.dtype is not float32:
        x = _ops._cast(x, float32)
    n = 1
    for d in tuple(x.shape)[-3:]:
        n *= int(d)
    axes = [-1, -2, -3]
    mean = _ops.reduce_mean(x, axis=axes, keepdims=True)
    std = _ops.sqrt(_ops.reduce_mean(_ops.square(_ops.subtract(x, mean)), axis=axes,
                                     keepdims=True))
    adjusted = _ops.maximum(std, float(np.float32(1.0) / np.sqrt(np.float32(n))))
    return _ops.divide(_ops.subtract(x, mean), adjusted)
