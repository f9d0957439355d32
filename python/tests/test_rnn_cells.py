"""Keras 2.11's recurrent cells and RNN layer: RNN(LSTMCell / GRUCell /
SimpleRNNCell) gives the LSTM / GRU / SimpleRNN layer's outputs and states
with the same weights (masks, go_backwards, time_major, initial_state,
stateful too), Keras's weight names; StackedRNNCells the stacked layers';
a cell of one's own (a Layer with state_size) runs and trains; a cell's
dropout masks are drawn once per call; functional models, configs and
errors in Keras's words."""
import numpy as np
import pytest

import vdev
from conftest import capture
from vdev import layers

rng = np.random.default_rng(20261219)
f32 = np.float32
KINDS = [(layers.LSTMCell, layers.LSTM), (layers.GRUCell, layers.GRU),
         (layers.SimpleRNNCell, layers.SimpleRNN)]


def twin(layer_cls, rnn, **kw):
    ref = layer_cls(6, **kw)
    ref.build(4)
    ref.set_weights(rnn.get_weights())
    return ref


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("cell_cls,layer_cls", KINDS, ids=["lstm", "gru", "simple"])
def test_rnn_of_a_cell_is_the_layer(dev, cell_cls, layer_cls):
    x = rng.uniform(-1, 1, (3, 5, 4)).astype(f32)
    mask = np.array([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1], [1, 0, 1, 0, 1]], bool)
    for kw in ({}, {"go_backwards": True}, {"time_major": True}):
        with vdev.device(dev):
            rnn = layers.RNN(cell_cls(6, seed=3, bias_initializer="random_uniform"),
                             return_sequences=True, return_state=True, **kw)
            xin = np.transpose(x, (1, 0, 2)) if kw.get("time_major") else x
            m = mask.T if kw.get("time_major") else mask
            got = rnn(xin, mask=m)
            ref = twin(layer_cls, rnn, return_sequences=True, return_state=True, **kw)
            want = ref(xin, mask=m)
        assert got[0].device.endswith(dev) and len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert [v.name.split("/")[-1] for v in rnn.variables] == ["kernel", "recurrent_kernel",
                                                             "bias"]
    assert rnn.variables[0].name == "%s/%s/kernel" % (rnn.name, rnn.cell.name)
    # initial_state; gradients of every weight as the layer's
    h0 = [rng.uniform(-1, 1, (3, 6)).astype(f32) for _ in rnn.states]
    xv = vdev.Variable(x)
    rnn2 = layers.RNN(cell_cls(6, seed=4))
    with vdev.GradientTape() as tape:
        y = rnn2(xv, initial_state=h0)
        loss = vdev.reduce_sum(y * y)
    g = tape.gradient(loss, [xv] + rnn2.variables)
    ref2 = twin(layer_cls, rnn2)
    with vdev.GradientTape() as tape:
        y2 = ref2(xv, initial_state=h0)
        loss2 = vdev.reduce_sum(y2 * y2)
    g2 = tape.gradient(loss2, [xv] + ref2.variables)
    for a, b in zip(g, g2):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_stacked_custom_stateful_and_dropout(monkeypatch):
    x = rng.uniform(-1, 1, (3, 5, 4)).astype(f32)
    stacked = layers.RNN([layers.LSTMCell(5, seed=1), layers.GRUCell(3, seed=2)],
                         return_state=True)
    out, h1, c1, h2 = stacked(x)
    lstm = layers.LSTM(5, return_sequences=True, return_state=True, seed=1)
    lstm.build(4)
    gru = layers.GRU(3, return_state=True, seed=2)
    gru.build(5)
    ws = stacked.get_weights()
    lstm.set_weights(ws[:3])
    gru.set_weights(ws[3:])
    seq, wh1, wc1 = lstm(x)
    wout, wh2 = gru(seq)
    for a, b in ((out, wout), (h1, wh1), (c1, wc1), (h2, wh2)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert stacked.variables[0].name == "%s/stacked_rnn_cells/%s/kernel" % (
        stacked.name, stacked.cell.cells[0].name)

    class MinimalCell(layers.Layer):  # Keras's documented custom cell
        def __init__(self, units):
            super().__init__()
            self.units, self.state_size = units, units
            self.kernel = None

        def __call__(self, inputs, states):
            if self.kernel is None:
                r = np.random.default_rng(5)
                self.kernel = vdev.Variable(r.uniform(-0.5, 0.5, (4, self.units)).astype(f32))
                self.recurrent = vdev.Variable(
                    r.uniform(-0.5, 0.5, (self.units, self.units)).astype(f32))
                self._variables = [self.kernel, self.recurrent]
            h = vdev.matmul(inputs, self.kernel) + vdev.matmul(states[0], self.recurrent)
            return h, [h]
    custom = layers.RNN(MinimalCell(2))
    y = custom(x).numpy()
    cell = custom.cell
    h = np.zeros((3, 2), f32)
    for t in range(5):
        h = x[:, t] @ cell.kernel.numpy() + h @ cell.recurrent.numpy()
    np.testing.assert_allclose(y, h, rtol=1e-5, atol=1e-6)
    model = vdev.models.Sequential([vdev.Input((5, 4)), layers.RNN(MinimalCell(3)),
                                    layers.Dense(1, seed=1)])
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    hist = model.fit(x, x.sum(axis=(1, 2))[:, None] * 0.1, epochs=10, verbose=0)
    assert hist.history["loss"][-1] < hist.history["loss"][0]
    # stateful: two halves as the whole
    st = layers.RNN(layers.GRUCell(4, seed=6), stateful=True)
    st(x[:, :2])
    whole = layers.RNN(layers.GRUCell(4, seed=6))
    np.testing.assert_allclose(st(x[:, 2:]).numpy(), whole(x).numpy(), rtol=1e-5, atol=1e-6)
    st.reset_states()
    assert np.all(st.states[0].numpy() == 0)
    # a cell's dropout masks: one draw per call, kept for its steps
    drop = layers.RNN(layers.LSTMCell(4, dropout=0.3, recurrent_dropout=0.3, seed=7))
    seen = capture(monkeypatch, drop.cell._impl, "_dropout_masks")
    drop(x, training=True)
    drop(x, training=True)
    assert len(seen) == 2 and all(len(d) == 4 and len(r) == 4 for d, r in seen)


def test_bidirectional_of_an_rnn():
    x = rng.uniform(-1, 1, (3, 5, 4)).astype(f32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)
    bi = layers.Bidirectional(layers.RNN(layers.GRUCell(3, seed=1), return_sequences=True,
                                         return_state=True))
    got = bi(x, mask=mask)
    ref = layers.Bidirectional(layers.GRU(3, seed=1, return_sequences=True, return_state=True))
    ref.build(4)
    ref.set_weights(bi.get_weights())
    want = ref(x, mask=mask)
    assert len(got) == len(want) == 3
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert bi.variables[0].name.startswith(bi.name + "/forward_")


def test_functional_configs_and_errors():
    inp = vdev.Input((None, 4))
    rnn = layers.RNN(layers.LSTMCell(3, seed=1))
    model = vdev.Model(inp, layers.Dense(1, seed=2)(rnn(inp)))
    assert rnn.built and rnn.count_params() == 4 * (3 * (4 + 3) + 3)
    again = vdev.Model.from_config(model.get_config())
    again.set_weights(model.get_weights())
    x = rng.uniform(-1, 1, (2, 6, 4)).astype(f32)
    np.testing.assert_allclose(again(x).numpy(), model(x).numpy(), rtol=1e-6)
    c = layers.LSTMCell(3, dropout=0.1).get_config()
    assert "return_sequences" not in c and c["dropout"] == 0.1 and c["units"] == 3
    stacked = layers.RNN([layers.SimpleRNNCell(2), layers.SimpleRNNCell(3)])
    assert isinstance(layers.RNN.from_config(stacked.get_config()).cell, layers.StackedRNNCells)
    cases = [
        (lambda: layers.RNN("lstm"), "Argument `cell` should have a `call` method. The RNN was "
                                     "passed: cell=lstm"),
        (lambda: layers.RNN(layers.Dense(2)), "The RNN cell should have a `state_size` "
         "attribute (tuple of integers, one integer per RNN state). Received: cell=<"),
        (lambda: layers.RNN(layers.LSTMCell(2))(np.zeros((2, 3, 4), f32),
                                               initial_state=[np.zeros((2, 2), f32)]),
         "An `initial_state` was passed that is not compatible with `cell.state_size`. "
         "Received `state_spec`=1 states; however `cell.state_size` is [2, 2]"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg or (msg.endswith("<") and str(e.value).startswith(msg))


def test_cell_dropout_under_a_mirrored_strategy():
    """Each replica's step draws its own masks on its own device (a cell's
    masks are kept per thread: the replicas call one cell at once)."""
    x = rng.uniform(-1, 1, (16, 5, 4)).astype(f32)
    y = x.sum(axis=(1, 2))[:, None] * 0.1
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        model = vdev.models.Sequential([
            vdev.Input((5, 4)), layers.RNN(layers.LSTMCell(4, dropout=0.2, seed=1)),
            layers.Dense(1, seed=2)])
        model.compile(vdev.optimizers.Adam(0.02), "mse")
    hist = model.fit(x, y, batch_size=8, epochs=4, verbose=0).history["loss"]
    assert np.all(np.isfinite(hist)) and hist[-1] < hist[0]
    for v in model.layers[0].variables:  # the replicas' copies stay equal
        copies = [c.numpy() for c in v.values]
        np.testing.assert_array_equal(copies[0], copies[1])
