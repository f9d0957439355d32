/* conv_depthwise_fast.c — the fast host kernels of DepthwiseConv2dNative
 * and of its two gradient ops (conv_depthwise.c has their shapes,
 * parameters and reference kernels, which these are tested against). A
 * depthwise convolution has no sum over channels, so it is no matrix
 * product: these are the reference's loops turned inside out so that the
 * innermost one runs along the channels, contiguous in NHWC (the input's C,
 * the filter's and the output's C*M), where the compiler vectorizes it,
 * and spread over the host's threads (parallel.h):
 *   forward          one output row (n, r) per work item: each pixel's C*M
 *                    sums start at 0 and take the window's taps in
 *                    row-major order, in float;
 *   backprop input   one input row (n, i) per item: each pixel's C sums
 *                    take the taps whose window holds it, in the
 *                    reference's order, each tap's M products one by one,
 *                    in float;
 *   backprop filter  one block of at most 256 of the filter's C*M values
 *                    of one tap per item, summed over the batch and the
 *                    output pixels in double, rounded once.
 * With a multiplier M above 1 the loops run along the channels for each m
 * (a stride of M through the filter and the output, contiguous in x): the
 * forward's and the filter gradient's sums of a block of channels sit in a
 * buffer on the stack laid out [m][c], written out as [c][m] once done; a
 * multiplier too large for that buffer (above 256) takes the plain loops.
 * Every value is computed whole by one thread in an order fixed by the
 * shapes, so the results are the same bits whatever the thread count (and
 * on a simulated GPU, whose stream runs these same kernels). The float sums
 * of the first two are within a few ulps of the sum of their terms'
 * magnitudes of the double-summing reference (test_depthwise.c checks the
 * bound); the filter's gradient, whose sums run over the whole batch, sums
 * in double as the reference does. */
#include "ops/impl.h"
#include "ops/parallel.h"

#include <string.h>

/* Work items worth a thread: about this many multiply-adds per part. */
#define MIN_WORK (1 << 16)

/* The filter gradient's values per work item (a double accumulator each,
 * on the stack). */
#define DF_BLOCK 256

/* The forward's sums of one pixel's block of channels, for M > 1 (floats
 * on the stack). */
#define FWD_BLOCK 1024

struct dw_ctx {
    const struct vdev_conv_geom *g;
    const float *x, *f, *dy;
    float *out;
};

/* Parts of at least enough items to make MIN_WORK multiply-adds. */
static int64_t min_items(int64_t work_per_item)
{
    int64_t k = work_per_item > 0 ? MIN_WORK / work_per_item : MIN_WORK;
    return k > 0 ? k : 1;
}

/* ---- forward ---- */

static void fwd_rows(void *p, int64_t lo, int64_t hi)
{
    const struct dw_ctx *c = p;
    const struct vdev_conv_geom *g = c->g;
    int64_t cm = g->c * g->o, m_n = g->o;
    for (int64_t row = lo; row < hi; row++) {
        int64_t n = row / g->oh, r = row % g->oh;
        for (int64_t q = 0; q < g->ow; q++) {
            float *y = c->out + (row * g->ow + q) * cm;
            memset(y, 0, (size_t)cm * sizeof(float));
            for (int64_t di = 0; di < g->kh; di++) {
                int64_t i = r * g->sh - g->pt + di * g->dh;
                if (i < 0 || i >= g->h)
                    continue;
                for (int64_t dj = 0; dj < g->kw; dj++) {
                    int64_t j = q * g->sw - g->pl + dj * g->dw;
                    if (j < 0 || j >= g->w)
                        continue;
                    const float *xp = c->x + ((n * g->h + i) * g->w + j) * g->c;
                    const float *fp = c->f + (di * g->kw + dj) * cm;
                    if (m_n == 1) {
                        for (int64_t k = 0; k < cm; k++)
                            y[k] += xp[k] * fp[k];
                    } else {
                        for (int64_t ch = 0; ch < g->c; ch++)
                            for (int64_t m = 0; m < m_n; m++)
                                y[ch * m_n + m] += xp[ch] * fp[ch * m_n + m];
                    }
                }
            }
        }
    }
}

/* The forward for 1 < M <= 256: the same sums, in the same order, each
 * pixel's in blocks of FWD_BLOCK / M channels laid out [m][c] on the stack
 * so that the innermost loop runs along the channels. */
static void fwd_rows_multi(void *p, int64_t lo, int64_t hi)
{
    const struct dw_ctx *c = p;
    const struct vdev_conv_geom *g = c->g;
    int64_t cm = g->c * g->o, m_n = g->o, cb = FWD_BLOCK / m_n;
    float t[FWD_BLOCK];
    for (int64_t row = lo; row < hi; row++) {
        int64_t n = row / g->oh, r = row % g->oh;
        for (int64_t q = 0; q < g->ow; q++) {
            float *y = c->out + (row * g->ow + q) * cm;
            for (int64_t c0 = 0; c0 < g->c; c0 += cb) {
                int64_t nc = g->c - c0 < cb ? g->c - c0 : cb;
                memset(t, 0, (size_t)(nc * m_n) * sizeof(float));
                for (int64_t di = 0; di < g->kh; di++) {
                    int64_t i = r * g->sh - g->pt + di * g->dh;
                    if (i < 0 || i >= g->h)
                        continue;
                    for (int64_t dj = 0; dj < g->kw; dj++) {
                        int64_t j = q * g->sw - g->pl + dj * g->dw;
                        if (j < 0 || j >= g->w)
                            continue;
                        const float *xp = c->x + ((n * g->h + i) * g->w + j) * g->c + c0;
                        const float *fp = c->f + (di * g->kw + dj) * cm + c0 * m_n;
                        for (int64_t m = 0; m < m_n; m++) {
                            float *tm = t + m * nc;
                            const float *fm = fp + m;
                            for (int64_t ch = 0; ch < nc; ch++)
                                tm[ch] += xp[ch] * fm[ch * m_n];
                        }
                    }
                }
                for (int64_t ch = 0; ch < nc; ch++)
                    for (int64_t m = 0; m < m_n; m++)
                        y[(c0 + ch) * m_n + m] = t[m * nc + ch];
            }
        }
    }
}

KERNEL(vdev_fast_depthwise_conv2d)
{
    struct vdev_conv_geom g;
    vdev_depthwise_geom_of(a, &g);
    struct dw_ctx c = {&g, a->in[0], a->in[1], NULL, a->out[0]};
    int64_t rows = g.n * g.oh;
    if (rows == 0 || g.ow == 0 || g.c * g.o == 0)
        return;
    vdev_parallel_for_min(rows, min_items(g.ow * g.kh * g.kw * g.c * g.o),
                          g.o > 1 && g.o <= DF_BLOCK ? fwd_rows_multi : fwd_rows, &c);
}

/* ---- the input's gradient ---- */

static void input_rows(void *p, int64_t lo, int64_t hi)
{
    const struct dw_ctx *c = p;
    const struct vdev_conv_geom *g = c->g;
    int64_t cm = g->c * g->o, m_n = g->o;
    for (int64_t row = lo; row < hi; row++) {
        int64_t n = row / g->h, i = row % g->h;
        for (int64_t j = 0; j < g->w; j++) {
            float *dx = c->out + (row * g->w + j) * g->c;
            memset(dx, 0, (size_t)g->c * sizeof(float));
            for (int64_t di = 0; di < g->kh; di++) {
                int64_t t = i + g->pt - di * g->dh;
                if (t < 0 || t % g->sh || t / g->sh >= g->oh)
                    continue;
                int64_t r = t / g->sh;
                for (int64_t dj = 0; dj < g->kw; dj++) {
                    int64_t u = j + g->pl - dj * g->dw;
                    if (u < 0 || u % g->sw || u / g->sw >= g->ow)
                        continue;
                    int64_t q = u / g->sw;
                    const float *dp = c->dy + ((n * g->oh + r) * g->ow + q) * cm;
                    const float *fp = c->f + (di * g->kw + dj) * cm;
                    if (m_n == 1) {
                        for (int64_t ch = 0; ch < g->c; ch++)
                            dx[ch] += dp[ch] * fp[ch];
                    } else {
                        for (int64_t m = 0; m < m_n; m++)
                            for (int64_t ch = 0; ch < g->c; ch++)
                                dx[ch] += dp[ch * m_n + m] * fp[ch * m_n + m];
                    }
                }
            }
        }
    }
}

KERNEL(vdev_fast_depthwise_conv2d_backprop_input)
{
    struct vdev_conv_geom g;
    vdev_depthwise_geom_of(a, &g);
    struct dw_ctx c = {&g, NULL, a->in[1], a->in[2], a->out[0]};
    int64_t rows = g.n * g.h;
    if (rows == 0 || g.w == 0 || g.c == 0)
        return;
    vdev_parallel_for_min(rows, min_items(g.w * g.kh * g.kw * g.c * g.o), input_rows, &c);
}

/* ---- the filter's gradient ---- */

/* For 1 < M <= DF_BLOCK: items of DF_BLOCK / M whole channels of one tap,
 * the sums laid out [m][c] so that the innermost loop runs along the
 * channels; the same sums in the same order as filter_blocks'. */
static void filter_blocks_multi(void *p, int64_t lo, int64_t hi)
{
    const struct dw_ctx *c = p;
    const struct vdev_conv_geom *g = c->g;
    int64_t cm = g->c * g->o, m_n = g->o, cb = DF_BLOCK / m_n;
    int64_t per_tap = (g->c + cb - 1) / cb;
    double acc[DF_BLOCK];
    for (int64_t item = lo; item < hi; item++) {
        int64_t tap = item / per_tap, c0 = item % per_tap * cb;
        int64_t nc = g->c - c0 < cb ? g->c - c0 : cb;
        int64_t di = tap / g->kw, dj = tap % g->kw;
        memset(acc, 0, sizeof acc);
        for (int64_t n = 0; n < g->n; n++)
            for (int64_t r = 0; r < g->oh; r++) {
                int64_t i = r * g->sh - g->pt + di * g->dh;
                if (i < 0 || i >= g->h)
                    continue;
                for (int64_t q = 0; q < g->ow; q++) {
                    int64_t j = q * g->sw - g->pl + dj * g->dw;
                    if (j < 0 || j >= g->w)
                        continue;
                    const float *xp = c->x + ((n * g->h + i) * g->w + j) * g->c + c0;
                    const float *dp = c->dy + ((n * g->oh + r) * g->ow + q) * cm + c0 * m_n;
                    for (int64_t m = 0; m < m_n; m++) {
                        double *am = acc + m * nc;
                        for (int64_t ch = 0; ch < nc; ch++)
                            am[ch] += (double)xp[ch] * (double)dp[ch * m_n + m];
                    }
                }
            }
        float *df = c->out + tap * cm + c0 * m_n;
        for (int64_t ch = 0; ch < nc; ch++)
            for (int64_t m = 0; m < m_n; m++)
                df[ch * m_n + m] = (float)acc[m * nc + ch];
    }
}

static void filter_blocks(void *p, int64_t lo, int64_t hi)
{
    const struct dw_ctx *c = p;
    const struct vdev_conv_geom *g = c->g;
    int64_t cm = g->c * g->o, m_n = g->o;
    int64_t per_tap = (cm + DF_BLOCK - 1) / DF_BLOCK;
    double acc[DF_BLOCK];
    for (int64_t item = lo; item < hi; item++) {
        int64_t tap = item / per_tap, k0 = item % per_tap * DF_BLOCK;
        int64_t k1 = k0 + DF_BLOCK < cm ? k0 + DF_BLOCK : cm, nk = k1 - k0;
        int64_t di = tap / g->kw, dj = tap % g->kw;
        memset(acc, 0, sizeof acc);
        for (int64_t n = 0; n < g->n; n++)
            for (int64_t r = 0; r < g->oh; r++) {
                int64_t i = r * g->sh - g->pt + di * g->dh;
                if (i < 0 || i >= g->h)
                    continue;
                for (int64_t q = 0; q < g->ow; q++) {
                    int64_t j = q * g->sw - g->pl + dj * g->dw;
                    if (j < 0 || j >= g->w)
                        continue;
                    const float *xp = c->x + ((n * g->h + i) * g->w + j) * g->c;
                    const float *dp = c->dy + ((n * g->oh + r) * g->ow + q) * cm + k0;
                    if (m_n == 1) {
                        xp += k0;
                        for (int64_t k = 0; k < nk; k++)
                            acc[k] += (double)xp[k] * (double)dp[k];
                    } else {
                        for (int64_t k = 0; k < nk; k++)
                            acc[k] += (double)xp[(k0 + k) / m_n] * (double)dp[k];
                    }
                }
            }
        float *df = c->out + tap * cm + k0;
        for (int64_t k = 0; k < nk; k++)
            df[k] = (float)acc[k];
    }
}

KERNEL(vdev_fast_depthwise_conv2d_backprop_filter)
{
    struct vdev_conv_geom g;
    vdev_depthwise_geom_of(a, &g);
    struct dw_ctx c = {&g, a->in[0], NULL, a->in[2], a->out[0]};
    int64_t cm = g.c * g.o;
    int multi = g.o > 1 && g.o <= DF_BLOCK;
    int64_t per_tap = multi ? (g.c + DF_BLOCK / g.o - 1) / (DF_BLOCK / g.o)
                            : (cm + DF_BLOCK - 1) / DF_BLOCK;
    int64_t items = g.kh * g.kw * per_tap;
    if (items == 0 || cm == 0)
        return;
    int64_t per_item = g.n * g.oh * g.ow * (cm < DF_BLOCK ? cm : DF_BLOCK);
    vdev_parallel_for_min(items, min_items(per_item), multi ? filter_blocks_multi : filter_blocks,
                          &c);
}
