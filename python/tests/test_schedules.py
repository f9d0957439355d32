"""Keras 2.11's learning-rate schedules (vdev.optimizers.schedules) against
their formulas written here in float64 (float32's rounding apart), Keras's
documented example, configs and serialize/deserialize; optimizers given a
schedule: the rate of each update schedule(iterations) (an SGD step's
change is lr * gradient), learning_rate reading the current rate, setting
it Keras's TypeError, get_config/from_config, model.save/load_model and a
MirroredStrategy fit; the errors in Keras's words."""
import math

import numpy as np
import pytest

import vdev
from vdev import layers
from vdev.optimizers import schedules

STEPS = np.arange(0, 40)


def close(schedule, want):
    got = np.array([float(schedule(int(s))) for s in STEPS])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)  # float32 rounding


def test_formulas():
    close(schedules.ExponentialDecay(0.1, 10, 0.5), 0.1 * 0.5 ** (STEPS / 10))
    close(schedules.ExponentialDecay(0.1, 10, 0.5, staircase=True),
          0.1 * 0.5 ** np.floor(STEPS / 10))
    close(schedules.PiecewiseConstantDecay([5, 20], [1.0, 0.5, 0.1]),
          np.where(STEPS <= 5, 1.0, np.where(STEPS <= 20, 0.5, 0.1)))
    close(schedules.PolynomialDecay(0.1, 25, 0.01, power=2.0),
          (0.1 - 0.01) * (1 - np.minimum(STEPS, 25) / 25) ** 2 + 0.01)
    cyc = np.where(STEPS == 0, 1, np.ceil(STEPS / 15)) * 15
    close(schedules.PolynomialDecay(0.1, 15, 0.0, cycle=True), 0.1 * (1 - STEPS / cyc))
    close(schedules.InverseTimeDecay(0.2, 8, 0.5), 0.2 / (1 + 0.5 * STEPS / 8))
    close(schedules.InverseTimeDecay(0.2, 8, 0.5, staircase=True),
          0.2 / (1 + 0.5 * np.floor(STEPS / 8)))
    frac = np.minimum(STEPS, 30) / 30
    close(schedules.CosineDecay(0.1, 30, alpha=0.1),
          0.1 * ((1 - 0.1) * 0.5 * (1 + np.cos(math.pi * frac)) + 0.1))
    # restarts: periods 10, 20 (t_mul 2); the second peak half the first (m_mul 0.5)
    want = []
    for s in STEPS:
        i, start, period = 0, 0, 10
        while s >= start + period:
            start, period, i = start + period, period * 2, i + 1
        want.append(0.1 * 0.5 ** i * 0.5 * (1 + math.cos(math.pi * (s - start) / period)))
    close(schedules.CosineDecayRestarts(0.1, 10, t_mul=2.0, m_mul=0.5), want)
    flat = [0.1 * 0.5 * (1 + math.cos(math.pi * (s % 10) / 10)) for s in STEPS]
    close(schedules.CosineDecayRestarts(0.1, 10, t_mul=1.0), flat)
    # Keras's documented example: 0.1 * 0.96 ** (step / 100000)
    assert abs(float(schedules.ExponentialDecay(0.1, 100000, 0.96)(100000)) - 0.096) < 1e-8


def test_configs_and_errors():
    for s in (schedules.ExponentialDecay(0.1, 10, 0.5, staircase=True),
              schedules.PiecewiseConstantDecay([5], [1.0, 0.5]),
              schedules.PolynomialDecay(0.1, 5, cycle=True), schedules.InverseTimeDecay(1, 2, 3),
              schedules.CosineDecay(0.1, 7, alpha=0.2),
              schedules.CosineDecayRestarts(0.1, 3, 1.5, 0.9, 0.1)):
        again = schedules.deserialize(schedules.serialize(s))
        assert type(again) is type(s) and again.get_config() == s.get_config()
        assert [float(again(i)) for i in range(12)] == [float(s(i)) for i in range(12)]
    with pytest.raises(ValueError) as e:
        schedules.PiecewiseConstantDecay([1, 2], [1.0, 2.0])
    assert str(e.value) == ("The length of boundaries should be 1 less than the length of "
                            "values. Received: boundaries=[1, 2] of length 2, and values=[1.0, "
                            "2.0] of length 2.")
    with pytest.raises(ValueError) as e:
        schedules.deserialize({"class_name": "Warmup", "config": {}})
    assert str(e.value).startswith("Unknown learning rate schedule: Warmup.")


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_optimizers_take_schedules(kind):
    sched = schedules.ExponentialDecay(0.5, 2, 0.5)
    opt = getattr(vdev.optimizers, kind)(sched)
    assert float(opt.learning_rate) == 0.5  # schedule(0) before any update
    v = vdev.Variable(np.zeros(3, np.float32))
    g = vdev.constant(np.ones(3, np.float32))
    before = v.numpy().copy()
    for step in range(4):
        opt.apply_gradients([(g, v)])
        rate = float(sched(step))
        assert float(opt.learning_rate) == rate
        if kind == "SGD":  # the step's change is the rate times the gradient
            np.testing.assert_allclose(before - v.numpy(), rate, rtol=1e-6)
        before = v.numpy().copy()
    with pytest.raises(TypeError) as e:
        opt.learning_rate = 0.1
    assert str(e.value).startswith("This optimizer was created with a `LearningRateSchedule` "
                                   "object as its `learning_rate` constructor argument")
    c = opt.get_config()
    assert c["learning_rate"] == {"class_name": "ExponentialDecay",
                                  "config": sched.get_config()}
    again = type(opt).from_config(c)
    assert isinstance(again._schedule, schedules.ExponentialDecay)


def test_fit_save_and_mirrored():
    x = np.random.default_rng(3).uniform(-1, 1, (16, 4)).astype(np.float32)
    y = x.sum(1, keepdims=True)

    def make():
        m = vdev.models.Sequential([vdev.Input((4,)), layers.Dense(1, seed=1)])
        m.compile(vdev.optimizers.SGD(schedules.PiecewiseConstantDecay([1], [0.1, 0.01])),
                  "mse")
        return m
    m = make()
    m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert abs(float(m.optimizer.learning_rate) - 0.1) < 1e-7  # steps 0 and 1: <= 1
    m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert abs(float(m.optimizer.learning_rate) - 0.01) < 1e-8
    import tempfile
    import os
    path = os.path.join(tempfile.mkdtemp(), "m")
    m.save(path)
    again = vdev.models.load_model(path)
    assert isinstance(again.optimizer._schedule, schedules.PiecewiseConstantDecay)
    h1 = m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history
    h2 = again.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history
    assert h1 == h2
    one = make()
    h_one = one.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0).history["loss"]
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        two = make()
    h_two = two.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(h_two, h_one, rtol=1e-5)
