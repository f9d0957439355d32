/* kernels_fast.c — host kernels for the ops that dominate a training step on
 * the CPU and on simulated GPUs: elementwise arithmetic with broadcasting,
 * square roots, ReLU and its gradient, bias gradients, the MSE loss and its
 * gradient, and the SGD and Adam updates.
 *
 * They compute in float (the reference kernels compute each element in double
 * and round once), in loops the compiler vectorizes (this file is built with
 * -O3 -fno-math-errno, so sqrtf vectorizes too), split over the cores by
 * vdev_parallel_for when large. tests/test_ops.c holds each one to its
 * reference kernel: bit-exact where float arithmetic is exact per element
 * (+, -, *, /, sqrt, max), within a few ulps otherwise. */
#include "ops/impl.h"
#include "ops/parallel.h"

#include <math.h>
#include <string.h>

/* Each loop is compiled for AVX-512, AVX2 and the baseline x86-64 (SSE2), and
 * the loader picks the widest the CPU has (GCC's target_clones, an ifunc).
 * Every clone computes the same bits: the loops use only IEEE operations that
 * round exactly (+, -, *, /, sqrt, compare), no contraction into fused
 * multiply-adds (GCC keeps -ffp-contract=off in ISO C mode, -std=c11, as the
 * build sets), and no reordering of sums,
 * so the choice changes speed only. The transcendental loops call libm's
 * scalar functions whatever the clone. Not under ThreadSanitizer: the
 * loader runs the clones' resolver before TSan's runtime is up, and the
 * instrumented resolver crashes the process at start-up. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute) && \
    !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef CLONES
#define CLONES
#endif

#define IN_F(k) ((const float *)a->in[k])
#define OUT_F(k) ((float *)a->out[k])

struct ew {
    const struct vdev_kernel_args *a;
    int64_t row;  /* broadcast row length (mode 1) */
};

static int64_t last_dim(const struct vdev_kernel_args *a, int k)
{
    return a->in_ndim[k] ? a->in_shape[k][a->in_ndim[k] - 1] : 1;
}

/* Binary ops: b the same shape (mode 0), a row over the last axis (1), or one
 * element (2), as vdev_shape_broadcast_b set a->i[3]; any other broadcast
 * (mode 3) is the reference kernel's, which gives the same bits for these
 * six operations. */
#define BINARY(NAME, EXPR)                                                                         \
    CLONES static void NAME##_part(void *vctx, int64_t lo, int64_t hi)                                    \
    {                                                                                              \
        const struct ew *c = vctx;                                                                 \
        const struct vdev_kernel_args *a = c->a;                                                   \
        const float *restrict x = IN_F(0), *restrict y = IN_F(1);                                  \
        float *restrict o = OUT_F(0);                                                              \
        if (a->i[3] == 0) {                                                                        \
            for (int64_t i = lo; i < hi; i++) {                                                    \
                float p = x[i], q = y[i];                                                          \
                o[i] = EXPR;                                                                       \
            }                                                                                      \
        } else if (a->i[3] == 2) {                                                                 \
            const float q = y[0];                                                                  \
            for (int64_t i = lo; i < hi; i++) {                                                    \
                float p = x[i];                                                                    \
                o[i] = EXPR;                                                                       \
            }                                                                                      \
        } else {                                                                                   \
            int64_t n = c->row, i = lo;                                                            \
            while (i < hi) {                                                                       \
                int64_t j0 = i % n, len = n - j0 < hi - i ? n - j0 : hi - i;                       \
                const float *restrict yr = y + j0;                                                 \
                const float *restrict xr = x + i;                                                  \
                float *restrict orow = o + i;                                                      \
                for (int64_t j = 0; j < len; j++) {                                                \
                    float p = xr[j], q = yr[j];                                                    \
                    orow[j] = EXPR;                                                                \
                }                                                                                  \
                i += len;                                                                          \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    KERNEL(vdev_fast_##NAME)                                                                       \
    {                                                                                              \
        if (a->i[3] == 3 || a->in_dtype[0] == VDEV_I32) { /* int32: the reference's */           \
            vdev_ref_##NAME(a);                                                                    \
            return;                                                                                \
        }                                                                                          \
        struct ew c = {a, last_dim(a, 0)};                                                         \
        vdev_parallel_for(vdev_args_out_numel(a, 0), NAME##_part, &c);                             \
    }

BINARY(add, p + q)
BINARY(sub, p - q)
BINARY(mul, p * q)
BINARY(div, p / q)
BINARY(maximum, VDEV_MAXIMUM(p, q))
BINARY(minimum, VDEV_MINIMUM(p, q))

/* Unary and pairwise elementwise ops: one loop body each, over the elements
 * of input K, split into parts of at least MIN elements. */
#define ELEMENTWISE_MIN(NAME, K, MIN, ...)                                                         \
    CLONES static void NAME##_part(void *vctx, int64_t lo, int64_t hi)                             \
    {                                                                                              \
        const struct vdev_kernel_args *a = ((const struct ew *)vctx)->a;                           \
        __VA_ARGS__                                                                                \
    }                                                                                              \
    KERNEL(vdev_fast_##NAME)                                                                       \
    {                                                                                              \
        struct ew c = {a, 0};                                                                      \
        vdev_parallel_for_min(vdev_args_numel(a, K), MIN, NAME##_part, &c);                        \
    }
#define ELEMENTWISE(NAME, K, ...) ELEMENTWISE_MIN(NAME, K, VDEV_PARALLEL_MIN, __VA_ARGS__)

/* The optimizer updates read and write 20 to 28 bytes per element: a part
 * of 2^15 elements is ~1 MB of traffic, worth a thread. */
#define UPDATE_MIN (1 << 15)

/* One-input elementwise ops: o = EXPR of p = x[i] (and s = f[0]). */
#define UNARY(NAME, EXPR)                                                                          \
    ELEMENTWISE(NAME, 0, {                                                                         \
        const float *restrict x = IN_F(0);                                                         \
        float *restrict o = OUT_F(0);                                                              \
        const float s = (float)a->f[0];                                                            \
        (void)s;                                                                                   \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            const float p = x[i];                                                                  \
            o[i] = EXPR;                                                                           \
        }                                                                                          \
    })

UNARY(add_scalar, p + s)
UNARY(mul_scalar, p * s)
/* NaN passes through, as in the reference: x > 0 ? x : (x == x ? 0 : x). */
UNARY(relu, p > 0.0f ? p : (p != p ? p : 0.0f))
/* Transcendental functions in float (the reference computes them in double):
 * within an ulp or two of the correctly rounded result, several times faster. */
UNARY(tanh, tanhf(p))
UNARY(sigmoid, 1.0f / (1.0f + expf(-p)))
UNARY(exp, expf(p))
UNARY(log, logf(p))
/* sqrtf rounds exactly, as the reference's double sqrt rounded to float:
 * the same bits, NaN below 0 (-inf included), -0 for -0 */
UNARY(sqrt, sqrtf(p))

/* (dy, x) -> dy where x > 0, else 0. Both loads are unconditional, so the
 * compare becomes a mask and the loop vectorizes (a load under the condition
 * compiled to a branch per element, mispredicted half the time). */
ELEMENTWISE(relu_grad, 0, {
    const float *restrict dy = IN_F(0), *restrict x = IN_F(1);
    float *restrict o = OUT_F(0);
    for (int64_t i = lo; i < hi; i++) {
        const float d = dy[i], v = x[i];
        o[i] = v > 0.0f ? d : 0.0f;
    }
})

/* (dy, pred, target) -> dy * 2 (pred - target) / n, dy one element. */
ELEMENTWISE(mse_grad, 1, {
    const float *restrict pred = IN_F(1), *restrict tgt = IN_F(2);
    float *restrict o = OUT_F(0);
    const double n = (double)vdev_args_numel(a, 1);
    const float s = (float)(2.0 * (double)IN_F(0)[0] / n);
    for (int64_t i = lo; i < hi; i++)
        o[i] = s * (pred[i] - tgt[i]);
})

/* (pred, target) -> the mean of squared differences. Each difference and
 * square in double, as the reference, but summed in eight interleaved
 * accumulators (element i into lane i mod 8, the lanes added pairwise, the
 * tail last) instead of one chain whose every add waits for the last: a
 * fixed order whatever the machine and the clone, so the same bits every run,
 * within a few ulps of the double sum before its one rounding to float. */
CLONES static double mse_sum(const float *restrict p, const float *restrict t, int64_t n)
{
    int64_t i = 0;
    double acc[8] = {0};
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            double d = (double)p[i + j] - (double)t[i + j];
            acc[j] += d * d;
        }
    double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) {
        double d = (double)p[i] - (double)t[i];
        sum += d * d;
    }
    return sum;
}

/* The clones stay inside this file (static), as every other cloned loop
 * here: a cloned global would be exported through its resolver. */
KERNEL(vdev_fast_mse)
{
    int64_t n = vdev_args_numel(a, 0);
    /* no example: 0, as the reference */
    OUT_F(0)[0] = vdev_loss_examples(a) ? (float)(mse_sum(IN_F(0), IN_F(1), n) / (double)n) : 0.0f;
}

/* SGD keeps the reference's arithmetic (each value computed in double,
 * rounded once to float) and matches it bit for bit: it is bound by memory
 * traffic, where the double arithmetic costs nothing. */

/* (var, grad, velocity): velocity = momentum velocity - lr grad; var += velocity
 * (Nesterov, i[0]: var += momentum velocity - lr grad). With momentum 0,
 * var -= lr grad and the velocity is left alone, as the reference. The
 * weight decay (i[1], i[2]) first, in float as the reference. */
ELEMENTWISE_MIN(sgd_update, 0, UPDATE_MIN, {
    float *restrict var = OUT_F(0), *restrict vel = OUT_F(2);
    const float *restrict g = IN_F(1);
    const double lr = a->f[0], mom = a->f[1];
    const float wd = vdev_f32_of_param(a->i[VDEV_UPDATE_WD]);
    const float wlr = vdev_f32_of_param(a->i[VDEV_UPDATE_WD_LR]);
    if (wd != 0)
        for (int64_t i = lo; i < hi; i++)
            var[i] = vdev_decayed(var[i], wd, wlr);
    if (mom == 0) {
        for (int64_t i = lo; i < hi; i++)
            var[i] = (float)((double)var[i] - (float)(lr * g[i]));
        return;
    }
    if (a->i[0]) {
        for (int64_t i = lo; i < hi; i++) {
            float v = (float)(mom * vel[i] - lr * g[i]);
            vel[i] = v;
            var[i] = (float)((double)var[i] + (mom * v - lr * g[i]));
        }
        return;
    }
    for (int64_t i = lo; i < hi; i++) {
        float v = (float)(mom * vel[i] - lr * g[i]);
        vel[i] = v;
        var[i] = (float)((double)var[i] + v);
    }
})

/* (var, grad, m, v), TensorFlow's ApplyAdam with a bias-corrected lr_t, in
 * float: double square roots and divisions do not vectorize well, and this
 * loop is a large share of a small model's step. tests/test_ops.c bounds its
 * difference from the reference by a few ulps of the terms involved. The
 * weight decay (i[1], i[2]) first, as the reference's. */
ELEMENTWISE_MIN(adam_update, 0, UPDATE_MIN, {
    float *restrict var = OUT_F(0), *restrict m = OUT_F(2), *restrict v = OUT_F(3);
    const float *restrict g = IN_F(1);
    const float lr = (float)a->f[0], b1 = (float)a->f[1], b2 = (float)a->f[2];
    const float eps = (float)a->f[3], c1 = (float)(1.0 - a->f[1]), c2 = (float)(1.0 - a->f[2]);
    const float wd = vdev_f32_of_param(a->i[VDEV_UPDATE_WD]);
    const float wlr = vdev_f32_of_param(a->i[VDEV_UPDATE_WD_LR]);
    if (wd != 0)
        for (int64_t i = lo; i < hi; i++)
            var[i] = vdev_decayed(var[i], wd, wlr);
    for (int64_t i = lo; i < hi; i++) {
        float gi = g[i];
        float mi = b1 * m[i] + c1 * gi;
        float vi = b2 * v[i] + c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        var[i] -= lr * mi / (sqrtf(vi) + eps);
    }
})

/* (dy, like): the gradient of a broadcast b. Row mode (the bias gradient)
 * sums the rows of dy row after row, so it streams through memory, into
 * double accumulators for a block of columns at a time: a float sum lost
 * 1e-3 of the value at a million rows and stopped growing at 2^24 (the same
 * order and precision as the reference, so the same bits). The other modes
 * are rare and small, and keep the reference. */
KERNEL(vdev_fast_reduce_rows)
{
    if (a->i[3] != 1) {
        vdev_ref_reduce_rows(a);
        return;
    }
    enum { BLOCK = 512 };
    const float *restrict dy = IN_F(0);
    float *restrict o = OUT_F(0);
    int64_t n = vdev_args_out_numel(a, 0), rows = n ? vdev_args_numel(a, 0) / n : 0;
    double acc[BLOCK];
    for (int64_t j0 = 0; j0 < n; j0 += BLOCK) {
        int64_t w = n - j0 < BLOCK ? n - j0 : BLOCK;
        for (int64_t k = 0; k < w; k++)
            acc[k] = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            const float *restrict row = dy + r * n + j0;
            for (int64_t k = 0; k < w; k++)
                acc[k] += row[k];
        }
        for (int64_t k = 0; k < w; k++)
            o[j0 + k] = (float)acc[k];
    }
}

KERNEL(vdev_fast_identity)
{
    memcpy(a->out[0], a->in[0], (size_t)vdev_args_numel(a, 0) * 4);
}

