/* stub_cuda.c — a stand-in for the NVIDIA driver (libcuda.so.1), so that the
 * CUDA plugin itself runs, and is checked, on machines without a GPU.
 *
 * It exports the driver functions the plugin resolves (under the versioned
 * names of the toolkit's cuda.h, which this file includes, so the prototypes
 * are checked too) and the control functions of stub_cuda.h. How it works:
 *  - devices: vdev_stub_setup() says how many, their memory, the driver
 *    version, what cuInit returns, and whether they have VMM and peer access;
 *  - device memory is host memory (anonymous MAP_NORESERVE mappings, free
 *    until touched) behind fake device addresses that nothing may
 *    dereference: every copy translates them through the mappings, so a copy
 *    to an address that is not mapped, or mapped without cuMemSetAccess for
 *    the device that touches it, is caught;
 *  - the virtual memory calls check what the driver documents: sizes and
 *    addresses in multiples of the granularity, maps inside one reservation
 *    and never overlapping, set-access and unmap over whole mappings, no
 *    address range freed while mapped, physical memory returned only once
 *    released and unmapped, capacity enforced (CUDA_ERROR_OUT_OF_MEMORY);
 *  - streams run their work at once, in submission order, but carry vector
 *    clocks: an event records its stream's clock, a stream that waits on an
 *    event takes the event's clock, the host takes a clock when it
 *    synchronises a stream or an event (or queries one that passed), and a
 *    stream takes the host's clock with each new piece of work. Each access
 *    to device memory is checked against earlier ones from other streams:
 *    overlapping bytes, a write on either side, and no clock ordering the two
 *    is a race (it would be one on a GPU); memory unmapped or freed while a
 *    stream the host has not waited for may still touch it is one too;
 *  - every broken rule is a violation (vdev_stub_stats, vdev_stub_violation,
 *    stderr); fault injection makes the nth call of a function fail
 *    (vdev_stub_fail); calls are counted and stream work is traced.
 * One mutex guards everything; the current context is per thread, as the
 * driver's is. Host functions (cuLaunchHostFunc) run at once, outside the
 * lock. The CUDA runtime's own use of the driver (kernel launches, cuBLAS)
 * finds none of its entry points here and fails cleanly: kernels are tested
 * on a real GPU or on the host (test_cuda_emu.c). */
#define _GNU_SOURCE
#include "stub_cuda.h"

#include <cuda.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEV VDEV_STUB_MAX_DEVICES
#define MAX_STREAMS 64   /* width of the vector clocks */
#define MAX_ACCESS 4096  /* accesses remembered for race checks */
#define MAX_VIOL 16
#define TRACE_LINES 512
#define TRACE_WIDTH 96

struct CUctx_st {
    int dev;
    int refs;
};

struct CUstream_st {
    int slot, id, dev;
    uint32_t vc[MAX_STREAMS];
};

struct CUevent_st {
    int id, dev, recorded;
    uint32_t vc[MAX_STREAMS];
    struct CUevent_st *next;
};

struct phys { /* a cuMemCreate handle */
    unsigned long long id;
    int dev, released, maps;
    size_t size;
    char *mem;
    struct phys *next;
};

struct resv { /* a cuMemAddressReserve range */
    CUdeviceptr base;
    size_t size;
    struct resv *next;
};

struct map { /* a cuMemMap mapping */
    CUdeviceptr va;
    size_t size;
    struct phys *p;
    unsigned access; /* bit d: device d may read and write */
    struct map *next;
};

struct block { /* a cuMemAlloc block */
    CUdeviceptr va;
    size_t size;
    char *mem;
    int dev;
    struct block *next;
};

struct hostbuf {
    void *p;
    struct hostbuf *next;
};

struct access {
    CUdeviceptr lo, hi;
    int write, slot, stream_id, live;
    uint32_t epoch;
    const char *op;
};

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static struct vdev_stub_config cfg;
static int initialized;
static struct CUctx_st ctxs[MAX_DEV];
static _Thread_local struct CUctx_st *current;
static uint64_t used[MAX_DEV];
static int peer_on[MAX_DEV][MAX_DEV]; /* [a][b]: a may access b's cuMemAlloc blocks */
static struct phys *physs;
static struct resv *resvs;
static struct map *maps;
static struct block *blocks;
static struct hostbuf *hostbufs;
static struct CUevent_st *events;
static CUdeviceptr next_va = 0x200000000000ull;
static unsigned long long next_handle = 1;
static struct CUstream_st *streams[MAX_STREAMS];
static uint32_t slot_epoch[MAX_STREAMS];
static int next_stream_id, next_event_id, last_stream[MAX_DEV];
static uint32_t host_vc[MAX_STREAMS];
static struct access acc[MAX_ACCESS];
static int acc_next;
static uint64_t n_viol;
static char viol[MAX_VIOL][320];
static char trace_buf[TRACE_LINES][TRACE_WIDTH];
static int trace_n;
static struct {
    char name[48];
    uint64_t n;
} callc[96];
static struct {
    char name[48];
    int skip, result, live;
} faults[16];

static uint64_t gran(void) { return cfg.granularity ? cfg.granularity : 2u << 20; }

/* ---- bookkeeping (L held) ---- */

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n_viol < MAX_VIOL)
        snprintf(viol[n_viol], sizeof viol[0], "%s", msg);
    n_viol++;
    fprintf(stderr, "stub libcuda: violation: %s\n", msg);
}

static void tracef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tracef(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(trace_buf[trace_n % TRACE_LINES], TRACE_WIDTH, fmt, ap);
    va_end(ap);
    trace_n++;
}

/* Counts the call; 1 when a fault makes it return *r now. */
static int enter(const char *fn, int need_init, CUresult *r)
{
    int i = 0;
    for (; i < (int)(sizeof callc / sizeof callc[0]) && callc[i].name[0]; i++)
        if (!strcmp(callc[i].name, fn))
            break;
    if (i < (int)(sizeof callc / sizeof callc[0])) {
        if (!callc[i].name[0])
            snprintf(callc[i].name, sizeof callc[i].name, "%s", fn);
        callc[i].n++;
    }
    for (int f = 0; f < (int)(sizeof faults / sizeof faults[0]); f++)
        if (faults[f].live && !strcmp(faults[f].name, fn) && faults[f].skip-- == 0) {
            faults[f].live = 0;
            *r = (CUresult)faults[f].result;
            return 1;
        }
    if (need_init && !initialized) {
        *r = CUDA_ERROR_NOT_INITIALIZED;
        return 1;
    }
    return 0;
}

#define ENTER_(name, need_init)                                                                    \
    CUresult r_;                                                                                   \
    pthread_mutex_lock(&L);                                                                        \
    if (enter(name, need_init, &r_)) {                                                             \
        pthread_mutex_unlock(&L);                                                                  \
        return r_;                                                                                 \
    }
#define ENTER(name) ENTER_(name, 1)
#define OUT(x)                                                                                     \
    do {                                                                                           \
        r_ = (x);                                                                                  \
        pthread_mutex_unlock(&L);                                                                  \
        return r_;                                                                                 \
    } while (0)
#define NEED_CTX()                                                                                 \
    do {                                                                                           \
        if (!current)                                                                              \
            OUT(CUDA_ERROR_INVALID_CONTEXT);                                                       \
    } while (0)

static void join(uint32_t *into, const uint32_t *from)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (from[i] > into[i])
            into[i] = from[i];
}

static CUdeviceptr alloc_va(size_t size, size_t align)
{
    if (align < gran())
        align = gran();
    CUdeviceptr va = (next_va + align - 1) / align * align;
    next_va = va + size + gran(); /* a gap: ranges never touch */
    return va;
}

static char *backing(size_t size)
{
    void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int dev_ok(int d) { return d >= 0 && d < cfg.n_devices; }

/* ---- device memory: translation, access rights, races ---- */

/* The mapping or block holding p: host memory at p, bytes left in it, who
 * may touch it. 0 when p is not device memory. */
static int seg_at(CUdeviceptr p, char **host, size_t *left, unsigned *access)
{
    for (struct map *m = maps; m; m = m->next)
        if (p >= m->va && p < m->va + m->size) {
            *host = m->p->mem + (p - m->va);
            *left = m->va + m->size - p;
            *access = m->access;
            return 1;
        }
    for (struct block *b = blocks; b; b = b->next)
        if (p >= b->va && p < b->va + b->size) {
            *host = b->mem + (p - b->va);
            *left = b->va + b->size - p;
            unsigned a = 1u << b->dev;
            for (int i = 0; i < cfg.n_devices; i++)
                if (peer_on[i][b->dev])
                    a |= 1u << i;
            *access = a;
            return 1;
        }
    return 0;
}

enum { COPY_IN, COPY_OUT, FILL32 };

/* Moves n bytes between [p, p + n) and host memory (or fills it), as device
 * `who` would; checks the whole range first. */
static CUresult dev_move(CUdeviceptr p, size_t n, int who, int mode, void *host, uint32_t word,
                         const char *op)
{
    for (int pass = 0; pass < 2; pass++) {
        size_t done = 0;
        while (done < n) {
            char *h;
            size_t left;
            unsigned access;
            if (!seg_at(p + done, &h, &left, &access)) {
                violation("%s: %#llx is not mapped device memory", op,
                          (unsigned long long)(p + done));
                return CUDA_ERROR_INVALID_VALUE;
            }
            if (!(access & (1u << who))) {
                violation("%s: GPU %d may not access %#llx (no cuMemSetAccess for it)", op, who,
                          (unsigned long long)(p + done));
                return CUDA_ERROR_ILLEGAL_ADDRESS;
            }
            size_t k = n - done < left ? n - done : left;
            if (pass == 1) {
                if (mode == COPY_IN)
                    memcpy(h, (char *)host + done, k);
                else if (mode == COPY_OUT)
                    memcpy((char *)host + done, h, k);
                else
                    for (size_t w = 0; w + 4 <= k; w += 4)
                        memcpy(h + w, &word, 4);
            }
            done += k;
        }
    }
    return CUDA_SUCCESS;
}

/* A stream takes the host's clock and ticks: the start of a piece of work. */
static void tick(struct CUstream_st *s)
{
    join(s->vc, host_vc);
    s->vc[s->slot] = ++slot_epoch[s->slot];
}

/* Records an access by stream s, after checking it against earlier ones. */
static void touch(struct CUstream_st *s, CUdeviceptr lo, size_t n, int write, const char *op)
{
    CUdeviceptr hi = lo + n;
    for (int i = 0; i < MAX_ACCESS; i++) {
        struct access *a = &acc[i];
        if (!a->live || a->slot == s->slot || a->hi <= lo || hi <= a->lo)
            continue;
        if ((write || a->write) && s->vc[a->slot] < a->epoch)
            violation("race: %s on S%d %s [%#llx, %#llx), which %s on S%d %s, with no event "
                      "ordering the two",
                      op, s->id, write ? "writes" : "reads", (unsigned long long)lo,
                      (unsigned long long)hi, a->op, a->stream_id,
                      a->write ? "writes" : "reads");
    }
    struct access *a = &acc[acc_next++ % MAX_ACCESS];
    *a = (struct access){lo, hi, write, s->slot, s->id, 1, s->vc[s->slot], op};
}

/* Before [lo, hi) goes away: every access to it must be one the host waited
 * for; the accesses are forgotten. */
static void retire(CUdeviceptr lo, CUdeviceptr hi, const char *op)
{
    for (int i = 0; i < MAX_ACCESS; i++) {
        struct access *a = &acc[i];
        if (!a->live || a->hi <= lo || hi <= a->lo)
            continue;
        if (host_vc[a->slot] < a->epoch)
            violation("%s of [%#llx, %#llx) while %s on S%d may still touch it", op,
                      (unsigned long long)lo, (unsigned long long)hi, a->op, a->stream_id);
        a->live = 0;
    }
}

/* The stream, if it is one; work on it needs its device's context current. */
static struct CUstream_st *stream_of(CUstream h, const char *op)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] && streams[i] == h) {
            if (!current || current->dev != h->dev)
                violation("%s on S%d (GPU %d) while %s is current", op, h->id, h->dev,
                          current ? "another GPU's context" : "no context");
            return h;
        }
    violation("%s on a stream that does not exist (%p)", op, (void *)h);
    return NULL;
}

static struct CUevent_st *event_of(CUevent h, const char *op)
{
    for (struct CUevent_st *e = events; e; e = e->next)
        if (e == h)
            return e;
    violation("%s of an event that does not exist (%p)", op, (void *)h);
    return NULL;
}

static struct phys *phys_of(CUmemGenericAllocationHandle h)
{
    for (struct phys *p = physs; p; p = p->next)
        if (p->id == h)
            return p;
    return NULL;
}

static void phys_drop(struct phys *p)
{
    struct phys **l = &physs;
    while (*l != p)
        l = &(*l)->next;
    *l = p->next;
    used[p->dev] -= p->size;
    munmap(p->mem, p->size);
    free(p);
}

/* The mappings exactly covering [va, va + size), in order, contiguous;
 * 0 if the range is not whole mappings. */
static int whole_maps(CUdeviceptr va, size_t size)
{
    CUdeviceptr at = va;
    while (at < va + size) {
        struct map *m = maps;
        while (m && m->va != at)
            m = m->next;
        if (!m || m->va + m->size > va + size)
            return 0;
        at += m->size;
    }
    return size > 0;
}

/* ---- initialisation, errors, devices, contexts ---- */

EXPORT CUresult CUDAAPI cuInit(unsigned int flags)
{
    ENTER_("cuInit", 0);
    if (flags != 0)
        OUT(CUDA_ERROR_INVALID_VALUE);
    if (cfg.init_result == 0)
        initialized = 1;
    OUT((CUresult)cfg.init_result);
}

EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v)
{
    ENTER_("cuDriverGetVersion", 0);
    *v = cfg.driver_version ? cfg.driver_version : 13000;
    OUT(CUDA_SUCCESS);
}

static const struct {
    CUresult r;
    const char *name, *text;
} errs[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

EXPORT CUresult CUDAAPI cuGetErrorName(CUresult r, const char **s)
{
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].r == r) {
            *s = errs[i].name;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuGetErrorString(CUresult r, const char **s)
{
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].r == r) {
            *s = errs[i].text;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuDeviceGetCount(int *n)
{
    ENTER("cuDeviceGetCount");
    *n = cfg.n_devices;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal)
{
    ENTER("cuDeviceGet");
    if (!dev_ok(ordinal))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    *d = ordinal;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d)
{
    ENTER("cuDeviceGetName");
    if (!dev_ok(d) || len <= 0)
        OUT(CUDA_ERROR_INVALID_VALUE);
    snprintf(name, (size_t)len, "Stand-in GPU");
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice d)
{
    ENTER("cuDeviceTotalMem");
    if (!dev_ok(d))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    *bytes = cfg.total_bytes;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    ENTER("cuDeviceGetAttribute");
    if (!dev_ok(d))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = !cfg.no_vmm; break;
    default: OUT(CUDA_ERROR_INVALID_VALUE);
    }
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer)
{
    ENTER("cuDeviceCanAccessPeer");
    if (!dev_ok(d) || !dev_ok(peer))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    *can = !cfg.no_peer && d != peer;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
    ENTER("cuDevicePrimaryCtxRetain");
    if (!dev_ok(d))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    ctxs[d].dev = d;
    ctxs[d].refs++;
    *ctx = &ctxs[d];
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d)
{
    ENTER("cuDevicePrimaryCtxRelease");
    if (!dev_ok(d))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    if (ctxs[d].refs <= 0) {
        violation("cuDevicePrimaryCtxRelease of GPU %d, which is not retained", d);
        OUT(CUDA_ERROR_INVALID_CONTEXT);
    }
    ctxs[d].refs--;
    OUT(CUDA_SUCCESS);
}

static struct CUctx_st *ctx_of(CUcontext c)
{
    for (int i = 0; i < MAX_DEV; i++)
        if (c == &ctxs[i] && ctxs[i].refs > 0)
            return &ctxs[i];
    return NULL;
}

EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext c)
{
    ENTER("cuCtxSetCurrent");
    if (c && !ctx_of(c)) {
        violation("cuCtxSetCurrent of a context that is not retained");
        OUT(CUDA_ERROR_INVALID_CONTEXT);
    }
    current = c;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c)
{
    ENTER("cuCtxGetCurrent");
    *c = current;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    ENTER("cuCtxEnablePeerAccess");
    NEED_CTX();
    struct CUctx_st *p = ctx_of(peer);
    if (!p || flags)
        OUT(CUDA_ERROR_INVALID_VALUE);
    if (cfg.no_peer || p == current)
        OUT(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    if (peer_on[current->dev][p->dev])
        OUT(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    peer_on[current->dev][p->dev] = 1;
    OUT(CUDA_SUCCESS);
}

/* ---- memory: plain allocations and pinned host memory ---- */

EXPORT CUresult CUDAAPI cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    ENTER("cuMemGetInfo");
    NEED_CTX();
    *total = cfg.total_bytes;
    *free_bytes = cfg.total_bytes - used[current->dev];
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
    ENTER("cuMemAlloc");
    NEED_CTX();
    int d = current->dev;
    if (!bytes)
        OUT(CUDA_ERROR_INVALID_VALUE);
    if (used[d] + bytes > cfg.total_bytes)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    struct block *b = calloc(1, sizeof *b);
    char *mem = backing(bytes);
    if (!b || !mem) {
        free(b);
        if (mem)
            munmap(mem, bytes);
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    }
    b->va = alloc_va(bytes, 0);
    b->size = bytes;
    b->mem = mem;
    b->dev = d;
    b->next = blocks;
    blocks = b;
    used[d] += bytes;
    *p = b->va;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
    ENTER("cuMemFree");
    struct block **l = &blocks;
    while (*l && (*l)->va != p)
        l = &(*l)->next;
    if (!*l) {
        violation("cuMemFree of %#llx, which cuMemAlloc did not return", (unsigned long long)p);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    struct block *b = *l;
    retire(b->va, b->va + b->size, "cuMemFree");
    *l = b->next;
    used[b->dev] -= b->size;
    munmap(b->mem, b->size);
    free(b);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags)
{
    ENTER("cuMemHostAlloc");
    NEED_CTX();
    struct hostbuf *h = calloc(1, sizeof *h);
    void *p = bytes ? malloc(bytes) : NULL;
    if (!h || !p) {
        free(h);
        free(p);
        OUT(bytes ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE);
    }
    h->p = p;
    h->next = hostbufs;
    hostbufs = h;
    *pp = p;
    (void)flags;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
    ENTER("cuMemFreeHost");
    struct hostbuf **l = &hostbufs;
    while (*l && (*l)->p != p)
        l = &(*l)->next;
    if (!*l) {
        violation("cuMemFreeHost of %p, which cuMemHostAlloc did not return", p);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    struct hostbuf *h = *l;
    *l = h->next;
    free(h->p);
    free(h);
    OUT(CUDA_SUCCESS);
}

/* ---- memory: virtual memory management ---- */

EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                      CUmemAllocationGranularity_flags option)
{
    ENTER("cuMemGetAllocationGranularity");
    if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !dev_ok(prop->location.id))
        OUT(CUDA_ERROR_INVALID_VALUE);
    *g = gran();
    (void)option;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t alignment,
                                            CUdeviceptr addr, unsigned long long flags)
{
    ENTER("cuMemAddressReserve");
    if (!size || size % gran() || (alignment & (alignment - 1)) || flags) {
        violation("cuMemAddressReserve of %zu bytes (alignment %zu): not a multiple of the "
                  "granularity %llu",
                  size, alignment, (unsigned long long)gran());
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    struct resv *r = calloc(1, sizeof *r);
    if (!r)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    r->base = alloc_va(size, alignment);
    r->size = size;
    r->next = resvs;
    resvs = r;
    *p = r->base;
    (void)addr;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr p, size_t size)
{
    ENTER("cuMemAddressFree");
    struct resv **l = &resvs;
    while (*l && !((*l)->base == p && (*l)->size == size))
        l = &(*l)->next;
    if (!*l) {
        violation("cuMemAddressFree(%#llx, %zu): not a reserved range", (unsigned long long)p,
                  size);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    for (struct map *m = maps; m; m = m->next)
        if (m->va >= p && m->va < p + size) {
            violation("cuMemAddressFree of [%#llx, %#llx) while %#llx is still mapped",
                      (unsigned long long)p, (unsigned long long)(p + size),
                      (unsigned long long)m->va);
            OUT(CUDA_ERROR_INVALID_VALUE);
        }
    struct resv *r = *l;
    *l = r->next;
    free(r);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags)
{
    ENTER("cuMemCreate");
    if (!size || size % gran()) {
        violation("cuMemCreate of %zu bytes: not a multiple of the granularity %llu", size,
                  (unsigned long long)gran());
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !dev_ok(prop->location.id) || flags)
        OUT(CUDA_ERROR_INVALID_VALUE);
    int d = prop->location.id;
    if (used[d] + size > cfg.total_bytes)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    struct phys *p = calloc(1, sizeof *p);
    char *mem = backing(size);
    if (!p || !mem) {
        free(p);
        if (mem)
            munmap(mem, size);
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    }
    p->id = next_handle++;
    p->dev = d;
    p->size = size;
    p->mem = mem;
    p->next = physs;
    physs = p;
    used[d] += size;
    *h = p->id;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h)
{
    ENTER("cuMemRelease");
    struct phys *p = phys_of(h);
    if (!p || p->released) {
        violation("cuMemRelease of handle %llu, %s", (unsigned long long)h,
                  p ? "released already" : "which does not exist");
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    p->released = 1;
    if (!p->maps)
        phys_drop(p);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr va, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle h, unsigned long long flags)
{
    ENTER("cuMemMap");
    struct phys *p = phys_of(h);
    if (!p || p->released) {
        violation("cuMemMap of handle %llu, %s", (unsigned long long)h,
                  p ? "released already" : "which does not exist");
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    if (offset || flags || !size || size % gran() || va % gran() || size > p->size) {
        violation("cuMemMap(%#llx, %zu, offset %zu) of a %zu-byte handle: not whole granules "
                  "from offset 0",
                  (unsigned long long)va, size, offset, p->size);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    struct resv *r = resvs;
    while (r && !(va >= r->base && va + size <= r->base + r->size))
        r = r->next;
    if (!r) {
        violation("cuMemMap of [%#llx, %#llx), outside every reserved range",
                  (unsigned long long)va, (unsigned long long)(va + size));
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    for (struct map *m = maps; m; m = m->next)
        if (m->va < va + size && va < m->va + m->size) {
            violation("cuMemMap of [%#llx, %#llx) over an existing mapping",
                      (unsigned long long)va, (unsigned long long)(va + size));
            OUT(CUDA_ERROR_INVALID_VALUE);
        }
    struct map *m = calloc(1, sizeof *m);
    if (!m)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    m->va = va;
    m->size = size;
    m->p = p;
    m->next = maps;
    maps = m;
    p->maps++;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc,
                                       size_t count)
{
    ENTER("cuMemSetAccess");
    if (!whole_maps(va, size)) {
        violation("cuMemSetAccess of [%#llx, %#llx), which is not whole mappings",
                  (unsigned long long)va, (unsigned long long)(va + size));
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    if (!count)
        OUT(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++)
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !dev_ok(desc[i].location.id))
            OUT(CUDA_ERROR_INVALID_VALUE);
    for (struct map *m = maps; m; m = m->next)
        if (m->va >= va && m->va < va + size)
            for (size_t i = 0; i < count; i++) {
                unsigned bit = 1u << desc[i].location.id;
                if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE)
                    m->access &= ~bit;
                else
                    m->access |= bit;
            }
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr va, size_t size)
{
    ENTER("cuMemUnmap");
    if (!whole_maps(va, size)) {
        violation("cuMemUnmap of [%#llx, %#llx), which is not whole mappings",
                  (unsigned long long)va, (unsigned long long)(va + size));
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    retire(va, va + size, "cuMemUnmap");
    struct map **l = &maps;
    while (*l) {
        struct map *m = *l;
        if (m->va >= va && m->va < va + size) {
            *l = m->next;
            if (--m->p->maps == 0 && m->p->released)
                phys_drop(m->p);
            free(m);
        } else {
            l = &m->next;
        }
    }
    OUT(CUDA_SUCCESS);
}

/* ---- streams and events ---- */

EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *out, unsigned int flags)
{
    ENTER("cuStreamCreate");
    NEED_CTX();
    int slot = 0;
    while (slot < MAX_STREAMS && streams[slot])
        slot++;
    struct CUstream_st *s = slot < MAX_STREAMS ? calloc(1, sizeof *s) : NULL;
    if (!s)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    s->slot = slot;
    s->id = next_stream_id++;
    s->dev = current->dev;
    memcpy(s->vc, host_vc, sizeof s->vc);
    s->vc[slot] = slot_epoch[slot];
    streams[slot] = s;
    last_stream[s->dev] = s->id;
    *out = s;
    (void)flags;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream h)
{
    ENTER("cuStreamDestroy");
    struct CUstream_st *s = NULL;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] && streams[i] == h)
            s = streams[i];
    if (!s) {
        violation("cuStreamDestroy of a stream that does not exist (%p)", (void *)h);
        OUT(CUDA_ERROR_INVALID_HANDLE);
    }
    streams[s->slot] = NULL;
    free(s);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream h)
{
    ENTER("cuStreamSynchronize");
    struct CUstream_st *s = NULL;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] && streams[i] == h)
            s = streams[i];
    if (!s) {
        violation("cuStreamSynchronize of a stream that does not exist (%p)", (void *)h);
        OUT(CUDA_ERROR_INVALID_HANDLE);
    }
    join(host_vc, s->vc);
    tracef("S%d sync", s->id);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventCreate(CUevent *out, unsigned int flags)
{
    ENTER("cuEventCreate");
    NEED_CTX();
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    e->id = next_event_id++;
    e->dev = current->dev;
    e->next = events;
    events = e;
    *out = e;
    (void)flags;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventDestroy(CUevent h)
{
    ENTER("cuEventDestroy");
    struct CUevent_st **l = &events;
    while (*l && *l != h)
        l = &(*l)->next;
    if (!*l) {
        violation("cuEventDestroy of an event that does not exist (%p)", (void *)h);
        OUT(CUDA_ERROR_INVALID_HANDLE);
    }
    struct CUevent_st *e = *l;
    *l = e->next;
    free(e);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventRecord(CUevent he, CUstream hs)
{
    ENTER("cuEventRecord");
    struct CUevent_st *e = event_of(he, "cuEventRecord");
    struct CUstream_st *s = stream_of(hs, "cuEventRecord");
    if (!e || !s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (e->dev != s->dev) {
        violation("cuEventRecord of E%d (GPU %d) on S%d (GPU %d): not the same context", e->id,
                  e->dev, s->id, s->dev);
        OUT(CUDA_ERROR_INVALID_HANDLE);
    }
    join(s->vc, host_vc);
    memcpy(e->vc, s->vc, sizeof e->vc);
    e->recorded = 1;
    tracef("S%d record E%d", s->id, e->id);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hs, CUevent he, unsigned int flags)
{
    ENTER("cuStreamWaitEvent");
    struct CUevent_st *e = event_of(he, "cuStreamWaitEvent");
    struct CUstream_st *s = NULL;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] && streams[i] == hs)
            s = streams[i];
    if (!s)
        violation("cuStreamWaitEvent on a stream that does not exist (%p)", (void *)hs);
    if (!e || !s || flags)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (e->recorded)
        join(s->vc, e->vc);
    tracef("S%d wait E%d", s->id, e->id);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventQuery(CUevent he)
{
    ENTER("cuEventQuery");
    struct CUevent_st *e = event_of(he, "cuEventQuery");
    if (!e)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (e->recorded) /* work runs at once: it has passed, and the host knows it */
        join(host_vc, e->vc);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent he)
{
    ENTER("cuEventSynchronize");
    struct CUevent_st *e = event_of(he, "cuEventSynchronize");
    if (!e)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (e->recorded)
        join(host_vc, e->vc);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream hs, CUhostFn fn, void *data)
{
    ENTER("cuLaunchHostFunc");
    struct CUstream_st *s = stream_of(hs, "cuLaunchHostFunc");
    if (!s || !fn)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    tick(s);
    tracef("S%d host-fn", s->id);
    pthread_mutex_unlock(&L); /* it may take the caller's locks; it may not call CUDA */
    fn(data);
    return CUDA_SUCCESS;
}

/* ---- work on streams that touches device memory ---- */

EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream hs)
{
    ENTER("cuMemcpyHtoDAsync");
    struct CUstream_st *s = stream_of(hs, "cuMemcpyHtoDAsync");
    if (!s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    tick(s);
    CUresult r = dev_move(dst, n, s->dev, COPY_IN, (void *)(uintptr_t)src, 0, "cuMemcpyHtoDAsync");
    if (r == CUDA_SUCCESS)
        touch(s, dst, n, 1, "cuMemcpyHtoDAsync");
    tracef("S%d h2d %zu", s->id, n);
    OUT(r);
}

EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream hs)
{
    ENTER("cuMemcpyDtoHAsync");
    struct CUstream_st *s = stream_of(hs, "cuMemcpyDtoHAsync");
    if (!s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    tick(s);
    CUresult r = dev_move(src, n, s->dev, COPY_OUT, dst, 0, "cuMemcpyDtoHAsync");
    if (r == CUDA_SUCCESS)
        touch(s, src, n, 0, "cuMemcpyDtoHAsync");
    tracef("S%d d2h %zu", s->id, n);
    OUT(r);
}

/* src (read as device rd) to dst (written as device wd), on stream s. */
static CUresult dev_copy(struct CUstream_st *s, CUdeviceptr dst, int wd, CUdeviceptr src, int rd,
                         size_t n, const char *op)
{
    char *tmp = malloc(n ? n : 1);
    if (!tmp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    tick(s);
    CUresult r = dev_move(src, n, rd, COPY_OUT, tmp, 0, op);
    if (r == CUDA_SUCCESS)
        r = dev_move(dst, n, wd, COPY_IN, tmp, 0, op);
    free(tmp);
    if (r == CUDA_SUCCESS) {
        touch(s, src, n, 0, op);
        touch(s, dst, n, 1, op);
    }
    return r;
}

EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs)
{
    ENTER("cuMemcpyDtoDAsync");
    struct CUstream_st *s = stream_of(hs, "cuMemcpyDtoDAsync");
    if (!s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    CUresult r = dev_copy(s, dst, s->dev, src, s->dev, n, "cuMemcpyDtoDAsync");
    tracef("S%d copy %zu", s->id, n);
    OUT(r);
}

EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                          CUcontext sctx, size_t n, CUstream hs)
{
    ENTER("cuMemcpyPeerAsync");
    struct CUstream_st *s = stream_of(hs, "cuMemcpyPeerAsync");
    struct CUctx_st *dc = ctx_of(dctx), *sc = ctx_of(sctx);
    if (!s || !dc || !sc)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    CUresult r = dev_copy(s, dst, dc->dev, src, sc->dev, n, "cuMemcpyPeerAsync");
    tracef("S%d copy-peer %zu", s->id, n);
    OUT(r);
}

EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n_words,
                                         CUstream hs)
{
    ENTER("cuMemsetD32Async");
    struct CUstream_st *s = stream_of(hs, "cuMemsetD32Async");
    if (!s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (dst % 4) {
        violation("cuMemsetD32Async at %#llx: not 4-byte aligned", (unsigned long long)dst);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    tick(s);
    CUresult r = dev_move(dst, n_words * 4, s->dev, FILL32, NULL, value, "cuMemsetD32Async");
    if (r == CUDA_SUCCESS)
        touch(s, dst, n_words * 4, 1, "cuMemsetD32Async");
    tracef("S%d memset %zu", s->id, n_words * 4);
    OUT(r);
}

/* ---- control (stub_cuda.h) ---- */

EXPORT void vdev_stub_setup(const struct vdev_stub_config *c);
EXPORT void vdev_stub_setup(const struct vdev_stub_config *c)
{
    pthread_mutex_lock(&L);
    while (maps) {
        struct map *m = maps;
        maps = m->next;
        free(m);
    }
    while (physs) {
        struct phys *p = physs;
        physs = p->next;
        munmap(p->mem, p->size);
        free(p);
    }
    while (resvs) {
        struct resv *r = resvs;
        resvs = r->next;
        free(r);
    }
    while (blocks) {
        struct block *b = blocks;
        blocks = b->next;
        munmap(b->mem, b->size);
        free(b);
    }
    while (hostbufs) {
        struct hostbuf *h = hostbufs;
        hostbufs = h->next;
        free(h->p);
        free(h);
    }
    while (events) {
        struct CUevent_st *e = events;
        events = e->next;
        free(e);
    }
    for (int i = 0; i < MAX_STREAMS; i++) {
        free(streams[i]);
        streams[i] = NULL;
    }
    memset(&cfg, 0, sizeof cfg);
    if (c)
        cfg = *c;
    if (cfg.n_devices > MAX_DEV)
        cfg.n_devices = MAX_DEV;
    initialized = 0;
    /* Primary contexts outlive a setup, as they outlive everything in a
     * process: retains held across it (the plugin keeps one per GPU for
     * good) stay valid. */
    memset(used, 0, sizeof used);
    memset(peer_on, 0, sizeof peer_on);
    memset(host_vc, 0, sizeof host_vc);
    memset(acc, 0, sizeof acc);
    memset(callc, 0, sizeof callc);
    memset(faults, 0, sizeof faults);
    n_viol = 0;
    trace_n = 0;
    for (int d = 0; d < MAX_DEV; d++)
        last_stream[d] = -1;
    pthread_mutex_unlock(&L);
}

EXPORT void vdev_stub_fail(const char *fn, int nth, int result);
EXPORT void vdev_stub_fail(const char *fn, int nth, int result)
{
    pthread_mutex_lock(&L);
    for (int f = 0; f < (int)(sizeof faults / sizeof faults[0]); f++)
        if (!faults[f].live) {
            snprintf(faults[f].name, sizeof faults[f].name, "%s", fn);
            faults[f].skip = nth;
            faults[f].result = result;
            faults[f].live = 1;
            break;
        }
    pthread_mutex_unlock(&L);
}

EXPORT void vdev_stub_stats(int dev, struct vdev_stub_stats *out);
EXPORT void vdev_stub_stats(int dev, struct vdev_stub_stats *out)
{
    pthread_mutex_lock(&L);
    memset(out, 0, sizeof *out);
    for (struct resv *r = resvs; r; r = r->next)
        out->reservations++;
    for (struct phys *p = physs; p; p = p->next)
        out->handles++;
    for (struct map *m = maps; m; m = m->next)
        out->mappings++;
    for (struct block *b = blocks; b; b = b->next)
        out->blocks++;
    for (struct hostbuf *h = hostbufs; h; h = h->next)
        out->host_allocs++;
    for (int i = 0; i < MAX_STREAMS; i++)
        out->streams += streams[i] != NULL;
    for (struct CUevent_st *e = events; e; e = e->next)
        out->events++;
    out->bytes_used = dev >= 0 && dev < MAX_DEV ? used[dev] : 0;
    out->violations = n_viol;
    pthread_mutex_unlock(&L);
}

EXPORT uint64_t vdev_stub_calls(const char *fn);
EXPORT uint64_t vdev_stub_calls(const char *fn)
{
    uint64_t n = 0;
    pthread_mutex_lock(&L);
    for (size_t i = 0; i < sizeof callc / sizeof callc[0] && callc[i].name[0]; i++)
        if (!strcmp(callc[i].name, fn))
            n = callc[i].n;
    pthread_mutex_unlock(&L);
    return n;
}

EXPORT const char *vdev_stub_violation(int i);
EXPORT const char *vdev_stub_violation(int i)
{
    return i >= 0 && (uint64_t)i < n_viol && i < MAX_VIOL ? viol[i] : NULL;
}

EXPORT const char *vdev_stub_trace(char *buf, size_t cap);
EXPORT const char *vdev_stub_trace(char *buf, size_t cap)
{
    pthread_mutex_lock(&L);
    size_t at = 0;
    buf[0] = '\0';
    int first = trace_n > TRACE_LINES ? trace_n - TRACE_LINES : 0;
    for (int i = first; i < trace_n && at + 1 < cap; i++) {
        int k = snprintf(buf + at, cap - at, "%s\n", trace_buf[i % TRACE_LINES]);
        if (k < 0)
            break;
        at += (size_t)k;
    }
    pthread_mutex_unlock(&L);
    return buf;
}

EXPORT void vdev_stub_trace_mark(void);
EXPORT void vdev_stub_trace_mark(void)
{
    pthread_mutex_lock(&L);
    trace_n = 0;
    pthread_mutex_unlock(&L);
}

EXPORT int vdev_stub_stream_id(int dev);
EXPORT int vdev_stub_stream_id(int dev)
{
    pthread_mutex_lock(&L);
    int id = dev >= 0 && dev < MAX_DEV ? last_stream[dev] : -1;
    pthread_mutex_unlock(&L);
    return id;
}
