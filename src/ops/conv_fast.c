/* conv_fast.c — the fast host kernels of Conv2D and of its two gradient ops
 * (conv.c has their shapes and parameters, conv_kernels.c the reference
 * kernels they are tested against), all three matrix products through the
 * matmul's own host kernel (OpenBLAS sgemm, its thread gate and its
 * determinism switch, kernels_host.c). The input's windows are the rows of
 * an im2col matrix, one row of KH*KW*C per output pixel (zeros where the
 * window lies in the padding; a dilated window's taps d apart), numbered over the whole batch (row n OH OW +
 * r OW + q), so the output [N,OH,OW,O] and dy are [N*OH*OW, O] matrices. A
 * block of at most COL_BYTES (4 MiB) of those rows, inside one image, is
 * made at a time:
 *   Conv2D                y[rows]  = col[rows] . F, F the filter as [KH*KW*C, O];
 *   Conv2DBackpropInput   dcol     = dy[rows] . F^T, then col2im adds each
 *                         row's taps onto dx's pixels (the padding's taps
 *                         are dropped), dx zeroed first;
 *   Conv2DBackpropFilter  dF      += col[rows]^T . dy[rows], the first block
 *                         written into dF, each later one into a buffer of
 *                         dF's size and added, in block order.
 * A 1x1 window with stride 1 and no padding needs no im2col: x's rows are
 * its rows (dx's, for the input's gradient), one product over the batch.
 * The blocks depend on the shapes alone and everything outside the
 * products runs in a fixed order on the calling thread, so under the
 * determinism switch (i[3], set by the shape rules) the results are the
 * same bits run to run, as the forward's are. sgemm sums in float: against
 * the double-summing reference a result is off by a few ulps of the sum of
 * the magnitudes of its terms (test_conv_fast.c gives the bounds). Where a
 * buffer cannot be had, the kernel runs the reference kernel instead. */
#include "ops/impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* x[n, i, j, c] of an [N,H,W,C] tensor as g describes it. */
#define AT4(p, g, n_, i_, j_, c_) ((p)[(((n_) * (g)->h + (i_)) * (g)->w + (j_)) * (g)->c + (c_)])

/* The im2col rows one product takes at most: a buffer of at most 4 MiB, or
 * one row where a row is larger. (Measured on the 2-CPU development
 * machine, a 3x3x64x64 layer on [8,56,56,64]: blocks of 1 to 16 MiB ran
 * within the machine's noise of each other, forward and gradients; 4 MiB
 * keeps the scratch small. Blocks that span images, one product for
 * several small images, were no faster on the layers of
 * bench/conv_vs_torch.py, so a block stays inside one image.) */
#define COL_BYTES (4ll << 20)

/* ---- fault injection (tests) ---- */

static _Atomic int fail_countdown;

void vdev_conv_fast_fail_alloc(int n) { atomic_store(&fail_countdown, n); }

/* malloc, or NULL when the armed countdown reaches this call. */
static void *scratch(size_t bytes)
{
    int n = atomic_load(&fail_countdown);
    while (n > 0)
        if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1)) {
            if (n == 1)
                return NULL;
            break;
        }
    return vdev_malloc(bytes ? bytes : 1);
}

/* ---- pieces ---- */

/* out[m, n] = op(a) op(b) through the matmul's host kernel: a stored [m, k]
 * ([k, m] with ta), b stored [k, n] ([n, k] with tb); det is the
 * determinism switch the op was submitted under. */
static void product(int det, int ta, int tb, const float *a, const float *b, float *out,
                    int64_t m, int64_t n, int64_t k)
{
    struct vdev_kernel_args mm;
    memset(&mm, 0, sizeof mm);
    mm.op = VDEV_OP_MATMUL;
    mm.n_in = 2;
    mm.n_out = 1;
    mm.in_ndim[0] = mm.in_ndim[1] = mm.out_ndim[0] = 2;
    mm.in_dtype[0] = mm.in_dtype[1] = mm.out_dtype[0] = VDEV_F32;
    mm.in_shape[0][0] = ta ? k : m;
    mm.in_shape[0][1] = ta ? m : k;
    mm.in_shape[1][0] = tb ? n : k;
    mm.in_shape[1][1] = tb ? k : n;
    mm.out_shape[0][0] = m;
    mm.out_shape[0][1] = n;
    mm.i[0] = ta;
    mm.i[1] = tb;
    mm.i[2] = det;
    mm.in[0] = a;
    mm.in[1] = b;
    mm.out[0] = out;
    vdev_host_matmul(&mm);
}

/* A 1x1 window read at every pixel: x is its own im2col matrix (a 1x1
 * window has one tap: its dilation changes nothing). */
static int is_pointwise(const struct vdev_conv_geom *g)
{
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0;
}

/* The im2col rows of a block: as many as COL_BYTES holds, at least 1, at
 * most an image's. */
static int64_t block_rows(const struct vdev_conv_geom *g)
{
    int64_t k = g->kh * g->kw * g->c, pix = g->oh * g->ow;
    int64_t rows = COL_BYTES / (int64_t)sizeof(float) / k;
    if (rows < 1)
        rows = 1;
    return rows < pix ? rows : pix;
}

/* The rows of the block that starts at row0: rows, or fewer at the end of
 * an image (a block never spans two). */
static int64_t block_at(const struct vdev_conv_geom *g, int64_t row0, int64_t rows)
{
    int64_t pix = g->oh * g->ow, left = pix - row0 % pix;
    return left < rows ? left : rows;
}

/* Rows [row0, row0 + rows) of the batch's im2col matrix ([N*OH*OW, KH*KW*C]). */
static void im2col(const struct vdev_conv_geom *g, const float *x, int64_t row0, int64_t rows,
                   float *col)
{
    int64_t kc = g->kw * g->c, pix = g->oh * g->ow;
    for (int64_t t = 0; t < rows; t++) {
        int64_t n = (row0 + t) / pix, p = (row0 + t) % pix;
        int64_t r = p / g->ow, q = p % g->ow;
        float *dst = col + t * g->kh * kc;
        for (int64_t di = 0; di < g->kh; di++, dst += kc) {
            int64_t i = r * g->sh - g->pt + di * g->dh;
            if (i < 0 || i >= g->h) {
                memset(dst, 0, (size_t)kc * sizeof(float));
                continue;
            }
            int64_t j0 = q * g->sw - g->pl;
            if (g->dw == 1 && j0 >= 0 && j0 + g->kw <= g->w) {
                /* the window's row inside x: kw pixels in a row, one copy */
                memcpy(dst, &AT4(x, g, n, i, j0, 0), (size_t)kc * sizeof(float));
                continue;
            }
            for (int64_t dj = 0; dj < g->kw; dj++) {
                int64_t j = j0 + dj * g->dw;
                float *d = dst + dj * g->c;
                if (j < 0 || j >= g->w)
                    memset(d, 0, (size_t)g->c * sizeof(float));
                else
                    memcpy(d, &AT4(x, g, n, i, j, 0), (size_t)g->c * sizeof(float));
            }
        }
    }
}

/* The reverse of im2col, adding: each of rows [row0, row0 + rows)'s taps
 * inside the input is added onto dx's pixel under it; the padding's are
 * dropped. Rows and taps in order, so the sums' order is fixed. */
static void col2im_add(const struct vdev_conv_geom *g, const float *col, int64_t row0,
                       int64_t rows, float *dx)
{
    int64_t kc = g->kw * g->c, pix = g->oh * g->ow;
    for (int64_t t = 0; t < rows; t++) {
        int64_t n = (row0 + t) / pix, p = (row0 + t) % pix;
        int64_t r = p / g->ow, q = p % g->ow;
        const float *src = col + t * g->kh * kc;
        for (int64_t di = 0; di < g->kh; di++, src += kc) {
            int64_t i = r * g->sh - g->pt + di * g->dh;
            if (i < 0 || i >= g->h)
                continue;
            int64_t j0 = q * g->sw - g->pl;
            if (g->dw > 1) {
                /* dilated: each tap inside x onto its own pixel */
                for (int64_t dj = 0; dj < g->kw; dj++) {
                    int64_t j = j0 + dj * g->dw;
                    if (j < 0 || j >= g->w)
                        continue;
                    const float *s = src + dj * g->c;
                    float *d = &AT4(dx, g, n, i, j, 0);
                    for (int64_t e = 0; e < g->c; e++)
                        d[e] += s[e];
                }
                continue;
            }
            /* the taps of a window row inside x: kw*C floats in a row of dx */
            int64_t jlo = j0 < 0 ? 0 : j0, jhi = j0 + g->kw > g->w ? g->w : j0 + g->kw;
            if (jlo >= jhi)
                continue;
            const float *s = src + (jlo - j0) * g->c;
            float *d = &AT4(dx, g, n, i, jlo, 0);
            for (int64_t e = 0; e < (jhi - jlo) * g->c; e++)
                d[e] += s[e];
        }
    }
}

/* ---- the kernels ---- */

/* y = im2col(x) . F, a block of rows at a time. */
KERNEL(vdev_fast_conv2d)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    int det = a->i[3] != 0;
    int64_t k = g.kh * g.kw * g.c, all = g.n * g.oh * g.ow;
    const float *x = a->in[0], *f = a->in[1];
    float *y = a->out[0];
    if (all * g.o == 0)
        return;
    if (is_pointwise(&g)) {
        product(det, 0, 0, x, f, y, all, g.o, k);
        return;
    }
    int64_t rows = block_rows(&g);
    float *col = scratch((size_t)(rows * k) * sizeof(float));
    if (!col) {
        vdev_ref_conv2d(a);
        return;
    }
    for (int64_t row0 = 0, nr; row0 < all; row0 += nr) {
        nr = block_at(&g, row0, rows);
        im2col(&g, x, row0, nr, col);
        product(det, 0, 0, col, f, y + row0 * g.o, nr, g.o, k);
    }
    free(col);
}

/* dx = col2im(dy . F^T), a block of rows at a time, onto a zeroed dx. */
KERNEL(vdev_fast_conv2d_backprop_input)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    int det = a->i[3] != 0;
    int64_t k = g.kh * g.kw * g.c, all = g.n * g.oh * g.ow;
    const float *f = a->in[1], *dy = a->in[2];
    float *dx = a->out[0];
    if (is_pointwise(&g)) {
        product(det, 0, 1, dy, f, dx, all, g.c, g.o);
        return;
    }
    size_t dx_bytes = (size_t)(g.n * g.h * g.w * g.c) * sizeof(float);
    if (all * g.o == 0) {
        /* no output pixel, or no channel to bring back: no gradient */
        memset(dx, 0, dx_bytes);
        return;
    }
    int64_t rows = block_rows(&g);
    float *dcol = scratch((size_t)(rows * k) * sizeof(float));
    if (!dcol) {
        vdev_ref_conv2d_backprop_input(a);
        return;
    }
    memset(dx, 0, dx_bytes);
    for (int64_t row0 = 0, nr; row0 < all; row0 += nr) {
        nr = block_at(&g, row0, rows);
        product(det, 0, 1, dy + row0 * g.o, f, dcol, nr, k, g.o);
        col2im_add(&g, dcol, row0, nr, dx);
    }
    free(dcol);
}

/* dF = sum over the blocks of rows of im2col(x)[rows]^T . dy[rows]. */
KERNEL(vdev_fast_conv2d_backprop_filter)
{
    struct vdev_conv_geom g;
    vdev_conv_geom_of(a, &g);
    int det = a->i[3] != 0;
    int64_t k = g.kh * g.kw * g.c, all = g.n * g.oh * g.ow;
    const float *x = a->in[0], *dy = a->in[2];
    float *df = a->out[0];
    if (k * g.o == 0)
        return;
    if (all == 0) {
        /* a sum of no products */
        memset(df, 0, (size_t)(k * g.o) * sizeof(float));
        return;
    }
    if (is_pointwise(&g)) {
        product(det, 1, 0, x, dy, df, k, g.o, all);
        return;
    }
    int64_t rows = block_rows(&g);
    float *col = scratch((size_t)(rows * k) * sizeof(float));
    float *part = rows < all ? scratch((size_t)(k * g.o) * sizeof(float)) : NULL;
    if (!col || (rows < all && !part)) {
        free(col);
        free(part);
        vdev_ref_conv2d_backprop_filter(a);
        return;
    }
    for (int64_t row0 = 0, nr; row0 < all; row0 += nr) {
        nr = block_at(&g, row0, rows);
        im2col(&g, x, row0, nr, col);
        if (row0 == 0) {
            product(det, 1, 0, col, dy, df, k, g.o, nr);
            continue;
        }
        product(det, 1, 0, col, dy + row0 * g.o, part, k, g.o, nr);
        for (int64_t e = 0; e < k * g.o; e++)
            df[e] += part[e];
    }
    free(col);
    free(part);
}
