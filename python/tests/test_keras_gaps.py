"""Small Keras / TensorFlow gaps closed as Keras 2.11 and TensorFlow have
them: the global pooling layers (GlobalAveragePooling1D/2D,
GlobalMaxPooling1D/2D) in a Sequential and a functional model; an int64 id
outside int32 given to vdev.gather, vdev.nn.embedding_lookup and fit under a
MirroredStrategy is TensorFlow's InvalidArgumentError naming the first id
outside the table, as vdev.layers.Embedding gives; Sequential's get_config /
from_config and clone_model; save_weights and save_checkpoint into a folder
that does not exist; Embedding's sizes checked as Keras 2.11 checks them;
the progress bar of an epoch that fit stopped early."""
import numpy as np
import pytest

import vdev
from vdev import layers
from vdev.errors import InvalidArgumentError

WIDE = np.array([[1, 2 ** 32], [3, 4]], np.int64)


# ---- int64 ids outside int32 ----

def test_gather_and_embedding_lookup_name_the_first_id_outside_the_table():
    p = vdev.constant(np.arange(30, dtype=np.float32).reshape(10, 3))
    for fn in (vdev.gather, vdev.nn.embedding_lookup):
        with pytest.raises(InvalidArgumentError) as e:
            fn(p, WIDE)
        assert str(e.value) == "indices[0,1] = 4294967296 is not in [0, 10)"
        with pytest.raises(InvalidArgumentError) as e:  # a list, an id in int32 first
            fn(p, [12, -2 ** 40])
        assert str(e.value) == "indices[0] = 12 is not in [0, 10)"
    # along another axis: the first id outside that axis's size
    with pytest.raises(InvalidArgumentError) as e:
        vdev.gather(p, np.array([2, 2 ** 31], np.int64), axis=1)
    assert str(e.value) == "indices[1] = 2147483648 is not in [0, 3)"
    # int64 ids inside int32 still gather
    got = vdev.gather(p, np.array([[9, 0]], np.int64)).numpy()
    np.testing.assert_array_equal(got, np.arange(30, dtype=np.float32).reshape(10, 3)[[[9, 0]]])


def test_fit_under_a_mirrored_strategy_names_the_replicas_first_id_outside_the_table():
    x = np.array([[1, 2], [3, 4], [5, 2 ** 32], [7, 8]], np.int64)
    y = np.zeros(4, np.int32)
    with vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"]).scope():
        model = vdev.models.Sequential([layers.Embedding(10, 3, input_length=2, seed=1),
                                        layers.Flatten(), layers.Dense(2, seed=2)])
        model.compile("sgd", vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(InvalidArgumentError) as e:
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    # rows 2 and 3 are the second replica's: its ids' row 0, as each
    # replica's GatherV2 names them in TensorFlow
    assert str(e.value) == "indices[0,1] = 4294967296 is not in [0, 10)"
    # in-range int64 ids still train
    model.fit(x % 10, y, batch_size=4, epochs=1, verbose=0)


# ---- Embedding's sizes ----

def test_embedding_sizes_are_checked_as_keras_2_11_checks_them():
    with pytest.raises(ValueError) as e:
        layers.Embedding(0, 3)
    assert str(e.value) == ("Both `input_dim` and `output_dim` should be positive, Received "
                            "input_dim = 0 and output_dim = 3")
    with pytest.raises(ValueError) as e:
        layers.Embedding(10, -2.5)
    assert str(e.value) == ("Both `input_dim` and `output_dim` should be positive, Received "
                            "input_dim = 10 and output_dim = -2.5")
    # a positive float passes Keras's check and is refused where the table
    # is made (TensorShape's TypeError; vdev makes it with the layer)
    for args, shown in (((10.0, 3), "10.0"), ((10, np.float32(3)), "3.0")):
        with pytest.raises(TypeError) as e:
            layers.Embedding(*args)
        assert str(e.value) == ("Dimension value must be integer or None or have an __index__ "
                                "method, got value '%s' with type '%r'"
                                % (shown, type(args[0] if shown == "10.0" else args[1])))
    assert layers.Embedding(np.int64(4), 2).embeddings.shape == (4, 2)


# ---- global pooling ----

def _np(x):
    return np.asarray(x.numpy())


@pytest.mark.parametrize("cls,ref,shape", [
    (layers.GlobalAveragePooling1D, np.mean, (2, 5, 3)),
    (layers.GlobalMaxPooling1D, np.max, (2, 5, 3)),
    (layers.GlobalAveragePooling2D, np.mean, (2, 3, 4, 3)),
    (layers.GlobalMaxPooling2D, np.max, (2, 3, 4, 3))])
def test_global_pooling_values_shapes_and_keepdims(cls, ref, shape):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    axes = tuple(range(1, len(shape) - 1))
    got = _np(cls()(x))
    np.testing.assert_allclose(got, ref(x.astype(np.float64), axis=axes), rtol=1e-6, atol=1e-7)
    assert got.shape == (shape[0], shape[-1])
    kept = cls(keepdims=True)(vdev.constant(x))
    assert tuple(kept.shape) == (shape[0],) + (1,) * len(axes) + (shape[-1],)
    np.testing.assert_array_equal(_np(kept).reshape(got.shape), got)
    if ref is np.max:  # the maximum is exact
        np.testing.assert_array_equal(got, x.max(axis=axes))
    layer = cls(keepdims=True)
    assert layer.compute_output_shape((None,) + shape[1:]) == \
        (None,) + (1,) * len(axes) + (shape[-1],)
    assert cls().compute_output_shape((None,) + shape[1:]) == (None, shape[-1])
    cfg = layer.get_config()
    assert {k: cfg[k] for k in ("data_format", "keepdims", "dtype", "trainable")} == \
        {"data_format": "channels_last", "keepdims": True, "dtype": "float32",
         "trainable": True}
    assert cls.from_config(cfg).keepdims is True
    assert layer.count_params() == 0 and layer.weights == []


def test_global_pooling_gradients():
    x = vdev.Variable(np.array([[[1., 5.], [3., -2.], [2., 7.]]], np.float32))  # (1, 3, 2)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(layers.GlobalAveragePooling1D()(x) * [1., 2.])
    np.testing.assert_allclose(_np(tape.gradient(y, x)), [[[1 / 3, 2 / 3]] * 3], rtol=1e-6)
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(layers.GlobalMaxPooling1D()(x) * [1., 2.])
    np.testing.assert_array_equal(_np(tape.gradient(y, x)), [[[0, 0], [1, 0], [0, 2]]])
    # a tie: max_pool2d's gradient goes to the first maximum (TensorFlow's
    # reduce_max would give each of the two half: the README's difference)
    t = vdev.Variable(np.array([[[4.], [4.]]], np.float32))
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(layers.GlobalMaxPooling1D()(t))
    np.testing.assert_array_equal(_np(tape.gradient(y, t)), [[[1.], [0.]]])


def test_global_pooling_refuses_as_keras_does():
    with pytest.raises(ValueError) as e:
        layers.GlobalAveragePooling1D(name="gap")(np.zeros((2, 5), np.float32))
    assert str(e.value) == ('Input 0 of layer "gap" is incompatible with the layer: expected '
                            "ndim=3, found ndim=2. Full shape received: (2, 5)")
    with pytest.raises(ValueError) as e:
        layers.GlobalMaxPooling2D(name="gmp").compute_output_shape((None, 4, 3))
    assert str(e.value) == ('Input 0 of layer "gmp" is incompatible with the layer: expected '
                            "ndim=4, found ndim=3. Full shape received: (None, 4, 3)")
    with pytest.raises(ValueError) as e:
        layers.GlobalAveragePooling1D()(np.zeros((2, 0, 3), np.float32))
    assert str(e.value) == "Incorrect input shape [2, 0, 3] with dimension 0 at reduction axis 1."
    with pytest.raises(ValueError) as e:
        layers.GlobalMaxPooling1D(data_format="channels_first")
    assert str(e.value) == ("vdev's GlobalMaxPooling1D takes data_format=None or "
                            "'channels_last' only, not 'channels_first': vdev's convolutions "
                            "are NHWC")
    assert layers.GlobalAvgPool1D is layers.GlobalAveragePooling1D
    assert layers.GlobalMaxPool2D is layers.GlobalMaxPooling2D


def _text_model():
    return vdev.models.Sequential([layers.Embedding(20, 4, input_length=6, seed=1),
                                   layers.GlobalAveragePooling1D(),
                                   layers.Dense(2, seed=2)])


def test_embedding_global_average_pooling_dense_builds_and_trains():
    model = _text_model()
    assert model.built and model._output_shapes()[1] == (None, 4)
    lines = []
    model.summary(print_fn=lines.append)
    assert any(l.startswith(" global_average_pooling1d") and "(None, 4)" in l for l in lines)
    ids = np.random.default_rng(5).integers(0, 20, size=(16, 6)).astype(np.int32)
    e = model.layers[0].embeddings.numpy()
    want = e[ids].mean(axis=1) @ model.layers[2].kernel.numpy() + model.layers[2].bias.numpy()
    np.testing.assert_allclose(_np(model(ids)), want, rtol=1e-5, atol=1e-6)
    model.compile("adam", vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(ids, ids[:, 0] % 2, batch_size=8, epochs=3, verbose=0)
    assert len(hist.history["loss"]) == 3
    # the functional API: the same layers on an Input
    inp = vdev.layers.Input((6,), dtype="int32")
    h = layers.GlobalMaxPooling1D()(layers.Embedding(20, 4, seed=1)(inp))
    out = layers.Dense(3, seed=2)(h)
    assert tuple(h.shape) == (None, 4) and tuple(out.shape) == (None, 3)
    f = vdev.models.Model(inp, out)
    assert tuple(f(ids).shape) == (16, 3)


def test_conv_global_average_pooling_dense_in_sequential_and_functional():
    seq = vdev.models.Sequential([layers.Conv2D(5, 3, input_shape=(8, 8, 2), seed=1),
                                  layers.GlobalAveragePooling2D(),
                                  layers.Dense(3, seed=2)])
    assert seq.built and seq._output_shapes() == [(None, 6, 6, 5), (None, 5), (None, 3)]
    x = np.random.default_rng(2).standard_normal((4, 8, 8, 2)).astype(np.float32)
    conv = _np(seq.layers[0](x))
    want = conv.mean(axis=(1, 2)) @ seq.layers[2].kernel.numpy() + seq.layers[2].bias.numpy()
    np.testing.assert_allclose(_np(seq(x)), want, rtol=1e-5, atol=1e-6)
    inp = vdev.layers.Input((8, 8, 2))
    h = layers.GlobalMaxPooling2D(keepdims=True)(layers.Conv2D(5, 3, seed=1)(inp))
    assert tuple(h.shape) == (None, 1, 1, 5)
    out = layers.Dense(3, seed=2)(layers.GlobalAveragePooling2D()(
        layers.Conv2D(5, 3, seed=1)(inp)))
    assert tuple(vdev.models.Model(inp, out)(x).shape) == (4, 3)


# ---- Sequential's config, clone_model ----

def test_sequential_config_round_trip_and_clone_model():
    model = _text_model()
    model.layers[2].trainable = False
    cfg = model.get_config()
    assert cfg["name"] == model.name
    assert [c["class_name"] for c in cfg["layers"]] == ["InputLayer", "Embedding",
                                                       "GlobalAveragePooling1D", "Dense"]
    assert cfg["layers"][1]["config"]["batch_input_shape"] == (None, 6)
    assert cfg["layers"][2]["config"]["keepdims"] is False
    assert "build_input_shape" not in cfg
    for copy in (vdev.models.Sequential.from_config(cfg), vdev.models.clone_model(model)):
        assert copy is not model and copy.name == model.name
        assert [l.name for l in copy.layers] == [l.name for l in model.layers]
        assert all(a is not b for a, b in zip(copy.layers, model.layers))
        assert copy.built and copy._output_shapes() == model._output_shapes()
        assert copy.layers[2].trainable is False
        assert [tuple(w.shape) for w in copy.weights] == [tuple(w.shape) for w in model.weights]
        assert copy.get_config() == cfg
        copy.set_weights(model.get_weights())
        ids = np.arange(12, dtype=np.int32).reshape(2, 6)
        np.testing.assert_array_equal(_np(copy(ids)), _np(model(ids)))
    # Keras's older form (a list), an InputLayer entry, a layer built by a call
    plain = vdev.models.Sequential([layers.Dense(3, seed=1)])
    plain(np.zeros((2, 4), np.float32))
    pc = plain.get_config()
    assert pc["build_input_shape"] == (None, 4)
    assert vdev.models.Sequential.from_config(pc).layers[0].kernel.shape == (4, 3)
    listed = vdev.models.Sequential.from_config(
        [{"class_name": "InputLayer", "config": {"batch_input_shape": (None, 5), "name": "in"}},
         {"class_name": "Dense", "config": {"units": 2, "name": "d"}}])
    assert listed.layers[0].kernel.shape == (5, 2)
    with pytest.raises(ValueError) as e:
        vdev.models.Sequential.from_config({"name": "m", "layers": [
            {"class_name": "ConvLSTM2D", "config": {"filters": 4}}]})
    assert str(e.value) == (
        "Unknown layer: 'ConvLSTM2D'. Please ensure you are using a "
        "`keras.utils.custom_object_scope` and that this object is included in the scope. See "
        "https://www.tensorflow.org/guide/keras/save_and_serialize#registering_the_custom_object "
        "for details.")
    # clone_function; a functional model is cloned too (test_kclone_clone.py)
    seen = []
    vdev.models.clone_model(model, clone_function=lambda l: seen.append(l.name) or l)
    assert seen == [l.name for l in model.layers]
    inp = vdev.layers.Input((3,))
    functional = vdev.models.Model(inp, layers.Dense(2, name="fd")(inp), name="fm")
    clone = vdev.models.clone_model(functional)
    assert clone.name == "fm" and clone.get_layer("fd") is not functional.get_layer("fd")


# ---- saving into a folder that does not exist ----

def test_save_checkpoint_and_save_weights_make_a_missing_folder(tmp_path):
    w = vdev.Variable([1.0, 2.0])
    path = tmp_path / "a" / "b" / "ckpt.safetensors"
    vdev.train.save_checkpoint(path, {"w": w})
    assert path.is_file()
    w.assign([0.0, 0.0])
    vdev.train.load_checkpoint(path, {"w": w})
    np.testing.assert_array_equal(_np(w), [1.0, 2.0])
    model = _text_model()
    where = tmp_path / "weights" / "run1" / "model.ckpt"
    model.save_weights(str(where))
    fresh = _text_model()
    fresh.load_weights(str(where))
    for a, b in zip(fresh.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    # a folder that cannot be made (a file in its place) is the write's error
    (tmp_path / "file").write_text("x")
    bad = tmp_path / "file" / "c"
    with pytest.raises(vdev.errors.FailedPreconditionError) as e:
        vdev.train.save_checkpoint(bad, {"w": w})
    assert str(e.value) == "checkpoint '%s': cannot stat '%s': Not a directory" % (bad, bad)


# ---- the progress line of an epoch fit stopped early ----

class _StopAt(vdev.callbacks.Callback):
    def __init__(self, batch):
        super().__init__()
        self.batch, self.ran = batch, 0

    def on_train_batch_end(self, batch, logs=None):
        self.ran += 1
        if batch == self.batch:
            self.model.stop_training = True


@pytest.mark.parametrize("verbose,start", [(2, "4/4 - "), (1, "4/4 [" + "=" * 30 + "] - ")])
def test_an_epoch_stopped_early_ends_its_line_at_the_steps_as_keras(capsys, verbose, start):
    model = vdev.models.Sequential([layers.Dense(1, input_dim=2, seed=1)])
    model.compile("sgd", "mse")
    stop = _StopAt(1)
    x = np.ones((16, 2), np.float32)
    model.fit(x, np.ones(16, np.float32), batch_size=4, epochs=3, verbose=verbose,
              callbacks=[stop])
    assert stop.ran == 2  # two of the epoch's four batches ran, then fit stopped
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Epoch 1/3" and len(out) == 2
    # Keras 2.11's ProgbarLogger finalizes the bar at its target, params["steps"]
    assert out[1].startswith(start), out[1]


def test_one_input_layers_refuse_two_symbolic_inputs_as_keras():
    a, b = vdev.Input(shape=(5, 3)), vdev.Input(shape=(5, 3))
    for layer in (vdev.layers.GlobalAveragePooling1D(name="gap"),
                  vdev.layers.Embedding(10, 3, name="emb")):
        with pytest.raises(ValueError) as e:
            layer([a, b])
        assert str(e.value).startswith('Layer "%s" expects 1 input(s), but it received 2 input '
                                       "tensors." % layer.name)
