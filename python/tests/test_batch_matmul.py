"""vdev.matmul (and @) of tensors of rank 3 and 4, TensorFlow's
BatchMatMulV2: values against NumPy's matmul for every transpose pair and
broadcast batches (either operand with fewer batch axes, a batch of 1, a
2-D operand), gradients of both operands against torch's, on the CPU and a
simulated GPU; TensorFlow's errors in its words."""
import numpy as np
import pytest
import torch

import vdev
from vdev.errors import InvalidArgumentError

rng = np.random.default_rng(20261206)
f32 = np.float32

SHAPES = [((2, 3, 4), (2, 4, 5)), ((3, 2, 4), (4, 5)), ((3, 4), (2, 4, 5)),
          ((1, 3, 4), (3, 4, 2)), ((2, 1, 3, 4), (3, 4, 2)), ((2, 3, 2, 3), (1, 3, 3, 2)),
          ((2, 2, 3, 4), (4, 2))]


def swap(a):
    return np.swapaxes(a, -1, -2)


@pytest.mark.parametrize("dev", ["CPU:0", "GPU:1"])
def test_values_and_gradients(dev):
    for sa, sb in SHAPES:
        for ta in (False, True):
            for tb in (False, True):
                a = rng.uniform(-1, 1, sa).astype(f32)
                b = rng.uniform(-1, 1, sb).astype(f32)
                a_in, b_in = (swap(a).copy() if ta else a), (swap(b).copy() if tb else b)
                with vdev.device(dev):
                    av, bv = vdev.Variable(a_in), vdev.Variable(b_in)
                    with vdev.GradientTape() as tape:
                        y = vdev.matmul(av, bv, transpose_a=ta, transpose_b=tb)
                        r = rng.uniform(-1, 1, tuple(y.shape)).astype(f32)
                        loss = vdev.reduce_sum(y * r)
                    ga, gb = tape.gradient(loss, [av, bv])
                assert y.device.endswith(dev)
                want = np.matmul(a.astype(np.float64), b.astype(np.float64))
                np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
                at = torch.tensor(a_in, dtype=torch.float64, requires_grad=True)
                bt = torch.tensor(b_in, dtype=torch.float64, requires_grad=True)
                ty = torch.matmul(at.transpose(-1, -2) if ta else at,
                                  bt.transpose(-1, -2) if tb else bt)
                tga, tgb = torch.autograd.grad((ty * torch.tensor(r, dtype=torch.float64)).sum(),
                                               [at, bt])
                np.testing.assert_allclose(ga.numpy(), tga.numpy(), rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(gb.numpy(), tgb.numpy(), rtol=1e-5, atol=1e-5)
    # the operator and adjoint_a/adjoint_b
    a = rng.uniform(-1, 1, (2, 3, 4)).astype(f32)
    b = rng.uniform(-1, 1, (2, 5, 4)).astype(f32)
    np.testing.assert_allclose((vdev.constant(a) @ vdev.constant(swap(b).copy())).numpy(),
                               a @ swap(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vdev.matmul(a, b, adjoint_b=True).numpy(), a @ swap(b),
                               rtol=1e-5, atol=1e-6)
    assert vdev.matmul(np.zeros((0, 3, 4), f32), np.zeros((4, 2), f32)).shape == (0, 3, 2)


def test_errors():
    a = np.zeros((2, 3, 4), f32)
    cases = [
        (lambda: vdev.matmul(a, np.zeros((3, 4, 5), f32)),
         "BatchMatMulV2: In[0] and In[1] must have compatible batch dimensions: [2,3,4] vs. "
         "[3,4,5]"),
        (lambda: vdev.matmul(a, np.zeros((2, 5, 6), f32)),
         "BatchMatMulV2: Matrix size-incompatible: In[0]: [2,3,4], In[1]: [2,5,6]"),
        (lambda: vdev.matmul(np.zeros(4, f32), a),
         "BatchMatMulV2: In[0] ndims must be >= 2: 1"),
    ]
    for call, msg in cases:
        with pytest.raises(InvalidArgumentError) as e:
            call()
        assert str(e.value) == msg
