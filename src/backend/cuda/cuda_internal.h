/* cuda_internal.h — what the C files of the CUDA plugin share: the driver
 * functions resolved from libcuda.so.1 (cuda_plugin.c resolves them), the
 * state of the backend (one struct cu_dev per GPU, one struct cu_stream per
 * stream), and the error helpers that reach the core's vdev_error(). The
 * plugin is split by concern:
 *   cuda_plugin.c  loading the driver, devices, streams, life cycle, the table;
 *   cuda_memory.c  regions through the driver's virtual memory management;
 *   cuda_stream.c  copies, fills, host functions, events, kernel launches;
 *   cuda_nccl.c    collectives through NCCL, loaded at run time.
 * Nothing here is exported from libvdev-cuda.so (hidden visibility and a
 * version script that exports vdev_cuda_plugin_open alone). */
#ifndef VDEV_CUDA_INTERNAL_H
#define VDEV_CUDA_INTERNAL_H

#include "backend/backend.h"

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the driver API, resolved from libcuda.so.1 ---- */

/* Resolved first: enough to explain a failure. */
#define VDEV_CU_BASIC_FNS(X)                                                                       \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)

#define VDEV_CU_FNS(X)                                                                             \
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
    X(cuMemsetD32Async)                                                                            \
    X(cuStreamCreateWithPriority)                                                                  \
    X(cuCtxGetStreamPriorityRange)                                                                 \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamWaitEvent)                                                                           \
    X(cuEventCreate)                                                                               \
    X(cuEventRecord)                                                                               \
    X(cuEventQuery)                                                                                \
    X(cuEventSynchronize)                                                                          \
    X(cuEventDestroy)                                                                              \
    X(cuLaunchHostFunc)

struct vdev_cu_driver {
#define X(name) __typeof__(&name) name;
    VDEV_CU_BASIC_FNS(X)
    VDEV_CU_FNS(X)
#undef X
};
/* The functions, valid once the plugin has opened (cuda_plugin.c). */
extern struct vdev_cu_driver vdev_cu;

#define VDEV_CU_MAX_GPUS 64
#define VDEV_CU_MAX_QUEUES 256 /* streams: each GPU's own, then the opened ones */

/* ---- the backend's state ---- */

struct cu_chunk {
    CUmemGenericAllocationHandle h;
    size_t bytes;
};

/* A region handed to the allocator: an address range with physical chunks
 * mapped from its start (VMM), or one cuMemAlloc block. */
struct cu_region {
    CUdeviceptr base;
    size_t va_bytes; /* address space reserved (VMM) */
    size_t mapped;   /* bytes backed by physical memory from base */
    int vmm;
    struct cu_chunk *chunks;
    int n_chunks, cap_chunks;
    struct cu_region *next;
};

struct cu_dev;
struct cu_coll;

/* A stream of a GPU: the GPU's own one (index = the GPU's), or one opened
 * for a logical device (stream_open), each with what a kernel launch needs
 * of its own, so that streams of one GPU never share scratch memory. */
struct cu_stream {
    struct cu_dev *d;
    int q;                       /* its index: what the backend's entries take */
    CUstream s;
    int priority;                /* the CUDA stream priority it was made with */
    CUdeviceptr scratch;         /* VDEV_CUDA_SCRATCH_BYTES: partial sums of reductions */
    CUdeviceptr workspace;       /* cuBLAS's workspace (cublasSetWorkspace), d->ws_bytes */
    pthread_mutex_t launch_lock; /* the cuBLAS handle, scratch, multi-kernel ops */
    void *cublas;                /* made on the first product that needs it */
    pthread_mutex_t copy_lock;   /* the staging buffers of host copies (made on first use) */
    void *stage[2];
    CUevent stage_ev[2];
    /* Collectives (cuda_nccl.c), under its GPU's mem_lock: */
    CUevent coll_ev;              /* after the last collective queued on it (NULL: none yet) */
    int coll_pending;             /* coll_ev recorded and not yet waited for */
    struct cu_stream *coll_next;  /* in its GPU's coll_streams while coll_pending */
};

struct cu_event {
    CUevent ev;
    struct cu_dev *d;
    struct cu_stream *s;   /* where it was last recorded */
    struct cu_event *next; /* in the device's free list */
};

struct cu_dev {
    int index;
    CUdevice dev;
    CUcontext ctx;
    char name[96];
    uint64_t total;
    int cc_major, cc_minor, n_sm, vmm;
    size_t gran;                              /* physical allocation granularity (VMM) */
    size_t ws_bytes;                          /* cuBLAS workspace per stream */
    int prio_least, prio_greatest;            /* cuCtxGetStreamPriorityRange */
    CUmemAccessDesc access[VDEV_CU_MAX_GPUS]; /* this GPU and its peers: who may read regions */
    int n_access;

    pthread_mutex_t mem_lock; /* regions, held bytes, collectives in flight */
    struct cu_region *regions;
    uint64_t streams_held;    /* device memory of its streams (scratch, workspaces) */
    uint64_t coll_held;       /* device memory of NCCL communicators on it */
    int nccl_comms;           /* NCCL communicators with a rank on it (at most one) */
    struct cu_stream *coll_streams; /* its streams with a collective pending (coll_next) */

    pthread_mutex_t ev_lock; /* event free list */
    struct cu_event *ev_free;

    /* Taken for writing while coll_open measures what NCCL takes from the
     * card (the drop in cuMemGetInfo around the comms' making), for reading by
     * every other path that takes device memory outside the regions: a
     * stream's scratch and workspace (vdev_cu_stream_equip), and kernel
     * launches (the CUDA runtime loads a kernel's code at its first launch,
     * cuBLAS allocates at its handle's creation and first products). So the
     * measure counts NCCL's buffers only. Readers never wait for each other;
     * a waiting writer goes first. Taken before mem_lock, never after. */
    pthread_rwlock_t measure_lock;
};

struct cu_ctx {
    int n;
    struct cu_dev *devs;
    unsigned char *peer; /* peer[i * n + j]: GPU i can read GPU j's memory */
    pthread_mutex_t lock; /* free slots of qs, own_taken */
    /* 0..n-1: the GPUs' own streams, for the life of the backend; n..: the
     * opened ones. A slot changes only in stream_open and stream_close, which
     * the runtime calls while no other thread uses that stream. */
    struct cu_stream *qs[VDEV_CU_MAX_QUEUES];
    unsigned char *own_taken; /* n: the GPU's own stream is handed out */
    pthread_mutex_t coll_lock; /* colls */
    struct cu_coll *colls;     /* the NCCL communicators open (cuda_nccl.c) */
};

/* The stream of index q, and its GPU. */
static inline struct cu_stream *vdev_cu_q(void *vctx, int q)
{
    return ((struct cu_ctx *)vctx)->qs[q];
}
static inline struct cu_dev *vdev_cu_dev(void *vctx, int q) { return vdev_cu_q(vctx, q)->d; }

/* ---- errors (cuda_plugin.c) ---- */

/* "CUDA_ERROR_X: what it means", from the driver itself when it can say. */
const char *vdev_cu_errstr(CUresult r, char *buf, size_t cap);
/* Sets the caller's vdev error through the core's vdev_error (handed over at
 * open); returns code. */
enum vdev_status vdev_cu_fail(enum vdev_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "CUDA GPU <dev>: <what> failed: <CUDA_ERROR_X: ...>"; OOM for
 * CUDA_ERROR_OUT_OF_MEMORY, else VDEV_ERR_BACKEND. */
enum vdev_status vdev_cu_fail_call(CUresult r, int dev, const char *what);
/* Makes the GPU's primary context current on this thread (cheap when it is). */
CUresult vdev_cu_use_ctx(const struct cu_dev *d);
/* "1.50 GiB" */
char *vdev_cu_fmt_bytes(uint64_t b, char *buf, size_t cap);
/* Gives stream s its scratch buffer and cuBLAS workspace where it has none
 * (context current; the caller holds its launch lock or owns it alone, and
 * not the GPU's measure_lock: this takes it for reading).
 * 0, with *taken (may be NULL) the bytes taken now; -1 with *r and *what
 * saying which call failed, nothing taken. */
int vdev_cu_stream_equip(struct cu_stream *s, uint64_t *taken, CUresult *r, const char **what);
/* Gives back what stream s holds (cuBLAS handle, scratch, workspace; d's
 * context current, the stream idle). */
void vdev_cu_stream_unequip(struct cu_stream *s);
/* Waits for stream s and frees it and what it holds (context current). */
void vdev_cu_stream_free(struct cu_stream *s);
/* A stream on d (context current) with CUDA priority prio, equipped or not;
 * NULL on failure, *r and *what saying which call failed. */
struct cu_stream *vdev_cu_stream_make(struct cu_dev *d, int q, int prio, int equip, CUresult *r,
                                      const char **what);

/* ---- memory (cuda_memory.c) ---- */

enum vdev_status vdev_cu_reserve(void *vctx, int dev, uint64_t bytes, void **base);
enum vdev_status vdev_cu_extend(void *vctx, int dev, void *base, uint64_t old_bytes,
                                uint64_t new_bytes);
void vdev_cu_release(void *vctx, int dev, void *base, uint64_t bytes);
/* Unmaps and frees everything r holds (not r itself); at teardown. */
void vdev_cu_region_free(struct cu_dev *d, struct cu_region *r);

/* ---- streams (cuda_stream.c) ---- */

enum vdev_status vdev_cu_copy_h2d(void *vctx, int dev, void *dst, const void *src, uint64_t bytes);
enum vdev_status vdev_cu_copy_d2h(void *vctx, int dev, void *dst, const void *src, uint64_t bytes);
enum vdev_status vdev_cu_copy_d2d(void *vctx, int dst_dev, void *dst, int src_dev, const void *src,
                                  uint64_t bytes);
enum vdev_status vdev_cu_copy_d2d_lazy(void *vctx, int dst_dev, void *dst, int src_dev,
                                       const void *src, uint64_t bytes, uint64_t after);
enum vdev_status vdev_cu_fill(void *vctx, int dev, void *dst, uint32_t value, uint64_t n_words);
enum vdev_status vdev_cu_submit_host(void *vctx, int dev, vdev_host_fn fn, const void *arg,
                                     size_t arg_bytes);
enum vdev_status vdev_cu_synchronize(void *vctx, int dev);
enum vdev_status vdev_cu_event_record(void *vctx, int dev, void **event);
int vdev_cu_event_done(void *vctx, void *event);
void vdev_cu_event_wait(void *vctx, void *event);
enum vdev_status vdev_cu_stream_wait_event(void *vctx, int dev, void *event);
void vdev_cu_event_drop(void *vctx, void *event);
enum vdev_status vdev_cu_run_kernel(void *vctx, int dev, const struct vdev_kernel_args *args);
/* Destroys the pooled events of d (teardown). */
void vdev_cu_events_destroy(struct cu_dev *d);
/* Waits, with d's mem_lock held, for the collectives queued on d to finish
 * before its memory is mapped or unmapped (an NCCL kernel that waits for its
 * peers must not be held up behind a driver call that synchronizes). */
void vdev_cu_coll_drain_locked(struct cu_dev *d);
/* Takes stream s off its GPU's list of streams with a collective pending
 * (d's mem_lock held), before s is freed. */
void vdev_cu_coll_forget_locked(struct cu_dev *d, struct cu_stream *s);

/* ---- collectives (cuda_nccl.c) ---- */

int vdev_cu_coll_library(void *vctx, char *buf, size_t cap);
enum vdev_status vdev_cu_coll_open(void *vctx, const int *qs, int n, void **comm, uint64_t *held);
enum vdev_status vdev_cu_coll_run(void *vctx, void *comm, int rank,
                                  const struct vdev_backend_coll *call);
void vdev_cu_coll_abort(void *vctx, void *comm);
void vdev_cu_coll_close(void *vctx, void *comm);
/* Sets NCCL_RUNTIME_CONNECT=0 unless the environment has it (once per
 * process, at the plugin's first open, before any NCCL call). */
void vdev_cu_nccl_env_init(void);
/* Aborts and frees every NCCL communicator still open (cu_destroy, before
 * the streams go): nothing may use them afterwards. */
void vdev_cu_coll_destroy_all(struct cu_ctx *c);

#endif /* VDEV_CUDA_INTERNAL_H */
