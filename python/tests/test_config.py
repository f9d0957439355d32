"""vdev.config as tf.config: physical and logical devices, visibility,
memory growth, logical devices in MiB, soft placement, device details,
determinism, the device policy; TensorFlow's errors and messages, and
configuration after start-up."""
import pytest

import vdev
from vdev import config as C
from conftest import clean_env

LDC = C.LogicalDeviceConfiguration


def gpus():
    return C.list_physical_devices("GPU")


def test_list_physical_devices():
    phys = C.list_physical_devices()
    assert phys == [C.PhysicalDevice("/physical_device:CPU:0", "CPU"),
                    C.PhysicalDevice("/physical_device:GPU:0", "GPU"),
                    C.PhysicalDevice("/physical_device:GPU:1", "GPU"),
                    C.PhysicalDevice("/physical_device:GPU:2", "GPU")]
    assert phys[1].name == "/physical_device:GPU:0" and phys[1].device_type == "GPU"
    assert C.list_physical_devices("CPU") == phys[:1]
    assert C.list_physical_devices("gpu") == []  # compared as written, as TensorFlow
    assert not vdev.is_initialized()  # listing physical devices does not start vdev


def test_list_logical_devices_starts_the_runtime():
    assert C.list_logical_devices("GPU") == [C.LogicalDevice("/device:GPU:%d" % i, "GPU")
                                             for i in range(3)]
    assert vdev.is_initialized()
    assert C.list_logical_devices("CPU") == [C.LogicalDevice("/device:CPU:0", "CPU")]


def test_visible_devices():
    g = gpus()
    assert C.get_visible_devices() == C.list_physical_devices()
    C.set_visible_devices([g[2], g[0]], "GPU")
    assert C.get_visible_devices("GPU") == [g[2], g[0]]  # as given
    # logical GPUs are numbered in physical order
    assert [d.name for d in C.list_logical_devices("GPU")] == ["/device:GPU:0", "/device:GPU:1"]
    info = vdev.config.experimental.get_device_details(g[2])
    assert info == {"device_name": "Simulated GPU", "compute_capability": (8, 0)}
    # the same list after start-up is no change; another is refused
    C.set_visible_devices([g[2], g[0]], "GPU")
    with pytest.raises(RuntimeError) as e:
        C.set_visible_devices(g[:1], "GPU")
    assert str(e.value) == "Visible devices cannot be modified after being initialized"


def test_visible_devices_single_and_none():
    g = gpus()
    C.set_visible_devices(g[1], "GPU")  # a single device, not a list
    assert C.get_visible_devices("GPU") == [g[1]]
    C.set_visible_devices([], "GPU")
    assert C.get_visible_devices("GPU") == []
    assert C.list_logical_devices("GPU") == []
    # with no GPU, ops run on the CPU
    assert vdev.constant([1.0]).device == "/job:localhost/replica:0/task:0/device:CPU:0"


def test_visible_devices_errors():
    g = gpus()
    cpu = C.list_physical_devices("CPU")[0]
    bogus = C.PhysicalDevice("/physical_device:GPU:7", "GPU")
    with pytest.raises(ValueError) as e:
        C.set_visible_devices([bogus], "GPU")
    assert str(e.value) == ("Unrecognized device: PhysicalDevice(name='/physical_device:GPU:7', "
                            "device_type='GPU')")
    with pytest.raises(ValueError) as e:
        C.set_visible_devices([cpu], "GPU")  # not of the type named
    assert str(e.value).startswith("Unrecognized device: PhysicalDevice(name='/physical_device:CPU:0'")
    with pytest.raises(ValueError) as e:
        C.set_visible_devices("/physical_device:GPU:0", "GPU")
    assert str(e.value) == "Unrecognized device: '/physical_device:GPU:0'"
    with pytest.raises(ValueError) as e:
        C.set_visible_devices([g[0], g[0]], "GPU")
    assert str(e.value) == "the visible devices contained a duplicate entry: 0,0 (GPU 0)"
    C.set_visible_devices([cpu], "CPU")  # the CPU stays; GPUs unchanged
    assert C.get_visible_devices() == C.list_physical_devices()


def test_memory_growth():
    g = gpus()
    assert C.get_memory_growth(g[0]) is None
    C.set_memory_growth(g[0], True)
    C.set_memory_growth(g[1], False)  # may differ between GPUs in vdev
    assert C.get_memory_growth(g[0]) is True and C.get_memory_growth(g[1]) is False
    assert vdev.config.experimental.get_memory_growth(g[2]) is None
    vdev.init()
    info = C.get_memory_info("GPU:1")
    assert info["reserved"] == info["limit"]  # growth off: preallocated
    assert C.get_memory_info("GPU:0")["reserved"] == 0
    C.set_memory_growth(g[0], True)  # the same value after start-up: no-op
    with pytest.raises(RuntimeError) as e:
        C.set_memory_growth(g[0], False)
    assert str(e.value) == "Physical devices cannot be modified after being initialized"


def test_memory_growth_errors():
    cpu = C.list_physical_devices("CPU")[0]
    with pytest.raises(ValueError) as e:
        C.set_memory_growth(cpu, True)
    assert str(e.value) == "Cannot set memory growth on non-GPU and non-Pluggable devices"
    with pytest.raises(ValueError) as e:
        C.set_memory_growth(C.PhysicalDevice("/physical_device:GPU:3", "GPU"), True)
    assert str(e.value) == ("Unrecognized device: PhysicalDevice(name='/physical_device:GPU:3', "
                            "device_type='GPU')")
    with pytest.raises(ValueError) as e:
        C.get_memory_growth("GPU:0")
    assert str(e.value) == "Unrecognized device: 'GPU:0'"


def test_logical_devices_in_mib():
    g = gpus()
    C.set_memory_growth(g[0], True)  # growth and logical devices together
    C.set_logical_device_configuration(g[0], [LDC(memory_limit=4096), LDC(memory_limit=2048)])
    assert C.get_logical_device_configuration(g[0]) == [LDC(4096), LDC(2048)]
    assert C.get_logical_device_configuration(g[1]) is None
    names = [d.name for d in C.list_logical_devices("GPU")]
    assert names == ["/device:GPU:%d" % i for i in range(4)]
    assert C.get_memory_info("GPU:0")["limit"] == 4096 << 20
    assert C.get_memory_info("/device:GPU:1")["limit"] == 2048 << 20
    # repeating the configuration in force is fine; changing it is not
    C.set_logical_device_configuration(g[0], [LDC(memory_limit=4096), LDC(memory_limit=2048)])
    with pytest.raises(RuntimeError) as e:
        C.set_logical_device_configuration(g[0], [LDC(memory_limit=1024)])
    assert str(e.value) == "Virtual devices cannot be modified after being initialized"


def test_logical_devices_whole_mib_and_removal():
    g = gpus()
    C.set_logical_device_configuration(g[1], [LDC(memory_limit=1024.9)])  # truncated, as TF
    assert C.get_logical_device_configuration(g[1]) == [LDC(1024)]
    C.set_logical_device_configuration(g[1], [])  # removes the split
    assert C.get_logical_device_configuration(g[1]) == []  # what was set, as TensorFlow


def test_logical_cpus():
    cpu = C.list_physical_devices("CPU")[0]
    C.set_logical_device_configuration(cpu, [LDC(), LDC()])
    assert C.get_logical_device_configuration(cpu) == [LDC(), LDC()]
    assert C.list_logical_devices("CPU") == [C.LogicalDevice("/device:CPU:0", "CPU"),
                                             C.LogicalDevice("/device:CPU:1", "CPU")]
    with vdev.device("CPU:1"):
        t = vdev.constant([1.0, 2.0])
    assert t.device.endswith("/device:CPU:1")
    assert C.get_memory_info("CPU:1")["current"] == 256


def test_logical_device_errors():
    g = gpus()
    cpu = C.list_physical_devices("CPU")[0]
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(g[0], [LDC()])
    assert str(e.value) == "Setting memory limit is required for GPU virtual devices"
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(cpu, [LDC(memory_limit=10)])
    assert str(e.value) == "Setting memory limit on CPU virtual devices is currently not supported"
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(cpu, [LDC(experimental_priority=1)])
    assert str(e.value) == ("Setting experimental_priority on CPU virtual  devices is currently "
                            "not supported")
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(g[0], [LDC(memory_limit=10, experimental_priority=1)])
    assert "experimental_priority" in str(e.value)
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(g[0], [LDC(memory_limit=-1)])
    assert str(e.value) == "memory_limit must be a number of MiB >= 0, not -1"
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(g[0], [LDC(memory_limit=0)])
    assert str(e.value) == ("logical device 0 of /physical_device:GPU:0 has a memory limit of 0 "
                            "MiB: a limit is at least 1 MiB")
    # With a floor or a priority too: an explicit limit below 1 MiB is refused
    # the same (only memory_limit=None means the card's budget).
    for limit in (0, 0.5):
        for extra in ({"memory_priority": "low"}, {"memory_floor": 0}):
            with pytest.raises(ValueError) as e:
                C.set_logical_device_configuration(
                    g[0], [LDC(memory_limit=1024), LDC(memory_limit=limit, **extra)])
            cut = "" if limit == 0 else ", 0 once cut to whole MiB as TensorFlow does"
            assert str(e.value) == ("logical device 1 of /physical_device:GPU:0 has a memory "
                                    "limit of %r MiB%s: a limit is at least 1 MiB" % (limit, cut))
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(C.PhysicalDevice("/physical_device:TPU:0", "TPU"), [])
    assert str(e.value).startswith("Unrecognized device: PhysicalDevice(name='/physical_device:TPU:0'")
    assert C.get_logical_device_configuration(g[0]) is None  # nothing changed


def test_older_names_of_logical_devices():
    """TensorFlow's tf.config.experimental keeps the older names of the
    logical-device calls as aliases: code written with them runs as is."""
    E = C.experimental
    g = gpus()[0]
    E.set_virtual_device_configuration(g, [E.VirtualDeviceConfiguration(memory_limit=100),
                                           E.VirtualDeviceConfiguration(memory_limit=200)])
    assert E.get_virtual_device_configuration(g) == [LDC(memory_limit=100),
                                                     LDC(memory_limit=200)]
    assert [d.name for d in C.list_logical_devices("GPU")][:2] == ["/device:GPU:0",
                                                                   "/device:GPU:1"]
    assert C.get_memory_info("GPU:1")["limit"] == 200 << 20
    with pytest.raises(RuntimeError) as e:
        E.set_virtual_device_configuration(g, [LDC(memory_limit=300)])
    assert str(e.value) == "Virtual devices cannot be modified after being initialized"


def test_limits_beyond_the_card_fail_at_start_up():
    g = gpus()
    C.set_logical_device_configuration(g[0], [LDC(memory_limit=10240), LDC(memory_limit=10240)])
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        C.list_logical_devices()
    assert str(e.value) == ("/physical_device:GPU:0: its 2 logical devices' limits sum to 20.00 "
                            "GiB (21474836480 bytes), more than the card's budget of 14.50 GiB "
                            "(15569256448 bytes: 16.00 GiB free less the 1.50 GiB driver reserve)")
    assert not vdev.is_initialized()  # nothing started; it can be fixed and retried
    C.set_logical_device_configuration(g[0], [LDC(memory_limit=10240)])
    vdev.init()
    assert C.get_memory_info("GPU:0")["limit"] == 10240 << 20


def test_environment_is_read_and_code_wins(monkeypatch):
    monkeypatch.setenv("VDEV_LOGICAL_DEVICES", "0:1GiB,512MiB")
    g = gpus()
    assert C.get_logical_device_configuration(g[0]) == [LDC(1024), LDC(512)]
    C.set_logical_device_configuration(g[0], [LDC(memory_limit=256)])
    assert C.get_logical_device_configuration(g[0]) == [LDC(256)]


def test_malformed_environment(monkeypatch):
    monkeypatch.setenv("VDEV_MEMORY_GROWTH", "maybe")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.init()
    assert "VDEV_MEMORY_GROWTH" in str(e.value)


def test_no_gpu(monkeypatch):
    clean_env(monkeypatch, sim=None)
    monkeypatch.setenv("VDEV_CUDA_PLUGIN", "/nonexistent/libvdev-cuda.so")
    assert C.list_physical_devices("GPU") == []
    assert vdev.constant(1.0).device.endswith("/device:CPU:0")


def test_device_details_errors():
    with pytest.raises(ValueError) as e:
        C.get_device_details("GPU:0")
    assert str(e.value) == "device must be a tf.config.PhysicalDevice, but got: GPU:0"
    bogus = C.PhysicalDevice("/physical_device:GPU:9", "GPU")
    with pytest.raises(ValueError) as e:
        C.get_device_details(bogus)
    assert str(e.value).startswith("The PhysicalDevice must be one obtained from calling "
                                   "`tf.config.list_physical_devices`, but got: ")
    assert C.get_device_details(C.list_physical_devices("CPU")[0]) == {}


def test_soft_device_placement(capfd):
    assert C.get_soft_device_placement() is False  # vdev's default
    with pytest.raises(RuntimeError) as e:
        with vdev.device("GPU:7"):
            pass
    assert str(e.value) == ("/job:localhost/replica:0/task:0/device:GPU:7 unknown device (there "
                            "are 3 logical GPUs)")
    C.set_soft_device_placement(True)
    assert C.get_soft_device_placement() is True
    with vdev.device("GPU:7"):
        t = vdev.constant([1.0])
    assert t.device.endswith("/device:GPU:0")
    assert "soft device placement" in capfd.readouterr().err


def test_determinism_and_device_policy():
    E = C.experimental
    assert E.is_op_determinism_enabled() is False
    E.enable_op_determinism()
    assert E.is_op_determinism_enabled() is True
    E.disable_op_determinism()
    assert E.is_op_determinism_enabled() is False
    assert E.get_device_policy() == "silent"
    E.set_device_policy("explicit")
    assert E.get_device_policy() == "explicit" and vdev.placement.get_policy() == "strict"
    E.set_device_policy(None)
    assert E.get_device_policy() == "silent"
    with pytest.raises(ValueError) as e:
        E.set_device_policy("warm")  # a typo: TensorFlow's words
    assert str(e.value) == "Not a valid device policy: 'warm'"
    with pytest.raises(ValueError) as e:  # TensorFlow's, which vdev does not support
        E.set_device_policy("warn")
    assert str(e.value).startswith("vdev does not support TensorFlow's device policy 'warn'")


def test_memory_fraction():
    g = gpus()
    C.experimental.set_memory_fraction(0.25, g[1])
    vdev.init()
    assert C.get_memory_info("GPU:1")["limit"] == 4 << 30
    with pytest.raises(RuntimeError):
        C.experimental.set_memory_fraction(0.5, g[1])
    with pytest.raises(ValueError) as e:
        C.experimental.set_memory_fraction(0.5, C.list_physical_devices("CPU")[0])
    assert str(e.value).startswith("Unrecognized device: PhysicalDevice(name='/physical_device:CPU:0'")


def test_log_device_placement(capfd):
    vdev.debugging.set_log_device_placement(True)
    assert vdev.debugging.get_log_device_placement() is True
    with vdev.device("GPU:1"):
        vdev.constant([1.0, 2.0]) * 2
    err = capfd.readouterr().err
    assert "Executing op MulScalar in device /job:localhost/replica:0/task:0/device:GPU:1" in err


def _settings():
    return (C.get_soft_device_placement(), C.experimental.is_op_determinism_enabled(),
            vdev.debugging.get_log_device_placement(), vdev.placement.get_policy(),
            C.experimental.get_device_policy())


def _set_all_env(monkeypatch):
    monkeypatch.setenv("VDEV_SOFT_DEVICE_PLACEMENT", "1")
    monkeypatch.setenv("VDEV_DETERMINISTIC", "true")
    monkeypatch.setenv("VDEV_LOG_DEVICE_PLACEMENT", "TRUE")
    monkeypatch.setenv("VDEV_PLACEMENT", "strict")


def test_settings_before_start_up_are_the_environments(monkeypatch):
    vdev.shutdown()  # forgets what the fixture set by code
    assert _settings() == (False, False, False, "copy", "silent")
    _set_all_env(monkeypatch)
    assert not vdev.is_initialized()
    assert _settings() == (True, True, True, "strict", "explicit")
    vdev.init()
    assert _settings() == (True, True, True, "strict", "explicit")
    monkeypatch.setenv("VDEV_PLACEMENT", "tf")  # read at start-up only
    assert vdev.placement.get_policy() == "strict"


def test_settings_code_wins_before_start_up(monkeypatch):
    vdev.shutdown()
    _set_all_env(monkeypatch)
    C.set_soft_device_placement(False)
    vdev.debugging.set_log_device_placement(False)
    assert _settings() == (False, True, False, "strict", "explicit")
    C.experimental.disable_op_determinism()
    vdev.placement.set_policy("tf")
    assert _settings() == (False, False, False, "tf", "silent")
    vdev.init()
    assert _settings() == (False, False, False, "tf", "silent")


@pytest.mark.parametrize("var,value,getter,msg", [
    ("VDEV_SOFT_DEVICE_PLACEMENT", "yes", lambda: C.get_soft_device_placement(),
     'VDEV_SOFT_DEVICE_PLACEMENT="yes" could not be parsed: valid values are true or false '
     '(any case), 1 or 0'),
    ("VDEV_DETERMINISTIC", "on", lambda: C.experimental.is_op_determinism_enabled(),
     'VDEV_DETERMINISTIC="on" could not be parsed: valid values are true or false (any case), '
     '1 or 0'),
    ("VDEV_LOG_DEVICE_PLACEMENT", "2", lambda: vdev.debugging.get_log_device_placement(),
     'VDEV_LOG_DEVICE_PLACEMENT="2" could not be parsed: valid values are true or false (any '
     'case), 1 or 0'),
    ("VDEV_PLACEMENT", "copies", lambda: vdev.placement.get_policy(),
     'VDEV_PLACEMENT="copies" is not a placement policy (copy, strict or tf)'),
    ("VDEV_PLACEMENT", "copies", lambda: C.experimental.get_device_policy(),
     'VDEV_PLACEMENT="copies" is not a placement policy (copy, strict or tf)'),
])
def test_settings_malformed_environment(monkeypatch, var, value, getter, msg):
    """The getter raises start-up's error, as get_visible_devices does."""
    vdev.shutdown()
    monkeypatch.setenv(var, value)
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        getter()
    assert str(e.value) == msg
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.init()
    assert str(e.value) == msg
