"""``tf.config.experimental``: memory queries, memory growth, device details,
op determinism, the device policy, TensorFlow's older names for logical
devices (``VirtualDeviceConfiguration``, ``set_virtual_device_configuration``,
``get_virtual_device_configuration``); and vdev's own knobs (memory fraction,
handing cached memory back, the placement policy, and the run-time floors,
ceilings and priorities of ``_govern``).

``get_memory_info('GPU:0')`` returns TensorFlow's ``current`` and ``peak``
(bytes in use, 256-byte rounded, and its peak) plus vdev's keys: reserved,
peak_reserved, limit, largest_free_block, num_allocs (live), num_allocs_total,
num_failed_allocs, num_regions, fragmentation, largest_alloc_size. Device
names take every accepted form; a malformed or missing one is a ValueError in
TensorFlow's words.
"""

import ctypes
import warnings

from .. import _lib, errors
from .._lib import lib
from . import (PhysicalDevice, LogicalDeviceConfiguration, get_logical_device_configuration,
               get_memory_growth, get_visible_devices, list_logical_devices,
               list_physical_devices, set_logical_device_configuration, set_memory_growth,
               set_visible_devices, _VALUE)

from ._govern import (get_memory_limits, get_memory_pressure_callback,  # noqa: E402
                      get_memory_priority, set_memory_limits, set_memory_pressure_callback,
                      set_memory_priority)

VirtualDeviceConfiguration = LogicalDeviceConfiguration
# TensorFlow's older names, still its aliases under tf.config.experimental
set_virtual_device_configuration = set_logical_device_configuration
get_virtual_device_configuration = get_logical_device_configuration


def get_memory_info(device):
    """The device's memory, as ``tf.config.experimental.get_memory_info``:
    a dict of bytes with TensorFlow's ``current`` and ``peak`` and vdev's
    ``reserved``, ``peak_reserved``, ``limit``, ``largest_free_block``,
    ``num_allocs``, ``num_allocs_total``, ``num_failed_allocs``,
    ``num_regions``, ``fragmentation`` (0 to 1) and ``largest_alloc_size``.
    An unknown device is a ValueError."""
    mi = _lib.MemoryInfoC()
    _lib.check(lib.vdev_memory_info(_lib.enc(device), ctypes.byref(mi)), _VALUE)
    return _memory_info_dict(mi)


def _memory_info_dict(mi):
    return {"current": mi.bytes_in_use, "peak": mi.peak_bytes_in_use,
            "reserved": mi.bytes_reserved, "peak_reserved": mi.peak_bytes_reserved,
            "limit": mi.bytes_limit, "largest_free_block": mi.largest_free_block,
            "num_allocs": mi.n_allocs, "num_allocs_total": mi.n_allocs_total,
            "num_failed_allocs": mi.n_failed_allocs, "num_regions": mi.n_regions,
            "fragmentation": mi.fragmentation, "largest_alloc_size": mi.largest_alloc_size}


def get_memory_usage(device):
    """Bytes in use. Deprecated, as in TensorFlow: says so with a
    DeprecationWarning and gives get_memory_info(device)['current']."""
    warnings.warn("get_memory_usage is deprecated and will be removed in a future version; "
                  "use vdev.config.experimental.get_memory_info(device)['current'] instead",
                  DeprecationWarning, stacklevel=2)
    return get_memory_info(device)["current"]


def reset_memory_stats(device):
    """peak := current, largest_alloc_size := 0 (and the reserved peak)."""
    _lib.check(lib.vdev_memory_reset_peak(_lib.enc(device)), _VALUE)


def release_cached_memory(device):
    """vdev's own: waits for the device's queued work, hands every empty
    region back (growth mode), and returns how many bytes."""
    out = ctypes.c_uint64(0)
    _lib.check(lib.vdev_memory_release_cached(_lib.enc(device), ctypes.byref(out)), _VALUE)
    return out.value


def get_device_details(device):
    """{'device_name': 'Simulated GPU', 'compute_capability': (8, 0)} for a
    GPU, {} for the CPU."""
    if not isinstance(device, PhysicalDevice):
        raise ValueError("device must be a tf.config.PhysicalDevice, but got: %s" % (device,))
    if device not in list_physical_devices():
        raise ValueError("The PhysicalDevice must be one obtained from calling "
                         "`tf.config.list_physical_devices`, but got: %s" % (device,))
    d = _lib.DeviceDetailsC()
    _lib.check(lib.vdev_device_details(device.name.encode(), ctypes.byref(d)), _VALUE)
    if not d.device_name:
        return {}
    return {"device_name": d.device_name.decode(), "compute_capability": (d.cc_major, d.cc_minor)}


def set_memory_fraction(fraction, device=None):
    """vdev's own (TensorFlow's per_process_gpu_memory_fraction): cap a
    physical GPU (None: every GPU) at fraction of its total memory; 0 removes
    the cap."""
    name = None
    if device is not None:
        if device not in list_physical_devices("GPU"):
            raise ValueError("Unrecognized device: %s" % repr(device))
        name = device.name.encode()
    _lib.check(lib.vdev_config_set_memory_fraction(name, float(fraction)), _VALUE)


def enable_op_determinism():
    """Every op and collective gives the same bits run to run, on every
    backend, however many threads run host kernels (vdev_config_set_deterministic).
    Takes effect at once, before or after start-up; code wins over
    VDEV_DETERMINISTIC=1; vdev.shutdown() forgets it (the next start-up puts
    VDEV_DETERMINISTIC's value in force, off where unset)."""
    lib.vdev_config_set_deterministic(True)


def disable_op_determinism():
    """vdev's own (TensorFlow's switch cannot be turned off): ops may again
    split their work by the number of threads."""
    lib.vdev_config_set_deterministic(False)


def is_op_determinism_enabled():
    """Before start-up, whether it will be (code's setting, else
    VDEV_DETERMINISTIC's)."""
    return bool(_lib.setting(lib.vdev_config_get_deterministic))


# vdev's placement policies (vdev_placement_policy): 'copy' and 'strict'
# place an unscoped op by its inputs and copy an input on another device or
# refuse it; 'tf' places it on the default device and copies.
_COPY, _STRICT, _TF = 0, 1, 2
_POLICIES = (None, "silent", "explicit")
# TensorFlow's policies that vdev cannot honour: what each means there, and
# what to use instead.
_UNSUPPORTED_POLICIES = {
    "warn": ("copies an input on another device with a warning for each copy; vdev copies "
             "without one. Use 'silent' (the copies are counted: "
             "vdev.placement.bytes_copied() and vdev.placement.audit() list them) or "
             "'explicit' (a copy is an error)"),
    "silent_for_int32": ("copies int32 inputs and refuses other ones; vdev's policy does not "
                         "depend on the dtype. Use 'explicit' (every copy is an error: copy "
                         "int32 tensors yourself with vdev.identity or .gpu(i)) or 'silent'"),
}


def set_device_policy(device_policy):
    """What happens to an input on another device than its op, as in
    TensorFlow, where the policy never decides where an op runs: 'silent'
    (None) copies it (vdev's 'copy', or 'tf' where that placement rule is in
    force, which it keeps); 'explicit' makes it an error (vdev's 'strict').
    Setting the policy in force changes nothing. 'explicit' under vdev's 'tf'
    placement rule is a ValueError: vdev's only policy that refuses copies
    places unscoped ops by their inputs. TensorFlow's 'warn' and
    'silent_for_int32' are ValueErrors saying that vdev does not support them
    and what to use instead: vdev copies without a per-copy warning, and its
    policy does not depend on the dtype."""
    if isinstance(device_policy, str) and device_policy in _UNSUPPORTED_POLICIES:
        raise ValueError("vdev does not support TensorFlow's device policy %r, which %s"
                         % (device_policy, _UNSUPPORTED_POLICIES[device_policy]))
    if device_policy not in _POLICIES:
        raise ValueError("Not a valid device policy: %r" % (device_policy,))
    try:
        now = _lib.setting(lib.vdev_get_placement_policy)
    except errors.OpError:  # a malformed VDEV_PLACEMENT: code's setting overrides it
        now = None
    if device_policy == "explicit":
        if now == _TF:
            raise ValueError("The device policy 'explicit' cannot be combined with vdev's 'tf' "
                             "placement rule, which is in force: vdev's only policy that "
                             "refuses copies, 'strict', places unscoped ops by their inputs "
                             "rather than on the default device. Choose it with "
                             "vdev.placement.set_policy('strict')")
        want = _STRICT
    else:
        want = _COPY if now in (None, _STRICT) else now
    if want != now:
        _lib.check(lib.vdev_set_placement_policy(want))
    errors._strict_by = "device_policy"  # a strict error's advice names this call


def get_device_policy():
    """'silent' or 'explicit' ('silent' also under vdev's 'tf' placement rule)."""
    return "explicit" if _lib.setting(lib.vdev_get_placement_policy) == 1 else "silent"


__all__ = ["get_memory_info", "get_memory_usage", "reset_memory_stats", "release_cached_memory",
           "get_device_details", "set_memory_fraction", "enable_op_determinism",
           "disable_op_determinism", "is_op_determinism_enabled", "set_device_policy",
           "get_device_policy", "set_memory_growth", "get_memory_growth", "set_visible_devices",
           "get_visible_devices", "list_physical_devices", "list_logical_devices",
           "set_logical_device_configuration", "get_logical_device_configuration",
           "set_virtual_device_configuration", "get_virtual_device_configuration",
           "VirtualDeviceConfiguration", "get_memory_limits", "set_memory_limits",
           "set_memory_priority", "get_memory_priority", "set_memory_pressure_callback",
           "get_memory_pressure_callback"]
