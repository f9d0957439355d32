/* conv_transpose.h — how a transposed 2-D convolution (VDEV_OP_CONV2D_TRANSPOSE,
 * conv_transpose.c) runs on the kernels of Conv2DBackpropInput, as in
 * TensorFlow, where tf.nn.conv2d_transpose is that op: its arguments are
 * rewritten into CONV2D_BACKPROP_INPUT's (x for its shape: the output's,
 * never read; the filter as it is; dy: the transposed convolution's input),
 * the parameters (strides, dilations, padding, determinism) unchanged. A
 * macro, not a function, so that the host kernels (struct vdev_kernel_args)
 * and the CUDA plugin (struct vdev_cuda_args, the same layout) share it;
 * it needs op_ids.h and at least three inputs in the argument block. */
#ifndef VDEV_OPS_CONV_TRANSPOSE_H
#define VDEV_OPS_CONV_TRANSPOSE_H

#include "ops/op_ids.h"

/* *b = the CONV2D_BACKPROP_INPUT arguments of the CONV2D_TRANSPOSE ones *a
 * (b and a distinct argument blocks of one layout). */
#define VDEV_CONV_TRANSPOSE_AS_BACKPROP(b, a)                                                      \
    do {                                                                                           \
        *(b) = *(a);                                                                               \
        (b)->op = VDEV_OP_CONV2D_BACKPROP_INPUT;                                                   \
        (b)->n_in = 3;                                                                             \
        (b)->in[0] = 0; /* x: its shape only */                                                    \
        (b)->in[2] = (a)->in[0];                                                                   \
        (b)->in_ndim[0] = (a)->out_ndim[0];                                                        \
        (b)->in_ndim[2] = (a)->in_ndim[0];                                                         \
        (b)->in_dtype[0] = (a)->out_dtype[0];                                                      \
        (b)->in_dtype[2] = (a)->in_dtype[0];                                                       \
        for (int d_ = 0; d_ < 4; d_++) {                                                           \
            (b)->in_shape[0][d_] = (a)->out_shape[0][d_];                                          \
            (b)->in_shape[2][d_] = (a)->in_shape[0][d_];                                           \
        }                                                                                          \
    } while (0)

#endif
