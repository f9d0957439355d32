"""vdev.nn.conv1d, max_pool1d, avg_pool1d and separable_conv2d as tf.nn has
them, and Keras 2.11's Conv1D, MaxPooling1D, AveragePooling1D and
SeparableConv2D: values and gradients (GradientTape) against torch on the
CPU and a simulated GPU (SAME's padding worked by hand, strides, dilations,
causal padding), TensorFlow's argument forms and refusals in its words, the
layers' weights, shapes, configs and Keras's argument errors, and the layers
in Sequential and functional models, trained."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev
from vdev import layers
from vdev.errors import UnimplementedError

rng = np.random.default_rng(20261206)


def tf_pads(size, k, s, padding, d=1):
    """(out, before, after) of one dimension, TensorFlow's rule for a window
    of k taps d apart."""
    eff = (k - 1) * d + 1
    if padding == "VALID":
        return (size - eff + s) // s, 0, 0
    out = (size + s - 1) // s
    total = max(0, (out - 1) * s + eff - size)
    return out, total // 2, total - total // 2


def torch_conv1d(x, f, s, d, padding):
    """x [N,W,C], f [K,C,O] (float64 tensors) as TensorFlow's conv1d."""
    _, l, r = tf_pads(x.shape[1], f.shape[0], s, padding, d)
    y = F.conv1d(F.pad(x.permute(0, 2, 1), (l, r)), f.permute(2, 1, 0), stride=s, dilation=d)
    return y.permute(0, 2, 1)


def torch_pool1d(x, k, s, padding, kind):
    xt = x.permute(0, 2, 1)
    _, l, r = tf_pads(x.shape[1], k, s, padding)
    if kind == "max":
        y = F.max_pool1d(F.pad(xt, (l, r), value=-float("inf")), k, s)
    else:  # the sum of the elements inside over their count
        tot = F.avg_pool1d(F.pad(xt, (l, r)), k, s) * k
        cnt = F.avg_pool1d(F.pad(torch.ones_like(xt[:1, :1]), (l, r)), k, s) * k
        y = tot / cnt
    return y.permute(0, 2, 1)


CASES = [  # n, w, c, k, o, stride, dilation
    (2, 9, 3, 3, 4, 1, 1),
    (3, 11, 2, 4, 3, 2, 1),
    (1, 12, 4, 3, 2, 1, 3),
    (2, 7, 1, 1, 5, 3, 1),
]


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("case", CASES)
def test_conv1d_and_pools_against_torch_values_and_gradients(dev, padding, case):
    n, w, c, k, o, s, d = case
    x = rng.uniform(-1, 1, (n, w, c)).astype(np.float32)
    f = rng.uniform(-1, 1, (k, c, o)).astype(np.float32)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ft = torch.tensor(f, dtype=torch.float64, requires_grad=True)
    ow = tf_pads(w, k, s, padding, d)[0]
    pw = tf_pads(w, k, s, padding)[0]
    ry = rng.uniform(-1, 1, (n, ow, o)).astype(np.float32)
    rm = rng.uniform(-1, 1, (n, pw, c)).astype(np.float32)
    ra = rng.uniform(-1, 1, (n, pw, c)).astype(np.float32)
    with vdev.device(dev):
        xv, fv = vdev.Variable(x), vdev.Variable(f)
        with vdev.GradientTape(persistent=True) as tape:
            y = vdev.nn.conv1d(xv, fv, s, padding, dilations=d)
            mp = vdev.nn.max_pool1d(xv, k, s, padding)
            ap = vdev.nn.avg_pool1d(xv, [1, k, 1], [1, s, 1], padding)
            ly = vdev.reduce_sum(y * ry)
            lm = vdev.reduce_sum(mp * rm)
            la = vdev.reduce_sum(ap * ra)
        assert y.device.endswith(dev) and mp.device.endswith(dev)
        gx, gf = tape.gradient(ly, [xv, fv])
        gm = tape.gradient(lm, xv)
        ga = tape.gradient(la, xv)
    ty = torch_conv1d(xt, ft, s, d, padding)
    tm = torch_pool1d(xt, k, s, padding, "max")
    ta = torch_pool1d(xt, k, s, padding, "avg")
    for got, want in ((y, ty), (mp, tm), (ap, ta)):
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    tgx, tgf = torch.autograd.grad((ty * torch.tensor(ry, dtype=torch.float64)).sum(), [xt, ft])
    (tgm,) = torch.autograd.grad((tm * torch.tensor(rm, dtype=torch.float64)).sum(), [xt])
    (tga,) = torch.autograd.grad((ta * torch.tensor(ra, dtype=torch.float64)).sum(), [xt])
    for got, want in ((gx, tgx), (gf, tgf), (gm, tgm), (ga, tga)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_conv1d_keeps_a_second_batch_dimension():
    x = rng.uniform(-1, 1, (2, 3, 8, 2)).astype(np.float32)
    f = rng.uniform(-1, 1, (3, 2, 4)).astype(np.float32)
    y = vdev.nn.conv1d(x, f, 2, "SAME")
    assert y.shape == (2, 3, 4, 4)
    flat = vdev.nn.conv1d(x.reshape(6, 8, 2), f, 2, "SAME")
    np.testing.assert_array_equal(y.numpy().reshape(6, 4, 4), flat.numpy())


def test_conv1d_is_conv2d_of_one_row_bit_for_bit():
    x = rng.uniform(-1, 1, (2, 10, 3)).astype(np.float32)
    f = rng.uniform(-1, 1, (3, 3, 5)).astype(np.float32)
    y = vdev.nn.conv1d(x, f, 1, "SAME", dilations=2)
    y2 = vdev.nn.conv2d(x[:, None], f[None], [1, 1], "SAME", dilations=[1, 2])
    np.testing.assert_array_equal(y.numpy(), y2.numpy()[:, 0])


def test_separable_conv2d_against_torch_values_and_gradients():
    for dev, (s, d, padding) in (("CPU:0", (1, 1, "SAME")), ("GPU:1", (2, 1, "VALID")),
                                 ("CPU:0", (1, 2, "SAME"))):
        x = rng.uniform(-1, 1, (2, 7, 6, 3)).astype(np.float32)
        df = rng.uniform(-1, 1, (3, 3, 3, 2)).astype(np.float32)
        pf = rng.uniform(-1, 1, (1, 1, 6, 4)).astype(np.float32)
        with vdev.device(dev):
            xv, dv, pv = vdev.Variable(x), vdev.Variable(df), vdev.Variable(pf)
            with vdev.GradientTape() as tape:
                y = vdev.nn.separable_conv2d(xv, dv, pv, [1, s, s, 1], padding,
                                             dilations=[d, d])
                r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
                loss = vdev.reduce_sum(y * r)
            grads = tape.gradient(loss, [xv, dv, pv])
        ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, df, pf)]
        _, t, b = tf_pads(7, 3, s, padding, d)
        _, lf, rt = tf_pads(6, 3, s, padding, d)
        xt = F.pad(ts[0].permute(0, 3, 1, 2), (lf, rt, t, b))
        mid = F.conv2d(xt, ts[1].permute(2, 3, 0, 1).reshape(6, 1, 3, 3), stride=s, dilation=d,
                       groups=3)
        ty = F.conv2d(mid, ts[2].permute(3, 2, 0, 1)).permute(0, 2, 3, 1)
        assert y.shape == tuple(ty.shape)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
        want = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), ts)
        for got, wt in zip(grads, want):
            np.testing.assert_allclose(got.numpy(), wt.numpy(), rtol=1e-5, atol=1e-5)


def test_argument_forms_and_refusals():
    x = np.zeros((2, 9, 3), np.float32)
    f = np.zeros((3, 3, 2), np.float32)
    for stride in (2, [2], (2,), [1, 2, 1]):
        assert vdev.nn.conv1d(x, f, stride, "VALID").shape == (2, 4, 2)
        assert vdev.nn.max_pool1d(x, 3, stride, "VALID").shape == (2, 4, 3)
    with pytest.raises(ValueError, match=r"^stride should be of length 1, 1 or 3. Received: "
                                         r"stride=\[1, 2\] of length 2$"):
        vdev.nn.conv1d(x, f, [1, 2], "VALID")
    with pytest.raises(ValueError, match=r"^ksize should be of length 1, 1 or 3"):
        vdev.nn.avg_pool1d(x, [2, 2], 1, "VALID")
    with pytest.raises(UnimplementedError, match="strides in the batch and depth dimensions"):
        vdev.nn.conv1d(x, f, [2, 1, 1], "VALID")
    with pytest.raises(UnimplementedError, match="dilations in the batch and depth dimensions"):
        vdev.nn.conv1d(x, f, 1, "VALID", dilations=[1, 1, 2])
    with pytest.raises(UnimplementedError, match="Pooling is not yet supported on the batch "
                                                 "dimension."):
        vdev.nn.max_pool1d(x, [2, 1, 1], 1, "VALID")
    with pytest.raises(UnimplementedError, match="data_format 'NCW' is not supported"):
        vdev.nn.conv1d(x, f, 1, "VALID", data_format="NCW")
    with pytest.raises(TypeError, match="Expected int for argument 'stride' not 1.5."):
        vdev.nn.conv1d(x, f, 1.5, "VALID")
    # the 2-D op's own words, with the shapes it sees (one row added)
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match=r"input must be 4-dimensional\[1,9,3\]"):
        vdev.nn.conv1d(x[0], f, 1, "VALID")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="input depth must be evenly divisible by filter depth: 3 vs 2"):
        vdev.nn.conv1d(x, np.zeros((3, 2, 2), np.float32), 1, "VALID")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="Value for attr 'padding' of \"CAUSAL\" is not in the list"):
        vdev.nn.conv1d(x, f, 1, "CAUSAL")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="MaxPool: tensor_in must be 4-dimensional"):
        vdev.nn.max_pool1d(x[0], 2, 2, "VALID")
    # separable_conv2d: the pointwise filter's static shape first
    img = np.zeros((1, 5, 5, 2), np.float32)
    dw = np.zeros((3, 3, 2, 2), np.float32)
    with pytest.raises(ValueError, match=r"^Shape \(3, 3\) must have rank 4$"):
        vdev.nn.separable_conv2d(img, dw, np.zeros((3, 3), np.float32), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="^Dimensions 3 and 1 are not compatible$"):
        vdev.nn.separable_conv2d(img, dw, np.zeros((3, 1, 4, 2), np.float32), [1, 1, 1, 1],
                                 "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="Sliding window strides field must specify 4 dimensions"):
        vdev.nn.separable_conv2d(img, dw, np.zeros((1, 1, 4, 2), np.float32), [1, 1], "SAME")


# ---- the Keras layers ----

def test_conv1d_layer_against_torch_for_each_padding():
    x = rng.uniform(-1, 1, (2, 10, 3)).astype(np.float32)
    for padding, s, d in (("valid", 2, 1), ("same", 1, 2), ("causal", 1, 2), ("causal", 3, 1)):
        layer = layers.Conv1D(4, 3, strides=s, padding=padding, dilation_rate=d,
                              activation="relu", bias_initializer="random_uniform", seed=7)
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            y = layer(xv)
            r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
            loss = vdev.reduce_sum(y * r)
        gk, gb, gx = tape.gradient(loss, [layer.kernel, layer.bias, xv])
        assert layer.kernel.shape == (3, 3, 4) and layer.bias.shape == (4,)
        assert [v.name for v in layer.weights] == ["%s/kernel" % layer.name,
                                                   "%s/bias" % layer.name]
        kt = torch.tensor(layer.kernel.numpy(), dtype=torch.float64, requires_grad=True)
        bt = torch.tensor(layer.bias.numpy(), dtype=torch.float64, requires_grad=True)
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        if padding == "causal":  # Keras: (k - 1) d zeros before the first step, then VALID
            conv = F.conv1d(F.pad(xt.permute(0, 2, 1), (2 * d, 0)), kt.permute(2, 1, 0),
                            stride=s, dilation=d).permute(0, 2, 1)
        else:
            conv = torch_conv1d(xt, kt, s, d, padding.upper())
        ty = torch.relu(conv + bt)
        assert y.shape == tuple(ty.shape) == layer.compute_output_shape((2, 10, 3))
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
        want = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(),
                                   [kt, bt, xt])
        for got, wt in zip((gk, gb, gx), want):
            np.testing.assert_allclose(got.numpy(), wt.numpy(), rtol=1e-5, atol=1e-5)
    # causal: output step t sees input steps up to t only
    layer = layers.Conv1D(2, 3, padding="causal", seed=3)
    a = rng.uniform(-1, 1, (1, 8, 3)).astype(np.float32)
    b = a.copy()
    b[0, 5:] += 1
    np.testing.assert_array_equal(layer(a).numpy()[0, :5], layer(b).numpy()[0, :5])
    assert not np.array_equal(layer(a).numpy()[0, 5:], layer(b).numpy()[0, 5:])


def test_conv1d_layer_takes_a_second_batch_dimension():
    layer = layers.Conv1D(3, 2, padding="same", seed=4)
    x = rng.uniform(-1, 1, (2, 3, 6, 2)).astype(np.float32)
    y = layer(x)
    assert y.shape == (2, 3, 6, 3) == layer.compute_output_shape((2, 3, 6, 2))
    np.testing.assert_array_equal(y.numpy().reshape(6, 6, 3),
                                  layer(x.reshape(6, 6, 2)).numpy())
    with pytest.raises(ValueError, match="vdev's Conv1D takes inputs of 3 or 4 dimensions"):
        layer.compute_output_shape((2, 2, 3, 6, 2))


def test_pool1d_layers():
    x = rng.uniform(-1, 1, (2, 9, 3)).astype(np.float32)
    for cls, op in ((layers.MaxPooling1D, vdev.nn.max_pool1d),
                    (layers.AveragePooling1D, vdev.nn.avg_pool1d)):
        layer = cls()  # Keras's defaults: pool_size 2, strides the pool size, valid
        assert layer.pool_size == (2,) and layer.strides == (2,) and layer.padding == "valid"
        np.testing.assert_array_equal(layer(x).numpy(), op(x, 2, 2, "VALID").numpy())
        layer = cls(3, strides=2, padding="same")
        y = layer(x)
        assert y.shape == (2, 5, 3) == layer.compute_output_shape((2, 9, 3))
        np.testing.assert_array_equal(y.numpy(), op(x, 3, 2, "SAME").numpy())
        assert cls.from_config(layer.get_config()).get_config() == layer.get_config()
        with pytest.raises(ValueError, match='expected ndim=3, found ndim=4'):
            layer(np.zeros((1, 2, 9, 3), np.float32))
    assert layers.MaxPool1D is layers.MaxPooling1D and layers.AvgPool1D is layers.AveragePooling1D
    assert layers.Convolution1D is layers.Conv1D
    assert layers.SeparableConvolution2D is layers.SeparableConv2D
    assert layers.MaxPooling1D().name.startswith("max_pooling1d")


def test_layer_configs_and_from_config():
    c1 = layers.Conv1D(4, 3, strides=2, padding="causal", activation="tanh", seed=9,
                       input_shape=(10, 2))
    c = c1.get_config()
    assert (c["kernel_size"], c["strides"], c["dilation_rate"], c["padding"]) == \
        ((3,), (2,), (1,), "causal")
    again = layers.Conv1D.from_config(c)
    assert again.get_config() == c
    sep = layers.SeparableConv2D(5, 3, padding="same", depth_multiplier=2, seed=3,
                                 input_shape=(6, 6, 3))
    c = sep.get_config()
    for k in ("kernel_initializer", "kernel_regularizer", "kernel_constraint"):
        assert k not in c
    assert c["depth_multiplier"] == 2 and c["filters"] == 5
    assert layers.SeparableConv2D.from_config(c).get_config() == c


def test_keras_argument_errors():
    cases = [
        (lambda: layers.Conv1D(2, (3, 3)),
         "The `kernel_size` argument must be a tuple of 1 integers. Received: "
         "kernel_size=(3, 3)"),
        (lambda: layers.Conv1D(2, 0),
         "The `kernel_size` argument must be a tuple of 1 integers. Received: kernel_size=0 "
         "including {0} that does not satisfy the requirement `> 0`."),
        (lambda: layers.Conv1D(2, 3, strides=0),
         "The argument `strides` cannot contains 0(s). Received: (0,)"),
        (lambda: layers.Conv1D(2, 3, strides=2, dilation_rate=2),
         "`strides > 1` not supported in conjunction with `dilation_rate > 1`. Received: "
         "strides=(2,) and dilation_rate=(2,)"),
        (lambda: layers.Conv1D(0, 3),
         "Invalid value for argument `filters`. Expected a strictly positive value. Received "
         "filters=0."),
        (lambda: layers.Conv1D(2, 3, padding="full"),
         'The `padding` argument must be a list/tuple or one of "valid", "same" (or "causal", '
         "only for `Conv1D). Received: full"),
        (lambda: layers.Conv1D(2, 3, groups=2), "vdev's Conv1D takes groups=1 only, not 2"),
        (lambda: layers.SeparableConv2D(2, 3, padding="causal"),
         "Causal padding is only supported for `Conv1D` and `SeparableConv1D`."),
        (lambda: layers.SeparableConv2D(2, 3, depth_multiplier=0),
         "vdev's SeparableConv2D takes an int depth_multiplier >= 1, not 0"),
        (lambda: layers.SeparableConv2D(2, 3, pointwise_constraint="non_neg"),
         "vdev's SeparableConv2D takes pointwise_constraint=None only, not 'non_neg'"),
        (lambda: layers.MaxPooling1D((2, 2)),
         "The `pool_size` argument must be a tuple of 1 integers. Received: pool_size=(2, 2)"),
        (lambda: layers.AveragePooling1D(2, data_format="channels_first"),
         "vdev's AveragePooling1D takes data_format=None or 'channels_last' only, not "
         "'channels_first': vdev's convolutions are NHWC"),
    ]
    for make, msg in cases:
        with pytest.raises(ValueError) as e:
            make()
        assert str(e.value) == msg
    layer = layers.Conv1D(2, 3, name="c")
    with pytest.raises(ValueError) as e:
        layer(np.zeros((2, 3), np.float32))
    assert str(e.value) == ('Input 0 of layer "c" is incompatible with the layer: expected '
                            "min_ndim=3, found ndim=2. Full shape received: (2, 3)")
    layer(np.zeros((1, 5, 3), np.float32))
    with pytest.raises(ValueError) as e:
        layer(np.zeros((1, 5, 4), np.float32))
    assert str(e.value) == ('Input 0 of layer "c" is incompatible with the layer: expected '
                            "axis -1 of input shape to have value 3, but received input with "
                            "shape (1, 5, 4)")


def test_separable_layer_against_torch_and_its_weights():
    x = rng.uniform(-1, 1, (2, 7, 6, 3)).astype(np.float32)
    layer = layers.SeparableConv2D(4, (3, 2), strides=2, padding="same", depth_multiplier=2,
                                   activation="relu", bias_initializer="random_uniform", seed=5)
    xv = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = layer(xv)
        r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
        loss = vdev.reduce_sum(y * r)
    grads = tape.gradient(loss, layer.trainable_variables + [xv])
    assert [v.name for v in layer.weights] == ["%s/%s" % (layer.name, k) for k in
                                               ("depthwise_kernel", "pointwise_kernel", "bias")]
    assert [tuple(v.shape) for v in layer.weights] == [(3, 2, 3, 2), (1, 1, 6, 4), (4,)]
    assert layer.count_params() == 3 * 2 * 3 * 2 + 6 * 4 + 4
    # the two kernels are drawn from different seeds
    assert not np.allclose(layer.depthwise_kernel.numpy().ravel()[:6],
                           layer.pointwise_kernel.numpy().ravel()[:6])
    ts = [torch.tensor(v.numpy(), dtype=torch.float64, requires_grad=True)
          for v in layer.weights] + [torch.tensor(x, dtype=torch.float64, requires_grad=True)]
    _, t, b = tf_pads(7, 3, 2, "SAME")
    _, lf, rt = tf_pads(6, 2, 2, "SAME")
    mid = F.conv2d(F.pad(ts[3].permute(0, 3, 1, 2), (lf, rt, t, b)),
                   ts[0].permute(2, 3, 0, 1).reshape(6, 1, 3, 2), stride=2, groups=3)
    ty = torch.relu(F.conv2d(mid, ts[1].permute(3, 2, 0, 1)).permute(0, 2, 3, 1) + ts[2])
    assert y.shape == tuple(ty.shape) == layer.compute_output_shape((2, 7, 6, 3))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    want = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), ts)
    for got, wt in zip(grads, want):
        np.testing.assert_allclose(got.numpy(), wt.numpy(), rtol=1e-5, atol=1e-5)
    no_bias = layers.SeparableConv2D(2, 3, use_bias=False, seed=1)
    no_bias(x)
    assert no_bias.bias is None and len(no_bias.weights) == 2


def test_in_sequential_and_functional_models_trained_on_cpu_and_gpu():
    x = rng.uniform(-1, 1, (8, 12, 2)).astype(np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)

    def train(dev):
        with vdev.device(dev):
            model = vdev.models.Sequential([
                layers.Conv1D(4, 3, padding="causal", activation="relu", input_shape=(12, 2),
                              seed=1),
                layers.MaxPooling1D(2), layers.Conv1D(4, 3, activation="relu", seed=2),
                layers.AveragePooling1D(2, padding="same"), layers.Flatten(),
                layers.Dense(3, seed=3)])
            assert model.layers[0].built and model.layers[5].kernel.shape == (2 * 4, 3)
            opt = vdev.optimizers.Adam(learning_rate=0.03)
            ce = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
            losses = []
            for _ in range(20):
                with vdev.GradientTape() as tape:
                    loss = ce(labels, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                losses.append(float(loss))
        assert model.layers[0].kernel.device.endswith(dev)
        return losses

    cpu, gpu = train("CPU:0"), train("GPU:1")
    assert cpu[-1] < 0.8 * cpu[0]
    assert cpu == gpu
    inp = vdev.Input((6, 6, 3))
    out = layers.Dense(2)(layers.Flatten()(layers.SeparableConv2D(4, 3, padding="same")(inp)))
    fm = vdev.models.Model(inp, out)
    assert fm(np.zeros((2, 6, 6, 3), np.float32)).shape == (2, 2)
    assert fm.count_params() == (27 + 12 + 4) + (6 * 6 * 4 * 2 + 2)
    seq_in = vdev.Input((10, 3))
    seq = vdev.models.Model(seq_in, layers.GlobalAveragePooling1D()(
        layers.Conv1D(5, 3)(seq_in)))
    assert seq(np.zeros((4, 10, 3), np.float32)).shape == (4, 5)
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 3"):
        vdev.models.Sequential([layers.Conv1D(2, 3, input_shape=(8, 3)), layers.Flatten()]
                               ).layers[0](np.zeros((1, 8, 2), np.float32))


def test_fit_under_a_mirrored_strategy_keeps_replicas_equal_and_matches_one_device():
    """Conv1D (causal), MaxPooling1D and SeparableConv2D models made under a
    MirroredStrategy's scope: their weights are MirroredVariables whose copies
    stay bit-identical through fit, and end within float rounding of the same
    fit on one device (the global batch's mean loss either way)."""
    r = np.random.default_rng(7)
    x1 = r.uniform(-1, 1, (8, 12, 2)).astype(np.float32)
    x2 = r.uniform(-1, 1, (8, 6, 6, 2)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)

    def models():
        return [(vdev.models.Sequential([
                    layers.Conv1D(4, 3, padding="causal", activation="relu",
                                  input_shape=(12, 2), seed=1),
                    layers.MaxPooling1D(2), layers.Flatten(), layers.Dense(3, seed=2)]), x1),
                (vdev.models.Sequential([
                    layers.SeparableConv2D(4, 3, padding="same", depth_multiplier=2,
                                           activation="relu", input_shape=(6, 6, 2), seed=3),
                    layers.Flatten(), layers.Dense(3, seed=4)]), x2)]

    def compiled():
        pairs = models()
        for m, _ in pairs:
            m.compile(vdev.optimizers.SGD(0.1),
                      vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
        return pairs

    def fit(pairs):
        for m, x in pairs:
            m.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
        return pairs

    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():  # the models and their optimizers, as Keras wants them
        mirrored = compiled()
    fit(mirrored)
    with vdev.device("GPU:2"):
        alone = fit(compiled())
    for (m, _), (a, _) in zip(mirrored, alone):
        for v, w in zip(m.trainable_variables, a.trainable_variables):
            copies = [c.numpy().tobytes() for c in v.values]
            assert len(copies) == 2 and len(set(copies)) == 1
            np.testing.assert_allclose(v.values[0].numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


def test_models_of_the_new_layers_round_trip(tmp_path):
    """Sequential.get_config / from_config and clone_model make the layers
    again by their class names; save_weights / load_weights carry their
    weights (the separable layer's three) bit for bit."""
    def model(seed):
        return vdev.models.Sequential([
            layers.Conv1D(3, 2, padding="causal", input_shape=(8, 2), seed=seed),
            layers.AveragePooling1D(2), layers.MaxPool1D(2, padding="same"),
            layers.Reshape((2, 1, 3)),
            layers.SeparableConv2D(4, (2, 1), padding="same", depth_multiplier=2,
                                   seed=seed + 1),
            layers.Flatten(), layers.Dense(2, seed=seed + 2)])
    m = model(1)
    x = np.random.default_rng(5).uniform(-1, 1, (3, 8, 2)).astype(np.float32)
    want = m(x).numpy()
    again = vdev.models.Sequential.from_config(m.get_config())
    assert [type(l).__name__ for l in again.layers] == [type(l).__name__ for l in m.layers]
    assert again.get_config() == m.get_config()
    clone = vdev.models.clone_model(m)
    assert [type(l).__name__ for l in clone.layers] == [type(l).__name__ for l in m.layers]
    path = str(tmp_path / "w.safetensors")
    m.save_weights(path)
    other = model(11)
    assert not np.array_equal(other(x).numpy(), want)
    other.load_weights(path)
    np.testing.assert_array_equal(other(x).numpy(), want)
    assert m.count_params() == (2 * 2 * 3 + 3) + (2 * 3 * 2 + 6 * 4 + 4) + (2 * 4 * 2 + 2)


def test_separable_conv1d_against_torch():
    x = rng.uniform(-1, 1, (2, 9, 3)).astype(np.float32)
    for padding, s, d in (("valid", 2, 1), ("same", 1, 2), ("causal", 1, 2), ("causal", 2, 1)):
        layer = layers.SeparableConv1D(4, 3, strides=s, padding=padding, dilation_rate=d,
                                       depth_multiplier=2, activation="relu",
                                       bias_initializer="random_uniform", seed=6)
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            y = layer(xv)
            r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
            loss = vdev.reduce_sum(y * r)
        grads = tape.gradient(loss, layer.trainable_variables + [xv])
        assert [v.name for v in layer.weights] == ["%s/%s" % (layer.name, k) for k in
                                                   ("depthwise_kernel", "pointwise_kernel",
                                                    "bias")]
        assert [tuple(v.shape) for v in layer.weights] == [(3, 3, 2), (1, 6, 4), (4,)]
        ts = [torch.tensor(v.numpy(), dtype=torch.float64, requires_grad=True)
              for v in layer.weights] + [torch.tensor(x, dtype=torch.float64,
                                                      requires_grad=True)]
        xt = ts[3].permute(0, 2, 1)
        if padding == "causal":
            xt = F.pad(xt, (2 * d, 0))
        else:
            _, left, right = tf_pads(9, 3, s, padding.upper(), d)
            xt = F.pad(xt, (left, right))
        mid = F.conv1d(xt, ts[0].permute(1, 2, 0).reshape(6, 1, 3), stride=s, dilation=d,
                       groups=3)
        ty = torch.relu(F.conv1d(mid, ts[1].permute(2, 1, 0)).permute(0, 2, 1) + ts[2])
        assert y.shape == tuple(ty.shape) == layer.compute_output_shape((2, 9, 3))
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
        want = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), ts)
        for got, wt in zip(grads, want):
            np.testing.assert_allclose(got.numpy(), wt.numpy(), rtol=1e-5, atol=1e-5)
    # a batch of two dimensions, row by row the same
    layer = layers.SeparableConv1D(2, 2, padding="same", seed=1)
    x4 = rng.uniform(-1, 1, (2, 3, 6, 3)).astype(np.float32)
    y4 = layer(x4)
    assert y4.shape == (2, 3, 6, 2) == layer.compute_output_shape((2, 3, 6, 3))
    np.testing.assert_array_equal(y4.numpy().reshape(6, 6, 2),
                                  layer(x4.reshape(6, 6, 3)).numpy())
    c = layers.SeparableConv1D(3, 2, padding="causal", depth_multiplier=2, seed=2).get_config()
    assert (c["kernel_size"], c["padding"], c["depth_multiplier"]) == ((2,), "causal", 2)
    assert layers.SeparableConv1D.from_config(c).get_config() == c
    assert layers.SeparableConvolution1D is layers.SeparableConv1D
    with pytest.raises(ValueError) as e:
        layers.SeparableConv1D(2, (3, 3))
    assert str(e.value) == ("The `kernel_size` argument must be a tuple of 1 integers. "
                            "Received: kernel_size=(3, 3)")


def torch_conv1d_transpose(x, f, out_w, s, d, padding):
    """x [N,W,O], f [K,C,O] as TensorFlow's conv1d_transpose into width
    out_w: torch's full transposed convolution, cut where TensorFlow's
    Conv2D of the output would pad before (SAME) or not (VALID)."""
    full = F.conv_transpose1d(x.permute(0, 2, 1), f.permute(2, 1, 0), stride=s, dilation=d)
    before = tf_pads(out_w, f.shape[0], s, padding, d)[1]
    y = full[:, :, before:before + out_w]
    if y.shape[2] < out_w:  # VALID's rows no window reaches
        y = F.pad(y, (0, out_w - y.shape[2]))
    return y.permute(0, 2, 1)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_conv1d_transpose_against_torch(dev):
    for (n, w, o, k, c, s, d, padding, out_w) in ((2, 5, 3, 3, 4, 2, 1, "SAME", 10),
                                                  (2, 5, 3, 3, 4, 2, 1, "SAME", 9),
                                                  (1, 4, 2, 2, 3, 3, 1, "VALID", 12),
                                                  (2, 6, 2, 3, 2, 1, 2, "VALID", 10)):
        x = rng.uniform(-1, 1, (n, w, o)).astype(np.float32)
        f = rng.uniform(-1, 1, (k, c, o)).astype(np.float32)
        with vdev.device(dev):
            xv, fv = vdev.Variable(x), vdev.Variable(f)
            with vdev.GradientTape() as tape:
                y = vdev.nn.conv1d_transpose(xv, fv, [n, out_w, c], s, padding, dilations=d)
                r = rng.uniform(-1, 1, (n, out_w, c)).astype(np.float32)
                loss = vdev.reduce_sum(y * r)
            gx, gf = tape.gradient(loss, [xv, fv])
        assert y.device.endswith(dev) and y.shape == (n, out_w, c)
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        ft = torch.tensor(f, dtype=torch.float64, requires_grad=True)
        ty = torch_conv1d_transpose(xt, ft, out_w, s, d, padding)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
        tgx, tgf = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(),
                                       [xt, ft])
        np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gf.numpy(), tgf.numpy(), rtol=1e-5, atol=1e-5)
    x = np.zeros((1, 4, 2), np.float32)
    f = np.zeros((3, 3, 2), np.float32)
    with pytest.raises(ValueError) as e:
        vdev.nn.conv1d_transpose(x, f, [1, 8], 2)
    assert str(e.value) == "`output_shape` must be of shape [3]. Received: shape=(2,)"
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="Conv2DSlowBackpropInput: Size of out_backprop doesn't match "
                             "computed: actual = 4, computed = 5"):
        vdev.nn.conv1d_transpose(x, f, [1, 9, 3], 2)


def test_conv1d_transpose_layer():
    x = rng.uniform(-1, 1, (2, 5, 3)).astype(np.float32)
    for kw, want_w in (({"strides": 2, "padding": "same"}, 10),
                       ({"strides": 2}, 11),
                       ({"strides": 2, "output_padding": 1}, 12),
                       ({"padding": "same", "dilation_rate": 2}, 5)):
        layer = layers.Conv1DTranspose(4, 3, activation="relu",
                                       bias_initializer="random_uniform", seed=3, **kw)
        y = layer(x)
        assert y.shape == (2, want_w, 4) == layer.compute_output_shape((2, 5, 3))
        assert layer.kernel.shape == (3, 4, 3) and layer.bias.shape == (4,)
        s, d = layer.strides[0], layer.dilation_rate[0]
        want = vdev.nn.relu(vdev.nn.conv1d_transpose(
            x, layer.kernel, [2, want_w, 4], s, layer.padding.upper(), dilations=d) + layer.bias)
        np.testing.assert_array_equal(y.numpy(), want.numpy())
        c = layer.get_config()
        assert layers.Conv1DTranspose.from_config(c).get_config() == c
    cases = [
        (lambda: layers.Conv1DTranspose(2, 3, strides=2, output_padding=2),
         "Strides must be greater than output padding. Received strides=(2,), "
         "output_padding=(2,)."),
        (lambda: layers.Conv1DTranspose(2, 3, output_padding=(1, 1)),
         "The `output_padding` argument must be a tuple of 1 integers. Received: "
         "output_padding=(1, 1)"),
        (lambda: layers.Conv1DTranspose(2, 3, input_shape=(5, None)),
         "The channel dimension of the inputs to `Conv1DTranspose` should be defined. The "
         "input_shape received is (None, 5, None), where axis 2 (0-based) is the channel "
         "dimension, which found to be `None`."),
        (lambda: layers.Conv1DTranspose(2, 3).compute_output_shape((1, 2, 5, 3)),
         "Inputs should have rank 3. Received input_shape=(1, 2, 5, 3)."),
    ]
    for make, msg in cases:
        with pytest.raises(ValueError) as e:
            make()
        assert str(e.value) == msg
    model = vdev.models.Sequential([layers.Conv1DTranspose(3, 3, strides=2, padding="same",
                                                           input_shape=(4, 2), seed=1),
                                    layers.Conv1D(1, 3, padding="same", seed=2)])
    assert model.output_shape == (None, 8, 1)
