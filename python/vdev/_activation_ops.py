"""The activation functions of ``tf.nn`` and ``tf.math`` that vdev's ops make:
``erf`` and ``softplus`` are ops of their own (Erf, Softplus: vdev/ops.h,
vdev_erf and vdev_softplus, TensorFlow's kernels' formulas and gradients);
``elu``, ``selu``, ``gelu``, ``softsign``, ``silu`` (``swish``), ``relu6``
and ``leaky_relu`` are made of them and of the element-wise ops, each in the
order TensorFlow's kernel or Python computes it, so the values are the float32
arithmetic of TensorFlow's kernels (elu, selu, relu6, leaky_relu, softsign:
to the bit, with vdev's exp correctly rounded where Eigen's float exp may
differ in the last bit; gelu and silu as TensorFlow's Python composes
them), and the gradients are the tape's of those
ops, equal to TensorFlow's kernels' gradients everywhere, kinks included:
where a kink is (0 for elu, selu, leaky_relu, relu6, and 6 for relu6), a
``maximum`` or ``minimum`` with the constant on the side its tie rule
(the first operand takes the gradient of a tie) makes give TensorFlow's
value there (EluGrad, SeluGrad, LeakyReluGrad, Relu6Grad). Keras's
activations (vdev/activations.py) and the layers' ``activation`` strings
use these.
"""

from . import _ops
from ._lib import lib

__all__ = ["elu", "erf", "gelu", "leaky_relu", "relu6", "selu", "silu", "softplus", "softsign",
           "swish"]

# TensorFlow's Selu kernel's constants
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


def erf(x, name=None):
    """The error function, elementwise (``tf.math.erf``; the op Erf)."""
    x = _ops._t(x)
    return _ops._new(lib.vdev_erf(x._handle))


def softplus(features, name=None):
    """log(exp(features) + 1), elementwise (``tf.math.softplus``,
    ``tf.nn.softplus``; the op Softplus: features itself above 13.94 and
    exp(features) below -13.94, as TensorFlow's kernel)."""
    features = _ops._t(features)
    return _ops._new(lib.vdev_softplus(features._handle))


def _exp_minus_one_below_zero(x, tie_to_x):
    """exp(min(x, 0)) - 1: 0 for x >= 0, TensorFlow's exp(x) - 1 below;
    tie_to_x: the gradient of the tie at x = 0 goes to x (minimum(x, 0)),
    else to the constant (minimum(0, x))."""
    low = _ops.minimum(x, 0.0) if tie_to_x else _ops.minimum(0.0, x)
    return _ops.add(_ops.exp(low), -1.0)


def elu(features, name=None):
    """x where x > 0, else exp(x) - 1 (``tf.nn.elu``); gradient 1 at 0, as
    TensorFlow's EluGrad."""
    x = _ops._t(features)
    return _elu(x, 1.0)


def _elu(x, alpha):
    """relu(x) + alpha (exp(min(x, 0)) - 1): Keras's backend.elu (tf.nn.elu,
    then tf.where(x > 0, res, alpha * res)); at 0 the gradient is alpha,
    the tf.where branch's (1 for tf.nn.elu)."""
    neg = _exp_minus_one_below_zero(x, tie_to_x=True)
    if alpha != 1.0:
        neg = _ops.multiply(neg, alpha)
    return _ops.add(_ops.relu(x), neg)


def selu(features, name=None):
    """scale * x where x > 0, else scale * alpha * (exp(x) - 1)
    (``tf.nn.selu``, TensorFlow's constants); gradient scale at 0, as
    SeluGrad."""
    x = _ops._t(features)
    pos = _ops.multiply(_ops.maximum(x, 0.0), _SELU_SCALE)
    neg = _ops.multiply(_exp_minus_one_below_zero(x, tie_to_x=False), _SELU_SCALE_ALPHA)
    return _ops.add(pos, neg)


def gelu(features, approximate=False, name=None):
    """``tf.nn.gelu``: 0.5 x (1 + erf(x / sqrt(2))), or with approximate=True
    0.5 x (1 + tanh(0.7978845608028654 (x + 0.044715 x^3))), in TensorFlow's
    order of operations."""
    x = _ops._t(features)
    half_x = _ops.multiply(x, 0.5)
    if approximate:
        inner = _ops.add(x, _ops.multiply(_ops.pow(x, 3), 0.044715))
        t = _ops.tanh(_ops.multiply(inner, 0.7978845608028654))
    else:
        t = erf(_ops.divide(x, 1.4142135623730951))
    return _ops.multiply(half_x, _ops.add(t, 1.0))


def softsign(features, name=None):
    """x / (|x| + 1), elementwise (``tf.nn.softsign``, ``tf.math.softsign``)."""
    x = _ops._t(features)
    return _ops.divide(x, _ops.add(_ops.maximum(x, _ops.negative(x)), 1.0))


def silu(features, beta=1.0, name=None):
    """x * sigmoid(beta * x) (``tf.nn.silu``, also ``tf.nn.swish``)."""
    x = _ops._t(features)
    bx = x if beta == 1.0 else _ops.multiply(x, beta)
    return _ops.multiply(x, _ops.sigmoid(bx))


swish = silu


def relu6(features, name=None):
    """min(max(x, 0), 6) (``tf.nn.relu6``); gradient 0 at 0 and at 6, as
    Relu6Grad."""
    return _ops.minimum(6.0, _ops.relu(_ops._t(features)))


def leaky_relu(features, alpha=0.2, name=None):
    """x where x > 0, else alpha * x (``tf.nn.leaky_relu``); gradient alpha
    at 0, as LeakyReluGrad."""
    x = _ops._t(features)
    return _ops.add(_ops.relu(x), _ops.multiply(_ops.minimum(x, 0.0), alpha))
