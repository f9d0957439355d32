"""Keras habits with models and layers, each as Keras does it: a layer used
twice in a Sequential lists its variables once (one update per step), and
two layers of one name are refused in Keras's words; default layer names are
numbered per class (dense, dense_1, ...), so {v.name: v} keeps every layer;
a numpy batch (or label array) is made on the device of the layer (or of
the logits) that takes it, never on GPU:0 first; zeros_like and ones_like
follow their input's device; a learning rate of 0 (a warm-up's first step)
is taken; Dense names itself when the input's width is wrong and applies on
the last axis of a [batch, time, features] input; an int32 target of
tape.gradient gets None with TensorFlow's warning; compute_average_loss of
an empty batch is 0, as the losses give it."""
import logging

import numpy as np
import pytest

import vdev
from conftest import run_python

GPU = "/job:localhost/replica:0/task:0/device:GPU:%d"


# ---- a layer used twice; layers of one name ----

def test_a_shared_layer_is_updated_once_per_step():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    d = vdev.layers.Dense(3, input_dim=3, seed=1)
    other = vdev.layers.Dense(2, input_dim=3, seed=2)
    m = vdev.models.Sequential([d, d, other])
    assert [id(v) for v in m.trainable_variables] == [id(d.kernel), id(d.bias),
                                                      id(other.kernel), id(other.bias)]
    assert [id(v) for v in m.variables] == [id(v) for v in m.trainable_variables]
    w0 = d.kernel.numpy().copy()
    w1 = other.kernel.numpy().copy()
    with vdev.GradientTape() as t:
        loss = vdev.reduce_sum(m(x))
    g = t.gradient(loss, m.trainable_variables)
    vdev.optimizers.SGD(0.1).apply_gradients(zip(g, m.trainable_variables))
    # d.L / d.W for L = sum(((x W + b) W + b) W1 + b1), b = 0: the two uses of W
    h = x @ w0
    up = np.ones((4, 2), np.float32) @ w1.T  # dL/d(second output)
    want = x.T @ (up @ w0.T) + h.T @ up
    np.testing.assert_allclose(d.kernel.numpy(), w0 - 0.1 * want, rtol=1e-5, atol=1e-6)


def test_two_layers_of_one_name_are_refused_as_keras():
    a = vdev.layers.Dense(2, name="proj")
    m = vdev.models.Sequential([a, a])  # the same layer twice is sharing, not a clash
    with pytest.raises(ValueError) as e:
        m.add(vdev.layers.Dense(3, name="proj"))
    assert str(e.value) == ('All layers added to a Sequential model should have unique names. '
                            'Name "proj" is already the name of a layer in this model. Update '
                            'the `name` argument to pass a unique name.')
    assert len(m.layers) == 2
    with pytest.raises(ValueError):
        vdev.models.Sequential([vdev.layers.Dense(2, name="x"), vdev.layers.Dense(2, name="x")])


# ---- default names ----

def test_default_layer_names_are_numbered_per_class_as_keras():
    code = """if True:
        import vdev
        L, M = vdev.layers, vdev.models
        names = [L.Dense(2).name, L.Dense(2).name, L.Dense(2, name="proj").name,
                 L.Dense(2, name="dense_7").name, L.Dense(2).name, M.Sequential().name,
                 M.Sequential().name, M.MLP([2, 3]).name]
        print(names)
        class MyDenseLayer(L.Dense):
            pass
        print(MyDenseLayer(2).name, MyDenseLayer(2).name)
        """
    rc, out, err = run_python(code)
    assert rc == 0, err
    assert out.splitlines() == [
        "['dense', 'dense_1', 'proj', 'dense_7', 'dense_2', 'sequential', 'sequential_1', "
        "'mlp']",
        "my_dense_layer my_dense_layer_1"]


def test_variable_names_keep_every_layer_of_a_model(tmp_path):
    x = np.ones((16, 4), np.float32)

    def model():
        return vdev.models.Sequential([vdev.layers.Dense(8, activation="relu", seed=1),
                                       vdev.layers.Dense(2, seed=2)])
    m = model()
    m(x)
    names = [v.name for v in m.trainable_variables]
    assert len(set(names)) == 4 and names[0].endswith("/kernel")
    assert names[0].split("/")[0] != names[2].split("/")[0]
    path = str(tmp_path / "c.safetensors")
    vdev.train.save_checkpoint(path, {v.name: v for v in m.trainable_variables})
    assert len(vdev.train.list_variables(path)) == 4
    m2 = model()
    m2(x)
    for a in m2.trainable_variables:
        a.assign(np.zeros(a.shape, np.float32))
    vdev.train.load_checkpoint(path, {v.name: w for v, w in zip(m.trainable_variables,
                                                                 m2.trainable_variables)})
    np.testing.assert_array_equal(m2(x).numpy(), m(x).numpy())


# ---- where a numpy input is made ----

def test_a_numpy_batch_is_made_on_the_layers_device():
    E = vdev.config.experimental
    x = np.ones((64, 32), np.float32)
    lab = np.zeros(64, np.int32)
    with vdev.device("GPU:2"):
        m = vdev.models.MLP([32, 10], seed=1)
        lazy = vdev.layers.Dense(3)  # built at its first call, on GPU:2
    E.reset_memory_stats("GPU:0")
    vdev.placement.reset()
    out = m(x)
    assert out.device == GPU % 2
    assert lazy(x).device == GPU % 2 and lazy.kernel.device == GPU % 2
    assert lazy(x.tolist()).device == GPU % 2
    loss = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)(lab, out)
    assert loss.device == GPU % 2
    loss = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)(lab[:, None], out)
    assert vdev.placement.bytes_copied() == 0
    assert E.get_memory_info("GPU:0")["peak"] == 0
    vdev.placement.set_policy("strict")
    assert m(x[:2]).device == GPU % 2
    vdev.losses.SparseCategoricalCrossentropy(from_logits=True)(lab, out)
    vdev.placement.set_policy("copy")
    # a scope open at the call decides, as for any value beside a tensor:
    # the batch is made there, and the op runs there (the kernel is copied)
    vdev.placement.reset()
    with vdev.device("GPU:1"):
        assert m(x).device == GPU % 1
    assert vdev.placement.bytes_copied("GPU:1", "GPU:2") == 0
    assert vdev.placement.bytes_copied("GPU:2", "GPU:1") > 0


# ---- *_like ----

def test_zeros_like_and_ones_like_follow_their_input():
    with vdev.device("GPU:2"):
        x = vdev.constant([[1.0, 2.0]])
        k = vdev.constant([3, 4])
        m = vdev.models.MLP([4, 8, 3], seed=1)
    for f, want in ((vdev.zeros_like, 0), (vdev.ones_like, 1)):
        for t in (x, k):
            r = f(t)
            assert r.device == GPU % 2 and r.dtype is t.dtype and r.shape == t.shape
            assert r.numpy().tolist() == np.full(t.shape, want).tolist()
        with vdev.device("GPU:1"):
            assert f(x).device == GPU % 1  # the scope decides
    # gradient accumulation beside a model on GPU:2: no copy anywhere
    y = np.ones((8, 3), np.float32)
    with vdev.device("GPU:2"):
        xb = vdev.constant(np.ones((8, 4), np.float32))
    vdev.placement.reset()
    acc = [vdev.Variable(vdev.zeros_like(v), trainable=False) for v in m.trainable_variables]
    for _ in range(2):
        with vdev.GradientTape() as t:
            loss = vdev.losses.MeanSquaredError()(y, m(xb))
        for a, g in zip(acc, t.gradient(loss, m.trainable_variables)):
            a.assign_add(g)
    vdev.optimizers.SGD(0.1).apply_gradients(zip(acc, m.trainable_variables))
    assert {a.device for a in acc} == {GPU % 2}
    assert vdev.placement.bytes_copied() == 0


# ---- learning rate 0 ----

def test_a_learning_rate_of_zero_is_taken():
    v = vdev.Variable([1.0])
    for opt in (vdev.optimizers.SGD(0.0), vdev.optimizers.SGD(0, momentum=0.5),
                vdev.optimizers.Adam(learning_rate=0.0)):
        assert float(opt.learning_rate) == 0.0
        opt.apply_gradients([(vdev.constant([1.0]), v)])
        assert v.numpy().tolist() == [1.0] and opt.iterations == 1
    opt = vdev.optimizers.Adam(1e-3)
    for step in range(3):  # a linear warm-up from 0
        opt.learning_rate = 0.5 * step / 2
        opt.apply_gradients([(vdev.constant([1.0]), v)])
        if step == 0:
            assert v.numpy().tolist() == [1.0]
    assert v.numpy()[0] < 1.0
    for bad in (-1e-3, float("nan")):
        with pytest.raises(ValueError):
            opt.learning_rate = bad
        with pytest.raises(ValueError):
            vdev.optimizers.SGD(bad)


# ---- Dense's input ----

def test_dense_names_itself_for_an_input_of_the_wrong_width_or_rank():
    d = vdev.layers.Dense(3, input_dim=5, name="proj")
    with pytest.raises(ValueError) as e:
        d(np.ones((2, 6), np.float32))
    assert str(e.value) == ('Input 0 of layer "proj" is incompatible with the layer: expected '
                            'axis -1 of input shape to have value 5, but received input with '
                            'shape (2, 6)')
    with pytest.raises(ValueError) as e:
        d(vdev.constant([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert str(e.value) == ('Input 0 of layer "proj" is incompatible with the layer: expected '
                            'min_ndim=2, found ndim=1. Full shape received: (5,)')
    lazy = vdev.layers.Dense(3, name="lazy")
    with pytest.raises(ValueError) as e:
        lazy(vdev.constant(1.0))
    assert str(e.value) == ('Input 0 of layer "lazy" is incompatible with the layer: expected '
                            'min_ndim=2, found ndim=0. Full shape received: ()')
    assert lazy.kernel is None


def test_dense_applies_on_the_last_axis_of_a_sequence():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7, 5)).astype(np.float32)
    d = vdev.layers.Dense(3, activation="relu", seed=4)
    xv = vdev.constant(x)
    with vdev.GradientTape() as t:
        y = d(xv)
        loss = vdev.reduce_sum(y)
    assert y.shape == (2, 7, 3)
    w, b = d.kernel.numpy(), d.bias.numpy()
    want = np.maximum(x @ w + b, 0)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    gw, gb = t.gradient(loss, [d.kernel, d.bias])
    mask = (want > 0).astype(np.float32)
    np.testing.assert_allclose(gw.numpy(), x.reshape(-1, 5).T @ mask.reshape(-1, 3),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb.numpy(), mask.reshape(-1, 3).sum(0), rtol=1e-6)
    assert d(np.ones((1, 2, 4, 5), np.float32)).shape == (1, 2, 4, 3)


# ---- TensorFlow's small rules ----

def test_an_int32_target_has_no_gradient(caplog):
    v = vdev.Variable([1.0, 2.0])
    with caplog.at_level(logging.WARNING, logger="vdev"):
        with vdev.GradientTape(persistent=True) as t:
            k = vdev.argmax(v * 1.0)
            f = vdev.reduce_sum(v * 3.0)
        assert t.gradient(k, v) is None
        assert t.gradient(k, [v], unconnected_gradients="zero")[0].numpy().tolist() == [0, 0]
        assert t.gradient([k, f], v).numpy().tolist() == [3.0, 3.0]
    assert [r.getMessage() for r in caplog.records] == [
        "The dtype of the target tensor must be floating (e.g. vdev.float32) when calling "
        "GradientTape.gradient, got int32"] * 3


def test_compute_average_loss_of_an_empty_batch_is_zero():
    v = vdev.Variable([[1.0, 2.0, 3.0]])
    empty = np.zeros((0, 3), np.float32)
    cce = vdev.losses.CategoricalCrossentropy(from_logits=True, reduction="none")
    with vdev.GradientTape() as t:
        loss = vdev.nn.compute_average_loss(cce(empty, vdev.matmul(empty[:, :1], v)))
    assert loss.numpy() == 0.0 and loss.shape == ()
    assert loss.numpy() == vdev.losses.CategoricalCrossentropy(from_logits=True)(
        empty, empty).numpy()
    assert t.gradient(loss, v, unconnected_gradients="zero").numpy().tolist() == [[0, 0, 0]]
    assert vdev.nn.compute_average_loss(vdev.constant([1.0, 3.0])).numpy() == 2.0


def test_the_optimizers_metadata_keys_are_its_own(tmp_path):
    v = vdev.Variable([1.0], name="v")
    opt = vdev.optimizers.SGD(0.5)
    path = str(tmp_path / "c.safetensors")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.train.save_checkpoint(path, {"v": v}, metadata={"optimizer/learning_rate": "5"},
                                   optimizer=opt)
    assert str(e.value) == ("checkpoint '%s': metadata key 'optimizer/learning_rate' is the "
                            "optimizer's own: save_checkpoint writes it from optimizer=; give "
                            "yours another key" % path)
    vdev.train.save_checkpoint(path, {"v": v}, metadata={"optimizer/learning_rate": "5"})
    assert vdev.train.checkpoint_metadata(path)["optimizer/learning_rate"] == "5"


# ---- freezing layers (Keras 2's layer.trainable) ----

def test_a_frozen_layer_lists_no_trainable_variables_and_does_not_train():
    """Fine-tuning as in Keras: a backbone set ``trainable = False`` after it
    is built leaves the model's trainable_variables (the head's alone), so
    the optimizer leaves it as it was; the variables' own flags stay True
    (Keras 2); a model's setting sets every layer in it; Dense takes
    trainable= as Keras's layers do, and get_config says it."""
    back = vdev.layers.Dense(4, input_dim=3, seed=1)
    head = vdev.layers.Dense(1, seed=2)
    m = vdev.models.Sequential([back, head])
    assert back.trainable and m.trainable
    back.trainable = False
    assert back.trainable is False and back.trainable_variables == []
    assert back.trainable_weights == []
    assert [id(v) for v in back.non_trainable_weights] == [id(back.kernel), id(back.bias)]
    assert back.kernel.trainable and back.bias.trainable
    assert back.get_config()["trainable"] is False
    assert [id(v) for v in m.trainable_variables] == [id(head.kernel), id(head.bias)]
    assert [id(v) for v in m.non_trainable_weights] == [id(back.kernel), id(back.bias)]
    x = np.ones((5, 3), np.float32)
    y = np.zeros((5, 1), np.float32)
    kept = [v.numpy().copy() for v in back.variables]
    h0 = head.kernel.numpy().copy()
    opt = vdev.optimizers.SGD(0.1)
    for _ in range(3):
        with vdev.GradientTape() as t:
            loss = vdev.losses.MeanSquaredError()(y, m(x))
        g = t.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(g, m.trainable_variables))
    assert [a.tobytes() for a in kept] == [v.numpy().tobytes() for v in back.variables]
    assert not np.array_equal(h0, head.kernel.numpy())
    lines = []
    m.summary(print_fn=lines.append)
    assert "Trainable params: 5" in lines and "Non-trainable params: 16" in lines
    m.trainable = False  # every layer in it
    assert m.trainable_variables == [] and not head.trainable and not back.trainable
    assert len(m.non_trainable_weights) == 4
    m.trainable = True
    assert back.trainable and len(m.trainable_variables) == 4
    frozen = vdev.layers.Dense(2, input_dim=3, trainable=False)
    assert frozen.trainable_variables == [] and len(frozen.non_trainable_weights) == 2
    assert vdev.models.Sequential([frozen], trainable=False).trainable is False
