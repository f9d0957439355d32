"""Keras 2.11's learning-rate schedules, as
``vdev.optimizers.schedules`` (``tf.keras.optimizers.schedules``):
``ExponentialDecay``, ``PiecewiseConstantDecay``, ``PolynomialDecay``,
``InverseTimeDecay``, ``CosineDecay`` and ``CosineDecayRestarts``, each
``schedule(step)`` computed as Keras's ops compute it, in float32 (the
dtype of the initial learning rate's tensor there), step by step in its
order, so the rates are Keras's to float32's rounding; and
``LearningRateSchedule`` to subclass, ``serialize`` and ``deserialize``.
An optimizer given a schedule as ``learning_rate`` takes
``schedule(iterations)`` before each update (Keras's current learning
rate, which ``optimizer.learning_rate`` reads; it is schedule(0) before
any); setting its learning rate then is Keras's TypeError.
"""

import math

import numpy as np

__all__ = ["CosineDecay", "CosineDecayRestarts", "ExponentialDecay", "InverseTimeDecay",
           "LearningRateSchedule", "PiecewiseConstantDecay", "PolynomialDecay", "deserialize",
           "serialize"]

f32 = np.float32


class LearningRateSchedule:
    """Keras's base: ``__call__(step)`` gives the rate, ``get_config`` its
    arguments, ``from_config`` a schedule of them."""

    def __call__(self, step):
        raise NotImplementedError("Learning rate schedule '%s' must override `__call__(self, "
                                  "step)`." % type(self).__name__)

    def get_config(self):
        raise NotImplementedError("Learning rate schedule '%s' must override `get_config()` in "
                                  "order to be serializable." % type(self).__name__)

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class _RateDecay(LearningRateSchedule):
    """The decays of (initial, decay_steps, decay_rate, staircase): p =
    step / decay_steps (floored with staircase), then the subclass's rate
    of initial, rate and p."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False,
                 name=None):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.decay_rate, self.staircase, self.name = decay_rate, staircase, name

    def __call__(self, step):
        p = f32(step) / f32(self.decay_steps)
        if self.staircase:
            p = np.floor(p)
        return self._rate(f32(self.initial_learning_rate), f32(self.decay_rate), p)

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "decay_rate": self.decay_rate,
                "staircase": self.staircase, "name": self.name}


class ExponentialDecay(_RateDecay):
    """initial * rate ** (step / decay_steps) (the power floored with
    staircase)."""

    @staticmethod
    def _rate(initial, rate, p):
        return initial * np.power(rate, p)


class PiecewiseConstantDecay(LearningRateSchedule):
    """values[0] up to boundaries[0] (included), values[i] up to
    boundaries[i], the last value after the last boundary."""

    def __init__(self, boundaries, values, name=None):
        if len(boundaries) != len(values) - 1:
            raise ValueError("The length of boundaries should be 1 less than the length of "
                             "values. Received: boundaries=%s of length %d, and values=%s of "
                             "length %d." % (boundaries, len(boundaries), values, len(values)))
        self.boundaries, self.values, self.name = boundaries, values, name

    def __call__(self, step):
        for b, v in zip(self.boundaries, self.values):
            if step <= b:
                return f32(v)
        return f32(self.values[-1])

    def get_config(self):
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


class PolynomialDecay(LearningRateSchedule):
    """(initial - end) * (1 - step / decay_steps) ** power + end, the step
    held at decay_steps (or, with cycle, decay_steps grown to the next
    multiple of it)."""

    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0,
                 cycle=False, name=None):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.end_learning_rate, self.power, self.cycle = end_learning_rate, power, cycle
        self.name = name

    def __call__(self, step):
        initial, end = f32(self.initial_learning_rate), f32(self.end_learning_rate)
        s, steps = f32(step), f32(self.decay_steps)
        if self.cycle:
            mult = f32(1.0) if s == 0 else np.ceil(s / f32(self.decay_steps))
            steps = steps * mult
        else:
            s = min(s, steps)
        p = s / steps
        return (initial - end) * np.power(f32(1) - p, f32(self.power)) + end

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "end_learning_rate": self.end_learning_rate,
                "power": self.power, "cycle": self.cycle, "name": self.name}


class InverseTimeDecay(_RateDecay):
    """initial / (1 + rate * step / decay_steps) (the fraction floored
    with staircase)."""

    @staticmethod
    def _rate(initial, rate, p):
        return initial / (f32(1) + rate * p)


def _cosine(fraction, alpha, factor=f32(1)):
    decayed = f32(0.5) * factor * (f32(1) + np.cos(f32(math.pi) * fraction))
    return (f32(1) - f32(alpha)) * decayed + f32(alpha)


class CosineDecay(LearningRateSchedule):
    """initial * ((1 - alpha) * 0.5 (1 + cos(pi min(step, decay_steps) /
    decay_steps)) + alpha)."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name=None):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.alpha, self.name = alpha, name

    def __call__(self, step):
        steps = f32(self.decay_steps)
        fraction = min(f32(step), steps) / steps
        return f32(self.initial_learning_rate) * _cosine(fraction, self.alpha)

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "alpha": self.alpha, "name": self.name}


class CosineDecayRestarts(LearningRateSchedule):
    """Cosine decay with warm restarts: periods first_decay_steps, then
    t_mul times longer each, each restart's peak m_mul times the last."""

    def __init__(self, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0,
                 alpha=0.0, name=None):
        self.initial_learning_rate, self.first_decay_steps = initial_learning_rate, \
            first_decay_steps
        self._t_mul, self._m_mul, self.alpha, self.name = t_mul, m_mul, alpha, name

    def __call__(self, step):
        fraction = f32(step) / f32(self.first_decay_steps)
        t_mul, m_mul = f32(self._t_mul), f32(self._m_mul)
        if t_mul == 1:
            restart = np.floor(fraction)
            fraction = fraction - restart
        else:
            restart = np.floor(np.log(f32(1) - fraction * (f32(1) - t_mul)) / np.log(t_mul))
            done = (f32(1) - np.power(t_mul, restart)) / (f32(1) - t_mul)
            fraction = (fraction - done) / np.power(t_mul, restart)
        return f32(self.initial_learning_rate) * _cosine(fraction, self.alpha,
                                                         np.power(m_mul, restart))

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "first_decay_steps": self.first_decay_steps, "t_mul": self._t_mul,
                "m_mul": self._m_mul, "alpha": self.alpha, "name": self.name}


def serialize(schedule):
    """Keras's: {"class_name": ..., "config": ...}."""
    return {"class_name": type(schedule).__name__, "config": schedule.get_config()}


def deserialize(config, custom_objects=None):
    """Keras's: the schedule of serialize's dict (custom_objects: more
    classes by name)."""
    classes = {name: globals()[name] for name in __all__[:-2]}
    classes.update(custom_objects or {})
    name = config["class_name"]
    if name not in classes:
        raise ValueError("Unknown learning rate schedule: %s. Please ensure this object is "
                         "passed to the `custom_objects` argument." % (name,))
    return classes[name].from_config(config["config"])
