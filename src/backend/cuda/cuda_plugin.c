/* cuda_plugin.c — the "cuda" backend: NVIDIA GPUs through the CUDA driver
 * API, built as the separate shared library libvdev-cuda.so that the core
 * loads with dlopen (src/backend/backend.c), so the core never links CUDA.
 * This file loads the driver, sets up the devices and holds the table;
 * cuda_memory.c has the regions, cuda_stream.c the work on the streams, and
 * the nvcc side (cuda_kernels.cu, cuda_reduce.cu, cuda_blas.cu) the kernels.
 *
 * Loading. The library exports one symbol, vdev_cuda_plugin_open. It does not
 * link libcuda: it dlopens libcuda.so.1 itself and resolves every cu*
 * function it uses by name, so that on a machine without an NVIDIA driver the
 * plugin still loads and can say why there is no GPU in one line:
 *   "CUDA plugin: libcuda.so.1 not found"
 *   "CUDA plugin: libcuda.so.1 cannot be loaded: <the loader's words>" (found, not loadable)
 *   "CUDA plugin: cuInit failed: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
 *   "CUDA plugin: the NVIDIA driver supports CUDA 12.4 (cuDriverGetVersion 12040), ..."
 *   "CUDA plugin: no CUDA device found"
 * The names come from the toolkit's cuda.h, whose macros map each function to
 * its current ABI version (cuMemAlloc -> cuMemAlloc_v2), so the dlsym names
 * always match the prototypes compiled against. The CUDA runtime (kernel
 * launches) is linked statically (cudart_static), and cuBLAS is not linked at
 * all: cuda_blas.cu dlopens it on the first matrix product, so a process that
 * loads the plugin and never multiplies matrices never maps libcublas and
 * libcublasLt (about half a gigabyte). Nothing here makes the loader fail for
 * want of a driver or a library.
 *
 * The driver must speak the CUDA major version the plugin was built with
 * (NVIDIA's minor version compatibility: a CUDA 13.x build runs on any driver
 * for CUDA 13.0 or newer, which on Linux is driver 580 or newer); an older
 * driver is refused at every open with both versions in the reason. A GPU
 * for which the build has no machine code (compute capability 10.0 and
 * later: the build has sm_90 code and compute_90 PTX) runs the kernels from
 * the PTX, which its driver compiles only if it is at least as new as the
 * toolkit, minor version included: an older one is refused at start-up,
 * with both versions (dev_setup), as every first kernel launch would fail.
 *
 * Devices. Each GPU's primary context (the one the CUDA runtime and cuBLAS
 * use too) is retained (once more for the life of the process, see
 * kept_ctx) and made current on the calling thread before any call that
 * needs it. Every entry of the table that may make a context current gives
 * the caller's back on the way out (the SCOPED wrappers at the table), as
 * opening does: a thread that works with CuPy or PyTorch on the device it
 * chose stays on it, whichever GPU vdev worked on.
 *
 * Streams. Each GPU has a stream of its own (index = the GPU's), and
 * stream_open makes more on the GPU's context, one per logical device (the
 * runtime asks), so logical devices of one card run side by side. Every
 * stream has its own scratch buffer and cuBLAS workspace (taken when
 * stream_open hands the stream out, and reported as held so that the card's
 * budget leaves them out; the GPU's own stream, used without stream_open,
 * takes them at its first kernel), its own cuBLAS handle and launch lock.
 * A logical device's priority becomes the stream's CUDA priority
 * (cuStreamCreateWithPriority, within cuCtxGetStreamPriorityRange): critical
 * the greatest, high half-way, normal and low the least, CUDA's default (no
 * lower one exists). The GPU's own
 * stream has the default priority and is handed out to a device of normal or
 * low priority.
 *
 * Errors. The plugin cannot link the core (it is loaded into programs that
 * link the core statically and export nothing), so the core hands its error
 * setter, vdev_error(), to vdev_cuda_plugin_open; every failure's message
 * then reaches vdev_last_error(). */
#define _GNU_SOURCE
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <string.h>

#ifndef VDEV_CUDA_LIB_DIR
#define VDEV_CUDA_LIB_DIR ""
#endif
#ifndef VDEV_CUDA_SASS_ARCHS
#define VDEV_CUDA_SASS_ARCHS "90,"
#endif

void *vdev_cuda_dlopen_toolkit(const char *soname, char *why, size_t cap)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    const char *e = dlerror();
    snprintf(why, cap, "%s", e ? e : "not found");
    if (VDEV_CUDA_LIB_DIR[0]) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", VDEV_CUDA_LIB_DIR, soname);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) { /* both tries, each in the loader's words */
            size_t used = strlen(why);
            e = dlerror();
            snprintf(why + used, cap - used, "; %s", e ? e : "not found");
        }
    }
    return h;
}

#define EXPORT __attribute__((visibility("default")))

#define CUDA_MAJOR_BUILT (CUDA_VERSION / 1000)

struct vdev_cu_driver vdev_cu;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static void *libcuda;      /* kept open for the life of the process */
static int basic_resolved; /* every function in VDEV_CU_BASIC_FNS found */
static int all_resolved;   /* and every one in VDEV_CU_FNS */

/* One retain of each GPU's primary context held for the life of the process
 * (under load_lock). The CUDA runtime, which launches the kernels and runs
 * cuBLAS, keeps module and library state in the primary context; if the
 * backend's own retain were the last one, destroying the backend (vdev_shutdown
 * does) would destroy the context under the runtime's feet, and kernels
 * launched after the next start-up would fail. */
static CUcontext kept_ctx[VDEV_CU_MAX_GPUS];
static int driver_version; /* cuDriverGetVersion, at the last open (load_lock) */

/* Whether the build has machine code that runs on compute capability cc
 * (major * 10 + minor): SASS of the same major and a minor no greater. */
static int has_sass(int cc)
{
    for (const char *p = VDEV_CUDA_SASS_ARCHS; *p;) {
        int a = atoi(p);
        if (a / 10 == cc / 10 && a % 10 <= cc % 10)
            return 1;
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    return 0;
}

/* ---- errors ---- */

const char *vdev_cu_errstr(CUresult r, char *buf, size_t cap)
{
    const char *name = NULL, *text = NULL;
    if (vdev_cu.cuGetErrorName)
        vdev_cu.cuGetErrorName(r, &name);
    if (vdev_cu.cuGetErrorString)
        vdev_cu.cuGetErrorString(r, &text);
    if (name && text) {
        snprintf(buf, cap, "%s: %s", name, text);
        return buf;
    }
    /* A driver that cannot name its errors (the toolkit's stub library
     * cannot): the codes that explain a failed start-up. */
    static const struct {
        CUresult r;
        const char *s;
    } known[] = {
        {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY: CUDA driver is a stub library"},
        {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"},
        {CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
         "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER: the call needs a newer driver"},
        {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
         "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: driver and kernel module versions differ"},
        {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY: out of memory"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].r == r) {
            snprintf(buf, cap, "%s", known[i].s);
            return buf;
        }
    snprintf(buf, cap, "CUresult %d", (int)r);
    return buf;
}

static vdev_error_fn core_error;

/* Sets the caller's vdev error when the core's vdev_error can be reached;
 * else prints failures other than OOM (the allocator words those itself). */
enum vdev_status vdev_cu_fail(enum vdev_status code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (core_error)
        return core_error(code, "%s", msg);
    if (code != VDEV_ERR_OOM)
        fprintf(stderr, "vdev: warning: %s\n", msg);
    return code;
}

enum vdev_status vdev_cu_fail_call(CUresult r, int dev, const char *what)
{
    char e[160];
    enum vdev_status code = r == CUDA_ERROR_OUT_OF_MEMORY ? VDEV_ERR_OOM : VDEV_ERR_BACKEND;
    return vdev_cu_fail(code, "CUDA GPU %d: %s failed: %s", dev, what,
                        vdev_cu_errstr(r, e, sizeof e));
}

CUresult vdev_cu_use_ctx(const struct cu_dev *d)
{
    CUcontext cur = NULL;
    if (vdev_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == d->ctx)
        return CUDA_SUCCESS;
    return vdev_cu.cuCtxSetCurrent(d->ctx);
}

char *vdev_cu_fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, cap, "%.2f %s", v, unit[u]);
    return buf;
}

/* ---- devices ---- */

static int cu_n_devices(void *vctx) { return ((struct cu_ctx *)vctx)->n; }

static enum vdev_status cu_device_info(void *vctx, int dev, struct vdev_backend_device_info *out)
{
    struct cu_dev *d = vdev_cu_dev(vctx, dev);
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", d->name);
    out->total_bytes = d->total;
    out->cc_major = d->cc_major;
    out->cc_minor = d->cc_minor;
    return VDEV_OK;
}

static enum vdev_status cu_mem_info(void *vctx, int dev, uint64_t *free_bytes, uint64_t *total)
{
    struct cu_dev *d = vdev_cu_dev(vctx, dev);
    size_t f = 0, t = 0;
    CUresult r = vdev_cu_use_ctx(d);
    if (r == CUDA_SUCCESS)
        r = vdev_cu.cuMemGetInfo(&f, &t);
    if (r != CUDA_SUCCESS)
        return vdev_cu_fail_call(r, dev, "cuMemGetInfo");
    *free_bytes = f;
    *total = t;
    return VDEV_OK;
}

/* ---- life cycle ---- */

/* The CUDA priority of a vdev priority on d: critical the greatest, high
 * half-way, normal and low the least (CUDA's default). */
static int cu_priority(const struct cu_dev *d, int priority)
{
    if (priority == VDEV_PRIORITY_CRITICAL)
        return d->prio_greatest;
    if (priority == VDEV_PRIORITY_HIGH)
        return d->prio_greatest + (d->prio_least - d->prio_greatest) / 2;
    return d->prio_least;
}

static void dev_teardown(struct cu_dev *d, struct cu_stream *own)
{
    if (d->ctx && vdev_cu_use_ctx(d) == CUDA_SUCCESS) {
        vdev_cu_stream_free(own);
        while (d->regions) { /* normally none: the allocators released theirs */
            struct cu_region *r = d->regions;
            d->regions = r->next;
            vdev_cu_region_free(d, r);
            free(r);
        }
        vdev_cu_events_destroy(d);
    }
    if (d->ctx)
        vdev_cu.cuDevicePrimaryCtxRelease(d->dev);
    d->ctx = NULL;
    pthread_mutex_destroy(&d->mem_lock);
    pthread_mutex_destroy(&d->ev_lock);
    pthread_rwlock_destroy(&d->measure_lock);
}

static void cu_destroy(void *vctx)
{
    struct cu_ctx *c = vctx;
    /* NCCL communicators still open first (a runtime's that was shut down
     * with them open), while their GPUs' contexts are retained. */
    vdev_cu_coll_destroy_all(c);
    /* Opened streams next (normally none: the runtime closed them), each
     * with its GPU's context current. */
    for (int q = c->n; q < VDEV_CU_MAX_QUEUES; q++)
        if (c->qs[q] && vdev_cu_use_ctx(c->qs[q]->d) == CUDA_SUCCESS)
            vdev_cu_stream_free(c->qs[q]);
    for (int i = 0; i < c->n; i++)
        dev_teardown(&c->devs[i], c->qs[i]);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->coll_lock);
    free(c->own_taken);
    free(c->devs);
    free(c->peer);
    free(c);
}

/* ---- streams ---- */

static enum vdev_status cu_stream_open(void *vctx, int dev, int priority, int *q, uint64_t *held)
{
    struct cu_ctx *c = vctx;
    *held = 0;
    if (dev < 0 || dev >= c->n)
        return vdev_cu_fail(VDEV_ERR_NOT_FOUND, "cuda backend has no device %d", dev);
    struct cu_dev *d = &c->devs[dev];
    int prio = cu_priority(d, priority);
    CUresult r = vdev_cu_use_ctx(d);
    if (r != CUDA_SUCCESS)
        return vdev_cu_fail_call(r, dev, "cuCtxSetCurrent");
    const char *what = "";
    pthread_mutex_lock(&c->lock);
    if (prio == d->prio_least && !c->own_taken[dev]) {
        /* the GPU's own stream, with its scratch and workspace taken now */
        struct cu_stream *own = c->qs[dev];
        pthread_mutex_lock(&own->launch_lock);
        int bad = vdev_cu_stream_equip(own, NULL, &r, &what);
        /* what it holds, taken now or by a kernel run on it before (run_kernel
         * equips the GPU's own stream at its first kernel) */
        if (!bad)
            *held = VDEV_CUDA_SCRATCH_BYTES + d->ws_bytes;
        pthread_mutex_unlock(&own->launch_lock);
        c->own_taken[dev] = !bad;
        pthread_mutex_unlock(&c->lock);
        if (bad)
            return vdev_cu_fail_call(r, dev, what);
        *q = dev;
        return VDEV_OK;
    }
    int slot = c->n;
    while (slot < VDEV_CU_MAX_QUEUES && c->qs[slot])
        slot++;
    if (slot == VDEV_CU_MAX_QUEUES) {
        pthread_mutex_unlock(&c->lock);
        return vdev_cu_fail(VDEV_ERR_UNSUPPORTED, "cuda backend: more than %d streams",
                            VDEV_CU_MAX_QUEUES);
    }
    struct cu_stream *s = vdev_cu_stream_make(d, slot, prio, 1, &r, &what);
    if (s)
        c->qs[slot] = s;
    pthread_mutex_unlock(&c->lock);
    if (!s)
        return vdev_cu_fail_call(r, dev, what);
    *q = slot;
    *held = VDEV_CUDA_SCRATCH_BYTES + d->ws_bytes;
    return VDEV_OK;
}

static void cu_stream_close(void *vctx, int q)
{
    struct cu_ctx *c = vctx;
    struct cu_stream *s = c->qs[q];
    if (vdev_cu_use_ctx(s->d) == CUDA_SUCCESS)
        vdev_cu.cuStreamSynchronize(s->s);
    if (q < c->n) {
        /* The GPU's own stream stays, without its memory. Unequipped before
         * the lock: cublasDestroy synchronises the whole device, which must
         * not hold every other stream's open and close; the stream is still
         * taken meanwhile, so nobody else equips it. */
        if (vdev_cu_use_ctx(s->d) == CUDA_SUCCESS)
            vdev_cu_stream_unequip(s);
        pthread_mutex_lock(&c->lock);
        c->own_taken[q] = 0;
        pthread_mutex_unlock(&c->lock);
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->qs[q] = NULL;
    pthread_mutex_unlock(&c->lock);
    if (s && vdev_cu_use_ctx(s->d) == CUDA_SUCCESS)
        vdev_cu_stream_free(s);
}

static uint64_t cu_held_bytes(void *vctx, int dev)
{
    struct cu_dev *d = vdev_cu_dev(vctx, dev);
    pthread_mutex_lock(&d->mem_lock);
    uint64_t h = d->streams_held + d->coll_held;
    pthread_mutex_unlock(&d->mem_lock);
    return h;
}

/* ---- the table: each entry keeps the caller's current context ---- */

/* The context current on the calling thread when an entry began. */
struct cu_scope {
    CUcontext prev;
    int known;
};

static struct cu_scope scope_enter(void)
{
    struct cu_scope sc = {NULL, 0};
    sc.known = vdev_cu.cuCtxGetCurrent(&sc.prev) == CUDA_SUCCESS;
    return sc;
}

/* Makes the context of scope_enter current again if the entry changed it. */
static void scope_leave(struct cu_scope sc)
{
    CUcontext now = NULL;
    if (sc.known && vdev_cu.cuCtxGetCurrent(&now) == CUDA_SUCCESS && now != sc.prev)
        vdev_cu.cuCtxSetCurrent(sc.prev);
}

/* scoped_<fn>: fn between scope_enter and scope_leave. */
#define SCOPED(ret, fn, params, args)                                                              \
    static ret scoped_##fn params                                                                  \
    {                                                                                              \
        struct cu_scope sc = scope_enter();                                                        \
        ret ret_ = fn args;                                                                        \
        scope_leave(sc);                                                                           \
        return ret_;                                                                               \
    }
#define SCOPED_VOID(fn, params, args)                                                              \
    static void scoped_##fn params                                                                 \
    {                                                                                              \
        struct cu_scope sc = scope_enter();                                                        \
        fn args;                                                                                   \
        scope_leave(sc);                                                                           \
    }
#define ST enum vdev_status
SCOPED(ST, cu_mem_info, (void *c, int d, uint64_t *f, uint64_t *t), (c, d, f, t))
SCOPED(ST, vdev_cu_reserve, (void *c, int d, uint64_t n, void **b), (c, d, n, b))
SCOPED_VOID(vdev_cu_release, (void *c, int d, void *b, uint64_t n), (c, d, b, n))
SCOPED(ST, vdev_cu_extend, (void *c, int d, void *b, uint64_t o, uint64_t n), (c, d, b, o, n))
SCOPED(ST, vdev_cu_copy_h2d, (void *c, int d, void *x, const void *y, uint64_t n),
       (c, d, x, y, n))
SCOPED(ST, vdev_cu_copy_d2h, (void *c, int d, void *x, const void *y, uint64_t n),
       (c, d, x, y, n))
SCOPED(ST, vdev_cu_copy_d2d, (void *c, int dd, void *x, int sd, const void *y, uint64_t n),
       (c, dd, x, sd, y, n))
SCOPED(ST, vdev_cu_copy_d2d_lazy,
       (void *c, int dd, void *x, int sd, const void *y, uint64_t n, uint64_t a),
       (c, dd, x, sd, y, n, a))
SCOPED(ST, vdev_cu_fill, (void *c, int d, void *x, uint32_t v, uint64_t n), (c, d, x, v, n))
SCOPED(ST, vdev_cu_submit_host, (void *c, int d, vdev_host_fn f, const void *a, size_t n),
       (c, d, f, a, n))
SCOPED(ST, vdev_cu_synchronize, (void *c, int d), (c, d))
SCOPED(ST, vdev_cu_event_record, (void *c, int d, void **e), (c, d, e))
SCOPED(int, vdev_cu_event_done, (void *c, void *e), (c, e))
SCOPED_VOID(vdev_cu_event_wait, (void *c, void *e), (c, e))
SCOPED(ST, vdev_cu_stream_wait_event, (void *c, int d, void *e), (c, d, e))
SCOPED(ST, vdev_cu_run_kernel, (void *c, int d, const struct vdev_kernel_args *a), (c, d, a))
SCOPED_VOID(cu_destroy, (void *c), (c))
SCOPED(ST, cu_stream_open, (void *c, int d, int p, int *q, uint64_t *h), (c, d, p, q, h))
SCOPED_VOID(cu_stream_close, (void *c, int q), (c, q))
SCOPED(ST, vdev_cu_coll_open, (void *c, const int *qs, int n, void **m, uint64_t *h),
       (c, qs, n, m, h))
SCOPED(ST, vdev_cu_coll_run, (void *c, void *m, int r, const struct vdev_backend_coll *k),
       (c, m, r, k))
SCOPED_VOID(vdev_cu_coll_abort, (void *c, void *m), (c, m))
SCOPED_VOID(vdev_cu_coll_close, (void *c, void *m), (c, m))
#undef ST

/* n_devices, device_info, held_bytes, event_drop and coll_library make no
 * context current: they go in as they are. */
#define OPS_COMMON                                                                                 \
    .api_version = VDEV_BACKEND_API_VERSION, .name = "cuda", .is_gpu = 1, .host_addressable = 0,   \
    .n_devices = cu_n_devices, .device_info = cu_device_info, .mem_info = scoped_cu_mem_info,      \
    .reserve = scoped_vdev_cu_reserve, .release = scoped_vdev_cu_release,                          \
    .copy_h2d = scoped_vdev_cu_copy_h2d, .copy_d2h = scoped_vdev_cu_copy_d2h,                      \
    .copy_d2d = scoped_vdev_cu_copy_d2d, .fill = scoped_vdev_cu_fill,                              \
    .submit_host = scoped_vdev_cu_submit_host, .synchronize = scoped_vdev_cu_synchronize,          \
    .event_record = scoped_vdev_cu_event_record, .event_done = scoped_vdev_cu_event_done,          \
    .event_wait = scoped_vdev_cu_event_wait,                                                       \
    .stream_wait_event = scoped_vdev_cu_stream_wait_event, .event_drop = vdev_cu_event_drop,       \
    .run_kernel = scoped_vdev_cu_run_kernel, .destroy = scoped_cu_destroy,                         \
    .stream_open = scoped_cu_stream_open, .stream_close = scoped_cu_stream_close,                  \
    .held_bytes = cu_held_bytes, .coll_library = vdev_cu_coll_library,                             \
    .coll_open = scoped_vdev_cu_coll_open, .coll_run = scoped_vdev_cu_coll_run,                    \
    .coll_abort = scoped_vdev_cu_coll_abort, .coll_close = scoped_vdev_cu_coll_close,              \
    .copy_d2d_lazy = scoped_vdev_cu_copy_d2d_lazy

/* Every GPU has VMM: regions grow in place. */
static const struct vdev_backend_ops cu_ops_vmm = {OPS_COMMON, .extend = scoped_vdev_cu_extend};
/* Some GPU lacks it: cuMemAlloc regions, growth by adding regions. */
static const struct vdev_backend_ops cu_ops_plain = {OPS_COMMON, .extend = NULL};

/* Sets up GPU i: context, properties, its own stream (with its scratch and
 * workspace) in *own. 0, or -1 (a CUDA call failed) or -2 (a GPU this build
 * cannot run kernels on) with reason set. */
static int dev_setup(struct cu_dev *d, int i, struct cu_stream **own, char *reason, size_t cap)
{
    char e[160];
    const char *what;
    CUresult r;
    d->index = i;
    pthread_mutex_init(&d->mem_lock, NULL);
    pthread_mutex_init(&d->ev_lock, NULL);
    pthread_rwlockattr_t ra; /* a waiting writer (the NCCL measure) before new readers */
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&d->measure_lock, &ra);
    pthread_rwlockattr_destroy(&ra);
#define TRY(fn, ...)                                                                               \
    do {                                                                                           \
        what = #fn;                                                                                \
        if ((r = vdev_cu.fn(__VA_ARGS__)) != CUDA_SUCCESS)                                         \
            goto bad;                                                                              \
    } while (0)
    TRY(cuDeviceGet, &d->dev, i);
    pthread_mutex_lock(&load_lock);
    r = kept_ctx[i] ? CUDA_SUCCESS : vdev_cu.cuDevicePrimaryCtxRetain(&kept_ctx[i], d->dev);
    pthread_mutex_unlock(&load_lock);
    what = "cuDevicePrimaryCtxRetain";
    if (r != CUDA_SUCCESS)
        goto bad;
    TRY(cuDevicePrimaryCtxRetain, &d->ctx, d->dev);
    TRY(cuCtxSetCurrent, d->ctx);
    TRY(cuDeviceGetName, d->name, (int)sizeof d->name, d->dev);
    size_t total = 0;
    TRY(cuDeviceTotalMem, &total, d->dev);
    d->total = total;
    TRY(cuDeviceGetAttribute, &d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev);
    TRY(cuDeviceGetAttribute, &d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev);
    if (d->cc_major * 10 + d->cc_minor < VDEV_CUDA_MIN_ARCH) {
        /* The kernels are built for VDEV_CUDA_MIN_ARCH and newer (PTX of that
         * architecture JIT-compiles forward, never back): on an older GPU
         * every kernel would fail while copies worked. */
        snprintf(reason, cap,
                 "CUDA plugin: GPU %d has compute capability %d.%d; this build's kernels need "
                 "%d.%d or newer (configure with "
                 "-DCMAKE_CUDA_ARCHITECTURES=\"%d%d-real;%d-virtual\" "
                 "to build them for it)",
                 i, d->cc_major, d->cc_minor, VDEV_CUDA_MIN_ARCH / 10, VDEV_CUDA_MIN_ARCH % 10,
                 d->cc_major, d->cc_minor, VDEV_CUDA_MIN_ARCH);
        return -2;
    }
    int cc = d->cc_major * 10 + d->cc_minor;
    pthread_mutex_lock(&load_lock);
    int drv = driver_version;
    pthread_mutex_unlock(&load_lock);
    if (!has_sass(cc) && drv < CUDA_VERSION) {
        /* A newer GPU runs the kernels from the PTX, which the driver
         * compiles at the first launch only if it reads this toolkit's PTX
         * (cudaErrorUnsupportedPtxVersion otherwise): refused now rather
         * than at every first kernel. */
        snprintf(reason, cap,
                 "CUDA plugin: GPU %d (compute capability %d.%d) has no machine code in this "
                 "build, and its kernels' CUDA %d.%d PTX needs a driver for CUDA %d.%d or newer "
                 "(this one: %d.%d); or build with -DCMAKE_CUDA_ARCHITECTURES=%d-real",
                 i, d->cc_major, d->cc_minor, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,
                 CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, drv / 1000, drv % 1000 / 10, cc);
        return -2;
    }
    TRY(cuDeviceGetAttribute, &d->n_sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev);
    TRY(cuDeviceGetAttribute, &d->vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        d->dev);
    if (d->vmm) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = (int)d->dev;
        TRY(cuMemGetAllocationGranularity, &d->gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (d->gran == 0)
            d->gran = 2u << 20;
    }
    d->ws_bytes = VDEV_CUDA_WORKSPACE_BYTES(d->cc_major);
    TRY(cuCtxGetStreamPriorityRange, &d->prio_least, &d->prio_greatest);
#undef TRY
    if (!(*own = vdev_cu_stream_make(d, i, d->prio_least, 0, &r, &what)))
        goto bad;
    return 0;
bad:
    snprintf(reason, cap, "CUDA plugin: GPU %d: %s failed: %s", i, what,
             vdev_cu_errstr(r, e, sizeof e));
    return -1;
}

/* The oldest Linux driver for each CUDA major version, from NVIDIA's table of
 * minor version compatibility (CUDA 11.x: 450, 12.x: 525, 13.x: 580). */
static int min_linux_driver(int cuda_major)
{
    return cuda_major >= 13 ? 580 : cuda_major == 12 ? 525 : 450;
}

/* dlopens libcuda.so.1 and resolves the functions (once per process; a
 * failure is retried at the next open: the driver may have appeared), then,
 * at every open, cuInit and the version check. */
static enum vdev_status load_driver(char *reason, size_t cap)
{
    char e[160];
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&load_lock);
    if (!libcuda) {
        libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!libcuda) {
            /* absent (no driver), or there and broken: a wrong architecture,
             * a missing dependency, a driver half installed */
            const char *why = dlerror();
            if (!why || strstr(why, "No such file or directory"))
                snprintf(reason, cap, "CUDA plugin: libcuda.so.1 not found");
            else
                snprintf(reason, cap, "CUDA plugin: libcuda.so.1 cannot be loaded: %s", why);
            st = VDEV_ERR_UNSUPPORTED;
            goto out;
        }
    }
#define X(name)                                                                                    \
    if (!(*(void **)(&vdev_cu.name) = dlsym(libcuda, XSTR(name)))) {                               \
        snprintf(reason, cap, "CUDA plugin: libcuda.so.1 lacks %s (driver too old?)", XSTR(name)); \
        st = VDEV_ERR_UNSUPPORTED;                                                                 \
        goto out;                                                                                  \
    }
#define STR_(x) #x
#define XSTR(x) STR_(x) /* expands cuda.h's versioning macros first */
    if (!basic_resolved) {
        VDEV_CU_BASIC_FNS(X)
        basic_resolved = 1;
    }
    CUresult r = vdev_cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(reason, cap, "CUDA plugin: cuInit failed: %s", vdev_cu_errstr(r, e, sizeof e));
        st = VDEV_ERR_UNSUPPORTED;
        goto out;
    }
    int ver = 0;
    r = vdev_cu.cuDriverGetVersion(&ver);
    if (r != CUDA_SUCCESS) {
        snprintf(reason, cap, "CUDA plugin: cuDriverGetVersion failed: %s",
                 vdev_cu_errstr(r, e, sizeof e));
        st = VDEV_ERR_UNSUPPORTED;
        goto out;
    }
    if (ver / 1000 < CUDA_MAJOR_BUILT) {
        snprintf(reason, cap,
                 "CUDA plugin: the NVIDIA driver supports CUDA %d.%d (cuDriverGetVersion %d), "
                 "older than the CUDA %d.%d this plugin was built with; CUDA %d.x needs NVIDIA "
                 "driver %d or newer",
                 ver / 1000, ver % 1000 / 10, ver, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,
                 CUDA_MAJOR_BUILT, min_linux_driver(CUDA_MAJOR_BUILT));
        st = VDEV_ERR_UNSUPPORTED;
        goto out;
    }
    driver_version = ver;
    if (!all_resolved) {
        VDEV_CU_FNS(X)
        all_resolved = 1;
    }
#undef X
out:
    pthread_mutex_unlock(&load_lock);
    return st;
}

EXPORT enum vdev_status vdev_cuda_plugin_open(int api_version, struct vdev_backend *out,
                                              char *reason, size_t cap, vdev_error_fn set_error);

EXPORT enum vdev_status vdev_cuda_plugin_open(int api_version, struct vdev_backend *out,
                                              char *reason, size_t cap, vdev_error_fn set_error)
{
    char e[160];
    memset(out, 0, sizeof *out);
    if (api_version != VDEV_BACKEND_API_VERSION) {
        snprintf(reason, cap, "CUDA plugin: built for backend API %d, vdev speaks %d",
                 VDEV_BACKEND_API_VERSION, api_version);
        return VDEV_ERR_BACKEND;
    }
    /* The core's error setter, handed over by the core. */
    core_error = set_error;

    enum vdev_status st = load_driver(reason, cap);
    if (st != VDEV_OK)
        return st;
    int n = 0;
    CUresult r = vdev_cu.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS) {
        snprintf(reason, cap, "CUDA plugin: cuDeviceGetCount failed: %s",
                 vdev_cu_errstr(r, e, sizeof e));
        return VDEV_ERR_BACKEND;
    }
    if (n <= 0) {
        snprintf(reason, cap, "CUDA plugin: no CUDA device found");
        return VDEV_ERR_UNSUPPORTED;
    }
    if (n > VDEV_CU_MAX_GPUS) {
        static int warned; /* once a process, not at every open */
        if (!warned)
            fprintf(stderr,
                    "vdev: warning: CUDA plugin: %d GPUs found; this build drives the first %d "
                    "(VDEV_CU_MAX_GPUS), the others are left out\n",
                    n, VDEV_CU_MAX_GPUS);
        warned = 1;
        n = VDEV_CU_MAX_GPUS;
    }
    struct cu_ctx *c = calloc(1, sizeof *c);
    if (c) {
        c->devs = calloc((size_t)n, sizeof *c->devs);
        c->peer = calloc((size_t)n * (size_t)n, 1);
        c->own_taken = calloc((size_t)n, 1);
    }
    if (!c || !c->devs || !c->peer || !c->own_taken) {
        if (c) {
            free(c->devs);
            free(c->peer);
            free(c->own_taken);
        }
        free(c);
        snprintf(reason, cap, "CUDA plugin: out of host memory");
        return VDEV_ERR_OOM;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->coll_lock, NULL);
    /* Save the caller's current context: opening must not change it. */
    CUcontext prev = NULL;
    vdev_cu.cuCtxGetCurrent(&prev);
    int all_vmm = 1;
    for (int i = 0; i < n; i++) {
        c->n = i + 1;
        int bad = dev_setup(&c->devs[i], i, &c->qs[i], reason, cap);
        if (bad) {
            cu_destroy(c);
            vdev_cu.cuCtxSetCurrent(prev);
            return bad == -2 ? VDEV_ERR_UNSUPPORTED : VDEV_ERR_BACKEND;
        }
        all_vmm &= c->devs[i].vmm != 0;
    }
    /* Who may read whose memory: VMM regions grant access to peers at map
     * time; cuMemAlloc regions need peer access enabled once. */
    for (int i = 0; i < n; i++) {
        struct cu_dev *d = &c->devs[i];
        d->access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        d->access[0].location.id = (int)d->dev;
        d->access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        d->n_access = 1;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int can = 0;
            if (i == j ||
                vdev_cu.cuDeviceCanAccessPeer(&can, c->devs[i].dev, c->devs[j].dev) !=
                    CUDA_SUCCESS ||
                !can)
                continue;
            if (!all_vmm) {
                vdev_cu_use_ctx(&c->devs[i]);
                CUresult pr = vdev_cu.cuCtxEnablePeerAccess(c->devs[j].ctx, 0);
                if (pr != CUDA_SUCCESS && pr != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
                    continue;
            }
            c->peer[i * n + j] = 1;
            /* GPU j's regions are readable by GPU i */
            struct cu_dev *owner = &c->devs[j];
            CUmemAccessDesc *a = &owner->access[owner->n_access++];
            a->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            a->location.id = (int)c->devs[i].dev;
            a->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        }
    vdev_cu.cuCtxSetCurrent(prev);
    /* Before any NCCL call (NCCL loads on the first collective use). */
    vdev_cu_nccl_env_init();
    out->ops = all_vmm ? &cu_ops_vmm : &cu_ops_plain;
    out->ctx = c;
    return VDEV_OK;
}
