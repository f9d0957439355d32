/* vdev/ops.h — the ops on tensors: matrix product, elementwise arithmetic
 * with numpy's broadcasting, activations, softmax, reductions, reshape and
 * transpose, the losses (mean squared error, softmax cross-entropy) and
 * argmax. Each runs on the device placement picks (vdev/placement.h) and a
 * recording tape (vdev/autograd.h) differentiates it. Part of the public API:
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
 * is VDEV_ERR_SHAPE naming both shapes. */

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
VDEV_API vdev_tensor_t *vdev_add_scalar(const vdev_tensor_t *a, float s);
VDEV_API vdev_tensor_t *vdev_mul_scalar(const vdev_tensor_t *a, float s);
VDEV_API vdev_tensor_t *vdev_pow_scalar(const vdev_tensor_t *a, float p);
/* std::sqrt elementwise (TensorFlow's Sqrt): sqrt(-0) = -0, below 0 NaN. */
VDEV_API vdev_tensor_t *vdev_sqrt(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_relu(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_tanh(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_sigmoid(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_exp(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_log(const vdev_tensor_t *a);
/* Over the last axis. */
VDEV_API vdev_tensor_t *vdev_softmax(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_log_softmax(const vdev_tensor_t *a);
/* Over one axis (negative from the end), keeping it as size 1 if keepdims. */
VDEV_API vdev_tensor_t *vdev_sum(const vdev_tensor_t *a, int axis, bool keepdims);
VDEV_API vdev_tensor_t *vdev_mean(const vdev_tensor_t *a, int axis, bool keepdims);
/* Over all elements: a 0-dimensional tensor. */
VDEV_API vdev_tensor_t *vdev_sum_all(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_mean_all(const vdev_tensor_t *a);
/* Same elements, new shape; one dimension may be -1. VDEV_ERR_INVALID_ARG
 * for ndim outside 0..4 ("Reshape: tensors have 0 to 4 dimensions, not 5")
 * or shape NULL with ndim > 0 ("Reshape: shape is NULL and ndim 2");
 * VDEV_ERR_SHAPE, in TensorFlow's words, for a shape of another number of
 * elements, two -1s or a negative size. */
VDEV_API vdev_tensor_t *vdev_reshape(const vdev_tensor_t *a, const int64_t *shape, int ndim);
VDEV_API vdev_tensor_t *vdev_transpose(const vdev_tensor_t *a); /* 2-D */
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
/* Index of the largest element over the last axis, i32. */
VDEV_API vdev_tensor_t *vdev_argmax(const vdev_tensor_t *a);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_OPS_H */
