"""Device scopes: ``with vdev.device('/device:GPU:1'):``, as ``tf.device``.

A scope is vdev's thread-local device stack (vdev_device_push/pop): ops and
new tensors of the calling thread go to the innermost scope's device. Names
take every form TensorFlow accepts ('GPU:1', '/gpu:1', '/device:GPU:1', the
'/job:localhost/replica:0/task:0/device:GPU:1' long form, and 'GPU' alone,
which takes the enclosing scope's index). A name that is not a string is a
ValueError in TensorFlow's words; a malformed one a ValueError; a device that
does not exist a RuntimeError ("... unknown device"), raised when the scope
is entered (TensorFlow raises it at the first op), unless soft placement is
on.
"""

from . import _lib
from ._lib import lib


class device:
    """Context manager: ops in the block run on `device_name`."""

    __slots__ = ("_name", "_depth")

    def __init__(self, device_name):
        if not isinstance(device_name, str):
            raise ValueError("Expecting a string device name. Got %s(%s)"
                             % (type(device_name), device_name))
        self._name = device_name
        self._depth = 0

    def __enter__(self):
        st = lib.vdev_device_push(self._name.encode("utf-8"))
        _lib.check(st, {_lib.INVALID_ARG: ValueError, _lib.NOT_FOUND: RuntimeError})
        self._depth += 1
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        _lib.check(lib.vdev_device_pop())
        return False


class on_device_of:
    """Context manager: the device of tensor t (for values made beside it)."""

    __slots__ = ("_dev",)

    def __init__(self, t):
        self._dev = lib.vdev_tensor_device(t._handle)
        if self._dev is None:
            raise _lib.error()

    def __enter__(self):
        _lib.check(lib.vdev_device_push(self._dev))
        return self

    def __exit__(self, *exc):
        lib.vdev_device_pop()
        return False


def current_device():
    """The innermost scope's device in TensorFlow's long form, or None."""
    d = lib.vdev_device_current()
    return d.decode() if d is not None else None
