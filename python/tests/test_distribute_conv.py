"""A small convolutional net (Conv2D, ReLU, MaxPooling2D, Flatten, Dense,
per-example cross-entropy) under MirroredStrategy: on two and three replicas
its replicas stay bit-identical and its weights equal one device's training
on the whole global batch within 1e-6 (on one replica, bit for bit); a
checkpoint saved mid-training with Adam's state resumes in a new process
with the losses of an uninterrupted run, bit for bit, and restores into a
strategy of another replica count; a load of MirroredVariables inside
strategy.run is refused, as their assign is, and changes nothing. Three
simulated 16 GiB GPUs (conftest)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import vdev
from vdev import layers

D = vdev.distribute
HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = 12


def data():
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (ROWS, 8, 8, 2)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, ROWS)]
    return x, y


def cnn():
    return vdev.models.Sequential([
        layers.Conv2D(4, 3, padding="same", activation="relu", seed=11, input_shape=(8, 8, 2),
                      name="conv"),
        layers.MaxPooling2D(name="pool"), layers.Flatten(name="flat"),
        layers.Dense(3, seed=12, input_dim=64, name="out")])


def bits(v):
    return np.asarray(v.numpy()).tobytes()


class Mirrored:
    """The CNN and Adam made under a strategy over `devices`, trained on the
    global batch (on the host) with compute_average_loss."""

    def __init__(self, devices):
        self.s = D.MirroredStrategy(devices)
        with self.s.scope():
            self.model = cnn()
            self.opt = vdev.optimizers.Adam(0.01)
        self.ce = vdev.losses.CategoricalCrossentropy(from_logits=True, reduction="none")
        x, y = data()
        with vdev.device("CPU:0"):
            self.x, self.y = vdev.constant(x), vdev.constant(y)

    def _step(self, x, y):
        with vdev.GradientTape() as tape:
            loss = vdev.nn.compute_average_loss(self.ce(y, self.model(x)))
        v = self.model.trainable_variables
        self.opt.apply_gradients(zip(tape.gradient(loss, v), v))
        return loss

    def train(self, n):
        out = []
        for _ in range(n):
            per = self.s.run(self._step, args=(D.DistributedBatch(self.s, self.x),
                                               D.DistributedBatch(self.s, self.y)))
            out.append(float(self.s.reduce("SUM", per, axis=None)))
        return out

    def tensors(self):
        return {v.name: v for v in self.model.trainable_variables}


def one_device(steps):
    """The same training on GPU:0 with the whole batch and Keras's mean loss."""
    x, y = data()
    with vdev.device("GPU:0"):
        model = cnn()
        opt = vdev.optimizers.Adam(0.01)
        ce = vdev.losses.CategoricalCrossentropy(from_logits=True)
        for _ in range(steps):
            with vdev.GradientTape() as tape:
                loss = ce(y, model(x))
            v = model.trainable_variables
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
    return model


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_cnn_on_n_replicas_trains_as_on_one_device(n):
    vdev.config.experimental.enable_op_determinism()
    m = Mirrored(["GPU:%d" % i for i in range(n)])
    losses = m.train(6)
    assert losses[-1] < losses[0]
    for v in m.model.trainable_variables:  # every replica's copy, the same bits
        assert len({bits(c) for c in v.values}) == 1
    # what the steps left on each device: the model and Adam's slots, alike
    assert len({m.s.memory_info(r)["current"] for r in range(n)}) == 1
    ref = one_device(6)
    for a, b in zip(m.model.trainable_variables, ref.trainable_variables):
        assert a.shape == b.shape
        if n == 1:
            assert bits(a) == bits(b)
        else:  # each replica sums its rows, then the ring adds the sums
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6)


RESUME = """
import sys
sys.path.insert(0, %r)
import test_distribute_conv as t
import vdev
vdev.config.experimental.enable_op_determinism()
m = t.Mirrored(["GPU:0", "GPU:1"])
vdev.train.load_checkpoint(sys.argv[1], m.tensors(), optimizer=m.opt)
assert m.opt.iterations == 3
print(" ".join(repr(x) for x in m.train(3)))
""" % HERE


def test_a_checkpoint_mid_training_resumes_bit_for_bit(tmp_path):
    vdev.config.experimental.enable_op_determinism()
    path = str(tmp_path / "cnn.safetensors")
    whole = Mirrored(["GPU:0", "GPU:1"]).train(6)
    vdev.shutdown()
    vdev.config.experimental.enable_op_determinism()
    first = Mirrored(["GPU:0", "GPU:1"])
    assert first.train(3) == whole[:3]
    vdev.train.save_checkpoint(path, first.tensors(), optimizer=first.opt, metadata={"step": 3})
    names = [n for n, _ in vdev.train.list_variables(path)]
    assert "conv/kernel/adam_m" in names and "optimizer/iterations" in names
    # a new process (the same environment: three simulated GPUs) goes on
    out = subprocess.run([sys.executable, "-c", RESUME, path], capture_output=True, text=True,
                         timeout=600)  # a hang's bound: sanitizers and load slow training
    assert out.returncode == 0, out.stderr
    assert [float(x) for x in out.stdout.split()] == whole[3:]
    # and a strategy of three replicas restores the file into every replica
    vdev.shutdown()
    vdev.config.experimental.enable_op_determinism()
    three = Mirrored(["GPU:0", "GPU:1", "GPU:2"])
    vdev.train.load_checkpoint(path, three.tensors(), optimizer=three.opt)
    for v in three.model.trainable_variables:
        assert len({bits(c) for c in v.values}) == 1
    np.testing.assert_allclose(three.train(3), whole[3:], rtol=0, atol=1e-6)


def test_a_load_of_mirrored_variables_inside_a_step_is_refused(tmp_path):
    path = str(tmp_path / "cnn.safetensors")
    m = Mirrored(["GPU:0", "GPU:1"])
    m.train(1)
    vdev.train.save_checkpoint(path, m.tensors(), optimizer=m.opt)
    m.train(1)
    before = {n: [bits(c) for c in v.values] for n, v in m.tensors().items()}
    tensors = m.tensors()

    def load(optimizer):
        vdev.train.load_checkpoint(path, tensors if optimizer is None else {}, optimizer)

    with pytest.raises(RuntimeError) as e:
        m.s.run(load, args=(None,))
    assert str(e.value) == (
        "load_checkpoint of a MirroredVariable ('conv/kernel') inside strategy.run: each "
        "replica's step would write every replica's copy while the others compute with theirs. "
        "Restore outside strategy.run (it writes every replica's copy at once)")
    with pytest.raises(RuntimeError) as e:  # the optimizer's state alone: also every replica's
        m.s.run(load, args=(m.opt,))
    assert str(e.value).startswith(
        "load_checkpoint of optimizer= made under a strategy's scope ('Adam') inside "
        "strategy.run: ")
    assert {n: [bits(c) for c in v.values] for n, v in m.tensors().items()} == before
    assert m.opt.iterations == 2
    vdev.train.load_checkpoint(path, tensors, optimizer=m.opt)  # outside: every replica
    assert m.opt.iterations == 1
    for v in m.model.trainable_variables:
        assert len({bits(c) for c in v.values}) == 1
