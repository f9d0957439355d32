"""Keras 2.11's UpSampling1D and UpSampling2D: values against numpy's
repeat and torch's nearest and bilinear interpolation, gradients (nearest:
each input element's the sum over its copies; bilinear: torch's), on the
CPU and a simulated GPU; shapes, configs, Keras's argument errors and what
vdev leaves out; in models that train."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev
from vdev import layers

rng = np.random.default_rng(20261208)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_upsampling2d_values_and_gradients(dev):
    x = rng.uniform(-1, 1, (2, 3, 4, 2)).astype(np.float32)
    for size in (2, (2, 3), (1, 2)):
        layer = layers.UpSampling2D(size)
        s = layer.size
        with vdev.device(dev):
            xv = vdev.Variable(x)
            with vdev.GradientTape() as tape:
                y = layer(xv)
                r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
                loss = vdev.reduce_sum(y * r)
            g = tape.gradient(loss, xv)
        assert y.device.endswith(dev)
        np.testing.assert_array_equal(y.numpy(), x.repeat(s[0], 1).repeat(s[1], 2))
        tu = F.interpolate(torch.tensor(x).permute(0, 3, 1, 2), scale_factor=s,
                           mode="nearest").permute(0, 2, 3, 1).numpy()
        np.testing.assert_array_equal(y.numpy(), tu)
        assert y.shape == layer.compute_output_shape((2, 3, 4, 2))
        want = r.reshape(2, 3, s[0], 4, s[1], 2).sum(axis=(2, 4), dtype=np.float64)
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-6, atol=1e-6)


def test_upsampling1d_values_and_gradients():
    x = rng.uniform(-1, 1, (2, 5, 3)).astype(np.float32)
    layer = layers.UpSampling1D(3)
    xv = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = layer(xv)
        r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
        loss = vdev.reduce_sum(y * r)
    np.testing.assert_array_equal(y.numpy(), x.repeat(3, 1))
    assert y.shape == layer.compute_output_shape((2, 5, 3)) == (2, 15, 3)
    np.testing.assert_allclose(tape.gradient(loss, xv).numpy(),
                               r.reshape(2, 5, 3, 3).sum(axis=2, dtype=np.float64),
                               rtol=1e-6, atol=1e-6)
    assert layers.UpSampling1D().size == 2


def test_configs_and_errors():
    u2 = layers.UpSampling2D((2, 3))
    c = u2.get_config()
    assert (c["size"], c["interpolation"], c["data_format"]) == ((2, 3), "nearest",
                                                                  "channels_last")
    assert layers.UpSampling2D.from_config(c).get_config() == c
    assert layers.UpSampling1D.from_config(layers.UpSampling1D(4).get_config()).size == 4
    assert layers.UpSampling2D().compute_output_shape((None, None, 3, 1)) == (None, None, 6, 1)
    cases = [
        (lambda: layers.UpSampling2D((2, 0)),
         "The `size` argument must be a tuple of 2 integers. Received: size=(2, 0) including "
         "{0} that does not satisfy the requirement `> 0`."),
        (lambda: layers.UpSampling2D((1, 2, 3)),
         "The `size` argument must be a tuple of 2 integers. Received: size=(1, 2, 3)"),
        (lambda: layers.UpSampling2D(interpolation="linear"),
         '`interpolation` argument should be one of: "area", "bicubic", "bilinear", '
         '"gaussian", "lanczos3", "lanczos5", "mitchellcubic", "nearest". Received: "linear".'),
        (lambda: layers.UpSampling2D(data_format="channels_first"),
         "vdev's UpSampling2D takes data_format=None or 'channels_last' only, not "
         "'channels_first': vdev's convolutions are NHWC"),
        (lambda: layers.UpSampling1D(2.5), "vdev's UpSampling1D takes an int size, not 2.5"),
        (lambda: layers.UpSampling1D(0)(np.zeros((1, 2, 1), np.float32)),
         "vdev's UpSampling1D repeats each step size times; size 0 is below 1"),
        (lambda: layers.UpSampling2D(name="up")(np.zeros((1, 2, 1), np.float32)),
         'Input 0 of layer "up" is incompatible with the layer: expected ndim=4, found '
         "ndim=3. Full shape received: (1, 2, 1)"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_upsampling2d_bilinear(dev):
    x = rng.uniform(-1, 1, (2, 3, 4, 2)).astype(np.float32)
    for size in (2, (3, 2)):
        layer = layers.UpSampling2D(size, interpolation="bilinear")
        s = layer.size
        with vdev.device(dev):
            xv = vdev.Variable(x)
            with vdev.GradientTape() as tape:
                y = layer(xv)
                r = rng.uniform(-1, 1, tuple(y.shape)).astype(np.float32)
                loss = vdev.reduce_sum(y * r)
            g = tape.gradient(loss, xv)
        assert y.device.endswith(dev)
        assert y.shape == layer.compute_output_shape(x.shape) == (2, 3 * s[0], 4 * s[1], 2)
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        ty = F.interpolate(xt.permute(0, 3, 1, 2), scale_factor=s, mode="bilinear",
                           align_corners=False).permute(0, 2, 3, 1)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
        tg, = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), [xt])
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-5)
    c = layers.UpSampling2D(2, interpolation="bilinear").get_config()
    assert c["interpolation"] == "bilinear"
    assert layers.UpSampling2D.from_config(c).interpolation == "bilinear"
    with pytest.raises(vdev.errors.UnimplementedError) as e:
        layers.UpSampling2D(interpolation="bicubic")
    assert str(e.value) == ("vdev's UpSampling2D takes interpolation 'nearest' or 'bilinear', "
                            "not 'bicubic': vdev.image.resize lacks it")


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
def test_a_small_decoder_trains(interpolation):
    x = rng.uniform(-1, 1, (8, 2, 2, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, 4, 4, 1)).astype(np.float32)
    model = vdev.models.Sequential([
        layers.UpSampling2D(2, interpolation=interpolation, input_shape=(2, 2, 3)),
        layers.Conv2D(1, 3, padding="same", seed=1)])
    assert model.output_shape == (None, 4, 4, 1)
    model.compile(vdev.optimizers.Adam(0.05), "mse")
    loss = model.fit(x, y, batch_size=8, epochs=20, verbose=0).history["loss"]
    assert loss[-1] < 0.9 * loss[0]
