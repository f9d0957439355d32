"""Keras 2.11's TimeDistributed: the layer applied to every step (values
and gradients against the layer called step by step), its weights shared,
one call for all steps; built in a Sequential at add (Keras's summary) and
in a functional model; masks passed on (a Dense's) or refused (a layer
without masking: Keras's TypeError); the training flag reaching a Dropout
inside; configs; on the CPU and a simulated GPU; the errors in Keras's
words."""
import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(20261212)
f32 = np.float32


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_every_step_as_the_layer_alone(dev):
    x = rng.uniform(-1, 1, (3, 5, 4)).astype(f32)
    with vdev.device(dev):
        dense = layers.Dense(6, activation="tanh", seed=1)
        td = layers.TimeDistributed(dense)
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            y = td(xv)
            loss = vdev.reduce_sum(y * y)
        g = tape.gradient(loss, [xv] + td.variables)
        with vdev.GradientTape() as tape:
            steps = [dense(xv[:, t]) for t in range(5)]
            loss2 = sum(vdev.reduce_sum(s * s) for s in steps)
        g2 = tape.gradient(loss2, [xv] + dense.variables)
    assert y.device.endswith(dev) and y.shape == (3, 5, 6)
    assert td.variables == dense.variables and len(td.trainable_variables) == 2
    np.testing.assert_allclose(y.numpy(), np.stack([s.numpy() for s in steps], 1), rtol=1e-6,
                               atol=1e-7)
    for a, b in zip(g, g2):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    # a Conv1D over [batch, steps, length, channels]: one call for all steps
    conv = layers.Conv1D(2, 3, seed=2)
    x4 = rng.uniform(-1, 1, (2, 3, 8, 1)).astype(f32)
    out = layers.TimeDistributed(conv)(x4)
    assert out.shape == (2, 3, 6, 2)
    np.testing.assert_allclose(out.numpy()[:, 1], conv(x4[:, 1]).numpy(), rtol=1e-6, atol=1e-7)


def test_models_masks_training_and_configs():
    model = vdev.models.Sequential([
        layers.TimeDistributed(layers.Conv1D(2, 3, seed=1), input_shape=(4, 8, 1)),
        layers.TimeDistributed(layers.Flatten()),
        layers.LSTM(3, seed=2), layers.Dense(1, seed=3)])
    assert model.built and model.layers[0].count_params() == 8  # built at add, as Keras
    lines = []
    model.summary(print_fn=lines.append)
    assert any("(None, 4, 6, 2)" in l for l in lines) and any("(None, 4, 12)" in l for l in lines)
    x = rng.uniform(-1, 1, (8, 4, 8, 1)).astype(f32)
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    hist = model.fit(x, x.mean(axis=(1, 2)), epochs=6, verbose=0).history["loss"]
    assert hist[-1] < hist[0]
    inp = vdev.Input((5, 4))
    td = layers.TimeDistributed(layers.Dense(2, seed=4))
    fm = vdev.Model(inp, td(inp))
    assert td.built and fm.output_shape == (None, 5, 2)
    again = layers.TimeDistributed.from_config(td.get_config())
    assert isinstance(again.layer, layers.Dense) and again.layer.units == 2
    assert td.get_config()["layer"]["class_name"] == "Dense"
    # masks: a Dense passes them on; a layer without masking is Keras's TypeError
    ids = np.array([[1, 2, 0], [3, 0, 0]], np.int32)
    e = layers.Embedding(5, 4, mask_zero=True, seed=5)(ids)
    np.testing.assert_array_equal(layers.TimeDistributed(layers.Dense(2))(e)._keras_mask.numpy(),
                                  ids != 0)
    with pytest.raises(TypeError) as err:
        layers.TimeDistributed(layers.Reshape((2, 2), name="r"))(e)
    assert str(err.value).startswith("Layer r does not support masking, but was passed an "
                                     "input_mask")
    # the training flag reaches a Dropout inside
    drop = layers.TimeDistributed(layers.Dropout(0.5, seed=6))
    ones = np.ones((2, 3, 4), f32)
    np.testing.assert_array_equal(drop(ones).numpy(), ones)
    assert set(np.unique(drop(ones, training=True).numpy())) == {0.0, 2.0}


def test_errors():
    cases = [
        (lambda: layers.TimeDistributed("dense"),
         "Please initialize `TimeDistributed` layer with a `tf.keras.layers.Layer` instance. "
         "Received: dense"),
        (lambda: layers.TimeDistributed(layers.Dense(2))(np.zeros((2, 3), f32)),
         "`TimeDistributed` Layer should be passed an `input_shape ` with at least 3 "
         "dimensions, received: [2, 3]"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
