"""``vdev.distribute.MirroredStrategy``: TensorFlow's MirroredStrategy over
vdev's C strategy (vdev_mirrored_strategy_*, vdev/distribute.h).

How a run goes. ``strategy.run(step_fn, args)`` calls vdev_strategy_run
with one C callback (a ctypes function, made once for the module) and a key
naming this run. vdev calls it on every replica's own host thread at once;
ctypes takes the GIL for each call, and every vdev call the step makes gives
it back while C works (ctypes releases the GIL around foreign calls), so the
replicas' ops, and the collectives where they wait for each other, run side
by side while Python runs one replica's Python at a time. No vdev call is
made with the GIL held while it waits for another thread, so a replica
waiting in a collective never blocks the one it waits for.

The callback sets the thread's replica context (vdev._strategy_context),
gives each replica its part of the arguments (a PerReplica's component, its
rows of a DistributedBatch), calls step_fn, and keeps the tensors it
returns out of the step's tensor scope (vdev_keep; the C strategy frees
every other tensor the step made when it returns). An exception in step_fn
is caught there (ctypes would otherwise print it and return 0, VDEV_OK):
the callback returns a failure status, so vdev aborts the collectives the
other replicas wait in, every replica's step ends, and the update is all or
nothing (vdev_replica_apply_gradients updates no replica unless every
replica got that far). vdev names the replica that failed first (not one
that failed only because another did): run() raises that replica's
exception, a vdev error with vdev's message "replica R (<device>): ..."
and a Python exception as it was raised (with a note naming the replica).

Lifetime: a strategy's replica threads live until it is freed (its
``__del__``, or vdev.shutdown(), which frees every live strategy and
communicator first, as vdev requires).
"""

import ctypes
import itertools
import re
import threading
import traceback
import weakref

from .. import _lib, _strategy_context as _context, errors, random
from .._device import device, on_device_of
from .._lib import lib
from .._tensor import Tensor, _initial_handle, constant
from ._values import (DistributedBatch, MirroredVariable, PerReplica, handles_of, mirror_tensor,
                      reduce_code, ReduceOp)
from . import _values

_VALUE = {_lib.INVALID_ARG: ValueError, _lib.NOT_FOUND: ValueError}
_CODES = {name: i for i, name in enumerate(_lib.STATUS_NAMES)}
_INTERNAL = _CODES["VDEV_ERR_INTERNAL"]
# The classes vdev raises its own errors with (rebuilt with the replica named)
_VDEV_ERRORS = frozenset(c for c in vars(errors).values()
                         if isinstance(c, type) and issubclass(c, errors.OpError))

_live = weakref.WeakSet()  # strategies and communicators, freed by vdev.shutdown()
_pending = []              # handles of strategies collected on a replica thread
_pending_lock = threading.Lock()


def free_all():
    """Frees every live strategy and communicator (before vdev_shutdown)."""
    for obj in list(_live):
        obj._free()
    _free_pending()


def _free_pending():
    with _pending_lock:
        hs, _pending[:] = list(_pending), []
    for h in hs:
        lib.vdev_strategy_free(h)


def _map(x, leaf):
    """x with leaf() applied to every leaf of its tuples, lists and dicts."""
    if isinstance(x, Tensor):
        return leaf(x)
    if isinstance(x, tuple):
        vals = [_map(v, leaf) for v in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [_map(v, leaf) for v in x]
    if isinstance(x, dict):
        return {k: _map(v, leaf) for k, v in x.items()}
    return leaf(x)


def _leaves(x, out):
    if isinstance(x, (tuple, list)) and not isinstance(x, Tensor):
        for v in x:
            _leaves(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _leaves(v, out)
    else:
        out.append(x)
    return out


def _regroup(values):
    """One structure with PerReplica leaves from one structure per replica
    (a leaf that is the same object on every replica stays as it is)."""
    v0 = values[0]
    if isinstance(v0, (tuple, list)) and not isinstance(v0, Tensor):
        if any(type(v) is not type(v0) or len(v) != len(v0) for v in values):
            raise ValueError("the step function returned values of different structures on "
                             "different replicas")
        parts = [_regroup([v[i] for v in values]) for i in range(len(v0))]
        if isinstance(v0, list):
            return parts
        return type(v0)(*parts) if hasattr(v0, "_fields") else tuple(parts)
    if isinstance(v0, dict):
        if any(not isinstance(v, dict) or v.keys() != v0.keys() for v in values):
            raise ValueError("the step function returned values of different structures on "
                             "different replicas")
        return {k: _regroup([v[k] for v in values]) for k in v0}
    if all(v is v0 for v in values):
        return v0
    return PerReplica(values)


class ReplicaContext:
    """``tf.distribute.ReplicaContext``: what a step function knows of its
    replica (``vdev.distribute.get_replica_context()`` inside strategy.run).
    Valid on its replica's thread while the step runs."""

    __slots__ = ("strategy", "_h", "replica_id_in_sync_group", "_live", "_batches", "_seed_base",
                 "_draws")

    def __init__(self, strategy, handle, replica_id, seed_base=0):
        self.strategy = strategy
        self._h = handle
        self.replica_id_in_sync_group = replica_id
        self._live = True
        self._batches = set()  # (global rows, this replica's rows) of each batch split
        self._seed_base = seed_base  # the run's seed from vdev.random's counter
        self._draws = 0              # this replica's seed=None draws so far

    def _next_seed(self):
        """The seed of this replica's next seed=None draw (vdev.random): fixed
        by the run, the replica and the draw's rank, never by timing."""
        k = self._draws
        self._draws += 1
        return random.replica_seed(self._seed_base, self.replica_id_in_sync_group, k)

    @property
    def num_replicas_in_sync(self):
        return self.strategy.num_replicas_in_sync

    @property
    def devices(self):
        """(the replica's device,) as TensorFlow's."""
        return (self.strategy.extended.worker_devices[self.replica_id_in_sync_group],)

    def _check(self):
        if not self._live or _context.replica() is not self:
            raise RuntimeError("a ReplicaContext is used outside its step function (or on "
                               "another thread)")
        return self._h

    def all_reduce(self, reduce_op, value, options=None):
        """value (a tensor, or a tuple/list/dict of them) summed or averaged
        over the replicas: new tensors on this replica's device, the same on
        every replica. Every replica must call it with the same shapes.
        options: None only (vdev takes no collective hints)."""
        h = self._check()
        if options is not None:
            raise ValueError("vdev takes no collective options")
        code = reduce_code(reduce_op)
        flat = [v if isinstance(v, Tensor) else constant(v) for v in _leaves(value, [])]
        n = len(flat)
        out = _lib.handles([None] * n)
        _lib.check(lib.vdev_replica_all_reduce(h, code, handles_of(flat), n, out))
        it = iter([Tensor(out[i]) for i in range(n)])
        return _map(value, lambda _v: next(it))

    def __repr__(self):
        return "ReplicaContext(replica %d of %d)" % (self.replica_id_in_sync_group,
                                                     self.num_replicas_in_sync)


class ValueContext:
    """What experimental_distribute_values_from_function's function is told."""

    __slots__ = ("replica_id_in_sync_group", "num_replicas_in_sync")

    def __init__(self, replica_id, n):
        self.replica_id_in_sync_group = replica_id
        self.num_replicas_in_sync = n


class _Run:
    __slots__ = ("strategy", "fn", "args", "kwargs", "results", "errors", "seed_base")

    def __init__(self, strategy, fn, args, kwargs):
        self.strategy, self.fn, self.args, self.kwargs = strategy, fn, args, kwargs
        self.results = [None] * strategy.num_replicas_in_sync
        self.errors = {}
        self.seed_base = random._seed(None)  # on the caller's thread, in program order


_runs = {}
_run_keys = itertools.count(1)


def _status_of(e):
    if isinstance(e, errors.OpError):
        return _CODES.get(e.status, _INTERNAL)
    return _INTERNAL


def _add_note(e, note):
    """e.add_note(note) (Python 3.11); before it, the same __notes__ list,
    which those tracebacks do not print."""
    if hasattr(e, "add_note"):
        e.add_note(note)
        return
    try:
        e.__notes__ = list(getattr(e, "__notes__", ())) + [note]
    except AttributeError:
        pass


def _replica_main(ctx_h, key):
    """The C step function of every run, on a replica's thread, GIL held."""
    run = _runs.get(key)
    if run is None:  # cannot happen: run() keeps the key until the C call returns
        return _INTERNAL
    rid = lib.vdev_replica_id(ctx_h)
    rctx = ReplicaContext(run.strategy, ctx_h, rid, run.seed_base)
    _context.set_replica(rctx)
    try:
        args = _map(run.args, rctx.strategy._local_leaf(rctx))
        kwargs = _map(run.kwargs, rctx.strategy._local_leaf(rctx))
        out = run.fn(*args, **kwargs)
        for t in _leaves(out, []):
            if isinstance(t, Tensor) and not isinstance(t, MirroredVariable):
                _lib.made(lib.vdev_keep(t._handle))  # survives the step's scope
        run.results[rid] = out
        return _lib.OK
    except BaseException as e:  # noqa: B902 (every exception fails the step)
        run.errors[rid] = e
        traceback.clear_frames(e.__traceback__)  # its tensors go now, on this thread
        return _status_of(e)
    finally:
        rctx._live = False
        _context.set_replica(None)


_REPLICA_MAIN = _lib.REPLICA_FN(_replica_main)


class _Extended:
    """``strategy.extended``: the devices."""

    __slots__ = ("worker_devices",)

    def __init__(self, devices):
        self.worker_devices = devices

    @property
    def parameter_devices(self):
        return self.worker_devices


class _Scope:
    __slots__ = ("_s",)

    def __init__(self, strategy):
        self._s = strategy

    def __enter__(self):
        # TensorFlow's: another strategy's scope or step is "Mixing ...", this
        # strategy's step needs cross-replica context (both RuntimeError)
        _context.require_cross_replica(self._s)
        self._s._handle_now()
        _context.push_scope(self._s)
        return self._s

    def __exit__(self, *exc):
        _context.pop_scope(self._s)
        return False


def _wide_ids(x):
    """x as a NumPy integer array when it holds an id outside int32 (an
    int64 batch of ids TensorFlow keeps as it is), else None."""
    import numpy as np
    if not isinstance(x, (list, tuple, np.ndarray)):
        return None
    try:
        a = np.asarray(x)
    except ValueError:
        return None
    if a.dtype.kind not in "iu" or not a.size or a.ndim < 1:
        return None
    return a if a.min() < -2 ** 31 or a.max() >= 2 ** 31 else None


class _WideBatch(DistributedBatch):
    """A global batch of int ids some of which are outside int32 (vdev's
    tensors hold int32 ids; TensorFlow keeps int64 ones): each replica gets
    its rows, split as any batch is (global_batch is the row numbers), as a
    NumPy array, so the lookup that takes them (vdev.gather, an Embedding)
    gives TensorFlow's InvalidArgumentError for the replica's first id
    outside the table ("indices[0,1] = 4294967296 is not in [0, 10)"), as
    each replica's GatherV2 does in TensorFlow, instead of a conversion
    error here."""

    __slots__ = ("ids",)

    def __init__(self, strategy, ids):
        import numpy as np
        with device("CPU:0"):
            rows = constant(np.arange(ids.shape[0], dtype=np.int32))
        super().__init__(strategy, rows)
        self.ids = ids

    @property
    def shape(self):
        return self.ids.shape


class MirroredStrategy:
    """``tf.distribute.MirroredStrategy``: one replica on each of `devices`
    (logical device names; None: every logical GPU, else every logical
    CPU). Starts the runtime and one host thread per replica.

        strategy = vdev.distribute.MirroredStrategy()
        with strategy.scope():
            model = vdev.models.MLP([32, 256, 4], seed=1)   # MirroredVariables
            optimizer = vdev.optimizers.Adam(0.003)          # one per replica
        for x, y in strategy.experimental_distribute_dataset(batches):
            losses = strategy.run(step_fn, args=(x, y))
            loss = strategy.reduce("SUM", losses, axis=None)
    """

    def __init__(self, devices=None, cross_device_ops=None):
        self._h = None
        if cross_device_ops is not None:
            raise ValueError("vdev reduces with its own ring all-reduce; cross_device_ops "
                             "must be None")
        out = ctypes.c_void_p()
        if devices is None:
            _lib.check(lib.vdev_mirrored_strategy_new(None, 0, ctypes.byref(out)), _VALUE)
        else:
            if isinstance(devices, str):
                raise ValueError("devices must be a list of device names, not the string %r"
                                 % (devices,))
            names = [getattr(d, "name", d) for d in devices]
            arr = (ctypes.c_char_p * max(len(names), 1))(*[_lib.enc(d) for d in names])
            _lib.check(lib.vdev_mirrored_strategy_new(arr, len(names), ctypes.byref(out)),
                       _VALUE)
        self._h = out.value
        n = lib.vdev_strategy_num_replicas_in_sync(self._h)
        self._n = n
        self.extended = _Extended(tuple(lib.vdev_strategy_device(self._h, r).decode()
                                        for r in range(n)))
        _live.add(self)

    # ---- life ----
    def _free(self):
        h, self._h = self._h, None
        _live.discard(self)
        if not h:
            return
        if _context.replica() is not None:  # vdev refuses it from a step: later
            with _pending_lock:
                _pending.append(h)
        else:
            lib.vdev_strategy_free(h)

    def __del__(self):
        if getattr(self, "_h", None):
            self._free()

    # A strategy is a set of devices and their threads, shared as a device
    # is: copies (a deepcopied model's layers) are the strategy itself.
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle a vdev MirroredStrategy: it holds vdev's replica threads "
                        "and collectives; make a new one where it is unpickled")

    def _handle_now(self):
        if self._h is None:
            raise RuntimeError("the strategy was freed (vdev.shutdown() frees every strategy)")
        return self._h

    def __repr__(self):
        return "MirroredStrategy(devices=%r)" % (self.extended.worker_devices,)

    # ---- what it is ----
    @property
    def num_replicas_in_sync(self):
        return self._n

    def scope(self):
        """Variables, layers and optimizers made inside are mirrored: a copy
        of each variable on every replica's device (made on the host, then
        copied, so they start identical), one optimizer per replica."""
        return _Scope(self)

    def _make_variable(self, initial_value, trainable, name, dtype):
        self._handle_now()
        with device("CPU:0"):
            t = Tensor(_initial_handle(initial_value, dtype))
        return mirror_tensor(self, t, trainable, name)

    # ---- input ----
    def _batch(self, x):
        if isinstance(x, DistributedBatch):
            return x
        if not isinstance(x, Tensor):
            wide = _wide_ids(x)
            if wide is not None:
                return _WideBatch(self, wide)
            with device("CPU:0"):
                x = constant(x)
        return DistributedBatch(self, x)

    def experimental_distribute_dataset(self, dataset, options=None):
        """Each element of `dataset` (an iterable of global batches: tensors,
        numpy arrays, lists, or tuples/dicts of them) as DistributedBatches:
        inside strategy.run every replica gets its rows of each, on its own
        device. Arrays and lists are made into tensors on the host (CPU:0)."""
        if options is not None:
            raise ValueError("vdev takes no input options")
        return _DistributedDataset(self, dataset)

    def experimental_distribute_values_from_function(self, value_fn):
        """PerReplica of value_fn(ctx) for each replica (ctx:
        replica_id_in_sync_group, num_replicas_in_sync), each called in a
        device scope of its replica's device."""
        out = []
        for r, dev in enumerate(self.extended.worker_devices):
            with device(dev):
                out.append(value_fn(ValueContext(r, self._n)))
        return PerReplica(out)

    def experimental_local_results(self, value):
        """The components of a distributed value, in replica order; (value,)
        for anything else."""
        if isinstance(value, (PerReplica, MirroredVariable)):
            return tuple(value.values)
        return (value,)

    def set_batch_proportions(self, proportions):
        """vdev's own: split later global batches in these proportions (one
        per replica, > 0) instead of evenly, for devices of unequal speed or
        memory; None goes back to even. Each replica's share is fixed by the
        batch's size alone."""
        h = self._handle_now()
        if proportions is None:
            _lib.check(lib.vdev_strategy_set_batch_proportions(h, None, 0), _VALUE)
            return
        p = [float(x) for x in proportions]
        arr = (ctypes.c_double * max(len(p), 1))(*p)
        _lib.check(lib.vdev_strategy_set_batch_proportions(h, arr, len(p)), _VALUE)

    def _local_leaf(self, rctx):
        rid = rctx.replica_id_in_sync_group

        def leaf(x):
            if isinstance(x, PerReplica):
                if len(x.values) != self._n:
                    raise ValueError("a PerReplica value of %d components given to a strategy "
                                     "of %d replicas" % (len(x.values), self._n))
                return x.values[rid]
            if isinstance(x, DistributedBatch):
                if x._strategy is not self:
                    raise ValueError("a DistributedBatch of another strategy")
                t = Tensor(_lib.made(lib.vdev_replica_batch(rctx._h, x.global_batch._handle)))
                rctx._batches.add((int(x.global_batch.shape[0]), int(t.shape[0])))
                if isinstance(x, _WideBatch):  # the replica's rows, as NumPy ids
                    return x.ids[t.numpy()]
                return t
            return x
        return leaf

    # ---- running ----
    def run(self, fn, args=(), kwargs=None, options=None):
        """Runs fn(*args, **kwargs) on every replica at once, each on its
        replica's thread in a device scope of its device, and returns what
        they return: a PerReplica where the replicas' values differ (a plain
        value where they are one object, and with one replica). Arguments
        that are PerReplica or DistributedBatch give each replica its own
        part; others are passed as they are. Tensors a step makes and does
        not return are freed when it ends. A failure on one replica fails
        the step on all (see the module's notes) and raises here."""
        if not callable(fn):
            raise TypeError("strategy.run takes a function, not %r" % (fn,))
        if options is not None:
            raise ValueError("vdev takes no run options")
        _context.require_cross_replica(self)  # TensorFlow's run enters self.scope()
        h = self._handle_now()
        run = _Run(self, fn, tuple(args), dict(kwargs or {}))
        key = next(_run_keys)
        _runs[key] = run
        try:
            st = lib.vdev_strategy_run(h, _REPLICA_MAIN, key, None)
        finally:
            del _runs[key]
        if _context.replica() is None:
            _free_pending()
        if st != _lib.OK:
            raise self._failure(st, run)
        return _regroup(run.results)

    def _failure(self, st, run):
        msg = _lib.last_error()
        m = re.match(r"replica (\d+) \((.*?)\): ", msg)
        e = run.errors.get(int(m.group(1))) if m else None
        if e is None:
            return _lib.error(st)
        r, dev = int(m.group(1)), m.group(2)
        where = "replica %d (%s): " % (r, dev)
        if type(e) in _VDEV_ERRORS and e.status is not None:
            # one vdev raised: its message names the replica (and an OOM's
            # report, which starts with the message, keeps the rest)
            if isinstance(e, errors.OutOfMemoryError):
                new = type(e)(where + e.message, e.status,
                              report=where + e._report if e._report else None)
            else:
                new = type(e)(where + e.message, e.status)
            new.__cause__ = e
            return new
        # the step's own exception (a user's OpError subclass too) as it was
        _add_note(e, "(raised by the step function on replica %d, %s)" % (r, dev))
        return e

    # ---- reducing ----
    def reduce(self, reduce_op, value, axis=None):
        """The sum or mean ('SUM', 'MEAN' in any case, or ReduceOp) of a
        per-replica value over the replicas, added in replica order, on the
        current device scope, else CPU:0. axis: also over that axis of each
        component (MEAN then divides by the rows of every replica together).
        A value that is not per-replica: MEAN gives it back, SUM only with
        one replica (TensorFlow's rule)."""
        _context.require_cross_replica(self)
        op = _values.reduce_op(reduce_op)
        h = self._handle_now()
        if isinstance(value, MirroredVariable):
            value = value.read_value()
        if not isinstance(value, PerReplica):
            if op is ReduceOp.MEAN:
                return value
            if self._n != 1:
                if not isinstance(value, Tensor) and value == 0:
                    return value
                raise ValueError("A non-DistributedValues value %s cannot be reduced with the "
                                 "given reduce op %s." % (value, op))
            value = PerReplica([value if isinstance(value, Tensor) else constant(value)])
        vals = list(value.values)
        if len(vals) != self._n:
            raise ValueError("a PerReplica value of %d components given to a strategy of %d "
                             "replicas" % (len(vals), self._n))
        vals = [v if isinstance(v, Tensor) else constant(v) for v in vals]
        if axis is None:
            return Tensor(_lib.made(lib.vdev_strategy_reduce(h, reduce_code(op),
                                                             handles_of(vals))))
        from .. import _ops
        ax = _ops._axis(axis)
        count = 0
        sums = []
        for v in vals:
            with on_device_of(v):
                sums.append(_ops.reduce_sum(v, axis=ax))
            count += v.shape[ax]
        total = Tensor(_lib.made(lib.vdev_strategy_reduce(h, reduce_code(ReduceOp.SUM),
                                                          handles_of(sums))))
        return _ops.divide(total, float(count)) if op is ReduceOp.MEAN else total

    # ---- memory ----
    def memory_info(self, replica):
        """vdev's own: get_memory_info of a replica's device."""
        from ..config.experimental import _memory_info_dict
        mi = _lib.MemoryInfoC()
        _lib.check(lib.vdev_strategy_memory_info(self._handle_now(),
                                                 _lib.index(replica, "replica"),
                                                 ctypes.byref(mi)), _VALUE)
        return _memory_info_dict(mi)

    def memory_imbalance(self):
        """vdev's own: the largest peak in use among the replicas' devices over
        the smallest (1.0: balanced)."""
        return float(lib.vdev_strategy_memory_imbalance(self._handle_now()))


class _DistributedDataset:
    """What experimental_distribute_dataset returns: iterating gives each
    element with DistributedBatch leaves (tuples and dicts are structure)."""

    def __init__(self, strategy, dataset):
        self._strategy = strategy
        self._dataset = dataset

    def _element(self, x):
        if isinstance(x, tuple):
            vals = [self._element(v) for v in x]
            return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
        if isinstance(x, dict):
            return {k: self._element(v) for k, v in x.items()}
        return self._strategy._batch(x)

    def __iter__(self):
        for x in self._dataset:
            yield self._element(x)
