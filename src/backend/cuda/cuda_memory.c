/* cuda_memory.c — the CUDA plugin's memory regions, through the driver's
 * virtual memory management (VMM).
 *
 * reserve() reserves a virtual address range as large as the card
 * (cuMemAddressReserve; the backend does not learn the logical device's
 * limit, the card's size bounds every limit, and address space costs
 * nothing) and maps physical memory for the requested bytes into its start
 * (cuMemCreate + cuMemMap + cuMemSetAccess, rounded up to the allocation
 * granularity). extend() maps more physical chunks right after the mapped
 * part, so a growing logical device stays one contiguous range, exactly what
 * the allocator's in-place growth wants; a preallocated device is the same
 * with one chunk. release() waits for the stream it is called for (the
 * logical device's own, the only one that still uses the region's blocks:
 * other streams' reads were waited for before those blocks were freed),
 * then unmaps and releases every chunk and frees the address range. A GPU
 * without VMM support falls back to cuMemAlloc and a table without extend
 * (the allocator then grows by adding regions).
 *
 * Collectives. An NCCL kernel queued on a GPU spins until its peers' kernels
 * run; a driver call that maps or unmaps memory on that GPU while it spins
 * may wait behind it. So before any map or unmap on a GPU, the collectives
 * queued on it are waited for: every stream of the GPU that ran one since
 * the last wait is on the GPU's list (coll_streams), each with an event
 * after its own last collective (coll_ev: one per stream, so a collective
 * on one stream is never hidden by a later one on another); every rank of a
 * collective has queued its part before any rank returns from the call
 * (src/coll/nccl.c), so the wait ends.
 *
 * Every failure leaves things as they were: a chunk that was created but
 * could not be mapped, or mapped but not made accessible, is undone before
 * the error returns. */
#define _GNU_SOURCE
#include "backend/cuda/cuda_internal.h"

#include <string.h>

static size_t round_up(size_t x, size_t g) { return (x + g - 1) / g * g; }

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
            return vdev_cu_fail(VDEV_ERR_OOM, "CUDA GPU %d: out of host memory", d->index);
        r->chunks = nc;
        r->cap_chunks = cap;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)d->dev;
    CUmemGenericAllocationHandle h;
    CUresult res = vdev_cu.cuMemCreate(&h, bytes, &prop, 0);
    if (res != CUDA_SUCCESS) {
        enum vdev_status code = res == CUDA_ERROR_OUT_OF_MEMORY ? VDEV_ERR_OOM : VDEV_ERR_BACKEND;
        return vdev_cu_fail(
            code, "CUDA GPU %d (%s): cannot allocate %s of device memory: cuMemCreate: %s",
            d->index, d->name, vdev_cu_fmt_bytes(bytes, b1, sizeof b1),
            vdev_cu_errstr(res, e, sizeof e));
    }
    CUdeviceptr at = r->base + r->mapped;
    res = vdev_cu.cuMemMap(at, bytes, 0, h, 0);
    if (res != CUDA_SUCCESS) {
        vdev_cu.cuMemRelease(h);
        return vdev_cu_fail_call(res, d->index, "cuMemMap");
    }
    res = vdev_cu.cuMemSetAccess(at, bytes, d->access, (size_t)d->n_access);
    if (res != CUDA_SUCCESS) {
        vdev_cu.cuMemUnmap(at, bytes);
        vdev_cu.cuMemRelease(h);
        return vdev_cu_fail_call(res, d->index, "cuMemSetAccess");
    }
    r->chunks[r->n_chunks].h = h;
    r->chunks[r->n_chunks].bytes = bytes;
    r->n_chunks++;
    r->mapped = upto;
    return VDEV_OK;
}

void vdev_cu_region_free(struct cu_dev *d, struct cu_region *r)
{
    if (!r->vmm) {
        vdev_cu.cuMemFree(r->base);
    } else {
        size_t off = 0;
        for (int i = 0; i < r->n_chunks; i++) {
            vdev_cu.cuMemUnmap(r->base + off, r->chunks[i].bytes);
            vdev_cu.cuMemRelease(r->chunks[i].h);
            off += r->chunks[i].bytes;
        }
        vdev_cu.cuMemAddressFree(r->base, r->va_bytes);
    }
    free(r->chunks);
}

void vdev_cu_coll_drain_locked(struct cu_dev *d)
{
    while (d->coll_streams) {
        struct cu_stream *s = d->coll_streams;
        d->coll_streams = s->coll_next;
        s->coll_next = NULL;
        if (s->coll_pending) /* an error: nothing left to wait for either */
            vdev_cu.cuEventSynchronize(s->coll_ev);
        s->coll_pending = 0;
    }
}

void vdev_cu_coll_forget_locked(struct cu_dev *d, struct cu_stream *s)
{
    for (struct cu_stream **p = &d->coll_streams; *p; p = &(*p)->coll_next)
        if (*p == s) {
            *p = s->coll_next;
            break;
        }
    s->coll_next = NULL;
    s->coll_pending = 0;
}

enum vdev_status vdev_cu_reserve(void *vctx, int dev, uint64_t bytes, void **base)
{
    struct cu_dev *d = vdev_cu_dev(vctx, dev);
    dev = d->index;
    CUresult res = vdev_cu_use_ctx(d);
    if (res != CUDA_SUCCESS)
        return vdev_cu_fail_call(res, dev, "cuCtxSetCurrent");
    struct cu_region *r = calloc(1, sizeof *r);
    if (!r)
        return vdev_cu_fail(VDEV_ERR_OOM, "CUDA GPU %d: out of host memory", dev);
    char e[160], b1[32];
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&d->mem_lock);
    vdev_cu_coll_drain_locked(d);
    if (!d->vmm) {
        res = vdev_cu.cuMemAlloc(&r->base, bytes);
        if (res != CUDA_SUCCESS)
            st = vdev_cu_fail(res == CUDA_ERROR_OUT_OF_MEMORY ? VDEV_ERR_OOM : VDEV_ERR_BACKEND,
                              "CUDA GPU %d (%s): cannot allocate %s: cuMemAlloc: %s", dev, d->name,
                              vdev_cu_fmt_bytes(bytes, b1, sizeof b1),
                              vdev_cu_errstr(res, e, sizeof e));
        r->mapped = bytes;
    } else {
        size_t want = round_up(bytes, d->gran);
        r->vmm = 1;
        r->va_bytes = round_up(bytes > d->total ? bytes : d->total, d->gran);
        res = vdev_cu.cuMemAddressReserve(&r->base, r->va_bytes, d->gran, 0, 0);
        if (res != CUDA_SUCCESS) {
            st = vdev_cu_fail(
                VDEV_ERR_BACKEND, "CUDA GPU %d: cannot reserve %s of address space: %s", dev,
                vdev_cu_fmt_bytes(r->va_bytes, b1, sizeof b1), vdev_cu_errstr(res, e, sizeof e));
        } else if ((st = map_more(d, r, want)) != VDEV_OK) {
            vdev_cu.cuMemAddressFree(r->base, r->va_bytes);
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

enum vdev_status vdev_cu_extend(void *vctx, int dev, void *base, uint64_t old_bytes,
                                uint64_t new_bytes)
{
    struct cu_dev *d = vdev_cu_dev(vctx, dev);
    dev = d->index;
    CUresult res = vdev_cu_use_ctx(d);
    if (res != CUDA_SUCCESS)
        return vdev_cu_fail_call(res, dev, "cuCtxSetCurrent");
    char b1[32], b2[32];
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&d->mem_lock);
    struct cu_region *r = find_region(d, (CUdeviceptr)(uintptr_t)base, NULL);
    if (!r || !r->vmm)
        st = vdev_cu_fail(VDEV_ERR_INTERNAL,
                          "CUDA GPU %d: extend of %p, which is not a growable region", dev, base);
    else if (new_bytes > r->va_bytes)
        st = vdev_cu_fail(VDEV_ERR_OOM,
                          "CUDA GPU %d: cannot grow a region to %s: its address range holds %s",
                          dev, vdev_cu_fmt_bytes(new_bytes, b1, sizeof b1),
                          vdev_cu_fmt_bytes(r->va_bytes, b2, sizeof b2));
    else if (new_bytes > r->mapped) {
        vdev_cu_coll_drain_locked(d);
        st = map_more(d, r, round_up(new_bytes, d->gran));
    }
    pthread_mutex_unlock(&d->mem_lock);
    (void)old_bytes;
    return st;
}

void vdev_cu_release(void *vctx, int dev, void *base, uint64_t bytes)
{
    struct cu_stream *s = vdev_cu_q(vctx, dev);
    struct cu_dev *d = s->d;
    dev = d->index;
    if (vdev_cu_use_ctx(d) != CUDA_SUCCESS)
        return;
    /* Work still queued may use the region: let it finish first. */
    vdev_cu.cuStreamSynchronize(s->s);
    pthread_mutex_lock(&d->mem_lock);
    vdev_cu_coll_drain_locked(d);
    struct cu_region **link = NULL;
    struct cu_region *r = find_region(d, (CUdeviceptr)(uintptr_t)base, &link);
    if (r) {
        *link = r->next;
        vdev_cu_region_free(d, r);
        free(r);
    }
    pthread_mutex_unlock(&d->mem_lock);
    if (!r)
        vdev_cu_fail(VDEV_ERR_INTERNAL, "CUDA GPU %d: release of %p (%llu bytes), not a region",
                     dev, base, (unsigned long long)bytes);
}
