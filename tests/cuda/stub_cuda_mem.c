/* stub_cuda_mem.c — the stand-in driver's memory: cuMemAlloc blocks, pinned
 * host buffers, and the virtual memory management calls with the rules
 * stub_cuda.c describes. */
#define _GNU_SOURCE
#include "stub_internal.h"

/* ---- memory: plain allocations and pinned host memory ---- */

EXPORT CUresult CUDAAPI cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    ENTER("cuMemGetInfo");
    NEED_CTX();
    *total = ST.cfg.total_bytes;
    *free_bytes = ST.cfg.total_bytes - ST.used[vdev_stub_current->dev];
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
    ENTER("cuMemAlloc");
    NEED_CTX();
    int d = vdev_stub_current->dev;
    if (!bytes)
        OUT(CUDA_ERROR_INVALID_VALUE);
    if (ST.used[d] + bytes > ST.cfg.total_bytes)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    struct block *b = calloc(1, sizeof *b);
    char *mem = stub_backing(bytes);
    if (!b || !mem) {
        free(b);
        if (mem)
            munmap(mem, bytes);
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    }
    b->va = stub_alloc_va(bytes, 0);
    b->size = bytes;
    b->mem = mem;
    b->dev = d;
    b->next = ST.blocks;
    ST.blocks = b;
    ST.used[d] += bytes;
    *p = b->va;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
    ENTER("cuMemFree");
    struct block **l = &ST.blocks;
    while (*l && (*l)->va != p)
        l = &(*l)->next;
    if (!*l) {
        stub_violation("cuMemFree of %#llx, which cuMemAlloc did not return",
                       (unsigned long long)p);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    struct block *b = *l;
    stub_retire(b->va, b->va + b->size, "cuMemFree");
    *l = b->next;
    ST.used[b->dev] -= b->size;
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
    h->next = ST.hostbufs;
    ST.hostbufs = h;
    *pp = p;
    (void)flags;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
    ENTER("cuMemFreeHost");
    struct hostbuf **l = &ST.hostbufs;
    while (*l && (*l)->p != p)
        l = &(*l)->next;
    if (!*l) {
        stub_violation("cuMemFreeHost of %p, which cuMemHostAlloc did not return", p);
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
    if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !stub_dev_ok(prop->location.id))
        OUT(CUDA_ERROR_INVALID_VALUE);
    *g = stub_gran();
    (void)option;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t alignment,
                                            CUdeviceptr addr, unsigned long long flags)
{
    ENTER("cuMemAddressReserve");
    if (!size || size % stub_gran() || (alignment & (alignment - 1)) || flags) {
        stub_violation("cuMemAddressReserve of %zu bytes (alignment %zu): not a multiple of the "
                       "granularity %llu",
                       size, alignment, (unsigned long long)stub_gran());
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    struct resv *r = calloc(1, sizeof *r);
    if (!r)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    r->base = stub_alloc_va(size, alignment);
    r->size = size;
    r->next = ST.resvs;
    ST.resvs = r;
    *p = r->base;
    (void)addr;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr p, size_t size)
{
    ENTER("cuMemAddressFree");
    struct resv **l = &ST.resvs;
    while (*l && !((*l)->base == p && (*l)->size == size))
        l = &(*l)->next;
    if (!*l) {
        stub_violation("cuMemAddressFree(%#llx, %zu): not a reserved range", (unsigned long long)p,
                       size);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    for (struct map *m = ST.maps; m; m = m->next)
        if (m->va >= p && m->va < p + size) {
            stub_violation("cuMemAddressFree of [%#llx, %#llx) while %#llx is still mapped",
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
    if (!size || size % stub_gran()) {
        stub_violation("cuMemCreate of %zu bytes: not a multiple of the granularity %llu", size,
                       (unsigned long long)stub_gran());
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !stub_dev_ok(prop->location.id) ||
        flags)
        OUT(CUDA_ERROR_INVALID_VALUE);
    int d = prop->location.id;
    if (ST.used[d] + size > ST.cfg.total_bytes)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    struct phys *p = calloc(1, sizeof *p);
    char *mem = stub_backing(size);
    if (!p || !mem) {
        free(p);
        if (mem)
            munmap(mem, size);
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    }
    p->id = ST.next_handle++;
    p->dev = d;
    p->size = size;
    p->mem = mem;
    p->next = ST.physs;
    ST.physs = p;
    ST.used[d] += size;
    *h = p->id;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h)
{
    ENTER("cuMemRelease");
    struct phys *p = stub_phys_of(h);
    if (!p || p->released) {
        stub_violation("cuMemRelease of handle %llu, %s", (unsigned long long)h,
                       p ? "released already" : "which does not exist");
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    p->released = 1;
    if (!p->maps)
        stub_phys_drop(p);
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr va, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle h, unsigned long long flags)
{
    ENTER("cuMemMap");
    struct phys *p = stub_phys_of(h);
    if (!p || p->released) {
        stub_violation("cuMemMap of handle %llu, %s", (unsigned long long)h,
                       p ? "released already" : "which does not exist");
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    if (offset || flags || !size || size % stub_gran() || va % stub_gran() || size > p->size) {
        stub_violation("cuMemMap(%#llx, %zu, offset %zu) of a %zu-byte handle: not whole granules "
                       "from offset 0",
                       (unsigned long long)va, size, offset, p->size);
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    struct resv *r = ST.resvs;
    while (r && !(va >= r->base && va + size <= r->base + r->size))
        r = r->next;
    if (!r) {
        stub_violation("cuMemMap of [%#llx, %#llx), outside every reserved range",
                       (unsigned long long)va, (unsigned long long)(va + size));
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    for (struct map *m = ST.maps; m; m = m->next)
        if (m->va < va + size && va < m->va + m->size) {
            stub_violation("cuMemMap of [%#llx, %#llx) over an existing mapping",
                           (unsigned long long)va, (unsigned long long)(va + size));
            OUT(CUDA_ERROR_INVALID_VALUE);
        }
    struct map *m = calloc(1, sizeof *m);
    if (!m)
        OUT(CUDA_ERROR_OUT_OF_MEMORY);
    m->va = va;
    m->size = size;
    m->p = p;
    m->next = ST.maps;
    ST.maps = m;
    p->maps++;
    OUT(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc,
                                       size_t count)
{
    ENTER("cuMemSetAccess");
    if (!stub_whole_maps(va, size)) {
        stub_violation("cuMemSetAccess of [%#llx, %#llx), which is not whole mappings",
                       (unsigned long long)va, (unsigned long long)(va + size));
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    if (!count)
        OUT(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++)
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            !stub_dev_ok(desc[i].location.id))
            OUT(CUDA_ERROR_INVALID_VALUE);
    for (struct map *m = ST.maps; m; m = m->next)
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
    if (!stub_whole_maps(va, size)) {
        stub_violation("cuMemUnmap of [%#llx, %#llx), which is not whole mappings",
                       (unsigned long long)va, (unsigned long long)(va + size));
        OUT(CUDA_ERROR_INVALID_VALUE);
    }
    stub_retire(va, va + size, "cuMemUnmap");
    struct map **l = &ST.maps;
    while (*l) {
        struct map *m = *l;
        if (m->va >= va && m->va < va + size) {
            *l = m->next;
            if (--m->p->maps == 0 && m->p->released)
                stub_phys_drop(m->p);
            free(m);
        } else {
            l = &m->next;
        }
    }
    OUT(CUDA_SUCCESS);
}
