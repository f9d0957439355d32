"""The metrics of ``fit`` and ``evaluate`` (vdev/_fit.py): compile's metric
strings and the values per example they stand for (Keras 2.11's rules:
'accuracy' by the shapes, labels [N] beside outputs [N, 1] taken as
[N, 1]), the checks of compile's metric lists, their names, and the weights
of a metric object (vdev.metrics) from the rows' weights and the output's
mask.
"""

import numpy as np

from . import metrics as metrics_module

_METRICS = ("accuracy", "acc", "binary_accuracy", "categorical_accuracy",
            "sparse_categorical_accuracy", "mse", "mean_squared_error", "mae",
            "mean_absolute_error")


def _same_rank(yt, yp):
    """Keras's squeeze_or_expand_dimensions for metrics: a trailing 1 dropped
    from the one of higher rank when the ranks differ by one."""
    if yt.ndim == yp.ndim + 1 and yt.shape[-1] == 1:
        yt = yt[..., 0]
    elif yp.ndim == yt.ndim + 1 and yp.shape[-1] == 1:
        yp = yp[..., 0]
    return yt, yp


def _accuracy_kind(yt, yp):
    """Keras 2.11's rule for 'accuracy' (compile_utils): binary when the
    predictions' last axis is 1, sparse categorical when the labels have
    fewer axes or a last axis of 1 beside several classes, else
    categorical."""
    if yp.shape[-1] == 1:
        return "binary_accuracy"
    if yt.ndim < yp.ndim or (yt.shape[-1] == 1 and yp.shape[-1] > 1):
        return "sparse_categorical_accuracy"
    return "categorical_accuracy"


def _metric_values(kind, yt, yp):
    """One value per example (Keras's metric functions), float64. As
    Keras's compile_utils.match_dtype_and_rank, labels of rank 1 beside
    predictions of rank 2 gain a trailing axis first ([N] beside [N, 1]:
    one value per row, not one mean over the batch)."""
    if np.ndim(yt) == 1 and yp.ndim == 2:
        yt = np.asarray(yt)[:, None]
    if kind in ("accuracy", "acc"):
        kind = _accuracy_kind(yt, yp)
    if kind == "sparse_categorical_accuracy":
        if yt.ndim == yp.ndim and yt.shape[-1] == 1:
            yt = yt[..., 0]
        return (yt == np.argmax(yp, axis=-1)).astype(np.float64)
    if kind == "categorical_accuracy":
        return (np.argmax(yt, axis=-1) == np.argmax(yp, axis=-1)).astype(np.float64)
    yt, yp = _same_rank(np.asarray(yt, np.float32), yp)
    if kind == "binary_accuracy":
        return np.mean(yt == (yp > 0.5).astype(np.float32), axis=-1, dtype=np.float64)
    d = yp.astype(np.float64) - yt
    if kind in ("mse", "mean_squared_error"):
        return np.mean(d * d, axis=-1)
    return np.mean(np.abs(d), axis=-1)


def _object_weights(wb, mask):
    """A metric object's sample weights: the rows' weights times the
    output's mask (a row's weight over its steps), either, or None."""
    if mask is None:
        return wb
    if wb is None:
        return mask
    w = np.asarray(wb, np.float64)
    return w.reshape(w.shape + (1,) * (mask.ndim - w.ndim)) * mask


def _metric_list(metrics):
    """compile's metrics (or weighted_metrics) as a list, each checked."""
    if metrics is None:
        return []
    if isinstance(metrics, str) or callable(metrics):
        metrics = [metrics]
    elif isinstance(metrics, dict):
        raise ValueError("vdev's models have one output: give metrics as a list, not a dict")
    out = []
    for m in metrics:
        if isinstance(m, str) and m not in _METRICS:
            try:  # a metric class by name ("AUC", "Precision", ...), as Keras's get
                m = metrics_module.get(m)
            except ValueError:
                raise ValueError("Unknown metric function: %r. vdev's metrics are %s, a "
                                 "vdev.metrics class name or object, or a callable "
                                 "fn(y_true, y_pred) on numpy arrays"
                                 % (m, ", ".join(repr(k) for k in _METRICS))) from None
        elif not isinstance(m, str) and not callable(m):
            raise ValueError("Could not interpret metric identifier: %r" % (m,))
        out.append(m)
    return out


def _metric_name(m):
    if isinstance(m, metrics_module.Metric):
        return m.name
    return m if isinstance(m, str) else getattr(m, "__name__", type(m).__name__)
