/* handles.c — the handle tables (see handles.h): slot allocation from
 * segments that are never freed, a free list under the table's mutex with a
 * per-thread cache in front of it, and the generation counter that makes old
 * handles fail.
 *
 * A segment of 1024 slots is made (zeroed) the first time an index in it is
 * needed; its pointer is published before the count of slots made,
 * both with release stores, so a lookup that sees an index below n_made also
 * sees its segment. A zeroed slot has generation 0 (even: no live handle);
 * taking a slot makes the generation odd, killing its handle makes it even
 * again, so a dead handle and a handle of an earlier object in the slot
 * never match.
 *
 * Free slots sit either on the table's free list (under its mutex) or in a
 * thread's cache (a small stack per table, touched only by its thread), so
 * the usual alloc and release take no lock: an op's output tensor costs no
 * more than the malloc/free it replaces. A cache refills from the list, or
 * by making new slots, CACHE_MOVE at a time, and spills CACHE_MOVE back when
 * full; a thread's caches go back to their tables when the thread exits (a
 * pthread key's destructor, armed again if a later destructor of that
 * thread releases more slots). */
#include "base/handles.h"

#include <string.h>

#define CACHE_SLOTS 64 /* free slots a thread keeps per table */
#define CACHE_MOVE 32  /* slots moved between a cache and its table at once */
#define MAX_TAGS 16

struct cache {
    struct vdev_handle_table *table; /* set on first use */
    uint32_t n;
    uint32_t index[CACHE_SLOTS];
};

static _Thread_local struct cache caches[MAX_TAGS];
static _Thread_local int exit_hook_armed;

/* ---- fault injection ---- */

/* Counts segment allocations down to a forced failure. */
static _Atomic int fail_segment_countdown;

void vdev_handles_fail_segment(int n) { atomic_store(&fail_segment_countdown, n); }

static int segment_alloc_fails(void)
{
    int n = atomic_load(&fail_segment_countdown);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&fail_segment_countdown, &n, n - 1))
            return n == 1;
    }
    return 0;
}

/* ---- the table's free list (lock held) ---- */

/* Makes slot `index` exist (a new segment when it starts one). */
static enum vdev_status grow(struct vdev_handle_table *t, uint32_t index)
{
    if (index >= VDEV_HANDLE_MAX_SLOTS)
        return vdev_error(VDEV_ERR_OOM, "more than %u live %ss: the %s table is full",
                          VDEV_HANDLE_MAX_SLOTS, t->what, t->what);
    uint32_t k = index / VDEV_HANDLE_SEG_SLOTS;
    if (!atomic_load_explicit(&t->seg[k], memory_order_relaxed)) {
        unsigned char *seg =
            segment_alloc_fails() ? NULL : vdev_calloc(VDEV_HANDLE_SEG_SLOTS, t->slot_bytes);
        if (!seg)
            return vdev_error(VDEV_ERR_OOM, "out of host memory for %u more %s handles",
                              VDEV_HANDLE_SEG_SLOTS, t->what);
        atomic_store_explicit(&t->seg[k], seg, memory_order_release);
    }
    struct vdev_handle_slot *s = vdev_handle_slot_at(t, index);
    s->index = index;
    atomic_store_explicit(&t->n_made, index + 1, memory_order_release);
    return VDEV_OK;
}

/* Moves up to CACHE_MOVE free slots into the empty cache c: from the free
 * list, else new ones. VDEV_ERR_OOM when not even one can be had. */
static enum vdev_status refill(struct vdev_handle_table *t, struct cache *c)
{
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&t->lock);
    while (c->n < CACHE_MOVE && t->free_head) {
        struct vdev_handle_slot *s = vdev_handle_slot_at(t, t->free_head - 1);
        t->free_head = s->next_free;
        c->index[c->n++] = s->index;
    }
    /* New slots: as many as the current segment has left, at most CACHE_MOVE. */
    while (c->n < CACHE_MOVE) {
        uint32_t index = atomic_load_explicit(&t->n_made, memory_order_relaxed);
        if (c->n && index % VDEV_HANDLE_SEG_SLOTS == 0)
            break; /* a new segment: only when nothing else is left */
        if ((st = grow(t, index)) != VDEV_OK)
            break;
        c->index[c->n++] = index;
    }
    pthread_mutex_unlock(&t->lock);
    return c->n ? VDEV_OK : st;
}

/* Moves CACHE_MOVE slots of the full cache c to the free list. */
static void spill(struct vdev_handle_table *t, struct cache *c)
{
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < CACHE_MOVE; i++) {
        uint32_t index = c->index[--c->n];
        vdev_handle_slot_at(t, index)->next_free = t->free_head;
        t->free_head = index + 1;
    }
    pthread_mutex_unlock(&t->lock);
}

/* ---- thread exit: caches back to their tables ---- */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_made; /* written once under exit_once */

static void at_thread_exit(void *unused)
{
    VDEV_UNUSED(unused);
    exit_hook_armed = 0; /* a later destructor's release arms it again */
    for (int tag = 0; tag < MAX_TAGS; tag++) {
        struct cache *c = &caches[tag];
        if (!c->n)
            continue;
        pthread_mutex_lock(&c->table->lock);
        while (c->n) {
            uint32_t index = c->index[--c->n];
            vdev_handle_slot_at(c->table, index)->next_free = c->table->free_head;
            c->table->free_head = index + 1;
        }
        pthread_mutex_unlock(&c->table->lock);
    }
}

static void make_exit_key(void) { exit_key_made = pthread_key_create(&exit_key, at_thread_exit) == 0; }

/* Without the key (the system refused one), a thread's cached slots are
 * lost to reuse when it exits: memory the table keeps anyway. */
static void arm_exit_hook(void)
{
    pthread_once(&exit_once, make_exit_key);
    if (exit_key_made && pthread_setspecific(exit_key, caches) == 0)
        exit_hook_armed = 1;
}

/* ---- alloc, kill, revive, release ---- */

/* The slow path of vdev_handle_alloc: the thread's first use of the table,
 * or an empty cache. */
static __attribute__((noinline)) enum vdev_status alloc_slow(struct vdev_handle_table *t,
                                                             struct cache *c)
{
    if (!c->table)
        c->table = t;
    VDEV_ASSERT(c->table == t); /* one table per tag */
    if (!exit_hook_armed)
        arm_exit_hook();
    return refill(t, c);
}

void *vdev_handle_alloc(struct vdev_handle_table *t, uint64_t *handle)
{
    struct cache *c = &caches[t->tag];
    if (__builtin_expect(!c->n, 0) && alloc_slow(t, c) != VDEV_OK)
        return NULL;
    struct vdev_handle_slot *s = vdev_handle_slot_at(t, c->index[--c->n]);
    VDEV_DEBUG_ASSERT(!atomic_load_explicit(&s->taken, memory_order_relaxed));
    atomic_store_explicit(&s->taken, 1, memory_order_relaxed);
    uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed) + 1; /* even -> odd */
    atomic_store_explicit(&s->gen, gen, memory_order_release);
    *handle = vdev_handle_make(t, s->index, gen);
    return (unsigned char *)s + VDEV_HANDLE_HEADER_BYTES;
}

static struct vdev_handle_slot *slot_of(void *p)
{
    return (struct vdev_handle_slot *)(void *)((unsigned char *)p - VDEV_HANDLE_HEADER_BYTES);
}

uint64_t vdev_handle_revive(struct vdev_handle_table *t, void *p)
{
    struct vdev_handle_slot *s = slot_of(p);
    uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
    VDEV_ASSERT(!(gen & 1u)); /* only a dead handle is revived */
    atomic_store_explicit(&s->gen, gen + 1, memory_order_release);
    return vdev_handle_make(t, s->index, gen + 1);
}

/* The slow path of vdev_handle_release: the thread's first use of the table,
 * a full cache, or a release after the thread's caches were flushed at its
 * exit. */
static __attribute__((noinline)) void release_slow(struct vdev_handle_table *t, struct cache *c)
{
    if (!c->table)
        c->table = t;
    VDEV_ASSERT(c->table == t); /* one table per tag */
    if (c->n == CACHE_SLOTS)
        spill(t, c);
    if (!exit_hook_armed)
        arm_exit_hook();
}

void vdev_handle_release(struct vdev_handle_table *t, void *p)
{
    struct vdev_handle_slot *s = slot_of(p);
    uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
    if (gen & 1u) /* still live: kill it, unless another thread just did */
        atomic_compare_exchange_strong_explicit(&s->gen, &gen, gen + 1, memory_order_acq_rel,
                                                memory_order_relaxed);
    VDEV_DEBUG_ASSERT(atomic_load_explicit(&s->taken, memory_order_relaxed));
    atomic_store_explicit(&s->taken, 0, memory_order_relaxed);
    struct cache *c = &caches[t->tag];
    if (__builtin_expect(c->n == CACHE_SLOTS || !exit_hook_armed || !c->table, 0))
        release_slow(t, c);
    c->index[c->n++] = s->index;
}

uint32_t vdev_handle_count(struct vdev_handle_table *t)
{
    uint32_t made = atomic_load_explicit(&t->n_made, memory_order_acquire), n = 0;
    for (uint32_t i = 0; i < made; i++)
        n += atomic_load_explicit(&vdev_handle_slot_at(t, i)->taken, memory_order_relaxed) != 0;
    return n;
}
