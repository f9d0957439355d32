"""vdev.nn.depthwise_conv2d and vdev.layers.DepthwiseConv2D as TensorFlow and
Keras 2.11 have them (NHWC): values and gradients (GradientTape) against
torch's grouped convolution (groups = channels, the weight [C*M, 1, KH, KW]
taken from the filter [KH, KW, C, M]) on random shapes (strides 1 and 2,
both paddings, channel multipliers 1 to 3, dilations) on the CPU and a
simulated GPU; TensorFlow's documented example; TensorFlow's argument forms
and errors; the Keras layer's weights, config, argument errors, its place in
a Sequential model and a functional one, and a small net trained the same
on CPU:0 and GPU:1."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev
from vdev import layers

rng = np.random.default_rng(20261206)


def tf_pads(size, k, s, padding):
    """(out, before, after) of one dimension, TensorFlow's rule, k the
    window's effective size."""
    if padding == "VALID":
        return (size - k + s) // s, 0, 0
    out = (size + s - 1) // s
    total = max(0, (out - 1) * s + k - size)
    return out, total // 2, total - total // 2


def torch_depthwise(x, f, s, d, padding):
    """x [N,H,W,C] and f [KH,KW,C,M] (torch tensors) through F.conv2d with
    groups=C: output channel c*M+m is weight row c*M+m, filter[:, :, c, m]."""
    kh, kw, c, m = f.shape
    eh, ew = (kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1
    xt = x.permute(0, 3, 1, 2)
    _, t, b = tf_pads(xt.shape[2], eh, s, padding)
    _, l, r = tf_pads(xt.shape[3], ew, s, padding)
    w = f.permute(2, 3, 0, 1).reshape(c * m, 1, kh, kw)
    y = F.conv2d(F.pad(xt, (l, r, t, b)), w, stride=s, dilation=d, groups=c)
    return y.permute(0, 2, 3, 1)


CASES = [  # n, h, w, c, kh, kw, m, s, dh, dw
    (2, 7, 5, 3, 3, 2, 2, 1, 1, 1),
    (3, 9, 8, 2, 3, 3, 1, 2, 1, 1),
    (1, 6, 6, 4, 2, 2, 3, 2, 1, 1),
    (2, 5, 5, 3, 5, 5, 2, 1, 1, 1),
    (2, 9, 8, 3, 3, 2, 2, 1, 2, 3),
    (1, 11, 10, 2, 2, 3, 3, 1, 4, 2),
]


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("case", CASES)
def test_against_torch_values_and_gradients(dev, padding, case):
    n, h, w, c, kh, kw, m, s, dh, dw = case
    x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
    f = rng.uniform(-1, 1, (kh, kw, c, m)).astype(np.float32)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ft = torch.tensor(f, dtype=torch.float64, requires_grad=True)
    ty = torch_depthwise(xt, ft, s, (dh, dw), padding)
    r = rng.uniform(-1, 1, tuple(ty.shape)).astype(np.float32)
    with vdev.device(dev):
        xv, fv = vdev.Variable(x), vdev.Variable(f)
        with vdev.GradientTape() as tape:
            y = vdev.nn.depthwise_conv2d(xv, fv, [1, s, s, 1], padding, dilations=[dh, dw])
            loss = vdev.reduce_sum(y * r)
        assert y.device.endswith(dev)
        gx, gf = tape.gradient(loss, [xv, fv])
    assert y.shape == tuple(ty.shape)
    assert y.shape[3] == c * m
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    tgx, tgf = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), [xt, ft])
    assert gx.device.endswith(dev) and gf.device.endswith(dev)
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gf.numpy(), tgf.numpy(), rtol=1e-5, atol=1e-5)


def test_tensorflows_documented_example():
    x = np.array([[1., 2.], [3., 4.], [5., 6.]], np.float32).reshape((1, 3, 2, 1))
    kernel = np.array([[1., 2.], [3., 4]], np.float32).reshape((2, 1, 1, 2))
    y = vdev.nn.depthwise_conv2d(x, kernel, strides=[1, 1, 1, 1], padding="VALID")
    assert y.numpy().tolist() == [[[[10, 14], [14, 20]], [[18, 26], [22, 32]]]]
    # SAME: one row of padding, after (the 2x1 window); 1 column window, none
    y = vdev.nn.depthwise_conv2d(x, kernel, [1, 1, 1, 1], "SAME")
    assert y.shape == (1, 3, 2, 2)
    assert y.numpy()[0, 2].tolist() == [[5, 10], [6, 12]]


def test_a_filter_given_as_a_value_is_made_beside_the_input():
    with vdev.device("GPU:1"):
        x = vdev.ones([1, 3, 3, 2])
    y = vdev.nn.depthwise_conv2d(x, np.ones((2, 2, 2, 1), np.float32), [1, 1, 1, 1], "VALID")
    assert y.device.endswith("GPU:1") and y.numpy().ravel().tolist() == [4] * 8


def test_argument_forms_and_refusals():
    x = vdev.zeros([1, 5, 5, 3])
    f = vdev.zeros([3, 3, 3, 2])
    assert vdev.nn.depthwise_conv2d(x, f, [1, 2, 2, 1], "SAME").shape == (1, 3, 3, 6)
    assert vdev.nn.depthwise_conv2d(x, f, (1, 1, 1, 1), "VALID", "NHWC").shape == (1, 3, 3, 6)
    assert vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "VALID",
                                    dilations=(2, 1)).shape == (1, 1, 3, 6)
    with pytest.raises(TypeError, match="Expected list for 'strides' argument to "
                       "'depthwise_conv2d_native' Op, not 1."):
        vdev.nn.depthwise_conv2d(x, f, 1, "SAME")
    with pytest.raises(TypeError, match="Expected int for argument 'strides' not 1.5."):
        vdev.nn.depthwise_conv2d(x, f, [1, 1.5, 1.5, 1], "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="^Sliding window strides field must specify 4 dimensions"):
        vdev.nn.depthwise_conv2d(x, f, [2, 2], "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError, match="^Current implementation only "
                       "supports equal length strides in the row and column dimensions."):
        vdev.nn.depthwise_conv2d(x, f, [1, 2, 1, 1], "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError, match="^Current implementation does "
                       "not yet support strides in the batch and depth dimensions."):
        vdev.nn.depthwise_conv2d(x, f, [2, 1, 1, 1], "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="DepthwiseConv2dNative: Stride must be > 0, but got 0"):
        vdev.nn.depthwise_conv2d(x, f, [1, 0, 0, 1], "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="DepthwiseConv2dNative: input and filter must have the same depth: "
                       "3 vs 2"):
        vdev.nn.depthwise_conv2d(x, vdev.zeros([3, 3, 2, 2]), [1, 1, 1, 1], "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match=r"DepthwiseConv2dNative: input must be 4-dimensional\[5,5,3\]"):
        vdev.nn.depthwise_conv2d(vdev.zeros([5, 5, 3]), f, [1, 1, 1, 1], "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match=r"DepthwiseConv2dNative: Computed output size would be negative: -1 "
                       r"\[input_size: 5, effective_filter_size: 7, stride: 1\]"):
        vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "VALID", dilations=[3, 1])
    with pytest.raises(vdev.errors.InvalidArgumentError, match="Value for attr 'padding' of "
                       "\"FULL\" is not in the list of allowed values: \"SAME\", \"VALID\""):
        vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "FULL")
    with pytest.raises(ValueError, match=r"^`dilation_rate` must be positive. Received: "
                       r"dilation_rate=\[0 1\]$"):
        vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME", dilations=[0, 1])
    with pytest.raises(ValueError, match="takes dilations as 2 ints"):
        vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME", dilations=[1, 2, 2, 1])
    with pytest.raises(ValueError, match=r"takes strides above 1 only with dilations of 1 .* "
                       r"Received: strides=\[1, 2, 2, 1\] and dilations=\[2, 2\]"):
        vdev.nn.depthwise_conv2d(x, f, [1, 2, 2, 1], "SAME", dilations=[2, 2])
    with pytest.raises(vdev.errors.UnimplementedError, match="NHWC only"):
        vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME", data_format="NCHW")
    # explicit padding: taken (test_pad.py)
    np.testing.assert_array_equal(
        vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], [[0, 0], [1, 1], [1, 1], [0, 0]]).numpy(),
        vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME").numpy())


# ---- the Keras layer ----

def test_layer_against_torch_values_and_gradients():
    """DepthwiseConv2D(3, strides 2, 'same', depth_multiplier 2, relu): its
    output, and the gradients of its kernel, bias and input, against torch's
    grouped convolution of the same weights."""
    x = rng.uniform(-1, 1, (2, 7, 6, 3)).astype(np.float32)
    layer = layers.DepthwiseConv2D((3, 2), strides=2, padding="same", depth_multiplier=2,
                                   activation="relu", bias_initializer="random_uniform", seed=5)
    xv = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = layer(xv)
        r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
        loss = vdev.reduce_sum(y * r)
    gk, gb, gx = tape.gradient(loss, [layer.depthwise_kernel, layer.bias, xv])
    assert layer.depthwise_kernel.shape == (3, 2, 3, 2) and layer.bias.shape == (6,)
    assert [v.name for v in layer.weights] == ["%s/depthwise_kernel" % layer.name,
                                               "%s/bias" % layer.name]
    kt = torch.tensor(layer.depthwise_kernel.numpy(), dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(layer.bias.numpy(), dtype=torch.float64, requires_grad=True)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ty = torch.relu(torch_depthwise(xt, kt, 2, (1, 1), "SAME") + bt)
    assert y.shape == tuple(ty.shape) == (2, 4, 3, 6)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    want = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), [kt, bt, xt])
    for got, w in zip((gk, gb, gx), want):
        np.testing.assert_allclose(got.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    # the layer is the op plus the bias and the activation, bit for bit
    same = vdev.nn.relu(vdev.nn.depthwise_conv2d(x, layer.depthwise_kernel, [1, 2, 2, 1], "SAME")
                        + layer.bias)
    np.testing.assert_array_equal(layer(x).numpy(), same.numpy())


def test_layer_dilation_rate_and_no_bias():
    x = rng.uniform(-1, 1, (1, 10, 9, 2)).astype(np.float32)
    layer = layers.DepthwiseConv2D(3, dilation_rate=(2, 3), use_bias=False, seed=2)
    y = layer(x)
    assert layer.bias is None and len(layer.weights) == 1
    assert y.shape == (1, 6, 3, 2) == layer.compute_output_shape((1, 10, 9, 2))
    want = vdev.nn.depthwise_conv2d(x, layer.depthwise_kernel, [1, 1, 1, 1], "VALID",
                                    dilations=[2, 3])
    np.testing.assert_array_equal(y.numpy(), want.numpy())


def test_layer_config_and_from_config():
    layer = layers.DepthwiseConv2D(3, strides=(2, 2), padding="same", depth_multiplier=3,
                                   activation="tanh", seed=9, input_shape=(8, 8, 2))
    c = layer.get_config()
    for k in ("filters", "kernel_initializer", "kernel_regularizer", "kernel_constraint"):
        assert k not in c
    assert c["depth_multiplier"] == 3 and c["kernel_size"] == (3, 3)
    assert c["strides"] == (2, 2) and c["padding"] == "same" and c["activation"] == "tanh"
    assert c["depthwise_initializer"] == {"class_name": "GlorotUniform", "config": {"seed": 9}}
    assert c["depthwise_regularizer"] is None and c["depthwise_constraint"] is None
    assert c["groups"] == 1 and c["dilation_rate"] == (1, 1) and c["use_bias"] is True
    again = layers.DepthwiseConv2D.from_config(c)
    x = rng.uniform(-1, 1, (2, 8, 8, 2)).astype(np.float32)
    np.testing.assert_array_equal(again(x).numpy(), layer(x).numpy())
    assert layer.built and layer.count_params() == 3 * 3 * 2 * 3 + 6
    assert layer.compute_output_shape((None, 8, 8, 2)) == (None, 4, 4, 6)


def test_layer_argument_errors_and_what_vdev_lacks():
    with pytest.raises(ValueError, match=r"The `kernel_size` argument must be a tuple of 2 "
                       r"integers. Received: kernel_size=0 including \{0\} that does not "
                       r"satisfy the requirement `> 0`."):
        layers.DepthwiseConv2D(0)
    with pytest.raises(ValueError, match=r"The argument `strides` cannot contains 0\(s\). "
                       r"Received: \(1, 0\)"):
        layers.DepthwiseConv2D(3, strides=(1, 0))
    with pytest.raises(ValueError, match=r"`strides > 1` not supported in conjunction with "
                       r"`dilation_rate > 1`. Received: strides=\(2, 2\) and "
                       r"dilation_rate=\(2, 2\)"):
        layers.DepthwiseConv2D(3, strides=2, dilation_rate=2)
    with pytest.raises(ValueError, match="Causal padding is only supported for `Conv1D` and "
                       "`SeparableConv1D`."):
        layers.DepthwiseConv2D(3, padding="causal")
    with pytest.raises(ValueError, match="The `padding` argument must be a list/tuple or one of"):
        layers.DepthwiseConv2D(3, padding="full")
    with pytest.raises(ValueError, match="vdev's DepthwiseConv2D takes data_format=None or "
                       "'channels_last' only"):
        layers.DepthwiseConv2D(3, data_format="channels_first")
    with pytest.raises(ValueError, match="vdev's DepthwiseConv2D takes depthwise_regularizer="
                       "None only"):
        layers.DepthwiseConv2D(3, depthwise_regularizer="l2")
    with pytest.raises(ValueError, match="vdev's DepthwiseConv2D takes bias_constraint=None"):
        layers.DepthwiseConv2D(3, bias_constraint=abs)
    with pytest.raises(ValueError, match="depth_multiplier >= 0, not -1"):
        layers.DepthwiseConv2D(3, depth_multiplier=-1)
    # unequal strides pass here, as in Keras, and are the op's error at the call
    layer = layers.DepthwiseConv2D(3, strides=(2, 1))
    with pytest.raises(vdev.errors.InvalidArgumentError, match="Current implementation only "
                       "supports equal length strides in the row and column dimensions."):
        layer(np.zeros((1, 6, 6, 2), np.float32))
    built = layers.DepthwiseConv2D(3, input_shape=(6, 6, 2))
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 2"):
        built(np.zeros((1, 6, 6, 3), np.float32))
    with pytest.raises(ValueError, match="expected min_ndim=4, found ndim=3"):
        built(np.zeros((6, 6, 2), np.float32))


def test_in_sequential_and_functional_models():
    model = vdev.models.Sequential([layers.DepthwiseConv2D(3, depth_multiplier=2,
                                                           input_shape=(6, 5, 3)),
                                    layers.Flatten(), layers.Dense(2)])
    assert model.layers[0].built and model.layers[2].kernel.shape == (4 * 3 * 6, 2)
    assert model.count_params() == (3 * 3 * 3 * 2 + 6) + (72 * 2 + 2)
    inp = vdev.Input((6, 5, 3))
    out = layers.Dense(2)(layers.Flatten()(layers.DepthwiseConv2D(3, padding="same")(inp)))
    fm = vdev.models.Model(inp, out)
    assert fm(np.zeros((2, 6, 5, 3), np.float32)).shape == (2, 2)


def train(dev):
    x = np.random.default_rng(3).uniform(-1, 1, (8, 8, 8, 2)).astype(np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    with vdev.device(dev):
        model = vdev.models.Sequential([
            layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2, activation="relu",
                                   seed=11),
            layers.MaxPooling2D(), layers.Flatten(), layers.Dense(3, seed=12)])
        opt = vdev.optimizers.Adam(learning_rate=0.01)
        ce = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
        losses = []
        for _ in range(10):
            with vdev.GradientTape() as tape:
                loss = ce(labels, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            losses.append(float(loss))
    assert model.layers[0].depthwise_kernel.device.endswith(dev)
    return losses


def test_a_small_net_trains_the_same_on_cpu_and_gpu():
    cpu, gpu = train("CPU:0"), train("GPU:1")
    assert cpu[-1] < 0.8 * cpu[0]
    assert all(b < a for a, b in zip(cpu, cpu[1:]))
    assert cpu == gpu
