"""Callbacks, as ``tf.keras.callbacks`` (Keras 2.11): ``Callback``, the base
class whose hooks ``Model.fit``, ``evaluate`` and ``predict`` call
(``on_train_begin``, ``on_epoch_begin``, ``on_train_batch_end``,
``on_epoch_end(epoch, logs)``, ...), ``History``, which fit adds itself and
returns, and ``EarlyStopping``. As in Keras, fit calls its progress printer
first, then the callbacks given in their order, then its History, so an
EarlyStopping's ``on_epoch_end`` runs before that epoch is recorded; a
callback stops training by setting ``self.model.stop_training = True``,
which fit reads after each batch and each epoch. ``params`` is Keras's
``{'verbose': ..., 'epochs': ..., 'steps': ...}``; ``logs`` hold Python
floats. Keras's ``ModelCheckpoint``, ``ReduceLROnPlateau``,
``LearningRateScheduler``, ``CSVLogger``, ``TerminateOnNaN`` and
``LambdaCallback`` are here too, with its arguments, rules, messages and
warnings (the two learning-rate callbacks add ``'lr'`` to the epoch's logs,
so History records it, as Keras's)."""

import collections
import csv
import logging
import os
import sys
import time

import numpy as np

__all__ = ["CSVLogger", "Callback", "EarlyStopping", "History", "LambdaCallback",
           "LearningRateScheduler", "ModelCheckpoint", "ReduceLROnPlateau", "TerminateOnNaN"]

_log = logging.getLogger("vdev")


class Callback:
    """Keras's base class: every hook does nothing; ``model`` and ``params``
    are set by fit, evaluate and predict before the first hook."""

    def __init__(self):
        self.validation_data = None
        self.model = None
        self.params = {}

    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self.model = model

    def on_batch_begin(self, batch, logs=None):
        """Keras's older name of on_train_batch_begin (which calls it)."""

    def on_batch_end(self, batch, logs=None):
        """Keras's older name of on_train_batch_end (which calls it)."""

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        """logs: the epoch's 'loss', metrics and, on a validation epoch,
        their 'val_' forms."""

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        """logs: the epoch's averages so far."""
        self.on_batch_end(batch, logs=logs)

    def on_test_batch_begin(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_predict_batch_begin(self, batch, logs=None):
        pass

    def on_predict_batch_end(self, batch, logs=None):
        pass

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass


class History(Callback):
    """Records each epoch's logs: ``history`` maps each key ('loss',
    'accuracy', 'val_loss', ...) to one value per epoch, ``epoch`` lists the
    epochs run (0-based, from initial_epoch). fit makes a new one per call,
    returns it and sets ``model.history`` to it after each epoch."""

    def __init__(self):
        super().__init__()
        self.history = {}

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)
        self.model.history = self


class EarlyStopping(Callback):
    """Keras 2.11's: stops training once ``monitor`` has not improved by
    more than ``min_delta`` for ``patience`` epochs (counted from
    ``start_from_epoch``); ``mode`` 'auto' maximizes a monitor whose name
    ends in 'acc', 'accuracy' or 'auc' and minimizes the others; with
    ``restore_best_weights`` the weights of the best epoch are put back when
    it stops (not when training ends by running out of epochs, as in
    Keras); ``baseline``: training stops unless the monitor beats it within
    ``patience`` epochs. A monitor missing from the logs is Keras's warning,
    and that epoch counts for nothing."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        self.monitor = monitor
        self.patience = patience
        self.verbose = verbose
        self.baseline = baseline
        self.min_delta = abs(min_delta)
        self.wait = 0
        self.stopped_epoch = 0
        self.restore_best_weights = restore_best_weights
        self.best_weights = None
        self.start_from_epoch = start_from_epoch
        if mode not in ("auto", "min", "max"):
            _log.warning("EarlyStopping mode %s is unknown, fallback to auto mode.", mode)
            mode = "auto"
        if mode == "min":
            self.monitor_op = np.less
        elif mode == "max":
            self.monitor_op = np.greater
        elif (self.monitor.endswith("acc") or self.monitor.endswith("accuracy")
              or self.monitor.endswith("auc")):
            self.monitor_op = np.greater
        else:
            self.monitor_op = np.less
        if self.monitor_op == np.greater:
            self.min_delta *= 1
        else:
            self.min_delta *= -1

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = np.inf if self.monitor_op == np.less else -np.inf
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        current = self.get_monitor_value(logs)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            # the weights of the first epoch, in case none improves on it
            self.best_weights = self.model.get_weights()
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.restore_best_weights and self.best_weights is not None:
                if self.verbose > 0:
                    _print("Restoring model weights from the end of the best epoch: %d."
                           % (self.best_epoch + 1))
                self.model.set_weights(self.best_weights)

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            _print("Epoch %d: early stopping" % (self.stopped_epoch + 1))

    def get_monitor_value(self, logs):
        logs = logs or {}
        value = logs.get(self.monitor)
        if value is None:
            _log.warning("Early stopping conditioned on metric `%s` which is not available. "
                         "Available metrics are: %s", self.monitor, ",".join(list(logs.keys())))
        return value

    def _is_improvement(self, monitor_value, reference_value):
        return self.monitor_op(monitor_value - self.min_delta, reference_value)


class ModelCheckpoint(Callback):
    """Keras 2.11's: saves the model (``save_weights_only``: its weights,
    ``save_weights``; else ``model.save``) at each epoch's end or every
    ``save_freq`` batches, to ``filepath`` formatted with the epoch (from
    1), the batch and the logs (``"w.{epoch:02d}-{val_loss:.2f}"``); with
    ``save_best_only`` only when ``monitor`` improves on the best so far
    (``initial_value_threshold`` the first best; ``mode`` 'auto' maximizes
    a monitor with "acc" in its name)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch", options=None,
                 initial_value_threshold=None, **kwargs):
        super().__init__()
        self.monitor, self.verbose = monitor, verbose
        self.filepath = os.fspath(filepath)
        self.save_best_only, self.save_weights_only = save_best_only, save_weights_only
        self.save_freq = save_freq
        self.epochs_since_last_save = 0
        self._batches_seen_since_last_saving = 0
        self._last_batch_seen = 0
        self._current_epoch = 0
        self.best = initial_value_threshold
        if mode not in ("auto", "min", "max"):
            _log.warning("ModelCheckpoint mode %s is unknown, fallback to auto mode.", mode)
            mode = "auto"
        if mode == "max" or (mode == "auto" and ("acc" in monitor
                                                 or monitor.startswith("fmeasure"))):
            self.monitor_op = np.greater
            if self.best is None:
                self.best = -np.inf
        else:
            self.monitor_op = np.less
            if self.best is None:
                self.best = np.inf
        if save_freq != "epoch" and not isinstance(save_freq, int):
            raise ValueError("Unrecognized save_freq: %s. Expected save_freq are 'epoch' or "
                             "integer" % (save_freq,))

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        if batch <= self._last_batch_seen:  # a new epoch
            self._batches_seen_since_last_saving += batch + 1
        else:
            self._batches_seen_since_last_saving += batch - self._last_batch_seen
        self._last_batch_seen = batch
        if self._batches_seen_since_last_saving >= self.save_freq:
            self._batches_seen_since_last_saving = 0
            self._save(self._current_epoch, batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self.epochs_since_last_save += 1
        if self.save_freq == "epoch":
            self._save(epoch, None, logs)

    def _path(self, epoch, batch, logs):
        try:
            if batch is None or "batch" in logs:
                return self.filepath.format(epoch=epoch + 1, **logs)
            return self.filepath.format(epoch=epoch + 1, batch=batch + 1, **logs)
        except KeyError as e:
            raise KeyError('Failed to format this callback filepath: "%s". Reason: %s'
                           % (self.filepath, e)) from None

    def _write(self, path):
        if os.path.isdir(path) and self.save_weights_only:
            raise IOError("Please specify a non-directory filepath for ModelCheckpoint. "
                          "Filepath used is an existing directory: %s" % (path,))
        if self.save_weights_only:
            self.model.save_weights(path, overwrite=True)
        else:
            self.model.save(path, overwrite=True)

    def _save(self, epoch, batch, logs):
        logs = dict(logs or {})
        self.epochs_since_last_save = 0
        path = self._path(epoch, batch, logs)
        if not self.save_best_only:
            if self.verbose > 0:
                _print("\nEpoch %d: saving model to %s" % (epoch + 1, path))
            self._write(path)
            return
        current = logs.get(self.monitor)
        if current is None:
            _log.warning("Can save best model only with %s available, skipping.", self.monitor)
        elif self.monitor_op(current, self.best):
            if self.verbose > 0:
                _print("\nEpoch %d: %s improved from %.5f to %.5f, saving model to %s"
                       % (epoch + 1, self.monitor, self.best, current, path))
            self.best = current
            self._write(path)
        elif self.verbose > 0:
            _print("\nEpoch %d: %s did not improve from %.5f" % (epoch + 1, self.monitor,
                                                                 self.best))


def _lr(model):
    return float(model.optimizer.learning_rate)


class ReduceLROnPlateau(Callback):
    """Keras 2.11's: the optimizer's learning rate times ``factor`` (at
    least ``min_lr``) once ``monitor`` has not improved by ``min_delta``
    for ``patience`` epochs, then ``cooldown`` epochs without counting;
    'auto' maximizes a monitor with "acc" in its name."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0, **kwargs):
        super().__init__()
        self.monitor = monitor
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau does not support a factor >= 1.0. Got %s"
                             % (factor,))
        if "epsilon" in kwargs:
            min_delta = kwargs.pop("epsilon")
            _log.warning("`epsilon` argument is deprecated and will be removed, use "
                         "`min_delta` instead.")
        self.factor, self.min_lr, self.min_delta = factor, min_lr, min_delta
        self.patience, self.verbose, self.cooldown = patience, verbose, cooldown
        self.cooldown_counter = self.wait = 0
        self.best = 0
        self.mode = mode
        self._reset()

    def _reset(self):
        if self.mode not in ("auto", "min", "max"):
            _log.warning("Learning rate reduction mode %s is unknown, fallback to auto mode.",
                         self.mode)
            self.mode = "auto"
        if self.mode == "min" or (self.mode == "auto" and "acc" not in self.monitor):
            self.monitor_op = lambda a, b: np.less(a, b - self.min_delta)
            self.best = np.inf
        else:
            self.monitor_op = lambda a, b: np.greater(a, b + self.min_delta)
            self.best = -np.inf
        self.cooldown_counter = self.wait = 0

    def on_train_begin(self, logs=None):
        self._reset()

    def in_cooldown(self):
        return self.cooldown_counter > 0

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs["lr"] = _lr(self.model)
        current = logs.get(self.monitor)
        if current is None:
            _log.warning("Learning rate reduction is conditioned on metric `%s` which is not "
                         "available. Available metrics are: %s", self.monitor,
                         ",".join(list(logs.keys())))
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self.monitor_op(current, self.best):
            self.best = current
            self.wait = 0
        elif not self.in_cooldown():
            self.wait += 1
            if self.wait >= self.patience:
                old = _lr(self.model)
                if old > np.float32(self.min_lr):
                    new = max(old * self.factor, self.min_lr)
                    self.model.optimizer.learning_rate = new
                    if self.verbose > 0:
                        _print("\nEpoch %d: ReduceLROnPlateau reducing learning rate to %s."
                               % (epoch + 1, new))
                    self.cooldown_counter = self.cooldown
                    self.wait = 0


class LearningRateScheduler(Callback):
    """Keras 2.11's: at each epoch's start the learning rate
    ``schedule(epoch, lr)`` (or ``schedule(epoch)``), a float."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch, logs=None):
        try:
            lr = self.schedule(epoch, _lr(self.model))
        except TypeError:  # Keras's: the older one-argument schedule
            lr = self.schedule(epoch)
        if not isinstance(lr, (float, np.float32, np.float64)):
            raise ValueError('The output of the "schedule" function should be float. Got: %s'
                             % (lr,))
        self.model.optimizer.learning_rate = float(lr)
        if self.verbose > 0:
            _print("\nEpoch %d: LearningRateScheduler setting learning rate to %s."
                   % (epoch + 1, lr))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _lr(self.model)


class CSVLogger(Callback):
    """Keras 2.11's: one row per epoch (the epoch from 0, then the logs'
    keys sorted, found at the first epoch's end) in a CSV file, its header
    first unless ``append`` to a file that has lines; "NA" for a key an
    epoch that stopped training lacks."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.sep, self.filename, self.append = separator, os.fspath(filename), append
        self.writer = self.keys = None
        self.append_header = True
        self.csv_file = None

    def on_train_begin(self, logs=None):
        if self.append:
            if os.path.exists(self.filename):
                with open(self.filename) as f:
                    self.append_header = not bool(len(f.readline()))
            mode = "a"
        else:
            mode = "w"
        self.csv_file = open(self.filename, mode, newline="")

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}

        def value(k):
            if isinstance(k, str):
                return k
            if isinstance(k, collections.abc.Iterable) and not (
                    isinstance(k, np.ndarray) and k.ndim == 0):
                return '"[%s]"' % ", ".join(map(str, k))
            return k
        if self.keys is None:
            self.keys = sorted(logs.keys())
        if self.model.stop_training:
            logs = {k: logs.get(k, "NA") for k in self.keys}
        if self.writer is None:
            sep = self.sep

            class Dialect(csv.excel):
                delimiter = sep
            self.writer = csv.DictWriter(self.csv_file, fieldnames=["epoch"] + self.keys,
                                         dialect=Dialect)
            if self.append_header:
                self.writer.writeheader()
        row = collections.OrderedDict({"epoch": epoch})
        row.update((k, value(logs[k])) for k in self.keys)
        self.writer.writerow(row)
        self.csv_file.flush()

    def on_train_end(self, logs=None):
        self.csv_file.close()
        self.writer = None


class TerminateOnNaN(Callback):
    """Keras 2.11's: stops training at a batch whose loss is NaN or
    infinite."""

    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and (np.isnan(loss) or np.isinf(loss)):
            _print("Batch %d: Invalid loss, terminating training" % (batch,))
            self.model.stop_training = True


class LambdaCallback(Callback):
    """Keras 2.11's: a callback of the functions given (on_epoch_begin,
    on_epoch_end, on_batch_begin, on_batch_end, on_train_begin,
    on_train_end, and any other hook by name)."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_batch_begin=None,
                 on_batch_end=None, on_train_begin=None, on_train_end=None, **kwargs):
        super().__init__()
        self.__dict__.update(kwargs)
        for name, fn in (("on_epoch_begin", on_epoch_begin), ("on_epoch_end", on_epoch_end),
                         ("on_batch_begin", on_batch_begin), ("on_batch_end", on_batch_end),
                         ("on_train_begin", on_train_begin), ("on_train_end", on_train_end)):
            if fn is not None:
                setattr(self, name, fn)
            elif name in ("on_epoch_begin", "on_epoch_end", "on_batch_begin", "on_batch_end"):
                setattr(self, name, lambda *a, **k: None)
            else:
                setattr(self, name, lambda logs=None: None)


def _print(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _format_time(seconds, unit):
    """Keras's Progbar._format_time: ' 3ms/step', ' 1s/epoch', ' 52us/step'."""
    if seconds >= 1 or seconds == 0:
        return " %.0fs/%s" % (seconds, unit)
    if seconds >= 1e-3:
        return " %.0fms/%s" % (seconds * 1e3, unit)
    return " %.0fus/%s" % (seconds * 1e6, unit)


def _value(v, verbose):
    """A log value as Keras 2.11's Progbar prints it: %.4f above 1e-3, else
    %.4e, verbose 1 comparing |v| and verbose 2 v itself (so a negative
    value is %.4e there)."""
    return " %.4f" % v if (abs(v) if verbose == 1 else v) > 1e-3 else " %.4e" % v


class _ProgbarLogger(Callback):
    """What fit, evaluate and predict print for verbose 1 and 2, once per
    epoch (or per evaluate / predict call), when it ends: verbose=2 is
    Keras 2.11's line ("4/4 - 0s - loss: 0.6931 - accuracy: 0.5000 -
    12ms/epoch - 3ms/step"), verbose=1 the last state of Keras's progress
    bar ("4/4 [==============================] - 0s 3ms/step - loss:
    0.6931"), without the bar's updates during the epoch; as Keras's, the
    count is the epoch's steps even when fit stopped it early. fit prints
    "Epoch 1/5" before each epoch when it runs more than one. Inside fit,
    the validation's evaluate prints nothing, as in Keras."""

    def __init__(self, verbose):
        super().__init__()
        self.verbose = verbose
        self._in_fit = False

    def on_train_begin(self, logs=None):
        self._in_fit = True

    def on_train_end(self, logs=None):
        self._in_fit = False

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.time()
        if self.verbose and self.params.get("epochs", 1) > 1:
            _print("Epoch %d/%d" % (epoch + 1, self.params["epochs"]))

    def on_epoch_end(self, epoch, logs=None):
        # Keras 2.11's ProgbarLogger ends an epoch with the bar at its
        # target, the epoch's steps (params["steps"]), also when fit stopped
        # early (model.stop_training, or the data ran out): "4/4", not the
        # batches run
        self._line(self.params.get("steps") or self._steps, logs)

    def on_train_batch_end(self, batch, logs=None):
        self._steps = batch + 1

    def on_test_begin(self, logs=None):
        if not self._in_fit:
            self._start = time.time()

    def on_test_batch_end(self, batch, logs=None):
        if not self._in_fit:
            self._steps = batch + 1

    def on_test_end(self, logs=None):
        if not self._in_fit:
            self._line(self._steps, logs)

    def on_predict_begin(self, logs=None):
        self._start = time.time()

    def on_predict_batch_end(self, batch, logs=None):
        self._steps = batch + 1

    def on_predict_end(self, logs=None):
        self._line(self._steps, {})

    def _line(self, steps, logs):
        elapsed = time.time() - self._start
        target = max(steps, 1)
        count = ("%" + str(len(str(target))) + "d/%d") % (steps, target)
        values = "".join(" - %s:%s" % (k, _value(v, self.verbose))
                         for k, v in (logs or {}).items())
        if self.verbose == 2:
            _print(count + " - %.0fs" % elapsed + values + " -"
                   + _format_time(elapsed, "epoch") + " -"
                   + _format_time(elapsed / target, "step"))
        else:
            _print(count + " [" + "=" * 30 + "] - %.0fs" % elapsed
                   + _format_time(elapsed / target, "step") + values)


class _CallbackList:
    """fit's callbacks in Keras's order: the printer (verbose != 0), the
    caller's, then History (fit only)."""

    def __init__(self, callbacks, model, verbose, params, history):
        self.callbacks = []
        if verbose:
            self.callbacks.append(_ProgbarLogger(verbose))
        if callbacks is not None:
            if isinstance(callbacks, Callback):
                callbacks = [callbacks]
            for c in callbacks:
                if not isinstance(c, Callback):
                    raise TypeError("callbacks must be vdev.callbacks.Callback objects, not %r"
                                    % (c,))
                self.callbacks.append(c)
        self.history = History() if history else None
        if self.history is not None:
            self.callbacks.append(self.history)
        for c in self.callbacks:
            c.set_model(model)
            c.set_params(params)

    def call(self, hook, *args):
        for c in self.callbacks:
            getattr(c, hook)(*args)
