"""``vdev.Model`` (``vdev.models.Model``, ``tf.keras.Model``): with inputs
and outputs, Keras's functional model (vdev/_functional.py); a class of
one's own derived from it that defines ``call`` and is made without them,
Keras's subclassed model: its layers are the ones it holds as attributes
(in their order), built at its first call (``build(input_shape)`` if it
has one; vdev/_subclassing.py's protocol: the training flag and masks as
Keras's), and ``compile``, ``fit``, ``evaluate``, ``predict``,
``save_weights``, ``load_weights`` and ``summary`` work on it as on the
others (fit builds it on one row first; a string cross-entropy takes its
output as probabilities, as Keras's, which cannot see into ``call``). It
is called on tensors and arrays, not symbolic tensors (a ValueError: Keras
traces ``call``, vdev does not), and ``get_config``, so ``model.save``,
is Keras's NotImplementedError unless it defines one (``save_weights``
keeps its weights).
"""

from ._functional import Functional
from .layers import Layer, _dedup, _snake_case, _unique_name


class _ModelType(type):
    """Model's type: a functional model is an instance of Model (Keras's
    Functional derives from Model; here Model(inputs, outputs) gives the
    Functional itself, as Keras's does)."""

    def __instancecheck__(cls, obj):
        if cls.__dict__.get("_keras_model_class") and isinstance(obj, Functional):
            return True
        return super().__instancecheck__(obj)


class Model(Functional, metaclass=_ModelType):
    """Keras's Model (see the module)."""

    _keras_model_class = True

    def __new__(cls, *args, **kwargs):
        if cls is Model:  # Keras's: Model(inputs, outputs) is a Functional
            model = Functional.__new__(Functional)
            Functional.__init__(model, *args, **kwargs)
            return model
        return super().__new__(cls)

    def __init__(self, *args, **kwargs):
        if args or "inputs" in kwargs or "outputs" in kwargs or not self._keras_subclass:
            self._subclassed = False
            Functional.__init__(self, *args, **kwargs)
            return
        self._subclassed = True
        name = kwargs.pop("name", None) or _unique_name(_snake_case(type(self).__name__))
        Layer.__init__(self, name, kwargs.pop("trainable", True), **kwargs)
        self._is_compiled = False

    # ---- what it is (a subclassed model's; a functional one's as Functional's) ----
    @property
    def layers(self):
        if self.__dict__.get("_subclassed"):
            return self._sublayers()
        return self.__dict__["layers"]

    @layers.setter
    def layers(self, value):
        self.__dict__["layers"] = value

    def _sublayers(self):
        if self.__dict__.get("_subclassed"):
            from . import _subclassing
            return _subclassing.tracked(self)
        return Functional._sublayers(self)

    @property
    def variables(self):
        if self.__dict__.get("_subclassed"):
            return _dedup(list(self._variables) + [v for l in self.layers
                                                   for v in getattr(l, "variables", [])])
        return Functional.variables.fget(self)

    @property
    def built(self):
        if self.__dict__.get("_subclassed"):
            return self.__dict__.get("_keras_built", False)
        return Functional.built.fget(self)

    @built.setter
    def built(self, value):
        self.__dict__["_keras_built"] = bool(value)

    @property
    def _input_list(self):
        """The functional model's splitting of its inputs (fit's), or None."""
        if self.__dict__.get("_subclassed"):
            return None
        return Functional._input_list.__get__(self)

    def _output_layer(self):
        if self.__dict__.get("_subclassed"):
            return None  # Keras cannot see into call: the output as it is
        return Functional._output_layer(self)

    def get_config(self):
        if self.__dict__.get("_subclassed"):
            return Layer.get_config(self)
        return Functional.get_config(self)

    def compile(self, *args, **kwargs):
        if self.__dict__.get("_subclassed"):
            from ._fit import Model as Training
            return Training.compile(self, *args, **kwargs)
        return Functional.compile(self, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        if self.__dict__.get("_subclassed"):
            from ._fit import Model as Training
            return Training.predict(self, x, *args, **kwargs)
        return Functional.predict(self, x, *args, **kwargs)

    def __call__(self, inputs, *args, **kwargs):
        if not self.__dict__.get("_subclassed"):
            return Functional.__call__(self, inputs, *args, **kwargs)
        from . import _functional, _keras_masks, _subclassing
        if _functional.is_symbolic(inputs):
            raise ValueError("vdev's subclassed model %s is called on tensors and arrays, not "
                             "on symbolic tensors (Keras traces its call, vdev does not): use "
                             "it as the model, or write it with the functional API"
                             % (self.name,))
        return _keras_masks.masked_call(_subclassing.call, self, inputs, args, kwargs)

    __call__._vdev_symbolic = True  # the functional model's own handles symbolic inputs

    def summary(self, line_length=None, positions=None, print_fn=None):
        """Keras's summary of a subclassed model: each layer's name, type
        and parameters, its output shape "multiple" (Keras's words: it
        cannot see call), once built."""
        if not self.__dict__.get("_subclassed"):
            return Functional.summary(self, line_length, positions, print_fn)
        if not self.built:
            raise ValueError("This model has not yet been built. Build the model first by "
                             "calling `build()` or by calling the model on a batch of data.")
        out = print_fn or print
        width = line_length or 65
        cols = [int(width * p) for p in (positions or (0.45, 0.85, 1.0))]

        def row(a, b, c):
            line = a[:cols[0] - 1].ljust(cols[0]) + b[:cols[1] - cols[0] - 1].ljust(
                cols[1] - cols[0]) + c
            out(" " + line)
        out('Model: "%s"' % self.name)
        out("_" * width)
        row("Layer (type)", "Output Shape", "Param #")
        out("=" * width)
        for i, l in enumerate(self.layers):
            n = l.count_params() if getattr(l, "built", True) else 0
            row("%s (%s)" % (l.name, type(l).__name__), "multiple", str(n))
            out((" " if i < len(self.layers) - 1 else "=") * width)
        if not self.layers:
            out("=" * width)
        total = sum(int(v.shape.num_elements()) for v in self.weights)
        trainable = sum(int(v.shape.num_elements()) for v in self.trainable_weights)
        out("Total params: {:,}".format(total))
        out("Trainable params: {:,}".format(trainable))
        out("Non-trainable params: {:,}".format(total - trainable))
        out("_" * width)
