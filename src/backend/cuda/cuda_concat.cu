/* cuda_concat.cu — ConcatV2, Pack and Transpose on the GPU (the ops of
 * src/ops/concat.c): gathers, one thread per output element, so no element
 * is written twice and nothing needs zeroing first. ConcatV2 and Pack are
 * one kernel: with `outer` the product of the output's dimensions before
 * the axis, output row r (of `width` words) is the used inputs' rows r one
 * after the other (input k's rows are chunk[k] words); thread j finds its
 * row, then the input whose columns hold its column. Transpose's thread j
 * takes j apart into the output's indices and reads the input through its
 * strides, permuted; the 2-D transpose keeps the tiled kernel of
 * cuda_kernels.cu. Elements move as 4-byte words (int32 as float); results
 * equal the CPU reference's bit for bit. */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

/* A join: the used inputs (n), their row lengths and first columns. */
struct join4 {
    const uint32_t *x[4];
    int64_t chunk[4], first[4];
    int n;
};

__global__ void k_join(join4 g, uint32_t *o, int64_t total, int64_t width)
{
    GRID_LOOP(j, total)
    {
        int64_t r = j / width, c = j % width;
        int k = 0;
        while (k + 1 < g.n && c >= g.first[k + 1])
            k++;
        o[j] = g.x[k][r * g.chunk[k] + (c - g.first[k])];
    }
}

/* A transpose: the output's dimensions n and the input's stride s along
 * each (1 and 0 past the rank). */
struct perm4 {
    int64_t n[4], s[4];
};

__global__ void k_transpose_perm(const uint32_t *x, uint32_t *o, int64_t total, perm4 g)
{
    GRID_LOOP(j, total)
    {
        int64_t t = j, at = 0;
        for (int d = 3; d >= 0; d--) {
            at += (t % g.n[d]) * g.s[d];
            t /= g.n[d];
        }
        o[j] = x[at];
    }
}

} // namespace

int run_layout(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    int64_t total = numel_of(a->out_shape[0], a->out_ndim[0]);
    switch (a->op) {
    case VDEV_OP_CONCAT:
    case VDEV_OP_PACK: {
        int64_t outer = 1;
        for (int d = 0; d < a->i[0]; d++)
            outer *= a->out_shape[0][d];
        if (total == 0 || outer == 0)
            return 1;
        join4 g;
        g.n = (int)a->i[1];
        int64_t at = 0;
        for (int k = 0; k < 4; k++) {
            g.x[k] = (const uint32_t *)a->in[k < g.n ? k : 0];
            g.chunk[k] = k < g.n ? numel_of(a->in_shape[k], a->in_ndim[k]) / outer : 0;
            g.first[k] = at;
            at += g.chunk[k];
        }
        LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_join)(g, (uint32_t *)a->out[0],
                                                                     total, total / outer);
        return 1;
    }
    case VDEV_OP_TRANSPOSE: {
        int nd = a->in_ndim[0];
        int64_t st[4], e = 1;
        for (int d = nd - 1; d >= 0; d--) {
            st[d] = e;
            e *= a->in_shape[0][d];
        }
        perm4 g;
        for (int d = 0; d < 4; d++) {
            g.n[d] = d < nd ? a->in_shape[0][a->i[d]] : 1;
            g.s[d] = d < nd ? st[a->i[d]] : 0;
        }
        if (total == 0)
            return 1;
        LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_transpose_perm)(
            (const uint32_t *)a->in[0], (uint32_t *)a->out[0], total, g);
        return 1;
    }
    default:
        return 0;
    }
}

} // namespace vdev_cuda
