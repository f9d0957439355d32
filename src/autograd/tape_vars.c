/* tape_vars.c — a tape's own variables (tape_sets.h, struct varset): those
 * given to vdev_tape_watch, held by the tape until it ends, and those given
 * to vdev_tape_skip, not held (each entry knows its tensor's handle, so a
 * freed one is never mistaken for a tensor made later at its address),
 * kept in the order added and in a hash set over their pointers (the tape's
 * wants asks it at every recorded op). */
#include "autograd/tape_sets.h"

#include <stdlib.h>

/* Puts list entry i into set (of cap slots) with its handle. */
static void set_put(const struct vdev_tens **set, uint64_t *ids, size_t cap,
                    const struct varset *s, int i)
{
    size_t k = ptr_slot(set, cap, s->list[i]);
    set[k] = s->list[i];
    ids[k] = s->lids[i];
}

enum vdev_status vdev_varset_add(struct varset *s, const struct vdev_tens *v, const char *fn)
{
    if (varset_has(s, v))
        return VDEV_OK;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        const struct vdev_tens **set = vdev_calloc(2 * (size_t)cap, sizeof *set);
        uint64_t *ids = set ? vdev_calloc(2 * (size_t)cap, sizeof *ids) : NULL;
        const struct vdev_tens **l = ids ? vdev_realloc(s->list, (size_t)cap * sizeof *l) : NULL;
        if (l)
            s->list = l;
        uint64_t *lids = l ? vdev_realloc(s->lids, (size_t)cap * sizeof *lids) : NULL;
        if (!lids) {
            free(set);
            free(ids);
            return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
        }
        s->lids = lids;
        /* in the order added: a later entry at an earlier one's address wins */
        for (int i = 0; i < s->n; i++)
            set_put(set, ids, 2 * (size_t)cap, s, i);
        free(s->set);
        free(s->ids);
        s->set = set;
        s->ids = ids;
        s->cap = cap;
    }
    if (s->hold)
        vdev_tens_retain(v);
    s->list[s->n] = v;
    s->lids[s->n] = v->handle;
    set_put(s->set, s->ids, 2 * (size_t)s->cap, s, s->n++);
    return VDEV_OK;
}

void vdev_varset_free(struct varset *s)
{
    for (int i = 0; s->hold && i < s->n; i++)
        vdev_tens_release(s->list[i]);
    free(s->list);
    free(s->lids);
    free(s->set);
    free(s->ids);
    s->list = s->set = NULL;
    s->lids = s->ids = NULL;
    s->n = s->cap = 0;
}
