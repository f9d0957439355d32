/* test_strided_slice.c — vdev_strided_slice (TensorFlow's StridedSlice) and
 * its gradient.
 *
 *  - every bad input refused with its exact status and message (a step of
 *    0, a shrunk index out of range or with a negative stride, more entries
 *    than axes, two ellipses, 32 entries, a negative n, NULL arrays, a result
 *    of 5 dimensions, NULL and freed inputs; the op's and StridedSliceGrad's
 *    own checks, which only vdev itself and the tape reach);
 *  - the result for specs with every mask against a reference written the
 *    way numpy (CPython's slice.indices) computes indices, which is not
 *    TensorFlow's canonical form, on tensors of 0 to 4 dimensions, f32 and
 *    i32 (any bit pattern);
 *  - the same on simulated GPUs, bit for bit against the cpu backend;
 *  - the gradient through the tape against central finite differences
 *    (zeros where nothing was taken), on every device;
 *  - nothing left in use at the end. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/ops.h" /* vdev_op_run, for the ops' own checks */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

/* ---- a spec as Python writes it, and numpy's answer ---- */

enum kind { K_INT, K_SLICE, K_NEW, K_ELLIPSIS };
#define NONE INT64_MIN /* a slice bound or step not given */

struct entry {
    enum kind k;
    int64_t a, b, c; /* the int; or start, stop, step */
};

struct spec {
    const char *what;
    int nd;
    int64_t shape[4];
    int n;
    struct entry e[6];
};

#define I(x) {K_INT, (x), 0, 0}
#define S(a, b, c) {K_SLICE, (a), (b), (c)}
#define ALL {K_SLICE, NONE, NONE, NONE}
#define NEW {K_NEW, 0, 0, 0}
#define ELL {K_ELLIPSIS, 0, 0, 0}

static const struct spec SPECS[] = {
    {"x[::-1]", 1, {7}, 1, {S(NONE, NONE, -1)}},
    {"x[1:6:2]", 1, {7}, 1, {S(1, 6, 2)}},
    {"x[-2:-7:-2]", 1, {7}, 1, {S(-2, -7, -2)}},
    {"x[100:-100:-3]", 1, {7}, 1, {S(100, -100, -3)}},
    {"x[5:2] (empty)", 1, {7}, 1, {S(5, 2, NONE)}},
    {"x[:, 0]", 2, {5, 3}, 2, {ALL, I(0)}},
    {"x[-1, ::2]", 2, {5, 3}, 2, {I(-1), S(NONE, NONE, 2)}},
    {"x[None, 1:, None]", 2, {5, 3}, 3, {NEW, S(1, NONE, NONE), NEW}},
    {"x[..., ::-2]", 3, {4, 3, 5}, 2, {ELL, S(NONE, NONE, -2)}},
    {"x[1, ..., 2]", 3, {4, 3, 5}, 3, {I(1), ELL, I(2)}},
    {"x[:, None, ..., 1:4:2]", 3, {4, 3, 5}, 4, {ALL, NEW, ELL, S(1, 4, 2)}},
    {"x[::3, 2:0:-1, 1, :]", 4, {4, 3, 5, 2}, 4, {S(NONE, NONE, 3), S(2, 0, -1), I(1), ALL}},
    {"x[:, ::2, 1:, ::-1]", 4, {4, 3, 5, 2}, 4, {ALL, S(NONE, NONE, 2), S(1, NONE, NONE),
                                                 S(NONE, NONE, -1)}},
    {"x[1:, ..., 3::-3]", 4, {2, 3, 2, 7}, 3, {S(1, NONE, NONE), ELL, S(3, NONE, -3)}},
    {"x[-1, -1, -1, -1]", 4, {4, 3, 5, 2}, 4, {I(-1), I(-1), I(-1), I(-1)}},
    {"x[..., None, 0] (a new axis after the ellipsis)", 4, {4, 3, 5, 2}, 3, {ELL, NEW, I(0)}},
    {"x[...] of a scalar", 0, {0}, 1, {ELL}},
    {"x[None] of a scalar", 0, {0}, 1, {NEW}},
    {"x[] (no entry)", 2, {5, 3}, 0, {{0}}},
};
#define NSPECS (sizeof SPECS / sizeof SPECS[0])
#define MAXN 140 /* the most elements of a spec's input */

/* CPython's slice.indices: the first index, the step and the count. */
static void py_indices(const struct entry *e, int64_t len, int64_t *first, int64_t *step,
                       int64_t *count)
{
    int64_t s = e->c == NONE ? 1 : e->c, lo = s < 0 ? -1 : 0, hi = s < 0 ? len - 1 : len;
    int64_t start = e->a == NONE ? (s < 0 ? hi : lo) : e->a;
    int64_t stop = e->b == NONE ? (s < 0 ? lo : hi) : e->b;
    if (e->a != NONE) {
        start = start < 0 ? start + len : start;
        start = start < lo ? lo : start > hi ? hi : start;
    }
    if (e->b != NONE) {
        stop = stop < 0 ? stop + len : stop;
        stop = stop < lo ? lo : stop > hi ? hi : stop;
    }
    *first = start;
    *step = s;
    *count = s > 0 ? (stop > start ? (stop - start - 1) / s + 1 : 0)
                   : (start > stop ? (start - stop - 1) / -s + 1 : 0);
}

/* numpy's result of spec on x (words): its shape and words; the number of
 * dimensions. Each input axis gets (first, step, count, kept). */
static int reference(const struct spec *sp, const uint32_t *x, int64_t *shape, uint32_t *out,
                     int64_t *numel)
{
    int64_t first[4] = {0, 0, 0, 0}, step[4] = {1, 1, 1, 1}, count[4] = {1, 1, 1, 1};
    int named = 0, nd_out = 0, axis = 0;
    for (int i = 0; i < sp->n; i++)
        named += sp->e[i].k == K_INT || sp->e[i].k == K_SLICE;
    int ell = 0;
    for (int i = 0; i < sp->n; i++)
        ell |= sp->e[i].k == K_ELLIPSIS;
    for (int i = 0; i <= sp->n; i++) {
        const struct entry *e = i < sp->n ? &sp->e[i] : NULL;
        if (!e || e->k == K_ELLIPSIS) {
            if (!e && ell)
                break;
            int64_t upto = !e ? sp->nd : axis + (sp->nd - named);
            for (; axis < upto; axis++) {
                count[axis] = sp->shape[axis];
                shape[nd_out++] = sp->shape[axis];
            }
        } else if (e->k == K_NEW) {
            shape[nd_out++] = 1;
        } else if (e->k == K_INT) {
            first[axis] = e->a < 0 ? e->a + sp->shape[axis] : e->a;
            axis++;
        } else {
            py_indices(e, sp->shape[axis], &first[axis], &step[axis], &count[axis]);
            shape[nd_out++] = count[axis];
            axis++;
        }
    }
    int64_t st[4], acc = 1, n = 0;
    for (int d = 3; d >= 0; d--) {
        st[d] = acc;
        acc *= d < sp->nd ? sp->shape[d] : 1;
    }
    for (int64_t a = 0; a < count[0]; a++)
        for (int64_t b = 0; b < count[1]; b++)
            for (int64_t c = 0; c < count[2]; c++)
                for (int64_t d = 0; d < count[3]; d++)
                    out[n++] = x[(first[0] + a * step[0]) * st[0] + (first[1] + b * step[1]) * st[1] +
                                 (first[2] + c * step[2]) * st[2] + (first[3] + d * step[3]) * st[3]];
    *numel = n;
    return nd_out;
}

/* vdev_strided_slice of spec, packed as TensorFlow's _slice_helper packs a
 * Python key. */
static vdev_tensor_t *run_spec(const vdev_tensor_t *x, const struct spec *sp)
{
    int64_t b[6] = {0}, e[6] = {0}, s[6] = {0};
    int bm = 0, em = 0, ell = 0, nw = 0, shr = 0;
    for (int i = 0; i < sp->n; i++) {
        const struct entry *en = &sp->e[i];
        s[i] = 1;
        if (en->k == K_INT) {
            b[i] = en->a;
            e[i] = en->a + 1;
            shr |= 1 << i;
        } else if (en->k == K_SLICE) {
            b[i] = en->a == NONE ? 0 : en->a;
            e[i] = en->b == NONE ? 0 : en->b;
            s[i] = en->c == NONE ? 1 : en->c;
            bm |= (en->a == NONE) << i;
            em |= (en->b == NONE) << i;
        } else if (en->k == K_NEW) {
            nw |= 1 << i;
        } else {
            ell |= 1 << i;
        }
    }
    return vdev_strided_slice(x, sp->n, b, e, s, bm, em, ell, nw, shr);
}

/* ---- errors ---- */

static void test_errors(void)
{
    int64_t s3[3] = {5, 3, 2}, s0[1] = {0};
    float v[30] = {0};
    vdev_tensor_t *x = vdev_tensor_from_host(v, s3, 3, VDEV_F32);
    vdev_tensor_t *sc = vdev_tensor_from_host(v, s0, 0, VDEV_F32);
    CHECK(x && sc);
    int64_t z[32] = {0}, one[32], neg[2] = {-1, -1}, big[2] = {5, 0}, m6[2] = {-6, 0};
    for (int i = 0; i < 32; i++)
        one[i] = 1;
    CHECK_FAILS(vdev_strided_slice(x, 2, z, one, z, 0, 0, 0, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: strides[0] must be non-zero");
    CHECK_FAILS(vdev_strided_slice(x, 1, big, one, NULL, 0, 0, 0, 0, 1), VDEV_ERR_INVALID_ARG,
                "StridedSlice: slice index 5 of dimension 0 out of bounds.");
    /* a negative index printed after adding the axis's size, as TensorFlow prints it */
    CHECK_FAILS(vdev_strided_slice(x, 1, m6, one, NULL, 0, 0, 0, 0, 1), VDEV_ERR_INVALID_ARG,
                "StridedSlice: slice index -1 of dimension 0 out of bounds.");
    CHECK_FAILS(vdev_strided_slice(x, 1, z, one, neg, 0, 0, 0, 0, 1), VDEV_ERR_INVALID_ARG,
                "StridedSlice: only stride 1 allowed on non-range indexing.");
    CHECK_FAILS(vdev_strided_slice(x, 4, z, one, NULL, 0, 0, 0, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: Index out of range using input dim 3; input has only 3 dims");
    CHECK_FAILS(vdev_strided_slice(sc, 1, z, one, NULL, 0, 0, 0, 0, 1), VDEV_ERR_INVALID_ARG,
                "StridedSlice: Attempting to slice scalar input.");
    CHECK_FAILS(vdev_strided_slice(x, 3, z, one, NULL, 0, 0, 5, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: Multiple ellipses in slice spec not allowed");
    /* TensorFlow checks the whole mask: bits past the entries count too */
    CHECK_FAILS(vdev_strided_slice(x, 1, z, one, NULL, 0, 0, 6, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: Multiple ellipses in slice spec not allowed");
    CHECK_FAILS(vdev_strided_slice(x, 1, z, one, NULL, 0, 0, -1, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: Multiple ellipses in slice spec not allowed");
    /* one bit past the entries: the ellipsis implied at the end anyway */
    vdev_tensor_t *past = vdev_strided_slice(x, 1, z, one, NULL, 0, 0, 1 << 5, 0, 0);
    CHECK(past && vdev_tensor_ndim(past) == 3 && vdev_tensor_dim(past, 0) == 1 &&
          vdev_tensor_dim(past, 1) == 3);
    vdev_tensor_free(past);
    CHECK_FAILS(vdev_strided_slice(x, 32, z, one, NULL, 0, 0, 0, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: Expected begin, end, and strides to be 1D equal size tensors, "
                "but got shapes [32], [32], and [32] instead.");
    CHECK_FAILS(vdev_strided_slice(x, -1, z, one, NULL, 0, 0, 0, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: n is -1 (begin, end and strides have n entries, 0 to 31)");
    CHECK_FAILS(vdev_strided_slice(x, 1, NULL, one, NULL, 0, 0, 0, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: begin is NULL with n 1");
    CHECK_FAILS(vdev_strided_slice(x, 1, z, NULL, NULL, 0, 0, 0, 0, 0), VDEV_ERR_INVALID_ARG,
                "StridedSlice: end is NULL with n 1");
    /* x[None, None, ...] of a 3-D tensor: 5 dimensions */
    CHECK_FAILS(vdev_strided_slice(x, 3, z, z, NULL, 0, 0, 4, 3, 0), VDEV_ERR_UNSUPPORTED,
                "StridedSlice: the result would have 5 dimensions; vdev tensors have at most 4");

    /* NULL in, NULL out, the first error kept; a freed tensor named */
    CHECK(!vdev_strided_slice(NULL, 0, NULL, NULL, NULL, 0, 0, 0, 0, 0));
    CHECK_STR(vdev_last_error(),
              "StridedSlice: the result would have 5 dimensions; vdev tensors have at most 4");
    vdev_tensor_t *dead = vdev_tensor_from_host(v, s3, 3, VDEV_F32);
    vdev_tensor_free(dead);
    CHECK_FAILS(vdev_strided_slice(dead, 0, NULL, NULL, NULL, 0, 0, 0, 0, 0),
                VDEV_ERR_INVALID_ARG,
                "StridedSlice: input #0: not a live tensor (freed already, or not a tensor)");

    /* the op's own check of its ranges, and StridedSliceGrad's */
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = 4, p.j[0] = 1, p.f[0] = 2; /* rows 4 and 5 of 5 */
    p.j[1] = p.j[2] = 1, p.f[1] = 3, p.f[2] = 2;
    const vdev_tensor_t *in[2] = {x, NULL};
    CHECK_FAILS(vdev_op_run(VDEV_OP_STRIDED_SLICE, in, 1, &p), VDEV_ERR_SHAPE,
                "StridedSlice: bad input shape [5,3,2] (each axis's first index, stride and "
                "count must stay inside the axis)");
    p.i[0] = 4, p.j[0] = -2, p.f[0] = 3; /* rows 4, 2, 0: inside */
    vdev_tensor_t *ok = vdev_op_run(VDEV_OP_STRIDED_SLICE, in, 1, &p);
    CHECK(ok && vdev_tensor_dim(ok, 0) == 3);
    p.f[0] = 3.5; /* a count that is not whole */
    CHECK(!vdev_op_run(VDEV_OP_STRIDED_SLICE, in, 1, &p));
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_SHAPE);
    p.f[0] = 3;
    int64_t s232[3] = {2, 3, 2};
    vdev_tensor_t *dy = vdev_tensor_from_host(v, s232, 3, VDEV_F32);
    vdev_tensor_t *lab = vdev_tensor_from_host(v, s3, 3, VDEV_I32);
    in[0] = dy, in[1] = x;
    CHECK_FAILS(vdev_op_run(VDEV_OP_STRIDED_SLICE_GRAD, in, 2, &p), VDEV_ERR_SHAPE,
                "StridedSliceGrad: incompatible shapes [2,3,2] and [5,3,2] (the gradient of a "
                "strided slice must have the slice's shape, inside the input's)");
    in[0] = lab;
    CHECK_FAILS(vdev_op_run(VDEV_OP_STRIDED_SLICE_GRAD, in, 2, &p), VDEV_ERR_SHAPE,
                "StridedSliceGrad: input #0 (shape [5,3,2]) is int32, expected float");
    in[0] = ok;
    vdev_tensor_t *g = vdev_op_run(VDEV_OP_STRIDED_SLICE_GRAD, in, 2, &p);
    CHECK(g && vdev_tensor_dim(g, 0) == 5);
    vdev_tensor_free(g);
    vdev_tensor_free(ok);
    vdev_tensor_free(dy);
    vdev_tensor_free(lab);
    vdev_tensor_free(x);
    vdev_tensor_free(sc);
}

/* ---- results ---- */

/* Every spec on f32 and i32 inputs on dev, against the reference; the
 * words kept in keep[] (the cpu backend) or compared with ref[]. */
static int spec_fits(const struct spec *sp)
{
    int64_t n = 1;
    for (int d = 0; d < sp->nd; d++)
        n *= sp->shape[d];
    return n <= MAXN;
}

static void test_forward(const char *dev, uint32_t (*keep)[MAXN], const uint32_t (*ref)[MAXN])
{
    CHECK_OK(vdev_device_push(dev));
    rng_state = 0x243f6a8885a308d3ull; /* the same inputs on every device */
    for (size_t k = 0; k < NSPECS; k++) {
        const struct spec *sp = &SPECS[k];
        for (int i32 = 0; i32 < 2; i32++) {
            uint32_t x[MAXN], want[MAXN], got[MAXN];
            int64_t n = 1;
            for (int d = 0; d < sp->nd; d++)
                n *= sp->shape[d];
            for (int64_t i = 0; i < n; i++) {
                float f = rng_uniform(-3, 3);
                x[i] = i32 ? (uint32_t)rng_next() : 0;
                if (!i32)
                    memcpy(&x[i], &f, 4);
            }
            int64_t shape[6], numel;
            int nd = reference(sp, x, shape, want, &numel);
            vdev_tensor_t *t = vdev_tensor_from_host(x, sp->shape, sp->nd,
                                                     i32 ? VDEV_I32 : VDEV_F32);
            vdev_tensor_t *y = run_spec(t, sp);
            int same = y && vdev_tensor_ndim(y) == nd &&
                       vdev_tensor_dtype(y) == (i32 ? VDEV_I32 : VDEV_F32);
            for (int d = 0; same && d < nd; d++)
                same = vdev_tensor_dim(y, d) == shape[d];
            same = same && vdev_tensor_to_host(y, got, (size_t)numel * 4) == VDEV_OK;
            same = same && memcmp(got, want, (size_t)numel * 4) == 0;
            if (same && keep)
                memcpy(keep[2 * k + i32], got, (size_t)numel * 4);
            if (same && ref)
                same = memcmp(got, ref[2 * k + i32], (size_t)numel * 4) == 0;
            if (!same)
                check_fail(__FILE__, __LINE__, "%s: %s (%s): %s", dev, sp->what,
                           i32 ? "int32" : "float", y ? "wrong result" : vdev_last_error());
            else
                check_passed++;
            vdev_tensor_free(y);
            vdev_tensor_free(t);
        }
    }
    vdev_device_pop();
}

/* ---- the gradient ---- */

#define FD_EPS 1e-2
#define FD_ATOL 2e-3
#define FD_RTOL 1e-2

/* L(x) = sum(tanh(x[spec]) * W): W drawn once per spec, of the slice's shape. */
static vdev_tensor_t *loss_of(vdev_tensor_t *x, const struct spec *sp, const float *w)
{
    vdev_tensor_t *y = run_spec(x, sp);
    if (!y)
        return NULL;
    int64_t shape[4];
    int nd = vdev_tensor_ndim(y);
    for (int d = 0; d < nd; d++)
        shape[d] = vdev_tensor_dim(y, d);
    return vdev_sum_all(vdev_mul(vdev_tanh(y), vdev_tensor_from_host(w, shape, nd, VDEV_F32)));
}

static void test_gradient(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    for (size_t k = 0; k < NSPECS; k++) {
        const struct spec *sp = &SPECS[k];
        CHECK_OK(vdev_scope_begin());
        float x0[MAXN], w[MAXN];
        uint32_t taken[MAXN], idx[MAXN];
        int64_t n = 1, shape[6], numel;
        for (int d = 0; d < sp->nd; d++)
            n *= sp->shape[d];
        for (int64_t i = 0; i < n; i++) {
            x0[i] = rng_uniform(-1.5f, 1.5f);
            idx[i] = (uint32_t)i;
        }
        for (int i = 0; i < MAXN; i++)
            w[i] = rng_uniform(-1, 1);
        reference(sp, idx, shape, taken, &numel); /* which elements the slice reads */
        vdev_tensor_t *var = vdev_variable(vdev_tensor_from_host(x0, sp->shape, sp->nd,
                                                                  VDEV_F32));
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *L = loss_of(var, sp, w), *g = NULL;
        CHECK(tape && L);
        CHECK_OK(vdev_tape_gradient(tape, L, &var, 1, &g));
        vdev_tape_end(tape);
        float gv[MAXN] = {0};
        CHECK(g && vdev_tensor_to_host(g, gv, (size_t)n * 4) == VDEV_OK);
        CHECK_STR(vdev_tensor_device(g), vdev_tensor_device(var));
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                float xp[MAXN];
                memcpy(xp, x0, sizeof xp);
                xp[i] += (float)(sgn ? -FD_EPS : FD_EPS);
                l[sgn] = vdev_tensor_item(loss_of(vdev_tensor_from_host(xp, sp->shape, sp->nd,
                                                                        VDEV_F32),
                                                  sp, w));
            }
            double fd = (l[0] - l[1]) / (2 * FD_EPS);
            int read = 0;
            for (int64_t j = 0; j < numel; j++)
                read |= taken[j] == (uint32_t)i;
            if (fabs(gv[i] - fd) > FD_ATOL + FD_RTOL * fabs(fd) || (!read && gv[i] != 0.0f))
                bad++;
        }
        if (bad)
            check_fail(__FILE__, __LINE__, "%s: %s: %d elements", dev, sp->what, bad);
        else
            check_passed++;
        vdev_tensor_free(var);
        vdev_scope_end();
    }
    vdev_device_pop();
}

int main(void)
{
    static uint32_t ref[2 * NSPECS][MAXN];
    for (size_t k = 0; k < NSPECS; k++)
        if (!spec_fits(&SPECS[k])) {
            check_fail(__FILE__, __LINE__, "%s: more than %d elements", SPECS[k].what, MAXN);
            return check_done();
        }

    check_fresh(NULL);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("CPU:0"));
    test_errors();
    vdev_device_pop();
    test_forward("CPU:0", ref, NULL);
    test_gradient("CPU:0");
    CHECK_NO_LEAK("CPU:0");

    /* simulated GPUs: bit for bit against the cpu backend */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:1"));
    test_errors();
    vdev_device_pop();
    test_forward("GPU:1", NULL, (const uint32_t(*)[MAXN])ref);
    test_gradient("GPU:1");
    CHECK_NO_LEAK("GPU:1");
    CHECK_NO_LEAK("CPU:0");

    /* CUDA GPUs, where the machine has one */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    if (vdev_device_push("GPU:0") == VDEV_OK) {
        vdev_device_pop();
        printf("CUDA GPU:0 found: the strided slices run there too\n");
        test_forward("GPU:0", NULL, (const uint32_t(*)[MAXN])ref);
        test_gradient("GPU:0");
        CHECK_NO_LEAK("GPU:0");
    }
    vdev_shutdown();
    return check_done();
}
