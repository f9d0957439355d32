"""``vdev.GradientTape``, as ``tf.GradientTape``::

    with vdev.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)

The tape records the calling thread's ops while the block runs (vdev's tape
records until it is asked for gradients; leaving the block stops it). Every
gradient op runs on the device of its forward op, whatever scope is current
when the gradient is asked for. Sources are the Variables the tape watches
(every trainable one it meets, or only those given to ``watch`` with
``watch_accessed_variables=False``, from that call on; another Variable
gets None, as in TensorFlow) and tensors the tape computed from them (a
non-trainable Variable's ops are not recorded until it is watched, as
TensorFlow's, for the Variables that exist when the block starts); a plain
tensor made before the block gets None, as an unwatched tensor does in TensorFlow
(``watch`` takes Variables only). A non-persistent tape answers one gradient
call.

A target may be a list (or tuple, or dict) of tensors: the gradient is the
sum of each target's, as in TensorFlow. An int32 target has no gradient: as
TensorFlow, vdev logs a warning ("The dtype of the target tensor must be
floating ...") and it reaches no source (None, or zeros with
UnconnectedGradients.ZERO).

vdev's tape records one stretch of ops: it stops at the end of the ``with``
block or at the first gradient call, whichever comes first, and cannot
resume, so re-entering a tape that stopped is a RuntimeError, and a
persistent tape asked for a gradient inside its block records nothing after
(vdev logs a warning), whatever the call's targets. One tape records at a
time on a thread: nested tapes (higher-order gradients) are a RuntimeError
saying so, also inside ``stop_recording()``. ``reset()`` inside the block
forgets what was recorded and records on (a new vdev tape), as TensorFlow's.

``with tape.stop_recording():`` runs its block unrecorded, as TensorFlow's. A
gradient asked for inside it does not stop the tape, which records on after
the block (TensorFlow's way to keep a persistent tape's gradient ops off it).

While the block runs, only the thread that entered it may ask the tape for
gradients (or reset it): another thread's call is an InvalidArgumentError
that leaves the tape as it was, recording; the block's exit stops it. A
gradient call that fails otherwise leaves the tape stopped, able to answer
another call, as TensorFlow's.

With a list of targets, each target's gradients are summed on the
gradients' device, as the gradient ops run.

A target of more than one element stands for its sum, as in TensorFlow
(the gradient of reduce_sum(target)): vdev's tape seeds ones of the
target's shape, or output_gradients (one per target). ``jacobian`` and
``batch_jacobian`` seed one element at a time (no pfor); as TensorFlow's,
they refuse experimental_use_pfor=False on a tape that is not persistent,
and batch_jacobian gives zeros for a source the target does not reach.

A Variable the target does not reach gets None, as in TensorFlow
(unconnected_gradients=UnconnectedGradients.NONE, the default), or zeros of
its shape with UnconnectedGradients.ZERO (or the strings 'none', 'zero').
"""

import contextlib
import enum
import logging
import threading

from . import _lib
from ._device import on_device_of as _on_device_of
from ._lib import lib
from ._ops import add as _add
from ._tensor import _NON_TRAINABLE, _VARIABLES, Tensor, Variable, float32


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


class UnconnectedGradients(enum.Enum):
    """What tape.gradient gives a source the target does not reach, as
    tf.UnconnectedGradients, an Enum: NONE (None, the default) or ZERO
    (zeros); the calls take a member or its value, 'none' or 'zero'."""
    NONE = "none"
    ZERO = "zero"


def _unconnected(v):
    """The C value (VDEV_UNCONNECTED_ZERO 0, _NONE 1) of an
    unconnected_gradients argument, read as TensorFlow's imperative_grad
    reads it: UnconnectedGradients(v), else its ValueError."""
    try:
        v = UnconnectedGradients(v)
    except ValueError:
        raise ValueError("Unknown value for unconnected_gradients: %r" % (v,)) from None
    return 0 if v is UnconnectedGradients.ZERO else 1


_log = logging.getLogger("vdev")

_NESTED = "a tape is already recording on this thread"
_PAUSED = "a tape is paused on this thread"

# vdev's refusal to stop a tape from a thread other than the one it records
# on (src/autograd/tape.c, check_thread)
_OTHER_THREAD = "the tape is recording on another thread"


def _other_thread(call, what):
    from .errors import InvalidArgumentError
    return InvalidArgumentError("GradientTape.%s: %s; only that thread may %s"
                                % (call, _OTHER_THREAD, what), "VDEV_ERR_INVALID_ARG")


def _brief(x):
    """What an error names for a value: a tensor by its shape, dtype and device
    (not its elements, which may be millions), anything else by its type."""
    if isinstance(x, Tensor):
        return "a Tensor of shape %s, %s, on %s" % (tuple(x.shape), x.dtype.name, x.device)
    return "a %s" % type(x).__name__


class GradientTape:
    """Records the ops on trainable variables inside its ``with`` block for
    ``gradient``, as ``tf.GradientTape``. persistent: whether ``gradient``
    may be called more than once; watch_accessed_variables=False records
    only the variables given to ``watch``. One tape records at a time on a
    thread (nesting is a RuntimeError)."""

    __slots__ = ("_h", "_persistent", "_used", "_recording", "_paused", "_watch_accessed",
                 "_watched", "_in_block", "_thread", "_last_watched")

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._h = None
        self._persistent = bool(persistent)
        self._used = False
        self._recording = False  # whether vdev's tape records (this tape's thread's ops)
        self._paused = False     # inside stop_recording (vdev's tape paused)
        self._in_block = False   # whether the `with` block runs
        self._thread = None      # the thread that entered the block
        self._watch_accessed = bool(watch_accessed_variables)
        self._watched = {}  # id -> Variable given to watch (kept alive, as TensorFlow's tape does)
        self._last_watched = ()  # watched_variables() once vdev's tape has ended

    def __enter__(self):
        if self._h is not None:
            if self._recording:
                raise ValueError("Tape is still recording, This can happen if you try to "
                                 "re-enter an already-active tape.")
            raise RuntimeError("vdev's GradientTape cannot resume recording: this tape stopped "
                               "at the end of its `with` block (or at its first gradient call). "
                               "Record every op in one `with` block, or use a new GradientTape")
        h = self._begin()
        if not h:
            if _lib.last_error() == _NESTED:
                raise RuntimeError(_NESTED + ": vdev records one GradientTape at a time on a "
                                   "thread, so nested tapes (higher-order gradients) and tapes "
                                   "recording together are not supported")
            if _lib.last_error().startswith(_PAUSED):
                raise RuntimeError(_PAUSED + " (in its stop_recording block): vdev records one "
                                   "GradientTape at a time on a thread, so no other tape may "
                                   "begin until that block ends")
            raise _lib.error(None, {_lib.INVALID_ARG: RuntimeError})
        self._h = h
        self._recording = True
        self._in_block = True
        self._thread = threading.get_ident()
        if not self._watch_accessed:  # what watch() was given before the block
            for v in self._watched.values():
                _lib.check(lib.vdev_tape_watch(h, v._handle))
        return self

    def _begin(self):
        """A new vdev tape: one that watches only the Variables given to
        vdev_tape_watch with watch_accessed_variables=False, else every one
        but the non-trainable Variables not given to watch (vdev_tape_skip:
        the ops that read them alone are not recorded, as TensorFlow's tape
        watches only trainable variables when they are read)."""
        h = lib.vdev_tape_begin_ex(0 if self._watch_accessed else 1)
        if h and self._watch_accessed and _NON_TRAINABLE:
            for v in list(_NON_TRAINABLE.values()):
                if v.trainable or id(v) in self._watched:
                    continue
                st = lib.vdev_tape_skip(h, v._handle)
                if st == _lib.INVALID_ARG:  # its tensor is gone (freed, or shut down)
                    lib.vdev_clear_error()
                elif st != _lib.OK:
                    err = _lib.error()
                    lib.vdev_tape_end(h)
                    raise err
        return h

    def __exit__(self, *exc):
        self._in_block = False
        if self._recording:
            try:
                self._halt("__exit__", "stop it")
            except Exception:
                if exc[0] is None:
                    raise
        return False

    def _halt(self, call, what):
        """Stops vdev's recording. Asking for no gradient stops it and fails
        only for want of a loss; the tape then answers later calls. vdev
        refuses it on a thread other than the one the tape records on: that
        raises, and the tape goes on recording, as it was."""
        lib.vdev_clear_error()
        if self._paused:  # a paused tape stays paused through a gradient call
            if lib.vdev_tape_resume(self._h) != _lib.OK:
                refused = _OTHER_THREAD in _lib.last_error()
                lib.vdev_clear_error()
                if refused:
                    raise _other_thread(call, what)
            self._paused = False
        lib.vdev_tape_gradient(self._h, None, None, 0, None)
        refused = _OTHER_THREAD in _lib.last_error()
        lib.vdev_clear_error()
        if refused:
            raise _other_thread(call, what)
        self._recording = False

    def _end(self):
        """Ends vdev's tape (stopped already, so any thread may)."""
        self._last_watched = self.watched_variables()
        lib.vdev_clear_error()
        lib.vdev_tape_end(self._h)
        if lib.vdev_last_status() != _lib.OK:
            raise _lib.error()
        self._h = None
        self._recording = False
        self._paused = False

    def reset(self):
        """Forgets every op recorded so far and records on, as TensorFlow's
        reset (exiting and re-entering the block with a new tape): inside
        the block, on the thread that entered it; a persistent tape stopped
        by a gradient call inside its block records again."""
        if not self._in_block or self._h is None or self._paused:
            raise ValueError("Tape is not recording.")
        if threading.get_ident() != self._thread:
            raise _other_thread("reset", "reset it")
        if self._recording:
            self._halt("reset", "reset it")
        self._end()
        self._used = False
        self._watched = {}  # as TensorFlow's: the new tape watches nothing yet
        h = self._begin()
        if not h:
            raise _lib.error(None, {_lib.INVALID_ARG: RuntimeError})
        self._h = h
        self._recording = True

    @contextlib.contextmanager
    def stop_recording(self):
        """Ops run in this block are not recorded, as TensorFlow's
        stop_recording; recording resumes at its end. A gradient asked for
        in it (TensorFlow's way to keep a persistent tape's gradient ops off
        the tape) leaves the tape recording after the block."""
        if self._h is None:
            raise RuntimeError("Trying to stop recording a tape which is not recording.")
        if not self._recording or self._paused:
            raise ValueError("Tape is not recording.")
        if threading.get_ident() != self._thread:
            raise _other_thread("stop_recording", "pause it")
        _lib.check(lib.vdev_tape_pause(self._h))
        self._paused = True
        try:
            yield
        finally:
            # A non-persistent tape's gradient call, reset() or __exit__ may
            # have ended or stopped it meanwhile: then there is nothing to resume.
            if self._paused and self._h is not None:
                self._paused = False
                _lib.check(lib.vdev_tape_resume(self._h))

    def watch(self, tensor):
        """Watches Variables (trainable ones are watched already, unless
        watch_accessed_variables=False); vdev's tape cannot watch another
        tensor (a tensor the tape computes from variables needs no watch)."""
        flat = _flatten(tensor, [])
        for t in flat:
            if not isinstance(t, Variable):
                raise ValueError("vdev differentiates with respect to Variables only; %s is not "
                                 "one (make it a vdev.Variable)" % _brief(t))
        for t in flat:  # watched all the same, as TensorFlow's: its gradient is None
            if t.dtype is not float32:
                _log.warning("The dtype of the watched tensor must be floating (e.g. "
                             "vdev.float32), got %s", t.dtype.name)
        # vdev's tape is told while it records (or is paused), when it watches
        # only what it is given or skips the variable (a non-trainable one);
        # before the block, __enter__ tells it
        tell = [t for t in flat if self._h is not None and self._recording and
                (not self._watch_accessed or not t.trainable)]
        if tell and threading.get_ident() != self._thread:
            raise _other_thread("watch", "watch variables for it")
        for t in flat:
            self._watched[id(t)] = t
        for t in tell:
            _lib.check(lib.vdev_tape_watch(self._h, t._handle))

    def watched_variables(self):
        """The Variables the tape watches, as TensorFlow's, in order of
        construction: every trainable one an op it recorded read, and those
        given to watch (only those, with watch_accessed_variables=False); a
        tuple. After a non-persistent tape's gradient call, what it watched
        then."""
        if self._h is None:
            return self._last_watched
        if self._recording and threading.get_ident() != self._thread:
            raise _other_thread("watched_variables", "list what it watches")
        n = lib.vdev_tape_watched_variables(self._h, None, 0)
        hs = _lib.handles([None] * max(n, 0))
        if n < 0 or lib.vdev_tape_watched_variables(self._h, hs, n) < 0:
            raise _lib.error()
        found = {}
        for i in range(n):
            v = _VARIABLES.get(hs[i])
            if v is not None and self._watches(v):
                found[id(v)] = v
        for v in self._watched.values():  # watched, whether read or not
            found[id(v)] = v
        return tuple(sorted(found.values(), key=lambda v: v._made))

    def _watches(self, s):
        """Whether the tape differentiates with respect to source s: a
        Variable it watches, or any other tensor (vdev's tape knows whether
        it computed that one)."""
        if not isinstance(s, Variable):
            return True
        return (self._watch_accessed and s.trainable) or id(s) in self._watched

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """The gradient of target with respect to each source, in the
        structure of sources. A target of more than one element stands for
        its sum, as TensorFlow's does."""
        self._check_usable()
        if target is None:
            raise TypeError("Argument `target` should be a list or nested structure of Tensors, "
                            "Variables or CompositeTensors to be differentiated, but received "
                            "None.")
        targets = _flatten(target, []) if isinstance(target, (list, tuple, dict)) else [target]
        for t in targets:
            if not isinstance(t, Tensor):
                raise TypeError("target must be a vdev tensor, not %r" % (t,))
        seeds = self._output_gradients(output_gradients, targets)
        floating = []
        for t in targets:
            dt = t.dtype
            floating.append(dt is float32)
            if dt is not float32:
                _log.warning("The dtype of the target tensor must be floating (e.g. "
                             "vdev.float32) when calling GradientTape.gradient, got %s",
                             dt.name)
        # the others reach nothing
        if not all(floating):
            seeds = [d for f, d in zip(floating, seeds) if f]
            targets = [t for f, t in zip(floating, targets) if f]
        flat = _flatten(sources, [])
        for s in flat:
            if not isinstance(s, Tensor):
                raise TypeError("sources must be vdev tensors or Variables, not %r" % (s,))
        unconnected = _unconnected(unconnected_gradients)
        self._stop_for("gradient")
        watches = [self._watches(s) for s in flat]
        asked = [s for s, w in zip(flat, watches) if w]
        # A failure leaves the tape (stopped) to answer another call, as
        # TensorFlow's, which a non-persistent tape forgets only on success.
        sums = self._sum_over_targets(targets, asked, unconnected, seeds)
        if not self._persistent:
            self._end()
            self._used = True
        grads = iter(sums)
        out = []
        for s, w in zip(flat, watches):
            if w:
                out.append(next(grads))
            elif unconnected == 0:  # an unwatched Variable with UnconnectedGradients.ZERO
                from ._ops import _fill_like
                out.append(_fill_like(s, 0))
            else:
                out.append(None)
        return _pack(sources, iter(out)) if isinstance(sources, (list, tuple, dict)) else out[0]

    def _stop_for(self, call):
        """Stops the recording for a gradient or jacobian call (not inside
        stop_recording): every path stops it here, as the warning says; a
        call vdev refuses (another thread's) leaves the tape as it was."""
        if self._recording and not self._paused:
            self._halt(call, "ask it for gradients before its `with` block ends")
            if self._persistent:
                _log.warning("GradientTape.%s was called inside the tape's `with` block: "
                             "vdev's tape stops recording here, so ops after this call are not "
                             "recorded and gradients of their results are None (TensorFlow's "
                             "persistent tape goes on recording). Ask for gradients after the "
                             "block.", call)

    def jacobian(self, target, sources, unconnected_gradients=UnconnectedGradients.NONE,
                 parallel_iterations=None, experimental_use_pfor=True):
        """The Jacobian of target with respect to each source, in the
        structure of sources, as TensorFlow's: of shape target.shape +
        source.shape, None (or zeros) for a source target does not reach.
        One gradient per element of target (vdev has no pfor: the two last
        arguments change nothing, but experimental_use_pfor=False on a tape
        that is not persistent is TensorFlow's RuntimeError)."""
        self._check_usable()
        if not isinstance(target, Tensor):
            raise TypeError("target must be a vdev tensor, not %r" % (target,))
        flat = _flatten(sources, [])
        for s in flat:
            if not isinstance(s, Tensor):
                raise TypeError("sources must be vdev tensors or Variables, not %r" % (s,))
        for s in flat:  # before any gradient: a failure spends nothing
            if target.ndim + s.ndim > 4:
                raise ValueError("vdev tensors have 0 to 4 dimensions, not %d: the Jacobian of "
                                 "a target of shape %s with respect to a source of shape %s"
                                 % (target.ndim + s.ndim, tuple(target.shape), tuple(s.shape)))
        self._check_pfor(experimental_use_pfor, "jacobian")
        arrays = self._jacobian_arrays(target, flat, unconnected_gradients, "jacobian")
        out = [None if a is None else self._constant(a, s) for a, s in zip(arrays, flat)]
        return _pack(sources, iter(out)) if isinstance(sources, (list, tuple, dict)) else out[0]

    def batch_jacobian(self, target, source, unconnected_gradients=UnconnectedGradients.NONE,
                       parallel_iterations=None, experimental_use_pfor=True):
        """TensorFlow's batch_jacobian: for target [b, y...] and source
        [b, x...], the Jacobian of each row of target with respect to the same
        row of source, of shape [b, y..., x...] (rows assumed independent);
        zeros for a source target does not reach, whatever
        unconnected_gradients says, as TensorFlow's. The whole Jacobian is
        kept on the host, so it may have more dimensions than a vdev tensor."""
        self._check_usable()
        for what, t in (("target", target), ("source", source)):
            if not isinstance(t, Tensor):
                raise TypeError("%s must be a vdev tensor, not %r" % (what, t))
            if t.ndim < 2:  # TensorFlow's TensorShape.with_rank_at_least(2)
                raise ValueError("Shape %s must have rank at least 2" % (tuple(t.shape),))
        if target.shape[0] != source.shape[0]:
            raise ValueError("Need first dimension of target shape (%s) and source shape (%s) "
                             "to match." % (tuple(target.shape), tuple(source.shape)))
        self._check_pfor(experimental_use_pfor, "batch_jacobian")
        import numpy as np
        b = target.shape[0]
        ty, sx = tuple(target.shape[1:]), tuple(source.shape[1:])
        full = self._jacobian_arrays(target, [source], unconnected_gradients,
                                     "batch_jacobian")[0]
        if full is None or not full.size:
            # zeros, not None, whatever unconnected_gradients says, as TensorFlow's
            return self._zeros((b,) + ty + sx, source)
        a = full.reshape((b, -1, b, max(int(np.prod(sx)), 1)))
        diag = np.stack([a[i, :, i, :] for i in range(b)])
        return self._constant(diag.reshape((b,) + ty + sx), source)

    def _check_pfor(self, experimental_use_pfor, call):
        """TensorFlow's refusal of experimental_use_pfor=False on a tape that
        is not persistent (its loop asks the tape for one gradient per
        element); vdev's loop is the same either way."""
        if not experimental_use_pfor and not self._persistent:
            raise RuntimeError("GradientTape must be created with persistent=True to compute "
                               "the %s with eager execution enabled and  with "
                               "experimental_use_pfor set to False." % call)

    @staticmethod
    def _constant(array, like):
        from ._device import on_device_of
        from ._tensor import constant
        with on_device_of(like):
            return constant(array)

    def _zeros(self, shape, like):
        import numpy as np
        return self._constant(np.zeros(shape, np.float32), like)

    def _jacobian_arrays(self, target, flat, unconnected_gradients, call):
        """For each source of flat, the Jacobian as a numpy array of shape
        target.shape + source.shape, or None where target reaches the source
        in no element (with UnconnectedGradients.NONE): one seeded gradient
        per element. Stops the recording first, and spends a non-persistent
        tape once done."""
        import numpy as np
        unconnected = _unconnected(unconnected_gradients)
        self._stop_for(call)
        if target.dtype is not float32:
            _log.warning("The dtype of the target tensor must be floating (e.g. vdev.float32) "
                         "when calling GradientTape.%s, got %s", call, target.dtype.name)
        asked = [s for s in flat if self._watches(s)]
        tshape = tuple(target.shape)
        size = int(np.prod(tshape)) if tshape else 1
        n = len(asked)
        rows = [[] for _ in range(n)]
        hv = _lib.handles([s._handle for s in asked])
        for i in range(size if target.dtype is float32 else 0):
            e = np.zeros(size, np.float32)
            e[i] = 1
            seed = self._constant(e.reshape(tshape), target)
            hg = _lib.handles([None] * n)
            _lib.check(lib.vdev_tape_gradient_seeded(self._h, target._handle, seed._handle,
                                                     hv, n, hg, unconnected))
            for k in range(n):
                rows[k].append(Tensor(hg[k]).numpy() if hg[k] else None)
        if not self._persistent:
            self._end()
            self._used = True
        blocks = iter(rows)
        out = []
        for s in flat:
            shape = tshape + tuple(s.shape)
            if not self._watches(s):
                out.append(np.zeros(shape, np.float32) if unconnected == 0 else None)
                continue
            got = next(blocks)
            if size and target.dtype is float32 and all(r is None for r in got):
                out.append(None)  # the target reaches it in no element
            elif not got or any(r is None for r in got):
                out.append(np.zeros(shape, np.float32) if unconnected == 0 or size == 0
                           else None)
            else:
                out.append(np.stack(got).reshape(shape))
        return out

    def _check_usable(self):
        if self._h is None:
            if self._used:
                raise RuntimeError("A non-persistent GradientTape can only be used to compute "
                                   "one set of gradients (or jacobians)")
            raise RuntimeError("The tape was never entered: use `with vdev.GradientTape() as "
                               "tape:`")

    @staticmethod
    def _output_gradients(output_gradients, targets):
        """One seed per target (None: ones), as TensorFlow flattens
        output_gradients beside the targets; a value that is not a tensor is
        converted."""
        if output_gradients is None:
            return [None] * len(targets)
        from ._tensor import convert_to_tensor
        flat = (_flatten(output_gradients, []) if isinstance(output_gradients, (list, tuple, dict))
                else [output_gradients])
        if len(flat) != len(targets):
            raise ValueError("output_gradients has %d entries but the target %d tensors: one "
                             "for each, or None" % (len(flat), len(targets)))
        return [None if d is None else d if isinstance(d, Tensor) else convert_to_tensor(d)
                for d in flat]

    def _sum_over_targets(self, targets, asked, unconnected, seeds):
        """For each tensor of `asked`, the sum of its gradients from every
        target (None where no target reaches it, with
        UnconnectedGradients.NONE)."""
        n = len(asked)
        hv = _lib.handles([s._handle for s in asked])
        sums = [None] * n
        if unconnected == 0 and not targets:
            from ._ops import _fill_like
            return [_fill_like(s, 0) for s in asked]
        for t, d in zip(targets, seeds):
            hg = _lib.handles([None] * n)
            if d is None:
                _lib.check(lib.vdev_tape_gradient_ex(self._h, t._handle, hv, n, hg, unconnected))
            else:
                _lib.check(lib.vdev_tape_gradient_seeded(self._h, t._handle, d._handle, hv, n,
                                                         hg, unconnected))
            for i in range(n):
                if hg[i]:
                    g = Tensor(hg[i])
                    if sums[i] is None:
                        sums[i] = g
                    else:
                        with _on_device_of(g):  # the gradients' device, whatever the scope
                            sums[i] = _add(sums[i], g)
        return sums

    def _no_copy(self, *args):
        raise TypeError("cannot copy or pickle a vdev.GradientTape: it holds vdev's recording")

    __copy__ = __deepcopy__ = __reduce_ex__ = _no_copy

    def __del__(self, _end=lib.vdev_tape_release):
        # Possibly on another thread than the one recording (a tape whose
        # block was never left): vdev_tape_release makes that thread drop it.
        h, self._h = getattr(self, "_h", None), None
        if h:
            _end(h)

