/* test_conv_composed.c — the ops made of the 2-D ones (conv_composed.c):
 * vdev_conv1d, vdev_max_pool1d, vdev_avg_pool1d and vdev_separable_conv2d,
 * on the cpu backend and a simulated GPU: values against direct loops
 * written here in double (each output element the sum, maximum or mean over
 * its window), over strides 1 to 3, dilations, both paddings, SAME's
 * uneven padding, 1-tap filters, an input with a batch of two dimensions and
 * an empty batch; GPU:0 against CPU:0 bit for bit; every gradient through
 * the tape against central finite differences; the placement log's ops;
 * and every refusal with its exact words, nothing left allocated after it. */
#define _GNU_SOURCE
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

/* ---- helpers ---- */

static float *rand_buf(int64_t n)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!p)
        abort();
    for (int64_t i = 0; i < n; i++)
        p[i] = rng_uniform(-1, 1);
    return p;
}

static vdev_tensor_t *tn(const float *d, int nd, int64_t a, int64_t b, int64_t c, int64_t e)
{
    int64_t s[4] = {a, b, c, e};
    return vdev_tensor_from_host(d, s, nd, VDEV_F32);
}

/* t's values on the host (malloc'd), NULL for a NULL t. */
static float *host_of(const vdev_tensor_t *t)
{
    if (!t)
        return NULL;
    int64_t n = vdev_tensor_numel(t);
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!p)
        abort();
    CHECK_OK(vdev_tensor_to_host(t, p, (size_t)n * sizeof(float)));
    return p;
}

/* TensorFlow's output size and padding before for one dimension: in cells,
 * a window of k taps d apart, stride s. */
static int64_t out_size(int64_t in, int64_t k, int s, int d, int same, int64_t *before)
{
    int64_t eff = (k - 1) * d + 1;
    int64_t out = same ? (in + s - 1) / s : (in - eff + s) / s;
    if (out < 0)
        out = 0;
    int64_t need = (out - 1) * s + eff - in;
    *before = same && need > 0 ? need / 2 : 0;
    return out;
}

/* ---- 1-D convolution ---- */

struct c1 {
    int64_t n, w, c, k, o; /* input [n, w, c], filter [k, c, o] */
    int s, d, same;
};

/* y [n, ow, o] in double, and each element's sum of |terms| in *mag. */
static double *ref_conv1d(const struct c1 *g, const float *x, const float *f, int64_t *ow_out,
                          double **mag)
{
    int64_t pl, ow = out_size(g->w, g->k, g->s, g->d, g->same, &pl);
    int64_t ny = g->n * ow * g->o;
    double *y = calloc((size_t)(ny ? ny : 1), sizeof(double));
    double *m = calloc((size_t)(ny ? ny : 1), sizeof(double));
    if (!y || !m)
        abort();
    for (int64_t b = 0; b < g->n; b++)
        for (int64_t q = 0; q < ow; q++)
            for (int64_t oc = 0; oc < g->o; oc++)
                for (int64_t u = 0; u < g->k; u++) {
                    int64_t i = q * g->s - pl + u * g->d;
                    if (i < 0 || i >= g->w)
                        continue;
                    for (int64_t c = 0; c < g->c; c++) {
                        double t = (double)x[(b * g->w + i) * g->c + c] *
                                   f[(u * g->c + c) * g->o + oc];
                        y[(b * ow + q) * g->o + oc] += t;
                        m[(b * ow + q) * g->o + oc] += fabs(t);
                    }
                }
    *ow_out = ow;
    *mag = m;
    return y;
}

/* got against want within 4 K 2^-24 of the sum of |terms| (float
 * accumulation over K terms), plus a little for a sum of 0. */
static int64_t count_off(const float *got, const double *want, const double *mag, int64_t n,
                         int64_t k)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 4.0 * (double)k * 0x1p-24 * mag[i] + 1e-7)
            bad++;
    return bad;
}

/* A case's results on CPU:0 and GPU:0 (got[0], got[1], NULL where the op
 * failed) against the reference (count_off over k terms), and against each
 * other bit for bit; frees them. */
static void check_results(const char *what, size_t ci, float **got, const double *want,
                          const double *mag, int64_t n, int64_t k)
{
    if (got[0] && got[1]) {
        int64_t bad = count_off(got[0], want, mag, n, k);
        if (bad)
            check_fail(__FILE__, __LINE__, "%s case %zu: %lld elements off", what, ci,
                       (long long)bad);
        CHECK(bad == 0);
        CHECK(memcmp(got[0], got[1], (size_t)n * sizeof(float)) == 0);
    }
    free(got[0]);
    free(got[1]);
}

static void test_conv1d_values(void)
{
    static const struct c1 cases[] = {
        {2, 9, 3, 3, 4, 1, 1, 0}, {2, 9, 3, 3, 4, 1, 1, 1}, {1, 10, 2, 4, 3, 2, 1, 1},
        {3, 11, 2, 3, 2, 3, 1, 0}, {2, 12, 3, 3, 2, 1, 2, 1}, {2, 12, 3, 2, 5, 1, 3, 0},
        {1, 7, 4, 1, 3, 2, 1, 0}, {0, 8, 2, 3, 2, 1, 1, 1}, {2, 5, 1, 5, 1, 1, 1, 0},
        {1, 6, 2, 4, 2, 2, 1, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const struct c1 *g = &cases[ci];
        float *x = rand_buf(g->n * g->w * g->c), *f = rand_buf(g->k * g->c * g->o);
        int64_t ow;
        double *mag, *want = ref_conv1d(g, x, f, &ow, &mag);
        float *got[2] = {NULL, NULL};
        const char *devs[2] = {"CPU:0", "GPU:0"};
        for (int di = 0; di < 2; di++) {
            CHECK_OK(vdev_device_push(devs[di]));
            CHECK_OK(vdev_scope_begin());
            vdev_tensor_t *y = vdev_conv1d(tn(x, 3, g->n, g->w, g->c, 0),
                                           tn(f, 3, g->k, g->c, g->o, 0), g->s, g->d,
                                           g->same ? "SAME" : "VALID");
            CHECK(y != NULL);
            if (y) {
                CHECK(vdev_tensor_ndim(y) == 3);
                CHECK(vdev_tensor_dim(y, 0) == g->n && vdev_tensor_dim(y, 1) == ow &&
                      vdev_tensor_dim(y, 2) == g->o);
                got[di] = host_of(y);
            } else {
                check_fail(__FILE__, __LINE__, "case %zu: %s", ci, vdev_last_error());
            }
            vdev_scope_end();
            CHECK_OK(vdev_device_pop());
        }
        check_results("conv1d", ci, got, want, mag, g->n * ow * g->o, g->k * g->c);
        free(want);
        free(mag);
        free(x);
        free(f);
    }
    CHECK(vdev_placement_op_count("Conv2D", "/device:GPU:0") > 0);
    CHECK(vdev_placement_op_count("Reshape", "/device:GPU:0") > 0);
}

/* An input [B, N, W, C] gives [B, N, OW, O]: each of its B N rows the 1-D
 * convolution of that row. */
static void test_conv1d_two_batch_dims(void)
{
    const int64_t B = 2, N = 3, W = 8, C = 2, K = 3, O = 4;
    float *x = rand_buf(B * N * W * C), *f = rand_buf(K * C * O);
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *ft = tn(f, 3, K, C, O, 0);
    vdev_tensor_t *y4 = vdev_conv1d(tn(x, 4, B, N, W, C), ft, 2, 1, "SAME");
    vdev_tensor_t *y3 = vdev_conv1d(tn(x, 3, B * N, W, C, 0), ft, 2, 1, "SAME");
    CHECK(y4 && y3);
    if (y4 && y3) {
        CHECK(vdev_tensor_ndim(y4) == 4 && vdev_tensor_dim(y4, 0) == B &&
              vdev_tensor_dim(y4, 1) == N && vdev_tensor_dim(y4, 2) == 4 &&
              vdev_tensor_dim(y4, 3) == O);
        float *a = host_of(y4), *b = host_of(y3);
        CHECK(vdev_tensor_numel(y4) == vdev_tensor_numel(y3) &&
              memcmp(a, b, (size_t)vdev_tensor_numel(y3) * sizeof(float)) == 0);
        free(a);
        free(b);
    }
    vdev_scope_end();
    free(x);
    free(f);
}

/* ---- 1-D pooling ---- */

static void test_pool1d_values(void)
{
    static const int cfg[][6] = {/* n, w, c, k, s, same */
                                 {2, 9, 3, 2, 2, 0}, {2, 9, 3, 3, 2, 1}, {1, 10, 2, 3, 1, 0},
                                 {2, 7, 2, 4, 3, 1}, {1, 5, 1, 1, 1, 0}, {0, 6, 2, 2, 2, 1}};
    for (size_t ci = 0; ci < sizeof cfg / sizeof *cfg; ci++) {
        int64_t n = cfg[ci][0], w = cfg[ci][1], c = cfg[ci][2], k = cfg[ci][3];
        int s = cfg[ci][4], same = cfg[ci][5];
        int64_t pl, ow = out_size(w, k, s, 1, same, &pl);
        float *x = rand_buf(n * w * c);
        for (int max = 0; max < 2; max++) {
            float *got[2] = {NULL, NULL};
            for (int di = 0; di < 2; di++) {
                CHECK_OK(vdev_device_push(di ? "GPU:0" : "CPU:0"));
                CHECK_OK(vdev_scope_begin());
                vdev_tensor_t *xt = tn(x, 3, n, w, c, 0);
                const char *pad = same ? "SAME" : "VALID";
                vdev_tensor_t *y = max ? vdev_max_pool1d(xt, (int)k, s, pad)
                                       : vdev_avg_pool1d(xt, (int)k, s, pad);
                CHECK(y != NULL);
                if (y) {
                    CHECK(vdev_tensor_ndim(y) == 3 && vdev_tensor_dim(y, 0) == n &&
                          vdev_tensor_dim(y, 1) == ow && vdev_tensor_dim(y, 2) == c);
                    got[di] = host_of(y);
                }
                vdev_scope_end();
                CHECK_OK(vdev_device_pop());
            }
            int64_t bad = 0;
            for (int64_t b = 0; got[0] && b < n; b++)
                for (int64_t q = 0; q < ow; q++)
                    for (int64_t ch = 0; ch < c; ch++) {
                        double acc = max ? -INFINITY : 0.0;
                        int cnt = 0;
                        for (int64_t u = 0; u < k; u++) {
                            int64_t i = q * s - pl + u;
                            if (i < 0 || i >= w)
                                continue;
                            double v = x[(b * w + i) * c + ch];
                            acc = max ? (v > acc ? v : acc) : acc + v;
                            cnt++;
                        }
                        if (!max)
                            acc /= cnt;
                        if (fabs(got[0][(b * ow + q) * c + ch] - acc) > 1e-6)
                            bad++;
                    }
            if (bad)
                check_fail(__FILE__, __LINE__, "%s pool case %zu: %lld off", max ? "max" : "avg",
                           ci, (long long)bad);
            CHECK(bad == 0);
            if (got[0] && got[1])
                CHECK(memcmp(got[0], got[1], (size_t)(n * ow * c) * sizeof(float)) == 0);
            free(got[0]);
            free(got[1]);
        }
        free(x);
    }
    CHECK(vdev_placement_op_count("MaxPool", "/device:GPU:0") > 0);
    CHECK(vdev_placement_op_count("AvgPool", "/device:GPU:0") > 0);
}

/* ---- separable convolution ---- */

struct sep {
    int64_t n, h, w, c, kh, kw, m, o; /* input, depthwise [kh,kw,c,m], pointwise [1,1,c m,o] */
    int s, d, same;
};

static double *ref_separable(const struct sep *g, const float *x, const float *df,
                             const float *pf, int64_t *oh_out, int64_t *ow_out, double **mag)
{
    int64_t pt, pl;
    int64_t oh = out_size(g->h, g->kh, g->s, g->d, g->same, &pt);
    int64_t ow = out_size(g->w, g->kw, g->s, g->d, g->same, &pl);
    int64_t cm = g->c * g->m, np = g->n * oh * ow;
    int64_t nmid = np * cm, ny = np * g->o;
    double *mid = calloc((size_t)(nmid ? nmid : 1), sizeof(double));
    double *midm = calloc((size_t)(nmid ? nmid : 1), sizeof(double));
    double *y = calloc((size_t)(ny ? ny : 1), sizeof(double));
    double *m = calloc((size_t)(ny ? ny : 1), sizeof(double));
    if (!mid || !midm || !y || !m)
        abort();
    for (int64_t b = 0; b < g->n; b++)
        for (int64_t r = 0; r < oh; r++)
            for (int64_t q = 0; q < ow; q++)
                for (int64_t c = 0; c < g->c; c++)
                    for (int64_t mm = 0; mm < g->m; mm++)
                        for (int64_t u = 0; u < g->kh; u++)
                            for (int64_t v = 0; v < g->kw; v++) {
                                int64_t i = r * g->s - pt + u * g->d, j = q * g->s - pl + v * g->d;
                                if (i < 0 || i >= g->h || j < 0 || j >= g->w)
                                    continue;
                                double t = (double)x[((b * g->h + i) * g->w + j) * g->c + c] *
                                           df[((u * g->kw + v) * g->c + c) * g->m + mm];
                                int64_t at = ((b * oh + r) * ow + q) * cm + c * g->m + mm;
                                mid[at] += t;
                                midm[at] += fabs(t);
                            }
    for (int64_t p = 0; p < np; p++)
        for (int64_t oc = 0; oc < g->o; oc++)
            for (int64_t k = 0; k < cm; k++) {
                y[p * g->o + oc] += mid[p * cm + k] * pf[k * g->o + oc];
                m[p * g->o + oc] += midm[p * cm + k] * fabs(pf[k * g->o + oc]);
            }
    free(mid);
    free(midm);
    *oh_out = oh;
    *ow_out = ow;
    *mag = m;
    return y;
}

static void test_separable_values(void)
{
    static const struct sep cases[] = {
        {2, 6, 7, 3, 3, 3, 2, 4, 1, 1, 1}, {1, 7, 7, 2, 3, 2, 1, 3, 2, 1, 0},
        {2, 8, 6, 2, 2, 2, 3, 2, 1, 2, 1}, {1, 5, 5, 3, 1, 1, 1, 2, 2, 1, 1},
        {0, 4, 4, 2, 3, 3, 1, 2, 1, 1, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const struct sep *g = &cases[ci];
        float *x = rand_buf(g->n * g->h * g->w * g->c), *df = rand_buf(g->kh * g->kw * g->c * g->m);
        float *pf = rand_buf(g->c * g->m * g->o);
        int64_t oh, ow;
        double *mag, *want = ref_separable(g, x, df, pf, &oh, &ow, &mag);
        float *got[2] = {NULL, NULL};
        for (int di = 0; di < 2; di++) {
            CHECK_OK(vdev_device_push(di ? "GPU:0" : "CPU:0"));
            CHECK_OK(vdev_scope_begin());
            vdev_tensor_t *y = vdev_separable_conv2d(
                tn(x, 4, g->n, g->h, g->w, g->c), tn(df, 4, g->kh, g->kw, g->c, g->m),
                tn(pf, 4, 1, 1, g->c * g->m, g->o), g->s, g->s, g->d, g->d,
                g->same ? "SAME" : "VALID");
            CHECK(y != NULL);
            if (y) {
                CHECK(vdev_tensor_ndim(y) == 4 && vdev_tensor_dim(y, 0) == g->n &&
                      vdev_tensor_dim(y, 1) == oh && vdev_tensor_dim(y, 2) == ow &&
                      vdev_tensor_dim(y, 3) == g->o);
                got[di] = host_of(y);
            } else {
                check_fail(__FILE__, __LINE__, "separable case %zu: %s", ci, vdev_last_error());
            }
            vdev_scope_end();
            CHECK_OK(vdev_device_pop());
        }
        check_results("separable", ci, got, want, mag, g->n * oh * ow * g->o,
                      g->kh * g->kw + g->c * g->m);
        free(want);
        free(mag);
        free(x);
        free(df);
        free(pf);
    }
    CHECK(vdev_placement_op_count("DepthwiseConv2dNative", "/device:GPU:0") > 0);
}

/* ---- gradients against finite differences ---- */

/* The op of a gradient case on its operands (2 or 3 of them). */
struct gcase {
    const char *what;
    int n_ops;
    int distinct; /* operand 0 of distinct values 0.05 apart (a max pool: no window's
                     maximum moves to another element under the differences' 0.01) */
    int nd[3];
    int64_t shape[3][4];
    vdev_tensor_t *(*apply)(vdev_tensor_t *const *ops);
};

static vdev_tensor_t *g_conv1d(vdev_tensor_t *const *t)
{
    return vdev_conv1d(t[0], t[1], 2, 1, "SAME");
}
static vdev_tensor_t *g_conv1d_dil(vdev_tensor_t *const *t)
{
    return vdev_conv1d(t[0], t[1], 1, 2, "VALID");
}
static vdev_tensor_t *g_max(vdev_tensor_t *const *t) { return vdev_max_pool1d(t[0], 3, 2, "SAME"); }
static vdev_tensor_t *g_avg(vdev_tensor_t *const *t) { return vdev_avg_pool1d(t[0], 3, 2, "SAME"); }
static vdev_tensor_t *g_sep(vdev_tensor_t *const *t)
{
    return vdev_separable_conv2d(t[0], t[1], t[2], 1, 1, 1, 1, "SAME");
}

static vdev_tensor_t *make(const struct gcase *c, int k, const float *d)
{
    const int64_t *s = c->shape[k];
    return tn(d, c->nd[k], s[0], s[1], s[2], s[3]);
}

static int64_t numel_of(const struct gcase *c, int k)
{
    int64_t n = 1;
    for (int d = 0; d < c->nd[k]; d++)
        n *= c->shape[k][d];
    return n;
}

/* L = sum(op(operands) r) in double on the host. */
static double loss_at(const struct gcase *c, float *const *vals, const float *r)
{
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *ops[3];
    for (int k = 0; k < c->n_ops; k++)
        ops[k] = make(c, k, vals[k]);
    vdev_tensor_t *y = c->apply(ops);
    float *v = host_of(y);
    double s = 0;
    for (int64_t i = 0; v && i < vdev_tensor_numel(y); i++)
        s += (double)v[i] * r[i];
    if (!v)
        check_fail(__FILE__, __LINE__, "%s failed: %s", c->what, vdev_last_error());
    free(v);
    vdev_scope_end();
    return s;
}

static void check_grad(const struct gcase *c, const char *dev)
{
    float *vals[3] = {NULL, NULL, NULL};
    for (int k = 0; k < c->n_ops; k++)
        vals[k] = rand_buf(numel_of(c, k));
    for (int64_t i = 0, n = numel_of(c, 0); c->distinct && i < n; i++)
        vals[0][i] = (float)((i * 37) % n) * 0.05f - (float)n * 0.025f; /* 37 prime to n */
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *vars[3];
    for (int k = 0; k < c->n_ops; k++)
        vars[k] = vdev_variable(make(c, k, vals[k]));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = c->apply(vars);
    CHECK(y != NULL);
    int64_t ny = y ? vdev_tensor_numel(y) : 0;
    float *r = rand_buf(ny);
    int64_t ys[4] = {0, 0, 0, 0};
    int ynd = y ? vdev_tensor_ndim(y) : 0;
    for (int d = 0; d < ynd; d++)
        ys[d] = vdev_tensor_dim(y, d);
    vdev_tensor_t *loss = vdev_sum_all(vdev_mul(y, vdev_tensor_from_host(r, ys, ynd, VDEV_F32)));
    vdev_tensor_t *grads[3] = {NULL, NULL, NULL};
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, c->n_ops, grads));
    vdev_tape_end(tape);
    const float h = 0.01f;
    for (int k = 0; k < c->n_ops; k++) {
        float *gv = host_of(grads[k]);
        CHECK(gv != NULL);
        int64_t bad = 0;
        for (int64_t i = 0; gv && i < numel_of(c, k); i++) {
            float keep = vals[k][i];
            vals[k][i] = keep + h;
            double lp = loss_at(c, vals, r);
            vals[k][i] = keep - h;
            double lm = loss_at(c, vals, r);
            vals[k][i] = keep;
            double fd = (lp - lm) / (2.0 * (double)h);
            if (fabs(fd - gv[i]) > 2e-3 + 1e-3 * fabs(fd) && bad++ < 3)
                check_fail(__FILE__, __LINE__, "%s on %s: d#%d[%lld] tape %.6g, finite "
                           "differences %.6g", c->what, dev, k, (long long)i, gv[i], fd);
        }
        CHECK(bad == 0);
        free(gv);
    }
    vdev_scope_end();
    for (int k = 0; k < c->n_ops; k++) {
        vdev_tensor_free(vars[k]);
        free(vals[k]);
    }
    free(r);
    CHECK_OK(vdev_device_pop());
}

static void test_grads(void)
{
    static const struct gcase cases[] = {
        {"conv1d, stride 2, SAME", 2, 0, {3, 3, 0}, {{2, 7, 2, 0}, {3, 2, 3, 0}}, g_conv1d},
        {"conv1d, dilation 2, VALID", 2, 0, {3, 3, 0}, {{2, 8, 2, 0}, {2, 2, 2, 0}}, g_conv1d_dil},
        {"max_pool1d", 1, 1, {3, 0, 0}, {{1, 7, 2, 0}}, g_max},
        {"avg_pool1d", 1, 0, {3, 0, 0}, {{2, 7, 2, 0}}, g_avg},
        {"separable_conv2d", 3, 0, {4, 4, 4}, {{1, 4, 4, 2}, {3, 3, 2, 2}, {1, 1, 4, 3}}, g_sep},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int di = 0; di < 2; di++)
            check_grad(&cases[i], di ? "GPU:0" : "CPU:0");
}

/* ---- refusals ---- */

static void test_errors(void)
{
    float d[64] = {0};
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *x3 = tn(d, 3, 2, 5, 3, 0), *f3 = tn(d, 3, 3, 3, 2, 0);
    /* conv1d: the views' 4-D shapes in Conv2D's words */
    CHECK_FAILS(vdev_conv1d(tn(d, 2, 5, 3, 0, 0), f3, 1, 1, "VALID"), VDEV_ERR_SHAPE,
                "Conv2D: input must be 4-dimensional[1,5,3]");
    CHECK_FAILS(vdev_conv1d(tn(d, 1, 5, 0, 0, 0), f3, 1, 1, "VALID"), VDEV_ERR_SHAPE,
                "ExpandDims: Tried to expand dim index -3 for tensor with 1 dimensions.");
    CHECK_FAILS(vdev_conv1d(x3, tn(d, 2, 3, 2, 0, 0), 1, 1, "VALID"), VDEV_ERR_SHAPE,
                "Conv2D: filter must be 4-dimensional: [1,3,2]");
    CHECK_FAILS(vdev_conv1d(x3, tn(d, 4, 2, 2, 3, 4), 1, 1, "VALID"), VDEV_ERR_SHAPE,
                "Conv2D: filter must be 4-dimensional: [1,2,2,3,4]");
    CHECK_FAILS(vdev_conv1d(x3, f3, 1, 1, "FULL"), VDEV_ERR_INVALID_ARG,
                "Conv2D: Value for attr 'padding' of \"FULL\" is not in the list of allowed "
                "values: \"SAME\", \"VALID\"");
    CHECK_FAILS(vdev_conv1d(x3, f3, 0, 1, "VALID"), VDEV_ERR_INVALID_ARG,
                "Conv2D: Stride must be > 0, but got 0");
    CHECK_FAILS(vdev_conv1d(x3, f3, 1, 0, "VALID"), VDEV_ERR_INVALID_ARG,
                "Conv2D: Dilated rates should be larger than 0.");
    CHECK_FAILS(vdev_conv1d(x3, tn(d, 3, 3, 2, 2, 0), 1, 1, "VALID"), VDEV_ERR_SHAPE,
                "Conv2D: input depth must be evenly divisible by filter depth: 3 vs 2");
    CHECK(vdev_conv1d(x3, tn(d, 3, 3, 1, 2, 0), 1, 1, "VALID") == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_UNSUPPORTED); /* grouped: Conv2D's refusal */
    CHECK_MSG("Conv2D: ");
    CHECK_FAILS(vdev_conv1d(x3, tn(d, 3, 7, 3, 2, 0), 1, 1, "VALID"), VDEV_ERR_SHAPE,
                "Conv2D: Computed output size would be negative: -1 [input_size: 5, "
                "effective_filter_size: 7, stride: 1]");
    /* the pools */
    CHECK_FAILS(vdev_max_pool1d(tn(d, 2, 5, 3, 0, 0), 2, 2, "VALID"), VDEV_ERR_SHAPE,
                "MaxPool: tensor_in must be 4-dimensional");
    CHECK_FAILS(vdev_avg_pool1d(tn(d, 4, 1, 2, 5, 3), 2, 2, "VALID"), VDEV_ERR_SHAPE,
                "AvgPool: tensor_in must be 4-dimensional");
    CHECK_FAILS(vdev_max_pool1d(tn(d, 0, 0, 0, 0, 0), 2, 2, "VALID"), VDEV_ERR_SHAPE,
                "ExpandDims: Tried to expand dim index 1 for tensor with 0 dimensions.");
    CHECK_FAILS(vdev_max_pool1d(x3, 2, 2, "full"), VDEV_ERR_INVALID_ARG,
                "MaxPool: Value for attr 'padding' of \"full\" is not in the list of allowed "
                "values: \"SAME\", \"VALID\"");
    CHECK_FAILS(vdev_avg_pool1d(x3, 0, 1, "VALID"), VDEV_ERR_INVALID_ARG,
                "AvgPool: Sliding window ksize for dimension 2 was zero.");
    /* the separable convolution: the pointwise filter first, then the ops' words */
    vdev_tensor_t *x4 = tn(d, 4, 1, 4, 4, 2), *df = tn(d, 4, 3, 3, 2, 2);
    CHECK_FAILS(vdev_separable_conv2d(x4, df, tn(d, 2, 3, 3, 0, 0), 1, 1, 1, 1, "SAME"),
                VDEV_ERR_SHAPE,
                "separable_conv2d: the pointwise filter must have rank 4 [1, 1, channels * "
                "multiplier, out], not [3,3]");
    CHECK_FAILS(vdev_separable_conv2d(x4, df, tn(d, 4, 3, 1, 4, 2), 1, 1, 1, 1, "SAME"),
                VDEV_ERR_SHAPE,
                "separable_conv2d: the pointwise filter must be 1 x 1 [1, 1, channels * "
                "multiplier, out], not [3,1,4,2]");
    CHECK_FAILS(vdev_separable_conv2d(x4, df, tn(d, 4, 1, 1, 4, 2), 1, 2, 1, 1, "SAME"),
                VDEV_ERR_INVALID_ARG,
                "DepthwiseConv2dNative: Current implementation only supports equal length "
                "strides in the row and column dimensions.");
    CHECK_FAILS(vdev_separable_conv2d(x4, df, tn(d, 4, 1, 1, 5, 2), 1, 1, 1, 1, "SAME"),
                VDEV_ERR_SHAPE,
                "Conv2D: input depth must be evenly divisible by filter depth: 4 vs 5");
    /* NULL operands: NULL, the error left as it was */
    vdev_clear_error();
    CHECK(vdev_conv1d(NULL, f3, 1, 1, "VALID") == NULL);
    CHECK(vdev_conv1d(x3, NULL, 1, 1, "VALID") == NULL);
    CHECK(vdev_max_pool1d(NULL, 2, 2, "VALID") == NULL);
    CHECK(vdev_avg_pool1d(NULL, 2, 2, "VALID") == NULL);
    CHECK(vdev_separable_conv2d(NULL, df, df, 1, 1, 1, 1, "VALID") == NULL);
    CHECK(vdev_separable_conv2d(x4, NULL, df, 1, 1, 1, 1, "VALID") == NULL);
    CHECK(vdev_separable_conv2d(x4, df, NULL, 1, 1, 1, 1, "VALID") == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_OK);
    /* a freed handle is named with the function */
    vdev_tensor_t *dead = tn(d, 3, 1, 4, 2, 0);
    vdev_tensor_free(dead);
    CHECK(vdev_conv1d(dead, f3, 1, 1, "VALID") == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_conv1d: ");
    CHECK(vdev_conv1d(x3, dead, 1, 1, "VALID") == NULL);
    CHECK_MSG("vdev_conv1d: ");
    CHECK(vdev_max_pool1d(dead, 2, 2, "VALID") == NULL);
    CHECK_MSG("vdev_max_pool1d: ");
    CHECK(vdev_avg_pool1d(dead, 2, 2, "VALID") == NULL);
    CHECK_MSG("vdev_avg_pool1d: ");
    CHECK(vdev_separable_conv2d(x4, df, dead, 1, 1, 1, 1, "VALID") == NULL);
    CHECK_MSG("vdev_separable_conv2d: ");
    vdev_scope_end();
    CHECK_NO_LEAK("CPU:0");
}

int main(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_conv1d_values();
    test_conv1d_two_batch_dims();
    test_pool1d_values();
    test_separable_values();
    test_grads();
    test_errors();
    CHECK_NO_LEAK("CPU:0");
    CHECK_NO_LEAK("GPU:0");
    vdev_shutdown();
    return check_done();
}
