/* cuda_lstm.cu — the fused LSTM cell on the GPU (the ops of
 * src/ops/lstm_cell.c), one thread per element: LSTMGates (the sigmoid of
 * the gates i, f, o and the tanh of g, in double rounded once to float, as
 * the plugin's Sigmoid and Tanh kernels and the CPU reference compute them)
 * and LSTMGatesGrad (SigmoidGrad's and TanhGrad's double formulas) over z
 * [..., 4u]; LSTMCellState, LSTMCellOutput and LSTMCellGrad over the cell
 * state's [..., u], reading each element's four gates, float products and
 * a float sum (--fmad=false keeps them two roundings, as Mul and AddV2).
 * So the fused ops give the composed ops' bits on a card as on the CPU
 * reference. */
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

/* Is element e of the gates in the g quarter (a tanh)? */
__device__ bool tanh_gate(int64_t e, int64_t u) { return (e % (4 * u)) / u == 2; }

/* grad 0: the gates of z; 1: LSTMGatesGrad of (da = x, a = y). */
__global__ void k_gates(const float *x, const float *y, float *o, int64_t n, int64_t u, int grad)
{
    GRID_LOOP(e, n)
    {
        const bool t = tanh_gate(e, u);
        if (!grad)
            o[e] = t ? (float)tanh((double)x[e]) : sig_f(x[e]);
        else if (t)
            o[e] = (float)((double)x[e] * (1.0 - (double)y[e] * y[e]));
        else
            o[e] = (float)((double)x[e] * y[e] * (1.0 - (double)y[e]));
    }
}

/* The gates' index of c's element e, gate k. */
__device__ int64_t gate(int64_t e, int64_t u, int k) { return (e / u) * 4 * u + k * u + e % u; }

/* op 0: the state (x = c_prev); 1: the output (x = tanh(c)). */
__global__ void k_cell(const float *a, const float *x, float *o, int64_t n, int64_t u, int op)
{
    GRID_LOOP(e, n)
    {
        if (op == 0) {
            float fc = a[gate(e, u, 1)] * x[e];
            float ig = a[gate(e, u, 0)] * a[gate(e, u, 2)];
            o[e] = fc + ig;
        } else {
            o[e] = a[gate(e, u, 3)] * x[e];
        }
    }
}

/* LSTMCellGrad's parts (lstm_cell.c): 0 the state's da, 1 its dc_prev, 2 the
 * output's da, 3 its dt. */
__global__ void k_cell_grad(const float *dy, const float *a, const float *x, float *o, int64_t n,
                            int64_t u, int part)
{
    GRID_LOOP(e, n)
    {
        const float d = dy[e];
        if (part == 0) {
            o[gate(e, u, 0)] = d * a[gate(e, u, 2)];
            o[gate(e, u, 1)] = d * x[e];
            o[gate(e, u, 2)] = d * a[gate(e, u, 0)];
            o[gate(e, u, 3)] = 0.0f;
        } else if (part == 1) {
            o[e] = d * a[gate(e, u, 1)];
        } else if (part == 2) {
            o[gate(e, u, 0)] = o[gate(e, u, 1)] = o[gate(e, u, 2)] = 0.0f;
            o[gate(e, u, 3)] = d * x[e];
        } else {
            o[e] = d * a[gate(e, u, 3)];
        }
    }
}

} // namespace

int run_lstm(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    const float *in0 = (const float *)a->in[0], *in1 = (const float *)a->in[1];
    float *out = (float *)a->out[0];
    switch (a->op) {
    case VDEV_OP_LSTM_GATES:
    case VDEV_OP_LSTM_GATES_GRAD: {
        const int64_t n = numel_in(a, 0), u = last_dim(a, 0) / 4;
        if (n > 0 && u > 0)
            LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_gates)(
                in0, a->op == VDEV_OP_LSTM_GATES ? in0 : in1, out, n, u,
                a->op == VDEV_OP_LSTM_GATES_GRAD);
        return 1;
    }
    case VDEV_OP_LSTM_CELL_STATE:
    case VDEV_OP_LSTM_CELL_OUTPUT: {
        const int64_t n = numel_in(a, 1), u = last_dim(a, 1);
        if (n > 0 && u > 0)
            LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_cell)(
                in0, in1, out, n, u, a->op == VDEV_OP_LSTM_CELL_OUTPUT);
        return 1;
    }
    case VDEV_OP_LSTM_CELL_GRAD: {
        const int64_t n = numel_in(a, 2), u = last_dim(a, 2);
        if (n > 0 && u > 0)
            LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_cell_grad)(
                in0, in1, (const float *)a->in[2], out, n, u, (int)a->i[0]);
        return 1;
    }
    default:
        return 0;
    }
}

} // namespace vdev_cuda
