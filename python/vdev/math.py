"""Math ops under ``tf.math``'s names (most are also at the top level, as in
TensorFlow)."""

from ._activation_ops import erf, softplus, softsign
from ._logic_ops import (equal, greater, greater_equal, is_finite, is_inf, is_nan, less,
                         less_equal, logical_and, logical_not, logical_or, logical_xor,
                         not_equal, reduce_all, reduce_any)
from ._more_ops import (abs, argmin, ceil, floor, floordiv, floormod, mod, reciprocal,
                        reduce_max, reduce_min, round, rsqrt, sign)
from ._stat_ops import (count_nonzero, l2_normalize, reduce_logsumexp, reduce_std,
                        reduce_variance, squared_difference)
from ._ops import (add, argmax, divide, exp, log, maximum, minimum, multiply, negative, pow,
                   reduce_mean, reduce_sum, sigmoid, sqrt, square, subtract, tanh)

__all__ = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "negative", "pow",
           "square", "sqrt", "exp", "log", "tanh", "sigmoid", "reduce_sum", "reduce_mean",
           "argmax", "erf", "softplus", "softsign", "equal", "not_equal", "less", "less_equal",
           "greater", "greater_equal", "logical_and", "logical_or", "logical_not",
           "logical_xor", "reduce_any", "reduce_all", "is_nan", "is_inf", "is_finite", "abs",
           "argmin", "reduce_max", "reduce_min", "sign", "reciprocal", "rsqrt", "floor", "ceil",
           "round", "floordiv", "floormod", "mod", "count_nonzero", "l2_normalize",
           "reduce_logsumexp", "reduce_std", "reduce_variance", "squared_difference"]
