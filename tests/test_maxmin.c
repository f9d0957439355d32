/* test_maxmin.c — vdev_maximum and vdev_minimum (TensorFlow's Maximum and
 * Minimum) and their gradient op MaximumMinimumGrad.
 *
 *  - results bit for bit against a loop written here, on every pair of
 *    NaN (two payloads, to see that x's NaN wins), -inf, -1, -0, +0, 1,
 *    2.5 and +inf: NaN propagates, equal pairs and -0/+0 give x;
 *  - each broadcast form (same shape, a row, one element, [n,1] by [1,n]);
 *  - the same on a simulated GPU (GPU:1), bit for bit against CPU:0;
 *  - gradients through the tape, exactly: dy to x where x >= y (Minimum:
 *    x <= y), to y elsewhere (NaN included), y's share summed over the rows
 *    it was broadcast along, with ties;
 *  - bad inputs with their exact status and message, the gradient op's own
 *    checks, and nothing left in use at the end;
 *  - on a CUDA GPU (where the machine has one) the results and gradients bit
 *    for bit against CPU:0. */
#include "check.h"
#include "ops/ops.h" /* vdev_op_run, for MaximumMinimumGrad's own checks */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NV 9
#define NP (NV * NV)

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The values every pair is drawn from; two NaNs with different payloads. */
static float val(int k)
{
    static const float v[NV - 2] = {-INFINITY, -1.0f, -0.0f, 0.0f, 1.0f, 2.5f, INFINITY};
    return k == 0 ? from_bits(0x7fc00001u) : k == 1 ? from_bits(0x7fc00002u) : v[k - 2];
}

/* TensorFlow's rule, written out: a NaN operand (x's first), else std::max
 * (x < y ? y : x) or std::min (y < x ? y : x). */
static float want(int minimum, float x, float y)
{
    if (isnan(x))
        return x;
    if (isnan(y))
        return y;
    if (minimum)
        return y < x ? y : x;
    return x < y ? y : x;
}

static vdev_tensor_t *floats(int nd, const int64_t *shape, const float *v)
{
    return vdev_tensor_from_host(v, shape, nd, VDEV_F32);
}

static vdev_tensor_t *run(int minimum, const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    return minimum ? vdev_minimum(x, y) : vdev_maximum(x, y);
}

/* Checks n results of t against e, bit for bit; frees t. */
static void same_bits(const char *what, vdev_tensor_t *t, const float *e, int n)
{
    float got[NP];
    CHECK(t && n <= NP && vdev_tensor_to_host(t, got, sizeof(float) * (size_t)n) == VDEV_OK);
    int bad = 0;
    for (int i = 0; i < n && !bad; i++)
        if (bits_of(got[i]) != bits_of(e[i])) {
            check_fail(__FILE__, __LINE__, "%s element %d: %08x, expected %08x", what, i,
                       bits_of(got[i]), bits_of(e[i]));
            bad = 1;
        }
    if (!bad)
        check_passed++;
    vdev_tensor_free(t);
}

/* Every pair, in four broadcast forms; out[m] gets each result's words. */
static void test_results(const char *dev, float out[2][4][NP])
{
    CHECK_OK(vdev_device_push(dev));
    float xs[NP], ys[NP], col[NV], row[NV], e[NP];
    for (int i = 0; i < NV; i++) {
        col[i] = row[i] = val(i);
        for (int j = 0; j < NV; j++) {
            xs[i * NV + j] = val(i);
            ys[i * NV + j] = val(j);
        }
    }
    int64_t s_all[1] = {NP}, s_col[2] = {NV, 1}, s_row[2] = {1, NV}, s_sq[2] = {NV, NV};
    int64_t s_r1[1] = {NV};
    vdev_tensor_t *x = floats(1, s_all, xs), *y = floats(1, s_all, ys);
    vdev_tensor_t *xc = floats(2, s_col, col), *yr = floats(2, s_row, row);
    vdev_tensor_t *xsq = floats(2, s_sq, xs), *yrow = floats(1, s_r1, row);
    CHECK(x && y && xc && yr && xsq && yrow);
    for (int m = 0; m < 2; m++) {
        const char *name = m ? "Minimum" : "Maximum";
        vdev_tensor_t *r[4] = {run(m, x, y), run(m, xc, yr), run(m, xsq, yrow), NULL};
        for (int i = 0; i < NP; i++)
            e[i] = want(m, xs[i], ys[i]);
        for (int f = 0; f < 3; f++) {
            CHECK(r[f] && vdev_tensor_to_host(r[f], out[m][f], sizeof(float) * NP) == VDEV_OK);
            same_bits(name, r[f], e, NP);
        }
        /* one element: y 0-dimensional, each value in turn */
        for (int k = 0; k < NV; k++) {
            float yk = val(k), ek[NV];
            vdev_tensor_t *sc = floats(0, NULL, &yk);
            for (int i = 0; i < NV; i++)
                ek[i] = want(m, col[i], yk);
            vdev_tensor_t *t = run(m, yrow, sc);
            CHECK(t && vdev_tensor_to_host(t, out[m][3] + k * NV, sizeof(float) * NV) == VDEV_OK);
            same_bits(name, t, ek, NV);
            vdev_tensor_free(sc);
        }
    }
    vdev_tensor_t *all[] = {x, y, xc, yr, xsq, yrow};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vdev_tensor_free(all[i]);
    CHECK_OK(vdev_device_pop());
}

/* loss = sum(op(x, y) * w), x [R,C], y [C] (a row): dx = w where the mask
 * holds else 0; dy[j] = the sum over rows of w where it does not. Values in
 * {-1, 0, 1} (ties) and NaN, weights small integers (exact sums). */
#define R 6
#define C 5
static void test_grads(const char *dev, float out[2][2][R * C])
{
    CHECK_OK(vdev_device_push(dev));
    float xv[R * C], yv[C], wv[R * C];
    for (int i = 0; i < R * C; i++) {
        xv[i] = i % 7 == 3 ? NAN : (float)(i % 3 - 1);
        wv[i] = (float)(i + 1);
    }
    for (int j = 0; j < C; j++)
        yv[j] = j == 4 ? NAN : (float)(j % 3 - 1);
    int64_t sx[2] = {R, C}, sy[1] = {C};
    for (int m = 0; m < 2; m++) {
        vdev_tensor_t *vars[2] = {vdev_variable(floats(2, sx, xv)),
                                  vdev_variable(floats(1, sy, yv))};
        vdev_tensor_t *w = floats(2, sx, wv), *g[2] = {NULL, NULL};
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *o = run(m, vars[0], vars[1]), *L = vdev_mul(o, w);
        CHECK(tape && o && L && w && vars[0] && vars[1]);
        CHECK_OK(vdev_tape_gradient(tape, L, vars, 2, g));
        vdev_tape_end(tape);
        float gx[R * C], gy[C], ex[R * C], ey[C] = {0};
        CHECK(g[0] && vdev_tensor_to_host(g[0], gx, sizeof gx) == VDEV_OK);
        CHECK(g[1] && vdev_tensor_to_host(g[1], gy, sizeof gy) == VDEV_OK);
        for (int i = 0; i < R * C; i++) {
            float u = xv[i], v = yv[i % C];
            int mask = m ? u <= v : u >= v;
            ex[i] = mask ? wv[i] : 0.0f;
            ey[i % C] += mask ? 0.0f : wv[i];
        }
        int bad = 0;
        for (int i = 0; i < R * C; i++)
            bad |= bits_of(gx[i]) != bits_of(ex[i]);
        for (int j = 0; j < C; j++)
            bad |= bits_of(gy[j]) != bits_of(ey[j]);
        if (bad)
            check_fail(__FILE__, __LINE__, "%s %s gradients differ from TensorFlow's rule", dev,
                       m ? "Minimum" : "Maximum");
        else
            check_passed++;
        memcpy(out[m][0], gx, sizeof gx);
        memcpy(out[m][1], gy, sizeof gy);
        vdev_tensor_free(vars[0]);
        vdev_tensor_free(vars[1]);
        vdev_tensor_free(w);
        vdev_tensor_free(L);
        vdev_tensor_free(o);
        vdev_tensor_free(g[0]);
        vdev_tensor_free(g[1]);
    }
    CHECK_OK(vdev_device_pop());
}

static void test_errors(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    static const float z[8];
    int64_t s2[1] = {2}, s3[1] = {3}, s23[2] = {2, 3};
    vdev_tensor_t *a = floats(1, s2, z), *b = floats(1, s3, z), *m = floats(2, s23, z);
    vdev_tensor_t *i = vdev_tensor_from_host(z, s2, 1, VDEV_I32);
    CHECK(a && b && m && i);
    CHECK_FAILS(vdev_maximum(a, b), VDEV_ERR_SHAPE,
                "Maximum: incompatible shapes [2] and [3] (dimensions 2 and 3, 1 from the end, "
                "differ and neither is 1)");
    CHECK_FAILS(vdev_minimum(i, a), VDEV_ERR_SHAPE, /* int32 first: int32 expected */
                "Minimum: input #1 (shape [2]) is float, expected int32");
    CHECK_FAILS(vdev_maximum(a, i), VDEV_ERR_SHAPE,
                "Maximum: input #1 (shape [2]) is int32, expected float");
    /* a NULL input: NULL, the earlier error kept */
    CHECK(!vdev_maximum(NULL, a) && !vdev_minimum(a, NULL));
    CHECK_STR(vdev_last_error(), "Maximum: input #1 (shape [2]) is int32, expected float");
    /* the gradient op's own checks: (dy, x, y) */
    const vdev_tensor_t *g1[3] = {m, m, b}, *g2[3] = {m, m, a}, *g3[3] = {m, i, m};
    const vdev_tensor_t *g4[3] = {m, m, m};
    struct vdev_op_params bad = {.i = {2, 0}};
    CHECK_FAILS(vdev_op_run(VDEV_OP_MAXMIN_GRAD, g2, 3, NULL), VDEV_ERR_SHAPE,
                "MaximumMinimumGrad: incompatible shapes [2,3] and [2,3] (input 2 does not "
                "broadcast to dy's shape)");
    CHECK_FAILS(vdev_op_run(VDEV_OP_MAXMIN_GRAD, g3, 3, NULL), VDEV_ERR_SHAPE,
                "MaximumMinimumGrad: input #1 (shape [2]) is int32, expected float");
    CHECK_FAILS(vdev_op_run(VDEV_OP_MAXMIN_GRAD, g4, 3, &bad), VDEV_ERR_SHAPE,
                "MaximumMinimumGrad: incompatible shapes [2,3] and [2,3] (i[0] and i[1] must "
                "be 0 or 1)");
    vdev_tensor_t *g1ok = vdev_op_run(VDEV_OP_MAXMIN_GRAD, g1, 3, NULL); /* [3] into [2,3] */
    CHECK(g1ok != NULL);
    vdev_tensor_free(g1ok);
    vdev_tensor_t *dead = floats(1, s2, z);
    vdev_tensor_free(dead);
    CHECK_FAILS(vdev_maximum(a, dead), VDEV_ERR_INVALID_ARG,
                "Maximum: input #1: not a live tensor (freed already, or not a tensor)");
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_tensor_free(m);
    vdev_tensor_free(i);
    CHECK_OK(vdev_device_pop());
}

int main(void)
{
    static float res_cpu[2][4][NP], res[2][4][NP], gr_cpu[2][2][R * C], gr[2][2][R * C];
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    test_errors("CPU:0");
    test_results("CPU:0", res_cpu);
    test_grads("CPU:0", gr_cpu);
    CHECK_NO_LEAK("CPU:0");

    /* a simulated GPU: bit for bit against the cpu backend */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_errors("GPU:1");
    test_results("GPU:1", res);
    test_grads("GPU:1", gr);
    CHECK(!memcmp(res, res_cpu, sizeof res));
    CHECK(!memcmp(gr, gr_cpu, sizeof gr));
    CHECK_NO_LEAK("GPU:1");
    CHECK_NO_LEAK("CPU:0");

    /* CUDA GPUs, where the machine has one */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    if (vdev_device_push("GPU:0") == VDEV_OK) {
        vdev_device_pop();
        printf("CUDA GPU:0 found: Maximum and Minimum run there too\n");
        memset(res, 0, sizeof res);
        memset(gr, 0, sizeof gr);
        test_results("GPU:0", res);
        test_grads("GPU:0", gr);
        CHECK(!memcmp(res, res_cpu, sizeof res));
        CHECK(!memcmp(gr, gr_cpu, sizeof gr));
        CHECK_NO_LEAK("GPU:0");
    }
    vdev_shutdown();
    return check_done();
}
