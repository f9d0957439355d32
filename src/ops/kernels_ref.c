/* kernels_ref.c — the reference kernels: one plain loop nest per op, the
 * specification every other kernel (OpenBLAS on the host, CUDA) is tested
 * against.
 *
 * Rules: no SIMD, no BLAS, no threads. Each elementwise result is computed in
 * double and rounded once to float (for + - * / that equals the float
 * operation; for exp, tanh, ... it is the correctly rounded double result).
 * Reductions and dot products accumulate in double. Softmax, log-softmax and
 * the cross-entropy subtract the row maximum before exp().
 *
 * Layout: every tensor is contiguous and row-major; in_shape[k][d] is 1 for
 * d >= in_ndim[k]. "Rows" of a row-wise op run over the last axis: C = the
 * last dimension (1 for a 0-dimensional tensor), rows = numel / C.
 *
 * Values with no defined answer:
 *  - MEAN over zero elements is NaN (0/0, as NumPy and tf.reduce_mean give);
 *    SUM over zero elements is 0.
 *  - The losses average over the batch as Keras's default reduction
 *    (SUM_OVER_BATCH_SIZE) does, dividing with divide_no_nan: an empty batch
 *    gives 0. The cross-entropy of zero rows is 0; MSE is 0 when there is
 *    no example (every dimension but the last multiplies to 0) and NaN when
 *    examples have no element (Keras's mean over an empty last axis).
 *  - SOFTMAX_CE with a label outside [0, C) gives NaN (the shape rule cannot
 *    see values); its gradient gives NaN for that row.
 *  - ARGMAX: the first maximal index; a NaN counts as the maximum (the first
 *    NaN wins, as NumPy's argmax).
 *  - RELU passes NaN through (NaN, not 0). */
#include "ops/impl.h"
#include "ops/pairs.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- helpers ---- */

#define IN_F(k) ((const float *)a->in[k])
#define IN_I(k) ((const int32_t *)a->in[k])
#define OUT_F(k) ((float *)a->out[k])

/* The last dimension of input k (1 for a 0-dimensional tensor). */
static int64_t last_dim(const struct vdev_kernel_args *a, int k)
{
    return a->in_ndim[k] ? a->in_shape[k][a->in_ndim[k] - 1] : 1;
}

/* Splits input k around axis `ax` (VDEV_AXIS_ALL: everything) into
 * outer x len x inner, so element (o, l, j) is at (o * len + l) * inner + j
 * (impl.h; extreme.c's reductions use it too). */
void vdev_args_split_axis(const struct vdev_kernel_args *a, int k, int64_t ax, int64_t *outer,
                          int64_t *len, int64_t *inner)
{
    int nd = a->in_ndim[k];
    if (ax != VDEV_AXIS_ALL && ax < 0)
        ax += nd;
    if (ax == VDEV_AXIS_ALL || ax < 0 || ax >= nd) {
        *outer = 1;
        *len = vdev_args_numel(a, k);
        *inner = 1;
        return;
    }
    *outer = *inner = 1;
    for (int d = 0; d < ax; d++)
        *outer *= a->in_shape[k][d];
    *len = a->in_shape[k][ax];
    for (int d = (int)ax + 1; d < nd; d++)
        *inner *= a->in_shape[k][d];
}

/* Broadcasting over 4 dimensions: a shape of rank <= 4 padded with leading
 * 1s, and the strides with which input k is read along the output's 4
 * (padded) dimensions: 0 along its dimensions of 1, the ones it is
 * broadcast along. */
static void pad4(const int64_t *shape, int ndim, int64_t *s4)
{
    for (int d = 0; d < 4; d++)
        s4[d] = d >= 4 - ndim ? shape[d - (4 - ndim)] : 1;
}

static void strides4(const struct vdev_kernel_args *a, int k, int64_t *st)
{
    int64_t s4[4], s = 1;
    pad4(a->in_shape[k], a->in_ndim[k], s4);
    for (int d = 3; d >= 0; d--) {
        st[d] = s4[d] == 1 ? 0 : s;
        s *= s4[d];
    }
}

/* The element of b (input 1) that pairs with element i of a, by the
 * broadcast mode i[3] (0 to 2) that vdev_shape_broadcast_b chose. */
static inline float b_at(const struct vdev_kernel_args *a, int64_t i, int64_t cols)
{
    const float *b = IN_F(1);
    switch (a->i[3]) {
    case 1:
        return b[i % cols];
    case 2:
        return b[0];
    default:
        return b[i];
    }
}

/* ---- MATMUL ---- */

/* o[m,n] = op(x) op(y), summed in double and rounded once: x [m,k] (or
 * [k,m] with ta), y [k,n] (or [n,k] with tb). */
static void product(const float *x, const float *y, float *o, int64_t m, int64_t n, int64_t k,
                    int ta, int tb)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++) {
            double acc = 0.0;
            for (int64_t p = 0; p < k; p++) {
                double xv = ta ? x[p * m + r] : x[r * k + p];
                double yv = tb ? y[c * k + p] : y[p * n + c];
                acc += xv * yv;
            }
            o[r * n + c] = (float)acc;
        }
}

/* out[m,n] = op(a) op(b), op = transpose when i[0] / i[1] is set. */
KERNEL(vdev_ref_matmul)
{
    int ta = a->i[0] != 0, tb = a->i[1] != 0;
    product(IN_F(0), IN_F(1), OUT_F(0), a->out_shape[0][0], a->out_shape[0][1],
            a->in_shape[0][ta ? 0 : 1], ta, tb);
}

/* out[b] = op(x[b or 0]) op(y[b or 0]): each batch entry as MATMUL's
 * reference, a batch of 1 read for every entry. */
KERNEL(vdev_ref_batch_matmul)
{
    const float *x = IN_F(0), *y = IN_F(1);
    float *o = OUT_F(0);
    int ta = a->i[0] != 0, tb = a->i[1] != 0;
    int64_t nb = a->out_shape[0][0], m = a->out_shape[0][1], n = a->out_shape[0][2];
    int64_t k = a->in_shape[0][ta ? 1 : 2];
    int64_t xs = a->in_shape[0][0] == 1 ? 0 : m * k, ys = a->in_shape[1][0] == 1 ? 0 : k * n;
    for (int64_t b = 0; b < nb; b++)
        product(x + b * xs, y + b * ys, o + b * m * n, m, n, k, ta, tb);
}

/* ---- binary elementwise with b broadcast ---- */

/* AddV2, Sub, Mul, Maximum, Minimum on int32 (the shape rule allows no
 * other): in 32-bit unsigned arithmetic, so a sum or product beyond int32
 * wraps as two's complement (TensorFlow's), by every broadcast mode
 * (pairs.h). */
static int32_t int_of(uint32_t w)
{
    int32_t v;
    memcpy(&v, &w, 4);
    return v;
}

static void int_binary(const struct vdev_kernel_args *a)
{
    const int32_t *x = (const int32_t *)a->in[0], *y = (const int32_t *)a->in[1];
    int32_t *o = (int32_t *)a->out[0];
    VDEV_FOR_PAIRS(a, {
        const int32_t u = x[j0], v = y[j1];
        const uint32_t uu = (uint32_t)u, vv = (uint32_t)v;
        switch (a->op) {
        case VDEV_OP_ADD: o[i] = int_of(uu + vv); break;
        case VDEV_OP_SUB: o[i] = int_of(uu - vv); break;
        case VDEV_OP_MUL: o[i] = int_of(uu * vv); break;
        case VDEV_OP_MAXIMUM: o[i] = u < v ? v : u; break;
        default: o[i] = v < u ? v : u; break;
        }
    });
}

/* Modes 0 to 2: a has the output's elements, b by b_at. Mode 3: both
 * inputs read through strides4 over the output's 4 (padded) dimensions. */
#define BINARY(NAME, EXPR)                                                                         \
    KERNEL(NAME)                                                                                   \
    {                                                                                              \
        if (a->in_dtype[0] == VDEV_I32) {                                                          \
            int_binary(a);                                                                         \
            return;                                                                                \
        }                                                                                          \
        const float *x = IN_F(0), *y = IN_F(1);                                                    \
        float *o = OUT_F(0);                                                                       \
        if (a->i[3] == 3) {                                                                        \
            int64_t o4[4], sx[4], sy[4], i = 0;                                                    \
            pad4(a->out_shape[0], a->out_ndim[0], o4);                                             \
            strides4(a, 0, sx);                                                                    \
            strides4(a, 1, sy);                                                                    \
            for (int64_t p = 0; p < o4[0]; p++)                                                    \
                for (int64_t q = 0; q < o4[1]; q++)                                                \
                    for (int64_t r = 0; r < o4[2]; r++)                                            \
                        for (int64_t c = 0; c < o4[3]; c++) {                                      \
                            double u = x[p * sx[0] + q * sx[1] + r * sx[2] + c * sx[3]];           \
                            double v = y[p * sy[0] + q * sy[1] + r * sy[2] + c * sy[3]];           \
                            o[i++] = (float)(EXPR);                                                \
                        }                                                                          \
            return;                                                                                \
        }                                                                                          \
        int64_t n = vdev_args_numel(a, 0), cols = last_dim(a, 0);                                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            double u = x[i], v = b_at(a, i, cols);                                                 \
            o[i] = (float)(EXPR);                                                                  \
        }                                                                                          \
    }

BINARY(vdev_ref_add, u + v)
BINARY(vdev_ref_sub, u - v)
BINARY(vdev_ref_mul, u *v)
BINARY(vdev_ref_div, u / v)
/* TensorFlow's Maximum and Minimum (Eigen's scalar_max_op / scalar_min_op
 * with PropagateNaN): a NaN operand is the result (x's first), else
 * std::max (x < y ? y : x) and std::min (y < x ? y : x), so of -0 and +0, and
 * of any equal pair, x is kept. */
BINARY(vdev_ref_maximum, VDEV_MAXIMUM(u, v))
BINARY(vdev_ref_minimum, VDEV_MINIMUM(u, v))

/* ---- unary elementwise; s = f[0] ---- */

#define UNARY(NAME, EXPR)                                                                          \
    KERNEL(NAME)                                                                                   \
    {                                                                                              \
        const float *x = IN_F(0);                                                                  \
        float *o = OUT_F(0);                                                                       \
        double s = a->f[0];                                                                        \
        (void)s;                                                                                   \
        int64_t n = vdev_args_numel(a, 0);                                                         \
        for (int64_t i = 0; i < n; i++) {                                                          \
            double u = x[i];                                                                       \
            o[i] = (float)(EXPR);                                                                  \
        }                                                                                          \
    }

/* The scalar is the float the public function took; rounding it again is a
 * no-op there and keeps direct callers consistent. */
UNARY(vdev_ref_add_scalar, u + (float)s)
UNARY(vdev_ref_mul_scalar, u *(float)s)
UNARY(vdev_ref_pow_scalar, pow(u, (float)s))
UNARY(vdev_ref_relu, (u > 0.0 || u != u) ? u : 0.0)
UNARY(vdev_ref_tanh, tanh(u))
UNARY(vdev_ref_exp, exp(u))
UNARY(vdev_ref_log, log(u))
/* sqrt, not pow(u, 0.5): sqrt(-inf) is NaN and sqrt(-0) is -0 */
UNARY(vdev_ref_sqrt, sqrt(u))
UNARY(vdev_ref_erf, erf(u))

/* TensorFlow's Softplus kernel's three ranges, in double: x itself above -t,
 * e^x below t, else log(e^x + 1), where t = log(FLT_EPSILON) + 2 in float
 * (about -13.94: past it the other terms are below float's rounding). */
static double softplus(double u)
{
    const double t = (double)(logf(FLT_EPSILON) + 2.0f);
    if (u > -t)
        return u;
    if (u < t)
        return exp(u);
    return log(exp(u) + 1.0);
}
UNARY(vdev_ref_softplus, softplus(u))

/* 1 / (1 + e^-u) without overflow: e^-|u| is at most 1. */
static double sigmoid(double u)
{
    if (u >= 0.0)
        return 1.0 / (1.0 + exp(-u));
    double e = exp(u);
    return e / (1.0 + e);
}
UNARY(vdev_ref_sigmoid, sigmoid(u))

/* ---- row-wise ops over the last axis ---- */

/* The maximum of a row, and sum(exp(x - max)); both in double. */
static void row_stats(const float *x, int64_t c, double *max, double *sum)
{
    double m = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < c; j++)
        if (x[j] > m || x[j] != x[j])
            m = x[j];
    for (int64_t j = 0; j < c; j++)
        s += exp(x[j] - m);
    *max = m;
    *sum = s;
}

KERNEL(vdev_ref_softmax)
{
    int64_t c = last_dim(a, 0), rows = c ? vdev_args_numel(a, 0) / c : 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = IN_F(0) + r * c;
        float *o = OUT_F(0) + r * c;
        double m, s;
        row_stats(x, c, &m, &s);
        for (int64_t j = 0; j < c; j++)
            o[j] = (float)(exp(x[j] - m) / s);
    }
}

KERNEL(vdev_ref_log_softmax)
{
    int64_t c = last_dim(a, 0), rows = c ? vdev_args_numel(a, 0) / c : 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = IN_F(0) + r * c;
        float *o = OUT_F(0) + r * c;
        double m, s;
        row_stats(x, c, &m, &s);
        /* (x - max) - log(s), not x - (max + log(s)): exact for huge x */
        double ls = log(s);
        for (int64_t j = 0; j < c; j++)
            o[j] = (float)((x[j] - m) - ls);
    }
}

/* ---- reductions over one axis or all ---- */

/* out[o, j] = sum_l in[o, l, j], divided by len when `mean`. */
static void reduce(const struct vdev_kernel_args *a, int mean)
{
    int64_t outer, len, inner;
    vdev_args_split_axis(a, 0, a->i[0], &outer, &len, &inner);
    if (a->in_dtype[0] == VDEV_I32) { /* Sum of int32: wrapping, as TensorFlow's */
        const int32_t *xi = (const int32_t *)a->in[0];
        int32_t *oi = (int32_t *)a->out[0];
        for (int64_t p = 0; p < outer; p++)
            for (int64_t j = 0; j < inner; j++) {
                uint32_t acc = 0;
                for (int64_t l = 0; l < len; l++)
                    acc += (uint32_t)xi[(p * len + l) * inner + j];
                oi[p * inner + j] = int_of(acc);
            }
        return;
    }
    const float *x = IN_F(0);
    float *o = OUT_F(0);
    for (int64_t p = 0; p < outer; p++)
        for (int64_t j = 0; j < inner; j++) {
            double acc = 0.0;
            for (int64_t l = 0; l < len; l++)
                acc += x[(p * len + l) * inner + j];
            /* mean over nothing: 0/0 = NaN, by design */
            o[p * inner + j] = (float)(mean ? acc / (double)len : acc);
        }
}

KERNEL(vdev_ref_sum) { reduce(a, 0); }
KERNEL(vdev_ref_mean) { reduce(a, 1); }

/* ---- layout ---- */

/* A copy of numel 32-bit words (f32 or i32). */
KERNEL(vdev_ref_identity)
{
    int64_t n = vdev_args_numel(a, 0);
    if (n)
        memcpy(a->out[0], a->in[0], (size_t)n * sizeof(uint32_t));
}

/* ---- losses ---- */

/* mean((pred - target)^2) over every element; 0 without examples. */
KERNEL(vdev_ref_mse)
{
    const float *p = IN_F(0), *t = IN_F(1);
    int64_t n = vdev_args_numel(a, 0);
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)p[i] - (double)t[i];
        acc += d * d;
    }
    OUT_F(0)[0] = vdev_loss_examples(a) ? (float)(acc / (double)n) : 0.0f;
}

/* mean over rows of -log_softmax(logits)[label]; 0 for zero rows. */
KERNEL(vdev_ref_softmax_ce)
{
    int64_t n = a->in_shape[0][0], c = a->in_shape[0][1];
    if (n == 0) {
        OUT_F(0)[0] = 0.0f;
        return;
    }
    const int32_t *lab = IN_I(1);
    double acc = 0.0;
    for (int64_t r = 0; r < n; r++) {
        const float *x = IN_F(0) + r * c;
        if (lab[r] < 0 || lab[r] >= c) {
            acc = NAN;
            break;
        }
        double m, s;
        row_stats(x, c, &m, &s);
        acc += log(s) - (x[lab[r]] - m);
    }
    OUT_F(0)[0] = (float)(acc / (double)n);
}

/* The first index of the largest element of each row (a NaN is largest). */
KERNEL(vdev_ref_argmax)
{
    int64_t c = last_dim(a, 0), rows = c ? vdev_args_numel(a, 0) / c : 0;
    int32_t *o = a->out[0];
    for (int64_t r = 0; r < rows; r++) {
        const float *x = IN_F(0) + r * c;
        int64_t best = 0;
        for (int64_t j = 0; j < c && x[best] == x[best]; j++)
            if (x[j] > x[best] || x[j] != x[j])
                best = j;
        o[r] = (int32_t)best;
    }
}

/* ---- gradient helpers ---- */

/* (dy, x) -> dy where x > 0, else 0. */
KERNEL(vdev_ref_relu_grad)
{
    const float *dy = IN_F(0), *x = IN_F(1);
    float *o = OUT_F(0);
    int64_t n = vdev_args_numel(a, 0);
    for (int64_t i = 0; i < n; i++)
        o[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

/* (dy, y = tanh x) -> dy (1 - y^2). */
KERNEL(vdev_ref_tanh_grad)
{
    const float *dy = IN_F(0), *y = IN_F(1);
    float *o = OUT_F(0);
    int64_t n = vdev_args_numel(a, 0);
    for (int64_t i = 0; i < n; i++)
        o[i] = (float)((double)dy[i] * (1.0 - (double)y[i] * y[i]));
}

/* (dy, y = sigmoid x) -> dy y (1 - y). */
KERNEL(vdev_ref_sigmoid_grad)
{
    const float *dy = IN_F(0), *y = IN_F(1);
    float *o = OUT_F(0);
    int64_t n = vdev_args_numel(a, 0);
    for (int64_t i = 0; i < n; i++)
        o[i] = (float)((double)dy[i] * y[i] * (1.0 - (double)y[i]));
}

/* (dy, y = softmax x) -> y (dy - sum(dy y)) per row. */
KERNEL(vdev_ref_softmax_grad)
{
    int64_t c = last_dim(a, 0), rows = c ? vdev_args_numel(a, 0) / c : 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *dy = IN_F(0) + r * c, *y = IN_F(1) + r * c;
        float *o = OUT_F(0) + r * c;
        double s = 0.0;
        for (int64_t j = 0; j < c; j++)
            s += (double)dy[j] * y[j];
        for (int64_t j = 0; j < c; j++)
            o[j] = (float)((double)y[j] * ((double)dy[j] - s));
    }
}

/* (dy, y = log_softmax x) -> dy - exp(y) sum(dy) per row. */
KERNEL(vdev_ref_log_softmax_grad)
{
    int64_t c = last_dim(a, 0), rows = c ? vdev_args_numel(a, 0) / c : 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *dy = IN_F(0) + r * c, *y = IN_F(1) + r * c;
        float *o = OUT_F(0) + r * c;
        double s = 0.0;
        for (int64_t j = 0; j < c; j++)
            s += dy[j];
        for (int64_t j = 0; j < c; j++)
            o[j] = (float)((double)dy[j] - exp((double)y[j]) * s);
    }
}

/* (x, like) -> like's shape, x repeated along the axis i[0] (or everywhere
 * for VDEV_AXIS_ALL). x's layout is like's with the axis of length 1. */
KERNEL(vdev_ref_broadcast)
{
    int64_t outer, len, inner;
    vdev_args_split_axis(a, 1, a->i[0], &outer, &len, &inner);
    const float *x = IN_F(0);
    float *o = OUT_F(0);
    for (int64_t p = 0; p < outer; p++)
        for (int64_t l = 0; l < len; l++)
            for (int64_t j = 0; j < inner; j++)
                o[(p * len + l) * inner + j] = x[p * inner + j];
}

/* (dy, pred, target) -> dy * 2 (pred - target) / n, dy one element. */
KERNEL(vdev_ref_mse_grad)
{
    double dy = IN_F(0)[0];
    const float *p = IN_F(1), *t = IN_F(2);
    float *o = OUT_F(0);
    int64_t n = vdev_args_numel(a, 1);
    for (int64_t i = 0; i < n; i++)
        o[i] = (float)(dy * 2.0 * ((double)p[i] - (double)t[i]) / (double)n);
}

/* (dy, logits [N,C], labels [N]) -> dy (softmax(logits) - onehot) / N. */
KERNEL(vdev_ref_softmax_ce_grad)
{
    double dy = IN_F(0)[0];
    int64_t n = a->in_shape[1][0], c = a->in_shape[1][1];
    const int32_t *lab = IN_I(2);
    for (int64_t r = 0; r < n; r++) {
        const float *x = IN_F(1) + r * c;
        float *o = OUT_F(0) + r * c;
        int bad = lab[r] < 0 || lab[r] >= c;
        double m, s;
        row_stats(x, c, &m, &s);
        for (int64_t j = 0; j < c; j++) {
            double g = exp(x[j] - m) / s - (j == lab[r] ? 1.0 : 0.0);
            o[j] = bad ? NAN : (float)(dy * g / (double)n);
        }
    }
}

/* (dy, like) -> dy summed to like's shape, by the mode in i[3]: 0 like has
 * dy's elements (a copy), 1 a row (sum over every leading row), 2 one
 * element (sum of everything), 3 each element of like the sum of the block
 * of dy it was broadcast over (in dy's order, in double). */
KERNEL(vdev_ref_reduce_rows)
{
    const float *dy = IN_F(0);
    float *o = OUT_F(0);
    int64_t n = vdev_args_numel(a, 0);
    if (a->i[3] == 3) {
        int64_t d4[4], l4[4], sd[4], s = 1, j = 0;
        pad4(a->in_shape[0], a->in_ndim[0], d4);
        pad4(a->in_shape[1], a->in_ndim[1], l4);
        for (int d = 3; d >= 0; d--) {
            sd[d] = s;
            s *= d4[d];
        }
        /* like's index l, and along each dimension of 1 that dy fills, all
         * of dy's indices: the block [lo, hi) of dimension d */
        int64_t l[4], lo[4], hi[4], k[4];
        for (l[0] = 0; l[0] < l4[0]; l[0]++)
            for (l[1] = 0; l[1] < l4[1]; l[1]++)
                for (l[2] = 0; l[2] < l4[2]; l[2]++)
                    for (l[3] = 0; l[3] < l4[3]; l[3]++) {
                        for (int d = 0; d < 4; d++) {
                            int spread = l4[d] == 1 && d4[d] != 1;
                            lo[d] = spread ? 0 : l[d];
                            hi[d] = spread ? d4[d] : l[d] + 1;
                        }
                        double acc = 0.0;
                        for (k[0] = lo[0]; k[0] < hi[0]; k[0]++)
                            for (k[1] = lo[1]; k[1] < hi[1]; k[1]++)
                                for (k[2] = lo[2]; k[2] < hi[2]; k[2]++)
                                    for (k[3] = lo[3]; k[3] < hi[3]; k[3]++)
                                        acc += dy[k[0] * sd[0] + k[1] * sd[1] + k[2] * sd[2] +
                                                  k[3] * sd[3]];
                        o[j++] = (float)acc;
                    }
        return;
    }
    if (a->i[3] == 0) {
        for (int64_t i = 0; i < n; i++)
            o[i] = dy[i];
        return;
    }
    int64_t cols = a->i[3] == 1 ? vdev_args_numel(a, 1) : 1;
    int64_t rows = cols ? n / cols : 0;
    for (int64_t j = 0; j < cols; j++) {
        double acc = 0.0;
        for (int64_t r = 0; r < rows; r++)
            acc += dy[r * cols + j];
        o[j] = (float)acc;
    }
}

/* ---- in-place updates (out[k] is input k's memory) ---- */

/* Keras's decoupled weight decay of the update's variable (its float
 * arithmetic, vdev_decayed), before the update: i[1] wd, i[2] lr (wd 0: none). */
static void weight_decay(const struct vdev_kernel_args *a, float *var, int64_t n)
{
    float wd = vdev_f32_of_param(a->i[VDEV_UPDATE_WD]);
    float lr = vdev_f32_of_param(a->i[VDEV_UPDATE_WD_LR]);
    if (wd == 0)
        return;
    for (int64_t i = 0; i < n; i++)
        var[i] = vdev_decayed(var[i], wd, lr);
}

/* Keras SGD with momentum: velocity = momentum velocity - lr grad;
 * var += velocity, or with Nesterov (i[0]) var += momentum velocity - lr grad
 * (the new velocity). With momentum 0 there is no velocity (Keras makes no
 * slot): var -= lr grad, rounded as TensorFlow's ApplyGradientDescent rounds
 * it in float, and the velocity operand is neither read nor written, so the
 * slot keeps what it holds (zeros: nn.c) and the pass costs no traffic. */
KERNEL(vdev_ref_sgd_update)
{
    float *var = OUT_F(0), *vel = OUT_F(2);
    const float *g = IN_F(1);
    double lr = a->f[0], mom = a->f[1];
    int nesterov = a->i[0] != 0;
    int64_t n = vdev_args_numel(a, 0);
    weight_decay(a, var, n);
    if (mom == 0) {
        for (int64_t i = 0; i < n; i++)
            var[i] = (float)((double)var[i] - (float)(lr * g[i]));
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        vel[i] = (float)(mom * vel[i] - lr * g[i]);
        double step = nesterov ? mom * vel[i] - lr * g[i] : (double)vel[i];
        var[i] = (float)((double)var[i] + step);
    }
}

/* TensorFlow's ApplyAdam with lr_t already bias-corrected:
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; var -= lr_t m / (sqrt(v) + eps). */
KERNEL(vdev_ref_adam_update)
{
    float *var = OUT_F(0), *m = OUT_F(2), *v = OUT_F(3);
    const float *g = IN_F(1);
    double lr = a->f[0], b1 = a->f[1], b2 = a->f[2], eps = a->f[3];
    int64_t n = vdev_args_numel(a, 0);
    weight_decay(a, var, n);
    for (int64_t i = 0; i < n; i++) {
        double gi = g[i];
        m[i] = (float)(b1 * m[i] + (1.0 - b1) * gi);
        v[i] = (float)(b2 * v[i] + (1.0 - b2) * gi * gi);
        var[i] = (float)((double)var[i] - lr * m[i] / (sqrt((double)v[i]) + eps));
    }
}

/* AMSGrad's first half, (m, grad, v, vhat): Adam's moments, then
 * vhat = max(vhat, v) (a NaN v passes into vhat). */
KERNEL(vdev_ref_amsgrad_moments)
{
    float *m = OUT_F(0), *v = OUT_F(2), *vh = OUT_F(3);
    const float *g = IN_F(1);
    double b1 = a->f[1], b2 = a->f[2];
    int64_t n = vdev_args_numel(a, 0);
    for (int64_t i = 0; i < n; i++) {
        double gi = g[i];
        m[i] = (float)(b1 * m[i] + (1.0 - b1) * gi);
        v[i] = (float)(b2 * v[i] + (1.0 - b2) * gi * gi);
        vh[i] = vh[i] >= v[i] ? vh[i] : v[i];
    }
}

/* AMSGrad's second half, (var, m, vhat): the weight decay, then
 * var -= lr_t m / (sqrt(vhat) + eps). */
KERNEL(vdev_ref_amsgrad_apply)
{
    float *var = OUT_F(0);
    const float *m = IN_F(1), *vh = IN_F(2);
    double lr = a->f[0], eps = a->f[3];
    int64_t n = vdev_args_numel(a, 0);
    weight_decay(a, var, n);
    for (int64_t i = 0; i < n; i++)
        var[i] = (float)((double)var[i] - lr * m[i] / (sqrt((double)vh[i]) + eps));
}

/* Keras's gradient clipping of one gradient, in float as TensorFlow's
 * clip_by_norm, clip_by_global_norm and clip_by_value compute it:
 * t = g * f[0], then t / f[1] (clip_by_norm's g * c / max(norm, c); f[1] 1
 * otherwise), then clamped to [-f[2], f[2]] when f[2] > 0. */
KERNEL(vdev_ref_clip_grad)
{
    const float *x = IN_F(0);
    float *o = OUT_F(0);
    float mul = (float)a->f[0], div = (float)a->f[1], c = (float)a->f[2];
    int64_t n = vdev_args_numel(a, 0);
    for (int64_t i = 0; i < n; i++) {
        float t = x[i] * mul;
        t = t / div;
        if (c > 0)
            t = t < -c ? -c : (t > c ? c : t);
        o[i] = t;
    }
}

/* ---- slicing along axis 0 ---- */

/* The elements of one row of input k (every dimension but the first). */
static int64_t row_numel(const struct vdev_kernel_args *a, int k)
{
    int64_t n = 1;
    for (int d = 1; d < a->in_ndim[k]; d++)
        n *= a->in_shape[k][d];
    return n;
}

/* Rows [i[0], i[0] + i[1]) of axis 0: one contiguous range of 4-byte words
 * (any dtype), copied as a device copies it. */
KERNEL(vdev_ref_slice)
{
    int64_t row = row_numel(a, 0), n = a->i[1] * row;
    if (n)
        memcpy(a->out[0], (const uint32_t *)a->in[0] + a->i[0] * row,
               (size_t)n * sizeof(uint32_t));
}

/* (dy, like x): zeros of x's shape, dy in rows [i[0], i[0] + dy's rows). */
KERNEL(vdev_ref_slice_grad)
{
    int64_t row = row_numel(a, 1), n = vdev_args_numel(a, 0);
    int64_t all = vdev_args_numel(a, 1);
    if (all)
        memset(a->out[0], 0, (size_t)all * sizeof(float));
    if (n)
        memcpy(OUT_F(0) + a->i[0] * row, IN_F(0), (size_t)n * sizeof(float));
}
