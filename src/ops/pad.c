/* pad.c — TensorFlow's tf.pad in its CONSTANT mode (the ops Pad and PadV2),
 * made of vdev's own ops: along each axis that gets padding, the tensor is
 * joined (ConcatV2) between two blocks filled with the constant, so the
 * result's gradient is ConcatV2's (the input's part of the output's
 * gradient), every backend runs it with kernels already tested, and a
 * recording tape differentiates it like any chain of ops. The blocks are made
 * where the join runs: in the device scope when one is open, else on the
 * tensor's device (an op outside any scope follows its input), so no copy
 * crosses devices. The shape checks are TensorFlow's Pad kernel's, in its
 * words after "Pad: "; the placement log shows ConcatV2 ops where
 * TensorFlow's shows Pad. */
#include "ops/impl.h"
#include "runtime/placement.h"
#include "vdev/ops.h"

#include <stdint.h>
#include <string.h>

/* t joined between two blocks of `value` along axis d: before and after
 * entries of that axis (at least one of them above 0). */
static vdev_tensor_t *pad_axis(const vdev_tensor_t *t, const int64_t *shape, int ndim, int d,
                               int64_t before, int64_t after, enum vdev_dtype dt, double value)
{
    const vdev_tensor_t *parts[3];
    vdev_tensor_t *blocks[2] = {NULL, NULL};
    int n = 0;
    int64_t s[VDEV_MAX_DIMS];
    memcpy(s, shape, sizeof s);
    if (before > 0) {
        s[d] = before;
        if (!(blocks[0] = vdev_tensor_fill(s, ndim, dt, value)))
            return NULL;
        parts[n++] = blocks[0];
    }
    parts[n++] = t;
    if (after > 0) {
        s[d] = after;
        if (!(blocks[1] = vdev_tensor_fill(s, ndim, dt, value))) {
            vdev_tensor_free(blocks[0]);
            return NULL;
        }
        parts[n++] = blocks[1];
    }
    vdev_tensor_t *out = vdev_concat(parts, n, d);
    vdev_tensor_free(blocks[0]);
    vdev_tensor_free(blocks[1]);
    return out;
}

VDEV_API vdev_tensor_t *vdev_pad(const vdev_tensor_t *t, const int64_t *paddings, int n,
                                 double value)
{
    if (!t)
        return NULL;
    const struct vdev_tens *x = vdev_tens_use(t, "vdev_pad");
    if (!x)
        return NULL;
    int ndim = x->ndim;
    int64_t shape[VDEV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    enum vdev_dtype dt = x->dtype;
    if (n < 0 || (n > 0 && !paddings)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "Pad: paddings is %s and n %d",
                   paddings ? "given" : "NULL", n);
        return NULL;
    }
    if (n != ndim) {
        char in[96];
        vdev_shape_str(shape, ndim, in, sizeof in);
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "Pad: The first dimension of paddings must be the rank of inputs[%d,2], %s", n,
                   in);
        return NULL;
    }
    for (int d = 0; d < ndim; d++) {
        int64_t b = paddings[2 * d], a = paddings[2 * d + 1];
        if (b < 0 || a < 0) {
            vdev_error(VDEV_ERR_INVALID_ARG, "Pad: Paddings must be non-negative: %lld %lld",
                       (long long)b, (long long)a);
            return NULL;
        }
        if (b > INT64_MAX - shape[d] || a > INT64_MAX - shape[d] - b) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "Pad: dimension %d of %lld padded by %lld and %lld does not fit an int64",
                       d, (long long)shape[d], (long long)b, (long long)a);
            return NULL;
        }
    }
    /* the blocks where the joins run: the scope's device, else t's */
    int pushed = 0;
    if (!vdev_placement_scope_device()) {
        if (vdev_device_push(vdev_tensor_device(t)) != VDEV_OK)
            return NULL;
        pushed = 1;
    }
    vdev_tensor_t *cur = NULL; /* the last join, this call's own */
    int padded = 0;
    for (int d = 0; d < ndim; d++) {
        int64_t b = paddings[2 * d], a = paddings[2 * d + 1];
        if (b == 0 && a == 0)
            continue;
        padded = 1;
        vdev_tensor_t *next = pad_axis(cur ? cur : t, shape, ndim, d, b, a, dt, value);
        vdev_tensor_free(cur);
        cur = next;
        if (!cur)
            break;
        shape[d] += b + a;
    }
    if (pushed)
        vdev_device_pop();
    if (padded)
        return cur;
    /* no padding anywhere: a new tensor all the same, as TensorFlow's Pad
     * gives one (Identity: a copy a later write to t leaves as it was) */
    return vdev_identity(t);
}
