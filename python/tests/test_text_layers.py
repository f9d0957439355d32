"""Keras 2.11's StringLookup, IntegerLookup and TextVectorization on the
host: the examples of Keras's documentation (vocabularies adapted and
given, lookups, OOV, invert, the TextVectorization model example's ids),
the vocabulary order rule (counts, then tokens in reverse order) against a
rule written here, standardize/split/ngrams, the output modes, padding and
cutting, the ids feeding an Embedding(mask_zero=True) model on a simulated
GPU; configs and errors in Keras's words."""
import collections

import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(20261215)


def test_documented_examples():
    data = [["a", "c", "d"], ["d", "z", "b"]]
    sl = layers.StringLookup()
    sl.adapt(data)
    assert sl.get_vocabulary() == ["[UNK]", "d", "z", "c", "b", "a"]
    vocab = ["a", "b", "c", "d"]
    ids = layers.StringLookup(vocabulary=vocab)(data)
    assert ids.dtype == vdev.int32
    np.testing.assert_array_equal(ids.numpy(), [[1, 3, 4], [4, 0, 2]])
    inv = layers.StringLookup(vocabulary=vocab, invert=True)
    assert inv(np.array([[1, 3, 4], [4, 0, 2]])).tolist() == [["a", "c", "d"], ["d", "[UNK]",
                                                                                   "b"]]
    masked = layers.StringLookup(vocabulary=vocab, mask_token="")
    np.testing.assert_array_equal(masked([["a", "", "d"]]).numpy(), [[2, 0, 5]])
    assert masked.get_vocabulary() == ["", "[UNK]", "a", "b", "c", "d"]
    il = layers.IntegerLookup()
    il.adapt(np.array([[12, 1138, 42], [42, 1000, 36]]))
    assert il.get_vocabulary() == [-1, 42, 1138, 1000, 36, 12]
    il2 = layers.IntegerLookup(vocabulary=[12, 36, 1138, 42])
    np.testing.assert_array_equal(il2([[12, 1138, 42], [42, 1000, 36]]).numpy(),
                                  [[1, 3, 4], [4, 0, 2]])
    # multi_hot and count: the OOV index counts too; no mask index there
    mh = layers.StringLookup(vocabulary=vocab, output_mode="multi_hot")
    np.testing.assert_array_equal(mh(data).numpy(), [[0, 1, 0, 1, 1], [1, 0, 1, 0, 1]])
    oh = layers.StringLookup(vocabulary=vocab, output_mode="one_hot")
    np.testing.assert_array_equal(oh(["a", "b", "c", "d", "z"]).numpy(), np.eye(5)[[1, 2, 3, 4, 0]])
    cnt = layers.StringLookup(vocabulary=vocab, output_mode="count", pad_to_max_tokens=True,
                              max_tokens=8)
    np.testing.assert_array_equal(cnt([["a", "a", "z"]]).numpy(), [[1, 2, 0, 0, 0, 0, 0, 0]])
    # TextVectorization: the model example of Keras's documentation
    tv = layers.TextVectorization(max_tokens=5000, output_sequence_length=4)
    tv.adapt(["foo", "bar", "baz"])
    assert tv.get_vocabulary() == ["", "[UNK]", "foo", "baz", "bar"]
    np.testing.assert_array_equal(tv([["foo qux bar"], ["qux baz"]]).numpy(),
                                  [[2, 1, 4, 0], [1, 3, 0, 0]])
    given = layers.TextVectorization(vocabulary=["earth", "wind", "and", "fire"])
    assert given.get_vocabulary() == ["", "[UNK]", "earth", "wind", "and", "fire"]


def test_vocabulary_order_and_limits():
    words = ["w%d" % i for i in range(30)]
    data = list(rng.choice(words, 400, p=np.linspace(1, 3, 30) / np.linspace(1, 3, 30).sum()))
    counts = collections.Counter(data)
    want = sorted(counts, key=lambda t: (counts[t], t), reverse=True)  # counts, then tokens
    sl = layers.StringLookup()
    sl.adapt(np.array(data))
    assert sl.get_vocabulary(include_special_tokens=False) == want
    assert sl.vocabulary_size() == 31
    small = layers.StringLookup(max_tokens=6)
    small.adapt(data)
    assert small.get_vocabulary() == ["[UNK]"] + want[:5]
    tv = layers.TextVectorization(max_tokens=7)
    tv.adapt([" ".join(data)])
    assert tv.get_vocabulary() == ["", "[UNK]"] + want[:5]
    # a later adapt starts again
    sl.adapt(["x", "y", "y"])
    assert sl.get_vocabulary() == ["[UNK]", "y", "x"]


def test_text_vectorization_options():
    text = ["Hello, World!  Hello\tÉCOLE-x"]
    tv = layers.TextVectorization(vocabulary=["hello", "world", "École", "écolex"])
    # lower: ASCII letters only (tf.strings.lower); the punctuation class strips "-"
    np.testing.assert_array_equal(tv(text).numpy(), [[2, 3, 2, 1]])
    assert layers.TextVectorization(standardize=None, split=None,
                                    vocabulary=["A b"])(["A b", "a b"]).numpy().tolist() == \
        [[2], [1]]
    chars = layers.TextVectorization(split="character", standardize="lower",
                                     vocabulary=["a", "b"])
    np.testing.assert_array_equal(chars(["AbC"]).numpy(), [[2, 3, 1]])
    grams = layers.TextVectorization(ngrams=2, vocabulary=["a", "b", "a b", "b c"])
    np.testing.assert_array_equal(grams(["a b c"]).numpy(), [[2, 3, 1, 4, 5]])
    custom = layers.TextVectorization(standardize=lambda s: s.replace("x", "y"),
                                      split=lambda s: s.split("-"), vocabulary=["ay", "b"])
    np.testing.assert_array_equal(custom(["ax-b"]).numpy(), [[2, 3]])
    cut = layers.TextVectorization(output_sequence_length=2, vocabulary=["a", "b", "c"])
    np.testing.assert_array_equal(cut(["a b c", "c"]).numpy(), [[2, 3], [4, 0]])
    counts = layers.TextVectorization(output_mode="count", vocabulary=["a", "b"])
    np.testing.assert_array_equal(counts(["a a z", "b"]).numpy(), [[1, 2, 0], [0, 0, 1]])
    c = cut.get_config()
    assert (c["output_sequence_length"], c["standardize"], c["split"], c["vocabulary"]) == (
        2, "lower_and_strip_punctuation", "whitespace", ["", "[UNK]", "a", "b", "c"])
    assert layers.TextVectorization.from_config(c)(["c b"]).numpy().tolist() == [[4, 3]]


def test_ids_feed_a_masked_model():
    texts = ["good movie", "bad film", "a very good film", "very bad", "good", "bad bad movie"]
    labels = np.array([[1], [0], [1], [0], [1], [0]], np.float32)
    tv = layers.TextVectorization()
    tv.adapt(texts)
    with vdev.device("GPU:1"):
        ids = tv(texts)
        model = vdev.models.Sequential([layers.Embedding(tv.vocabulary_size(), 8,
                                                         mask_zero=True, seed=1),
                                        layers.LSTM(4, seed=2), layers.Dense(1, seed=3)])
        model.compile(vdev.optimizers.Adam(0.05), "mse")
        hist = model.fit(ids, labels, epochs=20, verbose=0).history["loss"]
    assert ids.device.endswith("GPU:1") and ids.shape == (6, 4)
    assert hist[-1] < 0.5 * hist[0]


def test_errors():
    cases = [
        (lambda: layers.StringLookup(num_oov_indices=2),
         "vdev's StringLookup takes num_oov_indices 0 or 1, not 2: Keras hashes an "
         "out-of-vocabulary token among several (farmhash), vdev does not"),
        (lambda: layers.StringLookup(max_tokens=1),
         "If set, `max_tokens` must be greater than 1. Received: max_tokens=1"),
        (lambda: layers.StringLookup(vocabulary=["a", "b", "a"]),
         "The passed vocabulary has at least one repeated term. Please uniquify your dataset. "
         "The repeated terms are ['a']"),
        (lambda: layers.StringLookup(output_mode="int", invert=True, pad_to_max_tokens=True),
         "If pad_to_max_tokens is True, must set `max_tokens`. Received: max_tokens=None"),
        (lambda: layers.StringLookup(output_mode="one_hot", invert=True),
         "`output_mode` must be `'int'` when `invert` is true. Received: output_mode=one_hot"),
        (lambda: layers.StringLookup(vocabulary=["a"], output_mode="multi_hot")(
            [[["a"]]]), "When output_mode is not `'int'`, maximum supported output rank is 2. "
         "Received output_mode multi_hot and input shape (1, 1, 1), which would result in "
         "output rank 3."),
        (lambda: layers.TextVectorization(split="comma"),
         "The `split` argument of layer TextVectorization received an invalid value `comma`. "
         "Allowed values are: `None`, a `Callable`, or one of the following values: "
         "('whitespace', 'character')."),
        (lambda: layers.TextVectorization(output_mode="count", output_sequence_length=3),
         "`output_sequence_length` must not be set if `output_mode` is not 'int'. Received "
         "output_sequence_length=3."),
        (lambda: layers.TextVectorization(ngrams=1.5),
         "`ngrams` must be None, an integer, or a tuple of integers. Received: ngrams=1.5"),
        (lambda: layers.TextVectorization()([["a", "b"]]),
         "When using `TextVectorization` to tokenize strings, the innermost dimension of the "
         "input array must be 1, got shape (1, 2)"),
        (lambda: layers.TextVectorization(ragged=True),
         "vdev's TextVectorization takes ragged=False only: vdev has no ragged tensors (the "
         "ids are padded with 0)"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
