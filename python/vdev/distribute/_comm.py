"""``vdev.distribute.Communicator``: collectives over a list of logical
devices (vdev_comm_*, vdev/distribute.h), for programs that drive the ranks
themselves.

Rank i is devices[i]. As with NCCL and MPI, each rank is driven by a thread
of its own, and every rank makes the same calls in the same order; a call
returns once every rank's part is queued on its device (the next op there
sees the result). ctypes releases the GIL during each call, so one Python
thread per rank works: a rank waiting for the others does not hold them up.
A call that fails on one rank fails on every rank with the same message,
never a hang; abort() fails every call in flight and every later one, and
the communicator is then spent (make another). The MirroredStrategy reduces
through a communicator of its own; this class is for collectives outside a
strategy.

    comm = vdev.distribute.Communicator(["GPU:0", "GPU:1"])
    def rank(r):                       # on a thread of its own
        with vdev.device(comm.devices[r]):
            t = vdev.constant([1.0, 2.0]) * (r + 1)
        comm.all_reduce(r, [t], "SUM")  # in place: [3., 6.] on both
"""

import ctypes

from .. import _lib, errors
from .._lib import lib
from .._tensor import Tensor
from ._values import handles_of, reduce_code
from . import _mirrored

_VALUE = {_lib.INVALID_ARG: ValueError, _lib.NOT_FOUND: ValueError}
_CODES = {name: i for i, name in enumerate(_lib.STATUS_NAMES)}


def _tensor_list(tensors):
    if isinstance(tensors, Tensor):
        return [tensors]
    out = list(tensors)
    for t in out:
        if not isinstance(t, Tensor):
            raise TypeError("collectives take vdev tensors, not %r" % (t,))
    return out


class Communicator:
    """Collectives over `devices` (logical device names; distinct, of one
    backend). Starts the runtime."""

    def __init__(self, devices):
        self._h = None
        if isinstance(devices, str):
            raise ValueError("devices must be a list of device names, not the string %r"
                             % (devices,))
        names = [getattr(d, "name", d) for d in devices]
        arr = (ctypes.c_char_p * max(len(names), 1))(*[_lib.enc(d) for d in names])
        out = ctypes.c_void_p()
        _lib.check(lib.vdev_comm_new(arr, len(names), ctypes.byref(out)), _VALUE)
        self._h = out.value
        self._size = lib.vdev_comm_size(self._h)
        self.devices = tuple(lib.vdev_comm_device(self._h, r).decode()
                             for r in range(self._size))
        self.implementation = lib.vdev_comm_implementation(self._h).decode()
        _mirrored._live.add(self)

    def _free(self):
        h, self._h = self._h, None
        _mirrored._live.discard(self)
        if h:
            lib.vdev_comm_free(h)

    def free(self):
        """Frees it now (no rank may be inside a call); later calls raise."""
        self._free()

    def __del__(self):
        if getattr(self, "_h", None):
            self._free()

    # Shared, as a strategy is: a copy is the communicator itself.
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle a vdev Communicator: it holds vdev's collectives; make "
                        "a new one where it is unpickled")

    def _handle(self):
        if self._h is None:
            raise RuntimeError("the communicator was freed (vdev.shutdown() frees every "
                               "communicator)")
        return self._h

    @property
    def size(self):
        return self._size

    def set_timeout(self, seconds):
        """How long a rank waits for another before its call fails (seconds,
        > 0; default 300), for calls that start after it."""
        _lib.check(lib.vdev_comm_set_timeout(self._handle(), float(seconds)), _VALUE)

    def all_reduce(self, rank, tensors, reduce_op="SUM"):
        """Rank's tensors (f32, on its device, the same shapes on every rank)
        become, in place, their sum (or mean) over the ranks. Returns them."""
        ts = _tensor_list(tensors)
        _lib.check(lib.vdev_comm_all_reduce(self._handle(), _lib.index(rank, "rank"),
                                            handles_of(ts), len(ts), reduce_code(reduce_op)))
        return tensors

    def broadcast(self, rank, tensors, root=0):
        """Every rank's tensors take root's values, in place. Returns them."""
        ts = _tensor_list(tensors)
        _lib.check(lib.vdev_comm_broadcast(self._handle(), _lib.index(rank, "rank"),
                                           handles_of(ts), len(ts), _lib.index(root, "root")))
        return tensors

    def all_gather(self, rank, input, output):
        """output (size times input's elements, on rank's device) holds rank
        0's input, then rank 1's, ...: stacked along axis 0. Returns output."""
        for t in (input, output):
            if not isinstance(t, Tensor):
                raise TypeError("collectives take vdev tensors, not %r" % (t,))
        _lib.check(lib.vdev_comm_all_gather(self._handle(), _lib.index(rank, "rank"), input._handle,
                                            output._handle))
        return output

    def barrier(self, rank):
        """Returns once every rank has called it."""
        _lib.check(lib.vdev_comm_barrier(self._handle(), _lib.index(rank, "rank")))

    def abort(self, rank, reason=None):
        """Rank gives up: every call in flight and every later one fails on
        every rank ("Collective ops is aborted by: rank R (<device>):
        <reason>"). reason: a string, or the exception that made the rank
        give up (its vdev code is passed on; other exceptions count as
        VDEV_ERR_INTERNAL)."""
        code = _CODES["VDEV_ERR_INTERNAL"]
        if isinstance(reason, errors.OpError):
            code = _CODES.get(reason.status, code)
        text = None if reason is None else str(reason)
        _lib.check(lib.vdev_comm_abort(self._handle(), _lib.index(rank, "rank"), code,
                                       None if text is None else text.encode("utf-8")))

    def __repr__(self):
        return "Communicator(%r, %s)" % (self.devices, self.implementation)
