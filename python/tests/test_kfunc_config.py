"""A functional model's get_config and from_config (Keras 2.11's
get_network_config and reconstruct_from_config): the config's exact form
(each layer's calls as [layer, node index, tensor index, kwargs], a model
inside counting its calls from 1 as Keras's does), a round trip that gives
the same graph, the same config and, with the weights copied, the same
bits; a layer shared at two depths, a model and a Sequential inside, a
Lambda, a Sequential holding a functional model; InputLayer's config made
anew; and the errors for what cannot be serialized or rebuilt."""
import json

import numpy as np
import pytest

import vdev
from vdev import layers


def bits(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t).tobytes()


def shared_graph():
    """Two inputs; a Dense called at two depths (on an input, then on a
    layer after a Concatenate that takes its first call)."""
    a = vdev.Input((4,), name="a")
    b = vdev.Input((3,), name="b")
    shared = layers.Dense(5, name="shared", seed=1)
    ha = shared(a)
    cat = layers.Concatenate(name="cat")([ha, layers.Dense(5, name="pb", seed=2)(b)])
    back = shared(layers.Dense(4, name="back", seed=3)(cat))
    out = layers.Dense(1, name="out", seed=4)(layers.Add(name="sum")([back, ha]))
    return vdev.models.Model([a, b], out, name="two")


def x2(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((6, 4)).astype(np.float32),
            rng.standard_normal((6, 3)).astype(np.float32)]


def test_config_lists_each_call_as_keras_does():
    cfg = shared_graph().get_config()
    assert list(cfg) == ["name", "trainable", "layers", "input_layers", "output_layers"]
    assert cfg["name"] == "two" and cfg["trainable"] is True
    assert cfg["input_layers"] == [["a", 0, 0], ["b", 0, 0]]
    assert cfg["output_layers"] == [["out", 0, 0]]
    nodes = {l["name"]: (l["class_name"], l["inbound_nodes"]) for l in cfg["layers"]}
    assert [l["name"] for l in cfg["layers"]] == ["a", "b", "shared", "pb", "cat", "back",
                                                  "sum", "out"]
    assert nodes["a"] == ("InputLayer", [])
    assert nodes["shared"] == ("Dense", [[["a", 0, 0, {}]], [["back", 0, 0, {}]]])
    assert nodes["cat"] == ("Concatenate", [[["shared", 0, 0, {}], ["pb", 0, 0, {}]]])
    assert nodes["sum"] == ("Add", [[["shared", 1, 0, {}], ["shared", 0, 0, {}]]])
    layer_a = cfg["layers"][0]
    assert layer_a["config"] == {"batch_input_shape": (None, 4), "dtype": "float32",
                                 "sparse": False, "ragged": False, "name": "a"}
    assert cfg["layers"][4]["config"] == {"name": "cat", "trainable": True,
                                          "dtype": "float32", "axis": -1}
    json.dumps(cfg)  # Keras writes it as JSON


def test_from_config_rebuilds_the_graph_and_gives_the_same_bits():
    model = shared_graph()
    cfg = model.get_config()
    copy = vdev.models.Model.from_config(cfg)
    assert copy is not model and copy.name == "two"
    assert [l.name for l in copy.layers] == [l.name for l in model.layers]
    assert [type(l) for l in copy.layers] == [type(l) for l in model.layers]
    assert copy.get_config() == cfg
    assert len(copy.weights) == len(model.weights) == 8  # shared's weights once
    copy.set_weights(model.get_weights())
    assert bits(copy(x2())) == bits(model(x2()))
    # its own weights: training the copy leaves the model's as they were
    before = model.get_weights()
    copy.compile("sgd", "mse")
    copy.fit(x2(), np.ones((6, 1), np.float32), epochs=1, verbose=0)
    assert all(bits(w) == bits(v) for w, v in zip(before, model.get_weights()))
    # vdev.Model's from_config is the functional class's
    again = vdev.Model.from_config(cfg)  # Keras's: a Functional, which is a Model
    assert type(again).__name__ == "Functional" and isinstance(again, vdev.models.Model)


def test_a_model_inside_counts_its_calls_from_one():
    i = vdev.Input((4,), name="ii")
    inner = vdev.models.Model(i, layers.Dense(3, name="idense", seed=5)(i), name="inner")
    o = vdev.Input((4,), name="oi")
    outer = vdev.models.Model(o, layers.Add(name="oadd")([inner(o), inner(o)]), name="outer")
    cfg = outer.get_config()
    entry = cfg["layers"][1]
    assert (entry["class_name"], entry["name"]) == ("Functional", "inner")
    assert entry["inbound_nodes"] == [[["oi", 0, 0, {}]], [["oi", 0, 0, {}]]]
    assert entry["config"]["layers"][1]["inbound_nodes"] == [[["ii", 0, 0, {}]]]
    assert cfg["layers"][2]["inbound_nodes"] == [[["inner", 1, 0, {}], ["inner", 2, 0, {}]]]
    copy = vdev.models.Model.from_config(cfg)
    assert copy.get_config() == cfg
    assert isinstance(copy.get_layer("inner"), vdev.models.Model)
    copy.set_weights(outer.get_weights())
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert bits(copy(x)) == bits(outer(x))


def test_a_sequential_and_a_lambda_inside():
    seq = vdev.models.Sequential([layers.Dense(3, name="sd", input_shape=(4,), seed=6)],
                                 name="seqq")
    i = vdev.Input((4,), name="si")
    h = layers.Lambda(lambda t: vdev.multiply(t, 2.0), name="twice")(seq(i))
    model = vdev.models.Model(i, layers.Dense(1, name="sdo", seed=7)(h))
    cfg = model.get_config()
    # a Sequential of known input shape has a call of its own in Keras
    assert cfg["layers"][2]["inbound_nodes"] == [[["seqq", 1, 0, {}]]]
    copy = vdev.models.Model.from_config(cfg)
    assert [type(l).__name__ for l in copy.layers] == ["InputLayer", "Sequential", "Lambda",
                                                     "Dense"]
    copy.set_weights(model.get_weights())
    x = np.ones((3, 4), np.float32)
    assert bits(copy(x)) == bits(model(x))


def test_a_sequential_holding_a_functional_model():
    i = vdev.Input((4,), name="fi")
    inner = vdev.models.Model(i, layers.Dense(2, name="fd", seed=8)(i), name="func")
    seq = vdev.models.Sequential([inner, layers.Dense(1, name="after", seed=9)], name="s")
    cfg = seq.get_config()
    # Keras 2.11: the model's input shape is the inner model's Input's, so
    # its InputLayer (named after that Input) comes first
    assert [l["class_name"] for l in cfg["layers"]] == ["InputLayer", "Functional", "Dense"]
    assert cfg["layers"][0]["config"]["name"] == "fi_input"
    copy = vdev.models.Sequential.from_config(cfg)
    assert copy.get_config() == cfg
    x = np.ones((2, 4), np.float32)
    seq(x)
    copy(x)
    copy.set_weights(seq.get_weights())
    assert bits(copy(x)) == bits(seq(x))


def test_call_arguments_are_kept():
    i = vdev.Input((4,), name="ki")
    d = layers.Dense(2, name="kd", seed=10)
    model = vdev.models.Model(i, d(i, training=False))
    cfg = model.get_config()
    assert cfg["layers"][1]["inbound_nodes"] == [[["ki", 0, 0, {"training": False}]]]
    copy = vdev.models.Model.from_config(cfg)
    assert copy.get_config() == cfg


def test_input_layer_from_its_config():
    a = vdev.Input((2, 3), batch_size=5, name="in53", dtype="int32")
    layer = a._keras_history.layer
    cfg = layer.get_config()
    again = layers.InputLayer.from_config(cfg)
    assert again.get_config() == cfg
    assert again._batch_input_shape == (5, 2, 3)
    with pytest.raises(ValueError) as e:
        layers.InputLayer(input_shape=(3,), batch_input_shape=(None, 3))
    assert str(e.value) == ("Only provide the input_shape OR batch_input_shape argument to "
                            "InputLayer, not both at the same time.")


def test_errors():
    with pytest.raises(ValueError) as e:
        vdev.models.Model.from_config({"name": "m", "layers": []})
    assert str(e.value) == ("vdev's Model.from_config takes the config of a functional model "
                            "(Model.get_config(): name, layers, input_layers, output_layers); "
                            "this one has no 'input_layers' (keys: ['layers', 'name'])")
    cfg = shared_graph().get_config()
    cfg["layers"][2]["class_name"] = "Nope"
    with pytest.raises(ValueError) as e:
        vdev.models.Model.from_config(cfg)
    assert str(e.value).startswith("Unknown layer: 'Nope'. Please ensure you are using a "
                                   "`keras.utils.custom_object_scope`")
    cfg["layers"][2]["class_name"] = "Dense"
    cfg["layers"][3]["inbound_nodes"] = [[["pb", 0, 0, {}]]]  # pb takes itself
    with pytest.raises(ValueError) as e:
        vdev.models.Model.from_config(cfg)
    assert str(e.value) == ("vdev's Model.from_config cannot make the calls of layers "
                            "['back', 'cat', 'out', 'pb', 'shared', 'sum']: the layers they "
                            "take come from no call in the config")
    i = vdev.Input((4,), name="nj")
    model = vdev.models.Model(i, layers.Dense(2, name="nd")(i, training=np.float32))
    with pytest.raises(TypeError) as e:
        model.get_config()
    assert str(e.value) == ("Layer nd was passed non-JSON-serializable arguments. Arguments "
                            "had types: {'training': <class 'type'>}. They cannot be "
                            "serialized out when saving the model.")


def test_custom_objects():
    class Twice(layers.Lambda):
        def __init__(self, name=None, trainable=True, dtype=None, **kwargs):
            super().__init__(lambda t: vdev.multiply(t, 2.0), name=name, trainable=trainable,
                             dtype=dtype)

        def get_config(self):
            return {"name": self.name, "trainable": self.trainable, "dtype": "float32"}

    i = vdev.Input((3,), name="ci")
    model = vdev.models.Model(i, Twice(name="tw")(i))
    cfg = model.get_config()
    with pytest.raises(ValueError):
        vdev.models.Model.from_config(cfg)
    copy = vdev.models.Model.from_config(cfg, custom_objects={"Twice": Twice})
    assert isinstance(copy.get_layer("tw"), Twice)
    x = np.ones((2, 3), np.float32)
    assert bits(copy(x)) == bits(2 * x)


def test_every_layer_kind_round_trips():
    img = vdev.Input((8, 8, 3), name="img")
    ids = vdev.Input((5,), dtype="int32", name="ids")
    h = layers.MaxPooling2D()(layers.Conv2D(4, 3, activation="relu", seed=1)(img))
    h1 = layers.GlobalAveragePooling2D()(h)
    h2 = layers.Flatten()(layers.AveragePooling2D()(h))
    e = layers.Embedding(20, 4, seed=2)(ids)
    h3 = layers.GlobalMaxPooling1D()(e)
    h4 = layers.Flatten()(layers.GlobalAveragePooling1D(keepdims=True)(e))
    cat = layers.Concatenate()([h1, h2, h3, h4])
    mx = layers.Maximum()([layers.Dense(6, seed=3)(cat), layers.Dense(6, seed=4)(cat)])
    avg = layers.Average()([mx, layers.Subtract()([mx, layers.Multiply()([mx, mx])]),
                            layers.Minimum()([mx, mx])])
    out = layers.Dense(1, activation="sigmoid", seed=5)(layers.Add()([avg, mx]))
    model = vdev.models.Model([img, ids], out, name="big")
    cfg = model.get_config()
    json.dumps(cfg)
    copy = vdev.models.Model.from_config(cfg)
    assert copy.get_config() == cfg
    copy.set_weights(model.get_weights())
    rng = np.random.default_rng(0)
    x = [rng.standard_normal((3, 8, 8, 3)).astype(np.float32),
         rng.integers(0, 20, (3, 5)).astype(np.int32)]
    assert bits(copy(x)) == bits(model(x))
