"""Keras 2.11's dropout and recurrent_dropout in SimpleRNN, LSTM and GRU:
which masks each path draws (the cuDNN-capable LSTM and GRU a mask over the
whole input sequence; the cell path one mask per call used at every step,
one per gate with implementation 1, which recurrent_dropout forces), their
values (0 or 1 / (1 - rate), the rate dropped), and the layer's outputs and
gradients against torch's autograd of Keras's cell formulas in float64 with
the masks the layer drew (captured); inference and rate 0 as without
dropout; the seeds (a layer's seed gives the same masks, each call new
ones, Bidirectional's two layers their own); fit drawing and evaluate not;
configs; the refusals in their words."""
import numpy as np
import pytest
import torch

import vdev
from vdev import layers

rng = np.random.default_rng(20261207)
f32 = np.float32


def capture(layer, monkeypatch):
    """Every call's (input masks, recurrent masks) as NumPy arrays."""
    seen = []
    inner = layer._dropout_masks

    def spy(*a):
        drop, rec = inner(*a)
        seen.append(tuple(None if m is None else [t.numpy() for t in m] for m in (drop, rec)))
        return drop, rec
    monkeypatch.setattr(layer, "_dropout_masks", spy)
    return seen


def torch_loop(kind, x, W, U, b, drop, rec, reset_after=True, backwards=False, act=torch.tanh):
    """Keras's cells (recurrent.py's LSTMCell, GRUCell, SimpleRNNCell, the
    implementation-1 branch where masks are per gate) in float64 torch;
    drop: input masks, each [B, T or 1, F] (one: the whole input times it),
    rec: recurrent masks [B, u], one per gate; act: the activation. Returns
    the outputs [B, T, u] in the order of the steps taken."""
    B, T, _ = x.shape
    u = U.shape[0]
    gates = W.shape[1] // u
    h = torch.zeros((B, u), dtype=torch.float64)
    c = torch.zeros((B, u), dtype=torch.float64)
    per_gate = drop is not None and len(drop) > 1
    if drop is not None and not per_gate:
        x = x * torch.tensor(drop[0])
    if per_gate:
        xs = [x * torch.tensor(m) for m in drop]
    else:
        xs = [x] * gates
    bx = None if b is None else (b[0] if kind == "gru" and reset_after else b)
    outs = []
    for t in (range(T - 1, -1, -1) if backwards else range(T)):
        xg = [xs[g][:, t] @ W[:, g * u:(g + 1) * u] + (0 if bx is None else bx[g * u:(g + 1) * u])
              for g in range(gates)]
        hg = [h if rec is None else h * torch.tensor(rec[g]) for g in range(gates)]

        def rp(g):
            return hg[g] @ U[:, g * u:(g + 1) * u]
        if kind == "simple":
            h = act(xg[0] + rp(0))
        elif kind == "lstm":
            i = torch.sigmoid(xg[0] + rp(0))
            f = torch.sigmoid(xg[1] + rp(1))
            c = f * c + i * act(xg[2] + rp(2))
            o = torch.sigmoid(xg[3] + rp(3))
            h = o * act(c)
        else:
            br = (lambda g: 0) if b is None or not reset_after else \
                (lambda g: b[1][g * u:(g + 1) * u])
            z = torch.sigmoid(xg[0] + rp(0) + br(0))
            r = torch.sigmoid(xg[1] + rp(1) + br(1))
            if reset_after:
                hh = act(xg[2] + r * (rp(2) + br(2)))
            else:
                hh = act(xg[2] + (r * hg[2]) @ U[:, 2 * u:])
            h = z * h + (1 - z) * hh
        outs.append(h)
    return torch.stack(outs, 1)


B, T, F, UNITS = 3, 5, 4, 6
# (name, kind, layer arguments, input mask shapes, recurrent masks, implementation)
CASES = [
    ("lstm-cudnn", "lstm", {"dropout": 0.3}, [(B, T, F)], 0, 2),
    ("lstm-cell", "lstm", {"dropout": 0.3, "activation": "relu"}, [(B, 1, F)], 0, 2),
    ("lstm-impl1", "lstm", {"dropout": 0.25, "activation": "relu", "implementation": 1},
     [(B, 1, F)] * 4, 0, 1),
    ("lstm-impl1-cudnn", "lstm", {"dropout": 0.25, "implementation": 1}, [(B, T, F)], 0, 1),
    ("lstm-both", "lstm", {"dropout": 0.3, "recurrent_dropout": 0.2}, [(B, 1, F)] * 4, 4, 1),
    ("lstm-rec", "lstm", {"recurrent_dropout": 0.4, "go_backwards": True}, None, 4, 1),
    ("gru-cudnn", "gru", {"dropout": 0.3}, [(B, T, F)], 0, 2),
    ("gru-reset-before", "gru", {"dropout": 0.3, "reset_after": False}, [(B, 1, F)], 0, 2),
    ("gru-both", "gru", {"dropout": 0.2, "recurrent_dropout": 0.3}, [(B, 1, F)] * 3, 3, 1),
    ("gru-before-both", "gru", {"dropout": 0.2, "recurrent_dropout": 0.3, "reset_after": False},
     [(B, 1, F)] * 3, 3, 1),
    ("simple", "simple", {"dropout": 0.3, "recurrent_dropout": 0.3}, [(B, 1, F)], 1, None),
]
MAKE = {"simple": layers.SimpleRNN, "lstm": layers.LSTM, "gru": layers.GRU}


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("name,kind,args,drop_shapes,nrec,impl", CASES, ids=[c[0] for c in CASES])
def test_masks_values_and_gradients(monkeypatch, dev, name, kind, args, drop_shapes, nrec, impl):
    x = rng.uniform(-1, 1, (B, T, F)).astype(f32)
    with vdev.device(dev):
        layer = MAKE[kind](UNITS, return_sequences=True, seed=9,
                           bias_initializer="random_uniform", **args)
        if impl is not None:
            assert layer.implementation == impl and layer.get_config()["implementation"] == impl
        seen = capture(layer, monkeypatch)
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            y = layer(xv, training=True)
            r = rng.uniform(-1, 1, tuple(y.shape)).astype(f32)
            loss = vdev.reduce_sum(y * r)
        grads = tape.gradient(loss, [xv] + layer.variables)
    assert y.device.endswith(dev)
    [(drop, rec)] = seen
    # the masks: the shapes of Keras's path, each 0 or 1 / (1 - rate)
    assert (drop is None) == (drop_shapes is None)
    if drop is not None:
        assert [m.shape for m in drop] == drop_shapes
        for m in drop:
            assert set(np.unique(m)) <= {0.0, f32(1 / (1 - args["dropout"]))}
    assert (0 if rec is None else len(rec)) == nrec
    for m in rec or []:
        assert m.shape == (B, UNITS)
        assert set(np.unique(m)) <= {0.0, f32(1 / (1 - args["recurrent_dropout"]))}
    # the outputs and every gradient against torch with those masks
    W, U = (torch.tensor(v.numpy().astype(np.float64), requires_grad=True)
            for v in (layer.kernel, layer.recurrent_kernel))
    b = torch.tensor(layer.bias.numpy().astype(np.float64), requires_grad=True)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    want = torch_loop(kind, xt, W, U, b, drop, rec, reset_after=args.get("reset_after", True),
                      backwards=args.get("go_backwards", False),
                      act=torch.relu if args.get("activation") == "relu" else torch.tanh)
    np.testing.assert_allclose(y.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    tg = torch.autograd.grad((want * torch.tensor(r.astype(np.float64))).sum(), [xt, W, U, b])
    for got, exp in zip(grads, tg):
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-4, atol=1e-5)


def test_rates_seeds_and_inference(monkeypatch):
    x = rng.uniform(-1, 1, (64, 50, 32)).astype(f32)
    lstm = layers.LSTM(16, dropout=0.3, recurrent_dropout=0.2, seed=5)
    seen = capture(lstm, monkeypatch)
    first = lstm(x, training=True).numpy()
    second = lstm(x, training=True).numpy()
    (d1, r1), (d2, r2) = seen
    for masks, rate in ((d1, 0.3), (r1, 0.2)):
        # within 4 standard deviations of the binomial's mean (the seed fixes the draws)
        draws = np.concatenate([m.ravel() for m in masks])
        assert abs(np.mean(draws == 0) - rate) < 4 * np.sqrt(rate * (1 - rate) / draws.size)
        p = rate ** 2 + (1 - rate) ** 2
        for a in range(4):  # the gates' masks are drawn apart: each pair agrees
            for b in range(a):  # where both keep or both drop, with probability p
                agree = np.mean(masks[a] == masks[b])
                assert abs(agree - p) < 4 * np.sqrt(p * (1 - p) / masks[a].size)
    assert not np.array_equal(d1[0], d2[0]) and not np.array_equal(first, second)
    # the same seed, the same masks and outputs; inference draws none and
    # equals the layer without dropout (its implementation 1 too)
    twin = layers.LSTM(16, dropout=0.3, recurrent_dropout=0.2, seed=5)
    twin_seen = capture(twin, monkeypatch)
    np.testing.assert_array_equal(twin(x, training=True).numpy(), first)
    assert all(np.array_equal(a, b) for a, b in zip(twin_seen[0][0] + twin_seen[0][1], d1 + r1))
    plain = layers.LSTM(16, seed=5, implementation=1)
    infer = lstm(x).numpy()
    assert seen[-1] == (None, None) and len(seen) == 3
    np.testing.assert_array_equal(infer, plain(x).numpy())
    np.testing.assert_array_equal(lstm(x, training=False).numpy(), infer)
    # a rate of 0 draws nothing in training
    g = layers.GRU(4, seed=2)
    g0 = layers.GRU(4, seed=2, dropout=0.0, recurrent_dropout=0.0)
    np.testing.assert_array_equal(g(x, training=True).numpy(), g0(x, training=True).numpy())


def test_bidirectional_and_fit(monkeypatch):
    x = rng.uniform(-1, 1, (16, 7, 3)).astype(f32)
    y = x.sum(axis=(1, 2))[:, None] * 0.1
    bi = layers.Bidirectional(layers.GRU(4, dropout=0.3, recurrent_dropout=0.3, seed=4))
    fwd, bwd = capture(bi.forward_layer, monkeypatch), capture(bi.backward_layer, monkeypatch)
    bi(x, training=True)
    assert fwd[0][0] is not None and bwd[0][0] is not None
    assert not np.array_equal(fwd[0][0][0], bwd[0][0][0])  # each its own draws
    assert bi.get_config()["layer"]["config"]["recurrent_dropout"] == 0.3
    lstm = layers.LSTM(8, dropout=0.2, recurrent_dropout=0.2, seed=8)
    model = vdev.models.Sequential([layers.Input((7, 3)), lstm, layers.Dense(1, seed=3)])
    seen = capture(lstm, monkeypatch)
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    loss = model.fit(x, y, batch_size=8, epochs=10, verbose=0).history["loss"]
    assert len(seen) == 20 and all(d is not None and r is not None for d, r in seen)
    assert loss[-1] < loss[0]
    model.evaluate(x, y, verbose=0)
    model.predict(x, verbose=0)
    assert len(seen) == 20 + 1 + 1 and all(s == (None, None) for s in seen[20:])


def test_configs_and_refusals():
    lstm = layers.LSTM(3, dropout=1.5, recurrent_dropout=-0.5)
    c = lstm.get_config()
    assert (c["dropout"], c["recurrent_dropout"], c["implementation"]) == (1.0, 0.0, 2)
    c = layers.GRU(3, recurrent_dropout=0.25).get_config()
    assert (c["dropout"], c["recurrent_dropout"], c["implementation"]) == (0.0, 0.25, 1)
    again = layers.GRU.from_config(c)
    assert again.recurrent_dropout == 0.25 and again.implementation == 1
    assert layers.SimpleRNN(2, dropout=0.5).get_config()["dropout"] == 0.5
    x = np.zeros((2, 3, 4), f32)
    lstm(x)  # a rate of 1 draws nothing in inference
    cases = [
        (lambda: lstm(x, training=True),
         "`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate=1.0"),
        (lambda: layers.SimpleRNN(2, recurrent_dropout=1)(x, training=True),
         "`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate=1.0"),
        (lambda: layers.LSTM(2, dropout="0.2"),
         "vdev's LSTM takes a number for `dropout`, not '0.2'"),
        (lambda: layers.GRU(2, recurrent_dropout=True),
         "vdev's GRU takes a number for `recurrent_dropout`, not True"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
