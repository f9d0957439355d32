"""GradientTape's output_gradients, jacobian and batch_jacobian, as
TensorFlow's, against closed forms: output_gradients weight each target's
elements (one per target, None for ones, converted when not a tensor);
jacobian has shape target.shape + source.shape, None or zeros for an
unconnected source, zeros for an empty target, and spends a non-persistent
tape; batch_jacobian takes each row's block, zeros for an unconnected source
whatever unconnected_gradients says; experimental_use_pfor=False needs a
persistent tape; the errors are TensorFlow's."""
import numpy as np
import pytest

import vdev


def test_output_gradients_weight_the_target():
    x = vdev.Variable([1.0, 2.0, 3.0])
    with vdev.GradientTape(persistent=True) as t:
        y = x * x
        z = x * 3.0
    g = t.gradient(y, x, output_gradients=np.array([1.0, 0.0, 2.0], np.float32))
    assert g.numpy().tolist() == [2.0, 0.0, 12.0]
    g = t.gradient([y, z], x, output_gradients=[vdev.constant([1.0, 1.0, 1.0]), None])
    assert g.numpy().tolist() == [5.0, 7.0, 9.0]  # 2x + 3
    with pytest.raises(ValueError) as e:
        t.gradient([y, z], x, output_gradients=[np.ones(3, np.float32)])
    assert str(e.value) == ("output_gradients has 1 entries but the target 2 tensors: one for "
                            "each, or None")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        t.gradient(y, x, output_gradients=vdev.constant([1.0, 2.0]))
    assert str(e.value) == ("vdev_tape_gradient_seeded: the loss's output gradient is float of "
                            "shape[2] but the loss is float of shape[3]")


def test_jacobian_against_the_closed_form():
    xv = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    wv = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], np.float32)
    x, w = vdev.Variable(xv), vdev.Variable(wv)
    other = vdev.Variable([1.0])
    with vdev.GradientTape(persistent=True) as t:
        y = vdev.matmul(x, w)  # [2, 3]
    jx, jw, jo = t.jacobian(y, [x, w, other])
    assert jx.shape == (2, 3, 2, 2) and jw.shape == (2, 3, 2, 3) and jo is None
    want_x = np.zeros((2, 3, 2, 2), np.float32)
    want_w = np.zeros((2, 3, 2, 3), np.float32)
    for i in range(2):
        for j in range(3):
            want_x[i, j, i, :] = wv[:, j]  # dy[i,j]/dx[i,k] = w[k,j]
            want_w[i, j, :, j] = xv[i, :]  # dy[i,j]/dw[k,j] = x[i,k]
    np.testing.assert_array_equal(jx.numpy(), want_x)
    np.testing.assert_array_equal(jw.numpy(), want_w)
    jo = t.jacobian(y, other, unconnected_gradients="zero")
    assert jo.shape == (2, 3, 1) and not jo.numpy().any()


def test_jacobian_on_a_gpu():
    with vdev.device("GPU:1"):
        x = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape(persistent=True) as t:
        y = x * x
    j = t.jacobian(y, x)
    np.testing.assert_array_equal(j.numpy(), np.diag([2.0, 4.0]).astype(np.float32))
    assert j.device.endswith("/device:GPU:1")


def test_jacobian_spends_a_non_persistent_tape():
    x = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape() as t:
        y = x * 3.0
    np.testing.assert_array_equal(t.jacobian(y, x).numpy(), 3.0 * np.eye(2, dtype=np.float32))
    with pytest.raises(RuntimeError) as e:
        t.jacobian(y, x)
    assert str(e.value) == ("A non-persistent GradientTape can only be used to compute one set "
                            "of gradients (or jacobians)")


def test_batch_jacobian():
    xv = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    x = vdev.Variable(xv)
    with vdev.GradientTape(persistent=True) as t:
        y = x * x  # row b depends on row b only
    j = t.batch_jacobian(y, x)
    assert j.shape == (3, 2, 2)
    for b in range(3):
        np.testing.assert_array_equal(j.numpy()[b], np.diag(2.0 * xv[b]))
    v = vdev.Variable([1.0, 2.0])
    with pytest.raises(ValueError) as e:
        t.batch_jacobian(y, v)
    assert str(e.value) == "Shape (2,) must have rank at least 2"  # TensorShape's
    z = vdev.Variable(np.ones((2, 2), np.float32))
    with pytest.raises(ValueError) as e:
        t.batch_jacobian(y, z)
    assert str(e.value) == ("Need first dimension of target shape ((3, 2)) and source shape "
                            "((2, 2)) to match.")


def test_batch_jacobian_of_an_unconnected_source_is_zeros():
    x = vdev.Variable(np.ones((2, 3), np.float32))
    u = vdev.Variable(np.ones((2, 4), np.float32))
    with vdev.GradientTape() as t:
        y = x * x
    j = t.batch_jacobian(y, u)  # TensorFlow: zeros of [b, y..., x...], not None
    assert j is not None and j.shape == (2, 3, 4) and not j.numpy().any()
    with pytest.raises(RuntimeError) as e:  # it spent the tape
        t.batch_jacobian(y, u)
    assert str(e.value) == ("A non-persistent GradientTape can only be used to compute one set "
                            "of gradients (or jacobians)")


@pytest.mark.parametrize("call", ["jacobian", "batch_jacobian"])
def test_no_pfor_needs_a_persistent_tape(call):
    x = vdev.Variable(np.ones((2, 2), np.float32))
    with vdev.GradientTape() as t:
        y = x * x
    with pytest.raises(RuntimeError) as e:
        getattr(t, call)(y, x, experimental_use_pfor=False)
    assert str(e.value) == ("GradientTape must be created with persistent=True to compute the "
                            "%s with eager execution enabled and  with experimental_use_pfor "
                            "set to False." % call)
    want = (2, 2, 2, 2) if call == "jacobian" else (2, 2, 2)
    assert getattr(t, call)(y, x).shape == want  # the refusal spent nothing
    with vdev.GradientTape(persistent=True) as t:
        y = x * x
    assert getattr(t, call)(y, x, experimental_use_pfor=False).shape == want


def test_batch_jacobian_beyond_four_dimensions_and_empty():
    xv = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    x = vdev.Variable(xv)
    with vdev.GradientTape(persistent=True) as t:
        y = vdev.reduce_sum(x * x, axis=2)  # [2, 2]: row b depends on x[b] only
    # the whole Jacobian [2, 2, 2, 2, 3] has more dimensions than a vdev
    # tensor, the answer [2, 2, 2, 3] does not
    j = t.batch_jacobian(y, x)
    want = np.zeros((2, 2, 2, 3), np.float32)
    for b in range(2):
        for i in range(2):
            want[b, i, i, :] = 2.0 * xv[b, i]
    np.testing.assert_array_equal(j.numpy(), want)
    with pytest.raises(ValueError) as e:  # jacobian's answer would have 5: before any gradient
        t.jacobian(y, x)
    assert str(e.value) == ("vdev tensors have 0 to 4 dimensions, not 5: the Jacobian of a "
                            "target of shape (2, 2) with respect to a source of shape (2, 2, 3)")
    e0 = vdev.Variable(np.ones((0, 3), np.float32))
    with vdev.GradientTape() as t:
        y = e0 * e0
    j = t.batch_jacobian(y, e0)  # no rows: an empty answer
    assert j.shape == (0, 3, 3)
