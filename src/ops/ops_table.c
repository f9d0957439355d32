/* ops_table.c — the op table and the public op functions.
 *
 * One row per op (see ops.h). The public functions only pack parameters and
 * call the dispatcher; everything else (placement, shapes, memory, kernels,
 * the tape) happens there. */
#include "ops/impl.h"

#include <string.h>

/* READS: the op's grad_reads (ops.h), the inputs whose values its gradient reads. */
#define FWD(ID, NAME, N, SHAPEFN, REF, GRADFN, READS)                                              \
    [ID] = {.name = NAME, .n_in = N, .flags = 0, .shape = SHAPEFN, .ref = REF, .grad = GRADFN,     \
            .grad_reads = READS}
#define FWD_FAST(ID, NAME, N, SHAPEFN, REF, FAST, GRADFN, READS)                                   \
    [ID] = {.name = NAME, .n_in = N, .flags = 0, .shape = SHAPEFN, .ref = REF, .host = FAST,       \
            .grad = GRADFN, .grad_reads = READS}
#define NOGRAD_FAST(ID, NAME, N, SHAPEFN, REF, FAST)                                               \
    [ID] = {.name = NAME, .n_in = N, .flags = VDEV_OP_NO_GRAD, .shape = SHAPEFN, .ref = REF,       \
            .host = FAST}
#define NOGRAD(ID, NAME, N, SHAPEFN, REF)                                                          \
    [ID] = {.name = NAME, .n_in = N, .flags = VDEV_OP_NO_GRAD, .shape = SHAPEFN, .ref = REF}

const struct vdev_op_def vdev_op_defs[VDEV_OP_COUNT] = {
    [VDEV_OP_MATMUL] = {.name = "MatMul", .n_in = 2, .shape = vdev_shape_matmul,
                        .ref = vdev_ref_matmul, .host = vdev_host_matmul,
                        .grad = vdev_grad_matmul, .grad_reads = 3},
    FWD_FAST(VDEV_OP_ADD, "AddV2", 2, vdev_shape_broadcast_b, vdev_ref_add, vdev_fast_add,
             vdev_grad_add, 0),
    FWD_FAST(VDEV_OP_SUB, "Sub", 2, vdev_shape_broadcast_b, vdev_ref_sub, vdev_fast_sub,
             vdev_grad_sub, 0),
    FWD_FAST(VDEV_OP_MUL, "Mul", 2, vdev_shape_broadcast_b, vdev_ref_mul, vdev_fast_mul,
             vdev_grad_mul, 3),
    FWD_FAST(VDEV_OP_DIV, "RealDiv", 2, vdev_shape_broadcast_b, vdev_ref_div, vdev_fast_div,
             vdev_grad_div, 2 | VDEV_GRAD_OUT),
    FWD_FAST(VDEV_OP_ADD_SCALAR, "AddScalar", 1, vdev_shape_same_as_in0, vdev_ref_add_scalar,
             vdev_fast_add_scalar, vdev_grad_add_scalar, 0),
    FWD_FAST(VDEV_OP_MUL_SCALAR, "MulScalar", 1, vdev_shape_same_as_in0, vdev_ref_mul_scalar,
             vdev_fast_mul_scalar, vdev_grad_mul_scalar, 0),
    FWD(VDEV_OP_POW_SCALAR, "PowScalar", 1, vdev_shape_same_as_in0, vdev_ref_pow_scalar,
        vdev_grad_pow_scalar, 1),
    FWD_FAST(VDEV_OP_RELU, "Relu", 1, vdev_shape_same_as_in0, vdev_ref_relu, vdev_fast_relu,
             vdev_grad_relu, 1),
    FWD_FAST(VDEV_OP_TANH, "Tanh", 1, vdev_shape_same_as_in0, vdev_ref_tanh, vdev_fast_tanh,
             vdev_grad_tanh, VDEV_GRAD_OUT),
    FWD_FAST(VDEV_OP_SIGMOID, "Sigmoid", 1, vdev_shape_same_as_in0, vdev_ref_sigmoid,
             vdev_fast_sigmoid, vdev_grad_sigmoid, VDEV_GRAD_OUT),
    FWD_FAST(VDEV_OP_EXP, "Exp", 1, vdev_shape_same_as_in0, vdev_ref_exp, vdev_fast_exp,
             vdev_grad_exp, VDEV_GRAD_OUT),
    FWD_FAST(VDEV_OP_LOG, "Log", 1, vdev_shape_same_as_in0, vdev_ref_log, vdev_fast_log,
             vdev_grad_log, 1),
    FWD(VDEV_OP_SOFTMAX, "Softmax", 1, vdev_shape_softmax, vdev_ref_softmax,
        vdev_grad_softmax, VDEV_GRAD_OUT),
    FWD(VDEV_OP_LOG_SOFTMAX, "LogSoftmax", 1, vdev_shape_softmax, vdev_ref_log_softmax,
        vdev_grad_log_softmax, VDEV_GRAD_OUT),
    FWD(VDEV_OP_SUM, "Sum", 1, vdev_shape_reduce, vdev_ref_sum, vdev_grad_sum, 0),
    FWD(VDEV_OP_MEAN, "Mean", 1, vdev_shape_reduce, vdev_ref_mean, vdev_grad_mean, 0),
    [VDEV_OP_RESHAPE] = {.name = "Reshape", .n_in = 1, .flags = VDEV_OP_VIEW,
                         .shape = vdev_shape_reshape, .ref = vdev_ref_identity,
                         .grad = vdev_grad_reshape, .grad_reads = 0},
    FWD(VDEV_OP_TRANSPOSE, "Transpose", 1, vdev_shape_transpose, vdev_ref_transpose,
        vdev_grad_transpose, 0),
    FWD_FAST(VDEV_OP_MSE, "MeanSquaredError", 2, vdev_shape_scalar_loss, vdev_ref_mse,
             vdev_fast_mse, vdev_grad_mse, 3),
    [VDEV_OP_SOFTMAX_CE] = {.name = "SparseSoftmaxCrossEntropyWithLogits", .n_in = 2,
                            .shape = vdev_shape_softmax_ce, .ref = vdev_ref_softmax_ce,
                            .grad = vdev_grad_softmax_ce, .grad_reads = 3,
                            .check = vdev_check_ce_labels},
    NOGRAD(VDEV_OP_ARGMAX, "ArgMax", 1, vdev_shape_argmax, vdev_ref_argmax),
    FWD_FAST(VDEV_OP_IDENTITY, "Identity", 1, vdev_shape_identity, vdev_ref_identity,
             vdev_fast_identity, vdev_grad_identity, 0),
    NOGRAD_FAST(VDEV_OP_RELU_GRAD, "ReluGrad", 2, vdev_shape_same_as_in0, vdev_ref_relu_grad,
                vdev_fast_relu_grad),
    NOGRAD(VDEV_OP_TANH_GRAD, "TanhGrad", 2, vdev_shape_same_as_in0, vdev_ref_tanh_grad),
    NOGRAD(VDEV_OP_SIGMOID_GRAD, "SigmoidGrad", 2, vdev_shape_same_as_in0,
           vdev_ref_sigmoid_grad),
    NOGRAD(VDEV_OP_SOFTMAX_GRAD, "SoftmaxGrad", 2, vdev_shape_same_as_in0,
           vdev_ref_softmax_grad),
    NOGRAD(VDEV_OP_LOG_SOFTMAX_GRAD, "LogSoftmaxGrad", 2, vdev_shape_same_as_in0,
           vdev_ref_log_softmax_grad),
    NOGRAD(VDEV_OP_BROADCAST, "BroadcastTo", 2, vdev_shape_broadcast, vdev_ref_broadcast),
    NOGRAD_FAST(VDEV_OP_MSE_GRAD, "MeanSquaredErrorGrad", 3, vdev_shape_mse_grad,
                vdev_ref_mse_grad, vdev_fast_mse_grad),
    NOGRAD(VDEV_OP_SOFTMAX_CE_GRAD, "SparseSoftmaxCrossEntropyGrad", 3,
           vdev_shape_softmax_ce_grad, vdev_ref_softmax_ce_grad),
    NOGRAD_FAST(VDEV_OP_REDUCE_ROWS, "ReduceToShape", 2, vdev_shape_reduce_rows,
                vdev_ref_reduce_rows, vdev_fast_reduce_rows),
    [VDEV_OP_SGD_UPDATE] = {.name = "ApplyMomentum", .n_in = 3,
                            .flags = VDEV_OP_NO_GRAD | VDEV_OP_INPLACE,
                            .shape = vdev_shape_update, .ref = vdev_ref_sgd_update,
                            .host = vdev_fast_sgd_update},
    [VDEV_OP_ADAM_UPDATE] = {.name = "ApplyAdam", .n_in = 4,
                             .flags = VDEV_OP_NO_GRAD | VDEV_OP_INPLACE,
                             .shape = vdev_shape_update, .ref = vdev_ref_adam_update,
                             .host = vdev_fast_adam_update},
    FWD_FAST(VDEV_OP_SQRT, "Sqrt", 1, vdev_shape_same_as_in0, vdev_ref_sqrt, vdev_fast_sqrt,
             vdev_grad_sqrt, VDEV_GRAD_OUT),
    /* the reference kernels serve the host (and simulated GPUs) too */
    [VDEV_OP_AMSGRAD_MOMENTS] = {.name = "AmsgradMoments", .n_in = 4,
                                 .flags = VDEV_OP_NO_GRAD | VDEV_OP_INPLACE,
                                 .shape = vdev_shape_update, .ref = vdev_ref_amsgrad_moments},
    [VDEV_OP_AMSGRAD_APPLY] = {.name = "ApplyAdamWithAmsgrad", .n_in = 3,
                               .flags = VDEV_OP_NO_GRAD | VDEV_OP_INPLACE,
                               .shape = vdev_shape_update, .ref = vdev_ref_amsgrad_apply},
    NOGRAD(VDEV_OP_CLIP_GRAD, "ClipGradient", 1, vdev_shape_same_as_in0, vdev_ref_clip_grad),
    /* a copy of a range: the reference is the host's copy, a GPU copies */
    FWD(VDEV_OP_SLICE, "Slice", 1, vdev_shape_slice, vdev_ref_slice, vdev_grad_slice, 0),
    NOGRAD(VDEV_OP_SLICE_GRAD, "SliceGrad", 2, vdev_shape_slice_grad, vdev_ref_slice_grad),
    /* 2-D convolution and pooling (conv.c, conv_kernels.c, conv_fast.c, conv_grads.c) */
    FWD_FAST(VDEV_OP_CONV2D, "Conv2D", 2, vdev_shape_conv, vdev_ref_conv2d, vdev_fast_conv2d,
             vdev_grad_conv2d, 3),
    FWD(VDEV_OP_MAX_POOL, "MaxPool", 1, vdev_shape_conv, vdev_ref_max_pool, vdev_grad_max_pool,
        1 | VDEV_GRAD_OUT),
    FWD(VDEV_OP_AVG_POOL, "AvgPool", 1, vdev_shape_conv, vdev_ref_avg_pool, vdev_grad_avg_pool,
        0),
    NOGRAD_FAST(VDEV_OP_CONV2D_BACKPROP_INPUT, "Conv2DBackpropInput", 3, vdev_shape_conv_grad,
                vdev_ref_conv2d_backprop_input, vdev_fast_conv2d_backprop_input),
    NOGRAD_FAST(VDEV_OP_CONV2D_BACKPROP_FILTER, "Conv2DBackpropFilter", 3,
                vdev_shape_conv_grad, vdev_ref_conv2d_backprop_filter,
                vdev_fast_conv2d_backprop_filter),
    NOGRAD(VDEV_OP_MAX_POOL_GRAD, "MaxPoolGrad", 3, vdev_shape_conv_grad,
           vdev_ref_max_pool_grad),
    NOGRAD(VDEV_OP_AVG_POOL_GRAD, "AvgPoolGrad", 2, vdev_shape_conv_grad,
           vdev_ref_avg_pool_grad),
    /* strided slices (strided.c) */
    FWD(VDEV_OP_STRIDED_SLICE, "StridedSlice", 1, vdev_shape_strided_slice,
        vdev_ref_strided_slice, vdev_grad_strided_slice, 0),
    NOGRAD(VDEV_OP_STRIDED_SLICE_GRAD, "StridedSliceGrad", 2, vdev_shape_strided_slice_grad,
           vdev_ref_strided_slice_grad),
    /* joins (concat.c): four inputs, the first i[1] used */
    FWD(VDEV_OP_CONCAT, "ConcatV2", 4, vdev_shape_concat, vdev_ref_concat, vdev_grad_concat, 0),
    FWD(VDEV_OP_PACK, "Pack", 4, vdev_shape_pack, vdev_ref_concat, vdev_grad_pack, 0),
    /* gathers (gather.c): the indices checked where the host reads them */
    [VDEV_OP_GATHER] = {.name = "GatherV2", .n_in = 2, .shape = vdev_shape_gather,
                        .ref = vdev_ref_gather, .grad = vdev_grad_gather, .grad_reads = 2,
                        .check = vdev_check_gather_indices},
    NOGRAD(VDEV_OP_GATHER_GRAD, "GatherGrad", 3, vdev_shape_gather_grad, vdev_ref_gather_grad),
    /* elementwise extrema (kernels_ref.c, kernels_fast.c; the gradient op in maxmin.c) */
    FWD_FAST(VDEV_OP_MAXIMUM, "Maximum", 2, vdev_shape_broadcast_b, vdev_ref_maximum,
             vdev_fast_maximum, vdev_grad_maximum, 3),
    FWD_FAST(VDEV_OP_MINIMUM, "Minimum", 2, vdev_shape_broadcast_b, vdev_ref_minimum,
             vdev_fast_minimum, vdev_grad_minimum, 3),
    NOGRAD(VDEV_OP_MAXMIN_GRAD, "MaximumMinimumGrad", 3, vdev_shape_maxmin_grad,
           vdev_ref_maxmin_grad),
    /* depthwise 2-D convolution (conv_depthwise.c) */
    FWD_FAST(VDEV_OP_DEPTHWISE_CONV2D, "DepthwiseConv2dNative", 2, vdev_shape_depthwise,
             vdev_ref_depthwise_conv2d, vdev_fast_depthwise_conv2d, vdev_grad_depthwise_conv2d,
             3),
    NOGRAD_FAST(VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT, "DepthwiseConv2dNativeBackpropInput", 3,
                vdev_shape_depthwise_grad, vdev_ref_depthwise_conv2d_backprop_input,
                vdev_fast_depthwise_conv2d_backprop_input),
    NOGRAD_FAST(VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER, "DepthwiseConv2dNativeBackpropFilter",
                3, vdev_shape_depthwise_grad, vdev_ref_depthwise_conv2d_backprop_filter,
                vdev_fast_depthwise_conv2d_backprop_filter),
    /* the transposed 2-D convolution (conv_transpose.c): its gradient reads both inputs */
    [VDEV_OP_BATCH_MATMUL] = {.name = "BatchMatMulV2", .n_in = 2,
                              .shape = vdev_shape_batch_matmul, .ref = vdev_ref_batch_matmul,
                              .host = vdev_host_batch_matmul, .grad = vdev_grad_batch_matmul,
                              .grad_reads = 3},
    FWD(VDEV_OP_ERF, "Erf", 1, vdev_shape_same_as_in0, vdev_ref_erf, vdev_grad_erf, 1),
    FWD(VDEV_OP_SOFTPLUS, "Softplus", 1, vdev_shape_same_as_in0, vdev_ref_softplus,
        vdev_grad_softplus, 1),
    FWD_FAST(VDEV_OP_CONV2D_TRANSPOSE, "Conv2DTranspose", 2, vdev_shape_conv2d_transpose,
             vdev_ref_conv2d_transpose, vdev_fast_conv2d_transpose, vdev_grad_conv2d_transpose,
             3),
    /* the fused LSTM cell (lstm_cell.c): LSTMGates' gradient reads its
     * output, the cell's both inputs */
    FWD_FAST(VDEV_OP_LSTM_GATES, "LSTMGates", 1, vdev_shape_lstm_gates, vdev_ref_lstm_gates,
             vdev_fast_lstm_gates, vdev_grad_lstm_gates, VDEV_GRAD_OUT),
    NOGRAD_FAST(VDEV_OP_LSTM_GATES_GRAD, "LSTMGatesGrad", 2, vdev_shape_lstm_gates,
                vdev_ref_lstm_gates_grad, vdev_fast_lstm_gates_grad),
    FWD_FAST(VDEV_OP_LSTM_CELL_STATE, "LSTMCellState", 2, vdev_shape_lstm_cell,
             vdev_ref_lstm_cell_state, vdev_fast_lstm_cell_state, vdev_grad_lstm_cell, 3),
    FWD_FAST(VDEV_OP_LSTM_CELL_OUTPUT, "LSTMCellOutput", 2, vdev_shape_lstm_cell,
             vdev_ref_lstm_cell_output, vdev_fast_lstm_cell_output, vdev_grad_lstm_cell, 3),
    NOGRAD_FAST(VDEV_OP_LSTM_CELL_GRAD, "LSTMCellGrad", 3, vdev_shape_lstm_cell_grad,
                vdev_ref_lstm_cell_grad, vdev_fast_lstm_cell_grad),
    /* the fused GRU cell (gru_cell.c): GRUGates' gradient reads its output
     * and inner, GRUCellOutput's both inputs */
    FWD_FAST(VDEV_OP_GRU_GATES, "GRUGates", 2, vdev_shape_gru_gates, vdev_ref_gru_gates,
             vdev_fast_gru_gates, vdev_grad_gru, VDEV_GRAD_OUT | 2),
    NOGRAD_FAST(VDEV_OP_GRU_GATES_GRAD, "GRUGatesGrad", 3, vdev_shape_gru_gates_grad,
                vdev_ref_gru_gates_grad, vdev_fast_gru_gates_grad),
    FWD_FAST(VDEV_OP_GRU_CELL_OUTPUT, "GRUCellOutput", 2, vdev_shape_gru_cell,
             vdev_ref_gru_cell_output, vdev_fast_gru_cell_output, vdev_grad_gru, 3),
    NOGRAD_FAST(VDEV_OP_GRU_CELL_GRAD, "GRUCellGrad", 3, vdev_shape_gru_cell_grad,
                vdev_ref_gru_cell_grad, vdev_fast_gru_cell_grad),
    /* tf.where on float masks (select.c): the gradient reads the mask */
    FWD(VDEV_OP_SELECT_MASK, "SelectByMask", 3, vdev_shape_select_mask, vdev_ref_select_mask,
        vdev_grad_select, 1),
    NOGRAD(VDEV_OP_SELECT_MASK_GRAD, "SelectByMaskGrad", 2, vdev_shape_select_mask_grad,
           vdev_ref_select_mask_grad),
    /* comparisons, logic, casts and tf.where (compare.c) */
    NOGRAD(VDEV_OP_EQUAL, "Equal", 2, vdev_shape_compare, vdev_ref_compare),
    NOGRAD(VDEV_OP_NOT_EQUAL, "NotEqual", 2, vdev_shape_compare, vdev_ref_compare),
    NOGRAD(VDEV_OP_LESS, "Less", 2, vdev_shape_compare, vdev_ref_compare),
    NOGRAD(VDEV_OP_LESS_EQUAL, "LessEqual", 2, vdev_shape_compare, vdev_ref_compare),
    NOGRAD(VDEV_OP_GREATER, "Greater", 2, vdev_shape_compare, vdev_ref_compare),
    NOGRAD(VDEV_OP_GREATER_EQUAL, "GreaterEqual", 2, vdev_shape_compare, vdev_ref_compare),
    NOGRAD(VDEV_OP_LOGICAL_AND, "LogicalAnd", 2, vdev_shape_compare, vdev_ref_compare),
    NOGRAD(VDEV_OP_LOGICAL_OR, "LogicalOr", 2, vdev_shape_compare, vdev_ref_compare),
    NOGRAD(VDEV_OP_LOGICAL_NOT, "LogicalNot", 1, vdev_shape_logical_not, vdev_ref_logical_not),
    NOGRAD(VDEV_OP_CAST, "Cast", 1, vdev_shape_cast, vdev_ref_cast),
    /* the gradient reads the condition */
    FWD(VDEV_OP_SELECT_V2, "SelectV2", 3, vdev_shape_select_v2, vdev_ref_select_v2,
        vdev_grad_select, 1),
    /* tf.reduce_max, reduce_min, abs, sign (extreme.c): Max's and Min's
     * gradient reads the input and the output */
    FWD(VDEV_OP_MAX, "Max", 1, vdev_shape_reduce, vdev_ref_max, vdev_grad_extreme,
        1 | VDEV_GRAD_OUT),
    FWD(VDEV_OP_MIN, "Min", 1, vdev_shape_reduce, vdev_ref_min, vdev_grad_extreme,
        1 | VDEV_GRAD_OUT),
    FWD(VDEV_OP_ABS, "Abs", 1, vdev_shape_abs_sign, vdev_ref_abs, vdev_grad_abs, 1),
    FWD(VDEV_OP_SIGN, "Sign", 1, vdev_shape_abs_sign, vdev_ref_sign, vdev_grad_sign, 0),
    /* tf.floor, ceil, round, floordiv, floormod (floor.c) */
    NOGRAD(VDEV_OP_FLOOR, "Floor", 1, vdev_shape_abs_sign, vdev_ref_rounding),
    NOGRAD(VDEV_OP_CEIL, "Ceil", 1, vdev_shape_abs_sign, vdev_ref_rounding),
    NOGRAD(VDEV_OP_ROUND, "Round", 1, vdev_shape_abs_sign, vdev_ref_rounding),
    NOGRAD(VDEV_OP_FLOOR_DIV, "FloorDiv", 2, vdev_shape_floor_binary, vdev_ref_floor_binary),
    FWD(VDEV_OP_FLOOR_MOD, "FloorMod", 2, vdev_shape_floor_binary, vdev_ref_floor_binary,
        vdev_grad_floor_mod, 3),
    /* the tape's sum of a slice's gradient (strided.c, autograd/tape.c) */
    [VDEV_OP_STRIDED_SLICE_GRAD_ADD] = {.name = "StridedSliceGradAdd", .n_in = 2,
                                        .flags = VDEV_OP_NO_GRAD | VDEV_OP_INPLACE,
                                        .shape = vdev_shape_strided_slice_grad_add,
                                        .ref = vdev_ref_strided_slice_grad_add},
};

/* ---- the public ops ---- */

/* The handles are looked up here, inline, rather than through vdev_op_run's
 * loop: it is most of what checked handles cost an op. A NULL input keeps
 * the first error; a dead or stale one sets its own. */
static __attribute__((noinline)) vdev_tensor_t *bad_input(enum vdev_op op, const vdev_tensor_t *h,
                                                          int k)
{
    if (h)
        vdev_tens_input_error(h, vdev_op_defs[op].name, k);
    return NULL;
}

static vdev_tensor_t *run1(enum vdev_op op, const vdev_tensor_t *a, const struct vdev_op_params *p)
{
    const struct vdev_tens *t = vdev_tens_peek(a);
    if (!t || !vdev_tens_current(t))
        return bad_input(op, a, 0);
    return vdev_op_result(op, &a, 1, &t, vdev_op_exec(op, &t, 1, p));
}

static vdev_tensor_t *run2(enum vdev_op op, const vdev_tensor_t *a, const vdev_tensor_t *b,
                           const struct vdev_op_params *p)
{
    const struct vdev_tens *t[2] = {vdev_tens_peek(a), vdev_tens_peek(b)};
    if (!t[0] || !vdev_tens_current(t[0]))
        return bad_input(op, a, 0);
    if (!t[1] || t[1]->rgen != t[0]->rgen) /* the same runtime as input 0: the current one */
        return bad_input(op, b, 1);
    const vdev_tensor_t *h[2] = {a, b};
    return vdev_op_result(op, h, 2, t, vdev_op_exec(op, t, 2, p));
}

VDEV_API vdev_tensor_t *vdev_matmul(const vdev_tensor_t *a, const vdev_tensor_t *b, bool ta,
                                    bool tb)
{
    struct vdev_op_params p = {.i = {ta, tb}};
    return run2(VDEV_OP_MATMUL, a, b, &p);
}

vdev_tensor_t *vdev_batch_matmul3(const vdev_tensor_t *x, const vdev_tensor_t *y, int ta, int tb)
{
    struct vdev_op_params p = {.i = {ta != 0, tb != 0}};
    return run2(VDEV_OP_BATCH_MATMUL, x, y, &p);
}

VDEV_API vdev_tensor_t *vdev_add(const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    return run2(VDEV_OP_ADD, a, b, NULL);
}
VDEV_API vdev_tensor_t *vdev_sub(const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    return run2(VDEV_OP_SUB, a, b, NULL);
}
VDEV_API vdev_tensor_t *vdev_mul(const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    return run2(VDEV_OP_MUL, a, b, NULL);
}
VDEV_API vdev_tensor_t *vdev_div(const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    return run2(VDEV_OP_DIV, a, b, NULL);
}
VDEV_API vdev_tensor_t *vdev_maximum(const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    return run2(VDEV_OP_MAXIMUM, x, y, NULL);
}
VDEV_API vdev_tensor_t *vdev_minimum(const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    return run2(VDEV_OP_MINIMUM, x, y, NULL);
}

VDEV_API vdev_tensor_t *vdev_add_scalar(const vdev_tensor_t *a, float s)
{
    struct vdev_op_params p = {.f = {s}};
    return run1(VDEV_OP_ADD_SCALAR, a, &p);
}
VDEV_API vdev_tensor_t *vdev_mul_scalar(const vdev_tensor_t *a, float s)
{
    struct vdev_op_params p = {.f = {s}};
    return run1(VDEV_OP_MUL_SCALAR, a, &p);
}
VDEV_API vdev_tensor_t *vdev_pow_scalar(const vdev_tensor_t *a, float s)
{
    struct vdev_op_params p = {.f = {s}};
    return run1(VDEV_OP_POW_SCALAR, a, &p);
}

VDEV_API vdev_tensor_t *vdev_relu(const vdev_tensor_t *a) { return run1(VDEV_OP_RELU, a, NULL); }
VDEV_API vdev_tensor_t *vdev_tanh(const vdev_tensor_t *a) { return run1(VDEV_OP_TANH, a, NULL); }
VDEV_API vdev_tensor_t *vdev_sigmoid(const vdev_tensor_t *a)
{
    return run1(VDEV_OP_SIGMOID, a, NULL);
}
VDEV_API vdev_tensor_t *vdev_exp(const vdev_tensor_t *a) { return run1(VDEV_OP_EXP, a, NULL); }
VDEV_API vdev_tensor_t *vdev_log(const vdev_tensor_t *a) { return run1(VDEV_OP_LOG, a, NULL); }
VDEV_API vdev_tensor_t *vdev_erf(const vdev_tensor_t *a) { return run1(VDEV_OP_ERF, a, NULL); }
VDEV_API vdev_tensor_t *vdev_softplus(const vdev_tensor_t *a)
{
    return run1(VDEV_OP_SOFTPLUS, a, NULL);
}
/* Not VDEV_API here: exported once include/vdev.h declares it (ops.h). */
vdev_tensor_t *vdev_sqrt(const vdev_tensor_t *a) { return run1(VDEV_OP_SQRT, a, NULL); }
VDEV_API vdev_tensor_t *vdev_softmax(const vdev_tensor_t *a)
{
    return run1(VDEV_OP_SOFTMAX, a, NULL);
}
VDEV_API vdev_tensor_t *vdev_log_softmax(const vdev_tensor_t *a)
{
    return run1(VDEV_OP_LOG_SOFTMAX, a, NULL);
}

VDEV_API vdev_tensor_t *vdev_sum(const vdev_tensor_t *a, int axis, bool keepdims)
{
    struct vdev_op_params p = {.i = {axis, keepdims}};
    return run1(VDEV_OP_SUM, a, &p);
}
VDEV_API vdev_tensor_t *vdev_mean(const vdev_tensor_t *a, int axis, bool keepdims)
{
    struct vdev_op_params p = {.i = {axis, keepdims}};
    return run1(VDEV_OP_MEAN, a, &p);
}
VDEV_API vdev_tensor_t *vdev_sum_all(const vdev_tensor_t *a)
{
    struct vdev_op_params p = {.i = {VDEV_AXIS_ALL, 0}};
    return run1(VDEV_OP_SUM, a, &p);
}
VDEV_API vdev_tensor_t *vdev_mean_all(const vdev_tensor_t *a)
{
    struct vdev_op_params p = {.i = {VDEV_AXIS_ALL, 0}};
    return run1(VDEV_OP_MEAN, a, &p);
}

VDEV_API vdev_tensor_t *vdev_reshape(const vdev_tensor_t *a, const int64_t *shape, int ndim)
{
    if (!a)
        return NULL;
    if (ndim < 0 || ndim > VDEV_MAX_DIMS) {
        vdev_error(VDEV_ERR_INVALID_ARG, "Reshape: tensors have 0 to %d dimensions, not %d",
                   VDEV_MAX_DIMS, ndim);
        return NULL;
    }
    if (ndim && !shape) {
        vdev_error(VDEV_ERR_INVALID_ARG, "Reshape: shape is NULL and ndim %d", ndim);
        return NULL;
    }
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.f[0] = ndim;
    for (int i = 0; i < ndim; i++)
        p.i[i] = shape[i];
    return run1(VDEV_OP_RESHAPE, a, &p);
}

/* Rows [begin, begin + size) of axis 0: the Slice op, one device copy. */
VDEV_API vdev_tensor_t *vdev_slice_rows(const vdev_tensor_t *a, int64_t begin, int64_t size)
{
    struct vdev_op_params p = {.i = {begin, size}};
    return run1(VDEV_OP_SLICE, a, &p);
}

/* Row `index` without its axis: Slice of one row, then Reshape (a view of
 * the slice) to the rest of the shape. The index is checked here, in the
 * words of TensorFlow's StridedSlice (x[i]), before anything runs. */
VDEV_API vdev_tensor_t *vdev_row(const vdev_tensor_t *a, int64_t index)
{
    const struct vdev_tens *t = vdev_tens_peek(a);
    if (!t || !vdev_tens_current(t))
        return bad_input(VDEV_OP_SLICE, a, 0);
    if (t->ndim < 1) {
        vdev_error(VDEV_ERR_INVALID_ARG, "StridedSlice: Attempting to slice scalar input.");
        return NULL;
    }
    if (index < 0 || index >= t->shape[0]) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "StridedSlice: slice index %lld of dimension 0 out of bounds.",
                   (long long)index);
        return NULL;
    }
    struct vdev_op_params ps = {.i = {index, 1}}, pr;
    memset(&pr, 0, sizeof pr);
    pr.f[0] = t->ndim - 1;
    for (int d = 1; d < t->ndim; d++)
        pr.i[d - 1] = t->shape[d];
    struct vdev_tens *s = vdev_op_exec(VDEV_OP_SLICE, &t, 1, &ps), *r = NULL;
    if (s) {
        const struct vdev_tens *in = s;
        r = vdev_op_exec(VDEV_OP_RESHAPE, &in, 1, &pr);
        vdev_tens_drop(s); /* the view holds it */
    }
    return vdev_op_result(VDEV_OP_SLICE, &a, 1, &t, r);
}

VDEV_API vdev_tensor_t *vdev_transpose(const vdev_tensor_t *a)
{
    return run1(VDEV_OP_TRANSPOSE, a, NULL);
}
VDEV_API vdev_tensor_t *vdev_mse(const vdev_tensor_t *pred, const vdev_tensor_t *target)
{
    return run2(VDEV_OP_MSE, pred, target, NULL);
}
VDEV_API vdev_tensor_t *vdev_softmax_cross_entropy(const vdev_tensor_t *logits,
                                                   const vdev_tensor_t *labels)
{
    return run2(VDEV_OP_SOFTMAX_CE, logits, labels, NULL);
}
VDEV_API vdev_tensor_t *vdev_argmax(const vdev_tensor_t *a) { return run1(VDEV_OP_ARGMAX, a, NULL); }
VDEV_API vdev_tensor_t *vdev_identity(const vdev_tensor_t *a)
{
    return run1(VDEV_OP_IDENTITY, a, NULL);
}

VDEV_API vdev_tensor_t *vdev_tensor_to(const vdev_tensor_t *h, const char *device)
{
    if (!h)
        return NULL;
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_tensor_to");
    struct vdev_ldev *d;
    if (!t || vdev_runtime_find(device, &d) != VDEV_OK)
        return NULL;
    return vdev_tens_handle(vdev_op_copy_to(t, d, 1));
}

VDEV_API vdev_tensor_t *vdev_stop_gradient(const vdev_tensor_t *h)
{
    if (!h)
        return NULL;
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_stop_gradient");
    return t ? vdev_tens_handle(vdev_op_copy_to(t, t->dev, 0)) : NULL;
}
