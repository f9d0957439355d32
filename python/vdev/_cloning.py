"""Keras 2.11's ``clone_model`` (keras/models/cloning.py) for vdev's models:
a copy of a Sequential or functional model whose layers are made anew
(``clone_function(layer)``, by default the layer made from its config, so
with fresh weights) and called as the model's layers are called: the same
layers in the same graph, on new Inputs (each Input made from its
config, of the same name) or on the Inputs ``input_tensors`` gives.
A functional model is copied as Keras copies it: through its config
(Keras's get_network_config, each layer replaced by its clone) and
reconstruct_from_config (vdev/models.py), so the calls are made in
Keras's order. An input tensor that is a value, a vdev tensor, is
wrapped as Keras wraps it (``Input(tensor=...)``): an Input of its shape
(batch size included) and dtype, the value not kept (Keras's symbolic
tensor keeps its spec only)."""

__all__ = ["clone_model"]


def _clone_layer(layer):
    """Keras's default clone_function, ``layer.__class__.from_config(
    layer.get_config())``; a layer given an input shape that its config
    does not hold (vdev's Dense, Conv2D) gets it as ``input_shape``."""
    from .layers import Layer
    cfg = dict(layer.get_config())
    shape = getattr(layer, "_batch_input_shape", None)
    if (shape is not None and "batch_input_shape" not in cfg
            and getattr(type(layer).from_config, "__func__", None)
            is Layer.from_config.__func__):
        cfg["input_shape"] = tuple(shape[1:])
    return type(layer).from_config(cfg)


def _wrap_value(value, name):
    """Keras's ``Input(tensor=value, name=name)`` (TensorFlow 2, eager): the
    InputLayer of an Input of the value's shape, batch size included, and
    dtype; the value itself is not kept. Only a vdev tensor is a value
    here: anything else (a numpy array, which Keras 2.11's Input fails on
    too, reading its dtype) is a TypeError naming what to pass."""
    from ._functional import InputLayer
    from ._tensor import Tensor
    if not isinstance(value, Tensor):
        raise TypeError(
            "vdev's clone_model takes as input_tensors vdev.Input tensors or vdev tensors (a "
            "tensor is wrapped in an Input of its shape and dtype, as Keras's "
            "Input(tensor=...)), not a value of type %s%s: give vdev.constant(value) or the "
            "tensor of vdev.Input(shape, dtype=...)" % (
                type(value).__name__, " of shape %s" % (tuple(value.shape),)
                if isinstance(getattr(value, "shape", None), tuple) else ""))
    return InputLayer(batch_input_shape=tuple(int(d) for d in value.shape), dtype=value.dtype,
                      name=name)


def _clone_sequential_model(model, input_tensors, layer_fn):
    """Keras's _clone_sequential_model."""
    from ._functional import InputLayer, KerasTensor
    from .models import Sequential
    if not callable(layer_fn):
        raise ValueError("Expected `layer_fn` argument to be a callable. Received: "
                         "layer_fn=%s" % (layer_fn,))
    layers = [layer_fn(l) for l in model.layers]
    first = model._input_layer
    if input_tensors is None:
        if first is not None:  # Keras clones the InputLayer from its config
            layers.insert(0, InputLayer(**first.get_config()))
        return Sequential(layers, name=model.name)
    listed = input_tensors if isinstance(input_tensors, list) else [input_tensors]
    if len(listed) != 1:
        raise ValueError("To clone a `Sequential` model, we expect at most one tensor as part "
                         "of `input_tensors`. Received: input_tensors=%s" % (input_tensors,))
    x = list(input_tensors)[0] if isinstance(input_tensors, tuple) else listed[0]
    if not isinstance(x, KerasTensor):
        # Keras names it after the tensor ("input_wrapper_for_" + x.name),
        # which a vdev tensor has only as a Variable: else a default name
        name = getattr(x, "name", None)
        return Sequential([_wrap_value(x, name and "input_wrapper_for_" + str(name))] + layers,
                          name=model.name)
    origin = x._keras_history.layer
    if not isinstance(origin, InputLayer):
        raise ValueError("Cannot clone a `Sequential` model on top of a tensor that comes from "
                         "a Keras layer other than an `InputLayer`. Use the Functional API "
                         "instead. Received: input_tensors=%s" % (input_tensors,))
    return Sequential([origin] + layers, name=model.name)


def _clone_functional_model(model, input_tensors, layer_fn):
    """Keras's _clone_functional_model: the model's config with each layer
    replaced by its clone (an Input by a new InputLayer of its config, or
    by the layer of input_tensors' tensor in its place), then the graph
    made again from it."""
    from ._functional import Functional, InputLayer, KerasTensor
    from .models import _network_config, _reconstruct
    if not isinstance(model, Functional):
        raise ValueError("Expected `model` argument to be a `Model` instance. Received: "
                         "model=%r" % (model,))
    input_layers = [t._keras_history.layer for t in model.inputs]
    new_input_layers = {}  # id(an Input's layer of model) -> the layer in its place
    if input_tensors is not None:
        if isinstance(input_tensors, dict):  # tf.nest.flatten's order: by key
            flat = [input_tensors[k] for k in sorted(input_tensors)]
        elif isinstance(input_tensors, (list, tuple)):
            flat = list(input_tensors)
        else:
            flat = [input_tensors]
        for i, tensor in enumerate(flat):
            original = input_layers[i]  # Keras's IndexError for too many
            if not isinstance(tensor, KerasTensor):
                new_input_layers[id(original)] = _wrap_value(
                    tensor, "input_wrapper_for_" + original.name)
                continue
            layer = tensor._keras_history.layer
            if not isinstance(layer, InputLayer):
                raise ValueError("vdev's Model takes as inputs the tensors of vdev.Input only, "
                                 "not %r, made by layer \"%s\" (Keras copies the layers before "
                                 "it): make an Input of its shape" % (tensor, layer.name))
            new_input_layers[id(original)] = layer
    if not callable(layer_fn):
        raise ValueError("Expected `layer_fn` argument to be a callable. Received: "
                         "layer_fn=%s" % (layer_fn,))
    created = {}  # name -> the layer in the clone, as Keras's created_layers

    def copy_layer(layer):  # Keras's _copy_layer: the layer's entry is {}
        if id(layer) in new_input_layers:
            created[layer.name] = new_input_layers[id(layer)]
        elif any(layer is l for l in input_layers):
            created[layer.name] = InputLayer(**layer.get_config())
        else:
            created[layer.name] = layer_fn(layer)
        return {}

    config = _network_config(model, serialize_layer_fn=copy_layer)
    inputs, outputs = _reconstruct(config, created_layers=created)
    from ._subclassed_model import Model
    return Model(inputs, outputs, name=model.name)


def clone_model(model, input_tensors=None, clone_function=None):
    """Keras 2.11's ``clone_model``: a copy of a Sequential or functional
    model, of the same name, whose layers are ``clone_function(layer)``
    (default: the layer made anew from its config, so the copy has fresh
    weights; copy them with set_weights), called as the model's layers are.
    Its Inputs are new ones made from the model's (same names, shapes and
    dtypes), or ``input_tensors``: vdev.Input tensors, one per model input
    (a list; a dict is taken in its keys' order), a Sequential's one; a
    vdev tensor among them is wrapped in an Input of its shape (batch size
    included) and dtype, named "input_wrapper_for_" and the model input's
    name (a Sequential's: the tensor's name, which only a Variable has), as
    Keras's Input(tensor=...); another value (a numpy array) is a TypeError.
    A shared layer is cloned once and called as often as in the model; a
    model inside is cloned by ``clone_function`` as any layer (by default
    from its config)."""
    from .models import Sequential
    if clone_function is None:
        clone_function = _clone_layer
    if isinstance(model, Sequential):
        return _clone_sequential_model(model, input_tensors, clone_function)
    return _clone_functional_model(model, input_tensors, clone_function)
