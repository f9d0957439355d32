/* cuda_reduce.cu — the CUDA plugin's reductions: out[p, j] = sum over l of
 * v((p len + l) inner + j), for SUM, MEAN, MSE and the reduce-to-shape of
 * gradients (a bias gradient is outer 1, len = batch, inner = features).
 *
 * Three kernels, chosen by the shape alone:
 *  - contiguous rows (inner 1) of at most 32 elements: one thread per
 *    output, in order (a warp reads 32 short rows that share cache lines);
 *  - contiguous rows up to 8192 elements, or many of them: one warp per row,
 *    lanes reading consecutive elements, eight rows per block;
 *  - everything else: a tile kernel. A block is jt consecutive j (threadIdx.x;
 *    jt = inner below 32, else 32) by rt = 256 / jt rows of the axis
 *    (threadIdx.y), so consecutive threads read consecutive addresses (with
 *    jt = inner the tile is one contiguous span) and a [65536, 4096] bias
 *    gradient reads whole 128-byte lines. When the tiles are few and the axis
 *    long, the axis is split across blocks (gridDim.y) into chunks of rt * 32
 *    rows, each block writes a partial sum into the device's scratch buffer,
 *    and a second kernel adds the partials of each output in split order.
 * Sums are in double. Every addition happens in an order fixed by the shape
 * (per-thread loops in row order, a fixed shuffle or shared-memory tree,
 * partials in split order), never by timing or by the device's
 * multiprocessor count, so a reduction gives the same bits on every run and
 * every replica (the data-parallel strategies need identical replicas). */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {
namespace {

constexpr int kTile = 256;          /* threads of a tile block */
constexpr int kShortRow = 32;       /* contiguous rows up to this: a thread per output */
constexpr int64_t kWarpRow = 8192;  /* contiguous rows up to this: a warp per row */
constexpr int kLoadsPerSplit = 32;  /* rows per thread in one split of the axis */
constexpr int64_t kFewTiles = 1024; /* fewer tiles than this: split the axis */
constexpr int kMaxSplits = 1024;

struct LoadPlain {
    const float *x;
    __device__ double operator()(int64_t i) const { return x[i]; }
};

struct LoadSquaredDiff {
    const float *p, *t;
    __device__ double operator()(int64_t i) const
    {
        double d = (double)p[i] - (double)t[i];
        return d * d;
    }
};

/* How a sum becomes its output: divided by `div` (mean: the length, MSE:
 * the element count; 0/0 = NaN by design) or not (MSE of an empty batch:
 * the empty sum, 0). */
struct Finish {
    int divide;
    double div;
    __device__ float operator()(double acc) const { return (float)(divide ? acc / div : acc); }
};

/* Short contiguous rows: one thread per output, in row order. */
template <class L>
__global__ void k_reduce_rows_short(L ld, int64_t outputs, int64_t len, Finish fin, float *out)
{
    GRID_LOOP(o, outputs)
    {
        double acc = 0.0;
        for (int64_t l = 0; l < len; l++)
            acc += ld(o * len + l);
        out[o] = fin(acc);
    }
}

/* Contiguous rows: one warp per row; lane k adds elements k, k+32, ... and
 * the warp adds its lanes in a fixed shuffle order. */
template <class L>
__global__ void k_reduce_rows_warp(L ld, int64_t outputs, int64_t len, Finish fin, float *out)
{
    int lane = threadIdx.x & 31;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t n_warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t o = warp; o < outputs; o += n_warps) { /* the same o across the warp */
        double acc = 0.0;
        for (int64_t l = lane; l < len; l += 32)
            acc += ld(o * len + l);
        acc = warp_sum(acc);
        if (lane == 0)
            out[o] = fin(acc);
    }
}

/* The tile kernel (see the top of the file). Block (x, y) takes tiles x,
 * x + gridDim.x, ... of outer x ceil(inner / jt), and rows [y chunk, (y + 1)
 * chunk) of the axis; thread (tx, ty) adds rows ty, ty + rt, ... of column j,
 * then the rt partial sums of each column are added in a fixed tree order. */
template <class L>
__global__ void k_reduce_tile(L ld, int64_t outer, int64_t len, int64_t inner, int64_t chunk,
                              int splits, Finish fin, float *out, double *partial)
{
    __shared__ double sh[kTile];
    int jt = blockDim.x, rt = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
    int t = ty * jt + tx;
    int top = 1; /* the smallest power of two >= rt, halved below */
    while (top < rt)
        top <<= 1;
    int64_t jtiles = (inner + jt - 1) / jt, tiles = outer * jtiles;
    int64_t l0 = (int64_t)blockIdx.y * chunk, l1 = l0 + chunk < len ? l0 + chunk : len;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) { /* uniform per block */
        int64_t p = tile / jtiles, j = (tile % jtiles) * jt + tx;
        double acc = 0.0;
        if (j < inner)
            for (int64_t l = l0 + ty; l < l1; l += rt)
                acc += ld((p * len + l) * inner + j);
        sh[t] = acc;
        __syncthreads();
        for (int s = top >> 1; s > 0; s >>= 1) {
            if (ty < s && ty + s < rt)
                sh[t] += sh[t + s * jt];
            __syncthreads();
        }
        if (ty == 0 && j < inner) {
            int64_t o = p * inner + j;
            if (splits == 1)
                out[o] = fin(sh[tx]);
            else
                partial[o * splits + blockIdx.y] = sh[tx];
        }
        __syncthreads(); /* sh is written again for the next tile */
    }
}

/* The partials of each output, in split order. */
__global__ void k_reduce_finish(const double *partial, int64_t outputs, int splits, Finish fin,
                                float *out)
{
    GRID_LOOP(o, outputs)
    {
        double acc = 0.0;
        for (int y = 0; y < splits; y++)
            acc += partial[o * splits + y];
        out[o] = fin(acc);
    }
}

template <class L>
void launch_reduce(L ld, int64_t outer, int64_t len, int64_t inner, Finish fin, float *out,
                   const vdev_cuda_launch_env *env)
{
    cudaStream_t s = (cudaStream_t)env->stream;
    int n_sm = env->n_sm;
    int64_t outputs = outer * inner;
    if (outputs <= 0)
        return;
    if (inner == 1 && len <= kShortRow) {
        LAUNCH(grid_for(outputs, kThreads, n_sm), kThreads, s, k_reduce_rows_short<L>)(
            ld, outputs, len, fin, out);
        return;
    }
    if (inner == 1 && (len <= kWarpRow || outputs >= kFewTiles)) {
        LAUNCH(grid_for(outputs * 32, kThreads, n_sm), kThreads, s, k_reduce_rows_warp<L>)(
            ld, outputs, len, fin, out);
        return;
    }
    int jt = inner < 32 ? (int)inner : 32, rt = kTile / jt;
    int64_t tiles = outer * ((inner + jt - 1) / jt);
    int64_t rows_per_split = (int64_t)rt * kLoadsPerSplit;
    int splits = 1;
    if (tiles < kFewTiles && len > rows_per_split) {
        int64_t want = (len + rows_per_split - 1) / rows_per_split;
        int64_t room = kScratchDoubles / outputs;
        if (want > kMaxSplits)
            want = kMaxSplits;
        if (want > room)
            want = room;
        splits = want < 1 ? 1 : (int)want;
    }
    int64_t chunk = (len + splits - 1) / splits;
    if (splits > 1) /* no empty splits */
        splits = (int)((len + chunk - 1) / chunk);
    int64_t cap = (int64_t)(n_sm > 0 ? n_sm : 132) * 32;
    dim3 grid((unsigned)(tiles < cap ? tiles : cap), (unsigned)splits);
    double *partial = (double *)env->scratch;
    LAUNCH(grid, dim3((unsigned)jt, (unsigned)rt), s, k_reduce_tile<L>)(
        ld, outer, len, inner, chunk, splits, fin, out, partial);
    if (splits > 1)
        LAUNCH(grid_for(outputs, kThreads, n_sm), kThreads, s, k_reduce_finish)(partial, outputs,
                                                                                splits, fin, out);
}

} // namespace

void reduce_sum(const float *x, const float *y, int64_t outer, int64_t len, int64_t inner,
                bool divide, double div, float *out, const vdev_cuda_launch_env *env)
{
    Finish fin = {divide ? 1 : 0, div};
    if (y)
        launch_reduce(LoadSquaredDiff{x, y}, outer, len, inner, fin, out, env);
    else
        launch_reduce(LoadPlain{x}, outer, len, inner, fin, out, env);
}

} // namespace vdev_cuda
