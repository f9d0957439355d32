"""GradientTape.stop_recording, as TensorFlow's: ops in the block are not
recorded and recording resumes after it; a persistent tape asked for a
gradient inside the block records on after it (TensorFlow's documented use);
a non-persistent tape's gradient inside the block spends the tape; the
errors of a tape that is not recording (never entered, after its block,
nested stop_recording, reset inside it) are TensorFlow's; another thread
may not pause the tape; no other tape begins inside the block, and the
thread may record again once it ends."""

import pytest

import vdev
from conftest import from_another_thread


def test_ops_in_the_block_are_not_recorded():
    x, y = vdev.Variable(2.0), vdev.Variable(3.0)
    with vdev.GradientTape() as t:
        x_sq = x * x
        with t.stop_recording():
            y_sq = y * y
        z = x_sq + y_sq + x * y  # recorded again after the block
    g = t.gradient(z, {"x": x, "y": y})
    assert g["x"].numpy() == 7.0  # 2x + y
    assert g["y"].numpy() == 2.0  # x: y*y was not recorded


def test_a_value_made_in_the_block_has_no_gradient():
    x = vdev.Variable(4.0)
    with vdev.GradientTape() as t:
        with t.stop_recording():
            y = x ** 2
    assert t.gradient(y, x) is None


def test_persistent_gradient_inside_the_block_keeps_the_tape_recording(caplog):
    w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape(persistent=True) as t:
        loss = vdev.reduce_sum(w * w)
        with t.stop_recording():
            g = t.gradient(loss, w)
        more = vdev.reduce_sum(w * 3.0)  # recorded: the tape records on
    assert g.numpy().tolist() == [2.0, 4.0]
    assert t.gradient(more, w).numpy().tolist() == [3.0, 3.0]
    assert t.gradient(loss, w).numpy().tolist() == [2.0, 4.0]
    assert "stops recording here" not in caplog.text  # no warning: nothing was lost


def test_non_persistent_gradient_inside_the_block_spends_the_tape():
    w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape() as t:
        loss = vdev.reduce_sum(w * w)
        with t.stop_recording():
            g = t.gradient(loss, w)
        vdev.reduce_sum(w * 3.0)
    assert g.numpy().tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="can only be used to compute one set"):
        t.gradient(loss, w)
    with vdev.GradientTape() as t2:  # the thread records again
        u = vdev.reduce_sum(w * 5.0)
    assert t2.gradient(u, w).numpy().tolist() == [5.0, 5.0]


def test_errors_of_a_tape_that_is_not_recording():
    t = vdev.GradientTape()
    with pytest.raises(RuntimeError) as e:
        with t.stop_recording():
            pass
    assert str(e.value) == "Trying to stop recording a tape which is not recording."
    w = vdev.Variable(1.0)
    with vdev.GradientTape(persistent=True) as t:
        with t.stop_recording():
            with pytest.raises(ValueError) as e:
                with t.stop_recording():
                    pass
            assert str(e.value) == "Tape is not recording."
            with pytest.raises(ValueError) as e:
                t.reset()
            assert str(e.value) == "Tape is not recording."
        y = w * 2.0  # still recording after the refused calls
    assert t.gradient(y, w).numpy() == 2.0
    with pytest.raises(ValueError) as e:  # after the block
        with t.stop_recording():
            pass
    assert str(e.value) == "Tape is not recording."


def test_no_other_tape_begins_inside_the_block():
    w = vdev.Variable(1.0)
    with vdev.GradientTape() as t:
        with t.stop_recording():
            with pytest.raises(RuntimeError) as e:
                with vdev.GradientTape():
                    pass
            assert str(e.value) == (
                "a tape is paused on this thread (in its stop_recording block): vdev records "
                "one GradientTape at a time on a thread, so no other tape may begin until that "
                "block ends")
        y = w * 3.0
    assert t.gradient(y, w).numpy() == 3.0


def test_another_thread_may_not_pause_the_tape():
    w = vdev.Variable(1.0)
    with vdev.GradientTape() as t:
        def pause():
            with t.stop_recording():
                pass
        got = from_another_thread(pause)
        assert got == (vdev.errors.InvalidArgumentError,
                       "GradientTape.stop_recording: the tape is recording on another thread; "
                       "only that thread may pause it")
        y = w * 4.0  # still recorded
    assert t.gradient(y, w).numpy() == 4.0


def test_an_exception_in_the_block_resumes_recording():
    w = vdev.Variable(1.0)
    with vdev.GradientTape() as t:
        with pytest.raises(KeyError):
            with t.stop_recording():
                raise KeyError("x")
        y = w * 6.0
    assert t.gradient(y, w).numpy() == 6.0
