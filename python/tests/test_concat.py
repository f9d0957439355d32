"""vdev.concat, vdev.stack and vdev.transpose (TensorFlow's ConcatV2, Pack and
Transpose) against numpy on the same values: every axis (negative ones
too), float32 and int32, empty tensors, one tensor and more than 4 (joined
by a tree of ops), scalars, every permutation of 0 to 4 axes and perm=None;
TensorFlow's errors in its words; gradients reaching every input, against
numpy's slices of the output's gradient (and its inverse transpose); the ops
run where the tensors live."""
import itertools

import numpy as np
import pytest

import vdev

RNG = np.random.default_rng(7)


def _arrays(shapes, dtype=np.float32):
    if dtype == np.int32:
        return [RNG.integers(-2 ** 31, 2 ** 31, size=s, dtype=np.int64).astype(np.int32)
                for s in shapes]
    return [RNG.uniform(-2, 2, size=s).astype(np.float32) for s in shapes]


# (shapes, axis): ragged lengths along the axis, 0 included
CONCATS = [([(2, 3), (2, 4)], 1), ([(2, 3), (2, 4)], -1), ([(1, 3), (0, 3), (4, 3)], 0),
           ([(5,), (2,), (0,), (7,), (1,)], 0), ([(2, 1, 3), (2, 4, 3)] * 3, -2),
           ([(2, 3, 2, i) for i in range(1, 18)], 3), ([(2, 3, 2, 2)] * 9, 0),
           ([(3, 0), (3, 0)], 1), ([(3, 2)], 0)]


@pytest.mark.parametrize("shapes,axis", CONCATS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_concat_matches_numpy(shapes, axis, dtype):
    xs = _arrays(shapes, dtype)
    got = vdev.concat([vdev.constant(x) for x in xs], axis)
    want = np.concatenate(xs, axis)
    assert got.dtype == (vdev.int32 if dtype == np.int32 else vdev.float32)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_concat_of_scalars_values_and_one_tensor():
    got = vdev.concat([vdev.constant(1.5), vdev.constant(-2.0), vdev.constant(3.0)], 0)
    np.testing.assert_array_equal(got.numpy(), [1.5, -2.0, 3.0])
    # a value beside a tensor takes its dtype; a tensor alone is a list of one
    t = vdev.constant([[1, 2]], vdev.int32)
    np.testing.assert_array_equal(vdev.concat([t, [[3, 4]]], 0).numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(vdev.concat(t, 0).numpy(), [[1, 2]])
    # one tensor: tf.concat's identity, the axis unchecked
    np.testing.assert_array_equal(vdev.concat([t], 5).numpy(), [[1, 2]])


STACKS = [([(3,)] * 2, 0), ([(3,)] * 2, 1), ([(3,)] * 2, -1), ([(2, 3)] * 5, 1),
          ([(2, 3)] * 17, -3), ([(2, 0)] * 3, 2), ([()] * 6, 0), ([(1, 2, 3)] * 4, 3),
          ([(4,)], 0)]


@pytest.mark.parametrize("shapes,axis", STACKS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_stack_matches_numpy(shapes, axis, dtype):
    xs = _arrays(shapes, dtype)
    got = vdev.stack([vdev.constant(x) for x in xs], axis)
    want = np.stack(xs, axis)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_stack_of_nothing_is_an_empty_float32_vector():
    got = vdev.stack([])
    assert got.dtype == vdev.float32 and tuple(got.shape) == (0,)


@pytest.mark.parametrize("nd", [0, 1, 2, 3, 4])
def test_transpose_every_permutation(nd):
    x = _arrays([(2, 3, 4, 5)[:nd]])[0]
    xi = _arrays([(2, 3, 4, 5)[:nd]], np.int32)[0]
    for perm in itertools.permutations(range(nd)):
        for a in (x, xi):
            got = vdev.transpose(vdev.constant(a), list(perm))
            np.testing.assert_array_equal(got.numpy(), np.transpose(a, perm))
    # perm=None reverses the axes; a numpy array or an int32 tensor as perm
    np.testing.assert_array_equal(vdev.transpose(x).numpy(), np.transpose(x))
    p = list(range(nd))[::-1]
    np.testing.assert_array_equal(vdev.transpose(x, np.array(p)).numpy(), np.transpose(x, p))
    if nd:
        t = vdev.transpose(x, vdev.constant(p, vdev.int32))
        np.testing.assert_array_equal(t.numpy(), np.transpose(x, p))


def test_empty_transpose():
    x = np.zeros((0, 5, 3), np.float32)
    got = vdev.transpose(vdev.constant(x), [2, 0, 1])
    assert tuple(got.shape) == (3, 0, 5)


def _raises(cls, msg, fn, *args):
    with pytest.raises(cls) as e:
        fn(*args)
    assert str(e.value) == msg


def test_errors_in_tensorflows_words():
    a, b = vdev.constant(np.zeros((2, 3), np.float32)), vdev.constant(np.zeros((2, 4), np.float32))
    v2, v3 = vdev.constant([1.0, 2.0]), vdev.constant([1.0, 2.0, 3.0])
    ai = vdev.constant(np.zeros((2, 3), np.int32))
    err = vdev.errors.InvalidArgumentError
    _raises(err, "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,3] vs. "
            "shape[1] = [2,4]", vdev.concat, [a, b], 0)
    _raises(err, "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got 2",
            vdev.concat, [a, b], 2)
    _raises(err, "ConcatOp : Ranks of all input tensors should match: shape[0] = [2,3] vs. "
            "shape[1] = [3]", vdev.concat, [a, v3], 0)
    _raises(err, "cannot compute ConcatV2 as input #1(zero-based) was expected to be a float "
            "tensor but is a int32 tensor", vdev.concat, [a, ai], 0)
    _raises(ValueError, "vdev.concat needs at least one tensor; values is empty", vdev.concat,
            [], 0)
    _raises(ValueError, "Argument `axis` = 3 not in range [-3, 3)", vdev.stack, [a, a], 3)
    _raises(ValueError, "Argument `axis` = -3 not in range [-2, 2)", vdev.stack, [v2], -3)
    _raises(err, "Shapes of all inputs must match: values[0].shape = [2] != values[1].shape = "
            "[3]", vdev.stack, [v2, v3])
    _raises(err, "cannot compute Pack as input #1(zero-based) was expected to be a float "
            "tensor but is a int32 tensor", vdev.stack, [a, ai])
    x4 = vdev.constant(np.zeros((1, 1, 1, 1), np.float32))
    with pytest.raises(vdev.errors.UnimplementedError) as e:
        vdev.stack([x4, x4])
    assert str(e.value) == "the result would have 5 dimensions; vdev tensors have at most 4"
    c3 = vdev.constant(np.zeros((2, 3, 2), np.float32))
    _raises(err, "transpose expects a vector of size 3. But input(1) is a vector of size 2",
            vdev.transpose, c3, [1, 0])
    _raises(err, "3 is out of range [0 .. 3)", vdev.transpose, c3, [0, 3, 1])
    _raises(err, "-1 is out of range [0 .. 3)", vdev.transpose, c3, [-1, 0, 1])
    _raises(err, "1 is missing from {0,0,2}.", vdev.transpose, c3, [0, 0, 2])
    with pytest.raises(TypeError):
        vdev.transpose(c3, [0, 1.5, 2])
    with pytest.raises(TypeError):
        vdev.concat([a, a], 0.0)


def test_gradients_reach_every_input():
    xs = _arrays([(2, i, 3) for i in (1, 2, 0, 3, 1, 2)])  # six: a tree of ops
    vs = [vdev.Variable(x) for x in xs]
    w = RNG.uniform(-1, 1, size=(2, 9, 3)).astype(np.float32)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(vdev.concat(vs, -2) * vdev.constant(w))
    gs = tape.gradient(y, vs)
    at = 0
    for x, g in zip(xs, gs):
        np.testing.assert_array_equal(g.numpy(), w[:, at:at + x.shape[1]])
        at += x.shape[1]

    ys = _arrays([(3, 2)] * 5)
    vs = [vdev.Variable(x) for x in ys]
    w = RNG.uniform(-1, 1, size=(3, 5, 2)).astype(np.float32)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(vdev.stack(vs, 1) * vdev.constant(w))
    for k, g in enumerate(tape.gradient(y, vs)):
        np.testing.assert_array_equal(g.numpy(), w[:, k])

    x = _arrays([(2, 3, 4)])[0]
    v = vdev.Variable(x)
    w = RNG.uniform(-1, 1, size=(4, 2, 3)).astype(np.float32)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(vdev.transpose(v, [2, 0, 1]) * vdev.constant(w))
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), np.transpose(w, [1, 2, 0]))


def test_ops_run_where_the_tensors_live():
    with vdev.device("GPU:2"):
        a = vdev.constant(np.ones((2, 2), np.float32))
    r = [vdev.concat([a, a], 0), vdev.stack([a] * 5), vdev.transpose(a, [1, 0])]
    assert all(t.device.endswith("/device:GPU:2") for t in r)


def test_stack_of_one_tensor_not_in_a_list():
    # tf.stack(t) is t (axis 0); another axis is checked against t[0], then
    # refused: Pack takes a list
    t = vdev.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert vdev.stack(t) is t
    got = vdev.stack(np.ones((2, 2), np.int32))
    assert got.dtype == vdev.int32 and tuple(got.shape) == (2, 2)
    with pytest.raises(TypeError) as e:
        vdev.stack(t, 1)
    assert str(e.value).startswith("Expected list for 'values' argument to 'pack' Op, not ")
    _raises(ValueError, "Argument `axis` = 2 not in range [-2, 2)", vdev.stack, t, 2)
    # a tuple is a list
    np.testing.assert_array_equal(vdev.stack((t, t), 1).numpy(), np.stack([t.numpy()] * 2, 1))


def test_perm_must_be_a_vector():
    c3 = vdev.constant(np.zeros((2, 3, 2), np.float32))
    err = vdev.errors.InvalidArgumentError
    _raises(err, "perm must be a vector, not [1,3]", vdev.transpose, c3, [[2, 0, 1]])
    _raises(err, "perm must be a vector, not [1,3]", vdev.transpose, c3,
            vdev.constant([[2, 0, 1]], vdev.int32))
    _raises(err, "perm must be a vector, not []", vdev.transpose, c3, 1)
    assert tuple(vdev.transpose(vdev.constant(2.0), []).shape) == ()
