#!/usr/bin/env python3
"""text_classifier.py — a Keras text classifier on a logical GPU of its own,
written as a Keras user writes one: raw texts through TextVectorization,
Embedding(mask_zero=True) so the padding never counts, a bidirectional LSTM
with dropout, class weights for the rarer class, ModelCheckpoint keeping
the best model, ReduceLROnPlateau, and the saved model loaded back to
check it gives the same predictions.

The texts are made up: short reviews of 3 to 14 words from two small
vocabularies (good and bad words among neutral ones), one review in four
positive, so the class weights matter. The model trains on a logical GPU
of 1 GiB carved out of the first GPU (a simulated 16 GiB one where there
is none); at the end it prints the best epoch's validation accuracy, the
logical GPU's peak memory against its limit, and the table of ops and
copies per device (nothing runs or is copied elsewhere).
"""
import argparse
import os
import sys
import tempfile

import numpy as np

import vdev
from vdev import callbacks, layers


class Parser(argparse.ArgumentParser):
    """A bad option: a line saying why, then the usage, exit status 2."""

    def error(self, message):
        self.exit(2, "%s: %s\n\n%s" % (self.prog, message, self.format_usage()))


def whole(text, opt, lo, hi):
    if not text.strip().lstrip("+-").isdigit() or not lo <= int(text) <= hi:
        p.error("%s takes a whole number from %d to %d, not '%s'" % (opt, lo, hi, text))
    return int(text)


p = Parser(description=__doc__.split("\n\n")[0])
p.add_argument("--epochs", metavar="N", default="8", help="epochs of training (default 8)")
p.add_argument("--seed", metavar="N", default="1", help="seed of the data and the weights")
args = p.parse_args()
epochs = whole(args.epochs, "--epochs", 1, 10000)
seed = whole(args.seed, "--seed", 0, 1000000000)

# ---- a logical GPU of 1 GiB ---------------------------------------------------------------
gpus = vdev.config.list_physical_devices("GPU")
if not gpus and "VDEV_SIM_GPUS" not in os.environ:
    print("No GPU found: running on a simulated one, VDEV_SIM_GPUS=1x16GiB")
    os.environ["VDEV_SIM_GPUS"] = "1x16GiB"
    vdev.shutdown()
    gpus = vdev.config.list_physical_devices("GPU")
if not gpus:
    sys.exit("text_classifier.py: no visible GPU")
vdev.config.set_logical_device_configuration(
    gpus[0], [vdev.config.LogicalDeviceConfiguration(memory_limit=1024)])
gpu = vdev.config.list_logical_devices("GPU")[0].name

# ---- the texts ----------------------------------------------------------------------------
rng = np.random.default_rng(seed)
good = ["great", "lovely", "superb", "fun", "moving", "brilliant"]
bad = ["dull", "awful", "boring", "weak", "tedious", "poor"]
neutral = ["the", "film", "plot", "actor", "a", "was", "and", "music", "story", "it", "very"]


def review(positive):
    words = list(rng.choice(neutral, rng.integers(2, 10)))
    tone = good if positive else bad
    for _ in range(rng.integers(1, 5)):
        words.insert(rng.integers(0, len(words) + 1), rng.choice(tone))
    return " ".join(words).capitalize() + rng.choice([".", "!", "..."])


labels = (rng.uniform(size=600) < 0.25).astype(np.int32)
texts = [review(bool(y)) for y in labels]
split = 480

vectorize = layers.TextVectorization(max_tokens=40, output_sequence_length=14)
vectorize.adapt(texts[:split])
print("vocabulary (%d): %s ..." % (vectorize.vocabulary_size(),
                                    " ".join(vectorize.get_vocabulary()[:12])))

# ---- the model on its GPU -----------------------------------------------------------------
with vdev.device(gpu):
    ids = vectorize(texts)
    model = vdev.models.Sequential([
        layers.Embedding(vectorize.vocabulary_size(), 16, mask_zero=True, seed=seed),
        layers.Bidirectional(layers.LSTM(16, dropout=0.2, seed=seed)),
        layers.Dense(2, seed=seed + 1)], name="reviews")
    model.compile(vdev.optimizers.Adam(0.01),
                  vdev.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
x, y = ids.numpy(), labels
weights = {0: 1.0, 1: float((y[:split] == 0).sum() / max(1, (y[:split] == 1).sum()))}
best = os.path.join(tempfile.mkdtemp(), "best.keras")
history = model.fit(x[:split], y[:split], batch_size=32, epochs=epochs, verbose=2,
                    validation_data=(x[split:], y[split:]), class_weight=weights,
                    callbacks=[callbacks.ModelCheckpoint(best, monitor="val_accuracy",
                                                         save_best_only=True),
                               callbacks.ReduceLROnPlateau(monitor="val_loss", patience=2,
                                                           factor=0.5)]).history
top = int(np.argmax(history["val_accuracy"]))
print("best epoch %d: val_accuracy %.4f (class weights %s)"
      % (top + 1, history["val_accuracy"][top], {k: round(v, 3) for k, v in weights.items()}))

# ---- the best model, saved and loaded -----------------------------------------------------
with vdev.device(gpu):
    again = vdev.models.load_model(best)
    accuracy = again.evaluate(x[split:], y[split:], verbose=0)[1]
print("loaded %s: val_accuracy %.4f" % (os.path.basename(best), accuracy))
sample = ["A brilliant and moving story!", "The plot was dull and the music awful."]
with vdev.device(gpu):
    probs = vdev.nn.softmax(again(vectorize(sample))).numpy()
for text, pr in zip(sample, probs):
    print("  %-42s positive %.3f" % (repr(text), pr[1]))

info = vdev.config.experimental.get_memory_info(gpu)
print("\n%s: peak %d bytes, limit %d bytes" % (gpu, info["peak"], info["limit"]))
print()
print(vdev.placement.device_report(), end="")
