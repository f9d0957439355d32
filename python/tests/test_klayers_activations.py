"""vdev.layers.Activation, ReLU, LeakyReLU and Softmax as Keras 2.11's:
values and gradients against PyTorch (relu, relu6, clamp, leaky_relu,
softmax) or numpy's float32 arithmetic in Keras's backend.relu order, ties
(x at 0, at max_value, at threshold) included; Keras's errors in its words;
get_config / from_config; Sequential and functional models, fit with a
final Activation('softmax') taking its logits as Dense's activation does,
and a MirroredStrategy's scope."""
import json

import numpy as np
import pytest
import torch

import vdev
from vdev import layers

from conftest import clean_env

rng = np.random.default_rng(13)
TIES = np.array([-3.0, -1.0, -0.0, 0.0, 0.5, 1.0, 2.5, 3.0, 6.0, 7.0], np.float32)


def sample():
    return np.concatenate([TIES, rng.uniform(-8, 8, 30).astype(np.float32)]).reshape(4, 10)


def value_and_grad(layer, x):
    """The layer's output and the gradient of sum(output * w) for a fixed w."""
    w = np.linspace(0.5, 2.0, x.size, dtype=np.float32).reshape(x.shape)
    v = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = layer(v)
        loss = vdev.reduce_sum(vdev.multiply(y, vdev.constant(w)))
    return y.numpy(), tape.gradient(loss, v).numpy(), w


def torch_value_and_grad(fn, x, w):
    t = torch.tensor(x, requires_grad=True)
    y = fn(t)
    (y * torch.tensor(w)).sum().backward()
    return y.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("kwargs, fn", [
    ({}, torch.relu),
    ({"max_value": 6}, torch.nn.functional.relu6),
    ({"max_value": 2.5}, lambda t: torch.clamp(torch.relu(t), max=2.5)),
    ({"negative_slope": 0.1}, lambda t: torch.nn.functional.leaky_relu(t, 0.1)),
])
def test_relu_against_torch(kwargs, fn):
    x = sample()
    y, g, w = value_and_grad(layers.ReLU(**kwargs), x)
    ty, tg = torch_value_and_grad(fn, x, w)
    np.testing.assert_array_equal(y, ty)
    np.testing.assert_array_equal(g, tg)


def test_relu_threshold_and_slope_in_keras_order():
    """backend.relu with a threshold: x * (x > t), clipped to [0, max],
    minus alpha * relu(t - x); numpy's float32 in the same order, and the
    gradient of that (the comparison is a constant)."""
    x = sample()
    for alpha, m, t in ((0.0, None, 1.0), (0.2, 3.0, 0.5), (0.2, None, 0.0), (0.3, 6.0, 0.0)):
        y, g, w = value_and_grad(layers.ReLU(max_value=m, negative_slope=alpha, threshold=t),
                                 x)
        a, t32 = np.float32(alpha), np.float32(t)
        if t != 0:
            pos = x * (x > t32).astype(np.float32)
            dpos = (x > t32).astype(np.float32)
        else:
            pos = np.maximum(x, np.float32(0))
            dpos = (x > 0).astype(np.float32)
        if m is not None:
            m32 = np.float32(m)
            # relu6's gradient stops at 6; clip_by_value's passes at max
            dpos = dpos * ((pos < m32) if (m == 6 and t == 0) else (pos <= m32))
            pos = np.maximum(np.minimum(pos, m32), np.float32(0))
        neg = np.maximum(-x + t32 if t != 0 else -x, np.float32(0))
        want = pos - neg * a if alpha else pos
        dneg = ((-x + t32) > 0).astype(np.float32)
        if alpha and m is None and t == 0:  # tf.nn.leaky_relu: alpha at 0 too
            dneg = (x <= 0).astype(np.float32)
        np.testing.assert_array_equal(y, want)
        np.testing.assert_array_equal(g, w * (dpos + a * dneg))


def test_leaky_relu_against_torch():
    x = sample()
    for alpha in (0.3, 0.01, 1.5, -0.5):  # Keras takes any alpha, as tf.nn.leaky_relu
        layer = layers.LeakyReLU(alpha) if alpha != 0.3 else layers.LeakyReLU()
        y, g, w = value_and_grad(layer, x)
        ty, tg = torch_value_and_grad(
            lambda t: torch.nn.functional.leaky_relu(t, float(np.float32(alpha))), x, w)
        np.testing.assert_array_equal(y, ty)
        np.testing.assert_array_equal(g, tg)
    inf = np.array([[np.inf, -np.inf, 0.0]], np.float32)
    np.testing.assert_array_equal(layers.LeakyReLU(0.5)(inf).numpy(), [[np.inf, -np.inf, 0.0]])
    assert layers.LeakyReLU().get_config()["alpha"] == float(np.float32(0.3))


def test_softmax_against_torch_on_every_axis_and_with_a_mask():
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    for axis in (-1, 2, 1, 0, -3, [1]):
        s = layers.Softmax(axis)
        y, g, w = value_and_grad(s, x)
        dim = axis[0] if isinstance(axis, list) else axis
        ty, tg = torch_value_and_grad(lambda t: torch.softmax(t, dim), x, w)
        np.testing.assert_allclose(y, ty, rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-6)
        # another axis is the last axis's softmax of the transposed input
        perm = list(range(3))
        d = dim % 3
        perm[d], perm[2] = 2, d
        np.testing.assert_array_equal(
            y, vdev.nn.softmax(x.transpose(perm)).numpy().transpose(perm))
    mask = rng.uniform(size=(2, 3, 4)) > 0.3
    y = layers.Softmax()(x, mask).numpy()
    want = torch.softmax(torch.tensor(x) + (1.0 - torch.tensor(mask, dtype=torch.float32))
                         * -1e9, -1).numpy()
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7)
    assert np.all(y[~mask & mask.any(-1, keepdims=True)] == 0)


def test_activation_layer():
    x = sample()
    for name, op in (("relu", vdev.nn.relu), ("tanh", vdev.tanh), ("sigmoid", vdev.sigmoid),
                     ("softmax", vdev.nn.softmax)):
        a = layers.Activation(name)
        np.testing.assert_array_equal(a(x).numpy(), op(x).numpy())
        assert a.get_config()["activation"] == name
    for lin in ("linear", None):
        a = layers.Activation(lin)
        np.testing.assert_array_equal(a(x).numpy(), x)
        assert a.get_config()["activation"] == "linear"
    a = layers.Activation(vdev.nn.relu)
    assert a.get_config()["activation"] == "relu"
    with pytest.raises(ValueError) as e:
        layers.Activation("mish")
    assert str(e.value) == ("Unknown activation function: 'mish'. vdev has 'linear', 'relu', "
                            "'tanh', 'sigmoid', 'softmax', 'elu', 'selu', 'gelu', 'softplus', "
                            "'softsign', 'swish', 'exponential', 'hard_sigmoid'")
    # an int input is cast to float32 first
    assert layers.Activation("relu")(np.arange(4).reshape(2, 2)).dtype == vdev.float32


def test_errors_in_keras_words():
    for kwargs, text in (
            ({"max_value": -1}, "max_value of a ReLU layer cannot be a negative value. "
                                "Received: -1"),
            ({"negative_slope": -0.5}, "negative_slope of a ReLU layer cannot be a negative "
                                       "value. Received: -0.5"),
            ({"negative_slope": None}, "negative_slope of a ReLU layer cannot be a negative "
                                       "value. Received: None"),
            ({"threshold": -2.0}, "threshold of a ReLU layer cannot be a negative value. "
                                  "Received: -2.0"),
            ({"threshold": None}, "threshold of a ReLU layer cannot be a negative value. "
                                  "Received: None")):
        with pytest.raises(ValueError) as e:
            layers.ReLU(**kwargs)
        assert str(e.value) == text
    with pytest.raises(ValueError) as e:
        layers.LeakyReLU(None)
    assert str(e.value) == ("The alpha value of a Leaky ReLU layer cannot be None, Expecting a "
                            "float. Received: None")
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        layers.Softmax(2)(x)
    assert e.value.message == ("`axis` must be in the range [-2, 2) where 2 is the number of "
                               "dimensions in the input. Received: axis=2")
    with pytest.raises(ValueError) as e:
        layers.Softmax((0, 1))(x)
    assert str(e.value) == ("vdev's Softmax takes one axis, not (0, 1): vdev has no "
                            "reduce_logsumexp for the softmax over several")
    with pytest.raises(TypeError) as e:
        layers.Softmax(1.0)(x)
    assert str(e.value) == "vdev's Softmax takes an int axis, not 1.0"
    with pytest.raises(ValueError) as e:
        layers.ReLU(dtype="float16")
    assert str(e.value).startswith("vdev's ReLU takes dtype=None or 'float32' only")


def test_configs_round_trip_in_models():
    made = [layers.Activation("tanh", input_shape=(6,)), layers.ReLU(4.0, 0.1, 0.5),
            layers.LeakyReLU(0.2), layers.Softmax(-1)]
    m = vdev.models.Sequential(made + [layers.Dense(2, seed=3)])
    assert m.layers[-1].built
    cfg = m.get_config()
    assert cfg["layers"][0]["class_name"] == "InputLayer"  # Keras 2.11's, first
    assert cfg["layers"][2]["config"] == {
        "name": made[1].name, "trainable": True, "dtype": "float32", "max_value": 4.0,
        "negative_slope": float(np.float32(0.1)), "threshold": 0.5}
    assert cfg["layers"][3]["config"]["alpha"] == float(np.float32(0.2))
    assert cfg["layers"][4]["config"]["axis"] == -1
    copy = vdev.models.Sequential.from_config(json.loads(json.dumps(cfg)))
    assert [l.get_config() for l in copy.layers[:4]] == [l.get_config() for l in made]
    copy.set_weights(m.get_weights())
    x = rng.normal(size=(5, 6)).astype(np.float32)
    np.testing.assert_array_equal(copy(x).numpy(), m(x).numpy())
    inp = vdev.Input((6,))
    h = layers.ReLU()(layers.Dense(4, seed=1)(inp))
    out = layers.Softmax()(layers.LeakyReLU()(h))
    f = vdev.models.Model(inp, layers.Activation("sigmoid")(out))
    g = vdev.models.Model.from_config(json.loads(json.dumps(f.get_config())))
    g.set_weights(f.get_weights())
    np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())


def test_fit_with_a_final_softmax_activation_layer_is_dense_softmax():
    x = rng.normal(size=(12, 5)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 12)]
    a = vdev.models.Sequential([layers.Dense(3, input_dim=5, seed=4),
                                layers.Activation("softmax")])
    b = vdev.models.Sequential([layers.Dense(3, input_dim=5, seed=4, activation="softmax")])
    for m in (a, b):
        m.compile(vdev.optimizers.SGD(0.1), "categorical_crossentropy")
    ha = a.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    hb = b.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert ha.history["loss"] == hb.history["loss"]
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(va.numpy(), vb.numpy())


def test_under_a_mirrored_strategy(monkeypatch):
    clean_env(monkeypatch, "2x1GiB")
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    x = rng.normal(size=(8, 5)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]

    def model():
        return vdev.models.Sequential([
            layers.Dense(6, input_dim=5, seed=7), layers.LeakyReLU(), layers.ReLU(max_value=6),
            layers.Dense(3, seed=8), layers.Activation("softmax")])
    with s.scope():
        a = model()
        a.compile(vdev.optimizers.SGD(0.1), "categorical_crossentropy")
    b = model()
    b.compile(vdev.optimizers.SGD(0.1), "categorical_crossentropy")
    a.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    b.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    for va, vb in zip(a.trainable_variables, b.trainable_variables):
        assert len({c.numpy().tobytes() for c in va.values}) == 1
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a.predict(x, verbose=0), a(x).numpy())
