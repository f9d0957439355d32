/* op_cases_depthwise.h — the cases of op_cases.h's list for depthwise 2-D
 * convolution (cuda_depthwise.cu: DepthwiseConv2dNative and its two
 * gradient ops): strides 1 and 2, both paddings, channel multipliers 1 to
 * 3, dilations, a 1x1 window, an empty batch (the filter's gradient zeros),
 * a multiplier of 0 (an output without channels, the input's gradient
 * zeros), a window larger than the input (an empty output), and on a GPU
 * grids of more elements than it has threads. Included by op_cases.h after
 * op_cases_shaped.h; op_cases() calls op_cases_depthwise() last. */
#ifndef VDEV_OP_CASES_DEPTHWISE_H
#define VDEV_OP_CASES_DEPTHWISE_H

/* The three ops on x [nb,h,w,c] and a filter [kh,kw,c,m] with parameters
 * p, dy of the forward output's shape. */
static void depthwise_cases(const char *what, struct vdev_op_params p, int64_t nb, int64_t h,
                            int64_t w, int64_t c, int64_t kh, int64_t kw, int64_t m)
{
    int same = p.f[0] == VDEV_PAD_SAME;
    int64_t dh = p.j[0] > 1 ? p.j[0] : 1, dw = p.j[1] > 1 ? p.j[1] : 1;
    int64_t oh = conv_dim(h, (kh - 1) * dh + 1, p.i[0], same);
    int64_t ow = conv_dim(w, (kw - 1) * dw + 1, p.i[1], same);
    CASE(what, VDEV_OP_DEPTHWISE_CONV2D, p, 0, TF(G_UNIFORM, 4, nb, h, w, c),
         TF(G_UNIFORM, 4, kh, kw, c, m));
    CASE(what, VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT, p, 0, TF(G_UNIFORM, 4, nb, h, w, c),
         TF(G_UNIFORM, 4, kh, kw, c, m), TF(G_UNIFORM, 4, nb, oh, ow, c * m));
    CASE(what, VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER, p, 0, TF(G_UNIFORM, 4, nb, h, w, c),
         TF(G_UNIFORM, 4, kh, kw, c, m), TF(G_UNIFORM, 4, nb, oh, ow, c * m));
}

static void op_cases_depthwise(void)
{
    for (int v = 0; v < 4; v++) {
        int64_t s = v & 1 ? 2 : 1, m = v == 3 ? 1 : v == 2 ? 3 : 2;
        int same = (v & 2) != 0;
        depthwise_cases(same ? "SAME" : "VALID", conv_params(same, s, s, 0, 0), BIG(8, 2),
                        BIG(30, 9), BIG(27, 7), BIG(32, 3), 3, 2, m);
    }
    /* dilated: 2x3 VALID at stride 1, 3x2 SAME at stride 2 */
    struct vdev_op_params pd = conv_params(0, 1, 1, 0, 0);
    pd.j[0] = 2;
    pd.j[1] = 3;
    depthwise_cases("dilated VALID", pd, BIG(4, 2), BIG(30, 11), BIG(27, 9), BIG(16, 3), 3, 2,
                    2);
    pd = conv_params(1, 2, 2, 0, 0);
    pd.j[0] = 3;
    pd.j[1] = 2;
    depthwise_cases("dilated SAME", pd, BIG(4, 2), BIG(30, 11), BIG(27, 9), BIG(16, 3), 3, 3,
                    2);
    struct vdev_op_params c1 = conv_params(0, 1, 1, 0, 0);
    depthwise_cases("1x1", c1, 2, 5, 6, 7, 1, 1, 2);
    depthwise_cases("empty batch", c1, 0, 5, 6, 2, 3, 3, 2);
    depthwise_cases("multiplier 0", c1, 2, 5, 6, 2, 3, 3, 0);
    depthwise_cases("empty output", conv_params(0, 2, 2, 0, 0), 2, 2, 2, 2, 3, 3, 2);
    /* a filter of more elements than threads on a small image */
    depthwise_cases("large filter", conv_params(1, 1, 1, 0, 0), 1, BIG(8, 6), BIG(8, 6),
                    BIG(512, 32), 5, 5, BIG(4, 2));
}

#endif /* VDEV_OP_CASES_DEPTHWISE_H */
