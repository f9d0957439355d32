"""Where the work ran: vdev's placement summary and audit.

``audit()`` lists the ops that ran on a device other than the one their
variables live on (the "all three models landed on GPU 0" bug), with the
bytes copied to get their inputs there; ``op_count`` and ``bytes_copied``
read the summary; ``report()`` and ``device_report()`` give the text vdev
prints (ops per type and device, copies per pair; per device ops, memory
and copies). ``set_policy('copy' | 'strict' | 'tf')`` chooses what happens to
an input on another device: copied and counted (vdev's default), an error,
or TensorFlow's rule (unscoped ops go to the default device).
``metrics_port()`` tells which port the Prometheus metrics endpoint
(``VDEV_METRICS_ADDR``, whose counters these are) serves on, the one picked
for port 0 included; ``metrics_serve(addr)`` and ``metrics_stop()`` start
and stop it from code.
"""

import collections
import ctypes

from . import _lib, errors
from ._lib import lib

__all__ = ["AuditEntry", "audit", "bytes_copied", "device_report", "get_policy", "metrics_port",
           "metrics_serve", "metrics_stop", "op_count", "report", "reset", "set_policy"]

AuditEntry = collections.namedtuple("AuditEntry", ["op_type", "ran_on", "home", "count",
                                                   "bytes_copied"])

_POLICIES = ["copy", "strict", "tf"]


def _opt(name):
    return None if name is None else _lib.enc(name)


def op_count(op_type=None, device=None):
    """Ops run of one type ('MatMul'; None: all) on one device (None: all)."""
    return int(lib.vdev_placement_op_count(_opt(op_type), _opt(device)))


def bytes_copied(from_device=None, to_device=None):
    """Bytes copied from one device to another (None: any)."""
    return int(lib.vdev_placement_bytes_copied(_opt(from_device), _opt(to_device)))


def audit():
    """[AuditEntry(op_type, ran_on, home, count, bytes_copied), ...]"""
    n = ctypes.c_int(0)
    _lib.check(lib.vdev_placement_audit(None, 0, ctypes.byref(n)))
    cap = n.value
    arr = (_lib.AuditEntryC * max(cap, 1))()
    _lib.check(lib.vdev_placement_audit(arr, cap, ctypes.byref(n)))
    return [AuditEntry(e.op_type.decode(), e.ran_on.decode(), e.home.decode(), e.count,
                       e.bytes_copied) for e in arr[:min(cap, n.value)]]


def reset():
    """Forgets the counts and the audit (and so the metrics endpoint's
    vdev_ops_total and vdev_copied_bytes_total, which Prometheus reads as a
    counter reset)."""
    lib.vdev_placement_reset()


# The reports are printed to a FILE *: an in-memory one from the C library.
_libc = ctypes.CDLL(None)
_libc.open_memstream.restype = ctypes.c_void_p
_libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
_libc.fclose.argtypes = [ctypes.c_void_p]
_libc.free.argtypes = [ctypes.c_void_p]


def _capture(fn):
    buf = ctypes.c_char_p()
    size = ctypes.c_size_t()
    f = _libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not f:
        raise MemoryError("open_memstream failed")
    try:
        fn(f)
    finally:
        _libc.fclose(f)
    text = ctypes.string_at(buf, size.value).decode("utf-8", "replace")
    _libc.free(ctypes.cast(buf, ctypes.c_void_p))
    return text


def report():
    """The placement summary (ops per type and device, bytes copied per pair)
    and the audit, as vdev prints them."""
    return _capture(lib.vdev_placement_report)


def device_report():
    """One line per logical device: ops run, memory in use, peak, reserved,
    limit, and bytes copied in and out."""
    return _capture(lib.vdev_device_report)


def set_policy(policy):
    """'copy' (default), 'strict' or 'tf'; code wins over VDEV_PLACEMENT."""
    if policy not in _POLICIES:
        raise ValueError("placement policy must be one of %s, not %r" % (_POLICIES, policy))
    _lib.check(lib.vdev_set_placement_policy(_POLICIES.index(policy)))
    errors._strict_by = "placement"  # a strict error's advice names this call


def get_policy():
    """The placement policy; before start-up, the one start-up will put in
    force (code's, else VDEV_PLACEMENT's)."""
    return _POLICIES[_lib.setting(lib.vdev_get_placement_policy)]


def metrics_port():
    """The port the metrics endpoint serves on (Prometheus text on GET
    /metrics), or 0 when none serves. ``VDEV_METRICS_ADDR=127.0.0.1:0`` lets
    the system pick a free port at start-up; this is how to learn which. The
    variable is read at start-up, so this starts vdev first, as the first op
    would (the configuration then freezes); a port stays the same until
    ``vdev.shutdown()``, which stops the endpoint."""
    _lib.check(lib.vdev_init())
    return int(lib.vdev_metrics_port())


def metrics_serve(addr):
    """Serves the metrics (Prometheus text on GET /metrics) on ``addr``,
    "127.0.0.1:9400" or "[::1]:9400": a numeric address bound as given
    ("localhost" is 127.0.0.1), port 0 for a free one (``metrics_port()``
    says which). Starts vdev. One endpoint at a time: a second call while one
    serves, a malformed address or one that cannot be bound is an
    ``InvalidArgumentError`` saying which (one with a null character
    Python's ``ValueError``); ``metrics_stop()`` or
    ``vdev.shutdown()`` stops it. Returns the port served."""
    if not isinstance(addr, str):
        raise TypeError("metrics_serve: addr must be a string such as '127.0.0.1:9400', not %s"
                        % type(addr).__name__)
    if "\0" in addr:  # C would read the address up to it, and serve there
        raise ValueError("metrics_serve: embedded null character in addr %r" % (addr,))
    st = lib.vdev_metrics_serve(addr.encode("utf-8"))
    if st != _lib.OK:
        # the C message's advice, in this module's words
        msg = _lib.last_error().replace("vdev_metrics_stop()", "vdev.placement.metrics_stop()")
        msg = msg.replace("call vdev_metrics_serve again", "call metrics_serve again")
        raise errors.from_status(st, msg)
    return int(lib.vdev_metrics_port())


def metrics_stop():
    """Stops the metrics endpoint (a scrape in flight finishes first); nothing
    when none serves."""
    lib.vdev_metrics_stop()
