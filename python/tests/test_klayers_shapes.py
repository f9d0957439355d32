"""vdev.layers.Reshape and Permute as Keras 2.11's: values against numpy,
compute_output_shape (a -1 worked out, None for unknown sizes), Keras's
errors in its words (and TensorFlow's reshape errors at the call), int32
kept, gradients, Sequential and functional models, get_config /
from_config, and a MirroredStrategy's scope."""
import json

import numpy as np
import pytest

import vdev
from vdev import layers

from conftest import clean_env

rng = np.random.default_rng(11)


def test_reshape_values_and_output_shapes():
    x = rng.uniform(-1, 1, (3, 12)).astype(np.float32)
    np.testing.assert_array_equal(layers.Reshape((3, 4))(x).numpy(), x.reshape(3, 3, 4))
    np.testing.assert_array_equal(layers.Reshape((-1, 2))(x).numpy(), x.reshape(3, 6, 2))
    r = layers.Reshape((-1, 2, 2))
    assert r.compute_output_shape((None, 12)) == (None, 3, 2, 2)
    assert r.compute_output_shape((None, None)) == (None, None, 2, 2)
    assert layers.Reshape([6, 2]).target_shape == (6, 2)
    # int32 stays int32 (Keras casts floating inputs only)
    i = vdev.constant(np.arange(8, dtype=np.int32).reshape(2, 4))
    out = layers.Reshape((2, 2))(i)
    assert out.dtype == vdev.int32 and out.numpy().tolist() == [[[0, 1], [2, 3]],
                                                                 [[4, 5], [6, 7]]]


def test_reshape_errors():
    r = layers.Reshape((5, 2))
    with pytest.raises(ValueError) as e:
        r.compute_output_shape((None, 12))
    assert str(e.value) == ("total size of new array must be unchanged, input_shape = [12], "
                            "output_shape = [5, 2]")
    with pytest.raises(ValueError) as e:
        layers.Reshape((-1, 5)).compute_output_shape((None, 12))
    assert str(e.value) == ("total size of new array must be unchanged, input_shape = [12], "
                            "output_shape = [-1, 5]")
    with pytest.raises(ValueError) as e:
        layers.Reshape((-1, -1)).compute_output_shape((None, 12))
    assert str(e.value) == ("There must be at most one unknown dimension in output_shape. "
                            "Received: output_shape=[-1, -1].")
    with pytest.raises(ValueError) as e:
        layers.Reshape((0, -1)).compute_output_shape((None, 12))
    assert str(e.value).startswith("total size of new array must be unchanged")
    # a model refuses it when added, as Keras's
    m = vdev.models.Sequential([layers.Dense(12, input_dim=3)])
    with pytest.raises(ValueError) as e:
        m.add(layers.Reshape((5, 2)))
    assert str(e.value).startswith("total size of new array must be unchanged")
    assert len(m.layers) == 1
    # the call's errors are tf.reshape's
    x = np.zeros((2, 12), np.float32)
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        r(x)
    assert str(e.value) == ("Reshape: Input to reshape is a tensor with 24 values, but the "
                            "requested shape has 20")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        layers.Reshape((-1, -1))(x)
    assert str(e.value) == "Reshape: Only one input size may be -1, not both 1 and 2"


def test_permute_values_shapes_and_errors():
    x = rng.uniform(-1, 1, (2, 3, 4, 5)).astype(np.float32)
    p = layers.Permute((3, 1, 2))
    np.testing.assert_array_equal(p(x).numpy(), x.transpose(0, 3, 1, 2))
    assert p.compute_output_shape((None, 3, 4, 5)) == (None, 5, 3, 4)
    assert p.compute_output_shape((None, None, 4, 5)) == (None, 5, None, 4)
    np.testing.assert_array_equal(layers.Permute((2, 1))(x[:, :, :, 0]).numpy(),
                                  x[:, :, :, 0].transpose(0, 2, 1))
    i = vdev.constant(np.arange(6, dtype=np.int32).reshape(1, 2, 3))
    out = layers.Permute((2, 1))(i)
    assert out.dtype == vdev.int32 and out.numpy().tolist() == [[[0, 3], [1, 4], [2, 5]]]
    for dims in ((2, 3), (1, 1), (0, 1), [2, 3]):
        with pytest.raises(ValueError) as e:
            layers.Permute(dims)
        assert str(e.value) == ("Invalid permutation argument `dims` for Permute Layer. The set "
                                "of indices in `dims` must be consecutive and start from 1. "
                                "Received dims=%s" % (dims,))
    with pytest.raises(ValueError) as e:
        p(x[:, :, :, 0])
    assert str(e.value) == ('Input 0 of layer "%s" is incompatible with the layer: expected '
                            "ndim=4, found ndim=3. Full shape received: (2, 3, 4)" % p.name)
    with pytest.raises(ValueError) as e:
        p.compute_output_shape((None, 4))
    assert str(e.value) == ('Input 0 of layer "%s" is incompatible with the layer: expected '
                            "ndim=4, found ndim=2. Full shape received: (None, 4)" % p.name)
    with pytest.raises(ValueError) as e:
        layers.Permute((2, 1), input_shape=(4,))
    assert "expected ndim=3, found ndim=2. Full shape received: (None, 4)" in str(e.value)


def test_gradients_move_back():
    v = vdev.Variable(rng.uniform(-1, 1, (2, 6)).astype(np.float32))
    w = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    with vdev.GradientTape() as tape:
        y = layers.Permute((2, 1))(layers.Reshape((2, 3))(v))  # (2, 3, 2)
        loss = vdev.reduce_sum(vdev.multiply(y, vdev.constant(w)))
    g = tape.gradient(loss, v).numpy()
    np.testing.assert_array_equal(g, w.transpose(0, 2, 1).reshape(2, 6))


def test_models_and_configs():
    x = rng.uniform(-1, 1, (4, 12)).astype(np.float32)
    m = vdev.models.Sequential([layers.Reshape((3, 4), input_shape=(12,)),
                                layers.Permute((2, 1)), layers.Flatten(),
                                layers.Dense(2, seed=1)])
    assert m.layers[-1].built and m.compute_output_shape((None, 12)) == (None, 2)
    want = m.layers[-1](x.reshape(4, 3, 4).transpose(0, 2, 1).reshape(4, 12)).numpy()
    np.testing.assert_array_equal(m(x).numpy(), want)
    cfg = m.get_config()
    json.dumps(cfg)
    assert cfg["layers"][0]["class_name"] == "InputLayer"  # Keras 2.11's, first
    assert cfg["layers"][1] == {"class_name": "Reshape", "config": {
        "name": m.layers[0].name, "trainable": True, "dtype": "float32",
        "target_shape": (3, 4), "batch_input_shape": (None, 12)}}
    assert cfg["layers"][2]["config"]["dims"] == (2, 1)
    copy = vdev.models.Sequential.from_config(json.loads(json.dumps(cfg)))
    assert [type(l).__name__ for l in copy.layers] == ["Reshape", "Permute", "Flatten", "Dense"]
    assert copy.layers[0].target_shape == (3, 4) and copy.layers[1].dims == (2, 1)
    assert copy.layers[-1].built
    inp = vdev.Input((12,))
    h = layers.Permute((2, 1))(layers.Reshape((-1, 4))(inp))
    assert h.shape == (None, 4, 3)
    f = vdev.models.Model(inp, layers.Reshape((12,))(h))
    np.testing.assert_array_equal(f(x).numpy(), x.reshape(4, 3, 4).transpose(0, 2, 1)
                                  .reshape(4, 12))
    g = vdev.models.Model.from_config(f.get_config())
    np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())


def test_under_a_mirrored_strategy(monkeypatch):
    clean_env(monkeypatch, "2x1GiB")
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    x = rng.uniform(-1, 1, (8, 6)).astype(np.float32)
    y = x.sum(1, keepdims=True)
    with s.scope():
        m = vdev.models.Sequential([layers.Reshape((2, 3), input_shape=(6,)),
                                    layers.Permute((2, 1)), layers.Reshape((6,)),
                                    layers.Dense(1, seed=2)])
        m.compile(vdev.optimizers.SGD(0.1), "mse")
    h = m.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert h.history["loss"][1] < h.history["loss"][0]
    for v in m.trainable_variables:
        assert len({c.numpy().tobytes() for c in v.values}) == 1
