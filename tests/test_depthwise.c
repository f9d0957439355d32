/* test_depthwise.c — depthwise 2-D convolution (vdev_depthwise_conv2d, the
 * ops DepthwiseConv2dNative, DepthwiseConv2dNativeBackpropInput and
 * DepthwiseConv2dNativeBackpropFilter) on the cpu backend and on a simulated
 * GPU: TensorFlow's documented example worked by hand; random shapes
 * (strides, SAME and VALID, dilations, channel multipliers 0 to 3, an empty
 * batch) against a reference written here another way (the input copied
 * into an explicitly zero-padded image first, then each output a plain sum
 * over the window), GPU:1 against CPU:0 bit for bit; the fast host kernels
 * of the three ops (conv_depthwise_fast.c) against the reference kernels,
 * within float summation's bound (the filter's gradient to the bit), on
 * those shapes and larger ones that the thread pool splits; every gradient
 * through the tape against central finite differences, and a tape asked for one
 * operand's gradient only; every refusal of the three ops with its exact
 * message (TensorFlow's words), sizes at the edges of int64 included; and
 * nothing leaked. (test_ops.c checks the kernels of all three ops on its
 * sweep of sizes against expectations written from the definition.) */
#define _GNU_SOURCE
#include "check.h"
#include "ops/impl.h"

#include <limits.h>
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

static vdev_tensor_t *z4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t s[4] = {a, b, c, d};
    return vdev_tensor_zeros(s, 4, VDEV_F32);
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
    return t && vdev_tensor_ndim(t) == 4 && vdev_tensor_dim(t, 0) == a &&
           vdev_tensor_dim(t, 1) == b && vdev_tensor_dim(t, 2) == c && vdev_tensor_dim(t, 3) == d;
}

#define REFUSED(call, code, msg) CHECK_ERR((call) ? VDEV_OK : vdev_last_status(), code, msg)

/* ---- TensorFlow's example ---- */

/* tf.nn.depthwise_conv2d's documented example: x = [[1,2],[3,4],[5,6]] as
 * [1,3,2,1], kernel [[1,2],[3,4]] as [2,1,1,2] (a 2x1 window, multiplier
 * 2), VALID, stride 1: [[[[10,14],[14,20]],[[18,26],[22,32]]]]. Then the
 * same with two input channels, the second x * 10 with its own filter
 * (negated): the channels stay apart, output channel c*2+m. */
static void test_by_hand(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    float xv[6] = {1, 2, 3, 4, 5, 6}, fv[4] = {1, 2, 3, 4};
    vdev_tensor_t *y = vdev_depthwise_conv2d(t4(xv, 1, 3, 2, 1), t4(fv, 2, 1, 1, 2), 1, 1, 1, 1,
                                             "VALID");
    CHECK(shape_is(y, 1, 2, 2, 2));
    float *v = host_of(y);
    static const float want[8] = {10, 14, 14, 20, 18, 26, 22, 32};
    CHECK(v && memcmp(v, want, sizeof want) == 0);
    free(v);
    float x2[12], f2[8];
    for (int i = 0; i < 6; i++) {
        x2[2 * i] = xv[i];
        x2[2 * i + 1] = 10 * xv[i];
    }
    for (int t = 0; t < 2; t++) /* filter[t, 0, c, m] */
        for (int m = 0; m < 2; m++) {
            f2[t * 4 + 0 + m] = fv[t * 2 + m];
            f2[t * 4 + 2 + m] = -fv[t * 2 + m];
        }
    y = vdev_depthwise_conv2d(t4(x2, 1, 3, 2, 2), t4(f2, 2, 1, 2, 2), 1, 1, 1, 1, "VALID");
    CHECK(shape_is(y, 1, 2, 2, 4));
    v = host_of(y);
    for (int p = 0; v && p < 4; p++) {
        CHECK(v[p * 4 + 0] == want[p * 2] && v[p * 4 + 1] == want[p * 2 + 1]);
        CHECK(v[p * 4 + 2] == -10 * want[p * 2] && v[p * 4 + 3] == -10 * want[p * 2 + 1]);
    }
    free(v);
    /* SAME, stride 2 over 3x2 with the 2x1 window: ceil(3/2) x ceil(2/2) =
     * 2x1, padding (2-1)*2+2-3 = 1 row, all after: rows 0-1 and 2-3 */
    y = vdev_depthwise_conv2d(t4(xv, 1, 3, 2, 1), t4(fv, 2, 1, 1, 2), 2, 2, 1, 1, "SAME");
    CHECK(shape_is(y, 1, 2, 1, 2));
    v = host_of(y);
    CHECK(v && v[0] == 10 && v[1] == 14 && v[2] == 5 && v[3] == 10);
    free(v);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* ---- random shapes against a reference written here ---- */

struct cfg {
    int64_t n, h, w, c, kh, kw, m, s, dh, dw;
    int same;
};

static const struct cfg CFGS[] = {
    {2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 0}, {2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1},
    {3, 9, 8, 2, 3, 3, 1, 2, 1, 1, 0}, {3, 9, 8, 2, 3, 3, 3, 2, 1, 1, 1},
    {1, 6, 6, 4, 2, 2, 3, 3, 1, 1, 1}, {2, 5, 5, 3, 5, 5, 2, 1, 1, 1, 1},
    {2, 4, 6, 5, 1, 1, 2, 1, 1, 1, 0}, {1, 3, 3, 2, 4, 5, 2, 1, 1, 1, 1},
    {2, 9, 8, 2, 3, 2, 2, 1, 2, 3, 0}, {2, 9, 8, 2, 3, 2, 2, 1, 2, 3, 1},
    {1, 11, 9, 3, 2, 3, 1, 2, 3, 2, 1}, {2, 5, 5, 3, 3, 3, 0, 1, 1, 1, 1},
    {0, 5, 5, 3, 3, 3, 2, 1, 1, 1, 1}, {1, 2, 2, 3, 3, 3, 2, 2, 1, 1, 0},
    {2, 20, 24, 16, 3, 3, 2, 1, 1, 1, 1},
};
#define N_CFGS (int)(sizeof CFGS / sizeof CFGS[0])

/* TensorFlow's output size and padding before, for one dimension. */
static void out_dim(int64_t in, int64_t k, int64_t d, int64_t s, int same, int64_t *out,
                    int64_t *before)
{
    int64_t e = (k - 1) * d + 1;
    *out = same ? (in + s - 1) / s : (in - e + s) / s;
    int64_t total = (*out - 1) * s + e - in;
    *before = same && total > 0 ? total / 2 : 0;
}

/* The expected output: x copied into an image padded with zeros on every
 * side by the window's full reach, then each output element a plain sum of
 * that image under the window's taps. */
static double *reference(const struct cfg *g, const float *x, const float *f, int64_t *oh,
                         int64_t *ow)
{
    int64_t pt, pl;
    out_dim(g->h, g->kh, g->dh, g->s, g->same, oh, &pt);
    out_dim(g->w, g->kw, g->dw, g->s, g->same, ow, &pl);
    int64_t eh = (g->kh - 1) * g->dh + 1, ew = (g->kw - 1) * g->dw + 1;
    int64_t ph = g->h + 2 * eh, pw = g->w + 2 * ew; /* x sits at (eh, ew) */
    double *img = calloc((size_t)(g->n * ph * pw * g->c + 1), sizeof(double));
    double *y = calloc((size_t)(g->n * *oh * *ow * g->c * g->m + 1), sizeof(double));
    if (!img || !y)
        abort();
    for (int64_t b = 0; b < g->n; b++)
        for (int64_t i = 0; i < g->h; i++)
            for (int64_t j = 0; j < g->w; j++)
                for (int64_t c = 0; c < g->c; c++)
                    img[((b * ph + i + eh) * pw + j + ew) * g->c + c] =
                        x[((b * g->h + i) * g->w + j) * g->c + c];
    for (int64_t b = 0; b < g->n; b++)
        for (int64_t r = 0; r < *oh; r++)
            for (int64_t q = 0; q < *ow; q++)
                for (int64_t c = 0; c < g->c; c++)
                    for (int64_t m = 0; m < g->m; m++) {
                        double s = 0.0;
                        for (int64_t u = 0; u < g->kh; u++)
                            for (int64_t v = 0; v < g->kw; v++) {
                                int64_t i = eh + r * g->s - pt + u * g->dh;
                                int64_t j = ew + q * g->s - pl + v * g->dw;
                                s += img[((b * ph + i) * pw + j) * g->c + c] *
                                     f[((u * g->kw + v) * g->c + c) * g->m + m];
                            }
                        y[(((b * *oh + r) * *ow + q) * g->c + c) * g->m + m] = s;
                    }
    free(img);
    return y;
}

/* Each case on CPU:0 and GPU:1 (both run the fast host kernel): the shape,
 * every element within float summation's bound of the double reference,
 * 4 k 2^-24 sum |x f| for the k taps of a window (sum |x f| the reference
 * on |x| and |f|), and the two devices' bits equal. */
static void test_against_reference(void)
{
    for (int t = 0; t < N_CFGS; t++) {
        const struct cfg *g = &CFGS[t];
        int64_t nx = g->n * g->h * g->w * g->c, nf = g->kh * g->kw * g->c * g->m, oh, ow;
        float *x = rand_buf(nx, -1, 1), *f = rand_buf(nf, -1, 1);
        double *ref = reference(g, x, f, &oh, &ow);
        float *ax = rand_buf(nx, 0, 0), *af = rand_buf(nf, 0, 0);
        for (int64_t i = 0; i < nx; i++)
            ax[i] = fabsf(x[i]);
        for (int64_t i = 0; i < nf; i++)
            af[i] = fabsf(f[i]);
        double *mag = reference(g, ax, af, &oh, &ow);
        double k = (double)(g->kh * g->kw);
        int64_t ny = g->n * oh * ow * g->c * g->m;
        float *out[2] = {NULL, NULL};
        CHECK_OK(vdev_scope_begin());
        for (int d = 0; d < 2; d++) {
            CHECK_OK(vdev_device_push(d ? "GPU:1" : "CPU:0"));
            vdev_tensor_t *y = vdev_depthwise_conv2d(
                t4(x, g->n, g->h, g->w, g->c), t4(f, g->kh, g->kw, g->c, g->m), (int)g->s,
                (int)g->s, (int)g->dh, (int)g->dw, g->same ? "SAME" : "VALID");
            CHECK(shape_is(y, g->n, oh, ow, g->c * g->m));
            CHECK(y && strstr(vdev_tensor_device(y), d ? "GPU:1" : "CPU:0"));
            out[d] = host_of(y);
            CHECK_OK(vdev_device_pop());
        }
        int64_t bad = 0;
        for (int64_t i = 0; out[0] && i < ny; i++)
            if (fabs((double)out[0][i] - ref[i]) > 4.0 * k * ldexp(1.0, -24) * mag[i] + 1e-30 &&
                bad++ < 3)
                check_fail(__FILE__, __LINE__, "case %d element %lld: %.9g, reference %.9g", t,
                           (long long)i, out[0][i], ref[i]);
        CHECK(out[0] && out[1] && bad == 0);
        CHECK(out[0] && out[1] && memcmp(out[0], out[1], (size_t)ny * 4) == 0);
        vdev_scope_end();
        free(out[0]);
        free(out[1]);
        free(ref);
        free(mag);
        free(ax);
        free(af);
        free(x);
        free(f);
    }
}

/* ---- the fast host kernels against the reference kernels ---- */

/* Kernel fn of op on host buffers, as the dispatcher would call it (the
 * shape rule first); the output in a new buffer, NULL where the shape rule
 * refuses. */
static float *run_direct(enum vdev_op op, const float *const *in, const int64_t (*shape)[4],
                         int n_in, const struct vdev_op_params *p,
                         void (*fn)(const struct vdev_kernel_args *), int64_t *n_out)
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
    memcpy(a.j, p->j, sizeof a.j);
    if (vdev_op_defs[op].shape(&a) != VDEV_OK)
        return NULL;
    *n_out = vdev_args_out_numel(&a, 0);
    float *out = malloc((size_t)(*n_out ? *n_out : 1) * sizeof(float));
    if (!out)
        abort();
    for (int64_t i = 0; i < *n_out; i++) /* a value no kernel writes: each must be written */
        out[i] = NAN;
    a.out[0] = out;
    fn(&a);
    return out;
}

static float *abs_of(const float *v, int64_t n)
{
    float *p = rand_buf(n, 0, 0);
    for (int64_t i = 0; i < n; i++)
        p[i] = fabsf(v[i]);
    return p;
}

/* Every case and a few larger ones (threaded: more than one part's work;
 * channels in several blocks; a multiplier above 256, the plain loops)
 * through each op's host kernel (the op table's) and its reference kernel:
 * the forward and the input's gradient, which sum in float, within 4 k
 * 2^-24 sum |terms| for their k terms (the window's taps, times M for the
 * input's gradient); the filter's gradient, which sums in double in the
 * reference's order, the reference's bits. */
static void test_fast_kernels(void)
{
    static const struct cfg BIG[] = {
        {4, 40, 36, 64, 3, 3, 1, 1, 1, 1, 1}, {2, 33, 35, 24, 5, 3, 3, 2, 1, 1, 1},
        {3, 30, 28, 300, 3, 3, 1, 1, 2, 2, 0}, {2, 17, 19, 20, 3, 2, 20, 1, 1, 1, 1},
        {2, 5, 4, 600, 3, 3, 2, 1, 1, 1, 1},   {1, 6, 5, 2, 2, 2, 300, 1, 1, 1, 1},
    };
    for (int t = 0; t < N_CFGS + (int)(sizeof BIG / sizeof BIG[0]); t++) {
        const struct cfg *g = t < N_CFGS ? &CFGS[t] : &BIG[t - N_CFGS];
        int64_t oh, ow, pt, pl;
        out_dim(g->h, g->kh, g->dh, g->s, g->same, &oh, &pt);
        out_dim(g->w, g->kw, g->dw, g->s, g->same, &ow, &pl);
        int64_t sh[3][4] = {{g->n, g->h, g->w, g->c}, {g->kh, g->kw, g->c, g->m},
                            {g->n, oh, ow, g->c * g->m}};
        int64_t nin[3];
        for (int k = 0; k < 3; k++)
            nin[k] = sh[k][0] * sh[k][1] * sh[k][2] * sh[k][3];
        float *v[3], *av[3];
        for (int k = 0; k < 3; k++) {
            v[k] = rand_buf(nin[k], -1, 1);
            av[k] = abs_of(v[k], nin[k]);
        }
        struct vdev_op_params p;
        memset(&p, 0, sizeof p);
        p.i[0] = p.i[1] = g->s;
        p.j[0] = g->dh;
        p.j[1] = g->dw;
        p.f[0] = g->same ? VDEV_PAD_SAME : VDEV_PAD_VALID;
        static const enum vdev_op OPS[3] = {VDEV_OP_DEPTHWISE_CONV2D,
                                            VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT,
                                            VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER};
        for (int o = 0; o < 3; o++) {
            const struct vdev_op_def *d = &vdev_op_defs[OPS[o]];
            int n_in = o ? 3 : 2;
            const float *in[3] = {v[0], v[1], v[2]}, *ain[3] = {av[0], av[1], av[2]};
            int64_t nr = 0, nf = 0, nm = 0;
            float *ref = run_direct(OPS[o], in, (const int64_t(*)[4])sh, n_in, &p, d->ref, &nr);
            float *mag = run_direct(OPS[o], ain, (const int64_t(*)[4])sh, n_in, &p, d->ref, &nm);
            float *fast = d->host ? run_direct(OPS[o], in, (const int64_t(*)[4])sh, n_in, &p,
                                               d->host, &nf)
                                  : NULL;
            CHECK(ref && mag && fast && nr == nf && nr == nm);
            double k = o == 1 ? (double)(g->kh * g->kw * g->m) : (double)(g->kh * g->kw);
            int64_t bad = 0;
            for (int64_t i = 0; ref && fast && mag && i < nr; i++) {
                double tol = o == 2 ? 0.0 : 4.0 * k * ldexp(1.0, -24) * mag[i] * 1.001 + 1e-30;
                if (!(fabs((double)fast[i] - ref[i]) <= tol) && bad++ < 3)
                    check_fail(__FILE__, __LINE__, "%s case %d element %lld: host %.9g, "
                               "reference %.9g", d->name, t, (long long)i, fast[i], ref[i]);
            }
            CHECK(bad == 0);
            free(ref);
            free(mag);
            free(fast);
        }
        for (int k = 0; k < 3; k++) {
            free(v[k]);
            free(av[k]);
        }
    }
}

/* ---- gradients against finite differences ---- */

static vdev_tensor_t *apply(const struct cfg *g, const vdev_tensor_t *x, const vdev_tensor_t *f)
{
    return vdev_depthwise_conv2d(x, f, (int)g->s, (int)g->s, (int)g->dh, (int)g->dw,
                                 g->same ? "SAME" : "VALID");
}

/* L = sum(y * r) on the host in double from the op's float output. */
static double loss_at(const struct cfg *g, const float *x, const float *f, const float *r)
{
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *y = apply(g, t4(x, g->n, g->h, g->w, g->c), t4(f, g->kh, g->kw, g->c, g->m));
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

/* Each element's tape gradient against (L(v + h) - L(v - h)) / 2h. The op
 * is linear in each operand, so the quotient is exact but for the float
 * rounding of y's terms: well inside 2e-3 + 1e-3 |g|. */
static void check_grad(const struct cfg *g, const char *dev)
{
    int64_t nx = g->n * g->h * g->w * g->c, nf = g->kh * g->kw * g->c * g->m;
    float *x = rand_buf(nx, -1, 1), *f = rand_buf(nf, -1, 1);
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *xv = vdev_variable(t4(x, g->n, g->h, g->w, g->c));
    vdev_tensor_t *fv = vdev_variable(t4(f, g->kh, g->kw, g->c, g->m));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = apply(g, xv, fv);
    int64_t ny = vdev_tensor_numel(y);
    float *r = rand_buf(ny, -1, 1);
    vdev_tensor_t *rt = t4(r, vdev_tensor_dim(y, 0), vdev_tensor_dim(y, 1), vdev_tensor_dim(y, 2),
                           vdev_tensor_dim(y, 3));
    vdev_tensor_t *loss = vdev_sum_all(vdev_mul(y, rt));
    vdev_tensor_t *vars[2] = {xv, fv}, *grads[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, 2, grads));
    vdev_tape_end(tape);
    CHECK(shape_is(grads[0], g->n, g->h, g->w, g->c));
    CHECK(shape_is(grads[1], g->kh, g->kw, g->c, g->m));
    CHECK(grads[0] && strstr(vdev_tensor_device(grads[0]), dev));
    float *gx = host_of(grads[0]), *gf = host_of(grads[1]);
    CHECK(gx && gf);
    const float h = 0.01f;
    for (int v = 0; v < 2 && gx && gf; v++) {
        float *p = v ? f : x, *gv = v ? gf : gx;
        int64_t n = v ? nf : nx, bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float keep = p[i];
            p[i] = keep + h;
            double lp = loss_at(g, x, f, r);
            p[i] = keep - h;
            double lm = loss_at(g, x, f, r);
            p[i] = keep;
            double fd = (lp - lm) / (2.0 * (double)h);
            if (fabs(fd - gv[i]) > 2e-3 + 1e-3 * fabs(fd) && bad++ < 3)
                check_fail(__FILE__, __LINE__,
                           "%s [%lld,%lld,%lld,%lld] k %lldx%lld m %lld s %lld d %lld,%lld %s: "
                           "d%s[%lld] tape %.6g, finite differences %.6g",
                           dev, (long long)g->n, (long long)g->h, (long long)g->w, (long long)g->c,
                           (long long)g->kh, (long long)g->kw, (long long)g->m, (long long)g->s,
                           (long long)g->dh, (long long)g->dw, g->same ? "SAME" : "VALID",
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
    for (int t = 0; t < N_CFGS - 1; t++) /* all but the large one */
        check_grad(&CFGS[t], dev);
}

/* A tape asked for the input's gradient alone runs BackpropInput only; the
 * filter's alone, BackpropFilter only (the placement summary counts them). */
static void test_one_gradient(void)
{
    CHECK_OK(vdev_device_push("GPU:2"));
    CHECK_OK(vdev_scope_begin());
    float *x = rand_buf(2 * 5 * 5 * 3, -1, 1), *f = rand_buf(3 * 3 * 3 * 2, -1, 1);
    vdev_tensor_t *xv = vdev_variable(t4(x, 2, 5, 5, 3)), *fv = vdev_variable(t4(f, 3, 3, 3, 2));
    const char *in_op = "DepthwiseConv2dNativeBackpropInput";
    const char *f_op = "DepthwiseConv2dNativeBackpropFilter";
    for (int which = 0; which < 2; which++) {
        uint64_t ni = vdev_placement_op_count(in_op, "/device:GPU:2");
        uint64_t nf = vdev_placement_op_count(f_op, "/device:GPU:2");
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *y = vdev_depthwise_conv2d(xv, fv, 1, 1, 1, 1, "SAME");
        vdev_tensor_t *gr = NULL, *var = which ? fv : xv;
        CHECK_OK(vdev_tape_gradient(tape, vdev_sum_all(y), &var, 1, &gr));
        vdev_tape_end(tape);
        CHECK(which ? shape_is(gr, 3, 3, 3, 2) : shape_is(gr, 2, 5, 5, 3));
        CHECK(vdev_placement_op_count(in_op, "/device:GPU:2") == ni + (which ? 0u : 1u));
        CHECK(vdev_placement_op_count(f_op, "/device:GPU:2") == nf + (which ? 1u : 0u));
    }
    vdev_scope_end();
    vdev_tensor_free(xv);
    vdev_tensor_free(fv);
    free(x);
    free(f);
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
    REFUSED(vdev_depthwise_conv2d(x3, f, 1, 1, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: input must be 4-dimensional[4,4,3]");
    REFUSED(vdev_depthwise_conv2d(x, m, 1, 1, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: filter must be 4-dimensional: [4,3]");
    REFUSED(vdev_depthwise_conv2d(x, t4(buf, 3, 3, 2, 2), 1, 1, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: input and filter must have the same depth: 3 vs 2");
    REFUSED(vdev_depthwise_conv2d(t4(buf, 1, 4, 4, 6), f, 1, 1, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: input and filter must have the same depth: 6 vs 3");
    REFUSED(vdev_depthwise_conv2d(x, f, 1, 2, 1, 1, "SAME"), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: Current implementation only supports equal length strides "
            "in the row and column dimensions.");
    REFUSED(vdev_depthwise_conv2d(x, f, 0, 0, 1, 1, "SAME"), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: Stride must be > 0, but got 0");
    REFUSED(vdev_depthwise_conv2d(x, f, -2, -2, 1, 1, "VALID"), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: Stride must be > 0, but got -2");
    REFUSED(vdev_depthwise_conv2d(x, f, 1, 1, 0, 1, "SAME"), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: Dilated rates should be larger than 0.");
    REFUSED(vdev_depthwise_conv2d(x, f, 1, 1, 2, -1, "SAME"), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: Dilated rates should be larger than 0.");
    REFUSED(vdev_depthwise_conv2d(x, f, 1, 1, 1, 1, "FULL"), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: Value for attr 'padding' of \"FULL\" is not in the list of "
            "allowed values: \"SAME\", \"VALID\"");
    REFUSED(vdev_depthwise_conv2d(x, f, 1, 1, 1, 1, "valid"), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: Value for attr 'padding' of \"valid\" is not in the list of "
            "allowed values: \"SAME\", \"VALID\"");
    REFUSED(vdev_depthwise_conv2d(x, f, 1, 1, 1, 1, NULL), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: padding is NULL (\"SAME\" or \"VALID\")");
    REFUSED(vdev_depthwise_conv2d(x, t4(buf, 6, 3, 3, 2), 1, 1, 1, 1, "VALID"), VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: Computed output size would be negative: -1 [input_size: 4, "
            "effective_filter_size: 6, stride: 1]");
    REFUSED(vdev_depthwise_conv2d(x, f, 1, 1, 1, 3, "VALID"), VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: Computed output size would be negative: -2 [input_size: 4, "
            "effective_filter_size: 7, stride: 1]");
    REFUSED(vdev_depthwise_conv2d(xi, f, 1, 1, 1, 1, "SAME"), VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: input #0 (shape [1,4,4,3]) is int32, expected float");
    /* sizes past int64: C * M (empty tensors), the dilated window */
    REFUSED(vdev_depthwise_conv2d(z4(0, 4, 4, 1LL << 62), z4(0, 1, 1LL << 62, 4), 1, 1, 1, 1,
                                  "SAME"),
            VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: the output depth, 4611686018427387904 * 4, does not fit an "
            "int64");
    REFUSED(vdev_depthwise_conv2d(t4(buf, 1, 4, 4, 1), z4(1LL << 59, 1, 1, 0), 1, 1, 32, 1,
                                  "SAME"),
            VDEV_ERR_SHAPE,
            "DepthwiseConv2dNative: the dilated filter's size, (576460752303423488 - 1) * 32 + "
            "1, does not fit an int64");
    /* an empty batch of INT64_MAX rows, INT_MAX strides */
    CHECK(shape_is(vdev_depthwise_conv2d(z4(0, INT64_MAX, 1, 2), z4(1, 1, 2, 3), INT_MAX,
                                         INT_MAX, 1, 1, "SAME"),
                   0, 4294967299LL, 1, 6));
    /* the op's parameters straight: a padding code, a negative dilation */
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = p.i[1] = 1;
    p.f[0] = 2;
    const vdev_tensor_t *in2[2] = {x, f};
    REFUSED(vdev_op_run(VDEV_OP_DEPTHWISE_CONV2D, in2, 2, &p), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: padding code 2 is neither VALID (0) nor SAME (1)");
    p.f[0] = VDEV_PAD_VALID;
    p.j[1] = -1;
    REFUSED(vdev_op_run(VDEV_OP_DEPTHWISE_CONV2D, in2, 2, &p), VDEV_ERR_INVALID_ARG,
            "DepthwiseConv2dNative: Dilated rates should be larger than 0.");
    p.j[1] = 0; /* 0 reads as 1: an op made without dilations */
    CHECK(shape_is(vdev_op_run(VDEV_OP_DEPTHWISE_CONV2D, in2, 2, &p), 1, 2, 2, 6));
    /* the gradient ops, TensorFlow's checks in its order, each after its label */
    vdev_tensor_t *dy = t4(buf, 1, 2, 2, 6);
    const char *in_l = "DepthwiseConv2DBackpropInput", *f_l = "DepthwiseConv2DBackpropFilter";
    for (int k = 0; k < 2; k++) {
        enum vdev_op op = k ? VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_FILTER
                            : VDEV_OP_DEPTHWISE_CONV2D_BACKPROP_INPUT;
        const char *l = k ? f_l : in_l;
        char want[200];
        const vdev_tensor_t *ok[3] = {x, f, dy};
        CHECK(shape_is(vdev_op_run(op, ok, 3, &p), k ? 3 : 1, k ? 3 : 4, k ? 3 : 4, k ? 2 : 3));
        const vdev_tensor_t *b1[3] = {x3, f, dy}, *b2[3] = {x, m, dy}, *b3[3] = {x, f, x3};
        const vdev_tensor_t *b4[3] = {x, f, t4(buf, 2, 2, 2, 6)};
        const vdev_tensor_t *b5[3] = {x, t4(buf, 3, 3, 2, 3), dy};
        const vdev_tensor_t *b6[3] = {x, f, t4(buf, 1, 2, 2, 5)};
        const vdev_tensor_t *b7[3] = {x, f, t4(buf, 1, 3, 2, 6)};
        const vdev_tensor_t *b8[3] = {x, f, t4(buf, 1, 2, 1, 6)};
        snprintf(want, sizeof want, "%s: input must be 4-dimensional", l);
        REFUSED(vdev_op_run(op, b1, 3, &p), VDEV_ERR_SHAPE, want);
        snprintf(want, sizeof want, "%s: filter must be 4-dimensional", l);
        REFUSED(vdev_op_run(op, b2, 3, &p), VDEV_ERR_SHAPE, want);
        snprintf(want, sizeof want, "%s: out_backprop must be 4-dimensional", l);
        REFUSED(vdev_op_run(op, b3, 3, &p), VDEV_ERR_SHAPE, want);
        snprintf(want, sizeof want, "%s: input and out_backprop must have the same batch size", l);
        REFUSED(vdev_op_run(op, b4, 3, &p), VDEV_ERR_SHAPE, want);
        snprintf(want, sizeof want, "%s: input and filter must have the same in_depth", l);
        REFUSED(vdev_op_run(op, b5, 3, &p), VDEV_ERR_SHAPE, want);
        snprintf(want, sizeof want, "%s: depth_multiplier * in_depth not equal to out_depth", l);
        REFUSED(vdev_op_run(op, b6, 3, &p), VDEV_ERR_SHAPE, want);
        snprintf(want, sizeof want,
                 "%s: Number of rows of out_backprop doesn't match computed: actual = 3, "
                 "computed = 2", l);
        REFUSED(vdev_op_run(op, b7, 3, &p), VDEV_ERR_SHAPE, want);
        snprintf(want, sizeof want,
                 "%s: Number of cols of out_backprop doesn't match computed: actual = 1, "
                 "computed = 2", l);
        REFUSED(vdev_op_run(op, b8, 3, &p), VDEV_ERR_SHAPE, want);
        struct vdev_op_params q = p;
        q.i[1] = 2;
        snprintf(want, sizeof want,
                 "%s: Current implementation only supports equal length strides in the row and "
                 "column dimensions.", vdev_op_defs[op].name);
        REFUSED(vdev_op_run(op, ok, 3, &q), VDEV_ERR_INVALID_ARG, want);
        q.i[0] = q.i[1] = 0;
        snprintf(want, sizeof want, "%s: Stride must be > 0, but got 0", vdev_op_defs[op].name);
        REFUSED(vdev_op_run(op, ok, 3, &q), VDEV_ERR_INVALID_ARG, want);
    }
    /* NULL in, NULL out, the error kept */
    vdev_error(VDEV_ERR_OOM, "earlier");
    CHECK(!vdev_depthwise_conv2d(NULL, f, 1, 1, 1, 1, "SAME"));
    CHECK(!vdev_depthwise_conv2d(x, NULL, 1, 1, 1, 1, "SAME"));
    CHECK_STR(vdev_last_error(), "earlier");
    vdev_scope_end();
}

int main(void)
{
    rng_state = 0x3c6ef372fe94f82bull;
    check_fresh("3x16GiB");
    CHECK_OK(vdev_init());
    test_by_hand("CPU:0");
    test_by_hand("GPU:1");
    test_against_reference();
    test_fast_kernels();
    test_grads("CPU:0");
    test_grads("GPU:1");
    test_one_gradient();
    test_errors();
    CHECK_NO_LEAK("CPU:0");
    CHECK_NO_LEAK("GPU:1");
    CHECK_NO_LEAK("GPU:2");
    vdev_shutdown();
    return check_done();
}
