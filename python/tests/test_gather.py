"""vdev.gather (TensorFlow's GatherV2), vdev.nn.embedding_lookup and
vdev.layers.Embedding against numpy on the same values: params of 1 to 4
dimensions, float32 and int32, indices of 0 to 3 dimensions with repeats,
every axis (negative ones too), empty tensors; TensorFlow's errors in its
words; the gradient of params against numpy's sum of the output's gradient
rows at their indices (np.add.at), bit for bit, with repeated indices, and
against finite differences; the op runs where the tensors live; a small
model Embedding -> Flatten / reduce_mean -> Dense trained with a
GradientTape, its loss falling, the same on CPU:0 and GPU:1."""
import numpy as np
import pytest

import vdev
from vdev import layers

RNG = np.random.default_rng(11)


def _params(shape, dtype):
    if dtype == np.int32:
        return RNG.integers(-2 ** 31, 2 ** 31, size=shape, dtype=np.int64).astype(np.int32)
    return RNG.uniform(-2, 2, size=shape).astype(np.float32)


# (params shape, indices shape, axis)
CASES = [((5, 3), (7,), 0), ((9,), (2, 6), 0), ((4, 2, 3), (), 0), ((6, 4), (3, 5), None),
         ((3, 2, 2, 3), (4,), 0), ((5,), (2, 3, 2), 0), ((5, 3), (0,), 0), ((8, 0), (2, 3), 0),
         ((4, 5), (3,), 1), ((4, 5), (2, 2), -1), ((2, 3, 4), (5,), 1), ((2, 3, 4), (2,), 2),
         ((2, 3, 4), (3,), -2), ((3, 0, 2), (4,), 2)]


@pytest.mark.parametrize("ps,ishape,axis", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_gather_matches_numpy(ps, ishape, axis, dtype, dev):
    p = _params(ps, dtype)
    ax = 0 if axis is None else axis
    ix = RNG.integers(0, max(ps[ax], 1), size=ishape).astype(np.int32)
    with vdev.device(dev):
        got = vdev.gather(vdev.constant(p), vdev.constant(ix, vdev.int32), axis=axis)
    want = np.take(p, ix, axis=ax)
    assert got.device.endswith(dev)
    assert got.dtype == (vdev.int32 if dtype == np.int32 else vdev.float32)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_indices_as_values_and_int64_arrays():
    p = _params((6, 2), np.float32)
    t = vdev.constant(p)
    np.testing.assert_array_equal(vdev.gather(t, [5, 0, 5]).numpy(), p[[5, 0, 5]])
    np.testing.assert_array_equal(vdev.gather(t, np.array([[1, 2]], np.int64)).numpy(),
                                  p[[[1, 2]]])
    np.testing.assert_array_equal(vdev.gather(t, 3).numpy(), p[3])
    np.testing.assert_array_equal(vdev.gather(p.tolist(), [1]).numpy(), p[[1]])
    # validate_indices and name change nothing; axis may be a tensor
    np.testing.assert_array_equal(
        vdev.gather(t, [1], False, vdev.constant(1), 0, "g").numpy(), p[:, [1]])


def test_tensorflows_errors():
    t = vdev.constant(np.zeros((5, 2), np.float32))
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.gather(t, [0, 7, 1])
    assert str(e.value) == "indices[1] = 7 is not in [0, 5)"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.gather(t, [[0, 1, 2], [3, 4, -1]])
    assert str(e.value) == "indices[1,2] = -1 is not in [0, 5)"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.gather(t, 9)
    assert str(e.value) == "indices = 9 is not in [0, 5)"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.gather(t, [2], axis=1)  # the limit is the axis's size
    assert str(e.value) == "indices[0] = 2 is not in [0, 2)"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.gather(vdev.constant(1.0), [0])
    assert str(e.value) == "params must be at least 1 dimensional"
    for axis in (2, -3):
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            vdev.gather(t, [0], axis=axis)
        assert str(e.value) == "Expected axis in the range [-2, 2), but got %d" % axis
    with pytest.raises(TypeError) as e:
        vdev.gather(t, [1.0])
    assert str(e.value) == ("Value passed to parameter 'indices' has DataType float32 not in "
                            "list of allowed values: int16, int32, int64")
    with pytest.raises(NotImplementedError, match="batch_dims=0 only"):
        vdev.gather(t, [[0]], batch_dims=1)
    with pytest.raises(vdev.errors.UnimplementedError) as e:
        vdev.gather(vdev.constant(np.zeros((2, 2, 2), np.float32)), np.zeros((2, 2, 2), np.int32))
    assert str(e.value) == "the result would have 5 dimensions; vdev tensors have at most 4"
    with pytest.raises(vdev.errors.UnimplementedError) as e:
        vdev.gather(vdev.constant(np.zeros((2, 2, 2), np.float32)), np.zeros((2, 2, 2), np.int32),
                    axis=1)
    assert str(e.value) == "the result would have 5 dimensions; vdev tensors have at most 4"
    # as TensorFlow: rows of no element are not checked
    assert tuple(vdev.gather(vdev.constant(np.zeros((5, 0), np.float32)), [9]).shape) == (1, 0)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("axis", [0, 1])
def test_gradient_sums_repeated_rows_in_order(dev, axis):
    """The gradient of sum(gather(p, ix) * w) is w's slices added at their
    indices in the indices' order in float32: np.add.at's sum, bit for bit."""
    p = RNG.uniform(-1, 1, (7, 4)).astype(np.float32)
    ix = RNG.integers(0, 4, size=(50,)).astype(np.int32)  # rows 4-6: none
    if axis == 1:
        ix %= 3
    w = RNG.uniform(-1, 1, np.take(p, ix, axis=axis).shape).astype(np.float32)
    with vdev.device(dev):
        v = vdev.Variable(p)
        with vdev.GradientTape() as tape:
            loss = vdev.reduce_sum(vdev.gather(v, ix, axis=axis) * w)
        g = tape.gradient(loss, v)
    assert g.device.endswith(dev)
    want = np.zeros_like(p)
    if axis == 0:
        np.add.at(want, ix, w)
    else:
        np.add.at(want.T, ix, w.T)
    np.testing.assert_array_equal(g.numpy(), want)


def test_gradient_against_finite_differences():
    p = RNG.uniform(-1, 1, (5, 3)).astype(np.float32)
    ix = np.array([[1, 3, 1], [1, 4, 0]], np.int32)
    w = RNG.uniform(-1, 1, (2, 3, 3)).astype(np.float32)

    def loss(x):
        return vdev.reduce_sum(vdev.tanh(vdev.gather(x, ix)) * w)
    v = vdev.Variable(p)
    with vdev.GradientTape() as tape:
        y = loss(v)
    g = tape.gradient(y, v).numpy()
    eps = 1e-2
    for i in range(5):
        for j in range(3):
            a, b = p.copy(), p.copy()
            a[i, j] += eps
            b[i, j] -= eps
            fd = (float(loss(vdev.constant(a))) - float(loss(vdev.constant(b)))) / (2 * eps)
            assert abs(g[i, j] - fd) <= 2e-3 + 1e-2 * abs(fd)


def test_the_determinism_switch_gives_the_same_bits():
    p = RNG.uniform(-1, 1, (3, 8)).astype(np.float32)
    ix = RNG.integers(0, 3, size=(300,)).astype(np.int32)
    w = RNG.uniform(-1, 1, (300, 8)).astype(np.float32)
    out = []
    for det in (False, True, False):
        if det:
            vdev.config.experimental.enable_op_determinism()
        else:
            vdev.config.experimental.disable_op_determinism()
        with vdev.device("GPU:1"):
            v = vdev.Variable(p)
            with vdev.GradientTape() as tape:
                loss = vdev.reduce_sum(vdev.gather(v, ix) * w)
            out.append(tape.gradient(loss, v).numpy().tobytes())
    assert out[0] == out[1] == out[2]


def test_embedding_lookup():
    p = _params((6, 3), np.float32)
    t = vdev.constant(p)
    ids = np.array([[0, 5], [5, 2]], np.int32)
    np.testing.assert_array_equal(vdev.nn.embedding_lookup(t, ids).numpy(), p[ids])
    np.testing.assert_array_equal(vdev.nn.embedding_lookup([t], ids).numpy(), p[ids])
    with pytest.raises(ValueError, match="^Need at least one param$"):
        vdev.nn.embedding_lookup([], ids)
    with pytest.raises(ValueError, match="^params must be specified$"):
        vdev.nn.embedding_lookup(None, ids)
    with pytest.raises(vdev.errors.UnimplementedError, match="one params tensor"):
        vdev.nn.embedding_lookup([t, t], ids)
    with pytest.raises(vdev.errors.UnimplementedError, match="max_norm=None only"):
        vdev.nn.embedding_lookup(t, ids, max_norm=1.0)
    with pytest.raises(vdev.errors.InvalidArgumentError, match=r"^indices\[0\] = 6 is not in"):
        vdev.nn.embedding_lookup(t, [6])


def test_embedding_layer():
    e = layers.Embedding(10, 4, seed=3)
    assert e.built and tuple(e.embeddings.shape) == (10, 4)
    assert e.embeddings.name.endswith("/embeddings")
    table = e.embeddings.numpy()
    assert np.all(np.abs(table) <= 0.05)  # Keras's 'uniform': RandomUniform(-0.05, 0.05)
    ids = np.array([[1, 9, 1], [0, 0, 3]], np.int32)
    np.testing.assert_array_equal(e(ids).numpy(), table[ids])
    # float ids are cast to int32 (truncated), as Keras casts them
    np.testing.assert_array_equal(e(vdev.constant([[1.7, 9.2]])).numpy(), table[[[1, 9]]])
    assert e.compute_output_shape((None, 3)) == (None, 3, 4)
    assert layers.Embedding(10, 4, input_length=3).compute_output_shape((2, None)) == (2, 3, 4)
    with pytest.raises(ValueError, match='"input_length" is 5, but received input has shape'):
        layers.Embedding(10, 4, input_length=5).compute_output_shape((2, 3))
    assert e.count_params() == 40 and len(e.trainable_variables) == 1
    cfg = e.get_config()
    assert cfg["input_dim"] == 10 and cfg["output_dim"] == 4 and cfg["input_length"] is None
    assert cfg["embeddings_initializer"]["class_name"] == "RandomUniform"
    e2 = layers.Embedding.from_config(cfg)
    assert tuple(e2.embeddings.shape) == (10, 4)
    with pytest.raises(ValueError) as x:
        layers.Embedding(0, 4)
    assert str(x.value) == ("Both `input_dim` and `output_dim` should be positive, Received "
                            "input_dim = 0 and output_dim = 4")
    with pytest.raises(ValueError, match="embeddings_regularizer=None only"):
        layers.Embedding(10, 4, embeddings_regularizer="l2")
    with pytest.raises(vdev.errors.InvalidArgumentError, match=r"indices\[0,1\] = 10 is not"):
        e([[1, 10]])
    with vdev.device("GPU:2"):
        g = layers.Embedding(5, 2, embeddings_initializer="zeros")
    assert g.embeddings.device.endswith("GPU:2")
    np.testing.assert_array_equal(g([4]).numpy(), np.zeros((1, 2), np.float32))


def _train(dev, flatten):
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 20, size=(16, 6)).astype(np.int32)
    labels = (ids[:, 0] % 3).astype(np.int32)  # the first token decides
    with vdev.device(dev):
        emb = layers.Embedding(20, 8, input_length=6, seed=21)
        dense = layers.Dense(3, seed=22)
        opt = vdev.optimizers.Adam(learning_rate=0.05)
        ce = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
        losses = []
        for _ in range(15):
            with vdev.GradientTape() as tape:
                h = emb(ids)
                h = layers.Flatten()(h) if flatten else vdev.reduce_mean(h, axis=1)
                loss = ce(labels, dense(h))
            variables = emb.trainable_variables + dense.trainable_variables
            grads = tape.gradient(loss, variables)
            opt.apply_gradients(zip(grads, variables))
            losses.append(float(loss))
    assert emb.embeddings.device.endswith(dev)
    return losses


@pytest.mark.parametrize("flatten", [True, False])
def test_a_small_embedding_model_trains_the_same_on_cpu_and_gpu(flatten):
    cpu, gpu = _train("CPU:0", flatten), _train("GPU:1", flatten)
    assert cpu[-1] < 0.7 * cpu[0]
    assert cpu == gpu


def test_in_a_sequential_model():
    model = vdev.models.Sequential([layers.Embedding(12, 4, input_length=5, seed=1),
                                    layers.Flatten(), layers.Dense(2, seed=2)])
    y = model(np.arange(10, dtype=np.int32).reshape(2, 5))
    assert tuple(y.shape) == (2, 2)
    assert model.count_params() == 12 * 4 + 20 * 2 + 2
