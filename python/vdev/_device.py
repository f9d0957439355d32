"""Device scopes: ``with vdev.device('/device:GPU:1'):``, as ``tf.device``.

A scope is vdev's thread-local device stack (vdev_device_push/pop): ops and
new tensors of the calling thread go to the innermost scope's device. Names
take every form TensorFlow accepts ('GPU:1', '/gpu:1', '/device:GPU:1', the
'/job:localhost/replica:0/task:0/device:GPU:1' long form, and 'GPU' alone,
which takes the enclosing scope's index). As in TensorFlow, ``device('')``
keeps the enclosing scope (it changes nothing) and ``device(None)`` clears
every enclosing scope for the block: its ops go where unscoped ops go (where
their inputs are, else the default device). A name that is neither a string
nor None is a ValueError in TensorFlow's words; a malformed one a ValueError;
a device that does not exist a RuntimeError ("... unknown device"), raised
when the scope is entered (TensorFlow raises it at the first op), unless soft
placement is on. As TensorFlow's ``tf.device``, a ``LogicalDevice`` (from
``vdev.config.list_logical_devices``) or a ``vdev.DeviceSpec`` stands for its name, and a name of a
job, replica or task alone ('/job:localhost', '/job:localhost/replica:0/task:0')
merges into the enclosing scope, which it leaves as it is (the job must be
local: another is a RuntimeError, "... unknown device").
"""

from . import _lib, errors
from ._lib import lib


class device:
    """Context manager: ops in the block run on `device_name`; '' keeps the
    enclosing scope, None clears every enclosing scope (as tf.device)."""

    __slots__ = ("_name", "_depth", "_cleared", "_task_only")

    def __init__(self, device_name):
        from .config import LogicalDevice
        from ._device_spec import DeviceSpec
        if isinstance(device_name, LogicalDevice):  # as TensorFlow's context.device
            device_name = device_name.name
        elif isinstance(device_name, DeviceSpec):  # its name, as tf.device takes it
            device_name = device_name.to_string()
        if device_name is not None and not isinstance(device_name, str):
            raise ValueError("Expecting a string device name. Got %s(%s)"
                             % (type(device_name), device_name))
        self._name = device_name
        self._depth = 0
        self._cleared = []  # device(None): the scopes each entry took off, innermost first
        self._task_only = bool(device_name) and _names_task_only(device_name)

    def __enter__(self):
        if self._name is None:
            self._cleared.append(_clear_scopes())
        elif self._task_only:
            _check_task(self._name)
        elif self._name:
            st = lib.vdev_device_push(self._name.encode("utf-8"))
            _lib.check(st, _PUSH_ERRORS)
        self._depth += 1
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._name is None:
            _restore_scopes(self._cleared.pop())
        elif self._name and not self._task_only:
            _lib.check(lib.vdev_device_pop())
        return False


_PUSH_ERRORS = {_lib.INVALID_ARG: ValueError, _lib.NOT_FOUND: RuntimeError}


def _names_task_only(name):
    """Whether name gives a job, replica or task and no device
    ('/job:localhost/replica:0'), which TensorFlow merges into the
    enclosing scope (DeviceSpec.make_merged_spec), keeping its device."""
    parts = [p for p in name.split("/") if p]
    return bool(parts) and all(p.split(":", 1)[0] in ("job", "replica", "task") and ":" in p
                               for p in parts)


def _check_task(name):
    """Raises as vdev_device_push would for a job, replica or task that is
    not this process's: vdev's parser checks them on a name with a device,
    /device:CPU:0 (there is always one), which the message then leaves out."""
    probe = name.rstrip("/") + "/device:CPU:0"
    st = lib.vdev_device_push(probe.encode("utf-8"))
    if st == _lib.OK:
        _lib.check(lib.vdev_device_pop())
        return
    msg = errors.python_message(st, _lib.last_error()).replace(probe, name)
    cls = _PUSH_ERRORS.get(st)
    raise cls(msg) if cls else errors.from_status(st, msg)


def _clear_scopes():
    """Pops every device scope of the calling thread; returns their names,
    innermost first, for _restore_scopes. (vdev's C API has no scope that
    clears the stack, so the stack is taken off and put back.)"""
    names = []
    while True:
        d = lib.vdev_device_current()
        if d is None:
            return names
        names.append(bytes(d))  # valid until popped: copied first
        lib.vdev_device_pop()


def _restore_scopes(names):
    """Pushes back what _clear_scopes took off (each scope's device, by its
    resolved name), outermost first."""
    for i, name in enumerate(reversed(names)):
        st = lib.vdev_device_push(name)
        if st != _lib.OK:
            raise RuntimeError("vdev.device(None): cannot reopen the enclosing device scope %s "
                               "(%s); %d enclosing scope%s lost"
                               % (name.decode(), _lib.last_error(), len(names) - i,
                                  "" if len(names) - i == 1 else "s"))


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
