/* ops_expect_shaped.h — the expected results of the cases that
 * ops_cases_shaped.h builds (convolution and pooling, strided slices, joins,
 * permuted transposes, gathers), by direct loops in double precision.
 * Included by ops_expect.h before expect(), which calls them. */
#ifndef VDEV_TESTS_OPS_EXPECT_SHAPED_H
#define VDEV_TESTS_OPS_EXPECT_SHAPED_H

/* 2-D convolution and pooling, from the definitions: each output pixel's
 * window walked from its top-left corner (padding before: half the padding
 * SAME needs, rounded down), the gradients scattered from each output pixel
 * back onto the elements its window read. */
struct cgeom {
    int64_t n, h, w, c, kh, kw, o, s[2], d[2], oh, ow, pt, pl;
};

static void cgeom_of(const struct tcase *c, struct cgeom *g)
{
    const struct hin *x = &c->in[0];
    int conv = c->op == VDEV_OP_CONV2D || c->op == VDEV_OP_CONV2D_BACKPROP_INPUT ||
               c->op == VDEV_OP_CONV2D_BACKPROP_FILTER;
    int same = c->p.f[0] == VDEV_PAD_SAME;
    g->n = x->shape[0], g->h = x->shape[1], g->w = x->shape[2], g->c = x->shape[3];
    g->kh = conv ? c->in[1].shape[0] : c->p.i[0];
    g->kw = conv ? c->in[1].shape[1] : c->p.i[1];
    g->o = conv ? c->in[1].shape[3] : g->c;
    g->s[0] = conv ? c->p.i[0] : c->p.i[2];
    g->s[1] = conv ? c->p.i[1] : c->p.i[3];
    /* a convolution's taps d[] apart: its window spans (k - 1) d + 1 */
    g->d[0] = conv && c->p.j[0] > 1 ? c->p.j[0] : 1;
    g->d[1] = conv && c->p.j[1] > 1 ? c->p.j[1] : 1;
    int64_t in[2] = {g->h, g->w}, out[2], pad[2];
    int64_t k[2] = {(g->kh - 1) * g->d[0] + 1, (g->kw - 1) * g->d[1] + 1};
    for (int d = 0; d < 2; d++) {
        out[d] = same ? (in[d] + g->s[d] - 1) / g->s[d] : (in[d] - k[d] + g->s[d]) / g->s[d];
        int64_t total = (out[d] - 1) * g->s[d] + k[d] - in[d];
        pad[d] = same && total > 0 ? total / 2 : 0;
    }
    g->oh = out[0], g->ow = out[1], g->pt = pad[0], g->pl = pad[1];
}

static void conv_expect(const struct tcase *c, struct texp *e)
{
    struct cgeom g;
    cgeom_of(c, &g);
    const float *x = F(c, 0);
    int64_t ysh[4] = {g.n, g.oh, g.ow, g.o};
    enum vdev_op op = c->op;
    free(e->v[0]);
    if (op == VDEV_OP_CONV2D || op == VDEV_OP_MAX_POOL || op == VDEV_OP_AVG_POOL)
        exp_out(e, 0, ysh, 4, VDEV_F32);
    else if (op == VDEV_OP_CONV2D_BACKPROP_FILTER)
        exp_out(e, 0, c->in[1].shape, 4, VDEV_F32);
    else
        exp_out(e, 0, c->in[0].shape, 4, VDEV_F32);
    double *v = e->v[0];
    const float *dy = op == VDEV_OP_AVG_POOL_GRAD ? F(c, 1) : op == VDEV_OP_CONV2D ? NULL : F(c, 2);
    const float *f = c->n_in > 1 ? F(c, 1) : NULL;
    for (int64_t b = 0; b < g.n; b++)
        for (int64_t r = 0; r < g.oh; r++)
            for (int64_t q = 0; q < g.ow; q++)
                for (int64_t oc = 0; oc < g.o; oc++) {
                    int64_t yi = ((b * g.oh + r) * g.ow + q) * g.o + oc;
                    double best = -INFINITY, sum = 0.0;
                    int64_t arg = -1, cnt = 0;
                    for (int64_t u = 0; u < g.kh; u++)
                        for (int64_t w = 0; w < g.kw; w++) {
                            int64_t i = r * g.s[0] + u * g.d[0] - g.pt;
                            int64_t j = q * g.s[1] + w * g.d[1] - g.pl;
                            if (i < 0 || j < 0 || i >= g.h || j >= g.w)
                                continue;
                            int64_t xrow = ((b * g.h + i) * g.w + j) * g.c;
                            if (op == VDEV_OP_CONV2D) {
                                for (int64_t ci = 0; ci < g.c; ci++)
                                    v[yi] += (double)x[xrow + ci] *
                                             f[((u * g.kw + w) * g.c + ci) * g.o + oc];
                            } else if (op == VDEV_OP_CONV2D_BACKPROP_INPUT) {
                                for (int64_t ci = 0; ci < g.c; ci++)
                                    v[xrow + ci] += (double)dy[yi] *
                                                    f[((u * g.kw + w) * g.c + ci) * g.o + oc];
                            } else if (op == VDEV_OP_CONV2D_BACKPROP_FILTER) {
                                for (int64_t ci = 0; ci < g.c; ci++)
                                    v[((u * g.kw + w) * g.c + ci) * g.o + oc] +=
                                        (double)dy[yi] * x[xrow + ci];
                            } else {
                                double xv = x[xrow + oc];
                                if (arg < 0 || xv > best)
                                    best = xv, arg = xrow + oc;
                                sum += xv;
                                cnt++;
                            }
                        }
                    if (op == VDEV_OP_MAX_POOL)
                        v[yi] = best;
                    else if (op == VDEV_OP_AVG_POOL)
                        v[yi] = sum / (double)cnt;
                    else if (op == VDEV_OP_MAX_POOL_GRAD)
                        v[arg] += dy[yi];
                    else if (op == VDEV_OP_AVG_POOL_GRAD)
                        for (int64_t u = 0; u < g.kh; u++)
                            for (int64_t w = 0; w < g.kw; w++) {
                                int64_t i = r * g.s[0] + u - g.pt, j = q * g.s[1] + w - g.pl;
                                if (i >= 0 && j >= 0 && i < g.h && j < g.w)
                                    v[((b * g.h + i) * g.w + j) * g.c + oc] +=
                                        dy[yi] / (double)cnt;
                            }
                }
    /* sums of up to 24 products of |.| <= 1: float accumulation (sgemm, the
     * CUDA kernels) stays far inside 1e-5 */
    e->atol = 1e-5;
    e->rtol = 1e-5;
}

/* STRIDED_SLICE: each element of x is taken or not, axis by axis (a
 * multiple of the stride away from the first index, fewer than count steps);
 * a taken one goes to the slice's element of those steps, row-major. The
 * gradient puts dy's elements back there, zeros elsewhere. Exact. */
static void strided_expect(const struct tcase *c, struct texp *e)
{
    int grad = c->op == VDEV_OP_STRIDED_SLICE_GRAD, add = c->op == VDEV_OP_STRIDED_SLICE_GRAD_ADD;
    const struct hin *x = &c->in[grad ? 1 : 0], *dy = &c->in[add ? 1 : 0];
    int64_t cnt[VDEV_MAX_DIMS];
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        cnt[d] = d < x->ndim ? (int64_t)c->p.f[d] : 1;
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        free(e->v[k]);
    memset(e->v, 0, sizeof e->v);
    exp_out(e, 0, grad || add ? x->shape : cnt, x->ndim, grad || add ? VDEV_F32 : x->dtype);
    if (add) { /* in place: acc's new values, dy as it was */
        exp_out(e, 1, dy->shape, dy->ndim, VDEV_F32);
        for (int64_t i = 0; i < dy->n; i++)
            e->v[1][i] = ((const float *)dy->data)[i];
    }
    for (int64_t i = 0; i < x->n; i++) {
        int64_t rest = i, at = 0, scale = 1;
        int taken = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int64_t idx = rest % x->shape[d], off = idx - c->p.i[d], st = c->p.j[d];
            rest /= x->shape[d];
            int64_t q = off / st;
            taken &= off % st == 0 && q >= 0 && q < cnt[d];
            at += q * scale;
            scale *= cnt[d];
        }
        if (add)
            e->v[0][i] = (double)((const float *)x->data)[i] +
                         (taken ? ((const float *)dy->data)[at] : 0.0);
        else if (grad)
            e->v[0][i] = taken ? ((const float *)dy->data)[at] : 0.0;
        else if (taken)
            e->v[0][at] = x->dtype == VDEV_I32 ? (double)((const int32_t *)x->data)[i]
                                               : (double)((const float *)x->data)[i];
    }
    e->atol = 0.0;
    e->rtol = add ? 6e-8 : 0.0; /* a float sum: half an ulp */
}

/* Input k's element i as a double (an int32 word exactly). */
static double word_at(const struct tcase *c, int k, int64_t i)
{
    return c->in[k].dtype == VDEV_I32 ? (double)I(c, k)[i] : (double)F(c, k)[i];
}

/* Flat index of multi-index idx in a row-major shape of nd dimensions. */
static int64_t flat_of(const int64_t *idx, const int64_t *shape, int nd)
{
    int64_t at = 0;
    for (int d = 0; d < nd; d++)
        at = at * shape[d] + idx[d];
    return at;
}

/* CONCAT, PACK: each output element's multi-index says where it comes
 * from: along the axis, the input whose range of it holds the index (its
 * own index the rest; PACK: the input is the index, which the input's
 * multi-index drops). Exact. */
static void join_expect(const struct tcase *c, struct texp *e)
{
    int pack = c->op == VDEV_OP_PACK, axis = (int)c->p.i[0], n = (int)c->p.i[1];
    int nd = c->in[0].ndim + pack;
    int64_t osh[VDEV_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0, s = 0; d < nd; d++)
        osh[d] = pack && d == axis ? n : c->in[0].shape[s++];
    if (!pack) {
        osh[axis] = 0;
        for (int k = 0; k < n; k++)
            osh[axis] += c->in[k].shape[axis];
    }
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        free(e->v[k]);
    memset(e->v, 0, sizeof e->v);
    exp_out(e, 0, osh, nd, c->in[0].dtype);
    for (int64_t i = 0; i < e->numel[0]; i++) {
        int64_t idx[VDEV_MAX_DIMS] = {0}, rest = i, in_idx[VDEV_MAX_DIMS] = {0};
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = rest % osh[d];
            rest /= osh[d];
        }
        int k = 0, m = 0;
        if (pack) {
            k = (int)idx[axis];
            for (int d = 0; d < nd; d++)
                if (d != axis)
                    in_idx[m++] = idx[d];
        } else {
            int64_t at = idx[axis];
            while (at >= c->in[k].shape[axis])
                at -= c->in[k++].shape[axis];
            memcpy(in_idx, idx, sizeof in_idx);
            in_idx[axis] = at;
        }
        e->v[0][i] = word_at(c, k, flat_of(in_idx, c->in[k].shape, c->in[k].ndim));
    }
    e->atol = 0.0;
    e->rtol = 0.0;
}

/* TRANSPOSE: input element idx goes to the output element whose index d
 * is idx[perm[d]] (the 2-D form: perm {1, 0}). Exact. */
static void transpose_expect(const struct tcase *c, struct texp *e)
{
    const struct hin *x = &c->in[0];
    int nd = x->ndim;
    int64_t perm[VDEV_MAX_DIMS] = {1, 0, 0, 0}, osh[VDEV_MAX_DIMS] = {1, 1, 1, 1};
    if (c->p.j[0])
        memcpy(perm, c->p.i, sizeof perm);
    for (int d = 0; d < nd; d++)
        osh[d] = x->shape[perm[d]];
    free(e->v[0]);
    exp_out(e, 0, osh, nd, x->dtype);
    for (int64_t i = 0; i < x->n; i++) {
        int64_t idx[VDEV_MAX_DIMS] = {0}, rest = i, o[VDEV_MAX_DIMS] = {0};
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = rest % x->shape[d];
            rest /= x->shape[d];
        }
        for (int d = 0; d < nd; d++)
            o[d] = idx[perm[d]];
        e->v[0][flat_of(o, osh, nd)] = word_at(c, 0, i);
    }
    e->atol = 0.0;
    e->rtol = 0.0;
}

/* Fills e with what c's op must produce, and its tolerance. */
/* GATHER: output row k (the words of params' other dimensions) is
 * params' row indices[k]. GATHER_GRAD: like's shape, zeros, then for each
 * index in order with a row of like, dy's row k added to it in float
 * (TensorFlow's CPU order and rounding); others dropped. Exact. */
static void gather_expect(const struct tcase *c, struct texp *e)
{
    int grad = c->op == VDEV_OP_GATHER_GRAD;
    const struct hin *ix = &c->in[1], *pm = &c->in[grad ? 2 : 0];
    int64_t rows = pm->shape[0], row = rows ? pm->n / rows : 0, osh[VDEV_MAX_DIMS];
    int nd = ix->ndim + pm->ndim - 1;
    for (int d = 0; d < nd; d++)
        osh[d] = d < ix->ndim ? ix->shape[d] : pm->shape[d - ix->ndim + 1];
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        free(e->v[k]);
    memset(e->v, 0, sizeof e->v);
    if (grad)
        exp_out(e, 0, pm->shape, pm->ndim, VDEV_F32);
    else
        exp_out(e, 0, osh, nd, pm->dtype);
    if (!rows) /* a row of 0 words, or no row and no index */
        row = 0;
    if (!row && !grad) { /* params [r, 0...]: nothing to take */
        e->atol = e->rtol = 0.0;
        return;
    }
    float *sum = grad ? calloc((size_t)(pm->n ? pm->n : 1), sizeof *sum) : NULL;
    for (int64_t k = 0; k < ix->n; k++) {
        int32_t at = I(c, 1)[k];
        for (int64_t j = 0; j < row; j++) {
            if (grad && at >= 0 && at < rows)
                sum[at * row + j] += F(c, 0)[k * row + j];
            else if (!grad)
                e->v[0][k * row + j] = word_at(c, 0, at * row + j);
        }
    }
    for (int64_t i = 0; grad && i < pm->n; i++)
        e->v[0][i] = sum[i];
    free(sum);
    e->atol = 0.0;
    e->rtol = 0.0;
}

#endif /* VDEV_TESTS_OPS_EXPECT_SHAPED_H */
