#!/usr/bin/env python3
"""torch_steps.py — the training steps of bench/bench_ops.c in PyTorch, for a
side-by-side comparison (bench/run runs both in the same run and writes
both times and their ratio into BENCHMARKS.md):

  mlp     MLP 1024-4096-4096-10 (ReLU), batch 256, softmax cross-entropy,
          Adam (lr 0.001, betas 0.9 and 0.999, epsilon 1e-7);
  chain3  three MLPs 256-512-512-256 (ReLU between layers), batch 64, each
          trained on a mean squared error against its own fixed target with
          its own Adam, each fed the previous model's output (detached: no
          gradient flows back into the model before, as in vdev's chain).

Both frameworks use the same OpenBLAS (Debian's PyTorch links libblas.so.3,
OpenBLAS here) with the same environment; PyTorch's own threads are set to
the budget vdev uses (OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else the
CPUs the process may use). Timing as bench_step.h does: a warm-up, then
turns of several steps, median and minimum over the turns, ms per step.

Prints "torch_version=...", "torch_threads=N", "torch_mlp_ms=MED MIN" and
"torch_chain3_ms=MED MIN", one per line; exits 77 with a note on stderr when
torch cannot be imported.
Usage: python3 bench/torch_steps.py [--quick]"""
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # torch missing or broken: skipped, with the reason
    print(f"torch_steps: PyTorch not available ({e})", file=sys.stderr)
    sys.exit(77)


def budget():
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        v = os.environ.get(name, "").split(",")[0].strip()
        if v.isdigit() and int(v) >= 1:
            return int(v)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def adam(model):
    return torch.optim.Adam(model.parameters(), lr=0.001, betas=(0.9, 0.999), eps=1e-7)


def timed(step, steps, turns):
    step()
    step()  # warm-up
    t = []
    for _ in range(turns):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        t.append((time.perf_counter() - t0) * 1e3 / steps)
    return statistics.median(t), min(t)


def main():
    quick = "--quick" in sys.argv[1:]
    torch.manual_seed(1)
    n = budget()
    torch.set_num_threads(n)
    print(f"torch_version={torch.__version__}")
    print(f"torch_threads={torch.get_num_threads()}")

    m = mlp([1024, 4096, 4096, 10])
    opt = adam(m)
    x = torch.rand(256, 1024) * 2 - 1
    labels = torch.arange(256) % 10

    def mlp_step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x), labels).backward()
        opt.step()

    med, mn = timed(mlp_step, 1, 3 if quick else 7)
    print(f"torch_mlp_ms={med:.3f} {mn:.3f}")

    models = [mlp([256, 512, 512, 256]) for _ in range(3)]
    opts = [adam(k) for k in models]
    xin = torch.rand(64, 256) * 2 - 1
    targets = [torch.rand(64, 256) * 2 - 1 for _ in range(3)]

    def chain_step():
        h = xin
        for k in range(3):
            opts[k].zero_grad(set_to_none=True)
            y = models[k](h)
            F.mse_loss(y, targets[k]).backward()
            opts[k].step()
            h = y.detach()

    med, mn = timed(chain_step, 10 if quick else 20, 5 if quick else 11)
    print(f"torch_chain3_ms={med:.3f} {mn:.3f}")


if __name__ == "__main__":
    main()
