"""int32 arithmetic (AddV2, Sub, Mul, Maximum, Minimum on int32 tensors, as
TensorFlow's): values against numpy's int32 arithmetic, which wraps as
two's complement as TensorFlow's does, under every broadcast; Python numbers
beside an int32 tensor (``t + 1``, ``2 * t``, ``-t``); what stays refused
(a float beside an int32 tensor, RealDiv of ints, mixed dtypes). On the CPU
and a simulated GPU (conftest)."""
import numpy as np
import pytest

import vdev
from vdev import errors

rng = np.random.default_rng(20261206)
i32 = np.int32
EDGES = np.array([0, 1, -1, 7, 2**31 - 1, -2**31, 46341, -3], i32)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("name,ref", [("add", np.add), ("subtract", np.subtract),
                                      ("multiply", np.multiply), ("maximum", np.maximum),
                                      ("minimum", np.minimum)])
@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), ()),
                                   ((3, 1), (1, 4)), ((2, 1, 4), (3, 4))])
def test_against_numpy_wrapping(dev, name, ref, sa, sb):
    a = rng.choice(EDGES, sa)
    b = rng.choice(EDGES, sb)
    with vdev.device(dev):
        got = getattr(vdev, name)(vdev.constant(a), vdev.constant(b))
    assert got.dtype == vdev.int32 and got.device.endswith(dev)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got.numpy(), ref(a, b))


def test_python_numbers_and_operators():
    a = np.array([2**31 - 1, -5, 0, 16777217], i32)
    t = vdev.constant(a)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal((t + 1).numpy(), a + i32(1))
        np.testing.assert_array_equal((1 + t).numpy(), a + i32(1))
        np.testing.assert_array_equal((t - 3).numpy(), a - i32(3))
        np.testing.assert_array_equal((3 - t).numpy(), i32(3) - a)
        np.testing.assert_array_equal((t * 2).numpy(), a * i32(2))
        np.testing.assert_array_equal((-t).numpy(), -a)
        np.testing.assert_array_equal((-vdev.constant([-2**31])).numpy(), [-2**31])
    assert (t + 1).dtype == vdev.int32
    np.testing.assert_array_equal(vdev.range(5) * 2 + 1, [1, 3, 5, 7, 9])


def test_refusals():
    t = vdev.constant([1, 2])
    with pytest.raises(TypeError, match="Cannot convert 1.5 to EagerTensor of dtype int32"):
        t + 1.5
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^RealDiv: input #0 \(shape \[2\]\) is int32, expected float$"):
        vdev.divide(t, t)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^AddV2: input #1 \(shape \[2\]\) is float, expected int32$"):
        vdev.add(t, vdev.constant([1.0, 2.0]))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^AddV2: input #0 \(shape \[2\]\) is bool, expected float$"):
        vdev.add(vdev.constant([True, False]), vdev.constant([True, False]))


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_floordiv_floormod_against_python(dev):
    a = rng.choice(np.array([7, -7, 0, 2**31 - 1, -2**31, 5, -1], i32), (4, 5))
    b = rng.choice(np.array([2, -2, 3, -3, 1, -1, 7], i32), (5,))
    with vdev.device(dev):
        ta, tb = vdev.constant(a), vdev.constant(b)
        q, r = (ta // tb).numpy(), (ta % tb).numpy()
    # Python's own // and %, with INT32_MIN // -1 wrapping as int32
    want_q = np.array([[(int(x) // int(y) + 2**31) % 2**32 - 2**31 for x, y in zip(row, b)]
                       for row in a], i32)
    want_r = np.array([[int(x) % int(y) for x, y in zip(row, b)] for row in a], i32)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(r, want_r)
    zero = vdev.constant([5, -5]) // vdev.constant([0, 0])
    np.testing.assert_array_equal(zero.numpy(), [0, 0])  # vdev's answer (README)
    np.testing.assert_array_equal((vdev.constant([7, -7]) % 3).numpy(), [1, 2])
    np.testing.assert_array_equal((10 // vdev.constant([3, -3])).numpy(), [3, -4])


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_reduce_sum_of_int32_wraps(dev):
    a = rng.choice(EDGES, (4, 5))
    with vdev.device(dev):
        t = vdev.constant(a)
        for axis in (None, 0, 1, [0, 1]):
            got = vdev.reduce_sum(t, axis=axis)
            assert got.dtype == vdev.int32
            ax = tuple(axis) if isinstance(axis, list) else axis
            np.testing.assert_array_equal(got.numpy(), np.sum(a, axis=ax, dtype=np.int32))
    mask = vdev.constant([[True, False, True]])
    assert int(vdev.reduce_sum(vdev.cast(mask, vdev.int32))) == 2
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Mean: input #0 \(shape \[2\]\) is int32, expected float$"):
        vdev.reduce_mean(vdev.constant([1, 2]))
