"""Checkpoints, as ``tf.train``'s reading functions: named tensors saved to
and restored from one safetensors file (vdev_checkpoint_* in vdev.h).

    vdev.train.save_checkpoint("run/ckpt.safetensors",
                               {"dense_0/w": w0, "dense_0/b": b0}, metadata={"step": 1200})
    vdev.train.load_checkpoint("run/ckpt.safetensors", {"dense_0/w": w0, "dense_0/b": b0})
    vdev.train.checkpoint_metadata("run/ckpt.safetensors")["step"]   # '1200'
    vdev.train.list_variables("run/ckpt.safetensors")  # [('dense_0/b', [64]), ...]

Numbered checkpoints in a folder, the newest few kept, are
``vdev.train.CheckpointManager`` and ``vdev.train.latest_checkpoint``
(vdev/_ckpt_manager.py).

The file is the public safetensors format (an 8-byte header length, a JSON
header, then the raw little-endian data), with vdev's format version and
CRC-32s of the data and of the header in its metadata; Python reads it with json and numpy
alone. A save writes a temporary file beside the target, syncs it and
renames it over the target, so a crash never leaves a half-written
checkpoint in place. A load checks the header, every name, dtype and shape
and the checksums before it changes any tensor, so a failed load leaves every
tensor as it was. A missing file is NotFoundError (no checkpoint yet); a
name the file lacks is InvalidArgumentError; a truncated or damaged file
(a checksum that does not match) DataLossError, as TensorFlow's checkpoint
reader raises; a file the system refuses, the class TensorFlow gives its
errno (a full disk ResourceExhaustedError, a file too large OutOfRangeError,
no permission PermissionDeniedError, no folder NotFoundError: save_checkpoint
makes a missing folder first, as TensorFlow's saver does, so that is a folder
it cannot make, such as a dangling link), another file
error (cannot read) UnknownError; a header that
is not safetensors or a shape that differs InvalidArgumentError; each with
vdev's message naming the file and the problem.

A MirroredVariable (made under a MirroredStrategy's scope) saves its first
replica's value (the replicas are identical) and loads into every replica.
Given an optimizer, a save also writes its state, named as vdev/checkpoint.h
names it for C jobs too: each trainable float Variable's slots (an int32
one, a step counter, or one made with trainable=False, a gradient
accumulator, has none, as Keras makes slots for the variables it trains) as "<variable's
name>/<slot>" ("adam_m", "adam_v" and with AMSGrad "adam_vhat" for Adam's m, v, vhat, "momentum" for
SGD with momentum), and its iteration count as the entry
"optimizer/iterations", a 0-dimensional int32 tensor; a load with that
optimizer restores both, so training goes on bit for bit as if it had never
stopped. A load into Adam(amsgrad=True) of a file saved without AMSGrad (no
"<name>/adam_vhat") restores m, v and the count and leaves vhat as it is
(zeros before the first update), as TensorFlow's object-based restore leaves
a slot the checkpoint lacks; any other missing entry is an error.
A load also reads the names earlier versions wrote ("<name>/m",
"<name>/v", and the count as the metadata key "optimizer/iterations").
The hyperparameters in force (learning_rate; Adam's beta_1, beta_2,
epsilon; SGD's momentum), which Keras tracks as variables and a schedule may
have changed, are saved too, as metadata "optimizer/<name>" (the number as
Python writes it, read back exactly), and restored by the load; a file
without them (an earlier version's) leaves the optimizer's own. A file saved
with the other kind of optimizer (Adam's into SGD, with or without momentum,
or SGD's into Adam), told by those hyperparameters or, in an earlier
version's file, by its slots, is refused (InvalidArgumentError naming both);
nothing changes. Metadata of
the caller's under one of those keys, given with the optimizer, is refused
(it would be replaced).
"""

import ctypes
import numbers
import os

import numpy as np

from . import _lib, _strategy_context, errors
from ._device import device
from ._lib import lib
from ._tensor import Tensor, Variable, constant, int32, zeros
from .optimizers import SGD, Adam, Optimizer

_ITERATIONS = "optimizer/iterations"
# A slot's name (the optimizer's, Keras's) -> its entry's suffix in the file,
# vdev/checkpoint.h's convention; earlier versions wrote the slot's name.
_SLOT_ENTRY = {"m": "adam_m", "v": "adam_v", "vhat": "adam_vhat", "momentum": "momentum"}
# The hyperparameters an optimizer may have: its public attributes (Keras's
# names), each saved as the metadata key "optimizer/<name>".
_HYPERPARAMETERS = ("learning_rate", "beta_1", "beta_2", "epsilon", "momentum")
# What tells the kind of optimizer a file was saved with: the hyperparameters
# only that kind saves, or, in a file without them (an earlier version's), the
# slots only that kind has ("m" and "v": Adam's slots as earlier versions named them).
_KIND_KEYS = {"Adam": ("beta_1", "beta_2", "epsilon"), "SGD": ("momentum",)}
_KIND_SLOTS = {"Adam": ("adam_m", "adam_v", "adam_vhat", "m", "v"), "SGD": ("momentum",)}


def _hyperparameters(optimizer):
    """The optimizer's hyperparameters a checkpoint keeps: not the rate of
    one given a schedule (schedule(iterations) gives it at each update)."""
    scheduled = getattr(optimizer, "_schedule", None) is not None
    return [a for a in _HYPERPARAMETERS if hasattr(optimizer, a)
            and not (scheduled and a == "learning_rate")]


def _set_hyperparameters(optimizer, values):
    keep = set(_hyperparameters(optimizer))
    for a, v in values.items():
        if a in keep:
            setattr(optimizer, a, v)


def _path(path):
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, bytes):
        return path
    if not isinstance(path, str):
        raise TypeError("a checkpoint path must be a string or a path, not %r" % (path,))
    return path.encode("utf-8")


def _name(name, what):
    if not isinstance(name, str):
        raise TypeError("%s must be a string, not %r" % (what, name))
    return name.encode("utf-8")


def _tensors(tensors, expand):
    """(names, handles) of a {name: tensor} mapping; expand: a mirrored
    variable gives every replica's handle under its name."""
    if not hasattr(tensors, "items"):
        # the type, not the value: a list of variables prints every weight
        raise TypeError("tensors must be a mapping {name: tensor}, not a %s (a model's "
                        "weights: {v.name: v for v in model.weights})" % type(tensors).__name__)
    names, handles = [], []
    for name, t in tensors.items():
        n = _name(name, "a tensor's name")
        if not isinstance(t, Tensor):
            raise TypeError("%r: a checkpoint holds vdev tensors, not %r" % (name, t))
        hs = t._replica_handles() if expand and hasattr(t, "_replica_handles") else [t._handle]
        for h in hs:
            names.append(n)
            handles.append(h)
    return names, handles


def _meta_text(value, key):
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return str(value)
    raise TypeError("metadata %r: a value is a string or a number, not %r" % (key, value))


def _optimizer_state(tensors, optimizer, every_replica, older=False, skip=(), entries=None):
    """(names, handles) of the optimizer's slots for the trainable float
    Variables of tensors, but those named in skip: the first replica's, or every
    replica's; named as vdev/checkpoint.h names them, or as earlier versions
    did (older). entries (a load's: the file's entry names): a vhat the file
    lacks (saved without AMSGrad) is left out, as TensorFlow's restore leaves
    a slot the checkpoint lacks."""
    if not isinstance(optimizer, Optimizer):
        raise TypeError("optimizer must be a vdev optimizer, not %r" % (optimizer,))
    names, handles = [], []
    for name, t in tensors.items():
        if not isinstance(t, Variable) or not t.dtype.is_floating or not t.trainable:
            continue  # a step counter, a gradient accumulator: no slots, as in Keras
        for slot, hs in optimizer._slot_handles(t):
            if slot in skip:
                continue
            entry = slot if older else _SLOT_ENTRY.get(slot, slot)
            if entries is not None and slot == "vhat" and "%s/%s" % (name, entry) not in entries:
                continue
            n = _name("%s/%s" % (name, entry), "a slot's name")
            for h in (hs if every_replica else hs[:1]):
                names.append(n)
                handles.append(h)
    return names, handles


def _kind(optimizer):
    return "Adam" if isinstance(optimizer, Adam) else "SGD" if isinstance(optimizer, SGD) else None


def _saved_kind(tensors, entries, meta):
    """The kind of optimizer ("Adam", "SGD") the file was saved with, or None
    where the file does not tell (no hyperparameters, no slots)."""
    kinds = {k for k, keys in _KIND_KEYS.items() if any("optimizer/" + a in meta for a in keys)}
    if not kinds:
        kinds = {k for k, slots in _KIND_SLOTS.items() for name in tensors for s in slots
                 if "%s/%s" % (name, s) in entries}
    return kinds.pop() if len(kinds) == 1 else None


def _another_optimizers_slots(path, wanted, entries):
    """An InvalidArgumentError that says so when a slot entry the load wants
    is missing and the file holds other slots for the same variable: it was
    saved with another optimizer (Adam's adam_m and adam_v where SGD wants
    momentum, or the reverse)."""
    slots = set(_SLOT_ENTRY.values()) | {"m", "v"}
    wanted = [w.decode("utf-8") for w in wanted]
    for w in wanted:
        if w in entries:
            continue
        var = w.rsplit("/", 1)[0]
        if any(x in entries for x in wanted if x.rsplit("/", 1)[0] == var):
            continue  # some of this optimizer's slots are there: not another optimizer's file
        theirs = sorted(e for e in entries
                        if e.rsplit("/", 1)[0] == var and e.rsplit("/", 1)[-1] in slots)
        if theirs:
            raise errors.InvalidArgumentError(
                "checkpoint '%s': no entry '%s' for the optimizer's slot; the file holds %s "
                "for '%s': it was saved with another optimizer. Load it with an optimizer of "
                "that kind, or without optimizer= to restore only the tensors"
                % (os.fsdecode(_path(path)), w, ", ".join("'%s'" % e for e in theirs), var),
                "VDEV_ERR_INVALID_ARG")


def _make_folder(path):
    """Makes path's folder and its parents where missing, as TensorFlow's
    saver does before it writes. A folder that cannot be made (no
    permission, a file or a dangling link in its place) is left for the
    write, whose error names the file and the system's reason, as
    TensorFlow's write fails after recursive_create_dir passes over a name
    that exists."""
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError:
            pass


def save_checkpoint(path, tensors, metadata=None, optimizer=None):
    """Writes tensors ({name: tensor}, in that order, on any devices) and
    metadata ({key: str or number}; numbers are written as decimal text) to
    path, replacing it atomically; a folder of path's that does not exist is
    made first (with its parents), as TensorFlow's checkpoint saver makes
    it (recursive_create_dir); where it cannot be made, the write's error
    says why (NotFoundError, PermissionDeniedError, ...). Names and keys are
    non-empty UTF-8 of at most 1024 bytes; keys starting with 'vdev.' are
    vdev's. With an optimizer, also its state (the module's text says how).
    On error path is unchanged."""
    try:
        _save(path, tensors, metadata, optimizer)
    finally:
        if isinstance(optimizer, Optimizer):
            optimizer._release_slots()  # the save is done with the slots' handles


def _save(path, tensors, metadata, optimizer):
    names, handles = _tensors(tensors, expand=False)
    metadata = dict(metadata or {})
    if optimizer is not None:
        n, h = _optimizer_state(tensors, optimizer, every_replica=False)
        it = optimizer.iterations
        if it > 2**31 - 1:
            raise errors.InvalidArgumentError(
                "checkpoint '%s': the optimizer's %d iterations do not fit the int32 entry '%s'"
                % (os.fsdecode(_path(path)), it, _ITERATIONS), "VDEV_ERR_INVALID_ARG")
        with device("CPU:0"):
            count = constant(np.int32(it))
        names, handles = names + n + [_ITERATIONS.encode()], handles + h + [count._handle]
        for a in _hyperparameters(optimizer):
            if "optimizer/" + a in metadata:  # would be silently replaced
                raise errors.InvalidArgumentError(
                    "checkpoint '%s': metadata key 'optimizer/%s' is the optimizer's own: "
                    "save_checkpoint writes it from optimizer=; give yours another key"
                    % (os.fsdecode(_path(path)), a), "VDEV_ERR_INVALID_ARG")
            metadata["optimizer/" + a] = repr(float(getattr(optimizer, a)))
    meta = []
    for k, v in metadata.items():
        meta += [_name(k, "a metadata key"), _meta_text(v, k).encode("utf-8")]
    c_names = (ctypes.c_char_p * max(len(names), 1))(*names)
    c_meta = (ctypes.c_char_p * max(len(meta), 1))(*meta)
    _make_folder(_path(path))
    _lib.check(lib.vdev_checkpoint_save(_path(path), c_names, _lib.handles(handles), len(names),
                                        c_meta, len(meta) // 2))


def _refuse_mirrored_in_step(tensors, optimizer):
    """A load inside a step function writes every replica's copy of a
    MirroredVariable (and every replica's optimizer state) from each
    replica's thread, while the other replicas read theirs in their own step:
    their results would depend on timing, and the replicas could part. So it
    is refused there, as assign is (a RuntimeError before anything is read)."""
    if _strategy_context.replica() is None or not hasattr(tensors, "items"):
        return
    what = None
    for name, t in tensors.items():
        if hasattr(t, "_replica_handles"):
            what = "a MirroredVariable (%r)" % (name,)
            break
    if what is None and getattr(optimizer, "_replica_h", None) is not None:
        what = "optimizer= made under a strategy's scope (%r)" % (optimizer.name,)
    if what is not None:
        raise RuntimeError(
            "load_checkpoint of %s inside strategy.run: each replica's step would write every "
            "replica's copy while the others compute with theirs. Restore outside "
            "strategy.run (it writes every replica's copy at once)" % what)


def load_checkpoint(path, tensors, optimizer=None):
    """Restores each tensor of {name: tensor} in place from the entry of that
    name (same dtype and shape), and with an optimizer its state and
    hyperparameters. Everything is checked first: on error no tensor, slot,
    count or hyperparameter has changed. With an optimizer, tensors must hold
    a float Variable (an unbuilt model has none: restore once it is built).
    Inside strategy.run, MirroredVariables and an optimizer made under a
    strategy's scope are refused (RuntimeError): a load writes every replica's
    copy, and each replica's step would do so while the others compute with
    theirs."""
    _refuse_mirrored_in_step(tensors, optimizer)
    names, handles = _tensors(tensors, expand=True)
    iterations = count = None
    now = later = before = {}
    if optimizer is not None:
        if not any(isinstance(t, Variable) and t.dtype.is_floating for _, t in tensors.items()):
            # the count and hyperparameters alone would resume fresh weights at a later step
            raise errors.InvalidArgumentError(
                "checkpoint '%s': optimizer= restores the slots of the float Variables of "
                "tensors, but tensors holds none (%d tensors): is the model built? A layer "
                "without input_dim makes its variables at its first call; restore after it"
                % (os.fsdecode(_path(path)), len(tensors)), "VDEV_ERR_INVALID_ARG")
        entries, meta = _header(path)
        saved_kind, kind = _saved_kind(tensors, entries, meta), _kind(optimizer)
        if saved_kind is not None and kind is not None and saved_kind != kind:
            # SGD without momentum has no slots to miss: it would take Adam's
            # learning rate and step count; Adam would miss SGD's velocity
            raise errors.InvalidArgumentError(
                "checkpoint '%s': it was saved with another optimizer, %s, but optimizer= is "
                "%s. Load it with an optimizer of that kind, or without optimizer= to restore "
                "only the tensors" % (os.fsdecode(_path(path)), saved_kind, kind),
                "VDEV_ERR_INVALID_ARG")
        older = _ITERATIONS not in entries  # the count in the metadata, slots as m and v
        if older:
            text = meta.get(_ITERATIONS)
            if text is None or not text.isdigit():
                raise errors.InvalidArgumentError(
                    "checkpoint '%s': %s (saved without an optimizer?)"
                    % (os.fsdecode(_path(path)),
                       "no entry '%s'" % _ITERATIONS if text is None else
                       "metadata key '%s' is %r, not a whole number" % (_ITERATIONS, text)),
                    "VDEV_ERR_INVALID_ARG")
            iterations = int(text)
        saved = {}
        for a in _hyperparameters(optimizer):
            text = meta.get("optimizer/" + a)
            try:
                if text is not None:
                    saved[a] = float(text)
            except ValueError:
                raise errors.InvalidArgumentError(
                    "checkpoint '%s': metadata key 'optimizer/%s' is %r, not a number"
                    % (os.fsdecode(_path(path)), a, text), "VDEV_ERR_INVALID_ARG") from None
        # The hyperparameters are set before the slots are gathered, as SGD
        # keeps a velocity only with momentum; but momentum switched off frees
        # the velocity at once (zeroes one handed out), which a failed load
        # must not do: that one is set after the load, and the velocity is
        # not loaded.
        before = {a: float(getattr(optimizer, a)) for a in saved}
        later = {a: v for a, v in saved.items() if a == "momentum" and v == 0 and before[a]}
        now = {a: v for a, v in saved.items() if a not in later}
    try:
        _set_hyperparameters(optimizer, now)
        if optimizer is not None:
            n, h = _optimizer_state(tensors, optimizer, every_replica=True, older=older,
                                    skip=("momentum",) if later else (), entries=entries)
            names, handles = names + n, handles + h
            _another_optimizers_slots(path, n, entries)
            if not older:
                with device("CPU:0"):
                    count = zeros([], int32)
                names, handles = names + [_ITERATIONS.encode()], handles + [count._handle]
        c_names = (ctypes.c_char_p * max(len(names), 1))(*names)
        _lib.check(lib.vdev_checkpoint_load(_path(path), c_names, _lib.handles(handles),
                                            len(names)))
    except BaseException:
        _set_hyperparameters(optimizer, {a: before[a] for a in now})
        raise
    finally:
        if isinstance(optimizer, Optimizer):
            optimizer._release_slots()  # the load is done with the slots' handles
    _set_hyperparameters(optimizer, later)
    if count is not None:
        iterations = int(count.numpy())
    if iterations is not None:
        optimizer.iterations = iterations



class _Open:
    """vdev_checkpoint_open ... vdev_checkpoint_close."""

    def __init__(self, path):
        self.h = ctypes.c_void_p()
        _lib.check(lib.vdev_checkpoint_open(_path(path), ctypes.byref(self.h)))

    def __enter__(self):
        return self.h

    def __exit__(self, *exc):
        lib.vdev_checkpoint_close(self.h)
        return False


def _header(path):
    """({entry names}, {metadata key: value}) of the file, from one read of
    its header."""
    entries, meta = set(), {}
    with _Open(path) as h:
        for i in range(lib.vdev_checkpoint_n_entries(h)):
            e = _lib.CheckpointEntryC()
            _lib.check(lib.vdev_checkpoint_entry(h, i, ctypes.byref(e)))
            entries.add(e.name.decode("utf-8"))
        for i in range(lib.vdev_checkpoint_n_metadata(h)):
            k, v = ctypes.c_char_p(), ctypes.c_char_p()
            _lib.check(lib.vdev_checkpoint_metadata_at(h, i, ctypes.byref(k), ctypes.byref(v)))
            meta[k.value.decode("utf-8")] = v.value.decode("utf-8")
    return entries, meta


def checkpoint_metadata(path):
    """{key: value} of the file's metadata, vdev's own ('vdev.format',
    'vdev.crc32', 'vdev.header_crc32') included; values are strings. Reads only the header."""
    return _header(path)[1]


class CheckpointEntry(tuple):
    """One tensor of a checkpoint: name, dtype (the file's: 'F32', 'I32',
    'BOOL' (one byte an element in the file), or another safetensors dtype
    vdev has no tensors of), shape, and where its bytes are (offset from the
    start of the data, size)."""

    __slots__ = ()

    def __new__(cls, name, dtype, shape, offset, size):
        return super().__new__(cls, (name, dtype, shape, offset, size))

    name = property(lambda self: self[0])
    dtype = property(lambda self: self[1])
    shape = property(lambda self: self[2])
    offset = property(lambda self: self[3])
    size = property(lambda self: self[4])

    def __repr__(self):
        return ("CheckpointEntry(name=%r, dtype=%r, shape=%r, offset=%d, size=%d)"
                % tuple(self))


def checkpoint_entries(path):
    """[CheckpointEntry, ...] in the order of their data. Reads only the header."""
    out = []
    with _Open(path) as h:
        for i in range(lib.vdev_checkpoint_n_entries(h)):
            e = _lib.CheckpointEntryC()
            _lib.check(lib.vdev_checkpoint_entry(h, i, ctypes.byref(e)))
            out.append(CheckpointEntry(e.name.decode("utf-8"), e.dtype_name.decode("utf-8"),
                                       [e.shape[d] for d in range(e.ndim)], e.offset_bytes,
                                       e.size_bytes))
    return out


def list_variables(path):
    """[(name, shape), ...] sorted by name, as ``tf.train.list_variables``."""
    return sorted((e.name, e.shape) for e in checkpoint_entries(path))


__all__ = ["save_checkpoint", "load_checkpoint", "checkpoint_metadata", "checkpoint_entries",
           "list_variables", "CheckpointEntry", "CheckpointManager", "latest_checkpoint"]


from ._ckpt_manager import CheckpointManager, latest_checkpoint  # noqa: E402,F401
