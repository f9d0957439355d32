"""Keras 2.11's ``SeparableConv2D`` (also ``SeparableConvolution2D``) and
``SeparableConv1D`` (``SeparableConvolution1D``: the same on [batch, steps,
channels], through the 2-D op on one row, as Keras's),
exported by ``vdev.layers``: ``activation(separable_conv2d(inputs,
depthwise_kernel, pointwise_kernel) + bias)`` over
``vdev.nn.separable_conv2d`` on channels_last inputs [batch, rows, cols,
channels]: each input channel convolved with its own depth_multiplier
filters, then a 1 x 1 convolution mixing the channels into ``filters``.
Its weights, in Keras's order and names: NAME/depthwise_kernel [kh, kw,
channels, depth_multiplier], NAME/pointwise_kernel [1, 1, channels *
depth_multiplier, filters] and NAME/bias [filters], made as Conv2D makes its
(on the layer's device, at ``input_shape`` or the first call, mirrored
under a strategy's scope; all three or none), the depthwise kernel drawn
with the layer's seed, the pointwise one with a seed derived from it
(_pointwise_seed) and the bias as Dense's. Keras's argument checks (its Conv
base's) in Keras's words; what vdev has not (channels_first, regularizers,
constraints) a ValueError naming it. Built on vdev's Conv2D, so Sequential
and functional models build and check it as they do a Conv2D.
"""

import contextlib
import hashlib
import numbers

from . import _ops, initializers, nn
from ._conv1d_layers import Conv1D
from ._conv_layers import Conv2D, _input_shape, _none_only
from ._device import device

__all__ = ["SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D",
           "SeparableConvolution2D"]


def _pointwise_seed(seed):
    """The seed of the pointwise kernel: the first 8 bytes (little-endian)
    of BLAKE2b over b"vdev.SeparableConv2D.pointwise:" and the layer's 64-bit
    seed, unrelated to every small seed and to the bias's (layers.py's
    _bias_seed)."""
    h = hashlib.blake2b(b"vdev.SeparableConv2D.pointwise:" + int(seed).to_bytes(8, "little"),
                        digest_size=8)
    return int.from_bytes(h.digest(), "little")


class SeparableConv2D(Conv2D):
    """Keras's SeparableConv2D: a depthwise convolution, then a pointwise
    (1 x 1) one, then the bias and the activation."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, pointwise_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None,
                 pointwise_constraint=None, bias_constraint=None, input_shape=None, seed=None,
                 name=None, dtype=None, trainable=True, groups=1):
        _none_only("SeparableConv2D", depthwise_regularizer=depthwise_regularizer,
                   pointwise_regularizer=pointwise_regularizer,
                   depthwise_constraint=depthwise_constraint,
                   pointwise_constraint=pointwise_constraint)
        if (isinstance(depth_multiplier, bool) or
                not isinstance(depth_multiplier, numbers.Integral) or depth_multiplier < 1):
            raise ValueError("vdev's SeparableConv2D takes an int depth_multiplier >= 1, not %r"
                             % (depth_multiplier,))
        if groups != 1:  # a key of Keras's config (its Conv base's), always 1
            raise ValueError("vdev's SeparableConv2D takes groups=1 only, not %r" % (groups,))
        # Conv2D checks the arguments Keras's Conv base checks, in its order,
        # and makes the depthwise and bias initializers; no weight is made
        # there (no input_shape given to it): build makes all three, below.
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate,
                         activation=activation, use_bias=use_bias,
                         kernel_initializer=depthwise_initializer,
                         bias_initializer=bias_initializer, bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         bias_constraint=bias_constraint, seed=seed, name=name, dtype=dtype,
                         trainable=trainable)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = self.kernel_initializer
        self.pointwise_initializer = initializers._get(pointwise_initializer,
                                                       _pointwise_seed(self.seed))
        if self.pointwise_initializer is None:
            raise ValueError("Could not interpret initializer identifier: None")
        self.pointwise_kernel = None
        self._batch_input_shape = _input_shape(self, input_shape, self._rank + 2)
        if self._batch_input_shape is not None and self._batch_input_shape[-1] is not None:
            self.build(self._batch_input_shape[-1])

    @property
    def depthwise_kernel(self):
        """The depthwise kernel [kh, kw, channels, depth_multiplier] (None
        until built)."""
        return self.kernel

    def build(self, channels):
        """Makes the three weights on the layer's device (mirrored under its
        strategy), all or none: the layer takes them once every one is
        made."""
        from .layers import _adopt, _initial
        if self.kernel is not None:
            return
        channels = self._channels_to_build(channels)
        dm = self.depth_multiplier
        wanted = [("depthwise_kernel", self.depthwise_initializer,
                   self.kernel_size + (channels, dm)),
                  ("pointwise_kernel", self.pointwise_initializer,
                   (1,) * self._rank + (channels * dm, self.filters))]
        if self.use_bias:
            wanted.append(("bias", self.bias_initializer, (self.filters,)))
        where = self._device or ("CPU:0" if self._strategy is not None else None)
        made = []
        with device(where) if where else contextlib.nullcontext():
            for suffix, init, shape in wanted:
                v = _adopt(_initial(init, shape), self._strategy)
                v.name = self.name + "/" + suffix
                made.append(v)
        self.kernel, self.pointwise_kernel = made[0], made[1]
        self.bias = made[2] if self.use_bias else None
        self._variables = made

    def get_config(self):
        """Keras 2.11's: Conv's config without the kernel's initializer,
        regularizer and constraint, with depth_multiplier and the depthwise
        and pointwise ones."""
        c = super().get_config()
        for k in ("kernel_initializer", "kernel_regularizer", "kernel_constraint"):
            del c[k]
        c["depth_multiplier"] = self.depth_multiplier
        c["depthwise_initializer"] = initializers.serialize(self.depthwise_initializer)
        c["pointwise_initializer"] = initializers.serialize(self.pointwise_initializer)
        for k in ("depthwise_regularizer", "pointwise_regularizer", "depthwise_constraint",
                  "pointwise_constraint"):
            c[k] = None
        return c

    def _convolve(self, x):
        return nn.separable_conv2d(x, self.kernel, self.pointwise_kernel,
                                   [1, self.strides[0], self.strides[1], 1],
                                   self.padding.upper(), dilations=list(self.dilation_rate))


class SeparableConv1D(SeparableConv2D):
    """Keras's SeparableConv1D on [batch, steps, channels] (or a batch of
    two dimensions): its weights depthwise_kernel [kernel_size, channels,
    depth_multiplier] and pointwise_kernel [1, channels * depth_multiplier,
    filters], applied as Keras applies them, by separable_conv2d on the
    input viewed as one row (the kernels with one row added); "causal"
    padding as Conv1D's."""

    _rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, pointwise_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None,
                 pointwise_constraint=None, bias_constraint=None, input_shape=None, seed=None,
                 name=None, dtype=None, trainable=True, groups=1):
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate,
                         depth_multiplier=depth_multiplier, activation=activation,
                         use_bias=use_bias, depthwise_initializer=depthwise_initializer,
                         pointwise_initializer=pointwise_initializer,
                         bias_initializer=bias_initializer,
                         depthwise_regularizer=depthwise_regularizer,
                         pointwise_regularizer=pointwise_regularizer,
                         bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         depthwise_constraint=depthwise_constraint,
                         pointwise_constraint=pointwise_constraint,
                         bias_constraint=bias_constraint, input_shape=input_shape, seed=seed,
                         name=name, dtype=dtype, trainable=trainable, groups=groups)

    def _convolve(self, x):
        causal = self.padding == "causal"
        if causal:
            x = Conv1D._causal_padded(self, x)
        shape = tuple(int(d) for d in x.shape)
        lead = shape[:-2]
        rows = 1
        for d in lead:
            rows *= d
        one_row = _ops.reshape(x, [rows, 1, shape[-2], shape[-1]])
        dk = _ops.reshape(self.kernel, (1,) + tuple(int(d) for d in self.kernel.shape))
        pk = _ops.reshape(self.pointwise_kernel,
                          (1,) + tuple(int(d) for d in self.pointwise_kernel.shape))
        s = self.strides[0]
        y = nn.separable_conv2d(one_row, dk, pk, [1, s, s, 1],
                                "VALID" if causal else self.padding.upper(),
                                dilations=[1, self.dilation_rate[0]])
        return _ops.reshape(y, list(lead) + [int(y.shape[2]), self.filters])


SeparableConvolution1D = SeparableConv1D
SeparableConvolution2D = SeparableConv2D
