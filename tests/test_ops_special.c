/* test_ops_special.c — Sqrt and PowScalar at the special values where
 * TensorFlow's kernels (std::sqrt, std::pow) define an answer, and their
 * gradients there, to the bit (any NaN for NaN; the sign of a zero counts).
 *
 * Sqrt: sqrt(-inf) and sqrt(-1) are NaN, sqrt(-0) is -0, sqrt(+inf) +inf
 * (pow(x, 0.5) gives +inf and +0 for the first and third), on the reference
 * kernel and the fast kernel called directly, and through the dispatcher on
 * the cpu backend and on a simulated GPU (which runs the host kernels on its
 * stream), in a tensor long enough for the fast kernel's vector loops and
 * threads. Its gradient is TensorFlow's SqrtGrad, (0.5 dy) / y.
 *
 * PowScalar: pow(x, 0) = 1 even for NaN and infinite x, pow(1, y) = 1 even
 * for NaN and infinite y, pow(-8, 1/3) NaN, pow(+-0, -1) +-inf, and the
 * rest of C's pow table, against libm's powf (std::pow of floats, what
 * TensorFlow computes). Its gradient is TensorFlow's Pow gradient for x,
 * (dy p) pow(x, p - 1): x^0 has gradient NaN at x = 0 and at NaN, not 0. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* want and got the same float, NaN matching any NaN; -0 differs from +0. */
static int same_float(float want, float got)
{
    if (isnan(want))
        return isnan(got);
    return memcmp(&want, &got, 4) == 0;
}

/* The values Sqrt is checked at, and what std::sqrt gives there. */
static const float SQ_IN[] = {-INFINITY, -1.0f, -0.0f, 0.0f, 0.25f,  4.0f,
                              INFINITY,  NAN,   2.0f,  1e-40f, -1e-40f, 3.0e38f};
#define N_SQ ((int)(sizeof SQ_IN / sizeof SQ_IN[0]))
#define SQ_REPEAT 300 /* 3600 elements: the fast kernel's vector loops */

static void check_sqrt_values(const char *what, const float *in, const float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float want = sqrtf(in[i]);
        if (!same_float(want, out[i])) {
            check_fail(__FILE__, __LINE__, "%s: sqrt(%g) = %g, expected %g", what, in[i], out[i],
                       want);
            return;
        }
    }
    check_passed++;
}

/* The kernels called directly on host buffers. */
static void sqrt_kernels(float *in, int64_t n)
{
    float *out = malloc((size_t)n * 4);
    if (!out)
        abort();
    struct vdev_kernel_args a;
    memset(&a, 0, sizeof a);
    a.op = VDEV_OP_SQRT;
    a.n_in = 1;
    a.in[0] = in;
    a.in_ndim[0] = 1;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        a.in_shape[0][d] = 1;
    a.in_shape[0][0] = n;
    CHECK_OK(vdev_op_defs[VDEV_OP_SQRT].shape(&a));
    a.out[0] = out;
    vdev_op_defs[VDEV_OP_SQRT].ref(&a);
    check_sqrt_values("reference kernel", in, out, n);
    CHECK(vdev_op_defs[VDEV_OP_SQRT].host != NULL);
    if (vdev_op_defs[VDEV_OP_SQRT].host) {
        memset(out, 0, (size_t)n * 4);
        vdev_op_defs[VDEV_OP_SQRT].host(&a);
        check_sqrt_values("fast kernel", in, out, n);
    }
    free(out);
}

/* Through the dispatcher on dev; and the gradient of sum(sqrt(x)). */
static void sqrt_on(const char *dev, const float *in, int64_t n)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    float *out = malloc((size_t)n * 4);
    if (!out)
        abort();
    int64_t s[1] = {n};
    vdev_tensor_t *x = vdev_tensor_from_host(in, s, 1, VDEV_F32);
    vdev_tensor_t *y = vdev_sqrt(x);
    CHECK(y != NULL);
    CHECK(vdev_placement_op_count("Sqrt", vdev_tensor_device(x)) > 0);
    if (y) {
        CHECK_OK(vdev_tensor_to_host(y, out, (size_t)n * 4));
        check_sqrt_values(dev, in, out, n);
    }
    /* TensorFlow's SqrtGrad: (0.5 dy) / y with dy = 1 */
    int64_t s1[1] = {N_SQ};
    vdev_tensor_t *v = vdev_variable(vdev_tensor_from_host(in, s1, 1, VDEV_F32)), *g = NULL;
    vdev_tape_t *t = vdev_tape_begin();
    CHECK_OK(vdev_tape_gradient(t, vdev_sum_all(vdev_sqrt(v)), &v, 1, &g));
    vdev_tape_end(t);
    float gv[N_SQ];
    if (g) {
        CHECK_OK(vdev_tensor_to_host(g, gv, sizeof gv));
        int ok = 1;
        for (int i = 0; i < N_SQ && ok; i++) {
            float want = 0.5f / sqrtf(in[i]);
            if (!same_float(want, gv[i])) {
                check_fail(__FILE__, __LINE__, "%s: d sqrt(x)/dx at %g = %g, expected %g", dev,
                           in[i], gv[i], want);
                ok = 0;
            }
        }
        if (ok)
            check_passed++;
    }
    vdev_tensor_free(v);
    free(out);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* (x, p) for PowScalar: C's pow table (Annex F) and a few ordinary values. */
static const float POW_CASES[][2] = {
    {NAN, 0.0f},        {INFINITY, 0.0f},   {-INFINITY, 0.0f}, {0.0f, 0.0f},
    {-0.0f, -0.0f},     {1.0f, NAN},        {1.0f, INFINITY},  {1.0f, -INFINITY},
    {-8.0f, 1.0f / 3},  {0.0f, -1.0f},      {-0.0f, -1.0f},    {-0.0f, -2.0f},
    {0.0f, 0.5f},       {-0.0f, 0.5f},      {-INFINITY, 0.5f}, {-1.0f, INFINITY},
    {-1.0f, -INFINITY}, {0.5f, INFINITY},   {2.0f, INFINITY},  {0.5f, -INFINITY},
    {2.0f, -INFINITY},  {-2.0f, 3.0f},      {-2.0f, 2.0f},     {-INFINITY, 3.0f},
    {-INFINITY, -3.0f}, {-INFINITY, 2.0f},  {INFINITY, -1.0f}, {NAN, 1.0f},
    {-1.0f, 0.5f},      {2.0f, NAN},        {0.0f, 3.0f},      {-0.0f, 3.0f},
    {0.0f, -INFINITY},  {0.0f, INFINITY},   {4.0f, 0.5f},      {3.0f, -2.0f},
};
#define N_POW ((int)(sizeof POW_CASES / sizeof POW_CASES[0]))

/* Forward on dev, and the reference kernel on the host. */
static void pow_values(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    int bad = 0;
    for (int i = 0; i < N_POW; i++) {
        float x = POW_CASES[i][0], p = POW_CASES[i][1], want = powf(x, p), got = NAN, ref = NAN;
        int64_t s[1] = {1};
        CHECK_OK(vdev_tensor_to_host(vdev_pow_scalar(vdev_tensor_from_host(&x, s, 1, VDEV_F32), p),
                                     &got, 4));
        struct vdev_kernel_args a;
        memset(&a, 0, sizeof a);
        a.op = VDEV_OP_POW_SCALAR;
        a.n_in = 1;
        a.in[0] = &x;
        a.out[0] = &ref;
        a.in_ndim[0] = 1;
        for (int d = 0; d < VDEV_MAX_DIMS; d++)
            a.in_shape[0][d] = 1;
        a.f[0] = p;
        vdev_op_defs[VDEV_OP_POW_SCALAR].ref(&a);
        if (!same_float(want, got) || !same_float(want, ref)) {
            check_fail(__FILE__, __LINE__, "%s: pow(%g, %g) = %g (reference kernel %g), "
                       "expected %g", dev, x, p, got, ref, want);
            bad++;
        }
    }
    if (!bad)
        check_passed++;
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* d/dx sum(pow(x, p)) = (1 p) pow(x, p - 1) with p - 1 in float, as
 * TensorFlow's grad * y * pow(x, y - 1). */
static void pow_gradients(const char *dev)
{
    static const float P[] = {0.0f, 0.5f, 2.0f, 1.0f, -1.0f, 3.0f, -0.5f};
    static const float X[] = {0.0f, -0.0f, 2.0f, 4.0f, -3.0f, NAN, INFINITY, -INFINITY, 1.0f};
    enum { NX = sizeof X / sizeof X[0] };
    CHECK_OK(vdev_device_push(dev));
    int64_t s[1] = {NX};
    for (size_t k = 0; k < sizeof P / sizeof P[0]; k++) {
        vdev_tensor_t *v = vdev_variable(vdev_tensor_from_host(X, s, 1, VDEV_F32)), *g = NULL;
        vdev_scope_begin();
        vdev_tape_t *t = vdev_tape_begin();
        CHECK_OK(vdev_tape_gradient(t, vdev_sum_all(vdev_pow_scalar(v, P[k])), &v, 1, &g));
        vdev_tape_end(t);
        float gv[NX];
        int ok = g != NULL;
        if (g)
            CHECK_OK(vdev_tensor_to_host(g, gv, sizeof gv));
        for (int i = 0; ok && i < NX; i++) {
            float want = (1.0f * P[k]) * powf(X[i], P[k] - 1.0f);
            if (!same_float(want, gv[i])) {
                check_fail(__FILE__, __LINE__, "%s: d pow(x, %g)/dx at %g = %g, expected %g", dev,
                           P[k], X[i], gv[i], want);
                ok = 0;
            }
        }
        if (ok)
            check_passed++;
        vdev_scope_end();
        vdev_tensor_free(v);
    }
    CHECK_OK(vdev_device_pop());
}

int main(void)
{
    int64_t n = (int64_t)N_SQ * SQ_REPEAT;
    float *in = malloc((size_t)n * 4);
    if (!in)
        abort();
    for (int64_t i = 0; i < n; i++)
        in[i] = SQ_IN[i % N_SQ];

    check_fresh(NULL);
    CHECK_OK(vdev_init());
    sqrt_kernels(in, n);
    sqrt_kernels(in, N_SQ); /* short: the loops' scalar tails */
    sqrt_on("CPU:0", in, n);
    pow_values("CPU:0");
    pow_gradients("CPU:0");

    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    sqrt_on("GPU:0", in, n);
    pow_values("GPU:0");
    pow_gradients("GPU:0");
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    vdev_shutdown();
    free(in);
    return check_done();
}
