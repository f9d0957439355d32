"""The optimizers' arguments are checked alike by the constructors and the
setters, naming the Python argument in Keras's words: a value out of vdev's
range is a ValueError (never the C optimizer's message), a value that is not
a number a TypeError (a string is not read as a number, a schedule is
refused saying what to do), a switch that is not a bool a TypeError
(bool('false') is True); and clipnorm clips a gradient holding a NaN to all
NaN, as tf.clip_by_norm (tf.maximum propagates NaN)."""
import math

import numpy as np
import pytest

import vdev

SGD, Adam = vdev.optimizers.SGD, vdev.optimizers.Adam


def _both(cls, arg, value):
    """The error of cls(arg=value) and of setting opt.arg = value, which
    must be the same; the setter's optimizer keeps its value."""
    with pytest.raises(Exception) as e1:
        cls(**{arg: value})
    opt = cls()
    before = getattr(opt, arg)
    with pytest.raises(Exception) as e2:
        setattr(opt, arg, value)
    assert type(e1.value) is type(e2.value)
    assert str(e1.value) == str(e2.value)
    assert getattr(opt, arg) == before
    return e1.value


CASES = [
    # (class, argument, value, message)
    (SGD, "learning_rate", -1, "`learning_rate` must be a finite number >= 0. Received: "
                               "learning_rate=-1"),
    (SGD, "learning_rate", math.inf, "`learning_rate` must be a finite number >= 0. Received: "
                                     "learning_rate=inf"),
    (SGD, "learning_rate", 1e39, "`learning_rate` must be a finite number >= 0. Received: "
                                 "learning_rate=1e+39 (inf as a float32)"),
    (SGD, "momentum", 1.5, "`momentum` must be between [0, 1]. Received: momentum=1.5"),
    (Adam, "learning_rate", math.nan, "`learning_rate` must be a finite number >= 0. "
                                      "Received: learning_rate=nan"),
    (Adam, "beta_1", 1.0, "`beta_1` must be a finite number in [0, 1). Received: beta_1=1.0"),
    (Adam, "beta_2", 0.999999999, "`beta_2` must be a finite number in [0, 1). Received: "
                                  "beta_2=0.999999999 (1.0 as a float32)"),
    (Adam, "beta_2", -0.5, "`beta_2` must be a finite number in [0, 1). Received: beta_2=-0.5"),
    (Adam, "epsilon", 0, "`epsilon` must be a finite number > 0. Received: epsilon=0"),
    (Adam, "epsilon", -math.inf, "`epsilon` must be a finite number > 0. Received: "
                                 "epsilon=-inf"),
]


@pytest.mark.parametrize("cls,arg,value,msg", CASES)
def test_out_of_range_is_the_same_value_error(cls, arg, value, msg):
    e = _both(cls, arg, value)
    assert type(e) is ValueError
    assert str(e) == msg


@pytest.mark.parametrize("cls,arg", [(SGD, "learning_rate"), (SGD, "momentum"),
                                     (Adam, "learning_rate"), (Adam, "beta_1"),
                                     (Adam, "beta_2"), (Adam, "epsilon")])
def test_not_a_number_is_a_type_error(cls, arg):
    for bad in ("0.1", b"1", True, [0.1]):
        e = _both(cls, arg, bad)
        assert type(e) is TypeError
        assert str(e) == "%s must be a number, not %r" % (arg, bad)
    opt = cls()
    before = float(getattr(opt, arg))
    with pytest.raises(TypeError):
        getattr(opt, arg).assign("0.5")  # Keras's habit of a variable, checked the same
    assert float(getattr(opt, arg)) == before


def test_a_schedule_is_refused_saying_what_to_do():
    class Schedule:
        def __call__(self, step):
            return 0.1

        def __repr__(self):
            return "Schedule()"

    for cls in (SGD, Adam):
        for sched in (Schedule(), Schedule().__call__):
            e = _both(cls, "learning_rate", sched)
            assert type(e) is TypeError
            assert str(e) == ("learning_rate must be a number or a vdev.optimizers.schedules "
                              "LearningRateSchedule, not %r: set opt.learning_rate = f(step) "
                              "before each step for another callable" % (sched,))
    # numbers of every kind are taken: numpy's, a tensor's, a hyperparameter read back
    opt = SGD(np.float32(0.25), np.float64(0.5))
    opt.learning_rate = vdev.constant(0.125)
    assert (opt.learning_rate, opt.momentum) == (0.125, 0.5)
    adam = Adam(opt.learning_rate, np.float16(0.5))
    assert adam.learning_rate == 0.125 and adam.beta_1 == 0.5


def test_flags_are_bools():
    for cls, flag in ((SGD, "nesterov"), (Adam, "amsgrad")):
        for bad in ("false", "True", None, 2, 0.0, [True]):
            e = _both(cls, flag, bad)
            assert type(e) is TypeError
            assert str(e) == "%s takes a bool (True or False), not %r" % (flag, bad)
        for good, want in ((True, True), (False, False), (np.bool_(True), True), (1, True),
                           (0, False)):
            opt = cls(**{flag: good})
            assert getattr(opt, flag) is want
            setattr(opt, flag, not want)
            assert getattr(opt, flag) is (not want)


def test_sgd_nesterov_false_string_never_switches_it_on():
    """The probe's trap: nesterov='false' was Nesterov on."""
    with pytest.raises(TypeError):
        SGD(1.0, momentum=0.5, nesterov="false")
    with pytest.raises(TypeError):
        Adam(amsgrad="false")


def test_clip_arguments_are_numbers_or_none():
    for cls in (SGD, Adam):
        for arg in ("clipnorm", "clipvalue", "global_clipnorm"):
            e = _both(cls, arg, "1.0")
            assert type(e) is TypeError
            assert str(e) == "%s must be a number or None, not '1.0'" % arg


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:0"])
def test_clipnorm_with_a_nan_gradient_is_all_nan(dev):
    """tf.clip_by_norm: g * c / tf.maximum(norm, c), and tf.maximum propagates
    NaN (Eigen's PropagateNaN), so one NaN makes the clipped gradient all
    NaN, as global_clipnorm gives; an infinity gives NaN there and 0
    elsewhere (g * c / inf)."""
    with vdev.device(dev):
        for kw in (dict(clipnorm=1.0), dict(global_clipnorm=1.0)):
            w = vdev.Variable([0.0, 1.0, 1.0])
            SGD(0.1, **kw).apply_gradients([(vdev.constant([math.nan, 1.0, 1.0]), w)])
            assert np.isnan(w.numpy()).all(), (kw, w.numpy())
        w = vdev.Variable([0.0, 1.0, 1.0])
        SGD(0.1, clipnorm=1.0).apply_gradients([(vdev.constant([math.inf, 1.0, -1.0]), w)])
        got = w.numpy()
        assert np.isnan(got[0]) and got[1:].tolist() == [1.0, 1.0]
