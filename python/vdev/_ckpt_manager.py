"""Numbered checkpoints in one folder, the last few kept: ``tf.train``'s
CheckpointManager and latest_checkpoint over vdev's name-based checkpoints.

    manager = vdev.train.CheckpointManager("run", max_to_keep=3)
    if manager.latest_checkpoint:            # a restart: go on from there
        vdev.train.load_checkpoint(manager.latest_checkpoint, tensors, optimizer=opt)
    for step in ...:
        ...
        if step % 100 == 0:
            manager.save(tensors, optimizer=opt, checkpoint_number=step)

Each save writes ``<directory>/<checkpoint_name>-<number>.safetensors`` with
save_checkpoint (atomically), then records it in the folder's state file
``checkpoint``, in TensorFlow's text format (``model_checkpoint_path:
"ckpt-3.safetensors"`` and one ``all_model_checkpoint_paths`` line per kept
checkpoint, oldest first), itself replaced atomically, and then deletes the
oldest checkpoints beyond max_to_keep (None keeps every one). A manager made
on a folder that has a state file goes on from it: the same list, the same
numbering (one past the newest), as TensorFlow's does. latest_checkpoint(dir)
reads the state file, as TensorFlow's. Where vdev differs: a path names the
one file (TensorFlow's names a prefix of several), the manager takes the
tensors at each save (there is no Checkpoint object), and
keep_checkpoint_every_n_hours, step_counter and checkpoint_interval are not
offered. A checkpoint listed in the state file but gone from the folder
(deleted by hand) is dropped from the list, with a warning. A state file
that cannot be read or parsed is ignored with two warnings (what is wrong,
then "<path>: Checkpoint ignored"), as TensorFlow's: latest_checkpoint is
None and a manager starts an empty list, which its first save writes over it.
"""

import logging
import numbers
import os
import re

from .train import save_checkpoint

_log = logging.getLogger("vdev")
_STATE = "checkpoint"
_LINE = re.compile(r'^(model_checkpoint_path|all_model_checkpoint_paths): "((?:[^"\\]|\\.)*)"$')


def _unquote(s):
    return re.sub(r"\\(.)", r"\1", s)


def _quote(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _ignored(path, why):
    """A state file that cannot be read or parsed is no state, after two
    warnings, as TensorFlow's get_checkpoint_state logs them."""
    _log.warning("%s", why)
    _log.warning("%s: Checkpoint ignored", path)
    return None, []


def _read_state(directory):
    """(latest, [all]) as written in directory's state file, paths joined to
    directory when relative; (None, []) without one, or with one that cannot
    be read or parsed (warned of). One that parses but names no newest
    checkpoint (an empty file, or only all_model_checkpoint_paths lines) is a
    ValueError, as TensorFlow's get_checkpoint_state raises."""
    path = os.path.join(directory, _STATE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None, []
    except (OSError, UnicodeDecodeError) as e:
        return _ignored(path, "%s: %s" % (type(e).__name__, e))
    latest, every = None, []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.match(line.strip())
        if not m:
            return _ignored(path, "%s:%d: not a line of a checkpoint state file: %r"
                            % (path, n, line))
        p = os.path.join(directory, _unquote(m.group(2)))
        if m.group(1) == "model_checkpoint_path":
            latest = p
        else:
            every.append(p)
    if latest is None:
        raise ValueError("Invalid checkpoint state loaded from " + directory)
    return latest, every


def latest_checkpoint(checkpoint_dir):
    """tf.train.latest_checkpoint: the path of the newest checkpoint the
    state file of checkpoint_dir names, or None (no state file, or its
    newest checkpoint is gone). ValueError: the state file names no newest
    checkpoint (TensorFlow's rule)."""
    latest, _ = _read_state(os.fspath(checkpoint_dir))
    return latest if latest is not None and os.path.exists(latest) else None


class CheckpointManager:
    """tf.train.CheckpointManager(directory, max_to_keep, checkpoint_name)
    for vdev's checkpoints: see the module's text."""

    def __init__(self, directory, max_to_keep, checkpoint_name="ckpt"):
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError("directory must be a string or a path, not %r" % (directory,))
        if max_to_keep is not None and (isinstance(max_to_keep, bool) or
                                        not isinstance(max_to_keep, numbers.Integral)):
            raise TypeError("max_to_keep must be an integer or None, not %r" % (max_to_keep,))
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError("Expected a positive integer or `None` for `max_to_keep`, got %d."
                             % max_to_keep)
        if not isinstance(checkpoint_name, str) or not checkpoint_name or \
                os.sep in checkpoint_name:
            raise ValueError("checkpoint_name must be a non-empty file name, not %r"
                             % (checkpoint_name,))
        self._directory = os.fspath(directory)
        self._max_to_keep = max_to_keep
        self._name = checkpoint_name
        _, every = _read_state(self._directory)
        kept = [p for p in every if os.path.exists(p)]
        for p in every:
            if p not in kept:
                _log.warning("checkpoint %s is listed in %s but does not exist: dropped", p,
                             os.path.join(self._directory, _STATE))
        self._checkpoints = kept
        self._number = max([self._number_of(p) for p in kept] + [0])

    def _number_of(self, path):
        m = re.match(re.escape(self._name) + r"-(\d+)\.safetensors$", os.path.basename(path))
        return int(m.group(1)) if m else 0

    @property
    def directory(self):
        return self._directory

    @property
    def max_to_keep(self):
        return self._max_to_keep

    @property
    def checkpoints(self):
        """The kept checkpoints' paths, oldest first."""
        return list(self._checkpoints)

    @property
    def latest_checkpoint(self):
        """The newest checkpoint's path, or None."""
        return self._checkpoints[-1] if self._checkpoints else None

    def save(self, tensors, optimizer=None, metadata=None, checkpoint_number=None):
        """Saves tensors (and the optimizer's state) as the next checkpoint,
        numbered checkpoint_number or one past the newest; returns its path.
        Then the state file is rewritten and the oldest checkpoints beyond
        max_to_keep are deleted. A save that fails leaves the list and the
        kept files as they were."""
        if checkpoint_number is None:
            number = self._number + 1
        elif isinstance(checkpoint_number, bool) or \
                not isinstance(checkpoint_number, numbers.Integral) or checkpoint_number < 0:
            raise ValueError("checkpoint_number must be a whole number >= 0, not %r"
                             % (checkpoint_number,))
        else:
            number = int(checkpoint_number)
        os.makedirs(self._directory, exist_ok=True)
        path = os.path.join(self._directory, "%s-%d.safetensors" % (self._name, number))
        save_checkpoint(path, tensors, metadata=metadata, optimizer=optimizer)
        kept = [p for p in self._checkpoints if p != path] + [path]
        drop = []
        if self._max_to_keep is not None:
            drop, kept = kept[:-self._max_to_keep], kept[-self._max_to_keep:]
        self._write_state(kept)
        self._checkpoints = kept
        self._number = max(self._number, number)
        for p in drop:
            try:
                os.remove(p)
            except FileNotFoundError:
                pass
        return path

    def _write_state(self, kept):
        rel = [os.path.relpath(p, self._directory) for p in kept]
        lines = ['model_checkpoint_path: "%s"' % _quote(rel[-1])]
        lines += ['all_model_checkpoint_paths: "%s"' % _quote(r) for r in rel]
        state = os.path.join(self._directory, _STATE)
        tmp = "%s.tmp%d" % (state, os.getpid())
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, state)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
