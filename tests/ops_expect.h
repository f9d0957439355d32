/* ops_expect.h — the expected results of test_ops.c's cases, computed here
 * by direct loops in double precision, never by the kernel under test:
 * expect() fills a struct texp for a case built by ops_cases.h. */
#ifndef VDEV_TESTS_OPS_EXPECT_H
#define VDEV_TESTS_OPS_EXPECT_H

#include "ops_cases.h"

/* A variable's value after the update's weight decay (i[1] wd, i[2] lr as
 * float bits): v - (v wd) lr, each product and the difference rounded to
 * float as Keras computes it in float32. */
static double decayed_expect(const struct tcase *c, float v)
{
    float wd = vdev_f32_of_param(c->p.i[VDEV_UPDATE_WD]);
    float lr = vdev_f32_of_param(c->p.i[VDEV_UPDATE_WD_LR]);
    if (wd == 0)
        return v;
    double d = (float)((double)v * wd);
    d = (float)(d * lr);
    return (float)((double)v - d);
}

/* ---- the expected results: direct loops, double precision ----
 *
 * Written from the op's definition, not from the kernel: other loop orders,
 * other index arithmetic, plain exp() of x - logsumexp. */

/* Expected output k: its shape, dtype and a zeroed value array. */
static void exp_out(struct texp *e, int k, const int64_t *shape, int ndim, enum vdev_dtype dt)
{
    e->ndim[k] = ndim;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        e->shape[k][d] = d < ndim ? shape[d] : 1;
    e->dtype[k] = dt;
    e->numel[k] = numel_of(shape, ndim);
    e->v[k] = calloc((size_t)(e->numel[k] ? e->numel[k] : 1), sizeof(double));
    if (k >= e->n)
        e->n = k + 1;
}

static void exp_free(struct texp *e)
{
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++) {
        free(e->v[k]);
        free(e->mag[k]);
    }
    memset(e, 0, sizeof *e);
}

static double sigm(double u) { return 1.0 / (1.0 + exp(-u)); }

/* log(sum(exp(x))) of a row, via the row maximum. */
static double logsumexp(const float *x, int64_t n)
{
    double m = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < n; j++)
        s += exp(x[j] - m);
    return m + log(s);
}

/* NumPy's broadcast of inputs x and y (aligned at their last dimensions):
 * the shape into osh, its rank returned. */
static int bcast_shape(const struct hin *x, const struct hin *y, int64_t *osh)
{
    int nd = x->ndim > y->ndim ? x->ndim : y->ndim;
    for (int d = 0; d < nd; d++) {
        int dx = d - (nd - x->ndim), dy = d - (nd - y->ndim);
        int64_t u = dx >= 0 ? x->shape[dx] : 1, v = dy >= 0 ? y->shape[dy] : 1;
        osh[d] = u == 1 ? v : u;
    }
    return nd;
}

/* The element of h that broadcasts to element i (row-major) of a tensor of
 * shape osh (ond dimensions): i taken apart into indices, h's dimensions of
 * 1 ignoring theirs. */
static int64_t bcast_offset(const struct hin *h, const int64_t *osh, int ond, int64_t i)
{
    int64_t off = 0, stride = 1, rem = i;
    for (int d = ond - 1; d >= 0; d--) {
        int64_t id = rem % osh[d];
        rem /= osh[d];
        int hd = d - (ond - h->ndim);
        if (hd >= 0) {
            if (h->shape[hd] != 1)
                off += id * stride;
            stride *= h->shape[hd];
        }
    }
    return off;
}

#include "ops_expect_shaped.h"
#include "ops_expect_depthwise.h"
#include "ops_convt_expect.h"
#include "ops_lstm_expect.h"
#include "ops_gru_expect.h"
#include "ops_select_expect.h"
#include "ops_compare_expect.h"
#include "ops_extreme_expect.h"

static void expect(const struct tcase *c, struct texp *e)
{
    memset(e, 0, sizeof *e);
    const struct hin *x = &c->in[0];
    int64_t n = x->n, cols = x->ndim ? x->shape[x->ndim - 1] : 1;
    int64_t rows = cols ? n / cols : 0;
    double s = c->p.f[0];
    e->atol = 0.0;
    e->rtol = 1e-6;
    /* default: one f32 output with input 0's shape */
    if (!(vdev_op_defs[c->op].flags & VDEV_OP_INPLACE))
        exp_out(e, 0, x->shape, x->ndim, VDEV_F32);
    double *o = e->v[0];
    const float *a = F(c, 0);
    switch (c->op) {
    case VDEV_OP_MATMUL:
    case VDEV_OP_BATCH_MATMUL: {
        /* C[i,j] = sum_p op(A)[i,p] op(B)[p,j], for each batch entry of
         * BATCH_MATMUL (a batch of 1 read for every entry); mag = sum_p |...|
         * bounds the float-accumulation error of BLAS */
        int ta = (int)c->p.i[0], tb = (int)c->p.i[1], bat = c->op == VDEV_OP_BATCH_MATMUL;
        const struct hin *y = &c->in[1];
        int64_t bx = bat ? x->shape[0] : 1, by = bat ? y->shape[0] : 1, nb = bx == 1 ? by : bx;
        const int64_t *xs = x->shape + bat, *ys = y->shape + bat;
        int64_t m = xs[ta ? 1 : 0], k = xs[ta ? 0 : 1], nn = ys[tb ? 0 : 1];
        int64_t sh[3] = {nb, m, nn};
        free(e->v[0]);
        exp_out(e, 0, sh + !bat, 2 + bat, VDEV_F32);
        e->mag[0] = calloc((size_t)(nb * m * nn + 1), sizeof(double));
        const float *b = F(c, 1);
        for (int64_t q = 0; q < nb; q++) {
            const float *aq = a + (bx == 1 ? 0 : q * m * k), *bq = b + (by == 1 ? 0 : q * k * nn);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < nn; j++) {
                    double acc = 0, mag = 0;
                    for (int64_t p = 0; p < k; p++) {
                        double av = ta ? aq[p * m + i] : aq[i * k + p];
                        double bv = tb ? bq[j * k + p] : bq[p * nn + j];
                        acc += av * bv;
                        mag += fabs(av * bv);
                    }
                    e->v[0][(q * m + i) * nn + j] = acc;
                    e->mag[0][(q * m + i) * nn + j] = mag;
                }
        }
        e->atol = 1e-6;
        break;
    }
    case VDEV_OP_ADD:
    case VDEV_OP_SUB:
    case VDEV_OP_MUL:
    case VDEV_OP_DIV:
    case VDEV_OP_MAXIMUM:
    case VDEV_OP_MINIMUM: {
        /* the output has NumPy's broadcast shape; each element pairs the
         * elements of a and b that broadcast to it. Maximum, Minimum: a NaN
         * operand (a's first), else std::max (a < b ? b : a), std::min. */
        const float *b = F(c, 1);
        int64_t osh[4];
        int ond = bcast_shape(x, &c->in[1], osh);
        free(e->v[0]);
        exp_out(e, 0, osh, ond, x->dtype);
        if (x->dtype == VDEV_I32) { /* two's complement wrapping */
            for (int64_t i = 0; i < e->numel[0]; i++) {
                int64_t av = I(c, 0)[bcast_offset(x, osh, ond, i)];
                int64_t bv = I(c, 1)[bcast_offset(&c->in[1], osh, ond, i)];
                uint32_t w = c->op == VDEV_OP_ADD   ? (uint32_t)(av + bv)
                             : c->op == VDEV_OP_SUB ? (uint32_t)(av - bv)
                             : c->op == VDEV_OP_MUL ? (uint32_t)av * (uint32_t)bv
                             : c->op == VDEV_OP_MAXIMUM ? (uint32_t)(av < bv ? bv : av)
                                                        : (uint32_t)(bv < av ? bv : av);
                int32_t v;
                memcpy(&v, &w, 4);
                e->v[0][i] = v;
            }
            e->atol = e->rtol = 0.0;
            break;
        }
        for (int64_t i = 0; i < e->numel[0]; i++) {
            double av = a[bcast_offset(x, osh, ond, i)];
            double bv = b[bcast_offset(&c->in[1], osh, ond, i)];
            if (c->op == VDEV_OP_MAXIMUM || c->op == VDEV_OP_MINIMUM)
                e->v[0][i] = isnan(av)                       ? av
                             : isnan(bv)                     ? bv
                             : c->op == VDEV_OP_MAXIMUM      ? (av < bv ? bv : av)
                                                             : (bv < av ? bv : av);
            else
                e->v[0][i] = c->op == VDEV_OP_ADD   ? av + bv
                             : c->op == VDEV_OP_SUB ? av - bv
                             : c->op == VDEV_OP_MUL ? av * bv
                                                    : av / bv;
        }
        break;
    }
    case VDEV_OP_SQRT:
        for (int64_t i = 0; i < n; i++)
            o[i] = a[i] < 0 ? NAN : sqrt(a[i]);
        break;
    case VDEV_OP_ERF:
        for (int64_t i = 0; i < n; i++)
            o[i] = erf(a[i]);
        break;
    case VDEV_OP_SOFTPLUS:
        /* log1p(e^x), written apart from TensorFlow's three ranges: they
         * differ by at most e^-13.94 / 2 = 4.4e-7 relative, just inside the
         * switch at -13.94 (e^x for log1p(e^x)), within the default 1e-6 */
        for (int64_t i = 0; i < n; i++)
            o[i] = a[i] > 0 ? a[i] + log1p(exp(-a[i])) : log1p(exp(a[i]));
        break;
    case VDEV_OP_ADD_SCALAR:
    case VDEV_OP_MUL_SCALAR:
    case VDEV_OP_RELU:
    case VDEV_OP_IDENTITY:
        if (x->dtype == VDEV_I32) { /* identity of an i32: the same words */
            e->dtype[0] = VDEV_I32;
            for (int64_t i = 0; i < n; i++)
                o[i] = I(c, 0)[i];
            break;
        }
        for (int64_t i = 0; i < n; i++)
            o[i] = c->op == VDEV_OP_ADD_SCALAR   ? a[i] + s
                   : c->op == VDEV_OP_MUL_SCALAR ? a[i] * s
                   : c->op == VDEV_OP_RELU       ? (a[i] > 0 ? a[i] : 0.0)
                                                 : a[i];
        break;
    case VDEV_OP_POW_SCALAR:
    case VDEV_OP_TANH:
    case VDEV_OP_SIGMOID:
    case VDEV_OP_EXP:
    case VDEV_OP_LOG:
        for (int64_t i = 0; i < n; i++)
            o[i] = c->op == VDEV_OP_POW_SCALAR ? pow(a[i], s)
                   : c->op == VDEV_OP_TANH     ? tanh(a[i])
                   : c->op == VDEV_OP_SIGMOID  ? sigm(a[i])
                   : c->op == VDEV_OP_EXP      ? exp(a[i])
                                               : log(a[i]);
        e->atol = 1e-6;
        e->rtol = 1e-5;
        break;
    case VDEV_OP_SOFTMAX:
    case VDEV_OP_LOG_SOFTMAX:
        for (int64_t r = 0; r < rows; r++) {
            double lse = logsumexp(a + r * cols, cols);
            for (int64_t j = 0; j < cols; j++) {
                double ls = a[r * cols + j] - lse;
                o[r * cols + j] = c->op == VDEV_OP_SOFTMAX ? exp(ls) : ls;
            }
        }
        e->atol = 1e-6;
        e->rtol = 1e-5;
        break;
    case VDEV_OP_ARGMAX: {
        /* strictly greater: the first of equal maxima wins */
        free(e->v[0]);
        exp_out(e, 0, x->shape, x->ndim - 1, VDEV_I32);
        for (int64_t r = 0; r < rows; r++) {
            int64_t best = 0;
            for (int64_t j = 1; j < cols; j++)
                if (a[r * cols + j] > a[r * cols + best])
                    best = j;
            e->v[0][r] = (double)best;
        }
        break;
    }
    case VDEV_OP_SUM:
    case VDEV_OP_MEAN: {
        /* outer x len x inner around the axis; the output shape drops the
         * axis (or keeps it as 1) */
        int64_t ax = c->p.i[0], keep = c->p.i[1];
        int all = ax == VDEV_AXIS_ALL;
        if (!all && ax < 0)
            ax += x->ndim;
        int64_t outer = 1, len = 1, inner = 1, sh[4] = {1, 1, 1, 1};
        int nd = 0;
        for (int d = 0; d < x->ndim; d++) {
            int red = all || d == ax;
            if (red)
                len *= x->shape[d];
            else if (all || d < ax)
                outer *= x->shape[d];
            else
                inner *= x->shape[d];
            if (!red || keep)
                sh[nd++] = red ? 1 : x->shape[d];
        }
        free(e->v[0]);
        exp_out(e, 0, sh, nd, x->dtype);
        if (x->dtype == VDEV_I32) { /* wrapping sums */
            for (int64_t p = 0; p < outer; p++)
                for (int64_t j = 0; j < inner; j++) {
                    uint32_t acc = 0;
                    for (int64_t l = 0; l < len; l++)
                        acc += (uint32_t)I(c, 0)[(p * len + l) * inner + j];
                    int32_t v;
                    memcpy(&v, &acc, 4);
                    e->v[0][p * inner + j] = v;
                }
            e->atol = e->rtol = 0.0;
            break;
        }
        for (int64_t p = 0; p < outer; p++)
            for (int64_t j = 0; j < inner; j++) {
                double acc = 0;
                for (int64_t l = 0; l < len; l++)
                    acc += a[(p * len + l) * inner + j];
                e->v[0][p * inner + j] = c->op == VDEV_OP_MEAN ? acc / (double)len : acc;
            }
        e->atol = 1e-6;
        e->rtol = 1e-5;
        break;
    }
    case VDEV_OP_RESHAPE: {
        /* the same words in a new shape, -1 inferred */
        int nd = (int)c->p.f[0];
        int64_t sh[4], known = 1;
        int inf = -1;
        for (int d = 0; d < nd; d++) {
            sh[d] = c->p.i[d];
            if (sh[d] == -1)
                inf = d;
            else
                known *= sh[d];
        }
        if (inf >= 0)
            sh[inf] = n / known;
        free(e->v[0]);
        exp_out(e, 0, sh, nd, VDEV_F32);
        for (int64_t i = 0; i < n; i++)
            e->v[0][i] = a[i];
        break;
    }
    case VDEV_OP_TRANSPOSE:
        transpose_expect(c, e);
        break;
    case VDEV_OP_MSE: {
        free(e->v[0]);
        exp_out(e, 0, NULL, 0, VDEV_F32);
        double acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += ((double)a[i] - F(c, 1)[i]) * ((double)a[i] - F(c, 1)[i]);
        /* Keras: the mean over examples (all dimensions but the last) of
         * each example's mean, with divide_no_nan: no example gives 0,
         * examples without elements NaN */
        int64_t examples = x->ndim >= 2 ? numel_of(x->shape, x->ndim - 1) : 1;
        e->v[0][0] = examples ? acc / (double)n : 0.0;
        e->atol = 1e-6;
        e->rtol = 1e-5;
        break;
    }
    case VDEV_OP_SOFTMAX_CE: {
        free(e->v[0]);
        exp_out(e, 0, NULL, 0, VDEV_F32);
        double acc = 0;
        for (int64_t r = 0; r < rows; r++)
            acc += logsumexp(a + r * cols, cols) - a[r * cols + I(c, 1)[r]];
        e->v[0][0] = rows ? acc / (double)rows : 0.0; /* an empty batch: 0 (Keras) */
        e->atol = 1e-6;
        e->rtol = 1e-5;
        break;
    }
    case VDEV_OP_MAXMIN_GRAD: {
        /* TensorFlow's where_v2(mask, dy, 0) for x's share, (mask, 0, dy)
         * for y's; mask x >= y (Maximum) or x <= y (Minimum), x and y
         * broadcast to dy's shape */
        const struct hin *hx = &c->in[1], *hy = &c->in[2];
        const float *xv = F(c, 1), *yv = F(c, 2);
        for (int64_t i = 0; i < n; i++) {
            double u = xv[bcast_offset(hx, x->shape, x->ndim, i)];
            double v = yv[bcast_offset(hy, x->shape, x->ndim, i)];
            int mask = c->p.i[0] ? u <= v : u >= v;
            o[i] = mask == !c->p.i[1] ? a[i] : 0.0;
        }
        break;
    }
    case VDEV_OP_RELU_GRAD:
    case VDEV_OP_TANH_GRAD:
    case VDEV_OP_SIGMOID_GRAD: {
        /* relu: dy where x > 0; tanh: dy (1 - y^2); sigmoid: dy y (1 - y) */
        const float *y = F(c, 1);
        for (int64_t i = 0; i < n; i++)
            o[i] = c->op == VDEV_OP_RELU_GRAD   ? (y[i] > 0 ? a[i] : 0.0)
                   : c->op == VDEV_OP_TANH_GRAD ? a[i] * (1.0 - (double)y[i] * y[i])
                                                : a[i] * (double)y[i] * (1.0 - y[i]);
        break;
    }
    case VDEV_OP_SOFTMAX_GRAD:
    case VDEV_OP_LOG_SOFTMAX_GRAD: {
        /* softmax: y (dy - sum(dy y)); log_softmax: dy - exp(y) sum(dy) */
        const float *y = F(c, 1);
        for (int64_t r = 0; r < rows; r++) {
            double sdy = 0, sdyy = 0;
            for (int64_t j = 0; j < cols; j++) {
                sdy += a[r * cols + j];
                sdyy += (double)a[r * cols + j] * y[r * cols + j];
            }
            for (int64_t j = 0; j < cols; j++) {
                int64_t i = r * cols + j;
                o[i] =
                    c->op == VDEV_OP_SOFTMAX_GRAD ? y[i] * (a[i] - sdyy) : a[i] - exp(y[i]) * sdy;
            }
        }
        e->atol = 1e-6;
        e->rtol = 1e-5;
        break;
    }
    case VDEV_OP_BROADCAST: {
        const struct hin *lk = &c->in[1];
        free(e->v[0]);
        exp_out(e, 0, lk->shape, lk->ndim, VDEV_F32);
        int64_t ax = c->p.i[0];
        int all = ax == VDEV_AXIS_ALL;
        if (!all && ax < 0)
            ax += lk->ndim;
        /* walk like's elements by multi-index; x's index drops the axis
         * (for keepdims x has a 1 there, which gives the same offset) */
        for (int64_t i = 0; i < lk->n; i++) {
            int64_t rem = i, xi = 0, xstride = 1;
            for (int d = lk->ndim - 1; d >= 0; d--) {
                int64_t id = rem % lk->shape[d];
                rem /= lk->shape[d];
                if (!all && d != ax) {
                    xi += id * xstride;
                    xstride *= lk->shape[d];
                }
            }
            e->v[0][i] = a[all ? 0 : xi];
        }
        break;
    }
    case VDEV_OP_MSE_GRAD: {
        /* dy 2 (pred - target) / n */
        const struct hin *pr = &c->in[1];
        free(e->v[0]);
        exp_out(e, 0, pr->shape, pr->ndim, VDEV_F32);
        for (int64_t i = 0; i < pr->n; i++)
            e->v[0][i] = a[0] * 2.0 * ((double)F(c, 1)[i] - F(c, 2)[i]) / (double)pr->n;
        break;
    }
    case VDEV_OP_SOFTMAX_CE_GRAD: {
        /* dy (softmax - onehot(label)) / N */
        const struct hin *lg = &c->in[1];
        int64_t nr = lg->shape[0], nc = lg->shape[1];
        free(e->v[0]);
        exp_out(e, 0, lg->shape, 2, VDEV_F32);
        for (int64_t r = 0; r < nr; r++) {
            double lse = logsumexp(F(c, 1) + r * nc, nc);
            for (int64_t j = 0; j < nc; j++)
                e->v[0][r * nc + j] =
                    a[0] * (exp(F(c, 1)[r * nc + j] - lse) - (j == I(c, 2)[r])) / (double)nr;
        }
        e->atol = 1e-6;
        e->rtol = 1e-5;
        break;
    }
    case VDEV_OP_REDUCE_ROWS: {
        /* every element of dy adds into the element of b it was paired with */
        const struct hin *lk = &c->in[1];
        free(e->v[0]);
        exp_out(e, 0, lk->shape, lk->ndim, VDEV_F32);
        /* the host kernel sums in float: its bound scales with sum |dy| */
        e->mag[0] = calloc((size_t)(e->numel[0] + 1), sizeof(double));
        for (int64_t i = 0; i < n; i++) {
            int64_t j = bcast_offset(lk, x->shape, x->ndim, i);
            e->v[0][j] += a[i];
            e->mag[0][j] += fabs(a[i]);
        }
        e->atol = 1e-6;
        e->rtol = 1e-6;
        break;
    }
    case VDEV_OP_SGD_UPDATE: {
        /* velocity and var are stored as float after each step; momentum 0:
         * var -= lr g (lr g rounded to float, as TensorFlow's float
         * ApplyGradientDescent) and the velocity stays as it was; Nesterov:
         * var += momentum velocity - lr g with the new velocity; the weight
         * decay first */
        for (int k = 0; k < 3; k++)
            exp_out(e, k, x->shape, x->ndim, VDEV_F32);
        double lr = c->p.f[0], mom = c->p.f[1];
        for (int64_t i = 0; i < n; i++) {
            double w = decayed_expect(c, a[i]);
            float vel = (float)(mom * F(c, 2)[i] - lr * F(c, 1)[i]);
            double step = c->p.i[0] ? mom * vel - lr * F(c, 1)[i] : vel;
            e->v[2][i] = mom == 0 ? F(c, 2)[i] : vel;
            e->v[0][i] = mom == 0 ? w - (float)(lr * F(c, 1)[i]) : w + step;
            e->v[1][i] = F(c, 1)[i];
        }
        e->atol = 1e-7;
        break;
    }
    case VDEV_OP_ADAM_UPDATE:
    case VDEV_OP_AMSGRAD_MOMENTS: {
        /* m and v stored as float, then var -= lr_t m / (sqrt(v) + eps)
         * after the weight decay; AMSGrad's first half: m, v, and
         * vhat = max(vhat, v), input 0 being m */
        int ams = c->op == VDEV_OP_AMSGRAD_MOMENTS;
        const float *m0 = ams ? a : F(c, 2), *v0 = ams ? F(c, 2) : F(c, 3);
        for (int k = 0; k < 4; k++)
            exp_out(e, k, x->shape, x->ndim, VDEV_F32);
        int km = ams ? 0 : 2;
        e->mag[0] = calloc((size_t)(n + 1), sizeof(double));
        e->mag[2] = calloc((size_t)(n + 1), sizeof(double));
        e->mag[3] = calloc((size_t)(n + 1), sizeof(double));
        double lr = c->p.f[0], b1 = c->p.f[1], b2 = c->p.f[2], eps = c->p.f[3];
        for (int64_t i = 0; i < n; i++) {
            double g = F(c, 1)[i];
            float m = (float)(b1 * m0[i] + (1 - b1) * g);
            float v = (float)(b2 * v0[i] + (1 - b2) * g * g);
            e->v[1][i] = g;
            e->v[km][i] = m;
            e->v[2 + !ams][i] = v;
            e->mag[km][i] = fabs(b1 * m0[i]) + fabs((1 - b1) * g);
            e->mag[2 + !ams][i] = fabs(b2 * v0[i]) + fabs((1 - b2) * g * g);
            if (ams) {
                e->v[3][i] = F(c, 3)[i] > v ? F(c, 3)[i] : v;
                continue;
            }
            double w = decayed_expect(c, a[i]);
            e->v[0][i] = w - lr * m / (sqrt(v) + eps);
            /* the host kernel computes in float: ulps of each term, with m's
             * and v's own terms taken apart (they may cancel) */
            double sv = sqrt(v) + eps;
            e->mag[0][i] = fabs(w) + lr * (fabs(b1 * F(c, 2)[i]) + fabs((1 - b1) * g)) / sv +
                           lr * fabs(m) * (fabs(b2 * F(c, 3)[i]) + fabs((1 - b2) * g * g)) /
                               (sv * sv * (sqrt(v) + 1e-30));
        }
        e->atol = 1e-7;
        break;
    }
    case VDEV_OP_AMSGRAD_APPLY:
        /* (var, m, vhat): var -= lr_t m / (sqrt(vhat) + eps), after the
         * weight decay; m and vhat unchanged */
        for (int k = 0; k < 3; k++)
            exp_out(e, k, x->shape, x->ndim, VDEV_F32);
        for (int64_t i = 0; i < n; i++) {
            e->v[0][i] = decayed_expect(c, a[i]) -
                         c->p.f[0] * F(c, 1)[i] / (sqrt((double)F(c, 2)[i]) + c->p.f[3]);
            e->v[1][i] = F(c, 1)[i];
            e->v[2][i] = F(c, 2)[i];
        }
        e->atol = 1e-7;
        break;
    case VDEV_OP_CLIP_GRAD: {
        /* g * mul rounded to float, then / div rounded, then the clamp (the
         * output is the default one, input 0's shape) */
        double lim = c->p.f[2];
        for (int64_t i = 0; i < n; i++) {
            double t = (float)((double)a[i] * (float)c->p.f[0]);
            t = (float)(t / (float)c->p.f[1]);
            e->v[0][i] = lim > 0 ? fmin(fmax(t, -lim), lim) : t;
        }
        break;
    }
    case VDEV_OP_SLICE: {
        /* rows [b, b + size) of x: the same words, the rows in order */
        int64_t row = x->shape[0] ? n / x->shape[0] : 0, b = c->p.i[0], sz = c->p.i[1];
        int64_t sh[VDEV_MAX_DIMS];
        memcpy(sh, x->shape, sizeof sh);
        sh[0] = sz;
        free(e->v[0]);
        exp_out(e, 0, sh, x->ndim, x->dtype);
        for (int64_t i = 0; i < sz; i++)
            for (int64_t j = 0; j < row; j++)
                e->v[0][i * row + j] = x->dtype == VDEV_I32 ? I(c, 0)[(b + i) * row + j]
                                                            : a[(b + i) * row + j];
        break;
    }
    case VDEV_OP_SLICE_GRAD: {
        /* like's shape: dy's element at [i, j] lands at [b + i, j], 0 elsewhere */
        const struct hin *lk = &c->in[1];
        free(e->v[0]);
        exp_out(e, 0, lk->shape, lk->ndim, VDEV_F32);
        int64_t row = lk->shape[0] ? lk->n / lk->shape[0] : 0, b = c->p.i[0];
        for (int64_t i = 0; i < x->shape[0]; i++)
            for (int64_t j = 0; j < row; j++)
                e->v[0][(b + i) * row + j] = a[i * row + j];
        break;
    }
    case VDEV_OP_CONV2D:
    case VDEV_OP_MAX_POOL:
    case VDEV_OP_AVG_POOL:
    case VDEV_OP_CONV2D_BACKPROP_INPUT:
    case VDEV_OP_CONV2D_BACKPROP_FILTER:
    case VDEV_OP_MAX_POOL_GRAD:
    case VDEV_OP_AVG_POOL_GRAD:
        conv_expect(c, e);
        break;
    case VDEV_OP_STRIDED_SLICE:
    case VDEV_OP_STRIDED_SLICE_GRAD:
    case VDEV_OP_STRIDED_SLICE_GRAD_ADD:
        strided_expect(c, e);
        break;
    case VDEV_OP_CONCAT:
    case VDEV_OP_PACK:
        join_expect(c, e);
        break;
    case VDEV_OP_GATHER:
    case VDEV_OP_GATHER_GRAD:
        gather_expect(c, e);
        break;
    case VDEV_OP_DEPTHWISE_CONV2D:
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT:
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER:
        depthwise_expect(c, e);
        break;
    case VDEV_OP_CONV2D_TRANSPOSE:
        convt_expect(c, e);
        break;
    case VDEV_OP_LSTM_GATES:
    case VDEV_OP_LSTM_GATES_GRAD:
    case VDEV_OP_LSTM_CELL_STATE:
    case VDEV_OP_LSTM_CELL_OUTPUT:
    case VDEV_OP_LSTM_CELL_GRAD:
        lstm_expect(c, e);
        break;
    case VDEV_OP_GRU_GATES:
    case VDEV_OP_GRU_GATES_GRAD:
    case VDEV_OP_GRU_CELL_OUTPUT:
    case VDEV_OP_GRU_CELL_GRAD:
        gru_expect(c, e);
        break;
    case VDEV_OP_SELECT_MASK:
    case VDEV_OP_SELECT_MASK_GRAD:
        select_expect(c, e);
        break;
    case VDEV_OP_EQUAL:
    case VDEV_OP_NOT_EQUAL:
    case VDEV_OP_LESS:
    case VDEV_OP_LESS_EQUAL:
    case VDEV_OP_GREATER:
    case VDEV_OP_GREATER_EQUAL:
    case VDEV_OP_LOGICAL_AND:
    case VDEV_OP_LOGICAL_OR:
    case VDEV_OP_LOGICAL_NOT:
    case VDEV_OP_CAST:
    case VDEV_OP_SELECT_V2:
        compare_expect(c, e);
        break;
    case VDEV_OP_MAX:
    case VDEV_OP_MIN:
    case VDEV_OP_ABS:
    case VDEV_OP_SIGN:
    case VDEV_OP_FLOOR:
    case VDEV_OP_CEIL:
    case VDEV_OP_ROUND:
    case VDEV_OP_FLOOR_DIV:
    case VDEV_OP_FLOOR_MOD:
        extreme_expect(c, e);
        break;
    case VDEV_OP_COUNT:
        break;
    }
}


#endif
