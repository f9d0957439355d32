/* ops_cases.h — the cases of test_ops.c: for every op, a size (0x5, 1x1,
 * 3x5, 17x33, 64x130) and a variant (transposes, broadcast modes, axes,
 * keepdims, ...), the host inputs drawn from ops_rng.h and the op's
 * parameters. build() makes one; case_free() frees it. */
#ifndef VDEV_TESTS_OPS_CASES_H
#define VDEV_TESTS_OPS_CASES_H

#include "check.h"
#include "ops/impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

#define N_SIZES 5

/* ---- cases: an op, host inputs, parameters ---- */

struct tcase;
static void update_decay(struct tcase *c, float wd, float lr);

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

/* An update's weight decay: wd and lr as float bits in i[1], i[2]. */
static void update_decay(struct tcase *c, float wd, float lr)
{
    c->p.i[VDEV_UPDATE_WD] = vdev_param_of_f32(wd);
    c->p.i[VDEV_UPDATE_WD_LR] = vdev_param_of_f32(lr);
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

#include "ops_cases_shaped.h"
#include "ops_cases_depthwise.h"
#include "ops_convt_case.h"
#include "ops_lstm_case.h"
#include "ops_gru_case.h"
#include "ops_select_case.h"
#include "ops_compare_case.h"
#include "ops_extreme_case.h"

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
    case VDEV_OP_BATCH_MATMUL: {
        /* var: bit 0 trans_a, bit 1 trans_b; var / 4: 0 both batches of 3, 1 x's
         * a batch of 1 (broadcast), 2 y's; size 0 an empty batch */
        int ta = var & 1, tb = (var >> 1) & 1, bc = var / 4;
        if (bc > 2 || (size == 0 && bc > 0))
            return 0;
        const int64_t *d = MM[size ? size : 2];
        int64_t m = d[0], k = d[1], n = d[2], nb = size == 0 ? 0 : 3;
        int64_t sa[3] = {bc == 1 ? 1 : nb, ta ? k : m, ta ? m : k};
        int64_t sb[3] = {bc == 2 ? 1 : nb, tb ? n : k, tb ? k : n};
        in_f(c, 0, sa, 3, -1, 1);
        in_f(c, 1, sb, 3, -1, 1);
        c->p.i[0] = ta;
        c->p.i[1] = tb;
        snprintf(c->desc, sizeof c->desc, "BatchMatMulV2 [%lld]x[%lld] m=%lld k=%lld n=%lld ta=%d "
                 "tb=%d", (long long)sa[0], (long long)sb[0], (long long)m, (long long)k,
                 (long long)n, ta, tb);
        return 1;
    }
    case VDEV_OP_ADD:
    case VDEV_OP_SUB:
    case VDEV_OP_MUL:
    case VDEV_OP_DIV:
    case VDEV_OP_MAXIMUM:
    case VDEV_OP_MINIMUM: {
        /* NumPy's broadcasting, a [r,c] and b: 0 same shape, 1 [c], 2 [1,c],
         * 3 [1], 4 0-dimensional; then a broadcast too (a, b):
         * 5 [c] [r,c]; 6 [r,1] [1,c]; 7 [2,1,c] [r,c] -> [2,r,c];
         * 8 [] [r,c]; 9 [c] [1,c] -> [1,c]; 10 [r,c] [r,1].
         * Maximum, Minimum: 11 same shape, values in {-1, 0, 1} with NaN,
         * +-3e38 and -0 sprinkled in (ties, NaN propagation, signed zeros;
         * infinities are test_maxmin.c's, as compare() takes inf - inf) */
        static const int64_t one[2] = {1, 1};
        int extremum = op == VDEV_OP_MAXIMUM || op == VDEV_OP_MINIMUM;
        if (var == 11 && extremum) {
            static const float special[5] = {NAN, 3e38f, -3e38f, -0.0f, 0.0f};
            for (int k = 0; k < 2; k++) {
                float *v = in_f(c, k, s2, 2, -1.5f, 1.5f);
                for (int64_t i = 0; i < c->in[k].n; i++)
                    v[i] = rng_next() % 4 == 0 ? special[rng_next() % 5] : roundf(v[i]);
            }
            return 1;
        }
        /* 12 + v: int32 operands (not RealDiv) of variant v's shapes, drawn
         * with int32's ends so that sums and products wrap */
        int i32v = var >= 12 && op != VDEV_OP_DIV;
        if (i32v)
            var -= 12;
        if (var > 10)
            return 0;
        int64_t row1[1] = {col}, row2[2] = {1, col}, colv[2] = {r, 1}, a3[3] = {2, 1, col};
        static const int na_of[11] = {2, 2, 2, 2, 2, 1, 2, 3, 0, 1, 2};
        static const int nb_of[11] = {2, 1, 2, 1, 0, 2, 2, 2, 2, 2, 2};
        const int64_t *sa = var == 5 || var == 9 ? row1 : var == 6 ? colv : var == 7 ? a3 : s2;
        const int64_t *sb = var == 0 || var == 5 || var == 7 || var == 8 ? s2
                            : var == 1                                  ? row1
                            : var == 2 || var == 6 || var == 9          ? row2
                            : var == 10                                 ? colv
                                                                        : one;
        if (i32v) {
            in_cmp(c, 0, sa, na_of[var], VDEV_I32);
            in_cmp(c, 1, sb, nb_of[var], VDEV_I32);
            snprintf(c->desc, sizeof c->desc, "%s int32 size [%lld,%lld] variant %d",
                     vdev_op_defs[op].name, (long long)r, (long long)col, var + 12);
            break;
        }
        in_f(c, 0, sa, na_of[var], -2, 2);
        /* the shape rule picks the broadcast mode; the test only sets shapes */
        if (op == VDEV_OP_DIV)
            in_f_signed(c, 1, sb, nb_of[var], 0.5f, 2.0f);
        else
            in_f(c, 1, sb, nb_of[var], -2, 2);
        return 1;
    }
    case VDEV_OP_SQRT:
        /* var 0: [0, 4); var 1: [-4, 4), NaN below 0 */
        if (var > 1)
            return 0;
        in_f(c, 0, s2, 2, var ? -4.0f : 0.0f, 4.0f);
        return 1;
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
    case VDEV_OP_ERF:
    case VDEV_OP_SOFTPLUS:
        /* var 0: [-20, 20) (softplus: all three of TensorFlow's ranges, which
         * meet at +-13.94; erf: saturated both ways); var 1: [-1, 1) */
        if (var > 1)
            return 0;
        in_f(c, 0, s2, 2, var ? -1.0f : -20.0f, var ? 1.0f : 20.0f);
        return 1;
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
        /* var 0..5: axis {0, -1, ALL} x keepdims; 6, 7: 3-D, axis 1; Sum
         * 8..10: int32 with int32's ends (wrapping), axis {0, -1, ALL} */
        static const int axes[3] = {0, -1, VDEV_AXIS_ALL};
        if (op == VDEV_OP_SUM && var >= 8 && var <= 10) {
            in_cmp(c, 0, s2, 2, VDEV_I32);
            c->p.i[0] = axes[var - 8];
            c->p.i[1] = 0;
            snprintf(c->desc, sizeof c->desc, "Sum int32 [%lld,%lld] axis %lld", (long long)r,
                     (long long)col, (long long)c->p.i[0]);
            return 1;
        }
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
        /* var 0: the 2-D form; 1: i32 (transpose moves words, any dtype);
         * from 2 on, permutations (transpose_case) */
        return transpose_case(c, r, col, size, var);
    case VDEV_OP_MSE: {
        /* var 0: [r,c] (size 0 has no example: 0); 1: [c, r] (size 0: examples
         * of no element, NaN); 2: [r*c] (one example) */
        if (var > 2)
            return 0;
        int64_t st[2] = {col, r}, s1[1] = {r * col};
        const int64_t *sh = var == 0 ? s2 : var == 1 ? st : s1;
        in_f(c, 0, sh, var == 2 ? 1 : 2, -2, 2);
        in_f(c, 1, sh, var == 2 ? 1 : 2, -2, 2);
        return 1;
    }
    case VDEV_OP_SOFTMAX_CE:
        /* var 1: logits near 1000, where exp() without the max overflows;
         * size 0 has no rows: the mean over an empty batch is 0 */
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
        /* dy [r,c], like: 0 same shape, 1 [c], 2 [1,c], 3 [1], 4 0-dimensional,
         * 5 [r,1], 6 [1,1,c] (a rank above dy's); dy [2,r,c], like: 7 [2,1,c],
         * 8 [r,c], 9 [2,1,1] */
        static const int64_t one[3] = {1, 1, 1};
        int64_t row1[1] = {col}, row2[2] = {1, col}, colv[2] = {r, 1}, row3[3] = {1, 1, col};
        int64_t d3[3] = {2, r, col}, l7[3] = {2, 1, col}, l9[3] = {2, 1, 1};
        static const int nl_of[10] = {2, 1, 2, 1, 0, 2, 3, 3, 2, 3};
        if (var > 9)
            return 0;
        if (var >= 7)
            in_f(c, 0, d3, 3, -2, 2);
        else
            in_f(c, 0, s2, 2, -2, 2);
        const int64_t *sb = var == 0 || var == 8 ? s2
                            : var == 1           ? row1
                            : var == 2           ? row2
                            : var == 5           ? colv
                            : var == 6           ? row3
                            : var == 7           ? l7
                            : var == 9           ? l9
                                                 : one;
        in_f(c, 1, sb, nl_of[var], -2, 2);
        return 1;
    }
    case VDEV_OP_SGD_UPDATE: {
        /* var 0: momentum 0; 1: momentum 0.9; 2: momentum 0 with a NaN
         * velocity, which the update must neither read (0 NaN is NaN) nor
         * write; 3: Nesterov; 4: momentum 0.9 with weight decay; 5: momentum
         * 0 with weight decay; 6: Nesterov with momentum 0 (plain SGD) */
        if (var > 6)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        in_f(c, 1, s2, 2, -1, 1);
        float *vel = in_f(c, 2, s2, 2, -0.5f, 0.5f);
        for (int64_t i = 0; var == 2 && i < c->in[2].n; i++)
            vel[i] = NAN;
        c->p.f[0] = 0.1f;
        c->p.f[1] = var == 1 || var == 3 || var == 4 ? 0.9f : 0.0f;
        c->p.i[0] = var == 3 || var == 6;
        if (var == 4 || var == 5)
            update_decay(c, 0.04f, 0.1f);
        return 1;
    }
    case VDEV_OP_ADAM_UPDATE:
    case VDEV_OP_AMSGRAD_APPLY:
        /* (var, grad, m, v >= 0) with TensorFlow's default betas, or
         * (var, m, vhat >= 0); var 1: with weight decay */
        if (var > 1)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        in_f(c, 1, s2, 2, -1, 1);
        in_f(c, 2, s2, 2, op == VDEV_OP_ADAM_UPDATE ? -0.5f : 0.0f, 0.5f);
        if (op == VDEV_OP_ADAM_UPDATE)
            in_f(c, 3, s2, 2, 0.0f, 0.5f);
        c->p.f[0] = 0.01;
        c->p.f[1] = 0.9;
        c->p.f[2] = 0.999;
        c->p.f[3] = 1e-7;
        if (var == 1)
            update_decay(c, 0.004f, 0.001f);
        return 1;
    case VDEV_OP_AMSGRAD_MOMENTS:
        /* (m, grad, v >= 0, vhat >= 0): vhat above the new v in some places,
         * below in others */
        if (var > 0)
            return 0;
        in_f(c, 0, s2, 2, -0.5f, 0.5f);
        in_f(c, 1, s2, 2, -1, 1);
        in_f(c, 2, s2, 2, 0.0f, 0.5f);
        in_f(c, 3, s2, 2, 0.0f, 0.5f);
        c->p.f[1] = 0.9;
        c->p.f[2] = 0.999;
        return 1;
    case VDEV_OP_CLIP_GRAD:
        /* var 0: a norm's clip (g 1.5 / 2.5); 1: a value's (+-0.5); 2: a
         * global norm's scale (g 0.7); 3: all three, the clamp last */
        if (var > 3)
            return 0;
        in_f(c, 0, s2, 2, -2, 2);
        c->p.f[0] = var == 0 || var == 3 ? 1.5 : var == 2 ? 0.7 : 1.0;
        c->p.f[1] = var == 0 || var == 3 ? 2.5 : 1.0;
        c->p.f[2] = var == 1 || var == 3 ? 0.5 : 0.0;
        return 1;
    case VDEV_OP_SLICE: {
        /* rows of x [r,c]: var 0 all; 1 from r/3 to the end; 2 the middle
         * row of [r,2,c]; 3 i32 (words, any bit pattern); 4 none, from r */
        if (var > 4)
            return 0;
        int64_t s3[3] = {r, 2, col}, b = var == 1 ? r / 3 : var == 2 ? r / 2 : var == 4 ? r : 0;
        if (var == 3) {
            set_in(c, 0, s2, 2, VDEV_I32);
            int32_t *p = c->in[0].data;
            for (int64_t i = 0; i < c->in[0].n; i++)
                p[i] = (int32_t)(rng_next() & 0xffffffffu);
        } else {
            in_f(c, 0, var == 2 ? s3 : s2, var == 2 ? 3 : 2, -2, 2);
        }
        c->p.i[0] = b;
        c->p.i[1] = var == 2 ? (r > 0) : r - b;
        return 1;
    }
    case VDEV_OP_MAXMIN_GRAD: {
        /* (dy [r,c], x, y) with values in {-1, 0, 1} (ties) and NaN; var bit
         * 0: Minimum's mask, bit 1: y's share; var / 4: 0 x, y [r,c]; 1 x
         * [r,c], y [c]; 2 x [r,1], y [1,c] */
        if (var > 11)
            return 0;
        int64_t rowv[1] = {col}, colv[2] = {r, 1}, row2[2] = {1, col};
        int form = var / 4;
        in_f(c, 0, s2, 2, -2, 2);
        for (int k = 1; k < 3; k++) {
            const int64_t *sh = form == 0 ? s2 : form == 1 ? (k == 1 ? s2 : rowv)
                                                           : (k == 1 ? colv : row2);
            float *v = in_f(c, k, sh, form == 1 && k == 2 ? 1 : 2, -1.5f, 1.5f);
            for (int64_t i = 0; i < c->in[k].n; i++)
                v[i] = rng_next() % 8 == 0 ? NAN : roundf(v[i]);
        }
        c->p.i[0] = var & 1;
        c->p.i[1] = (var >> 1) & 1;
        return 1;
    }
    case VDEV_OP_SLICE_GRAD: {
        /* dy [n,c] into like [r,c] from row b: var 0 n = r; 1 the rows from
         * r/3 to the end; 2 no row (all zeros); 3 [n,2,c] into [r,2,c] */
        if (var > 3)
            return 0;
        int64_t b = var == 1 ? r / 3 : var == 3 ? r / 2 : 0, nr = var == 2 ? 0 : r - b;
        int64_t dy[3] = {nr, col, 0}, d3[3] = {nr, 2, col}, l3[3] = {r, 2, col};
        in_f(c, 0, var == 3 ? d3 : dy, var == 3 ? 3 : 2, -2, 2);
        in_f(c, 1, var == 3 ? l3 : s2, var == 3 ? 3 : 2, -2, 2);
        c->p.i[0] = b;
        return 1;
    }
    case VDEV_OP_CONV2D:
    case VDEV_OP_MAX_POOL:
    case VDEV_OP_AVG_POOL:
    case VDEV_OP_CONV2D_BACKPROP_INPUT:
    case VDEV_OP_CONV2D_BACKPROP_FILTER:
    case VDEV_OP_MAX_POOL_GRAD:
    case VDEV_OP_AVG_POOL_GRAD:
        return conv_case(c, op, size, var);
    case VDEV_OP_STRIDED_SLICE:
    case VDEV_OP_STRIDED_SLICE_GRAD:
    case VDEV_OP_STRIDED_SLICE_GRAD_ADD:
        return strided_case(c, op, r, col, var);
    case VDEV_OP_CONCAT:
    case VDEV_OP_PACK:
        return join_case(c, op, r, col, size, var);
    case VDEV_OP_GATHER:
    case VDEV_OP_GATHER_GRAD:
        return gather_case(c, op, r, col, var);
    case VDEV_OP_DEPTHWISE_CONV2D:
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT:
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER:
        return depthwise_case(c, op, size, var);
    case VDEV_OP_CONV2D_TRANSPOSE:
        return convt_case(c, size, var);
    case VDEV_OP_LSTM_GATES:
    case VDEV_OP_LSTM_GATES_GRAD:
    case VDEV_OP_LSTM_CELL_STATE:
    case VDEV_OP_LSTM_CELL_OUTPUT:
    case VDEV_OP_LSTM_CELL_GRAD:
        return lstm_case(c, op, r, col, var);
    case VDEV_OP_GRU_GATES:
    case VDEV_OP_GRU_GATES_GRAD:
    case VDEV_OP_GRU_CELL_OUTPUT:
    case VDEV_OP_GRU_CELL_GRAD:
        return gru_case(c, op, r, col, var);
    case VDEV_OP_SELECT_MASK:
    case VDEV_OP_SELECT_MASK_GRAD:
        return select_case(c, op, r, col, var);
    case VDEV_OP_EQUAL:
    case VDEV_OP_NOT_EQUAL:
    case VDEV_OP_LESS:
    case VDEV_OP_LESS_EQUAL:
    case VDEV_OP_GREATER:
    case VDEV_OP_GREATER_EQUAL:
    case VDEV_OP_LOGICAL_AND:
    case VDEV_OP_LOGICAL_OR:
    case VDEV_OP_LOGICAL_NOT:
        return compare_case(c, op, r, col, var);
    case VDEV_OP_CAST:
        return cast_case(c, r, col, var);
    case VDEV_OP_SELECT_V2:
        return select_v2_case(c, r, col, var);
    case VDEV_OP_MAX:
    case VDEV_OP_MIN:
    case VDEV_OP_ABS:
    case VDEV_OP_SIGN:
    case VDEV_OP_FLOOR:
    case VDEV_OP_CEIL:
    case VDEV_OP_ROUND:
    case VDEV_OP_FLOOR_DIV:
    case VDEV_OP_FLOOR_MOD:
        return extreme_case(c, op, r, col, var);
    case VDEV_OP_COUNT:
        break;
    }
    return 0;
}


#endif
