/* cuda_slice.cu — StridedSlice and its gradient on the GPU (the ops of
 * src/ops/strided.c): gathers, one thread per element written. The op's
 * thread j takes the element of x the slice's j-th element comes from (per
 * axis d: first index i[d], stride j[d], count f[d]); the gradient's thread
 * j, one per element of x, finds on each axis whether x's index is one the
 * slice took (a multiple of the stride away from the first index, fewer
 * than the count of steps) and writes dy's element there, else 0, so no
 * element is written twice and nothing needs zeroing first; the tape's
 * StridedSliceGradAdd adds dy's element j to the one the op's thread j
 * would read. Elements move as
 * 4-byte words (int32 slices as float does); results equal the CPU
 * reference's bit for bit. */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

/* The slice in four dimensions (1, 0, 1 past the rank): counts n, first
 * indices b, strides s; x's dimensions dim and its elements per index st. */
struct slice4 {
    int64_t n[4], b[4], s[4], dim[4], st[4];
};

slice4 slice_of(const vdev_cuda_args *a, int k)
{
    slice4 g;
    int nd = a->in_ndim[k];
    int64_t e = 1;
    for (int d = 3; d >= 0; d--) {
        g.n[d] = d < nd ? (int64_t)a->f[d] : 1;
        g.b[d] = d < nd ? a->i[d] : 0;
        g.s[d] = d < nd ? a->j[d] : 1;
        g.dim[d] = d < nd ? a->in_shape[k][d] : 1;
        g.st[d] = e;
        e *= g.dim[d];
    }
    return g;
}

/* The element of x the slice's j-th element is. */
__device__ int64_t taken_at(int64_t j, const slice4 &g)
{
    int64_t t = j, at = 0;
    for (int d = 3; d >= 0; d--) {
        int64_t idx = t % g.n[d];
        t /= g.n[d];
        at += (g.b[d] + idx * g.s[d]) * g.st[d];
    }
    return at;
}

__global__ void k_strided_slice(const uint32_t *x, uint32_t *o, int64_t total, slice4 g)
{
    GRID_LOOP(j, total)
    {
        o[j] = x[taken_at(j, g)];
    }
}

__global__ void k_strided_slice_grad(const float *dy, float *o, int64_t total, slice4 g)
{
    GRID_LOOP(j, total)
    {
        int64_t t = j, at = 0, step = 1;
        bool taken = true;
        for (int d = 3; d >= 0; d--) {
            int64_t idx = t % g.dim[d];
            t /= g.dim[d];
            int64_t off = idx - g.b[d], q = off / g.s[d];
            taken = taken && off % g.s[d] == 0 && q >= 0 && q < g.n[d];
            at += q * step;
            step *= g.n[d];
        }
        o[j] = taken ? dy[at] : 0.0f;
    }
}

/* StridedSliceGradAdd: thread j adds dy's element j to the element of acc
 * the slice took (no element is taken twice, so no two threads meet). */
__global__ void k_strided_slice_grad_add(const float *dy, float *acc, int64_t total, slice4 g)
{
    GRID_LOOP(j, total)
    {
        const int64_t at = taken_at(j, g);
        acc[at] = acc[at] + dy[j];
    }
}

} // namespace

int run_slice(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    switch (a->op) {
    case VDEV_OP_STRIDED_SLICE: {
        slice4 g = slice_of(a, 0);
        int64_t total = g.n[0] * g.n[1] * g.n[2] * g.n[3];
        LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_strided_slice)(
            (const uint32_t *)a->in[0], (uint32_t *)a->out[0], total, g);
        return 1;
    }
    case VDEV_OP_STRIDED_SLICE_GRAD: {
        slice4 g = slice_of(a, 1);
        int64_t total = g.dim[0] * g.dim[1] * g.dim[2] * g.dim[3];
        LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_strided_slice_grad)(
            (const float *)a->in[0], (float *)a->out[0], total, g);
        return 1;
    }
    case VDEV_OP_STRIDED_SLICE_GRAD_ADD: {
        slice4 g = slice_of(a, 0);
        int64_t total = g.n[0] * g.n[1] * g.n[2] * g.n[3];
        if (total > 0)
            LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_strided_slice_grad_add)(
                (const float *)a->in[1], (float *)a->out[0], total, g);
        return 1;
    }
    default:
        return 0;
    }
}

} // namespace vdev_cuda
