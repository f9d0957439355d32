"""BatchNormalization in Keras's training methods: fit's step runs the model
in training mode (the batch's statistics, the moving ones updated: the same
bits as a GradientTape loop calling each layer with training=True), evaluate
and predict in inference mode (the moving statistics, unchanged), for a
Sequential conv net and a functional one; save_weights/load_weights carry
the moving statistics; under a MirroredStrategy (two simulated GPUs, 2x1GiB)
each replica normalizes by its own rows and the moving statistics take the
mean over the replicas of their updates, the same on every replica."""
import numpy as np

import vdev
from vdev import layers

N = 40


def bits(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v).tobytes()


def images(n=N, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 6, 6, 2)).astype(np.float32)
    labels = (x[:, :, :, 0].mean(axis=(1, 2)) > 0).astype(np.int32)
    return x, labels


def cnn_layers():
    return [layers.Conv2D(4, 3, padding="same", seed=21, input_shape=(6, 6, 2)),
            layers.BatchNormalization(momentum=0.8), layers.Flatten(),
            layers.Dense(2, seed=22)]


def cnn():
    return vdev.models.Sequential(cnn_layers())


def run(model_layers, x, training):
    h = x
    for l in model_layers:
        h = l(h, training=training)
    return h


def tape_loop(model_layers, variables, opt, loss_fn, x, y, batch_size, epochs):
    for _ in range(epochs):
        for b in range(0, len(x), batch_size):
            with vdev.GradientTape() as tape:
                loss = loss_fn(y[b:b + batch_size], run(model_layers, x[b:b + batch_size], True))
            v = variables()
            opt.apply_gradients(zip(tape.gradient(loss, v), v))


def test_fit_trains_batch_norm_and_evaluate_predict_use_its_moving_statistics():
    x, labels = images()
    a, b = cnn(), cnn()
    ce = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
    a.compile(vdev.optimizers.Adam(0.01), ce)
    a.fit(x, labels, batch_size=16, epochs=3, shuffle=False, verbose=0)
    tape_loop(b.layers, lambda: b.trainable_variables, vdev.optimizers.Adam(0.01), ce, x,
              labels, 16, 3)
    assert len(a.weights) == 8
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    bn = a.layers[1]
    assert np.abs(bn.moving_mean.numpy()).max() > 1e-3  # updated by 9 steps
    assert [v.name for v in a.non_trainable_weights] == [bn.name + "/moving_mean",
                                                         bn.name + "/moving_variance"]
    before = [w.copy() for w in a.get_weights()]
    loss = a.evaluate(x, labels, batch_size=N, verbose=0)
    want = float(ce(labels, run(b.layers, x, False)))
    assert loss == want
    out = a.predict(x, batch_size=N, verbose=0)
    assert out.tobytes() == run(b.layers, x, False).numpy().tobytes()
    for w0, w1 in zip(before, a.get_weights()):
        assert w0.tobytes() == w1.tobytes()  # evaluate and predict update nothing
    assert loss != float(ce(labels, run(b.layers, x, True)))  # (this updates b)


def test_a_functional_model_trains_its_batch_norm_in_fit():
    x, labels = images()

    def model():
        inp = vdev.Input((6, 6, 2))
        ls = cnn_layers()
        h = inp
        for l in ls:
            h = l(h)
        return vdev.Model(inp, h), ls
    (a, _), (b, bl) = model(), model()
    assert len(a.weights) == 8  # built with the graph, as Keras's
    ce = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
    a.compile(vdev.optimizers.SGD(0.1), ce)
    a.fit(x, labels, batch_size=20, epochs=2, shuffle=False, verbose=0)
    tape_loop(bl, lambda: b.trainable_variables, vdev.optimizers.SGD(0.1), ce, x, labels, 20,
              2)
    assert len(a.weights) == 8
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    assert np.abs(bl[1].moving_mean.numpy()).max() > 1e-3


def test_save_and_load_weights_carry_the_moving_statistics(tmp_path):
    x, labels = images()
    a = cnn()
    a.compile("sgd", vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    a.fit(x, labels, batch_size=10, epochs=1, verbose=0)
    path = str(tmp_path / "w.safetensors")
    a.save_weights(path)
    b = cnn()
    b(x[:1])  # vdev's Sequential builds a BatchNormalization at its first call
    b.load_weights(path)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        assert wa.tobytes() == wb.tobytes()
    assert a.predict(x, verbose=0).tobytes() == b.predict(x, verbose=0).tobytes()
    small = vdev.models.Sequential([layers.Conv2D(4, 3, padding="same", input_shape=(6, 6, 2)),
                                    layers.Flatten(), layers.Dense(2)])
    try:
        small.load_weights(path)
    except ValueError as e:
        assert str(e) == ("Weight count mismatch when loading weights from file. Model "
                          "expected 4 weights, found 8 saved weights.")
    else:
        raise AssertionError("the load was not refused")


def test_under_a_mirrored_strategy_each_replica_normalizes_its_rows(monkeypatch):
    monkeypatch.setenv("VDEV_SIM_GPUS", "2x1GiB")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 3)).astype(np.float32) * 2
    y = rng.standard_normal((8, 2)).astype(np.float32)
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        model = vdev.models.Sequential([layers.Dense(4, input_dim=3, seed=1),
                                        layers.BatchNormalization(momentum=0.5),
                                        layers.Dense(2, seed=2)])
        model.compile(vdev.optimizers.SGD(0.1), "mse")
        model(x[:1])  # builds the BatchNormalization (as fit would), in the scope
    bn = model.layers[1]
    assert isinstance(bn.moving_mean, vdev.distribute.MirroredVariable)
    assert not bn.moving_mean.trainable
    assert len(model.trainable_variables) == 6
    w1, b1, gamma, beta, mm, mv, w2, b2 = [w.astype(np.float64) for w in model.get_weights()]
    h = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    # what each replica (rows 0-3, 4-7) computes, in float64
    loss, new_mm, new_mv = 0.0, [], []
    for rows in (slice(0, 4), slice(4, 8)):
        a = x[rows] @ w1 + b1
        mean, var = a.mean(0), a.var(0)
        out = ((a - mean) / np.sqrt(var + 1e-3) * gamma + beta) @ w2 + b2
        loss += ((out - y[rows]) ** 2).mean(1).sum() / 8
        new_mm.append(mm - (mm - mean) * 0.5)
        new_mv.append(mv - (mv - var) * 0.5)
    np.testing.assert_allclose(h.history["loss"][0], loss, rtol=1e-5)
    np.testing.assert_allclose(bn.moving_mean.numpy(), np.mean(new_mm, 0), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(bn.moving_variance.numpy(), np.mean(new_mv, 0), rtol=1e-5,
                               atol=1e-6)
    for v in (bn.moving_mean, bn.moving_variance):
        copies = v.values
        assert copies[0].device.endswith("GPU:0") and copies[1].device.endswith("GPU:1")
        assert bits(copies[0]) == bits(copies[1])
    # the whole batch's variance would give another moving variance
    a = (x @ w1 + b1).astype(np.float64)
    whole = mv - (mv - a.var(0)) * 0.5
    assert np.abs(bn.moving_variance.numpy() - whole).max() > 1e-3
