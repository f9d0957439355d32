"""Keras 2.11's MultiHeadAttention: values and attention scores against a
float64 NumPy einsum of Keras's formulas (with the layer's weights),
gradients of the inputs and of all eight weights against torch's autograd of
the same formulas, masks (attention_mask, use_causal_mask, both), key apart
from value, value_dim and output_shape, no biases; the weights' names and
shapes and Keras's parameter counts; in a functional model (both inputs
recorded, a summary, a config round trip, a small transformer block that
trains), on the CPU and a simulated GPU; the refusals."""
import math

import numpy as np
import pytest
import torch

import vdev
from conftest import capture
from vdev import layers

rng = np.random.default_rng(20261206)
f32 = np.float32


def weights(layer):
    w = {}
    for v in layer.variables:
        part, kind = v.name.split("/")[-2:]
        w[part + "/" + kind] = v.numpy().astype(np.float64)
    return w


def reference(lib, w, q, v, k, key_dim, mask=None, keep=None, rate=0.0):
    """Keras's MultiHeadAttention, einsum by einsum (lib: numpy or torch);
    keep: the dropout mask of the probabilities (Keras's Dropout layer's),
    the scores returned being the probabilities before it."""
    def bias(name):
        return w.get(name, 0)
    qh = lib.einsum("abc,cde->abde", q, w["query/kernel"]) + bias("query/bias")
    kh = lib.einsum("abc,cde->abde", k, w["key/kernel"]) + bias("key/bias")
    vh = lib.einsum("abc,cde->abde", v, w["value/kernel"]) + bias("value/bias")
    qh = qh * (1.0 / math.sqrt(key_dim))
    scores = lib.einsum("aecd,abcd->acbe", kh, qh)
    if mask is not None:
        scores = scores + (1.0 - mask[:, None]) * -1e9
    if lib is torch:
        e = torch.exp(scores - scores.amax(-1, keepdim=True))
        probs = e / e.sum(-1, keepdim=True)
    else:
        e = np.exp(scores - scores.max(-1, keepdims=True))
        probs = e / e.sum(-1, keepdims=True)
    used = probs if keep is None else probs * (1.0 / (1.0 - rate)) * keep
    out = lib.einsum("acbe,aecd->abcd", used, vh)
    return lib.einsum("abcd,cde->abe", out, w["attention_output/kernel"]) + \
        bias("attention_output/bias"), probs


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_values_against_keras_formulas(dev):
    q = rng.uniform(-1, 1, (2, 5, 6)).astype(f32)
    v = rng.uniform(-1, 1, (2, 7, 4)).astype(f32)
    k = rng.uniform(-1, 1, (2, 7, 3)).astype(f32)
    mask = (rng.uniform(0, 1, (2, 5, 7)) > 0.3).astype(np.int32)
    mask[:, :, 0] = 1  # every query sees a key
    for kwargs, call in (({}, {}), ({"value_dim": 5, "output_shape": 9}, {"key": k}),
                         ({"use_bias": False}, {"attention_mask": mask})):
        with vdev.device(dev):
            layer = layers.MultiHeadAttention(3, 4, bias_initializer="random_uniform", **kwargs)
            out, probs = layer(q, v, return_attention_scores=True, **call)
        assert out.device.endswith(dev)
        w = weights(layer)
        want, wprobs = reference(np, w, q.astype(np.float64), v.astype(np.float64),
                                 call.get("key", v).astype(np.float64), 4,
                                 None if "attention_mask" not in call else mask)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(probs.numpy(), wprobs, rtol=1e-5, atol=1e-6)
        assert out.shape == (2, 5, kwargs.get("output_shape", 6))
    # a causal mask: query t sees keys up to t; with a mask too, both must keep
    s = rng.uniform(-1, 1, (2, 4, 6)).astype(f32)
    layer = layers.MultiHeadAttention(2, 3)
    _, probs = layer(s, s, use_causal_mask=True, return_attention_scores=True)
    p = probs.numpy()
    assert np.all(p[:, :, np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] < 1e-30)
    m = np.ones((2, 4, 4), np.int32)
    m[:, :, 0] = 0
    _, probs = layer(s, s, attention_mask=m, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_allclose(probs.numpy()[:, :, 1:, 0], 0, atol=1e-30)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_gradients_against_torch(dev):
    q = rng.uniform(-1, 1, (2, 4, 6)).astype(f32)
    v = rng.uniform(-1, 1, (2, 5, 6)).astype(f32)
    with vdev.device(dev):
        layer = layers.MultiHeadAttention(2, 3, bias_initializer="random_uniform")
        qv, vv = vdev.Variable(q), vdev.Variable(v)
        with vdev.GradientTape() as tape:
            out = layer(qv, vv)
            r = rng.uniform(-1, 1, tuple(out.shape)).astype(f32)
            loss = vdev.reduce_sum(out * r)
        grads = tape.gradient(loss, [qv, vv] + layer.variables)
    w = {n: torch.tensor(a, requires_grad=True) for n, a in weights(layer).items()}
    qt = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    vt = torch.tensor(v, dtype=torch.float64, requires_grad=True)
    tout, _ = reference(torch, w, qt, vt, vt, 3)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-5)
    names = [var.name.split("/")[-2] + "/" + var.name.split("/")[-1] for var in layer.variables]
    tg = torch.autograd.grad((tout * torch.tensor(r, dtype=torch.float64)).sum(),
                             [qt, vt] + [w[n] for n in names])
    for g, t in zip(grads, tg):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


def test_weights_and_config():
    layer = layers.MultiHeadAttention(2, 4, value_dim=3, name="mha")
    layer(np.zeros((1, 3, 6), f32), np.zeros((1, 5, 7), f32))
    assert [(v.name, tuple(v.shape)) for v in layer.variables] == [
        ("mha/query/kernel", (6, 2, 4)), ("mha/query/bias", (2, 4)),
        ("mha/key/kernel", (7, 2, 4)), ("mha/key/bias", (2, 4)),
        ("mha/value/kernel", (7, 2, 3)), ("mha/value/bias", (2, 3)),
        ("mha/attention_output/kernel", (2, 3, 6)), ("mha/attention_output/bias", (6,))]
    kernels = [v.numpy() for v in layer.variables if v.name.endswith("kernel")]
    assert not np.array_equal(kernels[0], kernels[1][:6])  # each kernel its own draw
    c = layer.get_config()
    assert (c["num_heads"], c["key_dim"], c["value_dim"], c["output_shape"]) == (2, 4, 3, None)
    assert layers.MultiHeadAttention.from_config(c).get_config() == c
    plain = layers.MultiHeadAttention(1, 2, use_bias=False)
    assert plain.variables == [] and not plain.built
    plain(np.zeros((1, 2, 3), f32), np.zeros((1, 2, 3), f32))
    assert [v.name.split("/")[-1] for v in plain.variables] == ["kernel"] * 4


def test_in_a_functional_model():
    x = rng.uniform(-1, 1, (32, 6, 8)).astype(f32)
    y = x[:, :, :2].mean(axis=(1, 2))[:, None].astype(f32)
    inp = vdev.Input((6, 8))
    att = layers.MultiHeadAttention(2, 4, seed=3)(inp, inp)
    h = layers.LayerNormalization()(layers.Add()([inp, att]))
    h = layers.Dense(16, activation="gelu", seed=4)(h)
    out = layers.Dense(1, seed=5)(layers.GlobalAveragePooling1D()(h))
    model = vdev.Model(inp, out)
    assert len(model.trainable_variables) == 8 + 2 + 2 + 2
    cfg = model.get_config()
    mha_cfg = [l for l in cfg["layers"] if l["class_name"] == "MultiHeadAttention"][0]
    assert len(mha_cfg["inbound_nodes"][0]) == 2  # query and value both recorded
    again = vdev.Model.from_config(cfg)
    assert len(again.trainable_variables) == len(model.trainable_variables)
    model.compile(vdev.optimizers.Adam(0.01), "mse")
    loss = model.fit(x, y, batch_size=8, epochs=10, verbose=0).history["loss"]
    assert loss[-1] < 0.5 * loss[0]


def test_refusals():
    cases = [
        (lambda: layers.MultiHeadAttention(2, 4, dropout="0.1"),
         "vdev's MultiHeadAttention takes a number for `dropout`, not '0.1'"),
        (lambda: layers.MultiHeadAttention(2, 4, dropout=1.5),
         "Invalid value 1.5 received for `rate`, expected a value between 0 and 1."),
        (lambda: layers.MultiHeadAttention(2, 4, dropout=1)(np.zeros((1, 2, 3), f32),
                                                            np.zeros((1, 2, 3), f32),
                                                            training=True),
         "`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate=1.0"),
        (lambda: layers.MultiHeadAttention(2, 4, attention_axes=(1, 2)),
         "vdev's MultiHeadAttention attends over the steps of [batch, steps, features] inputs "
         "(attention_axes None), not (1, 2)"),
        (lambda: layers.MultiHeadAttention(0, 4),
         "vdev's MultiHeadAttention takes a positive int num_heads, not 0"),
        (lambda: layers.MultiHeadAttention(2, 4)(np.zeros((2, 3), f32), np.zeros((2, 3), f32)),
         "vdev's MultiHeadAttention takes a query of 3 dimensions [batch, steps, features], "
         "not (2, 3)"),
        (lambda: layers.MultiHeadAttention(2, 4)(np.zeros((1, 2, 3), f32), np.zeros((1, 4, 3), f32),
                                                 attention_mask=np.ones((1, 2, 3))),
         "vdev's MultiHeadAttention takes an attention_mask of shape [batch, query steps, key "
         "steps] = (1, 2, 4), not (1, 2, 3)"),
        (lambda: layers.MultiHeadAttention(2, 4, kernel_regularizer="l2"),
         "vdev's MultiHeadAttention takes kernel_regularizer=None only, not 'l2'"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_dropout_of_the_probabilities(monkeypatch, dev):
    """In training, the probabilities dropped by tf.nn.dropout's mask before
    the product with the values (the mask captured as the layer draws it);
    the scores returned are the probabilities before it; values and the
    query's, value's and every weight's gradient against torch; inference,
    and the same seed, as without dropout / the same masks."""
    from vdev import _attention_layers
    keeps = capture(monkeypatch, _attention_layers, "_keep")
    q = rng.uniform(-1, 1, (2, 5, 6)).astype(f32)
    v = rng.uniform(-1, 1, (2, 7, 4)).astype(f32)
    with vdev.device(dev):
        layer = layers.MultiHeadAttention(3, 4, dropout=0.4, seed=6,
                                          bias_initializer="random_uniform")
        qv, vv = vdev.Variable(q), vdev.Variable(v)
        with vdev.GradientTape() as tape:
            out, probs = layer(qv, vv, return_attention_scores=True, training=True)
            r = rng.uniform(-1, 1, tuple(out.shape)).astype(f32)
            loss = vdev.reduce_sum(out * r)
        grads = tape.gradient(loss, [qv, vv] + layer.variables)
        infer, infer_probs = layer(q, v, return_attention_scores=True)
    assert out.device.endswith(dev) and len(keeps) == 1
    keep = keeps[0].numpy()
    assert keep.shape == (2, 3, 5, 7) and set(np.unique(keep)) == {0.0, 1.0}
    assert abs(np.mean(keep == 0) - 0.4) < 4 * np.sqrt(0.24 / keep.size)
    np.testing.assert_array_equal(probs.numpy(), infer_probs.numpy())
    w = weights(layer)
    want, want_probs = reference(np, w, q.astype(np.float64), v.astype(np.float64),
                                 v.astype(np.float64), 4, keep=keep, rate=0.4)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(probs.numpy(), want_probs, rtol=1e-5, atol=1e-6)
    plain, _ = reference(np, w, q.astype(np.float64), v.astype(np.float64), v.astype(np.float64), 4)
    np.testing.assert_allclose(infer.numpy(), plain, rtol=1e-5, atol=1e-5)
    assert np.max(np.abs(out.numpy() - infer.numpy())) > 1e-2  # the dropout changed it
    tw = {k: torch.tensor(a, requires_grad=True) for k, a in w.items()}
    tq, tv = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (q, v))
    tout, _ = reference(torch, tw, tq, tv, tv, 4, keep=torch.tensor(keep, dtype=torch.float64),
                        rate=0.4)
    names = [vr.name.split("/", 1)[1] for vr in layer.variables]
    tg = torch.autograd.grad((tout * torch.tensor(r, dtype=torch.float64)).sum(),
                             [tq, tv] + [tw[n] for n in names])
    for got, exp in zip(grads, tg):
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-4, atol=1e-5)
    # a layer of the same seed draws the same mask; a second call a new one
    twin = layers.MultiHeadAttention(3, 4, dropout=0.4, seed=6, bias_initializer="random_uniform")
    with vdev.device(dev):
        np.testing.assert_array_equal(twin(q, v, training=True).numpy(), out.numpy())
        layer(q, v, training=True)
    np.testing.assert_array_equal(keeps[1].numpy(), keep)
    assert not np.array_equal(keeps[2].numpy(), keep)
    assert layer.get_config()["dropout"] == 0.4
