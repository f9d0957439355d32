"""The cross-entropies on probabilities (from_logits=False, Keras's default)
of vdev.losses and of compile's string losses on a model that does not end
in the matching softmax or sigmoid: values against float64 numpy references
written from Keras 2.11's backend formulas (the clip to [1e-7, 1 - 1e-7],
probabilities of exactly 0 and 1 included), under every reduction and with
label smoothing; gradients against PyTorch's autograd of the same formulas
in float64; a model ending in a Dense of no activation, compiled with
'categorical_crossentropy', trains and logs the formula's loss; a model
ending in a softmax still takes its logits. Three simulated 16 GiB GPUs
(conftest)."""
import numpy as np
import pytest
import torch

import vdev
from vdev import layers
from vdev.models import Sequential

L = vdev.losses
EPS = 1e-7
# Keras clips to [epsilon, 1 - epsilon] with both in float32
HI = float(np.float32(1.0) - np.float32(EPS))
LO = float(np.float32(EPS))
REDUCTIONS = ["auto", "sum_over_batch_size", "sum", "none"]


@pytest.fixture(autouse=True)
def keep_the_seed_counter():
    """fit (its shuffle) and strategy.run take seeds from vdev.random's
    process-wide counter: it is put back after each test here, so the
    unseeded draws of the tests run after this file are what they were."""
    kept = vdev.random._next[0]
    yield
    vdev.random._next[0] = kept


def probs(shape=(6, 4), seed=0):
    """Rows of probabilities with exact 0s and 1s among them, and rows that
    do not sum to 1 (Keras's categorical loss rescales them)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    p[0, 0], p[1, 1], p[2, -1] = 0.0, 1.0, 1e-9
    return p


def onehot(n, c, seed=1):
    lab = np.random.default_rng(seed).integers(0, c, n)
    return np.eye(c, dtype=np.float32)[lab], lab.astype(np.int32)


def np_cce(y, p, ls=0.0):
    y, p = np.float64(y), np.float64(p)
    if ls:
        y = y * (1 - ls) + ls / y.shape[-1]
    p = np.clip(p / p.sum(axis=-1, keepdims=True), LO, HI)
    return -(y * np.log(p)).sum(axis=-1)


def np_scce(lab, p):
    lp = np.log(np.clip(np.float64(p), LO, HI))
    lp = lp - np.log(np.exp(lp).sum(axis=-1, keepdims=True))  # sparse softmax xent of log p
    return -lp[np.arange(len(lab)), lab]


def np_bce(y, p, ls=0.0):
    y, p = np.float64(y), np.float64(p)
    if ls:
        y = y * (1 - ls) + 0.5 * ls
    p = np.clip(p, LO, HI)
    return -(y * np.log(p + EPS) + (1 - y) * np.log(1 - p + EPS)).mean(axis=-1)


def reduce(per_example, reduction):
    return {"none": per_example, "sum": per_example.sum()}.get(reduction, per_example.mean())


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_categorical_from_probabilities_is_keras_formula(reduction):
    p = probs()
    y, _ = onehot(6, 4)
    got = L.CategoricalCrossentropy(reduction=reduction)(y, p).numpy()
    np.testing.assert_allclose(got, reduce(np_cce(y, p), reduction), rtol=2e-6, atol=1e-6)
    # a probability of 1 on the labelled class costs log(1 - 1e-7) rounded
    # in float32, a 0 on it log(1e-7)
    one = np.array([[0.0, 1.0, 0.0]], np.float32)
    assert L.CategoricalCrossentropy()(one, one).numpy() == pytest.approx(-np.log(HI), rel=1e-3)
    zero = np.array([[1.0, 0.0, 0.0]], np.float32)
    assert L.CategoricalCrossentropy()(zero, one).numpy() == pytest.approx(-np.log(LO), rel=1e-6)


def test_keras_documented_values():
    # the values Keras 2.11's docstrings give for these inputs
    p = np.array([[0.05, 0.95, 0.0], [0.1, 0.8, 0.1]], np.float32)
    y = np.array([[0, 1, 0], [0, 0, 1]], np.float32)
    assert L.CategoricalCrossentropy()(y, p).numpy() == pytest.approx(1.1769392, abs=1e-6)
    assert L.SparseCategoricalCrossentropy()(np.array([1, 2], np.int32), p).numpy() == (
        pytest.approx(1.1769392, abs=1e-6))
    yb = np.array([[0, 1], [0, 0]], np.float32)
    pb = np.array([[0.6, 0.4], [0.4, 0.6]], np.float32)
    assert L.BinaryCrossentropy()(yb, pb).numpy() == pytest.approx(0.815, abs=1e-3)


@pytest.mark.parametrize("reduction", ["auto", "sum_over_batch_size", "sum"])
def test_sparse_from_probabilities_is_keras_formula(reduction):
    p = probs()
    _, lab = onehot(6, 4)
    got = L.SparseCategoricalCrossentropy(reduction=reduction)(lab, p).numpy()
    np.testing.assert_allclose(got, reduce(np_scce(lab, p), reduction), rtol=2e-6, atol=1e-6)
    # labels as floats of shape [N, 1] are Keras's too
    got = L.SparseCategoricalCrossentropy(reduction=reduction)(
        lab[:, None].astype(np.float32), p).numpy()
    np.testing.assert_allclose(got, reduce(np_scce(lab, p), reduction), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_from_probabilities_is_keras_formula(reduction):
    p = probs((5, 3))
    y = (np.random.default_rng(2).uniform(size=(5, 3)) > 0.5).astype(np.float32)
    y[0, 0], y[1, 1] = 1.0, 0.0  # wrong with certainty: the clip bounds the loss
    got = L.BinaryCrossentropy(reduction=reduction)(y, p).numpy()
    np.testing.assert_allclose(got, reduce(np_bce(y, p), reduction), rtol=2e-6, atol=1e-6)
    assert np.all(np.isfinite(got))
    # [N] labels beside [N, 1] probabilities, one loss per row
    col = p[:, :1]
    np.testing.assert_allclose(L.BinaryCrossentropy(reduction="none")(y[:, 0], col).numpy(),
                               np_bce(y[:, :1], col), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("from_logits", [False, True])
def test_label_smoothing(from_logits):
    p = probs()
    y, _ = onehot(6, 4)
    z = np.log(p + 0.01).astype(np.float32)  # logits for the other form
    for ls in (0.1, 0.25):
        cce = L.CategoricalCrossentropy(from_logits=from_logits, label_smoothing=ls,
                                        reduction="none")
        ys = np.float64(y) * (1 - ls) + ls / 4
        if from_logits:
            want = -(ys * torch.log_softmax(torch.tensor(np.float64(z)), -1).numpy()).sum(-1)
            got = cce(y, z).numpy()
        else:
            want, got = np_cce(y, p, ls), cce(y, p).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
        assert cce.label_smoothing == ls
        bce = L.BinaryCrossentropy(from_logits=from_logits, label_smoothing=ls,
                                   reduction="none")
        if from_logits:
            want = torch.nn.functional.binary_cross_entropy_with_logits(
                torch.tensor(np.float64(z)), torch.tensor(np.float64(y) * (1 - ls) + 0.5 * ls),
                reduction="none").numpy().mean(-1)
            got = bce(y, z).numpy()
        else:
            want, got = np_bce(y, p, ls), bce(y, p).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def tape_grad(loss, y, p):
    v = vdev.Variable(p)
    with vdev.GradientTape() as tape:
        out = loss(y, v)
    return tape.gradient(out, v).numpy()


def torch_grad(fn, p):
    t = torch.tensor(np.float64(p), requires_grad=True)
    fn(t).backward()
    return t.grad.numpy()


@pytest.mark.parametrize("reduction", ["auto", "sum"])
def test_gradients_are_torchs_of_the_same_formulas(reduction):
    p = probs()
    p[3, 2] = 1.0  # a 1 among other positive values: inside the clip once rescaled
    y, lab = onehot(6, 4)
    red = (lambda t: t.mean()) if reduction == "auto" else (lambda t: t.sum())
    yt = torch.tensor(np.float64(y))

    def cce(t):
        q = torch.clamp(t / t.sum(-1, keepdim=True), LO, HI)
        return red(-(yt * torch.log(q)).sum(-1))

    def scce(t):
        lp = torch.log_softmax(torch.log(torch.clamp(t, LO, HI)), -1)
        return red(-lp[np.arange(6), lab])

    def bce(t):
        q = torch.clamp(t, LO, HI)
        return red(-(yt * torch.log(q + EPS) + (1 - yt) * torch.log(1 - q + EPS)).mean(-1))

    for loss, fn, labels in ((L.CategoricalCrossentropy(reduction=reduction), cce, y),
                             (L.SparseCategoricalCrossentropy(reduction=reduction), scce, lab),
                             (L.BinaryCrossentropy(reduction=reduction), bce, y)):
        got, want = tape_grad(loss, labels, p), torch_grad(fn, p)
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)
    # a probability clipped away (0 and 1 in the binary loss) takes no gradient
    g = tape_grad(L.BinaryCrossentropy(), y, p)
    assert g[0, 0] == 0 and g[1, 1] == 0


def test_refusals():
    with pytest.raises(ValueError) as e:
        L.BinaryCrossentropy()(np.zeros((5, 2), np.float32), np.full((5, 1), 0.5, np.float32))
    assert str(e.value) == ("BinaryCrossentropy: y_pred (5, 1) and y_true (5, 2) must have the "
                            "same shape (vdev does not broadcast them)")
    with pytest.raises(ValueError) as e:
        L.CategoricalCrossentropy()(np.zeros((4,), np.float32), probs())
    assert str(e.value) == "Shapes (4,) and (6, 4) are incompatible"
    for cls in (L.CategoricalCrossentropy, L.BinaryCrossentropy):
        with pytest.raises(TypeError) as e:
            cls(label_smoothing="0.1")
        assert str(e.value) == "%s's label_smoothing is a number, not '0.1'" % cls.__name__
    # the from_logits=False form is the default, as Keras's
    for cls in (L.CategoricalCrossentropy, L.BinaryCrossentropy,
                L.SparseCategoricalCrossentropy):
        assert cls().from_logits is False and cls(from_logits=True).from_logits is True


def data(n=64, c=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, 4)).astype(np.float32)
    lab = (x[:, 0] * c).astype(np.int32).clip(0, c - 1)
    return x, lab, np.eye(c, dtype=np.float32)[lab]


def test_a_model_ending_in_dense_trains_on_categorical_crossentropy():
    x, _, y = data()
    m = Sequential([layers.Dense(3, input_shape=(4,), bias_initializer="ones", seed=3)])
    m.compile(vdev.optimizers.SGD(0.1), "categorical_crossentropy")
    assert m._loss_fn.from_logits is False and m._from_probs is False
    out0 = m.predict(x, verbose=0)
    assert np.all(out0 > 0)  # probabilities after the rescale, none clipped
    first = m.evaluate(x, y, verbose=0)
    np.testing.assert_allclose(first, np_cce(y, out0).mean(), rtol=1e-5)
    h = m.fit(x, y, epochs=30, batch_size=64, verbose=0).history["loss"]
    # one batch an epoch: the first epoch's loss is the untrained model's
    np.testing.assert_allclose(h[0], first, rtol=1e-6)
    assert h[-1] < 0.9 * h[0] and all(b <= a for a, b in zip(h, h[1:]))
    out = m.predict(x, verbose=0)
    np.testing.assert_allclose(m.evaluate(x, y, verbose=0), np_cce(y, out).mean(), rtol=1e-5)


def test_the_other_string_losses_take_probabilities_too():
    x, lab, y = data()
    m = Sequential([layers.Dense(3, input_shape=(4,), bias_initializer="ones", seed=3)])
    m.compile("sgd", "sparse_categorical_crossentropy")
    out = m.predict(x, verbose=0)
    np.testing.assert_allclose(m.evaluate(x, lab, verbose=0), np_scce(lab, out).mean(),
                               rtol=1e-5)
    # a softmax ending a model before a binary cross-entropy gives probabilities
    m = Sequential([layers.Dense(2, input_shape=(4,), activation="softmax", seed=3)])
    m.compile("sgd", "binary_crossentropy")
    assert m._loss_fn.from_logits is False
    yb = y[:, :2]
    np.testing.assert_allclose(m.evaluate(x, yb, verbose=0),
                               np_bce(yb, m.predict(x, verbose=0)).mean(), rtol=1e-5)
    # a Softmax over another axis than the last: probabilities, as Keras
    m = Sequential([layers.Dense(3, input_shape=(4,), seed=1), layers.Softmax(axis=0)])
    m.compile("sgd", "categorical_crossentropy")
    np.testing.assert_allclose(m.evaluate(x, y, verbose=0),
                               np_cce(y, m.predict(x, verbose=0)).mean(), rtol=1e-5)
    h = m.fit(x, y, epochs=2, batch_size=64, verbose=0).history["loss"]
    assert np.all(np.isfinite(h))


def test_a_model_ending_in_softmax_or_sigmoid_still_takes_its_logits():
    for act, loss in (("softmax", "categorical_crossentropy"),
                      ("softmax", "sparse_categorical_crossentropy"),
                      ("sigmoid", "binary_crossentropy")):
        m = Sequential([layers.Dense(3, input_shape=(4,), activation=act, seed=3)])
        m.compile("sgd", loss)
        assert m._loss_fn.from_logits is True and m._from_probs is True
    m = Sequential([layers.Dense(3, input_shape=(4,), seed=1), layers.Softmax()])
    m.compile("sgd", "categorical_crossentropy")
    assert m._loss_fn.from_logits is True and m._from_probs is True


def test_an_empty_batch_costs_nothing():
    # Keras's divide_no_nan, as the logits' form
    p, (y, _) = probs(), onehot(6, 4)
    for loss in (L.CategoricalCrossentropy(), L.BinaryCrossentropy()):
        assert loss(y[:0], p[:0]).numpy() == 0
        assert loss.__class__(reduction="none")(y[:0], p[:0]).numpy().shape == (0,)


def test_fit_under_a_mirrored_strategy_takes_probabilities():
    x, _, y = data()
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        m = Sequential([layers.Dense(3, input_shape=(4,), bias_initializer="ones", seed=3)])
        m.compile(vdev.optimizers.SGD(0.1), "categorical_crossentropy")
    out0 = m.predict(x, verbose=0)
    h = m.fit(x, y, epochs=3, batch_size=64, verbose=0).history["loss"]
    np.testing.assert_allclose(h[0], np_cce(y, out0).mean(), rtol=1e-5)
    assert h[-1] < h[0]
