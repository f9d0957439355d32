/* slots.c — the optimizers' slots: the state each keeps beside a variable
 * (SGD's velocity; Adam's m, v and AMSGrad's vhat) and the gradient
 * clipping's scratch, on the variable's device. A slot is made (zeros) by
 * the first update that uses it, all or none for one call: the slots a call
 * makes stay pending until the call commits them, and a call that fails (or
 * a prepared step of the mirrored strategy that another replica could not
 * make) takes them back, so the optimizer is as it was. SGD without
 * momentum has no velocity, as Keras's SGD makes no momentum slot: it makes
 * none, and switching momentum off frees the velocities it had, one copy of
 * every variable's memory (the next update with momentum makes them again,
 * zeros, as a fresh optimizer's). A velocity that vdev_optimizer_slots
 * handed out stays, zeroed in place, since its caller may hold the handle
 * (vdev/nn.h documents it as valid until the optimizer is freed), until the
 * caller gives it back (vdev_optimizer_slots_release): then it is freed.
 * The record of a variable that was freed (its handle dead) goes, its slots
 * freed, at the optimizer's next call (vdev_nn_slots_prune), so a program
 * that makes and frees models while it keeps one optimizer gets their
 * memory back; the tensor layer, below this one, never calls up into it. */
#include "nn/optim.h"
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

void vdev_nn_slot_drop_clip(struct slot *s)
{
    for (int k = 0; k < 2; k++) {
        vdev_tensor_free(s->clip[k]);
        s->clip[k] = NULL;
    }
}

int vdev_nn_slots_used(const struct optim *o)
{
    if (o->kind == OPT_ADAM)
        return o->amsgrad ? 3 : 2;
    return o->momentum != 0 ? 1 : 0;
}

struct slot *vdev_nn_slot_of(struct optim *o, const vdev_tensor_t *hvar,
                             const struct vdev_tens *var)
{
    struct slot *s = NULL;
    for (int i = 0; i < o->n_slots && !s; i++)
        if (o->slots[i].var == hvar)
            s = &o->slots[i];
    int n = vdev_nn_slots_used(o), clip = vdev_clip_on(&o->clip);
    /* want[0..3) the slots, want[3..5) the clipping's scratch */
    int want[5] = {0, 0, 0, 0, 0}, any = 0;
    for (int k = 0; k < n; k++)
        any |= want[k] = !s || !s->s[k];
    any |= want[3] = want[4] = clip && (!s || !s->clip[0]);
    if (s && !any)
        return s;
    if (!s && o->n_slots == o->cap_slots) {
        int cap = o->cap_slots ? 2 * o->cap_slots : 16;
        struct slot *sl = vdev_realloc(o->slots, (size_t)cap * sizeof *sl);
        if (!sl) {
            vdev_error(VDEV_ERR_OOM, "out of host memory for optimizer slots");
            return NULL;
        }
        o->slots = sl;
        o->cap_slots = cap;
    }
    int fresh = !s;
    if (fresh) {
        /* a record even with nothing in it (SGD without momentum or
         * clipping): it keeps the variable's weight decay exclusion */
        s = &o->slots[o->n_slots];
        memset(s, 0, sizeof *s);
        s->var = hvar;
        s->no_decay = vdev_nn_excluded(o, hvar);
        s->pending = SLOT_RECORD;
    }
    vdev_tensor_t *made[5] = {NULL, NULL, NULL, NULL, NULL};
    int ok = 1;
    vdev_placement_push_dev(var->dev);
    for (int k = 0; k < 5 && ok; k++)
        if (want[k]) {
            int scalar = k == 4;
            made[k] = vdev_variable(
                vdev_tensor_zeros(var->shape, scalar ? 0 : var->ndim, VDEV_F32));
            ok = made[k] != NULL;
        }
    vdev_placement_pop_dev();
    if (!ok) {
        for (int j = 0; j < 5; j++)
            vdev_tensor_free(made[j]);
        if (fresh)
            memset(s, 0, sizeof *s);
        return NULL;
    }
    /* slots are state, not trainable */
    for (int k = 0; k < 5; k++)
        if (made[k]) {
            s->pending |= 1u << k;
            vdev_tens_peek(made[k])->requires_grad = 0;
            if (k < 3) {
                /* given out by vdev_optimizer_slots: a caller's free is refused */
                vdev_tens_set_owner(made[k], VDEV_TENS_OWNER_OPTIMIZER);
                s->s[k] = made[k];
            } else {
                s->clip[k - 3] = made[k];
            }
        }
    if (fresh)
        o->n_slots++;
    return s;
}

void vdev_nn_slots_commit(struct optim *o)
{
    for (int i = 0; i < o->n_slots; i++)
        o->slots[i].pending = 0;
}

void vdev_nn_slots_drop_pending(struct optim *o)
{
    int kept = 0;
    for (int i = 0; i < o->n_slots; i++) {
        struct slot *s = &o->slots[i];
        for (int k = 0; k < 5; k++) {
            if (!(s->pending & (1u << k)))
                continue;
            if (k < 3) {
                vdev_tens_free_owned(s->s[k]);
                s->s[k] = NULL;
            } else {
                vdev_tensor_free(s->clip[k - 3]);
                s->clip[k - 3] = NULL;
            }
        }
        /* a record those calls made holds nothing now: forgotten */
        int forget = (s->pending & SLOT_RECORD) != 0;
        s->pending = 0;
        if (!forget)
            o->slots[kept++] = *s;
    }
    o->n_slots = kept;
}

enum vdev_status vdev_nn_slots_make(struct optim *o, vdev_tensor_t *const *vars,
                                    struct vdev_tens *const *held, int n)
{
    enum vdev_status st = VDEV_OK;
    for (int i = 0; i < n && st == VDEV_OK; i++) {
        struct vdev_tens *v = held ? held[i] : vdev_tens_peek(vars[i]);
        if (!v)
            st = vdev_error(VDEV_ERR_INVALID_ARG, "variable #%d was freed by another thread", i);
        else if (!vdev_nn_slot_of(o, vars[i], v))
            st = vdev_last_status();
    }
    if (st != VDEV_OK)
        vdev_nn_slots_drop_pending(o); /* frees only: the error stays */
    return st;
}

/* Zeroes velocity t in place: nothing allocated, so it cannot run out of
 * memory; the fill is an in-place write (a tape that read the slot keeps the
 * value it read), queued on the slot's device's stream. */
static enum vdev_status zero_in_place(vdev_tensor_t *h)
{
    struct vdev_tens *t = vdev_tens_peek(h);
    if (!t->numel)
        return VDEV_OK;
    vdev_tens_write_begin(t, t->dev);
    enum vdev_status st =
        vdev_backend_fill(t->dev->backend, t->dev->bdev, t->data, 0, (uint64_t)t->numel);
    t->host_written = 0;
    vdev_tens_write_end(t);
    return st;
}

/* Frees record s's SGD velocity, if it has one (stream-ordered, as any
 * free). */
static void drop_velocity(struct slot *s)
{
    if (!s->s[0])
        return;
    vdev_tens_free_owned(s->s[0]);
    s->s[0] = NULL;
    s->pending &= ~1u;
}

enum vdev_status vdev_nn_slots_momentum_off(struct optim *o)
{
    /* the zeroing first: only it can fail, and then nothing is freed */
    for (int i = 0; i < o->n_slots; i++) {
        struct slot *s = &o->slots[i];
        if (s->s[0] && (s->given & 1u)) {
            enum vdev_status st = zero_in_place(s->s[0]);
            if (st != VDEV_OK)
                return st;
        }
    }
    /* no caller holds the others: freed (stream-ordered, as any free) */
    for (int i = 0; i < o->n_slots; i++)
        if (!(o->slots[i].given & 1u))
            drop_velocity(&o->slots[i]);
    return VDEV_OK;
}

void vdev_nn_slots_release(struct optim *o, const vdev_tensor_t *hvar)
{
    for (int i = 0; i < o->n_slots; i++) {
        struct slot *s = &o->slots[i];
        if (hvar && s->var != hvar)
            continue;
        s->given = 0;
        /* a velocity kept only for its holder (momentum is off): freed as
         * switching momentum off frees one never handed out */
        if (o->kind == OPT_SGD && o->momentum == 0)
            drop_velocity(s);
    }
}

void vdev_nn_slots_prune(struct optim *o)
{
    int kept = 0;
    for (int i = 0; i < o->n_slots; i++) {
        struct slot *s = &o->slots[i];
        /* a live handle: the variable is there (a freed one's handle never
         * comes back; its table slot's next tensor has a new generation) */
        if (vdev_tens_peek(s->var)) {
            o->slots[kept++] = *s;
            continue;
        }
        /* its slots, handed out or not, pending or not: no update can use
         * them again (stream-ordered frees, as any free) */
        for (int k = 0; k < 3; k++)
            vdev_tens_free_owned(s->s[k]);
        vdev_nn_slot_drop_clip(s);
    }
    o->n_slots = kept;
}

void vdev_nn_slots_free(struct optim *o)
{
    for (int i = 0; i < o->n_slots; i++) {
        for (int k = 0; k < 3; k++)
            vdev_tens_free_owned(o->slots[i].s[k]);
        vdev_nn_slot_drop_clip(&o->slots[i]);
    }
    free(o->slots);
    o->slots = NULL;
    o->n_slots = o->cap_slots = 0;
}
