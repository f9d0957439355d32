"""Placement as TensorFlow decides it: the device policy governs copies and
never where ops run; soft placement is read per op, so turning it off fails
the next op in a scope that it opened on a stand-in; variable updates run on
the variable's device whatever scope is open; device scopes left out of order
raise TensorFlow's error; '/device:GPU' (no index) is refused as tf.device
refuses it; and '' or a job alone merge into the enclosing scope, adding no
constraint outside any, in C as in Python."""
import threading

import pytest

import vdev

LONG = "/job:localhost/replica:0/task:0"
E = vdev.config.experimental


def _matmul_device():
    with vdev.device("GPU:1"):
        w = vdev.Variable(vdev.ones([2, 2]))
    return vdev.matmul(vdev.ones([2, 2]), w).device


# ---- the device policy leaves placement alone ----

def test_silent_keeps_tf_placement():
    vdev.placement.set_policy("tf")
    assert E.get_device_policy() == "silent"
    assert _matmul_device() == LONG + "/device:GPU:0"
    E.set_device_policy("silent")  # the value in force: nothing changes
    E.set_device_policy(None)
    assert vdev.placement.get_policy() == "tf"
    assert _matmul_device() == LONG + "/device:GPU:0"


def test_explicit_under_tf_is_refused():
    vdev.placement.set_policy("tf")
    with pytest.raises(ValueError) as e:
        E.set_device_policy("explicit")
    assert str(e.value) == (
        "The device policy 'explicit' cannot be combined with vdev's 'tf' placement rule, "
        "which is in force: vdev's only policy that refuses copies, 'strict', places unscoped "
        "ops by their inputs rather than on the default device. Choose it with "
        "vdev.placement.set_policy('strict')")
    assert vdev.placement.get_policy() == "tf"


def test_policies_switch_the_copy_rule_only():
    E.set_device_policy("explicit")
    assert vdev.placement.get_policy() == "strict"
    E.set_device_policy("explicit")
    assert vdev.placement.get_policy() == "strict"
    E.set_device_policy("silent")
    assert vdev.placement.get_policy() == "copy"
    assert _matmul_device() == LONG + "/device:GPU:1"  # follows the variable, as before


def test_env_policy_kept_when_code_repeats_it():
    from conftest import run_python
    code = ("import vdev; E = vdev.config.experimental\n"
            "E.set_device_policy('silent'); print(vdev.placement.get_policy())\n")
    rc, out, err = run_python(code, {"VDEV_PLACEMENT": "tf"})
    assert rc == 0, err
    assert out == "tf\n"


# ---- soft placement per op ----

def test_soft_off_fails_next_op_in_open_scope():
    vdev.config.set_soft_device_placement(True)
    with vdev.device("GPU:7"):
        assert (vdev.ones([2]) * 2.0).device == LONG + "/device:GPU:0"
        vdev.config.set_soft_device_placement(False)
        with pytest.raises(vdev.errors.NotFoundError) as e:  # an op's NOT_FOUND
            vdev.ones([2])
        assert str(e.value) == (
            LONG + "/device:GPU:7 unknown device (there are 3 logical GPUs) (the device scope "
            "was opened under soft device placement, which is now off)")
        vdev.config.set_soft_device_placement(True)
        assert vdev.ones([2]).device == LONG + "/device:GPU:0"


# ---- updates run on the variable's device ----

def test_assign_add_runs_on_variable_device():
    with vdev.device("GPU:1"):
        v = vdev.Variable([1.0, 2.0])
    vdev.placement.reset()
    with vdev.device("GPU:0"):
        v.assign_add([1.0, 1.0])
        d = vdev.constant([0.5, 0.5])
        v.assign_sub(d)
        assert v.device == LONG + "/device:GPU:1"
    assert v.numpy().tolist() == [1.5, 2.5]
    assert vdev.placement.audit() == []
    assert vdev.placement.op_count("AddV2", "GPU:1") == 1
    assert vdev.placement.op_count("Sub", "GPU:1") == 1
    assert vdev.placement.op_count("AddV2", "GPU:0") == 0
    # the delta on GPU:0 was copied to the variable's device, and counted
    assert vdev.placement.bytes_copied("GPU:0", "GPU:1") == 8
    assert vdev.placement.bytes_copied() == 8


def _conflict(op):
    return ("Tensors on conflicting devices: cannot compute %s as input #1 was expected to be "
            "on %s/device:GPU:1 but is actually on %s/device:GPU:0 (operation running on "
            "%s/device:GPU:1). Copy it explicitly with vdev.identity(x) under `with "
            "vdev.device(...)`, or x.cpu() / x.gpu(i), or use "
            "vdev.config.experimental.set_device_policy('silent')" % (op, LONG, LONG, LONG))


def test_updates_under_explicit():
    with vdev.device("GPU:1"):
        v = vdev.Variable([1.0, 2.0])
    E.set_device_policy("explicit")
    with vdev.device("GPU:0"):
        v.assign_add([1.0, 1.0])  # a Python value is made on the variable's device
        d = vdev.constant([1.0, 1.0])
        for f, op in ((v.assign_add, "AssignAddVariableOp"),
                      (v.assign_sub, "AssignSubVariableOp"), (v.assign, "AssignVariableOp")):
            with pytest.raises(vdev.errors.InvalidArgumentError) as e:
                f(d)
            assert str(e.value) == _conflict(op)
    assert v.numpy().tolist() == [2.0, 3.0]
    with vdev.device("GPU:1"):
        v.assign(vdev.identity(d))  # the explicit copy
    assert v.numpy().tolist() == [1.0, 1.0]


# ---- scope nesting ----

def test_out_of_order_exit_raises():
    d1, d2 = vdev.device("GPU:1"), vdev.device("GPU:2")
    d1.__enter__()
    d2.__enter__()
    with pytest.raises(RuntimeError) as e:
        d1.__exit__(None, None, None)
    assert str(e.value) == "Exiting device scope without proper scope nesting"
    cur = vdev._device.current_device
    assert cur() == LONG + "/device:GPU:2"  # nothing popped
    d2.__exit__(None, None, None)
    assert cur() == LONG + "/device:GPU:1"
    d1.__exit__(None, None, None)
    assert cur() is None


def test_reentered_device_object_and_threads():
    d = vdev.device("GPU:1")
    with d:
        with d:
            assert vdev._device.current_device() == LONG + "/device:GPU:1"
    errs = []

    def other():  # another thread's stack is its own: d is not in it
        try:
            d.__exit__(None, None, None)
        except RuntimeError as e:
            errs.append(str(e))

    with d:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert vdev._device.current_device() == LONG + "/device:GPU:1"
    assert errs == ["Exiting device scope without proper scope nesting"]


# ---- names ----

def test_device_type_without_index_after_device_is_refused():
    with pytest.raises(ValueError) as e:
        with vdev.device("/device:GPU"):
            pass
    assert str(e.value) == ("Unknown attribute 'device' is encountered while parsing the device "
                            "spec: '/device:GPU'.")
    assert vdev._device.current_device() is None
    with vdev.device("GPU:1"):
        for name in ("GPU", "/gpu", "GPU:*", "/device:GPU:*"):
            with vdev.device(name):
                assert vdev.ones([1]).device == LONG + "/device:GPU:1"


def test_empty_and_job_names_merge_or_pin_cpu0():
    for name in ("", "/job:localhost", "/job:localhost/replica:0/task:0"):
        with vdev.device(name):  # TensorFlow merges it into its first device, CPU:0
            assert vdev._device.current_device() == LONG + "/device:CPU:0"
            assert vdev.ones([1]).device == LONG + "/device:CPU:0"
        with vdev.device("GPU:2"):
            with vdev.device(name):
                assert vdev.ones([1]).device == LONG + "/device:GPU:2"
    # the C call differs: '/job:localhost' alone outside any scope is a scope of no device
    lib = vdev._lib.lib
    assert lib.vdev_device_push(b"/job:localhost") == 0
    assert lib.vdev_device_current() is None
    assert lib.vdev_device_pop() == 0
    with pytest.raises(RuntimeError) as e:
        with vdev.device("/job:worker"):
            pass
    assert str(e.value) == "/job:worker unknown device: only " + LONG + " is local"
    assert vdev._device.current_device() is None
