"""Math ops under ``tf.math``'s names (most are also at the top level, as in
TensorFlow)."""

from ._activation_ops import erf, softplus, softsign
from ._ops import (add, argmax, divide, exp, log, maximum, minimum, multiply, negative, pow,
                   reduce_mean, reduce_sum, sigmoid, sqrt, square, subtract, tanh)

__all__ = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "negative", "pow",
           "square", "sqrt", "exp", "log", "tanh", "sigmoid", "reduce_sum", "reduce_mean",
           "argmax", "erf", "softplus", "softsign"]
