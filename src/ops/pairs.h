/* pairs.h — the element loop of the binary ops that broadcast by
 * vdev_shape_broadcast_as's modes and whose kernels are written once for
 * every mode (the comparisons and logic of compare.c, FloorDiv and FloorMod
 * of floor.c): the body runs for each output element i with j0 and j1, the
 * elements of inputs 0 and 1 that pair with it. */
#ifndef VDEV_OPS_PAIRS_H
#define VDEV_OPS_PAIRS_H

#include "ops/impl.h"

/* The output's 4 dimensions (leading 1s); each input's strides over them
 * are vdev_args_strides4's. */
static inline void vdev_pairs_out4(const struct vdev_kernel_args *a, int64_t *o4)
{
    int no = a->out_ndim[0];
    for (int d = 0; d < 4; d++)
        o4[d] = d >= 4 - no ? a->out_shape[0][d - (4 - no)] : 1;
}

/* Runs the body (the arguments after a, commas and all) with i (the
 * output's element), j0 and j1 (inputs 0's and 1's elements paired with
 * it), by the mode i[3] vdev_shape_broadcast_as chose. */
#define VDEV_FOR_PAIRS(a, ...)                                                                     \
    do {                                                                                           \
        if ((a)->i[3] == 3) {                                                                      \
            int64_t o4_[4], s0_[4], s1_[4], i = 0;                                                 \
            vdev_pairs_out4(a, o4_);                                                               \
            vdev_args_strides4(a, 0, s0_);                                                         \
            vdev_args_strides4(a, 1, s1_);                                                         \
            for (int64_t p_ = 0; p_ < o4_[0]; p_++)                                                \
                for (int64_t q_ = 0; q_ < o4_[1]; q_++)                                            \
                    for (int64_t r_ = 0; r_ < o4_[2]; r_++)                                        \
                        for (int64_t c_ = 0; c_ < o4_[3]; c_++, i++) {                             \
                            const int64_t j0 = p_ * s0_[0] + q_ * s0_[1] + r_ * s0_[2] +           \
                                               c_ * s0_[3];                                        \
                            const int64_t j1 = p_ * s1_[0] + q_ * s1_[1] + r_ * s1_[2] +           \
                                               c_ * s1_[3];                                        \
                            __VA_ARGS__;                                                           \
                        }                                                                          \
        } else {                                                                                   \
            const int64_t n_ = vdev_args_out_numel(a, 0);                                          \
            const int no_ = (a)->out_ndim[0];                                                      \
            const int64_t cols_ = no_ ? (a)->out_shape[0][no_ - 1] : 1;                            \
            for (int64_t i = 0; i < n_; i++) {                                                     \
                const int64_t j0 = i;                                                              \
                const int64_t j1 = (a)->i[3] == 1 ? i % cols_ : (a)->i[3] == 2 ? 0 : i;            \
                __VA_ARGS__;                                                                       \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#endif
