"""``tf.debugging``'s placement logging: with it on, vdev prints
"Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:1"
on standard error for every op (also VDEV_LOG_DEVICE_PLACEMENT=1)."""

from . import _lib
from ._lib import lib


def set_log_device_placement(enabled):
    lib.vdev_set_log_device_placement(bool(enabled))


def get_log_device_placement():
    """Whether placement logging is on; before start-up, whether it will be
    (code's setting, else VDEV_LOG_DEVICE_PLACEMENT's)."""
    return bool(_lib.setting(lib.vdev_get_log_device_placement))
