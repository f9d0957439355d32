/* alloc_impl.h — the allocator's private layout, shared by the files of
 * src/alloc/ that implement it (never included from outside that folder).
 *
 * alloc.c holds the fast path (taking and releasing chunks, malloc and free)
 * with creation, pending frees and the lookup table; alloc_grow.c holds
 * regions, growth and garbage collection; alloc_oom.c the OOM diagnosis;
 * alloc_stats.c statistics, the invariant check and the state dump;
 * alloc_tree.c long bins' trees. What they share
 * is here: the chunk records and regions, the lock, and the bin and record
 * operations, as static inline functions so the fast path in alloc.c
 * compiles exactly as it did in one file. See alloc.c for the design. At
 * the end, for the card's pool (alloc_govern.c): a member's pressure
 * callback, which alloc_pressure.c calls and replaces.
 */
#ifndef VDEV_ALLOC_IMPL_H
#define VDEV_ALLOC_IMPL_H

#include "alloc/alloc.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#define NIL UINT32_MAX
#define ALL_ONES UINT64_MAX

/* Chunk states, kept in the low two bits of chunk.szst. Sentinels read as 3. */
enum { ST_UNUSED = 0, ST_FREE = 1, ST_LIVE = 2, ST_PENDING = 3 };
#define SZ_MASK (~(uint64_t)(VDEV_ALLOC_ALIGN - 1))
#define MAX_BYTES (UINT64_MAX & SZ_MASK) /* the largest request that rounds without overflow */

/* Bins: one per power of two of the size in 256-byte units (units < 2^56).
 * (Splitting each octave into sub-bins by the bits under the leading one,
 * with the policy still choosing over whole octaves, was measured when bins
 * were walked in address order: nothing saved on the random traces, 25-35%
 * more time on the training traces; not kept.) */
#define N_BINS 56u
#define N_WORDS ((N_BINS + 63) / 64)
_Static_assert(N_BINS <= 64, "tmap holds a bit per bin in one word");
#define NO_NEIGHBOUR N_BINS     /* the sentinel record for region ends */
#define FIRST_RECORD (N_BINS + 1)

#define FIRST_REGION_BYTES (2ull << 20) /* GROW: the first region (TF's BFC uses 2 MiB too) */
#define INITIAL_RECORDS 128u

/* hooks: the reasons to leave the fast path */
enum { HOOK_TRACE = 1, HOOK_LOOKUP = 2, HOOK_PENDING = 4 };
/* governance (alloc_govern.c): more is reserved than the limit allows (the
 * limit was lowered at run time), so malloc must check the limit itself. */
enum { HOOK_OVER = 8 };
/* some bin is kept in a tree, or is to be given one (alloc_tree.c): malloc
 * and free take the bin operations that keep trees (malloc's general path) */
enum { HOOK_TREES = 16 };

struct chunk {
    uint64_t addr;         /* device address of the first byte */
    uint64_t szst;         /* size in bytes (multiple of 256) | state */
    uint32_t prev, next;   /* address neighbours in the region (NO_NEIGHBOUR at the ends) */
    uint32_t fprev, fnext; /* bin list links; fnext also links the unused-record stack */
};

struct region {
    uint64_t base, bytes; /* bytes == 0: an unused slot */
    uint32_t first;       /* the chunk at base */
    uint32_t parked;      /* lending's ticket while parked (vdev_alloc_park), else 0 */
};

/* Long bins (alloc_tree.c): a bin that malloc scanned more than TREE_ON
 * chunks of is given a tree as well (at the next malloc); a tree of fewer
 * than TREE_OFF chunks is dropped. */
#define TREE_ON 64u
#define TREE_OFF 16u

struct tnode {
    uint32_t l, r; /* children, NIL for none */
    uint64_t max;  /* the largest size-and-state word in the subtree */
};

struct trees {
    uint32_t root[N_BINS], len[N_BINS]; /* per bin, meaningful while its tmap bit is set */
    struct tnode *node;                 /* by record index, cap_ch of them */
};

struct pending {
    uint32_t handle;
    void *event;
};

struct vdev_alloc {
    atomic_int lock; /* 0 free, 1 held */
    unsigned hooks;  /* HOOK_* bits */

    /* ---- hot ---- */
    struct chunk *ch; /* records; [0, N_BINS] are sentinels */
    uint64_t bmap[N_WORDS]; /* bit b: bin b is not empty */
    uint64_t tmap;          /* bit b: bin b is also kept in a tree (alloc_tree.c) */
    uint64_t tree_want;     /* bit b: bin b was scanned long; the next malloc gives it a tree */
    uint32_t free_rec; /* stack of unused records (NIL: empty) */
    uint32_t n_unused; /* records on that stack (statistics in O(1)) */
    uint32_t cap_ch;   /* records allocated */
    uint64_t in_use, peak_in_use;
    uint64_t largest_alloc; /* largest block handed out since creation or reset_peak */
    uint64_t n_allocs_total, n_frees_total;

    /* ---- cold ---- */
    uint64_t reserved, peak_reserved, pending_bytes, n_failed;
    uint64_t limit;
    enum vdev_memory_policy policy;
    struct vdev_region_source src;
    vdev_alloc_trace_t *trace;
    uint64_t *tid; /* trace id per record (only with a trace) */
    struct region *reg;
    uint32_t n_reg_slots, cap_reg, n_regions;
    uint32_t ext_region;        /* region grown in place (source with extend), or NIL */
    uint64_t curr_region_bytes; /* the next region's size before the request doubles it
                                   (BFC's curr_region_allocation_bytes_); 0: start over
                                   from the largest region held (vdev_alloc_grow) */
    struct pending *pend;
    uint32_t n_pending, cap_pend;
    uint32_t *lk;          /* lookup table: handles, NIL = empty */
    uint32_t lk_cap, lk_n; /* slots (a power of two), entries */
    char name[64];
    struct trees *trees; /* long bins' trees (alloc_tree.c); NULL until one is needed */

    /* ---- governance (alloc_govern.c; off the fast path) ---- */
    struct vdev_pool *pool; /* the card's pool of shared memory; NULL: not governed */
    int member;             /* this allocator's index in the pool */
    uint32_t pinned;        /* PREALLOCATE: the region reserved at creation, never released
                               (NIL: none) */
    uint64_t pinned_bytes;  /* its size when preallocated (an extending source grows it) */
    uint32_t unpinned;      /* the pinned region vdev_alloc_repin() left in use, while held
                               (NIL: none), and its preallocated size */
    uint64_t unpinned_bytes;
    uint32_t park_ticket;   /* the last ticket vdev_alloc_park() handed out */
    int limit_lowered;      /* 1 after vdev_alloc_set_limit() lowered the limit, until a raise */

    /* ---- the watcher of reserved bytes (vdev_alloc_watch; off the fast path) ---- */
    vdev_alloc_usage_fn watch; /* NULL: none */
    void *watch_user;
};

/* ------------------------------------------------------------------------ */
/* lock */

/* Contended: spin with pause for a while (the holder's calls are short),
 * then yield the CPU, as the holder may be descheduled (2 CPUs, 4 threads). */
static __attribute__((noinline, unused)) void lock_slow(struct vdev_alloc *a)
{
    for (unsigned spins = 0;;) {
        /* Spin on a plain load so waiters do not bounce the line, then retry. */
        while (atomic_load_explicit(&a->lock, memory_order_relaxed)) {
            if (spins++ < 100) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
            } else {
                sched_yield();
            }
        }
        if (!atomic_exchange_explicit(&a->lock, 1, memory_order_acquire))
            return;
    }
}

/* One atomic exchange when the lock is free: on x86 a locked instruction,
 * which also drains the store buffer, so it is most of the cost of a call. */
static inline void lock(struct vdev_alloc *a)
{
    if (__builtin_expect(atomic_exchange_explicit(&a->lock, 1, memory_order_acquire), 0))
        lock_slow(a);
}

static inline void unlock(struct vdev_alloc *a)
{
    atomic_store_explicit(&a->lock, 0, memory_order_release);
}
/* ------------------------------------------------------------------------ */
/* records and bins */

static inline uint64_t csize(const struct chunk *c) { return c->szst & SZ_MASK; }
static inline unsigned cstate(const struct chunk *c) { return (unsigned)(c->szst & 3); }

/* Bin of a size in bytes (a multiple of 256, > 0). */
static inline unsigned bin_of(uint64_t bytes)
{
    return 63u - (unsigned)__builtin_clzll(bytes >> 8);
}

static inline void bmap_set(struct vdev_alloc *a, unsigned b)
{
    a->bmap[b >> 6] |= 1ull << (b & 63);
}

/* The first non-empty bin >= b, or NIL. */
static inline uint32_t bmap_find(const struct vdev_alloc *a, unsigned b)
{
    for (unsigned w = b >> 6; w < N_WORDS; w++) {
        uint64_t m = a->bmap[w];
        if (w == b >> 6)
            m &= ~0ull << (b & 63);
        if (m)
            return (w << 6) | (unsigned)__builtin_ctzll(m);
    }
    return NIL;
}

/* A bin's free chunks are kept in no order: a chunk goes in at the front in
 * O(1), and malloc scans the whole bin for the lowest-addressed chunk that
 * fits, keeping the best so far with conditional moves, so the only branch
 * of the scan is its loop. (Until 2026-12-05 the bins were kept in address
 * order, so that malloc's first fit was the first chunk that fits, but every
 * insertion walked its bin to its place: 0.83 insertions a call on the
 * synthetic trace, each walk's end a coin toss; the placements, and so the
 * capacities, are the same either way. BENCHMARKS.md, "Allocator: bins in no
 * order".) A bin of n chunks costs n steps a malloc where the ordered bins
 * cost the walk to the first fit a malloc and about n/2 an insertion.
 *
 * bin_lowest: the lowest-addressed chunk of bin b whose size-and-state word
 * is at least key (key 0: any chunk), or b itself (the sentinel) when none
 * is. A free chunk's word is its size | ST_FREE, so key = sz | ST_FREE asks
 * for a chunk of at least sz bytes. *steps: the chunks scanned (a bin of
 * more than TREE_ON is given a tree, alloc_tree.c, which ends the scans). */
static inline uint32_t bin_lowest(const struct chunk *ch, unsigned b, uint64_t key,
                                  uint32_t *steps)
{
    uint32_t best = b, n = 0;
    uint64_t best_addr = ALL_ONES;
    for (uint32_t i = ch[b].fnext; i != b; i = ch[i].fnext) {
        uint64_t cand = ch[i].addr;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(VDEV_ALLOC_PORTABLE_SCAN)
        /* Compilers turn the portable form below into branches, mispredicted
         * about once a step on the random-order traces; this is the form
         * wanted: cand = all ones when the chunk is too small, then the
         * lowest address and its chunk kept without a branch. (Building
         * with -DVDEV_ALLOC_PORTABLE_SCAN takes the portable form, to test
         * it on this processor.) The step count is kept in it too. */
        __asm__("incl %[n]\n\t"
                "cmpq %[key], %[sz]\n\t"
                "cmovbq %[ones], %[cand]\n\t"
                "cmpq %[ba], %[cand]\n\t"
                "cmovbq %[cand], %[ba]\n\t"
                "cmovbl %[i], %[best]"
                : [cand] "+&r"(cand), [ba] "+&r"(best_addr), [best] "+&r"(best), [n] "+&r"(n)
                : [key] "r"(key), [sz] "r"(ch[i].szst), [ones] "r"(ALL_ONES), [i] "r"(i)
                : "cc");
#else
        n++;
        uint64_t m = -(uint64_t)((ch[i].szst >= key) & (cand < best_addr));
        best = (uint32_t)(((uint64_t)i & m) | ((uint64_t)best & ~m));
        best_addr = (cand & m) | (best_addr & ~m);
#endif
    }
    *steps = n;
    return best;
}

/* alloc_tree.c: a long bin's tree (see there); called only for a bin whose
 * tmap bit is set, except want (a scan found bin b long: returns `chosen`,
 * the scan's answer) and build_wanted
 * (gives each such bin its tree: called by malloc's general path before it
 * takes a chunk). */
uint32_t vdev_alloc_tree_want(struct vdev_alloc *a, unsigned b, uint32_t chosen);
void vdev_alloc_tree_build_wanted(struct vdev_alloc *a);
uint32_t vdev_alloc_tree_lowest(const struct vdev_alloc *a, unsigned b, uint64_t key);
void vdev_alloc_tree_insert(struct vdev_alloc *a, unsigned b, uint32_t h);
void vdev_alloc_tree_remove(struct vdev_alloc *a, unsigned b, uint32_t h);
void vdev_alloc_tree_replace(struct vdev_alloc *a, unsigned b, uint32_t old, uint32_t h);
void vdev_alloc_tree_grew(struct vdev_alloc *a, unsigned b, uint32_t h);
enum vdev_status vdev_alloc_tree_reserve(struct vdev_alloc *a, uint32_t cap);
uint64_t vdev_alloc_tree_bytes(const struct vdev_alloc *a);
void vdev_alloc_tree_free(struct vdev_alloc *a);
const char *vdev_alloc_tree_check(const struct vdev_alloc *a, unsigned b, uint64_t list_len);

static inline int bin_in_tree(const struct vdev_alloc *a, unsigned b)
{
    return __builtin_expect((int)((a->tmap >> b) & 1), 0);
}

/* The bin operations take `trees`: 0 where the caller knows that no bin has
 * a tree (HOOK_TREES clear: malloc's and free's fast paths), which leaves
 * the tree test out; 1 elsewhere. */

/* The lowest-addressed chunk of bin b whose word is at least key, or b: by
 * the bin's tree when it has one, else by a scan; a scan longer than TREE_ON
 * asks for the bin's tree, which the next malloc makes (not this one, whose
 * later bin operations may not keep trees). */
static inline uint32_t bin_choose(struct vdev_alloc *a, unsigned b, uint64_t key, int trees)
{
    if (trees && bin_in_tree(a, b))
        return vdev_alloc_tree_lowest(a, b, key);
    uint32_t steps, i = bin_lowest(a->ch, b, key, &steps);
    if (__builtin_expect(steps > TREE_ON, 0))
        return vdev_alloc_tree_want(a, b, i); /* returns i (nothing kept across the call) */
    return i;
}

/* Puts free chunk h into bin b, at the front. */
static inline void bin_insert(struct vdev_alloc *a, uint32_t h, unsigned b, int trees)
{
    struct chunk *ch = a->ch;
    uint32_t n = ch[b].fnext;
    ch[h].fprev = b;
    ch[h].fnext = n;
    ch[n].fprev = h;
    ch[b].fnext = h;
    bmap_set(a, b);
    if (trees && bin_in_tree(a, b))
        vdev_alloc_tree_insert(a, b, h);
}

static inline void bin_remove(struct vdev_alloc *a, uint32_t h, unsigned b, int trees)
{
    struct chunk *ch = a->ch;
    uint32_t p = ch[h].fprev, n = ch[h].fnext;
    ch[p].fnext = n;
    ch[n].fprev = p;
    /* p == n only when both are the sentinel: the bin is now empty. */
    a->bmap[b >> 6] &= ~((uint64_t)(p == n) << (b & 63));
    if (trees && bin_in_tree(a, b))
        vdev_alloc_tree_remove(a, b, h);
}

/* Puts h where old is in old's list (h belongs to the same bin, b). */
static inline void bin_replace(struct vdev_alloc *a, uint32_t old, uint32_t h, unsigned b,
                               int trees)
{
    struct chunk *ch = a->ch;
    uint32_t p = ch[old].fprev, n = ch[old].fnext;
    ch[h].fprev = p;
    ch[h].fnext = n;
    ch[p].fnext = h;
    ch[n].fprev = h;
    if (trees && bin_in_tree(a, b))
        vdev_alloc_tree_replace(a, b, old, h);
}

/* Unused records form a stack through fnext; the caller made sure one exists. */
static inline uint32_t record_pop(struct vdev_alloc *a)
{
    uint32_t r = a->free_rec;
    a->free_rec = a->ch[r].fnext;
    a->n_unused--;
    return r;
}

static inline void record_push(struct vdev_alloc *a, uint32_t r)
{
    a->ch[r].szst = ST_UNUSED;
    a->ch[r].fnext = a->free_rec;
    a->free_rec = r;
    a->n_unused++;
}
/* ------------------------------------------------------------------------ */
/* shared between the files of src/alloc (all called with the lock held) */

/* Why growth failed: the limit left no room (no message set), the source
 * said no (its message is set), the source said no because the host could
 * not give it memory or address space (message set, vdev_error_is_host), the
 * host ran out for the allocator's own records (message set), or the card's
 * pool had no shared memory left for this device (no message set). */
enum vdev_alloc_why { WHY_LIMIT, WHY_SOURCE, WHY_SOURCE_HOST, WHY_HOST, WHY_CARD };

/* alloc.c: makes sure `need` unused records exist (host OOM: nothing changes). */
enum vdev_status vdev_alloc_records_reserve(struct vdev_alloc *a, uint32_t need);

/* Room left under the limit (0 when a lowered limit is below what is held). */
static inline uint64_t limit_room(const struct vdev_alloc *a)
{
    return a->limit > a->reserved ? a->limit - a->reserved : 0;
}

/* alloc_grow.c */
uint64_t vdev_alloc_largest_free(const struct vdev_alloc *a);
/* Whether releasing `empty` bytes of empty regions would leave room for a
 * new region of sz bytes under the limit and what the card's pool leaves. */
int vdev_alloc_release_makes_room(struct vdev_alloc *a, uint64_t sz, uint64_t empty);
uint32_t vdev_alloc_region_slot(struct vdev_alloc *a);
void vdev_alloc_region_install(struct vdev_alloc *a, uint32_t slot, void *base, uint64_t bytes);
enum vdev_status vdev_alloc_grow(struct vdev_alloc *a, uint64_t sz, enum vdev_alloc_why *why);
uint64_t vdev_alloc_collect(struct vdev_alloc *a, uint64_t sz);
/* alloc_oom.c */
enum vdev_status vdev_alloc_fail_oom(struct vdev_alloc *a, uint64_t bytes, uint64_t sz,
                                     enum vdev_alloc_why why, const char *msg);
/* Nonzero while the calling thread is inside vdev_alloc_malloc_quiet (alloc.c). */
extern _Thread_local int vdev_alloc_quiet;
/* Counts a failed allocation in n_failed, unless it is a quiet one. With the lock. */
static inline void vdev_alloc_count_failed(struct vdev_alloc *a)
{
    if (!vdev_alloc_quiet)
        a->n_failed++;
}
/* Gives empty regions back (never the pinned one) while more than `keep`
 * bytes are reserved, largest first; returns the bytes released. */
uint64_t vdev_alloc_release_empty(struct vdev_alloc *a, uint64_t keep);
/* Bytes in empty regions that may be released (the pinned one excluded). */
uint64_t vdev_alloc_empty_bytes(const struct vdev_alloc *a);
/* The preallocated (pinned) region's bytes while it holds nothing and
 * garbage collection may give it back (a source with sync), else 0: a
 * request that does not fit beside it replaces it, so it counts as room. */
uint64_t vdev_alloc_pinned_spare(const struct vdev_alloc *a);
/* The live bytes the floor (of `floor` bytes) covers: those in the pinned
 * (preallocated) region, or, without one, the first `floor` bytes in use;
 * the rest of the bytes in use lie above the floor (the OOM's report). */
uint64_t vdev_alloc_floor_live(const struct vdev_alloc *a, uint64_t floor);
/* Governance: the floor was lowered to `floor` at run time; a pinned region
 * preallocated larger than it is unpinned, and released (and the floor
 * preallocated anew, as far as the limit allows) when empty. Returns the
 * bytes released. */
uint64_t vdev_alloc_repin(struct vdev_alloc *a, uint64_t floor);
/* Governance: undoes vdev_alloc_repin() when a change of limits is rolled
 * back to `floor`: re-pins the region it left in use, or (PREALLOCATE)
 * preallocates `floor` again in place of a smaller pinned region that is
 * empty (or of none). Best effort: nothing when the memory is not there. */
void vdev_alloc_unrepin(struct vdev_alloc *a, uint64_t floor);
/* Lending (alloc_govern.c), in two steps around a wait for the device's
 * stream made with the lock released. vdev_alloc_park() chooses empty
 * regions that give back `want` bytes of what is held above `keep` (the
 * floor): regions wholly above it, the smallest one that alone is enough,
 * else the largest, and so on; with `cross`, when those are not enough, also
 * the smallest one that reaches below `keep`. It parks them: their free
 * chunk leaves the bins and reads as pending (counted in pending_bytes), so
 * no block is placed in them and nothing else releases them while the lock
 * is free. Returns their ticket, 0 when none was parked. After the wait,
 * vdev_alloc_unpark() releases the ticket's regions by the same rule while
 * the claim (max(reserved, keep)) must still drop by `want` bytes, and puts
 * the others back in the bins; it returns how much the claim dropped. */
uint32_t vdev_alloc_park(struct vdev_alloc *a, uint64_t keep, uint64_t want, int cross);
uint64_t vdev_alloc_unpark(struct vdev_alloc *a, uint32_t ticket, uint64_t keep, uint64_t want,
                           int cross);
/* No free chunk of sz bytes: grows (GROW and PREALLOCATE alike: the limit,
 * the card's pool and the source decide), collects empty regions and grows
 * again; on the first two rounds, when the card's pool refused, releases the
 * lock, lends (vdev_pool_reclaim) and sets *again (the caller retakes and
 * retries: others may have taken the room meanwhile).
 * VDEV_OK: a free chunk of sz bytes exists (unless *again). Otherwise the OOM
 * or the source's error, with the message set and the failure counted. */
enum vdev_status vdev_alloc_make_room(struct vdev_alloc *a, uint64_t bytes, uint64_t sz,
                                      int round, int *again);
/* HOOK_OVER is set: releases empty regions above the limit (after a sync),
 * then fails with the OOM of a lowered ceiling when in use + sz exceeds the
 * limit. VDEV_OK: the request may go on. */
enum vdev_status vdev_alloc_over_limit(struct vdev_alloc *a, uint64_t bytes, uint64_t sz);
/* A free left HOOK_OVER set (more reserved than a lowered limit): gives back
 * empty regions while more than the limit is reserved, after one sync of the
 * device made with the lock released (their blocks may still be used by
 * queued work). Called with the lock held; returns with it released. */
void vdev_alloc_over_freed(struct vdev_alloc *a);

/* Tells the watcher (vdev_alloc_watch) the bytes reserved just changed. */
static inline void reserved_changed(struct vdev_alloc *a)
{
    if (a->watch)
        a->watch(a->watch_user, a->in_use, a->reserved);
}

/* HOOK_OVER set exactly when more is reserved than the limit allows. */
static inline void over_hook_update(struct vdev_alloc *a)
{
    if (a->reserved > a->limit)
        a->hooks |= HOOK_OVER;
    else
        a->hooks &= ~(unsigned)HOOK_OVER;
}

/* ---- a pool member's pressure callback (alloc_pressure.c) ---- */

struct vdev_pcall; /* a call under way */
/* Guarded by the pool's lock; zeroed: no callback. */
struct vdev_pressure_slot {
    vdev_pressure_fn fn; /* NULL: none */
    void *user;
    uint64_t epoch;           /* counts the callbacks set */
    struct vdev_pcall *calls; /* the calls under way */
};
/* Calls the slot's callback, if it has one now, with `device`, what and
 * bytes, counted under way until it returns. `lock` is the pool's (not held
 * by the caller: none may be), `done` the condition signalled when a call
 * returns. */
void vdev_pressure_call(struct vdev_pressure_slot *s, pthread_mutex_t *lock, pthread_cond_t *done,
                        const char *device, enum vdev_pressure what, uint64_t bytes);
/* Installs fn and user, then waits until no call made with an earlier pair
 * is under way, but those on this thread and on threads that are in this
 * function themselves (alloc_pressure.c says why). No lock may be held. */
void vdev_pressure_set(struct vdev_pressure_slot *s, pthread_mutex_t *lock, pthread_cond_t *done,
                       vdev_pressure_fn fn, void *user);

#endif /* VDEV_ALLOC_IMPL_H */
