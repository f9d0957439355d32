/* test_cuda.c — the CUDA plugin (src/backend/cuda/).
 *
 * Everywhere (no GPU needed):
 *  - the plugin library, when it was built, dlopens on its own and exports
 *    vdev_cuda_plugin_open, and nothing of its insides; it refuses another
 *    backend API version with a reason;
 *  - without a usable GPU, vdev_backend_cuda_new fails with a one-line reason
 *    that starts "CUDA plugin:", the core falls back to the CPU (one physical
 *    device, ops on CPU:0) and vdev_gpu_absence_reason() says the same thing.
 * Then, without a GPU, the test prints the reason and exits 77 (ctest: skipped).
 *
 * With a GPU (and VDEV_SIM_GPUS unset, which this test makes sure of):
 *  - every op of src/ops/op_ids.h, run with vdev_op_run on GPU:0 (the CUDA
 *    kernels) and with its CPU reference kernel (vdev_op_defs[op].ref) on the
 *    same random inputs, several shapes each, chosen to reach every code path of the
 *    kernels (broadcast modes, axes, short and long rows, one-block and
 *    multi-block reductions, transposes, empty tensors, NaN and bad labels);
 *    outputs agree within the tolerance stated per op in op_tol();
 *  - an op the plugin has no kernel for is VDEV_ERR_UNSUPPORTED;
 *  - host functions, events and copies of every size through the staging
 *    buffers;
 *  - growth through CUDA virtual memory: reserved memory grows with use and
 *    stays one region (grown in place), the card's free memory falls with it,
 *    and vdev_memory_release_cached hands it back (free memory rises again);
 *  - preallocation: the whole limit reserved at start-up;
 *  - one GPU split into three logical GPUs of 1 GiB
 *    (VDEV_LOGICAL_DEVICES="0:1GiB,1GiB,1GiB"): an allocation past 1 GiB on
 *    GPU:1 fails with VDEV_ERR_OOM while GPU:0 is untouched, and tensors copy
 *    between the logical GPUs of the one card. */
#define _GNU_SOURCE
#include "check.h"
#include "backend/backend.h"
#include "config/config.h"
#include "ops/ops.h"

#include <dlfcn.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* Starts a case over with no VDEV_* or TF_* variable set: VDEV_SIM_GPUS
 * above all, since the real GPU is wanted here. */
static void fresh(void) { check_fresh(NULL); }

/* ---- the plugin library itself ---- */

static void test_plugin_library(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/libvdev-cuda.so", VDEV_BINARY_DIR);
    if (access(path, F_OK) != 0) {
        printf("note: %s was not built (no CUDA toolkit at configure time)\n", path);
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    CHECK(h != NULL);
    if (!h)
        return;
    vdev_cuda_plugin_open_fn open_fn;
    *(void **)(&open_fn) = dlsym(h, VDEV_CUDA_PLUGIN_SYMBOL);
    CHECK(open_fn != NULL);
    /* Its insides stay hidden (a version script exports one symbol). */
    CHECK(dlsym(h, "vdev_cuda_run_op") == NULL);
    CHECK(dlsym(h, "vdev_cuda_blas_create") == NULL);
    if (open_fn) {
        struct vdev_backend b;
        char reason[256] = "";
        CHECK(open_fn(VDEV_BACKEND_API_VERSION + 1, &b, reason, sizeof reason, vdev_error) != VDEV_OK);
        CHECK(strstr(reason, "CUDA plugin: built for backend API") != NULL);
        CHECK(b.ops == NULL);
    }
    /* Kept loaded, as the core keeps it. */
}

/* ---- without a GPU ---- */

static void test_fallback(const char *reason)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/libvdev-cuda.so", VDEV_BINARY_DIR);
    CHECK(reason[0] != '\0');
    CHECK(strchr(reason, '\n') == NULL);
    CHECK(strncmp(reason, "CUDA plugin: ", 13) == 0);
    if (access(path, F_OK) == 0) /* built: the plugin itself explains */
        CHECK(strstr(reason, "not built or not found") == NULL);
    printf("no GPU: %s\n", reason);

    fresh();
    struct vdev_physical_device pd[8];
    int n = -1;
    CHECK_OK(vdev_list_physical_devices(pd, 8, &n));
    CHECK(n == 1);
    CHECK_STR(vdev_gpu_absence_reason(), reason);
    /* Ops run on the CPU. */
    int64_t shape[1] = {4};
    vdev_tensor_t *a = vdev_tensor_ones(shape, 1, VDEV_F32);
    vdev_tensor_t *s = vdev_add(a, a);
    CHECK(s != NULL);
    if (s) {
        CHECK_STR(vdev_tensor_device(s), "/device:CPU:0");
        float v[4] = {0};
        CHECK_OK(vdev_tensor_to_host(s, v, sizeof v));
        CHECK(v[0] == 2.0f && v[3] == 2.0f);
    }
    vdev_tensor_free(s);
    vdev_tensor_free(a);
    fresh();
}

/* ---- every op against the reference ---- */

enum gen {
    G_UNIFORM, /* (-1, 1) */
    G_POS,     /* (0.1, 2) */
    G_NONZERO, /* +-(0.5, 2) */
    G_WIDE,    /* (-20, 20) */
    G_NEG,     /* (-6, 0): log-probabilities */
    G_PROB,    /* (0, 1) */
    G_SPECIAL, /* uniform with NaN, +-inf, +-0 sprinkled in */
    G_TIES,    /* {0, 1, 2} with an occasional NaN: argmax ties */
    G_LABEL,   /* i32 in [0, C) */
    G_BADLABEL /* i32 in [0, C), one of them C */
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
        case G_BADLABEL: l[i] = i == n / 2 ? (int32_t)classes : (int32_t)(u * (double)classes);
            break;
        }
    }
    return p;
}

/* Tolerances per op: |gpu - cpu| <= atol + rtol |cpu|; NaN must meet NaN and
 * an infinity the same infinity. Why each:
 *  - exact: float + - * / and moves (the reference rounds the double result
 *    once, which for these equals the float operation the kernels do), and
 *    the double-arithmetic gradients and updates the kernels compute in the
 *    same order without FMA contraction (--fmad=false);
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
    return fabs((double)g - (double)c) <= atol + rtol * fabs((double)c);
}

static vdev_tensor_t *tensor_on(const char *dev, const struct tin *t, const void *host)
{
    if (vdev_device_push(dev) != VDEV_OK)
        return NULL;
    vdev_tensor_t *x = vdev_tensor_from_host(host, t->shape, t->ndim, (enum vdev_dtype)t->dtype);
    vdev_device_pop();
    return x;
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
                fprintf(stderr, "%s: element %lld: GPU %.9g, CPU %.9g (atol %g, rtol %g)\n",
                        what, (long long)i, ((const float *)gpu)[i], ((const float *)cpu)[i],
                        atol, rtol);
        }
    }
    return bad;
}

struct op_stats {
    int cases;
    double max_err;
};
static struct op_stats stats[VDEV_OP_COUNT];

/* Runs op on GPU:0 through vdev_op_run (the CUDA kernel) and the op's CPU
 * reference kernel (vdev_op_defs[op].ref, called directly on host copies of
 * the same inputs, so it is the specification itself and not a faster host
 * kernel such as OpenBLAS), and compares the outputs (for in-place ops: the
 * inputs they write). `classes` is C for label inputs. */
static void run_case(const char *what, enum vdev_op op, int n_in, const struct tin *ins,
                     struct vdev_op_params p, int64_t classes)
{
    const struct vdev_op_def *def = &vdev_op_defs[op];
    void *host[VDEV_KERNEL_MAX_IN] = {0}, *ref_io[VDEV_KERNEL_MAX_IN] = {0};
    vdev_tensor_t *tg[VDEV_KERNEL_MAX_IN] = {0};
    void *ref_out = NULL;
    int ok = 1;
    for (int k = 0; k < n_in; k++) {
        host[k] = make_host(&ins[k], classes);
        tg[k] = tensor_on("GPU:0", &ins[k], host[k]);
        ok &= tg[k] != NULL;
    }
    char label[160];
    snprintf(label, sizeof label, "%s (%s)", def->name, what);
    if (!ok) {
        check_fail(__FILE__, __LINE__, "%s: inputs: %s", label, vdev_last_error());
        goto out;
    }

    /* The reference: kernel arguments as the dispatcher makes them (the
     * shape rule normalises axes and sets the broadcast mode), pointing at
     * host memory. */
    struct vdev_kernel_args ka;
    {
        const vdev_tensor_t *ig[VDEV_KERNEL_MAX_IN];
        for (int k = 0; k < n_in; k++)
            ig[k] = tg[k];
        vdev_kernel_args_init(&ka, op, ig, n_in, &p);
    }
    for (int k = 0; k < n_in; k++)
        ka.in[k] = host[k];
    if (def->shape(&ka) != VDEV_OK) {
        check_fail(__FILE__, __LINE__, "%s: shape rule: %s", label, vdev_last_error());
        goto out;
    }
    int64_t k_dim = op == VDEV_OP_MATMUL ? ins[0].shape[p.i[0] ? 0 : 1] : 0;
    double atol, rtol;
    op_tol(op, k_dim, &atol, &rtol);
    stats[op].cases++;

    if (def->flags & VDEV_OP_INPLACE) {
        for (int k = 0; k < n_in; k++) {
            size_t bytes = (size_t)numel_of(&ins[k]) * 4;
            ref_io[k] = malloc(bytes ? bytes : 4);
            memcpy(ref_io[k], host[k], bytes);
            if (k < VDEV_KERNEL_MAX_OUT)
                ka.out[k] = ref_io[k];
            ka.in[k] = ref_io[k];
        }
        if (numel_of(&ins[0]))
            def->ref(&ka);
        CHECK_OK(vdev_op_run_inplace(op, tg, n_in, &p));
        for (int k = 0; k < n_in; k++) {
            if (k == 1)
                continue; /* the gradient is read, not written */
            int64_t n = numel_of(&ins[k]);
            float *g = malloc((size_t)n * 4);
            CHECK_OK(vdev_tensor_to_host(tg[k], g, (size_t)n * 4));
            char l2[200];
            snprintf(l2, sizeof l2, "%s input #%d", label, k);
            CHECK(compare(l2, VDEV_F32, g, ref_io[k], n, atol, rtol, &stats[op].max_err) == 0);
            free(g);
        }
        goto out;
    }
    {
        int64_t n = 1;
        for (int d = 0; d < ka.out_ndim[0]; d++)
            n *= ka.out_shape[0][d];
        ref_out = malloc((size_t)(n ? n : 1) * 4);
        ka.out[0] = ref_out;
        if (n)
            def->ref(&ka);
        const vdev_tensor_t *ig[VDEV_KERNEL_MAX_IN];
        for (int k = 0; k < n_in; k++)
            ig[k] = tg[k];
        vdev_tensor_t *og = vdev_op_run(op, ig, n_in, &p);
        if (!og) {
            check_fail(__FILE__, __LINE__, "%s on GPU:0: %s", label, vdev_last_error());
            goto out;
        }
        CHECK_STR(vdev_tensor_device(og), "/device:GPU:0");
        CHECK(vdev_tensor_numel(og) == n);
        CHECK((int)vdev_tensor_dtype(og) == ka.out_dtype[0]);
        void *g = malloc((size_t)(n ? n : 1) * 4);
        CHECK_OK(vdev_tensor_to_host(og, g, (size_t)n * 4));
        int64_t bad = compare(label, ka.out_dtype[0], g, ref_out, n, atol, rtol,
                              &stats[op].max_err);
        if (bad)
            check_fail(__FILE__, __LINE__, "%s: %lld of %lld elements differ", label,
                       (long long)bad, (long long)n);
        else
            check_passed++;
        free(g);
        vdev_tensor_free(og);
    }
out:
    free(ref_out);
    for (int k = 0; k < n_in; k++) {
        vdev_tensor_free(tg[k]);
        free(host[k]);
        free(ref_io[k]);
    }
}

static struct vdev_op_params P(double f0, double f1, int64_t i0, int64_t i1)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.f[0] = f0;
    p.f[1] = f1;
    p.i[0] = i0;
    p.i[1] = i1;
    return p;
}

#define CASE(what, op, p, classes, ...)                                                            \
    do {                                                                                           \
        const struct tin ins_[] = {__VA_ARGS__};                                                   \
        run_case(what, op, (int)(sizeof ins_ / sizeof ins_[0]), ins_, p, classes);                \
    } while (0)

#define ALL VDEV_AXIS_ALL

static void test_ops(void)
{
    struct vdev_op_params none = P(0, 0, 0, 0);

    /* MATMUL: every transpose, a ragged size, k = 0, 1x1 */
    CASE("NN", VDEV_OP_MATMUL, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 2, 64, 96), TF(G_UNIFORM, 2, 96, 80));
    CASE("TN", VDEV_OP_MATMUL, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, 96, 64), TF(G_UNIFORM, 2, 96, 80));
    CASE("NT", VDEV_OP_MATMUL, P(0, 0, 0, 1), 0, TF(G_UNIFORM, 2, 64, 96), TF(G_UNIFORM, 2, 80, 96));
    CASE("TT", VDEV_OP_MATMUL, P(0, 0, 1, 1), 0, TF(G_UNIFORM, 2, 96, 64), TF(G_UNIFORM, 2, 80, 96));
    CASE("ragged", VDEV_OP_MATMUL, none, 0, TF(G_UNIFORM, 2, 300, 513), TF(G_UNIFORM, 2, 513, 257));
    CASE("k=0", VDEV_OP_MATMUL, none, 0, TF(G_UNIFORM, 2, 3, 0), TF(G_UNIFORM, 2, 0, 5));
    CASE("1x1", VDEV_OP_MATMUL, none, 0, TF(G_UNIFORM, 2, 1, 1), TF(G_UNIFORM, 2, 1, 1));

    /* binary ops: the three broadcast modes, and 0-d */
    static const enum vdev_op bin[] = {VDEV_OP_ADD, VDEV_OP_SUB, VDEV_OP_MUL, VDEV_OP_DIV};
    for (int i = 0; i < 4; i++) {
        enum vdev_op op = bin[i];
        int gb = op == VDEV_OP_DIV ? G_NONZERO : G_UNIFORM;
        CASE("same shape", op, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(gb, 2, 33, 47));
        CASE("row [n]", op, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(gb, 1, 47));
        CASE("row [1,n]", op, none, 0, TF(G_UNIFORM, 3, 5, 7, 9), TF(gb, 2, 1, 9));
        CASE("one element", op, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(gb, 1, 1));
        CASE("0-d", op, none, 0, TF(G_UNIFORM, 0, 0), TF(gb, 0, 0));
        CASE("large", op, none, 0, TF(G_UNIFORM, 1, 1000003), TF(gb, 1, 1000003));
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

    /* row-wise: short rows (a warp a row), long rows (a block), 1-D, 3-D */
    static const enum vdev_op rowops[] = {VDEV_OP_SOFTMAX, VDEV_OP_LOG_SOFTMAX};
    for (int i = 0; i < 2; i++) {
        CASE("[37,10]", rowops[i], none, 0, TF(G_WIDE, 2, 37, 10));
        CASE("[5,3000]", rowops[i], none, 0, TF(G_WIDE, 2, 5, 3000));
        CASE("[4,2,1500]", rowops[i], none, 0, TF(G_UNIFORM, 3, 4, 2, 1500));
        CASE("[7]", rowops[i], none, 0, TF(G_UNIFORM, 1, 7));
        CASE("many rows", rowops[i], none, 0, TF(G_UNIFORM, 2, 20000, 16));
        CASE("NaN, inf", rowops[i], none, 0, TF(G_SPECIAL, 2, 9, 13));
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
    }

    /* layout */
    struct vdev_op_params rs = P(2, 0, 6, -1);
    CASE("[3,4,2]->[6,-1]", VDEV_OP_RESHAPE, rs, 0, TF(G_UNIFORM, 3, 3, 4, 2));
    CASE("[33,65]", VDEV_OP_TRANSPOSE, none, 0, TF(G_UNIFORM, 2, 33, 65));
    CASE("[1,100]", VDEV_OP_TRANSPOSE, none, 0, TF(G_UNIFORM, 2, 1, 100));
    CASE("[1000,3]", VDEV_OP_TRANSPOSE, none, 0, TF(G_UNIFORM, 2, 1000, 3));
    CASE("i32 [7,9]", VDEV_OP_TRANSPOSE, none, 100, TI(G_LABEL, 2, 7, 9));
    CASE("f32", VDEV_OP_IDENTITY, none, 0, TF(G_UNIFORM, 2, 100, 3));
    CASE("i32", VDEV_OP_IDENTITY, none, 1000, TI(G_LABEL, 1, 10));

    /* losses */
    CASE("[50,40]", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 2, 50, 40), TF(G_UNIFORM, 2, 50, 40));
    CASE("1M", VDEV_OP_MSE, none, 0, TF(G_UNIFORM, 1, 1 << 20), TF(G_UNIFORM, 1, 1 << 20));
    CASE("[64,10]", VDEV_OP_SOFTMAX_CE, none, 10, TF(G_WIDE, 2, 64, 10), TI(G_LABEL, 1, 64));
    CASE("[8,3000]", VDEV_OP_SOFTMAX_CE, none, 3000, TF(G_UNIFORM, 2, 8, 3000),
         TI(G_LABEL, 1, 8));
    CASE("[5000,5]", VDEV_OP_SOFTMAX_CE, none, 5, TF(G_UNIFORM, 2, 5000, 5), TI(G_LABEL, 1, 5000));
    CASE("bad label", VDEV_OP_SOFTMAX_CE, none, 10, TF(G_UNIFORM, 2, 16, 10),
         TI(G_BADLABEL, 1, 16));
    CASE("no rows", VDEV_OP_SOFTMAX_CE, none, 10, TF(G_UNIFORM, 2, 0, 10), TI(G_LABEL, 1, 0));

    /* ARGMAX: ties and NaN, short and long rows */
    CASE("ties, NaN", VDEV_OP_ARGMAX, none, 0, TF(G_TIES, 2, 50, 10));
    CASE("long rows", VDEV_OP_ARGMAX, none, 0, TF(G_UNIFORM, 2, 4, 3000));
    CASE("ties, long rows", VDEV_OP_ARGMAX, none, 0, TF(G_TIES, 2, 6, 2000));
    CASE("special", VDEV_OP_ARGMAX, none, 0, TF(G_SPECIAL, 2, 6, 33));

    /* gradient helpers */
    CASE("", VDEV_OP_RELU_GRAD, none, 0, TF(G_UNIFORM, 2, 20, 30), TF(G_SPECIAL, 2, 20, 30));
    CASE("", VDEV_OP_TANH_GRAD, none, 0, TF(G_UNIFORM, 2, 20, 30), TF(G_UNIFORM, 2, 20, 30));
    CASE("", VDEV_OP_SIGMOID_GRAD, none, 0, TF(G_UNIFORM, 2, 20, 30), TF(G_PROB, 2, 20, 30));
    CASE("[37,10]", VDEV_OP_SOFTMAX_GRAD, none, 0, TF(G_UNIFORM, 2, 37, 10),
         TF(G_PROB, 2, 37, 10));
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
    CASE("all", VDEV_OP_BROADCAST, P(0, 0, ALL, 0), 0, TF(G_UNIFORM, 1, 1),
         TF(G_UNIFORM, 2, 4, 6));
    CASE("", VDEV_OP_MSE_GRAD, none, 0, TF(G_UNIFORM, 0, 0), TF(G_UNIFORM, 2, 20, 30),
         TF(G_UNIFORM, 2, 20, 30));
    CASE("[64,10]", VDEV_OP_SOFTMAX_CE_GRAD, none, 10, TF(G_UNIFORM, 0, 0),
         TF(G_WIDE, 2, 64, 10), TI(G_LABEL, 1, 64));
    CASE("[4,3000]", VDEV_OP_SOFTMAX_CE_GRAD, none, 3000, TF(G_UNIFORM, 0, 0),
         TF(G_UNIFORM, 2, 4, 3000), TI(G_LABEL, 1, 4));
    CASE("bad label", VDEV_OP_SOFTMAX_CE_GRAD, none, 10, TF(G_UNIFORM, 0, 0),
         TF(G_UNIFORM, 2, 16, 10), TI(G_BADLABEL, 1, 16));
    CASE("same shape", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 33, 47),
         TF(G_UNIFORM, 2, 33, 47));
    CASE("row", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 33, 47), TF(G_UNIFORM, 1, 47));
    CASE("one element", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 33, 47),
         TF(G_UNIFORM, 1, 1));
    CASE("tall", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 4096, 300),
         TF(G_UNIFORM, 1, 300));
    CASE("wide", VDEV_OP_REDUCE_ROWS, none, 0, TF(G_UNIFORM, 2, 64, 2048),
         TF(G_UNIFORM, 2, 1, 2048));

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
    }

    /* Every op was tried (or is a view, which runs no kernel). */
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

/* ---- the backend directly: unknown op, host functions, events, copies ---- */

static atomic_int host_seen;

static void host_fn(void *arg)
{
    int v;
    memcpy(&v, arg, sizeof v);
    atomic_store(&host_seen, v);
}

static void test_backend_direct(void)
{
    fresh();
    CHECK_OK(vdev_config_discover());
    struct vdev_backend *b = vdev_config_gpu_backend();
    CHECK(b != NULL);
    if (!b)
        return;
    CHECK_STR(b->ops->name, "cuda");
    CHECK(b->ops->is_gpu && !b->ops->host_addressable);
    CHECK(b->ops->run_kernel != NULL);
    struct vdev_backend_device_info info;
    CHECK_OK(vdev_backend_device_info(b, 0, &info));
    printf("GPU 0: %s, %.1f GiB, compute capability %d.%d\n", info.model,
           (double)info.total_bytes / (double)GiB, info.cc_major, info.cc_minor);
    CHECK(info.total_bytes > GiB && info.cc_major >= 5);

    /* An op without a kernel. */
    struct vdev_kernel_args ka;
    memset(&ka, 0, sizeof ka);
    ka.op = VDEV_OP_COUNT;
    CHECK_STATUS(b->ops->run_kernel(b->ctx, 0, &ka), VDEV_ERR_UNSUPPORTED);

    /* A host function runs on the stream, with its own copy of the argument. */
    int v = 42;
    atomic_store(&host_seen, 0);
    CHECK_OK(vdev_backend_submit_host(b, 0, host_fn, &v, sizeof v));
    v = 7;
    CHECK_OK(vdev_backend_synchronize(b, 0));
    CHECK(atomic_load(&host_seen) == 42);

    /* Events. */
    void *ev = NULL;
    CHECK_OK(b->ops->event_record(b->ctx, 0, &ev));
    if (ev) {
        b->ops->event_wait(b->ctx, ev);
        CHECK(b->ops->event_done(b->ctx, ev));
        CHECK_OK(b->ops->stream_wait_event(b->ctx, 0, ev));
        b->ops->event_drop(b->ctx, ev);
    }

    /* Copies of sizes around the staging chunk (8 MiB), on a raw region. */
    void *base = NULL;
    uint64_t cap = 40 * MiB;
    CHECK_OK(b->ops->reserve(b->ctx, 0, cap, &base));
    if (!base)
        return;
    static const uint64_t sizes[] = {4, 1000, 8 * MiB - 4, 8 * MiB, 8 * MiB + 4, 17 * MiB + 12,
                                     20 * MiB};
    unsigned char *src = malloc(cap), *dst = malloc(cap);
    for (uint64_t i = 0; i < cap; i++)
        src[i] = (unsigned char)(i * 131 + 7);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        uint64_t n = sizes[s];
        memset(dst, 0, n);
        CHECK_OK(b->ops->copy_h2d(b->ctx, 0, base, src, n));
        /* device -> device inside the region, then back */
        CHECK_OK(b->ops->copy_d2d(b->ctx, 0, (char *)base + cap / 2, 0, base, n));
        CHECK_OK(b->ops->copy_d2h(b->ctx, 0, dst, (char *)base + cap / 2, n));
        CHECK(memcmp(src, dst, n) == 0);
    }
    /* extend keeps the address and the contents */
    if (b->ops->extend) {
        CHECK_OK(b->ops->extend(b->ctx, 0, base, cap, 3 * cap));
        CHECK_OK(b->ops->copy_h2d(b->ctx, 0, (char *)base + 2 * cap, src, cap));
        memset(dst, 0, cap);
        CHECK_OK(b->ops->copy_d2h(b->ctx, 0, dst, base, 1000));
        CHECK(memcmp(src, dst, 1000) == 0);
        CHECK_OK(b->ops->copy_d2h(b->ctx, 0, dst, (char *)base + 2 * cap, cap));
        CHECK(memcmp(src, dst, cap) == 0);
        b->ops->release(b->ctx, 0, base, 3 * cap);
    } else {
        printf("note: this GPU has no virtual memory management: regions do not grow in place\n");
        b->ops->release(b->ctx, 0, base, cap);
    }
    free(src);
    free(dst);
}

/* ---- memory: growth, release, preallocation, logical devices ---- */

static uint64_t gpu_free(void)
{
    struct vdev_physical_device pd[8];
    int n = 0;
    if (vdev_list_physical_devices(pd, 8, &n) != VDEV_OK || n < 2)
        return 0;
    return pd[1].free_bytes;
}

static void test_growth(void)
{
    fresh();
    CHECK_OK(vdev_init());
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_reserved, 0);
    uint64_t free0 = gpu_free();
    void *p[6] = {0};
    uint64_t reserved_prev = 0;
    for (int i = 0; i < 6; i++) {
        CHECK_OK(vdev_mem_alloc("GPU:0", 256 * MiB, &p[i]));
        CHECK_OK(vdev_memory_info("GPU:0", &mi));
        CHECK(mi.bytes_reserved >= (uint64_t)(i + 1) * 256 * MiB);
        CHECK(mi.bytes_reserved >= reserved_prev);
        reserved_prev = mi.bytes_reserved;
        /* grown in place: one contiguous region */
        CHECK_EQ_U64(mi.n_regions, 1);
    }
    uint64_t free1 = gpu_free();
    printf("growth: reserved %.0f MiB in %llu region(s); card free %.0f -> %.0f MiB\n",
           (double)mi.bytes_reserved / MiB, (unsigned long long)mi.n_regions,
           (double)free0 / MiB, (double)free1 / MiB);
    CHECK(free1 + mi.bytes_reserved - 64 * MiB <= free0);

    /* the memory holds data across the whole grown range */
    int64_t shape[1] = {(int64_t)(48 * MiB / 4)};
    float *h = malloc(48 * MiB), *back = malloc(48 * MiB);
    for (int64_t i = 0; i < shape[0]; i++)
        h[i] = (float)i;
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *t = vdev_tensor_from_host(h, shape, 1, VDEV_F32);
    vdev_tensor_t *t2 = vdev_mul_scalar(t, 2.0f);
    CHECK_OK(vdev_device_pop());
    CHECK(t2 != NULL);
    if (t2) {
        CHECK_OK(vdev_tensor_to_host(t2, back, 48 * MiB));
        int ok = 1;
        for (int64_t i = 0; i < shape[0] && ok; i++)
            ok = back[i] == 2.0f * (float)i;
        CHECK(ok);
    }
    vdev_tensor_free(t2);
    vdev_tensor_free(t);
    free(h);
    free(back);

    for (int i = 0; i < 6; i++)
        CHECK_OK(vdev_mem_free("GPU:0", p[i]));
    uint64_t released = 0;
    CHECK_OK(vdev_memory_release_cached("GPU:0", &released));
    CHECK(released >= 6 * 256 * MiB);
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_reserved, 0);
    uint64_t free2 = gpu_free();
    printf("release: %.0f MiB handed back; card free %.0f MiB\n", (double)released / MiB,
           (double)free2 / MiB);
    CHECK(free2 >= free1 + released - 64 * MiB);

    /* and it grows again after a release */
    void *q = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 100 * MiB, &q));
    CHECK_OK(vdev_mem_free("GPU:0", q));
    fresh();
}

static void test_preallocate(void)
{
    fresh();
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB", 1);
    uint64_t free0 = gpu_free();
    CHECK_OK(vdev_init());
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_limit, GiB);
    CHECK_EQ_U64(mi.bytes_reserved, GiB);
    uint64_t free1 = gpu_free();
    CHECK(free1 + GiB - 64 * MiB <= free0);
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 900 * MiB, &p));
    void *q = NULL;
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 200 * MiB, &q), VDEV_ERR_OOM);
    CHECK_OK(vdev_mem_free("GPU:0", p));
    fresh();
}

static void test_split(void)
{
    fresh();
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB,1GiB,1GiB", 1);
    CHECK_OK(vdev_init());
    struct vdev_logical_device ld[8];
    int n = 0;
    CHECK_OK(vdev_list_logical_devices(ld, 8, &n));
    CHECK(n == 4);
    for (int i = 1; i < n && i < 8; i++) {
        CHECK_EQ_U64(ld[i].limit_bytes, GiB);
        CHECK(ld[i].physical_index == 0);
        CHECK_STR(ld[i].backend, "cuda");
    }
    /* Past the limit of GPU:1: OOM at once, and again after filling it. */
    void *big = NULL;
    CHECK_STATUS(vdev_mem_alloc("GPU:1", GiB + 256 * MiB, &big), VDEV_ERR_OOM);
    CHECK_MSG("GPU:1");
    void *a = NULL, *b = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:1", 768 * MiB, &a));
    CHECK_STATUS(vdev_mem_alloc("GPU:1", 512 * MiB, &b), VDEV_ERR_OOM);
    struct vdev_memory_info m0, m1, m2;
    CHECK_OK(vdev_memory_info("GPU:0", &m0));
    CHECK_OK(vdev_memory_info("GPU:1", &m1));
    CHECK_EQ_U64(m0.bytes_reserved, 0);
    CHECK_EQ_U64(m0.n_allocs, 0);
    CHECK(m1.bytes_reserved <= GiB);
    CHECK(m1.n_failed_allocs == 2);
    /* GPU:2 has its own 1 GiB. */
    void *c = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:2", 768 * MiB, &c));
    CHECK_OK(vdev_memory_info("GPU:2", &m2));
    CHECK(m2.bytes_reserved >= 768 * MiB && m2.bytes_reserved <= GiB);
    CHECK_OK(vdev_mem_free("GPU:1", a));
    CHECK_OK(vdev_mem_free("GPU:2", c));

    /* Ops on each logical GPU and copies between them (one card, one stream). */
    int64_t shape[2] = {64, 64};
    vdev_tensor_t *x[3] = {0}, *y[3] = {0};
    char dev[16];
    for (int i = 0; i < 3; i++) {
        snprintf(dev, sizeof dev, "GPU:%d", i);
        CHECK_OK(vdev_device_push(dev));
        x[i] = vdev_tensor_uniform(shape, 2, -1, 1, 7);
        y[i] = vdev_matmul(x[i], x[i], false, true);
        CHECK_OK(vdev_device_pop());
        CHECK(y[i] && !strcmp(vdev_tensor_device(y[i]), ld[1 + i].name));
    }
    vdev_tensor_t *moved = vdev_tensor_to(y[0], "GPU:2");
    CHECK(moved != NULL);
    if (moved && y[2]) {
        float h0[64 * 64], h2[64 * 64];
        CHECK_OK(vdev_tensor_to_host(moved, h0, sizeof h0));
        CHECK_OK(vdev_tensor_to_host(y[2], h2, sizeof h2));
        CHECK(memcmp(h0, h2, sizeof h0) == 0); /* same seed, same kernel, same GPU */
    }
    vdev_tensor_free(moved);
    for (int i = 0; i < 3; i++) {
        vdev_tensor_free(y[i]);
        vdev_tensor_free(x[i]);
    }
    fresh();
}

int main(void)
{
    fresh();
    test_plugin_library();
    struct vdev_backend b;
    char reason[256] = "";
    enum vdev_status st = vdev_backend_cuda_new(&b, reason, sizeof reason);
    vdev_clear_error();
    if (st != VDEV_OK) {
        test_fallback(reason);
        int rc = check_done();
        if (rc)
            return rc;
        printf("SKIP: no GPU: %s\n", reason);
        return 77;
    }
    vdev_backend_destroy(&b);

    fresh();
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_canonical_name("GPU:0", (char[64]){0}, 64));
    test_ops();
    test_backend_direct();
    test_growth();
    test_preallocate();
    test_split();
    fresh();
    return check_done();
}
