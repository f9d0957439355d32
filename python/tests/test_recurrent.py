"""Keras 2.11's SimpleRNN, LSTM and GRU (reset_after True and False): values
and gradients (of the inputs and of every weight) against torch's RNN, LSTM
and GRU in float64 with the same weights, and against a NumPy float64 loop
of Keras's cell formulas written here; return_sequences, return_state,
go_backwards, time_major, initial_state; the weights' names, shapes and
initial values (unit_forget_bias, the Orthogonal initializer); configs,
shapes, Sequential models that build and train, on the CPU and a simulated
GPU; every refusal in its words."""
import numpy as np
import pytest
import torch

import vdev
from vdev import initializers, layers

rng = np.random.default_rng(20261206)
f32 = np.float32


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def keras_loop(kind, x, W, U, b, h0=None, c0=None, backwards=False, reset_after=True):
    """Keras's cells in float64, step by step: the outputs [B, T, units] in
    the order of the steps taken, and the last states."""
    x, W, U = (np.asarray(a, np.float64) for a in (x, W, U))
    b = None if b is None else np.asarray(b, np.float64)
    B, T, _ = x.shape
    u = U.shape[0]
    h = np.zeros((B, u)) if h0 is None else np.asarray(h0, np.float64)
    c = np.zeros((B, u)) if c0 is None else np.asarray(c0, np.float64)
    outs = []
    for t in (range(T - 1, -1, -1) if backwards else range(T)):
        xt = x[:, t]
        if kind == "simple":
            h = np.tanh(xt @ W + (0 if b is None else b) + h @ U)
        elif kind == "lstm":
            z = xt @ W + h @ U + (0 if b is None else b)
            i, f, g, o = (z[:, k * u:(k + 1) * u] for k in range(4))
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
        else:
            bx = 0 if b is None else (b[0] if reset_after else b)
            mx = xt @ W + bx
            if reset_after:
                mi = h @ U + (0 if b is None else b[1])
                z = sigmoid(mx[:, :u] + mi[:, :u])
                r = sigmoid(mx[:, u:2 * u] + mi[:, u:2 * u])
                hh = np.tanh(mx[:, 2 * u:] + r * mi[:, 2 * u:])
            else:
                mi = h @ U[:, :2 * u]
                z = sigmoid(mx[:, :u] + mi[:, :u])
                r = sigmoid(mx[:, u:2 * u] + mi[:, u:])
                hh = np.tanh(mx[:, 2 * u:] + (r * h) @ U[:, 2 * u:])
            h = z * h + (1 - z) * hh
        outs.append(h)
    return np.stack(outs, 1), h, c


def torch_twin(layer):
    """torch's module of the same kind with the layer's weights (float64):
    torch's gates are i, f, g, o (LSTM, as Keras's) and r, z, n (GRU, Keras's
    z, r, h reordered); its second bias is the recurrent one."""
    W, U = layer.kernel.numpy(), layer.recurrent_kernel.numpy()
    b = layer.bias.numpy() if layer.bias is not None else None
    d, n = W.shape
    u = layer.units
    if isinstance(layer, layers.LSTM):
        m = torch.nn.LSTM(d, u, batch_first=True, bias=b is not None)
        perm = np.arange(n)
        bi, bh = b, None
    elif isinstance(layer, layers.GRU):
        m = torch.nn.GRU(d, u, batch_first=True, bias=b is not None)
        perm = np.concatenate([np.arange(u, 2 * u), np.arange(u), np.arange(2 * u, 3 * u)])
        bi, bh = (b[0], b[1]) if b is not None else (None, None)
    else:
        m = torch.nn.RNN(d, u, batch_first=True, bias=b is not None)
        perm = np.arange(n)
        bi, bh = b, None
    m = m.double()
    with torch.no_grad():
        m.weight_ih_l0.copy_(torch.tensor(W[:, perm].T))
        m.weight_hh_l0.copy_(torch.tensor(U[:, perm].T))
        if b is not None:
            m.bias_ih_l0.copy_(torch.tensor(bi[perm]))
            m.bias_hh_l0.copy_(torch.tensor(bh[perm]) if bh is not None else
                               torch.zeros(n, dtype=torch.float64))
    return m


KINDS = [("simple", lambda **k: layers.SimpleRNN(5, **k)), ("lstm", lambda **k: layers.LSTM(5, **k)),
         ("gru", lambda **k: layers.GRU(5, **k))]


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("kind,make", KINDS, ids=[k[0] for k in KINDS])
def test_values_and_gradients_against_torch(dev, kind, make):
    x = rng.uniform(-1, 1, (3, 6, 4)).astype(f32)
    with vdev.device(dev):
        layer = make(return_sequences=True, seed=7, bias_initializer="random_uniform")
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            y = layer(xv)
            r = rng.uniform(-1, 1, tuple(y.shape)).astype(f32)
            loss = vdev.reduce_sum(y * r)
        grads = tape.gradient(loss, [xv] + layer.variables)
    assert y.device.endswith(dev) and y.shape == (3, 6, 5)
    m = torch_twin(layer)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ty, _ = m(xt)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    want, _, _ = keras_loop(kind, x, layer.kernel.numpy(), layer.recurrent_kernel.numpy(),
                            layer.bias.numpy())
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    params = [xt, m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0, m.bias_hh_l0]
    tg = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(), params)
    np.testing.assert_allclose(grads[0].numpy(), tg[0].numpy(), rtol=1e-5, atol=1e-5)
    u = 5
    perm = (np.concatenate([np.arange(u, 2 * u), np.arange(u), np.arange(2 * u, 3 * u)])
            if kind == "gru" else np.arange(layer.kernel.shape[1]))
    inv = np.argsort(perm)
    np.testing.assert_allclose(grads[1].numpy(), tg[1].numpy().T[:, inv], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[2].numpy(), tg[2].numpy().T[:, inv], rtol=1e-5, atol=1e-5)
    gb = tg[3].numpy()[inv]
    if kind == "gru":
        np.testing.assert_allclose(grads[3].numpy(), np.stack([gb, tg[4].numpy()[inv]]),
                                   rtol=1e-5, atol=1e-5)
    else:  # one bias: torch's two biases get the same gradient
        np.testing.assert_allclose(grads[3].numpy(), gb, rtol=1e-5, atol=1e-5)


def test_gru_reset_before_and_the_options():
    x = rng.uniform(-1, 1, (2, 5, 3)).astype(f32)
    g = layers.GRU(4, reset_after=False, return_sequences=True, seed=3,
                   bias_initializer="random_uniform")
    y = g(x)
    assert g.bias.shape == (12,)
    want, _, _ = keras_loop("gru", x, g.kernel.numpy(), g.recurrent_kernel.numpy(), g.bias.numpy(),
                            reset_after=False)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    # go_backwards, return_state, initial_state, no bias
    h0 = rng.uniform(-1, 1, (2, 4)).astype(f32)
    c0 = rng.uniform(-1, 1, (2, 4)).astype(f32)
    lstm = layers.LSTM(4, return_sequences=True, return_state=True, go_backwards=True,
                       use_bias=False, seed=4)
    seq, h, c = lstm(x, initial_state=[h0, c0])
    assert lstm.bias is None and len(lstm.variables) == 2
    want, wh, wc = keras_loop("lstm", x, lstm.kernel.numpy(), lstm.recurrent_kernel.numpy(), None,
                              h0, c0, backwards=True)
    np.testing.assert_allclose(seq.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.numpy(), wh, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.numpy(), wc, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(seq.numpy()[:, -1], h.numpy())
    # the last output alone; time_major
    s = layers.SimpleRNN(4, seed=5)
    last = s(x)
    tm = layers.SimpleRNN(4, seed=5, time_major=True, return_sequences=True)
    seq_tm = tm(np.transpose(x, (1, 0, 2)))
    assert seq_tm.shape == (5, 2, 4)
    np.testing.assert_array_equal(seq_tm.numpy()[-1], last.numpy())
    assert tm.compute_output_shape((5, None, 3)) == (5, None, 4)
    assert lstm.compute_output_shape((None, 5, 3)) == [(None, 5, 4), (None, 4), (None, 4)]


def test_weights_and_initializers():
    lstm = layers.LSTM(3, input_shape=(None, 2), seed=11)
    assert [v.name for v in lstm.variables] == ["%s/lstm_cell/%s" % (lstm.name, n) for n in
                                                ("kernel", "recurrent_kernel", "bias")]
    assert lstm.kernel.shape == (2, 12) and lstm.recurrent_kernel.shape == (3, 12)
    np.testing.assert_array_equal(lstm.bias.numpy(), [0] * 3 + [1] * 3 + [0] * 6)
    U = lstm.recurrent_kernel.numpy().astype(np.float64)  # [3, 12]: orthogonal rows
    np.testing.assert_allclose(U @ U.T, np.eye(3), atol=1e-6)
    again = layers.LSTM(3, input_shape=(None, 2), seed=11)
    for a, b in zip(lstm.variables, again.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    g = layers.GRU(2, input_shape=(4, 3))
    assert g.bias.shape == (2, 6) and g.name.startswith("gru")
    assert [v.name for v in g.variables][0] == g.name + "/gru_cell/kernel"
    s = layers.SimpleRNN(2, input_shape=(4, 3))
    assert s.variables[1].name == s.name + "/simple_rnn_cell/recurrent_kernel"
    q = initializers.Orthogonal(gain=2.0, seed=1)((5, 3)).numpy().astype(np.float64)
    np.testing.assert_allclose(q.T @ q, 4 * np.eye(3), atol=1e-5)
    assert initializers.get("orthogonal").get_config() == {"gain": 1.0, "seed": None}
    with pytest.raises(ValueError) as e:
        initializers.Orthogonal()((4,))
    assert str(e.value) == ("The tensor to initialize must be at least two-dimensional. "
                            "Received: shape=(4,) of rank 1.")


def test_configs():
    for layer in (layers.LSTM(3, activation="relu", return_sequences=True, unit_forget_bias=False),
                  layers.GRU(2, reset_after=False, go_backwards=True),
                  layers.SimpleRNN(4, activation="elu", return_state=True)):
        c = layer.get_config()
        again = type(layer).from_config(c)
        assert again.get_config()["units"] == c["units"]
        for k in ("activation", "return_sequences", "return_state", "go_backwards", "use_bias"):
            assert again.get_config()[k] == c[k]
    c = layers.LSTM(3).get_config()
    assert (c["recurrent_activation"], c["unit_forget_bias"], c["implementation"]) == \
        ("sigmoid", True, 2)
    assert c["recurrent_initializer"]["class_name"] == "Orthogonal"
    assert layers.GRU(3).get_config()["reset_after"] is True


@pytest.mark.parametrize("make", [lambda: layers.LSTM(8, input_shape=(6, 2), seed=1),
                                  lambda: layers.GRU(8, input_shape=(6, 2), seed=1),
                                  lambda: layers.SimpleRNN(8, input_shape=(6, 2), seed=1)])
def test_a_sequence_model_trains(make):
    x = rng.uniform(-1, 1, (32, 6, 2)).astype(f32)
    y = x[:, :, 0].sum(axis=1, keepdims=True).astype(f32) / 3
    model = vdev.models.Sequential([make(), layers.Dense(1, seed=2)])
    assert model.output_shape == (None, 1)
    assert len(model.trainable_variables) == 5  # built at add, as Keras
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    loss = model.fit(x, y, batch_size=8, epochs=12, verbose=0).history["loss"]
    assert loss[-1] < 0.5 * loss[0]


def test_refusals():
    x = np.zeros((2, 3, 4), f32)
    cases = [
        (lambda: layers.LSTM(0), "Received an invalid value for argument `units`, expected a "
                                 "positive integer, got 0."),
        (lambda: layers.LSTM(2, kernel_regularizer="l2"),
         "vdev's LSTM takes kernel_regularizer=None only, not 'l2'"),
        (lambda: layers.LSTM(2, name="l")(np.zeros((2, 3), f32)),
         'Input 0 of layer "l" is incompatible with the layer: expected ndim=3, found ndim=2. '
         "Full shape received: (2, 3)"),
        (lambda: layers.LSTM(2)(x, mask=np.ones((3, 2), bool)),
         "vdev: a mask of shape (3, 2) for inputs of [batch, steps] = (2, 3): a mask has one "
         "truth value per step"),
        (lambda: layers.LSTM(2)(x, initial_state=[np.zeros((2, 2), f32)]),
         "An `initial_state` was passed that is not compatible with `cell.state_size`. Received "
         "`state_spec`=1 states; however `cell.state_size` is [2, 2]"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
    lstm = layers.LSTM(2, name="l2")
    lstm(x)
    with pytest.raises(ValueError) as e:
        lstm(np.zeros((2, 3, 5), f32))
    assert str(e.value) == ('Input 0 of layer "l2" is incompatible with the layer: expected '
                            "shape=(None, None, 4), found shape=(2, 3, 5)")


def test_fit_under_a_mirrored_strategy_is_one_devices():
    x = rng.uniform(-1, 1, (32, 6, 2)).astype(f32)
    y = (x[:, :, 0].sum(axis=1, keepdims=True) / 3).astype(f32)

    def make():
        m = vdev.models.Sequential([layers.LSTM(8, input_shape=(6, 2), seed=1),
                                    layers.Dense(1, seed=2)])
        m.compile(vdev.optimizers.Adam(0.02), "mse")
        return m
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        mirrored = make()
    got = mirrored.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history["loss"]
    with vdev.device("GPU:0"):
        one = make()
    want = one.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for v in mirrored.variables:
        vals = [t.numpy() for t in v.values]
        for other in vals[1:]:
            np.testing.assert_array_equal(vals[0], other)
