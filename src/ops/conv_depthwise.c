/* conv_depthwise.c — depthwise 2-D convolution as TensorFlow has it
 * (tf.nn.depthwise_conv2d, the DepthwiseConv2dNative op and its gradient ops
 * DepthwiseConv2dNativeBackpropInput and DepthwiseConv2dNativeBackpropFilter):
 * their shape rules, reference kernels, gradient and public function. Input
 * NHWC [N,H,W,C] float, filter [KH,KW,C,M] with M the channel multiplier,
 * output [N,OH,OW,C*M] whose channel c*M+m is input channel c convolved with
 * filter[:,:,c,m]: y[n,r,q,c*M+m] = sum over the taps (di, dj) inside x of
 * x[n, r*sh - pt + di*dh, q*sw - pl + dj*dw, c] * filter[di,dj,c,m]. Output
 * sizes and SAME's padding follow TensorFlow's rule as Conv2D's do (conv.c),
 * with the window's effective size (k - 1) d + 1 where it is dilated; the
 * refusals are TensorFlow's kernels' words (depthwise_conv_op.cc,
 * depthwise_conv_grad_op.cc), the op's name first as vdev's errors have it,
 * except those TensorFlow already labels (the gradient ops'). As TensorFlow's
 * kernel, the row and column strides must be equal. Dilations are vdev's
 * addition to the op (TensorFlow's kernel refuses them and tf.nn's Python
 * gets them by space-to-batch, which gives these values where the strides
 * are 1). Parameters, as Conv2D's: strides in i[0], i[1], dilations in
 * j[0], j[1] (0 reads as 1), the padding in f[0]. The gradient ops take
 * (x, filter, dy) and read only the shapes of the operand their result does
 * not need. The reference kernels are plain loops with double accumulators,
 * the specification that the fast host kernel and the CUDA kernels are
 * tested against. */
#include "ops/impl.h"

#include <stdint.h>
#include <string.h>

/* ---- geometry ---- */

/* The dilation along dimension d (0: rows, 1: columns): j[d], 0 read as 1. */
static int64_t dw_dilation(const struct vdev_kernel_args *a, int d)
{
    return a->j[d] > 1 ? a->j[d] : 1;
}

void vdev_depthwise_geom_of(const struct vdev_kernel_args *a, struct vdev_conv_geom *g)
{
    memset(g, 0, sizeof *g);
    g->n = a->in_shape[0][0];
    g->h = a->in_shape[0][1];
    g->w = a->in_shape[0][2];
    g->c = a->in_shape[0][3];
    g->kh = a->in_shape[1][0];
    g->kw = a->in_shape[1][1];
    g->o = a->in_shape[1][3]; /* the channel multiplier M */
    g->sh = a->i[0];
    g->sw = a->i[1];
    g->dh = dw_dilation(a, 0);
    g->dw = dw_dilation(a, 1);
    int same = a->f[0] == VDEV_PAD_SAME;
    /* checked by the shape rule: no error here */
    int64_t eh = vdev_conv_effective(g->kh, g->dh), ew = vdev_conv_effective(g->kw, g->dw);
    (void)vdev_conv_windowed("", g->h, eh, g->sh, same, &g->oh, &g->pt);
    (void)vdev_conv_windowed("", g->w, ew, g->sw, same, &g->ow, &g->pl);
}

/* ---- shape rules ---- */

static void dw_out_like(struct vdev_kernel_args *a, int k)
{
    a->n_out = 1;
    a->out_ndim[0] = 4;
    for (int d = 0; d < 4; d++)
        a->out_shape[0][d] = a->in_shape[k][d];
    a->out_dtype[0] = VDEV_F32;
}

/* What the forward op and its gradient ops check first, as TensorFlow's
 * kernels do when they are made: float operands, the padding, equal row and
 * column strides, and (vdev's) dilations of at least 1. */
static enum vdev_status dw_attrs(const struct vdev_kernel_args *a)
{
    const char *name = vdev_op_defs[a->op].name;
    for (int k = 0; k < a->n_in; k++)
        if (a->in_dtype[k] != VDEV_F32)
            return vdev_dtype_error(a, k, VDEV_F32);
    if (a->f[0] != VDEV_PAD_VALID && a->f[0] != VDEV_PAD_SAME)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: padding code %g is neither VALID (%d) nor "
                          "SAME (%d)", name, a->f[0], VDEV_PAD_VALID, VDEV_PAD_SAME);
    if (a->i[0] != a->i[1])
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: Current implementation only supports equal length strides in "
                          "the row and column dimensions.", name);
    if (a->j[0] < 0 || a->j[1] < 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: Dilated rates should be larger than 0.",
                          name);
    return VDEV_OK;
}

/* The output's rows and columns from x's and the filter's (both 4-D). */
static enum vdev_status dw_spatial(const struct vdev_kernel_args *a, int64_t *oh, int64_t *ow)
{
    const int64_t k[2] = {a->in_shape[1][0], a->in_shape[1][1]};
    const int64_t dil[2] = {dw_dilation(a, 0), dw_dilation(a, 1)}, s[2] = {a->i[0], a->i[1]};
    int64_t out[2] = {0, 0};
    enum vdev_status st = vdev_conv_out_hw(vdev_op_defs[a->op].name, a->in_shape[0] + 1, k, dil,
                                           s, a->f[0] == VDEV_PAD_SAME, out);
    *oh = out[0];
    *ow = out[1];
    return st;
}

/* DEPTHWISE_CONV2D (x, filter [KH,KW,C,M]) -> [N,OH,OW,C*M]. */
enum vdev_status vdev_shape_depthwise(struct vdev_kernel_args *a)
{
    const char *name = vdev_op_defs[a->op].name;
    enum vdev_status st = dw_attrs(a);
    if (st != VDEV_OK)
        return st;
    char s[96];
    if (a->in_ndim[0] != 4) {
        vdev_shape_str(a->in_shape[0], a->in_ndim[0], s, sizeof s);
        return vdev_error(VDEV_ERR_SHAPE, "%s: input must be 4-dimensional%s", name, s);
    }
    if (a->in_ndim[1] != 4) {
        vdev_shape_str(a->in_shape[1], a->in_ndim[1], s, sizeof s);
        return vdev_error(VDEV_ERR_SHAPE, "%s: filter must be 4-dimensional: %s", name, s);
    }
    int64_t c = a->in_shape[0][3], m = a->in_shape[1][3];
    if (c != a->in_shape[1][2])
        return vdev_error(VDEV_ERR_SHAPE, "%s: input and filter must have the same depth: %lld "
                          "vs %lld", name, (long long)c, (long long)a->in_shape[1][2]);
    if (m > 0 && c > INT64_MAX / m)
        return vdev_error(VDEV_ERR_SHAPE, "%s: the output depth, %lld * %lld, does not fit an "
                          "int64", name, (long long)c, (long long)m);
    int64_t oh, ow;
    if ((st = dw_spatial(a, &oh, &ow)) != VDEV_OK)
        return st;
    a->n_out = 1;
    a->out_ndim[0] = 4;
    a->out_shape[0][0] = a->in_shape[0][0];
    a->out_shape[0][1] = oh;
    a->out_shape[0][2] = ow;
    a->out_shape[0][3] = c * m;
    a->out_dtype[0] = VDEV_F32;
    return VDEV_OK;
}

/* DEPTHWISE_CONV2D_BACKPROP_INPUT (x, filter, dy) -> x's shape and
 * DEPTHWISE_CONV2D_BACKPROP_FILTER (x, filter, dy) -> the filter's, with
 * TensorFlow's checks in its order (EXTRACT_AND_VERIFY_DIMENSIONS), each
 * message after its label. */
enum vdev_status vdev_shape_depthwise_grad(struct vdev_kernel_args *a)
{
    const char *label = a->op == VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT
                            ? "DepthwiseConv2DBackpropInput"
                            : "DepthwiseConv2DBackpropFilter";
    enum vdev_status st = dw_attrs(a);
    if (st != VDEV_OK)
        return st;
    static const char *const what[3] = {"input", "filter", "out_backprop"};
    for (int k = 0; k < 3; k++)
        if (a->in_ndim[k] != 4)
            return vdev_error(VDEV_ERR_SHAPE, "%s: %s must be 4-dimensional", label, what[k]);
    if (a->in_shape[0][0] != a->in_shape[2][0])
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: input and out_backprop must have the same batch size", label);
    int64_t c = a->in_shape[0][3], m = a->in_shape[1][3], od = a->in_shape[2][3];
    if (c != a->in_shape[1][2])
        return vdev_error(VDEV_ERR_SHAPE, "%s: input and filter must have the same in_depth",
                          label);
    if ((m > 0 && c > INT64_MAX / m) || c * m != od)
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: depth_multiplier * in_depth not equal to out_depth", label);
    int64_t oh, ow;
    if ((st = dw_spatial(a, &oh, &ow)) != VDEV_OK)
        return st;
    if (a->in_shape[2][1] != oh)
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: Number of rows of out_backprop doesn't match computed: actual = "
                          "%lld, computed = %lld", label, (long long)a->in_shape[2][1],
                          (long long)oh);
    if (a->in_shape[2][2] != ow)
        return vdev_error(VDEV_ERR_SHAPE,
                          "%s: Number of cols of out_backprop doesn't match computed: actual = "
                          "%lld, computed = %lld", label, (long long)a->in_shape[2][2],
                          (long long)ow);
    dw_out_like(a, a->op == VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT ? 0 : 1);
    return VDEV_OK;
}

/* ---- reference kernels ---- */

KERNEL(vdev_ref_depthwise_conv2d)
{
    struct vdev_conv_geom g;
    vdev_depthwise_geom_of(a, &g);
    const float *x = a->in[0], *f = a->in[1];
    float *y = a->out[0];
    int64_t cm = g.c * g.o;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t r = 0; r < g.oh; r++)
            for (int64_t q = 0; q < g.ow; q++)
                for (int64_t c = 0; c < g.c; c++)
                    for (int64_t m = 0; m < g.o; m++) {
                        double acc = 0.0;
                        for (int64_t di = 0; di < g.kh; di++) {
                            int64_t i = r * g.sh - g.pt + di * g.dh;
                            if (i < 0 || i >= g.h)
                                continue;
                            for (int64_t dj = 0; dj < g.kw; dj++) {
                                int64_t j = q * g.sw - g.pl + dj * g.dw;
                                if (j < 0 || j >= g.w)
                                    continue;
                                acc += (double)x[((n * g.h + i) * g.w + j) * g.c + c] *
                                       (double)f[(di * g.kw + dj) * cm + c * g.o + m];
                            }
                        }
                        y[((n * g.oh + r) * g.ow + q) * cm + c * g.o + m] = (float)acc;
                    }
}

/* dx[n,i,j,c] = the sum over the taps (di, dj) that put (i, j) under output
 * pixel (r, q) and over m of dy[n,r,q,c*M+m] filter[di,dj,c,m]. */
KERNEL(vdev_ref_depthwise_conv2d_backprop_input)
{
    struct vdev_conv_geom g;
    vdev_depthwise_geom_of(a, &g);
    const float *f = a->in[1], *dy = a->in[2];
    float *dx = a->out[0];
    int64_t cm = g.c * g.o;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t i = 0; i < g.h; i++)
            for (int64_t j = 0; j < g.w; j++)
                for (int64_t c = 0; c < g.c; c++) {
                    double acc = 0.0;
                    for (int64_t di = 0; di < g.kh; di++) {
                        int64_t t = i + g.pt - di * g.dh;
                        if (t < 0 || t % g.sh || t / g.sh >= g.oh)
                            continue;
                        int64_t r = t / g.sh;
                        for (int64_t dj = 0; dj < g.kw; dj++) {
                            int64_t u = j + g.pl - dj * g.dw;
                            if (u < 0 || u % g.sw || u / g.sw >= g.ow)
                                continue;
                            int64_t q = u / g.sw;
                            const float *dp = dy + ((n * g.oh + r) * g.ow + q) * cm + c * g.o;
                            const float *fp = f + (di * g.kw + dj) * cm + c * g.o;
                            for (int64_t m = 0; m < g.o; m++)
                                acc += (double)dp[m] * (double)fp[m];
                        }
                    }
                    dx[((n * g.h + i) * g.w + j) * g.c + c] = (float)acc;
                }
}

/* dfilter[di,dj,c,m] = the sum over n and the output pixels (r, q) whose tap
 * (di, dj) lies inside x of x[n, r sh - pt + di dh, q sw - pl + dj dw, c]
 * dy[n,r,q,c*M+m]. */
KERNEL(vdev_ref_depthwise_conv2d_backprop_filter)
{
    struct vdev_conv_geom g;
    vdev_depthwise_geom_of(a, &g);
    const float *x = a->in[0], *dy = a->in[2];
    float *df = a->out[0];
    int64_t cm = g.c * g.o;
    for (int64_t di = 0; di < g.kh; di++)
        for (int64_t dj = 0; dj < g.kw; dj++)
            for (int64_t c = 0; c < g.c; c++)
                for (int64_t m = 0; m < g.o; m++) {
                    double acc = 0.0;
                    for (int64_t n = 0; n < g.n; n++)
                        for (int64_t r = 0; r < g.oh; r++) {
                            int64_t i = r * g.sh - g.pt + di * g.dh;
                            if (i < 0 || i >= g.h)
                                continue;
                            for (int64_t q = 0; q < g.ow; q++) {
                                int64_t j = q * g.sw - g.pl + dj * g.dw;
                                if (j < 0 || j >= g.w)
                                    continue;
                                acc += (double)x[((n * g.h + i) * g.w + j) * g.c + c] *
                                       (double)dy[((n * g.oh + r) * g.ow + q) * cm + c * g.o + m];
                            }
                        }
                    df[(di * g.kw + dj) * cm + c * g.o + m] = (float)acc;
                }
}

/* ---- the gradient ---- */

static enum vdev_status dw_status_of(const struct vdev_tens *t)
{
    if (t)
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

/* As TensorFlow's _DepthwiseConv2dNativeGrad: the input's gradient is
 * DepthwiseConv2dNativeBackpropInput, the filter's
 * DepthwiseConv2dNativeBackpropFilter, each with the forward op's
 * parameters, where the forward op ran; din[k] NULL where need bit k is
 * clear. */
GRAD(vdev_grad_depthwise_conv2d)
{
    const struct vdev_tens *in[3] = {g->in[0], g->in[1], g->dout};
    int need_x = (g->need >> 0) & 1u, need_f = (g->need >> 1) & 1u;
    din[0] = need_x ? vdev_op_exec(VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT, in, 3, &g->p) : NULL;
    din[1] = need_f ? vdev_op_exec(VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER, in, 3, &g->p)
                    : NULL;
    enum vdev_status st = need_x ? dw_status_of(din[0]) : VDEV_OK;
    return st != VDEV_OK || !need_f ? st : dw_status_of(din[1]);
}

/* ---- the public function ---- */

VDEV_API vdev_tensor_t *vdev_depthwise_conv2d(const vdev_tensor_t *input,
                                              const vdev_tensor_t *filter, int stride_h,
                                              int stride_w, int dilation_h, int dilation_w,
                                              const char *padding)
{
    static const char name[] = "DepthwiseConv2dNative";
    if (!input || !filter)
        return NULL;
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    if (padding && strcmp(padding, "SAME") == 0) {
        p.f[0] = VDEV_PAD_SAME;
    } else if (padding && strcmp(padding, "VALID") == 0) {
        p.f[0] = VDEV_PAD_VALID;
    } else {
        if (padding)
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "%s: Value for attr 'padding' of \"%s\" is not in the list of allowed "
                       "values: \"SAME\", \"VALID\"", name, padding);
        else
            vdev_error(VDEV_ERR_INVALID_ARG, "%s: padding is NULL (\"SAME\" or \"VALID\")",
                       name);
        return NULL;
    }
    if (dilation_h <= 0 || dilation_w <= 0) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: Dilated rates should be larger than 0.", name);
        return NULL;
    }
    p.i[0] = stride_h;
    p.i[1] = stride_w;
    p.j[0] = dilation_h;
    p.j[1] = dilation_w;
    const vdev_tensor_t *in[2] = {input, filter};
    return vdev_op_run(VDEV_OP_DEPTHWISE_CONV2D, in, 2, &p);
}
