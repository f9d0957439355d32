"""Keras 2.11's masks: Embedding(mask_zero=True) and Masking make them; the
recurrent layers skip masked steps as Keras's backend.rnn does (values and
every gradient against torch's autograd of Keras's cell formulas with the
same rule, for masks with holes anywhere, go_backwards, return_state,
time_major, Bidirectional's zero outputs); right-padded sequences give the
unpadded sequence's result; layers pass masks on, combine or drop them as
Keras's; GlobalAveragePooling1D and MultiHeadAttention use them; fit and
evaluate weigh a masked output's losses and metrics by the mask; the
refusals and errors in their words."""
import numpy as np
import pytest
import torch

import vdev
from vdev import layers

rng = np.random.default_rng(20261208)
f32 = np.float32


def torch_masked_loop(kind, x, W, U, b, mask, backwards=False, zero_output=False,
                      reset_after=True):
    """Keras's cells (default activations) under backend.rnn's mask rule in
    float64 torch: a masked step keeps the states and repeats the last
    output (0 with zero_output; 0 before any step counted). Returns (the
    outputs in the order of the steps taken, the last output, the states)."""
    B, T, _ = x.shape
    u = U.shape[0]
    h = torch.zeros((B, u), dtype=torch.float64)
    c = torch.zeros((B, u), dtype=torch.float64)
    last = torch.zeros((B, u), dtype=torch.float64)
    outs = []
    for t in (range(T - 1, -1, -1) if backwards else range(T)):
        xt = x[:, t]
        if kind == "simple":
            nh, nc = torch.tanh(xt @ W + b + h @ U), c
        elif kind == "lstm":
            z = xt @ W + h @ U + b
            i, f, g, o = (z[:, k * u:(k + 1) * u] for k in range(4))
            nc = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            nh = torch.sigmoid(o) * torch.tanh(nc)
        else:
            mx = xt @ W + (b[0] if reset_after else b)
            if reset_after:
                mi = h @ U + b[1]
                z = torch.sigmoid(mx[:, :u] + mi[:, :u])
                r = torch.sigmoid(mx[:, u:2 * u] + mi[:, u:2 * u])
                hh = torch.tanh(mx[:, 2 * u:] + r * mi[:, 2 * u:])
            else:
                mi = h @ U[:, :2 * u]
                z = torch.sigmoid(mx[:, :u] + mi[:, :u])
                r = torch.sigmoid(mx[:, u:2 * u] + mi[:, u:])
                hh = torch.tanh(mx[:, 2 * u:] + (r * h) @ U[:, 2 * u:])
            nh, nc = z * h + (1 - z) * hh, c
        m = torch.tensor(mask[:, t:t + 1].astype(bool))
        h, c = torch.where(m, nh, h), torch.where(m, nc, c)
        last = torch.where(m, nh, torch.zeros_like(nh) if zero_output else last)
        outs.append(last)
    return torch.stack(outs, 1), last, (h, c)


B, T, F, U = 4, 6, 3, 5
MASK = np.array([[1, 1, 1, 1, 0, 0],   # right padded
                 [0, 0, 1, 1, 1, 1],   # left padded
                 [1, 0, 1, 0, 0, 1],   # holes
                 [0, 0, 0, 0, 0, 0]],  # nothing counts
                bool)
CASES = [("simple", {}), ("lstm", {}), ("gru", {}), ("gru", {"reset_after": False}),
         ("lstm", {"go_backwards": True}), ("gru", {"go_backwards": True})]
MAKE = {"simple": layers.SimpleRNN, "lstm": layers.LSTM, "gru": layers.GRU}


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("kind,args", CASES, ids=["%s%s" % (k, "-".join(a)) for k, a in CASES])
def test_masked_steps_against_torch(dev, kind, args):
    x = rng.uniform(-1, 1, (B, T, F)).astype(f32)
    with vdev.device(dev):
        layer = MAKE[kind](U, return_sequences=True, return_state=True, seed=3,
                           bias_initializer="random_uniform", **args)
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            seq, *states = layer(xv, mask=MASK)
            r = rng.uniform(-1, 1, tuple(seq.shape)).astype(f32)
            rs = [rng.uniform(-1, 1, tuple(s.shape)).astype(f32) for s in states]
            loss = vdev.reduce_sum(seq * r)
            for s, w in zip(states, rs):
                loss = loss + vdev.reduce_sum(s * w)
        grads = tape.gradient(loss, [xv] + layer.variables)
    assert seq.device.endswith(dev)
    W, Uk = (torch.tensor(v.numpy().astype(np.float64), requires_grad=True)
             for v in (layer.kernel, layer.recurrent_kernel))
    b = torch.tensor(layer.bias.numpy().astype(np.float64), requires_grad=True)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    outs, last, (h, c) = torch_masked_loop(kind, xt, W, Uk, b, MASK,
                                           backwards=args.get("go_backwards", False),
                                           reset_after=args.get("reset_after", True))
    np.testing.assert_allclose(seq.numpy(), outs.detach().numpy(), rtol=1e-5, atol=1e-6)
    want_states = [h, c] if kind == "lstm" else [h]
    for s, w in zip(states, want_states):
        np.testing.assert_allclose(s.numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(seq.numpy()[3], 0)  # no step counted: zeros
    total = (outs * torch.tensor(r, dtype=torch.float64)).sum()
    for s, w in zip(want_states, rs):
        total = total + (s * torch.tensor(w, dtype=torch.float64)).sum()
    tg = torch.autograd.grad(total, [xt, W, Uk, b])
    for got, exp in zip(grads, tg):
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-4, atol=1e-5)
    # the last output alone is the last output kept: for the row that
    # counts nothing, zeros, not the initial state
    alone = MAKE[kind](U, seed=3, bias_initializer="random_uniform", **args)
    alone.build(F)
    alone.set_weights(layer.get_weights())
    np.testing.assert_allclose(alone(x, mask=MASK).numpy(), last.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_padding_is_skipped_and_masks_pass_on():
    ids = np.array([[3, 5, 2, 0, 0], [4, 1, 0, 0, 0], [7, 7, 7, 7, 7]], np.int32)
    emb = layers.Embedding(10, 4, mask_zero=True, seed=1)
    e = emb(ids)
    np.testing.assert_array_equal(e._keras_mask.numpy(), ids != 0)
    assert e._keras_mask.dtype == vdev.bool  # Keras's masks are bool tensors
    assert emb.compute_mask(ids).shape == (3, 5) and emb.get_config()["mask_zero"] is True
    assert layers.Embedding(10, 4).compute_mask(ids) is None
    dense = layers.Dense(4, seed=2)  # passes the mask on, as Keras's
    d = dense(e)
    assert d._keras_mask is e._keras_mask
    for kind in ("simple", "lstm", "gru"):
        rnn = MAKE[kind](3, seed=2)
        y = rnn(d).numpy()
        for row, n in ((0, 3), (1, 2), (2, 5)):  # the unpadded sequence's result
            np.testing.assert_allclose(y[row], rnn(dense(emb(ids[row:row + 1, :n]))).numpy()[0],
                                       rtol=1e-6, atol=1e-7)
    # a layer that does not support masking drops it (Keras's code; its
    # documentation says it raises), one that does keeps it
    conv = layers.Conv1D(2, 1, seed=3)(e)
    assert getattr(conv, "_keras_mask", None) is None
    for layer in (layers.Dropout(0.5), layers.Activation("relu"), layers.LayerNormalization(),
                  layers.ReLU()):
        assert layer(e)._keras_mask is e._keras_mask
    seq = layers.LSTM(3, return_sequences=True, return_state=True, seed=4)(e)
    assert seq[0]._keras_mask is e._keras_mask
    assert all(getattr(s, "_keras_mask", None) is None for s in seq[1:])
    assert getattr(layers.LSTM(3, seed=4)(e), "_keras_mask", None) is None
    # a Sequential's output keeps the mask of its last layer
    model = vdev.models.Sequential([layers.Embedding(10, 4, mask_zero=True, seed=1),
                                    layers.GRU(3, return_sequences=True, seed=2),
                                    layers.Dense(1, seed=3)])
    np.testing.assert_array_equal(model(ids)._keras_mask.numpy(), (ids != 0).astype(f32))


def test_masking_layer_bidirectional_and_pooling():
    x = rng.uniform(-1, 1, (2, 5, 3)).astype(f32)
    x[0, 1] = 0.5
    x[1, 3:] = 0.5
    x[1, 0, 1] = 0.5  # one feature alone equal: the step counts
    masking = layers.Masking(mask_value=0.5)
    o = masking(x)
    want = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 0, 0]], f32)
    np.testing.assert_array_equal(o._keras_mask.numpy(), want)
    np.testing.assert_array_equal(o.numpy(), x * want[:, :, None])
    np.testing.assert_array_equal(masking.compute_mask(x).numpy(), want)
    assert masking.get_config()["mask_value"] == 0.5
    pooled = layers.GlobalAveragePooling1D()(o).numpy()
    for row in range(2):
        np.testing.assert_allclose(pooled[row], x[row][want[row] == 1].mean(0), rtol=1e-6)
    empty = layers.GlobalAveragePooling1D()(x, mask=np.zeros((2, 5)))
    assert np.isnan(empty.numpy()).all()  # Keras's 0 / 0
    # Bidirectional: both layers skip the masked steps, their outputs 0 there
    bi = layers.Bidirectional(layers.LSTM(2, return_sequences=True, seed=5))
    z = bi(o)
    np.testing.assert_array_equal(z.numpy()[0, 1], 0)
    np.testing.assert_array_equal(z.numpy()[1, 3:], 0)
    np.testing.assert_array_equal(z._keras_mask.numpy(), want)
    fwd = bi.forward_layer
    assert fwd.zero_output_for_mask and not layers.LSTM(2).zero_output_for_mask
    short = bi(x[1:, :3]).numpy()  # row 1 right padded: the same as unpadded
    np.testing.assert_allclose(z.numpy()[1, :3], short[0], rtol=1e-5, atol=1e-6)
    last = layers.Bidirectional(layers.GRU(2, seed=6), merge_mode=None)
    outs = last(o)
    assert isinstance(outs, list) and all(getattr(t, "_keras_mask", None) is None for t in outs)


def test_merge_layers_and_attention():
    ids = np.array([[1, 2, 0], [3, 0, 0]], np.int32)
    a = layers.Embedding(5, 2, mask_zero=True, seed=1)(ids)
    ids2 = np.array([[1, 0, 2], [3, 4, 0]], np.int32)
    b = layers.Embedding(5, 2, mask_zero=True, seed=2)(ids2)
    both = (ids != 0) & (ids2 != 0)
    np.testing.assert_array_equal(layers.Add()([a, b])._keras_mask.numpy(), both)
    plain = vdev.constant(np.ones((2, 3, 2), f32))
    np.testing.assert_array_equal(layers.Multiply()([a, plain])._keras_mask.numpy(), ids != 0)
    np.testing.assert_array_equal(layers.Concatenate()([a, plain])._keras_mask.numpy(),
                                  ids != 0)
    np.testing.assert_array_equal(layers.Concatenate(axis=1)([a, b])._keras_mask.numpy(),
                                  np.concatenate([ids != 0, ids2 != 0], 1))
    for merged in (layers.Add()([a, b]), layers.Concatenate()([a, plain]),
                   layers.Concatenate(axis=1)([a, b])):
        assert merged._keras_mask.dtype == vdev.bool
    with pytest.raises(ValueError) as e:
        layers.Add().compute_mask([a, b], a._keras_mask)
    assert str(e.value).startswith("`mask` should be a list. Received: mask=")
    # MultiHeadAttention: the query's and value's masks, as Keras's
    # _compute_attention_mask, the same as the attention_mask they make
    mha = layers.MultiHeadAttention(2, 3, seed=7)
    out, probs = mha(a, b, return_attention_scores=True)
    auto = (ids != 0)[:, :, None] & (ids2 != 0)[:, None, :]
    a0, b0 = vdev.constant(a.numpy()), vdev.constant(b.numpy())
    given, given_probs = mha(a0, b0, attention_mask=auto, return_attention_scores=True)
    np.testing.assert_array_equal(out.numpy(), given.numpy())
    np.testing.assert_array_equal(probs.numpy(), given_probs.numpy())
    np.testing.assert_array_equal(out._keras_mask.numpy(), ids != 0)
    assert getattr(given, "_keras_mask", None) is None


def test_fit_and_evaluate_weigh_masked_losses():
    ids = rng.integers(1, 9, (12, 6)).astype(np.int32)
    for row in range(12):
        ids[row, rng.integers(2, 7):] = 0  # right padding, 2 to 6 steps kept
    y = rng.uniform(-1, 1, (12, 6, 1)).astype(f32)
    model = vdev.models.Sequential([layers.Embedding(10, 4, mask_zero=True, seed=1),
                                    layers.LSTM(5, return_sequences=True, seed=2),
                                    layers.Dense(1, seed=3)])
    model.compile(vdev.optimizers.Adam(0.01), "mse", metrics=["mae"])
    m = (ids != 0).astype(np.float64)
    loss, mae = model.evaluate(ids, y, batch_size=12, verbose=0)
    pred = model.predict(ids, verbose=0).astype(np.float64)[..., 0]
    err = pred - y[..., 0]
    np.testing.assert_allclose(loss, np.sum(err ** 2 * m) / m.sum(), rtol=1e-5)
    np.testing.assert_allclose(mae, np.sum(np.abs(err) * m) / m.sum(), rtol=1e-5)
    # the padded targets change nothing
    y2 = y.copy()
    y2[ids == 0] = 100.0
    np.testing.assert_allclose(model.evaluate(ids, y2, batch_size=12, verbose=0), [loss, mae],
                               rtol=1e-6)
    hist = model.fit(ids, y, batch_size=4, epochs=8, verbose=0).history
    assert hist["loss"][-1] < hist["loss"][0]
    # a loss that gives one value per row cannot be weighed per step
    model.compile(vdev.optimizers.Adam(0.01), lambda yt, yp: vdev.reduce_mean(yp, axis=[1, 2]))
    with pytest.raises(ValueError) as e:
        model.evaluate(ids, y, verbose=0)
    assert str(e.value) == ("vdev: the loss of an output with a mask of shape (12, 6) gave "
                            "losses of shape (12,); Keras weighs one loss per masked step (a "
                            "loss with reduction 'none', or a function giving [batch, steps])")


def test_mirrored_fit_of_a_masked_output_is_refused():
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        model = vdev.models.Sequential([layers.Embedding(10, 4, mask_zero=True, seed=1),
                                        layers.LSTM(3, return_sequences=True, seed=2),
                                        layers.Dense(1, seed=3)])
        model.compile(vdev.optimizers.Adam(0.01), "mse")
    ids = np.array([[1, 2, 0], [3, 0, 0]], np.int32)
    with pytest.raises(ValueError) as e:
        model.fit(ids, np.zeros((2, 3, 1), f32), verbose=0)
    assert str(e.value).startswith("vdev's fit under a MirroredStrategy takes a model whose "
                                   "output has no mask")


def test_errors():
    x = np.zeros((2, 3, 4), f32)
    cases = [
        (lambda: layers.GRU(2)(x, mask=np.ones((2, 4))), ValueError,
         "vdev: a mask of shape (2, 4) for inputs of [batch, steps] = (2, 3): a mask has one "
         "truth value per step"),
        (lambda: layers.Conv1D(2, 1, name="c").compute_mask(x, np.ones((2, 3))), TypeError,
         "Layer c does not support masking, but was passed an input_mask: [[1. 1. 1.]\n"
         " [1. 1. 1.]]"),
        (lambda: layers.Add().compute_mask([x, x], [None]), ValueError,
         "The lists `inputs` and `mask` should have the same length. Received: inputs=%s of "
         "length 2, and mask=[None] of length 1" % ([x, x],)),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == msg
    assert layers.Conv1D(2, 1).compute_mask(x, None) is None
    # time_major: the mask is [steps, batch], as the input's first two axes
    tm = layers.SimpleRNN(2, time_major=True, return_sequences=True, seed=1)
    xs = rng.uniform(-1, 1, (3, 2, 4)).astype(f32)
    mask = np.array([[1, 1], [1, 0], [0, 1]], bool)
    bm = layers.SimpleRNN(2, return_sequences=True, seed=1)
    np.testing.assert_array_equal(tm(xs, mask=mask).numpy(),
                                  np.transpose(bm(np.transpose(xs, (1, 0, 2)), mask=mask.T).numpy(),
                                               (1, 0, 2)))


def test_masks_are_bool_and_any_truth_values_are_taken():
    """Keras's masks are bool: Masking's too (a NaN feature differs from
    mask_value, as its not_equal says); a layer given a mask takes a bool or
    float tensor or an array of truth values alike."""
    x = np.zeros((2, 3, 2), f32)
    x[0, 0] = [1.0, 0.0]
    x[1, 2] = [np.nan, 0.0]
    m = layers.Masking(0.0)
    out = m(x)
    assert out._keras_mask.dtype == vdev.bool and m.compute_mask(x).dtype == vdev.bool
    want = np.array([[True, False, False], [False, False, True]])
    np.testing.assert_array_equal(out._keras_mask.numpy(), want)
    np.testing.assert_array_equal(out.numpy()[0], x[0] * want[0][:, None])
    seq = np.random.default_rng(3).uniform(-1, 1, (2, 3, 2)).astype(f32)
    lstm = layers.LSTM(2, seed=4)
    outs = [lstm(seq, mask=given).numpy() for given in
            (vdev.constant(want), vdev.constant(want.astype(f32)), want, want.astype(np.int32))]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
