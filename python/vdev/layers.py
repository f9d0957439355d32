"""Layers, as ``tf.keras.layers``: ``Dense``, and ``Conv2D``,
``MaxPooling2D``, ``AveragePooling2D`` and ``Flatten`` (from _conv_layers.py),
``DepthwiseConv2D`` (from _depthwise_layers.py),
``Conv2DTranspose`` (from _conv_transpose.py), ``Conv1D``, ``MaxPooling1D``
and ``AveragePooling1D`` (from _conv1d_layers.py), ``SeparableConv2D`` (from
_separable_layers.py), ``ZeroPadding1D``, ``ZeroPadding2D``, ``Cropping1D`` and
``Cropping2D`` (from _padding_layers.py), ``UpSampling1D`` and ``UpSampling2D``
(from _upsampling_layers.py), ``Rescaling``, ``Resizing`` and ``CenterCrop``
(from _preprocessing_layers.py), ``SimpleRNN``, ``LSTM`` and ``GRU`` (from
_recurrent_layers.py) and their wrapper ``Bidirectional`` (from _bidirectional.py),
``MultiHeadAttention`` (from _attention_layers.py),
``Embedding`` (from _embedding.py), ``BatchNormalization`` and
``LayerNormalization`` (from _norm_layers.py), ``GlobalAveragePooling1D/2D`` and
``GlobalMaxPooling1D/2D`` (from _pooling_layers.py), the merge layers
``Concatenate``, ``Add``, ``Subtract``, ``Multiply``, ``Average`` (and their
functions ``concatenate`` ...) and ``Lambda`` (from _merge_layers.py), and
``Input`` and ``InputLayer`` of the functional API (from _functional.py),
and the weightless core layers ``Dropout``, ``Reshape``, ``Permute``,
``Activation``, ``ReLU``, ``ELU``, ``LeakyReLU`` and ``Softmax`` (from
_core_layers.py). A layer's ``activation`` is one of Keras's names
(vdev/activations.py) or a callable.

``Dense(units, activation)`` computes act(x @ W + b) with W Glorot-uniform
and b zeros (Keras's kernel_initializer / bias_initializer: a name or a
vdev.initializers object),  the same ops and the same numbers as vdev's C dense layer for
the same seed. Its variables are made when the layer learns its input size:
at once when ``input_dim`` (or ``input_shape``) is given, else at the first
call, and in both cases on the device scope that was current when the layer
was made, so ``with vdev.device('GPU:1'): layer = Dense(...)`` puts the layer
on GPU:1 even if it is first called outside the scope (Keras would make the
variables where the first call happens). A layer made under a
MirroredStrategy's scope gets MirroredVariables (one copy per replica), made
outside strategy.run (building it inside a step function is an error).
As in Keras, a layer computes in float32: int inputs (values, int32 tensors)
are cast to float32 first; an input that is not a tensor (numpy, a list) is
made on the layer's device unless a device scope is open, as a value beside
a tensor is made beside it. As Keras's Dense, it applies W on the last axis
(x [batch, ..., features] gives [batch, ..., units]), and an input of
another width, or of fewer than two dimensions, is refused in Keras's words,
naming the layer.
"""

import functools
import hashlib
import inspect
import numbers
import re
import threading

from . import (_keras_masks, _lib, _ops, _strategy_context, _subclassing, activations,
               initializers, random)
from ._device import current_device, device
from ._tensor import Tensor, Variable, float32

__all__ = ["AveragePooling2D", "BatchNormalization", "Conv2D", "Dense", "Embedding", "Flatten",
           "Layer", "DepthwiseConv2D", "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAvgPool1D",
           "GlobalAvgPool2D", "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPooling1D",
           "GlobalMaxPooling2D", "LayerNormalization", "MaxPooling2D",
           "Conv1DTranspose", "Conv2DTranspose",  # vdev/_conv_transpose.py
           # vdev/_conv1d_layers.py, vdev/_separable_layers.py
           "AveragePooling1D", "AvgPool1D", "Conv1D", "Convolution1D", "MaxPool1D", "MaxPooling1D",
           "SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D",
           "SeparableConvolution2D",
           "Cropping1D", "Cropping2D", "ZeroPadding1D", "ZeroPadding2D",  # _padding_layers.py
           "UpSampling1D", "UpSampling2D",  # vdev/_upsampling_layers.py
           "CenterCrop", "Rescaling", "Resizing",  # vdev/_preprocessing_layers.py
           "Masking",  # vdev/_core_layers.py (masks: vdev/_keras_masks.py)
           "AdditiveAttention", "Attention",  # vdev/_dense_attention.py
           "TimeDistributed",  # vdev/_time_distributed.py
           "Normalization",  # vdev/_normalization_layer.py
           "GaussianDropout", "GaussianNoise", "RandomFlip",  # vdev/_noise_layers.py
           "SpatialDropout1D", "SpatialDropout2D",
           "CategoryEncoding", "PReLU", "RepeatVector",  # vdev/_more_layers.py
           "UnitNormalization",
           "IntegerLookup", "StringLookup", "TextVectorization",  # vdev/_text_layers.py
           "Dot", "dot",  # vdev/_dot_layer.py
           "RNN", "GRUCell", "LSTMCell", "SimpleRNNCell", "StackedRNNCells",  # _rnn_cells.py
           "GRU", "LSTM", "SimpleRNN",  # vdev/_recurrent_layers.py
           "Bidirectional",  # vdev/_bidirectional.py
           "MultiHeadAttention",  # vdev/_attention_layers.py
           # Keras's functional API (vdev/_functional.py, vdev/_merge_layers.py)
           "Add", "Average", "Concatenate", "Input", "InputLayer", "Lambda", "Maximum",
           "Minimum", "Multiply", "Subtract", "add", "average", "concatenate", "maximum",
           "minimum", "multiply", "subtract",
           # Keras's core layers without weights (vdev/_core_layers.py)
           "Activation", "Dropout", "ELU", "LeakyReLU", "Permute", "ReLU", "Reshape", "Softmax"]

# Keras's activation names (vdev/activations.py); relu, tanh, sigmoid and
# softmax are the ops themselves, which fit recognizes on the last layer
_ACTIVATIONS = {None: None, "linear": None, "relu": _ops.relu, "tanh": _ops.tanh,
                "sigmoid": _ops.sigmoid, "softmax": _ops.softmax,
                "elu": activations.elu, "selu": activations.selu, "gelu": activations.gelu,
                "softplus": activations.softplus, "softsign": activations.softsign,
                "swish": activations.swish, "exponential": activations.exponential,
                "hard_sigmoid": activations.hard_sigmoid}


def _activation(a):
    if callable(a):
        return a
    if a not in _ACTIVATIONS:
        raise ValueError("Unknown activation function: %r. vdev has %s"
                         % (a, ", ".join(repr(k) for k in _ACTIVATIONS if k)))
    return _ACTIVATIONS[a]


def _activation_name(act):
    """The name a config gives a layer's activation: its Keras name, else
    the function's own name ("linear" for none)."""
    if act is None:
        return "linear"
    names = [k for k, f in _ACTIVATIONS.items() if k and f is act]
    return names[0] if names else act.__name__


def _initial(init, shape):
    """init(shape) as a fresh float32 tensor of that shape (a callable may
    give a Variable, a NumPy array or a list: copied)."""
    t = init(shape, dtype="float32")
    if not isinstance(t, Tensor) or isinstance(t, Variable):
        t = _ops.convert_to_tensor(t.numpy() if isinstance(t, Tensor) else t, float32)
    elif t.dtype is not float32:
        t = _ops._cast(t, float32)
    if tuple(int(d) for d in t.shape) != tuple(shape):
        raise ValueError("The initializer gave a value of shape %s for a weight of shape %s"
                         % (tuple(int(d) for d in t.shape), tuple(shape)))
    return t


def _adopt(t, strategy=None):
    """Makes the fresh tensor t a Variable without a copy (t gives up its
    handle), or, for a layer made under a strategy's scope, a
    MirroredVariable: a copy on each replica's device."""
    if strategy is not None:
        from .distribute._values import mirror_tensor
        return mirror_tensor(strategy, t)
    from ._tensor import _variable_handle
    h, t._h = t._h, None
    return Variable(_handle=_variable_handle(h))  # frees h if it cannot be one


_names_lock = threading.Lock()
_names_taken = {}


def _snake_case(class_name):
    """A class's name as Keras's to_snake_case makes it: Dense -> dense,
    MyLayer -> my_layer, MLP -> mlp."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", class_name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


def _unique_name(prefix):
    """prefix the first time in this process, then prefix_1, prefix_2, ...,
    as Keras's unique_object_name numbers default layer names: so that
    {v.name: v} over a model's variables keeps every layer's."""
    with _names_lock:
        n = _names_taken.get(prefix, 0)
        _names_taken[prefix] = n + 1
    return prefix if n == 0 else "%s_%d" % (prefix, n)


def _keras_config(config):
    """A copy of a layer's config as vdev's layers take it: a Keras file's
    batch_input_shape becomes input_shape (its batch dropped), as Keras's
    base layer takes either."""
    config = dict(config)
    shape = config.pop("batch_input_shape", None)
    if shape is not None and "input_shape" not in config:
        config["input_shape"] = tuple(shape[1:])
    return config


def _dedup(variables):
    """variables with each one kept once, at its first place (Keras's
    _dedup_weights): a layer used twice must not have its update applied
    twice."""
    seen, out = set(), []
    for v in variables:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def _make_weights(layer, kernel_shape, bias_shape):
    """Makes layer.kernel (and layer.bias when layer.use_bias) from the
    layer's initializers, named NAME/kernel and NAME/bias, on the layer's
    device, mirrored under its strategy, and sets layer._variables."""
    # Mirrored: the initial values are made on the host, then copied to
    # each replica, so no replica's device holds more than another's.
    where = layer._device or ("CPU:0" if layer._strategy is not None else None)
    scope = device(where) if where else None
    if scope:
        scope.__enter__()
    # All or nothing: the layer takes its variables only once both are
    # made, so a build that fails half-way (its bias out of memory, an
    # initializer that raises) frees the kernel and leaves the layer
    # unbuilt; the next call builds it whole, not without its bias.
    bias = None
    try:
        kernel = _adopt(_initial(layer.kernel_initializer, kernel_shape), layer._strategy)
        kernel.name = layer.name + "/kernel"
        if layer.use_bias:
            bias = _adopt(_initial(layer.bias_initializer, bias_shape), layer._strategy)
            bias.name = layer.name + "/bias"
    finally:
        if scope:
            scope.__exit__(None, None, None)
    layer.kernel, layer.bias = kernel, bias
    layer._variables = [kernel] + ([bias] if bias is not None else [])


_NO_INPUTS = object()


def _symbolic_aware(call):
    """A layer class's __call__, wrapped for Keras's functional API: given
    symbolic tensors (vdev.Input's, or a layer's outputs on them), the call
    is recorded in the graph and gives symbolic outputs of the layer's
    output shape (vdev/_functional.py); given anything else, it computes."""
    @functools.wraps(call)
    def __call__(self, inputs=_NO_INPUTS, *args, **kwargs):
        if isinstance(inputs, Tensor):  # a tensor is never symbolic
            if getattr(inputs, "_keras_mask", None) is None:  # no mask: the call alone
                return call(self, inputs, *args, **kwargs)
            return _keras_masks.masked_call(call, self, inputs, args, kwargs)
        if inputs is _NO_INPUTS:
            return call(self, *args, **kwargs)
        from . import _functional
        if _functional.is_symbolic(inputs):
            return _functional.symbolic_call(self, inputs, args, kwargs)
        return _keras_masks.masked_call(call, self, inputs, args, kwargs)
    __call__._vdev_symbolic = True
    return __call__


class Layer:
    """A callable holding variables. A layer made without a name gets its
    class's, numbered per process as Keras numbers them (dense, dense_1,
    dense_2, ...); a name given is kept as it is. ``trainable`` is Keras
    2's: a layer set ``trainable = False`` (frozen) lists no
    ``trainable_variables`` (each of its variables is a non-trainable
    weight), while the variables' own ``trainable`` flags stay as they
    were; a model's setting sets every layer in it."""

    def __init_subclass__(cls, **kwargs):
        """Each subclass's own __call__ also takes symbolic tensors (Keras's
        functional API: vdev.Input, vdev.models.Model), as Keras's base
        Layer.__call__ does for every layer. A class of Keras's subclassing
        API (a ``call`` of its own: vdev/_subclassing.py) takes the inputs'
        masks when its call takes ``mask``."""
        super().__init_subclass__(**kwargs)
        call = cls.__dict__.get("__call__")
        if call is not None and not getattr(call, "_vdev_symbolic", False):
            cls.__call__ = _symbolic_aware(call)
        cls._keras_subclass = _subclassing.is_keras_subclass(cls)
        if cls._keras_subclass and "_expects_mask" not in cls.__dict__:
            cls._expects_mask = "mask" in inspect.signature(cls.call).parameters
        if cls._keras_subclass and not hasattr(cls, "compute_output_shape"):
            # Keras runs the layer to find it: a model made on it runs it on zeros
            cls.compute_output_shape = _subclassing.unknown_output_shape

    # Keras's masking (vdev/_keras_masks.py): whether the layer passes a
    # mask on (compute_mask), and whether Keras's call takes ``mask`` (the
    # inputs' masks are then given as it)
    supports_masking = False
    _expects_mask = False
    _keras_subclass = False  # Keras's subclassing API (vdev/_subclassing.py)

    def compute_mask(self, inputs, mask=None):
        """Keras's base Layer.compute_mask: the mask passed on where the
        layer supports masking, else None (a mask given is Keras's
        TypeError)."""
        if not self.supports_masking:
            if any(m is not None for m in (mask if isinstance(mask, (list, tuple)) else [mask])):
                raise TypeError("Layer %s does not support masking, but was passed an "
                                "input_mask: %s" % (self.name, mask))
            return None
        return mask

    def __init__(self, name=None, trainable=True, **kwargs):
        self.name = name or _unique_name(_snake_case(type(self).__name__))
        self._variables = []
        self._trainable = bool(trainable)
        if self._keras_subclass or type(self) is Layer:
            _subclassing.setup(self, kwargs)
        elif kwargs:
            raise TypeError("Keyword argument not understood:", next(iter(kwargs)))

    # ---- Keras's subclassing API (vdev/_subclassing.py) ----
    def build(self, input_shape):
        """Keras's base build: nothing to make."""
        self.built = True

    def call(self, inputs, *args, **kwargs):
        """Keras's base call: the inputs as they are."""
        return inputs

    def add_weight(self, name=None, shape=None, dtype=None, initializer=None, regularizer=None,
                   trainable=None, constraint=None, **kwargs):
        """Keras's add_weight: a new weight of the layer, made on its device."""
        return _subclassing.add_weight(self, name, shape, dtype, initializer, regularizer,
                                       trainable, constraint, **kwargs)

    def get_config(self):
        """Keras's base get_config (a layer of one's own)."""
        return _subclassing.config(self)

    @property
    def trainable(self):
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        self._trainable = bool(value)
        for l in self._sublayers():  # Keras's _flatten_layers: every layer within
            if isinstance(l, Layer):
                l.trainable = value

    def _sublayers(self):
        return _subclassing.tracked(self) if self._keras_subclass else []

    @property
    def variables(self):
        if self._keras_subclass:  # its own, then its layers', each once
            return _dedup(list(self._variables) + [v for l in self._sublayers()
                                                   for v in l.variables])
        return list(self._variables)

    @property
    def trainable_variables(self):
        """The variables that train: none when the layer is frozen, else its
        own with ``trainable=True`` and those of its trainable layers."""
        if not self._trainable:
            return []
        out = [v for v in self._variables if v.trainable]
        for l in self._sublayers():
            if isinstance(l, Layer):
                out.extend(l.trainable_variables)
            else:  # any callable: its variables flagged trainable
                out.extend(v for v in getattr(l, "variables", []) if v.trainable)
        return _dedup(out)

    @property
    def trainable_weights(self):
        return self.trainable_variables

    @property
    def weights(self):
        """The variables, Keras's order: each layer's kernel, then its bias."""
        return self.variables

    @property
    def non_trainable_weights(self):
        """The variables that do not train (every one of a frozen layer)."""
        train = {id(v) for v in self.trainable_variables}
        return [v for v in self.variables if id(v) not in train]

    @classmethod
    def from_config(cls, config):
        """The layer of a get_config() dict, as Keras's: cls(**config) (a
        new layer, unbuilt unless the config says its input shape)."""
        return cls(**config)

    def get_weights(self):
        """The weights' values, NumPy arrays in the order of ``weights``."""
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights):
        """Assigns each weight its value (on the variable's device, every
        replica's copy for a mirrored one), after checking the count and
        every shape as Keras does: a refused list changes nothing."""
        import numpy as np
        params = self.weights
        weights = list(weights)
        if len(params) != len(weights):
            raise ValueError('You called `set_weights(weights)` on layer "%s" with a weight list '
                             "of length %s, but the layer was expecting %s weights. Provided "
                             "weights: %s..." % (self.name, len(weights), len(params),
                                                 str(weights)[:50]))
        values = []
        for p, w in zip(params, weights):
            w = np.asarray(w, np.float32)
            ref = tuple(int(d) for d in p.shape)
            if ref != w.shape:
                raise ValueError("Layer %s weight shape %s is not compatible with provided "
                                 "weight shape %s." % (self.name, ref, w.shape))
            values.append(w)
        for p, w in zip(params, values):
            p.assign(w)

    @property
    def built(self):
        """Whether the layer has its variables (a Dense layer once it knows
        its input size; a layer of one's own once it is built)."""
        return self.__dict__.get("_keras_built", True)

    @built.setter
    def built(self, value):
        self.__dict__["_keras_built"] = bool(value)

    def count_params(self):
        """The number of weights' values, as Keras's; an unbuilt layer is
        Keras's ValueError."""
        if not self.built:
            raise ValueError("You tried to call `count_params` on layer %s, but the layer isn't "
                             "built. You can build it manually via: "
                             "`%s.build(batch_input_shape)`." % (self.name, self.name))
        n = 0
        for v in self.weights:
            k = 1
            for d in v.shape:
                k *= int(d)
            n += k
        return n


def _bias_seed(seed):
    """The seed of a Dense layer's bias, drawn by a named initializer: the
    first 8 bytes (little-endian) of BLAKE2b over b"vdev.Dense.bias:" and
    the layer's 64-bit seed (8 bytes, little-endian). Always the same for a
    seed, and unrelated to every small seed, so a layer's bias never draws
    another layer's kernel (seed + 1 would be the kernel of the layer seeded
    one more)."""
    h = hashlib.blake2b(b"vdev.Dense.bias:" + int(seed).to_bytes(8, "little"), digest_size=8)
    return int.from_bytes(h.digest(), "little")


def _base_call(self, inputs, *args, **kwargs):
    """Keras's base Layer.__call__ for a layer of one's own (build, call)."""
    return _subclassing.call(self, inputs, *args, **kwargs)


Layer.__call__ = _symbolic_aware(_base_call)


class Dense(Layer):
    """Keras's densely connected layer: ``activation(inputs @ kernel + bias)``,
    the kernel ``[input_dim, units]`` made on the device scope the layer was
    made in, when ``input_dim`` (or ``input_shape``) is given, else at its
    first call. Initializers draw with ``seed`` (None: vdev.random's)."""

    supports_masking = True  # Keras's: the mask passed on

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 input_dim=None, input_shape=None, seed=None, name=None, dtype=None,
                 trainable=True):
        for arg, x, what in (("kernel_regularizer", kernel_regularizer, "regularizers"),
                             ("bias_regularizer", bias_regularizer, "regularizers"),
                             ("activity_regularizer", activity_regularizer, "regularizers"),
                             ("kernel_constraint", kernel_constraint, "weight constraints"),
                             ("bias_constraint", bias_constraint, "weight constraints")):
            if x is not None:
                raise ValueError("vdev's Dense takes %s=None only, not %r: vdev has no %s"
                                 % (arg, x, what))
        if dtype is not None and getattr(dtype, "name", dtype) != "float32":
            raise ValueError("vdev's Dense takes dtype=None or 'float32' only, not %r: vdev's "
                             "layers compute in float32 (no mixed precision or float64)"
                             % (dtype,))
        super().__init__(name, trainable)
        try:
            n = _lib.index(units, "units")
        except TypeError:
            n = 0
        if n <= 0:
            raise ValueError("Received an invalid value for `units`, expected a positive "
                             "integer. Received: units=%r" % (units,))
        self.units = n
        self.activation = _activation(activation)
        self.use_bias = bool(use_bias)
        self.seed = random._seed(seed)
        # a name's initializer draws with the layer's seed (so the default
        # is the C dense layer's Glorot uniform), the bias's with a seed
        # derived from it (_bias_seed), not seed + 1: that is the next
        # layer's kernel seed when seeds are numbered
        self.kernel_initializer = initializers._get(kernel_initializer, self.seed)
        self.bias_initializer = initializers._get(bias_initializer, _bias_seed(self.seed))
        if self.kernel_initializer is None or self.bias_initializer is None:
            raise ValueError("Could not interpret initializer identifier: None")
        self._device = current_device()
        self._strategy = _strategy_context.mirroring_strategy()
        self.kernel = self.bias = None
        self._batch_input_shape = None
        if input_shape is not None:
            if isinstance(input_shape, numbers.Integral):
                input_shape = (input_shape,)
            self._batch_input_shape = (None,) + tuple(input_shape)
            input_dim = tuple(input_shape)[-1]  # None: unknown until the first call
        elif input_dim is not None:
            self._batch_input_shape = (None, input_dim)
        if input_dim is not None:
            self.build(input_dim)

    def compute_output_shape(self, input_shape):
        """Keras's: the input shape with its last size the units."""
        shape = tuple(input_shape)
        if len(shape) < 2:
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "min_ndim=2, found ndim=%d. Full shape received: %s"
                             % (self.name, len(shape), shape))
        return shape[:-1] + (self.units,)

    @property
    def built(self):
        """Whether the kernel (and bias) are made."""
        return self.kernel is not None

    def get_config(self):
        """Keras's Dense config, for what vdev's Dense has: name,
        trainable, dtype, units, activation (its name), use_bias, the
        initializers serialized, and None for the regularizers and
        constraints vdev has not."""
        activation = _activation_name(self.activation)
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32",
                "units": self.units,
                "activation": activation, "use_bias": self.use_bias,
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": None, "bias_regularizer": None,
                "activity_regularizer": None, "kernel_constraint": None,
                "bias_constraint": None}

    def build(self, input_dim):
        """Makes W [input_dim, units] and b [units] on the layer's device."""
        if self.kernel is not None:
            return
        if _strategy_context.replica() is not None:
            if self._strategy is not None:
                raise _strategy_context.variable_in_step_error(
                    "layer %r, made under strategy.scope(), is built" % self.name,
                    "Give it input_dim (or call it once)")
            raise _strategy_context.variable_in_step_error(
                "layer %r is built" % self.name, "Make it, with input_dim (or call it once),")
        input_dim = _lib.last_axis(input_dim, "input_dim", self)
        _make_weights(self, (input_dim, self.units), (self.units,))

    def _check_input(self, x):
        """x's shape as Keras's InputSpec checks a Dense input: at least two
        dimensions, the last one the kernel's rows once built."""
        # a Tensor's shape holds ints already
        shape = tuple(x.shape) if type(x) is Tensor else tuple(int(d) for d in x.shape)
        if len(shape) < 2:
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "min_ndim=2, found ndim=%d. Full shape received: %s"
                             % (self.name, len(shape), shape))
        if self.kernel is not None and shape[-1] != int(self.kernel.shape[0]):
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "axis -1 of input shape to have value %d, but received input with "
                             "shape %s" % (self.name, int(self.kernel.shape[0]), shape))
        return shape

    def __call__(self, inputs, training=None, mask=None):
        """``activation(inputs @ kernel + bias)`` over the last axis of
        ``inputs`` (a tensor or a value, cast to float32), building the layer
        on its first call. ``training`` and ``mask`` are taken as Keras's
        ``__call__`` takes them and change nothing (Dense has neither)."""
        x = inputs
        # Keras's Dense computes in its dtype (float32): an int input, a
        # value or an int32 tensor, is cast first. A value is made on the
        # layer's device (its kernel's, or the scope it was made in), not on
        # the default one, as a value beside a tensor is made beside it.
        if not isinstance(x, Tensor):
            if self.kernel is not None:
                with _ops._near(self.kernel):
                    x = _ops.convert_to_tensor(x, float32)
            elif self._device is not None and current_device() is None:
                with device(self._device):
                    x = _ops.convert_to_tensor(x, float32)
            else:
                x = _ops.convert_to_tensor(x, float32)
        elif x.dtype is not float32:
            x = _ops._cast(x, float32)
        shape = self._check_input(x)
        if self.kernel is None:
            self.build(shape[-1])
        if len(shape) > 2:
            # [batch, ..., features], as Keras: the kernel applies on the
            # last axis (the rows flattened, a view, and shaped back)
            x = _ops.reshape(x, [-1, shape[-1]])
        y = _ops.matmul(x, self.kernel)
        if self.bias is not None:
            y = _ops.add(y, self.bias)
        if len(shape) > 2:
            y = _ops.reshape(y, list(shape[:-1]) + [self.units])
        return self.activation(y) if self.activation else y


# the convolutional layers build on Layer and Dense's helpers above
from ._conv_layers import AveragePooling2D, Conv2D, Flatten, MaxPooling2D  # noqa: E402
from ._depthwise_layers import DepthwiseConv2D  # noqa: E402
from ._conv_transpose import Conv1DTranspose, Conv2DTranspose  # noqa: E402
from ._conv1d_layers import (AveragePooling1D, AvgPool1D, Conv1D, Convolution1D,  # noqa: E402
                             MaxPool1D, MaxPooling1D)
from ._separable_layers import (SeparableConv1D, SeparableConv2D,  # noqa: E402
                                SeparableConvolution1D, SeparableConvolution2D)
from ._padding_layers import Cropping1D, Cropping2D, ZeroPadding1D, ZeroPadding2D  # noqa: E402
from ._upsampling_layers import UpSampling1D, UpSampling2D  # noqa: E402
from ._preprocessing_layers import CenterCrop, Rescaling, Resizing  # noqa: E402
from ._recurrent_layers import GRU, LSTM, SimpleRNN  # noqa: E402
from ._bidirectional import Bidirectional  # noqa: E402
from ._attention_layers import MultiHeadAttention  # noqa: E402
from ._dense_attention import AdditiveAttention, Attention  # noqa: E402
from ._time_distributed import TimeDistributed  # noqa: E402
from ._normalization_layer import Normalization  # noqa: E402
from ._noise_layers import (GaussianDropout, GaussianNoise, RandomFlip,  # noqa: E402
                            SpatialDropout1D, SpatialDropout2D)
from ._more_layers import (CategoryEncoding, PReLU, RepeatVector,  # noqa: E402
                           UnitNormalization)
from ._text_layers import IntegerLookup, StringLookup, TextVectorization  # noqa: E402
from ._dot_layer import Dot, dot  # noqa: E402
from ._rnn_cells import (RNN, GRUCell, LSTMCell, SimpleRNNCell,  # noqa: E402
                         StackedRNNCells)
from ._embedding import Embedding  # noqa: E402
from ._norm_layers import BatchNormalization, LayerNormalization  # noqa: E402
from ._pooling_layers import (GlobalAveragePooling1D, GlobalAveragePooling2D,  # noqa: E402
                              GlobalAvgPool1D, GlobalAvgPool2D, GlobalMaxPool1D,
                              GlobalMaxPool2D, GlobalMaxPooling1D, GlobalMaxPooling2D)
# Keras's functional API: Input and the merge layers build on the above
from ._functional import Input, InputLayer  # noqa: E402
from ._merge_layers import (Add, Average, Concatenate, Lambda, Maximum, Minimum,  # noqa: E402
                            Multiply, Subtract, add, average, concatenate, maximum, minimum,
                            multiply, subtract)
from ._core_layers import (ELU, Activation, Dropout, LeakyReLU, Masking, Permute,  # noqa: E402
                           ReLU, Reshape, Softmax)
