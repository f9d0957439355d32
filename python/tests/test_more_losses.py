"""Keras 2.11's MeanAbsoluteError, MeanAbsolutePercentageError,
MeanSquaredLogarithmicError, Huber, LogCosh, KLDivergence, Poisson,
CosineSimilarity, Hinge and SquaredHinge: values against Keras's formulas
in float64 NumPy (every reduction, targets of another rank), gradients
against torch's autograd of the same formulas, compile's names, fit
(and a MirroredStrategy fit) with them, configs; Keras's errors."""
import numpy as np
import pytest
import torch

import vdev
from vdev import layers, losses

rng = np.random.default_rng(20261222)
f32 = np.float32
EPS = 1e-7


def formulas(lib):
    """Each loss's value per example, Keras's function (lib: numpy or torch)."""
    ab = np.abs if lib is np else torch.abs
    log = np.log if lib is np else torch.log
    mx = np.maximum if lib is np else torch.maximum
    mean = (lambda x: x.mean(-1))
    const = (lambda v, like: v) if lib is np else (lambda v, like: torch.full_like(like, v))

    def huber(t, p, d=1.0):
        e = p - t
        a = ab(e)
        q = 0.5 * e * e
        lin = d * a - 0.5 * d * d
        return mean(np.where(a <= d, q, lin) if lib is np else torch.where(a <= d, q, lin))

    def clip(x, lo, hi):
        return np.clip(x, lo, hi) if lib is np else torch.clamp(x, lo, hi)

    def softplus(x):
        return np.log1p(np.exp(x)) if lib is np else torch.nn.functional.softplus(x)

    def l2n(x):
        return x / (np.sqrt(np.maximum((x * x).sum(-1, keepdims=True), 1e-12)) if lib is np
                    else torch.sqrt(torch.clamp((x * x).sum(-1, keepdim=True), min=1e-12)))

    def signed(t):
        return 2 * t - 1
    return {
        losses.MeanAbsoluteError: lambda t, p: mean(ab(p - t)),
        losses.MeanAbsolutePercentageError:
            lambda t, p: 100 * mean(ab((t - p) / mx(ab(t), const(EPS, t)))),
        losses.MeanSquaredLogarithmicError:
            lambda t, p: mean((log(mx(p, const(EPS, p)) + 1) - log(mx(t, const(EPS, t)) + 1)) ** 2),
        losses.Huber: huber,
        losses.LogCosh: lambda t, p: mean((p - t) + softplus(-2 * (p - t)) - np.log(2.0)),
        losses.KLDivergence:
            lambda t, p: (clip(t, EPS, 1) * log(clip(t, EPS, 1) / clip(p, EPS, 1))).sum(-1),
        losses.Poisson: lambda t, p: mean(p - t * log(p + EPS)),
        losses.CosineSimilarity: lambda t, p: -(l2n(t) * l2n(p)).sum(-1),
        losses.Hinge: lambda t, p: mean(mx(1 - signed(t) * p, const(0.0, p))),
        losses.SquaredHinge: lambda t, p: mean(mx(1 - signed(t) * p, const(0.0, p)) ** 2),
    }


def data(cls):
    t = rng.uniform(0.05, 2, (6, 4)).astype(f32)
    p = rng.uniform(0.05, 2, (6, 4)).astype(f32)
    if cls in (losses.Hinge, losses.SquaredHinge):
        t = rng.integers(0, 2, (6, 4)).astype(f32)
        p = rng.uniform(-2, 2, (6, 4)).astype(f32)
    if cls is losses.Huber:
        p = t + rng.uniform(-2.5, 2.5, (6, 4)).astype(f32)  # both sides of delta
    return t, p


@pytest.mark.parametrize("cls", list(formulas(np)), ids=lambda c: c.__name__)
def test_values_reductions_and_gradients(cls):
    t, p = data(cls)
    want = formulas(np)[cls](t.astype(np.float64), p.astype(np.float64))
    for dev in ("CPU:0", "GPU:1"):
        with vdev.device(dev):
            np.testing.assert_allclose(cls(reduction="none")(t, p).numpy(), want, rtol=1e-5,
                                       atol=1e-6)
            np.testing.assert_allclose(float(cls()(t, p)), want.mean(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(float(cls(reduction="sum")(t, p)), want.sum(),
                                       rtol=1e-5, atol=1e-5)
    pv = vdev.Variable(p)
    with vdev.GradientTape() as tape:
        loss = cls()(t, pv)
    g = tape.gradient(loss, pv).numpy()
    tp = torch.tensor(p.astype(np.float64), requires_grad=True)
    tt = torch.tensor(t.astype(np.float64))
    tg = torch.autograd.grad(formulas(torch)[cls](tt, tp).mean(), tp)[0].numpy()
    np.testing.assert_allclose(g, tg, rtol=1e-4, atol=1e-6)
    c = cls(name="x").get_config()
    assert c["name"] == "x" and c["reduction"] == "auto"
    assert type(cls.from_config(c)) is cls


def test_ranks_names_and_fit():
    t = rng.uniform(-1, 1, (8,)).astype(f32)
    p = rng.uniform(-1, 1, (8, 1)).astype(f32)  # [N] targets beside [N, 1]: row by row
    np.testing.assert_allclose(losses.MeanAbsoluteError(reduction="none")(t, p).numpy(),
                               np.abs(p[:, 0] - t), rtol=1e-6)
    assert losses.Huber(delta=2.0).get_config()["delta"] == 2.0
    x = rng.uniform(-1, 1, (32, 3)).astype(f32)
    y = x.sum(1, keepdims=True)
    for name, cls in (("mae", losses.MeanAbsoluteError), ("huber", losses.Huber),
                      ("log_cosh", losses.LogCosh), ("MeanAbsolutePercentageError",
                                                     losses.MeanAbsolutePercentageError)):
        m = vdev.models.Sequential([vdev.Input((3,)), layers.Dense(1, seed=1)])
        m.compile(vdev.optimizers.Adam(0.05), name)
        assert type(m._loss_fn) is cls
        hist = m.fit(x, y, epochs=8, verbose=0).history["loss"]
        assert hist[-1] < hist[0]
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])

    def model():
        m = vdev.models.Sequential([vdev.Input((3,)), layers.Dense(1, seed=2)])
        m.compile(vdev.optimizers.SGD(0.1), losses.Huber(delta=0.5))
        return m
    one = model().fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    with strategy.scope():
        two = model()
    two = two.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(two, one, rtol=1e-5)
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        losses.Poisson()(np.ones((2, 3), f32), np.ones((2, 4), f32))
    assert str(e.value).startswith("Poisson: incompatible shapes [2,4] and [2,3]")
