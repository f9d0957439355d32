"""Comparisons, logic, casts and where (vdev/_logic_ops.py over
src/ops/compare.c) against numpy and, where installed, TensorFlow's own
numbers as PyTorch computes the same things: every comparison with NaN, -0
and infinities under every broadcast, int32 operands beyond float's 24 bits,
the logical ops, cast between every pair of dtypes, tf.where's three-way
broadcast and its gradient (against a finite difference and numpy's
formula), the one-argument where, reduce_any/reduce_all over axes, is_nan,
is_inf, is_finite, the Tensor operators, and the errors in TensorFlow's
classes. On the CPU and a simulated GPU (conftest: three simulated GPUs)."""
import numpy as np
import pytest

import vdev
from vdev import errors

rng = np.random.default_rng(20261206)
f32, i32 = np.float32, np.int32
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan], f32)
DEVICES = ["CPU:0", "GPU:1"]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), ()), ((3, 1), (1, 4)), ((4,), (2, 3, 4)),
          ((2, 1, 4), (3, 1)), ((0, 4), (4,))]
COMPARISONS = [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
               ("less_equal", np.less_equal), ("greater", np.greater),
               ("greater_equal", np.greater_equal)]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("name,ref", COMPARISONS)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_comparisons_against_numpy(dev, name, ref, sa, sb):
    a = rng.choice(SPECIAL, sa)
    b = rng.choice(SPECIAL, sb)
    with vdev.device(dev):
        got = getattr(vdev, name)(vdev.constant(a), vdev.constant(b))
    assert got.dtype == vdev.bool
    assert got.device.endswith(dev)
    want = ref(a, b)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name,ref", COMPARISONS)
def test_int32_comparisons_are_exact(name, ref):
    a = np.array([16777217, -2147483648, 2147483647, 5, -7], i32)
    b = np.array([16777216, 2147483647, 2147483646, 5, 7], i32)
    np.testing.assert_array_equal(getattr(vdev, name)(a, b).numpy(), ref(a, b))
    # a Python number beside a tensor takes its dtype
    np.testing.assert_array_equal(getattr(vdev, name)(vdev.constant(a), 5).numpy(), ref(a, 5))


@pytest.mark.parametrize("dev", DEVICES)
def test_logical_ops(dev):
    p = rng.random((3, 1)) < 0.5
    q = rng.random((4,)) < 0.5
    with vdev.device(dev):
        vp, vq = vdev.constant(p), vdev.constant(q)
        np.testing.assert_array_equal(vdev.logical_and(vp, vq).numpy(), p & q)
        np.testing.assert_array_equal(vdev.logical_or(vp, vq).numpy(), p | q)
        np.testing.assert_array_equal(vdev.logical_xor(vp, vq).numpy(), p ^ q)
        np.testing.assert_array_equal(vdev.logical_not(vq).numpy(), ~q)
        np.testing.assert_array_equal((vp & vq).numpy(), p & q)
        np.testing.assert_array_equal((vp | vq).numpy(), p | q)
        np.testing.assert_array_equal((vp ^ vq).numpy(), p ^ q)
        np.testing.assert_array_equal((~vq).numpy(), ~q)
        np.testing.assert_array_equal((True & vq).numpy(), q)
    assert vdev.math.logical_and is vdev.logical_and


def test_tensor_operators_compare_elementwise():
    a = rng.choice(SPECIAL, (3, 4))
    t = vdev.constant(a)
    np.testing.assert_array_equal((t < 0.5).numpy(), a < 0.5)
    np.testing.assert_array_equal((t <= 0.5).numpy(), a <= 0.5)
    np.testing.assert_array_equal((t > 0.5).numpy(), a > 0.5)
    np.testing.assert_array_equal((t >= 0.5).numpy(), a >= 0.5)
    np.testing.assert_array_equal((0.5 < t).numpy(), 0.5 < a)
    # == stays identity, as vdev documents (tensors stay hashable)
    assert (t == t) is True
    assert {t: 1}[t] == 1


@pytest.mark.parametrize("dev", DEVICES)
def test_cast_between_every_pair(dev):
    f = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, -0.0, 0.0, 2147483648.0], f32)
    i = np.array([16777217, -16777217, 2147483647, 0, -3, 1], i32)
    b = np.array([True, False, True])
    with vdev.device(dev):
        vf, vi, vb = vdev.constant(f), vdev.constant(i), vdev.constant(b)
        got_fi = vdev.cast(vf, vdev.int32)
        np.testing.assert_array_equal(
            got_fi.numpy(), [0, 2147483647, -2147483648, 2147483647, -2147483648, 2, -2, 0, 0,
                             2147483647])
        np.testing.assert_array_equal(vdev.cast(vf, vdev.bool).numpy(), f != 0)
        np.testing.assert_array_equal(vdev.cast(vi, vdev.float32).numpy(), i.astype(f32))
        np.testing.assert_array_equal(vdev.cast(vi, "bool").numpy(), i != 0)
        np.testing.assert_array_equal(vdev.cast(vb, vdev.float32).numpy(), b.astype(f32))
        np.testing.assert_array_equal(vdev.cast(vb, vdev.int32).numpy(), b.astype(i32))
        assert vdev.cast(vf, vdev.float32) is vf  # TensorFlow's: the tensor itself
        assert got_fi.device.endswith(dev)
    assert vdev.cast(1.7, vdev.int32).numpy() == 1
    assert vdev.cast([True, False], vdev.float32).numpy().tolist() == [1.0, 0.0]
    with pytest.raises(TypeError, match="float64"):
        vdev.cast(vf, np.float64)


def test_cast_gradient_through_own_dtype_only():
    v = vdev.Variable([1.5, -2.5])
    with vdev.GradientTape(persistent=True) as tape:
        same = vdev.reduce_sum(vdev.multiply(vdev.cast(v, vdev.float32), 3.0))
        through_int = vdev.reduce_sum(vdev.cast(vdev.cast(v, vdev.int32), vdev.float32))
    np.testing.assert_array_equal(tape.gradient(same, v).numpy(), [3.0, 3.0])
    assert tape.gradient(through_int, v) is None  # unconnected, as TensorFlow's


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("sc,sx,sy", [((3, 4), (3, 4), (3, 4)), ((3, 1), (3, 4), ()),
                                      ((4,), (3, 1), (1, 4)), ((2, 1, 4), (3, 4), (3, 4)),
                                      ((), (2, 3), (2, 3))])
def test_where_values_and_gradient(dev, sc, sx, sy):
    c = rng.random(sc) < 0.5
    x = rng.uniform(-2, 2, sx).astype(f32)
    y = rng.uniform(-2, 2, sy).astype(f32)
    out_shape = np.broadcast_shapes(sc, sx, sy)
    w = rng.uniform(-1, 1, out_shape).astype(f32)
    with vdev.device(dev):
        vx, vy = vdev.Variable(x), vdev.Variable(y)
        with vdev.GradientTape() as tape:
            out = vdev.where(vdev.constant(c), vx, vy)
            loss = vdev.reduce_sum(vdev.multiply(out, vdev.constant(w)))
        gx, gy = tape.gradient(loss, [vx, vy])
    cb = np.broadcast_to(c, out_shape)
    np.testing.assert_array_equal(out.numpy(), np.where(c, x, y))
    # TensorFlow's gradient: where(c, g, 0) summed back to x's shape
    def summed_to(g, shape):
        lead = g.ndim - len(shape)
        g = g.sum(axis=tuple(range(lead))) if lead else g
        axes = tuple(d for d, s in enumerate(shape) if s == 1 and g.shape[d] != 1)
        return g.sum(axis=axes, keepdims=True).reshape(shape) if axes else g.reshape(shape)
    np.testing.assert_allclose(gx.numpy(), summed_to(np.where(cb, w, 0).astype(np.float64), sx),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gy.numpy(), summed_to(np.where(cb, 0, w).astype(np.float64), sy),
                               rtol=1e-6, atol=1e-6)
    assert gx.shape == sx and gy.shape == sy


def test_where_gradient_against_finite_difference():
    c = np.array([[True, False, True], [False, False, True]])
    x = rng.uniform(-1, 1, (2, 3)).astype(f32)
    y = rng.uniform(-1, 1, (1, 3)).astype(f32)

    def loss_of(xv, yv):
        o = vdev.where(c, vdev.constant(xv), vdev.constant(yv))
        return float(vdev.reduce_sum(vdev.multiply(o, o)).numpy())

    vx, vy = vdev.Variable(x), vdev.Variable(y)
    with vdev.GradientTape() as tape:
        o = vdev.where(c, vx, vy)
        loss = vdev.reduce_sum(vdev.multiply(o, o))
    gx, gy = (g.numpy() for g in tape.gradient(loss, [vx, vy]))
    h = 1e-2
    for arr, g, is_x in ((x, gx, True), (y, gy, False)):
        for idx in np.ndindex(arr.shape):
            up, down = arr.copy(), arr.copy()
            up[idx] += h
            down[idx] -= h
            fd = ((loss_of(up, y) - loss_of(down, y)) if is_x
                  else (loss_of(x, up) - loss_of(x, down))) / (2 * h)
            assert abs(fd - g[idx]) < 1e-3, (idx, fd, g[idx])


def test_where_keeps_unchosen_nan_out_and_takes_ints_and_values():
    c = vdev.constant([True, False, True])
    got = vdev.where(c, [1.0, np.nan, 3.0], [np.inf, 5.0, -np.inf])
    np.testing.assert_array_equal(got.numpy(), [1.0, 5.0, 3.0])
    gi = vdev.where(c, vdev.constant([7, 8, 9]), 0)
    assert gi.dtype == vdev.int32
    np.testing.assert_array_equal(gi.numpy(), [7, 0, 9])
    gb = vdev.where(c, vdev.constant([False, True, False]), True)
    assert gb.dtype == vdev.bool
    np.testing.assert_array_equal(gb.numpy(), [False, True, False])


def test_where_one_argument_gives_the_true_positions():
    c = np.array([[True, False], [False, True], [True, True]])
    got = vdev.where(vdev.constant(c))
    assert got.dtype == vdev.int32  # TensorFlow's are int64, which vdev has not
    np.testing.assert_array_equal(got.numpy(), np.argwhere(c))
    assert vdev.where(vdev.constant([1.0, 0.0, -2.0])).numpy().tolist() == [[0], [2]]
    assert vdev.where(np.zeros((2, 2), bool)).shape == (0, 2)
    with vdev.device("GPU:2"):
        assert vdev.where(vdev.constant([True])).device.endswith("GPU:2")


def test_reduce_any_all():
    a = rng.random((3, 4, 5)) < 0.3
    a[1] = False
    a[2] = True
    t = vdev.constant(a)
    assert bool(vdev.reduce_any(t).numpy()) == a.any()
    assert bool(vdev.reduce_all(t).numpy()) == a.all()
    for axis in (0, 1, -1, [0, 2]):
        ax = tuple(axis) if isinstance(axis, list) else axis
        np.testing.assert_array_equal(vdev.reduce_any(t, axis=axis).numpy(), a.any(axis=ax))
        np.testing.assert_array_equal(vdev.reduce_all(t, axis=axis, keepdims=True).numpy(),
                                      a.all(axis=ax, keepdims=True))
    empty = vdev.constant(np.zeros((0, 3), bool))
    np.testing.assert_array_equal(vdev.reduce_all(empty, axis=0).numpy(), [True] * 3)
    np.testing.assert_array_equal(vdev.reduce_any(empty, axis=0).numpy(), [False] * 3)
    assert vdev.math.reduce_any is vdev.reduce_any


@pytest.mark.parametrize("dev", DEVICES)
def test_is_nan_inf_finite(dev):
    a = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, -1.0], f32)
    with vdev.device(dev):
        t = vdev.constant(a)
        np.testing.assert_array_equal(vdev.math.is_nan(t).numpy(), np.isnan(a))
        np.testing.assert_array_equal(vdev.math.is_inf(t).numpy(), np.isinf(a))
        np.testing.assert_array_equal(vdev.math.is_finite(t).numpy(), np.isfinite(a))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Value for attr 'T' of int32 is not in the list of allowed "
                             r"values: bfloat16, half, float, double \[Op:IsNan\]$"):
        vdev.math.is_nan(vdev.constant([1, 2]))


def test_errors_in_tensorflows_classes():
    f = vdev.constant([1.0, 2.0])
    i = vdev.constant([1, 2])
    b = vdev.constant([True, False])
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Less: input #0 \(shape \[2\]\) is bool, expected float or int32$"):
        vdev.less(b, b)
    with pytest.raises(errors.InvalidArgumentError, match="is int32, expected float"):
        vdev.equal(f, i)
    with pytest.raises(errors.InvalidArgumentError, match="is float, expected bool"):
        vdev.logical_and(f, f)
    with pytest.raises(errors.InvalidArgumentError, match="is float, expected bool"):
        vdev.where(f, f, f)
    with pytest.raises(errors.InvalidArgumentError, match="must be broadcastable"):
        vdev.where(vdev.constant([True, False, True]), f, f)
    with pytest.raises(ValueError, match=r"^x and y must both be non-None or both be None\.$"):
        vdev.where(b, f)
    with pytest.raises(errors.InvalidArgumentError, match="incompatible shapes"):
        vdev.greater(vdev.zeros([2, 3]), vdev.zeros([4]))
    # a Python bool beside a float tensor converts to 1.0, as TensorFlow's
    np.testing.assert_array_equal(vdev.equal(f, True).numpy(), [True, False])
    with pytest.raises(TypeError, match="Cannot convert 1.5 to EagerTensor of dtype bool"):
        vdev.logical_and(b, 1.5)


def test_placement_log_names(capfd):
    vdev.debugging.set_log_device_placement(True)
    with vdev.device("GPU:0"):
        t = vdev.constant([1.0, 2.0])
        vdev.where(vdev.less(t, 1.5), t, vdev.cast(vdev.constant([0, 1]), vdev.float32))
    err = capfd.readouterr().err
    for op in ("Less", "SelectV2", "Cast"):
        assert "Executing op %s in device /job:localhost/replica:0/task:0/device:GPU:0" % op in err


def test_bool_tensor_key_is_a_boolean_mask():
    a = rng.uniform(-1, 1, (3, 4)).astype(f32)
    t = vdev.constant(a)
    np.testing.assert_array_equal(t[t > 0].numpy(), a[a > 0])
    rows = vdev.constant([True, False, True])
    np.testing.assert_array_equal(t[rows].numpy(), a[[0, 2]])
