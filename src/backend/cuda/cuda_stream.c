/* cuda_stream.c — the CUDA plugin's streams: how one is made, equipped
 * (scratch and cuBLAS workspace) and freed, and the work put on it: copies,
 * fills, host functions, events and kernel launches.
 *
 * Each index the backend's entries take is a stream (CU_STREAM_NON_BLOCKING):
 * a GPU's own one, or one opened for a logical device (cuda_plugin.c). Every
 * kernel, copy, fill and host function for it goes there, in order, so it is
 * a queue in the sense of backend.h; streams of one GPU run side by side.
 *
 * Copies. Host<->device copies go through two pinned staging buffers per
 * stream (cuMemHostAlloc, with an event each, made on first use) in chunks,
 * double-buffered so the memcpy of one chunk overlaps the DMA of the other,
 * and return when complete (backend.h). A device->device copy between two
 * streams, of one GPU or two, is ordered both ways, as PyTorch's copy engine
 * path does it: the destination's stream waits for an event recorded on the
 * source's stream (the copy reads what was written before it), and the
 * source's stream then waits for an event recorded on the destination's
 * stream after the copy (a later write to the source, queued on its own
 * stream, cannot land before the copy has read it). Between GPUs it runs
 * peer to peer where the driver allows it, else through the host.
 *
 * Fills run on the stream with cuMemsetD32Async: nothing crosses PCIe.
 *
 * Kernels. run_kernel hands the op to the nvcc side (cuda_kernels.cu), which
 * launches it on the stream; matmul goes to cuBLAS, which the nvcc side loads
 * on the first product that needs it (cuda_blas.cu). A per-stream lock is
 * held while an op is launched: the stream's cuBLAS handle and the scratch
 * buffer of multi-pass reductions are shared by every thread that submits to
 * the stream, and the passes of one reduction must be adjacent on it. */
#define _GNU_SOURCE
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

#include <string.h>

#define STAGE_BYTES (8u << 20)   /* each of the two pinned staging buffers per GPU */
#define BOUNCE_BYTES (64u << 20) /* host buffer of a d2d copy between GPUs without peer access */

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
SAME_FIELD(j);
_Static_assert(sizeof(struct vdev_cuda_args) == sizeof(struct vdev_kernel_args),
               "struct vdev_cuda_args differs in size from struct vdev_kernel_args");

/* ---- copies through the staging buffers ---- */

/* Makes the staging buffers and their events; what failed goes to *what. */
static CUresult stage_init(struct cu_stream *d, const char **what)
{
    for (int i = 0; i < 2; i++) {
        CUresult r;
        if (!d->stage[i] &&
            (r = vdev_cu.cuMemHostAlloc(&d->stage[i], STAGE_BYTES, CU_MEMHOSTALLOC_PORTABLE)) !=
                CUDA_SUCCESS) {
            d->stage[i] = NULL;
            *what = "cuMemHostAlloc (staging buffer)";
            return r;
        }
        if (!d->stage_ev[i] &&
            (r = vdev_cu.cuEventCreate(&d->stage_ev[i], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
            d->stage_ev[i] = NULL;
            *what = "cuEventCreate (staging buffer event)";
            return r;
        }
    }
    return CUDA_SUCCESS;
}

/* Host -> device through the staging buffers; complete on return. */
enum vdev_status vdev_cu_copy_h2d(void *vctx, int dev, void *dst, const void *src, uint64_t bytes)
{
    struct cu_stream *d = vdev_cu_q(vctx, dev);
    if (!bytes)
        return VDEV_OK;
    dev = d->d->index;
    CUresult r = vdev_cu_use_ctx(d->d);
    if (r != CUDA_SUCCESS)
        return vdev_cu_fail_call(r, dev, "cuCtxSetCurrent");
    pthread_mutex_lock(&d->copy_lock);
    const char *what = "";
    r = stage_init(d, &what);
    int used[2] = {0, 0}, k = 0;
    for (uint64_t off = 0; r == CUDA_SUCCESS && off < bytes; k++) {
        int b = k & 1;
        size_t n = bytes - off < STAGE_BYTES ? (size_t)(bytes - off) : STAGE_BYTES;
        if (used[b] && (r = vdev_cu.cuEventSynchronize(d->stage_ev[b])) != CUDA_SUCCESS) {
            what = "cuEventSynchronize";
            break;
        }
        memcpy(d->stage[b], (const char *)src + off, n);
        what = "cuMemcpyHtoDAsync";
        r = vdev_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst + off, d->stage[b], n, d->s);
        if (r == CUDA_SUCCESS) {
            what = "cuEventRecord";
            r = vdev_cu.cuEventRecord(d->stage_ev[b], d->s);
        }
        used[b] = 1;
        off += n;
    }
    /* The stream is in order: the last chunk done means all are. On failure
     * drain the stream so no copy still reads a staging buffer. */
    if (r == CUDA_SUCCESS) {
        what = "cuEventSynchronize";
        r = vdev_cu.cuEventSynchronize(d->stage_ev[(k - 1) & 1]);
    } else {
        vdev_cu.cuStreamSynchronize(d->s);
    }
    pthread_mutex_unlock(&d->copy_lock);
    return r == CUDA_SUCCESS ? VDEV_OK : vdev_cu_fail_call(r, dev, what);
}

/* Device -> host through the staging buffers: chunk k+1 is in flight while
 * chunk k is copied out. Ordered after the work queued before it. */
enum vdev_status vdev_cu_copy_d2h(void *vctx, int dev, void *dst, const void *src, uint64_t bytes)
{
    struct cu_stream *d = vdev_cu_q(vctx, dev);
    if (!bytes)
        return VDEV_OK;
    dev = d->d->index;
    CUresult r = vdev_cu_use_ctx(d->d);
    if (r != CUDA_SUCCESS)
        return vdev_cu_fail_call(r, dev, "cuCtxSetCurrent");
    pthread_mutex_lock(&d->copy_lock);
    const char *what = "";
    r = stage_init(d, &what);
    uint64_t n_chunks = (bytes + STAGE_BYTES - 1) / STAGE_BYTES;
    for (uint64_t k = 0; r == CUDA_SUCCESS && k <= n_chunks; k++) {
        /* issue chunk k (its buffer was emptied at step k-1), drain chunk k-1 */
        if (k < n_chunks) {
            uint64_t off = k * STAGE_BYTES;
            size_t n = bytes - off < STAGE_BYTES ? (size_t)(bytes - off) : STAGE_BYTES;
            int b = (int)(k & 1);
            what = "cuMemcpyDtoHAsync";
            r = vdev_cu.cuMemcpyDtoHAsync(d->stage[b], (CUdeviceptr)(uintptr_t)src + off, n,
                                          d->s);
            if (r == CUDA_SUCCESS) {
                what = "cuEventRecord";
                r = vdev_cu.cuEventRecord(d->stage_ev[b], d->s);
            }
        }
        if (r == CUDA_SUCCESS && k > 0) {
            uint64_t off = (k - 1) * STAGE_BYTES;
            size_t n = bytes - off < STAGE_BYTES ? (size_t)(bytes - off) : STAGE_BYTES;
            int b = (int)((k - 1) & 1);
            what = "cuEventSynchronize";
            r = vdev_cu.cuEventSynchronize(d->stage_ev[b]);
            if (r == CUDA_SUCCESS)
                memcpy((char *)dst + off, d->stage[b], n);
        }
    }
    if (r != CUDA_SUCCESS)
        vdev_cu.cuStreamSynchronize(d->s);
    pthread_mutex_unlock(&d->copy_lock);
    return r == CUDA_SUCCESS ? VDEV_OK : vdev_cu_fail_call(r, dev, what);
}

/* ---- events: pooled per GPU, since creating one costs a driver call ---- */

static void event_put(struct cu_event *e)
{
    struct cu_dev *d = e->d;
    pthread_mutex_lock(&d->ev_lock);
    e->next = d->ev_free;
    d->ev_free = e;
    pthread_mutex_unlock(&d->ev_lock);
}

/* Records an event on stream s (makes its GPU's context current). */
static enum vdev_status event_record_dev(struct cu_stream *s, struct cu_event **out)
{
    struct cu_dev *d = s->d;
    CUresult r = vdev_cu_use_ctx(d);
    if (r != CUDA_SUCCESS)
        return vdev_cu_fail_call(r, d->index, "cuCtxSetCurrent");
    pthread_mutex_lock(&d->ev_lock);
    struct cu_event *e = d->ev_free;
    if (e)
        d->ev_free = e->next;
    pthread_mutex_unlock(&d->ev_lock);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e)
            return vdev_cu_fail(VDEV_ERR_OOM, "out of host memory recording an event");
        e->d = d;
        if ((r = vdev_cu.cuEventCreate(&e->ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
            free(e);
            return vdev_cu_fail_call(r, d->index, "cuEventCreate");
        }
    }
    if ((r = vdev_cu.cuEventRecord(e->ev, s->s)) != CUDA_SUCCESS) {
        event_put(e);
        return vdev_cu_fail_call(r, d->index, "cuEventRecord");
    }
    e->s = s;
    *out = e;
    return VDEV_OK;
}

/* Makes `waiter`'s stream wait for work queued on `signaller`'s stream so
 * far (an event recorded now, back in the pool at once: a queued wait took
 * the event's state when it was queued). */
static enum vdev_status stream_follow(struct cu_stream *waiter, struct cu_stream *signaller)
{
    struct cu_event *e = NULL;
    enum vdev_status st = event_record_dev(signaller, &e);
    if (st != VDEV_OK)
        return st;
    CUresult r = vdev_cu_use_ctx(waiter->d);
    if (r == CUDA_SUCCESS)
        r = vdev_cu.cuStreamWaitEvent(waiter->s, e->ev, 0);
    event_put(e);
    return r == CUDA_SUCCESS ? VDEV_OK
                             : vdev_cu_fail_call(r, waiter->d->index, "cuStreamWaitEvent");
}

/* ---- device -> device ---- */

/* On the destination's stream, after the work queued on the source's stream
 * so far; unless lazy, later work on the source's stream follows the copy
 * (lazy: the runtime orders later writes to the source itself). Returns at
 * once, except through the host. */
static enum vdev_status copy_d2d(void *vctx, int dst_dev, void *dst, int src_dev, const void *src,
                                 uint64_t bytes, int lazy)
{
    struct cu_ctx *c = vctx;
    struct cu_stream *ds = vdev_cu_q(vctx, dst_dev), *ss = vdev_cu_q(vctx, src_dev);
    struct cu_dev *dd = ds->d, *sd = ss->d;
    CUdeviceptr dp = (CUdeviceptr)(uintptr_t)dst, sp = (CUdeviceptr)(uintptr_t)src;
    if (!bytes)
        return VDEV_OK;
    CUresult r;
    if (ds == ss) {
        if ((r = vdev_cu_use_ctx(dd)) == CUDA_SUCCESS)
            r = vdev_cu.cuMemcpyDtoDAsync(dp, sp, bytes, ds->s);
        return r == CUDA_SUCCESS ? VDEV_OK : vdev_cu_fail_call(r, dd->index, "cuMemcpyDtoDAsync");
    }
    if (dd == sd || c->peer[dd->index * c->n + sd->index]) {
        /* the copy reads what the source's stream wrote before it */
        enum vdev_status st = stream_follow(ds, ss);
        if (st != VDEV_OK)
            return st;
        const char *what = dd == sd ? "cuMemcpyDtoDAsync" : "cuMemcpyPeerAsync";
        r = dd == sd ? vdev_cu.cuMemcpyDtoDAsync(dp, sp, bytes, ds->s)
                     : vdev_cu.cuMemcpyPeerAsync(dp, dd->ctx, sp, sd->ctx, bytes, ds->s);
        if (r != CUDA_SUCCESS)
            return vdev_cu_fail_call(r, dd->index, what);
        if (lazy)
            return VDEV_OK;
        /* and the source's later writes wait for the copy to have read it */
        st = stream_follow(ss, ds);
        if (st != VDEV_OK && vdev_cu_use_ctx(dd) == CUDA_SUCCESS)
            vdev_cu.cuStreamSynchronize(ds->s); /* no hazard left behind */
        return st;
    }
    /* No peer access: through host memory, one bounce buffer at a time (the
     * device -> host half completes before it returns). */
    size_t cap = bytes < BOUNCE_BYTES ? (size_t)bytes : BOUNCE_BYTES;
    char *tmp = malloc(cap);
    if (!tmp)
        return vdev_cu_fail(VDEV_ERR_OOM, "out of host memory copying between GPUs %d and %d",
                            sd->index, dd->index);
    enum vdev_status st = VDEV_OK;
    for (uint64_t off = 0; st == VDEV_OK && off < bytes; off += cap) {
        size_t n = bytes - off < cap ? (size_t)(bytes - off) : cap;
        st = vdev_cu_copy_d2h(vctx, src_dev, tmp, (const char *)src + off, n);
        if (st == VDEV_OK)
            st = vdev_cu_copy_h2d(vctx, dst_dev, (char *)dst + off, tmp, n);
    }
    free(tmp);
    return st;
}

enum vdev_status vdev_cu_copy_d2d(void *vctx, int dst_dev, void *dst, int src_dev, const void *src,
                                  uint64_t bytes)
{
    return copy_d2d(vctx, dst_dev, dst, src_dev, src, bytes, 0);
}

enum vdev_status vdev_cu_copy_d2d_lazy(void *vctx, int dst_dev, void *dst, int src_dev,
                                       const void *src, uint64_t bytes, uint64_t after)
{
    (void)after; /* no stream positions here: after all the source's work so far */
    return copy_d2d(vctx, dst_dev, dst, src_dev, src, bytes, 1);
}

/* ---- fills ---- */

enum vdev_status vdev_cu_fill(void *vctx, int dev, void *dst, uint32_t value, uint64_t n_words)
{
    struct cu_stream *s = vdev_cu_q(vctx, dev);
    if (!n_words)
        return VDEV_OK;
    CUresult r = vdev_cu_use_ctx(s->d);
    if (r == CUDA_SUCCESS)
        r = vdev_cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)dst, value, (size_t)n_words, s->s);
    return r == CUDA_SUCCESS ? VDEV_OK : vdev_cu_fail_call(r, s->d->index, "cuMemsetD32Async");
}

/* ---- host functions and synchronisation ---- */

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

enum vdev_status vdev_cu_submit_host(void *vctx, int dev, vdev_host_fn fn, const void *arg,
                                     size_t arg_bytes)
{
    struct cu_stream *s = vdev_cu_q(vctx, dev);
    struct cu_dev *d = s->d;
    dev = d->index;
    if (arg_bytes > VDEV_HOST_ARG_MAX)
        return vdev_cu_fail(VDEV_ERR_INTERNAL,
                            "CUDA GPU %d: host function argument of %zu bytes exceeds %d", dev,
                            arg_bytes, VDEV_HOST_ARG_MAX);
    struct host_item *it = malloc(sizeof *it);
    if (!it)
        return vdev_cu_fail(VDEV_ERR_OOM, "out of host memory submitting host work to GPU %d", dev);
    it->fn = fn;
    it->bytes = arg_bytes;
    if (arg_bytes)
        memcpy(it->arg, arg, arg_bytes);
    CUresult r = vdev_cu_use_ctx(d);
    if (r == CUDA_SUCCESS)
        r = vdev_cu.cuLaunchHostFunc(s->s, host_trampoline, it);
    if (r != CUDA_SUCCESS) {
        free(it);
        return vdev_cu_fail_call(r, dev, "cuLaunchHostFunc");
    }
    return VDEV_OK;
}

enum vdev_status vdev_cu_synchronize(void *vctx, int dev)
{
    struct cu_stream *s = vdev_cu_q(vctx, dev);
    CUresult r = vdev_cu_use_ctx(s->d);
    if (r == CUDA_SUCCESS)
        r = vdev_cu.cuStreamSynchronize(s->s);
    return r == CUDA_SUCCESS ? VDEV_OK : vdev_cu_fail_call(r, s->d->index, "cuStreamSynchronize");
}

/* ---- events, as the backend table has them ---- */

enum vdev_status vdev_cu_event_record(void *vctx, int dev, void **event)
{
    struct cu_event *e = NULL;
    enum vdev_status st = event_record_dev(vdev_cu_q(vctx, dev), &e);
    if (st == VDEV_OK)
        *event = e;
    return st;
}

int vdev_cu_event_done(void *vctx, void *event)
{
    struct cu_event *e = event;
    if (vdev_cu_use_ctx(e->d) != CUDA_SUCCESS)
        return 1;
    CUresult r = vdev_cu.cuEventQuery(e->ev);
    /* An error is taken as "passed": waiting forever would not help. */
    return r != CUDA_ERROR_NOT_READY;
}

void vdev_cu_event_wait(void *vctx, void *event)
{
    struct cu_event *e = event;
    if (vdev_cu_use_ctx(e->d) == CUDA_SUCCESS)
        vdev_cu.cuEventSynchronize(e->ev);
}

enum vdev_status vdev_cu_stream_wait_event(void *vctx, int dev, void *event)
{
    struct cu_event *e = event;
    struct cu_stream *s = vdev_cu_q(vctx, dev);
    if (e->s == s)
        return VDEV_OK; /* one stream: already in order */
    CUresult r = vdev_cu_use_ctx(s->d);
    if (r == CUDA_SUCCESS)
        r = vdev_cu.cuStreamWaitEvent(s->s, e->ev, 0);
    return r == CUDA_SUCCESS ? VDEV_OK : vdev_cu_fail_call(r, s->d->index, "cuStreamWaitEvent");
}

void vdev_cu_event_drop(void *vctx, void *event) { event_put(event); }

void vdev_cu_events_destroy(struct cu_dev *d)
{
    while (d->ev_free) {
        struct cu_event *e = d->ev_free;
        d->ev_free = e->next;
        vdev_cu.cuEventDestroy(e->ev);
        free(e);
    }
}

/* ---- a stream's life: made, equipped, freed (cuda_plugin.c hands them out) ---- */

/* Gives back what a stream holds on its GPU: its cuBLAS handle, scratch
 * buffer and workspace (d's context current, the stream idle). */
void vdev_cu_stream_unequip(struct cu_stream *s)
{
    struct cu_dev *d = s->d;
    vdev_cuda_blas_destroy(s->cublas);
    s->cublas = NULL;
    uint64_t held = 0;
    if (s->scratch) {
        vdev_cu.cuMemFree(s->scratch);
        held += VDEV_CUDA_SCRATCH_BYTES;
    }
    if (s->workspace) {
        vdev_cu.cuMemFree(s->workspace);
        held += d->ws_bytes;
    }
    s->scratch = s->workspace = 0;
    pthread_mutex_lock(&d->mem_lock);
    d->streams_held -= held;
    pthread_mutex_unlock(&d->mem_lock);
}

int vdev_cu_stream_equip(struct cu_stream *s, uint64_t *taken, CUresult *r, const char **what)
{
    struct cu_dev *d = s->d;
    uint64_t got = 0;
    *r = CUDA_SUCCESS;
    *what = "cuMemAlloc";
    pthread_rwlock_rdlock(&d->measure_lock); /* not while NCCL's buffers are measured */
    if (!s->scratch) {
        if ((*r = vdev_cu.cuMemAlloc(&s->scratch, VDEV_CUDA_SCRATCH_BYTES)) != CUDA_SUCCESS)
            s->scratch = 0;
        else
            got += VDEV_CUDA_SCRATCH_BYTES;
    }
    if (*r == CUDA_SUCCESS && !s->workspace) {
        if ((*r = vdev_cu.cuMemAlloc(&s->workspace, d->ws_bytes)) != CUDA_SUCCESS)
            s->workspace = 0;
        else
            got += d->ws_bytes;
    }
    pthread_mutex_lock(&d->mem_lock);
    d->streams_held += got;
    pthread_mutex_unlock(&d->mem_lock);
    if (*r != CUDA_SUCCESS) {
        vdev_cu_stream_unequip(s); /* all or nothing */
        got = 0;
    }
    pthread_rwlock_unlock(&d->measure_lock);
    if (taken)
        *taken = got;
    return *r == CUDA_SUCCESS ? 0 : -1;
}

/* Waits for a stream and frees it and what it holds (d's context current). */
void vdev_cu_stream_free(struct cu_stream *s)
{
    if (!s)
        return;
    if (s->s)
        vdev_cu.cuStreamSynchronize(s->s);
    pthread_mutex_lock(&s->d->mem_lock);
    vdev_cu_coll_forget_locked(s->d, s); /* its collectives are done: waited for above */
    pthread_mutex_unlock(&s->d->mem_lock);
    if (s->coll_ev)
        vdev_cu.cuEventDestroy(s->coll_ev);
    vdev_cu_stream_unequip(s);
    for (int i = 0; i < 2; i++) {
        if (s->stage[i])
            vdev_cu.cuMemFreeHost(s->stage[i]);
        if (s->stage_ev[i])
            vdev_cu.cuEventDestroy(s->stage_ev[i]);
    }
    if (s->s)
        vdev_cu.cuStreamDestroy(s->s);
    pthread_mutex_destroy(&s->launch_lock);
    pthread_mutex_destroy(&s->copy_lock);
    free(s);
}

/* A stream on d (context current) with CUDA priority `prio`, equipped or
 * not; NULL on failure, *r and *what saying which call failed
 * (CUDA_ERROR_OUT_OF_MEMORY and "calloc" for host memory). */
struct cu_stream *vdev_cu_stream_make(struct cu_dev *d, int q, int prio, int equip, CUresult *r,
                                      const char **what)
{
    struct cu_stream *s = calloc(1, sizeof *s);
    if (!s) {
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        *what = "calloc";
        return NULL;
    }
    s->d = d;
    s->q = q;
    s->priority = prio;
    pthread_mutex_init(&s->launch_lock, NULL);
    pthread_mutex_init(&s->copy_lock, NULL);
    *what = "cuStreamCreateWithPriority";
    *r = vdev_cu.cuStreamCreateWithPriority(&s->s, CU_STREAM_NON_BLOCKING, prio);
    if (*r != CUDA_SUCCESS)
        s->s = NULL;
    else if (!equip || vdev_cu_stream_equip(s, NULL, r, what) == 0)
        return s;
    vdev_cu_stream_free(s); /* what was made, and nothing else */
    return NULL;
}

/* ---- kernels ---- */

enum vdev_status vdev_cu_run_kernel(void *vctx, int dev, const struct vdev_kernel_args *args)
{
    struct cu_stream *s = vdev_cu_q(vctx, dev);
    struct cu_dev *d = s->d;
    dev = d->index;
    struct vdev_cuda_args a;
    memcpy(&a, args, sizeof a); /* same layout: checked above */
    CUresult r = vdev_cu_use_ctx(d);
    if (r != CUDA_SUCCESS)
        return vdev_cu_fail_call(r, dev, "cuCtxSetCurrent");
    char msg[384] = "";
    pthread_mutex_lock(&s->launch_lock);
    const char *what;
    if (!s->scratch && vdev_cu_stream_equip(s, NULL, &r, &what) != 0) {
        pthread_mutex_unlock(&s->launch_lock);
        return vdev_cu_fail_call(r, dev, what);
    }
    struct vdev_cuda_launch_env env = {(void *)s->s,
                                       &s->cublas,
                                       (void *)(uintptr_t)s->scratch,
                                       d->n_sm,
                                       (void *)(uintptr_t)s->workspace,
                                       d->ws_bytes};
    pthread_rwlock_rdlock(&d->measure_lock); /* a first launch may load code, cuBLAS allocate */
    int rc = vdev_cuda_run_op(&a, &env, msg, sizeof msg);
    pthread_rwlock_unlock(&d->measure_lock);
    pthread_mutex_unlock(&s->launch_lock);
    if (rc == VDEV_CUDA_RC_OK)
        return VDEV_OK;
    enum vdev_status code = rc == VDEV_CUDA_RC_UNSUPPORTED ? VDEV_ERR_UNSUPPORTED
                            : rc == VDEV_CUDA_RC_OOM       ? VDEV_ERR_OOM
                                                           : VDEV_ERR_BACKEND;
    return vdev_cu_fail(code, "%s (GPU %d)", msg, dev);
}
