"""The checks a vdev.Variable's updates make before any op, as TensorFlow's:
the device of an assigned value under the strict placement policy, the
shape of an assign_add/assign_sub delta, and the RuntimeError of the
in-place operators (``v += x``), which Python would otherwise run as
``v = v + x``, rebinding the name to a new tensor."""

import numpy as np

from . import _lib
from ._lib import lib


def _check_update_input(var, value, op_name):
    """An update runs on its variable's device (TensorFlow pins resource ops
    there): under the strict policy, TensorFlow's 'explicit', a value on
    another device is TensorFlow's error for op_name's input #1."""
    if value.device != var.device and lib.vdev_get_placement_policy() == 1:  # strict
        from . import errors
        msg = ("Tensors on conflicting devices: cannot compute %s as input #1 was expected to "
               "be on %s but is actually on %s (operation running on %s). %s"
               % (op_name, var.device, value.device, var.device, errors._C_PLACEMENT_ADVICE))
        raise errors.from_status(_lib.STATUS_NAMES.index("VDEV_ERR_PLACEMENT"), msg)


def _check_update_shape(var, delta):
    """TensorFlow's error for an assign_add/assign_sub delta of another
    shape (vdev also takes one that broadcasts to the variable's, a scalar)."""
    from ._tensor import Tensor
    try:
        shape = tuple(delta.shape) if isinstance(delta, Tensor) else np.shape(delta)
    except ValueError:
        return  # a ragged value: its conversion says why
    try:
        fits = np.broadcast_shapes(tuple(var.shape), shape) == tuple(var.shape)
    except ValueError:
        fits = False
    if not fits:
        from . import errors
        msg = ("Cannot update variable with shape [%s] using a Tensor with shape [%s], shapes "
               "must be equal." % (",".join(map(str, var.shape)), ",".join(map(str, shape))))
        raise errors.from_status(_lib.STATUS_NAMES.index("VDEV_ERR_SHAPE"), msg)


# TensorFlow's RuntimeError for a Variable's in-place operators (its text
# for -= names `out = variable * value`: vdev writes `-`)
_INPLACE = ("`%s` with `tf.Variable`s is not supported. Use `%s` to modify the variable, "
            "or `out = %s` if you need to get a new output Tensor.")


def _refuse(statement, use, out):
    def refuse(self, unused_other):
        raise RuntimeError(_INPLACE % (statement, use, out))
    return refuse
