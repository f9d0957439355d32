"""DLPack: sharing tensors with numpy, PyTorch and others without copying.

``np.from_dlpack(t)`` and ``torch.from_dlpack(t)`` read a vdev tensor in
place (``Tensor.__dlpack__`` / ``__dlpack_device__``); ``vdev.from_dlpack(x)``
makes a CPU:0 tensor over the memory of any object with ``__dlpack__``, or of
a DLPack capsule (``torch.utils.dlpack.to_dlpack``); its ``device=`` and
``copy=`` are the array API's (2023.12). Tensors on the CPU and on
simulated GPUs, whose memory the host reads, go out as CPU memory (kDLCPU);
tensors on CUDA GPUs as kDLCUDA.

Lifetimes follow the protocol: the capsule is named "dltensor" until a
consumer takes it and renames it "used_dltensor"; an export keeps the vdev
tensor's memory until the consumer's array goes (its deleter runs), and an
import keeps the producer's array alive until the vdev tensor goes. A capsule
nobody consumed runs its deleter when it is collected. ``vdev.shutdown()``
refuses to run while exports are alive, since it frees their memory.
"""

import ctypes

from . import _lib
from ._lib import lib
from ._device import on_device_of
from ._tensor import Tensor

__all__ = ["device_of", "from_dlpack", "kDLCPU", "kDLCUDA", "live_exports", "to_capsule",
           "to_dlpack"]

kDLCPU, kDLCUDA = 1, 2

# Python's capsule API. Two handles: one takes Python objects, the other raw
# object pointers (the destructor is called while its capsule dies, when no
# new reference to it may be made).
_api = ctypes.PyDLL(None)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_raw = ctypes.PyDLL(None)
_raw.PyCapsule_IsValid.restype = ctypes.c_int
_raw.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_raw.PyCapsule_GetPointer.restype = ctypes.c_void_p
_raw.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# A capsule keeps its name's address: these buffers live as long as the process.
_DLTENSOR = ctypes.create_string_buffer(b"dltensor")
_USED = ctypes.create_string_buffer(b"used_dltensor")


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dtype_code", ctypes.c_uint8), ("dtype_bits", ctypes.c_uint8),
                ("dtype_lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


def _delete(managed, _cls=_DLManagedTensor, _deleter=_DELETER):
    m = _cls.from_address(managed)
    if m.deleter:
        _deleter(m.deleter)(managed)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule, _raw=_raw, _name=_DLTENSOR, _delete=_delete):
    # Unconsumed (still "dltensor"): the export is ours to delete. (What it
    # uses is bound here, so it works while the interpreter tears modules down.)
    if _raw.PyCapsule_IsValid(capsule, _name):
        _delete(_raw.PyCapsule_GetPointer(capsule, _name))


# A capsule may outlive this module (collected at exit): its destructor and
# names must outlive every capsule, so they hold one reference that nothing
# drops.
for _o in (_capsule_destructor, _DLTENSOR, _USED):
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_o))
del _o


def to_capsule(t):
    """A DLPack capsule over t's memory (``t.__dlpack__()``)."""
    m = ctypes.c_void_p()
    _lib.check(lib.vdev_tensor_to_dlpack(t._handle, ctypes.byref(m)))
    try:
        return _api.PyCapsule_New(m.value, _DLTENSOR,
                                  ctypes.cast(_capsule_destructor, ctypes.c_void_p).value)
    except BaseException:
        _delete(m.value)
        raise


def check_copy(copy):
    """The array API's ``copy`` (of ``__dlpack__`` and ``from_dlpack``):
    True, False or None, else a TypeError."""
    if copy is not None and not isinstance(copy, bool):
        raise TypeError("copy must be True, False or None, not %s" % type(copy).__name__)


def is_int_pair(v):
    """Whether v is a tuple of two ints (bool is not one), as ``max_version``
    and ``dl_device`` are (an IntEnum counts)."""
    return isinstance(v, tuple) and len(v) == 2 and all(
        isinstance(x, int) and not isinstance(x, bool) for x in v)


def copy_of(t):
    """A copy of t on t's device, which no tape records (``__dlpack__(copy=True)``):
    vdev_stop_gradient, which reads t as a constant."""
    with on_device_of(t):
        return Tensor(_lib.made(lib.vdev_stop_gradient(t._handle)))


def device_of(t):
    """(device type, device id), as ``__dlpack_device__``: (kDLCPU, 0) for the
    CPU and simulated GPUs, (kDLCUDA, ordinal) for CUDA GPUs."""
    from .config import _logical_table
    name = lib.vdev_tensor_device(t._handle)
    if name is None:
        raise _lib.error()
    backend, physical = _logical_table().get(name.decode(), ("cpu", 0))
    if backend == "cuda":
        return (kDLCUDA, physical)
    return (kDLCPU, 0)


# Device types whose memory the host reads: the ones vdev_tensor_from_dlpack
# imports (kDLCPU, kDLCUDAHost, kDLCUDAManaged).
_HOST_READABLE = (kDLCPU, 3, 13)
_CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def _refuse_device(device_type, device_id):
    """vdev_tensor_from_dlpack's own error for memory on (device_type,
    device_id), asked before the producer builds a capsule: a description
    of no memory on that device, which the C call refuses before it reads
    anything else (and leaves as it was)."""
    probe = _DLManagedTensor()
    probe.dl_tensor.device_type = device_type
    probe.dl_tensor.device_id = device_id
    if lib.vdev_tensor_from_dlpack(ctypes.addressof(probe)):  # pragma: no cover
        raise AssertionError("vdev_tensor_from_dlpack took memory on device type %d"
                             % device_type)
    raise _lib.error()


def _imports_by_copy(managed):
    """Whether vdev_tensor_from_dlpack copies the memory `managed` describes
    (strided, or not 4-byte aligned) instead of wrapping it: its own test."""
    d = _DLManagedTensor.from_address(managed).dl_tensor
    if not 0 <= d.ndim <= 4:
        return False  # refused by the import anyway
    shape = (ctypes.c_int64 * d.ndim).from_address(d.shape) if d.ndim else ()
    numel = 1
    for n in shape:
        numel *= n
    if not numel:
        return False
    if (d.data + d.byte_offset) % 4:
        return True
    if d.strides:
        strides = (ctypes.c_int64 * d.ndim).from_address(d.strides)
        want = 1
        for i in reversed(range(d.ndim)):
            if shape[i] > 1 and strides[i] != want:
                return True
            want *= shape[i]
    return False


def _target_device(device):
    """The long name of the device `device` names (any name ``vdev.device``
    takes, a LogicalDevice, a DeviceSpec), with vdev.device's errors."""
    from ._device import current_device, device as scope
    with scope(device):
        return current_device()


def from_dlpack(x, /, *, device=None, copy=None):
    """A tensor over x's memory (the array API's ``from_dlpack``, 2023.12):
    x has ``__dlpack__`` (numpy arrays, PyTorch tensors, vdev tensors) or is
    a DLPack capsule. On CPU:0 without a copy when the memory is compact and
    aligned float32/int32 host memory; strided memory is copied. Other
    dtypes, more than 4 dimensions and memory the host cannot read raise
    UnimplementedError (memory on a device the host cannot read is refused
    from ``__dlpack_device__()``, before x builds a capsule); a DLPack 1.x
    capsule ("dltensor_versioned") is a BufferError.

    ``device``: None or CPU:0 (any name ``vdev.device`` takes) is CPU:0;
    another device gets a copy made there, which ``copy=False`` refuses
    (ValueError, as the standard says for a device that needs a copy).
    ``copy``: True, a copy that vdev owns (the producer's memory is let go at
    once); False, never a copy: memory that must be copied (strided,
    unaligned) is a BufferError and x's capsule stays unconsumed; None, a
    copy only where needed."""
    check_copy(copy)
    target = _CPU0 if device is None else _target_device(device)
    if target != _CPU0 and copy is False:
        raise ValueError("from_dlpack: device %r needs a copy (vdev imports host memory onto "
                         "CPU:0), which copy=False refuses" % (device,))
    if hasattr(x, "__dlpack__"):
        # the device first, as the standard recommends: memory vdev cannot
        # import is refused before the producer builds a capsule for it
        if hasattr(x, "__dlpack_device__"):
            device_type, device_id = x.__dlpack_device__()
            if int(device_type) not in _HOST_READABLE:
                _refuse_device(int(device_type), int(device_id))
        capsule = x.__dlpack__()
    elif type(x).__name__ == "PyCapsule":
        capsule = x
    else:
        raise TypeError("from_dlpack takes an object with __dlpack__ (a numpy array, a PyTorch "
                        "tensor, a vdev tensor) or a DLPack capsule, not %s" % type(x).__name__)
    if not _api.PyCapsule_IsValid(capsule, _DLTENSOR):
        if _api.PyCapsule_GetName(capsule) in (b"dltensor_versioned",
                                               b"used_dltensor_versioned"):
            raise BufferError("from_dlpack: a DLPack 1.x capsule (\"dltensor_versioned\"); "
                              "vdev reads DLPack 0.x \"dltensor\" capsules (its producer "
                              "gives one to __dlpack__() without max_version)")
        raise ValueError("from_dlpack: the capsule is not a DLPack tensor, or was consumed "
                         "already (a capsule can be used once)")
    managed = _api.PyCapsule_GetPointer(capsule, _DLTENSOR)
    by_copy = _imports_by_copy(managed)
    if copy is False and by_copy:
        raise BufferError("from_dlpack: copy=False, but the memory is strided or not 4-byte "
                          "aligned, which vdev imports by copying it")
    # Marked consumed before vdev may take it, so that the capsule never
    # deletes what vdev owns: an exception landing between the two steps
    # (a KeyboardInterrupt just after vdev's call returned) used to leave the
    # capsule named "dltensor", and its destructor ran the deleter vdev had
    # run (a double free). Now such an interruption can at worst leak it.
    _api.PyCapsule_SetName(capsule, _USED)
    h = lib.vdev_tensor_from_dlpack(managed)
    if not h:
        _api.PyCapsule_SetName(capsule, _DLTENSOR)  # refused: still the capsule's
        raise _lib.error()
    t = Tensor(h)
    if target != _CPU0:
        # a copy between devices: vdev_identity in the target's scope (the
        # import is no tensor a tape watches); the import, and the
        # producer's memory it holds, then go
        return t._copy_to(target)
    return copy_of(t) if copy and not by_copy else t


def to_dlpack(t):
    """A DLPack capsule over t (``tf.experimental.dlpack.to_dlpack``): t is
    a vdev tensor (or Variable), else TensorFlow's InvalidArgumentError."""
    if not isinstance(t, Tensor):
        from .errors import InvalidArgumentError
        raise InvalidArgumentError("The argument to `to_dlpack` must be a vdev tensor, not "
                                   "Python object", "VDEV_ERR_INVALID_ARG")
    return to_capsule(t)


def live_exports():
    """Exports whose consumer has not let go."""
    return int(lib.vdev_dlpack_live_exports())
