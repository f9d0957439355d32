"""vdev: several models on several GPUs without them stepping on each other,
from Python, in TensorFlow's words.

    import vdev
    gpus = vdev.config.list_physical_devices('GPU')
    vdev.config.set_memory_growth(gpus[0], True)
    with vdev.device('/device:GPU:1'):
        model = vdev.models.MLP([32, 64, 8], seed=1)
    opt = vdev.optimizers.Adam()
    with vdev.GradientTape() as tape:
        loss = vdev.losses.MeanSquaredError()(y, model(x))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    vdev.config.experimental.get_memory_info('GPU:1')   # {'current': ..., 'peak': ..., ...}

Keras's training methods (``model.compile``, ``fit``, ``evaluate``,
``predict``, ``save_weights``, ``vdev.callbacks``) are on ``vdev.models``'
Sequential, MLP and functional ``vdev.Model(vdev.Input(...), ...)``. Data
parallel training is ``vdev.distribute.MirroredStrategy``, checkpoints
``vdev.train``, Keras's activations ``vdev.activations``, image resizing
``vdev.image``, padding sequences and one-hot labels ``vdev.utils``,
tf.keras's namespace over these modules ``vdev.keras`` (``import vdev as
tf`` runs a tf.keras program), run-time floors, ceilings and priorities
``vdev.config.experimental.set_memory_limits`` and ``set_memory_priority``.

A pure-Python package over libvdev.so (ctypes; see vdev._lib for how the
library is found). Tensors free their device memory when the Python object
goes; ``vdev.shutdown()`` frees every device's memory and returns to the
unconfigured state (for tests), after which old tensors raise when used.
"""

import builtins as _builtins
import ctypes as _ctypes
import gc as _gc

from . import errors
from ._lib import lib as _c, last_error
from ._tensor import (DType, Tensor, TensorShape, Variable, as_dtype, constant,
                      convert_to_tensor, fill, float32, int32, ones, ones_like, zeros,
                      zeros_like)
# tf.bool; from here on this module's own `bool` is the DType, Python's is
# _builtins.bool
from ._tensor import bool_ as bool
from ._ops import (add, argmax, concat, divide, exp, gather, identity, log, matmul, maximum,
                   minimum, multiply, negative, pow, reduce_mean, reduce_sum, reshape, sigmoid,
                   sqrt, square, stack, stop_gradient, subtract, tanh, transpose)
from ._indexing import strided_slice
from ._masking import boolean_mask
from ._logic_ops import (cast, equal, greater, greater_equal, less, less_equal, logical_and,
                         logical_not, logical_or, logical_xor, not_equal, reduce_all, reduce_any,
                         where)
from ._more_ops import (abs, argmin, ceil, clip_by_value, expand_dims, eye, floor, floordiv,
                        linspace, one_hot, range, rank, reduce_max, reduce_min, reverse, round,
                        shape, sign, size, split, squeeze, tile, unstack)
from ._stat_ops import norm
from ._pad import pad
from ._device import device
from ._device_spec import DeviceSpec
from ._tape import GradientTape, UnconnectedGradients
from .errors import OutOfMemoryError
from . import activations, callbacks, config, debugging, image, initializers, layers, losses, math
from . import models, nn
from . import optimizers
from . import placement
from . import distribute, random, train, utils
from . import metrics
from . import keras  # tf.keras's namespace over the modules above
from .dlpack import from_dlpack
from ._functional import Input  # tf.keras.Input
from .models import Model  # tf.keras.Model: Model(inputs, outputs), Keras's functional API

__version__ = _c.vdev_version().decode()


def init():
    """Starts the runtime now (else the first op or list_logical_devices does):
    reads the environment, checks the configuration, makes the logical
    devices, and freezes the configuration."""
    from . import _lib
    _lib.check(_c.vdev_init())


def is_initialized():
    """Whether the runtime has started (init(), the first op, or
    list_logical_devices) and not been shut down since."""
    return _builtins.bool(_c.vdev_is_initialized())


def shutdown():
    """Frees every device's memory and returns vdev to the unconfigured state.
    Tensors made before raise InvalidArgumentError when used and free nothing
    when collected; strategies and communicators are freed first (their use
    then raises RuntimeError), and memory pressure callbacks forgotten.
    RuntimeError while arrays shared through DLPack are alive, or while
    PyTorch's allocator (vdev.torch) holds live blocks, since their memory
    would go. As vdev_shutdown in C, it must not run while other
    threads still run vdev's ops (join them first): their queued work would
    use memory it frees."""
    _gc.collect()
    n = _c.vdev_dlpack_live_exports()
    if n:
        raise RuntimeError("vdev.shutdown(): %d DLPack export%s of vdev tensors %s still alive "
                           "(numpy arrays or torch tensors over vdev memory); delete them first"
                           % (n, "" if n == 1 else "s", "is" if n == 1 else "are"))
    why = _ctypes.create_string_buffer(480)
    if _c.vdev_mem_holders_live(why, len(why)):  # vdev_shutdown would refuse
        raise RuntimeError("vdev.shutdown(): " + why.value.decode())
    from .distribute import _mirrored
    from . import config
    from .config import _govern
    _mirrored.free_all()
    _c.vdev_shutdown()
    _govern._forget_callbacks()
    config._forget_code_settings()  # the package's record of code's configuration


class experimental:
    """``tf.experimental``'s namespace: ``vdev.experimental.dlpack``."""

    from . import dlpack


__all__ = ["DType", "Tensor", "TensorShape", "Variable", "as_dtype", "bool", "boolean_mask",
           "cast", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
           "logical_and", "logical_or", "logical_not", "logical_xor", "reduce_any",
           "reduce_all", "where", "abs", "argmin", "clip_by_value", "expand_dims", "one_hot",
           "range", "reduce_max", "reduce_min", "sign", "squeeze", "tile", "eye", "linspace",
           "rank", "reverse", "shape", "size", "split", "unstack", "floor", "ceil", "round",
           "floordiv", "norm",
           "constant", "convert_to_tensor", "fill", "float32", "int32", "ones", "ones_like",
           "zeros", "zeros_like", "add", "argmax", "concat", "divide", "exp", "gather",
           "identity", "log", "matmul", "maximum", "minimum",
           "multiply", "negative", "pad", "pow", "reduce_mean", "reduce_sum", "reshape", "sigmoid",
           "sqrt", "square", "stack", "stop_gradient", "strided_slice", "subtract", "tanh",
           "transpose",
           "device",
           "DeviceSpec", "GradientTape", "UnconnectedGradients",
           "Input", "Model", "OutOfMemoryError", "errors", "activations", "callbacks", "config",
           "debugging", "image",
           "initializers",
           "layers", "losses", "math",
           "models", "nn", "optimizers", "placement", "random", "from_dlpack", "init",
           "distribute", "train",
           "is_initialized", "shutdown", "last_error", "experimental"]
