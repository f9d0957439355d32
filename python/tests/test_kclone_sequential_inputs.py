"""A Sequential called on several symbolic tensors gets Keras 2.11's
count error: with its input shape given (an Input first, or input_shape on
its first layer), the model's own InputSpec error 'Layer "s" expects 1
input(s), but it received 2 input tensors. ...'; without, its first layer's
(a Dense, Conv2D, Flatten or pooling layer, which Keras calls on the list
inside the model's call, on placeholders), inside Keras's "Exception
encountered when calling layer ..." with the call's arguments. Nothing is
recorded or built. It was "input_dim must be an integer, not (None, 4)" (a
TypeError) or int()'s TypeError."""
import pytest

import vdev
from vdev import _functional, layers

F4 = "tf.Tensor(shape=(None, 4), dtype=float32)"


def wrapped(model, inner, inputs):
    name = 'layer "%s" (type Sequential)' % model
    return ("Exception encountered when calling %s.\n\n%s\n\nCall arguments received by %s:\n"
            "  \u2022 inputs=%s\n  \u2022 training=None\n  \u2022 mask=None"
            % (name, inner, name, inputs))


def test_without_an_input_shape_the_first_layer_refuses_the_list():
    a, b = vdev.Input((4,)), vdev.Input((4,))
    seq = vdev.models.Sequential([layers.Dense(3, name="d")], name="s")
    with pytest.raises(ValueError) as e:
        seq([a, b])
    assert str(e.value) == wrapped(
        "s", 'Layer "d" expects 1 input(s), but it received 2 input tensors. Inputs received: '
        "[<tf.Tensor 'Placeholder:0' shape=(None, 4) dtype=float32>, "
        "<tf.Tensor 'Placeholder_1:0' shape=(None, 4) dtype=float32>]", repr([F4, F4]))
    assert _functional._inbound_nodes(seq) == [] and not seq.layers[0].built
    i = vdev.Input((2, 2), dtype="int32")
    flat = vdev.models.Sequential([layers.Flatten(name="f")], name="s2")
    with pytest.raises(ValueError) as e:
        flat((i, i, i))  # a tuple is shown as one; Keras's list of what it received is a list
    placeholders = ", ".join("<tf.Tensor 'Placeholder%s:0' shape=(None, 2, 2) dtype=int32>" % s
                             for s in ("", "_1", "_2"))
    assert str(e.value) == wrapped(
        "s2", 'Layer "f" expects 1 input(s), but it received 3 input tensors. Inputs received: '
        "[%s]" % placeholders, repr(("tf.Tensor(shape=(None, 2, 2), dtype=int32)",) * 3))


@pytest.mark.parametrize("first", [lambda: [layers.Dense(3, input_dim=4, name="d")],
                                   lambda: [vdev.Input((4,)), layers.Dense(3, name="d")]])
def test_with_an_input_shape_the_model_refuses_the_list(first):
    a, b = vdev.Input((4,)), vdev.Input((4,))
    seq = vdev.models.Sequential(first(), name="s")
    with pytest.raises(ValueError) as e:
        seq([a, b])
    assert str(e.value) == ('Layer "s" expects 1 input(s), but it received 2 input tensors. '
                            "Inputs received: [%r, %r]" % (a, b))
    assert _functional._inbound_nodes(seq) == []
    assert tuple(seq([a]).shape) == (None, 3)  # a list of one is the tensor


def test_one_tensor_still_goes_through():
    a = vdev.Input((4,))
    seq = vdev.models.Sequential([layers.Dense(3, name="d")], name="s")
    assert tuple(seq(a).shape) == (None, 3) and seq.layers[0].built
