"""Models, as ``tf.keras``: ``Sequential``, ``Model`` (Keras's functional
model, vdev/_functional.py), and ``MLP``, a stack of Dense
layers with the seeds vdev's C ``vdev_mlp_new`` uses, so a model built here
starts from the same weights as the C model of the same seed (and trains to
the same numbers). All have Keras's compile / fit / evaluate / predict and
save_weights / load_weights (vdev/_fit.py); a Sequential and a functional
Model have Keras's get_config / from_config (the functional config's
helpers are here: Keras 2.11's get_network_config and
reconstruct_from_config), and ``clone_model`` (vdev/_cloning.py) clones
either kind (fresh weights)."""

import copy

import numpy as np

from . import _lib, _rnn_states
from ._cloning import clone_model
from ._fit import Model as _Training
from ._functional import Functional, _inbound_nodes, _row
from ._bidirectional import Bidirectional
from ._recurrent_layers import _RNN
from .layers import Conv2D, Dense, Layer, _dedup, _keras_config

__all__ = ["MLP", "Model", "Sequential", "clone_model", "load_model"]

# Keras's Model: Model(inputs, outputs) a functional model (vdev/_functional.py), a
# subclass with a call its subclassed model (vdev/_subclassed_model.py)
from ._subclassed_model import Model  # noqa: E402


def load_model(filepath, custom_objects=None, compile=True, options=None):
    """Keras's load_model of a file model.save wrote (vdev/_model_io.py)."""
    from ._model_io import load_model as load
    return load(filepath, custom_objects, compile, options)


def _build(layer, shape):
    """Builds an unbuilt Dense, Conv2D, recurrent layer, BatchNormalization,
    LayerNormalization or TimeDistributed for inputs of shape (batch None),
    and the layers of a Sequential one after the other."""
    if isinstance(layer, Sequential):
        for l in layer.layers:
            if shape is None:
                return
            _build(l, shape)
            shape = _layer_output_shape(l, shape)
    elif isinstance(layer, (Dense, Conv2D, _RNN, Bidirectional)) and shape[-1] is not None:
        if getattr(layer, "stateful", False):  # built or not: its batch size must be known
            _rnn_states.know_batch(layer, shape)
        if not layer.built:
            layer.build(shape[-1])
    else:
        from ._norm_layers import BatchNormalization, LayerNormalization
        from ._time_distributed import TimeDistributed
        if (isinstance(layer, (BatchNormalization, LayerNormalization, TimeDistributed))
                and not layer.built):
            layer.build(shape)  # as Keras: built once the model knows its input shape


def _explicit_input_shape(layer):
    """Keras's get_input_shape_and_dtype: (the batch input shape the layer
    was given, the name of the layer that has it), (None, its name) when it
    has none; a model's is its first layer's (a functional model's, its
    Input's), as Keras looks into each model first."""
    from ._functional import InputLayer
    while isinstance(layer, (Sequential, Functional)) and not isinstance(layer, InputLayer):
        if not layer.layers:
            raise ValueError("An empty Model cannot be used as a Layer.")
        layer = layer.layers[0]
    shape = layer.__dict__.get("_batch_input_shape")
    return (tuple(shape) if shape else None), getattr(layer, "name", None) or "layer"


def _layer_output_shape(layer, shape):
    """layer's output shape for inputs of shape (batch None): its
    compute_output_shape, or where it has none (a Lambda given no
    output_shape) the shape of its output on zeros of one row, as Keras
    finds it by running the layer; None when neither can be (a size not
    known, a layer without compute_output_shape)."""
    if not hasattr(layer, "compute_output_shape"):
        return None
    try:
        out = layer.compute_output_shape(shape)
    except NotImplementedError:
        if None in tuple(shape)[1:]:
            return None
        from . import _ops
        out = layer(_ops.convert_to_tensor(np.zeros((1,) + tuple(shape)[1:], np.float32)))
        if isinstance(out, (list, tuple)):
            return None
        return (shape[0],) + tuple(int(d) for d in tuple(out.shape)[1:])
    return None if out is None else tuple(out)


def _check_and_build(layer, shape):
    """What Keras's Sequential.add checks when it calls a layer on the
    model's output (shape, batch None): the layer's rank (its
    compute_output_shape), built for it (a Dense, Conv2D or normalization
    layer), and a built Dense's or Conv2D's input size (Keras's InputSpec
    error, naming the layer)."""
    from ._functional import _check_width
    if shape is None:
        return
    _layer_output_shape(layer, shape)  # checks the rank (and Conv2D's sizes)
    _build(layer, shape)
    if isinstance(layer, (Dense, Conv2D)):
        _check_width(layer, shape)


def _extend(tensors, layers):
    """tensors with each of layers called in turn on the last (symbolic
    calls, recorded on the layers); None when one cannot be (a plain
    callable, or a layer that fails on symbolic tensors), as Keras's model
    then has no graph network."""
    out = list(tensors)
    for l in layers:
        if not isinstance(l, Layer):
            return None
        try:
            t = l(out[-1])
        except Exception:
            return None
        if isinstance(t, (list, tuple)):
            return None
        out.append(t)
    return out


def _shape_tuple(shape):
    return tuple(None if d is None else int(d) for d in shape)


def _layer_class(name, custom_objects=None):
    """The layer class of a config's class_name: custom_objects', then
    vdev.layers' and vdev.models'; else Keras's ValueError."""
    from . import layers
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    if name == "InputLayer":
        return layers.InputLayer
    klass = getattr(layers, name, None) if name in layers.__all__ else None
    if klass is None and name in ("Sequential", "MLP"):
        klass = Sequential
    if klass is None and name in ("Functional", "Model"):
        klass = Model
    if not isinstance(klass, type):
        raise ValueError("Unknown layer: '%s'. Please ensure you are using a "
                         "`keras.utils.custom_object_scope` and that this object is included in "
                         "the scope. See https://www.tensorflow.org/guide/keras/"
                         "save_and_serialize#registering_the_custom_object for details."
                         % (name,))
    return klass


def _layer_from_config(layer_config, custom_objects=None):
    """A layer made anew from {"class_name", "config"} (a functional
    model's entry, Sequential's too): by its class's from_config, a base
    Layer's taking a Keras file's batch_input_shape as input_shape."""
    name = layer_config["class_name"]
    klass = _layer_class(name, custom_objects)
    cfg = dict(layer_config["config"])
    if isinstance(klass, type) and issubclass(klass, (Sequential, Functional)):
        return klass.from_config(cfg, custom_objects)
    if (name != "InputLayer"
            and getattr(klass.from_config, "__func__", None) is Layer.from_config.__func__):
        cfg = _keras_config(cfg)
    return klass.from_config(cfg)


def _skips_first_node(layer):
    """Keras's _should_skip_first_node: a functional model (or a Sequential
    of known input shape) has a node of its own in Keras, numbered 0, so
    the calls of it a config lists count from 1. vdev's models have no such
    node: the config's numbers are mapped to the calls' places."""
    if isinstance(layer, Functional):
        return True
    return isinstance(layer, Sequential) and layer._input_layer is not None


def _call_kwargs(node):
    """Keras's Node.serialize: the arguments of a call other than the
    first, by name (positional ones named from the layer's __call__)."""
    import inspect
    kwargs = {}
    extra = node.call_args[1:] if node.call_args else ()
    if extra:
        params = [p for p in inspect.signature(node.layer.__call__).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]
        kwargs.update(zip([p.name for p in params], extra))
    kwargs.update(node.call_kwargs)
    return kwargs


def _network_config(model, serialize_layer_fn=None):
    """Keras 2.11's get_network_config (see Functional.get_config); each
    layer's entry is serialize_layer_fn(layer) when given (clone_model's)
    in place of its class name and config."""
    import json
    from ._functional import KerasTensor, _inbound_nodes
    network_nodes = {n for v in model._nodes_by_depth.values() for n in v}
    conversion = {}  # (layer, index in its calls) -> index in the config
    for layer in model.layers:
        kept = 1 if _skips_first_node(layer) else 0
        for i, node in enumerate(_inbound_nodes(layer)):
            if node in network_nodes:
                conversion[(id(layer), i)] = kept
                kept += 1

    def ref(t):
        layer, node_index, tensor_index = t._keras_history
        return [layer.name, conversion.get((id(layer), node_index), 0), tensor_index]

    def value(v):  # a call argument, Keras's serialized form
        if isinstance(v, KerasTensor):
            return ref(v)
        if isinstance(v, (list, tuple)):
            return [value(x) for x in v]
        if isinstance(v, dict):
            return {k: value(x) for k, x in v.items()}
        if isinstance(v, np.ndarray):
            return v.tolist()
        return v

    layer_configs = []
    for layer in model.layers:
        inbound = []
        for node in _inbound_nodes(layer):
            if node not in network_nodes or node.is_input:
                continue
            kwargs = value(_call_kwargs(node))
            try:
                json.dumps(kwargs)
            except TypeError:
                raise TypeError("Layer %s was passed non-JSON-serializable arguments. Arguments "
                                "had types: %s. They cannot be serialized out when saving the "
                                "model." % (layer.name, {k: type(v) for k, v in kwargs.items()})
                                ) from None
            inbound.append([ref(t) + [kwargs] for t in node.keras_inputs])
        if serialize_layer_fn is not None:
            entry = dict(serialize_layer_fn(layer))
        elif not hasattr(layer, "get_config"):
            raise NotImplementedError("Layer %s (%s) has no get_config: vdev cannot serialize "
                                      "it" % (layer.name, type(layer).__name__))
        else:
            entry = {"class_name": type(layer).__name__, "config": layer.get_config()}
        layer_configs.append(dict(entry, name=layer.name, inbound_nodes=inbound))
    return {"name": model.name, "trainable": model.trainable, "layers": layer_configs,
            "input_layers": [ref(t) for t in model.inputs],
            "output_layers": [ref(t) for t in model.outputs]}


def _functional_from_config(cls, config, custom_objects=None):
    """Keras 2.11's Functional.from_config (see Functional.from_config)."""
    for key in ("layers", "input_layers", "output_layers"):
        if key not in config:
            raise ValueError("vdev's Model.from_config takes the config of a functional model "
                             "(Model.get_config(): name, layers, input_layers, output_layers); "
                             "this one has no %r (keys: %s)" % (key, sorted(config)))
    inputs, outputs = _reconstruct(config, custom_objects)
    model = cls(inputs=inputs, outputs=outputs, name=config.get("name"))
    if "trainable" in config:
        model.trainable = config["trainable"]
    return model


def _reconstruct(config, custom_objects=None, created_layers=None):
    """Keras 2.11's reconstruct_from_config: (the input tensors, the output
    tensors) of the config's graph, each layer taken from created_layers
    (name -> layer; clone_model's) or made from its config, and called as
    the config's nodes say, in Keras's order."""
    from ._functional import InputLayer, _inbound_nodes
    created = created_layers if created_layers is not None else {}  # name -> layer
    node_index_map = {}  # (layer name, index in the config) -> index in its calls
    node_count = {}
    unprocessed = {}
    for layer_data in config["layers"]:
        name = layer_data["name"]
        layer = created.get(name)
        if layer is None:
            layer = created[name] = _layer_from_config(layer_data, custom_objects)
        node_count[name] = int(_skips_first_node(layer))
        unprocessed.setdefault(name, []).extend(layer_data["inbound_nodes"])

    def node_index(name, index):  # by the config's names (a clone's layer may differ)
        if isinstance(created[name], InputLayer):
            return 0
        return node_index_map.get((name, index))

    def tensor(entry):
        if len(entry) not in (3, 4):
            raise ValueError("Improperly formatted model config.")
        i = node_index(entry[0], entry[1])
        if i is None:
            raise IndexError  # that call is not made yet
        return _inbound_nodes(created[entry[0]])[i].outputs[entry[2]]

    def kwarg(v):  # a serialized call argument: a tensor's reference, or a value
        if (isinstance(v, list) and len(v) == 3 and isinstance(v[0], str)
                and v[0] in created and all(isinstance(x, int) for x in v[1:])):
            return tensor(v)
        if isinstance(v, dict):
            return {k: kwarg(x) for k, x in v.items()}
        return v

    def process(name, node_data):
        # node_data: a list of [layer name, node index, tensor index, kwargs]
        try:
            inputs = [tensor(e) for e in node_data]
            kwargs = kwarg(node_data[0][3] if len(node_data[0]) == 4 else {})
        except IndexError:
            return False
        out = created[name](inputs[0] if len(inputs) == 1 else inputs, **kwargs)
        first = out[0] if isinstance(out, (list, tuple)) else out
        node_index_map[(name, node_count[name])] = first._keras_history.node_index
        node_count[name] += 1
        return True

    while unprocessed:
        progress = False
        for layer_data in config["layers"]:
            name = layer_data["name"]
            pending = unprocessed.pop(name, None)
            if pending is None:
                continue
            while pending and process(name, pending[0]):
                pending.pop(0)
                progress = True
            if pending:
                unprocessed[name] = pending
        if unprocessed and not progress:
            raise ValueError("vdev's Model.from_config cannot make the calls of layers %s: "
                             "the layers they take come from no call in the config"
                             % (sorted(unprocessed),))

    def refs(entries):
        entries = entries if entries and isinstance(entries[0], list) else [entries]
        out = []
        for e in entries:
            out.append(_inbound_nodes(created[e[0]])[node_index(e[0], e[1])].outputs[e[2]])
        return out

    return refs(config["input_layers"]), refs(config["output_layers"])


class Sequential(Layer, _Training):
    """Keras's ``Sequential``: ``layers`` applied in order, each a vdev layer
    (anything else is Keras's TypeError; wrap a function in
    vdev.layers.Lambda); ``add`` appends one, ``pop`` removes the last. A model
    whose input shape is given (an Input first, or a first layer given
    input_shape) is built as it is made and checks its calls' shape, as
    Keras's; ``inputs``, ``outputs``, ``input_shape``, ``output_shape`` and
    ``get_layer`` are Keras's. Keras's ``compile``, ``fit``, ``evaluate``,
    ``predict``, ``save_weights`` and ``load_weights`` come from
    vdev/_fit.py."""

    def __init__(self, layers=None, name=None, trainable=True):
        super().__init__(name, trainable)
        self.layers = []
        self._call_shape = None  # the last call's input shape, batch None
        # The model's InputLayer when its input shape is given (Keras's
        # graph network): an Input added first, or one made as Keras makes
        # it for a first layer given input_shape (named after that layer).
        self._input_layer = None
        # (what it was made from: the InputLayer or an input shape, [the
        # input tensor, each layer's output] or None): the symbolic graph of
        # inputs / outputs, made when first asked for (a layer called on
        # symbolic tensors holds its calls, so only then), None before.
        self._graph = None
        if layers is not None and not isinstance(layers, (list, tuple)):
            layers = [layers]  # as Keras: one layer for a list of one
        for l in layers or []:
            self.add(l)

    def add(self, layer):
        """Appends ``layer``. As Keras's: once the model knows its input
        shape (an Input added first: vdev.Input's tensor, or an InputLayer;
        or a first layer given input_dim or input_shape, for which an
        InputLayer named after it is made), each layer added is built at
        once for the output of the layers before it (a Dense, Conv2D or
        normalization layer), and one that cannot take that output (a Dense
        built for another width, a rank it does not take) is Keras's
        ValueError here, the layer not added. The Input is not one of
        ``layers``; an Input after other layers is a ValueError; what is
        not a vdev layer (a plain function) is Keras 2.11's TypeError "The
        added layer must be an instance of class Layer. Received: ..."."""
        from ._functional import InputLayer, KerasTensor
        if isinstance(layer, KerasTensor) and isinstance(layer._keras_history.layer,
                                                         InputLayer):
            layer = layer._keras_history.layer
        if isinstance(layer, InputLayer):
            if self.layers or self._input_layer is not None:
                raise ValueError("vdev's Sequential takes an Input (or InputLayer) as its first "
                                 "layer only, not after %s"
                                 % ([getattr(l, "name", l) for l in self.layers]
                                    or [self._input_layer.name],))
            self._input_layer, self._graph = layer, None
            return
        if not isinstance(layer, Layer):  # Keras 2.11's (vdev has no tf.Module to wrap)
            raise TypeError("The added layer must be an instance of class Layer. Received: "
                            "layer=%s of type %s." % (layer, type(layer)))
        # As Keras: the same layer may come twice (its weights shared), two
        # layers of one name may not.
        name = getattr(layer, "name", None)
        if name is not None and any(l is not layer and getattr(l, "name", None) == name
                                    for l in self.layers):
            raise ValueError("All layers added to a Sequential model should have unique names. "
                             "Name \"%s\" is already the name of a layer in this model. Update "
                             "the `name` argument to pass a unique name." % (name,))
        input_layer = self._input_layer
        if not self.layers and input_layer is None:
            batch_shape, first = _explicit_input_shape(layer)
            if batch_shape is not None:  # Keras's Input(batch_shape, name=first + "_input")
                input_layer = InputLayer(batch_input_shape=batch_shape, name=first + "_input")
        # Once the model knows its input (given, or its first layer's built
        # kernel), the layer is built from the output shape of the layers
        # before it (each layer's compute_output_shape), so the model is
        # built, summary() works, and under a strategy's scope() the
        # variables are made there (not later, inside strategy.run).
        if self.layers:
            _check_and_build(layer, self._output_shape())
        elif input_layer is not None:
            _check_and_build(layer, tuple(input_layer._batch_input_shape))
        self.layers.append(layer)
        self._input_layer = input_layer
        if self._graph is not None and self._graph[1] is not None:
            self._graph = (self._graph[0], _extend(self._graph[1], [layer]))

    def pop(self):
        """Keras's: removes the last layer; the model's output is then the
        layer's before it (a model left with no layers forgets its input, as
        Keras's then has no inputs). No layers is Keras's TypeError."""
        if not self.layers:
            raise TypeError("There are no layers in the model.")
        self.layers.pop()
        if self._graph is not None and self._graph[1] is not None:
            self._graph = (self._graph[0], self._graph[1][:-1])
        if not self.layers:
            self._input_layer = self._graph = self._call_shape = None

    def build(self, input_shape=None):
        """Keras's: builds the layers of a model whose input shape is not
        known for inputs of ``input_shape`` (batch included, as Keras's:
        ``(None, 16)``), with the checks of ``add`` (a Dense built for
        another width is its ValueError); a model that knows its input
        shape is built already. No shape is Keras's ValueError."""
        if self._input_layer is not None:
            return
        if input_shape is None:
            raise ValueError("You must provide an `input_shape` argument.")
        shape = (None,) + tuple(None if d is None else int(d) for d in tuple(input_shape)[1:])
        s = shape
        for l in self.layers:
            if s is None:
                break
            _check_and_build(l, s)
            s = _layer_output_shape(l, s)
        self._call_shape = shape

    def _tensors(self):
        """[the model's input, each layer's output] (symbolic tensors), or
        None: from the model's InputLayer when its input shape was given,
        else from the input shape it learnt from a call or build() (its
        batch size None), through an InputLayer named after its first
        layer, as Keras's graph network of an inferred shape; None when a
        layer is a plain callable or the shape is not known (Keras's model
        without inputs). Made once, then kept up to date by add and pop."""
        from ._functional import InputLayer
        key = self._input_layer
        if key is None:
            key = self._input_shape() if self.layers else None
            if key is None:
                return None
        if self._graph is None or not (self._graph[0] is key or (
                isinstance(key, tuple) and self._graph[0] == key)):
            start = key if isinstance(key, InputLayer) else InputLayer(
                batch_input_shape=key, name=(getattr(self.layers[0], "name", None) or "layer")
                + "_input")
            self._graph = (key, _extend([_inbound_nodes(start)[0].outputs[0]], self.layers))
        return self._graph[1]

    @property
    def inputs(self):
        """Keras's: [the model's input tensor] (a symbolic tensor), or None
        for a model that does not know its input shape."""
        t = self._tensors()
        return None if t is None else [t[0]]

    @property
    def outputs(self):
        """Keras's: [the model's output tensor], or None as ``inputs``."""
        t = self._tensors()
        return None if t is None else [t[-1]]

    @property
    def input(self):
        """Keras's: the input tensor; Keras's AttributeError (its
        Functional's attribute missing) for a model without inputs."""
        t = self._tensors()
        if t is None:
            raise AttributeError("'%s' object has no attribute '_nested_inputs'"
                                 % (type(self).__name__,))
        return t[0]

    @property
    def output(self):
        """Keras's: the output tensor; AttributeError as ``input``."""
        t = self._tensors()
        if t is None:
            raise AttributeError("'%s' object has no attribute '_nested_outputs'"
                                 % (type(self).__name__,))
        return t[-1]

    @property
    def input_shape(self):
        """Keras's: the input tensor's shape, ``(None, 4)``; AttributeError
        as ``input`` for a model that does not know it."""
        return _shape_tuple(self.input.shape)

    @property
    def output_shape(self):
        """Keras's: the output tensor's shape; AttributeError as ``output``."""
        return _shape_tuple(self.output.shape)

    @property
    def input_names(self):
        """Keras's: [the InputLayer's name], or None without inputs."""
        t = self._tensors()
        return None if t is None else [t[0]._keras_history.layer.name]

    @property
    def output_names(self):
        """Keras's: [the last layer's name], or None without inputs."""
        t = self._tensors()
        return None if t is None else [t[-1]._keras_history.layer.name]

    # Keras's Model.get_layer: by name or index of ``layers`` (the Input
    # not counted), with its errors
    get_layer = Functional.get_layer

    def _symbolic_expects(self, inputs):
        """How many symbolic tensors a call takes, as Keras's: 1 when the
        input shape was given (an Input first, or input_shape on the first
        layer: Keras's InputSpec of the model, vdev/_functional.py's error),
        one tensor's shape checked then (_check_input);
        else None (Keras checks nothing), but several tensors given to a
        first layer of one input are that layer's count error, raised inside
        the model's call (Keras runs it on placeholders) and so wrapped."""
        from ._conv_layers import Flatten, _Pooling2D
        from ._merge_layers import _call_error, _tensor_text
        from ._pooling_layers import _GlobalPooling
        if _skips_first_node(self):
            flat = inputs if isinstance(inputs, (list, tuple)) else [inputs]
            if len(flat) == 1:
                self._check_input(flat[0])
            return 1
        if not isinstance(inputs, (list, tuple)):
            self._check_built_widths(_shape_tuple(inputs.shape))
        first = self.layers[0] if self.layers else None
        if (isinstance(inputs, (list, tuple)) and len(inputs) > 1
                and isinstance(first, (Dense, Conv2D, Flatten, _Pooling2D, _GlobalPooling))):
            received = ["<tf.Tensor 'Placeholder%s:0' shape=%s dtype=%s>" % (
                "_%d" % i if i else "", tuple(x.shape), x.dtype.name)
                for i, x in enumerate(inputs)]
            raise _call_error(self, ValueError, 'Layer "%s" expects 1 input(s), but it received '
                              "%d input tensors. Inputs received: [%s]" % (
                                  first.name, len(inputs), ", ".join(received)),
                              [("inputs", type(inputs)(map(_tensor_text, inputs))),
                               ("training", None), ("mask", None)])
        return None

    def _check_built_widths(self, shape):
        """A symbolic call of a model not given its input shape: each built
        Dense's or Conv2D's input size checked on the way through the
        layers' compute_output_shape (Keras's InputSpec errors, naming the
        layer: its model runs the call through its layers, each checking its
        spec set when built), as the layers' own checks do in a call."""
        from ._functional import _check_width
        for l in self.layers:
            if isinstance(l, (Dense, Conv2D)) and l.built:
                _check_width(l, shape)
            elif isinstance(l, Sequential) and l._input_layer is None:
                l._check_built_widths(shape)
            elif isinstance(l, Sequential):  # the inner model's own spec
                Functional._check_shape(l, 0, shape, l._input_layer._batch_input_shape)
            shape = _layer_output_shape(l, shape)
            if shape is None:
                return

    def _check_input(self, x):
        """Keras's InputSpec check of a model whose input shape was given
        (Keras's Functional's spec: the Input's shape, batch free, a
        trailing 1 of either left out), naming the model: "Input 0 of layer
        "sequential" is incompatible with the layer: expected shape=(None,
        4), found shape=(2, 5)"; a list of several arrays or tensors is
        Keras's count error, a list of one its tensor. Returns the input
        (a list of one: its element)."""
        if self._input_layer is None:
            return x
        from ._tensor import Tensor
        if isinstance(x, (list, tuple)) and x and all(isinstance(a, (np.ndarray, Tensor))
                                                      for a in x):
            if len(x) != 1:  # Keras's count check, for its spec of one input
                raise ValueError('Layer "%s" expects 1 input(s), but it received %d input '
                                 "tensors. Inputs received: %s" % (self.name, len(x), list(x)))
            x = x[0]
        shape = getattr(x, "shape", None)
        if shape is not None:
            Functional._check_shape(self, 0, _shape_tuple(shape),
                                    self._input_layer._batch_input_shape)
        return x

    def _input_shape(self):
        """The model's input shape, batch None: its Input's, else its first
        layer's input_shape (or a built first Dense's input size), else the
        last call's; None when not known."""
        if self._input_layer is not None:  # its batch size too, when given
            return tuple(self._input_layer._batch_input_shape)
        first = self.layers[0] if self.layers else None
        shape = getattr(first, "_batch_input_shape", None)
        if shape is None and isinstance(first, Dense) and first.built:
            shape = (None, int(first.kernel.shape[0]))
        return shape if shape is not None else self._call_shape

    def _output_shapes(self):
        """Each layer's output shape (batch None) from the model's input
        shape through each layer's compute_output_shape; None from the first
        layer whose output shape cannot be found on, or all None when the input
        shape is not known."""
        shape, out = self._input_shape(), []
        for l in self.layers:
            shape = None if shape is None else _layer_output_shape(l, shape)
            out.append(shape)
        return out

    def _output_shape(self):
        """The shape the layers so far give (batch None), or None."""
        shapes = self._output_shapes()
        return shapes[-1] if shapes else self._input_shape()

    def get_config(self):
        """Keras 2.11's: the model's name and each layer's config by class
        name, {"class_name": ..., "config": layer.get_config()}, first the
        model's InputLayer when its input shape was given (an Input, or the
        one made for a first layer given input_shape), a layer given an
        input shape with its "batch_input_shape" (as Keras's base layer
        config has it); "build_input_shape" when the model learnt its input
        shape from a call or build(). Every layer must have get_config (a
        plain callable is Keras's NotImplementedError for a layer without
        one)."""
        configs = []
        if self._input_layer is not None:
            configs.append({"class_name": "InputLayer", "config": self._input_layer.get_config()})
        for l in self.layers:
            if not hasattr(l, "get_config"):
                raise NotImplementedError(
                    "Layer %s has arguments that vdev cannot serialize: %r is a callable, not "
                    "a layer with get_config (wrap it in vdev.layers.Lambda)"
                    % (getattr(l, "__name__", type(l).__name__), l))
            cfg = dict(l.get_config())
            shape = getattr(l, "__dict__", {}).get("_batch_input_shape")
            if shape is not None and "batch_input_shape" not in cfg:
                cfg["batch_input_shape"] = tuple(shape)
            configs.append({"class_name": type(l).__name__, "config": cfg})
        config = {"name": self.name, "layers": copy.deepcopy(configs)}
        if self._input_layer is None and self._call_shape is not None:
            config["build_input_shape"] = self._call_shape
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Keras's: a new model (fresh weights, each layer made from its
        config by its class: vdev.layers', Sequential, or custom_objects'),
        each added in order (an InputLayer entry, Keras's first when the
        model has an input shape, is the model's Input again), built when
        the config gives its input shape or has build_input_shape. A list of
        layer configs (Keras's older form) is taken too."""
        if isinstance(config, dict) and "name" in config:
            name, layer_configs = config["name"], config["layers"]
            build_input_shape = config.get("build_input_shape")
        else:
            name, layer_configs, build_input_shape = None, config, None
        model = cls(name=name)
        for lc in layer_configs:
            klass = _layer_class(lc["class_name"], custom_objects)
            cfg = dict(lc["config"])
            if (lc["class_name"] != "InputLayer" and getattr(klass.from_config, "__func__", None)
                    is Layer.from_config.__func__):
                cfg = _keras_config(cfg)
            model.add(klass.from_config(cfg))
        if (build_input_shape and isinstance(build_input_shape, (tuple, list))
                and model._input_shape() is None):
            model.build(build_input_shape)
        return model

    @property
    def _batch_input_shape(self):
        """The model's input shape (batch None) when known, as a layer's, so
        a model inside another gives it its input shape."""
        return self._input_shape()

    def compute_output_shape(self, input_shape):
        """Keras's: input_shape through each layer's compute_output_shape
        (None from a layer without one)."""
        shape = tuple(input_shape)
        for l in self.layers:
            shape = _layer_output_shape(l, shape)
            if shape is None:
                return None
        return shape

    def __call__(self, inputs, training=None, mask=None):
        """The layers applied in order to ``inputs``. ``training`` is
        Keras's: a layer inside called without it takes it (Dropout);
        ``mask`` is taken as Keras's ``__call__`` takes it and changes nothing."""
        from ._core_layers import training_scope
        x = inputs = self._check_input(inputs)
        with training_scope(training):
            for l in self.layers:
                x = l(x)
        shape = getattr(inputs, "shape", None)
        if shape is not None and len(shape):
            self._call_shape = (None,) + tuple(int(d) for d in tuple(shape)[1:])
        return x

    @property
    def variables(self):
        """Every layer's variables in order, each once: a layer used twice
        (shared weights) lists its variables at their first use, as Keras."""
        return _dedup(v for l in self.layers for v in getattr(l, "variables", []))

    def _sublayers(self):
        return self.layers

    @property
    def built(self):
        """Whether every layer is built (Keras builds a Sequential whole)."""
        return all(getattr(l, "built", True) for l in self.layers)

    def summary(self, line_length=None, positions=None, print_fn=None):
        """Keras 2.11's table of the layers (print_summary of a sequential
        model): name (type), output shape (None for the batch), parameters,
        each row starting with a space and followed by a line of spaces; a
        field too long for its column goes on over the next lines (cut after
        "),", "},", "],", "',", as Keras); then the totals. (Keras 2.13+
        cut each column but the last one character shorter, and add the
        weights' memory size to the totals.) Every layer must
        be built (Keras's error otherwise). print_fn gets each line (print
        when None)."""
        if not self.built:
            raise ValueError("This model has not yet been built. Build the model first by "
                             "calling `build()` or by calling the model on a batch of data.")
        print_fn = print_fn or print
        line_length = line_length or 65
        positions = positions or [0.45, 0.85, 1.0]
        if positions[-1] <= 1:
            positions = [int(line_length * p) for p in positions]

        def row(fields):
            _row(fields, positions, print_fn)

        print_fn('Model: "%s"' % self.name)
        print_fn("_" * line_length)
        row(["Layer (type)", "Output Shape", "Param #"])
        print_fn("=" * line_length)
        for l, out in zip(self.layers, self._output_shapes()):
            units = getattr(l, "units", None)
            if out is not None:
                shape = str(out)
            else:
                shape = "(None, %d)" % units if units is not None else "?"
            n = l.count_params() if hasattr(l, "count_params") else 0
            name = getattr(l, "name", None) or getattr(l, "__name__", "?")
            row(["%s (%s)" % (name, type(l).__name__), shape, n])
            print_fn(" " * line_length)
        print_fn("=" * line_length)
        total = self.count_params()
        trainable = sum(int(np.prod([int(d) for d in v.shape])) for v in self.trainable_weights)
        print_fn("Total params: %s" % "{:,}".format(total))
        print_fn("Trainable params: %s" % "{:,}".format(trainable))
        print_fn("Non-trainable params: %s" % "{:,}".format(total - trainable))
        print_fn("_" * line_length)


class MLP(Sequential):
    """sizes[0] → sizes[1] → ... → sizes[-1]: `activation` after each layer
    but the last, `output_activation` after the last; layer i's seed is
    seed * 1000003 + i * 7919 + 1, as in vdev_mlp_new."""

    def __init__(self, sizes, activation="relu", output_activation=None, seed=0, name=None):
        sizes = [_lib.index(s, "an MLP's sizes") for s in sizes]
        if len(sizes) < 2:
            raise ValueError("an MLP needs at least two sizes, got %r" % (sizes,))
        layers = []
        for i in range(len(sizes) - 1):
            act = output_activation if i + 2 == len(sizes) else activation
            s = (_lib.index(seed, "seed") * 1000003 + i * 7919 + 1) & (2**64 - 1)
            layers.append(Dense(sizes[i + 1], activation=act, input_dim=sizes[i], seed=s,
                                name="dense_%d" % i))
        super().__init__(layers, name)
