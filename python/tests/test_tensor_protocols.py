"""Python's object protocols on tensors and variables, as TensorFlow's:
bool(), int(), float(), complex() and operator.index() with numpy's rule and
errors (a single element converts, anything else is numpy's TypeError or
ValueError), ref()/deref() as hashable keys, and a variable's in-place
operators refused with TensorFlow's RuntimeError (``v -= x`` would otherwise
rebind the name to a new tensor and leave the variable unchanged); no unary
plus, as TensorFlow's; indexing and iteration a TypeError pointing to
``t.numpy()``; shapes whose sizes are read as TensorFlow's Dimension reads
them."""
import operator

import numpy as np
import pytest

import vdev

SIZE1 = "only size-1 arrays can be converted to Python scalars"
LEN1 = "only length-1 arrays can be converted to Python scalars"  # numpy's complex()
INDEX = "only integer scalar arrays can be converted to a scalar index"
TRUTH = ("The truth value of an array with more than one element is ambiguous. "
         "Use a.any() or a.all()")


def _numpy_says(fn, a):
    """numpy's exception type and text for fn on the array a."""
    with pytest.raises(Exception) as e:
        fn(a)
    return type(e.value), str(e.value)


@pytest.mark.parametrize("fn", [int, float, complex])
def test_number_of_a_tensor_of_many_elements_is_numpys_type_error(fn):
    for value in ([1, 2], [1.0, 2.0], [[1.0], [2.0]]):
        t = vdev.constant(value)
        with pytest.raises(TypeError) as e:
            fn(t)
        assert str(e.value) in (SIZE1, LEN1)
        assert (type(e.value), str(e.value)) == _numpy_says(fn, np.array(value))
    with pytest.raises(TypeError) as e:  # no element at all
        fn(vdev.zeros([0]))
    assert str(e.value) in (SIZE1, LEN1)


def test_number_of_a_single_element_of_any_rank():
    assert int(vdev.constant([[7]])) == 7 and float(vdev.constant([2.5])) == 2.5
    assert complex(vdev.constant(1.5)) == 1.5 + 0j and int(vdev.Variable(3)) == 3
    assert bool(vdev.constant([[1.0]])) and not bool(vdev.constant(0))


def test_bool_of_many_elements_is_numpys_value_error():
    with pytest.raises(ValueError) as e:
        bool(vdev.constant([1.0, 2.0]))
    assert str(e.value) == TRUTH


def test_index_takes_an_int32_scalar_only():
    assert [10, 20, 30][vdev.constant(2)] == 30 and operator.index(vdev.Variable(1)) == 1
    for value in ([1], [1, 2], [[1]]):  # numpy's rule: rank 0 only
        with pytest.raises(TypeError) as e:
            operator.index(vdev.constant(value))
        assert str(e.value) == INDEX
    with pytest.raises(TypeError) as e:  # TensorFlow's: the value's own __index__
        [1, 2][vdev.constant([1.0])]
    assert str(e.value) == INDEX
    with pytest.raises(AttributeError) as e:  # numpy's float32 has none
        [1, 2][vdev.constant(1.0)]
    assert str(e.value) == "'numpy.float32' object has no attribute '__index__'"
    with pytest.raises(TypeError) as e:  # a size is still TensorFlow's TypeError
        vdev.TensorShape([vdev.constant(1.0)])
    assert str(e.value).startswith("Dimension value must be integer or None or have an "
                                   "__index__ method, got value '<vdev.Tensor: shape=(), ")
    assert vdev.TensorShape([vdev.constant(2)]) == [2]


def test_ref_is_a_hashable_key_by_identity():
    a, b = vdev.constant([1.0]), vdev.constant([1.0])  # equal values, two objects
    v = vdev.Variable([1.0])
    keys = {a.ref(): "a", b.ref(): "b", v.ref(): "v"}
    assert keys[a.ref()] == "a" and keys[b.ref()] == "b" and keys[v.ref()] == "v"
    assert a.ref() == a.ref() and a.ref() != b.ref() and not a.ref() == None  # noqa: E711
    assert a.ref().deref() is a and v.ref().deref() is v
    assert {r.deref() for r in {a.ref(), a.ref()}} == {a}
    assert repr(v.ref()) == "<Reference wrapping %r>" % (v,)
    with pytest.raises(TypeError) as e:
        a.ref() == a
    assert str(e.value) == "Cannot compare wrapped object with unwrapped object"


INPLACE = [
    ("+=", operator.iadd, "`variable += value` with `tf.Variable`s is not supported. Use "
     "`variable.assign_add(value)` to modify the variable, or `out = variable + value` if "
     "you need to get a new output Tensor."),
    ("-=", operator.isub, "`variable -= value` with `tf.Variable`s is not supported. Use "
     "`variable.assign_sub(value)` to modify the variable, or `out = variable - value` if "
     "you need to get a new output Tensor."),
    ("*=", operator.imul, "`var *= value` with `tf.Variable`s is not supported. Use "
     "`var.assign(var * value)` to modify the variable, or `out = var * value` if you "
     "need to get a new output Tensor."),
    ("/=", operator.itruediv, "`var /= value` with `tf.Variable`s is not supported. Use "
     "`var.assign(var / value)` to modify the variable, or `out = var / value` if you "
     "need to get a new output Tensor."),
    ("**=", operator.ipow, "`var **= value` with `tf.Variable`s is not supported. Use "
     "`var.assign(var ** value)` to modify the variable, or `out = var ** value` if you "
     "need to get a new output Tensor."),
]


@pytest.mark.parametrize("op,fn,msg", INPLACE, ids=[x[0] for x in INPLACE])
def test_variable_in_place_operators_are_refused(op, fn, msg):
    v = vdev.Variable([1.0, 2.0])
    with pytest.raises(RuntimeError) as e:
        fn(v, 2.0)
    assert str(e.value) == msg
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])  # unchanged


def test_in_place_operators_of_a_tensor_make_a_new_tensor():
    t = vdev.constant([1.0, 2.0])
    u = t
    u += 1.0  # a tensor is immutable: the name is rebound, as in TensorFlow
    assert type(u) is vdev.Tensor and u is not t
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(u.numpy(), [2.0, 3.0])


def test_mirrored_variable_in_place_operators_are_refused():
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        v = vdev.Variable([1.0])
    with pytest.raises(RuntimeError) as e:
        v -= 1.0
    assert str(e.value) == INPLACE[1][2]
    np.testing.assert_array_equal(v.numpy(), [1.0])


def test_array_protocol_takes_numpy_2s_copy_keyword():
    t = vdev.constant([1.0, 2.0])
    for copy in (None, True):
        a = t.__array__(copy=copy)
        a[0] = 9.0  # a host copy of its own
        np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    assert t.__array__(np.float64, copy=True).dtype == np.float64
    with pytest.raises(ValueError) as e:  # device memory: a copy is unavoidable
        t.__array__(copy=False)
    assert str(e.value) == "Unable to avoid copy while creating an array as requested."
    np.testing.assert_array_equal(np.array(t), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(vdev.Variable([3.0])), [3.0])


@pytest.mark.parametrize("value", [[1.0, 2.0], 2.5, np.zeros(2, np.float32), True])
def test_tensor_class_is_not_a_value_constructor(value, recwarn):
    with pytest.raises(TypeError) as e:
        vdev.Tensor(value)
    assert str(e.value) == ("vdev.Tensor(%r) is not how a tensor is made from a value: use "
                            "vdev.constant(value) or vdev.convert_to_tensor(value), as in "
                            "TensorFlow" % (value,))
    t = vdev.constant([1.0])
    with pytest.raises(TypeError):
        vdev.Tensor(t)  # a tensor is not a handle either
    t = None  # nothing half-made is left for __del__ to trip over
    assert not [w for w in recwarn.list if "Exception ignored" in str(w.message)]


def test_update_of_another_shape_is_tensorflows_error():
    v = vdev.Variable([1.0, 2.0], name="w")
    with pytest.raises(ValueError) as e:
        v.assign([[1.0, 2.0]])
    assert str(e.value) == ("Cannot assign value to variable ' w': Shape mismatch.The variable "
                            "shape (2,), and the assigned value shape (1, 2) are incompatible.")
    for fn in (v.assign_add, v.assign_sub):
        for delta, shape in (([1.0, 2.0, 3.0], "[3]"), ([[1.0, 2.0]], "[1,2]"),
                             (vdev.constant([[1.0], [2.0]]), "[2,1]")):
            with pytest.raises(vdev.errors.InvalidArgumentError) as e:
                fn(delta)
            assert str(e.value) == ("Cannot update variable with shape [2] using a Tensor "
                                    "with shape %s, shapes must be equal." % shape)
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])  # nothing changed
    v.assign_add(1.0)  # vdev also takes a delta that broadcasts to the variable's shape
    v.assign_sub(vdev.constant([0.5, 0.5]))
    np.testing.assert_array_equal(v.numpy(), [1.5, 2.5])


def test_update_of_another_dtype_is_tensorflows_value_error():
    v = vdev.Variable([1.0, 2.0])
    for fn in (v.assign, v.assign_add, v.assign_sub):
        with pytest.raises(ValueError) as e:
            fn(vdev.constant([1, 2]))
        assert str(e.value) == ("Tensor conversion requested dtype float32 for Tensor with "
                                "dtype int32")
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])


def test_shape_equality_and_concatenation_as_tensorflows():
    s = vdev.zeros([2, 3]).shape
    assert s == [2, 3] and [2, 3] == s and s == (2, 3) and s == vdev.TensorShape([2, 3])
    assert not s != [2, 3] and s != [3, 2] and s != [2] and s != None  # noqa: E711
    assert not s == None and not s == "ab"  # noqa: E711
    assert {s: "a"}[(2, 3)] == "a"  # still a hashable tuple
    for joined in (s + [4], s + (4,), s.concatenate([4]), [2] + vdev.TensorShape([3, 4])):
        assert type(joined) is vdev.TensorShape and joined.as_list() == [2, 3, 4]
    assert type(s[1:]) is vdev.TensorShape and s[1:] == [3] and s[0] == 2 and s[-1] == 3
    assert s.is_fully_defined() and not vdev.TensorShape([None, 3]).is_fully_defined()


def test_shape_sizes_are_read_as_tensorflows_dimensions():
    s = vdev.TensorShape([2, 3])
    assert not s == [2.0, 3.0] and s != [2.0, 3.0] and not [2.0, 3.0] == s  # no float size
    assert s == [np.int64(2), np.int32(3)] and vdev.TensorShape([None, 3]) == [None, 3]
    assert type(vdev.TensorShape([np.int64(2)])[0]) is int
    with pytest.raises(TypeError) as e:
        vdev.TensorShape([2.0])
    assert str(e.value) == ("Dimension value must be integer or None or have an __index__ "
                            "method, got value '2.0' with type '<class 'float'>'")
    with pytest.raises(TypeError) as e:
        vdev.TensorShape(iter([2, 2.5]))
    assert str(e.value).endswith("'2.5'could not be converted to a dimension. A shape should "
                                 "either be single dimension (e.g. 10), or an iterable of "
                                 "dimensions (e.g. [1, 10, None]).")
    for bad in ([-1], -1):
        with pytest.raises(ValueError) as e:
            vdev.TensorShape(bad)
        assert str(e.value) == "Dimension -1 must be >= 0"
    with pytest.raises(ValueError) as e:  # TensorFlow's == reads it as a shape too
        s == [2, -3]
    assert str(e.value) == "Dimension -3 must be >= 0"


def test_shape_dims_is_the_list_of_sizes():
    assert vdev.zeros([2, 3]).shape.dims == [2, 3]
    assert vdev.TensorShape([None, 4]).dims == [None, 4] and vdev.TensorShape([]).dims == []


def test_unary_plus_is_pythons_type_error_as_tensorflows():
    for t in (vdev.constant([1.0]), vdev.Variable([1.0])):
        with pytest.raises(TypeError) as e:
            +t
        assert str(e.value) == "bad operand type for unary +: '%s'" % type(t).__name__
    np.testing.assert_array_equal((-vdev.constant([1.0])).numpy(), [-1.0])


def test_indexing_and_iteration_are_slices_as_tensorflows():
    # the rules in full: test_indexing.py
    for t in (vdev.constant([[1.0, 2.0], [3.0, 4.0]]), vdev.Variable([[1.0, 2.0], [3.0, 4.0]])):
        np.testing.assert_array_equal(t[0].numpy(), [1.0, 2.0])
        np.testing.assert_array_equal(t[-1].numpy(), [3.0, 4.0])
        np.testing.assert_array_equal(t[1:].numpy(), [[3.0, 4.0]])
        np.testing.assert_array_equal(t[0, 0].numpy(), 1.0)
        np.testing.assert_array_equal(t[...].numpy(), [[1.0, 2.0], [3.0, 4.0]])
        assert [r.numpy().tolist() for r in t] == [[1.0, 2.0], [3.0, 4.0]]


def test_in_is_a_type_error_pointing_to_numpy():
    t = vdev.constant([1.0, 2.0])
    with pytest.raises(TypeError) as e:
        1.0 in t
    assert str(e.value) == ("`x in t` is not supported for vdev tensors (== compares identity, "
                            "not values): test the host copy, x in t.numpy()")
    a, b = vdev.Variable([1.0, 2.0])
    assert (float(a), float(b)) == (1.0, 2.0)
    np.testing.assert_array_equal(np.array([t, t]), [[1.0, 2.0], [1.0, 2.0]])
