"""vdev.maximum and vdev.minimum (tf.maximum, tf.minimum) against numpy's
maximum and minimum, which propagate NaN as TensorFlow's CPU kernel does,
with numpy's broadcasting; their gradients against TensorFlow's rule (dy to
x where x >= y, or x <= y, to y elsewhere, summed to each input's shape)."""

import numpy as np
import pytest

import vdev


def _pairs():
    v = np.array([np.nan, -np.inf, -1.0, 0.0, 1.0, 2.5, np.inf], np.float32)
    return np.repeat(v, len(v)), np.tile(v, len(v))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_values_and_broadcast(name):
    ours, ref = getattr(vdev, name), getattr(np, name)
    x, y = _pairs()
    np.testing.assert_array_equal(ours(vdev.constant(x), vdev.constant(y)).numpy(), ref(x, y))
    a = np.arange(12, dtype=np.float32).reshape(3, 4) % 5 - 2
    for b in (np.float32(0.0), np.array([1, -1, 0, 3], np.float32),
              np.array([[0.5], [-3], [2]], np.float32)):
        got = ours(vdev.constant(a), vdev.constant(b)).numpy()
        np.testing.assert_array_equal(got, ref(a, b))
    # a Python number beside a tensor, and tf.math's name with its arguments
    np.testing.assert_array_equal(ours(vdev.constant(a), 0.0).numpy(), ref(a, 0.0))
    np.testing.assert_array_equal(getattr(vdev.math, name)(x=vdev.constant(a), y=1.0).numpy(),
                                  ref(a, 1.0))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_gradient(name):
    x0 = np.array([[1, 0, -1, np.nan], [2, 0, 0, -2]], np.float32)
    y0 = np.array([0, 0, np.nan, -2], np.float32)
    w = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    x, y = vdev.Variable(x0), vdev.Variable(y0)
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(getattr(vdev, name)(x, y) * vdev.constant(w))
    gx, gy = tape.gradient(loss, [x, y])
    with np.errstate(invalid="ignore"):
        mask = x0 >= y0 if name == "maximum" else x0 <= y0
    np.testing.assert_array_equal(gx.numpy(), np.where(mask, w, 0))
    np.testing.assert_array_equal(gy.numpy(), np.where(mask, 0, w).sum(axis=0))


def test_errors():
    msg = (r"^Maximum: incompatible shapes \[2\] and \[3\] \(dimensions 2 and 3, 1 from the "
           r"end, differ and neither is 1\)$")
    with pytest.raises(vdev.errors.InvalidArgumentError, match=msg):
        vdev.maximum(vdev.constant([1.0, 2.0]), vdev.constant([1.0, 2.0, 3.0]))
    # plain values on both sides, as tf.maximum takes them
    assert np.isnan(vdev.maximum(float("nan"), 1.0).numpy())
    np.testing.assert_array_equal(vdev.minimum(x=[[1.0]], y=[2.0, 0.0]).numpy(), [[1.0, 0.0]])
