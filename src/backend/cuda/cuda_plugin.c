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
 * driver is refused at every open with both versions in the reason.
 *
 * Devices. Each GPU's primary context (the one the CUDA runtime and cuBLAS
 * use too) is retained (once more for the life of the process, see
 * kept_ctx) and made current on the calling thread before any call that
 * needs it. Several logical devices may share one GPU (and so one stream and
 * one index `dev` here).
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

static void dev_teardown(struct cu_dev *d)
{
    if (d->ctx && vdev_cu_use_ctx(d) == CUDA_SUCCESS) {
        if (d->stream)
            vdev_cu.cuStreamSynchronize(d->stream);
        vdev_cuda_blas_destroy(d->cublas);
        while (d->regions) { /* normally none: the allocators released theirs */
            struct cu_region *r = d->regions;
            d->regions = r->next;
            vdev_cu_region_free(d, r);
            free(r);
        }
        vdev_cu_events_destroy(d);
        for (int i = 0; i < 2; i++) {
            if (d->stage[i])
                vdev_cu.cuMemFreeHost(d->stage[i]);
            if (d->stage_ev[i])
                vdev_cu.cuEventDestroy(d->stage_ev[i]);
        }
        if (d->scratch)
            vdev_cu.cuMemFree(d->scratch);
        if (d->stream)
            vdev_cu.cuStreamDestroy(d->stream);
    }
    if (d->ctx)
        vdev_cu.cuDevicePrimaryCtxRelease(d->dev);
    d->ctx = NULL;
    pthread_mutex_destroy(&d->mem_lock);
    pthread_mutex_destroy(&d->copy_lock);
    pthread_mutex_destroy(&d->launch_lock);
    pthread_mutex_destroy(&d->ev_lock);
}

static void cu_destroy(void *vctx)
{
    struct cu_ctx *c = vctx;
    for (int i = 0; i < c->n; i++)
        dev_teardown(&c->devs[i]);
    free(c->devs);
    free(c->peer);
    free(c);
}

#define OPS_COMMON                                                                                 \
    .api_version = VDEV_BACKEND_API_VERSION, .name = "cuda", .is_gpu = 1, .host_addressable = 0,   \
    .n_devices = cu_n_devices, .device_info = cu_device_info, .mem_info = cu_mem_info,             \
    .reserve = vdev_cu_reserve, .release = vdev_cu_release, .copy_h2d = vdev_cu_copy_h2d,          \
    .copy_d2h = vdev_cu_copy_d2h, .copy_d2d = vdev_cu_copy_d2d, .fill = vdev_cu_fill,              \
    .submit_host = vdev_cu_submit_host, .synchronize = vdev_cu_synchronize,                        \
    .event_record = vdev_cu_event_record, .event_done = vdev_cu_event_done,                        \
    .event_wait = vdev_cu_event_wait, .stream_wait_event = vdev_cu_stream_wait_event,              \
    .event_drop = vdev_cu_event_drop, .run_kernel = vdev_cu_run_kernel, .destroy = cu_destroy

/* Every GPU has VMM: regions grow in place. */
static const struct vdev_backend_ops cu_ops_vmm = {OPS_COMMON, .extend = vdev_cu_extend};
/* Some GPU lacks it: cuMemAlloc regions, growth by adding regions. */
static const struct vdev_backend_ops cu_ops_plain = {OPS_COMMON, .extend = NULL};

/* Sets up GPU i: context, properties, stream, scratch. */
static int dev_setup(struct cu_dev *d, int i, char *reason, size_t cap)
{
    char e[160];
    const char *what;
    CUresult r;
    d->index = i;
    pthread_mutex_init(&d->mem_lock, NULL);
    pthread_mutex_init(&d->copy_lock, NULL);
    pthread_mutex_init(&d->launch_lock, NULL);
    pthread_mutex_init(&d->ev_lock, NULL);
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
    TRY(cuStreamCreate, &d->stream, CU_STREAM_NON_BLOCKING);
    TRY(cuMemAlloc, &d->scratch, VDEV_CUDA_SCRATCH_BYTES);
#undef TRY
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
            snprintf(reason, cap, "CUDA plugin: libcuda.so.1 not found");
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
    if (n > VDEV_CU_MAX_GPUS)
        n = VDEV_CU_MAX_GPUS;
    struct cu_ctx *c = calloc(1, sizeof *c);
    if (c)
        c->devs = calloc((size_t)n, sizeof *c->devs);
    if (c)
        c->peer = calloc((size_t)n * (size_t)n, 1);
    if (!c || !c->devs || !c->peer) {
        if (c) {
            free(c->devs);
            free(c->peer);
        }
        free(c);
        snprintf(reason, cap, "CUDA plugin: out of host memory");
        return VDEV_ERR_OOM;
    }
    /* Save the caller's current context: opening must not change it. */
    CUcontext prev = NULL;
    vdev_cu.cuCtxGetCurrent(&prev);
    int all_vmm = 1;
    for (int i = 0; i < n; i++) {
        c->n = i + 1;
        if (dev_setup(&c->devs[i], i, reason, cap) != 0) {
            cu_destroy(c);
            vdev_cu.cuCtxSetCurrent(prev);
            return VDEV_ERR_BACKEND;
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
    out->ops = all_vmm ? &cu_ops_vmm : &cu_ops_plain;
    out->ctx = c;
    return VDEV_OK;
}
