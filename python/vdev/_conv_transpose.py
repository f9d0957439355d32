"""Keras 2.11's ``Conv2DTranspose`` and ``Conv1DTranspose`` (exported by
``vdev.layers``), over ``vdev.nn.conv2d_transpose`` and ``conv1d_transpose``
(channels_last only; the 1-D layer is the 2-D one with one spatial
dimension, its kernel [kernel_size, filters, in]). As in Keras it is a
Conv2D: the same arguments and checks (and what vdev lacks refused the same
way), plus ``output_padding`` (an int or 2 ints, each >= 0 and below its
stride: Keras's "Strides must be greater than output padding." otherwise).
Its kernel is [kh, kw, filters, in] (the output's channels first, as
TensorFlow's conv2d_transpose takes it) and its bias [filters], made as
Conv2D makes its weights. The output's size per dimension is Keras's
conv_utils.deconv_output_length: with the window's dilated size k = (k - 1)
d + 1 and output_padding None, "valid" gives n s + max(k - s, 0) and "same"
n s; with output_padding p, (n - 1) s + k - 2 pad + p, pad k // 2 for "same"
and 0 for "valid"; a size whose conv2d does not give back n is the op's
TensorFlow error at the call, as in Keras. A dilation_rate whose two values
differ is Keras's ValueError at the call (Keras runs dilated transposed
convolutions through tf.nn.atrous_conv2d_transpose, which has one rate);
vdev runs them as conv2d_transpose with those dilations, the same values.
"""

from . import _ops, nn
from ._conv_layers import (Conv2D, _check_rank, _input_shape, _none_only, _tuple,
                           _weighted_input)

__all__ = ["Conv1DTranspose", "Conv2DTranspose"]


def _deconv_length(n, k, padding, output_padding, s, d):
    """Keras's conv_utils.deconv_output_length; None for an unknown size."""
    if n is None:
        return None
    k = k + (k - 1) * (d - 1)
    if output_padding is None:
        return n * s + max(k - s, 0) if padding == "valid" else n * s
    pad = k // 2 if padding == "same" else 0
    return (n - 1) * s + k - 2 * pad + output_padding


class Conv2DTranspose(Conv2D):
    """``activation(conv2d_transpose(inputs, kernel) + bias)``, as Keras's
    Conv2DTranspose on channels_last inputs [batch, height, width,
    channels]: [batch, out_height, out_width, filters]."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", output_padding=None,
                 data_format=None, dilation_rate=(1, 1), activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, input_shape=None, seed=None,
                 name=None, dtype=None, trainable=True, groups=1):
        _none_only(type(self).__name__, kernel_regularizer=kernel_regularizer,
                   bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                   kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        if groups != 1:
            raise ValueError("vdev's %s takes groups=1 only, not %r"
                             % (type(self).__name__, groups))
        # Conv2D's checks, in Keras's order; the input shape is taken below,
        # once output_padding has passed too, as Keras builds nothing here
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, 1,
                         activation, use_bias, kernel_initializer, bias_initializer,
                         seed=seed, name=name, dtype=dtype, trainable=trainable)
        self.output_padding = output_padding
        if output_padding is not None:
            self.output_padding = _tuple(output_padding, self._rank, "output_padding",
                                         allow_zero=True)
            for stride, out_pad in zip(self.strides, self.output_padding):
                if out_pad >= stride:
                    raise ValueError("Strides must be greater than output padding. Received "
                                     "strides=%s, output_padding=%s."
                                     % (self.strides, self.output_padding))
        if input_shape is not None:
            shape = _input_shape(self, input_shape)
            self._check_input_shape(shape)
            self._batch_input_shape = shape
            self.build(shape[-1])

    def _check_input_shape(self, shape):
        """Keras's checks of an input shape: its InputSpec (min_ndim=4
        before the layer is built, then ndim=4 and the channels it was built
        for, on axis 3; Conv1DTranspose's 3 and axis 2) and its build's
        ("Inputs should have rank 4", the channels known)."""
        shape = tuple(shape)
        nd = self._rank + 2
        if self.kernel is None:
            self._check_input_rank(shape)
            if shape[nd - 1] is None:
                raise ValueError("The channel dimension of the inputs to `%s` should be defined. "
                                 "The input_shape received is %s, where axis %d (0-based) is the "
                                 "channel dimension, which found to be `None`."
                                 % (type(self).__name__, shape, nd - 1))
            return
        want = int(self.kernel.shape[-1])
        if len(shape) != nd:
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "ndim=%d, found ndim=%d. Full shape received: %s"
                             % (self.name, nd, len(shape), shape))
        if shape[nd - 1] is not None and shape[nd - 1] != want:
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "axis %d of input shape to have value %d, but received input with "
                             "shape %s" % (self.name, nd - 1, want, shape))

    def _check_input_rank(self, shape):
        """Keras's InputSpec (min_ndim=4; 3 for Conv1DTranspose), then its
        build's rank check."""
        nd = self._rank + 2
        if len(shape) > nd:
            raise ValueError("Inputs should have rank %d. Received input_shape=%s." % (nd, shape))
        _check_rank(self, shape, nd)

    def _weight_shapes(self, channels):
        """The kernel [kh, kw, filters, channels] and the bias [filters]."""
        return self.kernel_size + (self.filters, channels), (self.filters,)

    def _output_size(self, shape):
        op = self.output_padding or (None,) * self._rank
        return tuple(_deconv_length(shape[1 + d], self.kernel_size[d], self.padding, op[d],
                                    self.strides[d], self.dilation_rate[d])
                     for d in range(self._rank))

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, rows, cols, filters), each size Keras's
        deconv_output_length (None for an unknown one)."""
        shape = tuple(input_shape)
        self._check_input_rank(shape)
        return (shape[0],) + self._output_size(shape) + (self.filters,)

    def get_config(self):
        config = super().get_config()
        config["output_padding"] = self.output_padding
        return config

    def __call__(self, inputs, training=None, mask=None):
        x = _weighted_input(self, inputs)
        shape = tuple(int(d) for d in x.shape)
        self._check_input_shape(shape)
        if self.kernel is None:
            self.build(shape[-1])
        if max(self.dilation_rate) > 1 and len(set(self.dilation_rate)) > 1:
            raise ValueError("Expected the 2 dimensions of the `dilation_rate` argument to be "
                             "equal to each other. Received: dilation_rate=%s"
                             % (self.dilation_rate,))
        out = (shape[0],) + self._output_size(shape) + (self.filters,)
        y = self._transpose(x, list(out))
        if self.bias is not None:
            y = _ops.add(y, self.bias)
        return self.activation(y) if self.activation else y

    def _transpose(self, x, out):
        return nn.conv2d_transpose(x, self.kernel, out, list(self.strides),
                                   self.padding.upper(), dilations=list(self.dilation_rate))


class Conv1DTranspose(Conv2DTranspose):
    """``activation(conv1d_transpose(inputs, kernel) + bias)``, as Keras's
    Conv1DTranspose on channels_last inputs [batch, steps, channels]:
    [batch, out_steps, filters]; its kernel [kernel_size, filters, in]."""

    _rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None,
                 data_format=None, dilation_rate=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, input_shape=None, seed=None,
                 name=None, dtype=None, trainable=True, groups=1):
        super().__init__(filters, kernel_size, strides, padding, output_padding, data_format,
                         dilation_rate, activation, use_bias, kernel_initializer,
                         bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint,
                         input_shape=input_shape, seed=seed, name=name, dtype=dtype,
                         trainable=trainable, groups=groups)

    def _transpose(self, x, out):
        return nn.conv1d_transpose(x, self.kernel, out, self.strides[0], self.padding.upper(),
                                   dilations=self.dilation_rate[0])
