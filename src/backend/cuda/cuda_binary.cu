/* cuda_binary.cu — the elementwise ops of two inputs on the GPU (AddV2, Sub,
 * Mul, RealDiv, Maximum, Minimum, each with b broadcast by the mode the shape
 * rule chose in i[3]: the same shape, a row over the last axis, one element,
 * or numpy's general broadcast over 4 padded dimensions), Maximum's and
 * Minimum's gradient op, and REDUCE_ROWS' general mode (a gradient summed
 * back to a broadcast input's shape), moved out of cuda_kernels.cu, which
 * dispatches to them. One thread per output element, in double as the CPU
 * reference computes, so results agree with it bit for bit. */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

/* ---- binary elementwise with b broadcast by mode i[3] ---- */

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN };

/* Maximum and Minimum as the reference (ops/impl.h's VDEV_MAXIMUM): NaN
 * propagates, x first; an equal pair (-0, +0 too) gives x. */
template <int OP>
__device__ double binary_op(double u, double v)
{
    switch (OP) {
    case OP_ADD: return u + v;
    case OP_SUB: return u - v;
    case OP_MUL: return u * v;
    case OP_DIV: return u / v;
    case OP_MAX: return u != u ? u : v != v ? v : u < v ? v : u;
    default: return u != u ? u : v != v ? v : v < u ? v : u;
    }
}

template <int OP, int MODE>
__global__ void k_binary(const float *x, const float *b, float *o, int64_t n, int64_t cols)
{
    GRID_LOOP(i, n)
    {
        double u = x[i];
        double v = MODE == 1 ? b[i % cols] : MODE == 2 ? b[0] : b[i];
        o[i] = (float)binary_op<OP>(u, v);
    }
}

/* Mode 3 (numpy's broadcasting in general): the output's 4 padded
 * dimensions, and each input's strides over them (0 along a dimension it is
 * broadcast over), as the reference's pad4/strides4. */
struct bcast4 {
    int64_t d[4];
    int64_t sx[4], sy[4];
};

void pad4(const int64_t *shape, int ndim, int64_t *s4)
{
    for (int d = 0; d < 4; d++)
        s4[d] = d >= 4 - ndim ? shape[d - (4 - ndim)] : 1;
}

void strides4(const vdev_cuda_args *a, int k, int64_t *st)
{
    int64_t s4[4], s = 1;
    pad4(a->in_shape[k], a->in_ndim[k], s4);
    for (int d = 3; d >= 0; d--) {
        st[d] = s4[d] == 1 ? 0 : s;
        s *= s4[d];
    }
}

/* The elements of x and y (by g's strides) that pair with element i of the
 * 4 padded dimensions g.d. */
__device__ void pair_at(const bcast4 &g, int64_t i, int64_t *jx, int64_t *jy)
{
    int64_t c = i % g.d[3], t = i / g.d[3];
    int64_t r = t % g.d[2];
    t /= g.d[2];
    int64_t q = t % g.d[1], p = t / g.d[1];
    *jx = p * g.sx[0] + q * g.sx[1] + r * g.sx[2] + c * g.sx[3];
    *jy = p * g.sy[0] + q * g.sy[1] + r * g.sy[2] + c * g.sy[3];
}

template <int OP>
__global__ void k_binary_bcast(const float *x, const float *b, float *o, int64_t n, bcast4 g)
{
    GRID_LOOP(i, n)
    {
        int64_t jx, jy;
        pair_at(g, i, &jx, &jy);
        double u = x[jx], v = b[jy];
        o[i] = (float)binary_op<OP>(u, v);
    }
}

/* int32 (AddV2, Sub, Mul, Maximum, Minimum): 32-bit unsigned arithmetic,
 * so an overflow wraps as two's complement, as the reference computes; every
 * broadcast mode through the strides. */
template <int OP>
__global__ void k_binary_int(const int32_t *x, const int32_t *b, int32_t *o, int64_t n, bcast4 g)
{
    GRID_LOOP(i, n)
    {
        int64_t jx, jy;
        pair_at(g, i, &jx, &jy);
        int32_t u = x[jx], v = b[jy];
        uint32_t uu = (uint32_t)u, vv = (uint32_t)v;
        o[i] = OP == OP_ADD   ? (int32_t)(uu + vv)
               : OP == OP_SUB ? (int32_t)(uu - vv)
               : OP == OP_MUL ? (int32_t)(uu * vv)
               : OP == OP_MAX ? (u < v ? v : u)
                              : (v < u ? v : u);
    }
}

template <int OP>
void launch_binary(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    int64_t n = numel_in(a, 0), cols = last_dim(a, 0);
    const float *x = (const float *)a->in[0], *b = (const float *)a->in[1];
    float *o = (float *)a->out[0];
    if (a->in_dtype[0] == 1 /* VDEV_I32 */) {
        bcast4 g;
        pad4(a->out_shape[0], a->out_ndim[0], g.d);
        strides4(a, 0, g.sx);
        strides4(a, 1, g.sy);
        n = g.d[0] * g.d[1] * g.d[2] * g.d[3];
        if (n > 0)
            LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_binary_int<OP>)(
                (const int32_t *)a->in[0], (const int32_t *)a->in[1], (int32_t *)a->out[0], n, g);
        return;
    }
    if (a->i[3] == 3) {
        bcast4 g;
        pad4(a->out_shape[0], a->out_ndim[0], g.d);
        strides4(a, 0, g.sx);
        strides4(a, 1, g.sy);
        n = g.d[0] * g.d[1] * g.d[2] * g.d[3];
        LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_binary_bcast<OP>)(x, b, o, n, g);
        return;
    }
    unsigned g = grid_for(n, kThreads, n_sm);
    switch (a->i[3]) {
    case 1:
        LAUNCH(g, kThreads, s, k_binary<OP, 1>)(x, b, o, n, cols);
        break;
    case 2:
        LAUNCH(g, kThreads, s, k_binary<OP, 2>)(x, b, o, n, cols);
        break;
    default:
        LAUNCH(g, kThreads, s, k_binary<OP, 0>)(x, b, o, n, cols);
        break;
    }
}

/* MAXMIN_GRAD (dy, x, y): dy where the mask (x >= y, or x <= y when min)
 * holds, for x's share (to_y 0), else 0; the other way round for y's. x and
 * y are read through their strides over dy's 4 padded dimensions. */
__global__ void k_maxmin_grad(const float *dy, const float *x, const float *y, float *o,
                              int64_t n, bcast4 g, int min, int to_y)
{
    GRID_LOOP(i, n)
    {
        int64_t jx, jy;
        pair_at(g, i, &jx, &jy);
        float u = x[jx], v = y[jy];
        int mask = min ? u <= v : u >= v;
        o[i] = mask != to_y ? dy[i] : 0.0f;
    }
}

void launch_maxmin_grad(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    bcast4 g;
    pad4(a->in_shape[0], a->in_ndim[0], g.d);
    strides4(a, 1, g.sx);
    strides4(a, 2, g.sy);
    int64_t n = g.d[0] * g.d[1] * g.d[2] * g.d[3];
    LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_maxmin_grad)(
        (const float *)a->in[0], (const float *)a->in[1], (const float *)a->in[2],
        (float *)a->out[0], n, g, (int)a->i[0], (int)a->i[1]);
}

/* REDUCE_ROWS mode 3: element j of like (padded dims l4) is the sum, in
 * double and in dy's order as the reference, of the block of dy (padded dims
 * d4, strides sd) it was broadcast over: one thread per element of like. */
struct reduce4 {
    int64_t l[4], d[4], sd[4];
};

__global__ void k_reduce_bcast(const float *dy, float *o, int64_t n, reduce4 g)
{
    GRID_LOOP(j, n)
    {
        int64_t idx[4], t = j, lo[4], hi[4];
        for (int d = 3; d >= 0; d--) {
            idx[d] = t % g.l[d];
            t /= g.l[d];
        }
        for (int d = 0; d < 4; d++) {
            bool spread = g.l[d] == 1 && g.d[d] != 1;
            lo[d] = spread ? 0 : idx[d];
            hi[d] = spread ? g.d[d] : idx[d] + 1;
        }
        double acc = 0.0;
        for (int64_t k0 = lo[0]; k0 < hi[0]; k0++)
            for (int64_t k1 = lo[1]; k1 < hi[1]; k1++)
                for (int64_t k2 = lo[2]; k2 < hi[2]; k2++)
                    for (int64_t k3 = lo[3]; k3 < hi[3]; k3++)
                        acc += dy[k0 * g.sd[0] + k1 * g.sd[1] + k2 * g.sd[2] + k3 * g.sd[3]];
        o[j] = (float)acc;
    }
}

} // namespace

void launch_reduce_bcast(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    reduce4 g;
    pad4(a->in_shape[0], a->in_ndim[0], g.d);
    pad4(a->in_shape[1], a->in_ndim[1], g.l);
    int64_t st = 1;
    for (int d = 3; d >= 0; d--) {
        g.sd[d] = st;
        st *= g.d[d];
    }
    int64_t n = g.l[0] * g.l[1] * g.l[2] * g.l[3];
    LAUNCH(grid_for(n, kThreads, n_sm), kThreads, s, k_reduce_bcast)(
        (const float *)a->in[0], (float *)a->out[0], n, g);
}

int run_binary(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    switch (a->op) {
    case VDEV_OP_ADD: launch_binary<OP_ADD>(a, s, n_sm); return 1;
    case VDEV_OP_SUB: launch_binary<OP_SUB>(a, s, n_sm); return 1;
    case VDEV_OP_MUL: launch_binary<OP_MUL>(a, s, n_sm); return 1;
    case VDEV_OP_DIV: launch_binary<OP_DIV>(a, s, n_sm); return 1;
    case VDEV_OP_MAXIMUM: launch_binary<OP_MAX>(a, s, n_sm); return 1;
    case VDEV_OP_MINIMUM: launch_binary<OP_MIN>(a, s, n_sm); return 1;
    case VDEV_OP_MAXMIN_GRAD: launch_maxmin_grad(a, s, n_sm); return 1;
    default: return 0;
    }
}

} // namespace vdev_cuda
