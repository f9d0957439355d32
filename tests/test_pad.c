/* test_pad.c — vdev_pad and vdev_mirror_pad (TensorFlow's tf.pad, CONSTANT,
 * REFLECT and SYMMETRIC modes): values of f32 and i32 tensors of every rank
 * against a direct loop written here (each output element t's element
 * shifted by the befores; outside t, the constant or the element mirrored at
 * the edge, axis by axis), NaN as the constant, paddings at the modes'
 * bounds, no padding (a copy, not t), the device it runs on (the tensor's
 * outside a scope, the scope's inside one), a simulated GPU's bits against
 * the CPU's, the gradient through the tape (exactly: t's part of the
 * output's gradient, plus for a mirror each mirrored entry's gradient added
 * to the entry it copies, summed here by a loop in double), and every
 * refusal with its exact words, nothing left allocated. */
#define _GNU_SOURCE
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Where index i (shifted by the before padding) of an axis of size n reads:
 * itself inside, else -1 for a constant (mirror -1) or the mirrored index
 * (mirror 1 REFLECT, the edge left out; 0 SYMMETRIC, the edge repeated). */
static int64_t source(int64_t i, int64_t n, int mirror)
{
    if (i >= 0 && i < n)
        return i;
    if (mirror < 0)
        return -1;
    return i < 0 ? -i - 1 + mirror : 2 * n - 1 - mirror - i;
}

/* The padded shape and the reference output (as floats) for a tensor of
 * shape s (nd dims) holding x[i] = i + 1: padded with value (mirror -1) or
 * mirrored (mirror 1 REFLECT, 0 SYMMETRIC). */
static float *reference(const int64_t *s, int nd, const int64_t *pad, float value, int mirror,
                        int64_t *out_shape, int64_t *n_out)
{
    int64_t o[4] = {1, 1, 1, 1}, in[4] = {1, 1, 1, 1}, p[4] = {0, 0, 0, 0};
    for (int d = 0; d < nd; d++) {
        in[4 - nd + d] = s[d];
        p[4 - nd + d] = pad[2 * d];
        o[4 - nd + d] = pad[2 * d] + s[d] + pad[2 * d + 1];
        out_shape[d] = o[4 - nd + d];
    }
    int64_t n = o[0] * o[1] * o[2] * o[3];
    float *y = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!y)
        abort();
    for (int64_t a = 0; a < o[0]; a++)
        for (int64_t b = 0; b < o[1]; b++)
            for (int64_t c = 0; c < o[2]; c++)
                for (int64_t e = 0; e < o[3]; e++) {
                    int64_t i[4] = {a - p[0], b - p[1], c - p[2], e - p[3]};
                    int inside = 1;
                    for (int d = 0; d < 4; d++) {
                        i[d] = source(i[d], in[d], mirror);
                        inside &= i[d] >= 0;
                    }
                    float v = value;
                    if (inside)
                        v = (float)(((i[0] * in[1] + i[1]) * in[2] + i[2]) * in[3] + i[3] + 1);
                    y[((a * o[1] + b) * o[2] + c) * o[3] + e] = v;
                }
    *n_out = n;
    return y;
}

/* A tensor of shape s holding 1, 2, 3, ... (f32 or i32). */
static vdev_tensor_t *counting(const int64_t *s, int nd, enum vdev_dtype dt)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= s[d];
    float *f = malloc((size_t)(n ? n : 1) * 4);
    int32_t *i = malloc((size_t)(n ? n : 1) * 4);
    if (!f || !i)
        abort();
    for (int64_t k = 0; k < n; k++) {
        f[k] = (float)(k + 1);
        i[k] = (int32_t)(k + 1);
    }
    vdev_tensor_t *t = vdev_tensor_from_host(dt == VDEV_F32 ? (void *)f : (void *)i, s, nd, dt);
    free(f);
    free(i);
    return t;
}

static const char *const mode_names[2] = {"SYMMETRIC", "REFLECT"};

/* One padding of a counting tensor against the reference: with value
 * (mirror -1) or mirrored (1 REFLECT, 0 SYMMETRIC), on the current device. */
static void check_case(const int64_t *s, int nd, const int64_t *pad, enum vdev_dtype dt,
                       float value, int mirror)
{
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *t = counting(s, nd, dt);
    vdev_tensor_t *y = mirror < 0 ? vdev_pad(t, pad, nd, value)
                                  : vdev_mirror_pad(t, pad, nd, mode_names[mirror]);
    int64_t os[4], n;
    float *want = reference(s, nd, pad, value, mirror, os, &n);
    CHECK(y != NULL);
    if (y) {
        CHECK(vdev_tensor_ndim(y) == nd && vdev_tensor_dtype(y) == dt);
        for (int d = 0; d < nd; d++)
            CHECK(vdev_tensor_dim(y, d) == os[d]);
        uint32_t *got = malloc((size_t)(n ? n : 1) * 4);
        if (!got)
            abort();
        CHECK_OK(vdev_tensor_to_host(y, got, (size_t)n * 4));
        int64_t bad = 0;
        for (int64_t k = 0; k < n; k++) {
            float g;
            if (dt == VDEV_F32)
                memcpy(&g, &got[k], 4);
            else
                g = (float)(int32_t)got[k];
            int same = isnan(want[k]) ? isnan(g) : g == want[k];
            bad += !same;
        }
        if (bad)
            check_fail(__FILE__, __LINE__, "rank %d %s mode %d: %lld elements off", nd,
                       dt == VDEV_F32 ? "f32" : "i32", mirror, (long long)bad);
        CHECK(bad == 0);
        free(got);
    } else {
        check_fail(__FILE__, __LINE__, "mode %d: %s", mirror, vdev_last_error());
    }
    free(want);
    vdev_scope_end();
}

static void test_values(void)
{
    const int64_t s1[1] = {4}, p1[2] = {2, 3};
    const int64_t s2[2] = {2, 3}, p2[4] = {1, 0, 2, 2};
    const int64_t s3[3] = {2, 3, 2}, p3[6] = {0, 0, 1, 1, 0, 3};
    const int64_t s4[4] = {2, 3, 3, 2}, p4[8] = {0, 0, 1, 2, 2, 1, 0, 0};
    const int64_t s0[2] = {0, 3}, p0[4] = {1, 1, 0, 0}; /* an empty tensor padded */
    for (int f = 0; f < 2; f++) {
        enum vdev_dtype dt = f ? VDEV_I32 : VDEV_F32;
        float v = f ? -7.0f : 0.0f;
        check_case(s1, 1, p1, dt, v, -1);
        check_case(s2, 2, p2, dt, v, -1);
        check_case(s3, 3, p3, dt, v, -1);
        check_case(s4, 4, p4, dt, v, -1);
        check_case(s0, 2, p0, dt, v, -1);
    }
    check_case(s2, 2, p2, VDEV_F32, 2.5f, -1);
    check_case(s2, 2, p2, VDEV_F32, NAN, -1);
    /* a 0-dimensional tensor: nothing to pad, a copy */
    CHECK_OK(vdev_scope_begin());
    float one = 3.0f;
    vdev_tensor_t *sc = vdev_tensor_from_host(&one, NULL, 0, VDEV_F32);
    vdev_tensor_t *y = vdev_pad(sc, NULL, 0, 0);
    CHECK(y != NULL && y != sc && vdev_tensor_ndim(y) == 0 && vdev_tensor_item(y) == 3.0f);
    vdev_scope_end();
}

/* No padding gives a copy: a later write to the variable leaves it. */
static void test_no_padding_is_a_copy(void)
{
    CHECK_OK(vdev_scope_begin());
    const int64_t s[2] = {2, 2}, p[4] = {0, 0, 0, 0};
    vdev_tensor_t *v = vdev_variable(counting(s, 2, VDEV_F32));
    vdev_tensor_t *y = vdev_pad(v, p, 2, 0);
    CHECK(y != NULL && y != v);
    CHECK_OK(vdev_assign(v, vdev_tensor_fill(s, 2, VDEV_F32, 9)));
    float got[4];
    CHECK_OK(vdev_tensor_to_host(y, got, sizeof got));
    CHECK(got[0] == 1 && got[3] == 4);
    vdev_scope_end();
    vdev_tensor_free(v);
}

static void test_devices(void)
{
    const int64_t s[2] = {2, 2}, p[4] = {1, 1, 0, 2};
    CHECK_OK(vdev_scope_begin());
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *t = counting(s, 2, VDEV_F32);
    CHECK_OK(vdev_device_pop());
    vdev_tensor_t *y = vdev_pad(t, p, 2, 0); /* outside a scope: t's device */
    CHECK(y && strstr(vdev_tensor_device(y), "GPU:1"));
    CHECK_OK(vdev_device_push("CPU:0"));
    vdev_tensor_t *z = vdev_pad(t, p, 2, 0); /* inside one: the scope's */
    CHECK_OK(vdev_device_pop());
    CHECK(z && strstr(vdev_tensor_device(z), "CPU:0"));
    float a[16], b[16];
    CHECK_OK(vdev_tensor_to_host(y, a, sizeof a));
    CHECK_OK(vdev_tensor_to_host(z, b, sizeof b));
    CHECK(memcmp(a, b, sizeof a) == 0);
    vdev_scope_end();
    CHECK(vdev_placement_op_count("ConcatV2", "/device:GPU:1") > 0);
}

/* d sum(pad(x) r) / dx is r at x's places, exactly. */
static void test_gradient(void)
{
    const int64_t s[3] = {2, 3, 2}, p[6] = {1, 0, 0, 2, 1, 1}, os[3] = {3, 5, 4};
    float r[60];
    for (int k = 0; k < 60; k++)
        r[k] = (float)k * 0.25f - 3.0f;
    for (int g = 0; g < 2; g++) {
        CHECK_OK(vdev_device_push(g ? "GPU:0" : "CPU:0"));
        CHECK_OK(vdev_scope_begin());
        vdev_tensor_t *x = vdev_variable(counting(s, 3, VDEV_F32));
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *y = vdev_pad(x, p, 3, 1.5);
        vdev_tensor_t *loss = vdev_sum_all(vdev_mul(y, vdev_tensor_from_host(r, os, 3, VDEV_F32)));
        vdev_tensor_t *gx = NULL;
        CHECK_OK(vdev_tape_gradient(tape, loss, &x, 1, &gx));
        vdev_tape_end(tape);
        float got[12];
        CHECK(gx != NULL);
        if (gx) {
            CHECK_OK(vdev_tensor_to_host(gx, got, sizeof got));
            int bad = 0;
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 3; b++)
                    for (int c = 0; c < 2; c++)
                        bad += got[(a * 3 + b) * 2 + c] != r[((a + 1) * 5 + b) * 4 + c + 1];
            CHECK(bad == 0);
        }
        vdev_scope_end();
        vdev_tensor_free(x);
        CHECK_OK(vdev_device_pop());
    }
}

static void test_errors(void)
{
    CHECK_OK(vdev_scope_begin());
    const int64_t s[2] = {2, 2};
    vdev_tensor_t *t = counting(s, 2, VDEV_F32), *ti = counting(s, 2, VDEV_I32);
    const int64_t p3[6] = {0, 0, 1, 1, 0, 0}, neg[4] = {0, 0, -1, 0}, big[4] = {0, 0, 1, INT64_MAX};
    const int64_t ok[4] = {1, 1, 1, 1};
    CHECK_FAILS(vdev_pad(t, p3, 3, 0), VDEV_ERR_INVALID_ARG,
                "Pad: The first dimension of paddings must be the rank of inputs[3,2], [2,2]");
    CHECK_FAILS(vdev_pad(t, neg, 2, 0), VDEV_ERR_INVALID_ARG,
                "Pad: Paddings must be non-negative: -1 0");
    CHECK_FAILS(vdev_pad(t, big, 2, 0), VDEV_ERR_INVALID_ARG,
                "Pad: dimension 1 of 2 padded by 1 and 9223372036854775807 does not fit an int64");
    CHECK_FAILS(vdev_pad(t, NULL, 2, 0), VDEV_ERR_INVALID_ARG, "Pad: paddings is NULL and n 2");
    CHECK_FAILS(vdev_pad(t, ok, -1, 0), VDEV_ERR_INVALID_ARG, "Pad: paddings is given and n -1");
    CHECK(vdev_pad(ti, ok, 2, 1e20) == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("1e+20");
    vdev_clear_error();
    CHECK(vdev_pad(NULL, ok, 2, 0) == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_OK);
    vdev_tensor_t *dead = counting(s, 2, VDEV_F32);
    vdev_tensor_free(dead);
    CHECK(vdev_pad(dead, ok, 2, 0) == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_pad: ");
    vdev_scope_end();
    CHECK_NO_LEAK("CPU:0");
}

/* Mirror padding of every rank, both modes and dtypes, paddings up to each
 * mode's bound, on the CPU and a simulated GPU (the exact reference on both,
 * so the same bits). */
static void test_mirror_values(void)
{
    const int64_t s1[1] = {4}, r1[2] = {3, 3}, y1[2] = {4, 4};
    const int64_t s2[2] = {2, 3}, r2[4] = {1, 1, 2, 2}, y2[4] = {2, 0, 3, 1};
    const int64_t s3[3] = {2, 3, 2}, r3[6] = {0, 0, 1, 1, 1, 0}, y3[6] = {2, 1, 0, 3, 2, 2};
    const int64_t s4[4] = {2, 3, 3, 2}, p4[8] = {1, 0, 2, 1, 1, 2, 0, 1};
    const int64_t sone[1] = {1}, pone[2] = {1, 1};  /* SYMMETRIC of one entry */
    const int64_t s0[2] = {0, 3}, p0[4] = {0, 0, 1, 2}; /* an empty tensor, SYMMETRIC */
    const int64_t none[4] = {0, 0, 0, 0};
    for (int g = 0; g < 2; g++) {
        CHECK_OK(vdev_device_push(g ? "GPU:0" : "CPU:0"));
        for (int f = 0; f < 2; f++) {
            enum vdev_dtype dt = f ? VDEV_I32 : VDEV_F32;
            check_case(s1, 1, r1, dt, 0, 1);
            check_case(s1, 1, y1, dt, 0, 0);
            check_case(s2, 2, r2, dt, 0, 1);
            check_case(s2, 2, y2, dt, 0, 0);
            check_case(s3, 3, r3, dt, 0, 1);
            check_case(s3, 3, y3, dt, 0, 0);
            check_case(s4, 4, p4, dt, 0, 1);
            check_case(s4, 4, p4, dt, 0, 0);
            check_case(sone, 1, pone, dt, 0, 0);
            check_case(s0, 2, p0, dt, 0, 0);
            check_case(s2, 2, none, dt, 0, 1);
        }
        CHECK_OK(vdev_device_pop());
    }
    /* the example of vdev/ops.h, literally */
    CHECK_OK(vdev_scope_begin());
    const int64_t s[1] = {3}, p[2] = {2, 2};
    vdev_tensor_t *t = counting(s, 1, VDEV_F32);
    float got[7];
    const float reflect[7] = {3, 2, 1, 2, 3, 2, 1}, symmetric[7] = {2, 1, 1, 2, 3, 3, 2};
    CHECK_OK(vdev_tensor_to_host(vdev_mirror_pad(t, p, 1, "REFLECT"), got, sizeof got));
    CHECK(memcmp(got, reflect, sizeof got) == 0);
    CHECK_OK(vdev_tensor_to_host(vdev_mirror_pad(t, p, 1, "SYMMETRIC"), got, sizeof got));
    CHECK(memcmp(got, symmetric, sizeof got) == 0);
    /* a 0-dimensional tensor: a copy */
    float three = 3.0f;
    vdev_tensor_t *sc = vdev_tensor_from_host(&three, NULL, 0, VDEV_F32);
    vdev_tensor_t *y = vdev_mirror_pad(sc, NULL, 0, "REFLECT");
    CHECK(y != NULL && y != sc && vdev_tensor_ndim(y) == 0 && vdev_tensor_item(y) == 3.0f);
    /* no padding: a copy a later write leaves as it was */
    vdev_tensor_t *v = vdev_variable(counting(s, 1, VDEV_F32));
    vdev_tensor_t *c = vdev_mirror_pad(v, none, 1, "SYMMETRIC");
    CHECK(c != NULL && c != v);
    CHECK_OK(vdev_assign(v, vdev_tensor_fill(s, 1, VDEV_F32, 9)));
    CHECK_OK(vdev_tensor_to_host(c, got, 3 * sizeof(float)));
    CHECK(got[0] == 1 && got[1] == 2 && got[2] == 3);
    vdev_scope_end();
    vdev_tensor_free(v);
}

/* Outside a scope the mirror runs on the tensor's device, inside one on the
 * scope's; the placement log shows its StridedSlice and ConcatV2 ops. */
static void test_mirror_devices(void)
{
    const int64_t s[2] = {3, 3}, p[4] = {1, 2, 2, 0};
    CHECK_OK(vdev_scope_begin());
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *t = counting(s, 2, VDEV_F32);
    CHECK_OK(vdev_device_pop());
    uint64_t slices = vdev_placement_op_count("StridedSlice", "/device:GPU:1");
    vdev_tensor_t *y = vdev_mirror_pad(t, p, 2, "REFLECT");
    CHECK(y && strstr(vdev_tensor_device(y), "GPU:1"));
    CHECK(vdev_placement_op_count("StridedSlice", "/device:GPU:1") == slices + 3);
    CHECK_OK(vdev_device_push("CPU:0"));
    vdev_tensor_t *z = vdev_mirror_pad(t, p, 2, "REFLECT");
    CHECK_OK(vdev_device_pop());
    CHECK(z && strstr(vdev_tensor_device(z), "CPU:0"));
    float a[30], b[30];
    CHECK_OK(vdev_tensor_to_host(y, a, sizeof a));
    CHECK_OK(vdev_tensor_to_host(z, b, sizeof b));
    CHECK(memcmp(a, b, sizeof a) == 0);
    vdev_scope_end();
}

/* d sum(mirror_pad(x) r) / dx: for each x entry, the sum of r over the
 * output entries that copy it (summed here in double; the r are quarters,
 * so every order of float sums gives these values exactly). */
static void test_mirror_gradient(void)
{
    const int64_t s[2] = {3, 4};
    const int64_t pads[2][4] = {{3, 2, 4, 1}, {2, 1, 3, 3}}; /* SYMMETRIC, REFLECT */
    for (int m = 0; m < 2; m++) {
        const int64_t *p = pads[m];
        int64_t os[2] = {p[0] + 3 + p[1], p[2] + 4 + p[3]};
        float r[100];
        double want[12] = {0};
        for (int64_t o0 = 0; o0 < os[0]; o0++)
            for (int64_t o1 = 0; o1 < os[1]; o1++) {
                int64_t k = o0 * os[1] + o1;
                r[k] = (float)k * 0.25f - 5.0f;
                int64_t i0 = source(o0 - p[0], 3, m), i1 = source(o1 - p[2], 4, m);
                want[i0 * 4 + i1] += r[k];
            }
        for (int g = 0; g < 2; g++) {
            CHECK_OK(vdev_device_push(g ? "GPU:0" : "CPU:0"));
            CHECK_OK(vdev_scope_begin());
            vdev_tensor_t *x = vdev_variable(counting(s, 2, VDEV_F32));
            vdev_tape_t *tape = vdev_tape_begin();
            vdev_tensor_t *y = vdev_mirror_pad(x, p, 2, mode_names[m]);
            vdev_tensor_t *loss =
                vdev_sum_all(vdev_mul(y, vdev_tensor_from_host(r, os, 2, VDEV_F32)));
            vdev_tensor_t *gx = NULL;
            CHECK_OK(vdev_tape_gradient(tape, loss, &x, 1, &gx));
            vdev_tape_end(tape);
            float got[12];
            CHECK(gx != NULL);
            if (gx) {
                CHECK_OK(vdev_tensor_to_host(gx, got, sizeof got));
                int bad = 0;
                for (int k = 0; k < 12; k++)
                    bad += got[k] != (float)want[k];
                if (bad)
                    check_fail(__FILE__, __LINE__, "%s on %s: %d entries of the gradient off",
                               mode_names[m], g ? "GPU:0" : "CPU:0", bad);
                CHECK(bad == 0);
            }
            vdev_scope_end();
            vdev_tensor_free(x);
            CHECK_OK(vdev_device_pop());
        }
    }
}

static void test_mirror_errors(void)
{
    CHECK_OK(vdev_scope_begin());
    const int64_t s[2] = {2, 3};
    vdev_tensor_t *t = counting(s, 2, VDEV_F32);
    const int64_t p3[6] = {0, 0, 1, 1, 0, 0}, neg[4] = {0, 0, -1, 0}, ok[4] = {1, 1, 1, 1};
    const int64_t at_dim[4] = {0, 0, 3, 0}, past_dim[4] = {0, 0, 0, 4};
    const int64_t first_wins[4] = {3, 0, -1, 0}; /* axis 0's bound, then axis 1's sign */
    CHECK_FAILS(vdev_mirror_pad(t, p3, 3, "REFLECT"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: The first dimension of paddings must be the rank of inputs[3,2], "
                "[2,3]");
    CHECK_FAILS(vdev_mirror_pad(t, neg, 2, "SYMMETRIC"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: paddings must be non-negative: -1 0");
    CHECK_FAILS(vdev_mirror_pad(t, at_dim, 2, "REFLECT"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: paddings must be less than the dimension size: 3, 0 not less than 3");
    CHECK_FAILS(vdev_mirror_pad(t, past_dim, 2, "SYMMETRIC"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: paddings must be no greater than the dimension size: 0, 4 greater "
                "than 3");
    CHECK_FAILS(vdev_mirror_pad(t, first_wins, 2, "SYMMETRIC"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: paddings must be no greater than the dimension size: 3, 0 greater "
                "than 2");
    CHECK_FAILS(vdev_mirror_pad(t, ok, 2, "EDGE"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: Value for attr 'mode' of \"EDGE\" is not in the list of allowed "
                "values: \"REFLECT\", \"SYMMETRIC\"");
    CHECK_FAILS(vdev_mirror_pad(t, ok, 2, "reflect"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: Value for attr 'mode' of \"reflect\" is not in the list of allowed "
                "values: \"REFLECT\", \"SYMMETRIC\"");
    CHECK_FAILS(vdev_mirror_pad(t, ok, 2, NULL), VDEV_ERR_INVALID_ARG, "MirrorPad: mode is NULL");
    CHECK_FAILS(vdev_mirror_pad(t, NULL, 2, "REFLECT"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: paddings is NULL and n 2");
    CHECK_FAILS(vdev_mirror_pad(t, ok, -1, "REFLECT"), VDEV_ERR_INVALID_ARG,
                "MirrorPad: paddings is given and n -1");
    /* REFLECT refuses an empty axis even unpadded (0 is not less than 0), as
     * TensorFlow's kernel does */
    const int64_t s0[2] = {0, 3}, p0[4] = {0, 0, 1, 2};
    CHECK_FAILS(vdev_mirror_pad(vdev_tensor_fill(s0, 2, VDEV_F32, 0), p0, 2, "REFLECT"),
                VDEV_ERR_INVALID_ARG,
                "MirrorPad: paddings must be less than the dimension size: 0, 0 not less than 0");
    vdev_clear_error();
    CHECK(vdev_mirror_pad(NULL, ok, 2, "REFLECT") == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_OK);
    vdev_tensor_t *dead = counting(s, 2, VDEV_F32);
    vdev_tensor_free(dead);
    CHECK(vdev_mirror_pad(dead, ok, 2, "REFLECT") == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_mirror_pad: ");
    vdev_scope_end();
    CHECK_NO_LEAK("CPU:0");
}

int main(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_values();
    test_no_padding_is_a_copy();
    test_devices();
    test_gradient();
    test_errors();
    test_mirror_values();
    test_mirror_devices();
    test_mirror_gradient();
    test_mirror_errors();
    CHECK_NO_LEAK("CPU:0");
    CHECK_NO_LEAK("GPU:0");
    CHECK_NO_LEAK("GPU:1");
    vdev_shutdown();
    return check_done();
}
