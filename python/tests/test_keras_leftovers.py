"""Keras 2.11 behaviours of vdev's models checked one by one: Sequential.add
refuses what is not a layer (Keras's TypeError); a model ending in a Softmax
layer (over the last axis) or an Activation('softmax') layer trains on a
string cross-entropy from the logits, as Keras's loss takes the softmax's
input, with the numbers of a numpy reference; clone_model wraps a vdev
tensor given as an input tensor in an Input of its shape and dtype, as
Keras's Input(tensor=...); fit and evaluate on a string cross-entropy check
a Sequential's input shape as its call does; a Sequential built by a call
checks the width of a later symbolic call, as Keras's layers' specs do."""
import numpy as np
import pytest

import vdev
from vdev import layers
from vdev.models import Sequential

RNG = np.random.default_rng(7)
X = RNG.standard_normal((6, 4)).astype(np.float32)
LABELS = np.array([0, 1, 2, 0, 1, 2])
Y = np.eye(3, dtype=np.float32)[LABELS]


# ---- Sequential.add takes layers only ----

def relu(x):
    return vdev.nn.relu(x)


def test_add_refuses_what_is_not_a_layer():
    for bad in (relu, 3, "dense"):
        m = Sequential([layers.Dense(2, seed=1)])
        with pytest.raises(TypeError) as e:
            m.add(bad)
        assert str(e.value) == ("The added layer must be an instance of class Layer. Received: "
                                "layer=%s of type %s." % (bad, type(bad)))
        assert len(m.layers) == 1
    with pytest.raises(TypeError) as e:
        Sequential([layers.Dense(2, seed=1), relu])
    assert str(e.value).startswith("The added layer must be an instance of class Layer. "
                                   "Received: layer=<function relu at ")
    # a function wrapped in a Lambda is a layer (its output shape found by a
    # run on zeros, as Keras's, where it is given none)
    m = Sequential([layers.Dense(2, seed=1, input_shape=(4,)), layers.Lambda(relu),
                    layers.Dense(3, seed=2)])
    assert m.output_shape == (None, 3) and m.built
    assert tuple(m(X).shape) == (6, 3)


# ---- a Softmax or Activation('softmax') layer ending the model ----

def reference_cce(model, x, labels):
    """The mean categorical cross-entropy from the logits (numpy, float64)
    of a Dense then a softmax layer."""
    w, b = (v.numpy().astype(np.float64) for v in model.layers[0].variables)
    z = x.astype(np.float64) @ w + b
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -log_p[np.arange(len(labels)), labels].mean()


@pytest.mark.parametrize("last", [lambda: layers.Softmax(), lambda: layers.Softmax(axis=[-1]),
                                  lambda: layers.Activation("softmax")])
@pytest.mark.parametrize("loss", ["categorical_crossentropy", "sparse_categorical_crossentropy"])
def test_a_softmax_layer_ending_the_model_takes_a_string_cross_entropy(last, loss):
    y = Y if loss == "categorical_crossentropy" else LABELS
    m = Sequential([layers.Dense(3, input_shape=(4,), seed=1), last()])
    m.compile("sgd", loss)
    assert m.evaluate(X, y, verbose=0) == pytest.approx(reference_cce(m, X, LABELS), rel=1e-5)
    # the same bits as a Dense(activation='softmax') of the same seed: both from the logits
    d = Sequential([layers.Dense(3, input_shape=(4,), seed=1, activation="softmax")])
    d.compile("sgd", loss)
    h = m.fit(X, y, epochs=3, batch_size=4, shuffle=False, verbose=0).history["loss"]
    hd = d.fit(X, y, epochs=3, batch_size=4, shuffle=False, verbose=0).history["loss"]
    assert h == hd
    for a, b in zip(m.get_weights(), d.get_weights()):
        assert a.tobytes() == b.tobytes()
    assert m.evaluate(X, y, verbose=0) == pytest.approx(reference_cce(m, X, LABELS), rel=1e-5)
    out = m.predict(X, verbose=0)
    assert out.tobytes() == d.predict(X, verbose=0).tobytes()
    assert np.allclose(out.sum(axis=1), 1.0, atol=1e-6)


def test_a_functional_model_ending_in_a_softmax_layer():
    a = vdev.Input((4,))
    m = vdev.models.Model(a, layers.Softmax()(layers.Dense(3, seed=1)(a)))
    m.compile("sgd", "sparse_categorical_crossentropy")
    assert m.evaluate(X, LABELS, verbose=0) == pytest.approx(
        reference_cce(vdev.models.Sequential([m.layers[1]]), X, LABELS), rel=1e-5)
    before = m.get_weights()[0].copy()
    m.fit(X, LABELS, epochs=1, verbose=0)
    assert not np.array_equal(before, m.get_weights()[0])
    # the layer itself is left as it was: a call gives the probabilities
    assert np.allclose(m(X).numpy().sum(axis=1), 1.0, atol=1e-6)


def test_a_softmax_over_another_axis_gives_the_loss_probabilities():
    # as Keras, which finds no Softmax op over the last axis there
    m = Sequential([layers.Dense(3, input_shape=(4,), seed=1), layers.Softmax(axis=0)])
    m.compile("sgd", "categorical_crossentropy")
    assert m._loss_fn.from_logits is False and not m._from_probs
    # the binary cross-entropy takes a sigmoid's logits, not a softmax's
    for axis in (-1, 0):
        m = Sequential([layers.Dense(3, input_shape=(4,), seed=1), layers.Softmax(axis)])
        m.compile("sgd", "binary_crossentropy")
        assert m._loss_fn.from_logits is False and not m._from_probs
    with pytest.raises(ValueError) as e:
        layers.Softmax().activation = vdev.nn.relu
    assert str(e.value).startswith("vdev's Softmax takes activation = None only")


# ---- clone_model on values ----

def test_clone_model_wraps_a_tensor_in_an_input():
    a = vdev.Input((4,), name="a")
    m = vdev.models.Model(a, layers.Dense(2, seed=1, name="d")(a), name="m")
    t = vdev.constant(X[:3])
    c = vdev.models.clone_model(m, input_tensors=[t])
    assert c.input_names == ["input_wrapper_for_a"]
    assert tuple(c.inputs[0].shape) == (3, 4)  # Keras's: the tensor's shape, batch included
    assert c.inputs[0].dtype is vdev.float32
    c.set_weights(m.get_weights())
    assert c(X[:3]).numpy().tobytes() == m(X[:3]).numpy().tobytes()
    # a Sequential's Input is named after the tensor's name (a Variable's)
    s = Sequential([vdev.Input((4,), name="sin"), layers.Dense(2, seed=1)], name="s")
    on = vdev.models.clone_model(s, input_tensors=vdev.Variable(X[:3]))
    assert on._input_layer.name == "input_wrapper_for_Variable"
    assert on.input_shape == (3, 4) and on.name == "s"
    on = vdev.models.clone_model(s, input_tensors=[t])
    assert on._input_layer._batch_input_shape == (3, 4)
    on.set_weights(s.get_weights())
    assert on(X[:3]).numpy().tobytes() == s(X[:3]).numpy().tobytes()
    with pytest.raises(TypeError) as e:
        vdev.models.clone_model(s, input_tensors=[[1.0, 2.0]])
    assert str(e.value) == (
        "vdev's clone_model takes as input_tensors vdev.Input tensors or vdev tensors (a "
        "tensor is wrapped in an Input of its shape and dtype, as Keras's Input(tensor=...)), "
        "not a value of type list: give vdev.constant(value) or the tensor of "
        "vdev.Input(shape, dtype=...)")


# ---- fit and evaluate check the model's input shape ----

def test_fit_on_a_string_cross_entropy_checks_the_input_as_a_call():
    m = Sequential([layers.Dense(3, input_shape=(4,), seed=1, activation="softmax")],
                   name="seq")
    m.compile("sgd", "categorical_crossentropy")
    want = ('Input 0 of layer "seq" is incompatible with the layer: expected shape=(None, 4), '
            "found shape=(2, 5)")
    x = np.zeros((2, 5), np.float32)
    for run in (lambda: m(x), lambda: m.predict(x, verbose=0),
                lambda: m.fit(x, Y[:2], verbose=0), lambda: m.evaluate(x, Y[:2], verbose=0)):
        with pytest.raises(ValueError) as e:
            run()
        assert str(e.value) == want
    assert m.optimizer.iterations == 0


# ---- a Sequential built by a call checks a symbolic call's width ----

def test_a_symbolic_call_of_another_width_after_a_build():
    m = Sequential([layers.Dense(3, seed=1, name="d1"), layers.Dense(2, seed=2)], name="seq")
    m(X)
    with pytest.raises(ValueError) as e:
        m(vdev.Input((5,)))
    assert str(e.value) == ('Input 0 of layer "d1" is incompatible with the layer: expected '
                            "axis -1 of input shape to have value 4, but received input with "
                            "shape (None, 5)")
    assert tuple(m(vdev.Input((4,))).shape) == (None, 2)
    b = Sequential([layers.Dense(3, seed=1, name="d2")])
    b.build((None, 4))
    with pytest.raises(ValueError) as e:
        b(vdev.Input((6,)))
    assert "layer \"d2\"" in str(e.value) and "shape (None, 6)" in str(e.value)
    # a model inside, itself built by a call
    inner = Sequential([layers.Dense(3, seed=1, name="di")])
    outer = Sequential([layers.Dense(5, seed=1, name="do"), inner], name="outer")
    outer(X)
    with pytest.raises(ValueError) as e:
        outer(vdev.Input((6,)))
    assert str(e.value).startswith('Input 0 of layer "do" is incompatible')
    # not built yet: any width builds it, as before
    assert tuple(Sequential([layers.Dense(3, seed=1)])(vdev.Input((7,))).shape) == (None, 3)
