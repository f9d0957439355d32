"""vdev.layers.Embedding as a Keras user trains one: a text classifier
(Embedding -> Flatten -> Dense) on token ids, fit against the hand-written
GradientTape loop bit for bit, ids given as int32, int64 or float arrays
(as Keras casts them), fit under a MirroredStrategy of two simulated GPUs
against one device (to rounding), the weights saved and loaded into a fresh
model; Keras's names of initializers ('uniform', Embedding's default, and
its other older names; the lower-case classes); an int64 id outside int32
given TensorFlow's InvalidArgumentError, as Keras, which keeps int64 ids,
gets; compute_mask."""
import re

import numpy as np
import pytest

import vdev
from vdev import initializers as I
from vdev import layers

V, T, N = 30, 6, 48


def data():
    rng = np.random.default_rng(7)
    ids = rng.integers(0, V, size=(N, T)).astype(np.int32)
    return ids, (ids[:, 0] % 2).astype(np.int32)  # the first token decides


def classifier():
    return vdev.models.Sequential([layers.Embedding(V, 8, input_length=T, seed=1),
                                   layers.Flatten(), layers.Dense(2, seed=2)])


def ce():
    return vdev.losses.SparseCategoricalCrossentropy(from_logits=True)


def bits(v):
    return np.asarray(v.numpy()).tobytes()


def fitted(x, y, epochs=4):
    m = classifier()
    m.compile(optimizer=vdev.optimizers.SGD(0.5), loss=ce())
    h = m.fit(x, y, batch_size=16, epochs=epochs, shuffle=False, verbose=0)
    return m, h.history["loss"]


def test_fit_is_the_tape_loop_bit_for_bit_and_the_loss_falls():
    ids, y = data()
    m, losses = fitted(ids, y)
    assert losses[-1] < 0.8 * losses[0]
    names = [v.name for v in m.weights]  # the layers' numbers depend on what ran before
    assert [re.sub(r"_[0-9]+/", "/", n) for n in names] == [
        "embedding/embeddings", "dense/kernel", "dense/bias"]
    hand = classifier()
    opt, loss_fn = vdev.optimizers.SGD(0.5), ce()
    for _ in range(4):
        for b in range(0, N, 16):
            with vdev.GradientTape() as tape:
                loss = loss_fn(y[b:b + 16], hand(ids[b:b + 16]))
            variables = hand.trainable_variables
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    assert [bits(v) for v in m.weights] == [bits(v) for v in hand.weights]


def test_int64_and_float_ids_train_as_int32_ones():
    ids, y = data()
    want = [bits(v) for v in fitted(ids, y, 2)[0].weights]
    for x in (ids.astype(np.int64), ids.astype(np.float32) + 0.5):  # floats truncate
        assert [bits(v) for v in fitted(x, y, 2)[0].weights] == want


def test_fit_under_a_mirrored_strategy_is_one_device_to_rounding():
    ids, y = data()
    one, l1 = fitted(ids, y)
    with vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"]).scope():
        two, l2 = fitted(ids, y)
    assert two.weights[0].values[0].device.endswith("GPU:0")
    np.testing.assert_allclose(l2, l1, rtol=1e-5)
    for a, b in zip(one.weights, two.weights):
        np.testing.assert_allclose(np.asarray(b.numpy()), a.numpy(), rtol=1e-4, atol=1e-6)


def test_weights_load_into_a_fresh_model(tmp_path):
    ids, y = data()
    with vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"]).scope():
        m, _ = fitted(ids, y, 1)
    path = str(tmp_path / "emb.safetensors")
    m.save_weights(path)
    fresh = classifier()
    assert bits(fresh.weights[0]) != bits(m.weights[0])
    fresh.load_weights(path)
    assert [bits(v) for v in fresh.weights] == [bits(v) for v in m.weights]
    np.testing.assert_array_equal(fresh.predict(ids, verbose=0), m.predict(ids, verbose=0))


def test_keras_names_of_initializers():
    u = I.get("uniform")  # Keras's older names, which its get still takes
    assert type(u) is I.RandomUniform and (u.minval, u.maxval) == (-0.05, 0.05)
    n = I.get("normal")
    assert type(n) is I.RandomNormal and (n.mean, n.stddev) == (0.0, 0.05)
    assert type(I.get("one")) is I.Ones and type(I.get("zero")) is I.Zeros
    assert type(I.deserialize("uniform")) is I.RandomUniform
    d = layers.Dense(3, input_dim=2, kernel_initializer="uniform", seed=4)
    np.testing.assert_array_equal(d.kernel.numpy(), I.RandomUniform(seed=4)((2, 3)).numpy())
    e = layers.Embedding(V, 4, embeddings_initializer="normal", seed=5)
    np.testing.assert_array_equal(e.embeddings.numpy(), I.RandomNormal(seed=5)((V, 4)).numpy())
    assert e.get_config()["embeddings_initializer"] == {
        "class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": 0.05, "seed": 5}}
    ones = layers.Embedding(V, 2, embeddings_initializer="one")
    np.testing.assert_array_equal(ones([3]).numpy(), np.ones((1, 2), np.float32))
    # as in Keras, the lower-case names are the classes
    assert (I.zeros, I.ones, I.constant, I.variance_scaling) == (
        I.Zeros, I.Ones, I.Constant, I.VarianceScaling)
    np.testing.assert_array_equal(I.constant(2.0)((2,)).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(I.zeros()((1, 2)).numpy(), [[0.0, 0.0]])


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_an_int64_id_outside_int32_is_tensorflows_error(dev):
    with vdev.device(dev):
        e = layers.Embedding(10, 3, seed=1)
    cases = [(np.array([[1, 2 ** 32]], np.int64), "indices[0,1] = 4294967296 is not in [0, 10)"),
             (np.array([[-2 ** 40, 1], [12, 2]], np.int64),
              "indices[0,0] = -1099511627776 is not in [0, 10)"),
             # the first id outside the table is named, in int32 or not
             (np.array([1, 11, 2 ** 31], np.int64), "indices[1] = 11 is not in [0, 10)"),
             (np.array(2 ** 31, np.int64), "indices = 2147483648 is not in [0, 10)"),
             ([[3, 2 ** 33]], "indices[0,1] = 8589934592 is not in [0, 10)"),
             (np.array([2 ** 63], np.uint64), "indices[0] = 9223372036854775808 is not in "
                                               "[0, 10)")]
    for ids, text in cases:
        with pytest.raises(vdev.errors.InvalidArgumentError) as x:
            e(ids)
        assert str(x.value) == text
    # in int32, the op's own check says the same
    with pytest.raises(vdev.errors.InvalidArgumentError) as x:
        e(np.array([[1, 10]], np.int64))
    assert str(x.value) == "indices[0,1] = 10 is not in [0, 10)"
    np.testing.assert_array_equal(e(np.array([9, 0], np.int64)).numpy(),
                                  e.embeddings.numpy()[[9, 0]])


def test_compute_mask_is_none():
    e = layers.Embedding(10, 3)
    assert e.compute_mask(np.zeros((2, 3), np.int32)) is None
    assert e.compute_mask(np.zeros((2, 3), np.int32), mask=np.ones((2, 3), bool)) is None


@pytest.mark.parametrize("mirrored", [False, True])
def test_a_step_of_a_big_table_holds_one_gradient_of_its_size(mirrored):
    # the dense gradient, as the README says: one more tensor the table's
    # size at the peak of a step (two under a strategy: the gradient and
    # its all-reduced sum), nothing more
    rows, width = 100000, 64
    table = rows * width * 4
    rng = np.random.default_rng(3)
    ids = rng.integers(0, rows, size=(32, 20)).astype(np.int32)
    y = (ids[:, 0] % 2).astype(np.int32)
    scope = (vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"]).scope() if mirrored
             else vdev.device("GPU:0"))
    with scope:
        m = vdev.models.Sequential([layers.Embedding(rows, width, input_length=20, seed=1),
                                    layers.Flatten(), layers.Dense(2, seed=2)])
        m.compile(optimizer="adam", loss=ce())
        m.fit(ids, y, batch_size=32, verbose=0)  # makes Adam's slots
        exp = vdev.config.experimental
        exp.reset_memory_stats("GPU:0")
        held = exp.get_memory_info("GPU:0")["current"]
        assert held >= 3 * table  # the table, Adam's m and v
        m.fit(ids, y, batch_size=32, verbose=0)
        mi = exp.get_memory_info("GPU:0")
    assert mi["current"] == held
    grads = 2 if mirrored else 1
    assert grads * table <= mi["peak"] - held <= grads * table + table // 8
