"""A functional model given a dict of inputs, as Keras 2.11's
_flatten_to_reference_inputs takes it: by the Inputs' names whatever the
dict's order; keys beyond them Keras's warning; and when a name is missing,
the values in the order of their keys sorted (tf.nest.flatten's), not the
dict's insertion order, with the same count and shape errors."""
import warnings

import numpy as np
import pytest

import vdev
from vdev import layers


def model():
    a = vdev.Input((4,), name="a")
    b = vdev.Input((3,), name="b")
    out = layers.Concatenate()([layers.Dense(2, seed=1)(a), layers.Dense(2, seed=2)(b)])
    return vdev.models.Model([a, b], out, name="m")


XA = np.arange(8, dtype=np.float32).reshape(2, 4)
XB = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_by_name_whatever_the_order():
    m = model()
    want = m([XA, XB]).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(m({"b": XB, "a": XA}).numpy(), want)


def test_extra_keys_warn_as_keras():
    m = model()
    with pytest.warns(UserWarning) as w:
        out = m({"b": XB, "extra": XB, "a": XA})
    assert str(w[0].message) == ("Input dict contained keys ['extra'] which did not match any "
                                 "model input. They will be ignored by the model.")
    assert np.array_equal(out.numpy(), m([XA, XB]).numpy())


def test_other_names_are_taken_in_sorted_key_order():
    m = model()
    # keys sorted: "x" then "y": XA then XB, whatever the insertion order
    assert np.array_equal(m({"y": XB, "x": XA}).numpy(), m([XA, XB]).numpy())
    m.compile("sgd", "mse")
    y = np.zeros((2, 4), np.float32)
    assert m.evaluate({"y": XB, "x": XA}, y, verbose=0) == m.evaluate([XA, XB], y, verbose=0)
    with pytest.raises(ValueError) as e:
        m({"x": XB, "y": XA})
    assert str(e.value) == ('Input 0 of layer "m" is incompatible with the layer: expected '
                            "shape=(None, 4), found shape=(2, 3)")
