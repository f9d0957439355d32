/* ops_extreme_case.h — test_ops.c's cases of Max, Min, Abs and Sign
 * (extreme.c), and of Floor, Ceil, Round, FloorDiv and FloorMod (floor.c;
 * halves and negative divisors, a zero divisor, int32's ends): float32 drawn from the comparisons' small set (ties, both
 * zeros, both infinities, NaN) or uniform, int32 with int32's ends, every
 * axis of 2-D and 3-D shapes with and without keepdims, all elements, and
 * empty axes (the identity). ops_extreme_expect.h has the expected values. */
#ifndef VDEV_TESTS_OPS_EXTREME_CASE_H
#define VDEV_TESTS_OPS_EXTREME_CASE_H

/* Max, Min: var & 3 the axis (0, 1, -1 of [2,r,c] for var & 4, or ALL as 3),
 * var & 4 3-D, var & 8 keepdims, var & 16 int32. Abs, Sign: var 0 f32, 1
 * uniform f32, 2 int32. */
static int extreme_case(struct tcase *c, enum vdev_op op, int64_t r, int64_t col, int var)
{
    int64_t s2[2] = {r, col}, s3[3] = {2, r, col};
    if (op == VDEV_OP_FLOOR_DIV || op == VDEV_OP_FLOOR_MOD) {
        /* var % 6 the shapes' form (pair_shapes), var / 6: f32, i32 */
        int64_t sa[3], sb[3];
        int na, nb, form = var % 6, kind = var / 6;
        if (kind > 1)
            return 0;
        pair_shapes(form, r, col, sa, &na, sb, &nb);
        static const float fv[10] = {7.5f, -7.5f, 2.0f, -2.0f, 0.5f, -3.0f, 0.0f, -0.0f, 5.0f,
                                     1e30f};
        for (int k = 0; k < 2; k++) {
            in_cmp(c, k, k ? sb : sa, k ? nb : na, kind ? VDEV_I32 : VDEV_F32);
            if (!kind)
                for (int64_t i = 0; i < c->in[k].n; i++)
                    ((float *)c->in[k].data)[i] = fv[rng_next() % 10];
        }
        snprintf(c->desc, sizeof c->desc, "%s %s form %d [%lld,%lld]", vdev_op_defs[op].name,
                 kind ? "i32" : "f32", form, (long long)r, (long long)col);
        return 1;
    }
    if (op == VDEV_OP_FLOOR || op == VDEV_OP_CEIL || op == VDEV_OP_ROUND) {
        if (var > 2)
            return 0;
        static const float halves[8] = {0.5f, -0.5f, 1.5f, -2.5f, 2.5f, -0.0f, 1e30f, 3.49f};
        if (var == 2) {
            in_cmp(c, 0, s2, 2, VDEV_I32);
        } else {
            float *v = in_f(c, 0, s2, 2, -5, 5);
            for (int64_t i = 0; var == 0 && i < c->in[0].n; i++)
                v[i] = i % 2 ? halves[rng_next() % 8] : CMP_F[rng_next() % 10];
        }
        snprintf(c->desc, sizeof c->desc, "%s %s [%lld,%lld]", vdev_op_defs[op].name,
                 var == 2 ? "i32" : var ? "uniform" : "halves and special", (long long)r,
                 (long long)col);
        return 1;
    }
    if (op == VDEV_OP_ABS || op == VDEV_OP_SIGN) {
        if (var > 2)
            return 0;
        if (var == 1)
            in_f(c, 0, s2, 2, -3, 3);
        else
            in_cmp(c, 0, s2, 2, var == 2 ? VDEV_I32 : VDEV_F32);
        snprintf(c->desc, sizeof c->desc, "%s %s [%lld,%lld]", vdev_op_defs[op].name,
                 var == 2 ? "i32" : var ? "uniform" : "special", (long long)r, (long long)col);
        return 1;
    }
    if (var > 31)
        return 0;
    int three = (var & 4) != 0, keep = (var & 8) != 0, i32v = (var & 16) != 0;
    int axsel = var & 3;
    if (i32v)
        in_cmp(c, 0, three ? s3 : s2, three ? 3 : 2, VDEV_I32);
    else if (r > 3)
        in_f(c, 0, three ? s3 : s2, three ? 3 : 2, -5, 5); /* no NaN: whole rows to compare */
    else
        in_cmp(c, 0, three ? s3 : s2, three ? 3 : 2, VDEV_F32);
    c->p.i[0] = axsel == 3 ? VDEV_AXIS_ALL : axsel == 2 ? -1 : axsel;
    c->p.i[1] = keep && axsel != 3;
    snprintf(c->desc, sizeof c->desc, "%s %s [%s%lld,%lld] axis %lld keepdims %d",
             vdev_op_defs[op].name, i32v ? "i32" : "f32", three ? "2," : "", (long long)r,
             (long long)col, (long long)c->p.i[0], (int)c->p.i[1]);
    return 1;
}
#endif
