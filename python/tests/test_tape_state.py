"""GradientTape's recording state: a failed gradient call (another
thread's, refused while the tape records) leaves the tape recording and
usable, and the `with` block's exit stops it; a gradient call inside the
block stops the recording whatever its targets (none of them float
included); the gradients of several targets are summed on the gradients'
device, whatever scope is current; reset() inside the block, as
TensorFlow's; a non-persistent tape is spent only by a call that succeeds."""
import logging

import pytest

import vdev
from conftest import from_another_thread

LONG = "/job:localhost/replica:0/task:0"

WRONG_THREAD = ("GradientTape.gradient: the tape is recording on another thread; only that "
                "thread may ask it for gradients before its `with` block ends")


@pytest.mark.parametrize("persistent", [False, True])
def test_a_refused_call_from_another_thread_leaves_the_tape_recording(persistent):
    w = vdev.Variable([1.0, 2.0])
    t = vdev.GradientTape(persistent=persistent)
    with t:
        y = vdev.reduce_sum(w * 3.0)
        got = from_another_thread(lambda: t.gradient(y, w))
        assert got == (vdev.errors.InvalidArgumentError, WRONG_THREAD)
        z = vdev.reduce_sum(w * w)  # still recorded
    assert t.gradient(z, w).numpy().tolist() == [2.0, 4.0]
    with vdev.GradientTape() as t2:  # the block's exit stopped the first tape
        u = vdev.reduce_sum(w * 5.0)
    assert t2.gradient(u, w).numpy().tolist() == [5.0, 5.0]
    # Once the block has ended, another thread may ask.
    t3 = vdev.GradientTape()
    with t3:
        y = vdev.reduce_sum(w * 3.0)
    assert from_another_thread(lambda: t3.gradient(y, w)) is None


def test_a_refused_call_from_another_thread_leaves_the_tape_usable_on_its_own():
    w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape() as t:
        y = vdev.reduce_sum(w * 3.0)
        assert from_another_thread(lambda: t.gradient(y, w))[1] == WRONG_THREAD
        g = t.gradient(y, w)  # the recording thread may ask inside the block
    assert g.numpy().tolist() == [3.0, 3.0]
    with vdev.GradientTape():
        pass


@pytest.mark.parametrize("target", ["empty", "int32"])
def test_a_gradient_call_with_no_float_target_stops_the_recording(target, caplog):
    w = vdev.Variable([1.0, 2.0])
    with caplog.at_level(logging.WARNING, logger="vdev"):
        with vdev.GradientTape(persistent=True) as t:
            y = vdev.reduce_sum(w * 3.0)
            assert t.gradient([] if target == "empty" else vdev.constant([1, 2]), w) is None
            z = vdev.reduce_sum(w * w)  # not recorded, as the warning says
    assert any(r.getMessage().startswith("GradientTape.gradient was called inside the tape's "
                                         "`with` block: vdev's tape stops recording here")
               for r in caplog.records)
    assert t.gradient(z, w) is None
    assert t.gradient(y, w).numpy().tolist() == [3.0, 3.0]
    with vdev.GradientTape():  # no tape records on this thread any more
        pass


@pytest.mark.parametrize("policy", ["copy", "strict"])
def test_several_targets_are_summed_on_the_gradients_device(policy):
    with vdev.device("GPU:0"):
        w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape() as t:
        y1 = vdev.reduce_sum(w * 2.0)
        y2 = vdev.reduce_sum(w * 3.0)
    vdev.placement.set_policy(policy)
    with vdev.device("GPU:1"):
        g = t.gradient([y1, y2], w)
    assert g.device == LONG + "/device:GPU:0" and g.numpy().tolist() == [5.0, 5.0]


def test_reset_inside_the_block_starts_a_new_recording():
    w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape(persistent=True) as t:
        y = vdev.reduce_sum(w * 3.0)
        t.reset()
        z = vdev.reduce_sum(w * w)
    assert t.gradient(y, w) is None  # recorded before the reset: forgotten
    assert t.gradient(z, w).numpy().tolist() == [2.0, 4.0]
    # A persistent tape stopped by a gradient call inside its block records
    # again after reset (TensorFlow's had not stopped).
    with vdev.GradientTape(persistent=True) as t:
        y = vdev.reduce_sum(w * 3.0)
        assert t.gradient(y, w).numpy().tolist() == [3.0, 3.0]
        t.reset()
        z = vdev.reduce_sum(w * 4.0)
    assert t.gradient(z, w).numpy().tolist() == [4.0, 4.0]
    with vdev.GradientTape():  # one tape at a time: the reset ended the old one
        pass


def test_reset_of_a_tape_that_does_not_record():
    w = vdev.Variable([1.0])
    t = vdev.GradientTape()
    for when in ("before", "after"):
        with pytest.raises(ValueError) as e:
            t.reset()
        assert str(e.value) == "Tape is not recording."
        if when == "before":
            with t:
                y = vdev.reduce_sum(w * 2.0)
    with vdev.GradientTape() as t:  # a non-persistent tape's gradient call ends it
        y = vdev.reduce_sum(w * 2.0)
        t.gradient(y, w)
        with pytest.raises(ValueError) as e:
            t.reset()
    assert str(e.value) == "Tape is not recording."
    with vdev.GradientTape() as t:
        got = from_another_thread(t.reset)
    assert got == (vdev.errors.InvalidArgumentError,
                   "GradientTape.reset: the tape is recording on another thread; only that "
                   "thread may reset it")


@pytest.mark.parametrize("inside", [False, True])
def test_a_failed_gradient_call_leaves_the_tape_to_answer_another(inside):
    """As TensorFlow's: a non-persistent tape is spent only by a call that
    succeeds. (The failure here: a source whose tensor was freed.)"""
    w = vdev.Variable([1.0, 2.0])
    c = vdev.constant([1.0])
    freed = vdev.Tensor(c._h)
    del c
    try:
        with vdev.GradientTape() as t:
            y = vdev.reduce_sum(w * 3.0)
            if inside:
                with pytest.raises(vdev.errors.InvalidArgumentError) as e:
                    t.gradient(y, [w, freed])
                z = vdev.reduce_sum(w * w)  # the failed call stopped the recording
        if not inside:
            with pytest.raises(vdev.errors.InvalidArgumentError) as e:
                t.gradient(y, [w, freed])
    finally:
        freed._h = None  # freed already
    assert str(e.value) == ("vdev_tape_gradient_ex: not a live tensor (freed already, or not a "
                            "tensor)")
    assert t.gradient(y, w).numpy().tolist() == [3.0, 3.0]
    if inside:
        with pytest.raises(RuntimeError):  # spent now
            t.gradient(z, w)
    with vdev.GradientTape():
        pass
