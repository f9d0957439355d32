/* ops_cases_depthwise.h — the case builders of test_ops.c for depthwise
 * 2-D convolution (DepthwiseConv2dNative and its two gradient ops): x
 * [N,H,W,C] per size as the convolutions' (CONV_X of ops_cases_shaped.h:
 * size 0 an empty batch, size 4 none), filter [KH,KW,C,M] with M 2 (1 at
 * size 1); var 0..3 a 3x2 window, bit 0 stride 2, bit 1 SAME; var 4 a 1x1
 * window, M 3; var 5 dilations 2x1 VALID; var 6 dilations 2x3 SAME at
 * stride 2; var 7 M 0 (an output without channels, zero gradients). A
 * window that does not fit a VALID input is taken 1 tap high or wide. The
 * gradient ops get dy of the forward output's shape. Included by
 * ops_cases.h after ops_cases_shaped.h. */
#ifndef VDEV_TESTS_OPS_CASES_DEPTHWISE_H
#define VDEV_TESTS_OPS_CASES_DEPTHWISE_H

static int depthwise_case(struct tcase *c, enum vdev_op op, int size, int var)
{
    if (size == 4 || var > 7)
        return 0;
    const int64_t *xs = CONV_X[size];
    int64_t dh = var == 5 || var == 6 ? 2 : 1, dw = var == 6 ? 3 : 1;
    int64_t kh = var == 4 || xs[1] < 3 ? 1 : 3, kw = var == 4 || xs[2] < 2 ? 1 : 2;
    int64_t st = var == 6 || (var < 4 && (var & 1)) ? 2 : 1;
    int same = var == 6 || (var < 4 && (var & 2));
    if (!same && (kh - 1) * dh + 1 > xs[1])
        kh = 1;
    if (!same && (kw - 1) * dw + 1 > xs[2])
        kw = 1;
    int64_t eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
    int64_t m = var == 7 ? 0 : var == 4 ? 3 : size == 1 ? 1 : 2;
    int64_t fs[4] = {kh, kw, xs[3], m};
    int64_t ys[4] = {xs[0], conv_out_dim(xs[1], eh, st, same), conv_out_dim(xs[2], ew, st, same),
                     xs[3] * m};
    in_f(c, 0, xs, 4, -1, 1);
    in_f(c, 1, fs, 4, -1, 1);
    if (op != VDEV_OP_DEPTHWISE_CONV2D)
        in_f(c, 2, ys, 4, -1, 1);
    c->p.i[0] = c->p.i[1] = st;
    c->p.j[0] = dh;
    c->p.j[1] = dw;
    c->p.f[0] = same ? VDEV_PAD_SAME : VDEV_PAD_VALID;
    snprintf(c->desc, sizeof c->desc,
             "%s x [%lld,%lld,%lld,%lld] window %lldx%lld multiplier %lld stride %lld "
             "dilation %lldx%lld %s",
             vdev_op_defs[op].name, (long long)xs[0], (long long)xs[1], (long long)xs[2],
             (long long)xs[3], (long long)kh, (long long)kw, (long long)m, (long long)st,
             (long long)dh, (long long)dw, same ? "SAME" : "VALID");
    return 1;
}

#endif
