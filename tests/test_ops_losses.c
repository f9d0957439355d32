/* test_ops_losses.c — the losses on an empty batch, as Keras's losses with
 * their default reduction (SUM_OVER_BATCH_SIZE, a sum divided with
 * divide_no_nan by the number of examples), on the cpu backend and on a
 * simulated GPU.
 *
 * MeanSquaredError (Keras's MeanSquaredError) of a batch of 0 rows is 0,
 * through the dispatcher and through the reference and fast kernels called
 * directly; where the batch has examples with no element (a last dimension of
 * 0, or a 1-D tensor of 0 elements, one example for Keras) it stays NaN, the
 * mean of each empty example. The sparse softmax cross-entropy (Keras's
 * SparseCategoricalCrossentropy(from_logits=True)) of 0 rows is 0. The
 * gradients of either on an empty batch are empty tensors of the inputs'
 * shapes, and a dense layer trained on an empty batch gets zero gradients.
 * tf.reduce_mean (vdev_mean_all) of an empty tensor stays NaN. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* vdev_mse through the dispatcher and both kernels on host buffers. */
static void mse_is(const char *dev, const int64_t *s, int nd, int want_nan)
{
    char sh[64];
    vdev_shape_str(s, nd, sh, sizeof sh);
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *p = vdev_tensor_zeros(s, nd, VDEV_F32), *t = vdev_tensor_ones(s, nd, VDEV_F32);
    float got = vdev_tensor_item(vdev_mse(p, t));
    if (want_nan ? !isnan(got) : got != 0.0f)
        check_fail(__FILE__, __LINE__, "%s: mse of %s = %g, expected %s", dev, sh, got,
                   want_nan ? "NaN" : "0");
    else
        check_passed++;
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());

    struct vdev_kernel_args a;
    memset(&a, 0, sizeof a);
    float word = 0.0f, out;
    a.op = VDEV_OP_MSE;
    a.n_in = 2;
    a.in[0] = a.in[1] = &word;
    for (int k = 0; k < 2; k++) {
        a.in_ndim[k] = nd;
        for (int d = 0; d < VDEV_MAX_DIMS; d++)
            a.in_shape[k][d] = d < nd ? s[d] : 1;
    }
    CHECK_OK(vdev_op_defs[VDEV_OP_MSE].shape(&a));
    a.out[0] = &out;
    const vdev_kernel_fn fn[2] = {vdev_op_defs[VDEV_OP_MSE].ref, vdev_op_defs[VDEV_OP_MSE].host};
    for (int k = 0; k < 2; k++) {
        out = 12345.0f;
        fn[k](&a);
        if (want_nan ? !isnan(out) : out != 0.0f)
            check_fail(__FILE__, __LINE__, "%s kernel: mse of %s = %g, expected %s",
                       k ? "fast" : "reference", sh, out, want_nan ? "NaN" : "0");
        else
            check_passed++;
    }
}

/* The cross-entropy of [0, C] logits and [0] labels is 0; its reference
 * kernel directly too. */
static void ce_empty(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    int64_t sl[2] = {0, 5}, sb[1] = {0};
    vdev_tensor_t *lg = vdev_tensor_zeros(sl, 2, VDEV_F32);
    vdev_tensor_t *lb = vdev_tensor_zeros(sb, 1, VDEV_I32);
    vdev_tensor_t *ce = vdev_softmax_cross_entropy(lg, lb);
    CHECK(ce != NULL);
    if (ce) {
        float v = vdev_tensor_item(ce);
        if (v != 0.0f)
            check_fail(__FILE__, __LINE__, "%s: cross-entropy of no rows = %g, expected 0", dev, v);
        else
            check_passed++;
    }
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());

    struct vdev_kernel_args a;
    memset(&a, 0, sizeof a);
    int32_t word = 0;
    float out = 12345.0f;
    a.op = VDEV_OP_SOFTMAX_CE;
    a.n_in = 2;
    a.in[0] = a.in[1] = &word;
    a.in_ndim[0] = 2;
    a.in_ndim[1] = 1;
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        a.in_shape[0][d] = a.in_shape[1][d] = 1;
    a.in_shape[0][0] = 0;
    a.in_shape[0][1] = 5;
    a.in_shape[1][0] = 0;
    a.in_dtype[1] = VDEV_I32;
    CHECK_OK(vdev_op_defs[VDEV_OP_SOFTMAX_CE].shape(&a));
    a.out[0] = &out;
    vdev_op_defs[VDEV_OP_SOFTMAX_CE].ref(&a);
    CHECK(out == 0.0f);
}

/* t has shape (s, nd). */
static int has_shape(const vdev_tensor_t *t, const int64_t *s, int nd)
{
    if (!t || vdev_tensor_ndim(t) != nd)
        return 0;
    for (int d = 0; d < nd; d++)
        if (vdev_tensor_dim(t, d) != s[d])
            return 0;
    return 1;
}

/* Gradients of the losses on an empty batch: empty tensors of the inputs'
 * shapes (no error); a dense layer's weights and bias get zeros. */
static void empty_gradients(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t s03[2] = {0, 3}, s05[2] = {0, 5}, s0[1] = {0}, s43[2] = {4, 3}, s3[1] = {3};
    int64_t s04[2] = {0, 4};
    vdev_tensor_t *pred = vdev_variable(vdev_tensor_zeros(s03, 2, VDEV_F32));
    vdev_tensor_t *tgt = vdev_variable(vdev_tensor_ones(s03, 2, VDEV_F32));
    vdev_tensor_t *logits = vdev_variable(vdev_tensor_zeros(s05, 2, VDEV_F32));
    vdev_tensor_t *w = vdev_variable(vdev_tensor_ones(s43, 2, VDEV_F32));
    vdev_tensor_t *b = vdev_variable(vdev_tensor_ones(s3, 1, VDEV_F32));
    vdev_scope_begin();

    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_mse(pred, tgt), *vars[2] = {pred, tgt}, *g[2] = {NULL, NULL};
    CHECK(loss && vdev_tensor_item(loss) == 0.0f);
    CHECK_OK(vdev_tape_gradient(t, loss, vars, 2, g));
    vdev_tape_end(t);
    CHECK(has_shape(g[0], s03, 2) && vdev_tensor_numel(g[0]) == 0);
    CHECK(has_shape(g[1], s03, 2) && vdev_tensor_numel(g[1]) == 0);

    t = vdev_tape_begin();
    vdev_tensor_t *lb = vdev_tensor_zeros(s0, 1, VDEV_I32), *gl = NULL;
    loss = vdev_softmax_cross_entropy(logits, lb);
    CHECK(loss && vdev_tensor_item(loss) == 0.0f);
    CHECK_OK(vdev_tape_gradient(t, loss, &logits, 1, &gl));
    vdev_tape_end(t);
    CHECK(has_shape(gl, s05, 2) && vdev_tensor_numel(gl) == 0);

    /* y = x w + b on x [0,4]: loss 0, dw zeros [4,3], db zeros [3] */
    t = vdev_tape_begin();
    vdev_tensor_t *x = vdev_tensor_zeros(s04, 2, VDEV_F32);
    vdev_tensor_t *y = vdev_add(vdev_matmul(x, w, false, false), b);
    loss = vdev_mse(y, vdev_tensor_zeros(s03, 2, VDEV_F32));
    vdev_tensor_t *wb[2] = {w, b}, *gw[2] = {NULL, NULL};
    CHECK(loss && vdev_tensor_item(loss) == 0.0f);
    CHECK_OK(vdev_tape_gradient(t, loss, wb, 2, gw));
    vdev_tape_end(t);
    CHECK(has_shape(gw[0], s43, 2) && has_shape(gw[1], s3, 1));
    if (gw[0] && gw[1]) {
        float hw[12], hb[3];
        CHECK_OK(vdev_tensor_to_host(gw[0], hw, sizeof hw));
        CHECK_OK(vdev_tensor_to_host(gw[1], hb, sizeof hb));
        int zero = 1;
        for (int i = 0; i < 12; i++)
            zero &= hw[i] == 0.0f;
        for (int i = 0; i < 3; i++)
            zero &= hb[i] == 0.0f;
        CHECK(zero);
    }
    /* tf.reduce_mean of nothing: NaN, as TensorFlow */
    CHECK(isnan(vdev_tensor_item(vdev_mean_all(x))));

    vdev_scope_end();
    vdev_tensor_t *all[5] = {pred, tgt, logits, w, b};
    for (int i = 0; i < 5; i++)
        vdev_tensor_free(all[i]);
    CHECK_OK(vdev_device_pop());
}

static void run(const char *dev)
{
    int64_t s03[2] = {0, 3}, s30[2] = {3, 0}, s0[1] = {0}, s003[3] = {2, 0, 3}, s00[2] = {0, 0};
    mse_is(dev, s03, 2, 0);  /* no row: 0 */
    mse_is(dev, s003, 3, 0); /* no example: 0 */
    mse_is(dev, s00, 2, 0);
    mse_is(dev, s30, 2, 1);  /* 3 examples of no element: NaN */
    mse_is(dev, s0, 1, 1);   /* one example of no element: NaN */
    ce_empty(dev);
    empty_gradients(dev);
    CHECK_NO_LEAK(dev);
}

int main(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    run("CPU:0");
    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    run("GPU:0");
    vdev_shutdown();
    return check_done();
}
