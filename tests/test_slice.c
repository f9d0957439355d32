/* test_slice.c — vdev_slice_rows and vdev_row, the slices of rows along axis
 * 0 (the Slice op), and their gradient.
 *
 *  - every bad input refused with its exact status and message (0
 *    dimensions, begin and size out of range, negative ones, an index out
 *    of range, NULL and freed inputs; SliceGrad's, which only the tape runs);
 *  - the forward result on the cpu backend against a direct loop, for every
 *    begin and size of tensors of 1 to 4 dimensions, f32 and i32;
 *  - the same on simulated GPUs (and, where the machine has them, CUDA
 *    GPUs), bit for bit against the cpu backend, on the device the input
 *    lives on;
 *  - a slice of a variable is a value: a later vdev_assign leaves it as it
 *    was;
 *  - the gradient through the tape against central finite differences, on
 *    every device, including an empty slice (zeros) and a row whose axis is
 *    dropped;
 *  - nothing left in use at the end. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/ops.h" /* vdev_op_run, for SliceGrad */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

/* ---- helpers ---- */

static vdev_tensor_t *from_host_f(const float *v, const int64_t *shape, int ndim)
{
    return vdev_tensor_from_host(v, shape, ndim, VDEV_F32);
}

/* The tensor's shape as read through the public accessors equals want. */
static int has_shape(const vdev_tensor_t *t, const int64_t *want, int ndim)
{
    if (vdev_tensor_ndim(t) != ndim)
        return 0;
    for (int d = 0; d < ndim; d++)
        if (vdev_tensor_dim(t, d) != want[d])
            return 0;
    return 1;
}

/* ---- errors ---- */

static void test_errors(void)
{
    int64_t s3[3] = {5, 3, 2}, s0[1] = {0};
    float v[30] = {0};
    vdev_tensor_t *x = from_host_f(v, s3, 3), *sc = from_host_f(v, s0, 0);
    CHECK(x && sc);

    CHECK(!vdev_slice_rows(sc, 0, 0));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_SHAPE);
    CHECK_STR(vdev_last_error(), "Slice: bad input shape [] (rows are sliced along axis 0: it "
                                 "needs at least 1 dimension)");
    CHECK(!vdev_slice_rows(x, -1, 1));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "Slice: Expected begin[0] in [0, 5], but got -1");
    CHECK(!vdev_slice_rows(x, 6, 0));
    CHECK_STR(vdev_last_error(), "Slice: Expected begin[0] in [0, 5], but got 6");
    CHECK(!vdev_slice_rows(x, 2, 4));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "Slice: Expected size[0] in [0, 3], but got 4");
    CHECK(!vdev_slice_rows(x, 2, -1));
    CHECK_STR(vdev_last_error(), "Slice: Expected size[0] in [0, 3], but got -1");
    /* begin + size overflowing int64 is refused, not wrapped */
    CHECK(!vdev_slice_rows(x, 5, INT64_MAX));
    CHECK_STR(vdev_last_error(), "Slice: Expected size[0] in [0, 0], but got 9223372036854775807");

    CHECK(!vdev_row(sc, 0));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "StridedSlice: Attempting to slice scalar input.");
    CHECK(!vdev_row(x, 5));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "StridedSlice: slice index 5 of dimension 0 out of bounds.");
    CHECK(!vdev_row(x, -1));
    CHECK_STR(vdev_last_error(), "StridedSlice: slice index -1 of dimension 0 out of bounds.");

    /* NULL in, NULL out, the first error kept (a chain needs one check) */
    CHECK(!vdev_slice_rows(NULL, 0, 1));
    CHECK_STR(vdev_last_error(), "StridedSlice: slice index -1 of dimension 0 out of bounds.");
    CHECK(!vdev_row(NULL, 0));
    CHECK_STR(vdev_last_error(), "StridedSlice: slice index -1 of dimension 0 out of bounds.");

    /* a freed tensor: the dead-handle error, naming the op */
    vdev_tensor_t *dead = from_host_f(v, s3, 3);
    vdev_tensor_free(dead);
    CHECK(!vdev_slice_rows(dead, 0, 1));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(),
              "Slice: input #0: not a live tensor (freed already, or not a tensor)");
    CHECK(!vdev_row(dead, 0));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(),
              "Slice: input #0: not a live tensor (freed already, or not a tensor)");

    /* SliceGrad, which only the tape runs: dy must fit the input's rows */
    int64_t s43[2] = {4, 3}, s52[2] = {5, 2}, s23[2] = {2, 3};
    vdev_tensor_t *dy = from_host_f(v, s43, 2), *like = from_host_f(v, s52, 2);
    vdev_tensor_t *lab = vdev_tensor_from_host(v, s23, 2, VDEV_I32);
    struct vdev_op_params p = {.i = {0}};
    const vdev_tensor_t *in[2] = {dy, like};
    CHECK(!vdev_op_run(VDEV_OP_SLICE_GRAD, in, 2, &p));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_SHAPE);
    CHECK_STR(vdev_last_error(), "SliceGrad: incompatible shapes [4,3] and [5,2] (the gradient of "
                                 "a slice of rows must fit the input's rows)");
    in[1] = x; /* [5,3,2]: another rank */
    CHECK(!vdev_op_run(VDEV_OP_SLICE_GRAD, in, 2, &p));
    CHECK_STR(vdev_last_error(), "SliceGrad: incompatible shapes [4,3] and [5,3,2] (the gradient "
                                 "of a slice of rows must fit the input's rows)");
    in[0] = lab;
    in[1] = like;
    CHECK(!vdev_op_run(VDEV_OP_SLICE_GRAD, in, 2, &p));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_SHAPE);
    CHECK_STR(vdev_last_error(), "SliceGrad: input #0 (shape [2,3]) is int32, expected float");
    int64_t s53[2] = {5, 3};
    vdev_tensor_t *dy2 = from_host_f(v, s23, 2), *like2 = from_host_f(v, s53, 2);
    in[0] = dy2;
    in[1] = like2;
    p.i[0] = 4; /* rows 4 and 5 of 5 */
    CHECK(!vdev_op_run(VDEV_OP_SLICE_GRAD, in, 2, &p));
    CHECK_STR(vdev_last_error(), "SliceGrad: incompatible shapes [2,3] and [5,3] (the gradient of "
                                 "a slice of rows must fit the input's rows)");
    p.i[0] = 3; /* rows 3 and 4: fits */
    vdev_tensor_t *ok = vdev_op_run(VDEV_OP_SLICE_GRAD, in, 2, &p);
    CHECK(ok && has_shape(ok, s53, 2));
    vdev_tensor_free(ok);
    vdev_tensor_free(dy2);
    vdev_tensor_free(like2);
    vdev_tensor_free(dy);
    vdev_tensor_free(like);
    vdev_tensor_free(lab);
    vdev_tensor_free(x);
    vdev_tensor_free(sc);
}

/* ---- the forward result ---- */

#define NSHAPES 5
static const int64_t SHAPES[NSHAPES][4] = {{7}, {5, 3}, {4, 3, 2}, {3, 2, 1, 3}, {6, 0}};
static const int NDIMS[NSHAPES] = {1, 2, 3, 4, 2};

/* Every begin and size of each shape (f32 and i32) on the current device:
 * against a direct loop when ref is NULL (the words kept in *keep, one
 * array per case in order), else bit for bit against ref's words. Returns
 * the number of cases. */
static int forward_cases(uint32_t **keep, uint32_t *const *ref, const char *dev)
{
    int k = 0;
    for (int s = 0; s < NSHAPES; s++)
        for (int dt = 0; dt < 2; dt++) {
            const int64_t *sh = SHAPES[s];
            int nd = NDIMS[s];
            int64_t rows = sh[0], row = 1;
            for (int d = 1; d < nd; d++)
                row *= sh[d];
            uint32_t words[64];
            for (int64_t i = 0; i < rows * row; i++)
                words[i] = dt ? (uint32_t)rng_next() : 0;
            if (!dt)
                for (int64_t i = 0; i < rows * row; i++) {
                    float f = rng_uniform(-3, 3);
                    memcpy(&words[i], &f, 4);
                }
            vdev_tensor_t *x =
                vdev_tensor_from_host(words, sh, nd, dt ? VDEV_I32 : VDEV_F32);
            CHECK(x);
            for (int64_t b = 0; b <= rows; b++)
                for (int64_t n = 0; b + n <= rows; n++, k++) {
                    vdev_tensor_t *y = vdev_slice_rows(x, b, n);
                    int64_t want[4];
                    memcpy(want, sh, sizeof want);
                    want[0] = n;
                    CHECK(y && has_shape(y, want, nd));
                    CHECK(vdev_tensor_dtype(y) == (dt ? VDEV_I32 : VDEV_F32));
                    CHECK_STR(vdev_tensor_device(y), vdev_tensor_device(x));
                    uint32_t *got = calloc((size_t)(n * row + 1), 4);
                    CHECK_OK(vdev_tensor_to_host(y, got, (size_t)(n * row) * 4));
                    const uint32_t *exp = ref ? ref[k] : words + b * row;
                    if (memcmp(got, exp, (size_t)(n * row) * 4))
                        check_fail(__FILE__, __LINE__, "%s: shape %d dtype %d rows [%lld, +%lld)",
                                   dev, s, dt, (long long)b, (long long)n);
                    else
                        check_passed++;
                    if (keep)
                        keep[k] = got;
                    else
                        free(got);
                    vdev_tensor_free(y);
                }
            /* x[i]: the row without its axis */
            for (int64_t i = 0; i < rows; i++) {
                vdev_tensor_t *r = vdev_row(x, i);
                CHECK(r && has_shape(r, sh + 1, nd - 1));
                uint32_t got[64];
                CHECK_OK(vdev_tensor_to_host(r, got, (size_t)row * 4));
                CHECK(!memcmp(got, words + i * row, (size_t)row * 4));
                vdev_tensor_free(r);
            }
            vdev_tensor_free(x);
        }
    return k;
}

static void test_forward(const char *dev, uint32_t **keep, uint32_t *const *ref)
{
    CHECK_OK(vdev_device_push(dev));
    rng_state = 0x243f6a8885a308d3ull; /* the same inputs on every device */
    int k = forward_cases(keep, ref, dev);
    CHECK(k > 100);
    vdev_device_pop();
}

/* A slice of a variable is a copy: assigning the variable afterwards leaves
 * it as it was (TensorFlow's slices are values). */
static void test_variable_value(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t s[2] = {3, 2};
    float v[6] = {1, 2, 3, 4, 5, 6}, w[6] = {0};
    vdev_tensor_t *var = vdev_variable(from_host_f(v, s, 2)), *zero = from_host_f(w, s, 2);
    vdev_tensor_t *y = vdev_slice_rows(var, 1, 2), *r = vdev_row(var, 2);
    CHECK_OK(vdev_assign(var, zero));
    float got[4] = {0};
    CHECK_OK(vdev_tensor_to_host(y, got, sizeof got));
    CHECK(got[0] == 3 && got[1] == 4 && got[2] == 5 && got[3] == 6);
    CHECK_OK(vdev_tensor_to_host(r, got, 2 * sizeof(float)));
    CHECK(got[0] == 5 && got[1] == 6);
    vdev_tensor_free(y);
    vdev_tensor_free(r);
    vdev_tensor_free(zero);
    vdev_tensor_free(var);
    vdev_device_pop();
}

/* ---- the gradient against finite differences ---- */

#define FD_EPS 1e-2
#define FD_ATOL 2e-3
#define FD_RTOL 1e-2

/* L(x) = sum(tanh(x[b:b+n]) * W1) + sum(x[i] * W2), x [5,3]; W1 [n,3], W2 [3]. */
struct gcase {
    int64_t b, n, i;
};

static vdev_tensor_t *loss_of(vdev_tensor_t *x, const struct gcase *c, const float *w1,
                              const float *w2)
{
    int64_t s1[2] = {c->n, 3}, s2[1] = {3};
    vdev_tensor_t *W1 = from_host_f(w1, s1, 2), *W2 = from_host_f(w2, s2, 1);
    vdev_tensor_t *a = vdev_sum_all(vdev_mul(vdev_tanh(vdev_slice_rows(x, c->b, c->n)), W1));
    vdev_tensor_t *b = vdev_sum_all(vdev_mul(vdev_row(x, c->i), W2));
    return vdev_add(a, b);
}

static void test_gradient(const char *dev)
{
    static const struct gcase cases[] = {{0, 5, 0}, {1, 3, 4}, {4, 1, 2}, {2, 0, 1}, {5, 0, 3}};
    CHECK_OK(vdev_device_push(dev));
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const struct gcase *c = &cases[ci];
        CHECK_OK(vdev_scope_begin());
        int64_t s[2] = {5, 3};
        float x0[15], w1[15], w2[3];
        for (int i = 0; i < 15; i++) {
            x0[i] = rng_uniform(-1.5f, 1.5f);
            w1[i] = rng_uniform(-1, 1);
        }
        for (int i = 0; i < 3; i++)
            w2[i] = rng_uniform(-1, 1);
        vdev_tensor_t *var = vdev_variable(from_host_f(x0, s, 2));
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *L = loss_of(var, c, w1, w2), *g = NULL;
        CHECK(tape && L);
        CHECK_OK(vdev_tape_gradient(tape, L, &var, 1, &g));
        vdev_tape_end(tape);
        CHECK(g && has_shape(g, s, 2));
        CHECK_STR(vdev_tensor_device(g), vdev_tensor_device(var));
        float gv[15] = {0};
        CHECK_OK(vdev_tensor_to_host(g, gv, sizeof gv));
        int bad = 0;
        for (int i = 0; i < 15; i++) {
            double l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                float xp[15];
                memcpy(xp, x0, sizeof xp);
                xp[i] += (float)(sgn ? -FD_EPS : FD_EPS);
                vdev_tensor_t *xt = from_host_f(xp, s, 2);
                l[sgn] = vdev_tensor_item(loss_of(xt, c, w1, w2));
            }
            double fd = (l[0] - l[1]) / (2 * FD_EPS);
            /* rows the loss does not read: exactly 0 */
            int64_t r = i / 3;
            int read = (r >= c->b && r < c->b + c->n) || r == c->i;
            if (fabs(gv[i] - fd) > FD_ATOL + FD_RTOL * fabs(fd) || (!read && gv[i] != 0.0f))
                bad++;
        }
        if (bad)
            check_fail(__FILE__, __LINE__, "%s: rows [%lld, +%lld) and row %lld: %d elements",
                       dev, (long long)c->b, (long long)c->n, (long long)c->i, bad);
        else
            check_passed++;
        vdev_tensor_free(var);
        vdev_scope_end();
    }
    vdev_device_pop();
}

/* ---- a run ---- */

/* The forward cases on dev against the cpu backend's words (ref), then the
 * variable's value and the gradient there. */
static void test_device(const char *dev, uint32_t *const *ref)
{
    test_forward(dev, NULL, ref);
    test_variable_value(dev);
    test_gradient(dev);
}

int main(void)
{
    enum { MAXK = 512 };
    static uint32_t *ref[MAXK];

    /* the cpu backend: errors, the direct loop, the words kept */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("CPU:0"));
    test_errors();
    vdev_device_pop();
    test_forward("CPU:0", ref, NULL);
    test_variable_value("CPU:0");
    test_gradient("CPU:0");
    CHECK_NO_LEAK("CPU:0");

    /* simulated GPUs: bit for bit against the cpu backend, on each GPU */
    check_fresh("3x16GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:1"));
    test_errors();
    vdev_device_pop();
    test_device("GPU:1", ref);
    test_device("GPU:2", ref);
    CHECK_NO_LEAK("GPU:1");
    CHECK_NO_LEAK("GPU:2");
    CHECK_NO_LEAK("CPU:0");

    /* CUDA GPUs, where the machine has one (the CUDA plugin's copies) */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    if (vdev_device_push("GPU:0") == VDEV_OK) {
        vdev_device_pop();
        printf("CUDA GPU:0 found: the slices run there too\n");
        test_device("GPU:0", ref);
        CHECK_NO_LEAK("GPU:0");
    }
    vdev_shutdown();
    for (int k = 0; k < MAXK; k++)
        free(ref[k]);
    return check_done();
}
