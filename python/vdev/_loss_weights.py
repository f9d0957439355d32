"""How ``fit`` and ``evaluate`` weigh losses and metrics, as Keras 2.11's
compile_utils and losses_utils do: ``sample_weight`` (one weight per row,
or per row and step), ``class_weight`` (a weight per class, each row's by
its label: the argmax of a one-hot row, else the label itself; multiplied
into the sample weights; training data only) and an output's mask (Keras's
apply_valid_mask: for a mean, the mask times its size over its count, so
the mean is over the steps that count). A loss is then the sum of the
per-row (or per-step) losses times the weights over the number of those
losses (Keras's SUM_OVER_BATCH_SIZE: not over the weights' sum), or that
sum for 'sum'; a metric's running mean is the sum of its values times the
weights over the weights' sum (Keras's Mean with sample weights). Weights
are squeezed or given a last axis of 1 to meet the losses' rank, then
broadcast, as Keras's squeeze_or_expand_dimensions.
"""

import copy

import numpy as np

from . import _ops, _strategy_context, errors, losses
from ._keras_masks import mask_of
from ._tensor import Tensor

_LOSSES = tuple(getattr(losses, n) for n in losses.__all__ if n != "Reduction")


def mask_numpy(pred):
    """pred's mask (vdev/_keras_masks.py) as NumPy, or None."""
    m = mask_of(pred)
    return None if m is None else m.numpy()


def sample_weights(sw, rows, sizes):
    """sample_weight as float32 NumPy rows, or Keras's cardinality error
    (sizes: the x and y sizes' lines of it)."""
    if sw is None:
        return None
    a = np.asarray(sw.numpy() if isinstance(sw, Tensor) else sw, np.float32)
    if a.ndim == 0 or a.shape[0] != rows:
        raise ValueError("Data cardinality is ambiguous:\n%s  sample_weight sizes: %s\nMake sure "
                         "all arrays contain the same number of samples."
                         % (sizes, a.shape[0] if a.ndim else "()"))
    return a


def class_weights(class_weight, y, sw):
    """Keras's class_weight map: each row's weight by its class, times the
    sample weights when there are some."""
    if not isinstance(class_weight, dict):
        raise ValueError("vdev's fit takes class_weight as a dict of class: weight, not %r"
                         % (class_weight,))
    ids = sorted(class_weight)
    if ids != list(range(len(ids))):
        raise ValueError("Expected `class_weight` to be a dict with keys from 0 to one less "
                         "than the number of classes, found %s" % (class_weight,))
    y = np.asarray(y)
    if y.ndim > 2:
        raise ValueError("`class_weight` not supported for 3+ dimensional targets.")
    classes = (np.argmax(y, axis=1) if y.ndim == 2 and y.shape[1] > 1
               else y.reshape(-1).astype(np.int64))
    table = np.asarray([class_weight[c] for c in ids], np.float32)
    bad = np.flatnonzero((classes < 0) | (classes >= len(table)))
    if bad.size:
        i = int(bad[0])
        raise errors.InvalidArgumentError("indices[%d] = %d is not in [0, %d)"
                                          % (i, classes[i], len(table)), "VDEV_ERR_INVALID_ARG")
    cw = table[classes]
    if sw is None:
        return cw
    return sw * cw.reshape(cw.shape + (1,) * (sw.ndim - 1))  # each row's by its class


def _sparse_rows(fn, y, pred):
    """Keras's sparse categorical cross-entropy of each row (vdev's op
    gives the mean only): -log_softmax(z)[label], z the logits or, from
    probabilities, the log of them clipped to [1e-7, 1 - 1e-7], as Keras's
    backend; the label picked by a one-hot product (adding zeros: exact)."""
    z = _ops._t(pred)
    if not fn.from_logits:
        z = _ops.log(losses._clip_probs(z))
    labels = np.asarray(y.numpy() if isinstance(y, Tensor) else y)
    if labels.ndim == z.ndim and labels.shape[-1] == 1:
        labels = labels[..., 0]
    labels = labels.astype(np.int64)
    classes = int(z.shape[-1])
    bad = labels[(labels < 0) | (labels >= classes)]
    if bad.size:
        raise errors.InvalidArgumentError(
            "Received a label value of %d which is outside the valid range of [0, %d)."
            % (int(bad[0]), classes), "VDEV_ERR_INVALID_ARG")
    with _ops._near(z):
        onehot = _ops.convert_to_tensor(np.eye(classes, dtype=np.float32)[labels])
    picked = _ops.reduce_sum(_ops.multiply(onehot, _ops.log_softmax(z)), axis=-1)
    return _ops.negative(picked)


def _fit_rank(w, rank):
    """Keras's squeeze_or_expand_dimensions of weights against a rank."""
    if w.ndim == rank + 1 and w.shape[-1] == 1:
        return w.reshape(w.shape[:-1])
    if w.ndim == rank - 1:
        return w.reshape(w.shape + (1,))
    return w


def weighted_loss(fn, y, pred, weights, reduction):
    """fn(y, pred) weighted by the sample weights (NumPy rows, or None)
    and pred's mask, reduced as the module says."""
    mask = mask_of(pred)
    if mask is not None and reduction == "sum" and _strategy_context.replica() is not None:
        raise ValueError("vdev's fit under a MirroredStrategy takes a model whose output has "
                         "no mask (Keras weighs a masked output's losses by each replica's "
                         "own count of the steps that count); fit it on one device")
    mean = (reduction or getattr(fn, "reduction", "auto")) != "sum"
    if isinstance(fn, losses.SparseCategoricalCrossentropy):
        values = _sparse_rows(fn, y, pred)
    else:
        if isinstance(fn, _LOSSES):
            fn = copy.copy(fn)
            fn.reduction = "none"
        values = fn(y, pred)
    if not isinstance(values, Tensor):
        values = _ops.convert_to_tensor(values)
    w = None
    if weights is not None:
        with _ops._near(values):
            w = _ops.convert_to_tensor(_fit_rank(np.asarray(weights, np.float32), values.ndim))
    if mask is not None:
        if tuple(values.shape) != tuple(mask.shape):
            raise ValueError("vdev: the loss of an output with a mask of shape %s gave losses "
                             "of shape %s; Keras weighs one loss per masked step (a loss with "
                             "reduction 'none', or a function giving [batch, steps])"
                             % (tuple(mask.shape), tuple(values.shape)))
        from ._keras_masks import as_float
        m = as_float(mask)
        if mean:  # Keras's apply_valid_mask: total / valid where kept
            m = _ops.multiply(m, _ops.divide(float(mask.shape.num_elements()),
                                             _ops.reduce_sum(m)))
        w = m if w is None else _ops.multiply(w, m)
    weighted = _ops.multiply(values, w)
    total = _ops.reduce_sum(weighted)
    if not mean:
        return total
    count = weighted.shape.num_elements()
    return _ops.divide(total, float(count)) if count else total


def metric_weights(values, weights, mask):
    """The weights of a metric's values (NumPy): the sample weights times
    the mask, fitted to the values' rank and broadcast; None for none."""
    w = None if weights is None else _fit_rank(np.asarray(weights, np.float64), values.ndim)
    if mask is not None:
        m = _fit_rank(np.asarray(mask, np.float64), values.ndim)
        w = m if w is None else _fit_rank(w, m.ndim) * m
    return None if w is None else np.broadcast_to(w, values.shape)
