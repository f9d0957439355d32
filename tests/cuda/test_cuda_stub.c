/* test_cuda_stub.c — the real CUDA plugin (libvdev-cuda.so) driven against
 * the stand-in driver of stub_cuda.c, on machines without a GPU.
 *
 * The test dlopens the stand-in (stub/libcuda.so.1) by its full path first;
 * when the plugin then dlopens "libcuda.so.1", the loader hands it the
 * stand-in, already loaded under that soname. Checked, each with the stand-in
 * counting rule violations (there must be none) and live objects (none may
 * be left):
 *  - the reasons an open fails, word for word: cuInit failing, a driver too
 *    old for the toolkit (cuDriverGetVersion against CUDA_VERSION), no
 *    device, a device whose set-up fails half-way (and nothing leaks);
 *  - memory through the core: growth in place (one region, physical memory
 *    mapped chunk by chunk), release of cached memory (everything unmapped and
 *    released), preallocation, one card split into logical devices with
 *    their limits, the fallback to cuMemAlloc without VMM; every failure of
 *    a VMM call undone (no reservation or handle left behind);
 *  - copies between two GPUs: the destination's stream waits for the source's,
 *    and the source's stream for the copy (a later write to the source is
 *    then no race), also when the second event fails; through the host
 *    without peer access;
 *  - fills with cuMemsetD32Async (no host copy), and their errors; host
 *    functions on the stream;
 *  - staging buffers: a failed cuEventCreate or cuMemHostAlloc is reported
 *    under its own name, and a later copy works;
 *  - cuBLAS is not mapped until the first non-empty product; empty products
 *    load nothing; threads of two GPUs arriving at once load it once;
 *  - every entry leaves the caller's current context as it found it (none,
 *    or another GPU's);
 *  - the stand-in's own rules catch what they should (a race, a bad map). */
#define _GNU_SOURCE
#include "check.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "ops/op_ids.h"
#include "stub_client.h"

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)
/* What a stream of the plugin holds on the stand-in (compute capability
 * 9.0): its scratch buffer and its cuBLAS workspace. */
#define STREAM_BYTES ((uint64_t)VDEV_CUDA_SCRATCH_BYTES + VDEV_CUDA_WORKSPACE_BYTES(9))

static int found_lib;
static const char *find_name;
static int find_lib(struct dl_phdr_info *info, size_t size, void *unused)
{
    (void)size;
    (void)unused;
    if (info->dlpi_name && strstr(info->dlpi_name, find_name))
        found_lib++;
    return 0;
}
/* How many loaded objects have `name` in their path. */
static int mapped(const char *name)
{
    found_lib = 0;
    find_name = name;
    dl_iterate_phdr(find_lib, NULL);
    return found_lib;
}

/* ---- why an open fails ---- */

static void expect_reason(const char *what, enum vdev_status code, const char *want)
{
    struct vdev_backend b;
    char reason[256] = "";
    enum vdev_status st = vdev_backend_cuda_new(&b, reason, sizeof reason);
    if (st != code || strcmp(reason, want) != 0)
        check_fail(__FILE__, __LINE__, "%s: %s \"%s\", expected %s \"%s\"", what,
                   vdev_status_str(st), reason, vdev_status_str(code), want);
    else
        check_passed++;
    CHECK(b.ops == NULL);
    if (st == VDEV_OK)
        vdev_backend_destroy(&b);
    vdev_clear_error();
}

static void test_open(void)
{
    /* a GPU older than the kernels' architecture: refused, not half working */
    stub_setup_cc(1, 4 * GiB, 80);
    expect_reason("compute capability 8.0", VDEV_ERR_UNSUPPORTED,
                  "CUDA plugin: GPU 0 has compute capability 8.0; this build's kernels need 9.0 "
                  "or newer (configure with -DCMAKE_CUDA_ARCHITECTURES=\"80-real;90-virtual\" to "
                  "build them for it)");

    /* a GPU newer than the build's machine code (sm_90): its kernels come
     * from the PTX, which a driver for this toolkit's CUDA version or newer
     * compiles; H100/H200 (9.0) have machine code, any driver of the major */
    struct vdev_stub_config nc = {1, 4 * GiB, 0, CUDA_VERSION, 0, 0, 0, 0, 100};
    S.setup(&nc);
    struct vdev_backend nb;
    char why[256] = "";
    CHECK_OK(vdev_backend_cuda_new(&nb, why, sizeof why));
    if (nb.ops)
        vdev_backend_destroy(&nb);
#if CUDA_VERSION % 1000 != 0 /* a driver of the same major but older exists */
    nc.driver_version = CUDA_VERSION / 1000 * 1000;
    S.setup(&nc);
    char ptx_why[256];
    snprintf(ptx_why, sizeof ptx_why,
             "CUDA plugin: GPU 0 (compute capability 10.0) has no machine code in this build, "
             "and its kernels' CUDA %d.%d PTX needs a driver for CUDA %d.%d or newer (this one: "
             "%d.0); or build with -DCMAKE_CUDA_ARCHITECTURES=100-real",
             CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, CUDA_VERSION / 1000,
             CUDA_VERSION % 1000 / 10, CUDA_VERSION / 1000);
    expect_reason("compute capability 10.0, driver older than the toolkit", VDEV_ERR_UNSUPPORTED,
                  ptx_why);
    nc.cc = 90; /* machine code: the same driver is fine */
    S.setup(&nc);
    CHECK_OK(vdev_backend_cuda_new(&nb, why, sizeof why));
    if (nb.ops)
        vdev_backend_destroy(&nb);
#endif

    stub_setup(1, 4 * GiB, 13000, CUDA_ERROR_NO_DEVICE, 0, 0);
    expect_reason("cuInit fails", VDEV_ERR_UNSUPPORTED,
                  "CUDA plugin: cuInit failed: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is "
                  "detected");

    /* a driver for CUDA 12.4 (550), the plugin built with CUDA 13 */
    stub_setup(1, 4 * GiB, 12040, 0, 0, 0);
    char want[256];
    snprintf(want, sizeof want,
             "CUDA plugin: the NVIDIA driver supports CUDA 12.4 (cuDriverGetVersion 12040), older "
             "than the CUDA %d.%d this plugin was built with; CUDA %d.x needs NVIDIA driver %d or "
             "newer",
             CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, CUDA_VERSION / 1000,
             CUDA_VERSION / 1000 >= 13 ? 580 : 525);
    expect_reason("driver too old", VDEV_ERR_UNSUPPORTED, want);
    /* checked at every open, not only the first */
    expect_reason("driver still too old", VDEV_ERR_UNSUPPORTED, want);

    stub_setup(1, 4 * GiB, 13000, 0, 0, 0);
    S.fail("cuDriverGetVersion", 0, CUDA_ERROR_UNKNOWN);
    expect_reason("cuDriverGetVersion fails", VDEV_ERR_UNSUPPORTED,
                  "CUDA plugin: cuDriverGetVersion failed: CUDA_ERROR_UNKNOWN: unknown error");

    stub_setup(0, 4 * GiB, 13000, 0, 0, 0);
    expect_reason("no device", VDEV_ERR_UNSUPPORTED, "CUDA plugin: no CUDA device found");

    /* set-up failing half-way: GPU 1's stream, then GPU 1's scratch memory */
    stub_setup(2, 4 * GiB, 13000, 0, 0, 0);
    S.fail("cuStreamCreateWithPriority", 1, CUDA_ERROR_OUT_OF_MEMORY);
    expect_reason("cuStreamCreateWithPriority fails", VDEV_ERR_BACKEND,
                  "CUDA plugin: GPU 1: cuStreamCreateWithPriority failed: CUDA_ERROR_OUT_OF_MEMORY: "
                  "out of memory");
    expect_clean("after a failed open", 1);
    S.fail("cuCtxGetStreamPriorityRange", 1, CUDA_ERROR_UNKNOWN);
    expect_reason("cuCtxGetStreamPriorityRange fails", VDEV_ERR_BACKEND,
                  "CUDA plugin: GPU 1: cuCtxGetStreamPriorityRange failed: CUDA_ERROR_UNKNOWN: "
                  "unknown error");
    expect_clean("after a failed open", 1);

    /* a newer minor version of the same major is fine */
    stub_setup(2, 4 * GiB, CUDA_VERSION + 20, 0, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (b.ops) {
        CHECK_STR(b.ops->name, "cuda");
        CHECK(b.ops->extend != NULL && b.ops->fill != NULL);
        CHECK(vdev_backend_n_devices(&b) == 2);
        struct vdev_backend_device_info info;
        CHECK_OK(vdev_backend_device_info(&b, 1, &info));
        CHECK_STR(info.model, "Stand-in GPU");
        CHECK(info.total_bytes == 4 * GiB && info.cc_major == 9 && info.cc_minor == 0);
        vdev_backend_destroy(&b);
    }
    expect_clean("open and close", 1);
}

/* ---- memory through the core ---- */

static void test_memory(void)
{
    stub_setup(2, 4 * GiB, 13000, 0, 0, 0);
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    struct vdev_physical_device pd[4];
    int n = 0;
    CHECK_OK(vdev_list_physical_devices(pd, 4, &n));
    CHECK(n == 3);
    if (n == 3) {
        CHECK_STR(pd[1].backend, "cuda");
        CHECK_STR(pd[1].model, "Stand-in GPU");
    }
    struct vdev_stub_stats st;
    void *p[6] = {0};
    struct vdev_memory_info mi;
    for (int i = 0; i < 6; i++) {
        CHECK_OK(vdev_mem_alloc("GPU:0", 64 * MiB, &p[i]));
        CHECK_OK(vdev_memory_info("GPU:0", &mi));
        CHECK_EQ_U64(mi.n_regions, 1); /* grown in place */
    }
    S.stats(0, &st);
    CHECK(st.reservations == 1 && st.handles == st.mappings && st.mappings >= 2);
    /* the stand-in's physical bytes: vdev's reserve (in granules), and the
     * scratch buffer and cuBLAS workspace of GPU:0's stream */
    CHECK(st.bytes_used >= mi.bytes_reserved + STREAM_BYTES);
    CHECK(st.bytes_used < mi.bytes_reserved + STREAM_BYTES + 2 * MiB);
    CHECK_OK(vdev_list_physical_devices(pd, 4, &n));
    CHECK_EQ_U64(pd[1].free_bytes, 4 * GiB - st.bytes_used); /* from cuMemGetInfo */
    printf("growth: %d chunks mapped into one range, %llu MiB\n", st.mappings,
           (unsigned long long)(st.bytes_used / MiB));
    /* data across chunk boundaries */
    int64_t shape[1] = {(int64_t)(100 * MiB / 4)};
    float *h = malloc(100 * MiB), *back = malloc(100 * MiB);
    for (int64_t i = 0; i < shape[0]; i++)
        h[i] = (float)i;
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *t = vdev_tensor_from_host(h, shape, 1, VDEV_F32);
    CHECK_OK(vdev_device_pop());
    CHECK(t != NULL);
    if (t) {
        CHECK_OK(vdev_tensor_to_host(t, back, 100 * MiB));
        CHECK(memcmp(h, back, 100 * MiB) == 0);
        /* to the other GPU and back (peer copies) */
        vdev_tensor_t *u = vdev_tensor_to(t, "GPU:1");
        CHECK(u != NULL);
        if (u) {
            memset(back, 0, 100 * MiB);
            CHECK_OK(vdev_tensor_to_host(u, back, 100 * MiB));
            CHECK(memcmp(h, back, 100 * MiB) == 0);
        }
        vdev_tensor_free(u);
    }
    vdev_tensor_free(t);
    free(h);
    free(back);
    for (int i = 0; i < 6; i++)
        CHECK_OK(vdev_mem_free("GPU:0", p[i]));
    uint64_t released = 0;
    CHECK_OK(vdev_memory_release_cached("GPU:0", &released));
    CHECK_OK(vdev_memory_release_cached("GPU:1", NULL));
    S.stats(0, &st);
    CHECK(st.reservations == 0 && st.handles == 0 && st.mappings == 0);
    CHECK_EQ_U64(st.bytes_used, STREAM_BYTES);
    printf("release: %llu MiB handed back\n", (unsigned long long)(released / MiB));
    expect_clean("growth and release", 0);
    check_fresh(NULL);
    expect_clean("after shutdown", 1);

    /* preallocation and a split card: limits from the logical devices */
    stub_setup(1, 4 * GiB, 13000, 0, 0, 0);
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:512MiB,256MiB", 1);
    CHECK_OK(vdev_init());
    S.stats(0, &st);
    CHECK_EQ_U64(st.bytes_used, 768 * MiB + 2 * STREAM_BYTES); /* the card's stream, GPU:1's */
    void *a = NULL, *b = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:1", 200 * MiB, &a));
    CHECK_STATUS(vdev_mem_alloc("GPU:1", 100 * MiB, &b), VDEV_ERR_OOM);
    CHECK_MSG("GPU:1");
    CHECK_OK(vdev_mem_free("GPU:1", a));
    check_fresh(NULL);
    expect_clean("preallocation", 1);

    /* no VMM: cuMemAlloc regions, no growth in place */
    stub_setup(1, 4 * GiB, 13000, 0, 1, 0);
    struct vdev_backend be;
    stub_open_backend(&be);
    if (be.ops) {
        CHECK(be.ops->extend == NULL);
        void *base = NULL;
        CHECK_OK(be.ops->reserve(be.ctx, 0, 3 * MiB, &base));
        S.stats(0, &st);
        CHECK(st.blocks == 1 && st.reservations == 0); /* the region (no kernel ran) */
        be.ops->release(be.ctx, 0, base, 3 * MiB);
        vdev_backend_destroy(&be);
    }
    expect_clean("without VMM", 1);
}

/* Every failing VMM call leaves nothing behind; growth failing keeps the region. */
static void test_memory_errors(void)
{
    stub_setup(1, 4 * GiB, 13000, 0, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    struct vdev_stub_stats st;
    void *base = NULL;
    static const struct {
        const char *fn;
        int result;
        enum vdev_status code;
        const char *msg;
    } cases[] = {
        {"cuMemAddressReserve", CUDA_ERROR_OUT_OF_MEMORY, VDEV_ERR_BACKEND,
         "CUDA GPU 0: cannot reserve 4.00 GiB of address space: CUDA_ERROR_OUT_OF_MEMORY: out of "
         "memory"},
        {"cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY, VDEV_ERR_OOM,
         "CUDA GPU 0 (Stand-in GPU): cannot allocate 64.00 MiB of device memory: cuMemCreate: "
         "CUDA_ERROR_OUT_OF_MEMORY: out of memory"},
        {"cuMemMap", CUDA_ERROR_INVALID_VALUE, VDEV_ERR_BACKEND,
         "CUDA GPU 0: cuMemMap failed: CUDA_ERROR_INVALID_VALUE: invalid argument"},
        {"cuMemSetAccess", CUDA_ERROR_UNKNOWN, VDEV_ERR_BACKEND,
         "CUDA GPU 0: cuMemSetAccess failed: CUDA_ERROR_UNKNOWN: unknown error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        S.fail(cases[i].fn, 0, cases[i].result);
        base = NULL;
        CHECK_STATUS(b.ops->reserve(b.ctx, 0, 64 * MiB, &base), cases[i].code);
        CHECK_STR(vdev_last_error(), cases[i].msg);
        S.stats(0, &st);
        CHECK(st.reservations == 0 && st.handles == 0 && st.mappings == 0);
        CHECK_EQ_U64(st.bytes_used, 0); /* the backend used alone: no stream took memory yet */
    }
    /* more than the card: the driver's own out of memory */
    CHECK_STATUS(b.ops->reserve(b.ctx, 0, 5 * GiB, &base), VDEV_ERR_OOM);
    CHECK_MSG("cannot allocate 5.00 GiB of device memory: cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY");
    /* growth that fails keeps the region as it was */
    CHECK_OK(b.ops->reserve(b.ctx, 0, 4 * MiB, &base));
    unsigned char data[4096];
    for (int i = 0; i < 4096; i++)
        data[i] = (unsigned char)(i * 7);
    CHECK_OK(b.ops->copy_h2d(b.ctx, 0, base, data, sizeof data));
    S.fail("cuMemMap", 0, CUDA_ERROR_INVALID_VALUE);
    CHECK_STATUS(b.ops->extend(b.ctx, 0, base, 4 * MiB, 8 * MiB), VDEV_ERR_BACKEND);
    S.stats(0, &st);
    CHECK(st.handles == 1 && st.mappings == 1);
    CHECK_OK(b.ops->extend(b.ctx, 0, base, 4 * MiB, 8 * MiB));
    CHECK_OK(b.ops->copy_h2d(b.ctx, 0, (char *)base + 6 * MiB, data, sizeof data));
    unsigned char back[4096];
    CHECK_OK(b.ops->copy_d2h(b.ctx, 0, back, base, sizeof back));
    CHECK(memcmp(back, data, sizeof data) == 0);
    CHECK_OK(b.ops->copy_d2h(b.ctx, 0, back, (char *)base + 6 * MiB, sizeof back));
    CHECK(memcmp(back, data, sizeof data) == 0);
    CHECK_STATUS(b.ops->extend(b.ctx, 0, base, 8 * MiB, 5 * GiB), VDEV_ERR_OOM);
    CHECK_MSG("its address range holds 4.00 GiB");
    b.ops->release(b.ctx, 0, base, 8 * MiB);
    vdev_backend_destroy(&b);
    expect_clean("failing VMM calls", 1);
}

/* ---- copies between GPUs: ordered both ways ---- */

static void test_peer_copy(void)
{
    stub_setup(2, 4 * GiB, 13000, 0, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    void *src = NULL, *dst = NULL;
    CHECK_OK(b.ops->reserve(b.ctx, 0, 2 * MiB, &src));
    CHECK_OK(b.ops->reserve(b.ctx, 1, 2 * MiB, &dst));
    uint32_t *h = malloc(MiB), *back = malloc(MiB);
    for (uint32_t i = 0; i < MiB / 4; i++)
        h[i] = i * 2654435761u;
    CHECK_OK(b.ops->copy_h2d(b.ctx, 0, src, h, MiB));
    uint64_t peer0 = S.calls("cuMemcpyPeerAsync");
    S.trace_mark();
    CHECK_OK(b.ops->copy_d2d(b.ctx, 1, dst, 0, src, MiB));
    /* GPU 0 writes its buffer next, on its own stream: after the copy read it */
    CHECK_OK(b.ops->fill(b.ctx, 0, src, 7, MiB / 4));
    CHECK(S.calls("cuMemcpyPeerAsync") == peer0 + 1);
    char tr[4096], l[5][64];
    S.trace(tr, sizeof tr);
    int s0 = S.stream_id(0), s1 = S.stream_id(1);
    snprintf(l[0], sizeof l[0], "S%d record E%%d", s0);
    snprintf(l[1], sizeof l[1], "S%d copy-peer %llu", s1, MiB);
    snprintf(l[2], sizeof l[2], "S%d record E%%d", s1);
    snprintf(l[3], sizeof l[3], "S%d wait E%%d", s0);
    snprintf(l[4], sizeof l[4], "S%d memset %llu", s0, MiB);
    const char *pat[] = {l[0], l[1], l[2], l[3], l[4]};
    if (!stub_trace_has(tr, pat, 5))
        check_fail(__FILE__, __LINE__, "the source's stream does not wait for the copy:\n%s", tr);
    else
        check_passed++;
    expect_clean("a copy between GPUs, then a write to its source", 0);
    CHECK_OK(b.ops->copy_d2h(b.ctx, 1, back, dst, MiB));
    CHECK(memcmp(h, back, MiB) == 0);
    CHECK_OK(b.ops->copy_d2h(b.ctx, 0, back, src, 4));
    CHECK(back[0] == 7);

    /* the second event fails: an error, and still no hazard left behind */
    S.fail("cuEventRecord", 1, CUDA_ERROR_UNKNOWN);
    CHECK_STATUS(b.ops->copy_d2d(b.ctx, 1, dst, 0, src, MiB), VDEV_ERR_BACKEND);
    CHECK_STR(vdev_last_error(), "CUDA GPU 1: cuEventRecord failed: CUDA_ERROR_UNKNOWN: unknown "
                                 "error");
    CHECK_OK(b.ops->fill(b.ctx, 0, src, 9, MiB / 4));
    expect_clean("a copy whose second event failed", 0);
    /* the first wait fails: nothing is copied */
    S.fail("cuStreamWaitEvent", 0, CUDA_ERROR_UNKNOWN);
    CHECK_STATUS(b.ops->copy_d2d(b.ctx, 1, dst, 0, src, MiB), VDEV_ERR_BACKEND);
    CHECK(S.calls("cuMemcpyPeerAsync") == peer0 + 2);
    b.ops->release(b.ctx, 0, src, 2 * MiB);
    b.ops->release(b.ctx, 1, dst, 2 * MiB);
    vdev_backend_destroy(&b);
    expect_clean("copies between GPUs", 1);

    /* without peer access: through the host, complete on return */
    stub_setup(2, 4 * GiB, 13000, 0, 0, 1);
    stub_open_backend(&b);
    if (b.ops) {
        CHECK_OK(b.ops->reserve(b.ctx, 0, 2 * MiB, &src));
        CHECK_OK(b.ops->reserve(b.ctx, 1, 2 * MiB, &dst));
        CHECK_OK(b.ops->copy_h2d(b.ctx, 0, src, h, MiB));
        CHECK_OK(b.ops->copy_d2d(b.ctx, 1, dst, 0, src, MiB));
        CHECK_OK(b.ops->fill(b.ctx, 0, src, 7, MiB / 4));
        CHECK(S.calls("cuMemcpyPeerAsync") == 0);
        CHECK_OK(b.ops->copy_d2h(b.ctx, 1, back, dst, MiB));
        CHECK(memcmp(h, back, MiB) == 0);
        b.ops->release(b.ctx, 0, src, 2 * MiB);
        b.ops->release(b.ctx, 1, dst, 2 * MiB);
        vdev_backend_destroy(&b);
    }
    expect_clean("copies without peer access", 1);
    free(h);
    free(back);
}

/* ---- fills and staging buffers ---- */

static int host_seen;
static void host_fn(void *arg) { memcpy(&host_seen, arg, sizeof host_seen); }

static void test_fill_and_staging(void)
{
    stub_setup(1, 4 * GiB, 13000, 0, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    void *base = NULL;
    CHECK_OK(b.ops->reserve(b.ctx, 0, 4 * MiB, &base));
    uint32_t w[1024];
    memset(w, 0, sizeof w);

    /* the staging buffers: a failed event, a failed pinned buffer, each by name */
    S.fail("cuEventCreate", 0, CUDA_ERROR_UNKNOWN);
    CHECK_STATUS(b.ops->copy_h2d(b.ctx, 0, base, w, sizeof w), VDEV_ERR_BACKEND);
    CHECK_STR(vdev_last_error(), "CUDA GPU 0: cuEventCreate (staging buffer event) failed: "
                                 "CUDA_ERROR_UNKNOWN: unknown error");
    S.fail("cuMemHostAlloc", 0, CUDA_ERROR_UNKNOWN);
    CHECK_STATUS(b.ops->copy_d2h(b.ctx, 0, w, base, sizeof w), VDEV_ERR_BACKEND);
    CHECK_STR(vdev_last_error(), "CUDA GPU 0: cuMemHostAlloc (staging buffer) failed: "
                                 "CUDA_ERROR_UNKNOWN: unknown error");
    CHECK_OK(b.ops->copy_h2d(b.ctx, 0, base, w, sizeof w)); /* and then it works */
    struct vdev_stub_stats st;
    S.stats(0, &st);
    CHECK(st.host_allocs == 2);

    /* fills: on the stream, no host copy */
    uint64_t h2d = S.calls("cuMemcpyHtoDAsync"), ms = S.calls("cuMemsetD32Async");
    CHECK_OK(vdev_backend_fill(&b, 0, (char *)base + 8, 0x3f800000u, 1000));
    CHECK(S.calls("cuMemsetD32Async") == ms + 1);
    CHECK(S.calls("cuMemcpyHtoDAsync") == h2d);
    CHECK_OK(b.ops->copy_d2h(b.ctx, 0, w, base, sizeof w));
    int ok = w[0] == 0 && w[1] == 0 && w[1002] == 0;
    for (int i = 2; i < 1002 && ok; i++)
        ok = w[i] == 0x3f800000u;
    CHECK(ok);
    CHECK_OK(vdev_backend_fill(&b, 0, base, 5, 0)); /* nothing */
    CHECK(S.calls("cuMemsetD32Async") == ms + 1);
    CHECK_STATUS(vdev_backend_fill(&b, 0, (char *)base + 2, 5, 4), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("cuda backend: fill of");
    S.fail("cuMemsetD32Async", 0, CUDA_ERROR_INVALID_VALUE);
    CHECK_STATUS(vdev_backend_fill(&b, 0, base, 5, 4), VDEV_ERR_BACKEND);
    CHECK_STR(vdev_last_error(), "CUDA GPU 0: cuMemsetD32Async failed: CUDA_ERROR_INVALID_VALUE: "
                                 "invalid argument");
    /* a host function runs on the stream, with its own copy of the argument */
    int v = 42;
    host_seen = 0;
    CHECK_OK(vdev_backend_submit_host(&b, 0, host_fn, &v, sizeof v));
    v = 7;
    CHECK_OK(vdev_backend_synchronize(&b, 0));
    CHECK(host_seen == 42);
    S.fail("cuLaunchHostFunc", 0, CUDA_ERROR_UNKNOWN);
    CHECK_STATUS(vdev_backend_submit_host(&b, 0, host_fn, &v, sizeof v), VDEV_ERR_BACKEND);
    CHECK_STR(vdev_last_error(), "CUDA GPU 0: cuLaunchHostFunc failed: CUDA_ERROR_UNKNOWN: "
                                 "unknown error");
    CHECK(host_seen == 42);
    b.ops->release(b.ctx, 0, base, 4 * MiB);
    vdev_backend_destroy(&b);
    expect_clean("fills and staging buffers", 1);
}

/* ---- cuBLAS, loaded by the first product ---- */

struct mm_arg {
    struct vdev_backend *b;
    int dev;
    void *mem;
    enum vdev_status st;
    char msg[512];
};

static struct vdev_kernel_args matmul_args(void *mem, int64_t m, int64_t k, int64_t n)
{
    struct vdev_kernel_args ka;
    memset(&ka, 0, sizeof ka);
    ka.op = VDEV_OP_MATMUL;
    ka.n_in = 2;
    ka.n_out = 1;
    ka.in_ndim[0] = ka.in_ndim[1] = ka.out_ndim[0] = 2;
    ka.in_shape[0][0] = m;
    ka.in_shape[0][1] = ka.in_shape[1][0] = k;
    ka.in_shape[1][1] = n;
    ka.out_shape[0][0] = m;
    ka.out_shape[0][1] = n;
    ka.in[0] = ka.in[1] = mem;
    ka.out[0] = (char *)mem + MiB;
    return ka;
}

static void *matmul_thread(void *p)
{
    struct mm_arg *a = p;
    struct vdev_kernel_args ka = matmul_args(a->mem, 8, 8, 8);
    a->st = a->b->ops->run_kernel(a->b->ctx, a->dev, &ka);
    snprintf(a->msg, sizeof a->msg, "%s", vdev_last_error());
    return NULL;
}

static void test_lazy_cublas(void)
{
    stub_setup(2, 4 * GiB, 13000, 0, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    void *mem[2] = {0};
    CHECK_OK(b.ops->reserve(b.ctx, 0, 2 * MiB, &mem[0]));
    CHECK_OK(b.ops->reserve(b.ctx, 1, 2 * MiB, &mem[1]));
    /* everything so far ran without cuBLAS */
    CHECK(mapped("libcublas") == 0);
    /* empty products need none */
    struct vdev_kernel_args ka = matmul_args(mem[0], 0, 8, 8);
    CHECK_OK(b.ops->run_kernel(b.ctx, 0, &ka));
    ka = matmul_args(mem[0], 8, 8, 0);
    CHECK_OK(b.ops->run_kernel(b.ctx, 0, &ka));
    CHECK(mapped("libcublas") == 0);
    /* four threads on two GPUs at once: cuBLAS loaded once; with no real
     * driver its handle cannot be made, and every product says so */
    pthread_t t[4];
    struct mm_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (struct mm_arg){&b, i % 2, mem[i % 2], VDEV_OK, ""};
        pthread_create(&t[i], NULL, matmul_thread, &a[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(mapped("libcublas.so") == 1);
    for (int i = 0; i < 4; i++) {
        CHECK(a[i].st == VDEV_ERR_BACKEND);
        CHECK(strncmp(a[i].msg, "CUDA plugin: cublasCreate failed: ", 34) == 0);
    }
    printf("a product against the stand-in: %s\n", a[0].msg);
    b.ops->release(b.ctx, 0, mem[0], 2 * MiB);
    b.ops->release(b.ctx, 1, mem[1], 2 * MiB);
    vdev_backend_destroy(&b);
    expect_clean("products", 1);
}

/* ---- the caller's current context ---- */

static void noop_host(void *arg) { (void)arg; }

/* Every entry leaves the calling thread's current context as it found it:
 * none, or another GPU's (what CuPy or PyTorch on the same thread work on). */
static void test_caller_context(void)
{
    stub_setup(2, 4 * GiB, 13000, 0, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    CUresult (*get)(CUcontext *), (*set)(CUcontext), (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    *(void **)&get = dlsym(stub_handle, "cuCtxGetCurrent");
    *(void **)&set = dlsym(stub_handle, "cuCtxSetCurrent");
    *(void **)&retain = dlsym(stub_handle, "cuDevicePrimaryCtxRetain");
    *(void **)&release = dlsym(stub_handle, "cuDevicePrimaryCtxRelease_v2");
    CHECK(get && set && retain && release);
    if (!get || !set || !retain || !release)
        return;
    CUcontext gpu1 = NULL, now = NULL;
    CHECK(retain(&gpu1, 1) == CUDA_SUCCESS);
    for (int round = 0; round < 2; round++) {
        CUcontext want = round ? gpu1 : NULL;
        CHECK(set(want) == CUDA_SUCCESS);
        int kept = 0, calls = 0;
#define KEPT(call)                                                                                 \
    do {                                                                                           \
        call;                                                                                      \
        calls++;                                                                                   \
        kept += get(&now) == CUDA_SUCCESS && now == want;                                          \
        if (now != want)                                                                           \
            check_fail(__FILE__, __LINE__, "%s changed the current context", #call);             \
    } while (0)
        uint64_t f = 0, t = 0, held = 0;
        void *mem = NULL, *ev = NULL;
        int q = -1;
        float h[64] = {1};
        KEPT(CHECK_OK(b.ops->mem_info(b.ctx, 0, &f, &t)));
        KEPT(CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_HIGH, &q, &held)));
        KEPT(CHECK_OK(b.ops->reserve(b.ctx, q, 2 * MiB, &mem)));
        KEPT(CHECK_OK(b.ops->extend(b.ctx, q, mem, 2 * MiB, 4 * MiB)));
        KEPT(CHECK_OK(b.ops->copy_h2d(b.ctx, q, mem, h, sizeof h)));
        KEPT(CHECK_OK(b.ops->fill(b.ctx, q, (char *)mem + 4096, 7, 64)));
        KEPT(CHECK_OK(b.ops->copy_d2d(b.ctx, q, (char *)mem + 8192, q, mem, sizeof h)));
        KEPT(CHECK_OK(b.ops->copy_d2h(b.ctx, q, h, mem, sizeof h)));
        KEPT(CHECK_OK(b.ops->submit_host(b.ctx, q, noop_host, NULL, 0)));
        KEPT(CHECK_OK(b.ops->event_record(b.ctx, q, &ev)));
        KEPT(CHECK_OK(b.ops->stream_wait_event(b.ctx, 0, ev)));
        KEPT((void)b.ops->event_done(b.ctx, ev));
        KEPT(b.ops->event_wait(b.ctx, ev));
        KEPT(b.ops->event_drop(b.ctx, ev));
        struct vdev_kernel_args ka = matmul_args(mem, 0, 8, 8); /* empty: no cuBLAS */
        KEPT(CHECK_OK(b.ops->run_kernel(b.ctx, q, &ka)));
        KEPT(CHECK_OK(b.ops->synchronize(b.ctx, q)));
        KEPT(b.ops->release(b.ctx, q, mem, 4 * MiB));
        KEPT(b.ops->stream_close(b.ctx, q));
#undef KEPT
        CHECK(kept == calls);
        CHECK(h[0] == 1.0f);
    }
    /* the backend's destroy too (gpu1 is still current) */
    vdev_backend_destroy(&b);
    CHECK(get(&now) == CUDA_SUCCESS && now == gpu1);
    CHECK(set(NULL) == CUDA_SUCCESS);
    CHECK(release(1) == CUDA_SUCCESS);
    expect_clean("the caller's context", 1);
}

/* ---- the stand-in's own rules ---- */

static void test_stub_rules(void)
{
    stub_setup(1, 4 * GiB, 13000, 0, 0, 0);
#define FN(name)                                                                                   \
    __typeof__(&name) p_##name;                                                                    \
    *(void **)&p_##name = dlsym(stub_handle, XSTR(name))
#define STR_(x) #x
#define XSTR(x) STR_(x)
    FN(cuInit);
    FN(cuDevicePrimaryCtxRetain);
    FN(cuDevicePrimaryCtxRelease);
    FN(cuCtxSetCurrent);
    FN(cuStreamCreate);
    FN(cuStreamDestroy);
    FN(cuMemAlloc);
    FN(cuMemFree);
    FN(cuMemsetD32Async);
    FN(cuMemAddressReserve);
    FN(cuMemAddressFree);
    FN(cuMemCreate);
    FN(cuMemRelease);
    FN(cuMemMap);
    FN(cuEventCreate);
    FN(cuEventRecord);
    FN(cuEventDestroy);
    FN(cuStreamWaitEvent);
    FN(cuStreamSynchronize);
#undef FN
    CHECK(p_cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx;
    CHECK(p_cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(p_cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CUstream s1, s2;
    CHECK(p_cuStreamCreate(&s1, 0) == CUDA_SUCCESS && p_cuStreamCreate(&s2, 0) == CUDA_SUCCESS);
    CUdeviceptr p;
    CHECK(p_cuMemAlloc(&p, MiB) == CUDA_SUCCESS);
    struct vdev_stub_stats st;
    /* two streams write the same bytes with nothing between them: a race */
    CHECK(p_cuMemsetD32Async(p, 1, 256, s1) == CUDA_SUCCESS);
    CHECK(p_cuMemsetD32Async(p, 2, 256, s2) == CUDA_SUCCESS);
    S.stats(0, &st);
    CHECK(st.violations == 1);
    CHECK(S.violation(0) && strstr(S.violation(0), "race: cuMemsetD32Async on S"));
    /* with an event between them: none */
    CUevent e;
    CHECK(p_cuEventCreate(&e, 0) == CUDA_SUCCESS);
    CHECK(p_cuEventRecord(e, s2) == CUDA_SUCCESS);
    CHECK(p_cuStreamWaitEvent(s1, e, 0) == CUDA_SUCCESS);
    CHECK(p_cuMemsetD32Async(p, 3, 256, s1) == CUDA_SUCCESS);
    /* freed while s1 may still write it, then after the host waited */
    CHECK(p_cuMemsetD32Async(p + 4096, 3, 256, s2) == CUDA_SUCCESS);
    S.stats(0, &st);
    CHECK(st.violations == 1);
    CHECK(p_cuStreamSynchronize(s1) == CUDA_SUCCESS);
    CHECK(p_cuMemFree(p) == CUDA_SUCCESS);
    S.stats(0, &st);
    CHECK(st.violations == 2); /* s2's write was not waited for */
    CHECK(S.violation(1) && strstr(S.violation(1), "cuMemFree of") &&
          strstr(S.violation(1), "may still touch it"));
    /* VMM: sizes in granules, maps inside a reservation */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    CHECK(p_cuMemCreate(&h, MiB, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(p_cuMemCreate(&h, 2 * MiB, &prop, 0) == CUDA_SUCCESS);
    CUdeviceptr va;
    CHECK(p_cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(p_cuMemMap(va + 4 * MiB, 2 * MiB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(p_cuMemMap(va + MiB, 2 * MiB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(p_cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(p_cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);
    CHECK(p_cuMemAddressFree(va, 4 * MiB) == CUDA_SUCCESS);
    S.stats(0, &st);
    CHECK(st.violations == 6);
    CHECK(p_cuEventDestroy(e) == CUDA_SUCCESS);
    CHECK(p_cuStreamDestroy(s1) == CUDA_SUCCESS && p_cuStreamDestroy(s2) == CUDA_SUCCESS);
    CHECK(p_cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
    CHECK(p_cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    S.stats(0, &st);
    CHECK(st.handles == 0 && st.reservations == 0 && st.blocks == 0 && st.streams == 0 &&
          st.events == 0);
}

int main(void)
{
    check_fresh(NULL);
    if (stub_load() != 0) {
        check_fail(__FILE__, __LINE__, "cannot load the stand-in driver %s", VDEV_STUB_CUDA_PATH);
        return check_done();
    }
    test_stub_rules();
    test_open();
    test_memory();
    test_memory_errors();
    test_peer_copy();
    test_fill_and_staging();
    test_lazy_cublas();
    test_caller_context();
    check_fresh(NULL);
    S.setup(NULL);
    return check_done();
}
