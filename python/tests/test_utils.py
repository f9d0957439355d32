"""vdev.utils: Keras 2.11's pad_sequences and to_categorical, on the
examples of Keras's documentation and against loops written here, every
argument and every error in Keras's words."""
import numpy as np
import pytest

from vdev import utils

rng = np.random.default_rng(20261209)


def loop_pad(seqs, maxlen, padding, truncating, value):
    """The rule by hand: cut to maxlen at the start ('pre') or the end, then
    pad with value before ('pre') or after."""
    rows = []
    for s in seqs:
        s = list(s)
        if len(s) > maxlen:
            s = s[len(s) - maxlen:] if truncating == "pre" else s[:maxlen]
        fill = [value] * (maxlen - len(s))
        rows.append(fill + s if padding == "pre" else s + fill)
    return np.array(rows, dtype=np.int32)


def test_pad_sequences_documented_examples():
    seqs = [[1], [2, 3], [4, 5, 6]]
    out = utils.pad_sequences(seqs)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [[0, 0, 1], [0, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(utils.pad_sequences(seqs, value=-1),
                                  [[-1, -1, 1], [-1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(utils.pad_sequences(seqs, padding="post"),
                                  [[1, 0, 0], [2, 3, 0], [4, 5, 6]])
    np.testing.assert_array_equal(utils.pad_sequences(seqs, maxlen=2), [[0, 1], [2, 3], [5, 6]])


@pytest.mark.parametrize("padding", ["pre", "post"])
@pytest.mark.parametrize("truncating", ["pre", "post"])
def test_pad_sequences_against_a_loop(padding, truncating):
    seqs = [list(rng.integers(1, 50, rng.integers(0, 12))) for _ in range(40)]
    for maxlen in (None, 1, 5, 11, 15):
        got = utils.pad_sequences(seqs, maxlen=maxlen, padding=padding, truncating=truncating,
                                  value=7)
        n = max(len(s) for s in seqs) if maxlen is None else maxlen
        np.testing.assert_array_equal(got, loop_pad(seqs, n, padding, truncating, 7))
    # items that are vectors keep their shape; another dtype
    vec = [rng.uniform(size=(k, 3)) for k in (2, 0, 4)]
    out = utils.pad_sequences(vec, dtype="float32", padding=padding)
    assert out.shape == (3, 4, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(out[1], 0)
    rows = slice(2, 4) if padding == "pre" else slice(0, 2)
    np.testing.assert_allclose(out[0, rows], vec[0].astype(np.float32))


def test_pad_sequences_errors():
    cases = [
        (lambda: utils.pad_sequences(5), "`sequences` must be iterable."),
        (lambda: utils.pad_sequences([[1], 2]),
         "`sequences` must be a list of iterables. Found non-iterable: 2"),
        (lambda: utils.pad_sequences([[1]], padding="mid"), 'Padding type "mid" not understood'),
        (lambda: utils.pad_sequences([[1]], truncating="x"), 'Truncating type "x" not understood'),
        (lambda: utils.pad_sequences([[1]], value="a"),
         "`dtype` int32 is not compatible with `value`'s type: <class 'str'>\nYou should set "
         "`dtype=object` for variable length strings."),
        (lambda: utils.pad_sequences([np.zeros((2, 3)), np.zeros((2, 4))], dtype="float32"),
         "Shape of sample (4,) of sequence at position 1 is different from expected shape (3,)"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
    words = utils.pad_sequences([["a", "b"], ["c"]], dtype=object, value="")
    assert words.tolist() == [["a", "b"], ["", "c"]]


def test_to_categorical():
    np.testing.assert_array_equal(utils.to_categorical([0, 1, 2, 3], num_classes=4), np.eye(4))
    y = rng.integers(0, 5, (6, 7))
    out = utils.to_categorical(y)
    assert out.shape == (6, 7, 5) and out.dtype == np.float32
    np.testing.assert_array_equal(np.argmax(out, -1), y)
    np.testing.assert_array_equal(out.sum(-1), 1)
    col = utils.to_categorical(np.array([[2], [0]]), num_classes=3, dtype="int32")
    assert col.dtype == np.int32
    np.testing.assert_array_equal(col, [[0, 0, 1], [1, 0, 0]])
    assert utils.to_categorical(3, num_classes=5).tolist() == [0, 0, 0, 1, 0]
