/* ops_select_case.h — test_ops.c's cases of SelectByMask and its gradient
 * (select.c): values [r, c], the mask of their shape, [r, 1], [1, c], or
 * [2, 1, c] against [2, r, c]; masks of 0, -0, 1, 0.5, -3 and NaN (all but
 * the zeros choose a), values with infinities and NaN (which must not reach
 * the result where not chosen). ops_select_expect.h has the expected values. */
#ifndef VDEV_TESTS_OPS_SELECT_CASE_H
#define VDEV_TESTS_OPS_SELECT_CASE_H

/* var & 3: the mask's form (0 the values' shape, 1 [r,1], 2 [1,c], 3 3-D
 * [2,1,c]); SELECT_MASK_GRAD: var >> 2 the part (i[0]). */
static int select_case(struct tcase *c, enum vdev_op op, int64_t r, int64_t col, int var)
{
    int grad = op == VDEV_OP_SELECT_MASK_GRAD;
    if (var > (grad ? 7 : 3))
        return 0;
    int form = var & 3, nd = form == 3 ? 3 : 2;
    int64_t v2[2] = {r, col}, v3[3] = {2, r, col};
    int64_t m0[2] = {r, col}, m1[2] = {r, 1}, m2[2] = {1, col}, m3[3] = {2, 1, col};
    const int64_t *vs = nd == 3 ? v3 : v2;
    const int64_t *ms = form == 0 ? m0 : form == 1 ? m1 : form == 2 ? m2 : m3;
    float *m = in_f(c, 0, ms, nd, 0, 1);
    static const float marks[6] = {0.0f, -0.0f, 1.0f, 0.5f, -3.0f, NAN};
    for (int64_t i = 0; i < c->in[0].n; i++)
        m[i] = marks[rng_next() % 6];
    for (int k = 1; k < (grad ? 2 : 3); k++) {
        float *v = in_f(c, k, vs, nd, -2, 2);
        for (int64_t i = 0; i < c->in[k].n; i++)
            if (rng_next() % 9 == 0)
                v[i] = i % 3 == 0 ? INFINITY : i % 3 == 1 ? -INFINITY : NAN;
    }
    if (grad)
        c->p.i[0] = var >> 2;
    snprintf(c->desc, sizeof c->desc, "%s values [%s%lld,%lld] mask form %d variant %d",
             vdev_op_defs[op].name, nd == 3 ? "2," : "", (long long)r, (long long)col, form,
             var);
    return 1;
}
#endif
