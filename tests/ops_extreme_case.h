/* ops_extreme_case.h — test_ops.c's cases of Max, Min, Abs and Sign
 * (extreme.c): float32 drawn from the comparisons' small set (ties, both
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
