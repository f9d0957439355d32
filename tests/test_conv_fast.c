/* test_conv_fast.c — the fast host kernels of Conv2D, Conv2DBackpropInput
 * and Conv2DBackpropFilter (src/ops/conv_fast.c: im2col or col2im and the
 * matmul's sgemm) against their reference kernels (conv_kernels.c):
 *
 *  - every shape of a grid (strides 1, 2, 3; SAME and VALID; odd sizes,
 *    1x1 windows, windows larger than the input under SAME, a width of 1,
 *    batch 1 and several, 1 to 1000 channels), the grid again with
 *    dilations (2x1, 1x3, 2x2; strides 1 and 2) and shapes whose images'
 *    im2col takes several blocks of rows: each element within float
 *    summation's bound of the reference (the bounds are derived at
 *    terms_of);
 *  - under the determinism switch, the shape rules pass it to the kernels
 *    (i[3]), and the ops through the dispatcher on CPU:0 and on a simulated
 *    GPU (GPU:1) give the fast kernel's bits, as a second run does;
 *  - under the determinism switch, the gradients of a layer large enough
 *    that its products are cut into blocks: the same bits with a budget of
 *    two threads and of one;
 *  - a scratch buffer that cannot be had: the kernel gives the reference
 *    kernel's bits (fault injection, each buffer in turn);
 *  - empty outputs (no output pixel, no output channel): dx and dF zeros. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_rng.h"

/* ---- helpers ---- */

typedef void (*kernel_fn)(const struct vdev_kernel_args *);

struct shape {
    int64_t n, h, w, c, kh, kw, o, sh, sw;
    int same;
    int64_t dh, dw; /* dilations; 0 reads as 1 */
};

static float *rand_buf(int64_t n)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!p)
        abort();
    for (int64_t i = 0; i < n; i++)
        p[i] = rng_uniform(-1, 1);
    return p;
}

static float *abs_of(const float *p, int64_t n)
{
    float *q = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!q)
        abort();
    for (int64_t i = 0; i < n; i++)
        q[i] = fabsf(p[i]);
    return q;
}

static struct vdev_op_params params_of(const struct shape *s)
{
    struct vdev_op_params p;
    memset(&p, 0, sizeof p);
    p.i[0] = s->sh;
    p.i[1] = s->sw;
    p.j[0] = s->dh;
    p.j[1] = s->dw;
    p.f[0] = s->same ? VDEV_PAD_SAME : VDEV_PAD_VALID;
    return p;
}

/* The op's arguments as the dispatcher makes them (the shape rule run: it
 * sets the determinism switch in i[3]); the inputs are x, the filter and,
 * for the gradient ops, dy. 0 when the shape rule refuses the shape. */
static int args_of(enum vdev_op op, const struct shape *s, const float *const *in,
                   struct vdev_kernel_args *a, int64_t *dy_shape)
{
    struct vdev_op_params p = params_of(s);
    memset(a, 0, sizeof *a);
    a->op = op;
    a->n_in = op == VDEV_OP_CONV2D ? 2 : 3;
    int64_t shapes[3][4] = {{s->n, s->h, s->w, s->c}, {s->kh, s->kw, s->c, s->o}, {0}};
    if (dy_shape)
        memcpy(shapes[2], dy_shape, sizeof shapes[2]);
    for (int k = 0; k < a->n_in; k++) {
        a->in[k] = in[k];
        a->in_ndim[k] = 4;
        a->in_dtype[k] = VDEV_F32;
        memcpy(a->in_shape[k], shapes[k], sizeof shapes[k]);
    }
    memcpy(a->f, p.f, sizeof a->f);
    memcpy(a->i, p.i, sizeof a->i);
    memcpy(a->j, p.j, sizeof a->j);
    return vdev_op_defs[op].shape(a) == VDEV_OK;
}

/* Runs fn on a's inputs into a new buffer of the output's size, filled with
 * NaN first so that an element the kernel does not write shows. */
static float *run(struct vdev_kernel_args *a, kernel_fn fn, int64_t *numel)
{
    int64_t n = vdev_args_out_numel(a, 0);
    float *out = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!out)
        abort();
    for (int64_t i = 0; i < n; i++)
        out[i] = NAN;
    a->out[0] = out;
    fn(a);
    *numel = n;
    return out;
}

static const enum vdev_op OPS[3] = {VDEV_OP_CONV2D, VDEV_OP_CONV2D_BACKPROP_INPUT,
                                    VDEV_OP_CONV2D_BACKPROP_FILTER};
static const kernel_fn REF[3] = {vdev_ref_conv2d, vdev_ref_conv2d_backprop_input,
                                 vdev_ref_conv2d_backprop_filter};
static const kernel_fn FAST[3] = {vdev_fast_conv2d, vdev_fast_conv2d_backprop_input,
                                  vdev_fast_conv2d_backprop_filter};

/* The number of terms k in the bound 4 k 2^-24 sum |terms| (the bound the
 * matmul tests give sgemm's float sums; sum |terms| is the reference kernel
 * on |x|, |f|, |dy|) that covers each fast kernel:
 *  - Conv2D: one sgemm sum of KH*KW*C terms per element;
 *  - Conv2DBackpropInput: each dx element is a float sum of at most KH*KW
 *    elements of dcol, each an sgemm sum of O terms: the error is at most
 *    (4 O + KH KW) 2^-24 sum |terms|, within 4 (KH KW O) 2^-24 sum |terms|;
 *  - Conv2DBackpropFilter: each dF element is a float sum over the blocks
 *    of sgemm sums over the block's rows: at most (4 rows + blocks) 2^-24
 *    sum |terms| <= 4 (N OH OW) 2^-24 sum |terms| (rows >= blocks). */
static double terms_of(int op, const struct shape *s, int64_t oh, int64_t ow)
{
    if (op == 0)
        return (double)(s->kh * s->kw * s->c);
    if (op == 1)
        return (double)(s->kh * s->kw * s->o);
    return (double)(s->n * oh * ow);
}

/* got against ref within 4 k 2^-24 mag (+1e-30: an exact 0 may be -0);
 * returns the number of elements outside it, the first three printed. */
static int64_t check_close(const char *what, int t, const float *got, const float *ref,
                           const float *mag, int64_t n, double k)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double tol = 4.0 * k * ldexp(1.0, -24) * mag[i] + 1e-30;
        if (!(fabs((double)got[i] - ref[i]) <= tol) && bad++ < 3)
            check_fail(__FILE__, __LINE__, "%s case %d element %lld: %.9g, reference %.9g",
                       what, t, (long long)i, got[i], ref[i]);
    }
    return bad;
}

/* ---- each fast kernel against its reference ---- */

/* The shapes of the grid, each run with strides 1, 2, 3 (both dimensions)
 * under SAME and VALID; a VALID window larger than the input is refused by
 * the shape rule (a negative size) or gives an empty output. */
static const struct shape GRID[] = {
    {1, 5, 5, 1, 3, 3, 1, 0, 0, 0, 1, 1},     /* batch 1, one channel in and out */
    {3, 7, 6, 3, 3, 2, 4, 0, 0, 0, 1, 1},     /* odd sizes, a window wider than tall */
    {2, 8, 9, 5, 1, 1, 7, 0, 0, 0, 1, 1},     /* 1x1: the path without im2col at stride 1 */
    {2, 3, 2, 2, 5, 4, 3, 0, 0, 0, 1, 1},     /* a window larger than the input */
    {2, 11, 13, 17, 4, 3, 9, 0, 0, 0, 1, 1},  /* an even window (SAME pads one more after) */
    {1, 6, 1, 4, 3, 1, 2, 0, 0, 0, 1, 1},     /* a width of 1 */
    {4, 4, 4, 33, 2, 2, 31, 0, 0, 0, 1, 1},   /* more channels */
    {1, 9, 9, 2, 9, 9, 3, 0, 0, 0, 1, 1},     /* a window the size of the input */
};
#define N_GRID (int)(sizeof GRID / sizeof GRID[0])

/* Shapes whose images' im2col rows (KH*KW*C floats each) take several
 * blocks of 4 MiB: 5x5x200 gives blocks of 209 rows, so an image of 289
 * (or 169) rows takes two, the second shorter; 3x3x1000 gives 116 rows, so
 * a 25x25 image (625 rows) takes six, and a 12x23 one (276) three. */
static const struct shape BLOCKS[] = {
    {3, 17, 17, 200, 5, 5, 5, 1, 1, 1, 1, 1},
    {3, 17, 17, 200, 5, 5, 5, 1, 1, 0, 1, 1},
    {1, 25, 25, 1000, 3, 3, 4, 1, 1, 1, 1, 1},
    {2, 25, 25, 1000, 3, 3, 2, 2, 1, 0, 1, 1},
};
#define N_BLOCKS (int)(sizeof BLOCKS / sizeof BLOCKS[0])

/* One shape: the forward on x and f, then both gradients from a random dy
 * of the forward's shape, each fast kernel against its reference kernel
 * (returns 0 when the shape rule refuses the shape). Then, under the
 * determinism switch, each op through the dispatcher on CPU:0 and on
 * GPU:1: the direct fast kernel's bits, and those of a second run. */
static int check_shape(int t, const struct shape *s, int dispatch)
{
    int64_t nx = s->n * s->h * s->w * s->c, nf = s->kh * s->kw * s->c * s->o;
    float *x = rand_buf(nx), *f = rand_buf(nf);
    float *ax = abs_of(x, nx), *af = abs_of(f, nf);
    const float *in[3] = {x, f, NULL}, *ain[3] = {ax, af, NULL};
    struct vdev_kernel_args a;
    if (!args_of(VDEV_OP_CONV2D, s, in, &a, NULL)) {
        free(x), free(f), free(ax), free(af);
        return 0;
    }
    int64_t dys[4] = {a.out_shape[0][0], a.out_shape[0][1], a.out_shape[0][2], a.out_shape[0][3]};
    int64_t ndy = dys[0] * dys[1] * dys[2] * dys[3];
    float *dy = rand_buf(ndy), *ady = abs_of(dy, ndy);
    in[2] = dy;
    ain[2] = ady;
    for (int op = 0; op < 3; op++) {
        struct vdev_kernel_args ar, am, af_;
        int64_t n = 0;
        CHECK(args_of(OPS[op], s, in, &ar, dys) && args_of(OPS[op], s, ain, &am, dys) &&
              args_of(OPS[op], s, in, &af_, dys));
        float *ref = run(&ar, REF[op], &n), *mag = run(&am, REF[op], &n);
        float *got = run(&af_, FAST[op], &n);
        CHECK(check_close(vdev_op_defs[OPS[op]].name, t, got, ref, mag, n,
                          terms_of(op, s, dys[1], dys[2])) == 0);
        if (dispatch && n > 0) {
            vdev_config_set_deterministic(true);
            struct vdev_kernel_args ad;
            int64_t nd = 0;
            CHECK(args_of(OPS[op], s, in, &ad, dys) && ad.i[3] == 1);
            float *want = run(&ad, FAST[op], &nd);
            float *again = run(&ad, FAST[op], &nd);
            CHECK(memcmp(want, again, (size_t)n * sizeof(float)) == 0);
            struct vdev_op_params p = params_of(s);
            for (int d = 0; d < 2; d++) {
                CHECK_OK(vdev_device_push(d ? "GPU:1" : "CPU:0"));
                CHECK_OK(vdev_scope_begin());
                int64_t sh[3][4] = {{s->n, s->h, s->w, s->c}, {s->kh, s->kw, s->c, s->o},
                                    {dys[0], dys[1], dys[2], dys[3]}};
                const vdev_tensor_t *tin[3];
                for (int k = 0; k < 3; k++)
                    tin[k] = vdev_tensor_from_host(in[k], sh[k], 4, VDEV_F32);
                vdev_tensor_t *y = vdev_op_run(OPS[op], tin, op ? 3 : 2, &p);
                float *v = malloc((size_t)n * sizeof(float));
                CHECK(y && v && vdev_tensor_numel(y) == n &&
                      vdev_tensor_to_host(y, v, (size_t)n * sizeof(float)) == VDEV_OK &&
                      memcmp(v, want, (size_t)n * sizeof(float)) == 0);
                free(v);
                vdev_scope_end();
                CHECK_OK(vdev_device_pop());
            }
            free(want);
            free(again);
            vdev_config_set_deterministic(false);
        }
        free(ref);
        free(mag);
        free(got);
    }
    free(x), free(f), free(ax), free(af), free(dy), free(ady);
    return 1;
}

static void test_against_reference(void)
{
    int ran = 0, t = 0;
    for (int b = 0; b < N_GRID; b++)
        for (int st = 1; st <= 3; st++)
            for (int same = 0; same < 2; same++, t++) {
                struct shape s = GRID[b];
                s.sh = s.sw = st;
                s.same = same;
                ran += check_shape(t, &s, 1);
            }
    /* every SAME case runs; VALID's window larger than the input does not
     * (case 3, strides 1; case 4's 4-row window fits 11 rows) */
    CHECK(ran == t - 1);
    /* dilated: each shape of the grid with three dilations, strides 1 and
     * 2; a dilated window larger than a VALID input is refused, so only
     * the SAME runs are counted (every one runs) */
    static const int64_t DIL[3][2] = {{2, 1}, {1, 3}, {2, 2}};
    int same_ran = 0, same_cases = 0;
    for (int b = 0; b < N_GRID; b++)
        for (int d = 0; d < 3; d++)
            for (int st = 1; st <= 2; st++)
                for (int same = 0; same < 2; same++, t++) {
                    struct shape s = GRID[b];
                    s.sh = s.sw = st;
                    s.same = same;
                    s.dh = DIL[d][0];
                    s.dw = DIL[d][1];
                    int ok = check_shape(t, &s, b == 1 && st == 1);
                    same_ran += same && ok;
                    same_cases += same;
                }
    CHECK(same_cases == N_GRID * 6 && same_ran == same_cases);
    for (int b = 0; b < N_BLOCKS; b++, t++)
        CHECK(check_shape(t, &BLOCKS[b], b == 0));
    /* several blocks of rows, dilated */
    struct shape big = BLOCKS[2];
    big.dh = 2;
    big.dw = 3;
    CHECK(check_shape(t++, &big, 0));
}

/* ---- empty outputs ---- */

/* A VALID window larger than the input at stride 2 (no output pixel), and
 * a filter with no output channel: dx is zeros, dF zeros (or empty). The
 * buffers start as NaN, so an element left unwritten fails. */
static void test_empty(void)
{
    const struct shape s[2] = {{2, 3, 2, 2, 5, 4, 3, 2, 2, 0, 1, 1},
                               {2, 5, 4, 3, 3, 3, 0, 1, 1, 1, 1, 1}};
    for (int c = 0; c < 2; c++) {
        float *x = rand_buf(s[c].n * s[c].h * s[c].w * s[c].c);
        float *f = rand_buf(s[c].kh * s[c].kw * s[c].c * s[c].o);
        const float *in[3] = {x, f, x}; /* dy has no element */
        struct vdev_kernel_args a;
        CHECK(args_of(VDEV_OP_CONV2D, &s[c], in, &a, NULL));
        int64_t dys[4] = {a.out_shape[0][0], a.out_shape[0][1], a.out_shape[0][2],
                          a.out_shape[0][3]};
        CHECK(dys[0] * dys[1] * dys[2] * dys[3] == 0);
        for (int op = 1; op < 3; op++) {
            int64_t n = 0, zeros = 0;
            CHECK(args_of(OPS[op], &s[c], in, &a, dys));
            float *got = run(&a, FAST[op], &n);
            for (int64_t i = 0; i < n; i++)
                zeros += got[i] == 0.0f;
            CHECK(zeros == n && n == (op == 1 ? 2 * s[c].h * s[c].w * s[c].c
                                              : s[c].kh * s[c].kw * s[c].c * s[c].o));
            free(got);
        }
        free(x);
        free(f);
    }
}

/* ---- a scratch buffer refused ---- */

/* Each kernel's buffers refused in turn (the filter's gradient has two over
 * several blocks): the reference kernel's bits; the countdown is used up. */
static void test_no_scratch(void)
{
    const struct shape s = {3, 17, 17, 200, 5, 5, 5, 1, 1, 1, 1, 1};
    int64_t nx = s.n * s.h * s.w * s.c, nf = s.kh * s.kw * s.c * s.o;
    int64_t ndy = s.n * s.h * s.w * s.o;
    float *x = rand_buf(nx), *f = rand_buf(nf), *dy = rand_buf(ndy);
    const float *in[3] = {x, f, dy};
    int64_t dys[4] = {s.n, s.h, s.w, s.o};
    for (int op = 0; op < 3; op++)
        for (int which = 1; which <= (op == 2 ? 2 : 1); which++) {
            struct vdev_kernel_args a;
            int64_t n = 0;
            CHECK(args_of(OPS[op], &s, in, &a, dys));
            float *ref = run(&a, REF[op], &n);
            vdev_conv_fast_fail_alloc(which);
            float *got = run(&a, FAST[op], &n);
            CHECK(memcmp(got, ref, (size_t)n * sizeof(float)) == 0);
            /* used up: the next call has its buffers, and its own bits */
            float *again = run(&a, FAST[op], &n);
            CHECK(memcmp(again, ref, (size_t)n * sizeof(float)) != 0);
            vdev_conv_fast_fail_alloc(0);
            free(ref);
            free(got);
            free(again);
        }
    free(x);
    free(f);
    free(dy);
}

/* ---- determinism across thread counts ---- */

/* dx and dF of a 3x3 layer on [8,32,32,64] (products of 2^28 multiply-adds:
 * cut into blocks) through the tape on CPU:0 under VDEV_DETERMINISTIC=1,
 * with a budget of two threads, then one: the same bits. (Without the
 * switch the products are split by the thread count; where OpenBLAS's bits
 * depend on a block's size that changes them. On a machine where they do
 * not, check_shape's i[3] check is what shows a gradient op left out of
 * the switch.) */
static void grads_with_budget(const char *threads, float **dx, float **df)
{
    check_fresh(NULL); /* no simulated GPU: one stream, which gets the whole budget */
    setenv("OPENBLAS_NUM_THREADS", threads, 1);
    setenv("VDEV_DETERMINISTIC", "1", 1);
    CHECK_OK(vdev_init());
    CHECK(vdev_config_get_deterministic());
    CHECK_OK(vdev_device_push("CPU:0"));
    CHECK_OK(vdev_scope_begin());
    int64_t sx[4] = {8, 32, 32, 64}, sf[4] = {3, 3, 64, 64};
    vdev_tensor_t *x = vdev_variable(vdev_tensor_uniform(sx, 4, -1, 1, 11));
    vdev_tensor_t *f = vdev_variable(vdev_tensor_uniform(sf, 4, -1, 1, 12));
    vdev_tape_t *tape = vdev_tape_begin();
    CHECK(tape != NULL);
    vdev_tensor_t *loss = vdev_sum_all(vdev_conv2d(x, f, 1, 1, "SAME"));
    vdev_tensor_t *vars[2] = {x, f}, *grads[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient(tape, loss, vars, 2, grads));
    *dx = malloc((size_t)8 * 32 * 32 * 64 * sizeof(float));
    *df = malloc((size_t)3 * 3 * 64 * 64 * sizeof(float));
    CHECK(*dx && *df && grads[0] && grads[1]);
    CHECK_OK(vdev_tensor_to_host(grads[0], *dx, (size_t)8 * 32 * 32 * 64 * sizeof(float)));
    CHECK_OK(vdev_tensor_to_host(grads[1], *df, (size_t)3 * 3 * 64 * 64 * sizeof(float)));
    vdev_tape_end(tape);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
    unsetenv("VDEV_DETERMINISTIC");
}

static void test_deterministic_any_threads(void)
{
    struct vdev_thread_info ti;
    CHECK_OK(vdev_thread_info(&ti));
    if (ti.cpus < 2) {
        printf("one CPU: the budgets of two and one threads are the same; not run\n");
        return;
    }
    float *dx[2], *df[2];
    grads_with_budget("2", &dx[0], &df[0]);
    struct vdev_thread_info t2;
    CHECK_OK(vdev_thread_info(&t2));
    CHECK(t2.deterministic && t2.blas_threads == 2);
    grads_with_budget("1", &dx[1], &df[1]);
    CHECK(dx[0] && dx[1] && memcmp(dx[0], dx[1], (size_t)8 * 32 * 32 * 64 * 4) == 0);
    CHECK(df[0] && df[1] && memcmp(df[0], df[1], (size_t)3 * 3 * 64 * 64 * 4) == 0);
    for (int k = 0; k < 2; k++) {
        free(dx[k]);
        free(df[k]);
    }
    unsetenv("OPENBLAS_NUM_THREADS");
}

int main(void)
{
    rng_state = 0xbb67ae8584caa73bull;
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_against_reference();
    test_empty();
    test_no_scratch();
    CHECK_NO_LEAK("CPU:0");
    CHECK_NO_LEAK("GPU:1");
    test_deterministic_any_threads();
    vdev_shutdown();
    return check_done();
}
