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
    G_CMP,      /* a few floats, so equal pairs are common: +-0, +-1, 0.5, +-inf, NaN */
    G_INTS,     /* i32 from a few values with int32's ends */
    G_BIGF,     /* floats beyond int32, fractions, -0 and NaN: casts */
    G_BIGI,     /* i32 that float rounds (beyond 2^24) among small ones: casts */
    G_BOOL,     /* bool words, 0 or 1 */
    G_HALVES,   /* halves of both signs, -0, big and small values: rounding */
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
#define TB(nd, ...) ((struct tin){G_BOOL, VDEV_BOOL, nd, {__VA_ARGS__}})

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
        case G_CMP: {
            static const float v[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, INFINITY, -INFINITY, NAN};
            f[i] = v[(int)(8 * u)];
            break;
        }
        case G_INTS: {
            static const int32_t v[] = {0, 1, -1, 7, 2147483647, -2147483647 - 1, 2, -7};
            l[i] = v[(int)(8 * u)];
            break;
        }
        case G_BIGF: {
            static const float v[] = {3e9f,  -3e9f, 2147483648.0f, -2147483648.0f, 7.9f,
                                      -7.9f, -0.0f, NAN,           INFINITY,       -INFINITY};
            f[i] = i % 2 ? v[(int)(10 * u)] : (float)(200 * u - 100);
            break;
        }
        case G_BIGI: {
            static const int32_t v[] = {16777217, -16777217, 2147483520, 2147483647, 123456789, 3};
            l[i] = v[(int)(6 * u)];
            break;
        }
        case G_BOOL: l[i] = u < 0.5; break;
        case G_HALVES: {
            static const float v[] = {0.5f, -0.5f, 1.5f, -2.5f, 2.5f, -0.0f, 1e30f, 3.49f,
                                      -7.5f, 2.0f, 0.0f, -3.0f};
            f[i] = v[(int)(12 * u)];
            break;
        }
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
    case VDEV_OP_BATCH_MATMUL:
        *atol = 1e-6 * (double)(k > 0 ? k : 1);
        *rtol = 1e-5;
        return;
    case VDEV_OP_EXP:
    case VDEV_OP_LOG:
    case VDEV_OP_ERF:
    case VDEV_OP_SOFTPLUS:
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
    case VDEV_OP_DEPTHWISE_CONV2D:
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT:
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER:
    case VDEV_OP_CONV2D_TRANSPOSE:
    case VDEV_OP_MAX_POOL_GRAD:
    case VDEV_OP_AVG_POOL_GRAD:
        *atol = 1e-7;
        *rtol = 1e-6;
        return;
    case VDEV_OP_LSTM_GATES: /* sigmoid and tanh */
    case VDEV_OP_GRU_GATES:
        *atol = 1e-30;
        *rtol = 2.4e-7;
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
        if (dtype != VDEV_F32) { /* int32, bool: the same word */
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
            if (dtype != VDEV_F32)
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

#include "op_cases_shaped.h"
#include "op_cases_depthwise.h"

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
    /* BATCH_MATMUL: every transpose, either batch of 1 broadcast, empty batch, k = 0 */
    CASE("NN", VDEV_OP_BATCH_MATMUL, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 3, 4, 16, 24),
         TF(G_UNIFORM, 3, 4, 24, 8));
    CASE("TT, x's batch of 1", VDEV_OP_BATCH_MATMUL, P(0, 0, 1, 1), 0,
         TF(G_UNIFORM, 3, 1, 24, 16), TF(G_UNIFORM, 3, 5, 8, 24));
    CASE("TN, y's batch of 1", VDEV_OP_BATCH_MATMUL, P(0, 0, 1, 0), 0,
         TF(G_UNIFORM, 3, 3, 24, 16), TF(G_UNIFORM, 3, 1, 24, 8));
    CASE("NT", VDEV_OP_BATCH_MATMUL, P(0, 0, 0, 1), 0, TF(G_UNIFORM, 3, 2, 16, 24),
         TF(G_UNIFORM, 3, 2, 8, 24));
    CASE("empty batch", VDEV_OP_BATCH_MATMUL, none, 0, TF(G_UNIFORM, 3, 0, 3, 4),
         TF(G_UNIFORM, 3, 0, 4, 5));
    CASE("k=0", VDEV_OP_BATCH_MATMUL, none, 0, TF(G_UNIFORM, 3, 2, 3, 0),
         TF(G_UNIFORM, 3, 2, 0, 5));
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
        if (op == VDEV_OP_DIV)
            continue;
        /* int32, wrapping at int32's ends, every broadcast mode */
        CASE("int32 same shape", op, none, 0, TI(G_INTS, 2, 33, 47), TI(G_INTS, 2, 33, 47));
        CASE("int32 row", op, none, 0, TI(G_INTS, 2, 33, 47), TI(G_INTS, 1, 47));
        CASE("int32 [3,1] by [1,4]", op, none, 0, TI(G_INTS, 2, 3, 1), TI(G_INTS, 2, 1, 4));
        CASE("int32 0-d by [2,3]", op, none, 0, TI(G_INTS, 0, 0), TI(G_INTS, 2, 2, 3));
        CASE("int32 no element", op, none, 0, TI(G_INTS, 2, 0, 3), TI(G_INTS, 1, 3));
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
    CASE("wide", VDEV_OP_ERF, none, 0, TF(G_WIDE, 2, 20, 30));
    CASE("NaN, inf, -0", VDEV_OP_ERF, none, 0, TF(G_SPECIAL, 2, 20, 30));
    CASE("(-1, 1)", VDEV_OP_ERF, none, 0, TF(G_UNIFORM, 3, 4, 5, 6));
    CASE("wide: all three ranges", VDEV_OP_SOFTPLUS, none, 0, TF(G_WIDE, 2, 20, 30));
    CASE("NaN, inf, -0", VDEV_OP_SOFTPLUS, none, 0, TF(G_SPECIAL, 2, 20, 30));
    CASE("0-d", VDEV_OP_SOFTPLUS, none, 0, TF(G_POS, 0, 0));
    CASE("empty", VDEV_OP_ERF, none, 0, TF(G_WIDE, 2, 0, 5));

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
    op_cases_shaped();
    op_cases_depthwise();
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
