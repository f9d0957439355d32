"""``model.save(filepath)`` and ``vdev.models.load_model(filepath)``, Keras's
whole-model saving in vdev's own format: one vdev checkpoint file
(safetensors, as ``save_weights`` writes) holding the weights by position,
the model's config (Keras's ``{"class_name", "config"}`` of
``get_config()``, as JSON in the file's metadata), its compile arguments
when they can be written (the optimizer's ``get_config``, a loss given as a
string or a vdev loss's ``get_config``, metrics given as strings or
vdev.metrics objects), and the
optimizer's state (its slots and step count, ``include_optimizer``).
``load_model`` makes the model from its config, compiles it as it was
(``compile=True``; a part that could not be written leaves the model
uncompiled, with a warning), restores the weights and the optimizer's
state, so training goes on where it stopped. Keras's SavedModel and HDF5
files are not read or written: a suffix (``.h5``, ``.keras``) changes
nothing. A Lambda's function or a custom layer is not JSON: saving such a
model is a ValueError naming it; ``custom_objects`` gives load_model the
classes of custom layers.
"""

import json
import logging
import os

from . import losses, metrics, optimizers, train

_MODEL = "model/config"
_COMPILE = "model/compile_config"
_log = logging.getLogger("vdev")


def _loss_config(loss):
    if loss is None or isinstance(loss, str):
        return loss
    if hasattr(loss, "get_config") and type(loss).__name__ in losses.__all__:
        return {"class_name": type(loss).__name__, "config": loss.get_config()}
    return _UNWRITTEN


_UNWRITTEN = object()


def _metric_config(m):
    """A compiled metric as JSON: its string, or a vdev.metrics object's
    class and config."""
    if isinstance(m, str):
        return m
    if isinstance(m, metrics.Metric) and type(m).__name__ in metrics.__all__:
        return {"class_name": type(m).__name__, "config": m.get_config()}
    return _UNWRITTEN


def _metric_from(c):
    return c if isinstance(c, str) else getattr(metrics, c["class_name"]).from_config(
        c["config"])


def _compile_config(model):
    """The compile arguments as JSON-able values, or None (a part that
    cannot be written: a callable loss or metric)."""
    if not getattr(model, "_is_compiled", False):
        return None
    loss = _loss_config(model.loss)
    metrics = [_metric_config(m) for _, m, w in model._metric_slots if not w]
    weighted = [_metric_config(m) for _, m, w in model._metric_slots if w]
    if loss is _UNWRITTEN or any(m is _UNWRITTEN for m in metrics + weighted):
        return None
    opt = model.optimizer
    return {"optimizer": {"class_name": type(opt).__name__, "config": opt.get_config()},
            "loss": loss, "metrics": metrics, "weighted_metrics": weighted}


def save(model, filepath, overwrite=True, include_optimizer=True):
    """Writes the model (see the module) to filepath."""
    from ._fit import _NAMES_KEY, _WEIGHT, _writable
    weights, path = _writable(model, filepath, overwrite)
    if getattr(model, "_subclassed", False):
        raise ValueError("vdev's model.save writes a functional or Sequential model: a "
                         "subclassed model is defined by its call, which is not written; use "
                         "save_weights")
    kind = "Sequential" if type(model).__name__ == "Sequential" else "Functional"
    try:
        config = json.dumps({"class_name": kind, "config": model.get_config()})
    except TypeError as e:
        raise ValueError("vdev's model.save writes the model's config as JSON, and a part of "
                         "it is not (%s): a Lambda's function or a custom layer's object; "
                         "save_weights writes the weights alone" % (e,)) from None
    meta = {_NAMES_KEY: json.dumps([getattr(w, "name", None) or "" for w in weights]),
            _MODEL: config}
    compiled = _compile_config(model)
    if compiled is not None:
        meta[_COMPILE] = json.dumps(compiled)
    elif getattr(model, "_is_compiled", False):
        _log.warning("model.save: the compile arguments are not written (a callable loss or "
                     "metric); load_model gives the model uncompiled")
    opt = model.optimizer if include_optimizer and compiled is not None else None
    train.save_checkpoint(path, {_WEIGHT % i: w for i, w in enumerate(weights)}, metadata=meta,
                          optimizer=opt)


def load_model(filepath, custom_objects=None, compile=True, options=None):
    """Keras's load_model of a file model.save wrote (see the module)."""
    from ._fit import _WEIGHT
    from .models import _layer_from_config
    if options is not None:
        raise ValueError("vdev's load_model takes options=None only")
    path = os.fspath(filepath)
    meta = train.checkpoint_metadata(path)
    if _MODEL not in meta:
        raise ValueError("%s holds no model config: it is not a file vdev's model.save wrote "
                         "(load_weights reads a weights file into a model made by code)"
                         % (path,))
    model = _layer_from_config(json.loads(meta[_MODEL]), custom_objects)
    weights = model.weights
    if not weights:
        raise ValueError("the model of %s is not built by its config (its input shape is not "
                         "in it): make it by code and use load_weights" % (path,))
    compiled = json.loads(meta[_COMPILE]) if _COMPILE in meta else None
    opt = None
    if compile and compiled is not None:
        o = compiled["optimizer"]
        opt = getattr(optimizers, o["class_name"]).from_config(o["config"])
        loss = compiled["loss"]
        if isinstance(loss, dict):
            loss = getattr(losses, loss["class_name"]).from_config(loss["config"])
        model.compile(opt, loss,
                      metrics=[_metric_from(c) for c in compiled["metrics"]] or None,
                      weighted_metrics=[_metric_from(c) for c in compiled["weighted_metrics"]]
                      or None)
    tensors = {_WEIGHT % i: w for i, w in enumerate(weights)}
    has_state = any(e.name == "optimizer/iterations" for e in train.checkpoint_entries(path))
    train.load_checkpoint(path, tensors, optimizer=opt if has_state else None)
    return model
