"""Model(a, outputs=b), b an Input that is not among the model's inputs:
Keras 2.11 makes such a model (its _map_graph_network checks only the
inputs of the layer calls, and b's is an Input's) and fails when it runs,
with the AssertionError of Functional._run_internal_graph, "Could not
compute output KerasTensor(...)", inside Keras's "Exception encountered when
calling layer ..." with the call's arguments. It was a KeyError. A layer
called on b is Keras's "Graph disconnected" ValueError when the model is
made, as before."""
import numpy as np
import pytest

import vdev
from vdev import layers


def expected(b, inputs, training="None"):
    name = 'layer "m" (type Functional)'
    return ("Exception encountered when calling %s.\n\nCould not compute output %s\n\n"
            "Call arguments received by %s:\n  \u2022 inputs=%s\n  \u2022 training=%s\n"
            "  \u2022 mask=None" % (name, b, name, inputs, training))


def test_an_input_not_given_as_an_output_is_made_and_fails_when_it_runs():
    a, b = vdev.Input((4,), name="a"), vdev.Input((4,), name="b")
    model = vdev.models.Model(a, outputs=b, name="m")
    assert [l.name for l in model.layers] == ["a", "b"]
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(AssertionError) as e:
        model(x)
    assert str(e.value) == expected(b, "tf.Tensor(shape=(2, 4), dtype=float32)")
    with pytest.raises(AssertionError) as e:
        model([vdev.constant(x)], training=True)
    assert str(e.value) == expected(b, "['tf.Tensor(shape=(2, 4), dtype=float32)']", "True")


def test_the_first_output_not_computed_is_named():
    a, b = vdev.Input((4,), name="a"), vdev.Input((3,), name="b")
    model = vdev.models.Model(a, [layers.Dense(2, name="d")(a), b], name="m")
    with pytest.raises(AssertionError) as e:
        model({"a": np.ones((5, 4))})
    assert str(e.value) == expected(b, "{'a': 'tf.Tensor(shape=(5, 4), dtype=float64)'}")


def test_a_layer_on_an_input_not_given_is_refused_when_the_model_is_made():
    a, b = vdev.Input((4,), name="a"), vdev.Input((4,), name="b")
    with pytest.raises(ValueError) as e:
        vdev.models.Model(a, layers.Dense(2, name="d")(b), name="m")
    assert str(e.value) == ("Graph disconnected: cannot obtain value for tensor %s at layer "
                            "\"d\". The following previous layers were accessed without issue: "
                            "[]" % (b,))
