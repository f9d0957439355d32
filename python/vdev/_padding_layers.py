"""Keras 2.11's ``ZeroPadding1D`` and ``ZeroPadding2D``, exported by
``vdev.layers``: zeros added before and after the steps of [batch, steps,
features], or the rows and columns of channels_last [batch, rows, cols,
channels], by ``vdev.pad`` (so gradients flow to the input). Keras's
arguments, checks and words: ZeroPadding1D's ``padding`` an int or 2 ints
(left, right), ZeroPadding2D's an int, 2 ints (symmetric rows, symmetric
columns) or 2 pairs ((top, bottom), (left, right)); the input's rank
checked as Keras's InputSpec (ndim 3, ndim 4); channels_first a ValueError
naming what vdev lacks.
"""

import numbers

from . import _pad
from ._conv_layers import _channels_last, _check_rank, _float_input, _tuple
from ._core_layers import _Stateless

__all__ = ["ZeroPadding1D", "ZeroPadding2D"]


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
        x = _float_input(None, inputs)
        _check_rank(self, tuple(int(d) for d in x.shape), 3)
        return _pad.pad(x, [[0, 0], list(self.padding), [0, 0]])


class ZeroPadding2D(_Stateless):
    """Keras's ZeroPadding2D: zero rows above and below, zero columns left
    and right."""

    def __init__(self, padding=(1, 1), data_format=None, name=None, trainable=True,
                 input_shape=None, dtype=None):
        _channels_last(self, data_format)
        super().__init__(name, trainable, input_shape, dtype, ndim=4)
        if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
            p = int(padding)
            self.padding = ((p, p), (p, p))
        elif hasattr(padding, "__len__"):
            if len(padding) != 2:
                raise ValueError("`padding` should have two elements. Received: %s." % (padding,))
            self.padding = (_tuple(padding[0], 2, "1st entry of padding", allow_zero=True),
                            _tuple(padding[1], 2, "2nd entry of padding", allow_zero=True))
        else:
            raise ValueError("`padding` should be either an int, a tuple of 2 ints "
                             "(symmetric_height_pad, symmetric_width_pad), or a tuple of 2 "
                             "tuples of 2 ints ((top_pad, bottom_pad), (left_pad, right_pad)). "
                             "Received: %s." % (padding,))

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
        x = _float_input(None, inputs)
        _check_rank(self, tuple(int(d) for d in x.shape), 4)
        return _pad.pad(x, [[0, 0], list(self.padding[0]), list(self.padding[1]), [0, 0]])
