"""vdev.models.Sequential against Keras 2.11's tf.keras.Sequential where the
input shape is given (an Input first, or a first layer given input_shape):
add calls each layer on the model's output, so a layer built for another
input width is refused there with Keras's InputSpec error; the model has
Keras's inputs / outputs / input / output / input_shape / output_shape /
input_names / output_names and get_layer (its errors in Keras's words);
get_config lists the model's InputLayer first (one named after the first
layer when that layer was given input_shape) and from_config and
clone_model bring it back; a call of another width is the model's InputSpec
error, naming the model; pop() and build(input_shape) are Keras's."""
import json

import numpy as np
import pytest

import vdev
from vdev import layers
from vdev.models import Model, Sequential


def built_dense(width, name):
    d = layers.Dense(3, name=name, seed=5)
    d.build(width)
    return d


# ---- add: a layer that cannot take the model's output ----

def test_add_refuses_a_dense_built_for_another_width():
    want = ('Input 0 of layer "d5" is incompatible with the layer: expected axis -1 of input '
            "shape to have value 5, but received input with shape (None, 4)")
    for start in ([vdev.Input((4,))], [layers.InputLayer(input_shape=(4,))],
                  [layers.Dense(4, input_shape=(2,), name="first", seed=1)]):
        m = Sequential(start)
        before = [l.name for l in m.layers]
        with pytest.raises(ValueError) as e:
            m.add(built_dense(5, "d5"))
        assert str(e.value) == want
        assert [l.name for l in m.layers] == before  # not added
        with pytest.raises(ValueError) as e:  # given to the constructor too
            Sequential(start + [built_dense(5, "d5")])
        assert str(e.value) == want
    # a Conv2D built for other channels, a Dense after an Input of unknown width
    with pytest.raises(ValueError) as e:
        Sequential([vdev.Input((8, 8, 3)), layers.Conv2D(2, 3, input_shape=(8, 8, 4),
                                                         name="c4")])
    assert str(e.value) == ('Input 0 of layer "c4" is incompatible with the layer: expected '
                            "axis -1 of input shape to have value 4, but received input with "
                            "shape (None, 8, 8, 3)")
    with pytest.raises(ValueError) as e:
        Sequential([vdev.Input((None,)), layers.Dense(2)])
    assert str(e.value) == ("The last dimension of the inputs to a Dense layer should be "
                            "defined. Found None. Full input shape received: (None, None)")
    # a model that does not know its input shape checks nothing at add (as Keras's)
    deferred = Sequential([layers.Dense(4, name="free")])
    deferred.add(built_dense(5, "d5b"))
    assert [l.name for l in deferred.layers] == ["free", "d5b"]


# ---- inputs, outputs, shapes, get_layer ----

def test_inputs_outputs_and_shapes():
    m = Sequential([vdev.Input((4,), name="x"), layers.Dense(3, name="h", seed=1),
                    layers.Dense(2, name="o", seed=2)], name="s")
    assert m.input_shape == (None, 4) and m.output_shape == (None, 2)
    assert m.input_names == ["x"] and m.output_names == ["o"]
    assert len(m.inputs) == 1 and m.inputs[0] is m.input and m.outputs[0] is m.output
    assert repr(m.input) == "<KerasTensor: shape=(None, 4) dtype=float32 (created by layer 'x')>"
    assert repr(m.output) == "<KerasTensor: shape=(None, 2) dtype=float32 (created by layer 'o')>"
    # a functional model of them computes what the model does
    f = Model(m.inputs, m.outputs)
    assert [l.name for l in f.layers] == ["x", "h", "o"]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert f(x).numpy().tobytes() == m(x).numpy().tobytes()
    # add and pop move the output
    m.add(layers.Dense(1, name="z", seed=3))
    assert m.output_shape == (None, 1) and m.output_names == ["z"]
    m.pop()
    assert m.output_shape == (None, 2) and m.output_names == ["o"]
    # a first layer given input_shape: the InputLayer named after it
    n = Sequential([layers.Dense(3, input_shape=(6,), name="first", seed=1)])
    assert n.input_names == ["first_input"] and n.input_shape == (None, 6)


def test_a_model_without_inputs():
    m = Sequential([layers.Dense(3, name="a")], name="u")
    assert m.inputs is None and m.outputs is None
    assert m.input_names is None and m.output_names is None
    for attr, missing in (("input_shape", "_nested_inputs"), ("input", "_nested_inputs"),
                          ("output_shape", "_nested_outputs"), ("output", "_nested_outputs")):
        with pytest.raises(AttributeError) as e:
            getattr(m, attr)
        assert str(e.value) == "'Sequential' object has no attribute '%s'" % (missing,)
        assert not hasattr(m, attr)
    # once a call (or build) gave its input shape, it has them (batch None)
    m(np.ones((2, 4), np.float32))
    assert m.input_shape == (None, 4) and m.output_shape == (None, 3)
    assert m.input_names == ["a_input"]


def test_get_layer():
    a, b = layers.Dense(3, name="a", seed=1), layers.Dense(2, name="b", seed=2)
    m = Sequential([vdev.Input((4,)), a, b])
    assert m.get_layer("b") is b and m.get_layer(index=0) is a  # the Input not counted
    cases = [((), {}, "Provide either a layer name or layer index at `get_layer`."),
             (("zz",), {}, "No such layer: zz. Existing layers are: ['a', 'b']."),
             ((), {"index": 2}, "Was asked to retrieve layer at index 2 but model only has 2 "
                                "layers."),
             (("a", 0), {}, "Provide only a layer name or a layer index. Received: index=0, "
                            "name=a.")]
    for args, kwargs, want in cases:
        with pytest.raises(ValueError) as e:
            m.get_layer(*args, **kwargs)
        assert str(e.value) == want


# ---- get_config / from_config / clone_model ----

def test_config_lists_the_input_layer_first():
    m = Sequential([vdev.Input((4,), name="x"), layers.Dense(3, name="h", seed=1)], name="s")
    cfg = m.get_config()
    assert cfg["layers"][0] == {"class_name": "InputLayer", "config": {
        "batch_input_shape": (None, 4), "dtype": "float32", "sparse": False, "ragged": False,
        "name": "x"}}
    assert [c["class_name"] for c in cfg["layers"]] == ["InputLayer", "Dense"]
    assert "batch_input_shape" not in cfg["layers"][1]["config"]  # Keras's: on the Input only
    assert "build_input_shape" not in cfg
    n = Sequential([layers.Dense(3, input_shape=(6,), name="first", seed=1),
                    layers.Dense(2, name="second", seed=2)], name="t")
    ncfg = n.get_config()
    assert ncfg["layers"][0]["config"]["name"] == "first_input"
    assert ncfg["layers"][0]["config"]["batch_input_shape"] == (None, 6)
    assert ncfg["layers"][1]["config"]["batch_input_shape"] == (None, 6)
    for model, config in ((m, cfg), (n, ncfg)):
        for copy in (Sequential.from_config(json.loads(json.dumps(config))),
                     Sequential.from_config(config), vdev.models.clone_model(model)):
            assert copy.get_config() == config
            assert copy.built and copy.input_names == model.input_names
            copy.set_weights(model.get_weights())
            x = np.arange(2 * model.input_shape[1], dtype=np.float32).reshape(2, -1)
            assert copy(x).numpy().tobytes() == model(x).numpy().tobytes()


# ---- a call of another width ----

def test_a_call_of_another_width_names_the_model():
    m = Sequential([vdev.Input((4,)), layers.Dense(3, name="inner", seed=1)], name="seq")
    want = ('Input 0 of layer "seq" is incompatible with the layer: expected shape=(None, 4), '
            "found shape=(2, 5)")
    for x in (np.ones((2, 5), np.float32), vdev.constant(np.ones((2, 5), np.float32))):
        with pytest.raises(ValueError) as e:
            m(x)
        assert str(e.value) == want
    with pytest.raises(ValueError) as e:
        m(vdev.Input((5,)))
    assert str(e.value) == ('Input 0 of layer "seq" is incompatible with the layer: expected '
                            "shape=(None, 4), found shape=(None, 5)")
    x = np.ones((2, 4), np.float32)
    with pytest.raises(ValueError) as e:
        m([x, x])
    assert str(e.value).startswith('Layer "seq" expects 1 input(s), but it received 2 input '
                                   "tensors. Inputs received: [")
    assert m([x]).numpy().tobytes() == m(x).numpy().tobytes()
    # a model that does not know its input shape: the layer inside names itself (as Keras's)
    d = Sequential([layers.Dense(3, name="din", seed=1)], name="dseq")
    d(x)
    with pytest.raises(ValueError) as e:
        d(np.ones((2, 5), np.float32))
    assert 'layer "din"' in str(e.value)


# ---- pop, build, one layer ----

def test_pop_build_and_a_single_layer():
    m = Sequential([vdev.Input((4,)), layers.Dense(3, name="p1", seed=1)])
    m.pop()
    assert m.layers == [] and m.inputs is None  # as Keras's: no layers, no inputs
    with pytest.raises(TypeError) as e:
        m.pop()
    assert str(e.value) == "There are no layers in the model."
    b = Sequential([layers.Dense(3, name="b1", seed=1), layers.Dense(2, name="b2", seed=2)])
    with pytest.raises(ValueError) as e:
        b.build()
    assert str(e.value) == "You must provide an `input_shape` argument."
    assert not b.built
    b.build((None, 4))
    assert b.built and [tuple(w.shape) for w in b.weights] == [(4, 3), (3,), (3, 2), (2,)]
    assert b.input_shape == (None, 4) and b.get_config()["build_input_shape"] == (None, 4)
    c = Sequential([layers.Dense(3, name="c1", seed=1), built_dense(5, "c5")])
    with pytest.raises(ValueError) as e:
        c.build((None, 4))
    assert str(e.value) == ('Input 0 of layer "c5" is incompatible with the layer: expected '
                            "axis -1 of input shape to have value 5, but received input with "
                            "shape (None, 3)")
    assert [l.name for l in Sequential(layers.Dense(2, name="only")).layers] == ["only"]
