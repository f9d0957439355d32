"""Keras 2.11's subclassing API: layers of one's own (build, call,
add_weight; sublayers and weights tracked; the training flag and masks;
in Sequential and functional models, on a GPU scope, under a
MirroredStrategy) and subclassed models (Model with call: compile, fit,
evaluate, predict, summary, save_weights / load_weights, a mirrored fit);
Model(inputs, outputs) a Functional that is a Model, as Keras's; the
errors in Keras's words."""
import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(20261221)
f32 = np.float32


class Linear(layers.Layer):  # Keras's guide's layer
    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight("w", shape=(input_shape[-1], self.units),
                                 initializer="random_normal", trainable=True)
        self.b = self.add_weight("b", shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        return vdev.matmul(inputs, self.w) + self.b


class Block(layers.Layer):
    def __init__(self):
        super().__init__()
        self.parts = [Linear(8), Linear(2)]
        self.drop = layers.Dropout(0.5, seed=3)
        self.count = self.add_weight("count", shape=(), dtype="int32", trainable=False)

    def call(self, x, training=False):
        h = vdev.nn.relu(self.parts[0](x))
        return self.parts[1](self.drop(h, training=training))


class Masked(layers.Layer):
    def call(self, x, mask=None):
        # Keras's idiom: a mask is bool, cast to the data's dtype to multiply
        return x if mask is None else x * vdev.cast(vdev.reshape(mask, list(mask.shape) + [1]),
                                                     x.dtype)


def test_layers_of_ones_own():
    x = rng.uniform(-1, 1, (4, 3)).astype(f32)
    with vdev.device("GPU:1"):
        lin = Linear(5)
        y = lin(x)
    assert y.device.endswith("GPU:1") and lin.w.device.endswith("GPU:1")
    assert lin.built and [v.name for v in lin.weights] == [lin.name + "/w", lin.name + "/b"]
    np.testing.assert_allclose(y.numpy(), x @ lin.w.numpy() + lin.b.numpy(), rtol=1e-6)
    blk = Block()
    out = blk(x)
    assert out.shape == (4, 2)
    # its own weight, then its layers', in their order; the int32 count not trainable
    assert [v.name.split("/")[-1] for v in blk.weights] == ["count", "w", "b", "w", "b"]
    assert len(blk.trainable_weights) == 4 and len(blk.non_trainable_weights) == 1
    # training: the call's flag, else the model's (fit), else inference
    np.testing.assert_array_equal(blk(x).numpy(), out.numpy())
    assert not np.array_equal(blk(x, training=True).numpy(), out.numpy())
    blk.trainable = False
    assert blk.trainable_weights == [] and not blk.parts[0].trainable
    # masks: a call taking mask gets its inputs' (Keras's)
    ids = np.array([[1, 2, 0]], np.int32)
    e = layers.Embedding(4, 2, mask_zero=True, seed=1)(ids)
    np.testing.assert_array_equal(Masked()(e).numpy()[0, 2], 0)
    # in a Sequential and a functional model; fitting trains its weights
    model = vdev.models.Sequential([vdev.Input((3,)), Block(), layers.Dense(1, seed=2)])
    model.compile(vdev.optimizers.Adam(0.02), "mse")
    before = model.layers[0].parts[0].w.numpy().copy()
    hist = model.fit(x, x.sum(1, keepdims=True), epochs=5, verbose=0).history["loss"]
    assert hist[-1] < hist[0] and not np.array_equal(before, model.layers[0].parts[0].w.numpy())
    inp = vdev.Input((3,))
    fm = vdev.Model(inp, Linear(2)(inp))
    assert fm.count_params() == 8
    with pytest.raises(NotImplementedError) as err:
        Linear(2).get_config()
    assert str(err.value) == ("Layer Linear has arguments ['units'] in `__init__` and therefore "
                              "must override `get_config()`.")
    assert Masked(name="m").get_config() == {"name": "m", "trainable": True, "dtype": "float32"}
    with pytest.raises(TypeError) as err:
        Linear(2, colour="red")
    assert err.value.args == ("Keyword argument not understood:", "colour")
    plain = layers.Layer()
    np.testing.assert_array_equal(plain(x).numpy(), x)  # Keras's base call: the inputs


class MyModel(vdev.Model):  # Keras's guide's model
    def __init__(self):
        super().__init__()
        self.dense1 = layers.Dense(16, activation="relu", seed=1)
        self.dropout = layers.Dropout(0.2, seed=2)
        self.dense2 = layers.Dense(3, seed=3)

    def call(self, inputs, training=False):
        return self.dense2(self.dropout(self.dense1(inputs), training=training))


def test_subclassed_models(tmp_path):
    x = rng.uniform(-1, 1, (64, 4)).astype(f32)
    y = np.argmax(x[:, :3], 1)
    m = MyModel()
    assert isinstance(m, vdev.Model) and not m.built and m.layers == [m.dense1, m.dropout,
                                                                      m.dense2]
    with pytest.raises(ValueError) as e:
        m.summary()
    assert str(e.value).startswith("This model has not yet been built.")
    m.compile(vdev.optimizers.Adam(0.02),
              vdev.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    hist = m.fit(x, y, epochs=20, verbose=0).history
    assert hist["accuracy"][-1] > 0.8 and m.built and len(m.trainable_variables) == 4
    lines = []
    m.summary(print_fn=lines.append)
    assert any("multiple" in l and "dense" in l for l in lines)
    assert "Total params: 131" in lines
    m.save_weights(str(tmp_path / "w"))
    again = MyModel()
    again(x[:1])
    again.load_weights(str(tmp_path / "w"))
    np.testing.assert_array_equal(again.predict(x, verbose=0), m.predict(x, verbose=0))
    with pytest.raises(ValueError) as e:
        m(vdev.Input((4,)))
    assert "is called on tensors and arrays, not on symbolic tensors" in str(e.value)
    assert m.get_config() == {"name": m.name, "trainable": True, "dtype": "float32"}
    with pytest.raises(ValueError) as e:
        m.save(str(tmp_path / "whole"))
    assert str(e.value).startswith("vdev's model.save writes a functional or Sequential model")
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with strategy.scope():
        mm = MyModel()
        mm.compile(vdev.optimizers.Adam(0.02),
                   vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    h2 = mm.fit(x, y, batch_size=16, epochs=6, verbose=0).history["loss"]
    assert h2[-1] < h2[0]  # (dropout: each replica draws its own masks)
    for v in mm.trainable_variables:  # the replicas' copies stay equal
        np.testing.assert_array_equal(v.values[0].numpy(), v.values[1].numpy())
    # Model(inputs, outputs) is Keras's Functional, a Model
    inp = vdev.Input((2,))
    f = vdev.Model(inp, layers.Dense(1)(inp))
    assert type(f).__name__ == "Functional" and isinstance(f, vdev.Model)
    assert not isinstance(f, MyModel)
