"""Keras's compile / fit / evaluate / predict, callbacks and save_weights /
load_weights on vdev's models (vdev/_fit.py, vdev/callbacks.py): a small MLP
and a small conv net trained with fit on synthetic data give the very bits
of a hand-written GradientTape loop over the same batches in the same order
(same ops, same order: bit for bit, not to rounding), the History holds the
epoch means of that loop's losses and metrics, validation takes the last
rows before shuffling, evaluate and predict give the model's own calls,
weights saved by position restore into a fresh model of other names, fit
under a MirroredStrategy equals a hand-written strategy.run loop bit for bit
(and one device's fit to rounding), and every refused argument has its exact
text. Three simulated 16 GiB GPUs (conftest)."""
import logging
import re

import numpy as np
import pytest

import vdev
from vdev import layers

N = 70  # two full batches of 32 and a last one of 6, or 4 of 16 and one of 6


def bits(v):
    return np.asarray(v.numpy()).tobytes()


def regression(n=N, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    y = (x @ rng.standard_normal((5, 2)) + 0.1).astype(np.float32)
    return x, y


def images(n=N, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 6, 6, 2)).astype(np.float32)
    labels = (x[:, :, :, 0].mean(axis=(1, 2)) > 0).astype(np.int32) + (
        x[:, :, :, 1].mean(axis=(1, 2)) > 0).astype(np.int32)
    return x, labels


def mlp(seed=3):
    return vdev.models.MLP([5, 16, 2], seed=seed)


def cnn(softmax=False):
    return vdev.models.Sequential([
        layers.Conv2D(4, 3, padding="same", activation="relu", seed=21, input_shape=(6, 6, 2)),
        layers.MaxPooling2D(), layers.Flatten(),
        layers.Dense(3, seed=22, activation="softmax" if softmax else None)])


def tape_loop(model, opt, loss_fn, x, y, batch_size, epochs, order_of):
    """The loop fit runs, written out: per epoch, the rows in order_of(e),
    batches of batch_size (the last one smaller), loss under a tape,
    apply_gradients; the epoch means of the batch losses weighted by rows."""
    means = []
    for e in range(epochs):
        order = order_of(e)
        total = 0.0
        for b in range(0, len(order), batch_size):
            idx = order[b:b + batch_size]
            v = model.trainable_variables
            with vdev.GradientTape() as tape:
                loss = loss_fn(y[idx], model(x[idx]))
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
            total += float(loss) * len(idx)
        means.append(total / len(order))
    return means


# ---- fit is the GradientTape loop ----

def test_an_mlp_fit_with_shuffling_is_the_tape_loop_bit_for_bit():
    x, y = regression()
    a, b = mlp(), mlp()
    a.compile(vdev.optimizers.SGD(0.05), vdev.losses.MeanSquaredError())
    vdev.random.set_seed(7)  # fit's one draw from the counter is 7: its permutation seed
    h = a.fit(x, y, batch_size=16, epochs=3, verbose=0)
    want = tape_loop(b, vdev.optimizers.SGD(0.05), vdev.losses.MeanSquaredError(), x, y, 16, 3,
                     lambda e: np.random.default_rng([7, e]).permutation(N))
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    assert h.history == {"loss": want}
    assert want[-1] < want[0]
    assert h.epoch == [0, 1, 2] and a.history is h
    assert a.optimizer.iterations == 3 * 5  # ceil(70 / 16) steps an epoch: the 6 rows too


def test_a_conv_net_fit_without_shuffling_is_the_tape_loop_bit_for_bit():
    x, labels = images()
    a, b = cnn(), cnn()
    ce = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
    a.compile(vdev.optimizers.Adam(0.01), ce, metrics=["accuracy"])
    h = a.fit(x, labels, epochs=4, shuffle=False, verbose=0)  # batch_size None: 32
    want = tape_loop(b, vdev.optimizers.Adam(0.01), ce, x, labels, 32, 4, lambda e: np.arange(N))
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    assert h.history["loss"] == want and want[-1] < want[0]
    assert list(h.history) == ["loss", "accuracy"]
    # the last epoch's accuracy: of the outputs before each of its 3 updates
    assert 0 <= h.history["accuracy"][-1] <= 1


def test_a_string_cross_entropy_takes_the_softmax_layers_logits_as_keras():
    x, labels = images()
    onehot = np.eye(3, dtype=np.float32)[labels]
    a, b = cnn(softmax=True), cnn(softmax=False)
    a.compile("adam", "categorical_crossentropy", metrics=["accuracy"])
    h = a.fit(x, onehot, batch_size=20, epochs=2, shuffle=False, verbose=0)
    want = tape_loop(b, vdev.optimizers.Adam(),
                     vdev.losses.CategoricalCrossentropy(from_logits=True), x, onehot, 20, 2,
                     lambda e: np.arange(N))
    assert h.history["loss"] == want
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    p = a.predict(x, verbose=0)  # the softmax, as the model gives it
    assert np.array_equal(p, vdev.nn.softmax(b(x)).numpy())
    np.testing.assert_allclose(p.sum(axis=1), 1, rtol=1e-6)


# ---- History, validation, evaluate, predict ----

def test_validation_split_takes_the_last_rows_before_shuffling():
    x, y = regression(100)
    a, b = mlp(), mlp()
    for m in (a, b):
        m.compile(vdev.optimizers.SGD(0.05), "mse", metrics=["mae", "mse"])
    vdev.random.set_seed(11)
    h = a.fit(x, y, batch_size=16, epochs=3, validation_split=0.2, verbose=0)
    vdev.random.set_seed(11)
    b.fit(x[:80], y[:80], batch_size=16, epochs=3, verbose=0)
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)  # trained on the first 80 rows only
    assert list(h.history) == ["loss", "mae", "mse", "val_loss", "val_mae", "val_mse"]
    assert all(len(v) == 3 for v in h.history.values())
    # the last epoch's validation is evaluate on the last 20 rows with those weights
    ev = a.evaluate(x[80:], y[80:], batch_size=16, verbose=0, return_dict=True)
    assert ev == {k[4:]: v[-1] for k, v in h.history.items() if k.startswith("val_")}
    # MeanSquaredError's loss is the mse metric (to float64 summing)
    assert h.history["val_loss"][-1] == pytest.approx(h.history["val_mse"][-1], rel=1e-6)


def test_validation_data_and_validation_freq():
    x, y = regression()
    keys = []

    class Keys(vdev.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            keys.append(sorted(logs))
    for freq, validated in ((2, [1, 3]), ([1, 4], [0, 3])):
        keys.clear()
        m = mlp()
        m.compile("sgd", "mse")
        h = m.fit(x, y, epochs=4, validation_data=(x[:10], y[:10]), validation_freq=freq,
                  callbacks=[Keys()], verbose=0)
        # Keras's logs: val_ keys on the epochs validated only; History keeps what they had
        assert keys == [["loss", "val_loss"] if e in validated else ["loss"] for e in range(4)]
        assert len(h.history["loss"]) == 4 and len(h.history["val_loss"]) == 2
    # the last validation is evaluate with the final weights, on (x[:10], y[:10])
    assert h.history["val_loss"][-1] == m.evaluate(x[:10], y[:10], verbose=0)


def test_evaluate_and_predict_are_the_models_own_calls():
    x, labels = images(50)
    m = cnn()
    m.compile("adam", vdev.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    m.fit(x, labels, epochs=2, verbose=0)
    p = m.predict(x, batch_size=7, verbose=0)
    assert isinstance(p, np.ndarray) and p.dtype == np.float32 and p.shape == (50, 3)
    assert np.array_equal(p, np.concatenate([m(x[b:b + 7]).numpy() for b in range(0, 50, 7)]))
    assert np.array_equal(m.predict(x, batch_size=50, verbose=0), m(x).numpy())
    ce = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
    batches = [(x[b:b + 32], labels[b:b + 32]) for b in (0, 32)]
    loss = sum(float(ce(yb, m(xb))) * len(yb) for xb, yb in batches) / 50
    acc = float(np.mean(np.argmax(m(x).numpy(), axis=1) == labels))
    assert m.evaluate(x, labels, verbose=0) == [loss, acc]
    assert m.evaluate(x, labels, verbose=0, return_dict=True) == {"loss": loss, "accuracy": acc}
    m.compile("adam", ce)  # no metrics: the loss alone, a float
    assert m.evaluate(x, labels, verbose=0) == loss
    # vdev tensors are taken as arrays
    assert np.array_equal(m.predict(vdev.constant(x), verbose=0), m.predict(x, verbose=0))


@pytest.mark.parametrize("kind", ["binary", "sparse", "categorical"])
def test_accuracy_is_the_one_keras_picks_from_the_shapes(kind):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 5)).astype(np.float32)
    units = 1 if kind == "binary" else 3
    m = vdev.models.Sequential([layers.Dense(units, input_dim=5, seed=9)])
    out = m(x).numpy()
    if kind == "binary":
        y = (rng.uniform(size=(40, 1)) > 0.5).astype(np.float32)
        want = np.mean(y == (out > 0.5))
        loss = "mse"
    elif kind == "sparse":
        y = rng.integers(0, 3, (40, 1)).astype(np.int32)  # [N, 1] labels beside 3 classes
        want = np.mean(y[:, 0] == np.argmax(out, axis=1))
        loss = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 40)]
        want = np.mean(np.argmax(y, axis=1) == np.argmax(out, axis=1))
        loss = vdev.losses.CategoricalCrossentropy(from_logits=True)
    m.compile("sgd", loss, metrics=["acc"])
    assert m.evaluate(x, y, batch_size=40, verbose=0, return_dict=True)["acc"] == want


def test_shuffle_false_and_a_seed_make_fit_reproducible():
    x, y = regression()

    def run(shuffle, seed):
        m = mlp()
        m.compile(vdev.optimizers.Adam(0.01), "mse")
        vdev.random.set_seed(seed)
        h = m.fit(x, y, batch_size=8, epochs=2, shuffle=shuffle, verbose=0)
        return [bits(v) for v in m.weights], h.history["loss"]

    assert run(False, 1) == run(False, 2)  # no shuffling: the seed plays no part
    assert run(True, 1) == run(True, 1)
    assert run(True, 1)[0] != run(True, 2)[0]


def test_initial_epoch_and_steps_per_epoch_as_keras():
    x, y = regression(32)
    m = mlp()
    m.compile("sgd", "mse")
    h = m.fit(x, y, batch_size=8, epochs=4, initial_epoch=2, verbose=0)
    assert h.epoch == [2, 3] and m.optimizer.iterations == 2 * 4
    # steps_per_epoch: an epoch goes on where the last stopped (4 batches a pass, 2 passes)
    a, b = mlp(), mlp()
    a.compile(vdev.optimizers.SGD(0.1), "mse")
    b.compile(vdev.optimizers.SGD(0.1), "mse")
    a.fit(x, y, batch_size=8, epochs=2, steps_per_epoch=3, shuffle=False, verbose=0)
    b.fit(np.concatenate([x, x])[:48], np.concatenate([y, y])[:48], batch_size=8, epochs=1,
          shuffle=False, verbose=0)
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)


def test_running_out_of_data_with_steps_per_epoch_warns_and_stops(caplog):
    x, y = regression(16)
    m = mlp()
    m.compile("sgd", "mse")
    with caplog.at_level(logging.WARNING, logger="vdev"):
        h = m.fit(x, y, batch_size=8, epochs=2, steps_per_epoch=3, verbose=0)
    # 2 passes of 2 batches: 3 in the first epoch, 1 in the second, then none left
    assert m.optimizer.iterations == 4 and h.epoch == [0, 1]
    assert ("Your input ran out of data; interrupting training. Make sure that your dataset "
            "or generator can generate at least `steps_per_epoch * epochs` batches (in this "
            "case, 6 batches). You may need to use the repeat() function when building your "
            "dataset.") in caplog.text


def test_steps_per_epoch_without_batch_size_infers_it():
    x, y = regression(20)
    m = mlp()
    m.compile("sgd", "mse")
    calls = []

    class Sizes(vdev.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            calls.append(batch)
    m.fit(x, y, steps_per_epoch=3, verbose=0, callbacks=[Sizes()])
    assert calls == [0, 1, 2]  # batch_size ceil(20 / 3) = 7: 7, 7, 6


# ---- printing ----

def test_verbose_0_prints_nothing_2_one_line_an_epoch_1_the_finished_bar(capsys):
    x, y = regression()
    m = mlp()
    m.compile("sgd", "mse", metrics=["mae"])
    m.fit(x, y, epochs=2, verbose=0, validation_split=0.1)
    m.evaluate(x, y, verbose=0)
    m.predict(x, verbose=0)
    assert capsys.readouterr().out == ""
    m.fit(x, y, epochs=2, verbose=2, validation_split=0.1)
    lines = capsys.readouterr().out.splitlines()
    num = r"\d+\.\d{4}(e[-+]\d+)?"
    line = (r"2/2 - \d+s - loss: %s - mae: %s - val_loss: %s - val_mae: %s - "
            r"\d+(s|ms|us)/epoch - \d+(s|ms|us)/step$") % (num, num, num, num)
    assert lines[0] == "Epoch 1/2" and lines[2] == "Epoch 2/2" and len(lines) == 4
    assert re.match(line, lines[1]) and re.match(line, lines[3]), lines
    m.fit(x, y, epochs=1, verbose="auto")  # 1: one epoch, no "Epoch 1/1"
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and re.match(
        r"3/3 \[={30}\] - \d+s \d+(s|ms|us)/step - loss: %s - mae: %s$" % (num, num), out[0])
    m.evaluate(x, y, verbose=2)
    assert re.match(r"3/3 - \d+s - loss: %s - mae: %s - " % (num, num),
                    capsys.readouterr().out)
    m.predict(x, batch_size=70, verbose=1)
    assert re.match(r"1/1 \[={30}\] - \d+s \d+(s|ms|us)/step\n$", capsys.readouterr().out)


# ---- callbacks ----

def test_callbacks_see_keras_hooks_in_keras_order_and_can_stop_training():
    x, y = regression(20)
    m = mlp()
    m.compile("sgd", "mse")
    seen = []

    class Rec(vdev.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.append(("train_begin", self.params))

        def on_epoch_end(self, epoch, logs=None):
            # before History: model.history is still not this epoch's
            seen.append(("epoch_end", epoch, sorted(logs)))

        def on_batch_end(self, batch, logs=None):  # Keras's older name is called too
            seen.append(("batch_end", batch, sorted(logs)))
            if batch == 1 and len([s for s in seen if s[0] == "epoch_end"]) == 1:
                self.model.stop_training = True

        def on_test_end(self, logs=None):
            seen.append(("test_end",))

    h = m.fit(x, y, batch_size=8, epochs=5, validation_data=(x, y), callbacks=[Rec()],
              verbose=0)
    assert seen[0] == ("train_begin", {"verbose": 0, "epochs": 5, "steps": 3})
    assert seen[1:6] == [("batch_end", 0, ["loss"]), ("batch_end", 1, ["loss"]),
                         ("batch_end", 2, ["loss"]), ("test_end",),
                         ("epoch_end", 0, ["loss", "val_loss"])]
    # stopped after batch 1 of the second epoch: that epoch still ends and is recorded
    assert seen[6:] == [("batch_end", 0, ["loss"]), ("batch_end", 1, ["loss"]),
                        ("test_end",), ("epoch_end", 1, ["loss", "val_loss"])]
    assert h.epoch == [0, 1] and m.optimizer.iterations == 5


def test_early_stopping_restores_the_best_weights(capsys):
    x, y = regression()
    m = mlp()
    m.compile(vdev.optimizers.SGD(0.05), "mse")
    best = {}

    class Keep(vdev.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            best[epoch] = (logs["val_loss"], [w.copy() for w in self.model.get_weights()])

    # val_loss on shuffled targets: no epoch beats another for long
    rng = np.random.default_rng(2)
    val = (x[:20], rng.permutation(y[:20]))
    es = vdev.callbacks.EarlyStopping(patience=2, restore_best_weights=True, verbose=1)
    h = m.fit(x, y, epochs=40, validation_data=val, callbacks=[Keep(), es], verbose=0)
    ran = h.epoch[-1]
    assert ran < 39 and es.stopped_epoch == ran
    b = min(best, key=lambda e: best[e][0])
    assert es.best_epoch == b and ran - b == 2
    for w, want in zip(m.get_weights(), best[b][1]):
        assert np.array_equal(w, want)
    assert capsys.readouterr().out == (
        "Restoring model weights from the end of the best epoch: %d.\n"
        "Epoch %d: early stopping\n" % (b + 1, ran + 1))


def test_early_stopping_modes_and_a_missing_monitor(caplog):
    E = vdev.callbacks.EarlyStopping
    assert E(monitor="val_accuracy").monitor_op is np.greater
    assert E(monitor="loss").monitor_op is np.less
    assert E(monitor="val_acc", min_delta=0.1).min_delta == 0.1
    assert E(monitor="loss", min_delta=0.1).min_delta == -0.1
    with caplog.at_level(logging.WARNING, logger="vdev"):
        assert E(mode="up").monitor_op is np.less
        e = E(monitor="val_loss")
        e.on_train_begin()
        e.on_epoch_end(0, {"loss": 1.0})
    assert "EarlyStopping mode up is unknown, fallback to auto mode." in caplog.text
    assert ("Early stopping conditioned on metric `val_loss` which is not available. Available "
            "metrics are: loss") in caplog.text


# ---- save_weights / load_weights ----

def test_weights_restore_by_position_into_a_fresh_model(tmp_path):
    x, labels = images()
    a = cnn()
    a.compile("adam", vdev.losses.SparseCategoricalCrossentropy(from_logits=True))
    a.fit(x, labels, epochs=1, verbose=0)
    path = str(tmp_path / "w.safetensors")
    a.save_weights(path)
    b = cnn()  # other names (conv2d_1, dense_1, ...) and other initial weights
    assert [v.name for v in a.weights] != [v.name for v in b.weights]
    assert bits(a.weights[0]) != bits(b.weights[0])
    assert b.load_weights(path) is None
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    assert np.array_equal(a.predict(x, verbose=0), b.predict(x, verbose=0))
    m = mlp(seed=4)
    m.save_weights(tmp_path / "mlp.safetensors")  # a path object
    m2 = mlp(seed=5)
    m2.load_weights(tmp_path / "mlp.safetensors")
    assert [bits(v) for v in m.weights] == [bits(v) for v in m2.weights]


def test_a_file_of_another_architecture_is_refused_and_changes_nothing(tmp_path):
    path = str(tmp_path / "w.safetensors")
    vdev.models.MLP([5, 16, 2], seed=1).save_weights(path)
    m = vdev.models.MLP([5, 16, 3], seed=2)
    before = [bits(v) for v in m.weights]
    with pytest.raises(ValueError) as e:
        m.load_weights(path)
    assert str(e.value) == ("Shape mismatch in weight #2 (named dense_1/kernel). Weight expects "
                            "shape (16, 3). Received saved weight with shape (16, 2)")
    deeper = vdev.models.MLP([5, 16, 16, 2], seed=2)
    with pytest.raises(ValueError) as e:
        deeper.load_weights(path)
    assert str(e.value) == ("Weight count mismatch when loading weights from file. Model "
                            "expected 6 weights, found 4 saved weights.")
    vdev.train.save_checkpoint(str(tmp_path / "other.safetensors"), {"w": m.weights[0]})
    with pytest.raises(ValueError) as e:
        m.load_weights(str(tmp_path / "other.safetensors"))
    assert str(e.value) == ("Weight count mismatch when loading weights from file. Model "
                            "expected 4 weights, found 0 saved weights.")
    assert [bits(v) for v in m.weights] == before
    with pytest.raises(vdev.errors.NotFoundError):
        m.load_weights(str(tmp_path / "none.safetensors"))


def test_weight_file_errors(tmp_path):
    path = str(tmp_path / "w.safetensors")
    m = mlp()
    m.save_weights(path)
    with pytest.raises(FileExistsError) as e:
        m.save_weights(path, overwrite=False)
    assert str(e.value) == "%s exists and overwrite=False" % path
    unbuilt = vdev.models.Sequential([layers.Dense(2)])
    for call, what in ((unbuilt.save_weights, ""), (unbuilt.load_weights, ", then load")):
        with pytest.raises(ValueError) as e:
            call(path)
        assert str(e.value) == ("the model has no weights yet: build it first (give its first "
                                "layer input_shape or input_dim, or call it once)" + what)
    cases = [
        (lambda: m.save_weights(path, save_format="h5"),
         "vdev's save_weights takes save_format=None only, not 'h5': it writes vdev's "
         "checkpoint file (safetensors), whatever the file's suffix"),
        (lambda: m.save_weights(path, options=object()),
         "vdev's save_weights takes options=None only"),
        (lambda: m.load_weights(path, skip_mismatch=True),
         "When calling model.load_weights, skip_mismatch can only be set to True when by_name "
         "is True."),
        (lambda: m.load_weights(path, by_name=True),
         "vdev's load_weights takes by_name=False only: it restores by each weight's position "
         "in model.weights"),
        (lambda: m.load_weights(path, options=object()),
         "vdev's load_weights takes options=None only"),
    ]
    for call, text in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == text


# ---- MirroredStrategy ----

def test_fit_under_a_mirrored_strategy_is_its_strategy_run_loop():
    vdev.config.experimental.enable_op_determinism()
    x, labels = images(40)
    onehot = np.eye(3, dtype=np.float32)[labels]
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        a, b = cnn(), cnn()
        a.compile(vdev.optimizers.Adam(0.01),
                  vdev.losses.CategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        opt = vdev.optimizers.Adam(0.01)
    h = a.fit(x, onehot, batch_size=16, epochs=2, shuffle=False, verbose=0)
    ce = vdev.losses.CategoricalCrossentropy(from_logits=True, reduction="sum")
    want = []
    for e in range(2):
        total = 0.0
        for r in range(0, 40, 16):
            xb, yb = x[r:r + 16], onehot[r:r + 16]

            def step(xr, yr):
                with vdev.GradientTape() as tape:
                    loss = vdev.divide(ce(yr, b(xr)), float(len(xb)))
                v = b.trainable_variables
                opt.apply_gradients(zip(tape.gradient(loss, v), v))
                return loss
            per = s.run(step, args=(vdev.distribute.DistributedBatch(s, vdev.constant(xb)),
                                    vdev.distribute.DistributedBatch(s, vdev.constant(yb))))
            total += float(s.reduce("SUM", per, axis=None)) * len(xb)
        want.append(total / 40)
    assert h.history["loss"] == want and list(h.history) == ["loss", "accuracy"]
    for va, vb in zip(a.trainable_variables, b.trainable_variables):
        assert len({bits(c) for c in va.values}) == 1  # the replicas stay alike
        assert bits(va) == bits(vb)
    # one device's fit of the same model: the same to rounding (sums in another order)
    with vdev.device("GPU:2"):
        c = cnn()
    c.compile(vdev.optimizers.Adam(0.01), vdev.losses.CategoricalCrossentropy(from_logits=True))
    c.fit(x, onehot, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for va, vc in zip(a.weights, c.weights):
        np.testing.assert_allclose(va.numpy(), vc.numpy(), rtol=0, atol=1e-5)
    # evaluate and predict read replica 0's copy
    assert np.array_equal(a.predict(x, verbose=0), b.predict(x, verbose=0))


def test_fit_inside_the_scope_and_a_batch_smaller_than_the_replicas():
    x, y = regression(17)  # batches of 16 and 1: one replica gets no row
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        a, b = mlp(), mlp()
        a.compile("sgd", "mse")
        b.compile("sgd", "mse")
        # Keras's built-in loop may run in the scope, where a loss's mean is refused
        ha = a.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0,
                   validation_data=(x[:5], y[:5]))
    hb = b.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0,
               validation_data=(x[:5], y[:5]))
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    assert ha.history["loss"] == hb.history["loss"]
    # in the scope the validation's mean is the sum over the rows divided by them
    assert ha.history["val_loss"] == pytest.approx(hb.history["val_loss"], rel=1e-6)
    # a model made outside any scope trains on its own device when fit runs in one
    c, d = mlp(), mlp()
    c.compile("sgd", "mse")
    d.compile("sgd", "mse")
    with s.scope():
        c.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    d.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    for vc, vd in zip(c.weights, d.weights):
        assert not hasattr(vc, "values")
        np.testing.assert_allclose(vc.numpy(), vd.numpy(), rtol=1e-6, atol=1e-7)


def test_a_model_and_optimizer_of_different_scopes_are_refused():
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        m = mlp()
    with pytest.raises(ValueError) as e:
        m.compile(vdev.optimizers.SGD(), "mse")
    assert str(e.value).startswith(
        "the optimizer and the model were made under different strategies' scopes (model: "
        "MirroredStrategy(")
    m.compile("sgd", "mse")  # a string: made under the model's strategy
    assert m.optimizer._strategy is s
    with s.scope():
        m.compile(vdev.optimizers.SGD(), lambda y, p: vdev.reduce_mean(vdev.square(p - y)))
    with pytest.raises(ValueError) as e:
        m.fit(*regression(), verbose=0)
    assert str(e.value).startswith(
        "fit under a MirroredStrategy takes a vdev.losses object or string, not <function")


# ---- every refusal, in its words ----

def test_compile_refusals():
    m = mlp()
    cases = [
        (lambda: m.compile(loss="mse"), ValueError,
         "Unknown optimizer: 'rmsprop'. vdev's optimizers are 'sgd' and 'adam' (or a "
         "vdev.optimizers.SGD or Adam object); compile's default, 'rmsprop', is not one of them"),
        (lambda: m.compile("adagrad", "mse"), ValueError,
         "Unknown optimizer: 'adagrad'. vdev's optimizers are 'sgd' and 'adam' (or a "
         "vdev.optimizers.SGD or Adam object)"),
        (lambda: m.compile(3, "mse"), ValueError,
         "Could not interpret optimizer identifier: 3 (vdev takes 'sgd', 'adam' or a "
         "vdev.optimizers object)"),
        (lambda: m.compile("sgd", "focal"), ValueError,
         "Unknown loss function: 'focal'. vdev's losses are %s, or a vdev.losses object"
         % ", ".join(repr(k) for k in list(vdev._fit._LOSSES) + list(vdev._more_losses.NAMES))),
        (lambda: m.compile("sgd", 3), ValueError, "Could not interpret loss identifier: 3"),
        (lambda: m.compile("sgd", "mse", metrics=["auc"]), ValueError,
         "Unknown metric function: 'auc'. vdev's metrics are 'accuracy', 'acc', "
         "'binary_accuracy', 'categorical_accuracy', 'sparse_categorical_accuracy', 'mse', "
         "'mean_squared_error', 'mae', 'mean_absolute_error', a vdev.metrics class name or "
         "object, or a callable fn(y_true, y_pred) on numpy arrays"),
        (lambda: m.compile("sgd", "mse", metrics=[3]), ValueError,
         "Could not interpret metric identifier: 3"),
        (lambda: m.compile("sgd", "mse", metrics={"out": "mae"}), ValueError,
         "vdev's models have one output: give metrics as a list, not a dict"),
        (lambda: m.compile("sgd", "mse", loss_weights=[0.5]), ValueError,
         "vdev's compile takes loss_weights=None only (a model of one output and one loss), "
         "not [0.5]"),
        (lambda: m.compile("sgd", "mse", weighted_metrics=["f1"]), ValueError,
         "Unknown metric function: 'f1'. vdev's metrics are %s, a vdev.metrics class name or "
         "object, or a callable fn(y_true, y_pred) on numpy arrays"
         % ", ".join(repr(k) for k in vdev._fit._METRICS)),
        (lambda: m.compile("sgd", "mse", steps_per_execution=4), ValueError,
         "vdev's compile takes steps_per_execution=None or 1 only, not 4: vdev runs one batch "
         "per step and calls the batch callbacks after each"),
        (lambda: m.compile("sgd", "mse", distribute=None), TypeError,
         "Invalid keyword argument(s) in `compile()`: ({'distribute'},). vdev's compile takes "
         "optimizer, loss, metrics, loss_weights, weighted_metrics, run_eagerly, "
         "steps_per_execution and jit_compile"),
    ]
    for call, cls, text in cases:
        with pytest.raises(cls) as e:
            call()
        assert str(e.value) == text
    assert not hasattr(m, "optimizer")  # nothing refused was kept
    # taken, changing nothing
    m.compile("SGD", "mean_squared_error", metrics="mae", run_eagerly=True, jit_compile=True,
              steps_per_execution=1)
    assert isinstance(m.optimizer, vdev.optimizers.SGD) and m.compiled_metrics == ["mae"]
    # a string cross-entropy on a model ending in no sigmoid or softmax takes
    # its outputs as probabilities, as Keras (test_prob_losses.py)
    for loss in ("binary_crossentropy", "categorical_crossentropy",
                 "sparse_categorical_crossentropy"):
        m.compile("sgd", loss)
        assert m._loss_fn.from_logits is False and not m._from_probs


def test_fit_evaluate_predict_refusals():
    x, y = regression()
    m = mlp()
    for call in (lambda: m.fit(x, y), lambda: m.evaluate(x, y)):
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value) == ("You must compile your model before training/testing. Use "
                                "`model.compile(optimizer, loss)`.")
    m.compile("sgd")
    with pytest.raises(ValueError) as e:
        m.fit(x, y, verbose=0)
    assert str(e.value) == ("No loss found. You may have forgotten to provide a `loss` argument "
                            "in the `compile()` method.")
    m.compile("sgd", "mse")
    cases = [
        (lambda: m.fit(x), "Target data is missing. Your model was compiled with loss=mse, and "
         "therefore expects target data to be provided in `fit()`."),
        (lambda: m.evaluate(x, verbose=0), "Target data is missing. Your model was compiled "
         "with loss=mse, and therefore expects target data to be provided in `evaluate()`."),
        (lambda: m.fit(x, y[:60]), "Data cardinality is ambiguous:\n  x sizes: 70\n  y sizes: "
         "60\nMake sure all arrays contain the same number of samples."),
        (lambda: m.fit(x[:0], y[:0]), "Expect x to be a non-empty array or dataset."),
        (lambda: m.predict(x[:0]), "Expect x to be a non-empty array or dataset."),
        (lambda: m.fit(x[:1], y[:1], validation_split=0.2),
         "Training data contains 1 samples, which is not sufficient to split it into a "
         "validation and training set as specified by `validation_split=0.2`. Either provide "
         "more data, or a different value for the `validation_split` argument."),
        (lambda: m.fit(x, y, validation_data=x),
         "Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
         "found: " + repr(x)),
        (lambda: m.fit(x, y, sample_weight=np.ones(N + 1)),
         "Data cardinality is ambiguous:\n  x sizes: %d\n  y sizes: %d\n  sample_weight "
         "sizes: %d\nMake sure all arrays contain the same number of samples." % (N, N, N + 1)),
        (lambda: m.fit(x, y, validation_steps=2), "vdev's fit takes validation_steps with a "
         "generator or Sequence as validation_data only, not 2"),
        (lambda: m.fit(x, y, shuffle="batch"),
         "vdev's fit takes shuffle=True or False, not 'batch'"),
        (lambda: m.fit(x, y, verbose=3), "verbose must be 'auto', 0, 1 or 2, not 3"),
        (lambda: m.fit(x, y, batch_size=0), "batch_size must be a positive integer, not 0"),
        (lambda: m.fit(x, y, validation_data=(x, y), validation_freq=0, verbose=0),
         "`validation_freq` can not be less than 1."),
        (lambda: m.evaluate(x, y, steps=2), "vdev's evaluate takes steps with a generator or "
         "Sequence only, not 2"),
        (lambda: m.predict(x, steps=2), "vdev's predict takes steps with a generator or "
         "Sequence only, not 2"),
    ]
    for call, text in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == text
    with pytest.raises(TypeError) as e:
        m.fit(x, y, callbacks=[print])
    assert str(e.value) == ("callbacks must be vdev.callbacks.Callback objects, not %r"
                            % (print,))
    with pytest.raises(TypeError) as e:
        m.evaluate(x, y, verbose=0, bogus=1)
    assert str(e.value) == "Invalid keyword arguments: {'bogus': 1}"
    assert m.optimizer.iterations == 0  # nothing refused trained


def test_nothing_refused_trains():
    x, y = regression()
    m = mlp()
    m.compile("sgd", "mse")
    before = [bits(v) for v in m.weights]
    for kw in ({"class_weight": {1: 1}}, {"validation_split": 0.999}, {"verbose": 5}):
        with pytest.raises(ValueError):
            m.fit(x, y, **kw)
    assert [bits(v) for v in m.weights] == before and m.optimizer.iterations == 0
