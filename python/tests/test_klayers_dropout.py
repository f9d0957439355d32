"""vdev.layers.Dropout as Keras 2.11's: tf.nn.dropout's rule (x times
1 / (1 - rate), times a mask keeping where a uniform draw is >= rate)
checked against the layer's own draw (vdev.random.uniform with the seed the
layer derives from its seed and the call's rank), the statistics of that
mask for a fixed seed, the gradient (the scale where kept, 0 elsewhere),
noise_shape, the training flag (alone, in Sequential and functional models,
through fit / evaluate / predict, under a MirroredStrategy), get_config /
from_config and every error text. Everything here is a function of fixed
seeds: no timing, no thread order."""
import hashlib
import json

import numpy as np
import pytest

import vdev
from vdev import layers

from conftest import clean_env


def call_seed(seed, k, tag=b"vdev.Dropout:"):
    """The seed of a Dropout layer's k-th draw, as its docstring defines it."""
    h = hashlib.blake2b(tag + seed.to_bytes(8, "little") + k.to_bytes(8, "little"),
                        digest_size=8)
    return int.from_bytes(h.digest(), "little")


def expected(x, rate, seed, k, noise=None):
    """tf.nn.dropout's numbers for the layer's k-th draw: x * float32(1 /
    (1 - rate)) * (u >= float32(rate))."""
    u = vdev.random.uniform(noise or x.shape, seed=call_seed(seed, k)).numpy()
    keep = (u >= np.float32(rate)).astype(np.float32)
    return (x * np.float32(1.0 / (1.0 - rate))) * keep, keep


def test_training_true_drops_with_the_seeds_own_mask_and_scales():
    x = np.random.default_rng(1).uniform(-2, 2, (8, 16)).astype(np.float32)
    d = layers.Dropout(0.25, seed=42)
    for k in range(3):  # each call draws anew, from the seed's sequence
        y = d(x, training=True).numpy()
        want, keep = expected(x, 0.25, 42, k)
        np.testing.assert_array_equal(y, want)
        assert 0 < keep.sum() < keep.size
    # a new layer of the same seed gives the same sequence (run to run too)
    again = layers.Dropout(0.25, seed=42)
    np.testing.assert_array_equal(again(x, training=True).numpy(), expected(x, 0.25, 42, 0)[0])
    # the kept values are exactly x * float32(1 / 0.75)
    y = layers.Dropout(0.25, seed=42)(x, training=True).numpy()
    kept = y != 0
    np.testing.assert_array_equal(y[kept], x[kept] * np.float32(1 / 0.75))


def test_mask_statistics_of_a_fixed_seed():
    """The fraction dropped over 100000 units, for seed 5: exactly the
    count of the seed's own draws below the rate, and near the rate (the
    bound is 6 standard deviations of the binomial, for this one fixed
    draw)."""
    x = np.ones((100, 1000), np.float32)
    for rate in (0.1, 0.5, 0.9):
        y = layers.Dropout(rate, seed=5)(x, training=True).numpy()
        _, keep = expected(x, rate, 5, 0)
        dropped = int((y == 0).sum())
        assert dropped == int((keep == 0).sum())
        n = x.size
        assert abs(dropped - rate * n) < 6 * np.sqrt(n * rate * (1 - rate))
        # what survives is 1 / (1 - rate), float32
        assert set(np.unique(y).tolist()) == {0.0, float(np.float32(1 / (1 - rate)))}


def test_inference_is_the_input_and_rate_0_and_1():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = layers.Dropout(0.5, seed=1)
    np.testing.assert_array_equal(d(x).numpy(), x)  # no training flag: inference
    np.testing.assert_array_equal(d(x, training=False).numpy(), x)
    t = vdev.constant(x)
    out = d(t)
    assert out is not t and np.array_equal(out.numpy(), x)  # tf.identity's copy
    np.testing.assert_array_equal(layers.Dropout(0.0)(x, training=True).numpy(), x)
    # rate 1 is taken when made, and refused by tf.nn.dropout when it drops
    one = layers.Dropout(1)
    np.testing.assert_array_equal(one(x).numpy(), x)
    with pytest.raises(ValueError) as e:
        one(x, training=True)
    assert str(e.value) == ("`rate` must be a scalar tensor or a float in the range [0, 1). "
                            "Received: rate=1")
    # an int input is cast to float32, as Keras's layers do
    assert layers.Dropout(0.5)(np.arange(4).reshape(2, 2)).dtype == vdev.float32


def test_the_gradient_flows_through_the_kept_units_only():
    x = vdev.Variable(np.random.default_rng(2).normal(size=(6, 10)).astype(np.float32))
    d = layers.Dropout(0.4, seed=9)
    with vdev.GradientTape() as tape:
        y = d(x, training=True)
        loss = vdev.reduce_sum(vdev.multiply(y, y))
    g = tape.gradient(loss, x).numpy()
    _, keep = expected(x.numpy(), 0.4, 9, 0)
    s = np.float32(1 / 0.6)
    # d/dx sum((x s m)^2) = 2 (x s m) s m
    np.testing.assert_allclose(g, 2 * (x.numpy() * s * keep) * s * keep, rtol=1e-6)
    assert np.all(g[keep == 0] == 0) and np.all(g[keep == 1] != 0)
    # at inference the gradient is 1 everywhere
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(d(x))
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), np.ones((6, 10), np.float32))


def test_noise_shape_shares_the_mask_along_its_1s():
    x = np.random.default_rng(3).uniform(1, 2, (4, 5, 6)).astype(np.float32)
    d = layers.Dropout(0.5, noise_shape=(None, 1, 6), seed=11)
    y = d(x, training=True).numpy()
    u = vdev.random.uniform([4, 1, 6], seed=call_seed(11, 0)).numpy()
    keep = (u >= np.float32(0.5)).astype(np.float32)
    np.testing.assert_array_equal(y, (x * np.float32(2.0)) * keep)
    assert np.all((y == 0) == (y[:, :1, :] == 0))  # the same units in every step
    # a shorter noise shape broadcasts from the right, as TensorFlow's
    y2 = layers.Dropout(0.5, noise_shape=(6,), seed=11)(x, training=True).numpy()
    u2 = vdev.random.uniform([1, 1, 6], seed=call_seed(11, 0)).numpy()
    np.testing.assert_array_equal(y2, (x * np.float32(2.0)) * (u2 >= np.float32(0.5)))
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        layers.Dropout(0.5, noise_shape=(4, 2, 6))(x, training=True)
    assert e.value.message == "Incompatible shapes: [4,5,6] vs. [4,2,6]"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        layers.Dropout(0.5, noise_shape=(1, None, 5, 6))(x, training=True)
    assert e.value.message == "Incompatible shapes: [4,5,6] vs. [1,5,5,6]"


def test_seed_none_follows_vdev_random_set_seed():
    x = np.ones((5, 7), np.float32)
    vdev.random.set_seed(123)
    a = layers.Dropout(0.5)(x, training=True).numpy()
    vdev.random.set_seed(123)
    want = vdev.random.uniform([5, 7]).numpy()
    vdev.random.set_seed(123)
    b = layers.Dropout(0.5)(x, training=True).numpy()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, 2 * (want >= np.float32(0.5)))


def test_errors_and_config():
    for rate in (1.5, -0.1):
        with pytest.raises(ValueError) as e:
            layers.Dropout(rate)
        assert str(e.value) == ("Invalid value %s received for `rate`, expected a value "
                                "between 0 and 1." % rate)
    with pytest.raises(ValueError) as e:
        layers.Dropout("0.5")
    assert str(e.value) == "vdev's Dropout takes a number for `rate`, not '0.5'"
    with pytest.raises(ValueError) as e:
        layers.Dropout(0.5, dtype="float64")
    assert str(e.value).startswith("vdev's Dropout takes dtype=None or 'float32' only")
    d = layers.Dropout(0.3, noise_shape=(None, 1), seed=4, name="drop")
    cfg = d.get_config()
    assert cfg == {"name": "drop", "trainable": True, "dtype": "float32", "rate": 0.3,
                   "noise_shape": (None, 1), "seed": 4}
    json.dumps(cfg)
    c = layers.Dropout.from_config(cfg)
    assert c.get_config() == cfg
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(c(x, training=True).numpy(),
                                  layers.Dropout(0.3, (None, 1), 4)(x, training=True).numpy())
    assert layers.Dropout(0.5).compute_output_shape((None, 3, 4)) == (None, 3, 4)


def mlp(rate, seed=0):
    return vdev.models.Sequential([
        layers.Dense(16, activation="relu", input_dim=4, seed=seed),
        layers.Dropout(rate, seed=seed + 100),
        layers.Dense(1, seed=seed + 1)])


def test_a_model_passes_training_to_its_layers():
    x = np.random.default_rng(4).uniform(-1, 1, (8, 4)).astype(np.float32)
    m, ref = mlp(0.5), mlp(0.0)
    np.testing.assert_array_equal(m(x).numpy(), ref(x).numpy())  # inference
    np.testing.assert_array_equal(m(x, training=False).numpy(), ref(x).numpy())
    # training: the Dense outputs through the seed's first mask
    h = m.layers[0](x).numpy()
    want_h, _ = expected(h, 0.5, 100, 0)
    np.testing.assert_array_equal(m(x, training=True).numpy(), m.layers[2](want_h).numpy())
    # a functional model, and a Sequential inside one, pass it on too
    inp = vdev.Input((4,))
    seq = vdev.models.Sequential([layers.Dropout(0.5, seed=7)])
    out = layers.Dropout(0.5, seed=8)(seq(inp))
    f = vdev.models.Model(inp, out)
    np.testing.assert_array_equal(f(x).numpy(), x)
    y = f(x, training=True).numpy()
    first, _ = expected(x, 0.5, 7, 0)
    np.testing.assert_array_equal(y, expected(first, 0.5, 8, 0)[0])
    # a call's own training= wins over the model's: always dropping
    inp = vdev.Input((4,))
    g = vdev.models.Model(inp, layers.Dropout(0.5, seed=3)(inp, training=True))
    np.testing.assert_array_equal(g(x).numpy(), expected(x, 0.5, 3, 0)[0])
    assert json.dumps(g.get_config())
    # and a layer called alone after the model is inference again
    np.testing.assert_array_equal(layers.Dropout(0.5, seed=1)(x).numpy(), x)


def test_fit_trains_with_dropout_and_evaluate_predict_do_not():
    """fit's steps are the tape loop calling the model with training=True
    (the same masks, the same bits); evaluate and predict are the model's
    calls with training=False."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (24, 4)).astype(np.float32)
    y = (x.sum(1, keepdims=True) ** 2).astype(np.float32)
    a, b, plain = mlp(0.5), mlp(0.5), mlp(0.0)
    a.compile(vdev.optimizers.SGD(0.05), "mse")
    plain.compile(vdev.optimizers.SGD(0.05), "mse")
    h = a.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    plain.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    opt = vdev.optimizers.SGD(0.05)
    mse = vdev.losses.MeanSquaredError()
    losses = []
    for e in range(2):
        total = 0.0
        for r in range(0, 24, 8):
            with vdev.GradientTape() as tape:
                loss = mse(y[r:r + 8], b(x[r:r + 8], training=True))
            v = b.trainable_variables
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
            total += float(loss) * 8
        losses.append(total / 24)
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(va.numpy(), vb.numpy())
    assert h.history["loss"] == losses
    # dropout changed the training: the model without it ends elsewhere
    assert not np.array_equal(a.weights[0].numpy(), plain.weights[0].numpy())
    # evaluate and predict do not drop: they are the inference call's numbers
    np.testing.assert_array_equal(a.predict(x, verbose=0), a(x).numpy())
    want = float(mse(y, a(x)))
    assert a.evaluate(x, y, batch_size=24, verbose=0) == pytest.approx(want, rel=1e-6)
    assert a.evaluate(x, y, batch_size=24, verbose=0) == a.evaluate(x, y, batch_size=24,
                                                                     verbose=0)


def test_fit_under_a_mirrored_strategy_is_reproducible(monkeypatch):
    clean_env(monkeypatch, "2x1GiB")
    rng = np.random.default_rng(6)
    x = rng.uniform(-1, 1, (16, 4)).astype(np.float32)
    y = x.sum(1, keepdims=True).astype(np.float32)
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    weights = []
    for rate in (0.5, 0.5, 0.0):
        with s.scope():
            m = mlp(rate)
            m.compile(vdev.optimizers.SGD(0.1), "mse")
        vdev.random.set_seed(77)  # the runs' seeds, from which the replicas' derive
        m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        for v in m.trainable_variables:  # the replicas stay alike
            assert len({c.numpy().tobytes() for c in v.values}) == 1
        weights.append([w.numpy() for w in m.weights])
        np.testing.assert_array_equal(m.predict(x, verbose=0), m(x).numpy())
    for wa, wb in zip(weights[0], weights[1]):
        np.testing.assert_array_equal(wa, wb)  # the same masks run to run
    assert not np.array_equal(weights[0][0], weights[2][0])  # and they dropped

    # a step calling a Dropout of a fixed seed: each replica's mask is the
    # seed's mixed with the replica's own seed=None draw (not the timing)
    d = layers.Dropout(0.5, seed=21)
    ones = np.ones((4, 8), np.float32)

    def step(xr):
        return d(xr, training=True)

    vdev.random.set_seed(5)
    base = vdev.random._seed(None)  # the seed strategy.run takes from the counter
    vdev.random.set_seed(5)
    per = s.run(step, args=(vdev.distribute.DistributedBatch(s, vdev.constant(ones)),))
    outs = [t.numpy() for t in per.values]
    for r, out in enumerate(outs):
        sr = call_seed(21, vdev.random.replica_seed(base, r, 0), b"vdev.Dropout.replica:")
        keep = vdev.random.uniform([2, 8], seed=sr).numpy() >= np.float32(0.5)
        np.testing.assert_array_equal(out, 2 * keep.astype(np.float32))
    assert not np.array_equal(outs[0], outs[1])
