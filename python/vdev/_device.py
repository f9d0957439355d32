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
a ValueError (an index is read as TensorFlow's DeviceSpec reads it, with
int(): 'GPU:01' and 'GPU:1 ' are GPU:1); a device that does not exist a RuntimeError ("... unknown
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

    __slots__ = ("_name",)

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

    def __enter__(self):
        if self._name is None:  # a scope of no device, whatever encloses it
            _lib.check(lib.vdev_device_push(None), _PUSH_ERRORS)
        else:
            st = lib.vdev_device_push(self._name.encode("utf-8"))
            canon = _spec_name(self._name) if st == _lib.INVALID_ARG else None
            if canon is not None:  # 'GPU:1 ': TensorFlow's int() takes the index
                st = lib.vdev_device_push(canon.encode("utf-8"))
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


def _spec_name(name):
    """DeviceSpec's name for one vdev's C parser refused, where TensorFlow's
    DeviceSpec.from_string reads it otherwise: its indices go through int(),
    which takes a sign and blanks around the digits ('GPU:1 ', 'GPU:+1'); None when
    DeviceSpec refuses it too, or reads it as written."""
    from ._device_spec import DeviceSpec
    try:
        canon = DeviceSpec.from_string(name).to_string()
    except ValueError:
        return None
    return canon if canon and canon != name else None


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
