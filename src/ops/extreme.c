/* extreme.c — TensorFlow's Max and Min reductions (tf.reduce_max,
 * tf.reduce_min) over one axis or all, float32 or int32, and its Abs and
 * Sign. A float reduction propagates NaN (the first one met is the result),
 * as TensorFlow's eager kernels do; over no element it gives the reduction's
 * identity, -inf for Max and +inf for Min (int32's least and greatest
 * values). The gradient of Max and Min is TensorFlow's _MinOrMaxGrad: the
 * output's gradient shared equally among the elements equal to the result
 * (ties split it, and a row whose result is NaN gets NaN), built from
 * vdev's ops (BroadcastTo, Equal, Cast, Sum, RealDiv, Mul). Abs clears the
 * sign bit of a float (|-0| is +0, NaN stays NaN) and negates an int32 in
 * two's complement (|INT32_MIN| is INT32_MIN, as the processor gives); its
 * gradient is dy sign(x). Sign gives -1, 0 or 1 as numpy's (+0 for -0, NaN
 * for NaN), and a gradient of zeros, as TensorFlow's _SignGrad. The shapes
 * are the reductions' rule (shapes.c) and the unary rule; the reference
 * kernels serve the cpu and simulated backends, cuda_extreme.cu the GPU. */
#include "ops/impl.h"

#include <math.h>
#include <string.h>

static void extreme(const struct vdev_kernel_args *a, int is_max)
{
    int64_t outer, len, inner;
    vdev_args_split_axis(a, 0, a->i[0], &outer, &len, &inner);
    if (a->in_dtype[0] == VDEV_I32) {
        const int32_t *x = (const int32_t *)a->in[0];
        int32_t *o = (int32_t *)a->out[0];
        for (int64_t p = 0; p < outer; p++)
            for (int64_t j = 0; j < inner; j++) {
                int32_t r = is_max ? INT32_MIN : INT32_MAX;
                for (int64_t l = 0; l < len; l++) {
                    int32_t v = x[(p * len + l) * inner + j];
                    r = (is_max ? v > r : v < r) ? v : r;
                }
                o[p * inner + j] = r;
            }
        return;
    }
    const float *x = (const float *)a->in[0];
    float *o = (float *)a->out[0];
    for (int64_t p = 0; p < outer; p++)
        for (int64_t j = 0; j < inner; j++) {
            float r = is_max ? -INFINITY : INFINITY;
            for (int64_t l = 0; l < len && r == r; l++) {
                float v = x[(p * len + l) * inner + j];
                r = (v != v || (is_max ? v > r : v < r)) ? v : r;
            }
            o[p * inner + j] = r;
        }
}

KERNEL(vdev_ref_max) { extreme(a, 1); }
KERNEL(vdev_ref_min) { extreme(a, 0); }

/* f32 or i32 -> its shape and dtype. */
SHAPE(vdev_shape_abs_sign)
{
    if (a->in_dtype[0] != VDEV_F32 && a->in_dtype[0] != VDEV_I32)
        return vdev_dtypes_error(a, 0, "float or int32");
    a->n_out = 1;
    a->out_ndim[0] = a->in_ndim[0];
    memcpy(a->out_shape[0], a->in_shape[0], sizeof a->out_shape[0]);
    a->out_dtype[0] = a->in_dtype[0];
    return VDEV_OK;
}

KERNEL(vdev_ref_abs)
{
    const int64_t n = vdev_args_numel(a, 0);
    const uint32_t *x = (const uint32_t *)a->in[0];
    uint32_t *o = (uint32_t *)a->out[0];
    if (a->in_dtype[0] == VDEV_I32) /* two's complement: 0 - x as unsigned */
        for (int64_t i = 0; i < n; i++)
            o[i] = (x[i] >> 31) ? 0u - x[i] : x[i];
    else
        for (int64_t i = 0; i < n; i++)
            o[i] = x[i] & 0x7fffffffu;
}

KERNEL(vdev_ref_sign)
{
    const int64_t n = vdev_args_numel(a, 0);
    if (a->in_dtype[0] == VDEV_I32) {
        const int32_t *x = (const int32_t *)a->in[0];
        int32_t *o = (int32_t *)a->out[0];
        for (int64_t i = 0; i < n; i++)
            o[i] = (x[i] > 0) - (x[i] < 0);
        return;
    }
    const float *x = (const float *)a->in[0];
    float *o = (float *)a->out[0];
    for (int64_t i = 0; i < n; i++)
        o[i] = x[i] > 0.0f ? 1.0f : x[i] < 0.0f ? -1.0f : x[i] == 0.0f ? 0.0f : x[i];
}

/* ---- the public functions ---- */

static vdev_tensor_t *reduce(enum vdev_op op, const vdev_tensor_t *t, int axis, bool keepdims)
{
    const vdev_tensor_t *in[1] = {t};
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = axis;
    p.i[1] = keepdims;
    return vdev_op_run(op, in, 1, &p);
}

VDEV_API vdev_tensor_t *vdev_max(const vdev_tensor_t *t, int axis, bool keepdims)
{
    return reduce(VDEV_OP_MAX, t, axis, keepdims);
}
VDEV_API vdev_tensor_t *vdev_min(const vdev_tensor_t *t, int axis, bool keepdims)
{
    return reduce(VDEV_OP_MIN, t, axis, keepdims);
}
VDEV_API vdev_tensor_t *vdev_max_all(const vdev_tensor_t *t)
{
    return reduce(VDEV_OP_MAX, t, VDEV_AXIS_ALL, false);
}
VDEV_API vdev_tensor_t *vdev_min_all(const vdev_tensor_t *t)
{
    return reduce(VDEV_OP_MIN, t, VDEV_AXIS_ALL, false);
}
VDEV_API vdev_tensor_t *vdev_abs(const vdev_tensor_t *t)
{
    const vdev_tensor_t *in[1] = {t};
    return vdev_op_run(VDEV_OP_ABS, in, 1, NULL);
}
VDEV_API vdev_tensor_t *vdev_sign(const vdev_tensor_t *t)
{
    const vdev_tensor_t *in[1] = {t};
    return vdev_op_run(VDEV_OP_SIGN, in, 1, NULL);
}
