/* conv_composed.c — TensorFlow's 1-D convolution and pooling
 * (tf.nn.conv1d, tf.nn.max_pool1d, tf.nn.avg_pool1d) and its separable 2-D
 * convolution (tf.nn.separable_conv2d), made of vdev's 2-D ops the way
 * TensorFlow's Python makes them of its own: a 1-D input [N, W, C] is viewed
 * as the image [N, 1, W, C] (one row), the filter [KW, C, O] as [1, KW, C, O],
 * the 2-D op runs with a stride and a dilation of 1 along the rows, and its
 * result is viewed without the row again; a separable convolution is the
 * depthwise one followed by a 1 x 1 Conv2D with stride 1 and "VALID". The
 * views are Reshape ops, so a recording tape differentiates the whole through
 * the 2-D ops' gradients, every kernel is one already tested on every
 * backend, and the placement log shows Reshape, Conv2D (or MaxPool, AvgPool,
 * DepthwiseConv2dNative) and Reshape where TensorFlow's shows ExpandDims,
 * Conv2D and Squeeze. The 2-D ops check the attributes and the shapes and
 * report in TensorFlow's words, with the shapes they see (one row added), as
 * TensorFlow's Conv2D reports them under tf.nn.conv1d; what the views cannot
 * express (a 1-D input of fewer than 2 dimensions, a filter of 4) is
 * refused here in the words of the TensorFlow op that would refuse it. */
#include "ops/impl.h"
#include "vdev/ops.h"

#include <string.h>

/* The shape of live tensor h (ndim and sizes), for public function fn; 0
 * with the error set when h is not a live tensor. */
static int shape_of(const vdev_tensor_t *h, const char *fn, int64_t *shape, int *ndim)
{
    const struct vdev_tens *t = vdev_tens_use(h, fn);
    if (!t)
        return 0;
    *ndim = t->ndim;
    memcpy(shape, t->shape, sizeof t->shape);
    return 1;
}

/* The view of a 1-D input [N, W, C] as the image [N, 1, W, C]; an input with
 * a batch of two dimensions [B, N, W, C] is viewed as [B N, 1, W, C] (as
 * TensorFlow's conv1d folds extra batch dimensions into one), an input
 * [W, C] as [1, W, C] (the 2-D op refuses it, as TensorFlow's does); *rank
 * gets the input's rank and shape its sizes. fn names the public function
 * for a handle that is not a live tensor; an input of fewer than 2
 * dimensions is refused in the words of TensorFlow's ExpandDims. */
static vdev_tensor_t *as_image(const vdev_tensor_t *x, const char *fn, int *rank, int64_t *shape)
{
    int nd;
    if (!shape_of(x, fn, shape, &nd))
        return NULL;
    *rank = nd;
    if (nd < 2) {
        vdev_error(VDEV_ERR_SHAPE,
                   "ExpandDims: Tried to expand dim index -3 for tensor with %d dimensions.", nd);
        return NULL;
    }
    int64_t v[4];
    int vn = 4;
    if (nd == 2) {
        v[0] = 1, v[1] = shape[0], v[2] = shape[1], vn = 3;
    } else if (nd == 3) {
        v[0] = shape[0], v[1] = 1, v[2] = shape[1], v[3] = shape[2];
    } else {
        v[0] = shape[0] * shape[1], v[1] = 1, v[2] = shape[2], v[3] = shape[3];
    }
    return vdev_reshape(x, v, vn);
}

/* The 2-D result y [M, 1, OW, O] viewed as the 1-D input's rank again:
 * [N, OW, O], or [B, N, OW, O] for an input [B, N, W, C] (in_shape). y is
 * freed (the view holds what it needs). */
static vdev_tensor_t *from_image(vdev_tensor_t *y, int rank, const int64_t *in_shape)
{
    if (!y)
        return NULL;
    int64_t s[4];
    int n = 0;
    if (rank == 4)
        s[n++] = in_shape[0];
    s[n++] = rank == 4 ? in_shape[1] : vdev_tensor_dim(y, 0);
    s[n++] = vdev_tensor_dim(y, 2);
    s[n++] = vdev_tensor_dim(y, 3);
    vdev_tensor_t *out = vdev_reshape(y, s, n);
    vdev_tensor_free(y);
    return out;
}

VDEV_API vdev_tensor_t *vdev_conv1d(const vdev_tensor_t *input, const vdev_tensor_t *filter,
                                    int stride, int dilation, const char *padding)
{
    if (!input || !filter)
        return NULL;
    int64_t fs[VDEV_MAX_DIMS], is[VDEV_MAX_DIMS];
    int fn;
    if (!shape_of(filter, "vdev_conv1d", fs, &fn))
        return NULL;
    int rank;
    vdev_tensor_t *x = as_image(input, "vdev_conv1d", &rank, is);
    if (!x)
        return NULL;
    vdev_tensor_t *f = NULL;
    if (fn == VDEV_MAX_DIMS) {
        /* one dimension more than a tensor has: Conv2D's own words */
        char s[128];
        int64_t e[5] = {1, fs[0], fs[1], fs[2], fs[3]};
        vdev_shape_str(e, 5, s, sizeof s);
        vdev_error(VDEV_ERR_SHAPE, "Conv2D: filter must be 4-dimensional: %s", s);
    } else {
        int64_t e[4] = {1, fs[0], fs[1], fs[2]};
        f = vdev_reshape(filter, e, fn + 1);
    }
    vdev_tensor_t *y = f ? vdev_conv2d_dilated(x, f, 1, stride, 1, dilation, padding) : NULL;
    vdev_tensor_free(x);
    vdev_tensor_free(f);
    return from_image(y, rank, is);
}

/* max_pool1d and avg_pool1d: the 2-D pool of op over windows of 1 x ksize. */
static vdev_tensor_t *pool1d(int max, const vdev_tensor_t *input, int ksize, int stride,
                             const char *padding)
{
    if (!input)
        return NULL;
    const char *fn = max ? "vdev_max_pool1d" : "vdev_avg_pool1d";
    int64_t is[VDEV_MAX_DIMS];
    int nd;
    if (!shape_of(input, fn, is, &nd))
        return NULL;
    if (nd != 3) {
        /* TensorFlow adds the row at axis 1: any rank but 3 reaches the
         * pool as another rank than 4 (or fails to expand, below 1) */
        if (nd < 1)
            vdev_error(VDEV_ERR_SHAPE,
                       "ExpandDims: Tried to expand dim index 1 for tensor with 0 dimensions.");
        else
            vdev_error(VDEV_ERR_SHAPE, "%s: tensor_in must be 4-dimensional",
                       max ? "MaxPool" : "AvgPool");
        return NULL;
    }
    int rank;
    vdev_tensor_t *x = as_image(input, fn, &rank, is);
    vdev_tensor_t *y = NULL;
    if (x)
        y = max ? vdev_max_pool2d(x, 1, ksize, 1, stride, padding)
                : vdev_avg_pool2d(x, 1, ksize, 1, stride, padding);
    vdev_tensor_free(x);
    return from_image(y, rank, is);
}

VDEV_API vdev_tensor_t *vdev_max_pool1d(const vdev_tensor_t *input, int ksize, int stride,
                                        const char *padding)
{
    return pool1d(1, input, ksize, stride, padding);
}

VDEV_API vdev_tensor_t *vdev_avg_pool1d(const vdev_tensor_t *input, int ksize, int stride,
                                        const char *padding)
{
    return pool1d(0, input, ksize, stride, padding);
}

VDEV_API vdev_tensor_t *vdev_separable_conv2d(const vdev_tensor_t *input,
                                              const vdev_tensor_t *depthwise_filter,
                                              const vdev_tensor_t *pointwise_filter,
                                              int stride_h, int stride_w, int dilation_h,
                                              int dilation_w, const char *padding)
{
    if (!input || !depthwise_filter || !pointwise_filter)
        return NULL;
    int64_t ps[VDEV_MAX_DIMS];
    int pn;
    if (!shape_of(pointwise_filter, "vdev_separable_conv2d", ps, &pn))
        return NULL;
    /* TensorFlow checks the pointwise filter's shape before either op runs */
    char s[128];
    vdev_shape_str(ps, pn, s, sizeof s);
    if (pn != 4) {
        vdev_error(VDEV_ERR_SHAPE,
                   "separable_conv2d: the pointwise filter must have rank 4 "
                   "[1, 1, channels * multiplier, out], not %s", s);
        return NULL;
    }
    if (ps[0] != 1 || ps[1] != 1) {
        vdev_error(VDEV_ERR_SHAPE,
                   "separable_conv2d: the pointwise filter must be 1 x 1 "
                   "[1, 1, channels * multiplier, out], not %s", s);
        return NULL;
    }
    vdev_tensor_t *d = vdev_depthwise_conv2d(input, depthwise_filter, stride_h, stride_w,
                                             dilation_h, dilation_w, padding);
    if (!d)
        return NULL;
    vdev_tensor_t *y = vdev_conv2d(d, pointwise_filter, 1, 1, "VALID");
    vdev_tensor_free(d);
    return y;
}
