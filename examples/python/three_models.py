#!/usr/bin/env python3
"""three_models.py — the bug report's program in vdev's Python: three models
on GPU:0, GPU:1 and GPU:2, written as a TensorFlow user writes it.

Default: every training step runs inside its model's device scope, its input
copied there with ``identity`` and its output moved to the host with
``.cpu()``; the three models are chained (model 2 learns from model 1's
output, model 3 from model 2's), each against a fixed random "teacher"
network. It prints the same losses as ``vdev demo`` (the C program
examples/chain3.c) for the same options, and that memory stays flat.

``--tf-placement``: the same kind of program with device scopes only around
building the models, under TensorFlow's placement rule (unscoped ops go to
GPU:0), as in the report. GPU:0 then carries everything, and vdev's placement
audit names every op that ran away from its model's GPU; the losses are
those of ``vdev demo --tf-placement``. ``--vdev-placement`` runs it under
vdev's rule (unscoped ops follow their variables).

Without a GPU it runs on three simulated ones (VDEV_SIM_GPUS=3x16GiB); with
one or two GPUs the first is split into logical GPUs of 1 GiB each.
"""
import argparse
import os
import re
import sys
import time

import vdev


class Parser(argparse.ArgumentParser):
    """Refuses a bad option as `vdev demo` does: a line saying why, then the
    usage, exit status 2."""

    def error(self, message):
        self.exit(2, "%s: %s\n\n%s" % (self.prog, message, self.format_usage()))


def whole(opt, lo, hi, default):
    """Option opt's value, a whole number from lo to hi (default if not given)."""
    text = getattr(args, opt[2:].replace("-", "_"))
    if text is None:
        return default
    if not re.fullmatch(r"\s*[+-]?[0-9]+", text) or not lo <= int(text) <= hi:
        p.error("%s takes a whole number from %d to %d, not '%s'" % (opt, lo, hi, text))
    return int(text)


p = Parser(description=__doc__.split("\n\n")[0])
p.add_argument("--tf-placement", action="store_true",
               help="scopes only around building the models, TensorFlow's placement rule")
p.add_argument("--vdev-placement", action="store_true",
               help="with --tf-placement: vdev's placement rule instead")
p.add_argument("--epochs", metavar="N", help="epochs (default 5; 1 with --tf-placement)")
p.add_argument("--steps", metavar="N",
               help="steps per epoch (default 100; 50 with --tf-placement)")
p.add_argument("--batch", metavar="N", help="examples per step (default 64)")
p.add_argument("--seed", metavar="N", help="seed of the data and the weights (default 1)")
p.add_argument("--log-placement", action="store_true", help="print the device of every op")
args = p.parse_args()
epochs = whole("--epochs", 1, 1000000, 1 if args.tf_placement else 5)
steps = whole("--steps", 1, 1000000, 50 if args.tf_placement else 100)
args.batch = whole("--batch", 1, 1 << 20, 64)
args.seed = whole("--seed", 0, 1000000000, 1)
if args.vdev_placement and not args.tf_placement:
    p.error("--vdev-placement goes with --tf-placement")

# ---- devices: three logical GPUs, whatever the machine has ------------------------------
gpus = vdev.config.list_physical_devices("GPU")
if not gpus and "VDEV_SIM_GPUS" not in os.environ:
    print("No GPU found: running on simulated GPUs, VDEV_SIM_GPUS=3x16GiB")
    os.environ["VDEV_SIM_GPUS"] = "3x16GiB"
    vdev.shutdown()  # forget the devices found so far
    gpus = vdev.config.list_physical_devices("GPU")
if not gpus:
    sys.exit("three_models.py: no visible GPU")
for gpu in gpus:
    vdev.config.set_memory_growth(gpu, True)
if len(gpus) < 3:  # split the first GPU so that there are three
    vdev.config.set_logical_device_configuration(
        gpus[0], [vdev.config.LogicalDeviceConfiguration(memory_limit=1024)] * (4 - len(gpus)))
devices = [d.name for d in vdev.config.list_logical_devices("GPU")[:3]]
vdev.debugging.set_log_device_placement(args.log_placement)
mse = vdev.losses.MeanSquaredError()


def in_use(device):
    return vdev.config.experimental.get_memory_info(device)["current"]


# ---- the main job: every step inside its model's scope -----------------------------------
def chained():
    dims = [[32, 64, 64, 16], [16, 64, 64, 16], [16, 64, 64, 8]]
    teachers, models, optimizers, loss_sums = [], [], [], []
    for k, device in enumerate(devices):
        with vdev.device(device):
            teachers.append(vdev.models.MLP(dims[k], activation="tanh", output_activation="tanh",
                                            seed=args.seed + 100 + k))
            models.append(vdev.models.MLP(dims[k], activation="relu", seed=args.seed + k))
            loss_sums.append(vdev.Variable([0.0]))
        optimizers.append(vdev.optimizers.Adam(learning_rate=0.003))
    print("Training 3 chained MLPs (batch %d, %d steps per epoch):" % (args.batch, steps))
    for k, device in enumerate(devices):
        print("  model %d on %s" % (k + 1, device))

    def train_step(x):
        inputs, clean = x, x  # model k's input, and its teacher's
        for k, device in enumerate(devices):
            with vdev.device(device):
                inputs = vdev.identity(inputs)  # copied to this model's GPU
                clean = vdev.identity(clean)
                target = teachers[k](clean)
                with vdev.GradientTape() as tape:
                    y = models[k](inputs)
                    loss = mse(target, y)
                variables = models[k].trainable_variables
                grads = tape.gradient(loss, variables)
                optimizers[k].apply_gradients(zip(grads, variables))
                loss_sums[k].assign_add(loss)
            inputs, clean = y, target
        return y.cpu()  # the last model's output, on the host

    first, used = [], []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        for step in range(steps):
            with vdev.device(devices[0]):
                x = vdev.random.uniform([args.batch, 32], -1, 1,
                                        seed=args.seed * 7919 + epoch * steps + step)
            out = train_step(x)
            if epoch == 0 and step == 0:
                used = [in_use(d) for d in devices]
        rate = steps / (time.perf_counter() - t0)
        losses = [float(s.numpy()[0]) / steps for s in loss_sums]
        first = first or losses
        print("epoch %d/%d  loss%s  (%.1f steps/s)" % (
            epoch + 1, epochs, "".join("  model %d %.5f" % (k + 1, l) for k, l in enumerate(losses)),
            rate))
        for s in loss_sums:
            s.assign(s * 0.0)
    if epochs == 1:  # no first loss to compare with (its ratio would be 1)
        print("Final loss / first loss: one epoch, nothing to compare (--epochs 2 or more)")
    else:
        print("Final loss / first loss: " + ", ".join(
            "model %d %.3f" % (k + 1, l / f) for k, (l, f) in enumerate(zip(losses, first))))
    print("Output of the last step, moved with .cpu(): shape %s on %s"
          % (tuple(out.shape), out.device))
    steady = True
    for k, d in enumerate(devices):
        steady &= in_use(d) == used[k]
        print("%s in use after step 1: %d bytes, after step %d: %d bytes"
              % (d, used[k], epochs * steps, in_use(d)))
    print("Memory per step: %s\n" % ("steady (nothing leaks)" if steady else "GREW (a leak)"))
    print(vdev.placement.device_report(), end="")


# ---- the bug report: scopes only around building the models ------------------------------
def tf_placement():
    if not args.vdev_placement:
        vdev.placement.set_policy("tf")
    print("Placement rule: %s" % ("vdev's (unscoped ops follow their variables)"
                                  if args.vdev_placement else
                                  "TensorFlow's (unscoped ops go to GPU:0)"))
    models, optimizers = [], []
    for k, device in enumerate(devices):
        with vdev.device(device):  # "with tf.device(...): model = build()"
            models.append(vdev.models.MLP([32, 64, 64, 32], activation="relu",
                                          seed=args.seed + k))
        optimizers.append(vdev.optimizers.Adam())
        print("  model %d built on %s" % (k + 1, device))

    def train_step(x):  # outside any device scope, as in the report
        target, inputs, losses = vdev.tanh(x), x, []
        for model, opt in zip(models, optimizers):
            with vdev.GradientTape() as tape:
                y = model(inputs)
                loss = mse(target, y)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            losses.append(loss)
            inputs = y
        return losses

    for epoch in range(epochs):
        for step in range(steps):
            x = vdev.random.uniform([args.batch, 32], -1, 1,
                                    seed=1000 * args.seed + epoch * steps + step)
            losses = train_step(x)
        print("epoch %d/%d  loss%s" % (epoch + 1, epochs, "".join(
            "  model %d %.5f" % (k + 1, float(l.numpy())) for k, l in enumerate(losses))))
    print("\nWhere the work ran after %d steps:" % (epochs * steps))
    print(vdev.placement.device_report(), end="")
    audit = vdev.placement.audit()
    print("\nPlacement audit: %d kind%s of op ran away from their model's GPU"
          % (len(audit), "" if len(audit) == 1 else "s"))
    for a in audit:
        print("  %6d x %-28s ran on %s, variables on %s, %d bytes copied there"
              % (a.count, a.op_type, a.ran_on, a.home, a.bytes_copied))


tf_placement() if args.tf_placement else chained()
