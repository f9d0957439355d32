"""Keras 2.11's Normalization (adapt against float64 moments and Keras's
batch-merge formula written here, given mean and variance, invert, axes,
its weights and summary, errors), RepeatVector, SpatialDropout1D/2D,
GaussianNoise, GaussianDropout, PReLU (values and gradients against torch)
and RandomFlip (each image flipped or not, the modes, inference), on the CPU
and a simulated GPU where they compute; configs and errors in Keras's
words."""
import numpy as np
import pytest
import torch

import vdev
from vdev import layers

rng = np.random.default_rng(20261214)
f32 = np.float32


def keras_merge(x, keep_axes, batch):
    """Keras's Normalization.update_state, batch after batch, in float64."""
    reduce = tuple(d for d in range(x.ndim) if d not in keep_axes)
    kept = tuple(x.shape[d] for d in keep_axes)
    mean, var, count = np.zeros(kept), np.ones(kept), 0
    for b in range(0, x.shape[0], batch):
        part = x[b:b + batch].astype(np.float64)
        bm, bv = part.mean(axis=reduce), part.var(axis=reduce)
        bc = int(np.prod([part.shape[d] for d in reduce]))
        total = bc + count
        w = bc / total
        tm = mean * (1 - w) + bm * w
        var = (var + (mean - tm) ** 2) * (1 - w) + (bv + (bm - tm) ** 2) * w
        mean, count = tm, total
    return mean, var, count


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_normalization(dev):
    x = rng.normal(3, 2, (100, 4)).astype(f32)
    with vdev.device(dev):
        n = layers.Normalization()
        n.adapt(x)
        y = n(x)
    assert y.device.endswith(dev)
    mean, var, count = keras_merge(x, (1,), 32)
    np.testing.assert_allclose(n.adapt_mean.numpy(), mean, rtol=1e-5)
    np.testing.assert_allclose(n.adapt_variance.numpy(), var, rtol=1e-4)
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(0), rtol=1e-9)  # the formula
    np.testing.assert_allclose(var, x.astype(np.float64).var(0), rtol=1e-9)
    assert int(n.count.numpy()) == count == 100
    assert [v.name.split("/")[-1] for v in n.variables] == ["mean", "variance", "count"]
    assert n.trainable_variables == []
    np.testing.assert_allclose(y.numpy(), (x - mean) / np.sqrt(var), rtol=1e-4, atol=1e-5)
    # adapt again starts again; batch_size and steps as Keras's
    n.adapt(x[:10], batch_size=4, steps=2)
    m8, v8, c8 = keras_merge(x[:8], (1,), 4)
    np.testing.assert_allclose(n.adapt_mean.numpy(), m8, rtol=1e-5)
    np.testing.assert_allclose(n.adapt_variance.numpy(), v8, rtol=1e-4)
    assert int(n.count.numpy()) == c8 == 8
    # axes: None (one scalar), (1, 2) of [N, 3, 2]
    x3 = rng.normal(1, 3, (20, 3, 2)).astype(f32)
    s = layers.Normalization(axis=None)
    s.adapt(x3)
    assert s.adapt_mean.shape == () and abs(float(s.adapt_mean.numpy()) - x3.mean()) < 1e-4
    a = layers.Normalization(axis=(1, 2))
    a.adapt(x3)
    np.testing.assert_allclose(a.adapt_mean.numpy(), x3.mean(0), rtol=1e-5, atol=1e-6)
    # given mean and variance; invert; ints cast
    g = layers.Normalization(mean=[1.0, 2.0], variance=[4.0, 0.0])
    np.testing.assert_allclose(g(np.array([[3, 2]], np.int32)).numpy(), [[1.0, 0.0]])
    inv = layers.Normalization(mean=3.0, variance=4.0, invert=True)
    np.testing.assert_allclose(inv(np.array([[1.0]], f32)).numpy(), [[5.0]])
    assert g.get_config() == {"name": g.name, "trainable": True, "dtype": "float32",
                              "axis": (-1,), "invert": False, "mean": [1.0, 2.0],
                              "variance": [4.0, 0.0]}
    model = vdev.models.Sequential([vdev.Input((4,)), layers.Normalization(), layers.Dense(1)])
    lines = []
    model.summary(print_fn=lines.append)
    assert "Non-trainable params: 9" in lines, lines  # 4 + 4 + 1, as Keras's


def test_normalization_errors():
    cases = [
        (lambda: layers.Normalization(mean=1.0), ValueError,
         "When setting values directly, both `mean` and `variance` must be set. Got mean: 1.0 "
         "and variance: None"),
        (lambda: layers.Normalization(mean=1.0, variance=1.0).adapt(np.ones((2, 1))), ValueError,
         "Cannot `adapt` a Normalization layer that is initialized with static `mean` and "
         "`variance`, you passed mean 1.0 and variance 1.0."),
        (lambda: layers.Normalization(axis=3)(np.ones((2, 3), f32)), ValueError,
         "All `axis` values must be in the range [-ndim, ndim). Found ndim: `2`, axis: (3,)"),
        (lambda: layers.Normalization().adapt(np.ones((5,), f32)), ValueError,
         "All `axis` values to be kept must have known shape. Got axis: (-1,), input shape: "
         "[None], with unknown axis at index: 0"),
        (lambda: layers.Normalization().update_state(np.ones((2, 2))), RuntimeError,
         "`build` must be called before `update_state`."),
    ]
    for call, kind, msg in cases:
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == msg


def test_repeat_vector_and_prelu():
    x = rng.uniform(-1, 1, (3, 4)).astype(f32)
    rv = layers.RepeatVector(5)
    xv = vdev.Variable(x)
    with vdev.GradientTape() as tape:
        y = rv(xv)
        loss = vdev.reduce_sum(y * y)
    assert y.shape == (3, 5, 4) and rv.compute_output_shape((None, 4)) == (None, 5, 4)
    np.testing.assert_array_equal(y.numpy(), np.repeat(x[:, None], 5, 1))
    np.testing.assert_allclose(tape.gradient(loss, xv).numpy(), 10 * x, rtol=1e-6)
    assert rv.get_config()["n"] == 5
    with pytest.raises(TypeError) as e:
        layers.RepeatVector(2.0)
    assert str(e.value) == "Expected an integer value for `n`, got <class 'float'>."
    with pytest.raises(ValueError) as e:
        rv(np.zeros((2, 3, 4), f32))
    assert "expected ndim=2, found ndim=3" in str(e.value)
    # PReLU against torch: alpha per feature, and shared over the steps
    for shared, alpha_shape in ((None, (3, 4)), ([1], (1, 4))):
        x3 = rng.uniform(-1, 1, (2, 3, 4)).astype(f32)
        p = layers.PReLU(alpha_initializer="random_uniform", shared_axes=shared, seed=3)
        xv = vdev.Variable(x3)
        with vdev.GradientTape() as tape:
            y = p(xv)
            loss = vdev.reduce_sum(y * vdev.constant(x3 + 2))
        gx, ga = tape.gradient(loss, [xv, p.alpha])
        assert p.alpha.shape == alpha_shape and p.alpha.name.endswith("/alpha")
        tx = torch.tensor(x3.astype(np.float64), requires_grad=True)
        ta = torch.tensor(p.alpha.numpy().astype(np.float64), requires_grad=True)
        ty = torch.relu(tx) - ta * torch.relu(-tx)
        tg = torch.autograd.grad((ty * torch.tensor(x3 + 2, dtype=torch.float64)).sum(), [tx, ta])
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(gx.numpy(), tg[0].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ga.numpy(), tg[1].numpy(), rtol=1e-5, atol=1e-6)
    assert layers.PReLU(shared_axes=1).shared_axes == [1]
    model = vdev.models.Sequential([vdev.Input((3, 4)), layers.PReLU(shared_axes=[1])])
    assert model.layers[0].count_params() == 4


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_noise_layers(dev):
    ones = np.ones((64, 10, 8), f32)
    with vdev.device(dev):
        sd = layers.SpatialDropout1D(0.5, seed=1)
        y = sd(ones, training=True).numpy()
        np.testing.assert_array_equal(sd(ones).numpy(), ones)
        # one draw per channel of each example: every step alike
        assert set(np.unique(y)) == {0.0, 2.0}
        assert np.all(y == y[:, :1])
        assert 0.4 < np.mean(y == 0) < 0.6
        img = np.ones((16, 5, 5, 6), f32)
        y2 = layers.SpatialDropout2D(0.5, seed=2)(img, training=True).numpy()
        assert np.all(y2 == y2[:, :1, :1])
        gn = layers.GaussianNoise(0.5, seed=3)
        z = np.zeros((200, 100), f32)
        noisy = gn(z, training=True).numpy()
        assert abs(noisy.mean()) < 4 * 0.5 / np.sqrt(z.size)
        assert abs(noisy.std() - 0.5) < 0.01
        np.testing.assert_array_equal(gn(z).numpy(), z)
        gd = layers.GaussianDropout(0.2, seed=4)
        o = gd(np.ones((200, 100), f32), training=True).numpy()
        assert abs(o.mean() - 1) < 4 * 0.5 / np.sqrt(o.size)
        assert abs(o.std() - np.sqrt(0.2 / 0.8)) < 0.01
        np.testing.assert_array_equal(layers.GaussianDropout(0.0)(ones, training=True).numpy(),
                                      ones)
    assert gn.get_config()["stddev"] == 0.5 and gd.get_config()["rate"] == 0.2
    assert sd.get_config()["rate"] == 0.5
    assert layers.SpatialDropout1D.from_config(sd.get_config()).rate == 0.5
    with pytest.raises(ValueError) as e:
        sd(np.ones((2, 3), f32), training=True)
    assert "expected ndim=3, found ndim=2" in str(e.value)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_random_flip(dev):
    x = rng.uniform(0, 1, (32, 4, 5, 2)).astype(f32)
    for mode in ("horizontal", "vertical", "horizontal_and_vertical"):
        with vdev.device(dev):
            flip = layers.RandomFlip(mode, seed=5)
            y = flip(x).numpy()  # alone: training, as Keras's call default
        kinds = set()
        for a, b in zip(x, y):
            options = {"none": a, "h": a[:, ::-1], "v": a[::-1], "hv": a[::-1, ::-1]}
            match = [k for k, o in options.items() if np.array_equal(o, b)]
            assert match, "an image neither flipped nor kept"
            kinds.add(match[0])
        want = {"horizontal": {"none", "h"}, "vertical": {"none", "v"},
                "horizontal_and_vertical": {"none", "h", "v", "hv"}}[mode]
        assert kinds == want
        np.testing.assert_array_equal(flip(x, training=False).numpy(), x)
    model = vdev.models.Sequential([vdev.Input((4, 5, 2)), layers.RandomFlip(seed=1)])
    np.testing.assert_array_equal(model.predict(x, verbose=0), x)  # inference: as it is
    assert layers.RandomFlip("vertical", seed=2).get_config()["mode"] == "vertical"
    with pytest.raises(ValueError) as e:
        layers.RandomFlip("diagonal", name="f")
    assert str(e.value) == "RandomFlip layer f received an unknown mode argument diagonal"


def test_unit_normalization_and_category_encoding():
    x = rng.uniform(-1, 1, (3, 4, 5)).astype(f32)
    for axis in (-1, 1, [1, 2]):
        un = layers.UnitNormalization(axis=axis)
        axes = tuple(np.atleast_1d(axis) % 3)
        want = x / np.sqrt(np.maximum((x.astype(np.float64) ** 2).sum(axes, keepdims=True),
                                      1e-12))
        np.testing.assert_allclose(un(x).numpy(), want, rtol=1e-5)
    np.testing.assert_array_equal(layers.UnitNormalization()(np.zeros((1, 3), f32)).numpy(), 0)
    assert layers.UnitNormalization(axis=(1, 2)).get_config()["axis"] == [1, 2]
    # Keras's documented examples
    oh = layers.CategoryEncoding(num_tokens=4, output_mode="one_hot")
    np.testing.assert_array_equal(oh([3, 2, 0, 1]).numpy(), np.eye(4)[[3, 2, 0, 1]])
    mh = layers.CategoryEncoding(num_tokens=4, output_mode="multi_hot")
    np.testing.assert_array_equal(mh([[0, 1], [0, 0], [1, 2], [3, 1]]).numpy(),
                                  [[1, 1, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0], [0, 1, 0, 1]])
    cnt = layers.CategoryEncoding(num_tokens=4, output_mode="count")
    np.testing.assert_allclose(cnt([[0, 1], [0, 0], [1, 2], [3, 1]],
                                   count_weights=[[0.1, 0.2], [0.1, 0.1], [0.2, 0.3],
                                                  [0.4, 0.2]]).numpy(),
                               [[0.1, 0.2, 0, 0], [0.2, 0, 0, 0], [0, 0.2, 0.3, 0],
                                [0, 0.2, 0, 0.4]], rtol=1e-6)
    assert cnt.compute_output_shape((None, 2)) == (None, 4)
    assert oh.compute_output_shape((None,)) == (None, 4)
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        mh([[4]])
    assert "Input values must be in the range 0 <= values < num_tokens with num_tokens=4" in \
        str(e.value)
    with pytest.raises(ValueError) as e:
        layers.CategoryEncoding()
    assert str(e.value) == ("num_tokens must be set to use this layer. If the number of tokens "
                            "is not known beforehand, use the IntegerLookup layer instead.")
