/* nn.h — what src/nn/ offers the layers above beyond the public API: making
 * an optimizer's slots ahead of an update, so that a caller who must know an
 * update cannot fail for want of memory (the mirrored strategy, which
 * updates every replica or none) makes them first; and the gradient
 * clipping of the optimizers (clip.c). */
#ifndef VDEV_NN_H
#define VDEV_NN_H

#include "base/base.h"

/* Makes the slots (velocity; Adam's m and v) of vars[0..n) that the
 * optimizer does not have yet, zeros on each variable's device. After
 * VDEV_OK, vdev_optimizer_apply on these variables allocates nothing.
 * Errors: those of vdev_optimizer_apply's arguments, VDEV_ERR_OOM (slots made
 * before the failure stay; they are zeros, as new ones would be). */
enum vdev_status vdev_optimizer_prepare(vdev_optimizer_t *opt, vdev_tensor_t *const *vars, int n);

/* An optimizer's gradient clipping, as Keras's (0: off): clipnorm wins over
 * global_clipnorm, which wins over clipvalue. */
struct vdev_clip {
    float clipnorm, clipvalue, global_clipnorm;
};

/* Clips grads[0..n) as Keras's Optimizer._clip_gradients (clip.c): out[i]
 * gets a new tensor, the clipped gradient beside grads[i], for the caller to
 * free; all NULL when c clips nothing (the gradients are used as they are).
 * Errors: those of the ops (VDEV_ERR_OOM...), every out[i] then NULL. */
enum vdev_status vdev_clip_gradients(const struct vdev_clip *c, vdev_tensor_t *const *grads, int n,
                                     vdev_tensor_t **out);

#endif /* VDEV_NN_H */
