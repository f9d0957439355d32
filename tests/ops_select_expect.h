/* ops_select_expect.h — the expected results of test_ops.c's SelectByMask
 * cases (ops_select_case.h): each element chosen by its mask element, found
 * by the multi-index with the mask's axes of 1 at 0; exact. Included by
 * ops_expect.h. */
#ifndef VDEV_TESTS_OPS_SELECT_EXPECT_H
#define VDEV_TESTS_OPS_SELECT_EXPECT_H

static void select_expect(const struct tcase *c, struct texp *e)
{
    const struct hin *m = &c->in[0], *v = &c->in[1];
    free(e->v[0]);
    exp_out(e, 0, v->shape, v->ndim, VDEV_F32);
    for (int64_t i = 0; i < v->n; i++) {
        int64_t rest = i, mi = 0, stride = 1;
        for (int d = v->ndim - 1; d >= 0; d--) {
            int64_t idx = rest % v->shape[d];
            rest /= v->shape[d];
            mi += (m->shape[d] == 1 ? 0 : idx) * stride;
            stride *= m->shape[d];
        }
        int chosen = F(c, 0)[mi] != 0.0f;
        if (c->op == VDEV_OP_SELECT_MASK)
            e->v[0][i] = chosen ? F(c, 1)[i] : F(c, 2)[i];
        else
            e->v[0][i] = chosen == (c->p.i[0] == 0) ? F(c, 1)[i] : 0.0;
    }
    e->atol = 0.0;
    e->rtol = 0.0;
}
#endif
