/* ops_cases_shaped.h — the case builders of test_ops.c for the ops whose
 * inputs have shapes of their own rather than a size's rows and columns:
 * 2-D convolution and pooling, strided slices, joins (concat, stack),
 * permuted transposes and gathers. Included by ops_cases.h before build(),
 * which calls them; it uses that file's struct tcase and input helpers. */
#ifndef VDEV_TESTS_OPS_CASES_SHAPED_H
#define VDEV_TESTS_OPS_CASES_SHAPED_H

/* 2-D convolution and pooling: x [N,H,W,C] per size (size 0 an empty
 * batch; size 4 none, the reference loops being slow); var bit 0 stride 2,
 * bit 1 SAME, var 4 and 5 a 1x1 window (5: stride 2, SAME); otherwise a 3x2
 * window where the input has room for it. The convolutions also run
 * dilated (j[0], j[1]): var 6 dilations 2x1 VALID, var 7 2x3 SAME, var 8
 * 2x2 SAME at stride 2 (a window that no longer fits a VALID input is
 * taken 1 tap high or wide). The filter has 4 output channels
 * (1 at size 1). The gradient ops get dy of the forward output's shape, and
 * MaxPoolGrad a y of that shape too (its values are not read: the maxima
 * come from x). */
static const int64_t CONV_X[N_SIZES][4] = {{0, 5, 5, 2}, {1, 1, 1, 1}, {2, 5, 7, 3},
                                           {3, 9, 8, 4}, {0, 0, 0, 0}};

static int64_t conv_out_dim(int64_t in, int64_t k, int64_t s, int same)
{
    return same ? (in + s - 1) / s : (in - k + s) / s;
}

static int conv_case(struct tcase *c, enum vdev_op op, int size, int var)
{
    int conv = op == VDEV_OP_CONV2D || op == VDEV_OP_CONV2D_BACKPROP_INPUT ||
               op == VDEV_OP_CONV2D_BACKPROP_FILTER;
    if (size == 4 || var > (conv ? 8 : 5))
        return 0;
    const int64_t *xs = CONV_X[size];
    static const int64_t DIL[3][2] = {{2, 1}, {2, 3}, {2, 2}};
    int64_t dh = var >= 6 ? DIL[var - 6][0] : 1, dw = var >= 6 ? DIL[var - 6][1] : 1;
    int64_t kh = var == 4 || var == 5 || xs[1] < 3 ? 1 : 3;
    int64_t kw = var == 4 || var == 5 || xs[2] < 2 ? 1 : 2;
    int64_t st = var == 5 || var == 8 || (var < 4 && (var & 1)) ? 2 : 1;
    int same = var == 5 || var == 7 || var == 8 || (var < 4 && (var & 2));
    if (!same && (kh - 1) * dh + 1 > xs[1])
        kh = 1;
    if (!same && (kw - 1) * dw + 1 > xs[2])
        kw = 1;
    int64_t eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
    int64_t o = conv ? (size == 1 ? 1 : 4) : xs[3];
    int64_t fs[4] = {kh, kw, xs[3], o};
    int64_t ys[4] = {xs[0], conv_out_dim(xs[1], eh, st, same), conv_out_dim(xs[2], ew, st, same),
                     o};
    in_f(c, 0, xs, 4, -1, 1);
    if (conv) {
        in_f(c, 1, fs, 4, -1, 1);
        if (op != VDEV_OP_CONV2D)
            in_f(c, 2, ys, 4, -1, 1);
        c->p.i[0] = c->p.i[1] = st;
        c->p.j[0] = dh;
        c->p.j[1] = dw;
    } else {
        if (op == VDEV_OP_MAX_POOL_GRAD)
            in_f(c, 1, ys, 4, -1, 1);
        if (op == VDEV_OP_MAX_POOL_GRAD || op == VDEV_OP_AVG_POOL_GRAD)
            in_f(c, op == VDEV_OP_MAX_POOL_GRAD ? 2 : 1, ys, 4, -1, 1);
        c->p.i[0] = kh;
        c->p.i[1] = kw;
        c->p.i[2] = c->p.i[3] = st;
    }
    c->p.f[0] = same ? VDEV_PAD_SAME : VDEV_PAD_VALID;
    snprintf(c->desc, sizeof c->desc,
             "%s x [%lld,%lld,%lld,%lld] window %lldx%lld stride %lld dilation %lldx%lld %s",
             vdev_op_defs[op].name, (long long)xs[0], (long long)xs[1], (long long)xs[2],
             (long long)xs[3], (long long)kh, (long long)kw, (long long)st, (long long)dh,
             (long long)dw, same ? "SAME" : "VALID");
    return 1;
}

/* STRIDED_SLICE and its gradient on [r,c] sizes: var 0 [r,c], every row
 * backwards and every other column; 1 [r,2,c] int32 words (any bit
 * pattern), rows from r/3, the second of 2, columns backwards by 3 from the
 * last; 2 [2,r,3,c] with a range on every axis (backwards on two); 3 [r,c]
 * with no column (an empty slice, the gradient all zeros). Axis d of the
 * slice: first index i[d], stride j[d], count f[d] (as the public function
 * packs them: 0 and 1 for an empty range). */
static void strided_axis(struct tcase *c, int d, int64_t b, int64_t s, int64_t n)
{
    c->p.i[d] = n ? b : 0;
    c->p.j[d] = n > 1 ? s : 1;
    c->p.f[d] = (double)n;
}

static int strided_case(struct tcase *c, enum vdev_op op, int64_t r, int64_t col, int var)
{
    int add = op == VDEV_OP_STRIDED_SLICE_GRAD_ADD;
    if (var > 3 || ((op == VDEV_OP_STRIDED_SLICE_GRAD || add) && var == 1))
        return 0;
    int64_t s2[2] = {r, col}, s3[3] = {r, 2, col}, s4[4] = {2, r, 3, col}, cnt[4] = {1, 1, 1, 1};
    int nd = var == 1 ? 3 : var == 2 ? 4 : 2;
    const int64_t *xs = var == 1 ? s3 : var == 2 ? s4 : s2;
    if (var == 0) {
        strided_axis(c, 0, r - 1, -1, r);
        strided_axis(c, 1, 0, 2, (col + 1) / 2);
    } else if (var == 1) {
        strided_axis(c, 0, r / 3, 1, r - r / 3);
        strided_axis(c, 1, 1, 1, 1);
        strided_axis(c, 2, col - 1, -3, (col + 2) / 3);
    } else if (var == 2) {
        strided_axis(c, 0, 1, -1, 2);
        strided_axis(c, 1, 0, 3, (r + 2) / 3);
        strided_axis(c, 2, 2, -2, 2);
        strided_axis(c, 3, col - 1, -2, (col + 1) / 2);
    } else {
        strided_axis(c, 0, 0, 1, r);
        strided_axis(c, 1, 0, 1, 0);
    }
    for (int d = 0; d < nd; d++)
        cnt[d] = (int64_t)c->p.f[d];
    int k = 0;
    if (op == VDEV_OP_STRIDED_SLICE_GRAD)
        in_f(c, k++, cnt, nd, -2, 2); /* dy, the slice's shape */
    if (add) { /* (acc, dy) */
        in_f(c, 0, xs, nd, -2, 2);
        in_f(c, 1, cnt, nd, -2, 2);
    } else if (var == 1) {
        set_in(c, k, xs, nd, VDEV_I32);
        int32_t *p = c->in[k].data;
        for (int64_t i = 0; i < c->in[k].n; i++)
            p[i] = (int32_t)(rng_next() & 0xffffffffu);
    } else {
        in_f(c, k, xs, nd, -2, 2);
    }
    return 1;
}

/* Input k of shape `shape`: f32 in [-2, 2), or int32 words of any bit
 * pattern (the layout ops move words). */
static void in_words(struct tcase *c, int k, const int64_t *shape, int nd, int i32)
{
    if (!i32) {
        in_f(c, k, shape, nd, -2, 2);
        return;
    }
    set_in(c, k, shape, nd, VDEV_I32);
    int32_t *p = c->in[k].data;
    for (int64_t i = 0; i < c->in[k].n; i++)
        p[i] = (int32_t)(rng_next() & 0xffffffffu);
}

/* CONCAT and PACK take four inputs, the first i[1] used: the rest repeat
 * input 0 (as the public functions pass them; no kernel reads them). */
static void pad_inputs(struct tcase *c, int used)
{
    c->p.i[1] = used;
    for (int k = used; k < VDEV_KERNEL_MAX_IN; k++) {
        set_in(c, k, c->in[0].shape, c->in[0].ndim, c->in[0].dtype);
        memcpy(c->in[k].data, c->in[0].data, (size_t)c->in[0].n * 4);
    }
}

/* CONCAT on [r,c] sizes: var 0 [r,c] and [r,2] along axis 1; 1 int32
 * [r,c], [1,c], [2,c] along axis 0; 2 four [2,r,k] along axis 2, k = c, 1,
 * 3, 0 (an empty one); 3 [0,2,3,c] and [r,2,3,c] along axis 0; 4 one
 * [r,c,2] along axis 2. PACK: var 0 two [r,c] at axis 0; 1 three int32
 * [r,c] at axis 2 (the last); 2 four [r,1,c] at axis 1; 3 one [r*c] at
 * axis 1; 4 four scalars (size 1 only). */
static int join_case(struct tcase *c, enum vdev_op op, int64_t r, int64_t col, int size, int var)
{
    if (var > 4 || (op == VDEV_OP_PACK && var == 4 && size != 1))
        return 0;
    if (op == VDEV_OP_CONCAT) {
        int64_t a[2] = {r, col}, b[2] = {r, 2}, e[2] = {1, col}, f[2] = {2, col};
        int64_t k3[4] = {col, 1, 3, 0}, x4[4] = {r, 2, 3, col}, y4[4] = {0, 2, 3, col};
        int64_t z3[3] = {r, col, 2};
        static const int axes[5] = {1, 0, 2, 0, 2}, used[5] = {2, 3, 4, 2, 1};
        if (var == 0) {
            in_words(c, 0, a, 2, 0);
            in_words(c, 1, b, 2, 0);
        } else if (var == 1) {
            in_words(c, 0, a, 2, 1);
            in_words(c, 1, e, 2, 1);
            in_words(c, 2, f, 2, 1);
        } else if (var == 2) {
            for (int k = 0; k < 4; k++) {
                int64_t s3[3] = {2, r, k3[k]};
                in_words(c, k, s3, 3, 0);
            }
        } else if (var == 3) {
            in_words(c, 0, y4, 4, 0); /* empty input 0, a non-empty output */
            in_words(c, 1, x4, 4, 0);
        } else {
            in_words(c, 0, z3, 3, 0);
        }
        c->p.i[0] = axes[var];
        pad_inputs(c, used[var]);
        return 1;
    }
    int64_t a[2] = {r, col}, b[3] = {r, 1, col}, f[1] = {r * col};
    static const int axes[5] = {0, 2, 1, 1, 0}, used[5] = {2, 3, 4, 1, 4};
    for (int k = 0; k < used[var]; k++) {
        if (var <= 1)
            in_words(c, k, a, 2, var == 1);
        else if (var == 2)
            in_words(c, k, b, 3, 0);
        else
            in_words(c, k, f, var == 3 ? 1 : 0, 0);
    }
    c->p.i[0] = axes[var];
    pad_inputs(c, used[var]);
    return 1;
}

/* TRANSPOSE with a permutation (j[0] 1): var 2 [r,2,c] by {2,0,1}; 3 int32
 * [2,r,3,c] by {3,1,0,2}; 4 [r*c] by {0}; 5 a scalar (size 1 only); 6 [r,c]
 * by {1,0}; 7 [r,c] by {0,1} (vars 0 and 1: the 2-D form, no parameters). */
static int transpose_case(struct tcase *c, int64_t r, int64_t col, int size, int var)
{
    if (var > 7 || (var == 5 && size != 1))
        return 0;
    int64_t s3[3] = {r, 2, col}, s4[4] = {2, r, 3, col}, s1[1] = {r * col}, s2[2] = {r, col};
    static const int nds[8] = {2, 2, 3, 4, 1, 0, 2, 2};
    static const int64_t perms[8][4] = {{0}, {0}, {2, 0, 1}, {3, 1, 0, 2}, {0}, {0}, {1, 0},
                                        {0, 1}};
    const int64_t *sh = var == 2 ? s3 : var == 3 ? s4 : var == 4 ? s1 : s2;
    in_words(c, 0, sh, nds[var], var == 1 || var == 3);
    if (var >= 2) {
        c->p.j[0] = 1;
        for (int d = 0; d < nds[var]; d++)
            c->p.i[d] = perms[var][d];
    }
    return 1;
}

/* Input k: int32 indices of `shape`, each in [0, rows) (rows > 0; repeats
 * likely), or, with `bad`, every third one -1 or rows (outside). */
static void in_indices(struct tcase *c, int k, const int64_t *shape, int nd, int64_t rows,
                       int bad)
{
    set_in(c, k, shape, nd, VDEV_I32);
    int32_t *p = c->in[k].data;
    for (int64_t i = 0; i < c->in[k].n; i++)
        p[i] = bad && i % 3 == 1 ? (int32_t)(i % 2 ? rows : -1)
                                 : (int32_t)(rng_next() % (uint64_t)(rows ? rows : 1));
}

/* GATHER on [r,c] sizes: var 0 params [r,c], indices [2r+1] (repeats;
 * none for r 0); 1 int32 words [r] by indices [2,r]; 2 params [r,2,c] by a
 * 0-dimensional index (r > 0); 3 params [r,c] by no index. GATHER_GRAD (dy,
 * indices, like [r,c]): var 0 indices [2r+1]; 1 indices [2,r] on [r,2,c];
 * 2 no index (zeros); 3 indices with every third one outside [0, r), whose
 * rows are dropped (r > 0). */
static int gather_case(struct tcase *c, enum vdev_op op, int64_t r, int64_t col, int var)
{
    int grad = op == VDEV_OP_GATHER_GRAD;
    if (var > 3 || (var == (grad ? 3 : 2) && r == 0))
        return 0;
    int64_t m = r ? 2 * r + 1 : 0, s2[2] = {r, col}, s3[3] = {r, 2, col}, s1[1] = {r};
    /* params (or like) and indices per variant */
    int pnd = var == 1 ? (grad ? 3 : 1) : var == 2 && !grad ? 3 : 2;
    const int64_t *ps = pnd == 1 ? s1 : pnd == 3 ? s3 : s2;
    int64_t iv[2] = {var == 1 ? 2 : var == (grad ? 2 : 3) ? 0 : m, r};
    int ind = var == 1 ? 2 : var == 2 && !grad ? 0 : 1;
    if (grad) {
        int64_t dy[VDEV_MAX_DIMS];
        int dnd = ind + pnd - 1;
        for (int d = 0; d < dnd; d++)
            dy[d] = d < ind ? iv[d] : ps[d - ind + 1];
        in_f(c, 0, dy, dnd, -2, 2);
        in_f(c, 2, ps, pnd, -2, 2); /* like params: its shape only */
    } else {
        in_words(c, 0, ps, pnd, var == 1);
    }
    in_indices(c, 1, iv, ind, r, grad && var == 3);
    return 1;
}

#endif /* VDEV_TESTS_OPS_CASES_SHAPED_H */
