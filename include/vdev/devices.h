/* vdev/devices.h — the logical devices once the runtime runs: their list, the
 * canonical form of a device name, each device's memory statistics
 * (TensorFlow's get_memory_info, reset_memory_stats), handing cached memory
 * back, and raw device memory taken from a device's allocator. Part of the
 * public API: vdev.h includes it, and it may be included alone (it includes
 * the parts it builds on). */
#ifndef VDEV_VDEV_DEVICES_H
#define VDEV_VDEV_DEVICES_H

#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- logical devices ---------------------------------------------------- */

enum vdev_memory_policy { VDEV_POLICY_GROW = 0, VDEV_POLICY_PREALLOCATE, VDEV_POLICY_COUNT };

struct vdev_logical_device {
    char name[64];            /* "/device:GPU:0" */
    enum vdev_device_type type;
    int index;                /* N in /device:GPU:N */
    int physical_index;       /* the physical GPU it is carved from (0 for CPUs) */
    char backend[16];         /* "cpu", "sim", "cuda" */
    enum vdev_memory_policy policy;
    uint64_t limit_bytes;     /* the most its allocator may hold */
};

/* Starts the runtime if needed, then lists the logical devices: the logical
 * CPUs (CPU:0, or CPU:0..n-1 when the host is split), then GPU:0..N-1. Same
 * fill convention as vdev_list_physical_devices. */
VDEV_API enum vdev_status vdev_list_logical_devices(struct vdev_logical_device *out, int cap,
                                                    int *n);
/* Canonical name of a device given in any accepted form:
 * "gpu:1" -> "/device:GPU:1". Starts the runtime. Like every call of the API
 * that takes a logical device, as TensorFlow's memory queries: VDEV_ERR_INVALID_ARG
 * "Failed parsing device name: ..." for a malformed name or one without an
 * index ("GPU"), VDEV_ERR_NOT_FOUND "No matching devices found for ..." for a
 * device that does not exist. out holds cap bytes; a name that does not fit
 * (with its NUL) is VDEV_ERR_INVALID_ARG ("needs 14 bytes, out holds 4") and
 * out is left empty; 64 bytes hold any name. */
VDEV_API enum vdev_status vdev_device_canonical_name(const char *device, char *out, size_t cap);

struct vdev_memory_info {
    uint64_t bytes_in_use;        /* live blocks, after 256-byte rounding */
    uint64_t peak_bytes_in_use;   /* since start or the last reset */
    uint64_t bytes_reserved;      /* regions held from the backend */
    uint64_t peak_bytes_reserved;
    uint64_t bytes_limit;         /* the most the device may reserve */
    uint64_t largest_free_block;  /* inside the reserved regions */
    uint64_t n_allocs;            /* live allocations */
    uint64_t n_allocs_total;      /* allocations made since start */
    uint64_t n_failed_allocs;     /* allocations that failed with OOM (not the copy a tape
                                     would keep of a tensor written in place, which the write
                                     does without) */
    uint64_t n_regions;           /* regions reserved now */
    double fragmentation;         /* (free - largest free) / free, 0 when nothing is free */
    uint64_t largest_alloc_size;  /* largest single allocation (after 256-byte rounding) since
                                     start or the last reset, as TensorFlow's AllocatorStats */
};

/* A consistent snapshot of a logical device's memory statistics. */
VDEV_API enum vdev_status vdev_memory_info(const char *device, struct vdev_memory_info *out);
/* Peak in use := in use now, peak reserved := reserved now,
 * largest_alloc_size := 0 (TensorFlow's reset_memory_stats). */
VDEV_API enum vdev_status vdev_memory_reset_peak(const char *device);
/* Waits for the device's queued work, then hands every region with no live
 * block back to the backend (growth mode); *released_bytes (may be NULL) says
 * how much. Growth then starts over: the region size goes back to 2 MiB (or
 * twice the largest region still held), not twice the regions released, and
 * doubles from there as TensorFlow's BFC allocator does. */
VDEV_API enum vdev_status vdev_memory_release_cached(const char *device, uint64_t *released_bytes);

/* ---- raw device memory --------------------------------------------------- */

/* Allocates `bytes` on a logical device from its allocator. On OOM the
 * message names the size, the device, the bytes in use of the limit and the
 * largest free block, then the kind of failure and what would help: "the
 * limit is short by <size>" (in use + request > limit), "fragmentation: free
 * <size> in <n> blocks, largest <size>", or the backend's own message when
 * the physical device is full; live memory is untouched. The memory is
 * device memory: only the device reads it. A size of 0 is
 * VDEV_ERR_INVALID_ARG ("vdev_mem_alloc: size 0"), *out NULL. */
VDEV_API enum vdev_status vdev_mem_alloc(const char *device, uint64_t bytes, void **out);
/* Frees what vdev_mem_alloc returned; NULL is a no-op. */
VDEV_API enum vdev_status vdev_mem_free(const char *device, void *ptr);

/* A library that hands vdev_mem_alloc blocks on to users vdev does not see
 * (libvdev-torch-alloc.so, PyTorch's allocator) registers itself as a
 * holder, so that vdev_shutdown() never frees memory under a live block:
 *  - live(ctx, msg, cap) returns how many of its blocks are live; when not
 *    0 it writes into msg (cap bytes) what they are and what to do, e.g.
 *    "2 blocks of the PyTorch allocator (libvdev-torch-alloc.so) are live
 *    (1 on /device:GPU:0, 1 on /device:GPU:2): ...";
 *  - forget(ctx) is called when vdev_shutdown() goes ahead, before any
 *    memory goes: the holder gives back what it keeps for reuse and starts
 *    the next runtime afresh (its statistics from zero).
 * vdev_shutdown() asks every holder first; while one has live blocks it
 * refuses: it returns with the runtime still running, and its last error is
 * VDEV_ERR_INVALID_ARG "vdev_shutdown: " followed by that holder's msg.
 * At most 8 holders; a holder already registered (the same functions and
 * ctx) is not added again. VDEV_ERR_INVALID_ARG for NULL or a holder
 * without live or forget, or a ninth holder. Thread-safe. */
struct vdev_mem_holder {
    int (*live)(void *ctx, char *msg, size_t cap);
    void (*forget)(void *ctx);
    void *ctx;
};
VDEV_API enum vdev_status vdev_mem_holder_add(const struct vdev_mem_holder *holder);
/* Takes a holder out (the same functions and ctx as added), before the code
 * of its functions goes (a library's destructor, before dlclose): not while
 * another thread is in vdev_shutdown(). It returns once the calls of this
 * holder's functions under way on other threads (vdev_mem_holders_live,
 * vdev_shutdown) have ended, so none of its functions runs after it; it
 * does not wait for calls of other holders, so a holder's function may
 * remove another holder. VDEV_ERR_INVALID_ARG for NULL, VDEV_ERR_NOT_FOUND
 * when no such holder is registered. When that wait would never end — a
 * call of the holder runs on a thread that is itself removing, and waiting
 * for, a holder whose function this thread is in (two holders' functions
 * removing each other on two threads) — the holder is taken out but not
 * waited for: VDEV_ERR_INVALID_ARG "vdev_mem_holder_remove: removed, but
 * not waited for: ...". Thread-safe. */
VDEV_API enum vdev_status vdev_mem_holder_remove(const struct vdev_mem_holder *holder);
/* The live blocks of the first holder that has any (0: none, msg ""), its
 * msg written into msg (cap bytes; msg may be NULL when cap is 0): what
 * vdev_shutdown() would refuse for. Thread-safe. */
VDEV_API int vdev_mem_holders_live(char *msg, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_DEVICES_H */
