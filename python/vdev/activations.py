"""Keras 2.11's activations (``tf.keras.activations``) under their names:
``elu(x, alpha=1.0)``, ``exponential``, ``gelu(x, approximate=False)``,
``hard_sigmoid``, ``linear``, ``relu(x, alpha=0.0, max_value=None,
threshold=0.0)``, ``selu``, ``sigmoid``, ``softmax(x, axis=-1)``,
``softplus``, ``softsign``, ``swish``, ``tanh``, with ``get``,
``serialize`` and ``deserialize``. Each is the ops Keras's function runs
(vdev/_activation_ops.py for the ones of tf.nn), so a layer's
``activation="gelu"`` computes what Keras's does. The names are the ones a
layer's ``activation`` argument and its config take (vdev/layers.py).
"""

from . import _activation_ops as _act
from . import _ops

__all__ = ["deserialize", "elu", "exponential", "gelu", "get", "hard_sigmoid", "linear", "relu",
           "selu", "serialize", "sigmoid", "softmax", "softplus", "softsign", "swish", "tanh"]


def elu(x, alpha=1.0):
    """x where x > 0, else alpha (exp(x) - 1) (Keras's backend.elu)."""
    return _act._elu(_ops._t(x), alpha)


def exponential(x):
    """exp(x)."""
    return _ops.exp(x)


def gelu(x, approximate=False):
    """tf.nn.gelu: the exact form (erf) unless approximate=True (tanh)."""
    return _act.gelu(x, approximate)


def hard_sigmoid(x):
    """clip(0.2 x + 0.5, 0, 1), Keras 2.11's backend.hard_sigmoid: a
    multiply, an add, then tf.clip_by_value (a minimum, then a maximum)."""
    y = _ops.add(_ops.multiply(_ops._t(x), 0.2), 0.5)
    return _ops.maximum(_ops.minimum(y, 1.0), 0.0)


def linear(x):
    """x unchanged."""
    return x


def relu(x, alpha=0.0, max_value=None, threshold=0.0):
    """Keras's backend.relu (vdev/_core_layers.py: the ReLU layer's)."""
    from ._core_layers import _relu
    return _relu(_ops._t(x), alpha, max_value, threshold)


def selu(x):
    """tf.nn.selu."""
    return _act.selu(x)


def sigmoid(x):
    """1 / (1 + exp(-x))."""
    return _ops.sigmoid(x)


def softmax(x, axis=-1):
    """tf.nn.softmax over axis (vdev's runs over the last)."""
    return _ops.softmax(x, axis)


def softplus(x):
    """log(exp(x) + 1) (the op Softplus)."""
    return _act.softplus(x)


def softsign(x):
    """x / (|x| + 1)."""
    return _act.softsign(x)


def swish(x):
    """x * sigmoid(x) (tf.nn.silu)."""
    return _act.silu(x)


def tanh(x):
    """The hyperbolic tangent."""
    return _ops.tanh(x)


def serialize(activation):
    """An activation's name, as Keras's serialize gives it for its own."""
    from .layers import _activation_name
    return _activation_name(activation)


def deserialize(name, custom_objects=None):
    """The activation of that name (custom_objects first)."""
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    from .layers import _activation
    fn = _activation(name)
    return linear if fn is None else fn


def get(identifier):
    """Keras's activations.get: None is linear, a name is looked up, a
    callable is itself; anything else a TypeError."""
    if identifier is None:
        return linear
    if isinstance(identifier, str):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    raise TypeError("Could not interpret activation function identifier: %s" % (identifier,))
