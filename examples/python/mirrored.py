#!/usr/bin/env python3
"""mirrored.py — one model trained data-parallel on every logical GPU with
vdev's MirroredStrategy, written as a TensorFlow user writes a custom
training loop; the Python form of ``vdev demo --mirrored``
(examples/mirrored.c), printing the same losses for the same options.

A classifier (an MLP, 32 -> 256 -> 4, Adam) learns which quadrant the first
two of its 32 inputs fall in. The model and the optimizer are made under
``strategy.scope()``: every variable gets a copy on each replica's device,
and each replica its own optimizer. Each step makes a global batch on the
host (CPU:0, so no GPU holds more than another); ``strategy.run`` runs the
step on every replica at once, each on its rows, with the per-example
cross-entropy and ``compute_average_loss``, and ``apply_gradients`` sums
the gradients over the replicas with vdev's ring before the same Adam
update on each. It prints the loss (and each replica's loss on its own
rows), checks that the replicas are still identical bit for bit, shows
each replica's memory and the imbalance figure, then trains the same model
from the same start on one GPU with the same global batch and compares the
step rates.

Without a GPU it runs on four simulated ones (VDEV_SIM_GPUS=4x16GiB).
"""
import argparse
import os
import re
import sys
import time

import numpy as np

import vdev


class Parser(argparse.ArgumentParser):
    """Refuses a bad option as `vdev demo --mirrored` does: a line saying
    why, then the usage, exit status 2."""

    def error(self, message):
        self.exit(2, "%s: %s\n\n%s" % (self.prog, message, self.format_usage()))


def whole(opt, lo, hi, default):
    """Option opt's value, a whole number from lo to hi (default if not given)."""
    text = getattr(args, opt[2:])
    if text is None:
        return default
    if not re.fullmatch(r"\s*[+-]?[0-9]+", text) or not lo <= int(text) <= hi:
        p.error("%s takes a whole number from %d to %d, not '%s'" % (opt, lo, hi, text))
    return int(text)


p = Parser(description=__doc__.split("\n\n")[0])
p.add_argument("--epochs", metavar="N", help="epochs (default 1)")
p.add_argument("--steps", metavar="N", help="steps per epoch (default 200)")
p.add_argument("--batch", metavar="N", help="global batch (default 1024)")
p.add_argument("--seed", metavar="N", help="seed of the data and the weights (default 1)")
args = p.parse_args()
args.epochs = whole("--epochs", 1, 1000000, 1)
args.steps = whole("--steps", 1, 1000000, 200)
args.batch = whole("--batch", 1, 1 << 20, 1024)
args.seed = whole("--seed", 0, 1000000000, 1)
IN, HIDDEN, CLASSES = 32, 256, 4

if not vdev.config.list_physical_devices("GPU") and "VDEV_SIM_GPUS" not in os.environ:
    print("No GPU found: running on simulated GPUs, VDEV_SIM_GPUS=4x16GiB")
    os.environ["VDEV_SIM_GPUS"] = "4x16GiB"
    vdev.shutdown()  # forget the devices found so far

strategy = vdev.distribute.MirroredStrategy()  # every logical GPU
n = strategy.num_replicas_in_sync
devices = strategy.extended.worker_devices
print("Replicas: %d, on %s" % (n, " ".join(devices)))
print("Model: MLP %d-%d-%d, Adam; global batch %d (%d per replica%s), %d steps"
      % (IN, HIDDEN, CLASSES, args.batch, args.batch // n,
         ", a row more on some" if args.batch % n else "", args.epochs * args.steps))

with strategy.scope():
    model = vdev.models.MLP([IN, HIDDEN, CLASSES], activation="relu", seed=args.seed)
    optimizer = vdev.optimizers.Adam(learning_rate=0.003)
for d in devices:
    vdev.config.experimental.reset_memory_stats(d)
loss_fn = vdev.losses.CategoricalCrossentropy(from_logits=True, reduction="none")


def global_batch(k):
    """The global batch of step k on the host: x uniform in [-1, 1], and the
    one-hot quadrant of (x0, x1)."""
    with vdev.device("CPU:0"):
        x = vdev.random.uniform([args.batch, IN], -1, 1, seed=args.seed * 7919 + k)
        xs = x.numpy()
        onehot = np.zeros((args.batch, CLASSES), np.float32)
        onehot[np.arange(args.batch), (xs[:, 0] > 0) * 2 + (xs[:, 1] > 0)] = 1
        return x, vdev.constant(onehot)


def batches(steps):
    for k in range(steps):
        yield global_batch(k)


def train_step(x, y):
    """One step on this replica's rows of the global batch."""
    with vdev.GradientTape() as tape:
        per_example = loss_fn(y, model(x))
        loss = vdev.nn.compute_average_loss(per_example)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    own = vdev.reduce_mean(per_example) if len(per_example) else vdev.constant(0.0)
    return loss, own  # its share of the loss, and its mean over its own rows


n_steps = args.epochs * args.steps
every = n_steps // 10 if n_steps >= 10 else 1
first = last = None
t_mirrored = 0.0
dataset = strategy.experimental_distribute_dataset(batches(n_steps))
for k, (x, y) in enumerate(dataset):
    show = k % every == 0 or k == n_steps - 1
    t0 = time.perf_counter()
    losses, own = strategy.run(train_step, args=(x, y))
    last = float(strategy.reduce("SUM", losses, axis=None))  # waits for every replica
    if not show:
        t_mirrored += time.perf_counter() - t0
    first = last if first is None else first
    if show:
        print("step %4d  loss %.4f  replicas %s" % (k, last, " ".join(
            "%.4f" % float(v) for v in strategy.experimental_local_results(own))))
    del losses, own  # free them before the next step, as the C demo does
identical = all(all(np.array_equal(v.values[0].numpy(), c.numpy()) for c in v.values[1:])
                for v in model.trainable_variables)
print("Loss fell %.4f -> %.4f; replicas identical bit for bit: %s"
      % (first, last, "yes" if identical else "NO"))


def fmt(b):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= size:
            return "%.2f %s" % (b / size, unit)
    return "%d B" % b


print("Memory per replica (in use, peak, limit):")
for r, d in enumerate(devices):
    mi = strategy.memory_info(r)
    print("  replica %d  %-14s %10s %10s %10s" % (r, d, fmt(mi["current"]), fmt(mi["peak"]),
                                                  fmt(mi["limit"])))
print("Memory imbalance (largest peak / smallest): %.3f" % strategy.memory_imbalance())

# The same model, from the same start, on one GPU with the same global batch.
one = devices[0]
with vdev.device(one):
    model1 = vdev.models.MLP([IN, HIDDEN, CLASSES], activation="relu", seed=args.seed)
optimizer1 = vdev.optimizers.Adam(learning_rate=0.003)
t_one, timed, one_last = 0.0, 0, None
for k in range(n_steps):
    xg, yg = global_batch(k)
    t0 = time.perf_counter()
    with vdev.device(one):
        x, y = vdev.identity(xg), vdev.identity(yg)
        with vdev.GradientTape() as tape:
            loss = vdev.reduce_sum(loss_fn(y, model1(x))) / float(args.batch)
        grads = tape.gradient(loss, model1.trainable_variables)
        optimizer1.apply_gradients(zip(grads, model1.trainable_variables))
        one_last = float(loss)
    if not (k % every == 0 or k == n_steps - 1):
        t_one += time.perf_counter() - t0
        timed += 1
if timed and t_mirrored > 0 and t_one > 0:
    print("Step rate: %d replicas %.1f steps/s (%.0f examples/s); one GPU, same global batch, "
          "%.1f steps/s: %.2fx" % (n, timed / t_mirrored, timed / t_mirrored * args.batch,
                                   timed / t_one, t_one / t_mirrored))
print("One GPU after %d steps: loss %.4f (mirrored: %.4f)" % (n_steps, one_last, last))
sys.exit(0 if identical else 1)
