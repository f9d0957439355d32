/* vdev/autograd.h — gradients: the tape that records the ops of a thread
 * (TensorFlow's GradientTape), the gradients of a loss with respect to
 * variables, and what a variable the loss does not reach gets. Part of the
 * public API: vdev.h includes it, and it may be included alone (it includes
 * the parts it builds on). */
#ifndef VDEV_VDEV_AUTOGRAD_H
#define VDEV_VDEV_AUTOGRAD_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== autograd ============================================================
 *
 *     vdev_tape_t *tape = vdev_tape_begin();
 *     vdev_tensor_t *loss = ...ops on variables...;
 *     vdev_tensor_t *grads[2];
 *     vdev_tape_gradient(tape, loss, vars, 2, grads);
 *     vdev_tape_end(tape);
 *
 * The tape records the ops of the calling thread while it is active. Tapes are
 * checked handles: a tape ended already is VDEV_ERR_INVALID_ARG for every
 * call, another thread may neither end a tape nor ask it for gradients while
 * it records (VDEV_ERR_INVALID_ARG), a thread that exits stops its tape's
 * recording (the tape keeps its records, and the device memory of the
 * tensors they hold, until vdev_tape_end: end it before the thread exits, or
 * hand its handle on), and a tape begun before vdev_shutdown() can only be
 * ended. */

typedef struct vdev_tape vdev_tape_t;
/* Starts recording; NULL with VDEV_ERR_INVALID_ARG if a tape is already
 * recording on this thread ("a tape is already recording on this thread"),
 * or paused ("a tape is paused on this thread (vdev_tape_pause): ..."). */
VDEV_API vdev_tape_t *vdev_tape_begin(void);
/* vdev_tape_begin with flags: VDEV_TAPE_WATCH_EXPLICIT records only ops that
 * read a variable given to vdev_tape_watch (from that call on) or a tensor
 * computed from one (TensorFlow's watch_accessed_variables=False): another
 * variable is a constant to it, and a loss computed from such variables
 * alone does not reach them. Unknown flags: NULL, VDEV_ERR_INVALID_ARG. */
enum { VDEV_TAPE_WATCH_EXPLICIT = 1 };
VDEV_API vdev_tape_t *vdev_tape_begin_ex(unsigned flags);
/* Watches a variable (the tape holds it until vdev_tape_end); a no-op for a
 * tape that watches every variable, unless it skips this one. On the tape's
 * thread while it records or is paused; a tensor that is not a variable is
 * VDEV_ERR_INVALID_ARG. */
VDEV_API enum vdev_status vdev_tape_watch(vdev_tape_t *tape, const vdev_tensor_t *var);
/* Skips a variable (TensorFlow's trainable=False, which a tape does not
 * watch when an op reads it): the ops that read it alone are not recorded
 * from this call on, and the loss does not reach it, until it is given to
 * vdev_tape_watch. The tape does not hold it (freed by its owner, its
 * memory is given back at once, as a tape that merely ignores it should;
 * a variable made later at its address is not taken for it); a no-op with
 * VDEV_TAPE_WATCH_EXPLICIT or for a variable watched already. Where and on
 * what as vdev_tape_watch (the errors name vdev_tape_skip). */
VDEV_API enum vdev_status vdev_tape_skip(vdev_tape_t *tape, const vdev_tensor_t *var);
/* The variables the tape watches (TensorFlow's watched_variables): those
 * given to vdev_tape_watch with VDEV_TAPE_WATCH_EXPLICIT, else every
 * variable a recorded op read but those it skips, then those given to
 * vdev_tape_watch and not read, in the order first read or watched; one the
 * caller has freed is left out. Fills out[0..min(n, cap)) with the
 * variables' own handles (not new references) and returns n; -1 with
 * VDEV_ERR_INVALID_ARG for a tape that is not live, cap < 0, out NULL with
 * cap > 0, or a tape recording on another thread. */
VDEV_API int vdev_tape_watched_variables(vdev_tape_t *tape, vdev_tensor_t **out, int cap);
/* Gradients of a float loss with respect to each variable (zeros for a
 * variable the loss does not depend on); a loss of several elements stands
 * for their sum, as in TensorFlow. Each gradient op runs on the device
 * of its forward op; a variable's gradient is handed back on the variable's
 * own device (copied there if its forward ops ran elsewhere). The gradients
 * belong to the current scope and must be treated as read-only (one may share
 * memory with another). Stops the recording (a paused tape stays paused); the
 * tape can answer further calls, for other losses, until vdev_tape_end. So
 * that a later call sees
 * the values the ops read, the first write to a value the tape read, where
 * the op's gradient reads it (vdev_assign, vdev_optimizer_apply), saves a
 * copy of it while the tape lives: end the tape before updating the
 * variables, as above. */
VDEV_API enum vdev_status vdev_tape_gradient(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                             vdev_tensor_t *const *vars, int n_vars,
                                             vdev_tensor_t **grads);
/* What a variable the loss does not reach gets (TensorFlow's
 * UnconnectedGradients): zeros of its shape, or NULL (TensorFlow's None). */
enum vdev_unconnected { VDEV_UNCONNECTED_ZERO = 0, VDEV_UNCONNECTED_NONE = 1 };
/* vdev_tape_gradient, choosing what an unconnected variable gets; with
 * VDEV_UNCONNECTED_NONE a NULL gradient on success means "not reached", and
 * every other gradient is set. Another value of `unconnected` is
 * VDEV_ERR_INVALID_ARG. */
VDEV_API enum vdev_status vdev_tape_gradient_ex(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                                vdev_tensor_t *const *vars, int n_vars,
                                                vdev_tensor_t **grads,
                                                enum vdev_unconnected unconnected);
/* Pause and resume (TensorFlow's GradientTape.stop_recording): the ops the
 * thread runs between the two calls are not recorded; the tape's records and
 * its thread stay as they were. Only on the thread the tape records on, while
 * it records (not after a gradient call stopped it): else, or pausing a paused
 * tape, or resuming one that is not, VDEV_ERR_INVALID_ARG. No other tape may
 * begin on the thread while one is paused (vdev_tape_begin returns NULL). A
 * gradient call on a paused tape leaves it paused (its ops are not recorded),
 * so it can resume and record on; a thread that exits stops its paused tape
 * as a recording one. */
VDEV_API enum vdev_status vdev_tape_pause(vdev_tape_t *tape);
VDEV_API enum vdev_status vdev_tape_resume(vdev_tape_t *tape);
/* vdev_tape_gradient_ex with the loss's own gradient (TensorFlow's
 * output_gradients): the gradients of sum(loss * dloss), dloss a float
 * tensor of the loss's shape (copied to the loss's device when it lies
 * elsewhere) instead of ones; NULL: ones. Another shape or dtype is
 * VDEV_ERR_SHAPE. Gradients of one element each (a one-hot dloss) make a
 * Jacobian, as the Python package's GradientTape.jacobian does. */
VDEV_API enum vdev_status vdev_tape_gradient_seeded(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                                    const vdev_tensor_t *dloss,
                                                    vdev_tensor_t *const *vars, int n_vars,
                                                    vdev_tensor_t **grads,
                                                    enum vdev_unconnected unconnected);
/* Stops recording (if still) and frees the tape. NULL is a no-op; a tape
 * ended already is VDEV_ERR_INVALID_ARG. */
VDEV_API void vdev_tape_end(vdev_tape_t *tape);
/* vdev_tape_end for an owner that lets go of a tape from any thread (a
 * garbage collector): the handle is dead at once; a tape recording (or
 * paused) on another thread is freed by that thread at its next recorded op,
 * its next vdev_tape_begin, or its exit, whichever comes first, so that thread
 * records no more and may begin a new tape. NULL is a no-op; a tape ended
 * already is VDEV_ERR_INVALID_ARG. */
VDEV_API void vdev_tape_release(vdev_tape_t *tape);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_AUTOGRAD_H */
