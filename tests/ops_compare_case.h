/* ops_compare_case.h — test_ops.c's cases of the comparisons, the logical
 * ops, Cast and SelectV2 (compare.c): floats drawn from a few values so that
 * equal pairs are common, with NaN, both zeros and both infinities among
 * them; int32s from a few values with int32's ends; bools; every broadcast
 * mode of AddV2's shape rule and SelectV2's three-way broadcast; casts
 * between every pair of dtypes, with floats beyond int32 and ints beyond
 * float's 24 bits. ops_compare_expect.h has the expected values. */
#ifndef VDEV_TESTS_OPS_COMPARE_CASE_H
#define VDEV_TESTS_OPS_COMPARE_CASE_H

static const float CMP_F[10] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.5f, INFINITY, -INFINITY, NAN,
                                -2.5f};
static const int32_t CMP_I[8] = {0, 1, -1, 2, 7, INT32_MAX, INT32_MIN, -7};

/* Input k of dtype dt drawn from the small sets above (bools 0 or 1). */
static void in_cmp(struct tcase *c, int k, const int64_t *shape, int ndim, enum vdev_dtype dt)
{
    set_in(c, k, shape, ndim, dt);
    for (int64_t i = 0; i < c->in[k].n; i++) {
        if (dt == VDEV_F32)
            ((float *)c->in[k].data)[i] = CMP_F[rng_next() % 10];
        else if (dt == VDEV_I32)
            ((int32_t *)c->in[k].data)[i] = CMP_I[rng_next() % 8];
        else
            ((int32_t *)c->in[k].data)[i] = (int32_t)(rng_next() & 1);
    }
}

/* The shapes of a two-input case by form: 0 the same [r,c]; 1 [r,c] and a
 * row [c]; 2 [r,c] and a scalar; 3 [r,1] and [1,c] (both broadcast); 4
 * [c] and [r,c] (a broadcast first); 5 [2,1,c] and [r,1]. */
static int pair_shapes(int form, int64_t r, int64_t col, int64_t *sa, int *na, int64_t *sb,
                       int *nb)
{
    switch (form) {
    case 0: sa[0] = sb[0] = r, sa[1] = sb[1] = col, *na = *nb = 2; return 1;
    case 1: sa[0] = r, sa[1] = col, sb[0] = col, *na = 2, *nb = 1; return 1;
    case 2: sa[0] = r, sa[1] = col, *na = 2, *nb = 0; return 1;
    case 3: sa[0] = r, sa[1] = 1, sb[0] = 1, sb[1] = col, *na = *nb = 2; return 1;
    case 4: sa[0] = col, sb[0] = r, sb[1] = col, *na = 1, *nb = 2; return 1;
    case 5: sa[0] = 2, sa[1] = 1, sa[2] = col, sb[0] = r, sb[1] = 1, *na = 3, *nb = 2; return 1;
    default: return 0;
    }
}

static const char *const DT_NAMES[3] = {"f32", "i32", "bool"};

/* Comparisons: var % 6 the shapes' form, var / 6 the dtype (f32, i32; Equal
 * and NotEqual bool too). Logical ops: bools, var the form. LogicalNot: one
 * bool of [r,c] (var 0) or [2,r,c] (var 1). */
static int compare_case(struct tcase *c, enum vdev_op op, int64_t r, int64_t col, int var)
{
    int64_t sa[3], sb[3];
    int na, nb;
    if (op == VDEV_OP_LOGICAL_NOT) {
        int64_t s3[3] = {2, r, col};
        if (var > 1)
            return 0;
        in_cmp(c, 0, var ? s3 : s3 + 1, var ? 3 : 2, VDEV_BOOL);
        snprintf(c->desc, sizeof c->desc, "LogicalNot [%s%lld,%lld]", var ? "2," : "",
                 (long long)r, (long long)col);
        return 1;
    }
    int logical = op == VDEV_OP_LOGICAL_AND || op == VDEV_OP_LOGICAL_OR;
    int eq = op == VDEV_OP_EQUAL || op == VDEV_OP_NOT_EQUAL;
    int form = var % 6, kind = var / 6;
    if (kind > (logical ? 0 : eq ? 2 : 1))
        return 0;
    enum vdev_dtype dt = logical ? VDEV_BOOL : (enum vdev_dtype)kind;
    pair_shapes(form, r, col, sa, &na, sb, &nb);
    in_cmp(c, 0, sa, na, dt);
    in_cmp(c, 1, sb, nb, dt);
    snprintf(c->desc, sizeof c->desc, "%s %s form %d [%lld,%lld]", vdev_op_defs[op].name,
             DT_NAMES[dt], form, (long long)r, (long long)col);
    return 1;
}

/* Cast: var = from * 3 + to over f32, i32, bool, from [r,c]; f32 inputs
 * add floats beyond int32 and fractions, i32 inputs ints float rounds. */
static int cast_case(struct tcase *c, int64_t r, int64_t col, int var)
{
    if (var > 8)
        return 0;
    int from = var / 3, to = var % 3;
    int64_t s2[2] = {r, col};
    in_cmp(c, 0, s2, 2, (enum vdev_dtype)from);
    static const float big_f[6] = {3e9f, -3e9f, 2147483648.0f, -2147483648.0f, 7.9f, -7.9f};
    static const int32_t big_i[4] = {16777217, -16777217, 2147483520, 123456789};
    for (int64_t i = 0; i < c->in[0].n; i++) {
        if (rng_next() % 3)
            continue;
        if (from == VDEV_F32)
            ((float *)c->in[0].data)[i] = big_f[rng_next() % 6];
        else if (from == VDEV_I32)
            ((int32_t *)c->in[0].data)[i] = big_i[rng_next() % 4];
    }
    c->p.i[0] = to;
    snprintf(c->desc, sizeof c->desc, "Cast %s to %s [%lld,%lld]", DT_NAMES[from], DT_NAMES[to],
             (long long)r, (long long)col);
    return 1;
}

/* SelectV2 (c, x, y): var 0 all [r,c] f32; 1 c [r,1], x [r,c], y a scalar;
 * 2 c [c], x [r,1], y [1,c] (three ways); 3 int32 values, c [2,1,c], x
 * [r,c], y [r,c]; 4 bool values, c [r,c], x [1,c], y [r,1]. */
static int select_v2_case(struct tcase *c, int64_t r, int64_t col, int var)
{
    int64_t rc[2] = {r, col}, r1[2] = {r, 1}, c1[1] = {col}, oc[2] = {1, col};
    int64_t c3[3] = {2, 1, col}, none[1] = {1};
    enum vdev_dtype dt = var == 3 ? VDEV_I32 : var == 4 ? VDEV_BOOL : VDEV_F32;
    switch (var) {
    case 0: in_cmp(c, 0, rc, 2, VDEV_BOOL), in_cmp(c, 1, rc, 2, dt), in_cmp(c, 2, rc, 2, dt); break;
    case 1: in_cmp(c, 0, r1, 2, VDEV_BOOL), in_cmp(c, 1, rc, 2, dt), in_cmp(c, 2, none, 0, dt); break;
    case 2: in_cmp(c, 0, c1, 1, VDEV_BOOL), in_cmp(c, 1, r1, 2, dt), in_cmp(c, 2, oc, 2, dt); break;
    case 3: in_cmp(c, 0, c3, 3, VDEV_BOOL), in_cmp(c, 1, rc, 2, dt), in_cmp(c, 2, rc, 2, dt); break;
    case 4: in_cmp(c, 0, rc, 2, VDEV_BOOL), in_cmp(c, 1, oc, 2, dt), in_cmp(c, 2, r1, 2, dt); break;
    default: return 0;
    }
    snprintf(c->desc, sizeof c->desc, "SelectV2 variant %d %s [%lld,%lld]", var, DT_NAMES[dt],
             (long long)r, (long long)col);
    return 1;
}
#endif
