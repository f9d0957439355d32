/* vdev/ops.h — the ops on tensors: matrix product, elementwise arithmetic
 * with numpy's broadcasting, activations, softmax, reductions, reshape,
 * transpose (any permutation), concat and stack, slices of rows and strided
 * slices, gathers of rows, the losses (mean squared error, softmax
 * cross-entropy), argmax, and 2-D convolution and pooling. Each runs on the
 * device placement picks (vdev/placement.h) and a recording tape
 * (vdev/autograd.h) differentiates it. Part of the public API:
 * vdev.h includes it, and it may be included alone (it includes the parts it
 * builds on). */
#ifndef VDEV_VDEV_OPS_H
#define VDEV_VDEV_OPS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== ops =================================================================
 * Each returns a new tensor, or NULL (see vdev/tensor.h). A shape mismatch
 * is VDEV_ERR_SHAPE naming both shapes, except where an op's comment says
 * otherwise: vdev_concat's and vdev_stack's are VDEV_ERR_INVALID_ARG, the
 * InvalidArgument of TensorFlow's ConcatV2 and Pack kernels. */

VDEV_API vdev_tensor_t *vdev_matmul(const vdev_tensor_t *a, const vdev_tensor_t *b, bool trans_a,
                                    bool trans_b);
/* Elementwise, broadcasting by numpy's (and TensorFlow's) rule: the output
 * has the larger rank, each dimension 1 on one side takes the other's
 * ([5] + [1,5] is [1,5]; [3,1] * [1,4] is [3,4]), and each input's gradient is
 * summed back to its own shape. On a CUDA GPU only the same shape, a row
 * over the last axis and a one-element tensor run for now (another form is
 * VDEV_ERR_UNSUPPORTED there). */
VDEV_API vdev_tensor_t *vdev_add(const vdev_tensor_t *a, const vdev_tensor_t *b);
VDEV_API vdev_tensor_t *vdev_sub(const vdev_tensor_t *a, const vdev_tensor_t *b);
VDEV_API vdev_tensor_t *vdev_mul(const vdev_tensor_t *a, const vdev_tensor_t *b);
VDEV_API vdev_tensor_t *vdev_div(const vdev_tensor_t *a, const vdev_tensor_t *b);
/* TensorFlow's Maximum and Minimum (tf.maximum, tf.minimum): f32, broadcast
 * as vdev_add. A NaN in x or y gives NaN (x's if both are NaN), as
 * TensorFlow's CPU kernel; of an equal pair, -0 and +0 included, the result
 * is x. The gradient, as TensorFlow's: dy goes to x where x >= y (Minimum:
 * x <= y) and to y elsewhere (so to y where either is NaN), each summed back
 * to its input's shape. */
VDEV_API vdev_tensor_t *vdev_maximum(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_minimum(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_add_scalar(const vdev_tensor_t *a, float s);
VDEV_API vdev_tensor_t *vdev_mul_scalar(const vdev_tensor_t *a, float s);
VDEV_API vdev_tensor_t *vdev_pow_scalar(const vdev_tensor_t *a, float p);
/* std::sqrt elementwise (TensorFlow's Sqrt): sqrt(-0) = -0, below 0 NaN. */
VDEV_API vdev_tensor_t *vdev_sqrt(const vdev_tensor_t *a);
/* The error function elementwise (TensorFlow's Erf, tf.math.erf), computed
 * in double and rounded once; its gradient is TensorFlow's, dy 2/sqrt(pi)
 * exp(-x^2). The op under vdev.nn.gelu (Keras's "gelu"). */
VDEV_API vdev_tensor_t *vdev_erf(const vdev_tensor_t *a);
/* log(exp(x) + 1) elementwise (TensorFlow's Softplus, tf.math.softplus) as
 * its kernel computes it: x above 13.94, exp(x) below -13.94 (so a very
 * negative x keeps its tiny value instead of rounding 1 + e^x to 1), and
 * log(exp(x) + 1) between, in double, rounded once; its gradient is
 * TensorFlow's SoftplusGrad, dy / (exp(-x) + 1). */
VDEV_API vdev_tensor_t *vdev_softplus(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_relu(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_tanh(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_sigmoid(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_exp(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_log(const vdev_tensor_t *a);
/* Over the last axis. */
VDEV_API vdev_tensor_t *vdev_softmax(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_log_softmax(const vdev_tensor_t *a);
/* Over one axis (negative from the end), keeping it as size 1 if keepdims.
 * f32; vdev_sum takes i32 too (the sum wraps as two's complement, as
 * TensorFlow's). */
VDEV_API vdev_tensor_t *vdev_sum(const vdev_tensor_t *a, int axis, bool keepdims);
VDEV_API vdev_tensor_t *vdev_mean(const vdev_tensor_t *a, int axis, bool keepdims);
/* Over all elements: a 0-dimensional tensor. */
VDEV_API vdev_tensor_t *vdev_sum_all(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_mean_all(const vdev_tensor_t *a);
/* TensorFlow's Max and Min (tf.reduce_max, tf.reduce_min) over one axis or
 * all (_all: a 0-dimensional tensor), f32 or i32, the input's dtype out: a
 * NaN in a row gives NaN, as TensorFlow's eager kernels; a row of no element
 * gives the identity, -inf for max and +inf for min (INT32_MIN and
 * INT32_MAX for i32). The gradient is TensorFlow's: dy shared equally among
 * the elements equal to the result. Errors as vdev_sum's ("Max: Invalid
 * reduction dimension (2 for input with 2 dimension(s)"; a bool: "Max: input
 * #0 (shape [2]) is bool, expected float"). */
VDEV_API vdev_tensor_t *vdev_max(const vdev_tensor_t *a, int axis, bool keepdims);
VDEV_API vdev_tensor_t *vdev_min(const vdev_tensor_t *a, int axis, bool keepdims);
VDEV_API vdev_tensor_t *vdev_max_all(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_min_all(const vdev_tensor_t *a);
/* tf.abs and tf.sign (ops Abs, Sign), f32 or i32: |x| with the sign bit of a
 * float cleared (|-0| is +0, NaN stays NaN; an int32's |INT32_MIN| is
 * INT32_MIN, as two's complement gives); sign -1, 0 or 1 as numpy's (+0 for
 * -0, NaN for NaN). Gradients TensorFlow's: dy sign(x) for abs, zeros for
 * sign. */
VDEV_API vdev_tensor_t *vdev_abs(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_sign(const vdev_tensor_t *a);
/* tf.floor, tf.math.ceil, tf.math.round (Floor, Ceil, Round: half to even,
 * as TensorFlow's), f32 (an i32 tensor gives its own values), no gradient;
 * tf.math.floordiv and floormod (FloorDiv, FloorMod: Python's // and %), f32
 * or i32, broadcast as vdev_add: floor(x / y), and the remainder with y's
 * sign (fmod moved by y), as TensorFlow's; an i32 division by zero gives 0
 * (TensorFlow's CPU kernel fails the op), INT32_MIN // -1 wraps to
 * INT32_MIN. FloorDiv has no gradient; FloorMod's is TensorFlow's (dy for
 * x, -dy floor(x / y) for y). */
VDEV_API vdev_tensor_t *vdev_floor(const vdev_tensor_t *x);
VDEV_API vdev_tensor_t *vdev_ceil(const vdev_tensor_t *x);
VDEV_API vdev_tensor_t *vdev_round(const vdev_tensor_t *x);
VDEV_API vdev_tensor_t *vdev_floor_div(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_floor_mod(const vdev_tensor_t *x, const vdev_tensor_t *y);
/* Same elements, new shape; one dimension may be -1. VDEV_ERR_INVALID_ARG
 * for ndim outside 0..4 ("Reshape: tensors have 0 to 4 dimensions, not 5")
 * or shape NULL with ndim > 0 ("Reshape: shape is NULL and ndim 2");
 * VDEV_ERR_SHAPE, in TensorFlow's words, for a shape of another number of
 * elements, two -1s or a negative size. */
VDEV_API vdev_tensor_t *vdev_reshape(const vdev_tensor_t *a, const int64_t *shape, int ndim);
/* [m,n] -> [n,m] of a 2-D tensor of any dtype (TensorFlow's Transpose with
 * perm {1, 0}, the name the placement log prints); VDEV_ERR_SHAPE
 * "Transpose: bad input shape [2] (Transpose takes a 2-dimensional tensor)"
 * for another rank. vdev_transpose_perm takes any permutation. */
VDEV_API vdev_tensor_t *vdev_transpose(const vdev_tensor_t *a);
/* TensorFlow's Transpose, tf.transpose(a, perm), for a tensor of any dtype
 * and 0 to 4 dimensions: output axis d is a's axis perm[d] (n entries, one
 * per axis), so the output's shape is a's permuted; a new tensor (a copy,
 * even for 0 or 1 dimensions or the identity permutation; on the host,
 * copied in cache-sized tiles). Its gradient is
 * the transpose by the inverse permutation. Errors, in TensorFlow's words
 * after "Transpose: ", VDEV_ERR_INVALID_ARG: "transpose expects a vector of
 * size 3. But input(1) is a vector of size 2" (n other than a's rank), "3
 * is out of range [0 .. 3)" (an entry outside [0, rank): no entry counts
 * from the end, as in TensorFlow), "1 is missing from {0,0,2}." (an entry
 * repeated); vdev's own for a negative n or a NULL perm with n > 0. */
VDEV_API vdev_tensor_t *vdev_transpose_perm(const vdev_tensor_t *a, const int *perm, int n);
/* TensorFlow's tf.concat(values, axis) (the op ConcatV2): the n tensors
 * values[0..n) (n >= 1; any dtype, all the same) joined along axis, which
 * counts from the end when negative; they have one rank, and equal
 * dimensions but the axis, along which the result has the sum of theirs.
 * 0-dimensional tensors join along axis 0 into a vector of n. One tensor
 * is its copy (tf.concat's identity: the placement log shows an Identity,
 * and the axis is not checked, as in TensorFlow). A new tensor; the
 * gradient of each input is its slab of the output's gradient (a
 * StridedSlice). An op takes at most 4 inputs, so more tensors are joined
 * as a tree of ConcatV2 ops (each element copied at most ceil(log4 n) times:
 * once up to 4 tensors, twice up to 16); the placement log shows each. The
 * tree's intermediate tensors live until its last op, so a join of more
 * than 4 tensors needs up to twice the result's size on top of the inputs
 * (TensorFlow's one op: the result's), and a recording tape holds them
 * until it is freed. Errors, in
 * TensorFlow's words, VDEV_ERR_INVALID_ARG: "ConcatOp : Expected
 * concatenating dimensions in the range [-2, 2), but got 2", "ConcatOp :
 * Ranks of all input tensors should match: shape[0] = [2,3] vs. shape[1] =
 * [3]", "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] =
 * [2,3] vs. shape[1] = [2,4]", "cannot compute ConcatV2 as input
 * #1(zero-based) was expected to be a float tensor but is a int32 tensor";
 * vdev's own for n < 1 or values NULL. A NULL entry gives NULL with the
 * error left as it was. Not thread-safe against frees of the inputs by
 * other threads (the op then fails, as every op). */
VDEV_API vdev_tensor_t *vdev_concat(const vdev_tensor_t *const *values, int n, int axis);
/* TensorFlow's tf.pad(t, paddings, "CONSTANT", constant_values) (the ops Pad
 * and PadV2) for a tensor of any dtype: paddings holds n rows of two
 * entries, {before, after} for each axis (n the rank), and the result has
 * before + size + after entries along each axis, t's elements where they
 * were shifted by the befores, `value` elsewhere (for i32 truncated toward
 * zero, as vdev_tensor_fill takes it). A new tensor, a copy even with no
 * padding; made of ConcatV2 ops (each padded axis joins t between two
 * filled blocks, made where the join runs), so its gradient is t's part of
 * the output's gradient and the placement log shows ConcatV2 ops. Errors,
 * in the words of TensorFlow's Pad kernel after "Pad: ",
 * VDEV_ERR_INVALID_ARG: "The first dimension of paddings must be the rank
 * of inputs[3,2], [2,2]" for n other than the rank, "Paddings must be
 * non-negative: -1 0"; vdev's own for paddings NULL with n above 0, a
 * padded size past INT64_MAX, and vdev_tensor_fill's for a value an i32
 * tensor cannot hold. A NULL t gives NULL with the error left as it was. */
VDEV_API vdev_tensor_t *vdev_pad(const vdev_tensor_t *t, const int64_t *paddings, int n,
                                 double value);
/* TensorFlow's tf.pad(t, paddings, "REFLECT") and tf.pad(t, paddings,
 * "SYMMETRIC") (the op MirrorPad) for a tensor of any dtype: paddings as
 * vdev_pad's, mode "REFLECT" or "SYMMETRIC" (capitals, as the op's attr). The
 * entries before and after each axis are t's own, mirrored at its edge:
 * REFLECT leaves the edge out ([1,2,3] padded by 2 and 2 is
 * [3,2,1,2,3,2,1]), SYMMETRIC repeats it ([2,1,1,2,3,3,2]); the axes are
 * padded in order, so a corner is the mirror of a mirror, as TensorFlow's.
 * A new tensor, a copy even with no padding; made of StridedSlice ops
 * (stride -1) and ConcatV2 ops, so its gradient is TensorFlow's
 * MirrorPadGrad (the output's gradient folded back: each mirrored entry's
 * gradient added to the entry it copies) and the placement log shows those
 * ops. Errors, in the words of TensorFlow's MirrorPad kernel after
 * "MirrorPad: ", VDEV_ERR_INVALID_ARG: "The first dimension of paddings
 * must be the rank of inputs[3,2], [2,2]", "paddings must be non-negative:
 * -1 0", "paddings must be less than the dimension size: 3, 0 not less than
 * 3" (REFLECT: each padding below its axis's size), "paddings must be no
 * greater than the dimension size: 4, 0 greater than 3" (SYMMETRIC: at most
 * its size), and the op's attr check "Value for attr 'mode' of \"EDGE\" is
 * not in the list of allowed values: \"REFLECT\", \"SYMMETRIC\""; vdev's
 * own for mode NULL and for paddings as vdev_pad. A NULL t gives NULL with
 * the error left as it was. */
VDEV_API vdev_tensor_t *vdev_mirror_pad(const vdev_tensor_t *t, const int64_t *paddings, int n,
                                        const char *mode);
/* TensorFlow's tf.stack(values, axis) (the op Pack): the n tensors
 * values[0..n) (n >= 1; one dtype and one shape) stacked along a new axis
 * of n entries at axis, in [-(rank + 1), rank + 1) (negative counts from
 * the end of the result's axes). A new tensor; each input's gradient is its
 * index of that axis of the output's gradient (a StridedSlice and a
 * Reshape). More than 4 tensors are Pack ops of up to 4 joined by a tree
 * of ConcatV2 ops, as vdev_concat. Errors: VDEV_ERR_INVALID_ARG, in the
 * words of TensorFlow's Pack kernel after "Pack: ", "axis = 3 not in [-3,
 * 3)", "Shapes of all inputs must match: values[0].shape = [2] !=
 * values[1].shape = [3]", and "cannot compute Pack as input #1(zero-based)
 * was expected to be a float tensor but is a int32 tensor";
 * VDEV_ERR_UNSUPPORTED "Pack: the result would have 5 dimensions; vdev
 * tensors have at most 4"; vdev's own for n < 1 or values NULL. */
VDEV_API vdev_tensor_t *vdev_stack(const vdev_tensor_t *const *values, int n, int axis);
/* Rows [begin, begin + size) of axis 0 of a tensor of any dtype with at
 * least 1 dimension: shape [size, rest...], a new tensor (a copy, never a
 * view, so a later write to a variable leaves it as it was, as in
 * TensorFlow). It is TensorFlow's Slice (tf.slice(a, [begin, 0, ...],
 * [size, -1, ...]), the name the placement log prints) restricted to axis
 * 0, where the rows are one contiguous range of vdev's row-major layout: a
 * device-to-device copy on every backend, no kernel of its own; hence the
 * name, which leaves vdev_slice free for a general form with TensorFlow's
 * per-axis begin and size. Its gradient is zeros of a's shape with the
 * output's gradient in those rows. Errors, in the words of TensorFlow's
 * Slice: VDEV_ERR_INVALID_ARG "Slice: Expected begin[0] in [0, 5], but got
 * 7" for begin outside [0, rows], "Slice: Expected size[0] in [0, 3], but
 * got 4" for size outside [0, rows - begin] (a negative size included:
 * tf.slice's -1, "the rest", is not taken); VDEV_ERR_SHAPE "Slice: bad
 * input shape [] (rows are sliced along axis 0: it needs at least 1
 * dimension)" for a 0-dimensional a. size 0 gives an empty [0, rest...]. */
VDEV_API vdev_tensor_t *vdev_slice_rows(const vdev_tensor_t *a, int64_t begin, int64_t size);
/* Row `index` of axis 0 with that axis dropped (TensorFlow's a[index]):
 * shape rest... (0-dimensional for a 1-dimensional a); vdev_slice_rows(a,
 * index, 1) viewed through vdev_reshape, so the placement log shows a Slice
 * and a Reshape. index counts from 0 (no negative index: the Python binding
 * counts those from the end). Errors, in the words of TensorFlow's
 * StridedSlice: VDEV_ERR_INVALID_ARG "StridedSlice: slice index 5 of
 * dimension 0 out of bounds." for an index outside [0, rows) and
 * "StridedSlice: Attempting to slice scalar input." for a 0-dimensional
 * a. */
VDEV_API vdev_tensor_t *vdev_row(const vdev_tensor_t *a, int64_t index);
/* TensorFlow's StridedSlice (tf.strided_slice(a, begin, end, strides,
 * begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask), what
 * Python's a[1:, ::2, None, ..., -1] does) for a tensor of any dtype: begin,
 * end and strides have n entries (0 to 31; strides NULL: all 1), bit i of a
 * mask speaks of entry i, and TensorFlow's rules turn them into one range per
 * axis: an ellipsis entry stands for the axes no other entry names (one is
 * implied at the end), a new-axis entry adds a dimension of 1, a shrink
 * entry takes the one index begin[i] and drops its axis, a masked begin or
 * end is the axis's end in the stride's direction, a negative index counts
 * from the end, and the rest is clamped to the axis (so a range may be
 * empty); a negative stride walks backwards. The result is a new tensor (a
 * copy) of at most 4 dimensions; its gradient is zeros of a's shape with the
 * output's gradient where the slice took its elements (StridedSliceGrad).
 * The placement log shows a StridedSlice, and a Reshape when axes are shrunk
 * or added. Errors, in TensorFlow's words after "StridedSlice: ":
 * VDEV_ERR_INVALID_ARG "strides[1] must be non-zero", "slice index 5 of
 * dimension 0 out of bounds." (a shrunk index outside the axis, printed
 * after adding the dimension to a negative one, as TensorFlow prints it),
 * "only stride 1 allowed on non-range indexing." (a shrink entry with a
 * negative stride), "Index out of range using input dim 2; input has only 2
 * dims" (more entries than axes; "Attempting to slice scalar input." when
 * a is 0-dimensional), "Multiple ellipses in slice spec not allowed" (two
 * bits of ellipsis_mask, bits past entry n - 1 too, as TensorFlow checks
 * the whole mask), and for n of 32 or more "Expected begin, end, and
 * strides to be 1D equal size tensors, but got shapes [32], [32], and [32]
 * instead.";
 * vdev's own for a negative n or a NULL begin or end; VDEV_ERR_UNSUPPORTED
 * "the result would have 5 dimensions; vdev tensors have at most 4". */
VDEV_API vdev_tensor_t *vdev_strided_slice(const vdev_tensor_t *a, int n, const int64_t *begin,
                                           const int64_t *end, const int64_t *strides,
                                           int begin_mask, int end_mask, int ellipsis_mask,
                                           int new_axis_mask, int shrink_axis_mask);
/* TensorFlow's BatchMatMulV2 (tf.matmul of tensors of rank 3 or 4): x
 * [..., M, K] times y [..., K, N] (adj_x, adj_y: the operand's last two axes
 * swapped first), f32, the batch axes broadcast as NumPy broadcasts them
 * (either operand may have none, or fewer), giving [batch..., M, N]. A new
 * tensor: one BatchMatMulV2 op on [B, R, C] views when the batches are
 * equal or one is a single entry (broadcast; its gradient summed over the
 * batch), one MatMul of x viewed as [batch M, K] when y has no batch axes
 * and x is not adjointed, and for batches broadcast both ways ([2,1,M,K]
 * against [3,K,N]) each entry's matrices sliced out (StridedSlice), one
 * MatMul each, stacked (Pack, ConcatV2); the placement log shows those
 * ops. Errors, in TensorFlow's words after "BatchMatMulV2: ",
 * VDEV_ERR_SHAPE: "In[0] ndims must be >= 2: 1", "In[0] and In[1] must have
 * compatible batch dimensions: [2,3,4] vs. [3,4,5]", "Matrix
 * size-incompatible: In[0]: [2,3,4], In[1]: [2,5,6]"; VDEV_ERR_INVALID_ARG
 * "input #1 (shape [2,2]) is int32, expected float". A NULL operand gives
 * NULL with the error left as it was. */
VDEV_API vdev_tensor_t *vdev_batch_matmul(const vdev_tensor_t *x, const vdev_tensor_t *y,
                                          int adj_x, int adj_y);
/* The fused LSTM cell, Keras's LSTM step after its products, in four ops:
 *   a = vdev_lstm_gates(z)            z [..., 4u] the pre-activations of the
 *                                     gates in Keras's order (i, f, g, o);
 *                                     a = [sigmoid(i), sigmoid(f), tanh(g),
 *                                     sigmoid(o)] (op LSTMGates)
 *   c = vdev_lstm_cell_state(a, c_prev)   a_f c_prev + a_i a_g (LSTMCellState)
 *   h = vdev_lstm_cell_output(a, vdev_tanh(c))   a_o tanh(c) (LSTMCellOutput)
 * The bits of vdev_sigmoid, its slices, vdev_tanh, vdev_mul and vdev_add
 * composed on that device, forward and backward (gradients LSTMGatesGrad and
 * LSTMCellGrad, each value computed once). VDEV_ERR_SHAPE "LSTMCellState:
 * incompatible shapes [2,8] and [2,3] (the gates must have c's shape with a
 * last axis 4 times c's: i, f, g, o)", "LSTMGates: bad input shape [2,7]
 * (the last axis holds the gates i, f, g, o: a multiple of 4)"; an int32
 * input "LSTMCellState: input #1 (shape [2,2]) is int32, expected float". */
VDEV_API vdev_tensor_t *vdev_lstm_gates(const vdev_tensor_t *z);
VDEV_API vdev_tensor_t *vdev_lstm_cell_state(const vdev_tensor_t *gates,
                                             const vdev_tensor_t *c_prev);
VDEV_API vdev_tensor_t *vdev_lstm_cell_output(const vdev_tensor_t *gates,
                                              const vdev_tensor_t *tanh_c);
/* tf.where(mask, a, b) on a float or bool mask (op SelectByMask): a's
 * element where the mask's is not 0 (NaN included; a bool's true), else
 * b's; a and b one shape and one dtype (any: the words are copied), the
 * mask at most their rank, aligned at the last axis, each axis 1 or theirs
 * (broadcast: a [batch, 1] mask picks whole rows of [batch, units]). The
 * gradient is where(mask, dy, 0) for a and where(mask, 0, dy) for b
 * (SelectByMaskGrad); the mask takes none. Unlike mask a + (1 - mask) b, an
 * infinite or NaN value not chosen does not reach the result.
 * VDEV_ERR_SHAPE "SelectByMask: the values' shapes [2,3] and [2,4] differ",
 * "SelectByMask: incompatible shapes [2,2] and [2,3] (the mask must
 * broadcast to the values' shape (at most their rank, each axis 1 or
 * theirs))". vdev_where is TensorFlow's tf.where, which broadcasts all
 * three. */
VDEV_API vdev_tensor_t *vdev_select_mask(const vdev_tensor_t *mask, const vdev_tensor_t *a,
                                         const vdev_tensor_t *b);
/* The fused GRU cell, Keras's GRU step with reset_after (TensorFlow 2's
 * default) after its products, in two ops: xw [..., 3u] the step's input
 * product with the input bias, inner [..., 3u] h_prev U plus the recurrent
 * bias, gates in Keras's order (z, r, h);
 *   g = vdev_gru_gates(xw, inner)   [z, r, hh]: z = sigmoid(xw_z + inner_z),
 *                                   r = sigmoid(xw_r + inner_r), hh =
 *                                   tanh(xw_h + r inner_h) (op GRUGates)
 *   h = vdev_gru_cell_output(g, h_prev)   z h_prev + (1 - z) hh (GRUCellOutput)
 * The bits of those ops composed, forward and backward (gradients
 * GRUGatesGrad and GRUCellGrad). VDEV_ERR_SHAPE "GRUGates: incompatible
 * shapes [2,6] and [2,9] (the gates' inputs must have one shape, a last
 * axis of 3 units: z, r, h)", "GRUCellOutput: incompatible shapes [2,9] and
 * [2,2] (the gates must have h's shape with a last axis 3 times h's: z, r,
 * h)". */
VDEV_API vdev_tensor_t *vdev_gru_gates(const vdev_tensor_t *xw, const vdev_tensor_t *inner);
VDEV_API vdev_tensor_t *vdev_gru_cell_output(const vdev_tensor_t *gates,
                                             const vdev_tensor_t *h_prev);
/* tf.matmul's choice: vdev_batch_matmul when either operand has rank 3 or 4,
 * else vdev_matmul (two matrices, and its errors for anything else, a freed
 * handle included): one call where the caller would otherwise ask both
 * ranks first. */
VDEV_API vdev_tensor_t *vdev_matmul_nd(const vdev_tensor_t *x, const vdev_tensor_t *y, int adj_x,
                                       int adj_y);
/* mean((pred - target)^2), a 0-dimensional tensor; 0 for an empty batch
 * (no rows: Keras's divide_no_nan). */
VDEV_API vdev_tensor_t *vdev_mse(const vdev_tensor_t *pred, const vdev_tensor_t *target);
/* mean over rows of -log softmax(logits)[label] (0 for N = 0, as Keras);
 * logits [N, C] f32, labels [N] i32 in [0, C). A label outside [0, C) is VDEV_ERR_INVALID_ARG with
 * TensorFlow's words ("Received a label value of 7 which is outside the valid
 * range of [0, 7).  Label values: ...") when the labels live on the CPU or a
 * simulated GPU, whose memory the host reads (labels that an op made there
 * are read after their device's stream has finished them); on a CUDA GPU,
 * as on TensorFlow's GPUs, the labels are not read back and the loss (and
 * the gradient of the bad rows) is NaN. */
VDEV_API vdev_tensor_t *vdev_softmax_cross_entropy(const vdev_tensor_t *logits,
                                                   const vdev_tensor_t *labels);
/* TensorFlow's GatherV2 along axis 0 with batch_dims 0 (tf.gather(params,
 * indices), what an embedding lookup is): params f32 or i32 of 1 to 4
 * dimensions, indices i32 of any shape with rank(indices) + rank(params) - 1
 * <= 4; the output, params' dtype, has shape indices.shape +
 * params.shape[1:], its row k (params.shape[1:]) params' row indices[k]. A
 * new tensor. Its gradient (a recording tape) is params' only, a dense
 * GatherGrad op: zeros of params' shape with each row of the output's
 * gradient added to its index's row, in the order of the indices, in float
 * (TensorFlow's UnsortedSegmentSum of its IndexedSlices, in its CPU order),
 * so repeated indices give the same bits on every run and every backend.
 * On the cpu backend and on simulated GPUs it runs in O(indices x row); on a
 * CUDA GPU it is deterministic too, without atomics: each thread owns one
 * column of a set of params' rows and scans all the indices, about
 * O(min(rows, 65536 / row) x indices x row) index reads for O(indices x
 * row) additions (cheap for the usual vocabularies and batches, a cost to
 * know for a huge vocabulary with long batches of indices). An index
 * outside [0, params.shape[0]) is VDEV_ERR_INVALID_ARG in the words of
 * TensorFlow's CPU kernel ("GatherV2: indices[1] = 7 is not in [0, 5)",
 * "indices[0,2] = -1 ..." for more dimensions, "indices = 9 ..." for a
 * 0-dimensional indices) when the indices live on the CPU or a simulated
 * GPU, whose memory the host reads (indices an op made there are read after
 * their device's stream has finished them); on a CUDA GPU, as on
 * TensorFlow's GPUs, the indices are not read back: the row is zeros and its
 * gradient is dropped. As in TensorFlow, indices are not checked when
 * params' rows are empty (shape [5,0]). Other errors, in TensorFlow's words
 * after "GatherV2: ": VDEV_ERR_INVALID_ARG "params must be at least 1
 * dimensional", "Value passed to parameter 'indices' has DataType float32
 * not in list of allowed values: int16, int32, int64"; VDEV_ERR_UNSUPPORTED
 * "GatherV2: the result would have 5 dimensions; vdev tensors have at most
 * 4". */
VDEV_API vdev_tensor_t *vdev_gather(const vdev_tensor_t *params, const vdev_tensor_t *indices);
/* Index of the largest element over the last axis, i32. */
VDEV_API vdev_tensor_t *vdev_argmax(const vdev_tensor_t *a);

/* ==== 2-D convolution and pooling ==========================================
 * TensorFlow's Conv2D, MaxPool and AvgPool in its default layout: input NHWC
 * [batch, height, width, channels] float, filter HWIO [KH, KW, C, O]; no
 * dilation, no groups (the filter's C is the input's). `padding` is "VALID"
 * (windows inside the input: out = (in - k + s) / s, the quotient truncated
 * toward zero as C and TensorFlow divide, so a window up to 2s - 1 larger
 * than the input gives an empty output) or "SAME"
 * (out = ceil(in / s), padded with (out - 1) s + k - in when positive, half
 * of it (rounded down) before, at the top and left, the rest after), each
 * dimension by TensorFlow's rule. An output dimension of 0 gives an empty
 * tensor, as in TensorFlow. The pools ignore the padding: the max and the
 * mean are over the window's elements inside the input. Their gradients (a
 * recording tape) are TensorFlow's Conv2DBackpropInput and
 * Conv2DBackpropFilter, MaxPoolGrad (each window's gradient goes to its
 * first maximum in row-major order) and AvgPoolGrad. Errors, in TensorFlow's
 * words after the op's name: VDEV_ERR_INVALID_ARG for a padding other than
 * "SAME" or "VALID" ("Conv2D: Value for attr 'padding' of "FULL" is not in
 * the list of allowed values: "SAME", "VALID""), a stride below 1
 * ("Conv2D: Stride must be > 0, but got 0") or a pool window below 1
 * ("MaxPool: Sliding window ksize for dimension 1 was zero."); VDEV_ERR_SHAPE
 * for an input or filter not 4-dimensional ("Conv2D: input must be
 * 4-dimensional[2,3]", "Conv2D: filter must be 4-dimensional: [3,3]",
 * "MaxPool: tensor_in must be 4-dimensional"), an input depth that is not a
 * multiple of the filter's ("Conv2D: input depth must be evenly divisible by
 * filter depth: 3 vs 2"), a filter window of size 0, or a window larger than
 * the input by 2s or more under VALID ("Conv2D: Computed output size would be negative: -1
 * [input_size: 2, effective_filter_size: 4, stride: 1]"); VDEV_ERR_UNSUPPORTED
 * for a grouped convolution (an input depth a multiple of the filter's). */
VDEV_API vdev_tensor_t *vdev_conv2d(const vdev_tensor_t *input, const vdev_tensor_t *filter,
                                    int stride_h, int stride_w, const char *padding);
/* Conv2D with TensorFlow's dilations (its `dilations=[1, dh, dw, 1]`, Keras's
 * dilation_rate, an atrous convolution): the filter's taps dilation_h rows
 * and dilation_w columns apart (d - 1 input cells skipped between two), so
 * a KH x KW filter covers a window of (KH - 1) dilation_h + 1 by
 * (KW - 1) dilation_w + 1, and that effective size sets the output's size
 * and SAME's padding, as in TensorFlow ("effective_filter_size" in the
 * negative-size error). Strides and dilations may both exceed 1, as
 * TensorFlow's Conv2D op allows (its Python tf.nn.convolution and Keras
 * refuse the pair: vdev's Python does too). The gradients are those of
 * vdev_conv2d, dilated alike. A dilation below 1 is VDEV_ERR_INVALID_ARG,
 * "Conv2D: Dilated rates should be larger than 0."; the other errors are
 * vdev_conv2d's. vdev_conv2d is this with dilations 1. */
VDEV_API vdev_tensor_t *vdev_conv2d_dilated(const vdev_tensor_t *input,
                                            const vdev_tensor_t *filter, int stride_h,
                                            int stride_w, int dilation_h, int dilation_w,
                                            const char *padding);
/* Depthwise 2-D convolution: TensorFlow's tf.nn.depthwise_conv2d (the
 * DepthwiseConv2dNative op). input NHWC [N, H, W, C] float, filter
 * [KH, KW, C, M] with M the channel multiplier; the result is
 * [N, OH, OW, C * M], its channel c * M + m input channel c convolved with
 * filter[:, :, c, m] alone (no sum over channels). Strides, dilations and
 * padding as vdev_conv2d_dilated's (the effective window (KH - 1)
 * dilation_h + 1 sets the output's size and SAME's padding); the two
 * strides must be equal, as in TensorFlow's kernel, and strides and
 * dilations may both exceed 1 (the taps are then dilation apart and the
 * windows stride apart). The gradients (a recording tape) are TensorFlow's
 * DepthwiseConv2dNativeBackpropInput and DepthwiseConv2dNativeBackpropFilter.
 * Errors, in TensorFlow's words after the op's name: VDEV_ERR_INVALID_ARG
 * for a padding other than "SAME" or "VALID" ("DepthwiseConv2dNative: Value
 * for attr 'padding' of "FULL" is not in the list of allowed values:
 * "SAME", "VALID""), unequal strides ("DepthwiseConv2dNative: Current
 * implementation only supports equal length strides in the row and column
 * dimensions."), a stride below 1 ("DepthwiseConv2dNative: Stride must be
 * > 0, but got 0"), a dilation below 1 ("DepthwiseConv2dNative: Dilated
 * rates should be larger than 0."); VDEV_ERR_SHAPE for an input or filter
 * not 4-dimensional ("DepthwiseConv2dNative: input must be
 * 4-dimensional[2,3]", "DepthwiseConv2dNative: filter must be
 * 4-dimensional: [3,3]"), a filter whose third dimension is not the input's
 * depth ("DepthwiseConv2dNative: input and filter must have the same depth:
 * 3 vs 2"), or a window larger than the input by 2s or more under VALID
 * ("DepthwiseConv2dNative: Computed output size would be negative: -1
 * [input_size: 2, effective_filter_size: 4, stride: 1]"). An output
 * dimension of 0 (M = 0, an empty batch, ...) gives an empty tensor. */
VDEV_API vdev_tensor_t *vdev_depthwise_conv2d(const vdev_tensor_t *input,
                                              const vdev_tensor_t *filter, int stride_h,
                                              int stride_w, int dilation_h, int dilation_w,
                                              const char *padding);
/* TensorFlow's transposed 2-D convolution, tf.nn.conv2d_transpose(input,
 * filters, output_shape, strides, padding, dilations) with NHWC data: the
 * op Conv2DBackpropInput with input_sizes = output_shape, the filter and
 * out_backprop = input. input [N,H,W,O] float, filter [KH,KW,C,O] (note:
 * the output's channels C before the input's O), output_shape
 * n_output_shape values, [N,OH,OW,C] (4) or [OH,OW] (2: N from the input,
 * C from the filter, as TensorFlow's input_sizes). The result, of
 * output_shape, is the input's gradient of the Conv2D that maps a tensor of
 * that shape to the input's with those strides, dilations and padding
 * (vdev_conv2d_dilated): each input pixel scattered through the filter
 * onto the output, d - 1 cells between two taps. Conv2D's output size of
 * output_shape must be the input's size (several output sizes may give it:
 * with stride 2 and "SAME", OH of 7 and 8 both give H = 4), else
 * VDEV_ERR_SHAPE "Conv2DSlowBackpropInput: Size of out_backprop doesn't
 * match computed: actual = 3, computed = 4 spatial_dim: 1 input: 8 filter:
 * 3 output: 3 stride: 2 dilation: 1". The gradients (through a recording
 * tape) are TensorFlow's: the input's Conv2D of the output's gradient with
 * the filter, the filter's Conv2DBackpropFilter of the output's gradient
 * against the input. The placement log names the op Conv2DTranspose.
 * Errors, in TensorFlow's words after its op's or kernel's name:
 * VDEV_ERR_INVALID_ARG for a padding other than "SAME" or "VALID"
 * ("Conv2DBackpropInput: Value for attr 'padding' of "FULL" is not in the
 * list of allowed values: "SAME", "VALID", "EXPLICIT""), a stride below 1
 * ("Conv2DBackpropInput: Row and column strides should be larger than
 * 0."), a dilation below 1 ("Conv2DBackpropInput: Dilated rates should be
 * larger than 0."), "EXPLICIT" (TensorFlow's op without the explicit
 * paddings that conv2d_transpose cannot pass: "Conv2DBackpropInput:
 * explicit_paddings attribute must contain 8 values, but got: 0"),
 * n_output_shape neither 2 nor 4 ("Conv2DBackpropInput requires
 * input_sizes to contain 4 values or 2 values, but got: 3"), a negative
 * size ("Conv2DBackpropInput: Dimension -1 must be >= 0", or "...: elements
 * of input_sizes must be >= 0, not -1x3" for the 2-value form);
 * VDEV_ERR_SHAPE, after "Conv2DSlowBackpropInput: ", for a filter or input
 * not 4-dimensional ("filter must be 4-dimensional", "out_backprop must be
 * 4-dimensional"), a batch other than the input's ("input and out_backprop
 * must have the same batch size. Input batch: 3, outbackprop batch: 2,
 * batch_dim: 0"), a filter depth of 0 ("filter depth must be strictly
 * greated than zero", TensorFlow's spelling), output channels not a
 * multiple of the filter's C ("input depth must be evenly divisible by
 * filter depth"), a filter's O other than the input's channels ("filter and
 * out_backprop must have the same out_depth"), a window of size 0, the size
 * mismatch above or Conv2D's "Computed output size would be negative: ...";
 * VDEV_ERR_UNSUPPORTED for a grouped convolution (output channels a
 * multiple of C). A NULL input or filter gives NULL with the error left as
 * it was. */
VDEV_API vdev_tensor_t *vdev_conv2d_transpose(const vdev_tensor_t *input,
                                              const vdev_tensor_t *filter,
                                              const int64_t *output_shape, int n_output_shape,
                                              int stride_h, int stride_w, int dilation_h,
                                              int dilation_w, const char *padding);
VDEV_API vdev_tensor_t *vdev_max_pool2d(const vdev_tensor_t *input, int ksize_h, int ksize_w,
                                        int stride_h, int stride_w, const char *padding);
VDEV_API vdev_tensor_t *vdev_avg_pool2d(const vdev_tensor_t *input, int ksize_h, int ksize_w,
                                        int stride_h, int stride_w, const char *padding);

/* ==== 1-D convolution and pooling, separable convolution ==================
 * Made of the 2-D ops above as TensorFlow's Python makes them (so their
 * gradients, devices and kernels are those ops'; the placement log shows a
 * Reshape on each side of the 2-D op where TensorFlow's shows ExpandDims and
 * Squeeze).
 *
 * TensorFlow's tf.nn.conv1d(input, filters, stride, padding, dilations)
 * with NWC data: input [N, W, C] float (or [B, N, W, C]: the batch's two
 * dimensions are kept, as TensorFlow keeps extra batch dimensions), filter
 * [KW, C, O]; the result [N, OW, O] ([B, N, OW, O]) is Conv2D of the input
 * viewed as [N, 1, W, C] with the filter viewed as [1, KW, C, O], strides
 * 1 and `stride`, dilations 1 and `dilation`. Conv2D checks the rest and
 * reports it in its words, with those 4-D shapes, as TensorFlow's does under
 * conv1d ("Conv2D: input must be 4-dimensional[1,5,3]" for an input [5, 3],
 * "Conv2D: filter must be 4-dimensional: [1,3,2]" for a filter [3, 2]);
 * VDEV_ERR_SHAPE "ExpandDims: Tried to expand dim index -3 for tensor with 1
 * dimensions." for an input of fewer than 2 dimensions, and Conv2D's
 * "filter must be 4-dimensional: [1,2,2,3,4]" for a 4-D filter. A NULL
 * input or filter gives NULL with the error left as it was. */
VDEV_API vdev_tensor_t *vdev_conv1d(const vdev_tensor_t *input, const vdev_tensor_t *filter,
                                    int stride, int dilation, const char *padding);
/* TensorFlow's tf.nn.max_pool1d and tf.nn.avg_pool1d with NWC data: input
 * [N, W, C] float, windows of ksize along W, stride apart; the 2-D pool of
 * the input viewed as [N, 1, W, C] with windows 1 x ksize, strides 1 and
 * `stride`, viewed as [N, OW, C]. Errors are the 2-D pool's; an input of
 * another rank than 3 is VDEV_ERR_SHAPE "MaxPool: tensor_in must be
 * 4-dimensional" ("AvgPool: ..."), as TensorFlow's pool sees it once the
 * row is added (a 0-dimensional one: "ExpandDims: Tried to expand dim index
 * 1 for tensor with 0 dimensions."). */
VDEV_API vdev_tensor_t *vdev_max_pool1d(const vdev_tensor_t *input, int ksize, int stride,
                                        const char *padding);
VDEV_API vdev_tensor_t *vdev_avg_pool1d(const vdev_tensor_t *input, int ksize, int stride,
                                        const char *padding);
/* TensorFlow's tf.nn.separable_conv2d(input, depthwise_filter,
 * pointwise_filter, strides, padding, dilations): the depthwise convolution
 * of input [N, H, W, C] with depthwise_filter [KH, KW, C, M] (strides,
 * dilations and padding as vdev_depthwise_conv2d's, whose errors it gives),
 * then Conv2D of that [N, OH, OW, C * M] with pointwise_filter
 * [1, 1, C * M, O], stride 1, "VALID": [N, OH, OW, O]. Before either runs, a
 * pointwise filter of another rank than 4 is VDEV_ERR_SHAPE
 * "separable_conv2d: the pointwise filter must have rank 4 [1, 1, channels
 * * multiplier, out], not [3,3]", one not 1 x 1 "separable_conv2d: the
 * pointwise filter must be 1 x 1 [...], not [3,3,6,4]" (TensorFlow: "Shape
 * (3, 3) must have rank 4", "Dimensions 3 and 1 are not compatible"). A
 * NULL operand gives NULL with the error left as it was. */
VDEV_API vdev_tensor_t *vdev_separable_conv2d(const vdev_tensor_t *input,
                                              const vdev_tensor_t *depthwise_filter,
                                              const vdev_tensor_t *pointwise_filter,
                                              int stride_h, int stride_w, int dilation_h,
                                              int dilation_w, const char *padding);

/* ---- comparisons, logic, casts, tf.where ----
 * TensorFlow's tf.math.equal, not_equal, less, less_equal, greater,
 * greater_equal (ops Equal, NotEqual, Less, LessEqual, Greater,
 * GreaterEqual): two tensors of one dtype (float or int32; Equal and
 * NotEqual bool too), broadcast as vdev_add's, give a bool tensor (VDEV_BOOL:
 * 0 or 1 words), IEEE's answers on floats (NaN is equal to nothing, -0
 * equals +0). tf.math.logical_and, logical_or (LogicalAnd, LogicalOr: two
 * bools, broadcast) and logical_not (LogicalNot). No gradient: the result is
 * not connected to a tape. VDEV_ERR_SHAPE for a dtype the op does not take
 * ("Less: input #0 (shape [2]) is bool, expected float or int32"), for two
 * dtypes ("Equal: input #1 (shape [2]) is int32, expected float") and for
 * shapes that do not broadcast ("Equal: incompatible shapes [2,3] and [4]
 * (dimensions 3 and 4, 1 from the end, differ and neither is 1)"). */
VDEV_API vdev_tensor_t *vdev_equal(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_not_equal(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_less(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_less_equal(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_greater(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_greater_equal(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_logical_and(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_logical_or(const vdev_tensor_t *x, const vdev_tensor_t *y);
VDEV_API vdev_tensor_t *vdev_logical_not(const vdev_tensor_t *x);
/* tf.cast (op Cast) between float, int32 and bool: a float to int32 is
 * truncated toward zero, saturated beyond int32's range, NaN giving 0
 * (CUDA's conversion; TensorFlow's CPU kernel leaves those to the
 * processor); int32 to float rounds to nearest; anything to bool is "not
 * 0" (NaN true, -0 false); a bool to a number 0 or 1. A cast to the
 * tensor's own dtype is a copy a tape differentiates through (Identity), as
 * TensorFlow's cast returns the tensor itself; any other cast has no
 * gradient, as TensorFlow's has none into or out of an integer or bool.
 * VDEV_ERR_INVALID_ARG "vdev_cast: unknown dtype 7". */
VDEV_API vdev_tensor_t *vdev_cast(const vdev_tensor_t *x, enum vdev_dtype dtype);
/* tf.where(cond, x, y) (op SelectV2): x's element where cond's is true, else
 * y's; cond bool, x and y one dtype (any), the three broadcast together as
 * numpy broadcasts them. The gradient is TensorFlow's: where(cond, dy, 0)
 * summed to x's shape, where(cond, 0, dy) to y's; none for cond.
 * VDEV_ERR_SHAPE "SelectV2: input #0 (shape [2]) is float, expected bool",
 * "SelectV2: condition [2], then [3], and else [3] must be broadcastable". */
VDEV_API vdev_tensor_t *vdev_where(const vdev_tensor_t *cond, const vdev_tensor_t *x,
                                   const vdev_tensor_t *y);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_OPS_H */
