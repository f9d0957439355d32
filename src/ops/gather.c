/* gather.c — TensorFlow's GatherV2 along axis 0 with batch_dims 0
 * (tf.gather(params, indices), what an embedding lookup is) and its
 * gradient: the shape rules, the check of the indices, the reference
 * kernels, the gradient and the public function. The output is
 * indices.shape + params.shape[1:]: output row k (the product of params'
 * other dimensions, in words) is params' row indices[k]. Elements move as
 * 4-byte words, so int32 params gather as float ones do. An index outside
 * [0, rows) is TensorFlow's CPU error ("indices[1] = 7 is not in [0, 5)")
 * where the host reads the indices (the cpu backend, simulated GPUs: the
 * op's check); where it does not (CUDA), the row is zeros, as TensorFlow's
 * GPU kernel writes, and the reference kernel does the same, so that every
 * kernel gives the same bits for every input.
 *
 * The gradient with respect to params is TensorFlow's IndexedSlices summed
 * into a dense tensor (UnsortedSegmentSum); here it is one dense op,
 * GatherGrad (dy, indices, like params): zeros of params' shape, then each
 * row of dy added to its index's row, in float, in the order of the indices
 * (TensorFlow's CPU order and arithmetic, so repeated indices sum to the
 * same bits on every run and every backend); rows of out-of-range indices
 * are dropped, as TensorFlow's GPU drops them. The indices take no
 * gradient. */
#include "ops/impl.h"

#include <stdio.h>
#include <string.h>

/* ---- shape rules ---- */

/* The words of one row of params (input k): the product of its dimensions
 * after the first. */
static int64_t row_words(const struct vdev_kernel_args *a, int k)
{
    int64_t n = 1;
    for (int d = 1; d < a->in_ndim[k]; d++)
        n *= a->in_shape[k][d];
    return n;
}

/* Indices must be int32: TensorFlow's words for another dtype (its op
 * wrapper's, which checks before any kernel runs). */
static enum vdev_status indices_dtype(const struct vdev_kernel_args *a, int k)
{
    if (a->in_dtype[k] == VDEV_I32)
        return VDEV_OK;
    return vdev_error(VDEV_ERR_INVALID_ARG,
                      "%s: Value passed to parameter 'indices' has DataType %s not in list of "
                      "allowed values: int16, int32, int64",
                      vdev_op_defs[a->op].name,
                      a->in_dtype[k] == VDEV_F32
                          ? "float32"
                          : vdev_dtype_name((enum vdev_dtype)a->in_dtype[k]));
}

/* indices.shape + params.shape[1:] into out (ndim in *nd); VDEV_OK, or
 * VDEV_ERR_UNSUPPORTED past 4 dimensions. params is input p, indices
 * input q. */
static enum vdev_status gathered_shape(const struct vdev_kernel_args *a, int p, int q,
                                       int64_t out[VDEV_MAX_DIMS], int *nd)
{
    int n = a->in_ndim[q] + a->in_ndim[p] - 1;
    if (n > VDEV_MAX_DIMS)
        return vdev_error(VDEV_ERR_UNSUPPORTED,
                          "%s: the result would have %d dimensions; vdev tensors have at most %d",
                          vdev_op_defs[a->op].name, n, (int)VDEV_MAX_DIMS);
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        out[d] = 1;
    for (int d = 0; d < a->in_ndim[q]; d++)
        out[d] = a->in_shape[q][d];
    for (int d = 1; d < a->in_ndim[p]; d++)
        out[a->in_ndim[q] + d - 1] = a->in_shape[p][d];
    *nd = n;
    return VDEV_OK;
}

/* GATHER (params f32 or i32 of 1 to 4 dimensions, indices i32) ->
 * indices.shape + params.shape[1:], params' dtype. */
enum vdev_status vdev_shape_gather(struct vdev_kernel_args *a)
{
    if (a->in_ndim[0] < 1)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: params must be at least 1 dimensional",
                          vdev_op_defs[a->op].name);
    enum vdev_status st = indices_dtype(a, 1);
    int nd;
    if (st != VDEV_OK || (st = gathered_shape(a, 0, 1, a->out_shape[0], &nd)) != VDEV_OK)
        return st;
    a->n_out = 1;
    a->out_ndim[0] = nd;
    a->out_dtype[0] = a->in_dtype[0];
    return VDEV_OK;
}

/* GATHER_GRAD (dy f32, indices i32, like params f32) -> like's shape, f32:
 * dy's shape is the forward output's. */
enum vdev_status vdev_shape_gather_grad(struct vdev_kernel_args *a)
{
    if (a->in_dtype[0] != VDEV_F32)
        return vdev_dtype_error(a, 0, VDEV_F32);
    if (a->in_dtype[2] != VDEV_F32)
        return vdev_dtype_error(a, 2, VDEV_F32);
    if (a->in_ndim[2] < 1)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: params must be at least 1 dimensional",
                          vdev_op_defs[a->op].name);
    enum vdev_status st = indices_dtype(a, 1);
    int64_t want[VDEV_MAX_DIMS];
    int nd;
    if (st != VDEV_OK || (st = gathered_shape(a, 2, 1, want, &nd)) != VDEV_OK)
        return st;
    int fits = a->in_ndim[0] == nd;
    for (int d = 0; fits && d < nd; d++)
        fits = a->in_shape[0][d] == want[d];
    if (!fits)
        return vdev_shape_error(a, "the gradient of a gather has the shape indices.shape + "
                                   "params.shape[1:]");
    a->n_out = 1;
    a->out_ndim[0] = a->in_ndim[2];
    memcpy(a->out_shape[0], a->in_shape[2], sizeof a->out_shape[0]);
    a->out_dtype[0] = VDEV_F32;
    return VDEV_OK;
}

/* ---- the check of the indices (vdev_op_def.check) ---- */

/* TensorFlow's SliceDebugString: flat index i of `shape` as "[i0,i1,...]"
 * ("" for a 0-dimensional shape). */
static void index_str(const int64_t *shape, int nd, int64_t i, char *buf, size_t cap)
{
    int64_t idx[VDEV_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
    size_t k = 0;
    buf[0] = '\0';
    for (int d = 0; d < nd && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? "," : "[", (long long)idx[d]);
    if (nd && k < cap)
        snprintf(buf + k, cap - k, "]");
}

/* Every index in [0, rows) where the host reads the indices (cpu, sim;
 * indices an op made on a simulated GPU are read once its stream has
 * finished them); unread on CUDA, whose kernel writes zeros for them. As
 * in TensorFlow, nothing is checked when the rows are empty ([5,0]: no
 * element moves). The first bad index is named. */
enum vdev_status vdev_check_gather_indices(const struct vdev_tens *const *in,
                                           const struct vdev_kernel_args *a)
{
    const int p = 0, q = 1; /* params, indices */
    const struct vdev_tens *ix = in[q];
    const struct vdev_backend *b = ix->dev->backend;
    if (!b->ops->host_addressable || !ix->numel || !row_words(a, p))
        return VDEV_OK;
    if (!ix->host_written && b->ops->is_gpu) {
        enum vdev_status st = vdev_backend_synchronize(b, ix->dev->bdev);
        if (st != VDEV_OK)
            return st;
    }
    int64_t rows = a->in_shape[p][0];
    const int32_t *l = ix->data;
    for (int64_t k = 0; k < ix->numel; k++) {
        if (l[k] >= 0 && l[k] < rows)
            continue;
        char at[96];
        index_str(a->in_shape[q], a->in_ndim[q], k, at, sizeof at);
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: indices%s = %d is not in [0, %lld)",
                          vdev_op_defs[a->op].name, at, (int)l[k], (long long)rows);
    }
    return VDEV_OK;
}

/* ---- reference kernels ---- */

/* Output row k: params' row indices[k], or zeros for an index outside
 * [0, rows) (reached only where the check does not read the indices). */
KERNEL(vdev_ref_gather)
{
    const uint32_t *x = a->in[0];
    const int32_t *ix = a->in[1];
    uint32_t *out = a->out[0];
    int64_t row = row_words(a, 0), rows = a->in_shape[0][0], n = vdev_args_numel(a, 1);
    if (!row)
        return;
    for (int64_t k = 0; k < n; k++) {
        if (ix[k] >= 0 && ix[k] < rows)
            memcpy(out + k * row, x + ix[k] * row, (size_t)row * sizeof *out);
        else
            memset(out + k * row, 0, (size_t)row * sizeof *out);
    }
}

/* Zeros of params' shape, then dy's rows added to their indices' rows in
 * the indices' order, in float (TensorFlow's UnsortedSegmentSum on the
 * CPU); an index outside [0, rows) adds nothing. */
KERNEL(vdev_ref_gather_grad)
{
    const float *dy = a->in[0];
    const int32_t *ix = a->in[1];
    float *out = a->out[0];
    int64_t row = row_words(a, 2), rows = a->in_shape[2][0], n = vdev_args_numel(a, 1);
    if (rows > 0 && row > 0)
        memset(out, 0, (size_t)(rows * row) * sizeof *out);
    for (int64_t k = 0; row && k < n; k++) {
        if (ix[k] < 0 || ix[k] >= rows)
            continue;
        float *o = out + ix[k] * row;
        const float *d = dy + k * row;
        for (int64_t c = 0; c < row; c++)
            o[c] += d[c];
    }
}

/* ---- gradient ---- */

/* params' gradient (float params only): GatherGrad of dy by the same
 * indices, on the gather's device; the indices take none. */
GRAD(vdev_grad_gather)
{
    if (!(g->need & 1u) || g->in[0]->dtype != VDEV_F32)
        return VDEV_OK;
    const struct vdev_tens *in[3] = {g->dout, g->in[1], g->in[0]};
    din[0] = vdev_op_exec(VDEV_OP_GATHER_GRAD, in, 3, NULL);
    if (din[0])
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

/* ---- the public function ---- */

VDEV_API vdev_tensor_t *vdev_gather(const vdev_tensor_t *params, const vdev_tensor_t *indices)
{
    const vdev_tensor_t *in[2] = {params, indices};
    return vdev_op_run(VDEV_OP_GATHER, in, 2, NULL);
}
