"""Keras 2.11's ModelCheckpoint, ReduceLROnPlateau, LearningRateScheduler,
CSVLogger, TerminateOnNaN and LambdaCallback in fit, and model.save /
vdev.models.load_model: files, messages, warnings and the learning rates
as Keras's rules give them; a loaded model predicting the same and training
on as the saved one, loss for loss; the errors in their words."""
import logging
import os

import numpy as np
import pytest

import vdev
from vdev import callbacks, layers

rng = np.random.default_rng(20261217)
f32 = np.float32


def regression(n=32):
    x = rng.uniform(-1, 1, (n, 4)).astype(f32)
    return x, x.sum(1, keepdims=True)


def model(lr=0.01, seed=1):
    m = vdev.models.Sequential([vdev.Input((4,)), layers.Dense(8, activation="relu", seed=seed),
                                layers.Dense(1, seed=seed + 1)])
    m.compile(vdev.optimizers.Adam(lr), "mse", metrics=["mae"])
    return m


def fixed(name, values):
    """A callback that sets logs[name] to values[epoch] (given first, it is
    what the callbacks after it see)."""
    def set_it(epoch, logs):
        logs[name] = values[epoch]
    return callbacks.LambdaCallback(on_epoch_end=set_it)


def test_model_checkpoint(tmp_path, capsys, caplog):
    x, y = regression()
    m = model()
    every = callbacks.ModelCheckpoint(str(tmp_path / "w-{epoch:02d}-{loss:.2f}"),
                                      save_weights_only=True)
    best = callbacks.ModelCheckpoint(str(tmp_path / "best"), monitor="val_loss", verbose=1,
                                     save_best_only=True)
    m.fit(x, y, epochs=4, callbacks=[fixed("val_loss", [3.0, 2.0, 2.5, 1.0]), every, best],
          verbose=0)
    files = sorted(os.listdir(tmp_path))
    assert [f[:4] for f in files if f.startswith("w-")] == ["w-01", "w-02", "w-03", "w-04"]
    out = capsys.readouterr().out
    assert out.count("\n") == 8  # each message starts with a newline, as Keras's
    assert "Epoch 1: val_loss improved from inf to 3.00000, saving model to %s" % (
        tmp_path / "best") in out
    assert "Epoch 3: val_loss did not improve from 2.00000" in out
    assert "Epoch 4: val_loss improved from 2.00000 to 1.00000" in out
    # the best file is a whole model; the weights files load into one
    again = vdev.models.load_model(str(tmp_path / "best"))
    np.testing.assert_allclose(again.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6)
    other = model(seed=5)
    other.load_weights(str(tmp_path / [f for f in files if f.startswith("w-04")][0]))
    np.testing.assert_array_equal(other.predict(x, verbose=0), m.predict(x, verbose=0))
    # every 3 batches; a missing monitor is Keras's warning
    by_batch = callbacks.ModelCheckpoint(str(tmp_path / "b-{epoch}-{batch}"), save_freq=3,
                                         save_weights_only=True)
    missing = callbacks.ModelCheckpoint(str(tmp_path / "never"), monitor="auc",
                                        save_best_only=True)
    with caplog.at_level(logging.WARNING, logger="vdev"):
        m.fit(x, y, batch_size=8, epochs=2, callbacks=[by_batch, missing], verbose=0)
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("b-")) == ["b-1-3", "b-2-2"]
    assert "Can save best model only with auc available, skipping." in caplog.text
    assert not (tmp_path / "never").exists()
    with pytest.raises(ValueError) as e:
        callbacks.ModelCheckpoint("x", save_freq="batch")
    assert str(e.value) == ("Unrecognized save_freq: batch. Expected save_freq are 'epoch' or "
                            "integer")


def test_learning_rate_callbacks(capsys):
    x, y = regression()
    m = model(lr=0.1)
    plateau = callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=2, cooldown=1,
                                          min_lr=0.02, verbose=1)
    seen = []
    track = callbacks.LambdaCallback(
        on_epoch_end=lambda e, logs: seen.append(float(m.optimizer.learning_rate)))
    h = m.fit(x, y, epochs=8, verbose=0,
              callbacks=[fixed("val_loss", [1.0] * 8), plateau, track]).history
    # Keras's rule: best at epoch 0; waits 1, 2 -> halve at epoch 2, cooldown 1; epoch 3
    # ends the cooldown and waits 1 (the same epoch), epoch 4 halves; epoch 6 would halve
    # to 0.0125, min_lr keeps 0.02
    np.testing.assert_allclose(seen, [0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.02, 0.02],
                               rtol=1e-6)
    np.testing.assert_allclose(h["lr"], [0.1, 0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.02],
                               rtol=1e-6)  # logged before the epoch's reduction, as Keras's
    assert "Epoch 3: ReduceLROnPlateau reducing learning rate to 0.05" in capsys.readouterr().out
    with pytest.raises(ValueError) as e:
        callbacks.ReduceLROnPlateau(factor=1.0)
    assert str(e.value) == "ReduceLROnPlateau does not support a factor >= 1.0. Got 1.0"
    # LearningRateScheduler: (epoch, lr), or the older (epoch)
    sched = callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5 if epoch else lr)
    h = m.fit(x, y, epochs=3, verbose=0, callbacks=[sched]).history
    np.testing.assert_allclose(h["lr"], [0.02, 0.01, 0.005], rtol=1e-6)  # from the plateau's
    old = callbacks.LearningRateScheduler(lambda epoch: 0.001 * (epoch + 1))
    h = m.fit(x, y, epochs=2, verbose=0, callbacks=[old]).history
    np.testing.assert_allclose(h["lr"], [0.001, 0.002], rtol=1e-6)
    with pytest.raises(ValueError) as e:
        m.fit(x, y, epochs=1, verbose=0,
              callbacks=[callbacks.LearningRateScheduler(lambda epoch: 1)])
    assert str(e.value) == 'The output of the "schedule" function should be float. Got: 1'


def test_csv_logger_terminate_and_lambda(tmp_path, capsys):
    x, y = regression()
    m = model()
    path = tmp_path / "log.csv"
    m.fit(x, y, epochs=2, verbose=0, validation_split=0.25,
          callbacks=[callbacks.CSVLogger(str(path))])
    lines = path.read_text().splitlines()
    assert lines[0] == "epoch,loss,mae,val_loss,val_mae" and len(lines) == 3
    assert lines[1].startswith("0,") and lines[2].startswith("1,")
    m.fit(x, y, epochs=1, verbose=0, validation_split=0.25,
          callbacks=[callbacks.CSVLogger(str(path), separator=";", append=True)])
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and lines[3].startswith("0;")  # no second header
    # TerminateOnNaN: a NaN target makes the loss NaN at the first batch
    ynan = y.copy()
    ynan[0] = np.nan
    h = m.fit(x, ynan, batch_size=8, epochs=3, verbose=0, shuffle=False,
              callbacks=[callbacks.TerminateOnNaN()]).history
    assert len(h["loss"]) == 1 and np.isnan(h["loss"][0])
    assert "Batch 0: Invalid loss, terminating training" in capsys.readouterr().out
    calls = []
    lam = callbacks.LambdaCallback(on_train_begin=lambda logs: calls.append("begin"),
                                   on_batch_end=lambda b, logs: calls.append(b),
                                   on_train_end=lambda logs: calls.append("end"))
    m.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[lam])
    assert calls == ["begin", 0, 1, 0, 1, "end"]


def test_save_and_load_model(tmp_path, caplog):
    x, y = regression()
    m = model()
    m.fit(x, y, epochs=2, verbose=0)
    path = str(tmp_path / "model.keras")
    m.save(path)
    again = vdev.models.load_model(path)
    assert isinstance(again, vdev.models.Sequential)
    np.testing.assert_array_equal(again.predict(x, verbose=0), m.predict(x, verbose=0))
    assert type(again.optimizer) is vdev.optimizers.Adam
    assert again.optimizer.get_config() == m.optimizer.get_config()
    assert int(again.optimizer.iterations) == int(m.optimizer.iterations) == 2
    assert again.evaluate(x, y, verbose=0) == m.evaluate(x, y, verbose=0)
    h1 = m.fit(x, y, epochs=2, shuffle=False, verbose=0).history
    h2 = again.fit(x, y, epochs=2, shuffle=False, verbose=0).history
    assert h1 == h2  # the optimizer's state too: training goes on bit for bit
    # a functional model with an LSTM and a loss object; without the optimizer
    inp = vdev.Input((5,), dtype="int32")
    h = layers.LSTM(3, seed=2)(layers.Embedding(9, 4, mask_zero=True, seed=1)(inp))
    f = vdev.Model(inp, layers.Dense(2, seed=3)(h))
    f.compile("sgd", vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    ids = rng.integers(0, 9, (6, 5)).astype(np.int32)
    f.save(str(tmp_path / "f"), include_optimizer=False)
    g = vdev.models.load_model(str(tmp_path / "f"))
    np.testing.assert_array_equal(g.predict(ids, verbose=0), f.predict(ids, verbose=0))
    assert g.loss.from_logits is True and int(g.optimizer.iterations) == 0
    assert not getattr(vdev.models.load_model(str(tmp_path / "f"), compile=False),
                       "_is_compiled", False)
    # what cannot be written or read
    lam_dense = vdev.models.Sequential([vdev.Input((4,)), layers.Dense(1),
                                        layers.Lambda(lambda t: t * 2)])
    with pytest.raises(ValueError) as e:
        lam_dense.save(str(tmp_path / "lam"))
    assert str(e.value).startswith("vdev's model.save writes the model's config as JSON")
    m.save_weights(str(tmp_path / "weights"))
    with pytest.raises(ValueError) as e:
        vdev.models.load_model(str(tmp_path / "weights"))
    assert "holds no model config" in str(e.value)
    callable_loss = model()
    callable_loss.compile("adam", lambda yt, yp: vdev.reduce_mean((yt - yp) * (yt - yp)))
    with caplog.at_level(logging.WARNING, logger="vdev"):
        callable_loss.save(str(tmp_path / "c"))
    assert "the compile arguments are not written" in caplog.text
    assert not getattr(vdev.models.load_model(str(tmp_path / "c")), "_is_compiled", False)
    with pytest.raises(FileExistsError):
        m.save(path, overwrite=False)
