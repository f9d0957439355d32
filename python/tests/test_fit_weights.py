"""fit's and evaluate's sample_weight, class_weight and weighted_metrics, as
Keras 2.11's: the loss the sum of the per-row losses times the weights over
the rows (SUM_OVER_BATCH_SIZE), metrics weighed by the mask only and
weighted metrics by the weights (their weighted mean), class weights as
the sample weights they make (a fit with one equals a fit with the other,
loss for loss), validation data with its weights, validation_split
splitting them, per-step weights beside a mask, a MirroredStrategy fit
giving one device's losses; the errors in Keras's words."""
import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(20261216)
f32 = np.float32
N = 24


def classifier(seed=1):
    model = vdev.models.Sequential([vdev.Input((5,)), layers.Dense(8, activation="relu",
                                                                   seed=seed),
                                    layers.Dense(3, seed=seed + 1)])
    model.compile(vdev.optimizers.SGD(0.1),
                  vdev.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], weighted_metrics=["accuracy"])
    return model


def data():
    x = rng.uniform(-1, 1, (N, 5)).astype(f32)
    y = rng.integers(0, 3, N).astype(np.int32)
    return x, y


def per_row_losses(logits, y):
    z = logits.astype(np.float64)
    z = z - z.max(1, keepdims=True)
    return -(z[np.arange(len(y)), y] - np.log(np.exp(z).sum(1)))


def test_sample_weights_and_weighted_metrics():
    x, y = data()
    w = rng.uniform(0, 2, N).astype(f32)
    model = classifier()
    loss, acc, wacc = model.evaluate(x, y, sample_weight=w, batch_size=N, verbose=0)
    logits = model.predict(x, verbose=0)
    losses = per_row_losses(logits, y)
    np.testing.assert_allclose(loss, np.sum(losses * w) / N, rtol=1e-5)  # over the rows
    right = (np.argmax(logits, 1) == y).astype(np.float64)
    np.testing.assert_allclose(acc, right.mean(), rtol=1e-6)  # not weighed
    np.testing.assert_allclose(wacc, np.sum(right * w) / np.sum(w), rtol=1e-6)
    names = list(model.evaluate(x, y, return_dict=True, verbose=0))
    assert names == ["loss", "accuracy", "weighted_accuracy"]
    # from probabilities: Keras's log of the clipped probabilities as logits
    probs = vdev.models.Sequential([vdev.Input((5,)), layers.Dense(3, activation="softmax",
                                                                   seed=4)])
    probs.compile("sgd", vdev.losses.SparseCategoricalCrossentropy())
    p = np.clip(probs.predict(x, verbose=0).astype(np.float64), 1e-7, 1 - 1e-7)
    want = -np.log(p[np.arange(N), y] / p.sum(1))
    np.testing.assert_allclose(probs.evaluate(x, y, sample_weight=w, batch_size=N, verbose=0),
                               np.sum(want * w) / N, rtol=1e-5)
    # [N, 1] weights are the same weights
    np.testing.assert_allclose(model.evaluate(x, y, sample_weight=w[:, None], batch_size=N,
                                              verbose=0)[0], loss, rtol=1e-6)


def test_class_weight_is_the_sample_weights_it_makes():
    x, y = data()
    cw = {0: 0.5, 1: 2.0, 2: 1.0}
    a, b = classifier(3), classifier(3)
    ha = a.fit(x, y, class_weight=cw, batch_size=8, epochs=3, shuffle=False, verbose=0)
    hb = b.fit(x, y, sample_weight=np.array([cw[c] for c in y], f32), batch_size=8, epochs=3,
               shuffle=False, verbose=0)
    assert ha.history == hb.history
    for va, vb in zip(a.variables, b.variables):
        np.testing.assert_array_equal(va.numpy(), vb.numpy())
    # one-hot targets: the class is the row's argmax; sample weights multiply
    onehot = np.eye(3, dtype=f32)[y]
    c = vdev.models.Sequential([vdev.Input((5,)), layers.Dense(3, seed=7)])
    c.compile(vdev.optimizers.SGD(0.1), vdev.losses.CategoricalCrossentropy(from_logits=True))
    d = vdev.models.Sequential([vdev.Input((5,)), layers.Dense(3, seed=7)])
    d.compile(vdev.optimizers.SGD(0.1), vdev.losses.CategoricalCrossentropy(from_logits=True))
    sw = rng.uniform(0.5, 1.5, N).astype(f32)
    hc = c.fit(x, onehot, class_weight=cw, sample_weight=sw, epochs=2, shuffle=False, verbose=0)
    hd = d.fit(x, onehot, sample_weight=sw * np.array([cw[k] for k in y], f32), epochs=2,
               shuffle=False, verbose=0)
    np.testing.assert_allclose(hc.history["loss"], hd.history["loss"], rtol=1e-6)


def test_validation_weights():
    x, y = data()
    w = rng.uniform(0, 2, N).astype(f32)
    model = classifier(5)
    h = model.fit(x[:16], y[:16], validation_data=(x[16:], y[16:], w[16:]), epochs=1,
                  verbose=0)
    ev = model.evaluate(x[16:], y[16:], sample_weight=w[16:], verbose=0)
    np.testing.assert_allclose(h.history["val_loss"][0], ev[0], rtol=1e-6)
    other = classifier(5)
    h2 = other.fit(x, y, sample_weight=w, validation_split=1 / 3, epochs=1, verbose=0,
                   shuffle=False)
    np.testing.assert_allclose(h2.history["val_loss"][0],
                               other.evaluate(x[16:], y[16:], sample_weight=w[16:],
                                              verbose=0)[0], rtol=1e-6)


def test_weights_per_step_beside_a_mask():
    ids = rng.integers(1, 9, (6, 5)).astype(np.int32)
    ids[0, 3:] = 0
    ids[4, 1:] = 0
    y = rng.uniform(-1, 1, (6, 5, 1)).astype(f32)
    w = rng.uniform(0, 2, (6, 5)).astype(f32)
    model = vdev.models.Sequential([layers.Embedding(10, 4, mask_zero=True, seed=1),
                                    layers.GRU(3, return_sequences=True, seed=2),
                                    layers.Dense(1, seed=3)])
    model.compile(vdev.optimizers.Adam(0.01), "mse", metrics=["mae"], weighted_metrics=["mae"])
    loss, mae, wmae = model.evaluate(ids, y, sample_weight=w, batch_size=6, verbose=0)
    pred = model.predict(ids, verbose=0)[..., 0].astype(np.float64)
    l = (pred - y[..., 0]) ** 2
    m = (ids != 0).astype(np.float64)
    keras = np.sum(l * w * m * (m.size / m.sum())) / m.size  # apply_valid_mask, then the mean
    np.testing.assert_allclose(loss, keras, rtol=1e-5)
    err = np.abs(pred - y[..., 0])
    np.testing.assert_allclose(mae, np.sum(err * m) / m.sum(), rtol=1e-5)
    np.testing.assert_allclose(wmae, np.sum(err * m * w) / np.sum(m * w), rtol=1e-5)


def test_mirrored_fit_with_sample_weights():
    x, y = data()
    w = rng.uniform(0, 2, N).astype(f32)
    one = classifier(9)
    h1 = one.fit(x, y, sample_weight=w, batch_size=8, epochs=2, shuffle=False, verbose=0)
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        two = classifier(9)
    h2 = two.fit(x, y, sample_weight=w, batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(h2.history["loss"], h1.history["loss"], rtol=1e-5)


def test_errors():
    x, y = data()
    model = classifier()
    cases = [
        (lambda: model.fit(x, y, class_weight={1: 1.0, 2: 1.0}, verbose=0), ValueError,
         "Expected `class_weight` to be a dict with keys from 0 to one less than the number of "
         "classes, found {1: 1.0, 2: 1.0}"),
        (lambda: model.fit(x, y, class_weight={0: 1.0, 1: 1.0}, verbose=0),
         vdev.errors.InvalidArgumentError, None),
        (lambda: model.evaluate(x, y, sample_weight=np.ones(3), verbose=0), ValueError,
         "Data cardinality is ambiguous:\n  x sizes: 24\n  y sizes: 24\n  sample_weight sizes: "
         "3\nMake sure all arrays contain the same number of samples."),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        if msg is not None:
            assert str(e.value) == msg
    seq = vdev.models.Sequential([vdev.Input((3, 2)), layers.Dense(2)])
    seq.compile("sgd", "mse")
    with pytest.raises(ValueError) as e:
        seq.fit(np.zeros((4, 3, 2), f32), np.zeros((4, 3, 2), f32), class_weight={0: 1.0},
                verbose=0)
    assert str(e.value) == "`class_weight` not supported for 3+ dimensional targets."
