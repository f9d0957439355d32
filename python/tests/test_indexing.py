"""Indexing, slicing and iteration of tensors and variables along the leading
axes (vdev/_indexing.py), against numpy on the same values: ints (negative
from the end), slices of step 1 with Python's clamping, ints then one slice,
``...``; TensorFlow's errors for indices out of range and for index types it
refuses, NotImplementedError naming what works for what vdev lacks; gradients
through indexing reaching variables; the slices run where the tensor lives."""
import numpy as np
import pytest

import vdev

X = np.arange(60, dtype=np.float32).reshape(5, 4, 3) - 17.5

KEYS = [0, 4, -1, -5, slice(None), slice(1, 3), slice(1, 100), slice(-2, None),
        slice(None, -3), slice(5, 2), slice(7, 9), slice(3, 3), slice(None, None, 1),
        (2, 1), (-1, -1, 2), (0, slice(1, 3)), (3, -2, slice(None, 1)), (1, 2, slice(0, 0)),
        Ellipsis, (1, Ellipsis), (slice(1, 2), Ellipsis), (), np.int64(3), np.int32(-2)]


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
    (-6, "slice index -6 of dimension 0 out of bounds."),
    ((1, 4), "slice index 4 of dimension 1 out of bounds."),
    ((1, -5, 0), "slice index -5 of dimension 1 out of bounds."),
    ((0, 0, 0, 0), "Index out of range using input dim 3; input has only 3 dims"),
    ((0, 0, 0, slice(None)), "Index out of range using input dim 3; input has only 3 dims"),
])
def test_out_of_range_is_tensorflows_invalid_argument(key, msg):
    for t in (vdev.constant(X), vdev.Variable(X)):
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            t[key]
        assert str(e.value) == msg


def test_scalar_index_is_tensorflows_invalid_argument():
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.constant(2.0)[0]
    assert str(e.value) == "Index out of range using input dim 0; input has only 0 dims"
    np.testing.assert_array_equal(vdev.constant(2.0)[...].numpy(), 2.0)


TF_TYPE = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
           "tf.int32/tf.int64 tensors are valid indices, got %r")


@pytest.mark.parametrize("key", [1.0, "a", [0, 1], slice(0.5, 2), np.float32(1.0)], ids=repr)
def test_types_tensorflow_refuses_are_its_type_error(key):
    with pytest.raises(TypeError) as e:
        vdev.constant(X)[key]
    bad = key.start if isinstance(key, slice) else key
    assert str(e.value) == TF_TYPE % (bad,)


def test_tensor_indices_other_than_int32_scalars_are_tensorflows_type_error():
    t = vdev.constant(X)
    for idx in (vdev.constant([0, 1], dtype=vdev.int32), vdev.constant(1.0)):
        with pytest.raises(TypeError) as e:
            t[idx]
        assert str(e.value).startswith("Only integers, slices (`:`), ellipsis (`...`)")


SUPPORTED = ("vdev indexes along the leading axes only: ints, then at most one slice of step "
             "1, then at most a trailing `...` (x[0], x[-1], x[2:5], x[1, 2:4], x[0, ...], "
             "x[...]); %s is not supported (vdev has no strided or gathering slice ops): index "
             "the host copy, x.numpy()[...]")


@pytest.mark.parametrize("key,what", [
    (slice(None, None, 2), "a slice of step 2"),
    (slice(None, None, -1), "a slice of step -1"),
    ((slice(None), 0), "an index after a slice ((slice(None, None, None), 0))"),
    ((slice(1, 2), slice(0, 1)),
     "an index after a slice ((slice(1, 2, None), slice(0, 1, None)))"),
    (None, "tf.newaxis (None)"),
    ((0, None), "tf.newaxis (None)"),
    ((Ellipsis, 0), "`...` before another index ((Ellipsis, 0))"),
    (True, "a boolean index or mask (True)"),
    ((0, np.bool_(False)), "a boolean index or mask (%r)" % (np.bool_(False),)),
    (np.array([True, False]), "a boolean index or mask (%r)" % (np.array([True, False]),)),
], ids=repr)
def test_what_vdev_lacks_is_not_implemented_naming_what_works(key, what):
    for t in (vdev.constant(X), vdev.Variable(X)):
        with pytest.raises(NotImplementedError) as e:
            t[key]
        assert str(e.value) == SUPPORTED % what


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
    with vdev.device("CPU:0"):
        c = vdev.constant(X)[2]
    assert c.device.endswith("/device:CPU:0")
    np.testing.assert_array_equal(c.numpy(), X[2])
