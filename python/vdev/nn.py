"""Neural-network ops under ``tf.nn``'s names."""

from ._ops import log_softmax, relu, sigmoid, softmax, tanh

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax"]
