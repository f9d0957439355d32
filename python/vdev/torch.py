"""vdev under PyTorch: ``use_vdev_allocator()`` makes every CUDA tensor of
the process take its memory from vdev's logical devices, through
libvdev-torch-alloc.so and PyTorch's pluggable allocator (PyTorch 2.0 or
later, built with CUDA)::

    import vdev, vdev.torch
    gpu = vdev.config.list_physical_devices('GPU')[0]
    vdev.config.set_logical_device_configuration(
        gpu, [vdev.config.LogicalDeviceConfiguration(memory_limit=4096),
              vdev.config.LogicalDeviceConfiguration(memory_limit=2048)])
    vdev.torch.use_vdev_allocator({0: 'GPU:1'})   # cuda:0 gets at most 2 GiB
    x = torch.zeros(1024, device='cuda')          # from vdev's /device:GPU:1

PyTorch's limits: install it before the first CUDA allocation of the process
(afterwards PyTorch refuses), and it stays for the whole process; memory
PyTorch's libraries take outside the allocator (the CUDA context, cuBLAS and
cuDNN workspaces) is not counted. ``with vdev.torch.device('GPU:0'):`` sends
the calling thread's allocations to another logical device for a while, so
two models of one process can each have a hard limit on one card.
"""

import ctypes
import os

from . import _lib
from ._lib import lib as _vdev

_NAME = "libvdev-torch-alloc.so"


def library_path():
    """Where libvdev-torch-alloc.so is: beside the libvdev.so in use."""
    d = os.path.dirname(_lib.path)
    return os.path.join(d, _NAME) if d else _NAME


class TorchStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "allocated_bytes", "peak_allocated_bytes", "pending_bytes", "n_allocs", "n_allocs_total",
        "n_frees_total", "n_failed", "n_same_stream_reuses", "n_event_waits", "n_bad_frees")]


_alloc = []


def _lib_alloc():
    if not _alloc:
        a = ctypes.CDLL(library_path())
        a.vdev_torch_set_device.restype = ctypes.c_int
        a.vdev_torch_set_device.argtypes = [ctypes.c_int, ctypes.c_char_p]
        a.vdev_torch_push_device.restype = ctypes.c_int
        a.vdev_torch_push_device.argtypes = [ctypes.c_char_p]
        a.vdev_torch_pop_device.restype = ctypes.c_int
        a.vdev_torch_stats.restype = ctypes.c_int
        a.vdev_torch_stats.argtypes = [ctypes.c_char_p, ctypes.POINTER(TorchStats)]
        a.vdev_torch_last_error.restype = ctypes.c_char_p
        a.vdev_torch_empty_cache.restype = None
        a.vdev_torch_malloc.restype = ctypes.c_void_p
        a.vdev_torch_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        a.vdev_torch_free.restype = None
        a.vdev_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                                      ctypes.c_void_p]
        _alloc.append(a)
    return _alloc[0]


def _check(status):
    if status != _lib.OK:
        msg = _lib_alloc().vdev_torch_last_error().decode()
        raise ValueError(msg) if status in (_lib.INVALID_ARG, _lib.NOT_FOUND) else \
            _lib.errors.from_status(status, msg)


def set_device(torch_device, vdev_device):
    """PyTorch's CUDA device index → a vdev logical device ('GPU:1'); before
    its first allocation. Code wins over VDEV_TORCH_DEVICES."""
    _check(_lib_alloc().vdev_torch_set_device(int(torch_device), _lib.enc(vdev_device)))


class device:
    """``with vdev.torch.device('GPU:1'):`` the calling thread's CUDA
    allocations come from vdev's GPU:1, whatever PyTorch's device index."""

    def __init__(self, vdev_device):
        self._name = _lib.enc(vdev_device)

    def __enter__(self):
        _check(_lib_alloc().vdev_torch_push_device(self._name))
        return self

    def __exit__(self, *exc):
        _check(_lib_alloc().vdev_torch_pop_device())
        return False


def memory_stats(vdev_device):
    """What PyTorch holds on a vdev logical device: allocated_bytes (as
    asked), peak_allocated_bytes, pending_bytes (freed, waiting for their
    stream), n_allocs, n_allocs_total, n_frees_total, n_failed,
    n_same_stream_reuses, n_event_waits, n_bad_frees. vdev's own view of the
    device is vdev.config.experimental.get_memory_info."""
    st = TorchStats()
    _check(_lib_alloc().vdev_torch_stats(_lib.enc(vdev_device), ctypes.byref(st)))
    return {n: getattr(st, n) for n, _ in TorchStats._fields_}


def empty_cache():
    """Waits for the streams of blocks PyTorch freed and gives them back to vdev."""
    _lib_alloc().vdev_torch_empty_cache()


def use_vdev_allocator(devices=None):
    """Installs vdev as PyTorch's CUDA allocator. devices maps PyTorch's
    device indices to vdev logical devices ({0: 'GPU:1'}); unmapped indices
    N use vdev's GPU:N (or VDEV_TORCH_DEVICES). RuntimeError when PyTorch
    cannot take it (no CUDA, PyTorch before 2.0, CUDA memory already
    allocated), naming why. An allocation that fails raises RuntimeError in
    PyTorch ("CUDA out of memory (vdev): ..." with vdev's report)."""
    try:
        import torch
    except ImportError as e:
        raise RuntimeError("vdev.torch.use_vdev_allocator: PyTorch is not installed (%s)" % e)
    mem = getattr(torch.cuda, "memory", None)
    if mem is None or not hasattr(mem, "CUDAPluggableAllocator"):
        raise RuntimeError("vdev.torch.use_vdev_allocator: PyTorch %s has no "
                           "torch.cuda.memory.CUDAPluggableAllocator (it came in 2.0)"
                           % torch.__version__)
    if not torch.cuda.is_available():
        raise RuntimeError("vdev.torch.use_vdev_allocator: PyTorch %s sees no CUDA GPU "
                           "(a build without CUDA, or no GPU)" % torch.__version__)
    for k, v in (devices or {}).items():
        set_device(k, v)
    # PyTorch keeps a NULL from its allocation function as a block: the
    # raising one throws instead, which PyTorch turns into a RuntimeError.
    if not hasattr(_lib_alloc(), "vdev_torch_malloc_raising"):
        raise RuntimeError("vdev.torch.use_vdev_allocator: %s lacks vdev_torch_malloc_raising "
                           "(built without a C++ compiler): PyTorch would take a failed "
                           "allocation for a block" % library_path())
    alloc = mem.CUDAPluggableAllocator(library_path(), "vdev_torch_malloc_raising",
                                       "vdev_torch_free")
    try:
        mem.change_current_allocator(alloc)
    except RuntimeError as e:
        raise RuntimeError("vdev.torch.use_vdev_allocator: PyTorch refused the allocator (%s); "
                           "install it before the first CUDA allocation of the process" % e)
    _keep.append(alloc)
    return alloc


_keep = []
del _vdev
