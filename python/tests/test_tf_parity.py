"""Where the package follows TensorFlow more closely than it did: copies and
pickles of tensors, variables and models by value, reflected ``**``, numpy
integers wherever a whole number is taken, MiB sizes that do not fit 64 bits,
a single LogicalDeviceConfiguration, ``vdev.device(None)`` and
``vdev.device('')``, strict placement advice in Python's words, argmax over
any axis (axis=None: 0), the implicit sum of a non-scalar gradient target,
Keras's warning for variables without a gradient, std::pow's and
std::sqrt's special values, Keras's loss of an empty batch, Keras's ranks
for MeanSquaredError's operands ([N] targets against [N, 1] predictions are
one loss per row, under every reduction alike), and the Python
examples refusing bad options as ``vdev demo`` does."""
import copy
import gc
import logging
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import vdev

LONG = "/job:localhost/replica:0/task:0"


# ---- 1. copy, deepcopy and pickle ----

def test_deepcopy_tensor_is_independent():
    with vdev.device("GPU:1"):
        v = vdev.Variable([1.0, 2.0])
    view = vdev.reshape(v, [2, 1])  # a value, as TensorFlow's reshape of a variable
    c = copy.deepcopy(view)
    assert c is not view and c._h != view._h
    assert c.device == LONG + "/device:GPU:1" and c.dtype is vdev.float32
    v.assign([5.0, 6.0])
    assert view.numpy().tolist() == [[1.0], [2.0]]  # the value read, not the variable
    assert c.numpy().tolist() == [[1.0], [2.0]]
    del view
    gc.collect()
    assert c.numpy().tolist() == [[1.0], [2.0]]
    r = vdev.reshape(vdev.constant([1.0, 2.0]), [2, 1])
    d = copy.deepcopy(r)
    assert d._h != r._h and d.numpy().tolist() == [[1.0], [2.0]]
    del r
    gc.collect()
    assert d.numpy().tolist() == [[1.0], [2.0]]
    t = vdev.constant([1, 2])
    assert copy.copy(t) is t  # immutable: itself, as TensorFlow's EagerTensor
    d = copy.deepcopy(t)
    assert d.dtype is vdev.int32 and d.numpy().tolist() == [1, 2] and d._h != t._h


@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy])
def test_copy_variable_is_a_new_variable(copier):
    with vdev.device("GPU:2"):
        v = vdev.Variable([1.0, 2.0], trainable=False, name="w")
    c = copier(v)
    assert type(c) is vdev.Variable and c._h != v._h
    assert c.trainable is False and c.name == "w"
    assert c.device == LONG + "/device:GPU:2" and c.dtype is vdev.float32
    v.assign([3.0, 4.0])
    assert c.numpy().tolist() == [1.0, 2.0]
    c.assign_add([1.0, 1.0])
    assert v.numpy().tolist() == [3.0, 4.0]
    del v
    gc.collect()
    assert c.numpy().tolist() == [2.0, 3.0]
    with vdev.GradientTape() as tape:  # the copy is a variable tapes differentiate against
        tape.watch(c)  # not trainable: watched only when asked, as in TensorFlow
        loss = vdev.reduce_sum(c * c)
    assert tape.gradient(loss, c).numpy().tolist() == [4.0, 6.0]


def test_deepcopy_model_is_independent():
    with vdev.device("GPU:1"):
        m = vdev.models.MLP([4, 8, 2], seed=1)
    m2 = copy.deepcopy(m)
    x = np.ones((3, 4), np.float32)
    want = m(x).numpy()
    np.testing.assert_array_equal(m2(x).numpy(), want)
    assert m2.layers[0].kernel is m2.trainable_variables[0]  # one copy per variable
    assert all(a._h != b._h for a, b in zip(m.variables, m2.variables))
    assert all(b.device == LONG + "/device:GPU:1" for b in m2.variables)
    opt = vdev.optimizers.SGD(0.5)
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_mean(vdev.square(m(x)))
    opt.apply_gradients(zip(tape.gradient(loss, m.trainable_variables), m.trainable_variables))
    assert not np.array_equal(m(x).numpy(), want)
    np.testing.assert_array_equal(m2(x).numpy(), want)  # training m left m2 alone
    del m, opt, tape, loss
    gc.collect()
    np.testing.assert_array_equal(m2(x).numpy(), want)


def test_pickle_by_value():
    with vdev.device("GPU:2"):
        t = vdev.constant([[1.0, 2.0]])
        v = vdev.Variable([3, 4], trainable=False, name="counts")
        m = vdev.models.MLP([4, 8, 2], seed=2)
    t2 = pickle.loads(pickle.dumps(t))
    assert type(t2) is vdev.Tensor and t2._h != t._h
    assert t2.numpy().tolist() == [[1.0, 2.0]] and t2.device == LONG + "/device:GPU:2"
    v2 = pickle.loads(pickle.dumps(v))
    assert type(v2) is vdev.Variable and v2.dtype is vdev.int32
    assert v2.numpy().tolist() == [3, 4] and v2.trainable is False and v2.name == "counts"
    assert v2.device == LONG + "/device:GPU:2"
    x = np.ones((2, 4), np.float32)
    m2 = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(m2(x).numpy(), m(x).numpy())
    assert m2.variables[0].device == LONG + "/device:GPU:2"
    s = pickle.loads(pickle.dumps(vdev.constant(2.5)))
    assert s.shape == () and float(s) == 2.5


def test_pickle_to_a_missing_device():
    with vdev.device("GPU:2"):
        data = pickle.dumps(vdev.constant([1.0]))
    vdev.shutdown()
    vdev.config.set_visible_devices(vdev.config.list_physical_devices("GPU")[:1], "GPU")
    with pytest.raises(RuntimeError) as e:
        pickle.loads(data)
    assert str(e.value) == LONG + "/device:GPU:2 unknown device (there is 1 logical GPU)"


def test_things_that_cannot_be_copied():
    opt = vdev.optimizers.Adam()
    for f in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError) as e:
            f(opt)
        assert str(e.value) == ("cannot copy or pickle a vdev optimizer (Adam): its state "
                                "(slots, step count) lives in vdev's C optimizer, which cannot "
                                "be copied; make a new one")
        with pytest.raises(TypeError) as e:
            f(vdev.GradientTape())
        assert str(e.value) == ("cannot copy or pickle a vdev.GradientTape: it holds vdev's "
                                "recording")


def test_copies_of_mirrored_variables():
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        v = vdev.Variable([1.0, 2.0], name="mv")
    c = copy.deepcopy(v)
    assert type(c) is type(v) and c._strategy is strategy
    assert [r.device for r in c.values] == [r.device for r in v.values]
    v.assign([7.0, 8.0])
    assert [r.numpy().tolist() for r in c.values] == [[1.0, 2.0], [1.0, 2.0]]
    r = copy.deepcopy(v.values[1])  # one replica's copy: a variable of its own
    assert type(r) is vdev.Variable and r.device == LONG + "/device:GPU:1"
    assert r.numpy().tolist() == [7.0, 8.0]
    assert copy.deepcopy(strategy) is strategy
    with pytest.raises(TypeError):
        pickle.dumps(strategy)
    p = pickle.loads(pickle.dumps(v))  # outside any strategy: a plain variable
    assert type(p) is vdev.Variable and p.numpy().tolist() == [7.0, 8.0] and p.name == "mv"
    with strategy.scope():
        q = pickle.loads(pickle.dumps(v))
    assert type(q) is type(v) and [x.numpy().tolist() for x in q.values] == [[7.0, 8.0]] * 2


# ---- 2. MiB sizes beyond 64 bits ----

@pytest.mark.parametrize("field", ["memory_limit", "memory_floor"])
def test_mib_beyond_64_bits(field):
    L = vdev.config.LogicalDeviceConfiguration
    gpu = vdev.config.list_physical_devices("GPU")[0]
    kw = {"memory_limit": 1024} if field == "memory_floor" else {}
    for mib in (2**44, 2**44 + 1, 2**60):
        kw[field] = mib
        with pytest.raises(ValueError) as e:
            vdev.config.set_logical_device_configuration(gpu, [L(**kw)])
        assert str(e.value) == "%s must be below 2**64 bytes: %d MiB is %d bytes" % (
            field, mib, mib << 20)
    assert vdev.config.get_logical_device_configuration(gpu) is None  # nothing was set
    with pytest.raises(ValueError) as e:
        vdev.config.set_logical_device_configuration(gpu, [L(memory_limit=float("inf"))])
    assert str(e.value) == "memory_limit must be a number of MiB >= 0, not inf"


# ---- 3. reflected operators ----

def test_reflected_operators():
    a = vdev.constant([1.0, 2.0, 3.0])
    na = a.numpy()
    np.testing.assert_allclose((2 ** a).numpy(), 2.0 ** na, rtol=1e-6)
    np.testing.assert_allclose((0.5 ** a).numpy(), 0.5 ** na, rtol=1e-6)
    np.testing.assert_allclose((np.float32(3) ** a).numpy(), 3.0 ** na, rtol=1e-6)
    np.testing.assert_array_equal((1 ** a).numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal((1 + a).numpy(), 1 + na)
    np.testing.assert_array_equal((1 - a).numpy(), 1 - na)
    np.testing.assert_array_equal((2 * a).numpy(), 2 * na)
    np.testing.assert_array_equal((1 / a).numpy(), np.float32(1) / na)
    m = vdev.constant([[1.0], [2.0]])
    np.testing.assert_array_equal(([[1.0, 2.0]] @ m).numpy(), [[5.0]])
    np.testing.assert_array_equal((np.array([[1.0, 2.0]], np.float32) @ m).numpy(), [[5.0]])
    np.testing.assert_array_equal(((-2) ** a).numpy(), [-2.0, 4.0, -8.0])
    w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(3 ** w)
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), np.log(3) * 3.0 ** np.array([1, 2]),
                               rtol=1e-5)


# ---- 4. variables without a gradient ----

def test_apply_gradients_skips_none_with_keras_warning(caplog):
    w = vdev.Variable([1.0], name="w")
    u = vdev.Variable([5.0], name="u")
    opt = vdev.optimizers.SGD(0.5)
    with caplog.at_level(logging.WARNING, logger="vdev"):
        opt.apply_gradients([(vdev.constant([2.0]), w), (None, u)])
    assert w.numpy().tolist() == [0.0] and u.numpy().tolist() == [5.0]
    assert [r.getMessage() for r in caplog.records] == [
        "Gradients do not exist for variables ['u'] when minimizing the loss."]


def test_unconnected_gradients_none_or_zero(caplog):
    w = vdev.Variable([1.0, 2.0], name="w")
    u = vdev.Variable([[5.0]], name="u")
    x = vdev.constant([3.0, 4.0])
    with vdev.GradientTape(persistent=True) as tape:
        y = vdev.reduce_sum(w * x)
    gw, gu = tape.gradient(y, [w, u])
    assert gw.numpy().tolist() == [3.0, 4.0] and gu is None
    gz = tape.gradient(y, [w, u], unconnected_gradients=vdev.UnconnectedGradients.ZERO)
    assert gz[1].numpy().tolist() == [[0.0]]
    assert tape.gradient(y, u, unconnected_gradients="zero").shape == (1, 1)
    assert tape.gradient(y, u, unconnected_gradients="none") is None
    with pytest.raises(ValueError) as e:
        tape.gradient(y, u, unconnected_gradients="zeros")
    assert str(e.value) == "Unknown value for unconnected_gradients: 'zeros'"
    # minimize: the unreached variable is skipped with Keras's warning
    opt = vdev.optimizers.SGD(0.5)
    with caplog.at_level(logging.WARNING, logger="vdev"):
        opt.minimize(lambda: vdev.reduce_sum(w * x), [w, u])
    assert w.numpy().tolist() == [-0.5, 0.0] and u.numpy().tolist() == [[5.0]]
    assert "Gradients do not exist for variables ['u'] when minimizing the loss." in \
        [r.getMessage() for r in caplog.records]


# ---- 5. one LogicalDeviceConfiguration instead of a list ----

def test_single_logical_device_configuration():
    L = vdev.config.LogicalDeviceConfiguration
    gpu = vdev.config.list_physical_devices("GPU")[0]
    with pytest.raises(TypeError) as e:
        vdev.config.set_logical_device_configuration(gpu, L(memory_limit=1024))
    assert str(e.value) == (
        "set_logical_device_configuration takes a list of LogicalDeviceConfiguration, not one: "
        "pass [LogicalDeviceConfiguration(memory_limit=1024, experimental_priority=None, "
        "experimental_device_ordinal=None, memory_floor=None, memory_priority=None)]")
    with pytest.raises(TypeError) as e:
        vdev.config.set_logical_device_configuration(gpu, [1024])
    assert str(e.value) == ("set_logical_device_configuration takes a list of "
                            "LogicalDeviceConfiguration; 1024 is not one")
    with pytest.raises(TypeError) as e:
        vdev.config.set_logical_device_configuration(gpu, 1024)
    assert str(e.value) == ("set_logical_device_configuration takes a list of "
                            "LogicalDeviceConfiguration, not 1024")
    vdev.config.set_logical_device_configuration(gpu, (L(memory_limit=1024),))  # a tuple is fine
    assert vdev.config.get_logical_device_configuration(gpu) == [L(memory_limit=1024)]


# ---- 6. numpy integers ----

def test_numpy_integers_are_whole_numbers():
    d = vdev.layers.Dense(np.int64(3), input_dim=np.int32(2), seed=np.uint8(4))
    assert d.units == 3 and type(d.units) is int and d.kernel.shape == (2, 3)
    ref = vdev.layers.Dense(3, input_dim=2, seed=4)
    np.testing.assert_array_equal(d.kernel.numpy(), ref.kernel.numpy())
    m = vdev.models.MLP([np.int64(4), np.int32(2)], seed=np.int64(1))
    np.testing.assert_array_equal(m.variables[0].numpy(),
                                  vdev.models.MLP([4, 2], seed=1).variables[0].numpy())
    assert vdev.constant([1.0, 2.0]).gpu(np.int64(2)).device == LONG + "/device:GPU:2"
    assert vdev.constant(1.0, shape=(np.int64(2),)).numpy().tolist() == [1.0, 1.0]
    vdev.random.set_seed(np.int64(7))
    for bad in (True, 3.0, 2.5, np.float32(3), "3"):
        with pytest.raises(ValueError) as e:
            vdev.layers.Dense(bad)
        assert str(e.value) == ("Received an invalid value for `units`, expected a positive "
                                "integer. Received: units=%r" % (bad,))
    for bad in (True, 2.0):
        with pytest.raises(TypeError) as e:
            vdev.models.MLP([4, bad])
        assert str(e.value) == "an MLP's sizes must be an integer, not %r" % (bad,)
        with pytest.raises(TypeError) as e:
            vdev.layers.Dense(3, input_dim=bad)
        assert str(e.value) == "input_dim must be an integer, not %r" % (bad,)
        with pytest.raises(TypeError) as e:
            vdev.random.uniform([2], seed=bad)
        assert str(e.value) == "seed must be an integer, not %r" % (bad,)
        with pytest.raises(TypeError) as e:
            vdev.constant([1.0]).gpu(bad)
        assert str(e.value) == "gpu_index must be an integer, not %r" % (bad,)
        with pytest.raises(TypeError) as e:
            vdev.constant(1.0, shape=(bad,))
        assert str(e.value) == "shape must be a sequence of ints, not (%r,)" % (bad,)


# ---- 7. vdev.device(None) and vdev.device('') ----

def test_device_none_clears_and_empty_keeps():
    cur = vdev._device.current_device
    with vdev.device("GPU:1"):
        with vdev.device(""):
            assert cur() == LONG + "/device:GPU:1"
            assert vdev.constant([1.0]).device == LONG + "/device:GPU:1"
        with vdev.device("GPU:2"):
            with vdev.device(None):
                assert cur() is None
                assert vdev.constant([1.0]).device == LONG + "/device:GPU:0"  # the default
                with vdev.device("GPU:1"):
                    x = vdev.constant([1.0])
                assert (x + 1).device == LONG + "/device:GPU:1"  # follows its input
                d = vdev.layers.Dense(2, input_dim=1)
                assert d.kernel.device == LONG + "/device:GPU:0"
            assert cur() == LONG + "/device:GPU:2"
            assert vdev.constant([1.0]).device == LONG + "/device:GPU:2"
        assert cur() == LONG + "/device:GPU:1"
    assert cur() is None
    with vdev.device(None):
        assert cur() is None
    with pytest.raises(ValueError) as e:
        vdev.device(1)
    assert str(e.value) == "Expecting a string device name. Got <class 'int'>(1)"


# ---- 9. argmax over any axis, axis=None meaning 0 ----

def test_argmax_any_axis():
    rng = np.random.default_rng(0)
    for shape in [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 5), (4, 1)]:
        x = rng.standard_normal(shape).astype(np.float32)
        for axis in [None] + list(range(-len(shape), len(shape))):
            got = vdev.argmax(x, axis=axis)
            want = np.argmax(x, axis=0 if axis is None else axis)
            assert got.dtype is vdev.int32 and got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), want)
    x = vdev.constant([[1.0, 9.0, 3.0], [4.0, 5.0, 6.0]])
    assert vdev.argmax(x).numpy().tolist() == [1, 0, 1]  # TensorFlow's axis 0
    assert vdev.math.argmax(x, 1).numpy().tolist() == [1, 2]
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.argmax(x, axis=2)
    assert str(e.value) == "Expected dimension in the range [-2, 2), but got 2"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.argmax(np.zeros((0, 3), np.float32))
    assert str(e.value) == "Reduction axis 0 is empty in shape [0,3]"
    # TensorFlow's words on every axis, the last one too, naming the axis as given
    for axis, want in [(1, 1), (-1, -1)]:
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            vdev.argmax(np.zeros((3, 0), np.float32), axis=axis)
        assert str(e.value) == "Reduction axis %d is empty in shape [3,0]" % want
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.argmax(np.zeros((2, 0, 4), np.float32), axis=-2)
    assert str(e.value) == "Reduction axis -2 is empty in shape [2,0,4]"
    # an empty axis that is not reduced gives an empty result, as in TensorFlow
    assert vdev.argmax(np.zeros((0, 3), np.float32), axis=1).shape.as_list() == [0]
    assert vdev.argmax(np.zeros((3, 0), np.float32), axis=0).shape.as_list() == [0]


# ---- 10. a non-scalar target is summed ----

def test_gradient_of_non_scalar_target_is_summed():
    w = vdev.Variable([[1.0, 2.0], [3.0, 4.0]])
    x = vdev.constant([[1.0, -1.0], [0.5, 2.0]])
    with vdev.GradientTape() as tape:
        y = w * w * x  # [2, 2]
        g = tape.gradient(y, w)
    np.testing.assert_allclose(g.numpy(), 2 * w.numpy() * x.numpy())
    with vdev.GradientTape(persistent=True) as tape:
        y = vdev.matmul(x, w)
        gs = tape.gradient(y, [w])
    with vdev.GradientTape() as tape2:
        s = vdev.reduce_sum(vdev.matmul(x, w))
    np.testing.assert_allclose(gs[0].numpy(), tape2.gradient(s, w).numpy())
    # after the block too (the tape seeds ones of the target's shape)
    with vdev.GradientTape() as tape:
        y = w * 3.0
    assert tape.gradient(y, w).numpy().tolist() == [[3.0, 3.0], [3.0, 3.0]]
    with vdev.GradientTape() as tape:
        w * 1.0
    li = vdev.constant([1, 2])
    assert tape.gradient(li, w) is None  # as TensorFlow: a warning, and no gradient


# ---- Keras's label shapes for the sparse cross-entropy ----

def test_sparse_crossentropy_takes_keras_label_shapes():
    loss = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
    logits = vdev.constant([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0]])
    want = loss(np.array([0, 2], np.int32), logits).numpy()
    for labels in ([[0], [2]], np.array([[0], [2]], np.int32), np.array([0.0, 2.0], np.float32),
                   vdev.constant([[0.0], [2.0]]), vdev.constant(np.array([[0], [2]], np.int32))):
        assert loss(labels, logits).numpy() == want


# ---- std::pow and std::sqrt: special values and gradients ----

INF, NAN = np.inf, np.nan
# Exponents: infinities, NaN, signed zeros, the smallest subnormals, halves,
# odd and even whole numbers (2^24 + 2 even, 1e30 even), either sign.
EXPONENTS = np.array([-INF, -1e30, -3, -2.5, -2, -1, -0.5, -1e-45, -0.0, 0.0, 1e-45, 0.5, 1,
                      2, 2.5, 3, 16777218, 1e30, INF, NAN], np.float32)


def _same(got, want):
    """Equal as floats, NaN equal to NaN, and zeros of the same sign."""
    np.testing.assert_array_equal(got, want)
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


@pytest.mark.parametrize("base", [1, 1.0, -1, 0.0, -0.0, 2, 0.5, 3.0, -2, -0.5, -3.0, INF, -INF,
                                  NAN, 1e-50, 1e40, np.float32(0.1)])
def test_number_to_tensor_power_is_std_pow(base):
    """number ** tensor gives TensorFlow's Pow (std::pow, as numpy's float32
    power) for every special value: exactly where the result is 0, 1, inf or
    NaN or the exponent special, within float roundings elsewhere. The
    gradient is TensorFlow's, grad * x**t * log(x) (log(x) taken as 0 for
    x <= 0), wherever that is a number (base inf: where t >= 0)."""
    t = vdev.constant(EXPONENTS)
    got = (base ** t).numpy()
    with np.errstate(all="ignore"):
        b = np.float32(base)
        want = np.power(b, EXPONENTS)
    exact = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1) | ~np.isfinite(EXPONENTS) | (
        EXPONENTS == 0)
    _same(got[exact], want[exact])
    np.testing.assert_allclose(got, want, rtol=4e-6)
    np.testing.assert_array_equal(vdev.pow(base, t).numpy(), got)
    w = vdev.Variable(EXPONENTS)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(base ** w)
    g = tape.gradient(y, w).numpy()
    with np.errstate(all="ignore"):
        tf_grad = want * (np.log(b) if b > 0 else np.float32(0))
    defined = ~np.isnan(tf_grad)
    np.testing.assert_allclose(g[defined], tf_grad[defined], rtol=1e-5)
    if not b == INF:  # base inf: 0 for t < 0, where TensorFlow's is NaN
        np.testing.assert_array_equal(np.isnan(g), ~defined)


def test_power_of_one_and_of_a_negative_base():
    """The cases of the report: 1 ** [inf, nan, 2] is [1, 1, 1] as std::pow
    gives (not exp(t * log 1), which is NaN at inf and NaN), and a negative
    base takes whole exponents; on the exponent's device."""
    with vdev.device("GPU:1"):
        t = vdev.constant([INF, NAN, 2.0])
        u = vdev.constant([3.0, 0.5, -2.0])
    r = 1 ** t
    assert r.device == LONG + "/device:GPU:1"
    np.testing.assert_array_equal(r.numpy(), [1.0, 1.0, 1.0])
    r = (-2) ** u
    assert r.device == LONG + "/device:GPU:1"
    np.testing.assert_array_equal(r.numpy(), [-8.0, NAN, 0.25])
    np.testing.assert_array_equal((0 ** u).numpy(), [0.0, 0.0, INF])
    np.testing.assert_array_equal((INF ** vdev.constant([0.0, -0.0])).numpy(), [1.0, 1.0])
    with pytest.raises(vdev.errors.InvalidArgumentError):
        (-2) ** vdev.constant([1, 2])  # int32, as every vdev op


def test_sqrt_is_std_sqrt_with_torchs_gradient():
    """vdev.sqrt is the Sqrt op (std::sqrt: NaN at -inf, -0 at -0), not
    pow(x, 0.5) (inf at -inf, +0 at -0); its gradient 0.5 * grad / sqrt(x)
    is torch's, -inf at -0 included."""
    torch = pytest.importorskip("torch")
    x = np.array([-INF, -1.0, -0.0, 0.0, 1e-45, 0.25, 2.0, 3.0, 1e30, INF, NAN], np.float32)
    got = vdev.sqrt(vdev.constant(x)).numpy()
    with np.errstate(invalid="ignore"):
        want = np.sqrt(x)
    _same(got, want)
    assert vdev.math.sqrt is vdev.sqrt
    tx = torch.tensor(x, requires_grad=True)
    torch.sqrt(tx).sum().backward()
    _same(got, torch.sqrt(torch.tensor(x)).numpy())
    w = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(vdev.sqrt(w))
    g = tape.gradient(y, w).numpy()
    _same(g, tx.grad.numpy())


# ---- Keras's losses of an empty batch ----

def test_losses_of_an_empty_batch():
    """Keras's reduction sum_over_batch_size divides with divide_no_nan: the
    loss of an empty batch is 0 (not the NaN of a mean over nothing), and
    its gradient 0; reduction 'none' gives an empty tensor."""
    L = vdev.losses
    w = vdev.Variable(np.ones((2, 3), np.float32))
    x = vdev.constant(np.zeros((0, 2), np.float32))
    y = vdev.constant(np.zeros((0, 3), np.float32))
    losses = [L.MeanSquaredError(), L.MeanSquaredError(reduction="sum_over_batch_size"),
              L.CategoricalCrossentropy(from_logits=True),
              L.CategoricalCrossentropy(from_logits=True, reduction="sum_over_batch_size")]
    for loss in losses:
        with vdev.GradientTape() as tape:
            v = loss(y, vdev.matmul(x, w))
        assert v.shape == () and v.numpy() == 0.0, loss
        np.testing.assert_array_equal(tape.gradient(v, w).numpy(), np.zeros((2, 3)))
    one = vdev.constant(np.zeros((0, 1), np.float32))
    assert L.CategoricalCrossentropy(from_logits=True)(one, one).numpy() == 0.0
    assert L.MeanSquaredError()(one, one).numpy() == 0.0
    for loss in (L.MeanSquaredError(reduction="none"),
                 L.CategoricalCrossentropy(from_logits=True, reduction="none")):
        v = loss(y, y)
        assert v.shape == (0,) and v.numpy().shape == (0,) and v.dtype is vdev.float32
    sparse = L.SparseCategoricalCrossentropy(from_logits=True)
    for labels in (np.zeros((0,), np.int32), np.zeros((0, 1), np.float32), [],
                   vdev.constant(np.zeros((0,), np.int32))):
        assert sparse(labels, y).numpy() == 0.0


def test_categorical_crossentropy_needs_one_shape_as_keras():
    """tf.keras's categorical cross-entropy asserts that the labels' shape is
    the logits': [C] labels against [N, C] logits are refused with
    TensorShape's words, in every reduction (they were broadcast, one label
    row for every example); equal shapes give the loss."""
    L = vdev.losses
    logits = vdev.constant([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    for reduction in ("auto", "none", "sum_over_batch_size"):
        cce = L.CategoricalCrossentropy(from_logits=True, reduction=reduction)
        for labels, shape in ((np.array([0, 1, 0], np.float32), "(3,)"),
                              (np.ones((2, 1), np.float32), "(2, 1)"),
                              (np.ones((1, 2, 3), np.float32), "(1, 2, 3)")):
            with pytest.raises(ValueError) as e:
                cce(labels, logits)
            assert str(e.value) == "Shapes %s and (2, 3) are incompatible" % shape
    got = L.CategoricalCrossentropy(from_logits=True)(
        np.array([[0, 1, 0], [1, 0, 0]], np.float32), logits).numpy()
    want = np.mean([np.log(np.exp([1, 2, 3]).sum()) - 2, np.log(np.exp([1, 2, 3]).sum()) - 1])
    assert abs(got - want) < 1e-6


# ---- Keras's ranks for MeanSquaredError's operands ----

def test_mse_brings_operands_to_one_rank_as_keras():
    """Keras adds or drops a trailing 1 so that y_true and y_pred have one
    rank before the loss: [N] targets against [N, 1] predictions compare
    row by row (not [N, N] by broadcasting), and 'none' and 'auto' accept
    and refuse the same pairs."""
    L = vdev.losses
    none, auto = L.MeanSquaredError(reduction="none"), L.MeanSquaredError()
    col = vdev.constant([[1.0], [2.0], [3.0]])
    for y_true, y_pred in (([1.0, 2.0, 3.0], col), (col, vdev.constant([1.0, 2.0, 3.0])),
                           (np.array([1, 2, 3]), col)):
        v = none(y_true, y_pred)
        assert v.shape == (3,) and v.numpy().tolist() == [0.0, 0.0, 0.0]
        assert auto(y_true, y_pred).numpy() == 0.0
    assert none([1.0, 2.0, 3.0], vdev.constant([[1.0], [4.0], [3.0]])).numpy().tolist() == \
        [0.0, 4.0, 0.0]
    # the reshaped prediction keeps its gradient: d/dp mean((p - t)^2) = 2(p - t)/N
    p = vdev.Variable([1.0, 4.0, 3.0])
    with vdev.GradientTape() as tape:
        v = auto(np.array([[1.0], [2.0], [3.0]], np.float32), p)
    assert float(v) == pytest.approx(4 / 3)
    np.testing.assert_allclose(tape.gradient(v, p).numpy(), [0.0, 4 / 3, 0.0], rtol=1e-6)
    # [N, 1] targets against [N, 4] predictions broadcast in both, as Keras's
    t = np.array([[0.0], [1.0]], np.float32)
    p4 = vdev.constant(np.arange(8, dtype=np.float32).reshape(2, 4))
    want = ((np.arange(8).reshape(2, 4) - t) ** 2).mean(axis=1)
    np.testing.assert_allclose(none(t, p4).numpy(), want, rtol=1e-6)
    assert float(auto(t, p4)) == pytest.approx(want.mean())
    # [N, 3, 1] against [N, 3]: the larger loses its trailing 1
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert none(a[:, :, None], vdev.constant(a)).numpy().tolist() == [0.0, 0.0]
    assert auto(a, vdev.constant(a[:, :, None])).numpy() == 0.0
    # a 0-d pair is its own loss in both
    assert none(1.0, vdev.constant(3.0)).numpy() == 4.0 and \
        auto(1.0, vdev.constant(3.0)).numpy() == 4.0
    # an empty batch that broadcasts: 'none' is empty, 'auto' 0
    e = vdev.constant(np.zeros((0, 4), np.float32))
    assert none(np.zeros((0, 1), np.float32), e).shape == (0,)
    assert auto(np.zeros((0, 1), np.float32), e).numpy() == 0.0
    # what still does not broadcast: one error for both reductions
    for y_true, y_pred, shapes in ((np.zeros((2, 3)), np.zeros((2, 4)), "[2,4] and [2,3]"),
                                   (np.zeros(3), np.zeros((3, 4)), "[3,4] and [3]"),
                                   (np.zeros(3), np.zeros((4, 1)), "[4,1] and [3]")):
        for loss in (none, auto):
            with pytest.raises(vdev.errors.InvalidArgumentError) as e:
                loss(y_true, vdev.constant(y_pred.astype(np.float32)))
            assert str(e.value) == (
                "MeanSquaredError: incompatible shapes " + shapes + " (prediction and target "
                "must broadcast, once a trailing 1 is added or dropped to match their ranks)")


# ---- the Python examples take options as `vdev demo` does ----

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _example(name, *opts):
    return subprocess.run([sys.executable, os.path.join(SRC, "examples", "python", name)]
                          + list(opts), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name,opts,message", [
    ("three_models.py", ["--epochs", "0"], "--epochs takes a whole number from 1 to 1000000, "
                                           "not '0'"),
    ("three_models.py", ["--steps", "-1"], "--steps takes a whole number from 1 to 1000000, "
                                           "not '-1'"),
    ("three_models.py", ["--batch", "0"], "--batch takes a whole number from 1 to 1048576, "
                                          "not '0'"),
    ("three_models.py", ["--batch", "1048577"], "--batch takes a whole number from 1 to "
                                                "1048576, not '1048577'"),
    ("three_models.py", ["--seed", "-1"], "--seed takes a whole number from 0 to 1000000000, "
                                          "not '-1'"),
    ("three_models.py", ["--steps", "2x"], "--steps takes a whole number from 1 to 1000000, "
                                           "not '2x'"),
    ("three_models.py", ["--vdev-placement"], "--vdev-placement goes with --tf-placement"),
    ("mirrored.py", ["--steps", "0"], "--steps takes a whole number from 1 to 1000000, not '0'"),
    ("mirrored.py", ["--epochs", "0"], "--epochs takes a whole number from 1 to 1000000, "
                                       "not '0'"),
    ("mirrored.py", ["--batch", "-3"], "--batch takes a whole number from 1 to 1048576, "
                                       "not '-3'"),
    ("mirrored.py", ["--seed", "x"], "--seed takes a whole number from 0 to 1000000000, "
                                     "not 'x'"),
])
def test_examples_refuse_bad_options(name, opts, message):
    """As `vdev demo` (exit status 2, a line saying why, then the usage),
    before any work: the bad values ran on (--epochs 0 ran 5 epochs) or
    failed later (ZeroDivisionError, TypeError)."""
    r = _example(name, *opts)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == "%s: %s" % (name, message)
    assert lines[1] == "" and lines[2].startswith("usage: %s [-h]" % name)
    assert "[--steps N] [--batch N] [--seed N]" in " ".join(r.stderr.split())


def test_large_sums_round_once():
    """Sums accumulate in double and round once to float32 (see README's
    differences): 1e7 ones are exactly 1e7, as in TensorFlow, and 1e7 copies
    of float32 0.1 are 1000000.0, the correctly rounded sum, where a float32
    accumulation drifts in the last bits."""
    ones = vdev.constant(np.ones(10**7, np.float32))
    assert vdev.reduce_sum(ones).numpy() == np.float32(1e7)
    assert vdev.reduce_mean(ones).numpy() == np.float32(1.0)
    tenths = np.full(10**7, 0.1, np.float32)
    want = np.float32(np.sum(tenths, dtype=np.float64))
    assert want == np.float32(1e6)
    assert vdev.reduce_sum(tenths).numpy() == want
    assert vdev.reduce_sum(np.reshape(tenths, [1, -1]), axis=1).numpy().tolist() == [1e6]
