/* test_compare_ops.c — the public functions of the comparisons, the logical
 * ops, vdev_cast and vdev_where (src/ops/compare.c), and of vdev_max,
 * vdev_min, vdev_abs and vdev_sign (src/ops/extreme.c), on the cpu backend and
 * on a simulated GPU: the values TensorFlow gives at the edges (NaN against
 * itself, -0 against +0, casts of NaN, infinities and floats beyond int32,
 * ints float rounds), the broadcast shapes, the placement log's op names, a
 * cast to the tensor's own dtype that a tape differentiates through, the
 * gradient of vdev_where summed back to broadcast inputs, and every refusal
 * with its exact message. test_ops.c sweeps the kernels themselves. */
#define _GNU_SOURCE
#include "check.h"
#include "vdev/autograd.h"
#include "vdev/ops.h"
#include "vdev/placement.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static vdev_tensor_t *f32(const float *v, int64_t n)
{
    int64_t s[1] = {n};
    return vdev_tensor_from_host(v, s, 1, VDEV_F32);
}

static vdev_tensor_t *i32(const int32_t *v, int64_t n)
{
    int64_t s[1] = {n};
    return vdev_tensor_from_host(v, s, 1, VDEV_I32);
}

static vdev_tensor_t *boolv(const int32_t *v, int64_t n)
{
    int64_t s[1] = {n};
    return vdev_tensor_from_host(v, s, 1, VDEV_BOOL);
}

/* t's words equal want's n words, t of dtype dt. */
static void check_words(const vdev_tensor_t *t, enum vdev_dtype dt, const void *want, int64_t n)
{
    uint32_t got[16];
    CHECK(t != NULL);
    if (!t)
        return;
    CHECK(vdev_tensor_dtype(t) == dt);
    CHECK(vdev_tensor_numel(t) == n);
    CHECK_OK(vdev_tensor_to_host(t, got, sizeof got));
    CHECK(memcmp(got, want, (size_t)n * 4) == 0);
}

static void test_values(void)
{
    const float x[6] = {NAN, -0.0f, 1.0f, -INFINITY, 2.0f, NAN};
    const float y[6] = {NAN, 0.0f, 2.0f, -INFINITY, 1.0f, 1.0f};
    vdev_tensor_t *a = f32(x, 6), *b = f32(y, 6);
    const int32_t eq[6] = {0, 1, 0, 1, 0, 0}, ne[6] = {1, 0, 1, 0, 1, 1};
    const int32_t lt[6] = {0, 0, 1, 0, 0, 0}, le[6] = {0, 1, 1, 1, 0, 0};
    const int32_t gt[6] = {0, 0, 0, 0, 1, 0}, ge[6] = {0, 1, 0, 1, 1, 0};
    check_words(vdev_equal(a, b), VDEV_BOOL, eq, 6);
    check_words(vdev_not_equal(a, b), VDEV_BOOL, ne, 6);
    check_words(vdev_less(a, b), VDEV_BOOL, lt, 6);
    check_words(vdev_less_equal(a, b), VDEV_BOOL, le, 6);
    check_words(vdev_greater(a, b), VDEV_BOOL, gt, 6);
    check_words(vdev_greater_equal(a, b), VDEV_BOOL, ge, 6);

    /* int32 beyond float's 24 bits: compared as ints */
    const int32_t u[3] = {16777217, INT32_MIN, 5}, v[3] = {16777216, INT32_MAX, 5};
    const int32_t igt[3] = {1, 0, 0};
    check_words(vdev_greater(i32(u, 3), i32(v, 3)), VDEV_BOOL, igt, 3);

    /* logic, broadcast: [2,1] and [3] -> [2,3] */
    const int32_t p[2] = {1, 0}, q[3] = {1, 0, 1};
    int64_t s21[2] = {2, 1};
    vdev_tensor_t *pb = vdev_tensor_from_host(p, s21, 2, VDEV_BOOL), *qb = boolv(q, 3);
    const int32_t and_[6] = {1, 0, 1, 0, 0, 0}, or_[6] = {1, 1, 1, 1, 0, 1};
    vdev_tensor_t *r = vdev_logical_and(pb, qb);
    check_words(r, VDEV_BOOL, and_, 6);
    CHECK(vdev_tensor_ndim(r) == 2 && vdev_tensor_dim(r, 0) == 2 && vdev_tensor_dim(r, 1) == 3);
    check_words(vdev_logical_or(pb, qb), VDEV_BOOL, or_, 6);
    const int32_t notq[3] = {0, 1, 0};
    check_words(vdev_logical_not(qb), VDEV_BOOL, notq, 3);

    /* casts at the edges */
    const float c[8] = {NAN, INFINITY, -INFINITY, 3e9f, -2.7f, 2.7f, -0.0f, 2147483648.0f};
    const int32_t ci[8] = {0, INT32_MAX, INT32_MIN, INT32_MAX, -2, 2, 0, INT32_MAX};
    const int32_t cb[8] = {1, 1, 1, 1, 1, 1, 0, 1};
    vdev_tensor_t *ct = f32(c, 8);
    check_words(vdev_cast(ct, VDEV_I32), VDEV_I32, ci, 8);
    check_words(vdev_cast(ct, VDEV_BOOL), VDEV_BOOL, cb, 8);
    const int32_t big[3] = {16777217, -3, 0};
    const float bigf[3] = {16777216.0f, -3.0f, 0.0f};
    check_words(vdev_cast(i32(big, 3), VDEV_F32), VDEV_F32, bigf, 3);
    const int32_t bigb[3] = {1, 1, 0};
    check_words(vdev_cast(i32(big, 3), VDEV_BOOL), VDEV_BOOL, bigb, 3);
    const float qf[3] = {1.0f, 0.0f, 1.0f};
    check_words(vdev_cast(qb, VDEV_F32), VDEV_F32, qf, 3);
    check_words(vdev_cast(qb, VDEV_I32), VDEV_I32, q, 3);
    /* the tensor's own dtype: a copy */
    vdev_tensor_t *same = vdev_cast(ct, VDEV_F32);
    check_words(same, VDEV_F32, c, 8);
    CHECK(same != ct);

    /* where: c [3], x [2,1], y a scalar -> [2,3] */
    const float xv[2] = {10.0f, 20.0f}, yv[1] = {-1.0f};
    int64_t s0[1] = {1};
    vdev_tensor_t *xw = vdev_tensor_from_host(xv, s21, 2, VDEV_F32);
    vdev_tensor_t *yw = vdev_tensor_from_host(yv, s0, 0, VDEV_F32);
    const float want[6] = {10.0f, -1.0f, 10.0f, 20.0f, -1.0f, 20.0f};
    vdev_tensor_t *w = vdev_where(qb, xw, yw);
    check_words(w, VDEV_F32, want, 6);
    CHECK(vdev_tensor_ndim(w) == 2 && vdev_tensor_dim(w, 0) == 2 && vdev_tensor_dim(w, 1) == 3);
    /* int32 values; a NaN or infinity not chosen does not reach the result */
    const int32_t wi[3] = {7, -9, 7};
    check_words(vdev_where(qb, i32((const int32_t[]){7, 8, 7}, 3), i32((const int32_t[]){0, -9, 0}, 3)),
                VDEV_I32, wi, 3);
    const float nanx[3] = {1.0f, NAN, 3.0f}, infy[3] = {INFINITY, 5.0f, -INFINITY};
    const float wf[3] = {1.0f, 5.0f, 3.0f};
    check_words(vdev_where(qb, f32(nanx, 3), f32(infy, 3)), VDEV_F32, wf, 3);
}

/* The gradient of where: dx = where(c, g, 0) summed to x's [2,1], dy =
 * where(c, 0, g) summed to y's scalar; each checked against the sum the
 * formula gives for g = the output's own weights. */
static void test_where_gradient(void)
{
    const int32_t cv[3] = {1, 0, 1};
    const float xv[2] = {1.0f, 2.0f}, yv[1] = {3.0f}, wv[6] = {1, 2, 3, 4, 5, 6};
    int64_t s21[2] = {2, 1}, s23[2] = {2, 3}, s0[1] = {1}, s3[1] = {3};
    vdev_tensor_t *c = vdev_tensor_from_host(cv, s3, 1, VDEV_BOOL);
    vdev_tensor_t *x = vdev_variable(vdev_tensor_from_host(xv, s21, 2, VDEV_F32));
    vdev_tensor_t *y = vdev_variable(vdev_tensor_from_host(yv, s0, 0, VDEV_F32));
    vdev_tensor_t *wts = vdev_tensor_from_host(wv, s23, 2, VDEV_F32);
    vdev_tape_t *tape = vdev_tape_begin();
    CHECK(tape != NULL);
    vdev_tensor_t *loss = vdev_sum_all(vdev_mul(vdev_where(c, x, y), wts));
    vdev_tensor_t *vars[2] = {x, y}, *grads[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, 2, grads));
    /* row 0: c picks x at columns 0 and 2 (1 + 3), y at 1 (2); row 1: 4 + 6
     * for x, 5 for y */
    const float dx[2] = {4.0f, 10.0f}, dy[1] = {7.0f};
    check_words(grads[0], VDEV_F32, dx, 2);
    check_words(grads[1], VDEV_F32, dy, 1);
    CHECK(vdev_tensor_ndim(grads[1]) == 0);
    vdev_tape_end(tape);
    vdev_tensor_free(grads[0]);
    vdev_tensor_free(grads[1]);
    vdev_tensor_free(x);
    vdev_tensor_free(y);

    /* a cast to the tensor's own dtype passes the gradient on; through
     * int32 there is none (the variable is unconnected: zeros) */
    vdev_tensor_t *v = vdev_variable(vdev_tensor_from_host(xv, s21, 2, VDEV_F32));
    tape = vdev_tape_begin();
    vdev_tensor_t *l2 = vdev_sum_all(vdev_cast(vdev_cast(v, VDEV_F32), VDEV_F32));
    vdev_tensor_t *g2 = NULL;
    CHECK_OK(vdev_tape_gradient(tape, l2, &v, 1, &g2));
    const float ones[2] = {1.0f, 1.0f};
    check_words(g2, VDEV_F32, ones, 2);
    vdev_tensor_free(g2);
    vdev_tape_end(tape);
    tape = vdev_tape_begin();
    vdev_tensor_t *l3 = vdev_sum_all(vdev_cast(vdev_cast(v, VDEV_I32), VDEV_F32));
    vdev_tensor_t *g3 = NULL;
    CHECK_OK(vdev_tape_gradient(tape, l3, &v, 1, &g3));
    const float zeros[2] = {0.0f, 0.0f};
    check_words(g3, VDEV_F32, zeros, 2);
    vdev_tensor_free(g3);
    vdev_tape_end(tape);
    vdev_tensor_free(v);
}

static void test_errors(void)
{
    const float x[2] = {1, 2};
    const int32_t n[2] = {1, 2}, b[2] = {1, 0};
    vdev_tensor_t *f = f32(x, 2), *i = i32(n, 2), *t = boolv(b, 2);
    CHECK(vdev_less(t, t) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_STR(vdev_last_error(), "Less: input #0 (shape [2]) is bool, expected float or int32");
    CHECK(vdev_equal(f, i) == NULL);
    CHECK_STR(vdev_last_error(), "Equal: input #1 (shape [2]) is int32, expected float");
    CHECK(vdev_logical_and(f, t) == NULL);
    CHECK_STR(vdev_last_error(), "LogicalAnd: input #0 (shape [2]) is float, expected bool");
    CHECK(vdev_logical_not(i) == NULL);
    CHECK_STR(vdev_last_error(), "LogicalNot: input #0 (shape [2]) is int32, expected bool");
    int64_t s23[2] = {2, 3}, s4[1] = {4};
    vdev_tensor_t *f23 = vdev_tensor_zeros(s23, 2, VDEV_F32), *f4 = vdev_tensor_zeros(s4, 1, VDEV_F32);
    CHECK(vdev_greater(f23, f4) == NULL);
    CHECK_STR(vdev_last_error(), "Greater: incompatible shapes [2,3] and [4] (dimensions 3 and 4, "
                                 "1 from the end, differ and neither is 1)");
    CHECK(vdev_cast(f, (enum vdev_dtype)7) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_cast: unknown dtype 7");
    CHECK(vdev_where(f, f, f) == NULL);
    CHECK_STR(vdev_last_error(), "SelectV2: input #0 (shape [2]) is float, expected bool");
    CHECK(vdev_where(t, f, i) == NULL);
    CHECK_STR(vdev_last_error(), "SelectV2: input #2 (shape [2]) is int32, expected float");
    int64_t s3[1] = {3};
    vdev_tensor_t *t3 = vdev_tensor_zeros(s3, 1, VDEV_BOOL);
    CHECK(vdev_where(t3, f23, f4) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_STR(vdev_last_error(),
              "SelectV2: condition [3], then [2,3], and else [4] must be broadcastable");
    /* NULL operands: NULL out, the error as it was */
    CHECK(vdev_equal(NULL, f) == NULL);
    CHECK(vdev_cast(NULL, VDEV_I32) == NULL);
    CHECK(vdev_where(t, NULL, f) == NULL);
}

/* The placement log names TensorFlow's ops, on the device they ran on. */
static void test_names(const char *dev)
{
    const float x[2] = {1, 2};
    vdev_tensor_t *f = f32(x, 2);
    uint64_t less0 = vdev_placement_op_count("Less", dev);
    uint64_t sel0 = vdev_placement_op_count("SelectV2", dev);
    uint64_t cast0 = vdev_placement_op_count("Cast", dev);
    vdev_tensor_t *c = vdev_less(f, f);
    CHECK(c && vdev_where(c, f, f) && vdev_cast(f, VDEV_I32));
    CHECK(vdev_placement_op_count("Less", dev) == less0 + 1);
    CHECK(vdev_placement_op_count("SelectV2", dev) == sel0 + 1);
    CHECK(vdev_placement_op_count("Cast", dev) == cast0 + 1);
}

/* Max and Min: NaN, empty axes, int32, the gradient's tie rule; Abs, Sign;
 * their refusals. */
static void test_extreme(void)
{
    const float x[6] = {1.0f, 3.0f, 3.0f, -1.0f, NAN, 2.0f};
    int64_t s23[2] = {2, 3}, s03[2] = {0, 3}, s2[1] = {2};
    vdev_tensor_t *t = vdev_tensor_from_host(x, s23, 2, VDEV_F32);
    const float mx[2] = {3.0f, NAN}, mn0[3] = {-1.0f, NAN, 2.0f};
    vdev_tensor_t *m = vdev_max(t, 1, false);
    check_words(m, VDEV_F32, mx, 2);
    check_words(vdev_min(t, 0, true), VDEV_F32, mn0, 3);
    const float inf[3] = {-INFINITY, -INFINITY, -INFINITY};
    check_words(vdev_max(vdev_tensor_zeros(s03, 2, VDEV_F32), 0, false), VDEV_F32, inf, 3);
    const int32_t iv[2] = {INT32_MIN, 5}, imin[1] = {INT32_MIN}, imax0[1] = {INT32_MAX};
    check_words(vdev_min_all(vdev_tensor_from_host(iv, s2, 1, VDEV_I32)), VDEV_I32, imin, 1);
    check_words(vdev_min_all(vdev_tensor_zeros(s03, 2, VDEV_I32)), VDEV_I32, imax0, 1);
    const float ab[6] = {1.0f, 3.0f, 3.0f, 1.0f, NAN, 2.0f};
    check_words(vdev_abs(t), VDEV_F32, ab, 6);
    const float sg[6] = {1.0f, 1.0f, 1.0f, -1.0f, NAN, 1.0f};
    check_words(vdev_sign(t), VDEV_F32, sg, 6);

    /* the gradient of max over the rows: the tie [3, 3] shares dy */
    vdev_tensor_t *v = vdev_variable(vdev_tensor_from_host(x, s23, 2, VDEV_F32));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *g = NULL;
    CHECK_OK(vdev_tape_gradient(tape, vdev_sum_all(vdev_max(v, 1, false)), &v, 1, &g));
    float got[6];
    CHECK(g && vdev_tensor_to_host(g, got, sizeof got) == VDEV_OK);
    CHECK(got[0] == 0.0f && got[1] == 0.5f && got[2] == 0.5f);
    CHECK(isnan(got[3]) && isnan(got[4]) && isnan(got[5])); /* the NaN row: 0/0 */
    vdev_tensor_free(g);
    vdev_tape_end(tape);
    vdev_tensor_free(v);

    const int32_t b[2] = {1, 0};
    vdev_tensor_t *bt = boolv(b, 2);
    CHECK(vdev_max(bt, 0, false) == NULL);
    CHECK_STR(vdev_last_error(), "Max: input #0 (shape [2]) is bool, expected float");
    CHECK(vdev_sign(bt) == NULL);
    CHECK_STR(vdev_last_error(), "Sign: input #0 (shape [2]) is bool, expected float or int32");
    CHECK(vdev_min(t, 2, false) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_STR(vdev_last_error(), "Min: Invalid reduction dimension (2 for input with 2 "
                                 "dimension(s)");

    /* floor.c: values at the edges, and the refusals */
    const float fx[4] = {-7.5f, 7.5f, 2.5f, -0.5f}, fy[4] = {2.0f, -2.0f, 1.0f, 1.0f};
    int64_t s4[1] = {4};
    vdev_tensor_t *tx = vdev_tensor_from_host(fx, s4, 1, VDEV_F32);
    vdev_tensor_t *ty = vdev_tensor_from_host(fy, s4, 1, VDEV_F32);
    const float fq[4] = {-4.0f, -4.0f, 2.0f, -1.0f}, fm[4] = {0.5f, -0.5f, 0.5f, 0.5f};
    const float fr[4] = {-8.0f, 8.0f, 2.0f, -0.0f};
    check_words(vdev_floor_div(tx, ty), VDEV_F32, fq, 4);
    check_words(vdev_floor_mod(tx, ty), VDEV_F32, fm, 4);
    check_words(vdev_round(tx), VDEV_F32, fr, 4);
    const int32_t ix[3] = {INT32_MIN, -7, 9}, iy[3] = {-1, 2, 0};
    const int32_t iq[3] = {INT32_MIN, -4, 0}, im[3] = {0, 1, 0};
    int64_t s3b[1] = {3};
    vdev_tensor_t *tix = vdev_tensor_from_host(ix, s3b, 1, VDEV_I32);
    vdev_tensor_t *tiy = vdev_tensor_from_host(iy, s3b, 1, VDEV_I32);
    check_words(vdev_floor_div(tix, tiy), VDEV_I32, iq, 3);
    check_words(vdev_floor_mod(tix, tiy), VDEV_I32, im, 3);
    CHECK(vdev_floor_div(tx, tix) == NULL);
    CHECK_STR(vdev_last_error(), "FloorDiv: input #1 (shape [3]) is int32, expected float");
    CHECK(vdev_floor(bt) == NULL);
    CHECK_STR(vdev_last_error(), "Floor: input #0 (shape [2]) is bool, expected float or int32");
    CHECK(vdev_floor_mod(bt, bt) == NULL);
    CHECK_STR(vdev_last_error(),
              "FloorMod: input #0 (shape [2]) is bool, expected float or int32");
}

static void run_all(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    test_values();
    test_where_gradient();
    test_errors();
    test_names(dev);
    test_extreme();
    vdev_scope_end();
    vdev_device_pop();
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
}

int main(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    run_all("CPU:0");
    vdev_shutdown();
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    run_all("GPU:1");
    vdev_shutdown();
    return check_done();
}
