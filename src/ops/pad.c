/* pad.c — TensorFlow's tf.pad: its CONSTANT mode (the ops Pad and PadV2) and
 * its REFLECT and SYMMETRIC modes (the op MirrorPad), made of vdev's own ops.
 * Along each axis that gets padding the tensor is joined (ConcatV2) between
 * two blocks: for a constant, blocks filled with it, made where the join runs
 * (in the device scope when one is open, else on the tensor's device, as an
 * op outside any scope follows its input, so no copy crosses devices); for a
 * mirror, the tensor's own edge rows taken backwards by a StridedSlice of
 * stride -1 (REFLECT leaves the edge row out, SYMMETRIC repeats it). Axes
 * are padded one after another, each from the last one's result, so a corner
 * is the mirror of a mirror, as TensorFlow's MirrorPad fills it. The
 * result's gradient is therefore ConcatV2's and StridedSlice's (the input's
 * part of the output's gradient, plus the mirrored parts added back onto the
 * rows they came from, TensorFlow's MirrorPadGrad), every backend runs it
 * with kernels already tested, and a recording tape differentiates it like
 * any chain of ops. The shape checks are TensorFlow's Pad and MirrorPad
 * kernels', in their words after "Pad: " or "MirrorPad: "; the placement
 * log shows ConcatV2 and StridedSlice ops where TensorFlow's shows Pad or
 * MirrorPad. */
#include "ops/impl.h"
#include "runtime/placement.h"
#include "vdev/ops.h"

#include <stdint.h>
#include <string.h>

/* TensorFlow's checks of paddings against a tensor of `shape` (ndim axes),
 * shared by Pad and MirrorPad, axis by axis in its order: op names the kernel
 * ("Pad", "MirrorPad"), neg the start of its message for a negative padding
 * (the two kernels spell it differently), mirror MirrorPad's offset (1
 * REFLECT: a padding below the axis's size; 0 SYMMETRIC: at most its size;
 * -1 for Pad, no bound). */
static int check_paddings(const char *op, const char *neg, int mirror, const int64_t *shape,
                          int ndim, const int64_t *paddings, int n)
{
    if (n < 0 || (n > 0 && !paddings)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: paddings is %s and n %d", op,
                   paddings ? "given" : "NULL", n);
        return 0;
    }
    if (n != ndim) {
        char in[96];
        vdev_shape_str(shape, ndim, in, sizeof in);
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "%s: The first dimension of paddings must be the rank of inputs[%d,2], %s", op,
                   n, in);
        return 0;
    }
    for (int d = 0; d < ndim; d++) {
        int64_t b = paddings[2 * d], a = paddings[2 * d + 1];
        if (b < 0 || a < 0) {
            vdev_error(VDEV_ERR_INVALID_ARG, "%s: %s must be non-negative: %lld %lld", op, neg,
                       (long long)b, (long long)a);
            return 0;
        }
        if (mirror == 0 && (b > shape[d] || a > shape[d])) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "MirrorPad: paddings must be no greater than the dimension size: %lld, "
                       "%lld greater than %lld",
                       (long long)b, (long long)a, (long long)shape[d]);
            return 0;
        }
        if (mirror == 1 && (b >= shape[d] || a >= shape[d])) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "MirrorPad: paddings must be less than the dimension size: %lld, %lld "
                       "not less than %lld",
                       (long long)b, (long long)a, (long long)shape[d]);
            return 0;
        }
        if (b > INT64_MAX - shape[d] || a > INT64_MAX - shape[d] - b) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "%s: dimension %d of %lld padded by %lld and %lld does not fit an int64",
                       op, d, (long long)shape[d], (long long)b, (long long)a);
            return 0;
        }
    }
    return 1;
}

/* `count` rows of t along axis d, from row `first` backwards (a StridedSlice
 * of stride -1 on that axis, every other axis whole). */
static vdev_tensor_t *rows_backwards(const vdev_tensor_t *t, int ndim, int d, int64_t first,
                                     int64_t count)
{
    int64_t begin[VDEV_MAX_DIMS] = {0}, end[VDEV_MAX_DIMS] = {0}, strides[VDEV_MAX_DIMS];
    int whole = 0;
    for (int k = 0; k < ndim; k++) {
        strides[k] = 1;
        if (k != d)
            whole |= 1 << k;
    }
    strides[d] = -1;
    begin[d] = first;
    end[d] = first - count;
    /* an end of -1 would count from the axis's end: run to its start instead */
    int end_mask = whole | (end[d] < 0 ? 1 << d : 0);
    return vdev_strided_slice(t, ndim, begin, end, strides, whole, end_mask, 0, 0, 0);
}

/* What goes around the tensor: `value` (mirror -1, Pad), or the tensor's own
 * rows mirrored at its edge (mirror 1 REFLECT, the edge row left out; 0
 * SYMMETRIC, repeated). */
struct fill {
    int mirror;
    enum vdev_dtype dtype;
    double value;
};

/* The block of `count` entries along axis d before (side 0) or after
 * (side 1) t, whose shape is `shape`. */
static vdev_tensor_t *block(const vdev_tensor_t *t, const int64_t *shape, int ndim, int d,
                            int side, int64_t count, const struct fill *f)
{
    if (f->mirror < 0) {
        int64_t s[VDEV_MAX_DIMS];
        memcpy(s, shape, sizeof s);
        s[d] = count;
        return vdev_tensor_fill(s, ndim, f->dtype, f->value);
    }
    int64_t first = side ? shape[d] - 1 - f->mirror : count - 1 + f->mirror;
    return rows_backwards(t, ndim, d, first, count);
}

/* t joined between its blocks along axis d: before and after entries of
 * that axis (at least one of them above 0). */
static vdev_tensor_t *pad_axis(const vdev_tensor_t *t, const int64_t *shape, int ndim, int d,
                               int64_t before, int64_t after, const struct fill *f)
{
    const vdev_tensor_t *parts[3];
    vdev_tensor_t *blocks[2] = {NULL, NULL};
    int n = 0;
    if (before > 0) {
        if (!(blocks[0] = block(t, shape, ndim, d, 0, before, f)))
            return NULL;
        parts[n++] = blocks[0];
    }
    parts[n++] = t;
    if (after > 0) {
        if (!(blocks[1] = block(t, shape, ndim, d, 1, after, f))) {
            vdev_tensor_free(blocks[0]);
            return NULL;
        }
        parts[n++] = blocks[1];
    }
    vdev_tensor_t *out = vdev_concat(parts, n, d);
    vdev_tensor_free(blocks[0]);
    vdev_tensor_free(blocks[1]);
    return out;
}

/* Both pads once their paddings are checked: each padded axis in turn, each
 * from the last one's result; the blocks made where the joins run (the
 * scope's device, else t's). No padding anywhere gives a new tensor all the
 * same, as TensorFlow's Pad gives one (Identity: a copy a later write to t
 * leaves as it was). */
static vdev_tensor_t *pad_all(const vdev_tensor_t *t, const int64_t *tshape, int ndim,
                              const int64_t *paddings, const struct fill *f)
{
    int64_t shape[VDEV_MAX_DIMS];
    memcpy(shape, tshape, sizeof shape);
    int pushed = 0;
    if (!vdev_placement_scope_device()) {
        if (vdev_device_push(vdev_tensor_device(t)) != VDEV_OK)
            return NULL;
        pushed = 1;
    }
    vdev_tensor_t *cur = NULL; /* the last join, this call's own */
    int padded = 0;
    for (int d = 0; d < ndim; d++) {
        int64_t b = paddings[2 * d], a = paddings[2 * d + 1];
        if (b == 0 && a == 0)
            continue;
        padded = 1;
        vdev_tensor_t *next = pad_axis(cur ? cur : t, shape, ndim, d, b, a, f);
        vdev_tensor_free(cur);
        cur = next;
        if (!cur)
            break;
        shape[d] += b + a;
    }
    if (pushed)
        vdev_device_pop();
    return padded ? cur : vdev_identity(t);
}

VDEV_API vdev_tensor_t *vdev_pad(const vdev_tensor_t *t, const int64_t *paddings, int n,
                                 double value)
{
    if (!t)
        return NULL;
    const struct vdev_tens *x = vdev_tens_use(t, "vdev_pad");
    if (!x)
        return NULL;
    int64_t shape[VDEV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    struct fill f = {.mirror = -1, .dtype = x->dtype, .value = value};
    if (!check_paddings("Pad", "Paddings", -1, shape, x->ndim, paddings, n))
        return NULL;
    return pad_all(t, shape, x->ndim, paddings, &f);
}

VDEV_API vdev_tensor_t *vdev_mirror_pad(const vdev_tensor_t *t, const int64_t *paddings, int n,
                                        const char *mode)
{
    if (!t)
        return NULL;
    const struct vdev_tens *x = vdev_tens_use(t, "vdev_mirror_pad");
    if (!x)
        return NULL;
    struct fill f = {.dtype = x->dtype};
    if (!mode) {
        vdev_error(VDEV_ERR_INVALID_ARG, "MirrorPad: mode is NULL");
        return NULL;
    }
    if (strcmp(mode, "REFLECT") == 0) {
        f.mirror = 1;
    } else if (strcmp(mode, "SYMMETRIC") == 0) {
        f.mirror = 0;
    } else {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "MirrorPad: Value for attr 'mode' of \"%.64s\" is not in the list of allowed "
                   "values: \"REFLECT\", \"SYMMETRIC\"",
                   mode);
        return NULL;
    }
    int64_t shape[VDEV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    if (!check_paddings("MirrorPad", "paddings", f.mirror, shape, x->ndim, paddings, n))
        return NULL;
    return pad_all(t, shape, x->ndim, paddings, &f);
}
