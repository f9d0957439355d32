"""vdev.bool, TensorFlow's tf.bool (vdev/_tensor.py, vdev/_creation.py): the
DType and as_dtype's names for it; bool tensors from Python bools, numpy
bool arrays and the creation functions, read back as numpy bools (each
element one 32-bit word, 0 or 1, in vdev's memory); TensorFlow's conversion
rules between bools and the other dtypes, with its errors in its words;
repr and str as TensorFlow prints them; float ops refusing bools as they
refuse int32; boolean_mask with a bool tensor; DLPack refusing them; and
the same values on the CPU and on each simulated GPU, through copies,
deepcopy and pickling."""
import builtins
import copy
import operator
import pickle
import re

import numpy as np
import pytest

import vdev
from vdev._lib import lib

_LONG = "/job:localhost/replica:0/task:0/device:"


def _words(t):
    """t's elements as vdev holds them: its 32-bit words, read raw."""
    out = np.empty(t.shape, np.int32)
    assert lib.vdev_tensor_to_host(t._handle, out.ctypes.data, out.nbytes) == 0
    return out


def _full(msg):
    """A pytest match for exactly msg."""
    return "^%s$" % re.escape(msg)


# ---- the DType --------------------------------------------------------------

def test_the_dtype_is_tensorflows_bool():
    b = vdev.bool
    assert isinstance(b, vdev.DType) and b.name == "bool" and repr(b) == "vdev.bool"
    assert b.as_numpy_dtype is np.bool_
    assert b.is_bool and not b.is_floating and not b.is_integer
    assert not vdev.float32.is_bool and not vdev.int32.is_bool
    # vdev stores a bool as one 32-bit word (TensorFlow's bool is one byte)
    assert b.size == vdev.float32.size == vdev.int32.size == 4
    assert "bool" in vdev.__all__ and vdev.bool is vdev._tensor.bool_


def test_as_dtype_names_bool():
    for x in ("bool", np.bool_, np.dtype(np.bool_), builtins.bool, vdev.bool):
        assert vdev.as_dtype(x) is vdev.bool, x
    assert vdev.bool == "bool" and vdev.bool == np.bool_ and vdev.bool == builtins.bool
    assert vdev.bool != vdev.int32 and vdev.bool != vdev.float32 and vdev.int32 != builtins.bool
    assert hash(vdev.bool) == hash(vdev.as_dtype("bool"))
    assert len({vdev.bool, vdev.int32, vdev.float32, vdev.as_dtype(np.bool_)}) == 3
    with pytest.raises(TypeError, match=_full("vdev tensors are float32, int32 or bool, "
                                              "not 'float64'")):
        vdev.as_dtype("float64")
    with pytest.raises(TypeError, match=_full("vdev tensors are float32, int32 or bool, "
                                              "not int8")):
        vdev.as_dtype(np.int8)


def test_the_package_keeps_pythons_bool():
    # vdev.bool is the DType; inside the package Python's bool still works
    for module in (vdev._tensor, vdev._creation, vdev._lib):
        assert "bool" not in vars(module), module.__name__
    vdev.init()
    assert vdev.is_initialized() is True
    vdev.shutdown()
    assert vdev.is_initialized() is False


# ---- tensors, values and printing --------------------------------------------

def test_tensors_read_back_as_numpy_bools():
    t = vdev.constant([True, False, True])
    assert t.dtype is vdev.bool and t.shape == (3,)
    a = t.numpy()
    assert a.dtype == np.bool_ and a.tolist() == [True, False, True]
    np.testing.assert_array_equal(_words(t), [1, 0, 1])  # one word an element, 0 or 1
    s = vdev.constant(True)
    assert s.shape == () and isinstance(s.numpy(), np.bool_) and s.numpy()
    assert isinstance(vdev.constant(False).numpy(), np.bool_) and not vdev.constant(False).numpy()
    assert np.asarray(t).dtype == np.bool_
    np.testing.assert_array_equal(np.array(t, dtype=np.float32), [1.0, 0.0, 1.0])


def test_python_conversions_of_a_bool_tensor():
    t, f = vdev.constant(True), vdev.constant([False])
    assert bool(t) is True and bool(f) is False
    assert int(t) == 1 and type(int(t)) is int and float(f) == 0.0 and complex(t) == 1
    assert format(t) == "True" and f"{t}" == "True"
    with pytest.raises(ValueError, match="The truth value of an array with more than one "
                                         "element is ambiguous"):
        bool(vdev.constant([True, False]))
    # no index: numpy's bool_ is none (vdev's index arguments refuse a bool too)
    with pytest.raises(TypeError, match=_full("a bool tensor cannot be interpreted as an "
                                              "integer index; int(t) gives its 0 or 1")):
        operator.index(t)
    assert operator.index(vdev.constant(2)) == 2  # int32 as before


def test_repr_and_str_as_tensorflow_prints_them():
    with vdev.device("CPU:0"):
        t, s = vdev.constant([True, False]), vdev.constant(True)
        v = vdev.Variable([[False], [True]])
    assert repr(t) == ("<vdev.Tensor: shape=(2,), dtype=bool, device=%sCPU:0, "
                       "numpy=array([ True, False])>" % _LONG)
    assert str(t) == "vdev.Tensor([ True False], shape=(2,), dtype=bool)"
    assert repr(s) == ("<vdev.Tensor: shape=(), dtype=bool, device=%sCPU:0, numpy=%r>"
                       % (_LONG, np.True_))
    assert str(s) == "vdev.Tensor(True, shape=(), dtype=bool)"
    assert repr(v) == ("<vdev.Variable 'Variable' shape=(2, 1) dtype=bool, device=%sCPU:0, "
                       "numpy=%r>" % (_LONG, np.array([[False], [True]])))


# ---- creation -----------------------------------------------------------------

def test_python_and_numpy_bools_make_bool_tensors():
    cases = [True, False, [True, False], [[True], [False]], np.bool_(True),
             np.array([True, False]), np.array(False), np.ones((2, 1, 3, 1), np.bool_),
             np.array([[True, False, True], [False, True, False]])[:, ::2],  # strided
             np.asfortranarray(np.eye(3, dtype=np.bool_))]
    for value in cases:
        for make in (vdev.constant, vdev.convert_to_tensor):
            t = make(value)
            want = np.asarray(value)
            assert t.dtype is vdev.bool, (value, make)
            assert t.shape == want.shape
            np.testing.assert_array_equal(t.numpy(), want)
            np.testing.assert_array_equal(_words(t), want.astype(np.int32))
    b = vdev.constant([True])
    assert vdev.convert_to_tensor(b) is b and vdev.convert_to_tensor(b, vdev.bool) is b
    assert vdev.constant(b).dtype is vdev.bool
    np.testing.assert_array_equal(vdev.constant(True, shape=[2, 3]).numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(vdev.constant([True, False, False, True], shape=(2, 2)).numpy(),
                                  [[True, False], [False, True]])
    e = vdev.constant([], dtype=vdev.bool)  # an empty value takes any dtype, as TensorFlow's
    assert e.dtype is vdev.bool and e.shape == (0,) and e.numpy().dtype == np.bool_
    assert vdev.constant(np.zeros((0, 2), np.bool_)).dtype is vdev.bool
    assert vdev.constant([], dtype=vdev.int32).dtype is vdev.int32


def test_dtype_conversions_follow_tensorflow():
    # bools convert to float32 and int32 as 1 and 0 (TensorFlow's converters
    # read a Python bool as the int it is, and cast a numpy bool array)
    for value in ([True, False], np.array([True, False])):
        f = vdev.constant(value, dtype=vdev.float32)
        assert f.dtype is vdev.float32 and f.numpy().tolist() == [1.0, 0.0]
        i = vdev.convert_to_tensor(value, dtype="int32")
        assert i.dtype is vdev.int32 and i.numpy().tolist() == [1, 0]
    assert vdev.constant(True, dtype=vdev.float32).numpy() == np.float32(1.0)
    # only bools convert to bool: TensorFlow's TypeError
    for value, shown in ((1, "1"), ([1, 0], "[1, 0]"), (1.5, "1.5"), ([0.0], "[0.0]"),
                         (np.array([1, 0]), "array([1, 0])")):
        with pytest.raises(TypeError, match=_full("Cannot convert %s to EagerTensor of dtype "
                                                  "bool" % shown)):
            vdev.constant(value, dtype=vdev.bool)
    with pytest.raises(TypeError, match=_full("Cannot convert [1, 0] to EagerTensor of dtype "
                                              "bool")):
        vdev.convert_to_tensor([1, 0], dtype=builtins.bool)
    # a tensor keeps its dtype, as TensorFlow's convert_to_tensor
    with pytest.raises(ValueError, match=_full("Tensor conversion requested dtype float32 for "
                                               "Tensor with dtype bool")):
        vdev.convert_to_tensor(vdev.constant([True]), dtype=vdev.float32)
    with pytest.raises(ValueError, match=_full("Tensor conversion requested dtype bool for "
                                               "Tensor with dtype int32")):
        vdev.convert_to_tensor(vdev.constant([1]), dtype=vdev.bool)
    # dtype_hint is tried first, the value's own dtype after it
    assert vdev.convert_to_tensor(True, dtype_hint=vdev.float32).dtype is vdev.float32
    assert vdev.convert_to_tensor(1, dtype_hint=vdev.bool).dtype is vdev.int32
    assert vdev.convert_to_tensor(True, dtype_hint=vdev.bool).dtype is vdev.bool
    # mixed values take numpy's promotion, as ints beside floats do
    m = vdev.constant([True, 1])
    assert m.dtype is vdev.int32 and m.numpy().tolist() == [1, 1]
    m = vdev.constant([True, 1.5])
    assert m.dtype is vdev.float32 and m.numpy().tolist() == [1.0, 1.5]
    value = [True, "a"]
    with pytest.raises(TypeError, match=_full("vdev tensors are float32, int32 or bool; cannot "
                                              "convert %r (%s)"
                                              % (value, np.asarray(value).dtype))):
        vdev.constant(value)
    with pytest.raises(TypeError, match=_full("vdev tensors are float32, int32 or bool; cannot "
                                              "convert 'yes'")):
        vdev.constant("yes", dtype=vdev.bool)


def test_zeros_ones_fill_and_likes():
    for z in (vdev.zeros([2, 3], vdev.bool), vdev.zeros((2, 3), dtype="bool"),
              vdev.zeros([2, 3], builtins.bool)):
        assert z.dtype is vdev.bool and z.numpy().tolist() == [[False] * 3] * 2
        np.testing.assert_array_equal(_words(z), np.zeros((2, 3)))
    for o in (vdev.ones([4], dtype=vdev.bool), vdev.ones(4, np.bool_)):
        assert o.dtype is vdev.bool and o.numpy().tolist() == [True] * 4
        np.testing.assert_array_equal(_words(o), [1] * 4)  # 1, not 1.0f's bits
    for value, want in ((True, True), (False, False), (np.bool_(True), True),
                        (vdev.constant(False), False)):
        f = vdev.fill([2, 2], value)
        assert f.dtype is vdev.bool and f.numpy().tolist() == [[want] * 2] * 2, value
        np.testing.assert_array_equal(_words(f), np.full((2, 2), int(want)))
    # a 0-d tensor gives its own dtype, as tf.fill's
    i = vdev.fill([2], vdev.constant(3))
    assert i.dtype is vdev.int32 and i.numpy().tolist() == [3, 3]
    assert vdev.fill([2], 3).dtype is vdev.int32 and vdev.fill([2], 0.5).dtype is vdev.float32
    b = vdev.constant([[True, False]])
    zl, ol = vdev.zeros_like(b), vdev.ones_like(b)
    assert zl.dtype is ol.dtype is vdev.bool and zl.shape == ol.shape == (1, 2)
    assert zl.numpy().tolist() == [[False, False]] and ol.numpy().tolist() == [[True, True]]
    assert vdev.zeros_like(vdev.constant([1.0, 2.0]), dtype=vdev.bool).numpy().tolist() == \
        [False, False]
    f = vdev.ones_like(b, dtype=vdev.float32)
    assert f.dtype is vdev.float32 and f.numpy().tolist() == [[1.0, 1.0]]
    assert vdev.ones_like([True]).dtype is vdev.bool


def test_variables_of_bools():
    v = vdev.Variable([True, False])
    assert v.dtype is vdev.bool and v.numpy().tolist() == [True, False]
    v.assign([False, True])
    assert v.numpy().tolist() == [False, True]
    with pytest.raises(TypeError, match=_full("Cannot convert [1, 0] to EagerTensor of dtype "
                                              "bool")):
        v.assign([1, 0])
    w = pickle.loads(pickle.dumps(v))
    assert w.dtype is vdev.bool and w.numpy().tolist() == [False, True]
    assert copy.deepcopy(v).numpy().tolist() == [False, True]


# ---- ops ------------------------------------------------------------------------

def test_float_ops_refuse_bools_as_they_refuse_int32():
    b, i = vdev.constant([True, False]), vdev.constant([1, 0])
    m, mi = vdev.constant([[True]]), vdev.constant([[1]])
    # AddV2, Sub, Mul, Maximum and Minimum take int32 (not bool): their
    # refusal of bools is checked below
    cases = [(lambda x, y, xm, ym: vdev.divide(x, y), "RealDiv: input #0 (shape [2]) is %s"),
             (lambda x, y, xm, ym: vdev.sqrt(x), "Sqrt: input #0 (shape [2]) is %s"),
             (lambda x, y, xm, ym: vdev.matmul(xm, ym), "MatMul: input #0 (shape [1,1]) is %s"),
             (lambda x, y, xm, ym: vdev.exp(x), "Exp: input #0 (shape [2]) is %s"),
             (lambda x, y, xm, ym: vdev.reduce_mean(x), "Mean: input #0 (shape [2]) is %s")]
    for op, says in cases:
        with pytest.raises(vdev.errors.InvalidArgumentError) as e_int:
            op(i, i, mi, mi)
        with pytest.raises(vdev.errors.InvalidArgumentError) as e_bool:
            op(b, b, m, m)
        assert type(e_bool.value) is type(e_int.value)
        assert str(e_int.value).startswith(says % "int32")
        assert str(e_bool.value).startswith(says % "bool"), str(e_bool.value)
    for op, name in ((vdev.add, "AddV2"), (vdev.multiply, "Mul"), (vdev.maximum, "Maximum")):
        with pytest.raises(vdev.errors.InvalidArgumentError,
                           match=r"^%s: input #0 \(shape \[2\]\) is bool, expected float$" % name):
            op(b, b)


def test_boolean_mask_takes_a_bool_tensor():
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, size=(4, 3, 2)).astype(np.float32)
    for mshape in ((4,), (4, 3)):
        m = rng.uniform(size=mshape) < 0.5
        for dev in ("CPU:0", "GPU:1"):
            with vdev.device(dev):
                t, mask = vdev.constant(x), vdev.constant(m)
            assert mask.dtype is vdev.bool
            got = vdev.boolean_mask(t, mask)
            np.testing.assert_array_equal(got.numpy(), x[m])
            assert got.device == _LONG + dev
    none = vdev.boolean_mask(vdev.constant(x), vdev.zeros([4], vdev.bool))
    assert none.shape == (0, 3, 2)
    np.testing.assert_array_equal(
        vdev.boolean_mask(vdev.constant(x), vdev.ones([4, 3], vdev.bool), axis=0).numpy(),
        x.reshape(12, 2))


def test_dlpack_refuses_bool_tensors():
    b = vdev.constant([True, False])
    assert b.__dlpack_device__() == (vdev.dlpack.kDLCPU, 0)
    said = ("a vdev bool tensor holds 32-bit words, which DLPack's 8-bit bool cannot share; "
            "cast it to int32 first (vdev.cast(t, vdev.int32))")
    with pytest.raises(BufferError, match=_full(said)):
        b.__dlpack__()
    with pytest.raises(BufferError, match=_full(said)):
        np.from_dlpack(b)
    assert vdev.dlpack.live_exports() == 0


# ---- devices ------------------------------------------------------------------

@pytest.mark.parametrize("dev", ["CPU:0", "GPU:0", "GPU:1", "GPU:2"])
def test_round_trips_on_every_device(dev):
    rng = np.random.default_rng(11)
    for shape in ((), (1,), (5,), (3, 4), (2, 3, 4), (2, 1, 3, 2)):
        a = rng.uniform(size=shape) < 0.5
        with vdev.device(dev):
            t = vdev.constant(a)
            z, o = vdev.zeros(shape, vdev.bool), vdev.ones(shape, vdev.bool)
        assert t.device == _LONG + dev and t.dtype is vdev.bool
        got = t.numpy()
        if shape == ():
            assert isinstance(got, np.bool_)
        np.testing.assert_array_equal(got, a)
        np.testing.assert_array_equal(_words(t), a.astype(np.int32))
        assert not z.numpy().any() and o.numpy().all() and z.device == o.device == t.device
        # copies between devices, deepcopy and pickling keep dtype and values
        for c in (t.cpu(), t.gpu(2), copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
            assert c.dtype is vdev.bool
            np.testing.assert_array_equal(c.numpy(), a)
        assert pickle.loads(pickle.dumps(t)).device == t.device
        assert copy.deepcopy(t).device == t.device
