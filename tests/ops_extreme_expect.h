/* ops_extreme_expect.h — the expected results of test_ops.c's Max, Min,
 * Abs and Sign cases (ops_extreme_case.h): each output element from a walk
 * of its row here (a NaN the result, no element the identity), |x| and
 * numpy's sign written out; exact. Included by ops_expect.h. */
#ifndef VDEV_TESTS_OPS_EXTREME_EXPECT_H
#define VDEV_TESTS_OPS_EXTREME_EXPECT_H

static void extreme_expect(const struct tcase *c, struct texp *e)
{
    const struct hin *x = &c->in[0];
    int is_int = x->dtype == VDEV_I32;
    free(e->v[0]);
    e->atol = e->rtol = 0.0;
    if (c->op == VDEV_OP_ABS || c->op == VDEV_OP_SIGN) {
        exp_out(e, 0, x->shape, x->ndim, x->dtype);
        for (int64_t i = 0; i < x->n; i++) {
            double v = is_int ? (double)I(c, 0)[i] : (double)F(c, 0)[i];
            if (c->op == VDEV_OP_ABS)
                e->v[0][i] = is_int && I(c, 0)[i] == INT32_MIN ? (double)INT32_MIN : fabs(v);
            else
                e->v[0][i] = v > 0 ? 1.0 : v < 0 ? -1.0 : v == 0 ? 0.0 : v;
        }
        return;
    }
    int nd = x->ndim, is_max = c->op == VDEV_OP_MAX;
    int64_t ax = c->p.i[0], outer = 1, len = x->n, inner = 1;
    int64_t shape[VDEV_MAX_DIMS];
    int ond = 0;
    if (ax != VDEV_AXIS_ALL) {
        ax = ax < 0 ? ax + nd : ax;
        len = x->shape[ax];
        for (int d = 0; d < nd; d++) {
            if (d < ax)
                outer *= x->shape[d];
            if (d > ax)
                inner *= x->shape[d];
            if (d != ax || c->p.i[1])
                shape[ond++] = d == ax ? 1 : x->shape[d];
        }
    }
    exp_out(e, 0, shape, ond, x->dtype);
    for (int64_t p = 0; p < outer; p++)
        for (int64_t j = 0; j < inner; j++) {
            double r = is_int ? (is_max ? (double)INT32_MIN : (double)INT32_MAX)
                              : (is_max ? -INFINITY : INFINITY);
            for (int64_t l = 0; l < len; l++) {
                int64_t at = (p * len + l) * inner + j;
                double v = is_int ? (double)I(c, 0)[at] : (double)F(c, 0)[at];
                if (v != v) {
                    r = v;
                    break;
                }
                r = is_max ? (v > r ? v : r) : (v < r ? v : r);
            }
            e->v[0][p * inner + j] = r;
        }
}
#endif
