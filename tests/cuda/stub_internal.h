/* stub_internal.h — what the files of the stand-in driver share (stub_cuda.c:
 * state, bookkeeping, the rules and the control functions; stub_cuda_mem.c:
 * memory and virtual memory management; stub_cuda_api.c: initialisation,
 * devices, contexts, streams, events and the work on streams). See
 * stub_cuda.c for what the stand-in does. Hidden: only the driver's names and
 * stub_cuda.h's are exported. */
#ifndef VDEV_STUB_INTERNAL_H
#define VDEV_STUB_INTERNAL_H

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
#define MAX_STREAMS 64  /* width of the vector clocks */
#define MAX_ACCESS 4096 /* accesses remembered for race checks */
#define MAX_VIOL 16
#define TRACE_LINES 512
#define TRACE_WIDTH 96

struct CUctx_st {
    int dev;
    int refs;
};

struct CUstream_st {
    int slot, id, dev, priority;
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

/* Everything the stand-in knows, under one lock. */
struct stub_state {
    pthread_mutex_t lock;
    struct vdev_stub_config cfg;
    int initialized;
    struct CUctx_st ctxs[MAX_DEV];
    uint64_t used[MAX_DEV];
    int peer_on[MAX_DEV][MAX_DEV]; /* [a][b]: a may access b's cuMemAlloc blocks */
    struct phys *physs;
    struct resv *resvs;
    struct map *maps;
    struct block *blocks;
    struct hostbuf *hostbufs;
    struct CUevent_st *events;
    CUdeviceptr next_va;
    unsigned long long next_handle;
    struct CUstream_st *streams[MAX_STREAMS];
    uint32_t slot_epoch[MAX_STREAMS];
    int next_stream_id, next_event_id, last_stream[MAX_DEV];
    struct {
        int id, priority;
    } made[256];            /* priority of each stream made since setup (by id) */
    int n_made;
    uint32_t host_vc[MAX_STREAMS];
    struct access acc[MAX_ACCESS];
    int acc_next;
    uint64_t n_viol;
    char viol[MAX_VIOL][320];
    char trace_buf[TRACE_LINES][TRACE_WIDTH];
    int trace_n;
    struct {
        char name[48];
        uint64_t n;
    } callc[96];
    struct {
        char name[48];
        int skip, result, live;
    } faults[16];
};
extern struct stub_state vdev_stub_st;
#define ST vdev_stub_st /* the one instance (stub_cuda.c) */
extern _Thread_local struct CUctx_st *vdev_stub_current;

/* ---- helpers (stub_cuda.c), all with the lock held ---- */

uint64_t stub_gran(void);
void stub_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void stub_tracef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Counts the call; 1 when a fault (or a missing cuInit) makes it return *r now. */
int stub_enter(const char *fn, int need_init, CUresult *r);
void stub_join(uint32_t *into, const uint32_t *from);
CUdeviceptr stub_alloc_va(size_t size, size_t align);
/* Host memory for a device allocation (anonymous, free until touched). */
char *stub_backing(size_t size);
int stub_dev_ok(int d);
enum { COPY_IN, COPY_OUT, FILL32 };
/* Moves n bytes between [p, p + n) and host memory (or fills it with word),
 * as device `who` would; checks the whole range first. */
CUresult stub_dev_move(CUdeviceptr p, size_t n, int who, int mode, void *host, uint32_t word,
                       const char *op);
/* src (read as device rd) to dst (written as device wd), on stream s. */
CUresult stub_dev_copy(struct CUstream_st *s, CUdeviceptr dst, int wd, CUdeviceptr src, int rd,
                       size_t n, const char *op);
/* A stream takes the host's clock and ticks: the start of a piece of work. */
void stub_tick(struct CUstream_st *s);
/* Records an access by stream s, after checking it against earlier ones. */
void stub_touch(struct CUstream_st *s, CUdeviceptr lo, size_t n, int write, const char *op);
/* Before [lo, hi) goes away: every access to it must be one the host waited
 * for; the accesses are forgotten. */
void stub_retire(CUdeviceptr lo, CUdeviceptr hi, const char *op);
struct CUstream_st *stub_stream_of(CUstream h, const char *op);
struct CUevent_st *stub_event_of(CUevent h, const char *op);
struct CUctx_st *stub_ctx_of(CUcontext c);
struct phys *stub_phys_of(CUmemGenericAllocationHandle h);
void stub_phys_drop(struct phys *p);
/* Whether [va, va + size) is exactly whole mappings, contiguous. */
int stub_whole_maps(CUdeviceptr va, size_t size);

#define ENTER_(name, need_init)                                                                    \
    CUresult r_;                                                                                   \
    pthread_mutex_lock(&ST.lock);                                                                  \
    if (stub_enter(name, need_init, &r_)) {                                                        \
        pthread_mutex_unlock(&ST.lock);                                                            \
        return r_;                                                                                 \
    }
#define ENTER(name) ENTER_(name, 1)
#define OUT(x)                                                                                     \
    do {                                                                                           \
        r_ = (x);                                                                                  \
        pthread_mutex_unlock(&ST.lock);                                                            \
        return r_;                                                                                 \
    } while (0)
#define NEED_CTX()                                                                                 \
    do {                                                                                           \
        if (!vdev_stub_current)                                                                    \
            OUT(CUDA_ERROR_INVALID_CONTEXT);                                                       \
    } while (0)

#endif /* VDEV_STUB_INTERNAL_H */
