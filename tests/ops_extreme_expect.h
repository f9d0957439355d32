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
    if (c->op == VDEV_OP_FLOOR || c->op == VDEV_OP_CEIL || c->op == VDEV_OP_ROUND) {
        exp_out(e, 0, x->shape, x->ndim, x->dtype);
        for (int64_t i = 0; i < x->n; i++) {
            double v = is_int ? (double)I(c, 0)[i] : (double)F(c, 0)[i];
            /* nearbyint: ties to even in the default rounding mode */
            e->v[0][i] = is_int ? v : c->op == VDEV_OP_FLOOR ? floor(v)
                                  : c->op == VDEV_OP_CEIL  ? ceil(v)
                                                           : nearbyint(v);
        }
        return;
    }
    if (c->op == VDEV_OP_FLOOR_DIV || c->op == VDEV_OP_FLOOR_MOD) {
        int64_t osh[VDEV_MAX_DIMS];
        int ond = bcast_out(c, osh);
        exp_out(e, 0, osh, ond, x->dtype);
        for (int64_t i = 0; i < e->numel[0]; i++) {
            int64_t j0 = bcast_at(&c->in[0], osh, ond, i), j1 = bcast_at(&c->in[1], osh, ond, i);
            if (is_int) {
                int64_t u = I(c, 0)[j0], v = I(c, 1)[j1];
                if (v == 0) {
                    e->v[0][i] = 0;
                } else if (c->op == VDEV_OP_FLOOR_DIV) { /* exact: floor of the rational */
                    double q = floor((double)u / (double)v);
                    e->v[0][i] = q == 2147483648.0 ? -2147483648.0 : q;
                } else {
                    int64_t m = u - v * (int64_t)floor((double)u / (double)v);
                    e->v[0][i] = (double)m;
                }
            } else {
                float u = F(c, 0)[j0], v = F(c, 1)[j1];
                if (c->op == VDEV_OP_FLOOR_DIV) {
                    e->v[0][i] = floor((double)(u / v));
                } else {
                    double m = fmod((double)u, (double)v); /* exact, as fmodf */
                    e->v[0][i] = m != 0.0 && ((v < 0) != (m < 0)) ? (double)(float)(m + v) : m;
                }
            }
        }
        return;
    }
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
