/* cuda_plugin.c — the "cuda" backend: NVIDIA GPUs through the CUDA driver
 * API, built as the separate shared library libvdev-cuda.so that the core
 * loads with dlopen (src/backend/backend.c), so the core never links CUDA.
 *
 * Loading. The library exports one symbol, vdev_cuda_plugin_open. It does not
 * link libcuda: it dlopens libcuda.so.1 itself and resolves every cu*
 * function it uses by name, so that on a machine without an NVIDIA driver the
 * plugin still loads and can say why there is no GPU in one line:
 *   "CUDA plugin: libcuda.so.1 not found"
 *   "CUDA plugin: cuInit failed: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
 *   "CUDA plugin: the driver supports CUDA 12.4, the plugin needs CUDA 13.0 or newer"
 *   "CUDA plugin: no CUDA device found"
 * The names come from the toolkit's cuda.h, whose macros map each function to
 * its current ABI version (cuMemAlloc -> cuMemAlloc_v2), so the dlsym names
 * always match the prototypes compiled against. The CUDA runtime (kernel
 * launches, cuBLAS) is linked statically (cudart_static), and libcublas.so
 * needs neither libcudart.so nor libcuda.so, so nothing here makes the
 * loader fail for want of a driver.
 *
 * Devices. Each GPU's primary context (the one the CUDA runtime and cuBLAS
 * use too) is retained (once more for the life of the process, see
 * kept_ctx) and made current on the calling thread before any call that
 * needs it. Each GPU has one stream (CU_STREAM_NON_BLOCKING): every
 * kernel, copy and host function for the device goes there, in order, so it
 * is the device's queue in the sense of backend.h. Several logical devices
 * may share one GPU (and so one stream and one index `dev` here).
 *
 * Memory. Regions come from the driver's virtual memory management (VMM):
 * reserve() reserves a virtual address range as large as the card
 * (cuMemAddressReserve; the backend does not learn the logical device's
 * limit, and the card's size bounds every limit, and address space costs
 * nothing) and maps physical memory for the requested bytes into its start
 * (cuMemCreate + cuMemMap + cuMemSetAccess, rounded up to the allocation
 * granularity). extend() maps more physical chunks right after the mapped
 * part, so a growing logical device stays one contiguous range, exactly what
 * the allocator's in-place growth wants; a preallocated device is the same
 * with one chunk. release() unmaps and releases every chunk and frees the
 * address range. A GPU without VMM support falls back to cuMemAlloc and a
 * table without extend (the allocator then grows by adding regions).
 *
 * Copies. Host<->device copies go through two pinned staging buffers per GPU
 * (cuMemHostAlloc) in chunks, double-buffered so the memcpy of one chunk
 * overlaps the DMA of the other, and return when complete (backend.h). A
 * device->device copy between two GPUs runs on the destination's stream
 * after an event recorded on the source's stream, peer to peer where the
 * driver allows it, else through the host.
 *
 * Kernels. run_kernel hands the op to cuda_kernels.cu (nvcc), which launches
 * it on the device's stream; matmul goes to cuBLAS with one handle per GPU,
 * created on first use. A per-GPU lock is held while an op is launched: the
 * cuBLAS handle and the scratch buffer of multi-pass reductions are shared by
 * every thread that submits to the GPU, and the passes of one reduction must
 * be adjacent on the stream.
 *
 * Errors. The plugin cannot link the core (it is loaded into programs that
 * link the core statically and export nothing), so the core hands its error
 * setter, vdev_error(), to vdev_cuda_plugin_open; every failure's message
 * then reaches vdev_last_error(). */
#define _GNU_SOURCE
#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "ops/op_ids.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

#define STAGE_BYTES (8u << 20)  /* each of the two pinned staging buffers per GPU */
#define BOUNCE_BYTES (64u << 20) /* host buffer of a d2d copy between GPUs without peer access */
#define CUDA_MAJOR_NEEDED (CUDA_VERSION / 1000)

/* struct vdev_cuda_args must be struct vdev_kernel_args field for field. */
#define SAME_FIELD(f)                                                                              \
    _Static_assert(offsetof(struct vdev_cuda_args, f) == offsetof(struct vdev_kernel_args, f) &&   \
                       sizeof(((struct vdev_cuda_args *)0)->f) ==                                  \
                           sizeof(((struct vdev_kernel_args *)0)->f),                              \
                   "struct vdev_cuda_args differs from struct vdev_kernel_args in " #f)
SAME_FIELD(op);
SAME_FIELD(n_in);
SAME_FIELD(n_out);
SAME_FIELD(in);
SAME_FIELD(out);
SAME_FIELD(in_ndim);
SAME_FIELD(in_shape);
SAME_FIELD(in_dtype);
SAME_FIELD(out_ndim);
SAME_FIELD(out_shape);
SAME_FIELD(out_dtype);
SAME_FIELD(f);
SAME_FIELD(i);
_Static_assert(sizeof(struct vdev_cuda_args) == sizeof(struct vdev_kernel_args),
               "struct vdev_cuda_args differs in size from struct vdev_kernel_args");

/* ---- the driver API, resolved from libcuda.so.1 ---- */

#define STR_(x) #x
#define XSTR(x) STR_(x) /* expands cuda.h's versioning macros first */

/* Resolved first: enough to explain a failure. */
#define CU_BASIC_FNS(X)                                                                            \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)

#define CU_FNS(X)                                                                                  \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceTotalMem)                                                                            \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDeviceCanAccessPeer)                                                                       \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxEnablePeerAccess)                                                                       \
    X(cuMemGetInfo)                                                                                \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)                                                                            \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemSetAccess)                                                                              \
    X(cuMemGetAllocationGranularity)                                                               \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuMemcpyDtoDAsync)                                                                           \
    X(cuMemcpyPeerAsync)                                                                           \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamWaitEvent)                                                                           \
    X(cuEventCreate)                                                                               \
    X(cuEventRecord)                                                                               \
    X(cuEventQuery)                                                                                \
    X(cuEventSynchronize)                                                                          \
    X(cuEventDestroy)                                                                              \
    X(cuLaunchHostFunc)

static struct {
#define X(name) __typeof__(&name) name;
    CU_BASIC_FNS(X)
    CU_FNS(X)
#undef X
} cu;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static void *libcuda;     /* kept open for the life of the process */
static int cu_resolved;   /* every function in CU_FNS found */

/* One retain of each GPU's primary context held for the life of the process
 * (under load_lock). The CUDA runtime, which launches the kernels and runs
 * cuBLAS, keeps module and library state in the primary context; if the
 * backend's own retain were the last one, destroying the backend (vdev_shutdown
 * does) would destroy the context under the runtime's feet, and kernels
 * launched after the next start-up would fail. */
#define MAX_GPUS 64
static CUcontext kept_ctx[MAX_GPUS];

/* "CUDA_ERROR_X: what it means", from the driver itself. */
static const char *cu_errstr(CUresult r, char *buf, size_t cap)
{
    const char *name = NULL, *text = NULL;
    if (cu.cuGetErrorName)
        cu.cuGetErrorName(r, &name);
    if (cu.cuGetErrorString)
        cu.cuGetErrorString(r, &text);
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

/* ---- errors towards the core (see the header comment) ---- */

typedef enum vdev_status (*core_error_fn)(enum vdev_status code, const char *fmt, ...);
static core_error_fn core_error;

/* Sets the caller's vdev error when the core's vdev_error can be reached;
 * else prints failures other than OOM (the allocator words those itself). */
static enum vdev_status fail(enum vdev_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static enum vdev_status fail(enum vdev_status code, const char *fmt, ...)
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

static enum vdev_status fail_cu(CUresult r, int dev, const char *what)
{
    char e[160];
    enum vdev_status code = r == CUDA_ERROR_OUT_OF_MEMORY ? VDEV_ERR_OOM : VDEV_ERR_BACKEND;
    return fail(code, "CUDA GPU %d: %s failed: %s", dev, what, cu_errstr(r, e, sizeof e));
}

/* ---- the backend's state ---- */

struct cu_chunk {
    CUmemGenericAllocationHandle h;
    size_t bytes;
};

/* A region handed to the allocator: an address range with physical chunks
 * mapped from its start (VMM), or one cuMemAlloc block. */
struct cu_region {
    CUdeviceptr base;
    size_t va_bytes;    /* address space reserved (VMM) */
    size_t mapped;      /* bytes backed by physical memory from base */
    int vmm;
    struct cu_chunk *chunks;
    int n_chunks, cap_chunks;
    struct cu_region *next;
};

struct cu_event {
    CUevent ev;
    struct cu_dev *d;
    struct cu_event *next; /* in the device's free list */
};

struct cu_dev {
    int index;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    char name[96];
    uint64_t total;
    int cc_major, cc_minor, n_sm, vmm;
    size_t gran;                    /* physical allocation granularity (VMM) */
    CUmemAccessDesc access[MAX_GPUS]; /* this GPU and its peers: who may read regions */
    int n_access;

    pthread_mutex_t mem_lock;       /* regions */
    struct cu_region *regions;

    pthread_mutex_t copy_lock;      /* staging buffers */
    void *stage[2];
    CUevent stage_ev[2];

    pthread_mutex_t launch_lock;    /* cuBLAS handle, scratch, multi-kernel ops */
    void *cublas;
    CUdeviceptr scratch;

    pthread_mutex_t ev_lock;        /* event free list */
    struct cu_event *ev_free;
};

struct cu_ctx {
    int n;
    struct cu_dev *devs;
    unsigned char *peer; /* peer[i * n + j]: GPU i can read GPU j's memory */
};

static struct cu_dev *dev_of(void *vctx, int dev)
{
    struct cu_ctx *c = vctx;
    return &c->devs[dev];
}

/* Makes the GPU's primary context current on this thread (cheap when it is). */
static CUresult use_ctx(const struct cu_dev *d)
{
    CUcontext cur = NULL;
    if (cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == d->ctx)
        return CUDA_SUCCESS;
    return cu.cuCtxSetCurrent(d->ctx);
}

static size_t round_up(size_t x, size_t g) { return (x + g - 1) / g * g; }

static char *fmt_bytes(uint64_t b, char *buf, size_t cap)
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
    struct cu_dev *d = dev_of(vctx, dev);
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", d->name);
    out->total_bytes = d->total;
    out->cc_major = d->cc_major;
    out->cc_minor = d->cc_minor;
    return VDEV_OK;
}

static enum vdev_status cu_mem_info(void *vctx, int dev, uint64_t *free_bytes, uint64_t *total)
{
    struct cu_dev *d = dev_of(vctx, dev);
    size_t f = 0, t = 0;
    CUresult r = use_ctx(d);
    if (r == CUDA_SUCCESS)
        r = cu.cuMemGetInfo(&f, &t);
    if (r != CUDA_SUCCESS)
        return fail_cu(r, dev, "cuMemGetInfo");
    *free_bytes = f;
    *total = t;
    return VDEV_OK;
}

/* ---- memory regions ---- */

/* Maps physical memory into r from r->mapped up to `upto` (a multiple of the
 * granularity). On failure nothing changes. Called with mem_lock held. */
static enum vdev_status map_more(struct cu_dev *d, struct cu_region *r, size_t upto)
{
    size_t bytes = upto - r->mapped;
    char e[160], b1[32];
    if (r->n_chunks == r->cap_chunks) {
        int cap = r->cap_chunks ? 2 * r->cap_chunks : 8;
        struct cu_chunk *nc = realloc(r->chunks, (size_t)cap * sizeof *nc);
        if (!nc)
            return fail(VDEV_ERR_OOM, "CUDA GPU %d: out of host memory", d->index);
        r->chunks = nc;
        r->cap_chunks = cap;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)d->dev;
    CUmemGenericAllocationHandle h;
    CUresult res = cu.cuMemCreate(&h, bytes, &prop, 0);
    if (res != CUDA_SUCCESS) {
        enum vdev_status code = res == CUDA_ERROR_OUT_OF_MEMORY ? VDEV_ERR_OOM : VDEV_ERR_BACKEND;
        return fail(code, "CUDA GPU %d (%s): cannot allocate %s of device memory: cuMemCreate: %s",
                    d->index, d->name, fmt_bytes(bytes, b1, sizeof b1), cu_errstr(res, e, sizeof e));
    }
    CUdeviceptr at = r->base + r->mapped;
    res = cu.cuMemMap(at, bytes, 0, h, 0);
    if (res != CUDA_SUCCESS) {
        cu.cuMemRelease(h);
        return fail_cu(res, d->index, "cuMemMap");
    }
    res = cu.cuMemSetAccess(at, bytes, d->access, (size_t)d->n_access);
    if (res != CUDA_SUCCESS) {
        cu.cuMemUnmap(at, bytes);
        cu.cuMemRelease(h);
        return fail_cu(res, d->index, "cuMemSetAccess");
    }
    r->chunks[r->n_chunks].h = h;
    r->chunks[r->n_chunks].bytes = bytes;
    r->n_chunks++;
    r->mapped = upto;
    return VDEV_OK;
}

/* Unmaps and frees everything r holds (not r itself). */
static void region_free(struct cu_dev *d, struct cu_region *r)
{
    if (!r->vmm) {
        cu.cuMemFree(r->base);
    } else {
        size_t off = 0;
        for (int i = 0; i < r->n_chunks; i++) {
            cu.cuMemUnmap(r->base + off, r->chunks[i].bytes);
            cu.cuMemRelease(r->chunks[i].h);
            off += r->chunks[i].bytes;
        }
        cu.cuMemAddressFree(r->base, r->va_bytes);
    }
    free(r->chunks);
}

static enum vdev_status cu_reserve(void *vctx, int dev, uint64_t bytes, void **base)
{
    struct cu_dev *d = dev_of(vctx, dev);
    CUresult res = use_ctx(d);
    if (res != CUDA_SUCCESS)
        return fail_cu(res, dev, "cuCtxSetCurrent");
    struct cu_region *r = calloc(1, sizeof *r);
    if (!r)
        return fail(VDEV_ERR_OOM, "CUDA GPU %d: out of host memory", dev);
    char e[160], b1[32];
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&d->mem_lock);
    if (!d->vmm) {
        res = cu.cuMemAlloc(&r->base, bytes);
        if (res != CUDA_SUCCESS)
            st = fail(res == CUDA_ERROR_OUT_OF_MEMORY ? VDEV_ERR_OOM : VDEV_ERR_BACKEND,
                      "CUDA GPU %d (%s): cannot allocate %s: cuMemAlloc: %s", dev, d->name,
                      fmt_bytes(bytes, b1, sizeof b1), cu_errstr(res, e, sizeof e));
        r->mapped = bytes;
    } else {
        size_t want = round_up(bytes, d->gran);
        r->vmm = 1;
        r->va_bytes = round_up(bytes > d->total ? bytes : d->total, d->gran);
        res = cu.cuMemAddressReserve(&r->base, r->va_bytes, d->gran, 0, 0);
        if (res != CUDA_SUCCESS) {
            st = fail(VDEV_ERR_BACKEND, "CUDA GPU %d: cannot reserve %s of address space: %s",
                      dev, fmt_bytes(r->va_bytes, b1, sizeof b1), cu_errstr(res, e, sizeof e));
        } else if ((st = map_more(d, r, want)) != VDEV_OK) {
            cu.cuMemAddressFree(r->base, r->va_bytes);
        }
    }
    if (st == VDEV_OK) {
        r->next = d->regions;
        d->regions = r;
        *base = (void *)(uintptr_t)r->base;
    } else {
        free(r->chunks);
        free(r);
    }
    pthread_mutex_unlock(&d->mem_lock);
    return st;
}

static struct cu_region *find_region(struct cu_dev *d, CUdeviceptr base, struct cu_region ***link)
{
    struct cu_region **p = &d->regions;
    for (; *p; p = &(*p)->next)
        if ((*p)->base == base) {
            if (link)
                *link = p;
            return *p;
        }
    return NULL;
}

static enum vdev_status cu_extend(void *vctx, int dev, void *base, uint64_t old_bytes,
                                  uint64_t new_bytes)
{
    struct cu_dev *d = dev_of(vctx, dev);
    CUresult res = use_ctx(d);
    if (res != CUDA_SUCCESS)
        return fail_cu(res, dev, "cuCtxSetCurrent");
    char b1[32], b2[32];
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&d->mem_lock);
    struct cu_region *r = find_region(d, (CUdeviceptr)(uintptr_t)base, NULL);
    if (!r || !r->vmm)
        st = fail(VDEV_ERR_INTERNAL, "CUDA GPU %d: extend of %p, which is not a growable region",
                  dev, base);
    else if (new_bytes > r->va_bytes)
        st = fail(VDEV_ERR_OOM, "CUDA GPU %d: cannot grow a region to %s: its address range "
                  "holds %s", dev, fmt_bytes(new_bytes, b1, sizeof b1),
                  fmt_bytes(r->va_bytes, b2, sizeof b2));
    else if (new_bytes > r->mapped)
        st = map_more(d, r, round_up(new_bytes, d->gran));
    pthread_mutex_unlock(&d->mem_lock);
    (void)old_bytes;
    return st;
}

static void cu_release(void *vctx, int dev, void *base, uint64_t bytes)
{
    struct cu_dev *d = dev_of(vctx, dev);
    if (use_ctx(d) != CUDA_SUCCESS)
        return;
    /* Work still queued may use the region: let it finish first. */
    cu.cuStreamSynchronize(d->stream);
    pthread_mutex_lock(&d->mem_lock);
    struct cu_region **link = NULL;
    struct cu_region *r = find_region(d, (CUdeviceptr)(uintptr_t)base, &link);
    if (r) {
        *link = r->next;
        region_free(d, r);
        free(r);
    }
    pthread_mutex_unlock(&d->mem_lock);
    if (!r)
        fail(VDEV_ERR_INTERNAL, "CUDA GPU %d: release of %p (%llu bytes), not a region", dev,
             base, (unsigned long long)bytes);
}

/* ---- copies ---- */

static CUresult stage_init(struct cu_dev *d)
{
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < 2 && r == CUDA_SUCCESS; i++) {
        if (!d->stage[i])
            r = cu.cuMemHostAlloc(&d->stage[i], STAGE_BYTES, CU_MEMHOSTALLOC_PORTABLE);
        if (r == CUDA_SUCCESS && !d->stage_ev[i])
            r = cu.cuEventCreate(&d->stage_ev[i], CU_EVENT_DISABLE_TIMING);
    }
    return r;
}

/* Host -> device through the staging buffers; complete on return. */
static enum vdev_status cu_copy_h2d(void *vctx, int dev, void *dst, const void *src,
                                    uint64_t bytes)
{
    struct cu_dev *d = dev_of(vctx, dev);
    if (!bytes)
        return VDEV_OK;
    CUresult r = use_ctx(d);
    if (r != CUDA_SUCCESS)
        return fail_cu(r, dev, "cuCtxSetCurrent");
    pthread_mutex_lock(&d->copy_lock);
    const char *what = "cuMemHostAlloc (staging buffer)";
    r = stage_init(d);
    int used[2] = {0, 0}, k = 0;
    for (uint64_t off = 0; r == CUDA_SUCCESS && off < bytes; k++) {
        int b = k & 1;
        size_t n = bytes - off < STAGE_BYTES ? (size_t)(bytes - off) : STAGE_BYTES;
        if (used[b] && (r = cu.cuEventSynchronize(d->stage_ev[b])) != CUDA_SUCCESS) {
            what = "cuEventSynchronize";
            break;
        }
        memcpy(d->stage[b], (const char *)src + off, n);
        what = "cuMemcpyHtoDAsync";
        r = cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst + off, d->stage[b], n, d->stream);
        if (r == CUDA_SUCCESS) {
            what = "cuEventRecord";
            r = cu.cuEventRecord(d->stage_ev[b], d->stream);
        }
        used[b] = 1;
        off += n;
    }
    /* The stream is in order: the last chunk done means all are. On failure
     * drain the stream so no copy still reads a staging buffer. */
    if (r == CUDA_SUCCESS) {
        what = "cuEventSynchronize";
        r = cu.cuEventSynchronize(d->stage_ev[(k - 1) & 1]);
    } else {
        cu.cuStreamSynchronize(d->stream);
    }
    pthread_mutex_unlock(&d->copy_lock);
    return r == CUDA_SUCCESS ? VDEV_OK : fail_cu(r, dev, what);
}

/* Device -> host through the staging buffers: chunk k+1 is in flight while
 * chunk k is copied out. Ordered after the work queued before it. */
static enum vdev_status cu_copy_d2h(void *vctx, int dev, void *dst, const void *src,
                                    uint64_t bytes)
{
    struct cu_dev *d = dev_of(vctx, dev);
    if (!bytes)
        return VDEV_OK;
    CUresult r = use_ctx(d);
    if (r != CUDA_SUCCESS)
        return fail_cu(r, dev, "cuCtxSetCurrent");
    pthread_mutex_lock(&d->copy_lock);
    const char *what = "cuMemHostAlloc (staging buffer)";
    r = stage_init(d);
    uint64_t n_chunks = (bytes + STAGE_BYTES - 1) / STAGE_BYTES;
    for (uint64_t k = 0; r == CUDA_SUCCESS && k <= n_chunks; k++) {
        /* issue chunk k (its buffer was emptied at step k-1), drain chunk k-1 */
        if (k < n_chunks) {
            uint64_t off = k * STAGE_BYTES;
            size_t n = bytes - off < STAGE_BYTES ? (size_t)(bytes - off) : STAGE_BYTES;
            int b = (int)(k & 1);
            what = "cuMemcpyDtoHAsync";
            r = cu.cuMemcpyDtoHAsync(d->stage[b], (CUdeviceptr)(uintptr_t)src + off, n,
                                     d->stream);
            if (r == CUDA_SUCCESS) {
                what = "cuEventRecord";
                r = cu.cuEventRecord(d->stage_ev[b], d->stream);
            }
        }
        if (r == CUDA_SUCCESS && k > 0) {
            uint64_t off = (k - 1) * STAGE_BYTES;
            size_t n = bytes - off < STAGE_BYTES ? (size_t)(bytes - off) : STAGE_BYTES;
            int b = (int)((k - 1) & 1);
            what = "cuEventSynchronize";
            r = cu.cuEventSynchronize(d->stage_ev[b]);
            if (r == CUDA_SUCCESS)
                memcpy((char *)dst + off, d->stage[b], n);
        }
    }
    if (r != CUDA_SUCCESS)
        cu.cuStreamSynchronize(d->stream);
    pthread_mutex_unlock(&d->copy_lock);
    return r == CUDA_SUCCESS ? VDEV_OK : fail_cu(r, dev, what);
}

static enum vdev_status event_record_dev(struct cu_dev *d, struct cu_event **out);
static void event_put(struct cu_event *e);

/* Device -> device: on the destination's stream, after the work queued on
 * the source's stream so far. Returns at once, except through the host. */
static enum vdev_status cu_copy_d2d(void *vctx, int dst_dev, void *dst, int src_dev,
                                    const void *src, uint64_t bytes)
{
    struct cu_ctx *c = vctx;
    struct cu_dev *dd = dev_of(vctx, dst_dev), *sd = dev_of(vctx, src_dev);
    CUdeviceptr dp = (CUdeviceptr)(uintptr_t)dst, sp = (CUdeviceptr)(uintptr_t)src;
    if (!bytes)
        return VDEV_OK;
    CUresult r;
    if (dd == sd) {
        if ((r = use_ctx(dd)) == CUDA_SUCCESS)
            r = cu.cuMemcpyDtoDAsync(dp, sp, bytes, dd->stream);
        return r == CUDA_SUCCESS ? VDEV_OK : fail_cu(r, dst_dev, "cuMemcpyDtoDAsync");
    }
    if (c->peer[dst_dev * c->n + src_dev]) {
        struct cu_event *e = NULL;
        enum vdev_status st = event_record_dev(sd, &e);
        if (st != VDEV_OK)
            return st;
        if ((r = use_ctx(dd)) == CUDA_SUCCESS &&
            (r = cu.cuStreamWaitEvent(dd->stream, e->ev, 0)) == CUDA_SUCCESS)
            r = cu.cuMemcpyPeerAsync(dp, dd->ctx, sp, sd->ctx, bytes, dd->stream);
        /* The wait took the event's state when it was queued: reuse is safe. */
        event_put(e);
        return r == CUDA_SUCCESS ? VDEV_OK : fail_cu(r, dst_dev, "cuMemcpyPeerAsync");
    }
    /* No peer access: through host memory, one bounce buffer at a time. */
    size_t cap = bytes < BOUNCE_BYTES ? (size_t)bytes : BOUNCE_BYTES;
    char *tmp = malloc(cap);
    if (!tmp)
        return fail(VDEV_ERR_OOM, "out of host memory copying between GPUs %d and %d", src_dev,
                    dst_dev);
    enum vdev_status st = VDEV_OK;
    for (uint64_t off = 0; st == VDEV_OK && off < bytes; off += cap) {
        size_t n = bytes - off < cap ? (size_t)(bytes - off) : cap;
        st = cu_copy_d2h(vctx, src_dev, tmp, (const char *)src + off, n);
        if (st == VDEV_OK)
            st = cu_copy_h2d(vctx, dst_dev, (char *)dst + off, tmp, n);
    }
    free(tmp);
    return st;
}

/* ---- streams ---- */

struct host_item {
    vdev_host_fn fn;
    size_t bytes;
    _Alignas(16) unsigned char arg[VDEV_HOST_ARG_MAX];
};

static void CUDA_CB host_trampoline(void *p)
{
    struct host_item *it = p;
    it->fn(it->arg);
    free(it);
}

static enum vdev_status cu_submit_host(void *vctx, int dev, vdev_host_fn fn, const void *arg,
                                       size_t arg_bytes)
{
    struct cu_dev *d = dev_of(vctx, dev);
    if (arg_bytes > VDEV_HOST_ARG_MAX)
        return fail(VDEV_ERR_INTERNAL, "CUDA GPU %d: host function argument of %zu bytes "
                    "exceeds %d", dev, arg_bytes, VDEV_HOST_ARG_MAX);
    struct host_item *it = malloc(sizeof *it);
    if (!it)
        return fail(VDEV_ERR_OOM, "out of host memory submitting host work to GPU %d", dev);
    it->fn = fn;
    it->bytes = arg_bytes;
    if (arg_bytes)
        memcpy(it->arg, arg, arg_bytes);
    CUresult r = use_ctx(d);
    if (r == CUDA_SUCCESS)
        r = cu.cuLaunchHostFunc(d->stream, host_trampoline, it);
    if (r != CUDA_SUCCESS) {
        free(it);
        return fail_cu(r, dev, "cuLaunchHostFunc");
    }
    return VDEV_OK;
}

static enum vdev_status cu_synchronize(void *vctx, int dev)
{
    struct cu_dev *d = dev_of(vctx, dev);
    CUresult r = use_ctx(d);
    if (r == CUDA_SUCCESS)
        r = cu.cuStreamSynchronize(d->stream);
    return r == CUDA_SUCCESS ? VDEV_OK : fail_cu(r, dev, "cuStreamSynchronize");
}

/* ---- events: pooled per GPU, since creating one costs a driver call ---- */

static enum vdev_status event_record_dev(struct cu_dev *d, struct cu_event **out)
{
    CUresult r = use_ctx(d);
    if (r != CUDA_SUCCESS)
        return fail_cu(r, d->index, "cuCtxSetCurrent");
    pthread_mutex_lock(&d->ev_lock);
    struct cu_event *e = d->ev_free;
    if (e)
        d->ev_free = e->next;
    pthread_mutex_unlock(&d->ev_lock);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e)
            return fail(VDEV_ERR_OOM, "out of host memory recording an event");
        e->d = d;
        if ((r = cu.cuEventCreate(&e->ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
            free(e);
            return fail_cu(r, d->index, "cuEventCreate");
        }
    }
    if ((r = cu.cuEventRecord(e->ev, d->stream)) != CUDA_SUCCESS) {
        event_put(e);
        return fail_cu(r, d->index, "cuEventRecord");
    }
    *out = e;
    return VDEV_OK;
}

static void event_put(struct cu_event *e)
{
    struct cu_dev *d = e->d;
    pthread_mutex_lock(&d->ev_lock);
    e->next = d->ev_free;
    d->ev_free = e;
    pthread_mutex_unlock(&d->ev_lock);
}

static enum vdev_status cu_event_record(void *vctx, int dev, void **event)
{
    struct cu_event *e = NULL;
    enum vdev_status st = event_record_dev(dev_of(vctx, dev), &e);
    if (st == VDEV_OK)
        *event = e;
    return st;
}

static int cu_event_done(void *vctx, void *event)
{
    struct cu_event *e = event;
    if (use_ctx(e->d) != CUDA_SUCCESS)
        return 1;
    CUresult r = cu.cuEventQuery(e->ev);
    /* An error is taken as "passed": waiting forever would not help. */
    return r != CUDA_ERROR_NOT_READY;
}

static void cu_event_wait(void *vctx, void *event)
{
    struct cu_event *e = event;
    if (use_ctx(e->d) == CUDA_SUCCESS)
        cu.cuEventSynchronize(e->ev);
}

static enum vdev_status cu_stream_wait_event(void *vctx, int dev, void *event)
{
    struct cu_event *e = event;
    struct cu_dev *d = dev_of(vctx, dev);
    if (e->d == d)
        return VDEV_OK; /* one stream: already in order */
    CUresult r = use_ctx(d);
    if (r == CUDA_SUCCESS)
        r = cu.cuStreamWaitEvent(d->stream, e->ev, 0);
    return r == CUDA_SUCCESS ? VDEV_OK : fail_cu(r, dev, "cuStreamWaitEvent");
}

static void cu_event_drop(void *vctx, void *event) { event_put(event); }

/* ---- kernels ---- */

static enum vdev_status cu_run_kernel(void *vctx, int dev, const struct vdev_kernel_args *args)
{
    struct cu_dev *d = dev_of(vctx, dev);
    struct vdev_cuda_args a;
    memcpy(&a, args, sizeof a); /* same layout: checked above */
    CUresult r = use_ctx(d);
    if (r != CUDA_SUCCESS)
        return fail_cu(r, dev, "cuCtxSetCurrent");
    char msg[384] = "";
    int rc = VDEV_CUDA_RC_OK;
    pthread_mutex_lock(&d->launch_lock);
    if (a.op == VDEV_OP_MATMUL && !d->cublas &&
        vdev_cuda_blas_create(&d->cublas, msg, sizeof msg) != 0)
        rc = VDEV_CUDA_RC_FAILED;
    if (rc == VDEV_CUDA_RC_OK) {
        struct vdev_cuda_launch_env env = {(void *)d->stream, d->cublas,
                                           (void *)(uintptr_t)d->scratch, d->n_sm};
        rc = vdev_cuda_run_op(&a, &env, msg, sizeof msg);
    }
    pthread_mutex_unlock(&d->launch_lock);
    if (rc == VDEV_CUDA_RC_OK)
        return VDEV_OK;
    return fail(rc == VDEV_CUDA_RC_UNSUPPORTED ? VDEV_ERR_UNSUPPORTED : VDEV_ERR_BACKEND,
                "%s (GPU %d)", msg, dev);
}

/* ---- life cycle ---- */

static void dev_teardown(struct cu_dev *d)
{
    if (d->ctx && use_ctx(d) == CUDA_SUCCESS) {
        if (d->stream)
            cu.cuStreamSynchronize(d->stream);
        vdev_cuda_blas_destroy(d->cublas);
        while (d->regions) { /* normally none: the allocators released theirs */
            struct cu_region *r = d->regions;
            d->regions = r->next;
            region_free(d, r);
            free(r);
        }
        while (d->ev_free) {
            struct cu_event *e = d->ev_free;
            d->ev_free = e->next;
            cu.cuEventDestroy(e->ev);
            free(e);
        }
        for (int i = 0; i < 2; i++) {
            if (d->stage[i])
                cu.cuMemFreeHost(d->stage[i]);
            if (d->stage_ev[i])
                cu.cuEventDestroy(d->stage_ev[i]);
        }
        if (d->scratch)
            cu.cuMemFree(d->scratch);
        if (d->stream)
            cu.cuStreamDestroy(d->stream);
    }
    if (d->ctx)
        cu.cuDevicePrimaryCtxRelease(d->dev);
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
    .reserve = cu_reserve, .release = cu_release, .copy_h2d = cu_copy_h2d,                         \
    .copy_d2h = cu_copy_d2h, .copy_d2d = cu_copy_d2d, .submit_host = cu_submit_host,               \
    .synchronize = cu_synchronize, .event_record = cu_event_record,                                \
    .event_done = cu_event_done, .event_wait = cu_event_wait,                                      \
    .stream_wait_event = cu_stream_wait_event, .event_drop = cu_event_drop,                        \
    .run_kernel = cu_run_kernel, .destroy = cu_destroy

/* Every GPU has VMM: regions grow in place. */
static const struct vdev_backend_ops cu_ops_vmm = {OPS_COMMON, .extend = cu_extend};
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
#define TRY(call)                                                                                  \
    do {                                                                                           \
        what = #call;                                                                              \
        if ((r = (call)) != CUDA_SUCCESS)                                                          \
            goto bad;                                                                              \
    } while (0)
    TRY(cu.cuDeviceGet(&d->dev, i));
    pthread_mutex_lock(&load_lock);
    r = kept_ctx[i] ? CUDA_SUCCESS : cu.cuDevicePrimaryCtxRetain(&kept_ctx[i], d->dev);
    pthread_mutex_unlock(&load_lock);
    what = "cuDevicePrimaryCtxRetain";
    if (r != CUDA_SUCCESS)
        goto bad;
    TRY(cu.cuDevicePrimaryCtxRetain(&d->ctx, d->dev));
    TRY(cu.cuCtxSetCurrent(d->ctx));
    TRY(cu.cuDeviceGetName(d->name, (int)sizeof d->name, d->dev));
    size_t total = 0;
    TRY(cu.cuDeviceTotalMem(&total, d->dev));
    d->total = total;
    TRY(cu.cuDeviceGetAttribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                d->dev));
    TRY(cu.cuDeviceGetAttribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                d->dev));
    TRY(cu.cuDeviceGetAttribute(&d->n_sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev));
    TRY(cu.cuDeviceGetAttribute(&d->vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                d->dev));
    if (d->vmm) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = (int)d->dev;
        TRY(cu.cuMemGetAllocationGranularity(&d->gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        if (d->gran == 0)
            d->gran = 2u << 20;
    }
    TRY(cu.cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING));
    TRY(cu.cuMemAlloc(&d->scratch, VDEV_CUDA_SCRATCH_BYTES));
#undef TRY
    return 0;
bad:
    snprintf(reason, cap, "CUDA plugin: GPU %d: %s failed: %s", i, what,
             cu_errstr(r, e, sizeof e));
    return -1;
}

/* dlopen libcuda.so.1 and resolve the functions; cuInit. Once per process
 * (a failure is retried at the next open: the driver may have appeared). */
static enum vdev_status load_driver(char *reason, size_t cap)
{
    char e[160];
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&load_lock);
    if (cu_resolved)
        goto out;
    if (!libcuda) {
        libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!libcuda) {
            snprintf(reason, cap, "CUDA plugin: libcuda.so.1 not found");
            st = VDEV_ERR_UNSUPPORTED;
            goto out;
        }
    }
#define X(name)                                                                                    \
    if (!(*(void **)(&cu.name) = dlsym(libcuda, XSTR(name)))) {                                    \
        snprintf(reason, cap, "CUDA plugin: libcuda.so.1 lacks %s (driver too old?)", XSTR(name)); \
        st = VDEV_ERR_UNSUPPORTED;                                                                 \
        goto out;                                                                                  \
    }
    CU_BASIC_FNS(X)
    CUresult r = cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(reason, cap, "CUDA plugin: cuInit failed: %s", cu_errstr(r, e, sizeof e));
        st = VDEV_ERR_UNSUPPORTED;
        goto out;
    }
    int ver = 0;
    r = cu.cuDriverGetVersion(&ver);
    if (r != CUDA_SUCCESS || ver / 1000 < CUDA_MAJOR_NEEDED) {
        snprintf(reason, cap,
                 "CUDA plugin: the driver supports CUDA %d.%d, the plugin needs CUDA %d.0 or "
                 "newer (built with CUDA %d.%d)",
                 ver / 1000, ver % 1000 / 10, CUDA_MAJOR_NEEDED, CUDA_VERSION / 1000,
                 CUDA_VERSION % 1000 / 10);
        st = VDEV_ERR_UNSUPPORTED;
        goto out;
    }
    CU_FNS(X)
#undef X
    cu_resolved = 1;
out:
    pthread_mutex_unlock(&load_lock);
    return st;
}

EXPORT enum vdev_status vdev_cuda_plugin_open(int api_version, struct vdev_backend *out,
                                              char *reason, size_t cap,
                                              vdev_error_fn set_error);

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
    CUresult r = cu.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS) {
        snprintf(reason, cap, "CUDA plugin: cuDeviceGetCount failed: %s",
                 cu_errstr(r, e, sizeof e));
        return VDEV_ERR_BACKEND;
    }
    if (n <= 0) {
        snprintf(reason, cap, "CUDA plugin: no CUDA device found");
        return VDEV_ERR_UNSUPPORTED;
    }
    if (n > MAX_GPUS)
        n = MAX_GPUS;
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
    cu.cuCtxGetCurrent(&prev);
    int all_vmm = 1;
    for (int i = 0; i < n; i++) {
        c->n = i + 1;
        if (dev_setup(&c->devs[i], i, reason, cap) != 0) {
            cu_destroy(c);
            cu.cuCtxSetCurrent(prev);
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
                cu.cuDeviceCanAccessPeer(&can, c->devs[i].dev, c->devs[j].dev) != CUDA_SUCCESS ||
                !can)
                continue;
            if (!all_vmm) {
                use_ctx(&c->devs[i]);
                CUresult pr = cu.cuCtxEnablePeerAccess(c->devs[j].ctx, 0);
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
    cu.cuCtxSetCurrent(prev);
    out->ops = all_vmm ? &cu_ops_vmm : &cu_ops_plain;
    out->ctx = c;
    return VDEV_OK;
}
