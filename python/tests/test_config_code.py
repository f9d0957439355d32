"""vdev.config: code undoes what the environment says (an empty list of
logical devices, a fraction of 0), the messages of a few refused values, and
a repeat of the growth in force after start-up reading back."""
import pytest

import vdev
from vdev import config as C

LDC = C.LogicalDeviceConfiguration
GiB = 1 << 30


def test_empty_list_removes_the_environments_split(monkeypatch):
    monkeypatch.setenv("VDEV_SIM_GPUS", "1x1GiB")
    monkeypatch.setenv("VDEV_LOGICAL_DEVICES", "0:100MiB,200MiB")
    g = C.list_physical_devices("GPU")[0]
    assert C.get_logical_device_configuration(g) == [LDC(memory_limit=100), LDC(memory_limit=200)]
    C.set_logical_device_configuration(g, [])
    assert C.get_logical_device_configuration(g) == []  # TensorFlow's: the value set
    assert [d.name for d in C.list_logical_devices("GPU")] == ["/device:GPU:0"]
    assert C.get_memory_info("GPU:0")["limit"] == GiB - (225 << 20)
    C.set_logical_device_configuration(g, [])  # in force: a no-op
    with pytest.raises(RuntimeError) as e:
        C.set_logical_device_configuration(g, [LDC(memory_limit=100)])
    assert str(e.value) == "Virtual devices cannot be modified after being initialized"


def test_empty_list_unsplits_the_host(monkeypatch):
    monkeypatch.setenv("VDEV_LOGICAL_DEVICES", "cpu:3")
    cpu = C.list_physical_devices("CPU")[0]
    assert len(C.get_logical_device_configuration(cpu)) == 3
    C.set_logical_device_configuration(cpu, [])
    assert C.get_logical_device_configuration(cpu) == []
    assert [d.name for d in C.list_logical_devices("CPU")] == ["/device:CPU:0"]


def test_fraction_zero_removes_the_environments(monkeypatch):
    monkeypatch.setenv("VDEV_SIM_GPUS", "2x4GiB")
    monkeypatch.setenv("VDEV_MEMORY_FRACTION", "0.5")
    C.experimental.set_memory_fraction(0, C.list_physical_devices("GPU")[1])
    assert C.get_memory_info("GPU:0")["limit"] == 2 * GiB
    assert C.get_memory_info("GPU:1")["limit"] == 4 * GiB - (1536 << 20)


def test_fraction_zero_for_every_gpu(monkeypatch):
    monkeypatch.setenv("VDEV_SIM_GPUS", "1x4GiB")
    monkeypatch.setenv("TF_GPU_MEMORY_FRACTION", "0.5")
    C.experimental.set_memory_fraction(0)
    assert C.get_memory_info("GPU:0")["limit"] == 4 * GiB - (1536 << 20)


def test_fraction_message_keeps_the_value():
    with pytest.raises(ValueError) as e:
        C.experimental.set_memory_fraction(1.0000001)
    assert str(e.value) == "memory fraction 1.0000001 is outside (0, 1] (0 removes it)"


def test_memory_limit_zero_message():
    g = C.list_physical_devices("GPU")[0]
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(g, [LDC(memory_limit=100), LDC(memory_limit=0)])
    assert str(e.value) == ("logical device 1 of /physical_device:GPU:0 has a memory limit of 0 "
                            "MiB: a limit is at least 1 MiB")


def test_cpu_refuses_device_ordinal():
    cpu = C.list_physical_devices("CPU")[0]
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(cpu, [LDC(experimental_device_ordinal=1)])
    assert str(e.value) == ("Setting experimental_device_ordinal on CPU virtual  devices is "
                            "currently not supported")
    assert C.get_logical_device_configuration(cpu) is None


def test_growth_after_start_up_as_tensorflow():
    # TensorFlow compares with what code set (None when unset), not with
    # the growth in force: growth never set is refused after start-up.
    g = C.list_physical_devices("GPU")
    C.set_memory_growth(g[1], False)
    vdev.init()
    assert C.get_memory_growth(g[0]) is None
    for enable in (True, False):
        with pytest.raises(RuntimeError) as e:
            C.set_memory_growth(g[0], enable)
        assert str(e.value) == "Physical devices cannot be modified after being initialized"
    assert C.get_memory_growth(g[0]) is None
    C.set_memory_growth(g[1], False)  # what code set: a no-op
    with pytest.raises(RuntimeError) as e:
        C.set_memory_growth(g[1], True)
    assert str(e.value) == "Physical devices cannot be modified after being initialized"
    assert C.get_memory_growth(g[1]) is False
