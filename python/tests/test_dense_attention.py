"""Keras 2.11's Attention (dot and concat scores, with and without scale)
and AdditiveAttention (with and without scale): values and attention
scores against a float64 NumPy loop of Keras's formulas written here,
gradients of the query, the value, the key and every weight against
torch's autograd of the same formulas, the value's and the query's masks
(given, or the inputs' own), the causal mask, dropout (its mask captured as
the layer draws it); weights, configs, a functional model of Keras's
documented example that builds, summarizes and trains; on the CPU and a
simulated GPU; the errors in Keras's words."""
import numpy as np
import pytest
import torch

import vdev
from conftest import capture
from vdev import layers

rng = np.random.default_rng(20261211)
f32 = np.float32


def loop_reference(kind, use_scale, score_mode, w, q, v, k, v_mask=None, q_mask=None,
                   causal=False, keep=None, rate=0.0):
    """Keras's BaseDenseAttention element by element in float64: (result,
    weights before dropout)."""
    B, Tq, D = q.shape
    Tv = v.shape[1]
    scores = np.zeros((B, Tq, Tv))
    for b in range(B):
        for i in range(Tq):
            for j in range(Tv):
                if kind == "Attention" and score_mode == "dot":
                    s = float(np.dot(q[b, i], k[b, j]))
                    scores[b, i, j] = s * w["scale"] if use_scale else s
                elif kind == "Attention":
                    x = q[b, i] + k[b, j]
                    if use_scale:
                        x = w["scale"] * x
                    scores[b, i, j] = w["concat_score_weight"] * np.sum(np.tanh(x))
                else:
                    t = np.tanh(q[b, i] + k[b, j])
                    scores[b, i, j] = np.sum(w["scale"] * t if use_scale else t)
                masked = (v_mask is not None and not v_mask[b, j]) or (causal and j > i)
                if masked:
                    scores[b, i, j] -= 1e9
    e = np.exp(scores - scores.max(-1, keepdims=True))
    weights = e / e.sum(-1, keepdims=True)
    used = weights if keep is None else weights / (1 - rate) * keep
    result = used @ v
    if q_mask is not None:
        result = result * q_mask[:, :, None]
    return result, weights


def torch_reference(kind, use_scale, score_mode, tw, q, v, k, v_mask, q_mask, keep, rate):
    if kind == "Attention" and score_mode == "dot":
        scores = q @ k.transpose(1, 2)
        if use_scale:
            scores = scores * tw["scale"]
    elif kind == "Attention":
        x = q[:, :, None] + k[:, None]
        if use_scale:
            x = tw["scale"] * x
        scores = tw["concat_score_weight"] * torch.tanh(x).sum(-1)
    else:
        t = torch.tanh(q[:, :, None] + k[:, None])
        scores = (tw["scale"] * t if use_scale else t).sum(-1)
    if v_mask is not None:
        scores = scores - 1e9 * (1 - torch.tensor(v_mask, dtype=torch.float64))[:, None]
    weights = torch.softmax(scores, -1)
    if keep is not None:
        weights = weights / (1 - rate) * torch.tensor(keep, dtype=torch.float64)
    result = weights @ v
    if q_mask is not None:
        result = result * torch.tensor(q_mask, dtype=torch.float64)[:, :, None]
    return result


CASES = [("Attention", False, "dot"), ("Attention", True, "dot"), ("Attention", False, "concat"),
         ("Attention", True, "concat"), ("AdditiveAttention", True, None),
         ("AdditiveAttention", False, None)]


def make(kind, use_scale, score_mode, **kw):
    if kind == "Attention":
        layer = layers.Attention(use_scale=use_scale, score_mode=score_mode, **kw)
    else:
        layer = layers.AdditiveAttention(use_scale=use_scale, **kw)
    return layer


def weights_of(layer):
    w = {v.name.split("/")[-1]: v.numpy().astype(np.float64) for v in layer.variables}
    return w


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("kind,use_scale,score_mode", CASES,
                         ids=["%s-%s-%s" % c for c in CASES])
def test_values_masks_and_gradients(monkeypatch, dev, kind, use_scale, score_mode):
    q = rng.uniform(-1, 1, (2, 4, 3)).astype(f32)
    v = rng.uniform(-1, 1, (2, 5, 3)).astype(f32)
    k = rng.uniform(-1, 1, (2, 5, 3)).astype(f32)
    v_mask = np.array([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0]], bool)
    q_mask = np.array([[1, 1, 1, 0], [0, 1, 1, 1]], bool)
    with vdev.device(dev):
        layer = make(kind, use_scale, score_mode, seed=5)
        layer([q, v])  # built
        for var in layer.variables:  # weights other than 1, so a wrong use shows
            var.assign(rng.uniform(0.5, 1.5, tuple(var.shape)).astype(f32))
        out, scores = layer([q, v], return_attention_scores=True)
        assert out.device.endswith(dev) and out.shape == (2, 4, 3)
        w = weights_of(layer)
        want, want_scores = loop_reference(kind, use_scale, score_mode, w, q.astype(np.float64),
                                           v.astype(np.float64), v.astype(np.float64))
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(scores.numpy(), want_scores, rtol=1e-5, atol=1e-6)
        # a key apart from the value, both masks, the causal mask
        out = layer([q, v, k], mask=[q_mask, v_mask])
        want, _ = loop_reference(kind, use_scale, score_mode, w, q.astype(np.float64),
                                 v.astype(np.float64), k.astype(np.float64), v_mask, q_mask)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
        out = layer([q, v, k], use_causal_mask=True)
        want, _ = loop_reference(kind, use_scale, score_mode, w, q.astype(np.float64),
                                 v.astype(np.float64), k.astype(np.float64), causal=True)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
        # gradients, with dropout in training (its mask captured)
        from vdev import _dense_attention
        keeps = capture(monkeypatch, _dense_attention, "_keep")
        layer.dropout = 0.3
        qv, vv, kv = (vdev.Variable(a) for a in (q, v, k))
        with vdev.GradientTape() as tape:
            out = layer([qv, vv, kv], mask=[q_mask, v_mask], training=True)
            r = rng.uniform(-1, 1, tuple(out.shape)).astype(f32)
            loss = vdev.reduce_sum(out * r)
        grads = tape.gradient(loss, [qv, vv, kv] + layer.variables)
    keep = keeps[0].numpy()
    assert len(keeps) == 1 and set(np.unique(keep)) <= {0.0, 1.0}
    want, _ = loop_reference(kind, use_scale, score_mode, w, q.astype(np.float64),
                             v.astype(np.float64), k.astype(np.float64), v_mask, q_mask,
                             keep=keep, rate=0.3)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    tw = {n: torch.tensor(a, requires_grad=True) for n, a in w.items()}
    tq, tv, tk = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (q, v, k))
    tout = torch_reference(kind, use_scale, score_mode, tw, tq, tv, tk, v_mask, q_mask, keep,
                           0.3)
    names = [var.name.split("/")[-1] for var in layer.variables]
    tg = torch.autograd.grad((tout * torch.tensor(r, dtype=torch.float64)).sum(),
                             [tq, tv, tk] + [tw[n] for n in names])
    for got, exp in zip(grads, tg):
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-4, atol=1e-5)


def test_weights_configs_and_masks_of_the_inputs():
    att = layers.Attention(use_scale=True, score_mode="concat", name="att")
    att([np.zeros((1, 2, 3), f32), np.zeros((1, 4, 3), f32)])
    assert [v.name for v in att.variables] == ["att/scale", "att/concat_score_weight"]
    assert all(v.shape == () and v.numpy() == 1 for v in att.variables)
    add = layers.AdditiveAttention(seed=3, name="add")
    add([np.zeros((1, 2, 6), f32), np.zeros((1, 4, 6), f32)])
    [scale] = add.variables
    assert scale.name == "add/scale" and scale.shape == (6,)
    assert np.all(np.abs(scale.numpy()) <= np.sqrt(6 / 12) + 1e-7)  # glorot_uniform of [6]
    again = layers.AdditiveAttention(seed=3)
    again([np.zeros((1, 2, 6), f32), np.zeros((1, 4, 6), f32)])
    np.testing.assert_array_equal(again.variables[0].numpy(), scale.numpy())
    assert att.get_config() == {"name": "att", "trainable": True, "dtype": "float32",
                                "dropout": 0.0, "use_scale": True, "score_mode": "concat"}
    assert layers.AdditiveAttention.from_config(add.get_config()).use_scale is True
    # the inputs' own masks, as the masks given
    ids_q = np.array([[1, 2, 0], [3, 0, 0]], np.int32)
    ids_v = np.array([[4, 0, 5, 6], [7, 8, 0, 0]], np.int32)
    emb = layers.Embedding(9, 3, mask_zero=True, seed=1)
    qe, ve = emb(ids_q), emb(ids_v)
    lay = layers.Attention()
    out = lay([qe, ve])
    np.testing.assert_array_equal(out._keras_mask.numpy(), ids_q != 0)
    plain = [vdev.constant(qe.numpy()), vdev.constant(ve.numpy())]
    np.testing.assert_array_equal(out.numpy(), lay(plain, mask=[ids_q != 0, ids_v != 0]).numpy())


def test_functional_model_of_keras_example():
    """Keras's documented use: a query and a value encoding of token
    sequences, attention between them, pooled, concatenated, classified."""
    q_in = vdev.Input((None,), dtype="int32")
    v_in = vdev.Input((None,), dtype="int32")
    emb = layers.Embedding(20, 8, seed=1)
    cnn = layers.Conv1D(8, 3, padding="same", seed=2)
    q_enc, v_enc = cnn(emb(q_in)), cnn(emb(v_in))
    attended = layers.Attention()([q_enc, v_enc])
    pooled = layers.Concatenate()([layers.GlobalAveragePooling1D()(q_enc),
                                   layers.GlobalAveragePooling1D()(attended)])
    model = vdev.Model([q_in, v_in], layers.Dense(1, seed=3)(pooled))
    lines = []
    model.summary(print_fn=lines.append)
    assert any("(Attention)" in l for l in lines)
    xq = rng.integers(0, 20, (32, 6)).astype(np.int32)
    xv = rng.integers(0, 20, (32, 9)).astype(np.int32)
    y = (xq.mean(1, keepdims=True) > xv.mean(1, keepdims=True)).astype(f32)
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    hist = model.fit([xq, xv], y, batch_size=8, epochs=6, verbose=0).history["loss"]
    assert hist[-1] < hist[0]
    with pytest.raises(ValueError) as e:
        layers.AdditiveAttention()([q_enc, v_enc], return_attention_scores=True)
    assert str(e.value).startswith("vdev's AdditiveAttention in a functional model takes "
                                   "use_causal_mask and training, not return_attention_scores")


def test_errors():
    x = np.zeros((1, 2, 3), f32)
    cases = [
        (lambda: layers.Attention(score_mode="add"),
         'Received: score_mode=add. Acceptable values are: ["dot", "concat"]'),
        (lambda: layers.Attention()(x),
         "Attention layer must be called on a list of inputs, namely [query, value] or "
         "[query, value, key]. Received: %s." % (x,)),
        (lambda: layers.AdditiveAttention()([x]),
         "AdditiveAttention layer accepts inputs list of length 2 or 3, namely [query, value] "
         "or [query, value, key]. Received length: 1."),
        (lambda: layers.Attention()([x, x], mask=[None]),
         "Attention layer mask must be a list of length 2, namely [query_mask, value_mask]. "
         "Received length: 1."),
        (lambda: layers.Attention(dropout="a"), "vdev's Attention takes a number for `dropout`, "
                                                "not 'a'"),
        (lambda: layers.Attention(dropout=1)([x, x], training=True),
         "`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate=1.0"),
        (lambda: layers.Attention()([x, np.zeros((1, 2), f32)]),
         "vdev's Attention takes a value of 3 dimensions [batch, steps, dim], not (1, 2)"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
