"""Keras 2.11's Bidirectional wrapper: values and input gradients against
torch's bidirectional LSTM and GRU with the same weights; every merge mode
against its sub-layers' outputs combined here; return_state and
initial_state; weights' names; configs (with a backward_layer given) and
Sequential models that build, clone and train; Keras's refusals."""
import numpy as np
import pytest
import torch

import vdev
from vdev import layers

rng = np.random.default_rng(20261207)
f32 = np.float32


def load(m, sub, suffix, kind):
    W, U, b = (v.numpy() for v in sub.variables)
    u = sub.units
    perm = (np.concatenate([np.arange(u, 2 * u), np.arange(u), np.arange(2 * u, 3 * u)])
            if kind == "gru" else np.arange(W.shape[1]))
    bi, bh = (b[0], b[1]) if kind == "gru" else (b, np.zeros_like(b))
    with torch.no_grad():
        getattr(m, "weight_ih_l0" + suffix).copy_(torch.tensor(W[:, perm].T))
        getattr(m, "weight_hh_l0" + suffix).copy_(torch.tensor(U[:, perm].T))
        getattr(m, "bias_ih_l0" + suffix).copy_(torch.tensor(bi[perm]))
        getattr(m, "bias_hh_l0" + suffix).copy_(torch.tensor(bh[perm]))


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_concat_against_torch(dev, kind):
    x = rng.uniform(-1, 1, (2, 6, 3)).astype(f32)
    inner = (layers.LSTM if kind == "lstm" else layers.GRU)(4, return_sequences=True,
                                                             bias_initializer="random_uniform")
    with vdev.device(dev):
        bi = layers.Bidirectional(inner)
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            y = bi(xv)
            r = rng.uniform(-1, 1, tuple(y.shape)).astype(f32)
            loss = vdev.reduce_sum(y * r)
        gx = tape.gradient(loss, xv)
    assert y.device.endswith(dev) and y.shape == (2, 6, 8)
    m = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(3, 4, batch_first=True,
                                                             bidirectional=True).double()
    load(m, bi.forward_layer, "", kind)
    load(m, bi.backward_layer, "_reverse", kind)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ty, _ = m(xt)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    tg, = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), [xt])
    np.testing.assert_allclose(gx.numpy(), tg.numpy(), rtol=1e-5, atol=1e-5)


def test_merge_modes_states_and_names():
    x = rng.uniform(-1, 1, (2, 5, 3)).astype(f32)
    for seqs in (True, False):
        for mode in ("concat", "sum", "ave", "mul", None):
            bi = layers.Bidirectional(layers.SimpleRNN(3, return_sequences=seqs), merge_mode=mode)
            y = bi(x)
            f = bi.forward_layer(x).numpy()
            b = bi.backward_layer(x).numpy()
            if seqs:
                b = b[:, ::-1]
            want = {"concat": np.concatenate([f, b], -1), "sum": f + b, "ave": (f + b) / f32(2),
                    "mul": f * b, None: [f, b]}[mode]
            if mode is None:
                np.testing.assert_array_equal(y[0].numpy(), want[0])
                np.testing.assert_array_equal(y[1].numpy(), want[1])
            else:
                np.testing.assert_array_equal(y.numpy(), want)
            out_shape = bi.compute_output_shape((2, 5, 3))
            got_shape = [tuple(t.shape) for t in y] if mode is None else tuple(y.shape)
            assert got_shape == (out_shape if mode is not None else list(out_shape))
    bi = layers.Bidirectional(layers.LSTM(3, return_state=True, name="l"), name="bi")
    h0 = [rng.uniform(-1, 1, (2, 3)).astype(f32) for _ in range(4)]
    out, fh, fc, bh, bc = bi(x, initial_state=h0)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([fh.numpy(), bh.numpy()], -1))
    _, wfh, wfc = bi.forward_layer(x, initial_state=h0[:2])
    np.testing.assert_array_equal(fc.numpy(), wfc.numpy())
    assert [v.name for v in bi.variables][::3] == ["bi/forward_l/lstm_cell/kernel",
                                                   "bi/backward_l/lstm_cell/kernel"]
    assert bi.compute_output_shape((None, 5, 3)) == [(None, 6)] + [(None, 3)] * 4


def test_configs_and_models():
    back = layers.GRU(4, go_backwards=True, name="back")
    bi = layers.Bidirectional(layers.GRU(4, name="fwd"), merge_mode="sum", backward_layer=back,
                              input_shape=(5, 2))
    c = bi.get_config()
    assert c["merge_mode"] == "sum" and c["layer"]["class_name"] == "GRU"
    assert c["backward_layer"]["config"]["go_backwards"] is True
    again = layers.Bidirectional.from_config(c)
    assert again.backward_layer.go_backwards and again.forward_layer.name == "forward_fwd"
    x = rng.uniform(-1, 1, (32, 5, 2)).astype(f32)
    y = (x[:, :, 0].sum(axis=1, keepdims=True) / 3).astype(f32)
    model = vdev.models.Sequential([layers.Bidirectional(layers.LSTM(6), input_shape=(5, 2)),
                                    layers.Dense(1, seed=2)])
    assert model.output_shape == (None, 1) and len(model.trainable_variables) == 8
    clone = vdev.models.Sequential.from_config(model.get_config())
    assert len(clone.variables) == 8
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    loss = model.fit(x, y, batch_size=8, epochs=12, verbose=0).history["loss"]
    assert loss[-1] < 0.5 * loss[0]


def test_refusals():
    cases = [
        (lambda: layers.Bidirectional(3), "Please initialize `Bidirectional` layer with a "
                                          "`tf.keras.layers.Layer` instance. Received: 3"),
        (lambda: layers.Bidirectional(layers.LSTM(2), merge_mode="max"),
         "Invalid merge mode. Received: max. Merge mode should be one of {'sum', 'mul', 'ave', "
         "'concat', None}"),
        (lambda: layers.Bidirectional(layers.LSTM(2), backward_layer=layers.LSTM(2)),
         "Forward layer and backward layer should have different `go_backwards` value."
         "forward_layer.go_backwards = False, backward_layer.go_backwards = False"),
        (lambda: layers.Bidirectional(layers.LSTM(2), backward_layer=layers.LSTM(
            2, go_backwards=True, return_sequences=True)),
         'Forward layer and backward layer are expected to have the same value for attribute '
         '"return_sequences", got "False" for forward layer and "True" for backward layer'),
        (lambda: layers.Bidirectional(layers.Dense(2)),
         "vdev's Bidirectional wraps vdev's SimpleRNN, LSTM, GRU or RNN, not Dense"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
