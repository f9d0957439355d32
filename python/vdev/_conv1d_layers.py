"""Keras's 1-D convolutional layers, exported by ``vdev.layers``:
``Conv1D`` (also ``Convolution1D``), ``MaxPooling1D`` (``MaxPool1D``) and
``AveragePooling1D`` (``AvgPool1D``), over vdev.nn's conv1d, max_pool1d and
avg_pool1d, channels_last only: inputs [batch, steps, channels]. They are
vdev's Conv2D and 2-D pools with one spatial dimension, so they take Keras's
arguments in Keras's order with Keras's checks and words (a ``kernel_size``
"must be a tuple of 1 integers"), make their weights as Conv2D makes its
(kernel [kernel_size, channels, filters], bias [filters]), and Sequential
and functional models build and check them as they do a Conv2D. Conv1D
takes ``padding="causal"`` as Keras does: the input is padded with
dilation_rate * (kernel_size - 1) zeros before its first step (a concat),
then convolved with "VALID", so output step t sees only input steps up to
t. A Conv1D input may have a batch of two dimensions ([b1, b2, steps,
channels], as Keras's convolutions keep extra batch dimensions); the pools
take [batch, steps, channels] only, as Keras's.
"""

from . import _ops, nn
from ._conv_layers import Conv2D, _Pooling2D
from ._creation import zeros

__all__ = ["AveragePooling1D", "AvgPool1D", "Conv1D", "Convolution1D", "MaxPool1D",
           "MaxPooling1D"]


class Conv1D(Conv2D):
    """``activation(conv1d(inputs, kernel) + bias)``, as Keras's Conv1D on
    channels_last inputs [batch, steps, channels]."""

    _rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid",
                 data_format="channels_last", dilation_rate=1, groups=1, activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, input_shape=None, seed=None,
                 name=None, dtype=None, trainable=True):
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate, groups=groups,
                         activation=activation, use_bias=use_bias,
                         kernel_initializer=kernel_initializer,
                         bias_initializer=bias_initializer,
                         kernel_regularizer=kernel_regularizer,
                         bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                         input_shape=input_shape, seed=seed, name=name, dtype=dtype,
                         trainable=trainable)

    def _causal_padded(self, x):
        """x with dilation_rate * (kernel_size - 1) zeros before its first
        step (Keras's _compute_causal_padding), made beside x."""
        left = self.dilation_rate[0] * (self.kernel_size[0] - 1)
        if left == 0:
            return x
        shape = tuple(int(d) for d in x.shape)
        with _ops._near(x):
            pad = zeros(shape[:-2] + (left, shape[-1]))
        return _ops.concat([pad, x], axis=len(shape) - 2)

    def _convolve(self, x):
        causal = self.padding == "causal"
        if causal:
            x = self._causal_padded(x)
        return nn.conv1d(x, self.kernel, self.strides[0], "VALID" if causal else
                         self.padding.upper(), dilations=self.dilation_rate[0])


class _Pooling1D(_Pooling2D):
    _rank = 1

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format="channels_last",
                 name=None, trainable=True, input_shape=None, dtype=None):
        super().__init__(pool_size, strides, padding, data_format, name=name,
                         trainable=trainable, input_shape=input_shape, dtype=dtype)


class MaxPooling1D(_Pooling1D):
    """The maximum over each pool_size window of steps, as Keras's
    MaxPooling1D (strides default to pool_size)."""
    _op = staticmethod(nn.max_pool1d)


class AveragePooling1D(_Pooling1D):
    """The mean over each pool_size window of steps (of the steps inside the
    input, under "same"), as Keras's AveragePooling1D."""
    _op = staticmethod(nn.avg_pool1d)


Convolution1D = Conv1D
MaxPool1D = MaxPooling1D
AvgPool1D = AveragePooling1D
