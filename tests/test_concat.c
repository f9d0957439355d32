/* test_concat.c — vdev_concat (TensorFlow's ConcatV2), vdev_stack (Pack) and
 * vdev_transpose_perm (Transpose by a permutation), and their gradients.
 *
 *  - every bad input refused with its exact status and message, in
 *    TensorFlow's words (an axis out of range, ranks or dimensions that do
 *    not match, shapes that differ, mixed dtypes, a permutation of the wrong
 *    size, out of range or with a repeat), vdev's own (n below 1, NULL
 *    arrays, a result of 5 dimensions), NULL and freed inputs, and the ops'
 *    own checks, which only vdev itself reaches;
 *  - results against loops written here from the definitions (each input's
 *    element put where it lands, not gathered as the kernels do), on 0 to 4
 *    dimensions, f32 and i32 (any bit pattern), negative axes, empty
 *    tensors, one tensor, and more than 4 (the tree of ops: 5, 6, 7, 9, 16
 *    and 17 tensors); every permutation of 0 to 4 axes;
 *  - the same on a simulated GPU (GPU:1), bit for bit against CPU:0;
 *  - the ops a join of up to 17 tensors runs (the tree: 6 ConcatV2 ops for
 *    17 tensors), as the placement counts them;
 *  - gradients through the tape against central finite differences, of
 *    every input (more than 4 included), on both devices;
 *  - more than 16 tensors (lists on the heap): a dead or bad one named by
 *    its index; a tree that runs out of memory part way frees what it made;
 *    the peak of a join, the inputs plus twice the result;
 *  - nothing left in use at the end. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/ops.h" /* vdev_op_run, for the ops' own checks */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

#define MAXT 17 /* the most tensors a case joins */

/* ---- errors ---- */

static vdev_tensor_t *tensor(int nd, const int64_t *shape, enum vdev_dtype dt)
{
    static const float zeros[64];
    return vdev_tensor_from_host(zeros, shape, nd, dt);
}

static void test_errors(void)
{
    int64_t s23[2] = {2, 3}, s24[2] = {2, 4}, s3[1] = {3}, s2[1] = {2}, s232[3] = {2, 3, 2};
    int64_t s1111[4] = {1, 1, 1, 1};
    vdev_tensor_t *a = tensor(2, s23, VDEV_F32), *b = tensor(2, s24, VDEV_F32);
    vdev_tensor_t *v3 = tensor(1, s3, VDEV_F32), *v2 = tensor(1, s2, VDEV_F32);
    vdev_tensor_t *ai = tensor(2, s23, VDEV_I32), *sc = tensor(0, NULL, VDEV_F32);
    vdev_tensor_t *c3 = tensor(3, s232, VDEV_F32), *d4 = tensor(4, s1111, VDEV_F32);
    CHECK(a && b && v3 && v2 && ai && sc && c3 && d4);

    /* ConcatV2 */
    const vdev_tensor_t *ab[2] = {a, b}, *aa[2] = {a, a}, *av[2] = {a, v3}, *aai[2] = {a, ai};
    CHECK_FAILS(vdev_concat(ab, 2, 2), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got 2");
    CHECK_FAILS(vdev_concat(ab, 2, -3), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got -3");
    CHECK_FAILS(vdev_concat(ab, 2, 0), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,3] vs. "
                "shape[1] = [2,4]");
    CHECK_FAILS(vdev_concat(ab, 2, -2), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,3] vs. "
                "shape[1] = [2,4]");
    CHECK_FAILS(vdev_concat(av, 2, 0), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Ranks of all input tensors should match: shape[0] = [2,3] vs. "
                "shape[1] = [3]");
    CHECK_FAILS(vdev_concat(aai, 2, 0), VDEV_ERR_INVALID_ARG,
                "cannot compute ConcatV2 as input #1(zero-based) was expected to be a float "
                "tensor but is a int32 tensor");
    /* the index of the bad tensor among more than 4 */
    const vdev_tensor_t *six[6] = {a, a, a, a, a, b};
    CHECK_FAILS(vdev_concat(six, 6, 0), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,3] vs. "
                "shape[5] = [2,4]");
    /* scalars join along axis 0 only: the range printed as TensorFlow prints it */
    const vdev_tensor_t *ss[2] = {sc, sc}, *sv[2] = {sc, v2};
    CHECK_FAILS(vdev_concat(ss, 2, -1), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Expected concatenating dimensions in the range [0, 0), but got -1");
    CHECK_FAILS(vdev_concat(sv, 2, 0), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Ranks of all input tensors should match: shape[0] = [] vs. "
                "shape[1] = [2]");
    CHECK_FAILS(vdev_concat(ab, 0, 0), VDEV_ERR_INVALID_ARG,
                "ConcatV2: n is 0 (values holds n tensors, at least 1)");
    CHECK_FAILS(vdev_concat(NULL, 2, 0), VDEV_ERR_INVALID_ARG,
                "ConcatV2: values is NULL with n 2");
    /* one tensor: tf.concat's identity, the axis unchecked */
    vdev_tensor_t *one = vdev_concat(ab, 1, 7);
    CHECK(one && vdev_tensor_ndim(one) == 2 && vdev_tensor_dim(one, 1) == 3);
    vdev_tensor_free(one);

    /* Pack */
    const vdev_tensor_t *vv[2] = {v2, v3}, *cc[2] = {c3, c3}, *dd[2] = {d4, d4};
    CHECK_FAILS(vdev_stack(aa, 2, 3), VDEV_ERR_INVALID_ARG, "Pack: axis = 3 not in [-3, 3)");
    CHECK_FAILS(vdev_stack(aa, 2, -4), VDEV_ERR_INVALID_ARG, "Pack: axis = -4 not in [-3, 3)");
    CHECK_FAILS(vdev_stack(vv, 2, 0), VDEV_ERR_INVALID_ARG,
                "Pack: Shapes of all inputs must match: values[0].shape = [2] != "
                "values[1].shape = [3]");
    CHECK_FAILS(vdev_stack(aai, 2, 0), VDEV_ERR_INVALID_ARG,
                "cannot compute Pack as input #1(zero-based) was expected to be a float tensor "
                "but is a int32 tensor");
    CHECK_FAILS(vdev_stack(dd, 2, 0), VDEV_ERR_UNSUPPORTED,
                "Pack: the result would have 5 dimensions; vdev tensors have at most 4");
    vdev_tensor_t *st = vdev_stack(cc, 2, -1); /* 4 dimensions fit */
    CHECK(st && vdev_tensor_ndim(st) == 4 && vdev_tensor_dim(st, 3) == 2);
    vdev_tensor_free(st);
    CHECK_FAILS(vdev_stack(aa, -1, 0), VDEV_ERR_INVALID_ARG,
                "Pack: n is -1 (values holds n tensors, at least 1)");
    CHECK_FAILS(vdev_stack(NULL, 1, 0), VDEV_ERR_INVALID_ARG, "Pack: values is NULL with n 1");

    /* Transpose */
    int p2[2] = {1, 0}, p3[3] = {0, 3, 1}, pn[3] = {-1, 0, 1}, pd[3] = {0, 0, 2};
    CHECK_FAILS(vdev_transpose_perm(c3, p2, 2), VDEV_ERR_INVALID_ARG,
                "Transpose: transpose expects a vector of size 3. But input(1) is a vector of "
                "size 2");
    CHECK_FAILS(vdev_transpose_perm(c3, p3, 3), VDEV_ERR_INVALID_ARG,
                "Transpose: 3 is out of range [0 .. 3)");
    CHECK_FAILS(vdev_transpose_perm(c3, pn, 3), VDEV_ERR_INVALID_ARG,
                "Transpose: -1 is out of range [0 .. 3)");
    CHECK_FAILS(vdev_transpose_perm(c3, pd, 3), VDEV_ERR_INVALID_ARG,
                "Transpose: 1 is missing from {0,0,2}.");
    CHECK_FAILS(vdev_transpose_perm(c3, NULL, 3), VDEV_ERR_INVALID_ARG,
                "Transpose: perm is NULL (perm has n entries, one per axis)");
    CHECK_FAILS(vdev_transpose_perm(c3, p3, -1), VDEV_ERR_INVALID_ARG,
                "Transpose: n is negative (perm has n entries, one per axis)");
    CHECK_FAILS(vdev_transpose(c3), VDEV_ERR_SHAPE,
                "Transpose: bad input shape [2,3,2] (Transpose takes a 2-dimensional tensor)");

    /* NULL in, NULL out, the first error kept; a freed tensor named */
    const vdev_tensor_t *an[2] = {a, NULL};
    CHECK(!vdev_concat(an, 2, 0) && !vdev_stack(an, 2, 0) && !vdev_transpose_perm(NULL, p2, 2));
    CHECK_STR(vdev_last_error(),
              "Transpose: bad input shape [2,3,2] (Transpose takes a 2-dimensional tensor)");
    vdev_tensor_t *dead = tensor(2, s23, VDEV_F32);
    vdev_tensor_free(dead);
    const vdev_tensor_t *ad[2] = {a, dead};
    CHECK_FAILS(vdev_concat(ad, 2, 0), VDEV_ERR_INVALID_ARG,
                "ConcatV2: input #1: not a live tensor (freed already, or not a tensor)");
    CHECK_FAILS(vdev_stack(ad, 2, 0), VDEV_ERR_INVALID_ARG,
                "Pack: input #1: not a live tensor (freed already, or not a tensor)");
    CHECK_FAILS(vdev_transpose_perm(dead, p2, 2), VDEV_ERR_INVALID_ARG,
                "Transpose: input #0: not a live tensor (freed already, or not a tensor)");

    /* the ops' own checks (i[0] the axis, i[1] the inputs used) */
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    const vdev_tensor_t *in4[4] = {a, b, a, a};
    p.i[0] = 0, p.i[1] = 2;
    CHECK_FAILS(vdev_op_run(VDEV_OP_CONCAT, in4, 4, &p), VDEV_ERR_SHAPE,
                "ConcatV2: incompatible shapes [2,3] and [2,4] (the inputs' dimensions must be "
                "equal but along the axis)");
    p.i[0] = 1, p.i[1] = 5;
    CHECK_FAILS(vdev_op_run(VDEV_OP_CONCAT, in4, 4, &p), VDEV_ERR_SHAPE,
                "ConcatV2: incompatible shapes [2,3] and [2,4] (ConcatV2 joins 1 to 4 of its "
                "inputs (i[1]))");
    p.i[0] = 2, p.i[1] = 2;
    CHECK_FAILS(vdev_op_run(VDEV_OP_CONCAT, in4, 4, &p), VDEV_ERR_SHAPE,
                "ConcatV2: incompatible shapes [2,3] and [2,4] (the axis must be one of the "
                "inputs' dimensions)");
    p.i[0] = 1;
    vdev_tensor_t *ok = vdev_op_run(VDEV_OP_CONCAT, in4, 4, &p);
    CHECK(ok && vdev_tensor_dim(ok, 1) == 7);
    vdev_tensor_free(ok);
    in4[1] = ai;
    CHECK_FAILS(vdev_op_run(VDEV_OP_CONCAT, in4, 4, &p), VDEV_ERR_SHAPE,
                "ConcatV2: input #1 (shape [2,3]) is int32, expected float");
    CHECK_FAILS(vdev_op_run(VDEV_OP_PACK, in4, 4, &p), VDEV_ERR_SHAPE,
                "Pack: input #1 (shape [2,3]) is int32, expected float");
    in4[1] = b;
    CHECK_FAILS(vdev_op_run(VDEV_OP_PACK, in4, 4, &p), VDEV_ERR_SHAPE,
                "Pack: incompatible shapes [2,3] and [2,4] (the inputs' shapes must be equal)");
    p.i[0] = 3;
    in4[1] = a;
    CHECK_FAILS(vdev_op_run(VDEV_OP_PACK, in4, 4, &p), VDEV_ERR_SHAPE,
                "Pack: incompatible shapes [2,3] and [2,3] (the new axis must be one of the "
                "output's 1 to 4 dimensions)");
    memset(&p, 0, sizeof p);
    p.j[0] = 1, p.i[0] = 1, p.i[1] = 1, p.i[2] = 0;
    const vdev_tensor_t *tc = c3;
    CHECK_FAILS(vdev_op_run(VDEV_OP_TRANSPOSE, &tc, 1, &p), VDEV_ERR_SHAPE,
                "Transpose: bad input shape [2,3,2] (i[0..rank) must be a permutation of the "
                "axes)");
    vdev_tensor_t *all[] = {a, b, v3, v2, ai, sc, c3, d4};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        vdev_tensor_free(all[k]);
}

/* The paths of more than 16 tensors (their lists on the heap) and of a
 * tree that runs out of memory part way, on dev (a simulated GPU): each
 * error named as for a few tensors, nothing left in use but the inputs,
 * and the peak of a join that fits: the inputs, the result and its parts
 * (the tree's intermediate tensors, about the result's size again). */
static void test_tree_failures(const char *dev)
{
    enum { N = 20 };
    int64_t big[2] = {256, 1024}, s2[2] = {2, 3}, s3[1] = {3};
    const uint64_t mib = 1u << 20;
    CHECK_OK(vdev_device_push(dev));
    const vdev_tensor_t *t[N], *sc[N];
    vdev_tensor_t *made[N], *scalar[N];
    for (int k = 0; k < N; k++) {
        t[k] = made[k] = vdev_tensor_zeros(big, 2, VDEV_F32);
        sc[k] = scalar[k] = vdev_tensor_zeros(NULL, 0, VDEV_F32);
        CHECK(made[k] && sc[k]);
    }
    /* the index of a dead or bad tensor among 20 */
    vdev_tensor_t *dead = tensor(2, s2, VDEV_F32), *v3 = tensor(1, s3, VDEV_F32);
    vdev_tensor_free(dead);
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    uint64_t inputs = mi.bytes_in_use; /* the scalars' 256 bytes each too */
    t[18] = dead;
    CHECK_FAILS(vdev_concat(t, N, 0), VDEV_ERR_INVALID_ARG,
                "ConcatV2: input #18: not a live tensor (freed already, or not a tensor)");
    CHECK_FAILS(vdev_stack(t, N, 0), VDEV_ERR_INVALID_ARG,
                "Pack: input #18: not a live tensor (freed already, or not a tensor)");
    t[18] = v3;
    CHECK_FAILS(vdev_concat(t, N, 1), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Ranks of all input tensors should match: shape[0] = [256,1024] vs. "
                "shape[18] = [3]");
    CHECK_FAILS(vdev_stack(t, N, 0), VDEV_ERR_INVALID_ARG,
                "Pack: Shapes of all inputs must match: values[0].shape = [256,1024] != "
                "values[18].shape = [3]");
    t[18] = made[18];
    sc[19] = v3;
    CHECK_FAILS(vdev_concat(sc, N, 0), VDEV_ERR_INVALID_ARG,
                "ConcatOp : Ranks of all input tensors should match: shape[0] = [] vs. "
                "shape[19] = [3]");
    sc[19] = sc[0];

    /* room for the inputs and the result, not the parts: the tree fails
     * part way, and what it made is freed */
    CHECK_OK(vdev_memory_set_limits(dev, 0, inputs + 32 * mib));
    for (int stack = 0; stack <= 1; stack++) {
        CHECK(!(stack ? vdev_stack(t, N, 2) : vdev_concat(t, N, 1)));
        CHECK_STATUS(vdev_last_status(), VDEV_ERR_OOM);
        CHECK(!strncmp(vdev_last_error(), "OOM when allocating tensor with shape[", 38));
    }
    CHECK_OK(vdev_memory_info(dev, &mi));
    CHECK_EQ_U64(mi.bytes_in_use, inputs);
    CHECK_OK(vdev_memory_set_limits(dev, 0, 0));

    /* room enough: the peak above the inputs is the result and its parts */
    for (int stack = 0; stack <= 1; stack++) {
        CHECK_OK(vdev_memory_reset_peak(dev));
        vdev_tensor_t *y = stack ? vdev_stack(t, N, 1) : vdev_concat(t, N, -1);
        CHECK(y && vdev_tensor_numel(y) == N * 256 * 1024);
        CHECK_OK(vdev_memory_info(dev, &mi));
        CHECK(mi.peak_bytes_in_use <= inputs + 2 * N * mib);
        vdev_tensor_free(y);
    }
    vdev_tensor_t *y = vdev_concat(sc, N, 0);
    CHECK(y && vdev_tensor_numel(y) == N);
    vdev_tensor_free(y);
    for (int k = 0; k < N; k++) {
        vdev_tensor_free(made[k]);
        vdev_tensor_free(scalar[k]);
    }
    vdev_tensor_free(v3);
    vdev_device_pop();
}

/* ---- results: loops from the definitions ---- */

struct jcase {
    int stack, nd, n, axis, i32; /* nd: the inputs' rank */
};

static const struct jcase JOINS[] = {
    {0, 1, 2, 0, 0},  {0, 1, 5, -1, 1}, {0, 2, 2, 1, 0},  {0, 2, 3, -2, 0}, {0, 2, 4, 0, 1},
    {0, 2, 6, 1, 0},  {0, 3, 7, -1, 0}, {0, 3, 9, 1, 1},  {0, 4, 4, 2, 0},  {0, 4, 17, -4, 0},
    {0, 0, 3, 0, 0},  {0, 0, 17, 0, 1}, {0, 2, 1, 5, 0},  {0, 2, 16, 0, 1}, {0, 3, 5, 0, 1},
    {1, 0, 2, 0, 0},  {1, 0, 5, -1, 1}, {1, 1, 3, 1, 0},  {1, 1, 4, -2, 0}, {1, 2, 2, 0, 1},
    {1, 2, 6, 2, 0},  {1, 3, 4, -1, 0}, {1, 3, 9, 1, 0},  {1, 2, 17, 1, 1}, {1, 1, 1, 0, 0},
};
#define NJOINS (sizeof JOINS / sizeof JOINS[0])

static const int64_t BASE[4] = {2, 3, 2, 2};

/* Input k's shape: BASE, with (concat) a length along the axis that varies
 * with k, 0 included. */
static void input_shape(const struct jcase *jc, int k, int64_t *shape)
{
    int ax = jc->axis < 0 ? jc->axis + jc->nd : jc->axis;
    for (int d = 0; d < jc->nd; d++)
        shape[d] = !jc->stack && d == ax && jc->n > 1 ? (k * 5 + 1) % 4 : BASE[d];
}

static int64_t numel(const int64_t *shape, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

/* The expected result: each input's element i put at its place in the
 * output (the axis's index shifted past the inputs before it; Pack: the
 * input's number inserted as the new axis's index). x[k] are words. */
static uint32_t *expected(const struct jcase *jc, uint32_t *const *x, int64_t *osh, int *ond)
{
    int nd = jc->nd, on = nd + jc->stack;
    int ax = jc->axis < 0 ? jc->axis + on : jc->axis;
    int64_t sh[MAXT][4];
    for (int k = 0; k < jc->n; k++)
        input_shape(jc, k, sh[k]);
    if (!jc->stack && nd == 0) { /* scalars: a vector */
        on = 1, ax = 0;
        for (int k = 0; k < jc->n; k++)
            sh[k][0] = 1;
        nd = 1;
    }
    for (int d = 0, s = 0; d < on; d++)
        osh[d] = jc->stack && d == ax ? jc->n : sh[0][s++];
    if (!jc->stack && jc->n > 1) {
        osh[ax] = 0;
        for (int k = 0; k < jc->n; k++)
            osh[ax] += sh[k][ax];
    }
    *ond = on;
    uint32_t *out = calloc((size_t)numel(osh, on) + 1, 4);
    int64_t before = 0;
    for (int k = 0; k < jc->n; k++) {
        int64_t m = numel(sh[k], nd);
        for (int64_t i = 0; i < m; i++) {
            int64_t idx[4], o[4], rest = i, at = 0;
            for (int d = nd - 1; d >= 0; d--) {
                idx[d] = rest % sh[k][d];
                rest /= sh[k][d];
            }
            for (int d = 0, s = 0; d < on; d++)
                o[d] = jc->stack && d == ax ? k : idx[s++] + (!jc->stack && d == ax ? before : 0);
            for (int d = 0; d < on; d++)
                at = at * osh[d] + o[d];
            out[at] = x[k][i];
        }
        before += jc->stack || jc->n == 1 ? 0 : sh[k][ax];
    }
    return out;
}

/* Words of a tensor on the host (n of them). */
static uint32_t *words_of(const vdev_tensor_t *t)
{
    int64_t n = vdev_tensor_numel(t);
    uint32_t *w = calloc((size_t)n + 1, 4);
    CHECK_OK(vdev_tensor_to_host(t, w, (size_t)n * 4));
    return w;
}

/* Every join case on dev: against expected(), and its words kept in
 * keep[] (the cpu backend) or compared with them, bit for bit. */
static void test_joins(const char *dev, uint32_t **keep, int compare)
{
    CHECK_OK(vdev_device_push(dev));
    for (size_t c = 0; c < NJOINS; c++) {
        const struct jcase *jc = &JOINS[c];
        CHECK_OK(vdev_scope_begin());
        rng_state = 0x243f6a8885a308d3ull + c; /* the same inputs on every device */
        uint32_t *x[MAXT];
        const vdev_tensor_t *t[MAXT];
        for (int k = 0; k < jc->n; k++) {
            int64_t sh[4];
            input_shape(jc, k, sh);
            int64_t m = numel(sh, jc->nd);
            x[k] = calloc((size_t)m + 1, 4);
            for (int64_t i = 0; i < m; i++) {
                float f = rng_uniform(-2, 2);
                uint32_t w = (uint32_t)rng_next();
                memcpy(&x[k][i], jc->i32 ? (const void *)&w : (const void *)&f, 4);
            }
            t[k] = vdev_tensor_from_host(x[k], sh, jc->nd, jc->i32 ? VDEV_I32 : VDEV_F32);
        }
        vdev_tensor_t *y = jc->stack ? vdev_stack(t, jc->n, jc->axis)
                                     : vdev_concat(t, jc->n, jc->axis);
        int64_t osh[4];
        int ond;
        uint32_t *want = expected(jc, x, osh, &ond);
        int ok = y && vdev_tensor_ndim(y) == ond &&
                 vdev_tensor_dtype(y) == (jc->i32 ? VDEV_I32 : VDEV_F32);
        for (int d = 0; ok && d < ond; d++)
            ok = vdev_tensor_dim(y, d) == osh[d];
        int64_t m = numel(osh, ond);
        uint32_t *got = ok ? words_of(y) : NULL;
        ok = ok && !memcmp(got, want, (size_t)m * 4);
        if (ok && compare)
            ok = !memcmp(got, keep[c], (size_t)m * 4);
        if (ok)
            check_passed++;
        else
            check_fail(__FILE__, __LINE__, "%s: %s of %d tensors of rank %d, axis %d: %s", dev,
                       jc->stack ? "stack" : "concat", jc->n, jc->nd, jc->axis,
                       y ? "wrong result" : vdev_last_error());
        if (!compare && got) {
            keep[c] = got;
            got = NULL;
        }
        free(got);
        free(want);
        for (int k = 0; k < jc->n; k++)
            free(x[k]);
        vdev_scope_end();
    }
    vdev_device_pop();
}

/* Every permutation of nd axes into perms (nd! of them, at most 24). */
static int permutations(int nd, int (*perms)[4])
{
    int count = 0, p[4] = {0, 1, 2, 3};
    /* Heap's algorithm would do; nd <= 4, so count in base nd and keep the
     * numbers whose digits are all different */
    int total = 1;
    for (int d = 0; d < nd; d++)
        total *= nd;
    for (int v = 0; v < total; v++) {
        unsigned seen = 0;
        int rest = v, ok = 1;
        for (int d = 0; d < nd; d++) {
            p[d] = rest % nd;
            rest /= nd;
            ok &= !((seen >> p[d]) & 1u);
            seen |= 1u << p[d];
        }
        if (ok)
            memcpy(perms[count++], p, sizeof p);
    }
    return count;
}

/* The shapes transposed (their first nd dimensions, nd 0 to 4): small
 * ones; axes of one element, which the host kernel drops, between others
 * it then merges; sides above the host kernel's tiles of 32 and not
 * multiples of them. */
static const int64_t TSHAPES[][4] = {{2, 3, 4, 5}, {1, 37, 1, 70}, {33, 2, 65, 3}, {40, 34, 1, 2}};
#define NTSHAPES (int)(sizeof TSHAPES / sizeof TSHAPES[0])

/* Every permutation of 0 to 4 axes of each of TSHAPES[:nd], f32 and i32:
 * input element idx lands at the output's index with entry d
 * idx[perm[d]]. */
static void test_transposes(const char *dev, uint32_t **keep, int compare)
{
    CHECK_OK(vdev_device_push(dev));
    rng_state = 0x13198a2e03707344ull; /* the same inputs on every device */
    int slot = 0;
    for (int c = 0; c < NTSHAPES * 5; c++) {
        int si = c / 5, nd = c % 5;
        const int64_t *sh = TSHAPES[si];
        int perms[24][4], np = permutations(nd, perms);
        for (int q = 0; q < np; q++, slot++) {
            CHECK_OK(vdev_scope_begin());
            int64_t m = numel(sh, nd), osh[4];
            uint32_t *x = calloc((size_t)m, 4), *want = calloc((size_t)m, 4);
            for (int64_t i = 0; i < m; i++)
                x[i] = (uint32_t)rng_next();
            for (int d = 0; d < nd; d++)
                osh[d] = sh[perms[q][d]];
            for (int64_t i = 0; i < m; i++) {
                int64_t idx[4], rest = i, at = 0;
                for (int d = nd - 1; d >= 0; d--) {
                    idx[d] = rest % sh[d];
                    rest /= sh[d];
                }
                for (int d = 0; d < nd; d++)
                    at = at * osh[d] + idx[perms[q][d]];
                want[at] = x[i];
            }
            vdev_tensor_t *t = vdev_tensor_from_host(x, sh, nd, q & 1 ? VDEV_I32 : VDEV_F32);
            vdev_tensor_t *y = vdev_transpose_perm(t, perms[q], nd);
            int ok = y && vdev_tensor_ndim(y) == nd;
            for (int d = 0; ok && d < nd; d++)
                ok = vdev_tensor_dim(y, d) == osh[d];
            uint32_t *got = ok ? words_of(y) : NULL;
            /* a NaN pattern as f32 comes back as it went, its words */
            ok = ok && !memcmp(got, want, (size_t)m * 4);
            if (ok && compare)
                ok = !memcmp(got, keep[slot], (size_t)m * 4);
            if (ok)
                check_passed++;
            else
                check_fail(__FILE__, __LINE__,
                           "%s: transpose of shape %d, rank %d, permutation %d: %s", dev, si, nd,
                           q, y ? "wrong result" : vdev_last_error());
            if (!compare && got) {
                keep[slot] = got;
                got = NULL;
            }
            free(got);
            free(want);
            free(x);
            vdev_scope_end();
        }
    }
    vdev_device_pop();
}

/* The ops a join of n tensors runs (the placement's counts): the tree of
 * concat.c, one op up to 4 tensors, runs of nearly n/4 beyond, runs of one
 * used as they are (ConcatV2) or through a Reshape (Pack). */
static void test_op_counts(const char *dev)
{
    static const struct {
        int stack, n;
        uint64_t concats, packs, reshapes, identities;
    } want[] = {
        {0, 1, 0, 0, 0, 1},  /* tf.concat's identity */
        {0, 4, 1, 0, 0, 0},  {0, 5, 2, 0, 0, 0},  /* runs 1,1,1,2 */
        {0, 16, 5, 0, 0, 0}, /* runs 4,4,4,4 */
        {0, 17, 6, 0, 0, 0}, /* runs 4,4,4,5; 5 is 1,1,1,2 */
        {1, 4, 0, 1, 0, 0},  {1, 5, 1, 1, 3, 0}, {1, 16, 1, 4, 0, 0},
    };
    int64_t s2[2] = {2, 3};
    CHECK_OK(vdev_device_push(dev));
    for (size_t c = 0; c < sizeof want / sizeof want[0]; c++) {
        CHECK_OK(vdev_scope_begin());
        const vdev_tensor_t *t[MAXT];
        for (int k = 0; k < want[c].n; k++)
            t[k] = tensor(2, s2, VDEV_F32);
        vdev_placement_reset();
        vdev_tensor_t *y = want[c].stack ? vdev_stack(t, want[c].n, 0)
                                         : vdev_concat(t, want[c].n, 0);
        CHECK(y != NULL);
        uint64_t got[4] = {vdev_placement_op_count("ConcatV2", NULL),
                           vdev_placement_op_count("Pack", NULL),
                           vdev_placement_op_count("Reshape", NULL),
                           vdev_placement_op_count("Identity", NULL)};
        if (got[0] == want[c].concats && got[1] == want[c].packs && got[2] == want[c].reshapes &&
            got[3] == want[c].identities)
            check_passed++;
        else
            check_fail(__FILE__, __LINE__,
                       "%s: %s of %d: ConcatV2 %llu, Pack %llu, Reshape %llu, Identity %llu", dev,
                       want[c].stack ? "stack" : "concat", want[c].n, (unsigned long long)got[0],
                       (unsigned long long)got[1], (unsigned long long)got[2],
                       (unsigned long long)got[3]);
        vdev_scope_end();
    }
    vdev_device_pop();
}

/* ---- gradients ---- */

#define FD_EPS 1e-2
#define FD_ATOL 2e-3
#define FD_RTOL 1e-2

/* op 0 concat, 1 stack, 2 transpose (perm) of the n tensors x. */
static vdev_tensor_t *forward(int op, const vdev_tensor_t *const *x, int n, int axis,
                              const int *perm)
{
    return op == 0   ? vdev_concat(x, n, axis)
           : op == 1 ? vdev_stack(x, n, axis)
                     : vdev_transpose_perm(x[0], perm, vdev_tensor_ndim(x[0]));
}

/* L = sum(tanh(y) * W), W of y's shape from w. */
static vdev_tensor_t *loss_of(int op, const vdev_tensor_t *const *x, int n, int axis,
                              const int *perm, const float *w)
{
    vdev_tensor_t *y = forward(op, x, n, axis, perm);
    if (!y)
        return NULL;
    int64_t shape[4];
    int nd = vdev_tensor_ndim(y);
    for (int d = 0; d < nd; d++)
        shape[d] = vdev_tensor_dim(y, d);
    return vdev_sum_all(vdev_mul(vdev_tanh(y), vdev_tensor_from_host(w, shape, nd, VDEV_F32)));
}

struct gcase {
    int op, nd, n, axis, perm[4];
};

static const struct gcase GRADS[] = {
    {0, 2, 3, 1, {0}},  {0, 3, 6, -2, {0}}, {0, 0, 5, 0, {0}},  {1, 2, 2, 0, {0}},
    {1, 1, 7, -1, {0}}, {2, 3, 1, 0, {2, 0, 1}}, {2, 4, 1, 0, {1, 3, 0, 2}},
};

/* Each case's gradient of every input against central differences. */
static void test_gradients(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    for (size_t c = 0; c < sizeof GRADS / sizeof GRADS[0]; c++) {
        const struct gcase *gc = &GRADS[c];
        struct jcase jc = {gc->op == 1, gc->nd, gc->n, gc->axis, 0};
        CHECK_OK(vdev_scope_begin());
        float x0[MAXT][48], w[512];
        int64_t sh[MAXT][4], m[MAXT];
        vdev_tensor_t *var[MAXT], *g[MAXT] = {0};
        for (int i = 0; i < 512; i++)
            w[i] = rng_uniform(-1, 1);
        for (int k = 0; k < gc->n; k++) {
            input_shape(&jc, k, sh[k]);
            m[k] = numel(sh[k], gc->nd);
            for (int64_t i = 0; i < m[k]; i++)
                x0[k][i] = rng_uniform(-1.5f, 1.5f);
            var[k] = vdev_variable(vdev_tensor_from_host(x0[k], sh[k], gc->nd, VDEV_F32));
        }
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *L = loss_of(gc->op, (const vdev_tensor_t *const *)var, gc->n, gc->axis,
                                   gc->perm, w);
        CHECK(tape && L);
        CHECK_OK(vdev_tape_gradient(tape, L, var, gc->n, g));
        vdev_tape_end(tape);
        int bad = 0;
        for (int k = 0; k < gc->n; k++) {
            float gv[48] = {0};
            CHECK(g[k] && vdev_tensor_to_host(g[k], gv, (size_t)m[k] * 4) == VDEV_OK);
            CHECK_STR(vdev_tensor_device(g[k]), vdev_tensor_device(var[k]));
            for (int64_t i = 0; i < m[k]; i++) {
                double l[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    const vdev_tensor_t *xs[MAXT];
                    float xp[48];
                    memcpy(xp, x0[k], sizeof xp);
                    xp[i] += (float)(sgn ? -FD_EPS : FD_EPS);
                    for (int j = 0; j < gc->n; j++)
                        xs[j] = vdev_tensor_from_host(j == k ? xp : x0[j], sh[j], gc->nd,
                                                      VDEV_F32);
                    l[sgn] = vdev_tensor_item(loss_of(gc->op, xs, gc->n, gc->axis, gc->perm, w));
                }
                double fd = (l[0] - l[1]) / (2 * FD_EPS);
                bad += !(fabs(gv[i] - fd) <= FD_ATOL + FD_RTOL * fabs(fd));
            }
        }
        if (bad)
            check_fail(__FILE__, __LINE__, "%s: gradient case %zu: %d elements", dev, c, bad);
        else
            check_passed++;
        for (int k = 0; k < gc->n; k++)
            vdev_tensor_free(var[k]);
        vdev_scope_end();
    }
    vdev_device_pop();
}

#define NPERMS ((1 + 1 + 2 + 6 + 24) * NTSHAPES)

int main(void)
{
    static uint32_t *joins[NJOINS], *perms[NPERMS];
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("CPU:0"));
    test_errors();
    vdev_device_pop();
    test_joins("CPU:0", joins, 0);
    test_transposes("CPU:0", perms, 0);
    test_op_counts("CPU:0");
    test_gradients("CPU:0");
    CHECK_NO_LEAK("CPU:0");

    /* a simulated GPU: bit for bit against the cpu backend */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:1"));
    test_errors();
    vdev_device_pop();
    test_joins("GPU:1", joins, 1);
    test_transposes("GPU:1", perms, 1);
    test_op_counts("GPU:1");
    test_gradients("GPU:1");
    test_tree_failures("GPU:1");
    CHECK_NO_LEAK("GPU:1");
    CHECK_NO_LEAK("CPU:0");

    /* CUDA GPUs, where the machine has one */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    if (vdev_device_push("GPU:0") == VDEV_OK) {
        vdev_device_pop();
        printf("CUDA GPU:0 found: the joins and transposes run there too\n");
        test_joins("GPU:0", joins, 1);
        test_transposes("GPU:0", perms, 1);
        test_gradients("GPU:0");
        CHECK_NO_LEAK("GPU:0");
    }
    vdev_shutdown();
    for (size_t c = 0; c < NJOINS; c++)
        free(joins[c]);
    for (int c = 0; c < NPERMS; c++)
        free(perms[c]);
    return check_done();
}
