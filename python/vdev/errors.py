"""Exceptions, named as TensorFlow's ``tf.errors``.

A failed op raises an ``OpError`` subclass chosen from vdev's status code, as
TensorFlow maps its status codes: a shape mismatch or a bad argument is
``InvalidArgumentError``, an unknown object ``NotFoundError``, memory
exhausted ``ResourceExhaustedError`` (vdev raises its subclass
``OutOfMemoryError``, which carries vdev's report: what was asked for, on which
device, what is in use of what limit, the largest free block, and what would
help), a truncated or damaged checkpoint ``DataLossError`` (as TensorFlow's
checkpoint reader), another file error ``UnknownError``. Configuration calls
raise ``ValueError`` and ``RuntimeError`` where ``tf.config`` does. Each
exception's ``status`` is vdev's code name ("VDEV_ERR_OOM"), ``message`` the
text and ``error_code`` TensorFlow's code (``vdev.errors.DATA_LOSS`` ...).

Every ``tf.errors`` class is here, with TensorFlow's code, so that
``except vdev.errors.AbortedError:`` is valid code; vdev itself raises
InvalidArgumentError, NotFoundError, ResourceExhaustedError (OutOfMemoryError),
UnimplementedError, InternalError, DataLossError and UnknownError, and
nothing else (a collective that times out is InternalError with TensorFlow's
message, as vdev's C status has no deadline code).
"""

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


class OpError(Exception):
    """A vdev call failed (TensorFlow's ``tf.errors.OpError``)."""

    error_code = UNKNOWN

    def __init__(self, message, status="VDEV_ERR_INTERNAL"):
        super().__init__(message)
        self.message = message
        self.status = status


class CancelledError(OpError):
    error_code = CANCELLED


class UnknownError(OpError):
    error_code = UNKNOWN


class InvalidArgumentError(OpError):
    error_code = INVALID_ARGUMENT


class DeadlineExceededError(OpError):
    error_code = DEADLINE_EXCEEDED


class NotFoundError(OpError):
    error_code = NOT_FOUND


class AlreadyExistsError(OpError):
    error_code = ALREADY_EXISTS


class PermissionDeniedError(OpError):
    error_code = PERMISSION_DENIED


class ResourceExhaustedError(OpError):
    error_code = RESOURCE_EXHAUSTED


class FailedPreconditionError(OpError):
    error_code = FAILED_PRECONDITION


class AbortedError(OpError):
    error_code = ABORTED


class OutOfRangeError(OpError):
    error_code = OUT_OF_RANGE


class UnimplementedError(OpError):
    error_code = UNIMPLEMENTED


class InternalError(OpError):
    error_code = INTERNAL


class UnavailableError(OpError):
    error_code = UNAVAILABLE


class DataLossError(OpError):
    error_code = DATA_LOSS


class UnauthenticatedError(OpError):
    error_code = UNAUTHENTICATED


class OutOfMemoryError(ResourceExhaustedError):
    """Device memory exhausted. ``report`` is vdev's whole out-of-memory
    report: with VDEV_OOM_REPORT=1 the message and then the allocator's state
    (bins, largest free block, biggest live blocks and the ops that made
    them, as printed on stderr), else the message alone. The device's memory
    is as it was before the failed call, so the caller may retry smaller."""

    def __init__(self, message, status="VDEV_ERR_OOM", report=None):
        super().__init__(message, status)
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
    return cls.error_code


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
    return _NAMES[status] if 0 <= status < len(_NAMES) else "VDEV_STATUS_%d" % status


# vdev's C advice in a strict placement error, and what a Python user does instead.
_C_PLACEMENT_ADVICE = ("Copy it explicitly with vdev_tensor_to() or vdev_identity() under a "
                       "device scope, or use VDEV_PLACEMENT=copy")
_PY_PLACEMENT_ADVICE = ("Copy it explicitly with vdev.identity(x) under `with "
                        "vdev.device(...)`, or x.cpu() / x.gpu(i), or use "
                        "vdev.placement.set_policy('copy')")


def python_message(status, message):
    """vdev's message with its advice in Python's words: a strict placement
    error (VDEV_ERR_PLACEMENT) names vdev.identity, .cpu()/.gpu(i) and
    vdev.placement.set_policy('copy') instead of the C calls and variable."""
    if status == _NAMES.index("VDEV_ERR_PLACEMENT"):
        return message.replace(_C_PLACEMENT_ADVICE, _PY_PLACEMENT_ADVICE)
    return message


# A checkpoint that is truncated or damaged: VDEV_ERR_IO with the message
# "checkpoint '<path>' is damaged: ...", which one C helper writes for every
# such case and for nothing else (vdev_dist_ckloss, src/dist/checkpoint.h).
# TensorFlow's checkpoint reader raises DataLossError for these ("truncated
# block read", "Checksum does not match"); other file errors (cannot open,
# read, create) stay UnknownError, as TensorFlow gives EIO and most errno values.
_DATA_LOSS_MARK = "' is damaged: "


def _class_of(status, message):
    if (status == _NAMES.index("VDEV_ERR_IO") and message.startswith("checkpoint '")
            and _DATA_LOSS_MARK in message):
        return DataLossError
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
        return cls(message, status_name(status), oom_report if mine else None)
    return cls(message, status_name(status))
