"""vdev.train checkpoints from Python: save and load round trip (tensors on
several devices, f32 and i32, 0-dimensional), metadata, the entries and
list_variables, the file read with json and numpy alone, every error with
vdev's message and nothing changed by a failed load, a MirroredVariable
saved once and restored into every replica, and the determinism switch
(enable_op_determinism / disable_op_determinism)."""
import json
import os
import pathlib
import re
import struct
import zlib

import numpy as np
import pytest

import vdev

T = vdev.train
E = vdev.config.experimental


@pytest.fixture
def tensors():
    with vdev.device("GPU:1"):
        w = vdev.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    with vdev.device("CPU:0"):
        it = vdev.Variable(np.int32(7))
    b = vdev.constant([0.5, -1.5])
    return {"dense0/w": w, "optimizer/iterations": it, "dense0/b": b}


def test_round_trip(tmp_path, tensors):
    path = tmp_path / "ckpt.safetensors"
    T.save_checkpoint(path, tensors, metadata={"step": 12, "loss": 0.25, "note": "x"})
    meta = T.checkpoint_metadata(str(path))
    assert meta.pop("vdev.crc32") and meta.pop("vdev.header_crc32")
    assert meta == {"vdev.format": "1", "step": "12", "loss": "0.25", "note": "x"}
    assert T.checkpoint_entries(path) == [
        ("dense0/w", "F32", [2, 3], 0, 24), ("optimizer/iterations", "I32", [], 24, 4),
        ("dense0/b", "F32", [2], 28, 8)]
    e = T.checkpoint_entries(path)[1]
    assert (e.name, e.dtype, e.shape, e.offset, e.size) == ("optimizer/iterations", "I32", [],
                                                            24, 4)
    assert repr(e) == ("CheckpointEntry(name='optimizer/iterations', dtype='I32', shape=[], "
                       "offset=24, size=4)")
    assert T.list_variables(path) == [("dense0/b", [2]), ("dense0/w", [2, 3]),
                                      ("optimizer/iterations", [])]
    # Python reads the file without vdev: the header is JSON, the data raw.
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    lo, hi = head["dense0/w"]["data_offsets"]
    assert np.frombuffer(data[lo:hi], "<f4").reshape(2, 3).tolist() == [[0, 1, 2], [3, 4, 5]]
    tensors["dense0/w"].assign(np.zeros((2, 3), np.float32))
    tensors["optimizer/iterations"].assign(0)
    fresh = vdev.zeros([2])
    T.load_checkpoint(path, {"dense0/w": tensors["dense0/w"],
                             "optimizer/iterations": tensors["optimizer/iterations"],
                             "dense0/b": fresh})
    assert tensors["dense0/w"].numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert tensors["dense0/w"].device.endswith("/device:GPU:1")
    assert int(tensors["optimizer/iterations"].numpy()) == 7
    assert fresh.numpy().tolist() == [0.5, -1.5]
    T.load_checkpoint(path, {})  # verifies the file
    T.save_checkpoint(str(path), {})  # no tensors: fine, and replaces the file
    assert T.checkpoint_entries(path) == []


def test_errors_change_nothing(tmp_path, tensors):
    path = str(tmp_path / "ckpt.safetensors")
    T.save_checkpoint(path, tensors, metadata={"step": "3"})
    w = tensors["dense0/w"]
    w.assign(np.full((2, 3), 9.0, np.float32))
    q = "checkpoint '%s': " % path
    missing = str(tmp_path / "none.safetensors")
    cases = [
        (lambda: T.load_checkpoint(missing, {"dense0/w": w}), vdev.errors.NotFoundError,
         "checkpoint '%s': cannot open: No such file or directory" % missing),
        (lambda: T.checkpoint_metadata(missing), vdev.errors.NotFoundError,
         "checkpoint '%s': cannot open: No such file or directory" % missing),
        (lambda: T.load_checkpoint(path, {"dense0/w": w, "nope": tensors["dense0/b"]}),
         vdev.errors.InvalidArgumentError,
         q + "no entry 'nope' (asked for by names[1]; the file has 3 entries)"),
        (lambda: T.load_checkpoint(path, {"dense0/w": tensors["optimizer/iterations"]}),
         vdev.errors.InvalidArgumentError,
         q + "entry 'dense0/w' is F32 [2, 3] in the file, but tensors[0] is I32 []"),
        (lambda: T.load_checkpoint(path, {"dense0/b": w}), vdev.errors.InvalidArgumentError,
         q + "entry 'dense0/b' is F32 [2] in the file, but tensors[0] is F32 [2, 3]"),
        (lambda: T.save_checkpoint(path, {"": w}), vdev.errors.InvalidArgumentError,
         q + "names[0] is empty"),
        (lambda: T.save_checkpoint(path, {"a": w}, metadata={"vdev.x": "1"}),
         vdev.errors.InvalidArgumentError,
         q + "metadata key 'vdev.x' starts with \"vdev.\", which vdev reserves"),
        (lambda: T.save_checkpoint(path, {"__metadata__": w}), vdev.errors.InvalidArgumentError,
         q + "names[0] is '__metadata__', which the format reserves"),
        (lambda: T.save_checkpoint(path, {"a": 1.0}), TypeError,
         "'a': a checkpoint holds vdev tensors, not 1.0"),
        (lambda: T.save_checkpoint(path, [w]), TypeError, None),
        (lambda: T.save_checkpoint(path, {1: w}), TypeError,
         "a tensor's name must be a string, not 1"),
        (lambda: T.save_checkpoint(path, {"a": w}, metadata={"m": [1]}), TypeError,
         "metadata 'm': a value is a string or a number, not [1]"),
        (lambda: T.save_checkpoint(path, {"a": w}, metadata={"m": True}), TypeError, None),
        (lambda: T.save_checkpoint(3, {"a": w}), TypeError, None),
    ]
    for fn, cls, msg in cases:
        with pytest.raises(cls) as e:
            fn()
        if msg is not None:
            assert str(e.value) == msg
    if os.path.exists(str(tmp_path / "no")):
        pytest.fail("a failed save made a folder")
    assert T.checkpoint_metadata(path)["step"] == "3"  # the checkpoint is still in place
    assert sorted(os.listdir(tmp_path)) == ["ckpt.safetensors"]  # no temporary file left
    raw = pathlib.Path(path).read_bytes()
    trunc = tmp_path / "trunc.safetensors"
    trunc.write_bytes(raw[:-3])
    with pytest.raises(vdev.errors.DataLossError) as e:  # TensorFlow's, for a truncated file
        T.load_checkpoint(trunc, {"dense0/w": w})
    assert e.value.error_code == 15 and e.value.status == "VDEV_ERR_IO"
    assert str(e.value) == ("checkpoint '%s' is damaged: entry 'dense0/b' ends at byte 36 of "
                            "the data, but the file holds 33 bytes of data (truncated?)" % trunc)
    flipped = bytearray(raw)
    flipped[-1] ^= 0x40
    bad = tmp_path / "crc.safetensors"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(vdev.errors.DataLossError) as e:  # TensorFlow's, for a bad checksum
        T.load_checkpoint(bad, {"dense0/w": w})
    assert re.fullmatch("checkpoint '%s' is damaged: checksum mismatch: the data's CRC-32 is "
                        "[0-9a-f]{8}, the header says [0-9a-f]{8}" % re.escape(str(bad)),
                        str(e.value))
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(struct.pack("<Q", 8) + b"not json")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        T.load_checkpoint(junk, {"dense0/w": w})
    assert e.value.status == "VDEV_ERR_PARSE"
    assert str(e.value) == "checkpoint '%s': the header does not start with '{'" % junk
    with pytest.raises(vdev.errors.InvalidArgumentError):
        T.checkpoint_entries(junk)
    assert w.numpy().tolist() == [[9.0] * 3] * 2  # every failed load changed nothing


def test_every_truncation_is_data_loss(tmp_path):
    """A checkpoint cut at any length, inside the length, the header or the
    data, is DataLossError for a load, the metadata and the entries alike;
    its message says the file is damaged and the tensor keeps its value."""
    w = vdev.Variable(np.arange(48, dtype=np.float32).reshape(6, 8))
    full = tmp_path / "full.safetensors"
    T.save_checkpoint(full, {"dense0/w": w, "b": vdev.zeros([300])}, metadata={"step": 1})
    raw = full.read_bytes()
    w.assign(np.full((6, 8), 9.0, np.float32))
    cut = tmp_path / "cut.safetensors"
    for n in range(len(raw)):
        cut.write_bytes(raw[:n])
        for call in (lambda: T.load_checkpoint(cut, {"dense0/w": w}),
                     lambda: T.checkpoint_metadata(cut), lambda: T.checkpoint_entries(cut)):
            with pytest.raises(vdev.errors.DataLossError) as e:
                call()
            assert e.value.status == "VDEV_ERR_IO", n
            assert str(e.value).startswith("checkpoint '%s' is damaged: " % cut), n
            assert "truncated?" in str(e.value), n
    assert w.numpy().tolist() == [[9.0] * 8] * 6


def test_newer_format_is_unimplemented(tmp_path):
    """A file of a newer vdev.format, with its header's CRC right (what a newer
    vdev keeping this layout writes), is UnimplementedError naming the
    version, not a damaged file; a damaged "1" is DataLossError."""
    w = vdev.zeros([2])
    v1 = tmp_path / "v1.st"
    T.save_checkpoint(v1, {"w": w})
    raw = v1.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    for fmt, seal in ((b"2", True), (b"3", False)):
        h = raw[8:8 + n].replace(b'"vdev.format":"1"', b'"vdev.format":"' + fmt + b'"')
        m = re.search(rb'"vdev.header_crc32":"([0-9a-f]{8})"', h)
        if seal:
            crc = b"%08x" % zlib.crc32(h[:m.start(1)] + b"00000000" + h[m.end(1):])
            h = h[:m.start(1)] + crc + h[m.end(1):]
        path = tmp_path / ("v%s.st" % fmt.decode())
        path.write_bytes(raw[:8] + h + raw[8 + n:])
        for call in (lambda: T.load_checkpoint(path, {"w": w}),
                     lambda: T.checkpoint_metadata(path)):
            with pytest.raises(vdev.errors.UnimplementedError if seal
                               else vdev.errors.DataLossError) as e:
                call()
            if seal:
                assert str(e.value) == ("checkpoint '%s': vdev.format is \"2\"; this vdev reads "
                                        "format 1" % path)
            else:
                assert str(e.value).startswith("checkpoint '%s' is damaged: header checksum "
                                               "mismatch: " % path)


def test_mirrored_variables(tmp_path):
    s = vdev.distribute.MirroredStrategy()
    with s.scope():
        model = vdev.models.MLP([3, 4, 2], seed=9)
    names = {"w%d" % i: v for i, v in enumerate(model.trainable_variables)}
    path = tmp_path / "m.safetensors"
    T.save_checkpoint(path, names)
    assert [e.shape for e in T.checkpoint_entries(path)] == [[3, 4], [4], [4, 2], [2]]
    want = [v.numpy().tobytes() for v in model.trainable_variables]
    for v in model.trainable_variables:
        v.assign(np.zeros(v.shape, np.float32))
    T.load_checkpoint(path, names)  # into every replica
    for v, w in zip(model.trainable_variables, want):
        assert [c.numpy().tobytes() for c in v.values] == [w] * 3


def test_determinism_switch():
    assert E.is_op_determinism_enabled() is False
    E.enable_op_determinism()
    assert E.is_op_determinism_enabled() is True
    with vdev.device("GPU:0"):
        a = vdev.random.normal([64, 64], seed=1)
        r1 = (a @ a).numpy().tobytes()
        r2 = (a @ a).numpy().tobytes()
    assert r1 == r2
    E.disable_op_determinism()
    assert E.is_op_determinism_enabled() is False
    E.enable_op_determinism()
    vdev.shutdown()  # turns it off, as vdev_shutdown() does
    assert E.is_op_determinism_enabled() is False


def _entries(path):
    """{name: numpy array} of every entry of a checkpoint, read with json and
    numpy alone."""
    raw = pathlib.Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    head.pop("__metadata__", None)
    kinds = {"F32": "<f4", "I32": "<i4"}
    return {name: np.frombuffer(raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]],
                                kinds[e["dtype"]]).reshape(e["shape"])
            for name, e in head.items()}


def _train(model, opt, steps, first, schedule=None):
    """Trains steps steps from step first; schedule: {step: {hyperparameter:
    value}} set before that step. The losses, as exact bytes."""
    mse = vdev.losses.MeanSquaredError()
    losses = []
    for k in range(first, first + steps):
        for attr, value in (schedule or {}).get(k, {}).items():
            setattr(opt, attr, value)
        x = vdev.random.uniform([16, 6], seed=100 + k)
        y = vdev.random.uniform([16, 3], seed=200 + k)
        with vdev.GradientTape() as tape:
            loss = mse(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(loss.numpy().tobytes())
    return losses


def _fresh(make, seed):
    """A new MLP 6-8-3 of that seed, an optimizer from make(), and the
    model's variables by checkpoint name ("w0", "w1", ...)."""
    model = vdev.models.MLP([6, 8, 3], seed=seed)
    return model, make(), {"w%d" % i: v for i, v in enumerate(model.trainable_variables)}


@pytest.mark.parametrize("make", [lambda: vdev.optimizers.Adam(0.01),
                                  lambda: vdev.optimizers.SGD(0.05, momentum=0.9)])
@pytest.mark.parametrize("with_optimizer", [True, False])
def test_optimizer_state_resumes_bit_for_bit(tmp_path, make, with_optimizer):
    """Saved with the optimizer, a stopped run goes on as if it had not
    stopped; without it, the slots start from zero and the run differs."""
    with vdev.device("GPU:0"):
        model, opt, _ = _fresh(make, 1)
        _train(model, opt, 12, 0)
        full = [v.numpy().tobytes() for v in model.trainable_variables]

        model, opt, names = _fresh(make, 1)
        _train(model, opt, 6, 0)
        assert opt.iterations == 6
        path = tmp_path / "resume.safetensors"
        T.save_checkpoint(path, names, metadata={"step": 6}, optimizer=opt)
        # vdev/checkpoint.h's names, as a C job reads them
        slots = {"m": "adam_m", "v": "adam_v", "momentum": "momentum"}
        slots = [slots[s] for s in opt.get_slot_names()]
        assert T.list_variables(path) == sorted(
            [(n, list(v.shape)) for n, v in names.items()] + [("optimizer/iterations", [])] +
            [("%s/%s" % (n, s), list(v.shape)) for n, v in names.items() for s in slots])
        assert [e.dtype for e in T.checkpoint_entries(path)
                if e.name == "optimizer/iterations"] == ["I32"]
        assert _entries(path)["optimizer/iterations"] == 6
        assert "optimizer/iterations" not in T.checkpoint_metadata(path)

        model, opt, names = _fresh(make, 2)
        if with_optimizer:
            T.load_checkpoint(path, names, optimizer=opt)
            assert opt.iterations == 6
        else:
            T.load_checkpoint(path, names)
        _train(model, opt, 6, 6)
        resumed = [v.numpy().tobytes() for v in model.trainable_variables]
    assert (resumed == full) == with_optimizer


@pytest.mark.parametrize("make", [lambda: vdev.optimizers.Adam(0.01),
                                  lambda: vdev.optimizers.SGD(0.05, momentum=0.9)])
def test_optimizer_state_of_older_files_resumes(tmp_path, make):
    """A checkpoint as earlier versions wrote it (slots "<name>/m" and
    "<name>/v", the count as the metadata key "optimizer/iterations"),
    written here through the public API, still resumes bit for bit."""
    model, opt, _ = _fresh(make, 1)
    _train(model, opt, 12, 0)
    full = [v.numpy().tobytes() for v in model.trainable_variables]

    model, opt, names = _fresh(make, 1)
    _train(model, opt, 6, 0)
    path = tmp_path / "new.safetensors"
    T.save_checkpoint(path, names, optimizer=opt)
    old = {}
    for name, arr in _entries(path).items():
        if name != "optimizer/iterations":
            for new, was in (("/adam_m", "/m"), ("/adam_v", "/v")):
                name = name[:-len(new)] + was if name.endswith(new) else name
            old[name] = vdev.constant(arr)
    older = tmp_path / "older.safetensors"
    T.save_checkpoint(older, old, metadata={"optimizer/iterations": 6})
    assert any(n.endswith("/m") or n.endswith("/momentum") for n, _ in T.list_variables(older))

    model, opt, names = _fresh(make, 2)
    T.load_checkpoint(older, names, optimizer=opt)
    assert opt.iterations == 6
    _train(model, opt, 6, 6)
    assert [v.numpy().tobytes() for v in model.trainable_variables] == full


@pytest.mark.parametrize("make, schedule", [
    (lambda: vdev.optimizers.Adam(0.01),  # a schedule, ReduceLROnPlateau: lr changed
     {5: {"learning_rate": 0.001, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-5}}),
    (lambda: vdev.optimizers.SGD(0.05, momentum=0.9), {5: {"learning_rate": 0.02,
                                                           "momentum": 0.5}}),
    (lambda: vdev.optimizers.SGD(0.05, momentum=0.9), {5: {"momentum": 0.0}}),  # off
    (lambda: vdev.optimizers.SGD(0.05), {3: {"momentum": 0.7}}),  # on
])
def test_hyperparameters_changed_before_the_save_resume(tmp_path, make, schedule):
    """Hyperparameters changed during the run are saved with the optimizer and
    restored into a fresh one, so the resumed run's losses are the
    uninterrupted run's, bit for bit."""
    model, opt = vdev.models.MLP([6, 8, 3], seed=1), make()
    full = _train(model, opt, 20, 0, schedule)

    model, opt = vdev.models.MLP([6, 8, 3], seed=1), make()
    first = _train(model, opt, 10, 0, schedule)
    names = {"w%d" % i: v for i, v in enumerate(model.trainable_variables)}
    path = tmp_path / "hyper.safetensors"
    T.save_checkpoint(path, names, metadata={"step": 10}, optimizer=opt)
    meta = T.checkpoint_metadata(path)
    for attr, value in schedule[min(schedule)].items():
        assert meta["optimizer/" + attr] == repr(float(value))

    model, opt = vdev.models.MLP([6, 8, 3], seed=2), make()
    names = {"w%d" % i: v for i, v in enumerate(model.trainable_variables)}
    T.load_checkpoint(path, names, optimizer=opt)
    for attr, value in schedule[min(schedule)].items():
        assert float(getattr(opt, attr)) == value
    assert first + _train(model, opt, 10, 10) == full


def test_hyperparameters_on_a_failed_load_or_an_older_file(tmp_path):
    """A failed load leaves the hyperparameters (and SGD's velocity) as they
    were; a file without hyperparameters (an earlier version's) keeps the
    optimizer's own."""
    model, opt = vdev.models.MLP([6, 8, 3], seed=1), vdev.optimizers.SGD(0.05)
    _train(model, opt, 2, 0)
    names = {"w%d" % i: v for i, v in enumerate(model.trainable_variables)}
    path = tmp_path / "plain.safetensors"
    T.save_checkpoint(path, names, optimizer=opt)  # momentum 0: no velocity
    model, opt = vdev.models.MLP([6, 8, 3], seed=1), vdev.optimizers.SGD(0.3, momentum=0.9)
    _train(model, opt, 2, 0)
    names = {"w%d" % i: v for i, v in enumerate(model.trainable_variables)}
    state = tmp_path / "state.safetensors"

    def velocity():  # read through a save of the optimizer's state
        T.save_checkpoint(state, names, optimizer=opt)
        return {n: a.tobytes() for n, a in _entries(state).items() if n.endswith("/momentum")}

    was = velocity()
    assert len(was) == 4 and any(any(b) for b in was.values())
    bad = dict(names, w0=vdev.Variable(np.zeros((2, 2), np.float32)))
    with pytest.raises(vdev.errors.InvalidArgumentError):
        T.load_checkpoint(path, bad, optimizer=opt)
    assert (float(opt.learning_rate), float(opt.momentum)) == (0.3, 0.9)
    assert velocity() == was and opt.iterations == 2
    T.load_checkpoint(path, names, optimizer=opt)
    assert (float(opt.learning_rate), float(opt.momentum)) == (0.05, 0.0)

    meta = {k: v for k, v in T.checkpoint_metadata(path).items()
            if not k.startswith("vdev.") and not k.startswith("optimizer/")}
    older = tmp_path / "older.safetensors"
    T.save_checkpoint(older, {n: vdev.constant(a) for n, a in _entries(path).items()}, meta)
    assert not any(k.startswith("optimizer/") for k in T.checkpoint_metadata(older))
    opt = vdev.optimizers.SGD(0.25)
    T.load_checkpoint(older, names, optimizer=opt)
    assert float(opt.learning_rate) == 0.25 and opt.iterations == 2


def test_optimizer_state_errors(tmp_path):
    model = vdev.models.MLP([2, 2], seed=1)
    names = {"w%d" % i: v for i, v in enumerate(model.trainable_variables)}
    path = tmp_path / "plain.safetensors"
    T.save_checkpoint(path, names)
    opt = vdev.optimizers.Adam()
    w = names["w0"].numpy().tobytes()
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        T.load_checkpoint(path, names, optimizer=opt)
    assert str(e.value) == ("checkpoint '%s': no entry 'optimizer/iterations' (saved without "
                            "an optimizer?)" % path)
    T.save_checkpoint(path, names, metadata={"optimizer/iterations": "x"})
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        T.load_checkpoint(path, names, optimizer=opt)
    assert str(e.value) == ("checkpoint '%s': metadata key 'optimizer/iterations' is 'x', not "
                            "a whole number (saved without an optimizer?)" % path)
    assert names["w0"].numpy().tobytes() == w and opt.iterations == 0
    with pytest.raises(TypeError):
        T.save_checkpoint(path, names, optimizer="adam")
    with pytest.raises(TypeError):
        opt.iterations = 1.5
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        opt.iterations = -1
    assert str(e.value) == "vdev_optimizer_set_iterations: -1 updates is negative"
    assert vdev.optimizers.SGD(0.1).get_slot_names() == []


def _unchanged(names, opt, before, hyper):
    for n, v in names.items():
        np.testing.assert_array_equal(v.numpy(), before[n])
    assert {a: float(getattr(opt, a)) for a in hyper} == hyper


_ANOTHER = ("checkpoint '%s': it was saved with another optimizer, %s, but optimizer= is %s. "
            "Load it with an optimizer of that kind, or without optimizer= to restore only the "
            "tensors")


@pytest.mark.parametrize("saved_with,loaded_with", [
    (lambda: vdev.optimizers.SGD(0.1, momentum=0.9), lambda: vdev.optimizers.Adam(0.01)),
    (lambda: vdev.optimizers.SGD(0.1), lambda: vdev.optimizers.Adam(0.01)),
    (lambda: vdev.optimizers.Adam(0.01), lambda: vdev.optimizers.SGD(0.05, momentum=0.9)),
    (lambda: vdev.optimizers.Adam(0.01), lambda: vdev.optimizers.SGD(0.05))])
def test_a_checkpoint_of_another_optimizer_says_so(tmp_path, saved_with, loaded_with):
    """A file saved with one kind of optimizer loaded with the other is
    refused, naming both, whether or not SGD keeps a velocity (plain SGD has
    no slot to miss, and took Adam's learning rate and step count); nothing
    changes. Without optimizer= the tensors load."""
    model, first, names = _fresh(saved_with, 1)
    _train(model, first, 3, 0)
    path = tmp_path / "saved.safetensors"
    T.save_checkpoint(path, names, optimizer=first)
    model, opt, names2 = _fresh(loaded_with, 2)
    _train(model, opt, 1, 0)
    before = {n: v.numpy().copy() for n, v in names2.items()}
    hyper = {a: float(getattr(opt, a)) for a in ("learning_rate", "momentum", "beta_1")
             if hasattr(opt, a)}
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        T.load_checkpoint(path, names2, optimizer=opt)
    assert str(e.value) == _ANOTHER % (path, type(first).__name__, type(opt).__name__)
    assert opt.iterations == 1
    _unchanged(names2, opt, before, hyper)
    T.load_checkpoint(path, names2)
    for n, v in names.items():
        np.testing.assert_array_equal(names2[n].numpy(), v.numpy())


def test_an_earlier_versions_checkpoint_of_another_optimizer_says_so(tmp_path):
    """A file without the hyperparameters (an earlier version's) is told by
    its slots: Adam's "m" and "v" loaded into plain SGD are refused."""
    model, adam, names = _fresh(lambda: vdev.optimizers.Adam(0.01), 1)
    _train(model, adam, 2, 0)
    path = tmp_path / "adam.safetensors"
    T.save_checkpoint(path, names, optimizer=adam)
    old = tmp_path / "old.safetensors"
    e = _entries(path)
    tensors = {n.replace("/adam_", "/"): vdev.constant(a) for n, a in e.items()
               if n != "optimizer/iterations"}
    T.save_checkpoint(old, tensors, metadata={"optimizer/iterations": "2"})
    model, sgd, names2 = _fresh(lambda: vdev.optimizers.SGD(0.05), 2)
    before = {n: v.numpy().copy() for n, v in names2.items()}
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        T.load_checkpoint(old, names2, optimizer=sgd)
    assert str(e.value) == _ANOTHER % (old, "Adam", "SGD")
    assert sgd.iterations == 0
    _unchanged(names2, sgd, before, {"learning_rate": 0.05, "momentum": 0.0})


def test_amsgrad_loads_a_checkpoint_saved_without_it(tmp_path):
    """Adam(amsgrad=True) restores a checkpoint saved without AMSGrad as
    TensorFlow's object-based restore does: m, v and the count loaded, vhat
    (which the file lacks) left as it is, zeros; any other missing entry is
    still an error."""
    model, opt, names = _fresh(lambda: vdev.optimizers.Adam(0.01), 1)
    _train(model, opt, 3, 0)
    path = tmp_path / "plain_adam.safetensors"
    T.save_checkpoint(path, names, optimizer=opt)
    saved = _entries(path)
    assert not any(n.endswith("/adam_vhat") for n in saved)

    model, ams, names = _fresh(lambda: vdev.optimizers.Adam(0.01, amsgrad=True), 2)
    T.load_checkpoint(path, names, optimizer=ams)
    assert ams.iterations == 3
    for n, v in names.items():
        np.testing.assert_array_equal(v.numpy(), saved[n])
    # saved again: vhat is zeros, m and v the loaded ones
    again = tmp_path / "again.safetensors"
    T.save_checkpoint(again, names, optimizer=ams)
    back = _entries(again)
    for n in names:
        np.testing.assert_array_equal(back[n + "/adam_m"], saved[n + "/adam_m"])
        np.testing.assert_array_equal(back[n + "/adam_v"], saved[n + "/adam_v"])
        assert not back[n + "/adam_vhat"].any()
    assert back["optimizer/iterations"] == 3

    # only vhat may be missing
    part = {n: vdev.constant(a) for n, a in saved.items() if not n.endswith("/adam_v")}
    T.save_checkpoint(tmp_path / "no_v.safetensors", part)
    model, ams, names = _fresh(lambda: vdev.optimizers.Adam(0.01, amsgrad=True), 2)
    w = names["w0"].numpy().tobytes()
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        T.load_checkpoint(tmp_path / "no_v.safetensors", names, optimizer=ams)
    assert str(e.value) == ("checkpoint '%s': no entry 'w0/adam_v' (asked for by names[5]; the "
                            "file has 9 entries)" % (tmp_path / "no_v.safetensors"))
    assert names["w0"].numpy().tobytes() == w and ams.iterations == 0


def test_an_int32_variable_beside_the_optimizer_has_no_slots(tmp_path):
    """An int32 Variable saved with the model (a step counter, as
    tf.train.Checkpoint(step=...) holds one) is never an optimizer's: a save
    with optimizer= writes no slots for it (Keras keeps slots only for the
    variables it updates, and vdev's optimizers update float ones only), and
    a load restores it from a file that has none, as a C job writes."""
    model, opt, names = _fresh(lambda: vdev.optimizers.Adam(0.01), 1)
    _train(model, opt, 2, 0)
    names["step"] = vdev.Variable(np.int32(2), name="step")
    path = tmp_path / "step.safetensors"
    T.save_checkpoint(path, names, optimizer=opt)
    assert T.list_variables(path) == sorted(
        [(n, list(v.shape)) for n, v in names.items()] + [("optimizer/iterations", [])] +
        [("%s/%s" % (n, s), list(v.shape)) for n, v in names.items() if n != "step"
         for s in ("adam_m", "adam_v")])
    saved = _entries(path)
    assert saved["step"] == 2

    model, opt, names = _fresh(lambda: vdev.optimizers.Adam(0.01), 2)
    names["step"] = vdev.Variable(np.int32(0), name="step")
    T.load_checkpoint(path, names, optimizer=opt)
    assert names["step"].numpy() == 2 and opt.iterations == 2
    for n, v in names.items():
        np.testing.assert_array_equal(v.numpy(), saved[n])


def test_an_optimizer_without_variables_to_restore_is_refused(tmp_path):
    """load_checkpoint(..., optimizer=) into a model not built yet (a Dense
    without input_dim has no variables before its first call) would restore
    the count and hyperparameters alone, and training would go on from fresh
    weights at the saved step: refused, naming the likely cause, nothing
    changed. (TensorFlow defers such a restore until the variables are made.)"""
    model, opt, names = _fresh(lambda: vdev.optimizers.Adam(0.01), 1)
    _train(model, opt, 3, 0)
    path = tmp_path / "built.safetensors"
    T.save_checkpoint(path, names, optimizer=opt)
    unbuilt = vdev.models.Sequential([vdev.layers.Dense(8), vdev.layers.Dense(3)])
    fresh = vdev.optimizers.Adam(0.5)
    for tensors in ({v.name: v for v in unbuilt.variables},
                    {"step": vdev.Variable(np.int32(0), name="step")}):
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            T.load_checkpoint(path, tensors, optimizer=fresh)
        assert str(e.value) == (
            "checkpoint '%s': optimizer= restores the slots of the float Variables of tensors, "
            "but tensors holds none (%d tensors): is the model built? A layer without input_dim "
            "makes its variables at its first call; restore after it" % (path, len(tensors)))
        assert fresh.iterations == 0 and float(fresh.learning_rate) == 0.5
    T.load_checkpoint(path, {})  # without optimizer=, an empty mapping verifies the file


def test_a_variable_not_trainable_beside_the_optimizer_has_no_slots(tmp_path):
    """A Variable made with trainable=False (a gradient accumulator, a frozen
    table) saved with optimizer= gets no slots: none written, none made in
    the optimizer (Adam's m and v would double its memory twice over), and
    a load restores it from a file without them."""
    model, opt, names = _fresh(lambda: vdev.optimizers.Adam(0.01), 1)
    _train(model, opt, 2, 0)
    with vdev.device("GPU:0"):
        names["acc"] = vdev.Variable(np.full((256, 256), 0.5, np.float32), trainable=False)
    before = vdev.config.experimental.get_memory_info("GPU:0")["current"]
    path = tmp_path / "acc.safetensors"
    T.save_checkpoint(path, names, optimizer=opt)
    assert vdev.config.experimental.get_memory_info("GPU:0")["current"] == before
    assert not any(n.startswith("acc/") for n, _ in T.list_variables(path))

    model, opt, names = _fresh(lambda: vdev.optimizers.Adam(0.01), 2)
    names["acc"] = vdev.Variable(np.zeros((256, 256), np.float32), trainable=False)
    T.load_checkpoint(path, names, optimizer=opt)
    assert (names["acc"].numpy() == 0.5).all() and opt.iterations == 2
