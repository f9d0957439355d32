/* floor.c — TensorFlow's Floor, Ceil and Round (round half to even, its
 * Eigen functor's rule) on float32 (an int32 tensor is its own value), and
 * FloorDiv and FloorMod (Python's // and %) on float32 or int32, broadcast
 * as AddV2. The float forms are TensorFlow's formulas: floor(x / y), and
 * fmod(x, y) moved by y when its sign differs from y's; the int32 forms
 * round the quotient toward negative infinity and give the remainder the
 * divisor's sign, in 64-bit arithmetic so that INT32_MIN // -1 wraps to
 * INT32_MIN. An int32 division by zero gives 0 for both (numpy's answer;
 * TensorFlow's CPU kernel fails the op, which a queued kernel cannot do).
 * Floor, Ceil, Round and FloorDiv have no gradient, as TensorFlow's; FloorMod's
 * (grads.c) is TensorFlow's _FloorModGrad: dy for x, -dy floor(x / y) for y, each
 * summed back to its input's shape. */
#include "ops/impl.h"
#include "ops/pairs.h"

#include <math.h>
#include <string.h>

/* (x, y) both f32 or both i32, broadcast -> their dtype. */
SHAPE(vdev_shape_floor_binary)
{
    if (a->in_dtype[0] != VDEV_F32 && a->in_dtype[0] != VDEV_I32)
        return vdev_dtypes_error(a, 0, "float or int32");
    if (a->in_dtype[1] != a->in_dtype[0])
        return vdev_dtype_error(a, 1, a->in_dtype[0]);
    return vdev_shape_broadcast_as(a, a->in_dtype[0]);
}

KERNEL(vdev_ref_rounding)
{
    const int64_t n = vdev_args_numel(a, 0);
    if (a->in_dtype[0] == VDEV_I32) {
        if (n)
            memcpy(a->out[0], a->in[0], (size_t)n * 4);
        return;
    }
    const float *x = (const float *)a->in[0];
    float *o = (float *)a->out[0];
    for (int64_t i = 0; i < n; i++)
        o[i] = a->op == VDEV_OP_FLOOR  ? floorf(x[i])
               : a->op == VDEV_OP_CEIL ? ceilf(x[i])
                                       : rintf(x[i]); /* to nearest, ties to even */
}

/* TensorFlow's google_floor_div and google_floor_mod on int32, y != 0. */
static int32_t int_floor_div(int64_t x, int64_t y)
{
    int64_t q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0)))
        q -= 1;
    return (int32_t)(uint32_t)(uint64_t)q; /* INT32_MIN / -1: 2^31, wrapped */
}

static int32_t int_floor_mod(int64_t x, int64_t y)
{
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0)))
        r += y;
    return (int32_t)r;
}

static float f_floor_mod(float x, float y)
{
    float r = fmodf(x, y);
    return r != 0.0f && ((y < 0.0f) != (r < 0.0f)) ? r + y : r;
}

KERNEL(vdev_ref_floor_binary)
{
    const int div = a->op == VDEV_OP_FLOOR_DIV;
    if (a->in_dtype[0] == VDEV_I32) {
        const int32_t *x = (const int32_t *)a->in[0], *y = (const int32_t *)a->in[1];
        int32_t *o = (int32_t *)a->out[0];
        VDEV_FOR_PAIRS(a, {
            int64_t u = x[j0], v = y[j1];
            o[i] = v == 0 ? 0 : div ? int_floor_div(u, v) : int_floor_mod(u, v);
        });
        return;
    }
    const float *x = (const float *)a->in[0], *y = (const float *)a->in[1];
    float *o = (float *)a->out[0];
    VDEV_FOR_PAIRS(a, { o[i] = div ? floorf(x[j0] / y[j1]) : f_floor_mod(x[j0], y[j1]); });
}

/* ---- the public functions ---- */

static vdev_tensor_t *run1(enum vdev_op op, const vdev_tensor_t *x)
{
    const vdev_tensor_t *in[1] = {x};
    return vdev_op_run(op, in, 1, NULL);
}

static vdev_tensor_t *run2(enum vdev_op op, const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    const vdev_tensor_t *in[2] = {x, y};
    return vdev_op_run(op, in, 2, NULL);
}

VDEV_API vdev_tensor_t *vdev_floor(const vdev_tensor_t *x) { return run1(VDEV_OP_FLOOR, x); }
VDEV_API vdev_tensor_t *vdev_ceil(const vdev_tensor_t *x) { return run1(VDEV_OP_CEIL, x); }
VDEV_API vdev_tensor_t *vdev_round(const vdev_tensor_t *x) { return run1(VDEV_OP_ROUND, x); }
VDEV_API vdev_tensor_t *vdev_floor_div(const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    return run2(VDEV_OP_FLOOR_DIV, x, y);
}
VDEV_API vdev_tensor_t *vdev_floor_mod(const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    return run2(VDEV_OP_FLOOR_MOD, x, y);
}
