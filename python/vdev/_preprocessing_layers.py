"""Keras 2.11's image preprocessing layers that compute the same thing every
call, exported by ``vdev.layers``: ``Rescaling(scale, offset=0.0)`` (inputs
* scale + offset), ``Resizing(height, width, interpolation="bilinear",
crop_to_aspect_ratio=False)`` (``vdev.image.resize``; with
crop_to_aspect_ratio, Keras's smart_resize: the largest centred window of
the target's aspect, then the resize) and ``CenterCrop(height, width)`` (the
centred window of that size, or smart_resize when the image is smaller).
Images are [height, width, channels] or [batch, height, width, channels]
(channels last), converted to float32 first, Keras's compute dtype; the
arithmetic is Keras's step for step (the window's size and start in
float32, truncated, as its casts), so the values are Keras's and the
gradient flows through the ops (a slice, vdev.image.resize's gathers).
Keras's config keys and errors ("Value not recognized for `interpolation`:
..."); the interpolations vdev.image.resize lacks are its
UnimplementedError at the call.
"""

import numpy as np

from . import _ops, image
from ._conv_layers import _float_input
from ._core_layers import _Stateless, _floatx

__all__ = ["CenterCrop", "Rescaling", "Resizing"]

# Keras's image_utils._TF_INTERPOLATION_METHODS, in its order
_INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian",
                   "mitchellcubic")


def _interpolation(name):
    """Keras's get_interpolation: the name in lower case, else its
    NotImplementedError."""
    low = name.lower()
    if low not in _INTERPOLATIONS:
        raise NotImplementedError("Value not recognized for `interpolation`: %s. Supported "
                                  "values are: dict_keys(%r)" % (low, list(_INTERPOLATIONS)))
    return low


def _image(x):
    """x as a float32 tensor of rank 3 or 4, and its height and width."""
    if x.ndim not in (3, 4):
        raise ValueError("Expected an image array with shape `(height, width, channels)`, or "
                         "`(batch_size, height, width, channels)`, but got input with incorrect "
                         "rank, of shape %s." % (tuple(int(d) for d in x.shape),))
    return int(x.shape[-3]), int(x.shape[-2])


def smart_resize(x, size, interpolation="bilinear"):
    """Keras's image_utils.smart_resize: the largest window of size's aspect
    centred in the image (its size and start computed in float32 and
    truncated, as Keras's casts), resized to size."""
    if len(size) != 2:
        raise ValueError("Expected `size` to be a tuple of 2 integers, but got: %s." % (size,))
    x = _ops._t(x)
    h, w = _image(x)
    th, tw = (int(v) for v in size)
    f = np.float32
    crop_h = min(h, int(f(w * th) / f(tw)))
    crop_w = min(w, int(f(h * tw) / f(th)))
    top = int(f(h - crop_h) / f(2))
    left = int(f(w - crop_w) / f(2))
    window = x[..., top:top + crop_h, left:left + crop_w, :]
    return image.resize(window, (th, tw), method=interpolation)


def _hw_shape(input_shape, height, width):
    shape = list(input_shape)
    shape[-3], shape[-2] = height, width
    return tuple(shape)


class Rescaling(_Stateless):
    """Keras's Rescaling: inputs * scale + offset, in float32."""

    def __init__(self, scale, offset=0.0, name=None, trainable=True, input_shape=None,
                 dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        self.scale = scale
        self.offset = offset

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        return self._config(scale=self.scale, offset=self.offset)

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        return _ops.add(_ops.multiply(x, _floatx(self.scale)), _floatx(self.offset))


class Resizing(_Stateless):
    """Keras's Resizing: vdev.image.resize to (height, width), or Keras's
    smart_resize with crop_to_aspect_ratio=True."""

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
                 name=None, trainable=True, input_shape=None, dtype=None):
        self._method = _interpolation(interpolation)
        super().__init__(name, trainable, input_shape, dtype)
        self.height = height
        self.width = width
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = crop_to_aspect_ratio

    def compute_output_shape(self, input_shape):
        return _hw_shape(input_shape, self.height, self.width)

    def get_config(self):
        return self._config(height=self.height, width=self.width,
                            interpolation=self.interpolation,
                            crop_to_aspect_ratio=self.crop_to_aspect_ratio)

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        size = [self.height, self.width]
        if self.crop_to_aspect_ratio:
            return smart_resize(x, size, self._method)
        return image.resize(x, size, method=self._method)


class CenterCrop(_Stateless):
    """Keras's CenterCrop: the centred (height, width) window, its start
    the halved difference truncated; an image smaller than that either way
    is smart_resize'd to it instead."""

    def __init__(self, height, width, name=None, trainable=True, input_shape=None, dtype=None):
        super().__init__(name, trainable, input_shape, dtype)
        self.height = height
        self.width = width

    def compute_output_shape(self, input_shape):
        return _hw_shape(input_shape, self.height, self.width)

    def get_config(self):
        return self._config(height=self.height, width=self.width)

    def __call__(self, inputs, training=None):
        x = _float_input(self._device, inputs)
        h, w = _image(x)
        dh, dw = h - self.height, w - self.width
        if dh >= 0 and dw >= 0:
            top, left = int(dh / 2), int(dw / 2)
            return x[..., top:top + self.height, left:left + self.width, :]
        return smart_resize(x, [self.height, self.width])
