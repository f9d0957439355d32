"""A functional model's calls as Keras 2.11 makes them: a model whose
output is one of its Inputs gives tensors (predict works); a model called
on a symbolic tensor checks its shape as its InputSpec does, as a call on
values does; that spec leaves the batch free (Keras's
shape_with_no_batch_size), so an Input of a fixed batch_size takes other
batches; and fit of a frozen model (no trainable weights) applies nothing
and logs the loss, as Keras 2.11's optimizer (apply_gradients of nothing is
a no-op), on one device and under a MirroredStrategy. A Dense or Conv2D
not yet built, called on a symbolic tensor whose last size is unknown, is
Keras's build error (it was an AttributeError)."""
import numpy as np
import pytest

import vdev
from vdev import layers
from conftest import clean_env

X = np.arange(8, dtype=np.float32).reshape(2, 4)


def test_an_input_as_output_gives_tensors():
    a = vdev.Input((4,))
    ident = vdev.models.Model(a, a)
    out = ident(X)
    assert isinstance(out, vdev.Tensor) and np.array_equal(out.numpy(), X)
    assert np.array_equal(ident.predict(X, verbose=0), X)
    i = vdev.Input((4,), dtype="int32")
    out = vdev.models.Model(i, i)(X)
    assert isinstance(out, vdev.Tensor) and out.dtype == vdev.int32
    b = vdev.Input((4,))
    both = vdev.models.Model(b, [b, layers.Dense(1, seed=1)(b)])
    first, second = both(X)
    assert isinstance(first, vdev.Tensor) and tuple(second.shape) == (2, 1)


def test_a_model_called_on_a_symbolic_tensor_checks_its_shape():
    a = vdev.Input((4,))
    m = vdev.models.Model(a, layers.Dense(1, seed=1)(a), name="m4")
    with pytest.raises(ValueError) as e:
        m(vdev.Input((5,)))
    assert str(e.value) == ('Input 0 of layer "m4" is incompatible with the layer: expected '
                            "shape=(None, 4), found shape=(None, 5)")
    with pytest.raises(ValueError) as e:
        m(np.zeros((3, 5), np.float32))
    assert str(e.value) == ('Input 0 of layer "m4" is incompatible with the layer: expected '
                            "shape=(None, 4), found shape=(3, 5)")
    assert tuple(m(vdev.Input((4, 1))).shape) == (None, 1)  # a trailing 1, as Keras


def test_a_fixed_batch_size_is_not_checked():
    a = vdev.Input((4,), batch_size=3)
    m = vdev.models.Model(a, layers.Dense(1, seed=1)(a), name="b3")
    assert tuple(m(X).shape) == (2, 1)
    with pytest.raises(ValueError) as e:
        m(np.zeros((3, 5), np.float32))
    assert str(e.value) == ('Input 0 of layer "b3" is incompatible with the layer: expected '
                            "shape=(None, 4), found shape=(3, 5)")


def frozen():
    a = vdev.Input((4,))
    m = vdev.models.Model(a, layers.Dense(1, seed=1)(a))
    m.trainable = False
    m.compile("sgd", "mse")
    return m


def test_fit_of_a_frozen_model_applies_nothing():
    m = frozen()
    before = m.get_weights()
    y = np.ones((2, 1), np.float32)
    want = m.evaluate(X, y, verbose=0)
    hist = m.fit(X, y, epochs=2, verbose=0).history
    assert hist["loss"] == [want, want]
    assert all(np.array_equal(a, b) for a, b in zip(before, m.get_weights()))
    assert int(m.optimizer.iterations) == 0


def test_fit_of_a_frozen_model_under_a_strategy(monkeypatch):
    clean_env(monkeypatch, "2x512MiB")
    vdev.shutdown()
    strategy = vdev.distribute.MirroredStrategy()
    with strategy.scope():
        m = frozen()
    before = m.get_weights()
    y = np.ones((2, 1), np.float32)
    hist = m.fit(X, y, epochs=1, verbose=0).history
    assert hist["loss"] == [m.evaluate(X, y, verbose=0)]
    assert all(np.array_equal(a, b) for a, b in zip(before, m.get_weights()))


def test_an_unknown_last_size_is_keras_build_error():
    for make, shape, text in (
            (lambda: layers.Dense(2), (None,),
             "The last dimension of the inputs to a Dense layer should be defined. Found None. "
             "Full input shape received: (None, None)"),
            (lambda: layers.Conv2D(2, 3), (5, 5, None),
             "The channel dimension of the inputs should be defined. The input_shape received "
             "is (None, 5, 5, None), where axis -1 (0-based) is the channel dimension, which "
             "found to be `None`.")):
        layer = make()
        with pytest.raises(ValueError) as e:
            layer(vdev.Input(shape))
        assert str(e.value) == text
        assert layer.kernel is None  # nothing made
