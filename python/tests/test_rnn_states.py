"""Keras 2.11's stateful recurrent layers: a sequence given in two calls
gives the whole sequence's result (SimpleRNN, LSTM, GRU, batch- and
time-major), reset_states (zeros, or values given), model.reset_states, a
Sequential that knows its batch size (batch_input_shape, Keras's summary)
fitting and predicting with states carried from batch to batch, a
functional model's Input(batch_size=...), Bidirectional, configs; every
error in Keras's words (a model that cannot know its batch size, another
batch size, reset_states of a layer that is not stateful, wrong states), a
MirroredStrategy refused."""
import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(20261213)
f32 = np.float32
MAKE = {"simple": layers.SimpleRNN, "lstm": layers.LSTM, "gru": layers.GRU}


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("kind", sorted(MAKE))
def test_two_calls_make_the_whole_sequence(dev, kind):
    x = rng.uniform(-1, 1, (4, 7, 3)).astype(f32)
    with vdev.device(dev):
        stateful = MAKE[kind](5, stateful=True, return_sequences=True, seed=1)
        whole = MAKE[kind](5, return_sequences=True, seed=1)
        first = stateful(x[:, :3]).numpy()
        second = stateful(x[:, 3:])
        want = whole(x).numpy()
    assert second.device.endswith(dev)
    np.testing.assert_allclose(np.concatenate([first, second.numpy()], 1), want, rtol=1e-5,
                               atol=1e-6)
    n = 2 if kind == "lstm" else 1
    assert len(stateful.states) == n and all(s.shape == (4, 5) for s in stateful.states)
    np.testing.assert_allclose(stateful.states[0].numpy(), want[:, -1], rtol=1e-5, atol=1e-6)
    assert not any(s is v for s in stateful.states for v in stateful.variables)
    assert len(stateful.trainable_variables) == 3
    assert whole.states == [None] * n
    stateful.reset_states()  # zeros: the first call's result again
    assert all(np.all(s.numpy() == 0) for s in stateful.states)
    with vdev.device(dev):
        np.testing.assert_array_equal(stateful(x[:, :3]).numpy(), first)
        values = [rng.uniform(-1, 1, (4, 5)).astype(f32) for _ in range(n)]
        stateful.reset_states(values)
        np.testing.assert_allclose(stateful(x).numpy(), whole(x, initial_state=values).numpy(),
                                   rtol=1e-5, atol=1e-6)
    # time-major: the batch is axis 1
    tm = MAKE[kind](5, stateful=True, time_major=True, seed=1)
    xt = np.transpose(x, (1, 0, 2))
    tm(xt[:3])
    np.testing.assert_allclose(tm(xt[3:]).numpy(), want[:, -1], rtol=1e-5, atol=1e-6)


def test_sequential_fit_predict_and_configs():
    x = rng.uniform(-1, 1, (8, 6, 2)).astype(f32)
    lstm = layers.LSTM(4, stateful=True, batch_input_shape=(4, 3, 2), seed=2)
    model = vdev.models.Sequential([lstm, layers.Dense(1, seed=3)])
    lines = []
    model.summary(print_fn=lines.append)
    assert any("(4, 4)" in l for l in lines), lines  # Keras's summary shows the batch
    # predict on the two halves of each sequence, in turn: the whole sequence's
    whole = layers.LSTM(4, seed=2)
    whole.build(2)
    whole.set_weights(lstm.get_weights())
    model.predict(x[:4, :3], batch_size=4, verbose=0)
    got = model.predict(x[:4, 3:], batch_size=4, verbose=0)
    want = model.layers[1](whole(x[:4])).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    model.reset_states()
    assert all(np.all(s.numpy() == 0) for s in lstm.states)
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    y = x[:, :3].sum(axis=(1, 2))[:, None].astype(f32)
    hist = model.fit(x[:, :3], y, batch_size=4, epochs=6, shuffle=False, verbose=0)
    assert np.isfinite(hist.history["loss"]).all()
    c = lstm.get_config()
    assert c["stateful"] is True and c["batch_input_shape"] == (4, 3, 2)
    again = layers.LSTM.from_config(c)
    assert again.stateful and again._batch_input_shape == (4, 3, 2)
    # a functional model: the Input's batch size
    inp = vdev.Input((None, 2), batch_size=4)
    gru = layers.GRU(3, stateful=True, seed=4)
    fm = vdev.Model(inp, gru(inp))
    fm(x[:4, :3])
    assert np.any(gru.states[0].numpy() != 0)
    fm.reset_states()
    assert np.all(gru.states[0].numpy() == 0)
    # Bidirectional: both layers keep their states, reset together
    bi = layers.Bidirectional(layers.SimpleRNN(2, stateful=True, seed=5))
    first = bi(x[:4, :3]).numpy()
    assert not np.allclose(bi(x[:4, :3]).numpy(), first)
    bi.reset_states()
    np.testing.assert_array_equal(bi(x[:4, :3]).numpy(), first)
    assert bi.stateful and bi.forward_layer.stateful and bi.backward_layer.stateful


def test_errors():
    x = np.zeros((4, 3, 2), f32)
    lstm = layers.LSTM(2, stateful=True, name="s")
    lstm(x)
    no_batch = ("If a RNN is stateful, it needs to know its batch size. Specify the batch size "
                "of your input tensors: \n- If using a Sequential model, specify the batch size "
                "by passing a `batch_input_shape` argument to your first layer.\n- If using the "
                "functional API, specify the batch size by passing a `batch_shape` argument to "
                "your Input layer.")
    cases = [
        (lambda: vdev.models.Sequential([layers.LSTM(2, stateful=True, input_shape=(3, 2))]),
         ValueError, no_batch),
        (lambda: layers.GRU(2, stateful=True)(vdev.Input((3, 2))), ValueError, no_batch),
        (lambda: lstm(np.zeros((2, 3, 2), f32)), ValueError,
         'Input 0 of layer "s" is incompatible with the layer: expected shape=(4, None, 2), '
         "found shape=(2, 3, 2)"),
        (lambda: layers.LSTM(2).reset_states(), AttributeError, "Layer must be stateful."),
        (lambda: layers.LSTM(2, stateful=True).reset_states(), ValueError, no_batch),
        (lambda: lstm.reset_states([np.zeros((4, 2))]), ValueError,
         "Layer s expects 2 states, but it received 1 state values. States received: "
         "[array([[0., 0.],\n       [0., 0.],\n       [0., 0.],\n       [0., 0.]])]"),
        (lambda: lstm.reset_states([np.zeros((4, 2)), np.zeros((2, 2))]), ValueError,
         "State 1 is incompatible with layer s: expected shape=(4, 2) but found shape=(2, 2)"),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == msg
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        mirrored = layers.SimpleRNN(2, stateful=True, seed=1)
    with pytest.raises(ValueError) as e:
        mirrored(x)
    assert str(e.value) == ("vdev's stateful SimpleRNN runs on one device: its states are one "
                            "batch's, not a MirroredStrategy's replicas'")
