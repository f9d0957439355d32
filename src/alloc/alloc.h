/* alloc.h — the device-memory allocator: one per logical device.
 *
 * Segregated fit with immediate coalescing (BFC's splitting and merging) over
 * regions that a region source (the backend, through the runtime) hands out.
 * Free chunks sit in bins by the power of two of their size; a request
 * takes the lowest-addressed chunk of its own bin
 * that fits, else the lowest-addressed chunk of the next non-empty bin, found
 * through a bitmap in O(1), as TLSF does. On the shared traces this packs as
 * tightly as exact best fit on training traces and tighter on random ones
 * (see alloc.c and BENCHMARKS.md, "Allocator"). Sizes are rounded up to 256 bytes
 * and every block is 256-aligned. All bookkeeping lives on the host (device
 * memory is not host-readable) and costs O(number of chunks), never O(bytes
 * managed): 32 bytes a chunk, about 5 KiB for an empty allocator.
 *
 * Policies: VDEV_POLICY_GROW adds regions on demand, sized as TensorFlow's BFC
 * allocator sizes them (its Extend): the region size starts at 2 MiB and
 * doubles while a request is larger than it; a region takes that size (capped
 * by what is left of the limit), and the next one is twice as large unless
 * this request already doubled it (2 MiB, 4 MiB, 8 MiB, ...; a 1500 MiB first
 * request takes 2 GiB, and the next region is 2 GiB too), up to the limit; VDEV_POLICY_PREALLOCATE reserves the whole limit in vdev_alloc_new()
 * (or prealloc_bytes of it, a pinned region, and grows above it like GROW).
 * Governance (govern.h): an allocator in a card's pool claims each region
 * from the pool before reserving it, so the card's floors hold; its limit
 * (the ceiling) may change at run time (vdev_alloc_set_limit).
 * Releasing empty regions (vdev_alloc_release_cached(), or the garbage
 * collection below) restarts the doubling from the largest region still
 * held, 2 MiB when none is. Before failing with OOM in growth mode, the
 * allocator releases its empty regions and grows again when that makes room
 * under the limit (garbage collection, as TensorFlow's BFC allocator does,
 * where it is on by default); it needs a source with sync (see below).
 *
 * Frees are stream-ordered: a block freed with vdev_alloc_free() may be handed
 * out again at once, because every later user of the device's memory is
 * ordered after the free on the device's stream. A block that was also used
 * on another stream is freed with vdev_alloc_free_after(), with an event
 * recorded on that stream; it is reused only once the event has passed.
 *
 * Thread-safe: every call takes the allocator's lock (a spinlock: calls are
 * short; callbacks into the region source run under it).
 *
 * Example:
 *
 *     struct vdev_alloc_config cfg = {.name = "/device:GPU:0", .limit_bytes = 4ull << 30,
 *                                     .policy = VDEV_POLICY_GROW, .source = src};
 *     vdev_alloc_t *a;
 *     if (vdev_alloc_new(&cfg, &a) != VDEV_OK) return vdev_last_status();
 *     struct vdev_block b;
 *     if (vdev_alloc_malloc(a, 1000, &b) == VDEV_OK)   // b.ptr: 1024 bytes, 256-aligned
 *         vdev_alloc_free(a, b.handle);
 *     vdev_alloc_destroy(a);
 */
#ifndef VDEV_ALLOC_H
#define VDEV_ALLOC_H

#include "base/base.h"

#include <stdint.h>

#define VDEV_ALLOC_ALIGN 256u /* rounding unit and alignment of every block */

typedef struct vdev_alloc vdev_alloc_t;
typedef struct vdev_alloc_trace vdev_alloc_trace_t;

/* Where regions come from. The allocator never touches device memory. */
struct vdev_region_source {
    /* Reserves `bytes` (a multiple of 256) of device memory; *base receives its
     * address, aligned to at least 256. VDEV_ERR_OOM when the device has no
     * room (the allocator then retries smaller or fails the allocation). Must
     * set the error message on failure. */
    enum vdev_status (*reserve)(void *ctx, uint64_t bytes, void **base);
    /* Gives a region back; `base` and `bytes` as reserved. */
    void (*release)(void *ctx, void *base, uint64_t bytes);
    /* (optional) Grows the region at `base` in place from old_bytes to
     * new_bytes, so the device's memory stays one contiguous range (CUDA
     * virtual memory). NULL: growth adds separate regions. */
    enum vdev_status (*extend)(void *ctx, void *base, uint64_t old_bytes, uint64_t new_bytes);
    /* (optional) Stream events for vdev_alloc_free_after(): done() returns
     * nonzero once the event has passed, wait() blocks until it has, drop()
     * releases it. NULL: the event is taken as passed. */
    int (*event_done)(void *ctx, void *event);
    void (*event_wait)(void *ctx, void *event);
    void (*event_drop)(void *ctx, void *event);
    /* (optional) Waits until the work queued on the device's stream has
     * finished. A block freed with vdev_alloc_free() may still be used by
     * work queued before the free, so a region must not go back to the device
     * before that work is done. vdev_alloc_malloc() calls it (under the
     * allocator's lock) once before its garbage collection releases regions.
     * NULL: no garbage collection (the allocator cannot know that releasing
     * is safe); vdev_alloc_release_cached() still releases, since its caller
     * waits first. */
    void (*sync)(void *ctx);
    void *ctx;
};

typedef struct vdev_pool vdev_pool_t; /* a card's shared memory (govern.h) */

struct vdev_alloc_config {
    const char *name;            /* device name used in messages, "/device:GPU:0" (copied) */
    uint64_t limit_bytes;        /* hard cap on reserved bytes (rounded down to 256) */
    enum vdev_memory_policy policy;
    struct vdev_region_source source;
    vdev_alloc_trace_t *trace;   /* (optional) shared trace writer; not owned */
    /* (optional) governance: the card's pool and this device's member in it
     * (vdev_pool_add); every region reserved or released is claimed from or
     * given back to the pool, and growth stops where the pool says. NULL:
     * the allocator answers to its limit alone. */
    vdev_pool_t *pool;
    int member;
    /* PREALLOCATE: bytes reserved at creation, as one region that is never
     * released (rounded down to 256); 0: the whole limit. Memory above it is
     * taken on demand up to the limit, in regions released like growth's. */
    uint64_t prealloc_bytes;
};

/* VDEV_OK: *out is yours, release it with vdev_alloc_destroy(). With
 * PREALLOCATE prealloc_bytes (the whole limit by default) is reserved here,
 * claimed from the pool first if there is one; a failed reserve gives its
 * status (VDEV_ERR_OOM) with "preallocating <size> on <device>: " before the
 * source's message. VDEV_ERR_INVALID_ARG for a NULL config, a source without
 * reserve/release, an unknown policy or a limit below 256 bytes. On failure
 * *out is NULL and nothing is reserved. */
enum vdev_status vdev_alloc_new(const struct vdev_alloc_config *cfg, vdev_alloc_t **out);
/* Releases every region (live blocks included). NULL is a no-op. */
void vdev_alloc_destroy(vdev_alloc_t *a);

/* A live block: its device address and a handle that frees it in O(1). */
struct vdev_block {
    void *ptr;
    uint32_t handle;
};

/* Allocates `bytes` (> 0; rounded up to 256). Blocks freed after events that
 * have passed are freed first; when nothing fits, the allocator waits for
 * the pending events, then (GROW) adds a region, but only if that can serve
 * the request; if it cannot, it collects its empty regions (see the top of
 * this file) and tries to grow once more. On VDEV_ERR_OOM the message is
 * "OOM when allocating <size> (<n> bytes) on <device>: <in use> in use of
 * <limit> limit, largest free block <size>" followed by what kind of failure
 * it is and what would help, only what applies:
 *   "; the limit is short by <size>; would help: a larger limit, a smaller
 *   batch" (exhaustion: in use + the rounded request exceed the limit);
 *   "; fragmentation: free <size> in <n> blocks, largest <size>; would help:
 *   [vdev_memory_release_cached(), ]a smaller batch, a larger limit" (the
 *   free blocks inside regions, and the room left under the limit as one
 *   more; the first suggestion only when releasing empty regions would make
 *   room and the source has no sync, so the allocator could not);
 *   "; <the source's message>; would help: vdev_memory_release_cached() or
 *   memory growth on for the other users of the physical device, a smaller
 *   batch" (the device itself is full below the limit);
 *   "; <message>" (the host ran out of memory for bookkeeping).
 * The allocator's state and statistics are then as before (except
 * n_failed_allocs, pending frees that were waited for, and empty regions
 * that garbage collection released before the source refused a new one).
 * A source that fails otherwise passes its status on, its message prefixed
 * with "allocating <size> on <device>". VDEV_ERR_INVALID_ARG for bytes == 0
 * or a NULL argument. */
enum vdev_status vdev_alloc_malloc(vdev_alloc_t *a, uint64_t bytes, struct vdev_block *out);
/* vdev_alloc_malloc for the runtime's own optional copies (the value a tape
 * keeps when a variable it read is written in place), which the caller does
 * without when there is no room: the same, except that a failure is not
 * counted in n_failed_allocs, which counts the program's allocations (the
 * error is still set, and a trace still notes it). */
enum vdev_status vdev_alloc_malloc_quiet(vdev_alloc_t *a, uint64_t bytes,
                                         struct vdev_block *out);
/* Frees a live block at once (stream-ordered reuse) and merges it with free
 * neighbours. A handle that is not live aborts (VDEV_ASSERT). */
void vdev_alloc_free(vdev_alloc_t *a, uint32_t handle);
/* Frees a live block once `event` has passed (see the header comment). The
 * allocator owns the event from here on and drops it. */
void vdev_alloc_free_after(vdev_alloc_t *a, uint32_t handle, void *event);
/* The handle of the live block that starts at ptr; VDEV_ERR_INVALID_ARG if no
 * live block starts there. O(1) expected: the first call builds a hash table
 * of live blocks, which malloc and free keep up to date from then on (an
 * allocator that never looks up pays nothing for it). */
enum vdev_status vdev_alloc_lookup(vdev_alloc_t *a, const void *ptr, uint32_t *handle);
/* Size of a live block after rounding. A handle that is not live aborts. */
uint64_t vdev_alloc_block_size(vdev_alloc_t *a, uint32_t handle);

struct vdev_alloc_stats {
    uint64_t bytes_in_use, peak_bytes_in_use;    /* rounded sizes of live blocks */
    uint64_t bytes_reserved, peak_bytes_reserved; /* regions held */
    uint64_t bytes_limit;
    uint64_t largest_free_block;                  /* inside reserved regions */
    uint64_t bytes_free;                          /* reserved - in use - pending */
    uint64_t bytes_pending;                       /* freed, waiting for an event */
    uint64_t n_allocs;                            /* live */
    uint64_t n_allocs_total, n_failed_allocs, n_frees_total;
    uint64_t n_regions, n_chunks;                 /* chunks: free, live and pending */
    double fragmentation;                         /* (free - largest free) / free */
    uint64_t largest_alloc_size;                  /* largest block (rounded) handed out since
                                                     creation or the last reset_peak
                                                     (TensorFlow's AllocatorStats field) */
};
/* A consistent snapshot. */
void vdev_alloc_get_stats(vdev_alloc_t *a, struct vdev_alloc_stats *st);
/* Bytes in use and reserved, without the rest of the statistics (cheap). */
void vdev_alloc_usage(vdev_alloc_t *a, uint64_t *in_use, uint64_t *reserved);
/* A function told an allocator's bytes in use and reserved, called under
 * its lock (for the profiler trace's memory counters): it must not call
 * back into the allocator. */
typedef void (*vdev_alloc_usage_fn)(void *user, uint64_t in_use, uint64_t reserved);
/* Calls fn(user, in use, reserved) under the lock, so that the calls about
 * one allocator come in the order of its changes, those made by the watcher
 * below included. */
void vdev_alloc_usage_call(vdev_alloc_t *a, vdev_alloc_usage_fn fn, void *user);
/* Sets the watcher (NULL: none, as at creation): fn(user, in use, reserved)
 * under the lock after every change of the bytes reserved, whatever made it
 * (growth, garbage collection, release_cached, a limit lowered, lending to
 * another device of the card, a floor preallocated again), except at
 * vdev_alloc_destroy. It is looked at only where regions are reserved and
 * released: the fast paths of malloc and free never do. */
void vdev_alloc_watch(vdev_alloc_t *a, vdev_alloc_usage_fn fn, void *user);
/* peak in use := in use, peak reserved := reserved, largest_alloc_size := 0
 * (as TensorFlow's ClearStats). */
void vdev_alloc_reset_peak(vdev_alloc_t *a);
/* Releases every region that holds no live or pending block (a pending block
 * keeps its region until its event has passed: this call does not wait) and
 * restarts the growth schedule; returns the bytes released. With PREALLOCATE
 * the pinned region (the preallocated floor) is never released; regions
 * taken above it on demand are, as growth's. The caller makes
 * sure no queued work still uses blocks freed in those regions (the runtime
 * synchronizes the device's stream first). */
uint64_t vdev_alloc_release_cached(vdev_alloc_t *a);
/* Waits for every pending event and frees those blocks. */
void vdev_alloc_flush_pending(vdev_alloc_t *a);

/* ---- run-time limits (alloc_govern.c) ---- */

/* Sets the limit (rounded down to 256; at least 256) at any time. Raising
 * takes effect at once. Lowering it below what is reserved syncs the device
 * (source's sync) and releases empty regions until the reserved bytes fit,
 * largest first; live memory is never touched: while in use + a request
 * exceeds the limit, vdev_alloc_malloc() fails with an OOM that says the
 * ceiling was lowered (reserved memory above the limit is still used for
 * requests that fit under it). Returns the bytes released; *released may be
 * NULL. VDEV_ERR_INVALID_ARG for a NULL allocator or a limit below 256. A
 * governed allocator changes its limit through vdev_pool_set_limits(). */
enum vdev_status vdev_alloc_set_limit(vdev_alloc_t *a, uint64_t limit_bytes, uint64_t *released);

/* Walks every region and chunk and checks the invariants (chunks tile each
 * region, no two adjacent free chunks, bins hold exactly the free chunks,
 * statistics add up). Returns VDEV_OK or VDEV_ERR_INTERNAL with a message. */
enum vdev_status vdev_alloc_check(vdev_alloc_t *a);

/* Prints the allocator's state as TensorFlow's BFC allocator does after an
 * out-of-memory failure: chunks and bytes per power-of-two bin, in use and
 * free, the largest free block, the room left to grow (under the limit and
 * what the card's pool leaves: vdev_memory_get_limits' available_bytes), and
 * the biggest live blocks with the tag
 * tag_of(user, handle) gives each (may be NULL). Takes the lock. */
void vdev_alloc_dump(vdev_alloc_t *a, FILE *f, const char *(*tag_of)(void *user, uint32_t handle),
                     void *user);

/* Calls fn for every region: base, size, and whether it holds a live or
 * pending block. fn runs under the allocator's lock: it must not call back
 * into the allocator. */
void vdev_alloc_for_each_region(vdev_alloc_t *a,
                                void (*fn)(void *user, void *base, uint64_t bytes, int used),
                                void *user);

/* Host memory the allocator's bookkeeping holds now (the allocator itself,
 * chunk records, region slots, pending queue, lookup table), in bytes. It grows
 * with the number of chunks, never with the bytes managed. */
uint64_t vdev_alloc_host_bytes(vdev_alloc_t *a);

/* ---- allocation traces (VDEV_ALLOC_TRACE=FILE) ---- */

/* Opens FILE for writing; the first line is a "# trace v1 source=vdev ..."
 * comment, and every line ends with a newline (replay rejects a last event line
 * without one, as it may be cut short). One trace may be shared by several
 * allocators (cfg.trace): each successful allocation writes "a ID BYTES" (BYTES
 * as requested, before rounding), each free "f ID" (vdev_alloc_free_after()
 * writes it at the call), a failed allocation a comment "# oom BYTES". IDs come
 * from the trace's own atomic counter, so they are unique across allocators.
 * Lines are written under the trace's mutex, while the allocator's lock is
 * held, so the order of lines is the order in which the allocators acted.
 * VDEV_ERR_IO when the file cannot be created. */
enum vdev_status vdev_alloc_trace_open(const char *path, vdev_alloc_trace_t **out);
/* Flushes and closes; every allocator using it must be destroyed first. NULL
 * is a no-op. */
void vdev_alloc_trace_close(vdev_alloc_trace_t *t);
/* Writes the lines every open trace holds so far to its file (a program that
 * is about to end by a signal); the trace stays open. Thread-safe. */
void vdev_alloc_trace_flush_all(void);

/* Internal to src/alloc (alloc.c calls them with the allocator's lock held):
 * write one line and return the new ID / write a free / note a failure. */
uint64_t vdev_alloc_trace_alloc(vdev_alloc_trace_t *t, uint64_t bytes);
void vdev_alloc_trace_free(vdev_alloc_trace_t *t, uint64_t id);
void vdev_alloc_trace_failed(vdev_alloc_trace_t *t, uint64_t bytes);

#endif /* VDEV_ALLOC_H */
