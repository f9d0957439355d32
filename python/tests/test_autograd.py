"""GradientTape and the ops around it as TensorFlow 2.x has them: gradients
with respect to tensors the tape computed, watch_accessed_variables and
non-trainable variables, a list of targets, stop_gradient, gradients through
.cpu()/.gpu(), re-entering a stopped tape, a persistent tape asked inside its
block, reductions over several axes, and Variable.assign's read_value."""
import logging

import numpy as np
import pytest

import vdev

LONG = "/job:localhost/replica:0/task:0"


def test_gradient_with_respect_to_a_tensor_the_tape_computed():
    v = vdev.Variable([1.0, 2.0, 3.0])
    c = vdev.constant([1.0, 1.0, 1.0])  # made before the block: unwatched
    with vdev.GradientTape(persistent=True) as tape:
        y = v * 2.0
        z = vdev.reduce_sum(y * y * c)
    gy, gv, gc = tape.gradient(z, [y, v, c])
    assert gy.numpy().tolist() == [4.0, 8.0, 12.0]  # 2y
    assert gv.numpy().tolist() == [8.0, 16.0, 24.0]  # 8v
    assert gc is None
    gc = tape.gradient(z, c, unconnected_gradients=vdev.UnconnectedGradients.ZERO)
    assert gc.numpy().tolist() == [0.0, 0.0, 0.0]


def test_unconnected_gradients_is_tensorflows_enum():
    U = vdev.UnconnectedGradients
    assert isinstance(U.ZERO, U) and U.ZERO.value == "zero" and U.NONE.name == "NONE"
    assert U("zero") is U.ZERO and list(U) == [U.NONE, U.ZERO]
    v = vdev.Variable([1.0])
    with vdev.GradientTape(persistent=True) as tape:
        loss = vdev.reduce_sum(v * 2.0)
    c = vdev.Variable([3.0])
    assert tape.gradient(loss, c, unconnected_gradients=U.NONE) is None
    assert tape.gradient(loss, c, unconnected_gradients=U.ZERO).numpy().tolist() == [0.0]
    for bad, text in ((None, "None"), ("ZERO", "'ZERO'"), (0, "0")):
        with pytest.raises(ValueError) as e:  # TensorFlow's imperative_grad
            tape.gradient(loss, c, unconnected_gradients=bad)
        assert str(e.value) == "Unknown value for unconnected_gradients: " + text


def test_unwatched_variables_get_none_or_zeros():
    with vdev.device("GPU:1"):
        v = vdev.Variable([1.0, 2.0])
    w = vdev.Variable([3.0, 4.0])
    with vdev.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        tape.watch(w)
        loss = vdev.reduce_sum(v * w)
    out = tape.gradient(loss, {"v": v, "w": w})
    assert out["v"] is None and out["w"].numpy().tolist() == [1.0, 2.0]
    z = tape.gradient(loss, v, unconnected_gradients="zero")
    assert z.numpy().tolist() == [0.0, 0.0] and z.device == LONG + "/device:GPU:1"
    # A non-trainable variable is not watched unless asked, as in TensorFlow.
    frozen = vdev.Variable([5.0, 6.0], trainable=False)
    with vdev.GradientTape() as t2:
        loss = vdev.reduce_sum(frozen * w)
    gf, gw = t2.gradient(loss, [frozen, w])
    assert gf is None and gw.numpy().tolist() == [5.0, 6.0]
    with vdev.GradientTape() as t3:
        t3.watch(frozen)
        loss = vdev.reduce_sum(frozen * w)
    assert t3.gradient(loss, frozen).numpy().tolist() == [3.0, 4.0]


def test_a_list_of_targets_is_their_sum():
    v = vdev.Variable([1.0, 2.0, 3.0])
    u = vdev.Variable([1.0])
    with vdev.GradientTape() as tape:
        a = vdev.reduce_sum(v * v)
        b = v * 3.0  # several elements: their sum
    gv, gu = tape.gradient([a, b], [v, u])
    assert gv.numpy().tolist() == [5.0, 7.0, 9.0] and gu is None
    with pytest.raises(RuntimeError):  # non-persistent: one call, whatever the targets
        tape.gradient(a, v)
    with vdev.GradientTape(persistent=True) as tape:
        a = vdev.reduce_sum(v * v)
        c = vdev.reduce_sum(u * 2.0)
    out = tape.gradient({"a": a, "c": c}, [v, u])
    assert out[0].numpy().tolist() == [2.0, 4.0, 6.0] and out[1].numpy().tolist() == [2.0]
    with pytest.raises(TypeError) as e:
        tape.gradient([a, 1.0], v)
    assert str(e.value) == "target must be a vdev tensor, not 1.0"
    with pytest.raises(TypeError) as e:
        tape.gradient(None, v)
    assert str(e.value) == ("Argument `target` should be a list or nested structure of "
                            "Tensors, Variables or CompositeTensors to be differentiated, but "
                            "received None.")  # TensorFlow's


def test_stop_gradient():
    v = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape() as tape:
        s = vdev.stop_gradient(v * v)
        loss = vdev.reduce_sum(v * s)
    assert s.numpy().tolist() == [1.0, 4.0] and s.device == v.device
    assert tape.gradient(loss, v).numpy().tolist() == [1.0, 4.0]  # s is a constant


def test_gradient_flows_through_cpu_and_gpu_copies():
    with vdev.device("GPU:1"):
        v = vdev.Variable([1.0, 2.0])
    with vdev.GradientTape() as tape:
        loss = vdev.reduce_sum(v.cpu() * v.gpu(2) * 3.0)
    g = tape.gradient(loss, v)
    assert g.numpy().tolist() == [6.0, 12.0] and g.device == LONG + "/device:GPU:1"
    with pytest.raises(vdev.errors.NotFoundError) as e:
        v.gpu(7)
    assert str(e.value) == ("No matching devices found for 'GPU:7': " + LONG +
                            "/device:GPU:7 unknown device (there are 3 logical GPUs)")
    vdev.config.set_soft_device_placement(True)  # an explicit copy still needs the device
    with pytest.raises(vdev.errors.NotFoundError):
        v.gpu(7)


def test_re_entering_a_tape_that_stopped():
    v = vdev.Variable([1.0])
    tape = vdev.GradientTape(persistent=True)
    with tape:
        with pytest.raises(ValueError) as e:
            with tape:
                pass
        assert str(e.value) == ("Tape is still recording, This can happen if you try to re-enter "
                                "an already-active tape.")
        loss = vdev.reduce_sum(v * 2.0)
    with pytest.raises(RuntimeError) as e:
        with tape:
            pass
    assert str(e.value) == ("vdev's GradientTape cannot resume recording: this tape stopped at "
                            "the end of its `with` block (or at its first gradient call). Record "
                            "every op in one `with` block, or use a new GradientTape")
    assert tape.gradient(loss, v).numpy().tolist() == [2.0]  # the tape is as it was


def test_persistent_tape_asked_inside_its_block_warns(caplog):
    v = vdev.Variable([1.0, 2.0])
    with caplog.at_level(logging.WARNING, logger="vdev"):
        with vdev.GradientTape(persistent=True) as tape:
            a = vdev.reduce_sum(v * v)
            ga = tape.gradient(a, v)
            b = vdev.reduce_sum(v * 3.0)  # not recorded
    assert ga.numpy().tolist() == [2.0, 4.0]
    assert tape.gradient(b, v) is None
    assert [r.getMessage() for r in caplog.records] == [
        "GradientTape.gradient was called inside the tape's `with` block: vdev's tape stops "
        "recording here, so ops after this call are not recorded and gradients of their results "
        "are None (TensorFlow's persistent tape goes on recording). Ask for gradients after the "
        "block."]


@pytest.mark.parametrize("axis", [(0, 1), (0, 2), [2, -3], [1], [], (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_over_several_axes(axis, keepdims):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8
    v = vdev.Variable(x)
    axes = tuple(axis)
    n = int(np.prod([x.shape[a] for a in axes]))
    for op, ref in ((vdev.reduce_sum, np.sum), (vdev.reduce_mean, np.mean)):
        with vdev.GradientTape() as tape:
            y = op(v, axis=axis, keepdims=keepdims)
            loss = vdev.reduce_sum(y * y)
        want = ref(x, axis=axes, keepdims=keepdims)
        assert y.shape == want.shape
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
        dy = 2 * ref(x, axis=axes, keepdims=True) / (n if ref is np.mean else 1)
        np.testing.assert_allclose(tape.gradient(loss, v).numpy(), np.broadcast_to(dy, x.shape),
                                   rtol=1e-6)


def test_reduce_axis_errors():
    x = vdev.ones([2, 3])
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.reduce_mean(x, axis=(0, -2))
    assert str(e.value) == "Invalid reduction arguments: Axes contains duplicate dimension: 0"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.reduce_sum(x, axis=(0, 2))
    assert str(e.value) == "Sum: Invalid reduction dimension (2 for input with 2 dimension(s)"


def test_reduce_axis_as_an_array_or_a_tensor():
    """As TensorFlow, axis may be an integer numpy array or an int32 tensor."""
    x = vdev.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert vdev.reduce_sum(x, axis=np.array([0])).numpy().tolist() == [3.0, 5.0, 7.0]
    assert vdev.reduce_mean(x, axis=np.array(1)).numpy().tolist() == [1.0, 4.0]
    assert vdev.reduce_sum(x, axis=vdev.constant([0, 1])).numpy() == 15.0
    assert vdev.reduce_sum(x, axis=np.int64(-1), keepdims=True).numpy().tolist() == [[3.0],
                                                                                     [12.0]]
    with pytest.raises(TypeError) as e:
        vdev.reduce_sum(x, axis=np.array([0.5]))
    assert str(e.value) == ("axis must be ints in at most one dimension, not an array of "
                            "float64 with shape [1]")
    with pytest.raises(TypeError) as e:
        vdev.reduce_sum(x, axis=vdev.constant([0.0]))
    assert str(e.value) == ("axis must be an int32 tensor, an int or a list of ints, not a "
                            "float32 tensor")


def test_assign_read_value():
    v = vdev.Variable([1.0, 2.0])
    assert v.assign([3.0, 4.0], read_value=False) is None
    assert v.assign_add([1.0, 1.0], read_value=False) is None
    assert v.assign_sub([0.5, 0.5], use_locking=True, name="sub") is v
    assert v.numpy().tolist() == [3.5, 4.5]
