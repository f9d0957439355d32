"""Distributed values, as ``tf.distribute``'s: ``PerReplica`` (one value per
replica, what ``strategy.run`` returns), ``MirroredVariable`` (a variable
made under ``strategy.scope()``: one vdev variable on each replica's device,
identical), and ``DistributedBatch`` (a global batch that each replica cuts
its rows from inside ``strategy.run``).

A MirroredVariable holds one vdev handle per replica. The handle an op gets
(``_handle``) is chosen by the calling thread: inside a step function, the
replica's own; elsewhere, replica 0's (its "primary"), so ops, tapes and
optimizers take a MirroredVariable wherever they take a Variable and work on
the replica's copy. Reading it outside a step (``.numpy()``) reads the
primary; assigning it there writes every replica; assigning it inside a step
is an error (each replica would write its own copy and they would drift),
as TensorFlow's default aggregation NONE is. The optimizers' update inside
a step goes through ``vdev_replica_apply_gradients``, which keeps the copies
identical.
"""

import enum

import numpy as np

from .. import _lib
from .._lib import lib
from .._tensor import Variable, _copy_raw, _variable_handle, convert_to_tensor
from .. import _strategy_context as _context


class ReduceOp(enum.Enum):
    """``tf.distribute.ReduceOp``: SUM or MEAN. ``ReduceOp('SUM')`` works;
    strategy.reduce also takes 'sum'/'mean' in any case."""

    SUM = "SUM"
    MEAN = "MEAN"


_REDUCE_CODES = {ReduceOp.SUM: 0, ReduceOp.MEAN: 1}  # enum vdev_reduce_op


def reduce_op(op):
    """The ReduceOp of a ReduceOp or a string (TensorFlow's ValueError else)."""
    if isinstance(op, str):
        op = ReduceOp(op.upper())
    if not isinstance(op, ReduceOp):
        raise ValueError("%r is not a valid ReduceOp" % (op,))
    return op


def reduce_code(op):
    return _REDUCE_CODES[reduce_op(op)]


class DistributedValues:
    """Base of the values that have one component per replica."""

    __slots__ = ()


class PerReplica(DistributedValues):
    """One value per replica, in replica order (``.values``)."""

    __slots__ = ("_values",)

    def __init__(self, values):
        self._values = tuple(values)

    @property
    def values(self):
        return self._values

    def __len__(self):
        return len(self._values)

    def _show(self, show):
        """TensorFlow's form: each replica's value (show(value)), one a line."""
        return "PerReplica:{\n%s\n}" % ",\n".join(
            "  %d: %s" % (i, show(v)) for i, v in enumerate(self._values))

    def __repr__(self):
        return self._show(repr)

    def __str__(self):
        return self._show(str)


class DistributedBatch(DistributedValues):
    """A global batch (rows along axis 0) for ``strategy.run``: each replica
    gets its rows, copied to its device, by vdev_replica_batch (evenly, the
    first B mod n replicas a row more, or in the strategy's batch
    proportions). The global tensor stays where it is (keep it on the host,
    CPU:0, so no replica's device holds more than another's)."""

    __slots__ = ("global_batch", "_strategy")

    def __init__(self, strategy, global_batch):
        self._strategy = strategy
        self.global_batch = global_batch

    @property
    def shape(self):
        return self.global_batch.shape

    def __repr__(self):
        return "DistributedBatch(%r)" % (self.global_batch,)


class _ReplicaView(Variable):
    """One replica's copy of a MirroredVariable, borrowed: freeing it frees
    nothing (the MirroredVariable owns the handle) and it keeps its owner alive."""

    __slots__ = ("_owner",)

    def __del__(self):
        self._h = None

    def _copy_type(self):
        return Variable  # a copy owns its memory: a plain variable


class MirroredVariable(Variable):
    """A variable made under ``strategy.scope()``: one copy per replica,
    identical, each on its replica's device (``.values``)."""

    __slots__ = ("_handles", "_strategy")

    def __init__(self, *args, **kwargs):
        # Made complete by _make; Variable.__new__ hands out made instances
        # and Python then calls __init__ with the constructor's arguments.
        pass

    @classmethod
    def _make(cls, strategy, initial, trainable=True, name=None):
        """Copies the tensor `initial` to every replica's device, each copy a
        vdev variable. Frees what it made if one fails."""
        return cls._of_handles(strategy, _variable_handles(
            _lib.made(lib.vdev_tensor_to(initial._handle, dev.encode()))
            for dev in strategy.extended.worker_devices), trainable, name)

    @classmethod
    def _of_handles(cls, strategy, handles, trainable, name):
        """The MirroredVariable over one variable handle per replica."""
        self = object.__new__(cls)
        self._handles = handles
        self._h = handles[0]
        self._strategy = strategy
        self.trainable = bool(trainable)
        self.name = name if name is not None else "Variable"
        return self

    def __del__(self, _free=lib.vdev_tensor_free):
        hs = getattr(self, "_handles", ())
        self._handles = ()
        self._h = None
        for h in hs:
            _free(h)

    @property
    def _handle(self):
        if not self._handles:
            raise ValueError("the variable was freed")
        ctx = _context.replica()
        if ctx is not None and ctx.strategy is self._strategy:
            return self._handles[ctx.replica_id_in_sync_group]
        return self._handles[0]

    # ---- copies and pickling ----
    def __deepcopy__(self, memo):
        """A new MirroredVariable of the same strategy: each replica's copy
        copied on its own device."""
        return type(self)._of_handles(self._strategy, _variable_handles(
            _copy_raw(h) for h in self._replica_handles()), self.trainable, self.name)

    def __reduce__(self):
        """Pickles by value (replica 0's, as reads outside strategy.run
        give): unpickling makes ``vdev.Variable(value, trainable, name)``,
        which under a strategy's scope is a MirroredVariable of that strategy,
        else a plain variable on the current device scope."""
        return _mirrored_from_pickle, (np.asarray(self.numpy()), self.dtype.name,
                                       self.trainable, self.name)

    def _replica_handles(self):
        if not self._handles:
            raise ValueError("the variable was freed")
        return list(self._handles)

    @property
    def values(self):
        """Each replica's copy, a Variable (borrowed from this one)."""
        out = []
        for h in self._replica_handles():
            v = _ReplicaView(_handle=h, trainable=self.trainable, name=self.name)
            v._owner = self
            out.append(v)
        return tuple(out)

    def _check_cross_replica(self, what):
        if _context.replica() is not None:
            raise RuntimeError(
                "%s of a MirroredVariable inside strategy.run: each replica would write its "
                "own copy and the copies would drift apart. Update it through "
                "optimizer.apply_gradients, or outside strategy.run (every replica at once)"
                % what)

    def assign(self, value, use_locking=None, name=None, read_value=True):
        """Copies value into every replica's copy (outside strategy.run only);
        returns the variable, or None with read_value=False, as Variable.assign."""
        self._check_cross_replica("assign")
        v = convert_to_tensor(value, dtype=self.dtype)
        for h in self._replica_handles():
            _lib.check(lib.vdev_assign(h, v._handle))
        return self if read_value else None

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        """Adds delta to every replica's copy (outside strategy.run only)."""
        self._check_cross_replica("assign_add")
        return super().assign_add(delta, read_value=read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        """Subtracts delta from every replica's copy (outside strategy.run only)."""
        self._check_cross_replica("assign_sub")
        return super().assign_sub(delta, read_value=read_value)

    def __repr__(self):
        """TensorFlow's: each replica's copy as a variable prints, one a line."""
        try:
            return "MirroredVariable:{\n%s\n}" % ",\n".join(
                "  %d: <vdev.Variable '%s' shape=%s dtype=%s, device=%s, numpy=%r>" % (
                    i, self.name, tuple(v.shape), v.dtype.name, v.device, v.numpy())
                for i, v in enumerate(self.values))
        except Exception as e:
            return "<vdev.MirroredVariable: %s>" % e

    __str__ = __repr__  # a variable's str() is its repr in TensorFlow


def _variable_handles(fresh):
    """The fresh tensor handles `fresh` yields, each made a vdev variable in
    turn, as a tuple; when one fails, those made are freed and the error
    raised."""
    handles = []
    try:
        for h in fresh:
            handles.append(_variable_handle(h))
    except BaseException:
        for h in handles:
            lib.vdev_tensor_free(h)
        raise
    return tuple(handles)


def mirror_tensor(strategy, tensor, trainable=True, name=None):
    """A MirroredVariable from the fresh tensor `tensor` (which gives up
    its handle): copies on every replica's device."""
    try:
        return MirroredVariable._make(strategy, tensor, trainable, name)
    finally:
        h, tensor._h = tensor._h, None
        if h:
            lib.vdev_tensor_free(h)


def _mirrored_from_pickle(array, dtype, trainable, name):
    return Variable(array, trainable=trainable, name=name, dtype=dtype)


def handles_of(values):
    """A C array of the handles of Tensors (for vdev's per-replica calls)."""
    return _lib.handles([v._handle for v in values])

