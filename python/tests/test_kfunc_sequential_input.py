"""Keras's Sequential([keras.Input(shape), ...]): an Input (its tensor, or
an InputLayer) given first is the model's input, as Keras 2.11's
Sequential.add takes it: the layers after it are built from its shape at
once, it is not one of ``layers`` (nor a summary row), its shape goes into
get_config as an InputLayer entry first (Keras 2.11's form) and comes back through
from_config and clone_model; an Input after other layers is a ValueError.
It was a TypeError ("The added layer must be callable")."""
import numpy as np
import pytest

import vdev
from vdev import layers


def model():
    return vdev.models.Sequential([vdev.Input((4,)), layers.Dense(3, seed=1, name="d1"),
                                   layers.Dense(1, seed=2, name="d2")], name="seq")


def test_an_input_first_builds_the_model():
    m = model()
    assert m.built and [l.name for l in m.layers] == ["d1", "d2"]
    assert [tuple(w.shape) for w in m.weights] == [(4, 3), (3,), (3, 1), (1,)]
    lines = []
    m.summary(print_fn=lines.append)
    assert lines[4] == " d1 (Dense)                  (None, 3)                 15        "
    assert not any("InputLayer" in line for line in lines)
    x = np.ones((2, 4), np.float32)
    assert tuple(m(x).shape) == (2, 1)
    m.compile("sgd", "mse")
    assert len(m.fit(x, np.ones((2, 1), np.float32), verbose=0).history["loss"]) == 1


def test_an_input_layer_first_too():
    m = vdev.models.Sequential([layers.InputLayer(input_shape=(5,)), layers.Dense(2, seed=3)])
    assert m.built and len(m.layers) == 1
    assert tuple(m.weights[0].shape) == (5, 2)


def test_config_from_config_and_clone():
    m = model()
    cfg = m.get_config()
    assert cfg["layers"][0]["config"]["batch_input_shape"] == (None, 4)
    assert "build_input_shape" not in cfg
    for copy in (vdev.models.Sequential.from_config(cfg), vdev.models.clone_model(m)):
        assert copy.built and [l.name for l in copy.layers] == ["d1", "d2"]
        assert copy.get_config() == cfg
        copy.set_weights(m.get_weights())
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        assert copy(x).numpy().tobytes() == m(x).numpy().tobytes()


def test_an_input_after_other_layers_is_refused():
    with pytest.raises(ValueError) as e:
        vdev.models.Sequential([layers.Dense(2, name="first"), vdev.Input((4,))])
    assert str(e.value) == ("vdev's Sequential takes an Input (or InputLayer) as its first "
                            "layer only, not after ['first']")
    m = vdev.models.Sequential([vdev.Input((4,))])
    with pytest.raises(ValueError):
        m.add(vdev.Input((4,)))
    assert m.layers == []


def test_under_a_strategy_the_weights_are_mirrored(monkeypatch):
    from conftest import clean_env
    clean_env(monkeypatch, "2x512MiB")
    vdev.shutdown()
    s = vdev.distribute.MirroredStrategy()
    with s.scope():
        m = model()
    assert all(hasattr(v, "values") for v in m.weights)
