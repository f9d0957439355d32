/* handles.h — checked handles: the public value of every vdev object
 * (tensors, tapes, layers, models, optimizers) is an encoded number, not a
 * pointer, so a stale, freed or foreign handle is detected without touching
 * freed memory.
 *
 * A table hands out slots, each a fixed-size header followed by the object
 * itself (the payload). Slots live in segments of 1024 that are never
 * returned to the system while the process lives, made on first need and
 * listed in a fixed directory (16384 entries: up to 16M live objects per
 * table), so finding a slot is a shift, a load and a multiply. A handle is
 *
 *     (generation << 32) | (tag << 28) | (index + 1)
 *
 * where the tag names the table (a tape handle is never read as a tensor)
 * and the generation is the slot's counter: odd while the handle is live,
 * even once it is dead. A handle dies when its owner gives it up
 * (vdev_handle_kill); the slot itself stays taken while the library still
 * holds the object (references from a tape, a view), and goes back to the
 * table's free list with vdev_handle_release. The next object in that slot
 * gets the next odd generation, so an old handle never matches it (until the
 * 32-bit counter wraps, after 2^31 reuses of one slot).
 *
 * Looking a handle up (vdev_handle_get) takes no lock: it checks the tag,
 * bounds-checks the index against the number of slots ever made, and
 * compares the generation, reading nothing but table memory, so any 64-bit
 * value is safe to look up. Allocation and release take no lock either in
 * the common case: each thread keeps a small cache of free slots per table
 * (up to 64), refilled from and spilled to the table's free list, under its
 * mutex, 32 at a time; a thread's cache goes back to the table when the
 * thread exits (a thread-exit destructor).
 *
 * Usage:
 *     static struct vdev_handle_table tapes = VDEV_HANDLE_TABLE("tape", 2, struct tape);
 *     uint64_t h;
 *     struct tape *t = vdev_handle_alloc(&tapes, &h);   // NULL: VDEV_ERR_OOM set
 *     ...
 *     vdev_tape_t *pub = (vdev_tape_t *)(uintptr_t)h;   // what the caller holds
 *     struct tape *u = vdev_handle_get(&tapes, pub);    // NULL once h is dead
 *     vdev_handle_kill(&tapes, t, h);                   // h dies
 *     vdev_handle_release(&tapes, t);                   // the slot is free again */
#ifndef VDEV_HANDLES_H
#define VDEV_HANDLES_H

#include "base/base.h"

#include <stdatomic.h>
#include <stdint.h>

_Static_assert(sizeof(void *) >= 8, "handles are 64-bit values carried in pointers");

#define VDEV_HANDLE_SEG_SLOTS 1024u     /* slots per segment */
#define VDEV_HANDLE_INDEX_BITS 28       /* bits 0..27 of a handle: index + 1 */
#define VDEV_HANDLE_MAX_SLOTS (1u << 24) /* per table */
#define VDEV_HANDLE_SEGMENTS (VDEV_HANDLE_MAX_SLOTS / VDEV_HANDLE_SEG_SLOTS)

/* The header of every slot; the payload follows it. */
struct vdev_handle_slot {
    _Atomic uint32_t gen; /* odd: the handle is live; even: dead */
    uint32_t index;       /* the slot's own index */
    uint32_t next_free;   /* index + 1 of the next free slot (under the lock), 0 none */
    _Atomic uint32_t taken; /* 1 from alloc to release */
};
#define VDEV_HANDLE_HEADER_BYTES 16u
_Static_assert(sizeof(struct vdev_handle_slot) == VDEV_HANDLE_HEADER_BYTES, "slot header");

struct vdev_handle_table {
    const char *what;        /* "tensor": for messages */
    uint32_t tag;            /* 1..15, bits 28..31 of every handle of the table */
    uint32_t slot_bytes;     /* header + payload, a multiple of 16 */
    _Atomic uint32_t n_made; /* slots ever made: every index below is backed by memory */
    unsigned char *_Atomic seg[VDEV_HANDLE_SEGMENTS]; /* the directory */
    pthread_mutex_t lock;    /* the free list and growth */
    uint32_t free_head;      /* index + 1 of the first free slot, 0 none */
};

/* A static table for objects of type PAYLOAD, with a tag of its own. */
#define VDEV_HANDLE_TABLE(WHAT, TAG, PAYLOAD)                                                      \
    {                                                                                              \
        .what = (WHAT), .tag = (TAG),                                                              \
        .slot_bytes = (uint32_t)((VDEV_HANDLE_HEADER_BYTES + sizeof(PAYLOAD) + 15u) & ~15u),       \
        .lock = PTHREAD_MUTEX_INITIALIZER                                                          \
    }

/* Takes a free slot (or makes one) and gives it a live handle (*handle).
 * Returns the payload, whose contents are whatever the slot's last object
 * left: the caller initialises it. NULL with VDEV_ERR_OOM set when a new
 * segment cannot be allocated or the table holds VDEV_HANDLE_MAX_SLOTS.
 * Thread-safe. */
void *vdev_handle_alloc(struct vdev_handle_table *t, uint64_t *handle);

/* Gives payload p, whose handle is dead, a new live handle and returns it
 * (for an object the library hands out again). Thread-safe. */
uint64_t vdev_handle_revive(struct vdev_handle_table *t, void *p);

/* Returns p's slot to the free list, killing its handle if still live.
 * Thread-safe; p must not be used afterwards. */
void vdev_handle_release(struct vdev_handle_table *t, void *p);

/* Slots taken now (for tests: leaks of objects show here); counts them, in
 * time proportional to the slots ever made. */
uint32_t vdev_handle_count(struct vdev_handle_table *t);

/* Test hook (fault injection): the n-th segment allocation from now on, in
 * any table, fails as if the host were out of memory (n = 1: the next one);
 * n = 0 disarms it. */
void vdev_handles_fail_segment(int n);

/* ---- lookup (inline: it is on every op's path) ---- */

static inline struct vdev_handle_slot *vdev_handle_slot_at(struct vdev_handle_table *t,
                                                           uint32_t index)
{
    unsigned char *seg = atomic_load_explicit(&t->seg[index / VDEV_HANDLE_SEG_SLOTS],
                                              memory_order_acquire);
    return (struct vdev_handle_slot *)(void *)(seg + (size_t)(index % VDEV_HANDLE_SEG_SLOTS) *
                                                         t->slot_bytes);
}

/* The payload of live handle h, or NULL for a NULL, dead, foreign or
 * malformed handle. Lock-free; reads only the table's own memory. */
static inline void *vdev_handle_get(struct vdev_handle_table *t, const void *h)
{
    uint64_t v = (uint64_t)(uintptr_t)h;
    uint32_t lo = (uint32_t)v, gen = (uint32_t)(v >> 32);
    if ((lo >> VDEV_HANDLE_INDEX_BITS) != t->tag || !(gen & 1u))
        return NULL;
    uint32_t index = (lo & ((1u << VDEV_HANDLE_INDEX_BITS) - 1u)) - 1u; /* 0 wraps: rejected */
    if (index >= atomic_load_explicit(&t->n_made, memory_order_acquire))
        return NULL;
    struct vdev_handle_slot *s = vdev_handle_slot_at(t, index);
    if (atomic_load_explicit(&s->gen, memory_order_acquire) != gen)
        return NULL;
    return (unsigned char *)s + VDEV_HANDLE_HEADER_BYTES;
}

/* Whether h, which vdev_handle_get turned into `payload` earlier, still names
 * it: one load of the slot's generation (the slot itself never goes away). */
static inline int vdev_handle_still(const void *payload, const void *h)
{
    const struct vdev_handle_slot *s =
        (const struct vdev_handle_slot *)((const unsigned char *)payload -
                                          VDEV_HANDLE_HEADER_BYTES);
    return atomic_load_explicit(&s->gen, memory_order_acquire) ==
           (uint32_t)((uint64_t)(uintptr_t)h >> 32);
}

/* The handle value of slot `index` at generation `gen`. */
static inline uint64_t vdev_handle_make(const struct vdev_handle_table *t, uint32_t index,
                                        uint32_t gen)
{
    return ((uint64_t)gen << 32) | ((uint64_t)t->tag << VDEV_HANDLE_INDEX_BITS) | (index + 1u);
}

/* Kills handle h of payload p: lookups of h fail from now on. Returns 1, or
 * 0 when h was not p's live handle (another caller killed it first), so of
 * two threads freeing one object only one goes on. The slot stays taken.
 * Thread-safe; inline, since every tensor's end goes through it. */
static inline int vdev_handle_kill(struct vdev_handle_table *t, void *p, uint64_t h)
{
    struct vdev_handle_slot *s =
        (struct vdev_handle_slot *)(void *)((unsigned char *)p - VDEV_HANDLE_HEADER_BYTES);
    uint32_t gen = (uint32_t)(h >> 32);
    if (h != vdev_handle_make(t, s->index, gen) || !(gen & 1u))
        return 0;
    return atomic_compare_exchange_strong_explicit(&s->gen, &gen, gen + 1, memory_order_acq_rel,
                                                   memory_order_relaxed);
}

#endif /* VDEV_HANDLES_H */
