/* test_cuda.c — the CUDA plugin (src/backend/cuda/) on a real GPU.
 *
 * Everywhere (no GPU needed):
 *  - the plugin library, when it was built, dlopens on its own and exports
 *    vdev_cuda_plugin_open, and nothing of its insides, and does not load
 *    cuBLAS (not a dependency of the library); it refuses another backend
 *    API version with a reason;
 *  - without a usable GPU, vdev_backend_cuda_new fails with a one-line reason
 *    that starts "CUDA plugin:", the core falls back to the CPU (one physical
 *    device, ops on CPU:0) and vdev_gpu_absence_reason() says the same thing.
 * Then, when the machine has no NVIDIA GPU (no /dev/nvidia0, /dev/nvidiactl
 * or /proc/driver/nvidia/version) or the plugin was not built, the test
 * prints the reason and exits 77 (ctest: skipped).
 * When it has one and the plugin was built but cannot use it (driver too old
 * for the toolkit, driver library missing), that is a failure, with the
 * reason: a GPU machine must never pass by skipping.
 * (tests/cuda/ checks the plugin against a stand-in driver and the kernels
 * on the host everywhere; this test is the real thing.)
 *
 * With a GPU (and VDEV_SIM_GPUS unset, which this test makes sure of):
 *  - cuBLAS is not loaded until the first matrix product, and is after it;
 *  - every case of tests/cuda/op_cases.h: each op run with vdev_op_run on
 *    GPU:0 (the CUDA kernels) and with its CPU reference kernel
 *    (vdev_op_defs[op].ref) on the same random inputs; outputs agree within
 *    the tolerance stated per op in op_tol(); reductions give the same bits
 *    when run twice;
 *  - an op the plugin has no kernel for is VDEV_ERR_UNSUPPORTED; empty
 *    products and transposes return VDEV_OK from the kernel table itself;
 *  - host functions, events, fills (cuMemsetD32Async) and copies of every
 *    size through the staging buffers;
 *  - growth through CUDA virtual memory: reserved memory grows with use and
 *    stays one region (grown in place), the card's free memory falls with it,
 *    and vdev_memory_release_cached hands it back (free memory rises again);
 *  - preallocation: the whole limit reserved at start-up;
 *  - one GPU split into three logical GPUs of 1 GiB
 *    (VDEV_LOGICAL_DEVICES="0:1GiB,1GiB,1GiB"): an allocation past 1 GiB on
 *    GPU:1 fails with VDEV_ERR_OOM while GPU:0 is untouched, and tensors copy
 *    between the logical GPUs of the one card;
 *  - a stream per logical device: the three logical GPUs of a card split
 *    "0:1GiB@critical,1GiB,1GiB@low" get three streams (the normal one the
 *    card's own), each holding its scratch buffer and cuBLAS workspace, which
 *    the card's budget leaves out, and each runs products with its own
 *    cuBLAS handle;
 *  - the whole budget: with VDEV_MEMORY_FRACTION=1.0 the limit is no more
 *    than the card has free once the context and the streams exist (not the
 *    card's total), and an allocation of all but 1 GiB of it succeeds;
 *  - NCCL (the toolkit's; it must load): a communicator of one rank on the
 *    card, nonblocking, its all-reduce, broadcast and all-gather, an abort
 *    (tests/nccl_one_rank.h, which tests/cuda/ also runs on the stand-ins). */
#define _GNU_SOURCE
#include "check.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "config/config.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "nccl_one_rank.h"

#include <dlfcn.h>
#include <link.h>
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

/* Whether a library whose path contains `name` is loaded in this process. */
static int found_lib;
static const char *find_name;
static int find_lib(struct dl_phdr_info *info, size_t size, void *unused)
{
    (void)size;
    (void)unused;
    if (info->dlpi_name && strstr(info->dlpi_name, find_name))
        found_lib = 1;
    return 0;
}
static int mapped(const char *name)
{
    found_lib = 0;
    find_name = name;
    dl_iterate_phdr(find_lib, NULL);
    return found_lib;
}

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
    /* Loading it loads no cuBLAS (about half a gigabyte): the first product does. */
    CHECK(!mapped("libcublas"));
    if (open_fn) {
        struct vdev_backend b;
        char reason[256] = "";
        CHECK(open_fn(VDEV_BACKEND_API_VERSION + 1, &b, reason, sizeof reason, vdev_error) !=
              VDEV_OK);
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

#include "cuda/op_cases.h"

static vdev_tensor_t *tensor_on(const char *dev, const struct tin *t, const void *host)
{
    if (vdev_device_push(dev) != VDEV_OK)
        return NULL;
    vdev_tensor_t *x = vdev_tensor_from_host(host, t->shape, t->ndim, (enum vdev_dtype)t->dtype);
    vdev_device_pop();
    return x;
}

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

/* Every case of op_cases.h, then a reduction of each kind run twice: the
 * same bits both times (the order of additions is fixed by the shape). */
static void test_ops(void)
{
    op_cases();
    op_report();
    static const int64_t shapes[][2] = {{5000, 7}, {50, 100}, {3, 50000}, {20000, 100}};
    for (int s = 0; s < 4; s++) {
        int64_t shape[2] = {shapes[s][0], shapes[s][1]};
        CHECK_OK(vdev_device_push("GPU:0"));
        vdev_tensor_t *x = vdev_tensor_uniform(shape, 2, -1, 1, 11);
        vdev_tensor_t *a = vdev_sum(x, s < 3 ? 1 : 0, false);
        vdev_tensor_t *b = vdev_sum(x, s < 3 ? 1 : 0, false);
        CHECK_OK(vdev_device_pop());
        CHECK(a && b);
        if (a && b) {
            size_t n = (size_t)vdev_tensor_numel(a);
            float *ha = malloc(n * 4), *hb = malloc(n * 4);
            CHECK_OK(vdev_tensor_to_host(a, ha, n * 4));
            CHECK_OK(vdev_tensor_to_host(b, hb, n * 4));
            CHECK(memcmp(ha, hb, n * 4) == 0);
            free(ha);
            free(hb);
        }
        vdev_tensor_free(a);
        vdev_tensor_free(b);
        vdev_tensor_free(x);
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
    CHECK_MSG("no CUDA kernel for op");

    /* Empty products and transposes: VDEV_OK from the kernel table itself
     * (the dispatcher above skips them; cuBLAS would refuse a leading
     * dimension of 0 and a grid of size 0 is a launch error). */
    static const int64_t empty[][3] = {{0, 5, 3}, {3, 5, 0}, {0, 0, 0}};
    for (int i = 0; i < 3; i++) {
        memset(&ka, 0, sizeof ka);
        ka.op = VDEV_OP_MATMUL;
        ka.n_in = 2;
        ka.n_out = 1;
        ka.in_ndim[0] = ka.in_ndim[1] = ka.out_ndim[0] = 2;
        ka.in_shape[0][0] = empty[i][0];
        ka.in_shape[0][1] = ka.in_shape[1][0] = empty[i][1];
        ka.in_shape[1][1] = empty[i][2];
        ka.out_shape[0][0] = empty[i][0];
        ka.out_shape[0][1] = empty[i][2];
        ka.i[0] = i == 0; /* a transposed A of 0 columns: lda would be 0 */
        if (ka.i[0]) {
            ka.in_shape[0][0] = empty[i][1];
            ka.in_shape[0][1] = empty[i][0];
        }
        CHECK_OK(b->ops->run_kernel(b->ctx, 0, &ka));
    }
    memset(&ka, 0, sizeof ka);
    ka.op = VDEV_OP_TRANSPOSE;
    ka.n_in = ka.n_out = 1;
    ka.in_ndim[0] = ka.out_ndim[0] = 2;
    ka.in_shape[0][0] = ka.out_shape[0][1] = 0;
    ka.in_shape[0][1] = ka.out_shape[0][0] = 7;
    CHECK_OK(b->ops->run_kernel(b->ctx, 0, &ka));

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
    /* fills on the stream: every word, nothing past the end */
    CHECK(b->ops->fill != NULL);
    memset(dst, 0, 4 * MiB);
    CHECK_OK(b->ops->copy_h2d(b->ctx, 0, base, dst, 4 * MiB));
    CHECK_OK(vdev_backend_fill(b, 0, (char *)base + 4, 0x3f800000u, MiB - 2));
    CHECK_OK(b->ops->copy_d2h(b->ctx, 0, dst, base, 4 * MiB));
    {
        uint32_t *w = (uint32_t *)dst;
        int ok = w[0] == 0 && w[MiB - 1] == 0;
        for (uint64_t i = 1; i < MiB - 1 && ok; i++)
            ok = w[i] == 0x3f800000u;
        CHECK(ok);
    }
    CHECK_STATUS(vdev_backend_fill(b, 0, (char *)base + 2, 0, 4), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("not a 4-byte aligned device address");

    /* extend keeps the address and the contents (the fill's words and the
     * zeros around them, at the start of the region) */
    if (b->ops->extend) {
        unsigned char before[1000];
        CHECK_OK(b->ops->copy_d2h(b->ctx, 0, before, base, sizeof before));
        CHECK_OK(b->ops->extend(b->ctx, 0, base, cap, 3 * cap));
        CHECK_OK(b->ops->copy_h2d(b->ctx, 0, (char *)base + 2 * cap, src, cap));
        memset(dst, 0, cap);
        CHECK_OK(b->ops->copy_d2h(b->ctx, 0, dst, base, sizeof before));
        CHECK(memcmp(before, dst, sizeof before) == 0);
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

static void test_streams_and_budget(void)
{
    fresh();
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB@critical,1GiB,1GiB@low", 1);
    CHECK_OK(vdev_init());
    struct vdev_ldev *g[3];
    for (int i = 0; i < 3; i++)
        g[i] = vdev_runtime_lookup(VDEV_DEVICE_GPU, i);
    CHECK(g[0] && g[1] && g[2]);
    if (!g[0] || !g[1] || !g[2])
        return;
    CHECK(g[1]->bdev == 0); /* the normal device: the card's own stream */
    CHECK(g[0]->bdev != 0 && g[2]->bdev != 0 && g[0]->bdev != g[2]->bdev);
    struct vdev_backend_device_info di;
    CHECK_OK(vdev_backend_device_info(g[0]->backend, 0, &di));
    uint64_t per = (uint64_t)VDEV_CUDA_SCRATCH_BYTES + VDEV_CUDA_WORKSPACE_BYTES(di.cc_major);
    CHECK_EQ_U64(g[0]->backend->ops->held_bytes(g[0]->backend->ctx, 0), 3 * per);
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    printf("streams: 3 logical GPUs, 3 streams, %llu MiB held by them; card budget %.2f GiB\n",
           (unsigned long long)(3 * per / MiB), (double)l.card_budget_bytes / (double)GiB);
    /* a product on each, with each stream's own cuBLAS handle and workspace */
    int64_t shape[2] = {128, 128};
    for (int i = 0; i < 3; i++) {
        char dev[16];
        snprintf(dev, sizeof dev, "GPU:%d", i);
        CHECK_OK(vdev_device_push(dev));
        vdev_tensor_t *x = vdev_tensor_uniform(shape, 2, -1, 1, 3);
        vdev_tensor_t *y = vdev_matmul(x, x, false, false);
        CHECK_OK(vdev_device_pop());
        CHECK(x != NULL && y != NULL);
        /* against the product on the host */
        static float hx[128 * 128], hy[128 * 128];
        if (x && y) {
            CHECK_OK(vdev_tensor_to_host(x, hx, sizeof hx));
            CHECK_OK(vdev_tensor_to_host(y, hy, sizeof hy));
            double worst = 0;
            for (int r = 0; r < 128; r++)
                for (int c = 0; c < 128; c++) {
                    double want = 0;
                    for (int k = 0; k < 128; k++)
                        want += (double)hx[r * 128 + k] * hx[k * 128 + c];
                    double e = fabs(want - hy[r * 128 + c]);
                    worst = e > worst ? e : worst;
                }
            CHECK(worst < 1e-3);
        }
        vdev_tensor_free(y);
        vdev_tensor_free(x);
    }
    CHECK_EQ_U64(g[0]->backend->ops->held_bytes(g[0]->backend->ctx, 0), 3 * per);
    fresh();

    setenv("VDEV_MEMORY_FRACTION", "1.0", 1);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    struct vdev_physical_device pd[16];
    int n = 0;
    CHECK_OK(vdev_list_physical_devices(pd, 16, &n));
    CHECK(n >= 2);
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    printf("whole budget: total %.2f GiB, free %.2f GiB after start-up, limit %.2f GiB\n",
           (double)pd[1].total_bytes / (double)GiB, (double)pd[1].free_bytes / (double)GiB,
           (double)l.ceiling_bytes / (double)GiB);
    CHECK(l.ceiling_bytes <= pd[1].free_bytes + mi.bytes_reserved);
    CHECK(l.ceiling_bytes < pd[1].total_bytes);
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", (l.ceiling_bytes - GiB) & ~(uint64_t)(2 * MiB - 1), &p));
    CHECK_OK(vdev_mem_free("GPU:0", p));
    fresh();
}

/* NCCL on the card: a communicator of one rank (nccl_one_rank.h), made
 * nonblocking, its calls, an abort; with the NCCL of the toolkit. */
static void test_nccl_one_rank(void)
{
    fresh();
    struct vdev_backend b;
    char reason[256] = "";
    CHECK_OK(vdev_backend_cuda_new(&b, reason, sizeof reason));
    if (!b.ops)
        return;
    nccl_one_rank(&b);
    vdev_backend_destroy(&b);
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
        char path[1024];
        snprintf(path, sizeof path, "%s/libvdev-cuda.so", VDEV_BINARY_DIR);
        const char *gpu_sign = access("/dev/nvidia0", F_OK) == 0      ? "/dev/nvidia0"
                               : access("/dev/nvidiactl", F_OK) == 0 ? "/dev/nvidiactl"
                               : access("/proc/driver/nvidia/version", F_OK) == 0
                                   ? "/proc/driver/nvidia/version"
                                   : NULL;
        if (gpu_sign && access(path, F_OK) == 0) {
            check_fail(__FILE__, __LINE__, "this machine has an NVIDIA GPU (%s) but the CUDA "
                       "plugin cannot use it: %s", gpu_sign, reason);
            return check_done();
        }
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
    /* cuBLAS: not loaded by start-up, loaded by the first product */
    CHECK(!mapped("libcublas"));
    test_ops();
    CHECK(mapped("libcublas"));
    test_backend_direct();
    test_growth();
    test_preallocate();
    test_split();
    test_streams_and_budget();
    test_nccl_one_rank();
    fresh();
    return check_done();
}
