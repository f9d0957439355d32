#!/usr/bin/env python3
"""keras_layers.py — the training step of a model with a recurrent or an
attention layer in vdev's Python package and in PyTorch, side by side in one
run (bench/run writes the table into BENCHMARKS.md):

  lstm       LSTM(64) over [32, 20, 16] (20 steps), then Dense(1): mean
             squared error, Adam (vdev: vdev.layers.LSTM, a step per time
             step: its products and the fused cell's two ops, LSTMCellState
             and LSTMCellOutput; PyTorch: torch.nn.LSTM, its fused cell);
  composed   the same vdev model with its step composed of Sigmoid, Tanh,
             Mul and AddV2 ops (the fused cell turned off), beside the same
             PyTorch figure;
  gru        GRU(64) (reset_after) likewise: vdev.layers.GRU, its products
             and the fused cell's GRUGates and GRUCellOutput, against
             torch.nn.GRU; then vdev's with its cell turned off;
  masked     the LSTM over sequences of 5 to 20 steps, right padded (vdev:
             the LSTM given a mask, Keras's rule; PyTorch: a packed
             sequence, its last state the same);
  attention  MultiHeadAttention(8 heads, key_dim 8) of [32, 16, 64] on
             itself, the sum of its output, Adam (vdev: vdev.layers.
             MultiHeadAttention, its per-head products one BatchMatMulV2 op;
             PyTorch: torch.nn.MultiheadAttention, the same projections).

Both on the CPU, PyTorch's threads set to the budget vdev uses (as
bench/torch_steps.py). Timing as torch_steps.py's: a warm-up, then turns
of steps, median and minimum over the turns, ms per step. Prints a markdown table on standard
output (or to --md FILE); without PyTorch, a line saying so and exit 77.
Usage: VDEV_LIBRARY=... PYTHONPATH=python python3 bench/keras_layers.py
[--quick] [--md FILE]"""
import os
import sys

import numpy as np

try:
    import torch
except Exception as e:  # torch missing or broken: skipped, with the reason
    print(f"keras_layers: PyTorch not available ({e})", file=sys.stderr)
    sys.exit(77)

import vdev
from vdev import _recurrent_layers, layers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_steps import budget, timed  # noqa: E402


def vdev_step(variables, forward):
    opt = vdev.optimizers.Adam(1e-3)

    def step():
        with vdev.GradientTape() as tape:
            loss = forward()
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return step


def torch_step(params, forward):
    opt = torch.optim.Adam(params, lr=1e-3)

    def step():
        opt.zero_grad()
        forward().backward()
        opt.step()
    return step


def main():
    quick = "--quick" in sys.argv
    md = sys.argv[sys.argv.index("--md") + 1] if "--md" in sys.argv else None
    torch.set_num_threads(budget())
    steps, turns = (5, 3) if quick else (20, 7)
    rng = np.random.default_rng(0)
    rows = []

    x = rng.uniform(-1, 1, (32, 20, 16)).astype(np.float32)
    y = rng.uniform(-1, 1, (32, 1)).astype(np.float32)
    model = vdev.models.Sequential([layers.LSTM(64, input_shape=(20, 16), seed=1),
                                    layers.Dense(1, seed=2)])
    xv, yv = vdev.constant(x), vdev.constant(y)

    def model_step(model, fused=True):
        """The model's timed training step; with fused False its
        recurrent layer's step composed of vdev's elementwise ops (the
        fused cell turned off: what the cell saves)."""
        fused_cell = _recurrent_layers._fused_cell
        if not fused:
            _recurrent_layers._fused_cell = lambda layer: False
        try:
            return timed(vdev_step(model.trainable_variables,
                                   lambda: vdev.reduce_mean(vdev.square(model(xv) - yv))),
                         steps, turns)
        finally:
            _recurrent_layers._fused_cell = fused_cell
    v = model_step(model)
    lstm, lin = torch.nn.LSTM(16, 64, batch_first=True), torch.nn.Linear(64, 1)
    xt, yt = torch.tensor(x), torch.tensor(y)
    t = timed(torch_step(list(lstm.parameters()) + list(lin.parameters()),
                         lambda: ((lin(lstm(xt)[0][:, -1]) - yt) ** 2).mean()), steps, turns)
    rows.append(("LSTM(64) over [32, 20, 16], then Dense(1)", v, t))
    # the same vdev model with its step composed of Sigmoid, Tanh, Mul and
    # AddV2 ops instead of the fused cell's, beside the same PyTorch figure
    rows.append(("the same, vdev's step of composed ops (no fused LSTM cell)",
                 model_step(model, fused=False), t))

    # GRU(64), reset_after (TensorFlow 2's default, PyTorch's arithmetic):
    # the fused cell's two ops a step, then with the cell turned off
    model = vdev.models.Sequential([layers.GRU(64, input_shape=(20, 16), seed=1),
                                    layers.Dense(1, seed=2)])
    v = model_step(model)
    gru = torch.nn.GRU(16, 64, batch_first=True)
    t = timed(torch_step(list(gru.parameters()) + list(lin.parameters()),
                         lambda: ((lin(gru(xt)[0][:, -1]) - yt) ** 2).mean()), steps, turns)
    rows.append(("GRU(64) over [32, 20, 16], then Dense(1)", v, t))
    rows.append(("the same, vdev's step of composed ops (no fused GRU cell)",
                 model_step(model, fused=False), t))

    # the same LSTM with sequences of 5 to 20 steps, right padded: vdev's mask
    # (Keras's rule: padded steps keep the states), PyTorch's packed
    # sequence (the LSTM stops at each sequence's end: the same last state)
    lengths = rng.integers(5, 21, 32)
    mask = np.arange(20)[None, :] < lengths[:, None]
    model = vdev.models.Sequential([layers.LSTM(64, input_shape=(20, 16), seed=1),
                                    layers.Dense(1, seed=2)])
    lstm_layer, dense = model.layers
    mv = vdev.constant(mask.astype(np.float32))
    v = timed(vdev_step(model.trainable_variables,
                        lambda: vdev.reduce_mean(vdev.square(dense(lstm_layer(xv, mask=mv))
                                                             - yv))), steps, turns)
    packed_lengths = torch.tensor(lengths)

    def packed():
        seq = torch.nn.utils.rnn.pack_padded_sequence(xt, packed_lengths, batch_first=True,
                                                      enforce_sorted=False)
        return ((lin(lstm(seq)[1][0][0]) - yt) ** 2).mean()
    t = timed(torch_step(list(lstm.parameters()) + list(lin.parameters()), packed), steps,
              turns)
    rows.append(("LSTM(64) over sequences of 5 to 20 steps (vdev: a mask; PyTorch: packed)", v,
                 t))

    x = rng.uniform(-1, 1, (32, 16, 64)).astype(np.float32)
    mha = layers.MultiHeadAttention(8, 8, seed=3)
    xv = vdev.constant(x)
    mha(xv, xv)  # built
    v = timed(vdev_step(mha.trainable_variables, lambda: vdev.reduce_sum(mha(xv, xv))), steps,
              turns)
    att = torch.nn.MultiheadAttention(64, 8, batch_first=True)
    xt = torch.tensor(x)
    t = timed(torch_step(list(att.parameters()),
                         lambda: att(xt, xt, xt, need_weights=False)[0].sum()), steps, turns)
    rows.append(("MultiHeadAttention(8 heads, key_dim 8) of [32, 16, 64] on itself", v, t))

    out = ["| step (forward, gradients, Adam) | vdev ms (min) | PyTorch ms (min) | vdev ÷ PyTorch |",
           "|---|---:|---:|---:|"]
    for name, (vm, vn), (tm, tn) in rows:
        out.append("| %s | %.2f (%.2f) | %.2f (%.2f) | %.2fx |" % (name, vm, vn, tm, tn, vm / tm))
    out.append("")
    out.append("PyTorch %s, %d threads; %d turns of %d steps each." % (torch.__version__,
                                                                     torch.get_num_threads(),
                                                                     turns, steps))
    text = "\n".join(out) + "\n"
    if md:
        with open(md, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
