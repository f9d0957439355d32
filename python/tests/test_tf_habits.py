"""TensorFlow and Keras habits the package used to break, each checked
against what TensorFlow does: optimizer hyperparameters set after
construction (``opt.learning_rate = x``) take effect on the next update;
lists, numpy arrays and int inputs beside a float32 tensor are converted
with its dtype (operators, ``assign_add``, ``Dense``, losses), as TensorFlow's
op wrappers and Keras convert them; argmax's dtype error names the caller's
shape; ``set_memory_growth`` takes bools only; TensorFlow's 'warn' and
'silent_for_int32' device policies are refused in vdev's own words;
``vdev.device`` takes a LogicalDevice and a job-only name, and says where an
index taken from the enclosing scope came from; every ``tf.errors`` class
exists with TensorFlow's code."""
import numpy as np
import pytest

import vdev

LONG = "/job:localhost/replica:0/task:0"


# ---- optimizer hyperparameters after construction ----

def test_sgd_learning_rate_and_momentum_set_later_take_effect():
    v = vdev.Variable([1.0, 1.0])
    g = vdev.constant([0.5, 0.5])
    opt = vdev.optimizers.SGD(0.1)
    opt.learning_rate = 0.25
    assert opt.learning_rate == 0.25
    opt.apply_gradients([(g, v)])
    assert v.numpy().tolist() == [0.875, 0.875]  # 1 - 0.25 * 0.5, not 1 - 0.1 * 0.5
    assert opt.get_slot_names() == []
    # Momentum switched on: the velocity starts from zeros (vel = -0.5 * 0.5),
    # not from what the step without momentum left (-0.125).
    opt.learning_rate, opt.momentum = 0.5, 0.5
    assert (opt.learning_rate, opt.momentum) == (0.5, 0.5)
    assert opt.get_slot_names() == ["momentum"]
    opt.apply_gradients([(g, v)])
    assert v.numpy().tolist() == [0.625, 0.625]
    opt.apply_gradients([(g, v)])  # vel = 0.5 * -0.25 - 0.25
    assert v.numpy().tolist() == [0.25, 0.25]
    assert opt.iterations == 3


def test_adam_hyperparameters_set_later_take_effect():
    v = vdev.Variable([1.0])
    g = vdev.constant([2.0])
    opt = vdev.optimizers.Adam()
    opt.learning_rate, opt.beta_1, opt.beta_2, opt.epsilon = 0.25, 0.5, 0.75, 1.0
    assert (opt.learning_rate, opt.beta_1, opt.beta_2, opt.epsilon) == (0.25, 0.5, 0.75, 1.0)
    # t = 1: lr_t = 0.25 * sqrt(1 - 0.75) / (1 - 0.5) = 0.25, m = 1, v = 1
    opt.apply_gradients([(g, v)])
    assert v.numpy().tolist() == [0.875]
    # t = 2 with betas 0: lr_t = 0.5, m = 2, v = 4: 0.5 * 2 / (2 + 2)
    opt.beta_1 = opt.beta_2 = 0.0
    opt.learning_rate, opt.epsilon = 0.5, 2.0
    opt.apply_gradients([(g, v)])
    assert v.numpy().tolist() == [0.625]


def test_bad_hyperparameters_are_refused_as_the_constructor_refuses_them():
    v = vdev.Variable([1.0])
    sgd = vdev.optimizers.SGD(0.25, momentum=0.5)
    # the constructor's and the setter's ValueError, naming the argument
    with pytest.raises(ValueError) as e:
        sgd.learning_rate = -0.5
    assert str(e.value) == ("`learning_rate` must be a finite number >= 0. Received: "
                            "learning_rate=-0.5")
    with pytest.raises(ValueError) as e:
        vdev.optimizers.SGD(-1)
    assert str(e.value) == ("`learning_rate` must be a finite number >= 0. Received: "
                            "learning_rate=-1")
    for bad in (1.5, -0.5):
        with pytest.raises(ValueError) as e:
            sgd.momentum = bad
        assert str(e.value) == "`momentum` must be between [0, 1]. Received: momentum=%r" % bad
        with pytest.raises(ValueError) as e2:
            vdev.optimizers.SGD(momentum=bad)
        assert str(e2.value) == str(e.value)
    # momentum 1 is in Keras's range and in vdev's, made so or set so
    sgd.momentum = 1
    sgd.momentum = 0.5
    one = vdev.optimizers.SGD(0.25, momentum=1.0)
    w = vdev.Variable([1.0])
    one.apply_gradients([(vdev.constant([0.5]), w)])
    one.apply_gradients([(vdev.constant([0.5]), w)])
    assert w.numpy().tolist() == [0.625]  # velocities -0.125, then -0.25
    # a schedule (a callable) is refused by the constructor and the setter alike
    with pytest.raises(TypeError):
        vdev.optimizers.SGD(lambda: 0.1)
    with pytest.raises(TypeError):
        sgd.learning_rate = lambda: 0.1
    adam = vdev.optimizers.Adam(0.25, 0.5, 0.75, 1.0)
    for attr, value, rule in [("learning_rate", -1, "a finite number >= 0"),
                              ("beta_1", 1, "a finite number in [0, 1)"),
                              ("epsilon", 0, "a finite number > 0")]:
        with pytest.raises(ValueError) as e:
            setattr(adam, attr, value)
        assert str(e.value) == "`%s` must be %s. Received: %s=%r" % (attr, rule, attr, value)
    # NaN and infinities too, by the constructors and the setters alike
    for attr, value, rule in [("beta_2", float("nan"), "a finite number in [0, 1)"),
                              ("learning_rate", float("inf"), "a finite number >= 0"),
                              ("epsilon", float("-inf"), "a finite number > 0")]:
        with pytest.raises(ValueError) as e:
            setattr(adam, attr, value)
        assert str(e.value) == "`%s` must be %s. Received: %s=%r" % (attr, rule, attr, value)
    with pytest.raises(ValueError) as e:
        vdev.optimizers.Adam(float("inf"))
    assert str(e.value) == ("`learning_rate` must be a finite number >= 0. Received: "
                            "learning_rate=inf")
    with pytest.raises(ValueError) as e:
        sgd.learning_rate = float("inf")
    assert str(e.value) == ("`learning_rate` must be a finite number >= 0. Received: "
                            "learning_rate=inf")
    with pytest.raises(ValueError) as e:
        vdev.optimizers.SGD(float("nan"))
    assert str(e.value) == ("`learning_rate` must be a finite number >= 0. Received: "
                            "learning_rate=nan")
    with pytest.raises(ValueError) as e:  # Keras's own check of momentum comes first
        vdev.optimizers.SGD(momentum=float("nan"))
    assert str(e.value) == "`momentum` must be between [0, 1]. Received: momentum=nan"
    # nothing changed: the updates use the values in force before
    assert (sgd.learning_rate, sgd.momentum) == (0.25, 0.5)
    assert (adam.learning_rate, adam.beta_1, adam.beta_2, adam.epsilon) == (0.25, 0.5, 0.75, 1.0)
    sgd.apply_gradients([(vdev.constant([0.5]), v)])
    assert v.numpy().tolist() == [0.875]
    adam.apply_gradients([(vdev.constant([2.0]), v)])
    assert v.numpy().tolist() == [0.75]


def test_mirrored_optimizer_hyperparameters_reach_every_replica():
    D = vdev.distribute
    s = D.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        v = vdev.Variable([1.0])
        opt = vdev.optimizers.SGD(0.1)
    opt.learning_rate = 0.25
    s.run(lambda: opt.apply_gradients([(vdev.constant([1.0]), v)]))
    # the gradient is summed over 2 replicas: 1 - 0.25 * 2 on each
    assert [t.numpy().tolist() for t in s.experimental_local_results(v)] == [[0.5], [0.5]]


# ---- values beside tensors take the tensor's dtype ----

def test_values_beside_a_float_tensor_are_float32():
    f = vdev.constant([1.0, 2.0, 3.0])
    cases = [
        (lambda: f + [1, 2, 3], [2, 4, 6]),
        (lambda: [1, 2, 3] + f, [2, 4, 6]),
        (lambda: f * np.arange(3), [0, 2, 6]),
        (lambda: np.arange(3) * f, [0, 2, 6]),
        (lambda: f - [1, 1, 1], [0, 1, 2]),
        (lambda: [3, 3, 3] - f, [2, 1, 0]),
        (lambda: f / [2, 2, 2], [0.5, 1, 1.5]),
        (lambda: [3, 4, 6] / f, [3, 2, 2]),
        (lambda: vdev.add([1, 2, 3], f), [2, 4, 6]),
        (lambda: vdev.multiply(np.array([1, 2, 3], np.int64), f), [1, 4, 9]),
        (lambda: vdev.add([1.0, 2.0], [1, 2]), [2, 4]),  # no tensor: the first's dtype
        (lambda: vdev.matmul([[1.0, 2.0]], [[1], [2]]), [[5]]),  # tf.matmul: b hinted a's
        (lambda: vdev.matmul(vdev.constant([[1.0, 2.0]]), np.array([[1], [2]])), [[5]]),
        (lambda: [[1, 2, 3]] @ vdev.constant([[1.0], [2.0], [3.0]]), [[14]]),
    ]
    for fn, want in cases:
        r = fn()
        assert r.dtype is vdev.float32
        assert r.numpy().tolist() == want
    v = vdev.Variable([1.0, 2.0])
    v.assign_add([1, 1])
    assert v.numpy().tolist() == [2.0, 3.0]
    v.assign_sub(np.array([2, 2]))
    assert v.numpy().tolist() == [0.0, 1.0]


def test_a_converted_value_is_made_beside_its_tensor():
    with vdev.device("GPU:2"):
        f = vdev.constant([1.0, 2.0])
    vdev.placement.reset()
    r = f + [1.0, 2.0]
    assert r.device == LONG + "/device:GPU:2"
    assert vdev.placement.bytes_copied() == 0
    with vdev.device("GPU:1"):  # a scope decides
        r = f * [1, 2]
    assert r.device == LONG + "/device:GPU:1"


def test_what_tensorflow_still_refuses():
    f = vdev.constant([1.0, 2.0])
    i = vdev.constant([1, 2])
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:  # two tensors
        f + i
    assert str(e.value) == "AddV2: input #1 (shape [2]) is int32, expected float"
    with pytest.raises(TypeError) as e:  # a float value cannot be int32
        i + [1.5, 2.5]
    assert str(e.value) == "Cannot convert [1.5, 2.5] to EagerTensor of dtype int32"
    with pytest.raises(TypeError) as e:
        vdev.add([1, 2], [1.5, 2.0])
    assert str(e.value) == "Cannot convert [1.5, 2.0] to EagerTensor of dtype int32"
    # A float number beside an int32 tensor, on either side, is the same
    # TypeError (TensorFlow converts it with the tensor's dtype), not an error
    # of vdev's op or a number truncated to int32.
    v = vdev.Variable([1, 2])
    for op in (lambda: i + 1.5, lambda: 1.5 + i, lambda: i - 1.5, lambda: 1.5 - i,
               lambda: i * 1.5, lambda: 1.5 * i, lambda: i / 1.5, lambda: 1.5 / i,
               lambda: i ** 1.5, lambda: 1.5 ** i, lambda: v + 1.5, lambda: 1.5 - v,
               lambda: vdev.subtract(1.5, i)):
        with pytest.raises(TypeError) as e:
            op()
        assert str(e.value) == "Cannot convert 1.5 to EagerTensor of dtype int32"
    with pytest.raises(TypeError) as e:
        i + 2.0  # a whole float too, as TensorFlow
    assert str(e.value) == "Cannot convert 2.0 to EagerTensor of dtype int32"
    with pytest.raises(ValueError) as e:
        i + 2 ** 40
    assert str(e.value) == ("Can't convert Python int to C int32: a value is outside "
                            "[-2147483648, 2147483647]")
    # tf.matmul converts a on its own: an int a beside a float b is an error
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.matmul([[1, 2]], vdev.constant([[1.0], [2.0]]))
    assert str(e.value) == "MatMul: input #0 (shape [1,2]) is int32, expected float"


def test_layers_and_losses_take_int_inputs_as_keras():
    x = [[1, 2, 3]]
    m = vdev.models.MLP([3, 4, 2], seed=1)
    want = m(vdev.constant([[1.0, 2.0, 3.0]])).numpy()
    for given in (x, np.array(x), np.array(x, np.int64), vdev.constant(x)):
        y = m(given)
        assert y.dtype is vdev.float32
        assert y.numpy().tolist() == want.tolist()
    d = vdev.layers.Dense(2, seed=3)  # built by its first (int) call
    assert d(vdev.constant(x)).numpy().tolist() == d([[1.0, 2.0, 3.0]]).numpy().tolist()
    f = vdev.constant([1.0, 2.0, 4.0])
    mse = vdev.losses.MeanSquaredError()
    for y_true in ([1, 2, 3], np.array([1, 2, 3]), vdev.constant([1, 2, 3])):
        assert mse(y_true, f).numpy() == np.float32(1 / 3)
    none = vdev.losses.MeanSquaredError(reduction="none")
    assert none(vdev.constant([[1, 2]]), vdev.constant([[1.0, 4.0]])).numpy().tolist() == [2.0]
    cce = vdev.losses.CategoricalCrossentropy(from_logits=True)
    logits = vdev.constant([[1.0, 2.0]])
    assert float(cce([[0, 1]], logits)) == float(cce([[0.0, 1.0]], logits))
    assert float(cce(vdev.constant([[0, 1]]), logits)) == float(cce([[0.0, 1.0]], logits))


def test_argmax_dtype_error_names_the_callers_shape():
    i = vdev.constant([[1, 5], [7, 2]])
    for axis in (None, 0, 1, -1):
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            vdev.argmax(i, axis=axis)
        assert str(e.value) == "ArgMax: input #0 (shape [2,2]) is int32, expected float"
        assert e.value.status == "VDEV_ERR_SHAPE"
    assert vdev.argmax(vdev.constant([[1.0, 5.0], [7.0, 2.0]])).numpy().tolist() == [1, 0]


# ---- configuration ----

def test_memory_growth_takes_bools():
    C = vdev.config
    g = C.list_physical_devices("GPU")
    for bad in ("false", "True", None, 2, -1, 1.0, 0.0, [True]):
        with pytest.raises(TypeError) as e:
            C.set_memory_growth(g[0], bad)
        assert str(e.value) == "set_memory_growth takes a bool (True or False), not %r" % (bad,)
    assert C.get_memory_growth(g[0]) is None  # nothing was set
    C.set_memory_growth(g[0], np.False_)
    C.set_memory_growth(g[1], 1)  # what TensorFlow's GPUOptions proto takes
    C.set_memory_growth(g[2], np.int64(0))
    assert [C.get_memory_growth(d) for d in g] == [False, True, False]
    C.set_memory_growth(g[0], True)
    assert C.get_memory_growth(g[0]) is True


def test_unsupported_tensorflow_device_policies():
    E = vdev.config.experimental
    E.set_device_policy("explicit")
    with pytest.raises(ValueError) as e:
        E.set_device_policy("warn")
    assert str(e.value) == (
        "vdev does not support TensorFlow's device policy 'warn', which copies an input on "
        "another device with a warning for each copy; vdev copies without one. Use 'silent' "
        "(the copies are counted: vdev.placement.bytes_copied() and vdev.placement.audit() "
        "list them) or 'explicit' (a copy is an error)")
    with pytest.raises(ValueError) as e:
        E.set_device_policy("silent_for_int32")
    assert str(e.value) == (
        "vdev does not support TensorFlow's device policy 'silent_for_int32', which copies "
        "int32 inputs and refuses other ones; vdev's policy does not depend on the dtype. Use "
        "'explicit' (every copy is an error: copy int32 tensors yourself with vdev.identity or "
        ".gpu(i)) or 'silent'")
    assert E.get_device_policy() == "explicit"  # a refused policy changes nothing
    with pytest.raises(ValueError) as e:
        E.set_device_policy("Warn")  # a misspelt one keeps TensorFlow's words
    assert str(e.value) == "Not a valid device policy: 'Warn'"


# ---- device scopes ----

def test_device_takes_a_logical_device():
    d = vdev.config.list_logical_devices("GPU")[1]
    with vdev.device(d):
        t = vdev.constant([1.0])
        assert vdev._device.current_device() == LONG + "/device:GPU:1"
    assert t.device == LONG + "/device:GPU:1"
    with pytest.raises(ValueError) as e:
        vdev.device(vdev.config.list_physical_devices("GPU")[0])  # TensorFlow refuses it too
    assert str(e.value).startswith("Expecting a string device name. Got ")


def test_index_from_the_enclosing_scope_is_named():
    with vdev.device("GPU:1"):
        with pytest.raises(RuntimeError) as e:
            with vdev.device("CPU"):
                pass
        assert str(e.value) == (
            LONG + "/device:CPU:1 unknown device (there is 1 CPU device) (the index 1 came "
            "from the enclosing scope /device:GPU:1; name the device in full, such as 'CPU:0')")
        assert vdev._device.current_device() == LONG + "/device:GPU:1"
        with vdev.device("CPU:0"):
            assert vdev.constant(1.0).device == LONG + "/device:CPU:0"
    with vdev.device("GPU:2"):
        with pytest.raises(RuntimeError) as e:  # 'GPU' takes no index from outside: the same
            with vdev.device("GPU:7"):
                pass
        assert str(e.value) == LONG + "/device:GPU:7 unknown device (there are 3 logical GPUs)"


def test_index_from_the_enclosing_scope_without_such_a_type():
    vdev.config.set_visible_devices([], "GPU")
    cpu = vdev.config.list_physical_devices("CPU")[0]
    vdev.config.set_logical_device_configuration(cpu,
                                                 [vdev.config.LogicalDeviceConfiguration()] * 2)
    with vdev.device("CPU:1"):
        with pytest.raises(RuntimeError) as e:
            with vdev.device("GPU"):
                pass
    assert str(e.value) == (LONG + "/device:GPU:1 unknown device (there are 0 logical GPUs) "
                            "(the index 1 came from the enclosing scope /device:CPU:1)")


def test_job_only_name_merges_into_the_enclosing_scope():
    for name in ("/job:localhost", "/job:localhost/replica:0/task:0", "/task:0", "/job:*/"):
        with vdev.device("GPU:1"):
            with vdev.device(name):
                assert vdev._device.current_device() == LONG + "/device:GPU:1"
                assert vdev.constant(1.0).device == LONG + "/device:GPU:1"
            assert vdev._device.current_device() == LONG + "/device:GPU:1"
        with vdev.device(name):  # merged into TensorFlow's first device
            assert vdev._device.current_device() == LONG + "/device:CPU:0"
    with pytest.raises(RuntimeError) as e:
        with vdev.device("/job:worker"):
            pass
    assert str(e.value) == ("/job:worker unknown device: only /job:localhost/replica:0/task:0 "
                            "is local")
    with pytest.raises(ValueError) as e:
        with vdev.device("/job:1x"):
            pass
    assert str(e.value).startswith("Unknown attribute 'job' is encountered while parsing the "
                                   "device spec: '/job:1x'.")


# ---- errors ----

def test_every_tf_errors_class_with_its_code():
    E = vdev.errors
    codes = {"CancelledError": 1, "UnknownError": 2, "InvalidArgumentError": 3,
             "DeadlineExceededError": 4, "NotFoundError": 5, "AlreadyExistsError": 6,
             "PermissionDeniedError": 7, "ResourceExhaustedError": 8,
             "FailedPreconditionError": 9, "AbortedError": 10, "OutOfRangeError": 11,
             "UnimplementedError": 12, "InternalError": 13, "UnavailableError": 14,
             "DataLossError": 15, "UnauthenticatedError": 16}
    names = ["CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
             "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
             "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
             "UNAUTHENTICATED"]
    assert E.OK == 0
    for k, name in enumerate(names, 1):
        assert getattr(E, name) == k
    for cls_name, code in codes.items():
        cls = getattr(E, cls_name)
        assert issubclass(cls, E.OpError) and cls.error_code == code
        assert E.exception_type_from_error_code(code) is cls
        assert E.error_code_from_exception_type(cls) == code
        err = cls("boom", "VDEV_ERR_IO")  # vdev's short form
        assert (err.message, err.status, str(err)) == ("boom", "VDEV_ERR_IO", "boom")
        err = cls(None, None, "boom")  # TensorFlow's
        assert (err.message, err.error_code, err.op, err.node_def) == ("boom", code, None, None)
    assert issubclass(E.OutOfMemoryError, E.ResourceExhaustedError)
    # vdev's statuses: a damaged checkpoint is DataLossError, another file error UnknownError
    io = E._NAMES.index("VDEV_ERR_IO")
    assert type(E.from_status(io, "checkpoint 'x' is damaged: checksum mismatch: ...")) \
        is E.DataLossError
    assert type(E.from_status(io, "checkpoint 'x' is damaged: the file ends inside its header "
                                  "(truncated?)")) is E.DataLossError
    # the marker alone decides, not words that other errors may hold
    assert type(E.from_status(io, "checkpoint 'x': cannot open: checksum mismatch "
                                  "(truncated?)")) is E.UnknownError
    assert type(E.from_status(io, "checkpoint 'x': cannot read: Input/output error")) \
        is E.UnknownError


def test_hyperparameter_assign_as_keras():
    """opt.learning_rate.assign(x), Keras's habit of a variable, sets the
    optimizer's value as opt.learning_rate = x does; numpy() reads the value
    in force; the value is a float for arithmetic, copies and pickles."""
    import pickle
    v = vdev.Variable([1.0])
    sgd = vdev.optimizers.SGD(0.5)
    lr = sgd.learning_rate
    assert isinstance(lr, float) and lr == 0.5 and lr * 2 == 1.0
    assert lr.assign(0.25) == 0.25
    assert sgd.learning_rate == 0.25 and lr.numpy() == 0.25 and float(lr) == 0.5
    sgd.apply_gradients([(vdev.constant([1.0]), v)])
    assert v.numpy().tolist() == [0.75]  # the assigned rate: 1 - 0.25 * 1
    with pytest.raises(ValueError):
        sgd.learning_rate.assign(-1.0)  # checked as the setter checks it
    assert sgd.learning_rate == 0.25
    assert sgd.momentum.assign(0.5, read_value=False) is None and sgd.momentum == 0.5
    adam = vdev.optimizers.Adam(0.1)
    adam.beta_1.assign(0.5)
    adam.epsilon.assign(1e-3)
    assert (adam.beta_1, adam.epsilon) == (0.5, 1e-3)
    assert type(pickle.loads(pickle.dumps(adam.learning_rate))) is float
    assert adam.learning_rate.numpy() == pytest.approx(0.1)
