"""vdev.pad as tf.pad (CONSTANT, REFLECT and SYMMETRIC modes) against
numpy's pad (modes "constant", "reflect" and "symmetric") for float32 and
int32 tensors of every rank, on the CPU and a simulated GPU, its gradient,
and TensorFlow's refusals in its words; the explicit padding of
vdev.nn.conv2d and depthwise_conv2d against torch (values and gradients)
with TensorFlow's checks; Keras 2.11's ZeroPadding1D and ZeroPadding2D:
values, shapes, configs, Keras's argument errors, and in a model that
trains."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev
from vdev import layers
from vdev.errors import InvalidArgumentError, UnimplementedError

rng = np.random.default_rng(20261207)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_pad_against_numpy(dev):
    for shape in ((5,), (2, 3), (2, 3, 4), (2, 1, 3, 2), (0, 3)):
        for dtype, value in ((np.float32, 0.0), (np.float32, -2.5), (np.int32, 7)):
            x = (rng.uniform(-9, 9, shape)).astype(dtype)
            pads = rng.integers(0, 3, (len(shape), 2))
            with vdev.device(dev):
                t = vdev.constant(x)
            y = vdev.pad(t, pads, constant_values=value)
            assert y.device.endswith(dev)
            assert y.dtype is (vdev.float32 if dtype == np.float32 else vdev.int32)
            want = np.pad(x, pads, constant_values=value)
            np.testing.assert_array_equal(y.numpy(), want)
    # the paddings as an int32 tensor, the mode in any case, a 0-d tensor as the value
    y = vdev.pad([[1.0, 2.0]], vdev.constant([[1, 0], [0, 2]], dtype=vdev.int32),
                 mode="constant", constant_values=vdev.constant(3.0))
    np.testing.assert_array_equal(y.numpy(), [[3, 3, 3, 3], [1, 2, 3, 3]])
    # nothing to pad: a copy of the tensor, not the tensor
    v = vdev.Variable([1.0, 2.0])
    y = vdev.pad(v, [[0, 0]])
    v.assign([5.0, 6.0])
    np.testing.assert_array_equal(y.numpy(), [1.0, 2.0])
    s = vdev.pad(vdev.constant(4.0), np.zeros((0, 2), np.int32))
    assert s.shape == () and float(s) == 4.0


def test_pad_gradient_is_the_inputs_part():
    x = vdev.Variable(rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32))
    pads = [[1, 0], [0, 2], [3, 1]]
    r = rng.uniform(-1, 1, (3, 5, 8)).astype(np.float32)
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(vdev.pad(x, pads, constant_values=1.0) * r)
    g = tape.gradient(loss, x)
    np.testing.assert_array_equal(g.numpy(), r[1:3, 0:3, 3:7])


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_mirror_pad_against_numpy(dev):
    for shape in ((5,), (2, 3), (3, 4, 2), (2, 3, 4, 2), (0, 3)):
        for mode in ("REFLECT", "SYMMETRIC"):
            bound = [n - 1 if mode == "REFLECT" else n for n in shape]
            if min(bound) < 0:
                continue  # REFLECT refuses an empty axis, as TensorFlow's kernel
            for dtype in (np.float32, np.int32):
                x = rng.uniform(-9, 9, shape).astype(dtype)
                pads = np.array([[rng.integers(0, b + 1), rng.integers(0, b + 1)]
                                 for b in bound])
                with vdev.device(dev):
                    t = vdev.constant(x)
                y = vdev.pad(t, pads, mode=mode.lower(), constant_values=5)
                assert y.device.endswith(dev) and y.dtype is vdev.as_dtype(dtype)
                want = np.pad(x, pads, mode=mode.lower())
                np.testing.assert_array_equal(y.numpy(), want)
    # TensorFlow's examples
    t = [[1, 2, 3], [4, 5, 6]]
    np.testing.assert_array_equal(vdev.pad(t, [[1, 1], [2, 2]], "REFLECT").numpy(),
                                  [[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1],
                                   [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]])
    np.testing.assert_array_equal(vdev.pad(t, [[1, 1], [2, 2]], "SYMMETRIC").numpy(),
                                  [[2, 1, 1, 2, 3, 3, 2], [2, 1, 1, 2, 3, 3, 2],
                                   [5, 4, 4, 5, 6, 6, 5], [5, 4, 4, 5, 6, 6, 5]])


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad_gradient_folds_back(mode):
    """The gradient adds each mirrored entry's gradient onto the entry it
    copies (TensorFlow's MirrorPadGrad): numpy's pad of the indices says
    which; the output's gradient in quarters, so every order of sums is
    exact."""
    shape, pads = (3, 4, 2), [[2, 1], [0, 3], [1, 1]]
    src = np.pad(np.arange(24).reshape(shape), pads, mode=mode.lower())
    r = (rng.integers(-40, 40, src.shape) / 4).astype(np.float32)
    want = np.zeros(24)
    np.add.at(want, src.reshape(-1), r.reshape(-1))
    for dev in ("CPU:0", "GPU:1"):
        with vdev.device(dev):
            x = vdev.Variable(rng.uniform(-1, 1, shape).astype(np.float32))
            with vdev.GradientTape() as tape:
                loss = vdev.reduce_sum(vdev.pad(x, pads, mode) * r)
            g = tape.gradient(loss, x)
        np.testing.assert_array_equal(g.numpy(), want.reshape(shape).astype(np.float32))


def test_pad_refusals():
    x = np.zeros((2, 3), np.float32)
    cases = [
        (lambda: vdev.pad(x, [1, 2]), InvalidArgumentError,
         "paddings must be a matrix with 2 columns: [2]"),
        (lambda: vdev.pad(x, [[1, 2, 3]]), InvalidArgumentError,
         "paddings must be a matrix with 2 columns: [1,3]"),
        (lambda: vdev.pad(x, [[1, 2]]), InvalidArgumentError,
         "Pad: The first dimension of paddings must be the rank of inputs[1,2], [2,3]"),
        (lambda: vdev.pad(x, [[0, 0], [-1, 0]]), InvalidArgumentError,
         "Pad: Paddings must be non-negative: -1 0"),
        (lambda: vdev.pad(x, [[0.5, 0], [0, 0]]), InvalidArgumentError,
         "Value for attr 'Tpaddings' of float is not in the list of allowed values: int32, "
         "int64"),
        (lambda: vdev.pad(x, [[0, 0], [0, 3]], mode="reflect"), InvalidArgumentError,
         "MirrorPad: paddings must be less than the dimension size: 0, 3 not less than 3"),
        (lambda: vdev.pad(x, [[3, 0], [0, 0]], mode="Symmetric"), InvalidArgumentError,
         "MirrorPad: paddings must be no greater than the dimension size: 3, 0 greater than 2"),
        (lambda: vdev.pad(x, [[0, 0], [0, -1]], mode="SYMMETRIC"), InvalidArgumentError,
         "MirrorPad: paddings must be non-negative: 0 -1"),
        (lambda: vdev.pad(x, [[0, 0]], mode="REFLECT"), InvalidArgumentError,
         "MirrorPad: The first dimension of paddings must be the rank of inputs[1,2], [2,3]"),
        (lambda: vdev.pad(x, [[0, 0], [0, 0]], mode="wrap"), ValueError,
         'Value of argument `mode` expected to be one of "CONSTANT", "REFLECT", or '
         '"SYMMETRIC". Received `mode` = WRAP'),
        (lambda: vdev.pad(x, [[0, 0], [0, 0]], constant_values=[1, 2]), InvalidArgumentError,
         "constant_values must be a scalar. Shape of constant_values is [2]"),
        (lambda: vdev.pad(vdev.constant([1], dtype=vdev.int32), [[1, 1]], constant_values=0.5),
         TypeError, "Cannot convert 0.5 to EagerTensor of dtype int32"),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == msg


# ---- explicit padding of the convolutions ----

def torch_explicit(x, f, pads, s, depthwise=False):
    xt = F.pad(x.permute(0, 3, 1, 2), (pads[2][0], pads[2][1], pads[1][0], pads[1][1]))
    if depthwise:
        c, m = f.shape[2], f.shape[3]
        y = F.conv2d(xt, f.permute(2, 3, 0, 1).reshape(c * m, 1, f.shape[0], f.shape[1]),
                     stride=s, groups=c)
    else:
        y = F.conv2d(xt, f.permute(3, 2, 0, 1), stride=s)
    return y.permute(0, 2, 3, 1)


@pytest.mark.parametrize("depthwise", [False, True])
def test_explicit_padding_against_torch(depthwise):
    for dev, s, pads in (("CPU:0", 1, [[0, 0], [1, 2], [0, 1], [0, 0]]),
                         ("GPU:1", 2, [[0, 0], [3, 0], [2, 2], [0, 0]])):
        x = rng.uniform(-1, 1, (2, 5, 6, 3)).astype(np.float32)
        f = rng.uniform(-1, 1, (3, 2, 3, 2 if depthwise else 4)).astype(np.float32)
        with vdev.device(dev):
            xv, fv = vdev.Variable(x), vdev.Variable(f)
            with vdev.GradientTape() as tape:
                if depthwise:
                    y = vdev.nn.depthwise_conv2d(xv, fv, [1, s, s, 1], pads)
                else:
                    y = vdev.nn.conv2d(xv, fv, s, pads)
                r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
                loss = vdev.reduce_sum(y * r)
            gx, gf = tape.gradient(loss, [xv, fv])
        assert y.device.endswith(dev)
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        ft = torch.tensor(f, dtype=torch.float64, requires_grad=True)
        ty = torch_explicit(xt, ft, pads, s, depthwise)
        assert y.shape == tuple(ty.shape)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
        tgx, tgf = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(),
                                       [xt, ft])
        np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gf.numpy(), tgf.numpy(), rtol=1e-5, atol=1e-5)
    # SAME is an explicit padding of TensorFlow's split: the same bits
    x = rng.uniform(-1, 1, (1, 6, 6, 2)).astype(np.float32)
    f = rng.uniform(-1, 1, (3, 3, 2, 2)).astype(np.float32)
    op = ((lambda p: vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], p)) if depthwise else
          (lambda p: vdev.nn.conv2d(x, f, 1, p)))
    np.testing.assert_array_equal(op("SAME").numpy(),
                                  op([[0, 0], [1, 1], [1, 1], [0, 0]]).numpy())


def test_explicit_padding_refusals():
    x = np.zeros((1, 4, 4, 2), np.float32)
    f = np.zeros((3, 3, 2, 2), np.float32)
    cases = [
        (lambda: vdev.nn.conv2d(x, f, 1, [[0, 0], [1, 1], [1, 1]]), ValueError,
         "When `padding` is a list, it must be of size 4. Received: padding=[[0, 0], [1, 1], "
         "[1, 1]] of size 3"),
        (lambda: vdev.nn.conv2d(x, f, 1, [[0, 0], [1, 1, 1], [1, 1], [0, 0]]), ValueError,
         "When `padding` is a list, each element of `padding` must be a list/tuple of size 2. "
         "Received: padding=[[0, 0], [1, 1, 1], [1, 1], [0, 0]] with element at index 1 of "
         "size 3"),
        (lambda: vdev.nn.conv2d(x, f, 1, [0, 1, 1, 0]), ValueError,
         "When `padding` is a list, each element of `padding` must be a list/tuple of size 2. "
         "Received: padding=[0, 1, 1, 0] with element at index 0 of type <class 'int'>"),
        (lambda: vdev.nn.conv2d(x, f, 1, [[1, 0], [1, 1], [1, 1], [0, 0]]),
         InvalidArgumentError,
         "Conv2D: Nonzero explicit padding in the batch or depth dimensions is not supported"),
        (lambda: vdev.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], [[0, 0], [1, -1], [1, 1], [0, 0]]),
         InvalidArgumentError,
         "DepthwiseConv2dNative: All elements of explicit_paddings must be nonnegative"),
        (lambda: vdev.nn.max_pool2d(x, 2, 2, [[0, 0], [1, 1], [1, 1], [0, 0]]),
         UnimplementedError,
         "vdev.nn.max_pool2d: explicit padding (a list) is not supported; use \"SAME\" or "
         "\"VALID\""),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == msg


# ---- the Keras layers ----

def test_zero_padding_layers():
    x = rng.uniform(-1, 1, (2, 4, 5, 3)).astype(np.float32)
    for padding, want in ((1, ((1, 1), (1, 1))), ((2, 0), ((2, 2), (0, 0))),
                          (((1, 2), (0, 3)), ((1, 2), (0, 3)))):
        layer = layers.ZeroPadding2D(padding)
        assert layer.padding == want
        y = layer(x)
        np.testing.assert_array_equal(y.numpy(), np.pad(x, ((0, 0),) + want + ((0, 0),)))
        assert y.shape == layer.compute_output_shape((2, 4, 5, 3))
        assert layer.compute_output_shape((None, None, 5, 3))[1] is None
        assert layers.ZeroPadding2D.from_config(layer.get_config()).padding == want
    seq = x[:, 0]
    for padding, want in ((2, (2, 2)), ((0, 3), (0, 3))):
        layer = layers.ZeroPadding1D(padding)
        assert layer.padding == want
        y = layer(seq)
        np.testing.assert_array_equal(y.numpy(), np.pad(seq, ((0, 0), want, (0, 0))))
        assert y.shape == layer.compute_output_shape((2, 5, 3))
        assert layer.get_config()["padding"] == want
    assert layers.ZeroPadding2D().name.startswith("zero_padding2d")


def test_zero_padding_keras_errors():
    cases = [
        (lambda: layers.ZeroPadding2D((1, 2, 3)), "`padding` should have two elements. "
                                                  "Received: (1, 2, 3)."),
        (lambda: layers.ZeroPadding2D(((1,), 2)),
         "The `1st entry of padding` argument must be a tuple of 2 integers. Received: 1st "
         "entry of padding=(1,)"),
        (lambda: layers.ZeroPadding2D((1, -1)),
         "The `2nd entry of padding` argument must be a tuple of 2 integers. Received: 2nd "
         "entry of padding=-1 including {-1} that does not satisfy the requirement `>= 0`."),
        (lambda: layers.ZeroPadding2D(1.5),
         "`padding` should be either an int, a tuple of 2 ints (symmetric_height_pad, "
         "symmetric_width_pad), or a tuple of 2 tuples of 2 ints ((top_pad, bottom_pad), "
         "(left_pad, right_pad)). Received: 1.5."),
        (lambda: layers.ZeroPadding1D((1, 2, 3)),
         "The `padding` argument must be a tuple of 2 integers. Received: padding=(1, 2, 3)"),
        (lambda: layers.ZeroPadding2D(data_format="channels_first"),
         "vdev's ZeroPadding2D takes data_format=None or 'channels_last' only, not "
         "'channels_first': vdev's convolutions are NHWC"),
    ]
    for make, msg in cases:
        with pytest.raises(ValueError) as e:
            make()
        assert str(e.value) == msg
    layer = layers.ZeroPadding1D(1, name="zp")
    with pytest.raises(ValueError) as e:
        layer(np.zeros((2, 3), np.float32))
    assert str(e.value) == ('Input 0 of layer "zp" is incompatible with the layer: expected '
                            "ndim=3, found ndim=2. Full shape received: (2, 3)")


def test_zero_padding_in_a_model_that_trains():
    x = rng.uniform(-1, 1, (8, 5, 5, 2)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    model = vdev.models.Sequential([
        layers.ZeroPadding2D(1, input_shape=(5, 5, 2)),
        layers.Conv2D(4, 3, activation="relu", seed=1),
        layers.Reshape((25, 4)), layers.ZeroPadding1D((2, 0)),
        layers.Conv1D(3, 3, seed=2), layers.Flatten(), layers.Dense(3, seed=3)])
    assert model.layers[1].built and model.layers[6].kernel.shape == (25 * 3, 3)
    model.compile(vdev.optimizers.Adam(0.01),
                  vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(x, y, batch_size=8, epochs=15, verbose=0)
    loss = hist.history["loss"]
    assert loss[-1] < 0.5 * loss[0]
    again = vdev.models.Sequential.from_config(model.get_config())
    assert [type(l).__name__ for l in again.layers] == [type(l).__name__ for l in model.layers]


def test_cropping_layers():
    x = rng.uniform(-1, 1, (2, 5, 6, 3)).astype(np.float32)
    for cropping, want in ((1, ((1, 1), (1, 1))), ((2, 0), ((2, 2), (0, 0))),
                           (((1, 2), (0, 3)), ((1, 2), (0, 3)))):
        layer = layers.Cropping2D(cropping)
        assert layer.cropping == want
        y = layer(x)
        np.testing.assert_array_equal(
            y.numpy(), x[:, want[0][0]:5 - want[0][1], want[1][0]:6 - want[1][1]])
        assert y.shape == layer.compute_output_shape((2, 5, 6, 3))
        assert layers.Cropping2D.from_config(layer.get_config()).cropping == want
    assert layers.Cropping2D().cropping == ((0, 0), (0, 0))
    assert layers.Cropping2D(1).compute_output_shape((None, 0, None, 3)) == (None, None, None, 3)
    seq = x[:, 0]
    for cropping, want in ((2, (2, 2)), ((0, 3), (0, 3))):
        layer = layers.Cropping1D(cropping)
        y = layer(seq)
        np.testing.assert_array_equal(y.numpy(), seq[:, want[0]:6 - want[1]])
        assert y.shape == layer.compute_output_shape((2, 6, 3))
        assert layer.get_config()["cropping"] == want
    assert layers.Cropping1D().cropping == (1, 1)
    # the gradient: the output's where the input was kept, zeros where it was cut
    xv = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = layers.Cropping2D(((1, 0), (2, 1)))(xv)
        r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
        loss = vdev.reduce_sum(y * r)
    want = np.zeros_like(x)
    want[:, 1:, 2:5] = r
    np.testing.assert_array_equal(tape.gradient(loss, xv).numpy(), want)
    cases = [
        (lambda: layers.Cropping2D((1, 2, 3)), "`cropping` should have two elements. "
                                               "Received: (1, 2, 3)."),
        (lambda: layers.Cropping2D(2.5),
         "`cropping` should be either an int, a tuple of 2 ints (symmetric_height_crop, "
         "symmetric_width_crop), or a tuple of 2 tuples of 2 ints ((top_crop, bottom_crop), "
         "(left_crop, right_crop)). Received: 2.5."),
        (lambda: layers.Cropping1D(-1),
         "The `cropping` argument must be a tuple of 2 integers. Received: cropping=-1 "
         "including {-1} that does not satisfy the requirement `>= 0`."),
        (lambda: layers.Cropping1D(3)(seq),
         "cropping parameter of Cropping layer must be greater than the input shape. "
         "Received: inputs.shape=(2, 6, 3), and cropping=(3, 3)"),
        (lambda: layers.Cropping2D(((0, 0), (3, 3)))(x),
         "Argument `cropping` must be greater than the input shape. Received: "
         "inputs.shape=(2, 5, 6, 3), and cropping=((0, 0), (3, 3))"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
