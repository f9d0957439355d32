"""A layer's build takes Keras's input shape as well as vdev's count of
features (vdev/_lib.py, last_axis): Dense, the convolutions, the recurrent
layers, Bidirectional and RNN built from (None, ..., features), a list, or
a shape object, give the weights an int gives; an unknown last axis is
Keras's Dense's error, a float vdev's TypeError. Three simulated 16 GiB GPUs
(conftest)."""
import pytest

import vdev
from vdev import layers


class Shape:
    """A shape object as TensorShape: as_list()."""

    def __init__(self, dims):
        self.dims = dims

    def as_list(self):
        return list(self.dims)


def shapes(layer):
    return [tuple(int(d) for d in v.shape) for v in layer.variables]


@pytest.mark.parametrize("make,shape,want", [
    (lambda: layers.Dense(3), (None, 4), [(4, 3), (3,)]),
    (lambda: layers.Conv2D(2, 3), (None, 8, 8, 5), [(3, 3, 5, 2), (2,)]),
    (lambda: layers.Conv1D(2, 3), (None, 8, 5), [(3, 5, 2), (2,)]),
    (lambda: layers.Conv2DTranspose(2, 3), (None, 8, 8, 5), [(3, 3, 2, 5), (2,)]),
    (lambda: layers.DepthwiseConv2D(3), (None, 8, 8, 5), [(3, 3, 5, 1), (5,)]),
    (lambda: layers.SeparableConv2D(2, 3), (None, 8, 8, 5), [(3, 3, 5, 1), (1, 1, 5, 2), (2,)]),
    (lambda: layers.LSTM(2), (None, 6, 4), [(4, 8), (2, 8), (8,)]),
    (lambda: layers.GRU(2), (None, 6, 4), [(4, 6), (2, 6), (2, 6)]),
    (lambda: layers.SimpleRNN(2), (None, 6, 4), [(4, 2), (2, 2), (2,)]),
    (lambda: layers.Bidirectional(layers.LSTM(2)), (None, 6, 4),
     [(4, 8), (2, 8), (8,), (4, 8), (2, 8), (8,)]),
    (lambda: layers.RNN(layers.LSTMCell(2)), (None, 6, 4), [(4, 8), (2, 8), (8,)]),
])
def test_build_takes_a_shape_as_keras_and_a_count_as_vdev(make, shape, want):
    for arg in (shape, list(shape), Shape(shape), shape[-1]):
        layer = make()
        layer.build(arg)
        assert shapes(layer) == want, arg


def test_an_unknown_last_axis_and_a_float():
    with pytest.raises(ValueError) as e:
        layers.Dense(3).build((None, None))
    assert str(e.value) == ("The last dimension of the inputs to a Dense layer should be "
                            "defined. Found None. Full input shape received: (None, None)")
    with pytest.raises(ValueError) as e:
        layers.LSTM(3).build(Shape([2, 5, None]))
    assert str(e.value).startswith("The last dimension of the inputs to a LSTM layer")
    with pytest.raises(TypeError) as e:
        layers.Dense(3).build(4.0)
    assert str(e.value) == "input_dim must be an integer, not 4.0"
    # a model built from a shape runs
    m = vdev.keras.Sequential([layers.Dense(2)])
    m.build((None, 3))
    assert tuple(m.predict(vdev.constant([[1.0, 2.0, 3.0]]), verbose=0).shape) == (1, 2)
