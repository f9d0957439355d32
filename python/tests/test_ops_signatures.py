"""vdev's ops take TensorFlow's positional parameters in TensorFlow's order,
so that a call written for TensorFlow either means the same in vdev or is
refused: tf.matmul's adjoint_a/adjoint_b (the transpose, for real tensors),
a_is_sparse/b_is_sparse/grad_a/grad_b (hints) and output_type;
tf.math.argmax's output_type; tf.transpose's conjugate; tf.nn.softmax's and
log_softmax's axis=None (the last axis); tf.nn.relu's `features`. A switch
that is not a bool is TensorFlow's TypeError (never bool('false'))."""
import numpy as np
import pytest

import vdev

A = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
B = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)


def test_matmul_adjoint_is_the_transpose_positionally():
    a, b = vdev.constant(A), vdev.constant(B)
    # tf.matmul(a, b, transpose_a, transpose_b, adjoint_a, adjoint_b, ...)
    np.testing.assert_array_equal(vdev.matmul(a, a, False, False, True).numpy(),
                                  vdev.matmul(a, a, True).numpy())
    np.testing.assert_allclose(vdev.matmul(a, b, False, False, True).numpy(), A.T @ B)
    np.testing.assert_allclose(vdev.matmul(a, b, False, False, False, True).numpy(), A @ B.T)
    np.testing.assert_allclose(vdev.matmul(a, b, adjoint_a=True, transpose_b=True).numpy(),
                               A.T @ B.T)
    # the hints change nothing; name is still taken (last, as TensorFlow's)
    np.testing.assert_allclose(
        vdev.matmul(a, b, False, False, False, False, True, True, None, True, True, "mm").numpy(),
        A @ B)
    np.testing.assert_allclose(vdev.matmul(a, b, output_type=vdev.float32).numpy(), A @ B)
    np.testing.assert_allclose(vdev.matmul(a, b, output_type="float32").numpy(), A @ B)


def test_matmul_refuses_what_it_cannot_mean():
    a = vdev.constant(A)
    for x in "ab":
        with pytest.raises(ValueError) as e:
            vdev.matmul(a, a, **{"transpose_" + x: True, "adjoint_" + x: True})
        assert str(e.value) == ("Only one of `transpose_%s` and `adjoint_%s` can be True. "
                                "Received `transpose_%s`=True, `adjoint_%s`=True." % ((x,) * 4))
    # a switch that is not a bool: tf.matmul's TypeError (its op attribute's)
    for arg in ("transpose_a", "transpose_b", "adjoint_a", "adjoint_b", "a_is_sparse",
                "b_is_sparse", "grad_a", "grad_b"):
        with pytest.raises(TypeError) as e:
            vdev.matmul(a, a, **{arg: "false"})
        assert str(e.value) == "Expected bool for argument '%s' not 'false'." % arg
    with pytest.raises(TypeError) as e:
        vdev.matmul(a, a, 1)
    assert str(e.value) == "Expected bool for argument 'transpose_a' not 1."
    for bad in (vdev.int32, "int64", np.float64):
        with pytest.raises(TypeError) as e:
            vdev.matmul(a, a, output_type=bad)
        assert str(e.value) == ("vdev's matmul returns its operands' dtype (float32, float32): "
                                "output_type must be None or that dtype, not %r" % (bad,))


def test_argmax_output_type_is_the_third_parameter():
    x = vdev.constant([[1.0, 5.0, 2.0], [7.0, 0.0, 9.0]])
    # tf.math.argmax(input, axis, output_type, name)
    assert vdev.argmax(x, 1, vdev.int32).numpy().tolist() == [1, 2]
    assert vdev.math.argmax(x, 1, "int32", "am").numpy().tolist() == [1, 2]
    assert vdev.argmax(x, 0, np.int32).numpy().tolist() == [1, 0, 1]
    for bad in ("int64", np.int64, vdev.float32, "am"):
        with pytest.raises(TypeError) as e:
            vdev.argmax(x, 1, bad)
        assert str(e.value) == ("vdev's argmax returns int32 indices: output_type must be int32 "
                                "(TensorFlow's default int64 is not a vdev dtype), not %r"
                                % (bad,))


def test_transpose_conjugate_is_the_third_parameter():
    a = vdev.constant(A)
    # tf.transpose(a, perm, conjugate, name): conjugate is a no-op on real tensors
    np.testing.assert_array_equal(vdev.transpose(a, [1, 0], True).numpy(), A.T)
    np.testing.assert_array_equal(vdev.transpose(a, None, False, "t").numpy(), A.T)


def test_softmax_axis_none_is_the_last_axis():
    x = vdev.constant([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]])
    for f in (vdev.nn.softmax, vdev.nn.log_softmax):
        np.testing.assert_array_equal(f(x, axis=None).numpy(), f(x).numpy())
        np.testing.assert_array_equal(f(x, None, "s").numpy(), f(x, -1).numpy())
        with pytest.raises(ValueError) as e:
            f(x, 0)
        assert str(e.value) == ("vdev's %s runs over the last axis (axis=-1 or None), not "
                                "axis 0" % f.__name__)


def test_relu_takes_features():
    np.testing.assert_array_equal(vdev.nn.relu(features=[-1.0, 2.0]).numpy(), [0.0, 2.0])


def test_a_converted_value_lives_through_the_op():
    """A list given to stop_gradient (or relu) is converted to a tensor that
    must live until the op has run."""
    np.testing.assert_array_equal(vdev.stop_gradient([1.0, -2.0]).numpy(), [1.0, -2.0])
    np.testing.assert_array_equal(vdev.nn.relu([1.0, -2.0]).numpy(), [1.0, 0.0])
