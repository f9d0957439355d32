/* vdev/tensor.h — tensors: f32, i32 and bool arrays of 0 to 4 dimensions on
 * one logical device, how they are made, read back, copied between devices
 * and freed, the checked handles that name them, variables and vdev_assign,
 * and the per-thread scopes that free temporaries. Part of the public API:
 * vdev.h includes it, and it may be included alone (it includes the parts it
 * builds on). */
#ifndef VDEV_VDEV_TENSOR_H
#define VDEV_VDEV_TENSOR_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== tensors =============================================================
 *
 * f32, i32 and bool tensors of 0 to 4 dimensions, row-major and contiguous,
 * living on one logical device and taking their memory from its allocator.
 * A call that makes a tensor returns NULL on failure, and every op given a
 * NULL input returns NULL without touching the error, so a chain of ops needs
 * one check at its end and vdev_last_error() names the first failure.
 *
 * Ownership: a tensor made inside vdev_scope_begin()/vdev_scope_end() belongs
 * to the scope and is freed at its end unless passed to vdev_keep(); outside
 * any scope it is the caller's, freed with vdev_tensor_free(). Variables
 * (vdev_variable) are never freed by scopes.
 *
 * Where a new tensor lives: the innermost device scope (vdev_device_push), or
 * the default device (GPU:0, or CPU:0 where there is no GPU).
 *
 * Handles: vdev_tensor_t * (and vdev_tape_t *, vdev_dense_t *, vdev_mlp_t *,
 * vdev_optimizer_t *) are opaque checked handles, not addresses: never
 * dereference one. vdev checks every handle it is given, without touching
 * freed memory: a tensor already freed (by vdev_tensor_free or its scope's
 * end), a handle of another kind, or any other value gives
 * VDEV_ERR_INVALID_ARG ("not a live tensor (freed already, or not a
 * tensor)"), and a handle is never reused for a later tensor (the same slot
 * gets a new generation; the 32-bit counter would need 2^31 reuses of one slot
 * to come round). A tensor made before vdev_shutdown() owns no memory after
 * it: using it is VDEV_ERR_INVALID_ARG ("... belongs to a runtime that was
 * shut down"), even after a new vdev_init(); vdev_tensor_free() on it just
 * releases the handle. Looking a handle up takes no lock. At most 16777216
 * tensors (and as many objects of each other kind) live at once; beyond,
 * making one fails with VDEV_ERR_OOM. */

typedef struct vdev_tensor vdev_tensor_t;

/* VDEV_BOOL: TensorFlow's bool, what comparisons give; one 32-bit word an
 * element, 0 or 1 (see vdev_tensor_from_host), so a bool tensor takes 4 bytes
 * an element as the others do, and every op that only moves elements
 * (reshape, transpose, slice, concat, gather, copies) serves it unchanged.
 * Its name in messages is "bool" ("float" and "int32" for the others, as
 * TensorFlow names them). */
enum vdev_dtype { VDEV_F32 = 0, VDEV_I32, VDEV_BOOL, VDEV_DTYPE_COUNT };
#define VDEV_MAX_DIMS 4

/* A new tensor of zeros (or ones). Every call that makes a tensor from a
 * shape checks it: VDEV_ERR_INVALID_ARG for ndim outside 0..4 ("tensors have
 * 0 to 4 dimensions, not 5"), shape NULL with ndim > 0 ("shape is NULL"), a
 * negative dimension ("dimension 0 is negative (-1)"), 2^60 elements or more
 * ("vdev_tensor_ones: shape [...] is too large (2^60 elements or more)"),
 * or a dtype that is none ("unknown dtype 3"); VDEV_ERR_OOM when the device
 * has no room, in TensorFlow's words ("OOM when allocating tensor with
 * shape[...] ..."). */
VDEV_API vdev_tensor_t *vdev_tensor_zeros(const int64_t *shape, int ndim, enum vdev_dtype dtype);
VDEV_API vdev_tensor_t *vdev_tensor_ones(const int64_t *shape, int ndim, enum vdev_dtype dtype);
/* Every element = value: rounded to float for f32; for i32 truncated toward
 * zero, and VDEV_ERR_INVALID_ARG naming the value when it is NaN, infinite or
 * outside [-2147483648, 2147483647] after truncation; for bool 1 where value
 * is nonzero (NaN and infinities included, as a cast to bool), else 0, so
 * vdev_tensor_zeros gives false and vdev_tensor_ones true. */
VDEV_API vdev_tensor_t *vdev_tensor_fill(const int64_t *shape, int ndim, enum vdev_dtype dtype,
                                         double value);
/* Copies numel elements (4 bytes each) from host memory. For bool, numel
 * int32 words, each 0 or 1: any other is VDEV_ERR_INVALID_ARG naming the
 * first ("vdev_tensor_from_host: element 3 of a bool tensor is 7, not 0 or
 * 1"), and no tensor is made. */
VDEV_API vdev_tensor_t *vdev_tensor_from_host(const void *data, const int64_t *shape, int ndim,
                                              enum vdev_dtype dtype);
/* f32 random tensors from a counter-based generator: the same seed gives the
 * same numbers on every device and backend. The arguments must be finite
 * (VDEV_ERR_INVALID_ARG naming one that is NaN or infinite: "vdev_tensor_uniform:
 * lo is NaN, not a finite number"), with hi >= lo and stddev >= 0. */
VDEV_API vdev_tensor_t *vdev_tensor_uniform(const int64_t *shape, int ndim, float lo, float hi,
                                            uint64_t seed);
VDEV_API vdev_tensor_t *vdev_tensor_normal(const int64_t *shape, int ndim, float mean, float stddev,
                                           uint64_t seed);
/* Copies the tensor to host memory (dst_bytes must be at least numel * 4);
 * waits for the work that makes it. A bool tensor gives numel int32 words,
 * each 0 or 1. */
VDEV_API enum vdev_status vdev_tensor_to_host(const vdev_tensor_t *t, void *dst, size_t dst_bytes);
/* The value of a one-element f32 tensor, NaN on error: an int32 or bool
 * tensor is VDEV_ERR_INVALID_ARG ("vdev_tensor_item: needs a one-element
 * float tensor"); read those with vdev_tensor_to_host. */
VDEV_API float vdev_tensor_item(const vdev_tensor_t *t);
/* A copy on another logical device (any accepted name). A recording tape
 * differentiates through it (the gradient goes back to t's device), as
 * TensorFlow's copies between devices; it is a copy, not an op: counted in
 * the bytes copied, not logged as an op. */
VDEV_API vdev_tensor_t *vdev_tensor_to(const vdev_tensor_t *t, const char *device);
/* A copy on the placement device (TensorFlow's tf.identity). */
VDEV_API vdev_tensor_t *vdev_identity(const vdev_tensor_t *t);
/* A copy on t's device that no tape differentiates through: gradients stop
 * there (TensorFlow's tf.stop_gradient). */
VDEV_API vdev_tensor_t *vdev_stop_gradient(const vdev_tensor_t *t);
/* Releases the caller's tensor; NULL is a no-op. A dead handle (freed twice)
 * is VDEV_ERR_INVALID_ARG and frees nothing, whatever tensor now uses the
 * memory it had. A tensor held by a scope of another thread can be freed only
 * by that thread (VDEV_ERR_INVALID_ARG otherwise). Of two threads freeing one
 * tensor at once, one frees it and the other gets the error. A tensor the
 * library keeps (an optimizer's slot from vdev_optimizer_slots, a model's
 * variable from vdev_mlp_variables) is VDEV_ERR_INVALID_ARG and stays, e.g.
 * "vdev_tensor_free: the tensor is an optimizer's slot (vdev_optimizer_slots);
 * it is freed with its optimizer (vdev_optimizer_free)". */
VDEV_API void vdev_tensor_free(vdev_tensor_t *t);

/* The number of dimensions (0 to 4) and of elements; -1 with
 * VDEV_ERR_INVALID_ARG for a handle that is not a live tensor. */
VDEV_API int vdev_tensor_ndim(const vdev_tensor_t *t);
/* Size of one axis (negative counts from the end); -1 and VDEV_ERR_INVALID_ARG
 * naming the axis as given when there is no such axis. */
VDEV_API int64_t vdev_tensor_dim(const vdev_tensor_t *t, int axis);
VDEV_API int64_t vdev_tensor_numel(const vdev_tensor_t *t);
/* VDEV_F32, VDEV_I32 or VDEV_BOOL; for a handle that is not a live tensor
 * (NULL, freed, of a runtime that was shut down), VDEV_DTYPE_COUNT, which is
 * no dtype, with VDEV_ERR_INVALID_ARG. */
VDEV_API enum vdev_dtype vdev_tensor_dtype(const vdev_tensor_t *t);
/* "/device:GPU:1"; valid as long as the runtime runs. */
VDEV_API const char *vdev_tensor_device(const vdev_tensor_t *t);

/* Makes t a variable: a tensor that the tape differentiates against and the
 * optimizers update in place. Takes t out of any scope; the caller frees it
 * with vdev_tensor_free. Returns t (NULL in, NULL out). */
VDEV_API vdev_tensor_t *vdev_variable(vdev_tensor_t *t);
/* Copies value into the variable in place (shapes must match). Any tensor
 * may be assigned; a live tape that read it keeps the value it read. A value
 * on another device is copied and counted under every placement policy
 * (checkpoint restore and mirrored variables rely on it); Python's
 * Variable.assign refuses it under strict, as TensorFlow's explicit policy. */
VDEV_API enum vdev_status vdev_assign(vdev_tensor_t *var, const vdev_tensor_t *value);

/* ---- scopes that free temporaries ----
 * Scopes are per thread and nest up to 64 deep. They never allocate: a scope
 * cannot fail for want of memory. A thread that exits with scopes open has
 * them closed (their tensors freed) as vdev_scope_end would. */

/* Opens a scope. VDEV_ERR_INVALID_ARG beyond 64 nested scopes ("tensor scopes
 * nested deeper than 64"), like vdev_device_push. Pairing stays simple: every
 * begin, failed or not, takes its vdev_scope_end; the end of a failed begin
 * does nothing (it does not close the enclosing scope), and while a failed
 * begin's end is pending, further begins fail too. */
VDEV_API enum vdev_status vdev_scope_begin(void);
/* Frees every tensor made since the matching begin except those kept; kept
 * tensors pass to the enclosing scope, or to the caller outside any scope.
 * Without a matching begin: VDEV_ERR_INVALID_ARG, nothing freed. */
VDEV_API void vdev_scope_end(void);
/* Marks t to survive the current scope's end; returns t (NULL, with
 * VDEV_ERR_INVALID_ARG, for a dead handle or a tensor of another thread's
 * scope). */
VDEV_API vdev_tensor_t *vdev_keep(vdev_tensor_t *t);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_TENSOR_H */
