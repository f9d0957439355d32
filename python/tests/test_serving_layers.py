"""A Dense (or Conv2D) layer whose build fails half-way (its bias out of memory on a
full device, or an initializer that raises) is left unbuilt: the kernel it
had made is freed, it holds no variables, and the next call, once there is
room, builds it whole, bias included. Before, it kept the kernel, read as
built with no bias and no variables, and every later call computed without
the bias (and training or a checkpoint never saw its weights)."""
import gc

import numpy as np
import pytest

import vdev
from vdev import config as C

UNITS = 512
KERNEL_BYTES = UNITS * UNITS * 4


def _cur(dev="GPU:0"):
    return C.experimental.get_memory_info(dev)["current"]


def _preallocated_64mib():
    gpu = C.list_physical_devices("GPU")[0]
    C.set_logical_device_configuration(gpu, [C.LogicalDeviceConfiguration(memory_limit=64),
                                             C.LogicalDeviceConfiguration(memory_limit=64)])
    C.set_memory_growth(gpu, False)  # one region: the room left is exact


def test_dense_bias_out_of_memory_leaves_the_layer_unbuilt():
    _preallocated_64mib()
    with vdev.device("GPU:0"):
        x = vdev.constant(np.zeros((1, UNITS), np.float32))
        layer = vdev.layers.Dense(UNITS, bias_initializer="ones")
        before = _cur()
        room = C.experimental.get_memory_info("GPU:0")["limit"] - before - KERNEL_BYTES
        filler = vdev.zeros([room // 4])  # the kernel fits, its bias does not
        with pytest.raises(vdev.errors.OutOfMemoryError) as e:
            layer(x)
        assert str(e.value) == (
            "OOM when allocating tensor with shape[512] and type float (2.00 KiB) on "
            "/job:localhost/replica:0/task:0/device:GPU:0: 64.00 MiB in use of 64.00 MiB "
            "limit, largest free block 0 B; the limit is short by 2.00 KiB; would help: a "
            "larger limit, a smaller batch")
        e = None
        assert not layer.built
        assert layer.kernel is None and layer.bias is None
        assert layer.variables == [] and layer.weights == []
        assert _cur() == before + room  # the kernel went back
        del filler
        gc.collect()
        y = layer(x)  # built whole now: zero input, so the output is the bias
        assert layer.built and len(layer.trainable_variables) == 2
        np.testing.assert_array_equal(y.numpy(), np.ones((1, UNITS), np.float32))
        assert _cur() == before + KERNEL_BYTES + UNITS * 4 + UNITS * 4  # kernel, bias, y


def test_dense_bias_initializer_that_raises_leaves_the_layer_unbuilt():
    calls = []

    def flaky_ones(shape, dtype=None):
        calls.append(shape)
        if len(calls) == 1:
            raise RuntimeError("bias source not ready")
        return np.ones(shape, np.float32)

    with vdev.device("GPU:0"):
        x = vdev.constant(np.zeros((2, 8), np.float32))
        before = _cur()
        layer = vdev.layers.Dense(4, bias_initializer=flaky_ones)
        with pytest.raises(RuntimeError, match="^bias source not ready$"):
            layer(x)
        assert not layer.built and layer.variables == []
        assert _cur() == before
        np.testing.assert_array_equal(layer(x).numpy(), np.ones((2, 4), np.float32))
        assert [v.name for v in layer.weights] == [layer.name + "/kernel", layer.name + "/bias"]


def test_conv2d_bias_initializer_that_raises_leaves_the_layer_unbuilt():
    """Conv2D builds its weights as Dense does: all or nothing."""
    calls = []

    def flaky_ones(shape, dtype=None):
        calls.append(shape)
        if len(calls) == 1:
            raise RuntimeError("bias source not ready")
        return np.ones(shape, np.float32)

    with vdev.device("GPU:0"):
        x = vdev.constant(np.zeros((1, 4, 4, 2), np.float32))
        before = _cur()
        layer = vdev.layers.Conv2D(3, 2, bias_initializer=flaky_ones)
        with pytest.raises(RuntimeError, match="^bias source not ready$"):
            layer(x)
        assert not layer.built and layer.variables == []
        assert _cur() == before
        np.testing.assert_array_equal(layer(x).numpy(), np.ones((1, 3, 3, 3), np.float32))
        assert [v.name for v in layer.weights] == [layer.name + "/kernel", layer.name + "/bias"]
