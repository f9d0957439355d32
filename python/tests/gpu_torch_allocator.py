"""gpu_torch_allocator.py — vdev under a real PyTorch: PyTorch 2.0 or later
built with CUDA, a GPU, and vdev's CUDA plugin. ctest runs it as
python_gpu_torch_allocator; anywhere else it prints "SKIP: <why>" and exits
77, which ctest reports as skipped (never as passed).

It splits GPU 0 into logical GPUs of 1024 MiB and 512 MiB, installs vdev as
PyTorch's allocator with cuda:0 on vdev's GPU:1, and checks: PyTorch's
tensors come from GPU:1 (vdev's memory info sees them, and they compute
right); the 512 MiB limit holds (PyTorch raises its out-of-memory error and
goes on after it); a block freed on a side stream is reused on that stream,
and goes back for other streams once the stream has passed it; and every
block goes back when PyTorch lets go.
"""
import sys


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


try:
    import torch
except ImportError as e:
    skip("PyTorch is not installed (%s)" % e)
if not hasattr(getattr(torch.cuda, "memory", None), "CUDAPluggableAllocator"):
    skip("PyTorch %s has no torch.cuda.memory.CUDAPluggableAllocator (it came in 2.0); "
         "Debian 12's python3-torch is 1.13, CPU-only" % torch.__version__)
if not torch.cuda.is_available():
    skip("PyTorch %s sees no CUDA GPU (built with CUDA: %s)"
         % (torch.__version__, torch.version.cuda or "no"))

import vdev  # noqa: E402
import vdev.torch  # noqa: E402

MIB = 1 << 20
gpus = vdev.config.list_physical_devices("GPU")
if not gpus:
    skip("vdev sees no GPU (%s)" % vdev._lib.lib.vdev_gpu_absence_reason().decode())
LDC = vdev.config.LogicalDeviceConfiguration
vdev.config.set_logical_device_configuration(gpus[0], [LDC(memory_limit=1024),
                                                       LDC(memory_limit=512)])
vdev.torch.use_vdev_allocator({0: "GPU:1"})
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("FAIL: " + what)


def used():
    return vdev.config.experimental.get_memory_info("GPU:1")["current"]


x = torch.ones(MIB, device="cuda")  # 4 MiB
check(used() >= 4 * MIB, "vdev's GPU:1 holds PyTorch's tensor (%d bytes in use)" % used())
y = x * 2 + 1
torch.cuda.synchronize()
check(y.sum().item() == 3 * MIB, "PyTorch computes on vdev's memory")
check(vdev.config.experimental.get_memory_info("GPU:0")["current"] == 0, "GPU:0 untouched")

try:
    big = torch.empty(600 * MIB // 4, device="cuda")  # 600 MiB > 512 MiB
    check(False, "a 600 MiB tensor fit in a 512 MiB logical GPU")
except (RuntimeError, getattr(torch.cuda, "OutOfMemoryError", RuntimeError)) as e:
    check("out of memory" in str(e).lower() or "alloc" in str(e).lower(),
          "PyTorch's out-of-memory error: %s" % e)
check(vdev.torch.memory_stats("GPU:1")["n_failed"] >= 1, "the failure is counted")
z = torch.zeros(16 * MIB // 4, device="cuda")  # and it goes on
check(z.sum().item() == 0, "allocation after the failure")

side = torch.cuda.Stream()
with torch.cuda.stream(side):
    a = torch.ones(MIB, device="cuda")
    a.mul_(3)
    # Keep the stream busy (about 0.1 s), so that the block freed below is
    # still pending when b asks: without it a fast GPU is past the free
    # before the next allocation, the block goes back to vdev, and b gets
    # it from there, which says nothing of the reuse on the stream.
    torch.cuda._sleep(200 * 1000 * 1000)
    ptr = a.data_ptr()
    del a
    b = torch.empty(MIB, device="cuda")  # same stream: the same block at once
    check(b.data_ptr() == ptr, "a block freed on a stream is reused on it")
    del b
side.synchronize()
st = vdev.torch.memory_stats("GPU:1")
check(st["n_same_stream_reuses"] >= 1, "same-stream reuse counted (%r)" % st)

del x, y, z
torch.cuda.synchronize()
vdev.torch.empty_cache()
check(used() == 0, "everything back after PyTorch let go (%d bytes in use)" % used())
print("%s" % ("ok" if not failed else "%d checks failed" % failed))
sys.exit(1 if failed else 0)
