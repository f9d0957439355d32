"""Keras habits with vdev's convolutional layers: the argument checks Keras
makes when a layer is made (kernel_size and pool_size > 0, strides >= 0 and
a Conv2D's not 0, in Keras's words), the base-layer arguments every Keras
layer takes (input_shape, dtype) on the pools and Flatten, as in
TensorFlow's first tutorial (Flatten(input_shape=(28, 28)) then Dense), each
layer's compute_output_shape against the shape its call gives, a Sequential
model built whole when its first layer knows its input shape (so summary()
shows every output shape, as Keras's), and from_config(get_config())."""
import numpy as np
import pytest

import vdev
from vdev import layers

rng = np.random.default_rng(11)


@pytest.mark.parametrize("make, msg", [
    (lambda: layers.Conv2D(2, 0),
     "The `kernel_size` argument must be a tuple of 2 integers. Received: kernel_size=0 "
     "including {0} that does not satisfy the requirement `> 0`."),
    (lambda: layers.Conv2D(2, (3, -1)),
     "The `kernel_size` argument must be a tuple of 2 integers. Received: kernel_size=(3, -1) "
     "including {-1} that does not satisfy the requirement `> 0`."),
    (lambda: layers.Conv2D(2, 3, strides=-1),
     "The `strides` argument must be a tuple of 2 integers. Received: strides=-1 including "
     "{-1} that does not satisfy the requirement `>= 0`."),
    (lambda: layers.Conv2D(2, 3, strides=(1, 0)),
     "The argument `strides` cannot contains 0(s). Received: (1, 0)"),
    (lambda: layers.Conv2D(2, 3, dilation_rate=0),
     "The `dilation_rate` argument must be a tuple of 2 integers. Received: dilation_rate=0 "
     "including {0} that does not satisfy the requirement `> 0`."),
    (lambda: layers.Conv2D(2, 3, padding="causal"),
     "Causal padding is only supported for `Conv1D` and `SeparableConv1D`."),
    (lambda: layers.MaxPooling2D(0),
     "The `pool_size` argument must be a tuple of 2 integers. Received: pool_size=0 including "
     "{0} that does not satisfy the requirement `> 0`."),
    (lambda: layers.AveragePooling2D(2, (-2, 1)),
     "The `strides` argument must be a tuple of 2 integers. Received: strides=(-2, 1) "
     "including {-2} that does not satisfy the requirement `>= 0`."),
])
def test_keras_refuses_sizes_when_the_layer_is_made(make, msg):
    with pytest.raises(ValueError) as e:
        make()
    assert str(e.value) == msg


def test_a_pool_stride_of_0_is_the_ops_error_at_the_call():
    pool = layers.MaxPooling2D(2, 0)  # Keras lets it pass (allow_zero) to the op
    with pytest.raises(vdev.errors.InvalidArgumentError, match="MaxPool: Stride must be > 0, "
                       "but got 0"):
        pool(np.zeros((1, 4, 4, 1), np.float32))


def test_the_first_tutorials_model_is_built_when_made():
    model = vdev.models.Sequential([
        layers.Flatten(input_shape=(28, 28)),
        layers.Dense(128, activation="relu"),
        layers.Dense(10),
    ])
    assert model.built and model.count_params() == 28 * 28 * 128 + 128 + 128 * 10 + 10
    lines = []
    model.summary(print_fn=lines.append)
    assert [l.split()[-2:] for l in lines[4:9:2]] == [["784)", "0"], ["128)", "100480"],
                                                     ["10)", "1290"]]
    assert "(None, 784)" in lines[4]
    x = rng.uniform(0, 1, (3, 28, 28)).astype(np.float32)
    assert model(x).shape == (3, 10)


def test_base_layer_arguments_on_pools_and_flatten():
    for cls in (layers.MaxPooling2D, layers.AveragePooling2D):
        pool = cls(input_shape=(8, 8, 3), dtype="float32")
        assert pool.compute_output_shape((None, 8, 8, 3)) == (None, 4, 4, 3)
        with pytest.raises(ValueError, match="takes dtype=None or 'float32' only, not "
                                             "'float64'"):
            cls(dtype="float64")
        with pytest.raises(ValueError, match="expected ndim=4, found ndim=3. Full shape "
                                             r"received: \(None, 8, 3\)"):
            cls(input_shape=(8, 3))
    assert layers.Flatten(input_shape=(4, 5), dtype="float32").compute_output_shape(
        (None, 4, 5)) == (None, 20)


def test_conv2d_input_shape_of_another_rank_is_kerass_error():
    with pytest.raises(ValueError) as e:
        layers.Conv2D(2, 3, input_shape=(4,), name="c")
    assert str(e.value) == ('Input 0 of layer "c" is incompatible with the layer: expected '
                            "min_ndim=4, found ndim=2. Full shape received: (None, 4)")
    with pytest.raises(ValueError) as e:
        layers.Conv2D(2, 3, input_shape=(2, 8, 8, 3))
    assert str(e.value) == ("vdev's Conv2D takes inputs of 4 dimensions (batch, rows, cols, "
                            "channels), not 5: vdev's tensors have 4 at most. Full shape "
                            "received: (None, 2, 8, 8, 3)")


@pytest.mark.parametrize("layer", [
    layers.Conv2D(3, (3, 2), strides=(2, 3), padding="same"),
    layers.Conv2D(3, (3, 2), strides=(2, 3), padding="valid"),
    layers.Conv2D(1, 5, padding="valid"),
    layers.MaxPooling2D((3, 2), padding="same"),
    layers.AveragePooling2D(3, 2),
    layers.MaxPooling2D(2, (1, 3)),
    layers.Flatten(),
    layers.Dense(4),
])
def test_compute_output_shape_is_the_calls(layer):
    x = rng.uniform(-1, 1, (2, 9, 7, 2)).astype(np.float32)
    assert tuple(layer(x).shape) == layer.compute_output_shape(x.shape)
    want = layer.compute_output_shape((None,) + x.shape[1:])
    assert want == (None,) + tuple(layer(x).shape)[1:]


def test_a_conv_net_is_built_whole_and_summarized():
    model = vdev.models.Sequential([
        layers.Conv2D(4, 3, activation="relu", input_shape=(10, 10, 1), name="c1"),
        layers.MaxPooling2D(name="p1"),
        layers.Conv2D(6, 3, padding="same", name="c2"),
        layers.AveragePooling2D(name="p2"),
        layers.Flatten(name="f"),
        layers.Dense(3, name="d"),
    ], name="cnn")
    assert model.built
    assert [v.name for v in model.weights] == ["c1/kernel", "c1/bias", "c2/kernel", "c2/bias",
                                               "d/kernel", "d/bias"]
    assert model.layers[2].kernel.shape == (3, 3, 4, 6)
    assert model.layers[5].kernel.shape == (24, 3)
    lines = []
    model.summary(print_fn=lines.append)
    rows = [l for l in lines if l.startswith(" ") and l.strip()][1:]
    assert [r.split()[0] for r in rows] == ["c1", "p1", "c2", "p2", "f", "d"]
    assert [r[28:54].strip() for r in rows] == ["(None, 8, 8, 4)", "(None, 4, 4, 4)",
                                                "(None, 4, 4, 6)", "(None, 2, 2, 6)",
                                                "(None, 24)", "(None, 3)"]
    assert lines[-4] == "Total params: %s" % "{:,}".format(40 + 222 + 75)
    y = model(rng.uniform(-1, 1, (5, 10, 10, 1)).astype(np.float32))
    assert y.shape == (5, 3)


def test_a_model_without_an_input_shape_is_summarized_after_its_call():
    model = vdev.models.Sequential([layers.Conv2D(2, 3), layers.Flatten(), layers.Dense(2)])
    assert not model.built
    with pytest.raises(ValueError, match="This model has not yet been built"):
        model.summary()
    model(np.zeros((1, 5, 6, 3), np.float32))
    lines = []
    model.summary(print_fn=lines.append)
    assert "(None, 3, 4, 2)" in lines[4] and "(None, 24)" in lines[6]


def test_sequential_add_refuses_what_the_shape_cannot_take():
    model = vdev.models.Sequential([layers.Flatten(input_shape=(5, 5))])
    with pytest.raises(ValueError, match="expected min_ndim=4, found ndim=2"):
        model.add(layers.Conv2D(2, 3))
    assert len(model.layers) == 1
    model = vdev.models.Sequential([layers.MaxPooling2D(input_shape=(4, 4, 1))])
    with pytest.raises(ValueError) as e:
        model.add(layers.Conv2D(2, 3, name="small"))
    assert str(e.value) == ("One of the dimensions in the output is <= 0 due to downsampling in "
                            "small. Consider increasing the input size. Received input shape "
                            "[None, 2, 2, 1] which would produce output shape with a zero or "
                            "negative value in a dimension.")


@pytest.mark.parametrize("layer", [
    layers.Conv2D(3, (2, 3), strides=2, padding="same", activation="relu", use_bias=False,
                  kernel_initializer="he_normal", seed=5),
    layers.MaxPooling2D(3, 1, "same"),
    layers.AveragePooling2D((2, 1)),
    layers.Flatten(),
    layers.Dense(3, activation="tanh", seed=2),
])
def test_from_config_of_get_config(layer):
    config = layer.get_config()
    again = type(layer).from_config(config)
    assert type(again) is type(layer) and again.get_config() == config
    if hasattr(layer, "kernel"):  # the same initializer, seed included: the same weights
        x = rng.uniform(-1, 1, (1, 6, 6, 2)).astype(np.float32)
        layer(x)
        again(x)
        np.testing.assert_array_equal(again.kernel.numpy(), layer.kernel.numpy())


def test_flatten_keeps_an_int32_tensor_int32():
    x = vdev.constant(np.arange(24, dtype=np.int32).reshape(2, 3, 4))
    y = layers.Flatten()(x)
    assert y.dtype == vdev.int32 and y.shape == (2, 12)
    np.testing.assert_array_equal(y.numpy(), np.arange(24).reshape(2, 12))
    assert layers.Flatten()(np.ones((2, 2), np.float64)).dtype == vdev.float32


def test_a_conv_net_made_under_a_strategys_scope_trains_in_run():
    """Built whole under scope() (every variable mirrored there), so
    strategy.run makes none: before, its Dense was built in the step and
    refused."""
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    x = rng.uniform(-1, 1, (8, 6, 6, 1)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[rng.integers(0, 2, 8)]
    with strategy.scope():
        model = vdev.models.Sequential([
            layers.Conv2D(3, 3, activation="relu", input_shape=(6, 6, 1), seed=1),
            layers.MaxPooling2D(), layers.Flatten(), layers.Dense(2, seed=2)])
        opt = vdev.optimizers.SGD(0.1)
    assert model.built
    loss_fn = vdev.losses.CategoricalCrossentropy(from_logits=True, reduction="none")

    def step(bx, by):
        with vdev.GradientTape() as tape:
            loss = vdev.nn.compute_average_loss(loss_fn(by, model(bx)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses = [float(strategy.reduce("SUM", strategy.run(step, args=(bx, by))))
              for bx, by in strategy.experimental_distribute_dataset([(x, y)] * 6)]
    assert losses[-1] < losses[0]


def test_a_conv_step_out_of_memory_gives_everything_back(monkeypatch):
    """A training step too large for its logical device is an
    OutOfMemoryError naming the tensor; the weights stay as they were, every
    byte of the step comes back once its tape goes, and a smaller batch
    then trains on the same device."""
    monkeypatch.setenv("VDEV_SIM_GPUS", "2x256MiB")  # 31 MiB logical limits
    with vdev.device("GPU:1"):
        model = vdev.models.Sequential([
            layers.Conv2D(32, 3, activation="relu", padding="same", input_shape=(64, 64, 3)),
            layers.MaxPooling2D(), layers.Flatten(), layers.Dense(2)])
    opt = vdev.optimizers.SGD(0.01)
    before = [w.copy() for w in model.get_weights()]
    base = vdev.config.experimental.get_memory_info("GPU:1")["current"]
    x = rng.uniform(-1, 1, (64, 64, 64, 3)).astype(np.float32)
    tape = vdev.GradientTape()
    with pytest.raises(vdev.errors.OutOfMemoryError,
                       match=r"OOM when allocating tensor with shape\[64,64,64,32\] and type "
                             r"float \(32.00 MiB\) on "
                             r"/job:localhost/replica:0/task:0/device:GPU:1"):
        with tape:
            model(x)
    del tape
    assert vdev.config.experimental.get_memory_info("GPU:1")["current"] == base
    for w, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(w, b)
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_mean(model(x[:4]) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g.device.endswith("GPU:1") for g in grads)
    opt.apply_gradients(zip(grads, model.trainable_variables))


def test_a_conv_models_weights_restore_into_a_fresh_model(tmp_path):
    def make(seed):
        return vdev.models.Sequential([
            layers.Conv2D(3, 3, padding="same", input_shape=(6, 6, 2), seed=seed),
            layers.AveragePooling2D(), layers.Flatten(), layers.Dense(2, seed=seed + 1)])
    model, fresh = make(1), make(7)
    path = str(tmp_path / "cnn.safetensors")
    with pytest.raises(TypeError) as e:  # the type named, not every weight printed
        vdev.train.save_checkpoint(path, model.weights)
    assert str(e.value) == ("tensors must be a mapping {name: tensor}, not a list (a model's "
                            "weights: {v.name: v for v in model.weights})")
    vdev.train.save_checkpoint(path, {v.name: v for v in model.weights})
    # the fresh model's layers are numbered on (conv2d_1, ...): the entries
    # are the first model's names, in the same order
    vdev.train.load_checkpoint(path, {a.name: b for a, b in zip(model.weights, fresh.weights)})
    x = rng.uniform(-1, 1, (2, 6, 6, 2)).astype(np.float32)
    np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())


def test_a_sequential_inside_a_sequential():
    block = vdev.models.Sequential([layers.Conv2D(2, 3, padding="same"), layers.MaxPooling2D()])
    model = vdev.models.Sequential([
        vdev.models.Sequential([layers.Conv2D(3, 3, input_shape=(10, 10, 1))]),
        block, layers.Flatten(), layers.Dense(2)])
    assert model.built and block.layers[0].kernel.shape == (3, 3, 3, 2)
    assert model.compute_output_shape((None, 10, 10, 1)) == (None, 2)
    lines = []
    model.summary(print_fn=lines.append)
    assert "(None, 8, 8, 3)" in lines[4] and "(None, 4, 4, 2)" in lines[6]
    assert model(np.zeros((1, 10, 10, 1), np.float32)).shape == (1, 2)
