/* bench_bookkeeping.c — whether vdev's bookkeeping stays linear as counts
 * grow: the cost per item of making and freeing one-element tensors (10k to
 * 1M live), of making them into as many holes of their size (1k to 100k:
 * the allocator's long bins), of a tape that records a chain of ops and its
 * gradient (10k and 100k ops), and of a tape over many variables (1k to
 * 30k), each variable
 * read by one op, with the gradient asked for all of them: watched
 * implicitly (any variable an op reads) or explicitly (vdev_tape_watch on
 * each). A cost per item that grows with the count is a quadratic path.
 * Every figure is the median of 3 runs, on the cpu backend.
 * Usage: bench_bookkeeping [--quick] [--md FILE] */
#define _POSIX_C_SOURCE 200809L
#include "bench_args.h"

#include <vdev.h>

#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double median3(double a, double b, double c)
{
    return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_bookkeeping: %s: %s\n", what, vdev_last_error());
    exit(1);
}

/* ns per tensor to make n one-element tensors (all live), then to free them */
static void tensors(int n, double *make, double *drop)
{
    vdev_tensor_t **ts = malloc((size_t)n * sizeof *ts);
    int64_t sh[1] = {1};
    if (!ts)
        die("host memory");
    double t0 = now();
    for (int i = 0; i < n; i++)
        if (!(ts[i] = vdev_tensor_zeros(sh, 1, VDEV_F32)))
            die("making a tensor");
    double t1 = now();
    for (int i = 0; i < n; i++)
        vdev_tensor_free(ts[i]);
    double t2 = now();
    free(ts);
    *make = (t1 - t0) / n * 1e9;
    *drop = (t2 - t1) / n * 1e9;
}

/* ns per tensor to make n one-element tensors into n holes: 2n made, every
 * other one freed (n holes of 256 bytes between live blocks, one size class
 * of the allocator), then n more made, each into the lowest hole. */
static double holes(int n)
{
    vdev_tensor_t **ts = malloc((size_t)(3 * n) * sizeof *ts);
    int64_t sh[1] = {1};
    if (!ts)
        die("host memory");
    for (int i = 0; i < 2 * n; i++)
        if (!(ts[i] = vdev_tensor_zeros(sh, 1, VDEV_F32)))
            die("making a tensor");
    for (int i = 0; i < 2 * n; i += 2)
        vdev_tensor_free(ts[i]);
    double t0 = now();
    for (int i = 0; i < n; i++)
        if (!(ts[2 * n + i] = vdev_tensor_zeros(sh, 1, VDEV_F32)))
            die("making a tensor");
    double t1 = now();
    for (int i = 1; i < 2 * n; i += 2)
        vdev_tensor_free(ts[i]);
    for (int i = 2 * n; i < 3 * n; i++)
        vdev_tensor_free(ts[i]);
    free(ts);
    return (t1 - t0) / n * 1e9;
}

/* ns per op to record a chain of n ops from one variable, and of its gradient */
static void chain(int n, double *rec, double *grad)
{
    int64_t sh[1] = {1};
    vdev_tensor_t *v = vdev_variable(vdev_tensor_ones(sh, 1, VDEV_F32)), *g[1];
    vdev_tape_t *tp = vdev_tape_begin();
    if (!v || !tp || vdev_scope_begin() != VDEV_OK)
        die("starting the chain");
    double t0 = now();
    vdev_tensor_t *x = v;
    for (int i = 0; i < n; i++)
        if (!(x = vdev_add_scalar(x, 1.0f)))
            die("an op of the chain");
    double t1 = now();
    if (vdev_tape_gradient(tp, x, &v, 1, g) != VDEV_OK)
        die("the chain's gradient");
    double t2 = now();
    vdev_tape_end(tp);
    vdev_scope_end();
    vdev_tensor_free(v);
    *rec = (t1 - t0) / n * 1e9;
    *grad = (t2 - t1) / n * 1e9;
}

/* ns per variable: n variables, each read by one op, the gradient asked for
 * all; explicit: watched one by one first (*watch), else *watch is 0 */
static void vars(int n, int explicit_watch, double *watch, double *ops, double *grad)
{
    vdev_tensor_t **vs = malloc((size_t)n * sizeof *vs), **g = malloc((size_t)n * sizeof *g);
    int64_t sh[1] = {1};
    if (!vs || !g)
        die("host memory");
    for (int i = 0; i < n; i++)
        if (!(vs[i] = vdev_variable(vdev_tensor_ones(sh, 1, VDEV_F32))))
            die("making a variable");
    vdev_tape_t *tp = vdev_tape_begin_ex(explicit_watch ? VDEV_TAPE_WATCH_EXPLICIT : 0);
    if (!tp)
        die("beginning the tape");
    double t0 = now();
    for (int i = 0; explicit_watch && i < n; i++)
        if (vdev_tape_watch(tp, vs[i]) != VDEV_OK)
            die("watching");
    double t1 = now();
    if (vdev_scope_begin() != VDEV_OK)
        die("a scope");
    vdev_tensor_t *acc = vdev_mul(vs[0], vs[0]);
    for (int i = 1; i < n && acc; i++)
        acc = vdev_add(acc, vs[i]);
    if (!acc)
        die("the sum");
    double t2 = now();
    if (vdev_tape_gradient(tp, acc, vs, n, g) != VDEV_OK)
        die("the gradient");
    double t3 = now();
    vdev_tape_end(tp);
    vdev_scope_end();
    for (int i = 0; i < n; i++)
        vdev_tensor_free(vs[i]);
    free(vs);
    free(g);
    *watch = explicit_watch ? (t1 - t0) / n * 1e9 : 0;
    *ops = (t2 - t1) / n * 1e9;
    *grad = (t3 - t2) / n * 1e9;
}

int main(int argc, char **argv)
{
    struct bench_args a;
    int rc = bench_args_parse(argc, argv, "bench_bookkeeping", 0, &a);
    if (rc)
        return rc;
    if (vdev_device_push("/device:CPU:0") != VDEV_OK)
        die("start-up");
    FILE *md = a.md ? fopen(a.md, "w") : NULL;
    if (a.md && !md) {
        fprintf(stderr, "bench_bookkeeping: cannot write %s\n", a.md);
        return 1;
    }
    FILE *out[2] = {stdout, md};
    for (int k = 0; k < 2; k++)
        if (out[k])
            fprintf(out[k], "| what | count | ns per item (median of 3) |\n|---|---:|---|\n");
    static const int tn[3] = {10000, 100000, 1000000}, cn[2] = {10000, 100000};
    static const int vn[3] = {1000, 10000, 30000};
    double r[3][3];
    for (int i = 0; i < (a.quick ? 2 : 3); i++) {
        for (int t = 0; t < 3; t++)
            tensors(tn[i], &r[t][0], &r[t][1]);
        for (int k = 0; k < 2; k++)
            if (out[k])
                fprintf(out[k], "| one-element tensors: make, free | %d | %.0f, %.0f |\n", tn[i],
                        median3(r[0][0], r[1][0], r[2][0]), median3(r[0][1], r[1][1], r[2][1]));
    }
    static const int hn[3] = {1000, 10000, 100000};
    for (int i = 0; i < (a.quick ? 2 : 3); i++) {
        for (int t = 0; t < 3; t++)
            r[t][0] = holes(hn[i]);
        for (int k = 0; k < 2; k++)
            if (out[k])
                fprintf(out[k], "| one-element tensors made into as many holes of their size | %d "
                                "| %.0f |\n", hn[i], median3(r[0][0], r[1][0], r[2][0]));
    }
    for (int i = 0; i < 2; i++) {
        for (int t = 0; t < 3; t++)
            chain(cn[i], &r[t][0], &r[t][1]);
        for (int k = 0; k < 2; k++)
            if (out[k])
                fprintf(out[k], "| tape, chain of ops: record, gradient | %d | %.0f, %.0f |\n",
                        cn[i], median3(r[0][0], r[1][0], r[2][0]),
                        median3(r[0][1], r[1][1], r[2][1]));
    }
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < (a.quick ? 2 : 3); i++) {
            for (int t = 0; t < 3; t++)
                vars(vn[i], e, &r[t][0], &r[t][1], &r[t][2]);
            double w = median3(r[0][0], r[1][0], r[2][0]), o = median3(r[0][1], r[1][1], r[2][1]);
            double g = median3(r[0][2], r[1][2], r[2][2]);
            for (int k = 0; k < 2; k++) {
                if (!out[k])
                    continue;
                if (e)
                    fprintf(out[k], "| tape, variables watched explicitly: watch, op, gradient "
                                    "| %d | %.0f, %.0f, %.0f |\n", vn[i], w, o, g);
                else
                    fprintf(out[k], "| tape, variables read by ops: op, gradient | %d | %.0f, "
                                    "%.0f |\n", vn[i], o, g);
            }
        }
    if (md)
        fclose(md);
    vdev_device_pop();
    vdev_shutdown();
    return 0;
}
