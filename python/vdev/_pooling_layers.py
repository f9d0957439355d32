"""Keras's global pooling layers, exported by ``vdev.layers``:
``GlobalAveragePooling1D`` and ``GlobalMaxPooling1D`` over the steps of
(batch, steps, features), ``GlobalAveragePooling2D`` and
``GlobalMaxPooling2D`` over the rows and columns of (batch, rows, cols,
channels), channels_last only (channels_first is a ValueError naming it, as
the other layers refuse what vdev has not). ``keepdims`` is Keras 2.11's:
False gives (batch, features), True keeps each pooled axis with size 1. The
means are one reduce_mean over the steps (the rows and columns taken as one
axis, a view), so each is a single reduction as TensorFlow's mean over
[1, 2] is. The maxima are max_pool2d with one window the input's size (the
steps as rows of one column): the same values as TensorFlow's reduce_max,
and the same gradient but where several elements tie for the maximum, where
TensorFlow's reduce_max splits the gradient equally among them and
max_pool2d gives it all to the first. Over no elements (rows or
columns of size 0) the mean is NaN and the maximum -inf, as TensorFlow's
reduce_mean and reduce_max give them. Each layer has Keras's
compute_output_shape (through which a Sequential or a functional model
builds the layers after it), get_config and InputSpec's rank check; the 1D
layers refuse a shape with no steps as Keras 2.11 does when it builds them.
Masks are not taken (vdev's layers pass none).
"""

from . import _ops, nn
from ._device import current_device
from ._conv_layers import (_base, _channels_last, _check_rank, _float32_only, _float_input,
                           _input_shape)

__all__ = ["GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalMaxPooling1D",
           "GlobalMaxPooling2D"]


class _GlobalPooling(_base()):
    _ndim = None  # the rank the layer takes (Keras's InputSpec)

    def __init__(self, data_format=None, keepdims=False, name=None, trainable=True,
                 input_shape=None, dtype=None):
        _float32_only(self, dtype)
        _channels_last(self, data_format)
        super().__init__(name, trainable)
        self._device = current_device()  # where a NumPy input is made (Dense's rule)
        self.data_format = "channels_last"
        self.keepdims = keepdims
        self._built = False
        self._batch_input_shape = _input_shape(self, input_shape, self._ndim)

    def build(self, input_shape):
        """Keras 2.11's build: the 1D layers refuse a shape with no steps."""
        self._built = True

    def _maybe_build(self, shape):
        if not self._built:
            self.build(shape)

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, features), or with keepdims each pooled axis
        kept with size 1."""
        shape = tuple(input_shape)
        _check_rank(self, shape, self._ndim)
        self._maybe_build(shape)
        if self.keepdims:
            return (shape[0],) + (1,) * (self._ndim - 2) + (shape[-1],)
        return (shape[0], shape[-1])

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable, "dtype": "float32"}
        if self._batch_input_shape is not None:
            config["batch_input_shape"] = self._batch_input_shape
        config.update({"data_format": self.data_format, "keepdims": self.keepdims})
        return config

    @classmethod
    def from_config(cls, config):
        from .layers import _keras_config
        return cls(**_keras_config(config))

    def __call__(self, inputs, training=None, mask=None):
        if mask is not None:
            raise ValueError("vdev's %s takes mask=None only: Keras's call takes no mask"
                             % type(self).__name__)
        x = _float_input(self._device, inputs)
        shape = tuple(int(d) for d in x.shape)
        _check_rank(self, shape, self._ndim)
        self._maybe_build(shape)
        y = self._pool(x, shape)
        out = (shape[0],) + ((1,) * (self._ndim - 2) if self.keepdims else ()) + (shape[-1],)
        return _ops.reshape(y, list(out))


class _GlobalPooling1D(_GlobalPooling):
    _ndim = 3

    def build(self, input_shape):
        shape = list(input_shape)
        if shape[1] == 0:
            raise ValueError("Incorrect input shape %s with dimension 0 at reduction axis 1."
                             % (shape,))
        self._built = True


class _GlobalPooling2D(_GlobalPooling):
    _ndim = 4


def _mean_over_steps(x, steps, features):
    """The mean over axis 1 of x seen as [batch, steps, features] (the
    batch given, not -1, which an input of no elements leaves undecided):
    NaN where there are no steps, as TensorFlow's reduce_mean."""
    batch = int(x.shape[0])
    return _ops.reduce_mean(_ops.reshape(x, [batch, steps, features]), axis=1)


def _max_window(x, rows, cols, channels):
    """The maximum over rows x cols of x seen as [batch, rows, cols,
    channels]: one max_pool2d window the input's size. A window of no
    elements (a size 0) gives -inf, as TensorFlow's reduce_max over an
    empty axis, from the input's sum (zeros) so it stays on its device
    and tape."""
    batch = int(x.shape[0])
    if rows == 0 or cols == 0:
        zeros = _ops.reduce_sum(_ops.reshape(x, [batch, rows * cols, channels]), axis=1)
        return _ops.add(zeros, float("-inf"))
    x = _ops.reshape(x, [batch, rows, cols, channels])
    return nn.max_pool2d(x, [rows, cols], [rows, cols], "VALID")


class GlobalAveragePooling1D(_GlobalPooling1D):
    """The mean over the steps of (batch, steps, features), as Keras's
    GlobalAveragePooling1D; with a mask (the input's, or ``mask=``), the
    sum of the steps it keeps over their count (Keras's: NaN for a row
    with none)."""

    supports_masking = True  # Keras's: its output has no mask
    _expects_mask = True

    def compute_mask(self, inputs, mask=None):
        return None

    def __call__(self, inputs, training=None, mask=None):
        if mask is None:
            return super().__call__(inputs, training)
        from ._keras_masks import as_mask
        x = _float_input(self._device, inputs)
        shape = tuple(int(d) for d in x.shape)
        _check_rank(self, shape, self._ndim)
        self._maybe_build(shape)
        m = _ops.reshape(as_mask(mask, x, shape[:2]), [shape[0], shape[1], 1])
        total = _ops.reduce_sum(_ops.multiply(x, m), axis=1, keepdims=self.keepdims)
        return _ops.divide(total, _ops.reduce_sum(m, axis=1, keepdims=self.keepdims))

    def _pool(self, x, shape):
        return _mean_over_steps(x, shape[1], shape[2])


class GlobalAveragePooling2D(_GlobalPooling2D):
    """The mean over the rows and columns of (batch, rows, cols, channels),
    as Keras's GlobalAveragePooling2D."""

    def _pool(self, x, shape):
        return _mean_over_steps(x, shape[1] * shape[2], shape[3])


class GlobalMaxPooling1D(_GlobalPooling1D):
    """The maximum over the steps of (batch, steps, features), as Keras's
    GlobalMaxPooling1D (see the module's text for the gradient of ties)."""

    def _pool(self, x, shape):
        return _max_window(x, shape[1], 1, shape[2])


class GlobalMaxPooling2D(_GlobalPooling2D):
    """The maximum over the rows and columns of (batch, rows, cols,
    channels), as Keras's GlobalMaxPooling2D (see the module's text for the
    gradient of ties)."""

    def _pool(self, x, shape):
        return _max_window(x, shape[1], shape[2], shape[3])


# Keras's aliases
GlobalAvgPool1D = GlobalAveragePooling1D
GlobalAvgPool2D = GlobalAveragePooling2D
GlobalMaxPool1D = GlobalMaxPooling1D
GlobalMaxPool2D = GlobalMaxPooling2D
