"""Keras 2.11's ``DepthwiseConv2D``, exported by ``vdev.layers``:
``activation(depthwise_conv2d(inputs, depthwise_kernel) + bias)`` over
``vdev.nn.depthwise_conv2d`` on channels_last inputs [batch, rows, cols,
channels]. Its kernel [kh, kw, channels, depth_multiplier] (named
NAME/depthwise_kernel, as Keras names it) and bias [channels *
depth_multiplier] are made as Conv2D makes its weights (on the layer's
device, at ``input_shape`` or the first call, mirrored under a strategy's
scope), the kernel drawn with the layer's seed by ``depthwise_initializer``;
Keras's argument checks (those of its Conv base) in Keras's words when the
layer is made, and what vdev has not (channels_first, regularizers,
constraints) a ValueError naming it. It is built on vdev's Conv2D, so
Sequential and functional models build and check it as they do a Conv2D.
"""

import numbers

from . import initializers, nn
from ._conv_layers import Conv2D, _check_rank, _input_shape, _none_only, _window_length

__all__ = ["DepthwiseConv2D"]


class DepthwiseConv2D(Conv2D):
    """Keras's DepthwiseConv2D: each input channel convolved with its own
    depth_multiplier filters (no sum over channels), then the bias and the
    activation."""

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1,
                 data_format=None, dilation_rate=(1, 1), activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 depthwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, bias_constraint=None, input_shape=None, seed=None,
                 name=None, dtype=None, trainable=True, groups=1):
        _none_only("DepthwiseConv2D", depthwise_regularizer=depthwise_regularizer,
                   depthwise_constraint=depthwise_constraint)
        if (isinstance(depth_multiplier, bool) or
                not isinstance(depth_multiplier, numbers.Integral) or depth_multiplier < 0):
            raise ValueError("vdev's DepthwiseConv2D takes an int depth_multiplier >= 0, not %r"
                             % (depth_multiplier,))
        if groups != 1:  # a key of Keras's config (its Conv base's), always 1
            raise ValueError("vdev's DepthwiseConv2D takes groups=1 only, not %r" % (groups,))
        # Conv2D checks the arguments Keras's Conv base checks, in its order,
        # and makes the initializers; the weights are made here, below.
        super().__init__(1, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate,
                         activation=activation, use_bias=use_bias,
                         kernel_initializer=depthwise_initializer,
                         bias_initializer=bias_initializer, bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         bias_constraint=bias_constraint, seed=seed, name=name, dtype=dtype,
                         trainable=trainable)
        self.filters = None
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = self.kernel_initializer
        self._batch_input_shape = _input_shape(self, input_shape, 4)
        if self._batch_input_shape is not None and self._batch_input_shape[-1] is not None:
            self.build(self._batch_input_shape[-1])

    @property
    def depthwise_kernel(self):
        """The kernel [kh, kw, channels, depth_multiplier] (None until built)."""
        return self.kernel

    def _weight_shapes(self, channels):
        """The kernel [kh, kw, channels, depth_multiplier] and the bias
        [channels * depth_multiplier]."""
        return (self.kernel_size + (channels, self.depth_multiplier),
                (channels * self.depth_multiplier,))

    def build(self, channels):
        """Conv2D's build, the kernel named as Keras names it."""
        made = self.kernel is None
        super().build(channels)
        if made:
            self.kernel.name = self.name + "/depthwise_kernel"

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, rows, cols, channels * depth_multiplier), None
        for an unknown size."""
        shape = tuple(input_shape)
        _check_rank(self, shape, 4)
        rc = tuple(_window_length(shape[1 + d], self.kernel_size[d], self.padding,
                                  self.strides[d], self.dilation_rate[d]) for d in range(2))
        out = None if shape[3] is None else shape[3] * self.depth_multiplier
        return (shape[0],) + rc + (out,)

    def get_config(self):
        """Keras 2.11's: Conv's config without filters and the kernel's
        initializer, regularizer and constraint, with depth_multiplier and
        the depthwise ones."""
        c = super().get_config()
        for k in ("filters", "kernel_initializer", "kernel_regularizer", "kernel_constraint"):
            del c[k]
        c["depth_multiplier"] = self.depth_multiplier
        c["depthwise_initializer"] = initializers.serialize(self.depthwise_initializer)
        c["depthwise_regularizer"] = None
        c["depthwise_constraint"] = None
        return c

    def _convolve(self, x):
        return nn.depthwise_conv2d(x, self.kernel, [1, self.strides[0], self.strides[1], 1],
                                   self.padding.upper(), dilations=list(self.dilation_rate))
