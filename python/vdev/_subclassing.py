"""Keras 2.11's subclassing API for layers: a class of one's own derived
from ``vdev.layers.Layer`` that defines ``call(inputs, ...)`` (and maybe
``build(input_shape)``) and makes its weights with ``add_weight``. Its
call is Keras's base ``Layer.__call__``: built once, at the first call,
for the input's shape (``input_shape`` a TensorShape, or a list of them;
inside the device scope the layer was made in, so its weights are made
there, mirrored under a strategy's scope), then ``call`` (NumPy inputs made
tensors first, on its device: floats float32, ints int32), given the
training flag when it takes one (the call's argument, else the enclosing
model's, else inference, as Keras resolves it, and its sublayers called
inside take it too) and the inputs' masks when it takes ``mask``. The
layers and weights it holds as attributes (a layer, or a list, tuple or
dict of them) are tracked as Keras tracks them: ``variables``,
``trainable_variables``, ``weights`` hold its own weights then theirs;
setting ``trainable`` sets theirs. ``add_weight(name, shape, dtype,
initializer, regularizer, trainable, constraint)``: float32 (or int32, not
trainable), the initializer a name, an Initializer or a callable
(Keras's default: glorot_uniform for floats, zeros for ints), regularizers
and constraints only None. ``get_config`` is Keras's: name, trainable and
dtype for a layer whose ``__init__`` takes nothing more, else Keras's
NotImplementedError asking for one. A call without ``call`` defined gives
its inputs back, as Keras's base.
"""

import contextlib
import inspect

from . import _strategy_context, initializers
from ._device import current_device, device
from ._tensor import TensorShape, float32, int32


def is_keras_subclass(cls):
    """Whether cls follows Keras's subclassing API: it (or a class of its
    own above it) defines ``call``, and none defines ``__call__``."""
    from .layers import Layer
    for klass in cls.__mro__:
        if klass is Layer:
            return False
        if "__call__" in klass.__dict__:
            return False
        if "call" in klass.__dict__:
            return True
    return False


def setup(layer, kwargs):
    """The base layer's arguments Keras's takes (``dtype``, ``input_shape``,
    ``batch_input_shape``, ``batch_size``, ``dynamic``, ``autocast``), and
    the subclass's state: not built, its device scope and strategy."""
    dtype = kwargs.pop("dtype", None)
    if dtype not in (None, "float32", float32):
        raise ValueError("vdev's layers compute in float32: dtype=%r" % (dtype,))
    shape = kwargs.pop("batch_input_shape", None)
    size = kwargs.pop("batch_size", None)
    given = kwargs.pop("input_shape", None)
    if shape is None and given is not None:
        shape = (size,) + tuple(given)
    for key in ("dynamic", "autocast"):
        kwargs.pop(key, None)
    if kwargs:
        raise TypeError("Keyword argument not understood:", next(iter(kwargs)))
    layer._batch_input_shape = None if shape is None else tuple(shape)
    layer._device = current_device()
    layer._strategy = _strategy_context.mirroring_strategy()
    layer.built = False


def tracked(layer):
    """The layers the layer holds as attributes, in their order (a layer,
    or a list, tuple or dict of them), each once."""
    from .layers import Layer
    out, seen = [], {id(layer)}

    def add(v):
        if isinstance(v, Layer):
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                add(x)
        elif isinstance(v, dict):
            for x in v.values():
                add(x)
    for key, v in vars(layer).items():
        if not key.startswith("_keras"):
            add(v)
    return out


def add_weight(layer, name=None, shape=None, dtype=None, initializer=None, regularizer=None,
               trainable=None, constraint=None, **kwargs):
    """Keras's Layer.add_weight (see the module)."""
    from ._conv_layers import _none_only
    from .layers import _adopt, _initial
    _none_only("add_weight", regularizer=regularizer, constraint=constraint)
    shape = () if shape is None else tuple(int(d) for d in shape)
    kind = float32 if dtype in (None, "float32", float32) else \
        int32 if dtype in ("int32", int32) else None
    if kind is None:
        raise ValueError("vdev's add_weight makes float32 or int32 weights, not %r" % (dtype,))
    trainable = True if trainable is None else bool(trainable)
    if kind is int32 and trainable:
        raise ValueError("vdev's add_weight: an int32 weight is not trainable (Keras's "
                         "gradients are float's); pass trainable=False")
    if initializer is None:
        initializer = "glorot_uniform" if kind is float32 else "zeros"
    init = initializers.get(initializer) if isinstance(initializer, str) else initializer
    if init is None:
        raise ValueError("Could not interpret initializer identifier: %r" % (initializer,))
    where = layer._device or ("CPU:0" if layer._strategy is not None else None)
    with device(where) if where and current_device() is None else contextlib.nullcontext():
        value = _initial(init, shape)
        if kind is int32:
            from . import _ops
            value = _ops._cast(value, int32)
        v = _adopt(value, layer._strategy)
    v.name = "%s/%s" % (layer.name, name or "Variable")
    if not trainable:
        v.trainable = False
    layer._variables.append(v)
    return v


def _shape_of(x):
    if isinstance(x, (list, tuple)):
        return [_shape_of(t) for t in x]
    shape = getattr(x, "shape", None)
    if shape is None:
        import numpy as np
        shape = np.shape(x)
    return TensorShape([None if d is None else int(d) for d in tuple(shape)])


def _tensors(layer, x):
    """Keras's conversion of NumPy (and nested lists of numbers) inputs:
    tensors on the layer's device, floats as float32, ints as int32."""
    import numpy as np
    from . import _ops
    from ._tensor import Tensor
    if isinstance(x, Tensor) or x is None:
        return x
    if isinstance(x, (list, tuple)) and any(isinstance(t, (Tensor, np.ndarray)) for t in x):
        return type(x)(_tensors(layer, t) for t in x)
    a = np.asarray(x)
    if a.dtype.kind not in "fiub":
        return x
    kind = int32 if a.dtype.kind in "iu" else float32
    where = layer._device
    with device(where) if where and current_device() is None else contextlib.nullcontext():
        return _ops.convert_to_tensor(a, kind)


def call(layer, inputs, *args, **kwargs):
    """Keras's base Layer.__call__ for a subclass (see the module)."""
    from ._core_layers import _resolve_training, training_scope
    inputs = _tensors(layer, inputs)
    takes = inspect.signature(type(layer).call).parameters
    if "training" in takes and kwargs.get("training") is None:
        kwargs["training"] = _resolve_training(None)
    if not layer.built:
        where = layer._device
        with device(where) if where and current_device() is None else contextlib.nullcontext():
            layer.build(_shape_of(inputs))
        layer.built = True
    with training_scope(kwargs.get("training")):
        return layer.call(inputs, *args, **kwargs)


def unknown_output_shape(layer, input_shape):
    """A layer of one's own without compute_output_shape: Keras runs the
    layer to find it, as a vdev model made on it does (on zeros)."""
    raise NotImplementedError("Layer %s has no compute_output_shape: run it to find its "
                              "output shape" % (layer.name,))


def config(layer):
    """Keras's base get_config for a subclass: its name, trainable and
    dtype, or Keras's error when its __init__ takes more."""
    params = [p for p in inspect.signature(type(layer).__init__).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    extra = [p.name for p in params if p.name not in ("name", "trainable", "dtype")]
    if extra:
        raise NotImplementedError("Layer %s has arguments %s in `__init__` and therefore must "
                                  "override `get_config()`." % (type(layer).__name__, extra))
    return {"name": layer.name, "trainable": layer.trainable, "dtype": "float32"}
