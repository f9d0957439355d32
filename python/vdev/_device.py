"""Device scopes: ``with vdev.device('/device:GPU:1'):``, as ``tf.device``.

A scope is vdev's thread-local device stack (vdev_device_push/pop): ops and
new tensors of the calling thread go to the innermost scope's device. Names
take every form TensorFlow accepts ('GPU:1', '/gpu:1', '/device:GPU:1', the
'/job:localhost/replica:0/task:0/device:GPU:1' long form, and 'GPU' alone,
which takes the enclosing scope's index); a form TensorFlow refuses
('/device:GPU', no index after 'device:') is a ValueError in DeviceSpec's
words. As in TensorFlow, ``device('')`` and a name of a job, replica or task
alone ('/job:localhost', '/job:localhost/replica:0/task:0') merge into the
enclosing scope, which they leave as it is, and outside any scope (or in a
``device(None)`` block) pin the block to CPU:0, as TensorFlow merges them
into its first device (vdev's C call vdev_device_push adds no constraint
there); the job must be local: another is a RuntimeError, "... unknown
device". ``device(None)`` clears every enclosing scope for the block: its
ops go where unscoped ops go (where their inputs are, else the default
device). A function is TensorFlow's eager RuntimeError ("tf.device does not
support functions when eager execution is enabled."); another name that is
neither a string nor None is a ValueError in TensorFlow's words; a malformed one
a ValueError; a device that does not exist a RuntimeError ("... unknown
device"), raised when the scope is entered (TensorFlow raises it at the first
op), unless soft placement is on. As TensorFlow's ``tf.device``, a
``LogicalDevice`` (from ``vdev.config.list_logical_devices``) or a
``vdev.DeviceSpec`` stands for its name. Leaving blocks in another order than
they were entered is TensorFlow's RuntimeError ("Exiting device scope without
proper scope nesting"), which leaves the scopes as they are.
"""
import threading

from . import _lib
from ._lib import lib

# The vdev.device blocks each thread is in, innermost last: an exit checks
# that its block is the innermost, as TensorFlow's _EagerDeviceContext does.
# (vdev's C stack cannot tell: vdev_device_pop() pops the innermost scope,
# whoever pushed it.)
_entered = threading.local()

# Names vdev's parser accepts that DeviceSpec.from_string was asked about:
# None where it accepts them too, else its ValueError.
_spec_checked = {}


class device:
    """Context manager: ops in the block run on `device_name`; '' keeps the
    enclosing scope, None clears every enclosing scope (as tf.device)."""

    __slots__ = ("_name", "_cleared")

    def __init__(self, device_name):
        from .config import LogicalDevice
        from ._device_spec import DeviceSpec
        if isinstance(device_name, LogicalDevice):  # as TensorFlow's context.device
            device_name = device_name.name
        elif isinstance(device_name, DeviceSpec):  # its name, as tf.device takes it
            device_name = device_name.to_string()
        if callable(device_name):  # TensorFlow's eager tf.device refuses device functions
            raise RuntimeError("tf.device does not support functions when eager execution "
                               "is enabled.")
        if device_name is not None and not isinstance(device_name, str):
            raise ValueError("Expecting a string device name. Got %s(%s)"
                             % (type(device_name), device_name))
        self._name = device_name
        self._cleared = []  # device(None): the scopes each entry took off, innermost first

    def __enter__(self):
        if self._name is None:
            self._cleared.append(_clear_scopes())
        else:
            st = lib.vdev_device_push(self._name.encode("utf-8"))
            _lib.check(st, _PUSH_ERRORS)
            err = _spec_error(self._name)
            if err is not None:
                lib.vdev_device_pop()
                raise ValueError(err)
            if lib.vdev_device_current() is None:
                # a name of no device ('', a job, replica or task alone) outside
                # any scope: TensorFlow merges it into its first device, CPU:0
                lib.vdev_device_pop()
                _lib.check(lib.vdev_device_push(_FIRST_DEVICE), _PUSH_ERRORS)
        stack = getattr(_entered, "stack", None)
        if stack is None:
            stack = _entered.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        stack = getattr(_entered, "stack", None)
        if not stack or stack[-1] is not self:
            raise RuntimeError("Exiting device scope without proper scope nesting")
        stack.pop()
        if self._name is None:
            _restore_scopes(self._cleared.pop())
        else:
            _lib.check(lib.vdev_device_pop())
        return False


# TensorFlow's first device (context._context_devices[0]), into which a name
# of no device is merged outside any scope.
_FIRST_DEVICE = b"/job:localhost/replica:0/task:0/device:CPU:0"

_PUSH_ERRORS = {_lib.INVALID_ARG: ValueError, _lib.NOT_FOUND: RuntimeError}


def _spec_error(name):
    """DeviceSpec.from_string's message for a name vdev's parser accepted and
    TensorFlow's refuses ('/device:GPU': a type without an index after
    'device:'), else None."""
    try:
        return _spec_checked[name]
    except KeyError:
        pass
    from ._device_spec import DeviceSpec
    try:
        DeviceSpec.from_string(name)
        err = None
    except ValueError as e:
        err = str(e)
    if len(_spec_checked) >= 1024:
        _spec_checked.clear()
    _spec_checked[name] = err
    return err


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
    resolved name), outermost first, and never fails: as TensorFlow's
    _EagerDeviceContext.__exit__ puts the old device back without checking
    it again, a scope is reopened as it was even where opening it now would
    fail. That is a scope soft placement accepted for a device that does not
    exist, after soft placement was turned off (or one opened before
    vdev.shutdown() on a device the new configuration lacks): it is reopened
    under soft placement for the push alone, so that, as a scope that stayed
    open, its next op fails with NotFoundError. (vdev's C stack has no scope
    that clears the enclosing ones, so they are taken off and put back.)"""
    for name in reversed(names):
        if lib.vdev_device_push(name) == _lib.OK:
            continue
        soft = lib.vdev_config_get_soft_device_placement()
        lib.vdev_config_set_soft_device_placement(True)
        try:
            st = lib.vdev_device_push(name)
        finally:
            lib.vdev_config_set_soft_device_placement(soft)
        _lib.check(st)  # only a scope deeper than vdev's limit could fail, and it was there


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
