"""Keras 2.11's metric objects, as ``vdev.metrics`` (``tf.keras.metrics``):
stateful, ``update_state(y_true, y_pred, sample_weight=None)``,
``result()``, ``reset_state()``, and ``metric(y_true, y_pred)`` (an update,
then the result). ``compile(metrics=[...])`` takes them beside the metric
strings, and fit and evaluate update each at every batch and log its
result under its name (an epoch starts it afresh, as Keras's reset).

``Mean``, and the means of a value per example: ``Accuracy``,
``BinaryAccuracy(threshold=0.5)``, ``CategoricalAccuracy``,
``SparseCategoricalAccuracy``, ``TopKCategoricalAccuracy(k=5)``,
``SparseTopKCategoricalAccuracy(k=5)``, ``MeanSquaredError``,
``MeanAbsoluteError``, ``RootMeanSquaredError`` (the root of the mean);
and the confusion counts at thresholds (a prediction above a threshold is a
positive; labels are true where not 0): ``TruePositives``,
``FalsePositives``, ``TrueNegatives``, ``FalseNegatives``,
``Precision(thresholds=None, class_id=None)``, ``Recall`` (at 0.5 by
default; tp / (tp + fp) and tp / (tp + fn), 0 with nothing to divide by),
and ``AUC(num_thresholds=200, curve="ROC", summation_method=
"interpolation", thresholds=None, from_logits=False)``: Keras's thresholds
(evenly spaced in [0, 1], and one just below 0 and one just above 1), its
Riemann sums (interpolation, minoring, majoring) and, for the PR curve
with interpolation, Davis and Goadrich's interpolation, as Keras computes
them. The counts and sums are kept on the host in float64 (Keras's are
float32 variables): the same results but for the last bits. Sample
weights weigh each example (a row's weight spread over its values). What
vdev has not is a ValueError naming it: several thresholds at once for
Precision and Recall, ``top_k``, ``multi_label`` AUC.
"""

import numpy as np

from ._tensor import Tensor

__all__ = ["AUC", "Accuracy", "BinaryAccuracy", "CategoricalAccuracy", "FalseNegatives",
           "FalsePositives", "Mean", "MeanAbsoluteError", "MeanSquaredError", "Metric",
           "Precision", "Recall", "RootMeanSquaredError", "SparseCategoricalAccuracy",
           "SparseTopKCategoricalAccuracy", "TopKCategoricalAccuracy", "TrueNegatives",
           "TruePositives", "get"]

_EPSILON = 1e-7  # Keras's backend.epsilon()


def _np(x):
    return np.asarray(x.numpy() if isinstance(x, Tensor) else x)


def _unique_name(cls):
    from .layers import _snake_case, _unique_name as unique
    return unique(_snake_case(cls.__name__))


def _fit_weights(w, shape):
    """Sample weights broadcast to values of ``shape`` (a row's weight over
    its values; Keras's squeeze_or_expand_dimensions, then broadcast)."""
    if w is None:
        return None
    w = _np(w).astype(np.float64)
    if w.ndim == len(shape) + 1 and w.shape[-1] == 1:
        w = w[..., 0]
    while w.ndim < len(shape):
        w = w[..., None]
    return np.broadcast_to(w, shape)


class Metric:
    """Keras's base metric: state, update_state, result, reset_state."""

    def __init__(self, name=None, dtype=None):
        self.name = name or _unique_name(type(self))
        self.dtype = "float32"
        self.reset_state()

    def reset_state(self):
        raise NotImplementedError

    reset_states = property(lambda self: self.reset_state)  # Keras's older name

    def update_state(self, y_true, y_pred, sample_weight=None):
        raise NotImplementedError

    def result(self):
        raise NotImplementedError

    def __call__(self, y_true, y_pred, sample_weight=None):
        self.update_state(y_true, y_pred, sample_weight)
        return self.result()

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Mean(Metric):
    """Keras's Mean: the weighted mean of the values given."""

    def reset_state(self):
        self.total, self.count = 0.0, 0.0

    def update_state(self, values, sample_weight=None):
        v = _np(values).astype(np.float64)
        w = _fit_weights(sample_weight, v.shape)
        self.total += float(np.sum(v if w is None else v * w))
        self.count += float(v.size if w is None else np.sum(w))

    def result(self):
        return self.total / self.count if self.count else 0.0


class _PerExample(Mean):
    """The mean of a value per example (fn(y_true, y_pred))."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        super().update_state(self._values(_np(y_true), _np(y_pred)), sample_weight)


def _squeeze_like(yt, yp):
    """Keras's: labels [N] beside predictions [N, 1] as [N, 1]."""
    if yt.ndim == yp.ndim - 1 and yp.shape[-1] == 1:
        yt = yt[..., None]
    return yt


class Accuracy(_PerExample):
    """How often the predictions equal the labels."""

    def _values(self, yt, yp):
        return (_squeeze_like(yt, yp) == yp).astype(np.float64)


class BinaryAccuracy(_PerExample):
    """How often (prediction > threshold) equals the label (mean over the
    last axis per example)."""

    def __init__(self, name=None, dtype=None, threshold=0.5):
        self.threshold = threshold
        super().__init__(name, dtype)

    def _values(self, yt, yp):
        yt = _squeeze_like(yt, yp).astype(np.float32)
        return np.mean(yt == (yp > self.threshold).astype(np.float32), axis=-1, dtype=np.float64)

    def get_config(self):
        return dict(super().get_config(), threshold=self.threshold)


class CategoricalAccuracy(_PerExample):
    """How often the predictions' argmax is the one-hot labels'."""

    def _values(self, yt, yp):
        return (np.argmax(yt, -1) == np.argmax(yp, -1)).astype(np.float64)


class SparseCategoricalAccuracy(_PerExample):
    """How often the predictions' argmax is the integer label."""

    def _values(self, yt, yp):
        if yt.ndim == yp.ndim and yt.shape[-1] == 1:
            yt = yt[..., 0]
        return (yt.astype(np.int64) == np.argmax(yp, -1)).astype(np.float64)


def _in_top_k(yp, labels, k):
    """Keras's in_top_k: the label's prediction among the k largest."""
    target = np.take_along_axis(yp, labels[..., None], -1)
    return (np.sum(yp > target, -1) < k).astype(np.float64)


class TopKCategoricalAccuracy(_PerExample):
    """How often the one-hot label's class is among the k largest."""

    def __init__(self, k=5, name=None, dtype=None):
        self.k = k
        super().__init__(name, dtype)

    def _values(self, yt, yp):
        return _in_top_k(yp, np.argmax(yt, -1), self.k)

    def get_config(self):
        return dict(super().get_config(), k=self.k)


class SparseTopKCategoricalAccuracy(TopKCategoricalAccuracy):
    """How often the integer label is among the k largest."""

    def _values(self, yt, yp):
        if yt.ndim == yp.ndim and yt.shape[-1] == 1:
            yt = yt[..., 0]
        return _in_top_k(yp, yt.astype(np.int64), self.k)


class MeanSquaredError(_PerExample):
    def _values(self, yt, yp):
        yt = _squeeze_like(yt, yp)
        return np.mean((yp.astype(np.float64) - yt) ** 2, axis=-1)


class MeanAbsoluteError(_PerExample):
    def _values(self, yt, yp):
        yt = _squeeze_like(yt, yp)
        return np.mean(np.abs(yp.astype(np.float64) - yt), axis=-1)


class RootMeanSquaredError(Mean):
    """The root of the mean of the squared errors (of every value)."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        yp = _np(y_pred).astype(np.float64)
        yt = _squeeze_like(_np(y_true), yp)
        super().update_state((yp - yt) ** 2, sample_weight)

    def result(self):
        return float(np.sqrt(super().result()))


class _Confusion(Metric):
    """Confusion counts at thresholds: a prediction above one is a
    positive, a label not 0 is true (Keras's update_confusion_matrix_
    variables)."""

    _default_name = None

    def __init__(self, thresholds=None, name=None, dtype=None, class_id=None):
        t = 0.5 if thresholds is None else thresholds
        self.init_thresholds = thresholds
        self._thresholds = np.atleast_1d(np.asarray(t, np.float64))
        if self._thresholds.size != 1:
            raise ValueError("vdev's %s takes one threshold, not %s"
                             % (type(self).__name__, thresholds))
        self.class_id = class_id
        super().__init__(name, dtype)

    def reset_state(self):
        n = len(self._thresholds)
        self.tp, self.fp, self.tn, self.fn = (np.zeros(n) for _ in range(4))

    def update_state(self, y_true, y_pred, sample_weight=None):
        yp = _np(y_pred).astype(np.float64)
        yt = _squeeze_like(_np(y_true), yp)
        if self.class_id is not None:
            yp, yt = yp[..., self.class_id], yt[..., self.class_id]
        if yp.size and (yp.min() < 0 or yp.max() > 1):
            raise ValueError("vdev's %s takes predictions in [0, 1] (probabilities), as Keras "
                             "asserts; got values in [%g, %g]" % (type(self).__name__,
                                                                 yp.min(), yp.max()))
        w = _fit_weights(sample_weight, yp.shape)
        w = np.ones(yp.shape) if w is None else w
        label = (yt != 0).ravel()
        pred, w = yp.ravel(), w.ravel()
        above = pred[None, :] > self._thresholds[:, None]
        self.tp += np.sum(w * (above & label), 1)
        self.fp += np.sum(w * (above & ~label), 1)
        self.tn += np.sum(w * (~above & ~label), 1)
        self.fn += np.sum(w * (~above & label), 1)

    def get_config(self):
        return dict(super().get_config(), thresholds=self.init_thresholds)


def _div(a, b):
    """Keras's divide_no_nan, elementwise."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


class TruePositives(_Confusion):
    def result(self):
        return float(self.tp[0])


class FalsePositives(_Confusion):
    def result(self):
        return float(self.fp[0])


class TrueNegatives(_Confusion):
    def result(self):
        return float(self.tn[0])


class FalseNegatives(_Confusion):
    def result(self):
        return float(self.fn[0])


class Precision(_Confusion):
    """tp / (tp + fp) at the threshold (0.5)."""

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        if top_k is not None:
            raise ValueError("vdev's Precision takes top_k=None only")
        super().__init__(thresholds, name, dtype, class_id)

    def result(self):
        return float(_div(self.tp, self.tp + self.fp)[0])

    def get_config(self):
        return dict(super().get_config(), top_k=None, class_id=self.class_id)


class Recall(Precision):
    """tp / (tp + fn) at the threshold (0.5)."""

    def result(self):
        return float(_div(self.tp, self.tp + self.fn)[0])


class AUC(Metric):
    """Keras's AUC (see the module)."""

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation",
                 name=None, dtype=None, thresholds=None, multi_label=False, num_labels=None,
                 label_weights=None, from_logits=False):
        if curve.upper() not in ("ROC", "PR"):
            raise ValueError('Invalid AUC curve value: "%s". Expected values are ["ROC", "PR"]'
                             % (curve,))
        if summation_method.lower() not in ("interpolation", "minoring", "majoring"):
            raise ValueError('Invalid AUC summation method value: "%s". Expected values are '
                             '["interpolation", "majoring", "minoring"]' % (summation_method,))
        if multi_label or label_weights is not None:
            raise ValueError("vdev's AUC takes multi_label=False and label_weights=None only")
        if thresholds is not None:
            inner = sorted(thresholds)
            num_thresholds = len(inner) + 2
        else:
            if num_thresholds <= 1:
                raise ValueError("Argument `num_thresholds` must be an integer > 1. Received: "
                                 "num_thresholds=%s" % (num_thresholds,))
            inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        self.num_thresholds = num_thresholds
        self._thresholds = np.array([0.0 - _EPSILON] + list(inner) + [1.0 + _EPSILON])
        self.curve, self.summation_method = curve.upper(), summation_method.lower()
        self.multi_label, self.from_logits = False, bool(from_logits)
        self._given = thresholds
        self._confusion = _Confusion.__new__(_Confusion)
        self._confusion._thresholds = self._thresholds
        self._confusion.class_id = None
        super().__init__(name, dtype)

    @property
    def thresholds(self):
        return list(self._thresholds)

    def reset_state(self):
        self._confusion.reset_state()

    def update_state(self, y_true, y_pred, sample_weight=None):
        yp = _np(y_pred).astype(np.float64)
        if self.from_logits:
            yp = 1 / (1 + np.exp(-yp))
        self._confusion.update_state(y_true, yp, sample_weight)

    def _interpolate_pr_auc(self):
        c = self._confusion
        n = self.num_thresholds
        tp, fp, fn = c.tp, c.fp, c.fn
        dtp = tp[:n - 1] - tp[1:]
        p = tp + fp
        dp = p[:n - 1] - p[1:]
        slope = _div(dtp, np.maximum(dp, 0))
        intercept = tp[1:] - slope * p[1:]
        both = (p[:n - 1] > 0) & (p[1:] > 0)
        ratio = np.where(both, _div(p[:n - 1], np.maximum(p[1:], 0)), 1.0)
        inc = _div(slope * (dtp + intercept * np.log(ratio)), np.maximum(tp[1:] + fn[1:], 0))
        return float(np.sum(inc))

    def result(self):
        if self.curve == "PR" and self.summation_method == "interpolation":
            return self._interpolate_pr_auc()
        c = self._confusion
        n = self.num_thresholds
        recall = _div(c.tp, c.tp + c.fn)
        if self.curve == "ROC":
            x, y = _div(c.fp, c.fp + c.tn), recall
        else:
            x, y = recall, _div(c.tp, c.tp + c.fp)
        if self.summation_method == "interpolation":
            heights = (y[:n - 1] + y[1:]) / 2.0
        elif self.summation_method == "minoring":
            heights = np.minimum(y[:n - 1], y[1:])
        else:
            heights = np.maximum(y[:n - 1], y[1:])
        return float(np.sum((x[:n - 1] - x[1:]) * heights))

    def get_config(self):
        return dict(super().get_config(), num_thresholds=self.num_thresholds, curve=self.curve,
                    summation_method=self.summation_method,
                    thresholds=None if self._given is None else list(self._thresholds[1:-1]),
                    multi_label=False, label_weights=None, from_logits=self.from_logits)


def get(identifier):
    """Keras's metrics.get of a class name ("AUC", "Precision", ...): a new
    metric of that class; a Metric as it is."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str) and identifier in __all__ and identifier not in (
            "Metric", "get"):
        return globals()[identifier]()
    raise ValueError("Unknown metric function: %r" % (identifier,))
