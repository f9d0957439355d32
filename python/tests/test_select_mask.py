"""SelectByMask (src/ops/select.c), tf.where on vdev's float masks, and its
use for Keras's masked steps (vdev/_keras_masks.py select): values and
gradients against numpy's where for masks of the values' shape, rows,
columns and 3-D, with masks of -0, 0.5 and NaN; an infinite or NaN value not
chosen does not reach the result (m a + (1 - m) b let it through); a masked
LSTM whose padded steps hold NaN gives the unpadded sequences' outputs, as
Keras's tf.where does, one SelectByMask per state a step. Three simulated
16 GiB GPUs (conftest)."""
import numpy as np
import pytest

import vdev
from vdev import _ops, layers

rng = np.random.default_rng(20261206)
f32 = np.float32


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
@pytest.mark.parametrize("mshape,vshape", [((4, 5), (4, 5)), ((4, 1), (4, 5)), ((1, 5), (4, 5)),
                                           ((2, 1, 5), (2, 4, 5))])
def test_values_and_gradients_against_numpy_where(dev, mshape, vshape):
    m = rng.choice(np.array([0.0, -0.0, 1.0, 0.5, np.nan], f32), mshape)
    a = rng.uniform(-2, 2, vshape).astype(f32)
    b = rng.uniform(-2, 2, vshape).astype(f32)
    b[..., 0] = np.inf  # not chosen where the mask is set: must not leak
    a[..., 1] = np.nan
    w = rng.uniform(-1, 1, vshape).astype(f32)
    on = np.broadcast_to(m != 0, vshape)
    with vdev.device(dev):
        va, vb = vdev.Variable(a), vdev.Variable(b)
        with vdev.GradientTape() as tape:
            y = _ops.select_mask(vdev.constant(m), va, vb)
            loss = vdev.reduce_sum(vdev.multiply(_ops.select_mask(
                vdev.constant(m), vdev.constant(w), vdev.constant(w)), y))
        ga, gb = tape.gradient(loss, [va, vb])
    want = np.where(on, a, b)
    np.testing.assert_array_equal(y.numpy(), want)  # NaN where chosen, inf where chosen
    np.testing.assert_array_equal(ga.numpy(), np.where(on, w, 0))
    np.testing.assert_array_equal(gb.numpy(), np.where(on, 0, w))


def test_a_masked_lstm_with_nan_padding_gives_the_unpadded_result():
    x = rng.uniform(-1, 1, (3, 6, 2)).astype(f32)
    lengths = [6, 4, 2]
    mask = np.arange(6)[None, :] < np.array(lengths)[:, None]
    padded = x.copy()
    padded[~mask] = np.nan  # what a padded step holds must not matter
    lstm = layers.LSTM(4, return_sequences=True, return_state=True)
    lstm.build(2)
    vdev.placement.reset()
    seq, h, c = lstm(padded, mask=mask)
    assert vdev.placement.op_count("SelectByMask") == 6 * 2  # h and c each step
    for i, n in enumerate(lengths):
        ref = lstm(x[i:i + 1, :n])
        np.testing.assert_allclose(h.numpy()[i], ref[1].numpy()[0], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(c.numpy()[i], ref[2].numpy()[0], rtol=1e-6, atol=1e-7)
    assert np.isfinite(seq.numpy()).all()


def test_refusals():
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        _ops.select_mask(vdev.constant(np.ones((2, 1), f32)), vdev.constant(np.ones((2, 3), f32)),
                         vdev.constant(np.ones((2, 4), f32)))
    assert str(e.value) == "SelectByMask: the values' shapes [2,3] and [2,4] differ"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        _ops.select_mask(vdev.constant(np.ones((2, 2), f32)), vdev.constant(np.ones((2, 3), f32)),
                         vdev.constant(np.ones((2, 3), f32)))
    assert str(e.value) == ("SelectByMask: incompatible shapes [2,2] and [2,3] (the mask must "
                            "broadcast to the values' shape (at most their rank, each axis 1 "
                            "or theirs))")
