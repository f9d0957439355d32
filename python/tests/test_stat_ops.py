"""reduce_variance, reduce_std, reduce_logsumexp, squared_difference,
l2_normalize, norm, count_nonzero and nn.l2_loss (vdev/_stat_ops.py, made of
vdev's ops as TensorFlow composes them) against numpy and torch: values over
axes, infinities in logsumexp, gradients against torch's autograd. On the
CPU and a simulated GPU (conftest)."""
import numpy as np
import pytest

import vdev

rng = np.random.default_rng(20261206)
f32 = np.float32


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_moments_and_logsumexp(dev, axis):
    a = rng.uniform(-3, 3, (4, 5)).astype(f32)
    with vdev.device(dev):
        t = vdev.constant(a)
        np.testing.assert_allclose(vdev.math.reduce_variance(t, axis).numpy(),
                                   np.var(a.astype(np.float64), axis), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(vdev.math.reduce_std(t, axis, keepdims=True).numpy(),
                                   np.std(a.astype(np.float64), axis, keepdims=True),
                                   rtol=1e-5, atol=1e-6)
        lse = vdev.math.reduce_logsumexp(t, axis).numpy()
    want = np.log(np.sum(np.exp(a.astype(np.float64)), axis=axis))
    np.testing.assert_allclose(lse, want, rtol=1e-6, atol=1e-6)


def test_logsumexp_large_and_infinite():
    a = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 1.0]], f32)
    got = vdev.math.reduce_logsumexp(a, axis=1).numpy()
    assert got[0] == pytest.approx(1000.0 + np.log(2.0))
    assert got[1] == -np.inf and got[2] == np.inf


def test_gradients_against_torch():
    torch = pytest.importorskip("torch")
    a = rng.uniform(-2, 2, (3, 4)).astype(f32)
    v = vdev.Variable(a)
    with vdev.GradientTape() as tape:
        loss = vdev.add(vdev.add(vdev.reduce_sum(vdev.math.reduce_logsumexp(v, 1)),
                                 vdev.reduce_sum(vdev.math.reduce_std(v, 0))),
                        vdev.reduce_sum(vdev.multiply(vdev.math.l2_normalize(v, 1), a)))
    g = tape.gradient(loss, v).numpy()
    t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tl = (torch.logsumexp(t, 1).sum() + t.std(0, unbiased=False).sum()
          + (torch.nn.functional.normalize(t, dim=1, eps=1e-6) * torch.tensor(a)).sum())
    tl.backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_norms_counts_l2_loss():
    a = rng.uniform(-2, 2, (3, 4)).astype(f32)
    np.testing.assert_allclose(vdev.norm(a).numpy(), np.linalg.norm(a), rtol=1e-6)
    np.testing.assert_allclose(vdev.norm(a, axis=1).numpy(), np.linalg.norm(a, axis=1), rtol=1e-6)
    np.testing.assert_allclose(vdev.norm(a, ord=1, axis=0).numpy(), np.abs(a).sum(0), rtol=1e-6)
    np.testing.assert_allclose(vdev.norm(a, ord=np.inf, axis=1, keepdims=True).numpy(),
                               np.abs(a).max(1, keepdims=True))
    with pytest.raises(ValueError, match="'ord' must be a supported vector norm, got 3"):
        vdev.norm(a, ord=3)
    np.testing.assert_allclose(vdev.nn.l2_loss(a).numpy(), (a.astype(np.float64) ** 2).sum() / 2,
                               rtol=1e-6)
    z = np.array([[0.0, 1.0, -0.0], [2.0, 0.0, 3.0]], f32)
    assert int(vdev.math.count_nonzero(z)) == 3
    np.testing.assert_array_equal(vdev.math.count_nonzero(z, axis=1).numpy(), [1, 2])
    assert int(vdev.math.count_nonzero(vdev.constant([True, False, True]))) == 2
    np.testing.assert_allclose(vdev.math.squared_difference(a, 1.0).numpy(), (a - 1.0) ** 2,
                               rtol=1e-6)
