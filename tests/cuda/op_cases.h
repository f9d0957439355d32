/* op_cases.h — the op cases that test_cuda.c runs on a GPU and
 * tests/cuda/test_cuda_emu.c runs through the CUDA kernels compiled for the
 * host: input generators, tolerances per op, the comparison, and the list of
 * cases, chosen to reach every code path of the kernels (broadcast modes,
 * axes, short and long rows, each kind of reduction with and without a split
 * axis, transposes, empty tensors and empty batches, NaN, bad labels, huge
 * logits, square roots of special values and subnormals).
 *
 * The includer defines run_case() (declared here) and, to run smaller
 * versions of the largest cases, OP_CASES_SMALL before including: BIG(a, b)
 * is a on a GPU, b in the emulation, which runs each GPU thread as a host
 * thread. Included once per test executable (its functions are static). */
#ifndef VDEV_OP_CASES_H
#define VDEV_OP_CASES_H

#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef OP_CASES_SMALL
#define BIG(gpu, host) (host)
#else
#define BIG(gpu, host) (gpu)
#endif

enum gen {
    G_UNIFORM,  /* (-1, 1) */
    G_POS,      /* (0.1, 2) */
    G_NONZERO,  /* +-(0.5, 2) */
    G_WIDE,     /* (-20, 20) */
    G_NEG,      /* (-6, 0): log-probabilities */
    G_PROB,     /* (0, 1) */
    G_SPECIAL,  /* uniform with NaN, +-inf, +-0 sprinkled in */
    G_TIES,     /* {0, 1, 2} with an occasional NaN: argmax ties */
    G_LABEL,    /* i32 in [0, C) */
    G_BADLABEL, /* i32 in [0, C), one of them C */
    G_HUGE,     /* logits of 1e10, 3e12, 1e15, -3e12 (by row), a few float ulps
                 * apart or all equal: log-softmax and cross-entropy exactness */
    G_ROOTS     /* every 4th element a special value of sqrt (-inf, -1, -0, +0,
                 * +inf, NaN, subnormals of both signs, FLT_MIN, FLT_MAX, exact
                 * squares), the rest positive over every exponent, subnormals
                 * included (2^-149 to 2^128) */
};

struct tin {
    int gen;
    int dtype;
    int ndim;
    int64_t shape[4];
};

#define TF(gen, nd, ...) ((struct tin){gen, VDEV_F32, nd, {__VA_ARGS__}})
#define TI(gen, nd, ...) ((struct tin){gen, VDEV_I32, nd, {__VA_ARGS__}})

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double rnd(void) /* [0, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int64_t numel_of(const struct tin *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* Host data for one input; `classes` is C for labels. */
static void *make_host(const struct tin *t, int64_t classes)
{
    int64_t n = numel_of(t);
    void *p = malloc((size_t)(n ? n : 1) * 4);
    float *f = p;
    int32_t *l = p;
    for (int64_t i = 0; i < n; i++) {
        double u = rnd();
        switch (t->gen) {
        case G_UNIFORM: f[i] = (float)(2 * u - 1); break;
        case G_POS: f[i] = (float)(0.1 + 1.9 * u); break;
        case G_NONZERO: f[i] = (float)((u < 0.5 ? -1 : 1) * (0.5 + 3 * fabs(u - 0.5))); break;
        case G_WIDE: f[i] = (float)(40 * u - 20); break;
        case G_NEG: f[i] = (float)(-6 * u); break;
        case G_PROB: f[i] = (float)(0.001 + 0.998 * u); break;
        case G_SPECIAL: {
            static const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
            f[i] = i % 7 == 3 ? sp[(i / 7) % 5] : (float)(2 * u - 1);
            break;
        }
        case G_TIES: f[i] = i % 41 == 40 ? NAN : (float)(int)(3 * u); break;
        case G_LABEL: l[i] = (int32_t)(u * (double)classes); break;
        case G_BADLABEL:
            l[i] = i == n / 2 ? (int32_t)classes : (int32_t)(u * (double)classes);
            break;
        case G_ROOTS: {
            static const float sp[] = {-INFINITY, -1.0f, -0.0f, 0.0f, INFINITY, NAN,
                                       0x1p-149f,            /* the least subnormal */
                                       0x1.fffffcp-127f,     /* the largest */
                                       0x1.8p-140f, -0x1p-149f, 0x1p-126f /* FLT_MIN */,
                                       0x1.fffffep127f /* FLT_MAX */, 1.0f, 4.0f, 2.0f, 0.25f};
            if (i % 4 == 1) {
                f[i] = sp[(i / 4) % (int64_t)(sizeof sp / sizeof sp[0])];
            } else { /* (1 + fraction) 2^e, e from -149 to 127 */
                double y = 277.0 * u;
                f[i] = (float)ldexp(1.0 + (y - floor(y)), (int)y - 149);
            }
            break;
        }
        case G_HUGE: {
            static const float base[] = {1e10f, 3e12f, 1e15f, -3e12f};
            int64_t c = t->ndim ? t->shape[t->ndim - 1] : 1, row = c ? i / c : 0;
            float b = base[row % 4], x = b;
            int ulps = row % 8 < 4 ? (int)(i % 3) : 0; /* rows 4-7 of 8: all equal */
            for (int k = 0; k < ulps; k++)
                x = nextafterf(x, INFINITY);
            f[i] = x;
            break;
        }
        }
    }
    return p;
}

/* Tolerances per op: |gpu - cpu| <= atol + rtol |cpu|; NaN must meet NaN,
 * an infinity the same infinity, and at tolerance 0 a zero the same zero.
 * Why each:
 *  - exact: float + - * / and moves (the reference rounds the double result
 *    once, which for these equals the float operation the kernels do), sqrt
 *    (IEEE's double sqrt is correctly rounded on the host and the device,
 *    and a correctly rounded double sqrt of a float rounds to the correctly
 *    rounded float sqrt), and the double-arithmetic gradients and updates
 *    the kernels compute in the same order without FMA contraction
 *    (--fmad=false). Exact also means a zero of the same sign (sqrt(-0) is
 *    -0);
 *  - 2 ulp (rtol 2.4e-7): exp, log, tanh, sigmoid, pow: the device's double
 *    functions are within 1-2 ulp of double, which after rounding to float
 *    differs from the host's result by at most one float ulp, rarely;
 *  - 1e-6 relative (+1e-7 absolute for results near zero): row-wise ops and
 *    reductions, which sum in double in a different order;
 *  - matmul: cuBLAS accumulates in float (no TF32: the default math mode)
 *    where the reference accumulates in double: 1e-6 * k absolute for
 *    operands in (-1, 1), plus 1e-5 relative. */
static void op_tol(int op, int64_t k, double *atol, double *rtol)
{
    switch (op) {
    case VDEV_OP_MATMUL:
        *atol = 1e-6 * (double)(k > 0 ? k : 1);
        *rtol = 1e-5;
        return;
    case VDEV_OP_EXP:
    case VDEV_OP_LOG:
    case VDEV_OP_TANH:
    case VDEV_OP_SIGMOID:
    case VDEV_OP_POW_SCALAR:
        *atol = 1e-30;
        *rtol = 2.4e-7;
        return;
    case VDEV_OP_CONV2D: /* double sums in the reference's order, rounded once */
    case VDEV_OP_AVG_POOL:
    case VDEV_OP_CONV2D_BACKPROP_INPUT:
    case VDEV_OP_CONV2D_BACKPROP_FILTER:
    case VDEV_OP_MAX_POOL_GRAD:
    case VDEV_OP_AVG_POOL_GRAD:
        *atol = 1e-7;
        *rtol = 1e-6;
        return;
    case VDEV_OP_SOFTMAX:
    case VDEV_OP_LOG_SOFTMAX:
    case VDEV_OP_SOFTMAX_GRAD:
    case VDEV_OP_LOG_SOFTMAX_GRAD:
    case VDEV_OP_SUM:
    case VDEV_OP_MEAN:
    case VDEV_OP_MSE:
    case VDEV_OP_SOFTMAX_CE:
    case VDEV_OP_SOFTMAX_CE_GRAD:
    case VDEV_OP_REDUCE_ROWS:
        *atol = 1e-7;
        *rtol = 1e-6;
        return;
    default:
        *atol = 0;
        *rtol = 0;
        return;
    }
}

static int close_enough(float g, float c, double atol, double rtol)
{
    if (c != c)
        return g != g;
    if (isinf(c))
        return g == c;
    if (atol == 0 && rtol == 0 && c == 0)
        return g == 0 && signbit(g) == signbit(c);
    return fabs((double)g - (double)c) <= atol + rtol * fabs((double)c);
}

/* Compares n elements of two host buffers of `dtype`; returns mismatches
 * and reports the first. */
static int64_t compare(const char *what, int dtype, const void *gpu, const void *cpu, int64_t n,
                       double atol, double rtol, double *max_err)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int ok;
        if (dtype == VDEV_I32) {
            ok = ((const int32_t *)gpu)[i] == ((const int32_t *)cpu)[i];
        } else {
            float g = ((const float *)gpu)[i], c = ((const float *)cpu)[i];
            ok = close_enough(g, c, atol, rtol);
            if (c == c && g == g && !isinf(c)) {
                double e = fabs((double)g - (double)c);
                if (e > *max_err)
                    *max_err = e;
            }
        }
        if (!ok && bad++ == 0) {
            if (dtype == VDEV_I32)
                fprintf(stderr, "%s: element %lld: GPU %d, CPU %d\n", what, (long long)i,
                        ((const int32_t *)gpu)[i], ((const int32_t *)cpu)[i]);
            else
                fprintf(stderr, "%s: element %lld: GPU %.9g, CPU %.9g (atol %g, rtol %g)\n", what,
                        (long long)i, ((const float *)gpu)[i], ((const float *)cpu)[i], atol, rtol);
        }
    }
    return bad;
}

struct op_stats {
    int cases;
    double max_err;
};
static struct op_stats stats[VDEV_OP_COUNT];

/* Runs op on the kernels under test and on its CPU reference with the same
 * inputs, and compares (defined by the includer). `classes` is C for label
 * inputs. */
static void run_case(const char *what, enum vdev_op op, int n_in, const struct tin *ins,
                     struct vdev_op_params p, int64_t classes);

/* p with an update's weight decay: wd and lr as float bits in i[1], i[2]. */
static struct vdev_op_params with_decay(struct vdev_op_params p, float wd, float lr)
{
    uint32_t u;
    memcpy(&u, &wd, sizeof u);
    p.i[VDEV_UPDATE_WD] = (int64_t)u;
    memcpy(&u, &lr, sizeof u);
    p.i[VDEV_UPDATE_WD_LR] = (int64_t)u;
    return p;
}

static struct vdev_op_params P(double f0, double f1, int64_t i0, int64_t i1) {
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.f[0] = f0;
    p.f[1] = f1;
    p.i[0] = i0;
    p.i[1] = i1;
    return p;
}

/* The convolutions' and pools' parameters: the padding (1: SAME) in f[0],
 * i[0..3] as the op's row says (strides; or window, then strides). */
static struct vdev_op_params conv_params(int same, int64_t i0, int64_t i1, int64_t i2,
                                         int64_t i3)
{
    struct vdev_op_params p = P(same ? VDEV_PAD_SAME : VDEV_PAD_VALID, 0, i0, i1);
    p.i[2] = i2;
    p.i[3] = i3;
    return p;
}

/* StridedSlice's parameters for nd axes: first index, stride, count. */
static struct vdev_op_params strided(int nd, const int64_t *first, const int64_t *stride,
                                     const int64_t *count)
{
    struct vdev_op_params p = P(0, 0, 0, 0);
    for (int d = 0; d < nd; d++) {
        p.i[d] = first[d];
        p.j[d] = stride[d];
        p.f[d] = (double)count[d];
    }
    return p;
}

/* Transpose's parameters for a permutation of nd axes (j[0] 1). */
static struct vdev_op_params perm_params(int nd, const int64_t *perm)
{
    struct vdev_op_params p = P(0, 0, 0, 0);
    p.j[0] = 1;
    for (int d = 0; d < nd; d++)
        p.i[d] = perm[d];
    return p;
}

/* An output dimension by TensorFlow's rule. */
static int64_t conv_dim(int64_t in, int64_t k, int64_t s, int same)
{
    return same ? (in + s - 1) / s : (in - k + s) / s;
}

#define CASE(what, op, p, classes, ...)                                                            \
    do {                                                                                           \
        const struct tin ins_[] = {__VA_ARGS__};                                                   \
        run_case(what, op, (int)(sizeof ins_ / sizeof ins_[0]), ins_, p, classes);                 \
    } while (0)

#define ALL VDEV_AXIS_ALL

static void
op_cases(void)
{
    struct vdev_op_params none = P(0, 0, 0, 0);

    /* MATMUL: every transpose, a ragged size, k = 0, 1x1 */
    CASE("NN", VDEV_OP_MATMUL, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 2, 64, 96),
         TF(G_UNIFORM, 2, 96, 80));
    CASE("TN", VDEV_OP_MATMUL, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 96, 64),
         TF(G_UNIFORM, 2, 96, 80));
    CASE("NT", VDEV_OP_MATMUL, P(0, 0, 0, 1), 0, TF(G_UNIFORM, 2, 64, 96),
         TF(G_UNIFORM, 2, 80, 96));
    CASE("TT", VDEV_OP_MATMUL, P(0, 0, 1, 1), 0, TF(G_UNIFORM, 2, 96, 64),
         TF(G_UNIFORM, 2, 80, 96));
    CASE("ragged", VDEV_OP_MATMUL, none, 0, TF(G_UNIFORM, 2, 300, 513), TF(G_UNIFORM, 2, 513, 257));
    CASE("k=0", VDEV_OP_MATMUL, none, 0, TF(G_UNIFORM, 2, 3, 0), TF(G_UNIFORM, 2, 0, 5));
    CASE("m=0", VDEV_OP_MATMUL, none, 0, TF(G_UNIFORM, 2, 0, 5), TF(G_UNIFORM, 2, 5, 3));
    CASE("n=0", VDEV_OP_MATMUL, none, 0, TF(G_UNIFORM, 2, 3, 5), TF(G_UNIFORM, 2, 5, 0));
    CASE("TN m=0", VDEV_OP_MATMUL, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 5, 0),
         TF(G_UNIFORM, 2, 5, 3));
    CASE("NT n=0", VDEV_OP_MATMUL, P(0, 0, 0, 1), 0, TF(G_UNIFORM, 2, 3, 5),
         TF(G_UNIFORM, 2, 0, 5));
    CASE("1x1", VDEV_OP_MATMUL, none, 0, TF(G_UNIFORM, 2, 1, 1), TF(G_UNIFORM, 2, 1, 1));

    /* binary ops: the three broadcast modes, and 0-d */
    static const enum vdev_op bin[] = {VDEV_OP_ADD,     VDEV_OP_SUB,    VDEV_OP_MUL,
                                       VDEV_OP_DIV,     VDEV_OP_MAXIMUM, VDEV_OP_MINIMUM};
    for (int i = 0; i < 6; i++) {
        enum vdev_op op = bin[i];
        int gb = op == VDEV_OP_DIV ? G_NONZERO : G_UNIFORM;
        CASE("same shape", op, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(gb, 2, 33, 47));
        CASE("row [n]", op, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(gb, 1, 47));
        CASE("row [1,n]", op, none, 0, TF(G_UNIFORM, 3, 5, 7, 9), TF(gb, 2, 1, 9));
        CASE("one element", op, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(gb, 1, 1));
        CASE("0-d", op, none, 0, TF(G_UNIFORM, 0, 0), TF(gb, 0, 0));
        CASE("large", op, none, 0, TF(G_UNIFORM, 1, 1000003), TF(gb, 1, 1000003));
        /* numpy's rule in general (mode 3): strides over the padded output */
        CASE("[5] by [3,5]", op, none, 0, TF(G_UNIFORM, 1, 5), TF(gb, 2, 3, 5));
        CASE("[3,1] by [1,4]", op, none, 0, TF(G_UNIFORM, 2, 3, 1), TF(gb, 2, 1, 4));
        CASE("column [33,1]", op, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(gb, 2, 33, 1));
        CASE("[2,3,1,5] by [3,4,1]", op, none, 0, TF(G_UNIFORM, 4, 2, 3, 1, 5),
             TF(gb, 3, 3, 4, 1));
        CASE("0-d by [2,3]", op, none, 0, TF(G_UNIFORM, 0, 0), TF(gb, 2, 2, 3));
        CASE("[3,1] by [0]", op, none, 0, TF(G_UNIFORM, 2, 3, 1), TF(gb, 1, 0));
        CASE("[1,1000] by [1000,1]", op, none, 0, TF(G_UNIFORM, 2, 1, BIG(1000, 100)),
             TF(gb, 2, BIG(1000, 100), 1));
    }

    /* unary ops */
    CASE("s=0.3", VDEV_OP_ADD_SCALAR, P(0.3, 0, 0, 0), 0, TF(G_UNIFORM, 2, 20, 30));
    CASE("s=-1.7", VDEV_OP_MUL_SCALAR, P(-1.7, 0, 0, 0), 0, TF(G_UNIFORM, 2, 20, 30));
    CASE("s=1.7", VDEV_OP_POW_SCALAR, P(1.7, 0, 0, 0), 0, TF(G_POS, 2, 20, 30));
    CASE("s=2", VDEV_OP_POW_SCALAR, P(2.0, 0, 0, 0), 0, TF(G_UNIFORM, 2, 20, 30));
    CASE("s=-0.5", VDEV_OP_POW_SCALAR, P(-0.5, 0, 0, 0), 0, TF(G_POS, 2, 20, 30));
    CASE("NaN, inf, -0", VDEV_OP_RELU, none, 0, TF(G_SPECIAL, 2, 20, 30));
    CASE("wide", VDEV_OP_TANH, none, 0, TF(G_WIDE, 2, 20, 30));
    CASE("wide", VDEV_OP_SIGMOID, none, 0, TF(G_WIDE, 2, 20, 30));
    CASE("wide", VDEV_OP_EXP, none, 0, TF(G_WIDE, 2, 20, 30));
    CASE("positive", VDEV_OP_LOG, none, 0, TF(G_POS, 2, 20, 30));
    CASE("large", VDEV_OP_TANH, none, 0, TF(G_UNIFORM, 1, 1 << 20));
    CASE("special values, subnormals", VDEV_OP_SQRT, none, 0, TF(G_ROOTS, 2, 20, 30));
    CASE("positive", VDEV_OP_SQRT, none, 0, TF(G_POS, 2, 20, 30));
    CASE("NaN, inf, -0", VDEV_OP_SQRT, none, 0, TF(G_SPECIAL, 2, 20, 30));
    CASE("0-d", VDEV_OP_SQRT, none, 0, TF(G_POS, 0, 0));
    CASE("empty", VDEV_OP_SQRT, none, 0, TF(G_ROOTS, 2, 0, 5));
    CASE("large", VDEV_OP_SQRT, none, 0, TF(G_ROOTS, 1, BIG(1 << 20, 100003)));

    /* row-wise: short rows (a warp a row), long rows (a block), 1-D, 3-D */
    static const enum vdev_op rowops[] = {VDEV_OP_SOFTMAX, VDEV_OP_LOG_SOFTMAX};
    for (int i = 0; i < 2; i++) {
        CASE("[37,10]", rowops[i], none, 0, TF(G_WIDE, 2, 37, 10));
        CASE("[5,3000]", rowops[i], none, 0, TF(G_WIDE, 2, 5, 3000));
        CASE("[4,2,1500]", rowops[i], none, 0, TF(G_UNIFORM, 3, 4, 2, 1500));
        CASE("[7]", rowops[i], none, 0, TF(G_UNIFORM, 1, 7));
        CASE("many rows", rowops[i], none, 0, TF(G_UNIFORM, 2, BIG(20000, 600), 16));
        CASE("NaN, inf", rowops[i], none, 0, TF(G_SPECIAL, 2, 9, 13));
        CASE("huge logits", rowops[i], none, 0, TF(G_HUGE, 2, 16, 10));
        CASE("huge logits, long rows", rowops[i], none, 0, TF(G_HUGE, 2, 8, 3000));
        CASE("empty rows", rowops[i], none, 0, TF(G_UNIFORM, 2, 5, 0));
    }

    /* SUM, MEAN: all (one block, many blocks), each axis, keepdims, empty */
    static const enum vdev_op red[] = {VDEV_OP_SUM, VDEV_OP_MEAN};
    for (int i = 0; i < 2; i++) {
        enum vdev_op op = red[i];
        CASE("all, small", op, P(0, 0, ALL, 0), 0, TF(G_UNIFORM, 2, 30, 40));
        CASE("all, 1e6", op, P(0, 0, ALL, 0), 0, TF(G_UNIFORM, 2, 1000, 1000));
        CASE("all, keepdims", op, P(0, 0, ALL, 1), 0, TF(G_UNIFORM, 2, 30, 40));
        CASE("axis 0, wide", op, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 2, 64, 2048));
        CASE("axis 0, tall", op, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 2, 100000, 3));
        CASE("axis 1", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 300, 500));
        CASE("axis -1", op, P(0, 0, -1, 0), 0, TF(G_UNIFORM, 3, 3, 4, 5));
        CASE("axis 1, keepdims", op, P(0, 0, 1, 1), 0, TF(G_UNIFORM, 3, 3, 4, 5));
        CASE("axis 1 of 1e5", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 2, 100000));
        CASE("empty axis", op, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 2, 0, 5));
        CASE("0-d", op, P(0, 0, ALL, 0), 0, TF(G_UNIFORM, 0, 0));
        CASE("no outputs", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 0, 5));
        /* each path of cuda_reduce.cu: short rows (a thread an output), rows
         * (a warp a row), tiles with inner below 32 and above (not a multiple
         * of 32), with and without splitting the axis, a bias gradient */
        CASE("short rows", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 5000, 7));
        CASE("rows", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 50, 100));
        CASE("long rows", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 3, BIG(50000, 20000)));
        CASE("many long rows", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 1030, BIG(9000, 8200)));
        CASE("inner 3, split", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 3, 2, BIG(40000, 9000), 3));
        CASE("inner 31", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 3, 4, 37, 31));
        CASE("inner 33", op, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 2, 300, 33));
        CASE("inner 100, split", op, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 2, BIG(20000, 3000), 100));
        CASE("bias gradient", op, P(0, 0, 0, 0), 0,
             TF(G_UNIFORM, 2, BIG(65536, 2048), BIG(4096, 64)));
        CASE("many tiles", op, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 3, 40, BIG(50, 8), 1000));
    }

    /* layout */
    struct vdev_op_params rs = P(2, 0, 6, -1);
    CASE("[3,4,2]->[6,-1]", VDEV_OP_RESHAPE, rs, 0, TF(G_UNIFORM, 3, 3, 4, 2));
    CASE("[33,65]", VDEV_OP_TRANSPOSE, none, 0, TF(G_UNIFORM, 2, 33, 65));
    CASE("[1,100]", VDEV_OP_TRANSPOSE, none, 0, TF(G_UNIFORM, 2, 1, 100));
    CASE("[1000,3]", VDEV_OP_TRANSPOSE, none, 0, TF(G_UNIFORM, 2, 1000, 3));
    CASE("i32 [7,9]", VDEV_OP_TRANSPOSE, none, 100, TI(G_LABEL, 2, 7, 9));
    CASE("[0,5]", VDEV_OP_TRANSPOSE, none, 0, TF(G_UNIFORM, 2, 0, 5));
    CASE("[5,0]", VDEV_OP_TRANSPOSE, none, 0, TF(G_UNIFORM, 2, 5, 0));
    CASE("f32", VDEV_OP_IDENTITY, none, 0, TF(G_UNIFORM, 2, 100, 3));
    CASE("i32", VDEV_OP_IDENTITY, none, 1000, TI(G_LABEL, 1, 10));

    /* losses */
    CASE("[50,40]", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 2, 50, 40), TF(G_UNIFORM, 2, 50, 40));
    CASE("1M", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 1, 1 << 20), TF(G_UNIFORM, 1, 1 << 20));
    /* an empty batch is 0 (divide_no_nan); examples without elements are
     * 0/0 = NaN: [0] (one example of none), [3,0] */
    CASE("empty [0]: NaN", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 1, 0), TF(G_UNIFORM, 1, 0));
    CASE("[3,0]: NaN", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 2, 3, 0), TF(G_UNIFORM, 2, 3, 0));
    CASE("empty batch [0,3]", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 2, 0, 3),
         TF(G_UNIFORM, 2, 0, 3));
    CASE("empty batch [0,0]", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 2, 0, 0),
         TF(G_UNIFORM, 2, 0, 0));
    CASE("empty batch [2,0,4]", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 3, 2, 0, 4),
         TF(G_UNIFORM, 3, 2, 0, 4));
    CASE("0-d", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 0, 0), TF(G_UNIFORM, 0, 0));
    CASE("[64,10]", VDEV_OP_SOFTMAX_CE, none, 10, TF(G_WIDE, 2, 64, 10), TI(G_LABEL, 1, 64));
    CASE("[8,3000]", VDEV_OP_SOFTMAX_CE, none, 3000, TF(G_UNIFORM, 2, 8, 3000), TI(G_LABEL, 1, 8));
    CASE("[5000,5]", VDEV_OP_SOFTMAX_CE, none, 5, TF(G_UNIFORM, 2, BIG(5000, 1100), 5),
         TI(G_LABEL, 1, BIG(5000, 1100)));
    CASE("bad label", VDEV_OP_SOFTMAX_CE, none, 10, TF(G_UNIFORM, 2, 16, 10),
         TI(G_BADLABEL, 1, 16));
    CASE("no rows", VDEV_OP_SOFTMAX_CE, none, 10, TF(G_UNIFORM, 2, 0, 10), TI(G_LABEL, 1, 0));
    CASE("no rows, long", VDEV_OP_SOFTMAX_CE, none, 3000, TF(G_UNIFORM, 2, 0, 3000),
         TI(G_LABEL, 1, 0));
    CASE("huge logits", VDEV_OP_SOFTMAX_CE, none, 10, TF(G_HUGE, 2, 16, 10), TI(G_LABEL, 1, 16));
    CASE("huge logits, long rows", VDEV_OP_SOFTMAX_CE, none, 3000, TF(G_HUGE, 2, 8, 3000),
         TI(G_LABEL, 1, 8));

    /* Maximum, Minimum: NaN, +-inf, -0 and +0; ties; NaN in the broadcast row */
    for (int i = 0; i < 2; i++) {
        enum vdev_op op = i ? VDEV_OP_MINIMUM : VDEV_OP_MAXIMUM;
        CASE("NaN, inf, -0", op, none, 0, TF(G_SPECIAL, 2, 20, 30), TF(G_SPECIAL, 2, 20, 30));
        CASE("ties, NaN", op, none, 0, TF(G_TIES, 2, 50, 10), TF(G_TIES, 2, 50, 10));
        CASE("ties, [3,1] by [1,4]", op, none, 0, TF(G_TIES, 2, 3, 1), TF(G_TIES, 2, 1, 4));
        CASE("NaN in a row", op, none, 0, TF(G_TIES, 2, 60, 41), TF(G_TIES, 1, 41));
    }
    /* their gradient: each mask and share, ties and NaN, broadcast x and y */
    for (int v = 0; v < 4; v++) {
        struct vdev_op_params p = P(0, 0, v & 1, v >> 1);
        CASE("same shape", VDEV_OP_MAXMIN_GRAD, p, 0, TF(G_UNIFORM, 2, 50, 10),
             TF(G_TIES, 2, 50, 10), TF(G_TIES, 2, 50, 10));
        CASE("[3,1] by [1,4]", VDEV_OP_MAXMIN_GRAD, p, 0, TF(G_UNIFORM, 2, 3, 4),
             TF(G_TIES, 2, 3, 1), TF(G_TIES, 2, 1, 4));
        CASE("[2,3,1,5] by [3,4,1]", VDEV_OP_MAXMIN_GRAD, p, 0, TF(G_UNIFORM, 4, 2, 3, 4, 5),
             TF(G_SPECIAL, 4, 2, 3, 1, 5), TF(G_SPECIAL, 3, 3, 4, 1));
        CASE("empty", VDEV_OP_MAXMIN_GRAD, p, 0, TF(G_UNIFORM, 2, 0, 4), TF(G_TIES, 2, 0, 4),
             TF(G_TIES, 1, 4));
    }

    /* ARGMAX: ties and NaN, short and long rows */
    CASE("ties, NaN", VDEV_OP_ARGMAX, none, 0, TF(G_TIES, 2, 50, 10));
    CASE("long rows", VDEV_OP_ARGMAX, none, 0, TF(G_UNIFORM, 2, 4, 3000));
    CASE("ties, long rows", VDEV_OP_ARGMAX, none, 0, TF(G_TIES, 2, 6, 2000));
    CASE("special", VDEV_OP_ARGMAX, none, 0, TF(G_SPECIAL, 2, 6, 33));

    /* gradient helpers */
    CASE("", VDEV_OP_RELU_GRAD, none, 0, TF(G_UNIFORM, 2, 20, 30), TF(G_SPECIAL, 2, 20, 30));
    CASE("", VDEV_OP_TANH_GRAD, none, 0, TF(G_UNIFORM, 2, 20, 30), TF(G_UNIFORM, 2, 20, 30));
    CASE("", VDEV_OP_SIGMOID_GRAD, none, 0, TF(G_UNIFORM, 2, 20, 30), TF(G_PROB, 2, 20, 30));
    CASE("[37,10]", VDEV_OP_SOFTMAX_GRAD, none, 0, TF(G_UNIFORM, 2, 37, 10), TF(G_PROB, 2, 37, 10));
    CASE("[3,3000]", VDEV_OP_SOFTMAX_GRAD, none, 0, TF(G_UNIFORM, 2, 3, 3000),
         TF(G_PROB, 2, 3, 3000));
    CASE("[37,10]", VDEV_OP_LOG_SOFTMAX_GRAD, none, 0, TF(G_UNIFORM, 2, 37, 10),
         TF(G_NEG, 2, 37, 10));
    CASE("[3,3000]", VDEV_OP_LOG_SOFTMAX_GRAD, none, 0, TF(G_UNIFORM, 2, 3, 3000),
         TF(G_NEG, 2, 3, 3000));
    CASE("axis 0", VDEV_OP_BROADCAST, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 1, 5),
         TF(G_UNIFORM, 2, 3, 5));
    CASE("axis 1, keepdims", VDEV_OP_BROADCAST, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 3, 1),
         TF(G_UNIFORM, 2, 3, 5));
    CASE("middle axis", VDEV_OP_BROADCAST, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 2, 4),
         TF(G_UNIFORM, 3, 2, 3, 4));
    CASE("all", VDEV_OP_BROADCAST, P(0, 0, ALL, 0), 0, TF(G_UNIFORM, 1, 1), TF(G_UNIFORM, 2, 4, 6));
    CASE("", VDEV_OP_MSE_GRAD, none, 0, TF(G_UNIFORM, 0, 0), TF(G_UNIFORM, 2, 20, 30),
         TF(G_UNIFORM, 2, 20, 30));
    CASE("[64,10]", VDEV_OP_SOFTMAX_CE_GRAD, none, 10, TF(G_UNIFORM, 0, 0), TF(G_WIDE, 2, 64, 10),
         TI(G_LABEL, 1, 64));
    CASE("[4,3000]", VDEV_OP_SOFTMAX_CE_GRAD, none, 3000, TF(G_UNIFORM, 0, 0),
         TF(G_UNIFORM, 2, 4, 3000), TI(G_LABEL, 1, 4));
    CASE("bad label", VDEV_OP_SOFTMAX_CE_GRAD, none, 10, TF(G_UNIFORM, 0, 0),
         TF(G_UNIFORM, 2, 16, 10), TI(G_BADLABEL, 1, 16));
    CASE("same shape", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 33, 47),
         TF(G_UNIFORM, 2, 33, 47));
    CASE("row", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(G_UNIFORM, 1, 47));
    CASE("one element", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 33, 47),
         TF(G_UNIFORM, 1, 1));
    CASE("tall", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 4096, 300), TF(G_UNIFORM, 1, 300));
    CASE("wide", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 64, 2048),
         TF(G_UNIFORM, 2, 1, 2048));
    CASE("bias gradient", VDEV_OP_REDUCE_ROWS, none, 0,
         TF(G_UNIFORM, 2, BIG(65536, 2048), BIG(4096, 64)), TF(G_UNIFORM, 1, BIG(4096, 64)));
    CASE("no rows", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 0, 47), TF(G_UNIFORM, 1, 47));
    /* mode 3: each element of like sums the block of dy it was broadcast over */
    CASE("column", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 33, 47),
         TF(G_UNIFORM, 2, 33, 1));
    CASE("[2,3,4,5] to [3,1,5]", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 4, 2, 3, 4, 5),
         TF(G_UNIFORM, 3, 3, 1, 5));
    CASE("[4,1,6] to [4,1,1]", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 3, 4, 1, 6),
         TF(G_UNIFORM, 3, 4, 1, 1));
    CASE("empty blocks", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 3, 0),
         TF(G_UNIFORM, 2, 3, 1));

    /* in-place updates */
    CASE("momentum 0.9", VDEV_OP_SGD_UPDATE, P(0.01, 0.9, 0, 0), 0, TF(G_UNIFORM, 1, 1000),
         TF(G_UNIFORM, 1, 1000), TF(G_UNIFORM, 1, 1000));
    CASE("momentum 0", VDEV_OP_SGD_UPDATE, P(0.1, 0, 0, 0), 0, TF(G_UNIFORM, 2, 30, 30),
         TF(G_UNIFORM, 2, 30, 30), TF(G_UNIFORM, 2, 30, 30));
    {
        struct vdev_op_params pa = P(0.001, 0.9, 0, 0);
        pa.f[2] = 0.999;
        pa.f[3] = 1e-7;
        CASE("", VDEV_OP_ADAM_UPDATE, pa, 0, TF(G_UNIFORM, 1, 1000), TF(G_UNIFORM, 1, 1000),
             TF(G_UNIFORM, 1, 1000), TF(G_POS, 1, 1000));
        struct vdev_op_params pd = with_decay(pa, 0.004f, 0.001f);
        CASE("weight decay", VDEV_OP_ADAM_UPDATE, pd, 0, TF(G_UNIFORM, 2, 30, 30),
             TF(G_UNIFORM, 2, 30, 30), TF(G_UNIFORM, 2, 30, 30), TF(G_POS, 2, 30, 30));
        CASE("", VDEV_OP_AMSGRAD_MOMENTS, pa, 0, TF(G_UNIFORM, 1, 1000), TF(G_UNIFORM, 1, 1000),
             TF(G_POS, 1, 1000), TF(G_POS, 1, 1000));
        CASE("", VDEV_OP_AMSGRAD_APPLY, pa, 0, TF(G_UNIFORM, 1, 1000), TF(G_UNIFORM, 1, 1000),
             TF(G_POS, 1, 1000));
        CASE("weight decay", VDEV_OP_AMSGRAD_APPLY, pd, 0, TF(G_UNIFORM, 2, 30, 30),
             TF(G_UNIFORM, 2, 30, 30), TF(G_POS, 2, 30, 30));
    }
    CASE("Nesterov", VDEV_OP_SGD_UPDATE, P(0.01, 0.9, 1, 0), 0, TF(G_UNIFORM, 1, 1000),
         TF(G_UNIFORM, 1, 1000), TF(G_UNIFORM, 1, 1000));
    CASE("weight decay", VDEV_OP_SGD_UPDATE, with_decay(P(0.01, 0.9, 0, 0), 0.04f, 0.01f), 0,
         TF(G_UNIFORM, 2, 30, 30), TF(G_UNIFORM, 2, 30, 30), TF(G_UNIFORM, 2, 30, 30));
    CASE("weight decay, momentum 0", VDEV_OP_SGD_UPDATE,
         with_decay(P(0.1, 0, 0, 0), 0.04f, 0.1f), 0, TF(G_UNIFORM, 1, 1000),
         TF(G_UNIFORM, 1, 1000), TF(G_UNIFORM, 1, 1000));
    {
        struct vdev_op_params pc = P(1.5, 2.5, 0, 0);
        pc.f[2] = 0.5;
        CASE("norm", VDEV_OP_CLIP_GRAD, P(1.5, 2.5, 0, 0), 0, TF(G_UNIFORM, 2, 30, 30));
        CASE("norm and value", VDEV_OP_CLIP_GRAD, pc, 0, TF(G_UNIFORM, 1, 1000));
        CASE("empty", VDEV_OP_CLIP_GRAD, pc, 0, TF(G_UNIFORM, 2, 0, 5));
    }

    /* SLICE, SLICE_GRAD: device copies of a range of rows (and zeros) */
    CASE("rows 3..10 of [17,33]", VDEV_OP_SLICE, P(0, 0, 3, 7), 0, TF(G_UNIFORM, 2, 17, 33));
    CASE("row 2 of [4,3,5]", VDEV_OP_SLICE, P(0, 0, 2, 1), 0, TF(G_UNIFORM, 3, 4, 3, 5));
    CASE("i32", VDEV_OP_SLICE, P(0, 0, 1, 8), 1000, TI(G_LABEL, 1, 10));
    CASE("no row", VDEV_OP_SLICE, P(0, 0, 5, 0), 0, TF(G_UNIFORM, 2, 5, 3));
    CASE("[7,33] at row 3 of [17,33]", VDEV_OP_SLICE_GRAD, P(0, 0, 3, 0), 0,
         TF(G_UNIFORM, 2, 7, 33), TF(G_UNIFORM, 2, 17, 33));
    CASE("no row: zeros", VDEV_OP_SLICE_GRAD, P(0, 0, 2, 0), 0, TF(G_UNIFORM, 2, 0, 33),
         TF(G_UNIFORM, 2, 17, 33));
    /* STRIDED_SLICE, STRIDED_SLICE_GRAD (cuda_slice.cu): a range on every
     * axis, backwards on some, int32 words, an empty slice, a scalar */
    {
        struct vdev_op_params p = strided(4, (int64_t[]){1, 0, 2, 10}, (int64_t[]){-1, 3, -2, -2},
                                          (int64_t[]){2, 3, 2, 6});
        CASE("[2,7,3,11] every axis", VDEV_OP_STRIDED_SLICE, p, 0,
             TF(G_UNIFORM, 4, 2, 7, 3, 11));
        CASE("its gradient", VDEV_OP_STRIDED_SLICE_GRAD, p, 0, TF(G_UNIFORM, 4, 2, 3, 2, 6),
             TF(G_UNIFORM, 4, 2, 7, 3, 11));
        p = strided(2, (int64_t[]){BIG(4999, 499), 0}, (int64_t[]){-2, 1},
                    (int64_t[]){BIG(2500, 250), 3});
        CASE("[5000,3] odd rows backwards", VDEV_OP_STRIDED_SLICE, p, 0,
             TF(G_UNIFORM, 2, BIG(5000, 500), 3));
        CASE("its gradient", VDEV_OP_STRIDED_SLICE_GRAD, p, 0,
             TF(G_UNIFORM, 2, BIG(2500, 250), 3), TF(G_UNIFORM, 2, BIG(5000, 500), 3));
        p = strided(1, (int64_t[]){9}, (int64_t[]){-4}, (int64_t[]){3});
        CASE("i32 words", VDEV_OP_STRIDED_SLICE, p, 1000, TI(G_LABEL, 1, 10));
        p = strided(2, (int64_t[]){0, 0}, (int64_t[]){1, 1}, (int64_t[]){5, 0});
        CASE("empty", VDEV_OP_STRIDED_SLICE, p, 0, TF(G_UNIFORM, 2, 5, 3));
        CASE("empty dy: zeros", VDEV_OP_STRIDED_SLICE_GRAD, p, 0, TF(G_UNIFORM, 2, 5, 0),
             TF(G_UNIFORM, 2, 5, 3));
        p = strided(0, NULL, NULL, NULL);
        CASE("a scalar", VDEV_OP_STRIDED_SLICE, p, 0, TF(G_UNIFORM, 0, 1));
        CASE("a scalar's gradient", VDEV_OP_STRIDED_SLICE_GRAD, p, 0, TF(G_UNIFORM, 0, 1),
             TF(G_UNIFORM, 0, 1));
        /* more elements than the grid has threads (2112 blocks of 256 on an
         * H100, 32 in the emulation): each thread takes several */
        int64_t d0 = BIG(40, 4), d1 = BIG(64, 16), d2 = BIG(33, 9), d3 = BIG(130, 130);
        p = strided(4, (int64_t[]){1, d1 - 1, 0, 1}, (int64_t[]){1, -2, 1, 2},
                    (int64_t[]){d0 - 1, d1 / 2, d2, d3 / 2});
        CASE("large, every other on two axes", VDEV_OP_STRIDED_SLICE, p, 0,
             TF(G_UNIFORM, 4, d0, d1, d2, d3));
        CASE("its gradient", VDEV_OP_STRIDED_SLICE_GRAD, p, 0,
             TF(G_UNIFORM, 4, d0 - 1, d1 / 2, d2, d3 / 2), TF(G_UNIFORM, 4, d0, d1, d2, d3));
    }
    /* CONCAT, PACK (cuda_concat.cu): i[0] the axis, i[1] the inputs used
     * (the rest repeat input 0 and are not read); ragged widths, int32
     * words, an empty input 0 with a non-empty output, an empty output,
     * scalars stacked into a vector */
    {
        int64_t rows = BIG(1000, 100);
        CASE("[33,65] [33,7] axis 1", VDEV_OP_CONCAT, P(0, 0, 1, 2), 0, TF(G_UNIFORM, 2, 33, 65),
             TF(G_UNIFORM, 2, 33, 7), TF(G_UNIFORM, 2, 33, 65), TF(G_UNIFORM, 2, 33, 65));
        CASE("i32 four along axis 0", VDEV_OP_CONCAT, P(0, 0, 0, 4), 1000, TI(G_LABEL, 2, 3, 5),
             TI(G_LABEL, 2, 1, 5), TI(G_LABEL, 2, 7, 5), TI(G_LABEL, 2, 0, 5));
        CASE("empty input 0, 4-D axis 2", VDEV_OP_CONCAT, P(0, 0, 2, 3), 0,
             TF(G_UNIFORM, 4, 2, 3, 0, 5), TF(G_UNIFORM, 4, 2, 3, 4, 5),
             TF(G_UNIFORM, 4, 2, 3, 1, 5), TF(G_UNIFORM, 4, 2, 3, 0, 5));
        CASE("large, axis 1", VDEV_OP_CONCAT, P(0, 0, 1, 3), 0, TF(G_UNIFORM, 2, rows, 300),
             TF(G_UNIFORM, 2, rows, 1), TF(G_UNIFORM, 2, rows, 129), TF(G_UNIFORM, 2, rows, 300));
        CASE("empty output", VDEV_OP_CONCAT, P(0, 0, 1, 2), 0, TF(G_UNIFORM, 2, 0, 5),
             TF(G_UNIFORM, 2, 0, 3), TF(G_UNIFORM, 2, 0, 5), TF(G_UNIFORM, 2, 0, 5));
        CASE("one input", VDEV_OP_CONCAT, P(0, 0, 0, 1), 0, TF(G_UNIFORM, 1, 17),
             TF(G_UNIFORM, 1, 17), TF(G_UNIFORM, 1, 17), TF(G_UNIFORM, 1, 17));
        CASE("four [17,33] at axis 1", VDEV_OP_PACK, P(0, 0, 1, 4), 0, TF(G_UNIFORM, 2, 17, 33),
             TF(G_UNIFORM, 2, 17, 33), TF(G_UNIFORM, 2, 17, 33), TF(G_UNIFORM, 2, 17, 33));
        CASE("i32 [5,7] at axis 2", VDEV_OP_PACK, P(0, 0, 2, 2), 1000, TI(G_LABEL, 2, 5, 7),
             TI(G_LABEL, 2, 5, 7), TI(G_LABEL, 2, 5, 7), TI(G_LABEL, 2, 5, 7));
        CASE("three scalars", VDEV_OP_PACK, P(0, 0, 0, 3), 0, TF(G_UNIFORM, 0, 1),
             TF(G_UNIFORM, 0, 1), TF(G_UNIFORM, 0, 1), TF(G_UNIFORM, 0, 1));
        CASE("large at axis 0", VDEV_OP_PACK, P(0, 0, 0, 2), 0, TF(G_UNIFORM, 2, rows, 65),
             TF(G_UNIFORM, 2, rows, 65), TF(G_UNIFORM, 2, rows, 65), TF(G_UNIFORM, 2, rows, 65));
        CASE("empty", VDEV_OP_PACK, P(0, 0, 1, 2), 0, TF(G_UNIFORM, 2, 0, 3),
             TF(G_UNIFORM, 2, 0, 3), TF(G_UNIFORM, 2, 0, 3), TF(G_UNIFORM, 2, 0, 3));
    }
    /* GATHER, GATHER_GRAD (cuda_gather.cu): indices drawn as labels in [0,
     * classes) (classes the params' rows: repeats), int32 words, a
     * 0-dimensional index, 2-D indices, indices outside the rows (zeros;
     * their gradient dropped), params without rows or without columns, no
     * index; the gradient with fewer sets of rows than rows (rows dealt
     * round), and rows wider than the threads it aims for (one set) */
    {
        int64_t v = BIG(1000, 300), n = BIG(3000, 500);
        CASE("[1000,64] by [3000]", VDEV_OP_GATHER, none, v, TF(G_UNIFORM, 2, v, 64),
             TI(G_LABEL, 1, n));
        CASE("i32 words [50] by [7,9]", VDEV_OP_GATHER, none, 50, TI(G_LABEL, 1, 50),
             TI(G_LABEL, 2, 7, 9));
        CASE("[30,2,5] by a scalar", VDEV_OP_GATHER, none, 30, TF(G_UNIFORM, 3, 30, 2, 5),
             TI(G_LABEL, 0, 1));
        CASE("an index outside: zeros", VDEV_OP_GATHER, none, 40, TF(G_UNIFORM, 2, 40, 33),
             TI(G_BADLABEL, 1, 41));
        CASE("no row, indices outside: zeros", VDEV_OP_GATHER, none, 0, TF(G_UNIFORM, 2, 0, 5),
             TI(G_LABEL, 1, 3));
        CASE("no column", VDEV_OP_GATHER, none, 5, TF(G_UNIFORM, 2, 5, 0), TI(G_LABEL, 1, 3));
        CASE("no index", VDEV_OP_GATHER, none, 5, TF(G_UNIFORM, 2, 5, 3), TI(G_LABEL, 1, 0));
        CASE("a scalar of [50] by a scalar", VDEV_OP_GATHER, none, 50, TF(G_UNIFORM, 1, 50),
             TI(G_LABEL, 0, 1));
        CASE("large: more words than threads", VDEV_OP_GATHER, none, BIG(20000, 300),
             TF(G_UNIFORM, 2, BIG(20000, 300), 64), TI(G_LABEL, 1, BIG(30000, 500)));
        int64_t r = BIG(5000, 3000), k = BIG(4000, 300);
        CASE("[5000,33]: rows dealt round", VDEV_OP_GATHER_GRAD, none, r,
             TF(G_UNIFORM, 2, k, 33), TI(G_LABEL, 1, k), TF(G_UNIFORM, 2, r, 33));
        CASE("[50,64], many repeats", VDEV_OP_GATHER_GRAD, none, 50, TF(G_UNIFORM, 2, n, 64),
             TI(G_LABEL, 1, n), TF(G_UNIFORM, 2, 50, 64));
        CASE("rows of 70000: one set", VDEV_OP_GATHER_GRAD, none, 3,
             TF(G_UNIFORM, 2, 9, BIG(70000, 70000)), TI(G_LABEL, 1, 9),
             TF(G_UNIFORM, 2, 3, BIG(70000, 70000)));
        CASE("[2,5] into [7,3,4]", VDEV_OP_GATHER_GRAD, none, 7, TF(G_UNIFORM, 4, 2, 5, 3, 4),
             TI(G_LABEL, 2, 2, 5), TF(G_UNIFORM, 3, 7, 3, 4));
        CASE("an index outside: dropped", VDEV_OP_GATHER_GRAD, none, 40,
             TF(G_UNIFORM, 2, 41, 33), TI(G_BADLABEL, 1, 41), TF(G_UNIFORM, 2, 40, 33));
        CASE("no index: zeros", VDEV_OP_GATHER_GRAD, none, 7, TF(G_UNIFORM, 2, 0, 5),
             TI(G_LABEL, 1, 0), TF(G_UNIFORM, 2, 7, 5));
        CASE("a scalar into [7]", VDEV_OP_GATHER_GRAD, none, 7, TF(G_UNIFORM, 0, 1),
             TI(G_LABEL, 0, 1), TF(G_UNIFORM, 1, 7));
        /* rows of one word: more rows than sets (65536), dealt round */
        int64_t v1 = BIG(200000, 70001);
        CASE("[70001] by [500]: rows of one word", VDEV_OP_GATHER_GRAD, none, v1,
             TF(G_UNIFORM, 1, BIG(3000, 500)), TI(G_LABEL, 1, BIG(3000, 500)),
             TF(G_UNIFORM, 1, v1));
    }
    /* TRANSPOSE by a permutation (cuda_concat.cu; {1, 0} of a 2-D tensor
     * takes the tiled kernel): every rank, int32 words, empty */
    CASE("[3,4,5,6] by {3,1,0,2}", VDEV_OP_TRANSPOSE, perm_params(4, (int64_t[]){3, 1, 0, 2}),
         0, TF(G_UNIFORM, 4, 3, 4, 5, 6));
    CASE("[33,2,65] by {2,0,1}", VDEV_OP_TRANSPOSE, perm_params(3, (int64_t[]){2, 0, 1}), 0,
         TF(G_UNIFORM, 3, 33, 2, 65));
    CASE("i32 [7,9,4] by {1,2,0}", VDEV_OP_TRANSPOSE, perm_params(3, (int64_t[]){1, 2, 0}),
         1000, TI(G_LABEL, 3, 7, 9, 4));
    CASE("[300,70] by {0,1}", VDEV_OP_TRANSPOSE, perm_params(2, (int64_t[]){0, 1}), 0,
         TF(G_UNIFORM, 2, 300, 70));
    CASE("[33,65] by {1,0}", VDEV_OP_TRANSPOSE, perm_params(2, (int64_t[]){1, 0}), 0,
         TF(G_UNIFORM, 2, 33, 65));
    CASE("[17] by {0}", VDEV_OP_TRANSPOSE, perm_params(1, (int64_t[]){0}), 0,
         TF(G_UNIFORM, 1, 17));
    CASE("a scalar", VDEV_OP_TRANSPOSE, perm_params(0, NULL), 0, TF(G_UNIFORM, 0, 1));
    CASE("[0,5,3] by {2,1,0}", VDEV_OP_TRANSPOSE, perm_params(3, (int64_t[]){2, 1, 0}), 0,
         TF(G_UNIFORM, 3, 0, 5, 3));
    CASE("large NHWC to NCHW", VDEV_OP_TRANSPOSE, perm_params(4, (int64_t[]){0, 3, 1, 2}), 0,
         TF(G_UNIFORM, 4, BIG(16, 2), BIG(64, 16), BIG(64, 16), BIG(32, 40)));
    /* 2-D convolution and pooling (cuda_conv.cu): strides 1 and 2, both
     * paddings, batches and channels above 1, a 1x1 window, an empty batch
     * and a window larger than the input (an empty output, the input's
     * gradients zeros) */
    for (int v = 0; v < 4; v++) {
        int64_t s = v & 1 ? 2 : 1, nb = BIG(8, 2), h = BIG(30, 9), w = BIG(27, 7);
        int64_t c = BIG(16, 3), o = BIG(24, 5);
        int same = (v & 2) != 0;
        struct vdev_op_params pc = conv_params(same, s, s, 0, 0);
        struct vdev_op_params pp = conv_params(same, 3, 2, s, s);
        int64_t oh = conv_dim(h, 3, s, same), ow = conv_dim(w, 2, s, same);
        const char *what = same ? "SAME" : "VALID";
        CASE(what, VDEV_OP_CONV2D, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o));
        CASE(what, VDEV_OP_CONV2D_BACKPROP_INPUT, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o), TF(G_UNIFORM, 4, nb, oh, ow, o));
        CASE(what, VDEV_OP_CONV2D_BACKPROP_FILTER, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o), TF(G_UNIFORM, 4, nb, oh, ow, o));
        CASE(what, VDEV_OP_MAX_POOL, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("ties", VDEV_OP_MAX_POOL, pp, 0, TF(G_TIES, 4, nb, h, w, c));
        CASE(what, VDEV_OP_AVG_POOL, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c));
        CASE(what, VDEV_OP_MAX_POOL_GRAD, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, oh, ow, c), TF(G_UNIFORM, 4, nb, oh, ow, c));
        CASE("ties", VDEV_OP_MAX_POOL_GRAD, pp, 0, TF(G_TIES, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, oh, ow, c), TF(G_UNIFORM, 4, nb, oh, ow, c));
        CASE(what, VDEV_OP_AVG_POOL_GRAD, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, oh, ow, c));
    }
    struct vdev_op_params c1 = conv_params(0, 1, 1, 0, 0), c2 = conv_params(1, 2, 2, 0, 0);
    CASE("1x1", VDEV_OP_CONV2D, c1, 0, TF(G_UNIFORM, 4, 2, 5, 6, 7), TF(G_UNIFORM, 4, 1, 1, 7, 3));
    CASE("1x1 stride 2", VDEV_OP_CONV2D, c2, 0, TF(G_UNIFORM, 4, 2, 5, 6, 7),
         TF(G_UNIFORM, 4, 1, 1, 7, 3));
    CASE("empty batch", VDEV_OP_CONV2D, c1, 0, TF(G_UNIFORM, 4, 0, 5, 6, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3));
    CASE("empty batch", VDEV_OP_CONV2D_BACKPROP_FILTER, c1, 0, TF(G_UNIFORM, 4, 0, 5, 6, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3), TF(G_UNIFORM, 4, 0, 3, 4, 3));
    struct vdev_op_params c3 = conv_params(0, 2, 2, 0, 0), p3 = conv_params(0, 3, 3, 2, 2);
    CASE("empty output", VDEV_OP_CONV2D, c3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3));
    CASE("empty output", VDEV_OP_CONV2D_BACKPROP_INPUT, c3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3), TF(G_UNIFORM, 4, 2, 0, 0, 3));
    CASE("empty output", VDEV_OP_CONV2D_BACKPROP_FILTER, c3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3), TF(G_UNIFORM, 4, 2, 0, 0, 3));
    CASE("empty output", VDEV_OP_MAX_POOL_GRAD, p3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 2, 0, 0, 2), TF(G_UNIFORM, 4, 2, 0, 0, 2));
    CASE("empty output", VDEV_OP_AVG_POOL_GRAD, p3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 2, 0, 0, 2));
    /* no output channels: an empty output (a launch with nothing to do), the
     * input's gradient zeros */
    CASE("no output channel", VDEV_OP_CONV2D, c1, 0, TF(G_UNIFORM, 4, 2, 5, 6, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 0));
    CASE("no output channel: zeros", VDEV_OP_CONV2D_BACKPROP_INPUT, c1, 0,
         TF(G_UNIFORM, 4, 2, 5, 6, 2), TF(G_UNIFORM, 4, 3, 3, 2, 0),
         TF(G_UNIFORM, 4, 2, 3, 4, 0));
    /* an empty batch of height 2^63 - 1 (a shape TensorFlow's rule allows):
     * the output's height, ceil(in / 2) for SAME and (in - 3) / 2 + 1 for
     * VALID, computed without passing INT64_MAX; the filter's gradient zeros */
    struct vdev_op_params s2 = conv_params(1, 2, 2, 0, 0), v2 = conv_params(0, 2, 2, 0, 0);
    CASE("empty batch, height 2^63-1, SAME", VDEV_OP_CONV2D_BACKPROP_FILTER, s2, 0,
         TF(G_UNIFORM, 4, 0, INT64_MAX, 5, 2), TF(G_UNIFORM, 4, 3, 3, 2, 3),
         TF(G_UNIFORM, 4, 0, INT64_MAX / 2 + 1, 3, 3));
    CASE("empty batch, height 2^63-1, VALID", VDEV_OP_CONV2D_BACKPROP_FILTER, v2, 0,
         TF(G_UNIFORM, 4, 0, INT64_MAX, 5, 2), TF(G_UNIFORM, 4, 3, 3, 2, 3),
         TF(G_UNIFORM, 4, 0, (INT64_MAX - 3) / 2 + 1, 2, 3));
    /* more elements than the grid has threads (2112 blocks of 256 on an
     * H100, 32 in the emulation): each thread takes several */
    {
        int64_t nb = BIG(16, 2), h = BIG(64, 24), w = BIG(64, 24), c = BIG(16, 8);
        struct vdev_op_params ps = conv_params(1, 1, 1, 0, 0);
        struct vdev_op_params pp = conv_params(1, 3, 3, 1, 1);
        CASE("large", VDEV_OP_CONV2D, ps, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 3, c, c));
        CASE("large", VDEV_OP_CONV2D_BACKPROP_INPUT, ps, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 3, c, c), TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("large", VDEV_OP_MAX_POOL, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("large", VDEV_OP_AVG_POOL, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("large", VDEV_OP_MAX_POOL_GRAD, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, h, w, c), TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("large", VDEV_OP_AVG_POOL_GRAD, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, h, w, c));
        /* a filter of more elements than threads, a small image */
        int64_t cf = BIG(256, 32), hf = BIG(8, 6);
        struct vdev_op_params pv = conv_params(0, 1, 1, 0, 0);
        CASE("large filter", VDEV_OP_CONV2D_BACKPROP_FILTER, pv, 0,
             TF(G_UNIFORM, 4, 1, hf, hf, cf), TF(G_UNIFORM, 4, 3, 3, cf, cf),
             TF(G_UNIFORM, 4, 1, hf - 2, hf - 2, cf));
    }
}

/* Prints cases and the largest error per op; every op must have a case. */
static void op_report(void)
{
    printf("%-36s %6s %12s %10s %10s\n", "op", "cases", "max |err|", "atol", "rtol");
    for (int op = 0; op < VDEV_OP_COUNT; op++) {
        double atol, rtol;
        op_tol(op, 512, &atol, &rtol);
        printf("%-36s %6d %12.3g %10.3g %10.3g%s\n", vdev_op_defs[op].name, stats[op].cases,
               stats[op].max_err, atol, rtol, op == VDEV_OP_MATMUL ? " (atol for k=512)" : "");
        if (!stats[op].cases)
            check_fail(__FILE__, __LINE__, "op %s has no test case", vdev_op_defs[op].name);
    }
}
#endif /* VDEV_OP_CASES_H */
