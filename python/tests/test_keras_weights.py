"""Dense's kernel_initializer/bias_initializer (vdev.initializers, Keras's
names and classes, checked against Keras's fan and scale formulas),
weights / get_weights / set_weights with Keras's errors, and summary()."""

import math

import numpy as np
import pytest

import vdev
from vdev import initializers as I


def draw(init, shape=(400, 600)):
    return init(shape).numpy().astype(np.float64)


def test_default_is_glorot_uniform_same_numbers():
    a = vdev.layers.Dense(5, input_dim=7, seed=11)
    b = vdev.layers.Dense(5, input_dim=7, seed=11, kernel_initializer="glorot_uniform")
    np.testing.assert_array_equal(a.kernel.numpy(), b.kernel.numpy())
    r = math.sqrt(6.0 / 12)
    want = vdev.random.uniform((7, 5), -r, r, seed=11).numpy()
    np.testing.assert_array_equal(a.kernel.numpy(), want)
    np.testing.assert_array_equal(a.bias.numpy(), np.zeros(5, np.float32))


def test_exact_initializers():
    d = vdev.layers.Dense(3, input_dim=2, kernel_initializer="ones", bias_initializer="ones")
    np.testing.assert_array_equal(d.kernel.numpy(), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(d.bias.numpy(), np.ones(3, np.float32))
    d = vdev.layers.Dense(3, input_dim=2, kernel_initializer=I.Zeros(),
                          bias_initializer=I.Constant(0.5))
    np.testing.assert_array_equal(d.kernel.numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(d.bias.numpy(), np.full(3, 0.5, np.float32))


@pytest.mark.parametrize("name,scale,fan,dist", [
    ("glorot_uniform", 1, "avg", "u"), ("glorot_normal", 1, "avg", "t"),
    ("he_normal", 2, "in", "t"), ("he_uniform", 2, "in", "u"),
    ("lecun_normal", 1, "in", "t"), ("lecun_uniform", 1, "in", "u")])
def test_variance_scaling_moments(name, scale, fan, dist):
    fan_in, fan_out = 400, 600
    n = {"in": fan_in, "avg": (fan_in + fan_out) / 2}[fan]
    var = scale / n  # Keras: the variance of every one of these
    x = draw(I.get(name))
    assert abs(x.mean()) < 4 * math.sqrt(var / x.size)
    assert abs(x.var() / var - 1) < 0.02
    if dist == "u":
        limit = math.sqrt(3 * var)
        assert x.min() >= -limit and x.max() <= limit
        assert x.max() > 0.99 * limit
    else:  # truncated at two standard deviations of the untruncated normal
        bound = 2 * math.sqrt(var) / 0.87962566103423978
        assert np.abs(x).max() <= bound * (1 + 1e-6)
        assert np.abs(x).max() > 0.99 * bound


def test_random_classes_with_keras_args():
    x = draw(I.RandomNormal(mean=1.0, stddev=0.5, seed=3))
    assert abs(x.mean() - 1) < 0.005 and abs(x.std() - 0.5) < 0.005
    x = draw(I.RandomUniform(minval=2, maxval=3, seed=3))
    assert x.min() >= 2 and x.max() <= 3 and abs(x.mean() - 2.5) < 0.005
    x = draw(I.TruncatedNormal(mean=0.0, stddev=0.1, seed=4))
    assert np.abs(x).max() <= 0.2 * (1 + 1e-6)
    assert abs(x.std() - 0.1 * 0.87962566103423978) < 0.002
    x2 = draw(I.TruncatedNormal(mean=0.0, stddev=0.1, seed=4))
    np.testing.assert_array_equal(x, x2)  # a seed gives the same numbers
    d = vdev.layers.Dense(4, input_dim=3, kernel_initializer=I.RandomUniform(seed=1))
    assert np.abs(d.kernel.numpy()).max() <= 0.05


UNKNOWN = ("Unknown initializer: '%s'. Please ensure you are using a "
           "`keras.utils.custom_object_scope` and that this object is included in the scope. "
           "See https://www.tensorflow.org/guide/keras/save_and_serialize"
           "#registering_the_custom_object for details.")


def test_unknown_initializer():
    # Keras: an unknown name is deserialize's "Unknown initializer"; only a
    # value neither dict, string nor callable is "Could not interpret"
    with pytest.raises(ValueError) as e:
        vdev.layers.Dense(3, kernel_initializer="glorot_uniformm")
    assert str(e.value) == UNKNOWN % "glorot_uniformm"
    with pytest.raises(ValueError) as e:
        I.get({"class_name": "Foo", "config": {}})
    assert str(e.value) == UNKNOWN % "Foo"
    with pytest.raises(ValueError, match="^Could not interpret initializer identifier: 5$"):
        I.get(5)
    with pytest.raises(ValueError) as e:
        I.get({"class_name": "Zeros"})
    assert str(e.value) == ("Improper config format for {'class_name': 'Zeros'}. Expecting "
                            "python dict contains `class_name` and `config` as keys")
    with pytest.raises(ValueError, match="Invalid `mode` argument: fan"):
        I.VarianceScaling(mode="fan")


def test_get_dict_and_config_round_trip():
    g = I.get({"class_name": "GlorotUniform", "config": {"seed": 1}})
    assert type(g) is I.GlorotUniform and g.seed == 1
    np.testing.assert_array_equal(g((3, 4)).numpy(), I.GlorotUniform(seed=1)((3, 4)).numpy())
    d = vdev.layers.Dense(4, input_dim=3, kernel_initializer={"class_name": "GlorotUniform",
                                                              "config": {"seed": 1}},
                          bias_initializer={"class_name": "Constant",
                                            "config": {"value": 2.0}})
    np.testing.assert_array_equal(d.kernel.numpy(), I.GlorotUniform(seed=1)((3, 4)).numpy())
    np.testing.assert_array_equal(d.bias.numpy(), np.full(4, 2.0, np.float32))
    v = I.VarianceScaling(scale=2.0, mode="fan_out", distribution="uniform", seed=3)
    w = I.VarianceScaling.from_config(v.get_config())
    assert w.get_config() == v.get_config() == {"scale": 2.0, "mode": "fan_out",
                                                "distribution": "uniform", "seed": 3}
    assert I.get(I.serialize(v)).get_config() == v.get_config()
    assert type(I.get("Zeros")) is I.Zeros and type(I.get(I.Ones)) is I.Ones


def test_weights_order_and_get_set():
    m = vdev.models.Sequential([vdev.layers.Dense(4, input_dim=3, name="a1"),
                                vdev.layers.Dense(2, input_dim=4, name="a2")])
    assert [v.name for v in m.weights] == ["a1/kernel", "a1/bias", "a2/kernel", "a2/bias"]
    assert m.trainable_weights == m.weights and m.non_trainable_weights == []
    w = m.get_weights()
    assert [x.shape for x in w] == [(3, 4), (4,), (4, 2), (2,)]
    new = [np.full(x.shape, i + 1, np.float32) for i, x in enumerate(w)]
    m.set_weights(new)
    for v, x in zip(m.weights, new):
        np.testing.assert_array_equal(v.numpy(), x)
    y = m(np.ones((1, 3), np.float32)).numpy()
    np.testing.assert_allclose(y, [[4 * (3 * 1 + 2) * 3 + 4] * 2])
    assert m.layers[0].get_weights()[0].shape == (3, 4)


def test_set_weights_errors_change_nothing():
    m = vdev.models.Sequential([vdev.layers.Dense(4, input_dim=3, name="b1")])
    before = m.get_weights()
    with pytest.raises(ValueError) as e:
        m.set_weights([np.zeros((3, 4))])
    assert str(e.value).startswith(
        'You called `set_weights(weights)` on layer "%s" with a weight list of length 1, but '
        "the layer was expecting 2 weights. Provided weights: " % m.name)
    with pytest.raises(ValueError, match=r"^Layer b1 weight shape \(4,\) is not compatible "
                                         r"with provided weight shape \(5,\)\.$"):
        m.layers[0].set_weights([np.zeros((3, 4)), np.zeros(5)])
    for a, b in zip(before, m.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_summary():
    """Keras 2.11's print_summary of a sequential model: rows start with a
    space, each layer's row is followed by a line of spaces, and a field
    longer than its column goes on over the next lines."""
    m = vdev.models.Sequential([
        vdev.layers.Dense(4, input_dim=3, name="c1"),
        vdev.layers.Dense(2, input_dim=4, name="a_layer_with_a_name_much_too_long_for_its_column")],
        name="seq")
    lines = []
    m.summary(print_fn=lines.append)
    blank = " " * 65
    assert lines == [
        'Model: "seq"',
        "_" * 65,
        " Layer (type)                Output Shape              Param #   ",
        "=" * 65,
        " c1 (Dense)                  (None, 4)                 16        ",
        blank,
        " a_layer_with_a_name_much_to  (None, 2)                10        ",
        " o_long_for_its_column (Dens                                     ",
        " e)                                                              ",
        blank,
        "=" * 65,
        "Total params: 26",
        "Trainable params: 26",
        "Non-trainable params: 0",
        "_" * 65]
    with pytest.raises(ValueError, match="This model has not yet been built"):
        vdev.models.Sequential([vdev.layers.Dense(2)]).summary()


def test_count_params_unbuilt():
    d = vdev.layers.Dense(2, name="d9")
    msg = ("You tried to call `count_params` on layer %s, but the layer isn't built. You can "
           "build it manually via: `%s.build(batch_input_shape)`.")
    with pytest.raises(ValueError) as e:
        d.count_params()
    assert str(e.value) == msg % ("d9", "d9")
    m = vdev.models.Sequential([vdev.layers.Dense(3), d], name="part")
    with pytest.raises(ValueError) as e:
        m.count_params()
    assert str(e.value) == msg % ("part", "part")
    m.layers[0].build(2)
    d.build(3)
    assert d.count_params() == 8 and m.count_params() == 17
    # as Keras, a model that knows its input builds each Dense as it comes
    d2 = vdev.layers.Dense(2)
    m2 = vdev.models.Sequential([vdev.layers.Dense(3, input_dim=2)])
    m2.add(d2)
    assert d2.built and m2.built and m2.count_params() == 17
    assert d2.kernel.shape == (3, 2)


def test_a_model_that_knows_its_input_is_built_under_a_strategy():
    """Made under strategy.scope(), every layer's variables are mirrored at
    once, so the first strategy.run trains (Keras builds the model whole)."""
    s = vdev.distribute.MirroredStrategy()
    with s.scope():
        m = vdev.models.Sequential([vdev.layers.Dense(4, input_dim=3), vdev.layers.Dense(2)])
        opt = vdev.optimizers.SGD(0.1)
    assert m.built and all(hasattr(v, "values") for v in m.trainable_variables)
    x = next(iter(s.experimental_distribute_dataset([np.ones((6, 3), np.float32)])))

    def step(x):
        with vdev.GradientTape() as t:
            loss = vdev.nn.compute_average_loss(vdev.reduce_sum(m(x), axis=1))
        opt.apply_gradients(zip(t.gradient(loss, m.trainable_variables),
                                m.trainable_variables))
    s.run(step, args=(x,))
    assert opt.iterations == 1


def test_bias_seed_is_not_another_layers_kernel_seed():
    """The bias draws with a seed derived from the layer's (BLAKE2b of it),
    not seed + 1, which is the kernel seed of the layer seeded one more: a
    layer's bias never repeats the next layer's kernel. Still deterministic."""
    kw = dict(kernel_initializer="random_normal", bias_initializer="random_normal")
    a = vdev.layers.Dense(4, input_dim=1, seed=7, **kw)
    b = vdev.layers.Dense(4, input_dim=1, seed=8, **kw)
    assert not np.array_equal(a.bias.numpy(), b.kernel.numpy().ravel())
    assert not np.array_equal(a.bias.numpy(), a.kernel.numpy().ravel())
    again = vdev.layers.Dense(4, input_dim=1, seed=7, **kw)
    np.testing.assert_array_equal(a.bias.numpy(), again.bias.numpy())
    np.testing.assert_array_equal(a.kernel.numpy(), again.kernel.numpy())
    # the documented derivation, for those who redraw it elsewhere
    import hashlib
    h = hashlib.blake2b(b"vdev.Dense.bias:" + (7).to_bytes(8, "little"), digest_size=8)
    want = I.RandomNormal(seed=int.from_bytes(h.digest(), "little"))((4,)).numpy()
    np.testing.assert_array_equal(a.bias.numpy(), want)
