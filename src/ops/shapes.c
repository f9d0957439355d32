/* shapes.c — the shape rules of the ops that do not use the shared ones in
 * exec.c (vdev_shape_same_as_in0, vdev_shape_broadcast_b).
 *
 * A shape rule reads the inputs' shapes, dtypes and the op's parameters from
 * the kernel arguments, checks that they fit the op, and writes n_out and the
 * output's shape and dtype. It may also normalise parameters for the kernels
 * (a negative axis becomes non-negative; REDUCE_ROWS stores its broadcast mode
 * in i[3]), so kernels never need to validate anything. A mismatch is
 * VDEV_ERR_SHAPE with a message that names the op and the shapes, in
 * TensorFlow's words where its kernel has them ("MatMul: Matrix
 * size-incompatible: In[0]: [3,4], In[1]: [5,6]"), else vdev's ("Transpose:
 * bad input shape [2] (...)"). Shape rules never read
 * tensor contents: values that are out of range (a label >= C) are the
 * kernels' business. */
#include "ops/impl.h"
#include "config/config.h"

#include <string.h>

/* ---- helpers ---- */

/* Output k := input `src`'s shape with dtype `dtype`. */
static void out_like(struct vdev_kernel_args *a, int src, int dtype)
{
    a->n_out = 1;
    a->out_ndim[0] = a->in_ndim[src];
    memcpy(a->out_shape[0], a->in_shape[src], sizeof a->out_shape[0]);
    a->out_dtype[0] = dtype;
}

/* Output 0 := a shape given as an array (dimensions beyond ndim are 1). */
static void out_shape(struct vdev_kernel_args *a, const int64_t *shape, int ndim, int dtype)
{
    a->n_out = 1;
    a->out_ndim[0] = ndim;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        a->out_shape[0][d] = d < ndim ? shape[d] : 1;
    a->out_dtype[0] = dtype;
}

static int same_shape(const struct vdev_kernel_args *a, int i, int j)
{
    if (a->in_ndim[i] != a->in_ndim[j])
        return 0;
    for (int d = 0; d < a->in_ndim[i]; d++)
        if (a->in_shape[i][d] != a->in_shape[j][d])
            return 0;
    return 1;
}

/* VDEV_ERR_SHAPE naming inputs i and j (vdev_shape_error names 0 and 1). */
static enum vdev_status shape_error_pair(const struct vdev_kernel_args *a, int i, int j,
                                         const char *what)
{
    char si[96], sj[96];
    vdev_shape_str(a->in_shape[i], a->in_ndim[i], si, sizeof si);
    vdev_shape_str(a->in_shape[j], a->in_ndim[j], sj, sizeof sj);
    return vdev_error(VDEV_ERR_SHAPE, "%s: incompatible shapes %s and %s (%s)",
                      vdev_op_defs[a->op].name, si, sj, what);
}

/* Checks every input listed in `want` (one dtype per input; -1: any). */
static enum vdev_status check_dtypes(const struct vdev_kernel_args *a, const int *want)
{
    for (int k = 0; k < a->n_in; k++)
        if (want[k] >= 0 && a->in_dtype[k] != want[k])
            return vdev_dtype_error(a, k, want[k]);
    return VDEV_OK;
}

/* Normalises an axis of an ndim-dimensional tensor: -1 is the last. Returns
 * VDEV_OK and *out, or VDEV_ERR_SHAPE naming the axis and the shape. */
static enum vdev_status norm_axis(const struct vdev_kernel_args *a, int k, int64_t axis,
                                  int64_t *out)
{
    int nd = a->in_ndim[k];
    int64_t ax = axis < 0 ? axis + nd : axis;
    if (ax < 0 || ax >= nd) {
        char s[96];
        vdev_shape_str(a->in_shape[k], nd, s, sizeof s);
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: axis %lld is out of range for a tensor of shape %s (%d dimensions)",
                          vdev_op_defs[a->op].name, (long long)axis, s, nd);
    }
    *out = ax;
    return VDEV_OK;
}

/* The shape of input k reduced over `axis` (VDEV_AXIS_ALL: every axis), with
 * or without the reduced axis kept as 1. */
static void reduced_shape(const struct vdev_kernel_args *a, int k, int64_t axis, int keepdims,
                          int64_t *shape, int *ndim)
{
    int nd = a->in_ndim[k], n = 0;
    for (int d = 0; d < nd; d++) {
        if (axis == VDEV_AXIS_ALL || d == axis) {
            if (keepdims)
                shape[n++] = 1;
        } else {
            shape[n++] = a->in_shape[k][d];
        }
    }
    *ndim = n;
}

/* ---- MATMUL ---- */

/* a [m,k] (or [k,m] with i[0]) times b [k,n] (or [n,k] with i[1]) -> [m,n].
 * The errors are TensorFlow's MatMul kernel's, in its words ("In[0] is not a
 * matrix. Instead it has shape [3]", "Matrix size-incompatible: In[0]:
 * [2,3], In[1]: [4,3]"), after the op's name. */
/* The checks both products make, in their words after the op's name:
 * float operands of rank nd (2: matrices; 3: batches of them, of equal
 * sizes or one of 1), op(x)'s columns op(y)'s rows (i[0], i[1]: transposed).
 * *m and *n get the product's rows and columns. */
static enum vdev_status product_checks(struct vdev_kernel_args *a, int nd, int64_t *m,
                                       int64_t *n)
{
    static const int want[2] = {VDEV_F32, VDEV_F32};
    enum vdev_status st = check_dtypes(a, want);
    if (st != VDEV_OK)
        return st;
    const char *name = vdev_op_defs[a->op].name;
    char s[2][96];
    for (int k = 0; k < 2; k++)
        vdev_shape_str(a->in_shape[k], a->in_ndim[k], s[k], sizeof s[k]);
    for (int k = 0; k < 2; k++)
        if (a->in_ndim[k] != nd)
            return nd == 2 ? vdev_error(VDEV_ERR_SHAPE,
                                        "%s: In[%d] is not a matrix. Instead it has shape %s",
                                        name, k, s[k])
                           : vdev_error(VDEV_ERR_SHAPE,
                                        "%s: In[%d] is not a batch of matrices [B,R,C]: %s", name,
                                        k, s[k]);
    int64_t bx = a->in_shape[0][0], by = a->in_shape[1][0];
    if (nd == 3 && bx != by && bx != 1 && by != 1)
        return vdev_error(VDEV_ERR_SHAPE, "%s: In[0] and In[1] must have compatible batch "
                          "dimensions: %s vs. %s", name, s[0], s[1]);
    const int64_t *x = a->in_shape[0] + nd - 2, *y = a->in_shape[1] + nd - 2;
    int ta = a->i[0] != 0, tb = a->i[1] != 0;
    if (x[ta ? 0 : 1] != y[tb ? 1 : 0])
        return vdev_error(VDEV_ERR_SHAPE, "%s: Matrix size-incompatible: In[0]: %s, In[1]: %s",
                          name, s[0], s[1]);
    *m = x[ta ? 1 : 0];
    *n = y[tb ? 0 : 1];
    return VDEV_OK;
}

enum vdev_status vdev_shape_matmul(struct vdev_kernel_args *a)
{
    int64_t m, n;
    enum vdev_status st = product_checks(a, 2, &m, &n);
    if (st != VDEV_OK)
        return st;
    int64_t shape[2] = {m, n};
    out_shape(a, shape, 2, VDEV_F32);
    /* The determinism switch as the product is submitted: a product queued
     * on a stream runs in the mode it was asked in (kernels_host.c). */
    a->i[2] = vdev_deterministic();
    return VDEV_OK;
}

/* x [B,M,K] (or [B,K,M] with i[0]) times y [B,K,N] (or [B,N,K] with i[1])
 * -> [B,M,N], a batch of 1 broadcast against the other's. The public
 * function (batch_matmul.c) checks TensorFlow's rules first and passes 3-D
 * views; these are the op's own checks, in its words. */
enum vdev_status vdev_shape_batch_matmul(struct vdev_kernel_args *a)
{
    int64_t m, n;
    enum vdev_status st = product_checks(a, 3, &m, &n);
    if (st != VDEV_OK)
        return st;
    int64_t bx = a->in_shape[0][0], by = a->in_shape[1][0];
    int64_t shape[3] = {bx == 1 ? by : bx, m, n};
    out_shape(a, shape, 3, VDEV_F32);
    a->i[2] = vdev_deterministic();
    return VDEV_OK;
}

/* ---- SUM, MEAN ---- */

/* Sum, Mean, Max, Min: i[0] axis (negative from the end, or VDEV_AXIS_ALL), i[1] keepdims. With
 * VDEV_AXIS_ALL and no keepdims the output is 0-dimensional; with keepdims it
 * has the input's rank with every dimension 1 (as TensorFlow's keepdims).
 * i[0] is normalised to 0..ndim-1 for the kernels. */
enum vdev_status vdev_shape_reduce(struct vdev_kernel_args *a)
{
    /* Max, Min (extreme.c) and Sum take int32 too; the output has the input's
     * dtype */
    static const int want[1] = {VDEV_F32};
    int extreme = a->op == VDEV_OP_MAX || a->op == VDEV_OP_MIN || a->op == VDEV_OP_SUM;
    enum vdev_status st = VDEV_OK;
    if (!(extreme && a->in_dtype[0] == VDEV_I32) && (st = check_dtypes(a, want)) != VDEV_OK)
        return st;
    int64_t ax = VDEV_AXIS_ALL, rank = a->in_ndim[0];
    if (a->i[0] != VDEV_AXIS_ALL && (a->i[0] < -rank || a->i[0] >= rank))
        return vdev_error(VDEV_ERR_SHAPE, /* TensorFlow's words, its parenthesis unclosed */
                          "%s: Invalid reduction dimension (%lld for input with %d dimension(s)",
                          vdev_op_defs[a->op].name, (long long)a->i[0], (int)rank);
    if (a->i[0] != VDEV_AXIS_ALL && (st = norm_axis(a, 0, a->i[0], &ax)) != VDEV_OK)
        return st;
    a->i[0] = ax;
    int64_t shape[VDEV_MAX_DIMS];
    int nd;
    reduced_shape(a, 0, ax, a->i[1] != 0, shape, &nd);
    out_shape(a, shape, nd, a->in_dtype[0]);
    return VDEV_OK;
}

/* ---- RESHAPE (a view) ---- */

/* f[0] the new rank, i[0..3] the new shape; one dimension may be -1 and is
 * inferred. The element count must not change. Any dtype. A shape whose
 * given dimensions multiply past VDEV_MAX_NUMEL is VDEV_ERR_INVALID_ARG, as
 * for a new tensor: a view skips vdev_shape_check. */
enum vdev_status vdev_shape_reshape(struct vdev_kernel_args *a)
{
    int nd = (int)a->f[0];
    const char *name = vdev_op_defs[a->op].name;
    if (a->f[0] != (double)nd || nd < 0 || nd > VDEV_MAX_DIMS)
        return vdev_error(VDEV_ERR_SHAPE, "%s: a new shape has 0 to %d dimensions, not %g", name,
                          VDEV_MAX_DIMS, a->f[0]);
    int64_t shape[VDEV_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = a->i[d];
    /* TensorFlow's Reshape kernel's rule and words: a 0 in the new shape is
     * left out of the product of the given dimensions and, with it, the input's
     * 0 dimensions out of the element count the -1 is inferred from, so that
     * [0,3] reshaped to [0,-1] is [0,3] (as TensorFlow gives) */
    int64_t numel = vdev_args_numel(a, 0), product = 1;
    int infer = -1, zero = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == -1) {
            if (infer >= 0)
                return vdev_error(VDEV_ERR_SHAPE,
                                  "%s: Only one input size may be -1, not both %d and %d", name,
                                  infer, d);
            infer = d;
        } else if (shape[d] < 0) {
            return vdev_error(VDEV_ERR_SHAPE, "%s: Size %d must be non-negative, not %lld", name,
                              d, (long long)shape[d]);
        } else if (shape[d] == 0) {
            zero = 1;
        } else if (product > VDEV_MAX_NUMEL / shape[d]) {
            /* as vdev_shape_check: no product of the dimensions may pass
             * VDEV_MAX_NUMEL (nor wrap, which would let a shape with
             * another element count through) */
            return vdev_shape_too_large(name, shape, nd);
        } else {
            product *= shape[d];
        }
    }
    if (infer >= 0) {
        int64_t in_numel = 1;
        int in_zero = 0;
        for (int d = 0; d < a->in_ndim[0]; d++) {
            if (a->in_shape[0][d] > 0 || !zero)
                in_numel *= a->in_shape[0][d];
            else
                in_zero = 1;
        }
        int64_t missing = in_numel / product;
        if (!in_zero && missing * product != in_numel)
            return vdev_error(VDEV_ERR_SHAPE,
                              "%s: Input to reshape is a tensor with %lld values, but the "
                              "requested shape requires a multiple of %lld",
                              name, (long long)in_numel, (long long)product);
        shape[infer] = missing;
    }
    int64_t known = 1;
    for (int d = 0; d < nd; d++)
        known *= shape[d];
    if (known != numel)
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: Input to reshape is a tensor with %lld values, but the requested "
                          "shape has %lld",
                          name, (long long)numel, (long long)known);
    out_shape(a, shape, nd, a->in_dtype[0]);
    return VDEV_OK;
}

/* ---- losses ---- */

/* MSE: (pred, target) f32 of one shape -> a 0-dimensional f32. */
enum vdev_status vdev_shape_scalar_loss(struct vdev_kernel_args *a)
{
    static const int want[2] = {VDEV_F32, VDEV_F32};
    enum vdev_status st = check_dtypes(a, want);
    if (st != VDEV_OK)
        return st;
    if (!same_shape(a, 0, 1))
        return vdev_shape_error(a, "prediction and target must have the same shape");
    out_shape(a, NULL, 0, VDEV_F32);
    return VDEV_OK;
}

/* Shared by SOFTMAX_CE and its gradient: logits (input l) [N,C] f32 and labels
 * (input l+1) [N] i32, C at least 1 (even for N = 0), checked in the order of
 * TensorFlow's SparseSoftmaxCrossEntropyWithLogits kernel, with its words. */
static enum vdev_status check_logits_labels(const struct vdev_kernel_args *a, int l)
{
    if (a->in_dtype[l] != VDEV_F32)
        return vdev_dtype_error(a, l, VDEV_F32);
    if (a->in_dtype[l + 1] != VDEV_I32)
        return vdev_dtype_error(a, l + 1, VDEV_I32);
    const char *op = vdev_op_defs[a->op].name;
    char sl[96], sb[96];
    vdev_shape_str(a->in_shape[l], a->in_ndim[l], sl, sizeof sl);
    vdev_shape_str(a->in_shape[l + 1], a->in_ndim[l + 1], sb, sizeof sb);
    if (a->in_ndim[l] != 2)
        return vdev_error(VDEV_ERR_SHAPE, "%s: logits must be 2-D, but got shape %s", op, sl);
    if (a->in_ndim[l + 1] != 1)
        return vdev_error(VDEV_ERR_SHAPE, "%s: labels must be 1-D, but got shape %s", op, sb);
    if (a->in_shape[l][0] != a->in_shape[l + 1][0])
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: logits and labels must have the same first dimension, got logits "
                          "shape %s and labels shape %s",
                          op, sl, sb);
    if (a->in_shape[l][1] == 0)
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: Must have at least one class, but got logits shape %s", op, sl);
    return VDEV_OK;
}

/* SOFTMAX, LOG_SOFTMAX: the input's shape, over its last axis, so at least
 * one dimension, as TensorFlow's kernels demand, in their words ("Softmax:
 * logits must have >= 1 dimension, got []"). An empty last axis is fine: the
 * output is as empty. */
enum vdev_status vdev_shape_softmax(struct vdev_kernel_args *a)
{
    if (a->in_dtype[0] == VDEV_F32 && a->in_ndim[0] < 1)
        return vdev_error(VDEV_ERR_SHAPE, "%s: logits must have >= 1 dimension, got []",
                          vdev_op_defs[a->op].name);
    return vdev_shape_same_as_in0(a);
}

/* (logits [N,C] f32, labels [N] i32) -> a 0-dimensional f32. */
enum vdev_status vdev_shape_softmax_ce(struct vdev_kernel_args *a)
{
    enum vdev_status st = check_logits_labels(a, 0);
    if (st != VDEV_OK)
        return st;
    out_shape(a, NULL, 0, VDEV_F32);
    return VDEV_OK;
}

/* The labels of SparseSoftmaxCrossEntropyWithLogits in [0, C), as
 * TensorFlow's CPU kernel demands, with its words. Read on the host where the
 * labels' backend lets the host read device memory (cpu, sim): at once when
 * they were copied from the host and no kernel wrote them since, else after
 * their device's stream has finished writing them. On other backends (CUDA)
 * they go unread and a bad label makes the loss NaN, as on TensorFlow's GPUs. */
enum vdev_status vdev_check_ce_labels(const struct vdev_tens *const *in,
                                      const struct vdev_kernel_args *a)
{
    const struct vdev_tens *lab = in[1];
    const struct vdev_backend *b = lab->dev->backend;
    if (!b->ops->host_addressable || !lab->numel)
        return VDEV_OK;
    if (!lab->host_written && b->ops->is_gpu) {
        enum vdev_status st = vdev_backend_synchronize(b, lab->dev->bdev);
        if (st != VDEV_OK)
            return st;
    }
    int64_t n = a->in_shape[1][0], c = a->in_shape[0][1];
    const int32_t *l = lab->data;
    int64_t bad = 0;
    while (bad < n && l[bad] >= 0 && l[bad] < c)
        bad++;
    if (bad == n)
        return VDEV_OK;
    char vals[200];
    size_t k = 0;
    for (int64_t r = 0; r < n && k + 16 < sizeof vals; r++)
        k += (size_t)snprintf(vals + k, sizeof vals - k, "%s%d", r ? " " : "", (int)l[r]);
    if (k + 16 >= sizeof vals)
        snprintf(vals + k, sizeof vals - k, " ...");
    return vdev_error(VDEV_ERR_INVALID_ARG,
                      "%s: Received a label value of %d which is outside the valid range of "
                      "[0, %lld).  Label values: %s",
                      vdev_op_defs[a->op].name, (int)l[bad], (long long)c, vals);
}

/* ---- ARGMAX ---- */

/* [..., C] f32 -> [...] i32 over the last axis; C must not be 0 (the index
 * of the largest of nothing does not exist: TensorFlow's "Reduction axis 1
 * is empty in shape [3,0]"), a 0-dimensional input has no last axis. */
enum vdev_status vdev_shape_argmax(struct vdev_kernel_args *a)
{
    static const int want[1] = {VDEV_F32};
    enum vdev_status st = check_dtypes(a, want);
    if (st != VDEV_OK)
        return st;
    int nd = a->in_ndim[0];
    if (nd < 1)
        return vdev_shape_error(a, "ArgMax needs at least one dimension");
    if (a->in_shape[0][nd - 1] == 0) {
        char s[96]; /* TensorFlow's words (its ArgMax kernel's) */
        vdev_shape_str(a->in_shape[0], nd, s, sizeof s);
        return vdev_error(VDEV_ERR_SHAPE, "ArgMax: Reduction axis %d is empty in shape %s", nd - 1,
                          s);
    }
    out_shape(a, a->in_shape[0], nd - 1, VDEV_I32);
    return VDEV_OK;
}

/* ---- IDENTITY ---- */

/* Same shape and dtype as the input, f32 or i32. */
enum vdev_status vdev_shape_identity(struct vdev_kernel_args *a)
{
    out_like(a, 0, a->in_dtype[0]);
    return VDEV_OK;
}

/* ---- gradient helpers ---- */

/* BROADCAST (x, like): x is like reduced over i[0] (an axis, negative from
 * the end, or VDEV_AXIS_ALL), with or without keepdims; the output has like's
 * shape. i[0] is normalised. For VDEV_AXIS_ALL x must have one element. */
enum vdev_status vdev_shape_broadcast(struct vdev_kernel_args *a)
{
    static const int want[2] = {VDEV_F32, -1};
    enum vdev_status st = check_dtypes(a, want);
    if (st != VDEV_OK)
        return st;
    int64_t ax = VDEV_AXIS_ALL;
    if (a->i[0] != VDEV_AXIS_ALL && (st = norm_axis(a, 1, a->i[0], &ax)) != VDEV_OK)
        return st;
    int fits;
    if (ax == VDEV_AXIS_ALL) {
        fits = vdev_args_numel(a, 0) == 1;
    } else {
        /* x must equal like's shape reduced, with or without keepdims. */
        fits = 0;
        for (int keep = 0; keep < 2 && !fits; keep++) {
            int64_t shape[VDEV_MAX_DIMS];
            int nd;
            reduced_shape(a, 1, ax, keep, shape, &nd);
            fits = nd == a->in_ndim[0];
            for (int d = 0; fits && d < nd; d++)
                fits = shape[d] == a->in_shape[0][d];
        }
    }
    if (!fits)
        return vdev_shape_error(a, "x must be the second shape reduced over the axis");
    a->i[0] = ax;
    out_like(a, 1, VDEV_F32);
    return VDEV_OK;
}

/* REDUCE_ROWS (dy, like): like is an input of a broadcasting binary op
 * whose output had dy's shape, so like broadcast against dy gives dy's shape
 * (like may have leading 1s beyond dy's rank); the output has like's shape.
 * The mode goes to i[3] as vdev_shape_broadcast_b sets it for the forward
 * op with dy as a: 0 like has dy's elements (a copy), 1 like is a row, 2 one
 * element, 3 like is summed over each of its dimensions of 1 that dy fills. */
enum vdev_status vdev_shape_reduce_rows(struct vdev_kernel_args *a)
{
    enum vdev_status st = vdev_shape_broadcast_b(a);
    if (st != VDEV_OK)
        return st;
    /* the broadcast shape must be dy's, up to leading 1s */
    int nd = a->in_ndim[0], no = a->out_ndim[0], fits = 1;
    for (int d = 0; d < no; d++) {
        int dd = d - (no - nd);
        fits &= a->out_shape[0][d] == (dd >= 0 ? a->in_shape[0][dd] : 1);
    }
    if (!fits)
        return vdev_shape_error(a, "the second shape must broadcast to the first");
    out_like(a, 1, VDEV_F32);
    return VDEV_OK;
}

/* MSE_GRAD (dy, pred, target): dy has one element; pred and target one
 * shape; the output has pred's shape. */
enum vdev_status vdev_shape_mse_grad(struct vdev_kernel_args *a)
{
    static const int want[3] = {VDEV_F32, VDEV_F32, VDEV_F32};
    enum vdev_status st = check_dtypes(a, want);
    if (st != VDEV_OK)
        return st;
    if (vdev_args_numel(a, 0) != 1)
        return vdev_shape_error(a, "the gradient of a loss has one element");
    if (!same_shape(a, 1, 2))
        return shape_error_pair(a, 1, 2, "prediction and target must have the same shape");
    out_like(a, 1, VDEV_F32);
    return VDEV_OK;
}

/* SOFTMAX_CE_GRAD (dy, logits [N,C], labels [N]) -> logits' shape. */
enum vdev_status vdev_shape_softmax_ce_grad(struct vdev_kernel_args *a)
{
    if (a->in_dtype[0] != VDEV_F32)
        return vdev_dtype_error(a, 0, VDEV_F32);
    if (vdev_args_numel(a, 0) != 1)
        return vdev_shape_error(a, "the gradient of a loss has one element");
    enum vdev_status st = check_logits_labels(a, 1);
    if (st != VDEV_OK)
        return st;
    out_like(a, 1, VDEV_F32);
    return VDEV_OK;
}

/* ---- in-place updates ---- */

/* SGD_UPDATE, ADAM_UPDATE: every input f32 with input 0's shape; no output
 * tensor (n_out = 0): the kernels write their inputs. */
enum vdev_status vdev_shape_update(struct vdev_kernel_args *a)
{
    for (int k = 0; k < a->n_in; k++) {
        if (a->in_dtype[k] != VDEV_F32)
            return vdev_dtype_error(a, k, VDEV_F32);
        if (!same_shape(a, 0, k))
            return shape_error_pair(a, 0, k,
                                    "every operand of an update has the variable's "
                                    "shape");
    }
    a->n_out = 0;
    return VDEV_OK;
}

/* ---- slicing along axis 0 ---- */

/* SLICE: rows [i[0], i[0] + i[1]) of axis 0 of a tensor of any dtype and at
 * least 1 dimension -> [i[1], rest...]. The range is checked as
 * TensorFlow's Slice checks begin and size (its words, for axis 0). */
enum vdev_status vdev_shape_slice(struct vdev_kernel_args *a)
{
    if (a->in_ndim[0] < 1)
        return vdev_shape_error(a, "rows are sliced along axis 0: it needs at least 1 dimension");
    int64_t rows = a->in_shape[0][0], b = a->i[0], n = a->i[1];
    if (b < 0 || b > rows)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "Slice: Expected begin[0] in [0, %lld], but got %lld", (long long)rows,
                          (long long)b);
    if (n < 0 || n > rows - b) /* rows - b >= 0: begin + size never overflows */
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "Slice: Expected size[0] in [0, %lld], but got %lld",
                          (long long)(rows - b), (long long)n);
    out_like(a, 0, a->in_dtype[0]);
    a->out_shape[0][0] = n;
    return VDEV_OK;
}

/* SLICE_GRAD (dy f32, like x) -> x's shape, f32: dy's shape is x's but for
 * its rows, which fit x's from row i[0]. */
enum vdev_status vdev_shape_slice_grad(struct vdev_kernel_args *a)
{
    if (a->in_dtype[0] != VDEV_F32)
        return vdev_dtype_error(a, 0, VDEV_F32);
    int nd = a->in_ndim[1], same = nd >= 1 && a->in_ndim[0] == nd;
    for (int d = 1; same && d < nd; d++)
        same = a->in_shape[0][d] == a->in_shape[1][d];
    int64_t b = a->i[0];
    if (!same || b < 0 || b > a->in_shape[1][0] || a->in_shape[0][0] > a->in_shape[1][0] - b)
        return vdev_shape_error(a, "the gradient of a slice of rows must fit the input's rows");
    out_like(a, 1, VDEV_F32);
    return VDEV_OK;
}

/* ---- the shared rules of the element-wise ops ---- */

/* Whether op computes on int32 too (TensorFlow's AddV2, Sub, Mul, Maximum
 * and Minimum take int32; two's complement wraps, as there): then every
 * input must have input 0's dtype, f32 or i32, and the output has it. */
static int int_arith(const struct vdev_kernel_args *a)
{
    switch (a->op) {
    case VDEV_OP_ADD:
    case VDEV_OP_SUB:
    case VDEV_OP_MUL:
    case VDEV_OP_MAXIMUM:
    case VDEV_OP_MINIMUM: return a->in_dtype[0] == VDEV_I32;
    default: return 0;
    }
}

/* Every input f32, or (int_arith) every input i32. */
static enum vdev_status arith_dtypes(const struct vdev_kernel_args *a, int *dt)
{
    *dt = int_arith(a) ? VDEV_I32 : VDEV_F32;
    for (int i = 0; i < a->n_in; i++)
        if (a->in_dtype[i] != *dt)
            return vdev_dtype_error(a, i, *dt);
    return VDEV_OK;
}

enum vdev_status vdev_shape_same_as_in0(struct vdev_kernel_args *a)
{
    int dt;
    enum vdev_status st = arith_dtypes(a, &dt);
    if (st != VDEV_OK)
        return st;
    for (int i = 1; i < a->n_in; i++) {
        int same = a->in_ndim[i] == a->in_ndim[0];
        for (int d = 0; same && d < a->in_ndim[0]; d++)
            same = a->in_shape[i][d] == a->in_shape[0][d];
        if (!same)
            return vdev_shape_error(a, "shapes must be equal");
    }
    out_like(a, 0, dt);
    return VDEV_OK;
}

/* NumPy's broadcasting, as TensorFlow's binary ops: the shapes are aligned
 * at their last dimensions, the output has the larger rank, and each of its
 * dimensions is the inputs' where they agree, else the one that is not 1 (a
 * missing dimension counts as 1). Kernels read the mode in i[3]:
 *   0  a and b both have the output's shape (up to leading 1s): elementwise;
 *   1  a has it and b is a row: every dimension 1 but the last, which is the
 *      output's last (b[i mod cols]);
 *   2  a has it and b has one element;
 *   3  anything else (a broadcast too, inner dimensions of 1, ...): each
 *      input indexed through strides of 0 along its broadcast dimensions.
 * Modes 0 to 2 read a and b as flat arrays of a's element count, which is
 * the output's. */
enum vdev_status vdev_shape_broadcast_b(struct vdev_kernel_args *a)
{
    int dt;
    enum vdev_status st = arith_dtypes(a, &dt);
    return st != VDEV_OK ? st : vdev_shape_broadcast_as(a, dt);
}

enum vdev_status vdev_shape_broadcast_as(struct vdev_kernel_args *a, int out_dtype)
{
    int na = a->in_ndim[0], nb = a->in_ndim[1], no = na > nb ? na : nb;
    int64_t out[VDEV_MAX_DIMS] = {1, 1, 1, 1};
    int a_full = 1, b_full = 1;
    for (int d = 0; d < no; d++) {
        /* dimension d of the output, counted from its first */
        int da = d - (no - na), db = d - (no - nb);
        int64_t x = da >= 0 ? a->in_shape[0][da] : 1, y = db >= 0 ? a->in_shape[1][db] : 1;
        if (x != y && x != 1 && y != 1) {
            char what[160];
            snprintf(what, sizeof what,
                     "dimensions %lld and %lld, %d from the end, differ and neither is 1",
                     (long long)x, (long long)y, no - d);
            return vdev_shape_error(a, what);
        }
        out[d] = x == 1 ? y : x;
        a_full &= x == out[d];
        b_full &= y == out[d];
    }
    int64_t cols = no ? out[no - 1] : 1, nbe = vdev_shape_numel(a->in_shape[1], nb);
    int b_row = 1; /* every dimension of b but its last is 1 */
    for (int d = 0; d + 1 < nb; d++)
        b_row &= a->in_shape[1][d] == 1;
    if (a_full && b_full)
        a->i[3] = 0;
    else if (a_full && nb >= 1 && b_row && nbe == cols)
        a->i[3] = 1;
    else if (a_full && nbe == 1)
        a->i[3] = 2;
    else
        a->i[3] = 3;
    a->n_out = 1;
    a->out_ndim[0] = no;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        a->out_shape[0][d] = d < no ? out[d] : 1;
    a->out_dtype[0] = out_dtype;
    return VDEV_OK;
}
