"""Keras 2.11's ``UpSampling1D`` and ``UpSampling2D``, exported by
``vdev.layers``: each step of [batch, steps, features] repeated ``size``
times, or each row and column of channels_last [batch, rows, cols, channels]
repeated ``size[0]`` and ``size[1]`` times, as gathers of the repeated
indices along those axes (vdev.gather), so the gradient of an input element
is the sum over its copies, as TensorFlow's ResizeNearestNeighborGrad gives
it for whole factors; UpSampling2D with interpolation="bilinear" is
``vdev.image.resize`` to the multiplied size, as Keras's resize_images runs
``tf.image.resize``. Keras's arguments, checks and words (``size`` through
normalize_tuple, the input's rank through its InputSpec, its list of
interpolations); the interpolations vdev.image.resize lacks (area, bicubic,
gaussian, lanczos3, lanczos5, mitchellcubic) are an UnimplementedError, and
channels_first a ValueError, naming what vdev lacks.
"""

import numbers

import numpy as np

from . import _ops, errors, image
from ._conv_layers import _channels_last, _check_rank, _float_input, _tuple
from ._core_layers import _Stateless

__all__ = ["UpSampling1D", "UpSampling2D"]

# Keras's interpolations, in its order (its error lists them so)
_INTERPOLATIONS = ("area", "bicubic", "bilinear", "gaussian", "lanczos3", "lanczos5",
                   "mitchellcubic", "nearest")


def _repeat(x, n, times, axis):
    """x with each index of axis (n of them) repeated `times` times."""
    return _ops.gather(x, np.repeat(np.arange(n, dtype=np.int32), times), axis=axis)


class UpSampling1D(_Stateless):
    """Keras's UpSampling1D: each step repeated size times."""

    def __init__(self, size=2, name=None, trainable=True, input_shape=None, dtype=None):
        super().__init__(name, trainable, input_shape, dtype, ndim=3)
        if isinstance(size, bool) or not isinstance(size, numbers.Integral):
            raise ValueError("vdev's UpSampling1D takes an int size, not %r" % (size,))
        self.size = int(size)

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, size * steps, features)."""
        shape = tuple(input_shape)
        _check_rank(self, shape, 3)
        return (shape[0], None if shape[1] is None else self.size * shape[1], shape[2])

    def get_config(self):
        return self._config(size=self.size)

    def __call__(self, inputs, training=None, mask=None):
        x = _float_input(self._device, inputs)
        shape = tuple(int(d) for d in x.shape)
        _check_rank(self, shape, 3)
        if self.size < 1:  # TensorFlow's repeat of a negative count, vdev's words
            raise ValueError("vdev's UpSampling1D repeats each step size times; size %d is "
                             "below 1" % self.size)
        return _repeat(x, shape[1], self.size, 1)


class UpSampling2D(_Stateless):
    """Keras's UpSampling2D: with interpolation="nearest" each row repeated
    size[0] times and each column size[1] times; with "bilinear" the image
    resized to that size by vdev.image.resize."""

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", name=None,
                 trainable=True, input_shape=None, dtype=None):
        _channels_last(self, data_format)
        super().__init__(name, trainable, input_shape, dtype, ndim=4)
        self.size = _tuple(size, 2, "size")
        if interpolation not in _INTERPOLATIONS:
            raise ValueError("`interpolation` argument should be one of: %s. Received: \"%s\"."
                             % (", ".join('"%s"' % i for i in _INTERPOLATIONS), interpolation))
        if interpolation not in ("nearest", "bilinear"):
            raise errors.UnimplementedError(
                "vdev's UpSampling2D takes interpolation 'nearest' or 'bilinear', not %r: "
                "vdev.image.resize lacks it" % (interpolation,), "VDEV_ERR_UNSUPPORTED")
        self.interpolation = interpolation

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, size[0] * rows, size[1] * cols, channels)."""
        shape = tuple(input_shape)
        _check_rank(self, shape, 4)
        rc = tuple(None if shape[1 + d] is None else self.size[d] * shape[1 + d]
                   for d in range(2))
        return (shape[0],) + rc + (shape[3],)

    def get_config(self):
        return self._config(size=self.size, data_format="channels_last",
                            interpolation=self.interpolation)

    def __call__(self, inputs, training=None, mask=None):
        x = _float_input(self._device, inputs)
        shape = tuple(int(d) for d in x.shape)
        _check_rank(self, shape, 4)
        if self.interpolation == "bilinear":
            return image.resize(x, (shape[1] * self.size[0], shape[2] * self.size[1]))
        return _repeat(_repeat(x, shape[1], self.size[0], 1), shape[2], self.size[1], 2)
