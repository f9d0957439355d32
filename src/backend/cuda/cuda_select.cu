/* cuda_select.cu — SelectByMask and its gradient on the GPU (the ops of
 * src/ops/select.c), one thread per element of the values: the mask's
 * element found by the multi-index with the mask's axes of 1 at 0, the
 * chosen word copied (no arithmetic: the CPU reference's bits). */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

/* The values' dimensions in four (leading 1s) and the mask's strides (0
 * along its axes of 1). */
struct mask4 {
    int64_t n[4], ms[4];
};

mask4 mask_of(const vdev_cuda_args *a, int kx)
{
    mask4 g;
    int off = 4 - a->in_ndim[kx];
    int64_t st = 1;
    for (int d = 3; d >= 0; d--) {
        int r = d - off;
        g.n[d] = r >= 0 ? a->in_shape[kx][r] : 1;
        int64_t md = r >= 0 ? a->in_shape[0][r] : 1;
        g.ms[d] = md == 1 ? 0 : st;
        st *= md;
    }
    return g;
}

/* op 0: select (x, y); 1: the gradient's a share (x = dy), 2: b's share. */
__global__ void k_select(const float *m, const float *x, const float *y, float *o, int64_t total,
                         mask4 g, int op)
{
    GRID_LOOP(i, total)
    {
        int64_t t = i, mi = 0;
        for (int d = 3; d >= 0; d--) {
            mi += (t % g.n[d]) * g.ms[d];
            t /= g.n[d];
        }
        const bool on = m[mi] != 0.0f;
        o[i] = op == 0 ? (on ? x[i] : y[i]) : (on == (op == 1) ? x[i] : 0.0f);
    }
}

} // namespace

int run_select(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    if (a->op != VDEV_OP_SELECT_MASK && a->op != VDEV_OP_SELECT_MASK_GRAD)
        return 0;
    const int64_t total = numel_in(a, 1);
    if (total == 0)
        return 1;
    const int op = a->op == VDEV_OP_SELECT_MASK ? 0 : 1 + (int)a->i[0];
    LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_select)(
        (const float *)a->in[0], (const float *)a->in[1],
        (const float *)(op == 0 ? a->in[2] : a->in[1]), (float *)a->out[0], total, mask_of(a, 1),
        op);
    return 1;
}

} // namespace vdev_cuda
