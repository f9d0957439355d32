/* tape_vars.c — a tape's own variables (tape_sets.h, struct varset): those
 * given to vdev_tape_watch and those given to vdev_tape_skip, each held by
 * the tape until it ends, kept in the order added and in a hash set over
 * their pointers (the tape's wants asks it at every recorded op). */
#include "autograd/tape_sets.h"

#include <stdlib.h>

enum vdev_status vdev_varset_add(struct varset *s, const struct vdev_tens *v, const char *fn)
{
    if (varset_has(s, v))
        return VDEV_OK;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        const struct vdev_tens **set = calloc(2 * (size_t)cap, sizeof *set);
        const struct vdev_tens **l = set ? realloc(s->list, (size_t)cap * sizeof *l) : NULL;
        if (!l) {
            free(set);
            return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
        }
        for (int i = 0; i < s->n; i++)
            set[ptr_slot(set, 2 * (size_t)cap, l[i])] = l[i];
        free(s->set);
        s->list = l;
        s->set = set;
        s->cap = cap;
    }
    vdev_tens_retain(v);
    s->list[s->n++] = v;
    s->set[ptr_slot(s->set, 2 * (size_t)s->cap, v)] = v;
    return VDEV_OK;
}

void vdev_varset_free(struct varset *s)
{
    for (int i = 0; i < s->n; i++)
        vdev_tens_release(s->list[i]);
    free(s->list);
    free(s->set);
    s->list = s->set = NULL;
    s->n = s->cap = 0;
}
