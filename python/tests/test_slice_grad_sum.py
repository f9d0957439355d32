"""The tape's sum of the gradients of several strided slices of one tensor
(src/autograd/tape.c, op StridedSliceGradAdd): a loss over a recurrent
layer's steps, each slicing its step of one [batch, steps, ...] tensor, adds
each slice's gradient into the sum in place, one StridedSliceGrad for the
first and one StridedSliceGradAdd for each other; the gradients equal
numpy's (written with numpy's own slicing) for steps, overlapping ranges,
backward strides, four dimensions, one element, a slice of a slice and a sum
another op's gradient started, on the CPU and a simulated GPU. Three
simulated 16 GiB GPUs (conftest)."""
import numpy as np
import pytest

import vdev

rng = np.random.default_rng(20261206)
f32 = np.float32


S = slice
# each case: the variable's shape and the slices the loss takes, each a chain
# of indexings (a slice of a slice is a chain of two)
CASES = {
    # every step of [4, 6, 5], as a recurrent layer slices its steps
    "steps": ((4, 6, 5), [((S(None), t, S(None)),) for t in range(6)]),
    # overlapping ranges: elements taken by two and three slices
    "overlap": ((5, 7), [((S(1, 4), S(None)),), ((S(2, 5), S(2, None)),),
                         ((S(None, None, 2), S(None, None, 3)),)]),
    # backward strides, four dimensions, one element
    "4-D backwards": ((2, 3, 4, 5), [((S(None, None, -1), S(1, None), S(None, None, -2),
                                       S(4, 0, -1)),),
                                     ((S(None), S(None, None, 2), S(1, 3), S(None)),),
                                     ((1, 2, 3, 4),)]),
    # a slice of a slice, twice from one intermediate
    "nested": ((6, 8), [((S(1, 5), S(None)), (S(None, None, 2), S(1, None, 3))),
                        ((S(1, 5), S(None)), (S(1, None), S(None, 2))),
                        ((S(None), S(3, None)),)]),
}


def weights(shape, chains):
    """A constant of each slice's shape."""
    out = []
    for chain in chains:
        probe = np.zeros(shape)
        for ix in chain:
            probe = probe[ix]
        out.append(rng.uniform(-2, 2, np.shape(probe)).astype(f32))
    return out


def sum_of(parts):
    total = None
    for p in parts:
        t = vdev.reduce_sum(vdev.square(p))
        total = t if total is None else vdev.add(total, t)
    return total


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("last", ["mul", "reshape"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_in_place_sum_against_numpy(name, last, dev):
    shape, chains = CASES[name]
    ws = weights(shape, chains)
    x = rng.uniform(-1, 1, shape).astype(f32)
    with vdev.device(dev):
        v = vdev.Variable(x)
        vdev.placement.reset()
        with vdev.GradientTape() as tape:
            parts = []
            for chain, w in zip(chains, ws):
                t = v
                for ix in chain:
                    t = t[ix]
                parts.append(vdev.multiply(t, w))
            # recorded last, so its gradient starts v's sum: Mul's a tensor
            # of its own, Reshape's a view of its dout (the sum then starts
            # at the first slice's)
            parts.append(vdev.multiply(v, 0.5) if last == "mul"
                         else vdev.multiply(vdev.reshape(v, [-1]), 0.5))
            total = sum_of(parts)
        g = tape.gradient(total, v).numpy()
    assert vdev.placement.op_count("StridedSliceGradAdd") > 0
    want = 2 * 0.25 * x.astype(np.float64)
    for chain, w in zip(chains, ws):
        view, src = want, x.astype(np.float64)
        for ix in chain[:-1]:
            view, src = view[ix], src[ix]
        ix = chain[-1]
        if np.ndim(src[ix]) == 0:
            view[ix] += 2 * src[ix] * float(w) ** 2
        else:
            view[ix] += 2 * src[ix] * w.astype(np.float64) ** 2
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_one_slice_grad_then_adds_for_an_rnn_over_steps():
    x = vdev.Variable(rng.uniform(-1, 1, (8, 20, 16)).astype(f32))
    vdev.placement.reset()
    with vdev.GradientTape() as tape:
        loss = sum_of([x[:, t, :] for t in range(20)])
    g = tape.gradient(loss, x)
    assert vdev.placement.op_count("StridedSliceGrad") == 1
    assert vdev.placement.op_count("StridedSliceGradAdd") == 19
    np.testing.assert_array_equal(g.numpy(), 2 * x.numpy())
    # an LSTM layer's steps take it too: one StridedSliceGrad for the steps of x W
    lstm = vdev.layers.LSTM(4)
    xs = vdev.constant(rng.uniform(-1, 1, (3, 7, 2)).astype(f32))
    lstm(xs)
    vdev.placement.reset()
    with vdev.GradientTape() as tape:
        y = vdev.reduce_sum(lstm(xs))
    tape.gradient(y, lstm.trainable_variables)
    assert vdev.placement.op_count("StridedSliceGrad") == 1
    assert vdev.placement.op_count("StridedSliceGradAdd") == 6
