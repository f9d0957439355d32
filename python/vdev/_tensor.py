"""Tensors: the Python object over a vdev tensor handle, dtypes and shapes,
conversion from Python and numpy values, and creation.

A ``Tensor`` holds one handle and frees it when the object goes
(``__del__`` → ``vdev_tensor_free``), exactly once. Handles are checked by
vdev: after ``vdev.shutdown()`` a tensor's handle is stale, using it raises
``InvalidArgumentError`` ("... belongs to a runtime that was shut down") and
freeing it only gives the slot back.

Python never opens vdev's tensor scopes: every tensor an op makes belongs to
its Python object, and Python's reference counting frees temporaries as soon
as the last name for them goes, which is what scopes do in C.
"""

import ctypes
import itertools
import numbers
import weakref

import numpy as np

from . import _indexing, _lib, _strategy_context
from ._updates import _check_update_input, _check_update_shape, _refuse
from ._lib import lib
from ._shape import TensorShape

_LONG_PREFIX = "/job:localhost/replica:0/task:0"

# Every live Variable by its handle, so that a list of handles vdev gives
# back (a tape's watched variables) maps to the user's own objects.
_VARIABLES = weakref.WeakValueDictionary()
# The non-trainable ones among them, which a tape that watches what it meets
# skips (_tape.py): a registry of those alone, so that a tape's start walks
# them and not every Variable.
_NON_TRAINABLE = weakref.WeakValueDictionary()
_MADE = itertools.count()  # Variables in order of construction (TensorFlow's unique ids)

# The C calls of the hot paths, bound once (a module attribute each time
# costs a lookup per call)
_ndim, _dim, _dtype_code = lib.vdev_tensor_ndim, lib.vdev_tensor_dim, lib.vdev_tensor_dtype
_to_host = lib.vdev_tensor_to_host
_F32, _I32, _BOOL = _lib.F32, _lib.I32, _lib.BOOL
_NP_F32, _NP_I32, _NP_BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)


class DType:
    """A tensor element type, as ``tf.DType``: ``vdev.float32``,
    ``vdev.int32``, ``vdev.bool``."""

    __slots__ = ("name", "_code", "as_numpy_dtype")

    def __init__(self, name, code, np_dtype):
        self.name = name
        self._code = code
        self.as_numpy_dtype = np_dtype

    @property
    def size(self):
        """Bytes an element takes in vdev's memory: 4 for every vdev dtype.
        A bool is one 32-bit word holding 0 or 1, so its size is 4 where
        TensorFlow's bool's is 1."""
        return 4

    @property
    def is_floating(self):
        return self._code == _F32

    @property
    def is_integer(self):
        return self._code == _I32

    @property
    def is_bool(self):
        """Whether this is ``vdev.bool``, as TensorFlow's ``DType.is_bool``."""
        return self._code == _BOOL

    def __eq__(self, other):
        try:
            return as_dtype(other) is self
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return "vdev.%s" % self.name


float32 = DType("float32", _F32, np.float32)
int32 = DType("int32", _I32, np.int32)
# TensorFlow's tf.bool, exported as vdev.bool: named bool_ in the package's
# modules, which keep Python's bool
bool_ = DType("bool", _BOOL, np.bool_)

_DTYPES = (float32, int32, bool_)  # by code
_NAMES = {"float32": float32, "float": float32, "int32": int32, "bool": bool_}


def as_dtype(x):
    """A vdev DType from a DType, a name ('float32', 'int32', 'bool'), or a
    numpy dtype or type; Python's ``bool`` is ``vdev.bool``, as
    ``tf.as_dtype(bool)`` is ``tf.bool``."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        try:
            return _NAMES[x]
        except KeyError:
            raise TypeError("vdev tensors are float32, int32 or bool, not %r" % x) from None
    try:
        d = np.dtype(x)
    except TypeError:
        raise TypeError("cannot interpret %r as a vdev dtype" % (x,)) from None
    if d == _NP_F32:
        return float32
    if d == _NP_I32:
        return int32
    if d == _NP_BOOL:
        return bool_
    raise TypeError("vdev tensors are float32, int32 or bool, not %s" % d)


def _dtype_of_code(code):
    """The DType of a vdev dtype code (enum vdev_dtype); a code that is none
    (a freed handle's) raises vdev's last error."""
    if 0 <= code < len(_DTYPES):
        return _DTYPES[code]
    raise _lib.error()


# A shape read from vdev: its sizes are ints >= 0 already, so the tuple is
# made without TensorShape's checks of each size (the same object).
_new_shape = tuple.__new__


class Tensor:
    """A vdev tensor, as TensorFlow's EagerTensor: ``.numpy()``, ``.shape``,
    ``.dtype``, ``.device``, ``.cpu()``, operators, and DLPack."""

    __slots__ = ("_h", "_keras_mask", "__weakref__")  # a mask: vdev/_keras_masks.py

    def __init__(self, handle):
        if not isinstance(handle, int) or isinstance(handle, bool):  # vdev's handles
            raise TypeError("vdev.Tensor(%r) is not how a tensor is made from a value: use "
                            "vdev.constant(value) or vdev.convert_to_tensor(value), as in "
                            "TensorFlow" % (handle,))
        self._h = handle

    def __del__(self, _free=lib.vdev_tensor_free):
        h = getattr(self, "_h", None)  # unset when __init__ failed
        self._h = None
        if h:
            _free(h)

    @property
    def _handle(self):
        if self._h is None:
            raise ValueError("the tensor was freed")
        return self._h

    # ---- what it is ----
    @property
    def shape(self):
        h = self._h
        if h is None:
            raise ValueError("the tensor was freed")
        nd = _ndim(h)
        if nd < 0:
            raise _lib.error()
        if nd == 2:
            return _new_shape(TensorShape, (_dim(h, 0), _dim(h, 1)))
        return _new_shape(TensorShape, [_dim(h, i) for i in range(nd)])

    def get_shape(self):
        """The shape, as ``.shape`` (TensorFlow's alias)."""
        return self.shape

    @property
    def name(self):
        """Undefined, as on TensorFlow's eager tensors (a Variable has one)."""
        raise AttributeError("Tensor.name is undefined when eager execution is enabled.")

    @property
    def ndim(self):
        nd = lib.vdev_tensor_ndim(self._handle)
        if nd < 0:
            raise _lib.error()
        return nd

    @property
    def dtype(self):
        h = self._h
        if h is None:
            raise ValueError("the tensor was freed")
        code = _dtype_code(h)
        if code == _F32:
            return float32
        if code == _I32:
            return int32
        if code == _BOOL:
            return bool_
        raise _lib.error()

    @property
    def device(self):
        """The device in TensorFlow's long form,
        '/job:localhost/replica:0/task:0/device:GPU:1'."""
        d = lib.vdev_tensor_device(self._handle)
        if d is None:
            raise _lib.error()
        return _LONG_PREFIX + d.decode()

    def numpy(self):
        """A numpy copy of the contents (a numpy scalar for a 0-dimensional
        tensor, as TensorFlow). Waits for the work that makes the tensor. A
        bool tensor's 32-bit words (0 or 1) are read and given as numpy's
        bool_, as TensorFlow gives its bool tensors."""
        shape, dt = self.shape, self.dtype
        words = dt is bool_
        out = np.empty(shape, dtype=np.int32 if words else dt.as_numpy_dtype)
        st = _to_host(self._handle, out.ctypes.data, out.nbytes)
        if st:
            raise _lib.error(st)
        if words:
            out = out.astype(np.bool_)  # nonzero: True
        return out[()] if out.ndim == 0 else out

    def __array__(self, dtype=None, copy=None):
        """numpy's protocol (numpy 2's copy= included): a new host array,
        always a copy, so copy=False is numpy's ValueError."""
        if copy is False:
            raise ValueError("Unable to avoid copy while creating an array as requested.")
        a = np.asarray(self.numpy())
        return a.astype(dtype) if dtype is not None else a

    def cpu(self):
        """A copy on CPU:0 (TensorFlow's ``EagerTensor.cpu()``); a recording
        tape differentiates through it."""
        return self._copy_to(b"CPU:0")

    def gpu(self, gpu_index=0):
        """A copy on GPU:gpu_index; a recording tape differentiates through it."""
        return self._copy_to(b"GPU:%d" % _lib.index(gpu_index, "gpu_index"))

    def _copy_to(self, device):
        """A copy on device (which must exist: soft placement does not
        apply), made by vdev_identity under that device's scope, so that a
        recording tape records it and the gradient flows back to self, as
        through TensorFlow's EagerTensor copies."""
        buf = ctypes.create_string_buffer(128)
        _lib.check(lib.vdev_device_canonical_name(_lib.enc(device), buf, len(buf)))
        _lib.check(lib.vdev_device_push(buf.value))
        try:
            return Tensor(_lib.made(lib.vdev_identity(self._handle)))
        finally:
            lib.vdev_device_pop()

    # ---- Python protocols ----
    def __len__(self):
        s = self.shape
        if not s:
            raise TypeError("Scalar tensor has no `len()`")
        return s[0]

    # Indexing along the leading axes and iteration over axis 0, as
    # TensorFlow's, where they pick contiguous rows (vdev/_indexing.py).
    def __getitem__(self, key):
        return _indexing.getitem(self, key)

    def __iter__(self):
        return _indexing.iterate(self)

    def __contains__(self, value):
        _indexing.refuse_contains(self, value)

    # bool(), float(), int(), complex(), operator.index(): numpy's on the
    # value, as TensorFlow's EagerTensor (and numpy's errors for a tensor
    # that is not a single element: "only size-1 arrays can be converted ...")
    def __bool__(self):
        return bool(self.numpy())

    def __float__(self):
        return float(self.numpy())

    def __int__(self):
        return int(self.numpy())

    def __complex__(self):
        return complex(self.numpy())

    def __index__(self):
        """An int32 tensor of rank 0 as an index: the value's own
        ``__index__``, as TensorFlow's EagerTensor, so a tensor of another
        rank is numpy's TypeError and a float32 scalar TensorFlow's
        AttributeError (numpy's float32 has no ``__index__``). A bool tensor
        is a TypeError: numpy's bool_ is no index (NumPy 1.x deprecates it,
        a warning, before refusing it), as vdev's own index arguments refuse
        a bool; ``int(t)`` gives its 0 or 1."""
        if _dtype_code(self._handle) == _BOOL:
            raise TypeError("a bool tensor cannot be interpreted as an integer index; "
                            "int(t) gives its 0 or 1")
        return self.numpy().__index__()

    def ref(self):
        """A hashable reference to this tensor, as TensorFlow's
        ``Tensor.ref()``: two references are equal when they refer to the
        same object; ``.deref()`` gives it back."""
        from ._reference import Reference
        return Reference(self)

    def __repr__(self):
        try:
            return "<vdev.Tensor: shape=%s, dtype=%s, device=%s, numpy=%r>" % (
                tuple(self.shape), self.dtype.name, self.device, self.numpy())
        except Exception as e:  # a stale handle still prints
            return "<vdev.Tensor: %s>" % e

    def __str__(self):
        try:
            return "vdev.Tensor(%s, shape=%s, dtype=%s)" % (self.numpy(), tuple(self.shape),
                                                            self.dtype.name)
        except Exception as e:  # print() of a stale tensor says why, as repr does
            return "<vdev.Tensor: %s>" % e

    def __format__(self, format_spec):
        """TensorFlow's: the value formatted as numpy formats it, so
        ``f"{loss:.4f}"`` works for a 0-d tensor and ``f"{t}"`` is its values."""
        return self.numpy().__format__(format_spec)

    __array_priority__ = 100  # numpy defers to our operators

    # ---- DLPack ----
    def __dlpack__(self, stream=None, *, max_version=None, dl_device=None, copy=None):
        # The DLPack protocol: a stream only means something for device
        # memory (kDLCUDA: an int, not 0; vdev waits for the device's whole stream
        # before any export, which covers every stream a consumer names);
        # host memory (the CPU, simulated GPUs) takes None only, as in NumPy.
        # The array API's keywords (2023.12): max_version is taken and the
        # capsule is DLPack 0.x's "dltensor" whatever it asks (the standard
        # lets a producer answer with another version: consumers check);
        # dl_device is the tensor's own device or a BufferError (vdev moves
        # nothing on export); copy=True exports a copy on the same device (that no
        # tape records), copy=False is what vdev always does.
        from . import dlpack
        if _dtype_code(self._handle) == _BOOL:
            # The protocol's BufferError for a dtype it cannot export (vdev's
            # C export refuses it too): vdev's bool element is a 32-bit
            # word, DLPack's (kDLBool) a byte, so the memory cannot be shared.
            # (A stale handle's code is none: the export below says why.)
            raise BufferError("a vdev bool tensor holds 32-bit words, which DLPack's 8-bit "
                              "bool cannot share; cast it to int32 first "
                              "(vdev.cast(t, vdev.int32))")
        if stream is not None:
            if dlpack.device_of(self)[0] != dlpack.kDLCUDA:
                raise RuntimeError("vdev only supports stream=None for a tensor in host memory "
                                   "(kDLCPU), as NumPy does.")
            if not isinstance(stream, int) or isinstance(stream, bool):
                raise TypeError("stream must be an int or None, not %s" % type(stream).__name__)
            # the array API's CUDA values: -1 (no synchronization), 1 (the
            # legacy default stream), 2 (the per-thread one), > 2 a stream;
            # 0 is disallowed as ambiguous (None, 1 or 2?)
            if stream == 0 or stream < -1:
                raise ValueError("stream %d is not a CUDA stream of the DLPack protocol: it is "
                                 "None, -1, 1 (the legacy default stream), 2 (the per-thread "
                                 "default stream) or a stream above 2; 0 is ambiguous"
                                 % stream)
        if max_version is not None and not dlpack.is_int_pair(max_version):
            raise TypeError("max_version must be None or a (major, minor) tuple of ints, not %r"
                            % (max_version,))
        dlpack.check_copy(copy)
        if dl_device is not None:
            own = dlpack.device_of(self)
            if not dlpack.is_int_pair(dl_device):
                raise TypeError("dl_device must be None or a (device type, device id) tuple "
                                "of ints, not %r" % (dl_device,))
            asked = (int(dl_device[0]), int(dl_device[1]))  # an IntEnum reads as its value
            if asked != own:
                raise BufferError("vdev exports a tensor on its own device only: this one is on "
                                  "%r (__dlpack_device__), not dl_device %r" % (own, asked))
        return dlpack.to_capsule(dlpack.copy_of(self) if copy else self)

    def __dlpack_device__(self):
        from . import dlpack
        return dlpack.device_of(self)

    # ---- operators (vdev._ops) ----
    def __add__(self, other):
        return _ops().add(self, other)

    def __radd__(self, other):
        return _ops().add(other, self)

    def __sub__(self, other):
        return _ops().subtract(self, other)

    def __rsub__(self, other):
        return _ops().subtract(other, self)

    def __mul__(self, other):
        return _ops().multiply(self, other)

    def __rmul__(self, other):
        return _ops().multiply(other, self)

    def __truediv__(self, other):
        return _ops().divide(self, other)

    def __rtruediv__(self, other):
        return _ops().divide(other, self)

    def __floordiv__(self, other):
        return _more().floordiv(self, other)

    def __rfloordiv__(self, other):
        return _more().floordiv(other, self)

    def __mod__(self, other):
        return _more().floormod(self, other)

    def __rmod__(self, other):
        return _more().floormod(other, self)

    def __matmul__(self, other):
        return _ops().matmul(self, other)

    def __rmatmul__(self, other):
        # TensorFlow's r_binary_op_wrapper: the value takes this tensor's dtype
        ops = _ops()
        if not isinstance(other, Tensor):
            other = ops._like(other, self)
        return ops.matmul(other, self)

    def __neg__(self):
        return _ops().negative(self)

    # Comparisons and logic (vdev/_logic_ops.py), elementwise as TensorFlow's.
    # == and != stay Python's identity here, so tensors stay hashable (dict
    # keys, sets): TensorFlow 2's are elementwise; vdev.equal is that.
    def __lt__(self, other):
        return _logic().less(self, other)

    def __le__(self, other):
        return _logic().less_equal(self, other)

    def __gt__(self, other):
        return _logic().greater(self, other)

    def __ge__(self, other):
        return _logic().greater_equal(self, other)

    def __and__(self, other):
        return _logic().logical_and(self, other)

    def __rand__(self, other):
        return _logic().logical_and(other, self)

    def __or__(self, other):
        return _logic().logical_or(self, other)

    def __ror__(self, other):
        return _logic().logical_or(other, self)

    def __xor__(self, other):
        return _logic().logical_xor(self, other)

    def __rxor__(self, other):
        return _logic().logical_xor(other, self)

    def __invert__(self):
        return _logic().logical_not(self)

    # No __pos__: TensorFlow's tensors have none, so ``+t`` is Python's
    # TypeError "bad operand type for unary +".

    def __pow__(self, p):
        return _ops().pow(self, p)

    def __rpow__(self, base):
        return _ops().pow(base, self)

    # ---- copies and pickling ----
    def __copy__(self):
        """The tensor itself: tensors are immutable (TensorFlow's EagerTensor
        returns itself too), and two Python objects never share a handle."""
        return self

    def __deepcopy__(self, memo):
        """An independent copy, same values and dtype, on the same device
        (TensorFlow's EagerTensor returns itself; a vdev tensor may be a view
        of a variable, so this copies)."""
        return Tensor(_copy_handle(self))

    def __reduce__(self):
        """Pickles by value, as TensorFlow's EagerTensor: the numpy array and
        the device name as written (``.device``). Unpickling makes the tensor
        on that device, as ``with vdev.device(name):`` would: a device that
        does not exist there is a RuntimeError ("... unknown device"), unless
        soft placement is on (then GPU:0, else CPU:0)."""
        return _tensor_from_pickle, (np.asarray(self.numpy()), self.dtype.name, self.device)


_OPS = []  # vdev._ops once imported (it imports this module: bound at first use)


def _ops():
    if _OPS:
        return _OPS[0]
    from . import _ops as ops
    _OPS[:] = [ops]
    return ops


def _logic():
    from . import _logic_ops
    return _logic_ops


def _more():
    from . import _more_ops
    return _more_ops


def _wrap(h):
    """The Tensor over a handle a C call made (an int), else raises its
    failure (NULL): Tensor(_lib.made(h)) without __init__'s check of the
    handle's type, which the C call's result needs not."""
    if not h:
        raise _lib.error()
    t = _object_new(Tensor)
    t._h = h
    return t


_object_new = object.__new__


def _copy_handle(t):
    """A new handle holding a copy of t's values on t's own device."""
    return _copy_raw(t._handle)


def _copy_raw(h):
    """A new handle holding a copy of handle h's values on h's own device."""
    d = lib.vdev_tensor_device(h)
    if d is None:
        raise _lib.error()
    _lib.check(lib.vdev_device_push(d))
    try:
        return _lib.made(lib.vdev_identity(h))
    finally:
        lib.vdev_device_pop()


def _variable_handle(h):
    """The fresh tensor handle h made a vdev variable; when that fails, h is
    freed and vdev's error raised."""
    v = lib.vdev_variable(h)
    if not v:
        err = _lib.error()
        lib.vdev_tensor_free(h)
        raise err
    return v


def _handle_from_pickle(array, dtype, device):
    from ._device import device as device_scope
    with device_scope(device):
        return _from_value(array, dtype)


def _tensor_from_pickle(array, dtype, device):
    return Tensor(_handle_from_pickle(array, dtype, device))


def _variable_from_pickle(cls, array, dtype, device, trainable, name):
    return cls._adopt_handle(_handle_from_pickle(array, dtype, device), trainable, name)


class Variable(Tensor):
    """A variable, as ``tf.Variable``: a tensor that tapes differentiate
    against and optimizers update in place, on the device it was made on
    (the current device scope, else where its initial value lives). Its
    arguments are tf.Variable's, in its order: ``shape`` is checked against
    the initial value's (TensorFlow's ValueError), ``validate_shape`` taken
    (vdev's variables always keep their shape), and the arguments vdev has
    no use for (``caching_device``, ``constraint``, ...) only None."""

    __slots__ = ("_trainable", "name", "_made")

    @property
    def trainable(self):
        """Whether the optimizer trains it and a tape watches it when read."""
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        self._trainable = value
        if _VARIABLES.get(self._h) is self:
            if value:
                _NON_TRAINABLE.pop(self._h, None)
            else:
                _NON_TRAINABLE[self._h] = self

    def __new__(cls, initial_value=None, trainable=None, validate_shape=True,
                caching_device=None, name=None, variable_def=None, dtype=None,
                import_scope=None, constraint=None, synchronization=None, aggregation=None,
                shape=None, *, _handle=None):
        # Under a strategy's scope (outside a step function) a new variable is
        # mirrored: one copy on each replica's device (vdev.distribute). In a
        # step function each replica would make its own: refused.
        if cls is Variable and _handle is None:
            _variable_args(caching_device, variable_def, import_scope, constraint,
                           synchronization, aggregation)
            if _strategy_context.replica() is not None:
                raise _strategy_context.variable_in_step_error("a vdev.Variable is made")
            strategy = _strategy_context.mirroring_strategy()
            if strategy is not None:
                v = strategy._make_variable(
                    initial_value, True if trainable is None else trainable, name, dtype)
                _check_shape(v.shape, shape)
                return v
        return super().__new__(cls)

    def __init__(self, initial_value=None, trainable=None, validate_shape=True,
                 caching_device=None, name=None, variable_def=None, dtype=None,
                 import_scope=None, constraint=None, synchronization=None, aggregation=None,
                 shape=None, *, _handle=None):
        if _handle is None:
            _variable_args(caching_device, variable_def, import_scope, constraint,
                           synchronization, aggregation)
            h = _initial_handle(initial_value, dtype)
            try:
                nd = lib.vdev_tensor_ndim(h)
                _check_shape(TensorShape(lib.vdev_tensor_dim(h, i) for i in range(nd)), shape)
            except BaseException:
                lib.vdev_tensor_free(h)
                raise
            _handle = _variable_handle(h)
        super().__init__(_handle)
        _VARIABLES[_handle] = self
        self.trainable = True if trainable is None else trainable  # as TensorFlow's
        self.name = name if name is not None else "Variable"
        self._made = next(_MADE)

    def assign(self, value, use_locking=None, name=None, read_value=True):
        """Copies value into the variable (same shape and dtype); returns the
        variable, or None with read_value=False, as TensorFlow's eager
        assign. A value on another device is copied (and counted), or under
        the strict policy ('explicit') TensorFlow's error, as for any op."""
        v = convert_to_tensor(value, dtype=self.dtype)
        if v.shape != self.shape:  # TensorFlow's check, before any op
            raise ValueError("Cannot assign value to variable ' %s': Shape mismatch.The variable "
                             "shape %s, and the assigned value shape %s are incompatible."
                             % (self.name, tuple.__repr__(self.shape), tuple.__repr__(v.shape)))
        _check_update_input(self, v, "AssignVariableOp")
        _lib.check(lib.vdev_assign(self._handle, v._handle))
        return self if read_value else None

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        """Adds delta (a tensor, or a value converted with the variable's
        dtype, as assign converts it) in place, on the variable's device
        whatever device scope is open, as TensorFlow's AssignAddVariableOp: a
        delta on another device is copied there (or refused, as assign)."""
        self._update(delta, _ops().add, "AssignAddVariableOp")
        return self if read_value else None

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        """As assign_add, subtracting (TensorFlow's AssignSubVariableOp)."""
        self._update(delta, _ops().subtract, "AssignSubVariableOp")
        return self if read_value else None

    def _update(self, delta, op, op_name):
        from ._device import on_device_of
        if isinstance(delta, Tensor):
            convert_to_tensor(delta, dtype=self.dtype)  # TensorFlow's ValueError for a dtype
            _check_update_input(self, delta, op_name)
        _check_update_shape(self, delta)
        with on_device_of(self):
            self.assign(op(self, delta))

    def read_value(self):
        """A new tensor holding the variable's value now."""
        return Tensor(_lib.made(lib.vdev_identity(self._handle)))

    def value(self):
        """The variable's value, a tensor (as read_value; TensorFlow's
        ``Variable.value()``)."""
        return self.read_value()

    # ---- in-place operators: refused, as TensorFlow's ----
    # Without these, Python would run ``v -= lr * g`` as ``v = v - lr * g``:
    # the name would become a new tensor and the variable would never change.
    __iadd__ = _refuse("variable += value", "variable.assign_add(value)", "variable + value")
    __isub__ = _refuse("variable -= value", "variable.assign_sub(value)", "variable - value")
    __imul__ = _refuse("var *= value", "var.assign(var * value)", "var * value")
    __itruediv__ = _refuse("var /= value", "var.assign(var / value)", "var / value")
    __ipow__ = _refuse("var **= value", "var.assign(var ** value)", "var ** value")

    # ---- copies and pickling ----
    @classmethod
    def _adopt_handle(cls, h, trainable, name):
        """A variable of class cls over the fresh tensor handle h (made a
        vdev variable here; freed if that fails)."""
        v = _variable_handle(h)
        out = cls.__new__(cls, _handle=v)
        Variable.__init__(out, trainable=trainable, name=name, _handle=v)
        return out

    def _copy_type(self):
        return type(self)

    def __deepcopy__(self, memo):
        """An independent variable with the same values, dtype, device, name
        and trainable flag, as TensorFlow's deepcopy of a tf.Variable."""
        return self._copy_type()._adopt_handle(_copy_handle(self), self.trainable, self.name)

    def __copy__(self):
        """The same as deepcopy: a variable is mutable, so a copy is a new
        variable with its own memory (TensorFlow's copy.copy returns the
        variable itself)."""
        return self.__deepcopy__({})

    def __reduce__(self):
        """Pickles by value, as TensorFlow's tf.Variable: the numpy array,
        dtype, name, trainable flag and the device name as written
        (``.device``). Unpickling makes the variable on that device, as
        ``with vdev.device(name):`` would: a device that does not exist there
        is a RuntimeError ("... unknown device"), unless soft placement is on
        (then GPU:0, else CPU:0)."""
        return _variable_from_pickle, (self._copy_type(), np.asarray(self.numpy()),
                                       self.dtype.name, self.device, self.trainable, self.name)

    def __repr__(self):
        try:
            return "<vdev.Variable '%s' shape=%s dtype=%s, device=%s, numpy=%r>" % (
                self.name, tuple(self.shape), self.dtype.name, self.device, self.numpy())
        except Exception as e:
            return "<vdev.Variable: %s>" % e

    __str__ = __repr__  # a variable's str() is its repr in TensorFlow


def _variable_args(caching_device, variable_def, import_scope, constraint, synchronization,
                   aggregation):
    """Refuses the tf.Variable arguments vdev has no use for, naming them
    (each taken as None, its default)."""
    for arg, x, why in (("caching_device", caching_device, "no cached copies"),
                        ("variable_def", variable_def, "no graphs or VariableDef protos"),
                        ("import_scope", import_scope, "no graphs or VariableDef protos"),
                        ("constraint", constraint, "no variable constraints"),
                        ("synchronization", synchronization, "no variable synchronization "
                         "modes (a MirroredStrategy's variables are synchronized on write)"),
                        ("aggregation", aggregation, "no variable aggregation modes")):
        if x is not None:
            raise ValueError("vdev.Variable takes %s=None only, not %r: vdev has %s"
                             % (arg, x, why))


def _check_shape(value_shape, shape):
    """TensorFlow's ValueError when the shape given to tf.Variable does not
    fit its initial value's (None: no check)."""
    if shape is None:
        return
    want = shape if isinstance(shape, TensorShape) else TensorShape(shape)
    if not value_shape.is_compatible_with(want):
        raise ValueError("In this `tf.Variable` creation, the initial value's shape (%s) is not "
                         "compatible with the explicitly supplied `shape` argument (%s)."
                         % (tuple.__repr__(value_shape), tuple.__repr__(want)))


def _initial_handle(initial_value, dtype):
    """A new tensor handle holding a variable's initial value (a value, a
    tensor, or a callable giving one), on the current device scope."""
    if initial_value is None:
        raise ValueError("initial_value must be specified.")
    if callable(initial_value):
        initial_value = initial_value()
    if isinstance(initial_value, Tensor):
        if dtype is not None and as_dtype(dtype) is not initial_value.dtype:
            raise TypeError("initial_value is %s, not %s" % (initial_value.dtype.name,
                                                             as_dtype(dtype).name))
        return _lib.made(lib.vdev_identity(initial_value._handle))
    return _from_value(initial_value, dtype)


# conversion and creation (_creation.py), re-exported: the methods above and
# the other modules find them here
from ._creation import (_from_value, _shape_arg, _to_numpy, constant,  # noqa: E402,F401
                        convert_to_tensor, fill, ones, ones_like, zeros, zeros_like)
