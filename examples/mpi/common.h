/* common.h — what the two examples across processes share: the model (an
 * MLP regression, 8 -> 32 -> 1, ReLU) and a batch of it made on the host
 * from a seed (x uniform in [-1, 1], y = x0 * x1 - 0.5 x2 + 0.25), so every
 * process makes the same batch for the same step. Written with the public
 * header alone. */
#ifndef VDEV_EXAMPLES_MPI_COMMON_H
#define VDEV_EXAMPLES_MPI_COMMON_H

#include "vdev.h"

#include <stdlib.h>

#define EX_IN 8
#define EX_NV 4 /* W0, b0, W1, b1 */

static const int64_t ex_sizes[3] = {EX_IN, 32, 1};

/* rows x EX_IN inputs and rows x 1 targets on CPU:0 (the caller's, or the
 * enclosing scope's); 0 on success. */
static inline int ex_batch(int64_t rows, uint64_t seed, vdev_tensor_t **x, vdev_tensor_t **y)
{
    float *xs = malloc((size_t)rows * EX_IN * sizeof *xs), *ys = malloc((size_t)rows * sizeof *ys);
    if (!xs || !ys) {
        free(xs);
        free(ys);
        return 1;
    }
    uint64_t z = seed * 2654435761u + 7;
    for (int64_t i = 0; i < rows * EX_IN; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (float)((double)(z >> 11) / 9007199254740992.0 * 2 - 1);
    }
    for (int64_t i = 0; i < rows; i++)
        ys[i] = xs[i * EX_IN] * xs[i * EX_IN + 1] - 0.5f * xs[i * EX_IN + 2] + 0.25f;
    int64_t xshape[2] = {rows, EX_IN}, yshape[2] = {rows, 1};
    vdev_device_push("CPU:0");
    *x = vdev_tensor_from_host(xs, xshape, 2, VDEV_F32);
    *y = vdev_tensor_from_host(ys, yshape, 2, VDEV_F32);
    vdev_device_pop();
    free(xs);
    free(ys);
    return *x && *y ? 0 : 1;
}

/* Per-example squared error of the model on x, y: [rows]. */
static inline vdev_tensor_t *ex_loss_rows(vdev_mlp_t *mlp, const vdev_tensor_t *x,
                                          const vdev_tensor_t *y)
{
    vdev_tensor_t *d = vdev_sub(vdev_mlp_forward(mlp, x), y);
    return vdev_mean(vdev_mul(d, d), 1, false);
}

#endif
