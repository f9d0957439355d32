"""``vdev.nn``'s 1-D convolution and pooling and its separable 2-D
convolution, under TensorFlow's names: ``conv1d``, ``conv1d_transpose``,
``max_pool1d``, ``avg_pool1d`` and ``separable_conv2d``, made of the 2-D ops
as TensorFlow's Python makes them (vdev/ops.h: vdev_conv1d, vdev_max_pool1d,
vdev_avg_pool1d; conv1d_transpose is conv2d_transpose on one row and
separable_conv2d depthwise_conv2d then a 1 x 1 conv2d, here as in
TensorFlow), so their gradients are the 2-D ops'. The checks of the
strides, dilations and windows are the 2-D ops' (nn.py), for one spatial
dimension.

``conv1d(input, filters, stride, padding, data_format="NWC",
dilations=None)``: input [batch, width, channels] (or [batch, batch2, width,
channels]), filters [width, in, out]; stride and dilations an int or a list
of 1 or 3 ints ([1, s, 1]) as TensorFlow's _get_sequence takes them, the
batch's and the channels' 1. ``max_pool1d`` / ``avg_pool1d(input, ksize,
strides, padding, data_format="NWC")``: input [batch, width, channels], ksize
and strides as conv1d's stride. ``separable_conv2d(input, depthwise_filter,
pointwise_filter, strides, padding, data_format=None, dilations=None)``:
depthwise_filter [height, width, in, multiplier], pointwise_filter [1, 1,
in * multiplier, out], strides TensorFlow's 4 ints [1, s, s, 1], dilations
its 2. Left out, each refused with UnimplementedError: data_format "NCW"
(and "NCHW"), explicit padding (a list).
"""

from ._lib import lib
from ._ops import _new, _t, reshape


def _nn():
    from . import nn
    return nn


def _nwc(fn, data_format):
    if data_format not in (None, "NWC", "NHWC"):
        raise _nn()._unimplemented("vdev.nn.%s: data_format %r is not supported; vdev takes "
                                   "NWC only" % (fn, data_format))


def conv1d(input, filters, stride, padding, data_format="NWC", dilations=None, name=None):
    """The 1-D convolution of input [N,W,C] with filters [KW,C,O], as
    ``tf.nn.conv1d``: [N,OW,O]; dilations space the filter's taps."""
    _nwc("conv1d", data_format)
    st, dil = _nn()._spatial_steps(stride, dilations, 1, "stride")
    pad = _nn()._padding("conv1d", padding)
    x = _t(input)
    f = _nn()._beside(x, filters)
    return _new(lib.vdev_conv1d(x._handle, f._handle, st[1], dil[1], pad))


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NWC",
                     dilations=None, name=None):
    """The transposed 1-D convolution of input [N,W,O] with filters [KW,C,O]
    into output_shape [N,OW,C], as ``tf.nn.conv1d_transpose``: conv2d_transpose
    of the input, the filters and the output shape with a row added (strides
    and dilations with a 1 before, as TensorFlow's), whose errors it gives
    with those 4-D shapes, as TensorFlow's does."""
    _nwc("conv1d_transpose", data_format)
    # conv2d_transpose checks the strides and dilations, a 1 put before each
    st = _nn()._get_sequence(strides, "strides", 1)
    dil = _nn()._get_sequence(dilations, "dilations", 1)
    sizes = _nn()._input_sizes(output_shape)
    if len(sizes) != 3:
        raise ValueError("`output_shape` must be of shape [3]. Received: shape=(%d,)"
                         % len(sizes))
    x = _t(input)
    f = _nn()._beside(x, filters)
    xs, fs = [int(d) for d in x.shape], [int(d) for d in f.shape]
    y = _nn().conv2d_transpose(reshape(x, xs[:1] + [1] + xs[1:]), reshape(f, [1] + fs),
                               sizes[:1] + [1] + sizes[1:], [1] + st, padding,
                               dilations=[1] + dil)
    return reshape(y, [int(y.shape[0]), int(y.shape[2]), int(y.shape[3])])


def _pool1d(fn, cfn, input, ksize, strides, padding, data_format):
    _nwc(fn, data_format)
    ks, st = _nn()._pool_steps(fn, ksize, strides, 1)
    pad = _nn()._padding(fn, padding)
    x = _t(input)
    return _new(cfn(x._handle, ks[1], st[1], pad))


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    """The maximum over each ksize window of input [N,W,C], as
    ``tf.nn.max_pool1d``; the gradient goes to each window's first maximum."""
    return _pool1d("max_pool1d", lib.vdev_max_pool1d, input, ksize, strides, padding,
                   data_format)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    """The mean over each ksize window of input [N,W,C] (of the elements
    inside the input, under SAME), as ``tf.nn.avg_pool1d``."""
    return _pool1d("avg_pool1d", lib.vdev_avg_pool1d, input, ksize, strides, padding,
                   data_format)


def _dims_text(shape):
    """A static shape as TensorFlow's TensorShape prints it: (3, 3), (3,)."""
    return "(%s)" % ", ".join(str(d) for d in shape) if len(shape) != 1 else "(%d,)" % shape[0]


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding,
                     data_format=None, dilations=None, name=None):
    """The depthwise convolution of input [N,H,W,C] with depthwise_filter
    [KH,KW,C,M], then the 1 x 1 convolution of that with pointwise_filter
    [1,1,C*M,O], as ``tf.nn.separable_conv2d``: [N,OH,OW,O]."""
    nn = _nn()
    x = _t(input)
    pf = nn._beside(x, pointwise_filter)
    shape = tuple(int(d) for d in pf.shape)
    # TensorFlow checks the pointwise filter's static shape first
    if len(shape) != 4:
        raise ValueError("Shape %s must have rank 4" % _dims_text(shape))
    for d in (0, 1):
        if shape[d] != 1:
            raise ValueError("Dimensions %d and 1 are not compatible" % shape[d])
    depthwise = nn.depthwise_conv2d(x, depthwise_filter, strides, padding,
                                    data_format=data_format, dilations=dilations)
    return nn.conv2d(depthwise, pf, [1, 1, 1, 1], "VALID",
                     data_format="NHWC" if data_format is None else data_format)
