/* ops_convt_expect.h — the expected results of test_ops.c's transposed 2-D
 * convolution cases (ops_convt_case.h), from a direct scatter loop in
 * double precision: each input pixel (n, r, q) times each filter tap (u, w)
 * added at output row r s - pad_top + u d and column q s - pad_left + w d,
 * where that lies inside the output; the padding before is Conv2D's on the
 * output's size. Included by ops_expect.h after ops_expect_shaped.h. */
#ifndef VDEV_TESTS_OPS_CONVT_EXPECT_H
#define VDEV_TESTS_OPS_CONVT_EXPECT_H

/* Conv2DTranspose (input, filter) into [i[2], j[2], j[3], f[1]]. */
static void convt_expect(const struct tcase *c, struct texp *e)
{
    const struct hin *in = &c->in[0], *fl = &c->in[1];
    int64_t ys[4] = {c->p.i[2], c->p.j[2], c->p.j[3], (int64_t)c->p.f[1]};
    int64_t n = in->shape[0], h = in->shape[1], w = in->shape[2], o = in->shape[3];
    int64_t kh = fl->shape[0], kw = fl->shape[1], cc = fl->shape[2];
    int64_t s[2] = {c->p.i[0], c->p.i[1]};
    int64_t d[2] = {c->p.j[0] > 1 ? c->p.j[0] : 1, c->p.j[1] > 1 ? c->p.j[1] : 1};
    int64_t k[2] = {(kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1}, pad[2];
    for (int a = 0; a < 2; a++) {
        /* the padding before of Conv2D on the output's size: half of what
         * SAME needs, rounded down */
        int64_t total = (in->shape[1 + a] - 1) * s[a] + k[a] - ys[1 + a];
        pad[a] = c->p.f[0] == VDEV_PAD_SAME && total > 0 ? total / 2 : 0;
    }
    free(e->v[0]);
    exp_out(e, 0, ys, 4, VDEV_F32);
    double *v = e->v[0];
    const float *x = F(c, 0), *f = F(c, 1);
    for (int64_t b = 0; b < n; b++)
        for (int64_t r = 0; r < h; r++)
            for (int64_t q = 0; q < w; q++)
                for (int64_t u = 0; u < kh; u++)
                    for (int64_t t = 0; t < kw; t++) {
                        int64_t i = r * s[0] - pad[0] + u * d[0];
                        int64_t j = q * s[1] - pad[1] + t * d[1];
                        if (i < 0 || j < 0 || i >= ys[1] || j >= ys[2])
                            continue;
                        for (int64_t ci = 0; ci < cc; ci++)
                            for (int64_t oc = 0; oc < o; oc++)
                                v[((b * ys[1] + i) * ys[2] + j) * cc + ci] +=
                                    (double)x[((b * h + r) * w + q) * o + oc] *
                                    f[((u * kw + t) * cc + ci) * o + oc];
                    }
    e->atol = 1e-5;
    e->rtol = 1e-5;
}
#endif
