/* ops_expect_depthwise.h — the expected results of the depthwise cases
 * (ops_cases_depthwise.h), by direct loops in double precision from the
 * definition: each output pixel's window walked from its top-left corner
 * (cgeom_of's geometry: padding before, half of what SAME needs, rounded
 * down), output channel c*M+m the window of input channel c against
 * filter[:,:,c,m]; the gradients scattered from each output element back
 * onto the input elements and filter taps it read. Included by
 * ops_expect.h after ops_expect_shaped.h. */
#ifndef VDEV_TESTS_OPS_EXPECT_DEPTHWISE_H
#define VDEV_TESTS_OPS_EXPECT_DEPTHWISE_H

static void depthwise_expect(const struct tcase *c, struct texp *e)
{
    /* the geometry of a Conv2D of this x, window, strides and dilations */
    struct tcase cc = *c;
    cc.op = VDEV_OP_CONV2D;
    struct cgeom g;
    cgeom_of(&cc, &g);
    int64_t m_n = c->in[1].shape[3], cm = g.c * m_n;
    const float *x = F(c, 0), *f = F(c, 1);
    const float *dy = c->op == VDEV_OP_DEPTHWISE_CONV2D ? NULL : F(c, 2);
    int64_t ysh[4] = {g.n, g.oh, g.ow, cm};
    free(e->v[0]);
    if (c->op == VDEV_OP_DEPTHWISE_CONV2D)
        exp_out(e, 0, ysh, 4, VDEV_F32);
    else
        exp_out(e, 0, c->in[c->op == VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER ? 1 : 0].shape, 4,
                VDEV_F32);
    double *v = e->v[0];
    for (int64_t b = 0; b < g.n; b++)
        for (int64_t r = 0; r < g.oh; r++)
            for (int64_t q = 0; q < g.ow; q++)
                for (int64_t ci = 0; ci < g.c; ci++)
                    for (int64_t m = 0; m < m_n; m++) {
                        int64_t yi = ((b * g.oh + r) * g.ow + q) * cm + ci * m_n + m;
                        for (int64_t u = 0; u < g.kh; u++)
                            for (int64_t w = 0; w < g.kw; w++) {
                                int64_t i = r * g.s[0] + u * g.d[0] - g.pt;
                                int64_t j = q * g.s[1] + w * g.d[1] - g.pl;
                                if (i < 0 || j < 0 || i >= g.h || j >= g.w)
                                    continue;
                                int64_t xi = ((b * g.h + i) * g.w + j) * g.c + ci;
                                int64_t fi = (u * g.kw + w) * cm + ci * m_n + m;
                                if (c->op == VDEV_OP_DEPTHWISE_CONV2D)
                                    v[yi] += (double)x[xi] * f[fi];
                                else if (c->op == VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT)
                                    v[xi] += (double)dy[yi] * f[fi];
                                else
                                    v[fi] += (double)dy[yi] * x[xi];
                            }
                    }
    /* sums of up to a few hundred products of |.| <= 1, rounded once */
    e->atol = 1e-5;
    e->rtol = 1e-5;
}

#endif
