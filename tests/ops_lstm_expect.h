/* ops_lstm_expect.h — the expected results of test_ops.c's fused LSTM cell
 * cases (ops_lstm_case.h), from the cell's formulas in double: the gates
 * s(i), s(f), tanh(g), s(o) and their derivatives s (1 - s) and 1 - tanh^2,
 * c = a_f c_prev + a_i a_g, h = a_o t and their products' derivatives,
 * written out rather than in the kernels' order of rounding. Included by
 * ops_expect.h. */
#ifndef VDEV_TESTS_OPS_LSTM_EXPECT_H
#define VDEV_TESTS_OPS_LSTM_EXPECT_H

static void lstm_expect(const struct tcase *c, struct texp *e)
{
    e->atol = 1e-6;
    e->rtol = 1e-5; /* a product or two rounded to float, and c's sum may cancel */
    if (c->op == VDEV_OP_LSTM_GATES || c->op == VDEV_OP_LSTM_GATES_GRAD) {
        const struct hin *z = &c->in[0];
        int64_t u = z->shape[z->ndim - 1] / 4;
        const float *x = F(c, 0), *y = c->n_in > 1 ? F(c, 1) : NULL;
        for (int64_t i = 0; u && i < z->n; i++) {
            int g = (int)((i % (4 * u)) / u) == 2;
            if (c->op == VDEV_OP_LSTM_GATES)
                e->v[0][i] = g ? tanh(x[i]) : 1.0 / (1.0 + exp(-(double)x[i]));
            else
                e->v[0][i] = g ? x[i] * (1.0 - (double)y[i] * y[i])
                               : x[i] * (double)y[i] * (1.0 - y[i]);
        }
        return;
    }
    int grad = c->op == VDEV_OP_LSTM_CELL_GRAD, part = grad ? (int)c->p.i[0] : 0;
    const struct hin *ah = &c->in[grad], *xh = &c->in[grad + 1];
    const float *a = F(c, grad), *x = F(c, grad + 1), *dy = grad ? F(c, 0) : NULL;
    int64_t u = xh->shape[xh->ndim - 1], n = xh->n;
    int wide = grad && (part == 0 || part == 2);
    free(e->v[0]);
    exp_out(e, 0, wide ? ah->shape : xh->shape, xh->ndim, VDEV_F32);
    double *o = e->v[0];
    for (int64_t el = 0; u && el < n; el++) {
        int64_t b = (el / u) * 4 * u + el % u;
        double gi = a[b], gf = a[b + u], gg = a[b + 2 * u], go = a[b + 3 * u];
        if (c->op == VDEV_OP_LSTM_CELL_STATE)
            o[el] = gf * x[el] + gi * gg;
        else if (c->op == VDEV_OP_LSTM_CELL_OUTPUT)
            o[el] = go * x[el];
        else if (part == 0) {
            o[b] = dy[el] * gg;
            o[b + u] = dy[el] * (double)x[el];
            o[b + 2 * u] = dy[el] * gi;
        } else if (part == 1)
            o[el] = dy[el] * gf;
        else if (part == 2)
            o[b + 3 * u] = dy[el] * (double)x[el];
        else
            o[el] = dy[el] * go;
    }
}
#endif
