"""vdev.torch: libvdev-torch-alloc.so loaded beside the package's libvdev.so
shares its runtime (the blocks it hands out show in get_memory_info), its
device map, per-thread device and statistics from Python, and
use_vdev_allocator's refusal, with the reason, where PyTorch cannot take an
allocator (Debian's PyTorch 1.13 has no CUDAPluggableAllocator and no CUDA).
The real PyTorch run is python/tests/gpu_torch_allocator.py (needs a CUDA
build of PyTorch and a GPU)."""
import ctypes
import os

import pytest

import vdev
import vdev.torch as vt

MIB = 1 << 20


@pytest.fixture(autouse=True)
def fresh_allocator(monkeypatch):
    monkeypatch.delenv("VDEV_TORCH_DEVICES", raising=False)
    lib = vt._lib_alloc()
    lib.vdev_torch_empty_cache()
    assert lib.vdev_torch_reset() == 0, lib.vdev_torch_last_error()
    yield
    lib.vdev_torch_empty_cache()
    assert lib.vdev_torch_reset() == 0, lib.vdev_torch_last_error()


def test_library_is_beside_libvdev():
    assert os.path.dirname(vt.library_path()) == os.path.dirname(vdev._lib.path)
    assert os.path.exists(vt.library_path())


def test_allocator_shares_the_runtime():
    gpu = vdev.config.list_physical_devices("GPU")[0]
    vdev.config.set_logical_device_configuration(
        gpu, [vdev.config.LogicalDeviceConfiguration(memory_limit=64),
              vdev.config.LogicalDeviceConfiguration(memory_limit=32)])
    vt.set_device(0, "GPU:1")
    lib = vt._lib_alloc()
    p = lib.vdev_torch_malloc(3 * MIB, 0, None)
    assert p
    assert vdev.config.experimental.get_memory_info("GPU:1")["current"] == 3 * MIB
    assert vdev.config.list_logical_devices("GPU")[1].name == "/device:GPU:1"
    st = vt.memory_stats("GPU:1")
    assert st["allocated_bytes"] == 3 * MIB and st["n_allocs"] == 1
    assert not lib.vdev_torch_malloc(40 * MIB, 0, None)  # beyond GPU:1's 32 MiB
    assert "OOM when allocating 40.00 MiB" in lib.vdev_torch_last_error().decode()
    assert vt.memory_stats("GPU:1")["n_failed"] == 1
    lib.vdev_torch_free(p, 3 * MIB, 0, None)
    assert vdev.config.experimental.get_memory_info("GPU:1")["current"] == 0
    with vt.device("GPU:0"):  # this thread's allocations go to GPU:0
        q = lib.vdev_torch_malloc(MIB, 0, None)
    assert vdev.config.experimental.get_memory_info("GPU:0")["current"] == MIB
    lib.vdev_torch_free(q, MIB, 0, None)
    assert vdev.config.experimental.get_memory_info("GPU:0")["current"] == 0


def test_shutdown_refused_while_blocks_are_live():
    """A shutdown under live blocks would free their memory, and the next
    runtime would hand the same addresses out again: it is refused."""
    lib = vt._lib_alloc()
    p = lib.vdev_torch_malloc(MIB, 0, None)
    with vt.device("GPU:2"):
        q = lib.vdev_torch_malloc(4096, 0, None)
    assert p and q
    with pytest.raises(RuntimeError) as e:
        vdev.shutdown()
    assert str(e.value) == (
        "vdev.shutdown(): 2 blocks of the PyTorch allocator (libvdev-torch-alloc.so) are live "
        "(1 on /device:GPU:0, 1 on /device:GPU:2): torch tensors over vdev memory; delete "
        "them first")
    assert vdev.is_initialized()
    assert vdev.config.experimental.get_memory_info("GPU:0")["current"] == MIB
    lib.vdev_torch_free(p, MIB, 0, None)
    lib.vdev_torch_free(q, 4096, 0, None)
    vdev.shutdown()
    assert not vdev.is_initialized()
    r = lib.vdev_torch_malloc(MIB, 0, None)  # the next runtime: statistics from zero
    st = vt.memory_stats("GPU:0")
    assert (st["n_allocs_total"], st["n_frees_total"], st["peak_allocated_bytes"]) == (1, 0, MIB)
    lib.vdev_torch_free(r, MIB, 0, None)


def test_allocator_errors():
    vdev.init()
    with pytest.raises(ValueError) as e:
        vt.set_device(0, "GPU:9")
    assert str(e.value).startswith("No matching devices found for 'GPU:9'")
    with pytest.raises(ValueError) as e:
        vt.set_device(70, "GPU:0")
    assert str(e.value) == "vdev_torch_set_device: PyTorch device 70 outside 0..63"
    with pytest.raises(ValueError) as e:
        with vt.device("GPU:x"):
            pass
    assert str(e.value).startswith("Failed parsing device name: 'GPU:x'")
    with pytest.raises(ValueError) as e:
        vt.memory_stats("GPU:2")
    assert str(e.value) == ("vdev_torch_stats: PyTorch has allocated nothing on "
                            "/device:GPU:2")
    with pytest.raises(TypeError):
        vt.set_device(0, 1)


def test_use_vdev_allocator_says_why_it_cannot():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as e:
        vt.use_vdev_allocator({0: "GPU:1"})
    msg = str(e.value)
    if not hasattr(torch.cuda.memory, "CUDAPluggableAllocator"):
        assert msg == ("vdev.torch.use_vdev_allocator: PyTorch %s has no "
                       "torch.cuda.memory.CUDAPluggableAllocator (it came in 2.0)"
                       % torch.__version__)
    else:
        assert "sees no CUDA GPU" in msg or "refused the allocator" in msg


def test_stats_struct_matches_the_header():
    # ten uint64 fields, in the header's order
    assert ctypes.sizeof(vt.TorchStats) == 80
