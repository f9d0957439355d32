/* bench_settings.c — chain3 on the cpu backend and on three simulated GPUs
 * under each thread setting a user may make (OPENBLAS_NUM_THREADS,
 * OMP_NUM_THREADS), in one process: each turn sets the variables, starts
 * vdev afresh (the thread plan reads them at every start-up), builds the
 * three models and times `steps` steps after two untimed ones; turns
 * alternate cpu backend, GPUs, cpu backend, ... so that other work on the
 * machine disturbs both alike. ms per step, the median of the turns, and
 * GPUs ÷ cpu. OpenBLAS's own thread pool was sized at load from the
 * variables the process started with, but vdev keeps OpenBLAS at one thread
 * whatever they say, so that changes nothing measured here.
 * Usage: bench_settings [--quick] [--md FILE] */
#include "bench_step.h"

#include "bench_args.h"

static const char *const settings[][2] = {
    /* OPENBLAS_NUM_THREADS, OMP_NUM_THREADS (NULL: unset) */
    {NULL, NULL}, {"1", NULL}, {"2", NULL}, {"4", NULL}, {NULL, "1"}, {"2", "2"},
};
#define N_SETTINGS (sizeof settings / sizeof *settings)

static void set_or_unset(const char *name, const char *v)
{
    if (v)
        setenv(name, v, 1);
    else
        unsetenv(name);
}

/* One turn: ms per step of chain3 on three GPUs (gpu) or on CPU:0. */
static double turn(int gpu, int steps)
{
    const char *cpu3[3] = {"CPU:0", "CPU:0", "CPU:0"}, *gpu3[3] = {"GPU:0", "GPU:1", "GPU:2"};
    bench_restart(gpu ? "3x4GiB" : NULL);
    struct bench_chain c;
    bench_chain3_init(&c, gpu ? gpu3 : cpu3);
    bench_chain_steps(&c, 2);
    double t0 = vdev_clock_seconds();
    bench_chain_steps(&c, steps);
    double ms = (vdev_clock_seconds() - t0) * 1e3 / steps;
    bench_chain_free(&c);
    return ms;
}

static void name_of(size_t s, char *buf, size_t cap)
{
    const char *b = settings[s][0], *o = settings[s][1];
    if (!b && !o)
        snprintf(buf, cap, "neither variable set");
    else
        snprintf(buf, cap, "%s%s%s%s%s", b ? "OPENBLAS_NUM_THREADS=" : "", b ? b : "",
                 b && o ? " " : "", o ? "OMP_NUM_THREADS=" : "", o ? o : "");
}

int main(int argc, char **argv)
{
    struct bench_args args;
    if (bench_args_parse(argc, argv, "bench_settings", 0, &args))
        return 2;
    int quick = args.quick;
    const char *md = args.md;
    int steps = quick ? 10 : 20, turns = quick ? 3 : 7;
    double cpu[N_SETTINGS], gpu[N_SETTINGS];
    turn(0, 2); /* untimed: the process's first pages, OpenBLAS's buffers */
    turn(1, 2);
    for (size_t s = 0; s < N_SETTINGS; s++) {
        set_or_unset("OPENBLAS_NUM_THREADS", settings[s][0]);
        set_or_unset("OMP_NUM_THREADS", settings[s][1]);
        double c[16], g[16];
        for (int r = 0; r < turns; r++) {
            c[r] = turn(0, steps);
            g[r] = turn(1, steps);
        }
        cpu[s] = bench_median(c, turns);
        gpu[s] = bench_median(g, turns);
        char name[96];
        name_of(s, name, sizeof name);
        printf("%s: cpu backend %.3f ms, 3 simulated GPUs %.3f ms: %.2f\n", name, cpu[s], gpu[s],
               gpu[s] / cpu[s]);
        fflush(stdout);
    }
    vdev_shutdown();
    if (md) {
        FILE *f = fopen(md, "w");
        if (!f) {
            perror(md);
            return 1;
        }
        fprintf(f, "| setting | chain3, cpu backend (ms) | chain3, 3 simulated GPUs (ms) | GPUs ÷ cpu |\n"
                   "|---|---:|---:|---:|\n");
        for (size_t s = 0; s < N_SETTINGS; s++) {
            char name[96];
            name_of(s, name, sizeof name);
            fprintf(f, "| %s | %.3f | %.3f | %.2f |\n", name, cpu[s], gpu[s], gpu[s] / cpu[s]);
        }
        fprintf(f, "\n%d turns of %d steps each per backend and setting%s.\n", turns, steps,
                quick ? " (quick mode)" : "");
        fclose(f);
    }
    return 0;
}
