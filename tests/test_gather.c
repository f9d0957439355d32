/* test_gather.c — vdev_gather (TensorFlow's GatherV2 along axis 0) and its
 * gradient GatherGrad.
 *
 *  - every bad input refused with its exact status and message, in
 *    TensorFlow's words (an index outside the rows, named by its position
 *    in the indices' shape as TensorFlow's CPU kernel names it, for 0 to 3
 *    dimensions of indices and the first of several; 0-dimensional params;
 *    float indices), vdev's own (a result of 5 dimensions), NULL and freed
 *    inputs, GatherGrad's own checks; indices an op made on a simulated GPU
 *    checked after its stream has finished them; no check where TensorFlow
 *    makes none (params with empty rows);
 *  - results against loops written here, for params of 1 to 4 dimensions
 *    (f32 and int32 words of any bit pattern) and indices of 0 to 3, with
 *    repeats and empty tensors;
 *  - the same on a simulated GPU (GPU:1), bit for bit against CPU:0;
 *  - gradients through the tape: against central finite differences, with
 *    repeated indices; and exactly, bit for bit, against the rows of the
 *    output's gradient added in the indices' order in float, with the
 *    determinism switch off and on (identical bits), on both devices;
 *  - on a CUDA GPU (where the machine has one): the same results and
 *    gradients bit for bit, and an index outside the rows giving a row of
 *    zeros and no gradient, as TensorFlow's GPU kernel;
 *  - nothing left in use at the end. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/ops.h" /* vdev_op_run, for GatherGrad's own checks */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

static vdev_tensor_t *ints(int nd, const int64_t *shape, const int32_t *v)
{
    return vdev_tensor_from_host(v, shape, nd, VDEV_I32);
}

static vdev_tensor_t *floats(int nd, const int64_t *shape, const float *v)
{
    return vdev_tensor_from_host(v, shape, nd, VDEV_F32);
}

/* ---- errors ---- */

static void test_errors(const char *dev)
{
    static const float zeros[64];
    int64_t s52[2] = {5, 2}, s3[1] = {3}, s23[2] = {2, 3}, s1[1] = {1}, s2[1] = {2};
    int64_t s50[2] = {5, 0}, s03[2] = {0, 3}, s0[1] = {0}, s222[3] = {2, 2, 2};
    int32_t i_bad1[3] = {0, 7, 1}, i_neg[1] = {-1}, i_2d[6] = {0, 1, 2, 3, 4, 5};
    int32_t i_first[2] = {7, 8}, i_nine = 9, i_zero[1] = {0};
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *p = floats(2, s52, zeros), *sc = floats(0, NULL, zeros);
    vdev_tensor_t *ib = ints(1, s3, i_bad1), *in = ints(1, s1, i_neg), *i2 = ints(2, s23, i_2d);
    vdev_tensor_t *i9 = ints(0, NULL, &i_nine), *if2 = ints(1, s2, i_first);
    vdev_tensor_t *fi = floats(1, s3, zeros), *i0 = ints(1, s1, i_zero);
    vdev_tensor_t *ie = ints(1, s0, i_zero), *p50 = floats(2, s50, zeros);
    vdev_tensor_t *p03 = floats(2, s03, zeros), *p3 = floats(3, s222, zeros);
    vdev_tensor_t *i3 = ints(3, s222, (const int32_t *)zeros);
    CHECK(p && sc && ib && in && i2 && i9 && if2 && fi && i0 && ie && p50 && p03 && p3 && i3);

    CHECK_FAILS(vdev_gather(p, ib), VDEV_ERR_INVALID_ARG,
                "GatherV2: indices[1] = 7 is not in [0, 5)");
    CHECK_FAILS(vdev_gather(p, in), VDEV_ERR_INVALID_ARG,
                "GatherV2: indices[0] = -1 is not in [0, 5)");
    CHECK_FAILS(vdev_gather(p, i2), VDEV_ERR_INVALID_ARG,
                "GatherV2: indices[1,2] = 5 is not in [0, 5)");
    CHECK_FAILS(vdev_gather(p, i9), VDEV_ERR_INVALID_ARG,
                "GatherV2: indices = 9 is not in [0, 5)");
    CHECK_FAILS(vdev_gather(p, if2), VDEV_ERR_INVALID_ARG,
                "GatherV2: indices[0] = 7 is not in [0, 5)");
    CHECK_FAILS(vdev_gather(p03, i0), VDEV_ERR_INVALID_ARG,
                "GatherV2: indices[0] = 0 is not in [0, 0)");
    CHECK_FAILS(vdev_gather(sc, i0), VDEV_ERR_INVALID_ARG,
                "GatherV2: params must be at least 1 dimensional");
    CHECK_FAILS(vdev_gather(p, fi), VDEV_ERR_INVALID_ARG,
                "GatherV2: Value passed to parameter 'indices' has DataType float32 not in list "
                "of allowed values: int16, int32, int64");
    CHECK_FAILS(vdev_gather(p3, i3), VDEV_ERR_UNSUPPORTED,
                "GatherV2: the result would have 5 dimensions; vdev tensors have at most 4");
    /* as TensorFlow: rows of no element check nothing; no index, nothing */
    vdev_tensor_t *r = vdev_gather(p50, if2);
    CHECK(r && vdev_tensor_ndim(r) == 2 && vdev_tensor_dim(r, 0) == 2 &&
          vdev_tensor_dim(r, 1) == 0);
    vdev_tensor_free(r);
    r = vdev_gather(p03, ie);
    CHECK(r && vdev_tensor_ndim(r) == 2 && vdev_tensor_dim(r, 0) == 0 &&
          vdev_tensor_dim(r, 1) == 3);
    vdev_tensor_free(r);

    /* indices an op made on the device (argmax of rows whose largest is
     * column 3): read once the stream has made them */
    float lg[8] = {0, 0, 0, 1, 0, 0, 0, 1};
    int64_t s24[2] = {2, 4}, s32[2] = {3, 2};
    vdev_tensor_t *logits = floats(2, s24, lg), *p32 = floats(2, s32, zeros);
    vdev_tensor_t *am = vdev_argmax(logits);
    CHECK(am);
    CHECK_FAILS(vdev_gather(p32, am), VDEV_ERR_INVALID_ARG,
                "GatherV2: indices[0] = 3 is not in [0, 3)");
    vdev_tensor_free(am);
    vdev_tensor_free(logits);
    vdev_tensor_free(p32);

    /* NULL in, NULL out, the first error kept; a freed tensor named */
    CHECK(!vdev_gather(NULL, i0) && !vdev_gather(p, NULL));
    CHECK_STR(vdev_last_error(), "GatherV2: indices[0] = 3 is not in [0, 3)");
    vdev_tensor_t *dead = ints(1, s1, i_zero);
    vdev_tensor_free(dead);
    CHECK_FAILS(vdev_gather(p, dead), VDEV_ERR_INVALID_ARG,
                "GatherV2: input #1: not a live tensor (freed already, or not a tensor)");
    CHECK_FAILS(vdev_gather(dead, i0), VDEV_ERR_INVALID_ARG,
                "GatherV2: input #0: not a live tensor (freed already, or not a tensor)");

    /* GatherGrad's own checks: (dy, indices, like params) */
    const vdev_tensor_t *g1[3] = {ib, ib, p}, *g2[3] = {p, ib, p}, *g3[3] = {p, i0, ib};
    CHECK_FAILS(vdev_op_run(VDEV_OP_GATHER_GRAD, g1, 3, NULL), VDEV_ERR_SHAPE,
                "GatherGrad: input #0 (shape [3]) is int32, expected float");
    CHECK_FAILS(vdev_op_run(VDEV_OP_GATHER_GRAD, g3, 3, NULL), VDEV_ERR_SHAPE,
                "GatherGrad: input #2 (shape [3]) is int32, expected float");
    CHECK_FAILS(vdev_op_run(VDEV_OP_GATHER_GRAD, g2, 3, NULL), VDEV_ERR_SHAPE,
                "GatherGrad: incompatible shapes [5,2] and [3] (the gradient of a gather has the "
                "shape indices.shape + params.shape[1:])");
    const vdev_tensor_t *g5[3] = {fi, i0, sc};
    CHECK_FAILS(vdev_op_run(VDEV_OP_GATHER_GRAD, g5, 3, NULL), VDEV_ERR_INVALID_ARG,
                "GatherGrad: params must be at least 1 dimensional");
    vdev_tensor_t *all[] = {p, sc, ib, in, i2, i9, if2, fi, i0, ie, p50, p03, p3, i3};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        vdev_tensor_free(all[k]);
    vdev_device_pop();
}

/* ---- results: loops from the definition ---- */

struct gcase {
    int pnd, ind, i32;       /* ranks of params and indices; int32 params */
    int64_t ps[4], is[3];    /* their shapes */
};

static const struct gcase CASES[] = {
    {2, 1, 0, {7, 3}, {11}},          {1, 1, 1, {9}, {20}},
    {3, 0, 0, {4, 2, 5}, {0}},        {2, 2, 1, {6, 4}, {3, 5}},
    {4, 1, 0, {3, 2, 2, 3}, {4}},     {1, 3, 0, {5}, {2, 3, 2}},
    {2, 1, 0, {5, 3}, {0}},           {2, 2, 0, {8, 0}, {2, 3}},
    {3, 2, 1, {30, 1, 7}, {4, 9}},    {2, 3, 0, {4, 1}, {2, 2, 2}},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static int64_t numel(const int64_t *shape, int nd)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

/* Runs every case on dev; keep[c] gets the result's words (compare: they
 * must equal keep[c] bit for bit). */
static void test_results(const char *dev, uint32_t **keep, int compare)
{
    CHECK_OK(vdev_device_push(dev));
    rng_state = 0x243f6a8885a308d3ull; /* the same inputs on every device */
    for (size_t c = 0; c < NCASES; c++) {
        const struct gcase *gc = &CASES[c];
        int64_t np = numel(gc->ps, gc->pnd), ni = numel(gc->is, gc->ind);
        int64_t rows = gc->ps[0], row = rows ? np / rows : numel(gc->ps + 1, gc->pnd - 1);
        uint32_t *x = malloc((size_t)(np ? np : 1) * 4);
        int32_t *ix = malloc((size_t)(ni ? ni : 1) * 4);
        for (int64_t i = 0; i < np; i++) {
            float f = rng_uniform(-3, 3);
            if (gc->i32)
                x[i] = (uint32_t)(rng_next() & 0xffffffffu);
            else
                memcpy(&x[i], &f, 4);
        }
        for (int64_t k = 0; k < ni; k++)
            ix[k] = (int32_t)(rng_next() % (uint64_t)(rows ? rows : 1));
        vdev_tensor_t *tp = vdev_tensor_from_host(x, gc->ps, gc->pnd,
                                                  gc->i32 ? VDEV_I32 : VDEV_F32);
        vdev_tensor_t *ti = ints(gc->ind, gc->is, ix), *y = vdev_gather(tp, ti);
        CHECK(y);
        int64_t n = ni * row;
        uint32_t *got = calloc((size_t)(n ? n : 1), 4);
        if (y) {
            CHECK(vdev_tensor_ndim(y) == gc->ind + gc->pnd - 1);
            for (int d = 0; d < gc->ind; d++)
                CHECK(vdev_tensor_dim(y, d) == gc->is[d]);
            for (int d = 1; d < gc->pnd; d++)
                CHECK(vdev_tensor_dim(y, gc->ind + d - 1) == gc->ps[d]);
            CHECK((int)vdev_tensor_dtype(y) == (gc->i32 ? VDEV_I32 : VDEV_F32));
            CHECK_STR(vdev_tensor_device(y), vdev_tensor_device(tp));
            CHECK_OK(vdev_tensor_to_host(y, got, (size_t)n * 4));
        }
        int bad = 0;
        for (int64_t k = 0; k < ni; k++)
            for (int64_t j = 0; j < row; j++)
                bad += got[k * row + j] != x[ix[k] * row + j];
        if (bad)
            check_fail(__FILE__, __LINE__, "%s: case %zu: %d words differ", dev, c, bad);
        else
            check_passed++;
        if (compare)
            CHECK(!memcmp(got, keep[c], (size_t)n * 4));
        else
            keep[c] = got, got = NULL;
        free(got);
        free(x);
        free(ix);
        vdev_tensor_free(y);
        vdev_tensor_free(tp);
        vdev_tensor_free(ti);
    }
    vdev_device_pop();
}

/* ---- gradients ---- */

#define FD_EPS 1e-2
#define FD_ATOL 2e-3
#define FD_RTOL 1e-2

/* L = sum(tanh(gather(p, ix)) * W), W of the output's shape. */
static vdev_tensor_t *loss_of(const vdev_tensor_t *p, const vdev_tensor_t *ix, const float *w)
{
    vdev_tensor_t *y = vdev_gather(p, ix);
    if (!y)
        return NULL;
    int64_t shape[4];
    int nd = vdev_tensor_ndim(y);
    for (int d = 0; d < nd; d++)
        shape[d] = vdev_tensor_dim(y, d);
    return vdev_sum_all(vdev_mul(vdev_tanh(y), floats(nd, shape, w)));
}

/* params [5,3]: indices with repeats (1 three times), 2-D ones, and a
 * 0-dimensional one, against central differences. */
static void test_fd(const char *dev)
{
    static const int32_t ix1[6] = {1, 3, 1, 1, 4, 3}, ix2[6] = {2, 2, 0, 2, 4, 2}, ix0 = 1;
    int64_t ps[2] = {5, 3}, s6[1] = {6}, s23[2] = {2, 3};
    CHECK_OK(vdev_device_push(dev));
    for (int c = 0; c < 3; c++) {
        CHECK_OK(vdev_scope_begin());
        float x0[15], w[64];
        for (int i = 0; i < 15; i++)
            x0[i] = rng_uniform(-1.5f, 1.5f);
        for (int i = 0; i < 64; i++)
            w[i] = rng_uniform(-1, 1);
        vdev_tensor_t *ix = c == 0 ? ints(1, s6, ix1) : c == 1 ? ints(2, s23, ix2)
                                                               : ints(0, NULL, &ix0);
        vdev_tensor_t *var = vdev_variable(floats(2, ps, x0)), *g = NULL;
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *L = loss_of(var, ix, w);
        CHECK(tape && L);
        CHECK_OK(vdev_tape_gradient(tape, L, &var, 1, &g));
        vdev_tape_end(tape);
        float gv[15] = {0};
        CHECK(g && vdev_tensor_to_host(g, gv, sizeof gv) == VDEV_OK);
        CHECK_STR(vdev_tensor_device(g), vdev_tensor_device(var));
        int bad = 0;
        for (int i = 0; i < 15; i++) {
            double l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                float xp[15];
                memcpy(xp, x0, sizeof xp);
                xp[i] += (float)(sgn ? -FD_EPS : FD_EPS);
                l[sgn] = vdev_tensor_item(loss_of(floats(2, ps, xp), ix, w));
            }
            double fd = (l[0] - l[1]) / (2 * FD_EPS);
            bad += !(fabs(gv[i] - fd) <= FD_ATOL + FD_RTOL * fabs(fd));
        }
        if (bad)
            check_fail(__FILE__, __LINE__, "%s: gradient case %d: %d elements", dev, c, bad);
        else
            check_passed++;
        vdev_tensor_free(var);
        vdev_scope_end();
    }
    vdev_device_pop();
}

/* The gradient of sum(gather(p, ix) * W) is W's rows added to their
 * indices' rows: against that sum in float in the indices' order, bit for
 * bit, with the determinism switch off and on; the bits into *keep (or
 * compared with it). Many repeats of few rows, so that another order of
 * the additions would show. */
static void test_exact(const char *dev, uint32_t **keep, int compare)
{
    enum { ROWS = 7, COLS = 5, N = 400 };
    int64_t ps[2] = {ROWS, COLS}, is[1] = {N}, ys[2] = {N, COLS};
    float *w = malloc(N * COLS * sizeof *w), x0[ROWS * COLS] = {0}, want[ROWS * COLS] = {0};
    int32_t *ix = malloc(N * sizeof *ix);
    rng_state = 0x13198a2e03707344ull; /* the same inputs on every device */
    for (int i = 0; i < N * COLS; i++)
        w[i] = rng_uniform(-1, 1);
    for (int k = 0; k < N; k++)
        ix[k] = (int32_t)(rng_next() % (ROWS - 1)); /* the last row: none */
    for (int k = 0; k < N; k++)
        for (int j = 0; j < COLS; j++)
            want[ix[k] * COLS + j] += w[k * COLS + j];
    CHECK_OK(vdev_device_push(dev));
    uint32_t bits[2][ROWS * COLS];
    for (int det = 0; det < 2; det++) {
        vdev_config_set_deterministic(det);
        CHECK_OK(vdev_scope_begin());
        vdev_tensor_t *var = vdev_variable(floats(2, ps, x0)), *g = NULL;
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *L =
            vdev_sum_all(vdev_mul(vdev_gather(var, ints(1, is, ix)), floats(2, ys, w)));
        CHECK(tape && L);
        CHECK_OK(vdev_tape_gradient(tape, L, &var, 1, &g));
        vdev_tape_end(tape);
        memset(bits[det], 0xff, sizeof bits[det]);
        CHECK(g && vdev_tensor_to_host(g, bits[det], sizeof bits[det]) == VDEV_OK);
        vdev_tensor_free(var);
        vdev_scope_end();
    }
    vdev_config_set_deterministic(false);
    CHECK(!memcmp(bits[0], want, sizeof want));
    CHECK(!memcmp(bits[1], want, sizeof want));
    if (compare) {
        CHECK(!memcmp(bits[0], *keep, sizeof want));
    } else {
        *keep = malloc(sizeof want);
        memcpy(*keep, bits[0], sizeof want);
    }
    vdev_device_pop();
    free(w);
    free(ix);
}

/* On a CUDA GPU: an index outside the rows is not read back: its row is
 * zeros and its gradient is dropped, as on TensorFlow's GPUs. */
static void test_cuda_bad_index(void)
{
    static const float x[6] = {1, 2, 3, 4, 5, 6};
    static const int32_t ix[3] = {2, 7, -1};
    int64_t ps[2] = {3, 2}, is[1] = {3};
    CHECK_OK(vdev_device_push("GPU:0"));
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *var = vdev_variable(floats(2, ps, x)), *g = NULL;
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = vdev_gather(var, ints(1, is, ix));
    vdev_tensor_t *L = vdev_sum_all(y);
    CHECK(tape && L);
    CHECK_OK(vdev_tape_gradient(tape, L, &var, 1, &g));
    vdev_tape_end(tape);
    float yv[6], gv[6], wy[6] = {5, 6, 0, 0, 0, 0}, wg[6] = {0, 0, 0, 0, 1, 1};
    CHECK(y && vdev_tensor_to_host(y, yv, sizeof yv) == VDEV_OK);
    CHECK(g && vdev_tensor_to_host(g, gv, sizeof gv) == VDEV_OK);
    CHECK(!memcmp(yv, wy, sizeof wy) && !memcmp(gv, wg, sizeof wg));
    vdev_tensor_free(var);
    vdev_scope_end();
    vdev_device_pop();
}

int main(void)
{
    static uint32_t *res[NCASES], *grad;
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    test_errors("CPU:0");
    test_results("CPU:0", res, 0);
    test_fd("CPU:0");
    test_exact("CPU:0", &grad, 0);
    CHECK_NO_LEAK("CPU:0");

    /* a simulated GPU: bit for bit against the cpu backend */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_errors("GPU:1");
    test_results("GPU:1", res, 1);
    test_fd("GPU:1");
    test_exact("GPU:1", &grad, 1);
    CHECK_NO_LEAK("GPU:1");
    CHECK_NO_LEAK("CPU:0");

    /* CUDA GPUs, where the machine has one */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    if (vdev_device_push("GPU:0") == VDEV_OK) {
        vdev_device_pop();
        printf("CUDA GPU:0 found: the gathers run there too\n");
        test_results("GPU:0", res, 1);
        test_fd("GPU:0");
        test_exact("GPU:0", &grad, 1);
        test_cuda_bad_index();
        CHECK_NO_LEAK("GPU:0");
    }
    vdev_shutdown();
    for (size_t c = 0; c < NCASES; c++)
        free(res[c]);
    free(grad);
    return check_done();
}
