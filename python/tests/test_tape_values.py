"""A tape's gradients use the values its ops read, as TensorFlow's and
PyTorch's do: a variable updated between two gradient calls of a persistent
tape (two models, one forward pass), or assigned after the forward pass,
does not change the gradients; and vdev.reshape of a variable is its value
then, not a view that follows later writes. Each check failed before: the
gradient used the updated variable and the reshape was a view."""
import numpy as np
import pytest

import vdev

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("device", ["CPU:0", "GPU:1"])
def test_update_between_gradient_calls(device):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 4)).astype(np.float32)
    Y = rng.standard_normal((8, 2)).astype(np.float32)
    W1_0 = rng.standard_normal((4, 3)).astype(np.float32)
    W2_0 = rng.standard_normal((3, 2)).astype(np.float32)
    with vdev.device(device):
        W1, W2 = vdev.Variable(W1_0), vdev.Variable(W2_0)
        x, y = vdev.constant(X), vdev.constant(Y)
        mse = vdev.losses.MeanSquaredError()
        with vdev.GradientTape(persistent=True) as tape:
            loss = mse(y, (x @ W1) @ W2)
        g2 = tape.gradient(loss, [W2])
        vdev.optimizers.SGD(0.1).apply_gradients(zip(g2, [W2]))
        assert not np.array_equal(W2.numpy(), W2_0)  # the update happened
        g1 = tape.gradient(loss, [W1])  # the same forward pass: the old W2
        del tape
    tW1 = torch.tensor(W1_0, requires_grad=True)
    tW2 = torch.tensor(W2_0, requires_grad=True)
    ((torch.tensor(X) @ tW1 @ tW2 - torch.tensor(Y)) ** 2).mean().backward()
    np.testing.assert_allclose(g2[0].numpy(), tW2.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g1[0].numpy(), tW1.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_assign_after_forward_pass():
    v = vdev.Variable([1., 2.])
    with vdev.GradientTape() as t:
        loss = vdev.reduce_sum(v * v)
    v.assign([10., 20.])
    assert t.gradient(loss, v).numpy().tolist() == [2., 4.]
    assert v.numpy().tolist() == [10., 20.]


def test_reshape_of_a_variable_is_a_value():
    v = vdev.Variable([1., 2., 3., 4.])
    snap = vdev.reshape(v, [2, 2])
    v.assign([9., 9., 9., 9.])
    assert snap.numpy().tolist() == [[1., 2.], [3., 4.]]
    vdev.optimizers.SGD(1.0).apply_gradients([(vdev.constant([1., 1., 1., 1.]), v)])
    assert snap.numpy().tolist() == [[1., 2.], [3., 4.]]
    assert v.numpy().tolist() == [8., 8., 8., 8.]
    # through a reshape, the gradient still reaches the variable, at the value read
    v.assign([1., 2., 3., 4.])
    with vdev.GradientTape() as t:
        r = vdev.reshape(v, [4])
        loss = vdev.reduce_sum(r * 3. * r)
    v.assign([10., 20., 30., 40.])
    assert t.gradient(loss, v).numpy().tolist() == [6., 12., 18., 24.]


def _in_use(device):
    return vdev.config.experimental.get_memory_info(device)["current"]


def test_persistent_tape_keeps_one_value():
    # A persistent tape that lives on while a training loop updates the
    # variable keeps the one value it read, not one per update (before: one
    # more copy of v each step, until the persistent tape went).
    with vdev.device("GPU:0"):
        v = vdev.Variable(np.ones(1024, np.float32))
        opt = vdev.optimizers.SGD(0.25)
        with vdev.GradientTape(persistent=True) as keep:
            kept = vdev.reduce_sum(v * v)
        sizes = []
        for _ in range(4):
            with vdev.GradientTape() as t:
                loss = vdev.reduce_sum(v * v)
            g = t.gradient(loss, v)
            opt.apply_gradients([(g, v)])
            del g, t, loss
            sizes.append(_in_use("GPU:0"))
        assert sizes == sizes[:1] * 4
        assert keep.gradient(kept, v).numpy().tolist() == [2.0] * 1024
        del keep


def test_add_saves_nothing():
    # AddV2's and Sub's gradients read no input's value: a write after them
    # saves no copy (before: the variable's value was copied).
    with vdev.device("GPU:0"):
        v = vdev.Variable(np.ones(1024, np.float32))
        c = vdev.constant(np.full(1024, 3.0, np.float32))
        with vdev.GradientTape() as t:
            loss = vdev.reduce_sum(v + c) + vdev.reduce_sum(c - v * 2.0)
        before = _in_use("GPU:0")
        v.assign(np.zeros(1024, np.float32))
        assert _in_use("GPU:0") == before
        assert t.gradient(loss, v).numpy().tolist() == [-1.0] * 1024
