"""Models, as ``tf.keras``: ``Sequential``, ``Model`` (Keras's functional
model, vdev/_functional.py), and ``MLP``, a stack of Dense
layers with the seeds vdev's C ``vdev_mlp_new`` uses, so a model built here
starts from the same weights as the C model of the same seed (and trains to
the same numbers). All have Keras's compile / fit / evaluate / predict and
save_weights / load_weights (vdev/_fit.py); a Sequential has Keras's
get_config / from_config, and ``clone_model`` clones one (fresh weights)."""

import copy

import numpy as np

from . import _lib
from ._fit import Model as _Training
from ._functional import Functional, _row
from .layers import Conv2D, Dense, Layer, _dedup, _keras_config

__all__ = ["MLP", "Model", "Sequential", "clone_model"]

# Keras's Model(inputs, outputs): a functional model (vdev/_functional.py)
Model = Functional


def _build(layer, shape):
    """Builds an unbuilt Dense or Conv2D for inputs of shape (batch None),
    and the layers of a Sequential one after the other."""
    if isinstance(layer, Sequential):
        for l in layer.layers:
            if shape is None:
                return
            _build(l, shape)
            shape = (tuple(l.compute_output_shape(shape))
                     if hasattr(l, "compute_output_shape") else None)
    elif isinstance(layer, (Dense, Conv2D)) and not layer.built and shape[-1] is not None:
        layer.build(shape[-1])


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
    if not isinstance(klass, type):
        raise ValueError("Unknown layer: '%s'. Please ensure you are using a "
                         "`keras.utils.custom_object_scope` and that this object is included in "
                         "the scope. See https://www.tensorflow.org/guide/keras/"
                         "save_and_serialize#registering_the_custom_object for details."
                         % (name,))
    return klass


def clone_model(model, input_tensors=None, clone_function=None):
    """Keras's clone_model for a Sequential model: a new Sequential of the
    same name whose layers are clone_function(layer) (default: the layer
    made anew from its config, ``type(layer).from_config(layer.get_config())``,
    with the layer's input shape), so the clone has fresh weights, not the
    model's (copy them with set_weights). input_tensors only None; a
    functional model is NotImplementedError (vdev clones Sequential models
    only)."""
    if input_tensors is not None:
        raise ValueError("vdev's clone_model takes input_tensors=None only")
    if not isinstance(model, Sequential):
        if isinstance(model, Functional):
            raise NotImplementedError("vdev's clone_model clones Sequential models only, not "
                                      "the functional model %r" % (model.name,))
        raise ValueError("Expected `model` argument to be a `Model` instance. Received: "
                         "model=%r" % (model,))

    def clone(layer):
        cfg = dict(layer.get_config())
        shape = getattr(layer, "_batch_input_shape", None)
        if (shape is not None and "batch_input_shape" not in cfg
                and getattr(type(layer).from_config, "__func__", None)
                is Layer.from_config.__func__):
            cfg["input_shape"] = tuple(shape[1:])
        return type(layer).from_config(cfg)

    layers = [(clone_function or clone)(l) for l in model.layers]
    return Sequential(layers, name=model.name)


class Sequential(Layer, _Training):
    """Keras's ``Sequential``: ``layers`` applied in order, each a vdev layer
    or any callable; ``add`` appends one. Keras's ``compile``, ``fit``,
    ``evaluate``, ``predict``, ``save_weights`` and ``load_weights`` come
    from vdev/_fit.py."""

    def __init__(self, layers=None, name=None, trainable=True):
        super().__init__(name, trainable)
        self.layers = []
        self._call_shape = None  # the last call's input shape, batch None
        for l in layers or []:
            self.add(l)

    def add(self, layer):
        """Appends ``layer``; a Dense or Conv2D is built at once when the
        model's input shape is known (its first layer was given input_dim or
        input_shape), as Keras builds a Sequential model then."""
        if not callable(layer):
            raise TypeError("The added layer must be callable. Received: layer=%r" % (layer,))
        # As Keras: the same layer may come twice (its weights shared), two
        # layers of one name may not.
        name = getattr(layer, "name", None)
        if name is not None and any(l is not layer and getattr(l, "name", None) == name
                                    for l in self.layers):
            raise ValueError("All layers added to a Sequential model should have unique names. "
                             "Name \"%s\" is already the name of a layer in this model. Update "
                             "the `name` argument to pass a unique name." % (name,))
        # As Keras: once the model knows its input (its first layer was
        # given input_dim or input_shape), each Dense or Conv2D added is
        # built at once from the output shape of the layers before it (each
        # layer's compute_output_shape), so the model is built, summary()
        # works, and under a strategy's scope() the variables are made there
        # (not later, inside strategy.run). An input shape the layer cannot
        # take is Keras's ValueError here, and the layer is not added.
        shape = self._output_shape() if self.layers else None
        if self.layers and shape is not None and hasattr(layer, "compute_output_shape"):
            layer.compute_output_shape(shape)  # checks the rank (and Conv2D's sizes)
        if shape is not None:
            _build(layer, shape)
        self.layers.append(layer)

    def _input_shape(self):
        """The model's input shape, batch None: its first layer's input_shape
        (or a built first Dense's input size), else the last call's; None
        when not known."""
        first = self.layers[0] if self.layers else None
        shape = getattr(first, "_batch_input_shape", None)
        if shape is None and isinstance(first, Dense) and first.built:
            shape = (None, int(first.kernel.shape[0]))
        return shape if shape is not None else self._call_shape

    def _output_shapes(self):
        """Each layer's output shape (batch None) from the model's input
        shape through each layer's compute_output_shape; None from the first
        layer that has none (any callable) on, or all None when the input
        shape is not known."""
        shape, out = self._input_shape(), []
        for l in self.layers:
            if shape is not None and hasattr(l, "compute_output_shape"):
                shape = tuple(l.compute_output_shape(shape))
            else:
                shape = None
            out.append(shape)
        return out

    def _output_shape(self):
        """The shape the layers so far give (batch None), or None."""
        shapes = self._output_shapes()
        return shapes[-1] if shapes else self._input_shape()

    def get_config(self):
        """Keras's: the model's name and each layer's config by class name,
        {"class_name": ..., "config": layer.get_config()}, a layer given an
        input shape with its "batch_input_shape" (as Keras's base layer
        config has it); "build_input_shape" when the model learnt its input
        shape from a call. Every layer must have get_config (a plain
        callable is Keras's NotImplementedError for a layer without one)."""
        configs = []
        for l in self.layers:
            if not hasattr(l, "get_config"):
                raise NotImplementedError(
                    "Layer %s has arguments that vdev cannot serialize: %r is a callable, not "
                    "a layer with get_config (wrap it in vdev.layers.Lambda)"
                    % (getattr(l, "__name__", type(l).__name__), l))
            cfg = dict(l.get_config())
            shape = getattr(l, "_batch_input_shape", None)
            if shape is not None and "batch_input_shape" not in cfg:
                cfg["batch_input_shape"] = tuple(shape)
            configs.append({"class_name": type(l).__name__, "config": cfg})
        config = {"name": self.name, "layers": copy.deepcopy(configs)}
        first = self.layers[0] if self.layers else None
        if getattr(first, "_batch_input_shape", None) is None and self._call_shape is not None:
            config["build_input_shape"] = self._call_shape
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Keras's: a new model (fresh weights, each layer made from its
        config by its class: vdev.layers', Sequential, or custom_objects'),
        built when a layer's config has its input shape or the config has
        build_input_shape. A list of layer configs (Keras's older form) is
        taken too; an InputLayer's config (Keras's first entry when the
        model has an input shape) gives its batch_input_shape to the next
        layer."""
        if isinstance(config, dict) and "name" in config:
            name, layer_configs = config["name"], config["layers"]
            build_input_shape = config.get("build_input_shape")
        else:
            name, layer_configs, build_input_shape = None, config, None
        model = cls(name=name)
        pending = None
        for lc in layer_configs:
            klass = _layer_class(lc["class_name"], custom_objects)
            cfg = dict(lc["config"])
            if lc["class_name"] == "InputLayer":
                pending = cfg.get("batch_input_shape")
                continue
            if pending is not None and "batch_input_shape" not in cfg:
                cfg["batch_input_shape"] = pending
            pending = None
            if getattr(klass.from_config, "__func__", None) is Layer.from_config.__func__:
                cfg = _keras_config(cfg)
            model.add(klass.from_config(cfg))
        if (build_input_shape and isinstance(build_input_shape, (tuple, list))
                and model._input_shape() is None):
            model._call_shape = (None,) + tuple(build_input_shape)[1:]
            _build(model, model._call_shape)
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
            if not hasattr(l, "compute_output_shape"):
                return None
            shape = tuple(l.compute_output_shape(shape))
        return shape

    def __call__(self, inputs, training=None, mask=None):
        """The layers applied in order to ``inputs``. ``training`` and
        ``mask`` are taken as Keras's ``__call__`` takes them and change
        nothing (vdev's layers behave the same in training and inference)."""
        x = inputs
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
