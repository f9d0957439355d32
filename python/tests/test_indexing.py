"""Indexing, slicing and iteration of tensors and variables (vdev/_indexing.py,
TensorFlow's StridedSlice), against numpy on the same values: ints (negative
from the end), slices with steps (backwards too) and Python's clamping, on any
axis, ``...`` anywhere, None (tf.newaxis); TensorFlow's errors for indices
out of range, a step of 0, two ellipses and index types it refuses
(boolean masks: test_boolean_mask.py); vdev's error for a result of more
than 4 dimensions; gradients through indexing reaching variables, against
numpy's scatter of the output's gradient; the slices run where the tensor
lives."""
import numpy as np
import pytest

import vdev

X = np.arange(60, dtype=np.float32).reshape(5, 4, 3) - 17.5

KEYS = [0, 4, -1, -5, slice(None), slice(1, 3), slice(1, 100), slice(-2, None),
        slice(None, -3), slice(5, 2), slice(7, 9), slice(3, 3), slice(None, None, 1),
        (2, 1), (-1, -1, 2), (0, slice(1, 3)), (3, -2, slice(None, 1)), (1, 2, slice(0, 0)),
        Ellipsis, (1, Ellipsis), (slice(1, 2), Ellipsis), (), np.int64(3), np.int32(-2),
        # steps, other axes, ellipsis anywhere, newaxis
        slice(None, None, 2), slice(None, None, -1), slice(None, None, -2), slice(4, 0, -3),
        slice(-1, -6, -1), slice(100, None, -2), slice(None, -100, -1), slice(1, None, 7),
        (slice(None), 0), (slice(None), slice(None), -1), (Ellipsis, 1), (Ellipsis, -1, 0),
        (0, Ellipsis, 2), (slice(1, None, 2), slice(None, None, -1), slice(0, 3, 2)),
        (slice(None), slice(3, 0, -1), 1), None, (None, 1), (1, None), (Ellipsis, None),
        (None, 0, Ellipsis, None), (slice(None, None, -1), None, 2), (2, None, slice(None), None),
        (None, None, 0, 0, 0), (slice(None), np.int32(-1), slice(None, None, -1))]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_getitem_matches_numpy(key):
    for t in (vdev.constant(X), vdev.Variable(X)):
        got = t[key]
        want = X[key]
        assert type(got) is vdev.Tensor  # a Variable's slice is a Tensor, as in TensorFlow
        assert tuple(got.shape) == want.shape
        np.testing.assert_array_equal(got.numpy(), want)


def test_int32_and_scalar_tensor_indices():
    labels = vdev.constant(np.arange(12, dtype=np.int32).reshape(4, 3))
    assert labels[2].dtype is vdev.int32
    np.testing.assert_array_equal(labels[2].numpy(), [6, 7, 8])
    np.testing.assert_array_equal(labels[1:3].numpy(), [[3, 4, 5], [6, 7, 8]])
    i = vdev.constant(1, dtype=vdev.int32)
    np.testing.assert_array_equal(labels[i].numpy(), [3, 4, 5])
    np.testing.assert_array_equal(labels[i, i].numpy(), 4)


def test_empty_slices_have_a_zero_dimension():
    t = vdev.constant(X)
    assert t[3:1].shape == [0, 4, 3]
    assert t[2, 5:].shape == [0, 3]
    assert vdev.constant(np.zeros((0, 2), np.float32))[:].shape == [0, 2]


def test_iteration_over_axis_0():
    t = vdev.constant(X)
    rows = list(t)
    assert len(rows) == 5 and all(type(r) is vdev.Tensor for r in rows)
    for r, w in zip(rows, X):
        np.testing.assert_array_equal(r.numpy(), w)
    a, b = vdev.Variable([1.0, 2.0])
    assert float(a) == 1.0 and float(b) == 2.0
    assert [float(v) for v in vdev.constant([3.0, 4.0, 5.0])] == [3.0, 4.0, 5.0]
    assert list(vdev.constant(np.zeros((0, 3), np.float32))) == []


def test_scalars_cannot_be_iterated_or_measured_as_in_tensorflow():
    s = vdev.constant(1.5)
    with pytest.raises(TypeError) as e:
        iter(s)
    assert str(e.value) == "Cannot iterate over a scalar tensor."
    with pytest.raises(TypeError) as e:
        len(s)
    assert str(e.value) == "Scalar tensor has no `len()`"
    assert len(vdev.constant(X)) == 5


@pytest.mark.parametrize("key,msg", [
    (5, "slice index 5 of dimension 0 out of bounds."),
    # TensorFlow prints a negative index after adding the axis's size
    (-6, "slice index -1 of dimension 0 out of bounds."),
    ((1, 4), "slice index 4 of dimension 1 out of bounds."),
    ((1, -5, 0), "slice index -1 of dimension 1 out of bounds."),
    ((slice(None), slice(None), 3), "slice index 3 of dimension 2 out of bounds."),
    ((Ellipsis, -9), "slice index -6 of dimension 2 out of bounds."),
    ((0, 0, 0, 0), "Index out of range using input dim 3; input has only 3 dims"),
    ((0, 0, 0, slice(None)), "Index out of range using input dim 3; input has only 3 dims"),
    ((None, 0, 0, 0, 0), "Index out of range using input dim 3; input has only 3 dims"),
    (slice(None, None, 0), "strides[0] must be non-zero"),
    ((1, slice(None, None, 0)), "strides[1] must be non-zero"),
    ((Ellipsis, 0, Ellipsis), "Multiple ellipses in slice spec not allowed"),
])
def test_out_of_range_is_tensorflows_invalid_argument(key, msg):
    for t in (vdev.constant(X), vdev.Variable(X)):
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            t[key]
        assert str(e.value) == msg


def test_scalar_index_is_tensorflows_invalid_argument():
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.constant(2.0)[0]
    assert str(e.value) == "Attempting to slice scalar input."
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.constant(2.0)[:]
    assert str(e.value) == "Attempting to slice scalar input."
    np.testing.assert_array_equal(vdev.constant(2.0)[...].numpy(), 2.0)
    np.testing.assert_array_equal(vdev.constant(2.0)[None].numpy(), [2.0])


TF_TYPE = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
           "tf.int32/tf.int64 tensors are valid indices, got %r")


@pytest.mark.parametrize("key", [1.0, "a", (0, [0, 1]), [1, [0]], slice(0.5, 2),
                                 np.float32(1.0)], ids=repr)
def test_types_tensorflow_refuses_are_its_type_error(key):
    with pytest.raises(TypeError) as e:
        vdev.constant(X)[key]
    bad = key.start if isinstance(key, slice) else key
    bad = bad[1] if isinstance(bad, (tuple, list)) else bad
    assert str(e.value) == TF_TYPE % (bad,)


@pytest.mark.parametrize("key", [[0, 1], [-1], [slice(None), None, -2], [Ellipsis, 1], []],
                         ids=repr)
def test_a_list_key_is_a_tuple_as_in_tensorflow(key):
    # TensorFlow's _slice_helper reads a list as a tuple: x[[0, 1]] is x[0, 1]
    for t in (vdev.constant(X), vdev.Variable(X)):
        np.testing.assert_array_equal(t[key].numpy(), X[tuple(key)])


OUT_OF_RANGE = "Can't convert Python sequence with out-of-range integer to Tensor."


@pytest.mark.parametrize("key", [2**64, 2**64 + 1, 2**63, -2**63 - 1, 2**63 - 1,
                                 np.uint64(2**64 - 1), slice(2**64 + 1, None),
                                 slice(None, 2**64 + 3), slice(None, None, 2**64 + 1),
                                 slice(None, None, 2**63), (0, 2**64)], ids=repr)
def test_ints_outside_int64_are_tensorflows_value_error(key):
    # ctypes wrapped them before: x[2**64] was x[0], x[::2**63] reversed the axis;
    # x[2**63 - 1] too: its end, 2**63, is outside int64, as in TensorFlow
    for t in (vdev.constant(X), vdev.Variable(X)):
        with pytest.raises(ValueError) as e:
            t[key]
        assert str(e.value) == OUT_OF_RANGE


def test_int64_extremes_clamp_as_tensorflow():
    t = vdev.constant(X)
    big, small = 2**63 - 1, -2**63
    for key in (slice(small, big), slice(big, small, -1), slice(None, None, big),
                slice(None, None, small), slice(small, big, small), (Ellipsis, slice(big, None))):
        np.testing.assert_array_equal(t[key].numpy(), X[key])
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        t[small]
    assert str(e.value) == "slice index -9223372036854775803 of dimension 0 out of bounds."


def test_strided_slice_values_and_masks_outside_their_types():
    t = vdev.constant(X)
    for begin in ([2**63], [2**64], [np.uint64(2**64 - 1)]):
        with pytest.raises(ValueError) as e:
            vdev.strided_slice(t, begin, [1], [1])
        assert str(e.value) == OUT_OF_RANGE
    np.testing.assert_array_equal(vdev.strided_slice(t, [2**63 - 1], [-2**63], [-1]).numpy(),
                                  X[::-1])
    for name in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                 "shrink_axis_mask"):
        for m in (2**32, -2**31 - 1):
            with pytest.raises(vdev.errors.InvalidArgumentError) as e:
                vdev.strided_slice(t, [0], [1], **{name: m})
            assert str(e.value) == "Attr %s has value %d out of range for an int32" % (name, m)
    # -1 is every bit, as TensorFlow's int32 attr: an ellipsis of many bits
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.strided_slice(t, [0], [1], ellipsis_mask=-1)
    assert str(e.value) == "Multiple ellipses in slice spec not allowed"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.strided_slice(t, [0], [1], ellipsis_mask=6)
    assert str(e.value) == "Multiple ellipses in slice spec not allowed"


def test_tensor_indices_other_than_int32_scalars_are_tensorflows_type_error():
    t = vdev.constant(X)
    for idx in (vdev.constant([0, 1], dtype=vdev.int32), vdev.constant(1.0)):
        with pytest.raises(TypeError) as e:
            t[idx]
        assert str(e.value).startswith("Only integers, slices (`:`), ellipsis (`...`)")


def test_more_than_four_dimensions_is_vdevs_unimplemented_error():
    t = vdev.constant(X)
    with pytest.raises(vdev.errors.UnimplementedError) as e:
        t[None, None]
    assert str(e.value) == "the result would have 5 dimensions; vdev tensors have at most 4"
    assert t[None, ..., 0, None].shape == [1, 5, 4, 1]  # a shrunk axis makes room


def test_int32_tensors_take_every_form():
    labels = np.arange(60, dtype=np.int32).reshape(5, 4, 3) * 7919 - 100000
    t = vdev.constant(labels)
    for key in ((slice(None, None, -2), 1), (Ellipsis, slice(None, None, 2)), (None, 3, -1)):
        got = t[key]
        assert got.dtype is vdev.int32
        np.testing.assert_array_equal(got.numpy(), labels[key])


def test_in_is_refused_pointing_to_the_host_copy():
    t = vdev.constant([1.0, 2.0])
    with pytest.raises(TypeError) as e:
        1.0 in t
    assert str(e.value) == ("`x in t` is not supported for vdev tensors (== compares identity, "
                            "not values): test the host copy, x in t.numpy()")


def test_gradients_through_indexing_reach_the_variable():
    w = np.random.default_rng(3).uniform(-1, 1, (2, 4, 3)).astype(np.float32)
    v = vdev.Variable(X / 10)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(vdev.tanh(v[1:3]) * w) + vdev.reduce_sum(v[4, 2]) * 3.0 + \
            vdev.reduce_sum(v[0, 1, 1:]) * 2.0
    g = tape.gradient(y, v).numpy()
    want = np.zeros_like(X)
    want[1:3] = (1 - np.tanh(X[1:3] / 10) ** 2) * w
    want[4, 2] += 3.0
    want[0, 1, 1:] += 2.0
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
    # iteration too: the sum of the rows' sums is the sum
    with vdev.GradientTape() as tape:
        y = vdev.constant(0.0)
        for r in v:
            y = y + vdev.reduce_sum(r)
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), np.ones_like(X))


@pytest.mark.parametrize("key", [
    (slice(None, None, -2), 1), (Ellipsis, slice(2, None, -1)), (None, slice(1, None, 3), 0),
    (slice(4, 0, -3), slice(None), slice(None, None, 2)), (2, None, Ellipsis, -1)], ids=repr)
def test_gradients_of_strided_slices_are_the_scatter_of_the_output_gradient(key):
    w = np.random.default_rng(5).uniform(-1, 1, X[key].shape).astype(np.float32)
    v = vdev.Variable(X / 10)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(v[key] * w)
    want = np.zeros_like(X)
    want[key] = w  # every element is taken once: numpy's assignment is the scatter
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), want)


def test_an_empty_slice_gives_zeros_to_the_variable():
    v = vdev.Variable(X)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(v[3:3]) + vdev.reduce_sum(v[1]) * 0.0
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), np.zeros_like(X))


def test_slices_run_where_the_tensor_lives_and_are_values():
    with vdev.device("GPU:2"):
        v = vdev.Variable(X)
    r = v[1:3]
    assert r.device.endswith("/device:GPU:2") and v[0].device.endswith("/device:GPU:2")
    v.assign(np.zeros_like(X))
    np.testing.assert_array_equal(r.numpy(), X[1:3])  # a copy, not a view of the variable
    s = v[::-2, None, 1]
    assert s.device.endswith("/device:GPU:2")
    np.testing.assert_array_equal(s.numpy(), np.zeros_like(X)[::-2, None, 1])
    with vdev.device("CPU:0"):
        c = vdev.constant(X)[2]
    assert c.device.endswith("/device:CPU:0")
    np.testing.assert_array_equal(c.numpy(), X[2])


def test_strided_slice_is_tensorflows_with_its_masks():
    t = vdev.constant(X)
    # tf.strided_slice's documented example forms, against numpy
    got = vdev.strided_slice(t, [1, -1], [4, 0], [2, -1], end_mask=0b10)
    np.testing.assert_array_equal(got.numpy(), X[1:4:2, ::-1])
    got = vdev.strided_slice(t, [0, 2], [0, 3], ellipsis_mask=1, shrink_axis_mask=0b10)
    np.testing.assert_array_equal(got.numpy(), X[..., 2])
    got = vdev.strided_slice(t, [0, 1], [0, 3], new_axis_mask=1)
    np.testing.assert_array_equal(got.numpy(), X[None, 1:3])
    got = vdev.strided_slice(t, [3], [0], [-1], begin_mask=1)
    np.testing.assert_array_equal(got.numpy(), X[::-1][:4])
    got = vdev.strided_slice(t, vdev.constant([1, 0], dtype=vdev.int32), np.array([2, 4]),
                             shrink_axis_mask=1)
    np.testing.assert_array_equal(got.numpy(), X[1, 0:4])
    np.testing.assert_array_equal(vdev.strided_slice(X, [], []).numpy(), X)  # numpy input
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.strided_slice(t, [0, 0], [1, 1, 1])
    assert str(e.value) == ("Expected begin, end, and strides to be 1D equal size tensors, but "
                            "got shapes [2], [3], and [2] instead.")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.strided_slice(t, [0], [1], [-1], shrink_axis_mask=1)
    assert str(e.value) == "only stride 1 allowed on non-range indexing."
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.strided_slice(t, [0] * 32, [1] * 32)
    assert str(e.value) == ("Expected begin, end, and strides to be 1D equal size tensors, but "
                            "got shapes [32], [32], and [32] instead.")
    with pytest.raises(TypeError):
        vdev.strided_slice(t, [0.5], [1])


@pytest.mark.parametrize("begin,end,strides,shapes", [
    (0, 1, 1, "[], [], and []"),
    ([[0, 0]], [[1, 1]], None, "[1,2], [1,2], and [1,2]"),
    ([0], [[1]], [1], "[1], [1,1], and [1]"),
    ([0, 0], [1], None, "[2], [1], and [2]"),
], ids=repr)
def test_strided_slice_values_of_other_ranks_are_tensorflows_shape_error(begin, end, strides,
                                                                         shapes):
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.strided_slice(vdev.constant(X), begin, end, strides)
    assert str(e.value) == ("Expected begin, end, and strides to be 1D equal size tensors, but "
                            "got shapes %s instead." % shapes)


def _random_key(rng, nd):
    """A key of up to nd + 2 entries: ints (some out of range), slices with
    bounds and steps up to int64's extremes, None, at most one ``...``."""
    key, extremes = [], [-2**63, -2**62, 2**62, 2**63 - 1]
    for _ in range(rng.integers(0, nd + 3)):
        r = rng.random()
        if r < 0.1 and Ellipsis not in key:
            key.append(Ellipsis)
        elif r < 0.2:
            key.append(None)
        elif r < 0.45:
            key.append(int(rng.integers(-6, 6)))
        else:
            def bound():
                c = rng.integers(0, 3)
                return (None if c == 0 else int(rng.integers(-8, 9)) if c == 1 else
                        int(rng.choice(extremes)))
            step = rng.choice([None, 1, -1, 2, -2, 3, -3, 7] + extremes)
            key.append(slice(bound(), bound(), None if step is None else int(step)))
    return tuple(key)


def test_random_keys_on_random_shapes_match_numpy():
    # numpy's answer, or vdev's error where numpy has one (an int out of range:
    # TensorFlow's InvalidArgumentError) or the result would pass 4 dimensions
    rng = np.random.default_rng(20261205)
    for _ in range(600):
        shape = tuple(int(d) for d in rng.integers(0, 5, rng.integers(0, 5)))
        x = np.asarray(np.arange(int(np.prod(shape))).reshape(shape) * 3 - 7,
                       dtype=np.float32 if rng.random() < 0.7 else np.int32)
        key = _random_key(rng, len(shape))
        try:
            want = x[key]
        except IndexError:
            want = None
        tensors = [vdev.constant(x)] + ([vdev.Variable(x)] if x.dtype == np.float32 else [])
        for t in tensors:
            if want is None:
                with pytest.raises(vdev.errors.InvalidArgumentError):
                    t[key]
            elif np.ndim(want) > 4:
                with pytest.raises(vdev.errors.UnimplementedError):
                    t[key]
            else:
                got = t[key]
                assert got.dtype.name == x.dtype.name, key
                assert tuple(got.shape) == np.shape(want), (shape, key)
                np.testing.assert_array_equal(got.numpy(), want, err_msg=repr((shape, key)))
