/* cuda_depthwise.cu — depthwise 2-D convolution on the GPU (the ops of
 * src/ops/conv_depthwise.c: DepthwiseConv2dNative and its gradient ops
 * DepthwiseConv2dNativeBackpropInput and DepthwiseConv2dNativeBackpropFilter),
 * direct kernels written for correctness first, as cuda_conv.cu's: one
 * thread per output element, a grid-stride loop, each element gathered on
 * its own with a double accumulator in the order of the CPU reference, so
 * results agree with it to float rounding and are the same on every run (no
 * atomics). Input NHWC [N,H,W,C], filter [KH,KW,C,M], output
 * [N,OH,OW,C*M] with channel c*M+m from input channel c alone. The geometry
 * (output size, padding before) follows TensorFlow's rule as the shape rule
 * checked it; the parameters are the table's: the strides in i[0], i[1],
 * the dilations in j[0], j[1] (0 reads as 1), the padding in f[0] (1:
 * SAME). */
#include "backend/cuda/cuda_device.cuh"

namespace vdev_cuda {

namespace {

/* x [n,h,w,c], window kh x kw, m the channel multiplier, strides, output
 * oh x ow, padding before (pt, pl), dilations. */
struct dgeom {
    int64_t n, h, w, c, kh, kw, m, sh, sw, oh, ow, pt, pl, dh, dw;
};

/* TensorFlow's (in + s - 1) / s and (in - k + s) / s, as the shape rule
 * computes them, no sum passing INT64_MAX (an empty tensor's dimension may
 * be that large). */
void dw_out_dim(int64_t in, int64_t k, int64_t s, bool same, int64_t *out, int64_t *before)
{
    if (same) {
        *out = in / s + (in % s != 0);
        int64_t need = ((*out - 1) * s - in) + k;
        *before = need > 0 ? need / 2 : 0;
    } else {
        *out = in >= k ? (in - k) / s + 1 : (s - (k - in)) / s;
        *before = 0;
    }
}

dgeom dgeom_of(const vdev_cuda_args *a)
{
    dgeom g;
    g.n = a->in_shape[0][0];
    g.h = a->in_shape[0][1];
    g.w = a->in_shape[0][2];
    g.c = a->in_shape[0][3];
    g.kh = a->in_shape[1][0];
    g.kw = a->in_shape[1][1];
    g.m = a->in_shape[1][3];
    g.sh = a->i[0];
    g.sw = a->i[1];
    g.dh = a->j[0] > 1 ? a->j[0] : 1;
    g.dw = a->j[1] > 1 ? a->j[1] : 1;
    bool same = a->f[0] == 1.0;
    /* the shape rule checked that the effective sizes fit an int64 */
    dw_out_dim(g.h, g.kh > 0 ? (g.kh - 1) * g.dh + 1 : g.kh, g.sh, same, &g.oh, &g.pt);
    dw_out_dim(g.w, g.kw > 0 ? (g.kw - 1) * g.dw + 1 : g.kw, g.sw, same, &g.ow, &g.pl);
    return g;
}

__global__ void k_depthwise(const float *x, const float *f, float *y, dgeom g)
{
    int64_t cm = g.c * g.m;
    GRID_LOOP(e, g.n * g.oh * g.ow * cm)
    {
        int64_t k = e % cm, q = e / cm % g.ow, r = e / cm / g.ow % g.oh;
        int64_t n = e / cm / g.ow / g.oh, c = k / g.m;
        double acc = 0.0;
        for (int64_t di = 0; di < g.kh; di++) {
            int64_t i = r * g.sh - g.pt + di * g.dh;
            if (i < 0 || i >= g.h)
                continue;
            for (int64_t dj = 0; dj < g.kw; dj++) {
                int64_t j = q * g.sw - g.pl + dj * g.dw;
                if (j < 0 || j >= g.w)
                    continue;
                acc += (double)x[((n * g.h + i) * g.w + j) * g.c + c] *
                       (double)f[(di * g.kw + dj) * cm + k];
            }
        }
        y[e] = (float)acc;
    }
}

__global__ void k_depthwise_input(const float *f, const float *dy, float *dx, dgeom g)
{
    int64_t cm = g.c * g.m;
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
                const float *dp = dy + ((n * g.oh + r) * g.ow + q) * cm + c * g.m;
                const float *fp = f + (di * g.kw + dj) * cm + c * g.m;
                for (int64_t m = 0; m < g.m; m++)
                    acc += (double)dp[m] * (double)fp[m];
            }
        }
        dx[e] = (float)acc;
    }
}

__global__ void k_depthwise_filter(const float *x, const float *dy, float *df, dgeom g)
{
    int64_t cm = g.c * g.m;
    GRID_LOOP(e, g.kh * g.kw * cm)
    {
        int64_t k = e % cm, dj = e / cm % g.kw, di = e / cm / g.kw, c = k / g.m;
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
                           (double)dy[((n * g.oh + r) * g.ow + q) * cm + k];
                }
            }
        df[e] = (float)acc;
    }
}

} // namespace

int run_depthwise(const vdev_cuda_args *a, cudaStream_t s, int n_sm)
{
    dgeom g = dgeom_of(a);
    const float *in0 = (const float *)a->in[0], *in1 = (const float *)a->in[1];
    const float *in2 = (const float *)a->in[2];
    float *out = (float *)a->out[0];
    switch (a->op) {
    case VDEV_OP_DEPTHWISE_CONV2D: {
        int64_t ny = g.n * g.oh * g.ow * g.c * g.m;
        LAUNCH(grid_for(ny, kThreads, n_sm), kThreads, s, k_depthwise)(in0, in1, out, g);
        return 1;
    }
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT: {
        int64_t nx = g.n * g.h * g.w * g.c;
        LAUNCH(grid_for(nx, kThreads, n_sm), kThreads, s, k_depthwise_input)(in1, in2, out, g);
        return 1;
    }
    case VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER: {
        int64_t nf = g.kh * g.kw * g.c * g.m;
        LAUNCH(grid_for(nf, kThreads, n_sm), kThreads, s, k_depthwise_filter)(in0, in2, out, g);
        return 1;
    }
    default:
        return 0;
    }
}

} // namespace vdev_cuda
