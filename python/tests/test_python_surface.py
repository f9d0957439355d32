"""The package as a TensorFlow user meets it at the prompt: TensorFlow's
keyword arguments taken where vdev has the function (``model(x,
training=True)``, ``strategy.reduce(reduce_op=...)``, ``name=`` on the
creation ops, ``zeros_like(input=, dtype=)``, ``convert_to_tensor(dtype_hint=)``,
``random.uniform(maxval=None)``, a MirroredVariable's ``assign(read_value=)``),
``format()`` of a tensor as TensorFlow's (numpy's), ``str()`` of a variable
as its ``repr()``, ``str()`` of a tensor from before ``vdev.shutdown()``
saying why instead of raising, and a docstring on every public name."""
import inspect
import types

import numpy as np
import pytest

import vdev


def test_layers_and_models_take_keras_call_arguments():
    x = vdev.constant(np.ones((2, 3), np.float32))
    dense = vdev.layers.Dense(2, seed=1)
    want = dense(x).numpy()
    np.testing.assert_array_equal(dense(x, training=True).numpy(), want)
    np.testing.assert_array_equal(dense(inputs=x, training=False, mask=None).numpy(), want)
    for model in (vdev.models.Sequential([vdev.layers.Dense(2, seed=2)]),
                  vdev.models.MLP([3, 4, 2], seed=1)):
        want = model(x).numpy()
        np.testing.assert_array_equal(model(x, training=True).numpy(), want)
        np.testing.assert_array_equal(model(inputs=x, training=False).numpy(), want)


def test_strategy_reduce_takes_reduce_op_by_name():
    strategy = vdev.distribute.MirroredStrategy()
    per_replica = strategy.run(lambda: vdev.constant(2.0))
    total = strategy.reduce(reduce_op=vdev.distribute.ReduceOp.SUM, value=per_replica, axis=None)
    assert float(total) == 2.0 * strategy.num_replicas_in_sync
    assert list(inspect.signature(strategy.reduce).parameters) == ["reduce_op", "value", "axis"]

    def step():
        ctx = vdev.distribute.get_replica_context()
        return ctx.all_reduce(reduce_op="SUM", value=vdev.constant(1.0), options=None)
    out = strategy.experimental_local_results(strategy.run(step))
    assert [float(v) for v in out] == [float(strategy.num_replicas_in_sync)] * len(out)


def test_mirrored_variable_assign_takes_variable_arguments():
    strategy = vdev.distribute.MirroredStrategy()
    with strategy.scope():
        v = vdev.Variable([1.0])
    assert v.assign([2.0], read_value=False) is None
    assert v.assign_add([1.0], use_locking=True, name="a", read_value=False) is None
    assert v.assign_sub([0.5]) is v
    assert [float(c.numpy()[0]) for c in v.values] == [2.5] * strategy.num_replicas_in_sync


def test_creation_ops_take_tensorflow_arguments():
    assert vdev.constant(1.0, name="c").numpy() == 1.0
    assert vdev.zeros([2], name="z").numpy().tolist() == [0, 0]
    assert vdev.ones([2], vdev.float32, "o").numpy().tolist() == [1, 1]
    assert vdev.fill([2], 3, name="f").numpy().tolist() == [3, 3]
    assert vdev.convert_to_tensor(1.0, name="c").dtype is vdev.float32
    i = vdev.constant([1, 2])
    z = vdev.zeros_like(input=i, dtype=vdev.float32, name="z")
    assert z.dtype is vdev.float32 and z.numpy().tolist() == [0.0, 0.0]
    assert vdev.ones_like(i, vdev.float32).dtype is vdev.float32
    assert vdev.ones_like(i).dtype is vdev.int32
    # dtype_hint: tried first, a value it cannot hold keeps its own dtype
    assert vdev.convert_to_tensor(3, dtype_hint=vdev.float32).dtype is vdev.float32
    assert vdev.convert_to_tensor(1.5, dtype_hint=vdev.int32).dtype is vdev.float32
    assert vdev.convert_to_tensor(i, dtype_hint=vdev.float32) is i
    u = vdev.random.uniform([1000], maxval=None, seed=3).numpy()
    np.testing.assert_array_equal(u, vdev.random.uniform([1000], maxval=1, seed=3).numpy())
    assert u.min() >= 0 and u.max() < 1


def test_format_is_numpys_as_in_tensorflow():
    loss = vdev.constant(0.123456)
    assert f"{loss:.3f}" == "0.123"
    assert "{:>8.2f}".format(loss) == "    0.12"
    assert f"{vdev.constant(7):d}" == "7"
    assert f"{vdev.constant([1.0, 2.0])}" == str(np.array([1.0, 2.0], np.float32))
    with pytest.raises(TypeError):
        f"{vdev.constant([1.0, 2.0]):.2f}"


def test_variable_str_is_its_repr():
    v = vdev.Variable([1.0, 2.0], name="w")
    assert str(v) == repr(v)
    assert str(v).startswith("<vdev.Variable 'w' shape=(2,) dtype=float32")


def test_str_after_shutdown_says_why():
    t, v = vdev.constant([1.0]), vdev.Variable([1.0])
    strategy = vdev.distribute.MirroredStrategy()
    per_replica = strategy.run(lambda: vdev.constant(1.0))
    vdev.shutdown()
    stale = ("the tensor belongs to a runtime that was shut down (made before vdev_shutdown)")
    for x in (t, v, per_replica):
        assert stale in str(x)
        assert stale in repr(x)


def _public(module, prefix, seen):
    for name in sorted(getattr(module, "__all__", None) or dir(module)):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType):
            if obj.__name__.startswith("vdev") and obj.__name__ not in seen:
                seen.add(obj.__name__)
                yield from _public(obj, obj.__name__, seen)
            continue
        if not callable(obj) or id(obj) in seen:
            continue
        if not (getattr(obj, "__module__", None) or "").startswith("vdev"):
            continue  # a name from elsewhere (numpy, enum, ...)
        seen.add(id(obj))
        yield prefix + "." + name, obj


def test_every_public_callable_has_a_docstring():
    missing = [name for name, obj in _public(vdev, "vdev", {"vdev"})
               if not (obj.__doc__ or "").strip()]
    assert missing == []


def test_all_lists_names_that_exist():
    for module in (vdev, vdev.config, vdev.config.experimental, vdev.distribute, vdev.nn,
                   vdev.train, vdev.math, vdev.random, vdev.errors):
        for name in getattr(module, "__all__", []):
            assert hasattr(module, name), (module.__name__, name)


_MODULES = ("layers", "models", "optimizers", "losses", "initializers", "placement", "debugging",
            "dlpack", "random")


def test_modules_list_their_public_names_only():
    for name in _MODULES:
        module = getattr(vdev, name)
        names = module.__all__
        assert names and all(hasattr(module, n) and not n.startswith("_") for n in names), name
        star = {}
        exec("from vdev.%s import *" % name, star)
        assert sorted(n for n in star if n != "__builtins__") == sorted(names), name
    assert "current_device" not in vdev.layers.__all__
    for module in (vdev, vdev.config, vdev.config.experimental, vdev.distribute, vdev.nn,
                   vdev.train, vdev.math):
        assert not any(n.startswith("_") for n in module.__all__), module.__name__


def test_variable_takes_tensorflows_arguments_in_its_order():
    v = vdev.Variable([1.0, 2.0], True, True, None, "w")  # TF's positional order
    assert v.name == "w" and v.trainable is True
    assert vdev.Variable(1.0, False, False, None, "f").trainable is False
    assert vdev.Variable(1.0).trainable is True  # trainable=None: True, as TensorFlow's
    assert vdev.Variable([1, 2], None, True, None, "i", None, vdev.float32).dtype is vdev.float32
    w = vdev.Variable(np.zeros((2, 3), np.float32), shape=[2, 3], validate_shape=True)
    assert w.shape == (2, 3)
    assert vdev.Variable([1.0], shape=vdev.TensorShape([None])).shape == (1,)
    with pytest.raises(ValueError) as e:
        vdev.Variable(np.zeros((2, 3), np.float32), shape=[3, 2])
    # TensorFlow's words, its TensorShape printed as "(2, 3)" inside parentheses
    assert str(e.value) == ("In this `tf.Variable` creation, the initial value's shape ((2, 3)) "
                            "is not compatible with the explicitly supplied `shape` argument "
                            "((3, 2)).")
    with pytest.raises(ValueError) as e:
        vdev.Variable(1.0, constraint=lambda x: x)
    assert str(e.value).startswith("vdev.Variable takes constraint=None only")
    strategy = vdev.distribute.MirroredStrategy()
    with strategy.scope():
        m = vdev.Variable([1.0], None, True, None, "m", shape=[1])
        with pytest.raises(ValueError, match="explicitly supplied `shape` argument"):
            vdev.Variable([1.0], shape=[2])
    assert m.name == "m" and m.trainable is True


def test_tensor_shape_and_name_as_tensorflow():
    assert vdev.TensorShape(dims=[2, 3]) == (2, 3)
    assert vdev.TensorShape(4).as_list() == [4]
    with pytest.raises(ValueError, match="no TensorShape of unknown rank"):
        vdev.TensorShape(None)
    t = vdev.constant([[1.0, 2.0]])
    assert t.get_shape() == t.shape == (1, 2)
    with pytest.raises(AttributeError) as e:
        t.name
    assert str(e.value) == "Tensor.name is undefined when eager execution is enabled."
    v = vdev.Variable([3.0], name="v")
    assert v.name == "v"
    value = v.value()
    assert type(value) is vdev.Tensor and value.numpy().tolist() == [3.0]
    v.assign([4.0])
    assert value.numpy().tolist() == [3.0]


def test_optimizers_take_keras_ema_and_jit_arguments():
    for cls in (vdev.optimizers.SGD, vdev.optimizers.Adam):
        opt = cls(use_ema=False, ema_momentum=0.9, ema_overwrite_frequency=None,
                  jit_compile=False)
        assert opt.jit_compile is False and opt.ema_momentum == 0.9
        with pytest.raises(ValueError, match="no exponential moving average"):
            cls(use_ema=True)
        params = list(inspect.signature(cls).parameters)
        assert params[-5:] == ["use_ema", "ema_momentum", "ema_overwrite_frequency",
                               "jit_compile", "name"]
        with pytest.raises(AttributeError, match="have no `variables`"):
            opt.variables
    opt = vdev.optimizers.Adam(0.01, amsgrad=True, clipnorm=1.0)
    config = opt.get_config()
    assert config == {"name": "Adam", "weight_decay": None, "clipnorm": 1.0,
                      "global_clipnorm": None, "clipvalue": None, "use_ema": False,
                      "ema_momentum": 0.99, "ema_overwrite_frequency": None,
                      "jit_compile": True, "is_legacy_optimizer": False,
                      "learning_rate": pytest.approx(0.01), "beta_1": 0.9, "beta_2": 0.999,
                      "epsilon": 1e-07, "amsgrad": True}
    again = vdev.optimizers.Adam.from_config(config)
    assert again.amsgrad is True and again.clipnorm == 1.0
    sgd = vdev.optimizers.SGD(0.1, 0.5, True).get_config()
    assert (sgd["learning_rate"], sgd["momentum"], sgd["nesterov"]) == (0.1, 0.5, True)


def test_losses_take_keras_arguments_in_its_order():
    cce = vdev.losses.CategoricalCrossentropy(True, 0.0, -1, "sum")
    assert cce.reduction == "sum" and cce.axis == -1
    with pytest.raises(ValueError, match="takes axis=-1 only"):
        vdev.losses.CategoricalCrossentropy(True, axis=0)
    scce = vdev.losses.SparseCategoricalCrossentropy(True, None, "sum")
    assert scce.reduction == "sum" and scce.ignore_class is None
    with pytest.raises(ValueError, match="takes ignore_class=None only"):
        vdev.losses.SparseCategoricalCrossentropy(True, ignore_class=255)


def test_dense_takes_keras_arguments_and_gives_its_config():
    d = vdev.layers.Dense(3, "relu", True, "glorot_uniform", "zeros", None, None, None, None,
                          None, dtype="float32", name="d", seed=4)
    assert d.units == 3
    assert vdev.layers.Dense(2, dtype=vdev.float32).units == 2
    for arg in ("kernel_regularizer", "bias_regularizer", "activity_regularizer"):
        with pytest.raises(ValueError, match="vdev has no regularizers"):
            vdev.layers.Dense(2, **{arg: "l2"})
    with pytest.raises(ValueError, match="vdev has no weight constraints"):
        vdev.layers.Dense(2, kernel_constraint="non_neg")
    with pytest.raises(ValueError, match="takes dtype=None or 'float32' only"):
        vdev.layers.Dense(2, dtype="float64")
    config = d.get_config()
    assert config == {"name": "d", "trainable": True, "dtype": "float32", "units": 3,
                      "activation": "relu", "use_bias": True,
                      "kernel_initializer": {"class_name": "GlorotUniform",
                                             "config": {"seed": 4}},
                      "kernel_regularizer": None, "bias_regularizer": None,
                      "activity_regularizer": None, "kernel_constraint": None,
                      "bias_constraint": None,
                      "bias_initializer": {"class_name": "Zeros", "config": {}}}
    assert vdev.layers.Dense(1).get_config()["activation"] == "linear"
