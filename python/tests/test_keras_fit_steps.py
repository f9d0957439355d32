"""fit(..., steps_per_epoch=N) on arrays, as Keras 2.11 runs it (its
TensorLikeDataAdapter builds one stream of epochs - initial_epoch passes over
the rows, which its DataHandler never restarts, should_recreate_iterator
being False for arrays): which rows each epoch sees (an epoch goes on where
the last one stopped), when "Your input ran out of data" is logged and the
count of batches it names ((epochs - initial_epoch) * steps), the callbacks
of the step that finds no batch (begun, never ended), and the epoch that
finds none at all (it still ends, with the previous epoch's logs, as Keras's
`logs` carries over). The rows a step trains on are read by the loss, whose
targets hold each row's index. Three simulated 16 GiB GPUs (conftest)."""
import logging

import numpy as np

import vdev

RAN_OUT = ("Your input ran out of data; interrupting training. Make sure that your dataset or "
           "generator can generate at least `steps_per_epoch * epochs` batches (in this case, "
           "%d batches). You may need to use the repeat() function when building your "
           "dataset.")


def _data(n):
    x = np.random.default_rng(0).standard_normal((n, 5)).astype(np.float32)
    y = np.zeros((n, 2), np.float32)
    y[:, 0] = np.arange(n)  # each row's index, read back by the loss
    return x, y


class _Recorder(vdev.callbacks.Callback):
    """The hooks fit calls, in order, and the rows each step trained on."""

    def __init__(self):
        super().__init__()
        self.calls, self.rows, self.in_step = [], [], False

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch))
        self.rows.append([])

    def on_train_batch_begin(self, batch, logs=None):
        self.calls.append(("begin", batch))
        self.in_step = True

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("end", batch))
        self.in_step = False

    def on_test_begin(self, logs=None):
        self.in_step = False  # a step that found no batch ends no step

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch))


def _fit(n, **kw):
    """(history, [[rows of each step] per epoch], the recorder, the model)."""
    x, y = _data(n)
    mse = vdev.losses.MeanSquaredError()
    rec = _Recorder()

    def loss(yt, yp):
        if rec.in_step:  # a training step's, not validation's
            rec.rows[-1].append([int(r) for r in np.asarray(yt)[:, 0]])
        return mse(yt, yp)

    m = vdev.models.MLP([5, 4, 2], seed=3)
    m.compile(vdev.optimizers.SGD(0.0), loss)  # learning rate 0: the weights stay put
    h = m.fit(x, y, verbose=0, callbacks=[rec], **kw)
    return h, rec.rows, rec, m


def test_ten_rows_batch_4_three_steps_two_epochs(caplog):
    """The example: 3 batches a pass, 2 passes, 3 steps an epoch: each
    epoch is one whole pass (the second epoch, the second pass: rows 0-3,
    4-7, 8-9 again), 6 batches taken of 6: no warning."""
    with caplog.at_level(logging.WARNING, logger="vdev"):
        h, rows, _, m = _fit(10, batch_size=4, steps_per_epoch=3, epochs=2, shuffle=False)
    assert rows == [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]] * 2
    assert h.epoch == [0, 1] and m.optimizer.iterations == 6
    assert "ran out of data" not in caplog.text


def test_ten_rows_shuffled_each_epoch_is_a_pass_of_its_own_order(caplog):
    with caplog.at_level(logging.WARNING, logger="vdev"):
        _, rows, _, _ = _fit(10, batch_size=4, steps_per_epoch=3, epochs=2, shuffle=True)
    for epoch in rows:
        assert [len(b) for b in epoch] == [4, 4, 2]
        assert sorted(sum(epoch, [])) == list(range(10))
    assert "ran out of data" not in caplog.text


def test_an_epoch_goes_on_where_the_last_one_stopped(caplog):
    """2 steps an epoch over passes of 3 batches: the second epoch starts
    with the first pass's last batch; 6 batches taken of 9."""
    with caplog.at_level(logging.WARNING, logger="vdev"):
        h, rows, _, _ = _fit(10, batch_size=4, steps_per_epoch=2, epochs=3, shuffle=False)
    a, b, c = [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]
    assert rows == [[a, b], [c, a], [b, c]]
    assert h.epoch == [0, 1, 2] and "ran out of data" not in caplog.text


def test_running_out_counts_the_epochs_after_initial_epoch(caplog):
    """initial_epoch=1, epochs=3: 2 passes of 2 batches for 2 epochs of 3
    steps; the second epoch takes 1 and finds none: Keras's warning counts
    (3 - 1) * 3 = 6 batches, the step that found none begun and not ended,
    the epoch still ended, then the fit ends."""
    with caplog.at_level(logging.WARNING, logger="vdev"):
        h, rows, rec, m = _fit(16, batch_size=8, steps_per_epoch=3, epochs=3, initial_epoch=1,
                               shuffle=False)
    assert caplog.text.count("ran out of data") == 1
    assert RAN_OUT % 6 in caplog.text
    assert m.optimizer.iterations == 4 and h.epoch == [1, 2]
    first, second = list(range(8)), list(range(8, 16))
    assert rows == [[first, second, first], [second]]
    assert rec.calls == [("epoch_begin", 1), ("begin", 0), ("end", 0), ("begin", 1), ("end", 1),
                         ("begin", 2), ("end", 2), ("epoch_end", 1),
                         ("epoch_begin", 2), ("begin", 0), ("end", 0), ("begin", 1),
                         ("epoch_end", 2)]


def test_an_epoch_that_finds_no_batch_ends_with_the_last_logs(caplog):
    """8 rows, batches of 4, 4 steps, 2 epochs: the first epoch takes both
    passes; the second finds nothing: warned, and ended with the first
    epoch's logs (Keras's `logs` carries over), its validation run."""
    x, y = _data(8)
    with caplog.at_level(logging.WARNING, logger="vdev"):
        h, rows, rec, m = _fit(8, batch_size=4, steps_per_epoch=4, epochs=2, shuffle=False,
                               validation_data=(x, y))
    assert RAN_OUT % 8 in caplog.text
    assert m.optimizer.iterations == 4 and h.epoch == [0, 1]
    assert rows == [[[0, 1, 2, 3], [4, 5, 6, 7]] * 2, []]
    assert h.history["loss"][1] == h.history["loss"][0]
    assert h.history["val_loss"][1] == h.history["val_loss"][0]
    assert rec.calls[-3:] == [("epoch_begin", 1), ("begin", 0), ("epoch_end", 1)]
