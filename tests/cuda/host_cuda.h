/* host_cuda.h — a stand-in CUDA runtime under which the CUDA plugin's kernel
 * files (the .cu files of src/backend/cuda/) compile as plain C++ and run on the host, so
 * that test_cuda_emu.c checks every kernel against the CPU reference on
 * machines without a GPU. The kernel files include it (through
 * cuda_device.cuh) when VDEV_CUDA_HOST_EMULATION is defined.
 *
 * How a launch runs (host_cuda.cpp): LAUNCH(grid, block, stream, kernel)(args)
 * checks the configuration as the runtime does (a dimension of 0, more than
 * 1024 threads a block, a grid past its limits: cudaErrorInvalidConfiguration
 * from cudaGetLastError, and nothing runs), then runs the blocks one after
 * the other, each thread of a block a fiber. __shared__ variables are plain
 * statics (one block at a time uses them); __syncthreads() is a barrier of
 * the block's threads; __shfl_down_sync and __shfl_sync exchange values
 * through a per-warp slot array between two barriers of the warp's threads.
 * Every thread of a warp must call a shuffle, as on a GPU with a full mask; a
 * __syncthreads() that not every thread reaches stops the test with a
 * message (on a GPU it may hang or worse).
 * Launches run to completion before LAUNCH returns: a stream is just an
 * order. Device memory is host memory.
 *
 * cuBLAS: cublasSgemm_v2 and cublasSgemm_v2_64 are column-major loops that
 * accumulate in float and check their arguments as cuBLAS documents
 * (m, n, k >= 0; lda >= max(1, rows of op(A)); ldb likewise; ldc >= max(1, m):
 * else CUBLAS_STATUS_INVALID_VALUE), so a leading dimension of 0 fails here
 * as it does on a GPU.
 *
 * Failures on demand (vdev_emu_fail_next, emu.h): the next launch, cublasCreate
 * or cublasSgemm fails with a given code and does nothing, as on a card whose
 * memory is gone (cudaErrorMemoryAllocation, CUBLAS_STATUS_ALLOC_FAILED). */
#ifndef VDEV_HOST_CUDA_H
#define VDEV_HOST_CUDA_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

typedef struct vdev_emu_stream *cudaStream_t;

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
};

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

/* The builtins of the thread that runs a kernel. */
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

namespace vdev_emu {

/* Runs body once per thread of every block of the grid (see the top). */
void run_grid(dim3 grid, dim3 block, const std::function<void()> &body);
void syncthreads();
/* Publishes this lane's 8 bytes; returns lane src's (own value past the warp). */
uint64_t shuffle(uint64_t v, int src_lane);
int lane_id();

template <class... P> struct Launch {
    dim3 grid, block;
    void (*kernel)(P...);
    template <class... A> void operator()(A &&...args) const
    {
        std::tuple<P...> t(std::forward<A>(args)...);
        void (*k)(P...) = kernel;
        run_grid(grid, block, [&t, k]() { std::apply(k, t); });
    }
};

template <class... P> Launch<P...> make_launch(dim3 g, dim3 b, void (*k)(P...))
{
    return Launch<P...>{g, b, k};
}

} // namespace vdev_emu

#define LAUNCH(grid, block, stream, ...)                                                           \
    ((void)(stream), vdev_emu::make_launch(dim3(grid), dim3(block), &__VA_ARGS__))

inline void __syncthreads() { vdev_emu::syncthreads(); }

/* The conversions as PTX's cvt defines them: a float to int32 rounded toward
 * zero, clamped to int32's range, NaN to 0; an int32 to the nearest float. */
inline int __float2int_rz(float x)
{
    if (x != x)
        return 0;
    if (x >= 2147483648.0f)
        return 2147483647;
    if (x <= -2147483648.0f)
        return (-2147483647 - 1);
    return (int)x;
}
inline float __int2float_rn(int x) { return (float)x; }

template <class T> T __shfl_sync(unsigned mask, T v, int src)
{
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    bits = vdev_emu::shuffle(bits, src);
    T r;
    std::memcpy(&r, &bits, sizeof r);
    (void)mask;
    return r;
}

template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned off)
{
    return __shfl_sync(mask, v, vdev_emu::lane_id() + (int)off);
}

cudaError_t cudaGetLastError();
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s);

/* ---- cuBLAS ---- */

#define CUBLAS_VER_MAJOR 13
typedef struct vdev_emu_blas *cublasHandle_t;
enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

cublasStatus_t cublasCreate_v2(cublasHandle_t *h);
cublasStatus_t cublasDestroy_v2(cublasHandle_t h);
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *workspace, size_t bytes);
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemm_v2_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                 int64_t m, int64_t n, int64_t k, const float *alpha,
                                 const float *A, int64_t lda, const float *B, int64_t ldb,
                                 const float *beta, float *C, int64_t ldc);
const char *cublasGetStatusString(cublasStatus_t s);

#include "emu.h" /* what the stand-in saw, for the tests */

#endif /* VDEV_HOST_CUDA_H */
