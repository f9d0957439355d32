/* test_tensor.c — tensors: creation, contents, copies between devices,
 * random tensors, scopes, variables, vdev_assign, bad arguments and OOM, on
 * the cpu backend and on simulated GPUs.
 *
 * Everything is exact except the statistics of random tensors, which are
 * checked loosely (mean and standard deviation of 20000 draws within 0.05 of
 * what was asked for; the expected sampling error is about 0.01). */
#define _GNU_SOURCE
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* Bytes in use on a device, after the allocator's 256-byte rounding. */
static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_in_use;
}

/* ---- creation and contents ---- */

/* zeros/ones/fill/from_host for f32 and i32, 0-dimensional to 4-D; the
 * accessors; to_host and item, with their errors. */
static void test_creation(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    char canon[64];
    CHECK_OK(vdev_device_canonical_name(dev, canon, sizeof canon));

    /* 0-dimensional f32 and i32: one element, no dimensions */
    vdev_tensor_t *z0 = vdev_tensor_zeros(NULL, 0, VDEV_F32);
    CHECK(z0 && vdev_tensor_ndim(z0) == 0 && vdev_tensor_numel(z0) == 1);
    CHECK(vdev_tensor_item(z0) == 0.0f);
    CHECK_STR(vdev_tensor_device(z0), canon);
    vdev_tensor_t *f0 = vdev_tensor_fill(NULL, 0, VDEV_F32, -2.5);
    CHECK(vdev_tensor_item(f0) == -2.5f);
    vdev_tensor_t *i0 = vdev_tensor_fill(NULL, 0, VDEV_I32, 7.9);
    int32_t iv = 0;
    CHECK_OK(vdev_tensor_to_host(i0, &iv, sizeof iv));
    CHECK(iv == 7); /* converted as C converts: toward zero */
    CHECK(vdev_tensor_dtype(i0) == VDEV_I32);
    /* no tensor: VDEV_DTYPE_COUNT, which is no dtype (vdev/tensor.h) */
    CHECK(vdev_tensor_dtype(NULL) == VDEV_DTYPE_COUNT);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_dtype: tensor is NULL");
    CHECK(isnan(vdev_tensor_item(i0))); /* item takes a float tensor */
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);

    /* 4-D ones, f32 and i32 */
    int64_t s4[4] = {2, 3, 1, 5};
    vdev_tensor_t *o4 = vdev_tensor_ones(s4, 4, VDEV_F32);
    vdev_tensor_t *o4i = vdev_tensor_ones(s4, 4, VDEV_I32);
    CHECK(vdev_tensor_ndim(o4) == 4 && vdev_tensor_numel(o4) == 30);
    CHECK(vdev_tensor_dim(o4, 0) == 2 && vdev_tensor_dim(o4, -1) == 5 &&
          vdev_tensor_dim(o4, -4) == 2);
    CHECK(vdev_tensor_dim(o4, 4) == -1 && vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_dim: axis 4 is outside a 4-dimensional tensor "
                                 "(axes -4 to 3)");
    CHECK(vdev_tensor_dim(o4, -10) == -1 && vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_dim: axis -10 is outside a 4-dimensional tensor "
                                 "(axes -4 to 3)");
    CHECK(vdev_tensor_dim(z0, 0) == -1);
    CHECK_STR(vdev_last_error(), "vdev_tensor_dim: axis 0 is outside a 0-dimensional tensor "
                                 "(it has no axes)");
    float fb[30];
    int32_t ib[30];
    CHECK_OK(vdev_tensor_to_host(o4, fb, sizeof fb));
    CHECK_OK(vdev_tensor_to_host(o4i, ib, sizeof ib));
    int ok = 1;
    for (int i = 0; i < 30; i++)
        ok = ok && fb[i] == 1.0f && ib[i] == 1;
    CHECK(ok);
    CHECK_STATUS(vdev_tensor_to_host(o4, fb, sizeof fb - 1), VDEV_ERR_INVALID_ARG);
    CHECK(isnan(vdev_tensor_item(o4)));

    /* from_host, both dtypes, bit-exact round trip (NaN payloads too) */
    float src[6] = {1.5f, -0.0f, 3e-38f, -7e20f, INFINITY, NAN};
    int32_t isrc[6] = {INT32_MIN, -1, 0, 1, 12345, INT32_MAX};
    int64_t s23[2] = {2, 3};
    vdev_tensor_t *a = vdev_tensor_from_host(src, s23, 2, VDEV_F32);
    vdev_tensor_t *b = vdev_tensor_from_host(isrc, s23, 2, VDEV_I32);
    float back[6];
    int32_t iback[6];
    CHECK_OK(vdev_tensor_to_host(a, back, sizeof back));
    CHECK_OK(vdev_tensor_to_host(b, iback, sizeof iback));
    CHECK(!memcmp(back, src, sizeof src));
    CHECK(!memcmp(iback, isrc, sizeof isrc));

    /* empty tensors: no memory, nothing to copy */
    int64_t se[2] = {0, 4};
    vdev_tensor_t *e = vdev_tensor_from_host(NULL, se, 2, VDEV_F32);
    CHECK(e && vdev_tensor_numel(e) == 0);
    CHECK_OK(vdev_tensor_to_host(e, NULL, 0));
    vdev_tensor_free(e);
    vdev_tensor_free(NULL); /* no-op */

    /* identity copies; both dtypes */
    vdev_tensor_t *bi = vdev_identity(b);
    CHECK_OK(vdev_tensor_to_host(bi, iback, sizeof iback));
    CHECK(!memcmp(iback, isrc, sizeof isrc));
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
}

/* ---- bad arguments, with their exact messages ---- */

/* Each bad argument gives VDEV_ERR_INVALID_ARG (or NOT_FOUND) with the
 * exact message, and allocates nothing. */
static void test_bad_args(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    uint64_t before = in_use(dev);
    int64_t neg[2] = {2, -3}, s5[5] = {1, 1, 1, 1, 1}, s2[1] = {2};
    vdev_clear_error();
    CHECK(vdev_tensor_zeros(neg, 2, VDEV_F32) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "dimension 1 is negative (-3)");
    CHECK(vdev_tensor_ones(s5, 5, VDEV_F32) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "tensors have 0 to 4 dimensions, not 5");
    CHECK(vdev_tensor_fill(s5, -1, VDEV_I32, 1) == NULL);
    CHECK_STR(vdev_last_error(), "tensors have 0 to 4 dimensions, not -1");
    CHECK(vdev_tensor_from_host(NULL, s2, 1, VDEV_F32) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_from_host: data is NULL");
    CHECK(vdev_tensor_zeros(NULL, 2, VDEV_F32) == NULL);
    CHECK_STR(vdev_last_error(), "shape is NULL");
    CHECK(vdev_tensor_zeros(s2, 1, VDEV_DTYPE_COUNT) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK(vdev_tensor_uniform(s2, 1, 1.0f, 0.0f, 1) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_uniform: hi (0) < lo (1)");
    CHECK(vdev_tensor_normal(s2, 1, 0.0f, -1.0f, 1) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_normal: stddev -1 < 0");
    /* a NaN or infinite argument is named, not compared ("hi (1) < lo
     * (nan)"); infinite bounds would draw only NaN or infinities */
    static const struct {
        float lo, hi, mean, stddev;
        const char *uniform, *normal;
    } nonfinite[] = {
        {NAN, 1, NAN, 1, "vdev_tensor_uniform: lo is NaN, not a finite number",
         "vdev_tensor_normal: mean is NaN, not a finite number"},
        {0, NAN, 0, NAN, "vdev_tensor_uniform: hi is NaN, not a finite number",
         "vdev_tensor_normal: stddev is NaN, not a finite number"},
        {-INFINITY, 1, -INFINITY, 1, "vdev_tensor_uniform: lo is -inf, not a finite number",
         "vdev_tensor_normal: mean is -inf, not a finite number"},
        {0, INFINITY, 0, INFINITY, "vdev_tensor_uniform: hi is inf, not a finite number",
         "vdev_tensor_normal: stddev is inf, not a finite number"},
        {NAN, -INFINITY, INFINITY, NAN, "vdev_tensor_uniform: lo is NaN, not a finite number",
         "vdev_tensor_normal: mean is inf, not a finite number"},
    };
    for (size_t i = 0; i < sizeof nonfinite / sizeof nonfinite[0]; i++) {
        CHECK(vdev_tensor_uniform(s2, 1, nonfinite[i].lo, nonfinite[i].hi, 1) == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
        CHECK_STR(vdev_last_error(), nonfinite[i].uniform);
        CHECK(vdev_tensor_normal(s2, 1, nonfinite[i].mean, nonfinite[i].stddev, 1) == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
        CHECK_STR(vdev_last_error(), nonfinite[i].normal);
    }
    /* an i32 fill takes finite values that truncate into int32; C leaves
     * the conversion of anything else undefined */
    static const struct {
        double v;
        const char *text;
    } bad_i32[] = {{NAN, "nan"}, {INFINITY, "inf"}, {-INFINITY, "-inf"}, {1e30, "1e+30"},
                   {2147483648.0, "2.14748e+09"}, {-2147483649.0, "-2.14748e+09"}};
    for (size_t i = 0; i < sizeof bad_i32 / sizeof bad_i32[0]; i++) {
        vdev_clear_error();
        CHECK(vdev_tensor_fill(s2, 1, VDEV_I32, bad_i32[i].v) == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
        char want[256];
        snprintf(want, sizeof want,
                 "vdev_tensor_fill: %s is not an int32 value (an int32 tensor takes finite "
                 "values in [-2147483648, 2147483647], truncated toward zero)",
                 bad_i32[i].text);
        CHECK_STR(vdev_last_error(), want);
    }
    int32_t lim[2];
    vdev_tensor_t *hi = vdev_tensor_fill(s2, 1, VDEV_I32, 2147483647.9);
    CHECK_OK(vdev_tensor_to_host(hi, lim, sizeof lim));
    CHECK(lim[0] == INT32_MAX && lim[1] == INT32_MAX);
    vdev_tensor_free(hi);
    vdev_tensor_t *lo = vdev_tensor_fill(s2, 1, VDEV_I32, -2147483648.9);
    CHECK_OK(vdev_tensor_to_host(lo, lim, sizeof lim));
    CHECK(lim[0] == INT32_MIN && lim[1] == INT32_MIN);
    vdev_tensor_free(lo);
    vdev_tensor_t *fnan = vdev_tensor_fill(s2, 1, VDEV_F32, NAN); /* f32 takes NaN */
    float fv[2] = {0, 0};
    CHECK_OK(vdev_tensor_to_host(fnan, fv, sizeof fv));
    CHECK(isnan(fv[0]) && isnan(fv[1]));
    vdev_tensor_free(fnan);
    CHECK(vdev_tensor_to(NULL, "CPU:0") == NULL);
    vdev_tensor_t *t = vdev_tensor_zeros(s2, 1, VDEV_F32);
    CHECK(vdev_tensor_to(t, "GPU:9") == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_NOT_FOUND);
    CHECK_STATUS(vdev_tensor_to_host(t, NULL, 8), VDEV_ERR_INVALID_ARG);
    vdev_tensor_free(t);
    CHECK_EQ_U64(in_use(dev), before);
    CHECK_OK(vdev_device_pop());
}

/* ---- copies between devices ---- */

/* vdev_tensor_to from devs[0] through every other device and back: the
 * same words each time (f32 and i32), the device each copy says. */
static void test_copies(const char **devs, int n)
{
    float h[35], back[35];
    for (int i = 0; i < 35; i++)
        h[i] = (float)i * 0.37f - 5.0f;
    int32_t hi[35], ibk[35];
    for (int i = 0; i < 35; i++)
        hi[i] = i * 1000003 - 7;
    int64_t s[2] = {5, 7};
    vdev_scope_begin();
    CHECK_OK(vdev_device_push(devs[0]));
    vdev_tensor_t *t = vdev_tensor_from_host(h, s, 2, VDEV_F32);
    vdev_tensor_t *ti = vdev_tensor_from_host(hi, s, 2, VDEV_I32);
    CHECK_OK(vdev_device_pop());
    /* around every device and back to the first: each hop is a copy
     * between two different backends or two streams of one */
    for (int k = 1; k <= n; k++) {
        const char *to = devs[k % n];
        char canon[64];
        CHECK_OK(vdev_device_canonical_name(to, canon, sizeof canon));
        t = vdev_tensor_to(t, to);
        ti = vdev_tensor_to(ti, to);
        CHECK_STR(vdev_tensor_device(t), canon);
        CHECK_STR(vdev_tensor_device(ti), canon);
        CHECK(vdev_tensor_ndim(t) == 2 && vdev_tensor_dim(t, 1) == 7);
        CHECK_OK(vdev_tensor_to_host(t, back, sizeof back));
        CHECK_OK(vdev_tensor_to_host(ti, ibk, sizeof ibk));
        CHECK(!memcmp(back, h, sizeof h));
        CHECK(!memcmp(ibk, hi, sizeof hi));
    }
    vdev_scope_end();
}

/* ---- random tensors ---- */

/* Mean, standard deviation, minimum and maximum of n values. */
static void stats(const float *x, int n, double *mean, double *sd, float *lo, float *hi)
{
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
        *lo = x[i] < *lo ? x[i] : *lo;
        *hi = x[i] > *hi ? x[i] : *hi;
    }
    *mean = s / n;
    *sd = sqrt(s2 / n - *mean * *mean);
}

#define NR 20000

/* Same seed: the same numbers on every device; another seed: others (no
 * more than 1% equal, which for continuous draws means almost none). The
 * first device's draws give the statistics. */
static void test_random(const char **devs, int n)
{
    static float ref_u[NR], ref_n[NR], x[NR];
    int64_t s[2] = {100, NR / 100};
    vdev_scope_begin();
    for (int k = 0; k < n; k++) {
        CHECK_OK(vdev_device_push(devs[k]));
        vdev_tensor_t *u = vdev_tensor_uniform(s, 2, -1.0f, 3.0f, 42);
        vdev_tensor_t *g = vdev_tensor_normal(s, 2, 2.0f, 0.5f, 42);
        CHECK_OK(vdev_tensor_to_host(u, k ? x : ref_u, sizeof x));
        if (k)
            CHECK(!memcmp(x, ref_u, sizeof x));
        CHECK_OK(vdev_tensor_to_host(g, k ? x : ref_n, sizeof x));
        if (k)
            CHECK(!memcmp(x, ref_n, sizeof x));
        /* another seed differs (almost) everywhere */
        CHECK_OK(vdev_tensor_to_host(vdev_tensor_uniform(s, 2, -1.0f, 3.0f, 43), x, sizeof x));
        int same = 0;
        for (int i = 0; i < NR; i++)
            same += x[i] == ref_u[i];
        CHECK(same < NR / 100);
        CHECK_OK(vdev_tensor_to_host(vdev_tensor_normal(s, 2, 2.0f, 0.5f, 43), x, sizeof x));
        same = 0;
        for (int i = 0; i < NR; i++)
            same += x[i] == ref_n[i];
        CHECK(same < NR / 100);
        CHECK_OK(vdev_device_pop());
    }
    vdev_scope_end();
    double mean, sd;
    float lo, hi;
    stats(ref_u, NR, &mean, &sd, &lo, &hi);
    CHECK(fabs(mean - 1.0) < 0.05);
    CHECK(fabs(sd - 4.0 / sqrt(12.0)) < 0.05);
    CHECK(lo >= -1.0f && hi <= 3.0f);
    stats(ref_n, NR, &mean, &sd, &lo, &hi);
    CHECK(fabs(mean - 2.0) < 0.05);
    CHECK(fabs(sd - 0.5) < 0.05);
    CHECK(isfinite(lo) && isfinite(hi));
    /* Bounds whose float difference overflows (6e38 > FLT_MAX): every draw
     * still finite, within them, and spread over both signs. */
    vdev_scope_begin();
    CHECK_OK(vdev_tensor_to_host(vdev_tensor_uniform(s, 2, -3e38f, 3e38f, 42), x, sizeof x));
    vdev_scope_end();
    stats(x, NR, &mean, &sd, &lo, &hi);
    CHECK(isfinite(lo) && isfinite(hi) && lo >= -3e38f && hi <= 3e38f);
    CHECK(lo < -1e38f && hi > 1e38f);
}

/* ---- scopes, keep, variables, assign ---- */

/* Scopes free what they made, keep passes a tensor outward, variables
 * survive every scope, vdev_assign copies in place (also across devices)
 * and refuses other shapes and dtypes. Bytes in use return to the start. */
static void test_scopes(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t s[2] = {64, 64};
    uint64_t base = in_use(dev);

    /* temporaries go at the scope's end (a, a + a, relu(...)) */
    vdev_scope_begin();
    vdev_tensor_t *a = vdev_tensor_ones(s, 2, VDEV_F32);
    vdev_tensor_t *b = vdev_relu(vdev_add(a, a));
    CHECK(b != NULL);
    CHECK(in_use(dev) >= base + 3 * 64 * 64 * 4);
    vdev_scope_end();
    CHECK_EQ_U64(in_use(dev), base);

    /* nested scopes; a kept tensor passes to the enclosing scope */
    vdev_scope_begin();
    vdev_tensor_t *outer = vdev_tensor_fill(s, 2, VDEV_F32, 2.0);
    vdev_tensor_t *kept = NULL;
    vdev_scope_begin();
    vdev_tensor_t *tmp = vdev_mul(outer, outer);
    kept = vdev_keep(vdev_add_scalar(tmp, 1.0f));
    vdev_scope_end();
    CHECK_EQ_U64(in_use(dev), base + 2 * 64 * 64 * 4); /* outer and kept */
    float v = 0;
    vdev_scope_begin();
    v = vdev_tensor_item(vdev_sum_all(kept));
    vdev_scope_end();
    CHECK(v == 5.0f * 64 * 64);
    vdev_scope_end();
    CHECK_EQ_U64(in_use(dev), base);

    /* kept at the outermost scope: the caller's, freed by hand */
    vdev_scope_begin();
    vdev_tensor_t *mine = vdev_keep(vdev_tensor_ones(s, 2, VDEV_F32));
    vdev_scope_end();
    CHECK_EQ_U64(in_use(dev), base + 64 * 64 * 4);
    vdev_tensor_free(mine);
    CHECK_EQ_U64(in_use(dev), base);

    /* variables survive scopes; vdev_assign copies in place */
    vdev_scope_begin();
    vdev_tensor_t *var = vdev_variable(vdev_tensor_zeros(s, 2, VDEV_F32));
    vdev_tensor_t *val = vdev_tensor_fill(s, 2, VDEV_F32, 3.0);
    CHECK_OK(vdev_assign(var, val));
    vdev_scope_end();
    CHECK_EQ_U64(in_use(dev), base + 64 * 64 * 4);
    vdev_scope_begin();
    CHECK(vdev_tensor_item(vdev_mean_all(var)) == 3.0f);
    int64_t s2[2] = {64, 65};
    CHECK_STATUS(vdev_assign(var, vdev_tensor_zeros(s2, 2, VDEV_F32)), VDEV_ERR_SHAPE);
    CHECK_MSG("[64,65]");
    CHECK_MSG("[64,64]");
    CHECK_STATUS(vdev_assign(var, vdev_tensor_zeros(s, 2, VDEV_I32)), VDEV_ERR_SHAPE);
    CHECK_MSG("int32");
    /* assigning from the CPU */
    CHECK_OK(vdev_device_push("CPU:0"));
    vdev_tensor_t *cpu_val = vdev_tensor_fill(s, 2, VDEV_F32, -1.0);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_assign(var, cpu_val));
    CHECK(vdev_tensor_item(vdev_sum_all(var)) == -64.0f * 64);
    /* a view cannot become a variable */
    int64_t flat[1] = {-1};
    CHECK(vdev_variable(vdev_reshape(var, flat, 1)) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    vdev_scope_end();
    vdev_tensor_free(var);
    CHECK_EQ_U64(in_use(dev), base);
    /* scope_end without begin: an error, nothing freed */
    vdev_clear_error();
    vdev_scope_end();
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_OK(vdev_device_pop());
}

/* ---- OOM on a small simulated GPU ---- */

/* On a 64 MiB simulated GPU an 80 MB tensor fails with VDEV_ERR_OOM, the
 * message names the shape, the dtype and the device, and the allocator's
 * state is as before except for the failure count. */
static void test_oom(void)
{
    check_fresh("1x64MiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:0"));
    int64_t small[1] = {1024};
    vdev_tensor_t *keep = vdev_tensor_ones(small, 1, VDEV_F32);
    struct vdev_memory_info before, after;
    CHECK_OK(vdev_memory_info("GPU:0", &before));
    int64_t s[2] = {5000, 4000}; /* 80 MB */
    vdev_clear_error();
    CHECK(vdev_tensor_zeros(s, 2, VDEV_F32) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_OOM);
    CHECK_MSG("[5000,4000]");
    CHECK_MSG("float");
    CHECK_MSG("device:GPU:0");
    CHECK(vdev_tensor_uniform(s, 2, 0, 1, 1) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_OOM);
    CHECK_OK(vdev_memory_info("GPU:0", &after));
    CHECK_EQ_U64(after.bytes_in_use, before.bytes_in_use);
    CHECK_EQ_U64(after.bytes_reserved, before.bytes_reserved);
    CHECK_EQ_U64(after.n_allocs, before.n_allocs);
    CHECK_EQ_U64(after.n_failed_allocs, before.n_failed_allocs + 2);
    /* an op whose output does not fit fails the same way */
    int64_t s1[2] = {4000, 1};
    vdev_tensor_t *col = vdev_tensor_ones(s1, 2, VDEV_F32), *row = NULL;
    int64_t r1[2] = {1, 5000};
    row = vdev_tensor_ones(r1, 2, VDEV_F32);
    vdev_clear_error();
    CHECK(vdev_matmul(col, row, false, false) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_OOM);
    CHECK_MSG("[4000,5000]");
    /* what fits still works */
    int64_t s3[2] = {1000, 1000};
    vdev_tensor_t *ok = vdev_tensor_zeros(s3, 2, VDEV_F32);
    CHECK(ok != NULL);
    vdev_tensor_free(ok);
    vdev_tensor_free(col);
    vdev_tensor_free(row);
    vdev_tensor_free(keep);
    CHECK_OK(vdev_memory_info("GPU:0", &after));
    CHECK_EQ_U64(after.bytes_in_use, 0);
    CHECK_OK(vdev_device_pop());
}

int main(void)
{
    /* the cpu backend alone: CPU:0 is also the default device */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    const char *cpu[1] = {"CPU:0"};
    test_creation("CPU:0");
    test_bad_args("CPU:0");
    test_scopes("CPU:0");
    test_copies(cpu, 1);
    test_random(cpu, 1);
    /* with no device scope, tensors go to the default device: CPU:0 here */
    vdev_tensor_t *t = vdev_tensor_zeros(NULL, 0, VDEV_F32);
    CHECK_STR(vdev_tensor_device(t), "/device:CPU:0");
    vdev_tensor_free(t);
    CHECK_EQ_U64(in_use("CPU:0"), 0);

    /* simulated GPUs: each test on them, copies and random tensors across
     * CPU:0, GPU:0 and GPU:1 */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    const char *all[3] = {"CPU:0", "GPU:0", "GPU:1"};
    test_creation("GPU:0");
    test_creation("GPU:1");
    test_bad_args("GPU:1");
    test_scopes("GPU:0");
    test_copies(all, 3);
    test_random(all, 3);
    t = vdev_tensor_zeros(NULL, 0, VDEV_F32);
    CHECK_STR(vdev_tensor_device(t), "/device:GPU:0"); /* the default with GPUs */
    vdev_tensor_free(t);
    for (int k = 0; k < 3; k++)
        CHECK_EQ_U64(in_use(all[k]), 0);

    test_oom();
    vdev_shutdown();
    return check_done();
}
