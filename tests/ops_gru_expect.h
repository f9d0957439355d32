/* ops_gru_expect.h — the expected results of test_ops.c's fused GRU cell
 * cases (ops_gru_case.h), from the cell's formulas in double: z = s(xw_z +
 * inner_z), r = s(xw_r + inner_r), hh = tanh(xw_h + r inner_h), h = z h_prev
 * + (1 - z) hh, and their derivatives written out (s' = s (1 - s), tanh' =
 * 1 - tanh^2). Included by ops_expect.h. */
#ifndef VDEV_TESTS_OPS_GRU_EXPECT_H
#define VDEV_TESTS_OPS_GRU_EXPECT_H

static void gru_expect(const struct tcase *c, struct texp *e)
{
    int out_h = c->op == VDEV_OP_GRU_CELL_OUTPUT ||
                (c->op == VDEV_OP_GRU_CELL_GRAD && c->p.i[0] == 1);
    const struct hin *gh = &c->in[c->op == VDEV_OP_GRU_CELL_GRAD ? 1 : 0];
    const struct hin *hh_in = &c->in[c->op == VDEV_OP_GRU_CELL_OUTPUT ? 1 : 2];
    int64_t u = gh->shape[gh->ndim - 1] / 3, rows = u ? gh->n / (3 * u) : 0;
    int part = (int)c->p.i[0];
    free(e->v[0]);
    exp_out(e, 0, out_h ? hh_in->shape : gh->shape, gh->ndim, VDEV_F32);
    double *o = e->v[0];
    e->atol = 1e-6;
    e->rtol = 1e-5; /* products and sums rounded to float, which may cancel */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < u; j++) {
            int64_t b = r * 3 * u + j, hb = r * u + j;
            switch (c->op) {
            case VDEV_OP_GRU_GATES: {
                const float *x = F(c, 0), *in = F(c, 1);
                double z = 1.0 / (1.0 + exp(-((double)x[b] + in[b])));
                double rg = 1.0 / (1.0 + exp(-((double)x[b + u] + in[b + u])));
                o[b] = z;
                o[b + u] = rg;
                o[b + 2 * u] = tanh(x[b + 2 * u] + rg * in[b + 2 * u]);
                /* hh's argument is a float sum of two terms, one of them r,
                 * itself the sigmoid of a float sum: its rounding is some ulps
                 * of those magnitudes, r's carried through s' = r (1 - r) and
                 * the inner term it multiplies (test_ops.c scales mag) */
                if (!e->mag[0])
                    e->mag[0] = calloc((size_t)(e->numel[0] + 1), sizeof(double));
                e->mag[0][b + 2 * u] =
                    fabs((double)x[b + 2 * u]) + fabs(rg * in[b + 2 * u]) +
                    fabs((double)in[b + 2 * u]) * rg * (1.0 - rg) *
                        (fabs((double)x[b + u]) + fabs((double)in[b + u]));
                break;
            }
            case VDEV_OP_GRU_GATES_GRAD: {
                const float *dg = F(c, 0), *g = F(c, 1), *in = F(c, 2);
                double dph = dg[b + 2 * u] * (1.0 - (double)g[b + 2 * u] * g[b + 2 * u]);
                double dr = dg[b + u] + dph * in[b + 2 * u];
                o[b] = dg[b] * (double)g[b] * (1.0 - g[b]);
                o[b + u] = dr * g[b + u] * (1.0 - g[b + u]);
                o[b + 2 * u] = part == 0 ? dph : dph * g[b + u];
                break;
            }
            case VDEV_OP_GRU_CELL_OUTPUT: {
                const float *g = F(c, 0), *hp = F(c, 1);
                o[hb] = (double)g[b] * hp[hb] + (1.0 - g[b]) * g[b + 2 * u];
                break;
            }
            default: {
                const float *d = F(c, 0), *g = F(c, 1), *hp = F(c, 2);
                if (part == 1) {
                    o[hb] = (double)d[hb] * g[b];
                } else {
                    o[b] = (double)d[hb] * hp[hb] - (double)d[hb] * g[b + 2 * u];
                    o[b + 2 * u] = d[hb] * (1.0 - g[b]);
                }
                break;
            }
            }
        }
}
#endif
