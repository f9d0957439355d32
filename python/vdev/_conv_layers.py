"""Keras's convolutional layers, exported by ``vdev.layers``: ``Conv2D``,
``MaxPooling2D``, ``AveragePooling2D`` and ``Flatten``, over vdev.nn's ops
(channels_last only). Conv2D makes its kernel [kh, kw, in, filters] and bias
[filters] as Dense makes its weights: when the input's channels are known
(``input_shape``, or the first call), on the device scope the layer was made
in (mirrored under a strategy's scope), the kernel drawn with the layer's
seed and the bias with the seed Dense derives from it. Keras's arguments are
taken in Keras's order and checked when the layer is made, as Keras checks
them (sizes > 0, strides >= 0, strides and dilation_rate not both above 1);
what vdev has not (channels_first, groups, regularizers, constraints) is a
ValueError naming it, as Dense refuses its. Each layer takes input_shape (its batch_input_shape is
(None,) + input_shape) and has Keras's compute_output_shape, through which
a Sequential model builds its layers and summarizes them.
"""

import numbers

from . import _ops, _strategy_context, initializers, nn, random
from ._device import current_device, device
from ._tensor import Tensor, float32, int32

__all__ = ["AveragePooling2D", "Conv2D", "Flatten", "MaxPooling2D"]


def _tuple(value, n, name, allow_zero=False):
    """Keras's normalize_tuple(value, n, name, allow_zero): an int or n ints,
    each > 0 (>= 0 with allow_zero), else Keras's ValueError."""
    msg = "The `%s` argument must be a tuple of %d integers. Received: %s=%r" % (name, n, name,
                                                                                  value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        t = (int(value),) * n
    else:
        try:
            t = tuple(value)
        except TypeError:
            t = None
        if t is None or len(t) != n or not all(isinstance(v, numbers.Integral) and
                                               not isinstance(v, bool) for v in t):
            raise ValueError(msg)
        t = tuple(int(v) for v in t)
    bad = {v for v in t if v < 0 or (v == 0 and not allow_zero)}
    if bad:
        raise ValueError("%s including %s that does not satisfy the requirement `%s`."
                         % (msg, bad, ">= 0" if allow_zero else "> 0"))
    return t


def _input_shape(layer, input_shape, ndim=None):
    """Keras's input_shape= (the shape of one example): the layer's
    batch_input_shape, (None,) + input_shape; None when not given. ndim, when
    given, is the rank the layer takes (Keras's InputSpec), checked here as
    Keras checks it when it builds the layer."""
    if input_shape is None:
        return None
    if isinstance(input_shape, numbers.Integral):
        input_shape = (input_shape,)
    shape = (None,) + tuple(None if d is None else int(d) for d in input_shape)
    if ndim is not None:
        _check_rank(layer, shape, ndim)
    return shape


def _check_rank(layer, shape, ndim):
    """Keras's InputSpec check of a shape's rank: ndim=4 for the pools (3
    for the 1-D ones), min_ndim=4 for Conv2D, 3 for Conv1D (vdev's tensors
    have 4 dimensions at most: a Conv1D input may have two batch
    dimensions)."""
    minimum = isinstance(layer, Conv2D)
    if minimum and len(shape) > 4:
        raise ValueError("vdev's %s takes inputs of %s, not %d: vdev's tensors have 4 at most. "
                         "Full shape received: %s"
                         % (type(layer).__name__,
                            "4 dimensions (batch, rows, cols, channels)" if ndim == 4 else
                            "3 or 4 dimensions (batch, steps, channels, with one batch "
                            "dimension more in 4)", len(shape), tuple(shape)))
    if len(shape) < ndim or (len(shape) != ndim and not minimum):
        raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                         "%sndim=%d, found ndim=%d. Full shape received: %s"
                         % (layer.name, "min_" if minimum else "", ndim, len(shape),
                            tuple(shape)))


def _window_length(n, k, padding, s, d=1):
    """Keras's conv_output_length: an output size for a window of k taps d
    apart (it spans (k - 1) d + 1), None where the input's is unknown."""
    if n is None:
        return None
    n = n if padding in ("same", "causal") else n - ((k - 1) * d + 1) + 1
    return (n + s - 1) // s


def _padding(value):
    p = value.lower() if isinstance(value, str) else value
    if p not in ("valid", "same"):
        raise ValueError('The `padding` argument must be a list/tuple or one of "valid", '
                         '"same" (or "causal", only for `Conv1D). Received: %s' % (value,))
    return p.upper()


def _channels_last(layer, data_format):
    if data_format not in (None, "channels_last"):
        raise ValueError("vdev's %s takes data_format=None or 'channels_last' only, not %r: "
                         "vdev's convolutions are NHWC" % (type(layer).__name__, data_format))


def _float_input(layer_device, x):
    """x as a float32 tensor (a value made on the layer's device when no
    scope is open, as Dense does)."""
    if not isinstance(x, Tensor):
        if layer_device is not None and current_device() is None:
            with device(layer_device):
                return _ops.convert_to_tensor(x, float32)
        return _ops.convert_to_tensor(x, float32)
    return x if x.dtype is float32 else _ops._cast(x, float32)


def _none_only(layer_name, **args):
    """vdev's refusal of the Keras arguments it has not (regularizers,
    constraints) given anything but None: a ValueError naming the first,
    in the order given."""
    for arg, x in args.items():
        if x is not None:
            raise ValueError("vdev's %s takes %s=None only, not %r" % (layer_name, arg, x))


def _weighted_input(layer, x):
    """The input of a layer with a kernel, as a float32 tensor: a value (not
    a tensor) made beside the kernel once it is built, else on the layer's
    device (_float_input)."""
    if not isinstance(x, Tensor) and layer.kernel is not None:
        with _ops._near(layer.kernel):
            return _ops.convert_to_tensor(x, float32)
    return _float_input(layer._device, x)


def _float32_only(layer, dtype):
    if dtype is not None and getattr(dtype, "name", dtype) != "float32":
        raise ValueError("vdev's %s takes dtype=None or 'float32' only, not %r: vdev's layers "
                         "compute in float32" % (type(layer).__name__, dtype))


def _base():
    from .layers import Layer
    return Layer


class Conv2D(_base()):
    """``activation(conv2d(inputs, kernel) + bias)``, as Keras's Conv2D on
    channels_last inputs [batch, height, width, channels]."""

    _rank = 2  # spatial dimensions (Conv1D's 1)

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, input_shape=None, seed=None,
                 name=None, dtype=None, trainable=True):
        from .layers import _activation, _bias_seed
        _none_only(type(self).__name__, kernel_regularizer=kernel_regularizer,
                   bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                   kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        _float32_only(self, dtype)
        _channels_last(self, data_format)
        if groups != 1:
            raise ValueError("vdev's %s takes groups=1 only, not %r"
                             % (type(self).__name__, groups))
        super().__init__(name, trainable)
        if isinstance(filters, bool) or not isinstance(filters, numbers.Integral) or filters <= 0:
            raise ValueError("Invalid value for argument `filters`. Expected a strictly positive "
                             "value. Received filters=%r." % (filters,))
        self.filters = int(filters)
        r = self._rank
        self.kernel_size = _tuple(kernel_size, r, "kernel_size")
        self.strides = _tuple(strides, r, "strides", allow_zero=True)
        if not all(self.strides):
            raise ValueError("The argument `strides` cannot contains 0(s). Received: %s"
                             % (self.strides,))
        causal = isinstance(padding, str) and padding.lower() == "causal"
        if causal and r != 1:  # Keras's own check
            raise ValueError("Causal padding is only supported for `Conv1D` and "
                             "`SeparableConv1D`.")
        self.padding = "causal" if causal else _padding(padding).lower()
        self.dilation_rate = _tuple(dilation_rate, r, "dilation_rate")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:  # Keras's own check
            raise ValueError("`strides > 1` not supported in conjunction with `dilation_rate > "
                             "1`. Received: strides=%s and dilation_rate=%s"
                             % (self.strides, self.dilation_rate))
        self.activation = _activation(activation)
        self.use_bias = bool(use_bias)
        self.seed = random._seed(seed)
        self.kernel_initializer = initializers._get(kernel_initializer, self.seed)
        self.bias_initializer = initializers._get(bias_initializer, _bias_seed(self.seed))
        if self.kernel_initializer is None or self.bias_initializer is None:
            raise ValueError("Could not interpret initializer identifier: None")
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self.kernel = self.bias = None
        self._batch_input_shape = _input_shape(self, input_shape, r + 2)
        if self._batch_input_shape is not None and self._batch_input_shape[-1] is not None:
            self.build(self._batch_input_shape[-1])

    @property
    def built(self):
        return self.kernel is not None

    def _weight_shapes(self, channels):
        """The kernel's and the bias's shapes for `channels` input channels:
        [kh, kw, channels, filters] and [filters] (the subclasses' own)."""
        return self.kernel_size + (channels, self.filters), (self.filters,)

    def _channels_to_build(self, channels):
        """channels as an int for build, which makes no weight inside a step
        of strategy.run (the strategy's error)."""
        if _strategy_context.replica() is not None:
            raise _strategy_context.variable_in_step_error(
                "layer %r is built" % self.name, "Give it input_shape (or call it once)")
        from . import _lib
        return _lib.last_axis(channels, "channels", self)

    def build(self, channels):
        """Makes the kernel and the bias (their shapes: _weight_shapes) on
        the layer's device (Dense's rules)."""
        from .layers import _make_weights
        if self.kernel is not None:
            return
        _make_weights(self, *self._weight_shapes(self._channels_to_build(channels)))

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, rows, cols, filters) for an input shape (batch,
        rows, cols, channels) (Conv1D's: (batch, steps, filters)), None for an
        unknown size; Keras's ValueError where a size would be 0 or less."""
        shape = tuple(input_shape)
        r = self._rank
        _check_rank(self, shape, r + 2)
        space = shape[-(r + 1):-1]
        out = shape[:-(r + 1)] + tuple(
            _window_length(space[d], self.kernel_size[d], self.padding, self.strides[d],
                           self.dilation_rate[d])
            for d in range(r)) + (self.filters,)
        if any(d is not None and d <= 0 for d in out[-(r + 1):-1]):
            raise ValueError("One of the dimensions in the output is <= 0 due to downsampling "
                             "in %s. Consider increasing the input size. Received input shape "
                             "%s which would produce output shape with a zero or negative "
                             "value in a dimension." % (self.name, list(shape)))
        return out

    def _convolve(self, x):
        """The convolution of x with the kernel (DepthwiseConv2D's is its own)."""
        return nn.conv2d(x, self.kernel, list(self.strides), self.padding.upper(),
                         dilations=list(self.dilation_rate))

    def get_config(self):
        from .layers import _activation_name
        act = self.activation
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "filters": self.filters, "kernel_size": self.kernel_size,
                "strides": self.strides, "padding": self.padding,
                "data_format": "channels_last", "dilation_rate": self.dilation_rate,
                "groups": 1,
                "activation": _activation_name(act),
                "use_bias": self.use_bias,
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": None, "bias_regularizer": None,
                "activity_regularizer": None, "kernel_constraint": None,
                "bias_constraint": None}

    def __call__(self, inputs, training=None, mask=None):
        x = _weighted_input(self, inputs)
        shape = tuple(int(d) for d in x.shape)
        _check_rank(self, shape, self._rank + 2)
        if self.kernel is None:
            self.build(shape[-1])
        elif shape[-1] != int(self.kernel.shape[-2]):
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "axis -1 of input shape to have value %d, but received input with "
                             "shape %s" % (self.name, int(self.kernel.shape[-2]), shape))
        y = self._convolve(x)
        if self.bias is not None:
            y = _ops.add(y, self.bias)
        return self.activation(y) if self.activation else y


class _Pooling2D(_base()):
    _op = None
    _rank = 2  # spatial dimensions (the 1-D pools' 1)

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None,
                 name=None, trainable=True, input_shape=None, dtype=None):
        _float32_only(self, dtype)
        _channels_last(self, data_format)
        super().__init__(name, trainable)
        self._device = current_device()  # where a NumPy input is made (Dense's rule)
        r = self._rank
        self.pool_size = _tuple(pool_size, r, "pool_size")
        # as Keras: a stride of 0 passes here and is the op's error at the call
        self.strides = (self.pool_size if strides is None else
                        _tuple(strides, r, "strides", allow_zero=True))
        self.padding = _padding(padding).lower()
        self._batch_input_shape = _input_shape(self, input_shape, r + 2)

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, rows, cols, channels) pooled ((batch, steps,
        channels) for the 1-D pools); None for a size unknown (or one the op
        will refuse)."""
        shape = tuple(input_shape)
        r = self._rank
        _check_rank(self, shape, r + 2)
        rc = tuple(_window_length(shape[1 + d], self.pool_size[d], self.padding,
                                  self.strides[d]) if self.strides[d] > 0 else None
                   for d in range(r))
        return (shape[0],) + tuple(None if d is not None and d < 0 else d for d in rc) + \
            (shape[-1],)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "pool_size": self.pool_size, "padding": self.padding,
                "strides": self.strides, "data_format": "channels_last"}

    def __call__(self, inputs, training=None, mask=None):
        x = _float_input(self._device, inputs)
        _check_rank(self, tuple(int(d) for d in x.shape), self._rank + 2)
        return type(self)._op(x, list(self.pool_size), list(self.strides),
                              self.padding.upper())


class MaxPooling2D(_Pooling2D):
    """The maximum over each pool_size window, as Keras's MaxPooling2D
    (strides default to pool_size)."""
    _op = staticmethod(nn.max_pool2d)


class AveragePooling2D(_Pooling2D):
    """The mean over each pool_size window (of the elements inside the
    input, under "same"), as Keras's AveragePooling2D."""
    _op = staticmethod(nn.avg_pool2d)


class Flatten(_base()):
    """[batch, ...] to [batch, product of the rest], as Keras's Flatten (a
    view)."""

    def __init__(self, data_format=None, name=None, trainable=True, input_shape=None,
                 dtype=None):
        _float32_only(self, dtype)
        _channels_last(self, data_format)
        super().__init__(name, trainable)
        self._device = current_device()  # where a NumPy input is made (Dense's rule)
        self._batch_input_shape = _input_shape(self, input_shape)

    def compute_output_shape(self, input_shape):
        """Keras's: (batch, product of the other sizes), None when one is
        unknown; (batch, 1) for a shape (batch,)."""
        shape = tuple(input_shape)
        if not shape:
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "min_ndim=1, found ndim=0. Full shape received: ()" % (self.name,))
        n = 1
        for d in shape[1:]:
            n = None if n is None or d is None else n * d
        return (shape[0], n)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "data_format": "channels_last"}

    def __call__(self, inputs, training=None, mask=None):
        # as Keras, which casts only floating inputs to the layer's dtype:
        # an int32 tensor stays int32 (a reshape computes nothing)
        x = inputs if isinstance(inputs, Tensor) and inputs.dtype is int32 else \
            _float_input(self._device, inputs)
        shape = tuple(int(d) for d in x.shape)
        if not shape:
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "min_ndim=1, found ndim=0. Full shape received: ()" % (self.name,))
        return _ops.reshape(x, [shape[0], -1])
