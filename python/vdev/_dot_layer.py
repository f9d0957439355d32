"""Keras 2.11's ``Dot(axes, normalize=False)`` merge layer, exported by
``vdev.layers`` (and its functional form ``vdev.layers.dot``): the dot
products of two inputs' samples along one axis each (``axes``: an int for
both, or a pair; negative counted from the end), as Keras's
backend.batch_dot: [batch, a..., k] and [batch, k, b...] (the summed axes
moved there) give [batch, a..., b...], one BatchMatMulV2 (inputs of 2 or 3
dimensions: vdev's batched product), [batch, 1] when nothing else is left.
``normalize`` divides each input by its L2 norm along its axis first
(tf.linalg.l2_normalize: the sum of squares held at 1e-12 at least), so
the products are cosine similarities. Keras's checks, shapes, config and
errors in its words; its output has no mask.
"""

from . import _ops
from ._merge_layers import _Merge, _shapes, _tensors

__all__ = ["Dot", "dot"]


def _axis(axis, rank):
    return axis % rank if axis < 0 else axis


class Dot(_Merge):
    """Keras's Dot layer (see the module)."""

    def __init__(self, axes, normalize=False, name=None, trainable=True, dtype=None):
        if not isinstance(axes, int):
            if not isinstance(axes, (list, tuple)):
                raise TypeError("Invalid type for argument `axes`: it should be a list or an "
                                "int. Received: axes=%s" % (axes,))
            if len(axes) != 2:
                raise ValueError("Invalid format for argument `axes`: it should contain two "
                                 "elements. Received: axes=%s" % (axes,))
            if not isinstance(axes[0], int) or not isinstance(axes[1], int):
                raise ValueError("Invalid format for argument `axes`: list elements should be "
                                 "integers. Received: axes=%s" % (axes,))
        super().__init__(name, trainable, dtype)
        self.axes, self.normalize = axes, bool(normalize)

    def _pair(self, rank1, rank2):
        if isinstance(self.axes, int):
            return [_axis(self.axes, rank1), _axis(self.axes, rank2)]
        return [_axis(self.axes[0], rank1), _axis(self.axes[1], rank2)]

    def _check(self, input_shape):
        """Keras's Dot.build: two inputs, their summed sizes equal."""
        if not isinstance(input_shape, list) or len(input_shape) != 2 or not isinstance(
                input_shape[0], tuple):
            raise ValueError("A `Dot` layer should be called on a list of 2 inputs. Received: "
                             "input_shape=%s" % (input_shape,))
        s1, s2 = input_shape
        a1, a2 = self._pair(len(s1), len(s2))
        if s1[a1] != s2[a2]:
            raise ValueError("Incompatible input shapes: axis values %s (at axis %d) != %s (at "
                             "axis %d). Full input shapes: %s, %s"
                             % (s1[a1], a1, s2[a2], a2, s1, s2))

    def compute_output_shape(self, input_shape):
        """Keras's: the first input's axes but the summed one, then the
        second's but its batch and summed ones; [batch, 1] for nothing."""
        shapes = [tuple(s) for s in input_shape]
        self._check(shapes)
        a1, a2 = self._pair(len(shapes[0]), len(shapes[1]))
        s1, s2 = list(shapes[0]), list(shapes[1])
        s1.pop(a1)
        s2.pop(a2)
        s2.pop(0)
        out = s1 + s2
        return tuple(out + [1] if len(out) == 1 else out)

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        return dict(super().get_config(), axes=self.axes, normalize=self.normalize)

    @staticmethod
    def _l2_normalize(x, axis):
        ss = _ops.reduce_sum(_ops.multiply(x, x), axis=axis, keepdims=True)
        return _ops.divide(x, _ops.sqrt(_ops.maximum(ss, 1e-12)))

    def __call__(self, inputs, training=None, mask=None):
        shapes = _shapes(inputs)
        if not isinstance(shapes, list) or len(shapes) != 2:
            raise ValueError("A `Dot` layer should be called on exactly 2 inputs. Received: "
                             "inputs=%s" % (inputs,))
        self._check(shapes)
        x1, x2 = _tensors(inputs, self._device)
        for x in (x1, x2):
            if x.ndim not in (2, 3):
                raise ValueError("vdev's Dot takes inputs of 2 or 3 dimensions (its batched "
                                 "product's), not %s" % (tuple(x.shape),))
        a1, a2 = self._pair(x1.ndim, x2.ndim)
        if self.normalize:
            x1, x2 = self._l2_normalize(x1, a1), self._l2_normalize(x2, a2)
        b = int(x1.shape[0])
        # x1 as [batch, m, k] (k the summed axis), x2 as [batch, k, n]
        if x1.ndim == 2:
            left = _ops.reshape(x1, [b, 1, int(x1.shape[1])])
        else:
            left = x1 if a1 == 2 else _ops.transpose(x1, (0, 2, 1))
        if x2.ndim == 2:
            right = _ops.reshape(x2, [b, int(x2.shape[1]), 1])
        else:
            right = x2 if a2 == 1 else _ops.transpose(x2, (0, 2, 1))
        out = _ops.matmul(left, right)
        shape = list(self.compute_output_shape(shapes))
        return _ops.reshape(out, [b] + [int(d) for d in shape[1:]])


def dot(inputs, axes, normalize=False, **kwargs):
    """Keras's functional form: ``Dot(axes, normalize, **kwargs)(inputs)``."""
    return Dot(axes=axes, normalize=normalize, **kwargs)(inputs)
