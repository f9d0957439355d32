/* concat.c — TensorFlow's ConcatV2 (tf.concat), Pack (tf.stack) and
 * Transpose with a permutation (tf.transpose(a, perm)): their shape rules,
 * reference kernels, gradients and public functions. An op takes at most
 * VDEV_KERNEL_MAX_IN (4) inputs, so ConcatV2 and Pack are ops of four inputs
 * of which the first i[1] are used (the public functions fill the rest with
 * the first, which no kernel reads and no gradient reaches), and a list of
 * more than four tensors is joined as a tree: split into four runs of
 * nearly equal length, each joined the same way, then the four results
 * concatenated. Each element is then copied at most ceil(log4 n) times
 * (once for up to 4 tensors, twice up to 16, three times up to 64), and the
 * work is O(bytes log n) in fewer than n ops, every one of them an ordinary
 * op that tapes record and devices run. (An op writing into a slot of an
 * output made up front would copy each element once, but a tape records one
 * op per output: the ops of a join would share theirs, which the tape
 * cannot differentiate.) Elements move as 4-byte words, so int32 tensors
 * join and transpose as float ones do. Gradients are ops too: ConcatV2's
 * are StridedSlices of the output's gradient, Pack's the same with the axis
 * dropped by a Reshape, Transpose's the transpose by the inverse
 * permutation. */
#include "ops/impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the ops ---- */

/* ConcatV2 (i[0] the axis, 0 <= axis < rank; i[1] the inputs used, 1..4):
 * the used inputs have one dtype and rank, and equal dimensions but the
 * axis; the output has the sum of theirs along it. */
enum vdev_status vdev_shape_concat(struct vdev_kernel_args *a)
{
    int n = (int)a->i[1], nd = a->in_ndim[0];
    int64_t axis = a->i[0], sum = 0;
    if (n < 1 || n > a->n_in)
        return vdev_shape_error(a, "ConcatV2 joins 1 to 4 of its inputs (i[1])");
    if (axis < 0 || axis >= nd)
        return vdev_shape_error(a, "the axis must be one of the inputs' dimensions");
    for (int k = 0; k < n; k++) {
        if (a->in_dtype[k] != a->in_dtype[0])
            return vdev_dtype_error(a, k, a->in_dtype[0]);
        int fits = a->in_ndim[k] == nd;
        for (int d = 0; fits && d < nd; d++)
            fits = d == axis || a->in_shape[k][d] == a->in_shape[0][d];
        if (!fits)
            return vdev_shape_error(a, "the inputs' dimensions must be equal but along the axis");
        sum += a->in_shape[k][axis];
    }
    a->n_out = 1;
    a->out_ndim[0] = nd;
    memcpy(a->out_shape[0], a->in_shape[0], sizeof a->out_shape[0]);
    a->out_shape[0][axis] = sum;
    a->out_dtype[0] = a->in_dtype[0];
    return VDEV_OK;
}

/* Pack (i[0] the new axis, 0 <= axis <= rank; i[1] the inputs used): the
 * used inputs have one dtype and shape; the output has a dimension of i[1]
 * inserted at the axis. */
enum vdev_status vdev_shape_pack(struct vdev_kernel_args *a)
{
    int n = (int)a->i[1], nd = a->in_ndim[0];
    int64_t axis = a->i[0];
    if (n < 1 || n > a->n_in)
        return vdev_shape_error(a, "Pack stacks 1 to 4 of its inputs (i[1])");
    if (axis < 0 || axis > nd || nd + 1 > VDEV_MAX_DIMS)
        return vdev_shape_error(a, "the new axis must be one of the output's 1 to 4 dimensions");
    for (int k = 0; k < n; k++) {
        if (a->in_dtype[k] != a->in_dtype[0])
            return vdev_dtype_error(a, k, a->in_dtype[0]);
        int same = a->in_ndim[k] == nd;
        for (int d = 0; same && d < nd; d++)
            same = a->in_shape[k][d] == a->in_shape[0][d];
        if (!same)
            return vdev_shape_error(a, "the inputs' shapes must be equal");
    }
    a->n_out = 1;
    a->out_ndim[0] = nd + 1;
    for (int d = 0, s = 0; d < VDEV_MAX_DIMS; d++)
        a->out_shape[0][d] = d == axis ? n : d <= nd ? a->in_shape[0][s++] : 1;
    a->out_dtype[0] = a->in_dtype[0];
    return VDEV_OK;
}

/* Both ops as one copy: with `outer` the product of the output's
 * dimensions before the axis, each used input is `outer` rows of
 * numel / outer words, and the output's row r is the inputs' rows r one
 * after the other (TensorFlow's own view of both ops). Rows are written in
 * order, so the output is written front to back; a row of one word (a
 * Pack along the last axis) is copied as a word rather than by memcpy,
 * whose call would cost more than the copy. */
KERNEL(vdev_ref_concat)
{
    int axis = (int)a->i[0], n = (int)a->i[1];
    int64_t outer = 1, total = vdev_args_out_numel(a, 0), chunk[VDEV_KERNEL_MAX_IN];
    for (int d = 0; d < axis; d++)
        outer *= a->out_shape[0][d];
    if (!outer || !total)
        return;
    for (int k = 0; k < n; k++)
        chunk[k] = vdev_args_numel(a, k) / outer;
    uint32_t *o = a->out[0];
    for (int64_t r = 0; r < outer; r++)
        for (int k = 0; k < n; k++) {
            const uint32_t *x = (const uint32_t *)a->in[k] + r * chunk[k];
            if (chunk[k] == 1)
                *o = *x;
            else if (chunk[k])
                memcpy(o, x, (size_t)chunk[k] * sizeof *o);
            o += chunk[k];
        }
}

/* Transpose: with j[0] 1, output axis d is input axis i[d] (i[0..rank) a
 * permutation, checked here); with j[0] 0 (the parameters vdev_transpose
 * packs, none) a 2-D [m,n] -> [n,m], which this rule rewrites into the
 * permutation {1, 0} for the kernels. */
enum vdev_status vdev_shape_transpose(struct vdev_kernel_args *a)
{
    int nd = a->in_ndim[0];
    if (a->j[0] == 0) {
        if (nd != 2)
            return vdev_shape_error(a, "Transpose takes a 2-dimensional tensor");
        a->i[0] = 1;
        a->i[1] = 0;
        a->j[0] = 1;
    }
    unsigned seen = 0;
    for (int d = 0; d < nd; d++) {
        int64_t p = a->i[d];
        if (p < 0 || p >= nd || ((seen >> p) & 1u))
            return vdev_shape_error(a, "i[0..rank) must be a permutation of the axes");
        seen |= 1u << p;
    }
    a->n_out = 1;
    a->out_ndim[0] = nd;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        a->out_shape[0][d] = d < nd ? a->in_shape[0][a->i[d]] : 1;
    a->out_dtype[0] = a->in_dtype[0];
    return VDEV_OK;
}

/* Transpose's copy as at most 4 output axes: axis d has n[d] elements,
 * each s[d] words apart in the input. Axes of one element are dropped and
 * neighbours that the input holds contiguously (s[d] == s[d+1] * n[d+1])
 * merged, so a permutation that moves only such runs is a few long rows;
 * the axes sit at the end of n and s, those before them n 1 and s 0. */
static void transpose_axes(const struct vdev_kernel_args *a, int64_t *n, int64_t *s)
{
    int nd = a->in_ndim[0], m = 0;
    int64_t st[VDEV_MAX_DIMS], e = 1, tn[VDEV_MAX_DIMS], ts[VDEV_MAX_DIMS];
    int64_t perm[VDEV_MAX_DIMS] = {1, 0, 2, 3};
    if (a->j[0] != 0)
        memcpy(perm, a->i, sizeof perm);
    for (int d = nd - 1; d >= 0; d--) {
        st[d] = e;
        e *= a->in_shape[0][d];
    }
    for (int d = 0; d < nd; d++) {
        int64_t len = a->in_shape[0][perm[d]], str = st[perm[d]];
        if (len == 1)
            continue;
        if (m && ts[m - 1] == str * len) {
            tn[m - 1] *= len;
            ts[m - 1] = str;
        } else {
            tn[m] = len;
            ts[m++] = str;
        }
    }
    for (int d = 0; d < VDEV_MAX_DIMS; d++) {
        int k = d - (VDEV_MAX_DIMS - m);
        n[d] = k >= 0 ? tn[k] : 1;
        s[d] = k >= 0 ? ts[k] : 0;
    }
}

/* Output element (o0, o1, o2, o3) is the input's element whose index along
 * axis perm[d] is od: the input read through its strides, permuted (perm
 * i[], or {1, 0} for arguments of the 2-D form made without the rule).
 * Where the last (merged) axis is not the input's contiguous one, the
 * output is written in tiles of TILE x TILE over that axis and the axis q
 * that is contiguous in the input (stride 1), so the tile's reads and
 * writes both stay in cache: a plain loop walks the input TILE rows apart
 * at every step, a cache miss per element on large tensors. */
#define TILE 32
KERNEL(vdev_ref_transpose)
{
    int64_t n[VDEV_MAX_DIMS], s[VDEV_MAX_DIMS], os[VDEV_MAX_DIMS], e = 1;
    if (!vdev_args_out_numel(a, 0))
        return;
    transpose_axes(a, n, s);
    for (int d = VDEV_MAX_DIMS - 1; d >= 0; d--) {
        os[d] = e;
        e *= n[d];
    }
    const uint32_t *x = a->in[0];
    uint32_t *o = a->out[0];
    int q = -1;
    for (int d = 0; d < VDEV_MAX_DIMS - 1; d++)
        if (s[d] == 1 && n[d] > 1)
            q = d;
    if (s[3] == 1 || q < 0) {
        int64_t k = 0;
        for (int64_t i0 = 0; i0 < n[0]; i0++)
            for (int64_t i1 = 0; i1 < n[1]; i1++)
                for (int64_t i2 = 0; i2 < n[2]; i2++)
                    for (int64_t i3 = 0; i3 < n[3]; i3++)
                        o[k++] = x[i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3]];
        return;
    }
    /* the two axes other than q and 3: u outer, v inner */
    int u = q == 0 ? 1 : 0, v = q == 2 ? 1 : 2;
    for (int64_t iu = 0; iu < n[u]; iu++)
        for (int64_t iv = 0; iv < n[v]; iv++) {
            const uint32_t *xb = x + iu * s[u] + iv * s[v];
            uint32_t *ob = o + iu * os[u] + iv * os[v];
            for (int64_t q0 = 0; q0 < n[q]; q0 += TILE)
                for (int64_t l0 = 0; l0 < n[3]; l0 += TILE) {
                    int64_t q1 = q0 + TILE < n[q] ? q0 + TILE : n[q];
                    int64_t l1 = l0 + TILE < n[3] ? l0 + TILE : n[3];
                    for (int64_t iq = q0; iq < q1; iq++)
                        for (int64_t l = l0; l < l1; l++)
                            ob[iq * os[q] + l] = xb[iq + l * s[3]];
                }
        }
}
#undef TILE

/* ---- gradients ---- */

static enum vdev_status status_of(const struct vdev_tens *t)
{
    if (t)
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

/* dy's elements [first, first + count) along `axis`, all of every other
 * axis: a StridedSlice of stride 1. */
static struct vdev_tens *slab(const struct vdev_tens *dy, int axis, int64_t first, int64_t count)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    for (int d = 0; d < dy->ndim; d++) {
        p.i[d] = d == axis ? (count ? first : 0) : 0;
        p.j[d] = 1;
        p.f[d] = (double)(d == axis ? count : dy->shape[d]);
    }
    return vdev_op_exec(VDEV_OP_STRIDED_SLICE, &dy, 1, &p);
}

/* Input k's gradient: its slab of dy along the axis (ConcatV2), or its
 * index of the new axis with that axis dropped by a Reshape (Pack). The
 * inputs past i[1] (the padding) get none. */
static enum vdev_status grad_join(const struct vdev_grad_args *g, struct vdev_tens **din,
                                  int pack)
{
    int axis = (int)g->p.i[0], n = (int)g->p.i[1];
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        const struct vdev_tens *x = g->in[k];
        int64_t len = pack ? 1 : x->shape[axis];
        if ((g->need >> k) & 1u) {
            struct vdev_tens *s = slab(g->dout, axis, at, len);
            if (s && pack) {
                struct vdev_op_params pr;
                memset(&pr, 0, sizeof pr);
                pr.f[0] = x->ndim;
                for (int d = 0; d < x->ndim; d++)
                    pr.i[d] = x->shape[d];
                const struct vdev_tens *in = s;
                din[k] = vdev_op_exec(VDEV_OP_RESHAPE, &in, 1, &pr);
                vdev_tens_drop(s); /* the view holds it */
            } else {
                din[k] = s;
            }
            enum vdev_status st = status_of(din[k]);
            if (st != VDEV_OK)
                return st;
        }
        at += len;
    }
    return VDEV_OK;
}

GRAD(vdev_grad_concat) { return grad_join(g, din, 0); }
GRAD(vdev_grad_pack) { return grad_join(g, din, 1); }

/* The transpose of dy by the inverse permutation (the forward parameters
 * as packed: none for the 2-D form, its own inverse). */
GRAD(vdev_grad_transpose)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    if (g->p.j[0] != 0) {
        p.j[0] = 1;
        for (int d = 0; d < g->in[0]->ndim; d++)
            p.i[g->p.i[d]] = d;
    }
    din[0] = vdev_op_exec(VDEV_OP_TRANSPOSE, &g->dout, 1, &p);
    return status_of(din[0]);
}

/* ---- the public functions ---- */

#define FAIL_NULL(...) (vdev_error(__VA_ARGS__), (vdev_tensor_t *)NULL)

/* Runs op on the n (1..4) tensors t with axis, the other inputs padded. */
static struct vdev_tens *join4(enum vdev_op op, const struct vdev_tens *const *t, int n, int axis)
{
    const struct vdev_tens *in[VDEV_KERNEL_MAX_IN];
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        in[k] = t[k < n ? k : 0];
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = axis;
    p.i[1] = n;
    return vdev_op_exec(op, in, VDEV_KERNEL_MAX_IN, &p);
}

/* t with a dimension of 1 inserted at axis: a view (Reshape). */
static struct vdev_tens *expand(const struct vdev_tens *t, int axis)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.f[0] = t->ndim + 1;
    for (int d = 0, s = 0; d <= t->ndim; d++)
        p.i[d] = d == axis ? 1 : t->shape[s++];
    return vdev_op_exec(VDEV_OP_RESHAPE, &t, 1, &p);
}

/* The n >= 1 tensors t joined along axis by op (CONCAT or PACK) as the tree
 * of the opening comment: a new tensor, or NULL with the error set. Runs of
 * one tensor are used as they are (a ConcatV2) or through a view with the
 * new axis (a Pack); the four parts are then concatenated. */
static struct vdev_tens *join(enum vdev_op op, const struct vdev_tens *const *t, int n, int axis)
{
    if (n <= VDEV_KERNEL_MAX_IN)
        return join4(op, t, n, axis);
    const struct vdev_tens *part[VDEV_KERNEL_MAX_IN];
    struct vdev_tens *made[VDEV_KERNEL_MAX_IN] = {0};
    struct vdev_tens *out = NULL;
    int at = 0, ok = 1;
    for (int g = 0; g < VDEV_KERNEL_MAX_IN; g++) {
        int m = (n - at) / (VDEV_KERNEL_MAX_IN - g); /* runs of floor or ceil n/4 */
        if (m == 1 && op == VDEV_OP_CONCAT)
            part[g] = t[at];
        else
            part[g] = made[g] = m == 1 ? expand(t[at], axis) : join(op, t + at, m, axis);
        ok &= part[g] != NULL;
        at += m;
    }
    if (ok)
        out = join4(VDEV_OP_CONCAT, part, VDEV_KERNEL_MAX_IN, axis);
    for (int g = 0; g < VDEV_KERNEL_MAX_IN; g++)
        if (made[g])
            vdev_tens_drop(made[g]);
    return out;
}

/* The tensors behind values[0..n): 0 with the error set (a dead handle) or
 * kept (a NULL one). t has n entries. */
static int lookup_all(const char *name, const vdev_tensor_t *const *values, int n,
                      const struct vdev_tens **t)
{
    for (int k = 0; k < n; k++) {
        if (!values[k])
            return 0;
        t[k] = vdev_tens_peek(values[k]);
        if (!t[k] || !vdev_tens_current(t[k])) {
            vdev_tens_input_error(values[k], name, k);
            return 0;
        }
    }
    return 1;
}

/* TensorFlow's dtype error of an eager op: every tensor has t[0]'s dtype. */
static int same_dtypes(const char *name, const struct vdev_tens *const *t, int n)
{
    for (int k = 1; k < n; k++)
        if (t[k]->dtype != t[0]->dtype) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "cannot compute %s as input #%d(zero-based) was expected to be a %s "
                       "tensor but is a %s tensor",
                       name, k, vdev_dtype_name(t[0]->dtype), vdev_dtype_name(t[k]->dtype));
            return 0;
        }
    return 1;
}

/* Shapes as TensorFlow prints them, "[2,3]". */
#define SHAPE_STR(t, buf) vdev_shape_str((t)->shape, (t)->ndim, buf, sizeof buf)

/* ConcatV2's checks, in its kernel's order and words; the axis counted
 * from 0 into *ax. 0 with the error set. */
static int concat_checks(const struct vdev_tens *const *t, int n, int axis, int *ax)
{
    int nd = t[0]->ndim, a = axis < 0 ? axis + nd : axis;
    char s0[96], sk[96];
    if (!(a >= 0 && a < nd) && axis != 0) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "ConcatOp : Expected concatenating dimensions in the range [%d, %d), but "
                   "got %d",
                   -nd, nd, axis);
        return 0;
    }
    for (int k = 0; k < n; k++) {
        if (t[k]->ndim != nd) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "ConcatOp : Ranks of all input tensors should match: shape[0] = %s vs. "
                       "shape[%d] = %s",
                       SHAPE_STR(t[0], s0), k, SHAPE_STR(t[k], sk));
            return 0;
        }
        for (int d = 0; d < nd; d++)
            if (d != a && t[k]->shape[d] != t[0]->shape[d]) {
                vdev_error(VDEV_ERR_INVALID_ARG,
                           "ConcatOp : Dimension %d in both shapes must be equal: shape[0] = "
                           "%s vs. shape[%d] = %s",
                           d, SHAPE_STR(t[0], s0), k, SHAPE_STR(t[k], sk));
                return 0;
            }
    }
    *ax = a;
    return 1;
}

/* Pack's checks: the axis (in its kernel's words), dtypes, shapes, and a
 * result within vdev's 4 dimensions. */
static int pack_checks(const struct vdev_tens *const *t, int n, int axis, int *ax)
{
    int nd = t[0]->ndim + 1, a = axis < 0 ? axis + nd : axis;
    char s0[96], sk[96];
    if (a < 0 || a >= nd) {
        vdev_error(VDEV_ERR_INVALID_ARG, "Pack: axis = %d not in [%d, %d)", axis, -nd, nd);
        return 0;
    }
    if (!same_dtypes("Pack", t, n))
        return 0;
    for (int k = 1; k < n; k++) {
        int same = t[k]->ndim == t[0]->ndim;
        for (int d = 0; same && d < t[0]->ndim; d++)
            same = t[k]->shape[d] == t[0]->shape[d];
        if (!same) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "Pack: Shapes of all inputs must match: values[0].shape = %s != "
                       "values[%d].shape = %s",
                       SHAPE_STR(t[0], s0), k, SHAPE_STR(t[k], sk));
            return 0;
        }
    }
    if (nd > VDEV_MAX_DIMS) {
        vdev_error(VDEV_ERR_UNSUPPORTED,
                   "Pack: the result would have %d dimensions; vdev tensors have at most %d", nd,
                   (int)VDEV_MAX_DIMS);
        return 0;
    }
    *ax = a;
    return 1;
}

/* ConcatV2 (stack 0) or Pack (stack 1) of values[0..n) along axis. */
static vdev_tensor_t *join_public(const vdev_tensor_t *const *values, int n, int axis, int stack)
{
    const char *name = stack ? "Pack" : "ConcatV2";
    enum vdev_op op = stack ? VDEV_OP_PACK : VDEV_OP_CONCAT;
    if (n < 1)
        return FAIL_NULL(VDEV_ERR_INVALID_ARG, "%s: n is %d (values holds n tensors, at least 1)",
                         name, n);
    if (!values)
        return FAIL_NULL(VDEV_ERR_INVALID_ARG, "%s: values is NULL with n %d", name, n);
    const struct vdev_tens *small[16], **t = small;
    if (n > 16 && !(t = vdev_malloc((size_t)n * sizeof *t)))
        return FAIL_NULL(VDEV_ERR_OOM, "%s: out of host memory for %d tensors", name, n);
    struct vdev_tens *out = NULL, *flat[16] = {0}, **v = flat;
    vdev_tensor_t *r = NULL;
    int ax = 0;
    if (!lookup_all(name, values, n, t))
        goto done;
    if (!stack && n == 1) {
        /* tf.concat of one tensor is its identity, the axis unchecked */
        out = vdev_op_exec(VDEV_OP_IDENTITY, t, 1, NULL);
        r = vdev_op_result(VDEV_OP_IDENTITY, values, 1, t, out);
        goto done;
    }
    if (stack ? !pack_checks(t, n, axis, &ax)
              : !same_dtypes(name, t, n) || !concat_checks(t, n, axis, &ax))
        goto done;
    if (!stack && t[0]->ndim == 0) {
        /* scalars along axis 0: a vector, each one viewed as [1] */
        if (n > 16 && !(v = vdev_calloc((size_t)n, sizeof *v))) {
            vdev_error(VDEV_ERR_OOM, "%s: out of host memory for %d tensors", name, n);
            goto done;
        }
        int ok = 1;
        for (int k = 0; ok && k < n; k++)
            ok = (v[k] = expand(t[k], 0)) != NULL;
        if (ok)
            out = join(op, (const struct vdev_tens *const *)v, n, 0);
        for (int k = 0; k < n; k++)
            if (v[k])
                vdev_tens_drop(v[k]);
    } else {
        out = join(op, t, n, ax);
    }
    r = vdev_op_result(op, values, n, t, out);
done:
    if (v != flat)
        free(v);
    if (t != small)
        free(t);
    return r;
}

VDEV_API vdev_tensor_t *vdev_concat(const vdev_tensor_t *const *values, int n, int axis)
{
    return join_public(values, n, axis, 0);
}

VDEV_API vdev_tensor_t *vdev_stack(const vdev_tensor_t *const *values, int n, int axis)
{
    return join_public(values, n, axis, 1);
}

VDEV_API vdev_tensor_t *vdev_transpose_perm(const vdev_tensor_t *a, const int *perm, int n)
{
    const struct vdev_tens *t = vdev_tens_peek(a);
    if (!t || !vdev_tens_current(t)) {
        if (a)
            vdev_tens_input_error(a, "Transpose", 0);
        return NULL;
    }
    if (n < 0 || (n > 0 && !perm))
        return FAIL_NULL(VDEV_ERR_INVALID_ARG, "Transpose: %s (perm has n entries, one per axis)",
                         n < 0 ? "n is negative" : "perm is NULL");
    int nd = t->ndim;
    if (n != nd)
        return FAIL_NULL(VDEV_ERR_INVALID_ARG,
                         "Transpose: transpose expects a vector of size %d. But input(1) is a "
                         "vector of size %d",
                         nd, n);
    unsigned seen = 0;
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.j[0] = 1;
    for (int d = 0; d < nd; d++) {
        if (perm[d] < 0 || perm[d] >= nd)
            return FAIL_NULL(VDEV_ERR_INVALID_ARG, "Transpose: %d is out of range [0 .. %d)",
                             perm[d], nd);
        seen |= 1u << perm[d];
        p.i[d] = perm[d];
    }
    for (int d = 0; d < nd; d++)
        if (!((seen >> d) & 1u)) {
            char list[64];
            size_t len = 0;
            for (int k = 0; k < nd; k++)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", k ? "," : "",
                                        perm[k]);
            return FAIL_NULL(VDEV_ERR_INVALID_ARG, "Transpose: %d is missing from {%s}.", d,
                             list);
        }
    return vdev_op_result(VDEV_OP_TRANSPOSE, &a, 1, &t,
                          vdev_op_exec(VDEV_OP_TRANSPOSE, &t, 1, &p));
}
