/* cuda_conv.cu — 2-D convolution and pooling on the GPU (the ops of
 * src/ops/conv.c: Conv2D, MaxPool, AvgPool and their gradient ops), direct
 * kernels written for correctness first: one thread per output element, a
 * grid-stride loop, each element gathered on its own with a double
 * accumulator in the order of the CPU reference (src/ops/conv_kernels.c), so
 * results agree with it to float rounding and are the same on every run (no
 * atomics). The geometry (output size, padding before) follows TensorFlow's
 * rule as the shape rule checked it; the parameters are the table's: the
 * convolutions' strides in i[0], i[1] and dilations in j[0], j[1] (0 reads
 * as 1; the window's effective size (k - 1) d + 1 sets the output's size
 * and padding), the pools' window in i[0], i[1] and strides in i[2], i[3],
 * the padding in f[0] (1: SAME). The pools skip the
 * padding: max and mean over the window's elements inside the input, the
 * first of equal maxima taking the gradient. */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

/* x [n,h,w,c], window kh x kw, o outputs, strides, output oh x ow, padding
 * before (pt, pl), dilations (1 for the pools). */
struct geom {
    int64_t n, h, w, c, kh, kw, o, sh, sw, oh, ow, pt, pl, dh, dw;
};

/* TensorFlow's (in + s - 1) / s and (in - k + s) / s, as the shape rule
 * (src/ops/conv.c) computes them: no sum passes INT64_MAX, since a
 * dimension may be that large in an empty tensor (an empty batch still
 * reaches Conv2DBackpropFilter, whose filter gradient is zeros). */
void out_dim(int64_t in, int64_t k, int64_t s, bool same, int64_t *out, int64_t *before)
{
    if (same) {
        *out = in / s + (in % s != 0);
        /* (out - 1) s < in, so this is (out - 1) s + k - in without overflow */
        int64_t need = ((*out - 1) * s - in) + k;
        *before = need > 0 ? need / 2 : 0;
    } else {
        *out = in >= k ? (in - k) / s + 1 : (s - (k - in)) / s;
        *before = 0;
    }
}

geom geom_of(const vdev_cuda_args *a)
{
    geom g;
    g.n = a->in_shape[0][0];
    g.h = a->in_shape[0][1];
    g.w = a->in_shape[0][2];
    g.c = a->in_shape[0][3];
    bool conv = a->op == VDEV_OP_CONV2D || a->op == VDEV_OP_CONV2D_BACKPROP_INPUT ||
                a->op == VDEV_OP_CONV2D_BACKPROP_FILTER;
    if (conv) {
        g.kh = a->in_shape[1][0];
        g.kw = a->in_shape[1][1];
        g.o = a->in_shape[1][3];
        g.sh = a->i[0];
        g.sw = a->i[1];
        g.dh = a->j[0] > 1 ? a->j[0] : 1;
        g.dw = a->j[1] > 1 ? a->j[1] : 1;
    } else {
        g.kh = a->i[0];
        g.kw = a->i[1];
        g.o = g.c;
        g.sh = a->i[2];
        g.sw = a->i[3];
        g.dh = g.dw = 1;
    }
    bool same = a->f[0] == 1.0;
    /* the shape rule checked that the effective sizes fit an int64 */
    out_dim(g.h, g.kh > 0 ? (g.kh - 1) * g.dh + 1 : g.kh, g.sh, same, &g.oh, &g.pt);
    out_dim(g.w, g.kw > 0 ? (g.kw - 1) * g.dw + 1 : g.kw, g.sw, same, &g.ow, &g.pl);
    return g;
}

/* The window rows [*lo, *hi) of output row r inside [0, len). */
__device__ inline void win(int64_t r, int64_t s, int64_t pad, int64_t k, int64_t len,
                           int64_t *lo, int64_t *hi)
{
    int64_t start = r * s - pad;
    *lo = start < 0 ? 0 : start;
    *hi = start + k > len ? len : start + k;
}

/* The output rows [*lo, *hi) whose windows hold input row i. */
__device__ inline void cover(int64_t i, int64_t s, int64_t pad, int64_t k, int64_t out,
                             int64_t *lo, int64_t *hi)
{
    int64_t t = i + pad - k + 1;
    *lo = t <= 0 ? 0 : (t + s - 1) / s;
    *hi = (i + pad) / s + 1;
    if (*hi > out)
        *hi = out;
}

__global__ void k_conv2d(const float *x, const float *f, float *y, geom g)
{
    GRID_LOOP(e, g.n * g.oh * g.ow * g.o)
    {
        int64_t o = e % g.o, q = e / g.o % g.ow, r = e / g.o / g.ow % g.oh;
        int64_t n = e / g.o / g.ow / g.oh;
        double acc = 0.0;
        for (int64_t di = 0; di < g.kh; di++) {
            int64_t i = r * g.sh - g.pt + di * g.dh;
            if (i < 0 || i >= g.h)
                continue;
            for (int64_t dj = 0; dj < g.kw; dj++) {
                int64_t j = q * g.sw - g.pl + dj * g.dw;
                if (j < 0 || j >= g.w)
                    continue;
                const float *xp = x + ((n * g.h + i) * g.w + j) * g.c;
                const float *fp = f + ((di * g.kw + dj) * g.c) * g.o + o;
                for (int64_t c = 0; c < g.c; c++)
                    acc += (double)xp[c] * (double)fp[c * g.o];
            }
        }
        y[e] = (float)acc;
    }
}

__global__ void k_conv_input(const float *f, const float *dy, float *dx, geom g)
{
    GRID_LOOP(e, g.n * g.h * g.w * g.c)
    {
        int64_t c = e % g.c, j = e / g.c % g.w, i = e / g.c / g.w % g.h;
        int64_t n = e / g.c / g.w / g.h;
        double acc = 0.0;
        for (int64_t di = 0; di < g.kh; di++) {
            int64_t t = i + g.pt - di * g.dh;
            if (t < 0 || t % g.sh || t / g.sh >= g.oh)
                continue;
            int64_t r = t / g.sh;
            for (int64_t dj = 0; dj < g.kw; dj++) {
                int64_t u = j + g.pl - dj * g.dw;
                if (u < 0 || u % g.sw || u / g.sw >= g.ow)
                    continue;
                int64_t q = u / g.sw;
                const float *dp = dy + ((n * g.oh + r) * g.ow + q) * g.o;
                const float *fp = f + ((di * g.kw + dj) * g.c + c) * g.o;
                for (int64_t o = 0; o < g.o; o++)
                    acc += (double)dp[o] * (double)fp[o];
            }
        }
        dx[e] = (float)acc;
    }
}

__global__ void k_conv_filter(const float *x, const float *dy, float *df, geom g)
{
    GRID_LOOP(e, g.kh * g.kw * g.c * g.o)
    {
        int64_t o = e % g.o, c = e / g.o % g.c, dj = e / g.o / g.c % g.kw;
        int64_t di = e / g.o / g.c / g.kw;
        double acc = 0.0;
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t r = 0; r < g.oh; r++) {
                int64_t i = r * g.sh - g.pt + di * g.dh;
                if (i < 0 || i >= g.h)
                    continue;
                for (int64_t q = 0; q < g.ow; q++) {
                    int64_t j = q * g.sw - g.pl + dj * g.dw;
                    if (j < 0 || j >= g.w)
                        continue;
                    acc += (double)x[((n * g.h + i) * g.w + j) * g.c + c] *
                           (double)dy[((n * g.oh + r) * g.ow + q) * g.o + o];
                }
            }
        df[e] = (float)acc;
    }
}

/* The flat index in x of output (n, r, q, c)'s first maximum; -1 for none. */
__device__ inline int64_t argmax_at(const float *x, const geom &g, int64_t n, int64_t r,
                                    int64_t q, int64_t c)
{
    int64_t ilo, ihi, jlo, jhi, best = -1;
    win(r, g.sh, g.pt, g.kh, g.h, &ilo, &ihi);
    win(q, g.sw, g.pl, g.kw, g.w, &jlo, &jhi);
    for (int64_t i = ilo; i < ihi; i++)
        for (int64_t j = jlo; j < jhi; j++) {
            int64_t at = ((n * g.h + i) * g.w + j) * g.c + c;
            if (best < 0 || x[at] > x[best])
                best = at;
        }
    return best;
}

__global__ void k_pool(const float *x, float *y, geom g, bool avg)
{
    GRID_LOOP(e, g.n * g.oh * g.ow * g.c)
    {
        int64_t c = e % g.c, q = e / g.c % g.ow, r = e / g.c / g.ow % g.oh;
        int64_t n = e / g.c / g.ow / g.oh;
        if (!avg) {
            int64_t at = argmax_at(x, g, n, r, q, c);
            y[e] = at < 0 ? -INFINITY : x[at];
            continue;
        }
        int64_t ilo, ihi, jlo, jhi;
        win(r, g.sh, g.pt, g.kh, g.h, &ilo, &ihi);
        win(q, g.sw, g.pl, g.kw, g.w, &jlo, &jhi);
        double acc = 0.0;
        for (int64_t i = ilo; i < ihi; i++)
            for (int64_t j = jlo; j < jhi; j++)
                acc += x[((n * g.h + i) * g.w + j) * g.c + c];
        y[e] = (float)(acc / (double)((ihi - ilo) * (jhi - jlo)));
    }
}

/* x is read by the max pool's gradient only (NULL for the average's). */
__global__ void k_pool_grad(const float *x, const float *dy, float *dx, geom g)
{
    GRID_LOOP(e, g.n * g.h * g.w * g.c)
    {
        int64_t c = e % g.c, j = e / g.c % g.w, i = e / g.c / g.w % g.h;
        int64_t n = e / g.c / g.w / g.h;
        int64_t rlo, rhi, qlo, qhi;
        cover(i, g.sh, g.pt, g.kh, g.oh, &rlo, &rhi);
        cover(j, g.sw, g.pl, g.kw, g.ow, &qlo, &qhi);
        double acc = 0.0;
        for (int64_t r = rlo; r < rhi; r++)
            for (int64_t q = qlo; q < qhi; q++) {
                double d = dy[((n * g.oh + r) * g.ow + q) * g.c + c];
                if (x) {
                    if (argmax_at(x, g, n, r, q, c) == e)
                        acc += d;
                } else {
                    int64_t ilo, ihi, jlo, jhi;
                    win(r, g.sh, g.pt, g.kh, g.h, &ilo, &ihi);
                    win(q, g.sw, g.pl, g.kw, g.w, &jlo, &jhi);
                    acc += d / (double)((ihi - ilo) * (jhi - jlo));
                }
            }
        dx[e] = (float)acc;
    }
}

} // namespace

int run_conv(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    geom g = geom_of(a);
    const float *in0 = (const float *)a->in[0], *in1 = (const float *)a->in[1];
    const float *in2 = (const float *)a->in[2];
    float *out = (float *)a->out[0];
    int64_t ny = g.n * g.oh * g.ow * g.o, nx = g.n * g.h * g.w * g.c;
    switch (a->op) {
    case VDEV_OP_CONV2D:
        LAUNCH(grid_for(ny, kThreads, n_sm), kThreads, s, k_conv2d)(in0, in1, out, g);
        return 1;
    case VDEV_OP_CONV2D_BACKPROP_INPUT:
        LAUNCH(grid_for(nx, kThreads, n_sm), kThreads, s, k_conv_input)(in1, in2, out, g);
        return 1;
    case VDEV_OP_CONV2D_BACKPROP_FILTER: {
        int64_t nf = g.kh * g.kw * g.c * g.o;
        LAUNCH(grid_for(nf, kThreads, n_sm), kThreads, s, k_conv_filter)(in0, in2, out, g);
        return 1;
    }
    case VDEV_OP_MAX_POOL:
    case VDEV_OP_AVG_POOL:
        LAUNCH(grid_for(ny, kThreads, n_sm), kThreads, s, k_pool)(in0, out, g,
                                                                 a->op == VDEV_OP_AVG_POOL);
        return 1;
    case VDEV_OP_MAX_POOL_GRAD:
        LAUNCH(grid_for(nx, kThreads, n_sm), kThreads, s, k_pool_grad)(in0, in2, out, g);
        return 1;
    case VDEV_OP_AVG_POOL_GRAD:
        LAUNCH(grid_for(nx, kThreads, n_sm), kThreads, s, k_pool_grad)(nullptr, in1, out, g);
        return 1;
    default:
        return 0;
    }
}

} // namespace vdev_cuda
