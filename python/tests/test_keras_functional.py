"""Keras's functional API (vdev/_functional.py, vdev/_merge_layers.py):
vdev.Input's symbolic tensors, layers called on them, and
vdev.models.Model(inputs, outputs). A two-branch model with Concatenate and
a residual block with Add give the bits of the same ops written out with the
same variables; a model of two inputs trained with fit gives the bits of a
GradientTape loop over the same batches (under a MirroredStrategy, of a
strategy.run loop); a layer called twice is one layer with one set of
weights; summary() is Keras 2.11's text; weights saved restore into a fresh
model; and every refusal has its exact text. Three simulated 16 GiB GPUs
(conftest), two of 512 MiB for the strategy's test."""
import re

import numpy as np
import pytest

import vdev
from vdev import layers
from conftest import clean_env

N = 20


def bits(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v).tobytes()


def data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    x1 = rng.standard_normal((n, 4)).astype(np.float32)
    x2 = rng.standard_normal((n, 3)).astype(np.float32)
    y = (x1[:, :2] - 0.5 * x2[:, 1:] + 0.1).astype(np.float32)
    return x1, x2, y


def dense(x, layer, relu=False):
    """A Dense layer's computation written out."""
    y = vdev.add(vdev.matmul(x, layer.kernel), layer.bias)
    return vdev.nn.relu(y) if relu else y


def two_branch(name=None, seeds=(1, 2, 3)):
    a = vdev.Input(shape=(4,), name=None if name is None else name + "_a")
    b = vdev.Input(shape=(3,), name=None if name is None else name + "_b")
    h1 = layers.Dense(5, activation="relu", seed=seeds[0])(a)
    h2 = layers.Dense(5, seed=seeds[1])(b)
    c = layers.Concatenate()([h1, h2])
    return vdev.models.Model([a, b], layers.Dense(2, seed=seeds[2])(c), name=name)


def by_hand(m, x1, x2):
    d1, d2, d3 = (m.get_layer(index=i) for i in (2, 3, 5))
    h1 = dense(vdev.constant(x1), d1, relu=True)
    h2 = dense(vdev.constant(x2), d2)
    return dense(vdev.concat([h1, h2], 1), d3)


# ---- symbolic tensors and the graph ----

def test_input_is_a_symbolic_tensor_and_layers_give_symbolic_outputs():
    a = vdev.Input(shape=(4,))
    assert isinstance(a, vdev.layers.Input(shape=(2,)).__class__)
    assert a.shape == [None, 4] and a.shape.as_list() == [None, 4]
    assert a.dtype is vdev.float32 and re.fullmatch(r"input_\d+", a.name)
    assert str(a) == ("KerasTensor(type_spec=TensorSpec(shape=(None, 4), dtype=vdev.float32, "
                      "name='%s'), name='%s', description=\"created by layer '%s'\")"
                      % (a.name, a.name, a.name))
    assert repr(a) == "<KerasTensor: shape=(None, 4) dtype=float32 (created by layer '%s')>" % (
        a.name,)
    d = layers.Dense(3, name="d")
    assert not d.built
    h = d(a)
    assert d.built and tuple(d.kernel.shape) == (4, 3)  # built for the input's width
    assert h.shape == [None, 3] and h.dtype is vdev.float32 and h.name == "d/output:0"
    assert repr(h) == "<KerasTensor: shape=(None, 3) dtype=float32 (created by layer 'd')>"
    i = vdev.Input(shape=(6, 6, 2), batch_size=8, dtype="int32", name="img")
    assert i.shape == [8, 6, 6, 2] and i.dtype is vdev.int32
    f = layers.Flatten()(layers.MaxPooling2D()(layers.Conv2D(4, 3, seed=1)(i)))
    assert f.shape == [8, 16] and f.dtype is vdev.float32
    assert layers.Flatten()(i).dtype is vdev.int32  # as Keras: Flatten keeps ints
    assert vdev.Input(batch_shape=(None, 7)).shape == [None, 7]
    assert vdev.Model is vdev.models.Model and vdev.Input is vdev.layers.Input


def test_a_two_branch_model_is_its_ops_written_out_bit_for_bit():
    x1, x2, _ = data()
    m = two_branch()
    assert [type(l).__name__ for l in m.layers] == [
        "InputLayer", "InputLayer", "Dense", "Dense", "Concatenate", "Dense"]
    assert len(m.inputs) == 2 and m.input is m._nested_inputs and len(m.outputs) == 1
    assert m.input_shape == [(None, 4), (None, 3)] and m.output_shape == (None, 2)
    want = by_hand(m, x1, x2)
    assert bits(m([x1, x2])) == bits(want)
    assert bits(m([vdev.constant(x1), vdev.constant(x2)])) == bits(want)
    assert bits(m((x1.astype(np.float64), x2))) == bits(want)  # cast to the Input's float32
    assert bits(m({m.input_names[1]: x2, m.input_names[0]: x1})) == bits(want)
    assert bits(m.predict([x1, x2], batch_size=7, verbose=0)) == bits(want)
    # the weights: each layer's kernel then bias, in the order of layers
    names = [l.name for l in m.layers if l.weights]
    assert [w.name for w in m.weights] == [n + s for n in names for s in ("/kernel", "/bias")]
    assert m.count_params() == 4 * 5 + 5 + 3 * 5 + 5 + 10 * 2 + 2
    assert m.trainable_weights == m.weights and m.non_trainable_weights == []
    m.get_layer(index=2).trainable = False
    assert len(m.trainable_weights) == 4 and len(m.non_trainable_weights) == 2


def test_a_residual_block_with_add_and_a_lambda_trains_as_its_ops_written_out():
    x1, _, _ = data()
    y = np.tanh(x1).astype(np.float32)

    def block():
        x = vdev.Input(shape=(4,))
        h = layers.Dense(4, activation="relu", seed=11)(x)
        h = layers.Dense(4, seed=12)(h)
        r = layers.Add()([x, h])
        return vdev.models.Model(x, layers.Lambda(lambda t: vdev.multiply(t, 0.5))(r))
    a, b = block(), block()
    d1, d2 = b.layers[1], b.layers[2]

    def hand(x):
        return vdev.multiply(vdev.add(x, dense(dense(x, d1, relu=True), d2)), 0.5)
    assert a.layers[-1].__class__ is layers.Lambda and a.output_shape == (None, 4)
    assert bits(a(x1)) == bits(hand(vdev.constant(x1)))
    a.compile(vdev.optimizers.SGD(0.1), "mse")
    h = a.fit(x1, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    opt, mse, want = vdev.optimizers.SGD(0.1), vdev.losses.MeanSquaredError(), []
    for _ in range(2):
        total = 0.0
        for r in range(0, N, 8):
            v = b.trainable_variables
            with vdev.GradientTape() as tape:
                loss = mse(y[r:r + 8], hand(vdev.constant(x1[r:r + 8])))
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
            total += float(loss) * len(x1[r:r + 8])
        want.append(total / N)
    assert h.history["loss"] == want and want[1] < want[0]
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)


def test_fit_with_two_inputs_is_the_tape_loop_bit_for_bit():
    x1, x2, y = data()
    a, b = two_branch(), two_branch()
    a.compile(vdev.optimizers.Adam(0.01), vdev.losses.MeanSquaredError())
    vdev.random.set_seed(7)  # fit's one draw: the permutation seed
    h = a.fit([x1, x2], y, batch_size=8, epochs=3, verbose=0)
    opt, mse, want = vdev.optimizers.Adam(0.01), vdev.losses.MeanSquaredError(), []
    for e in range(3):
        order, total = np.random.default_rng([7, e]).permutation(N), 0.0
        for r in range(0, N, 8):
            idx = order[r:r + 8]
            v = b.trainable_variables
            with vdev.GradientTape() as tape:
                loss = mse(y[idx], b([x1[idx], x2[idx]]))
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
            total += float(loss) * len(idx)
        want.append(total / N)
    assert h.history == {"loss": want} and want[-1] < want[0]
    for va, vb in zip(a.weights, b.weights):
        assert bits(va) == bits(vb)
    # evaluate and validation take the inputs as fit does
    assert a.evaluate([x1, x2], y, verbose=0) == pytest.approx(
        float(mse(y, a([x1, x2]))), rel=1e-6)
    h = a.fit([x1, x2], y, epochs=1, verbose=0, validation_data=([x1[:5], x2[:5]], y[:5]))
    assert list(h.history) == ["loss", "val_loss"]
    h = a.fit([x1, x2], y, epochs=1, verbose=0, validation_split=0.25)
    assert list(h.history) == ["loss", "val_loss"]


def test_a_string_cross_entropy_takes_the_output_layers_logits():
    x1, x2, _ = data()
    labels = (x1[:, 0] > 0).astype(np.int32)
    a = vdev.Input(shape=(4,))
    b = vdev.Input(shape=(3,))
    out = layers.Dense(2, activation="softmax", seed=4)(layers.Concatenate()([a, b]))
    m = vdev.models.Model([a, b], out)
    m.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
    d = m.layers[-1]
    logits = dense(vdev.concat([vdev.constant(x1), vdev.constant(x2)], 1), d)
    want = vdev.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    got = m.evaluate([x1, x2], labels, batch_size=N, verbose=0)
    assert got[0] == float(want)


def test_a_layer_called_twice_shares_its_weights():
    x1, _, _ = data()
    x3 = x1[::-1].copy()
    a = vdev.Input(shape=(4,), name="left")
    b = vdev.Input(shape=(4,), name="right")
    shared = layers.Dense(3, seed=9, name="shared")
    out = layers.Subtract(name="diff")([shared(a), shared(b)])
    m = vdev.models.Model([a, b], out, name="siamese")
    assert [l.name for l in m.layers] == ["left", "right", "shared", "diff"]
    assert m.weights == [shared.kernel, shared.bias]
    want = vdev.subtract(dense(vdev.constant(x1), shared), dense(vdev.constant(x3), shared))
    assert bits(m([x1, x3])) == bits(want)
    # one update per step: the two calls' gradients summed
    k0 = shared.kernel.numpy()
    m.compile(vdev.optimizers.SGD(0.1), "mse")
    m.fit([x1, x3], np.zeros((N, 3), np.float32), batch_size=N, shuffle=False, verbose=0)
    with vdev.GradientTape() as tape:
        kernel = vdev.Variable(k0)
        bias = vdev.Variable(np.zeros(3, np.float32))
        d = vdev.subtract(vdev.add(vdev.matmul(vdev.constant(x1), kernel), bias),
                          vdev.add(vdev.matmul(vdev.constant(x3), kernel), bias))
        loss = vdev.losses.MeanSquaredError()(np.zeros((N, 3), np.float32), d)
    g = tape.gradient(loss, kernel)
    vdev.optimizers.SGD(0.1).apply_gradients([(g, kernel)])
    assert bits(shared.kernel) == bits(kernel)
    # a model called as a layer of another: its layers (and weights) too
    c = vdev.Input(shape=(4,))
    outer = vdev.models.Model(c, m([c, c]))
    assert outer.weights == [shared.kernel, shared.bias]
    assert outer.output_shape == (None, 3)
    assert bits(outer(x1)) == bits(m([x1, x1]))


def test_a_model_of_two_outputs_gives_a_list():
    x1, _, _ = data()
    a = vdev.Input(shape=(4,))
    h = layers.Dense(3, seed=1)(a)
    m = vdev.models.Model(a, [h, layers.Dense(2, seed=2)(h)])
    o = m(x1)
    assert isinstance(o, list) and [tuple(t.shape) for t in o] == [(N, 3), (N, 2)]
    assert m.output_shape == [(None, 3), (None, 2)]
    with pytest.raises(ValueError) as e:
        m.compile("sgd", "mse")
    assert str(e.value) == ("vdev's compile takes models of one output; this one has 2 (%s, %s)"
                            % tuple(m.output_names))
    with pytest.raises(ValueError) as e:
        m.predict(x1)
    assert str(e.value) == ("vdev's predict takes models of one output; this one has 2 (%s, %s): "
                            "call the model on the batches" % tuple(m.output_names))


def test_merge_layers_and_their_functional_forms():
    rng = np.random.default_rng(3)
    p, q, r = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3))
    tp, tq, tr = vdev.constant(p), vdev.constant(q), vdev.constant(r)
    assert bits(layers.add([p, q, r])) == bits(vdev.add(vdev.add(tp, tq), tr))
    assert bits(layers.Add()([tp, tq])) == bits(vdev.add(tp, tq))
    assert bits(layers.subtract([p, q])) == bits(vdev.subtract(tp, tq))
    assert bits(layers.multiply([p, q, r])) == bits(vdev.multiply(vdev.multiply(tp, tq), tr))
    assert bits(layers.average([p, q, r])) == bits(
        vdev.divide(vdev.add(vdev.add(tp, tq), tr), 3.0))
    assert bits(layers.concatenate([p, q])) == bits(vdev.concat([tp, tq], 1))
    assert bits(layers.Concatenate(axis=0)([p, q])) == bits(vdev.concat([tp, tq], 0))
    assert layers.Concatenate(axis=0, name="c").get_config() == {
        "name": "c", "trainable": True, "dtype": "float32", "axis": 0}
    x, y = vdev.Input(shape=(3,)), vdev.Input(shape=(5,))
    assert layers.concatenate([x, y]).shape == [None, 8]
    assert layers.Concatenate(axis=0)([x, x]).shape == [None, 3]
    assert layers.Add()([x, vdev.Input(shape=(1,))]).shape == [None, 3]
    assert layers.Average().compute_output_shape([(2, 3), (2, 3)]) == (2, 3)


# ---- summary ----

def test_summary_of_a_chain_is_the_sequential_table_with_its_input():
    x = vdev.Input(shape=(4,), name="x")
    h = layers.Dense(8, activation="relu", name="h")(x)
    m = vdev.models.Model(x, layers.Dense(2, name="out")(h), name="chain")
    lines = []
    m.summary(print_fn=lines.append)

    def row(a, b, c):  # columns end at 29, 55 and 65
        return (" " + a).ljust(29) + b.ljust(26) + c.ljust(10)
    assert lines == [
        'Model: "chain"', "_" * 65, row("Layer (type)", "Output Shape", "Param #"), "=" * 65,
        row("x (InputLayer)", "[(None, 4)]", "0"), " " * 65,
        row("h (Dense)", "(None, 8)", "40"), " " * 65,
        row("out (Dense)", "(None, 2)", "18"), " " * 65,
        "=" * 65, "Total params: 58", "Trainable params: 58", "Non-trainable params: 0",
        "_" * 65]


def test_summary_of_a_graph_says_what_each_layer_is_connected_to():
    a = vdev.Input(shape=(4,), name="left")
    b = vdev.Input(shape=(4,), name="right")
    shared = layers.Dense(3, name="shared")
    c = layers.Concatenate(name="join")([shared(a), shared(b)])
    m = vdev.models.Model([a, b], layers.Dense(1000, name="wide")(c), name="g")
    m.get_layer("wide").trainable = False
    lines = []
    m.summary(print_fn=lines.append)

    def row(a, b, c, d):  # columns end at 32, 53, 65 and 98
        return (" " + a).ljust(32) + b.ljust(21) + c.ljust(12) + d.ljust(33)
    assert lines == [
        'Model: "g"', "_" * 98, row("Layer (type)", "Output Shape", "Param #", "Connected to"),
        "=" * 98,
        row("left (InputLayer)", "[(None, 4)]", "0", "[]"), " " * 98,
        row("right (InputLayer)", "[(None, 4)]", "0", "[]"), " " * 98,
        row("shared (Dense)", "(None, 3)", "15", "['left[0][0]',"),
        row("", "", "", " 'right[0][0]']"), " " * 98,
        row("join (Concatenate)", "(None, 6)", "0", "['shared[0][0]',"),
        row("", "", "", " 'shared[1][0]']"), " " * 98,
        row("wide (Dense)", "(None, 1000)", "7000", "['join[0][0]']"), " " * 98,
        "=" * 98, "Total params: 7,015", "Trainable params: 15", "Non-trainable params: 7,000",
        "_" * 98]


# ---- weights ----

def test_save_weights_load_into_a_fresh_functional_model(tmp_path):
    x1, x2, _ = data()
    a = two_branch()
    b = two_branch(seeds=(5, 6, 7))  # other weights, other layer names
    assert bits(a([x1, x2])) != bits(b([x1, x2]))
    path = str(tmp_path / "w.safetensors")
    a.save_weights(path)
    b.load_weights(path)
    assert bits(a([x1, x2])) == bits(b([x1, x2]))
    x = vdev.Input(shape=(4,))
    small = vdev.models.Model(x, layers.Dense(2)(x))
    with pytest.raises(ValueError) as e:
        small.load_weights(path)
    assert str(e.value) == ("Weight count mismatch when loading weights from file. Model "
                            "expected 2 weights, found 6 saved weights.")


# ---- the mirrored strategy ----

def test_fit_with_two_inputs_under_a_mirrored_strategy_is_its_strategy_run_loop(monkeypatch):
    clean_env(monkeypatch, sim="2x512MiB")
    x1, x2, y = data()
    s = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    with s.scope():
        a, b = two_branch(), two_branch()
        a.compile(vdev.optimizers.SGD(0.05), vdev.losses.MeanSquaredError())
        opt = vdev.optimizers.SGD(0.05)
    assert all(hasattr(v, "values") for v in a.weights)  # mirrored
    h = a.fit([x1, x2], y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    mse, want = vdev.losses.MeanSquaredError(reduction="sum"), []
    for _ in range(2):
        total = 0.0
        for r in range(0, N, 8):
            rows = len(y[r:r + 8])

            def step(p, q, t):
                with vdev.GradientTape() as tape:
                    loss = vdev.divide(mse(t, b([p, q])), float(rows))
                v = b.trainable_variables
                opt.apply_gradients(zip(tape.gradient(loss, v), v))
                return loss
            per = s.run(step, args=tuple(vdev.distribute.DistributedBatch(s, vdev.constant(z))
                                         for z in (x1[r:r + 8], x2[r:r + 8], y[r:r + 8])))
            total += float(s.reduce("SUM", per, axis=None)) * rows
        want.append(total / N)
    assert h.history["loss"] == want and want[1] < want[0]
    for va, vb in zip(a.weights, b.weights):
        assert len({bits(c) for c in va.values}) == 1
        assert bits(va) == bits(vb)


# ---- refusals, in Keras's words ----

def test_a_disconnected_graph_is_kerass_error():
    a, b = vdev.Input(shape=(4,), name="a"), vdev.Input(shape=(3,), name="b")
    h = layers.Dense(2, name="da")(a)
    out = layers.Concatenate(name="cat")([h, layers.Dense(2, name="db")(b)])
    with pytest.raises(ValueError) as e:
        vdev.models.Model(a, out)
    assert str(e.value) == (
        "Graph disconnected: cannot obtain value for tensor KerasTensor(type_spec=TensorSpec("
        "shape=(None, 3), dtype=vdev.float32, name='b'), name='b', description=\"created by "
        "layer 'b'\") at layer \"db\". The following previous layers were accessed without "
        "issue: ['da']")
    other = vdev.Input(shape=(4,), name="other")
    with pytest.raises(ValueError) as e:
        vdev.models.Model(other, h)
    assert str(e.value).startswith("Graph disconnected: cannot obtain value for tensor "
                                   "KerasTensor(type_spec=TensorSpec(shape=(None, 4), dtype="
                                   "vdev.float32, name='a')") and str(e.value).endswith(
        "at layer \"da\". The following previous layers were accessed without issue: []")


def test_calling_a_model_with_the_wrong_inputs_is_kerass_error():
    x1, x2, y = data()
    m = two_branch(name="m")
    with pytest.raises(ValueError) as e:
        m(x1)
    assert str(e.value) == ('Layer "m" expects 2 input(s), but it received 1 input tensors. '
                            "Inputs received: %s" % ([x1],))
    t = vdev.constant(x1)
    with pytest.raises(ValueError) as e:
        m([t, t, t])
    assert str(e.value) == ('Layer "m" expects 2 input(s), but it received 3 input tensors. '
                            "Inputs received: %s" % ([t, t, t],))
    with pytest.raises(ValueError) as e:
        m([x2, x1])
    assert str(e.value) == ('Input 0 of layer "m" is incompatible with the layer: expected '
                            "shape=(None, 4), found shape=(20, 3)")
    m.compile("sgd", "mse")
    with pytest.raises(ValueError) as e:
        m.fit(x1, y, verbose=0)
    assert str(e.value).startswith('Layer "m" expects 2 input(s), but it received 1 input '
                                   "tensors. Inputs received: [array(")
    with pytest.raises(ValueError) as e:
        m.fit([x1, x2[:5]], y, verbose=0)
    assert str(e.value) == ("Data cardinality is ambiguous:\n  x sizes: 20, 5\n  y sizes: 20\n"
                            "Make sure all arrays contain the same number of samples.")
    assert m.optimizer.iterations == 0


def test_model_and_input_arguments_are_kerass_errors():
    a = vdev.Input(shape=(4,))
    h = layers.Dense(2)(a)
    cases = [
        (lambda: vdev.models.Model([a, a], h),
         "The list of inputs passed to the model contains the same input multiple times. All "
         "inputs should only appear once.Received inputs=[%r, %r]" % (a, a)),
        (lambda: vdev.models.Model(vdev.constant([[1.0]]), h),
         "Input tensors to a Functional model must come from `tf.keras.Input`. Received "
         "inputs=%s (missing previous layer metadata)." % (vdev.constant([[1.0]]),)),
        (lambda: vdev.models.Model(a, 3.0),
         "Output tensors of a Functional model must be the output of a TensorFlow `Layer` (thus "
         "holding past layer metadata). Found: 3.0"),
        (lambda: vdev.models.Model(h, h),
         "vdev's Model takes as inputs the tensors of vdev.Input only, not %r, made by layer "
         "\"%s\" (Keras copies the layers before it): make an Input of its shape"
         % (h, h._keras_history.layer.name)),
        (lambda: vdev.Input(),
         "Please provide to Input a `shape` or a `tensor` or a `type_spec` argument. Note that "
         "`shape` does not include the batch dimension."),
        (lambda: vdev.Input(shape=(2,), batch_shape=(None, 2)),
         "Only provide the `shape` OR `batch_input_shape` argument to Input, not both at the "
         "same time."),
        (lambda: vdev.Input(shape=(2,), sparse=True, ragged=True),
         "Cannot set both `sparse` and `ragged` to `True` in a Keras `Input`."),
        (lambda: vdev.Input(shape=(2,), foo=1), "Unrecognized keyword arguments: ['foo']"),
        (lambda: vdev.Input(shape=(2,), sparse=True),
         "vdev's Input takes sparse and ragged None or False only: vdev has no sparse or ragged "
         "tensors"),
    ]
    for make, text in cases:
        with pytest.raises(ValueError) as e:
            make()
        assert str(e.value) == text
    with pytest.raises(TypeError) as e:
        vdev.models.Model()
    assert str(e.value).startswith("vdev's Model takes inputs and outputs")
    d1, d2 = layers.Dense(2, name="twin"), layers.Dense(2, name="twin")
    with pytest.raises(ValueError) as e:
        vdev.models.Model(a, layers.Add()([d1(a), d2(a)]))
    assert str(e.value) == ('The name "twin" is used 2 times in the model. All layer names '
                            "should be unique.")


def test_get_layer_is_kerass():
    m = two_branch(name="gl")
    assert m.get_layer("gl_b") is m.layers[1] and m.get_layer(index=4) is m.layers[4]
    names = [l.name for l in m.layers]
    for kwargs, text in (
            ({"name": "nope"}, "No such layer: nope. Existing layers are: %s." % (names,)),
            ({"index": 6}, "Was asked to retrieve layer at index 6 but model only has 6 "
                           "layers."),
            ({"name": "gl_a", "index": 0}, "Provide only a layer name or a layer index. "
                                           "Received: index=0, name=gl_a."),
            ({}, "Provide either a layer name or layer index at `get_layer`.")):
        with pytest.raises(ValueError) as e:
            m.get_layer(**kwargs)
        assert str(e.value) == text


def test_layers_refuse_symbolic_inputs_they_cannot_take():
    a, b = vdev.Input(shape=(4,), name="p"), vdev.Input(shape=(5,), name="q")
    d = layers.Dense(2, name="d4")
    d(a)
    cases = [
        (lambda: d(b), 'Input 0 of layer "d4" is incompatible with the layer: expected axis -1 '
                       "of input shape to have value 4, but received input with shape (None, 5)"),
        (lambda: layers.Dense(2, name="dd")([a, b]),
         'Layer "dd" expects 1 input(s), but it received 2 input tensors. Inputs received: '
         "[%r, %r]" % (a, b)),
        (lambda: layers.Dense(2, name="d1")(vdev.Input(shape=())),
         'Input 0 of layer "d1" is incompatible with the layer: expected min_ndim=2, found '
         "ndim=1. Full shape received: (None,)"),
        (lambda: layers.Add()(a), "A merge layer should be called on a list of inputs. "
                                  "Received: input_shape=(None, 4) (not a list of shapes)"),
        (lambda: layers.Add()([a, b]), "Inputs have incompatible shapes. Received shapes (4,) "
                                       "and (5,)"),
        (lambda: layers.Subtract()([a, a, a]),
         "A `Subtract` layer should be called on exactly 2 inputs. Received: "
         "input_shape=[(None, 4), (None, 4), (None, 4)]"),
        (lambda: layers.Concatenate()(a), "A `Concatenate` layer should be called on a list of "
                                          "at least 1 input. Received: input_shape=(None, 4)"),
        (lambda: layers.Concatenate(axis=0)([a, b]),
         "A `Concatenate` layer requires inputs with matching shapes except for the "
         "concatenation axis. Received: input_shape=[(None, 4), (None, 5)]"),
        (lambda: layers.Add()([vdev.Input(shape=(3,), batch_size=2),
                               vdev.Input(shape=(3,), batch_size=4)]),
         "Cannot merge tensors with different batch sizes. Got tensors with shapes "
         "[(2, 3), (4, 3)]"),
    ]
    for make, text in cases:
        with pytest.raises(ValueError) as e:
            make()
        assert str(e.value) == text
    # the same checks on values
    with pytest.raises(ValueError) as e:
        layers.Add()([np.zeros((2, 4), np.float32), np.zeros((3, 4), np.float32)])
    assert str(e.value) == ("Cannot merge tensors with different batch sizes. Got tensors with "
                            "shapes [(2, 4), (3, 4)]")


def test_a_symbolic_tensor_in_a_vdev_op_is_a_type_error_naming_lambda():
    a = vdev.Input(shape=(4,), name="s")
    text = ("You are passing %s, a symbolic Keras input/output, to a vdev op or a Python "
            "operator: it holds no value. vdev's functional models take vdev layers only: wrap "
            "the op in a vdev.layers.Lambda (Lambda(lambda t: vdev.add(t, 1.0))(x)) or use a "
            "merge layer (vdev.layers.Add()([x, y]))" % (a,))
    for op in (lambda: vdev.add(a, 1.0), lambda: vdev.matmul(a, np.ones((4, 2), np.float32)),
               lambda: vdev.concat([a, a], 1), lambda: a + 1.0, lambda: 2.0 * a,
               lambda: np.asarray(a)):
        with pytest.raises(TypeError) as e:
            op()
        assert str(e.value) == text
    # the same op in a Lambda is a layer of the model
    m = vdev.models.Model(a, layers.Lambda(lambda t: vdev.add(t, 1.0))(a))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert np.array_equal(m(x).numpy(), x + 1.0)
    with pytest.raises(TypeError) as e:
        layers.Add()([a, np.ones((2, 4), np.float32)])
    assert str(e.value).startswith('Layer "add')


def test_maximum_and_minimum_merge_layers_are_kerass():
    rng = np.random.default_rng(11)
    xs = [rng.uniform(-1, 1, (4, 3)).astype(np.float32) for _ in range(3)]
    xs[1][0, 0] = np.nan  # TensorFlow's maximum propagates NaN
    ins = [vdev.Input(shape=(3,)) for _ in range(3)]
    for cls, fn, ref in ((vdev.layers.Maximum, vdev.layers.maximum, np.maximum),
                         (vdev.layers.Minimum, vdev.layers.minimum, np.minimum)):
        want = ref(ref(xs[0], xs[1]), xs[2])
        for out in (cls()(ins), fn(ins)):
            got = vdev.Model(ins, out)(xs).numpy()
            np.testing.assert_array_equal(got, want)
        with pytest.raises(ValueError):
            cls()([vdev.Input(shape=(3,)), vdev.Input(shape=(4,))])
    # the gradient reaches the larger input only
    a, b = vdev.Variable([[1.0, 5.0]]), vdev.Variable([[2.0, 3.0]])
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(vdev.layers.Maximum()([a, b]))
    ga, gb = tape.gradient(y, [a, b])
    np.testing.assert_array_equal(ga.numpy(), [[0.0, 1.0]])
    np.testing.assert_array_equal(gb.numpy(), [[1.0, 0.0]])
