/* vdev/nn.h — changing an optimizer's hyperparameters after it was made:
 * the learning rate, SGD's momentum, Adam's betas and epsilon, as Keras lets
 * a program set `optimizer.learning_rate` (a schedule, ReduceLROnPlateau).
 * Part of the public API (vdev.h includes it; it may also be included
 * alone, as it includes vdev.h).
 * Same conventions as vdev.h: every fallible call returns enum vdev_status
 * and leaves a message in vdev_last_error(); a failed call changes nothing.
 *
 * Example: divide the learning rate by 10 after epoch 30
 *
 *     vdev_optimizer_t *opt = vdev_sgd_new(0.1f, 0.9f);
 *     ...
 *     if (epoch == 30)
 *         vdev_sgd_set(opt, 0.01f, 0.9f);   // the next update uses 0.01
 */
#ifndef VDEV_VDEV_NN_H
#define VDEV_VDEV_NN_H

#include "vdev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets an SGD optimizer's learning rate and momentum; the next
 * vdev_optimizer_apply uses them. The values are checked as vdev_sgd_new
 * checks them, with its message ("vdev_sgd_set: learning rate %g must be >= 0
 * and momentum %g in [0, 1]"; a learning rate of 0 (the start of a warm-up)
 * and momentum 1 are allowed, as Keras's SGD allows them; a NaN or infinite
 * value is named first: "vdev_sgd_set: learning rate is inf, not a finite
 * number"). Momentum 0 means no velocity, as in Keras:
 * switching momentum off zeroes the velocity slots at once, in place (a slot
 * handle kept from vdev_optimizer_slots reads zeros; no memory is needed),
 * updates without momentum leave them so (var -= lr g), and momentum
 * switched on again starts from zeros, as a fresh optimizer's; while
 * momentum stays on, the velocity carries on as it is. Errors:
 * VDEV_ERR_INVALID_ARG for opt NULL, freed or not an optimizer, an Adam
 * optimizer ("vdev_sgd_set: the optimizer is Adam, not SGD"), a bad value.
 * Not at the same time as an update by the same optimizer on another
 * thread. */
VDEV_API enum vdev_status vdev_sgd_set(vdev_optimizer_t *opt, float learning_rate,
                                       float momentum);

/* Sets an Adam optimizer's learning rate, betas and epsilon; the next
 * vdev_optimizer_apply uses them (its bias correction with the new betas and
 * the step count so far, as TensorFlow's ApplyAdam computes it from the
 * betas of each step). Checked as vdev_adam_new checks them, with its
 * message ("vdev_adam_set: needs learning rate >= 0, betas in [0, 1),
 * epsilon > 0 (got ...)"; a learning rate of 0 is allowed, as SGD's; a NaN
 * or infinite value is named first: "vdev_adam_set: beta2 is NaN, not a
 * finite number"). Errors (VDEV_ERR_INVALID_ARG): opt NULL, freed or not an
 * optimizer, an SGD optimizer ("vdev_adam_set: the optimizer is SGD, not
 * Adam"), a bad value. Not at the same time as an update by the same
 * optimizer on another thread. */
VDEV_API enum vdev_status vdev_adam_set(vdev_optimizer_t *opt, float learning_rate, float beta1,
                                        float beta2, float epsilon);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_NN_H */
