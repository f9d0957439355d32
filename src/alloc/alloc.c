/* alloc.c — the device-memory allocator: segregated fit with address-ordered
 * bins and immediate coalescing, over regions from a region source.
 *
 * Policy. Free chunks are binned by the power of two of their size (in 256-byte
 * units), and each bin is kept in address order. A request takes the
 * lowest-addressed chunk of its own bin that fits; if none does, the
 * lowest-addressed chunk of the next non-empty bin (every chunk there fits).
 * This is address-ordered first fit within power-of-two size classes: it
 * packs live blocks toward low addresses, keeps large free space together,
 * and reuses a hole with a block of about the same size. On the traces in
 * ../shared/traces it needs less memory than exact best fit with address
 * tie-breaks (BFC's rule): the same on the two training traces (within
 * 0.4% of the peak), and 1.27 x the peak instead of 1.34 on the synthetic one
 * (mean of 1.27 against 1.35 on seven synthetic traces of that kind), while
 * LIFO or FIFO order inside the same bins needs 1.39-1.43 x. See
 * bench/ALLOC_RESULTS.md. (Johnstone and Wilson, "The Memory Fragmentation
 * Problem: Solved?", ISMM 1998, found address-ordered policies best too.)
 *
 * Data structures. Every region is tiled by chunks: address-ordered, doubly
 * linked (prev/next), each free, live or pending (freed after an event).
 * Chunk records live on the host in one growable array, named by index; the
 * index of a live block is its handle, so free is O(1) with no lookup. A
 * record is 32 bytes; the state sits in the low bits of the size, which is a
 * multiple of 256. The first records are sentinels: one per bin, heading that
 * bin's circular free list (address and size all ones, so list walks stop on
 * them without a NULL test), and one that stands for "no neighbour" at region
 * ends (never free, so merges need no end test). A bitmap of non-empty
 * bins finds the next non-empty bin in O(1); the walk inside a bin is short
 * in practice (bins hold the free chunks of one size octave).
 *
 * Splitting and merging keep list positions: the rest of a split chunk and a
 * chunk merged with its upper neighbour sit where the old chunk sat in address
 * order, so they take its place in the list when the bin is unchanged; a merge
 * into the lower neighbour keeps that neighbour's place. Only a chunk that
 * changes bin, or a freed block with no free neighbour, walks its bin.
 *
 * Everything else — growth and garbage collection (empty regions released
 * before an OOM), stream-ordered frees, tracing, the lookup table, the OOM
 * diagnosis — is off the fast path: one flag word (`hooks`) sends malloc/free
 * to the general path when any of them is active, and a request that finds
 * no chunk goes there too. The lock is a test-and-test-and-set
 * spinlock with pause/yield backoff: an uncontended call pays one atomic
 * exchange and one store.
 */
#define _GNU_SOURCE
#include "alloc/alloc.h"

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
 * VDEV_ALLOC_BIN_SUB > 0 splits each octave into 2^BIN_SUB sub-bins by the bits
 * under the leading one; the policy still works on whole octaves (same
 * placements, same capacity), the sub-bins only shorten the lists walked. On
 * the shared traces that saved nothing on the random trace and cost 25-35%
 * more time on the training traces (more instructions per call), so it is off. */
#ifndef VDEV_ALLOC_BIN_SUB
#define VDEV_ALLOC_BIN_SUB 0
#endif
#define BIN_SUB VDEV_ALLOC_BIN_SUB
#define SUBS (1u << BIN_SUB)
#define N_BINS (56u << BIN_SUB)
#define N_WORDS ((N_BINS + 63) / 64)
#define NO_NEIGHBOUR N_BINS     /* the sentinel record for region ends */
#define FIRST_RECORD (N_BINS + 1)

#define FIRST_REGION_BYTES (2ull << 20) /* GROW: the first region (TF's BFC uses 2 MiB too) */
#define INITIAL_RECORDS 128u

/* hooks: the reasons to leave the fast path */
enum { HOOK_TRACE = 1, HOOK_LOOKUP = 2, HOOK_PENDING = 4 };

struct chunk {
    uint64_t addr;         /* device address of the first byte */
    uint64_t szst;         /* size in bytes (multiple of 256) | state */
    uint32_t prev, next;   /* address neighbours in the region (NO_NEIGHBOUR at the ends) */
    uint32_t fprev, fnext; /* bin list links; fnext also links the unused-record stack */
};

struct region {
    uint64_t base, bytes; /* bytes == 0: an unused slot */
    uint32_t first;       /* the chunk at base */
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
    uint64_t last_region_bytes; /* size of the last region added (growth doubles it) */
    struct pending *pend;
    uint32_t n_pending, cap_pend;
    uint32_t *lk;          /* lookup table: handles, NIL = empty */
    uint32_t lk_cap, lk_n; /* slots (a power of two), entries */
    char name[64];
};

/* ------------------------------------------------------------------------ */
/* lock */

/* Contended: spin with pause for a while (the holder's calls are short),
 * then yield the CPU, as the holder may be descheduled (2 CPUs, 4 threads). */
static void lock_slow(struct vdev_alloc *a)
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
    uint64_t u = bytes >> 8;
    unsigned m = 63u - (unsigned)__builtin_clzll(u);
#if BIN_SUB == 0
    return m;
#else
    unsigned sub = m >= BIN_SUB ? (unsigned)(u >> (m - BIN_SUB)) : (unsigned)(u << (BIN_SUB - m));
    return (m << BIN_SUB) | (sub & (SUBS - 1));
#endif
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

/* Puts free chunk h into bin b, in address order. The walk stops at the
 * sentinel at the latest, whose address is all ones. (Walking from the nearer
 * end of the list measured no faster: the bins are short.) */
static inline void bin_insert(struct vdev_alloc *a, uint32_t h, unsigned b)
{
    struct chunk *ch = a->ch;
    uint64_t addr = ch[h].addr;
    uint32_t i = ch[b].fnext;
    while (ch[i].addr < addr)
        i = ch[i].fnext;
    uint32_t p = ch[i].fprev;
    ch[h].fprev = p;
    ch[h].fnext = i;
    ch[p].fnext = h;
    ch[i].fprev = h;
    bmap_set(a, b);
}

static inline void bin_remove(struct vdev_alloc *a, uint32_t h, unsigned b)
{
    struct chunk *ch = a->ch;
    uint32_t p = ch[h].fprev, n = ch[h].fnext;
    ch[p].fnext = n;
    ch[n].fprev = p;
    /* p == n only when both are the sentinel: the bin is now empty. */
    a->bmap[b >> 6] &= ~((uint64_t)(p == n) << (b & 63));
}

/* Puts h where old is in old's list. Valid when h belongs to the same bin and
 * no other chunk of that bin lies between their addresses. */
static inline void bin_replace(struct vdev_alloc *a, uint32_t old, uint32_t h)
{
    struct chunk *ch = a->ch;
    uint32_t p = ch[old].fprev, n = ch[old].fnext;
    ch[h].fprev = p;
    ch[h].fnext = n;
    ch[p].fnext = h;
    ch[n].fprev = h;
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

/* Grows the record array (doubling) so that at least `need` unused records
 * exist. The first call also lays out the sentinels. Handles stay valid: they
 * are indices. On host OOM nothing changes. */
static enum vdev_status records_reserve(struct vdev_alloc *a, uint32_t need)
{
    uint32_t have = 0;
    for (uint32_t i = a->free_rec; i != NIL && have < need; i = a->ch[i].fnext)
        have++;
    if (have >= need)
        return VDEV_OK;
    if (a->cap_ch > (NIL - 1) / 2)
        return vdev_error(VDEV_ERR_OOM, "%s: more than 2^31 chunks", a->name);
    uint32_t cap = a->cap_ch ? a->cap_ch * 2 : INITIAL_RECORDS;
    while (cap < FIRST_RECORD + need + 16)
        cap *= 2;
    if (a->trace) {
        uint64_t *nt = realloc(a->tid, (size_t)cap * sizeof *nt);
        if (!nt)
            return vdev_error(VDEV_ERR_OOM, "%s: host out of memory for trace ids", a->name);
        a->tid = nt;
    }
    struct chunk *nch = realloc(a->ch, (size_t)cap * sizeof *nch);
    if (!nch)
        return vdev_error(VDEV_ERR_OOM, "%s: host out of memory for chunk records", a->name);
    a->ch = nch;
    uint32_t from = a->cap_ch;
    if (from == 0) {
        /* Sentinels: bin heads (empty circular lists) and the region-end neighbour. */
        for (uint32_t s = 0; s <= NO_NEIGHBOUR; s++) {
            nch[s].addr = ALL_ONES;
            nch[s].szst = ALL_ONES;
            nch[s].prev = nch[s].next = NO_NEIGHBOUR;
            nch[s].fprev = nch[s].fnext = s;
        }
        from = FIRST_RECORD;
    }
    /* New records go on the stack, lowest index on top. */
    for (uint32_t i = cap; i-- > from;) {
        nch[i].szst = ST_UNUSED;
        nch[i].fnext = a->free_rec;
        a->free_rec = i;
        a->n_unused++;
    }
    a->cap_ch = cap;
    return VDEV_OK;
}

/* ------------------------------------------------------------------------ */
/* the fast path: taking a chunk, releasing a chunk */

/* Carves sz bytes out of the chosen free chunk and returns the live block's
 * record, or NIL when nothing fits. Needs one unused record. */
static inline __attribute__((always_inline)) uint32_t take(struct vdev_alloc *a, uint64_t sz)
{
    struct chunk *ch = a->ch;
    unsigned b = bin_of(sz);
    uint64_t key = sz | ST_FREE;
    /* Own bin, lowest address first; the sentinel (all ones) ends the walk. */
    uint32_t i = ch[b].fnext;
    while (ch[i].szst < key)
        i = ch[i].fnext;
    /* Every chunk of the higher sub-bins of the same octave fits: the lowest
     * address among their first chunks and i wins (sentinels: all ones). */
    unsigned top = b | (SUBS - 1);
    for (unsigned c = b + 1; c <= top; c++) {
        uint32_t j = ch[c].fnext;
        if (ch[j].addr < ch[i].addr) {
            i = j;
            b = c;
        }
    }
    if (i < N_BINS) {
        /* Nothing fits in the octave: the next non-empty octave, whose
         * chunks all fit, lowest address among its sub-bins. */
        uint32_t c0 = bmap_find(a, top + 1);
        if (c0 == NIL)
            return NIL;
        i = ch[c0].fnext;
        b = c0;
        top = c0 | (SUBS - 1);
        for (unsigned c = c0 + 1; c <= top; c++) {
            uint32_t j = ch[c].fnext;
            if (ch[j].addr < ch[i].addr) {
                i = j;
                b = c;
            }
        }
    }
    uint64_t s = csize(&ch[i]);
    if (s == sz) {
        bin_remove(a, i, b);
    } else {
        /* The block keeps the record and the low end; the rest gets a new
         * record and the chunk's place in address order. */
        uint32_t r = record_pop(a);
        uint32_t n = ch[i].next;
        ch[r].addr = ch[i].addr + sz;
        ch[r].szst = (s - sz) | ST_FREE;
        ch[r].prev = i;
        ch[r].next = n;
        ch[n].prev = r;
        ch[i].next = r;
        unsigned bn = bin_of(s - sz);
        if (bn == b) {
            bin_replace(a, i, r);
        } else {
            bin_remove(a, i, b);
            bin_insert(a, r, bn);
        }
    }
    ch[i].szst = sz | ST_LIVE;
    return i;
}

/* Makes chunk h free and merges it with its free neighbours. */
static inline __attribute__((always_inline)) void chunk_release(struct vdev_alloc *a, uint32_t h)
{
    struct chunk *ch = a->ch;
    uint64_t s = csize(&ch[h]);
    uint32_t p = ch[h].prev, n = ch[h].next;
    int pf = cstate(&ch[p]) == ST_FREE, nf = cstate(&ch[n]) == ST_FREE;
    if (pf) {
        /* p absorbs h (and n); p keeps its address, so its list place. */
        uint64_t ps = csize(&ch[p]), total = ps + s;
        uint32_t after = n;
        if (nf) {
            total += csize(&ch[n]);
            bin_remove(a, n, bin_of(csize(&ch[n])));
            after = ch[n].next;
            record_push(a, n);
        }
        ch[p].next = after;
        ch[after].prev = p;
        record_push(a, h);
        unsigned bp = bin_of(ps), bt = bin_of(total);
        ch[p].szst = total | ST_FREE;
        if (bt != bp) {
            bin_remove(a, p, bp);
            bin_insert(a, p, bt);
        }
    } else if (nf) {
        /* h absorbs n and takes n's list place when the bin stays the same. */
        uint64_t ns = csize(&ch[n]), total = s + ns;
        unsigned bn = bin_of(ns), bt = bin_of(total);
        uint32_t after = ch[n].next;
        ch[h].next = after;
        ch[after].prev = h;
        ch[h].szst = total | ST_FREE;
        if (bt == bn) {
            bin_replace(a, n, h);
        } else {
            bin_remove(a, n, bn);
            bin_insert(a, h, bt);
        }
        record_push(a, n);
    } else {
        ch[h].szst = s | ST_FREE;
        bin_insert(a, h, bin_of(s));
    }
}

/* ------------------------------------------------------------------------ */
/* lookup table (built on the first vdev_alloc_lookup, then kept up to date) */

static inline uint32_t lk_hash(const struct vdev_alloc *a, uint64_t addr)
{
    return (uint32_t)(((addr >> 8) * 0x9E3779B97F4A7C15ull) >> 32) & (a->lk_cap - 1);
}

static void lk_drop(struct vdev_alloc *a)
{
    free(a->lk);
    a->lk = NULL;
    a->lk_cap = a->lk_n = 0;
    a->hooks &= ~(unsigned)HOOK_LOOKUP;
}

static void lk_put(struct vdev_alloc *a, uint32_t h)
{
    uint32_t i = lk_hash(a, a->ch[h].addr);
    while (a->lk[i] != NIL)
        i = (i + 1) & (a->lk_cap - 1);
    a->lk[i] = h;
    a->lk_n++;
}

/* (Re)builds the table with room for twice `min_entries`; 0 on host OOM
 * (the table is then dropped and lookups scan the records). */
static int lk_build(struct vdev_alloc *a, uint64_t min_entries)
{
    uint64_t cap = 64;
    while (cap < 2 * min_entries + 2)
        cap *= 2;
    uint32_t *t = cap <= (1ull << 31) ? malloc((size_t)cap * sizeof *t) : NULL;
    if (!t) {
        lk_drop(a);
        return 0;
    }
    free(a->lk);
    a->lk = t;
    a->lk_cap = (uint32_t)cap;
    a->lk_n = 0;
    memset(t, 0xff, (size_t)cap * sizeof *t);
    for (uint32_t h = FIRST_RECORD; h < a->cap_ch; h++)
        if (cstate(&a->ch[h]) == ST_LIVE)
            lk_put(a, h);
    a->hooks |= HOOK_LOOKUP;
    return 1;
}

/* Adds live block h. A rebuild already picks h up, as it is live by now. */
static void lk_insert(struct vdev_alloc *a, uint32_t h)
{
    if (2 * ((uint64_t)a->lk_n + 1) > a->lk_cap)
        lk_build(a, (uint64_t)a->lk_n + 1);
    else
        lk_put(a, h);
}

/* Removes h; backward-shift deletion keeps every probe chain unbroken. */
static void lk_remove(struct vdev_alloc *a, uint32_t h)
{
    uint32_t mask = a->lk_cap - 1, i = lk_hash(a, a->ch[h].addr);
    while (a->lk[i] != h) {
        if (a->lk[i] == NIL)
            return;
        i = (i + 1) & mask;
    }
    for (uint32_t j = i;;) {
        j = (j + 1) & mask;
        if (a->lk[j] == NIL)
            break;
        uint32_t k = lk_hash(a, a->ch[a->lk[j]].addr);
        /* Entry j may move back to i unless its home k lies cyclically in (i, j]. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            a->lk[i] = a->lk[j];
            i = j;
        }
    }
    a->lk[i] = NIL;
    a->lk_n--;
}

/* ------------------------------------------------------------------------ */
/* pending frees */

static void set_pending_hook(struct vdev_alloc *a)
{
    if (a->n_pending)
        a->hooks |= HOOK_PENDING;
    else
        a->hooks &= ~(unsigned)HOOK_PENDING;
}

/* Frees the pending blocks whose events have passed (asking event_done), or
 * all of them after event_wait if `wait`; each event is dropped once. The
 * queue keeps its order. */
static void pending_poll(struct vdev_alloc *a, int wait)
{
    uint32_t j = 0;
    for (uint32_t i = 0; i < a->n_pending; i++) {
        struct pending p = a->pend[i];
        if (!wait && a->src.event_done && !a->src.event_done(a->src.ctx, p.event)) {
            a->pend[j++] = p;
            continue;
        }
        if (wait && a->src.event_wait)
            a->src.event_wait(a->src.ctx, p.event);
        if (a->src.event_drop)
            a->src.event_drop(a->src.ctx, p.event);
        a->pending_bytes -= csize(&a->ch[p.handle]);
        chunk_release(a, p.handle);
    }
    a->n_pending = j;
    set_pending_hook(a);
}

/* ------------------------------------------------------------------------ */
/* regions and growth */

static uint64_t largest_free(const struct vdev_alloc *a)
{
    /* The largest chunk is in the highest non-empty bin (ordered by address). */
    unsigned w = N_WORDS;
    while (w > 0 && !a->bmap[w - 1])
        w--;
    if (w == 0)
        return 0;
    unsigned b = ((w - 1) << 6) | (63u - (unsigned)__builtin_clzll(a->bmap[w - 1]));
    uint64_t best = 0;
    for (uint32_t i = a->ch[b].fnext; i != b; i = a->ch[i].fnext)
        if (csize(&a->ch[i]) > best)
            best = csize(&a->ch[i]);
    return best;
}

/* A free region slot: a released one, or a new one (the array grows as
 * needed); NIL on host OOM. Regions are few, so the scan is cheap. */
static uint32_t region_slot(struct vdev_alloc *a)
{
    for (uint32_t r = 0; r < a->n_reg_slots; r++)
        if (!a->reg[r].bytes)
            return r;
    if (a->n_reg_slots == a->cap_reg) {
        uint32_t cap = a->cap_reg ? a->cap_reg * 2 : 8;
        struct region *nr = realloc(a->reg, (size_t)cap * sizeof *nr);
        if (!nr)
            return NIL;
        a->reg = nr;
        a->cap_reg = cap;
    }
    a->reg[a->n_reg_slots].bytes = 0;
    return a->n_reg_slots++;
}

/* Records a region the source just handed out as one free chunk. The caller
 * has made sure an unused record and the slot exist. */
static void region_install(struct vdev_alloc *a, uint32_t slot, void *base, uint64_t bytes)
{
    uint32_t h = record_pop(a);
    a->ch[h].addr = (uint64_t)(uintptr_t)base;
    a->ch[h].szst = bytes | ST_FREE;
    a->ch[h].prev = a->ch[h].next = NO_NEIGHBOUR;
    bin_insert(a, h, bin_of(bytes));
    a->reg[slot].base = (uint64_t)(uintptr_t)base;
    a->reg[slot].bytes = bytes;
    a->reg[slot].first = h;
    a->n_regions++;
    a->reserved += bytes;
    if (a->reserved > a->peak_reserved)
        a->peak_reserved = a->reserved;
    a->last_region_bytes = bytes;
}

/* Asks the source for `want` bytes, backing off by 0.9x down to `need` while
 * it answers OOM (as TF's BFC does). */
static enum vdev_status reserve_backoff(struct vdev_alloc *a, uint64_t want, uint64_t need,
                                        void **base, uint64_t *got)
{
    for (;;) {
        enum vdev_status st = a->src.reserve(a->src.ctx, want, base);
        if (st == VDEV_OK) {
            if ((uintptr_t)*base % VDEV_ALLOC_ALIGN) {
                a->src.release(a->src.ctx, *base, want);
                return vdev_error(VDEV_ERR_BACKEND, "%s: region at %p is not 256-byte aligned",
                                  a->name, *base);
            }
            *got = want;
            return VDEV_OK;
        }
        if (st != VDEV_ERR_OOM || want == need)
            return st;
        uint64_t next = (want / 10 * 9) & SZ_MASK;
        want = next > need ? next : need;
    }
}

/* Why growth failed: the limit left no room (no message set), the source
 * said no (its message is set), or the host ran out (message set). */
enum why { WHY_LIMIT, WHY_SOURCE, WHY_HOST };

/* Grows the in-place region so that its free tail holds sz bytes: by the
 * region's size (doubling it) or what the request needs, capped by the limit,
 * backing off by 0.9x while the source answers OOM. The new space merges with
 * a free tail, so the region stays one free range at the top. */
static enum vdev_status grow_extend(struct vdev_alloc *a, uint64_t sz, enum why *why)
{
    struct region *r = &a->reg[a->ext_region];
    uint32_t t = r->first;
    while (a->ch[t].next != NO_NEIGHBOUR)
        t = a->ch[t].next;
    uint64_t tail = cstate(&a->ch[t]) == ST_FREE ? csize(&a->ch[t]) : 0;
    uint64_t need = sz - tail, avail = a->limit - a->reserved;
    if (need > avail)
        return VDEV_ERR_OOM;
    uint64_t want = r->bytes < avail ? r->bytes : avail; /* doubles the region */
    if (want < need)
        want = need;
    enum vdev_status st;
    for (;;) {
        st = a->src.extend(a->src.ctx, (void *)(uintptr_t)r->base, r->bytes, r->bytes + want);
        if (st != VDEV_ERR_OOM || want == need)
            break;
        uint64_t next = (want / 10 * 9) & SZ_MASK;
        want = next > need ? next : need;
    }
    if (st != VDEV_OK) {
        *why = WHY_SOURCE; /* the source said why */
        return st;
    }
    if (tail) {
        bin_remove(a, t, bin_of(tail));
        a->ch[t].szst = (tail + want) | ST_FREE;
        bin_insert(a, t, bin_of(tail + want));
    } else {
        uint32_t h = record_pop(a);
        a->ch[h].addr = r->base + r->bytes;
        a->ch[h].szst = want | ST_FREE;
        a->ch[h].prev = t;
        a->ch[h].next = NO_NEIGHBOUR;
        a->ch[t].next = h;
        bin_insert(a, h, bin_of(want));
    }
    r->bytes += want;
    a->reserved += want;
    if (a->reserved > a->peak_reserved)
        a->peak_reserved = a->reserved;
    a->last_region_bytes = r->bytes;
    return VDEV_OK;
}

/* GROW: adds (or extends) a region so that a free chunk of sz bytes exists.
 * VDEV_ERR_OOM when the limit or the source says no; another status when the
 * source fails otherwise. *why says which (see enum why); the thread's error
 * message is set unless the limit alone said no. Nothing observable changes
 * unless it succeeds. */
static enum vdev_status grow(struct vdev_alloc *a, uint64_t sz, enum why *why)
{
    *why = WHY_LIMIT;
    /* Two records: the new chunk and the rest of the split after it. */
    if (records_reserve(a, 2) != VDEV_OK) {
        *why = WHY_HOST;
        return VDEV_ERR_OOM;
    }
    if (a->src.extend && a->ext_region != NIL)
        return grow_extend(a, sz, why);
    uint64_t avail = a->limit - a->reserved;
    if (sz > avail)
        return VDEV_ERR_OOM;
    uint64_t want;
    if (a->last_region_bytes == 0)
        want = a->limit < FIRST_REGION_BYTES ? a->limit : FIRST_REGION_BYTES;
    else
        want = a->last_region_bytes > avail / 2 ? avail : 2 * a->last_region_bytes;
    if (want < sz)
        want = sz;
    if (want > avail)
        want = avail;
    uint32_t slot = region_slot(a);
    if (slot == NIL) {
        *why = WHY_HOST;
        return vdev_error(VDEV_ERR_OOM, "%s: host out of memory for regions", a->name);
    }
    void *base = NULL;
    uint64_t got = 0;
    *why = WHY_SOURCE; /* from here on, every failure is the source's, with its message */
    enum vdev_status st = reserve_backoff(a, want, sz, &base, &got);
    if (st != VDEV_OK)
        return st;
    *why = WHY_LIMIT;
    region_install(a, slot, base, got);
    if (a->src.extend)
        a->ext_region = slot;
    return VDEV_OK;
}

/* Whether region slot r is empty: one free chunk (no live or pending block). */
static int region_empty(const struct vdev_alloc *a, uint32_t r)
{
    const struct region *g = &a->reg[r];
    const struct chunk *c = &a->ch[g->first];
    return g->bytes && cstate(c) == ST_FREE && csize(c) == g->bytes;
}

/* Bytes in empty regions. */
static uint64_t empty_bytes(const struct vdev_alloc *a)
{
    uint64_t empty = 0;
    for (uint32_t r = 0; r < a->n_reg_slots; r++)
        if (region_empty(a, r))
            empty += a->reg[r].bytes;
    return empty;
}

/* Whether releasing the empty regions would leave room under the limit for
 * a new region of sz bytes (TensorFlow's test before it collects). */
static int release_makes_room(const struct vdev_alloc *a, uint64_t sz)
{
    uint64_t empty = a->policy == VDEV_POLICY_GROW ? empty_bytes(a) : 0;
    return empty && sz <= a->limit - a->reserved + empty;
}

/* Gives every empty region back to the source and returns the bytes released.
 * A region with a pending block is not empty, so it stays until the block's
 * event has passed. Releasing restarts the growth schedule: the next region
 * doubles the largest region still held (2 MiB when none is), not the
 * regions just released, which would make every release-and-grow cycle
 * reserve twice as much as the last (2, 4, 8 MiB ... then the limit). */
static uint64_t release_empty(struct vdev_alloc *a)
{
    uint64_t released = 0, held = 0;
    for (uint32_t r = 0; r < a->n_reg_slots; r++) {
        struct region *g = &a->reg[r];
        if (!g->bytes)
            continue;
        if (!region_empty(a, r)) {
            held = g->bytes > held ? g->bytes : held;
            continue;
        }
        bin_remove(a, g->first, bin_of(g->bytes));
        record_push(a, g->first);
        a->src.release(a->src.ctx, (void *)(uintptr_t)g->base, g->bytes);
        released += g->bytes;
        a->reserved -= g->bytes;
        a->n_regions--;
        g->bytes = 0;
        if (a->ext_region == r)
            a->ext_region = NIL;
    }
    if (released)
        a->last_region_bytes = held;
    return released;
}

/* Garbage collection before OOM, as TensorFlow's BFC allocator does it (its
 * DeallocateFreeRegions): when a request of sz bytes found no free chunk and
 * growth failed, and releasing the empty regions would leave room under the
 * limit for sz, syncs the device once (blocks freed with vdev_alloc_free()
 * may still be used by queued work) and releases them; the caller then
 * grows again. Regions holding a live or pending block stay; by the time
 * malloc gets here it has waited for every pending event. GROW only, and
 * only with a source that can sync. Returns the bytes released (0: nothing
 * was done). */
static uint64_t collect(struct vdev_alloc *a, uint64_t sz)
{
    if (!a->src.sync || !release_makes_room(a, sz))
        return 0;
    a->src.sync(a->src.ctx);
    return release_empty(a);
}

/* ------------------------------------------------------------------------ */
/* creation */

/* Checks the config, lays out the records and sentinels, and with PREALLOCATE
 * reserves the whole limit as one region. */
enum vdev_status vdev_alloc_new(const struct vdev_alloc_config *cfg, vdev_alloc_t **out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_new: out is NULL");
    *out = NULL;
    if (!cfg || !cfg->source.reserve || !cfg->source.release)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_new: no config or region source");
    if ((unsigned)cfg->policy >= VDEV_POLICY_COUNT)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_new: unknown policy %d",
                          (int)cfg->policy);
    uint64_t limit = cfg->limit_bytes & SZ_MASK;
    if (limit == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_new: limit %llu is below 256 bytes",
                          (unsigned long long)cfg->limit_bytes);
    struct vdev_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return vdev_error(VDEV_ERR_OOM, "vdev_alloc_new: host out of memory");
    atomic_init(&a->lock, 0);
    vdev_strlcpy(a->name, cfg->name ? cfg->name : "(unnamed device)", sizeof a->name);
    a->limit = limit;
    a->policy = cfg->policy;
    a->src = cfg->source;
    a->trace = cfg->trace;
    a->hooks = a->trace ? HOOK_TRACE : 0;
    a->free_rec = NIL;
    a->ext_region = NIL;
    enum vdev_status st = records_reserve(a, 1);
    if (st != VDEV_OK)
        goto fail;
    if (a->policy == VDEV_POLICY_PREALLOCATE) {
        uint32_t slot = region_slot(a);
        if (slot == NIL) {
            st = vdev_error(VDEV_ERR_OOM, "vdev_alloc_new: host out of memory");
            goto fail;
        }
        void *base = NULL;
        st = a->src.reserve(a->src.ctx, limit, &base);
        if (st != VDEV_OK) {
            char b[32];
            vdev_error_prefix("preallocating %s on %s", vdev_format_bytes(limit, b, sizeof b),
                              a->name);
            goto fail;
        }
        if ((uintptr_t)base % VDEV_ALLOC_ALIGN) {
            a->src.release(a->src.ctx, base, limit);
            st = vdev_error(VDEV_ERR_BACKEND, "%s: region at %p is not 256-byte aligned",
                            a->name, base);
            goto fail;
        }
        region_install(a, slot, base, limit);
        if (a->src.extend)
            a->ext_region = slot;
    }
    *out = a;
    return VDEV_OK;
fail:
    free(a->ch);
    free(a->tid);
    free(a->reg);
    free(a);
    return st;
}

/* Drops pending events, gives every region back, frees the bookkeeping. Live
 * blocks die with their regions; the caller must not use them any more. */
void vdev_alloc_destroy(vdev_alloc_t *a)
{
    if (!a)
        return;
    for (uint32_t i = 0; i < a->n_pending; i++)
        if (a->src.event_drop)
            a->src.event_drop(a->src.ctx, a->pend[i].event);
    for (uint32_t r = 0; r < a->n_reg_slots; r++)
        if (a->reg[r].bytes)
            a->src.release(a->src.ctx, (void *)(uintptr_t)a->reg[r].base, a->reg[r].bytes);
    free(a->ch);
    free(a->tid);
    free(a->reg);
    free(a->pend);
    free(a->lk);
    free(a);
}

/* ------------------------------------------------------------------------ */
/* malloc and free */

/* The free memory a request could have used, as blocks: every free chunk,
 * and the room left under the limit (where growth would put a region) as one
 * more block. With a source that extends in place, that room continues the
 * region's free tail, so the two are one block. O(free chunks). */
static void free_blocks(const struct vdev_alloc *a, uint64_t *total, uint64_t *n,
                        uint64_t *largest)
{
    const struct chunk *ch = a->ch;
    uint64_t room = a->limit - a->reserved;
    uint32_t tail = NIL;
    if (room && a->src.extend && a->ext_region != NIL) {
        uint32_t t = a->reg[a->ext_region].first;
        while (ch[t].next != NO_NEIGHBOUR)
            t = ch[t].next;
        if (cstate(&ch[t]) == ST_FREE)
            tail = t;
    }
    *total = room;
    *n = room ? 1 : 0;
    *largest = room + (tail != NIL ? csize(&ch[tail]) : 0);
    for (unsigned b = 0; b < N_BINS; b++)
        for (uint32_t i = ch[b].fnext; i != b; i = ch[i].fnext) {
            uint64_t s = csize(&ch[i]);
            *total += s;
            if (i == tail)
                continue;
            (*n)++;
            if (s > *largest)
                *largest = s;
        }
}

/* The OOM error of the header; counts the failure. Called with the lock.
 * sz: the request after rounding (bytes itself when it cannot be rounded).
 * Says which kind of failure it is and what would help, only what applies:
 *  - exhaustion (in use + sz > limit): by how much the limit is short;
 *  - the source said no below the limit (the physical device is full): its
 *    message, and that memory held by others on it would help;
 *  - host out of memory: its message;
 *  - otherwise fragmentation: the free memory in how many blocks, the
 *    largest; vdev_memory_release_cached() is suggested only when releasing
 *    empty regions would make room and garbage collection could not do it
 *    (a source without sync). */
static enum vdev_status fail_oom(struct vdev_alloc *a, uint64_t bytes, uint64_t sz, enum why why,
                                 const char *msg)
{
    char b0[32], b1[32], b2[32], b3[32], b4[32], b5[32];
    char tail[400];
    a->n_failed++;
    if (a->trace)
        vdev_alloc_trace_failed(a->trace, bytes);
    uint64_t room = a->limit - a->in_use;
    if (sz > room) {
        snprintf(tail, sizeof tail,
                 "; the limit is short by %s; would help: a larger limit, a smaller batch",
                 vdev_format_bytes(sz - room, b4, sizeof b4));
    } else if (why == WHY_SOURCE) {
        snprintf(tail, sizeof tail,
                 "; %s; would help: vdev_memory_release_cached() or memory growth on for the "
                 "other users of the physical device, a smaller batch",
                 msg);
    } else if (why == WHY_HOST) {
        snprintf(tail, sizeof tail, "; %s", msg);
    } else {
        uint64_t total, n, largest;
        free_blocks(a, &total, &n, &largest);
        int release = !a->src.sync && release_makes_room(a, sz);
        snprintf(tail, sizeof tail,
                 "; fragmentation: free %s in %llu block%s, largest %s; would help: %sa smaller "
                 "batch, a larger limit",
                 vdev_format_bytes(total, b4, sizeof b4), (unsigned long long)n, n == 1 ? "" : "s",
                 vdev_format_bytes(largest, b5, sizeof b5),
                 release ? "vdev_memory_release_cached(), " : "");
    }
    return vdev_error(VDEV_ERR_OOM,
                      "OOM when allocating %s (%llu bytes) on %s: %s in use of %s limit, largest "
                      "free block %s%s",
                      vdev_format_bytes(bytes, b0, sizeof b0), (unsigned long long)bytes, a->name,
                      vdev_format_bytes(a->in_use, b1, sizeof b1),
                      vdev_format_bytes(a->limit, b2, sizeof b2),
                      vdev_format_bytes(largest_free(a), b3, sizeof b3), tail);
}

/* Bad arguments or a size that cannot be rounded. */
static __attribute__((noinline)) enum vdev_status malloc_bad(struct vdev_alloc *a, uint64_t bytes,
                                                             struct vdev_block *out)
{
    if (!a || !out || bytes == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_malloc: %s",
                          bytes == 0 ? "zero bytes" : "NULL argument");
    lock(a);
    enum vdev_status st = fail_oom(a, bytes, bytes, WHY_LIMIT, NULL);
    unlock(a);
    return st;
}

/* The general path, with the lock held (released here): pending frees,
 * record growth, growth of the device memory, tracing, the lookup table. */
static __attribute__((noinline)) enum vdev_status malloc_slow(struct vdev_alloc *a, uint64_t bytes,
                                                              struct vdev_block *out)
{
    uint64_t sz = (bytes + VDEV_ALLOC_ALIGN - 1) & SZ_MASK;
    enum vdev_status st = VDEV_OK;
    uint32_t h;
    if (a->n_pending)
        pending_poll(a, 0);
    if (a->free_rec == NIL && (st = records_reserve(a, 1)) != VDEV_OK) {
        a->n_failed++;
        goto out;
    }
    h = take(a, sz);
    if (h == NIL && a->n_pending) {
        /* Rather than fail, wait for the blocks freed after events. */
        pending_poll(a, 1);
        h = take(a, sz);
    }
    if (h == NIL) {
        if (a->policy != VDEV_POLICY_GROW) {
            st = fail_oom(a, bytes, sz, WHY_LIMIT, NULL);
            goto out;
        }
        enum why why;
        st = grow(a, sz, &why);
        /* Garbage collection: release empty regions and grow again. */
        if (st == VDEV_ERR_OOM && why != WHY_HOST && collect(a, sz))
            st = grow(a, sz, &why);
        if (st == VDEV_ERR_OOM) {
            /* The standard message, then the source's reason if it gave one. */
            char msg[200] = "";
            if (why != WHY_LIMIT)
                vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
            st = fail_oom(a, bytes, sz, why, msg);
            goto out;
        }
        if (st != VDEV_OK) {
            char b0[32];
            a->n_failed++;
            vdev_error_prefix("allocating %s on %s", vdev_format_bytes(bytes, b0, sizeof b0),
                              a->name);
            goto out;
        }
        h = take(a, sz);
        VDEV_ASSERT(h != NIL);
    }
    a->in_use += sz;
    if (a->in_use > a->peak_in_use)
        a->peak_in_use = a->in_use;
    if (sz > a->largest_alloc)
        a->largest_alloc = sz;
    a->n_allocs_total++;
    if (a->trace)
        a->tid[h] = vdev_alloc_trace_alloc(a->trace, bytes);
    if (a->hooks & HOOK_LOOKUP)
        lk_insert(a, h);
    out->ptr = (void *)(uintptr_t)a->ch[h].addr;
    out->handle = h;
out:
    unlock(a);
    return st;
}

/* The fast path: lock, take a chunk, count, unlock. Anything unusual (hooks,
 * no spare record, nothing fits) goes to malloc_slow() with the lock held. */
enum vdev_status vdev_alloc_malloc(vdev_alloc_t *a, uint64_t bytes, struct vdev_block *out)
{
    if (__builtin_expect(!a || !out || bytes - 1 >= MAX_BYTES, 0))
        return malloc_bad(a, bytes, out);
    lock(a);
    if (__builtin_expect(a->hooks || a->free_rec == NIL, 0))
        return malloc_slow(a, bytes, out);
    uint64_t sz = (bytes + VDEV_ALLOC_ALIGN - 1) & SZ_MASK;
    uint32_t h = take(a, sz);
    if (__builtin_expect(h == NIL, 0))
        return malloc_slow(a, bytes, out);
    a->in_use += sz;
    if (a->in_use > a->peak_in_use)
        a->peak_in_use = a->in_use;
    if (sz > a->largest_alloc)
        a->largest_alloc = sz;
    a->n_allocs_total++;
    out->ptr = (void *)(uintptr_t)a->ch[h].addr;
    out->handle = h;
    unlock(a);
    return VDEV_OK;
}

/* Takes a live block out of use: checks the handle, counts, traces. */
static inline uint64_t block_retire(struct vdev_alloc *a, uint32_t handle)
{
    /* Sentinels read as state 3, unused records as 0: only live blocks pass. */
    VDEV_ASSERT(handle < a->cap_ch);
    VDEV_ASSERT(cstate(&a->ch[handle]) == ST_LIVE);
    uint64_t s = csize(&a->ch[handle]);
    a->in_use -= s;
    a->n_frees_total++;
    if (__builtin_expect(a->hooks, 0)) {
        if (a->trace)
            vdev_alloc_trace_free(a->trace, a->tid[handle]);
        if (a->hooks & HOOK_LOOKUP)
            lk_remove(a, handle);
    }
    return s;
}

/* Immediate free: the block is reusable by the next malloc, as every later
 * use of the device memory is ordered after it on the device's stream. */
void vdev_alloc_free(vdev_alloc_t *a, uint32_t handle)
{
    lock(a);
    block_retire(a, handle);
    chunk_release(a, handle);
    unlock(a);
}

/* Stream-ordered free across streams: the block leaves use now (statistics,
 * trace, lookup) but stays out of the bins, as pending, until its event has
 * passed; malloc polls the queue and waits on it before it would fail. */
void vdev_alloc_free_after(vdev_alloc_t *a, uint32_t handle, void *event)
{
    lock(a);
    uint64_t s = block_retire(a, handle);
    if (a->src.event_done && a->n_pending == a->cap_pend) {
        uint32_t cap = a->cap_pend ? a->cap_pend * 2 : 16;
        struct pending *np = realloc(a->pend, (size_t)cap * sizeof *np);
        if (np) {
            a->pend = np;
            a->cap_pend = cap;
        } else if (a->src.event_wait) {
            a->src.event_wait(a->src.ctx, event); /* host OOM: wait here instead */
        }
    }
    if (!a->src.event_done || a->n_pending == a->cap_pend) {
        /* No events (the event counts as passed), or waited for above. */
        if (a->src.event_drop)
            a->src.event_drop(a->src.ctx, event);
        chunk_release(a, handle);
        unlock(a);
        return;
    }
    a->ch[handle].szst = s | ST_PENDING;
    a->pending_bytes += s;
    a->pend[a->n_pending].handle = handle;
    a->pend[a->n_pending].event = event;
    a->n_pending++;
    set_pending_hook(a);
    unlock(a);
}

void vdev_alloc_flush_pending(vdev_alloc_t *a)
{
    lock(a);
    pending_poll(a, 1);
    unlock(a);
}

/* ------------------------------------------------------------------------ */
/* queries */

/* Builds the table on first use (turning on HOOK_LOOKUP, so malloc and free
 * keep it current), then probes it. */
enum vdev_status vdev_alloc_lookup(vdev_alloc_t *a, const void *ptr, uint32_t *handle)
{
    if (!a || !handle)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_lookup: NULL argument");
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    uint32_t found = NIL;
    lock(a);
    if (!(a->hooks & HOOK_LOOKUP))
        lk_build(a, a->n_allocs_total - a->n_frees_total);
    if (a->hooks & HOOK_LOOKUP) {
        for (uint32_t i = lk_hash(a, addr); a->lk[i] != NIL; i = (i + 1) & (a->lk_cap - 1))
            if (a->ch[a->lk[i]].addr == addr) {
                found = a->lk[i];
                break;
            }
    } else {
        /* No table (host OOM): scan the records. */
        for (uint32_t h = FIRST_RECORD; h < a->cap_ch; h++)
            if (cstate(&a->ch[h]) == ST_LIVE && a->ch[h].addr == addr) {
                found = h;
                break;
            }
    }
    unlock(a);
    if (found == NIL)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: no live block starts at %p", a->name, ptr);
    *handle = found;
    return VDEV_OK;
}

uint64_t vdev_alloc_block_size(vdev_alloc_t *a, uint32_t handle)
{
    lock(a);
    VDEV_ASSERT(handle < a->cap_ch && handle >= FIRST_RECORD &&
                cstate(&a->ch[handle]) == ST_LIVE);
    uint64_t s = csize(&a->ch[handle]);
    unlock(a);
    return s;
}

/* A snapshot under the lock. The counters are kept by malloc and free; the
 * largest free block and the number of chunks are computed here, so the fast
 * paths do not maintain them. */
void vdev_alloc_usage(vdev_alloc_t *a, uint64_t *in_use, uint64_t *reserved)
{
    lock(a);
    *in_use = a->in_use;
    *reserved = a->reserved;
    unlock(a);
}

void vdev_alloc_get_stats(vdev_alloc_t *a, struct vdev_alloc_stats *st)
{
    lock(a);
    memset(st, 0, sizeof *st);
    st->bytes_in_use = a->in_use;
    st->peak_bytes_in_use = a->peak_in_use;
    st->bytes_reserved = a->reserved;
    st->peak_bytes_reserved = a->peak_reserved;
    st->bytes_limit = a->limit;
    st->largest_free_block = largest_free(a);
    st->bytes_pending = a->pending_bytes;
    st->bytes_free = a->reserved - a->in_use - a->pending_bytes;
    st->n_allocs = a->n_allocs_total - a->n_frees_total;
    st->n_allocs_total = a->n_allocs_total;
    st->n_failed_allocs = a->n_failed;
    st->n_frees_total = a->n_frees_total;
    st->n_regions = a->n_regions;
    st->n_chunks = a->cap_ch - FIRST_RECORD - a->n_unused;
    st->fragmentation =
        st->bytes_free ? (double)(st->bytes_free - st->largest_free_block) / (double)st->bytes_free
                       : 0.0;
    st->largest_alloc_size = a->largest_alloc;
    unlock(a);
}

void vdev_alloc_reset_peak(vdev_alloc_t *a)
{
    lock(a);
    a->peak_in_use = a->in_use;
    a->peak_reserved = a->reserved;
    a->largest_alloc = 0;
    unlock(a);
}

/* GROW only: hands back every empty region (see release_empty), which also
 * restarts the growth schedule. */
uint64_t vdev_alloc_release_cached(vdev_alloc_t *a)
{
    uint64_t released = 0;
    lock(a);
    if (a->policy == VDEV_POLICY_GROW)
        released = release_empty(a);
    unlock(a);
    return released;
}

uint64_t vdev_alloc_host_bytes(vdev_alloc_t *a)
{
    lock(a);
    uint64_t b = sizeof *a + (uint64_t)a->cap_ch * sizeof(struct chunk) +
                 (a->tid ? (uint64_t)a->cap_ch * sizeof(uint64_t) : 0) +
                 (uint64_t)a->cap_reg * sizeof(struct region) +
                 (uint64_t)a->cap_pend * sizeof(struct pending) +
                 (uint64_t)a->lk_cap * sizeof(uint32_t);
    unlock(a);
    return b;
}

void vdev_alloc_for_each_region(vdev_alloc_t *a,
                                void (*fn)(void *user, void *base, uint64_t bytes, int used),
                                void *user)
{
    lock(a);
    for (uint32_t r = 0; r < a->n_reg_slots; r++) {
        const struct region *g = &a->reg[r];
        if (!g->bytes)
            continue;
        const struct chunk *c = &a->ch[g->first];
        int used = !(cstate(c) == ST_FREE && csize(c) == g->bytes);
        fn(user, (void *)(uintptr_t)g->base, g->bytes, used);
    }
    unlock(a);
}

/* ------------------------------------------------------------------------ */
/* invariant check */

#define BAD(...)                                                                                   \
    do {                                                                                           \
        st = vdev_error(VDEV_ERR_INTERNAL, __VA_ARGS__);                                           \
        goto out;                                                                                  \
    } while (0)

/* The heap walk of the tests: everything the fast paths rely on, checked
 * from scratch — sentinels, region tiling and links, no two free neighbours,
 * bins (membership, order, back links, bitmap), the unused-record stack, the
 * counters, the pending queue and the hook flags. O(chunks + bins). */
enum vdev_status vdev_alloc_check(vdev_alloc_t *a)
{
    enum vdev_status st = VDEV_OK;
    lock(a);
    const struct chunk *ch = a->ch;
    uint64_t in_use = 0, pend = 0, reserved = 0, n_live = 0, n_free = 0, n_used = 0;
    uint32_t n_reg = 0;
    /* Sentinels keep their all-ones address and size. */
    for (uint32_t s = 0; s <= NO_NEIGHBOUR; s++)
        if (ch[s].addr != ALL_ONES || ch[s].szst != ALL_ONES)
            BAD("sentinel record %u was overwritten", s);
    /* Regions: chunks tile each region, links agree, no two free neighbours. */
    for (uint32_t r = 0; r < a->n_reg_slots; r++) {
        const struct region *g = &a->reg[r];
        if (!g->bytes)
            continue;
        n_reg++;
        reserved += g->bytes;
        if (g->base % VDEV_ALLOC_ALIGN || g->bytes % VDEV_ALLOC_ALIGN)
            BAD("region %u misaligned", r);
        uint64_t at = g->base;
        uint32_t prev = NO_NEIGHBOUR;
        for (uint32_t h = g->first; h != NO_NEIGHBOUR; prev = h, h = ch[h].next) {
            if (h < FIRST_RECORD || h >= a->cap_ch)
                BAD("region %u: chunk index %u out of range", r, h);
            const struct chunk *c = &ch[h];
            if (++n_used > a->cap_ch)
                BAD("region %u: chunk list loops", r);
            if (c->addr != at || c->prev != prev || csize(c) == 0)
                BAD("region %u: chunk %u at %#llx (expected %#llx), prev %u (expected %u), size "
                    "%llu",
                    r, h, (unsigned long long)c->addr, (unsigned long long)at, c->prev, prev,
                    (unsigned long long)csize(c));
            switch (cstate(c)) {
            case ST_FREE:
                n_free++;
                if (prev != NO_NEIGHBOUR && cstate(&ch[prev]) == ST_FREE)
                    BAD("chunks %u and %u are adjacent and both free", prev, h);
                break;
            case ST_LIVE:
                n_live++;
                in_use += csize(c);
                break;
            case ST_PENDING:
                pend += csize(c);
                break;
            default:
                BAD("chunk %u in region %u is an unused record", h, r);
            }
            at += csize(c);
        }
        if (at != g->base + g->bytes)
            BAD("region %u: chunks cover %llu of %llu bytes", r,
                (unsigned long long)(at - g->base), (unsigned long long)g->bytes);
    }
    /* Bins: exactly the free chunks, each in its bin, in address order. */
    uint64_t n_binned = 0;
    for (unsigned b = 0; b < N_BINS; b++) {
        int bit = (int)((a->bmap[b >> 6] >> (b & 63)) & 1);
        if (bit != (ch[b].fnext != b))
            BAD("bin %u: bitmap bit %d disagrees with its list", b, bit);
        uint32_t prev = b;
        for (uint32_t h = ch[b].fnext; h != b; prev = h, h = ch[h].fnext) {
            if (h < FIRST_RECORD || h >= a->cap_ch || ++n_binned > n_free)
                BAD("bin %u holds more chunks than are free, or a bad index", b);
            if (cstate(&ch[h]) != ST_FREE || bin_of(csize(&ch[h])) != b || ch[h].fprev != prev)
                BAD("bin %u: chunk %u is not free, misfiled or mislinked", b, h);
            if (prev != b && ch[prev].addr >= ch[h].addr)
                BAD("bin %u is not in address order at chunk %u", b, h);
        }
        if (ch[b].fprev != prev)
            BAD("bin %u: the sentinel's back link is wrong", b);
    }
    if (N_BINS % 64 && a->bmap[N_WORDS - 1] >> (N_BINS % 64))
        BAD("bitmap bits set beyond the last bin");
    if (n_binned != n_free)
        BAD("%llu free chunks but %llu in the bins", (unsigned long long)n_free,
            (unsigned long long)n_binned);
    uint64_t n_unused = 0;
    for (uint32_t h = a->free_rec; h != NIL; h = ch[h].fnext)
        if (++n_unused > a->cap_ch || h < FIRST_RECORD || cstate(&ch[h]) != ST_UNUSED)
            BAD("the unused-record stack is corrupt at %u", h);
    if (n_unused != a->n_unused)
        BAD("%llu unused records on the stack, the count says %u", (unsigned long long)n_unused,
            a->n_unused);
    if (n_used + n_unused + FIRST_RECORD != a->cap_ch)
        BAD("%llu chunks in regions and %llu unused records, of %u", (unsigned long long)n_used,
            (unsigned long long)n_unused, a->cap_ch - FIRST_RECORD);
    if (in_use != a->in_use || n_live != a->n_allocs_total - a->n_frees_total ||
        pend != a->pending_bytes || reserved != a->reserved || n_reg != a->n_regions)
        BAD("statistics disagree: in use %llu/%llu, live %llu/%llu, pending %llu/%llu, "
            "reserved %llu/%llu, regions %u/%u",
            (unsigned long long)in_use, (unsigned long long)a->in_use, (unsigned long long)n_live,
            (unsigned long long)(a->n_allocs_total - a->n_frees_total), (unsigned long long)pend,
            (unsigned long long)a->pending_bytes, (unsigned long long)reserved,
            (unsigned long long)a->reserved, n_reg, a->n_regions);
    if (a->reserved > a->limit || a->peak_reserved < a->reserved || a->peak_in_use < a->in_use)
        BAD("reserved %llu exceeds the limit %llu or a peak is below its current value",
            (unsigned long long)a->reserved, (unsigned long long)a->limit);
    for (uint32_t i = 0; i < a->n_pending; i++)
        if (cstate(&ch[a->pend[i].handle]) != ST_PENDING)
            BAD("pending entry %u names chunk %u, which is not pending", i, a->pend[i].handle);
    if (!!a->n_pending != !!(a->hooks & HOOK_PENDING) || !!a->trace != !!(a->hooks & HOOK_TRACE))
        BAD("hook flags %#x disagree with the state", a->hooks);
    if ((a->hooks & HOOK_LOOKUP) && a->lk_n != n_live)
        BAD("lookup table holds %u blocks, %llu are live", a->lk_n, (unsigned long long)n_live);
out:
    unlock(a);
    return st;
}

/* ------------------------------------------------------------------------ */
/* state dump (VDEV_OOM_REPORT) */

struct dump_bin {
    uint64_t n_chunks, n_in_use, bytes, bytes_in_use;
};

#define DUMP_TOP 10

/* Prints the allocator's state in the shape of TensorFlow's BFC dump after an
 * out-of-memory failure: per power-of-two bin, chunks and bytes in use and
 * free; the largest free block; and the biggest live blocks, each with the
 * tag the caller gives its handle (the op that made it). Walks every chunk
 * under the lock: O(chunks). */
void vdev_alloc_dump(vdev_alloc_t *a, FILE *f, const char *(*tag_of)(void *user, uint32_t handle),
                     void *user)
{
    struct dump_bin bins[64];
    memset(bins, 0, sizeof bins);
    uint32_t top[DUMP_TOP];
    int n_top = 0;
    char b1[32], b2[32], b3[32];
    lock(a);
    for (uint32_t r = 0; r < a->n_reg_slots; r++) {
        const struct region *g = &a->reg[r];
        if (!g->bytes)
            continue;
        for (uint32_t h = g->first; h != NO_NEIGHBOUR; h = a->ch[h].next) {
            const struct chunk *c = &a->ch[h];
            uint64_t sz = csize(c);
            unsigned b = 63u - (unsigned)__builtin_clzll(sz >> 8 ? sz >> 8 : 1);
            int live = cstate(c) != ST_FREE;
            bins[b].n_chunks++;
            bins[b].bytes += sz;
            if (live) {
                bins[b].n_in_use++;
                bins[b].bytes_in_use += sz;
                /* keep the DUMP_TOP largest live blocks, largest first */
                int k;
                if (n_top < DUMP_TOP)
                    k = n_top++;
                else if (csize(&a->ch[top[DUMP_TOP - 1]]) >= sz)
                    continue;
                else
                    k = DUMP_TOP - 1;
                while (k > 0 && csize(&a->ch[top[k - 1]]) < sz) {
                    top[k] = top[k - 1];
                    k--;
                }
                top[k] = h;
            }
        }
    }
    fprintf(f, "Allocator (%s) state: %s in use of %s limit, %s reserved in %u region%s\n",
            a->name, vdev_format_bytes(a->in_use, b1, sizeof b1),
            vdev_format_bytes(a->limit, b2, sizeof b2), vdev_format_bytes(a->reserved, b3, sizeof b3),
            a->n_regions, a->n_regions == 1 ? "" : "s");
    for (unsigned b = 0; b < 64; b++) {
        if (!bins[b].n_chunks)
            continue;
        fprintf(f, "Bin (%s): \tTotal Chunks: %llu, Chunks in use: %llu. %s allocated for chunks. ",
                vdev_format_bytes(256ull << b, b1, sizeof b1),
                (unsigned long long)bins[b].n_chunks, (unsigned long long)bins[b].n_in_use,
                vdev_format_bytes(bins[b].bytes, b2, sizeof b2));
        fprintf(f, "%s in use in bin. %s free in bin.\n",
                vdev_format_bytes(bins[b].bytes_in_use, b1, sizeof b1),
                vdev_format_bytes(bins[b].bytes - bins[b].bytes_in_use, b3, sizeof b3));
    }
    uint64_t lf = largest_free(a);
    uint64_t free_bytes = a->reserved - a->in_use - a->pending_bytes;
    fprintf(f, "Largest free block: %s; free in reserved regions: %s (fragmentation %.3f); "
               "room left to grow: %s\n",
            vdev_format_bytes(lf, b1, sizeof b1), vdev_format_bytes(free_bytes, b2, sizeof b2),
            free_bytes ? (double)(free_bytes - lf) / (double)free_bytes : 0.0,
            vdev_format_bytes(a->limit > a->reserved ? a->limit - a->reserved : 0, b3, sizeof b3));
    fprintf(f, "Biggest live blocks:\n");
    for (int i = 0; i < n_top; i++) {
        const struct chunk *c = &a->ch[top[i]];
        const char *tag = tag_of ? tag_of(user, top[i]) : NULL;
        fprintf(f, "  %12s at 0x%llx  made by %s\n", vdev_format_bytes(csize(c), b1, sizeof b1),
                (unsigned long long)c->addr, tag ? tag : "(unknown)");
    }
    unlock(a);
}
