#!/usr/bin/env python3
"""priority.py — a critical model keeps its share of a GPU while two
secondary models grow and shrink in what is left; the Python form of
``vdev demo --priority`` (examples/priority.c).

"Give the critical task a fixed share of memory and let the secondary tasks
use what is left; watch the memory info and adjust what they get." One GPU
(a simulated 3 GiB card where no GPU is present) is split into three
logical GPUs before start-up: the critical model's, with the critical
priority, and two secondary models' with low priority. Once the runtime
runs and the card's budget is known (its free memory less the driver
reserve, or TF_DEVICE_MIN_SYS_MEMORY_IN_MB, or a memory fraction), the
arena is that budget, at most 3 GiB; under the 276 MiB the three models
need it stops, saying so and what would be enough, with exit status 1 (as
`vdev demo --priority`, in the same words). The shares are set at run time:
the critical model gets a floor (a quarter of the arena, guaranteed), the
secondary models no floor and half the rest each as their ceilings. Each
model trains in its own thread. The secondary models double their batch
every few steps; when an allocation fails (vdev.OutOfMemoryError) they
halve it and go on, and when vdev tells them of memory pressure (their
ceiling lowered below what they hold) they halve it before the next step. A
monitor thread runs the policy loop below: the critical model keeps its
peak and a quarter (at least its floor); the rest is split between the
secondary models in proportion to what each used since the last look. The
critical model never sees an out-of-memory error: its floor is kept aside
for it, and as the highest priority it would take the others' cached memory
first.
"""
import argparse
import math
import os
import statistics
import sys
import threading
import time

import vdev

MIB, GIB = 1 << 20, 1 << 30
E = vdev.config.experimental
# The critical model (64 -> 1024 -> 8, batch 256) and its evaluation burst
# every tenth step, on 16 times the batch; the smallest ceiling the monitor
# gives a secondary model.
CRIT_IN, CRIT_HIDDEN, CRIT_OUT, CRIT_BATCH, EVAL_TIMES = 64, 1024, 8, 256, 16
MIN_CEILING = 64 * MIB
# The critical model's steps alone: WARMUP untimed ones (its first regions, the
# first touch of their pages, its first evaluation burst), then ALONE timed
# ones, before the secondary models start.
WARMUP, ALONE = 10, 10

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--steps", type=int, default=40,
               help="the secondary models' training steps (10 to 100000, default 40)")
args = p.parse_args()
if not 10 <= args.steps <= 100000:
    p.error("--steps takes a whole number from 10 to 100000, not %d" % args.steps)

# ---- the card, split three ways ------------------------------------------------------------
# The first visible GPU (VDEV_VISIBLE_DEVICES may hide some), as `vdev demo --priority`.
gpus = vdev.config.list_physical_devices("GPU")
if not gpus and "VDEV_SIM_GPUS" not in os.environ:
    os.environ["VDEV_SIM_GPUS"] = "1x3GiB"
    vdev.shutdown()  # discover again
    gpus = vdev.config.list_physical_devices("GPU")
gpus = vdev.config.get_visible_devices("GPU")
if not gpus:
    sys.exit("priority.py: no GPU is visible; the example needs one, real or simulated")
L = vdev.config.LogicalDeviceConfiguration
vdev.config.set_logical_device_configuration(gpus[0], [
    L(memory_floor=0, memory_priority="critical"),
    L(memory_floor=0, memory_priority="low"),
    L(memory_floor=0, memory_priority="low")])
vdev.init()


def fmt(b):
    """A size as vdev writes it (vdev_format_bytes): 276.00 MiB, 1.50 GiB."""
    if b < 1024:
        return "%d B" % b
    v, names = float(b), ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    i = 0
    while v >= 1023.995 and i < 6:
        v /= 1024.0
        i += 1
    return "%.2f %s" % (v, names[i])


def arena_needed():
    """What the three models need of the arena (examples/priority.c's
    arena_needed): the critical model's peak in use (its evaluation burst:
    six batch x hidden activations, of the model and its teacher, live at
    once, with both models' weights and Adam's two slots) and half as much
    again, plus the smallest ceiling of each secondary model. 276 MiB."""
    params = CRIT_IN * CRIT_HIDDEN + CRIT_HIDDEN + CRIT_HIDDEN * CRIT_OUT + CRIT_OUT
    rows = EVAL_TIMES * CRIT_BATCH
    peak = 4 * (4 * params + rows * (CRIT_IN + 6 * CRIT_HIDDEN + 4 * CRIT_OUT))
    return (peak * 3 // 2 + 2 * MIN_CEILING + MIB - 1) & ~(MIB - 1)


def free_needed(need):
    """The least free memory whose budget is `need` (TensorFlow's driver
    reserve, as vdev takes it: none from a card with 225 MiB or less free)."""
    if need <= 225 * MIB:
        return need
    if need + 225 * MIB < 2 * GIB:
        return need + 225 * MIB
    return 2 * GIB if need + 1536 * MIB < 2 * GIB else need + 1536 * MIB


def too_small(card, budget, need):
    """The card's budget is below `need`: what `vdev demo --priority` says."""
    min_sys = os.environ.get("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "")
    var = "VDEV_MEMORY_FRACTION"
    try:
        if float(os.environ.get(var, "0")) <= 0:
            var = "TF_GPU_MEMORY_FRACTION"
        fraction = float(os.environ.get(var, "0"))
    except ValueError:
        fraction = 0.0
    want, what = free_needed(need), "free"
    why = "what the driver reserve leaves of its free memory"
    if min_sys:
        want = need + int(min_sys) * MIB
        why = "its free memory less TF_DEVICE_MIN_SYS_MEMORY_IN_MB=%s" % min_sys
    elif fraction > 0:
        want = (math.ceil(need / fraction) + MIB - 1) & ~(MIB - 1)
        what = "of memory"
        why = "%s=%s of its total memory" % (var, os.environ[var])
    f = math.ceil(fraction * need / budget * 100.0 - 1e-9) / 100.0
    if not min_sys and fraction > 0 and f <= 1.0:
        fix = "set %s to %.2f or more" % (var, f)
    else:
        fix = "run on a GPU with %s %s or more (VDEV_SIM_GPUS=1x%dMiB)" % (fmt(want), what,
                                                                          want // MIB)
    return ("priority.py: %s leaves %s to share (%s), less than the %s the three models need; %s"
            % (card, fmt(budget), why, fmt(need), fix))


# The arena the three share: the card's budget as vdev governs it (its free
# memory less the driver's reserve, or a fraction), at most 3 GiB so the
# example stays quick; the three models need 276 MiB of it.
budget = E.get_memory_limits("GPU:0")["card_budget"]
arena = min(budget, 3 * GIB) & ~(MIB - 1)
if arena < arena_needed():
    print(too_small(gpus[0].name, budget, arena_needed()), file=sys.stderr)
    vdev.shutdown()
    sys.exit(1)
floor = arena // 4 & ~(MIB - 1)
E.set_memory_limits("GPU:0", floor=floor)  # guaranteed: no other device can take it
for d in ("GPU:1", "GPU:2"):
    E.set_memory_limits(d, floor=0, ceiling=(arena - floor) // 2)


print("One GPU (%s), three logical GPUs sharing %s:"
      % (E.get_device_details(gpus[0])["device_name"], fmt(arena)))
print("  GPU:0 critical model: floor %s, priority critical" % fmt(floor))
print("  GPU:1, GPU:2 secondary models A and B: no floor, priority low, ceilings moved by the "
      "monitor")

# Secondary rows cost about 8 floats of 2048 (activations and gradients).
max_batch = 1
while max_batch * 2 * 2048 * 4 * 8 < arena:
    max_batch *= 2


class Model:
    def __init__(self, name, dev, sizes, batch, seed, critical=False):
        self.name, self.dev, self.batch, self.critical = name, dev, batch, critical
        self.steps = args.steps + WARMUP + ALONE if critical else args.steps
        self.done = self.ooms = self.shrinks = 0
        self.error, self.oom_stop = "", False  # why it stopped before its last step
        self.batch_seen = batch
        self.pressure = threading.Event()
        self.solo, self.shared = [], []
        with vdev.device(dev):
            self.model = vdev.models.MLP(sizes, activation="relu", seed=seed)
            self.teacher = vdev.models.MLP(sizes, activation="tanh", seed=10 + seed)
        self.adam = vdev.optimizers.Adam(learning_rate=0.001)
        self.in_dim = sizes[0]
        if not critical:  # vdev's pressure callback: shrink before the next allocation fails
            E.set_memory_pressure_callback(dev, self.on_pressure)

    def on_pressure(self, device, kind, nbytes):
        if kind != "lent":
            self.pressure.set()

    def step(self, batch, seed, evaluate=False):
        """One training step (MSE against a fixed teacher) at `batch`, or a
        forward pass on a large batch: a burst of memory."""
        with vdev.device(self.dev):
            x = vdev.random.uniform([batch, self.in_dim], -1, 1, seed=seed)
            target = self.teacher(x)
            if evaluate:
                float(mse(target, self.model(x)))
                return
            with vdev.GradientTape() as tape:
                loss = mse(target, self.model(x))
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.adam.apply_gradients(zip(grads, self.model.trainable_variables))
            float(loss)


mse = vdev.losses.MeanSquaredError()
models = [Model("critical", "GPU:0", [64, 1024, 8], 256, 1, critical=True),
          Model("A", "GPU:1", [16, 2048, 4], 512, 2),
          Model("B", "GPU:2", [16, 2048, 4], 512, 3)]
secondaries_go = threading.Event()
finished = threading.Semaphore(0)
n_finished = [0]
looks = [0]
moves = [0]
refused = []  # the monitor's set_memory_limits calls that failed: their messages


def train(m):
    if not m.critical:
        secondaries_go.wait()
    s = 0
    while s < m.steps:
        if not m.critical and m.pressure.is_set() and m.batch > 64:
            m.pressure.clear()
            m.batch //= 2
            m.shrinks += 1
        t0 = time.perf_counter()
        try:
            m.step(m.batch, 1000 * s + m.in_dim)
            if m.critical and s % 10 == 9:
                m.step(16 * m.batch, 7 + s, evaluate=True)
        except vdev.OutOfMemoryError as e:
            m.ooms += 1
            if m.critical or m.batch <= 64:  # nothing left to halve
                m.error, m.oom_stop = str(e), True
                break
            m.batch //= 2  # recover: half the batch, and on
            continue
        except vdev.errors.OpError as e:
            m.error = str(e)
            break
        dt = time.perf_counter() - t0
        m.done += 1
        if m.critical:
            if secondaries_go.is_set():
                m.shared.append(dt)
            elif s >= WARMUP:  # the warm-up is not timed
                m.solo.append(dt)
            if s == WARMUP + ALONE - 1:
                secondaries_go.set()  # warm-up and timed steps alone first
        elif s % 4 == 3 and m.batch < max_batch:
            m.batch *= 2  # grow
        m.batch_seen = max(m.batch_seen, m.batch)
        s += 1
    n_finished[0] += 1
    if m.critical:
        secondaries_go.set()


def peak(dev):
    return E.get_memory_info(dev)["peak"]


def set_ceiling(dev, ceiling):
    """A secondary model's ceiling (at least MIN_CEILING); a refusal is
    counted and the first one's message kept, for the end to report."""
    try:
        E.set_memory_limits(dev, floor=0, ceiling=max(ceiling, MIN_CEILING))
        return True
    except (vdev.errors.OpError, ValueError) as e:
        refused.append(str(e))
        return False


def monitor():
    """The policy loop: the critical model keeps its peak and a quarter (at
    least its floor); the secondary models split the rest by what each used
    since the last look."""
    while n_finished[0] < 3:
        keep = max(peak("GPU:0") * 5 // 4, floor)
        rest = max(arena - keep, 0)
        d0, d1 = peak("GPU:1") + MIB, peak("GPU:2") + MIB
        c0 = rest // (d0 + d1) * d0
        c1 = rest - c0
        if set_ceiling("GPU:1", c0) and set_ceiling("GPU:2", c1):
            moves[0] += 2
        E.reset_memory_stats("GPU:1")
        E.reset_memory_stats("GPU:2")
        looks[0] += 1
        time.sleep(0.005)


threads = [threading.Thread(target=train, args=(m,)) for m in models]
mon = threading.Thread(target=monitor)
mon.start()
for t in threads:
    t.start()
for t in threads:
    t.join()
mon.join()

crit = models[0]
print("critical model: %d%s steps, %d out-of-memory error%s; median step %.2f ms alone (%d steps "
      "after %d untimed warm-up steps), %.2f ms beside the others (they share the card's compute)"
      % (crit.done, " of %d" % crit.steps if crit.done < crit.steps else "", crit.ooms,
         "" if crit.ooms == 1 else "s", 1000 * statistics.median(crit.solo or [0]),
         len(crit.solo), WARMUP, 1000 * statistics.median(crit.shared or [0])))
for m in models[1:]:
    if m.done == args.steps:  # then every error was recovered from
        head = ("model %s: %d steps, %d out-of-memory error%s recovered from by halving its "
                "batch, " % (m.name, m.done, m.ooms, "" if m.ooms == 1 else "s"))
    else:
        head = ("model %s: %d of %d steps, stopped by %s; %d out-of-memory error%s, "
                % (m.name, m.done, args.steps,
                   "an out-of-memory error at its smallest batch (64)" if m.oom_stop
                   else "an error", m.ooms, "" if m.ooms == 1 else "s"))
    print(head + "%d halving%s on pressure, batch up to %d"
          % (m.shrinks, "" if m.shrinks == 1 else "s", m.batch_seen))
print("monitor: %d looks, %d ceiling changes" % (looks[0], moves[0]))
for m in models:
    if m.error:
        print("priority.py: %s stopped: %s" % ("critical model" if m.critical else
                                               "model " + m.name, m.error), file=sys.stderr)
if refused:
    print("priority.py: the monitor's set_memory_limits failed %d time%s; the first: %s"
          % (len(refused), "" if len(refused) == 1 else "s", refused[0]), file=sys.stderr)
ok = (crit.ooms == 0 and crit.done == crit.steps and not refused
      and all(m.done == args.steps for m in models[1:]))
sys.exit(0 if ok else 1)
