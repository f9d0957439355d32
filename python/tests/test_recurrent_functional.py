"""Recurrent layers in Keras's functional API: built when the model is made
(its summary and parameter counts before any call), and initial states that
are symbolic tensors joining the layer's inputs as Keras's RNN.__call__
makes them (the encoder-decoder of Keras's seq2seq examples: the model's
outputs equal the layers called by hand, its gradients reach the encoder,
its config round-trips); Bidirectional likewise; masks from an Embedding
through a functional model."""
import numpy as np

import vdev
from vdev import layers

rng = np.random.default_rng(20261210)
f32 = np.float32


def test_built_when_the_model_is_made():
    inp = vdev.Input((5, 3))
    lstm = layers.LSTM(4, seed=1)
    model = vdev.Model(inp, lstm(inp))
    assert lstm.built and lstm.count_params() == 4 * (4 * (3 + 4) + 4)  # Keras's count
    lines = []
    model.summary(print_fn=lines.append)
    assert any(l.split()[1:3] == ["(LSTM)", "(None,"] and l.split()[-1] == "128"
               for l in lines), lines


def encoder_decoder(seed):
    enc_in = vdev.Input((None, 5), name="enc")
    encoder = layers.LSTM(8, return_state=True, seed=seed)
    _, h, c = encoder(enc_in)
    dec_in = vdev.Input((None, 6), name="dec")
    decoder = layers.LSTM(8, return_sequences=True, seed=seed + 1)
    seq = decoder(dec_in, initial_state=[h, c])
    dense = layers.Dense(6, activation="softmax", seed=seed + 2)
    return vdev.Model([enc_in, dec_in], dense(seq)), encoder, decoder, dense


def test_encoder_decoder_states_are_inputs_of_the_decoder():
    model, encoder, decoder, dense = encoder_decoder(3)
    names = [n.layer.name for n in decoder._inbound_nodes[0].parent_nodes]
    assert names == ["dec", encoder.name, encoder.name]
    x1 = rng.uniform(-1, 1, (4, 7, 5)).astype(f32)
    x2 = rng.uniform(-1, 1, (4, 3, 6)).astype(f32)
    _, h, c = encoder(x1)
    by_hand = dense(decoder(x2, initial_state=[h, c])).numpy()
    np.testing.assert_array_equal(model([x1, x2]).numpy(), by_hand)
    # the decoder's loss trains the encoder through the states
    y = np.eye(6, dtype=f32)[rng.integers(0, 6, (4, 3))]
    before = [v.numpy().copy() for v in encoder.variables]
    model.compile(vdev.optimizers.Adam(0.05), "categorical_crossentropy")
    hist = model.fit([x1, x2], y, epochs=5, verbose=0).history["loss"]
    assert hist[-1] < hist[0]
    assert all(not np.array_equal(a, v.numpy()) for a, v in zip(before, encoder.variables))
    # the config round-trips: the same graph, the same outputs with the weights
    again = vdev.Model.from_config(model.get_config())
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(again([x1, x2]).numpy(), model([x1, x2]).numpy(), rtol=1e-6)


def test_bidirectional_states_and_masks():
    enc_in = vdev.Input((None, 4))
    enc = layers.Bidirectional(layers.GRU(3, return_state=True, seed=1))
    outs = enc(enc_in)
    states = outs[1:]
    dec_in = vdev.Input((None, 4))
    bi = layers.Bidirectional(layers.GRU(3, return_sequences=True, seed=2))
    model = vdev.Model([enc_in, dec_in], bi(dec_in, initial_state=states))
    assert len(bi._inbound_nodes[0].keras_inputs) == 3
    x1 = rng.uniform(-1, 1, (2, 5, 4)).astype(f32)
    x2 = rng.uniform(-1, 1, (2, 3, 4)).astype(f32)
    assert [l.name for l in model.layers[2:]] == [enc.name, bi.name]
    _, hf, hb = enc(x1)
    np.testing.assert_array_equal(model([x1, x2]).numpy(),
                                  bi(x2, initial_state=[hf, hb]).numpy())
    # masks travel through a functional model's eager calls
    ids = vdev.Input((6,), dtype="int32")
    emb = layers.Embedding(9, 4, mask_zero=True, seed=3)
    rnn = layers.SimpleRNN(3, seed=4)
    m = vdev.Model(ids, rnn(emb(ids)))
    batch = np.array([[1, 2, 3, 0, 0, 0], [4, 5, 6, 7, 8, 1]], np.int32)
    np.testing.assert_allclose(m(batch).numpy()[0], rnn(emb(batch[:1, :3])).numpy()[0],
                               rtol=1e-6, atol=1e-7)
