#!/usr/bin/env python3
"""python_overhead.py: what one call of vdev's Python package costs, beside
PyTorch eager's equivalent, on tensors small enough that the work itself is
negligible and the figure is the call's overhead: vdev.add(a, b) and a + b on
1-element and 1000-element tensors, vdev.matmul of 8x8, t.numpy(),
vdev.constant(numpy array), a Dense layer's call, one GradientTape step of an
MLP 32-64-10 (ReLU, batch 32, sparse softmax cross-entropy, Adam) with
apply_gradients, and model.fit's time per batch on the same MLP.

PyTorch's column is torch.add, +, torch.matmul, .numpy(), torch.tensor(array)
(a copy, as vdev.constant makes), nn.Linear, a step with autograd and
torch.optim.Adam, and a loop over the shuffled batches that does what fit
does per batch (the step, then the loss and the outputs read to the host).
PyTorch runs on as many threads as vdev's budget (OPENBLAS_NUM_THREADS, else
OMP_NUM_THREADS, else the CPUs the process may use), as bench/torch_steps.py
does; without PyTorch its column is left out, with a note.

Each figure: a warm-up turn, then several turns of N calls (N chosen so that
a turn takes about 40 ms); the median and the minimum over the turns, in
microseconds per call. The machine, the date, the load average and the
command are printed first.

Usage: PYTHONPATH=python VDEV_LIBRARY=build/libvdev.so \\
         python3 bench/python_overhead.py [--turns K] [--no-torch] [--only NAME,...]
"""
import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import numpy as np

import vdev


def budget():
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        v = os.environ.get(name, "").split(",")[0].strip()
        if v.isdigit() and int(v) >= 1:
            return int(v)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def timed(fn, turns, per_call_calls=None):
    """(median, min) microseconds per call of fn over `turns` turns, after a
    warm-up turn; each turn calls fn n times, n sized to about 40 ms."""
    fn()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.02:
        fn()
        n += 1
    dt = (time.perf_counter() - t0) / n
    n = per_call_calls or max(1, int(0.04 / max(dt, 1e-9)))
    out = []
    for _ in range(turns):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) * 1e6 / n)
    return statistics.median(out), min(out)


# ---- vdev's cases ------------------------------------------------------------------

def vdev_cases():
    rng = np.random.default_rng(1)
    a1, b1 = vdev.constant([1.0]), vdev.constant([2.0])
    a3, b3 = (vdev.constant(rng.standard_normal(1000).astype(np.float32)) for _ in range(2))
    m1, m2 = (vdev.constant(rng.standard_normal((8, 8)).astype(np.float32)) for _ in range(2))
    arr = rng.standard_normal(1000).astype(np.float32)
    x = vdev.constant(rng.standard_normal((32, 32)).astype(np.float32))
    y = vdev.constant(rng.integers(0, 10, 32).astype(np.int32))
    dense = vdev.layers.Dense(64, input_dim=32, seed=1)

    model = vdev.models.Sequential([vdev.layers.Dense(64, activation="relu", input_dim=32,
                                                      seed=2),
                                    vdev.layers.Dense(10, seed=3)])
    loss_fn = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = vdev.optimizers.Adam(0.001)
    variables = model.trainable_variables

    def tape_step():
        with vdev.GradientTape() as tape:
            loss = loss_fn(y, model(x))
        grads = tape.gradient(loss, variables)
        opt.apply_gradients(zip(grads, variables))

    fit_model = vdev.models.Sequential([vdev.layers.Dense(64, activation="relu",
                                                          input_dim=32, seed=2),
                                        vdev.layers.Dense(10, seed=3)])
    fit_model.compile(optimizer=vdev.optimizers.Adam(0.001),
                      loss=vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    batches = 64
    fx = rng.standard_normal((32 * batches, 32)).astype(np.float32)
    fy = rng.integers(0, 10, 32 * batches).astype(np.int32)

    def fit_epoch():
        fit_model.fit(fx, fy, batch_size=32, epochs=1, verbose=0)

    return {
        "add_1": lambda: vdev.add(a1, b1),
        "plus_1": lambda: a1 + b1,
        "add_1000": lambda: vdev.add(a3, b3),
        "plus_1000": lambda: a3 + b3,
        "matmul_8x8": lambda: vdev.matmul(m1, m2),
        "numpy_1000": lambda: a3.numpy(),
        "constant_1000": lambda: vdev.constant(arr),
        "dense_32x32_64": lambda: dense(x),
        "tape_step_mlp": tape_step,
        "fit_per_batch": (fit_epoch, batches),
    }


# ---- PyTorch's cases ---------------------------------------------------------------

def torch_cases(torch):
    g = torch.Generator().manual_seed(1)
    a1, b1 = torch.tensor([1.0]), torch.tensor([2.0])
    a3, b3 = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    m1, m2 = torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)
    arr = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    x = torch.randn(32, 32, generator=g)
    y = torch.randint(0, 10, (32,), generator=g)
    nn = torch.nn
    dense = nn.Linear(32, 64)

    def mlp():
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))

    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)
    ce = nn.CrossEntropyLoss()

    def tape_step():
        opt.zero_grad()
        loss = ce(model(x), y)
        loss.backward()
        opt.step()

    fit_model = mlp()
    fit_opt = torch.optim.Adam(fit_model.parameters(), lr=0.001, eps=1e-7)
    batches = 64
    rng = np.random.default_rng(2)
    fx = rng.standard_normal((32 * batches, 32)).astype(np.float32)
    fy = rng.integers(0, 10, 32 * batches).astype(np.int64)

    def fit_epoch():  # what Keras's fit does per batch: the step, loss and outputs to host
        order = rng.permutation(len(fx))
        for b in range(batches):
            idx = order[b * 32:(b + 1) * 32]
            xb, yb = torch.from_numpy(fx[idx]), torch.from_numpy(fy[idx])
            fit_opt.zero_grad()
            out = fit_model(xb)
            loss = ce(out, yb)
            loss.backward()
            fit_opt.step()
            float(loss.item())
            out.detach().numpy()

    return {
        "add_1": lambda: torch.add(a1, b1),
        "plus_1": lambda: a1 + b1,
        "add_1000": lambda: torch.add(a3, b3),
        "plus_1000": lambda: a3 + b3,
        "matmul_8x8": lambda: torch.matmul(m1, m2),
        "numpy_1000": lambda: a3.numpy(),
        "constant_1000": lambda: torch.tensor(arr),
        "dense_32x32_64": lambda: dense(x),
        "tape_step_mlp": tape_step,
        "fit_per_batch": (fit_epoch, batches),
    }


LABELS = {
    "add_1": "vdev.add(a, b), 1 element ; torch.add",
    "plus_1": "a + b, 1 element",
    "add_1000": "vdev.add(a, b), 1000 elements ; torch.add",
    "plus_1000": "a + b, 1000 elements",
    "matmul_8x8": "vdev.matmul, 8x8 @ 8x8 ; torch.matmul",
    "numpy_1000": "t.numpy(), 1000 elements",
    "constant_1000": "vdev.constant(array), 1000 float32 ; torch.tensor(array)",
    "dense_32x32_64": "Dense(64) call on [32, 32] ; nn.Linear(32, 64)",
    "tape_step_mlp": "GradientTape step, MLP 32-64-10, batch 32, Adam ; autograd step",
    "fit_per_batch": "model.fit, per batch (64 batches of 32) ; the same loop by hand",
}


def run(cases, turns, only):
    out = {}
    for name, c in cases.items():
        if only and name not in only:
            continue
        fn, per = c if isinstance(c, tuple) else (c, None)
        if per is None:
            out[name] = timed(fn, turns)
        else:  # fn runs `per` batches: one call a turn, figures per batch
            med, lo = timed(fn, turns, per_call_calls=1)
            out[name] = (med / per, lo / per)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--turns", type=int, default=7)
    p.add_argument("--no-torch", action="store_true", help="leave PyTorch's column out")
    p.add_argument("--only", default="", help="comma-separated case names (see LABELS)")
    args = p.parse_args()
    only = set(filter(None, args.only.split(",")))

    threads = budget()
    torch = None
    note = ""
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(threads)
        except Exception as e:  # missing or broken: its column is left out, with why
            torch, note = None, "PyTorch not available (%s): its column is left out" % e
    else:
        note = "PyTorch's column left out (--no-torch)"

    load = os.getloadavg()
    print("# vdev Python overhead, %s" % datetime.datetime.now(datetime.timezone.utc)
          .strftime("%Y-%m-%d %H:%M UTC"))
    print("# command: %s" % " ".join([os.path.basename(sys.executable)] + sys.argv))
    print("# machine: %s, %d CPUs; load average %.2f %.2f %.2f" %
          (cpu_model(), os.cpu_count() or 0, *load))
    print("# vdev %s (%s), Python %s, numpy %s%s" % (
        vdev.__version__, vdev._lib.path, platform.python_version(), np.__version__,
        ", PyTorch %s on %d threads (vdev's budget)" % (torch.__version__,
                                                          torch.get_num_threads())
        if torch else ""))
    print("# microseconds per call: median (min) of %d turns after a warm-up" % args.turns)
    if note:
        print("# " + note)

    v = run(vdev_cases(), args.turns, only)
    t = run(torch_cases(torch), args.turns, only) if torch else {}
    head = "| call | vdev us | PyTorch us | vdev / PyTorch |" if torch else "| call | vdev us |"
    print(head)
    print("|---|" + "---:|" * (3 if torch else 1))
    for name, (med, lo) in v.items():
        row = "| %s | %.2f (%.2f) |" % (LABELS[name], med, lo)
        if torch:
            tm, tl = t[name]
            row += " %.2f (%.2f) | %.1fx |" % (tm, tl, med / tm)
        print(row)


if __name__ == "__main__":
    main()
