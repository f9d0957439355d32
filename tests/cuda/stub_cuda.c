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
 *    (vdev_stub_fail); calls are counted and stream work is traced;
 *  - a retained primary context takes context_bytes of device memory, as a
 *    real one does (cuMemGetInfo shows it), streams remember their priority,
 *    and a stand-in library (stub_nccl.c) works on the streams through the
 *    vdev_stub_lib_* functions, under the same checks.
 * One mutex guards everything; the current context is per thread, as the
 * driver's is. Host functions (cuLaunchHostFunc) run at once, outside the
 * lock. The CUDA runtime's own use of the driver (kernel launches, cuBLAS)
 * finds none of its entry points here and fails cleanly: kernels are tested
 * on a real GPU or on the host (test_cuda_emu.c). */
#define _GNU_SOURCE
#include "stub_internal.h"

struct stub_state vdev_stub_st = {
    .lock = PTHREAD_MUTEX_INITIALIZER, .next_va = 0x200000000000ull, .next_handle = 1};
_Thread_local struct CUctx_st *vdev_stub_current;

uint64_t stub_gran(void) { return ST.cfg.granularity ? ST.cfg.granularity : 2u << 20; }

/* ---- bookkeeping (ST.lock held) ---- */

void stub_violation(const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ST.n_viol < MAX_VIOL)
        snprintf(ST.viol[ST.n_viol], sizeof ST.viol[0], "%s", msg);
    ST.n_viol++;
    fprintf(stderr, "stub libcuda: violation: %s\n", msg);
}

void stub_tracef(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ST.trace_buf[ST.trace_n % TRACE_LINES], TRACE_WIDTH, fmt, ap);
    va_end(ap);
    ST.trace_n++;
}

/* Counts the call; 1 when a fault makes it return *r now. */
int stub_enter(const char *fn, int need_init, CUresult *r)
{
    int i = 0;
    for (; i < (int)(sizeof ST.callc / sizeof ST.callc[0]) && ST.callc[i].name[0]; i++)
        if (!strcmp(ST.callc[i].name, fn))
            break;
    if (i < (int)(sizeof ST.callc / sizeof ST.callc[0])) {
        if (!ST.callc[i].name[0])
            snprintf(ST.callc[i].name, sizeof ST.callc[i].name, "%s", fn);
        ST.callc[i].n++;
    }
    for (int f = 0; f < (int)(sizeof ST.faults / sizeof ST.faults[0]); f++)
        if (ST.faults[f].live && !strcmp(ST.faults[f].name, fn) && ST.faults[f].skip-- == 0) {
            ST.faults[f].live = 0;
            *r = (CUresult)ST.faults[f].result;
            return 1;
        }
    if (need_init && !ST.initialized) {
        *r = CUDA_ERROR_NOT_INITIALIZED;
        return 1;
    }
    return 0;
}

void stub_join(uint32_t *into, const uint32_t *from)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (from[i] > into[i])
            into[i] = from[i];
}

CUdeviceptr stub_alloc_va(size_t size, size_t align)
{
    if (align < stub_gran())
        align = stub_gran();
    CUdeviceptr va = (ST.next_va + align - 1) / align * align;
    ST.next_va = va + size + stub_gran(); /* a gap: ranges never touch */
    return va;
}

char *stub_backing(size_t size)
{
    void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int stub_dev_ok(int d) { return d >= 0 && d < ST.cfg.n_devices; }

/* ---- device memory: translation, access rights, races ---- */

/* The mapping or block holding p: host memory at p, bytes left in it, who
 * may touch it. 0 when p is not device memory. */
static int stub_seg_at(CUdeviceptr p, char **host, size_t *left, unsigned *access)
{
    for (struct map *m = ST.maps; m; m = m->next)
        if (p >= m->va && p < m->va + m->size) {
            *host = m->p->mem + (p - m->va);
            *left = m->va + m->size - p;
            *access = m->access;
            return 1;
        }
    for (struct block *b = ST.blocks; b; b = b->next)
        if (p >= b->va && p < b->va + b->size) {
            *host = b->mem + (p - b->va);
            *left = b->va + b->size - p;
            unsigned a = 1u << b->dev;
            for (int i = 0; i < ST.cfg.n_devices; i++)
                if (ST.peer_on[i][b->dev])
                    a |= 1u << i;
            *access = a;
            return 1;
        }
    return 0;
}

/* Moves n bytes between [p, p + n) and host memory (or fills it), as device
 * `who` would; checks the whole range first. */
CUresult stub_dev_move(CUdeviceptr p, size_t n, int who, int mode, void *host, uint32_t word,
                       const char *op)
{
    for (int pass = 0; pass < 2; pass++) {
        size_t done = 0;
        while (done < n) {
            char *h;
            size_t left;
            unsigned access;
            if (!stub_seg_at(p + done, &h, &left, &access)) {
                stub_violation("%s: %#llx is not mapped device memory", op,
                               (unsigned long long)(p + done));
                return CUDA_ERROR_INVALID_VALUE;
            }
            if (!(access & (1u << who))) {
                stub_violation("%s: GPU %d may not access %#llx (no cuMemSetAccess for it)", op,
                               who, (unsigned long long)(p + done));
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
void stub_tick(struct CUstream_st *s)
{
    stub_join(s->vc, ST.host_vc);
    s->vc[s->slot] = ++ST.slot_epoch[s->slot];
}

/* Records an access by stream s, after checking it against earlier ones. */
void stub_touch(struct CUstream_st *s, CUdeviceptr lo, size_t n, int write, const char *op)
{
    CUdeviceptr hi = lo + n;
    for (int i = 0; i < MAX_ACCESS; i++) {
        struct access *a = &ST.acc[i];
        if (!a->live || a->slot == s->slot || a->hi <= lo || hi <= a->lo)
            continue;
        if ((write || a->write) && s->vc[a->slot] < a->epoch)
            stub_violation("race: %s on S%d %s [%#llx, %#llx), which %s on S%d %s, with no event "
                           "ordering the two",
                           op, s->id, write ? "writes" : "reads", (unsigned long long)lo,
                           (unsigned long long)hi, a->op, a->stream_id,
                           a->write ? "writes" : "reads");
    }
    struct access *a = &ST.acc[ST.acc_next++ % MAX_ACCESS];
    *a = (struct access){lo, hi, write, s->slot, s->id, 1, s->vc[s->slot], op};
}

/* Before [lo, hi) goes away: every access to it must be one the host waited
 * for; the accesses are forgotten. */
void stub_retire(CUdeviceptr lo, CUdeviceptr hi, const char *op)
{
    for (int i = 0; i < MAX_ACCESS; i++) {
        struct access *a = &ST.acc[i];
        if (!a->live || a->hi <= lo || hi <= a->lo)
            continue;
        if (ST.host_vc[a->slot] < a->epoch)
            stub_violation("%s of [%#llx, %#llx) while %s on S%d may still touch it", op,
                           (unsigned long long)lo, (unsigned long long)hi, a->op, a->stream_id);
        a->live = 0;
    }
}

/* The stream, if it is one; work on it needs its device's context vdev_stub_current. */
struct CUstream_st *stub_stream_of(CUstream h, const char *op)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (ST.streams[i] && ST.streams[i] == h) {
            if (!vdev_stub_current || vdev_stub_current->dev != h->dev)
                stub_violation("%s on S%d (GPU %d) while %s is vdev_stub_current", op, h->id,
                               h->dev, vdev_stub_current ? "another GPU's context" : "no context");
            return h;
        }
    stub_violation("%s on a stream that does not exist (%p)", op, (void *)h);
    return NULL;
}

struct CUevent_st *stub_event_of(CUevent h, const char *op)
{
    for (struct CUevent_st *e = ST.events; e; e = e->next)
        if (e == h)
            return e;
    stub_violation("%s of an event that does not exist (%p)", op, (void *)h);
    return NULL;
}

struct phys *stub_phys_of(CUmemGenericAllocationHandle h)
{
    for (struct phys *p = ST.physs; p; p = p->next)
        if (p->id == h)
            return p;
    return NULL;
}

void stub_phys_drop(struct phys *p)
{
    struct phys **l = &ST.physs;
    while (*l != p)
        l = &(*l)->next;
    *l = p->next;
    ST.used[p->dev] -= p->size;
    munmap(p->mem, p->size);
    free(p);
}

/* The mappings exactly covering [va, va + size), in order, contiguous;
 * 0 if the range is not whole mappings. */
int stub_whole_maps(CUdeviceptr va, size_t size)
{
    CUdeviceptr at = va;
    while (at < va + size) {
        struct map *m = ST.maps;
        while (m && m->va != at)
            m = m->next;
        if (!m || m->va + m->size > va + size)
            return 0;
        at += m->size;
    }
    return size > 0;
}

struct CUctx_st *stub_ctx_of(CUcontext c)
{
    for (int i = 0; i < MAX_DEV; i++)
        if (c == &ST.ctxs[i] && ST.ctxs[i].refs > 0)
            return &ST.ctxs[i];
    return NULL;
}

/* src (read as device rd) to dst (written as device wd), on stream s. */
CUresult stub_dev_copy(struct CUstream_st *s, CUdeviceptr dst, int wd, CUdeviceptr src, int rd,
                       size_t n, const char *op)
{
    char *tmp = malloc(n ? n : 1);
    if (!tmp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    stub_tick(s);
    CUresult r = stub_dev_move(src, n, rd, COPY_OUT, tmp, 0, op);
    if (r == CUDA_SUCCESS)
        r = stub_dev_move(dst, n, wd, COPY_IN, tmp, 0, op);
    free(tmp);
    if (r == CUDA_SUCCESS) {
        stub_touch(s, src, n, 0, op);
        stub_touch(s, dst, n, 1, op);
    }
    return r;
}

/* ---- control (stub_cuda.h) ---- */

EXPORT void vdev_stub_setup(const struct vdev_stub_config *c);
EXPORT void vdev_stub_setup(const struct vdev_stub_config *c)
{
    pthread_mutex_lock(&ST.lock);
    while (ST.maps) {
        struct map *m = ST.maps;
        ST.maps = m->next;
        free(m);
    }
    while (ST.physs) {
        struct phys *p = ST.physs;
        ST.physs = p->next;
        munmap(p->mem, p->size);
        free(p);
    }
    while (ST.resvs) {
        struct resv *r = ST.resvs;
        ST.resvs = r->next;
        free(r);
    }
    while (ST.blocks) {
        struct block *b = ST.blocks;
        ST.blocks = b->next;
        munmap(b->mem, b->size);
        free(b);
    }
    while (ST.hostbufs) {
        struct hostbuf *h = ST.hostbufs;
        ST.hostbufs = h->next;
        free(h->p);
        free(h);
    }
    while (ST.events) {
        struct CUevent_st *e = ST.events;
        ST.events = e->next;
        free(e);
    }
    for (int i = 0; i < MAX_STREAMS; i++) {
        free(ST.streams[i]);
        ST.streams[i] = NULL;
    }
    memset(&ST.cfg, 0, sizeof ST.cfg);
    if (c)
        ST.cfg = *c;
    if (ST.cfg.n_devices > MAX_DEV)
        ST.cfg.n_devices = MAX_DEV;
    ST.initialized = 0;
    /* Primary contexts outlive a setup, as they outlive everything in a
     * process: retains held across it (the plugin keeps one per GPU for
     * good) stay valid. */
    memset(ST.used, 0, sizeof ST.used);
    for (int d = 0; d < MAX_DEV; d++)
        if (ST.ctxs[d].refs > 0 && d < ST.cfg.n_devices)
            ST.used[d] = ST.cfg.context_bytes;
    ST.n_made = 0;
    memset(ST.peer_on, 0, sizeof ST.peer_on);
    memset(ST.host_vc, 0, sizeof ST.host_vc);
    memset(ST.acc, 0, sizeof ST.acc);
    memset(ST.callc, 0, sizeof ST.callc);
    memset(ST.faults, 0, sizeof ST.faults);
    ST.n_viol = 0;
    ST.trace_n = 0;
    for (int d = 0; d < MAX_DEV; d++)
        ST.last_stream[d] = -1;
    pthread_mutex_unlock(&ST.lock);
}

EXPORT void vdev_stub_fail(const char *fn, int nth, int result);
EXPORT void vdev_stub_fail(const char *fn, int nth, int result)
{
    pthread_mutex_lock(&ST.lock);
    for (int f = 0; f < (int)(sizeof ST.faults / sizeof ST.faults[0]); f++)
        if (!ST.faults[f].live) {
            snprintf(ST.faults[f].name, sizeof ST.faults[f].name, "%s", fn);
            ST.faults[f].skip = nth;
            ST.faults[f].result = result;
            ST.faults[f].live = 1;
            break;
        }
    pthread_mutex_unlock(&ST.lock);
}

EXPORT void vdev_stub_stats(int dev, struct vdev_stub_stats *out);
EXPORT void vdev_stub_stats(int dev, struct vdev_stub_stats *out)
{
    pthread_mutex_lock(&ST.lock);
    memset(out, 0, sizeof *out);
    for (struct resv *r = ST.resvs; r; r = r->next)
        out->reservations++;
    for (struct phys *p = ST.physs; p; p = p->next)
        out->handles++;
    for (struct map *m = ST.maps; m; m = m->next)
        out->mappings++;
    for (struct block *b = ST.blocks; b; b = b->next)
        out->blocks++;
    for (struct hostbuf *h = ST.hostbufs; h; h = h->next)
        out->host_allocs++;
    for (int i = 0; i < MAX_STREAMS; i++)
        out->streams += ST.streams[i] != NULL;
    for (struct CUevent_st *e = ST.events; e; e = e->next)
        out->events++;
    out->bytes_used = dev >= 0 && dev < MAX_DEV ? ST.used[dev] : 0;
    out->violations = ST.n_viol;
    pthread_mutex_unlock(&ST.lock);
}

EXPORT uint64_t vdev_stub_calls(const char *fn);
EXPORT uint64_t vdev_stub_calls(const char *fn)
{
    uint64_t n = 0;
    pthread_mutex_lock(&ST.lock);
    for (size_t i = 0; i < sizeof ST.callc / sizeof ST.callc[0] && ST.callc[i].name[0]; i++)
        if (!strcmp(ST.callc[i].name, fn))
            n = ST.callc[i].n;
    pthread_mutex_unlock(&ST.lock);
    return n;
}

EXPORT const char *vdev_stub_violation(int i);
EXPORT const char *vdev_stub_violation(int i)
{
    return i >= 0 && (uint64_t)i < ST.n_viol && i < MAX_VIOL ? ST.viol[i] : NULL;
}

EXPORT const char *vdev_stub_trace(char *buf, size_t cap);
EXPORT const char *vdev_stub_trace(char *buf, size_t cap)
{
    pthread_mutex_lock(&ST.lock);
    size_t at = 0;
    buf[0] = '\0';
    int first = ST.trace_n > TRACE_LINES ? ST.trace_n - TRACE_LINES : 0;
    for (int i = first; i < ST.trace_n && at + 1 < cap; i++) {
        int k = snprintf(buf + at, cap - at, "%s\n", ST.trace_buf[i % TRACE_LINES]);
        if (k < 0)
            break;
        at += (size_t)k;
    }
    pthread_mutex_unlock(&ST.lock);
    return buf;
}

EXPORT void vdev_stub_trace_mark(void);
EXPORT void vdev_stub_trace_mark(void)
{
    pthread_mutex_lock(&ST.lock);
    ST.trace_n = 0;
    pthread_mutex_unlock(&ST.lock);
}

EXPORT int vdev_stub_stream_priority(int id);
EXPORT int vdev_stub_stream_priority(int id)
{
    pthread_mutex_lock(&ST.lock);
    int p = -100;
    for (int i = 0; i < ST.n_made; i++)
        if (ST.made[i].id == id)
            p = ST.made[i].priority;
    pthread_mutex_unlock(&ST.lock);
    return p;
}

/* ---- for a stand-in library (stub_cuda.h) ---- */

static struct CUstream_st *lib_stream(void *hs)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (ST.streams[i] && ST.streams[i] == hs)
            return ST.streams[i];
    return NULL;
}

EXPORT int vdev_stub_lib_access(void *hs, unsigned long long p, size_t n, int write, void *host,
                                const char *op);
EXPORT int vdev_stub_lib_access(void *hs, unsigned long long p, size_t n, int write, void *host,
                                const char *op)
{
    pthread_mutex_lock(&ST.lock);
    struct CUstream_st *s = lib_stream(hs);
    CUresult r = CUDA_ERROR_INVALID_HANDLE;
    if (!s) {
        stub_violation("%s on a stream that does not exist (%p)", op, hs);
    } else {
        stub_tick(s);
        r = stub_dev_move((CUdeviceptr)p, n, s->dev, write ? COPY_IN : COPY_OUT, host, 0, op);
        if (r == CUDA_SUCCESS)
            stub_touch(s, (CUdeviceptr)p, n, write, op);
        stub_tracef("S%d %s %s %zu", s->id, op, write ? "write" : "read", n);
    }
    pthread_mutex_unlock(&ST.lock);
    return (int)r;
}

EXPORT void vdev_stub_lib_join(void *const *hs, int n);
EXPORT void vdev_stub_lib_join(void *const *hs, int n)
{
    pthread_mutex_lock(&ST.lock);
    uint32_t all[MAX_STREAMS] = {0};
    for (int i = 0; i < n; i++) {
        struct CUstream_st *s = lib_stream(hs[i]);
        if (s)
            stub_join(all, s->vc);
    }
    for (int i = 0; i < n; i++) {
        struct CUstream_st *s = lib_stream(hs[i]);
        if (s)
            stub_join(s->vc, all);
    }
    pthread_mutex_unlock(&ST.lock);
}

EXPORT int vdev_stub_lib_take(int dev, long long bytes);
EXPORT int vdev_stub_lib_take(int dev, long long bytes)
{
    pthread_mutex_lock(&ST.lock);
    int r = CUDA_SUCCESS;
    if (!stub_dev_ok(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    else if (bytes > 0 && ST.used[dev] + (uint64_t)bytes > ST.cfg.total_bytes)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (bytes < 0 && (uint64_t)-bytes > ST.used[dev])
        stub_violation("a library gives back %lld bytes of GPU %d, which holds %llu", -bytes, dev,
                       (unsigned long long)ST.used[dev]);
    else
        ST.used[dev] += (uint64_t)bytes;
    pthread_mutex_unlock(&ST.lock);
    return r;
}

EXPORT int vdev_stub_lib_stream_dev(void *hs);
EXPORT int vdev_stub_lib_stream_dev(void *hs)
{
    pthread_mutex_lock(&ST.lock);
    struct CUstream_st *s = lib_stream(hs);
    int d = s ? s->dev : -1;
    pthread_mutex_unlock(&ST.lock);
    return d;
}

EXPORT int vdev_stub_lib_current_dev(void);
EXPORT int vdev_stub_lib_current_dev(void)
{
    pthread_mutex_lock(&ST.lock);
    int d = vdev_stub_current && vdev_stub_current->refs > 0 ? vdev_stub_current->dev : -1;
    pthread_mutex_unlock(&ST.lock);
    return d;
}

EXPORT void vdev_stub_lib_violation(const char *msg);
EXPORT void vdev_stub_lib_violation(const char *msg)
{
    pthread_mutex_lock(&ST.lock);
    stub_violation("%s", msg);
    pthread_mutex_unlock(&ST.lock);
}

EXPORT int vdev_stub_stream_id(int dev);
EXPORT int vdev_stub_stream_id(int dev)
{
    pthread_mutex_lock(&ST.lock);
    int id = dev >= 0 && dev < MAX_DEV ? ST.last_stream[dev] : -1;
    pthread_mutex_unlock(&ST.lock);
    return id;
}
