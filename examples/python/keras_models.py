#!/usr/bin/env python3
"""keras_models.py — three Keras models of different kinds sharing one card,
each on a logical GPU of its own with a hard limit, as a Keras user writes
them: a bidirectional LSTM over padded sequences of tokens, the padding
masked (Embedding's mask_zero) and the inputs dropped in training (4 GiB),
a small convolutional
classifier of images with Keras's preprocessing layers and a GELU (2 GiB),
and a SELU/swish regressor of tabular rows (1 GiB).

Each model is built under ``vdev.device(...)`` and trained with
``compile``/``fit``, one epoch of each in turn; after every round it prints
each model's loss, and at the end how much of its logical GPU each model
used at most and where its ops ran. Without a GPU it runs on one simulated
card (VDEV_SIM_GPUS=1x16GiB).
"""
import argparse
import os
import sys

import numpy as np

import vdev
from vdev import layers


class Parser(argparse.ArgumentParser):
    """A bad option: a line saying why, then the usage, exit status 2."""

    def error(self, message):
        self.exit(2, "%s: %s\n\n%s" % (self.prog, message, self.format_usage()))


def whole(text, opt, lo, hi):
    if not text.strip().lstrip("+-").isdigit() or not lo <= int(text) <= hi:
        p.error("%s takes a whole number from %d to %d, not '%s'" % (opt, lo, hi, text))
    return int(text)


p = Parser(description=__doc__.split("\n\n")[0])
p.add_argument("--epochs", metavar="N", default="4", help="rounds of one epoch each (default 4)")
p.add_argument("--seed", metavar="N", default="1", help="seed of the data and the weights")
args = p.parse_args()
epochs = whole(args.epochs, "--epochs", 1, 10000)
seed = whole(args.seed, "--seed", 0, 1000000000)

# ---- one card, three logical GPUs with hard limits ---------------------------------------
gpus = vdev.config.list_physical_devices("GPU")
if not gpus and "VDEV_SIM_GPUS" not in os.environ:
    print("No GPU found: running on a simulated one, VDEV_SIM_GPUS=1x16GiB")
    os.environ["VDEV_SIM_GPUS"] = "1x16GiB"
    vdev.shutdown()  # forget the devices found so far
    gpus = vdev.config.list_physical_devices("GPU")
if not gpus:
    sys.exit("keras_models.py: no visible GPU")
limits_mib = [4096, 2048, 1024]
vdev.config.set_logical_device_configuration(
    gpus[0], [vdev.config.LogicalDeviceConfiguration(memory_limit=m) for m in limits_mib])
devices = [d.name for d in vdev.config.list_logical_devices("GPU")][:3]

# ---- the data: sequences, images, rows ---------------------------------------------------
rng = np.random.default_rng(seed)
# token ids 1..9, each sequence 4 to 20 long, padded with 0 to 20; the target
# is the share of odd tokens among the sequence's own (the padding must not count)
seq_x = rng.integers(1, 10, (256, 20)).astype(np.int32)
for row, n in enumerate(rng.integers(4, 21, 256)):
    seq_x[row, n:] = 0
real = seq_x != 0
seq_y = ((seq_x % 2 == 1) & real).sum(axis=1, keepdims=True) / real.sum(axis=1, keepdims=True)
seq_y = seq_y.astype(np.float32)
img_x = rng.integers(0, 256, (256, 18, 18, 1)).astype(np.float32)
img_y = (img_x[:, 1:9, :, 0].mean(axis=(1, 2)) > img_x[:, 9:17, :, 0].mean(axis=(1, 2)))
img_y = img_y.astype(np.int32)
tab_x = rng.uniform(-2, 2, (256, 8)).astype(np.float32)
tab_y = np.sin(tab_x[:, :4].sum(axis=1, keepdims=True)).astype(np.float32)

# ---- the models, each on its own logical GPU ---------------------------------------------
with vdev.device(devices[0]):
    sequences = vdev.models.Sequential([
        layers.Embedding(10, 8, mask_zero=True, input_length=20, seed=seed),
        layers.Bidirectional(layers.LSTM(32, dropout=0.1, seed=seed)),
        layers.Dense(1, seed=seed)], name="sequences")
    sequences.compile(vdev.optimizers.Adam(0.01), "mse")
with vdev.device(devices[1]):
    images = vdev.models.Sequential([
        layers.Rescaling(1 / 255.0, input_shape=(18, 18, 1)),
        layers.CenterCrop(16, 16),
        layers.Conv2D(8, 3, padding="same", activation="gelu", seed=seed),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(2, seed=seed + 1)], name="images")
    images.compile(vdev.optimizers.Adam(0.01),
                   vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
with vdev.device(devices[2]):
    rows = vdev.models.Sequential([
        layers.Dense(64, activation="swish", input_shape=(8,), seed=seed),
        layers.Dense(64, activation="selu", seed=seed + 1),
        layers.Dense(1, seed=seed + 2)], name="rows")
    rows.compile(vdev.optimizers.Adam(0.01), "mse")

jobs = [(sequences, seq_x, seq_y), (images, img_x, img_y), (rows, tab_x, tab_y)]
print("Three models on one card, each on its own logical GPU:")
for (model, _, _), dev, mib in zip(jobs, devices, limits_mib):
    print("  %-9s on %s (limit %d MiB): %d weights"
          % (model.name, dev, mib, sum(int(np.prod(v.shape)) for v in model.variables)))

first = []
for epoch in range(epochs):
    losses = [model.fit(x, y, batch_size=32, epochs=1, verbose=0, shuffle=False)
              .history["loss"][-1] for model, x, y in jobs]
    first = first or losses
    print("round %d/%d  loss%s" % (epoch + 1, epochs, "".join(
        "  %s %.5f" % (m.name, l) for (m, _, _), l in zip(jobs, losses))))
if epochs > 1:
    print("Final loss / first loss: " + ", ".join(
        "%s %.3f" % (m.name, l / f) for (m, _, _), l, f in zip(jobs, losses, first)))

print("\nMemory of each logical GPU (its limit is hard: a model cannot take another's):")
for (model, _, _), dev, mib in zip(jobs, devices, limits_mib):
    info = vdev.config.experimental.get_memory_info(dev)
    print("  %-9s %s: peak %d bytes, now %d bytes, limit %d bytes"
          % (model.name, dev, info["peak"], info["current"], info["limit"]))
print()
print(vdev.placement.device_report(), end="")
