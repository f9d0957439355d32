/* cuda_device.cuh — what the nvcc side of the CUDA plugin shares between its
 * files (cuda_kernels.cu: the op table and most kernels; cuda_binary.cu: the
 * elementwise ops of two inputs; cuda_reduce.cu: reductions; cuda_updates.cu:
 * the optimizer updates; cuda_conv.cu: convolution and pooling; cuda_slice.cu:
 * strided slices; cuda_concat.cu: ConcatV2, Pack and Transpose by a
 * permutation; cuda_gather.cu: GatherV2 and its gradient; cuda_depthwise.cu:
 * depthwise convolution;
 * cuda_blas.cu: cuBLAS, loaded on first use): grid sizing,
 * block-wide sums and maxima, and the launch macro.
 *
 * LAUNCH(grid, block, stream, kernel)(args...) is kernel<<<grid, block, 0,
 * stream>>>(args...). It is a macro so that the same files also compile as
 * plain C++ against a stand-in runtime that runs each block's threads on host
 * threads (tests/cuda/host_cuda.h, selected by VDEV_CUDA_HOST_EMULATION): the
 * kernels are then checked against the CPU reference on machines without a
 * GPU. Everything here is inside the plugin (hidden visibility). */
#ifndef VDEV_CUDA_DEVICE_CUH
#define VDEV_CUDA_DEVICE_CUH

#include "backend/cuda/cuda_kernels.h"
#include "ops/op_ids.h"

#ifdef VDEV_CUDA_HOST_EMULATION
#include "host_cuda.h"
#else
#include <cuda_runtime.h>
#define LAUNCH(grid, block, stream, ...) __VA_ARGS__<<<(grid), (block), 0, (stream)>>>
#endif

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace vdev_cuda {

constexpr int kThreads = 256; /* block size of elementwise kernels */
constexpr int kRowBig = 256;  /* block size for long rows */
constexpr int kScratchDoubles = VDEV_CUDA_SCRATCH_BYTES / sizeof(double);

#define GRID_LOOP(i, n)                                                                            \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                     \
         i += (int64_t)gridDim.x * blockDim.x)

/* The elements of shape[from..nd): the argument helpers every kernel file
 * uses (as kernels_ref.c's); numel_in, input k's; last_dim, input k's last
 * dimension (1 for a 0-dimensional input). */
inline int64_t numel_of(const int64_t *shape, int nd, int from = 0)
{
    int64_t n = 1;
    for (int d = from; d < nd; d++)
        n *= shape[d];
    return n;
}
inline int64_t numel_in(const vdev_cuda_args *a, int k)
{
    return numel_of(a->in_shape[k], a->in_ndim[k]);
}
inline int64_t last_dim(const vdev_cuda_args *a, int k)
{
    return a->in_ndim[k] ? a->in_shape[k][a->in_ndim[k] - 1] : 1;
}

/* Blocks for n items of `per_block` each: enough to fill the device a few
 * times over, never more than the work, at least one. */
inline unsigned grid_for(int64_t n, int per_block, int n_sm)
{
    int64_t blocks = (n + per_block - 1) / per_block;
    int64_t cap = (int64_t)(n_sm > 0 ? n_sm : 132) * 16;
    if (blocks > cap)
        blocks = cap;
    return blocks < 1 ? 1u : (unsigned)blocks;
}

/* Blocks for `rows` row-wise work items (one block each, grid-stride). */
inline unsigned grid_rows(int64_t rows, int n_sm)
{
    int64_t cap = (int64_t)(n_sm > 0 ? n_sm : 132) * 32;
    int64_t g = rows < cap ? rows : cap;
    return g < 1 ? 1u : (unsigned)g;
}

/* One warp for short rows, eight for long ones. */
inline int row_threads(int64_t c) { return c <= 1024 ? 32 : kRowBig; }

/* ---- block reductions (blockDim a multiple of 32, at most 1024) ---- */

/* The sum over the warp, in a fixed order (lane 0 holds it). */
__device__ inline double warp_sum(double v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

/* NaN-propagating maximum, as the reference's `x > m || x != x` loop. */
__device__ inline float nan_max(float a, float b)
{
    if (a != a)
        return a;
    if (b != b)
        return b;
    return b > a ? b : a;
}

__device__ inline float warp_max(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = nan_max(v, __shfl_down_sync(0xffffffffu, v, off));
    return v;
}

/* The sum over the block, returned to every thread. sh holds 33 doubles. */
__device__ inline double block_sum(double v, double *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (nw == 1)
        return __shfl_sync(0xffffffffu, v, 0);
    __syncthreads(); /* sh may still be read by a previous call */
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    if (w == 0) {
        double t = lane < nw ? sh[lane] : 0.0;
        t = warp_sum(t);
        if (lane == 0)
            sh[32] = t;
    }
    __syncthreads();
    return sh[32];
}

/* The NaN-propagating maximum over the block, returned to every thread. */
__device__ inline float block_max(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (nw == 1)
        return __shfl_sync(0xffffffffu, v, 0);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    if (w == 0) {
        float t = lane < nw ? sh[lane] : -INFINITY;
        t = warp_max(t);
        if (lane == 0)
            sh[32] = t;
    }
    __syncthreads();
    return sh[32];
}

/* ---- what the files offer each other ---- */

/* The op's name, for messages (cuda_kernels.cu). */
const char *op_name(int op);

/* MATMUL through cuBLAS (cuda_blas.cu): loads cuBLAS and creates the
 * device's handle (*env->cublas) on the first product that needs them;
 * empty products return before either. */
int run_matmul(const vdev_cuda_args *a, const vdev_cuda_launch_env *env, char *msg, size_t cap);
/* BATCH_MATMUL: one cuBLAS product per batch entry (cuda_blas.cu). */
int run_batch_matmul(const vdev_cuda_args *a, const vdev_cuda_launch_env *env, char *msg,
                     size_t cap);

/* Reductions (cuda_reduce.cu): out[p, j] = sum over l of v((p len + l) inner
 * + j) for p < outer, j < inner, where v(i) is x[i] or, with y, (x[i] -
 * y[i])^2; divided by `div` when `divide`. Deterministic: the order of the
 * additions depends on the shape alone, never on timing or the device. */
void reduce_sum(const float *x, const float *y, int64_t outer, int64_t len, int64_t inner,
                bool divide, double div, float *out, const vdev_cuda_launch_env *env);

/* The optimizer updates and the gradient clipping (cuda_updates.cu): 1 when
 * a->op is one of them (its kernel queued on s), 0 otherwise. */
int run_update(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* 2-D convolution and pooling, their gradients included (cuda_conv.cu): 1
 * when a->op is one of them (its kernel queued on s), 0 otherwise. */
int run_conv(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* Depthwise 2-D convolution and its two gradient ops (cuda_depthwise.cu): 1
 * when a->op is one of them (its kernel queued on s), 0 otherwise. */
int run_depthwise(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* The elementwise ops of two inputs and Maximum/Minimum's gradient op
 * (cuda_binary.cu): 1 when a->op is one of them (its kernel queued on s), 0
 * otherwise. launch_reduce_bcast: REDUCE_ROWS' general mode (mode 3). */
int run_binary(const vdev_cuda_args *a, cudaStream_t s, int n_sm);
void launch_reduce_bcast(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* StridedSlice, its gradient and the tape's StridedSliceGradAdd (cuda_slice.cu): 1 when a->op is one of
 * them (its kernel queued on s), 0 otherwise. */
int run_slice(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* ConcatV2, Pack and Transpose (any permutation) (cuda_concat.cu): 1 when
 * a->op is one of them (its kernel queued on s, none for an empty output),
 * 0 otherwise. */
int run_layout(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* GatherV2 and GatherGrad (cuda_gather.cu): 1 when a->op is one of them
 * (its kernel queued on s, none for an empty output), 0 otherwise. */
int run_gather(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* The fused LSTM cell's ops (cuda_lstm.cu): 1 when
 * a->op is one of them (its kernel queued on s, none for an empty output),
 * 0 otherwise. */
int run_lstm(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* The fused GRU cell's ops (cuda_gru.cu): 1 when a->op is one of them (its
 * kernel queued on s, none for an empty output), 0 otherwise. */
int run_gru(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* SelectByMask and its gradient (cuda_select.cu): 1 when a->op is one of
 * them (its kernel queued on s, none for an empty output), 0 otherwise. */
int run_select(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* The comparisons, the logical ops, Cast and SelectV2 (cuda_compare.cu): 1
 * when a->op is one of them (its kernel queued on s, none for an empty
 * output), 0 otherwise. */
int run_compare(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

/* Max, Min, Abs and Sign (cuda_extreme.cu): 1 when a->op is one of them (its
 * kernel queued on s, none for an empty output), 0 otherwise. */
int run_extreme(const vdev_cuda_args *a, cudaStream_t s, int n_sm);

} // namespace vdev_cuda

#endif /* VDEV_CUDA_DEVICE_CUH */
