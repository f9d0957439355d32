"""reduce_max, reduce_min, abs, sign (ops Max, Min, Abs, Sign) and the
compositions clip_by_value, expand_dims, squeeze, one_hot, range, tile,
argmin (vdev/_more_ops.py) against numpy and torch: values with NaN, ties,
both zeros and empty axes, every axis and keepdims, int32; gradients against
TensorFlow's rules (ties share, NaN rows) and finite differences; the errors
in TensorFlow's words. On the CPU and a simulated GPU (conftest)."""
import numpy as np
import pytest

import vdev
from vdev import errors

rng = np.random.default_rng(20261206)
f32, i32 = np.float32, np.int32
DEVICES = ["CPU:0", "GPU:1"]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("name,ref", [("reduce_max", np.max), ("reduce_min", np.min)])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, [0, 2], (1,)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_max_min_against_numpy(dev, name, ref, axis, keepdims):
    a = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf], f32), (2, 3, 4))
    a[1, 2, 3] = np.nan
    ax = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    with vdev.device(dev):
        got = getattr(vdev, name)(vdev.constant(a), axis=axis, keepdims=keepdims)
    want = ref(a, axis=ax, keepdims=keepdims)
    assert got.shape == np.shape(want)
    np.testing.assert_array_equal(got.numpy(), want)  # NaN where numpy has it
    ai = rng.integers(-2**31, 2**31 - 1, (2, 3, 4), dtype=np.int64).astype(i32)
    gi = getattr(vdev, name)(vdev.constant(ai), axis=axis, keepdims=keepdims)
    assert gi.dtype == vdev.int32
    np.testing.assert_array_equal(gi.numpy(), ref(ai, axis=ax, keepdims=keepdims))


def test_empty_axis_gives_the_identity():
    e = vdev.zeros([0, 3])
    np.testing.assert_array_equal(vdev.reduce_max(e, axis=0).numpy(), [-np.inf] * 3)
    np.testing.assert_array_equal(vdev.reduce_min(e, axis=0).numpy(), [np.inf] * 3)
    assert vdev.reduce_max(vdev.zeros([0], vdev.int32)).numpy() == -2**31
    assert vdev.reduce_max(e, axis=1).shape == (0,)


def test_max_gradient_shares_ties_and_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, -1.0], [0.0, -2.0, 4.0, 4.0]], f32)
    w = rng.uniform(-1, 1, 3).astype(f32)
    v = vdev.Variable(a)
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(vdev.multiply(vdev.reduce_max(v, axis=1), w))
    g = tape.gradient(loss, v).numpy()
    # TensorFlow's _MinOrMaxGrad: dy / count on each tied maximum
    want = np.zeros_like(a)
    for r in range(3):
        hit = a[r] == a[r].max()
        want[r, hit] = w[r] / hit.sum()
    np.testing.assert_allclose(g, want, rtol=1e-6)
    # torch.amax's gradient is the same rule
    t = torch.tensor(a, requires_grad=True)
    (torch.amax(t, dim=1) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dev", DEVICES)
def test_min_all_gradient_and_nan_row(dev):
    a = np.array([[1.0, -2.0], [-2.0, 7.0]], f32)
    with vdev.device(dev):
        v = vdev.Variable(a)
        with vdev.GradientTape() as tape:
            loss = vdev.multiply(vdev.reduce_min(v), 3.0)
        np.testing.assert_array_equal(tape.gradient(loss, v).numpy(), [[0, 1.5], [1.5, 0]])
        n = vdev.Variable(np.array([[1.0, np.nan], [2.0, 3.0]], f32))
        with vdev.GradientTape() as tape:
            loss = vdev.reduce_sum(vdev.reduce_max(n, axis=1))
        g = tape.gradient(loss, n).numpy()
    assert np.isnan(g[0]).all()  # the NaN row: 0/0, as TensorFlow's
    np.testing.assert_array_equal(g[1], [0, 1])


@pytest.mark.parametrize("dev", DEVICES)
def test_abs_sign(dev):
    a = np.array([-0.0, 0.0, np.nan, -np.inf, 3.5, -2.0, 1e-45], f32)
    i = np.array([-2**31, -5, 0, 7, 2**31 - 1], i32)
    with vdev.device(dev):
        fa, fs = vdev.abs(vdev.constant(a)).numpy(), vdev.sign(vdev.constant(a)).numpy()
        ia, is_ = vdev.abs(vdev.constant(i)).numpy(), vdev.math.sign(vdev.constant(i)).numpy()
    np.testing.assert_array_equal(fa, np.abs(a))
    assert not np.signbit(fa[0])
    np.testing.assert_array_equal(fs, np.sign(a))
    assert not np.signbit(fs[0])
    np.testing.assert_array_equal(ia, np.abs(i))  # |INT32_MIN| wraps, as numpy's
    np.testing.assert_array_equal(is_, np.sign(i))
    x = np.array([-1.5, 0.0, 2.0], f32)
    v = vdev.Variable(x)
    with vdev.GradientTape(persistent=True) as tape:
        la = vdev.reduce_sum(vdev.multiply(vdev.abs(v), [1.0, 2.0, 3.0]))
        ls = vdev.reduce_sum(vdev.sign(v))
    np.testing.assert_array_equal(tape.gradient(la, v).numpy(), [-1.0, 0.0, 3.0])
    np.testing.assert_array_equal(tape.gradient(ls, v).numpy(), [0.0, 0.0, 0.0])
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Abs: input #0 \(shape \[1\]\) is bool, expected float or int32$"):
        vdev.abs(vdev.constant([True]))


def test_clip_by_value_values_and_gradient():
    a = np.array([-3.0, -1.0, 0.0, 0.5, 1.0, 4.0, np.nan], f32)
    v = vdev.Variable(a)
    with vdev.GradientTape() as tape:
        y = vdev.clip_by_value(v, -1.0, 1.0)
        loss = vdev.reduce_sum(vdev.multiply(y, 2.0))
    np.testing.assert_array_equal(y.numpy(), np.clip(a, -1, 1))
    # TensorFlow's Minimum/Maximum rules: a NaN sends its gradient to the bounds
    np.testing.assert_array_equal(tape.gradient(loss, v).numpy(), [0, 2, 2, 2, 2, 0, 0])


def test_expand_dims_and_squeeze():
    a = np.arange(6, dtype=f32).reshape(2, 1, 3)
    t = vdev.constant(a)
    for ax in (0, 1, 3, -1, -4):
        assert vdev.expand_dims(t, ax).shape == np.expand_dims(a, ax).shape
    assert vdev.squeeze(t).shape == (2, 3)
    assert vdev.squeeze(t, 1).shape == (2, 3)
    assert vdev.squeeze(t, [-2]).shape == (2, 3)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Tried to expand dim index 4 for tensor with 3 dimensions\.$"):
        vdev.expand_dims(t, 4)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Can not squeeze dim\[0\], expected a dimension of 1, got 2$"):
        vdev.squeeze(t, 0)


@pytest.mark.parametrize("dev", DEVICES)
def test_one_hot(dev):
    idx = np.array([[0, 2], [5, -1]], i32)
    with vdev.device(dev):
        t = vdev.constant(idx)
        got = vdev.one_hot(t, 3)
        assert got.dtype == vdev.float32 and got.device.endswith(dev)
        np.testing.assert_array_equal(got.numpy(), np.eye(3, dtype=f32)[np.clip(idx, 0, 2)] *
                                      ((idx >= 0) & (idx < 3))[..., None])
        ax0 = vdev.one_hot(t, 3, axis=0)
        np.testing.assert_array_equal(ax0.numpy(), np.moveaxis(got.numpy(), -1, 0))
        onoff = vdev.one_hot(t, 3, on_value=5, off_value=-1)
        assert onoff.dtype == vdev.int32  # TensorFlow's: the values' dtype
        np.testing.assert_array_equal(onoff.numpy(), np.where(got.numpy() == 1, 5, -1))
        b = vdev.one_hot(t, 3, dtype=vdev.bool)
        np.testing.assert_array_equal(b.numpy(), got.numpy() == 1)


def test_range():
    np.testing.assert_array_equal(vdev.range(5).numpy(), np.arange(5))
    assert vdev.range(5).dtype == vdev.int32
    np.testing.assert_array_equal(vdev.range(1, 2, 0.25).numpy(), np.arange(1, 2, 0.25, f32))
    assert vdev.range(1, 2, 0.25).dtype == vdev.float32
    np.testing.assert_array_equal(vdev.range(5, 0, -2).numpy(), [5, 3, 1])
    assert vdev.range(3, dtype=vdev.float32).dtype == vdev.float32
    with pytest.raises(errors.InvalidArgumentError, match=r"^Requires delta != 0: 0$"):
        vdev.range(0, 5, 0)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Requires start <= limit when delta > 0: 5/1$"):
        vdev.range(5, 1)


def test_tile_values_and_gradient():
    a = rng.uniform(-1, 1, (2, 3)).astype(f32)
    v = vdev.Variable(a)
    w = rng.uniform(-1, 1, (4, 9)).astype(f32)
    with vdev.GradientTape() as tape:
        y = vdev.tile(v, [2, 3])
        loss = vdev.reduce_sum(vdev.multiply(y, w))
    np.testing.assert_array_equal(y.numpy(), np.tile(a, [2, 3]))
    want = w.reshape(2, 2, 3, 3).sum(axis=(0, 2))
    np.testing.assert_allclose(tape.gradient(loss, v).numpy(), want, rtol=1e-5, atol=1e-6)
    assert vdev.tile(v, [0, 1]).shape == (0, 3)
    assert vdev.tile(v, [1, 1]) is not v
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Expected multiples argument to be a vector of length 2 but got "
                             r"length 1$"):
        vdev.tile(v, [2])


def test_argmin():
    a = np.array([[3.0, 1.0, 1.0], [-2.0, 5.0, -2.0]], f32)
    np.testing.assert_array_equal(vdev.argmin(a, axis=1).numpy(), np.argmin(a, axis=1))
    np.testing.assert_array_equal(vdev.math.argmin(a).numpy(), np.argmin(a, axis=0))


def test_placement_log_names(capfd):
    vdev.debugging.set_log_device_placement(True)
    with vdev.device("GPU:2"):
        t = vdev.constant([1.0, -2.0])
        vdev.reduce_max(t)
        vdev.reduce_min(t)
        vdev.abs(t)
        vdev.sign(t)
    err = capfd.readouterr().err
    for op in ("Max", "Min", "Abs", "Sign"):
        assert "Executing op %s in device /job:localhost/replica:0/task:0/device:GPU:2" % op in err


def test_shape_size_rank_eye_linspace():
    t = vdev.zeros([2, 3, 4])
    assert vdev.shape(t).dtype == vdev.int32
    np.testing.assert_array_equal(vdev.shape(t).numpy(), [2, 3, 4])
    assert int(vdev.size(t)) == 24 and int(vdev.rank(t)) == 3
    with pytest.raises(TypeError, match="int32"):
        vdev.shape(t, out_type=np.int64)
    np.testing.assert_array_equal(vdev.eye(3, 2).numpy(), np.eye(3, 2, dtype=f32))
    assert vdev.eye(2, batch_shape=[3]).shape == (3, 2, 2)
    np.testing.assert_array_equal(vdev.linspace(0.0, 1.0, 5).numpy(),
                                  np.linspace(0, 1, 5, dtype=f32))


@pytest.mark.parametrize("dev", DEVICES)
def test_split_unstack_reverse_and_gradients(dev):
    a = rng.uniform(-1, 1, (4, 6)).astype(f32)
    w = rng.uniform(-1, 1, (4, 6)).astype(f32)
    with vdev.device(dev):
        v = vdev.Variable(a)
        with vdev.GradientTape() as tape:
            parts = vdev.split(v, [1, -1, 2], axis=1)
            rows = vdev.unstack(v)
            rev = vdev.reverse(v, [0, 1])
            loss = vdev.add(vdev.reduce_sum(vdev.multiply(vdev.concat(parts, 1), w)),
                            vdev.reduce_sum(vdev.multiply(rev, w)))
        g = tape.gradient(loss, v).numpy()
    for got, want in zip(parts, np.split(a, [1, 4], axis=1)):
        np.testing.assert_array_equal(got.numpy(), want)
    assert len(rows) == 4 and rows[2].shape == (6,)
    np.testing.assert_array_equal(rows[2].numpy(), a[2])
    np.testing.assert_array_equal(rev.numpy(), a[::-1, ::-1])
    np.testing.assert_allclose(g, w + w[::-1, ::-1], rtol=1e-6)
    np.testing.assert_array_equal(vdev.split(vdev.constant(a), 3, axis=1)[1].numpy(), a[:, 2:4])
    np.testing.assert_array_equal(vdev.unstack(vdev.constant(a), axis=1)[5].numpy(), a[:, 5])
    with pytest.raises(errors.InvalidArgumentError, match="evenly divide"):
        vdev.split(vdev.constant(a), 5)
    with pytest.raises(errors.InvalidArgumentError, match="specified more than once"):
        vdev.reverse(vdev.constant(a), [1, -1])


def test_reciprocal_rsqrt():
    a = np.array([2.0, 0.5, -4.0, 0.0, np.inf, 3.0], f32)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(vdev.math.reciprocal(a).numpy(), f32(1) / a)
    p = np.array([4.0, 2.0, 0.25, 3.0], f32)
    np.testing.assert_array_equal(vdev.math.rsqrt(p).numpy(), f32(1) / np.sqrt(p))


@pytest.mark.parametrize("dev", DEVICES)
def test_floor_ceil_round_floordiv_floormod(dev):
    a = np.array([0.5, -0.5, 1.5, -2.5, 2.5, -0.0, 1e30, 3.49, np.nan, -np.inf], f32)
    x = np.array([7.5, -7.5, 7.5, -7.5, 1.0, 0.0, 5.0], f32)
    y = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 3.0, 0.5], f32)
    with vdev.device(dev):
        t = vdev.constant(a)
        np.testing.assert_array_equal(vdev.floor(t).numpy(), np.floor(a))
        np.testing.assert_array_equal(vdev.math.ceil(t).numpy(), np.ceil(a))
        np.testing.assert_array_equal(vdev.round(t).numpy(), np.round(a))  # ties to even
        assert np.signbit(vdev.floor(t).numpy()[5])  # floor(-0) is -0
        with np.errstate(divide="ignore", invalid="ignore"):
            np.testing.assert_array_equal((vdev.constant(x) // vdev.constant(y)).numpy(),
                                          np.floor_divide(x, y))
            np.testing.assert_array_equal(vdev.math.floormod(x, y).numpy(), np.mod(x, y))
    np.testing.assert_array_equal(vdev.round(vdev.constant([3, -4])).numpy(), [3, -4])
    v = vdev.Variable(np.array([7.5, -7.5], f32))
    w = vdev.Variable(np.array([2.0, 2.0], f32))
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(vdev.multiply(vdev.math.floormod(v, w), [1.0, 3.0]))
    gv, gw = tape.gradient(loss, [v, w])
    np.testing.assert_array_equal(gv.numpy(), [1.0, 3.0])  # TensorFlow's _FloorModGrad
    np.testing.assert_array_equal(gw.numpy(), [-3.0, 12.0])  # -dy floor(x / y)
