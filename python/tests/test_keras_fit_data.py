"""The forms of data Keras's fit / evaluate / predict take on vdev's models
(vdev/_fit.py): a list or tuple of one array is that array (Keras's inputs
and targets of a model of one input and one output), trained to the same
bits as the array itself, while a list of rows still stacks; a dict of
inputs, a list of several inputs and validation data without targets are
refused with their exact texts before any training; bool inputs and
targets train as their float32 values; metrics of labels [N] beside outputs
[N, 1] are one value per row (against numpy); the printed values follow
Keras 2.11's Progbar. Three simulated 16 GiB GPUs (conftest)."""
import numpy as np
import pytest

import vdev
from vdev import layers


def data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    return x, (x @ rng.standard_normal((5, 2))).astype(np.float32)


def model():
    m = vdev.models.MLP([5, 8, 2], seed=4)
    m.compile(vdev.optimizers.SGD(0.05), "mse", metrics=["mae"])
    return m


def bits(m):
    return [v.numpy().tobytes() for v in m.weights]


def test_a_list_or_tuple_of_one_array_is_that_array():
    x, y = data()
    ref = model()
    h_ref = ref.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for wrap in (lambda a: [a], lambda a: (a,), lambda a: [vdev.constant(a)]):
        m = model()
        h = m.fit(wrap(x), wrap(y), batch_size=16, epochs=2, shuffle=False, verbose=0,
                  validation_data=(wrap(x[:8]), wrap(y[:8])))
        assert h.history["loss"] == h_ref.history["loss"]
        assert bits(m) == bits(ref)
        assert m.evaluate(wrap(x), wrap(y), verbose=0) == ref.evaluate(x, y, verbose=0)
        assert np.array_equal(m.predict(wrap(x), verbose=0), ref.predict(x, verbose=0))


def test_a_list_of_rows_still_stacks():
    x, y = data()
    a, b = model(), model()
    a.fit(list(x), y, batch_size=16, shuffle=False, verbose=0)
    b.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    assert bits(a) == bits(b)
    # one row given as a list of one array of the row's rank: one example
    assert a.predict([x[0]], verbose=0).shape == (1, 2)


def test_inputs_a_model_of_one_input_cannot_take_are_refused_before_training():
    x, y = data()
    m = model()
    before = bits(m)
    cases = [
        (lambda: m.fit({"input": x}, y, verbose=0),
         "vdev's models take one input, an array or a vdev tensor, not a dict of inputs "
         "(keys ['input'])"),
        (lambda: m.predict({"a": x, "b": x}, verbose=0),
         "vdev's models take one input, an array or a vdev tensor, not a dict of inputs "
         "(keys ['a', 'b'])"),
        (lambda: m.fit([x, x], y, verbose=0),
         "vdev's models take one input: x is a list of 2 arrays of the input's rank, 2 (the "
         "inputs of a model of several inputs); give one array"),
        (lambda: m.evaluate((x, x), y, verbose=0),
         "vdev's models take one input: x is a tuple of 2 arrays of the input's rank, 2 (the "
         "inputs of a model of several inputs); give one array"),
        (lambda: m.fit(x, y, validation_data=(x[:8],), verbose=0),
         "Target data is missing. Your model was compiled with loss=mse, and therefore "
         "expects target data to be provided in `validation_data` (give it as (x_val, "
         "y_val))."),
        (lambda: m.fit(x, y, validation_data=(x[:8], None), verbose=0),
         "Target data is missing. Your model was compiled with loss=mse, and therefore "
         "expects target data to be provided in `validation_data` (give it as (x_val, "
         "y_val))."),
    ]
    for call, text in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == text
    assert bits(m) == before and m.optimizer.iterations == 0


def test_an_unbuilt_model_takes_a_list_of_one_batch():
    x, y = data()
    a = vdev.models.Sequential([layers.Dense(3, seed=5)])
    b = vdev.models.Sequential([layers.Dense(3, seed=5)])
    assert np.array_equal(a.predict([x], verbose=0), b.predict(x, verbose=0))


def test_metrics_of_labels_of_rank_one_beside_one_output_are_per_example():
    # Keras's match_dtype_and_rank: y [N] beside outputs [N, 1] is [N, 1],
    # so each metric is one value per row, averaged over all 70 rows (not
    # one mean per batch, which would weigh the last 6 rows as 32)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((70, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    m = vdev.models.Sequential([layers.Dense(1, activation="sigmoid", input_shape=(3,),
                                             seed=6)])
    m.compile("sgd", "mse", metrics=["mae", "mse", "accuracy", "binary_accuracy"])
    p = m.predict(x, verbose=0)[:, 0].astype(np.float64)
    got = m.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    want = {"mae": np.mean(np.abs(p - y)), "mse": np.mean((p - y) ** 2),
            "accuracy": np.mean((p > 0.5) == y)}
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12), k
    assert got["binary_accuracy"] == got["accuracy"]
    assert got["loss"] == pytest.approx(want["mse"], rel=1e-6)


def test_the_printed_values_follow_keras_211s_progbar(capsys):
    # %.4f above 1e-3, else %.4e; verbose 1 compares |v|, verbose 2 v
    x, y = data(n=8)
    m = model()
    m.compile("sgd", lambda yt, yp: vdev.reduce_mean(yp) * 0.0 - 0.5)
    m.evaluate(x, y, verbose=1)
    assert capsys.readouterr().out.endswith(" - loss: -0.5000\n")
    m.evaluate(x, y, verbose=2)
    assert " - loss: -5.0000e-01 - " in capsys.readouterr().out
    m.compile("sgd", lambda yt, yp: vdev.reduce_mean(yp) * 0.0 + 0.0005)
    m.evaluate(x, y, verbose=1)
    assert capsys.readouterr().out.endswith(" - loss: 5.0000e-04\n")


def test_bool_inputs_and_targets_are_float32_as_keras_casts_them():
    x, _ = data()
    y = x[:, 0] > 0
    runs = []
    for xs, ys in ((x > 0, y), ((x > 0).astype(np.float32), y.astype(np.float32))):
        m = vdev.models.Sequential([layers.Dense(1, activation="sigmoid", input_shape=(5,),
                                                 seed=7)])
        m.compile("sgd", "binary_crossentropy", metrics=["accuracy"])
        h = m.fit(xs, ys, batch_size=16, shuffle=False, verbose=0,
                  validation_data=(xs[:8], ys[:8]))
        runs.append((h.history, m.evaluate(xs, ys, verbose=0),
                     m.predict(xs, verbose=0).tobytes(), bits(m)))
    assert runs[0] == runs[1]
    # bool labels of a sparse cross-entropy are the labels 0 and 1
    m = vdev.models.Sequential([layers.Dense(2, activation="softmax", input_shape=(5,),
                                             seed=8)])
    m.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
    assert m.evaluate(x, y, verbose=0) == m.evaluate(x, y.astype(np.int32), verbose=0)
