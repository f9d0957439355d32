"""Memory from Python: get_memory_info's keys (TensorFlow's current and peak
plus vdev's), reset_memory_stats, release_cached_memory, hard limits of
logical devices, and OutOfMemoryError carrying vdev's report, after which the
device is as it was and a smaller retry succeeds."""
import pytest

import vdev
from vdev import config as C

MIB = 1 << 20


def test_memory_info_keys_and_stats():
    E = C.experimental
    with vdev.device("GPU:1"):
        a = vdev.zeros([1000])  # 4000 bytes, 4096 after 256-byte rounding
    info = E.get_memory_info("GPU:1")
    assert set(info) == {"current", "peak", "reserved", "peak_reserved", "limit",
                         "largest_free_block", "num_allocs", "num_allocs_total",
                         "num_failed_allocs", "num_regions", "fragmentation",
                         "largest_alloc_size"}
    assert info["current"] == 4096 and info["peak"] == 4096 and info["num_allocs"] == 1
    assert info["reserved"] == 2 * MIB and info["num_regions"] == 1  # growth: a 2 MiB region
    assert info["largest_alloc_size"] == 4096
    with pytest.warns(DeprecationWarning, match=r"get_memory_info\(device\)\['current'\]"):
        assert E.get_memory_usage("GPU:1") == 4096
    assert C.get_memory_info("/job:localhost/replica:0/task:0/device:GPU:1") == info
    del a
    info = E.get_memory_info("GPU:1")
    assert info["current"] == 0 and info["peak"] == 4096
    E.reset_memory_stats("GPU:1")
    info = E.get_memory_info("GPU:1")
    assert info["peak"] == 0 and info["largest_alloc_size"] == 0
    assert E.release_cached_memory("GPU:1") == 2 * MIB
    assert E.get_memory_info("GPU:1")["reserved"] == 0
    cpu = E.get_memory_info("CPU:0")  # vdev answers for CPUs too
    assert cpu["current"] == 0


def test_memory_query_errors():
    for call in (C.get_memory_info, C.reset_memory_stats,
                 C.experimental.release_cached_memory):
        with pytest.raises(ValueError) as e:
            call("GPU:5")
        assert str(e.value) == ("No matching devices found for 'GPU:5': /job:localhost/replica:0/"
                                "task:0/device:GPU:5 unknown device (there are 3 logical GPUs)")
        with pytest.raises(ValueError) as e:
            call("GPU")
        assert str(e.value) == ("Failed parsing device name: 'GPU'. Note a valid device string "
                                "should at least contain a device type and a device index, like "
                                "\"GPU:0\".")
        with pytest.raises(TypeError):
            call(0)


def test_out_of_memory_is_recoverable():
    gpu = C.list_physical_devices("GPU")[0]
    C.set_logical_device_configuration(gpu, [C.LogicalDeviceConfiguration(memory_limit=64),
                                             C.LogicalDeviceConfiguration(memory_limit=32)])
    with vdev.device("GPU:1"):
        keep = vdev.zeros([4 * MIB // 4])  # 4 MiB of the 32
        before = C.get_memory_info("GPU:1")
        with pytest.raises(vdev.OutOfMemoryError) as e:
            vdev.zeros([10 * MIB])  # 40 MiB
        err = e.value
        assert isinstance(err, vdev.errors.ResourceExhaustedError)
        assert err.status == "VDEV_ERR_OOM"
        assert err.report == str(err)
        assert str(err).startswith("OOM when allocating tensor with shape[10485760] and type "
                                   "float (40.00 MiB) on /job:localhost/replica:0/task:0/device:"
                                   "GPU:1: ")
        assert "4.00 MiB in use of 32.00 MiB limit" in str(err)
        assert "the limit is short by" in str(err)
        after = C.get_memory_info("GPU:1")
        assert after["current"] == before["current"]
        assert after["num_failed_allocs"] == before["num_failed_allocs"] + 1
        half = vdev.zeros([5 * MIB])  # 20 MiB: fits
    assert half.shape == (5 * MIB,)
    assert C.get_memory_info("GPU:0")["current"] == 0  # the other model's device untouched
    del keep, half


def test_oom_report_with_VDEV_OOM_REPORT(monkeypatch, capfd):
    """With VDEV_OOM_REPORT=1, report is the message then the allocator's state
    that went to stderr; without it, the message alone (above)."""
    monkeypatch.setenv("VDEV_OOM_REPORT", "1")
    gpu = C.list_physical_devices("GPU")[0]
    C.set_logical_device_configuration(gpu, [C.LogicalDeviceConfiguration(memory_limit=64),
                                             C.LogicalDeviceConfiguration(memory_limit=32)])
    with vdev.device("GPU:1"):
        keep = vdev.zeros([4 * MIB // 4])
        with pytest.raises(vdev.OutOfMemoryError) as e:
            vdev.zeros([10 * MIB])
    report = e.value.report
    assert report.startswith(str(e.value) + "\n")
    assert "\nAllocator (/device:GPU:1) state: " in report
    assert "\nLargest free block: " in report
    assert "\nBiggest live blocks:" in report
    assert report in capfd.readouterr().err
    # a later error of another kind does not carry it
    with pytest.raises(ValueError):
        C.get_memory_info("GPU:9")
    del keep


def test_oom_in_an_op_and_training_goes_on():
    gpu = C.list_physical_devices("GPU")[0]
    C.set_memory_growth(gpu, False)  # one region of the whole limit
    C.set_logical_device_configuration(gpu, [C.LogicalDeviceConfiguration(memory_limit=20)])
    with vdev.device("GPU:0"):
        m = vdev.models.MLP([1024, 1024], seed=1)  # 4 MiB of weights
        big = vdev.random.uniform([2500, 1024], seed=2)  # 9.77 MiB
    with pytest.raises(vdev.OutOfMemoryError) as e:
        m(big)  # the product needs 9.77 MiB more
    assert str(e.value).startswith("OOM when allocating tensor with shape[2500,1024] and type "
                                   "float (9.77 MiB) on /job:localhost/replica:0/task:0/device:"
                                   "GPU:0: ")
    del big
    small = m(vdev.random.uniform([10, 1024], seed=3))
    assert small.shape == (10, 1024)


RELEASE_WHILE_USED = """
import threading
import vdev
C = vdev.config
gpu = C.list_physical_devices("GPU")[0]
C.set_memory_growth(gpu, True)
C.set_logical_device_configuration(gpu, [C.LogicalDeviceConfiguration(memory_limit=256)])
done = threading.Event()

def user():
    with vdev.device("GPU:0"):
        for _ in range(2000):
            vdev.zeros([1 << 20])  # 4 MiB, filled on the device's stream, freed at once
    done.set()

th = threading.Thread(target=user)
th.start()
while not done.is_set():
    C.experimental.release_cached_memory("GPU:0")
th.join()
C.experimental.release_cached_memory("GPU:0")
info = C.get_memory_info("GPU:0")
print("in use", info["current"], "reserved", info["reserved"])
"""


def test_release_cached_memory_while_another_thread_allocates():
    """release_cached_memory waits for the device's queued work with the
    allocator locked: a block another thread made, filled on the stream and
    freed in between used to leave its region empty, released while the fill
    still wrote to it (a segmentation fault on the simulated GPU's stream)."""
    import os
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", RELEASE_WHILE_USED], capture_output=True,
                       text=True, env=dict(os.environ, VDEV_SIM_GPUS="1x16GiB"), timeout=300)
    assert (r.returncode, r.stdout, r.stderr) == (0, "in use 0 reserved 0\n", "")
