/* batch_matmul.c — TensorFlow's BatchMatMulV2 (tf.matmul of tensors of
 * rank 3 or 4, tf.linalg.matmul, the products of attention): x [..., M, K]
 * and y [..., K, N] (either adjointed: its last two axes swapped; vdev's
 * tensors are real, so the adjoint is the transpose), batch axes broadcast as
 * NumPy broadcasts them, give [batch..., M, N]. TensorFlow's checks, in its
 * words, are made here; the product is then one of three: when y has no
 * batch axes and x is not adjointed, one MatMul of x viewed as [batch M, K]
 * (the same row by row); when one operand's batch is the output's and the
 * other's the same or a single entry (equal batches, a batch of 1, or none),
 * one BATCH_MATMUL op on [B, R, C] views (ops_table.c, its kernels in
 * kernels_ref.c, kernels_host.c (one gate pass for the whole batch) and the
 * CUDA plugin's cuda_blas.cu (a cuBLAS product per entry), its gradient in
 * grads.c, a broadcast operand's summed over the batch); otherwise (batches
 * broadcast both ways, [2,1] against [3]) each entry's matrices sliced out
 * (StridedSlice), one MatMul each, stacked (Pack, ConcatV2). The views are
 * Reshape ops; a recording tape differentiates all three. vdev_matmul_nd
 * is tf.matmul's choice between MatMul and this, one call for Python. */
#include "ops/impl.h"
#include "vdev/ops.h"

#include <stdlib.h>
#include <string.h>

/* Live tensor h's rank, sizes and dtype; 0 with the error set otherwise. */
static int info(const vdev_tensor_t *h, int64_t *shape, int *ndim, enum vdev_dtype *dt)
{
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_batch_matmul");
    if (!t)
        return 0;
    *ndim = t->ndim;
    *dt = t->dtype;
    memcpy(shape, t->shape, sizeof t->shape);
    return 1;
}

/* The operands viewed as [batch, rows, cols] (their batch axes folded). */
static vdev_tensor_t *as_3d(const vdev_tensor_t *t, const int64_t *shape, int ndim)
{
    int64_t b = 1;
    for (int d = 0; d < ndim - 2; d++)
        b *= shape[d];
    int64_t v[3] = {b, shape[ndim - 2], shape[ndim - 1]};
    return vdev_reshape(t, v, 3);
}

/* Entry `flat` of the output's batch (sizes ob[0..nb)) as an index into an
 * operand's batch (sizes sb, padded on the left with 1s to nb): broadcast
 * axes (size 1) read their only entry. */
static int64_t operand_entry(int64_t flat, const int64_t *ob, const int64_t *sb, int nb)
{
    int64_t idx = 0, stride = 1;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t i = flat % ob[d];
        flat /= ob[d];
        idx += (sb[d] == 1 ? 0 : i) * stride;
        stride *= sb[d];
    }
    return idx;
}

/* The product entry by entry: each entry's matrices sliced out (or the
 * operand itself when it has no batch), one MatMul each, stacked. */
static vdev_tensor_t *per_entry(const vdev_tensor_t *x3, const vdev_tensor_t *y3, int xb, int yb,
                                const int64_t *ob, const int64_t *sxb, const int64_t *syb,
                                int nb, int64_t entries, int adj_x, int adj_y)
{
    vdev_tensor_t **outs = vdev_calloc((size_t)entries, sizeof *outs);
    if (!outs) {
        vdev_error(VDEV_ERR_OOM, "vdev_batch_matmul: no host memory for %lld products",
                   (long long)entries);
        return NULL;
    }
    vdev_tensor_t *result = NULL;
    int64_t made = 0;
    for (; made < entries; made++) {
        vdev_tensor_t *xe = xb ? vdev_row(x3, operand_entry(made, ob, sxb, nb)) : NULL;
        vdev_tensor_t *ye = yb ? vdev_row(y3, operand_entry(made, ob, syb, nb)) : NULL;
        if ((xb && !xe) || (yb && !ye)) {
            vdev_tensor_free(xe);
            vdev_tensor_free(ye);
            goto out;
        }
        outs[made] = vdev_matmul(xb ? xe : x3, yb ? ye : y3, adj_x, adj_y);
        vdev_tensor_free(xe);
        vdev_tensor_free(ye);
        if (!outs[made])
            goto out;
    }
    if (entries > INT32_MAX) {
        vdev_error(VDEV_ERR_UNSUPPORTED, "BatchMatMulV2: %lld batch entries; vdev stacks at "
                   "most %d", (long long)entries, INT32_MAX);
        goto out;
    }
    result = vdev_stack((const vdev_tensor_t *const *)outs, (int)entries, 0);
out:
    for (int64_t i = 0; i < made && i < entries; i++)
        vdev_tensor_free(outs[i]);
    free(outs);
    return result;
}

VDEV_API vdev_tensor_t *vdev_batch_matmul(const vdev_tensor_t *x, const vdev_tensor_t *y,
                                          int adj_x, int adj_y)
{
    if (!x || !y)
        return NULL;
    int64_t sx[VDEV_MAX_DIMS], sy[VDEV_MAX_DIMS];
    int nx, ny;
    enum vdev_dtype dx, dy;
    if (!info(x, sx, &nx, &dx) || !info(y, sy, &ny, &dy))
        return NULL;
    char tx[96], ty[96];
    vdev_shape_str(sx, nx, tx, sizeof tx);
    vdev_shape_str(sy, ny, ty, sizeof ty);
    if (nx < 2 || ny < 2) {
        vdev_error(VDEV_ERR_SHAPE, "BatchMatMulV2: In[%d] ndims must be >= 2: %d", nx < 2 ? 0 : 1,
                   nx < 2 ? nx : ny);
        return NULL;
    }
    if (dx != VDEV_F32 || dy != VDEV_F32) {
        int k = dx != VDEV_F32 ? 0 : 1;
        vdev_error(VDEV_ERR_INVALID_ARG, "BatchMatMulV2: input #%d (shape %s) is %s, expected "
                   "float", k, k ? ty : tx, vdev_dtype_name(k ? dy : dx));
        return NULL;
    }
    /* the batch axes, padded on the left with 1s, and their broadcast */
    int nb = (nx > ny ? nx : ny) - 2;
    int64_t bx[VDEV_MAX_DIMS], by[VDEV_MAX_DIMS], ob[VDEV_MAX_DIMS];
    int64_t entries = 1, x_entries = 1, y_entries = 1;
    for (int d = 0; d < nb; d++) {
        int ix = d - (nb - (nx - 2)), iy = d - (nb - (ny - 2));
        bx[d] = ix >= 0 ? sx[ix] : 1;
        by[d] = iy >= 0 ? sy[iy] : 1;
        if (bx[d] != by[d] && bx[d] != 1 && by[d] != 1) {
            vdev_error(VDEV_ERR_SHAPE, "BatchMatMulV2: In[0] and In[1] must have compatible "
                       "batch dimensions: %s vs. %s", tx, ty);
            return NULL;
        }
        ob[d] = bx[d] == 1 ? by[d] : bx[d];
        entries *= ob[d];
        x_entries *= bx[d];
        y_entries *= by[d];
    }
    int64_t m = sx[nx - 2], kx = sx[nx - 1], ky = sy[ny - 2], n = sy[ny - 1];
    if (adj_x) {
        int64_t t = m;
        m = kx, kx = t;
    }
    if (adj_y) {
        int64_t t = ky;
        ky = n, n = t;
    }
    if (kx != ky) {
        vdev_error(VDEV_ERR_SHAPE, "BatchMatMulV2: Matrix size-incompatible: In[0]: %s, In[1]: %s",
                   tx, ty);
        return NULL;
    }
    int64_t out[VDEV_MAX_DIMS];
    memcpy(out, ob, (size_t)nb * sizeof *out);
    out[nb] = m;
    out[nb + 1] = n;
    if (entries == 0) /* no entry: the empty result, as TensorFlow's */
        return vdev_tensor_fill(out, nb + 2, VDEV_F32, 0.0);
    /* one BatchMatMulV2 op when one batch is the output's and the other is
     * the same or a single entry (the common case: equal batches, or an
     * operand without one) */
    int same = 1;
    for (int d = 0; d < nb; d++)
        same &= bx[d] == by[d];
    int one_op = same || x_entries == 1 || y_entries == 1;
    vdev_tensor_t *prod;
    if (ny == 2 && !adj_x) {
        /* one MatMul of x viewed as [entries M, K]: the same rows */
        int64_t v[2] = {entries * m, kx};
        vdev_tensor_t *xv = vdev_reshape(x, v, 2);
        prod = xv ? vdev_matmul(xv, y, 0, adj_y) : NULL;
        vdev_tensor_free(xv);
    } else if (one_op) {
        vdev_tensor_t *x3 = as_3d(x, sx, nx), *y3 = as_3d(y, sy, ny);
        prod = x3 && y3 ? vdev_batch_matmul3(x3, y3, adj_x, adj_y) : NULL;
        vdev_tensor_free(x3);
        vdev_tensor_free(y3);
    } else {
        vdev_tensor_t *x3 = as_3d(x, sx, nx), *y3 = as_3d(y, sy, ny);
        prod = x3 && y3 ? per_entry(x3, y3, 1, 1, ob, bx, by, nb, entries, adj_x, adj_y) : NULL;
        vdev_tensor_free(x3);
        vdev_tensor_free(y3);
    }
    if (!prod)
        return NULL;
    vdev_tensor_t *res = vdev_reshape(prod, out, nb + 2);
    vdev_tensor_free(prod);
    return res;
}

VDEV_API vdev_tensor_t *vdev_matmul_nd(const vdev_tensor_t *x, const vdev_tensor_t *y, int adj_x,
                                       int adj_y)
{
    const struct vdev_tens *tx = vdev_tens_peek(x), *ty = vdev_tens_peek(y);
    if (tx && ty && (tx->ndim > 2 || ty->ndim > 2))
        return vdev_batch_matmul(x, y, adj_x, adj_y);
    return vdev_matmul(x, y, adj_x != 0, adj_y != 0); /* it names a bad handle */
}
