"""vdev.models.clone_model of a functional model, as Keras 2.11's
(keras/models/cloning.py): new layers (each made from its config, or
clone_function's), the same graph (a layer shared at two depths, a model and
a Sequential inside, called twice), the same config, new variables (the
same bits once the weights are copied), new Inputs of the same names or the
Inputs input_tensors gives; Keras's errors for a bad model, a
clone_function that is not callable, too many input tensors, and a Sequential
given two tensors or one not of an Input; vdev's for an input that is a numpy
array (Keras's Input(tensor=...) fails on it too)."""
import numpy as np
import pytest

import vdev
from vdev import layers


def bits(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t).tobytes()


def shared_graph():
    a = vdev.Input((4,), name="a")
    b = vdev.Input((3,), name="b")
    shared = layers.Dense(5, name="shared", seed=1)
    ha = shared(a)
    cat = layers.Concatenate(name="cat")([ha, layers.Dense(5, name="pb", seed=2)(b)])
    back = shared(layers.Dense(4, name="back", seed=3)(cat))
    out = layers.Dense(1, name="out", seed=4)(layers.Add(name="sum")([back, ha]))
    return vdev.models.Model([a, b], out, name="two")


def nested_graph():
    """A functional model and a Sequential (its Input first) inside, each
    called twice."""
    x = vdev.Input((4,), name="x")
    inner_in = vdev.Input((4,), name="inner_in")
    inner = vdev.models.Model(inner_in, layers.Dense(3, seed=5, name="id")(inner_in),
                              name="inner")
    seq = vdev.models.Sequential([vdev.Input((3,)), layers.Dense(2, seed=6, name="sd")],
                                 name="seq")
    out = layers.Add(name="add2")([seq(inner(x)), seq(inner(x))])
    return vdev.models.Model(x, out, name="nested")


def xs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((6, 4)).astype(np.float32),
            rng.standard_normal((6, 3)).astype(np.float32)]


@pytest.mark.parametrize("make,x", [(shared_graph, xs()), (nested_graph, xs()[0])])
def test_the_clone_is_the_same_graph_with_new_layers_and_variables(make, x):
    model = make()
    clone = vdev.models.clone_model(model)
    assert type(clone) is type(model) and clone.name == model.name
    assert [l.name for l in clone.layers] == [l.name for l in model.layers]
    assert [type(l) for l in clone.layers] == [type(l) for l in model.layers]
    assert all(a is not b for a, b in zip(clone.layers, model.layers))
    assert clone.input_names == model.input_names
    assert clone.get_config() == model.get_config()
    assert [tuple(w.shape) for w in clone.weights] == [tuple(w.shape) for w in model.weights]
    assert not {id(w) for w in clone.weights} & {id(w) for w in model.weights}
    before = model.get_weights()
    clone.set_weights([w + 1.0 for w in before])  # the clone's own variables
    for w, b in zip(model.get_weights(), before):
        assert bits(w) == bits(b)
    clone.set_weights(before)
    assert bits(clone(x)) == bits(model(x))


def test_a_model_inside_counts_its_calls_from_one_and_round_trips():
    # a Sequential whose Input came first is numbered as Keras's, from 1
    model = nested_graph()
    cfg = model.get_config()
    assert cfg["layers"][-1]["inbound_nodes"] == [[["seq", 1, 0, {}], ["seq", 2, 0, {}]]]
    again = vdev.models.Model.from_config(cfg)
    assert again.get_config() == cfg


def test_clone_function_is_called_once_per_layer_and_may_share_it():
    model = shared_graph()
    seen = []
    same = vdev.models.clone_model(model, clone_function=lambda l: seen.append(l.name) or l)
    assert seen == ["shared", "pb", "cat", "back", "sum", "out"]  # not the Inputs
    assert [id(w) for w in same.weights] == [id(w) for w in model.weights]
    assert all(a is not b for a, b in zip(same.inputs, model.inputs))
    assert bits(same(xs(1))) == bits(model(xs(1)))
    # a clone_function may give another layer: its calls are made the same way
    wider = vdev.models.clone_model(model, clone_function=lambda l: layers.Dense(
        7, name="out", seed=9) if l.name == "out" else l)
    assert tuple(wider.get_layer("out").kernel.shape) == (5, 7)
    assert wider.get_layer("back").kernel is model.get_layer("back").kernel
    assert tuple(wider(xs(1)).shape) == (6, 7)


def test_input_tensors_take_the_inputs_places():
    model = shared_graph()
    a, b = vdev.Input((4,), name="na"), vdev.Input((3,), name="nb")
    clone = vdev.models.clone_model(model, input_tensors=[a, b])
    assert clone.inputs[0] is a and clone.inputs[1] is b
    assert clone.input_names == ["na", "nb"]
    # one tensor of two: the other Input is made anew
    half = vdev.models.clone_model(model, input_tensors=[vdev.Input((4,), name="only")])
    assert half.input_names == ["only", "b"]
    clone.set_weights(model.get_weights())
    assert bits(clone(xs(2))) == bits(model(xs(2)))


def test_the_errors():
    model = shared_graph()
    with pytest.raises(ValueError) as e:
        vdev.models.clone_model(model, clone_function=3)
    assert str(e.value) == "Expected `layer_fn` argument to be a callable. Received: layer_fn=3"
    with pytest.raises(ValueError) as e:
        vdev.models.clone_model(layers.Dense(2))
    assert str(e.value).startswith("Expected `model` argument to be a `Model` instance. "
                                   "Received: model=<vdev.layers.Dense")
    with pytest.raises(IndexError):  # Keras's: more tensors than the model's inputs
        vdev.models.clone_model(model, input_tensors=[vdev.Input((4,)), vdev.Input((3,)),
                                                      vdev.Input((2,))])
    value = np.zeros((2, 4), np.float32)
    with pytest.raises(TypeError) as e:  # a vdev tensor is wrapped: test_keras_leftovers.py
        vdev.models.clone_model(model, input_tensors=[value])
    assert str(e.value) == (
        "vdev's clone_model takes as input_tensors vdev.Input tensors or vdev tensors (a "
        "tensor is wrapped in an Input of its shape and dtype, as Keras's Input(tensor=...)), "
        "not a value of type ndarray of shape (2, 4): give vdev.constant(value) or the tensor "
        "of vdev.Input(shape, dtype=...)")
    mid = layers.Dense(4, name="mid")(vdev.Input((4,)))
    with pytest.raises(ValueError) as e:
        vdev.models.clone_model(model, input_tensors=[mid])
    assert str(e.value) == (
        "vdev's Model takes as inputs the tensors of vdev.Input only, not %r, made by layer "
        "\"mid\" (Keras copies the layers before it): make an Input of its shape" % (mid,))


def test_a_sequential_clone_on_input_tensors():
    seq = vdev.models.Sequential([vdev.Input((4,), name="sin"), layers.Dense(2, seed=1)],
                                 name="s")
    plain = vdev.models.clone_model(seq)
    assert plain._input_layer is not seq._input_layer
    assert plain._input_layer.name == "sin"  # Keras clones the InputLayer from its config
    new = vdev.Input((4,), name="given")
    on = vdev.models.clone_model(seq, input_tensors=new)
    assert on._input_layer is new._keras_history.layer and on.built
    with pytest.raises(ValueError) as e:
        vdev.models.clone_model(seq, input_tensors=[new, new])
    assert str(e.value) == ("To clone a `Sequential` model, we expect at most one tensor as "
                            "part of `input_tensors`. Received: input_tensors=[%r, %r]"
                            % (new, new))
    mid = layers.Dense(4)(new)
    with pytest.raises(ValueError) as e:
        vdev.models.clone_model(seq, input_tensors=mid)
    assert str(e.value) == (
        "Cannot clone a `Sequential` model on top of a tensor that comes from a Keras layer "
        "other than an `InputLayer`. Use the Functional API instead. Received: "
        "input_tensors=%s" % (mid,))
    with pytest.raises(TypeError):
        vdev.models.clone_model(seq, input_tensors=np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError) as e:
        vdev.models.clone_model(seq, clone_function="no")
    assert str(e.value) == ("Expected `layer_fn` argument to be a callable. Received: "
                            "layer_fn=no")
