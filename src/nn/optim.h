/* optim.h — the optimizers' state, shared by the two files that keep it:
 * nn.c (the optimizers, their setters and the update) and slots.c (the
 * slots beside each variable: made, committed or taken back, handed out,
 * and, for SGD whose momentum is switched off, freed). Private to src/nn/. */
#ifndef VDEV_NN_OPTIM_H
#define VDEV_NN_OPTIM_H

#include "nn/nn.h"

#include <stdatomic.h>

enum opt_kind { OPT_SGD, OPT_ADAM };

/* Bits of struct slot's pending and given: s[0..3) at 0..2, clip[0..2) at
 * 3 and 4; SLOT_RECORD (pending only): the record itself was made by a call
 * not yet committed. */
#define SLOT_RECORD (1u << 5)

/* What an optimizer keeps for one variable. SGD without momentum keeps no
 * velocity (s[0] NULL), as Keras makes no momentum slot, but for one that
 * vdev_optimizer_slots handed out before momentum was switched off: that one
 * stays (zeros) while a caller may hold its handle. */
struct slot {
    const vdev_tensor_t *var;   /* its handle: not owned; compared, and looked
                                 * up only to see whether it died (pruned) */
    vdev_tensor_t *s[3];        /* SGD: velocity (only with momentum, or
                                 * handed out); Adam: m, v, and vhat once
                                 * AMSGrad is on (variables, owned) */
    vdev_tensor_t *clip[2];     /* while clipping: the clipped gradient (the
                                 * variable's shape) and a norm's scalar, on
                                 * the variable's device (owned, clip.c) */
    int no_decay;               /* excluded from the weight decay */
    unsigned pending;           /* bit k (s[0..3), then clip[0..2) at 3 and 4,
                                 * SLOT_RECORD): made by a call not yet
                                 * committed (vdev_nn_slots_commit) or taken
                                 * back (vdev_nn_slots_drop_pending) */
    unsigned given;             /* bit k (s[0..3)): handed out by
                                 * vdev_optimizer_slots, so kept until the
                                 * optimizer is freed or the caller gives it
                                 * back (vdev_optimizer_slots_release) */
};

struct optim {
    struct vdev_nn_head head;   /* first (vdev_nn_object_of, vdev_nn_enter) */
    enum opt_kind kind;
    float lr, momentum, beta1, beta2, eps;
    int nesterov, amsgrad;      /* SGD's, Adam's */
    struct vdev_clip clip;      /* Keras's clipnorm, clipvalue, global_clipnorm */
    float weight_decay;         /* Keras's decoupled weight decay (0: none) */
    const vdev_tensor_t **excl; /* variables excluded from it (handles, compared only) */
    int n_excl, cap_excl;
    _Atomic int64_t step;       /* updates applied (Keras's iterations; Adam's t) */
    struct slot *slots;
    int n_slots, cap_slots;
};

/* Whether variable hvar is excluded from the weight decay (nn.c). */
int vdev_nn_excluded(const struct optim *o, const vdev_tensor_t *hvar);

/* ---- slots.c ---- */

/* The slots an update uses: SGD's velocity with momentum (none without);
 * Adam's m, v (and vhat with AMSGrad). */
int vdev_nn_slots_used(const struct optim *o);
/* The record of variable hvar (tensor var) with every slot an update uses
 * now and, while clipping, the clipping's scratch, made (zeros, on var's
 * device, pending) where missing; NULL with the error set (VDEV_ERR_OOM)
 * when one cannot be made (those this call made are freed). */
struct slot *vdev_nn_slot_of(struct optim *o, const vdev_tensor_t *hvar,
                             const struct vdev_tens *var);
/* vdev_nn_slot_of for vars[0..n) (held: their tensors, or NULL to look them
 * up), all or none: on failure every slot not yet committed is freed. */
enum vdev_status vdev_nn_slots_make(struct optim *o, vdev_tensor_t *const *vars,
                                    struct vdev_tens *const *held, int n);
/* Keeps the slots made so far: no vdev_nn_slots_drop_pending takes them back. */
void vdev_nn_slots_commit(struct optim *o);
/* Frees the slots (and clipping scratch) made since the last commit, and
 * forgets the records made since: the optimizer is as it was before. */
void vdev_nn_slots_drop_pending(struct optim *o);
/* SGD's momentum switched off: frees every velocity, but those handed out,
 * which are zeroed in place instead (nothing allocated). VDEV_OK, or a
 * backend's error part way through the zeroing (nothing freed then). */
enum vdev_status vdev_nn_slots_momentum_off(struct optim *o);
/* vdev_optimizer_slots_release: the slots of variable hvar (NULL: of every
 * variable) are no longer handed out; an SGD velocity kept only because it
 * was (momentum is off) is freed. */
void vdev_nn_slots_release(struct optim *o, const vdev_tensor_t *hvar);
/* Frees the clipping scratch of one record. */
void vdev_nn_slot_drop_clip(struct slot *s);
/* Forgets the record of every variable whose handle died (the variable was
 * freed: vdev_tensor_free, its model's free) and frees its slots and
 * clipping scratch, handed out or pending too: their handles die. Called
 * under the optimizer's lock at each of its calls (nn.c's optim_enter), so
 * a freed variable's slots go at the optimizer's next call. */
void vdev_nn_slots_prune(struct optim *o);
/* Frees every slot and record (vdev_optimizer_free). */
void vdev_nn_slots_free(struct optim *o);

/* The calling thread's scratch for updates (scratch.c). reserve: makes its
 * block at least `bytes` long (VDEV_ERR_OOM when the host has no memory for
 * it; left as it is while an outer update holds it). take: at least `bytes`
 * aligned for any type, the thread's block (no host memory taken while it is
 * large enough) or, while an outer update holds that, a block of the call's
 * own; NULL with VDEV_ERR_OOM. give: hands back what take gave (NULL: nothing). */
enum vdev_status vdev_nn_scratch_reserve(size_t bytes);
void *vdev_nn_scratch_take(size_t bytes);
void vdev_nn_scratch_give(void *p);

#endif /* VDEV_NN_OPTIM_H */
