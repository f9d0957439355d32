"""Keras 2.11's masks: a tensor may carry ``_keras_mask``, a [batch, steps]
mask of the steps that count, which a layer's call passes on as Keras's
base Layer.__call__ does. ``Embedding(mask_zero=True)`` makes one (the ids
other than 0), ``Masking(mask_value)`` another (the steps whose features
are not all mask_value); a layer whose Keras call takes ``mask`` gets the
inputs' masks as it (the recurrent layers and Bidirectional skip the masked
steps, GlobalAveragePooling1D averages the others, Softmax adds -1e9 where
masked); MultiHeadAttention reads its query's and value's; a layer that
supports masking gives its output the mask its ``compute_mask`` says
(Dense, Dropout, the activations and normalizations pass it on, the merge
layers combine them, a recurrent layer keeps it with return_sequences);
any other layer drops it, as Keras's (its documentation says it raises;
its code returns). ``fit`` and ``evaluate`` weigh a masked output's losses
as Keras's apply_valid_mask: the mean over the steps that count. A mask is
a bool tensor on the data's device, as Keras's; a mask given (``layer(x,
mask=m)``) may be any tensor or array of truth values of that shape (a
number other than 0 counts). Layers that compute with a mask take it as
float32 1.0 / 0.0 (``as_float``, ``as_mask``: a Cast on the device).
"""

import numpy as np

from . import _ops
from ._tensor import Tensor, float32

def mask_of(t):
    """t's mask, or None (a tensor without one, or not a tensor)."""
    return getattr(t, "_keras_mask", None) if isinstance(t, Tensor) else None


def input_masks(inputs):
    """Keras's implicit masks of a call: the input's mask, a list of the
    inputs' for a list of inputs, None when no input has one."""
    if isinstance(inputs, Tensor):
        return getattr(inputs, "_keras_mask", None)
    if isinstance(inputs, (list, tuple)):
        masks = [mask_of(t) for t in inputs]
        return masks if any(m is not None for m in masks) else None
    return None


def attach(outputs, masks):
    """Keras's _set_mask_metadata: each output tensor its mask (a single
    mask goes to the first output)."""
    outs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    ms = masks if isinstance(masks, (list, tuple)) else [masks]
    for t, m in zip(outs, ms):
        if isinstance(t, Tensor):
            t._keras_mask = m


def masked_call(call, layer, inputs, args, kwargs):
    """layer's call on tensors, with Keras's mask handling around it: the
    implicit mask given to a layer that takes one, the output's mask from
    compute_mask when the layer supports masking (unless its call set it)."""
    masks = input_masks(inputs)
    if masks is None:  # the common case: no mask anywhere
        return call(layer, inputs, *args, **kwargs)
    explicit = kwargs.get("mask")
    if explicit is None and layer._expects_mask:
        kwargs["mask"] = masks
    out = call(layer, inputs, *args, **kwargs)
    if layer.supports_masking:
        flat = out if isinstance(out, (list, tuple)) else [out]
        if not all(mask_of(t) is not None for t in flat):
            attach(out, layer.compute_mask(inputs, explicit if explicit is not None else masks))
    return out


def _logic():
    from . import _logic_ops
    return _logic_ops


def as_float(m):
    """A mask tensor as float32 1.0 / 0.0 for arithmetic (a bool one cast on
    its device; a float32 one as it is)."""
    return _logic().cast(m, float32) if m.dtype.is_bool else m


def as_bool(m):
    """A mask tensor as bool (a number other than 0 counts), as Keras's
    masks are."""
    return m if m.dtype.is_bool else _logic().not_equal(m, 0)


def as_mask(mask, near, shape):
    """A mask given to a call (a tensor, a NumPy array or nested lists of
    truth values) as float32 1.0 / 0.0 on near's device, checked to be
    [batch, steps] of shape ``shape``: a bool tensor is cast where it is."""
    if isinstance(mask, Tensor) and mask.dtype is float32:
        m = mask
    elif isinstance(mask, Tensor) and mask.dtype.is_bool:
        m = as_float(mask)
    else:
        values = mask.numpy() if isinstance(mask, Tensor) else np.asarray(mask)
        with _ops._near(near):
            m = _ops.constant((values != 0).astype(np.float32))
    got = tuple(int(d) for d in m.shape)
    if got != tuple(shape):
        raise ValueError("vdev: a mask of shape %s for inputs of [batch, steps] = %s: a mask "
                         "has one truth value per step" % (got, tuple(shape)))
    return m


def select(m, a, b):
    """a where m is set, b where it is not (m float32 1.0 / 0.0 or bool,
    broadcast against both), as tf.where: one SelectByMask op where a and b
    have one shape and m broadcasts to it; else m a + (1 - m) b, the same
    for finite a and b, its gradient m and 1 - m."""
    if isinstance(m, Tensor) and isinstance(a, Tensor) and isinstance(b, Tensor):
        sa, sm = tuple(a.shape), tuple(m.shape)
        if tuple(b.shape) == sa and len(sm) <= len(sa) and (m.dtype is float32
                                                            or m.dtype.is_bool):
            if all(d == 1 or d == e for d, e in zip(sm, sa[len(sa) - len(sm):])):
                return _ops.select_mask(m, a, b)
    if isinstance(m, Tensor):
        m = as_float(m)
    return _ops.add(_ops.multiply(m, a), _ops.multiply(_ops.subtract(1.0, m), b))
