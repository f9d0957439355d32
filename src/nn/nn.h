/* nn.h — what src/nn/ offers the layers above beyond the public API (and its
 * files share: the checked handles' lookup and kill, nn.c's): making
 * an optimizer's slots ahead of an update, so that a caller who must know an
 * update cannot fail for want of memory (the mirrored strategy, which
 * updates every replica or none) makes them first; and the gradient
 * clipping of the optimizers (clip.c). */
#ifndef VDEV_NN_H
#define VDEV_NN_H

#include "base/base.h"
#include "base/handles.h"

#include <pthread.h>

struct vdev_tens;

/* The first member of each object behind a checked handle here (optimizer,
 * dense layer, model): the runtime it belongs to. Its tensors (slots,
 * variables) are that runtime's, so after vdev_shutdown the object is
 * refused, even after a new vdev_init, as tensors are; its free still
 * frees it. */
struct vdev_nn_head {
    uint32_t rgen;        /* vdev_runtime_generation of its runtime */
    pthread_mutex_t lock; /* an optimizer's: one update (or slot look-up) at a time */
};
/* The runtime a new object belongs to: the one running, or else the next to
 * start (an optimizer may be made, and set, before vdev_init). An object is
 * alive while its rgen is this. */
uint32_t vdev_nn_runtime(void);

/* A lock of an object held by this thread (vdev_nn_enter), on its stack. */
struct vdev_nn_in {
    struct vdev_nn_head *obj;
    struct vdev_nn_in *outer; /* the lock this thread took before */
};
/* Takes the lock of obj (a struct starting with a struct vdev_nn_head;
 * NULL passes through) for fn, recorded in `in`; returns obj, or NULL with
 * VDEV_ERR_INVALID_ARG when this thread holds it already: a pressure
 * callback met inside an optimizer's update runs on the updating thread,
 * and would wait for itself. */
void *vdev_nn_enter(void *obj, struct vdev_nn_in *in, const char *fn);
/* Lets go of the lock vdev_nn_enter took last on this thread. */
void vdev_nn_leave(struct vdev_nn_in *in);

/* The object behind handle h of table tb for `fn`, or NULL with
 * VDEV_ERR_INVALID_ARG naming what is wrong (NULL, freed, another kind, or
 * made before vdev_shutdown). Its struct starts with a struct vdev_nn_head. */
void *vdev_nn_object_of(struct vdev_handle_table *tb, const void *h, const char *fn);
/* vdev_nn_object_of for a free: an object of a runtime that was shut down
 * is taken. */
void *vdev_nn_object_any(struct vdev_handle_table *tb, const void *h, const char *fn);
/* Kills live handle h of p; 0 with the error set when another caller did. */
int vdev_nn_kill_handle(struct vdev_handle_table *tb, void *p, const void *h, const char *fn);
/* An (out, cap) pair of a call that fills at most cap of out: out may be
 * NULL only with cap 0. 0 with VDEV_ERR_INVALID_ARG naming fn otherwise. */
int vdev_nn_out_fits(const void *out, int cap, const char *fn);

/* Makes the slots (SGD's velocity, only with momentum; Adam's m and v) of
 * vars[0..n) that the optimizer does not have yet, zeros on each variable's
 * device (slots.c), and, while the optimizer clips gradients, the
 * clipping's scratch beside each variable, and the host scratch of the
 * update in the calling thread's block (scratch.c). After VDEV_OK,
 * vdev_optimizer_apply on these variables from the same thread allocates
 * nothing, device or host (with gradients on their variables' devices),
 * clipping included.
 * The slots made stay pending: the next vdev_optimizer_apply (or
 * vdev_optimizer_slots for that variable) keeps them, and
 * vdev_optimizer_unprepare takes them back. Errors: those of
 * vdev_optimizer_apply's arguments (one of the optimizer's own slots among
 * vars too: "vdev_optimizer_prepare: tensor 1 is one of the optimizer's own
 * slots (\"m\"), not a variable it updates", no slot made), VDEV_ERR_OOM
 * (the slots this call made before the failure are freed: the optimizer is
 * as it was). */
enum vdev_status vdev_optimizer_prepare(vdev_optimizer_t *opt, vdev_tensor_t *const *vars, int n);
/* Frees the slots that vdev_optimizer_prepare made and nothing kept yet (a
 * step that another replica could not make): the optimizer is as it was
 * before the prepare. On the thread that prepared. */
void vdev_optimizer_unprepare(vdev_optimizer_t *opt);

/* For the tests: the number of variables optimizer opt's weight decay
 * exclusion list holds now (vdev_optimizer_exclude_from_weight_decay), read
 * under its lock without pruning those freed since (its next call prunes
 * them); -1 with VDEV_ERR_INVALID_ARG for a bad optimizer. */
int vdev_nn_optimizer_n_excluded(vdev_optimizer_t *opt);

/* An optimizer's gradient clipping, as Keras's (0: off): clipnorm wins over
 * global_clipnorm, which wins over clipvalue. */
struct vdev_clip {
    float clipnorm, clipvalue, global_clipnorm;
};

/* Whether c clips anything. */
int vdev_clip_on(const struct vdev_clip *c);

/* Clips grads[0..n) as Keras's Optimizer._clip_gradients (clip.c) into
 * bufs[i] (float32, grads[i]'s shape; the optimizer's scratch, beside each
 * variable) with sums[i] (float32 scalars) for the norms, allocating nothing
 * when each gradient is on its buffer's device. use[i] is then the gradient
 * to apply: bufs[i], or grads[i] when c clips nothing or grads[i] does not
 * fit its buffer (for the update's checks to refuse it). gt[i] is grads[i]'s
 * tensor, held by the caller. Errors: those of
 * the ops (a backend's); the buffers' contents are then undefined. */
enum vdev_status vdev_clip_gradients(const struct vdev_clip *c, vdev_tensor_t *const *grads,
                                     struct vdev_tens *const *gt, int n,
                                     vdev_tensor_t *const *bufs, vdev_tensor_t *const *sums,
                                     vdev_tensor_t **use);

#endif /* VDEV_NN_H */
