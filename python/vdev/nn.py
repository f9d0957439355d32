"""Neural-network ops under ``tf.nn``'s names, and ``compute_average_loss``.

``compute_average_loss(per_example_loss)`` is the loss of a replica's rows
scaled to the global batch: sum(per_example_loss) / global_batch_size, so
that the gradients, summed over the replicas by apply_gradients, are those
of the mean loss over the global batch. Inside strategy.run, without
global_batch_size, it divides by the rows of the global batch (a
DistributedBatch) the replica took its rows from in this step, when that
batch is the loss's: every distributed batch the step was given has the same
rows (one batch, or several of one size, such as inputs and labels) and
per_example_loss has as many rows as the replica took. Otherwise it divides
by per_example_loss's rows times the number of replicas, TensorFlow's rule
(an empty per_example_loss then is TensorFlow's "global_batch_size must be
positive."). The global batch's rows are right where the split is uneven (a
batch that does not divide by the replicas, or batch proportions), where
TensorFlow's rule weighs rows unequally. The choice is each replica's own:
with an uneven split, a loss of rows unrelated to the batch whose count
happens to equal some replicas' rows is divided differently on those
replicas; pass global_batch_size for such a loss. Outside a strategy it is
the mean over the rows (one replica), 0 for an empty batch (TensorFlow's
div_no_nan, as vdev's losses give).

``conv2d``, ``max_pool2d`` and ``avg_pool2d`` are TensorFlow's, NHWC only:
input [batch, height, width, channels], filters [height, width, in, out];
strides and ksize an int or a list of 1, 2 or 4 ints as TensorFlow takes
them (4: [1, h, w, 1]); padding "SAME" or "VALID" by TensorFlow's rule
(SAME's odd padding goes after: bottom, right). The pools ignore the
padding (the max and the mean of the elements inside the input).
``conv2d``'s dilations (an int or a list of 1, 2 or 4 ints, as strides) space
the filter's taps d apart, as TensorFlow's: the window's effective size
(k - 1) d + 1 sets the output's size and SAME's padding; strides and
dilations may both exceed 1, as the op allows (Keras's Conv2D refuses the
pair, as tf.nn.convolution under it does). ``conv2d`` and
``depthwise_conv2d`` take TensorFlow's explicit padding too, a list of four
[before, after] pairs (the batch's and the depth's zeros): ``vdev.pad``, then
"VALID" (vdev/_pad.py). Left out, each refused with UnimplementedError:
data_format "NCHW", explicit padding of the pools, strides, dilations or
windows over the batch or the channels, grouped convolution.

``depthwise_conv2d(input, filter, strides, padding, data_format, dilations)``
is TensorFlow's, NHWC only: filter [height, width, in, multiplier], the
output's channel c*M+m input channel c convolved with filter[:, :, c, m];
strides a list of 4 ints [1, s, s, 1] with equal row and column strides and
dilations a list of 2 ints, as TensorFlow takes them, with TensorFlow's
errors. Strides and dilations both above 1 are a ValueError (TensorFlow
requires strides of 1 there and gives values of no documented formula).

``conv2d_transpose(input, filters, output_shape, strides, padding="SAME",
data_format="NHWC", dilations=None)`` is ``tf.nn.conv2d_transpose``: the op
Conv2DBackpropInput with input_sizes=output_shape, input [N,H,W,O], filters
[KH,KW,C,O] (the output's channels before the input's), output_shape 4 ints
[N,OH,OW,C] or TensorFlow's 2 [OH,OW] (a list, tuple, array or int32
tensor), strides and dilations as conv2d's. output_shape is the shape of
the result, which is the input's gradient of conv2d from that shape with
those strides, dilations and padding: conv2d's output size of output_shape
must be the input's, else TensorFlow's InvalidArgumentError
"Conv2DSlowBackpropInput: Size of out_backprop doesn't match computed:
..."; the other refusals are TensorFlow's too (vdev/ops.h,
vdev_conv2d_transpose). Gradients flow to the input and the filters.

``conv1d``, ``conv1d_transpose``, ``max_pool1d``, ``avg_pool1d`` and
``separable_conv2d`` are TensorFlow's, made of the 2-D ops as TensorFlow
makes them (vdev/_nn_1d.py says how they take their arguments).

``elu``, ``selu``, ``gelu``, ``softplus``, ``softsign``, ``silu`` (``swish``),
``relu6`` and ``leaky_relu`` are TensorFlow's activations
(vdev/_activation_ops.py says how each is made and why its gradient is
TensorFlow's at the kinks).

``embedding_lookup(params, ids)`` is ``tf.nn.embedding_lookup`` for one
params tensor (or a list of one): ``vdev.gather(params, ids)``, rows of
params at ids. Sharded params (a list of several tensors) and max_norm are
refused with UnimplementedError.
"""

import ctypes
import numbers
from collections import abc

from . import _lib, _pad, _strategy_context, errors
from ._lib import lib
from ._ops import (_near, _new, _t, divide, gather, log_softmax, multiply, reduce_sum, relu,
                   sigmoid, softmax, tanh)
from ._tensor import Tensor, convert_to_tensor, int32


def _replica_global_batch(ctx, rows):
    """The divisor of a per-example loss of `rows` rows on replica ctx,
    without global_batch_size (see the module's notes)."""
    batches = ctx._batches
    if len(batches) == 1:
        (global_rows, mine), = batches
        if rows == mine and global_rows > 0:
            return global_rows
    n = rows * ctx.num_replicas_in_sync
    if n <= 0:
        raise errors.InvalidArgumentError("global_batch_size must be positive.",
                                          "VDEV_ERR_INVALID_ARG")
    return n


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """sum(per_example_loss * sample_weight) / global_batch_size, a
    0-dimensional tensor (see the module's notes for the default
    global_batch_size). per_example_loss has at least one dimension."""
    t = convert_to_tensor(per_example_loss)
    if sample_weight is not None:
        t = multiply(t, sample_weight)
    if global_batch_size is not None:
        if isinstance(global_batch_size, Tensor):
            global_batch_size = int(global_batch_size)
        if isinstance(global_batch_size, bool) or not isinstance(global_batch_size,
                                                                 numbers.Integral):
            raise TypeError("global_batch_size must be an integer, not %r"
                            % (global_batch_size,))
        if global_batch_size <= 0:
            raise errors.InvalidArgumentError("global_batch_size must be positive.",
                                              "VDEV_ERR_INVALID_ARG")
    ctx = _strategy_context.replica()
    if ctx is not None:
        h = ctx._check()
        if global_batch_size is None and len(t.shape) > 0:
            global_batch_size = _replica_global_batch(ctx, int(t.shape[0]))
        # C's own rule (global_batch_size 0) is not used: its "last batch
        # split" may be a batch the loss has nothing to do with
        return Tensor(_lib.made(lib.vdev_replica_compute_average_loss(
            h, t._handle, int(global_batch_size or 0))))
    if global_batch_size is None and _strategy_context.scope_strategy() is not None:
        raise RuntimeError("You are calling `compute_average_loss` in cross replica context, "
                           "while it was expected to be called in replica context.")
    shape = t.shape
    if len(shape) == 0:
        raise errors.InvalidArgumentError(
            "Invalid value passed for `per_example_loss`. Expected a tensor with at least "
            "rank 1. Received per_example_loss of shape [] with rank 0", "VDEV_ERR_INVALID_ARG")
    total = reduce_sum(t)
    if global_batch_size is None and shape[0] == 0:
        return total  # 0, as TensorFlow's div_no_nan(0, 0), not the NaN of 0 / 0
    return divide(total, float(global_batch_size or shape[0]))


# ---- 2-D convolution and pooling ----

def _unimplemented(msg):
    return errors.UnimplementedError(msg, "VDEV_ERR_UNSUPPORTED")


def _get_sequence(value, name, n=2):
    """TensorFlow's _get_sequence for n spatial dimensions, channels last: an
    int or a list of 1, n or n + 2 ints as a list of n + 2 ([1, h, w, 1] from
    1 or 2 when n is 2; [1, w, 1] from 1 when n is 1)."""
    if value is None:
        return [1] * (n + 2)
    if isinstance(value, Tensor):
        value = value.numpy().tolist()
    if isinstance(value, (list, tuple)):
        value = list(value)
    elif not isinstance(value, abc.Sized):
        value = [value]
    else:
        value = list(value)
    k = len(value)
    if k == 1:
        value = value * n
    elif k not in (n, n + 2):
        raise ValueError("%s should be of length 1, %d or %d. Received: %s=%s of length %d"
                         % (name, n, n + 2, name, value, k))
    for v in value:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError("Expected int for argument '%s' not %r." % (name, v))
        if not -2 ** 31 <= int(v) < 2 ** 31:
            raise ValueError("%s: %d does not fit a 32-bit int" % (name, int(v)))
    value = [int(v) for v in value]
    return value if k == n + 2 else [1] + value + [1]


def _nhwc(fn, data_format):
    if data_format != "NHWC":
        raise _unimplemented("vdev.nn.%s: data_format %r is not supported; vdev takes NHWC "
                             "only" % (fn, data_format))


def _padding(fn, padding):
    """padding as bytes for C, which refuses strings other than "SAME" and
    "VALID" in TensorFlow's words."""
    if padding == "EXPLICIT":
        raise ValueError("'EXPLICIT' is not a valid value for `padding`. To use explicit "
                         "padding, `padding` must be a list.")
    if isinstance(padding, (list, tuple)):
        raise _unimplemented("vdev.nn.%s: explicit padding (a list) is not supported; use "
                             "\"SAME\" or \"VALID\"" % fn)
    if isinstance(padding, bytes):
        padding = padding.decode("utf-8", "replace")
    if not isinstance(padding, str):
        raise TypeError("Expected string for argument 'padding' not %r." % (padding,))
    return padding.encode("utf-8")


def _spatial_steps(strides, dilations, n=2, strides_name="strides"):
    """conv2d's and conv2d_transpose's strides and dilations, 4 each (NHWC;
    conv1d's 3, NWC, n 1), the batch's and the depth's 1 (TensorFlow's
    refusal otherwise)."""
    st = _get_sequence(strides, strides_name, n)
    dil = _get_sequence(dilations, "dilations", n)
    if st[0] != 1 or st[-1] != 1:
        raise _unimplemented("Current implementation does not yet support strides in the batch "
                             "and depth dimensions.")
    if dil[0] != 1 or dil[-1] != 1:
        raise _unimplemented("Current implementation does not yet support dilations in the "
                             "batch and depth dimensions.")
    return st, dil


def _beside(x, value):
    """value as a tensor: itself when it is one, else made where x is."""
    if isinstance(value, Tensor):
        return value
    with _near(x):
        return convert_to_tensor(value)


def conv2d(input, filters, strides, padding, data_format="NHWC", dilations=None, name=None):
    """The 2-D convolution of input [N,H,W,C] with filters [KH,KW,C,O], as
    ``tf.nn.conv2d``: [N,OH,OW,O]; dilations space the filter's taps."""
    _nhwc("conv2d", data_format)
    st, dil = _spatial_steps(strides, dilations)
    x = _t(input)
    if isinstance(padding, (list, tuple)):  # explicit: the pad, then VALID (vdev/_pad.py)
        x, padding = _pad.pad(x, _pad.explicit("Conv2D", padding)), "VALID"
    pad = _padding("conv2d", padding)
    f = _beside(x, filters)
    return _new(lib.vdev_conv2d_dilated(x._handle, f._handle, st[1], st[2], dil[1], dil[2],
                                        pad))


def depthwise_conv2d(input, filter, strides, padding, data_format=None, dilations=None,
                     name=None):
    """The depthwise 2-D convolution of input [N,H,W,C] with filter
    [KH,KW,C,M], as ``tf.nn.depthwise_conv2d``: [N,OH,OW,C*M], channel
    c*M+m the convolution of input channel c with filter[:, :, c, m].
    ``strides`` is TensorFlow's list of 4 ints [1, s, s, 1] (the row and
    column strides equal), ``dilations`` its list of 2 ints (the rate along
    the rows and the columns; None: 1, 1)."""
    if data_format not in (None, "NHWC"):
        _nhwc("depthwise_conv2d", data_format)
    if isinstance(strides, Tensor):
        strides = strides.numpy().tolist()
    if not isinstance(strides, (list, tuple)):
        raise TypeError("Expected list for 'strides' argument to 'depthwise_conv2d_native' Op, "
                        "not %r." % (strides,))
    st = list(strides)
    for v in st:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError("Expected int for argument 'strides' not %r." % (v,))
        if not -2 ** 31 <= int(v) < 2 ** 31:
            raise ValueError("strides: %d does not fit a 32-bit int" % int(v))
    st = [int(v) for v in st]
    if len(st) != 4:
        raise errors.InvalidArgumentError("Sliding window strides field must specify 4 "
                                          "dimensions", "VDEV_ERR_INVALID_ARG")
    if st[1] != st[2]:
        raise errors.InvalidArgumentError("Current implementation only supports equal length "
                                          "strides in the row and column dimensions.",
                                          "VDEV_ERR_INVALID_ARG")
    if st[0] != 1 or st[3] != 1:
        raise errors.InvalidArgumentError("Current implementation does not yet support strides "
                                          "in the batch and depth dimensions.",
                                          "VDEV_ERR_INVALID_ARG")
    if dilations is None:
        dil = [1, 1]
    else:
        if isinstance(dilations, Tensor):
            dilations = dilations.numpy().tolist()
        dil = list(dilations) if isinstance(dilations, (list, tuple)) else [dilations]
        if len(dil) != 2 or any(isinstance(v, bool) or not isinstance(v, numbers.Integral)
                                for v in dil):
            raise ValueError("vdev.nn.depthwise_conv2d takes dilations as 2 ints (the rate "
                             "along the rows and the columns), as TensorFlow does, not %r"
                             % (dilations,))
        dil = [int(v) for v in dil]
        if min(dil) < 1:
            raise ValueError("`dilation_rate` must be positive. Received: dilation_rate=[%s]"
                             % " ".join(str(v) for v in dil))
        if max(dil) > 2 ** 31 - 1:
            raise ValueError("dilations: %d does not fit a 32-bit int" % max(dil))
    if max(dil) > 1 and max(st) > 1:
        raise ValueError("vdev.nn.depthwise_conv2d takes strides above 1 only with dilations "
                         "of 1 (TensorFlow requires strides of 1 where a dilation exceeds 1). "
                         "Received: strides=%s and dilations=%s" % (st, dil))
    x = _t(input)
    if isinstance(padding, (list, tuple)):  # explicit: the pad, then VALID (vdev/_pad.py)
        x, padding = _pad.pad(x, _pad.explicit("DepthwiseConv2dNative", padding)), "VALID"
    pad = _padding("depthwise_conv2d", padding)
    f = _beside(x, filter)
    return _new(lib.vdev_depthwise_conv2d(x._handle, f._handle, st[1], st[2], dil[0], dil[1],
                                          pad))


def _input_sizes(output_shape):
    """conv2d_transpose's output_shape as a list of ints, as TensorFlow
    converts it to the op's int32 input_sizes."""
    if isinstance(output_shape, Tensor):
        if output_shape.dtype != int32:
            raise errors.InvalidArgumentError(
                "cannot compute Conv2DBackpropInput as input #0(zero-based) was expected to be "
                "a int32 tensor but is a %s tensor"
                % ("float" if output_shape.dtype != int32 else "int32"),
                "VDEV_ERR_INVALID_ARG")
        if output_shape.ndim != 1:
            raise errors.InvalidArgumentError(
                "Conv2DBackpropInput: input_sizes input must be 1-dim, not %d"
                % output_shape.ndim, "VDEV_ERR_INVALID_ARG")
        return [int(v) for v in output_shape.numpy().tolist()]
    vals = output_shape.tolist() if hasattr(output_shape, "tolist") else output_shape
    if isinstance(vals, numbers.Integral) and not isinstance(vals, bool):
        raise errors.InvalidArgumentError(
            "Conv2DBackpropInput: input_sizes input must be 1-dim, not 0",
            "VDEV_ERR_INVALID_ARG")
    if not isinstance(vals, (list, tuple)):
        raise TypeError("Cannot convert %r to EagerTensor of dtype int32" % (output_shape,))
    ndim, inner = 1, vals
    while inner and isinstance(inner[0], (list, tuple)):
        ndim, inner = ndim + 1, inner[0]
    if ndim != 1:
        raise errors.InvalidArgumentError(
            "Conv2DBackpropInput: input_sizes input must be 1-dim, not %d" % ndim,
            "VDEV_ERR_INVALID_ARG")
    out = []
    for v in vals:
        if isinstance(v, Tensor) and v.ndim == 0:
            v = v.numpy().item()
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError("Cannot convert %r to EagerTensor of dtype int32"
                            % (list(vals) if isinstance(vals, tuple) else vals,))
        out.append(int(v))
    return out


def conv2d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NHWC",
                     dilations=None, name=None):
    """The transposed 2-D convolution of input [N,H,W,O] with filters
    [KH,KW,C,O] into output_shape ([N,OH,OW,C] or [OH,OW]), as
    ``tf.nn.conv2d_transpose`` (see the module's notes)."""
    if data_format is None:
        data_format = "NHWC"
    _nhwc("conv2d_transpose", data_format)
    st, dil = _spatial_steps(strides, dilations)
    if isinstance(padding, bytes):
        padding = padding.decode("utf-8", "replace")
    if not isinstance(padding, str):  # TensorFlow's op takes a string: no explicit list
        raise TypeError("Expected string for argument 'padding' not %r." % (padding,))
    sizes = _input_sizes(output_shape)
    x = _t(input)
    f = _beside(x, filters)
    arr = (ctypes.c_int64 * max(len(sizes), 1))(*sizes)
    return _new(lib.vdev_conv2d_transpose(x._handle, f._handle, arr, len(sizes), st[1], st[2],
                                          dil[1], dil[2], padding.encode("utf-8")))


def _pool_steps(fn, ksize, strides, n=2):
    """A pool's ksize and strides, n + 2 each, the batch's and the depth's 1
    (TensorFlow's refusal, or vdev's, otherwise)."""
    ks = _get_sequence(ksize, "ksize", n)
    st = _get_sequence(strides, "strides", n)
    if ks[0] != 1 or st[0] != 1:
        raise _unimplemented("Pooling is not yet supported on the batch dimension.")
    if ks[-1] != 1 or st[-1] != 1:
        raise _unimplemented("vdev.nn.%s: pooling over the depth dimension is not supported"
                             % fn)
    return ks, st


def _pool(fn, cfn, input, ksize, strides, padding, data_format):
    _nhwc(fn, data_format)
    ks, st = _pool_steps(fn, ksize, strides)
    pad = _padding(fn, padding)
    x = _t(input)
    return _new(cfn(x._handle, ks[1], ks[2], st[1], st[2], pad))


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    """The maximum over each ksize window of input [N,H,W,C], as
    ``tf.nn.max_pool2d``; the gradient goes to each window's first maximum."""
    return _pool("max_pool2d", lib.vdev_max_pool2d, input, ksize, strides, padding, data_format)


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    """The mean over each ksize window of input [N,H,W,C] (of the elements
    inside the input, under SAME), as ``tf.nn.avg_pool2d``."""
    return _pool("avg_pool2d", lib.vdev_avg_pool2d, input, ksize, strides, padding, data_format)


# ---- embeddings ----

def embedding_lookup(params, ids, max_norm=None, name=None):
    """tf.nn.embedding_lookup for a single params tensor [vocabulary, ...]
    (or a list of one): its rows at ids (int32, any shape), shape ids.shape
    + params.shape[1:], as ``vdev.gather(params, ids)``; the gradient of
    params is dense (TensorFlow's IndexedSlices, summed). TensorFlow's
    errors: ValueError "Need at least one param" for an empty list ("params
    must be specified" for None),
    InvalidArgumentError "indices[1] = 7 is not in [0, 5)" (CPU, simulated
    GPUs; zeros on a CUDA GPU, as TensorFlow's GPUs). Several params
    (TensorFlow's sharding by partition_strategy) and max_norm are
    UnimplementedError."""
    if params is None:
        raise ValueError("params must be specified")
    if isinstance(params, (list, tuple)):
        if not params:
            raise ValueError("Need at least one param")
        if len(params) > 1:
            raise _unimplemented("vdev.nn.embedding_lookup takes one params tensor (or a list "
                                 "of one), not %d: vdev does not shard embeddings"
                                 % len(params))
        params = params[0]
    if max_norm is not None:
        raise _unimplemented("vdev.nn.embedding_lookup takes max_norm=None only, not %r"
                             % (max_norm,))
    return gather(params, ids)


from ._nn_1d import (avg_pool1d, conv1d, conv1d_transpose, max_pool1d,  # noqa: E402
                     separable_conv2d)
from ._activation_ops import (elu, gelu, leaky_relu, relu6, selu, silu,  # noqa: E402
                              softplus, softsign, swish)
from ._stat_ops import l2_loss, l2_normalize  # noqa: E402

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "compute_average_loss", "conv2d",
           "conv2d_transpose", "max_pool2d", "avg_pool2d", "embedding_lookup", "depthwise_conv2d",
           "conv1d", "conv1d_transpose", "max_pool1d", "avg_pool1d", "separable_conv2d",
           # vdev/_activation_ops.py
           "elu", "gelu", "leaky_relu", "relu6", "selu", "silu", "softplus", "softsign", "swish",
           # vdev/_stat_ops.py
           "l2_loss", "l2_normalize"]
