/* compare.c — the ops that make and use bool tensors, as TensorFlow's: the
 * comparisons Equal, NotEqual, Less, LessEqual, Greater and GreaterEqual (two
 * tensors of one dtype, broadcast as AddV2's, a bool out: IEEE's answers, so
 * a NaN is equal to nothing, itself included, and -0 equals +0), LogicalAnd,
 * LogicalOr and LogicalNot on bools, Cast between float32, int32 and bool,
 * and SelectV2 (tf.where(c, x, y): x's element where the condition's is
 * true, else y's, the three broadcast together). A bool is one 32-bit word
 * holding 0 or 1 (vdev/tensor.h), so a select copies words of any dtype.
 * Cast defines what C leaves undefined as CUDA's float-to-int conversion
 * does: a float beyond int32 saturates and NaN gives 0 (TensorFlow's CPU
 * kernel gives whatever the processor's conversion gives there). None of
 * them has a gradient but SelectV2, whose gradient is TensorFlow's (dy
 * where the condition holds for x, elsewhere for y, each summed back to its
 * input's shape; none for the condition). The reference kernels serve the
 * cpu and simulated backends; cuda_compare.cu computes the same words. */
#include "ops/impl.h"
#include "ops/pairs.h"

#include <stdio.h>
#include <string.h>

_Static_assert(VDEV_F32 == 0 && VDEV_I32 == 1 && VDEV_BOOL == 2,
               "cuda_compare.cu spells the dtype codes out");

/* ---- shapes ---- */

static const char *kinds(int op)
{
    switch (op) {
    case VDEV_OP_EQUAL:
    case VDEV_OP_NOT_EQUAL: return "float, int32 or bool";
    case VDEV_OP_LOGICAL_AND:
    case VDEV_OP_LOGICAL_OR:
    case VDEV_OP_LOGICAL_NOT: return "bool";
    default: return "float or int32";
    }
}

static int kind_ok(int op, int dt)
{
    switch (op) {
    case VDEV_OP_EQUAL:
    case VDEV_OP_NOT_EQUAL: return dt == VDEV_F32 || dt == VDEV_I32 || dt == VDEV_BOOL;
    case VDEV_OP_LOGICAL_AND:
    case VDEV_OP_LOGICAL_OR:
    case VDEV_OP_LOGICAL_NOT: return dt == VDEV_BOOL;
    default: return dt == VDEV_F32 || dt == VDEV_I32;
    }
}

/* (x, y) of one dtype the op takes, broadcast -> bool. */
SHAPE(vdev_shape_compare)
{
    if (!kind_ok(a->op, a->in_dtype[0]))
        return vdev_dtypes_error(a, 0, kinds(a->op));
    if (a->in_dtype[1] != a->in_dtype[0])
        return vdev_dtype_error(a, 1, a->in_dtype[0]);
    return vdev_shape_broadcast_as(a, VDEV_BOOL);
}

/* bool -> bool of its shape. */
SHAPE(vdev_shape_logical_not)
{
    if (a->in_dtype[0] != VDEV_BOOL)
        return vdev_dtypes_error(a, 0, kinds(a->op));
    a->n_out = 1;
    a->out_ndim[0] = a->in_ndim[0];
    memcpy(a->out_shape[0], a->in_shape[0], sizeof a->out_shape[0]);
    a->out_dtype[0] = VDEV_BOOL;
    return VDEV_OK;
}

/* x of any dtype -> its shape as dtype i[0]. */
SHAPE(vdev_shape_cast)
{
    if (a->i[0] < 0 || a->i[0] >= VDEV_DTYPE_COUNT) {
        char what[64];
        snprintf(what, sizeof what, "i[0] %lld is no dtype", (long long)a->i[0]);
        return vdev_shape_error(a, what);
    }
    a->n_out = 1;
    a->out_ndim[0] = a->in_ndim[0];
    memcpy(a->out_shape[0], a->in_shape[0], sizeof a->out_shape[0]);
    a->out_dtype[0] = (int)a->i[0];
    return VDEV_OK;
}

/* (c bool, x, y), x and y of one dtype, the three broadcast together as
 * TensorFlow's SelectV2 broadcasts them -> x's dtype. */
SHAPE(vdev_shape_select_v2)
{
    if (a->in_dtype[0] != VDEV_BOOL)
        return vdev_dtype_error(a, 0, VDEV_BOOL);
    if (a->in_dtype[2] != a->in_dtype[1])
        return vdev_dtype_error(a, 2, a->in_dtype[1]);
    int no = 0;
    for (int k = 0; k < 3; k++)
        no = a->in_ndim[k] > no ? a->in_ndim[k] : no;
    int64_t out[VDEV_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0; d < no; d++) {
        int64_t o = 1;
        for (int k = 0; k < 3; k++) {
            int dk = d - (no - a->in_ndim[k]);
            int64_t s = dk >= 0 ? a->in_shape[k][dk] : 1;
            if (s != 1 && o != 1 && s != o) {
                char s0[96], s1[96], s2[96];
                vdev_shape_str(a->in_shape[0], a->in_ndim[0], s0, sizeof s0);
                vdev_shape_str(a->in_shape[1], a->in_ndim[1], s1, sizeof s1);
                vdev_shape_str(a->in_shape[2], a->in_ndim[2], s2, sizeof s2);
                return vdev_error(VDEV_ERR_SHAPE,
                                  "SelectV2: condition %s, then %s, and else %s must be "
                                  "broadcastable",
                                  s0, s1, s2);
            }
            o = s != 1 ? s : o;
        }
        out[d] = o;
    }
    a->n_out = 1;
    a->out_ndim[0] = no;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        a->out_shape[0][d] = d < no ? out[d] : 1;
    a->out_dtype[0] = a->in_dtype[1];
    return VDEV_OK;
}

/* ---- kernels ---- */

/* The comparison of op on two values of one type. */
#define COMPARE(op, u, v)                                                                          \
    ((op) == VDEV_OP_EQUAL         ? (u) == (v)                                                    \
     : (op) == VDEV_OP_NOT_EQUAL   ? (u) != (v)                                                    \
     : (op) == VDEV_OP_LESS        ? (u) < (v)                                                     \
     : (op) == VDEV_OP_LESS_EQUAL  ? (u) <= (v)                                                    \
     : (op) == VDEV_OP_GREATER     ? (u) > (v)                                                     \
     : (op) == VDEV_OP_GREATER_EQUAL ? (u) >= (v)                                                  \
     : (op) == VDEV_OP_LOGICAL_AND ? ((u) && (v))                                                  \
                                   : ((u) || (v)))

KERNEL(vdev_ref_compare)
{
    int32_t *o = (int32_t *)a->out[0];
    const int op = a->op;
    if (a->in_dtype[0] == VDEV_F32) {
        const float *x = (const float *)a->in[0], *y = (const float *)a->in[1];
        VDEV_FOR_PAIRS(a, { o[i] = COMPARE(op, x[j0], y[j1]); });
    } else {
        const int32_t *x = (const int32_t *)a->in[0], *y = (const int32_t *)a->in[1];
        VDEV_FOR_PAIRS(a, { o[i] = COMPARE(op, x[j0], y[j1]); });
    }
}

KERNEL(vdev_ref_logical_not)
{
    const int32_t *x = (const int32_t *)a->in[0];
    int32_t *o = (int32_t *)a->out[0];
    int64_t n = vdev_args_numel(a, 0);
    for (int64_t i = 0; i < n; i++)
        o[i] = !x[i];
}

/* One float as int32: truncated toward zero, saturated beyond int32, NaN 0
 * (CUDA's __float2int_rz). */
static int32_t f32_to_i32(float v)
{
    if (v != v)
        return 0;
    if (v >= 2147483648.0f)
        return INT32_MAX;
    if (v <= -2147483648.0f)
        return INT32_MIN;
    return (int32_t)v;
}

KERNEL(vdev_ref_cast)
{
    const int from = a->in_dtype[0], to = (int)a->i[0];
    const int64_t n = vdev_args_numel(a, 0);
    const float *xf = (const float *)a->in[0];
    const int32_t *xi = (const int32_t *)a->in[0];
    float *of = (float *)a->out[0];
    int32_t *oi = (int32_t *)a->out[0];
    if (from == to) {
        if (n)
            memcpy(a->out[0], a->in[0], (size_t)n * 4);
    } else if (to == VDEV_F32) { /* from int32 or bool: rounded to nearest */
        for (int64_t i = 0; i < n; i++)
            of[i] = (float)xi[i];
    } else if (to == VDEV_BOOL) {
        if (from == VDEV_F32)
            for (int64_t i = 0; i < n; i++)
                oi[i] = xf[i] != 0.0f;
        else
            for (int64_t i = 0; i < n; i++)
                oi[i] = xi[i] != 0;
    } else if (from == VDEV_F32) { /* to int32 */
        for (int64_t i = 0; i < n; i++)
            oi[i] = f32_to_i32(xf[i]);
    } else { /* bool to int32: the same words */
        memcpy(a->out[0], a->in[0], (size_t)n * 4);
    }
}

KERNEL(vdev_ref_select_v2)
{
    const int32_t *c = (const int32_t *)a->in[0];
    const uint32_t *x = (const uint32_t *)a->in[1], *y = (const uint32_t *)a->in[2];
    uint32_t *o = (uint32_t *)a->out[0];
    int64_t o4[4], sc[4], sx[4], sy[4], i = 0;
    vdev_pairs_out4(a, o4);
    vdev_args_strides4(a, 0, sc);
    vdev_args_strides4(a, 1, sx);
    vdev_args_strides4(a, 2, sy);
    for (int64_t p = 0; p < o4[0]; p++)
        for (int64_t q = 0; q < o4[1]; q++)
            for (int64_t r = 0; r < o4[2]; r++)
                for (int64_t k = 0; k < o4[3]; k++, i++) {
                    const int64_t jc = p * sc[0] + q * sc[1] + r * sc[2] + k * sc[3];
                    const int64_t jx = p * sx[0] + q * sx[1] + r * sx[2] + k * sx[3];
                    const int64_t jy = p * sy[0] + q * sy[1] + r * sy[2] + k * sy[3];
                    o[i] = c[jc] ? x[jx] : y[jy];
                }
}

/* ---- the public functions ---- */

static vdev_tensor_t *run2(enum vdev_op op, const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    const vdev_tensor_t *in[2] = {x, y};
    return vdev_op_run(op, in, 2, NULL);
}

/* The binary ops' public functions: vdev_equal ... vdev_logical_or. */
#define BINARY_FN(FN, OP)                                                                          \
    VDEV_API vdev_tensor_t *FN(const vdev_tensor_t *x, const vdev_tensor_t *y)                     \
    {                                                                                              \
        return run2(OP, x, y);                                                                     \
    }
BINARY_FN(vdev_equal, VDEV_OP_EQUAL)
BINARY_FN(vdev_not_equal, VDEV_OP_NOT_EQUAL)
BINARY_FN(vdev_less, VDEV_OP_LESS)
BINARY_FN(vdev_less_equal, VDEV_OP_LESS_EQUAL)
BINARY_FN(vdev_greater, VDEV_OP_GREATER)
BINARY_FN(vdev_greater_equal, VDEV_OP_GREATER_EQUAL)
BINARY_FN(vdev_logical_and, VDEV_OP_LOGICAL_AND)
BINARY_FN(vdev_logical_or, VDEV_OP_LOGICAL_OR)

VDEV_API vdev_tensor_t *vdev_logical_not(const vdev_tensor_t *x)
{
    const vdev_tensor_t *in[1] = {x};
    return vdev_op_run(VDEV_OP_LOGICAL_NOT, in, 1, NULL);
}

VDEV_API vdev_tensor_t *vdev_cast(const vdev_tensor_t *x, enum vdev_dtype dtype)
{
    if ((unsigned)dtype >= VDEV_DTYPE_COUNT) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_cast: unknown dtype %d", (int)dtype);
        return NULL;
    }
    /* TensorFlow's cast to the tensor's own dtype is the tensor itself: a
     * copy here (the caller owns what it gets), one a tape differentiates */
    if (x && vdev_tensor_dtype(x) == dtype)
        return vdev_identity(x);
    const vdev_tensor_t *in[1] = {x};
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = dtype;
    return vdev_op_run(VDEV_OP_CAST, in, 1, &p);
}

VDEV_API vdev_tensor_t *vdev_where(const vdev_tensor_t *cond, const vdev_tensor_t *x,
                                   const vdev_tensor_t *y)
{
    const vdev_tensor_t *in[3] = {cond, x, y};
    return vdev_op_run(VDEV_OP_SELECT_V2, in, 3, NULL);
}
