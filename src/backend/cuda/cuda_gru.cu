/* cuda_gru.cu — the fused GRU cell on the GPU (the ops of
 * src/ops/gru_cell.c), one thread per unit of a row: GRUGates (the sigmoid
 * of z and r and the tanh of hh in double rounded once to float, as the
 * plugin's Sigmoid and Tanh kernels and the CPU reference compute them, the
 * sums and the product r inner_h in float), GRUGatesGrad (SigmoidGrad's and
 * TanhGrad's double formulas on the saved gates), GRUCellOutput and
 * GRUCellGrad (float products and sums; --fmad=false keeps them separate
 * roundings, as Mul, Sub and AddV2). So the fused ops give the composed ops'
 * bits on a card as on the CPU reference. */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

__device__ float sig_f(float x)
{
    double u = x;
    if (u >= 0.0)
        return (float)(1.0 / (1.0 + exp(-u)));
    double e = exp(u);
    return (float)(e / (1.0 + e));
}
__device__ float sig_grad(float dy, float y) { return (float)((double)dy * y * (1.0 - (double)y)); }
__device__ float tanh_grad(float dy, float y) { return (float)((double)dy * (1.0 - (double)y * y)); }

/* Element e of h (row e / u, unit j = e % u): its z at 3u row + j. */
__global__ void k_gru_gates(const float *x, const float *in, float *g, int64_t n, int64_t u)
{
    GRID_LOOP(e, n)
    {
        const int64_t b = (e / u) * 3 * u + e % u;
        float pz = x[b] + in[b], pr = x[b + u] + in[b + u];
        float z = sig_f(pz), rg = sig_f(pr);
        float rh = rg * in[b + 2 * u];
        float ph = x[b + 2 * u] + rh;
        g[b] = z;
        g[b + u] = rg;
        g[b + 2 * u] = (float)tanh((double)ph);
    }
}

__global__ void k_gru_gates_grad(const float *dg, const float *g, const float *in, float *o,
                                 int64_t n, int64_t u, int part)
{
    GRID_LOOP(e, n)
    {
        const int64_t b = (e / u) * 3 * u + e % u;
        float dph = tanh_grad(dg[b + 2 * u], g[b + 2 * u]);
        float drh = dph * in[b + 2 * u];
        float dr = dg[b + u] + drh;
        o[b] = sig_grad(dg[b], g[b]);
        o[b + u] = sig_grad(dr, g[b + u]);
        o[b + 2 * u] = part == 0 ? dph : dph * g[b + u];
    }
}

__global__ void k_gru_output(const float *g, const float *hp, float *o, int64_t n, int64_t u)
{
    GRID_LOOP(e, n)
    {
        const int64_t b = (e / u) * 3 * u + e % u;
        float zh = g[b] * hp[e];
        float omz = 1.0f - g[b];
        float oh = omz * g[b + 2 * u];
        o[e] = zh + oh;
    }
}

__global__ void k_gru_cell_grad(const float *d, const float *g, const float *hp, float *o,
                                int64_t n, int64_t u, int part)
{
    GRID_LOOP(e, n)
    {
        const int64_t b = (e / u) * 3 * u + e % u;
        if (part == 1) {
            o[e] = d[e] * g[b];
        } else {
            float dzh = d[e] * hp[e];
            float domz = d[e] * g[b + 2 * u];
            float omz = 1.0f - g[b];
            o[b] = dzh + -domz;
            o[b + u] = 0.0f;
            o[b + 2 * u] = d[e] * omz;
        }
    }
}

} // namespace

int run_gru(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    const float *in0 = (const float *)a->in[0], *in1 = (const float *)a->in[1];
    const float *in2 = (const float *)a->in[2];
    float *out = (float *)a->out[0];
    /* the gates' input: 0 for GRUGates and its gradient and GRUCellOutput */
    const int kg = a->op == VDEV_OP_GRU_CELL_GRAD ? 1 : 0;
    const int64_t u = last_dim(a, kg) / 3, n = u ? numel_in(a, kg) / 3 : 0;
    if (n == 0)
        return a->op == VDEV_OP_GRU_GATES || a->op == VDEV_OP_GRU_GATES_GRAD ||
               a->op == VDEV_OP_GRU_CELL_OUTPUT || a->op == VDEV_OP_GRU_CELL_GRAD;
    const unsigned grid = grid_for(n, kThreads, n_sm);
    switch (a->op) {
    case VDEV_OP_GRU_GATES:
        LAUNCH(grid, kThreads, s, k_gru_gates)(in0, in1, out, n, u);
        return 1;
    case VDEV_OP_GRU_GATES_GRAD:
        LAUNCH(grid, kThreads, s, k_gru_gates_grad)(in0, in1, in2, out, n, u, (int)a->i[0]);
        return 1;
    case VDEV_OP_GRU_CELL_OUTPUT:
        LAUNCH(grid, kThreads, s, k_gru_output)(in0, in1, out, n, u);
        return 1;
    case VDEV_OP_GRU_CELL_GRAD:
        LAUNCH(grid, kThreads, s, k_gru_cell_grad)(in0, in1, in2, out, n, u, (int)a->i[0]);
        return 1;
    default:
        return 0;
    }
}

} // namespace vdev_cuda
