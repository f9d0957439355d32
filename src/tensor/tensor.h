/* tensor.h — tensors inside the library: the struct, creation on a given
 * device, reference counting, views, copies between devices, and scopes.
 *
 * A tensor owns one block of its device's allocator, or is a view (reshape)
 * that holds a reference to the tensor owning the block. References: the
 * creator (a scope or the caller) holds one; the gradient tape holds one for
 * every tensor its backward pass needs. The block goes back to the allocator
 * when the last reference goes: at once when only the device's own stream
 * used it (stream-ordered reuse), or after an event when another device's
 * stream read it (a cross-device copy). */
#ifndef VDEV_TENSOR_H
#define VDEV_TENSOR_H

#include "runtime/placement.h"

#include <stdatomic.h>

#define VDEV_TENSOR_MAGIC 0x7e750a1du

struct vdev_tensor {
    uint32_t magic;                 /* VDEV_TENSOR_MAGIC while alive */
    _Atomic int refs;
    enum vdev_dtype dtype;
    int ndim;
    int64_t shape[VDEV_MAX_DIMS];
    int64_t numel;
    uint64_t bytes;                 /* numel * 4 */
    struct vdev_ldev *dev;
    void *data;                     /* device address; NULL when numel == 0 */
    struct vdev_tensor *base;       /* a view's owner (holds a reference), else NULL */
    uint32_t handle;                /* allocator handle when it owns a block */
    int16_t home;                   /* device id of the variables it derives from, -1 none */
    _Atomic int16_t xstream;        /* id of another device whose stream read it, -1 none */
    uint8_t is_variable;
    uint8_t requires_grad;
    uint8_t kept;                   /* vdev_keep() called in the current scope */
    uint8_t in_scope;               /* a scope holds the creation reference */
    uint32_t generation;            /* the runtime's start-up it belongs to */
};

/* Casts away const for library-internal bookkeeping (reference counts,
 * stream marks) on tensors the API takes as const. */
static inline vdev_tensor_t *vdev_tensor_mut(const vdev_tensor_t *t)
{
    return (vdev_tensor_t *)(uintptr_t)t;
}

static inline size_t vdev_dtype_size(enum vdev_dtype dt) { return 4; }
const char *vdev_dtype_name(enum vdev_dtype dt); /* "float", "int32" (TensorFlow's words) */

/* "[256,1024]" into buf; returns buf. */
char *vdev_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap);
/* VDEV_ERR_INVALID_ARG for ndim outside 0..4 or a negative dimension. */
enum vdev_status vdev_shape_check(const int64_t *shape, int ndim);

/* The op the next tensors of this thread are made by (a static string; for
 * the out-of-memory report). */
extern _Thread_local const char *vdev_tensor_op_tag;

/* A new tensor on dev with uninitialised contents, registered with the
 * current scope. OOM names the shape, type and device. */
vdev_tensor_t *vdev_tensor_new(struct vdev_ldev *dev, enum vdev_dtype dtype, const int64_t *shape,
                               int ndim);
/* A view of t with another shape (same numel), registered with the scope. */
vdev_tensor_t *vdev_tensor_view(const vdev_tensor_t *t, const int64_t *shape, int ndim);
/* A copy of t on dst, counted in the placement record. */
vdev_tensor_t *vdev_tensor_copy_to(const vdev_tensor_t *t, struct vdev_ldev *dst);

void vdev_tensor_retain(const vdev_tensor_t *t);
void vdev_tensor_release(const vdev_tensor_t *t);
/* Notes that the stream of device `reader` reads t's memory. */
void vdev_tensor_mark_read_by(const vdev_tensor_t *t, const struct vdev_ldev *reader);

/* Checks that t is a live tensor (magic); sets VDEV_ERR_INVALID_ARG if not. */
int vdev_tensor_valid(const vdev_tensor_t *t);

/* Registers t with the current scope (which then holds one reference). */
void vdev_tensor_scope_add(vdev_tensor_t *t);

/* The device where a new tensor with no inputs goes. */
struct vdev_ldev *vdev_tensor_creation_device(void);

#endif
