/* bench_scaling.c — how a training step's cost grows, with the time of its
 * matrix products beside each figure, so a reader sees where vdev's own
 * overhead stops mattering (bench_step.h says how steps and products are
 * timed):
 *
 *   batch     one MLP 256-512-512-256 on the cpu backend, batch 16 to 1024;
 *   width     one MLP 256-W-W-256, batch 64, W 128 to 4096, cpu backend;
 *   devices   N chained MLPs 256-512-512-256 (batch 64), one per simulated
 *             GPU, N = 1 to 8 on the same cores, against the same N models
 *             on the cpu backend, the products of all N models and those of
 *             one model.
 * Each row: the median of several turns (each long enough to be timed), and
 * the step's ratio to its products.
 * Usage: bench_scaling [--quick] [--md FILE] */
#include "bench_step.h"

#include "bench_args.h"

static int quick;

/* `turns` turns of enough steps for about 60 ms each. */
static struct bench_times time_chain_turns(int n, const char *const *dev, const int *d, int batch,
                                           int turns)
{
    struct bench_chain c;
    bench_chain_init(&c, n, dev, d, batch, 0);
    double t0 = vdev_clock_seconds();
    bench_chain_steps(&c, 1);
    double one = vdev_clock_seconds() - t0;
    int steps = one > 0 ? (int)(0.06 / one) : 10;
    steps = steps < 1 ? 1 : steps > 50 ? 50 : steps;
    struct bench_times t = bench_chain_time(&c, steps, turns);
    bench_chain_free(&c);
    return t;
}

static struct bench_times time_chain(int n, const char *const *dev, const int *d, int batch)
{
    return time_chain_turns(n, dev, d, batch, quick ? 3 : 7);
}

/* One row: medians and minimums of the step and of its products, and the
 * step's ratio to its products from each. */
static void row(FILE *f, const char *what, const struct bench_times *t, const char *extra)
{
    char line[640];
    snprintf(line, sizeof line, "| %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx | %s |", what,
             t->step_med, t->step_min, t->prod_med, t->prod_min, t->step_med / t->prod_med,
             t->step_min / t->prod_min, extra ? extra : "");
    printf("%s\n", line);
    if (f)
        fprintf(f, "%s\n", line);
}

int main(int argc, char **argv)
{
    struct bench_args args;
    if (bench_args_parse(argc, argv, "bench_scaling", 0, &args))
        return 2;
    quick = args.quick;
    const char *md = args.md;
    FILE *f = md ? fopen(md, "w") : NULL;
    if (md && !f) {
        perror(md);
        return 1;
    }
    const char *head = "| configuration | step ms (median) | step ms (min) | products ms (median) | "
                       "products ms (min) | step ÷ products (medians) | (minimums) | note |\n"
                       "|---|---:|---:|---:|---:|---:|---:|---|";
    printf("%s\n", head);
    if (f)
        fprintf(f, "%s\n", head);
    const char *cpu[BENCH_MAX_MODELS], *gpu[BENCH_MAX_MODELS];
    static const char *gname[BENCH_MAX_MODELS] = {"GPU:0", "GPU:1", "GPU:2", "GPU:3",
                                                  "GPU:4", "GPU:5", "GPU:6", "GPU:7"};
    for (int k = 0; k < BENCH_MAX_MODELS; k++) {
        cpu[k] = "CPU:0";
        gpu[k] = gname[k];
    }
    char what[128];

    bench_restart(NULL);
    static const int batches[4] = {16, 64, 256, 1024};
    for (int i = 0; i < 4; i++) {
        int d[4] = {256, 512, 512, 256};
        struct bench_times t = time_chain(1, cpu, d, batches[i]);
        snprintf(what, sizeof what, "batch %d, MLP 256-512-512-256, cpu", batches[i]);
        row(f, what, &t, NULL);
    }
    static const int widths[4] = {128, 512, 1024, 4096};
    for (int i = 0; i < (quick ? 3 : 4); i++) {
        int d[4] = {256, widths[i], widths[i], 256};
        struct bench_times t = time_chain(1, cpu, d, 64);
        snprintf(what, sizeof what, "width %d, MLP 256-%d-%d-256, batch 64, cpu", widths[i],
                 widths[i], widths[i]);
        row(f, what, &t, NULL);
    }
    /* N models on the cpu backend and on N simulated GPUs: separate start-ups
     * (the thread plan differs), taken in turns (cpu, GPUs, cpu, ...) so that
     * other work on the machine disturbs both alike. */
    static const int counts[6] = {1, 2, 3, 4, 6, 8};
    for (int i = 0; i < 6; i++) {
        int n = counts[i], d[4] = {256, 512, 512, 256}, rounds = quick ? 3 : 7;
        char sim[32], extra[200];
        snprintf(sim, sizeof sim, "%dx4GiB", n);
        double sc[16], sg[16], pc[16], pg[16], p1[16];
        for (int r = 0; r < rounds; r++) {
            bench_restart(NULL);
            struct bench_times t = time_chain_turns(n, cpu, d, 64, 1);
            sc[r] = t.step_med;
            pc[r] = t.prod_med;
            bench_restart(sim);
            t = time_chain_turns(n, gpu, d, 64, 1);
            sg[r] = t.step_med;
            pg[r] = t.prod_med;
            p1[r] = t.prod1_med;
        }
        struct bench_times tc = {.step_min = bench_min(sc, rounds), .prod_min = bench_min(pc, rounds)};
        struct bench_times tg = {.step_min = bench_min(sg, rounds), .prod_min = bench_min(pg, rounds)};
        tc.step_med = bench_median(sc, rounds);
        tc.prod_med = bench_median(pc, rounds);
        tg.step_med = bench_median(sg, rounds);
        tg.prod_med = bench_median(pg, rounds);
        double one = bench_median(p1, rounds);
        snprintf(what, sizeof what, "%d chained MLPs 256-512-512-256, batch 64, cpu backend", n);
        row(f, what, &tc, NULL);
        snprintf(what, sizeof what, "the same on %d simulated GPUs", n);
        snprintf(extra, sizeof extra,
                 "%.2fx the cpu backend's step (medians); one model's products %.2f ms; the "
                 "products here ran with one OpenBLAS thread each, as the streams run them",
                 tg.step_med / tc.step_med, one);
        row(f, what, &tg, n >= 2 ? extra : "one stream: each product split over vdev's threads, as on the cpu backend");
    }
    vdev_shutdown();
    if (f) {
        char env[160];
        fprintf(f, "\nEnvironment: %s%s.\n", bench_blas_env(env, sizeof env),
                quick ? " (quick mode: fewer turns)" : "");
        fclose(f);
    }
    return 0;
}
