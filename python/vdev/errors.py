"""Exceptions, named as TensorFlow's ``tf.errors``.

A failed op raises an ``OpError`` subclass chosen from vdev's status code, as
TensorFlow maps its status codes: a shape mismatch or a bad argument is
``InvalidArgumentError``, an unknown object ``NotFoundError``, memory
exhausted ``ResourceExhaustedError`` (vdev raises its subclass
``OutOfMemoryError``, which carries vdev's report: what was asked for, on which
device, what is in use of what limit, the largest free block, and what would
help), a truncated or damaged checkpoint ``DataLossError`` (as TensorFlow's
checkpoint reader), a checkpoint file the system refuses the class TensorFlow
gives its errno (ENOSPC ``ResourceExhaustedError``, EFBIG ``OutOfRangeError``,
EACCES/EPERM/EROFS ``PermissionDeniedError``, ENOENT ``NotFoundError`` ...:
``_ERRNO_CLASS``), another file error ``UnknownError``. Configuration calls
raise ``ValueError`` and ``RuntimeError`` where ``tf.config`` does. Each
exception's ``status`` is vdev's code name ("VDEV_ERR_OOM"), ``message`` the
text and ``error_code`` TensorFlow's code (``vdev.errors.DATA_LOSS`` ...).
The classes are built as TensorFlow's (``InvalidArgumentError(node_def, op,
message)``) and have its properties (``op`` and ``node_def`` are None in
vdev's own errors).

Every ``tf.errors`` class is here, with TensorFlow's code, so that
``except vdev.errors.AbortedError:`` is valid code; vdev itself raises
InvalidArgumentError, NotFoundError, ResourceExhaustedError (OutOfMemoryError),
UnimplementedError, InternalError, DataLossError and UnknownError, and for a
checkpoint file the system refuses the classes of _ERRNO_CLASS, and nothing
else (a collective that times out is InternalError with TensorFlow's message,
as vdev's C status has no deadline code).
"""

import errno
import os

# TensorFlow's error codes (tf.errors.OK ... tf.errors.UNAUTHENTICATED).
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


# The default of the arguments that vdev's short form leaves out.
_SHORT = type("_Short", (), {"__repr__": lambda self: "<vdev's short form>"})()


class _ErrorCode:
    """OpError.error_code: the error's code on an instance (TensorFlow's
    read-only property), the class's code on a class
    (InvalidArgumentError.error_code is INVALID_ARGUMENT)."""

    def __get__(self, obj, cls):
        return cls._code if obj is None else obj._error_code

    def __set__(self, obj, value):
        raise AttributeError("can't set attribute 'error_code'")


class OpError(Exception):
    """A vdev call failed (TensorFlow's ``tf.errors.OpError``).

    Built as TensorFlow's: ``OpError(node_def, op, message, error_code,
    *args)``, args[0] being the experimental payloads (a dict; {} without
    it), and each subclass ``Cls(node_def, op, message, *args)`` with its
    own code. ``message``, ``op``, ``node_def``, ``error_code`` and
    ``experimental_payloads`` are TensorFlow's read-only properties (vdev has
    no graph: the errors it raises have ``op`` and ``node_def`` None), and
    str() is the message. ``status`` is vdev's code name
    ("VDEV_ERR_SHAPE"; None for an error built in TensorFlow's form). vdev
    itself uses a short form, ``Cls(message)`` or ``Cls(message, status)``:
    fewer arguments than TensorFlow's three."""

    _code = UNKNOWN
    error_code = _ErrorCode()

    def __init__(self, node_def, op=_SHORT, message=_SHORT, error_code=_SHORT, *args):
        if message is _SHORT:
            self._fill(None, None, node_def, type(self)._code, (),
                       "VDEV_ERR_INTERNAL" if op is _SHORT else op)
        elif error_code is _SHORT:
            raise TypeError("__init__() missing 1 required positional argument: 'error_code'")
        else:
            self._fill(node_def, op, message, error_code, args, None)

    def _fill(self, node_def, op, message, error_code, args, status):
        super().__init__()
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code
        self._experimental_payloads = args[0] if args else {}
        self.status = status

    def __reduce__(self):
        # TensorFlow's arguments, then vdev's status (and an OOM's report)
        args = (self._node_def, self._op, self._message)
        if type(self) is OpError:
            args += (self._error_code,)
        if self._experimental_payloads:
            args += (self._experimental_payloads,)
        return self.__class__, args, {"status": self.status,
                                      "_report": getattr(self, "_report", None)}

    message = property(lambda self: self._message,
                       doc="The error message that describes the error.")
    op = property(lambda self: self._op, doc="The operation that failed, if known (None).")
    node_def = property(lambda self: self._node_def,
                        doc="The NodeDef of the op that failed, if known (None).")
    experimental_payloads = property(lambda self: self._experimental_payloads,
                                     doc="A dictionary describing the details of the error.")

    def __str__(self):
        return str(self._message)


def _subclass_init(self, node_def, op=_SHORT, message=_SHORT, *args):
    if message is _SHORT:
        OpError.__init__(self, node_def, op)
    else:
        OpError.__init__(self, node_def, op, message, type(self)._code, *args)


class CancelledError(OpError):
    """An operation or step was cancelled (TensorFlow's CANCELLED)."""

    _code = CANCELLED
    __init__ = _subclass_init


class UnknownError(OpError):
    """An error of no other class; vdev's file errors other than a damaged checkpoint."""

    _code = UNKNOWN
    __init__ = _subclass_init


class InvalidArgumentError(OpError):
    """A bad argument: a shape mismatch, a bad value, a stale tensor."""

    _code = INVALID_ARGUMENT
    __init__ = _subclass_init


class DeadlineExceededError(OpError):
    """A deadline passed before the operation finished."""

    _code = DEADLINE_EXCEEDED
    __init__ = _subclass_init


class NotFoundError(OpError):
    """Something named does not exist (a file, a checkpoint entry)."""

    _code = NOT_FOUND
    __init__ = _subclass_init


class AlreadyExistsError(OpError):
    """What an operation would make exists already."""

    _code = ALREADY_EXISTS
    __init__ = _subclass_init


class PermissionDeniedError(OpError):
    """The caller may not run the operation."""

    _code = PERMISSION_DENIED
    __init__ = _subclass_init


class ResourceExhaustedError(OpError):
    """A resource ran out; out of memory is its subclass OutOfMemoryError."""

    _code = RESOURCE_EXHAUSTED
    __init__ = _subclass_init


class FailedPreconditionError(OpError):
    """The system is not in the state the operation needs."""

    _code = FAILED_PRECONDITION
    __init__ = _subclass_init


class AbortedError(OpError):
    """The operation was aborted (a collective another replica aborted, say)."""

    _code = ABORTED
    __init__ = _subclass_init


class OutOfRangeError(OpError):
    """An operation went past the valid range (the end of an input)."""

    _code = OUT_OF_RANGE
    __init__ = _subclass_init


class UnimplementedError(OpError):
    """The operation is not supported (by vdev, or in this state)."""

    _code = UNIMPLEMENTED
    __init__ = _subclass_init


class InternalError(OpError):
    """An invariant broke inside vdev: a bug to report."""

    _code = INTERNAL
    __init__ = _subclass_init


class UnavailableError(OpError):
    """The service is unavailable for now; a retry may succeed."""

    _code = UNAVAILABLE
    __init__ = _subclass_init


class DataLossError(OpError):
    """Data were lost or damaged: a truncated or damaged checkpoint."""

    _code = DATA_LOSS
    __init__ = _subclass_init


class UnauthenticatedError(OpError):
    """The request lacks valid credentials."""

    _code = UNAUTHENTICATED
    __init__ = _subclass_init


class OutOfMemoryError(ResourceExhaustedError):
    """Device memory exhausted. ``report`` is vdev's whole out-of-memory
    report: with VDEV_OOM_REPORT=1 the message and then the allocator's state
    (bins, largest free block, biggest live blocks and the ops that made
    them, as printed on stderr), else the message alone. The device's memory
    is as it was before the failed call, so the caller may retry smaller.
    Built as ResourceExhaustedError, or in vdev's short form
    (message[, status]); report is a keyword."""

    def __init__(self, node_def, op=_SHORT, message=_SHORT, *args, report=None):
        if message is _SHORT:
            OpError.__init__(self, node_def, "VDEV_ERR_OOM" if op is _SHORT else op)
        else:
            OpError.__init__(self, node_def, op, message, RESOURCE_EXHAUSTED, *args)
        self._report = report

    @property
    def report(self):
        return self._report if self._report else self.message


_BY_CODE = {c.error_code: c for c in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
    AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError,
    AbortedError, OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
    DataLossError, UnauthenticatedError)}


def exception_type_from_error_code(error_code):
    """The class of a TensorFlow error code, as tf.errors'; KeyError for
    another number."""
    return _BY_CODE[error_code]


def error_code_from_exception_type(cls):
    """The TensorFlow error code of an OpError class, as tf.errors'."""
    return cls._code


_BY_STATUS = {
    1: InvalidArgumentError,      # VDEV_ERR_INVALID_ARG
    2: NotFoundError,             # VDEV_ERR_NOT_FOUND
    3: OutOfMemoryError,          # VDEV_ERR_OOM
    5: InvalidArgumentError,      # VDEV_ERR_CONFIG: a configuration that cannot be honoured
    6: InternalError,             # VDEV_ERR_BACKEND
    7: UnknownError,              # VDEV_ERR_IO (a file that cannot be read or written;
                                  # a truncated or damaged one is DataLossError, below)
    8: InvalidArgumentError,      # VDEV_ERR_PARSE
    9: InvalidArgumentError,      # VDEV_ERR_SHAPE
    10: InvalidArgumentError,     # VDEV_ERR_PLACEMENT (TensorFlow's explicit device policy)
    11: UnimplementedError,       # VDEV_ERR_UNSUPPORTED
    12: InternalError,            # VDEV_ERR_INTERNAL
}

_NAMES = ["VDEV_OK", "VDEV_ERR_INVALID_ARG", "VDEV_ERR_NOT_FOUND", "VDEV_ERR_OOM",
          "VDEV_ERR_ALREADY_INITIALIZED", "VDEV_ERR_CONFIG", "VDEV_ERR_BACKEND", "VDEV_ERR_IO",
          "VDEV_ERR_PARSE", "VDEV_ERR_SHAPE", "VDEV_ERR_PLACEMENT", "VDEV_ERR_UNSUPPORTED",
          "VDEV_ERR_INTERNAL"]


def status_name(status):
    """vdev's C name of a status code (``VDEV_ERR_OOM``), or ``VDEV_STATUS_<n>``."""
    return _NAMES[status] if 0 <= status < len(_NAMES) else "VDEV_STATUS_%d" % status


# vdev's C advice in a strict placement error, and what a Python user does instead.
_C_PLACEMENT_ADVICE = ("Copy it explicitly with vdev_tensor_to() or vdev_identity() under a "
                       "device scope, or use VDEV_PLACEMENT=copy")
_PY_PLACEMENT_ADVICE = ("Copy it explicitly with vdev.identity(x) under `with "
                        "vdev.device(...)`, or x.cpu() / x.gpu(i), or use %s")
# The call that turns the strict policy off, in the words of the one that
# turned it on: TensorFlow's set_device_policy('explicit') or vdev's
# set_policy('strict') (also VDEV_PLACEMENT=strict). Each setter records it.
_UNSTRICT = {"device_policy": "vdev.config.experimental.set_device_policy('silent')",
             "placement": "vdev.placement.set_policy('copy')"}
_strict_by = "placement"


def python_message(status, message):
    """vdev's message with its advice in Python's words: a strict placement
    error (VDEV_ERR_PLACEMENT) names vdev.identity, .cpu()/.gpu(i) and the
    call that turns the strict policy off (set_device_policy('silent') where
    set_device_policy('explicit') turned it on, else
    vdev.placement.set_policy('copy')) instead of the C calls and variable."""
    if status == _NAMES.index("VDEV_ERR_PLACEMENT"):
        return message.replace(_C_PLACEMENT_ADVICE, _PY_PLACEMENT_ADVICE % _UNSTRICT[_strict_by])
    return message


# A checkpoint that is truncated or damaged: VDEV_ERR_IO with the message
# "checkpoint '<path>' is damaged: ...", which one C helper writes for every
# such case and for nothing else (vdev_dist_ckloss, src/dist/checkpoint.h).
# TensorFlow's checkpoint reader raises DataLossError for these ("truncated
# block read", "Checksum does not match"); other file errors (cannot open,
# read, create) stay UnknownError, as TensorFlow gives EIO and most errno values.
_DATA_LOSS_MARK = "' is damaged: "


# A checkpoint file that cannot be created, written or read: VDEV_ERR_IO with
# a message that ends with the system's reason (strerror). The class is the
# one TensorFlow's file system gives that errno (its ErrnoToCode), for the
# errno values a file call can give; any other stays UnknownError.
_ERRNO_CLASS = {
    "EPERM": PermissionDeniedError, "EACCES": PermissionDeniedError,
    "EROFS": PermissionDeniedError,
    "ENOSPC": ResourceExhaustedError, "EDQUOT": ResourceExhaustedError,
    "EMFILE": ResourceExhaustedError, "ENFILE": ResourceExhaustedError,
    "EMLINK": ResourceExhaustedError,
    "EFBIG": OutOfRangeError, "EOVERFLOW": OutOfRangeError,
    "ENOENT": NotFoundError, "ENODEV": NotFoundError, "ENXIO": NotFoundError,
    "EEXIST": AlreadyExistsError,
    "ENAMETOOLONG": InvalidArgumentError, "EINVAL": InvalidArgumentError,
    "ENOTDIR": FailedPreconditionError, "EISDIR": FailedPreconditionError,
    "ENOTEMPTY": FailedPreconditionError, "EBUSY": FailedPreconditionError,
    "ETXTBSY": FailedPreconditionError,
    "EXDEV": UnimplementedError, "ENOTSUP": UnimplementedError, "ENOSYS": UnimplementedError,
    "EAGAIN": UnavailableError, "EINTR": UnavailableError,
    "ESTALE": AbortedError,
}


def _errno_class(message):
    for name, cls in _ERRNO_CLASS.items():
        if hasattr(errno, name) and message.endswith(": " + os.strerror(getattr(errno, name))):
            return cls
    return UnknownError


def _class_of(status, message):
    if status == _NAMES.index("VDEV_ERR_IO") and message.startswith("checkpoint '"):
        return DataLossError if _DATA_LOSS_MARK in message else _errno_class(message)
    return _BY_STATUS.get(status, InternalError)


def from_status(status, message, oom_report=""):
    """The exception for a vdev status code and its message (advice in
    Python's words, python_message); oom_report: the thread's last
    out-of-memory report (vdev_last_oom_report), kept by an OutOfMemoryError
    when it is this message's."""
    message = python_message(status, message)
    if status == 4:  # VDEV_ERR_ALREADY_INITIALIZED: tf.config's RuntimeError
        return RuntimeError(message)
    cls = _class_of(status, message)
    if cls is OutOfMemoryError:
        mine = oom_report.startswith(message + "\n")
        return cls(message, status_name(status), report=oom_report if mine else None)
    return cls(message, status_name(status))
