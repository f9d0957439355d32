"""Keras's training methods for vdev's models (``Sequential``, ``MLP``, and
the functional ``Model``, whose x is a list of arrays for several inputs):
``compile``, ``fit``, ``evaluate``, ``predict``, ``save_weights`` and
``load_weights``, with Keras 2.11's arguments, defaults, return values and
errors where vdev can honour them (README, "Python", says what differs).

fit is the loop one would write with ``GradientTape``: for each batch,
``loss = loss_fn(y, model(x))`` under a tape, then
``optimizer.apply_gradients(zip(tape.gradient(loss, vars), vars))``, with
the same ops, so it gives the same bits as that loop over the same batches.
As Keras's, fit calls the model with ``training=True`` (Dropout drops) and
evaluate and predict with ``training=False``.
Batches are rows of the numpy arrays (vdev tensors are read to the host
once), in order or, with ``shuffle=True``, in the order of a permutation per
epoch: ``numpy.random.default_rng([seed, e]).permutation(n)`` for the e-th
pass over the data, seed drawn once per fit from vdev.random's counter (so
``vdev.random.set_seed(s)`` makes fit's order reproducible, as Keras's
follows ``tf.random.set_seed``). The last batch of a pass is the rows left
(smaller), as Keras's. Metrics are computed on the host from each batch's
outputs; the logged loss and metrics are their means over the epoch's
examples (each batch's loss weighs its rows), summed in float64.

Under a MirroredStrategy (the model's variables made in its scope), each
batch is split across the replicas and each replica's step runs in
strategy.run: its loss is the sum over its rows divided by the global
batch's rows, its gradients summed over the replicas by apply_gradients,
as the distribute module's custom loop does."""

import copy
import json
import numbers
import os

import numpy as np

from . import _ops, _strategy_context, callbacks as callbacks_module, losses, optimizers
from . import _fit_data, metrics as metrics_module
from ._fit_metrics import (_METRICS, _metric_list, _metric_name, _metric_values,  # noqa: F401
                           _object_weights, _same_rank)
from . import random as _random
from ._core_layers import training_scope
from ._keras_masks import mask_of
from ._loss_weights import (class_weights, mask_numpy, metric_weights, sample_weights,
                            weighted_loss)
from ._tape import GradientTape
from ._tensor import Tensor

_LOSSES = {"mse": "mse", "mean_squared_error": "mse", "MSE": "mse",
           "binary_crossentropy": "bce", "categorical_crossentropy": "cce",
           "sparse_categorical_crossentropy": "scce"}
# a string cross-entropy: the last layer's activation it takes the logits of
# (else it takes the model's output as probabilities), and its loss class
_PROBS = {"bce": (_ops.sigmoid, "BinaryCrossentropy"),
          "cce": (_ops.softmax, "CategoricalCrossentropy"),
          "scce": (_ops.softmax, "SparseCategoricalCrossentropy")}
_WEIGHT = "model/weights/%d"
_NAMES_KEY = "model/weight_names"


def _as_array(a, what):
    if isinstance(a, Tensor):
        return a.numpy()
    if a is None:
        return None
    return np.asarray(a)


def _loss_classes():
    """vdev.losses' classes (each takes reduction='sum' and 'none')."""
    return tuple(getattr(losses, n) for n in losses.__all__ if n != "Reduction")


def _writable(model, filepath, overwrite):
    """(the model's weights, the path) for save_weights and model.save:
    refused before writing when it has none, or the file exists and
    overwrite is False."""
    weights = model.weights
    if not weights:
        raise ValueError("the model has no weights yet: build it first (give its first "
                         "layer input_shape or input_dim, or call it once)")
    path = os.fspath(filepath)
    if not overwrite and os.path.exists(path):
        raise FileExistsError("%s exists and overwrite=False" % (path,))
    return weights, path


class _Inputs:
    """The arrays of a model of several inputs (a functional model's), taken
    together: ``shape[0]`` their rows, ``[idx]`` the same rows of each; the
    model takes it as the list of its inputs."""

    def __init__(self, arrays):
        self.arrays = list(arrays)

    @property
    def shape(self):
        return self.arrays[0].shape[:1]

    def __getitem__(self, idx):
        return _Inputs([a[idx] for a in self.arrays])


def _keras_optimizer(optimizer, strategy):
    if isinstance(optimizer, optimizers.Optimizer):
        return optimizer
    if isinstance(optimizer, str):
        make = {"sgd": optimizers.SGD, "adam": optimizers.Adam}.get(optimizer.lower())
        if make is None:
            raise ValueError("Unknown optimizer: %r. vdev's optimizers are 'sgd' and 'adam' "
                             "(or a vdev.optimizers.SGD or Adam object)%s"
                             % (optimizer, "; compile's default, 'rmsprop', is not one of "
                                "them" if optimizer == "rmsprop" else ""))
        if strategy is not None:
            with strategy.scope():
                return make()
        return make()
    raise ValueError("Could not interpret optimizer identifier: %r (vdev takes 'sgd', 'adam' "
                     "or a vdev.optimizers object)" % (optimizer,))


class Model:
    """The training methods of Keras's Model, mixed into Sequential."""

    # ---- compile ----
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None,
                weighted_metrics=None, run_eagerly=None, steps_per_execution=None,
                jit_compile=None, **kwargs):
        """Keras's compile. optimizer: 'sgd', 'adam' or a vdev optimizer;
        loss: 'mse' ('mean_squared_error'), 'binary_crossentropy',
        'categorical_crossentropy', 'sparse_categorical_crossentropy' (on
        probabilities, as Keras's strings: where the model ends in a layer
        with activation='sigmoid' for the first, 'softmax' for the others
        (a Dense's, an Activation layer, or a Softmax layer over the last
        axis), vdev uses its logits, as Keras does; any other output is
        taken as probabilities, the loss's from_logits=False form) or a vdev
        loss or any callable loss(y_true, y_pred); metrics: a list of
        'accuracy'/'acc',
        'binary_accuracy', 'categorical_accuracy',
        'sparse_categorical_accuracy', 'mse', 'mae' (and their long names)
        or callables fn(y_true, y_pred) on numpy arrays giving one value per
        example. run_eagerly and jit_compile are taken and change nothing
        (vdev runs each op as it comes); steps_per_execution only None or
        1; loss_weights only None. weighted_metrics: metrics weighed by
        fit's and evaluate's sample weights (and class weights)."""
        if kwargs:
            raise TypeError("Invalid keyword argument(s) in `compile()`: %s. vdev's compile "
                            "takes optimizer, loss, metrics, loss_weights, weighted_metrics, "
                            "run_eagerly, steps_per_execution and jit_compile"
                            % ((set(kwargs),),))
        if loss_weights is not None:
            raise ValueError("vdev's compile takes loss_weights=None only (a model of one "
                             "output and one loss), not %r" % (loss_weights,))
        if steps_per_execution not in (None, 1):
            raise ValueError("vdev's compile takes steps_per_execution=None or 1 only, not %r: "
                             "vdev runs one batch per step and calls the batch callbacks after "
                             "each" % (steps_per_execution,))
        strategy = self._strategy_of_weights()
        optimizer = _keras_optimizer(optimizer, strategy)
        if getattr(optimizer, "_strategy", None) is not strategy:
            raise ValueError(
                "the optimizer and the model were made under different strategies' scopes "
                "(model: %r, optimizer: %r): make both (and call compile) under the same "
                "strategy.scope(), or both outside" % (strategy, optimizer._strategy))
        kind, from_probs = self._loss_kind(loss)
        metrics = _metric_list(metrics)
        weighted = _metric_list(weighted_metrics)
        self.optimizer = optimizer
        self.loss = loss
        self.compiled_metrics = metrics
        # Keras's MetricsContainer: the metrics weighed by the output's mask,
        # the weighted ones by the sample weights too, named "weighted_..."
        # where a metric of the same name is not weighted
        plain = [_metric_name(m) for m in metrics]
        self._metric_slots = [(n, m, False) for n, m in zip(plain, metrics)] + [
            ("weighted_" + _metric_name(m) if _metric_name(m) in plain else _metric_name(m), m,
             True) for m in weighted]
        self._loss_fn, self._from_probs = kind, from_probs
        self._run_eagerly = run_eagerly
        self._jit_compile = jit_compile
        self._is_compiled = True
        self.stop_training = False

    def _strategy_of_weights(self):
        """The strategy whose scope made the model's layers, else None."""
        for l in getattr(self, "layers", []):
            s = getattr(l, "_strategy", None)
            if s is not None:
                return s
        return None

    def _loss_kind(self, loss):
        """(the loss object or callable fit calls, whether it takes the last
        layer's logits instead of its softmax)."""
        if isinstance(loss, str):
            from ._more_losses import NAMES
            if loss in NAMES:
                return NAMES[loss](), False
            kind = _LOSSES.get(loss)
            if kind is None:
                raise ValueError("Unknown loss function: %r. vdev's losses are %s, or a "
                                 "vdev.losses object" % (loss, ", ".join(
                                     repr(k) for k in list(_LOSSES) + list(NAMES))))
            if kind == "mse":
                return losses.MeanSquaredError(), False
            last = self._output_layer()
            fn, cls = _PROBS[kind]
            if getattr(last, "activation", None) is fn:
                # Keras takes the logits under the softmax (or sigmoid): more
                # exact than the log of clipped probabilities
                return getattr(losses, cls)(from_logits=True), True
            # any other output (a Softmax layer over another axis, whose
            # activation is None, among them) is taken as probabilities, as
            # Keras does
            return getattr(losses, cls)(from_logits=False), False
        if loss is None or callable(loss):
            return loss, False
        raise ValueError("Could not interpret loss identifier: %r" % (loss,))

    def _output_layer(self):
        """The layer whose output the model gives (a Sequential's last)."""
        return self.layers[-1] if getattr(self, "layers", None) else None

    def reset_states(self):
        """Keras's Model.reset_states: every stateful layer's states to
        zeros (vdev/_rnn_states.py)."""
        for layer in self.layers:
            if hasattr(layer, "reset_states") and getattr(layer, "stateful", False):
                layer.reset_states()

    def _assert_compiled(self):
        if not getattr(self, "_is_compiled", False):
            raise RuntimeError("You must compile your model before training/testing. Use "
                               "`model.compile(optimizer, loss)`.")

    # ---- one batch ----
    def _forward(self, x):
        """(what the loss takes, the model's output): the last layer's
        logits and its softmax (or sigmoid) for a string cross-entropy, else
        the output twice."""
        if not self._from_probs:
            out = self(x)
            return out, out
        # the layers are called one by one: first the model's own input
        # check, as its call makes it (a Sequential given its input shape)
        h = self._check_input(x) if hasattr(self, "_check_input") else x
        for l in self.layers[:-1]:
            h = l(h)
        last = self.layers[-1]
        if not getattr(last, "built", True):
            last(h)  # builds it (the kernel then exists for the copy below)
        logits_layer = copy.copy(last)  # the same variables, no activation
        logits_layer.activation = None
        logits = logits_layer(h)
        return logits, last.activation(logits)

    def _loss_value(self, fn, y, pred, reduction=None, weights=None):
        """fn(y, pred), a scalar. Inside a strategy's scope (fit or evaluate
        called there), where vdev's losses refuse their mean as Keras's do
        outside its built-in loops, a mean is the sum over the rows divided
        by them. With sample weights or an output's mask:
        vdev/_loss_weights.py."""
        if weights is not None or mask_of(pred) is not None:
            return weighted_loss(fn, y, pred, weights, reduction)
        mean_in_scope = (reduction is None
                         and getattr(fn, "reduction", None) in ("auto", "sum_over_batch_size")
                         and (_strategy_context.scope_strategy() is not None
                              or _strategy_context.replica() is not None))
        if mean_in_scope:
            reduction = "sum"
        if reduction is not None:
            fn = copy.copy(fn)
            fn.reduction = reduction
        v = fn(y, pred)
        if mean_in_scope:
            rows = int(pred.shape[0]) if pred.ndim else 1
            v = _ops.divide(v, float(rows)) if rows else v
        if not isinstance(v, Tensor):
            v = _ops.convert_to_tensor(v)
        if v.ndim:  # a function giving one loss per example: Keras's mean
            v = _ops.reduce_mean(v)
        return v

    def _train_batch(self, xb, yb, wb=None):
        """One step; (the batch's loss, the model's outputs as numpy, their
        mask as numpy or None). wb: the rows' weights, or None."""
        variables = self.trainable_variables
        # the layers run in training mode (Keras's call context: a
        # BatchNormalization normalizes by the batch and updates its moving
        # statistics), evaluate's and predict's in inference mode
        with GradientTape() as tape, training_scope(True):
            pred, out = self._forward(xb)
            loss = self._loss_value(self._loss_fn, yb, pred, weights=wb)
        if variables:  # a frozen model: Keras 2.11's optimizer applies nothing
            grads = tape.gradient(loss, variables)
            self.optimizer.apply_gradients(zip(grads, variables))
        return float(loss), out.numpy(), mask_numpy(pred)

    def _train_batch_mirrored(self, strategy, xb, yb, wb=None):
        """One step split over strategy's replicas (see the module's text)."""
        n = xb.shape[0]
        variables = self.trainable_variables
        outs = {}
        if not isinstance(self._loss_fn, _loss_classes()):
            raise ValueError("fit under a MirroredStrategy takes a vdev.losses object or "
                             "string, not %r: vdev sums each replica's loss over its rows "
                             "(reduction='sum') and divides by the global batch"
                             % (self._loss_fn,))

        def step(x, y, w=None):
            ctx = _strategy_context.replica()
            with GradientTape() as tape, training_scope(True):
                pred, out = self._forward(x)
                if w is not None:
                    w = w.numpy()
                loss = _ops.divide(self._loss_value(self._loss_fn, y, pred, "sum", w), float(n))
            if variables:  # as _train_batch
                grads = tape.gradient(loss, variables)
                self.optimizer.apply_gradients(zip(grads, variables))
            outs[ctx.replica_id_in_sync_group] = out.numpy()
            return loss

        xd = ([strategy._batch(a) for a in xb.arrays] if isinstance(xb, _Inputs)
              else strategy._batch(xb))
        args = (xd, strategy._batch(yb)) + (() if wb is None else (strategy._batch(wb),))
        per_replica = strategy.run(step, args=args)
        loss = strategy.reduce("SUM", per_replica, axis=None)
        return float(loss), np.concatenate([outs[r] for r in sorted(outs)]), None

    def _test_batch(self, xb, yb, wb=None):
        with training_scope(False):
            pred, out = self._forward(xb)
        return (float(self._loss_value(self._loss_fn, yb, pred, weights=wb)), out.numpy(),
                mask_numpy(pred))

    # ---- the epoch's running means ----
    def _new_totals(self):
        for _, m, _ in self._metric_slots:  # Keras's reset of its metrics' state
            if isinstance(m, metrics_module.Metric):
                m.reset_state()
        return {"loss": [0.0, 0]} | {name: (m if isinstance(m, metrics_module.Metric)
                                            else [0.0, 0]) for name, m, _ in self._metric_slots}

    def _add(self, totals, loss, n, yb, out, mask=None, wb=None):
        """The batch into the epoch's running means: the loss weighted by
        the rows, each metric's values by the output's mask (one each
        without), a weighted metric's by the rows' weights too
        (vdev/_loss_weights.py)."""
        totals["loss"][0] += loss * n
        totals["loss"][1] += n
        for name, m, weighted in self._metric_slots:
            if isinstance(m, metrics_module.Metric):  # its own state, weighed as Keras's
                m.update_state(yb, out, sample_weight=_object_weights(
                    wb if weighted else None, mask))
                continue
            if isinstance(m, str):
                v = _metric_values(m, np.asarray(yb), out)
            else:
                v = np.asarray(m(np.asarray(yb), out), np.float64)
            t = totals[name]
            w = metric_weights(v, wb if weighted else None, mask)
            if w is not None:
                t[0] += float(np.sum(v * w))
                t[1] += float(np.sum(w))
            else:
                t[0] += float(np.sum(v))
                t[1] += int(v.size)

    @staticmethod
    def _logs(totals, prefix=""):
        return {prefix + k: (float(v.result()) if isinstance(v, metrics_module.Metric) else
                             (v[0] / v[1] if v[1] else 0.0)) for k, v in totals.items()}

    # ---- data ----
    def _one_input(self, x):
        """x as the one array a model of one input takes. As Keras, a list
        or tuple of one array is that array (Keras's inputs of a model of
        one input), unless the model's input rank says it is one row; a
        dict or a list of several arrays of the input's rank (the inputs of
        a model of several) is refused, where numpy would stack them."""
        if isinstance(x, dict):
            raise ValueError("vdev's models take one input, an array or a vdev tensor, not a "
                             "dict of inputs (keys %s)" % (sorted(map(str, x)),))
        if not isinstance(x, (list, tuple)) or not x or not all(
                isinstance(a, (np.ndarray, Tensor)) for a in x):
            return x
        shape = self._input_shape() if hasattr(self, "_input_shape") else None
        rank = len(shape) if shape is not None else None
        ranks = {a.ndim for a in x}
        if len(x) == 1 and x[0].ndim >= 1 and (rank is None and x[0].ndim >= 2
                                               or ranks == {rank}):
            return x[0]
        if len(x) > 1 and rank is not None and ranks == {rank}:
            raise ValueError("vdev's models take one input: x is a %s of %d arrays of the "
                             "input's rank, %d (the inputs of a model of several inputs); "
                             "give one array" % (type(x).__name__, len(x), rank))
        return x

    def _data(self, x, y, what="fit"):
        # a functional model takes a list of one array per input (or a
        # dict by the Inputs' names), its count checked in Keras's words
        input_list = getattr(self, "_input_list", None)
        xs = ([_as_array(a, "x") for a in input_list(x)] if input_list is not None
              else [_as_array(self._one_input(x), "x")])
        if (isinstance(y, (list, tuple)) and len(y) == 1
                and isinstance(y[0], (np.ndarray, Tensor)) and y[0].ndim >= 1
                and getattr(xs[0], "shape", ())[:1] == tuple(y[0].shape)[:1] != (1,)):
            y = y[0]  # Keras's targets of a model of one output
        y = _as_array(y, "y")
        if any(a is None or a.ndim == 0 or a.shape[0] == 0 for a in xs):
            raise ValueError("Expect x to be a non-empty array or dataset.")
        rows = xs[0].shape[0]
        if any(a.shape[0] != rows for a in xs) or (y is not None and (
                y.ndim == 0 or y.shape[0] != rows)):
            raise ValueError("Data cardinality is ambiguous:\n  x sizes: %s\n%s"
                             "Make sure all arrays contain the same number of samples."
                             % (", ".join(str(a.shape[0]) for a in xs), "" if y is None else
                                "  y sizes: %s\n" % (y.shape[0] if y.ndim else "()",)))
        xs = [a.astype(np.float32) if a.dtype.kind in "fb" and a.dtype != np.float32 else a
              for a in xs]
        if y is not None and y.dtype.kind == "b":
            # Keras casts bool targets to the predictions' dtype (or to int
            # labels); vdev's tensors take no bools, its losses take floats
            y = y.astype(np.float32)
        return (xs[0] if len(xs) == 1 else _Inputs(xs)), y

    @staticmethod
    def _weights(sample_weight, x, y):
        """sample_weight as float32 rows of x's (Keras's cardinality error)."""
        sizes = "  x sizes: %d\n%s" % (x.shape[0], "" if y is None else
                                        "  y sizes: %d\n" % y.shape[0])
        return sample_weights(sample_weight, x.shape[0], sizes)

    @staticmethod
    def _batch_size(batch_size, n, steps):
        if batch_size is None:
            return int(np.ceil(n / steps)) if steps else 32
        if (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
                or batch_size <= 0):
            raise ValueError("batch_size must be a positive integer, not %r" % (batch_size,))
        return int(batch_size)

    @staticmethod
    def _verbose(verbose):
        if verbose == "auto":
            return 1
        if verbose not in (0, 1, 2):
            raise ValueError("verbose must be 'auto', 0, 1 or 2, not %r" % (verbose,))
        return int(verbose)

    # ---- fit ----
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1, max_queue_size=10, workers=1,
            use_multiprocessing=False):
        """Keras's fit on numpy arrays, vdev tensors (see the module's
        text), a Sequence or a generator (vdev/_fit_data.py); returns a
        History. sample_weight and class_weight weigh the losses and
        metrics as Keras's (vdev/_loss_weights.py; validation data may
        carry its own sample weights). validation_steps only with a
        stream as validation_data; max_queue_size, workers and
        use_multiprocessing change nothing (a stream is read here)."""
        self._assert_compiled()
        src = _fit_data.Stream(x) if _fit_data.is_stream(x) else None
        val_src = (_fit_data.Stream(validation_data) if _fit_data.is_stream(validation_data)
                   else None)
        if validation_steps is not None and val_src is None:
            raise ValueError("vdev's fit takes validation_steps with a generator or Sequence "
                             "as validation_data only, not %r" % (validation_steps,))
        if not isinstance(shuffle, bool):
            raise ValueError("vdev's fit takes shuffle=True or False, not %r" % (shuffle,))
        if y is None and self.loss is not None and src is None:
            raise ValueError("Target data is missing. Your model was compiled with loss=%s, "
                             "and therefore expects target data to be provided in `fit()`."
                             % (self.loss,))
        if self._loss_fn is None:
            raise ValueError("No loss found. You may have forgotten to provide a `loss` "
                             "argument in the `compile()` method.")
        verbose = self._verbose(verbose)
        self._validation_epoch(0, validation_freq)  # refused before any training
        if src is not None:
            _fit_data.refuse_with_stream(y, sample_weight, validation_split)
            first_x, first_y, _ = src.first()  # for building the model
            x, y = self._data(first_x, first_y)
            sw = None
        else:
            x, y = self._data(x, y)
            sw = self._weights(sample_weight, x, y)
        if validation_split and validation_data is None:
            n = x.shape[0]
            split_at = int(np.floor(n * (1.0 - validation_split)))
            if split_at == 0 or split_at == n:
                raise ValueError(
                    "Training data contains %d samples, which is not sufficient to split it "
                    "into a validation and training set as specified by "
                    "`validation_split=%s`. Either provide more data, or a different value "
                    "for the `validation_split` argument." % (n, validation_split))
            validation_data = (x[split_at:], y[split_at:],
                               None if sw is None else sw[split_at:])
            x, y = x[:split_at], y[:split_at]
            sw = None if sw is None else sw[:split_at]
        if val_src is not None:
            val_steps = _fit_data.steps_of(val_src, validation_steps, "validation_steps")
        elif validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or not 1 <= len(
                    validation_data) <= 3:
                raise ValueError("Data is expected to be in format `x`, `(x,)`, `(x, y)`, or "
                                 "`(x, y, sample_weight)`, found: %r" % (validation_data,))
            vd = tuple(validation_data) + (None,) * (3 - len(validation_data))
            val_x, val_y = self._data(vd[0], vd[1])
            val_w = self._weights(vd[2], val_x, val_y)
            if val_y is None:
                # refused before training (Keras skips the loss of a missing
                # target and logs a val_loss of 0)
                raise ValueError("Target data is missing. Your model was compiled with "
                                 "loss=%s, and therefore expects target data to be provided "
                                 "in `validation_data` (give it as (x_val, y_val))."
                                 % (self.loss,))
        if class_weight is not None and src is None:  # Keras's: the training data's only
            sw = class_weights(class_weight, y, sw)
        n = x.shape[0]
        if src is None:
            batch_size = self._batch_size(batch_size, n, steps_per_epoch)
            per_pass = -(-n // batch_size)
            steps = steps_per_epoch or per_pass
        else:
            steps = _fit_data.steps_of(src, steps_per_epoch, "steps_per_epoch")
        strategy = self._strategy_of_weights()
        seed = _random._seed(None) if shuffle else None
        if not getattr(self, "built", True):
            # Keras builds a model given no input shape on its first batch,
            # inside the tape; vdev's step reads the trainable variables
            # before the tape, so fit builds the model first, on one row
            # (under a strategy, in its scope, where its variables go)
            if strategy is not None:
                with strategy.scope():
                    self(x[:1])
            else:
                self(x[:1])

        def batches(first, passes):  # passes over the data, each in its own order
            if src is not None:  # a Sequence's or generator's (vdev/_fit_data.py)
                yield from _fit_data.batches(self, src, class_weight, shuffle, seed, first,
                                             passes)
                return
            for e in range(first, first + passes):
                order = (np.random.default_rng([seed, e]).permutation(n) if shuffle
                         else np.arange(n))
                for b in range(per_pass):
                    idx = order[b * batch_size:(b + 1) * batch_size]
                    yield x[idx], y[idx], (None if sw is None else sw[idx])

        cbs = callbacks_module._CallbackList(
            callbacks, self, verbose, {"verbose": verbose, "epochs": epochs, "steps": steps},
            history=True)
        self.stop_training = False
        cbs.call("on_train_begin", None)
        logs = None
        # Keras 2.11's rule for arrays (its TensorLikeDataAdapter and
        # DataHandler): with steps_per_epoch, one stream of epochs -
        # initial_epoch passes serves the whole fit, never restarted, so an
        # epoch goes on where the last one stopped; without, each epoch is one
        # pass. Each step calls on_train_batch_begin before it takes its batch
        # (Keras's train_function takes it), so a step that finds none has
        # begun without ending. Data that runs out warns once, counting
        # (epochs - initial_epoch) * steps batches, still ends that epoch
        # (validation, on_epoch_end) with the last logs computed, the
        # previous epoch's when it ran no batch, and ends the fit
        # (a Sequence is read anew each epoch, a generator is one stream: Keras's adapters)
        one_stream = (steps_per_epoch is not None) if src is None else not src.sequence
        stream = batches(0, epochs - initial_epoch) if one_stream else None
        train_logs = None  # Keras's `logs`: kept across epochs
        for epoch in range(initial_epoch, epochs):
            cbs.call("on_epoch_begin", epoch, None)
            totals = self._new_totals()
            it = stream if stream is not None else batches(epoch - initial_epoch, 1)
            ran = 0
            ran_out = False
            for step in range(steps):
                cbs.call("on_train_batch_begin", step, None)
                try:
                    xb, yb, wb = next(it)
                except StopIteration:
                    ran_out = True
                    break
                if strategy is None:
                    loss, out, mask = self._train_batch(xb, yb, wb)
                else:
                    loss, out, mask = self._train_batch_mirrored(strategy, xb, yb, wb)
                self._add(totals, loss, xb.shape[0], yb, out, mask, wb)
                ran += 1
                cbs.call("on_train_batch_end", step, self._logs(totals))
                if self.stop_training:
                    break
            if ran_out:
                callbacks_module._log.warning(
                    "Your input ran out of data; interrupting training. Make sure that your "
                    "dataset or generator can generate at least `steps_per_epoch * epochs` "
                    "batches (in this case, %d batches). You may need to use the repeat() "
                    "function when building your dataset.", (epochs - initial_epoch) * steps)
            if ran or train_logs is None:
                train_logs = self._logs(totals)
            logs = dict(train_logs)
            if validation_data is not None and self._validation_epoch(epoch, validation_freq):
                if val_src is not None:
                    val = _fit_data.evaluate(self, val_src, val_steps, cbs)
                else:
                    val = self._evaluate(val_x, val_y, validation_batch_size or batch_size,
                                         cbs, val_w)
                logs.update({"val_" + k: v for k, v in val.items()})
            cbs.call("on_epoch_end", epoch, logs)
            if self.stop_training:
                break
            if src is not None:  # Keras's DataHandler: after the callbacks' on_epoch_end,
                src.epoch_end()  # never after a stop_training, the Sequence's on_epoch_end
            if ran_out:
                break
        cbs.call("on_train_end", logs)
        return cbs.history

    @staticmethod
    def _validation_epoch(epoch, freq):
        if isinstance(freq, numbers.Integral) and not isinstance(freq, bool):
            if freq < 1:
                raise ValueError("`validation_freq` can not be less than 1.")
            return (epoch + 1) % freq == 0
        try:
            return epoch + 1 in freq
        except TypeError:
            raise ValueError("`validation_freq` should be an int or a list of ints, not %r"
                             % (freq,)) from None

    # ---- evaluate, predict ----
    def _evaluate(self, x, y, batch_size, cbs, sw=None):
        totals = self._new_totals()
        n = x.shape[0]
        cbs.call("on_test_begin", None)
        for step, b in enumerate(range(0, n, batch_size)):
            xb, yb = x[b:b + batch_size], y[b:b + batch_size]
            wb = None if sw is None else sw[b:b + batch_size]
            cbs.call("on_test_batch_begin", step, None)
            loss, out, mask = self._test_batch(xb, yb, wb)
            self._add(totals, loss, xb.shape[0], yb, out, mask, wb)
            cbs.call("on_test_batch_end", step, self._logs(totals))
        logs = self._logs(totals)
        cbs.call("on_test_end", logs)
        return logs

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, max_queue_size=10, workers=1,
                 use_multiprocessing=False, return_dict=False, **kwargs):
        """Keras's evaluate: the loss and metrics over (x, y) in batches (32
        by default), each the mean over the examples; the loss alone when
        there are no metrics, else [loss, metrics...] in compile's order, or
        a dict with return_dict; sample_weight weighs them as fit's. x may
        be a Sequence or generator (vdev/_fit_data.py; steps: its batches
        to take), else steps only None."""
        self._assert_compiled()
        if kwargs:
            raise TypeError("Invalid keyword arguments: %s" % (kwargs,))
        src = _fit_data.Stream(x) if _fit_data.is_stream(x) else None
        if steps is not None and src is None:
            raise ValueError("vdev's evaluate takes steps with a generator or Sequence only, "
                             "not %r" % (steps,))
        if self._loss_fn is None:
            raise ValueError("No loss found. You may have forgotten to provide a `loss` "
                             "argument in the `compile()` method.")
        verbose = self._verbose(verbose)
        if src is not None:
            _fit_data.refuse_with_stream(y, sample_weight, 0)
            steps = _fit_data.steps_of(src, steps, "steps")
            cbs = callbacks_module._CallbackList(
                callbacks, self, verbose, {"verbose": verbose, "epochs": 1, "steps": steps},
                history=False)
            return self._results(_fit_data.evaluate(self, src, steps, cbs), return_dict)
        x, y = self._data(x, y)
        if y is None:
            raise ValueError("Target data is missing. Your model was compiled with loss=%s, "
                             "and therefore expects target data to be provided in "
                             "`evaluate()`." % (self.loss,))
        sw = self._weights(sample_weight, x, y)
        batch_size = self._batch_size(batch_size, x.shape[0], None)
        steps = -(-x.shape[0] // batch_size)
        cbs = callbacks_module._CallbackList(callbacks, self, verbose,
                                             {"verbose": verbose, "epochs": 1, "steps": steps},
                                             history=False)
        return self._results(self._evaluate(x, y, batch_size, cbs, sw), return_dict)

    @staticmethod
    def _results(logs, return_dict):
        """evaluate's value: the dict, the loss alone, or [loss, metrics...]."""
        if return_dict:
            return logs
        values = list(logs.values())
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None,
                max_queue_size=10, workers=1, use_multiprocessing=False):
        """Keras's predict: the model's outputs for x in batches (32 by
        default), one numpy array (float32). x may be a Sequence or generator
        (steps: its batches to take), else steps only None."""
        src = _fit_data.Stream(x) if _fit_data.is_stream(x) else None
        if steps is not None and src is None:
            raise ValueError("vdev's predict takes steps with a generator or Sequence only, "
                             "not %r" % (steps,))
        verbose = self._verbose(verbose)
        if src is not None:
            steps = _fit_data.steps_of(src, steps, "steps")
            cbs = callbacks_module._CallbackList(
                callbacks, self, verbose, {"verbose": verbose, "epochs": 1, "steps": steps},
                history=False)
            return _fit_data.predict(self, src, steps, cbs)
        x, _ = self._data(x, None)
        batch_size = self._batch_size(batch_size, x.shape[0], None)
        steps = -(-x.shape[0] // batch_size)
        cbs = callbacks_module._CallbackList(callbacks, self, verbose,
                                             {"verbose": verbose, "epochs": 1, "steps": steps},
                                             history=False)
        cbs.call("on_predict_begin", None)
        outs = []
        for step, b in enumerate(range(0, x.shape[0], batch_size)):
            cbs.call("on_predict_batch_begin", step, None)
            out = self(x[b:b + batch_size], training=False).numpy()
            outs.append(out)
            cbs.call("on_predict_batch_end", step, {"outputs": out})
        cbs.call("on_predict_end", None)
        return np.concatenate(outs)

    # ---- weights ----
    def save(self, filepath, overwrite=True, include_optimizer=True, save_format=None,
             signatures=None, options=None, save_traces=True):
        """The whole model in one vdev checkpoint file (vdev/_model_io.py):
        vdev.models.load_model reads it back, compiled, its optimizer's
        state too. save_format, signatures and options: only None."""
        from . import _model_io
        for arg, v in (("save_format", save_format), ("signatures", signatures),
                       ("options", options)):
            if v is not None:
                raise ValueError("vdev's model.save takes %s=None only: it writes vdev's own "
                                 "file" % (arg,))
        _model_io.save(self, filepath, overwrite, include_optimizer)

    def save_weights(self, filepath, overwrite=True, save_format=None, options=None):
        """Writes every weight's value to filepath, a vdev checkpoint
        (safetensors) whose entry i is the model's i-th weight
        ("model/weights/i", in the order of ``model.weights``), so
        load_weights restores it into any model of the same architecture
        whatever its layers' names. overwrite=False with filepath present
        is a FileExistsError (Keras asks on the terminal). save_format and
        options only None."""
        from . import train
        if save_format is not None:
            raise ValueError("vdev's save_weights takes save_format=None only, not %r: it "
                             "writes vdev's checkpoint file (safetensors), whatever the "
                             "file's suffix" % (save_format,))
        if options is not None:
            raise ValueError("vdev's save_weights takes options=None only")
        weights, path = _writable(self, filepath, overwrite)
        names = [getattr(w, "name", None) or "" for w in weights]
        train.save_checkpoint(path, {_WEIGHT % i: w for i, w in enumerate(weights)},
                              metadata={_NAMES_KEY: json.dumps(names)})

    def load_weights(self, filepath, by_name=False, skip_mismatch=False, options=None):
        """Restores the weights save_weights wrote, by position: the file's
        i-th weight into the model's i-th. The count and every shape are
        checked first (Keras's h5 errors, by weight), so a refused file
        changes nothing. by_name, skip_mismatch and options: only their
        defaults (vdev restores by position)."""
        from . import train
        if skip_mismatch and not by_name:
            raise ValueError("When calling model.load_weights, skip_mismatch can only be set "
                             "to True when by_name is True.")
        if by_name:
            raise ValueError("vdev's load_weights takes by_name=False only: it restores by "
                             "each weight's position in model.weights")
        if options is not None:
            raise ValueError("vdev's load_weights takes options=None only")
        weights = self.weights
        if not weights:
            raise ValueError("the model has no weights yet: build it first (give its first "
                             "layer input_shape or input_dim, or call it once), then load")
        path = os.fspath(filepath)
        saved = {e.name: e for e in train.checkpoint_entries(path)}
        count = 0
        while _WEIGHT % count in saved:
            count += 1
        if count != len(weights):
            raise ValueError("Weight count mismatch when loading weights from file. Model "
                             "expected %d weights, found %d saved weights."
                             % (len(weights), count))
        for i, w in enumerate(weights):
            ref = tuple(int(d) for d in w.shape)
            got = tuple(int(d) for d in saved[_WEIGHT % i].shape)
            if ref != got:
                raise ValueError("Shape mismatch in weight #%d (named %s). Weight expects shape "
                                 "%s. Received saved weight with shape %s"
                                 % (i, getattr(w, "name", None), ref, got))
        train.load_checkpoint(path, {_WEIGHT % i: w for i, w in enumerate(weights)})
