"""A merge layer called on symbolic tensors of two dtypes (an int32 and a
float32 Input) fails as Keras 2.11's does, when the model is made: the
TypeError of the TensorFlow op its merge function runs ("Input 'y' of
'AddV2' Op has type float32 that does not match type int32 of argument
'x'.", ConcatV2's "Tensors in list passed to 'values' ... don't all
match."), inside Keras's "Exception encountered when calling layer ..."
with the call's arguments, and the layer keeps no call. It was accepted and
failed only when the model ran."""
import pytest

import vdev
from vdev import _functional, layers


def args(*texts, kind=list):
    return repr(kind(texts))


def expected(name, cls, message, inputs):
    layer = 'layer "%s" (type %s)' % (name, cls)
    return ("Exception encountered when calling %s.\n\n%s\n\nCall arguments received by %s:\n"
            "  \u2022 inputs=%s" % (layer, message, layer, inputs))


I4 = "tf.Tensor(shape=(None, 4), dtype=int32)"
F4 = "tf.Tensor(shape=(None, 4), dtype=float32)"


@pytest.mark.parametrize("cls,op", [(layers.Add, "AddV2"), (layers.Subtract, "Sub"),
                                    (layers.Multiply, "Mul"), (layers.Average, "AddV2"),
                                    (layers.Maximum, "Maximum"), (layers.Minimum, "Minimum")])
def test_an_int32_and_a_float32_input(cls, op):
    i = vdev.Input((4,), dtype="int32")
    f = vdev.Input((4,))
    layer = cls(name="m")
    with pytest.raises(TypeError) as e:
        layer([i, f])
    assert str(e.value) == expected(
        "m", cls.__name__, "Input 'y' of '%s' Op has type float32 that does not match type "
        "int32 of argument 'x'." % op, args(I4, F4))
    assert _functional._inbound_nodes(layer) == []
    with pytest.raises(TypeError) as e:
        layer((f, i))  # a tuple is shown as one
    assert str(e.value) == expected(
        "m", cls.__name__, "Input 'y' of '%s' Op has type int32 that does not match type "
        "float32 of argument 'x'." % op, args(F4, I4, kind=tuple))


def test_the_first_input_of_another_dtype_than_the_first_is_named():
    f1, f2 = vdev.Input((4,)), vdev.Input((4,))
    i = vdev.Input((), dtype="int32")
    with pytest.raises(TypeError) as e:
        layers.Add(name="s3")([f1, f2, i])
    assert str(e.value) == expected(
        "s3", "Add", "Input 'y' of 'AddV2' Op has type int32 that does not match type float32 "
        "of argument 'x'.", args(F4, F4, "tf.Tensor(shape=(None,), dtype=int32)"))


def test_concatenate_lists_every_dtype():
    i, f = vdev.Input((4,), dtype="int32"), vdev.Input((4,))
    with pytest.raises(TypeError) as e:
        layers.Concatenate(name="c")([i, f, i])
    assert str(e.value) == expected(
        "c", "Concatenate", "Tensors in list passed to 'values' of 'ConcatV2' Op have types "
        "[int32, float32, int32] that don't all match.", args(I4, F4, I4))


def test_one_dtype_is_taken_and_shape_errors_come_first():
    i, j = vdev.Input((4,), dtype="int32"), vdev.Input((4,), dtype="int32")
    out = layers.Add()([i, j])
    assert out.dtype is vdev.int32 and tuple(out.shape) == (None, 4)
    assert layers.Concatenate()([i, j]).dtype is vdev.int32
    with pytest.raises(ValueError) as e:  # Keras's build check runs before its call
        layers.Add()([i, vdev.Input((5,))])
    assert str(e.value) == "Inputs have incompatible shapes. Received shapes (4,) and (5,)"
