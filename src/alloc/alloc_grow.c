/* alloc_grow.c — the allocator's regions: growth, garbage collection and
 * release (the diagnosis of an out-of-memory failure is alloc_oom.c's).
 *
 * Growth (VDEV_POLICY_GROW) follows TensorFlow's BFC allocator (its Extend):
 * a region size that starts at 2 MiB doubles while the request is larger
 * (so a region is a power-of-two multiple of 2 MiB, at least the request,
 * and its tail serves the requests that follow), the region takes that
 * size, capped by what the limit leaves, and the size doubles for the next
 * region only when it did not double for this one (2, 4, 8 MiB ... for small
 * requests; 1500 MiB takes a 2048 MiB region, and the next one, if needed,
 * is 2048 MiB again). The source is asked again at 0.9x the size while it
 * answers OOM (at every growth: BFC backs off once in its lifetime). A
 * source that extends in place (CUDA's one virtual range per logical
 * device) grows its one region by its own size instead. Releasing empty
 * regions restarts the schedule from twice the largest region still held
 * (BFC never restarts). Before an OOM, empty regions are released when that
 * makes room under the limit and the request is tried once more (BFC's
 * DeallocateFreeRegions, "garbage collection"), after one sync of the
 * device, since blocks freed from the host may still be used by queued work.
 * Governed, a request the limit would allow once those regions go, but the
 * card's pool would not, lends first (the others make room for what the own
 * regions do not cover), then collects; its OOM is then the card's.
 * The OOM message then says what failed and only what would help
 * (alloc_oom.c). Everything here runs with the allocator's lock held and
 * off the fast path, except the lending round of vdev_alloc_make_room(),
 * which releases the lock while other devices give memory back.
 *
 * Governance (govern.h): a governed allocator claims each region from its
 * card's pool before it asks the source, and gives it back when it releases
 * it; the pool caps growth at what the card leaves this device. A
 * preallocated region (the floor) is pinned: never released while the floor
 * holds it, but by garbage collection when it holds nothing and a request
 * needs its room (the floor is then reserved on demand); a floor lowered
 * below it at run time unpins it (vdev_alloc_repin). While more is reserved
 * than a lowered limit, a free that empties a region gives it back
 * (vdev_alloc_over_freed). Lending parks the empty regions it will give back
 * (vdev_alloc_park) while it waits, with the lock released, for the
 * device's stream, then releases them (vdev_alloc_unpark).
 */
#define _GNU_SOURCE
#include "alloc/alloc_impl.h"
#include "alloc/govern.h"

/* ------------------------------------------------------------------------ */
/* regions and growth */

/* The largest free chunk inside the regions (0 when none). */
uint64_t vdev_alloc_largest_free(const struct vdev_alloc *a)
{
    /* The largest chunk is in the highest non-empty bin (scanned whole). */
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
uint32_t vdev_alloc_region_slot(struct vdev_alloc *a)
{
    for (uint32_t r = 0; r < a->n_reg_slots; r++)
        if (!a->reg[r].bytes)
            return r;
    if (a->n_reg_slots == a->cap_reg) {
        uint32_t cap = a->cap_reg ? a->cap_reg * 2 : 8;
        struct region *nr = vdev_realloc(a->reg, (size_t)cap * sizeof *nr);
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
void vdev_alloc_region_install(struct vdev_alloc *a, uint32_t slot, void *base, uint64_t bytes)
{
    uint32_t h = record_pop(a);
    a->ch[h].addr = (uint64_t)(uintptr_t)base;
    a->ch[h].szst = bytes | ST_FREE;
    a->ch[h].prev = a->ch[h].next = NO_NEIGHBOUR;
    bin_insert(a, h, bin_of(bytes), 1);
    a->reg[slot].base = (uint64_t)(uintptr_t)base;
    a->reg[slot].bytes = bytes;
    a->reg[slot].first = h;
    a->reg[slot].parked = 0;
    a->n_regions++;
    a->reserved += bytes;
    if (a->reserved > a->peak_reserved)
        a->peak_reserved = a->reserved;
    over_hook_update(a);
    reserved_changed(a);
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

/* Claims between need and want bytes from the card's pool (all of want when
 * not governed): the bytes claimed, 0 when the pool has fewer than need. */
static uint64_t claim(struct vdev_alloc *a, uint64_t want, uint64_t need)
{
    return a->pool ? vdev_pool_claim(a->pool, a->member, want, need) : want;
}

static void unclaim(struct vdev_alloc *a, uint64_t bytes)
{
    if (a->pool && bytes)
        vdev_pool_unclaim(a->pool, a->member, bytes);
}

/* Grows the in-place region so that its free tail holds sz bytes: by the
 * region's size (doubling it) or what the request needs, capped by the limit
 * and the card's pool, backing off by 0.9x while the source answers OOM.
 * The new space merges with a free tail, so the region stays one free range
 * at the top. */
static enum vdev_status grow_extend(struct vdev_alloc *a, uint64_t sz, enum vdev_alloc_why *why)
{
    struct region *r = &a->reg[a->ext_region];
    uint32_t t = r->first;
    while (a->ch[t].next != NO_NEIGHBOUR)
        t = a->ch[t].next;
    uint64_t tail = cstate(&a->ch[t]) == ST_FREE ? csize(&a->ch[t]) : 0;
    uint64_t need = sz - tail, avail = limit_room(a);
    if (need > avail)
        return VDEV_ERR_OOM;
    uint64_t want = r->bytes < avail ? r->bytes : avail; /* doubles the region */
    if (want < need)
        want = need;
    uint64_t claimed = claim(a, want, need);
    if (!claimed) {
        *why = WHY_CARD;
        return VDEV_ERR_OOM;
    }
    want = claimed;
    enum vdev_status st;
    for (;;) {
        st = a->src.extend(a->src.ctx, (void *)(uintptr_t)r->base, r->bytes, r->bytes + want);
        if (st != VDEV_ERR_OOM || want == need)
            break;
        uint64_t next = (want / 10 * 9) & SZ_MASK;
        want = next > need ? next : need;
    }
    if (st != VDEV_OK) {
        unclaim(a, claimed);
        *why = vdev_error_is_host() ? WHY_SOURCE_HOST : WHY_SOURCE; /* the source said why */
        return st;
    }
    unclaim(a, claimed - want);
    if (tail) {
        bin_remove(a, t, bin_of(tail), 1);
        a->ch[t].szst = (tail + want) | ST_FREE;
        bin_insert(a, t, bin_of(tail + want), 1);
    } else {
        uint32_t h = record_pop(a);
        a->ch[h].addr = r->base + r->bytes;
        a->ch[h].szst = want | ST_FREE;
        a->ch[h].prev = t;
        a->ch[h].next = NO_NEIGHBOUR;
        a->ch[t].next = h;
        bin_insert(a, h, bin_of(want), 1);
    }
    r->bytes += want;
    a->reserved += want;
    if (a->reserved > a->peak_reserved)
        a->peak_reserved = a->reserved;
    over_hook_update(a);
    reserved_changed(a);
    return VDEV_OK;
}

/* Where the growth schedule starts (and starts over after regions went
 * back, see vdev_alloc_release_empty): twice the largest region held, or,
 * when none is, the first region size (2 MiB, or the limit when smaller). */
static uint64_t schedule_start(const struct vdev_alloc *a)
{
    uint64_t held = 0;
    for (uint32_t r = 0; r < a->n_reg_slots; r++)
        held = a->reg[r].bytes > held ? a->reg[r].bytes : held;
    if (held)
        return held <= UINT64_MAX / 2 ? 2 * held : held;
    return a->limit < FIRST_REGION_BYTES ? a->limit : FIRST_REGION_BYTES;
}

/* Adds (or extends) a region so that a free chunk of sz bytes exists.
 * VDEV_ERR_OOM when the limit, the card's pool or the source says no;
 * another status when the source fails otherwise. *why says which (see enum
 * vdev_alloc_why); the thread's error message is set unless the limit or the
 * pool said no. Nothing observable changes unless it succeeds. */
enum vdev_status vdev_alloc_grow(struct vdev_alloc *a, uint64_t sz, enum vdev_alloc_why *why)
{
    *why = WHY_LIMIT;
    /* Two records: the new chunk and the rest of the split after it. */
    if (vdev_alloc_records_reserve(a, 2) != VDEV_OK) {
        *why = WHY_HOST;
        return VDEV_ERR_OOM;
    }
    if (a->src.extend && a->ext_region != NIL)
        return grow_extend(a, sz, why);
    uint64_t avail = limit_room(a);
    if (sz > avail)
        return VDEV_ERR_OOM;
    /* BFC's Extend: the size doubles while the request exceeds it (so the
     * region holds the request, and the tail serves the next ones), and
     * doubles for the next region only when it did not double here. */
    if (!a->curr_region_bytes)
        a->curr_region_bytes = schedule_start(a);
    int doubled = 0;
    while (sz > a->curr_region_bytes) {
        a->curr_region_bytes *= 2;
        doubled = 1;
    }
    uint64_t want = a->curr_region_bytes < avail ? a->curr_region_bytes : avail;
    uint32_t slot = vdev_alloc_region_slot(a);
    if (slot == NIL) {
        *why = WHY_HOST;
        return vdev_error(VDEV_ERR_OOM, "%s: host out of memory for regions", a->name);
    }
    uint64_t claimed = claim(a, want, sz);
    if (!claimed) {
        *why = WHY_CARD;
        return VDEV_ERR_OOM;
    }
    want = claimed;
    void *base = NULL;
    uint64_t got = 0;
    *why = WHY_SOURCE; /* from here on, every failure is the source's, with its message */
    enum vdev_status st = reserve_backoff(a, want, sz, &base, &got);
    unclaim(a, st == VDEV_OK ? claimed - got : claimed);
    if (st != VDEV_OK) {
        if (vdev_error_is_host())
            *why = WHY_SOURCE_HOST;
        return st;
    }
    *why = WHY_LIMIT;
    vdev_alloc_region_install(a, slot, base, got);
    if (a->src.extend)
        a->ext_region = slot;
    if (!doubled && a->curr_region_bytes <= UINT64_MAX / 2)
        a->curr_region_bytes *= 2;
    return VDEV_OK;
}

/* Whether region slot r is empty: one free chunk (no live or pending block),
 * and not the pinned (preallocated) region, which is never released. */
static int region_empty(const struct vdev_alloc *a, uint32_t r)
{
    const struct region *g = &a->reg[r];
    const struct chunk *c = &a->ch[g->first];
    return g->bytes && r != a->pinned && cstate(c) == ST_FREE && csize(c) == g->bytes;
}

uint64_t vdev_alloc_empty_bytes(const struct vdev_alloc *a)
{
    uint64_t empty = 0;
    for (uint32_t r = 0; r < a->n_reg_slots; r++)
        if (region_empty(a, r))
            empty += a->reg[r].bytes;
    return empty;
}

/* Whether the pinned (preallocated) region holds nothing: garbage
 * collection may then give it back, as a last resort (see own_bytes). */
static int pinned_unused(const struct vdev_alloc *a)
{
    if (a->pinned == NIL)
        return 0;
    const struct chunk *c = &a->ch[a->reg[a->pinned].first];
    return cstate(c) == ST_FREE && csize(c) == a->reg[a->pinned].bytes;
}

/* Whether sz bytes fit under the limit once `own` bytes of empty regions go. */
static int fits_limit(const struct vdev_alloc *a, uint64_t sz, uint64_t own)
{
    uint64_t after = a->reserved - own;
    return a->limit > after && sz <= a->limit - after;
}

/* The most this allocator may hold now: its limit, and, governed, what the
 * card's pool leaves it. */
static uint64_t hold_cap(struct vdev_alloc *a)
{
    uint64_t cap = a->limit;
    if (a->pool) {
        uint64_t most = vdev_pool_max_reserved(a->pool, a->member);
        cap = most < cap ? most : cap;
    }
    return cap;
}

uint64_t vdev_alloc_pinned_spare(const struct vdev_alloc *a)
{
    return a->src.sync && pinned_unused(a) ? a->reg[a->pinned].bytes : 0;
}

uint64_t vdev_alloc_floor_live(const struct vdev_alloc *a, uint64_t floor)
{
    if (a->pinned == NIL)
        return a->in_use < floor ? a->in_use : floor;
    uint64_t live = 0;
    for (uint32_t c = a->reg[a->pinned].first; c != NO_NEIGHBOUR; c = a->ch[c].next)
        if (cstate(&a->ch[c]) == ST_LIVE)
            live += csize(&a->ch[c]);
    return live < floor ? live : floor;
}

/* The bytes garbage collection may release for a request of sz bytes (0
 * with a source that cannot sync): the empty regions, and the pinned region
 * too when it holds nothing and the request does not fit beside it under
 * the limit and what the card's pool leaves this device. A request larger
 * than what they leave beside the floor's preallocated region replaces that
 * region then: the floor stays kept aside by the card and is reserved on
 * demand from then on, as a raised floor is. */
static uint64_t own_bytes(struct vdev_alloc *a, uint64_t sz, int *with_pinned)
{
    *with_pinned = 0;
    if (!a->src.sync)
        return 0;
    uint64_t own = vdev_alloc_empty_bytes(a), cap = hold_cap(a), after = a->reserved - own;
    if (!(cap > after && sz <= cap - after) && pinned_unused(a)) {
        *with_pinned = 1;
        own += a->reg[a->pinned].bytes;
    }
    return own;
}

/* Whether releasing `empty` bytes of empty regions would leave room for a
 * new region of sz bytes under the limit and under what the card's pool
 * leaves this device (TensorFlow's test before it collects, with the pool
 * added). */
int vdev_alloc_release_makes_room(struct vdev_alloc *a, uint64_t sz, uint64_t empty)
{
    if (!empty)
        return 0;
    uint64_t cap = hold_cap(a);
    uint64_t after = a->reserved - empty;
    return cap > after && sz <= cap - after;
}

/* Gives one empty region back to the source and the pool. */
static void release_region(struct vdev_alloc *a, uint32_t r)
{
    struct region *g = &a->reg[r];
    bin_remove(a, g->first, bin_of(g->bytes), 1);
    record_push(a, g->first);
    a->src.release(a->src.ctx, (void *)(uintptr_t)g->base, g->bytes);
    unclaim(a, g->bytes);
    a->reserved -= g->bytes;
    a->n_regions--;
    g->bytes = 0;
    g->parked = 0;
    if (a->ext_region == r)
        a->ext_region = NIL;
    if (a->unpinned == r)
        a->unpinned = NIL;
    reserved_changed(a);
}

/* After regions went back: the growth schedule restarts from the largest
 * region still held at the next growth (schedule_start; see
 * vdev_alloc_release_empty), and HOOK_OVER follows. */
static void growth_restart(struct vdev_alloc *a)
{
    a->curr_region_bytes = 0;
    over_hook_update(a);
}

/* Gives empty regions back while more than `keep` bytes are reserved,
 * largest first (keep 0: every empty region), and returns the bytes
 * released. A region with a pending block is not empty, so it stays until
 * the block's event has passed; the pinned region always stays. Releasing
 * restarts the growth schedule: the next region doubles the largest region
 * still held (2 MiB when none is), not the regions just released, which
 * would make every release-and-grow cycle reserve twice as much as the last
 * (2, 4, 8 MiB ... then the limit). */
uint64_t vdev_alloc_release_empty(struct vdev_alloc *a, uint64_t keep)
{
    uint64_t released = 0;
    while (a->reserved > keep) {
        uint32_t best = NIL;
        for (uint32_t r = 0; r < a->n_reg_slots; r++)
            if (region_empty(a, r) && (best == NIL || a->reg[r].bytes > a->reg[best].bytes))
                best = r;
        if (best == NIL)
            break;
        released += a->reg[best].bytes;
        release_region(a, best);
    }
    if (released)
        growth_restart(a);
    return released;
}

/* Preallocates the floor as the pinned region (PREALLOCATE, after the old
 * one went back), as far as the limit leaves room above the regions still
 * held (a lowered ceiling is never exceeded by vdev's own reservation; the
 * rest of the floor is kept aside by the card and reserved on demand):
 * claimed from the card's pool, then reserved from the source; 0 when there
 * is no room or either says no, nothing changed and no message left (the
 * floor is then reserved on demand, as a raised one is). */
static uint64_t prealloc_again(struct vdev_alloc *a, uint64_t floor)
{
    uint64_t bytes = floor < limit_room(a) ? floor : limit_room(a);
    if (!bytes)
        return 0;
    uint32_t slot = vdev_alloc_region_slot(a);
    if (slot == NIL || vdev_alloc_records_reserve(a, 1) != VDEV_OK || !claim(a, bytes, bytes))
        return 0;
    void *base = NULL;
    enum vdev_status st = a->src.reserve(a->src.ctx, bytes, &base);
    if (st == VDEV_OK && (uintptr_t)base % VDEV_ALLOC_ALIGN) {
        a->src.release(a->src.ctx, base, bytes);
        st = VDEV_ERR_BACKEND;
    }
    if (st != VDEV_OK) {
        unclaim(a, bytes);
        vdev_clear_error();
        return 0;
    }
    vdev_alloc_region_install(a, slot, base, bytes);
    a->pinned = slot;
    a->pinned_bytes = bytes;
    if (a->src.extend)
        a->ext_region = slot;
    return bytes;
}

/* Whether region r holds nothing (one free chunk), pinned or not. */
static int region_unused(const struct vdev_alloc *a, uint32_t r)
{
    const struct chunk *c = &a->ch[a->reg[r].first];
    return cstate(c) == ST_FREE && csize(c) == a->reg[r].bytes;
}

/* The pinned region holds the device's floor, never more (start-up
 * preallocates the floor): when a run-time change lowers the floor below
 * what was preallocated (pinned_bytes: a source that extends in place may
 * have grown the region since, which changes nothing), it is no longer
 * pinned. Empty, it goes back at once (after one sync of the device) and,
 * with PREALLOCATE, the new floor is preallocated in its place, as far as
 * the limit allows; in use, it becomes an ordinary region, released like
 * growth's once empty (and, above a lowered ceiling, lent to any device the
 * card cannot serve). A source without sync keeps it as an ordinary region
 * (nothing says its freed blocks are no longer used by queued work).
 * Returns the bytes released. */
uint64_t vdev_alloc_repin(struct vdev_alloc *a, uint64_t floor)
{
    uint32_t r = a->pinned;
    if (r == NIL || a->pinned_bytes <= floor)
        return 0;
    a->pinned = NIL;
    if (!a->src.sync || !region_empty(a, r)) {
        a->unpinned = r; /* vdev_alloc_unrepin() may pin it again */
        a->unpinned_bytes = a->pinned_bytes;
        return 0;
    }
    a->src.sync(a->src.ctx);
    uint64_t released = a->reg[r].bytes;
    release_region(a, r);
    growth_restart(a);
    if (a->policy == VDEV_POLICY_PREALLOCATE && floor)
        prealloc_again(a, floor);
    over_hook_update(a);
    return released;
}

void vdev_alloc_unrepin(struct vdev_alloc *a, uint64_t floor)
{
    if (a->policy != VDEV_POLICY_PREALLOCATE || !floor)
        return;
    if (a->pinned == NIL && a->unpinned != NIL) {
        if (a->unpinned_bytes <= floor) {
            a->pinned = a->unpinned; /* still held (release_region forgets it) */
            a->pinned_bytes = a->unpinned_bytes;
            a->unpinned = NIL;
        }
        return;
    }
    uint32_t r = a->pinned;
    if (r != NIL) {
        if (a->pinned_bytes >= floor || !a->src.sync || !region_unused(a, r))
            return;
        a->src.sync(a->src.ctx);
        a->pinned = NIL;
        release_region(a, r);
        growth_restart(a);
    }
    prealloc_again(a, floor);
    over_hook_update(a);
}

/* ------------------------------------------------------------------------ */
/* lending (see vdev_alloc_park in alloc_impl.h) */

/* The region lending takes next, of those empty and not parked (ticket 0) or
 * parked under `ticket`: of the regions that fit in `above` (the bytes held
 * above the floor), the smallest one of at least `want` bytes, else the
 * largest; with `cross`, when none fits, the smallest one. NIL: none. */
static uint32_t lend_choice(const struct vdev_alloc *a, uint64_t above, uint64_t want, int cross,
                            uint32_t ticket)
{
    uint32_t enough = NIL, largest = NIL, smallest = NIL;
    if (!above || !want)
        return NIL;
    for (uint32_t r = 0; r < a->n_reg_slots; r++) {
        const struct region *g = &a->reg[r];
        if (ticket ? g->parked != ticket || r == a->pinned : !region_empty(a, r))
            continue;
        if (smallest == NIL || g->bytes < a->reg[smallest].bytes)
            smallest = r;
        if (g->bytes > above)
            continue;
        if (g->bytes >= want && (enough == NIL || g->bytes < a->reg[enough].bytes))
            enough = r;
        if (largest == NIL || g->bytes > a->reg[largest].bytes)
            largest = r;
    }
    if (enough != NIL)
        return enough;
    if (largest != NIL)
        return largest;
    return cross ? smallest : NIL;
}

uint32_t vdev_alloc_park(struct vdev_alloc *a, uint64_t keep, uint64_t want, int cross)
{
    uint64_t above = a->reserved > keep ? a->reserved - keep : 0;
    uint32_t ticket = 0, r;
    while ((r = lend_choice(a, above, want, cross, 0)) != NIL) {
        if (!ticket && !(ticket = ++a->park_ticket))
            ticket = ++a->park_ticket; /* 0 means "not parked" */
        struct region *g = &a->reg[r];
        bin_remove(a, g->first, bin_of(g->bytes), 1);
        a->ch[g->first].szst = g->bytes | ST_PENDING;
        a->pending_bytes += g->bytes;
        g->parked = ticket;
        uint64_t drop = g->bytes < above ? g->bytes : above;
        above -= drop;
        want -= drop < want ? drop : want;
    }
    return ticket;
}

uint64_t vdev_alloc_unpark(struct vdev_alloc *a, uint32_t ticket, uint64_t keep, uint64_t want,
                           int cross)
{
    uint64_t got = 0;
    for (;;) {
        uint64_t above = a->reserved > keep ? a->reserved - keep : 0;
        int release = 1;
        uint32_t r = lend_choice(a, above, want, cross, ticket);
        if (r == NIL) { /* what is left goes back to the bins */
            release = 0;
            for (r = 0; r < a->n_reg_slots && a->reg[r].parked != ticket; r++)
                ;
            if (r == a->n_reg_slots)
                break;
        }
        struct region *g = &a->reg[r];
        a->ch[g->first].szst = g->bytes | ST_FREE;
        a->pending_bytes -= g->bytes;
        g->parked = 0;
        bin_insert(a, g->first, bin_of(g->bytes), 1);
        if (release) {
            uint64_t drop = g->bytes < above ? g->bytes : above;
            release_region(a, r);
            got += drop;
            want -= drop < want ? drop : want;
        }
    }
    if (got)
        growth_restart(a);
    return got;
}

/* Garbage collection before OOM, as TensorFlow's BFC allocator does it (its
 * DeallocateFreeRegions): when a request of sz bytes found no free chunk and
 * growth failed, and releasing the empty regions would leave room under the
 * limit (and the card's pool) for sz, syncs the device once (blocks freed
 * with vdev_alloc_free() may still be used by queued work) and releases
 * them; the caller then grows again. Regions holding a live or pending block
 * stay, and so does the pinned one, unless it holds nothing and the request
 * needs its room (own_bytes); by the time malloc gets here it has waited for
 * every pending event. Only with a source that can sync. Returns the bytes
 * released (0: nothing was done). */
uint64_t vdev_alloc_collect(struct vdev_alloc *a, uint64_t sz)
{
    int with_pinned;
    uint64_t own = own_bytes(a, sz, &with_pinned);
    if (!vdev_alloc_release_makes_room(a, sz, own))
        return 0;
    a->src.sync(a->src.ctx);
    if (with_pinned) /* the floor's region, empty, makes way for a larger one */
        a->pinned = NIL;
    return vdev_alloc_release_empty(a, 0);
}

/* ------------------------------------------------------------------------ */
/* what malloc's general path calls */

enum vdev_status vdev_alloc_make_room(struct vdev_alloc *a, uint64_t bytes, uint64_t sz,
                                      int round, int *again)
{
    *again = 0;
    enum vdev_alloc_why why;
    enum vdev_status st = vdev_alloc_grow(a, sz, &why);
    /* Garbage collection: release empty regions and grow again. */
    if (st == VDEV_ERR_OOM && why != WHY_HOST && vdev_alloc_collect(a, sz))
        st = vdev_alloc_grow(a, sz, &why);
    /* The limit would leave room once this device's own empty regions go,
     * but the card's pool does not leave it that much (else collection
     * would have made room): the card is short, not the limit. */
    int with_pinned;
    uint64_t own = st == VDEV_ERR_OOM && a->pool ? own_bytes(a, sz, &with_pinned) : 0;
    if (st == VDEV_ERR_OOM && why == WHY_LIMIT && a->pool && fits_limit(a, sz, own))
        why = WHY_CARD;
    if (st == VDEV_ERR_OOM && why == WHY_CARD && round < 2) {
        /* Lending: other devices give their empty regions back. They take
         * their own locks (and wait for their streams), so this one is
         * released meanwhile; the caller then starts over. This device's
         * own empty regions count too: the others need only make room for
         * the rest, and the next round collects them (they are released
         * then, once releasing them makes room). */
        vdev_pool_t *pool = a->pool;
        int member = a->member;
        unlock(a);
        char report[512];
        vdev_pool_reclaim(pool, member, sz, own, round == 0, report, sizeof report);
        lock(a);
        *again = 1;
        return VDEV_OK;
    }
    if (st == VDEV_ERR_OOM) {
        /* The standard message, then the source's reason if it gave one, or
         * the pool's report of whose memory is where. */
        char msg[512] = "";
        if (why == WHY_CARD)
            vdev_strlcpy(msg, vdev_pool_last_report(), sizeof msg);
        else if (why != WHY_LIMIT)
            vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        return vdev_alloc_fail_oom(a, bytes, sz, why, msg);
    }
    if (st != VDEV_OK) {
        char b0[32];
        vdev_alloc_count_failed(a);
        vdev_error_prefix("allocating %s on %s", vdev_format_bytes(bytes, b0, sizeof b0), a->name);
    }
    return st;
}

enum vdev_status vdev_alloc_over_limit(struct vdev_alloc *a, uint64_t bytes, uint64_t sz)
{
    /* Regions emptied since the limit was lowered go back first. */
    if (a->reserved > a->limit && a->src.sync && vdev_alloc_empty_bytes(a)) {
        a->src.sync(a->src.ctx);
        vdev_alloc_release_empty(a, a->limit);
    }
    uint64_t room = a->limit > a->in_use ? a->limit - a->in_use : 0;
    if (sz > room)
        return vdev_alloc_fail_oom(a, bytes, sz, WHY_LIMIT, NULL);
    return VDEV_OK;
}

void vdev_alloc_over_freed(struct vdev_alloc *a)
{
    if (!a->src.sync || !vdev_alloc_empty_bytes(a)) {
        unlock(a);
        return;
    }
    /* Parked, the regions take no block and nothing else releases them
     * while the device's queued work is waited for with the lock free. */
    uint64_t over = a->reserved - a->limit;
    uint32_t ticket = vdev_alloc_park(a, a->limit, over, 1);
    unlock(a);
    if (!ticket)
        return;
    a->src.sync(a->src.ctx);
    lock(a);
    over = a->reserved > a->limit ? a->reserved - a->limit : 0;
    vdev_alloc_unpark(a, ticket, a->limit, over, 1);
    over_hook_update(a);
    unlock(a);
}

/* Hands back every empty region but the pinned one (see
 * vdev_alloc_release_empty), which also restarts the growth schedule. The
 * device is waited for with the lock held, as a lowered limit's release
 * does: a block another thread allocated, used in queued work and freed
 * after a wait made without the lock would leave its region empty while
 * that work still writes to it. */
uint64_t vdev_alloc_release_cached(vdev_alloc_t *a)
{
    lock(a);
    if (a->src.sync && vdev_alloc_empty_bytes(a))
        a->src.sync(a->src.ctx);
    uint64_t released = vdev_alloc_release_empty(a, 0);
    unlock(a);
    return released;
}
