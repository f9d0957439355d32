"""SGD without momentum keeps no velocity, as Keras's SGD makes no momentum
slot: its updates take no device memory beyond the variables and gradients
(measured exactly on a simulated GPU), switching momentum off frees the
velocity and switching it on makes it at the next update; its checkpoint has
no momentum entry, as Keras's, and a file that has one (saved without the
optimizer's hyperparameters, as an earlier version's) is accepted: ignored by
an optimizer without momentum, used by one with it."""
import json
import pathlib
import struct

import numpy as np

import vdev

E = vdev.config.experimental
T = vdev.train
SHAPE = (256, 64)
BYTES = 256 * 64 * 4  # a multiple of 256: no rounding


def _current():
    return E.get_memory_info("GPU:0")["current"]


def test_sgd_without_momentum_takes_no_memory():
    with vdev.device("GPU:0"):
        v = vdev.Variable(np.ones(SHAPE, np.float32))
        g = vdev.constant(np.full(SHAPE, 0.5, np.float32))
        before = _current()
        assert before == 2 * BYTES
        plain = vdev.optimizers.SGD(0.1)
        for _ in range(3):
            plain.apply_gradients([(g, v)])
            assert _current() == before  # the variable's and the gradient's only
        assert plain.get_slot_names() == []
        want = np.float32(1)
        for _ in range(3):  # var -= lr g, in float32
            want = np.float32(want - np.float32(0.1) * np.float32(0.5))
        np.testing.assert_array_equal(v.numpy(), np.full(SHAPE, want))

        opt = vdev.optimizers.SGD(0.1, momentum=0.9)
        opt.apply_gradients([(g, v)])
        assert _current() == before + BYTES  # one velocity
        opt.momentum = 0.0
        assert _current() == before  # freed at once
        opt.apply_gradients([(g, v)])
        assert _current() == before
        opt.momentum = 0.5
        assert _current() == before
        opt.apply_gradients([(g, v)])
        assert _current() == before + BYTES  # made again at the next update
        del opt, plain


def _entries(path):
    """({name: numpy array}, metadata) of a checkpoint, read with json and
    numpy alone."""
    raw = pathlib.Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    meta = head.pop("__metadata__", {})
    kinds = {"F32": "<f4", "I32": "<i4"}
    return {name: np.frombuffer(raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]],
                                kinds[e["dtype"]]).reshape(e["shape"])
            for name, e in head.items()}, meta


def _train(model, opt, steps, first):
    """The losses of steps steps from step first, as exact bytes."""
    mse = vdev.losses.MeanSquaredError()
    losses = []
    for k in range(first, first + steps):
        x = vdev.random.uniform([16, 6], seed=100 + k)
        y = vdev.random.uniform([16, 3], seed=200 + k)
        with vdev.GradientTape() as tape:
            loss = mse(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(loss.numpy().tobytes())
    return losses


def _fresh(seed, **kw):
    model = vdev.models.MLP([6, 8, 3], seed=seed)
    names = {"w%d" % i: v for i, v in enumerate(model.trainable_variables)}
    return model, vdev.optimizers.SGD(0.05, **kw), names


def test_checkpoint_without_momentum_has_no_slot(tmp_path):
    """Saved without momentum: the weights and the step count, no momentum
    entry (Keras's SGD has no slot to save); loaded, the run goes on bit for
    bit, and the load makes no velocity."""
    with vdev.device("GPU:0"):
        model, opt, _ = _fresh(1)
        full = _train(model, opt, 6, 0)
        model, opt, names = _fresh(1)
        first = _train(model, opt, 3, 0)
        path = tmp_path / "plain.safetensors"
        T.save_checkpoint(path, names, optimizer=opt)
        entries, meta = _entries(path)
        assert sorted(entries) == ["optimizer/iterations", "w0", "w1", "w2", "w3"]
        assert meta["optimizer/momentum"] == "0.0"
        model, opt, names = _fresh(2)
        before = _current()
        T.load_checkpoint(path, names, optimizer=opt)
        assert _current() == before and opt.iterations == 3
        assert first + _train(model, opt, 3, 3) == full


def test_older_file_with_a_velocity(tmp_path):
    """A file with momentum entries and no hyperparameters (an earlier
    version's): an optimizer with momentum resumes from its velocity, bit for
    bit; one without accepts it and ignores the velocity (no memory made, the
    run is plain SGD's from the saved weights)."""
    with vdev.device("GPU:0"):
        model, opt, _ = _fresh(1, momentum=0.9)
        full = _train(model, opt, 6, 0)
        model, opt, names = _fresh(1, momentum=0.9)
        first = _train(model, opt, 3, 0)
        saved = tmp_path / "saved.safetensors"
        T.save_checkpoint(saved, names, optimizer=opt)
        entries, _ = _entries(saved)
        assert "w0/momentum" in entries
        older = tmp_path / "older.safetensors"
        T.save_checkpoint(older, {n: vdev.constant(a) for n, a in entries.items()})
        assert not any(k.startswith("optimizer/") for k in _entries(older)[1])

        model, opt, names = _fresh(2, momentum=0.9)
        T.load_checkpoint(older, names, optimizer=opt)
        assert first + _train(model, opt, 3, 3) == full

        model, opt, names = _fresh(2)  # no momentum
        before = _current()
        T.load_checkpoint(older, names, optimizer=opt)
        assert _current() == before and float(opt.momentum) == 0.0
        ref, plain, ref_names = _fresh(3)
        T.load_checkpoint(older, ref_names)  # the weights alone
        assert _train(model, opt, 3, 3) == _train(ref, plain, 3, 3)
