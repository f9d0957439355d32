"""Device configuration, as ``tf.config``: physical devices, visibility,
memory growth, logical devices with memory limits (in MiB, as TensorFlow),
soft placement, and the memory queries (also under ``experimental``).

Everything before start-up configures vdev; start-up (``vdev.init()``, the
first op, or ``list_logical_devices``) freezes it: a later call that would
change something raises ``RuntimeError`` with TensorFlow's message ("Physical
devices cannot be modified after being initialized", "Visible devices ...",
"Virtual devices ..."); one that repeats what is in force does nothing (for
memory growth, as TensorFlow: only a repeat of what code set). Bad
arguments raise ``ValueError`` in TensorFlow's words ("Unrecognized device:
..."). The state lives in the C library, so C code and the environment
(VDEV_LOGICAL_DEVICES, VDEV_MEMORY_GROWTH, ...) see the same configuration;
code wins where both speak.

Where vdev differs from TensorFlow (README, "Where vdev differs"): growth may
differ between GPUs and may be combined with logical devices (each grows up
to its limit), limits beyond a card's budget fail at start-up, and memory
queries work on CPUs too. A logical GPU may also have a floor (memory
guaranteed to it) and a memory priority (LogicalDeviceConfiguration's
memory_floor and memory_priority), which change at run time with
``experimental.set_memory_limits`` and ``set_memory_priority``.
"""

import collections
import ctypes
import math
import numbers

import numpy as np

from .. import _lib, errors
from .._lib import lib

PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])


class LogicalDeviceConfiguration(
        collections.namedtuple("LogicalDeviceConfiguration",
                               ["memory_limit", "experimental_priority",
                                "experimental_device_ordinal", "memory_floor",
                                "memory_priority"])):
    """One logical device of a split physical device, as TensorFlow's:
    memory_limit in MiB (for GPUs; absent for CPUs). vdev's own, for sharing
    a card (README, "Sharing a card"), also in MiB:

    - memory_floor: memory guaranteed to the device (its card keeps it
      aside). None: the whole memory_limit, a fixed share, as in TensorFlow;
      0: nothing guaranteed, the device takes shared memory up to its limit.
    - memory_priority: 'low', 'normal' (None), 'high' or 'critical': who may
      take whose cached memory when the card runs short, and the priority of
      the device's stream.

    With memory_floor or memory_priority, memory_limit may be None: the
    card's budget. vdev's priorities are named, not CUDA's signed numbers,
    and it has no ordinals: setting experimental_priority or
    experimental_device_ordinal is a ValueError."""

    def __new__(cls, memory_limit=None, experimental_priority=None,
                experimental_device_ordinal=None, memory_floor=None, memory_priority=None):
        return super().__new__(cls, memory_limit, experimental_priority,
                               experimental_device_ordinal, memory_floor, memory_priority)


# enum vdev_priority (DEFAULT = 0 reads as normal)
PRIORITIES = {"low": 1, "normal": 2, "high": 3, "critical": 4}
PRIORITY_NAMES = {0: "normal", 1: "low", 2: "normal", 3: "high", 4: "critical"}


def priority_code(priority, what="memory_priority"):
    """enum vdev_priority of 'low', 'normal', 'high' or 'critical' (any case)."""
    if isinstance(priority, str) and priority.lower() in PRIORITIES:
        return PRIORITIES[priority.lower()]
    raise ValueError("%s must be 'low', 'normal', 'high' or 'critical', not %r"
                     % (what, priority))


def _mib(value, what):
    """A size in MiB (TensorFlow's unit) as bytes, whole MiB as TensorFlow.
    vdev holds sizes in 64 bits: a size of 2**44 MiB or more is a ValueError,
    as set_memory_limits says of bytes."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0
            or value == math.inf):
        raise ValueError("%s must be a number of MiB >= 0, not %r" % (what, value))
    b = int(value) << 20
    if b >= 1 << 64:
        raise ValueError("%s must be below 2**64 bytes: %r MiB is %d bytes"
                         % (what, value, b))
    return b


_VALUE = {_lib.INVALID_ARG: ValueError, _lib.NOT_FOUND: ValueError}
_TYPES = ["CPU", "GPU"]


def _physical():
    n = ctypes.c_int(0)
    _lib.check(lib.vdev_list_physical_devices(None, 0, ctypes.byref(n)))
    cap = n.value
    arr = (_lib.PhysicalDeviceC * max(cap, 1))()
    _lib.check(lib.vdev_list_physical_devices(arr, cap, ctypes.byref(n)))
    return arr[:min(cap, n.value)]


def list_physical_devices(device_type=None):
    """[PhysicalDevice('/physical_device:CPU:0', 'CPU'), PhysicalDevice(
    '/physical_device:GPU:0', 'GPU'), ...]: every device, visible or not.
    Does not start the runtime."""
    out = [PhysicalDevice(d.name.decode(), _TYPES[d.type]) for d in _physical()]
    return [d for d in out if device_type is None or d.device_type == device_type]


def _check_physical(dev):
    if dev not in list_physical_devices():
        raise ValueError("Unrecognized device: %s" % repr(dev))
    return dev.name.encode()


def _gpu_index(dev):
    return int(dev.name.rsplit(":", 1)[1])


def get_visible_devices(device_type=None):
    """The visible physical devices: CPU:0, then the visible GPUs in the
    order they were given."""
    n = ctypes.c_int(0)
    _lib.check(lib.vdev_config_get_visible_devices(None, 0, ctypes.byref(n)))
    cap = n.value
    arr = (ctypes.c_int * max(cap, 1))()
    _lib.check(lib.vdev_config_get_visible_devices(arr, cap, ctypes.byref(n)))
    phys = list_physical_devices()
    gpus = {_gpu_index(d): d for d in phys if d.device_type == "GPU"}
    out = [d for d in phys if d.device_type == "CPU"] + [gpus[i] for i in arr[:cap] if i in gpus]
    return [d for d in out if device_type is None or d.device_type == device_type]


def set_visible_devices(devices, device_type=None):
    """Makes only `devices` (of device_type, when given) visible. Logical GPUs
    are numbered over the visible GPUs in physical order. The CPU stays
    visible whatever the list says."""
    if not isinstance(devices, list):
        devices = [devices]
    phys = list_physical_devices()
    for d in devices:
        if d not in phys:
            raise ValueError("Unrecognized device: %s" % repr(d))
        if device_type is not None and d.device_type != device_type:
            raise ValueError("Unrecognized device: %s" % repr(d))
    if device_type not in (None, "GPU") and not any(d.device_type == "GPU" for d in devices):
        return  # only other types named: the GPUs stay as they are
    idx = [_gpu_index(d) for d in devices if d.device_type == "GPU"]
    arr = (ctypes.c_int * max(len(idx), 1))(*idx)
    _lib.check(lib.vdev_config_set_visible_devices(arr, len(idx)), _VALUE)


def list_logical_devices(device_type=None):
    """[LogicalDevice('/device:CPU:0', 'CPU'), LogicalDevice('/device:GPU:0',
    'GPU'), ...]. Starts the runtime (freezes the configuration)."""
    out = [LogicalDevice(d.name.decode(), _TYPES[d.type]) for d in _logical()]
    return [d for d in out if device_type is None or d.device_type == device_type]


def _logical():
    n = ctypes.c_int(0)
    _lib.check(lib.vdev_list_logical_devices(None, 0, ctypes.byref(n)))
    cap = n.value
    arr = (_lib.LogicalDeviceC * max(cap, 1))()
    _lib.check(lib.vdev_list_logical_devices(arr, cap, ctypes.byref(n)))
    return arr[:min(cap, n.value)]


def _logical_table():
    """{'/device:GPU:0': (backend, physical index), ...} of the running runtime."""
    return {d.name.decode(): (d.backend.decode(), d.physical_index) for d in _logical()}


def _bool_flag(enable, fn):
    """enable as a bool: True, False, numpy's bool_, or the integers 0 and 1.
    TensorFlow keeps the value and puts it in its GPUOptions proto at
    start-up, whose bool field takes any integer (protobuf's bool checker
    takes what has __index__) and refuses strings; vdev takes 0 and 1 of the
    integers (another number is more likely a mistake than a wish for
    growth) and refuses the rest at once: bool('false') is True, and None,
    which TensorFlow reads as "not set", cannot be set in vdev (growth that
    was never set reads None from get_memory_growth). The other switches
    (set_soft_device_placement, vdev.debugging.set_log_device_placement)
    take the same values, as TensorFlow's go into proto bools too."""
    if isinstance(enable, (bool, np.bool_)):
        return bool(enable)
    if isinstance(enable, numbers.Integral) and enable in (0, 1):
        return bool(enable)
    raise TypeError("%s takes a bool (True or False), not %r" % (fn, enable))


def set_memory_growth(device, enable):
    """Growth (on: memory is taken as it is needed) or preallocation (off)
    for one physical GPU. Unlike TensorFlow, growth may differ between GPUs
    and combines with logical devices. enable is a bool (or 0 or 1); another
    value (None, a string) is a TypeError."""
    name = _check_physical(device)
    if device.device_type != "GPU":
        raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
    flag = _bool_flag(enable, "set_memory_growth")
    _lib.check(lib.vdev_config_set_memory_growth(name, flag), _VALUE)


def get_memory_growth(device):
    """What code set: True, False, or None (never set)."""
    name = _check_physical(device)
    out = ctypes.c_int(-1)
    _lib.check(lib.vdev_config_get_memory_growth(name, ctypes.byref(out)), _VALUE)
    return None if out.value < 0 else bool(out.value)


def set_logical_device_configuration(device, logical_devices):
    """Splits a physical device into logical devices: GPUs with
    LogicalDeviceConfiguration(memory_limit=MiB) each (and vdev's
    memory_floor, memory_priority), the CPU with LogicalDeviceConfiguration()
    each. An empty list removes the split: one logical device with the
    default budget, whatever VDEV_LOGICAL_DEVICES says (code wins)."""
    name = _check_physical(device)
    if isinstance(logical_devices, LogicalDeviceConfiguration):
        raise TypeError("set_logical_device_configuration takes a list of "
                        "LogicalDeviceConfiguration, not one: pass [%r]" % (logical_devices,))
    if isinstance(logical_devices, (str, bytes)) or not hasattr(logical_devices, "__iter__"):
        raise TypeError("set_logical_device_configuration takes a list of "
                        "LogicalDeviceConfiguration, not %r" % (logical_devices,))
    logical_devices = list(logical_devices)
    for v in logical_devices:
        if not isinstance(v, LogicalDeviceConfiguration):
            raise TypeError("set_logical_device_configuration takes a list of "
                            "LogicalDeviceConfiguration; %r is not one" % (v,))
    if device.device_type == "CPU":
        for v in logical_devices:
            if v.memory_limit is not None:
                raise ValueError("Setting memory limit on CPU virtual devices is currently "
                                 "not supported")
            if v.experimental_priority is not None:
                raise ValueError("Setting experimental_priority on CPU virtual  devices is "
                                 "currently not supported")
            if v.experimental_device_ordinal is not None:
                raise ValueError("Setting experimental_device_ordinal on CPU virtual  devices "
                                 "is currently not supported")
            if v.memory_floor is not None or v.memory_priority is not None:
                raise ValueError("Setting memory_floor or memory_priority on CPU virtual "
                                 "devices is not supported (logical CPUs share the host)")
        _lib.check(lib.vdev_config_set_logical_devices(name, None, len(logical_devices)), _VALUE)
        _note_split(name, logical_devices)
        return
    if device.device_type != "GPU":
        raise ValueError("Virtual devices are not supported for %s" % device.device_type)
    governed = any(v.memory_floor is not None or v.memory_priority is not None
                   for v in logical_devices)
    cfg = (_lib.LogicalDeviceConfigC * max(len(logical_devices), 1))()
    for i, v in enumerate(logical_devices):
        extras = v.memory_floor is not None or v.memory_priority is not None
        if v.memory_limit is None and not extras:
            raise ValueError("Setting memory limit is required for GPU virtual devices")
        if v.experimental_priority is not None or v.experimental_device_ordinal is not None:
            raise ValueError("vdev takes no numbered priorities or ordinals for logical "
                             "devices (experimental_priority, experimental_device_ordinal); "
                             "vdev's priority, of memory and of the stream, is memory_priority")
        ceiling = 0 if v.memory_limit is None else _mib(v.memory_limit, "memory_limit")
        if v.memory_limit is not None and ceiling == 0:
            # 0 would read as "the card's budget" below: only None means that
            cut = "" if v.memory_limit == 0 else ", 0 once cut to whole MiB as TensorFlow does"
            raise ValueError("logical device %d of %s has a memory limit of %r MiB%s: a limit "
                             "is at least 1 MiB" % (i, name.decode(), v.memory_limit, cut))
        floor = ceiling if v.memory_floor is None else _mib(v.memory_floor, "memory_floor")
        prio = 0 if v.memory_priority is None else priority_code(v.memory_priority)
        cfg[i].floor_bytes, cfg[i].ceiling_bytes, cfg[i].priority = floor, ceiling, prio
    if not governed:  # TensorFlow's form: fixed shares
        arr = (ctypes.c_uint64 * max(len(logical_devices), 1))(
            *[cfg[i].ceiling_bytes for i in range(len(logical_devices))])
        _lib.check(lib.vdev_config_set_logical_devices(name, arr, len(logical_devices)), _VALUE)
        _note_split(name, logical_devices)
        return
    _lib.check(lib.vdev_config_set_logical_devices_ex(name, cfg, len(logical_devices)), _VALUE)
    _note_split(name, logical_devices)


# The physical devices whose split code removed (set_logical_device_configuration
# with []): TensorFlow's getter then returns the [] it stored, where vdev's C
# getter reports no split, as for a device never configured. vdev.shutdown()
# forgets them with the rest of the configuration (_forget_code_settings).
_unsplit = set()


def _note_split(name, logical_devices):
    if logical_devices:
        _unsplit.discard(name)
    else:
        _unsplit.add(name)


def _forget_code_settings():
    """After vdev.shutdown(), which forgets code's configuration."""
    _unsplit.clear()
    errors._strict_by = "placement"  # the policy is forgotten too


def _to_mib(b):
    return b >> 20 if b % (1 << 20) == 0 else b / (1 << 20)


def get_logical_device_configuration(device):
    """The split of a physical device (code, else VDEV_LOGICAL_DEVICES) as a
    list of LogicalDeviceConfiguration, or None. Each reads back in the
    shortest form that means the same: a fixed share as
    LogicalDeviceConfiguration(memory_limit=MiB); a floor below the limit as
    memory_floor; a priority other than normal as memory_priority; a limit
    that is the card's budget as None before start-up (after it, the budget
    in MiB). After code removed the split (an empty list), [], as
    TensorFlow returns what was set."""
    name = _check_physical(device)
    n = ctypes.c_int(0)
    _lib.check(lib.vdev_config_get_logical_devices_ex(name, None, 0, ctypes.byref(n)), _VALUE)
    if n.value == 0:
        return [] if name in _unsplit else None
    cap = n.value
    arr = (_lib.LogicalDeviceConfigC * cap)()
    _lib.check(lib.vdev_config_get_logical_devices_ex(name, arr, cap, ctypes.byref(n)), _VALUE)
    if device.device_type == "CPU":
        return [LogicalDeviceConfiguration() for _ in range(cap)]
    out = []
    for d in arr[:cap]:
        limit = None if d.ceiling_bytes == 0 else _to_mib(d.ceiling_bytes)
        fixed = d.floor_bytes == d.ceiling_bytes and d.ceiling_bytes
        floor = None if fixed else _to_mib(d.floor_bytes)
        prio = PRIORITY_NAMES.get(d.priority, "normal")
        out.append(LogicalDeviceConfiguration(
            memory_limit=limit, memory_floor=floor,
            memory_priority=None if prio == "normal" else prio))
    return out


def set_soft_device_placement(enabled):
    """A device scope naming a missing device runs its ops on GPU:0 (else
    CPU:0) with a warning instead of failing. Off by default in vdev.
    enabled is a bool (or 0 or 1); another value ('false', None) is a
    TypeError, as set_memory_growth's."""
    lib.vdev_config_set_soft_device_placement(_bool_flag(enabled, "set_soft_device_placement"))


def get_soft_device_placement():
    """Whether soft placement is on; before start-up, whether it will be
    (code's setting, else VDEV_SOFT_DEVICE_PLACEMENT's)."""
    return bool(_lib.setting(lib.vdev_config_get_soft_device_placement))


from . import experimental  # noqa: E402
from .experimental import (get_memory_info, get_memory_usage, reset_memory_stats,  # noqa: E402
                           get_device_details)

__all__ = ["PhysicalDevice", "LogicalDevice", "LogicalDeviceConfiguration",
           "list_physical_devices", "get_visible_devices", "set_visible_devices",
           "list_logical_devices", "set_memory_growth", "get_memory_growth",
           "set_logical_device_configuration", "get_logical_device_configuration",
           "set_soft_device_placement", "get_soft_device_placement", "get_memory_info",
           "get_memory_usage", "reset_memory_stats", "get_device_details", "experimental"]
