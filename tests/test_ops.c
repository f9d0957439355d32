/* test_ops.c — every op against a reference written here, on the cpu backend
 * and on simulated GPUs.
 *
 * For every enum vdev_op (forward ops, the ops gradients use and the in-place
 * updates) and sizes 0, 1, odd and larger (0x5, 1x1, 3x5, 17x33, 64x130, and
 * variants per op: transposes, broadcast modes, axes, keepdims, ...):
 *  1. random inputs from the test's own generator;
 *  2. the expected output from direct loops in this file (double), never from
 *     the kernel under test;
 *  3. the op through the dispatcher (vdev_op_run / vdev_op_run_inplace) on
 *     the device under test; shape, dtype and values must match within
 *     atol + rtol |expected| (NaN matches NaN);
 *  4. on a simulated GPU, the same op on CPU:0: results must be identical to
 *     the bit (the sim backend runs the same host kernels);
 *  5. the reference kernel (and the host kernel where there is one) called
 *     directly on host buffers with guard zones around every written buffer:
 *     guards untouched, every output element written, inputs unchanged; SGD's
 *     host kernel gives the reference kernel's bits (momentum 0 and on).
 *
 * Tolerances (atol, rtol), by op:
 *   add sub mul div, scalars, relu, identity, transpose, reshape, broadcast,
 *   reduce_rows, relu/tanh/sigmoid grads, mse_grad, sgd, adam,
 *   sqrt                                                      0, 1e-6
 *     (one float rounding of a double result: at most 2^-24 relative)
 *   pow, tanh, sigmoid, exp, log                              1e-6, 1e-5
 *   softmax, log_softmax, their grads, sum, mean, mse, ce     1e-6, 1e-5
 *   matmul (reference kernel)                                 1e-6, 1e-6
 *   matmul (OpenBLAS host kernel)   4 k 2^-24 sum_p |a_ip b_pj| (float
 *     accumulation's error bound), plus 1e-6
 *   argmax                                                    exact
 * Plus the meta-test of the op table. The cases are in ops_cases.h, the
 * expected results in ops_expect.h; errors, values with no defined answer
 * and BLAS against the reference are test_ops_errors.c's. */
#define _GNU_SOURCE
#define _GNU_SOURCE
#include "ops_expect.h"

#define SENTINEL 0x7fa5a5a5u    /* output guards: a NaN payload no kernel produces */
#define SENTINEL_IN 0x7fa5a5a6u /* input guards: differ, so copying one into the other shows */
#define GUARD 64                /* guard words on each side of a buffer */

/* ---- comparisons ---- */

/* Element i of a result as a double. */
static double value_of(const uint32_t *bits, int64_t i, enum vdev_dtype dt)
{
    if (dt != VDEV_F32) { /* int32, or a bool's 0 or 1 */
        int32_t v;
        memcpy(&v, &bits[i], 4);
        return v;
    }
    float f;
    memcpy(&f, &bits[i], 4);
    return f;
}

/* Output k of `r` against the expectation; mtol scales the matmul bound.
 * Returns 1 when everything matched (one CHECK per output). Reports the
 * first bad element only, so a broken kernel does not flood the log. */
static int compare(const char *what, const struct tcase *c, const struct tres *r, int k,
                   const struct texp *e, double mtol)
{
    char got_s[96], exp_s[96];
    int ok = r->ndim[k] == e->ndim[k] && r->dtype[k] == e->dtype[k] &&
             !memcmp(r->shape[k], e->shape[k], sizeof r->shape[k]);
    if (!ok) {
        check_fail(__FILE__, __LINE__, "%s %s output %d: shape %s dtype %d, expected %s dtype %d",
                   what, c->desc, k, vdev_shape_str(r->shape[k], r->ndim[k], got_s, sizeof got_s),
                   r->dtype[k], vdev_shape_str(e->shape[k], e->ndim[k], exp_s, sizeof exp_s),
                   e->dtype[k]);
        return 0;
    }
    /* values: a NaN must meet a NaN, an infinity the same infinity (inf - inf
     * is NaN, never within a tolerance); anything else the tolerance */
    for (int64_t i = 0; i < e->numel[k]; i++) {
        double got = value_of(r->bits[k], i, r->dtype[k]), want = e->v[k][i];
        if ((isnan(want) && isnan(got)) || (isinf(want) && got == want))
            continue;
        double tol = e->atol + e->rtol * fabs(want) + (e->mag[k] ? mtol * e->mag[k][i] : 0.0);
        if (!(fabs(got - want) <= tol)) {
            check_fail(__FILE__, __LINE__,
                       "%s %s output %d element %lld: %.9g, expected %.9g "
                       "(tolerance %.3g)",
                       what, c->desc, k, (long long)i, got, want, tol);
            return 0;
        }
    }
    check_passed++;
    return 1;
}

/* Frees a result's arrays. */
static void res_free(struct tres *r)
{
    for (int k = 0; k < VDEV_KERNEL_MAX_IN; k++)
        free(r->bits[k]);
    memset(r, 0, sizeof *r);
}

/* Copies tensor t into result slot k: shape, dtype and words (to_host
 * waits for the device's stream). */
static void res_take(struct tres *r, int k, const vdev_tensor_t *t)
{
    r->ndim[k] = vdev_tensor_ndim(t);
    for (int d = 0; d < VDEV_MAX_DIMS; d++)
        r->shape[k][d] = d < r->ndim[k] ? vdev_tensor_dim(t, d) : 1;
    r->dtype[k] = vdev_tensor_dtype(t);
    r->numel[k] = vdev_tensor_numel(t);
    r->bits[k] = calloc((size_t)(r->numel[k] + 1), 4);
    CHECK_OK(vdev_tensor_to_host(t, r->bits[k], (size_t)r->numel[k] * 4));
    if (k >= r->n)
        r->n = k + 1;
}

/* Runs the case through the dispatcher on `dev`; 0 on failure. The inputs
 * are made under the device scope, so the op runs there; the output must be
 * on the same device. In-place ops return their (updated) inputs. */
static int run_on(const char *dev, const struct tcase *c, struct tres *r)
{
    memset(r, 0, sizeof *r);
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *t[VDEV_KERNEL_MAX_IN] = {0};
    int ok = 1;
    for (int k = 0; k < c->n_in; k++) {
        const struct hin *h = &c->in[k];
        t[k] = vdev_tensor_from_host(h->data, h->shape, h->ndim, h->dtype);
        ok = ok && t[k];
    }
    if (ok && (vdev_op_defs[c->op].flags & VDEV_OP_INPLACE)) {
        enum vdev_status st = vdev_op_run_inplace(c->op, t, c->n_in, &c->p);
        if (st != VDEV_OK) {
            check_fail(__FILE__, __LINE__, "%s on %s: %s", c->desc, dev, vdev_last_error());
            ok = 0;
        }
        for (int k = 0; ok && k < c->n_in; k++)
            res_take(r, k, t[k]);
    } else if (ok) {
        const vdev_tensor_t *in[VDEV_KERNEL_MAX_IN] = {t[0], t[1], t[2], t[3]};
        vdev_tensor_t *out = vdev_op_run(c->op, in, c->n_in, &c->p);
        if (!out) {
            check_fail(__FILE__, __LINE__, "%s on %s: %s", c->desc, dev, vdev_last_error());
            ok = 0;
        } else {
            CHECK_STR(vdev_tensor_device(out), vdev_tensor_device(t[0]));
            res_take(r, 0, out);
        }
    }
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
    return ok;
}

/* Two results identical to the bit: the sim GPU runs the same host kernels
 * as the cpu backend, on another thread, so nothing may differ. */
static void same_bits(const char *what, const struct tcase *c, const struct tres *x,
                      const struct tres *y)
{
    int ok = x->n == y->n;
    for (int k = 0; ok && k < x->n; k++)
        ok = x->numel[k] == y->numel[k] && x->ndim[k] == y->ndim[k] &&
             !memcmp(x->bits[k], y->bits[k], (size_t)x->numel[k] * 4);
    if (ok)
        check_passed++;
    else
        check_fail(__FILE__, __LINE__, "%s: %s differs", what, c->desc);
}

/* ---- kernels called directly, with guard zones ----
 *
 * The allocator rounds blocks to 256 bytes, so a kernel writing past its
 * output through the dispatcher would go unseen. Here every buffer a kernel
 * may write sits between GUARD words of a sentinel, and every output word
 * starts as the sentinel: afterwards the guards must be intact and no
 * output word may still be the sentinel. */

/* A buffer of n words with guards on both sides. */
struct gbuf {
    uint32_t *mem;
    int64_t n;
    uint32_t sentinel;
};

static uint32_t *gbuf_new(struct gbuf *g, int64_t n, uint32_t sentinel)
{
    g->n = n;
    g->sentinel = sentinel;
    g->mem = malloc((size_t)(n + 2 * GUARD) * 4);
    for (int64_t i = 0; i < n + 2 * GUARD; i++)
        g->mem[i] = sentinel;
    return g->mem + GUARD;
}

/* Guards intact; `all_written`: no element still holds the sentinel (an
 * element the kernel skipped). */
static int gbuf_ok(const struct gbuf *g, int all_written)
{
    for (int64_t i = 0; i < GUARD; i++)
        if (g->mem[i] != g->sentinel || g->mem[GUARD + g->n + i] != g->sentinel)
            return 0;
    for (int64_t i = 0; all_written && i < g->n; i++)
        if (g->mem[GUARD + i] == g->sentinel)
            return 0;
    return 1;
}

/* Runs kernel fn on host buffers with guards; fills r with its outputs. */
static void run_kernel_direct(const char *what, vdev_kernel_fn fn, const struct tcase *c,
                              struct tres *r)
{
    const struct vdev_op_def *def = &vdev_op_defs[c->op];
    struct vdev_kernel_args a;
    memset(&a, 0, sizeof a);
    memset(r, 0, sizeof *r);
    a.op = (int)c->op;
    a.n_in = c->n_in;
    struct gbuf g[VDEV_KERNEL_MAX_IN];
    uint32_t *copy[VDEV_KERNEL_MAX_IN];
    for (int k = 0; k < c->n_in; k++) {
        const struct hin *h = &c->in[k];
        /* inputs in guarded copies too: in place they are the outputs */
        copy[k] = gbuf_new(&g[k], h->n, SENTINEL_IN);
        memcpy(copy[k], h->data, (size_t)h->n * 4);
        a.in[k] = copy[k];
        a.in_ndim[k] = h->ndim;
        a.in_dtype[k] = (int)h->dtype;
        memcpy(a.in_shape[k], h->shape, sizeof a.in_shape[k]);
    }
    memcpy(a.f, c->p.f, sizeof a.f);
    memcpy(a.i, c->p.i, sizeof a.i);
    memcpy(a.j, c->p.j, sizeof a.j);
    /* the shape rule fills the output's shape and normalises parameters,
     * exactly as the dispatcher would */
    enum vdev_status st = def->shape(&a);
    if (st != VDEV_OK) {
        check_fail(__FILE__, __LINE__, "%s: shape rule of %s: %s", what, c->desc,
                   vdev_last_error());
        for (int k = 0; k < c->n_in; k++)
            free(g[k].mem);
        return;
    }
    int inplace = (def->flags & VDEV_OP_INPLACE) != 0;
    struct gbuf go = {NULL, 0, SENTINEL};
    if (inplace) {
        CHECK(a.n_out == 0);
        for (int k = 0; k < c->n_in; k++)
            a.out[k] = copy[k];
    } else {
        CHECK(a.n_out == 1);
        a.out[0] = gbuf_new(&go, numel_of(a.out_shape[0], a.out_ndim[0]), SENTINEL);
    }
    /* unlike the dispatcher, call the kernel even for empty outputs: it must
     * then write nothing */
    fn(&a);
    /* every guard intact; inputs of a non-in-place op unchanged */
    int ok = 1;
    for (int k = 0; k < c->n_in; k++)
        ok = ok && gbuf_ok(&g[k], 0) &&
             (inplace || !memcmp(copy[k], c->in[k].data, (size_t)c->in[k].n * 4));
    if (!inplace)
        ok = ok && gbuf_ok(&go, 1);
    if (ok)
        check_passed++;
    else
        check_fail(__FILE__, __LINE__, "%s: %s wrote outside its output or skipped an element",
                   what, c->desc);
    /* collect the outputs */
    int nres = inplace ? c->n_in : 1;
    r->n = nres;
    for (int k = 0; k < nres; k++) {
        int64_t nel = inplace ? c->in[k].n : go.n;
        r->ndim[k] = inplace ? c->in[k].ndim : a.out_ndim[0];
        memcpy(r->shape[k], inplace ? c->in[k].shape : a.out_shape[0], sizeof r->shape[k]);
        r->dtype[k] = inplace ? c->in[k].dtype : (enum vdev_dtype)a.out_dtype[0];
        r->numel[k] = nel;
        r->bits[k] = calloc((size_t)(nel + 1), 4);
        memcpy(r->bits[k], inplace ? copy[k] : go.mem + GUARD, (size_t)nel * 4);
    }
    for (int k = 0; k < c->n_in; k++)
        free(g[k].mem);
    free(go.mem);
}

/* ---- the sweep over every op, size and variant ---- */

/* Ops whose host kernel promises the reference's bits, not just its
 * tolerance: SGD computes as the reference does (kernels_fast.c), for
 * momentum 0 (no velocity) as for momentum on. */
static int host_same_bits(enum vdev_op op)
{
    return op == VDEV_OP_SGD_UPDATE;
}

/* Every case on `dev`; on a GPU also on CPU:0, bit for bit. `direct`: also
 * run the kernels on host buffers (once per case is enough). An op with no
 * case at all fails: a new op must come with its test. */
#define N_VARIANTS 32 /* the variants the sweep runs of every op and size */

static void sweep(const char *dev, int vs_cpu, int direct)
{
    int n_cases = 0;
    for (int op = 0; op < VDEV_OP_COUNT; op++) {
        int op_cases = 0;
        for (int size = 0; size < N_SIZES; size++)
            for (int var = 0; var < N_VARIANTS; var++) {
                struct tcase c;
                if (!build((enum vdev_op)op, size, var, &c)) {
                    case_free(&c);
                    continue;
                }
                op_cases++;
                /* the expectation first, from the host inputs alone */
                struct texp e;
                expect(&c, &e);
                /* Host kernels that accumulate or compute in float: BLAS, k ulps
                 * of sum |a b|; the row sum, rows ulps of sum |dy| (mag, set by expect()). */
                double mm_k = 0.0;
                if (op == VDEV_OP_MATMUL)
                    mm_k = (double)c.in[0].shape[c.p.i[0] ? 0 : 1];
                else if (op == VDEV_OP_BATCH_MATMUL)
                    mm_k = (double)c.in[0].shape[c.p.i[0] ? 1 : 2];
                else if (op == VDEV_OP_REDUCE_ROWS && e.numel[0])
                    mm_k = (double)c.in[0].n / (double)e.numel[0];
                else if (op == VDEV_OP_ADAM_UPDATE || op == VDEV_OP_GRU_GATES)
                    mm_k = 4.0; /* float Adam, GRU's hh: 16 ulps of the terms (mag) */
                double mtol_host = 4.0 * mm_k * ldexp(1.0, -24);
                /* through the dispatcher on dev (and on CPU:0 to compare) */
                struct tres r;
                if (run_on(dev, &c, &r)) {
                    for (int k = 0; k < e.n; k++)
                        compare(dev, &c, &r, k, &e, mtol_host);
                    if (vs_cpu) {
                        struct tres rc;
                        if (run_on("CPU:0", &c, &rc))
                            same_bits("GPU vs CPU", &c, &r, &rc);
                        res_free(&rc);
                    }
                }
                res_free(&r);
                const struct vdev_op_def *def = &vdev_op_defs[op];
                if (direct && !(def->flags & VDEV_OP_VIEW)) {
                    struct tres rd, rh;
                    run_kernel_direct("reference kernel", def->ref, &c, &rd);
                    /* the references compute in double, but GRUGates', which
                     * gives the composed ops' float bits */
                    for (int k = 0; k < rd.n && k < e.n; k++)
                        compare("reference kernel", &c, &rd, k, &e,
                                op == VDEV_OP_GRU_GATES ? mtol_host : 1e-12);
                    if (def->host) {
                        run_kernel_direct("host kernel", def->host, &c, &rh);
                        for (int k = 0; k < rh.n && k < e.n; k++)
                            compare("host kernel", &c, &rh, k, &e, mtol_host);
                        if (host_same_bits((enum vdev_op)op))
                            same_bits("host vs reference kernel", &c, &rh, &rd);
                        res_free(&rh);
                    }
                    res_free(&rd);
                }
                exp_free(&e);
                case_free(&c);
            }
        if (op_cases == 0)
            check_fail(__FILE__, __LINE__, "no test case for op %s", vdev_op_defs[op].name);
        /* a case past the loop's bound would never run: fail loudly instead */
        for (int size = 0; size < N_SIZES; size++)
            for (int var = N_VARIANTS; var < 2 * N_VARIANTS; var++) {
                struct tcase c;
                if (build((enum vdev_op)op, size, var, &c))
                    check_fail(__FILE__, __LINE__,
                               "%s has a case of variant %d, which the sweep (variants below "
                               "%d) never runs",
                               vdev_op_defs[op].name, var, N_VARIANTS);
                case_free(&c);
            }
        n_cases += op_cases;
    }
    printf("%s: %d cases\n", dev, n_cases);
}

/* ---- the op table ---- */

/* Every row: a name (unique), a shape rule, a reference kernel, a sane input
 * count, and a gradient unless flagged VDEV_OP_NO_GRAD; in-place ops are
 * never differentiated. */
static void test_meta(void)
{
    for (int op = 0; op < VDEV_OP_COUNT; op++) {
        const struct vdev_op_def *d = &vdev_op_defs[op];
        if (!d->name || !d->name[0] || !d->shape || !d->ref || d->n_in < 1 ||
            d->n_in > VDEV_KERNEL_MAX_IN)
            check_fail(__FILE__, __LINE__,
                       "op %d (%s) lacks a name, shape rule, reference "
                       "kernel or input count",
                       op, d->name ? d->name : "?");
        else if (!d->grad && !(d->flags & VDEV_OP_NO_GRAD))
            check_fail(__FILE__, __LINE__, "op %s has no gradient and no VDEV_OP_NO_GRAD", d->name);
        else if ((d->flags & VDEV_OP_INPLACE) && !(d->flags & VDEV_OP_NO_GRAD))
            check_fail(__FILE__, __LINE__, "in-place op %s must be VDEV_OP_NO_GRAD", d->name);
        else
            check_passed++;
        for (int o = 0; o < op; o++)
            if (d->name && vdev_op_defs[o].name && !strcmp(d->name, vdev_op_defs[o].name))
                check_fail(__FILE__, __LINE__, "ops %d and %d share the name %s", o, op, d->name);
    }
}

/* ---- a run ---- */

int main(void)
{
    /* host-only checks: no runtime needed */
    test_meta();

    /* the cpu backend alone; the direct kernel runs happen once, here */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    sweep("CPU:0", 0, 1);

    /* simulated GPUs: against the reference and against CPU:0, bit for bit */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    sweep("GPU:0", 1, 0);
    sweep("GPU:1", 0, 0); /* the second GPU has its own stream and allocator */
    /* the ops ran where they were placed, and nothing leaked */
    CHECK(vdev_placement_op_count("MatMul", "/device:GPU:0") > 0);
    CHECK(vdev_placement_op_count("ApplyAdam", "/device:GPU:1") > 0);
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK_OK(vdev_memory_info("CPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    vdev_shutdown();
    return check_done();
}
