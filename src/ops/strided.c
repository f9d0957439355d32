/* strided.c — TensorFlow's StridedSlice, the op behind tf.strided_slice and
 * Python's x[1:, ::2, None, ..., -1]: its rules for turning begin, end,
 * strides and the five masks into one range per input axis (an ellipsis
 * stands for the axes no entry names, a new axis adds a dimension of 1, a
 * shrunk axis takes one index and drops its dimension, a masked begin or end
 * is the whole axis in the stride's direction, negative indices count from
 * the end and the rest is clamped to the axis, as TensorFlow's
 * ValidateStridedSliceOp does, with its error texts), the shape rules and
 * reference kernels of the op and of its gradient StridedSliceGrad (zeros of
 * the input's shape with the output's gradient where the slice took its
 * elements) and of StridedSliceGradAdd (that gradient added in place to a
 * sum, for the tape), the gradient, and the public function. The op itself sees only
 * the canonical form, one range per input axis (first index i[d], stride
 * j[d], count f[d]), and keeps the input's rank; the public function views
 * its result through a Reshape when axes are shrunk or added. Elements are
 * moved as 4-byte words, so int32 tensors slice as float ones do. */
#include "ops/impl.h"

#include <string.h>

/* ---- the op: one range per axis ---- */

/* Whether `n` indices from b by s stay inside [0, dim): n - 1 steps of |s|
 * fit between b and the end the stride runs to (no product that could
 * overflow). */
static int range_inside(int64_t dim, int64_t b, int64_t s, int64_t n)
{
    if (s == 0 || n < 0)
        return 0;
    if (n == 0)
        return 1;
    if (b < 0 || b >= dim)
        return 0;
    if (n == 1)
        return 1;
    if (s == INT64_MIN)
        return 0;
    int64_t room = s > 0 ? dim - 1 - b : b, step = s > 0 ? s : -s;
    return n - 1 <= room / step;
}

/* The ranges of input k's axes in four dimensions, its axes last (so the
 * innermost loop runs along its last axis): count, first, stride, and the
 * elements per index; 1, 0, 1 for the axes before its first. */
static void ranges(const struct vdev_kernel_args *a, int k, int64_t n[4], int64_t b[4],
                   int64_t s[4], int64_t step[4])
{
    _Static_assert(VDEV_MAX_DIMS == 4, "the kernels work in four dimensions");
    int off = 4 - a->in_ndim[k];
    int64_t e = 1;               /* elements per index of axis d in input k's layout */
    for (int d = 3; d >= 0; d--) {
        int r = d - off; /* input k's axis, negative before its first */
        n[d] = r >= 0 ? (int64_t)a->f[r] : 1;
        b[d] = r >= 0 ? a->i[r] : 0;
        s[d] = r >= 0 ? a->j[r] : 1;
        step[d] = e;
        e *= r >= 0 ? a->in_shape[k][r] : 1;
    }
}

/* Whether the parameters describe a range inside every axis of input k. */
static int params_ok(const struct vdev_kernel_args *a, int k)
{
    for (int d = 0; d < a->in_ndim[k]; d++) {
        double c = a->f[d];
        if (!(c >= 0 && c <= 9.0e15) || (double)(int64_t)c != c ||
            !range_inside(a->in_shape[k][d], a->i[d], a->j[d], (int64_t)c))
            return 0;
    }
    return 1;
}

/* STRIDED_SLICE (x of any dtype) -> x's rank, the counts as its shape. */
enum vdev_status vdev_shape_strided_slice(struct vdev_kernel_args *a)
{
    if (!params_ok(a, 0))
        return vdev_shape_error(a, "each axis's first index, stride and count must stay "
                                   "inside the axis");
    int nd = a->in_ndim[0];
    a->n_out = 1;
    a->out_ndim[0] = nd;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        a->out_shape[0][d] = d < nd ? (int64_t)a->f[d] : 1;
    a->out_dtype[0] = a->in_dtype[0];
    return VDEV_OK;
}

/* STRIDED_SLICE_GRAD (dy f32, like x) -> x's shape, f32: dy's shape is the
 * counts of the ranges inside x's axes. */
enum vdev_status vdev_shape_strided_slice_grad(struct vdev_kernel_args *a)
{
    if (a->in_dtype[0] != VDEV_F32)
        return vdev_dtype_error(a, 0, VDEV_F32);
    int nd = a->in_ndim[1], fits = a->in_ndim[0] == nd && params_ok(a, 1);
    for (int d = 0; fits && d < nd; d++)
        fits = a->in_shape[0][d] == (int64_t)a->f[d];
    if (!fits)
        return vdev_shape_error(a, "the gradient of a strided slice must have the slice's "
                                   "shape, inside the input's");
    a->n_out = 1;
    a->out_ndim[0] = nd;
    memcpy(a->out_shape[0], a->in_shape[1], sizeof a->out_shape[0]);
    a->out_dtype[0] = VDEV_F32;
    return VDEV_OK;
}

/* STRIDED_SLICE_GRAD_ADD (acc f32, dy f32), in place: dy has the slice's
 * shape, its ranges inside acc's axes. */
enum vdev_status vdev_shape_strided_slice_grad_add(struct vdev_kernel_args *a)
{
    for (int k = 0; k < 2; k++)
        if (a->in_dtype[k] != VDEV_F32)
            return vdev_dtype_error(a, k, VDEV_F32);
    int nd = a->in_ndim[0], fits = a->in_ndim[1] == nd && params_ok(a, 0);
    for (int d = 0; fits && d < nd; d++)
        fits = a->in_shape[1][d] == (int64_t)a->f[d];
    if (!fits)
        return vdev_shape_error(a, "the gradient added must have the slice's shape, inside the "
                                   "sum's");
    a->n_out = 0;
    return VDEV_OK;
}

/* Visits the slice's rows (its last axis) in the output's row-major order:
 * the row at word `o` of the output starts at word `x` of the input and
 * takes `len` words `dx` apart (none when the slice is empty). */
#define FOR_EACH_ROW(a, k, BODY)                                                                   \
    do {                                                                                           \
        int64_t n_[4], b_[4], s_[4], st_[4], o = 0;                                                \
        ranges(a, k, n_, b_, s_, st_);                                                             \
        const int64_t len = n_[3], dx = s_[3] * st_[3];                                            \
        for (int64_t i0 = 0; len && i0 < n_[0]; i0++)                                              \
            for (int64_t i1 = 0; i1 < n_[1]; i1++)                                                 \
                for (int64_t i2 = 0; i2 < n_[2]; i2++, o += len) {                                 \
                    const int64_t x = (b_[0] + i0 * s_[0]) * st_[0] +                              \
                                      (b_[1] + i1 * s_[1]) * st_[1] +                              \
                                      (b_[2] + i2 * s_[2]) * st_[2] + b_[3] * st_[3];              \
                    BODY;                                                                          \
                }                                                                                  \
    } while (0)

/* Rows of stride 1 are one memcpy each (x[1:], x[:, 2:5], x[::2] of a
 * matrix); the others word by word. */
KERNEL(vdev_ref_strided_slice)
{
    const uint32_t *in = a->in[0];
    uint32_t *out = a->out[0];
    FOR_EACH_ROW(a, 0, {
        if (dx == 1)
            memcpy(out + o, in + x, (size_t)len * sizeof *out);
        else
            for (int64_t c = 0; c < len; c++)
                out[o + c] = in[x + c * dx];
    });
}

/* Zeros of x's shape, then each element of dy where the slice took it (the
 * ranges never take an element twice: every stride is non-zero). */
KERNEL(vdev_ref_strided_slice_grad)
{
    const float *dy = a->in[0];
    float *out = a->out[0];
    int64_t all = vdev_args_numel(a, 1);
    if (all)
        memset(out, 0, (size_t)all * sizeof(float));
    FOR_EACH_ROW(a, 1, {
        if (dx == 1)
            memcpy(out + x, dy + o, (size_t)len * sizeof *out);
        else
            for (int64_t c = 0; c < len; c++)
                out[x + c * dx] = dy[o + c];
    });
}

/* acc += dy where the slice took its elements, each sum one float addition,
 * as AddV2 rounds it (the elements outside unchanged, where AddV2 of the
 * StridedSliceGrad would add +0, which turns a -0 into +0). */
KERNEL(vdev_ref_strided_slice_grad_add)
{
    const float *dy = a->in[1];
    float *acc = a->out[0];
    FOR_EACH_ROW(a, 0, {
        for (int64_t c = 0; c < len; c++)
            acc[x + c * dx] = acc[x + c * dx] + dy[o + c];
    });
}

/* x's gradient: dy put back where the slice took it, zeros elsewhere; runs
 * where the slice ran, with its ranges. */
GRAD(vdev_grad_strided_slice)
{
    const struct vdev_tens *in[2] = {g->dout, g->in[0]};
    din[0] = vdev_op_exec(VDEV_OP_STRIDED_SLICE_GRAD, in, 2, &g->p);
    if (din[0])
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

/* ---- TensorFlow's rules: the sparse spec to one range per axis ---- */

#define MAX_SPEC 32 /* TensorFlow's masks are 32-bit */
enum { AXIS_NEW = -2, AXIS_SHRUNK = -1 };

struct spec {
    int nd;                        /* the input's rank */
    int64_t b[4], e[4], s[4];      /* per input axis, TensorFlow's dense spec */
    unsigned bmask, emask, shrink; /* per input axis */
    int n_final;                   /* the result's dimensions: */
    int final[MAX_SPEC + 4];       /* an input axis, AXIS_NEW or AXIS_SHRUNK */
};

/* The error, and what a failed call returns. */
#define FAIL_NULL(...) (vdev_error(__VA_ARGS__), (vdev_tensor_t *)NULL)
#define FAIL_INT(...) (vdev_error(__VA_ARGS__), -1)

/* TensorFlow's BuildDenseSpec: the entries to one per input axis, the
 * ellipsis (one at the end when none is given) standing for every axis that
 * no other entry names. 0, or -1 with the error set. */
static int dense_spec(struct spec *sp, int n, const int64_t *begin, const int64_t *end,
                      const int64_t *strides, unsigned bm, unsigned em, unsigned ell,
                      unsigned newax, unsigned shr)
{
    int n_sparse = n, after_ellipsis = 0, seen = 0;
    for (int i = 0; i < n; i++) {
        if (seen && ((newax >> i) & 1u))
            after_ellipsis++;
        seen |= (ell >> i) & 1u;
    }
    if (!seen)
        ell |= 1u << n_sparse++; /* n < 32: the bit exists */
    int full = 0;
    for (int i = 0; i < n_sparse; i++) {
        if ((ell >> i) & 1u) {
            int next = sp->nd - (n_sparse - i) + 1 + after_ellipsis;
            if (next > sp->nd)
                next = sp->nd;
            for (; full < next; full++) {
                sp->b[full] = sp->e[full] = 0;
                sp->s[full] = 1;
                sp->bmask |= 1u << full;
                sp->emask |= 1u << full;
                sp->final[sp->n_final++] = full;
            }
        } else if ((newax >> i) & 1u) {
            sp->final[sp->n_final++] = AXIS_NEW;
        } else {
            if (full == sp->nd && sp->nd == 0) /* TensorFlow's own words for a scalar */
                return FAIL_INT(VDEV_ERR_INVALID_ARG,
                                "StridedSlice: Attempting to slice scalar input.");
            if (full == sp->nd)
                return FAIL_INT(VDEV_ERR_INVALID_ARG,
                                "StridedSlice: Index out of range using input dim %d; input has "
                                "only %d dims",
                                full, sp->nd);
            sp->b[full] = begin[i];
            sp->e[full] = end[i];
            sp->s[full] = strides ? strides[i] : 1;
            sp->bmask |= ((bm >> i) & 1u) << full;
            sp->emask |= ((em >> i) & 1u) << full;
            if ((shr >> i) & 1u) {
                sp->shrink |= 1u << full;
                sp->final[sp->n_final++] = AXIS_SHRUNK;
            } else {
                sp->final[sp->n_final++] = full;
            }
            full++;
        }
    }
    return 0;
}

/* TensorFlow's canonical index: a masked end of the range in the stride's
 * direction, else the index counted from the end when negative and clamped
 * to [0, dim] (stride > 0) or [-1, dim - 1] (stride < 0). */
static int64_t canonical(int64_t x, int masked, int is_end, int64_t s, int64_t dim)
{
    int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? dim : dim - 1;
    if (masked)
        return (s > 0) == !!is_end ? hi : lo;
    int64_t fwd = x < 0 ? dim + x : x; /* dim >= 0: no overflow */
    return fwd < lo ? lo : fwd > hi ? hi : fwd;
}

/* Axis d's first index, stride and count into p (TensorFlow's step 3). */
static int axis_range(struct spec *sp, int d, int64_t dim, struct vdev_op_params *p)
{
    int64_t s = sp->s[d], b, e;
    if (s == 0)
        return FAIL_INT(VDEV_ERR_INVALID_ARG, "StridedSlice: strides[%d] must be non-zero", d);
    if ((sp->shrink >> d) & 1u) {
        if (s < 0)
            return FAIL_INT(VDEV_ERR_INVALID_ARG,
                            "StridedSlice: only stride 1 allowed on non-range indexing.");
        b = sp->b[d];
        int64_t fwd = b < 0 ? dim + b : b; /* dim >= 0: no overflow; printed so, as there */
        if (fwd < 0 || fwd >= dim)
            return FAIL_INT(VDEV_ERR_INVALID_ARG,
                            "StridedSlice: slice index %lld of dimension %d out of bounds.",
                            (long long)fwd, d);
        p->i[d] = fwd;
        p->j[d] = 1;
        p->f[d] = 1;
        return 0;
    }
    b = canonical(sp->b[d], (sp->bmask >> d) & 1u, 0, s, dim);
    e = canonical(sp->e[d], (sp->emask >> d) & 1u, 1, s, dim);
    int64_t len = e - b, n; /* both in [-1, dim]: no overflow */
    if (len == 0 || (len < 0) != (s < 0))
        n = 0;
    else
        n = len / s + (len % s != 0);
    p->i[d] = n ? b : 0;
    p->j[d] = n > 1 ? s : 1; /* one element or none: the stride does not matter */
    p->f[d] = (double)n;
    return 0;
}

VDEV_API vdev_tensor_t *vdev_strided_slice(const vdev_tensor_t *a, int n, const int64_t *begin,
                                           const int64_t *end, const int64_t *strides,
                                           int begin_mask, int end_mask, int ellipsis_mask,
                                           int new_axis_mask, int shrink_axis_mask)
{
    const struct vdev_tens *t = vdev_tens_peek(a);
    if (!t || !vdev_tens_current(t)) {
        if (a)
            vdev_tens_input_error(a, "StridedSlice", 0);
        return NULL;
    }
    if (n < 0)
        return FAIL_NULL(VDEV_ERR_INVALID_ARG,
                         "StridedSlice: n is %d (begin, end and strides have n entries, 0 to %d)",
                         n, MAX_SPEC - 1);
    if (n >= MAX_SPEC)
        return FAIL_NULL(VDEV_ERR_INVALID_ARG,
                         "StridedSlice: Expected begin, end, and strides to be 1D equal size "
                         "tensors, but got shapes [%d], [%d], and [%d] instead.",
                         n, n, n);
    if (n > 0 && (!begin || !end))
        return FAIL_NULL(VDEV_ERR_INVALID_ARG, "StridedSlice: %s is NULL with n %d",
                         !begin ? "begin" : "end", n);
    /* the whole mask, bits past the entries too, as TensorFlow checks it */
    unsigned ell = (unsigned)ellipsis_mask;
    if (ell & (ell - 1u))
        return FAIL_NULL(VDEV_ERR_INVALID_ARG,
                         "StridedSlice: Multiple ellipses in slice spec not allowed");
    ell &= (1u << n) - 1u;
    struct spec sp;
    memset(&sp, 0, sizeof sp);
    sp.nd = t->ndim;
    if (dense_spec(&sp, n, begin, end, strides, (unsigned)begin_mask, (unsigned)end_mask, ell,
                   (unsigned)new_axis_mask, (unsigned)shrink_axis_mask) != 0)
        return NULL;
    struct vdev_op_params p, pr;
    memset(&p, 0, sizeof p);
    memset(&pr, 0, sizeof pr);
    int64_t final_shape[MAX_SPEC + 4];
    int n_final = 0;
    for (int d = 0; d < sp.nd; d++)
        if (axis_range(&sp, d, t->shape[d], &p) != 0)
            return NULL;
    for (int k = 0; k < sp.n_final; k++)
        if (sp.final[k] != AXIS_SHRUNK)
            final_shape[n_final++] = sp.final[k] == AXIS_NEW ? 1 : (int64_t)p.f[sp.final[k]];
    if (n_final > VDEV_MAX_DIMS)
        return FAIL_NULL(VDEV_ERR_UNSUPPORTED,
                         "StridedSlice: the result would have %d dimensions; vdev tensors have "
                         "at most %d",
                         n_final, (int)VDEV_MAX_DIMS);
    int same = n_final == sp.nd;
    for (int d = 0; same && d < n_final; d++)
        same = sp.final[d] == d;
    struct vdev_tens *s = vdev_op_exec(VDEV_OP_STRIDED_SLICE, &t, 1, &p), *r = s;
    if (s && !same) {
        pr.f[0] = n_final;
        for (int d = 0; d < n_final; d++)
            pr.i[d] = final_shape[d];
        const struct vdev_tens *in = s;
        r = vdev_op_exec(VDEV_OP_RESHAPE, &in, 1, &pr);
        vdev_tens_drop(s); /* the view holds it */
    }
    return vdev_op_result(VDEV_OP_STRIDED_SLICE, &a, 1, &t, r);
}
