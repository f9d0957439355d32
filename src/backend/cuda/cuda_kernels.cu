/* cuda_kernels.cu — the CUDA plugin's kernel table: one kernel (or cuBLAS
 * call, cuda_blas.cu, or reduction, cuda_reduce.cu) per op of
 * src/ops/op_ids.h, launched on the device's stream (the joins and the
 * general transpose in cuda_concat.cu).
 *
 * The specification is the CPU reference kernels (src/ops/kernels_ref.c), and
 * these kernels follow them operation for operation so that the tests
 * (tests/test_cuda.c on a GPU, tests/cuda/test_cuda_emu.c on the host) can
 * compare the two with tight tolerances:
 *  - elementwise results are computed in double and rounded once to float,
 *    exactly as the reference does (for + - * / that is the float operation;
 *    for exp, tanh, log, pow the device's double functions, within 1-2 ulp of
 *    double, then rounded to float; sqrt is correctly rounded in double on
 *    both sides, and so, rounded to float, the same bits). The files are
 *    compiled with --fmad=false so that a*b+c is never contracted into an
 *    FMA the reference does not do.
 *  - row-wise ops (softmax, log-softmax, cross-entropy) accumulate in double
 *    across a block: per-thread partial sums, then warp shuffles, then shared
 *    memory across the warps of a block. The order of the additions differs
 *    from the reference's sequential loop, which in double changes the float
 *    result by at most an ulp. Log-softmax is (x - max) - log(sum) and the
 *    cross-entropy of a row log(sum) - (x[label] - max), in the reference's
 *    order: x - (max + log(sum)) loses log(sum) next to a logit of 1e10.
 *  - the row maximum propagates NaN as the reference's loop does (any NaN in
 *    the row makes the maximum NaN); argmax returns the first maximal index,
 *    a NaN counting as the maximum (first NaN wins).
 *
 * Every kernel takes 64-bit sizes and loops grid-stride, so any tensor size
 * works with a grid sized to the device (a few blocks per multiprocessor).
 * An op with nothing to compute returns before launching anything (a grid of
 * size 0 is a launch error). Nothing here allocates: the one piece of
 * temporary device memory (partial sums) is the per-device scratch buffer,
 * whose every use is ordered on the device's single stream. */
#include "backend/cuda/cuda_device.cuh"
#include "ops/conv_transpose.h"

namespace vdev_cuda {

const char *op_name(int op)
{
    static const char *const names[VDEV_OP_COUNT] = {
        "MatMul", "AddV2", "Sub", "Mul", "RealDiv", "AddScalar", "MulScalar", "PowScalar",
        "Relu", "Tanh", "Sigmoid", "Exp", "Log", "Softmax", "LogSoftmax", "Sum", "Mean",
        "Reshape", "Transpose", "MeanSquaredError", "SparseSoftmaxCrossEntropyWithLogits",
        "ArgMax", "Identity", "ReluGrad", "TanhGrad", "SigmoidGrad", "SoftmaxGrad",
        "LogSoftmaxGrad", "BroadcastTo", "MeanSquaredErrorGrad", "SparseSoftmaxCrossEntropyGrad",
        "ReduceToShape", "ApplyMomentum", "ApplyAdam", "Sqrt", "AmsgradMoments",
        "ApplyAdamWithAmsgrad", "ClipGradient", "Slice", "SliceGrad", "Conv2D", "MaxPool",
        "AvgPool", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPoolGrad", "AvgPoolGrad",
        "StridedSlice", "StridedSliceGrad", "ConcatV2", "Pack", "GatherV2", "GatherGrad", "Maximum",
        "Minimum", "MaximumMinimumGrad", "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
        "Conv2DTranspose", "Erf", "Softplus", "BatchMatMulV2", "LSTMGates", "LSTMGatesGrad", "LSTMCellState",
        "LSTMCellOutput", "LSTMCellGrad", "StridedSliceGradAdd", "GRUGates", "GRUGatesGrad",
        "GRUCellOutput", "GRUCellGrad", "SelectByMask", "SelectByMaskGrad", "Equal", "NotEqual",
        "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot",
        "Cast", "SelectV2", "Max", "Min", "Abs", "Sign", "Floor", "Ceil", "Round", "FloorDiv",
        "FloorMod"};
    return op >= 0 && op < VDEV_OP_COUNT && names[op] ? names[op] : "(unknown op)";
}

namespace {

/* ---- argument helpers (as kernels_ref.c; numel_in, last_dim: cuda_device.cuh) ---- */

/* Input k around axis ax (VDEV_AXIS_ALL: everything) as outer x len x inner. */
void split_axis(const vdev_cuda_args *a, int k, int64_t ax, int64_t *outer, int64_t *len,
                int64_t *inner)
{
    int nd = a->in_ndim[k];
    if (ax != VDEV_AXIS_ALL && ax < 0)
        ax += nd;
    if (ax == VDEV_AXIS_ALL || ax < 0 || ax >= nd) {
        *outer = 1;
        *len = numel_in(a, k);
        *inner = 1;
        return;
    }
    *outer = *inner = 1;
    for (int d = 0; d < ax; d++)
        *outer *= a->in_shape[k][d];
    *len = a->in_shape[k][ax];
    for (int d = (int)ax + 1; d < nd; d++)
        *inner *= a->in_shape[k][d];
}

/* Row statistics of the reference's row_stats(): the NaN-propagating maximum
 * m and sum(exp(x - m)) in double, over x[0..c), computed by the block. */
__device__ void row_stats(const float *x, int64_t c, float *m_out, double *s_out, float *shf,
                          double *shd)
{
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
        m = nan_max(m, x[j]);
    m = block_max(m, shf);
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
        s += exp((double)x[j] - (double)m);
    s = block_sum(s, shd);
    *m_out = m;
    *s_out = s;
}

/* ---- unary elementwise; s is f[0] rounded to float (as the reference) ---- */

enum { U_ADDS, U_MULS, U_POWS, U_RELU, U_TANH, U_SIGMOID, U_EXP, U_LOG, U_SQRT, U_ERF, U_SOFTPLUS };

__device__ double sigmoid_d(double u)
{
    if (u >= 0.0)
        return 1.0 / (1.0 + exp(-u));
    double e = exp(u);
    return e / (1.0 + e);
}

template <int OP>
__global__ void k_unary(const float *x, float *o, int64_t n, double s)
{
    GRID_LOOP(i, n)
    {
        double u = x[i], r;
        switch (OP) {
        case U_ADDS: r = u + s; break;
        case U_MULS: r = u * s; break;
        case U_POWS: r = pow(u, s); break;
        case U_RELU: r = (u > 0.0 || u != u) ? u : 0.0; break;
        case U_TANH: r = tanh(u); break;
        case U_SIGMOID: r = sigmoid_d(u); break;
        case U_EXP: r = exp(u); break;
        /* sqrt, as the reference: NaN below 0 (-inf included), -0 for -0 */
        case U_SQRT: r = sqrt(u); break;
        case U_ERF: r = erf(u); break;
        /* the reference's three ranges: t = log(FLT_EPSILON) + 2 in float */
        case U_SOFTPLUS: {
            const double t = (double)(logf(1.1920928955078125e-07f) + 2.0f);
            r = u > -t ? u : u < t ? exp(u) : log(exp(u) + 1.0);
            break;
        }
        default: r = log(u); break;
        }
        o[i] = (float)r;
    }
}

template <int OP>
void launch_unary(const vdev_cuda_args *a, cudaStream_t st, int n_sm)
{
    int64_t n = numel_in(a, 0);
    double s = (double)(float)a->f[0];
    LAUNCH(grid_for(n, kThreads, n_sm), kThreads, st, k_unary<OP>)((const float *)a->in[0],
                                                                  (float *)a->out[0], n, s);
}

/* ---- gradient helpers, elementwise ---- */

enum { G_RELU, G_TANH, G_SIGMOID };

template <int OP>
__global__ void k_grad2(const float *dy, const float *y, float *o, int64_t n)
{
    GRID_LOOP(i, n)
    {
        if (OP == G_RELU)
            o[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        else if (OP == G_TANH)
            o[i] = (float)((double)dy[i] * (1.0 - (double)y[i] * y[i]));
        else
            o[i] = (float)((double)dy[i] * y[i] * (1.0 - (double)y[i]));
    }
}

template <int OP>
void launch_grad2(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    int64_t n = numel_in(a, 0);
    LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_grad2<OP>)(
        (const float *)a->in[0], (const float *)a->in[1], (float *)a->out[0], n);
}

/* (dy one element, pred, target) -> dy * 2 (pred - target) / n. */
__global__ void k_mse_grad(const float *dyp, const float *p, const float *t, float *o, int64_t n)
{
    double dy = dyp[0];
    GRID_LOOP(i, n)
    o[i] = (float)(dy * 2.0 * ((double)p[i] - (double)t[i]) / (double)n);
}

/* (x, like) -> like's shape: o[(p len + l) inner + j] = x[p inner + j]. */
__global__ void k_broadcast(const float *x, float *o, int64_t n, int64_t len, int64_t inner)
{
    GRID_LOOP(i, n)
    {
        int64_t j = i % inner, p = i / (len * inner);
        o[i] = x[p * inner + j];
    }
}

/* ---- row-wise ops over the last axis: one block per row ---- */

enum { R_SOFTMAX, R_LOG_SOFTMAX };

template <int OP>
__global__ void k_softmax(const float *x, float *o, int64_t rows, int64_t c)
{
    __shared__ double shd[33];
    __shared__ float shf[33];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * c;
        float *orow = o + r * c;
        float m;
        double s;
        row_stats(xr, c, &m, &s, shf, shd);
        if (OP == R_SOFTMAX) {
            for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
                orow[j] = (float)(exp((double)xr[j] - (double)m) / s);
        } else {
            /* (x - max) - log(sum), as the reference: exact for huge logits */
            double ls = log(s);
            for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
                orow[j] = (float)(((double)xr[j] - (double)m) - ls);
        }
    }
}

enum { RG_SOFTMAX, RG_LOG_SOFTMAX };

/* SOFTMAX_GRAD: y (dy - sum(dy y)); LOG_SOFTMAX_GRAD: dy - exp(y) sum(dy). */
template <int OP>
__global__ void k_softmax_grad(const float *dy, const float *y, float *o, int64_t rows, int64_t c)
{
    __shared__ double shd[33];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *dr = dy + r * c, *yr = y + r * c;
        float *orow = o + r * c;
        double s = 0.0;
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
            s += OP == RG_SOFTMAX ? (double)dr[j] * yr[j] : (double)dr[j];
        s = block_sum(s, shd);
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
            if (OP == RG_SOFTMAX)
                orow[j] = (float)((double)yr[j] * ((double)dr[j] - s));
            else
                orow[j] = (float)((double)dr[j] - exp((double)yr[j]) * s);
        }
    }
}

/* Cross-entropy, pass 1: each block sums the losses of its rows (in row
 * order) into partial[blockIdx.x]; a label outside [0, c) makes the row's
 * loss NaN, and so the mean (the reference stops at NaN; the sum is NaN
 * either way). */
__global__ void k_softmax_ce_rows(const float *x, const int32_t *lab, int64_t n, int64_t c,
                                  double *partial)
{
    __shared__ double shd[33];
    __shared__ float shf[33];
    double acc = 0.0;
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const float *xr = x + r * c;
        float m;
        double s;
        row_stats(xr, c, &m, &s, shf, shd);
        if (threadIdx.x == 0) {
            int32_t l = lab[r];
            double loss = (l < 0 || l >= c) ? (double)NAN : log(s) - ((double)xr[l] - (double)m);
            acc += loss;
        }
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = acc;
}

/* Pass 2: the partials in order, divided by n; no rows give 0, as the
 * reference (no partials are read then). */
__global__ void k_mean_of_partials(const double *partial, int nparts, int64_t n, float *out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        double acc = 0.0;
        for (int i = 0; i < nparts; i++)
            acc += partial[i];
        out[0] = n > 0 ? (float)(acc / (double)n) : 0.0f;
    }
}

/* (dy, logits [n,c], labels [n]) -> dy (softmax - onehot) / n, NaN rows for
 * bad labels. */
__global__ void k_softmax_ce_grad(const float *dyp, const float *x, const int32_t *lab, float *o,
                                  int64_t n, int64_t c)
{
    __shared__ double shd[33];
    __shared__ float shf[33];
    double dy = dyp[0];
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const float *xr = x + r * c;
        float *orow = o + r * c;
        int32_t l = lab[r];
        bool bad = l < 0 || l >= c;
        float m;
        double s;
        row_stats(xr, c, &m, &s, shf, shd);
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
            double g = exp((double)xr[j] - (double)m) / s - (j == l ? 1.0 : 0.0);
            orow[j] = bad ? NAN : (float)(dy * g / (double)n);
        }
    }
}

/* ARGMAX: is (v2, i2) a better answer than (v1, i1)? NaN beats numbers, the
 * larger value beats the smaller, and on ties (two NaNs included) the lower
 * index wins: the reference's "first maximal index, first NaN". */
__device__ bool argmax_better(float v1, int64_t i1, float v2, int64_t i2)
{
    bool n1 = v1 != v1, n2 = v2 != v2;
    if (n1 || n2)
        return n1 && n2 ? i2 < i1 : n2;
    if (v2 != v1)
        return v2 > v1;
    return i2 < i1;
}

__global__ void k_argmax(const float *x, int32_t *o, int64_t rows, int64_t c)
{
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * c;
        float bv = -INFINITY;
        int64_t bi = INT64_MAX; /* no element yet: loses every tie */
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
            if (argmax_better(bv, bi, xr[j], j)) {
                bv = xr[j];
                bi = j;
            }
        for (int off = 16; off > 0; off >>= 1) {
            float v2 = __shfl_down_sync(0xffffffffu, bv, off);
            int64_t i2 = __shfl_down_sync(0xffffffffu, bi, off);
            if (argmax_better(bv, bi, v2, i2)) {
                bv = v2;
                bi = i2;
            }
        }
        if (nw > 1) {
            __syncthreads();
            if (lane == 0) {
                shv[w] = bv;
                shi[w] = bi;
            }
            __syncthreads();
            if (w == 0) {
                bv = lane < nw ? shv[lane] : -INFINITY;
                bi = lane < nw ? shi[lane] : INT64_MAX;
                for (int off = 16; off > 0; off >>= 1) {
                    float v2 = __shfl_down_sync(0xffffffffu, bv, off);
                    int64_t i2 = __shfl_down_sync(0xffffffffu, bi, off);
                    if (argmax_better(bv, bi, v2, i2)) {
                        bv = v2;
                        bi = i2;
                    }
                }
            }
        }
        if (threadIdx.x == 0)
            o[r] = (int32_t)(bi == INT64_MAX ? 0 : bi);
    }
}

/* ---- layout ---- */

/* [m,n] -> [n,m] of 32-bit words, through a padded 32x32 shared tile. */
__global__ void k_transpose(const uint32_t *x, uint32_t *o, int64_t m, int64_t n)
{
    __shared__ uint32_t tile[32][33];
    for (int64_t by = blockIdx.y; by * 32 < m; by += gridDim.y)
        for (int64_t bx = blockIdx.x; bx * 32 < n; bx += gridDim.x) {
            int64_t r0 = by * 32, c0 = bx * 32;
            for (int k = threadIdx.y; k < 32; k += blockDim.y) {
                int64_t r = r0 + k, c = c0 + threadIdx.x;
                if (r < m && c < n)
                    tile[k][threadIdx.x] = x[r * n + c];
            }
            __syncthreads();
            for (int k = threadIdx.y; k < 32; k += blockDim.y) {
                int64_t oc = c0 + k, orow = r0 + threadIdx.x; /* out[oc][orow] */
                if (oc < n && orow < m)
                    o[oc * m + orow] = tile[threadIdx.x][k];
            }
            __syncthreads();
        }
}

/* A device copy of `words` 4-byte words, from word `from` of input 0 to word
 * `to` of the output; with `zero`, the output's other words are zeroed first
 * (SliceGrad). Nothing is launched: the copy engine does it in order. */
int copy_range(const vdev_cuda_args *a, int64_t from, int64_t to, int64_t words, bool zero,
               cudaStream_t s, char *msg, size_t cap)
{
    cudaError_t e = cudaSuccess;
    if (zero) {
        int64_t all = 1;
        for (int d = 0; d < a->out_ndim[0]; d++)
            all *= a->out_shape[0][d];
        e = cudaMemsetAsync(a->out[0], 0, (size_t)all * 4u, s);
    }
    if (e == cudaSuccess && words > 0)
        e = cudaMemcpyAsync((uint32_t *)a->out[0] + to, (const uint32_t *)a->in[0] + from,
                            (size_t)words * 4u, cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess) {
        snprintf(msg, cap, "CUDA plugin: %s: device copy failed: %s", op_name(a->op),
                 cudaGetErrorString(e));
        (void)cudaGetLastError(); /* cleared: the next launch must not report it */
        return VDEV_CUDA_RC_FAILED;
    }
    return VDEV_CUDA_RC_OK;
}

int copy_words(const vdev_cuda_args *a, cudaStream_t s, char *msg, size_t cap)
{
    return copy_range(a, 0, 0, numel_in(a, 0), false, s, msg, cap);
}

/* The elements of one row of input k (every dimension but the first). */
int64_t row_numel(const vdev_cuda_args *a, int k)
{
    int64_t n = 1;
    for (int d = 1; d < a->in_ndim[k]; d++)
        n *= a->in_shape[k][d];
    return n;
}

/* Whether the op has no element to write: it then returns before touching
 * the device (a grid of size 0 is a launch error). Reductions of an empty
 * axis, MSE and cross-entropy still write their outputs (SUM 0, MEAN 0/0 =
 * NaN; the losses 0 for an empty batch, MSE NaN for examples without
 * elements); matmul decides in run_matmul. */
bool nothing_to_do(const vdev_cuda_args *a)
{
    switch (a->op) {
    case VDEV_OP_MATMUL:
    case VDEV_OP_BATCH_MATMUL:
    case VDEV_OP_MSE:
    case VDEV_OP_SOFTMAX_CE:
        return false;
    case VDEV_OP_SUM:
    case VDEV_OP_MEAN:
    case VDEV_OP_MAX: /* an empty axis: the identity to write */
    case VDEV_OP_MIN: {
        int64_t outer, len, inner;
        split_axis(a, 0, a->i[0], &outer, &len, &inner);
        return outer * inner == 0;
    }
    case VDEV_OP_BROADCAST:
    case VDEV_OP_MSE_GRAD:
    case VDEV_OP_SOFTMAX_CE_GRAD:
    case VDEV_OP_CONCAT: /* input 0 may be empty, the others not */
    case VDEV_OP_PACK:
    case VDEV_OP_GATHER: /* empty params, indices outside them: zeros to write */
    {
        int64_t n = 1;
        for (int d = 0; d < a->out_ndim[0]; d++)
            n *= a->out_shape[0][d];
        return n == 0;
    }
    case VDEV_OP_STRIDED_SLICE_GRAD: /* zeros to write where dy has no element */
    case VDEV_OP_SLICE_GRAD: /* zeros to write where dy has no row */
    case VDEV_OP_CONV2D_BACKPROP_FILTER: /* an empty batch: zeros to write */
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER:
        return numel_in(a, 1) == 0;
    case VDEV_OP_GATHER_GRAD: /* no index: zeros to write */
        return numel_in(a, 2) == 0;
    case VDEV_OP_REDUCE_ROWS: /* mode 3: sums over empty blocks are zeros to write */
        return a->i[3] == 2 ? false : numel_in(a, a->i[3] == 0 ? 0 : 1) == 0;
    case VDEV_OP_ADD:
    case VDEV_OP_SUB:
    case VDEV_OP_MUL:
    case VDEV_OP_DIV:
    case VDEV_OP_MAXIMUM:
    case VDEV_OP_MINIMUM: { /* mode 3: the output may be smaller or larger than a */
        if (a->i[3] != 3)
            return numel_in(a, 0) == 0;
        int64_t n = 1;
        for (int d = 0; d < a->out_ndim[0]; d++)
            n *= a->out_shape[0][d];
        return n == 0;
    }
    default:
        return numel_in(a, 0) == 0;
    }
}

} // namespace
} // namespace vdev_cuda

extern "C" int vdev_cuda_run_op(const struct vdev_cuda_args *a,
                                const struct vdev_cuda_launch_env *env, char *msg, size_t cap)
{
    using namespace vdev_cuda;
    cudaStream_t s = (cudaStream_t)env->stream;
    int n_sm = env->n_sm;
    const float *in0 = (const float *)a->in[0];
    float *out0 = (float *)a->out[0];
    if (a->op == VDEV_OP_CONV2D_TRANSPOSE) {
        /* Conv2DBackpropInput's kernel on rewritten arguments (conv_transpose.h) */
        vdev_cuda_args b;
        VDEV_CONV_TRANSPOSE_AS_BACKPROP(&b, a);
        return vdev_cuda_run_op(&b, env, msg, cap);
    }
    if (a->op >= 0 && a->op < VDEV_OP_COUNT && nothing_to_do(a))
        return VDEV_CUDA_RC_OK;
    switch (a->op) {
    case VDEV_OP_MATMUL:
        return run_matmul(a, env, msg, cap);
    case VDEV_OP_BATCH_MATMUL:
        return run_batch_matmul(a, env, msg, cap);
    case VDEV_OP_ADD:
    case VDEV_OP_SUB:
    case VDEV_OP_MUL:
    case VDEV_OP_DIV:
    case VDEV_OP_MAXIMUM:
    case VDEV_OP_MINIMUM:
    case VDEV_OP_MAXMIN_GRAD:
        run_binary(a, s, n_sm); /* cuda_binary.cu */
        break;
    case VDEV_OP_ADD_SCALAR: launch_unary<U_ADDS>(a, s, n_sm); break;
    case VDEV_OP_MUL_SCALAR: launch_unary<U_MULS>(a, s, n_sm); break;
    case VDEV_OP_POW_SCALAR: launch_unary<U_POWS>(a, s, n_sm); break;
    case VDEV_OP_RELU: launch_unary<U_RELU>(a, s, n_sm); break;
    case VDEV_OP_TANH: launch_unary<U_TANH>(a, s, n_sm); break;
    case VDEV_OP_SIGMOID: launch_unary<U_SIGMOID>(a, s, n_sm); break;
    case VDEV_OP_EXP: launch_unary<U_EXP>(a, s, n_sm); break;
    case VDEV_OP_LOG: launch_unary<U_LOG>(a, s, n_sm); break;
    case VDEV_OP_SQRT: launch_unary<U_SQRT>(a, s, n_sm); break;
    case VDEV_OP_ERF: launch_unary<U_ERF>(a, s, n_sm); break;
    case VDEV_OP_SOFTPLUS: launch_unary<U_SOFTPLUS>(a, s, n_sm); break;
    case VDEV_OP_SOFTMAX:
    case VDEV_OP_LOG_SOFTMAX: {
        int64_t c = last_dim(a, 0), rows = numel_in(a, 0) / c;
        if (a->op == VDEV_OP_SOFTMAX)
            LAUNCH(grid_rows(rows, n_sm), row_threads(c), s, k_softmax<R_SOFTMAX>)(in0, out0, rows,
                                                                                  c);
        else
            LAUNCH(grid_rows(rows, n_sm), row_threads(c), s, k_softmax<R_LOG_SOFTMAX>)(
                in0, out0, rows, c);
        break;
    }
    case VDEV_OP_SUM:
    case VDEV_OP_MEAN: {
        if (a->in_dtype[0] == 1 /* VDEV_I32: Sum only */) {
            run_extreme(a, s, n_sm); /* cuda_extreme.cu */
            break;
        }
        int64_t outer, len, inner;
        split_axis(a, 0, a->i[0], &outer, &len, &inner);
        reduce_sum(in0, nullptr, outer, len, inner, a->op == VDEV_OP_MEAN, (double)len, out0, env);
        break;
    }
    case VDEV_OP_RESHAPE: /* a view; if asked anyway, its reference is a copy */
    case VDEV_OP_IDENTITY:
        return copy_words(a, s, msg, cap);
    case VDEV_OP_TRANSPOSE: {
        /* the 2-D form (j[0] 0: arguments made without the shape rule) and
         * the permutation {1, 0} of a 2-D tensor through the tiled kernel,
         * any other permutation (j[0] 1, i[]) a gather */
        if (a->j[0] != 0 && !(a->in_ndim[0] == 2 && a->i[0] == 1 && a->i[1] == 0)) {
            run_layout(a, s, n_sm); /* cuda_concat.cu */
            break;
        }
        int64_t m = a->in_shape[0][0], n = a->in_shape[0][1];
        int64_t gx = (n + 31) / 32, gy = (m + 31) / 32;
        dim3 grid((unsigned)(gx < 65535 ? gx : 65535), (unsigned)(gy < 65535 ? gy : 65535));
        LAUNCH(grid, dim3(32, 8), s, k_transpose)((const uint32_t *)a->in[0],
                                                 (uint32_t *)a->out[0], m, n);
        break;
    }
    case VDEV_OP_MSE: {
        /* Over every element, divided by their count, as the reference; no
         * example (every dimension but the last multiplies to 0, as
         * vdev_loss_examples counts them): the empty sum undivided, 0.
         * Examples without elements ([3,0], or [0] with its one example)
         * still give 0/0 = NaN. */
        int64_t n = numel_in(a, 0), examples = 1;
        for (int d = 0; d + 1 < a->in_ndim[0]; d++)
            examples *= a->in_shape[0][d];
        reduce_sum(in0, (const float *)a->in[1], 1, n, 1, examples != 0, (double)n, out0, env);
        break;
    }
    case VDEV_OP_SOFTMAX_CE: {
        int64_t n = a->in_shape[0][0], c = a->in_shape[0][1];
        int parts = 0;
        if (n > 0) {
            parts = (int)(n < 1024 ? n : 1024);
            LAUNCH(parts, row_threads(c), s, k_softmax_ce_rows)(
                in0, (const int32_t *)a->in[1], n, c, (double *)env->scratch);
        }
        LAUNCH(1, 32, s, k_mean_of_partials)((const double *)env->scratch, parts, n, out0);
        break;
    }
    case VDEV_OP_ARGMAX: {
        int64_t c = last_dim(a, 0), rows = numel_in(a, 0) / c;
        LAUNCH(grid_rows(rows, n_sm), row_threads(c), s, k_argmax)(in0, (int32_t *)a->out[0],
                                                                   rows, c);
        break;
    }
    case VDEV_OP_RELU_GRAD: launch_grad2<G_RELU>(a, s, n_sm); break;
    case VDEV_OP_TANH_GRAD: launch_grad2<G_TANH>(a, s, n_sm); break;
    case VDEV_OP_SIGMOID_GRAD: launch_grad2<G_SIGMOID>(a, s, n_sm); break;
    case VDEV_OP_SOFTMAX_GRAD:
    case VDEV_OP_LOG_SOFTMAX_GRAD: {
        int64_t c = last_dim(a, 0), rows = numel_in(a, 0) / c;
        const float *y = (const float *)a->in[1];
        if (a->op == VDEV_OP_SOFTMAX_GRAD)
            LAUNCH(grid_rows(rows, n_sm), row_threads(c), s, k_softmax_grad<RG_SOFTMAX>)(
                in0, y, out0, rows, c);
        else
            LAUNCH(grid_rows(rows, n_sm), row_threads(c), s, k_softmax_grad<RG_LOG_SOFTMAX>)(
                in0, y, out0, rows, c);
        break;
    }
    case VDEV_OP_BROADCAST: {
        int64_t outer, len, inner;
        split_axis(a, 1, a->i[0], &outer, &len, &inner);
        int64_t n = outer * len * inner;
        LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_broadcast)(in0, out0, n, len, inner);
        break;
    }
    case VDEV_OP_MSE_GRAD: {
        int64_t n = numel_in(a, 1);
        LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_mse_grad)(
            in0, (const float *)a->in[1], (const float *)a->in[2], out0, n);
        break;
    }
    case VDEV_OP_SOFTMAX_CE_GRAD: {
        int64_t n = a->in_shape[1][0], c = a->in_shape[1][1];
        LAUNCH(grid_rows(n, n_sm), row_threads(c), s, k_softmax_ce_grad)(
            in0, (const float *)a->in[1], (const int32_t *)a->in[2], out0, n, c);
        break;
    }
    case VDEV_OP_REDUCE_ROWS: {
        int64_t n = numel_in(a, 0);
        if (a->i[3] == 0)
            return copy_words(a, s, msg, cap);
        if (a->i[3] == 3) {
            launch_reduce_bcast(a, s, n_sm);
            break;
        }
        int64_t cols = a->i[3] == 1 ? numel_in(a, 1) : 1;
        int64_t rows = cols ? n / cols : 0;
        /* o[j] = sum_r dy[r cols + j]: one outer block, the rows as the axis */
        reduce_sum(in0, nullptr, 1, rows, cols, false, 1.0, out0, env);
        break;
    }
    case VDEV_OP_SGD_UPDATE:
    case VDEV_OP_ADAM_UPDATE:
    case VDEV_OP_AMSGRAD_MOMENTS:
    case VDEV_OP_AMSGRAD_APPLY:
    case VDEV_OP_CLIP_GRAD:
        run_update(a, s, n_sm); /* cuda_updates.cu */
        break;
    case VDEV_OP_SLICE: /* rows i[0].. of axis 0: one contiguous range */
        return copy_range(a, a->i[0] * row_numel(a, 0), 0, a->i[1] * row_numel(a, 0), false, s,
                          msg, cap);
    case VDEV_OP_SLICE_GRAD:
        return copy_range(a, 0, a->i[0] * row_numel(a, 1), numel_in(a, 0), true, s, msg, cap);
    case VDEV_OP_CONV2D:
    case VDEV_OP_MAX_POOL:
    case VDEV_OP_AVG_POOL:
    case VDEV_OP_CONV2D_BACKPROP_INPUT:
    case VDEV_OP_CONV2D_BACKPROP_FILTER:
    case VDEV_OP_MAX_POOL_GRAD:
    case VDEV_OP_AVG_POOL_GRAD:
        run_conv(a, s, n_sm); /* cuda_conv.cu */
        break;
    case VDEV_OP_STRIDED_SLICE:
    case VDEV_OP_STRIDED_SLICE_GRAD:
    case VDEV_OP_STRIDED_SLICE_GRAD_ADD:
        run_slice(a, s, n_sm); /* cuda_slice.cu */
        break;
    case VDEV_OP_CONCAT:
    case VDEV_OP_PACK:
        run_layout(a, s, n_sm); /* cuda_concat.cu */
        break;
    case VDEV_OP_GATHER:
    case VDEV_OP_GATHER_GRAD:
        run_gather(a, s, n_sm); /* cuda_gather.cu */
        break;
    case VDEV_OP_DEPTHWISE_CONV2D:
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT:
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER:
        run_depthwise(a, s, n_sm); /* cuda_depthwise.cu */
        break;
    case VDEV_OP_LSTM_GATES:
    case VDEV_OP_LSTM_GATES_GRAD:
    case VDEV_OP_LSTM_CELL_STATE:
    case VDEV_OP_LSTM_CELL_OUTPUT:
    case VDEV_OP_LSTM_CELL_GRAD:
        run_lstm(a, s, n_sm); /* cuda_lstm.cu */
        break;
    case VDEV_OP_GRU_GATES:
    case VDEV_OP_GRU_GATES_GRAD:
    case VDEV_OP_GRU_CELL_OUTPUT:
    case VDEV_OP_GRU_CELL_GRAD:
        run_gru(a, s, n_sm); /* cuda_gru.cu */
        break;
    case VDEV_OP_SELECT_MASK:
    case VDEV_OP_SELECT_MASK_GRAD:
        run_select(a, s, n_sm); /* cuda_select.cu */
        break;
    case VDEV_OP_EQUAL:
    case VDEV_OP_NOT_EQUAL:
    case VDEV_OP_LESS:
    case VDEV_OP_LESS_EQUAL:
    case VDEV_OP_GREATER:
    case VDEV_OP_GREATER_EQUAL:
    case VDEV_OP_LOGICAL_AND:
    case VDEV_OP_LOGICAL_OR:
    case VDEV_OP_LOGICAL_NOT:
    case VDEV_OP_CAST:
    case VDEV_OP_SELECT_V2:
    case VDEV_OP_FLOOR_DIV:
    case VDEV_OP_FLOOR_MOD:
        run_compare(a, s, n_sm); /* cuda_compare.cu */
        break;
    case VDEV_OP_MAX:
    case VDEV_OP_MIN:
    case VDEV_OP_ABS:
    case VDEV_OP_SIGN:
    case VDEV_OP_FLOOR:
    case VDEV_OP_CEIL:
    case VDEV_OP_ROUND:
        run_extreme(a, s, n_sm); /* cuda_extreme.cu */
        break;
    default:
        snprintf(msg, cap, "CUDA plugin: no CUDA kernel for op %d (%s); this build knows ops 0..%d",
                 a->op, op_name(a->op), VDEV_OP_COUNT - 1);
        return VDEV_CUDA_RC_UNSUPPORTED;
    }
    cudaError_t e = cudaGetLastError();
    if (e == cudaErrorMemoryAllocation) {
        /* the kernel's code, loaded on its first launch, found no room */
        snprintf(msg, cap,
                 "CUDA plugin: launching the %s kernel failed: %s: %s: the GPU has no memory "
                 "left to load the kernel; " VDEV_CUDA_OOM_ADVICE,
                 op_name(a->op), cudaGetErrorName(e), cudaGetErrorString(e));
        return VDEV_CUDA_RC_OOM;
    }
    if (e != cudaSuccess) {
        snprintf(msg, cap, "CUDA plugin: launching the %s kernel failed: %s: %s", op_name(a->op),
                 cudaGetErrorName(e), cudaGetErrorString(e));
        return VDEV_CUDA_RC_FAILED;
    }
    return VDEV_CUDA_RC_OK;
}

