"""Keras 2.11's Conv2DTranspose in vdev.layers: its output against torch's
conv_transpose2d (placed as TensorFlow places it: see
test_conv_transpose.py) for values and the gradients of the input, kernel
and bias, over strides, both paddings, output_padding and dilation_rate;
the output size by Keras's deconv_output_length (written out here); Keras's
argument errors and its shape errors in its words; get_config / from_config
round trips; a Sequential built as it is made and summarized, a functional
model, and fit giving the very bits of the GradientTape loop it runs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev
from vdev import layers

rng = np.random.default_rng(20261207)


def deconv_output_length(n, k, padding, output_padding, s, d):
    """keras/utils/conv_utils.py deconv_output_length."""
    k = k + (k - 1) * (d - 1)
    if output_padding is None:
        return n * s + max(k - s, 0) if padding == "valid" else n * s
    pad = k // 2 if padding == "same" else 0
    return (n - 1) * s + k - 2 * pad + output_padding


def torch_layer(x, kernel, bias, oshape, s, d, padding, act):
    """TensorFlow's conv2d_transpose + bias (+ relu) through torch: the full
    transposed output cropped or zero-padded to oshape, pad_top rows (half
    of what conv2d's SAME needs on the output's size) cropped before."""
    _, oh, ow, _ = oshape
    y = F.conv_transpose2d(x.permute(0, 3, 1, 2), kernel.permute(3, 2, 0, 1), stride=s,
                           dilation=d)
    pads = []
    for n, o, k, st, dl in ((x.shape[2], ow, kernel.shape[1], s[1], d[1]),
                            (x.shape[1], oh, kernel.shape[0], s[0], d[0])):
        full = (n - 1) * st + (k - 1) * dl + 1
        before = max(0, full - o) // 2 if padding == "same" else 0
        pads += [-before, o - (full - before)]
    y = F.pad(y, pads).permute(0, 2, 3, 1) + bias
    return torch.relu(y) if act else y


CASES = [  # filters, kernel, strides, padding, output_padding, dilation_rate, input hw
    (4, 3, (2, 2), "same", None, (1, 1), (5, 4)),
    (4, 3, (2, 2), "valid", None, (1, 1), (5, 4)),
    (3, (3, 2), (2, 3), "same", (1, 2), (1, 1), (4, 3)),
    (3, (3, 2), (2, 3), "valid", (1, 0), (1, 1), (4, 3)),
    (2, 2, (3, 3), "valid", None, (1, 1), (3, 3)),  # a window smaller than the stride
    (2, 4, (2, 2), "same", (1, 1), (1, 1), (3, 5)),  # an even window
    (3, 3, (1, 1), "same", None, (2, 2), (6, 5)),  # dilated: stride 1, one rate
    (3, (2, 3), (1, 1), "valid", None, (3, 3), (4, 4)),
]


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("case", CASES)
def test_against_torch_values_and_gradients(dev, case):
    filters, ks, strides, padding, out_pad, dil, (h, w) = case
    act = padding == "same"
    with vdev.device(dev):
        layer = layers.Conv2DTranspose(filters, ks, strides, padding, out_pad,
                                       dilation_rate=dil, activation="relu" if act else None,
                                       bias_initializer="random_uniform", seed=5)
    x = rng.uniform(-1, 1, (2, h, w, 3)).astype(np.float32)
    kh, kw = (ks, ks) if isinstance(ks, int) else ks
    op = out_pad or (None, None)
    oh = deconv_output_length(h, kh, padding, op[0], strides[0], dil[0])
    ow = deconv_output_length(w, kw, padding, op[1], strides[1], dil[1])
    r = rng.uniform(-1, 1, (2, oh, ow, filters)).astype(np.float32)
    xv = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = layer(xv)
        loss = vdev.reduce_sum(y * r)
    assert layer.kernel.shape == (kh, kw, filters, 3) and layer.bias.shape == (filters,)
    assert y.device.endswith(dev) and layer.kernel.device.endswith(dev)
    assert y.shape == (2, oh, ow, filters) == layer.compute_output_shape(x.shape)
    gx, gk, gb = tape.gradient(loss, [xv, layer.kernel, layer.bias])
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    kt = torch.tensor(layer.kernel.numpy(), dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(layer.bias.numpy(), dtype=torch.float64, requires_grad=True)
    ty = torch_layer(xt, kt, bt, (2, oh, ow, filters), strides, dil, padding, act)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    want = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), [xt, kt, bt])
    for got, tw in zip((gx, gk, gb), want):
        np.testing.assert_allclose(got.numpy(), tw.numpy(), rtol=1e-5, atol=1e-5)


def test_it_is_conv2d_transpose_plus_bias():
    layer = layers.Conv2DTranspose(5, (3, 2), strides=2, padding="same", seed=3)
    x = rng.uniform(-1, 1, (2, 4, 3, 2)).astype(np.float32)
    y = layer(x)
    want = vdev.nn.conv2d_transpose(x, layer.kernel, [2, 8, 6, 5], 2, "SAME") + layer.bias
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    assert layer.name.startswith("conv2d_transpose")
    assert [v.name for v in layer.weights] == [layer.name + "/kernel", layer.name + "/bias"]
    assert isinstance(layer, layers.Conv2D)  # as in Keras


def test_keras_argument_errors():
    def refused(msg, *args, **kw):
        with pytest.raises(ValueError) as e:
            layers.Conv2DTranspose(*args, **kw)
        assert str(e.value) == msg

    refused("Strides must be greater than output padding. Received strides=(2, 2), "
            "output_padding=(2, 2).", 2, 3, strides=2, output_padding=2)
    refused("Strides must be greater than output padding. Received strides=(1, 1), "
            "output_padding=(0, 1).", 2, 3, output_padding=(0, 1))
    refused("The `output_padding` argument must be a tuple of 2 integers. Received: "
            "output_padding=-1 including {-1} that does not satisfy the requirement `>= 0`.",
            2, 3, strides=2, output_padding=-1)
    refused("The `kernel_size` argument must be a tuple of 2 integers. Received: kernel_size=0 "
            "including {0} that does not satisfy the requirement `> 0`.", 2, 0)
    refused("`strides > 1` not supported in conjunction with `dilation_rate > 1`. Received: "
            "strides=(2, 2) and dilation_rate=(2, 2)", 2, 3, strides=2, dilation_rate=2)
    refused("Invalid value for argument `filters`. Expected a strictly positive value. "
            "Received filters=0.", 0, 3)
    refused('The `padding` argument must be a list/tuple or one of "valid", "same" (or '
            '"causal", only for `Conv1D). Received: full', 2, 3, padding="full")
    refused("vdev's Conv2DTranspose takes kernel_regularizer=None only, not 'l2'", 2, 3,
            kernel_regularizer="l2")
    refused("vdev's Conv2DTranspose takes groups=1 only, not 2", 2, 3, groups=2)
    refused("vdev's Conv2DTranspose takes data_format=None or 'channels_last' only, not "
            "'channels_first': vdev's convolutions are NHWC", 2, 3, data_format="channels_first")
    # a dilation_rate of two values: Keras's backend error at the call
    layer = layers.Conv2DTranspose(2, 3, dilation_rate=(2, 1))
    with pytest.raises(ValueError) as e:
        layer(np.zeros((1, 5, 5, 1), np.float32))
    assert str(e.value) == ("Expected the 2 dimensions of the `dilation_rate` argument to be "
                            "equal to each other. Received: dilation_rate=(2, 1)")


def test_keras_shape_errors():
    def refused(msg, fn):
        with pytest.raises(ValueError) as e:
            fn()
        assert str(e.value) == msg

    refused('Input 0 of layer "ct" is incompatible with the layer: expected min_ndim=4, found '
            "ndim=3. Full shape received: (None, 5, 5)",
            lambda: layers.Conv2DTranspose(2, 3, input_shape=(5, 5), name="ct"))
    refused("Inputs should have rank 4. Received input_shape=(None, 5, 5, 2, 1).",
            lambda: layers.Conv2DTranspose(2, 3, input_shape=(5, 5, 2, 1)))
    refused("The channel dimension of the inputs to `Conv2DTranspose` should be defined. The "
            "input_shape received is (None, 5, 5, None), where axis 3 (0-based) is the channel "
            "dimension, which found to be `None`.",
            lambda: layers.Conv2DTranspose(2, 3, input_shape=(5, 5, None)))
    layer = layers.Conv2DTranspose(2, 3, name="ct2")
    refused("Inputs should have rank 4. Received input_shape=(2, 5, 5, 1, 1).",
            lambda: layer.compute_output_shape((2, 5, 5, 1, 1)))
    layer(np.zeros((1, 5, 5, 3), np.float32))
    refused('Input 0 of layer "ct2" is incompatible with the layer: expected axis 3 of input '
            "shape to have value 3, but received input with shape (1, 5, 5, 2)",
            lambda: layer(np.zeros((1, 5, 5, 2), np.float32)))
    refused('Input 0 of layer "ct2" is incompatible with the layer: expected ndim=4, found '
            "ndim=3. Full shape received: (5, 5, 3)",
            lambda: layer(np.zeros((5, 5, 3), np.float32)))
    # an output size whose conv2d does not give back the input's: the op's error
    odd = layers.Conv2DTranspose(1, 3, strides=2, padding="same", output_padding=0)
    assert odd.compute_output_shape((1, 4, 4, 1)) == (1, 7, 7, 1)
    assert odd(np.ones((1, 4, 4, 1), np.float32)).shape == (1, 7, 7, 1)
    odd = layers.Conv2DTranspose(1, 4, strides=3, padding="same", output_padding=0)
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        odd(np.ones((1, 4, 4, 1), np.float32))
    assert str(e.value) == ("Conv2DSlowBackpropInput: Size of out_backprop doesn't match "
                            "computed: actual = 4, computed = 3 spatial_dim: 1 input: 9 filter: 4 "
                            "output: 4 stride: 3 dilation: 1")


@pytest.mark.parametrize("layer", [
    layers.Conv2DTranspose(3, 3, seed=1),
    layers.Conv2DTranspose(2, (3, 2), strides=(2, 3), padding="same", output_padding=(1, 2),
                           activation="tanh", use_bias=False, seed=2),
    layers.Conv2DTranspose(4, 2, dilation_rate=2, kernel_initializer="he_normal", seed=3,
                           name="up"),
])
def test_from_config_of_get_config(layer):
    config = layer.get_config()
    keys = ["name", "trainable", "dtype", "filters", "kernel_size", "strides", "padding",
            "data_format", "dilation_rate", "groups", "activation", "use_bias",
            "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
            "activity_regularizer", "kernel_constraint", "bias_constraint", "output_padding"]
    assert list(config) == keys
    assert config["groups"] == 1 and config["data_format"] == "channels_last"
    again = layers.Conv2DTranspose.from_config(config)
    assert type(again) is layers.Conv2DTranspose and again.get_config() == config
    x = rng.uniform(-1, 1, (1, 5, 6, 2)).astype(np.float32)
    np.testing.assert_array_equal(again(x).numpy(), layer(x).numpy())
    np.testing.assert_array_equal(again.kernel.numpy(), layer.kernel.numpy())


def test_a_sequential_builds_and_summarizes_it():
    model = vdev.models.Sequential([
        layers.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu",
                               input_shape=(5, 5, 2), name="up1"),
        layers.Conv2DTranspose(3, 2, strides=2, output_padding=1, name="up2"),
        layers.Conv2D(1, 3, name="c"),
    ], name="decoder")
    assert model.built
    assert [v.name for v in model.weights] == ["up1/kernel", "up1/bias", "up2/kernel",
                                               "up2/bias", "c/kernel", "c/bias"]
    assert model.layers[0].kernel.shape == (3, 3, 4, 2)
    assert model.layers[1].kernel.shape == (2, 2, 3, 4)
    lines = []
    model.summary(print_fn=lines.append)
    rows = [l for l in lines if l.startswith(" ") and l.strip()][1:]
    shapes = [r[28:54].strip() for r in rows if r[28:54].strip()]
    assert shapes == ["(None, 10, 10, 4)", "(None, 21, 21, 3)", "(None, 19, 19, 1)"]
    assert lines[-4] == "Total params: %s" % "{:,}".format(76 + 51 + 28)
    assert model(np.zeros((2, 5, 5, 2), np.float32)).shape == (2, 19, 19, 1)
    # a layer that cannot take the model's output is refused as Keras refuses it
    with pytest.raises(ValueError, match="expected axis 3 of input shape to have value 2"):
        vdev.models.Sequential([layers.Conv2D(3, 1, input_shape=(4, 4, 1)),
                                model.layers[0]])


def test_a_functional_model():
    inp = vdev.Input((4, 4, 3))
    out = layers.Conv2DTranspose(2, 3, strides=2, padding="same")(inp)
    assert tuple(out.shape) == (None, 8, 8, 2)
    model = vdev.Model(inp, out)
    assert model(np.zeros((3, 4, 4, 3), np.float32)).shape == (3, 8, 8, 2)


def make_model():
    return vdev.models.Sequential([
        layers.Conv2DTranspose(3, 3, strides=2, padding="same", activation="relu", seed=11,
                               input_shape=(3, 3, 2)),
        layers.Flatten(), layers.Dense(2, seed=12)])


def test_fit_is_the_tape_loop_and_the_loss_falls():
    x = rng.uniform(-1, 1, (40, 3, 3, 2)).astype(np.float32)
    y = np.stack([x.sum(axis=(1, 2, 3)), x[:, 0, 0, 0] - x[:, 2, 2, 1]], 1).astype(np.float32)
    a, b = make_model(), make_model()
    a.compile(vdev.optimizers.Adam(0.01), vdev.losses.MeanSquaredError())
    h = a.fit(x, y, batch_size=8, epochs=6, shuffle=False, verbose=0)
    opt, mse, means = vdev.optimizers.Adam(0.01), vdev.losses.MeanSquaredError(), []
    for _ in range(6):
        total = 0.0
        for i in range(0, 40, 8):
            v = b.trainable_variables
            with vdev.GradientTape() as tape:
                loss = mse(y[i:i + 8], b(x[i:i + 8]))
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
            total += float(loss) * 8
        means.append(total / 40)
    for va, vb in zip(a.weights, b.weights):
        assert np.array_equal(va.numpy(), vb.numpy())
    assert h.history["loss"] == means
    assert means[-1] < 0.5 * means[0]
