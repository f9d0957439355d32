/* cuda_gather.cu — GatherV2 along axis 0 and its gradient GatherGrad on the
 * GPU (the ops of src/ops/gather.c). The gather is one thread per output
 * word: output row k is params' row indices[k], or zeros for an index
 * outside [0, rows), as TensorFlow's GPU kernel writes them (the indices are
 * not read back to the host, so nothing is checked). The gradient is
 * deterministic without atomics or sorting: the output's rows are dealt
 * into `groups` sets (row r to set r % groups), and thread (g, c) owns
 * column c of set g's rows: it writes their zeros, then scans every index
 * in order and adds dy's element to the rows of its set, in float, so each
 * element gets the same additions in the same order as the CPU reference
 * (bit for bit equal), and indices outside [0, rows) add nothing. The cost:
 * groups x indices x row index reads for indices x row additions, with
 * groups the largest power of two up to min(rows, ceil(65536 / row)), so
 * that at most about 65536 threads run (row of them when a row is longer)
 * and a thread's test of an index is a mask, not a division; fine for the
 * usual batches, slow for long batches of indices, which every thread reads
 * (where a sort by index would pay). Elements of the gather move as 4-byte
 * words (int32 params as float). */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

constexpr int64_t kGradThreads = 65536; /* threads the gradient aims for */

__global__ void k_gather(const uint32_t *x, const int32_t *ix, uint32_t *o, int64_t total,
                         int64_t row, int64_t rows)
{
    GRID_LOOP(j, total)
    {
        int64_t k = j / row, c = j % row;
        int64_t at = ix[k];
        o[j] = at >= 0 && at < rows ? x[at * row + c] : 0u;
    }
}

/* groups is a power of two, at most 65536, and every index that counts is
 * in [0, rows) and an int32: the set's test (a remainder) is a 32-bit mask. */
__global__ void k_gather_grad(const float *dy, const int32_t *ix, float *o, int64_t n,
                              int64_t row, int64_t rows, uint32_t groups)
{
    GRID_LOOP(t, (int64_t)groups * row)
    {
        uint32_t g = (uint32_t)(t / row), mask = groups - 1;
        int64_t c = t % row;
        for (int64_t r = g; r < rows; r += groups)
            o[r * row + c] = 0.0f;
        for (int64_t k = 0; k < n; k++) {
            int32_t at = ix[k];
            if (at >= 0 && at < rows && ((uint32_t)at & mask) == g)
                o[at * row + c] += dy[k * row + c];
        }
    }
}

} // namespace

int run_gather(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    switch (a->op) {
    case VDEV_OP_GATHER: {
        int64_t rows = a->in_shape[0][0], row = numel_of(a->in_shape[0], a->in_ndim[0], 1);
        int64_t total = numel_of(a->out_shape[0], a->out_ndim[0], 0);
        if (total == 0)
            return 1;
        LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_gather)(
            (const uint32_t *)a->in[0], (const int32_t *)a->in[1], (uint32_t *)a->out[0], total,
            row, rows);
        return 1;
    }
    case VDEV_OP_GATHER_GRAD: {
        int64_t rows = a->in_shape[2][0], row = numel_of(a->in_shape[2], a->in_ndim[2], 1);
        if (rows == 0 || row == 0)
            return 1;
        int64_t n = numel_of(a->in_shape[1], a->in_ndim[1], 0);
        int64_t want = (kGradThreads + row - 1) / row, groups = 1;
        if (want > rows)
            want = rows;
        while (groups * 2 <= want)
            groups *= 2;
        LAUNCH(grid_for(groups * row, kThreads, n_sm), kThreads, s, k_gather_grad)(
            (const float *)a->in[0], (const int32_t *)a->in[1], (float *)a->out[0], n, row, rows,
            (uint32_t)groups);
        return 1;
    }
    default:
        return 0;
    }
}

} // namespace vdev_cuda
