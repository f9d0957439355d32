"""Optimizers, as ``tf.keras.optimizers``: ``SGD`` and ``Adam`` with Keras's
arguments and defaults. ``apply_gradients(zip(grads, vars))`` updates each
variable in place on its own device with one fused op there; the optimizer's
slots (momentum; Adam's m and v) live beside each variable. An optimizer
made under a MirroredStrategy's scope is one vdev optimizer per replica, as
each replica needs its own state, and is used inside strategy.run.

The optimizer's state (``iterations`` and the slots of each variable, as
``get_slot_names``) can be saved with the variables:
``vdev.train.save_checkpoint(path, tensors, optimizer=opt)`` and
``load_checkpoint(path, tensors, optimizer=opt)``, after which training goes
on bit for bit as if it had never stopped.

The hyperparameters (``learning_rate``; SGD's ``momentum``; Adam's
``beta_1``, ``beta_2``, ``epsilon``) may be set after construction, as in
Keras (``opt.learning_rate = 0.001``): the next update uses them. A value the
constructor would refuse is refused the same way, and changes nothing. They
are numbers (floats), not variables, though each also takes Keras's habits
of a variable: ``opt.learning_rate.assign(x)`` is ``opt.learning_rate = x``
and ``.numpy()`` gives the value in force. Each is checked by the
constructor as by the setter, in Keras's words and naming the argument: a
value out of vdev's C optimizer's range (learning_rate >= 0, momentum in
[0, 1], beta_1 and beta_2 in [0, 1), epsilon > 0, each finite, also once
rounded to the float32 the C optimizer holds) is a ValueError ("`epsilon`
must be a finite number > 0. Received: epsilon=0"; Keras checks momentum
only); a value that is not a number (a string, a bool) is a TypeError, as
Keras's float32 variable refuses a string. ``learning_rate`` may be one of
Keras's schedules (``vdev.optimizers.schedules``, vdev/_schedules.py): each
update then takes schedule(iterations) first, and setting the rate is
Keras's TypeError; another callable is a TypeError.
``nesterov`` and ``amsgrad`` are bools (or 0 and 1), as vdev's other
switches (vdev.config's): another value, ``'false'`` included, is a
TypeError.

Keras's other arguments are vdev's C optimizer's too (vdev/nn.h), each also
an attribute that may be set later, as in Keras: SGD's ``nesterov``, Adam's
``amsgrad`` (a third slot, ``vhat``), and on both ``clipnorm``,
``clipvalue``, ``global_clipnorm`` (the gradients clipped first, as Keras's
``_clip_gradients``: clipnorm wins over global_clipnorm, which wins over
clipvalue; a value of None or <= 0 clips nothing, and an infinite
clipnorm or clipvalue too; clipnorm and global_clipnorm given together to
the constructor are Keras's ValueError, set later both are kept and
clipnorm wins, as in Keras) and ``weight_decay`` (a number or None: Keras
2.11+'s decoupled decay, ``var -= var * weight_decay * learning_rate``
before each update, on every variable updated but those of
``exclude_from_weight_decay``, which the C optimizer leaves out of the decay
in the same update).

A pair whose gradient is None is skipped with Keras's warning ("Gradients do
not exist for variables [...] when minimizing the loss.", on the "vdev"
logger); all None is Keras's ValueError. An optimizer cannot be copied or
pickled (TypeError): its slots live in vdev's C optimizer."""

import ctypes
import logging
import math
import numbers
import re

import numpy as np

from . import _lib, _schedules as schedules, _strategy_context
from ._lib import lib
from ._tensor import Tensor, Variable
from .config import _bool_flag

__all__ = ["Adam", "Hyperparameter", "Optimizer", "SGD", "schedules"]

# Keras's words for setting the rate of an optimizer given a schedule
_SCHEDULED = ("This optimizer was created with a `LearningRateSchedule` object as its "
              "`learning_rate` constructor argument, hence its learning rate is not settable. "
              "If you need the learning rate to be settable, you should instantiate the "
              "optimizer with a float `learning_rate` argument.")

_log = logging.getLogger("vdev")


class Optimizer:
    """make: a function that makes a new vdev optimizer (one, or one per
    replica for an optimizer made under a strategy's scope)."""

    def __init__(self, make, name, weight_decay=None, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, use_ema=False, ema_momentum=0.99,
                 ema_overwrite_frequency=None, jit_compile=True):
        self._h = None
        self._replica_h = None  # under a strategy: one optimizer per replica
        if not hasattr(self, "_schedule"):
            self._schedule = None
        if use_ema is not False and use_ema != 0:
            raise ValueError("use_ema=%r: vdev's optimizers have no exponential moving average "
                             "(EMA) of the weights; pass use_ema=False" % (use_ema,))
        # taken and kept as Keras keeps them (get_config); with use_ema=False
        # Keras uses neither, and vdev's fused update ops need no XLA
        self.use_ema = False
        self.ema_momentum = ema_momentum
        self.ema_overwrite_frequency = ema_overwrite_frequency
        self.jit_compile = jit_compile
        if clipnorm is not None and global_clipnorm is not None:
            raise ValueError("At most one of `clipnorm` and `global_clipnorm` can be set. "
                             "Received: clipnorm=%s, global_clipnorm=%s."
                             % (clipnorm, global_clipnorm))
        self._strategy = _strategy_context.mirroring_strategy()
        self.name = name
        if self._strategy is None:
            self._h = _lib.made(make())
        else:
            hs = []
            try:
                for _ in range(self._strategy.num_replicas_in_sync):
                    hs.append(_lib.made(make()))
            except BaseException:
                for h in hs:
                    lib.vdev_optimizer_free(h)
                raise
            self._replica_h = tuple(hs)
        self._clip = (None, None, None)
        self._built = False  # Keras's: after the first update
        self._exclude_ids, self._exclude_names = set(), []
        self._set_clip(clipnorm, clipvalue, global_clipnorm)
        self._weight_decay = None
        self.weight_decay = weight_decay

    def _set_clip(self, clipnorm, clipvalue, global_clipnorm):
        """Keras's clipping arguments, as given (None, or a number: <= 0 clips
        nothing, as Keras's _clip_gradients skips it; an infinite clipnorm or
        clipvalue clips nothing, as tf.clip_by_norm and tf.clip_by_value with
        inf). Both clipnorm and global_clipnorm (set one after the other, as
        Keras allows past the constructor): clipnorm wins, as in Keras, so
        vdev's C optimizer gets only it."""
        for arg, x in (("clipnorm", clipnorm), ("clipvalue", clipvalue),
                       ("global_clipnorm", global_clipnorm)):
            if x is not None and not _is_number(x):
                raise TypeError("%s must be a number or None, not %r" % (arg, x))

        def c(x, inf_is_none):
            if x is None or not x > 0 or (inf_is_none and x == float("inf")):
                return 0.0
            return float(x)
        cn, cv = c(clipnorm, True), c(clipvalue, True)
        gcn = 0.0 if cn > 0 else c(global_clipnorm, False)
        for h in self._handles():
            if lib.vdev_optimizer_set_clipping(h, cn, cv, gcn) != 0:
                # the constructor's words, without the C function's name
                e = _lib.error()
                text = str(e).replace("vdev_optimizer_set_clipping: ", "", 1)
                raise ValueError(text) from None
        self._clip = (clipnorm, clipvalue, global_clipnorm)

    clipnorm = property(lambda self: self._clip[0],
                        lambda self, x: self._set_clip(x, self._clip[1], self._clip[2]))
    clipvalue = property(lambda self: self._clip[1],
                         lambda self, x: self._set_clip(self._clip[0], x, self._clip[2]))
    global_clipnorm = property(lambda self: self._clip[2],
                               lambda self, x: self._set_clip(self._clip[0], self._clip[1], x))

    @property
    def weight_decay(self):
        """Keras's weight_decay: None (none) or the decay rate."""
        return self._weight_decay

    @weight_decay.setter
    def weight_decay(self, value):
        if value is not None and (not isinstance(value, numbers.Real)
                                  or isinstance(value, bool)):
            raise TypeError("weight_decay must be a number or None, not %r" % (value,))
        wd = 0.0 if value is None else float(value)
        for h in self._handles():
            _lib.check(lib.vdev_optimizer_set_weight_decay(h, wd), {1: ValueError})
        self._weight_decay = value

    def get_config(self):
        """Keras 2.11's optimizer config: the constructor's arguments (the
        hyperparameters as floats), and ``is_legacy_optimizer`` False."""
        config = {"name": self.name, "weight_decay": self.weight_decay,
                  "clipnorm": self.clipnorm, "global_clipnorm": self.global_clipnorm,
                  "clipvalue": self.clipvalue, "use_ema": self.use_ema,
                  "ema_momentum": self.ema_momentum,
                  "ema_overwrite_frequency": self.ema_overwrite_frequency,
                  "jit_compile": self.jit_compile, "is_legacy_optimizer": False}
        config.update(self._own_config())
        if self._schedule is not None:
            config["learning_rate"] = schedules.serialize(self._schedule)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A new optimizer of get_config()'s dict, as Keras's (a schedule's
        dict made a schedule again)."""
        config = dict(config)
        config.pop("is_legacy_optimizer", None)
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = schedules.deserialize(config["learning_rate"],
                                                            custom_objects)
        return cls(**config)

    def _first_lr(self, learning_rate):
        """The rate to start from: a schedule's at step 0 (kept, Keras's
        current rate), else the number given."""
        if isinstance(learning_rate, schedules.LearningRateSchedule):
            self._schedule = learning_rate
            return float(learning_rate(0))
        self._schedule = None
        return learning_rate

    @property
    def variables(self):
        """Not available: vdev keeps an optimizer's state in its C optimizer,
        not in variables (an AttributeError saying so)."""
        raise AttributeError(
            "vdev optimizers have no `variables`: their state (the step count and each "
            "variable's slots) lives in vdev's C optimizer. Read `iterations` and "
            "`get_slot_names()`, and save it with vdev.train.save_checkpoint(path, tensors, "
            "optimizer=opt)")

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        """Keras 2.11's: the variables of var_list, and those whose name
        matches (re.search) one of var_names, are not decayed. Only before
        the optimizer's first update (Keras's ValueError after); a call
        replaces the previous one's lists."""
        if self._built:
            raise ValueError("`exclude_from_weight_decay()` can only be configued before the "
                             "optimizer is built.")
        self._exclude_ids = {id(v) for v in var_list} if var_list else set()
        self._exclude_names = list(var_names) if var_names else []

    def _use_weight_decay(self, variable):
        """Keras's test: False for an excluded variable."""
        if id(variable) in self._exclude_ids:
            return False
        name = getattr(variable, "name", None) or ""
        return not any(re.search(n, name) is not None for n in self._exclude_names)

    def apply_gradients(self, grads_and_vars, name=None):
        """Updates each variable in place on its own device. Inside
        strategy.run (an optimizer made under strategy.scope()), sums each
        gradient over the replicas first and updates every replica's copy
        alike, all or nothing: when any replica fails before the update, no
        replica's variables change."""
        pairs = list(grads_and_vars)
        if not pairs:
            # Keras 2.11's optimizer: nothing to apply is a no-op (no count,
            # no slots), as a model with nothing trainable gives it
            return
        for g, v in pairs:
            if not isinstance(v, Variable):
                raise TypeError("apply_gradients updates vdev.Variables, not %r" % (v,))
            if g is not None and not isinstance(g, Tensor):
                raise TypeError("a gradient must be a vdev tensor or None, not %r" % (g,))
        kept = [(g, v) for g, v in pairs if g is not None]
        if not kept:
            raise ValueError("No gradients provided for any variable: (%s,). Provided "
                             "`grads_and_vars` is %r." % ([v.name for _, v in pairs], pairs))
        if len(kept) < len(pairs):
            # Keras 2.x: a warning, and the variables without a gradient are skipped.
            _log.warning("Gradients do not exist for variables %s when minimizing the loss.",
                         [v.name for g, v in pairs if g is None])
        ctx = _strategy_context.replica()
        if ctx is None and self._replica_h is not None:
            raise RuntimeError("`apply_gradients() cannot be called in cross-replica context. "
                               "Use `MirroredStrategy.run` to enter replica context.")
        if ctx is not None and (self._replica_h is None or ctx.strategy is not self._strategy):
            raise ValueError("optimizer %r is used inside strategy.run but was not made under "
                             "that strategy's scope(): each replica needs its own optimizer "
                             "state. Make it under strategy.scope()" % self.name)
        if ctx is not None:
            for _, v in kept:
                if getattr(v, "_strategy", None) is not ctx.strategy:
                    # Keras's refusal (a plain variable, or another strategy's,
                    # has no copy on this replica's device to update)
                    raise ValueError(
                        "Trying to create optimizer slot variable under the scope for "
                        "tf.distribute.Strategy (%s), which is different from the scope used "
                        "for the original variable (%s). Make sure the slot variables are "
                        "created under the same strategy scope. This may happen if you're "
                        "restoring from a checkpoint outside the scope" % (ctx.strategy, v))
        h = self._h if ctx is None else self._replica_h[ctx.replica_id_in_sync_group]
        if self._exclude_ids or self._exclude_names:
            # Keras decides at each update (names match as variables come);
            # the C optimizer keeps the variables it is told once
            off = [v for _, v in kept if not self._use_weight_decay(v)]
            if off:
                _lib.check(lib.vdev_optimizer_exclude_from_weight_decay(
                    h, _lib.handles([v._handle for v in off]), len(off)))
        if self._schedule is not None:  # Keras's current rate: schedule(iterations)
            n = ctypes.c_int64()
            _lib.check(lib.vdev_optimizer_get_iterations(h, ctypes.byref(n)))
            self._apply_lr(h, _learning_rate(float(self._schedule(n.value))))
        hv = _lib.handles([v._handle for _, v in kept])
        hg = _lib.handles([g._handle for g, _ in kept])
        if ctx is None:
            _lib.check(lib.vdev_optimizer_apply(h, hv, hg, len(kept)))
        else:
            _lib.check(lib.vdev_replica_apply_gradients(ctx._h, h, hv, hg, len(kept)))
        self._built = True

    def minimize(self, loss, var_list, tape=None):
        """loss: a callable of no arguments, or a tensor recorded by `tape`."""
        from ._tape import GradientTape
        if callable(loss):
            with GradientTape() as tape:
                value = loss()
        elif tape is None:
            raise ValueError("`tape` is required when a `Tensor` loss is passed. Received: "
                             "loss=%r, tape=None." % (loss,))
        else:
            value = loss
        var_list = list(var_list)
        grads = tape.gradient(value, var_list)
        self.apply_gradients(zip(grads, var_list))

    def _handles(self):
        """The vdev optimizers: one, or one per replica."""
        return (self._h,) if self._h else self._replica_h

    @property
    def iterations(self):
        """Updates applied so far (Keras's ``iterations``; Adam's bias
        correction counts from it)."""
        n = ctypes.c_int64()
        _lib.check(lib.vdev_optimizer_get_iterations(self._handles()[0], ctypes.byref(n)))
        return n.value

    @iterations.setter
    def iterations(self, n):
        if not isinstance(n, numbers.Integral) or isinstance(n, bool):
            raise TypeError("iterations is a whole number, not %r" % (n,))
        for h in self._handles():
            _lib.check(lib.vdev_optimizer_set_iterations(h, int(n)))

    def get_slot_names(self):
        """Keras's slot names: Adam ['m', 'v'] (and 'vhat' with AMSGrad),
        SGD with momentum ['momentum'], SGD without []."""
        if isinstance(self, Adam):
            return ["m", "v", "vhat"] if self.amsgrad else ["m", "v"]
        return ["momentum"] if self.momentum > 0 else []

    def _slot_handles(self, var):
        """[(slot name, [the slot's handle per replica])] of Variable var
        (made, zeros, if the optimizer has not updated var yet); the handles
        stay the optimizer's; give them back with _release_slots once done."""
        if not isinstance(var, Variable):
            raise TypeError("optimizer slots belong to vdev.Variables, not %r" % (var,))
        mine = self._handles()
        vs = var._replica_handles() if hasattr(var, "_replica_handles") else [var._handle]
        if len(vs) != len(mine):
            raise ValueError("%r has %d replica(s) but the optimizer %s has %d: make both under "
                             "the same strategy" % (var.name, len(vs), self.name, len(mine)))
        out = {}
        for h, v in zip(mine, vs):
            hs = (_lib.c_handle * 3)()
            names = (ctypes.c_char_p * 3)()
            n = lib.vdev_optimizer_slots(h, v, hs, names, 3)
            if n < 0:
                raise _lib.error()
            for k in range(n):
                out.setdefault(names[k].decode(), []).append(hs[k])
        return list(out.items())

    def _release_slots(self):
        """Gives back every slot handle _slot_handles handed out (a
        checkpoint's save or load is done with them): the slots are the
        optimizer's alone again, so switching momentum off frees SGD's
        velocity as if it had never been saved."""
        for h in self._handles():
            _lib.check(lib.vdev_optimizer_slots_release(h, None))

    def _no_copy(self, *args):
        raise TypeError("cannot copy or pickle a vdev optimizer (%s): its state (slots, step "
                        "count) lives in vdev's C optimizer, which cannot be copied; make a new "
                        "one" % self.name)

    __copy__ = __deepcopy__ = __reduce_ex__ = _no_copy

    def __del__(self, _free=lib.vdev_optimizer_free):
        h, self._h = getattr(self, "_h", None), None
        hs, self._replica_h = getattr(self, "_replica_h", None) or (), None
        for x in (h,) + tuple(hs):
            if x:
                _free(x)


class Hyperparameter(float):
    """An optimizer's hyperparameter as its getter gives it: a float (the
    value when it was read) that also answers Keras's habits of a variable:
    ``assign(x)`` sets the optimizer's value, as the setter does, and
    ``numpy()`` reads the value in force (so after ``lr.assign(x)``,
    ``lr.numpy()`` is x while ``float(lr)`` stays what was read)."""

    def __new__(cls, value, owner, attr):
        h = float.__new__(cls, value)
        h._owner, h._attr = owner, attr
        return h

    def assign(self, value, use_locking=None, name=None, read_value=True):
        setattr(self._owner, self._attr, value)
        return getattr(self._owner, self._attr) if read_value else None

    def numpy(self):
        return float(getattr(self._owner, self._attr))

    def __reduce__(self):  # a copy or a pickle is the plain number
        return (float, (float(self),))


def _is_number(x):
    """x is a real number (a Python or numpy one, not a bool), or a vdev
    tensor (its one value, as Keras takes a tensor)."""
    return isinstance(x, Tensor) or (isinstance(x, numbers.Real) and not isinstance(x, bool))


def _number(x, arg):
    """x, a hyperparameter, as a float: a number (a string, a bool or
    anything else is a TypeError, as Keras's float32 variable refuses a
    string); a schedule is taken before (Optimizer._first_lr)."""
    if _is_number(x):
        return float(x)
    if arg == "learning_rate" and callable(x):
        raise TypeError("learning_rate must be a number or a vdev.optimizers.schedules "
                        "LearningRateSchedule, not %r: set opt.learning_rate = f(step) "
                        "before each step for another callable" % (x,))
    raise TypeError("%s must be a number, not %r" % (arg, x))


def _checked(x, arg, ok, rule):
    """x (a hyperparameter named arg) as a float, after ok(value) holds for
    it and for the float32 the C optimizer gets (finite too): else a
    ValueError in Keras's words (`momentum` must be between [0, 1].
    Received: momentum=...), the rule saying what is taken."""
    v = _number(x, arg)
    with np.errstate(over="ignore"):
        v32 = float(np.float32(v))
    if not all(math.isfinite(y) and ok(y) for y in (v, v32)):
        # the float32 is named when it alone is refused (1e39: inf)
        note = " (%r as a float32)" % v32 if math.isfinite(v) and ok(v) else ""
        raise ValueError("`%s` must be %s. Received: %s=%r%s" % (arg, rule, arg, x, note))
    return v


def _learning_rate(x):
    return _checked(x, "learning_rate", lambda y: y >= 0, "a finite number >= 0")


def _momentum(momentum):
    """momentum as SGD takes it: Keras's ValueError outside [0, 1] (the
    range of vdev's C optimizer too), then a float."""
    v = _number(momentum, "momentum")
    if not 0 <= v <= 1:
        raise ValueError("`momentum` must be between [0, 1]. Received: momentum=%r"
                         % (momentum,))
    return v


def _adam_value(k, x):
    """Adam's hyperparameter k (0 learning_rate, 1 beta_1, 2 beta_2, 3
    epsilon), checked as vdev's C optimizer checks it, in Keras's words."""
    if k == 0:
        return _learning_rate(x)
    if k == 3:
        return _checked(x, "epsilon", lambda y: y > 0, "a finite number > 0")
    return _checked(x, ("beta_1", "beta_2")[k - 1], lambda y: 0 <= y < 1,
                    "a finite number in [0, 1)")


class SGD(Optimizer):
    """Keras's SGD. ``learning_rate`` and ``momentum`` may be set at any time
    (``opt.learning_rate = 0.001``): the next update uses them, checked as
    the constructor checks them (vdev_sgd_set). Momentum 0 is no velocity,
    as in Keras, whose SGD makes no momentum slot: none is made, so updates
    take no device memory beyond the variables and gradients; switching
    momentum off frees the velocity slots at once (but those whose handles
    the C optimizer handed out, a checkpoint's save of them included, which
    are zeroed and kept), and momentum switched on again makes them, zeros,
    at the next update. ``nesterov=True`` steps by momentum * velocity -
    learning_rate * gradient with the new velocity, as Keras's SGD."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None,
                 clipnorm=None, clipvalue=None, global_clipnorm=None, use_ema=False,
                 ema_momentum=0.99, ema_overwrite_frequency=None, jit_compile=True,
                 name="SGD"):
        self._lr = _learning_rate(self._first_lr(learning_rate))
        self._momentum = _momentum(momentum)
        super().__init__(lambda: lib.vdev_sgd_new(self._lr, self._momentum), name,
                         weight_decay, clipnorm, clipvalue, global_clipnorm, use_ema,
                         ema_momentum, ema_overwrite_frequency, jit_compile)
        self.nesterov = nesterov

    def _own_config(self):
        return {"learning_rate": self._lr, "momentum": self._momentum,
                "nesterov": self.nesterov}

    @property
    def nesterov(self):
        return self._nesterov

    @nesterov.setter
    def nesterov(self, value):
        flag = _bool_flag(value, "nesterov")  # bool('false') would be True
        for h in self._handles():
            _lib.check(lib.vdev_sgd_set_nesterov(h, flag))
        self._nesterov = flag

    def _set(self, lr, momentum):
        for h in self._handles():
            _lib.check(lib.vdev_sgd_set(h, lr, momentum))
        self._lr, self._momentum = lr, momentum

    @property
    def learning_rate(self):
        return Hyperparameter(self._lr, self, "learning_rate")

    @learning_rate.setter
    def learning_rate(self, value):
        if self._schedule is not None:
            raise TypeError(_SCHEDULED)
        self._set(_learning_rate(value), self._momentum)

    def _apply_lr(self, h, lr):
        _lib.check(lib.vdev_sgd_set(h, lr, self._momentum))
        self._lr = lr

    @property
    def momentum(self):
        return Hyperparameter(self._momentum, self, "momentum")

    @momentum.setter
    def momentum(self, value):
        self._set(self._lr, _momentum(value))


class Adam(Optimizer):
    """Keras's Adam. ``learning_rate``, ``beta_1``, ``beta_2`` and
    ``epsilon`` may be set at any time: the next update uses them, checked as
    the constructor checks them (vdev_adam_set); the bias correction takes
    the new betas with the steps counted so far (``iterations``).
    ``amsgrad=True`` divides by the root of vhat = max(vhat, v), as Keras's
    Adam."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-07,
                 amsgrad=False, weight_decay=None, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, use_ema=False, ema_momentum=0.99,
                 ema_overwrite_frequency=None, jit_compile=True, name="Adam"):
        first = self._first_lr(learning_rate)
        self._hyper = tuple(_adam_value(k, x)
                            for k, x in enumerate((first, beta_1, beta_2, epsilon)))
        super().__init__(lambda: lib.vdev_adam_new(*self._hyper), name,
                         weight_decay, clipnorm, clipvalue, global_clipnorm, use_ema,
                         ema_momentum, ema_overwrite_frequency, jit_compile)
        self.amsgrad = amsgrad

    def _own_config(self):
        return {"learning_rate": self._hyper[0], "beta_1": self._hyper[1],
                "beta_2": self._hyper[2], "epsilon": self._hyper[3], "amsgrad": self.amsgrad}

    @property
    def amsgrad(self):
        return self._amsgrad

    @amsgrad.setter
    def amsgrad(self, value):
        """AMSGrad on: the next update makes vhat (zeros) and keeps
        max(vhat, v) there, dividing by its root instead of v's."""
        flag = _bool_flag(value, "amsgrad")  # bool('false') would be True
        for h in self._handles():
            _lib.check(lib.vdev_adam_set_amsgrad(h, flag))
        self._amsgrad = flag

    def _set(self, k, value):
        if k == 0 and self._schedule is not None:
            raise TypeError(_SCHEDULED)
        hyper = list(self._hyper)
        hyper[k] = _adam_value(k, value)
        for h in self._handles():
            _lib.check(lib.vdev_adam_set(h, *hyper))
        self._hyper = tuple(hyper)

    def _get(self, k, attr):
        return Hyperparameter(self._hyper[k], self, attr)

    def _apply_lr(self, h, lr):
        _lib.check(lib.vdev_adam_set(h, lr, *self._hyper[1:]))
        self._hyper = (lr,) + self._hyper[1:]

    learning_rate = property(lambda self: self._get(0, "learning_rate"),
                             lambda self, x: self._set(0, x))
    beta_1 = property(lambda self: self._get(1, "beta_1"), lambda self, x: self._set(1, x))
    beta_2 = property(lambda self: self._get(2, "beta_2"), lambda self, x: self._set(2, x))
    epsilon = property(lambda self: self._get(3, "epsilon"), lambda self, x: self._set(3, x))
