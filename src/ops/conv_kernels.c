/* conv_kernels.c — the reference host kernels of 2-D convolution and
 * pooling (conv.c has their shapes and parameters): plain loops with double
 * accumulators that each output element gathers on its own. They are the
 * specification: conv_fast.c's kernels for Conv2D, Conv2DBackpropInput and
 * Conv2DBackpropFilter (im2col or col2im and the matmul's host sgemm), which
 * the cpu backend and simulated GPUs run, are tested against them, and run
 * them where their scratch buffer cannot be had; the pools and their
 * gradients run these on the host. The pools skip the padding: a max over
 * the window's elements inside the input (the first of equal maxima is the
 * window's argmax, which gets the whole gradient, as TensorFlow's
 * MaxPoolGrad on the CPU), a mean over their count (TensorFlow's SAME
 * average). */
#include "ops/impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x[n, i, j, c] of an [N,H,W,C] tensor as g describes it. */
#define AT4(p, g, n_, i_, j_, c_, C_) ((p)[(((n_) * (g)->h + (i_)) * (g)->w + (j_)) * (C_) + (c_)])

/* The window rows [*lo, *hi) of output row r inside [0, len). */
static void window(int64_t r, int64_t s, int64_t pad, int64_t k, int64_t len, int64_t *lo,
                   int64_t *hi)
{
    int64_t start = r * s - pad;
    *lo = start < 0 ? 0 : start;
    *hi = start + k > len ? len : start + k;
}

/* The output rows [*lo, *hi) whose windows hold input row i: r s - pad <= i
 * < r s - pad + k. */
static void covering(int64_t i, int64_t s, int64_t pad, int64_t k, int64_t out, int64_t *lo,
                     int64_t *hi)
{
    int64_t t = i + pad - k + 1; /* r s >= t */
    *lo = t <= 0 ? 0 : (t + s - 1) / s;
    *hi = (i + pad) / s + 1;
    if (*hi > out)
        *hi = out;
}

/* ---- Conv2D ---- */

KERNEL(vdev_ref_conv2d)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    const float *x = a->in[0], *f = a->in[1];
    float *y = a->out[0];
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t r = 0; r < g.oh; r++)
            for (int64_t q = 0; q < g.ow; q++)
                for (int64_t o = 0; o < g.o; o++) {
                    double acc = 0.0;
                    for (int64_t di = 0; di < g.kh; di++) {
                        int64_t i = r * g.sh - g.pt + di * g.dh;
                        if (i < 0 || i >= g.h)
                            continue;
                        for (int64_t dj = 0; dj < g.kw; dj++) {
                            int64_t j = q * g.sw - g.pl + dj * g.dw;
                            if (j < 0 || j >= g.w)
                                continue;
                            const float *xp = &AT4(x, &g, n, i, j, 0, g.c);
                            const float *fp = f + ((di * g.kw + dj) * g.c) * g.o + o;
                            for (int64_t c = 0; c < g.c; c++)
                                acc += (double)xp[c] * (double)fp[c * g.o];
                        }
                    }
                    y[((n * g.oh + r) * g.ow + q) * g.o + o] = (float)acc;
                }
}

/* dx[n,i,j,c] = sum over the taps (di, dj) that put (i, j) under output
 * pixel (r, q) (i = r sh - pt + di dh, and so for j) of dy[n,r,q,:] .
 * filter[di,dj,c,:]. */
KERNEL(vdev_ref_conv2d_backprop_input)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    const float *f = a->in[1], *dy = a->in[2];
    float *dx = a->out[0];
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t i = 0; i < g.h; i++)
            for (int64_t j = 0; j < g.w; j++)
                for (int64_t c = 0; c < g.c; c++) {
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
                    AT4(dx, &g, n, i, j, c, g.c) = (float)acc;
                }
}

/* dfilter[di,dj,c,o] = sum over n and the output pixels (r, q) whose window
 * tap (di, dj) lies inside x of x[n, r sh - pt + di dh, q sw - pl + dj dw, c]
 * dy[n,r,q,o]. */
KERNEL(vdev_ref_conv2d_backprop_filter)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    const float *x = a->in[0], *dy = a->in[2];
    float *df = a->out[0];
    for (int64_t di = 0; di < g.kh; di++)
        for (int64_t dj = 0; dj < g.kw; dj++)
            for (int64_t c = 0; c < g.c; c++)
                for (int64_t o = 0; o < g.o; o++) {
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
                                acc += (double)AT4(x, &g, n, i, j, c, g.c) *
                                       (double)dy[((n * g.oh + r) * g.ow + q) * g.o + o];
                            }
                        }
                    df[((di * g.kw + dj) * g.c + c) * g.o + o] = (float)acc;
                }
}

/* ---- pools ---- */

/* The flat index in x of output (n, r, q, c)'s window maximum: the first of
 * equal maxima in row-major window order; NaN is never above (a NaN first
 * element stays). -1 for a window with no element inside x (never under
 * TensorFlow's rules, which give every window one). */
static int64_t argmax_at(const struct vdev_conv_geom *g, const float *x, int64_t n, int64_t r,
                         int64_t q, int64_t c)
{
    int64_t ilo, ihi, jlo, jhi, best = -1;
    window(r, g->sh, g->pt, g->kh, g->h, &ilo, &ihi);
    window(q, g->sw, g->pl, g->kw, g->w, &jlo, &jhi);
    for (int64_t i = ilo; i < ihi; i++)
        for (int64_t j = jlo; j < jhi; j++) {
            int64_t at = ((n * g->h + i) * g->w + j) * g->c + c;
            if (best < 0 || x[at] > x[best])
                best = at;
        }
    return best;
}

KERNEL(vdev_ref_max_pool)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    const float *x = a->in[0];
    float *y = a->out[0];
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t r = 0; r < g.oh; r++)
            for (int64_t q = 0; q < g.ow; q++)
                for (int64_t c = 0; c < g.c; c++) {
                    int64_t at = argmax_at(&g, x, n, r, q, c);
                    y[((n * g.oh + r) * g.ow + q) * g.c + c] = at < 0 ? -INFINITY : x[at];
                }
}

KERNEL(vdev_ref_avg_pool)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    const float *x = a->in[0];
    float *y = a->out[0];
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t r = 0; r < g.oh; r++)
            for (int64_t q = 0; q < g.ow; q++) {
                int64_t ilo, ihi, jlo, jhi;
                window(r, g.sh, g.pt, g.kh, g.h, &ilo, &ihi);
                window(q, g.sw, g.pl, g.kw, g.w, &jlo, &jhi);
                double cnt = (double)((ihi - ilo) * (jhi - jlo));
                for (int64_t c = 0; c < g.c; c++) {
                    double acc = 0.0;
                    for (int64_t i = ilo; i < ihi; i++)
                        for (int64_t j = jlo; j < jhi; j++)
                            acc += AT4(x, &g, n, i, j, c, g.c);
                    y[((n * g.oh + r) * g.ow + q) * g.c + c] = (float)(acc / cnt);
                }
            }
}

/* dx[n,i,j,c] = the sum of dy over the windows holding (i, j) whose argmax
 * it is. */
KERNEL(vdev_ref_max_pool_grad)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    const float *x = a->in[0], *dy = a->in[2];
    float *dx = a->out[0];
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t i = 0; i < g.h; i++)
            for (int64_t j = 0; j < g.w; j++) {
                int64_t rlo, rhi, qlo, qhi;
                covering(i, g.sh, g.pt, g.kh, g.oh, &rlo, &rhi);
                covering(j, g.sw, g.pl, g.kw, g.ow, &qlo, &qhi);
                for (int64_t c = 0; c < g.c; c++) {
                    int64_t me = ((n * g.h + i) * g.w + j) * g.c + c;
                    double acc = 0.0;
                    for (int64_t r = rlo; r < rhi; r++)
                        for (int64_t q = qlo; q < qhi; q++)
                            if (argmax_at(&g, x, n, r, q, c) == me)
                                acc += dy[((n * g.oh + r) * g.ow + q) * g.c + c];
                    dx[me] = (float)acc;
                }
            }
}

/* dx[n,i,j,c] = the sum over the windows holding (i, j) of dy / the
 * window's count of elements inside x. */
KERNEL(vdev_ref_avg_pool_grad)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    const float *dy = a->in[1];
    float *dx = a->out[0];
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t i = 0; i < g.h; i++)
            for (int64_t j = 0; j < g.w; j++) {
                int64_t rlo, rhi, qlo, qhi;
                covering(i, g.sh, g.pt, g.kh, g.oh, &rlo, &rhi);
                covering(j, g.sw, g.pl, g.kw, g.ow, &qlo, &qhi);
                for (int64_t c = 0; c < g.c; c++) {
                    double acc = 0.0;
                    for (int64_t r = rlo; r < rhi; r++)
                        for (int64_t q = qlo; q < qhi; q++) {
                            int64_t ilo, ihi, jlo, jhi;
                            window(r, g.sh, g.pt, g.kh, g.h, &ilo, &ihi);
                            window(q, g.sw, g.pl, g.kw, g.w, &jlo, &jhi);
                            acc += dy[((n * g.oh + r) * g.ow + q) * g.c + c] /
                                   (double)((ihi - ilo) * (jhi - jlo));
                        }
                    AT4(dx, &g, n, i, j, c, g.c) = (float)acc;
                }
            }
}
