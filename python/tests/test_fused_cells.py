"""The fused LSTM and GRU cells (src/ops/lstm_cell.c, gru_cell.c) under
Keras's LSTM and GRU. The LSTM cell: its ops
(LSTMGates, LSTMCellState, LSTMCellOutput) give the bits of the ops they
fuse (Sigmoid of z, its slices, Tanh, Mul, AddV2) on the CPU and on a
simulated GPU, 2-D and 3-D, saturated gates included, and so do their
gradients; an LSTM layer and an LSTMCell in an RNN take them only with the
Tanh and Sigmoid activations, and give the composed step's outputs, and a
fit its losses and weights, to the bit; an LSTM step runs one each of
LSTMGates, LSTMCellState, Tanh and LSTMCellOutput, no Sigmoid and no Mul;
the ops' refusals in their words. The GRU cell (reset_after, TensorFlow 2's
default): GRUGates and GRUCellOutput give the bits of the composed step
(Sigmoid of the z and r columns, slices, Mul, AddV2, Tanh, Sub), forward
and backward, and a GRU layer and a fit the composed step's, one GRUGates
and one GRUCellOutput a step; reset_after=False keeps the composed step.
Three simulated 16 GiB GPUs (conftest)."""
import numpy as np
import pytest

import vdev
from vdev import _ops, _recurrent_layers, layers

rng = np.random.default_rng(20261206)
f32 = np.float32


def composed(z, c_prev):
    u = c_prev.shape[-1]
    g = vdev.sigmoid(z)
    i, f, o = g[..., 0:u], g[..., u:2 * u], g[..., 3 * u:4 * u]
    c = vdev.add(vdev.multiply(f, c_prev), vdev.multiply(i, vdev.tanh(z[..., 2 * u:3 * u])))
    return c, vdev.multiply(o, vdev.tanh(c))


def fused(z, c_prev):
    a = _ops.lstm_gates(z)
    c = _ops.lstm_cell_state(a, c_prev)
    return c, _ops.lstm_cell_output(a, vdev.tanh(c))


def bits(t):
    return t.numpy().tobytes()


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("shape,span", [((5, 3), 3.0), ((2, 4, 7), 3.0), ((6, 8), 25.0)])
def test_the_ops_give_the_composed_ops_bits(dev, shape, span):
    zs = shape[:-1] + (4 * shape[-1],)
    with vdev.device(dev):
        z = vdev.constant(rng.uniform(-span, span, zs).astype(f32))
        cp = vdev.constant(rng.uniform(-2, 2, shape).astype(f32))
        want, got = composed(z, cp), fused(z, cp)
    assert bits(got[0]) == bits(want[0]) and bits(got[1]) == bits(want[1])
    assert got[1].device.endswith(dev)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:2"])
def test_the_gradients_are_the_composed_ops_to_rounding(dev):
    with vdev.device(dev):
        z = vdev.Variable(rng.uniform(-3, 3, (6, 20)).astype(f32))
        cp = vdev.Variable(rng.uniform(-2, 2, (6, 5)).astype(f32))
        w = vdev.constant(rng.uniform(-1, 1, (6, 5)).astype(f32))
        grads = []
        for step in (composed, fused):
            with vdev.GradientTape() as tape:
                c, h = step(z, cp)
                # both outputs used, and c twice (by h and by the loss)
                loss = vdev.reduce_sum(vdev.add(vdev.multiply(h, w), vdev.multiply(c, c)))
            grads.append([g.numpy() for g in tape.gradient(loss, [z, cp])])
    for a, b in zip(*grads):
        assert a.tobytes() == b.tobytes()
    assert np.count_nonzero(grads[1][0]) > 0.9 * grads[1][0].size


def lstm_pair(**kw):
    x = rng.uniform(-1, 1, (4, 7, 3)).astype(f32)
    a = layers.LSTM(5, return_sequences=True, return_state=True, **kw)
    b = layers.LSTM(5, return_sequences=True, return_state=True, **kw)
    a.build(3)
    b.build(3)
    for va, vb in zip(a.variables, b.variables):
        vb.assign(va.numpy())
    return x, a, b


def test_an_lstm_layer_gives_the_composed_steps_bits(monkeypatch):
    for kw in ({}, {"implementation": 1}, {"go_backwards": True},
               {"activation": vdev.activations.tanh,
                "recurrent_activation": vdev.activations.sigmoid}):
        x, a, b = lstm_pair(**kw)
        got = a(x)
        with monkeypatch.context() as m:
            m.setattr(_recurrent_layers, "_fused_cell", lambda layer: False)
            want = b(x)
        assert [bits(t) for t in got] == [bits(t) for t in want], kw


def test_the_fused_cell_only_for_tanh_and_sigmoid():
    assert _recurrent_layers._fused_cell(layers.LSTM(3))
    assert _recurrent_layers._fused_cell(layers.LSTM(3, activation="tanh"))
    for kw in ({"activation": "relu"}, {"recurrent_activation": "hard_sigmoid"},
               {"activation": None}):
        assert not _recurrent_layers._fused_cell(layers.LSTM(3, **kw)), kw
    # a relu LSTM still runs (the composed step) and differs from tanh's
    x = rng.uniform(-1, 1, (2, 4, 3)).astype(f32)
    vdev.random.set_seed(1)
    r = layers.LSTM(3, activation="relu")(x).numpy()
    vdev.random.set_seed(1)
    t = layers.LSTM(3)(x).numpy()
    assert not np.array_equal(r, t)


def test_an_lstm_step_is_one_state_and_one_output_op():
    x = rng.uniform(-1, 1, (2, 6, 3)).astype(f32)
    lstm = layers.LSTM(4)
    lstm.build(3)
    vdev.placement.reset()
    lstm(x)
    for op in ("LSTMGates", "LSTMCellState", "Tanh", "LSTMCellOutput"):
        assert vdev.placement.op_count(op) == 6, op
    assert vdev.placement.op_count("Sigmoid") == 0 and vdev.placement.op_count("Mul") == 0


def test_an_lstm_cell_in_an_rnn_and_a_fit_against_the_composed_step(monkeypatch):
    x = rng.uniform(-1, 1, (8, 5, 3)).astype(f32)
    y = rng.uniform(-1, 1, (8, 1)).astype(f32)

    def model():
        vdev.random.set_seed(4)
        m = vdev.keras.Sequential([layers.Input((5, 3)), layers.RNN(layers.LSTMCell(6)),
                                   layers.Dense(1, kernel_initializer="ones")])
        m.compile(vdev.optimizers.Adam(0.01), "mse")
        return m
    a = model()
    ha = a.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    with monkeypatch.context() as m:
        m.setattr(_recurrent_layers, "_fused_cell", lambda layer: False)
        b = model()
        hb = b.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert ha.history["loss"] == hb.history["loss"]
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    assert ha.history["loss"][1] < ha.history["loss"][0]


def test_refusals():
    z = vdev.constant(np.zeros((2, 8), f32))
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        _ops.lstm_cell_state(z, vdev.constant(np.zeros((2, 3), f32)))
    assert str(e.value) == ("LSTMCellState: incompatible shapes [2,8] and [2,3] (the gates must "
                            "have c's shape with a last axis 4 times c's: i, f, g, o)")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        _ops.lstm_gates(vdev.constant(np.zeros((2, 6), f32)))
    assert str(e.value) == ("LSTMGates: bad input shape [2,6] (the last axis holds the gates i, f, "
                            "g, o: a multiple of 4)")


# ---- the GRU cell ----

def gru_composed(xw, inner, h_prev):
    u = h_prev.shape[-1]
    zr = vdev.sigmoid(vdev.add(xw[..., :2 * u], inner[..., :2 * u]))
    z, r = zr[..., :u], zr[..., u:2 * u]
    hh = vdev.tanh(vdev.add(xw[..., 2 * u:], vdev.multiply(r, inner[..., 2 * u:])))
    return vdev.add(vdev.multiply(z, h_prev), vdev.multiply(vdev.subtract(1.0, z), hh))


def gru_fused(xw, inner, h_prev):
    return _ops.gru_cell_output(_ops.gru_gates(xw, inner), h_prev)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("shape,span", [((5, 3), 3.0), ((2, 4, 7), 3.0), ((6, 8), 25.0)])
def test_the_gru_ops_and_their_gradients_give_the_composed_bits(dev, shape, span):
    gs = shape[:-1] + (3 * shape[-1],)
    with vdev.device(dev):
        xw = vdev.Variable(rng.uniform(-span, span, gs).astype(f32))
        inner = vdev.Variable(rng.uniform(-span, span, gs).astype(f32))
        hp = vdev.Variable(rng.uniform(-2, 2, shape).astype(f32))
        w = vdev.constant(rng.uniform(-1, 1, shape).astype(f32))
        outs, grads = [], []
        for step in (gru_composed, gru_fused):
            with vdev.GradientTape() as tape:
                h = step(xw, inner, hp)
                loss = vdev.reduce_sum(vdev.multiply(vdev.multiply(h, h), w))
            outs.append(bits(h))
            grads.append([g.numpy() for g in tape.gradient(loss, [xw, inner, hp])])
    assert outs[0] == outs[1]
    for a, b in zip(*grads):
        assert np.array_equal(a, b)  # -0 and +0 alike: a zero sum's sign may differ


def test_a_gru_layer_and_its_fit_give_the_composed_steps_bits(monkeypatch):
    x = rng.uniform(-1, 1, (8, 6, 3)).astype(f32)
    y = rng.uniform(-1, 1, (8, 1)).astype(f32)

    def run():
        vdev.random.set_seed(5)
        m = vdev.keras.Sequential([layers.Input((6, 3)), layers.GRU(5, return_sequences=True),
                                   layers.GRU(4, go_backwards=True), layers.Dense(1)])
        m.compile(vdev.optimizers.Adam(0.01), "mse")
        out = m.predict(x, verbose=0)
        h = m.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        return out, h.history["loss"], [bits(v) for v in m.weights]
    fused = run()
    with monkeypatch.context() as m:
        m.setattr(_recurrent_layers, "_fused_cell", lambda layer: False)
        composed = run()
    assert fused[0].tobytes() == composed[0].tobytes()
    assert fused[1] == composed[1] and fused[2] == composed[2]
    assert fused[1][1] < fused[1][0]


def test_a_gru_step_is_one_gates_and_one_output_op():
    x = rng.uniform(-1, 1, (2, 6, 3)).astype(f32)
    for reset_after, want in ((True, 6), (False, 0)):
        gru = layers.GRU(4, reset_after=reset_after)
        gru.build(3)
        vdev.placement.reset()
        gru(x)
        assert vdev.placement.op_count("GRUGates") == want
        assert vdev.placement.op_count("GRUCellOutput") == want
        assert (vdev.placement.op_count("Sigmoid") == 0) == reset_after
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        _ops.gru_gates(vdev.constant(np.zeros((2, 6), f32)), vdev.constant(np.zeros((2, 9), f32)))
    assert str(e.value) == ("GRUGates: incompatible shapes [2,6] and [2,9] (the gates' inputs "
                            "must have one shape, a last axis of 3 units: z, r, h)")
