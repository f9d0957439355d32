/* tape_sets.h — the tape's hash tables over tensor pointers (tape.c only):
 * the gradient map (tensor -> its gradient so far) and the tensor set (the
 * tensors that lead to a requested variable, the variables asked for, a
 * tape's watched variables), both open addressing with linear probing over a
 * power-of-two capacity, sharing one slot function, and the list-and-set of a
 * tape's own variables (those it watches, those it skips). Every probe counts in
 * vdev_tape_lookup_steps (ops/ops.h), which tests read to check that the work
 * stays linear. */
#ifndef VDEV_AUTOGRAD_TAPE_SETS_H
#define VDEV_AUTOGRAD_TAPE_SETS_H

#include "ops/ops.h"

#include <stddef.h>
#include <stdint.h>

/* Gradients by tensor: open addressing over tensor pointers. */
struct gmap {
    const struct vdev_tens **keys;
    struct vdev_tens **vals;
    size_t cap;
};

/* k's slot among keys[0..cap) (cap a power of two): where it is, or the
 * empty slot where it goes. The gradient map and the tensor set share it. */
static inline size_t ptr_slot(const struct vdev_tens *const *keys, size_t cap,
                              const struct vdev_tens *k)
{
    uint64_t h = ((uintptr_t)k >> 4) * 0x9e3779b97f4a7c15ull;
    /* the low bits of a product depend on the low bits alone: fold the high
     * ones in, so pointers a power of two apart spread too */
    size_t i = (size_t)(h ^ (h >> 32)) & (cap - 1);
    vdev_tape_lookup_steps++;
    while (keys[i] && keys[i] != k) {
        i = (i + 1) & (cap - 1);
        vdev_tape_lookup_steps++;
    }
    return i;
}

static inline size_t gmap_slot(const struct gmap *m, const struct vdev_tens *k)
{
    return ptr_slot(m->keys, m->cap, k);
}

/* The tensors that lead to a requested variable: a set over tensor pointers,
 * open addressing, the same capacity and hash as the gradient map. */
struct tset {
    const struct vdev_tens **keys;
    size_t cap;
};

static inline size_t tset_slot(const struct tset *s, const struct vdev_tens *k)
{
    return ptr_slot(s->keys, s->cap, k);
}

static inline int tset_has(const struct tset *s, const struct vdev_tens *k)
{
    return s->keys[tset_slot(s, k)] != NULL;
}

static inline void tset_add(struct tset *s, const struct vdev_tens *k)
{
    s->keys[tset_slot(s, k)] = k;
}

/* A tape's own variables (tape_vars.c), in the order added, with a hash set
 * of twice the list's capacity for has. A set that holds them (hold: the
 * watched ones) keeps them alive until vdev_varset_free; one that does not
 * (the skipped ones: a variable the tape only ignores is freed when its
 * owner frees it) compares each entry's handle too (ids, lids), so that
 * another tensor later made at a freed one's address is not taken for it. */
struct varset {
    const struct vdev_tens **list;
    uint64_t *lids; /* list[i]'s handle */
    int n, cap, hold;
    const struct vdev_tens **set;
    uint64_t *ids; /* set[i]'s handle */
};

static inline int varset_has(const struct varset *s, const struct vdev_tens *v)
{
    if (!s->set)
        return 0;
    size_t i = ptr_slot(s->set, 2 * (size_t)s->cap, v);
    return s->set[i] == v && (s->hold || s->ids[i] == v->handle);
}

/* Adds v (held) unless there; VDEV_ERR_OOM "<fn>: out of host memory". */
enum vdev_status vdev_varset_add(struct varset *s, const struct vdev_tens *v, const char *fn);
/* Releases the variables and empties s. */
void vdev_varset_free(struct varset *s);

#endif /* VDEV_AUTOGRAD_TAPE_SETS_H */
