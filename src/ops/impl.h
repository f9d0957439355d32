/* impl.h — the functions behind the op table's rows: shape rules (shapes.c),
 * reference and host kernels (kernels_ref.c, kernels_host.c) and gradients
 * (grads.c). Private to src/ops/. */
#ifndef VDEV_OPS_IMPL_H
#define VDEV_OPS_IMPL_H

#include "ops/ops.h"

#define KERNEL(name) void name(const struct vdev_kernel_args *a)
#define SHAPE(name) enum vdev_status name(struct vdev_kernel_args *a)
#define GRAD(name) enum vdev_status name(const struct vdev_grad_args *g, struct vdev_tens **din)

/* shapes.c */
SHAPE(vdev_shape_matmul);
SHAPE(vdev_shape_batch_matmul);
SHAPE(vdev_shape_reduce);      /* SUM, MEAN: i[0] axis or VDEV_AXIS_ALL, i[1] keepdims */
SHAPE(vdev_shape_reshape);     /* i[0..3] new shape, f[0] ndim (as a double) */
SHAPE(vdev_shape_scalar_loss); /* MSE: (pred, target) same shape -> [] */
SHAPE(vdev_shape_softmax);     /* SOFTMAX, LOG_SOFTMAX: >= 1 dimension */
SHAPE(vdev_shape_softmax_ce);  /* ([N,C] f32, [N] i32) -> [] */
SHAPE(vdev_shape_argmax);      /* [..., C] -> [...] i32 */
SHAPE(vdev_shape_identity);    /* any dtype */
SHAPE(vdev_shape_broadcast);   /* (x, like) -> like's shape */
SHAPE(vdev_shape_reduce_rows); /* (dy, like) -> like's shape */
SHAPE(vdev_shape_mse_grad);    /* (dy, pred, target) -> pred's shape */
SHAPE(vdev_shape_softmax_ce_grad); /* (dy, logits, labels) -> logits' shape */
SHAPE(vdev_shape_update);      /* in-place updates: all inputs the shape of input 0 */
SHAPE(vdev_shape_slice);       /* rows i[0]..i[0]+i[1] of axis 0, any dtype */
SHAPE(vdev_shape_slice_grad);  /* (dy, like x) -> x's shape */

/* shapes.c: checks of values (vdev_op_def.check) */
enum vdev_status vdev_check_ce_labels(const struct vdev_tens *const *in,
                                      const struct vdev_kernel_args *a);

/* kernels_ref.c: the reference kernels, one per op */
KERNEL(vdev_ref_matmul);
KERNEL(vdev_ref_batch_matmul);
KERNEL(vdev_ref_add);
KERNEL(vdev_ref_sub);
KERNEL(vdev_ref_mul);
KERNEL(vdev_ref_div);
KERNEL(vdev_ref_maximum);
KERNEL(vdev_ref_minimum);
KERNEL(vdev_ref_add_scalar);
KERNEL(vdev_ref_mul_scalar);
KERNEL(vdev_ref_pow_scalar);
KERNEL(vdev_ref_relu);
KERNEL(vdev_ref_tanh);
KERNEL(vdev_ref_sigmoid);
KERNEL(vdev_ref_exp);
KERNEL(vdev_ref_log);
KERNEL(vdev_ref_sqrt);
KERNEL(vdev_ref_erf);
KERNEL(vdev_ref_softplus);
KERNEL(vdev_ref_softmax);
KERNEL(vdev_ref_log_softmax);
KERNEL(vdev_ref_sum);
KERNEL(vdev_ref_mean);
KERNEL(vdev_ref_mse);
KERNEL(vdev_ref_softmax_ce);
KERNEL(vdev_ref_argmax);
KERNEL(vdev_ref_identity);
KERNEL(vdev_ref_relu_grad);
KERNEL(vdev_ref_tanh_grad);
KERNEL(vdev_ref_sigmoid_grad);
KERNEL(vdev_ref_softmax_grad);
KERNEL(vdev_ref_log_softmax_grad);
KERNEL(vdev_ref_broadcast);
KERNEL(vdev_ref_mse_grad);
KERNEL(vdev_ref_softmax_ce_grad);
KERNEL(vdev_ref_reduce_rows);
KERNEL(vdev_ref_sgd_update);
KERNEL(vdev_ref_adam_update);
KERNEL(vdev_ref_amsgrad_moments);
KERNEL(vdev_ref_amsgrad_apply);
KERNEL(vdev_ref_clip_grad);
KERNEL(vdev_ref_slice);
KERNEL(vdev_ref_slice_grad);

/* Keras's decoupled weight decay of one value: v - (v * wd) * lr, each step
 * rounded to float as Keras computes it in the variable's dtype. */
static inline float vdev_decayed(float v, float wd, float lr)
{
    float d = v * wd;
    d = d * lr;
    return v - d;
}

/* kernels_host.c: faster host kernels where they pay (OpenBLAS) */
KERNEL(vdev_host_matmul);
KERNEL(vdev_host_batch_matmul);

/* kernels_fast.c: float, vectorized, multi-threaded host kernels */
KERNEL(vdev_fast_add);
KERNEL(vdev_fast_sub);
KERNEL(vdev_fast_mul);
KERNEL(vdev_fast_div);
KERNEL(vdev_fast_maximum);
KERNEL(vdev_fast_minimum);
KERNEL(vdev_fast_add_scalar);
KERNEL(vdev_fast_mul_scalar);
KERNEL(vdev_fast_relu);
KERNEL(vdev_fast_relu_grad);
KERNEL(vdev_fast_mse);
KERNEL(vdev_fast_mse_grad);
KERNEL(vdev_fast_sgd_update);
KERNEL(vdev_fast_adam_update);
KERNEL(vdev_fast_reduce_rows);
KERNEL(vdev_fast_identity);
KERNEL(vdev_fast_tanh);
KERNEL(vdev_fast_sigmoid);
KERNEL(vdev_fast_exp);
KERNEL(vdev_fast_log);
KERNEL(vdev_fast_sqrt);

/* grads.c */
GRAD(vdev_grad_matmul);
GRAD(vdev_grad_batch_matmul);
GRAD(vdev_grad_add);
GRAD(vdev_grad_sub);
GRAD(vdev_grad_mul);
GRAD(vdev_grad_div);
GRAD(vdev_grad_maximum);
GRAD(vdev_grad_minimum);
GRAD(vdev_grad_add_scalar);
GRAD(vdev_grad_mul_scalar);
GRAD(vdev_grad_pow_scalar);
GRAD(vdev_grad_relu);
GRAD(vdev_grad_tanh);
GRAD(vdev_grad_sigmoid);
GRAD(vdev_grad_exp);
GRAD(vdev_grad_log);
GRAD(vdev_grad_sqrt);
GRAD(vdev_grad_erf);
GRAD(vdev_grad_softplus);
GRAD(vdev_grad_softmax);
GRAD(vdev_grad_log_softmax);
GRAD(vdev_grad_sum);
GRAD(vdev_grad_mean);
GRAD(vdev_grad_reshape);
GRAD(vdev_grad_mse);
GRAD(vdev_grad_softmax_ce);
GRAD(vdev_grad_identity);
GRAD(vdev_grad_slice);

/* conv.c, conv_kernels.c, conv_fast.c, conv_grads.c: 2-D convolution and pooling */
SHAPE(vdev_shape_conv);      /* CONV2D, MAX_POOL, AVG_POOL */
SHAPE(vdev_shape_conv_grad); /* their gradient ops */
KERNEL(vdev_ref_conv2d);
KERNEL(vdev_ref_max_pool);
KERNEL(vdev_ref_avg_pool);
KERNEL(vdev_ref_conv2d_backprop_input);
KERNEL(vdev_ref_conv2d_backprop_filter);
/* conv_fast.c: im2col or col2im and the matmul's sgemm, on the host */
KERNEL(vdev_fast_conv2d);
KERNEL(vdev_fast_conv2d_backprop_input);
KERNEL(vdev_fast_conv2d_backprop_filter);
/* Test hook (fault injection): the n-th scratch buffer those three kernels
 * ask for from now on fails as if the host were out of memory (n = 1: the
 * next one), and the kernel runs the reference kernel; n = 0 disarms it. */
void vdev_conv_fast_fail_alloc(int n);
KERNEL(vdev_ref_max_pool_grad);
KERNEL(vdev_ref_avg_pool_grad);
GRAD(vdev_grad_conv2d);
GRAD(vdev_grad_max_pool);
GRAD(vdev_grad_avg_pool);
/* strided.c: StridedSlice and its gradient */
SHAPE(vdev_shape_strided_slice);
SHAPE(vdev_shape_strided_slice_grad);
KERNEL(vdev_ref_strided_slice);
KERNEL(vdev_ref_strided_slice_grad);
GRAD(vdev_grad_strided_slice);
/* concat.c: ConcatV2, Pack and Transpose (with a permutation) */
SHAPE(vdev_shape_concat);
SHAPE(vdev_shape_pack);
SHAPE(vdev_shape_transpose);
KERNEL(vdev_ref_concat);   /* ConcatV2 and Pack: one copy */
KERNEL(vdev_ref_transpose);
GRAD(vdev_grad_concat);
GRAD(vdev_grad_pack);
GRAD(vdev_grad_transpose);
/* gather.c: GatherV2 along axis 0 and its gradient GatherGrad */
SHAPE(vdev_shape_gather);
SHAPE(vdev_shape_gather_grad);
enum vdev_status vdev_check_gather_indices(const struct vdev_tens *const *in,
                                           const struct vdev_kernel_args *a);
KERNEL(vdev_ref_gather);
KERNEL(vdev_ref_gather_grad);
GRAD(vdev_grad_gather);
/* conv_transpose.c: the transposed 2-D convolution (Conv2DBackpropInput's kernels) */
SHAPE(vdev_shape_conv2d_transpose);
KERNEL(vdev_ref_conv2d_transpose);
KERNEL(vdev_fast_conv2d_transpose);
GRAD(vdev_grad_conv2d_transpose);
/* select.c: tf.where on float masks and its gradient */
SHAPE(vdev_shape_select_mask);      /* (m, a, b) -> a's shape */
SHAPE(vdev_shape_select_mask_grad); /* (m, dy) -> dy's shape */
KERNEL(vdev_ref_select_mask);
KERNEL(vdev_ref_select_mask_grad);
/* compare.c: comparisons, logic, Cast, SelectV2 (its gradient: grads.c) */
SHAPE(vdev_shape_compare);     /* (x, y) broadcast -> bool */
SHAPE(vdev_shape_logical_not); /* bool -> bool */
SHAPE(vdev_shape_cast);        /* x -> dtype i[0] */
SHAPE(vdev_shape_select_v2);   /* (c, x, y) broadcast -> x's dtype */
KERNEL(vdev_ref_compare);
KERNEL(vdev_ref_logical_not);
KERNEL(vdev_ref_cast);
KERNEL(vdev_ref_select_v2);
GRAD(vdev_grad_select); /* SelectV2's and SelectByMask's (grads.c) */
/* extreme.c: Max, Min (shapes: vdev_shape_reduce), Abs, Sign */
SHAPE(vdev_shape_abs_sign);
KERNEL(vdev_ref_max);
KERNEL(vdev_ref_min);
KERNEL(vdev_ref_abs);
KERNEL(vdev_ref_sign);
GRAD(vdev_grad_extreme); /* the gradients: grads.c */
GRAD(vdev_grad_abs);
GRAD(vdev_grad_sign);
/* floor.c: Floor, Ceil, Round (shape: vdev_shape_abs_sign), FloorDiv,
 * FloorMod */
SHAPE(vdev_shape_floor_binary);
KERNEL(vdev_ref_rounding);
KERNEL(vdev_ref_floor_binary);
GRAD(vdev_grad_floor_mod); /* grads.c */
/* gru_cell.c: the fused GRU cell's two ops and their two gradient ops */
SHAPE(vdev_shape_gru_gates);      /* (xw, inner) [..., 3u] -> that shape */
SHAPE(vdev_shape_gru_gates_grad); /* (dg, g, inner) -> that shape */
SHAPE(vdev_shape_gru_cell);       /* (g [..., 3u], h_prev [..., u]) -> h's shape */
SHAPE(vdev_shape_gru_cell_grad);  /* (dh, g, h_prev) -> g's (i[0] 0) or h's shape */
KERNEL(vdev_ref_gru_gates);
KERNEL(vdev_fast_gru_gates);
KERNEL(vdev_ref_gru_gates_grad);
KERNEL(vdev_fast_gru_gates_grad);
KERNEL(vdev_ref_gru_cell_output);
KERNEL(vdev_fast_gru_cell_output);
KERNEL(vdev_ref_gru_cell_grad);
KERNEL(vdev_fast_gru_cell_grad);
GRAD(vdev_grad_gru);
/* strided.c: a slice's gradient added in place to the tape's sum */
SHAPE(vdev_shape_strided_slice_grad_add); /* (acc, dy), in place */
KERNEL(vdev_ref_strided_slice_grad_add);
/* lstm_cell.c: the fused LSTM cell's three ops and their two gradient ops */
SHAPE(vdev_shape_lstm_gates);     /* z [..., 4u] -> its shape; (da, a) -> a's */
SHAPE(vdev_shape_lstm_cell);      /* (a [..., 4u], x [..., u]) -> x's shape */
SHAPE(vdev_shape_lstm_cell_grad); /* (dy, a, x) -> a's (i[0] 0, 2) or x's shape */
KERNEL(vdev_ref_lstm_gates);
KERNEL(vdev_fast_lstm_gates);
KERNEL(vdev_ref_lstm_gates_grad);
KERNEL(vdev_fast_lstm_gates_grad);
GRAD(vdev_grad_lstm_gates);
KERNEL(vdev_ref_lstm_cell_state);
KERNEL(vdev_fast_lstm_cell_state);
KERNEL(vdev_ref_lstm_cell_output);
KERNEL(vdev_fast_lstm_cell_output);
KERNEL(vdev_ref_lstm_cell_grad);
KERNEL(vdev_fast_lstm_cell_grad);
GRAD(vdev_grad_lstm_cell);
/* maxmin.c: the gradient op of Maximum and Minimum */
SHAPE(vdev_shape_maxmin_grad); /* (dy, x, y), x and y broadcast to dy -> dy's shape */
KERNEL(vdev_ref_maxmin_grad);

/* TensorFlow's Maximum and Minimum of one pair (Eigen's PropagateNaN): a NaN
 * operand is the result, x's first; else std::max / std::min, which keep x
 * of an equal pair (-0 and +0 included). Float or double operands. */
#define VDEV_MAXIMUM(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) < (y) ? (y) : (x))
#define VDEV_MINIMUM(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) < (x) ? (y) : (x))
/* The window geometry of one of those ops, from its (checked) arguments:
 * x [n,h,w,c], window kh x kw, o output channels (c for the pools), strides,
 * output oh x ow, and the padding before (pt top, pl left). */
struct vdev_conv_geom {
    int64_t n, h, w, c, kh, kw, o, sh, sw, oh, ow, pt, pl;
    int64_t dh, dw; /* the dilations (1 for the pools) */
};
void vdev_conv_geom_of(const struct vdev_kernel_args *a, struct vdev_conv_geom *g);
/* conv.c, for every 2-D window op: the effective window size (k - 1) dil + 1
 * (-1 where it passes INT64_MAX), and one dimension's output size and padding
 * before it by TensorFlow's rule (GetWindowedOutputSizeVerbose), else the
 * error in TensorFlow's words after `name`. */
int64_t vdev_conv_effective(int64_t k, int64_t dil);
/* The same into *e, or VDEV_ERR_SHAPE "name: the dilated filter's size, (k - 1)
 * * dil + 1, does not fit an int64". */
enum vdev_status vdev_conv_effective_of(const char *name, int64_t k, int64_t dil, int64_t *e);
enum vdev_status vdev_conv_windowed(const char *name, int64_t in, int64_t k, int64_t s, int same,
                                    int64_t *out, int64_t *before);
/* Both: the output's rows and columns (out[0], out[1]) from the input's
 * (in_hw[0..1]) with windows k, dilations dil and strides s, or the error. */
enum vdev_status vdev_conv_out_hw(const char *name, const int64_t *in_hw, const int64_t *k,
                                  const int64_t *dil, const int64_t *s, int same, int64_t *out);
/* conv_depthwise.c: DepthwiseConv2dNative and its gradient ops. Their
 * geometry fills vdev_conv_geom with o the channel multiplier M (the output
 * has c * o channels). */
SHAPE(vdev_shape_depthwise);      /* DEPTHWISE_CONV2D */
SHAPE(vdev_shape_depthwise_grad); /* its two gradient ops */
KERNEL(vdev_ref_depthwise_conv2d);
KERNEL(vdev_ref_depthwise_conv2d_backprop_input);
KERNEL(vdev_ref_depthwise_conv2d_backprop_filter);
GRAD(vdev_grad_depthwise_conv2d);
/* conv_depthwise_fast.c: the same three, vectorized along the channels and
 * threaded, the same bits whatever the thread count */
KERNEL(vdev_fast_depthwise_conv2d);
KERNEL(vdev_fast_depthwise_conv2d_backprop_input);
KERNEL(vdev_fast_depthwise_conv2d_backprop_filter);
void vdev_depthwise_geom_of(const struct vdev_kernel_args *a, struct vdev_conv_geom *g);

/* Element index helpers for kernels. */
/* Input k around axis ax (VDEV_AXIS_ALL, negative counted from the end) as
 * outer x len x inner (kernels_ref.c). */
void vdev_args_split_axis(const struct vdev_kernel_args *a, int k, int64_t ax, int64_t *outer,
                          int64_t *len, int64_t *inner);
/* Input k's strides over the 4 dimensions of the shape it is broadcast to
 * (its own dimensions aligned at the last, leading 1s), 0 along those of
 * size 1. */
static inline void vdev_args_strides4(const struct vdev_kernel_args *a, int k, int64_t *st)
{
    int nk = a->in_ndim[k];
    int64_t s = 1;
    for (int d = 3; d >= 0; d--) {
        int64_t len = d >= 4 - nk ? a->in_shape[k][d - (4 - nk)] : 1;
        st[d] = len == 1 ? 0 : s;
        s *= len;
    }
}
static inline int64_t vdev_args_numel(const struct vdev_kernel_args *a, int k)
{
    int64_t n = 1;
    for (int d = 0; d < a->in_ndim[k]; d++)
        n *= a->in_shape[k][d];
    return n;
}
static inline int64_t vdev_args_out_numel(const struct vdev_kernel_args *a, int k)
{
    int64_t n = 1;
    for (int d = 0; d < a->out_ndim[k]; d++)
        n *= a->out_shape[k][d];
    return n;
}
/* The examples of a loss's input 0 as Keras counts them for its mean over
 * the batch: the product of every dimension but the last (1 for 0 or 1
 * dimensions). A loss over no example is 0 (divide_no_nan). */
static inline int64_t vdev_loss_examples(const struct vdev_kernel_args *a)
{
    int64_t n = 1;
    for (int d = 0; d + 1 < a->in_ndim[0]; d++)
        n *= a->in_shape[0][d];
    return n;
}

#endif
