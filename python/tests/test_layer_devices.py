"""Layers without weights keep to the device they were made on, as Dense
does: made under vdev.device('GPU:1') and given a NumPy batch outside any
scope (what fit does), each runs on GPU:1, with no op on GPU:0 and nothing
copied; a scope open at the call still decides; one made outside any scope
runs where the default puts it. A model of such a first layer built under a
scope trains without touching another GPU; and examples/python/
keras_models.py, three Keras models on three logical GPUs of one card,
keeps each model's ops on its own GPU."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(20261206)
f32 = np.float32

IMAGE = (2, 6, 6, 2)
SEQ = (2, 6, 3)
LAYERS = [
    (lambda: layers.Rescaling(0.5, 1.0), IMAGE), (lambda: layers.Resizing(3, 4), IMAGE),
    (lambda: layers.CenterCrop(4, 4), IMAGE), (lambda: layers.ZeroPadding2D(1), IMAGE),
    (lambda: layers.Cropping2D(1), IMAGE), (lambda: layers.UpSampling2D(2), IMAGE),
    (lambda: layers.MaxPooling2D(), IMAGE), (lambda: layers.AveragePooling2D(), IMAGE),
    (lambda: layers.GlobalAveragePooling2D(), IMAGE), (lambda: layers.GlobalMaxPooling2D(), IMAGE),
    (lambda: layers.Flatten(), IMAGE), (lambda: layers.Reshape((36, 2)), IMAGE),
    (lambda: layers.Permute((2, 1, 3)), IMAGE), (lambda: layers.Activation("gelu"), IMAGE),
    (lambda: layers.ReLU(6.0), IMAGE), (lambda: layers.ELU(), IMAGE),
    (lambda: layers.LeakyReLU(), IMAGE), (lambda: layers.Softmax(), IMAGE),
    (lambda: layers.Dropout(0.5), IMAGE), (lambda: layers.ZeroPadding1D(2), SEQ),
    (lambda: layers.Cropping1D(1), SEQ), (lambda: layers.UpSampling1D(2), SEQ),
    (lambda: layers.MaxPooling1D(), SEQ), (lambda: layers.AveragePooling1D(), SEQ),
    (lambda: layers.GlobalAveragePooling1D(), SEQ),
]


@pytest.mark.parametrize("make,shape", LAYERS,
                         ids=[type(m()).__name__ for m, _ in LAYERS])
def test_a_weightless_layer_keeps_to_its_device(make, shape):
    x = rng.uniform(-1, 1, shape).astype(f32)
    with vdev.device("GPU:1"):
        layer = make()
    before = vdev.placement.op_count(device="/device:GPU:0")
    copied = vdev.placement.bytes_copied()
    y = layer(x)
    assert y.device.endswith("GPU:1")
    assert vdev.placement.op_count(device="/device:GPU:0") == before
    assert vdev.placement.bytes_copied() == copied
    with vdev.device("CPU:0"):  # a scope at the call decides
        assert layer(x).device.endswith("CPU:0")
    free = make()
    with vdev.device("GPU:1"):
        assert free(x).device.endswith("GPU:1")


@pytest.mark.parametrize("merge", [layers.Concatenate, layers.Add, layers.Multiply,
                                   layers.Average, layers.Maximum])
def test_a_merge_layer_of_numpy_inputs_keeps_to_its_device(merge):
    a, b = (rng.uniform(-1, 1, (2, 3)).astype(f32) for _ in range(2))
    with vdev.device("GPU:1"):
        layer = merge()
    before = vdev.placement.op_count(device="/device:GPU:0")
    copied = vdev.placement.bytes_copied()
    assert layer([a, b]).device.endswith("GPU:1")
    assert vdev.placement.op_count(device="/device:GPU:0") == before
    assert vdev.placement.bytes_copied() == copied
    with vdev.device("CPU:0"):
        assert layer([a, b]).device.endswith("CPU:0")


def test_a_functional_model_of_two_numpy_inputs_trains_on_its_gpu():
    with vdev.device("GPU:1"):
        a, b = vdev.Input((4,)), vdev.Input((3,))
        out = layers.Dense(1, seed=1)(layers.Concatenate()([a, b]))
        model = vdev.Model([a, b], out)
        model.compile(vdev.optimizers.Adam(0.01), "mse")
    x = [rng.uniform(-1, 1, (8, 4)).astype(f32), rng.uniform(-1, 1, (8, 3)).astype(f32)]
    before = vdev.placement.op_count(device="/device:GPU:0")
    copied = vdev.placement.bytes_copied()
    model.fit(x, rng.uniform(-1, 1, (8, 1)).astype(f32), batch_size=4, epochs=1, verbose=0)
    assert vdev.placement.op_count(device="/device:GPU:0") == before
    assert vdev.placement.bytes_copied() == copied


def test_a_model_with_a_weightless_first_layer_trains_on_its_gpu():
    x = rng.integers(0, 256, (16, 8, 8, 1)).astype(f32)
    y = rng.integers(0, 2, 16).astype(np.int32)
    with vdev.device("GPU:1"):
        model = vdev.models.Sequential([
            layers.Rescaling(1 / 255.0, input_shape=(8, 8, 1)),
            layers.Conv2D(2, 3, seed=1), layers.Flatten(), layers.Dense(2, seed=2)])
        model.compile(vdev.optimizers.Adam(0.01),
                      vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = vdev.placement.op_count(device="/device:GPU:0")
    copied = vdev.placement.bytes_copied(to_device="/device:GPU:1")
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert vdev.placement.op_count(device="/device:GPU:0") == before
    assert vdev.placement.bytes_copied(to_device="/device:GPU:1") == copied


def test_keras_models_example():
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "examples", "python", "keras_models.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDEV_SIM", "VDEV_VISIBLE"))}
    env["VDEV_SIM_GPUS"] = "1x16GiB"
    out = subprocess.run([sys.executable, script, "--epochs", "3"], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    ratios = dict(re.findall(r"(sequences|images|rows) ([0-9.]+)", text.split(
        "Final loss / first loss:")[1].splitlines()[0]))
    assert set(ratios) == {"sequences", "images", "rows"}
    assert all(float(r) < 1.0 for r in ratios.values()), text
    # each model's memory within its limit; nothing copied between the GPUs
    for name, dev, limit in (("sequences", "GPU:0", 4 << 30), ("images", "GPU:1", 2 << 30),
                             ("rows", "GPU:2", 1 << 30)):
        m = re.search(r"%s +/device:%s: peak (\d+) bytes, now \d+ bytes, limit (\d+) bytes"
                      % (name, dev), text)
        assert m and 0 < int(m.group(1)) <= int(m.group(2)) == limit, text
        row = re.search(r"/device:%s +(\d+) .* (\S+ \S+) +(\S+ \S+)$" % dev, text, re.M)
        assert row and int(row.group(1)) > 0
        assert row.group(2) == "0 B" and row.group(3) == "0 B", row.group(0)
    bad = subprocess.run([sys.executable, script, "--epochs", "0"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "--epochs takes a whole number from 1 to 10000, not '0'" in bad.stderr
