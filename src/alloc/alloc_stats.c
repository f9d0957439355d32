/* alloc_stats.c — the allocator's statistics (and the watcher told of its
 * reserved bytes), region walk, host-memory count, invariant check and
 * state dump.
 *
 * The counters (in use, peaks, largest allocation, totals) are kept by
 * malloc and free in alloc.c; what the fast paths do not maintain (the
 * largest free block, the number of chunks) is computed here under the lock.
 * vdev_alloc_check() walks every region, chunk and bin from scratch (the
 * tests call it after every step); vdev_alloc_dump() prints the state in the
 * shape of TensorFlow's BFC allocator dump after an OOM.
 */
#define _GNU_SOURCE
#include "alloc/alloc_impl.h"
#include "alloc/govern.h"

/* ------------------------------------------------------------------------ */
/* statistics */

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

void vdev_alloc_usage_call(vdev_alloc_t *a, vdev_alloc_usage_fn fn, void *user)
{
    lock(a);
    fn(user, a->in_use, a->reserved);
    unlock(a);
}

void vdev_alloc_watch(vdev_alloc_t *a, vdev_alloc_usage_fn fn, void *user)
{
    lock(a);
    a->watch = fn;
    a->watch_user = user;
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
    st->largest_free_block = vdev_alloc_largest_free(a);
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

uint64_t vdev_alloc_host_bytes(vdev_alloc_t *a)
{
    lock(a);
    uint64_t b = sizeof *a + (uint64_t)a->cap_ch * sizeof(struct chunk) +
                 (a->tid ? (uint64_t)a->cap_ch * sizeof(uint64_t) : 0) +
                 (uint64_t)a->cap_reg * sizeof(struct region) +
                 (uint64_t)a->cap_pend * sizeof(struct pending) +
                 (uint64_t)a->lk_cap * sizeof(uint32_t) + vdev_alloc_tree_bytes(a);
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
    /* Bins: exactly the free chunks, each in its bin (in no order). */
    uint64_t n_binned = 0;
    for (unsigned b = 0; b < N_BINS; b++) {
        int bit = (int)((a->bmap[b >> 6] >> (b & 63)) & 1);
        if (bit != (ch[b].fnext != b))
            BAD("bin %u: bitmap bit %d disagrees with its list", b, bit);
        uint32_t prev = b;
        uint64_t before = n_binned;
        for (uint32_t h = ch[b].fnext; h != b; prev = h, h = ch[h].fnext) {
            if (h < FIRST_RECORD || h >= a->cap_ch || ++n_binned > n_free)
                BAD("bin %u holds more chunks than are free, or a bad index", b);
            if (cstate(&ch[h]) != ST_FREE || bin_of(csize(&ch[h])) != b || ch[h].fprev != prev)
                BAD("bin %u: chunk %u is not free, misfiled or mislinked", b, h);
        }
        if (ch[b].fprev != prev)
            BAD("bin %u: the sentinel's back link is wrong", b);
        if ((a->tmap >> b) & 1) {
            const char *e = vdev_alloc_tree_check(a, b, n_binned - before);
            if (e)
                BAD("bin %u's tree: %s", b, e);
        }
    }
    if (N_BINS < 64 && a->tmap >> (N_BINS % 64))
        BAD("tree bits set beyond the last bin");
    if (!!(a->tmap | a->tree_want) != !!(a->hooks & HOOK_TREES))
        BAD("hook flags %#x disagree with the trees", a->hooks);
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
    /* More may be reserved than the limit only after the limit was lowered
     * at run time, and then HOOK_OVER must send malloc to the general path. */
    if ((a->reserved > a->limit && !a->limit_lowered) || a->peak_reserved < a->reserved ||
        a->peak_in_use < a->in_use)
        BAD("reserved %llu exceeds the limit %llu or a peak is below its current value",
            (unsigned long long)a->reserved, (unsigned long long)a->limit);
    if (!!(a->hooks & HOOK_OVER) != (a->reserved > a->limit))
        BAD("hook flags %#x disagree with reserved %llu and limit %llu", a->hooks,
            (unsigned long long)a->reserved, (unsigned long long)a->limit);
    if (a->pinned != NIL && (a->pinned >= a->n_reg_slots || !a->reg[a->pinned].bytes))
        BAD("the pinned region %u is not held", a->pinned);
    if (a->pool && vdev_pool_reserved(a->pool, a->member) != a->reserved)
        BAD("the card's pool counts %llu bytes reserved, the allocator holds %llu",
            (unsigned long long)vdev_pool_reserved(a->pool, a->member),
            (unsigned long long)a->reserved);
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
            vdev_format_bytes(a->limit, b2, sizeof b2),
            vdev_format_bytes(a->reserved, b3, sizeof b3), a->n_regions,
            a->n_regions == 1 ? "" : "s");
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
    uint64_t lf = vdev_alloc_largest_free(a);
    uint64_t free_bytes = a->reserved - a->in_use - a->pending_bytes;
    /* The room to grow is what the device may still reserve: under its limit
     * and, on a shared card, under what the card's other devices leave it
     * (the available_bytes of vdev_memory_get_limits, and what the OOM
     * message says the card has left); when the card leaves less, the room
     * under the limit is said too, so the two figures are not mistaken for
     * one another. An empty preallocated region counts as room: a request
     * that needs it replaces it (vdev_alloc_pinned_spare). */
    uint64_t spare = vdev_alloc_pinned_spare(a);
    uint64_t held = a->reserved > spare ? a->reserved - spare : 0;
    uint64_t under_limit = a->limit > held ? a->limit - held : 0, room = under_limit;
    if (a->pool) {
        uint64_t most = vdev_pool_max_reserved(a->pool, a->member);
        uint64_t card = most > held ? most - held : 0;
        room = card < room ? card : room;
    }
    fprintf(f, "Largest free block: %s; free in reserved regions: %s (fragmentation %.3f); "
               "room left to grow: %s",
            vdev_format_bytes(lf, b1, sizeof b1), vdev_format_bytes(free_bytes, b2, sizeof b2),
            free_bytes ? (double)(free_bytes - lf) / (double)free_bytes : 0.0,
            vdev_format_bytes(room, b3, sizeof b3));
    if (room < under_limit)
        fprintf(f, " (%s under the limit, less what the card's other devices claim)",
                vdev_format_bytes(under_limit, b3, sizeof b3));
    fputc('\n', f);
    fprintf(f, "Biggest live blocks:\n");
    if (n_top == 0)
        fprintf(f, "  none\n");
    for (int i = 0; i < n_top; i++) {
        const struct chunk *c = &a->ch[top[i]];
        const char *tag = tag_of ? tag_of(user, top[i]) : NULL;
        fprintf(f, "  %12s at 0x%llx  made by %s\n", vdev_format_bytes(csize(c), b1, sizeof b1),
                (unsigned long long)c->addr, tag ? tag : "(unknown)");
    }
    unlock(a);
}
