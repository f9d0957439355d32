"""Global pooling layers on inputs with no elements to pool, as
TensorFlow's reduce_mean and reduce_max over an empty axis give them: the
means NaN, the maxima -inf, each of the layer's output shape (keepdims
too), with a gradient of the input's (empty) shape. An empty batch gives an
empty output. Before, GlobalAveragePooling2D of rows 0 was an
InvalidArgumentError from a reshape whose -1 was undecided, and
GlobalMaxPooling2D MaxPool's error for a window of size 0."""
import numpy as np
import pytest

import vdev
from vdev import layers


@pytest.mark.parametrize("shape", [(2, 0, 3, 4), (2, 3, 0, 4)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_2d_over_no_elements(shape, keepdims):
    x = np.zeros(shape, np.float32)
    out = (2, 1, 1, 4) if keepdims else (2, 4)
    mean = layers.GlobalAveragePooling2D(keepdims=keepdims)(x).numpy()
    assert mean.shape == out and np.isnan(mean).all()
    top = layers.GlobalMaxPooling2D(keepdims=keepdims)(x).numpy()
    assert top.shape == out and (top == -np.inf).all()


def test_empty_batch_and_no_features():
    for layer, shape, out in ((layers.GlobalAveragePooling2D(), (0, 3, 2, 4), (0, 4)),
                              (layers.GlobalMaxPooling2D(), (0, 3, 2, 4), (0, 4)),
                              (layers.GlobalAveragePooling1D(), (0, 3, 4), (0, 4)),
                              (layers.GlobalMaxPooling1D(), (0, 3, 4), (0, 4)),
                              (layers.GlobalAveragePooling2D(), (2, 3, 2, 0), (2, 0)),
                              (layers.GlobalMaxPooling1D(), (2, 3, 0), (2, 0))):
        assert layer(np.zeros(shape, np.float32)).shape == out


def test_gradient_of_no_elements():
    v = vdev.Variable(np.zeros((2, 0, 3, 4), np.float32))
    for layer in (layers.GlobalAveragePooling2D(), layers.GlobalMaxPooling2D()):
        with vdev.GradientTape() as tape:
            y = vdev.reduce_sum(layer(v))
        g = tape.gradient(y, v)
        assert g is not None and tuple(g.shape) == (2, 0, 3, 4)


def test_the_1d_layers_keep_keras_refusal_of_no_steps():
    for layer in (layers.GlobalAveragePooling1D(), layers.GlobalMaxPooling1D()):
        with pytest.raises(ValueError) as e:
            layer(np.zeros((2, 0, 3), np.float32))
        assert str(e.value) == ("Incorrect input shape [2, 0, 3] with dimension 0 at "
                                "reduction axis 1.")


def test_values_unchanged_where_there_are_elements():
    x = np.random.default_rng(0).standard_normal((3, 2, 5, 4)).astype(np.float32)
    top = layers.GlobalMaxPooling2D()(x).numpy()
    assert np.array_equal(top, x.max(axis=(1, 2)))
    mean = layers.GlobalAveragePooling2D()(x).numpy()
    np.testing.assert_allclose(mean, x.mean(axis=(1, 2)), rtol=1e-6, atol=1e-7)
