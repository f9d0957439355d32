/* test_cuda_emu.c — the CUDA plugin's kernels, compiled for the host against
 * a stand-in runtime (host_cuda.h: each GPU thread a host thread, barriers
 * for __syncthreads and shuffles, a column-major SGEMM that checks its
 * arguments as cuBLAS does), checked against the CPU reference kernels on
 * machines without a GPU.
 *
 *  - every case of op_cases.h (the list test_cuda.c runs on a GPU, its
 *    largest shapes made smaller): vdev_cuda_run_op on host buffers against
 *    vdev_op_defs[op].ref on the same inputs, within the tolerance per op;
 *    outputs start as NaN (or -1) so an element a kernel forgets to write is
 *    caught, and out-of-bounds writes are caught under ASan;
 *  - log-softmax and cross-entropy of rows of equal logits of 1e10 and 3e12
 *    are exactly -log(10) and log(10) as floats (x - (m + log s) was not);
 *  - empty products and transposes return VDEV_CUDA_RC_OK before launching
 *    anything: no launch, no cuBLAS call, no cuBLAS handle (cuBLAS refuses a
 *    leading dimension of 0; a grid of size 0 is a launch error);
 *  - each kind of reduction gives the same bits twice (the host threads'
 *    timing differs from run to run: the order of additions must not);
 *  - no launch in the whole run had a bad configuration;
 *  - a card without memory left: a launch that fails with
 *    cudaErrorMemoryAllocation (lazy loading of the kernel's code) and
 *    cuBLAS's CUBLAS_STATUS_ALLOC_FAILED (cublasCreate, cublasSgemm) give
 *    VDEV_CUDA_RC_OOM, which the plugin reports as VDEV_ERR_OOM, with a message
 *    that says what found no room and how to leave a margin.
 * What it cannot show: speed, memory coalescing, and the device's own math
 * functions (the host's exp and log stand in); test_cuda.c on a GPU does. */
#define _GNU_SOURCE
#include "check.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "emu.h"

#define OP_CASES_SMALL
#include "op_cases.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct vdev_cuda_args) == sizeof(struct vdev_kernel_args),
               "struct vdev_cuda_args differs from struct vdev_kernel_args");

static void *scratch, *workspace;
static void *blas_handle;

static int run_emu(const struct vdev_kernel_args *ka, char *msg, size_t cap)
{
    struct vdev_cuda_args a;
    memcpy(&a, ka, sizeof a);
    struct vdev_cuda_launch_env env = {NULL, &blas_handle, scratch, 2, workspace, 4u << 20};
    return vdev_cuda_run_op(&a, &env, msg, cap);
}

static size_t bytes_of(const struct tin *t) { return (size_t)numel_of(t) * 4; }

/* A host buffer of n words, each 0xffffffff: NaN as f32, -1 as i32. */
static void *poisoned(int64_t n)
{
    void *p = malloc((size_t)(n ? n : 1) * 4);
    memset(p, 0xff, (size_t)(n ? n : 1) * 4);
    return p;
}

static void run_case(const char *what, enum vdev_op op, int n_in, const struct tin *ins,
                     struct vdev_op_params p, int64_t classes)
{
    const struct vdev_op_def *def = &vdev_op_defs[op];
    void *host[VDEV_KERNEL_MAX_IN] = {0}, *ref_io[VDEV_KERNEL_MAX_IN] = {0};
    void *emu_io[VDEV_KERNEL_MAX_IN] = {0};
    vdev_tensor_t *tc[VDEV_KERNEL_MAX_IN] = {0};
    void *ref_out = NULL, *emu_out = NULL;
    char label[160], msg[384] = "";
    snprintf(label, sizeof label, "%s (%s)", def->name, what);
    /* Tensors on the CPU give the arguments as the dispatcher makes them. */
    CHECK_OK(vdev_device_push("CPU:0"));
    int ok = 1;
    for (int k = 0; k < n_in; k++) {
        host[k] = make_host(&ins[k], classes);
        tc[k] = vdev_tensor_from_host(host[k], ins[k].shape, ins[k].ndim,
                                      (enum vdev_dtype)ins[k].dtype);
        ok &= tc[k] != NULL;
    }
    vdev_device_pop();
    if (!ok) {
        check_fail(__FILE__, __LINE__, "%s: inputs: %s", label, vdev_last_error());
        goto out;
    }
    struct vdev_kernel_args ka;
    {
        const vdev_tensor_t *ig[VDEV_KERNEL_MAX_IN];
        for (int k = 0; k < n_in; k++)
            ig[k] = tc[k];
        vdev_kernel_args_init(&ka, op, ig, n_in, &p);
    }
    for (int k = 0; k < n_in; k++)
        ka.in[k] = host[k];
    if (def->shape(&ka) != VDEV_OK) {
        check_fail(__FILE__, __LINE__, "%s: shape rule: %s", label, vdev_last_error());
        goto out;
    }
    int64_t k_dim = op == VDEV_OP_MATMUL         ? ins[0].shape[p.i[0] ? 0 : 1]
                    : op == VDEV_OP_BATCH_MATMUL ? ins[0].shape[p.i[0] ? 1 : 2]
                                                 : 0;
    double atol, rtol;
    op_tol(op, k_dim, &atol, &rtol);
    stats[op].cases++;

    if (def->flags & VDEV_OP_INPLACE) {
        struct vdev_kernel_args ke = ka;
        for (int k = 0; k < n_in; k++) {
            ref_io[k] = malloc(bytes_of(&ins[k]) ? bytes_of(&ins[k]) : 4);
            emu_io[k] = malloc(bytes_of(&ins[k]) ? bytes_of(&ins[k]) : 4);
            memcpy(ref_io[k], host[k], bytes_of(&ins[k]));
            memcpy(emu_io[k], host[k], bytes_of(&ins[k]));
            ka.in[k] = ref_io[k];
            ke.in[k] = emu_io[k];
            if (k < VDEV_KERNEL_MAX_OUT) {
                ka.out[k] = ref_io[k];
                ke.out[k] = emu_io[k];
            }
        }
        if (numel_of(&ins[0]))
            def->ref(&ka);
        if (run_emu(&ke, msg, sizeof msg) != VDEV_CUDA_RC_OK) {
            check_fail(__FILE__, __LINE__, "%s: %s", label, msg);
            goto out;
        }
        for (int k = 0; k < n_in; k++) {
            char l2[200];
            snprintf(l2, sizeof l2, "%s input #%d", label, k);
            CHECK(compare(l2, VDEV_F32, emu_io[k], ref_io[k], numel_of(&ins[k]), atol, rtol,
                          &stats[op].max_err) == 0);
        }
        goto out;
    }
    int64_t n = 1;
    for (int d = 0; d < ka.out_ndim[0]; d++)
        n *= ka.out_shape[0][d];
    ref_out = poisoned(n);
    emu_out = poisoned(n);
    ka.out[0] = ref_out;
    if (n)
        def->ref(&ka);
    ka.out[0] = emu_out;
    if (run_emu(&ka, msg, sizeof msg) != VDEV_CUDA_RC_OK) {
        check_fail(__FILE__, __LINE__, "%s: %s", label, msg);
        goto out;
    }
    int64_t bad =
        compare(label, ka.out_dtype[0], emu_out, ref_out, n, atol, rtol, &stats[op].max_err);
    if (bad)
        check_fail(__FILE__, __LINE__, "%s: %lld of %lld elements differ", label, (long long)bad,
                   (long long)n);
    else
        check_passed++;
out:
    free(ref_out);
    free(emu_out);
    for (int k = 0; k < n_in; k++) {
        vdev_tensor_free(tc[k]);
        free(host[k]);
        free(ref_io[k]);
        free(emu_io[k]);
    }
}

/* Kernel arguments of a 2-D op by hand: in[0] [r0, c0], in[1] [r1, c1]. */
static struct vdev_kernel_args args2(int op, int n_in, int64_t r0, int64_t c0, int64_t r1,
                                     int64_t c1, int64_t ro, int64_t co)
{
    struct vdev_kernel_args ka;
    memset(&ka, 0, sizeof ka);
    ka.op = op;
    ka.n_in = n_in;
    ka.n_out = 1;
    ka.in_ndim[0] = ka.in_ndim[1] = ka.out_ndim[0] = 2;
    ka.in_shape[0][0] = r0;
    ka.in_shape[0][1] = c0;
    ka.in_shape[1][0] = r1;
    ka.in_shape[1][1] = c1;
    ka.out_shape[0][0] = ro;
    ka.out_shape[0][1] = co;
    ka.in_dtype[1] = op == VDEV_OP_SOFTMAX_CE ? VDEV_I32 : VDEV_F32;
    return ka;
}

/* Device memory gone at a launch or in cuBLAS: VDEV_CUDA_RC_OOM, the exact
 * message, and the next call works (the failure was cleared). Runs first:
 * no cuBLAS handle exists yet. */
static void test_oom(void)
{
    float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {1, 0, 0, 1}, c[6];
    char msg[384] = "";
    struct vdev_kernel_args tr = args2(VDEV_OP_TRANSPOSE, 1, 2, 3, 0, 0, 3, 2);
    tr.in[0] = a;
    tr.out[0] = c;
    vdev_emu_fail_next("launch", 2 /* cudaErrorMemoryAllocation */);
    CHECK(run_emu(&tr, msg, sizeof msg) == VDEV_CUDA_RC_OOM);
    CHECK_STR(msg, "CUDA plugin: launching the Transpose kernel failed: cudaErrorMemoryAllocation: "
                   "out of memory: the GPU has no memory left to load the kernel; leave the CUDA "
                   "libraries a margin of the card: VDEV_MEMORY_FRACTION below 1.0, or memory "
                   "growth (VDEV_MEMORY_GROWTH=true) instead of preallocation");
    CHECK(run_emu(&tr, msg, sizeof msg) == VDEV_CUDA_RC_OK);
    CHECK(c[1] == 4.0f);

    struct vdev_kernel_args mm = args2(VDEV_OP_MATMUL, 2, 3, 2, 2, 2, 3, 2);
    mm.in[0] = a;
    mm.in[1] = b;
    mm.out[0] = c;
    CHECK(blas_handle == NULL);
    vdev_emu_fail_next("cublasCreate", 3 /* CUBLAS_STATUS_ALLOC_FAILED */);
    CHECK(run_emu(&mm, msg, sizeof msg) == VDEV_CUDA_RC_OOM);
    CHECK_STR(msg, "CUDA plugin: cublasCreate failed: the resource allocation failed: the GPU has "
                   "no memory left for a cuBLAS handle; leave the CUDA libraries a margin of the "
                   "card: VDEV_MEMORY_FRACTION below 1.0, or memory growth "
                   "(VDEV_MEMORY_GROWTH=true) instead of preallocation");
    CHECK(blas_handle == NULL);
    vdev_emu_fail_next("cublasSgemm", 3);
    CHECK(run_emu(&mm, msg, sizeof msg) == VDEV_CUDA_RC_OOM);
    CHECK_STR(msg, "CUDA plugin: MatMul [3,2]x[2,2]: cublasSgemm failed: the resource allocation "
                   "failed: the GPU has no memory left for cuBLAS's own buffers; leave the CUDA "
                   "libraries a margin of the card: VDEV_MEMORY_FRACTION below 1.0, or memory "
                   "growth (VDEV_MEMORY_GROWTH=true) instead of preallocation");
    CHECK(blas_handle != NULL); /* made: only the product failed */
    CHECK(run_emu(&mm, msg, sizeof msg) == VDEV_CUDA_RC_OK);
    CHECK(c[5] == 6.0f);
}

/* Empty products and transposes: nothing launched, cuBLAS untouched. */
static void test_empty(void)
{
    float a[16] = {0}, b[16] = {0}, c[16];
    char msg[384] = "";
    struct vdev_emu_counts before, after;
    vdev_emu_counts_get(&before);
    static const struct {
        int64_t m, k, n;
        int ta, tb;
    } mm[] = {{0, 5, 3, 0, 0}, {3, 5, 0, 0, 0}, {0, 5, 3, 1, 0}, {3, 5, 0, 0, 1}, {0, 0, 0, 0, 0}};
    for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++) {
        struct vdev_kernel_args ka =
            args2(VDEV_OP_MATMUL, 2, mm[i].ta ? mm[i].k : mm[i].m, mm[i].ta ? mm[i].m : mm[i].k,
                  mm[i].tb ? mm[i].n : mm[i].k, mm[i].tb ? mm[i].k : mm[i].n, mm[i].m, mm[i].n);
        ka.i[0] = mm[i].ta;
        ka.i[1] = mm[i].tb;
        ka.in[0] = a;
        ka.in[1] = b;
        ka.out[0] = c;
        int rc = run_emu(&ka, msg, sizeof msg);
        if (rc != VDEV_CUDA_RC_OK)
            check_fail(__FILE__, __LINE__, "empty MatMul m=%lld k=%lld n=%lld%s%s: %s",
                       (long long)mm[i].m, (long long)mm[i].k, (long long)mm[i].n,
                       mm[i].ta ? " (A transposed)" : "", mm[i].tb ? " (B transposed)" : "", msg);
        else
            check_passed++;
    }
    static const int64_t tr[][2] = {{0, 5}, {5, 0}, {0, 0}};
    for (int i = 0; i < 3; i++) {
        struct vdev_kernel_args ka =
            args2(VDEV_OP_TRANSPOSE, 1, tr[i][0], tr[i][1], 0, 0, tr[i][1], tr[i][0]);
        ka.in[0] = a;
        ka.out[0] = c;
        int rc = run_emu(&ka, msg, sizeof msg);
        if (rc != VDEV_CUDA_RC_OK)
            check_fail(__FILE__, __LINE__, "Transpose of [%lld,%lld]: %s", (long long)tr[i][0],
                       (long long)tr[i][1], msg);
        else
            check_passed++;
    }
    vdev_emu_counts_get(&after);
    CHECK(after.launches == before.launches);
    CHECK(after.bad_launches == before.bad_launches);
    CHECK(after.gemms == before.gemms && after.bad_gemms == before.bad_gemms);
    CHECK(after.blas_handles == before.blas_handles); /* no handle for an empty product */
}

/* Rows of ten equal logits: log-softmax -log(10), cross-entropy log(10). */
static void test_huge_logits(void)
{
    static const float bases[] = {1e10f, 3e12f, -3e12f, 1e15f, 1e30f};
    char msg[384] = "";
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        float x[2][10], y[2][10];
        int32_t lab[2] = {0, 7};
        for (int j = 0; j < 10; j++)
            x[0][j] = x[1][j] = bases[i];
        struct vdev_kernel_args ka = args2(VDEV_OP_LOG_SOFTMAX, 1, 2, 10, 0, 0, 2, 10);
        ka.in[0] = x;
        ka.out[0] = y;
        CHECK(run_emu(&ka, msg, sizeof msg) == VDEV_CUDA_RC_OK);
        int exact = 1;
        for (int j = 0; j < 10; j++)
            exact &= y[0][j] == (float)-log(10.0) && y[1][j] == (float)-log(10.0);
        if (!exact)
            check_fail(__FILE__, __LINE__, "LogSoftmax of ten logits of %g: %.9g, expected %.9g",
                       (double)bases[i], (double)y[0][0], -log(10.0));
        else
            check_passed++;
        float loss = NAN;
        ka = args2(VDEV_OP_SOFTMAX_CE, 2, 2, 10, 2, 1, 0, 0);
        ka.in_ndim[1] = 1;
        ka.in_shape[1][0] = 2;
        ka.out_ndim[0] = 0;
        ka.in[0] = x;
        ka.in[1] = lab;
        ka.out[0] = &loss;
        CHECK(run_emu(&ka, msg, sizeof msg) == VDEV_CUDA_RC_OK);
        if (loss != (float)log(10.0))
            check_fail(__FILE__, __LINE__, "cross-entropy of ten logits of %g: %.9g, expected %.9g",
                       (double)bases[i], (double)loss, log(10.0));
        else
            check_passed++;
    }
}

/* Each kind of reduction twice over the same data: the same bits. */
static void test_deterministic(void)
{
    static const int64_t shapes[][3] = {
        {1, 5000, 7}, {1, 50, 100}, {1, 3, 20000}, {3000, 100, 1}, {2, 9000, 3}};
    char msg[384] = "";
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t outer = shapes[s][0], len = shapes[s][1], inner = shapes[s][2];
        /* as SUM over axis 1 of [outer, len, inner], or axis 0 of [len, inner] */
        int64_t n = outer * len * inner;
        float *x = malloc((size_t)n * 4), *o1 = malloc((size_t)(outer * inner) * 4),
              *o2 = malloc((size_t)(outer * inner) * 4);
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)(2 * rnd() - 1);
        struct vdev_kernel_args ka;
        memset(&ka, 0, sizeof ka);
        ka.op = VDEV_OP_SUM;
        ka.n_in = ka.n_out = 1;
        ka.in_ndim[0] = 3;
        ka.in_shape[0][0] = outer;
        ka.in_shape[0][1] = len;
        ka.in_shape[0][2] = inner;
        ka.i[0] = 1;
        ka.out_ndim[0] = 2;
        ka.out_shape[0][0] = outer;
        ka.out_shape[0][1] = inner;
        ka.in[0] = x;
        ka.out[0] = o1;
        CHECK(run_emu(&ka, msg, sizeof msg) == VDEV_CUDA_RC_OK);
        ka.out[0] = o2;
        CHECK(run_emu(&ka, msg, sizeof msg) == VDEV_CUDA_RC_OK);
        if (memcmp(o1, o2, (size_t)(outer * inner) * 4) != 0)
            check_fail(__FILE__, __LINE__,
                       "Sum of [%lld,%lld,%lld] over axis 1 differs between "
                       "two runs",
                       (long long)outer, (long long)len, (long long)inner);
        else
            check_passed++;
        free(x);
        free(o1);
        free(o2);
    }
}

int main(void)
{
    check_fresh(NULL);
    scratch = malloc(VDEV_CUDA_SCRATCH_BYTES);
    workspace = aligned_alloc(256, 4u << 20); /* the handle's workspace: cublasSetWorkspace */
    CHECK_OK(vdev_init());
    test_oom();
    test_empty();
    test_huge_logits();
    op_cases();
    op_report();
    test_deterministic();
    struct vdev_emu_counts c;
    vdev_emu_counts_get(&c);
    printf("emulated: %ld launches, %ld products through the SGEMM stand-in\n", c.launches,
           c.gemms);
    CHECK(c.bad_launches == 0);
    CHECK(c.bad_gemms == 0);
    vdev_cuda_blas_destroy(blas_handle);
    vdev_emu_counts_get(&c);
    CHECK(c.blas_handles == 0);
    free(scratch);
    free(workspace);
    check_fresh(NULL);
    return check_done();
}
