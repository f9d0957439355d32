"""``vdev.GradientTape``, as ``tf.GradientTape``::

    with vdev.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)

The tape records the calling thread's ops while the block runs (vdev's tape
records until it is asked for gradients; leaving the block stops it). Every
gradient op runs on the device of its forward op, whatever scope is current
when the gradient is asked for. vdev differentiates with respect to
Variables: a source that is a plain tensor gets None, as an unwatched tensor
does in TensorFlow. A non-persistent tape answers one gradient call.

A target of more than one element stands for its sum, as in TensorFlow
(the gradient of reduce_sum(target)): vdev's tape seeds ones of the
target's shape.

A Variable the target does not reach gets None, as in TensorFlow
(unconnected_gradients=UnconnectedGradients.NONE, the default), or zeros of
its shape with UnconnectedGradients.ZERO (or the strings 'none', 'zero').
"""

from . import _lib
from ._lib import lib
from ._tensor import Tensor, Variable


def _flatten(x, out):
    if isinstance(x, (list, tuple)):
        for v in x:
            _flatten(v, out)
    elif isinstance(x, dict):
        for k in sorted(x):
            _flatten(x[k], out)
    else:
        out.append(x)
    return out


def _pack(x, it):
    """The structure of x with its leaves taken from iterator it. (A plain
    recursive function: a nested closure would make a reference cycle that
    keeps the gradients alive until the garbage collector runs.)"""
    if isinstance(x, list):
        return [_pack(v, it) for v in x]
    if isinstance(x, tuple):
        vals = [_pack(v, it) for v in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, dict):
        return {k: _pack(x[k], it) for k in sorted(x)}
    return next(it)


class UnconnectedGradients:
    """What tape.gradient gives a source the target does not reach, as
    tf.UnconnectedGradients: NONE (None, the default) or ZERO (zeros)."""
    NONE = "none"
    ZERO = "zero"


def _unconnected(v):
    """The C value (VDEV_UNCONNECTED_ZERO 0, _NONE 1) of an
    unconnected_gradients argument."""
    if v is None or v == UnconnectedGradients.NONE:
        return 1
    if v == UnconnectedGradients.ZERO:
        return 0
    raise ValueError("Unknown value for unconnected_gradients: %r" % (v,))


class GradientTape:
    __slots__ = ("_h", "_persistent", "_used", "_recording")

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._h = None
        self._persistent = bool(persistent)
        self._used = False
        self._recording = False

    def __enter__(self):
        if self._h is not None:
            raise ValueError("Tape is still recording, This can happen if you try to re-enter "
                             "an already-active tape.")
        self._h = _lib.made(lib.vdev_tape_begin(), {_lib.INVALID_ARG: RuntimeError})
        self._recording = True
        return self

    def __exit__(self, *exc):
        self._stop()
        return False

    def _stop(self):
        if self._recording:
            # Asking for no gradient stops vdev's recording and fails only for
            # want of a loss; the tape then answers later calls.
            lib.vdev_tape_gradient(self._h, None, None, 0, None)
            lib.vdev_clear_error()
            self._recording = False

    def watch(self, tensor):
        """Variables are watched already; vdev differentiates nothing else."""
        for t in _flatten(tensor, []):
            if not isinstance(t, Variable):
                raise ValueError("vdev differentiates with respect to Variables only; %r is not "
                                 "one (make it a vdev.Variable)" % (t,))

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """The gradient of target with respect to each source, in the
        structure of sources. A target of more than one element stands for
        its sum, as TensorFlow's does."""
        if self._h is None:
            if self._used:
                raise RuntimeError("A non-persistent GradientTape can only be used to compute "
                                   "one set of gradients (or jacobians)")
            raise RuntimeError("The tape was never entered: use `with vdev.GradientTape() as "
                               "tape:`")
        if output_gradients is not None:
            raise ValueError("vdev's GradientTape takes no output_gradients")
        if not isinstance(target, Tensor):
            raise TypeError("target must be a vdev tensor, not %r" % (target,))
        flat = _flatten(sources, [])
        for s in flat:
            if not isinstance(s, Tensor):
                raise TypeError("sources must be vdev tensors or Variables, not %r" % (s,))
        unconnected = _unconnected(unconnected_gradients)
        self._recording = False
        vars_ = [s for s in flat if isinstance(s, Variable)]
        n = len(vars_)
        hv = _lib.handles([v._handle for v in vars_])
        hg = _lib.handles([None] * n)
        st = lib.vdev_tape_gradient_ex(self._h, target._handle, hv, n, hg, unconnected)
        if not self._persistent:
            lib.vdev_tape_end(self._h)
            self._h = None
            self._used = True
        _lib.check(st)
        grads = iter([Tensor(hg[i]) if hg[i] else None for i in range(n)])
        out = [next(grads) if isinstance(s, Variable) else None for s in flat]
        return _pack(sources, iter(out)) if isinstance(sources, (list, tuple, dict)) else out[0]

    def _no_copy(self, *args):
        raise TypeError("cannot copy or pickle a vdev.GradientTape: it holds vdev's recording")

    __copy__ = __deepcopy__ = __reduce_ex__ = _no_copy

    def __del__(self, _end=lib.vdev_tape_end):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _end(h)

