"""Keras 2.11's ``TimeDistributed(layer)`` wrapper, exported by
``vdev.layers``: the layer applied to every step of [batch, steps, ...]
inputs, as Keras applies its own layers: the batch and step axes seen as
one (a Reshape view), one call of the layer on [batch * steps, ...], the
result seen as [batch, steps, ...] again, so the layer's weights are shared
by every step and its ops run once, not once a step. A mask [batch, steps]
goes to a layer whose call takes one as [batch * steps]; the output's mask
is the layer's own compute_mask of those, seen as [batch, steps], or the
input's where it gives none (Keras's: a layer that does not support masking
is Keras's TypeError then). Built, with the layer, when the wrapper is made
with ``input_shape``, added to a Sequential that knows its input, or a
functional model is made on it; the layer's weights keep their names.
Keras's checks in its words.
"""

import inspect

from . import _ops
from ._conv_layers import _base, _float32_only, _float_input, _input_shape
from ._tensor import Tensor

__all__ = ["TimeDistributed"]


class TimeDistributed(_base()):
    """Keras's TimeDistributed wrapper."""

    supports_masking = True  # Keras's (compute_mask below)
    _expects_mask = True

    def __init__(self, layer, input_shape=None, name=None, dtype=None, trainable=True):
        from .layers import Layer
        if not isinstance(layer, Layer):
            raise ValueError("Please initialize `TimeDistributed` layer with a "
                             "`tf.keras.layers.Layer` instance. Received: %s" % (layer,))
        _float32_only(self, dtype)
        super().__init__(name, trainable)
        self.layer = layer
        self._batch_input_shape = _input_shape(self, input_shape, None)
        if self._batch_input_shape is not None:
            self.build(self._batch_input_shape)

    def _sublayers(self):
        return [self.layer]

    @property
    def variables(self):
        return self.layer.variables

    @property
    def built(self):
        return getattr(self.layer, "built", True)

    @staticmethod
    def _check(shape):
        if len(shape) < 3:
            raise ValueError("`TimeDistributed` Layer should be passed an `input_shape ` with at "
                             "least 3 dimensions, received: %s" % (list(shape),))

    def build(self, input_shape):
        """Keras's: the layer built for one step's shape (batch None)."""
        from .models import _build
        shape = tuple(input_shape)
        self._check(shape)
        if not self.built:
            _build(self.layer, (None,) + shape[2:])

    def compute_output_shape(self, input_shape):
        """Keras's: the layer's output shape for one step, after (batch,
        steps)."""
        shape = tuple(input_shape)
        self._check(shape)
        self.build(shape)
        inner = tuple(self.layer.compute_output_shape((None,) + shape[2:]))
        return shape[:2] + inner[1:]

    def compute_mask(self, inputs, mask=None):
        """Keras's (its reshape path): the layer's mask of the merged steps,
        seen as [batch, steps, ...]; the input's where the layer gives none."""
        if mask is None:
            return None
        x = _ops._t(inputs)
        b, t = int(x.shape[0]), int(x.shape[1])
        inner = self.layer.compute_mask(self._merge(x), _ops.reshape(mask, [b * t]))
        if inner is None:
            return mask
        return _ops.reshape(inner, [b, t] + [int(d) for d in inner.shape[1:]])

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "layer": {"class_name": type(self.layer).__name__,
                          "config": self.layer.get_config()}}

    @classmethod
    def from_config(cls, config):
        from .layers import _keras_config
        from .models import _layer_from_config
        config = _keras_config(config)
        config["layer"] = _layer_from_config(config["layer"])
        return cls(**config)

    @staticmethod
    def _merge(x):
        shape = [int(d) for d in x.shape]
        return _ops.reshape(x, [shape[0] * shape[1]] + shape[2:])

    def __call__(self, inputs, training=None, mask=None):
        x = inputs if isinstance(inputs, Tensor) else _float_input(
            getattr(self.layer, "_device", None), inputs)
        shape = tuple(int(d) for d in x.shape)
        self._check(shape)
        self.build(shape)
        kwargs = {}
        takes = inspect.signature(type(self.layer).__call__).parameters
        if training is not None and "training" in takes:  # Keras's has_arg
            kwargs["training"] = training
        if mask is not None and getattr(self.layer, "_expects_mask", False):
            kwargs["mask"] = _ops.reshape(mask, [shape[0] * shape[1]])
        y = self.layer(self._merge(x), **kwargs)
        return _ops.reshape(y, list(shape[:2]) + [int(d) for d in y.shape[1:]])
