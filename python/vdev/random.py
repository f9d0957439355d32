"""Random tensors, as ``tf.random``: ``uniform`` and ``normal`` from vdev's
counter-based generator, which gives the same numbers for a seed on every
device and backend. ``seed=None`` takes the next seed of a process-wide
counter, which ``set_seed`` restarts, so a program without seeds is still
reproducible run to run. Inside ``strategy.run`` the replicas' threads do
not share that counter (the order they reach it would depend on timing):
each run takes one seed from it, and replica r's k-th ``seed=None`` draw in
that run uses a seed mixed from it, r and k.
"""

import threading

from . import _lib, _strategy_context
from ._lib import lib
from ._tensor import Tensor, _shape_arg, as_dtype, float32

__all__ = ["normal", "set_seed", "uniform"]

_lock = threading.Lock()
_next = [0x5eed]
_M64 = 2**64 - 1


def _mix(z):
    """SplitMix64's finalizer: 64 bits in, 64 well-mixed bits out."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def replica_seed(base, replica, k):
    """The seed of replica `replica`'s k-th seed=None draw in a strategy.run
    that took `base` from the counter."""
    return _mix(base ^ _mix(((replica & 0xFFFFFFFF) << 32) | (k & 0xFFFFFFFF)))


def set_seed(seed):
    """Restarts the counter that seed=None draws from."""
    with _lock:
        _next[0] = _lib.index(seed, "seed") & (2**64 - 1)


def _seed(seed):
    if seed is not None:
        return _lib.index(seed, "seed") & (2**64 - 1)
    ctx = _strategy_context.replica()
    if ctx is not None:  # a step function: the replica's own sequence
        return ctx._next_seed()
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
