"""Keras 2.11's Rescaling, Resizing and CenterCrop in vdev.layers: values
against numpy (the float32 arithmetic, the crop windows Keras's formulas
give, computed here), resizing as vdev.image.resize, batched and single
images, int inputs, shapes, configs, Keras's errors, on the CPU and a
simulated GPU, and in a model that trains."""
import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(20261206)
f32 = np.float32


def keras_window(h, w, th, tw):
    """Keras's smart_resize window: (top, left, height, width)."""
    ch = min(h, int(f32(w * th) / f32(tw)))
    cw = min(w, int(f32(h * tw) / f32(th)))
    return int(f32(h - ch) / f32(2)), int(f32(w - cw) / f32(2)), ch, cw


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_rescaling(dev):
    x = rng.integers(0, 256, (2, 4, 5, 3)).astype(np.int32)
    layer = layers.Rescaling(1 / 255.0, offset=-0.5)
    with vdev.device(dev):
        y = layer(vdev.constant(x))
    assert y.device.endswith(dev) and y.dtype is vdev.float32
    want = x.astype(f32) * f32(1 / 255.0) + f32(-0.5)
    np.testing.assert_array_equal(y.numpy(), want)
    assert layer.name.startswith("rescaling")
    c = layer.get_config()
    assert (c["scale"], c["offset"]) == (1 / 255.0, -0.5)
    assert layers.Rescaling.from_config(c).get_config() == c
    assert layer.compute_output_shape((None, 4, 5, 3)) == (None, 4, 5, 3)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_resizing(dev):
    x = rng.uniform(0, 1, (2, 6, 9, 3)).astype(f32)
    for interp in ("bilinear", "nearest", "NEAREST"):
        layer = layers.Resizing(4, 5, interpolation=interp)
        with vdev.device(dev):
            y = layer(x)
        assert y.device.endswith(dev)
        np.testing.assert_array_equal(
            y.numpy(), vdev.image.resize(x, (4, 5), method=interp.lower()).numpy())
        assert layer.compute_output_shape((None, 6, 9, 3)) == (None, 4, 5, 3)
    # crop_to_aspect_ratio: the largest centred window of the target's aspect, then resized
    for (h, w), (th, tw) in (((6, 9), (4, 4)), ((9, 6), (3, 5)), ((7, 7), (2, 3))):
        img = rng.uniform(0, 1, (h, w, 2)).astype(f32)
        layer = layers.Resizing(th, tw, crop_to_aspect_ratio=True)
        top, left, ch, cw = keras_window(h, w, th, tw)
        want = vdev.image.resize(img[top:top + ch, left:left + cw], (th, tw)).numpy()
        np.testing.assert_array_equal(layer(img).numpy(), want)
    c = layers.Resizing(3, 4, "nearest", True).get_config()
    assert (c["height"], c["width"], c["interpolation"], c["crop_to_aspect_ratio"]) == \
        (3, 4, "nearest", True)
    assert layers.Resizing.from_config(c).get_config() == c


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_center_crop(dev):
    x = rng.uniform(-1, 1, (2, 7, 10, 3)).astype(f32)
    for th, tw in ((4, 5), (7, 10), (1, 1), (6, 3)):
        with vdev.device(dev):
            y = layers.CenterCrop(th, tw)(x)
        assert y.device.endswith(dev)
        top, left = (7 - th) // 2, (10 - tw) // 2
        np.testing.assert_array_equal(y.numpy(), x[:, top:top + th, left:left + tw])
    # smaller than the target either way: Keras's smart_resize instead
    layer = layers.CenterCrop(9, 4)
    top, left, ch, cw = keras_window(7, 10, 9, 4)
    want = vdev.image.resize(x[:, top:top + ch, left:left + cw], (9, 4)).numpy()
    np.testing.assert_array_equal(layer(x).numpy(), want)
    assert layer.compute_output_shape((2, 7, 10, 3)) == (2, 9, 4, 3)
    assert layers.CenterCrop(3, 3)(x[0]).shape == (3, 3, 3)
    c = layer.get_config()
    assert (c["height"], c["width"]) == (9, 4)
    assert layers.CenterCrop(1, 1).name.startswith("center_crop")


def test_errors():
    with pytest.raises(NotImplementedError) as e:
        layers.Resizing(2, 2, interpolation="Cubic")
    assert str(e.value) == (
        "Value not recognized for `interpolation`: cubic. Supported values are: "
        "dict_keys(['bilinear', 'nearest', 'bicubic', 'area', 'lanczos3', 'lanczos5', "
        "'gaussian', 'mitchellcubic'])")
    with pytest.raises(vdev.errors.UnimplementedError):
        layers.Resizing(2, 2, interpolation="area")(np.zeros((1, 4, 4, 1), f32))
    with pytest.raises(ValueError) as e:
        layers.CenterCrop(2, 2)(np.zeros((4, 4), f32))
    assert str(e.value) == (
        "Expected an image array with shape `(height, width, channels)`, or `(batch_size, "
        "height, width, channels)`, but got input with incorrect rank, of shape (4, 4).")


def test_a_model_with_preprocessing_trains():
    x = rng.integers(0, 256, (32, 9, 9, 1)).astype(f32)
    y = (x.mean(axis=(1, 2, 3)) / 255.0).reshape(-1, 1).astype(f32)
    model = vdev.models.Sequential([
        layers.Rescaling(1 / 255.0, input_shape=(9, 9, 1)),
        layers.CenterCrop(8, 8),
        layers.Resizing(4, 4),
        layers.Conv2D(2, 3, padding="same", seed=1),
        layers.Flatten(),
        layers.Dense(1, seed=2)])
    assert model.output_shape == (None, 1)
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    loss = model.fit(x, y, batch_size=8, epochs=15, verbose=0).history["loss"]
    assert loss[-1] < 0.5 * loss[0]
