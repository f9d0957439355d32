/* cuda_extreme.cu — Max and Min reductions, Abs and Sign on the GPU (the
 * ops of src/ops/extreme.c), Floor, Ceil and Round (floor.c), and Sum of
 * int32 (the float Sum is cuda_reduce.cu's). A
 * reduction runs one thread per output element walking its row in order, so
 * a NaN stops it where the reference stops and the result is the same word
 * (a comparison, no arithmetic); these reductions feed metrics and clipping,
 * not a training step's products. Abs, Sign, Floor, Ceil and Round are one
 * thread per element (rintf rounds ties to even, as the reference's). */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

enum { F32 = 0, I32 = 1 }; /* vdev's dtype codes (extreme.c uses the same) */

template <bool MAX>
__global__ void k_extreme_f(const float *x, float *o, int64_t outer, int64_t len, int64_t inner)
{
    GRID_LOOP(i, outer * inner)
    {
        const int64_t p = i / inner, j = i % inner;
        float r = MAX ? -INFINITY : INFINITY;
        for (int64_t l = 0; l < len && r == r; l++) {
            const float v = x[(p * len + l) * inner + j];
            r = (v != v || (MAX ? v > r : v < r)) ? v : r;
        }
        o[i] = r;
    }
}

template <bool MAX>
__global__ void k_extreme_i(const int32_t *x, int32_t *o, int64_t outer, int64_t len,
                            int64_t inner)
{
    GRID_LOOP(i, outer * inner)
    {
        const int64_t p = i / inner, j = i % inner;
        int32_t r = MAX ? INT_MIN : INT_MAX;
        for (int64_t l = 0; l < len; l++) {
            const int32_t v = x[(p * len + l) * inner + j];
            r = (MAX ? v > r : v < r) ? v : r;
        }
        o[i] = r;
    }
}

/* Sum of int32 (wrapping as two's complement, as the reference's): one
 * thread per output element, in order. */
__global__ void k_sum_i(const int32_t *x, int32_t *o, int64_t outer, int64_t len, int64_t inner)
{
    GRID_LOOP(i, outer * inner)
    {
        const int64_t p = i / inner, j = i % inner;
        uint32_t acc = 0;
        for (int64_t l = 0; l < len; l++)
            acc += (uint32_t)x[(p * len + l) * inner + j];
        o[i] = (int32_t)acc;
    }
}

__global__ void k_abs(const uint32_t *x, uint32_t *o, int64_t n, int is_int)
{
    GRID_LOOP(i, n) { o[i] = is_int ? ((x[i] >> 31) ? 0u - x[i] : x[i]) : (x[i] & 0x7fffffffu); }
}

__global__ void k_sign(const void *x, void *o, int64_t n, int is_int)
{
    const float *xf = (const float *)x;
    const int32_t *xi = (const int32_t *)x;
    GRID_LOOP(i, n)
    {
        if (is_int) {
            ((int32_t *)o)[i] = (xi[i] > 0) - (xi[i] < 0);
        } else {
            const float v = xf[i];
            ((float *)o)[i] = v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v == 0.0f ? 0.0f : v;
        }
    }
}

/* 0 Floor, 1 Ceil, 2 Round, on float32 (int32: the words copied) */
__global__ void k_rounding(const float *x, float *o, int64_t n, int which, int is_int)
{
    GRID_LOOP(i, n)
    {
        if (is_int)
            ((int32_t *)o)[i] = ((const int32_t *)x)[i];
        else
            o[i] = which == 0 ? floorf(x[i]) : which == 1 ? ceilf(x[i]) : rintf(x[i]);
    }
}

} // namespace

int run_extreme(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    const int is_int = a->in_dtype[0] == I32;
    if (a->op == VDEV_OP_FLOOR || a->op == VDEV_OP_CEIL || a->op == VDEV_OP_ROUND) {
        const int64_t n = numel_in(a, 0);
        const int which = a->op == VDEV_OP_FLOOR ? 0 : a->op == VDEV_OP_CEIL ? 1 : 2;
        if (n > 0)
            LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_rounding)(
                (const float *)a->in[0], (float *)a->out[0], n, which, is_int);
        return 1;
    }
    if (a->op == VDEV_OP_ABS || a->op == VDEV_OP_SIGN) {
        const int64_t n = numel_in(a, 0);
        if (n == 0)
            return 1;
        if (a->op == VDEV_OP_ABS)
            LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_abs)(
                (const uint32_t *)a->in[0], (uint32_t *)a->out[0], n, is_int);
        else
            LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_sign)(a->in[0], a->out[0], n,
                                                                     is_int);
        return 1;
    }
    if (a->op != VDEV_OP_MAX && a->op != VDEV_OP_MIN && !(a->op == VDEV_OP_SUM && is_int))
        return 0;
    /* outer x len x inner around the normalised axis i[0] */
    int64_t outer = 1, len = numel_in(a, 0), inner = 1;
    if (a->i[0] != VDEV_AXIS_ALL) {
        const int ax = (int)a->i[0];
        len = a->in_shape[0][ax];
        for (int d = 0; d < ax; d++)
            outer *= a->in_shape[0][d];
        for (int d = ax + 1; d < a->in_ndim[0]; d++)
            inner *= a->in_shape[0][d];
    }
    const int64_t n = outer * inner;
    if (n == 0)
        return 1;
    const unsigned grid = grid_for(n, kThreads, n_sm);
    const bool mx = a->op == VDEV_OP_MAX;
    if (a->op == VDEV_OP_SUM) {
        LAUNCH(grid, kThreads, s, k_sum_i)((const int32_t *)a->in[0], (int32_t *)a->out[0],
                                           outer, len, inner);
    } else if (is_int) {
        if (mx)
            LAUNCH(grid, kThreads, s, k_extreme_i<true>)((const int32_t *)a->in[0],
                                                         (int32_t *)a->out[0], outer, len, inner);
        else
            LAUNCH(grid, kThreads, s, k_extreme_i<false>)((const int32_t *)a->in[0],
                                                          (int32_t *)a->out[0], outer, len, inner);
    } else if (mx) {
        LAUNCH(grid, kThreads, s, k_extreme_f<true>)((const float *)a->in[0], (float *)a->out[0],
                                                     outer, len, inner);
    } else {
        LAUNCH(grid, kThreads, s, k_extreme_f<false>)((const float *)a->in[0], (float *)a->out[0],
                                                      outer, len, inner);
    }
    return 1;
}

} // namespace vdev_cuda
