"""vdev.boolean_mask (TensorFlow's tf.boolean_mask, vdev/_masking.py) and
``x[mask]`` for tensors and variables, against numpy's ``x[mask]`` (at
``axis``: ``x[(slice(None),) * axis + (mask,)]``) on seeded random shapes of
1 to 4 dimensions, masks of 1 to 4 dimensions at every axis (negative ones
too), float32 and int32, all-False, all-True and zero-size masks and
tensors; the mask as a numpy bool array, a list of bools, a vdev int32 or
float32 tensor and a numpy int array (not 0 is True, as TensorFlow's
Where); TensorFlow's errors in its words; gradients against numpy's
scatter of the output's gradient (bit for bit), against finite differences
and against PyTorch's ``x[mask]``; the same bits on a simulated GPU as on
the CPU, the result where the tensor lives."""
import numpy as np
import pytest

import vdev

def _values(rng, shape, dtype):
    if dtype == np.int32:
        return rng.integers(-2 ** 31, 2 ** 31, size=shape, dtype=np.int64).astype(np.int32)
    return rng.uniform(-2, 2, size=shape).astype(np.float32)


def _numpy_mask(x, m, axis):
    return x[(slice(None),) * axis + (m,)]


def _cases(count):
    """(tensor shape, axis, mask rank, probability of True, seed): random
    shapes of 1 to 4 dimensions (sizes 1 to 5), every valid axis and mask
    rank, and a negative axis where TensorFlow's slice takes it (a 1-D mask
    not at the last axis)."""
    rng = np.random.default_rng(7)
    out = []
    for _ in range(count):
        nd = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 6, size=nd))
        k = int(rng.integers(1, nd + 1))
        axis = int(rng.integers(0, nd - k + 1))
        p = float(rng.choice([0.0, 0.3, 0.7, 1.0]))
        out.append((shape, axis, k, p, len(out)))
        if k == 1 and axis < nd - 1:
            out.append((shape, axis - nd, k, p, len(out)))
    return out


# and zero sizes: in the mask, before it, after it
CASES = _cases(80) + [((4,), 0, 1, 0.5, 1000), ((3, 0), 0, 1, 1.0, 1001),
                      ((0, 3), 1, 1, 1.0, 1002), ((2, 0, 3), 0, 2, 1.0, 1003),
                      ((0,), 0, 1, 1.0, 1004), ((2, 3, 0), 1, 1, 0.7, 1005),
                      ((2, 3, 4, 5), 0, 4, 0.5, 1006), ((2, 3, 4, 5), 1, 3, 0.5, 1007),
                      ((2, 3, 4, 5), -3, 1, 0.5, 1008), ((1, 1, 6), 2, 1, 0.5, 1009)]


@pytest.mark.parametrize("shape,axis,k,p,seed", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_matches_numpy(shape, axis, k, p, seed, dtype):
    rng = np.random.default_rng(seed)
    x = _values(rng, shape, dtype)
    ax = axis % len(shape)
    m = rng.random(shape[ax:ax + k]) < p
    want = _numpy_mask(x, m, ax)
    t = vdev.constant(x)
    got = vdev.boolean_mask(t, m, axis=axis)
    assert got.dtype is (vdev.int32 if dtype == np.int32 else vdev.float32)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    if axis == 0:  # the same through indexing, a tensor's and a variable's
        np.testing.assert_array_equal(t[m].numpy(), want)
        np.testing.assert_array_equal(vdev.Variable(x)[m].numpy(), want)


def test_row_major_order_and_empty_results():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m = np.array([[False, True, False], [True, False, True]])
    got = vdev.boolean_mask(x, m)
    np.testing.assert_array_equal(got.numpy(), [x[0, 1], x[1, 0], x[1, 2]])
    for axis, mask in ((0, np.zeros(2, bool)), (1, np.zeros(3, bool)),
                       (1, np.zeros((3, 4), bool)), (0, np.zeros((2, 3, 4), bool))):
        got = vdev.boolean_mask(vdev.constant(x), mask, axis=axis)
        assert tuple(got.shape) == _numpy_mask(x, mask, axis).shape
        assert got.numpy().size == 0


def test_mask_forms():
    x = _values(np.random.default_rng(1), (4, 3), np.float32)
    want = x[[0, 2, 3]]
    masks = ([True, False, True, True], np.array([True, False, True, True]),
             np.array([1, 0, 5, -1]), np.array([0.5, 0.0, -2.0, np.nan]),
             vdev.constant([1, 0, 7, -3]), vdev.constant([1.0, 0.0, 0.25, -1.0]),
             (True, False, True, True))
    for m in masks:
        np.testing.assert_array_equal(vdev.boolean_mask(x, m).numpy(), want)
        np.testing.assert_array_equal(vdev.boolean_mask(vdev.constant(x), m).numpy(), want)
    # a 0-d int32 tensor as the axis, as TensorFlow takes one
    np.testing.assert_array_equal(
        vdev.boolean_mask(x, [False, True, True], axis=vdev.constant(1)).numpy(), x[:, 1:])
    # as a key, a numpy bool array is the mask (TensorFlow's _slice_helper)
    t = vdev.constant(x)
    np.testing.assert_array_equal(t[np.array([True, False, True, True])].numpy(), want)
    np.testing.assert_array_equal(t[x > 0].numpy(), x[x > 0])


def test_tensorflows_negative_axis_with_a_mask_of_two_dimensions():
    """TensorFlow gathers the reshaped tensor (rank 4 - 2 + 1 = 3) along
    axis -3, its axis 0, not the merged one: vdev does the same."""
    x = _values(np.random.default_rng(2), (2, 2, 3, 4), np.float32)
    m = np.zeros((2, 3), bool)
    m[0, :2] = True  # ids 0 and 1: within axis 0's 2 rows
    got = vdev.boolean_mask(x, m, axis=-3)
    np.testing.assert_array_equal(got.numpy(), x.reshape(2, 6, 4)[[0, 1]])
    m[1, 1] = True  # id 4
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.boolean_mask(x, m, axis=-3)
    assert str(e.value) == "indices[2] = 4 is not in [0, 2)"


SCALAR = "mask cannot be scalar."


@pytest.mark.parametrize("shape,mask,axis,msg", [
    ((3,), True, None, SCALAR),
    ((3,), np.array(False), None, SCALAR),
    ((3,), np.bool_(True), None, SCALAR),
    ((3,), 1, None, SCALAR),
    ((4, 2), np.ones(3, bool), None, "Shapes (4,) and (3,) are incompatible"),
    ((2, 3), np.ones((2, 4), bool), None, "Shapes (2, 3) and (2, 4) are incompatible"),
    ((2, 3), np.ones((3, 1), bool), 1, "Shapes (3,) and (3, 1) are incompatible"),
    ((2, 3), np.ones(3, bool), 2, "Shapes () and (3,) are incompatible"),
    ((2, 3), np.ones(3, bool), -1, "Shapes () and (3,) are incompatible"),
    ((2, 3), np.ones(2, bool), -5, "Shapes () and (2,) are incompatible"),
    ((), np.ones(1, bool), None, "Shapes () and (1,) are incompatible"),
    ((0,), np.ones(1, bool), None, "Shapes (0,) and (1,) are incompatible"),
], ids=repr)
def test_tensorflows_errors(shape, mask, axis, msg):
    x = vdev.constant(np.zeros(shape, np.float32))
    with pytest.raises(ValueError) as e:
        vdev.boolean_mask(x, mask, axis=axis)
    assert str(e.value) == msg


def test_a_mask_that_is_not_numbers_is_a_type_error():
    with pytest.raises(TypeError) as e:
        vdev.boolean_mask([1.0, 2.0], ["a", "b"])
    assert str(e.value) == ("vdev.boolean_mask's mask must hold booleans or numbers (a number "
                            "other than 0 is True, as TensorFlow's Where reads it), not "
                            "['a', 'b']")


BOOL_INSIDE = ("a Python bool inside an index (%r) is refused, as TensorFlow refuses it; a "
               "boolean mask is the whole key, a numpy array (x[np.array([True, False])]), "
               "or vdev.boolean_mask(x, mask)")
TF_TYPE = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
           "tf.int32/tf.int64 tensors are valid indices, got %r")


@pytest.mark.parametrize("key,err,msg", [
    (True, ValueError, SCALAR),
    (np.array(True), ValueError, SCALAR),
    ((True, 0), TypeError, BOOL_INSIDE % (True,)),
    ([True, False], TypeError, BOOL_INSIDE % (True,)),
    ((0, False), TypeError, BOOL_INSIDE % (False,)),
    (slice(True, None), TypeError, BOOL_INSIDE % (True,)),
    (np.bool_(False), TypeError, TF_TYPE % (np.bool_(False),)),
    ((0, np.array([True, False, True])), TypeError,
     TF_TYPE % (np.array([True, False, True]),)),
    (np.ones(4, bool), ValueError, "Shapes (3,) and (4,) are incompatible"),
], ids=repr)
def test_indexing_errors(key, err, msg):
    x = np.zeros((3, 3), np.float32)
    for t in (vdev.constant(x), vdev.Variable(x)):
        with pytest.raises(err) as e:
            t[key]
        assert str(e.value) == msg


@pytest.mark.parametrize("axis,mshape,how", [
    (0, (5,), "function"), (1, (3,), "function"), (0, (5, 3), "function"),
    (1, (3, 2), "function"), (-2, (3,), "function"), (0, (5, 3, 2), "function"),
    (0, (5,), "key"), (0, (5, 3), "key")])
def test_gradient_is_the_output_gradient_at_the_mask(axis, mshape, how):
    """The gradient of sum(mask(v) * w) is w at the mask's True positions,
    zeros elsewhere, bit for bit."""
    rng = np.random.default_rng(3)
    x = _values(rng, (5, 3, 2), np.float32)
    m = rng.random(mshape) < 0.5
    m.flat[0] = True
    ax = axis % 3
    w = _values(rng, _numpy_mask(x, m, ax).shape, np.float32)
    v = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        got = vdev.boolean_mask(v, m, axis=axis) if how == "function" else v[m]
        loss = vdev.reduce_sum(got * w)
    g = tape.gradient(loss, v)
    want = np.zeros_like(x)
    want[(slice(None),) * ax + (m,)] = w
    np.testing.assert_array_equal(g.numpy(), want)


def test_gradient_against_finite_differences():
    rng = np.random.default_rng(4)
    x = _values(rng, (3, 4), np.float32)
    m = np.array([[True, False, True, True], [False, False, True, False],
                  [True, True, False, True]])
    w = _values(rng, (int(m.sum()),), np.float32)

    def loss(t):
        return vdev.reduce_sum(vdev.tanh(vdev.boolean_mask(t, m) * 1.5) * w)
    v = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = loss(v)
    g = tape.gradient(y, v).numpy()
    eps = 1e-2
    for i in range(3):
        for j in range(4):
            a, b = x.copy(), x.copy()
            a[i, j] += eps
            b[i, j] -= eps
            fd = (float(loss(vdev.constant(a))) - float(loss(vdev.constant(b)))) / (2 * eps)
            assert abs(g[i, j] - fd) <= 2e-3 + 1e-2 * abs(fd)
            assert (g[i, j] == 0) == (not m[i, j])


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = _values(rng, (4, 3, 5), np.float32)
    m = rng.random((4, 3)) < 0.5
    w = _values(rng, x[m].shape, np.float32)
    v = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        out = v[m]
        loss = vdev.reduce_sum(vdev.square(out) * w)
    g = tape.gradient(loss, v)
    tx = torch.tensor(x, requires_grad=True)
    tout = tx[torch.tensor(m)]
    (tout.square() * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(out.numpy(), tout.detach().numpy())
    np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-6, atol=0)


def test_a_simulated_gpu_gives_the_cpus_bits(monkeypatch):
    monkeypatch.setenv("VDEV_SIM_GPUS", "2x1GiB")
    rng = np.random.default_rng(6)
    x = _values(rng, (3, 4, 5), np.float32)
    m = rng.random((4, 5)) < 0.4
    w = _values(rng, _numpy_mask(x, m, 1).shape, np.float32)
    out = {}
    for dev in ("CPU:0", "GPU:1"):
        with vdev.device(dev):
            v = vdev.Variable(x)
            mask = vdev.constant(m.astype(np.int32))  # the mask's tensor on the device too
            with vdev.GradientTape() as tape:
                got = vdev.boolean_mask(v, mask, axis=1)
                loss = vdev.reduce_sum(got * w)
            g = tape.gradient(loss, v)
        assert got.device.endswith(dev) and g.device.endswith(dev)
        out[dev] = (got.numpy().tobytes(), g.numpy().tobytes())
    assert out["CPU:0"] == out["GPU:1"]
    np.testing.assert_array_equal(np.frombuffer(out["CPU:0"][0], np.float32),
                                  _numpy_mask(x, m, 1).reshape(-1))


def test_the_result_is_where_the_tensor_lives():
    with vdev.device("GPU:2"):
        t = vdev.constant(_values(np.random.default_rng(8), (4, 2), np.float32))
    with vdev.device("GPU:1"):
        mask = vdev.constant([1, 0, 1, 1])
    assert vdev.boolean_mask(t, mask).device.endswith("GPU:2")
    assert t[np.array([True, True, False, False])].device.endswith("GPU:2")
    assert "boolean_mask" in vdev.__all__ and vdev.boolean_mask is vdev._masking.boolean_mask
