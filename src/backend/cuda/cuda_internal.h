/* cuda_internal.h — what the C files of the CUDA plugin share: the driver
 * functions resolved from libcuda.so.1 (cuda_plugin.c resolves them), the
 * state of the backend (one struct cu_dev per GPU), and the error helpers
 * that reach the core's vdev_error(). The plugin is split by concern:
 *   cuda_plugin.c  loading the driver, devices, life cycle, the table;
 *   cuda_memory.c  regions through the driver's virtual memory management;
 *   cuda_stream.c  copies, fills, host functions, events, kernel launches.
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

struct vdev_cu_driver {
#define X(name) __typeof__(&name) name;
    VDEV_CU_BASIC_FNS(X)
    VDEV_CU_FNS(X)
#undef X
};
/* The functions, valid once the plugin has opened (cuda_plugin.c). */
extern struct vdev_cu_driver vdev_cu;

#define VDEV_CU_MAX_GPUS 64

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
    size_t gran;                              /* physical allocation granularity (VMM) */
    CUmemAccessDesc access[VDEV_CU_MAX_GPUS]; /* this GPU and its peers: who may read regions */
    int n_access;

    pthread_mutex_t mem_lock; /* regions */
    struct cu_region *regions;

    pthread_mutex_t copy_lock; /* staging buffers */
    void *stage[2];
    CUevent stage_ev[2];

    pthread_mutex_t launch_lock; /* cuBLAS handle, scratch, multi-kernel ops */
    void *cublas;                /* created on the first matmul that needs it */
    CUdeviceptr scratch;

    pthread_mutex_t ev_lock; /* event free list */
    struct cu_event *ev_free;
};

struct cu_ctx {
    int n;
    struct cu_dev *devs;
    unsigned char *peer; /* peer[i * n + j]: GPU i can read GPU j's memory */
};

static inline struct cu_dev *vdev_cu_dev(void *vctx, int dev)
{
    return &((struct cu_ctx *)vctx)->devs[dev];
}

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

#endif /* VDEV_CUDA_INTERNAL_H */
