"""Keras 2.11's functional API for vdev (engine/input_layer.py,
engine/keras_tensor.py, engine/node.py, engine/functional.py): ``Input``
makes a symbolic tensor (a KerasTensor: a shape with the batch None, a
dtype, a name, and the layer call that made it); a vdev layer called on
symbolic tensors records the call (a Node) and gives symbolic tensors of
its output shape, building its variables on the way; ``Model(inputs,
outputs)`` (class Functional) finds the layers between them as Keras's
_map_graph_network does (layers ordered by depth, the same "Graph
disconnected" error) and, called on tensors or numpy arrays, runs each
layer call in that order. Its training methods are vdev/_fit.py's; its
summary is Keras 2.11's print_summary. A symbolic tensor is no value: a vdev
op given one (vdev.add(x, 1.0)) is a TypeError naming layers.Lambda."""

import collections
import copy
import threading
import warnings

import numpy as np

from . import _fit, _ops
from ._shape import TensorShape
from ._tensor import Tensor, as_dtype, float32
from .layers import Conv2D, Dense, Layer, _dedup, _unique_name

__all__ = ["Functional", "Input", "InputLayer", "KerasTensor"]

KerasHistory = collections.namedtuple("KerasHistory", ["layer", "node_index", "tensor_index"])

_uid_lock = threading.Lock()
_uids = {}


def _get_uid(prefix):
    """1, 2, 3, ... per prefix in this process (Keras's backend.get_uid,
    which numbers Input layers input_1, input_2, ...)."""
    with _uid_lock:
        _uids[prefix] = _uids.get(prefix, 0) + 1
        return _uids[prefix]


def _tuple(shape):
    return tuple(None if d is None else int(d) for d in shape)


class KerasTensor:
    """A symbolic tensor: ``shape`` (a TensorShape, the batch None unless
    Input's batch_size gave it), ``dtype``, ``name``, and the layer call that
    made it (``_keras_history``). It holds no value: vdev's ops refuse it
    (a TypeError saying to wrap the op in a layers.Lambda)."""

    def __init__(self, shape, dtype, name, history):
        self._shape = TensorShape(shape)
        self.dtype = dtype
        self.name = name
        self._keras_history = history

    @property
    def shape(self):
        return self._shape

    def get_shape(self):
        return self._shape

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def node(self):
        layer, node_index, _ = self._keras_history
        return layer._inbound_nodes[node_index]

    def _spec(self):
        # Keras's TensorSpec's text, vdev's dtype in it
        return "TensorSpec(shape=%s, dtype=%r, name=%s)" % (
            tuple.__repr__(self._shape), self.dtype,
            repr(self.name) if isinstance(self._keras_history.layer, InputLayer) else None)

    def __str__(self):
        return "KerasTensor(type_spec=%s, name=%r, description=\"created by layer '%s'\")" % (
            self._spec(), self.name, self._keras_history.layer.name)

    def __repr__(self):
        return "<KerasTensor: shape=%s dtype=%s (created by layer '%s')>" % (
            tuple.__repr__(self._shape), self.dtype.name, self._keras_history.layer.name)

    def _refuse(self, *args, **kwargs):
        raise TypeError(
            "You are passing %s, a symbolic Keras input/output, to a vdev op or a Python "
            "operator: it holds no value. vdev's functional models take vdev layers only: wrap "
            "the op in a vdev.layers.Lambda (Lambda(lambda t: vdev.add(t, 1.0))(x)) or use a "
            "merge layer (vdev.layers.Add()([x, y]))" % (self,))

    __array__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __matmul__ = __rmatmul__ = __neg__ = __pow__ = _refuse
    __getitem__ = __iter__ = __len__ = __bool__ = __float__ = __int__ = __index__ = _refuse


class Node:
    """One call of a layer: its first argument (a symbolic tensor or a list
    of them), the other arguments, and its output tensors; the node's index
    is its place in layer._inbound_nodes."""

    def __init__(self, layer, call_args=None, call_kwargs=None, outputs=(), is_input=False):
        self.layer = layer
        self.call_args = call_args  # (the first argument, more positional arguments)
        self.call_kwargs = dict(call_kwargs or {})
        self.is_input = is_input
        first = call_args[0] if call_args else None
        self.keras_inputs = ([] if first is None else
                             list(first) if isinstance(first, (list, tuple)) else [first])
        self.outputs = list(outputs)
        _inbound_nodes(layer).append(self)

    @property
    def parent_nodes(self):
        return [t.node for t in self.keras_inputs]

    def iterate_inbound(self):
        for t in self.keras_inputs:
            h = t._keras_history
            yield h.layer, h.node_index, h.tensor_index, t

    def output_shapes(self):
        shapes = [_tuple(t.shape) for t in self.outputs]
        return shapes if len(shapes) > 1 or self.is_input else shapes[0]


def _inbound_nodes(layer):
    nodes = layer.__dict__.get("_inbound_nodes")
    if nodes is None:
        nodes = layer.__dict__["_inbound_nodes"] = []
    return nodes


class InputLayer(Layer):
    """Keras's InputLayer: the layer whose one node makes an Input's
    symbolic tensor; called, it gives its input back."""

    def __init__(self, input_shape=None, batch_size=None, dtype=None, input_tensor=None,
                 sparse=None, name=None, ragged=None, type_spec=None, **kwargs):
        if "batch_input_shape" in kwargs:  # Keras's: how its get_config gives the shape
            batch_input_shape = kwargs.pop("batch_input_shape")
            if input_shape and batch_input_shape:
                raise ValueError("Only provide the input_shape OR batch_input_shape argument "
                                 "to InputLayer, not both at the same time.")
            batch_size, input_shape = batch_input_shape[0], tuple(batch_input_shape)[1:]
        if kwargs:
            raise ValueError("Unrecognized keyword arguments: %s" % (list(kwargs.keys()),))
        for arg, v in (("tensor", input_tensor), ("type_spec", type_spec)):
            if v is not None:
                raise ValueError("vdev's Input takes %s=None only: give its shape (and dtype)"
                                 % (arg,))
        if sparse or ragged:
            raise ValueError("vdev's Input takes sparse and ragged None or False only: vdev "
                             "has no sparse or ragged tensors")
        super().__init__(name or "input_%d" % _get_uid("input"))
        self.dtype = float32 if dtype is None else as_dtype(dtype)
        if isinstance(input_shape, int):
            input_shape = (input_shape,)
        self._batch_input_shape = (batch_size,) + _tuple(input_shape)
        self.batch_size = batch_size
        self.is_placeholder = True
        t = KerasTensor(self._batch_input_shape, self.dtype, self.name, KerasHistory(self, 0, 0))
        Node(self, outputs=[t], is_input=True)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {"batch_input_shape": self._batch_input_shape, "dtype": self.dtype.name,
                "sparse": False, "ragged": False, "name": self.name}

    def __call__(self, inputs, training=None, mask=None):
        return inputs


def Input(shape=None, batch_size=None, name=None, dtype=None, sparse=None, tensor=None,
          ragged=None, type_spec=None, **kwargs):
    """Keras's ``Input``: a symbolic tensor of shape ``(batch_size,) +
    shape`` (batch_size None: any) and dtype (float32 by default; vdev has
    float32 and int32), named ``name`` (input_1, input_2, ... by default),
    to call layers on and give to ``vdev.models.Model``. ``batch_shape`` (or
    ``batch_input_shape``) gives the batch size and shape together.
    ``tensor``, ``type_spec``, ``sparse`` and ``ragged``: only their
    defaults."""
    if sparse and ragged:
        raise ValueError("Cannot set both `sparse` and `ragged` to `True` in a Keras `Input`.")
    batch_input_shape = kwargs.pop("batch_input_shape", kwargs.pop("batch_shape", None))
    if shape is not None and batch_input_shape is not None:
        raise ValueError("Only provide the `shape` OR `batch_input_shape` argument to Input, "
                         "not both at the same time.")
    if batch_input_shape is None and shape is None and tensor is None and type_spec is None:
        raise ValueError("Please provide to Input a `shape` or a `tensor` or a `type_spec` "
                         "argument. Note that `shape` does not include the batch dimension.")
    if kwargs:
        raise ValueError("Unrecognized keyword arguments: %s" % (list(kwargs.keys()),))
    if batch_input_shape:
        batch_size, shape = batch_input_shape[0], tuple(batch_input_shape)[1:]
    layer = InputLayer(input_shape=shape, batch_size=batch_size, dtype=dtype,
                       input_tensor=tensor, sparse=sparse, name=name, ragged=ragged,
                       type_spec=type_spec)
    return _inbound_nodes(layer)[0].outputs[0]


# ---- a layer called on symbolic tensors ----

def is_symbolic(inputs):
    """Whether inputs is a symbolic tensor or a list/tuple holding one."""
    if isinstance(inputs, KerasTensor):
        return True
    return isinstance(inputs, (list, tuple)) and any(isinstance(t, KerasTensor) for t in inputs)


def _single_input(layer):
    """Whether layer takes one tensor (Keras's InputSpec of one input)."""
    from ._conv_layers import Flatten, _Pooling2D
    from ._embedding import Embedding
    from ._pooling_layers import _GlobalPooling
    return isinstance(layer, (Dense, Conv2D, Flatten, _Pooling2D, _GlobalPooling, Embedding,
                              InputLayer))


def _check_width(layer, shape):
    """Keras's InputSpec check of a built Dense's or Conv2D's last axis;
    an unbuilt one given an unknown last size is Keras's build error."""
    if hasattr(layer, "_check_input_shape"):  # Conv2DTranspose: its own (Keras's) checks
        return layer._check_input_shape(shape)
    if getattr(layer, "kernel", None) is None:
        if isinstance(layer, Dense):
            raise ValueError("The last dimension of the inputs to a Dense layer should be "
                             "defined. Found None. Full input shape received: %s" % (shape,))
        raise ValueError("The channel dimension of the inputs should be defined. The "
                         "input_shape received is %s, where axis -1 (0-based) is the channel "
                         "dimension, which found to be `None`." % (shape,))
    want = (int(layer.kernel.shape[0]) if isinstance(layer, Dense) else
            int(layer.kernel.shape[-2]) if isinstance(layer, Conv2D) else None)
    if want is not None and shape[-1] is not None and shape[-1] != want:
        raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected axis '
                         "-1 of input shape to have value %d, but received input with shape %s"
                         % (layer.name, want, shape))


def _zeros_run(layer, inputs, args, kwargs):
    """The layer called on zeros of the inputs' shapes (batch 1 where it is
    None): (its output shapes, batch None where the input's was, and dtypes)."""
    def zeros(t):
        if None in tuple(t.shape)[1:]:
            raise ValueError("vdev cannot find the output shape of layer \"%s\" on %r, whose "
                             "shape has an unknown size: give the layer compute_output_shape "
                             "(a Lambda, output_shape)" % (layer.name, t))
        shape = (1 if t.shape[0] is None else t.shape[0],) + tuple(t.shape)[1:]
        return _ops.convert_to_tensor(np.zeros(shape, t.dtype.as_numpy_dtype))
    flat = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    values = [zeros(t) for t in flat]
    out = layer(values if isinstance(inputs, (list, tuple)) else values[0], *args, **kwargs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    unknown = any(t.shape[0] is None for t in flat)
    return ([((None,) if unknown else (int(o.shape[0]),)) + _tuple(o.shape)[1:] for o in outs],
            [o.dtype for o in outs])


def _output_specs(layer, inputs, args, kwargs):
    """(output shapes, dtypes) of layer on the symbolic inputs, the layer
    built for them (as Keras's _maybe_build), with Keras's shape checks."""
    from .models import Sequential, _build
    flat = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    shapes = ([_tuple(t.shape) for t in flat] if isinstance(inputs, (list, tuple))
              else _tuple(inputs.shape))
    if isinstance(layer, Functional):
        conformed = []
        for i, (t, ref) in enumerate(zip(flat, layer.inputs)):
            shape, spec = _tuple(t.shape), _tuple(ref.shape)
            layer._check_shape(i, shape, spec)
            if len(shape) == len(spec) + 1 and shape[-1] == 1:  # as _conform
                shape = shape[:-1]
            elif len(shape) == len(spec) - 1 and spec[-1] == 1:
                shape = shape + (1,)
            conformed.append(shape)
        out = layer.compute_output_shape(conformed if len(conformed) > 1 else conformed[0])
        outs = out if isinstance(out, list) else [out]
        return outs, [t.dtype for t in layer.outputs]
    out = None
    if hasattr(layer, "compute_output_shape"):
        try:
            out = layer.compute_output_shape(shapes)
        except NotImplementedError:
            out = None
    if out is None:
        return _zeros_run(layer, inputs, args, kwargs)
    from ._conv_layers import Flatten
    from ._merge_layers import _Merge
    if isinstance(layer, (Dense, Conv2D, Sequential)):
        _build(layer, shapes)
        if isinstance(layer, (Dense, Conv2D)):
            _check_width(layer, shapes)
    elif isinstance(layer, _Merge):
        layer._check_dtypes(inputs)  # Keras's op error, as its model is made
    dtype = flat[0].dtype
    if not isinstance(layer, (Flatten, _Merge, InputLayer)):
        dtype = float32  # vdev's layers compute in float32
    outs = out if isinstance(out, list) else [out]
    return [_tuple(o) for o in outs], [dtype] * len(outs)


def symbolic_call(layer, inputs, args, kwargs):
    """layer called on symbolic tensors: a Node recorded on the layer, and
    its symbolic outputs (one tensor, or a list for a model of several)."""
    flat = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not all(isinstance(t, KerasTensor) for t in flat):
        raise TypeError("Layer \"%s\" was called on %r, a list mixing symbolic tensors and "
                        "values: in a functional model every input of a layer is a symbolic "
                        "tensor (make a value an Input, or a Lambda's constant)"
                        % (layer.name, inputs))
    expects = (len(layer.inputs) if isinstance(layer, Functional) else
               1 if _single_input(layer) else None)
    if hasattr(layer, "_symbolic_expects"):  # a Sequential: Keras's count check
        expects = layer._symbolic_expects(inputs)
    if expects is not None and len(flat) != expects:
        raise ValueError('Layer "%s" expects %d input(s), but it received %d input tensors. '
                         "Inputs received: %r" % (layer.name, expects, len(flat), flat))
    if isinstance(inputs, (list, tuple)) and len(flat) == 1 and expects == 1:
        inputs = flat[0]
    shapes, dtypes = _output_specs(layer, inputs, args, kwargs)
    index = len(_inbound_nodes(layer))
    outputs = [KerasTensor(s, d, "%s/output%s:%d" % (layer.name, "_%d" % index if index else "",
                                                    i), KerasHistory(layer, index, i))
               for i, (s, d) in enumerate(zip(shapes, dtypes))]
    Node(layer, (inputs,) + tuple(args), kwargs, outputs)
    if isinstance(layer, Functional):
        return outputs if isinstance(layer._nested_outputs, list) else outputs[0]
    return outputs[0] if len(outputs) == 1 else outputs


# ---- the graph ----

def _build_map(outputs, input_ids):
    """Keras's _build_map: the nodes from the inputs to outputs (depth
    first from each output), and each layer's place in that walk."""
    finished, in_progress, ordered, layer_indices = set(), set(), [], {}

    def walk(t):
        layer, node_index, _ = t._keras_history
        node = _inbound_nodes(layer)[node_index]
        if node in finished:
            return
        if node in in_progress:
            raise ValueError("Tensor %s from layer '%s' is part of a cycle." % (t, layer.name))
        if layer not in layer_indices:
            layer_indices[layer] = len(layer_indices)
        in_progress.add(node)
        if not node.is_input:
            for x in node.keras_inputs:
                walk(x)
        finished.add(node)
        in_progress.remove(node)
        ordered.append(node)

    for t in outputs:
        walk(t)
    return ordered, layer_indices


def _map_graph_network(inputs, outputs):
    """Keras's _map_graph_network: (the nodes by depth, the layers ordered
    by decreasing depth, then by the walk), with its errors."""
    ordered, layer_indices = _build_map(outputs, {id(x) for x in inputs})
    nodes_depths, layers_depths = {}, {}
    for node in reversed(ordered):
        depth = nodes_depths.setdefault(node, 0)
        depth = max(depth, layers_depths.get(node.layer, 0))
        layers_depths[node.layer] = depth
        nodes_depths[node] = depth
        for parent in node.parent_nodes:
            nodes_depths[parent] = max(depth + 1, nodes_depths.get(parent, 0))
    for x in inputs:  # inputs not connected to the outputs
        layer = x._keras_history.layer
        if layer not in layers_depths:
            layers_depths[layer] = 0
            layer_indices[layer] = -1
            nodes_depths[_inbound_nodes(layer)[0]] = 0
    nodes_by_depth = collections.defaultdict(list)
    for node, depth in nodes_depths.items():
        nodes_by_depth[depth].append(node)
    layers_by_depth = collections.defaultdict(list)
    for layer, depth in layers_depths.items():
        layers_by_depth[depth].append(layer)
    layers = []
    for depth in sorted(layers_by_depth, reverse=True):
        layers.extend(sorted(layers_by_depth[depth], key=lambda l: layer_indices[l]))
    computable = {id(x) for x in inputs}
    accessed = []
    for depth in sorted(nodes_by_depth, reverse=True):
        for node in nodes_by_depth[depth]:
            if node.is_input:
                continue
            for x in node.keras_inputs:
                if id(x) not in computable:
                    raise ValueError("Graph disconnected: cannot obtain value for tensor %s at "
                                     "layer \"%s\". The following previous layers were accessed "
                                     "without issue: %s" % (x, node.layer.name, accessed))
            computable.update(id(x) for x in node.outputs)
            accessed.append(node.layer.name)
    names = [l.name for l in layers]
    for name in names:
        if names.count(name) != 1:
            raise ValueError("The name \"%s\" is used %d times in the model. All layer names "
                             "should be unique." % (name, names.count(name)))
    return dict(nodes_by_depth), layers


def _flat(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _row(fields, positions, print_fn):
    """Keras 2.11's print_row: each field in its column, a field too long
    going on over the next lines (cut after "),", "},", "],", "',")."""
    left = [str(f) for f in fields]
    while any(left):
        line = ""
        for col in range(len(left)):
            start = positions[col - 1] if col > 0 else 0
            space = 2 if col != len(positions) - 1 else 0
            cutoff = positions[col] - start - space
            fit = left[col][:cutoff]
            breaks = [fit.find(x) + len(x) for x in ("),", "},", "],", "',")
                      if fit.find(x) >= 0]
            if breaks:
                cutoff = min(breaks)
                fit = fit[:cutoff]
            if col == 0:
                line += " "
            line += fit + " " * space
            left[col] = left[col][cutoff:]
            line += " " * (positions[col] - len(line))
        print_fn(line)


def _layer_output_shape(layer):
    """Keras's Layer.output_shape for summary(): the shape of its outputs
    when every call gave the same ("multiple" otherwise)."""
    nodes = _inbound_nodes(layer)
    shapes = {str(n.output_shapes()) for n in nodes}
    return nodes[0].output_shapes() if len(shapes) == 1 else "multiple"


class Functional(Layer, _fit.Model):
    """Keras's functional Model: ``Model(inputs, outputs, name=None)``, the
    layers between ``inputs`` (vdev.Input tensors: one, or a list) and
    ``outputs`` (one symbolic tensor, or a list). Called on a tensor or
    numpy array (a list of them for several inputs), it runs each layer call
    in Keras's order and gives the output (a list for several); a layer
    called twice is one layer (its weights shared). compile, fit, evaluate,
    predict, save_weights and load_weights are vdev/_fit.py's."""

    def __init__(self, inputs=None, outputs=None, name=None, trainable=True, **kwargs):
        if kwargs:
            raise TypeError("Keyword argument not understood:", next(iter(kwargs)))
        if inputs is None or outputs is None:
            raise TypeError("vdev's Model takes inputs and outputs (Keras's functional API: "
                            "Model(inputs=vdev.Input(...), outputs=...)); vdev has no "
                            "subclassed models (Model() with a call method)")
        super().__init__(name or _unique_name("model"), trainable)
        if isinstance(inputs, dict) or isinstance(outputs, dict):
            raise ValueError("vdev's Model takes its inputs and outputs as one symbolic tensor "
                             "or a list of them, not a dict")
        if isinstance(inputs, (list, tuple)) and len(inputs) == 1:
            inputs = inputs[0]
        if isinstance(outputs, (list, tuple)) and len(outputs) == 1:
            outputs = outputs[0]
        self._nested_inputs = list(inputs) if isinstance(inputs, tuple) else inputs
        self._nested_outputs = list(outputs) if isinstance(outputs, tuple) else outputs
        self.inputs = _flat(inputs)
        self.outputs = _flat(outputs)
        self._validate()
        self._nodes_by_depth, self.layers = _map_graph_network(self.inputs, self.outputs)
        self._output_nodes = [t.node for t in self.outputs]
        self.input_names = [t._keras_history.layer.name for t in self.inputs]
        self.output_names = []
        for t in self.outputs:  # Keras's _set_output_names
            proposal, k = t._keras_history.layer.name, 1
            while proposal in self.output_names:
                proposal = "%s_%d" % (t._keras_history.layer.name, k)
                k += 1
            self.output_names.append(proposal)

    def _validate(self):
        """Keras's _validate_graph_inputs_and_outputs, in its words."""
        if len({id(i) for i in self.inputs}) != len(self.inputs):
            raise ValueError("The list of inputs passed to the model contains the same input "
                             "multiple times. All inputs should only appear once.Received "
                             "inputs=%s" % (self.inputs,))
        for x in self.inputs:
            if not isinstance(x, KerasTensor):
                raise ValueError("Input tensors to a Functional model must come from "
                                 "`tf.keras.Input`. Received inputs=%s (missing previous layer "
                                 "metadata)." % (x,))
            if not x.node.is_input:
                raise ValueError("vdev's Model takes as inputs the tensors of vdev.Input only, "
                                 "not %r, made by layer \"%s\" (Keras copies the layers "
                                 "before it): make an Input of its shape"
                                 % (x, x._keras_history.layer.name))
        for x in self.outputs:
            if not isinstance(x, KerasTensor):
                raise ValueError("Output tensors of a Functional model must be the output of a "
                                 "TensorFlow `Layer` (thus holding past layer metadata). Found: "
                                 "%s" % (x,))

    # ---- what it is ----
    def _sublayers(self):
        return self.layers

    @property
    def variables(self):
        """Every layer's variables in the order of ``layers``, each once."""
        return _dedup(v for l in self.layers for v in getattr(l, "variables", []))

    @property
    def built(self):
        return True

    @property
    def _n_inputs(self):
        return len(self.inputs)

    @property
    def input(self):
        return self._nested_inputs

    @property
    def output(self):
        return self._nested_outputs

    @property
    def input_shape(self):
        s = [_tuple(t.shape) for t in self.inputs]
        return s if isinstance(self._nested_inputs, list) else s[0]

    @property
    def output_shape(self):
        s = [_tuple(t.shape) for t in self.outputs]
        return s if isinstance(self._nested_outputs, list) else s[0]

    def get_layer(self, name=None, index=None):
        """Keras's: the layer named name, or at index of ``layers``."""
        if index is not None and name is not None:
            raise ValueError("Provide only a layer name or a layer index. Received: index=%s, "
                             "name=%s." % (index, name))
        if index is not None:
            if len(self.layers) <= index:
                raise ValueError("Was asked to retrieve layer at index %s but model only has %d "
                                 "layers." % (index, len(self.layers)))
            return self.layers[index]
        if name is not None:
            for layer in self.layers:
                if layer.name == name:
                    return layer
            raise ValueError("No such layer: %s. Existing layers are: %s."
                             % (name, [l.name for l in self.layers]))
        raise ValueError("Provide either a layer name or layer index at `get_layer`.")

    def compute_output_shape(self, input_shape):
        """Keras's: the output shapes for input shapes (one tuple, or a list
        of one per input), through each layer's compute_output_shape (the
        shapes recorded at construction, batch changed, for a layer without
        one)."""
        shapes = ([tuple(s) for s in input_shape] if input_shape and isinstance(
            input_shape[0], (list, tuple)) else [tuple(input_shape)])
        if len(shapes) != len(self.inputs):
            raise ValueError("Invalid `input_shape` argument %s: the model expects %d input "
                             "tensors." % (input_shape, len(self.inputs)))
        known = {id(t): s for t, s in zip(self.inputs, shapes)}
        for depth in sorted(self._nodes_by_depth, reverse=True):
            for node in self._nodes_by_depth[depth]:
                if node.is_input:
                    continue
                ins = [known[id(t)] for t in node.keras_inputs]
                arg = ins if isinstance(node.call_args[0], (list, tuple)) else ins[0]
                out = None
                if hasattr(node.layer, "compute_output_shape"):
                    try:
                        out = node.layer.compute_output_shape(arg)
                    except NotImplementedError:
                        out = None
                if out is None:
                    batch = ins[0][0] if ins else None
                    out = [(batch,) + _tuple(t.shape)[1:] for t in node.outputs]
                for t, s in zip(node.outputs, out if isinstance(out, list) else [out]):
                    known[id(t)] = tuple(s)
        out = [known[id(t)] for t in self.outputs]
        return out if isinstance(self._nested_outputs, list) else out[0]

    # ---- its config ----
    def get_config(self):
        """Keras 2.11's get_network_config: ``name``, ``trainable``,
        ``layers`` (each {"class_name", "config": its get_config(),
        "name", "inbound_nodes"}: each call of it in the model as a list of
        [layer, node index, tensor index, {the call's other arguments}] per
        input tensor), ``input_layers`` and ``output_layers`` ([layer, node
        index, tensor index] each). A model inside counts its calls from 1,
        as in Keras, whose models have a call of their own numbered 0."""
        from .models import _network_config
        return copy.deepcopy(_network_config(self))

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Keras 2.11's: a new model of the config's graph, each layer made
        from its config (vdev.layers' classes, Sequential, Model, or
        custom_objects'; fresh weights) and called as the config's nodes
        say, in Keras's order (a call waits for the calls it takes)."""
        from .models import _functional_from_config
        return _functional_from_config(cls, config, custom_objects)

    # ---- calling it ----
    def _input_list(self, inputs):
        """inputs as a list of one value per model input, their count
        checked as Keras's InputSpec checks it."""
        if isinstance(inputs, _fit._Inputs):
            inputs = inputs.arrays
        if isinstance(inputs, dict):
            # Keras's _flatten_to_reference_inputs: by the Inputs' names,
            # a warning for keys beyond them; when a name is missing, the
            # values in the order of their keys sorted (tf.nest.flatten)
            if len(inputs) > len(self.input_names):
                warnings.warn("Input dict contained keys %s which did not match any model "
                              "input. They will be ignored by the model."
                              % ([n for n in inputs if n not in self.input_names],),
                              stacklevel=3)
            missing = [n for n in self.input_names if n not in inputs]
            if not missing:
                return [inputs[n] for n in self.input_names]
            inputs = [inputs[k] for k in sorted(inputs)]
        if isinstance(inputs, (list, tuple)) and (len(self.inputs) > 1 or all(
                isinstance(x, (np.ndarray, Tensor, KerasTensor)) for x in inputs)):
            flat = list(inputs)
        else:
            flat = [inputs]
        if len(flat) != len(self.inputs):
            raise ValueError('Layer "%s" expects %d input(s), but it received %d input tensors. '
                             "Inputs received: %s" % (self.name, len(self.inputs), len(flat),
                                                      flat))
        return flat

    def _check_shape(self, i, shape, spec):
        """Keras's InputSpec check of a Functional's input i: each size the
        Input fixes but the batch (Keras's spec is shape_with_no_batch_size),
        a trailing 1 of either left out."""
        spec = (None,) + tuple(spec[1:]) if spec else spec
        s, r = list(shape), list(spec)
        if s and s[-1] == 1:
            s = s[:-1]
        if r and r[-1] == 1:
            r = r[:-1]
        if any(a is not None and b is not None and a != b for a, b in zip(r, s)):
            raise ValueError('Input %d of layer "%s" is incompatible with the layer: expected '
                             "shape=%s, found shape=%s" % (i, self.name, spec, shape))

    def _conform(self, i, x, ref):
        """Keras's InputSpec shape check, then _conform_to_reference_input:
        a trailing 1 dropped or added to match the Input's rank, and the
        Input's dtype (a numpy array stays one, for each layer to make on
        its own device)."""
        if not isinstance(x, Tensor):
            x = np.asarray(x)
        shape = _tuple(x.shape)
        spec = _tuple(ref.shape)
        self._check_shape(i, shape, spec)
        if len(shape) == len(spec) + 1 and shape[-1] == 1:
            x = x[..., 0] if isinstance(x, np.ndarray) else _ops.reshape(x, list(shape[:-1]))
        elif len(shape) == len(spec) - 1 and spec[-1] == 1:
            x = x[..., None] if isinstance(x, np.ndarray) else _ops.reshape(x, list(shape) + [1])
        if isinstance(x, np.ndarray):
            return x if x.dtype == ref.dtype.as_numpy_dtype else x.astype(
                ref.dtype.as_numpy_dtype)
        return x if x.dtype is ref.dtype else _ops._cast(x, ref.dtype)

    def _run(self, inputs, logits_node=None, training=None, mask=None):
        """The outputs for inputs: each node's layer called, deepest first;
        logits_node's layer (the output layer, for a cross-entropy on
        logits) called without its activation. An output no input leads to
        (an Input not among the model's) is Keras's AssertionError."""
        flat = self._input_list(inputs)
        values = {id(t): self._conform(i, x, t)
                  for i, (t, x) in enumerate(zip(self.inputs, flat))}
        for depth in sorted(self._nodes_by_depth, reverse=True):
            for node in self._nodes_by_depth[depth]:
                if node.is_input or any(id(t) not in values for t in node.keras_inputs):
                    continue
                first = node.call_args[0]
                arg = ([values[id(t)] for t in first] if isinstance(first, (list, tuple))
                       else values[id(first)])
                layer = node.layer
                if node is logits_node:
                    layer = copy.copy(layer)  # the same variables, no activation
                    layer.activation = None
                out = layer(arg, *node.call_args[1:], **node.call_kwargs)
                outs = out if len(node.outputs) > 1 else [out]
                for t, v in zip(node.outputs, outs):
                    values[id(t)] = v
        lost = [t for t in self.outputs if id(t) not in values]
        if lost:
            from ._merge_layers import _arg_text, _call_error
            raise _call_error(self, AssertionError, "Could not compute output %s" % (lost[0],), [
                ("inputs", _arg_text(inputs)), ("training", training), ("mask", mask)])
        # an output that is an Input's is the value given, which a numpy
        # array kept: Keras gives tensors
        out = [v if isinstance(v, Tensor) else _ops.convert_to_tensor(v)
               for v in (values[id(t)] for t in self.outputs)]
        return out if isinstance(self._nested_outputs, list) else out[0]

    def __call__(self, inputs, training=None, mask=None):
        """The model's outputs for inputs: a tensor or numpy array, or a list
        of them (one per Input, in the model's order; or a dict by the
        Inputs' names). ``training`` is Keras's: a layer inside called
        without it takes it (Dropout); ``mask`` changes nothing."""
        from ._core_layers import training_scope
        with training_scope(training):
            return self._run(inputs, training=training, mask=mask)

    # ---- training (vdev/_fit.py), for what differs ----
    def compile(self, *args, **kwargs):
        """_fit.Model's compile, for a model of one output."""
        if len(self.outputs) != 1:
            raise ValueError("vdev's compile takes models of one output; this one has %d (%s)"
                             % (len(self.outputs), ", ".join(self.output_names)))
        return super().compile(*args, **kwargs)

    def predict(self, x, *args, **kwargs):
        """_fit.Model's predict, for a model of one output."""
        if len(self.outputs) != 1:
            raise ValueError("vdev's predict takes models of one output; this one has %d (%s): "
                             "call the model on the batches" % (len(self.outputs),
                                                               ", ".join(self.output_names)))
        return super().predict(x, *args, **kwargs)

    def _output_layer(self):
        """The layer of the output's call (``layers[-1]`` is the last by
        depth: another where the output layer is also called earlier)."""
        return self._output_nodes[0].layer

    def _forward(self, x):
        """(what the loss takes, the output): for a string cross-entropy,
        the output layer's logits (its call without the activation) and the
        output."""
        if not self._from_probs:
            out = self(x)
            return out, out
        logits = self._run(x, logits_node=self._output_nodes[0])
        return logits, self._output_nodes[0].layer.activation(logits)

    # ---- summary ----
    def _sequential_like(self):
        """Keras's print_summary test: no depth with two nodes, no node of
        two inputs, no layer called twice in the model."""
        nodes = []
        for v in self._nodes_by_depth.values():
            if len(v) > 1 or (len(v) == 1 and len(v[0].keras_inputs) > 1):
                return False
            nodes += v
        for layer in self.layers:
            if sum(1 for n in _inbound_nodes(layer) if n in nodes) > 1:
                return False
        return True

    def summary(self, line_length=None, positions=None, print_fn=None):
        """Keras 2.11's summary of a functional model: a chain of layers as
        Sequential's table (its Input first); any other graph with a fourth
        column, "Connected to", each call's inputs as layer[node][tensor]
        (98 columns); then the totals."""
        print_fn = print_fn or print
        seq = self._sequential_like()
        line_length = line_length or (65 if seq else 98)
        positions = positions or ([0.45, 0.85, 1.0] if seq else [0.33, 0.55, 0.67, 1.0])
        if positions[-1] <= 1:
            positions = [int(line_length * p) for p in positions]
        header = ["Layer (type)", "Output Shape", "Param #"] + ([] if seq else ["Connected to"])
        print_fn('Model: "%s"' % self.name)
        print_fn("_" * line_length)
        _row(header, positions, print_fn)
        print_fn("=" * line_length)
        relevant = {n for v in self._nodes_by_depth.values() for n in v}
        for layer in self.layers:
            fields = ["%s (%s)" % (layer.name, type(layer).__name__), _layer_output_shape(layer),
                      layer.count_params()]
            if not seq:
                fields.append(["%s[%d][%d]" % (l.name, ni, ti)
                               for n in _inbound_nodes(layer) if n in relevant
                               for l, ni, ti, _ in n.iterate_inbound()])
            _row(fields, positions, print_fn)
            print_fn(" " * line_length)
        print_fn("=" * line_length)
        trainable = sum(int(np.prod([int(d) for d in v.shape])) for v in self.trainable_weights)
        other = sum(int(np.prod([int(d) for d in v.shape])) for v in self.non_trainable_weights)
        print_fn("Total params: %s" % "{:,}".format(trainable + other))
        print_fn("Trainable params: %s" % "{:,}".format(trainable))
        print_fn("Non-trainable params: %s" % "{:,}".format(other))
        print_fn("_" * line_length)
