"""vdev.nn.conv2d, max_pool2d and avg_pool2d as tf.nn has them (NHWC): values
and gradients (GradientTape) against torch on random shapes (odd sizes,
strides 1 and 2, both paddings, batches and channels above 1; dilated
convolutions too) on the CPU and a simulated GPU, SAME's padding split worked by hand, TensorFlow's argument
forms for strides and ksize, and the refusals (TensorFlow's errors, and what
vdev leaves out)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev

rng = np.random.default_rng(20261205)

CASES = [  # n, h, w, c, kh, kw, o, sh, sw
    (2, 7, 5, 3, 3, 2, 4, 1, 1),
    (3, 9, 8, 2, 3, 3, 5, 2, 2),
    (1, 6, 6, 4, 2, 2, 3, 2, 1),
    (2, 5, 5, 3, 5, 5, 2, 1, 2),
    (2, 5, 7, 5, 1, 1, 3, 2, 2),
]


def tf_pads(size, k, s, padding):
    """(out, before, after) of one dimension, TensorFlow's rule."""
    if padding == "VALID":
        return (size - k + s) // s, 0, 0
    out = (size + s - 1) // s
    total = max(0, (out - 1) * s + k - size)
    return out, total // 2, total - total // 2


def torch_pad(x, k, s, padding, value=0.0):
    """x NCHW padded as TensorFlow pads it (F.pad takes left, right, top, bottom)."""
    _, t, b = tf_pads(x.shape[2], k[0], s[0], padding)
    _, l, r = tf_pads(x.shape[3], k[1], s[1], padding)
    return F.pad(x, (l, r, t, b), value=value)


def torch_conv(x, f, s, padding):
    xt = x.permute(0, 3, 1, 2)
    y = F.conv2d(torch_pad(xt, f.shape[:2], s, padding), f.permute(3, 2, 0, 1), stride=s)
    return y.permute(0, 2, 3, 1)


def torch_pool(x, k, s, padding, kind):
    xt = x.permute(0, 3, 1, 2)
    if kind == "max":
        y = F.max_pool2d(torch_pad(xt, k, s, padding, -float("inf")), k, s)
    else:  # the sum of the elements inside over their count
        tot = F.avg_pool2d(torch_pad(xt, k, s, padding), k, s, divisor_override=1)
        ones = torch.ones_like(xt[:1, :1])
        cnt = F.avg_pool2d(torch_pad(ones, k, s, padding), k, s, divisor_override=1)
        y = tot / cnt
    return y.permute(0, 2, 3, 1)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("case", CASES)
def test_against_torch_values_and_gradients(dev, padding, case):
    n, h, w, c, kh, kw, o, sh, sw = case
    x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
    f = rng.uniform(-1, 1, (kh, kw, c, o)).astype(np.float32)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ft = torch.tensor(f, dtype=torch.float64, requires_grad=True)
    oh, ow = tf_pads(h, kh, sh, padding)[0], tf_pads(w, kw, sw, padding)[0]
    ry = rng.uniform(-1, 1, (n, oh, ow, o)).astype(np.float32)
    rm = rng.uniform(-1, 1, (n, oh, ow, c)).astype(np.float32)
    ra = rng.uniform(-1, 1, (n, oh, ow, c)).astype(np.float32)
    with vdev.device(dev):
        xv, fv = vdev.Variable(x), vdev.Variable(f)
        with vdev.GradientTape(persistent=True) as tape:
            y = vdev.nn.conv2d(xv, fv, [sh, sw], padding)
            mp = vdev.nn.max_pool2d(xv, (kh, kw), (sh, sw), padding)
            ap = vdev.nn.avg_pool2d(xv, [1, kh, kw, 1], [1, sh, sw, 1], padding)
            ly = vdev.reduce_sum(y * ry)
            lm = vdev.reduce_sum(mp * rm)
            la = vdev.reduce_sum(ap * ra)
        assert y.device.endswith(dev)
        gx, gf = tape.gradient(ly, [xv, fv])
        gm = tape.gradient(lm, xv)
        ga = tape.gradient(la, xv)
    ty = torch_conv(xt, ft, (sh, sw), padding)
    tm = torch_pool(xt, (kh, kw), (sh, sw), padding, "max")
    ta = torch_pool(xt, (kh, kw), (sh, sw), padding, "avg")
    for got, want in ((y, ty), (mp, tm), (ap, ta)):
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    tgx, tgf = torch.autograd.grad((ty * torch.tensor(ry, dtype=torch.float64)).sum(), [xt, ft])
    (tgm,) = torch.autograd.grad((tm * torch.tensor(rm, dtype=torch.float64)).sum(), [xt])
    (tga,) = torch.autograd.grad((ta * torch.tensor(ra, dtype=torch.float64)).sum(), [xt])
    for got, want in ((gx, tgx), (gf, tgf), (gm, tgm), (ga, tga)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


DILATED = [  # n, h, w, c, kh, kw, o, sh, sw, dh, dw
    (2, 9, 8, 3, 3, 2, 4, 1, 1, 2, 3),
    (1, 11, 10, 2, 2, 3, 3, 1, 1, 4, 2),
    (2, 12, 9, 3, 3, 3, 2, 2, 2, 2, 2),  # strides and dilations: the op allows both
    (2, 6, 7, 2, 1, 1, 3, 1, 1, 3, 3),  # 1x1: one tap, no wider
]


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("case", DILATED)
def test_dilated_against_torch_values_and_gradients(dev, padding, case):
    n, h, w, c, kh, kw, o, sh, sw, dh, dw = case
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1  # the windows' spans
    x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
    f = rng.uniform(-1, 1, (kh, kw, c, o)).astype(np.float32)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ft = torch.tensor(f, dtype=torch.float64, requires_grad=True)
    oh, ow = tf_pads(h, eh, sh, padding)[0], tf_pads(w, ew, sw, padding)[0]
    ry = rng.uniform(-1, 1, (n, oh, ow, o)).astype(np.float32)
    with vdev.device(dev):
        xv, fv = vdev.Variable(x), vdev.Variable(f)
        with vdev.GradientTape() as tape:
            y = vdev.nn.conv2d(xv, fv, [sh, sw], padding, dilations=[1, dh, dw, 1])
            ly = vdev.reduce_sum(y * ry)
        assert y.device.endswith(dev)
        gx, gf = tape.gradient(ly, [xv, fv])
    xp = torch_pad(xt.permute(0, 3, 1, 2), (eh, ew), (sh, sw), padding)
    ty = F.conv2d(xp, ft.permute(3, 2, 0, 1), stride=(sh, sw), dilation=(dh, dw))
    ty = ty.permute(0, 2, 3, 1)
    assert y.shape == tuple(ty.shape) == (n, oh, ow, o)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    tgx, tgf = torch.autograd.grad((ty * torch.tensor(ry, dtype=torch.float64)).sum(), [xt, ft])
    for got, want in ((gx, tgx), (gf, tgf)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_dilations_forms_and_refusals():
    x, f = vdev.ones([1, 9, 9, 2]), vdev.ones([3, 3, 2, 1])
    # an int, 2 ints or 4 (NHWC), as strides; the sums count the taps inside
    assert vdev.nn.conv2d(x, f, 1, "VALID", dilations=2).shape == (1, 5, 5, 1)
    assert vdev.nn.conv2d(x, f, 1, "VALID", dilations=[3, 1]).shape == (1, 3, 7, 1)
    y = vdev.nn.conv2d(x, f, 1, "SAME", dilations=[1, 4, 4, 1])
    assert y.shape == (1, 9, 9, 1)
    assert y.numpy()[0, 4, 4, 0] == 18.0 and y.numpy()[0, 0, 0, 0] == 8.0
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match=r"Conv2D: Dilated rates should be larger than 0\."):
        vdev.nn.conv2d(x, f, 1, "SAME", dilations=0)
    with pytest.raises(vdev.errors.UnimplementedError, match="does not yet support dilations in "
                       "the batch and depth dimensions"):
        vdev.nn.conv2d(x, f, 1, "SAME", dilations=[2, 1, 1, 1])
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match=r"Conv2D: Computed output size would be negative: -1 \[input_size: "
                       r"9, effective_filter_size: 11, stride: 1\]"):
        vdev.nn.conv2d(x, f, 1, "VALID", dilations=5)


def test_same_pads_after_and_pools_skip_the_padding():
    x = vdev.constant(np.arange(1, 17, dtype=np.float32).reshape(1, 4, 4, 1))
    f = vdev.ones([3, 3, 1, 1])
    # one row and column of padding, after: the first window is rows 0-2
    assert vdev.nn.conv2d(x, f, 2, "SAME").numpy().ravel().tolist() == [54, 45, 72, 54]
    assert vdev.nn.max_pool2d(x, 2, 2, "VALID").numpy().ravel().tolist() == [6, 8, 14, 16]
    assert vdev.nn.avg_pool2d(x, 3, 2, "SAME").numpy().ravel().tolist() == [6, 7.5, 12, 13.5]
    # a window larger than the input under VALID: an empty output
    assert vdev.nn.conv2d(x, vdev.ones([4, 4, 1, 2]), 2, "VALID").shape == (1, 1, 1, 2)
    assert vdev.nn.max_pool2d(x, 5, 2, "VALID").shape == (1, 0, 0, 1)


def test_a_filter_given_as_a_value_is_made_beside_the_input():
    with vdev.device("GPU:1"):
        x = vdev.ones([1, 3, 3, 1])
    y = vdev.nn.conv2d(x, np.ones((2, 2, 1, 1), np.float32), 1, "VALID")
    assert y.device.endswith("GPU:1") and y.numpy().ravel().tolist() == [4, 4, 4, 4]


def test_max_pool_gradient_goes_to_the_first_maximum():
    v = vdev.Variable(np.full((1, 2, 2, 1), 3.0, np.float32))
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(vdev.nn.max_pool2d(v, 2, 1, "VALID"))
    assert tape.gradient(y, v).numpy().ravel().tolist() == [1, 0, 0, 0]


def test_argument_forms_and_refusals():
    x = vdev.zeros([1, 5, 5, 3])
    f = vdev.zeros([3, 3, 3, 2])
    for s in (2, [2], (2, 2), [1, 2, 2, 1]):
        assert vdev.nn.conv2d(x, f, s, "SAME").shape == (1, 3, 3, 2)
    assert vdev.nn.conv2d(x, f, 1, "SAME", "NHWC", [1, 1]).shape == (1, 5, 5, 2)
    with pytest.raises(ValueError, match=r"strides should be of length 1, 2 or 4\. Received: "
                       r"strides=\[1, 1, 1\] of length 3"):
        vdev.nn.conv2d(x, f, [1, 1, 1], "SAME")
    with pytest.raises(TypeError, match="Expected int for argument 'ksize' not 1.5."):
        vdev.nn.max_pool2d(x, 1.5, 1, "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="Conv2D: Stride must be > 0, but got 0"):
        vdev.nn.conv2d(x, f, 0, "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="MaxPool: Sliding window ksize for dimension 1 was zero."):
        vdev.nn.max_pool2d(x, [0, 2], 1, "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError, match="Value for attr 'padding' of "
                       "\"FULL\" is not in the list of allowed values: \"SAME\", \"VALID\""):
        vdev.nn.avg_pool2d(x, 2, 1, "FULL")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match="Conv2D: input depth must be evenly divisible by filter depth: "
                       "3 vs 2"):
        vdev.nn.conv2d(x, vdev.zeros([3, 3, 2, 2]), 1, "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match=r"Conv2D: input must be 4-dimensional\[5,5,3\]"):
        vdev.nn.conv2d(vdev.zeros([5, 5, 3]), f, 1, "SAME")
    with pytest.raises(vdev.errors.InvalidArgumentError,
                       match=r"Conv2D: Computed output size would be negative: -1 \[input_size: "
                       r"5, effective_filter_size: 7, stride: 1\]"):
        vdev.nn.conv2d(x, vdev.zeros([7, 1, 3, 2]), 1, "VALID")
    with pytest.raises(TypeError, match="Expected string for argument 'padding' not 1."):
        vdev.nn.conv2d(x, f, 1, 1)
    with pytest.raises(ValueError, match="'EXPLICIT' is not a valid value for `padding`"):
        vdev.nn.conv2d(x, f, 1, "EXPLICIT")
    # what vdev leaves out
    with pytest.raises(vdev.errors.UnimplementedError, match="data_format 'NCHW'"):
        vdev.nn.conv2d(x, f, 1, "SAME", data_format="NCHW")
    # explicit padding: taken (test_pad.py), SAME's split given as pairs gives SAME's bits
    np.testing.assert_array_equal(vdev.nn.conv2d(x, f, 1, [[0, 0], [1, 1], [1, 1], [0, 0]]).numpy(),
                                  vdev.nn.conv2d(x, f, 1, "SAME").numpy())
    with pytest.raises(vdev.errors.UnimplementedError,
                       match="does not yet support strides in the batch and depth dimensions"):
        vdev.nn.conv2d(x, f, [2, 1, 1, 1], "SAME")
    with pytest.raises(vdev.errors.UnimplementedError,
                       match="Pooling is not yet supported on the batch dimension."):
        vdev.nn.max_pool2d(x, [2, 2, 2, 1], 1, "SAME")
    with pytest.raises(vdev.errors.UnimplementedError, match="over the depth dimension"):
        vdev.nn.avg_pool2d(x, [1, 2, 2, 2], 1, "SAME")
    with pytest.raises(vdev.errors.UnimplementedError, match="grouped convolution"):
        vdev.nn.conv2d(vdev.zeros([1, 5, 5, 4]), vdev.zeros([3, 3, 2, 2]), 1, "SAME")
