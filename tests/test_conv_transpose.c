/* test_conv_transpose.c — the transposed 2-D convolution,
 * vdev_conv2d_transpose (TensorFlow's tf.nn.conv2d_transpose, the op
 * Conv2DBackpropInput), on the cpu backend and a simulated GPU: values
 * against a direct scatter loop written here (each input pixel times each
 * filter tap added onto the output pixel the tap lands on), over strides 1
 * and 2, both paddings, every output size that gives back the input's
 * (SAME's 7 and 8 rows from 4 at stride 2, VALID's extra rows of zeros),
 * dilations, 1x1 filters, an empty batch and an empty input under an output
 * of zeros; the [rows, cols] form of output_shape; GPU:1 against CPU:0 bit
 * for bit; both gradients through the tape against central finite
 * differences, each alone too; and every refusal with TensorFlow's exact
 * words. test_ops.c runs the op's kernels against their own expectation
 * on every backend, and test_cuda_emu the CUDA kernel. */
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

static float *rand_buf(int64_t n)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!p)
        abort();
    for (int64_t i = 0; i < n; i++)
        p[i] = rng_uniform(-1, 1);
    return p;
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

/* One configuration: input [n,h,w,o], filter [kh,kw,c,o], output
 * [n,oh,ow,c], strides, dilations, padding. */
struct cfg {
    int64_t n, h, w, o, kh, kw, c, oh, ow;
    int sh, sw, dh, dw, same;
};

/* The reference: y[b, r sh - pt + u dh, q sw - pl + v dw, ci] +=
 * x[b, r, q, oc] f[u, v, ci, oc], pt and pl Conv2D's padding before on the
 * output's size (half of what SAME needs, rounded down; 0 for VALID). */
static double *scatter(const struct cfg *g, const float *x, const float *f)
{
    int64_t ny = g->n * g->oh * g->ow * g->c;
    double *y = calloc((size_t)(ny ? ny : 1), sizeof(double));
    if (!y)
        abort();
    int64_t kh = (g->kh - 1) * g->dh + 1, kw = (g->kw - 1) * g->dw + 1;
    int64_t th = (g->h - 1) * g->sh + kh - g->oh, tw = (g->w - 1) * g->sw + kw - g->ow;
    int64_t pt = g->same && th > 0 ? th / 2 : 0, pl = g->same && tw > 0 ? tw / 2 : 0;
    for (int64_t b = 0; b < g->n; b++)
        for (int64_t r = 0; r < g->h; r++)
            for (int64_t q = 0; q < g->w; q++)
                for (int64_t u = 0; u < g->kh; u++)
                    for (int64_t v = 0; v < g->kw; v++) {
                        int64_t i = r * g->sh - pt + u * g->dh, j = q * g->sw - pl + v * g->dw;
                        if (i < 0 || j < 0 || i >= g->oh || j >= g->ow)
                            continue;
                        for (int64_t ci = 0; ci < g->c; ci++)
                            for (int64_t oc = 0; oc < g->o; oc++)
                                y[((b * g->oh + i) * g->ow + j) * g->c + ci] +=
                                    (double)x[((b * g->h + r) * g->w + q) * g->o + oc] *
                                    f[((u * g->kw + v) * g->c + ci) * g->o + oc];
                    }
    return y;
}

static vdev_tensor_t *apply(const struct cfg *g, const vdev_tensor_t *x, const vdev_tensor_t *f)
{
    int64_t os[4] = {g->n, g->oh, g->ow, g->c};
    return vdev_conv2d_transpose(x, f, os, 4, g->sh, g->sw, g->dh, g->dw,
                                 g->same ? "SAME" : "VALID");
}

static const struct cfg CFGS[] = {
    /* stride 1, both paddings; SAME's output is the input's size */
    {2, 5, 6, 3, 3, 2, 4, 5, 6, 1, 1, 1, 1, 1},
    {2, 5, 6, 3, 3, 2, 4, 7, 7, 1, 1, 1, 1, 0},
    /* stride 2, SAME: 8 rows or 7 from 4, 7 columns or 8 from 4 */
    {2, 4, 4, 3, 3, 3, 2, 8, 7, 2, 2, 1, 1, 1},
    {1, 4, 4, 3, 3, 3, 2, 7, 8, 2, 2, 1, 1, 1},
    /* stride 2, VALID: (h - 1) s + k rows, and one more (zeros there) */
    {2, 3, 4, 2, 3, 2, 3, 7, 8, 2, 2, 1, 1, 0},
    {1, 3, 4, 2, 3, 2, 3, 8, 9, 2, 2, 1, 1, 0},
    /* strides 3 x 1, a filter larger than the stride */
    {1, 3, 5, 2, 4, 2, 3, 9, 5, 3, 1, 1, 1, 1},
    /* dilated taps: 2x3 at stride 1 (SAME, VALID), 2x2 at stride 2 */
    {2, 6, 7, 2, 3, 2, 3, 6, 7, 1, 1, 2, 3, 1},
    {1, 4, 5, 2, 3, 2, 3, 8, 8, 1, 1, 2, 3, 0},
    {1, 4, 4, 3, 2, 3, 2, 8, 8, 2, 2, 2, 2, 1},
    /* 1x1 filters: stride 1 (the fast kernel's one product), stride 2 */
    {2, 5, 6, 4, 1, 1, 3, 5, 6, 1, 1, 1, 1, 0},
    {2, 3, 3, 4, 1, 1, 3, 6, 5, 2, 2, 1, 1, 1},
    /* larger: several of the fast kernel's blocks' worth of pixels */
    {3, 17, 15, 8, 3, 3, 6, 34, 30, 2, 2, 1, 1, 1},
    /* an empty batch; an empty input under a 1x1 output of zeros */
    {0, 4, 4, 2, 3, 3, 2, 8, 8, 2, 2, 1, 1, 1},
    {2, 0, 0, 2, 3, 3, 2, 1, 1, 2, 2, 1, 1, 0},
};

/* ---- values ---- */

static void test_values(void)
{
    for (size_t t = 0; t < sizeof CFGS / sizeof CFGS[0]; t++) {
        const struct cfg *g = &CFGS[t];
        int64_t nx = g->n * g->h * g->w * g->o, nf = g->kh * g->kw * g->c * g->o;
        int64_t ny = g->n * g->oh * g->ow * g->c;
        float *x = rand_buf(nx), *f = rand_buf(nf), *got[2] = {NULL, NULL};
        double *want = scatter(g, x, f);
        static const char *const DEV[2] = {"CPU:0", "GPU:1"};
        for (int d = 0; d < 2; d++) {
            CHECK_OK(vdev_device_push(DEV[d]));
            CHECK_OK(vdev_scope_begin());
            vdev_tensor_t *y = apply(g, t4(x, g->n, g->h, g->w, g->o),
                                     t4(f, g->kh, g->kw, g->c, g->o));
            if (!y)
                check_fail(__FILE__, __LINE__, "config %zu on %s: %s", t, DEV[d],
                           vdev_last_error());
            CHECK(y && vdev_tensor_ndim(y) == 4 && vdev_tensor_dim(y, 0) == g->n &&
                  vdev_tensor_dim(y, 1) == g->oh && vdev_tensor_dim(y, 2) == g->ow &&
                  vdev_tensor_dim(y, 3) == g->c);
            CHECK(!y || !strcmp(vdev_tensor_device(y), d ? "/device:GPU:1" : "/device:CPU:0"));
            got[d] = host_of(y);
            /* the [rows, cols] form: the batch the input's, the channels the filter's */
            int64_t hw[2] = {g->oh, g->ow};
            float *two = host_of(vdev_conv2d_transpose(
                t4(x, g->n, g->h, g->w, g->o), t4(f, g->kh, g->kw, g->c, g->o), hw, 2, g->sh,
                g->sw, g->dh, g->dw, g->same ? "SAME" : "VALID"));
            CHECK(two && got[d] && !memcmp(two, got[d], (size_t)ny * sizeof(float)));
            free(two);
            vdev_scope_end();
            CHECK_OK(vdev_device_pop());
        }
        int64_t bad = 0;
        for (int64_t i = 0; got[0] && i < ny; i++)
            if (fabs(got[0][i] - want[i]) > 1e-5 + 1e-5 * fabs(want[i]) && bad++ < 3)
                check_fail(__FILE__, __LINE__, "config %zu: y[%lld] = %.7g, expected %.7g", t,
                           (long long)i, got[0][i], want[i]);
        CHECK(got[0] && bad == 0);
        /* the simulated GPU runs the host's kernel: the same bits */
        CHECK(got[0] && got[1] && !memcmp(got[0], got[1], (size_t)ny * sizeof(float)));
        free(got[0]);
        free(got[1]);
        free(want);
        free(x);
        free(f);
    }
    CHECK(vdev_placement_op_count("Conv2DTranspose", "/device:GPU:1") > 0);
    CHECK(vdev_placement_op_count("Conv2DTranspose", "/device:CPU:0") > 0);
}

/* ---- gradients against finite differences ---- */

/* L = sum(y r) on the host in double from the op's float output. */
static double loss_at(const struct cfg *g, const float *x, const float *f, const float *r)
{
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *y = apply(g, t4(x, g->n, g->h, g->w, g->o), t4(f, g->kh, g->kw, g->c, g->o));
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

/* Each element's tape gradient against (L(v + h) - L(v - h)) / 2h, for the
 * operands `which` asks for (bit 0 the input, bit 1 the filter; the other
 * one a constant). The op is linear in each operand, so the quotient is
 * exact but for the loss's float rounding, well inside 2e-3 + 1e-3 |g|. */
static void check_grad(const struct cfg *g, const char *dev, unsigned which)
{
    int64_t nx = g->n * g->h * g->w * g->o, nf = g->kh * g->kw * g->c * g->o;
    int64_t ny = g->n * g->oh * g->ow * g->c;
    float *x = rand_buf(nx), *f = rand_buf(nf), *r = rand_buf(ny);
    CHECK_OK(vdev_device_push(dev));
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *xt = t4(x, g->n, g->h, g->w, g->o), *ft = t4(f, g->kh, g->kw, g->c, g->o);
    vdev_tensor_t *xv = which & 1 ? vdev_variable(xt) : xt;
    vdev_tensor_t *fv = which & 2 ? vdev_variable(ft) : ft;
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = apply(g, xv, fv);
    vdev_tensor_t *loss = vdev_sum_all(vdev_mul(y, t4(r, g->n, g->oh, g->ow, g->c)));
    vdev_tensor_t *vars[2], *grads[2] = {NULL, NULL};
    int nv = 0;
    if (which & 1)
        vars[nv++] = xv;
    if (which & 2)
        vars[nv++] = fv;
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, nv, grads));
    vdev_tape_end(tape);
    const float h = 0.01f;
    for (int k = 0; k < nv; k++) {
        int filt = vars[k] == fv;
        float *p = filt ? f : x, *gv = host_of(grads[k]);
        int64_t n = filt ? nf : nx, bad = 0;
        CHECK(gv != NULL);
        for (int64_t i = 0; gv && i < n; i++) {
            float keep = p[i];
            p[i] = keep + h;
            double lp = loss_at(g, x, f, r);
            p[i] = keep - h;
            double lm = loss_at(g, x, f, r);
            p[i] = keep;
            double fd = (lp - lm) / (2.0 * (double)h);
            if (fabs(fd - gv[i]) > 2e-3 + 1e-3 * fabs(fd) && bad++ < 3)
                check_fail(__FILE__, __LINE__,
                           "%s [%lld,%lld,%lld,%lld] k %lldx%lld s %d,%d d %d,%d %s: d%s[%lld] "
                           "tape %.6g, finite differences %.6g",
                           dev, (long long)g->n, (long long)g->h, (long long)g->w,
                           (long long)g->o, (long long)g->kh, (long long)g->kw, g->sh, g->sw,
                           g->dh, g->dw, g->same ? "SAME" : "VALID", filt ? "f" : "x",
                           (long long)i, gv[i], fd);
        }
        CHECK(bad == 0);
        free(gv);
    }
    vdev_scope_end();
    if (which & 1)
        vdev_tensor_free(xv);
    if (which & 2)
        vdev_tensor_free(fv);
    CHECK_OK(vdev_device_pop());
    free(x);
    free(f);
    free(r);
}

static void test_grads(const char *dev)
{
    /* the small configurations: both paddings, strides 1, 2 and 3x1,
     * SAME's odd output, VALID's extra row, dilations, 1x1 at stride 2 */
    static const int PICK[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11};
    for (size_t t = 0; t < sizeof PICK / sizeof PICK[0]; t++)
        check_grad(&CFGS[PICK[t]], dev, 3);
    check_grad(&CFGS[3], dev, 1); /* the input alone */
    check_grad(&CFGS[9], dev, 2); /* the filter alone */
}

/* ---- refusals ---- */

static void test_errors(void)
{
    CHECK_OK(vdev_scope_begin());
    float buf[512] = {0};
    /* input [1,4,4,2], filter [3,3,3,2]: output [1,8,8,3] at stride 2, SAME */
    vdev_tensor_t *x = t4(buf, 1, 4, 4, 2), *f = t4(buf, 3, 3, 3, 2);
    int64_t os[4] = {1, 8, 8, 3};
    CHECK(vdev_conv2d_transpose(x, f, os, 4, 2, 2, 1, 1, "SAME") != NULL);
#define T(xx, ff, shape, n, s, d, pad) vdev_conv2d_transpose(xx, ff, shape, n, s, s, d, d, pad)
#define OS(...) ((const int64_t[]){__VA_ARGS__})
    /* attributes, as TensorFlow's op and kernel check them */
    CHECK_FAILS(T(x, f, os, 4, 2, 1, "FULL"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Value for attr 'padding' of \"FULL\" is not in the list of "
                "allowed values: \"SAME\", \"VALID\", \"EXPLICIT\"");
    CHECK_FAILS(T(x, f, os, 4, 2, 1, NULL), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: padding is NULL (\"SAME\" or \"VALID\")");
    CHECK_FAILS(T(x, f, os, 4, 2, 1, "EXPLICIT"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: explicit_paddings attribute must contain 8 values, but "
                "got: 0");
    CHECK_FAILS(T(x, f, os, 4, 0, 1, "EXPLICIT"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Row and column strides should be larger than 0.");
    CHECK_FAILS(vdev_conv2d_transpose(x, f, os, 4, 2, 0, 1, 1, "SAME"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Row and column strides should be larger than 0.");
    CHECK_FAILS(vdev_conv2d_transpose(x, f, os, 4, -1, 2, 1, 1, "SAME"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Row and column strides should be larger than 0.");
    CHECK_FAILS(vdev_conv2d_transpose(x, f, os, 4, 2, 2, 1, 0, "SAME"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Dilated rates should be larger than 0.");
    /* output_shape: TensorFlow's input_sizes */
    CHECK_FAILS(T(x, f, os, 3, 2, 1, "SAME"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but "
                "got: 3");
    CHECK_FAILS(T(x, f, NULL, 4, 2, 1, "SAME"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: output_shape is NULL and has 4 values");
    CHECK_FAILS(T(x, f, OS(-1, 8), 2, 2, 1, "SAME"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: elements of input_sizes must be >= 0, not -1x8");
    CHECK_FAILS(T(x, f, OS(1, 8, -8, 3), 4, 2, 1, "SAME"), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Dimension -8 must be >= 0");
    /* the shapes, in the order of TensorFlow's ConvBackpropComputeDimensionsV2 */
    int64_t s3[3] = {3, 3, 3};
    vdev_tensor_t *f3 = vdev_tensor_from_host(buf, s3, 3, VDEV_F32);
    vdev_tensor_t *x3 = vdev_tensor_from_host(buf, s3, 3, VDEV_F32);
    CHECK_FAILS(T(x, f3, os, 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: filter must be 4-dimensional");
    CHECK_FAILS(T(x3, f, os, 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: out_backprop must be 4-dimensional");
    CHECK_FAILS(T(x, f, OS(2, 8, 8, 3), 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: input and out_backprop must have the same batch size. "
                "Input batch: 2, outbackprop batch: 1, batch_dim: 0");
    CHECK_FAILS(T(x, t4(buf, 3, 3, 0, 2), os, 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: filter depth must be strictly greated than zero");
    CHECK_FAILS(T(x, f, OS(1, 8, 8, 4), 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: input depth must be evenly divisible by filter depth");
    CHECK_FAILS(T(x, t4(buf, 3, 3, 3, 3), os, 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: filter and out_backprop must have the same out_depth");
    CHECK_FAILS(T(x, f, OS(1, 8, 8, 6), 4, 2, 1, "SAME"), VDEV_ERR_UNSUPPORTED,
                "Conv2DSlowBackpropInput: grouped convolution (input depth 6, filter depth 3) "
                "is not supported: the filter's depth must be the output's");
    CHECK_FAILS(T(x, t4(buf, 0, 3, 3, 2), os, 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: filter [0,3,3,2] has a window of size 0");
    CHECK_FAILS(T(x, f, OS(1, 9, 8, 3), 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: Size of out_backprop doesn't match computed: actual = "
                "4, computed = 5 spatial_dim: 1 input: 9 filter: 3 output: 4 stride: 2 "
                "dilation: 1");
    CHECK_FAILS(T(x, f, OS(1, 8, 6, 3), 4, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: Size of out_backprop doesn't match computed: actual = "
                "4, computed = 3 spatial_dim: 2 input: 6 filter: 3 output: 4 stride: 2 "
                "dilation: 1");
    CHECK_FAILS(vdev_conv2d_transpose(x, f, os, 4, 2, 2, 2, 1, "VALID"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: Size of out_backprop doesn't match computed: actual = "
                "4, computed = 2 spatial_dim: 1 input: 8 filter: 3 output: 4 stride: 2 "
                "dilation: 2");
    CHECK_FAILS(T(x, f, OS(1, 1, 8, 3), 4, 1, 1, "VALID"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: Computed output size would be negative: -1 "
                "[input_size: 1, effective_filter_size: 3, stride: 1]");
    /* a filter of 2^40 rows (empty: no input channel) at row dilation INT_MAX:
     * (2^40 - 1) (2^31 - 1) + 1 is past INT64_MAX */
    CHECK_FAILS(vdev_conv2d_transpose(t4(buf, 1, 4, 4, 0), t4(buf, 1LL << 40, 1, 3, 0),
                                      OS(1, 8, 8, 3), 4, 1, 1, INT_MAX, 1, "SAME"),
                VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: the dilated filter's size, (1099511627776 - 1) * "
                "2147483647 + 1, does not fit an int64");
    /* the [rows, cols] form takes the batch and channels, then the checks run */
    CHECK_FAILS(T(x, f, OS(9, 8), 2, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: Size of out_backprop doesn't match computed: actual = "
                "4, computed = 5 spatial_dim: 1 input: 9 filter: 3 output: 4 stride: 2 "
                "dilation: 1");
    CHECK_FAILS(T(x3, f3, OS(8, 8), 2, 2, 1, "SAME"), VDEV_ERR_SHAPE,
                "Conv2DSlowBackpropInput: filter must be 4-dimensional");
    /* int32 operands */
    vdev_tensor_t *xi = vdev_tensor_from_host(buf, (int64_t[4]){1, 4, 4, 2}, 4, VDEV_I32);
    CHECK(!T(xi, f, os, 4, 2, 1, "SAME"));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_SHAPE);
    CHECK_STR(vdev_last_error(),
              "Conv2DTranspose: input #0 (shape [1,4,4,2]) is int32, expected float");
    /* a NULL operand keeps the error before it; a freed one names itself */
    vdev_error(VDEV_ERR_OOM, "earlier");
    CHECK(!T(NULL, f, os, 4, 2, 1, "SAME"));
    CHECK(!T(x, NULL, os, 4, 2, 1, "FULL"));
    CHECK_STR(vdev_last_error(), "earlier");
    vdev_tensor_t *dead = t4(buf, 1, 4, 4, 2);
    vdev_tensor_free(dead);
    CHECK(!T(dead, f, OS(8, 8), 2, 2, 1, "SAME"));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    /* the op run directly: the shape rule's own checks of its parameters */
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = p.i[1] = 2;
    p.i[2] = 1, p.j[2] = 8, p.j[3] = 8, p.f[1] = 3;
    const vdev_tensor_t *in[2] = {x, f};
    p.f[0] = 5;
    CHECK_FAILS(vdev_op_run(VDEV_OP_CONV2D_TRANSPOSE, in, 2, &p), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: padding code 5 is neither VALID (0) nor SAME (1)");
    p.f[0] = VDEV_PAD_SAME;
    p.i[1] = 0;
    CHECK_FAILS(vdev_op_run(VDEV_OP_CONV2D_TRANSPOSE, in, 2, &p), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Row and column strides should be larger than 0.");
    p.i[1] = 2;
    p.j[0] = -1;
    CHECK_FAILS(vdev_op_run(VDEV_OP_CONV2D_TRANSPOSE, in, 2, &p), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Dilated rates should be larger than 0.");
    p.j[0] = 0; /* an op made without dilations: 1 */
    vdev_tensor_t *y = vdev_op_run(VDEV_OP_CONV2D_TRANSPOSE, in, 2, &p);
    CHECK(y && vdev_tensor_dim(y, 1) == 8 && vdev_tensor_dim(y, 3) == 3);
    p.f[1] = -3;
    CHECK_FAILS(vdev_op_run(VDEV_OP_CONV2D_TRANSPOSE, in, 2, &p), VDEV_ERR_INVALID_ARG,
                "Conv2DBackpropInput: Dimension -3 must be >= 0");
#undef T
#undef OS
    vdev_scope_end();
}

int main(void)
{
    rng_state = 0x3c6ef372fe94f82bull;
    check_fresh("2x4GiB");
    CHECK_OK(vdev_init());
    test_values();
    test_grads("CPU:0");
    test_grads("GPU:1");
    test_errors();
    CHECK_NO_LEAK("CPU:0");
    CHECK_NO_LEAK("GPU:1");
    vdev_shutdown();
    return check_done();
}
