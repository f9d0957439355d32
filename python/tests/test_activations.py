"""TensorFlow's activations in vdev.nn and vdev.math (erf, softplus, elu,
selu, gelu exact and approximate, softsign, silu/swish, relu6, leaky_relu)
and Keras's in vdev.activations and as layers' activation names: values
against torch in float64 and against the formulas of TensorFlow's kernels
evaluated here, gradients against torch's (and exactly TensorFlow's at the
kinks: elu 1, selu scale, leaky_relu alpha, relu6 0 at 0 and at 6, Keras's
elu alpha), softplus's three ranges, on the CPU and a simulated GPU;
serialize, deserialize, get, the ELU layer, configs, a model that trains."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev
from vdev import activations, layers

rng = np.random.default_rng(20261206)
f32 = np.float32
SCALE, SCALE_ALPHA = 1.0507009873554804934193349852946, 1.7580993408473768599402175208123

# name, vdev function, torch function of a float64 tensor
CASES = [
    ("erf", vdev.math.erf, torch.erf),
    ("softplus", vdev.nn.softplus, lambda t: torch.where(t > 0, t + torch.log1p(torch.exp(-t)),
                                                          torch.log1p(torch.exp(t)))),
    ("elu", vdev.nn.elu, F.elu),
    ("selu", vdev.nn.selu, F.selu),
    ("gelu", vdev.nn.gelu, F.gelu),
    ("gelu approximate", lambda x: vdev.nn.gelu(x, approximate=True),
     lambda t: F.gelu(t, approximate="tanh")),
    ("softsign", vdev.nn.softsign, F.softsign),
    ("silu", vdev.nn.silu, F.silu),
    ("swish", vdev.nn.swish, F.silu),
    ("relu6", vdev.nn.relu6, F.relu6),
    ("leaky_relu", vdev.nn.leaky_relu, lambda t: F.leaky_relu(t, 0.2)),
    ("keras elu alpha 0.5", lambda x: activations.elu(x, 0.5), lambda t: F.elu(t, 0.5)),
    ("keras hard_sigmoid", activations.hard_sigmoid,
     lambda t: torch.clamp(0.2 * t + 0.5, 0.0, 1.0)),
    ("keras exponential", activations.exponential, torch.exp),
]


def away_from_kinks(shape, lo, hi):
    """Uniform values with none within 0.05 of 0 or 6 (the kinks)."""
    x = rng.uniform(lo, hi, shape)
    for k in (0.0, 6.0, -2.5, 2.5):  # hard_sigmoid's kinks at +-2.5
        near = np.abs(x - k) < 0.05
        x[near] += 0.1
    return x.astype(f32)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_against_torch(dev, case):
    _, fn, tfn = case
    x = away_from_kinks((4, 25), -8, 8)
    r = rng.uniform(-1, 1, x.shape).astype(f32)
    with vdev.device(dev):
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            y = fn(xv)
            loss = vdev.reduce_sum(y * r)
        g = tape.gradient(loss, xv)
    assert y.device.endswith(dev) and y.dtype is vdev.float32
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ty = tfn(xt)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=2e-6, atol=1e-7)
    tg, = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), [xt])
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-6)


def test_kernel_formulas_in_float32():
    """The float32 steps of TensorFlow's kernels, with exp rounded from
    double as vdev's Exp rounds it: the same bits."""
    x = rng.uniform(-6, 9, 500).astype(f32)
    x[:4] = (0.0, 6.0, -0.0, 1e-30)
    e = np.exp(x.astype(np.float64)).astype(f32)
    np.testing.assert_array_equal(vdev.nn.elu(x).numpy(), np.where(x < 0, e - f32(1), x))
    np.testing.assert_array_equal(
        vdev.nn.selu(x).numpy(), np.where(x < 0, f32(SCALE_ALPHA) * (e - f32(1)), f32(SCALE) * x))
    np.testing.assert_array_equal(vdev.nn.relu6(x).numpy(), np.minimum(np.maximum(x, 0), 6))
    np.testing.assert_array_equal(vdev.nn.leaky_relu(x, 0.3).numpy(),
                                  np.where(x > 0, x, f32(0.3) * x))
    np.testing.assert_array_equal(vdev.nn.softsign(x).numpy(), x / (np.abs(x) + f32(1)))


def test_softplus_ranges_and_erf():
    x = np.array([-100, -20, -13.95, -13.9, -1, 0, 1, 13.9, 13.95, 20, 100], f32)
    got = vdev.nn.softplus(x).numpy()
    d = x.astype(np.float64)
    # TensorFlow's kernel: exp(x) below -13.94, x above 13.94 (not log(1 + e^x) = 0 or 1 + ...)
    np.testing.assert_array_equal(got[[0, 1, 2]], np.exp(d[[0, 1, 2]]).astype(f32))
    np.testing.assert_array_equal(got[[8, 9, 10]], x[[8, 9, 10]])
    np.testing.assert_allclose(got[3:8], np.log1p(np.exp(d[3:8])), rtol=1e-7)
    assert got[0] > 0  # e^-100, a subnormal float, not 0
    xs = np.linspace(-4, 4, 81).astype(f32)
    np.testing.assert_allclose(vdev.math.erf(xs).numpy(), [math.erf(v) for v in xs],
                               rtol=1e-7, atol=1e-12)
    assert vdev.math.softplus is vdev.nn.softplus and vdev.math.softsign is vdev.nn.softsign
    special = vdev.math.erf(np.array([np.nan, np.inf, -np.inf, -0.0], f32)).numpy()
    assert np.isnan(special[0]) and special[1] == 1 and special[2] == -1
    assert special[3] == 0 and np.signbit(special[3])


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_gradients_at_the_kinks_are_tensorflows(dev):
    def grad(fn, point):
        with vdev.device(dev):
            v = vdev.Variable(np.array([point], f32))
            with vdev.GradientTape() as tape:
                loss = vdev.reduce_sum(fn(v))
            return float(tape.gradient(loss, v).numpy()[0])
    assert grad(vdev.nn.elu, 0.0) == 1.0  # EluGrad: dy where x >= 0
    assert grad(vdev.nn.selu, 0.0) == f32(SCALE)  # SeluGrad: dy * scale where x >= 0
    assert grad(lambda v: vdev.nn.leaky_relu(v, 0.3), 0.0) == f32(0.3)
    assert grad(vdev.nn.relu6, 0.0) == 0.0 and grad(vdev.nn.relu6, 6.0) == 0.0
    assert grad(vdev.nn.relu6, 3.0) == 1.0
    assert grad(lambda v: activations.elu(v, 0.5), 0.0) == 0.5  # tf.where(x > 0, ...): alpha
    assert grad(vdev.nn.softplus, -30.0) == pytest.approx(math.exp(-30), rel=1e-6)
    assert grad(vdev.nn.softplus, 30.0) == 1.0
    assert grad(vdev.math.erf, 0.5) == pytest.approx(2 / math.sqrt(math.pi) * math.exp(-0.25),
                                                     rel=1e-6)


def test_keras_names_get_serialize():
    names = ["elu", "selu", "gelu", "softplus", "softsign", "swish", "exponential",
             "hard_sigmoid", "relu", "tanh", "sigmoid", "softmax", "linear"]
    x = rng.uniform(-2, 2, (3, 4)).astype(f32)
    for name in names:
        fn = activations.get(name)
        assert activations.serialize(fn) == name
        layer = layers.Dense(2, activation=name, seed=3)
        assert layer.get_config()["activation"] == name
        # a layer keeps None for linear, as the function itself for the others
        assert layers.Dense.from_config(layer.get_config()).activation is (
            None if name == "linear" else fn)
        assert layers.Activation(name).get_config()["activation"] == name
        conv = layers.Conv2D(1, 1, activation=name)
        assert conv.get_config()["activation"] == name
        if name not in ("softmax", "linear"):
            want = getattr(activations, name)(x).numpy()
            np.testing.assert_array_equal(layers.Activation(name)(x).numpy(), want)
    assert activations.get(None) is activations.linear
    assert activations.get(vdev.nn.relu6) is vdev.nn.relu6
    assert activations.deserialize("mine", custom_objects={"mine": abs}) is abs
    with pytest.raises(TypeError) as e:
        activations.get(3)
    assert str(e.value) == "Could not interpret activation function identifier: 3"
    with pytest.raises(ValueError) as e:
        layers.Dense(2, activation="mish")
    assert str(e.value) == ("Unknown activation function: 'mish'. vdev has 'linear', 'relu', "
                            "'tanh', 'sigmoid', 'softmax', 'elu', 'selu', 'gelu', 'softplus', "
                            "'softsign', 'swish', 'exponential', 'hard_sigmoid'")
    np.testing.assert_array_equal(activations.relu(x, max_value=1.0).numpy(),
                                  np.clip(x, 0, 1))


def test_elu_layer():
    layer = layers.ELU(0.7)
    x = rng.uniform(-3, 3, (2, 5)).astype(f32)
    np.testing.assert_array_equal(layer(x).numpy(), activations.elu(x, 0.7).numpy())
    assert layer.get_config()["alpha"] == pytest.approx(0.7)
    assert layers.ELU.from_config(layer.get_config()).alpha == layer.alpha
    assert layers.ELU().name.startswith("elu")
    with pytest.raises(ValueError) as e:
        layers.ELU(None)
    assert str(e.value) == "Alpha of an ELU layer cannot be None, expecting a float. Received: None"


@pytest.mark.parametrize("act", ["gelu", "swish", "selu", "softplus"])
def test_a_model_trains(act):
    x = rng.uniform(-1, 1, (64, 6)).astype(f32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(f32)
    model = vdev.models.Sequential([layers.Dense(16, activation=act, input_shape=(6,), seed=1),
                                    layers.Dense(1, seed=2)])
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    loss = model.fit(x, y, batch_size=16, epochs=15, verbose=0).history["loss"]
    assert loss[-1] < 0.5 * loss[0]
