"""Keras 2.11's ``Normalization(axis=-1, mean=None, variance=None,
invert=False)`` preprocessing layer, exported by ``vdev.layers``: inputs
shifted and scaled feature by feature, ``(x - mean) / max(sqrt(variance),
1e-7)`` (``invert``: ``mean + x * max(sqrt(variance), 1e-7)``), the mean and
variance given, or learnt by ``adapt(data)``: the data in batches (32 rows
by default, ``batch_size``), each batch's moments over every axis but the
kept ones (``axis``: the features), merged into the running ones as Keras's
update_state merges them (the lack-of-fit sum of squares, weighted by the
counts), in float32 as Keras's; a later ``adapt`` starts again. The layer's
weights after an adapt are Keras's: ``mean`` and ``variance`` of the kept
axes' shape and ``count`` (int32 here: vdev's widest integer; Keras's is
int64), none trainable. Inputs are cast to float32 first. Keras's checks,
config keys and errors in its words.
"""

import contextlib
import numbers

import numpy as np

from . import _ops, _strategy_context
from ._conv_layers import _base, _float32_only, _float_input
from ._device import current_device, device
from ._tensor import Tensor, Variable, float32, int32

__all__ = ["Normalization"]

_EPSILON = 1e-7  # Keras's backend.epsilon()


class Normalization(_base()):
    """Keras's Normalization layer (see the module)."""

    supports_masking = False

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, input_shape=None,
                 name=None, dtype=None, trainable=True):
        _float32_only(self, dtype)
        super().__init__(name, trainable)
        if axis is None:
            axis = ()
        elif isinstance(axis, numbers.Integral):
            axis = (int(axis),)
        else:
            axis = tuple(int(a) for a in axis)
        self.axis = axis
        if isinstance(mean, Variable):
            raise ValueError("Normalization does not support passing a Variable for the `mean` "
                             "init arg.")
        if isinstance(variance, Variable):
            raise ValueError("Normalization does not support passing a Variable for the "
                             "`variance` init arg.")
        if (mean is not None) != (variance is not None):
            raise ValueError("When setting values directly, both `mean` and `variance` must be "
                             "set. Got mean: %s and variance: %s" % (mean, variance))
        self.input_mean, self.input_variance = mean, variance
        self.invert = bool(invert)
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self.mean = self.variance = None
        self.adapt_mean = self.adapt_variance = self.count = None
        self._shape = None
        if input_shape is not None:
            self.build((None,) + tuple(input_shape))

    @property
    def built(self):
        return self._shape is not None

    def build(self, input_shape):
        """Keras's: the kept axes (known sizes), and the weights (adapt) or
        the constants (mean and variance given)."""
        from .layers import _adopt
        shape = list(input_shape)
        ndim = len(shape)
        if any(a < -ndim or a >= ndim for a in self.axis):
            raise ValueError("All `axis` values must be in the range [-ndim, ndim). Found ndim: "
                             "`%d`, axis: %s" % (ndim, self.axis))
        keep = sorted(a if a >= 0 else a + ndim for a in self.axis)
        for d in keep:
            if shape[d] is None:
                raise ValueError("All `axis` values to be kept must have known shape. Got axis: "
                                 "%s, input shape: %s, with unknown axis at index: %d"
                                 % (self.axis, shape, d))
        self._keep = keep
        self._reduce = [d for d in range(ndim) if d not in keep]
        self._broadcast = [shape[d] if d in keep else 1 for d in range(ndim)]
        kept = tuple(shape[d] for d in keep)
        where = self._device or ("CPU:0" if self._strategy is not None else None)
        with device(where) if where else contextlib.nullcontext():
            if self.input_mean is None:
                made = []
                for name, value in (("mean", np.zeros(kept, np.float32)),
                                    ("variance", np.ones(kept, np.float32)),
                                    ("count", np.zeros((), np.int32))):
                    v = _adopt(_ops.convert_to_tensor(value), self._strategy)
                    v.trainable = False
                    v.name = "%s/%s" % (self.name, name)
                    made.append(v)
                self.adapt_mean, self.adapt_variance, self.count = made
                self._variables = made
            else:
                mean = (np.asarray(self.input_mean, np.float64) * np.ones(kept)).astype(np.float32)
                var = (np.asarray(self.input_variance, np.float64) * np.ones(kept)).astype(
                    np.float32)
                self.mean = _ops.convert_to_tensor(mean.reshape(self._broadcast))
                self.variance = _ops.convert_to_tensor(var.reshape(self._broadcast))
        self._shape = tuple(shape)
        self._finalize()

    def _finalize(self):
        """Keras's finalize_state: the broadcast mean and variance of the
        adapted weights."""
        if self.input_mean is not None or not self.built:
            return
        self.mean = _ops.reshape(self.adapt_mean, self._broadcast)
        self.variance = _ops.reshape(self.adapt_variance, self._broadcast)

    def reset_state(self):
        """Keras's: the adapted state back to mean 0, variance 1, count 0."""
        if self.input_mean is not None or not self.built:
            return
        self.adapt_mean.assign(np.zeros(tuple(self.adapt_mean.shape), np.float32))
        self.adapt_variance.assign(np.ones(tuple(self.adapt_variance.shape), np.float32))
        self.count.assign(np.zeros((), np.int32))

    def update_state(self, data):
        """Keras's: one batch's moments merged into the running ones."""
        if self.input_mean is not None:
            raise ValueError("Cannot `adapt` a Normalization layer that is initialized with "
                             "static `mean` and `variance`, you passed mean %s and variance %s."
                             % (self.input_mean, self.input_variance))
        if not self.built:
            raise RuntimeError("`build` must be called before `update_state`.")
        x = np.asarray(data.numpy() if isinstance(data, Tensor) else data).astype(np.float32)
        axes = tuple(self._reduce)
        batch_mean = np.mean(x, axis=axes, dtype=np.float32)
        keep_dims = np.mean(x, axis=axes, keepdims=True, dtype=np.float32)
        batch_var = np.mean(np.square(x - keep_dims), axis=axes, dtype=np.float32)
        batch_count = int(np.prod([x.shape[d] for d in self._reduce])) if axes else 1
        count = int(self.count.numpy())
        total = batch_count + count
        w = np.float32(batch_count) / np.float32(total)
        rest = np.float32(1.0) - w
        mean = self.adapt_mean.numpy()
        var = self.adapt_variance.numpy()
        total_mean = mean * rest + batch_mean * w
        total_var = ((var + (mean - total_mean) ** 2) * rest
                     + (batch_var + (batch_mean - total_mean) ** 2) * w)
        self.adapt_mean.assign(total_mean.astype(np.float32))
        self.adapt_variance.assign(total_var.astype(np.float32))
        self.count.assign(np.asarray(total, np.int32))

    def adapt(self, data, batch_size=None, steps=None):
        """Keras's PreprocessingLayer.adapt over an array (or tensor): built
        for its shape, the state reset, then each batch of ``batch_size``
        rows (32) through update_state, ``steps`` batches at most."""
        if isinstance(data, Tensor):
            data = data.numpy()
        data = np.asarray(data)
        if data.ndim == 0:
            raise ValueError("vdev's Normalization adapts to an array of rows, not a scalar")
        if not self.built:
            self.build((None,) + data.shape[1:])
        self.reset_state()
        size = 32 if batch_size is None else int(batch_size)
        starts = range(0, data.shape[0], size)
        for i, b in enumerate(starts):
            if steps is not None and i >= steps:
                break
            self.update_state(data[b:b + size])
        self._finalize()

    def compute_output_shape(self, input_shape):
        """The input's shape (the layer built for it, as Keras builds it in
        a model)."""
        if not self.built:
            self.build(tuple(input_shape))
        return tuple(input_shape)

    def get_config(self):
        def listify(v):
            return v.tolist() if isinstance(v, np.ndarray) else v
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "axis": self.axis, "invert": self.invert, "mean": listify(self.input_mean),
                "variance": listify(self.input_variance)}

    def __call__(self, inputs, training=None):
        x = inputs if isinstance(inputs, Tensor) else _float_input(self._device, inputs)
        if x.dtype is int32:
            x = _ops._cast(x, float32)
        if not self.built:
            self.build(tuple(int(d) for d in x.shape))
        scale = _ops.maximum(_ops.sqrt(self.variance), _EPSILON)
        if self.invert:
            return _ops.add(self.mean, _ops.multiply(x, scale))
        return _ops.divide(_ops.subtract(x, self.mean), scale)
