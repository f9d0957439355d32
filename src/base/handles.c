/* handles.c — the handle tables (see handles.h): slot allocation from
 * segments that are never freed, a free list under the table's mutex, and the
 * generation counter that makes old handles fail.
 *
 * Segment k holds 1024 << k slots and is made (zeroed) the first time an index
 * in it is needed; its pointer is published before the count of slots made,
 * both with release stores, so a lookup that sees an index below n_made also
 * sees its segment. A zeroed slot has generation 0 (even: no live handle);
 * taking a slot makes the generation odd, killing its handle makes it even
 * again, so a dead handle and a handle of an earlier object in the slot
 * never match. */
#include "base/handles.h"

#include <string.h>

/* Fault injection: counts segment allocations down to a forced failure. */
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

/* Makes slot `index` exist (a new segment when it starts one). Lock held. */
static enum vdev_status grow(struct vdev_handle_table *t, uint32_t index)
{
    if (index >= VDEV_HANDLE_MAX_SLOTS)
        return vdev_error(VDEV_ERR_OOM, "more than %u live %ss: the %s table is full",
                          VDEV_HANDLE_MAX_SLOTS, t->what, t->what);
    uint32_t j = index + VDEV_HANDLE_SEG0_SLOTS;
    int k = 31 - __builtin_clz(j) - 10;
    if (!atomic_load_explicit(&t->seg[k], memory_order_relaxed)) {
        size_t n = (size_t)VDEV_HANDLE_SEG0_SLOTS << k;
        unsigned char *seg = segment_alloc_fails() ? NULL : calloc(n, t->slot_bytes);
        if (!seg)
            return vdev_error(VDEV_ERR_OOM, "out of host memory for %zu more %s handles", n,
                              t->what);
        atomic_store_explicit(&t->seg[k], seg, memory_order_release);
    }
    struct vdev_handle_slot *s = vdev_handle_slot_at(t, index);
    s->index = index;
    atomic_store_explicit(&t->n_made, index + 1, memory_order_release);
    return VDEV_OK;
}

void *vdev_handle_alloc(struct vdev_handle_table *t, uint64_t *handle)
{
    pthread_mutex_lock(&t->lock);
    struct vdev_handle_slot *s;
    if (t->free_head) {
        s = vdev_handle_slot_at(t, t->free_head - 1);
        t->free_head = s->next_free;
    } else {
        uint32_t index = atomic_load_explicit(&t->n_made, memory_order_relaxed);
        if (grow(t, index) != VDEV_OK) {
            pthread_mutex_unlock(&t->lock);
            return NULL;
        }
        s = vdev_handle_slot_at(t, index);
    }
    VDEV_ASSERT(!s->taken);
    s->taken = 1;
    s->next_free = 0;
    t->n_taken++;
    uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed) + 1; /* even -> odd */
    atomic_store_explicit(&s->gen, gen, memory_order_release);
    pthread_mutex_unlock(&t->lock);
    *handle = vdev_handle_make(t, s->index, gen);
    return (unsigned char *)s + VDEV_HANDLE_HEADER_BYTES;
}

static struct vdev_handle_slot *slot_of(void *p)
{
    return (struct vdev_handle_slot *)(void *)((unsigned char *)p - VDEV_HANDLE_HEADER_BYTES);
}

int vdev_handle_kill(struct vdev_handle_table *t, void *p, uint64_t h)
{
    struct vdev_handle_slot *s = slot_of(p);
    uint32_t gen = (uint32_t)(h >> 32);
    if (h != vdev_handle_make(t, s->index, gen) || !(gen & 1u))
        return 0;
    return atomic_compare_exchange_strong_explicit(&s->gen, &gen, gen + 1, memory_order_acq_rel,
                                                   memory_order_relaxed);
}

uint64_t vdev_handle_revive(struct vdev_handle_table *t, void *p)
{
    struct vdev_handle_slot *s = slot_of(p);
    uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
    VDEV_ASSERT(!(gen & 1u)); /* only a dead handle is revived */
    atomic_store_explicit(&s->gen, gen + 1, memory_order_release);
    return vdev_handle_make(t, s->index, gen + 1);
}

void vdev_handle_release(struct vdev_handle_table *t, void *p)
{
    struct vdev_handle_slot *s = slot_of(p);
    uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
    if (gen & 1u) /* still live: kill it, unless another thread just did */
        atomic_compare_exchange_strong_explicit(&s->gen, &gen, gen + 1, memory_order_acq_rel,
                                                memory_order_relaxed);
    pthread_mutex_lock(&t->lock);
    VDEV_ASSERT(s->taken);
    s->taken = 0;
    s->next_free = t->free_head;
    t->free_head = s->index + 1;
    t->n_taken--;
    pthread_mutex_unlock(&t->lock);
}

uint32_t vdev_handle_count(struct vdev_handle_table *t)
{
    pthread_mutex_lock(&t->lock);
    uint32_t n = t->n_taken;
    pthread_mutex_unlock(&t->lock);
    return n;
}
