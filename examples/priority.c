/* priority.c — a critical model keeps its share of a GPU while two secondary
 * models grow and shrink in what is left (`vdev demo --priority`).
 *
 * "Give the critical task a fixed share of memory and let the secondary tasks
 * use what is left; watch the memory info and adjust what they get." The first
 * visible GPU (a simulated 3 GiB card where no GPU is present) is split into
 * three logical GPUs: the critical model's, with the critical priority, and
 * two secondary models' with low priority. The arena they share is the card's
 * budget as vdev governs it (its free memory less the driver reserve, or
 * TF_DEVICE_MIN_SYS_MEMORY_IN_MB, or a memory fraction), at most 3 GiB; with
 * every GPU hidden, or a budget under 276 MiB, it stops, saying so. Once
 * started, the critical model gets a floor (a quarter of the arena) and the
 * secondary models half the rest each as their ceilings, set at run time (a
 * refused change, there or in the monitor, is reported on stderr and makes
 * the exit status 1, as a model that stops early does). Each model trains in
 * its own thread. The secondary models double their batch every few steps;
 * when an allocation fails they halve it and go on, and when vdev
 * tells them of memory pressure (their ceiling lowered below what they hold)
 * they halve it before the next step. A monitor thread runs the policy loop
 * below: the critical model keeps its peak and a quarter (at least its floor);
 * the rest is split between the secondary models in proportion to what each
 * used since the last look. The critical model never sees an out-of-memory
 * error: its floor is kept aside for it, and as the highest priority it would
 * take the others' cached memory first.
 * Written with the public header alone. */
#define _POSIX_C_SOURCE 200809L
#include "demo.h"
#include "vdev.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* The critical model (64 -> 1024 -> 8, batch 256) and its evaluation burst
 * every tenth step, a forward pass of it and its teacher on 16 times the
 * batch. */
#define CRIT_IN 64
#define CRIT_HIDDEN 1024
#define CRIT_OUT 8
#define CRIT_BATCH 256
#define EVAL_TIMES 16
/* The smallest ceiling the monitor gives a secondary model. */
#define MIN_CEILING (64 * MIB)
/* The critical model's steps alone: WARMUP untimed ones (its first regions,
 * the first touch of their pages, its first evaluation burst), then ALONE
 * timed ones, before the secondary models start. */
#define WARMUP 10
#define ALONE 10

struct model {
    const char *name, *dev;
    int64_t in, hidden, out;
    long steps;
    int64_t batch, max_batch, batch_seen;
    int critical;
    vdev_mlp_t *mlp, *teacher;
    vdev_optimizer_t *adam;
    vdev_tensor_t *vars[4];
    long ooms, shrinks, done;
    char error[512];        /* why it stopped before its last step ("": it did not) */
    int oom_stop;           /* 1: an out-of-memory error with nothing left to halve */
    _Atomic int pressure;   /* set by vdev's pressure callback */
    double solo[ALONE], shared[512]; /* step times of the critical model */
    int n_solo, n_shared;
};

static _Atomic int secondaries_go, finished;
static _Atomic long ceiling_moves, polls;

/* One training step (MSE against a fixed teacher) at `batch`; 0 on success,
 * else the status, vdev_last_error() saying why. */
static enum vdev_status step(struct model *m, int64_t batch, uint64_t seed, int evaluate)
{
    enum vdev_status st = VDEV_ERR_INTERNAL;
    vdev_scope_begin();
    vdev_device_push(m->dev);
    int64_t xs[2] = {batch, m->in};
    vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, seed);
    vdev_tensor_t *target = vdev_mlp_forward(m->teacher, x);
    if (evaluate) { /* a forward pass on a large batch: a burst of memory */
        vdev_tensor_t *l = vdev_mse(vdev_mlp_forward(m->mlp, x), target);
        st = l && !isnan(vdev_tensor_item(l)) ? VDEV_OK : vdev_last_status();
    } else {
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *l = vdev_mse(vdev_mlp_forward(m->mlp, x), target), *g[4];
        st = vdev_tape_gradient(tape, l, m->vars, 4, g);
        vdev_tape_end(tape); /* before the update: a live tape would keep the old values */
        if (st == VDEV_OK && vdev_optimizer_apply(m->adam, m->vars, g, 4) == VDEV_OK &&
            !isnan(vdev_tensor_item(l)))
            st = VDEV_OK;
        else
            st = vdev_last_status();
    }
    vdev_device_pop();
    vdev_scope_end();
    return st;
}

/* vdev's pressure callback: shrink before the next allocation fails. */
static void on_pressure(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)device;
    (void)bytes;
    struct model *m = user;
    if (what != VDEV_PRESSURE_LENT)
        atomic_store(&m->pressure, 1);
}

static void *train(void *arg)
{
    struct model *m = arg;
    while (!m->critical && !atomic_load(&secondaries_go))
        sched_yield();
    for (long s = 0; s < m->steps; s++) {
        if (!m->critical && atomic_exchange(&m->pressure, 0) && m->batch > 64) {
            m->batch /= 2;
            m->shrinks++;
        }
        double t0 = vdev_clock_seconds();
        enum vdev_status st = step(m, m->batch, 1000 * (uint64_t)s + (uint64_t)m->in, 0);
        if (m->critical && st == VDEV_OK && s % 10 == 9)
            st = step(m, EVAL_TIMES * m->batch, 7 + (uint64_t)s, 1);
        double dt = vdev_clock_seconds() - t0;
        if (st == VDEV_ERR_OOM) {
            m->ooms++;
            if (m->critical || m->batch <= 64) { /* nothing left to halve */
                snprintf(m->error, sizeof m->error, "%s", vdev_last_error());
                m->oom_stop = 1;
                break;
            }
            m->batch /= 2; /* recover: half the batch, and on */
            s--;
            continue;
        }
        if (st != VDEV_OK) {
            snprintf(m->error, sizeof m->error, "%s", vdev_last_error());
            break;
        }
        m->done++;
        if (m->critical) {
            if (!atomic_load(&secondaries_go)) {
                if (s >= WARMUP && m->n_solo < ALONE) /* the warm-up is not timed */
                    m->solo[m->n_solo++] = dt;
            } else if (m->n_shared < 512) {
                m->shared[m->n_shared++] = dt;
            }
            if (s == WARMUP + ALONE - 1)
                atomic_store(&secondaries_go, 1); /* warm-up and timed steps alone first */
        } else if (s % 4 == 3 && m->batch < m->max_batch) {
            m->batch *= 2; /* grow */
        }
        if (m->batch > m->batch_seen)
            m->batch_seen = m->batch;
    }
    atomic_fetch_add(&finished, 1);
    if (m->critical)
        atomic_store(&secondaries_go, 1);
    return NULL;
}

struct policy {
    const char *crit, *sec[2];
    uint64_t arena, floor;
    long refused;         /* the monitor's vdev_memory_set_limits calls that failed */
    char first_error[512]; /* the first one's message (written by the monitor alone) */
};

static uint64_t peak(const char *dev)
{
    struct vdev_memory_info mi;
    return vdev_memory_info(dev, &mi) == VDEV_OK ? mi.peak_bytes_in_use : 0;
}

/* Sets a secondary model's ceiling (at least MIN_CEILING); a refusal is
 * counted and the first one's message kept, for main to report. */
static int set_ceiling(struct policy *p, const char *dev, uint64_t ceiling)
{
    if (vdev_memory_set_limits(dev, 0, ceiling > MIN_CEILING ? ceiling : MIN_CEILING) == VDEV_OK)
        return 1;
    if (p->refused++ == 0)
        snprintf(p->first_error, sizeof p->first_error, "%s", vdev_last_error());
    return 0;
}

/* The policy loop: the critical model keeps its peak and a quarter (at
 * least its floor); the secondary models split the rest by what each used
 * since the last look. */
static void *monitor(void *arg)
{
    struct policy *p = arg;
    while (atomic_load(&finished) < 3) {
        uint64_t keep = peak(p->crit) * 5 / 4 > p->floor ? peak(p->crit) * 5 / 4 : p->floor;
        uint64_t rest = p->arena > keep ? p->arena - keep : 0;
        uint64_t d0 = peak(p->sec[0]) + MIB, d1 = peak(p->sec[1]) + MIB;
        uint64_t c0 = rest / (d0 + d1) * d0, c1 = rest - c0;
        if (set_ceiling(p, p->sec[0], c0) && set_ceiling(p, p->sec[1], c1))
            atomic_fetch_add(&ceiling_moves, 2);
        vdev_memory_reset_peak(p->sec[0]);
        vdev_memory_reset_peak(p->sec[1]);
        atomic_fetch_add(&polls, 1);
        nanosleep(&(struct timespec){.tv_nsec = 5 * 1000 * 1000}, NULL);
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_ms(double *v, int n)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp);
    return 1000.0 * v[n / 2];
}

#ifdef VDEV_EXAMPLE_NO_MAIN
/* Under the vdev command (tools/cmd_demo.c): the usage of every scenario
 * (examples/demo.c, which the vdev command holds). */
void demo_usage(FILE *f);
#endif

static void usage(FILE *f, const char *prog)
{
#ifdef VDEV_EXAMPLE_NO_MAIN
    if (!strcmp(prog, "vdev demo")) {
        demo_usage(f);
        return;
    }
#endif
    fprintf(f, "usage: %s [--steps N]\n\nA critical model keeps its share of one GPU while two "
               "secondary models grow\nand shrink in the rest; a monitor thread moves their "
               "ceilings. --steps N:\nthe secondary models' training steps (10 to 100000, default "
               "40).\n",
            prog);
}

/* A usage error: one line "PROG: what is wrong", then the usage, on stderr;
 * exit status 2 (as examples/demo.c). */
__attribute__((format(printf, 2, 3))) static int usage_error(const char *prog, const char *fmt,
                                                              ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    usage(stderr, prog);
    return 2;
}

/* What the three models need of the arena: the critical model's peak in use
 * (its evaluation burst: six batch x hidden activations, of the model and its
 * teacher, live at once, with both models' weights and Adam's two slots),
 * and half as much again (the monitor keeps a quarter more than the peak for
 * it, and its allocator's regions round up), plus the smallest ceiling of
 * each secondary model. 276 MiB. */
static uint64_t arena_needed(void)
{
    uint64_t params = CRIT_IN * CRIT_HIDDEN + CRIT_HIDDEN + CRIT_HIDDEN * CRIT_OUT + CRIT_OUT;
    uint64_t rows = (uint64_t)EVAL_TIMES * CRIT_BATCH;
    uint64_t peak = 4 * (4 * params + rows * (CRIT_IN + 6 * CRIT_HIDDEN + 4 * CRIT_OUT));
    return (peak * 3 / 2 + 2 * MIN_CEILING + MIB - 1) & ~(MIB - 1);
}

/* The least free memory whose budget (free less TensorFlow's driver
 * reserve, as vdev takes it: none from a card with 225 MiB or less free) is
 * `need`. */
static uint64_t free_needed(uint64_t need)
{
    if (need <= 225 * MIB)
        return need;
    if (need + 225 * MIB < 2 * GIB)
        return need + 225 * MIB;
    return need + 1536 * MIB < 2 * GIB ? 2 * GIB : need + 1536 * MIB;
}

/* The card's budget is below `need`: says so on stderr, with where the
 * budget comes from (the driver reserve; TF_DEVICE_MIN_SYS_MEMORY_IN_MB,
 * which wins over a fraction; or a memory fraction) and what would give
 * enough. The same words as examples/python/priority.py. */
static void too_small(const char *prog, const char *card, uint64_t budget, uint64_t need)
{
    char b1[32], b2[32], b3[32], why[96], fix[160];
    const char *min_sys = getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
    const char *var = "VDEV_MEMORY_FRACTION";
    if (!getenv(var) || atof(getenv(var)) <= 0)
        var = "TF_GPU_MEMORY_FRACTION";
    double fraction = getenv(var) ? atof(getenv(var)) : 0;
    uint64_t want = free_needed(need); /* free memory, or with a fraction total memory */
    const char *what = "free";
    snprintf(why, sizeof why, "what the driver reserve leaves of its free memory");
    if (min_sys && *min_sys) {
        want = need + strtoull(min_sys, NULL, 10) * MIB;
        snprintf(why, sizeof why, "its free memory less TF_DEVICE_MIN_SYS_MEMORY_IN_MB=%s",
                 min_sys);
    } else if (fraction > 0) {
        want = ((uint64_t)ceil((double)need / fraction) + MIB - 1) & ~(MIB - 1);
        what = "of memory";
        snprintf(why, sizeof why, "%s=%s of its total memory", var, getenv(var));
    }
    double f = ceil(fraction * (double)need / (double)budget * 100.0 - 1e-9) / 100.0;
    if (!(min_sys && *min_sys) && fraction > 0 && f <= 1.0)
        snprintf(fix, sizeof fix, "set %s to %.2f or more", var, f);
    else
        snprintf(fix, sizeof fix, "run on a GPU with %s %s or more (VDEV_SIM_GPUS=1x%lluMiB)",
                 vdev_format_bytes(want, b3, sizeof b3), what, (unsigned long long)(want / MIB));
    fprintf(stderr, "%s: %s leaves %s to share (%s), less than the %s the three models need; %s\n",
            prog, card, vdev_format_bytes(budget, b1, sizeof b1), why,
            vdev_format_bytes(need, b2, sizeof b2), fix);
}

int vdev_example_priority(int argc, char **argv);
int vdev_example_priority(int argc, char **argv)
{
    /* "vdev demo" under the vdev command (argv[0] "demo"), else the program. */
    const char *a0 = argc > 0 && argv[0] ? argv[0] : "demo";
    const char *prog = strrchr(a0, '/') ? strrchr(a0, '/') + 1 : a0;
    if (!strcmp(prog, "demo"))
        prog = "vdev demo";
    long steps = 40;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--steps")) {
            if (i + 1 >= argc)
                return usage_error(prog, "--steps needs a number");
            char *end;
            errno = 0;
            long v = strtol(argv[i + 1], &end, 10);
            /* digits alone: strtol would skip leading blanks and a sign */
            if (!isdigit((unsigned char)argv[i + 1][0]) || *end || errno || v < 10 || v > 100000)
                return usage_error(prog, "--steps takes a whole number from 10 to 100000, not '%s'",
                                   argv[i + 1]);
            steps = v;
            i++;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, prog);
            return 0;
        } else if (!strcmp(a, "--epochs") || !strcmp(a, "--batch") || !strcmp(a, "--seed") ||
                   !strcmp(a, "--log-placement") || !strcmp(a, "--vdev-placement")) {
            /* the options of the other scenarios: `vdev demo --priority` also
             * takes --report DIR (tools/cmd_demo.c), this program --steps alone */
            if (!strcmp(prog, "vdev demo"))
                return usage_error(prog, "--priority takes --steps N and --report DIR, not %s",
                                   a);
            return usage_error(prog, "this example takes --steps N only, not %s", a);
        } else {
            return usage_error(prog, "unknown option '%s'", a);
        }
    }
    /* The card: the first visible GPU, or a simulated 3 GiB one where there
     * is no GPU. */
    int n = 0;
    if (vdev_list_physical_devices(NULL, 0, &n) != VDEV_OK)
        return fprintf(stderr, "%s: devices: %s\n", prog, vdev_last_error()), 1;
    int made = n < 2 && !getenv("VDEV_SIM_GPUS");
    if (made) {
        setenv("VDEV_SIM_GPUS", "1x3GiB", 1);
        vdev_shutdown(); /* discover again */
        if (vdev_list_physical_devices(NULL, 0, &n) != VDEV_OK || n < 2)
            return fprintf(stderr, "%s: no GPU: %s\n", prog, vdev_gpu_absence_reason()), 1;
    }
    struct vdev_physical_device *pds = calloc((size_t)n, sizeof *pds), pd = {0};
    int vis[64], n_vis = 0;
    if (!pds)
        return fprintf(stderr, "%s: out of host memory\n", prog), 1;
    if (vdev_list_physical_devices(pds, n, &n) != VDEV_OK ||
        vdev_config_get_visible_devices(vis, 64, &n_vis) != VDEV_OK) {
        free(pds);
        return fprintf(stderr, "%s: devices: %s\n", prog, vdev_last_error()), 1;
    }
    for (int i = 0; i < n && n_vis > 0; i++)
        if (pds[i].type == VDEV_DEVICE_GPU && pds[i].index == vis[0])
            pd = pds[i];
    free(pds);
    if (n_vis == 0 || pd.type != VDEV_DEVICE_GPU)
        return demo_no_gpu(prog, n - 1, made);
    /* Split before start-up; the shares come after it, from the budget
     * vdev gives the card (free memory less the driver reserve, or a
     * fraction): at most 3 GiB of it, so the demo stays quick. */
    struct vdev_logical_device_config cfg[3] = {{.priority = VDEV_PRIORITY_CRITICAL},
                                                {.priority = VDEV_PRIORITY_LOW},
                                                {.priority = VDEV_PRIORITY_LOW}};
    if (vdev_config_set_logical_devices_ex(pd.name, cfg, 3) != VDEV_OK || vdev_init() != VDEV_OK)
        return fprintf(stderr, "%s: start-up: %s\n", prog, vdev_last_error()), 1;
    demo_say_metrics();
    struct vdev_memory_limits lim;
    if (vdev_memory_get_limits("GPU:0", &lim) != VDEV_OK) {
        fprintf(stderr, "%s: start-up: %s\n", prog, vdev_last_error());
        vdev_shutdown();
        return 1;
    }
    uint64_t budget = lim.card_budget_bytes, need = arena_needed();
    uint64_t arena = (budget > 3 * GIB ? 3 * GIB : budget) & ~(MIB - 1);
    char b1[32], b2[32];
    if (arena < need) {
        too_small(prog, pd.name, budget, need);
        vdev_shutdown();
        return 1;
    }
    uint64_t floor = arena / 4 & ~(MIB - 1);
    if (vdev_memory_set_limits("GPU:0", floor, 0) != VDEV_OK ||
        vdev_memory_set_limits("GPU:1", 0, (arena - floor) / 2) != VDEV_OK ||
        vdev_memory_set_limits("GPU:2", 0, (arena - floor) / 2) != VDEV_OK) {
        fprintf(stderr, "%s: setting the shares: %s\n", prog, vdev_last_error());
        vdev_shutdown();
        return 1;
    }
    printf("One GPU (%s, %s), three logical GPUs sharing %s:\n", pd.model,
           vdev_format_bytes(pd.total_bytes, b1, sizeof b1),
           vdev_format_bytes(arena, b2, sizeof b2));
    printf("  GPU:0 critical model: floor %s, priority critical\n",
           vdev_format_bytes(floor, b1, sizeof b1));
    printf("  GPU:1, GPU:2 secondary models A and B: no floor, priority low, ceilings moved by "
           "the monitor\n");
    /* Secondary rows cost about 8 floats of 2048 (activations and gradients). */
    int64_t max_batch = 1;
    while ((uint64_t)max_batch * 2 * 2048 * 4 * 8 < arena)
        max_batch *= 2;
    struct model m[3] = {
        {.name = "critical", .dev = "GPU:0", .in = CRIT_IN, .hidden = CRIT_HIDDEN, .out = CRIT_OUT,
         .batch = CRIT_BATCH, .critical = 1},
        {.name = "A", .dev = "GPU:1", .in = 16, .hidden = 2048, .out = 4, .batch = 512},
        {.name = "B", .dev = "GPU:2", .in = 16, .hidden = 2048, .out = 4, .batch = 512}};
    for (int k = 0; k < 3; k++) {
        int64_t sizes[3] = {m[k].in, m[k].hidden, m[k].out};
        m[k].steps = m[k].critical ? steps + WARMUP + ALONE : steps;
        m[k].max_batch = max_batch;
        vdev_device_push(m[k].dev);
        m[k].mlp = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 1 + (uint64_t)k);
        m[k].teacher = vdev_mlp_new(sizes, 3, VDEV_ACT_TANH, VDEV_ACT_NONE, 11 + (uint64_t)k);
        vdev_device_pop();
        m[k].adam = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
        if (!m[k].mlp || !m[k].teacher || !m[k].adam)
            return fprintf(stderr, "%s: building the models: %s\n", prog, vdev_last_error()), 1;
        vdev_mlp_variables(m[k].mlp, m[k].vars, 4);
        if (!m[k].critical)
            vdev_memory_set_pressure_callback(m[k].dev, on_pressure, &m[k]);
    }
    struct policy pol = {.crit = "GPU:0", .sec = {"GPU:1", "GPU:2"}, .arena = arena,
                         .floor = floor};
    pthread_t t[3], mon;
    pthread_create(&mon, NULL, monitor, &pol);
    for (int k = 0; k < 3; k++)
        pthread_create(&t[k], NULL, train, &m[k]);
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    pthread_join(mon, NULL);
    char of[32] = "";
    if (m[0].done < m[0].steps)
        snprintf(of, sizeof of, " of %ld", m[0].steps);
    printf("critical model: %ld%s steps, %ld out-of-memory error%s; median step %.2f ms alone "
           "(%d steps after %d untimed warm-up steps), %.2f ms beside the others (they share "
           "the card's compute)\n",
           m[0].done, of, m[0].ooms, m[0].ooms == 1 ? "" : "s", median_ms(m[0].solo, m[0].n_solo),
           m[0].n_solo, WARMUP, median_ms(m[0].shared, m[0].n_shared));
    for (int k = 1; k < 3; k++) {
        if (m[k].done == steps) /* then every error was recovered from */
            printf("model %s: %ld steps, %ld out-of-memory error%s recovered from by halving its "
                   "batch, ",
                   m[k].name, m[k].done, m[k].ooms, m[k].ooms == 1 ? "" : "s");
        else
            printf("model %s: %ld of %ld steps, stopped by %s; %ld out-of-memory error%s, ",
                   m[k].name, m[k].done, steps,
                   m[k].oom_stop ? "an out-of-memory error at its smallest batch (64)"
                                 : "an error",
                   m[k].ooms, m[k].ooms == 1 ? "" : "s");
        printf("%ld halving%s on pressure, batch up to %lld\n", m[k].shrinks,
               m[k].shrinks == 1 ? "" : "s", (long long)m[k].batch_seen);
    }
    printf("monitor: %ld looks, %ld ceiling changes\n", atomic_load(&polls),
           atomic_load(&ceiling_moves));
    for (int k = 0; k < 3; k++)
        if (m[k].error[0])
            fprintf(stderr, m[k].critical ? "%s: %s model stopped: %s\n"
                                          : "%s: model %s stopped: %s\n",
                    prog, m[k].name, m[k].error);
    if (pol.refused)
        fprintf(stderr,
                "%s: the monitor's vdev_memory_set_limits failed %ld time%s; the first: %s\n",
                prog, pol.refused, pol.refused == 1 ? "" : "s", pol.first_error);
    int ok = m[0].ooms == 0 && m[0].done == m[0].steps && m[1].done == steps &&
             m[2].done == steps && pol.refused == 0;
    for (int k = 0; k < 3; k++) {
        vdev_mlp_free(m[k].mlp);
        vdev_mlp_free(m[k].teacher);
        vdev_optimizer_free(m[k].adam);
    }
    vdev_shutdown();
    return ok ? 0 : 1;
}

#ifndef VDEV_EXAMPLE_NO_MAIN
int main(int argc, char **argv) { return vdev_example_priority(argc, argv); }
#endif
