/* alloc.c — the device-memory allocator: segregated fit with lowest-address
 * choice inside each size class and immediate coalescing, over regions from a
 * region source.
 *
 * Policy. Free chunks are binned by the power of two of their size (in 256-byte
 * units). A request takes the lowest-addressed chunk of its own bin that fits;
 * if none does, the lowest-addressed chunk of the next non-empty bin (every
 * chunk there fits).
 * This is address-ordered first fit within power-of-two size classes: it
 * packs live blocks toward low addresses, keeps large free space together,
 * and reuses a hole with a block of about the same size. On the traces in
 * ../shared/traces it needs less memory than exact best fit with address
 * tie-breaks (BFC's rule): the same on the two training traces (within
 * 0.4% of the peak), and 1.27 x the peak instead of 1.34 on the synthetic one
 * (mean of 1.27 against 1.35 on seven synthetic traces of that kind), while
 * LIFO or FIFO order inside the same bins needs 1.39-1.43 x. See
 * BENCHMARKS.md, "Allocator". (Johnstone and Wilson, "The Memory Fragmentation
 * Problem: Solved?", ISMM 1998, found address-ordered policies best too.)
 *
 * Data structures. Every region is tiled by chunks: address-ordered, doubly
 * linked (prev/next), each free, live or pending (freed after an event).
 * Chunk records live on the host in one growable array, named by index; the
 * index of a live block is its handle, so free is O(1) with no lookup. A
 * record is 32 bytes; the state sits in the low bits of the size, which is a
 * multiple of 256. The first records are sentinels: one per bin, heading that
 * bin's circular free list (address and size all ones), and one that stands
 * for "no neighbour" at region ends (never free, so merges need no end
 * test). A bitmap of non-empty bins finds the next non-empty bin in O(1).
 * A bin's list is in no order: a free chunk goes in at the front, and malloc
 * scans the bin for the lowest address that fits without a branch per chunk
 * (alloc_impl.h, bin_lowest, says why and what it costs). A bin that a scan
 * found longer than 64 chunks is also kept in a tree by address, which finds
 * the same chunk in O(log n) (alloc_tree.c); while any bin has one, malloc
 * takes the general path, whose bin operations keep the trees.
 *
 * Splitting and merging keep list places where they can: the rest of a split
 * chunk and a chunk merged with its upper neighbour take the old chunk's place
 * in its list when the bin is unchanged; a merge into the lower neighbour
 * keeps that neighbour's place. Only a chunk that changes bin, or a freed
 * block with no free neighbour, is put in at the front of its bin.
 *
 * Everything else — growth and garbage collection (empty regions released
 * before an OOM), stream-ordered frees, tracing, the lookup table, the OOM
 * diagnosis — is off the fast path: one flag word (`hooks`) sends malloc/free
 * to the general path when any of them is active, and a request that finds
 * no chunk goes there too. The lock is a test-and-test-and-set
 * spinlock with pause/yield backoff: an uncontended call pays one atomic
 * exchange and one store.
 *
 * Files: this one holds the fast path, creation, pending frees and the
 * lookup table; alloc_grow.c regions, growth and garbage collection;
 * alloc_oom.c the OOM diagnosis; alloc_stats.c statistics, the invariant
 * check and the dump; alloc_tree.c long bins' trees;
 * alloc_impl.h the layout and inline operations they share.
 */
#define _GNU_SOURCE
#include "alloc/alloc_impl.h"
#include "alloc/govern.h"

/* ------------------------------------------------------------------------ */
/* records */

/* VDEV_ERR_OOM "<device>: host out of memory for <what>", marked as the host's, so a
 * caller can tell it from the device's lack of room (vdev_error_is_host). */
static enum vdev_status host_oom(const struct vdev_alloc *a, const char *what)
{
    vdev_error(VDEV_ERR_OOM, "%s: host out of memory for %s", a->name, what);
    vdev_error_mark_host();
    return VDEV_ERR_OOM;
}

/* Grows the record array (by half its size each time, which keeps growth
 * amortised O(1) while leaving at most a third of the array unused: the
 * bookkeeping stays near 32 bytes per chunk) so that at least `need` unused
 * records exist. The first call also lays out the sentinels. Handles stay
 * valid: they are indices. On host OOM nothing changes. */
enum vdev_status vdev_alloc_records_reserve(struct vdev_alloc *a, uint32_t need)
{
    uint32_t have = 0;
    for (uint32_t i = a->free_rec; i != NIL && have < need; i = a->ch[i].fnext)
        have++;
    if (have >= need)
        return VDEV_OK;
    if (a->cap_ch > (NIL - 1) / 2)
        return vdev_error(VDEV_ERR_OOM, "%s: more than 2^31 chunks", a->name);
    uint32_t cap = a->cap_ch ? a->cap_ch + a->cap_ch / 2 : INITIAL_RECORDS;
    while (cap < FIRST_RECORD + need + 16)
        cap += cap / 2;
    if (a->trace) {
        uint64_t *nt = vdev_realloc(a->tid, (size_t)cap * sizeof *nt);
        if (!nt)
            return host_oom(a, "trace ids");
        a->tid = nt;
    }
    if (vdev_alloc_tree_reserve(a, cap) != VDEV_OK)
        return host_oom(a, "chunk records");
    struct chunk *nch = vdev_realloc(a->ch, (size_t)cap * sizeof *nch);
    if (!nch)
        return host_oom(a, "chunk records");
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
 * record, or NIL when nothing fits. Needs one unused record. `trees`: 0 when
 * no bin has a tree (alloc_impl.h). */
static inline __attribute__((always_inline)) uint32_t take_in(struct vdev_alloc *a, uint64_t sz,
                                                              int trees)
{
    struct chunk *ch = a->ch;
    unsigned b = bin_of(sz);
    uint32_t i = bin_choose(a, b, sz | ST_FREE, trees);
    if (i == b) {
        /* Nothing fits in the own bin: the next non-empty one, whose chunks
         * all fit. */
        uint32_t c0 = bmap_find(a, b + 1);
        if (c0 == NIL)
            return NIL;
        b = c0;
        i = bin_choose(a, b, 0, trees);
    }
    uint64_t s = csize(&ch[i]);
    if (s == sz) {
        bin_remove(a, i, b, trees);
    } else {
        /* The block keeps the record and the low end; the rest gets a new
         * record, and the chunk's list place when it stays in the bin. */
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
            bin_replace(a, i, r, b, trees);
        } else {
            bin_remove(a, i, b, trees);
            bin_insert(a, r, bn, trees);
        }
    }
    ch[i].szst = sz | ST_LIVE;
    return i;
}

/* The fast path's take (no bin has a tree: malloc sends the other case to
 * malloc_slow) and the general path's. */
static inline __attribute__((always_inline)) uint32_t take_fast(struct vdev_alloc *a, uint64_t sz)
{
    return take_in(a, sz, 0);
}

static uint32_t take(struct vdev_alloc *a, uint64_t sz)
{
    if (a->tree_want)
        vdev_alloc_tree_build_wanted(a);
    return take_in(a, sz, 1);
}

/* Makes chunk h free and merges it with its free neighbours. */
static inline __attribute__((always_inline)) void release_in(struct vdev_alloc *a, uint32_t h,
                                                             int trees)
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
            bin_remove(a, n, bin_of(csize(&ch[n])), trees);
            after = ch[n].next;
            record_push(a, n);
        }
        ch[p].next = after;
        ch[after].prev = p;
        record_push(a, h);
        unsigned bp = bin_of(ps), bt = bin_of(total);
        ch[p].szst = total | ST_FREE;
        if (bt != bp) {
            bin_remove(a, p, bp, trees);
            bin_insert(a, p, bt, trees);
        } else if (trees && bin_in_tree(a, bp)) {
            vdev_alloc_tree_grew(a, bp, p); /* larger in its place */
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
            bin_replace(a, n, h, bn, trees);
        } else {
            bin_remove(a, n, bn, trees);
            bin_insert(a, h, bt, trees);
        }
        record_push(a, n);
    } else {
        ch[h].szst = s | ST_FREE;
        bin_insert(a, h, bin_of(s), trees);
    }
}

/* Frees chunk h into the bins, keeping the trees when some bin has one. */
static inline __attribute__((always_inline)) void chunk_release(struct vdev_alloc *a, uint32_t h)
{
    if (__builtin_expect(a->hooks & HOOK_TREES, 0))
        release_in(a, h, 1);
    else
        release_in(a, h, 0);
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
    uint32_t *t = cap <= (1ull << 31) ? vdev_malloc((size_t)cap * sizeof *t) : NULL;
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
/* creation */

/* Checks the config, lays out the records and sentinels, and with PREALLOCATE
 * reserves prealloc_bytes (the whole limit by default) as one pinned region,
 * claimed from the card's pool first when governed. */
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
    struct vdev_alloc *a = vdev_calloc(1, sizeof *a);
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
    a->pool = cfg->pool;
    a->member = cfg->member;
    a->pinned = a->unpinned = NIL;
    uint64_t pre = cfg->prealloc_bytes & SZ_MASK;
    if (!pre || pre > limit)
        pre = limit;
    uint64_t claimed = 0;
    enum vdev_status st = vdev_alloc_records_reserve(a, 1);
    if (st != VDEV_OK)
        goto fail;
    if (a->policy == VDEV_POLICY_PREALLOCATE) {
        uint32_t slot = vdev_alloc_region_slot(a);
        if (slot == NIL) {
            st = vdev_error(VDEV_ERR_OOM, "vdev_alloc_new: host out of memory");
            goto fail;
        }
        if (a->pool && !(claimed = vdev_pool_claim(a->pool, a->member, pre, pre))) {
            char b[32];
            st = vdev_error(VDEV_ERR_OOM, "preallocating %s on %s: the card's pool has no room",
                            vdev_format_bytes(pre, b, sizeof b), a->name);
            goto fail;
        }
        void *base = NULL;
        limit = pre;
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
        vdev_alloc_region_install(a, slot, base, limit);
        a->pinned = slot;
        a->pinned_bytes = limit;
        if (a->src.extend)
            a->ext_region = slot;
    }
    *out = a;
    return VDEV_OK;
fail:
    if (claimed)
        vdev_pool_unclaim(a->pool, a->member, claimed);
    vdev_alloc_tree_free(a);
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
    if (a->pool) {
        vdev_pool_unclaim(a->pool, a->member, a->reserved);
        vdev_pool_attach(a->pool, a->member, NULL);
    }
    vdev_alloc_tree_free(a);
    free(a->ch);
    free(a->tid);
    free(a->reg);
    free(a->pend);
    free(a->lk);
    free(a);
}
/* ------------------------------------------------------------------------ */
/* malloc and free */

/* Bad arguments or a size that cannot be rounded. */
static __attribute__((noinline)) enum vdev_status malloc_bad(struct vdev_alloc *a, uint64_t bytes,
                                                             struct vdev_block *out)
{
    if (!a || !out || bytes == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_malloc: %s",
                          bytes == 0 ? "zero bytes" : "NULL argument");
    lock(a);
    enum vdev_status st = vdev_alloc_fail_oom(a, bytes, bytes, WHY_LIMIT, NULL);
    unlock(a);
    return st;
}

/* The general path, with the lock held (released here): pending frees,
 * record growth, a limit lowered below what is reserved, growth of the
 * device memory (alloc_grow.c, which may release the lock to let other
 * devices lend, and then this starts over), tracing, the lookup table. */
static __attribute__((noinline)) enum vdev_status malloc_slow(struct vdev_alloc *a, uint64_t bytes,
                                                              struct vdev_block *out)
{
    uint64_t sz = (bytes + VDEV_ALLOC_ALIGN - 1) & SZ_MASK;
    enum vdev_status st = VDEV_OK;
    uint32_t h;
    for (int round = 0;; round++) {
        if (a->n_pending)
            pending_poll(a, 0);
        if ((a->hooks & HOOK_OVER) && (st = vdev_alloc_over_limit(a, bytes, sz)) != VDEV_OK)
            goto out;
        if (a->free_rec == NIL && (st = vdev_alloc_records_reserve(a, 1)) != VDEV_OK) {
            vdev_alloc_count_failed(a);
            goto out;
        }
        h = take(a, sz);
        if (h == NIL && a->n_pending) {
            /* Rather than fail, wait for the blocks freed after events. */
            pending_poll(a, 1);
            h = take(a, sz);
        }
        if (h != NIL)
            break;
        int again;
        if ((st = vdev_alloc_make_room(a, bytes, sz, round, &again)) != VDEV_OK)
            goto out;
        if (again)
            continue;
        h = take(a, sz);
        VDEV_ASSERT(h != NIL);
        break;
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
    uint32_t h = take_fast(a, sz);
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

_Thread_local int vdev_alloc_quiet;

enum vdev_status vdev_alloc_malloc_quiet(vdev_alloc_t *a, uint64_t bytes, struct vdev_block *out)
{
    vdev_alloc_quiet++;
    enum vdev_status st = vdev_alloc_malloc(a, bytes, out);
    vdev_alloc_quiet--;
    return st;
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
    if (__builtin_expect(a->hooks & HOOK_OVER, 0))
        vdev_alloc_over_freed(a); /* a region emptied above a lowered limit goes */
    else
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
        struct pending *np = vdev_realloc(a->pend, (size_t)cap * sizeof *np);
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
        if (a->hooks & HOOK_OVER)
            vdev_alloc_over_freed(a);
        else
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
