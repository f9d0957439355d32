"""fit on a Sequential model given no input shape (Keras's tutorials'
``Sequential([Flatten(), Dense(...), ...])``): Keras builds it on its first
batch; vdev's fit builds it on the first row before its loop (under a
MirroredStrategy, in the strategy's scope), so it trains to the very bits of
the same model given its input shape, with fit's shuffling seed still the
one vdev.random.set_seed gives. Three simulated 16 GiB GPUs (conftest)."""
import numpy as np

import vdev
from vdev import layers


def images(n=36, seed=2):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 6, 6, 1)).astype(np.float32)
    return x, (x.mean(axis=(1, 2, 3)) > 0).astype(np.int32) + (x[:, 0, 0, 0] > 0)


def net(input_shape=None):
    kw = {} if input_shape is None else {"input_shape": input_shape}
    return vdev.models.Sequential([
        layers.Conv2D(3, 3, activation="relu", seed=11, **kw), layers.Flatten(),
        layers.Dense(8, activation="relu", seed=12), layers.Dense(3, activation="softmax",
                                                                  seed=13)])


def bits(m):
    return [v.numpy().tobytes() for v in m.weights]


def fitted(m, x, y, strategy=None):
    if strategy is None:
        m.compile(vdev.optimizers.Adam(0.01), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    else:
        with strategy.scope():
            m.compile(vdev.optimizers.Adam(0.01), "sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    vdev.random.set_seed(5)
    return m.fit(x, y, batch_size=8, epochs=2, verbose=0).history


def test_an_unbuilt_model_trains_as_the_same_model_given_its_input_shape():
    x, y = images()
    a, b = net(), net(input_shape=(6, 6, 1))
    assert not a.built and not a.weights
    ha, hb = fitted(a, x, y), fitted(b, x, y)
    assert a.built and ha == hb and bits(a) == bits(b)
    assert a.optimizer.iterations == b.optimizer.iterations == 10


def test_an_unbuilt_model_under_a_mirrored_strategy_is_built_in_its_scope():
    x, y = images()
    strategy = vdev.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"])
    with strategy.scope():
        a, b = net(), net(input_shape=(6, 6, 1))
    ha, hb = fitted(a, x, y, strategy), fitted(b, x, y, strategy)
    assert ha == hb and bits(a) == bits(b)
    assert all(getattr(v, "_strategy", None) is strategy for v in a.weights)
