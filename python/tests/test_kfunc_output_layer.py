"""A string cross-entropy on a functional model takes the logits of the
layer whose call gives the output, as Keras takes them from the output
tensor. That layer need not be ``layers[-1]``: a softmax Dense called
twice (first on the input, then as the output) sorts by its deeper call.
compile accepts it, evaluate gives the cross-entropy of the model's
probabilities, and a fit step gives the bits of the GradientTape step on
that call's logits."""
import numpy as np
import pytest

import vdev
from vdev import layers

X = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
Y = np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1, 2]]


def model():
    i = vdev.Input((3,))
    sm = layers.Dense(3, activation="softmax", seed=3, name="sm")
    out = sm(layers.Dense(3, seed=4, name="mid")(sm(i)))
    return vdev.models.Model(i, out)


def test_the_output_layer_is_the_output_call_s():
    m = model()
    assert [l.name for l in m.layers][1:] == ["sm", "mid"]  # sm's deeper call first
    m.compile(vdev.optimizers.SGD(0.5), "categorical_crossentropy")
    p = m(X).numpy().astype(np.float64)
    want = -np.mean(np.sum(Y * np.log(p), axis=-1))
    assert m.evaluate(X, Y, verbose=0) == pytest.approx(want, rel=1e-5)


def test_a_fit_step_is_the_tape_step_on_the_logits():
    a, b = model(), model()
    b.set_weights(a.get_weights())
    a.compile(vdev.optimizers.SGD(0.5), "categorical_crossentropy")
    a.fit(X, Y, batch_size=6, epochs=1, shuffle=False, verbose=0)
    sm, mid = b.get_layer("sm"), b.get_layer("mid")
    opt = vdev.optimizers.SGD(0.5)
    with vdev.GradientTape() as tape:
        h = sm(vdev.constant(X))
        h = mid(h)
        logits = vdev.add(vdev.matmul(h, sm.kernel), sm.bias)
        loss = vdev.losses.CategoricalCrossentropy(from_logits=True)(Y, logits)
    grads = tape.gradient(loss, b.trainable_variables)
    opt.apply_gradients(zip(grads, b.trainable_variables))
    for w, v in zip(a.get_weights(), b.get_weights()):
        assert w.tobytes() == v.tobytes()
