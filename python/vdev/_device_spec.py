"""vdev.DeviceSpec: a (possibly partial) device name as five parts (job,
replica, task, device type, device index), as TensorFlow's ``tf.DeviceSpec``
(its version 2: immutable, hashable). ``vdev.device`` takes one as it takes
the name ``to_string()`` gives. ``from_string`` accepts the forms TensorFlow
does ('/job:localhost/replica:0/task:0/device:GPU:1', '/device:GPU:1',
'/gpu:1', 'GPU:1', 'cpu'), refusing the rest with TensorFlow's ValueError;
``make_merged_spec`` and ``replace`` build new specs, the parts of the
argument winning. '*' for a replica or a task is TensorFlow's ValueError
(vdev's C names accept it). Device types 'cpu' and 'gpu' are upper-cased, as
TensorFlow does; vdev's devices themselves are CPU and GPU only, so another
type is a valid spec that names no vdev device (an error when used)."""

_TYPES = frozenset({"CPU", "GPU", "TPU", "CUSTOM", "EPU"})  # TensorFlow's parsed types


def _str_or_none(x):
    return None if x is None else str(x)


def _int_or_none(x, what="device_index"):
    """x as an int, as TensorFlow's; '*' (which vdev's C names accept for a
    replica or a task) is TensorFlow's ValueError, with what to do instead."""
    if x is None:
        return None
    try:
        return int(x)
    except ValueError as e:
        if x != "*":
            raise
        raise ValueError("%s (a DeviceSpec's %s is a number, as in TensorFlow: leave the part "
                         "out to leave it unspecified)" % (e, what)) from None


def _type_or_none(t):
    if t in ("cpu", "gpu"):
        return t.upper()
    return _str_or_none(t)


class DeviceSpec:
    """Represents a (possibly partial) specification of a device."""

    __slots__ = ("_job", "_replica", "_task", "_device_type", "_device_index", "_as_string",
                 "_hash")

    def __init__(self, job=None, replica=None, task=None, device_type=None, device_index=None):
        self._job = _str_or_none(job)
        self._replica = _int_or_none(replica, "replica")
        self._task = _int_or_none(task, "task")
        self._device_type = _type_or_none(device_type)
        self._device_index = _int_or_none(device_index)
        self._as_string = self._components_to_string()
        self._hash = hash(self._as_string)

    # ---- the parts (read only, as in TensorFlow 2) ----
    job = property(lambda self: self._job)
    replica = property(lambda self: self._replica)
    task = property(lambda self: self._task)
    device_type = property(lambda self: self._device_type)
    device_index = property(lambda self: self._device_index)

    def _components_to_string(self):
        out = []
        if self._job is not None:
            out.append("/job:" + self._job)
        if self._replica is not None:
            out.append("/replica:" + str(self._replica))
        if self._task is not None:
            out.append("/task:" + str(self._task))
        if self._device_type is not None:
            index = "*" if self._device_index is None else str(self._device_index)
            out.append("/device:%s:%s" % (self._device_type, index))
        return "".join(out)

    def to_string(self):
        """'/job:<name>/replica:<id>/task:<id>/device:<type>:<id>', the parts
        that are set."""
        return self._as_string

    @classmethod
    def from_string(cls, spec):
        """The spec a name describes; ValueError for a malformed one."""
        return cls(*_parse(spec))

    def replace(self, **kwargs):
        """A copy with the parts in kwargs replaced."""
        parts = dict(job=self._job, replica=self._replica, task=self._task,
                     device_type=self._device_type, device_index=self._device_index)
        for k in kwargs:
            if k not in parts:
                raise TypeError("replace() got an unexpected keyword argument %r" % k)
        parts.update(kwargs)
        return self.__class__(**parts)

    def make_merged_spec(self, dev):
        """A new spec with each part of dev where dev sets it, this spec's
        elsewhere (part by part, as TensorFlow: a device type without an
        index keeps this spec's index)."""
        mine = (self._job, self._replica, self._task, self._device_type, self._device_index)
        theirs = (dev.job, dev.replica, dev.task, dev.device_type, dev.device_index)
        return self.__class__(*(t if t is not None else m for m, t in zip(mine, theirs)))

    def __eq__(self, other):
        return isinstance(other, DeviceSpec) and self._as_string == other._as_string

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return "<DeviceSpec(job=%r, replica=%r, task=%r, device_type=%r, device_index=%r)>" % (
            self._job, self._replica, self._task, self._device_type, self._device_index)


def _parse(spec):
    """(job, replica, task, device_type, device_index) of a device name, by
    TensorFlow's rules (device_spec.py _string_to_components)."""
    if not isinstance(spec, str):
        spec = str(spec) if spec is not None else ""
    job = replica = task = dtype = index = None
    for part in spec.split("/"):
        if not part:
            continue
        y = part.split(":")
        n = len(y)
        if n == 2 and y[0] == "job":
            job = y[1]
        elif n == 2 and y[0] == "replica":
            replica = y[1]
        elif n == 2 and y[0] == "task":
            task = y[1]
        elif n in (1, 2) and y[0].upper() in _TYPES:
            if dtype is not None:
                raise ValueError("Multiple device types are not allowed while parsing the "
                                 "device spec: %s." % spec)
            dtype = y[0].upper()
            if n == 2 and y[1] != "*":
                index = int(y[1])
        elif n == 3 and y[0] == "device":
            if dtype is not None:
                raise ValueError("Multiple device types are not allowed while parsing the "
                                 "device spec: %s." % spec)
            dtype = y[1]
            if y[2] != "*":
                index = int(y[2])
        elif y[0] != "":
            raise ValueError("Unknown attribute '%s' is encountered while parsing the device "
                             "spec: '%s'." % (y[0], spec))
    return job, replica, task, dtype, index
