"""vdev.train.CheckpointManager and latest_checkpoint: numbering, the newest
max_to_keep kept and the older ones deleted, the state file in
TensorFlow's text format, a new manager going on from it, a restart that
trains on from the latest checkpoint as if it had never stopped, and the
argument errors."""
import logging
import os

import numpy as np
import pytest

import vdev

T = vdev.train


def _model():
    w = vdev.Variable(np.array([[1.0, -2.0], [0.5, 3.0]], dtype=np.float32), name="w")
    return {"w": w}, vdev.optimizers.Adam(0.1)


def _step(tensors, opt, k):
    w = tensors["w"]
    x = vdev.constant(np.array([[1.0, 2.0]], dtype=np.float32) * (k + 1))
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(vdev.square(vdev.matmul(x, w)))
    opt.apply_gradients([(tape.gradient(loss, w), w)])


def test_numbering_keeping_and_state(tmp_path):
    d = tmp_path / "run"  # made by the first save
    m = T.CheckpointManager(d, max_to_keep=2)
    assert m.latest_checkpoint is None and m.checkpoints == [] and m.max_to_keep == 2
    assert T.latest_checkpoint(d) is None
    tensors, opt = _model()
    paths = [m.save(tensors, optimizer=opt) for _ in range(3)]
    assert [os.path.basename(p) for p in paths] == [
        "ckpt-1.safetensors", "ckpt-2.safetensors", "ckpt-3.safetensors"]
    assert m.checkpoints == paths[1:] and m.latest_checkpoint == paths[2]
    assert not os.path.exists(paths[0]) and all(os.path.exists(p) for p in paths[1:])
    assert (d / "checkpoint").read_text() == (
        'model_checkpoint_path: "ckpt-3.safetensors"\n'
        'all_model_checkpoint_paths: "ckpt-2.safetensors"\n'
        'all_model_checkpoint_paths: "ckpt-3.safetensors"\n')
    assert T.latest_checkpoint(str(d)) == paths[2]
    # a number given (a step), then the numbering goes on past it
    p = m.save(tensors, checkpoint_number=100)
    assert os.path.basename(p) == "ckpt-100.safetensors"
    assert os.path.basename(m.save(tensors)) == "ckpt-101.safetensors"
    # saving a number again moves it to the newest place
    m2 = T.CheckpointManager(d, max_to_keep=None, checkpoint_name="ckpt")
    assert m2.checkpoints == m.checkpoints
    m2.save(tensors, checkpoint_number=100)
    assert [os.path.basename(x) for x in m2.checkpoints] == [
        "ckpt-101.safetensors", "ckpt-100.safetensors"]
    assert T.latest_checkpoint(d) == str(d / "ckpt-100.safetensors")
    assert sorted(os.listdir(d)) == ["checkpoint", "ckpt-100.safetensors",
                                     "ckpt-101.safetensors"]


def test_restart_goes_on_as_if_never_stopped(tmp_path):
    tensors, opt = _model()
    for k in range(6):
        _step(tensors, opt, k)
    want = tensors["w"].numpy()
    # the same run, stopped after step 3 and restarted from the latest
    tensors, opt = _model()
    m = T.CheckpointManager(tmp_path, max_to_keep=1)
    for k in range(4):
        _step(tensors, opt, k)
        m.save(tensors, optimizer=opt, checkpoint_number=k)
    tensors, opt = _model()
    m = T.CheckpointManager(tmp_path, max_to_keep=1)
    assert os.path.basename(m.latest_checkpoint) == "ckpt-3.safetensors"
    T.load_checkpoint(m.latest_checkpoint, tensors, optimizer=opt)
    assert opt.iterations == 4
    for k in range(4, 6):
        _step(tensors, opt, k)
    np.testing.assert_array_equal(tensors["w"].numpy(), want)


def test_a_missing_checkpoint_is_dropped(tmp_path, caplog):
    tensors, _ = _model()
    m = T.CheckpointManager(tmp_path, max_to_keep=3)
    a, b = m.save(tensors), m.save(tensors)
    os.remove(b)
    assert T.latest_checkpoint(tmp_path) is None  # its newest is gone
    with caplog.at_level(logging.WARNING, logger="vdev"):
        m = T.CheckpointManager(tmp_path, max_to_keep=3)
    assert m.checkpoints == [a]
    assert "checkpoint %s is listed in %s but does not exist: dropped" % (
        b, os.path.join(str(tmp_path), "checkpoint")) in caplog.text
    assert os.path.basename(m.save(tensors)) == "ckpt-2.safetensors"


def test_a_failed_save_changes_nothing(tmp_path):
    tensors, _ = _model()
    m = T.CheckpointManager(tmp_path, max_to_keep=1)
    first = m.save(tensors)
    with pytest.raises(TypeError):
        m.save({"w": 3.0})
    assert m.checkpoints == [first] and os.path.exists(first)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-1.safetensors"]
    assert os.path.basename(m.save(tensors)) == "ckpt-2.safetensors"


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError) as e:
        T.CheckpointManager(tmp_path, max_to_keep=0)
    assert str(e.value) == "Expected a positive integer or `None` for `max_to_keep`, got 0."
    with pytest.raises(TypeError) as e:
        T.CheckpointManager(tmp_path, max_to_keep=2.5)
    assert str(e.value) == "max_to_keep must be an integer or None, not 2.5"
    with pytest.raises(TypeError):
        T.CheckpointManager(3, max_to_keep=1)
    with pytest.raises(ValueError) as e:
        T.CheckpointManager(tmp_path, 1, checkpoint_name="a/b")
    assert str(e.value) == "checkpoint_name must be a non-empty file name, not 'a/b'"
    m = T.CheckpointManager(tmp_path, 1)
    tensors, _ = _model()
    with pytest.raises(ValueError) as e:
        m.save(tensors, checkpoint_number=-1)
    assert str(e.value) == "checkpoint_number must be a whole number >= 0, not -1"


@pytest.mark.parametrize("garbled", [b"garbage\n", b'model_checkpoint_path: "\xff"\n'])
def test_a_garbled_state_file_is_ignored_with_a_warning(tmp_path, caplog, garbled):
    """As TensorFlow's get_checkpoint_state: a state file that does not
    parse is warned of and ignored: latest_checkpoint is None, a manager
    starts an empty list and its first save writes the state file anew."""
    tensors, _ = _model()
    T.CheckpointManager(tmp_path, max_to_keep=2).save(tensors)
    state = os.path.join(str(tmp_path), "checkpoint")
    with open(state, "wb") as f:
        f.write(garbled)
    why = ("%s:1: not a line of a checkpoint state file: 'garbage'" % state
           if garbled.startswith(b"garbage") else
           "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 24: "
           "invalid start byte")
    for make in (lambda: T.latest_checkpoint(tmp_path),
                 lambda: T.CheckpointManager(tmp_path, max_to_keep=2)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="vdev"):
            got = make()
        assert [r.getMessage() for r in caplog.records] == [
            why, "%s: Checkpoint ignored" % state]
    assert got.checkpoints == [] and got.latest_checkpoint is None
    assert T.latest_checkpoint(tmp_path) is None
    path = got.save(tensors)
    assert os.path.basename(path) == "ckpt-1.safetensors"
    assert T.latest_checkpoint(tmp_path) == path


@pytest.mark.parametrize("text", [b"", b"\n",
                                  b'all_model_checkpoint_paths: "ckpt-1.safetensors"\n'])
def test_a_state_file_naming_no_newest_checkpoint_raises(tmp_path, text):
    """As TensorFlow's get_checkpoint_state: a state file that parses but has
    no model_checkpoint_path (an empty one too) is a ValueError, from
    latest_checkpoint and from a new manager alike; nothing is changed."""
    tensors, _ = _model()
    T.CheckpointManager(tmp_path, max_to_keep=2).save(tensors)
    state = os.path.join(str(tmp_path), "checkpoint")
    with open(state, "wb") as f:
        f.write(text)
    for make in (lambda: T.latest_checkpoint(tmp_path),
                 lambda: T.CheckpointManager(str(tmp_path), max_to_keep=2)):
        with pytest.raises(ValueError) as e:
            make()
        assert str(e.value) == "Invalid checkpoint state loaded from " + str(tmp_path)
    with open(state, "rb") as f:
        assert f.read() == text
