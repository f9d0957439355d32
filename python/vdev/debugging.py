"""``tf.debugging``'s placement logging: with it on, vdev prints
"Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:1"
on standard error for every op (also VDEV_LOG_DEVICE_PLACEMENT=1)."""

from . import _lib
from ._lib import lib

__all__ = ["get_log_device_placement", "set_log_device_placement"]


def set_log_device_placement(enabled):
    """enabled is a bool (or 0 or 1); another value ('no', None) is a
    TypeError, as vdev.config.set_memory_growth's."""
    from .config import _bool_flag
    lib.vdev_set_log_device_placement(_bool_flag(enabled, "set_log_device_placement"))


def get_log_device_placement():
    """Whether placement logging is on; before start-up, whether it will be
    (code's setting, else VDEV_LOG_DEVICE_PLACEMENT's)."""
    return bool(_lib.setting(lib.vdev_get_log_device_placement))
