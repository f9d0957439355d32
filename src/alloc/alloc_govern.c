/* alloc_govern.c — memory governance between the logical devices of a card:
 * the pool of shared memory, lending, and limits changed at run time.
 *
 * A pool (govern.h) counts, under its mutex, what each member (a logical
 * device's allocator) has reserved, beside its floor, ceiling and priority,
 * and keeps sum(max(reserved, floor)) <= budget: the floors are kept aside
 * from the start, and memory above them goes to whoever claims it first, up
 * to each ceiling. Allocators claim a region before they reserve it and give
 * it back when they release it (alloc_grow.c), so the pool is consulted only
 * where regions come and go, never per block: the allocator's fast path is
 * the same with or without governance.
 *
 * Lending happens when the pool refuses a member: the allocator drops its
 * lock and calls vdev_pool_reclaim(), which asks the members that hold
 * memory above their floors to give back their empty regions (after their
 * device's queued work is done, as blocks freed from the host may still be
 * in use there), until the request fits beside the asker's own empty
 * regions (which it collects itself when it retries): those over a lowered
 * ceiling first, then those of strictly lower priority, lowest first, then,
 * before the request fails, those of equal or higher priority (an empty
 * region hurts nobody: a device's own are collected before its OOM too).
 * Each lender gives the smallest region that is enough, of those wholly
 * above its floor, and one that reaches into its floor only when nothing
 * else makes room (the card keeps the floor aside all the same). The
 * regions are parked under the lender's lock and its stream is waited for
 * with that lock released, so a lender of any priority keeps allocating
 * meanwhile. Only empty regions go: live and pending blocks stay where they
 * are. Whatever the outcome, it writes a report of whose memory is where,
 * which the allocator's OOM message quotes if the retry fails.
 *
 * Limits change at run time through vdev_pool_set_limits() (floor and
 * ceiling together, so they are never seen crossed) and
 * vdev_alloc_set_limit() for an allocator without a pool. Lowering a limit
 * below what is reserved releases empty regions at once; while the memory in
 * use stays above it, the allocator's HOOK_OVER sends every malloc to the
 * general path, which refuses what does not fit under the new limit.
 *
 * Locks: an allocator's lock, then the pool's mutex, never the reverse;
 * functions that take other allocators' locks (reclaim, set_limits, get,
 * check) are called with none held and take one at a time; no lock is held
 * while a lender's stream is waited for, nor while a callback runs.
 *
 * Pressure callbacks are called (or gathered, for a caller that holds a
 * lock of its own) once the pool's lock is released, and are read when the
 * call is made, not when the pressure was seen: alloc_pressure.c counts
 * them under way, so that replacing one waits for the calls of the old.
 */
#define _GNU_SOURCE
#include "alloc/alloc_impl.h"
#include "alloc/govern.h"

#include <pthread.h>

struct member {
    vdev_alloc_t *a;          /* NULL until attached, and after destruction */
    char name[64];            /* "/device:GPU:1" */
    uint64_t floor, ceiling;  /* bytes, multiples of 256 */
    uint64_t reserved;        /* claimed: what its allocator holds, plus claims in flight */
    enum vdev_priority prio;  /* LOW..CRITICAL */
    uint64_t n_lends;         /* times it lent (each told LENT once) */
    uint64_t lent_bytes;      /* by how much its claim dropped when it lent, summed */
    uint64_t borrowed_bytes;  /* by how much the others' claims dropped for it, summed */
    struct vdev_pressure_slot pressure; /* its callback (optional), and calls under way */
};

struct vdev_pool {
    pthread_mutex_t lock; /* guards everything below but name, budget and n */
    pthread_cond_t calls_done; /* a pressure call returned, or its thread is replacing */
    char name[64];        /* "/physical_device:GPU:0" */
    uint64_t budget;
    int n;                /* members; fixed once the runtime has started */
    struct member m[VDEV_POOL_MAX_MEMBERS];
};

static _Thread_local char last_report[512];

VDEV_API const char *vdev_priority_name(enum vdev_priority p)
{
    static const char *const names[VDEV_PRIORITY_COUNT] = {"normal", "low", "normal", "high",
                                                            "critical"};
    return (unsigned)p < VDEV_PRIORITY_COUNT ? names[p] : "?";
}

const char *vdev_pool_last_report(void) { return last_report; }

/* "GPU:1" for "/device:GPU:1": the short name of the OOM report. */
static const char *short_name(const char *name)
{
    return strncmp(name, "/device:", 8) == 0 ? name + 8 : name;
}

static uint64_t claim_of(const struct member *m)
{
    return m->reserved > m->floor ? m->reserved : m->floor;
}

/* Sum over the members but `skip` of max(reserved, floor). Lock held. */
static uint64_t others_claim(const struct vdev_pool *p, int skip)
{
    uint64_t sum = 0;
    for (int j = 0; j < p->n; j++)
        if (j != skip)
            sum += claim_of(&p->m[j]);
    return sum;
}

/* The most member i could hold now. Lock held. */
static uint64_t most_locked(const struct vdev_pool *p, int i)
{
    uint64_t others = others_claim(p, i);
    return p->budget > others ? p->budget - others : 0;
}

static uint64_t floors_locked(const struct vdev_pool *p)
{
    uint64_t sum = 0;
    for (int j = 0; j < p->n; j++)
        sum += p->m[j].floor;
    return sum;
}

static enum vdev_priority resolve_prio(enum vdev_priority p)
{
    return p == VDEV_PRIORITY_DEFAULT ? VDEV_PRIORITY_NORMAL : p;
}

/* ------------------------------------------------------------------------ */
/* creation */

enum vdev_status vdev_pool_new(const char *name, uint64_t budget, vdev_pool_t **out)
{
    *out = NULL;
    struct vdev_pool *p = vdev_calloc(1, sizeof *p);
    if (!p)
        return vdev_error(VDEV_ERR_OOM, "%s: host out of memory for its pool", name);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->calls_done, NULL);
    vdev_strlcpy(p->name, name, sizeof p->name);
    p->budget = budget & SZ_MASK;
    *out = p;
    return VDEV_OK;
}

void vdev_pool_destroy(vdev_pool_t *p)
{
    if (!p)
        return;
    pthread_cond_destroy(&p->calls_done);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

enum vdev_status vdev_pool_add(vdev_pool_t *p, const char *device, uint64_t floor, uint64_t ceiling,
                               enum vdev_priority priority, int *member)
{
    char b1[32], b2[32], b3[32];
    floor &= SZ_MASK;
    ceiling &= SZ_MASK;
    if (p->n == VDEV_POOL_MAX_MEMBERS)
        return vdev_error(VDEV_ERR_CONFIG, "%s: more than %d logical devices", p->name,
                          VDEV_POOL_MAX_MEMBERS);
    if (floor > ceiling || ceiling > p->budget || (unsigned)priority >= VDEV_PRIORITY_COUNT)
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s: %s's floor %s and ceiling %s do not fit its budget of %s", p->name,
                          device, vdev_format_bytes(floor, b1, sizeof b1),
                          vdev_format_bytes(ceiling, b2, sizeof b2),
                          vdev_format_bytes(p->budget, b3, sizeof b3));
    pthread_mutex_lock(&p->lock);
    uint64_t floors = floors_locked(p) + floor;
    pthread_mutex_unlock(&p->lock);
    if (floors > p->budget)
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s: its logical devices' floors sum to %s, more than its budget of %s",
                          p->name, vdev_format_bytes(floors, b1, sizeof b1),
                          vdev_format_bytes(p->budget, b2, sizeof b2));
    pthread_mutex_lock(&p->lock);
    struct member *m = &p->m[p->n];
    memset(m, 0, sizeof *m);
    vdev_strlcpy(m->name, device, sizeof m->name);
    m->floor = floor;
    m->ceiling = ceiling;
    m->prio = resolve_prio(priority);
    *member = p->n++;
    pthread_mutex_unlock(&p->lock);
    return VDEV_OK;
}

void vdev_pool_attach(vdev_pool_t *p, int member, vdev_alloc_t *a)
{
    pthread_mutex_lock(&p->lock);
    p->m[member].a = a;
    pthread_mutex_unlock(&p->lock);
}

/* ------------------------------------------------------------------------ */
/* claims (called under the claiming allocator's lock) */

uint64_t vdev_pool_claim(vdev_pool_t *p, int member, uint64_t want, uint64_t need)
{
    pthread_mutex_lock(&p->lock);
    struct member *m = &p->m[member];
    uint64_t most = most_locked(p, member);
    uint64_t room = most > m->reserved ? most - m->reserved : 0;
    uint64_t got = want < room ? want : room;
    if (got < need)
        got = 0;
    m->reserved += got;
    pthread_mutex_unlock(&p->lock);
    return got;
}

void vdev_pool_unclaim(vdev_pool_t *p, int member, uint64_t bytes)
{
    pthread_mutex_lock(&p->lock);
    VDEV_ASSERT(p->m[member].reserved >= bytes);
    p->m[member].reserved -= bytes;
    pthread_mutex_unlock(&p->lock);
}

uint64_t vdev_pool_max_reserved(vdev_pool_t *p, int member)
{
    pthread_mutex_lock(&p->lock);
    uint64_t most = most_locked(p, member);
    pthread_mutex_unlock(&p->lock);
    return most;
}

uint64_t vdev_pool_floor(vdev_pool_t *p, int member)
{
    pthread_mutex_lock(&p->lock);
    uint64_t f = p->m[member].floor;
    pthread_mutex_unlock(&p->lock);
    return f;
}

uint64_t vdev_pool_reserved(vdev_pool_t *p, int member)
{
    pthread_mutex_lock(&p->lock);
    uint64_t r = p->m[member].reserved;
    pthread_mutex_unlock(&p->lock);
    return r;
}

/* ------------------------------------------------------------------------ */
/* lending */

/* What lending makes room for: a request of `need` bytes of member i (the
 * part its own empty regions do not cover), or (raise) a floor of `floor`
 * bytes for it. */
struct ask {
    vdev_pool_t *p;
    int i, raise;
    uint64_t need, floor;
};

/* By how much the other members' claims must still drop for the ask to fit
 * (0: it fits now). Takes the pool's lock (an allocator's may be held). */
static uint64_t shortfall(const struct ask *k)
{
    pthread_mutex_lock(&k->p->lock);
    const struct member *m = &k->p->m[k->i];
    uint64_t s;
    if (k->raise) {
        uint64_t want = m->reserved > k->floor ? m->reserved : k->floor;
        uint64_t claim = others_claim(k->p, k->i) + want;
        s = claim > k->p->budget ? claim - k->p->budget : 0;
    } else {
        uint64_t most = most_locked(k->p, k->i);
        uint64_t left = most > m->reserved ? most - m->reserved : 0;
        s = k->need > left ? k->need - left : 0;
    }
    pthread_mutex_unlock(&k->p->lock);
    return s;
}

/* Calls member i's pressure callback, if it has one then (alloc_pressure.c),
 * or gathers the call into calls (not NULL) for the caller to make later.
 * No lock may be held. */
static void tell(struct vdev_pool_calls *calls, vdev_pool_t *p, int i, enum vdev_pressure what,
                 uint64_t bytes)
{
    struct member *m = &p->m[i];
    if (!calls) {
        vdev_pressure_call(&m->pressure, &p->lock, &p->calls_done, m->name, what, bytes);
        return;
    }
    pthread_mutex_lock(&p->lock);
    int any = m->pressure.fn != NULL;
    pthread_mutex_unlock(&p->lock);
    if (!any || calls->n == (int)(sizeof calls->c / sizeof calls->c[0]))
        return;
    calls->c[calls->n++] = (struct vdev_pool_call){.p = p, .member = i, .what = what,
                                                   .bytes = bytes};
}

void vdev_pool_calls_make(struct vdev_pool_calls *c)
{
    for (int k = 0; k < c->n; k++)
        tell(NULL, c->c[k].p, c->c[k].member, c->c[k].what, c->c[k].bytes);
    c->n = 0;
}

/* Member b gives back empty regions above its floor until the ask fits
 * (vdev_alloc_park: regions wholly above the floor, with `cross` one that
 * reaches into it when those are not enough), after its device's queued
 * work is done: the regions are parked under b's lock, the stream is waited
 * for with the lock released (b's own allocations and frees go on
 * meanwhile, and no block can be placed in a parked region), then they are
 * released under the lock as far as still needed. Returns how much b's
 * claim dropped. Takes b's lock (none may be held). A source without sync
 * lends nothing: nothing says its freed blocks are no longer used by queued
 * work. */
static uint64_t lend(struct vdev_alloc *b, const struct ask *k, int cross)
{
    if (!b->src.sync)
        return 0;
    lock(b);
    uint32_t ticket = vdev_alloc_park(b, vdev_pool_floor(b->pool, b->member), shortfall(k), cross);
    unlock(b);
    if (!ticket)
        return 0;
    b->src.sync(b->src.ctx);
    lock(b);
    uint64_t got =
        vdev_alloc_unpark(b, ticket, vdev_pool_floor(b->pool, b->member), shortfall(k), cross);
    unlock(b);
    return got;
}

/* What the n lenders' empty regions can give (as lend() would release them:
 * up to what each holds above its floor, and only with a source that
 * syncs). Takes each lender's lock in turn; none may be held. */
static uint64_t lendable(const struct member *snap, const int *idx, int n)
{
    uint64_t sum = 0;
    for (int k = 0; k < n; k++) {
        struct vdev_alloc *b = snap[idx[k]].a;
        lock(b);
        uint64_t keep = vdev_pool_floor(b->pool, b->member);
        uint64_t above = b->reserved > keep ? b->reserved - keep : 0;
        uint64_t empty = b->src.sync ? vdev_alloc_empty_bytes(b) : 0;
        unlock(b);
        sum += empty < above ? empty : above;
    }
    return sum;
}

/* What the report says of one other member. */
struct held {
    int j;
    uint64_t above, live;
};

/* A member's live bytes above its floor (those outside its preallocated
 * region, or beyond the floor's size without one) and its bytes in empty
 * (releasable) regions. Takes its lock. */
static void holder_state(struct vdev_alloc *a, uint64_t floor, uint64_t *live, uint64_t *empty)
{
    lock(a);
    *live = a->in_use - vdev_alloc_floor_live(a, floor);
    *empty = vdev_alloc_empty_bytes(a);
    unlock(a);
}

/* Writes whose memory is where, for member i that asked for `what` (e.g.
 * "1.00 GiB"): what the card leaves it (with the `own` bytes of its own
 * empty regions, which it releases itself), then the members holding memory
 * above their floors (most first, at most three named) with how much of it
 * is live, then what would help, only what applies: freeing memory on those
 * devices when some of it is live, and lower ceilings on them when one
 * holding live memory is still below its ceiling (a device at or over its
 * ceiling cannot grow, and what it holds above it goes back once freed); when
 * none of it is live, a smaller batch alone, and, when they hold no empty
 * region either, that the memory is free space in regions still in use
 * (regions that hold live or pending blocks, which cannot be released).
 * Takes each of those members' locks in turn; none may be held. */
static void report(vdev_pool_t *p, int i, const char *what, uint64_t own, char *out,
                   size_t cap)
{
    struct member snap[VDEV_POOL_MAX_MEMBERS];
    pthread_mutex_lock(&p->lock);
    memcpy(snap, p->m, sizeof snap);
    uint64_t most = most_locked(p, i), floors_others = floors_locked(p) - p->m[i].floor;
    pthread_mutex_unlock(&p->lock);
    struct held h[VDEV_POOL_MAX_MEMBERS];
    int n = 0, live_any = 0, may_grow = 0;
    uint64_t empty_all = 0;
    for (int j = 0; j < p->n; j++) {
        if (j == i || snap[j].reserved <= snap[j].floor)
            continue;
        uint64_t live = 0, empty = 0;
        if (snap[j].a)
            holder_state(snap[j].a, snap[j].floor, &live, &empty);
        h[n].j = j;
        h[n].above = snap[j].reserved - snap[j].floor;
        h[n].live = live;
        if (h[n].live > h[n].above)
            h[n].live = h[n].above;
        live_any |= h[n].live > 0;
        may_grow |= h[n].live > 0 && snap[j].reserved < snap[j].ceiling;
        empty_all += empty;
        /* most held first (insertion: at most 16) */
        for (int k = n; k > 0 && h[k - 1].above < h[k].above; k--) {
            struct held t = h[k];
            h[k] = h[k - 1];
            h[k - 1] = t;
        }
        n++;
    }
    char b1[32], b2[32], b3[32];
    const struct member *me = &snap[i];
    uint64_t after = me->reserved > own ? me->reserved - own : 0;
    uint64_t left = most > after ? most - after : 0;
    size_t len = (size_t)snprintf(out, cap, "%s (%s) asked for %s and %s has %s left for it",
                                  short_name(me->name), vdev_priority_name(me->prio), what,
                                  p->name, vdev_format_bytes(left, b1, sizeof b1));
    if (n == 0) {
        snprintf(out + (len < cap ? len : cap), cap - (len < cap ? len : cap),
                 ": the other devices' floors keep %s aside; would help: lower floors on the "
                 "other devices, a smaller batch",
                 vdev_format_bytes(floors_others, b2, sizeof b2));
        return;
    }
    uint64_t rest = 0;
    for (int k = 0; k < n; k++) {
        if (k >= 3) {
            rest += h[k].above;
            continue;
        }
        const struct member *o = &snap[h[k].j];
        char live[64];
        if (h[k].live == h[k].above)
            snprintf(live, sizeof live, "all of it live");
        else if (h[k].live == 0)
            snprintf(live, sizeof live, "none of it live");
        else
            snprintf(live, sizeof live, "%s of it live",
                     vdev_format_bytes(h[k].live, b3, sizeof b3));
        if (len < cap)
            len += (size_t)snprintf(out + len, cap - len, "; %s (%s) holds %s above its floor, %s",
                                    short_name(o->name), vdev_priority_name(o->prio),
                                    vdev_format_bytes(h[k].above, b2, sizeof b2), live);
    }
    if (rest && len < cap)
        len += (size_t)snprintf(out + len, cap - len, "; %d more hold %s", n - 3,
                                vdev_format_bytes(rest, b2, sizeof b2));
    if (len >= cap)
        return;
    if (live_any)
        snprintf(out + len, cap - len, "; would help: freeing memory%s on those devices, a "
                                       "smaller batch",
                 may_grow ? " or lower ceilings" : "");
    else
        snprintf(out + len, cap - len, "; %swould help: a smaller batch",
                 empty_all ? "" : "none of it can be released (free, but in regions still in "
                                  "use); ");
}

/* Lenders of member i: attached members holding memory above their floors,
 * of priority strictly below i's (any priority when `any`), lowest priority
 * first (so those below i's come before those of i's priority or above),
 * then most held above the floor; before them, of any priority, members
 * holding more than their ceiling (lowered at run time while their memory
 * was live: what they hold above it is no longer theirs to keep).
 * Fills snap (a snapshot of the members) and idx; returns their number. */
static int lenders(vdev_pool_t *p, int i, int any, struct member *snap, int *idx)
{
    int n = 0;
    pthread_mutex_lock(&p->lock);
    memcpy(snap, p->m, sizeof p->m);
    pthread_mutex_unlock(&p->lock);
    int max_prio = any ? VDEV_PRIORITY_COUNT : (int)snap[i].prio;
    for (int j = 0; j < p->n; j++) {
        int over = snap[j].reserved > snap[j].ceiling;
        if (j == i || !snap[j].a || ((int)snap[j].prio >= max_prio && !over) ||
            snap[j].reserved <= snap[j].floor)
            continue;
        int k = n++;
        for (; k > 0; k--) {
            const struct member *x = &snap[idx[k - 1]], *y = &snap[j];
            int xo = x->reserved > x->ceiling, yo = y->reserved > y->ceiling;
            if (xo > yo || (xo == yo && x->prio < y->prio) ||
                (xo == yo && x->prio == y->prio &&
                 x->reserved - x->floor >= y->reserved - y->floor))
                break;
            idx[k] = idx[k - 1];
        }
        idx[k] = j;
    }
    return n;
}

/* The n lenders, in order, give until the ask fits: first regions wholly
 * above their floors, then, if that was not enough, regions that reach into
 * them (the card keeps the floor aside: only what was above it is lent).
 * Each lender that gave is told LENT once, with how much less it claims,
 * and counted (n_lends, lent_bytes; the asker's borrowed_bytes). Nothing is
 * released when all of them could not make room: the lenders keep their
 * cache (and their growth schedule) for a request that fails anyway.
 * Returns the drop of their claims. */
static uint64_t lend_all(const struct ask *k, const struct member *snap, const int *idx, int n,
                         struct vdev_pool_calls *calls)
{
    uint64_t got[VDEV_POOL_MAX_MEMBERS] = {0}, total = 0;
    if (n && lendable(snap, idx, n) < shortfall(k))
        return 0;
    for (int cross = 0; cross < 2; cross++)
        for (int j = 0; j < n && shortfall(k); j++)
            got[j] += lend(snap[idx[j]].a, k, cross);
    pthread_mutex_lock(&k->p->lock);
    for (int j = 0; j < n; j++) {
        struct member *m = &k->p->m[idx[j]];
        m->n_lends += got[j] != 0;
        m->lent_bytes += got[j];
        total += got[j];
    }
    k->p->m[k->i].borrowed_bytes += total;
    pthread_mutex_unlock(&k->p->lock);
    for (int j = 0; j < n; j++)
        if (got[j])
            tell(calls, k->p, idx[j], VDEV_PRESSURE_LENT, got[j]);
    return total;
}

uint64_t vdev_pool_reclaim(vdev_pool_t *p, int member, uint64_t sz, uint64_t own, int first,
                           char *out, size_t cap)
{
    struct member snap[VDEV_POOL_MAX_MEMBERS];
    int idx[VDEV_POOL_MAX_MEMBERS];
    last_report[0] = '\0';
    /* Every member's empty regions above its floor: over its ceiling
     * first, then lower priorities (lowest first), then the rest; an empty
     * region hurts nobody, so equal and higher priorities give theirs too
     * before this request fails (as a device's own are collected, which
     * count here: the others make room for the rest). */
    struct ask k = {.p = p, .i = member, .need = sz > own ? sz - own : 0};
    int n = shortfall(&k) ? lenders(p, member, 1, snap, idx) : 0; /* 0: freed meanwhile */
    if (first && (n || shortfall(&k)))
        tell(NULL, p, member, VDEV_PRESSURE_CARD_FULL, sz);
    uint64_t released = lend_all(&k, snap, idx, n, NULL);
    /* Written even when the request fits now: others may take the room
     * before the caller retries, and then its OOM quotes this. */
    char b[32];
    report(p, member, vdev_format_bytes(sz, b, sizeof b), own, last_report,
           sizeof last_report);
    if (cap)
        vdev_strlcpy(out, last_report, cap);
    return released;
}

/* ------------------------------------------------------------------------ */
/* run-time limits */

/* The limit of an allocator whose lock is held: releases empty regions above
 * a lowered limit (after a sync), keeps HOOK_OVER right. */
static uint64_t set_limit_locked(struct vdev_alloc *a, uint64_t limit)
{
    uint64_t old = a->limit, released = 0;
    a->limit = limit;
    /* Lowered: set; raised: cleared only once everything held fits again
     * (a raise that stays below what is reserved is still a lowered one). */
    if (limit < old)
        a->limit_lowered = 1;
    else if (limit > old && a->reserved <= limit)
        a->limit_lowered = 0;
    if (a->reserved > limit && vdev_alloc_empty_bytes(a)) {
        if (a->src.sync)
            a->src.sync(a->src.ctx);
        released = vdev_alloc_release_empty(a, limit);
    }
    over_hook_update(a);
    return released;
}

enum vdev_status vdev_alloc_set_limit(vdev_alloc_t *a, uint64_t limit_bytes, uint64_t *released)
{
    if (released)
        *released = 0;
    if (!a || (limit_bytes & SZ_MASK) == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_set_limit: %s",
                          a ? "a limit below 256 bytes" : "NULL allocator");
    lock(a);
    uint64_t r = set_limit_locked(a, limit_bytes & SZ_MASK);
    unlock(a);
    if (released)
        *released = r;
    return VDEV_OK;
}

/* The new floor of member i cannot be kept aside now: others hold the memory.
 * Its own empty regions, the preallocated one included, count as room, as
 * in an allocation's report (own_bytes in alloc_grow.c): a floor covers
 * them, so "left for it" is the same figure in both messages, and the
 * largest floor it may have now is that plus what its regions in use hold. */
static enum vdev_status floor_taken(vdev_pool_t *p, int i, uint64_t floor)
{
    char b[32], what[64], msg[512];
    pthread_mutex_lock(&p->lock);
    struct vdev_alloc *a = p->m[i].a;
    pthread_mutex_unlock(&p->lock);
    uint64_t own = 0;
    if (a) {
        lock(a);
        if (a->src.sync)
            own = vdev_alloc_empty_bytes(a) + vdev_alloc_pinned_spare(a);
        unlock(a);
    }
    snprintf(what, sizeof what, "a floor of %s", vdev_format_bytes(floor, b, sizeof b));
    report(p, i, what, own, msg, sizeof msg);
    return vdev_error(VDEV_ERR_OOM, "cannot raise the floor now: %s", msg);
}

/* Checks the new floor against the budget and what the others hold; lock
 * held. VDEV_OK, VDEV_ERR_CONFIG (the floors do not fit the budget, message
 * set) or VDEV_ERR_OOM (they fit, but others hold the memory; no message). */
static enum vdev_status floor_check_locked(vdev_pool_t *p, int i, uint64_t floor)
{
    char b1[32], b2[32];
    uint64_t floors = floors_locked(p) - p->m[i].floor + floor;
    if (floors > p->budget)
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s: its logical devices' floors would sum to %s, more than its budget "
                          "of %s",
                          p->name, vdev_format_bytes(floors, b1, sizeof b1),
                          vdev_format_bytes(p->budget, b2, sizeof b2));
    uint64_t want = p->m[i].reserved > floor ? p->m[i].reserved : floor;
    return others_claim(p, i) + want <= p->budget ? VDEV_OK : VDEV_ERR_OOM;
}

enum vdev_status vdev_pool_set_limits_ex(vdev_pool_t *p, int i, uint64_t floor, uint64_t ceiling,
                                         unsigned flags, uint64_t *released,
                                         struct vdev_pool_calls *calls)
{
    char b1[32], b2[32];
    if (released)
        *released = 0;
    floor &= SZ_MASK;
    int ceiling_given = ceiling != 0;
    ceiling = ceiling ? ceiling & SZ_MASK : p->budget;
    struct member *m = &p->m[i];
    /* with no ceiling given (the budget), a floor above it does not fit the
     * budget: the floors' error below says so */
    if (floor > ceiling && ceiling_given)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: floor %s is above the ceiling %s", m->name,
                          vdev_format_bytes(floor, b1, sizeof b1),
                          vdev_format_bytes(ceiling, b2, sizeof b2));
    if (ceiling > p->budget)
        return vdev_error(VDEV_ERR_CONFIG, "%s: ceiling %s is more than %s's budget of %s",
                          m->name, vdev_format_bytes(ceiling, b1, sizeof b1), p->name,
                          vdev_format_bytes(p->budget, b2, sizeof b2));
    pthread_mutex_lock(&p->lock);
    enum vdev_status st = floor_check_locked(p, i, floor);
    pthread_mutex_unlock(&p->lock);
    if (st == VDEV_ERR_CONFIG)
        return st;
    if (st == VDEV_ERR_OOM) {
        /* A floor outranks shared memory: any device's empty regions above
         * its floor may go, as lending gives them; nothing is released
         * unless they could make room (a raise that fails anyway changes
         * nothing: live memory, not cache, is in the way). */
        struct member snap[VDEV_POOL_MAX_MEMBERS];
        int idx[VDEV_POOL_MAX_MEMBERS];
        struct ask k = {.p = p, .i = i, .raise = 1, .floor = floor};
        lend_all(&k, snap, idx, lenders(p, i, 1, snap, idx), calls);
        pthread_mutex_lock(&p->lock);
        st = floor_check_locked(p, i, floor);
        pthread_mutex_unlock(&p->lock);
        if (st == VDEV_ERR_OOM)
            return floor_taken(p, i, floor);
        if (st != VDEV_OK)
            return st;
    }
    /* Allocator, then pool: checked again under both, then set together. */
    pthread_mutex_lock(&p->lock);
    struct vdev_alloc *a = m->a;
    pthread_mutex_unlock(&p->lock);
    if (a)
        lock(a);
    pthread_mutex_lock(&p->lock);
    st = floor_check_locked(p, i, floor);
    uint64_t old_floor = m->floor;
    if (st == VDEV_OK) {
        m->floor = floor;
        m->ceiling = ceiling;
    }
    pthread_mutex_unlock(&p->lock);
    uint64_t rel = 0, over = 0;
    if (st == VDEV_OK && a) {
        /* Empty regions above the ceiling go, then, when the floor was
         * lowered, a preallocated region it no longer covers (govern.h:
         * memory above a floor is shared, so none of it stays pinned); a
         * rollback pins or preallocates it again. */
        rel = set_limit_locked(a, ceiling);
        if (flags & VDEV_POOL_UNDO)
            vdev_alloc_unrepin(a, floor);
        else if (floor < old_floor)
            rel += vdev_alloc_repin(a, floor);
        /* Pressure: the ceiling is below what the device holds, or below
         * its peak in use (its next step is likely to need as much). */
        uint64_t need = a->reserved > a->peak_in_use ? a->reserved : a->peak_in_use;
        over = need > ceiling ? need - ceiling : 0;
    }
    if (a)
        unlock(a);
    if (st == VDEV_ERR_OOM)
        return floor_taken(p, i, floor);
    if (st != VDEV_OK)
        return st;
    if (released)
        *released = rel;
    if (over)
        tell(calls, p, i, VDEV_PRESSURE_CEILING, over);
    return VDEV_OK;
}

enum vdev_status vdev_pool_set_limits(vdev_pool_t *p, int i, uint64_t floor, uint64_t ceiling,
                                      uint64_t *released)
{
    return vdev_pool_set_limits_ex(p, i, floor, ceiling, 0, released, NULL);
}

enum vdev_status vdev_pool_set_priority(vdev_pool_t *p, int member, enum vdev_priority priority)
{
    if ((unsigned)priority >= VDEV_PRIORITY_COUNT)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "priority %d is not one of low, normal, high, critical", (int)priority);
    pthread_mutex_lock(&p->lock);
    p->m[member].prio = resolve_prio(priority);
    pthread_mutex_unlock(&p->lock);
    return VDEV_OK;
}

enum vdev_status vdev_pool_set_pressure(vdev_pool_t *p, int member, vdev_pressure_fn fn, void *user)
{
    vdev_pressure_set(&p->m[member].pressure, &p->lock, &p->calls_done, fn, user);
    return VDEV_OK;
}

void vdev_pool_get(vdev_pool_t *p, int member, struct vdev_memory_limits *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&p->lock);
    struct vdev_alloc *a = p->m[member].a;
    pthread_mutex_unlock(&p->lock);
    if (a)
        lock(a);
    pthread_mutex_lock(&p->lock);
    const struct member *m = &p->m[member];
    out->floor_bytes = m->floor;
    out->ceiling_bytes = a ? a->limit : m->ceiling;
    out->priority = m->prio;
    out->ceiling_lowered = a ? a->limit_lowered : 0;
    out->card_budget_bytes = p->budget;
    out->card_floors_bytes = floors_locked(p);
    out->card_claimed_bytes = others_claim(p, -1);
    uint64_t most = most_locked(p, member);
    uint64_t cap = most < out->ceiling_bytes ? most : out->ceiling_bytes;
    /* an empty preallocated region counts: a request that needs its room
     * replaces it (own_bytes in alloc_grow.c) */
    uint64_t spare = a ? vdev_alloc_pinned_spare(a) : 0;
    uint64_t held = m->reserved > spare ? m->reserved - spare : 0;
    out->available_bytes = cap > held ? cap - held : 0;
    out->n_lends = m->n_lends;
    out->lent_bytes = m->lent_bytes;
    out->borrowed_bytes = m->borrowed_bytes;
    pthread_mutex_unlock(&p->lock);
    if (a)
        unlock(a);
}

enum vdev_status vdev_pool_check(vdev_pool_t *p)
{
    char b1[32], b2[32];
    for (int j = 0; j < p->n; j++) {
        pthread_mutex_lock(&p->lock);
        struct vdev_alloc *a = p->m[j].a;
        pthread_mutex_unlock(&p->lock);
        if (!a)
            continue;
        lock(a);
        uint64_t r = vdev_pool_reserved(p, j), have = a->reserved;
        unlock(a);
        if (r != have)
            return vdev_error(VDEV_ERR_INTERNAL, "%s: the pool counts %llu bytes reserved by %s, "
                                                 "its allocator holds %llu",
                              p->name, (unsigned long long)r, p->m[j].name,
                              (unsigned long long)have);
    }
    pthread_mutex_lock(&p->lock);
    uint64_t claimed = others_claim(p, -1), floors = floors_locked(p);
    int bad = -1;
    for (int j = 0; j < p->n; j++)
        if (p->m[j].floor > p->m[j].ceiling || p->m[j].ceiling > p->budget)
            bad = j;
    pthread_mutex_unlock(&p->lock);
    if (claimed > p->budget || floors > p->budget)
        return vdev_error(VDEV_ERR_INTERNAL, "%s: claims %s and floors %s exceed the budget %s",
                          p->name, vdev_format_bytes(claimed, b1, sizeof b1),
                          vdev_format_bytes(floors, b2, sizeof b2),
                          vdev_format_bytes(p->budget, (char[32]){0}, 32));
    if (bad >= 0)
        return vdev_error(VDEV_ERR_INTERNAL, "%s: %s's floor is above its ceiling or its ceiling "
                                             "above the budget",
                          p->name, p->m[bad].name);
    return VDEV_OK;
}
