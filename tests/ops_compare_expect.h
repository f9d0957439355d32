/* ops_compare_expect.h — the expected results of test_ops.c's cases of the
 * comparisons, the logical ops, Cast and SelectV2 (ops_compare_case.h), each
 * element worked out by itself from its inputs' elements found by numpy's
 * broadcasting (multi-index, the inputs aligned at their last axes); exact.
 * Included by ops_expect.h. */
#ifndef VDEV_TESTS_OPS_COMPARE_EXPECT_H
#define VDEV_TESTS_OPS_COMPARE_EXPECT_H

/* The broadcast shape of the inputs of c (numpy's rule; the cases' shapes
 * always broadcast). */
static int bcast_out(const struct tcase *c, int64_t *shape)
{
    int nd = 0;
    for (int k = 0; k < c->n_in; k++)
        nd = c->in[k].ndim > nd ? c->in[k].ndim : nd;
    for (int d = 0; d < nd; d++) {
        shape[d] = 1;
        for (int k = 0; k < c->n_in; k++) {
            int dk = d - (nd - c->in[k].ndim);
            int64_t s = dk >= 0 ? c->in[k].shape[dk] : 1;
            shape[d] = s != 1 ? s : shape[d];
        }
    }
    return nd;
}

/* The element of input h that pairs with element i of an output of shape
 * [nd]: its multi-index, aligned at the last axis, 0 along h's axes of 1. */
static int64_t bcast_at(const struct hin *h, const int64_t *shape, int nd, int64_t i)
{
    int64_t at = 0, stride = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t idx = i % shape[d];
        i /= shape[d];
        int dh = d - (nd - h->ndim);
        if (dh < 0)
            break;
        at += (h->shape[dh] == 1 ? 0 : idx) * stride;
        stride *= h->shape[dh];
    }
    return at;
}

static void compare_expect(const struct tcase *c, struct texp *e)
{
    int64_t shape[VDEV_MAX_DIMS];
    int nd = bcast_out(c, shape);
    free(e->v[0]);
    e->atol = e->rtol = 0.0;
    if (c->op == VDEV_OP_CAST) {
        int from = c->in[0].dtype, to = (int)c->p.i[0];
        exp_out(e, 0, c->in[0].shape, c->in[0].ndim, (enum vdev_dtype)to);
        for (int64_t i = 0; i < c->in[0].n; i++) {
            double v = from == VDEV_F32 ? (double)F(c, 0)[i] : (double)I(c, 0)[i];
            if (to == VDEV_BOOL)
                e->v[0][i] = v != 0.0;
            else if (to == VDEV_F32)
                e->v[0][i] = (float)v; /* an int32 rounded to the nearest float */
            else if (v != v)
                e->v[0][i] = 0;
            else
                e->v[0][i] = v >= 2147483647.0 ? 2147483647.0 : v <= -2147483648.0 ? -2147483648.0
                                                                                    : trunc(v);
        }
        return;
    }
    if (c->op == VDEV_OP_SELECT_V2) {
        exp_out(e, 0, shape, nd, c->in[1].dtype);
        for (int64_t i = 0; i < e->numel[0]; i++) {
            int k = I(c, 0)[bcast_at(&c->in[0], shape, nd, i)] ? 1 : 2;
            int64_t j = bcast_at(&c->in[k], shape, nd, i);
            e->v[0][i] = c->in[k].dtype == VDEV_F32 ? (double)F(c, k)[j] : (double)I(c, k)[j];
        }
        return;
    }
    exp_out(e, 0, shape, nd, VDEV_BOOL);
    for (int64_t i = 0; i < e->numel[0]; i++) {
        int64_t j0 = bcast_at(&c->in[0], shape, nd, i);
        if (c->op == VDEV_OP_LOGICAL_NOT) {
            e->v[0][i] = !I(c, 0)[j0];
            continue;
        }
        int64_t j1 = bcast_at(&c->in[1], shape, nd, i);
        double u = c->in[0].dtype == VDEV_F32 ? (double)F(c, 0)[j0] : (double)I(c, 0)[j0];
        double v = c->in[1].dtype == VDEV_F32 ? (double)F(c, 1)[j1] : (double)I(c, 1)[j1];
        int r;
        switch (c->op) {
        case VDEV_OP_EQUAL: r = u == v; break;
        case VDEV_OP_NOT_EQUAL: r = u != v; break;
        case VDEV_OP_LESS: r = u < v; break;
        case VDEV_OP_LESS_EQUAL: r = u <= v; break;
        case VDEV_OP_GREATER: r = u > v; break;
        case VDEV_OP_GREATER_EQUAL: r = u >= v; break;
        case VDEV_OP_LOGICAL_AND: r = u != 0.0 && v != 0.0; break;
        default: r = u != 0.0 || v != 0.0; break;
        }
        e->v[0][i] = r;
    }
}
#endif
