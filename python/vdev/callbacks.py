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
floats."""

import logging
import sys
import time

import numpy as np

__all__ = ["Callback", "EarlyStopping", "History"]

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
