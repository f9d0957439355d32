"""vdev.layers.BatchNormalization and LayerNormalization against PyTorch's
F.batch_norm and F.layer_norm (Keras's momentum m is PyTorch's 1 - m; the
epsilon is the same): outputs and the gradients of the input, gamma and beta
on CPU:0 and on a simulated GPU (GPU:1 of VDEV_SIM_GPUS=2x1GiB); the moving
statistics after several training steps (Keras 2.11's fused path, a 4-D
input on axis 3 or 1, takes the Bessel-corrected variance, as PyTorch's
running_var; its other path the biased one, checked against NumPy); the
inference mode using them; a frozen layer; configs, weights and Keras's
error texts."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import vdev
from vdev import layers

RTOL, ATOL = 1e-5, 2e-5


def sim2(monkeypatch):
    monkeypatch.setenv("VDEV_SIM_GPUS", "2x1GiB")


def data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 1.5 + 0.7).astype(np.float32)


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=ATOL)


def to_nchw(a):
    return np.ascontiguousarray(np.moveaxis(a, -1, 1))


def from_nchw(a):
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_batch_norm_nhwc_trains_as_torch(monkeypatch, dev):
    sim2(monkeypatch)
    c = 5
    gamma, beta = data((c,), 1), data((c,), 2)
    with vdev.device(dev):
        bn = layers.BatchNormalization(momentum=0.9, epsilon=1e-3)
    rm, rv = torch.zeros(c), torch.ones(c)
    for step in range(3):
        x = data((4, 3, 3, c), 10 + step)
        with vdev.device(dev):
            xv = vdev.Variable(x)
            w = vdev.constant(data(x.shape, 99))
        if not bn.built:
            bn.build((None, 3, 3, c))
            bn.set_weights([gamma, beta, np.zeros(c), np.ones(c)])
        with vdev.GradientTape() as tape:
            y = bn(xv, training=True)  # no scope open: it runs where x is
            loss = vdev.reduce_sum(vdev.multiply(y, w))
        gx, gg, gb = tape.gradient(loss, [xv, bn.gamma, bn.beta])
        tx = torch.tensor(to_nchw(x), requires_grad=True)
        tg = torch.tensor(gamma, requires_grad=True)
        tb = torch.tensor(beta, requires_grad=True)
        ty = F.batch_norm(tx, rm, rv, tg, tb, training=True, momentum=0.1, eps=1e-3)
        (ty * torch.tensor(to_nchw(data(y.shape, 99)))).sum().backward()
        close(y.numpy(), from_nchw(ty.detach().numpy()))
        close(gx.numpy(), from_nchw(tx.grad.numpy()))
        close(gg.numpy(), tg.grad.numpy())
        close(gb.numpy(), tb.grad.numpy())
        # fused: the moving variance takes the batch's variance times n/(n-1)
        close(bn.moving_mean.numpy(), rm.numpy())
        close(bn.moving_variance.numpy(), rv.numpy())
    assert bn.fused is True
    for v in bn.weights:
        assert v.device.endswith(dev)
    assert y.device.endswith(dev)
    # inference: the moving statistics (training=None and False alike)
    x = data((2, 3, 3, c), 50)
    ref = F.batch_norm(torch.tensor(to_nchw(x)), rm, rv, torch.tensor(gamma),
                       torch.tensor(beta), training=False, eps=1e-3).numpy()
    with vdev.device(dev):
        xt = vdev.constant(x)
    before = [w.copy() for w in bn.get_weights()]
    close(bn(xt).numpy(), from_nchw(ref))
    close(bn(xt, training=False).numpy(), from_nchw(ref))
    for a, b in zip(before, bn.get_weights()):
        assert a.tobytes() == b.tobytes()  # inference updates nothing


def test_batch_norm_2d_moving_variance_is_biased_as_keras_non_fused():
    c = 3
    bn = layers.BatchNormalization(momentum=0.8)
    mm, mv = np.zeros(c, np.float32), np.ones(c, np.float32)
    decay = np.float32(1 - 0.8)
    for step in range(4):
        x = data((6, c), step)
        xv = vdev.Variable(x)
        with vdev.GradientTape() as tape:
            y = bn(xv, training=True)
            loss = vdev.reduce_sum(vdev.multiply(y, y))
        gx = tape.gradient(loss, xv)
        tx = torch.tensor(x, requires_grad=True)
        ty = F.batch_norm(tx, None, None, torch.ones(c), torch.zeros(c), training=True,
                          eps=1e-3)
        (ty * ty).sum().backward()
        close(y.numpy(), ty.detach().numpy())
        close(gx.numpy(), tx.grad.numpy())
        mm = mm - (mm - x.mean(0)) * decay
        mv = mv - (mv - x.var(0)) * decay  # biased: Keras's tf.nn.moments
        close(bn.moving_mean.numpy(), mm)
        close(bn.moving_variance.numpy(), mv)
    assert bn.fused is False
    unbiased = np.ones(c, np.float32)
    for step in range(4):
        unbiased = unbiased - (unbiased - data((6, c), step).var(0, ddof=1)) * decay
    assert np.abs(bn.moving_variance.numpy() - unbiased).max() > 1e-2


def test_batch_norm_fused_false_on_4d_takes_the_biased_variance():
    bn = layers.BatchNormalization(momentum=0.5, fused=False)
    x = data((2, 2, 2, 3), 4)
    bn(x, training=True)
    close(bn.moving_variance.numpy(), 0.5 + 0.5 * x.reshape(-1, 3).var(0))
    bn2 = layers.BatchNormalization(momentum=0.5)
    bn2(x, training=True)
    close(bn2.moving_variance.numpy(), 0.5 + 0.5 * x.reshape(-1, 3).var(0, ddof=1))


def test_batch_norm_channels_first_and_momentum_zero():
    x = data((3, 4, 2, 2), 7)  # NCHW, axis=1: fused
    bn = layers.BatchNormalization(axis=1, momentum=0.0, center=False, scale=False)
    y = bn(x, training=True)
    ref = F.batch_norm(torch.tensor(x), None, None, training=True, eps=1e-3).numpy()
    close(y.numpy(), ref)
    assert bn.axis == [1] and bn.fused is True and bn.weights[0].name.endswith("moving_mean")
    close(bn.moving_mean.numpy(), x.mean((0, 2, 3)))
    close(bn.moving_variance.numpy(), x.var((0, 2, 3), ddof=1))
    assert len(bn.weights) == 2 and bn.trainable_weights == []


def test_batch_norm_on_axis_1_of_3d_inputs_and_several_axes():
    x = data((4, 3, 5), 8)
    bn = layers.BatchNormalization(axis=1, momentum=0.0, input_shape=(3, 5))
    bn.set_weights([data((3,), 1), data((3,), 2), np.zeros(3), np.ones(3)])
    y = bn(x, training=True)
    g, b = data((3,), 1), data((3,), 2)
    ref = F.batch_norm(torch.tensor(x), None, None, torch.tensor(g), torch.tensor(b),
                       training=True, eps=1e-3).numpy()
    close(y.numpy(), ref)
    close(bn.moving_variance.numpy(), x.var((0, 2)))  # 3-D: not fused, biased
    bn2 = layers.BatchNormalization(axis=[1, 2], momentum=0.0)
    y2 = bn2(x, training=True)
    assert bn2.gamma.shape == (1, 3, 5)
    close(y2.numpy(), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3))
    close(bn2.moving_mean.numpy(), x.mean(0, keepdims=True))


def test_batch_norm_gradient_against_finite_differences():
    x = data((3, 2), 12).astype(np.float64)
    w = data((3, 2), 13).astype(np.float64)
    bn = layers.BatchNormalization()
    xv = vdev.Variable(x.astype(np.float32))
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(vdev.multiply(bn(xv, training=True),
                                             vdev.constant(w.astype(np.float32))))
    g = tape.gradient(loss, xv).numpy()

    def f(a):
        return float(np.sum(w * (a - a.mean(0)) / np.sqrt(a.var(0) + 1e-3)))
    h = 1e-4
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        fd[i] = (f(x + e) - f(x - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-3, atol=1e-4)


def test_a_frozen_batch_norm_runs_in_inference_mode():
    bn = layers.BatchNormalization()
    x = data((4, 3), 3)
    bn(x, training=True)
    bn.trainable = False
    before = [w.copy() for w in bn.get_weights()]
    y = bn(x, training=True)
    mm, mv = before[2], before[3]
    close(y.numpy(), (x - mm) / np.sqrt(mv + 1e-3))
    for a, b in zip(before, bn.get_weights()):
        assert a.tobytes() == b.tobytes()
    assert bn.trainable_weights == [] and len(bn.non_trainable_weights) == 4


def test_batch_norm_weights_config_and_shapes():
    bn = layers.BatchNormalization(momentum=0.95, epsilon=1e-4, name="bn",
                                   gamma_initializer="zeros", input_shape=(4,))
    assert [v.name for v in bn.weights] == ["bn/gamma", "bn/beta", "bn/moving_mean",
                                           "bn/moving_variance"]
    assert [v.trainable for v in bn.weights] == [True, True, False, False]
    assert [v.name for v in bn.trainable_weights] == ["bn/gamma", "bn/beta"]
    assert [v.name for v in bn.non_trainable_weights] == ["bn/moving_mean",
                                                          "bn/moving_variance"]
    assert bn.count_params() == 16
    np.testing.assert_array_equal(bn.get_weights()[0], np.zeros(4))
    assert bn.compute_output_shape((None, 4)) == (None, 4)
    cfg = bn.get_config()
    assert list(cfg) == ["name", "trainable", "dtype", "axis", "momentum", "epsilon", "center",
                         "scale", "beta_initializer", "gamma_initializer",
                         "moving_mean_initializer", "moving_variance_initializer",
                         "beta_regularizer", "gamma_regularizer", "beta_constraint",
                         "gamma_constraint"]
    assert cfg["axis"] == [1] and cfg["momentum"] == 0.95 and cfg["epsilon"] == 1e-4
    assert cfg["gamma_initializer"] == {"class_name": "Zeros", "config": {}}
    assert layers.BatchNormalization().get_config()["axis"] == -1  # unbuilt: as given
    cfg["name"] = "bn2"
    again = layers.BatchNormalization.from_config(cfg)
    assert again.get_config() == cfg
    again(np.ones((2, 4), np.float32))
    assert again.get_config() == cfg
    model = vdev.models.Sequential([layers.Dense(4, input_dim=3, name="d"),
                                    layers.BatchNormalization(name="b"),
                                    layers.LayerNormalization(name="l")])
    model(np.ones((2, 3), np.float32))
    copy = vdev.models.Sequential.from_config(model.get_config())
    assert copy.get_config() == model.get_config()
    assert [type(l).__name__ for l in copy.layers] == ["Dense", "BatchNormalization",
                                                      "LayerNormalization"]


def test_unbuilt_layers_in_a_sequential_build_at_the_first_call():
    model = vdev.models.Sequential([layers.Dense(2, input_dim=3),
                                    layers.BatchNormalization()])
    assert model.compute_output_shape((None, 3)) == (None, 2)
    model(np.ones((1, 3), np.float32))
    assert len(model.weights) == 6 and len(model.trainable_variables) == 4


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_layer_norm_as_torch(monkeypatch, dev):
    sim2(monkeypatch)
    for shape, axis, eps in (((4, 6), -1, 1e-3), ((2, 3, 5), -1, 1e-3),
                             ((2, 3, 5), [1, 2], 1e-3), ((2, 3, 5), -1, 1e-6)):
        norm = tuple(shape[a] for a in ([axis] if isinstance(axis, int) else axis))
        g, b = data(norm, 1), data(norm, 2)
        x = data(shape, 3)
        with vdev.device(dev):
            ln = layers.LayerNormalization(axis=axis, epsilon=eps)
            xv = vdev.Variable(x)
        ln.build((None,) + shape[1:])
        ln.set_weights([g, b])
        assert ln._fused is (eps > 1.001e-5)
        with vdev.GradientTape() as tape:
            y = ln(xv)
            loss = vdev.reduce_sum(vdev.multiply(y, vdev.constant(data(shape, 4))))
        gx, gg, gb = tape.gradient(loss, [xv, ln.gamma, ln.beta])
        tx = torch.tensor(x, requires_grad=True)
        tg = torch.tensor(g, requires_grad=True)
        tb = torch.tensor(b, requires_grad=True)
        ty = F.layer_norm(tx, norm, tg, tb, eps=eps)
        (ty * torch.tensor(data(shape, 4))).sum().backward()
        close(y.numpy(), ty.detach().numpy())
        close(gx.numpy(), tx.grad.numpy())
        close(gg.numpy(), tg.grad.numpy())
        close(gb.numpy(), tb.grad.numpy())
        assert y.device.endswith(dev) and ln.gamma.device.endswith(dev)
        close(ln(xv, training=True).numpy(), y.numpy())  # the same in training


def test_layer_norm_on_axis_1_weights_and_config():
    x = data((3, 4, 2), 5)
    ln = layers.LayerNormalization(axis=1, center=False, name="ln")
    y = ln(x)
    close(y.numpy(), (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-3))
    assert [v.name for v in ln.weights] == ["ln/gamma"] and ln.gamma.shape == (4,)
    cfg = ln.get_config()
    assert list(cfg) == ["name", "trainable", "dtype", "axis", "epsilon", "center", "scale",
                         "beta_initializer", "gamma_initializer", "beta_regularizer",
                         "gamma_regularizer", "beta_constraint", "gamma_constraint"]
    assert cfg["axis"] == [1] and cfg["center"] is False
    cfg["name"] = "ln2"
    assert layers.LayerNormalization.from_config(cfg).get_config() == cfg
    assert ln.compute_output_shape((None, 4, 2)) == (None, 4, 2)


def err(exc, text, fn, *args, **kwargs):
    with pytest.raises(exc) as e:
        fn(*args, **kwargs)
    assert str(e.value) == text
    return e


def test_keras_errors():
    BN, LN = layers.BatchNormalization, layers.LayerNormalization
    for cls in (BN, LN):
        err(TypeError, "Expected an int or a list/tuple of ints for the argument 'axis', but "
            "received: 'x'", cls, axis="x")
        err(ValueError, "Invalid value for `axis` argument. Expected 0 <= axis < inputs.rank "
            "(with inputs.rank=2). Received: axis=(2,)", cls(axis=2), np.ones((2, 3)))
        err(ValueError, "Invalid value for `axis` argument. Expected 0 <= axis < inputs.rank "
            "(with inputs.rank=2). Received: axis=(-1,)", cls(axis=-3), np.ones((2, 3)))
        err(ValueError, "Duplicate axis: (1, 1)", cls(axis=[1, -1]), np.ones((2, 3)))
        err(ValueError, "Input has undefined `axis` dimension. Received input with shape "
            "(None, None) and axis=(1,)", cls().build, (None, None))
    err(ValueError, "Passing both `fused=True` and `renorm=True` is not supported", BN,
        fused=True, renorm=True)
    err(ValueError, "Passing `fused=True` is only supported when axis is 1 or 3 for input "
        "rank = 4 or 1 or 4 for input rank = 5. Got axis [2]", BN, axis=2, fused=True)
    err(ValueError, "Passing `fused=True` is not supported when `virtual_batch_size` is "
        "specified.", BN, fused=True, virtual_batch_size=2)
    err(ValueError, "Passing `fused=True` is not supported when `adjustment` is specified.",
        BN, fused=True, adjustment=lambda s: s)
    err(ValueError, "Batch normalization layers with `fused=True` only support 4D or 5D "
        "input tensors. Received tensor with shape: (None, 3)", BN(fused=True),
        np.ones((2, 3)))
    err(ValueError, "Unsupported axis. The use of `fused=True` is only possible with `axis=1` "
        "or `axis=3` for 4D input tensors. Received: axis=(0,)", BN(axis=-4),
        np.ones((2, 2, 2, 2)))
    bn = BN()
    bn(np.ones((2, 3), np.float32))
    err(ValueError, 'Input 0 of layer "%s" is incompatible with the layer: expected ndim=2, '
        "found ndim=3. Full shape received: (2, 3, 1)" % bn.name, bn, np.ones((2, 3, 1)))
    err(ValueError, 'Input 0 of layer "%s" is incompatible with the layer: expected axis 1 '
        "of input shape to have value 3, but received input with shape (2, 4)" % bn.name,
        bn, np.ones((2, 4)))
    # what vdev lacks: refused, naming it
    err(ValueError, "vdev's BatchNormalization takes gamma_regularizer=None only, not 'l2': "
        "vdev has no regularizers", BN, gamma_regularizer="l2")
    err(ValueError, "vdev's LayerNormalization takes beta_constraint=None only, not 'x': "
        "vdev has no weight constraints", LN, beta_constraint="x")
    err(ValueError, "vdev's BatchNormalization takes renorm=False only, not True: vdev has "
        "no batch renormalization", BN, renorm=True)
    err(ValueError, "vdev's BatchNormalization takes virtual_batch_size=None only, not 2: "
        "vdev has no ghost batches", BN, virtual_batch_size=2)
    err(ValueError, "vdev's BatchNormalization takes dtype=None or 'float32' only, not "
        "'float64': vdev's layers compute in float32", BN, dtype="float64")
    err(ValueError, "vdev's LayerNormalization takes mask=None only: Keras's call takes no "
        "mask (an input's mask passes on)", LN(), np.ones((2, 3)), mask=np.ones((2,)))
    err(ValueError, "Could not interpret initializer identifier: None", BN,
        moving_variance_initializer=None)


def test_a_layer_made_outside_a_strategy_is_refused_in_its_step(monkeypatch):
    sim2(monkeypatch)
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    bn = layers.BatchNormalization(input_shape=(3,))
    before = [w.copy() for w in bn.get_weights()]
    with vdev.device("CPU:0"):
        x = vdev.constant(data((4, 3), 1))
    with pytest.raises(RuntimeError) as e:
        s.run(lambda b: bn(b, training=True), args=(vdev.distribute.DistributedBatch(s, x),))
    assert "made outside the strategy's scope(), is called with training=True inside " \
        "strategy.run" in str(e.value)
    for a, b in zip(before, bn.get_weights()):
        assert a.tobytes() == b.tobytes()
