/* test_ops.c — every op against a reference written here, on the cpu backend
 * and on simulated GPUs.
 *
 * For every enum vdev_op (forward ops, the ops gradients use and the in-place
 * updates) and sizes 0, 1, odd and larger (0x5, 1x1, 3x5, 17x33, 64x130, and
 * variants per op: transposes, broadcast modes, axes, keepdims, ...):
 *  1. random inputs from the test's own generator;
 *  2. the expected output from direct loops in this file (double), never from
 *     the kernel under test;
 *  3. the op through the dispatcher (vdev_op_run / vdev_op_run_inplace) on
 *     the device under test; shape, dtype and values must match within
 *     atol + rtol |expected| (NaN matches NaN);
 *  4. on a simulated GPU, the same op on CPU:0: results must be identical to
 *     the bit (the sim backend runs the same host kernels);
 *  5. the reference kernel (and the host kernel where there is one) called
 *     directly on host buffers with guard zones around every written buffer:
 *     guards untouched, every output element written, inputs unchanged.
 *
 * Tolerances (atol, rtol), by op:
 *   add sub mul div, scalars, relu, identity, transpose, reshape, broadcast,
 *   reduce_rows, relu/tanh/sigmoid grads, mse_grad, sgd, adam  0, 1e-6
 *     (one float rounding of a double result: at most 2^-24 relative)
 *   pow, tanh, sigmoid, exp, log                              1e-6, 1e-5
 *   softmax, log_softmax, their grads, sum, mean, mse, ce     1e-6, 1e-5
 *   matmul (reference kernel)                                 1e-6, 1e-6
 *   matmul (OpenBLAS host kernel)   4 k 2^-24 sum_p |a_ip b_pj| (float
 *     accumulation's error bound), plus 1e-6
 *   argmax                                                    exact
 * Plus: the meta-test of the op table, shape errors naming both shapes,
 * NULL chains keeping the first error, values with no defined answer
 * (mean of nothing, the gradient of bad labels, NaN in argmax) and BLAS vs the reference
 * for every transpose combination. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 0x7fa5a5a5u    /* output guards: a NaN payload no kernel produces */
#define SENTINEL_IN 0x7fa5a5a6u /* input guards: differ, so copying one into the other shows */
#define GUARD 64                /* guard words on each side of a buffer */
#define N_SIZES 5

/* ---- random numbers: the test's own, independent of the library ---- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* Uniform in [lo, hi), from the top 53 bits. */
static float rng_uniform(float lo, float hi)
{
    double u = (double)(rng_next() >> 11) / 9007199254740992.0;
    return (float)(lo + (hi - lo) * u);
}

/* ---- cases: an op, host inputs, parameters ---- */

/* One host input of a case: what vdev_tensor_from_host() gets. */
struct hin {
    int ndim;
    int64_t shape[VDEV_MAX_DIMS]; /* 1 beyond ndim, as kernels see shapes */
    enum vdev_dtype dtype;
    int64_t n;  /* numel */
    void *data; /* n floats or int32s (at least one word) */
};

/* A case: one op on given inputs with given parameters. */
struct tcase {
    enum vdev_op op;
    int n_in;
    struct hin in[VDEV_KERNEL_MAX_IN];
    struct vdev_op_params p; /* as the public function would pack them */
    int size, var;           /* index into SIZES; the op's variant */
    char desc[160];          /* for failure messages */
};

/* Results: one array per output (or per input of an in-place op), as raw
 * 32-bit words so that comparisons can be bit-exact. */
struct tres {
    int n;
    int ndim[VDEV_KERNEL_MAX_IN];
    int64_t shape[VDEV_KERNEL_MAX_IN][VDEV_MAX_DIMS];
    enum vdev_dtype dtype[VDEV_KERNEL_MAX_IN];
    int64_t numel[VDEV_KERNEL_MAX_IN];
    uint32_t *bits[VDEV_KERNEL_MAX_IN];
};

/* Expected values and their tolerance: atol + rtol |v| + mtol mag, where
 * mtol is chosen by the caller (it depends on the kernel: the reference
 * accumulates in double, sgemm in float). */
struct texp {
    int n;
    int ndim[VDEV_KERNEL_MAX_IN];
    int64_t shape[VDEV_KERNEL_MAX_IN][VDEV_MAX_DIMS];
    enum vdev_dtype dtype[VDEV_KERNEL_MAX_IN];
    int64_t numel[VDEV_KERNEL_MAX_IN];
    double *v[VDEV_KERNEL_MAX_IN];
    double *mag[VDEV_KERNEL_MAX_IN]; /* matmul: sum |a b| per element, else NULL */
    double atol, rtol;
};

static int64_t numel_of(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* Input k: shape and dtype, zeroed data. */
static void set_in(struct tcase *c, int k, const int64_t *shape, int ndim, enum vdev_dtype dt)
{
    struct hin *h = &c->in[k];
    h->ndim = ndim;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        h->shape[d] = d < ndim ? shape[d] : 1;
    h->dtype = dt;
    h->n = numel_of(shape, ndim);
    h->data = calloc((size_t)(h->n ? h->n : 1), 4);
    if (k >= c->n_in)
        c->n_in = k + 1;
}

/* Input k: shape, f32, uniform in [lo, hi). */
static float *in_f(struct tcase *c, int k, const int64_t *shape, int ndim, float lo, float hi)
{
    set_in(c, k, shape, ndim, VDEV_F32);
    float *p = c->in[k].data;
    for (int64_t i = 0; i < c->in[k].n; i++)
        p[i] = rng_uniform(lo, hi);
    return p;
}

/* Input k: f32 with |x| in [lo, hi) and a random sign (away from zero). */
static void in_f_signed(struct tcase *c, int k, const int64_t *shape, int ndim, float lo, float hi)
{
    float *p = in_f(c, k, shape, ndim, lo, hi);
    for (int64_t i = 0; i < c->in[k].n; i++)
        if (rng_next() & 1)
            p[i] = -p[i];
}

/* Input k: i32 labels in [0, classes). */
static void in_labels(struct tcase *c, int k, int64_t n, int64_t classes)
{
    int64_t shape[1] = {n};
    set_in(c, k, shape, 1, VDEV_I32);
    int32_t *p = c->in[k].data;
    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)(rng_next() % (uint64_t)classes);
}

/* Frees the inputs' data. */
static void case_free(struct tcase *c)
{
    for (int k = 0; k < c->n_in; k++)
        free(c->in[k].data);
    memset(c, 0, sizeof *c);
}

/* Input k's data as floats or int32s. */
static const float *F(const struct tcase *c, int k) { return c->in[k].data; }
static const int32_t *I(const struct tcase *c, int k) { return c->in[k].data; }

/* The 2-D shape of each size: 0 elements, 1, odd, larger. */
static const int64_t SIZES[N_SIZES][2] = {{0, 5}, {1, 1}, {3, 5}, {17, 33}, {64, 130}};
/* matmul (m, k, n) per size; size 0 also has k = 0 and n = 0 variants. */
static const int64_t MM[N_SIZES][3] = {{0, 3, 4}, {1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 130, 33}};
static const int64_t MM0[3][3] = {{0, 3, 4}, {3, 0, 4}, {3, 4, 0}};

/* Builds the case (op, size, var); returns 0 when that variant does not
 * exist. Sizes index SIZES (a 2-D [r, c]); variants cover each op's modes.
 * Input ranges avoid values where the op has no answer (log of a negative),
 * except where the test is about that (see test_special_values). */
static int build(enum vdev_op op, int size, int var, struct tcase *c)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->size = size;
    c->var = var;
    int64_t r = SIZES[size][0], col = SIZES[size][1];
    int64_t s2[2] = {r, col};
    snprintf(c->desc, sizeof c->desc, "%s size [%lld,%lld] variant %d", vdev_op_defs[op].name,
             (long long)r, (long long)col, var);
    switch (op) {
    case VDEV_OP_MATMUL: {
        /* var: bit 0 trans_a, bit 1 trans_b; var / 4 picks an empty dim (size 0) */
        int ta = var & 1, tb = (var >> 1) & 1, sub = var / 4;
        if ((size != 0 && sub > 0) || sub > 2)
            return 0;
        const int64_t *d = size == 0 ? MM0[sub] : MM[size];
        int64_t m = d[0], k = d[1], n = d[2];
        int64_t sa[2] = {ta ? k : m, ta ? m : k}, sb[2] = {tb ? n : k, tb ? k : n};
        /* stored shapes: a is [k,m] when transposed, b is [n,k] */
        in_f(c, 0, sa, 2, -1, 1);
        in_f(c, 1, sb, 2, -1, 1);
        c->p.i[0] = ta;
        c->p.i[1] = tb;
        snprintf(c->desc, sizeof c->desc, "MatMul m=%lld k=%lld n=%lld ta=%d tb=%d", (long long)m,
                 (long long)k, (long long)n, ta, tb);
        return 1;
    }
    case VDEV_OP_ADD:
    case VDEV_OP_SUB:
    case VDEV_OP_MUL:
    case VDEV_OP_DIV: {
        /* b: 0 same shape, 1 [n], 2 [1,n], 3 [1], 4 0-dimensional */
        static const int64_t one[2] = {1, 1};
        int64_t row1[1] = {col}, row2[2] = {1, col};
        if (var > 4)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        const int64_t *sb = var == 0 ? s2 : var == 1 ? row1 : var == 2 ? row2 : one;
        int nb = var == 0 || var == 2 ? 2 : var == 4 ? 0 : 1;
        /* the shape rule picks the broadcast mode; the test only sets shapes */
        if (op == VDEV_OP_DIV)
            in_f_signed(c, 1, sb, nb, 0.5f, 2.0f);
        else
            in_f(c, 1, sb, nb, -2, 2);
        return 1;
    }
    case VDEV_OP_ADD_SCALAR:
    case VDEV_OP_MUL_SCALAR:
    case VDEV_OP_RELU:
    case VDEV_OP_TANH:
    case VDEV_OP_IDENTITY: {
        /* var 1: a 0-dimensional tensor; var 2: 4-D; identity var 3: i32
         * (any bit pattern: identity must copy words, not convert values) */
        if (var > 3 || (var == 1 && size != 1) || (var == 3 && op != VDEV_OP_IDENTITY))
            return 0;
        int64_t s4[4] = {2, r, 1, col};
        if (var == 3) {
            set_in(c, 0, s2, 2, VDEV_I32);
            int32_t *p = c->in[0].data;
            for (int64_t i = 0; i < c->in[0].n; i++)
                p[i] = (int32_t)(rng_next() & 0xffffffffu);
        } else {
            in_f(c, 0, var == 2 ? s4 : s2, var == 1 ? 0 : var == 2 ? 4 : 2, -3, 3);
        }
        c->p.f[0] = op == VDEV_OP_ADD_SCALAR ? 0.75 : -1.5;
        return 1;
    }
    case VDEV_OP_POW_SCALAR: {
        /* positive bases: a negative base with p = 0.5 has no real power */
        static const float pw[5] = {2.0f, 3.0f, 0.5f, -1.5f, 0.0f};
        if (var > 4)
            return 0;
        in_f(c, 0, s2, 2, 0.1f, 3.0f);
        c->p.f[0] = pw[var];
        return 1;
    }
    case VDEV_OP_SIGMOID:
    case VDEV_OP_EXP:
    case VDEV_OP_LOG:
        /* sigmoid over [-40, 40] takes both branches of the stable form and
         * saturates; exp stays far from overflow; log takes positives */
        if (var > 0)
            return 0;
        if (op == VDEV_OP_LOG)
            in_f(c, 0, s2, 2, 0.01f, 10.0f);
        else
            in_f(c, 0, s2, 2, op == VDEV_OP_EXP ? -5.0f : -40.0f, op == VDEV_OP_EXP ? 5.0f : 40.0f);
        return 1;
    case VDEV_OP_SOFTMAX:
    case VDEV_OP_LOG_SOFTMAX:
    case VDEV_OP_ARGMAX: {
        /* var 0: 2-D; 1: large values (1000 +-, overflow without the max);
         * 2: 1-D; 3: 3-D; argmax var 4: ties (values in {0, 1, 2}) */
        if (var > 4 || (var == 4 && op != VDEV_OP_ARGMAX))
            return 0;
        int64_t s1[1] = {col}, s3[3] = {2, r, col};
        const int64_t *sh = var == 2 ? s1 : var == 3 ? s3 : s2;
        int nd = var == 2 ? 1 : var == 3 ? 3 : 2;
        float *p = in_f(c, 0, sh, nd, -10, 10);
        for (int64_t i = 0; i < c->in[0].n; i++) {
            if (var == 1)
                p[i] += 1000.0f;
            if (var == 4)
                p[i] = (float)(rng_next() % 3);
        }
        return 1;
    }
    case VDEV_OP_SUM:
    case VDEV_OP_MEAN: {
        /* var 0..5: axis {0, -1, ALL} x keepdims; 6, 7: 3-D, axis 1 */
        static const int axes[3] = {0, -1, VDEV_AXIS_ALL};
        if (var > 7)
            return 0;
        int64_t s3[3] = {2, r, col};
        if (var < 6) {
            in_f(c, 0, s2, 2, -2, 2);
            c->p.i[0] = axes[var / 2];
            c->p.i[1] = var & 1;
        } else {
            in_f(c, 0, s3, 3, -2, 2);
            c->p.i[0] = 1;
            c->p.i[1] = var & 1;
        }
        return 1;
    }
    case VDEV_OP_RESHAPE: {
        /* var 0: [c, r]; 1: [-1]; 2: [r, 1, c, 1]; 3: [] from [1,1] */
        if (var > 3 || (var == 3 && size != 1))
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        int64_t ns[4] = {0};
        int nd = 0;
        if (var == 0) {
            ns[0] = col;
            ns[1] = r;
            nd = 2;
        } else if (var == 1) {
            ns[0] = -1;
            nd = 1;
        } else if (var == 2) {
            ns[0] = r;
            ns[1] = 1;
            ns[2] = col;
            ns[3] = 1;
            nd = 4;
        }
        c->p.f[0] = nd;
        for (int d = 0; d < nd; d++)
            c->p.i[d] = ns[d];
        return 1;
    }
    case VDEV_OP_TRANSPOSE:
        /* var 1: i32 (transpose moves words, any dtype) */
        if (var > 1)
            return 0;
        if (var == 1) {
            set_in(c, 0, s2, 2, VDEV_I32);
            int32_t *p = c->in[0].data;
            for (int64_t i = 0; i < c->in[0].n; i++)
                p[i] = (int32_t)rng_next();
        } else {
            in_f(c, 0, s2, 2, -2, 2);
        }
        return 1;
    case VDEV_OP_MSE:
        if (var > 0)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        in_f(c, 1, s2, 2, -2, 2);
        return 1;
    case VDEV_OP_SOFTMAX_CE:
        /* var 1: logits near 1000, where exp() without the max overflows;
         * size 0 has no rows: the mean over them is NaN */
        if (var > 1)
            return 0;
        in_f(c, 0, s2, 2, var ? 990.0f : -5.0f, var ? 1010.0f : 5.0f);
        in_labels(c, 1, r, col);
        return 1;
    case VDEV_OP_RELU_GRAD:
    case VDEV_OP_TANH_GRAD:
    case VDEV_OP_SIGMOID_GRAD:
    case VDEV_OP_SOFTMAX_GRAD:
    case VDEV_OP_LOG_SOFTMAX_GRAD: {
        /* (dy, y): y in the range of the forward op's output (tanh in
         * [-1, 1], sigmoid and softmax in [0, 1], log_softmax <= 0) */
        if (var > 0)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        float lo = op == VDEV_OP_SIGMOID_GRAD || op == VDEV_OP_SOFTMAX_GRAD ? 0.0f
                   : op == VDEV_OP_LOG_SOFTMAX_GRAD                         ? -6.0f
                   : op == VDEV_OP_TANH_GRAD                                ? -1.0f
                                                                            : -2.0f;
        float hi = op == VDEV_OP_RELU_GRAD ? 2.0f : op == VDEV_OP_LOG_SOFTMAX_GRAD ? 0.0f : 1.0f;
        in_f(c, 1, s2, 2, lo, hi);
        return 1;
    }
    case VDEV_OP_BROADCAST: {
        /* like [r,c] (3-D for var 6, 7); x = like reduced: var 0..5 axis
         * {0, -1, ALL} x keepdims */
        static const int axes[3] = {0, -1, VDEV_AXIS_ALL};
        if (var > 7)
            return 0;
        int64_t s3[3] = {2, r, col};
        int nd = var < 6 ? 2 : 3;
        int64_t lk[3];
        memcpy(lk, var < 6 ? s2 : s3, sizeof(int64_t) * (size_t)nd);
        int ax = var < 6 ? axes[var / 2] : 1, keep = var & 1;
        /* x's shape: like's without the axis, or with it as 1 */
        int64_t xs[3];
        int xn = 0;
        for (int d = 0; d < nd; d++) {
            int red = ax == VDEV_AXIS_ALL || d == (ax < 0 ? ax + nd : ax);
            if (!red)
                xs[xn++] = lk[d];
            else if (keep)
                xs[xn++] = 1;
        }
        in_f(c, 0, xs, xn, -2, 2);
        in_f(c, 1, lk, nd, -2, 2);
        c->p.i[0] = ax;
        return 1;
    }
    case VDEV_OP_MSE_GRAD: {
        /* var 0: dy 0-dimensional; 1: dy [1] */
        static const int64_t one[1] = {1};
        if (var > 1)
            return 0;
        in_f(c, 0, one, var, -2, 2);
        in_f(c, 1, s2, 2, -2, 2);
        in_f(c, 2, s2, 2, -2, 2);
        return 1;
    }
    case VDEV_OP_SOFTMAX_CE_GRAD:
        /* (dy 0-dimensional, logits, labels) */
        if (var > 0)
            return 0;
        in_f(c, 0, NULL, 0, 0.5f, 2);
        in_f(c, 1, s2, 2, -5, 5);
        in_labels(c, 2, r, col);
        return 1;
    case VDEV_OP_REDUCE_ROWS: {
        /* like: 0 same shape, 1 [c], 2 [1,c], 3 [1], 4 0-dimensional */
        static const int64_t one[2] = {1, 1};
        int64_t row1[1] = {col}, row2[2] = {1, col};
        if (var > 4)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        const int64_t *sb = var == 0 ? s2 : var == 1 ? row1 : var == 2 ? row2 : one;
        in_f(c, 1, sb, var == 0 || var == 2 ? 2 : var == 4 ? 0 : 1, -2, 2);
        return 1;
    }
    case VDEV_OP_SGD_UPDATE:
        /* var 0: momentum 0; 1: momentum 0.9 */
        if (var > 1)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        in_f(c, 1, s2, 2, -1, 1);
        in_f(c, 2, s2, 2, -0.5f, 0.5f);
        c->p.f[0] = 0.1f;
        c->p.f[1] = var ? 0.9f : 0.0f;
        return 1;
    case VDEV_OP_ADAM_UPDATE:
        /* (var, grad, m, v >= 0) with TensorFlow's default betas */
        if (var > 0)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        in_f(c, 1, s2, 2, -1, 1);
        in_f(c, 2, s2, 2, -0.5f, 0.5f);
        in_f(c, 3, s2, 2, 0.0f, 0.5f);
        c->p.f[0] = 0.01;
        c->p.f[1] = 0.9;
        c->p.f[2] = 0.999;
        c->p.f[3] = 1e-7;
        return 1;
    case VDEV_OP_COUNT:
        break;
    }
    return 0;
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

/* Fills e with what c's op must produce, and its tolerance. */
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
    case VDEV_OP_DIV: {
        /* b's element by the variant: same shape, row (i mod cols), one */
        const float *b = F(c, 1);
        for (int64_t i = 0; i < n; i++) {
            double bv = c->var == 0 ? b[i] : c->var <= 2 ? b[i % cols] : b[0];
            o[i] = c->op == VDEV_OP_ADD   ? a[i] + bv
                   : c->op == VDEV_OP_SUB ? a[i] - bv
                   : c->op == VDEV_OP_MUL ? a[i] * bv
                                          : a[i] / bv;
        }
        break;
    }
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
    case VDEV_OP_TRANSPOSE: {
        int64_t m = x->shape[0], nn = x->shape[1], sh[2] = {nn, m};
        free(e->v[0]);
        exp_out(e, 0, sh, 2, x->dtype);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nn; j++)
                e->v[0][j * m + i] = x->dtype == VDEV_I32 ? I(c, 0)[i * nn + j] : a[i * nn + j];
        break;
    }
    case VDEV_OP_MSE: {
        free(e->v[0]);
        exp_out(e, 0, NULL, 0, VDEV_F32);
        double acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += ((double)a[i] - F(c, 1)[i]) * ((double)a[i] - F(c, 1)[i]);
        e->v[0][0] = acc / (double)n; /* NaN for no elements */
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
        e->v[0][0] = acc / (double)rows; /* NaN for no rows */
        e->atol = 1e-6;
        e->rtol = 1e-5;
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
            int64_t j = c->var == 0 ? i : c->var <= 2 ? i % cols : 0;
            e->v[0][j] += a[i];
            e->mag[0][j] += fabs(a[i]);
        }
        e->atol = 1e-6;
        e->rtol = 1e-6;
        break;
    }
    case VDEV_OP_SGD_UPDATE: {
        /* velocity and var are stored as float after each step */
        for (int k = 0; k < 3; k++)
            exp_out(e, k, x->shape, x->ndim, VDEV_F32);
        double lr = c->p.f[0], mom = c->p.f[1];
        for (int64_t i = 0; i < n; i++) {
            float vel = (float)(mom * F(c, 2)[i] - lr * F(c, 1)[i]);
            e->v[2][i] = vel;
            e->v[0][i] = (double)a[i] + vel;
            e->v[1][i] = F(c, 1)[i];
        }
        e->atol = 1e-7;
        break;
    }
    case VDEV_OP_ADAM_UPDATE: {
        /* m and v stored as float, then var -= lr_t m / (sqrt(v) + eps) */
        for (int k = 0; k < 4; k++)
            exp_out(e, k, x->shape, x->ndim, VDEV_F32);
        e->mag[0] = calloc((size_t)(n + 1), sizeof(double));
        e->mag[2] = calloc((size_t)(n + 1), sizeof(double));
        e->mag[3] = calloc((size_t)(n + 1), sizeof(double));
        double lr = c->p.f[0], b1 = c->p.f[1], b2 = c->p.f[2], eps = c->p.f[3];
        for (int64_t i = 0; i < n; i++) {
            double g = F(c, 1)[i];
            float m = (float)(b1 * F(c, 2)[i] + (1 - b1) * g);
            float v = (float)(b2 * F(c, 3)[i] + (1 - b2) * g * g);
            e->v[0][i] = a[i] - lr * m / (sqrt(v) + eps);
            e->v[1][i] = g;
            e->v[2][i] = m;
            e->v[3][i] = v;
            /* the host kernel computes in float: ulps of each term, with m's
             * and v's own terms taken apart (they may cancel) */
            double sv = sqrt(v) + eps;
            e->mag[0][i] = fabs(a[i]) + lr * (fabs(b1 * F(c, 2)[i]) + fabs((1 - b1) * g)) / sv +
                           lr * fabs(m) * (fabs(b2 * F(c, 3)[i]) + fabs((1 - b2) * g * g)) /
                               (sv * sv * (sqrt(v) + 1e-30));
            e->mag[2][i] = fabs(b1 * F(c, 2)[i]) + fabs((1 - b1) * g);
            e->mag[3][i] = fabs(b2 * F(c, 3)[i]) + fabs((1 - b2) * g * g);
        }
        e->atol = 1e-7;
        break;
    }
    case VDEV_OP_COUNT:
        break;
    }
}

/* ---- comparisons ---- */

/* Element i of a result as a double. */
static double value_of(const uint32_t *bits, int64_t i, enum vdev_dtype dt)
{
    if (dt == VDEV_I32) {
        int32_t v;
        memcpy(&v, &bits[i], 4);
        return v;
    }
    float f;
    memcpy(&f, &bits[i], 4);
    return f;
}

/* Output k of `r` against the expectation; mtol scales the matmul bound.
 * Returns 1 when everything matched (one CHECK per output). Reports the
 * first bad element only, so a broken kernel does not flood the log. */
static int compare(const char *what, const struct tcase *c, const struct tres *r, int k,
                   const struct texp *e, double mtol)
{
    char got_s[96], exp_s[96];
    int ok = r->ndim[k] == e->ndim[k] && r->dtype[k] == e->dtype[k] &&
             !memcmp(r->shape[k], e->shape[k], sizeof r->shape[k]);
    if (!ok) {
        check_fail(__FILE__, __LINE__, "%s %s output %d: shape %s dtype %d, expected %s dtype %d",
                   what, c->desc, k, vdev_shape_str(r->shape[k], r->ndim[k], got_s, sizeof got_s),
                   r->dtype[k], vdev_shape_str(e->shape[k], e->ndim[k], exp_s, sizeof exp_s),
                   e->dtype[k]);
        return 0;
    }
    /* values: a NaN must meet a NaN; anything else the tolerance */
    for (int64_t i = 0; i < e->numel[k]; i++) {
        double got = value_of(r->bits[k], i, r->dtype[k]), want = e->v[k][i];
        if (isnan(want) && isnan(got))
            continue;
        double tol = e->atol + e->rtol * fabs(want) + (e->mag[k] ? mtol * e->mag[k][i] : 0.0);
        if (!(fabs(got - want) <= tol)) {
            check_fail(__FILE__, __LINE__,
                       "%s %s output %d element %lld: %.9g, expected %.9g "
                       "(tolerance %.3g)",
                       what, c->desc, k, (long long)i, got, want, tol);
            return 0;
        }
    }
    check_passed++;
    return 1;
}

/* Frees a result's arrays. */
static void res_free(struct tres *r)
{
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        free(r->bits[k]);
    memset(r, 0, sizeof *r);
}

/* Copies tensor t into result slot k: shape, dtype and words (to_host
 * waits for the device's stream). */
static void res_take(struct tres *r, int k, const vdev_tensor_t *t)
{
    r->ndim[k] = vdev_tensor_ndim(t);
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        r->shape[k][d] = d < r->ndim[k] ? vdev_tensor_dim(t, d) : 1;
    r->dtype[k] = vdev_tensor_dtype(t);
    r->numel[k] = vdev_tensor_numel(t);
    r->bits[k] = calloc((size_t)(r->numel[k] + 1), 4);
    CHECK_OK(vdev_tensor_to_host(t, r->bits[k], (size_t)r->numel[k] * 4));
    if (k >= r->n)
        r->n = k + 1;
}

/* Runs the case through the dispatcher on `dev`; 0 on failure. The inputs
 * are made under the device scope, so the op runs there; the output must be
 * on the same device. In-place ops return their (updated) inputs. */
static int run_on(const char *dev, const struct tcase *c, struct tres *r)
{
    memset(r, 0, sizeof *r);
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *t[VDEV_KERNEL_MAX_IN] = {0};
    int ok = 1;
    for (int k = 0; k < c->n_in; k++) {
        const struct hin *h = &c->in[k];
        t[k] = vdev_tensor_from_host(h->data, h->shape, h->ndim, h->dtype);
        ok = ok && t[k];
    }
    if (ok && (vdev_op_defs[c->op].flags & VDEV_OP_INPLACE)) {
        enum vdev_status st = vdev_op_run_inplace(c->op, t, c->n_in, &c->p);
        if (st != VDEV_OK) {
            check_fail(__FILE__, __LINE__, "%s on %s: %s", c->desc, dev, vdev_last_error());
            ok = 0;
        }
        for (int k = 0; ok && k < c->n_in; k++)
            res_take(r, k, t[k]);
    } else if (ok) {
        const vdev_tensor_t *in[VDEV_KERNEL_MAX_IN] = {t[0], t[1], t[2], t[3]};
        vdev_tensor_t *out = vdev_op_run(c->op, in, c->n_in, &c->p);
        if (!out) {
            check_fail(__FILE__, __LINE__, "%s on %s: %s", c->desc, dev, vdev_last_error());
            ok = 0;
        } else {
            CHECK_STR(vdev_tensor_device(out), vdev_tensor_device(t[0]));
            res_take(r, 0, out);
        }
    }
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
    return ok;
}

/* Two results identical to the bit: the sim GPU runs the same host kernels
 * as the cpu backend, on another thread, so nothing may differ. */
static void same_bits(const char *what, const struct tcase *c, const struct tres *x,
                      const struct tres *y)
{
    int ok = x->n == y->n;
    for (int k = 0; ok && k < x->n; k++)
        ok = x->numel[k] == y->numel[k] && x->ndim[k] == y->ndim[k] &&
             !memcmp(x->bits[k], y->bits[k], (size_t)x->numel[k] * 4);
    if (ok)
        check_passed++;
    else
        check_fail(__FILE__, __LINE__, "%s: %s differs", what, c->desc);
}

/* ---- kernels called directly, with guard zones ----
 *
 * The allocator rounds blocks to 256 bytes, so a kernel writing past its
 * output through the dispatcher would go unseen. Here every buffer a kernel
 * may write sits between GUARD words of a sentinel, and every output word
 * starts as the sentinel: afterwards the guards must be intact and no
 * output word may still be the sentinel. */

/* A buffer of n words with guards on both sides. */
struct gbuf {
    uint32_t *mem;
    int64_t n;
    uint32_t sentinel;
};

static uint32_t *gbuf_new(struct gbuf *g, int64_t n, uint32_t sentinel)
{
    g->n = n;
    g->sentinel = sentinel;
    g->mem = malloc((size_t)(n + 2 * GUARD) * 4);
    for (int64_t i = 0; i < n + 2 * GUARD; i++)
        g->mem[i] = sentinel;
    return g->mem + GUARD;
}

/* Guards intact; `all_written`: no element still holds the sentinel (an
 * element the kernel skipped). */
static int gbuf_ok(const struct gbuf *g, int all_written)
{
    for (int64_t i = 0; i < GUARD; i++)
        if (g->mem[i] != g->sentinel || g->mem[GUARD + g->n + i] != g->sentinel)
            return 0;
    for (int64_t i = 0; all_written && i < g->n; i++)
        if (g->mem[GUARD + i] == g->sentinel)
            return 0;
    return 1;
}

/* Runs kernel fn on host buffers with guards; fills r with its outputs. */
static void run_kernel_direct(const char *what, vdev_kernel_fn fn, const struct tcase *c,
                              struct tres *r)
{
    const struct vdev_op_def *def = &vdev_op_defs[c->op];
    struct vdev_kernel_args a;
    memset(&a, 0, sizeof a);
    memset(r, 0, sizeof *r);
    a.op = (int)c->op;
    a.n_in = c->n_in;
    struct gbuf g[VDEV_KERNEL_MAX_IN];
    uint32_t *copy[VDEV_KERNEL_MAX_IN];
    for (int k = 0; k < c->n_in; k++) {
        const struct hin *h = &c->in[k];
        /* inputs in guarded copies too: in place they are the outputs */
        copy[k] = gbuf_new(&g[k], h->n, SENTINEL_IN);
        memcpy(copy[k], h->data, (size_t)h->n * 4);
        a.in[k] = copy[k];
        a.in_ndim[k] = h->ndim;
        a.in_dtype[k] = (int)h->dtype;
        memcpy(a.in_shape[k], h->shape, sizeof a.in_shape[k]);
    }
    memcpy(a.f, c->p.f, sizeof a.f);
    memcpy(a.i, c->p.i, sizeof a.i);
    /* the shape rule fills the output's shape and normalises parameters,
     * exactly as the dispatcher would */
    enum vdev_status st = def->shape(&a);
    if (st != VDEV_OK) {
        check_fail(__FILE__, __LINE__, "%s: shape rule of %s: %s", what, c->desc,
                   vdev_last_error());
        for (int k = 0; k < c->n_in; k++)
            free(g[k].mem);
        return;
    }
    int inplace = (def->flags & VDEV_OP_INPLACE) != 0;
    struct gbuf go = {NULL, 0, SENTINEL};
    if (inplace) {
        CHECK(a.n_out == 0);
        for (int k = 0; k < c->n_in; k++)
            a.out[k] = copy[k];
    } else {
        CHECK(a.n_out == 1);
        a.out[0] = gbuf_new(&go, numel_of(a.out_shape[0], a.out_ndim[0]), SENTINEL);
    }
    /* unlike the dispatcher, call the kernel even for empty outputs: it must
     * then write nothing */
    fn(&a);
    /* every guard intact; inputs of a non-in-place op unchanged */
    int ok = 1;
    for (int k = 0; k < c->n_in; k++)
        ok = ok && gbuf_ok(&g[k], 0) &&
             (inplace || !memcmp(copy[k], c->in[k].data, (size_t)c->in[k].n * 4));
    if (!inplace)
        ok = ok && gbuf_ok(&go, 1);
    if (ok)
        check_passed++;
    else
        check_fail(__FILE__, __LINE__, "%s: %s wrote outside its output or skipped an element",
                   what, c->desc);
    /* collect the outputs */
    int nres = inplace ? c->n_in : 1;
    r->n = nres;
    for (int k = 0; k < nres; k++) {
        int64_t nel = inplace ? c->in[k].n : go.n;
        r->ndim[k] = inplace ? c->in[k].ndim : a.out_ndim[0];
        memcpy(r->shape[k], inplace ? c->in[k].shape : a.out_shape[0], sizeof r->shape[k]);
        r->dtype[k] = inplace ? c->in[k].dtype : (enum vdev_dtype)a.out_dtype[0];
        r->numel[k] = nel;
        r->bits[k] = calloc((size_t)(nel + 1), 4);
        memcpy(r->bits[k], inplace ? copy[k] : go.mem + GUARD, (size_t)nel * 4);
    }
    for (int k = 0; k < c->n_in; k++)
        free(g[k].mem);
    free(go.mem);
}

/* ---- the sweep over every op, size and variant ---- */

/* Every case on `dev`; on a GPU also on CPU:0, bit for bit. `direct`: also
 * run the kernels on host buffers (once per case is enough). An op with no
 * case at all fails: a new op must come with its test. */
static void sweep(const char *dev, int vs_cpu, int direct)
{
    int n_cases = 0;
    for (int op = 0; op < VDEV_OP_COUNT; op++) {
        int op_cases = 0;
        for (int size = 0; size < N_SIZES; size++)
            for (int var = 0; var < 16; var++) {
                struct tcase c;
                if (!build((enum vdev_op)op, size, var, &c)) {
                    case_free(&c);
                    continue;
                }
                op_cases++;
                /* the expectation first, from the host inputs alone */
                struct texp e;
                expect(&c, &e);
                /* Host kernels that accumulate or compute in float: BLAS, k ulps
                 * of sum |a b|; the row sum, rows ulps of sum |dy| (mag, set by expect()). */
                double mm_k = 0.0;
                if (op == VDEV_OP_MATMUL)
                    mm_k = (double)c.in[0].shape[c.p.i[0] ? 0 : 1];
                else if (op == VDEV_OP_REDUCE_ROWS && e.numel[0])
                    mm_k = (double)c.in[0].n / (double)e.numel[0];
                else if (op == VDEV_OP_ADAM_UPDATE)
                    mm_k = 4.0; /* float Adam: 16 ulps of the terms (mag) */
                double mtol_host = 4.0 * mm_k * ldexp(1.0, -24);
                /* through the dispatcher on dev (and on CPU:0 to compare) */
                struct tres r;
                if (run_on(dev, &c, &r)) {
                    for (int k = 0; k < e.n; k++)
                        compare(dev, &c, &r, k, &e, mtol_host);
                    if (vs_cpu) {
                        struct tres rc;
                        if (run_on("CPU:0", &c, &rc))
                            same_bits("GPU vs CPU", &c, &r, &rc);
                        res_free(&rc);
                    }
                }
                res_free(&r);
                const struct vdev_op_def *def = &vdev_op_defs[op];
                if (direct && !(def->flags & VDEV_OP_VIEW)) {
                    struct tres rd;
                    run_kernel_direct("reference kernel", def->ref, &c, &rd);
                    for (int k = 0; k < rd.n && k < e.n; k++)
                        compare("reference kernel", &c, &rd, k, &e, 1e-12);
                    res_free(&rd);
                    if (def->host) {
                        run_kernel_direct("host kernel", def->host, &c, &rd);
                        for (int k = 0; k < rd.n && k < e.n; k++)
                            compare("host kernel", &c, &rd, k, &e, mtol_host);
                        res_free(&rd);
                    }
                }
                exp_free(&e);
                case_free(&c);
            }
        if (op_cases == 0)
            check_fail(__FILE__, __LINE__, "no test case for op %s", vdev_op_defs[op].name);
        n_cases += op_cases;
    }
    printf("%s: %d cases\n", dev, n_cases);
}

/* ---- the op table ---- */

/* Every row: a name (unique), a shape rule, a reference kernel, a sane input
 * count, and a gradient unless flagged VDEV_OP_NO_GRAD; in-place ops are
 * never differentiated. */
static void test_meta(void)
{
    for (int op = 0; op < VDEV_OP_COUNT; op++) {
        const struct vdev_op_def *d = &vdev_op_defs[op];
        if (!d->name || !d->name[0] || !d->shape || !d->ref || d->n_in < 1 ||
            d->n_in > VDEV_KERNEL_MAX_IN)
            check_fail(__FILE__, __LINE__,
                       "op %d (%s) lacks a name, shape rule, reference "
                       "kernel or input count",
                       op, d->name ? d->name : "?");
        else if (!d->grad && !(d->flags & VDEV_OP_NO_GRAD))
            check_fail(__FILE__, __LINE__, "op %s has no gradient and no VDEV_OP_NO_GRAD", d->name);
        else if ((d->flags & VDEV_OP_INPLACE) && !(d->flags & VDEV_OP_NO_GRAD))
            check_fail(__FILE__, __LINE__, "in-place op %s must be VDEV_OP_NO_GRAD", d->name);
        else
            check_passed++;
        for (int o = 0; o < op; o++)
            if (d->name && vdev_op_defs[o].name && !strcmp(d->name, vdev_op_defs[o].name))
                check_fail(__FILE__, __LINE__, "ops %d and %d share the name %s", o, op, d->name);
    }
}

/* ---- BLAS against the reference and a triple loop, on host buffers ---- */

/* vdev_host_matmul (sgemm) and vdev_ref_matmul on host buffers against a
 * triple loop here, for every transpose combination and shapes with 1s, odd
 * sizes and empty dimensions (k = 0 must give zeros, not leave memory). */
static void test_host_matmul(void)
{
    static const int64_t dims[][3] = {{1, 1, 1},    {2, 3, 4}, {7, 1, 5}, {5, 9, 1}, {31, 17, 23},
                                      {64, 65, 66}, {3, 0, 4}, {0, 3, 4}, {3, 4, 0}};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++)
        for (int combo = 0; combo < 4; combo++) {
            int ta = combo & 1, tb = combo >> 1;
            int64_t m = dims[t][0], k = dims[t][1], n = dims[t][2];
            float *A = malloc((size_t)(m * k + 1) * 4), *B = malloc((size_t)(k * n + 1) * 4);
            float *cb = malloc((size_t)(m * n + 1) * 4), *cr = malloc((size_t)(m * n + 1) * 4);
            for (int64_t i = 0; i < m * k; i++)
                A[i] = rng_uniform(-1, 1);
            for (int64_t i = 0; i < k * n; i++)
                B[i] = rng_uniform(-1, 1);
            for (int64_t i = 0; i < m * n; i++)
                cb[i] = cr[i] = NAN; /* must be overwritten, also for k = 0 */
            struct vdev_kernel_args a;
            memset(&a, 0, sizeof a);
            a.op = VDEV_OP_MATMUL;
            a.n_in = 2;
            a.in[0] = A;
            a.in[1] = B;
            a.in_ndim[0] = a.in_ndim[1] = 2;
            a.in_shape[0][0] = ta ? k : m;
            a.in_shape[0][1] = ta ? m : k;
            a.in_shape[1][0] = tb ? n : k;
            a.in_shape[1][1] = tb ? k : n;
            a.in_shape[0][2] = a.in_shape[0][3] = a.in_shape[1][2] = a.in_shape[1][3] = 1;
            a.i[0] = ta;
            a.i[1] = tb;
            CHECK_OK(vdev_shape_matmul(&a));
            CHECK(a.out_shape[0][0] == m && a.out_shape[0][1] == n);
            a.out[0] = cb;
            vdev_host_matmul(&a);
            a.out[0] = cr;
            vdev_ref_matmul(&a);
            int ok = 1;
            for (int64_t i = 0; i < m && ok; i++)
                for (int64_t j = 0; j < n && ok; j++) {
                    double acc = 0, mag = 0;
                    for (int64_t p = 0; p < k; p++) {
                        double av = ta ? A[p * m + i] : A[i * k + p];
                        double bv = tb ? B[j * k + p] : B[p * n + j];
                        acc += av * bv;
                        mag += fabs(av * bv);
                    }
                    double tol_blas = 1e-7 + 4.0 * (double)k * ldexp(1.0, -24) * mag;
                    double tol_ref = 1e-7 + 1e-6 * fabs(acc);
                    ok = fabs(cb[i * n + j] - acc) <= tol_blas &&
                         fabs(cr[i * n + j] - acc) <= tol_ref &&
                         fabs(cb[i * n + j] - cr[i * n + j]) <= tol_blas + tol_ref;
                    if (!ok)
                        check_fail(__FILE__, __LINE__,
                                   "matmul m=%lld k=%lld n=%lld ta=%d tb=%d "
                                   "[%lld,%lld]: blas %.9g ref %.9g loop %.9g",
                                   (long long)m, (long long)k, (long long)n, ta, tb, (long long)i,
                                   (long long)j, cb[i * n + j], cr[i * n + j], acc);
                }
            if (ok)
                check_passed++;
            free(A);
            free(B);
            free(cb);
            free(cr);
        }
}

/* ---- errors ---- */

/* A 2-D f32 zeros tensor on the current device. */
static vdev_tensor_t *zeros2(int64_t r, int64_t c)
{
    int64_t s[2] = {r, c};
    return vdev_tensor_zeros(s, 2, VDEV_F32);
}

/* Shape errors are VDEV_ERR_SHAPE naming the op and both shapes, for public
 * and internal ops; a NULL input gives NULL and keeps the first error. */
static void test_shape_errors(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *a34 = zeros2(3, 4), *b56 = zeros2(5, 6), *b45 = zeros2(4, 5);
    int64_t s3[3] = {2, 3, 4}, s5[1] = {5}, s0[2] = {5, 0};
    vdev_tensor_t *t3 = vdev_tensor_zeros(s3, 3, VDEV_F32);
    vdev_tensor_t *lab5 = vdev_tensor_zeros(s5, 1, VDEV_I32);

    vdev_clear_error();
    CHECK(vdev_matmul(a34, b56, false, false) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_MSG("MatMul");
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5,6]");
    CHECK(vdev_matmul(a34, b45, false, false) != NULL);
    CHECK(vdev_matmul(a34, b45, true, false) == NULL);
    CHECK_MSG("[4,5]");
    CHECK(vdev_matmul(t3, b45, false, false) == NULL);
    CHECK_MSG("[2,3,4]");

    static const char *names[4] = {"AddV2", "Sub", "Mul", "RealDiv"};
    vdev_tensor_t *(*bin[4])(const vdev_tensor_t *, const vdev_tensor_t *) = {vdev_add, vdev_sub,
                                                                              vdev_mul, vdev_div};
    for (int i = 0; i < 4; i++) {
        vdev_clear_error();
        CHECK(bin[i](a34, b56) == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
        CHECK_MSG(names[i]);
        CHECK_MSG("[3,4]");
        CHECK_MSG("[5,6]");
    }
    CHECK(vdev_add(a34, lab5) == NULL); /* i32 into a float op */
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);

    int64_t ns[2] = {5, 6}, bad[2] = {-1, -1}, inf[2] = {-1, 5};
    CHECK(vdev_reshape(a34, ns, 2) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5,6]");
    CHECK(vdev_reshape(a34, bad, 2) == NULL);
    CHECK_MSG("[-1,-1]");
    CHECK(vdev_reshape(a34, inf, 2) == NULL);
    CHECK_MSG("[-1,5]");
    CHECK(vdev_reshape(a34, ns, 5) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);

    CHECK(vdev_transpose(t3) == NULL);
    CHECK_MSG("[2,3,4]");
    CHECK(vdev_mse(a34, b56) == NULL);
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5,6]");
    CHECK(vdev_softmax_cross_entropy(a34, lab5) == NULL);
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5]");
    CHECK(vdev_softmax_cross_entropy(a34, a34) == NULL); /* float labels */
    CHECK_MSG("int32");
    vdev_clear_error();
    CHECK(vdev_sum(a34, 2, false) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_MSG("axis 2");
    CHECK_MSG("[3,4]");
    CHECK(vdev_mean(a34, -3, true) == NULL);
    CHECK_MSG("axis -3");
    CHECK(vdev_sum(a34, -2, false) != NULL);
    CHECK(vdev_argmax(zeros2(5, 0)) == NULL);
    CHECK_MSG("[5,0]");
    CHECK(vdev_tensor_zeros(s0, 2, VDEV_F32) != NULL);

    /* internal ops: BROADCAST, REDUCE_ROWS, MSE_GRAD, updates; the error of
     * a 3-input op names the two inputs that disagree */
    const vdev_tensor_t *bc[2] = {b45, a34};
    struct vdev_op_params p = {.i = {0}};
    CHECK(vdev_op_run(VDEV_OP_BROADCAST, bc, 2, &p) == NULL);
    CHECK_MSG("[4,5]");
    CHECK_MSG("[3,4]");
    int64_t s2v[1] = {2};
    const vdev_tensor_t *bca[2] = {vdev_tensor_zeros(s2v, 1, VDEV_F32), a34};
    p.i[0] = VDEV_AXIS_ALL; /* over everything: x must have one element */
    CHECK(vdev_op_run(VDEV_OP_BROADCAST, bca, 2, &p) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_MSG("[2]");
    p.i[0] = 2; /* no axis 2 in [3,4] */
    CHECK(vdev_op_run(VDEV_OP_BROADCAST, bc, 2, &p) == NULL);
    CHECK_MSG("axis 2");
    const vdev_tensor_t *rr[2] = {a34, b56};
    CHECK(vdev_op_run(VDEV_OP_REDUCE_ROWS, rr, 2, NULL) == NULL);
    CHECK_MSG("[5,6]");
    vdev_tensor_t *one = vdev_tensor_ones(NULL, 0, VDEV_F32);
    const vdev_tensor_t *mg[3] = {one, a34, b56};
    CHECK(vdev_op_run(VDEV_OP_MSE_GRAD, mg, 3, NULL) == NULL);
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5,6]");
    vdev_tensor_t *up[3] = {a34, a34, b56};
    struct vdev_op_params lr = {.f = {0.1, 0.0}};
    CHECK_STATUS(vdev_op_run_inplace(VDEV_OP_SGD_UPDATE, up, 3, &lr), VDEV_ERR_SHAPE);
    CHECK_MSG("[3,4]");
    CHECK_MSG("[5,6]");

    /* NULL inputs: NULL out, the first error kept, through public ops of
     * one and two inputs and internal ops alike */
    vdev_clear_error();
    vdev_tensor_t *chain = vdev_relu(vdev_matmul(a34, b56, false, false));
    CHECK(chain == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
    CHECK_MSG("MatMul");
    CHECK_MSG("[5,6]");
    chain = vdev_sum_all(vdev_add(vdev_tanh(vdev_reshape(a34, ns, 2)), a34));
    CHECK(chain == NULL);
    CHECK_MSG("Reshape");
    CHECK(vdev_mse(NULL, a34) == NULL);
    CHECK_MSG("Reshape");
    CHECK(vdev_softmax_cross_entropy(a34, NULL) == NULL);
    CHECK_MSG("Reshape");
    const vdev_tensor_t *nul[2] = {a34, NULL};
    CHECK(vdev_op_run(VDEV_OP_REDUCE_ROWS, nul, 2, NULL) == NULL);
    CHECK_MSG("Reshape");
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* ---- values with no defined answer, and stability ---- */

/* An f32 tensor from host values on the current device. */
static vdev_tensor_t *from(const float *v, const int64_t *shape, int ndim)
{
    return vdev_tensor_from_host(v, shape, ndim, VDEV_F32);
}

/* The documented answers where mathematics has none (see kernels_ref.c),
 * and numerical stability at extreme inputs. */
static void test_special_values(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    int64_t s23[2] = {2, 3}, s2[1] = {2}, s05[2] = {0, 5};
    float x[6] = {1, 2, 3, 4, 5, 6};
    int32_t bad[2] = {0, 3}, neg[2] = {-1, 0}, good[2] = {2, 0};
    vdev_tensor_t *lg = from(x, s23, 2);
    vdev_tensor_t *lb = vdev_tensor_from_host(bad, s2, 1, VDEV_I32);
    vdev_tensor_t *ln = vdev_tensor_from_host(neg, s2, 1, VDEV_I32);
    vdev_tensor_t *lgood = vdev_tensor_from_host(good, s2, 1, VDEV_I32);
    /* a label outside [0, C) is an error where the host reads the labels
     * (test_ops_inputs.c has the details) */
    CHECK(vdev_softmax_cross_entropy(lg, lb) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_MSG("Received a label value of 3 which is outside the valid range of [0, 3)");
    CHECK(vdev_softmax_cross_entropy(lg, ln) == NULL);
    CHECK_MSG("Received a label value of -1 which is outside the valid range of [0, 3)");
    float ce = vdev_tensor_item(vdev_softmax_cross_entropy(lg, lgood));
    double l0 = log(exp(1.0) + exp(2.0) + exp(3.0));
    double want = ((l0 - 3.0) + (l0 + 3.0 - 4.0)) / 2.0;
    CHECK(fabs(ce - want) < 1e-6);
    /* the gradient of a bad row is NaN, good rows are finite */
    vdev_tensor_t *one = vdev_tensor_ones(NULL, 0, VDEV_F32);
    const vdev_tensor_t *gi[3] = {one, lg, lb};
    vdev_tensor_t *g = vdev_op_run(VDEV_OP_SOFTMAX_CE_GRAD, gi, 3, NULL);
    float gv[6];
    CHECK_OK(vdev_tensor_to_host(g, gv, sizeof gv));
    CHECK(!isnan(gv[0]) && !isnan(gv[2]) && isnan(gv[3]) && isnan(gv[5]));

    /* mean of nothing is NaN (0/0), sum of nothing is 0; over axis 0 of
     * [0,5] every one of the 5 means is of nothing */
    vdev_tensor_t *empty = vdev_tensor_zeros(s05, 2, VDEV_F32);
    CHECK(isnan(vdev_tensor_item(vdev_mean_all(empty))));
    CHECK(vdev_tensor_item(vdev_sum_all(empty)) == 0.0f);
    CHECK(isnan(vdev_tensor_item(vdev_mse(empty, empty))));
    vdev_tensor_t *m0 = vdev_mean(empty, 0, false);
    float mv[5];
    CHECK_OK(vdev_tensor_to_host(m0, mv, sizeof mv));
    CHECK(isnan(mv[0]) && isnan(mv[4]));
    CHECK(vdev_tensor_numel(vdev_mean(empty, 1, false)) == 0);

    /* argmax: first of equal maxima; a NaN is the maximum (first NaN) */
    float ties[6] = {1, 3, 3, NAN, 2, NAN};
    vdev_tensor_t *am = vdev_argmax(from(ties, s23, 2));
    int32_t ai[2];
    CHECK_OK(vdev_tensor_to_host(am, ai, sizeof ai));
    CHECK(ai[0] == 1 && ai[1] == 0);
    CHECK(vdev_tensor_dtype(am) == VDEV_I32);
    CHECK(vdev_tensor_ndim(am) == 1 && vdev_tensor_dim(am, 0) == 2);

    /* reshape and transpose keep an i32 tensor's dtype and words */
    int32_t iw[6] = {-7, 1 << 30, 3, 0, -1, 42}, ib[6];
    int64_t s32[2] = {3, 2};
    vdev_tensor_t *it = vdev_tensor_from_host(iw, s23, 2, VDEV_I32);
    vdev_tensor_t *ir = vdev_reshape(it, s32, 2);
    CHECK(vdev_tensor_dtype(ir) == VDEV_I32 && vdev_tensor_dim(ir, 0) == 3);
    CHECK_OK(vdev_tensor_to_host(ir, ib, sizeof ib));
    CHECK(!memcmp(ib, iw, sizeof iw));
    CHECK_OK(vdev_tensor_to_host(vdev_transpose(it), ib, sizeof ib));
    CHECK(ib[0] == -7 && ib[1] == 0 && ib[2] == 1 << 30 && ib[5] == 42);

    /* relu's gradient at exactly 0 is 0 (TensorFlow's convention), also at -0 */
    int64_t s4[1] = {4};
    float rx[4] = {0.0f, -0.0f, 1.0f, -1.0f}, rdy[4] = {1, 1, 1, 1}, rg[4];
    const vdev_tensor_t *rgi[2] = {from(rdy, s4, 1), from(rx, s4, 1)};
    CHECK_OK(vdev_tensor_to_host(vdev_op_run(VDEV_OP_RELU_GRAD, rgi, 2, NULL), rg, sizeof rg));
    CHECK(rg[0] == 0.0f && rg[1] == 0.0f && rg[2] == 1.0f && rg[3] == 0.0f);

    /* relu passes NaN; softmax of huge values stays finite */
    float rv[2] = {NAN, -1};
    float ro[2];
    CHECK_OK(vdev_tensor_to_host(vdev_relu(from(rv, s2, 1)), ro, sizeof ro));
    CHECK(isnan(ro[0]) && ro[1] == 0.0f);
    float big[6] = {1e30f, 1e30f, -1e30f, 88, 89, 90};
    float so[6];
    CHECK_OK(vdev_tensor_to_host(vdev_softmax(from(big, s23, 2)), so, sizeof so));
    CHECK(fabs(so[0] - 0.5) < 1e-6 && so[2] == 0.0f);
    CHECK(fabs(so[3] + so[4] + so[5] - 1.0) < 1e-6);
    CHECK_OK(vdev_tensor_to_host(vdev_log_softmax(from(big, s23, 2)), so, sizeof so));
    CHECK(fabs(so[0] + log(2.0)) < 1e-6 && isfinite(so[5]));
    /* sigmoid at extremes: no overflow, no NaN */
    float sx[2] = {-200, 200};
    CHECK_OK(vdev_tensor_to_host(vdev_sigmoid(from(sx, s2, 1)), ro, sizeof ro));
    CHECK(ro[0] == 0.0f && ro[1] == 1.0f);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* ---- a run ---- */


int main(void)
{
    /* host-only checks: no runtime needed */
    test_meta();
    test_host_matmul();

    /* the cpu backend alone; the direct kernel runs happen once, here */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    sweep("CPU:0", 0, 1);
    test_shape_errors("CPU:0");
    test_special_values("CPU:0");
    /* with no device scope, ops on CPU tensors run on the CPU */
    vdev_scope_begin();
    vdev_tensor_t *t = vdev_relu(zeros2(2, 2));
    CHECK_STR(vdev_tensor_device(t), "/device:CPU:0");
    vdev_scope_end();

    /* simulated GPUs: against the reference and against CPU:0, bit for bit */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    sweep("GPU:0", 1, 0);
    sweep("GPU:1", 0, 0); /* the second GPU has its own stream and allocator */
    test_shape_errors("GPU:0");
    test_special_values("GPU:1");
    /* the ops ran where they were placed, and nothing leaked */
    CHECK(vdev_placement_op_count("MatMul", "/device:GPU:0") > 0);
    CHECK(vdev_placement_op_count("ApplyAdam", "/device:GPU:1") > 0);
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK_OK(vdev_memory_info("CPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    vdev_shutdown();
    return check_done();
}
