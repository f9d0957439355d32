/* bench_step.h — what the step benchmarks share (bench_ops.c, bench_scaling.c):
 * training steps of MLPs through vdev's public API, the same step's matrix
 * products run alone through cblas_sgemm, and a timer that alternates the two.
 *
 * A model is an MLP d0-d1-d2-d3 (ReLU between layers, no activation at the
 * end), trained with Adam (lr 0.001, betas 0.9 and 0.999, epsilon 1e-7) on
 * a mean squared error against a fixed target, or on softmax cross-entropy
 * against fixed labels. A chain of models feeds each model's output to the
 * next, each model on its own device, its own tape and its own Adam (as
 * examples/chain3.c does); a model's input from the model before it takes
 * no gradient.
 *
 * "Its products" are the step's 8 matrix products per model — 3 forward,
 * 3 weight gradients, 2 input gradients between layers — on operands of
 * their own, laid out as in the step: each layer's weights, activations and
 * gradients in separate buffers, so the products read and write as much
 * memory as they do inside the step. Both are timed in turns (products,
 * step, products, step, ...), so a disturbance from other work on the
 * machine hits both alike; the median and the minimum of the turns are
 * reported. The products alone run as OpenBLAS runs them by itself: on its
 * own threads, as many as vdev gives one product (vdev_thread_info's
 * blas_threads: the whole budget with one stream, one with two or more),
 * set around them and put back to one after (vdev keeps OpenBLAS at one
 * thread and splits a product over its own pool). */
#ifndef VDEV_BENCH_STEP_H
#define VDEV_BENCH_STEP_H

#define _POSIX_C_SOURCE 200809L
#include "vdev.h"

#include "bench_stats.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_MODELS 8

static void bench_die(const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, vdev_last_error());
    exit(1);
}

/* Restarts vdev with VDEV_SIM_GPUS=sim (NULL: no simulated GPU). */
static void bench_restart(const char *sim)
{
    vdev_shutdown();
    if (sim)
        setenv("VDEV_SIM_GPUS", sim, 1);
    else
        unsetenv("VDEV_SIM_GPUS");
    if (vdev_init() != VDEV_OK)
        bench_die("start-up");
}

/* ---- the products alone ---- */

struct bench_prods {
    int d[4], batch;
    float *x, *w[3], *h[3], *gh[3], *dw[3]; /* h[l] = output of layer l, gh its gradient */
};

static float *bench_buf(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 7919u) % 13u) * 0.01f - 0.06f;
    return p;
}

static void bench_prods_init(struct bench_prods *p, const int *d, int batch)
{
    memcpy(p->d, d, sizeof p->d);
    p->batch = batch;
    p->x = bench_buf((size_t)batch * (size_t)d[0]);
    for (int l = 0; l < 3; l++) {
        p->w[l] = bench_buf((size_t)d[l] * (size_t)d[l + 1]);
        p->dw[l] = bench_buf((size_t)d[l] * (size_t)d[l + 1]);
        p->h[l] = bench_buf((size_t)batch * (size_t)d[l + 1]);
        p->gh[l] = bench_buf((size_t)batch * (size_t)d[l + 1]);
    }
}

static void bench_prods_free(struct bench_prods *p)
{
    free(p->x);
    for (int l = 0; l < 3; l++) {
        free(p->w[l]);
        free(p->dw[l]);
        free(p->h[l]);
        free(p->gh[l]);
    }
}

/* The forward pass's 3 products. */
static void bench_prods_forward(const struct bench_prods *p)
{
    const int *d = p->d, B = p->batch;
    const float *in = p->x;
    for (int l = 0; l < 3; l++) { /* h[l] = in W[l] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, d[l + 1], d[l], 1.0f, in, d[l],
                    p->w[l], d[l + 1], 0.0f, p->h[l], d[l + 1]);
        in = p->h[l];
    }
}

/* The gradients' 5 products, in the step's order. */
static void bench_prods_backward(const struct bench_prods *p)
{
    const int *d = p->d, B = p->batch;
    for (int l = 2; l >= 0; l--) {
        if (l > 0) /* gh[l-1] = gh[l] W[l]^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, d[l], d[l + 1], 1.0f,
                        p->gh[l], d[l + 1], p->w[l], d[l + 1], 0.0f, p->gh[l - 1], d[l]);
        const float *x = l ? p->h[l - 1] : p->x; /* dW[l] = x^T gh[l] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d[l], d[l + 1], B, 1.0f, x, d[l],
                    p->gh[l], d[l + 1], 0.0f, p->dw[l], d[l + 1]);
    }
}

/* One step's 8 products, in the step's order. */
static void bench_prods_run(const struct bench_prods *p)
{
    bench_prods_forward(p);
    bench_prods_backward(p);
}

/* ---- vdev's step ---- */

struct bench_model {
    const char *dev;
    vdev_mlp_t *mlp;
    vdev_optimizer_t *opt;
    vdev_tensor_t *vars[6];
    vdev_tensor_t *target; /* MSE target [batch, d3], or labels [batch] (cross-entropy) */
    int ce;
};

static void bench_model_init(struct bench_model *m, const char *dev, const int *d, int batch,
                             int ce, uint64_t seed)
{
    int64_t sizes[4] = {d[0], d[1], d[2], d[3]};
    m->dev = dev;
    m->ce = ce;
    vdev_device_push(dev);
    m->mlp = vdev_mlp_new(sizes, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, seed);
    if (ce) {
        int32_t *labels = malloc((size_t)batch * sizeof *labels);
        if (!labels)
            bench_die("labels");
        for (int i = 0; i < batch; i++)
            labels[i] = (int32_t)(i % d[3]);
        int64_t ls[1] = {batch};
        m->target = vdev_tensor_from_host(labels, ls, 1, VDEV_I32);
        free(labels);
    } else {
        int64_t ts[2] = {batch, d[3]};
        m->target = vdev_tensor_uniform(ts, 2, -1, 1, seed + 1000);
    }
    vdev_device_pop();
    m->opt = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
    if (!m->mlp || !m->target || !m->opt || vdev_mlp_variables(m->mlp, m->vars, 6) != 6)
        bench_die("making a model");
}

static void bench_model_free(struct bench_model *m)
{
    vdev_mlp_free(m->mlp);
    vdev_optimizer_free(m->opt);
    vdev_tensor_free(m->target);
}

/* Where a step's time goes, in seconds summed over steps (bench_chain_phases):
 * the forward pass with the loss, the gradients, the optimizer. Meaningful on
 * the cpu backend only, whose ops run on the calling thread as they are
 * called. */
enum { PH_FORWARD, PH_GRADIENT, PH_OPTIMIZER, PH_COUNT };

/* One training step of m on input x; returns the model's output (in the
 * caller's scope). With `phase`, adds each phase's wall time to it. */
static const vdev_tensor_t *bench_model_step(struct bench_model *m, const vdev_tensor_t *x,
                                             double *phase)
{
    double t0 = phase ? vdev_clock_seconds() : 0;
    vdev_device_push(m->dev);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = vdev_mlp_forward(m->mlp, x);
    vdev_tensor_t *loss = m->ce ? vdev_softmax_cross_entropy(y, m->target) : vdev_mse(y, m->target);
    double t1 = phase ? vdev_clock_seconds() : 0;
    vdev_tensor_t *g[6];
    if (vdev_tape_gradient(tape, loss, m->vars, 6, g) != VDEV_OK)
        bench_die("a training step's gradients");
    vdev_tape_end(tape); /* before the update: a live tape would keep the old values */
    double t2 = phase ? vdev_clock_seconds() : 0;
    if (vdev_optimizer_apply(m->opt, m->vars, g, 6) != VDEV_OK)
        bench_die("a training step's update");
    vdev_device_pop();
    if (phase) {
        double t3 = vdev_clock_seconds();
        phase[PH_FORWARD] += t1 - t0;
        phase[PH_GRADIENT] += t2 - t1;
        phase[PH_OPTIMIZER] += t3 - t2;
    }
    return y;
}

/* A chain of n models, model k on dev[k], each d0-d1-d2-d3 with d3 == d0
 * (so each feeds the next), batch rows; or one model when n == 1. */
struct bench_chain {
    int n, batch;
    int d[4];
    struct bench_model m[BENCH_MAX_MODELS];
    vdev_tensor_t *x;
    struct bench_prods p[BENCH_MAX_MODELS];
};

static void bench_chain_init(struct bench_chain *c, int n, const char *const *dev, const int *d,
                             int batch, int ce)
{
    c->n = n;
    c->batch = batch;
    memcpy(c->d, d, sizeof c->d);
    for (int k = 0; k < n; k++) {
        bench_model_init(&c->m[k], dev[k], d, batch, ce, 10 + (uint64_t)k);
        bench_prods_init(&c->p[k], d, batch);
    }
    int64_t xs[2] = {batch, d[0]};
    vdev_device_push(dev[0]);
    c->x = vdev_tensor_uniform(xs, 2, -1, 1, 20);
    vdev_device_pop();
    if (!c->x)
        bench_die("the input");
}

/* chain3, the demo's three chained models as the benchmarks run them:
 * 256-512-512-256 each, batch 64, MSE, model k on dev[k]. */
static inline void bench_chain3_init(struct bench_chain *c, const char *const *dev)
{
    static const int d[4] = {256, 512, 512, 256};
    bench_chain_init(c, 3, dev, d, 64, 0);
}

static void bench_chain_free(struct bench_chain *c)
{
    for (int k = 0; k < c->n; k++) {
        bench_model_free(&c->m[k]);
        bench_prods_free(&c->p[k]);
    }
    vdev_tensor_free(c->x);
}

/* `steps` steps of the chain; waits for every device's stream at the end.
 * With `phase`, sums each phase's time into it (bench_model_step). */
static void bench_chain_steps_timed(struct bench_chain *c, int steps, double *phase)
{
    for (int s = 0; s < steps; s++) {
        vdev_scope_begin();
        const vdev_tensor_t *in = c->x;
        for (int k = 0; k < c->n; k++)
            in = bench_model_step(&c->m[k], in, phase);
        vdev_scope_end();
    }
    vdev_scope_begin();
    for (int k = 0; k < c->n; k++)
        vdev_tensor_item(vdev_sum_all(c->m[k].vars[5])); /* waits for the stream */
    vdev_scope_end();
}

static void bench_chain_steps(struct bench_chain *c, int steps)
{
    bench_chain_steps_timed(c, steps, NULL);
}

/* Gives OpenBLAS (cblas.h declares its thread calls) the threads vdev gives
 * one product, for the products alone (bench_blas_end puts it back to vdev's
 * one). */
static void bench_blas_begin(const struct bench_prods *warm)
{
    struct vdev_thread_info t;
    if (vdev_thread_info(&t) != VDEV_OK)
        bench_die("the thread plan");
    openblas_set_num_threads(t.blas_threads);
    bench_prods_run(warm); /* untimed: OpenBLAS's threads started, their buffers touched */
}

/* OpenBLAS's server threads, exported by its pthread builds (weak: absent
 * elsewhere). */
extern int blas_thread_shutdown_(void) __attribute__((weak));

/* Back to vdev's one thread, and OpenBLAS's idle threads stopped: they would
 * otherwise spin on sched_yield through the next turn of steps (about 2^28
 * cycles after their last product), which vdev's own use of OpenBLAS never
 * wakes them for. OpenBLAS starts them again at its next threaded product. */
static void bench_blas_end(void)
{
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_)
        blas_thread_shutdown_();
}

/* The products of `steps` steps of models [from, to) alone (between
 * bench_blas_begin and bench_blas_end). */
static void bench_chain_prods(const struct bench_chain *c, int from, int to, int steps)
{
    for (int s = 0; s < steps; s++)
        for (int k = from; k < to; k++)
            bench_prods_run(&c->p[k]);
}

struct bench_times {
    double step_med, step_min;   /* ms per step */
    double prod_med, prod_min;   /* ms per step: all models' products */
    double prod1_med, prod1_min; /* ms per step: the products of one model */
    double step_cpu, prod_cpu;   /* ms per step of the calling thread's CPU time (minimum
                                    over the turns): work done on this thread alone, which
                                    other programs on the machine do not inflate */
};

/* CPU time of the calling thread, in seconds. */
static double bench_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Times the chain's steps and its products in turns: a warm-up, then reps
 * turns of `steps` steps each. */
static inline struct bench_times bench_chain_time(struct bench_chain *c, int steps, int reps)
{
    double ts[32], tp[32], t1[32], cs[32], cp[32];
    if (reps > 32)
        reps = 32;
    bench_chain_steps(c, 2); /* warm-up: memory grown, BLAS threads decided */
    bench_blas_begin(&c->p[0]);
    bench_chain_prods(c, 0, c->n, 2);
    bench_blas_end();
    for (int r = 0; r < reps; r++) {
        bench_blas_begin(&c->p[0]);
        double c0 = bench_thread_cpu(), t0 = vdev_clock_seconds();
        bench_chain_prods(c, 0, c->n, steps);
        double c1 = bench_thread_cpu(), t1s = vdev_clock_seconds();
        bench_blas_end();
        double c2s = bench_thread_cpu(), t2s = vdev_clock_seconds();
        bench_chain_steps(c, steps);
        double c2 = bench_thread_cpu(), t2 = vdev_clock_seconds();
        cp[r] = (c1 - c0) * 1e3 / steps;
        cs[r] = (c2 - c2s) * 1e3 / steps;
        bench_blas_begin(&c->p[0]);
        double t3s = vdev_clock_seconds();
        bench_chain_prods(c, 0, 1, steps);
        double t3 = vdev_clock_seconds();
        bench_blas_end();
        tp[r] = (t1s - t0) * 1e3 / steps;
        ts[r] = (t2 - t2s) * 1e3 / steps;
        t1[r] = (t3 - t3s) * 1e3 / steps;
    }
    struct bench_times bt;
    bt.step_min = bench_min(ts, reps);
    bt.prod_min = bench_min(tp, reps);
    bt.prod1_min = bench_min(t1, reps);
    bt.step_med = bench_median(ts, reps);
    bt.prod_med = bench_median(tp, reps);
    bt.prod1_med = bench_median(t1, reps);
    bt.step_cpu = bench_min(cs, reps);
    bt.prod_cpu = bench_min(cp, reps);
    return bt;
}

/* OpenBLAS's environment, for the record: "OPENBLAS_NUM_THREADS=2,
 * OMP_NUM_THREADS unset, OPENBLAS_CORETYPE unset". */
static inline const char *bench_blas_env(char *buf, size_t cap)
{
    const char *names[3] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE"};
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < 3 && n < cap; i++) {
        const char *v = getenv(names[i]);
        n += (size_t)snprintf(buf + n, cap - n, "%s%s%s%s", i ? ", " : "", names[i],
                              v ? "=" : " unset", v ? v : "");
    }
    return buf;
}

/* Where the step's time goes (cpu backend): reps turns, each `steps` steps
 * timed phase by phase and the same steps' forward and gradient products
 * alone; medians per step in ms. ms[PH_*] the phases, fwd_prod and
 * grad_prod the products of the forward pass (3 per model) and of the
 * gradients (5 per model). */
struct bench_phases {
    double ms[PH_COUNT];
    double fwd_prod, grad_prod;
};

static inline struct bench_phases bench_chain_phases(struct bench_chain *c, int steps, int reps)
{
    double ph[PH_COUNT][32], pf[32], pg[32];
    if (reps > 32)
        reps = 32;
    bench_chain_steps(c, 2);
    for (int r = 0; r < reps; r++) {
        double acc[PH_COUNT] = {0};
        bench_chain_steps_timed(c, steps, acc);
        for (int k = 0; k < PH_COUNT; k++)
            ph[k][r] = acc[k] * 1e3 / steps;
        bench_blas_begin(&c->p[0]);
        double t0 = vdev_clock_seconds();
        for (int s = 0; s < steps; s++)
            for (int k = 0; k < c->n; k++)
                bench_prods_forward(&c->p[k]);
        double t1 = vdev_clock_seconds();
        for (int s = 0; s < steps; s++)
            for (int k = 0; k < c->n; k++)
                bench_prods_backward(&c->p[k]);
        double t2 = vdev_clock_seconds();
        bench_blas_end();
        pf[r] = (t1 - t0) * 1e3 / steps;
        pg[r] = (t2 - t1) * 1e3 / steps;
    }
    struct bench_phases out;
    for (int k = 0; k < PH_COUNT; k++)
        out.ms[k] = bench_median(ph[k], reps);
    out.fwd_prod = bench_median(pf, reps);
    out.grad_prod = bench_median(pg, reps);
    return out;
}

/* Bytes Adam reads and writes per step over the chain's variables: each
 * element's value, gradient and two slots read, value and slots written. */
static inline double bench_chain_adam_bytes(const struct bench_chain *c)
{
    double n = 0;
    for (int k = 0; k < c->n; k++)
        for (int v = 0; v < 6; v++)
            n += (double)vdev_tensor_numel(c->m[k].vars[v]);
    return n * 28.0;
}

#endif
