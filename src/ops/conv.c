/* conv.c — 2-D convolution and pooling as TensorFlow has them: the shape
 * rules of Conv2D, MaxPool, AvgPool and their gradient ops, the window
 * geometry the kernels share, and the public functions. Layouts are
 * TensorFlow's defaults: input NHWC [N,H,W,C] float, filter HWIO
 * [KH,KW,C,O]. Each spatial dimension's output size and padding follow
 * TensorFlow's GetWindowedOutputSizeVerbose: VALID gives
 * (in - k + s) / s, SAME gives ceil(in / s) with the padding it needs,
 * max(0, (out - 1) s + k - in), split pad_before = total / 2 and the odd one
 * after (bottom, right). An output of size 0 is an empty tensor, as there; a
 * negative one is TensorFlow's error. A dilated convolution (TensorFlow's
 * dilations: d - 1 skipped cells between a filter's taps) takes the window's
 * effective size, (k - 1) d + 1, in those rules, as TensorFlow does.
 * Parameters: the convolutions carry the strides in i[0], i[1], the
 * determinism switch (for the fast kernels) in i[3] and the dilations in
 * j[0], j[1] (0 reads as 1: an op made without them); the pools the window
 * in i[0], i[1] and the strides in i[2], i[3]; all carry the padding in f[0]
 * (VDEV_PAD_VALID, VDEV_PAD_SAME). The kernels
 * are in conv_kernels.c (the reference) and conv_fast.c, the gradients in
 * conv_grads.c. */
#include "ops/impl.h"
#include "config/config.h"

#include <stdint.h>
#include <string.h>

/* ---- geometry ---- */

static int is_conv(int op)
{
    return op == VDEV_OP_CONV2D || op == VDEV_OP_CONV2D_BACKPROP_INPUT ||
           op == VDEV_OP_CONV2D_BACKPROP_FILTER;
}

/* A convolution's dilation along dimension d (0: rows, 1: columns): j[d],
 * where 0 (an op made without dilations) reads as 1; the pools have none. */
static int64_t dilation(const struct vdev_kernel_args *a, int d)
{
    return is_conv(a->op) && a->j[d] > 1 ? a->j[d] : 1;
}

/* The window's effective size, (k - 1) dil + 1, or -1 where it does not fit
 * an int64 (impl.h). */
int64_t vdev_conv_effective(int64_t k, int64_t dil)
{
    if (k <= 0 || dil <= 1)
        return k;
    return k - 1 > (INT64_MAX - 1) / dil ? -1 : (k - 1) * dil + 1;
}

enum vdev_status vdev_conv_effective_of(const char *name, int64_t k, int64_t dil, int64_t *e)
{
    if ((*e = vdev_conv_effective(k, dil)) < 0)
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: the dilated filter's size, (%lld - 1) * %lld + 1, does not fit "
                          "an int64",
                          name, (long long)k, (long long)dil);
    return VDEV_OK;
}

/* One dimension, TensorFlow's rule: VDEV_OK with *out, *before; else the
 * error in TensorFlow's words after the op's name (impl.h). */
enum vdev_status vdev_conv_windowed(const char *name, int64_t in, int64_t k, int64_t s, int same,
                                    int64_t *out, int64_t *before)
{
    if (s <= 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: Stride must be > 0, but got %lld", name,
                          (long long)s);
    /* TensorFlow's (in + s - 1) / s and (in - k + s) / s (C's division,
     * which truncates toward zero), computed so that no sum passes
     * INT64_MAX: a dimension may be that large in an empty tensor. */
    if (same) {
        *out = in / s + (in % s != 0);
        /* (out - 1) s < in, so this is (out - 1) s + k - in without overflow */
        int64_t need = ((*out - 1) * s - in) + k;
        *before = need > 0 ? need / 2 : 0;
    } else {
        *out = in >= k ? (in - k) / s + 1 : (s - (k - in)) / s;
        *before = 0;
    }
    if (*out < 0)
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: Computed output size would be negative: %lld [input_size: %lld, "
                          "effective_filter_size: %lld, stride: %lld]",
                          name, (long long)*out, (long long)in, (long long)k, (long long)s);
    return VDEV_OK;
}

/* Rows and columns of a window op's output (impl.h): both effective
 * windows, refused where one passes INT64_MAX, then TensorFlow's rule for
 * each dimension. */
enum vdev_status vdev_conv_out_hw(const char *name, const int64_t *in_hw, const int64_t *k,
                                  const int64_t *dil, const int64_t *s, int same, int64_t *out)
{
    int64_t e[2];
    enum vdev_status est;
    for (int d = 0; d < 2; d++)
        if ((est = vdev_conv_effective_of(name, k[d], dil[d], &e[d])) != VDEV_OK)
            return est;
    for (int d = 0; d < 2; d++) {
        int64_t before;
        enum vdev_status st = vdev_conv_windowed(name, in_hw[d], e[d], s[d], same, &out[d],
                                                 &before);
        if (st != VDEV_OK)
            return st;
    }
    return VDEV_OK;
}

void vdev_conv_geom_of(const struct vdev_kernel_args *a, struct vdev_conv_geom *g)
{
    memset(g, 0, sizeof *g);
    g->n = a->in_shape[0][0];
    g->h = a->in_shape[0][1];
    g->w = a->in_shape[0][2];
    g->c = a->in_shape[0][3];
    int same = a->f[0] == VDEV_PAD_SAME;
    if (is_conv(a->op)) {
        g->kh = a->in_shape[1][0];
        g->kw = a->in_shape[1][1];
        g->o = a->in_shape[1][3];
        g->sh = a->i[0];
        g->sw = a->i[1];
    } else {
        g->kh = a->i[0];
        g->kw = a->i[1];
        g->o = g->c;
        g->sh = a->i[2];
        g->sw = a->i[3];
    }
    g->dh = dilation(a, 0);
    g->dw = dilation(a, 1);
    /* checked by the shape rule: no error here */
    int64_t eh = vdev_conv_effective(g->kh, g->dh), ew = vdev_conv_effective(g->kw, g->dw);
    (void)vdev_conv_windowed("", g->h, eh, g->sh, same, &g->oh, &g->pt);
    (void)vdev_conv_windowed("", g->w, ew, g->sw, same, &g->ow, &g->pl);
}

/* ---- shape rules ---- */

static enum vdev_status all_f32(const struct vdev_kernel_args *a)
{
    for (int k = 0; k < a->n_in; k++)
        if (a->in_dtype[k] != VDEV_F32)
            return vdev_dtype_error(a, k, VDEV_F32);
    return VDEV_OK;
}

static void out4(struct vdev_kernel_args *a, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    a->n_out = 1;
    a->out_ndim[0] = 4;
    a->out_shape[0][0] = d0;
    a->out_shape[0][1] = d1;
    a->out_shape[0][2] = d2;
    a->out_shape[0][3] = d3;
    a->out_dtype[0] = VDEV_F32;
}

static void out_like(struct vdev_kernel_args *a, int k)
{
    out4(a, a->in_shape[k][0], a->in_shape[k][1], a->in_shape[k][2], a->in_shape[k][3]);
}

static enum vdev_status check_padding(const struct vdev_kernel_args *a)
{
    if (a->f[0] != VDEV_PAD_VALID && a->f[0] != VDEV_PAD_SAME)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: padding code %g is neither VALID (%d) nor "
                          "SAME (%d)", vdev_op_defs[a->op].name, a->f[0], VDEV_PAD_VALID,
                          VDEV_PAD_SAME);
    return VDEV_OK;
}

/* The forward output [N,OH,OW,O] from input 0 (x) and the window (input 1's
 * filter for the convolutions, i[0..1] for the pools), every check made,
 * each refusal in the words of TensorFlow's kernel for the op (which calls
 * the pools' input tensor_in). */
static enum vdev_status forward_shape(const struct vdev_kernel_args *a, int64_t *shape)
{
    const char *name = vdev_op_defs[a->op].name;
    char s[2][96];
    vdev_shape_str(a->in_shape[0], a->in_ndim[0], s[0], sizeof s[0]);
    vdev_shape_str(a->in_shape[1], a->in_ndim[1], s[1], sizeof s[1]);
    enum vdev_status st = check_padding(a);
    if (st != VDEV_OK)
        return st;
    int conv = is_conv(a->op);
    int64_t kh, kw, sh, sw, o;
    if (conv) {
        if (a->in_ndim[0] != 4)
            return vdev_error(VDEV_ERR_SHAPE, "%s: input must be 4-dimensional%s", name, s[0]);
        if (a->in_ndim[1] != 4)
            return vdev_error(VDEV_ERR_SHAPE, "%s: filter must be 4-dimensional: %s", name, s[1]);
        kh = a->in_shape[1][0];
        kw = a->in_shape[1][1];
        o = a->in_shape[1][3];
        sh = a->i[0];
        sw = a->i[1];
        int64_t cin = a->in_shape[0][3], cf = a->in_shape[1][2];
        if (cf <= 0)
            return vdev_error(VDEV_ERR_SHAPE, "%s: filter depth must be stricly positive, got %lld",
                              name, (long long)cf);
        if (cin % cf)
            return vdev_error(VDEV_ERR_SHAPE,
                              "%s: input depth must be evenly divisible by filter depth: %lld vs "
                              "%lld", name, (long long)cin, (long long)cf);
        if (cin != cf)
            return vdev_error(VDEV_ERR_UNSUPPORTED,
                              "%s: grouped convolution (input depth %lld, filter depth %lld) is "
                              "not supported: the filter's depth must be the input's",
                              name, (long long)cin, (long long)cf);
        if (kh <= 0 || kw <= 0)
            return vdev_error(VDEV_ERR_SHAPE, "%s: filter %s has a window of size 0", name, s[1]);
    } else {
        if (a->in_ndim[0] != 4)
            return vdev_error(VDEV_ERR_SHAPE, "%s: tensor_in must be 4-dimensional", name);
        kh = a->i[0];
        kw = a->i[1];
        sh = a->i[2];
        sw = a->i[3];
        o = a->in_shape[0][3];
        for (int d = 0; d < 2; d++) {
            int64_t k = d ? kw : kh;
            if (k <= 0)
                return vdev_error(VDEV_ERR_INVALID_ARG,
                                  "%s: Sliding window ksize for dimension %d was zero.", name,
                                  d + 1);
        }
    }
    if (conv && (a->j[0] < 0 || a->j[1] < 0))
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: Dilated rates should be larger than 0.",
                          name);
    const int64_t k[2] = {kh, kw}, dil[2] = {dilation(a, 0), dilation(a, 1)}, s2[2] = {sh, sw};
    int64_t out[2] = {0, 0};
    if ((st = vdev_conv_out_hw(name, a->in_shape[0] + 1, k, dil, s2,
                               a->f[0] == VDEV_PAD_SAME, out)) != VDEV_OK)
        return st;
    shape[0] = a->in_shape[0][0];
    shape[1] = out[0];
    shape[2] = out[1];
    shape[3] = o;
    return VDEV_OK;
}

/* Input k (the output's gradient) must have the forward output's shape. */
static enum vdev_status check_dy(const struct vdev_kernel_args *a, int k, const int64_t *want)
{
    int same = a->in_ndim[k] == 4;
    for (int d = 0; same && d < 4; d++)
        same = a->in_shape[k][d] == want[d];
    if (same)
        return VDEV_OK;
    char s[96], w[96];
    vdev_shape_str(a->in_shape[k], a->in_ndim[k], s, sizeof s);
    vdev_shape_str(want, 4, w, sizeof w);
    return vdev_error(VDEV_ERR_SHAPE,
                      "%s: out_backprop has shape %s, not the computed output shape %s",
                      vdev_op_defs[a->op].name, s, w);
}

/* CONV2D (x, filter) -> [N,OH,OW,O]; MAX_POOL, AVG_POOL (x) -> [N,OH,OW,C]. */
enum vdev_status vdev_shape_conv(struct vdev_kernel_args *a)
{
    enum vdev_status st = all_f32(a);
    int64_t shape[4];
    if (st != VDEV_OK || (st = forward_shape(a, shape)) != VDEV_OK)
        return st;
    out4(a, shape[0], shape[1], shape[2], shape[3]);
    if (is_conv(a->op))
        a->i[3] = vdev_deterministic(); /* the fast kernels' products (conv_fast.c) */
    return VDEV_OK;
}

/* The gradient ops: CONV2D_BACKPROP_INPUT (x, filter, dy) -> x's shape,
 * CONV2D_BACKPROP_FILTER (x, filter, dy) -> filter's shape, MAX_POOL_GRAD
 * (x, y, dy) -> x's shape, AVG_POOL_GRAD (x, dy) -> x's shape. x and the
 * filter of the backprops give only their shapes where their values are not
 * needed (the input's gradient reads the filter, the filter's the input). */
enum vdev_status vdev_shape_conv_grad(struct vdev_kernel_args *a)
{
    enum vdev_status st = all_f32(a);
    int64_t shape[4];
    if (st != VDEV_OK || (st = forward_shape(a, shape)) != VDEV_OK)
        return st;
    if (is_conv(a->op))
        a->i[3] = vdev_deterministic(); /* as for Conv2D: the fast kernels' products */
    switch (a->op) {
    case VDEV_OP_CONV2D_BACKPROP_INPUT:
        st = check_dy(a, 2, shape);
        out_like(a, 0);
        break;
    case VDEV_OP_CONV2D_BACKPROP_FILTER:
        st = check_dy(a, 2, shape);
        out_like(a, 1);
        break;
    case VDEV_OP_MAX_POOL_GRAD:
        if ((st = check_dy(a, 1, shape)) == VDEV_OK)
            st = check_dy(a, 2, shape);
        out_like(a, 0);
        break;
    default: /* AVG_POOL_GRAD */
        st = check_dy(a, 1, shape);
        out_like(a, 0);
        break;
    }
    return st;
}

/* ---- the public functions ---- */

static int padding_code(const char *op, const char *padding, double *code)
{
    if (padding && strcmp(padding, "SAME") == 0) {
        *code = VDEV_PAD_SAME;
        return 1;
    }
    if (padding && strcmp(padding, "VALID") == 0) {
        *code = VDEV_PAD_VALID;
        return 1;
    }
    if (padding)
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "%s: Value for attr 'padding' of \"%s\" is not in the list of allowed "
                   "values: \"SAME\", \"VALID\"", op, padding);
    else
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: padding is NULL (\"SAME\" or \"VALID\")", op);
    return 0;
}

VDEV_API vdev_tensor_t *vdev_conv2d_dilated(const vdev_tensor_t *input,
                                            const vdev_tensor_t *filter, int stride_h,
                                            int stride_w, int dilation_h, int dilation_w,
                                            const char *padding)
{
    if (!input || !filter)
        return NULL;
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    if (!padding_code("Conv2D", padding, &p.f[0]))
        return NULL;
    if (dilation_h <= 0 || dilation_w <= 0) {
        vdev_error(VDEV_ERR_INVALID_ARG, "Conv2D: Dilated rates should be larger than 0.");
        return NULL;
    }
    p.i[0] = stride_h;
    p.i[1] = stride_w;
    p.j[0] = dilation_h;
    p.j[1] = dilation_w;
    const vdev_tensor_t *in[2] = {input, filter};
    return vdev_op_run(VDEV_OP_CONV2D, in, 2, &p);
}

VDEV_API vdev_tensor_t *vdev_conv2d(const vdev_tensor_t *input, const vdev_tensor_t *filter,
                                    int stride_h, int stride_w, const char *padding)
{
    return vdev_conv2d_dilated(input, filter, stride_h, stride_w, 1, 1, padding);
}

static vdev_tensor_t *pool(enum vdev_op op, const vdev_tensor_t *input, int kh, int kw, int sh,
                           int sw, const char *padding)
{
    if (!input)
        return NULL;
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    if (!padding_code(vdev_op_defs[op].name, padding, &p.f[0]))
        return NULL;
    p.i[0] = kh;
    p.i[1] = kw;
    p.i[2] = sh;
    p.i[3] = sw;
    return vdev_op_run(op, &input, 1, &p);
}

VDEV_API vdev_tensor_t *vdev_max_pool2d(const vdev_tensor_t *input, int ksize_h, int ksize_w,
                                        int stride_h, int stride_w, const char *padding)
{
    return pool(VDEV_OP_MAX_POOL, input, ksize_h, ksize_w, stride_h, stride_w, padding);
}

VDEV_API vdev_tensor_t *vdev_avg_pool2d(const vdev_tensor_t *input, int ksize_h, int ksize_w,
                                        int stride_h, int stride_w, const char *padding)
{
    return pool(VDEV_OP_AVG_POOL, input, ksize_h, ksize_w, stride_h, stride_w, padding);
}
