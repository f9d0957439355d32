/* clip.c — Keras's gradient clipping, which vdev_optimizer_apply runs on the
 * gradients before an update (the optimizer's clipnorm, global_clipnorm or
 * clipvalue, vdev_optimizer_set_clipping). It follows Keras's
 * Optimizer._clip_gradients: clipnorm first (each gradient on its own,
 * tf.clip_by_norm: g * c / max(norm(g), c)), else global_clipnorm (every
 * gradient by one scale, tf.clip_by_global_norm: c * min(1 / norm, 1 / c),
 * NaN when the global norm is not finite), else clipvalue (tf.clip_by_value
 * to [-c, c]). The norms are sums of squares with the public ops (the
 * gradient's own device; the sum comes back to the host, as TensorFlow's
 * clipping reads it in its graph), the clipped gradients new tensors made by
 * the ClipGradient op beside each gradient: the caller's gradients are never
 * written. */
#include "nn/nn.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

/* The sum of g's squared elements, as a float, into *out. */
static enum vdev_status sum_squares(vdev_tensor_t *g, float *out)
{
    vdev_tensor_t *sq = vdev_mul(g, g);
    vdev_tensor_t *s = sq ? vdev_sum_all(sq) : NULL;
    vdev_tensor_free(sq);
    if (!s)
        return vdev_last_status();
    enum vdev_status st = vdev_tensor_to_host(s, out, sizeof *out);
    vdev_tensor_free(s);
    return st;
}

/* ClipGradient on g: clamp(g * mul / div, +-c), c 0 for no clamp. */
static vdev_tensor_t *clip_one(vdev_tensor_t *g, float mul, float div, float c)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.f[0] = mul;
    p.f[1] = div;
    p.f[2] = c;
    const vdev_tensor_t *in[1] = {g};
    return vdev_op_run(VDEV_OP_CLIP_GRAD, in, 1, &p);
}

/* Clips gradient g into *out (its norm first for clipnorm) on g's device:
 * a scope the caller has open must not move the clipping elsewhere. */
static enum vdev_status clip_at(const struct vdev_clip *c, vdev_tensor_t *g, float scale,
                                vdev_tensor_t **out)
{
    vdev_placement_push_dev(vdev_tens_peek(g)->dev);
    enum vdev_status st = VDEV_OK;
    if (c->clipnorm > 0) {
        float s = 0;
        st = sum_squares(g, &s);
        if (st == VDEV_OK) {
            float norm = sqrtf(s);
            *out = clip_one(g, c->clipnorm, norm > c->clipnorm ? norm : c->clipnorm, 0);
        }
    } else if (c->global_clipnorm > 0) {
        *out = clip_one(g, scale, 1, 0);
    } else {
        *out = clip_one(g, 1, 1, c->clipvalue);
    }
    vdev_placement_pop_dev();
    if (st == VDEV_OK && !*out)
        st = vdev_last_status() != VDEV_OK ? vdev_last_status() : VDEV_ERR_INVALID_ARG;
    return st;
}

enum vdev_status vdev_clip_gradients(const struct vdev_clip *c, vdev_tensor_t *const *grads, int n,
                                     vdev_tensor_t **out)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (!(c->clipnorm > 0) && !(c->global_clipnorm > 0) && !(c->clipvalue > 0))
        return VDEV_OK;
    float scale = 1;
    enum vdev_status st = VDEV_OK;
    if (!(c->clipnorm > 0) && c->global_clipnorm > 0) {
        float total = 0;
        for (int i = 0; i < n && st == VDEV_OK; i++) {
            float s = 0;
            vdev_placement_push_dev(vdev_tens_peek(grads[i])->dev);
            st = sum_squares(grads[i], &s);
            vdev_placement_pop_dev();
            total += s;
        }
        float norm = sqrtf(total), cn = c->global_clipnorm;
        /* tf.clip_by_global_norm: NaN (through norm - norm) for an infinite norm */
        scale = cn * fminf(1.0f / norm, 1.0f / cn) + (norm - norm);
    }
    for (int i = 0; i < n && st == VDEV_OK; i++)
        st = clip_at(c, grads[i], scale, &out[i]);
    if (st != VDEV_OK)
        for (int i = 0; i < n; i++) {
            vdev_tensor_free(out[i]);
            out[i] = NULL;
        }
    return st;
}
