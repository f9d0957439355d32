/* test_conv.c — 2-D convolution and pooling (vdev_conv2d, vdev_max_pool2d,
 * vdev_avg_pool2d) on the cpu backend and on a simulated GPU: small cases
 * worked by hand (SAME's padding split, the pools' windows at the edges, an
 * empty output), the convolution's fast host kernel (im2col and sgemm, the
 * 1x1 path, an image cut into several products) against the reference
 * kernel on random shapes within float accumulation's bound, GPU:1 against
 * CPU:0 bit for bit, every gradient through the tape against central
 * finite differences (dilated convolutions too), every refusal with its exact message, and a small
 * convolutional net (conv, relu, max pool, reshape, dense, softmax
 * cross-entropy) trained with Adam whose loss falls, the same bits on CPU:0
 * and GPU:1. (test_ops.c checks each kernel, the gradient ops included,
 * against expectations written from the definitions.) */
#define _GNU_SOURCE
#include "check.h"
#include "ops/impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

/* ---- helpers ---- */

static vdev_tensor_t *t4(const float *d, int64_t a, int64_t b, int64_t c, int64_t e)
{
    int64_t s[4] = {a, b, c, e};
    return vdev_tensor_from_host(d, s, 4, VDEV_F32);
}

static float *rand_buf(int64_t n, float lo, float hi)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!p)
        abort();
    for (int64_t i = 0; i < n; i++)
        p[i] = rng_uniform(lo, hi);
    return p;
}

/* t's values in a new buffer (NULL for a dead t). */
static float *host_of(const vdev_tensor_t *t)
{
    int64_t n = vdev_tensor_numel(t);
    if (n < 0)
        return NULL;
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (p && vdev_tensor_to_host(t, p, (size_t)n * sizeof(float)) != VDEV_OK) {
        free(p);
        return NULL;
    }
    return p;
}

static int shape_is(const vdev_tensor_t *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return vdev_tensor_ndim(t) == 4 && vdev_tensor_dim(t, 0) == a && vdev_tensor_dim(t, 1) == b &&
           vdev_tensor_dim(t, 2) == c && vdev_tensor_dim(t, 3) == d;
}

/* Runs kernel fn on host buffers as the dispatcher would (the shape rule
 * first); the output in a new buffer. */
static float *run_direct(enum vdev_op op, const float *const *in, const int64_t (*shape)[4],
                         int n_in, const struct vdev_op_params *p, void (*fn)(const struct
                                                                                vdev_kernel_args *))
{
    struct vdev_kernel_args a;
    memset(&a, 0, sizeof a);
    a.op = op;
    a.n_in = n_in;
    for (int k = 0; k < n_in; k++) {
        a.in[k] = in[k];
        a.in_ndim[k] = 4;
        a.in_dtype[k] = VDEV_F32;
        memcpy(a.in_shape[k], shape[k], sizeof a.in_shape[k]);
    }
    memcpy(a.f, p->f, sizeof a.f);
    memcpy(a.i, p->i, sizeof a.i);
    if (vdev_op_defs[op].shape(&a) != VDEV_OK)
        return NULL;
    int64_t n = vdev_args_out_numel(&a, 0);
    float *out = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!out)
        abort();
    a.out[0] = out;
    fn(&a);
    return out;
}

/* ---- cases worked by hand ---- */

/* x = 1..16 as [1,4,4,1]. A 3x3 filter of ones, stride 2, SAME: 2x2 out,
 * one row and column of padding, all of it after (bottom, right), so the
 * first window is rows 0-2, cols 0-2: 1+2+3+5+6+7+9+10+11 = 54; then 45
 * (cols 2-3), 72 (rows 2-3), 54 (rows 2-3, cols 2-3). Padding before would
 * have given 14 first. */
static void test_by_hand(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    float xv[16], ones[9];
    for (int i = 0; i < 16; i++)
        xv[i] = (float)(i + 1);
    for (int i = 0; i < 9; i++)
        ones[i] = 1.0f;
    vdev_tensor_t *x = t4(xv, 1, 4, 4, 1), *f = t4(ones, 3, 3, 1, 1);
    vdev_tensor_t *y = vdev_conv2d(x, f, 2, 2, "SAME");
    CHECK(shape_is(y, 1, 2, 2, 1));
    float *v = host_of(y);
    CHECK(v && v[0] == 54 && v[1] == 45 && v[2] == 72 && v[3] == 54);
    free(v);
    /* VALID, stride 1: the 4 windows inside, rows 0-2 / 1-3, cols 0-2 / 1-3 */
    y = vdev_conv2d(x, f, 1, 1, "VALID");
    CHECK(shape_is(y, 1, 2, 2, 1));
    v = host_of(y);
    CHECK(v && v[0] == 54 && v[1] == 63 && v[2] == 90 && v[3] == 99);
    free(v);
    /* max 2x2 stride 2 VALID: 6 8 14 16 */
    y = vdev_max_pool2d(x, 2, 2, 2, 2, "VALID");
    CHECK(shape_is(y, 1, 2, 2, 1));
    v = host_of(y);
    CHECK(v && v[0] == 6 && v[1] == 8 && v[2] == 14 && v[3] == 16);
    free(v);
    /* avg 3x3 stride 2 SAME: the means of the elements inside, 54/9, 45/6,
     * 72/6, 54/4 (the padding is not counted) */
    y = vdev_avg_pool2d(x, 3, 3, 2, 2, "SAME");
    CHECK(shape_is(y, 1, 2, 2, 1));
    v = host_of(y);
    CHECK(v && v[0] == 6.0f && v[1] == 7.5f && v[2] == 12.0f && v[3] == 13.5f);
    free(v);
    /* SAME with stride 1 and a 3x3 max: padding 1 each side; the corner's
     * window holds 1 2 5 6 */
    y = vdev_max_pool2d(x, 3, 3, 1, 1, "SAME");
    CHECK(shape_is(y, 1, 4, 4, 1));
    v = host_of(y);
    CHECK(v && v[0] == 6 && v[5] == 11 && v[15] == 16);
    free(v);
    /* sizes: 7 rows, window 3, stride 2: VALID (7-3+2)/2 = 3, SAME 4; 6 rows
     * SAME 3; 2 rows under a 3-window, stride 2, VALID: (2-3+2)/2 = 0, an
     * empty output as TensorFlow gives */
    float *big = rand_buf(2 * 7 * 6 * 3, -1, 1), *fb = rand_buf(3 * 3 * 3 * 5, -1, 1);
    vdev_tensor_t *xb = t4(big, 2, 7, 6, 3), *fbt = t4(fb, 3, 3, 3, 5);
    CHECK(shape_is(vdev_conv2d(xb, fbt, 2, 2, "VALID"), 2, 3, 2, 5));
    CHECK(shape_is(vdev_conv2d(xb, fbt, 2, 2, "SAME"), 2, 4, 3, 5));
    CHECK(shape_is(vdev_max_pool2d(xb, 3, 3, 2, 2, "SAME"), 2, 4, 3, 3));
    vdev_tensor_t *x2 = t4(big, 1, 2, 2, 3);
    vdev_tensor_t *e = vdev_conv2d(x2, fbt, 2, 2, "VALID");
    CHECK(shape_is(e, 1, 0, 0, 5));
    CHECK(shape_is(vdev_avg_pool2d(x2, 3, 3, 2, 2, "VALID"), 1, 0, 0, 3));
    free(big);
    free(fb);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* ---- the fast kernel and the devices ---- */

struct cfg {
    int64_t n, h, w, c, kh, kw, o, sh, sw;
    int same;
};

static const struct cfg CFGS[] = {
    {2, 7, 5, 3, 3, 2, 4, 1, 1, 0},  {2, 7, 5, 3, 3, 2, 4, 1, 1, 1},
    {3, 9, 8, 2, 3, 3, 5, 2, 2, 0},  {3, 9, 8, 2, 3, 3, 5, 2, 2, 1},
    {1, 6, 6, 4, 2, 2, 3, 2, 1, 1},  {2, 5, 5, 3, 5, 5, 2, 1, 2, 1},
    {2, 4, 6, 5, 1, 1, 7, 1, 1, 0},  {2, 5, 7, 5, 1, 1, 3, 2, 2, 1},
    {1, 3, 3, 2, 4, 5, 2, 1, 1, 1},  {1, 100, 100, 48, 3, 3, 4, 1, 1, 1},
};
#define N_CFGS (int)(sizeof CFGS / sizeof CFGS[0])

/* Conv2D through the dispatcher on CPU:0 (the fast kernel) against the
 * reference kernel, within sgemm's bound 4 k 2^-24 sum |x w| (sum |x w| from
 * the reference on |x| and |w|); GPU:1 (the same host kernel on the
 * simulated GPU's thread) gives CPU:0's bits; the pools through the
 * dispatcher give the reference's bits. The last case is an image whose
 * im2col takes more than one product, the 1x1 ones the path without
 * im2col. */
static void test_fast_and_devices(void)
{
    for (int t = 0; t < N_CFGS; t++) {
        const struct cfg *g = &CFGS[t];
        int64_t sx[4] = {g->n, g->h, g->w, g->c}, sf[4] = {g->kh, g->kw, g->c, g->o};
        int64_t nx = g->n * g->h * g->w * g->c, nf = g->kh * g->kw * g->c * g->o;
        float *x = rand_buf(nx, -1, 1), *f = rand_buf(nf, -1, 1);
        float *ax = malloc((size_t)nx * 4), *af = malloc((size_t)nf * 4);
        for (int64_t i = 0; i < nx; i++)
            ax[i] = fabsf(x[i]);
        for (int64_t i = 0; i < nf; i++)
            af[i] = fabsf(f[i]);
        const char *pad = g->same ? "SAME" : "VALID";
        struct vdev_op_params p;
        memset(&p, 0, sizeof p);
        p.i[0] = g->sh;
        p.i[1] = g->sw;
        p.f[0] = g->same ? VDEV_PAD_SAME : VDEV_PAD_VALID;
        const int64_t shapes[2][4] = {{sx[0], sx[1], sx[2], sx[3]}, {sf[0], sf[1], sf[2], sf[3]}};
        const float *in[2] = {x, f}, *ain[2] = {ax, af};
        float *ref = run_direct(VDEV_OP_CONV2D, in, shapes, 2, &p, vdev_ref_conv2d);
        float *mag = run_direct(VDEV_OP_CONV2D, ain, shapes, 2, &p, vdev_ref_conv2d);
        CHECK_OK(vdev_scope_begin());
        float *out[2] = {NULL, NULL};
        int64_t ny = 0;
        for (int d = 0; d < 2; d++) {
            CHECK_OK(vdev_device_push(d ? "GPU:1" : "CPU:0"));
            vdev_tensor_t *y = vdev_conv2d(t4(x, sx[0], sx[1], sx[2], sx[3]),
                                           t4(f, sf[0], sf[1], sf[2], sf[3]), (int)g->sh,
                                           (int)g->sw, pad);
            CHECK(y && strstr(vdev_tensor_device(y), d ? "GPU:1" : "CPU:0"));
            out[d] = host_of(y);
            ny = vdev_tensor_numel(y);
            CHECK_OK(vdev_device_pop());
        }
        int64_t k = g->kh * g->kw * g->c, bad = 0;
        for (int64_t i = 0; ref && out[0] && i < ny; i++) {
            double tol = 4.0 * (double)k * ldexp(1.0, -24) * mag[i] + 1e-30;
            if (fabs((double)out[0][i] - ref[i]) > tol && bad++ < 3)
                check_fail(__FILE__, __LINE__, "Conv2D case %d element %lld: %.9g, reference %.9g",
                           t, (long long)i, out[0][i], ref[i]);
        }
        CHECK(ref && out[0] && out[1] && ny > 0 && bad == 0);
        CHECK(out[0] && out[1] && memcmp(out[0], out[1], (size_t)ny * 4) == 0);
        free(out[0]);
        free(out[1]);
        /* the pools on the same input, through the dispatcher on both devices */
        for (int op = 0; op < 2 && g->h < 50; op++) {
            struct vdev_op_params pp;
            memset(&pp, 0, sizeof pp);
            pp.i[0] = g->kh;
            pp.i[1] = g->kw;
            pp.i[2] = g->sh;
            pp.i[3] = g->sw;
            pp.f[0] = p.f[0];
            enum vdev_op pop = op ? VDEV_OP_AVG_POOL : VDEV_OP_MAX_POOL;
            float *pref = run_direct(pop, in, shapes, 1, &pp,
                                     op ? vdev_ref_avg_pool : vdev_ref_max_pool);
            for (int d = 0; d < 2; d++) {
                CHECK_OK(vdev_device_push(d ? "GPU:1" : "CPU:0"));
                vdev_tensor_t *xt = t4(x, sx[0], sx[1], sx[2], sx[3]);
                vdev_tensor_t *y = op ? vdev_avg_pool2d(xt, (int)g->kh, (int)g->kw, (int)g->sh,
                                                        (int)g->sw, pad)
                                      : vdev_max_pool2d(xt, (int)g->kh, (int)g->kw, (int)g->sh,
                                                        (int)g->sw, pad);
                float *v = host_of(y);
                int64_t n = vdev_tensor_numel(y);
                CHECK(v && pref && n > 0 && memcmp(v, pref, (size_t)n * 4) == 0);
                free(v);
                CHECK_OK(vdev_device_pop());
            }
            free(pref);
        }
        vdev_scope_end();
        free(ref);
        free(mag);
        free(x);
        free(f);
        free(ax);
        free(af);
    }
}

/* ---- gradients against finite differences ---- */

/* The op under test on x (and f for the convolution). */
struct gcase {
    int op; /* 0 conv, 1 max pool, 2 avg pool */
    struct cfg g;
    int dh, dw; /* the convolution's dilations (0: 1) */
};

static vdev_tensor_t *apply(const struct gcase *c, const vdev_tensor_t *x, const vdev_tensor_t *f)
{
    const struct cfg *g = &c->g;
    const char *pad = g->same ? "SAME" : "VALID";
    if (c->op == 0)
        return vdev_conv2d_dilated(x, f, (int)g->sh, (int)g->sw, c->dh ? c->dh : 1,
                                   c->dw ? c->dw : 1, pad);
    if (c->op == 1)
        return vdev_max_pool2d(x, (int)g->kh, (int)g->kw, (int)g->sh, (int)g->sw, pad);
    return vdev_avg_pool2d(x, (int)g->kh, (int)g->kw, (int)g->sh, (int)g->sw, pad);
}

/* L = sum(op(x, f) * r), on the host in double from the op's float output. */
static double loss_at(const struct gcase *c, const float *x, const float *f, const float *r)
{
    const struct cfg *g = &c->g;
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *y = apply(c, t4(x, g->n, g->h, g->w, g->c),
                             c->op == 0 ? t4(f, g->kh, g->kw, g->c, g->o) : NULL);
    float *v = host_of(y);
    double s = 0.0;
    for (int64_t i = 0; v && i < vdev_tensor_numel(y); i++)
        s += (double)v[i] * r[i];
    if (!v)
        check_fail(__FILE__, __LINE__, "op failed: %s", vdev_last_error());
    free(v);
    vdev_scope_end();
    return s;
}

/* Each element's tape gradient against (L(v + h) - L(v - h)) / 2h. The ops
 * are linear in each operand (the max pool piecewise: x's values are
 * distinct, 0.05 apart, so a step of 0.01 moves no window's maximum), so the
 * difference quotient is exact but for rounding: the loss's float terms,
 * each within 2^-24 of |y r|, over 2h, well inside 2e-3 + 1e-3 |g|. */
static void check_grad(const struct gcase *c, const char *dev)
{
    const struct cfg *g = &c->g;
    int64_t nx = g->n * g->h * g->w * g->c, nf = g->kh * g->kw * g->c * g->o;
    float *x = rand_buf(nx, -1, 1), *f = rand_buf(nf, -1, 1);
    if (c->op == 1) { /* distinct values: a shuffled ladder */
        for (int64_t i = 0; i < nx; i++)
            x[i] = (float)i * 0.05f - (float)nx * 0.025f;
        for (int64_t i = nx - 1; i > 0; i--) {
            int64_t j = (int64_t)(rng_next() % (uint64_t)(i + 1));
            float t = x[i];
            x[i] = x[j];
            x[j] = t;
        }
    }
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *xv = vdev_variable(t4(x, g->n, g->h, g->w, g->c));
    vdev_tensor_t *fv = c->op == 0 ? vdev_variable(t4(f, g->kh, g->kw, g->c, g->o)) : NULL;
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = apply(c, xv, fv);
    int64_t ny = vdev_tensor_numel(y);
    float *r = rand_buf(ny, -1, 1);
    int64_t ys[4] = {vdev_tensor_dim(y, 0), vdev_tensor_dim(y, 1), vdev_tensor_dim(y, 2),
                     vdev_tensor_dim(y, 3)};
    vdev_tensor_t *loss = vdev_sum_all(vdev_mul(y, t4(r, ys[0], ys[1], ys[2], ys[3])));
    vdev_tensor_t *vars[2] = {xv, fv}, *grads[2] = {NULL, NULL};
    int nv = c->op == 0 ? 2 : 1;
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, nv, grads));
    vdev_tape_end(tape);
    float *gx = host_of(grads[0]), *gf = nv > 1 ? host_of(grads[1]) : NULL;
    CHECK(gx && (nv == 1 || gf));
    const float h = 0.01f;
    for (int v = 0; v < nv && gx && (nv == 1 || gf); v++) {
        float *p = v ? f : x, *gv = v ? gf : gx;
        int64_t n = v ? nf : nx, bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float keep = p[i];
            p[i] = keep + h;
            double lp = loss_at(c, x, f, r);
            p[i] = keep - h;
            double lm = loss_at(c, x, f, r);
            p[i] = keep;
            double fd = (lp - lm) / (2.0 * (double)h);
            if (fabs(fd - gv[i]) > 2e-3 + 1e-3 * fabs(fd) && bad++ < 3)
                check_fail(__FILE__, __LINE__,
                           "%s op %d [%lld,%lld,%lld,%lld] k %lldx%lld s %lld,%lld d %d,%d %s: "
                           "d%s[%lld] tape %.6g, finite differences %.6g",
                           dev, c->op, (long long)g->n, (long long)g->h, (long long)g->w,
                           (long long)g->c, (long long)g->kh, (long long)g->kw, (long long)g->sh,
                           (long long)g->sw, c->dh, c->dw, g->same ? "SAME" : "VALID",
                           v ? "f" : "x", (long long)i, gv[i], fd);
        }
        CHECK(bad == 0);
    }
    free(gx);
    free(gf);
    free(r);
    vdev_scope_end();
    vdev_tensor_free(xv);
    vdev_tensor_free(fv);
    CHECK_OK(vdev_device_pop());
    free(x);
    free(f);
}

static void test_grads(const char *dev)
{
    static const struct cfg G[] = {
        {2, 5, 6, 3, 3, 2, 4, 1, 1, 0}, {2, 5, 6, 3, 3, 2, 4, 1, 1, 1},
        {2, 7, 6, 2, 3, 3, 3, 2, 2, 0}, {2, 7, 6, 2, 3, 3, 3, 2, 2, 1},
        {1, 6, 5, 2, 2, 3, 2, 2, 1, 1}, {1, 4, 4, 3, 1, 1, 2, 2, 2, 1},
    };
    for (int op = 0; op < 3; op++)
        for (size_t t = 0; t < sizeof G / sizeof G[0]; t++) {
            struct gcase c = {op, G[t], 0, 0};
            check_grad(&c, dev);
        }
    /* dilated convolutions: 2x3 VALID and SAME, 3x2 at stride 2 */
    static const struct cfg D[] = {
        {2, 7, 8, 2, 3, 2, 3, 1, 1, 0}, {2, 7, 8, 2, 3, 2, 3, 1, 1, 1},
        {1, 9, 7, 2, 2, 3, 2, 2, 2, 1},
    };
    static const int DIL[3][2] = {{2, 3}, {2, 3}, {3, 2}};
    for (size_t t = 0; t < sizeof D / sizeof D[0]; t++) {
        struct gcase c = {0, D[t], DIL[t][0], DIL[t][1]};
        check_grad(&c, dev);
    }
}

/* MaxPoolGrad's ties: equal values in a window, the gradient goes to the
 * first in row-major order, as TensorFlow's CPU kernel. */
static void test_max_ties(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    float xv[4] = {3, 3, 3, 3};
    vdev_tensor_t *x = vdev_variable(t4(xv, 1, 2, 2, 1));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = vdev_max_pool2d(x, 2, 2, 1, 1, "VALID");
    vdev_tensor_t *gx = NULL;
    CHECK_OK(vdev_tape_gradient(tape, vdev_sum_all(y), &x, 1, &gx));
    vdev_tape_end(tape);
    float *g = host_of(gx);
    CHECK(g && g[0] == 1 && g[1] == 0 && g[2] == 0 && g[3] == 0);
    free(g);
    vdev_scope_end();
    vdev_tensor_free(x);
    CHECK_OK(vdev_device_pop());
}

/* ---- refusals ---- */

static void test_errors(void)
{
    CHECK_OK(vdev_scope_begin());
    float buf[256] = {0};
    vdev_tensor_t *x = t4(buf, 1, 4, 4, 3), *f = t4(buf, 3, 3, 3, 2);
    int64_t s2[2] = {4, 3}, s3[3] = {4, 4, 3};
    vdev_tensor_t *m = vdev_tensor_from_host(buf, s2, 2, VDEV_F32);
    vdev_tensor_t *x3 = vdev_tensor_from_host(buf, s3, 3, VDEV_F32);
    vdev_tensor_t *xi = vdev_tensor_from_host(buf, (int64_t[4]){1, 4, 4, 3}, 4, VDEV_I32);
#define REFUSED(call, code, msg) CHECK_ERR((call) ? VDEV_OK : vdev_last_status(), code, msg)
    REFUSED(vdev_conv2d(x3, f, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "Conv2D: input must be 4-dimensional[4,4,3]");
    REFUSED(vdev_conv2d(x, m, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "Conv2D: filter must be 4-dimensional: [4,3]");
    REFUSED(vdev_conv2d(x, t4(buf, 3, 3, 2, 2), 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "Conv2D: input depth must be evenly divisible by filter depth: 3 vs 2");
    REFUSED(vdev_conv2d(t4(buf, 1, 4, 4, 4), t4(buf, 3, 3, 2, 2), 1, 1, "SAME"),
            VDEV_ERR_UNSUPPORTED,
            "Conv2D: grouped convolution (input depth 4, filter depth 2) is not supported: the "
            "filter's depth must be the input's");
    REFUSED(vdev_conv2d(x, t4(buf, 3, 3, 0, 2), 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "Conv2D: filter depth must be stricly positive, got 0");
    REFUSED(vdev_conv2d(x, t4(buf, 0, 3, 3, 2), 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "Conv2D: filter [0,3,3,2] has a window of size 0");
    REFUSED(vdev_conv2d(x, f, 0, 1, "SAME"), VDEV_ERR_INVALID_ARG,
            "Conv2D: Stride must be > 0, but got 0");
    REFUSED(vdev_conv2d(x, f, 1, -2, "VALID"), VDEV_ERR_INVALID_ARG,
            "Conv2D: Stride must be > 0, but got -2");
    REFUSED(vdev_conv2d(x, f, 1, 1, "FULL"), VDEV_ERR_INVALID_ARG,
            "Conv2D: Value for attr 'padding' of \"FULL\" is not in the list of allowed values: "
            "\"SAME\", \"VALID\"");
    REFUSED(vdev_conv2d(x, f, 1, 1, "same"), VDEV_ERR_INVALID_ARG,
            "Conv2D: Value for attr 'padding' of \"same\" is not in the list of allowed values: "
            "\"SAME\", \"VALID\"");
    REFUSED(vdev_conv2d(x, f, 1, 1, NULL), VDEV_ERR_INVALID_ARG,
            "Conv2D: padding is NULL (\"SAME\" or \"VALID\")");
    REFUSED(vdev_conv2d(x, t4(buf, 6, 3, 3, 2), 1, 1, "VALID"), VDEV_ERR_SHAPE,
            "Conv2D: Computed output size would be negative: -1 [input_size: 4, "
            "effective_filter_size: 6, stride: 1]");
    REFUSED(vdev_conv2d(xi, f, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "Conv2D: input #0 (shape [1,4,4,3]) is int32, expected float");
    REFUSED(vdev_max_pool2d(x3, 2, 2, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "MaxPool: tensor_in must be 4-dimensional");
    REFUSED(vdev_max_pool2d(x, 0, 2, 1, 1, "SAME"), VDEV_ERR_INVALID_ARG,
            "MaxPool: Sliding window ksize for dimension 1 was zero.");
    REFUSED(vdev_avg_pool2d(x, 2, -1, 1, 1, "SAME"), VDEV_ERR_INVALID_ARG,
            "AvgPool: Sliding window ksize for dimension 2 was zero.");
    REFUSED(vdev_avg_pool2d(x, 2, 2, 1, 0, "VALID"), VDEV_ERR_INVALID_ARG,
            "AvgPool: Stride must be > 0, but got 0");
    REFUSED(vdev_max_pool2d(x, 2, 2, 1, 1, "EXPLICIT"), VDEV_ERR_INVALID_ARG,
            "MaxPool: Value for attr 'padding' of \"EXPLICIT\" is not in the list of allowed "
            "values: \"SAME\", \"VALID\"");
    REFUSED(vdev_max_pool2d(x, 6, 2, 1, 1, "VALID"), VDEV_ERR_SHAPE,
            "MaxPool: Computed output size would be negative: -1 [input_size: 4, "
            "effective_filter_size: 6, stride: 1]");
    /* the gradient ops: dy of another shape than the forward output's */
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = p.i[1] = 1;
    p.f[0] = VDEV_PAD_VALID;
    const vdev_tensor_t *in[3] = {x, f, t4(buf, 1, 3, 2, 2)};
    REFUSED(vdev_op_run(VDEV_OP_CONV2D_BACKPROP_INPUT, in, 3, &p), VDEV_ERR_SHAPE,
            "Conv2DBackpropInput: out_backprop has shape [1,3,2,2], not the computed output "
            "shape [1,2,2,2]");
    p.f[0] = 2;
    REFUSED(vdev_op_run(VDEV_OP_CONV2D, in, 2, &p), VDEV_ERR_INVALID_ARG,
            "Conv2D: padding code 2 is neither VALID (0) nor SAME (1)");
    /* NULL in, NULL out, the error kept */
    vdev_error(VDEV_ERR_OOM, "earlier");
    CHECK(!vdev_conv2d(NULL, f, 1, 1, "SAME") && !vdev_max_pool2d(NULL, 1, 1, 1, 1, "SAME"));
    CHECK_STR(vdev_last_error(), "earlier");
#undef REFUSED
    vdev_scope_end();
}

/* ---- a small convolutional net ---- */

#define NET_STEPS 12

/* x [8,8,8,2] -> conv 3x3x2x4 SAME -> relu -> max 2x2/2 -> [8,4,4,4] ->
 * [8,64] -> dense 64x3 + bias -> softmax cross-entropy against fixed
 * labels, NET_STEPS Adam steps (learning rate 0.01); the losses into
 * loss[]. The data and the initial weights come from the host, so every
 * device starts from the same bits. */
static void train_net(const char *dev, float *loss)
{
    uint64_t keep = rng_state;
    rng_state = 0x51ed270b27d9a3c1ull;
    float *xs = rand_buf(8 * 8 * 8 * 2, -1, 1), *fs = rand_buf(3 * 3 * 2 * 4, -0.5f, 0.5f);
    float *ws = rand_buf(64 * 3, -0.2f, 0.2f), bs[3] = {0, 0, 0};
    int32_t labels[8];
    for (int i = 0; i < 8; i++)
        labels[i] = (int32_t)(rng_next() % 3);
    rng_state = keep;
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *x = t4(xs, 8, 8, 8, 2);
    vdev_tensor_t *lab = vdev_tensor_from_host(labels, (int64_t[1]){8}, 1, VDEV_I32);
    vdev_tensor_t *v[3] = {vdev_variable(t4(fs, 3, 3, 2, 4)),
                           vdev_variable(vdev_tensor_from_host(ws, (int64_t[2]){64, 3}, 2,
                                                               VDEV_F32)),
                           vdev_variable(vdev_tensor_from_host(bs, (int64_t[1]){3}, 1,
                                                               VDEV_F32))};
    vdev_optimizer_t *opt = vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f);
    CHECK(opt != NULL);
    for (int s = 0; s < NET_STEPS; s++) {
        CHECK_OK(vdev_scope_begin());
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *h = vdev_max_pool2d(vdev_relu(vdev_conv2d(x, v[0], 1, 1, "SAME")), 2, 2,
                                           2, 2, "VALID");
        vdev_tensor_t *flat = vdev_reshape(h, (int64_t[2]){8, -1}, 2);
        vdev_tensor_t *logits = vdev_add(vdev_matmul(flat, v[1], false, false), v[2]);
        vdev_tensor_t *l = vdev_softmax_cross_entropy(logits, lab);
        vdev_tensor_t *g[3] = {NULL, NULL, NULL};
        CHECK_OK(vdev_tape_gradient(tape, l, v, 3, g));
        vdev_tape_end(tape);
        loss[s] = vdev_tensor_item(l);
        CHECK_OK(vdev_optimizer_apply(opt, v, g, 3));
        vdev_scope_end();
    }
    vdev_optimizer_free(opt);
    for (int i = 0; i < 3; i++)
        vdev_tensor_free(v[i]);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
    free(xs);
    free(fs);
    free(ws);
}

static void test_net(void)
{
    float lc[NET_STEPS], lg[NET_STEPS];
    train_net("CPU:0", lc);
    train_net("GPU:1", lg);
    printf("conv net loss: %.6f -> %.6f (CPU:0), %.6f -> %.6f (GPU:1)\n", lc[0],
           lc[NET_STEPS - 1], lg[0], lg[NET_STEPS - 1]);
    CHECK(lc[NET_STEPS - 1] < 0.9f * lc[0]);
    for (int s = 1; s < NET_STEPS; s++)
        CHECK(lc[s] < lc[s - 1]);
    CHECK(memcmp(lc, lg, sizeof lc) == 0);
}

int main(void)
{
    rng_state = 0x6a09e667f3bcc909ull;
    check_fresh("3x16GiB");
    CHECK_OK(vdev_init());
    test_by_hand("CPU:0");
    test_by_hand("GPU:1");
    test_fast_and_devices();
    test_grads("CPU:0");
    test_grads("GPU:1");
    test_max_ties("CPU:0");
    test_max_ties("GPU:1");
    test_errors();
    test_net();
    CHECK_NO_LEAK("CPU:0");
    CHECK_NO_LEAK("GPU:1");
    vdev_shutdown();
    return check_done();
}
