/* vdev_torch_alloc.h — libvdev-torch-alloc.so, vdev's memory under PyTorch.
 *
 * PyTorch (2.0 and later) lets a process replace its CUDA caching allocator
 * with two C functions in a shared library:
 *
 *     alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *         "libvdev-torch-alloc.so", "vdev_torch_malloc_raising", "vdev_torch_free")
 *     torch.cuda.memory.change_current_allocator(alloc)
 *
 * (vdev.torch.use_vdev_allocator() in vdev's Python package does that). Give
 * PyTorch vdev_torch_malloc_raising, not vdev_torch_malloc: PyTorch keeps
 * whatever pointer its allocation function returns, NULL included, so after
 * a failed vdev_torch_malloc it would make a tensor over address 0; the
 * raising function throws instead, which PyTorch turns into a RuntimeError
 * ("CUDA out of memory (vdev): ..."). From
 * then on every CUDA tensor's memory comes from a vdev logical device: its
 * allocator, its hard limit, its statistics (vdev_memory_info, the metrics
 * endpoint, vdev top), its out-of-memory report. PyTorch's device index N
 * maps to vdev's "GPU:N" unless VDEV_TORCH_DEVICES ("0:GPU:1,1:GPU:2") or
 * vdev_torch_set_device() says otherwise, and a thread can send its
 * allocations to another logical device for a while (vdev_torch_push_device),
 * so two processes, or two models of one process, get hard limits on one
 * card: split it with vdev's configuration (VDEV_LOGICAL_DEVICES=0:4GiB,2GiB)
 * and give each its logical GPU.
 *
 * Streams. PyTorch passes the stream each block is allocated and freed on. A
 * block freed on stream S may still be read by work queued on S, so it is
 * handed out again at once only to allocations on S (ordered after that work
 * by S itself); an event is recorded on S, and the block goes back to vdev's
 * allocator, for any stream, once the event has passed. Before failing for
 * lack of memory, the allocator waits for those events and gives the blocks
 * back. Events come from the CUDA driver (libcuda.so.1, already loaded by
 * PyTorch; CUstream and cudaStream_t are the same handles); in a process
 * without it no work can be queued on any stream, so a freed block goes back
 * at once. Tests install their own events (vdev_torch_set_events).
 *
 * Limits PyTorch imposes: the allocator must be installed before the first
 * CUDA allocation of the process, and one allocator serves the whole process
 * (it cannot be changed back); memory PyTorch's own libraries take outside
 * the allocator (the CUDA context, cuBLAS/cuDNN workspaces) is not counted.
 *
 * Every function is thread-safe. The library links libvdev.so, so it shares
 * the runtime (configuration, devices, statistics) with every other user of
 * libvdev.so in the process, vdev's Python package included. It registers
 * itself as a holder of vdev memory (vdev_mem_holder_add): vdev_shutdown()
 * refuses while PyTorch holds live blocks ("vdev_shutdown: 2 blocks of the
 * PyTorch allocator (libvdev-torch-alloc.so) are live (1 on /device:GPU:0,
 * 1 on /device:GPU:2): ..."), and once it goes ahead the statistics start
 * from zero with the next runtime (the mappings stay). In a child that fork()
 * made from a process whose runtime runs, every function fails at once with
 * VDEV_ERR_UNSUPPORTED and vdev's advice ("vdev_torch_malloc: vdev was
 * started in process N, from which this process was forked; ..."); a free
 * there only sets that message: the block is the parent's. */
#ifndef VDEV_TORCH_ALLOC_H
#define VDEV_TORCH_ALLOC_H

#include "vdev.h"

#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA's stream handle, opaque here (the same typedef as CUDA's own). */
typedef struct CUstream_st *cudaStream_t;

/* PyTorch's allocation function: `size` bytes for PyTorch's CUDA device
 * `device`, to be used on `stream`. NULL when size is 0, and on failure:
 * vdev_torch_last_error() then says why (vdev's out-of-memory report, an
 * unknown device, a malformed VDEV_TORCH_DEVICES). Blocks are 256-aligned. */
VDEV_API void *vdev_torch_malloc(ssize_t size, int device, cudaStream_t stream);
/* The allocation function to give PyTorch: vdev_torch_malloc, but a failure
 * throws a C++ std::runtime_error with vdev_torch_last_error()'s text
 * ("CUDA out of memory (vdev): ..." for a lack of memory, as PyTorch's own
 * message begins; "vdev_torch_malloc: ..." otherwise), which PyTorch turns
 * into a Python RuntimeError, where a NULL would become a tensor over
 * address 0. Call it from C++ only (an exception must not cross C frames;
 * C callers use vdev_torch_malloc). Built only where CMake found a C++
 * compiler: the library lacks the symbol otherwise (vdev.torch then refuses
 * to install the allocator, saying why). */
VDEV_API void *vdev_torch_malloc_raising(ssize_t size, int device, cudaStream_t stream);
/* PyTorch's free function: ptr as returned by vdev_torch_malloc, with the
 * size, device and stream PyTorch passes. NULL is a no-op; a pointer that is
 * not a live block is counted (n_bad_frees) and otherwise ignored. */
VDEV_API void vdev_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream);

/* Maps PyTorch's device index (0..63) to a vdev logical device, in any
 * accepted form ("GPU:1", "/device:GPU:1"); code wins over
 * VDEV_TORCH_DEVICES. VDEV_ERR_INVALID_ARG for an index out of range, a
 * malformed name ("Failed parsing device name: ..."), vdev's CPU device
 * ("/device:CPU:0 is host memory: PyTorch's CUDA tensors take a vdev GPU"),
 * or a device index with
 * live blocks that is mapped elsewhere already ("PyTorch device 0 has 2 live
 * blocks (1 on /device:GPU:0, 1 on /device:GPU:2); map it before its first
 * allocation": each device its blocks came from); VDEV_ERR_NOT_FOUND for a
 * device that does not exist (starts vdev's runtime). */
VDEV_API enum vdev_status vdev_torch_set_device(int torch_device, const char *vdev_device);
/* The calling thread's allocations go to `vdev_device`, whatever PyTorch's
 * device index, until the matching pop (nests 16 deep); frees go where the
 * block came from. Errors as vdev_torch_set_device, and VDEV_ERR_INVALID_ARG
 * past 16 deep or for a pop without a push. */
VDEV_API enum vdev_status vdev_torch_push_device(const char *vdev_device);
VDEV_API enum vdev_status vdev_torch_pop_device(void);

struct vdev_torch_stats {
    uint64_t allocated_bytes;      /* live blocks, as PyTorch asked for them */
    uint64_t peak_allocated_bytes; /* since the first allocation */
    uint64_t pending_bytes;        /* freed, waiting for their stream's event (256-rounded);
                                      vdev_memory_info counts them in use until then */
    uint64_t n_allocs;             /* live blocks */
    uint64_t n_allocs_total, n_frees_total;
    uint64_t n_failed;             /* allocations that failed */
    uint64_t n_same_stream_reuses; /* allocations served by a block freed on their stream */
    uint64_t n_event_waits;        /* events waited for before an out-of-memory failure */
    uint64_t n_bad_frees;          /* frees of pointers that were not live blocks, counted
                                      on the device PyTorch's index of the free maps to
                                      (else the thread's pushed device; else none) */
};
/* The statistics of what PyTorch allocated from one vdev logical device.
 * VDEV_ERR_NOT_FOUND when nothing was ever allocated there. */
VDEV_API enum vdev_status vdev_torch_stats(const char *vdev_device, struct vdev_torch_stats *out);

/* Events on PyTorch's streams. record() returns an event recorded on the
 * stream now, or NULL when the stream has nothing queued (taken as passed);
 * done() returns nonzero once it has passed; wait() blocks until it has;
 * drop() releases it. */
struct vdev_torch_events {
    void *(*record)(void *ctx, cudaStream_t stream);
    int (*done)(void *ctx, void *event);
    void (*wait)(void *ctx, void *event);
    void (*drop)(void *ctx, void *event);
    void *ctx;
};
/* Installs `ev` (copied), or with NULL the default (the CUDA driver if the
 * process has loaded it, else none). Only while no block is waiting for an
 * event (VDEV_ERR_INVALID_ARG otherwise). */
VDEV_API enum vdev_status vdev_torch_set_events(const struct vdev_torch_events *ev);

/* Waits for every pending event and gives those blocks back to vdev. */
VDEV_API void vdev_torch_empty_cache(void);
/* The calling thread's last failure ("" if none); valid until its next call. */
VDEV_API const char *vdev_torch_last_error(void);
/* Forgets the mappings, statistics, events and VDEV_TORCH_DEVICES (read again
 * at the next allocation), for a fresh start after vdev_shutdown(); no thread
 * may have a device pushed. VDEV_ERR_INVALID_ARG while blocks are live or
 * wait for events (nothing changes). */
VDEV_API enum vdev_status vdev_torch_reset(void);

#ifdef __cplusplus
}
#endif
#endif /* VDEV_TORCH_ALLOC_H */
