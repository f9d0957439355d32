/* select.c — SelectByMask, tf.where(mask, a, b) on vdev's masks: a's
 * element where the mask's is not 0 (a float mask: NaN included; or a bool),
 * else b's, the mask broadcast to a's shape (at most a's rank, aligned at
 * the last axis, each axis 1 or a's: a recurrent step's [batch, 1] against
 * its state [batch, units]); a and b one shape and one dtype, whose words are
 * copied. It replaces the four ops of m a + (1 - m) b that Keras's masked
 * recurrent steps, the Huber loss and RandomFlip composed, and unlike them
 * keeps the chosen value when the other is infinite or NaN (0 inf is NaN).
 * Its gradient, SelectByMaskGrad (m, dy), i[0] 0 for a's share (dy where the
 * mask is not 0, else 0) and 1 for b's, is TensorFlow's SelectV2 gradient
 * (grads.c's vdev_grad_select, SelectV2's too, which sums each share back
 * to its input's shape); the mask takes none, as the condition takes none there. A mask element counts as
 * set when its word, sign bit aside, is not 0: a float other than ±0, or a
 * bool's 1. */
#include "ops/impl.h"

#include <string.h>

#define IN_F(k) ((const float *)a->in[k])
#define OUT_F(k) ((float *)a->out[k])

/* Input km broadcast to input kx's shape: at most its rank, aligned at
 * the last axis, each axis 1 or kx's. */
static int broadcasts(const struct vdev_kernel_args *a, int km, int kx)
{
    int nm = a->in_ndim[km], nx = a->in_ndim[kx];
    if (nm > nx)
        return 0;
    for (int d = 0; d < nm; d++) {
        int64_t s = a->in_shape[km][d];
        if (s != 1 && s != a->in_shape[kx][d + nx - nm])
            return 0;
    }
    return 1;
}

/* The mask (input 0) f32 or bool; the other inputs of dtype `want` (-1: any
 * one dtype, input 1's). */
static enum vdev_status mask_inputs(const struct vdev_kernel_args *a, int want)
{
    if (a->in_dtype[0] != VDEV_F32 && a->in_dtype[0] != VDEV_BOOL)
        return vdev_dtypes_error(a, 0, "float or bool");
    want = want < 0 ? a->in_dtype[1] : want;
    for (int k = 1; k < a->n_in; k++)
        if (a->in_dtype[k] != want)
            return vdev_dtype_error(a, k, want);
    return VDEV_OK;
}

static void out_like(struct vdev_kernel_args *a, int k)
{
    a->n_out = 1;
    a->out_ndim[0] = a->in_ndim[k];
    memcpy(a->out_shape[0], a->in_shape[k], sizeof a->out_shape[0]);
    a->out_dtype[0] = a->in_dtype[k];
}

/* (m, a, b): a and b one shape, m broadcast to it -> that shape. */
enum vdev_status vdev_shape_select_mask(struct vdev_kernel_args *a)
{
    enum vdev_status st = mask_inputs(a, -1);
    if (st != VDEV_OK)
        return st;
    int same = a->in_ndim[1] == a->in_ndim[2];
    for (int d = 0; same && d < a->in_ndim[1]; d++)
        same = a->in_shape[1][d] == a->in_shape[2][d];
    if (!same) {
        char s1[96], s2[96];
        vdev_shape_str(a->in_shape[1], a->in_ndim[1], s1, sizeof s1);
        vdev_shape_str(a->in_shape[2], a->in_ndim[2], s2, sizeof s2);
        return vdev_error(VDEV_ERR_SHAPE, "SelectByMask: the values' shapes %s and %s differ", s1,
                          s2);
    }
    if (!broadcasts(a, 0, 1))
        return vdev_shape_error(a, "the mask must broadcast to the values' shape (at most their "
                                   "rank, each axis 1 or theirs)");
    out_like(a, 1);
    return VDEV_OK;
}

/* (m, dy): m broadcast to dy -> dy's shape; i[0] 0 or 1. */
enum vdev_status vdev_shape_select_mask_grad(struct vdev_kernel_args *a)
{
    if (a->i[0] < 0 || a->i[0] > 1)
        return vdev_shape_error(a, "i[0] must be 0 or 1");
    enum vdev_status st = mask_inputs(a, VDEV_F32);
    if (st != VDEV_OK)
        return st;
    if (!broadcasts(a, 0, 1))
        return vdev_shape_error(a, "the mask must broadcast to dy's shape (at most its rank, "
                                   "each axis 1 or dy's)");
    out_like(a, 1);
    return VDEV_OK;
}

/* Calls body(i, mi) for each element i of input kx in row-major order, mi
 * the mask's element broadcast to it (the shapes in four dimensions, leading
 * 1s first; a mask axis of 1 has stride 0). */
#define FOR_EACH_MASKED(a, km, kx, BODY)                                                           \
    do {                                                                                           \
        int64_t n_[4], ms_[4];                                                                     \
        int off_ = 4 - (a)->in_ndim[kx], offm_ = 4 - (a)->in_ndim[km];                             \
        int64_t st_ = 1;                                                                           \
        for (int d_ = 3; d_ >= 0; d_--) {                                                          \
            int r_ = d_ - off_, rm_ = d_ - offm_;                                                  \
            n_[d_] = r_ >= 0 ? (a)->in_shape[kx][r_] : 1;                                          \
            int64_t md_ = rm_ >= 0 ? (a)->in_shape[km][rm_] : 1;                                   \
            ms_[d_] = md_ == 1 ? 0 : st_;                                                          \
            st_ *= md_;                                                                            \
        }                                                                                          \
        int64_t i = 0;                                                                             \
        for (int64_t i0 = 0; i0 < n_[0]; i0++)                                                     \
            for (int64_t i1 = 0; i1 < n_[1]; i1++)                                                 \
                for (int64_t i2 = 0; i2 < n_[2]; i2++) {                                           \
                    const int64_t mrow_ = i0 * ms_[0] + i1 * ms_[1] + i2 * ms_[2];                 \
                    for (int64_t i3 = 0; i3 < n_[3]; i3++, i++) {                                  \
                        const int64_t mi = mrow_ + i3 * ms_[3];                                    \
                        BODY;                                                                      \
                    }                                                                              \
                }                                                                                  \
    } while (0)

/* A mask word is set when it is not 0 but for the sign bit: a float other
 * than ±0 (NaN included), a bool's 1. */
#define MASK_SET(w) (((w) & 0x7fffffffu) != 0)

KERNEL(vdev_ref_select_mask)
{
    const uint32_t *m = (const uint32_t *)a->in[0], *x = (const uint32_t *)a->in[1];
    const uint32_t *y = (const uint32_t *)a->in[2];
    uint32_t *o = (uint32_t *)a->out[0];
    FOR_EACH_MASKED(a, 0, 1, { o[i] = MASK_SET(m[mi]) ? x[i] : y[i]; });
}

KERNEL(vdev_ref_select_mask_grad)
{
    const uint32_t *m = (const uint32_t *)a->in[0];
    const float *dy = IN_F(1);
    float *o = OUT_F(0);
    const int b_share = a->i[0] == 1;
    FOR_EACH_MASKED(a, 0, 1, { o[i] = MASK_SET(m[mi]) != b_share ? dy[i] : 0.0f; });
}

VDEV_API vdev_tensor_t *vdev_select_mask(const vdev_tensor_t *mask, const vdev_tensor_t *a,
                                         const vdev_tensor_t *b)
{
    const vdev_tensor_t *in[3] = {mask, a, b};
    return vdev_op_run(VDEV_OP_SELECT_MASK, in, 3, NULL);
}
