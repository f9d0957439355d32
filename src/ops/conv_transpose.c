/* conv_transpose.c — the transposed 2-D convolution, TensorFlow's
 * tf.nn.conv2d_transpose: in TensorFlow that is the op Conv2DBackpropInput
 * with input_sizes = output_shape, filter = filters [KH,KW,C,O] (the
 * output's channels C, the input's O) and out_backprop = input [N,H,W,O],
 * so the result [N,OH,OW,C] is the input's gradient of a Conv2D that maps
 * an [N,OH,OW,C] tensor to the input's shape with those strides, dilations
 * and padding. Here it is an op of its own, VDEV_OP_CONV2D_TRANSPOSE (a
 * differentiable one: vdev's Conv2DBackpropInput is Conv2D's gradient and
 * takes a tensor for the output's shape), whose kernels are those of
 * Conv2DBackpropInput on rewritten arguments (conv_transpose.h), so the CPU,
 * simulated GPUs and CUDA run the kernels already tested for Conv2D's
 * gradient. The shape rule checks in the order and words of TensorFlow's
 * kernel (the GPU one, which takes dilations: its label
 * Conv2DSlowBackpropInput, conv_grad_shape_utils.cc), each spatial
 * dimension by TensorFlow's Conv2D output rule (VALID: (in - k + s) / s,
 * SAME: ceil(in / s), k the dilated window (k - 1) d + 1) applied to the
 * output's size, which must give back the input's. The gradients are
 * TensorFlow's (_Conv2DBackpropInputGrad): the input's is Conv2D of the
 * output's gradient with the filter, the filter's Conv2DBackpropFilter of
 * the output's gradient against the input. Parameters: the strides in
 * i[0], i[1], the dilations in j[0], j[1], the padding in f[0], the
 * determinism switch in i[3] (set by the shape rule), and the output's
 * shape: batch i[2], rows j[2], columns j[3], channels f[1]. */
#include "ops/conv_transpose.h"
#include "config/config.h"
#include "ops/impl.h"

#include <stdint.h>
#include <string.h>

/* TensorFlow's kernel label for the shape checks, and its op's name for
 * the attribute checks (which TensorFlow reports without a label). */
#define LABEL "Conv2DSlowBackpropInput"
#define OPNAME "Conv2DBackpropInput"

/* ---- the shape rule ---- */

/* The attributes TensorFlow's kernel checks when it is made: padding,
 * strides, dilations (0, an op made without them, reads as 1). */
static enum vdev_status check_attrs(const struct vdev_kernel_args *a)
{
    if (a->f[0] != VDEV_PAD_VALID && a->f[0] != VDEV_PAD_SAME)
        return vdev_error(VDEV_ERR_INVALID_ARG, OPNAME ": padding code %g is neither VALID (%d) "
                          "nor SAME (%d)", a->f[0], VDEV_PAD_VALID, VDEV_PAD_SAME);
    if (a->i[0] <= 0 || a->i[1] <= 0)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          OPNAME ": Row and column strides should be larger than 0.");
    if (a->j[0] < 0 || a->j[1] < 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, OPNAME ": Dilated rates should be larger than 0.");
    return VDEV_OK;
}

/* (input [N,H,W,O], filter [KH,KW,C,O]) -> [i[2], j[2], j[3], f[1]]. */
enum vdev_status vdev_shape_conv2d_transpose(struct vdev_kernel_args *a)
{
    enum vdev_status st = check_attrs(a);
    if (st != VDEV_OK)
        return st;
    for (int k = 0; k < 2; k++)
        if (a->in_dtype[k] != VDEV_F32)
            return vdev_dtype_error(a, k, VDEV_F32);
    int64_t os[4] = {a->i[2], a->j[2], a->j[3], (int64_t)a->f[1]};
    for (int d = 0; d < 4; d++)
        if (os[d] < 0)
            return vdev_error(VDEV_ERR_INVALID_ARG, OPNAME ": Dimension %lld must be >= 0",
                              (long long)os[d]);
    if (a->in_ndim[1] != 4)
        return vdev_error(VDEV_ERR_SHAPE, LABEL ": filter must be 4-dimensional");
    if (a->in_ndim[0] != 4)
        return vdev_error(VDEV_ERR_SHAPE, LABEL ": out_backprop must be 4-dimensional");
    const int64_t *x = a->in_shape[0], *f = a->in_shape[1];
    if (os[0] != x[0])
        return vdev_error(VDEV_ERR_SHAPE,
                          LABEL ": input and out_backprop must have the same batch size. Input "
                          "batch: %lld, outbackprop batch: %lld, batch_dim: 0",
                          (long long)os[0], (long long)x[0]);
    if (f[2] <= 0)
        return vdev_error(VDEV_ERR_SHAPE,
                          LABEL ": filter depth must be strictly greated than zero");
    if (os[3] % f[2])
        return vdev_error(VDEV_ERR_SHAPE,
                          LABEL ": input depth must be evenly divisible by filter depth");
    if (f[3] != x[3])
        return vdev_error(VDEV_ERR_SHAPE,
                          LABEL ": filter and out_backprop must have the same out_depth");
    if (os[3] != f[2])
        return vdev_error(VDEV_ERR_UNSUPPORTED,
                          LABEL ": grouped convolution (input depth %lld, filter depth %lld) is "
                          "not supported: the filter's depth must be the output's",
                          (long long)os[3], (long long)f[2]);
    if (f[0] <= 0 || f[1] <= 0) {
        char s[96];
        vdev_shape_str(f, 4, s, sizeof s);
        return vdev_error(VDEV_ERR_SHAPE, LABEL ": filter %s has a window of size 0", s);
    }
    for (int d = 0; d < 2; d++) {
        int64_t dil = a->j[d] > 1 ? a->j[d] : 1, k, got, before;
        if ((st = vdev_conv_effective_of(LABEL, f[d], dil, &k)) != VDEV_OK)
            return st;
        if ((st = vdev_conv_windowed(LABEL, os[1 + d], k, a->i[d], a->f[0] == VDEV_PAD_SAME,
                                     &got, &before)) != VDEV_OK)
            return st;
        if (got != x[1 + d])
            return vdev_error(VDEV_ERR_SHAPE,
                              LABEL ": Size of out_backprop doesn't match computed: actual = "
                              "%lld, computed = %lld spatial_dim: %d input: %lld filter: %lld "
                              "output: %lld stride: %lld dilation: %lld",
                              (long long)x[1 + d], (long long)got, 1 + d, (long long)os[1 + d],
                              (long long)f[d], (long long)x[1 + d], (long long)a->i[d],
                              (long long)dil);
    }
    a->n_out = 1;
    a->out_ndim[0] = 4;
    memcpy(a->out_shape[0], os, sizeof os);
    a->out_dtype[0] = VDEV_F32;
    a->i[3] = vdev_deterministic(); /* the fast kernel's products (conv_fast.c) */
    return VDEV_OK;
}

/* ---- kernels: Conv2DBackpropInput's ---- */

KERNEL(vdev_ref_conv2d_transpose)
{
    struct vdev_kernel_args b;
    VDEV_CONV_TRANSPOSE_AS_BACKPROP(&b, a);
    vdev_ref_conv2d_backprop_input(&b);
}

KERNEL(vdev_fast_conv2d_transpose)
{
    struct vdev_kernel_args b;
    VDEV_CONV_TRANSPOSE_AS_BACKPROP(&b, a);
    vdev_fast_conv2d_backprop_input(&b);
}

/* ---- the gradient ---- */

static enum vdev_status status_of(const struct vdev_tens *t)
{
    if (t)
        return VDEV_OK;
    enum vdev_status st = vdev_last_status();
    return st != VDEV_OK ? st : vdev_error(VDEV_ERR_INTERNAL, "a gradient op failed silently");
}

/* d input = Conv2D(dy, filter), d filter = Conv2DBackpropFilter(dy, filter
 * for its shape, input), with the forward op's strides, dilations and
 * padding (the output's shape left out: Conv2D's ops do not read it). */
GRAD(vdev_grad_conv2d_transpose)
{
    const struct vdev_tens *x = g->in[0], *f = g->in[1], *dy = g->dout;
    struct vdev_op_params p = g->p;
    p.i[2] = p.j[2] = p.j[3] = 0;
    p.f[1] = 0;
    const struct vdev_tens *c[2] = {dy, f}, *bf[3] = {dy, f, x};
    unsigned need = g->need;
    din[0] = need & 1u ? vdev_op_exec(VDEV_OP_CONV2D, c, 2, &p) : NULL;
    din[1] = need & 2u ? vdev_op_exec(VDEV_OP_CONV2D_BACKPROP_FILTER, bf, 3, &p) : NULL;
    enum vdev_status st = need & 1u ? status_of(din[0]) : VDEV_OK;
    return st != VDEV_OK || !(need & 2u) ? st : status_of(din[1]);
}

/* ---- the public function ---- */

VDEV_API vdev_tensor_t *vdev_conv2d_transpose(const vdev_tensor_t *input,
                                              const vdev_tensor_t *filter,
                                              const int64_t *output_shape, int n_output_shape,
                                              int stride_h, int stride_w, int dilation_h,
                                              int dilation_w, const char *padding)
{
    if (!input || !filter)
        return NULL;
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    int explicit = 0;
    if (padding && strcmp(padding, "SAME") == 0) {
        p.f[0] = VDEV_PAD_SAME;
    } else if (padding && strcmp(padding, "VALID") == 0) {
        p.f[0] = VDEV_PAD_VALID;
    } else if (padding && strcmp(padding, "EXPLICIT") == 0) {
        explicit = 1; /* refused below, after the strides, as TensorFlow's kernel does */
    } else {
        if (padding)
            vdev_error(VDEV_ERR_INVALID_ARG,
                       OPNAME ": Value for attr 'padding' of \"%s\" is not in the list of "
                       "allowed values: \"SAME\", \"VALID\", \"EXPLICIT\"", padding);
        else
            vdev_error(VDEV_ERR_INVALID_ARG, OPNAME ": padding is NULL (\"SAME\" or \"VALID\")");
        return NULL;
    }
    if (stride_h <= 0 || stride_w <= 0) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   OPNAME ": Row and column strides should be larger than 0.");
        return NULL;
    }
    if (dilation_h <= 0 || dilation_w <= 0) {
        vdev_error(VDEV_ERR_INVALID_ARG, OPNAME ": Dilated rates should be larger than 0.");
        return NULL;
    }
    if (explicit) {
        /* TensorFlow's op with padding "EXPLICIT" and no explicit_paddings,
         * which conv2d_transpose cannot pass: vdev has no such argument */
        vdev_error(VDEV_ERR_INVALID_ARG,
                   OPNAME ": explicit_paddings attribute must contain 8 values, but got: 0");
        return NULL;
    }
    if (n_output_shape != 4 && n_output_shape != 2) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   OPNAME " requires input_sizes to contain 4 values or 2 values, but got: %d",
                   n_output_shape);
        return NULL;
    }
    if (!output_shape) {
        vdev_error(VDEV_ERR_INVALID_ARG, OPNAME ": output_shape is NULL and has %d values",
                   n_output_shape);
        return NULL;
    }
    int64_t os[4];
    if (n_output_shape == 2) {
        /* TensorFlow's [rows, cols] form: the batch is the input's, the
         * channels the filter's; an input or filter of too few dimensions
         * gives 0 here and the shape rule's rank error */
        if (output_shape[0] < 0 || output_shape[1] < 0) {
            vdev_error(VDEV_ERR_INVALID_ARG,
                       OPNAME ": elements of input_sizes must be >= 0, not %lldx%lld",
                       (long long)output_shape[0], (long long)output_shape[1]);
            return NULL;
        }
        const struct vdev_tens *x = vdev_tens_peek(input), *f = vdev_tens_peek(filter);
        os[0] = x && vdev_tens_current(x) && x->ndim >= 1 ? x->shape[0] : 0;
        os[1] = output_shape[0];
        os[2] = output_shape[1];
        os[3] = f && vdev_tens_current(f) && f->ndim >= 3 ? f->shape[2] : 0;
    } else {
        memcpy(os, output_shape, sizeof os);
    }
    p.i[0] = stride_h;
    p.i[1] = stride_w;
    p.j[0] = dilation_h;
    p.j[1] = dilation_w;
    p.i[2] = os[0];
    p.j[2] = os[1];
    p.j[3] = os[2];
    p.f[1] = (double)os[3];
    if (os[3] > (INT64_C(1) << 53)) {
        vdev_error(VDEV_ERR_INVALID_ARG, OPNAME ": %lld output channels: at most 2^53",
                   (long long)os[3]);
        return NULL;
    }
    const vdev_tensor_t *in[2] = {input, filter};
    return vdev_op_run(VDEV_OP_CONV2D_TRANSPOSE, in, 2, &p);
}
