/* stub_cuda_api.c — the stand-in driver's initialisation, errors, devices,
 * contexts, streams, events, and the work on streams (copies, fills, host
 * functions) with the ordering checks stub_cuda.c describes. */
#define _GNU_SOURCE
#include "stub_internal.h"

/* ---- initialisation, errors, devices, contexts ---- */

EXPORT CUresult CUDAAPI cuInit(unsigned int flags)
{
    ENTER_("cuInit", 0);
    if (flags != 0)
        OUT(CUDA_ERROR_INVALID_VALUE);
    if (ST.cfg.init_result == 0)
        ST.initialized = 1;
    OUT((CUresult)ST.cfg.init_result);
}

EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v)
{
    ENTER_("cuDriverGetVersion", 0);
    *v = ST.cfg.driver_version ? ST.cfg.driver_version : 13000;
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
    *n = ST.cfg.n_devices;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal)
{
    ENTER("cuDeviceGet");
    if (!stub_dev_ok(ordinal))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    *d = ordinal;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d)
{
    ENTER("cuDeviceGetName");
    if (!stub_dev_ok(d) || len <= 0)
        OUT(CUDA_ERROR_INVALID_VALUE);
    snprintf(name, (size_t)len, "Stand-in GPU");
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice d)
{
    ENTER("cuDeviceTotalMem");
    if (!stub_dev_ok(d))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    *bytes = ST.cfg.total_bytes;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    ENTER("cuDeviceGetAttribute");
    if (!stub_dev_ok(d))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = ST.cfg.cc ? ST.cfg.cc / 10 : 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = ST.cfg.cc ? ST.cfg.cc % 10 : 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = !ST.cfg.no_vmm; break;
    default: OUT(CUDA_ERROR_INVALID_VALUE);
    }
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer)
{
    ENTER("cuDeviceCanAccessPeer");
    if (!stub_dev_ok(d) || !stub_dev_ok(peer))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    *can = !ST.cfg.no_peer && d != peer;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
    ENTER("cuDevicePrimaryCtxRetain");
    if (!stub_dev_ok(d))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    ST.ctxs[d].dev = d;
    if (ST.ctxs[d].refs++ == 0) { /* made: its memory is taken */
        if (ST.used[d] + ST.cfg.context_bytes > ST.cfg.total_bytes) {
            ST.ctxs[d].refs--;
            OUT(CUDA_ERROR_OUT_OF_MEMORY);
        }
        ST.used[d] += ST.cfg.context_bytes;
    }
    *ctx = &ST.ctxs[d];
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d)
{
    ENTER("cuDevicePrimaryCtxRelease");
    if (!stub_dev_ok(d))
        OUT(CUDA_ERROR_INVALID_DEVICE);
    if (ST.ctxs[d].refs <= 0) {
        stub_violation("cuDevicePrimaryCtxRelease of GPU %d, which is not retained", d);
        OUT(CUDA_ERROR_INVALID_CONTEXT);
    }
    if (--ST.ctxs[d].refs == 0)
        ST.used[d] -= ST.used[d] < ST.cfg.context_bytes ? ST.used[d] : ST.cfg.context_bytes;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext c)
{
    ENTER("cuCtxSetCurrent");
    if (c && !stub_ctx_of(c)) {
        stub_violation("cuCtxSetCurrent of a context that is not retained");
        OUT(CUDA_ERROR_INVALID_CONTEXT);
    }
    vdev_stub_current = c;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c)
{
    ENTER("cuCtxGetCurrent");
    *c = vdev_stub_current;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    ENTER("cuCtxEnablePeerAccess");
    NEED_CTX();
    struct CUctx_st *p = stub_ctx_of(peer);
    if (!p || flags)
        OUT(CUDA_ERROR_INVALID_VALUE);
    if (ST.cfg.no_peer || p == vdev_stub_current)
        OUT(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    if (ST.peer_on[vdev_stub_current->dev][p->dev])
        OUT(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    ST.peer_on[vdev_stub_current->dev][p->dev] = 1;
    OUT(CUDA_SUCCESS);
}

/* ---- ST.streams and ST.events ---- */

static CUresult stream_create(CUstream *out, int priority)
{
    int slot = 0;
    while (slot < MAX_STREAMS && ST.streams[slot])
        slot++;
    struct CUstream_st *s = slot < MAX_STREAMS ? calloc(1, sizeof *s) : NULL;
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->slot = slot;
    s->id = ST.next_stream_id++;
    s->dev = vdev_stub_current->dev;
    memcpy(s->vc, ST.host_vc, sizeof s->vc);
    s->vc[slot] = ST.slot_epoch[slot];
    s->priority = priority;
    ST.streams[slot] = s;
    ST.last_stream[s->dev] = s->id;
    if (ST.n_made < (int)(sizeof ST.made / sizeof ST.made[0])) {
        ST.made[ST.n_made].id = s->id;
        ST.made[ST.n_made++].priority = priority;
    }
    *out = s;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *out, unsigned int flags)
{
    ENTER("cuStreamCreate");
    NEED_CTX();
    (void)flags;
    OUT(stream_create(out, 0));
}

EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *out, unsigned int flags, int priority)
{
    ENTER("cuStreamCreateWithPriority");
    NEED_CTX();
    if (priority > VDEV_STUB_PRIO_LEAST || priority < VDEV_STUB_PRIO_GREATEST)
        stub_violation("cuStreamCreateWithPriority with priority %d, outside [%d, %d] (the driver "
                       "would clamp it)",
                       priority, VDEV_STUB_PRIO_GREATEST, VDEV_STUB_PRIO_LEAST);
    (void)flags;
    OUT(stream_create(out, priority));
}

EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    ENTER("cuCtxGetStreamPriorityRange");
    NEED_CTX();
    *least = VDEV_STUB_PRIO_LEAST;
    *greatest = VDEV_STUB_PRIO_GREATEST;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream h)
{
    ENTER("cuStreamDestroy");
    struct CUstream_st *s = NULL;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (ST.streams[i] && ST.streams[i] == h)
            s = ST.streams[i];
    if (!s) {
        stub_violation("cuStreamDestroy of a stream that does not exist (%p)", (void *)h);
        OUT(CUDA_ERROR_INVALID_HANDLE);
    }
    ST.streams[s->slot] = NULL;
    free(s);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream h)
{
    ENTER("cuStreamSynchronize");
    struct CUstream_st *s = NULL;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (ST.streams[i] && ST.streams[i] == h)
            s = ST.streams[i];
    if (!s) {
        stub_violation("cuStreamSynchronize of a stream that does not exist (%p)", (void *)h);
        OUT(CUDA_ERROR_INVALID_HANDLE);
    }
    stub_join(ST.host_vc, s->vc);
    stub_tracef("S%d sync", s->id);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventCreate(CUevent *out, unsigned int flags)
{
    ENTER("cuEventCreate");
    NEED_CTX();
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    e->id = ST.next_event_id++;
    e->dev = vdev_stub_current->dev;
    e->next = ST.events;
    ST.events = e;
    *out = e;
    (void)flags;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventDestroy(CUevent h)
{
    ENTER("cuEventDestroy");
    struct CUevent_st **l = &ST.events;
    while (*l && *l != h)
        l = &(*l)->next;
    if (!*l) {
        stub_violation("cuEventDestroy of an event that does not exist (%p)", (void *)h);
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
    struct CUevent_st *e = stub_event_of(he, "cuEventRecord");
    struct CUstream_st *s = stub_stream_of(hs, "cuEventRecord");
    if (!e || !s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (e->dev != s->dev) {
        stub_violation("cuEventRecord of E%d (GPU %d) on S%d (GPU %d): not the same context", e->id,
                       e->dev, s->id, s->dev);
        OUT(CUDA_ERROR_INVALID_HANDLE);
    }
    stub_join(s->vc, ST.host_vc);
    memcpy(e->vc, s->vc, sizeof e->vc);
    e->recorded = 1;
    stub_tracef("S%d record E%d", s->id, e->id);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hs, CUevent he, unsigned int flags)
{
    ENTER("cuStreamWaitEvent");
    struct CUevent_st *e = stub_event_of(he, "cuStreamWaitEvent");
    struct CUstream_st *s = NULL;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (ST.streams[i] && ST.streams[i] == hs)
            s = ST.streams[i];
    if (!s)
        stub_violation("cuStreamWaitEvent on a stream that does not exist (%p)", (void *)hs);
    if (!e || !s || flags)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (e->recorded)
        stub_join(s->vc, e->vc);
    stub_tracef("S%d wait E%d", s->id, e->id);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventQuery(CUevent he)
{
    ENTER("cuEventQuery");
    struct CUevent_st *e = stub_event_of(he, "cuEventQuery");
    if (!e)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (e->recorded) /* work runs at once: it has passed, and the host knows it */
        stub_join(ST.host_vc, e->vc);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent he)
{
    ENTER("cuEventSynchronize");
    struct CUevent_st *e = stub_event_of(he, "cuEventSynchronize");
    if (!e)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (e->recorded)
        stub_join(ST.host_vc, e->vc);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream hs, CUhostFn fn, void *data)
{
    ENTER("cuLaunchHostFunc");
    struct CUstream_st *s = stub_stream_of(hs, "cuLaunchHostFunc");
    if (!s || !fn)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    stub_tick(s);
    stub_tracef("S%d host-fn", s->id);
    pthread_mutex_unlock(&ST.lock); /* it may take the caller's locks; it may not call CUDA */
    fn(data);
    return CUDA_SUCCESS;
}

/* ---- work on ST.streams that touches device memory ---- */

EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream hs)
{
    ENTER("cuMemcpyHtoDAsync");
    struct CUstream_st *s = stub_stream_of(hs, "cuMemcpyHtoDAsync");
    if (!s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    stub_tick(s);
    CUresult r =
        stub_dev_move(dst, n, s->dev, COPY_IN, (void *)(uintptr_t)src, 0, "cuMemcpyHtoDAsync");
    if (r == CUDA_SUCCESS)
        stub_touch(s, dst, n, 1, "cuMemcpyHtoDAsync");
    stub_tracef("S%d h2d %zu", s->id, n);
    OUT(r);
}

EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream hs)
{
    ENTER("cuMemcpyDtoHAsync");
    struct CUstream_st *s = stub_stream_of(hs, "cuMemcpyDtoHAsync");
    if (!s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    stub_tick(s);
    CUresult r = stub_dev_move(src, n, s->dev, COPY_OUT, dst, 0, "cuMemcpyDtoHAsync");
    if (r == CUDA_SUCCESS)
        stub_touch(s, src, n, 0, "cuMemcpyDtoHAsync");
    stub_tracef("S%d d2h %zu", s->id, n);
    OUT(r);
}

EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs)
{
    ENTER("cuMemcpyDtoDAsync");
    struct CUstream_st *s = stub_stream_of(hs, "cuMemcpyDtoDAsync");
    if (!s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    CUresult r = stub_dev_copy(s, dst, s->dev, src, s->dev, n, "cuMemcpyDtoDAsync");
    stub_tracef("S%d copy %zu", s->id, n);
    OUT(r);
}

EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                          CUcontext sctx, size_t n, CUstream hs)
{
    ENTER("cuMemcpyPeerAsync");
    struct CUstream_st *s = stub_stream_of(hs, "cuMemcpyPeerAsync");
    struct CUctx_st *dc = stub_ctx_of(dctx), *sc = stub_ctx_of(sctx);
    if (!s || !dc || !sc)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    CUresult r = stub_dev_copy(s, dst, dc->dev, src, sc->dev, n, "cuMemcpyPeerAsync");
    stub_tracef("S%d copy-peer %zu", s->id, n);
    OUT(r);
}

EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n_words,
                                         CUstream hs)
{
    ENTER("cuMemsetD32Async");
    struct CUstream_st *s = stub_stream_of(hs, "cuMemsetD32Async");
    if (!s)
        OUT(CUDA_ERROR_INVALID_HANDLE);
    if (dst % 4) {
        stub_violation("cuMemsetD32Async at %#llx: not 4-byte aligned", (unsigned long long)dst);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    stub_tick(s);
    CUresult r = stub_dev_move(dst, n_words * 4, s->dev, FILL32, NULL, value, "cuMemsetD32Async");
    if (r == CUDA_SUCCESS)
        stub_touch(s, dst, n_words * 4, 1, "cuMemsetD32Async");
    stub_tracef("S%d memset %zu", s->id, n_words * 4);
    OUT(r);
}
