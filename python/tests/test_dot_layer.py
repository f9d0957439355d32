"""Keras 2.11's Dot merge layer: values against NumPy einsums of
backend.batch_dot for every pairing of 2- and 3-dimensional inputs and
axes (negative ones too), normalize (cosine similarity), gradients against
torch, output shapes, a functional two-tower model that builds and trains,
config, and Keras's errors."""
import numpy as np
import pytest
import torch

import vdev
from vdev import layers

rng = np.random.default_rng(20261218)
f32 = np.float32

# (shape1, shape2, axes, einsum)
CASES = [((4, 5), (4, 5), 1, "bk,bk->b"), ((4, 5), (4, 5), -1, "bk,bk->b"),
         ((4, 3, 5), (4, 6, 5), 2, "bik,bjk->bij"), ((4, 3, 5), (4, 3, 6), 1, "bki,bkj->bij"),
         ((4, 3, 5), (4, 5), (2, 1), "bik,bk->bi"), ((4, 5), (4, 5, 6), (1, 1), "bk,bkj->bj"),
         ((4, 3, 5), (4, 6, 3), (1, 2), "bki,bjk->bij")]


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("s1,s2,axes,eq", CASES, ids=[str(c[2]) + c[3] for c in CASES])
def test_batch_dot(dev, s1, s2, axes, eq):
    x1 = rng.uniform(-1, 1, s1).astype(f32)
    x2 = rng.uniform(-1, 1, s2).astype(f32)
    for normalize in (False, True):
        with vdev.device(dev):
            layer = layers.Dot(axes, normalize=normalize)
            v1, v2 = vdev.Variable(x1), vdev.Variable(x2)
            with vdev.GradientTape() as tape:
                out = layer([v1, v2])
                r = rng.uniform(-1, 1, tuple(out.shape)).astype(f32)
                loss = vdev.reduce_sum(out * r)
            g1, g2 = tape.gradient(loss, [v1, v2])
        assert out.device.endswith(dev)
        t1, t2 = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x1, x2))
        a1, a2 = ((axes, axes) if isinstance(axes, int) else axes)
        n1, n2 = t1, t2
        if normalize:
            n1 = t1 / torch.sqrt(torch.clamp((t1 * t1).sum(a1, keepdim=True), min=1e-12))
            n2 = t2 / torch.sqrt(torch.clamp((t2 * t2).sum(a2, keepdim=True), min=1e-12))
        want = torch.einsum(eq, n1, n2)
        if want.dim() == 1:
            want = want[:, None]  # Keras's [batch, 1]
        assert tuple(out.shape) == tuple(want.shape) == layer.compute_output_shape([s1, s2])
        np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        tg = torch.autograd.grad((want * torch.tensor(r, dtype=torch.float64)).sum(), [t1, t2])
        np.testing.assert_allclose(g1.numpy(), tg[0].numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g2.numpy(), tg[1].numpy(), rtol=1e-4, atol=1e-5)


def test_two_tower_model_and_errors():
    users, items = vdev.Input((1,), dtype="int32"), vdev.Input((1,), dtype="int32")
    u = layers.Flatten()(layers.Embedding(10, 4, seed=1)(users))
    i = layers.Flatten()(layers.Embedding(12, 4, seed=2)(items))
    score = layers.dot([u, i], axes=1, normalize=True)
    model = vdev.Model([users, items], score)
    assert model.output_shape == (None, 1)
    uid = rng.integers(0, 10, (64, 1)).astype(np.int32)
    iid = rng.integers(0, 12, (64, 1)).astype(np.int32)
    y = ((uid + iid) % 2 * 2 - 1).astype(f32)
    model.compile(vdev.optimizers.Adam(0.05), "mse")
    hist = model.fit([uid, iid], y, epochs=10, verbose=0).history["loss"]
    assert hist[-1] < hist[0]
    assert layers.Dot((1, 2), normalize=True).get_config()["axes"] == (1, 2)
    x = np.zeros((2, 3), f32)
    cases = [
        (lambda: layers.Dot("a"), TypeError,
         "Invalid type for argument `axes`: it should be a list or an int. Received: axes=a"),
        (lambda: layers.Dot((1, 2, 3)), ValueError,
         "Invalid format for argument `axes`: it should contain two elements. Received: "
         "axes=(1, 2, 3)"),
        (lambda: layers.Dot(1)([x, np.zeros((2, 4), f32)]), ValueError,
         "Incompatible input shapes: axis values 3 (at axis 1) != 4 (at axis 1). Full input "
         "shapes: (2, 3), (2, 4)"),
        (lambda: layers.Dot(1)([x]), ValueError,
         "A `Dot` layer should be called on exactly 2 inputs. Received: inputs=%s" % ([x],)),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == msg
