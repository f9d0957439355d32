"""vdev.image.resize as tf.image.resize: bilinear and nearest against a
pixel-by-pixel float32 loop of TensorFlow's kernels (ResizeBilinear and
ResizeNearestNeighbor with half-pixel centres) to the bit, and against
torch's interpolation (bilinear with align_corners=False; the values and the
gradient), on the CPU and a simulated GPU; TensorFlow's own examples;
3-D images, int32 images, preserve_aspect_ratio; every refusal in
TensorFlow's words; what vdev leaves out."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev
from vdev.errors import InvalidArgumentError, UnimplementedError

rng = np.random.default_rng(20261206)
f32 = np.float32

SIZES = [((5, 7), (3, 5)), ((5, 7), (10, 14)), ((4, 4), (4, 4)), ((1, 3), (4, 2)),
         ((6, 5), (4, 9)), ((3, 8), (7, 3))]


def kernel_bilinear(x, oh, ow):
    """TensorFlow's ResizeBilinear (half_pixel_centers) one pixel at a time,
    every step a float32 operation, in the kernel's order."""
    n, h, w, c = x.shape
    hs, ws = f32(h) / f32(oh), f32(w) / f32(ow)
    out = np.empty((n, oh, ow, c), f32)
    for i in range(oh):
        yin = (f32(i) + f32(0.5)) * hs - f32(0.5)
        y0, y1 = max(int(math.floor(yin)), 0), min(int(math.ceil(yin)), h - 1)
        yl = f32(yin - f32(math.floor(yin)))
        for j in range(ow):
            xin = (f32(j) + f32(0.5)) * ws - f32(0.5)
            x0, x1 = max(int(math.floor(xin)), 0), min(int(math.ceil(xin)), w - 1)
            xl = f32(xin - f32(math.floor(xin)))
            top = x[:, y0, x0] + (x[:, y0, x1] - x[:, y0, x0]) * xl
            bottom = x[:, y1, x0] + (x[:, y1, x1] - x[:, y1, x0]) * xl
            out[:, i, j] = top + (bottom - top) * yl
    return out


def kernel_nearest(x, oh, ow):
    """TensorFlow's ResizeNearestNeighbor (half_pixel_centers), pixel by
    pixel: floor((i + 0.5) * scale) in float32, clamped to the image."""
    n, h, w, c = x.shape
    hs, ws = f32(h) / f32(oh), f32(w) / f32(ow)
    out = np.empty((n, oh, ow, c), x.dtype)
    for i in range(oh):
        y = min(max(int(math.floor((f32(i) + f32(0.5)) * hs)), 0), h - 1)
        for j in range(ow):
            out[:, i, j] = x[:, y, min(max(int(math.floor((f32(j) + f32(0.5)) * ws)), 0), w - 1)]
    return out


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_bilinear_is_tensorflows_kernel(dev):
    for (h, w), (oh, ow) in SIZES:
        x = rng.uniform(-4, 4, (2, h, w, 3)).astype(f32)
        with vdev.device(dev):
            t = vdev.constant(x)
        y = vdev.image.resize(t, (oh, ow))
        assert y.device.endswith(dev) and y.dtype is vdev.float32
        assert y.shape == (2, oh, ow, 3)
        np.testing.assert_array_equal(y.numpy(), kernel_bilinear(x, oh, ow))
        ty = F.interpolate(torch.tensor(x).permute(0, 3, 1, 2), size=(oh, ow), mode="bilinear",
                           align_corners=False).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(y.numpy(), ty, rtol=1e-6, atol=2e-6)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_nearest_is_tensorflows_kernel(dev):
    for (h, w), (oh, ow) in SIZES:
        for dtype in (f32, np.int32):
            x = rng.uniform(-50, 50, (2, h, w, 2)).astype(dtype)
            with vdev.device(dev):
                t = vdev.constant(x)
            y = vdev.image.resize(t, [oh, ow], method=vdev.image.ResizeMethod.NEAREST_NEIGHBOR)
            assert y.device.endswith(dev) and y.dtype is vdev.as_dtype(dtype)
            np.testing.assert_array_equal(y.numpy(), kernel_nearest(x, oh, ow))


def test_tensorflows_examples_and_forms():
    image = np.eye(5, dtype=np.int32)[None, ..., None]
    got = vdev.image.resize(image, [3, 5])
    assert got.dtype is vdev.float32
    np.testing.assert_array_equal(
        got[0, ..., 0].numpy(),
        np.array([[0.6666667, 0.3333333, 0, 0, 0], [0, 0, 1, 0, 0],
                  [0, 0, 0, 0.3333335, 0.6666665]], f32))
    assert vdev.image.resize(image[0], [3, 5]).shape == (3, 5, 1)
    np.testing.assert_array_equal(
        vdev.image.resize(image, [5, 7], method="nearest")[0, ..., 0].numpy(),
        [[1, 0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0],
         [0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0, 1]])
    assert vdev.image.resize(image, [10, 20], preserve_aspect_ratio=True).shape == (1, 10, 10, 1)
    # preserve_aspect_ratio rounds half to even in float32, as tf.round
    x = np.zeros((1, 4, 6, 1), f32)
    assert vdev.image.resize(x, [3, 100], preserve_aspect_ratio=True).shape == (1, 3, 4, 1)
    assert vdev.image.resize(x, [10, 3], preserve_aspect_ratio=True).shape == (1, 2, 3, 1)
    # a 3-D image, size as an int32 tensor, antialias ignored by nearest
    x = rng.uniform(-1, 1, (4, 3, 2)).astype(f32)
    y = vdev.image.resize(x, vdev.constant([6, 5], dtype=vdev.int32), "nearest", antialias=True)
    np.testing.assert_array_equal(y.numpy(), kernel_nearest(x[None], 6, 5)[0])


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_bilinear_gradient_is_torchs(dev):
    for (h, w), (oh, ow) in SIZES[:3] + SIZES[4:]:
        x = rng.uniform(-1, 1, (2, h, w, 2)).astype(f32)
        r = rng.uniform(-1, 1, (2, oh, ow, 2)).astype(f32)
        with vdev.device(dev):
            xv = vdev.Variable(x)
            with vdev.GradientTape() as tape:
                loss = vdev.reduce_sum(vdev.image.resize(xv, (oh, ow)) * r)
            g = tape.gradient(loss, xv)
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        ty = F.interpolate(xt.permute(0, 3, 1, 2), size=(oh, ow), mode="bilinear",
                           align_corners=False).permute(0, 2, 3, 1)
        tg, = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), [xt])
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-5)


def test_nearest_gradient_sums_the_copies():
    x = rng.uniform(-1, 1, (1, 5, 4, 2)).astype(f32)
    src = kernel_nearest(np.arange(40).reshape(1, 5, 4, 2), 7, 3)
    r = (rng.integers(-40, 40, src.shape) / 4).astype(f32)
    want = np.zeros(40)
    np.add.at(want, src.reshape(-1), r.reshape(-1))
    xv = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(vdev.image.resize(xv, (7, 3), "nearest") * r)
    np.testing.assert_array_equal(tape.gradient(loss, xv).numpy(),
                                  want.reshape(x.shape).astype(f32))


def test_refusals():
    x = np.zeros((1, 4, 4, 2), f32)
    cases = [
        (lambda: vdev.image.resize(np.zeros((4, 4), f32), [2, 2]), ValueError,
         "'images' must have either 3 or 4 dimensions."),
        (lambda: vdev.image.resize(x, [2.5, 2]), ValueError, "'size' must be a 1-D int32 Tensor"),
        (lambda: vdev.image.resize(x, "ab"), ValueError, "'size' must be a 1-D int32 Tensor"),
        (lambda: vdev.image.resize(x, [2, 2, 2]), ValueError,
         "'size' must be a 1-D Tensor of 2 elements: new_height, new_width"),
        (lambda: vdev.image.resize(x, 2), ValueError,
         "'size' must be a 1-D Tensor of 2 elements: new_height, new_width"),
        (lambda: vdev.image.resize(x, [2, 2], method="cubic"), ValueError,
         "Resize method is not implemented: cubic"),
        (lambda: vdev.image.resize(x, [2, 0]), InvalidArgumentError,
         "output dimensions must be positive"),
        (lambda: vdev.image.resize(np.zeros((1, 4, 4, 0), f32), [2, 2]), InvalidArgumentError,
         "image must have at least one channel"),
        (lambda: vdev.image.resize(np.zeros((1, 0, 4, 1), f32), [2, 2], "nearest"),
         InvalidArgumentError, "input image must be of non-zero size"),
        (lambda: vdev.image.resize(x, [2, 2], method="bicubic"), UnimplementedError,
         "vdev.image.resize: method 'bicubic' is not supported; vdev resizes with 'bilinear' or "
         "'nearest'"),
        (lambda: vdev.image.resize(x, [2, 2], antialias=True), UnimplementedError,
         "vdev.image.resize: bilinear with antialias=True (TensorFlow's ScaleAndTranslate with "
         "a triangle kernel) is not supported; vdev resizes with antialias=False"),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == msg


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_flips_crop_and_standardization(dev):
    x4 = rng.uniform(-3, 3, (2, 5, 4, 3)).astype(f32)
    with vdev.device(dev):
        t = vdev.constant(x4)
    for x, y in ((x4, t), (x4[1], t[1])):
        np.testing.assert_array_equal(vdev.image.flip_left_right(y).numpy(), x[..., ::-1, :])
        np.testing.assert_array_equal(vdev.image.flip_up_down(y).numpy(), x[..., ::-1, :, :])
        assert vdev.image.flip_left_right(y).device.endswith(dev)
    # central_crop: TensorFlow's start int((size - size * fraction) / 2) on each side
    img = rng.uniform(0, 1, (10, 9, 2)).astype(f32)
    for frac in (0.5, 0.33, 0.9, 1.0):
        top, left = int((10 - 10 * frac) / 2), int((9 - 9 * frac) / 2)
        np.testing.assert_array_equal(vdev.image.central_crop(img, frac).numpy(),
                                      img[top:10 - top, left:9 - left])
    # per-image standardization, against float64 loops; a uniform image stays finite
    xs = np.concatenate([x4, np.full((1, 5, 4, 3), 7, f32)])
    got = vdev.image.per_image_standardization(xs).numpy()
    for k in range(3):
        d = xs[k].astype(np.float64)
        want = (d - d.mean()) / max(d.std(), 1 / math.sqrt(d.size))
        np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-6)
    assert not got[2].any()
    ints = vdev.image.per_image_standardization(np.arange(24, dtype=np.int32).reshape(2, 4, 3))
    assert ints.dtype is vdev.float32
    # the gradient of a flip is the flipped gradient
    xv = vdev.Variable(x4)
    r = rng.uniform(-1, 1, x4.shape).astype(f32)
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(vdev.image.flip_left_right(xv) * r)
    np.testing.assert_array_equal(tape.gradient(loss, xv).numpy(), r[:, :, ::-1])


def test_flip_and_crop_refusals():
    cases = [
        (lambda: vdev.image.flip_left_right(np.zeros((4, 4), f32)), ValueError,
         "'image' (shape (4, 4)) must be at least three-dimensional."),
        (lambda: vdev.image.flip_up_down(np.zeros((2, 0, 4, 1), f32)), ValueError,
         "inner 3 dims of 'image.shape' must be > 0: (2, 0, 4, 1)"),
        (lambda: vdev.image.central_crop(np.zeros((4, 4, 1), f32), 0.0), ValueError,
         "central_fraction must be within (0, 1]"),
        (lambda: vdev.image.central_crop(np.zeros((4, 4), f32), 0.5), ValueError,
         "`image` should either be a Tensor with rank = 3 or rank = 4. Had rank = 2."),
        (lambda: vdev.image.per_image_standardization(np.zeros((4, 4), f32)), ValueError,
         "'image' (shape (4, 4)) must be at least three-dimensional."),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == msg
