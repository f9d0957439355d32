/* cuda_compare.cu — the comparisons, the logical ops, Cast and SelectV2 on
 * the GPU (the ops of src/ops/compare.c), and FloorDiv and FloorMod
 * (floor.c), one thread per output element,
 * each input's element found through its strides over the output's four
 * dimensions (0 along the axes it is broadcast over), whatever broadcast
 * mode the shape rule chose: these ops are not on a training step's hot
 * path, and one general kernel keeps them few. Every result is a word the
 * reference computes the same way: IEEE comparisons, integer logic, the
 * words of a select copied, and Cast's float-to-int32 as __float2int_rz
 * (truncation, saturation, NaN to 0), which the reference spells out. */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

/* vdev's dtype codes (vdev/tensor.h, which this file does not include;
 * compare.c asserts them). */
enum { VDEV_F32 = 0, VDEV_I32 = 1, VDEV_BOOL = 2 };

/* The output's dimensions in four (leading 1s) and up to three inputs'
 * strides over them. */
struct geom3 {
    int64_t n[4];
    int64_t s[3][4];
};

geom3 geom_of(const vdev_cuda_args *a, int n_in)
{
    geom3 g;
    const int no = a->out_ndim[0];
    for (int d = 0; d < 4; d++)
        g.n[d] = d >= 4 - no ? a->out_shape[0][d - (4 - no)] : 1;
    for (int k = 0; k < 3; k++) {
        const int nk = k < n_in ? a->in_ndim[k] : 0;
        int64_t st = 1;
        for (int d = 3; d >= 0; d--) {
            const int64_t len = d >= 4 - nk ? a->in_shape[k][d - (4 - nk)] : 1;
            g.s[k][d] = len == 1 ? 0 : st;
            st *= len;
        }
    }
    return g;
}

/* The elements of inputs 0..2 that pair with output element i. */
__device__ void at3(const geom3 &g, int64_t i, int64_t *j)
{
    j[0] = j[1] = j[2] = 0;
    for (int d = 3; d >= 0; d--) {
        const int64_t idx = i % g.n[d];
        i /= g.n[d];
        for (int k = 0; k < 3; k++)
            j[k] += idx * g.s[k][d];
    }
}

enum { C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, C_AND, C_OR };

template <typename T>
__device__ int32_t compare(int c, T u, T v)
{
    switch (c) {
    case C_EQ: return u == v;
    case C_NE: return u != v;
    case C_LT: return u < v;
    case C_LE: return u <= v;
    case C_GT: return u > v;
    case C_GE: return u >= v;
    case C_AND: return u != 0 && v != 0;
    default: return u != 0 || v != 0;
    }
}

template <typename T>
__global__ void k_compare(const T *x, const T *y, int32_t *o, int64_t total, geom3 g, int c)
{
    GRID_LOOP(i, total)
    {
        int64_t j[3];
        at3(g, i, j);
        o[i] = compare<T>(c, x[j[0]], y[j[1]]);
    }
}

__global__ void k_not(const int32_t *x, int32_t *o, int64_t total)
{
    GRID_LOOP(i, total) { o[i] = !x[i]; }
}

/* from, to: VDEV_F32, VDEV_I32, VDEV_BOOL (the same dtype: the words). */
__global__ void k_cast(const void *x, void *o, int64_t total, int from, int to)
{
    const float *xf = (const float *)x;
    const int32_t *xi = (const int32_t *)x;
    float *of = (float *)o;
    int32_t *oi = (int32_t *)o;
    GRID_LOOP(i, total)
    {
        if (from == to)
            oi[i] = xi[i];
        else if (to == VDEV_F32)
            of[i] = __int2float_rn(xi[i]);
        else if (to == VDEV_BOOL)
            oi[i] = from == VDEV_F32 ? xf[i] != 0.0f : xi[i] != 0;
        else if (from == VDEV_F32)
            oi[i] = __float2int_rz(xf[i]);
        else
            oi[i] = xi[i];
    }
}

__global__ void k_select_v2(const int32_t *c, const uint32_t *x, const uint32_t *y, uint32_t *o,
                            int64_t total, geom3 g)
{
    GRID_LOOP(i, total)
    {
        int64_t j[3];
        at3(g, i, j);
        o[i] = c[j[0]] ? x[j[1]] : y[j[2]];
    }
}

/* FloorDiv (div 1) and FloorMod on int32, as floor.c: the quotient toward
 * negative infinity, the remainder with the divisor's sign, 64-bit
 * arithmetic, 0 for a division by zero. */
__global__ void k_floor_int(const int32_t *x, const int32_t *y, int32_t *o, int64_t total,
                            geom3 g, int div)
{
    GRID_LOOP(i, total)
    {
        int64_t j[3];
        at3(g, i, j);
        const int64_t u = x[j[0]], v = y[j[1]];
        if (v == 0) {
            o[i] = 0;
        } else if (div) {
            int64_t q = u / v;
            if (u % v != 0 && ((u < 0) != (v < 0)))
                q -= 1;
            o[i] = (int32_t)(uint32_t)(uint64_t)q;
        } else {
            int64_t r = u % v;
            if (r != 0 && ((r < 0) != (v < 0)))
                r += v;
            o[i] = (int32_t)r;
        }
    }
}

/* FloorDiv and FloorMod on float32, TensorFlow's formulas as floor.c's. */
__global__ void k_floor_f(const float *x, const float *y, float *o, int64_t total, geom3 g,
                          int div)
{
    GRID_LOOP(i, total)
    {
        int64_t j[3];
        at3(g, i, j);
        const float u = x[j[0]], v = y[j[1]];
        if (div) {
            o[i] = floorf(u / v);
        } else {
            const float r = fmodf(u, v);
            o[i] = r != 0.0f && ((v < 0.0f) != (r < 0.0f)) ? r + v : r;
        }
    }
}

} // namespace

int run_compare(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    if (a->op == VDEV_OP_FLOOR_DIV || a->op == VDEV_OP_FLOOR_MOD) {
        int64_t total = 1;
        for (int d = 0; d < a->out_ndim[0]; d++)
            total *= a->out_shape[0][d];
        const int div = a->op == VDEV_OP_FLOOR_DIV;
        if (total == 0)
            return 1;
        if (a->in_dtype[0] == VDEV_I32)
            LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_floor_int)(
                (const int32_t *)a->in[0], (const int32_t *)a->in[1], (int32_t *)a->out[0], total,
                geom_of(a, 2), div);
        else
            LAUNCH(grid_for(total, kThreads, n_sm), kThreads, s, k_floor_f)(
                (const float *)a->in[0], (const float *)a->in[1], (float *)a->out[0], total,
                geom_of(a, 2), div);
        return 1;
    }
    int c;
    switch (a->op) {
    case VDEV_OP_EQUAL: c = C_EQ; break;
    case VDEV_OP_NOT_EQUAL: c = C_NE; break;
    case VDEV_OP_LESS: c = C_LT; break;
    case VDEV_OP_LESS_EQUAL: c = C_LE; break;
    case VDEV_OP_GREATER: c = C_GT; break;
    case VDEV_OP_GREATER_EQUAL: c = C_GE; break;
    case VDEV_OP_LOGICAL_AND: c = C_AND; break;
    case VDEV_OP_LOGICAL_OR: c = C_OR; break;
    case VDEV_OP_LOGICAL_NOT:
    case VDEV_OP_CAST:
    case VDEV_OP_SELECT_V2: c = -1; break;
    default: return 0;
    }
    int64_t total = 1;
    for (int d = 0; d < a->out_ndim[0]; d++)
        total *= a->out_shape[0][d];
    if (total == 0)
        return 1;
    const unsigned grid = grid_for(total, kThreads, n_sm);
    if (a->op == VDEV_OP_LOGICAL_NOT) {
        LAUNCH(grid, kThreads, s, k_not)((const int32_t *)a->in[0], (int32_t *)a->out[0], total);
    } else if (a->op == VDEV_OP_CAST) {
        LAUNCH(grid, kThreads, s, k_cast)(a->in[0], a->out[0], total, a->in_dtype[0],
                                          (int)a->i[0]);
    } else if (a->op == VDEV_OP_SELECT_V2) {
        LAUNCH(grid, kThreads, s, k_select_v2)((const int32_t *)a->in[0],
                                               (const uint32_t *)a->in[1],
                                               (const uint32_t *)a->in[2], (uint32_t *)a->out[0],
                                               total, geom_of(a, 3));
    } else if (a->in_dtype[0] == VDEV_F32) {
        LAUNCH(grid, kThreads, s, k_compare<float>)((const float *)a->in[0],
                                                    (const float *)a->in[1],
                                                    (int32_t *)a->out[0], total, geom_of(a, 2), c);
    } else {
        LAUNCH(grid, kThreads, s, k_compare<int32_t>)((const int32_t *)a->in[0],
                                                      (const int32_t *)a->in[1],
                                                      (int32_t *)a->out[0], total, geom_of(a, 2),
                                                      c);
    }
    return 1;
}

} // namespace vdev_cuda
