"""Keras 2.11's ``ZeroPadding1D``, ``ZeroPadding2D``, ``Cropping1D`` and
``Cropping2D``, exported by ``vdev.layers``: zeros added before and after
(by ``vdev.pad``), or entries cut off at both ends (a strided slice), of the
steps of [batch, steps, features] or the rows and columns of channels_last
[batch, rows, cols, channels]; gradients flow to the input. Keras's
arguments, checks and words: the 1-D layers' amount an int or 2 ints
(before, after), the 2-D layers' an int, 2 ints (symmetric rows, symmetric
columns) or 2 pairs ((top, bottom), (left, right)); the input's rank
checked as Keras's InputSpec (ndim 3, ndim 4); a cropping that leaves
nothing is Keras's ValueError at the call; channels_first a ValueError
naming what vdev lacks.
"""

import numbers

from . import _pad
from ._conv_layers import _channels_last, _check_rank, _float_input, _tuple
from ._core_layers import _Stateless

__all__ = ["Cropping1D", "Cropping2D", "ZeroPadding1D", "ZeroPadding2D"]


def _pairs2(value, what):
    """Keras's ZeroPadding2D / Cropping2D argument: an int, 2 ints or 2
    pairs, as ((top, bottom), (left, right)); what is "padding" or
    "cropping"."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        v = int(value)
        return ((v, v), (v, v))
    if hasattr(value, "__len__"):
        if len(value) != 2:
            raise ValueError("`%s` should have two elements. Received: %s." % (what, value))
        return (_tuple(value[0], 2, "1st entry of " + what, allow_zero=True),
                _tuple(value[1], 2, "2nd entry of " + what, allow_zero=True))
    short = "pad" if what == "padding" else "crop"
    raise ValueError("`%s` should be either an int, a tuple of 2 ints (symmetric_height_%s, "
                     "symmetric_width_%s), or a tuple of 2 tuples of 2 ints ((top_%s, "
                     "bottom_%s), (left_%s, right_%s)). Received: %s."
                     % ((what,) + (short,) * 6 + (value,)))


class ZeroPadding1D(_Stateless):
    """Keras's ZeroPadding1D: padding[0] zero steps before, padding[1]
    after."""

    def __init__(self, padding=1, name=None, trainable=True, input_shape=None, dtype=None):
        super().__init__(name, trainable, input_shape, dtype, ndim=3)
        self.padding = _tuple(padding, 2, "padding", allow_zero=True)

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, steps + left + right, features)."""
        shape = tuple(input_shape)
        _check_rank(self, shape, 3)
        n = None if shape[1] is None else shape[1] + sum(self.padding)
        return (shape[0], n, shape[2])

    def get_config(self):
        return self._config(padding=self.padding)

    def __call__(self, inputs, training=None, mask=None):
        x = _float_input(self._device, inputs)
        _check_rank(self, tuple(int(d) for d in x.shape), 3)
        return _pad.pad(x, [[0, 0], list(self.padding), [0, 0]])


class ZeroPadding2D(_Stateless):
    """Keras's ZeroPadding2D: zero rows above and below, zero columns left
    and right."""

    def __init__(self, padding=(1, 1), data_format=None, name=None, trainable=True,
                 input_shape=None, dtype=None):
        _channels_last(self, data_format)
        super().__init__(name, trainable, input_shape, dtype, ndim=4)
        self.padding = _pairs2(padding, "padding")

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, rows + top + bottom, cols + left + right,
        channels)."""
        shape = tuple(input_shape)
        _check_rank(self, shape, 4)
        rc = tuple(None if shape[1 + d] is None else shape[1 + d] + sum(self.padding[d])
                   for d in range(2))
        return (shape[0],) + rc + (shape[3],)

    def get_config(self):
        return self._config(padding=self.padding, data_format="channels_last")

    def __call__(self, inputs, training=None, mask=None):
        x = _float_input(self._device, inputs)
        _check_rank(self, tuple(int(d) for d in x.shape), 4)
        return _pad.pad(x, [[0, 0], list(self.padding[0]), list(self.padding[1]), [0, 0]])


def _shape_text(shape):
    return "(%s)" % ", ".join(str(d) for d in shape)


class Cropping1D(_Stateless):
    """Keras's Cropping1D: cropping[0] steps cut off the start,
    cropping[1] the end."""

    def __init__(self, cropping=(1, 1), name=None, trainable=True, input_shape=None,
                 dtype=None):
        super().__init__(name, trainable, input_shape, dtype, ndim=3)
        self.cropping = _tuple(cropping, 2, "cropping", allow_zero=True)

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, steps - start - end, features)."""
        shape = tuple(input_shape)
        _check_rank(self, shape, 3)
        n = None if shape[1] is None else shape[1] - sum(self.cropping)
        return (shape[0], n, shape[2])

    def get_config(self):
        return self._config(cropping=self.cropping)

    def __call__(self, inputs, training=None, mask=None):
        x = _float_input(self._device, inputs)
        shape = tuple(int(d) for d in x.shape)
        _check_rank(self, shape, 3)
        if sum(self.cropping) >= shape[1]:
            raise ValueError("cropping parameter of Cropping layer must be greater than the "
                             "input shape. Received: inputs.shape=%s, and cropping=%s"
                             % (_shape_text(shape), self.cropping))
        return x[:, self.cropping[0]:shape[1] - self.cropping[1], :]


class Cropping2D(_Stateless):
    """Keras's Cropping2D: rows cut off the top and bottom, columns off the
    left and right."""

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, name=None, trainable=True,
                 input_shape=None, dtype=None):
        _channels_last(self, data_format)
        super().__init__(name, trainable, input_shape, dtype, ndim=4)
        self.cropping = _pairs2(cropping, "cropping")

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, rows - top - bottom, cols - left - right,
        channels); a size of 0 or None gives None, as Keras's."""
        shape = tuple(input_shape)
        _check_rank(self, shape, 4)
        rc = tuple(shape[1 + d] - sum(self.cropping[d]) if shape[1 + d] else None
                   for d in range(2))
        return (shape[0],) + rc + (shape[3],)

    def get_config(self):
        return self._config(cropping=self.cropping, data_format="channels_last")

    def __call__(self, inputs, training=None, mask=None):
        x = _float_input(self._device, inputs)
        shape = tuple(int(d) for d in x.shape)
        _check_rank(self, shape, 4)
        (t, b), (l, r) = self.cropping
        if t + b >= shape[1] or l + r >= shape[2]:
            raise ValueError("Argument `cropping` must be greater than the input shape. "
                             "Received: inputs.shape=%s, and cropping=%s"
                             % (_shape_text(shape), self.cropping))
        return x[:, t:shape[1] - b, l:shape[2] - r, :]
