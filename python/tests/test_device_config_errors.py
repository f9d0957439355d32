"""Device scopes, configuration switches and errors as TensorFlow has them:
a vdev.device(None) block gives back every enclosing scope, even one that
could not be opened now (soft placement turned off, or a device gone after
vdev.shutdown()); the tf.errors classes built as TensorFlow builds them;
the switches refusing what is not a bool; a name of no device outside any
scope pinning CPU:0; a device function refused; '*' for a replica or a task
refused in DeviceSpec's words; [] read back after a split was removed; and
the strict placement advice naming the call that chose it."""
import pickle

import pytest

import vdev

LONG = "/job:localhost/replica:0/task:0"
C = vdev.config
cur = vdev._device.current_device


# ---- 1. vdev.device(None) gives every enclosing scope back ----

def test_device_none_exit_keeps_a_soft_placed_scope():
    C.set_soft_device_placement(True)
    with vdev.device("GPU:1"):
        with vdev.device("GPU:9"):  # accepted under soft placement
            with vdev.device(None):
                C.set_soft_device_placement(False)
            assert cur() == LONG + "/device:GPU:9"
            assert C.get_soft_device_placement() is False  # left as the block left it
            with pytest.raises(vdev.errors.NotFoundError) as e:
                vdev.ones([1])  # as a scope that stayed open: its next op fails
            assert "device:GPU:9 unknown device" in str(e.value)
        assert cur() == LONG + "/device:GPU:1"
        assert vdev.ones([1]).device == LONG + "/device:GPU:1"
    assert cur() is None


def test_device_none_exit_after_shutdown_keeps_the_scopes():
    with vdev.device("GPU:2"):
        with vdev.device(None):
            vdev.shutdown()
            vdev.config.set_visible_devices(
                vdev.config.list_physical_devices("GPU")[:1], "GPU")
        assert cur() == LONG + "/device:GPU:2"  # a device the new configuration lacks
        with pytest.raises(vdev.errors.NotFoundError):
            vdev.ones([1])
    assert cur() is None
    assert vdev.ones([1]).device == LONG + "/device:GPU:0"


# ---- 2. the errors, built as TensorFlow's ----

def test_errors_built_as_tensorflow():
    E = vdev.errors
    e = E.InvalidArgumentError(None, None, "bad")
    assert (str(e), e.message, e.op, e.node_def, e.error_code, e.experimental_payloads,
            e.status) == ("bad", "bad", None, None, E.INVALID_ARGUMENT, {}, None)
    e = E.OpError("node", "op", "m", E.ABORTED, {"k": b"v"})
    assert (e.node_def, e.op, e.error_code, e.experimental_payloads) == (
        "node", "op", E.ABORTED, {"k": b"v"})
    e = E.UnknownError(None, None, "u", {"p": 1})
    assert (e.error_code, e.experimental_payloads) == (E.UNKNOWN, {"p": 1})
    with pytest.raises(TypeError) as t:
        E.OpError(None, None, "m")
    assert str(t.value) == "__init__() missing 1 required positional argument: 'error_code'"
    with pytest.raises(AttributeError):
        e.error_code = 3
    with pytest.raises(AttributeError):
        e.message = "x"
    o = E.OutOfMemoryError(None, None, "full")
    assert (o.error_code, o.report) == (E.RESOURCE_EXHAUSTED, "full")
    p = pickle.loads(pickle.dumps(E.NotFoundError(None, None, "gone")))
    assert (type(p), p.message, p.error_code) == (E.NotFoundError, "gone", E.NOT_FOUND)


def test_raised_errors_have_op_and_node_def():
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.matmul(vdev.ones([2, 3]), vdev.ones([2, 3]))
    err = e.value
    assert err.op is None and err.node_def is None and err.status == "VDEV_ERR_SHAPE"
    assert err.error_code == vdev.errors.INVALID_ARGUMENT and err.experimental_payloads == {}
    p = pickle.loads(pickle.dumps(err))
    assert (p.message, p.status) == (err.message, "VDEV_ERR_SHAPE")


# ---- 3. the switches take bools ----

@pytest.mark.parametrize("bad", ["false", "no", None, 2, 0.0])
def test_switches_refuse_what_is_not_a_bool(bad):
    with pytest.raises(TypeError) as e:
        C.set_soft_device_placement(bad)
    assert str(e.value) == "set_soft_device_placement takes a bool (True or False), not %r" % (
        bad,)
    assert C.get_soft_device_placement() is False
    with pytest.raises(TypeError) as e:
        vdev.debugging.set_log_device_placement(bad)
    assert str(e.value) == "set_log_device_placement takes a bool (True or False), not %r" % (
        bad,)
    assert vdev.debugging.get_log_device_placement() is False
    C.set_soft_device_placement(1)
    vdev.debugging.set_log_device_placement(True)
    assert C.get_soft_device_placement() is True
    assert vdev.debugging.get_log_device_placement() is True


# ---- 4. and 5. names of no device, and functions ----

def test_name_of_no_device_outside_any_scope_pins_cpu0():
    for name in ("", "/job:localhost", "/task:0", "/replica:0"):
        with vdev.device(name):
            assert cur() == LONG + "/device:CPU:0"
            assert vdev.ones([1]).device == LONG + "/device:CPU:0"
        assert cur() is None
        with vdev.device("GPU:1"):
            with vdev.device(None):
                with vdev.device(name):  # no device in force: the same
                    assert cur() == LONG + "/device:CPU:0"
            with vdev.device(name):
                assert cur() == LONG + "/device:GPU:1"


def test_device_function_is_tensorflows_runtime_error():
    with pytest.raises(RuntimeError) as e:
        vdev.device(lambda op: "GPU:1")
    assert str(e.value) == ("tf.device does not support functions when eager execution is "
                            "enabled.")


# ---- 6. '*' for a replica or a task ----

@pytest.mark.parametrize("name,part", [("/replica:*", "replica"), ("/job:localhost/task:*",
                                                                     "task")])
def test_star_replica_or_task_is_a_clear_value_error(name, part):
    want = ("invalid literal for int() with base 10: '*' (a DeviceSpec's %s is a number, as "
            "in TensorFlow: leave the part out to leave it unspecified)" % part)
    with pytest.raises(ValueError) as e:
        vdev.DeviceSpec.from_string(name)
    assert str(e.value) == want
    with pytest.raises(ValueError) as e:
        with vdev.device(name):
            pass
    assert str(e.value) == want
    assert cur() is None
    assert vdev.DeviceSpec.from_string("/job:*/device:GPU:*").to_string() == "/job:*/device:GPU:*"


# ---- 7. a removed split reads back [] ----

def test_removed_split_reads_back_empty_list():
    gpu = C.list_physical_devices("GPU")[1]
    assert C.get_logical_device_configuration(gpu) is None
    C.set_logical_device_configuration(gpu, [])
    assert C.get_logical_device_configuration(gpu) == []
    assert C.get_logical_device_configuration(C.list_physical_devices("GPU")[0]) is None
    C.set_logical_device_configuration(gpu, [C.LogicalDeviceConfiguration(1024)])
    assert C.get_logical_device_configuration(gpu) == [C.LogicalDeviceConfiguration(1024)]
    C.set_logical_device_configuration(gpu, [])
    vdev.shutdown()  # forgets code's configuration
    assert C.get_logical_device_configuration(gpu) is None


# ---- 8. the strict advice names the call that chose strict ----

def _advice():
    with vdev.device("GPU:1"):
        a = vdev.constant([1.0])
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        with vdev.device("GPU:2"):
            a + a
    return str(e.value).rsplit(", or use ", 1)[1]


def test_strict_advice_names_the_call_used():
    C.experimental.set_device_policy("explicit")
    assert _advice() == "vdev.config.experimental.set_device_policy('silent')"
    vdev.placement.set_policy("strict")
    assert _advice() == "vdev.placement.set_policy('copy')"
    C.experimental.set_device_policy("explicit")
    vdev.shutdown()
    vdev.placement.set_policy("strict")
    assert _advice() == "vdev.placement.set_policy('copy')"
