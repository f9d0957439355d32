"""fit, evaluate and predict on a vdev.utils.Sequence or a generator
(vdev/_fit_data.py), against the same batches given as arrays: a Sequence
trains to the same bits as its arrays (and is read anew each epoch, in a new
order each epoch with shuffle, its on_epoch_end after the callbacks'); a
generator is one stream for the whole fit, steps_per_epoch batches an epoch,
not one batch read that is not used, the same bits as arrays with the same
steps_per_epoch; one that ends early ends the fit with Keras's warning;
(x, y, sample_weight) batches weigh as fit's sample_weight; validation data,
evaluate and predict take either, with their steps; and each thing Keras
refuses with such data is refused in its words. Three simulated 16 GiB GPUs
(conftest)."""
import logging

import numpy as np
import pytest

import vdev
from vdev.utils import Sequence

N, B = 40, 16


def data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    return x, (x @ rng.standard_normal((5, 2))).astype(np.float32)


def model():
    m = vdev.models.MLP([5, 8, 2], seed=4)
    m.compile(vdev.optimizers.SGD(0.05), "mse", metrics=["mae"])
    return m


def bits(m):
    return [v.numpy().tobytes() for v in m.weights]


class Batches(Sequence):
    """x, y (and weights) in batches of B rows; records what is read."""

    def __init__(self, x, y=None, w=None, events=None):
        self.x, self.y, self.w = x, y, w
        self.read = []
        self.events = events if events is not None else []

    def __len__(self):
        return -(-len(self.x) // B)

    def __getitem__(self, i):
        self.read.append(i)
        s = slice(i * B, (i + 1) * B)
        if self.y is None:
            return self.x[s]
        if self.w is None:
            return self.x[s], self.y[s]
        return self.x[s], self.y[s], self.w[s]

    def on_epoch_end(self):
        self.events.append("sequence")


def generator(x, y, counter, stop=None):
    """The batches of x, y in order, over and over (stop: after so many)."""
    i = 0
    while stop is None or i < stop:
        b = i % (-(-len(x) // B))
        counter.append(b)
        yield x[b * B:(b + 1) * B], y[b * B:(b + 1) * B]
        i += 1


def test_a_sequence_trains_as_its_arrays_and_ends_each_epoch_after_the_callbacks():
    x, y = data()
    ref = model()
    h_ref = ref.fit(x, y, batch_size=B, epochs=3, shuffle=False, verbose=0,
                    validation_data=(x[:24], y[:24]))
    events = []
    seq, val = Batches(x, y, events=events), Batches(x[:24], y[:24])
    m = model()
    cb = vdev.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: events.append(e))
    h = m.fit(seq, epochs=3, shuffle=False, verbose=0, validation_data=val, callbacks=[cb])
    assert bits(m) == bits(ref)
    assert h.history == h_ref.history and set(h.history) == {"loss", "mae", "val_loss",
                                                             "val_mae"}
    # batch 0 read once more to build the model; then three passes in order
    assert seq.read == [0] + [0, 1, 2] * 3
    assert events == [0, "sequence", 1, "sequence", 2, "sequence"]
    assert val.read == [0, 1] * 3 and val.events == ["sequence"] * 3
    # steps_per_epoch fewer than its length: the first batches of each epoch
    seq2 = Batches(x, y)
    model().fit(seq2, epochs=2, steps_per_epoch=2, shuffle=False, verbose=0)
    assert seq2.read == [0] + [0, 1] * 2


def test_a_shuffled_sequence_takes_each_batch_once_an_epoch_in_a_new_order():
    x, y = data(10 * B)
    seq = Batches(x, y)
    vdev.random.set_seed(3)
    model().fit(seq, epochs=3, verbose=0)  # shuffle=True, Keras's default
    read = seq.read[1:]
    epochs = [read[i * 10:(i + 1) * 10] for i in range(3)]
    assert all(sorted(e) == list(range(10)) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3 and epochs[0] != list(range(10))
    # the order is the seed's: the same seed, the same batches
    again = Batches(x, y)
    vdev.random.set_seed(3)
    model().fit(again, epochs=3, verbose=0)
    assert again.read == seq.read


def test_a_generator_is_one_stream_and_no_batch_is_read_unused(caplog):
    x, y = data()
    ref = model()
    h_ref = ref.fit(x, y, batch_size=B, epochs=3, steps_per_epoch=2, shuffle=False, verbose=0)
    taken = []
    m = model()
    with caplog.at_level(logging.WARNING, logger="vdev"):
        h = m.fit(generator(x, y, taken), epochs=3, steps_per_epoch=2, verbose=0)
    assert "ran out of data" not in caplog.text
    assert bits(m) == bits(ref) and h.history == h_ref.history
    # epoch 2 goes on where epoch 1 stopped: batches 0 1 | 2 0 | 1 2, six read in all
    assert taken == [0, 1, 2, 0, 1, 2]


def test_a_generator_that_ends_early_ends_the_fit_with_keras_warning(caplog):
    x, y = data()
    m = model()
    with caplog.at_level(logging.WARNING, logger="vdev"):
        h = m.fit(generator(x, y, [], stop=5), epochs=4, steps_per_epoch=2, verbose=0)
    assert ("Your input ran out of data; interrupting training. Make sure that your dataset "
            "or generator can generate at least `steps_per_epoch * epochs` batches (in this "
            "case, 8 batches).") in caplog.text
    assert len(h.history["loss"]) == 3  # epochs 1 and 2 whole, epoch 3 one batch, then done


def test_weighted_batches_are_fits_sample_weight():
    x, y = data()
    w = np.random.default_rng(1).uniform(0, 2, N).astype(np.float32)
    ref = model()
    h_ref = ref.fit(x, y, sample_weight=w, batch_size=B, epochs=2, shuffle=False, verbose=0)
    m = model()
    h = m.fit(Batches(x, y, w), epochs=2, shuffle=False, verbose=0)
    assert bits(m) == bits(ref) and h.history == h_ref.history


def test_class_weight_weighs_each_batch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((N, 5)).astype(np.float32)
    labels = rng.integers(0, 3, N)

    def classifier():
        m = vdev.models.MLP([5, 8, 3], seed=1)
        m.compile(vdev.optimizers.SGD(0.1),
                  vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
        return m
    cw = {0: 1.0, 1: 3.0, 2: 0.5}
    ref, m = classifier(), classifier()
    h_ref = ref.fit(x, labels, class_weight=cw, batch_size=B, epochs=2, shuffle=False,
                    verbose=0)
    h = m.fit(Batches(x, labels), class_weight=cw, epochs=2, shuffle=False, verbose=0)
    assert bits(m) == bits(ref) and h.history == h_ref.history


def test_validation_generator_takes_validation_steps_each_epoch():
    x, y = data()
    ref = model()
    h_ref = ref.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0,
                    validation_data=(x[:32], y[:32]))
    taken = []
    m = model()
    h = m.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0,
              validation_data=generator(x[:32], y[:32], taken), validation_steps=2)
    assert h.history == h_ref.history and taken == [0, 1, 0, 1]


def test_evaluate_and_predict_on_a_sequence_and_a_generator():
    x, y = data()
    m = model()
    m.fit(x, y, batch_size=B, epochs=1, verbose=0)
    want = m.evaluate(x, y, batch_size=B, verbose=0, return_dict=True)
    seq = Batches(x, y)
    assert m.evaluate(seq, verbose=0, return_dict=True) == want
    assert m.evaluate(seq, verbose=0) == list(want.values())
    assert seq.events == ["sequence"] * 2
    taken = []
    got = m.evaluate(generator(x, y, taken), steps=3, verbose=0, return_dict=True)
    assert got == want and taken == [0, 1, 2]
    # two steps: the first 32 rows'
    assert m.evaluate(generator(x, y, []), steps=2, verbose=0) == m.evaluate(
        x[:32], y[:32], batch_size=B, verbose=0)
    p = m.predict(x, batch_size=B, verbose=0)
    assert np.array_equal(m.predict(Batches(x, y), verbose=0), p)
    assert np.array_equal(m.predict(Batches(x), verbose=0), p)
    xs = (x[i:i + 8] for i in range(0, N, 8))
    assert np.array_equal(m.predict(xs, steps=3, verbose=0), p[:24])


def test_refusals_in_keras_words():
    x, y = data()
    m = model()
    seq = Batches(x, y)
    gen = generator(x, y, [])
    cases = [
        (lambda: m.fit(seq, y), "`y` argument is not supported when using python generator "
         "or keras.utils.Sequence as input."),
        (lambda: m.fit(seq, sample_weight=np.ones(N)), "`sample_weight` argument is not "
         "supported when using python generator or keras.utils.Sequence as input."),
        (lambda: m.fit(seq, validation_split=0.2), "`validation_split` is only supported for "
         "Tensors or NumPy arrays, found following types in the input: [generator]"),
        (lambda: m.fit(gen, epochs=1), "vdev's fit, evaluate and predict on a generator take "
         "steps_per_epoch (the batches to take from it): Keras runs a generator until it ends"),
        (lambda: m.fit(seq, validation_data=generator(x, y, [])), "vdev's fit, evaluate and "
         "predict on a generator take validation_steps (the batches to take from it): Keras "
         "runs a generator until it ends"),
        (lambda: m.evaluate(gen), "vdev's fit, evaluate and predict on a generator take steps "
         "(the batches to take from it): Keras runs a generator until it ends"),
        (lambda: m.evaluate(seq, y), "`y` argument is not supported when using python "
         "generator or keras.utils.Sequence as input."),
        (lambda: m.predict(gen), "vdev's fit, evaluate and predict on a generator take steps "
         "(the batches to take from it): Keras runs a generator until it ends"),
        (lambda: m.fit(Batches(x), epochs=1, verbose=0), "Target data is missing: a batch of "
         "the generator or Sequence gave x alone, and the model was compiled with loss=mse"),
        (lambda: m.fit(iter([(x, y, None, None)]), steps_per_epoch=1, verbose=0),
         "Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
         "found: "),
        (lambda: m.fit(x, y, validation_steps=2), "vdev's fit takes validation_steps with a "
         "generator or Sequence as validation_data only, not 2"),
        (lambda: m.predict(generator(x, y, []), steps=0, verbose=0),
         "Unexpected result of `predict_function` (Empty batch_outputs). Please use "
         "`Model.compile(..., run_eagerly=True)`, or `tf.config.run_functions_eagerly(True)` "
         "for more information of where went wrong, or file a issue/bug to `tf.keras`."),
    ]
    before = bits(m)
    for call, text in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value).startswith(text), (str(e.value), text)
    assert bits(m) == before  # nothing trained by a refused call
    with pytest.raises(NotImplementedError):
        len(Sequence())
    with pytest.raises(NotImplementedError):
        Sequence()[0]
    assert vdev.keras.utils.Sequence is Sequence


def test_a_mirrored_fit_on_a_sequence_is_its_fit_on_arrays():
    vdev.config.experimental.enable_op_determinism()
    x, y = data()
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        a, b = model(), model()
    a.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0)
    b.fit(Batches(x, y), epochs=2, shuffle=False, verbose=0)
    assert bits(a) == bits(b)
