"""GradientTape(watch_accessed_variables=False), as TensorFlow's: ops on a
variable before its watch() are not recorded for it, a tensor computed from
unwatched variables alone reaches none of them, an unwatched variable gets
None (or zeros), a variable watched inside stop_recording counts from the
resume on, watch() before the block counts from its start, reset() forgets
the watches as TensorFlow's new tape does, and only the block's thread may
watch while it records. Watching an int variable logs TensorFlow's
warning."""
import logging

import numpy as np
import pytest

import vdev
from conftest import from_another_thread


def test_ops_before_the_watch_do_not_count():
    w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape(watch_accessed_variables=False) as tape:
        a = vdev.reduce_sum(w * 3.0)  # before the watch: a constant to the tape
        tape.watch(w)
        b = vdev.reduce_sum(w * w)
        loss = a + b
    assert tape.gradient(loss, w).numpy().tolist() == [2.0, 4.0]  # TensorFlow: 2w


def test_the_order_matters_only_for_the_watched_variable():
    w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        a = vdev.reduce_sum(w * 3.0)
        tape.watch(w)
    assert tape.gradient(a, w) is None  # TensorFlow: None
    assert tape.gradient(a, w, unconnected_gradients="zero").numpy().tolist() == [0.0, 0.0]


def test_a_tensor_from_unwatched_variables_reaches_none():
    v, w = vdev.Variable([1.0, 2.0]), vdev.Variable([3.0, 4.0])
    with vdev.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        tape.watch(w)
        u = v * 2.0  # from an unwatched variable alone: not recorded
        loss = vdev.reduce_sum(u * w)
    gu, gv, gw = tape.gradient(loss, [u, v, w])
    assert gu is None and gv is None  # TensorFlow: None for both
    assert gw.numpy().tolist() == [2.0, 4.0]


def test_watch_before_the_block_and_inside_stop_recording():
    v, w = vdev.Variable([1.0]), vdev.Variable([2.0])
    tape = vdev.GradientTape(persistent=True, watch_accessed_variables=False)
    tape.watch(v)
    with tape:
        a = vdev.reduce_sum(v * 5.0)
        with tape.stop_recording():
            tape.watch(w)
        b = vdev.reduce_sum(w * 7.0)
    assert tape.gradient(a, v).numpy().tolist() == [5.0]
    assert tape.gradient(b, w).numpy().tolist() == [7.0]


def test_reset_forgets_the_watches():
    w = vdev.Variable([1.0])
    with vdev.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(w)
        tape.reset()
        loss = vdev.reduce_sum(w * 4.0)  # w is no longer watched
    assert tape.gradient(loss, w) is None
    with vdev.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(w)
        tape.reset()
        tape.watch(w)
        loss = vdev.reduce_sum(w * 4.0)
    assert tape.gradient(loss, w).numpy().tolist() == [4.0]


def test_only_the_blocks_thread_may_watch():
    w = vdev.Variable([1.0])
    with vdev.GradientTape(watch_accessed_variables=False) as tape:
        got = from_another_thread(lambda: tape.watch(w))
        loss = vdev.reduce_sum(w * 2.0)
    assert got == (vdev.errors.InvalidArgumentError,
                   "GradientTape.watch: the tape is recording on another thread; only that "
                   "thread may watch variables for it")
    assert tape.gradient(loss, w) is None  # the refused watch did not count


def test_the_default_tape_still_watches_every_trainable_variable():
    w = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape() as tape:
        a = vdev.reduce_sum(w * 3.0)
        tape.watch(w)
    assert tape.gradient(a, w).numpy().tolist() == [3.0, 3.0]


def test_watch_refuses_a_plain_tensor():
    with vdev.GradientTape(watch_accessed_variables=False) as tape:
        with pytest.raises(ValueError):
            tape.watch(vdev.constant([1.0]))


def test_watched_variables_in_order_of_construction():
    a, b = vdev.Variable([1.0]), vdev.Variable([2.0])
    frozen = vdev.Variable([3.0], trainable=False)
    unread = vdev.Variable([4.0])
    t = vdev.GradientTape(persistent=True)
    assert t.watched_variables() == ()  # never entered
    with t:
        y = b * a * frozen  # b read first: the order is still a, b (construction)
        assert t.watched_variables() == (a, b)  # frozen: not trainable, not watched
        t.watch(frozen)
        t.watch(unread)
        assert t.watched_variables() == (a, b, frozen, unread)
    assert t.gradient(y, a).numpy().tolist() == [6.0]
    assert t.watched_variables() == (a, b, frozen, unread)


def test_watched_variables_explicit_and_after_a_spent_tape():
    a, b = vdev.Variable([1.0]), vdev.Variable([2.0])
    with vdev.GradientTape(watch_accessed_variables=False) as t:
        y = a * b
        t.watch(b)
        y = y + a * b
        assert t.watched_variables() == (b,)
    t.gradient(y, b)  # non-persistent: spent, what it watched stays readable
    assert t.watched_variables() == (b,)
    with vdev.GradientTape() as t2:
        got = from_another_thread(t2.watched_variables)
        a * 2.0
    assert got == (vdev.errors.InvalidArgumentError,
                   "GradientTape.watched_variables: the tape is recording on another thread; "
                   "only that thread may list what it watches")
    assert t2.watched_variables() == (a,)


def test_watching_an_int_variable_warns(caplog):
    i = vdev.Variable(np.array([1, 2], np.int32))
    w = vdev.Variable([1.0, 2.0])
    with caplog.at_level(logging.WARNING, logger="vdev"):
        with vdev.GradientTape() as tape:
            tape.watch([w, i])
            loss = vdev.reduce_sum(w * w)
    assert [r.getMessage() for r in caplog.records] == [
        "The dtype of the watched tensor must be floating (e.g. vdev.float32), got int32"]
    gw, gi = tape.gradient(loss, [w, i])
    assert gw.numpy().tolist() == [2.0, 4.0] and gi is None  # TensorFlow: None


def test_a_non_trainable_variable_counts_from_its_watch():
    frozen = vdev.Variable([1.0, 2.0], trainable=False)
    w = vdev.Variable([1.0, 1.0])
    with vdev.GradientTape() as tape:
        a = vdev.reduce_sum(frozen * 3.0)  # not watched yet: not recorded
        tape.watch(frozen)
        loss = a + vdev.reduce_sum(frozen * frozen)
    assert tape.gradient(loss, frozen).numpy().tolist() == [2.0, 4.0]  # TensorFlow: 2 frozen
    with vdev.GradientTape(persistent=True) as tape:
        h = frozen * 2.0  # from an unwatched variable alone: a constant
        loss = vdev.reduce_sum(h * w)
    gw, gh, gf = tape.gradient(loss, [w, h, frozen])
    assert gw.numpy().tolist() == [2.0, 4.0] and gh is None and gf is None
    assert tape.watched_variables() == (w,)


def test_a_persistent_tape_does_not_keep_non_trainable_variables_alive():
    """A tape ignores the non-trainable Variables that exist when it begins;
    it does not hold them: one deleted while a persistent tape lives gives
    its memory back at once (the tape held every one until it was freed)."""
    E = vdev.config.experimental
    with vdev.device("CPU:0"):
        w = vdev.Variable([1.0, 2.0])
        frozen = vdev.Variable(np.zeros((512, 512), np.float32), trainable=False)
    with vdev.GradientTape(persistent=True) as tape:
        loss = vdev.reduce_sum(w * w)
    held = E.get_memory_info("CPU:0")["current"]
    del frozen
    assert E.get_memory_info("CPU:0")["current"] == held - 512 * 512 * 4
    assert tape.gradient(loss, w).numpy().tolist() == [2.0, 4.0]


def test_trainable_changed_after_construction_counts_at_the_next_tape():
    """A Variable's trainable flag set after it was made decides, as one
    given at construction, whether the next tape watches it when read (the
    tape walks a registry of the non-trainable ones, kept by the setter)."""
    a = vdev.Variable([1.0, 2.0])
    b = vdev.Variable([3.0, 4.0], trainable=False)
    a.trainable = False
    b.trainable = True
    with vdev.GradientTape(persistent=True) as tape:
        ha = a * 2.0  # a: not watched, so a constant to the tape
        hb = b * 2.0
        loss = vdev.reduce_sum(ha * ha) + vdev.reduce_sum(hb * hb)
    ga, gb, gha = tape.gradient(loss, [a, b, ha])
    assert ga is None and gha is None
    assert gb.numpy().tolist() == [24.0, 32.0]  # d/db of sum(4 b^2) = 8 b
    a.trainable = True
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(a * a)
    assert tape.gradient(loss, a).numpy().tolist() == [2.0, 4.0]
