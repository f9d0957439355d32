/* cuda_select.cu — SelectByMask and its gradient on the GPU (the ops of
 * src/ops/select.c), one thread per element of the values: the mask's
 * element found by the multi-index, aligned at the last axis, with the
 * mask's axes of 1 at 0; a mask word counts as set when it is not 0 but for
 * the sign bit (a float other than ±0, NaN included; a bool's 1), and the
 * chosen word is copied (no arithmetic: the CPU reference's bits, for
 * values of any dtype). */
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
    int off = 4 - a->in_ndim[kx], offm = 4 - a->in_ndim[0];
    int64_t st = 1;
    for (int d = 3; d >= 0; d--) {
        int r = d - off, rm = d - offm;
        g.n[d] = r >= 0 ? a->in_shape[kx][r] : 1;
        int64_t md = rm >= 0 ? a->in_shape[0][rm] : 1;
        g.ms[d] = md == 1 ? 0 : st;
        st *= md;
    }
    return g;
}

/* op 0: select (x, y); 1: the gradient's a share (x = dy), 2: b's share. */
__global__ void k_select(const uint32_t *m, const uint32_t *x, const uint32_t *y, uint32_t *o,
                         int64_t total, mask4 g, int op)
{
    GRID_LOOP(i, total)
    {
        int64_t t = i, mi = 0;
        for (int d = 3; d >= 0; d--) {
            mi += (t % g.n[d]) * g.ms[d];
            t /= g.n[d];
        }
        const bool on = (m[mi] & 0x7fffffffu) != 0;
        o[i] = op == 0 ? (on ? x[i] : y[i]) : (on == (op == 1) ? x[i] : 0u); /* 0u: +0.0f */
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
        (const uint32_t *)a->in[0], (const uint32_t *)a->in[1],
        (const uint32_t *)(op == 0 ? a->in[2] : a->in[1]), (uint32_t *)a->out[0], total,
        mask_of(a, 1),
        op);
    return 1;
}

} // namespace vdev_cuda
