"""Binary classification as Keras's tutorials write it: a model ending in
Dense(1, activation='sigmoid') compiled with loss='binary_crossentropy' and
metrics=['accuracy'] (vdev/_fit.py), and vdev.losses.BinaryCrossentropy
(vdev/losses.py). The loss is checked against PyTorch's
binary_cross_entropy_with_logits (values under each reduction, and the
gradient, at z = 0 too, where tf.nn's is sigmoid(0) - y) and against
numpy; fit is the GradientTape loop over the sigmoid layer's logits bit for
bit, alone and under a MirroredStrategy to rounding; the refusals have
their exact texts. Three simulated 16 GiB GPUs (conftest)."""
import numpy as np
import pytest
import torch

import vdev
from vdev import layers


def logits_and_labels(shape=(6, 3), seed=0):
    rng = np.random.default_rng(seed)
    z = (rng.standard_normal(shape) * 20).astype(np.float32)
    z.flat[0] = 0.0
    z.flat[1] = 100.0  # exp(-|z|) underflows: no overflow, no NaN
    z.flat[2] = -100.0
    y = rng.integers(0, 2, shape).astype(np.float32)
    return z, y


def torch_bce(z, y):
    return torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(z), torch.tensor(y), reduction="none").numpy().astype(np.float64)


@pytest.mark.parametrize("reduction", ["auto", "sum_over_batch_size", "sum", "none"])
def test_the_loss_is_pytorchs_from_logits(reduction):
    z, y = logits_and_labels()
    got = vdev.losses.BinaryCrossentropy(from_logits=True, reduction=reduction)(y, z).numpy()
    per_example = torch_bce(z, y).mean(axis=-1)
    want = {"none": per_example, "sum": per_example.sum()}.get(reduction, per_example.mean())
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    assert np.all(np.isfinite(got))


def test_the_gradient_is_sigmoid_minus_the_label_even_at_zero():
    z, y = logits_and_labels()
    v = vdev.Variable(z)
    with vdev.GradientTape() as tape:
        loss = vdev.losses.BinaryCrossentropy(from_logits=True)(y, v)
    got = tape.gradient(loss, v).numpy()
    want = (1 / (1 + np.exp(-z.astype(np.float64))) - y) / z.size
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
    assert got.flat[0] == pytest.approx((0.5 - y.flat[0]) / z.size)


def test_labels_of_rank_one_beside_one_logit_per_row_and_the_refusals():
    z, y = logits_and_labels((5, 1))
    bce = vdev.losses.BinaryCrossentropy(from_logits=True)
    assert bce(y[:, 0], z).numpy() == bce(y, z).numpy()
    assert bce(y[:0], z[:0]).numpy() == 0  # an empty batch, Keras's divide_no_nan
    with pytest.raises(ValueError) as e:
        bce(np.zeros((5, 2), np.float32), z)
    assert str(e.value) == ("`logits` and `labels` must have the same shape, received ((5, 1) "
                            "vs (5, 2)).")
    cases = [
        (lambda: vdev.losses.BinaryCrossentropy(from_logits=True, axis=0),
         "vdev's BinaryCrossentropy takes axis=-1 only (the mean over the last axis), not 0"),
    ]
    for call, text in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == text


def data(n=60, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.float32)


def net(sigmoid):
    return vdev.models.Sequential([
        layers.Dense(6, activation="relu", input_shape=(4,), seed=31),
        layers.Dense(1, activation="sigmoid" if sigmoid else None, seed=32)])


def test_fit_with_the_string_is_the_tape_loop_on_the_logits():
    x, y = data()
    a, b = net(True), net(False)
    a.compile(vdev.optimizers.SGD(0.5), "binary_crossentropy", metrics=["accuracy"])
    h = a.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    opt, bce = vdev.optimizers.SGD(0.5), vdev.losses.BinaryCrossentropy(from_logits=True)
    losses, accs = [], []
    for _ in range(3):
        total = correct = 0.0
        for s in range(0, len(x), 16):
            xb, yb = x[s:s + 16], y[s:s + 16]
            with vdev.GradientTape() as tape:
                logits = b(xb)
                loss = bce(yb, logits)
            correct += np.sum((vdev.sigmoid(logits).numpy()[:, 0] > 0.5) == yb)
            v = b.trainable_variables
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
            total += float(loss) * len(xb)
        losses.append(total / len(x))
        accs.append(correct / len(x))
    assert h.history["loss"] == losses and h.history["accuracy"] == accs
    assert losses[-1] < losses[0] and accs[-1] > 0.8
    assert [v.numpy().tobytes() for v in a.weights] == [v.numpy().tobytes() for v in b.weights]
    p = a.predict(x, verbose=0)  # the sigmoid, as the model gives it
    assert np.array_equal(p, vdev.sigmoid(b(x)).numpy())
    assert a.evaluate(x, y, verbose=0, return_dict=True) == pytest.approx(
        {"loss": float(bce(y, b(x))), "accuracy": float(np.mean((p[:, 0] > 0.5) == y))})


def test_fit_under_a_mirrored_strategy_as_on_one_device():
    x, y = data()
    strategy = vdev.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"])
    with strategy.scope():
        a = net(True)
        a.compile(vdev.optimizers.SGD(0.5), "binary_crossentropy", metrics=["accuracy"])
    b = net(True)
    b.compile(vdev.optimizers.SGD(0.5), "binary_crossentropy", metrics=["accuracy"])
    ha = a.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    hb = b.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(ha["loss"], hb["loss"], rtol=1e-5)
    assert ha["accuracy"] == hb["accuracy"]
    for va, vb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(va, vb, rtol=1e-5, atol=1e-6)
