#!/usr/bin/env python3
"""conv_vs_torch.py — vdev's 2-D convolution against PyTorch's on the CPU,
side by side in one run: the forward op alone (vdev.nn.conv2d, NHWC and HWIO,
against torch.nn.functional.conv2d on the same values as NCHW and OIHW;
dilated too) and a forward with the gradients of the input and the filter (GradientTape
against autograd), for a few shapes of a small convolutional net. vdev's
host convolution and its gradients are im2col (col2im) and OpenBLAS's sgemm;
PyTorch's are its own (oneDNN in Debian's build, USE_MKLDNN=ON). Both run in
the same environment; PyTorch's threads are set to vdev's budget
(OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs the process may
use). Each figure is the median and the minimum, in ms, of
turns of several calls after a warm-up; the outputs and the gradients are
checked to agree before anything is timed. Prints a Markdown table; then a
second one for the depthwise convolution (vdev.nn.depthwise_conv2d, filter
[KH,KW,C,M], against F.conv2d with groups=C on the filter as [C*M,1,KH,KW]),
alone with --depthwise.

Usage: PYTHONPATH=python VDEV_LIBRARY=build/libvdev.so \\
       python3 bench/conv_vs_torch.py [--quick] [--depthwise]"""
import os
import statistics
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # torch missing or broken: nothing to compare with
    print(f"conv_vs_torch: PyTorch not available ({e})", file=sys.stderr)
    sys.exit(77)
import vdev

# (batch, height, width, in channels, out channels, kernel, stride, padding,
# dilation)
SHAPES = [(32, 28, 28, 1, 16, 3, 1, "SAME", 1),
          (32, 14, 14, 16, 32, 3, 1, "SAME", 1),
          (32, 14, 14, 32, 32, 3, 2, "VALID", 1),
          (8, 56, 56, 64, 64, 3, 1, "SAME", 1),
          (32, 14, 14, 16, 32, 3, 1, "SAME", 2),
          (8, 56, 56, 64, 64, 3, 1, "SAME", 2)]


# depthwise: (batch, height, width, channels, multiplier, kernel, stride,
# padding), the depthwise layers of small MobileNet-style nets
DEPTHWISE = [(32, 28, 28, 32, 1, 3, 1, "SAME"),
             (32, 14, 14, 64, 1, 3, 2, "VALID"),
             (8, 56, 56, 64, 1, 3, 1, "SAME"),
             (8, 56, 56, 32, 2, 5, 1, "SAME")]


def budget():
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        v = os.environ.get(name, "").split(",")[0].strip()
        if v.isdigit() and int(v) >= 1:
            return int(v)
    return len(os.sched_getaffinity(0))


def timed(fn, calls, turns):
    fn()  # warm-up
    ms = []
    for _ in range(turns):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        ms.append((time.perf_counter() - t) * 1e3 / calls)
    return statistics.median(ms), min(ms)


def depthwise(calls, turns, rng):
    """The depthwise table: the same measures as main()'s."""
    print("| input NHWC | filter KH,KW,C,M | stride, padding | vdev forward ms (median, min) | "
          "PyTorch forward ms | vdev forward+grads ms | PyTorch forward+grads ms |")
    print("|---|---|---|---:|---:|---:|---:|")
    with vdev.device("CPU:0"):
        for n, h, w, c, m, k, s, pad in DEPTHWISE:
            x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
            f = rng.uniform(-1, 1, (k, k, c, m)).astype(np.float32)
            vx, vf = vdev.Variable(x), vdev.Variable(f)
            st = [1, s, s, 1]
            tx = torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).requires_grad_()
            # output channel c*M+m is weight row c*M+m: filter[:, :, c, m]
            tf_ = torch.from_numpy(f.transpose(2, 3, 0, 1).reshape(c * m, 1, k, k).copy())
            tf_.requires_grad_()
            tpad = "same" if pad == "SAME" else 0
            if pad == "SAME" and s != 1:
                raise SystemExit("conv_vs_torch: PyTorch has no padding='same' with strides")

            def tconv():
                return F.conv2d(tx, tf_, stride=s, padding=tpad, groups=c)

            want = tconv().detach().numpy()
            got = vdev.nn.depthwise_conv2d(vx, vf, st, pad).numpy().transpose(0, 3, 1, 2)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            with vdev.GradientTape() as tape:
                y = vdev.reduce_sum(vdev.nn.depthwise_conv2d(vx, vf, st, pad))
            gx, gf = tape.gradient(y, [vx, vf])
            tconv().sum().backward()
            np.testing.assert_allclose(gx.numpy().transpose(0, 3, 1, 2), tx.grad.numpy(),
                                       rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(gf.numpy().transpose(2, 3, 0, 1).reshape(c * m, 1, k, k),
                                       tf_.grad.numpy(), rtol=1e-4, atol=1e-2)

            def v_fwd():
                vdev.nn.depthwise_conv2d(vx, vf, st, pad)

            def t_fwd():
                with torch.no_grad():
                    tconv()

            def v_grad():
                with vdev.GradientTape() as tape:
                    y = vdev.reduce_sum(vdev.nn.depthwise_conv2d(vx, vf, st, pad))
                tape.gradient(y, [vx, vf])

            def t_grad():
                tx.grad = tf_.grad = None
                tconv().sum().backward()

            vf_ms, tf_ms = timed(v_fwd, calls, turns), timed(t_fwd, calls, turns)
            vg_ms, tg_ms = timed(v_grad, calls, turns), timed(t_grad, calls, turns)
            print("| [%d,%d,%d,%d] | %dx%dx%dx%d | %d, %s | %.2f, %.2f | %.2f, %.2f | %.2f, "
                  "%.2f | %.2f, %.2f |" % (n, h, w, c, k, k, c, m, s, pad, *vf_ms, *tf_ms,
                                           *vg_ms, *tg_ms))


def main():
    quick = "--quick" in sys.argv[1:]
    calls, turns = (2, 3) if quick else (5, 7)
    torch.set_num_threads(budget())
    rng = np.random.default_rng(1)
    if "--depthwise" in sys.argv[1:]:
        depthwise(calls, turns, rng)
        print("\nPyTorch %s, %d threads; vdev through its Python package on CPU:0."
              % (torch.__version__, torch.get_num_threads()))
        return
    print("| input NHWC | filter | stride, padding, dilation | vdev forward ms (median, min) | "
          "PyTorch forward ms | vdev forward+grads ms | PyTorch forward+grads ms |")
    print("|---|---|---|---:|---:|---:|---:|")
    with vdev.device("CPU:0"):
        for n, h, w, c, o, k, s, pad, d in SHAPES:
            x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
            f = rng.uniform(-1, 1, (k, k, c, o)).astype(np.float32)
            vx, vf = vdev.Variable(x), vdev.Variable(f)  # vdev differentiates Variables
            tx = torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).requires_grad_()
            tf_ = torch.from_numpy(f.transpose(3, 2, 0, 1).copy()).requires_grad_()
            tpad = "same" if pad == "SAME" else 0
            if pad == "SAME" and s != 1:
                raise SystemExit("conv_vs_torch: PyTorch has no padding='same' with strides")
            want = F.conv2d(tx, tf_, stride=s, padding=tpad, dilation=d).detach().numpy()
            got = vdev.nn.conv2d(vx, vf, s, pad, dilations=d).numpy().transpose(0, 3, 1, 2)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            # and the gradients of the sum of the output (sums of up to N*OH*OW terms)
            with vdev.GradientTape() as tape:
                y = vdev.reduce_sum(vdev.nn.conv2d(vx, vf, s, pad, dilations=d))
            gx, gf = tape.gradient(y, [vx, vf])
            F.conv2d(tx, tf_, stride=s, padding=tpad, dilation=d).sum().backward()
            np.testing.assert_allclose(gx.numpy().transpose(0, 3, 1, 2), tx.grad.numpy(),
                                       rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(gf.numpy().transpose(3, 2, 0, 1), tf_.grad.numpy(),
                                       rtol=1e-4, atol=1e-2)

            # the cpu backend runs an op on the calling thread: done when it returns
            def v_fwd():
                vdev.nn.conv2d(vx, vf, s, pad, dilations=d)

            def t_fwd():
                with torch.no_grad():
                    F.conv2d(tx, tf_, stride=s, padding=tpad, dilation=d)

            def v_grad():
                with vdev.GradientTape() as tape:
                    y = vdev.reduce_sum(vdev.nn.conv2d(vx, vf, s, pad, dilations=d))
                tape.gradient(y, [vx, vf])

            def t_grad():
                tx.grad = tf_.grad = None
                F.conv2d(tx, tf_, stride=s, padding=tpad, dilation=d).sum().backward()

            vf_ms, tf_ms = timed(v_fwd, calls, turns), timed(t_fwd, calls, turns)
            vg_ms, tg_ms = timed(v_grad, calls, turns), timed(t_grad, calls, turns)
            print("| [%d,%d,%d,%d] | %dx%dx%dx%d | %d, %s, %d | %.2f, %.2f | %.2f, %.2f | %.2f, "
                  "%.2f | %.2f, %.2f |" % (n, h, w, c, k, k, c, o, s, pad, d, *vf_ms, *tf_ms,
                                           *vg_ms, *tg_ms))
    print()
    depthwise(calls, turns, rng)
    print("\nPyTorch %s, %d threads; vdev through its Python package on CPU:0 (ops run on "
          "the calling thread)." % (torch.__version__, torch.get_num_threads()))


if __name__ == "__main__":
    main()
