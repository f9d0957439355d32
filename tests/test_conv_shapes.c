/* test_conv_shapes.c — the output sizes of Conv2D, MaxPool and AvgPool at
 * the edges of int64: an empty tensor may have a dimension as large as
 * INT64_MAX, and strides and windows go up to INT_MAX, so TensorFlow's
 * (in + s - 1) / s and (in - k + s) / s must come out right without a sum
 * passing INT64_MAX (under UBSan such a sum stops the test). Also TensorFlow's
 * truncating division for VALID windows larger than the input: an output of
 * size 0 while in - k + s > -s, the "would be negative" error below that,
 * and the gradient ops' check of dy against these sizes. Dilated windows:
 * their effective size (k - 1) d + 1 in the same rules, and its refusals
 * (a dilation below 1, an effective size past INT64_MAX). */
#include "check.h"
#include "ops/impl.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

static vdev_tensor_t *z4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t s[4] = {a, b, c, d};
    return vdev_tensor_zeros(s, 4, VDEV_F32);
}

static int shape_is(const vdev_tensor_t *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return t && vdev_tensor_ndim(t) == 4 && vdev_tensor_dim(t, 0) == a &&
           vdev_tensor_dim(t, 1) == b && vdev_tensor_dim(t, 2) == c && vdev_tensor_dim(t, 3) == d;
}

#define REFUSED(call, code, msg) CHECK_ERR((call) ? VDEV_OK : vdev_last_status(), code, msg)

/* ceil(INT64_MAX / INT_MAX) = 4294967299, and (INT64_MAX - 1 + INT_MAX) / INT_MAX too. */
#define BIG_OUT 4294967299LL

static void test_huge_dims(void)
{
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *x = z4(0, INT64_MAX, 1, 1), *f = z4(1, 1, 1, 1);
    CHECK(x && f);
    CHECK(shape_is(vdev_conv2d(x, f, INT_MAX, 1, "SAME"), 0, BIG_OUT, 1, 1));
    CHECK(shape_is(vdev_conv2d(x, f, INT_MAX, 1, "VALID"), 0, BIG_OUT, 1, 1));
    CHECK(shape_is(vdev_conv2d(x, f, 1, 1, "SAME"), 0, INT64_MAX, 1, 1));
    CHECK(shape_is(vdev_conv2d(x, f, 1, 1, "VALID"), 0, INT64_MAX, 1, 1));
    CHECK(shape_is(vdev_max_pool2d(x, INT_MAX, 1, INT_MAX, 1, "SAME"), 0, BIG_OUT, 1, 1));
    /* (INT64_MAX - INT_MAX) / INT_MAX + 1 */
    CHECK(shape_is(vdev_avg_pool2d(x, INT_MAX, 1, INT_MAX, 1, "VALID"), 0,
                   (INT64_MAX - INT_MAX) / INT_MAX + 1, 1, 1));
    CHECK(shape_is(vdev_max_pool2d(x, INT_MAX, 1, 1, 1, "SAME"), 0, INT64_MAX, 1, 1));
    /* the width as large, a filter of 2^59 rows over an empty batch */
    vdev_tensor_t *xw = z4(0, 3, INT64_MAX, 1), *fh = z4(1LL << 59, 1, 1, 0);
    CHECK(xw && fh);
    CHECK(shape_is(vdev_conv2d(xw, fh, 1, INT_MAX, "SAME"), 0, 3, BIG_OUT, 0));
    REFUSED(vdev_conv2d(xw, fh, 1, INT_MAX, "VALID"), VDEV_ERR_SHAPE,
            "Conv2D: Computed output size would be negative: -576460752303423484 [input_size: 3, "
            "effective_filter_size: 576460752303423488, stride: 1]");
    /* the gradient ops check dy against the same sizes */
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = INT_MAX;
    p.i[1] = 1;
    p.f[0] = VDEV_PAD_SAME;
    const vdev_tensor_t *in[3] = {x, f, z4(0, BIG_OUT, 1, 1)};
    CHECK(shape_is(vdev_op_run(VDEV_OP_CONV2D_BACKPROP_FILTER, in, 3, &p), 1, 1, 1, 1));
    CHECK(shape_is(vdev_op_run(VDEV_OP_CONV2D_BACKPROP_INPUT, in, 3, &p), 0, INT64_MAX, 1, 1));
    in[2] = z4(0, BIG_OUT - 1, 1, 1);
    REFUSED(vdev_op_run(VDEV_OP_CONV2D_BACKPROP_INPUT, in, 3, &p), VDEV_ERR_SHAPE,
            "Conv2DBackpropInput: out_backprop has shape [0,4294967298,1,1], not the computed "
            "output shape [0,4294967299,1,1]");
    vdev_scope_end();
}

/* VALID with a window larger than the input: TensorFlow divides
 * in - k + s by s with C's truncation, so a size in (-s, 0] is 0 (an empty
 * output) and only -s or below is an error. */
static void test_valid_truncation(void)
{
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *x = z4(1, 4, 4, 2);
    CHECK(shape_is(vdev_conv2d(x, z4(6, 1, 2, 3), 2, 1, "VALID"), 1, 0, 4, 3)); /* 0 / 2 */
    CHECK(shape_is(vdev_conv2d(x, z4(7, 1, 2, 3), 2, 1, "VALID"), 1, 0, 4, 3)); /* -1 / 2 */
    REFUSED(vdev_conv2d(x, z4(8, 1, 2, 3), 2, 1, "VALID"), VDEV_ERR_SHAPE,
            "Conv2D: Computed output size would be negative: -1 [input_size: 4, "
            "effective_filter_size: 8, stride: 2]");
    CHECK(shape_is(vdev_max_pool2d(x, 1, 9, 1, 3, "VALID"), 1, 4, 0, 2)); /* -2 / 3 */
    REFUSED(vdev_avg_pool2d(x, 1, 10, 1, 3, "VALID"), VDEV_ERR_SHAPE,
            "AvgPool: Computed output size would be negative: -1 [input_size: 4, "
            "effective_filter_size: 10, stride: 3]");
    /* SAME never refuses: the window larger than the input is padded */
    CHECK(shape_is(vdev_conv2d(x, z4(8, 9, 2, 3), 3, 2, "SAME"), 1, 2, 2, 3));
    CHECK(shape_is(vdev_max_pool2d(z4(1, 0, 4, 2), 3, 3, 2, 2, "SAME"), 1, 0, 2, 2));
    vdev_scope_end();
}

/* Dilations: the window's effective size, (k - 1) d + 1, in the same rules;
 * a 1-tap window is not widened; a dilation below 1 and an effective size
 * that does not fit an int64 are refused, each with its message. */
static void test_dilated(void)
{
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *x = z4(1, 9, 8, 2), *f = z4(3, 2, 2, 5);
    /* VALID: (9 - 5) / 1 + 1 = 5 rows, (8 - 4) / 1 + 1 = 5 columns */
    CHECK(shape_is(vdev_conv2d_dilated(x, f, 1, 1, 2, 3, "VALID"), 1, 5, 5, 5));
    /* stride 2 too: (9 - 5) / 2 + 1 = 3, (8 - 4) / 2 + 1 = 3 */
    CHECK(shape_is(vdev_conv2d_dilated(x, f, 2, 2, 2, 3, "VALID"), 1, 3, 3, 5));
    CHECK(shape_is(vdev_conv2d_dilated(x, f, 2, 3, 4, 9, "SAME"), 1, 5, 3, 5));
    /* 1x1: one tap, no wider at any dilation */
    CHECK(shape_is(vdev_conv2d_dilated(x, z4(1, 1, 2, 5), 1, 1, 100, 100, "VALID"), 1, 9, 8, 5));
    /* rows (3 - 1) 5 + 1 = 11 > 9 + 1 under VALID: TensorFlow's error */
    REFUSED(vdev_conv2d_dilated(x, f, 1, 1, 5, 1, "VALID"), VDEV_ERR_SHAPE,
            "Conv2D: Computed output size would be negative: -1 [input_size: 9, "
            "effective_filter_size: 11, stride: 1]");
    REFUSED(vdev_conv2d_dilated(x, f, 1, 1, 0, 1, "SAME"), VDEV_ERR_INVALID_ARG,
            "Conv2D: Dilated rates should be larger than 0.");
    REFUSED(vdev_conv2d_dilated(x, f, 1, 1, 1, -2, "SAME"), VDEV_ERR_INVALID_ARG,
            "Conv2D: Dilated rates should be larger than 0.");
    /* a filter of 2^40 rows (empty: no output channel) at dilation INT_MAX:
     * (2^40 - 1) (2^31 - 1) + 1 is past INT64_MAX */
    vdev_tensor_t *fh = z4(1LL << 40, 1, 2, 0);
    REFUSED(vdev_conv2d_dilated(x, fh, 1, 1, INT_MAX, 1, "SAME"), VDEV_ERR_SHAPE,
            "Conv2D: the dilated filter's size, (1099511627776 - 1) * 2147483647 + 1, does not "
            "fit an int64");
    /* the gradient ops check dy against the dilated sizes */
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = p.i[1] = 1;
    p.j[0] = 2;
    p.j[1] = 3;
    p.f[0] = VDEV_PAD_VALID;
    const vdev_tensor_t *in[3] = {x, f, z4(1, 5, 5, 5)};
    CHECK(shape_is(vdev_op_run(VDEV_OP_CONV2D_BACKPROP_INPUT, in, 3, &p), 1, 9, 8, 2));
    CHECK(shape_is(vdev_op_run(VDEV_OP_CONV2D_BACKPROP_FILTER, in, 3, &p), 3, 2, 2, 5));
    in[2] = z4(1, 7, 7, 5); /* undilated's size */
    REFUSED(vdev_op_run(VDEV_OP_CONV2D_BACKPROP_FILTER, in, 3, &p), VDEV_ERR_SHAPE,
            "Conv2DBackpropFilter: out_backprop has shape [1,7,7,5], not the computed output "
            "shape [1,5,5,5]");
    p.j[1] = -1;
    REFUSED(vdev_op_run(VDEV_OP_CONV2D_BACKPROP_INPUT, in, 3, &p), VDEV_ERR_INVALID_ARG,
            "Conv2DBackpropInput: Dilated rates should be larger than 0.");
    vdev_scope_end();
}

int main(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    test_huge_dims();
    test_valid_truncation();
    test_dilated();
    CHECK_NO_LEAK("CPU:0");
    vdev_shutdown();
    return check_done();
}
