"""SGD's velocity after a checkpoint: switching momentum off frees it, as
it does for an optimizer never saved (tests/test_sgd_slots.py), measured
exactly on one simulated 1 GiB GPU. vdev.train's save and load take the
slots through vdev_optimizer_slots, whose handles stay valid until given
back; they give them back (vdev_optimizer_slots_release) when done, so the
velocity is the optimizer's alone again."""
import numpy as np
import vdev

from conftest import clean_env

T = vdev.train
SHAPE = (256, 64)
BYTES = 256 * 64 * 4  # a multiple of 256: no rounding


def _bytes_after_momentum_off(monkeypatch, tmp_path, save=False, load=False):
    clean_env(monkeypatch, sim="1x1GiB")
    vdev.shutdown()
    path = tmp_path / "sgd.safetensors"
    with vdev.device("GPU:0"):
        v = vdev.Variable(np.ones(SHAPE, np.float32))
        g = vdev.constant(np.full(SHAPE, 0.5, np.float32))
        opt = vdev.optimizers.SGD(0.1, momentum=0.9)
        opt.apply_gradients([(g, v)])
        assert vdev.config.experimental.get_memory_info("GPU:0")["current"] == 3 * BYTES
        if save or load:
            T.save_checkpoint(path, {"w": v}, optimizer=opt)
        if load:
            other = vdev.optimizers.SGD(0.1, momentum=0.9)
            T.load_checkpoint(path, {"w": v}, optimizer=other)
            del opt
            opt = other
        opt.momentum = 0.0
        got = vdev.config.experimental.get_memory_info("GPU:0")["current"]
        del opt
    return got


def test_momentum_off_frees_the_velocity_of_an_optimizer_never_saved(monkeypatch, tmp_path):
    assert _bytes_after_momentum_off(monkeypatch, tmp_path) == 2 * BYTES


def test_momentum_off_after_a_save_frees_as_if_never_saved(monkeypatch, tmp_path):
    assert _bytes_after_momentum_off(monkeypatch, tmp_path, save=True) == 2 * BYTES


def test_momentum_off_after_a_load_frees_as_if_never_saved(monkeypatch, tmp_path):
    assert _bytes_after_momentum_off(monkeypatch, tmp_path, load=True) == 2 * BYTES
