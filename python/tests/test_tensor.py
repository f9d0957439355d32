"""Tensors from Python: creation and conversion, .numpy(), .shape, .dtype,
.device, .cpu(), identity, device scopes, every op and operator (scalars on
either side), bad input (wrong types, shapes, unknown devices), handles
after vdev.shutdown(), and device memory given back when Python lets go."""
import gc

import numpy as np
import pytest

import vdev

LONG = "/job:localhost/replica:0/task:0"


def in_use(device):
    return vdev.config.experimental.get_memory_info(device)["current"]


# ---- creation and conversion ----

def test_constant_and_properties():
    t = vdev.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and t.shape.as_list() == [2, 3] and t.shape.rank == 2
    assert t.ndim == 2 and len(t) == 2
    assert t.dtype is vdev.float32 and t.dtype == "float32" and t.dtype == np.float32
    assert t.device == LONG + "/device:GPU:0"  # the default device
    a = t.numpy()
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    np.testing.assert_array_equal(a, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(np.asarray(t), a)
    assert "shape=(2, 3), dtype=float32" in repr(t)


def test_constant_dtypes():
    assert vdev.constant(3).dtype is vdev.int32  # Python ints: int32, as TensorFlow
    assert vdev.constant(3.5).dtype is vdev.float32
    assert vdev.constant(np.arange(4, dtype=np.int64)).dtype is vdev.int32
    assert vdev.constant(np.ones(3, dtype=np.float64)).dtype is vdev.float32
    s = vdev.constant(2.5)
    assert s.shape == () and isinstance(s.numpy(), np.float32) and float(s) == 2.5
    assert vdev.constant([1, 2], dtype=vdev.float32).dtype is vdev.float32
    assert vdev.constant([1, 2], dtype="float32").numpy().tolist() == [1.0, 2.0]
    np.testing.assert_array_equal(vdev.constant(7.0, shape=[2, 2]).numpy(), np.full((2, 2), 7))
    np.testing.assert_array_equal(vdev.constant([1, 2, 3, 4], shape=(2, 2)).numpy(),
                                  [[1, 2], [3, 4]])
    e = vdev.constant(np.zeros((0, 3), np.float32))
    assert e.shape == (0, 3) and e.numpy().shape == (0, 3)


def test_conversion_errors():
    with pytest.raises(TypeError) as e:
        vdev.constant("text")
    assert str(e.value) == "vdev tensors are float32, int32 or bool; cannot convert 'text'"
    assert vdev.constant([True, False]).dtype is vdev.bool  # TensorFlow's tf.bool
    with pytest.raises(TypeError) as e:
        vdev.constant(np.ones(2, np.complex64))
    assert "cannot convert" in str(e.value)
    # Dates and durations are refused too, not read as their numbers (two
    # timestamps a second apart would become one float32, and units be lost).
    for arr in (np.array(["2024-05-01T12:00:01", "2024-05-01T12:00:02"], "datetime64[s]"),
                np.array([1, 2], "timedelta64[ms]")):
        with pytest.raises(TypeError) as e:
            vdev.constant(arr)
        assert str(e.value) == ("vdev tensors are float32, int32 or bool; cannot convert %r (%s)"
                                % (arr, arr.dtype))
        with pytest.raises(TypeError):
            vdev.Variable(arr)
    with pytest.raises(TypeError) as e:
        vdev.constant([1.5], dtype=vdev.int32)
    assert str(e.value) == "Cannot convert [1.5] to EagerTensor of dtype int32"
    with pytest.raises(TypeError) as e:
        vdev.constant([1.0], dtype="float64")
    assert str(e.value) == "vdev tensors are float32, int32 or bool, not 'float64'"
    with pytest.raises(ValueError) as e:
        vdev.constant(np.array([2**40]))
    assert "outside [-2147483648, 2147483647]" in str(e.value)
    with pytest.raises(ValueError) as e:
        vdev.constant(np.zeros((1, 1, 1, 1, 1)))
    assert str(e.value) == "vdev tensors have 0 to 4 dimensions, not 5"
    with pytest.raises(TypeError) as e:
        vdev.constant([1, 2, 3], shape=[2, 2])
    assert "has 3 elements, but got `shape` (2, 2) with 4 elements" in str(e.value)
    with pytest.raises(ValueError) as e:
        vdev.convert_to_tensor(vdev.constant([1]), dtype=vdev.float32)
    assert str(e.value) == "Tensor conversion requested dtype float32 for Tensor with dtype int32"
    with pytest.raises(TypeError):
        vdev.zeros("abc")


def test_creation():
    np.testing.assert_array_equal(vdev.zeros([2, 2]).numpy(), np.zeros((2, 2)))
    np.testing.assert_array_equal(vdev.ones([3], vdev.int32).numpy(), [1, 1, 1])
    f = vdev.fill([2], 7)
    assert f.dtype is vdev.int32 and f.numpy().tolist() == [7, 7]
    assert vdev.fill([2], 0.5).numpy().tolist() == [0.5, 0.5]
    assert vdev.zeros_like(f).numpy().tolist() == [0, 0]
    assert vdev.ones_like(vdev.constant([1.0, 2.0])).numpy().tolist() == [1.0, 1.0]
    u = vdev.random.uniform([1000], -1, 1, seed=3)
    a = u.numpy()
    assert a.min() >= -1 and a.max() < 1 and abs(a.mean()) < 0.1
    np.testing.assert_array_equal(a, vdev.random.uniform([1000], -1, 1, seed=3).numpy())
    with vdev.device("GPU:2"):  # the same numbers on every device
        np.testing.assert_array_equal(a, vdev.random.uniform([1000], -1, 1, seed=3).numpy())
    n = vdev.random.normal([4000], 2.0, 0.5, seed=1).numpy()
    assert abs(n.mean() - 2.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    vdev.random.set_seed(5)
    x = vdev.random.uniform([8]).numpy()
    vdev.random.set_seed(5)
    np.testing.assert_array_equal(x, vdev.random.uniform([8]).numpy())
    with pytest.raises(TypeError):
        vdev.random.uniform([2], dtype=vdev.int32)
    # a NaN or infinite argument is named (vdev's check), not compared
    nan, inf = float("nan"), float("inf")
    for draw, said in [(lambda: vdev.random.uniform([2], minval=nan, seed=1),
                        "vdev_tensor_uniform: lo is NaN"),
                       (lambda: vdev.random.uniform([2], maxval=inf, seed=1),
                        "vdev_tensor_uniform: hi is inf"),
                       (lambda: vdev.random.normal([2], stddev=nan, seed=1),
                        "vdev_tensor_normal: stddev is NaN"),
                       (lambda: vdev.random.normal([2], mean=-inf, seed=1),
                        "vdev_tensor_normal: mean is -inf")]:
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            draw()
        assert str(e.value) == said + ", not a finite number"


# ---- devices ----

def test_device_scopes_cpu_and_identity():
    with vdev.device("/device:GPU:1"):
        a = vdev.constant([1.0, 2.0])
        with vdev.device("/gpu:2"):
            b = vdev.constant([3.0])
        with vdev.device("GPU"):  # no index: the enclosing scope's
            c = vdev.constant([0.0])
    assert a.device == LONG + "/device:GPU:1"
    assert b.device == LONG + "/device:GPU:2"
    assert c.device == LONG + "/device:GPU:1"
    h = a.cpu()
    assert h.device == LONG + "/device:CPU:0" and h.numpy().tolist() == [1.0, 2.0]
    assert a.gpu(2).device == LONG + "/device:GPU:2"
    with vdev.device(LONG + "/device:GPU:0"):
        i = vdev.identity(a)  # the explicit copy between devices
    assert i.device == LONG + "/device:GPU:0" and i.numpy().tolist() == [1.0, 2.0]
    assert vdev.placement.bytes_copied("GPU:1", "GPU:0") == 8
    # unscoped ops follow their inputs
    assert (a * 2).device == LONG + "/device:GPU:1"
    assert vdev.identity(a).device == LONG + "/device:GPU:1"


def test_device_scope_errors():
    with pytest.raises(ValueError) as e:
        vdev.device(1)
    assert str(e.value) == "Expecting a string device name. Got <class 'int'>(1)"
    with pytest.raises(ValueError) as e:
        with vdev.device("GPU:x"):
            pass
    assert str(e.value) == ("Bad device index 'x' in the device spec: 'GPU:x' (expected a whole "
                            "number such as 0 or 1)")
    with pytest.raises(RuntimeError) as e:
        with vdev.device("GPU:3"):
            pass
    assert str(e.value) == LONG + "/device:GPU:3 unknown device (there are 3 logical GPUs)"
    # a failed scope leaves the stack as it was
    assert vdev.constant(1.0).device == LONG + "/device:GPU:0"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.constant([1.0])._copy_to("TPU:0")
    assert str(e.value).startswith("Failed parsing device name: 'TPU:0'")


# ---- ops ----

def test_ops_and_operators():
    a = vdev.constant([[1.0, 2.0], [3.0, 4.0]])
    b = vdev.constant([[0.5, -1.0], [2.0, 0.25]])
    na, nb = a.numpy(), b.numpy()
    np.testing.assert_allclose((a @ b).numpy(), na @ nb)
    np.testing.assert_allclose(vdev.matmul(a, b, transpose_a=True).numpy(), na.T @ nb)
    np.testing.assert_allclose(vdev.matmul(a, b, transpose_b=True).numpy(), na @ nb.T)
    np.testing.assert_array_equal((a + b).numpy(), na + nb)
    np.testing.assert_array_equal((a - b).numpy(), na - nb)
    np.testing.assert_array_equal((a * b).numpy(), na * nb)
    np.testing.assert_array_equal((a / b).numpy(), na / nb)
    np.testing.assert_array_equal((-a).numpy(), -na)
    # scalars on either side, computed as numpy does in float32
    f = np.float32
    np.testing.assert_array_equal((a + 1).numpy(), na + f(1))
    np.testing.assert_array_equal((1 + a).numpy(), f(1) + na)
    np.testing.assert_array_equal((a - 0.5).numpy(), na - f(0.5))
    np.testing.assert_array_equal((10 - a).numpy(), f(10) - na)
    np.testing.assert_array_equal((a * 3).numpy(), na * f(3))
    np.testing.assert_array_equal((3 * a).numpy(), f(3) * na)
    np.testing.assert_array_equal((a / 3).numpy(), na / f(3))  # a division, not * (1/3)
    np.testing.assert_array_equal((1 / a).numpy(), f(1) / na)
    np.testing.assert_allclose((a ** 2).numpy(), na ** 2)
    # row broadcast, numpy operands
    row = np.array([10.0, 20.0], np.float32)
    np.testing.assert_array_equal((a + row).numpy(), na + row)
    np.testing.assert_array_equal(vdev.add([[1.0, 2.0]], [[3.0, 4.0]]).numpy(), [[4.0, 6.0]])
    np.testing.assert_array_equal(vdev.subtract(a, b).numpy(), na - nb)
    np.testing.assert_array_equal(vdev.multiply(a, b).numpy(), na * nb)
    np.testing.assert_array_equal(vdev.divide(a, b).numpy(), na / nb)
    np.testing.assert_array_equal(vdev.negative(a).numpy(), -na)
    np.testing.assert_array_equal(vdev.square(a).numpy(), na * na)
    np.testing.assert_allclose(vdev.sqrt(a).numpy(), np.sqrt(na), rtol=1e-6)
    np.testing.assert_allclose(vdev.pow(a, 3).numpy(), na ** 3, rtol=1e-6)


def test_unary_reductions_shapes():
    x = vdev.constant([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]])
    nx = x.numpy()
    np.testing.assert_array_equal(vdev.nn.relu(x).numpy(), np.maximum(nx, 0))
    np.testing.assert_allclose(vdev.tanh(x).numpy(), np.tanh(nx), rtol=1e-6)
    np.testing.assert_allclose(vdev.math.tanh(x).numpy(), np.tanh(nx), rtol=1e-6)
    np.testing.assert_allclose(vdev.sigmoid(x).numpy(), 1 / (1 + np.exp(-nx)), rtol=1e-6)
    np.testing.assert_allclose(vdev.nn.sigmoid(x).numpy(), 1 / (1 + np.exp(-nx)), rtol=1e-6)
    np.testing.assert_allclose(vdev.exp(x).numpy(), np.exp(nx), rtol=1e-6)
    np.testing.assert_allclose(vdev.log(vdev.exp(x)).numpy(), nx, atol=1e-6)
    sm = np.exp(nx) / np.exp(nx).sum(-1, keepdims=True)
    np.testing.assert_allclose(vdev.nn.softmax(x).numpy(), sm, rtol=1e-6)
    np.testing.assert_allclose(vdev.nn.log_softmax(x).numpy(), np.log(sm), rtol=1e-5)
    np.testing.assert_allclose(vdev.reduce_sum(x).numpy(), nx.sum())
    np.testing.assert_allclose(vdev.reduce_sum(x, axis=0).numpy(), nx.sum(0))
    np.testing.assert_allclose(vdev.reduce_sum(x, axis=1, keepdims=True).numpy(),
                               nx.sum(1, keepdims=True))
    assert vdev.reduce_sum(x, keepdims=True).shape == (1, 1)
    np.testing.assert_allclose(vdev.reduce_mean(x, axis=-1).numpy(), nx.mean(-1), rtol=1e-6)
    np.testing.assert_allclose(vdev.reduce_mean(x, [0]).numpy(), nx.mean(0), rtol=1e-6)
    np.testing.assert_allclose(vdev.math.reduce_mean(x).numpy(), nx.mean(), rtol=1e-6)
    assert vdev.reshape(x, [3, -1]).shape == (3, 2)
    np.testing.assert_array_equal(vdev.transpose(x).numpy(), nx.T)
    am = vdev.argmax(x, axis=-1)
    assert am.dtype is vdev.int32 and am.numpy().tolist() == [2, 0]
    assert vdev.argmax([1.0, 5.0, 2.0]).numpy() == 1


def test_op_errors():
    a = vdev.constant([[1.0, 2.0]])
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        a @ a
    assert str(e.value) == "MatMul: Matrix size-incompatible: In[0]: [1,2], In[1]: [1,2]"
    assert e.value.status == "VDEV_ERR_SHAPE"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.constant([1, 2]) + vdev.constant([1.0, 2.0])
    # int32 arithmetic exists: input 0's dtype is the one input 1 must have
    assert str(e.value) == "AddV2: input #1 (shape [2]) is float, expected int32"
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(TypeError) as e:
        vdev.pow(a, a)
    assert str(e.value).startswith("vdev.pow takes a scalar exponent")
    with pytest.raises(ValueError) as e:
        vdev.nn.softmax(a, axis=0)
    assert str(e.value) == "vdev's softmax runs over the last axis (axis=-1 or None), not axis 0"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.reduce_sum(a, axis=[1, -1])
    assert str(e.value) == ("Invalid reduction arguments: Axes contains duplicate dimension: 1")
    with pytest.raises(TypeError):
        vdev.reduce_sum(a, axis="0")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.transpose(a, perm=[0, 1, 2])
    assert str(e.value) == ("transpose expects a vector of size 2. But input(1) is a vector of "
                            "size 3")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.argmax(a, axis=2)
    assert str(e.value) == "Expected dimension in the range [-2, 2), but got 2"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.reshape(a, [3])
    assert e.value.status == "VDEV_ERR_SHAPE"
    with pytest.raises(ValueError) as e:
        bool(a)
    assert "more than one element is ambiguous" in str(e.value)
    with pytest.raises(TypeError):
        len(vdev.constant(1.0))


def test_strict_placement_is_explicit_policy():
    with vdev.device("GPU:1"):
        a = vdev.constant([1.0])
    with vdev.device("GPU:2"):
        b = vdev.constant([1.0])
    vdev.placement.set_policy("strict")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        with vdev.device("GPU:2"):
            a + b
    # the advice in Python's words, not C's
    want = ("Tensors on conflicting devices: cannot compute AddV2 as input #0 was expected to be "
            "on {0}/device:GPU:2 but is actually on {0}/device:GPU:1 (operation running on "
            "{0}/device:GPU:2). Copy it explicitly with vdev.identity(x) under `with "
            "vdev.device(...)`, or x.cpu() / x.gpu(i), or use "
            "vdev.placement.set_policy('copy')").format(LONG)
    assert str(e.value) == want and e.value.message == want
    assert e.value.status == "VDEV_ERR_PLACEMENT"
    with vdev.device("GPU:2"):  # the advice works: identity is the explicit copy
        assert (vdev.identity(a) + b).numpy().tolist() == [2.0]
        assert (a.gpu(2) + b).numpy().tolist() == [2.0]
    with pytest.raises(ValueError):
        vdev.placement.set_policy("loose")
    vdev.placement.set_policy("copy")
    with vdev.device("GPU:2"):
        assert (a + b).numpy().tolist() == [2.0]


# ---- handles and memory ----

def test_tensors_free_their_memory():
    base = in_use("GPU:1")
    with vdev.device("GPU:1"):
        t = vdev.zeros([1024, 1024])
    assert in_use("GPU:1") == base + 4 << 20
    del t
    assert in_use("GPU:1") == base


def test_no_leak_over_1000_steps():
    with vdev.device("GPU:1"):
        model = vdev.models.MLP([16, 32, 4], seed=3)
        x = vdev.random.uniform([8, 16], -1, 1, seed=1)
        target = vdev.random.uniform([8, 4], -1, 1, seed=2)
    opt = vdev.optimizers.Adam()
    loss_fn = vdev.losses.MeanSquaredError()

    def step():
        with vdev.GradientTape() as tape:
            loss = loss_fn(target, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return float(loss)

    first = step()
    after_first = vdev.config.experimental.get_memory_info("GPU:1")
    for _ in range(999):
        last = step()
    after = vdev.config.experimental.get_memory_info("GPU:1")
    assert last < first / 2
    assert after["current"] == after_first["current"]
    assert after["num_allocs"] == after_first["num_allocs"]
    assert in_use("GPU:0") == 0 and in_use("GPU:2") == 0


def test_handles_after_shutdown():
    t = vdev.constant([1.0, 2.0])
    v = vdev.Variable([3.0])
    vdev.shutdown()
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        t.numpy()
    assert str(e.value) == ("vdev_tensor_ndim: the tensor belongs to a runtime that was shut down "
                            "(made before vdev_shutdown)")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        t + t
    assert str(e.value) == ("AddV2: input #0: the tensor belongs to a runtime that was shut down "
                            "(made before vdev_shutdown)")
    vdev.init()
    with pytest.raises(vdev.errors.InvalidArgumentError):
        v.assign([1.0])
    u = vdev.constant([5.0])
    del t, v  # frees only the slots: nothing of the new runtime
    gc.collect()
    assert u.numpy().tolist() == [5.0]
    assert in_use("GPU:0") == 256


def test_freed_tensor_object():
    t = vdev.constant([1.0])
    h = t._h
    t.__del__()  # frees once
    t.__del__()  # never twice
    with pytest.raises(ValueError) as e:
        t.numpy()
    assert str(e.value) == "the tensor was freed"
    # the handle itself is dead for vdev: a checked error, not a crash
    vdev._lib.lib.vdev_tensor_free(h)
    assert vdev.last_error() == "vdev_tensor_free: not a live tensor (freed already, or not a tensor)"


def test_threads_run_side_by_side():
    import threading
    results = {}

    def work(dev):
        with vdev.device(dev):
            a = vdev.random.uniform([64, 64], seed=1)
            s = 0.0
            for _ in range(50):
                s += float(vdev.reduce_sum(a @ a))
        results[dev] = s

    th = [threading.Thread(target=work, args=("GPU:%d" % i,)) for i in range(3)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert len(set(results.values())) == 1 and len(results) == 3


def test_python_number_protocols():
    assert int(vdev.constant([7])) == 7 and float(vdev.constant(2.5)) == 2.5
    assert [10, 20, 30][vdev.constant(1)] == 20  # __index__ of an int32 scalar
    with pytest.raises(AttributeError) as e:  # TensorFlow's: numpy's float32 has no __index__
        [1, 2][vdev.constant(1.0)]
    assert str(e.value) == "'numpy.float32' object has no attribute '__index__'"
    assert bool(vdev.constant([1.0])) and not bool(vdev.constant(0.0))
    assert str(vdev.constant([1.0])) == "vdev.Tensor([1.], shape=(1,), dtype=float32)"
    assert vdev.as_dtype(np.int32) is vdev.int32 and repr(vdev.float32) == "vdev.float32"
    assert vdev.float32.is_floating and vdev.int32.is_integer and vdev.float32.size == 4
    with pytest.raises(TypeError):
        vdev.as_dtype(object())
