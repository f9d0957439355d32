"""Memory governance at run time (vdev/govern.h), for
``vdev.config.experimental``: a logical device's floor (memory guaranteed
to it), ceiling (its hard limit) and priority, changed at any time from any
thread, the snapshot of them and of the card's sharing, and a callback told
of memory pressure.

Sizes here are bytes, as ``get_memory_info`` reports them (an int), or a
string with a unit as ``VDEV_LOGICAL_DEVICES`` writes them ('2GiB', '512MiB',
'1.5GiB'; B, KiB, MiB, GiB, TiB and K, M, G, T are powers of 1024, KB, MB, GB, TB
of 1000).
The configuration before start-up (``LogicalDeviceConfiguration``) keeps
TensorFlow's MiB. Errors carry vdev's message: a bad argument or a device
that does not exist is a ValueError, floors that no longer fit their card
too, and a floor whose memory other devices hold live an OutOfMemoryError
saying who holds it.

Pressure callbacks run on the thread that met the pressure (an allocating
thread, or the one that lowered a ceiling), a thread of vdev's own included:
ctypes takes the GIL for the call. An exception in one cannot reach the
allocation that caused it, so it is printed (as an exception in a thread is)
and the allocation goes on.
"""

import ctypes
import numbers
import re
import sys
import threading
import traceback

from .. import _lib
from .._lib import lib
from . import PRIORITY_NAMES, priority_code

_VALUE = {_lib.INVALID_ARG: ValueError, _lib.NOT_FOUND: ValueError, _lib.CONFIG: ValueError}

# vdev_parse_bytes's grammar: a whole number or a decimal (digits on both
# sides of the point), then a unit in any case but 'b' alone (bits?)
_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(value, what):
    """A size as bytes: an int >= 0, or a string with a unit ('2GiB')."""
    if isinstance(value, bool):
        raise TypeError("%s must be a number of bytes or a size such as '2GiB', not %r"
                        % (what, value))
    if isinstance(value, numbers.Integral):
        if value < 0:
            raise ValueError("%s must be >= 0 bytes, not %d" % (what, value))
        return int(value)
    if isinstance(value, str):
        m = _SIZE.match(value)
        unit = m.group(2).upper() if m and m.group(2) != "b" else None
        if m and unit in _UNITS:
            num = m.group(1)
            whole, _, frac = num.partition(".")
            scaled = int(whole or "0") * _UNITS[unit]
            if frac:
                scaled_frac = int(frac) * _UNITS[unit]
                q, r = divmod(scaled_frac, 10 ** len(frac))
                if r:
                    raise ValueError("%s %r is not a whole number of bytes" % (what, value))
                scaled += q
            return scaled
        raise ValueError("%s %r is not a size (a whole number or a decimal, then a unit: B, "
                         "KiB, MiB, GiB, TiB, KB, MB, GB, TB, K, M, G or T, in any case but 'b')"
                         % (what, value))
    raise TypeError("%s must be a number of bytes or a size such as '2GiB', not %r"
                    % (what, value))


def get_memory_limits(device):
    """A logical device's floor, ceiling and priority, and its card's
    sharing, as one consistent snapshot:

    {'floor': bytes guaranteed, 'ceiling': the most it may reserve (its
    'limit' in get_memory_info), 'priority': 'low' | 'normal' | 'high' |
    'critical', 'ceiling_lowered': True after a run-time change lowered the
    ceiling (until one raises it), 'card_budget': what the card shares among
    its logical devices, 'card_floors': their floors summed, 'card_claimed':
    what they hold or keep aside, 'available': how much more this device may
    reserve now, 'lends': times it gave empty regions to another device of
    its card, 'lent': by how much its claim dropped when it did, 'borrowed':
    by how much the others' claims dropped for it (the three since start-up)}.
    Two devices whose needs above their floors take turns lend to each other
    at every turn; floors that cover each one's steady need stop it. Starts
    the runtime."""
    ml = _lib.MemoryLimitsC()
    _lib.check(lib.vdev_memory_get_limits(_lib.enc(device), ctypes.byref(ml)), _VALUE)
    return {"floor": ml.floor_bytes, "ceiling": ml.ceiling_bytes,
            "priority": PRIORITY_NAMES.get(ml.priority, "normal"),
            "ceiling_lowered": bool(ml.ceiling_lowered), "card_budget": ml.card_budget_bytes,
            "card_floors": ml.card_floors_bytes, "card_claimed": ml.card_claimed_bytes,
            "available": ml.available_bytes, "lends": ml.n_lends, "lent": ml.lent_bytes,
            "borrowed": ml.borrowed_bytes}


def set_memory_limits(device, floor=None, ceiling=None):
    """Sets a logical device's floor and ceiling at run time (bytes, or
    '2GiB'; None keeps the present value; a ceiling of 0 is the card's
    budget). Raising takes effect at once. Lowering the ceiling below what
    the device holds releases its empty regions; live memory is never taken:
    while the memory in use stays above the ceiling, new allocations on the
    device raise OutOfMemoryError saying the ceiling was lowered. A new floor
    must fit the card (ValueError naming the card, its budget and the
    floors' sum) and takes its memory from what the card has unclaimed or
    from other devices' empty regions (OutOfMemoryError when they hold it
    live). Thread-safe; with None for one of them, the present value is read
    first, so a change by another thread in between is overwritten."""
    if floor is None or ceiling is None:
        now = get_memory_limits(device)
        floor = now["floor"] if floor is None else floor
        ceiling = now["ceiling"] if ceiling is None else ceiling
    f, c = parse_bytes(floor, "floor"), parse_bytes(ceiling, "ceiling")
    if f >= 1 << 64 or c >= 1 << 64:
        raise ValueError("floor and ceiling must be below 2**64 bytes")
    try:
        _lib.check(lib.vdev_memory_set_limits(_lib.enc(device), f, c), _VALUE)
    except ValueError as e:
        raise _python_advice(e, (("floor", floor, f), ("ceiling", ceiling, c))) from None


def _python_advice(err, given):
    """The C library's error for a floor or ceiling below 1 MiB advises C
    ("did you mean 1024MiB, i.e. 1024ull << 20?"): in Python, the same error
    with advice for what the caller wrote. A size written with a unit
    ('1KiB') was meant as written: it is too small, and the message says so
    with the value as written; a plain int of bytes gets '<n>MiB' as the
    size to write. Any other error is returned as it is."""
    msg = str(err)
    for what, raw, n in given:
        head = "a %s of %d bytes is less than 1 MiB" % (what, n)
        at = msg.find(head)
        if at < 0 or not 0 < n < 1 << 20:
            continue
        if isinstance(raw, str):
            tail = ("a %s of %r (%d bytes) is less than 1 MiB: a floor or ceiling other "
                    "than 0 is at least 1 MiB" % (what, raw.strip(), n))
        else:
            tail = "%s: sizes are in bytes (did you mean '%dMiB'?)" % (head, n)
        return ValueError(msg[:at] + tail)
    return err


def set_memory_priority(device, priority):
    """Sets a logical device's priority at run time: 'low', 'normal',
    'high' or 'critical'. A device the card cannot serve takes cached memory
    (empty regions above their floors) from the other devices of its card:
    from those over a lowered ceiling first, then those of strictly lower
    priority (lowest first), then those of equal or higher priority; live
    memory is shared first come, and a floor is never given away."""
    code = priority_code(priority, "priority")
    _lib.check(lib.vdev_memory_set_priority(_lib.enc(device), code), _VALUE)


def get_memory_priority(device):
    """The device's memory priority in force: 'low', 'normal', 'high' or 'critical'."""
    return get_memory_limits(device)["priority"]


PRESSURE_KINDS = ("card_full", "lent", "ceiling")  # enum vdev_pressure

_callbacks_lock = threading.Lock()
_callbacks = {}  # canonical device name -> the python function
# Devices whose C callback is the dispatcher below. It stays installed: the
# functions change in _callbacks alone, so no lock is held across the C call
# (which waits for calls of a replaced C callback still running on other
# threads; a Python callback taking a lock held across it would deadlock).
_installed = set()


def _canonical(device):
    buf = ctypes.create_string_buffer(96)
    _lib.check(lib.vdev_device_canonical_name(_lib.enc(device), buf, len(buf)), _VALUE)
    return buf.value.decode()


def _dispatch(device, what, nbytes, _user):
    name = device.decode()
    with _callbacks_lock:
        fn = _callbacks.get(name)
    if fn is None:
        return
    try:
        kind = PRESSURE_KINDS[what] if 0 <= what < len(PRESSURE_KINDS) else str(what)
        fn(name, kind, int(nbytes))
    except BaseException:  # nowhere to raise it: print it, as threading does
        print("Exception in the memory pressure callback %r:" % (fn,), file=sys.stderr)
        traceback.print_exc()


_DISPATCH = _lib.PRESSURE_FN(_dispatch)  # one C callback for every device, kept


def set_memory_pressure_callback(device, fn):
    """Calls fn(device, kind, nbytes) when a logical device meets memory
    pressure, so a model can shrink its batch before its allocations fail:
    kind 'card_full' (it asked its card for nbytes of shared memory and none
    was left; vdev now tries lending, and the allocation may fail), 'lent'
    (another device of its card took nbytes of its cached memory), or
    'ceiling' (its ceiling went below what it holds, or below its peak in
    use, by nbytes). device is its '/device:GPU:1' name. fn runs on the
    thread that met the pressure, with no vdev lock held; it may call vdev
    and should be quick, and may itself set or get the callbacks. None
    removes the callback; a call already under way on another thread may
    still finish after that."""
    if fn is not None and not callable(fn):
        raise TypeError("the pressure callback must be callable or None, not %r" % (fn,))
    key = _canonical(device)
    with _callbacks_lock:
        install = fn is not None and key not in _installed
    if install:
        _lib.check(lib.vdev_memory_set_pressure_callback(_lib.enc(device), _DISPATCH, None),
                   _VALUE)
    with _callbacks_lock:
        if install:
            _installed.add(key)
        if fn is None:
            _callbacks.pop(key, None)
        else:
            _callbacks[key] = fn


def get_memory_pressure_callback(device):
    """The function set_memory_pressure_callback gave for the device, or None."""
    key = _canonical(device)
    with _callbacks_lock:
        return _callbacks.get(key)


def _forget_callbacks():
    """After vdev_shutdown(): the runtime that called them is gone."""
    with _callbacks_lock:
        _callbacks.clear()
        _installed.clear()
