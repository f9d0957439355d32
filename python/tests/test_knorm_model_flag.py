"""BatchNormalization and LayerNormalization inside models: a Sequential
builds them as soon as it knows its input shape (as Keras's), so a fresh
model has their weights, and load_weights fills them without a call first;
``model(x, training=True)`` reaches them through a Sequential and a
functional model (the moving statistics move), a plain call does not."""
import numpy as np

import vdev

L = vdev.layers
X = np.arange(24, dtype=np.float32).reshape(6, 4) / 7.0


def _seq():
    return vdev.models.Sequential([L.Dense(3, input_shape=(4,), seed=1),
                                   L.BatchNormalization(), L.LayerNormalization()])


def test_a_sequential_builds_them_with_its_input_shape(tmp_path):
    m = _seq()
    assert [w.name.split("/")[-1] for w in m.weights] == [
        "kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance", "gamma", "beta"]
    assert [tuple(w.shape) for w in m.weights[2:]] == [(3,)] * 6
    m2 = vdev.models.Sequential([L.Input((4,)), L.BatchNormalization()])
    assert len(m2.weights) == 4
    # weights saved from a trained model load into a fresh one, never called
    m(X, training=True)
    path = tmp_path / "w.safetensors"
    m.save_weights(path)
    fresh = _seq()
    fresh.load_weights(path)
    for a, b in zip(m.weights, fresh.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(fresh(X).numpy(), m(X).numpy())


def test_training_reaches_them_through_the_models():
    inp = vdev.Input((4,))
    bn_f = L.BatchNormalization()
    functional = vdev.Model(inp, bn_f(L.Dense(3, seed=2)(inp)))
    seq = _seq()
    for model, bn in ((seq, seq.layers[1]), (functional, bn_f)):
        start = bn.moving_mean.numpy().copy()
        model(X)
        np.testing.assert_array_equal(bn.moving_mean.numpy(), start)
        model(X, training=True)
        assert not np.array_equal(bn.moving_mean.numpy(), start)
        moved = bn.moving_mean.numpy().copy()
        model(X, training=False)
        np.testing.assert_array_equal(bn.moving_mean.numpy(), moved)
