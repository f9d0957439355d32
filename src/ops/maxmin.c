/* maxmin.c — the gradient op of Maximum and Minimum: (dy, x, y) -> dy's
 * shape, dy where TensorFlow's mask (x >= y for Maximum, x <= y for Minimum,
 * i[0] 0 or 1) holds and 0 elsewhere for x's share (i[1] 0), the other way
 * round for y's (i[1] 1), as _MaximumMinimumGrad's where_v2. x and y are read
 * broadcast to dy's shape (the forward op's output); the gradient (grads.c)
 * then sums each share back to its input's shape. The forward kernels are
 * with the other binary ops (kernels_ref.c, kernels_fast.c). */
#include "ops/impl.h"

#include <stdio.h>
#include <string.h>

/* (dy, x, y), all f32, x and y each broadcastable to dy's shape -> dy's. */
enum vdev_status vdev_shape_maxmin_grad(struct vdev_kernel_args *a)
{
    for (int k = 0; k < 3; k++)
        if (a->in_dtype[k] != VDEV_F32)
            return vdev_dtype_error(a, k, VDEV_F32);
    if (a->i[0] < 0 || a->i[0] > 1 || a->i[1] < 0 || a->i[1] > 1)
        return vdev_shape_error(a, "i[0] and i[1] must be 0 or 1");
    int nd = a->in_ndim[0];
    for (int k = 1; k < 3; k++) {
        int nk = a->in_ndim[k], ok = nk <= nd;
        for (int d = 0; ok && d < nk; d++) {
            int64_t s = a->in_shape[k][nk - 1 - d];
            ok = s == 1 || s == a->in_shape[0][nd - 1 - d];
        }
        if (!ok) {
            char what[80];
            snprintf(what, sizeof what, "input %d does not broadcast to dy's shape", k);
            return vdev_shape_error(a, what);
        }
    }
    a->n_out = 1;
    a->out_ndim[0] = nd;
    memcpy(a->out_shape[0], a->in_shape[0], sizeof a->out_shape[0]);
    a->out_dtype[0] = VDEV_F32;
    return VDEV_OK;
}

KERNEL(vdev_ref_maxmin_grad)
{
    const float *dy = (const float *)a->in[0], *x = (const float *)a->in[1];
    const float *y = (const float *)a->in[2];
    float *o = (float *)a->out[0];
    int nd = a->in_ndim[0], minimum = (int)a->i[0], to_y = (int)a->i[1];
    int64_t d4[4], sx[4], sy[4], i = 0;
    for (int d = 0; d < 4; d++)
        d4[d] = d >= 4 - nd ? a->in_shape[0][d - (4 - nd)] : 1;
    vdev_args_strides4(a, 1, sx);
    vdev_args_strides4(a, 2, sy);
    for (int64_t p = 0; p < d4[0]; p++)
        for (int64_t q = 0; q < d4[1]; q++)
            for (int64_t r = 0; r < d4[2]; r++)
                for (int64_t c = 0; c < d4[3]; c++, i++) {
                    float u = x[p * sx[0] + q * sx[1] + r * sx[2] + c * sx[3]];
                    float v = y[p * sy[0] + q * sy[1] + r * sy[2] + c * sy[3]];
                    int mask = minimum ? u <= v : u >= v;
                    o[i] = mask != to_y ? dy[i] : 0.0f;
                }
}
