"""Dilated convolutions and SGD's velocity as a demanding user meets them:
a dilation of INT_MAX (the largest the C call takes) under SAME, where only
the taps that land inside the input count, its values and both gradients
against a hand reference on CPU:0 and a simulated GPU; a small dilated
convolutional net trained with fit() under a MirroredStrategy of two
simulated GPUs, against the same net trained on one device; and the
velocity's memory per replica, measured exactly, through a checkpoint's
save, a load of a checkpoint saved without momentum (the velocity freed on
both replicas) and a load that fails (nothing kept, nothing lost)."""
import numpy as np
import pytest

import vdev
from vdev import layers

from conftest import clean_env

D = vdev.distribute
T = vdev.train
BIG = 2 ** 31 - 1


def _reference(x, w, d):
    """SAME conv2d of x [N,H,W,C] with w [KH,KW,C,O], stride 1, dilation d in
    both dimensions, by its definition: output (r, c) reads input
    (r - top + i d, c - left + j d), the padding TensorFlow's (half the
    effective window's overhang before); with its gradients for an upstream
    gradient g, as functions of g."""
    n, h, wd, _ = x.shape
    kh, kw, _, o = w.shape
    top = ((kh - 1) * d) // 2
    left = ((kw - 1) * d) // 2
    taps = [(i, j, i * d - top, j * d - left) for i in range(kh) for j in range(kw)]
    y = np.zeros((n, h, wd, o))
    for i, j, di, dj in taps:
        for r in range(h):
            for c in range(wd):
                if 0 <= r + di < h and 0 <= c + dj < wd:
                    y[:, r, c] += x[:, r + di, c + dj].astype(np.float64) @ w[i, j]

    def grads(g):
        gx, gw = np.zeros(x.shape), np.zeros(w.shape)
        for i, j, di, dj in taps:
            for r in range(h):
                for c in range(wd):
                    if 0 <= r + di < h and 0 <= c + dj < wd:
                        gx[:, r + di, c + dj] += g[:, r, c] @ w[i, j].T.astype(np.float64)
                        gw[i, j] += x[:, r + di, c + dj].T.astype(np.float64) @ g[:, r, c]
        return gx, gw
    return y, grads


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("shape", [(2, 5, 6, 2, 3, 3, 3), (1, 4, 4, 1, 2, 2, 2),
                                   (1, 7, 3, 2, 2, 3, 1), (2, 3, 5, 2, 1, 1, 4)])
def test_int_max_dilation_same_against_the_definition(dev, shape):
    n, h, w, c, o, kh, kw = shape
    rng = np.random.default_rng(sum(shape))
    x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
    f = rng.uniform(-1, 1, (kh, kw, c, o)).astype(np.float32)
    g = rng.uniform(-1, 1, (n, h, w, o)).astype(np.float32)
    want, grads = _reference(x, f, BIG)
    want_gx, want_gf = grads(g.astype(np.float64))
    with vdev.device(dev):
        xv, fv = vdev.Variable(x), vdev.Variable(f)
        with vdev.GradientTape() as tape:
            y = vdev.nn.conv2d(xv, fv, 1, "SAME", dilations=BIG)
            loss = vdev.reduce_sum(y * vdev.constant(g))
        gx, gf = tape.gradient(loss, [xv, fv])
    assert y.shape == (n, h, w, o)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gf.numpy(), want_gf, rtol=1e-5, atol=1e-5)


def _dilated_net():
    return vdev.models.Sequential([
        layers.Input(shape=(9, 9, 2)),
        layers.Conv2D(4, 3, padding="same", dilation_rate=2, activation="relu", seed=11),
        layers.Conv2D(3, (1, 3), padding="valid", dilation_rate=(1, 3), seed=13),
        layers.Flatten(), layers.Dense(3, seed=12)])


def _fit(strategy):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (12, 9, 9, 2)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 12)]
    with strategy.scope() if strategy else vdev.device("CPU:0"):
        model = _dilated_net()
        model.compile(optimizer=vdev.optimizers.SGD(0.05, momentum=0.9),
                      loss=vdev.losses.CategoricalCrossentropy(from_logits=True))
    hist = model.fit(x, y, batch_size=12, epochs=3, verbose=0, shuffle=False)
    return hist.history["loss"], [v.numpy() for v in model.weights], model


def test_dilated_net_fit_under_mirrored_strategy_matches_one_device():
    losses_1, weights_1, _ = _fit(None)
    losses_2, weights_2, model = _fit(D.MirroredStrategy(["GPU:0", "GPU:1"]))
    np.testing.assert_allclose(losses_2, losses_1, rtol=1e-5)
    assert len(weights_2) == len(weights_1) == 6
    for a, b in zip(weights_2, weights_1):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert model.layers[0].get_config()["dilation_rate"] == (2, 2)
    assert model.layers[1].get_config()["dilation_rate"] == (1, 3)


SHAPE = (256, 64)
BYTES = 256 * 64 * 4  # a multiple of 256: no rounding


def _in_use():
    info = vdev.config.experimental.get_memory_info
    return np.array([info("GPU:0")["current"], info("GPU:1")["current"]])


def test_velocity_memory_per_replica_through_checkpoints(monkeypatch, tmp_path):
    clean_env(monkeypatch, sim="2x1GiB")
    vdev.shutdown()
    s = D.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        v = vdev.Variable(np.ones(SHAPE, np.float32))
        opt = vdev.optimizers.SGD(0.1, momentum=0.9)
    base = _in_use()

    def step():
        def fn():
            with vdev.GradientTape() as tape:
                loss = vdev.reduce_sum(v * v)
            opt.apply_gradients([(tape.gradient(loss, v), v)])
        s.run(fn)

    step()
    assert list(_in_use() - base) == [BYTES, BYTES]  # a velocity per replica
    T.save_checkpoint(tmp_path / "on.st", {"w": v}, optimizer=opt)
    assert list(_in_use() - base) == [BYTES, BYTES]
    opt.momentum = 0.0  # the save gave its handles back: freed on both
    assert list(_in_use() - base) == [0, 0]
    T.save_checkpoint(tmp_path / "off.st", {"w": v}, optimizer=opt)
    opt.momentum = 0.5
    step()
    assert list(_in_use() - base) == [BYTES, BYTES]

    # a checkpoint saved without momentum: loaded, momentum 0, velocity freed
    T.load_checkpoint(tmp_path / "off.st", {"w": v}, optimizer=opt)
    assert opt.momentum == 0.0
    assert list(_in_use() - base) == [0, 0]

    # a load that fails after its momentum of 0.9 made velocities: none kept
    with pytest.raises(vdev.errors.InvalidArgumentError, match="no entry 'other'"):
        T.load_checkpoint(tmp_path / "on.st", {"other": v}, optimizer=opt)
    assert opt.momentum == 0.0
    assert list(_in_use() - base) == [0, 0]

    # loaded with its velocity: one per replica, the saved values
    T.load_checkpoint(tmp_path / "on.st", {"w": v}, optimizer=opt)
    assert opt.momentum == pytest.approx(0.9)
    assert list(_in_use() - base) == [BYTES, BYTES]
    del opt
    assert list(_in_use() - base) == [0, 0]
