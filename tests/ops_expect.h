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

/* 2-D convolution and pooling, from the definitions: each output pixel's
 * window walked from its top-left corner (padding before: half the padding
 * SAME needs, rounded down), the gradients scattered from each output pixel
 * back onto the elements its window read. */
struct cgeom {
    int64_t n, h, w, c, kh, kw, o, s[2], oh, ow, pt, pl;
};

static void cgeom_of(const struct tcase *c, struct cgeom *g)
{
    const struct hin *x = &c->in[0];
    int conv = c->op == VDEV_OP_CONV2D || c->op == VDEV_OP_CONV2D_BACKPROP_INPUT ||
               c->op == VDEV_OP_CONV2D_BACKPROP_FILTER;
    int same = c->p.f[0] == VDEV_PAD_SAME;
    g->n = x->shape[0], g->h = x->shape[1], g->w = x->shape[2], g->c = x->shape[3];
    g->kh = conv ? c->in[1].shape[0] : c->p.i[0];
    g->kw = conv ? c->in[1].shape[1] : c->p.i[1];
    g->o = conv ? c->in[1].shape[3] : g->c;
    g->s[0] = conv ? c->p.i[0] : c->p.i[2];
    g->s[1] = conv ? c->p.i[1] : c->p.i[3];
    int64_t in[2] = {g->h, g->w}, k[2] = {g->kh, g->kw}, out[2], pad[2];
    for (int d = 0; d < 2; d++) {
        out[d] = same ? (in[d] + g->s[d] - 1) / g->s[d] : (in[d] - k[d] + g->s[d]) / g->s[d];
        int64_t total = (out[d] - 1) * g->s[d] + k[d] - in[d];
        pad[d] = same && total > 0 ? total / 2 : 0;
    }
    g->oh = out[0], g->ow = out[1], g->pt = pad[0], g->pl = pad[1];
}

static void conv_expect(const struct tcase *c, struct texp *e)
{
    struct cgeom g;
    cgeom_of(c, &g);
    const float *x = F(c, 0);
    int64_t ysh[4] = {g.n, g.oh, g.ow, g.o};
    enum vdev_op op = c->op;
    free(e->v[0]);
    if (op == VDEV_OP_CONV2D || op == VDEV_OP_MAX_POOL || op == VDEV_OP_AVG_POOL)
        exp_out(e, 0, ysh, 4, VDEV_F32);
    else if (op == VDEV_OP_CONV2D_BACKPROP_FILTER)
        exp_out(e, 0, c->in[1].shape, 4, VDEV_F32);
    else
        exp_out(e, 0, c->in[0].shape, 4, VDEV_F32);
    double *v = e->v[0];
    const float *dy = op == VDEV_OP_AVG_POOL_GRAD ? F(c, 1) : op == VDEV_OP_CONV2D ? NULL : F(c, 2);
    const float *f = c->n_in > 1 ? F(c, 1) : NULL;
    for (int64_t b = 0; b < g.n; b++)
        for (int64_t r = 0; r < g.oh; r++)
            for (int64_t q = 0; q < g.ow; q++)
                for (int64_t oc = 0; oc < g.o; oc++) {
                    int64_t yi = ((b * g.oh + r) * g.ow + q) * g.o + oc;
                    double best = -INFINITY, sum = 0.0;
                    int64_t arg = -1, cnt = 0;
                    for (int64_t u = 0; u < g.kh; u++)
                        for (int64_t w = 0; w < g.kw; w++) {
                            int64_t i = r * g.s[0] + u - g.pt, j = q * g.s[1] + w - g.pl;
                            if (i < 0 || j < 0 || i >= g.h || j >= g.w)
                                continue;
                            int64_t xrow = ((b * g.h + i) * g.w + j) * g.c;
                            if (op == VDEV_OP_CONV2D) {
                                for (int64_t ci = 0; ci < g.c; ci++)
                                    v[yi] += (double)x[xrow + ci] *
                                             f[((u * g.kw + w) * g.c + ci) * g.o + oc];
                            } else if (op == VDEV_OP_CONV2D_BACKPROP_INPUT) {
                                for (int64_t ci = 0; ci < g.c; ci++)
                                    v[xrow + ci] += (double)dy[yi] *
                                                    f[((u * g.kw + w) * g.c + ci) * g.o + oc];
                            } else if (op == VDEV_OP_CONV2D_BACKPROP_FILTER) {
                                for (int64_t ci = 0; ci < g.c; ci++)
                                    v[((u * g.kw + w) * g.c + ci) * g.o + oc] +=
                                        (double)dy[yi] * x[xrow + ci];
                            } else {
                                double xv = x[xrow + oc];
                                if (arg < 0 || xv > best)
                                    best = xv, arg = xrow + oc;
                                sum += xv;
                                cnt++;
                            }
                        }
                    if (op == VDEV_OP_MAX_POOL)
                        v[yi] = best;
                    else if (op == VDEV_OP_AVG_POOL)
                        v[yi] = sum / (double)cnt;
                    else if (op == VDEV_OP_MAX_POOL_GRAD)
                        v[arg] += dy[yi];
                    else if (op == VDEV_OP_AVG_POOL_GRAD)
                        for (int64_t u = 0; u < g.kh; u++)
                            for (int64_t w = 0; w < g.kw; w++) {
                                int64_t i = r * g.s[0] + u - g.pt, j = q * g.s[1] + w - g.pl;
                                if (i >= 0 && j >= 0 && i < g.h && j < g.w)
                                    v[((b * g.h + i) * g.w + j) * g.c + oc] +=
                                        dy[yi] / (double)cnt;
                            }
                }
    /* sums of up to 24 products of |.| <= 1: float accumulation (sgemm, the
     * CUDA kernels) stays far inside 1e-5 */
    e->atol = 1e-5;
    e->rtol = 1e-5;
}

/* STRIDED_SLICE: each element of x is taken or not, axis by axis (a
 * multiple of the stride away from the first index, fewer than count steps);
 * a taken one goes to the slice's element of those steps, row-major. The
 * gradient puts dy's elements back there, zeros elsewhere. Exact. */
static void strided_expect(const struct tcase *c, struct texp *e)
{
    int grad = c->op == VDEV_OP_STRIDED_SLICE_GRAD;
    const struct hin *x = &c->in[grad ? 1 : 0], *dy = &c->in[0];
    int64_t cnt[VDEV_MAX_DIMS];
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        cnt[d] = d < x->ndim ? (int64_t)c->p.f[d] : 1;
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        free(e->v[k]);
    memset(e->v, 0, sizeof e->v);
    exp_out(e, 0, grad ? x->shape : cnt, x->ndim, grad ? VDEV_F32 : x->dtype);
    for (int64_t i = 0; i < x->n; i++) {
        int64_t rest = i, at = 0, scale = 1;
        int taken = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int64_t idx = rest % x->shape[d], off = idx - c->p.i[d], st = c->p.j[d];
            rest /= x->shape[d];
            int64_t q = off / st;
            taken &= off % st == 0 && q >= 0 && q < cnt[d];
            at += q * scale;
            scale *= cnt[d];
        }
        if (grad)
            e->v[0][i] = taken ? ((const float *)dy->data)[at] : 0.0;
        else if (taken)
            e->v[0][at] = x->dtype == VDEV_I32 ? (double)((const int32_t *)x->data)[i]
                                               : (double)((const float *)x->data)[i];
    }
    e->atol = 0.0;
    e->rtol = 0.0;
}

/* Input k's element i as a double (an int32 word exactly). */
static double word_at(const struct tcase *c, int k, int64_t i)
{
    return c->in[k].dtype == VDEV_I32 ? (double)I(c, k)[i] : (double)F(c, k)[i];
}

/* Flat index of multi-index idx in a row-major shape of nd dimensions. */
static int64_t flat_of(const int64_t *idx, const int64_t *shape, int nd)
{
    int64_t at = 0;
    for (int d = 0; d < nd; d++)
        at = at * shape[d] + idx[d];
    return at;
}

/* CONCAT, PACK: each output element's multi-index says where it comes
 * from: along the axis, the input whose range of it holds the index (its
 * own index the rest; PACK: the input is the index, which the input's
 * multi-index drops). Exact. */
static void join_expect(const struct tcase *c, struct texp *e)
{
    int pack = c->op == VDEV_OP_PACK, axis = (int)c->p.i[0], n = (int)c->p.i[1];
    int nd = c->in[0].ndim + pack;
    int64_t osh[VDEV_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0, s = 0; d < nd; d++)
        osh[d] = pack && d == axis ? n : c->in[0].shape[s++];
    if (!pack) {
        osh[axis] = 0;
        for (int k = 0; k < n; k++)
            osh[axis] += c->in[k].shape[axis];
    }
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        free(e->v[k]);
    memset(e->v, 0, sizeof e->v);
    exp_out(e, 0, osh, nd, c->in[0].dtype);
    for (int64_t i = 0; i < e->numel[0]; i++) {
        int64_t idx[VDEV_MAX_DIMS] = {0}, rest = i, in_idx[VDEV_MAX_DIMS] = {0};
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = rest % osh[d];
            rest /= osh[d];
        }
        int k = 0, m = 0;
        if (pack) {
            k = (int)idx[axis];
            for (int d = 0; d < nd; d++)
                if (d != axis)
                    in_idx[m++] = idx[d];
        } else {
            int64_t at = idx[axis];
            while (at >= c->in[k].shape[axis])
                at -= c->in[k++].shape[axis];
            memcpy(in_idx, idx, sizeof in_idx);
            in_idx[axis] = at;
        }
        e->v[0][i] = word_at(c, k, flat_of(in_idx, c->in[k].shape, c->in[k].ndim));
    }
    e->atol = 0.0;
    e->rtol = 0.0;
}

/* TRANSPOSE: input element idx goes to the output element whose index d
 * is idx[perm[d]] (the 2-D form: perm {1, 0}). Exact. */
static void transpose_expect(const struct tcase *c, struct texp *e)
{
    const struct hin *x = &c->in[0];
    int nd = x->ndim;
    int64_t perm[VDEV_MAX_DIMS] = {1, 0, 0, 0}, osh[VDEV_MAX_DIMS] = {1, 1, 1, 1};
    if (c->p.j[0])
        memcpy(perm, c->p.i, sizeof perm);
    for (int d = 0; d < nd; d++)
        osh[d] = x->shape[perm[d]];
    free(e->v[0]);
    exp_out(e, 0, osh, nd, x->dtype);
    for (int64_t i = 0; i < x->n; i++) {
        int64_t idx[VDEV_MAX_DIMS] = {0}, rest = i, o[VDEV_MAX_DIMS] = {0};
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = rest % x->shape[d];
            rest /= x->shape[d];
        }
        for (int d = 0; d < nd; d++)
            o[d] = idx[perm[d]];
        e->v[0][flat_of(o, osh, nd)] = word_at(c, 0, i);
    }
    e->atol = 0.0;
    e->rtol = 0.0;
}

/* Fills e with what c's op must produce, and its tolerance. */
/* GATHER: output row k (the words of params' other dimensions) is
 * params' row indices[k]. GATHER_GRAD: like's shape, zeros, then for each
 * index in order with a row of like, dy's row k added to it in float
 * (TensorFlow's CPU order and rounding); others dropped. Exact. */
static void gather_expect(const struct tcase *c, struct texp *e)
{
    int grad = c->op == VDEV_OP_GATHER_GRAD;
    const struct hin *ix = &c->in[1], *pm = &c->in[grad ? 2 : 0];
    int64_t rows = pm->shape[0], row = rows ? pm->n / rows : 0, osh[VDEV_MAX_DIMS];
    int nd = ix->ndim + pm->ndim - 1;
    for (int d = 0; d < nd; d++)
        osh[d] = d < ix->ndim ? ix->shape[d] : pm->shape[d - ix->ndim + 1];
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        free(e->v[k]);
    memset(e->v, 0, sizeof e->v);
    if (grad)
        exp_out(e, 0, pm->shape, pm->ndim, VDEV_F32);
    else
        exp_out(e, 0, osh, nd, pm->dtype);
    if (!rows) /* a row of 0 words, or no row and no index */
        row = 0;
    if (!row && !grad) { /* params [r, 0...]: nothing to take */
        e->atol = e->rtol = 0.0;
        return;
    }
    float *sum = grad ? calloc((size_t)(pm->n ? pm->n : 1), sizeof *sum) : NULL;
    for (int64_t k = 0; k < ix->n; k++) {
        int32_t at = I(c, 1)[k];
        for (int64_t j = 0; j < row; j++) {
            if (grad && at >= 0 && at < rows)
                sum[at * row + j] += F(c, 0)[k * row + j];
            else if (!grad)
                e->v[0][k * row + j] = word_at(c, 0, at * row + j);
        }
    }
    for (int64_t i = 0; grad && i < pm->n; i++)
        e->v[0][i] = sum[i];
    free(sum);
    e->atol = 0.0;
    e->rtol = 0.0;
}

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
    case VDEV_OP_MATMUL: {
        /* C[i,j] = sum_p op(A)[i,p] op(B)[p,j]; mag = sum_p |...| bounds
         * the float-accumulation error of BLAS */
        int ta = (int)c->p.i[0], tb = (int)c->p.i[1];
        int64_t m = x->shape[ta ? 1 : 0], k = x->shape[ta ? 0 : 1];
        int64_t nn = c->in[1].shape[tb ? 0 : 1];
        int64_t sh[2] = {m, nn};
        free(e->v[0]);
        exp_out(e, 0, sh, 2, VDEV_F32);
        e->mag[0] = calloc((size_t)(m * nn + 1), sizeof(double));
        const float *b = F(c, 1);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nn; j++) {
                double acc = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    double av = ta ? a[p * m + i] : a[i * k + p];
                    double bv = tb ? b[j * k + p] : b[p * nn + j];
                    acc += av * bv;
                    mag += fabs(av * bv);
                }
                e->v[0][i * nn + j] = acc;
                e->mag[0][i * nn + j] = mag;
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
        exp_out(e, 0, osh, ond, VDEV_F32);
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
        int64_t outer = 1, len = 1, inner = 1, sh[4];
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
        exp_out(e, 0, sh, nd, VDEV_F32);
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
    case VDEV_OP_COUNT:
        break;
    }
}


#endif
