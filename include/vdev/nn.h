/* vdev/nn.h — layers, models and optimizers: the dense layer, the MLP and
 * its variables; SGD and Adam, their slots and iteration count (what a
 * checkpoint saves to resume training); and their hyperparameters changed
 * after they were made (the learning rate, SGD's momentum, Adam's betas and
 * epsilon), as Keras lets a program set `optimizer.learning_rate` (a
 * schedule, ReduceLROnPlateau); SGD's Nesterov momentum, Adam's AMSGrad,
 * gradient clipping and weight decay (Keras's nesterov, amsgrad, clipnorm,
 * clipvalue, global_clipnorm, weight_decay). Every optimizer's declarations
 * are here. Part of the public API: vdev.h includes it, and it may be
 * included alone (it includes the parts it builds on). Same conventions as
 * vdev.h: every fallible call returns enum vdev_status and leaves a message
 * in vdev_last_error(); a failed call changes nothing.
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

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== nn ==================================================================
 * Layers, models and optimizers are checked handles, as tensors are: a freed
 * one, a NULL one or one of another kind is VDEV_ERR_INVALID_ARG naming it.
 * One made before vdev_shutdown() is refused after it, even after a new
 * vdev_init() ("vdev_adam_set: the optimizer belongs to a runtime that was
 * shut down (made before vdev_shutdown)"): its slots or variables were that
 * runtime's. Its _free still frees it. An optimizer made while no runtime
 * runs (it starts none) belongs to the next one to start. */

/* ---- layers and models ---- */

enum vdev_activation { VDEV_ACT_NONE = 0, VDEV_ACT_RELU, VDEV_ACT_TANH, VDEV_ACT_SIGMOID,
                       VDEV_ACT_COUNT };

typedef struct vdev_dense vdev_dense_t;
/* y = act(x W + b), W [in, out] Glorot-uniform from seed, b zeros; made on the
 * current device scope. */
VDEV_API vdev_dense_t *vdev_dense_new(int64_t in, int64_t out, enum vdev_activation act,
                                      uint64_t seed);
/* x [N, in] to [N, out], a new tensor (see vdev/tensor.h); the tensors made
 * on the way are freed before it returns (a tape that recorded them keeps
 * what it needs). NULL for a bad layer (VDEV_ERR_INVALID_ARG naming it) or
 * the error of an op. */
VDEV_API vdev_tensor_t *vdev_dense_forward(vdev_dense_t *layer, const vdev_tensor_t *x);
/* Frees the layer and its variables. NULL is a no-op; a dead handle is
 * VDEV_ERR_INVALID_ARG ("vdev_dense_free: not a live dense layer (freed
 * already, or not a dense layer)"). */
VDEV_API void vdev_dense_free(vdev_dense_t *layer);

typedef struct vdev_mlp vdev_mlp_t;
/* Layers sizes[0] -> sizes[1] -> ... -> sizes[n_sizes-1]; `hidden` after each
 * layer but the last, `output` after the last. */
VDEV_API vdev_mlp_t *vdev_mlp_new(const int64_t *sizes, int n_sizes, enum vdev_activation hidden,
                                  enum vdev_activation output, uint64_t seed);
/* The model's output for x [N, sizes[0]], as vdev_dense_forward: every layer's
 * output but the last is freed before it returns. */
VDEV_API vdev_tensor_t *vdev_mlp_forward(vdev_mlp_t *m, const vdev_tensor_t *x);
/* The variables (W0, b0, W1, b1, ...); returns their number (fills at most
 * cap; out may be NULL only when cap is 0, to ask the number). -1 with
 * VDEV_ERR_INVALID_ARG for a bad model, a negative cap, or out NULL with
 * cap > 0. The tensors stay the model's: vdev_mlp_free frees them, and
 * vdev_tensor_free refuses them (VDEV_ERR_INVALID_ARG, "vdev_tensor_free: the
 * tensor is a model's variable (vdev_mlp_variables); it is freed with its
 * model (vdev_mlp_free)"). */
VDEV_API int vdev_mlp_variables(const vdev_mlp_t *m, vdev_tensor_t **out, int cap);
/* Frees the model and its variables. NULL is a no-op; a dead handle is
 * VDEV_ERR_INVALID_ARG, as vdev_dense_free's. */
VDEV_API void vdev_mlp_free(vdev_mlp_t *m);

/* ---- optimizers ----
 *
 * An optimizer keeps its slots per variable (by handle). Once a variable
 * is freed (vdev_tensor_free, or its model's free), the optimizer's next
 * call that takes it (vdev_optimizer_apply, vdev_optimizer_slots,
 * vdev_optimizer_slots_release, a setter: whatever that call returns)
 * frees that variable's slots, handed out or not, and their handles die
 * (and forgets its weight decay exclusion, if it had one):
 * a program that keeps one optimizer while it makes and frees models gets
 * their slots' device memory back (vdev_optimizer_slots_release(opt, NULL)
 * is such a call that changes nothing else). A variable made later starts
 * with no slots, even one whose handle reuses the freed one's place in the
 * handle table (its generation differs). Freeing a variable never waits for
 * an optimizer: the slots go under the optimizer's own lock, at its call.
 * (Keras keeps a deleted variable's slots until the optimizer goes.) */

typedef struct vdev_optimizer vdev_optimizer_t;
/* SGD with a learning rate >= 0 and momentum in [0, 1], as Keras's (momentum
 * 0 for plain SGD). Without momentum it keeps no velocity slot, as Keras's
 * SGD makes none: its updates take no device memory beyond the variables and
 * gradients (with momentum, one velocity the size of each variable, on its
 * device: per replica under a mirrored strategy). */
VDEV_API vdev_optimizer_t *vdev_sgd_new(float learning_rate, float momentum);
/* Adam; TensorFlow's defaults are 0.001, 0.9, 0.999, 1e-7. */
VDEV_API vdev_optimizer_t *vdev_adam_new(float learning_rate, float beta1, float beta2,
                                         float epsilon);
/* Updates each variable in place on its own device, and counts the update
 * (refused at the largest count: see vdev_optimizer_get_iterations).
 * Updates by one optimizer from several threads run one at a time (as do
 * vdev_optimizer_slots and the setters: vdev_sgd_set, vdev_adam_set, the
 * clipping, the weight decay ..., which wait for an update under way), each
 * counted; a call of any of them for the optimizer from a pressure callback
 * met inside its own update is VDEV_ERR_INVALID_ARG ("vdev_optimizer_slots:
 * called during an update by the same optimizer on this thread (a pressure
 * callback)"). A variable that is one of this optimizer's own slots (a
 * handle vdev_optimizer_slots gave out) is VDEV_ERR_INVALID_ARG naming its
 * index and slot ("vdev_optimizer_apply: tensor 2 is one of the optimizer's
 * own slots (\"v\"), not a variable it updates": a slot has no slots),
 * before anything changes: no variable updated, no slot made (for the
 * other variables of the call either), the iteration count as it was.
 * Another optimizer's slot is a variable like any other to this one. */
VDEV_API enum vdev_status vdev_optimizer_apply(vdev_optimizer_t *opt, vdev_tensor_t *const *vars,
                                               vdev_tensor_t *const *grads, int n);
/* The optimizer's state for variable var, to save in a checkpoint and load
 * back (training then goes on bit for bit as if it had never stopped): its
 * slots, as variables on var's device, made (zeros) if they do not exist yet —
 * Adam: "m" then "v"; SGD with momentum: "momentum" (Keras's names); SGD
 * without momentum has none and makes none (0). A slot handle given out
 * stays valid until vdev_optimizer_free (or vdev_optimizer_slots_release,
 * or var's free: see above), whatever the hyperparameters do: a velocity
 * given out is kept when momentum is switched off, zeroed (see
 * vdev_sgd_set), where one never given out is freed. Returns their number,
 * filling at most cap of out (and of names, unless NULL); -1 with
 * VDEV_ERR_INVALID_ARG for a bad optimizer or variable, a negative cap or
 * out NULL with cap > 0, var one of this optimizer's own slots
 * ("vdev_optimizer_slots: tensor 0 is one of the optimizer's own slots
 * (\"m\"), not a variable it updates": a slot has no slots; nothing
 * changed), or the error of making a slot (VDEV_ERR_OOM). The tensors stay
 * the optimizer's: vdev_optimizer_free frees them, and vdev_tensor_free
 * refuses them. */
VDEV_API int vdev_optimizer_slots(vdev_optimizer_t *opt, vdev_tensor_t *var, vdev_tensor_t **out,
                                  const char **names, int cap);
/* Gives back the slot handles vdev_optimizer_slots handed out for variable
 * var (NULL: for every variable): the caller holds them no longer (a
 * checkpoint's save or load that has written or read them), and they must
 * not be used after this call. They are the optimizer's alone again, as if
 * never handed out: switching SGD's momentum off frees them, and an SGD
 * velocity kept (zeroed) only because it was handed out while momentum is
 * off is freed now. Nothing else changes (Adam's slots stay: it keeps them
 * until vdev_optimizer_free). VDEV_ERR_INVALID_ARG for a bad optimizer or a
 * var that is not a live variable; a var the optimizer keeps nothing for is
 * VDEV_OK, nothing done. */
VDEV_API enum vdev_status vdev_optimizer_slots_release(vdev_optimizer_t *opt,
                                                       vdev_tensor_t *var);
/* Updates applied so far (Keras's `iterations`; Adam's bias correction
 * counts from it): save it beside the slots and set it on restore. Any
 * count >= 0 may be set (a negative one is VDEV_ERR_INVALID_ARG); at
 * INT64_MAX no update can be counted after it, and vdev_optimizer_apply is
 * VDEV_ERR_INVALID_ARG ("vdev_optimizer_apply: the iteration count is
 * 9223372036854775807, the largest an int64 holds: no update can be counted
 * after it"), nothing changed. */
VDEV_API enum vdev_status vdev_optimizer_get_iterations(const vdev_optimizer_t *opt,
                                                        int64_t *out);
VDEV_API enum vdev_status vdev_optimizer_set_iterations(vdev_optimizer_t *opt, int64_t n);
/* Frees the optimizer and its slots. NULL is a no-op; a dead handle is
 * VDEV_ERR_INVALID_ARG, as vdev_dense_free's. */
VDEV_API void vdev_optimizer_free(vdev_optimizer_t *opt);

/* ---- optimizers: hyperparameters changed between updates ---- */


/* Sets an SGD optimizer's learning rate and momentum; the next
 * vdev_optimizer_apply uses them. The values are checked as vdev_sgd_new
 * checks them, with its message ("vdev_sgd_set: learning rate %g must be >= 0
 * and momentum %g in [0, 1]"; a learning rate of 0 (the start of a warm-up)
 * and momentum 1 are allowed, as Keras's SGD allows them; a NaN or infinite
 * value is named first: "vdev_sgd_set: learning rate is inf, not a finite
 * number"). Momentum 0 means no velocity, as in Keras,
 * whose SGD makes no momentum slot: switching momentum off frees the
 * velocity slots at once (one copy of each variable's memory, on its
 * device), but those vdev_optimizer_slots gave out, which a caller may hold:
 * each of these is zeroed in place and kept, its handle valid (it reads
 * zeros; nothing is allocated, so switching off never runs out of memory).
 * Updates without momentum (var -= lr g) read and write no velocity, and
 * make none. Momentum switched on again starts from zeros, as a fresh
 * optimizer's: the next update makes the velocities it lacks (zeros; all or
 * none, VDEV_ERR_OOM with nothing changed when one does not fit), and a kept
 * one starts from what it holds (zeros, or what the caller wrote into it);
 * while momentum stays on, the velocity carries on as it is. Errors:
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

/* ---- Keras's other optimizer arguments ----
 *
 * Each may be set at any time, as Keras lets a program set the attribute;
 * the next vdev_optimizer_apply uses it. Not at the same time as an update
 * by the same optimizer on another thread. Errors (VDEV_ERR_INVALID_ARG):
 * opt NULL, freed or not an optimizer, an optimizer of the other kind
 * ("vdev_adam_set_amsgrad: the optimizer is SGD, not Adam"), a bad value. */

/* SGD(nesterov=True): the velocity as before (velocity = momentum velocity
 * - lr g), then var += momentum velocity - lr g with the new velocity, as
 * Keras's SGD. With momentum 0 it is plain SGD. */
VDEV_API enum vdev_status vdev_sgd_set_nesterov(vdev_optimizer_t *opt, bool nesterov);

/* Adam(amsgrad=True): a third slot, "vhat" (vdev_optimizer_slots gives m,
 * v, vhat), keeps the largest v seen, vhat = max(vhat, v), and the update
 * divides by sqrt(vhat) + eps instead of sqrt(v) + eps, as Keras's Adam.
 * vhat is made (zeros) by the first update with AMSGrad on; switched off,
 * it stays as it is, unused. */
VDEV_API enum vdev_status vdev_adam_set_amsgrad(vdev_optimizer_t *opt, bool amsgrad);

/* Keras's gradient clipping, each value 0 for none: every update first
 * clips its gradients into new tensors (the caller's are not written), as
 * Keras's Optimizer._clip_gradients: clipnorm > 0 clips each gradient to
 * that L2 norm (tf.clip_by_norm: g c / max(|g|, c)); else global_clipnorm
 * > 0 scales every gradient by c min(1 / norm, 1 / c), norm the L2 norm of
 * all of them together (tf.clip_by_global_norm: NaN for an infinite norm);
 * else clipvalue > 0 clamps each element to [-c, c]. clipnorm wins over
 * clipvalue, as in Keras. The values must be finite and >= 0 ("...:
 * clipnorm -1 must be >= 0 (0: none)"); clipnorm and global_clipnorm both
 * set is Keras's error: "vdev_optimizer_set_clipping: At most one of
 * `clipnorm` and `global_clipnorm` can be set. Received: clipnorm=1,
 * global_clipnorm=2.". A norm costs a sum on the gradient's device, read
 * back on the host. */
VDEV_API enum vdev_status vdev_optimizer_set_clipping(vdev_optimizer_t *opt, float clipnorm,
                                                      float clipvalue, float global_clipnorm);

/* Keras 2.11+'s decoupled weight decay (0: none; any finite value, as Keras
 * takes any): before each update, var -= var * weight_decay * lr, with the
 * learning rate itself (Adam's too, not its bias-corrected step), in float
 * as Keras computes it. Every variable the update gets is decayed, but
 * those vdev_optimizer_exclude_from_weight_decay excluded. */
VDEV_API enum vdev_status vdev_optimizer_set_weight_decay(vdev_optimizer_t *opt,
                                                          float weight_decay);

/* Keras's exclude_from_weight_decay(var_list=...): the variables vars[0..n)
 * are never decayed by this optimizer; the others of an update are, in the
 * same update (one step: Adam's factor and the global norm of
 * global_clipnorm are the update's, as in Keras). Adds to the variables
 * excluded before; a variable listed twice is excluded once. Keras refuses
 * the call once the optimizer is built; vdev takes it at any time (the
 * next update uses it), so the Python package keeps Keras's rule and also
 * passes the variables its var_names match as they come. Errors
 * (VDEV_ERR_INVALID_ARG): opt NULL, freed or not an optimizer; n < 0, or
 * vars NULL with n > 0; a tensor freed or not a variable ("...: tensor 1 is
 * not a variable"). The exclusion of a variable freed later goes at the
 * optimizer's next call, with its slots (see "optimizers" above), so the
 * list holds only live variables, however many a long run makes, excludes
 * and frees; a variable made later is decayed, even one whose handle reuses
 * the freed one's place in the handle table. */
VDEV_API enum vdev_status vdev_optimizer_exclude_from_weight_decay(vdev_optimizer_t *opt,
                                                                   vdev_tensor_t *const *vars,
                                                                   int n);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_NN_H */
