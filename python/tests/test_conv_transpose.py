"""vdev.nn.conv2d_transpose as tf.nn.conv2d_transpose has it (NHWC, the op
Conv2DBackpropInput): values and gradients (GradientTape) against
torch.nn.functional.conv_transpose2d on the CPU and a simulated GPU, over
strides 1 and 2, both paddings, every output size TensorFlow takes (SAME's
7 or 8 rows from 4 at stride 2, VALID's extra rows of zeros), dilations and
1x1 filters; TensorFlow's argument forms (output_shape as a list, tuple,
array, int32 tensor, or [rows, cols]; strides and dilations an int or 1, 2
or 4 ints); and its refusals in its words.

The layouts map as: input NHWC -> NCHW; filters [KH,KW,C,O] -> torch's
conv_transpose2d weight [O (in), C (out), KH, KW]. TensorFlow's padding is
that of the conv2d the result is the gradient of, computed on the output's
size: pad_top = max(0, (H - 1) s + (KH - 1) d + 1 - OH) // 2 for SAME, 0 for
VALID. torch's padding p crops p from both ends of the full transposed
output ((H - 1) s + (KH - 1) d + 1 rows) and output_padding adds rows at the
end; the two together express TensorFlow's result only where its crop is
symmetric, so the test takes torch's full result (padding=0) and crops
pad_top rows before, then crops or zero-pads after to OH rows (VALID's
largest OH has rows past the full output, zeros in TensorFlow too).
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev

rng = np.random.default_rng(20261206)


def tf_before(h, oh, k, s, d, padding):
    """The padding before of conv2d on the output's size (TensorFlow's rule)."""
    if padding == "VALID":
        return 0
    return max(0, (h - 1) * s + (k - 1) * d + 1 - oh) // 2


def torch_convt(x, f, oshape, s, d, padding):
    """TensorFlow's conv2d_transpose through torch: x NHWC, f [KH,KW,C,O]."""
    _, oh, ow, _ = oshape
    n, h, w, _ = x.shape
    kh, kw = f.shape[0], f.shape[1]
    y = F.conv_transpose2d(x.permute(0, 3, 1, 2), f.permute(3, 2, 0, 1), stride=s, dilation=d)
    pt, pl = tf_before(h, oh, kh, s[0], d[0], padding), tf_before(w, ow, kw, s[1], d[1], padding)
    # F.pad takes (left, right, top, bottom); a negative amount crops
    y = F.pad(y, (-pl, ow - (y.shape[3] - pl), -pt, oh - (y.shape[2] - pt)))
    return y.permute(0, 2, 3, 1)


CASES = [  # n, h, w, o (input channels), kh, kw, c (output channels), oh, ow, s, d, padding
    (2, 5, 6, 3, 3, 2, 4, 5, 6, (1, 1), (1, 1), "SAME"),
    (2, 5, 6, 3, 3, 2, 4, 7, 7, (1, 1), (1, 1), "VALID"),
    (2, 4, 4, 3, 3, 3, 2, 8, 7, (2, 2), (1, 1), "SAME"),
    (1, 4, 4, 3, 3, 3, 2, 7, 8, (2, 2), (1, 1), "SAME"),
    (2, 3, 4, 2, 3, 2, 3, 7, 8, (2, 2), (1, 1), "VALID"),
    (1, 3, 4, 2, 3, 2, 3, 8, 9, (2, 2), (1, 1), "VALID"),  # a row and column of zeros
    (1, 3, 5, 2, 4, 2, 3, 9, 5, (3, 1), (1, 1), "SAME"),
    (2, 6, 7, 2, 3, 2, 3, 6, 7, (1, 1), (2, 3), "SAME"),
    (1, 4, 5, 2, 3, 2, 3, 8, 8, (1, 1), (2, 3), "VALID"),
    (1, 4, 4, 3, 2, 3, 2, 8, 8, (2, 2), (2, 2), "SAME"),
    (2, 3, 3, 4, 1, 1, 3, 6, 5, (2, 2), (1, 1), "SAME"),
    (2, 5, 6, 4, 1, 1, 3, 5, 6, (1, 1), (1, 1), "VALID"),
]


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("case", CASES)
def test_against_torch_values_and_gradients(dev, case):
    n, h, w, o, kh, kw, c, oh, ow, s, d, padding = case
    x = rng.uniform(-1, 1, (n, h, w, o)).astype(np.float32)
    f = rng.uniform(-1, 1, (kh, kw, c, o)).astype(np.float32)
    r = rng.uniform(-1, 1, (n, oh, ow, c)).astype(np.float32)
    with vdev.device(dev):
        xv, fv = vdev.Variable(x), vdev.Variable(f)
        with vdev.GradientTape() as tape:
            y = vdev.nn.conv2d_transpose(xv, fv, [n, oh, ow, c], list(s), padding,
                                         dilations=list(d))
            loss = vdev.reduce_sum(y * r)
        assert y.device.endswith(dev)
        gx, gf = tape.gradient(loss, [xv, fv])
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ft = torch.tensor(f, dtype=torch.float64, requires_grad=True)
    ty = torch_convt(xt, ft, (n, oh, ow, c), s, d, padding)
    assert y.shape == tuple(ty.shape) == (n, oh, ow, c)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    tgx, tgf = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), [xt, ft])
    assert gx.shape == x.shape and gf.shape == f.shape
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gf.numpy(), tgf.numpy(), rtol=1e-5, atol=1e-5)


def test_it_is_the_gradient_of_conv2d():
    # conv2d_transpose(dy, f, x.shape) is conv2d's gradient with respect to x
    x = vdev.Variable(rng.uniform(-1, 1, (2, 7, 8, 3)).astype(np.float32))
    f = vdev.constant(rng.uniform(-1, 1, (3, 3, 3, 4)).astype(np.float32))
    dy = rng.uniform(-1, 1, (2, 4, 4, 4)).astype(np.float32)
    with vdev.GradientTape() as tape:
        y = vdev.nn.conv2d(x, f, 2, "SAME")
    g = tape.gradient(y, x, output_gradients=vdev.constant(dy))
    t = vdev.nn.conv2d_transpose(dy, f, [2, 7, 8, 3], 2, "SAME")
    assert np.array_equal(g.numpy(), t.numpy())


def test_argument_forms():
    x = vdev.constant(rng.uniform(-1, 1, (2, 4, 4, 3)).astype(np.float32))
    f = vdev.constant(rng.uniform(-1, 1, (3, 3, 5, 3)).astype(np.float32))
    want = vdev.nn.conv2d_transpose(x, f, [2, 8, 7, 5], [1, 2, 2, 1]).numpy()
    assert want.shape == (2, 8, 7, 5)
    # padding defaults to SAME; output_shape in every form TensorFlow takes
    for shape in ((2, 8, 7, 5), np.array([2, 8, 7, 5], np.int32), [8, 7], (np.int64(8), 7),
                  vdev.constant(np.array([2, 8, 7, 5], np.int32)),
                  vdev.constant(np.array([8, 7], np.int32))):
        for s in (2, [2], (2, 2), [1, 2, 2, 1]):
            got = vdev.nn.conv2d_transpose(x, f, shape, s)
            assert np.array_equal(got.numpy(), want)
    # data_format None is NHWC; the filters given as an array; dilations forms
    got = vdev.nn.conv2d_transpose(x, f.numpy(), [2, 8, 7, 5], 2, "SAME", None, [1, 1])
    assert np.array_equal(got.numpy(), want)
    y = vdev.nn.conv2d_transpose(vdev.ones([1, 3, 3, 1]), vdev.ones([2, 2, 1, 1]), [1, 5, 5, 1],
                                 1, "VALID", dilations=2)
    assert y.numpy()[0, :, :, 0].tolist() == [[1, 1, 2, 1, 1], [1, 1, 2, 1, 1],
                                              [2, 2, 4, 2, 2], [1, 1, 2, 1, 1],
                                              [1, 1, 2, 1, 1]]


def test_a_filter_given_as_a_value_is_made_beside_the_input():
    with vdev.device("GPU:1"):
        x = vdev.ones([1, 2, 2, 1])
    y = vdev.nn.conv2d_transpose(x, np.ones((2, 2, 1, 1), np.float32), [1, 3, 3, 1], 1,
                                 "VALID")
    assert y.device.endswith("GPU:1")
    assert y.numpy().ravel().tolist() == [1, 2, 1, 2, 4, 2, 1, 2, 1]


def test_refusals_in_tensorflows_words():
    x, f = vdev.zeros([1, 4, 4, 2]), vdev.zeros([3, 3, 3, 2])
    IA = vdev.errors.InvalidArgumentError

    def refused(exc, msg, *args, **kw):
        with pytest.raises(exc) as e:
            vdev.nn.conv2d_transpose(*args, **kw)
        assert str(e.value) == msg

    refused(ValueError, "strides should be of length 1, 2 or 4. Received: strides=[1, 2, 2] of "
            "length 3", x, f, [1, 8, 8, 3], [1, 2, 2])
    refused(TypeError, "Expected int for argument 'dilations' not 1.5.", x, f, [1, 8, 8, 3], 2,
            dilations=1.5)
    refused(IA, "Conv2DBackpropInput: Value for attr 'padding' of \"FULL\" is not in the list "
            "of allowed values: \"SAME\", \"VALID\", \"EXPLICIT\"", x, f, [1, 8, 8, 3], 2, "FULL")
    refused(IA, "Conv2DBackpropInput: explicit_paddings attribute must contain 8 values, but "
            "got: 0", x, f, [1, 8, 8, 3], 2, "EXPLICIT")
    refused(TypeError, "Expected string for argument 'padding' not [[0, 0], [1, 1], [1, 1], "
            "[0, 0]].", x, f, [1, 8, 8, 3], 2, [[0, 0], [1, 1], [1, 1], [0, 0]])
    refused(IA, "Conv2DBackpropInput: Row and column strides should be larger than 0.", x, f,
            [1, 8, 8, 3], 0)
    refused(IA, "Conv2DBackpropInput: Dilated rates should be larger than 0.", x, f,
            [1, 8, 8, 3], 1, dilations=[1, 0])
    refused(IA, "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but "
            "got: 3", x, f, [8, 8, 3], 2)
    refused(IA, "Conv2DBackpropInput: input_sizes input must be 1-dim, not 2", x, f,
            [[1, 8], [8, 3]], 2)
    refused(IA, "Conv2DBackpropInput: input_sizes input must be 1-dim, not 0", x, f, 8, 2)
    refused(IA, "cannot compute Conv2DBackpropInput as input #0(zero-based) was expected to be "
            "a int32 tensor but is a float tensor", x, f, vdev.constant([1.0, 8.0, 8.0, 3.0]),
            2)
    refused(TypeError, "Cannot convert [1, 8.5, 8, 3] to EagerTensor of dtype int32", x, f,
            [1, 8.5, 8, 3], 2)
    refused(IA, "Conv2DBackpropInput: elements of input_sizes must be >= 0, not -8x8", x, f,
            [-8, 8], 2)
    refused(IA, "Conv2DBackpropInput: Dimension -3 must be >= 0", x, f, [1, 8, 8, -3], 2)
    refused(IA, "Conv2DSlowBackpropInput: out_backprop must be 4-dimensional",
            vdev.zeros([4, 4, 2]), f, [1, 8, 8, 3], 2)
    refused(IA, "Conv2DSlowBackpropInput: filter must be 4-dimensional", x, vdev.zeros([3, 3, 2]),
            [1, 8, 8, 3], 2)
    refused(IA, "Conv2DSlowBackpropInput: input and out_backprop must have the same batch size. "
            "Input batch: 2, outbackprop batch: 1, batch_dim: 0", x, f, [2, 8, 8, 3], 2)
    refused(IA, "Conv2DSlowBackpropInput: input depth must be evenly divisible by filter depth",
            x, f, [1, 8, 8, 4], 2)
    refused(IA, "Conv2DSlowBackpropInput: filter and out_backprop must have the same out_depth",
            x, vdev.zeros([3, 3, 3, 4]), [1, 8, 8, 3], 2)
    refused(IA, "Conv2DSlowBackpropInput: Size of out_backprop doesn't match computed: actual = "
            "4, computed = 5 spatial_dim: 1 input: 9 filter: 3 output: 4 stride: 2 dilation: 1",
            x, f, [1, 9, 8, 3], 2)
    refused(IA, "Conv2DSlowBackpropInput: Size of out_backprop doesn't match computed: actual = "
            "4, computed = 2 spatial_dim: 2 input: 8 filter: 3 output: 4 stride: 2 dilation: 2",
            x, f, [1, 10, 8, 3], 2, "VALID", dilations=[1, 2])
    refused(IA, "Conv2DSlowBackpropInput: Computed output size would be negative: -1 "
            "[input_size: 1, effective_filter_size: 3, stride: 1]", x, f, [1, 1, 8, 3], 1,
            "VALID")
    # what vdev leaves out
    refused(vdev.errors.UnimplementedError, "vdev.nn.conv2d_transpose: data_format 'NCHW' is not "
            "supported; vdev takes NHWC only", x, f, [1, 8, 8, 3], 2, data_format="NCHW")
    refused(vdev.errors.UnimplementedError, "Current implementation does not yet support strides "
            "in the batch and depth dimensions.", x, f, [1, 8, 8, 3], [2, 2, 2, 1])
    refused(vdev.errors.UnimplementedError, "Current implementation does not yet support "
            "dilations in the batch and depth dimensions.", x, f, [1, 8, 8, 3], 2,
            dilations=[1, 1, 1, 2])
    refused(vdev.errors.UnimplementedError, "Conv2DSlowBackpropInput: grouped convolution (input "
            "depth 6, filter depth 3) is not supported: the filter's depth must be the output's",
            x, f, [1, 8, 8, 6], 2)
