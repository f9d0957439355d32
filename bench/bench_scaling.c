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

static int quick;

/* Turns of enough steps for about 60 ms each. */
static struct bench_times time_chain(int n, const char *const *dev, const int *d, int batch)
{
    struct bench_chain c;
    bench_chain_init(&c, n, dev, d, batch, 0);
    double t0 = vdev_clock_seconds();
    bench_chain_steps(&c, 1);
    double one = vdev_clock_seconds() - t0;
    int steps = one > 0 ? (int)(0.06 / one) : 10;
    steps = steps < 1 ? 1 : steps > 50 ? 50 : steps;
    struct bench_times t = bench_chain_time(&c, steps, quick ? 3 : 7);
    bench_chain_free(&c);
    return t;
}

static void row(FILE *f, const char *what, const struct bench_times *t, double prod, const char *extra)
{
    char line[512];
    snprintf(line, sizeof line, "| %s | %.2f | %.2f | %.2f | %.2fx | %s |", what, t->step_med,
             t->step_min, prod, t->step_med / prod, extra ? extra : "");
    printf("%s\n", line);
    if (f)
        fprintf(f, "%s\n", line);
}

int main(int argc, char **argv)
{
    const char *md = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--md") && i + 1 < argc)
            md = argv[++i];
        else {
            fprintf(stderr, "usage: bench_scaling [--quick] [--md FILE]\n");
            return 2;
        }
    }
    FILE *f = md ? fopen(md, "w") : NULL;
    if (md && !f) {
        perror(md);
        return 1;
    }
    const char *head = "| configuration | step ms (median) | step ms (min) | products ms (median) | "
                       "step ÷ products | note |\n|---|---:|---:|---:|---:|---|";
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
        row(f, what, &t, t.prod_med, NULL);
    }
    static const int widths[4] = {128, 512, 1024, 4096};
    for (int i = 0; i < (quick ? 3 : 4); i++) {
        int d[4] = {256, widths[i], widths[i], 256};
        struct bench_times t = time_chain(1, cpu, d, 64);
        snprintf(what, sizeof what, "width %d, MLP 256-%d-%d-256, batch 64, cpu", widths[i],
                 widths[i], widths[i]);
        row(f, what, &t, t.prod_med, NULL);
    }
    static const int counts[6] = {1, 2, 3, 4, 6, 8};
    for (int i = 0; i < 6; i++) {
        int n = counts[i], d[4] = {256, 512, 512, 256};
        char sim[32], extra[160];
        bench_restart(NULL);
        struct bench_times tc = time_chain(n, cpu, d, 64);
        snprintf(what, sizeof what, "%d chained MLPs 256-512-512-256, batch 64, cpu backend", n);
        row(f, what, &tc, tc.prod_med, NULL);
        snprintf(sim, sizeof sim, "%dx4GiB", n);
        bench_restart(sim);
        struct bench_times tg = time_chain(n, gpu, d, 64);
        snprintf(what, sizeof what, "the same on %d simulated GPUs", n);
        snprintf(extra, sizeof extra,
                 "%.2fx the cpu backend's step; one model's products %.2f ms; the products "
                 "above ran with OpenBLAS's threads as the streams use them",
                 tg.step_med / tc.step_med, tg.prod1_med);
        row(f, what, &tg, tg.prod_med, extra);
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
