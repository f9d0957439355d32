"""Random tensors, as ``tf.random``: ``uniform`` and ``normal`` from vdev's
counter-based generator, which gives the same numbers for a seed on every
device and backend. ``seed=None`` takes the next seed of a process-wide
counter, which ``set_seed`` restarts, so a program without seeds is still
reproducible run to run.
"""

import threading

from . import _lib
from ._lib import lib
from ._tensor import Tensor, _shape_arg, as_dtype, float32

__all__ = ["normal", "set_seed", "uniform"]

_lock = threading.Lock()
_next = [0x5eed]


def set_seed(seed):
    """Restarts the counter that seed=None draws from."""
    with _lock:
        _next[0] = _lib.index(seed, "seed") & (2**64 - 1)


def _seed(seed):
    if seed is not None:
        return _lib.index(seed, "seed") & (2**64 - 1)
    with _lock:
        s = _next[0]
        _next[0] = (s + 0x9E3779B97F4A7C15) & (2**64 - 1)
    return s


def uniform(shape, minval=0, maxval=None, dtype=float32, seed=None, name=None):
    """Uniform in [minval, maxval), float32; maxval=None is 1, as
    TensorFlow's for floats."""
    if maxval is None:
        maxval = 1
    if as_dtype(dtype) is not float32:
        raise TypeError("vdev draws float32 random tensors, not %s" % as_dtype(dtype).name)
    s, n = _lib.shape_array(_shape_arg(shape))
    return Tensor(_lib.made(lib.vdev_tensor_uniform(s, n, float(minval), float(maxval),
                                                    _seed(seed))))


def normal(shape, mean=0.0, stddev=1.0, dtype=float32, seed=None, name=None):
    """Normal with that mean and standard deviation, float32."""
    if as_dtype(dtype) is not float32:
        raise TypeError("vdev draws float32 random tensors, not %s" % as_dtype(dtype).name)
    s, n = _lib.shape_array(_shape_arg(shape))
    return Tensor(_lib.made(lib.vdev_tensor_normal(s, n, float(mean), float(stddev),
                                                   _seed(seed))))
