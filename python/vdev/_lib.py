"""The shared library under the package: finding libvdev.so, the C
prototypes, and turning a failed call into a Python exception.

libvdev.so is looked for, in order: at the path in VDEV_LIBRARY; beside the
package, where ``cmake --install`` put both (``_install.py``, written at
install time, holds the library folder relative to the package); then by the
system loader's search (``libvdev.so.0``: ldconfig's cache, LD_LIBRARY_PATH).
A library that loads but lacks a function the package binds (not libvdev,
or another version of it) does not do either: the ImportError names each
path tried and why it would not do.
The C library is loaded with ctypes.CDLL, which releases the GIL during every
call, so threads of Python run vdev calls side by side.

Handles (tensors, tapes, optimizers) are opaque integers that vdev checks on
every use: a freed or stale one is an error, never a crash, so Python objects
hold them as plain integers.
"""

import ctypes
import operator
import os

from . import errors

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("VDEV_LIBRARY")
    if env:
        return [("VDEV_LIBRARY", env)]
    out = []
    try:
        from . import _install  # written by cmake --install
        out.append(("the installed package", os.path.normpath(
            os.path.join(_HERE, _install.LIBDIR_FROM_PACKAGE, "libvdev.so.%d" % _install.SOVERSION))))
    except ImportError:
        pass
    out.append(("the system loader", "libvdev.so.0"))
    return out


def _bind(lib):
    """Gives every function of _PROTOS its C types; the name of the first
    that the library lacks (it is not libvdev, or not the version this
    package binds), else None."""
    for name, (res, args) in _PROTOS.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            return name
        f.restype = res
        f.argtypes = args
    return None


def _load():
    """The first candidate that loads and holds every function of _PROTOS,
    bound: (library, path); else an ImportError naming each one tried and
    why it would not do."""
    tried = []
    for where, path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
            continue
        missing = _bind(lib)
        if missing is None:
            return lib, path
        tried.append("%s (%s): not libvdev, or another version of it than this package's "
                     "(it lacks the function %s)" % (path, where, missing))
    raise ImportError(
        "vdev: cannot load libvdev.so; tried " + "; ".join(tried) +
        ". Install vdev with `cmake --install BUILD --prefix P` (the package then finds the "
        "library beside it), or set VDEV_LIBRARY=/path/to/libvdev.so")

# ---- types -----------------------------------------------------------------------

c_handle = ctypes.c_void_p  # vdev_tensor_t *, vdev_tape_t *, ...
STATUS = ctypes.c_int
STATUS_NAMES = ["VDEV_OK", "VDEV_ERR_INVALID_ARG", "VDEV_ERR_NOT_FOUND", "VDEV_ERR_OOM",
                "VDEV_ERR_ALREADY_INITIALIZED", "VDEV_ERR_CONFIG", "VDEV_ERR_BACKEND",
                "VDEV_ERR_IO", "VDEV_ERR_PARSE", "VDEV_ERR_SHAPE", "VDEV_ERR_PLACEMENT",
                "VDEV_ERR_UNSUPPORTED", "VDEV_ERR_INTERNAL"]
OK, INVALID_ARG, NOT_FOUND, OOM, ALREADY_INITIALIZED, CONFIG = 0, 1, 2, 3, 4, 5
UNSUPPORTED = 11
F32, I32, BOOL = 0, 1, 2  # enum vdev_dtype (BOOL: one 32-bit word an element, 0 or 1)
DEVICE_CPU, DEVICE_GPU = 0, 1


class PhysicalDeviceC(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int), ("name", ctypes.c_char * 64),
                ("model", ctypes.c_char * 96), ("backend", ctypes.c_char * 16),
                ("total_bytes", ctypes.c_uint64), ("free_bytes", ctypes.c_uint64),
                ("cc_major", ctypes.c_int), ("cc_minor", ctypes.c_int)]


class LogicalDeviceC(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 64), ("type", ctypes.c_int), ("index", ctypes.c_int),
                ("physical_index", ctypes.c_int), ("backend", ctypes.c_char * 16),
                ("policy", ctypes.c_int), ("limit_bytes", ctypes.c_uint64)]


class MemoryInfoC(ctypes.Structure):
    _fields_ = [("bytes_in_use", ctypes.c_uint64), ("peak_bytes_in_use", ctypes.c_uint64),
                ("bytes_reserved", ctypes.c_uint64), ("peak_bytes_reserved", ctypes.c_uint64),
                ("bytes_limit", ctypes.c_uint64), ("largest_free_block", ctypes.c_uint64),
                ("n_allocs", ctypes.c_uint64), ("n_allocs_total", ctypes.c_uint64),
                ("n_failed_allocs", ctypes.c_uint64), ("n_regions", ctypes.c_uint64),
                ("fragmentation", ctypes.c_double), ("largest_alloc_size", ctypes.c_uint64)]


class DeviceDetailsC(ctypes.Structure):
    _fields_ = [("device_name", ctypes.c_char * 96), ("cc_major", ctypes.c_int),
                ("cc_minor", ctypes.c_int)]


class LogicalDeviceConfigC(ctypes.Structure):  # struct vdev_logical_device_config
    _fields_ = [("floor_bytes", ctypes.c_uint64), ("ceiling_bytes", ctypes.c_uint64),
                ("priority", ctypes.c_int)]


class MemoryLimitsC(ctypes.Structure):  # struct vdev_memory_limits
    _fields_ = [("floor_bytes", ctypes.c_uint64), ("ceiling_bytes", ctypes.c_uint64),
                ("priority", ctypes.c_int), ("ceiling_lowered", ctypes.c_int),
                ("card_budget_bytes", ctypes.c_uint64), ("card_floors_bytes", ctypes.c_uint64),
                ("card_claimed_bytes", ctypes.c_uint64), ("available_bytes", ctypes.c_uint64),
                ("n_lends", ctypes.c_uint64), ("lent_bytes", ctypes.c_uint64),
                ("borrowed_bytes", ctypes.c_uint64)]


class CheckpointEntryC(ctypes.Structure):  # struct vdev_checkpoint_entry
    _fields_ = [("name", ctypes.c_char_p), ("dtype_name", ctypes.c_char_p),
                ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("offset_bytes", ctypes.c_uint64),
                ("size_bytes", ctypes.c_uint64)]


# Callbacks from C. ctypes takes the GIL for the call (on any thread, one that
# Python did not make included) and gives it back when the function returns.
PRESSURE_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint64,
                               ctypes.c_void_p)
REPLICA_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class AuditEntryC(ctypes.Structure):
    _fields_ = [("op_type", ctypes.c_char * 32), ("ran_on", ctypes.c_char * 64),
                ("home", ctypes.c_char * 64), ("count", ctypes.c_uint64),
                ("bytes_copied", ctypes.c_uint64)]


_i64p = ctypes.POINTER(ctypes.c_int64)
_u64p = ctypes.POINTER(ctypes.c_uint64)
_intp = ctypes.POINTER(ctypes.c_int)
_h = c_handle
_s = ctypes.c_char_p
_b = ctypes.c_bool

# name: (restype, argtypes)
_PROTOS = {
    "vdev_version": (_s, []),
    "vdev_status_str": (_s, [STATUS]),
    "vdev_last_error": (_s, []),
    "vdev_last_status": (STATUS, []),
    "vdev_clear_error": (None, []),
    "vdev_format_bytes": (_s, [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]),
    "vdev_list_physical_devices": (STATUS, [ctypes.POINTER(PhysicalDeviceC), ctypes.c_int, _intp]),
    "vdev_gpu_absence_reason": (_s, []),
    "vdev_config_set_visible_devices": (STATUS, [_intp, ctypes.c_int]),
    "vdev_config_get_visible_devices": (STATUS, [_intp, ctypes.c_int, _intp]),
    "vdev_config_set_memory_growth": (STATUS, [_s, _b]),
    "vdev_config_get_memory_growth": (STATUS, [_s, _intp]),
    "vdev_config_set_logical_devices": (STATUS, [_s, _u64p, ctypes.c_int]),
    "vdev_config_get_logical_devices": (STATUS, [_s, _u64p, ctypes.c_int, _intp]),
    "vdev_config_set_memory_fraction": (STATUS, [_s, ctypes.c_double]),
    "vdev_config_set_soft_device_placement": (None, [_b]),
    "vdev_config_get_soft_device_placement": (_b, []),
    "vdev_config_set_deterministic": (None, [_b]),
    "vdev_config_get_deterministic": (_b, []),
    "vdev_device_details": (STATUS, [_s, ctypes.POINTER(DeviceDetailsC)]),
    "vdev_init": (STATUS, []),
    "vdev_is_initialized": (_b, []),
    "vdev_shutdown": (None, []),
    "vdev_list_logical_devices": (STATUS, [ctypes.POINTER(LogicalDeviceC), ctypes.c_int, _intp]),
    "vdev_device_canonical_name": (STATUS, [_s, ctypes.c_char_p, ctypes.c_size_t]),
    "vdev_memory_info": (STATUS, [_s, ctypes.POINTER(MemoryInfoC)]),
    "vdev_memory_reset_peak": (STATUS, [_s]),
    "vdev_memory_release_cached": (STATUS, [_s, _u64p]),
    # governance (vdev/govern.h)
    "vdev_priority_name": (_s, [ctypes.c_int]),
    "vdev_config_set_logical_devices_ex": (STATUS, [_s, ctypes.POINTER(LogicalDeviceConfigC),
                                                    ctypes.c_int]),
    "vdev_config_get_logical_devices_ex": (STATUS, [_s, ctypes.POINTER(LogicalDeviceConfigC),
                                                    ctypes.c_int, _intp]),
    "vdev_memory_get_limits": (STATUS, [_s, ctypes.POINTER(MemoryLimitsC)]),
    "vdev_memory_set_limits": (STATUS, [_s, ctypes.c_uint64, ctypes.c_uint64]),
    "vdev_memory_set_priority": (STATUS, [_s, ctypes.c_int]),
    "vdev_memory_set_pressure_callback": (STATUS, [_s, PRESSURE_FN, ctypes.c_void_p]),
    # tensors
    "vdev_tensor_zeros": (_h, [_i64p, ctypes.c_int, ctypes.c_int]),
    "vdev_tensor_ones": (_h, [_i64p, ctypes.c_int, ctypes.c_int]),
    "vdev_tensor_fill": (_h, [_i64p, ctypes.c_int, ctypes.c_int, ctypes.c_double]),
    "vdev_tensor_from_host": (_h, [ctypes.c_void_p, _i64p, ctypes.c_int, ctypes.c_int]),
    "vdev_tensor_uniform": (_h, [_i64p, ctypes.c_int, ctypes.c_float, ctypes.c_float,
                                 ctypes.c_uint64]),
    "vdev_tensor_normal": (_h, [_i64p, ctypes.c_int, ctypes.c_float, ctypes.c_float,
                                ctypes.c_uint64]),
    "vdev_tensor_to_host": (STATUS, [_h, ctypes.c_void_p, ctypes.c_size_t]),
    "vdev_tensor_to": (_h, [_h, _s]),
    "vdev_identity": (_h, [_h]),
    "vdev_stop_gradient": (_h, [_h]),
    "vdev_tensor_free": (None, [_h]),
    "vdev_tensor_ndim": (ctypes.c_int, [_h]),
    "vdev_tensor_dim": (ctypes.c_int64, [_h, ctypes.c_int]),
    "vdev_tensor_numel": (ctypes.c_int64, [_h]),
    "vdev_tensor_dtype": (ctypes.c_int, [_h]),
    "vdev_tensor_device": (_s, [_h]),
    "vdev_variable": (_h, [_h]),
    "vdev_keep": (_h, [_h]),
    "vdev_assign": (STATUS, [_h, _h]),
    # placement
    "vdev_device_push": (STATUS, [_s]),
    "vdev_device_pop": (STATUS, []),
    "vdev_device_current": (_s, []),
    "vdev_set_placement_policy": (STATUS, [ctypes.c_int]),
    "vdev_get_placement_policy": (ctypes.c_int, []),
    "vdev_set_log_device_placement": (None, [_b]),
    "vdev_get_log_device_placement": (_b, []),
    "vdev_placement_op_count": (ctypes.c_uint64, [_s, _s]),
    "vdev_placement_bytes_copied": (ctypes.c_uint64, [_s, _s]),
    "vdev_placement_audit": (STATUS, [ctypes.POINTER(AuditEntryC), ctypes.c_int, _intp]),
    "vdev_placement_report": (None, [ctypes.c_void_p]),
    "vdev_placement_reset": (None, []),
    "vdev_device_report": (None, [ctypes.c_void_p]),
    "vdev_metrics_serve": (STATUS, [_s]),
    "vdev_metrics_stop": (None, []),
    "vdev_metrics_port": (ctypes.c_int, []),
    # ops
    "vdev_matmul": (_h, [_h, _h, _b, _b]),
    "vdev_batch_matmul": (_h, [_h, _h, _b, _b]),
    "vdev_lstm_gates": (_h, [_h]),
    "vdev_gru_gates": (_h, [_h, _h]),
    "vdev_select_mask": (_h, [_h, _h, _h]),
    "vdev_equal": (_h, [_h, _h]),
    "vdev_not_equal": (_h, [_h, _h]),
    "vdev_less": (_h, [_h, _h]),
    "vdev_less_equal": (_h, [_h, _h]),
    "vdev_greater": (_h, [_h, _h]),
    "vdev_greater_equal": (_h, [_h, _h]),
    "vdev_logical_and": (_h, [_h, _h]),
    "vdev_logical_or": (_h, [_h, _h]),
    "vdev_logical_not": (_h, [_h]),
    "vdev_cast": (_h, [_h, ctypes.c_int]),
    "vdev_where": (_h, [_h, _h, _h]),
    "vdev_max": (_h, [_h, ctypes.c_int, _b]),
    "vdev_min": (_h, [_h, ctypes.c_int, _b]),
    "vdev_max_all": (_h, [_h]),
    "vdev_min_all": (_h, [_h]),
    "vdev_abs": (_h, [_h]),
    "vdev_sign": (_h, [_h]),
    "vdev_floor": (_h, [_h]),
    "vdev_ceil": (_h, [_h]),
    "vdev_round": (_h, [_h]),
    "vdev_floor_div": (_h, [_h, _h]),
    "vdev_floor_mod": (_h, [_h, _h]),
    "vdev_gru_cell_output": (_h, [_h, _h]),
    "vdev_lstm_cell_state": (_h, [_h, _h]),
    "vdev_lstm_cell_output": (_h, [_h, _h]),
    "vdev_matmul_nd": (_h, [_h, _h, _b, _b]),
    "vdev_add": (_h, [_h, _h]),
    "vdev_sub": (_h, [_h, _h]),
    "vdev_mul": (_h, [_h, _h]),
    "vdev_div": (_h, [_h, _h]),
    "vdev_maximum": (_h, [_h, _h]),
    "vdev_minimum": (_h, [_h, _h]),
    "vdev_add_scalar": (_h, [_h, ctypes.c_float]),
    "vdev_mul_scalar": (_h, [_h, ctypes.c_float]),
    "vdev_pow_scalar": (_h, [_h, ctypes.c_float]),
    "vdev_sqrt": (_h, [_h]),
    "vdev_erf": (_h, [_h]),
    "vdev_softplus": (_h, [_h]),
    "vdev_relu": (_h, [_h]),
    "vdev_tanh": (_h, [_h]),
    "vdev_sigmoid": (_h, [_h]),
    "vdev_exp": (_h, [_h]),
    "vdev_log": (_h, [_h]),
    "vdev_softmax": (_h, [_h]),
    "vdev_log_softmax": (_h, [_h]),
    "vdev_sum": (_h, [_h, ctypes.c_int, _b]),
    "vdev_mean": (_h, [_h, ctypes.c_int, _b]),
    "vdev_sum_all": (_h, [_h]),
    "vdev_mean_all": (_h, [_h]),
    "vdev_reshape": (_h, [_h, _i64p, ctypes.c_int]),
    "vdev_transpose": (_h, [_h]),
    "vdev_transpose_perm": (_h, [_h, _intp, ctypes.c_int]),
    "vdev_concat": (_h, [ctypes.POINTER(_h), ctypes.c_int, ctypes.c_int]),
    "vdev_stack": (_h, [ctypes.POINTER(_h), ctypes.c_int, ctypes.c_int]),
    "vdev_gather": (_h, [_h, _h]),
    "vdev_slice_rows": (_h, [_h, ctypes.c_int64, ctypes.c_int64]),
    "vdev_row": (_h, [_h, ctypes.c_int64]),
    "vdev_strided_slice": (_h, [_h, ctypes.c_int, _i64p, _i64p, _i64p, ctypes.c_int,
                                ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]),
    "vdev_mse": (_h, [_h, _h]),
    "vdev_softmax_cross_entropy": (_h, [_h, _h]),
    "vdev_argmax": (_h, [_h]),
    "vdev_conv2d": (_h, [_h, _h, ctypes.c_int, ctypes.c_int, ctypes.c_char_p]),
    "vdev_conv2d_dilated": (_h, [_h, _h, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_char_p]),
    "vdev_depthwise_conv2d": (_h, [_h, _h, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_char_p]),
    "vdev_conv2d_transpose": (_h, [_h, _h, _i64p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_int, ctypes.c_char_p]),
    "vdev_max_pool2d": (_h, [_h, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_char_p]),
    "vdev_avg_pool2d": (_h, [_h, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_char_p]),
    "vdev_pad": (_h, [_h, _i64p, ctypes.c_int, ctypes.c_double]),
    "vdev_mirror_pad": (_h, [_h, _i64p, ctypes.c_int, ctypes.c_char_p]),
    "vdev_conv1d": (_h, [_h, _h, ctypes.c_int, ctypes.c_int, ctypes.c_char_p]),
    "vdev_max_pool1d": (_h, [_h, ctypes.c_int, ctypes.c_int, ctypes.c_char_p]),
    "vdev_avg_pool1d": (_h, [_h, ctypes.c_int, ctypes.c_int, ctypes.c_char_p]),
    "vdev_separable_conv2d": (_h, [_h, _h, _h, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_char_p]),
    # autograd, nn
    "vdev_tape_begin": (_h, []),
    "vdev_tape_begin_ex": (_h, [ctypes.c_uint]),
    "vdev_tape_watch": (STATUS, [_h, _h]),
    "vdev_tape_skip": (STATUS, [_h, _h]),
    "vdev_tape_watched_variables": (ctypes.c_int, [_h, ctypes.POINTER(_h), ctypes.c_int]),
    "vdev_tape_gradient": (STATUS, [_h, _h, ctypes.POINTER(_h), ctypes.c_int,
                                    ctypes.POINTER(_h)]),
    "vdev_tape_gradient_ex": (STATUS, [_h, _h, ctypes.POINTER(_h), ctypes.c_int,
                                       ctypes.POINTER(_h), ctypes.c_int]),
    "vdev_tape_gradient_seeded": (STATUS, [_h, _h, _h, ctypes.POINTER(_h), ctypes.c_int,
                                           ctypes.POINTER(_h), ctypes.c_int]),
    "vdev_tape_end": (None, [_h]),
    "vdev_tape_release": (None, [_h]),
    "vdev_tape_pause": (STATUS, [_h]),
    "vdev_tape_resume": (STATUS, [_h]),
    "vdev_sgd_new": (_h, [ctypes.c_float, ctypes.c_float]),
    "vdev_adam_new": (_h, [ctypes.c_float, ctypes.c_float, ctypes.c_float, ctypes.c_float]),
    "vdev_optimizer_apply": (STATUS, [_h, ctypes.POINTER(_h), ctypes.POINTER(_h), ctypes.c_int]),
    "vdev_optimizer_free": (None, [_h]),
    "vdev_optimizer_slots": (ctypes.c_int, [_h, _h, ctypes.POINTER(_h),
                                            ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]),
    "vdev_optimizer_slots_release": (STATUS, [_h, _h]),
    "vdev_optimizer_get_iterations": (STATUS, [_h, _i64p]),
    "vdev_optimizer_set_iterations": (STATUS, [_h, ctypes.c_int64]),
    # hyperparameters after construction (vdev/nn.h)
    "vdev_sgd_set": (STATUS, [_h, ctypes.c_float, ctypes.c_float]),
    "vdev_adam_set": (STATUS, [_h, ctypes.c_float, ctypes.c_float, ctypes.c_float,
                               ctypes.c_float]),
    "vdev_sgd_set_nesterov": (STATUS, [_h, ctypes.c_bool]),
    "vdev_adam_set_amsgrad": (STATUS, [_h, ctypes.c_bool]),
    "vdev_optimizer_set_clipping": (STATUS, [_h, ctypes.c_float, ctypes.c_float,
                                             ctypes.c_float]),
    "vdev_optimizer_set_weight_decay": (STATUS, [_h, ctypes.c_float]),
    "vdev_optimizer_exclude_from_weight_decay": (STATUS, [_h, ctypes.POINTER(_h), ctypes.c_int]),
    # collectives and the mirrored strategy (vdev/distribute.h)
    "vdev_comm_new": (STATUS, [ctypes.POINTER(_s), ctypes.c_int, ctypes.POINTER(_h)]),
    "vdev_comm_free": (None, [_h]),
    "vdev_comm_size": (ctypes.c_int, [_h]),
    "vdev_comm_device": (_s, [_h, ctypes.c_int]),
    "vdev_comm_implementation": (_s, [_h]),
    "vdev_comm_set_timeout": (STATUS, [_h, ctypes.c_double]),
    "vdev_comm_all_reduce": (STATUS, [_h, ctypes.c_int, ctypes.POINTER(_h), ctypes.c_int,
                                      ctypes.c_int]),
    "vdev_comm_broadcast": (STATUS, [_h, ctypes.c_int, ctypes.POINTER(_h), ctypes.c_int,
                                     ctypes.c_int]),
    "vdev_comm_all_gather": (STATUS, [_h, ctypes.c_int, _h, _h]),
    "vdev_comm_barrier": (STATUS, [_h, ctypes.c_int]),
    "vdev_comm_abort": (STATUS, [_h, ctypes.c_int, ctypes.c_int, _s]),
    "vdev_mirrored_strategy_new": (STATUS, [ctypes.POINTER(_s), ctypes.c_int,
                                            ctypes.POINTER(_h)]),
    "vdev_strategy_free": (None, [_h]),
    "vdev_strategy_num_replicas_in_sync": (ctypes.c_int, [_h]),
    "vdev_strategy_device": (_s, [_h, ctypes.c_int]),
    "vdev_strategy_set_batch_proportions": (STATUS, [_h, ctypes.POINTER(ctypes.c_double),
                                                     ctypes.c_int]),
    "vdev_strategy_run": (STATUS, [_h, REPLICA_FN, ctypes.c_void_p, ctypes.POINTER(_h)]),
    "vdev_strategy_reduce": (_h, [_h, ctypes.c_int, ctypes.POINTER(_h)]),
    "vdev_strategy_memory_info": (STATUS, [_h, ctypes.c_int, ctypes.POINTER(MemoryInfoC)]),
    "vdev_strategy_memory_imbalance": (ctypes.c_double, [_h]),
    "vdev_replica_id": (ctypes.c_int, [_h]),
    "vdev_replica_num_replicas": (ctypes.c_int, [_h]),
    "vdev_replica_device": (_s, [_h]),
    "vdev_replica_batch": (_h, [_h, _h]),
    "vdev_replica_compute_average_loss": (_h, [_h, _h, ctypes.c_int64]),
    "vdev_replica_all_reduce": (STATUS, [_h, ctypes.c_int, ctypes.POINTER(_h), ctypes.c_int,
                                         ctypes.POINTER(_h)]),
    "vdev_replica_broadcast": (STATUS, [_h, ctypes.POINTER(_h), ctypes.c_int, ctypes.c_int]),
    "vdev_replica_apply_gradients": (STATUS, [_h, _h, ctypes.POINTER(_h), ctypes.POINTER(_h),
                                              ctypes.c_int]),
    # checkpoints
    "vdev_checkpoint_save": (STATUS, [_s, ctypes.POINTER(_s), ctypes.POINTER(_h), ctypes.c_int,
                                      ctypes.POINTER(_s), ctypes.c_int]),
    "vdev_checkpoint_load": (STATUS, [_s, ctypes.POINTER(_s), ctypes.POINTER(_h),
                                      ctypes.c_int]),
    "vdev_checkpoint_metadata": (STATUS, [_s, _s, ctypes.c_char_p, ctypes.c_size_t]),
    "vdev_checkpoint_open": (STATUS, [_s, ctypes.POINTER(_h)]),
    "vdev_checkpoint_close": (None, [_h]),
    "vdev_checkpoint_n_entries": (ctypes.c_int, [_h]),
    "vdev_checkpoint_entry": (STATUS, [_h, ctypes.c_int, ctypes.POINTER(CheckpointEntryC)]),
    "vdev_checkpoint_n_metadata": (ctypes.c_int, [_h]),
    "vdev_checkpoint_metadata_at": (STATUS, [_h, ctypes.c_int, ctypes.POINTER(_s),
                                             ctypes.POINTER(_s)]),
    # DLPack
    "vdev_tensor_to_dlpack": (STATUS, [_h, ctypes.POINTER(ctypes.c_void_p)]),
    "vdev_tensor_from_dlpack": (_h, [ctypes.c_void_p]),
    "vdev_dlpack_live_exports": (ctypes.c_int, []),
    "vdev_mem_holders_live": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]),
    "vdev_last_oom_report": (ctypes.c_char_p, []),
}

lib, path = _load()

# ---- errors ------------------------------------------------------------------------


def last_error():
    """The calling thread's last vdev error message ('' if none)."""
    return lib.vdev_last_error().decode("utf-8", "replace")


def error(status=None, overrides=None):
    """The exception for the calling thread's last failure (status: the code a
    call returned, else vdev_last_status()). overrides maps codes to
    exception classes (config calls raise ValueError where TensorFlow does)."""
    if status is None:
        status = lib.vdev_last_status()
    msg = errors.python_message(status, last_error())
    if overrides and status in overrides:
        return overrides[status](msg)
    report = ""
    if status == OOM:
        report = lib.vdev_last_oom_report().decode("utf-8", "replace")
    return errors.from_status(status, msg, report)


def setting(getter):
    """What a C getter of a setting returns (it has no status to give):
    before start-up that is read from the environment, and a malformed
    variable leaves start-up's error as the last error, raised here as the
    getters with a status raise it."""
    lib.vdev_clear_error()
    value = getter()
    if lib.vdev_last_status() != OK:
        raise error()
    return value


def check(status, overrides=None):
    """Raises for a failed status; returns None."""
    if status != OK:
        raise error(status, overrides)


def made(handle, overrides=None):
    """The handle a call made, or raises for its failure (NULL)."""
    if not handle:
        raise error(None, overrides)
    return handle


def enc(name):
    """A device name for C: str → bytes; anything else is a TypeError."""
    if isinstance(name, bytes):
        return name
    if not isinstance(name, str):
        raise TypeError("a device name must be a string, not %s (%r)" % (type(name).__name__, name))
    return name.encode("utf-8")


def last_axis(value, what, layer):
    """A layer's build argument as an int: vdev's count of features (an
    integer) or Keras's input shape (a tuple, list or shape with as_list),
    its last axis, which must be known (Keras's Dense's error)."""
    if hasattr(value, "as_list") and not hasattr(value, "__index__"):
        value = value.as_list()
    if isinstance(value, (tuple, list)):
        if not value or value[-1] is None:
            raise ValueError("The last dimension of the inputs to a %s layer should be defined. "
                             "Found None. Full input shape received: %s"
                             % (type(layer).__name__, tuple(value)))
        value = value[-1]
    return index(value, what)


def index(value, what):
    """A whole number given as any integer type (int, numpy's int64, a
    0-d int32 tensor: anything with __index__), as an int; a bool or a float
    is a TypeError."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except (TypeError, AttributeError):  # a float32 scalar tensor's AttributeError
            pass
    raise TypeError("%s must be an integer, not %r" % (what, value))


_arrays = {}


def handles(values):
    """A C array of handles (its type cached per length: a new ctypes array
    type per call would leave reference cycles for the garbage collector)."""
    n = max(len(values), 1)
    t = _arrays.get(n)
    if t is None:
        t = _arrays.setdefault(n, c_handle * n)
    return t(*values)


_shape_types = {}


def shape_array(shape):
    # (a C array of int64 sizes, the count); the array type cached per length
    n = len(shape)
    t = _shape_types.get(n)
    if t is None:
        t = _shape_types.setdefault(n, ctypes.c_int64 * max(n, 1))
    return t(*shape), n
