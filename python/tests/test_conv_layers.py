"""Keras's convolutional layers in vdev.layers: Conv2D (its kernel and bias
made as Dense makes its weights: on the layer's device, at input_shape or
the first call), MaxPooling2D and AveragePooling2D (strides default to the
pool size), Flatten; their outputs against vdev.nn's ops, Keras's argument
errors and vdev's refusals, and a small Sequential CNN trained with Adam
whose loss falls, the same numbers on CPU:0 and GPU:1."""
import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(7)


def test_layers_against_the_ops():
    x = rng.uniform(-1, 1, (2, 7, 6, 3)).astype(np.float32)
    conv = layers.Conv2D(5, (3, 2), strides=2, padding="same", activation="relu", seed=3)
    y = conv(x)
    assert conv.kernel.shape == (3, 2, 3, 5) and conv.bias.shape == (5,)
    want = vdev.nn.relu(vdev.nn.conv2d(x, conv.kernel, 2, "SAME") + conv.bias)
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    assert y.shape == (2, 4, 3, 5)
    mp = layers.MaxPooling2D()(x)
    np.testing.assert_array_equal(mp.numpy(), vdev.nn.max_pool2d(x, 2, 2, "VALID").numpy())
    ap = layers.AveragePooling2D(3, 1, "same")(x)
    np.testing.assert_array_equal(ap.numpy(), vdev.nn.avg_pool2d(x, 3, 1, "SAME").numpy())
    assert layers.Flatten()(mp).shape == (2, 3 * 3 * 3)
    c = conv.get_config()
    assert c["filters"] == 5 and c["kernel_size"] == (3, 2) and c["padding"] == "same"
    assert c["strides"] == (2, 2) and c["activation"] == "relu"


def test_trainable_as_every_keras_layer():
    """Every layer takes Keras's trainable=; a frozen Conv2D lists no
    trainable variables, and a model's setting reaches it."""
    conv = layers.Conv2D(2, 3, input_shape=(6, 6, 1), trainable=False)
    assert conv.trainable_variables == [] and len(conv.non_trainable_weights) == 2
    assert conv.get_config()["trainable"] is False
    for layer in (layers.MaxPooling2D(trainable=False), layers.AveragePooling2D(trainable=False),
                  layers.Flatten(trainable=False)):
        assert layer.trainable is False and layer.get_config()["trainable"] is False
    model = vdev.models.Sequential([layers.Conv2D(2, 3, input_shape=(6, 6, 1)), layers.Flatten()])
    model.trainable = False
    assert model.trainable_variables == [] and not model.layers[0].trainable


def test_conv2d_builds_on_its_device_and_checks_its_input():
    with vdev.device("GPU:1"):
        conv = layers.Conv2D(2, 3, input_shape=(8, 8, 4))
    assert conv.built and conv.kernel.device.endswith("GPU:1")
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 4"):
        conv(np.zeros((1, 8, 8, 3), np.float32))
    with pytest.raises(ValueError, match="expected min_ndim=4, found ndim=3"):
        conv(np.zeros((8, 8, 4), np.float32))


def test_keras_argument_errors_and_what_vdev_lacks():
    with pytest.raises(ValueError, match="The `padding` argument must be a list/tuple or one of"):
        layers.Conv2D(2, 3, padding="full")
    with pytest.raises(ValueError, match="The `kernel_size` argument must be a tuple of 2 "
                       "integers. Received: kernel_size=\\(1, 2, 3\\)"):
        layers.Conv2D(2, (1, 2, 3))
    with pytest.raises(ValueError, match="Invalid value for argument `filters`. Expected a "
                       "strictly positive value. Received filters=0."):
        layers.Conv2D(0, 3)
    with pytest.raises(ValueError, match="channels_last"):
        layers.Conv2D(2, 3, data_format="channels_first")
    with pytest.raises(ValueError, match=r"`strides > 1` not supported in conjunction with "
                       r"`dilation_rate > 1`. Received: strides=\(2, 1\) and "
                       r"dilation_rate=\(1, 3\)"):
        layers.Conv2D(2, 3, strides=(2, 1), dilation_rate=(1, 3))
    with pytest.raises(ValueError, match="groups=1 only"):
        layers.Conv2D(2, 3, groups=2)
    with pytest.raises(ValueError, match="channels_last"):
        layers.MaxPooling2D(data_format="channels_first")


def train(dev):
    x = np.random.default_rng(1).uniform(-1, 1, (8, 8, 8, 2)).astype(np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    with vdev.device(dev):
        model = vdev.models.Sequential([
            layers.Conv2D(4, 3, padding="same", activation="relu", seed=11),
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
    assert model.layers[0].kernel.device.endswith(dev)
    return losses


def test_a_small_cnn_trains_the_same_on_cpu_and_gpu():
    cpu, gpu = train("CPU:0"), train("GPU:1")
    assert cpu[-1] < 0.8 * cpu[0]
    assert all(b < a for a, b in zip(cpu, cpu[1:]))
    assert cpu == gpu


def test_conv2d_dilation_rate():
    """Keras's dilation_rate: the kernel's taps d apart, the output's size by
    Keras's conv_output_length, the values those of vdev.nn.conv2d with
    dilations, and the rate in the config."""
    x = np.random.default_rng(7).uniform(-1, 1, (2, 10, 9, 3)).astype(np.float32)
    conv = layers.Conv2D(4, (3, 2), dilation_rate=(2, 3), input_shape=(10, 9, 3), seed=5)
    assert conv.compute_output_shape((None, 10, 9, 3)) == (None, 6, 6, 4)
    y = conv(x)
    want = vdev.nn.conv2d(x, conv.kernel, 1, "VALID", dilations=[2, 3]) + conv.bias
    assert y.shape == (2, 6, 6, 4)
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    same = layers.Conv2D(4, 3, padding="same", dilation_rate=2, input_shape=(10, 9, 3))
    assert same.compute_output_shape((None, 10, 9, 3)) == (None, 10, 9, 4)
    assert same(x).shape == (2, 10, 9, 4)
    cfg = conv.get_config()
    assert cfg["dilation_rate"] == (2, 3)
    again = layers.Conv2D.from_config(cfg)
    assert again.dilation_rate == (2, 3)
    with pytest.raises(ValueError, match="One of the dimensions in the output is <= 0"):
        layers.Conv2D(1, 3, dilation_rate=5).compute_output_shape((None, 10, 9, 3))
