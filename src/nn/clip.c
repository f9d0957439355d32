/* clip.c — Keras's gradient clipping, which vdev_optimizer_apply runs on the
 * gradients before an update (the optimizer's clipnorm, global_clipnorm or
 * clipvalue, vdev_optimizer_set_clipping). It follows Keras's
 * Optimizer._clip_gradients: clipnorm first (each gradient on its own,
 * tf.clip_by_norm: g * c / max(norm(g), c), the max NaN for a NaN norm, as
 * tf.maximum's), else global_clipnorm (every
 * gradient by one scale, tf.clip_by_global_norm: c * min(1 / norm, 1 / c),
 * NaN when the global norm is not finite), else clipvalue (tf.clip_by_value
 * to [-c, c]). It allocates nothing: every op writes into the scratch the
 * optimizer made with the variable's slots (a buffer of the variable's shape
 * and a scalar, on its device), so an update that vdev_optimizer_prepare
 * got ready cannot fail for want of memory while clipping (the mirrored
 * strategy updates every replica or none). The norms are sums of squares
 * with the ops (the sum comes back to the host, as TensorFlow's clipping
 * reads it in its graph); the clipped gradients land in the buffers: the
 * caller's gradients are never written. */
#include "nn/nn.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

/* Whether g can be clipped into buf (the same shape, float32): a gradient
 * that cannot is left as it is, for the update's own checks to refuse. */
static int fits(const struct vdev_tens *g, const struct vdev_tens *buf)
{
    return g->dtype == VDEV_F32 && g->ndim == buf->ndim &&
           !memcmp(g->shape, buf->shape, (size_t)g->ndim * sizeof g->shape[0]);
}

/* The sum of g's squared elements, as a float, into *out: g * g into buf,
 * its sum into the scalar sum, then read on the host. */
static enum vdev_status sum_squares(struct vdev_tens *g, struct vdev_tens *buf,
                                    vdev_tensor_t *sum, float *out)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    const struct vdev_tens *in[2] = {g, g};
    enum vdev_status st = vdev_op_exec_into(VDEV_OP_MUL, in, 2, &p, buf);
    p.i[0] = VDEV_AXIS_ALL;
    in[0] = buf;
    if (st == VDEV_OK)
        st = vdev_op_exec_into(VDEV_OP_SUM, in, 1, &p, vdev_tens_peek(sum));
    return st == VDEV_OK ? vdev_tensor_to_host(sum, out, sizeof *out) : st;
}

/* ClipGradient on g into buf: clamp(g * mul / div, +-c), c 0 for no clamp. */
static enum vdev_status clip_one(struct vdev_tens *g, float mul, float div, float c,
                                 struct vdev_tens *buf)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.f[0] = mul;
    p.f[1] = div;
    p.f[2] = c;
    const struct vdev_tens *in[1] = {g};
    return vdev_op_exec_into(VDEV_OP_CLIP_GRAD, in, 1, &p, buf);
}

int vdev_clip_on(const struct vdev_clip *c)
{
    return c->clipnorm > 0 || c->global_clipnorm > 0 || c->clipvalue > 0;
}

enum vdev_status vdev_clip_gradients(const struct vdev_clip *c, vdev_tensor_t *const *grads,
                                     struct vdev_tens *const *gt, int n,
                                     vdev_tensor_t *const *bufs, vdev_tensor_t *const *sums,
                                     vdev_tensor_t **use)
{
    for (int i = 0; i < n; i++)
        use[i] = grads[i];
    if (!vdev_clip_on(c))
        return VDEV_OK;
    float scale = 1;
    enum vdev_status st = VDEV_OK;
    if (!(c->clipnorm > 0) && c->global_clipnorm > 0) {
        float total = 0;
        for (int i = 0; i < n && st == VDEV_OK; i++) {
            float s = 0;
            struct vdev_tens *g = gt[i], *b = vdev_tens_peek(bufs[i]);
            if (fits(g, b))
                st = sum_squares(g, b, sums[i], &s);
            total += s;
        }
        float norm = sqrtf(total), cn = c->global_clipnorm;
        /* tf.clip_by_global_norm: NaN (through norm - norm) for an infinite norm */
        scale = cn * fminf(1.0f / norm, 1.0f / cn) + (norm - norm);
    }
    for (int i = 0; i < n && st == VDEV_OK; i++) {
        struct vdev_tens *g = gt[i], *b = vdev_tens_peek(bufs[i]);
        if (!fits(g, b))
            continue;
        if (c->clipnorm > 0) {
            float s = 0;
            st = sum_squares(g, b, sums[i], &s);
            /* tf.clip_by_norm divides by tf.maximum(norm, c), which
             * propagates NaN: a NaN in g makes every element NaN */
            float norm = sqrtf(s), cn = c->clipnorm;
            if (st == VDEV_OK)
                st = clip_one(g, cn, norm > cn || isnan(norm) ? norm : cn, 0, b);
        } else if (c->global_clipnorm > 0) {
            st = clip_one(g, scale, 1, 0, b);
        } else {
            st = clip_one(g, 1, 1, c->clipvalue, b);
        }
        if (st == VDEV_OK)
            use[i] = bufs[i];
    }
    return st;
}
