"""Keras 2.11's metric objects (vdev.metrics): each against its formula
written here over the whole data, updated in batches (the state summed),
with sample weights; AUC's ROC and PR curves under every summation method
against Keras's formulas over its thresholds, and a ROC AUC close to the
exact one (the rank statistic) with many thresholds; compile and fit
logging them by name, reset each epoch, weighted metrics weighed, configs
and model.save; errors in Keras's words."""
import numpy as np
import pytest

import vdev
from vdev import layers, metrics

rng = np.random.default_rng(20261220)
f32 = np.float32


def batches(m, yt, yp, w=None, size=7):
    m.reset_state()
    for b in range(0, len(yt), size):
        m.update_state(yt[b:b + size], yp[b:b + size],
                       None if w is None else w[b:b + size])
    return m.result()


def test_means_of_values_per_example():
    n = 40
    probs = rng.uniform(0, 1, (n, 4))
    probs /= probs.sum(1, keepdims=True)
    labels = rng.integers(0, 4, n)
    onehot = np.eye(4)[labels]
    w = rng.uniform(0, 2, n)
    right = (np.argmax(probs, 1) == labels).astype(float)
    assert abs(batches(metrics.SparseCategoricalAccuracy(), labels, probs) - right.mean()) < 1e-12
    assert abs(batches(metrics.CategoricalAccuracy(), onehot, probs, w)
               - np.sum(right * w) / w.sum()) < 1e-12
    rank = (probs > probs[np.arange(n), labels][:, None]).sum(1)
    for k in (1, 2, 3):
        assert abs(batches(metrics.SparseTopKCategoricalAccuracy(k), labels, probs)
                   - np.mean(rank < k)) < 1e-12
        assert abs(batches(metrics.TopKCategoricalAccuracy(k), onehot, probs)
                   - np.mean(rank < k)) < 1e-12
    yt = rng.integers(0, 2, (n, 1)).astype(float)
    yp = rng.uniform(0, 1, (n, 1))
    assert abs(batches(metrics.BinaryAccuracy(threshold=0.3), yt, yp)
               - np.mean((yp > 0.3) == yt)) < 1e-12
    a, b = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    assert abs(batches(metrics.MeanSquaredError(), a, b) - np.mean((a - b) ** 2)) < 1e-12
    assert abs(batches(metrics.MeanAbsoluteError(), a, b, w)
               - np.sum(np.abs(a - b).mean(1) * w) / w.sum()) < 1e-12
    assert abs(batches(metrics.RootMeanSquaredError(), a, b)
               - np.sqrt(np.mean((a - b) ** 2))) < 1e-12
    assert abs(batches(metrics.Accuracy(), np.array([1, 2, 3, 4]), np.array([0, 2, 3, 4]))
               - 0.75) < 1e-12
    mean = metrics.Mean()
    mean.update_state([1, 2, 3])
    mean.update_state([10], sample_weight=[2])
    assert mean.result() == (6 + 20) / 5


def keras_auc(yt, yp, n, curve, method, w=None):
    """Keras's AUC.result over its thresholds, written from its formulas."""
    thr = np.array([-1e-7] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + 1e-7])
    w = np.ones(len(yt)) if w is None else w
    pos = yp[None, :] > thr[:, None]
    lab = yt.astype(bool)
    tp = (w * (pos & lab)).sum(1)
    fp = (w * (pos & ~lab)).sum(1)
    tn = (w * (~pos & ~lab)).sum(1)
    fn = (w * (~pos & lab)).sum(1)

    def div(a, b):
        return np.where(b == 0, 0.0, a / np.where(b == 0, 1, b))
    if curve == "PR" and method == "interpolation":
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = p[:-1] - p[1:]
        slope = div(dtp, np.maximum(dp, 0))
        icpt = tp[1:] - slope * p[1:]
        ratio = np.where((p[:-1] > 0) & (p[1:] > 0), div(p[:-1], np.maximum(p[1:], 0)), 1.0)
        return np.sum(div(slope * (dtp + icpt * np.log(ratio)), np.maximum(tp[1:] + fn[1:], 0)))
    rec = div(tp, tp + fn)
    x, y = (div(fp, fp + tn), rec) if curve == "ROC" else (rec, div(tp, tp + fp))
    h = {"interpolation": (y[:-1] + y[1:]) / 2, "minoring": np.minimum(y[:-1], y[1:]),
         "majoring": np.maximum(y[:-1], y[1:])}[method]
    return np.sum((x[:-1] - x[1:]) * h)


def test_confusion_metrics_and_auc():
    n = 300
    yt = rng.integers(0, 2, n).astype(float)
    yp = np.clip(yt * 0.3 + rng.uniform(0, 0.7, n), 0, 1)
    w = rng.uniform(0, 2, n)
    pos, lab = yp > 0.5, yt == 1
    tp, fp = np.sum(w * (pos & lab)), np.sum(w * (pos & ~lab))
    fn, tn = np.sum(w * (~pos & lab)), np.sum(w * (~pos & ~lab))
    for cls, want in ((metrics.TruePositives, tp), (metrics.FalsePositives, fp),
                      (metrics.TrueNegatives, tn), (metrics.FalseNegatives, fn),
                      (metrics.Precision, tp / (tp + fp)), (metrics.Recall, tp / (tp + fn))):
        assert abs(batches(cls(), yt, yp, w, size=31) - want) < 1e-9
    assert metrics.Precision().result() == 0.0  # nothing to divide by: 0
    # class_id: one column of [N, C]
    probs = rng.uniform(0, 1, (50, 3))
    onehot = np.eye(3)[rng.integers(0, 3, 50)]
    p2, l2 = probs[:, 2] > 0.5, onehot[:, 2] == 1
    assert abs(batches(metrics.Recall(class_id=2), onehot, probs)
               - np.sum(p2 & l2) / np.sum(l2)) < 1e-12
    for curve in ("ROC", "PR"):
        for method in ("interpolation", "minoring", "majoring"):
            auc = metrics.AUC(num_thresholds=50, curve=curve, summation_method=method)
            got = batches(auc, yt, yp, w, size=41)
            assert abs(got - keras_auc(yt, yp, 50, curve, method, w)) < 1e-9, (curve, method)
    # with many thresholds the ROC AUC is the rank statistic's
    exact = np.mean([(a > b) + 0.5 * (a == b) for a in yp[yt == 1] for b in yp[yt == 0]])
    assert abs(batches(metrics.AUC(num_thresholds=2000), yt, yp) - exact) < 2e-3
    logits = np.log(yp.clip(1e-6, 1 - 1e-6) / (1 - yp.clip(1e-6, 1 - 1e-6)))
    assert abs(batches(metrics.AUC(from_logits=True), yt, logits) -
               batches(metrics.AUC(), yt, yp.clip(1e-6, 1 - 1e-6))) < 1e-9
    assert metrics.AUC(thresholds=[0.2, 0.7]).thresholds == [-1e-7, 0.2, 0.7, 1 + 1e-7]


def test_fit_logs_and_errors(tmp_path):
    x = rng.uniform(-1, 1, (48, 3)).astype(f32)
    y = (x.sum(1) > 0).astype(f32)[:, None]
    model = vdev.models.Sequential([vdev.Input((3,)), layers.Dense(1, activation="sigmoid",
                                                                   seed=1)])
    auc = metrics.AUC()
    model.compile("adam", "binary_crossentropy", metrics=[auc, "Precision"],
                  weighted_metrics=[metrics.Recall(name="wrec")])
    w = rng.uniform(0, 2, 48).astype(f32)
    h = model.fit(x, y, sample_weight=w, epochs=2, batch_size=16, verbose=0).history
    prec = model._metric_slots[1][1]
    # names as Keras's: the class's, numbered per process (auc, auc_1, ...)
    assert auc.name.startswith("auc") and prec.name.startswith("precision")
    assert set(h) == {"loss", auc.name, prec.name, "wrec"}
    logs = model.evaluate(x, y, sample_weight=w, batch_size=48, verbose=0, return_dict=True)
    logs["auc"], logs["precision"] = logs[auc.name], logs[prec.name]
    p = model.predict(x, verbose=0)[:, 0].astype(np.float64)
    assert abs(logs["auc"] - keras_auc(y[:, 0], p, 200, "ROC", "interpolation")) < 1e-6
    pos, lab = p > 0.5, y[:, 0] == 1
    assert abs(logs["precision"] - np.sum(pos & lab) / max(1, np.sum(pos))) < 1e-9
    assert abs(logs["wrec"] - np.sum(w * (pos & lab)) / np.sum(w * lab)) < 1e-6
    # evaluate twice: the state starts afresh each time
    assert model.evaluate(x, y, verbose=0, return_dict=True)[auc.name] == \
        model.evaluate(x, y, verbose=0, return_dict=True)[auc.name]
    model.save(str(tmp_path / "m"))
    again = vdev.models.load_model(str(tmp_path / "m"))
    assert [type(m).__name__ for _, m, _ in again._metric_slots] == ["AUC", "Precision",
                                                                      "Recall"]
    cases = [
        (lambda: metrics.AUC(curve="DET"),
         'Invalid AUC curve value: "DET". Expected values are ["ROC", "PR"]'),
        (lambda: metrics.AUC(summation_method="trapezoid"),
         'Invalid AUC summation method value: "trapezoid". Expected values are '
         '["interpolation", "majoring", "minoring"]'),
        (lambda: metrics.AUC(num_thresholds=1),
         "Argument `num_thresholds` must be an integer > 1. Received: num_thresholds=1"),
        (lambda: metrics.Precision(thresholds=[0.3, 0.6]),
         "vdev's Precision takes one threshold, not [0.3, 0.6]"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
