/* demo.c — what the three demo programs share (see demo.h): their options,
 * and the devices they run on, sized from what the machine has.
 *
 * Sizing needs each GPU's budget (free memory less the driver reserve, or a
 * fraction, or what VDEV_LOGICAL_DEVICES gives it) before the configuration
 * is set, and vdev reports budgets only as the limits of started logical
 * devices. So demo_start() starts the runtime once as a probe, with growth
 * on (nothing is taken from the cards) and with the variables that make
 * start-up write, serve or report something hidden, reads the logical
 * devices, shuts down, sets the split it chose and starts for real. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv, strdup */
#include "demo.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* ---- options ---- */

static const struct {
    long epochs, steps, batch;
} defaults[DEMO_SCENARIO_COUNT] = {{5, 100, 64}, {1, 50, 64}, {1, 60, 256}};

void demo_usage(FILE *f)
{
    fprintf(f,
            "usage: vdev demo [--tf-placement [--vdev-placement] | --split] [--epochs N]\n"
            "                 [--steps N] [--batch N] [--seed N] [--log-placement] [--report DIR]\n"
            "\n"
            "Scenarios, on the GPUs there are (simulated ones where there are none):\n"
            "  (default)         three chained MLPs, one per GPU, each trained inside its own\n"
            "                    device scope; prints each model's loss per epoch and what\n"
            "                    every device ran, holds and copied\n"
            "  --tf-placement    the bug report's program (device scopes only around building\n"
            "                    the models) under TensorFlow's placement rule: GPU:0 carries\n"
            "                    everything and the placement audit names what ran away;\n"
            "                    --vdev-placement runs it under vdev's rule instead\n"
            "  --split           one GPU split into two logical GPUs with hard limits (4 GiB\n"
            "                    and 2 GiB where the card has room); model B is given a batch\n"
            "                    too large for its GPU, lowers it after the out-of-memory\n"
            "                    error and goes on, while model A is untouched\n"
            "\n"
            "Options (the scenarios above):\n"
            "  --epochs N        epochs (default 5; 1 with --tf-placement or --split)\n"
            "  --steps N         training steps per epoch (default 100; 50 with\n"
            "                    --tf-placement, 60 with --split)\n"
            "  --batch N         examples per step (default 64; 256 with --split)\n"
            "  --seed N          seed of the data and the weights (default 1)\n"
            "  --log-placement   print the device of every op (VDEV_LOG_DEVICE_PLACEMENT=1)\n"
            "  --report DIR      also write the run's profiler trace to DIR/run.json (unless\n"
            "                    VDEV_TRACE_FILE is set) and draw DIR/memory.svg and\n"
            "                    DIR/placement.svg from it (see 'vdev plot')\n"
            "\n"
            "Devices: three or more GPUs carry one model each; two GPUs: the first is split\n"
            "into two logical GPUs; one GPU is split into three, each sized from the card's\n"
            "budget (its free memory less the driver reserve; see 'vdev devices').\n"
            "Without a GPU the demo runs on simulated ones (VDEV_SIM_GPUS=3x16GiB).\n");
}

__attribute__((format(printf, 2, 3))) static int usage_error(const struct demo_opts *o,
                                                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", o->prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    demo_usage(stderr);
    return 2;
}

int demo_parse(int argc, char **argv, enum demo_scenario sc, struct demo_opts *o)
{
    memset(o, 0, sizeof *o);
    const char *a0 = argc > 0 && argv[0] ? argv[0] : "demo";
    const char *base = strrchr(a0, '/') ? strrchr(a0, '/') + 1 : a0;
    snprintf(o->prog, sizeof o->prog, "%s", strcmp(base, "demo") ? base : "vdev demo");
    o->epochs = defaults[sc].epochs;
    o->steps = defaults[sc].steps;
    o->batch = defaults[sc].batch;
    o->seed = 1;
    static const char *const names[4] = {"--epochs", "--steps", "--batch", "--seed"};
    static const long lo[4] = {1, 1, 1, 0}, hi[4] = {1000000, 1000000, 1L << 20, 1000000000};
    long *vals[4] = {&o->epochs, &o->steps, &o->batch, &o->seed};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int k = 0;
        while (k < 4 && strcmp(a, names[k]))
            k++;
        if (k < 4) {
            if (i + 1 >= argc)
                return usage_error(o, "%s needs a number", a);
            char *end;
            errno = 0;
            long v = strtol(argv[i + 1], &end, 10);
            if (end == argv[i + 1] || *end || errno || v < lo[k] || v > hi[k])
                return usage_error(o, "%s takes a whole number from %ld to %ld, not '%s'", a,
                                   lo[k], hi[k], argv[i + 1]);
            *vals[k] = v;
            i++;
        } else if (!strcmp(a, "--log-placement")) {
            o->log_placement = 1;
        } else if (!strcmp(a, "--vdev-placement")) {
            if (sc != DEMO_TF_PLACEMENT)
                return usage_error(o, "--vdev-placement goes with --tf-placement");
            o->vdev_placement = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            demo_usage(stdout);
            return 0;
        } else {
            return usage_error(o, "unknown option '%s'", a);
        }
    }
    return -1;
}

/* ---- devices ---- */

uint64_t demo_model_bytes(enum demo_scenario sc, long batch)
{
    /* What the models allocate, and a quarter more for the allocator's
     * regions. chain3's models (32-64-64-16 and alike, each with its teacher;
     * tf_placement's 32-64-64-32) keep everything a step makes until its end:
     * input, both forward passes, the gradients, about 1000 floats (4 KiB)
     * per example, measured peaks 0.4 MiB at batch 64, 38.6 MiB at 10000;
     * their weights and Adam's slots are 150 KiB. So 768 KiB and 5 KiB per
     * example: the smallest limit each ran in without an OOM was below it at
     * every batch tried, 1 to 100000 (4.26 KiB per example at 10000, 4.55 at
     * 30000, 4.15 at 100000; tests/cli_demo.sh runs at the boundary). split's
     * 16-8192-4: 42 MiB at batch 256. */
    if (sc == DEMO_SPLIT)
        return 8 * MIB + (uint64_t)batch * 192 * 1024;
    return 768 * 1024 + (uint64_t)batch * 5 * 1024;
}

static int fail(const struct demo_opts *o, const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", o->prog, what, vdev_last_error());
    return 1;
}

/* Start-up reads these to write a file, serve metrics or print a report: the
 * probe must do none of that, and the real start-up does it all. */
static const char *const observers[] = {"VDEV_TRACE_FILE",       "VDEV_ALLOC_TRACE",
                                        "VDEV_METRICS_ADDR",     "VDEV_PLACEMENT_REPORT",
                                        "VDEV_LOG_DEVICE_PLACEMENT", "VDEV_OOM_REPORT"};
#define N_OBSERVERS (sizeof observers / sizeof observers[0])

/* Starts the runtime with growth on every GPU and the observers hidden, and
 * returns its logical devices in *out (the caller frees it); the runtime is
 * shut down again. Returns 0, or 1 after printing why. */
static int probe(const struct demo_opts *o, int n_gpus, struct vdev_logical_device **out, int *n)
{
    char *saved[N_OBSERVERS] = {0};
    int rc = 1;
    *out = NULL;
    for (size_t i = 0; i < N_OBSERVERS; i++) {
        const char *v = getenv(observers[i]);
        if (v && !(saved[i] = strdup(v))) {
            fprintf(stderr, "%s: out of host memory\n", o->prog);
            goto restore;
        }
        if (v)
            unsetenv(observers[i]);
    }
    for (int g = 0; g < n_gpus; g++) {
        char name[48];
        snprintf(name, sizeof name, "/physical_device:GPU:%d", g);
        if (vdev_config_set_memory_growth(name, true) != VDEV_OK) {
            fail(o, name);
            goto restore;
        }
    }
    if (vdev_init() != VDEV_OK) {
        fail(o, "start-up");
        vdev_shutdown(); /* forgets the growth set above */
        goto restore;
    }
    if (vdev_list_logical_devices(NULL, 0, n) != VDEV_OK || *n < 1)
        fail(o, "listing the logical devices");
    else if (!(*out = malloc((size_t)*n * sizeof **out)))
        fprintf(stderr, "%s: out of host memory\n", o->prog);
    else if (vdev_list_logical_devices(*out, *n, n) != VDEV_OK)
        fail(o, "listing the logical devices");
    else
        rc = 0;
    vdev_shutdown();
    if (rc) {
        free(*out);
        *out = NULL;
    }
restore:
    for (size_t i = 0; i < N_OBSERVERS; i++)
        if (saved[i]) {
            setenv(observers[i], saved[i], 1);
            free(saved[i]);
        }
    return rc;
}

static uint64_t mib_floor(uint64_t bytes) { return bytes / MIB * MIB; }

int demo_no_gpu(const char *prog, int n_gpus)
{
    const char *vis = getenv("VDEV_VISIBLE_DEVICES");
    fprintf(stderr,
            "%s: no GPU is visible (VDEV_VISIBLE_DEVICES=\"%s\" hides the %d there are); "
            "the demo needs at least one GPU, real or simulated\n",
            prog, vis ? vis : "", n_gpus);
    return 1;
}

int demo_start(const struct demo_opts *o, enum demo_scenario sc, struct demo_devices *d)
{
    memset(d, 0, sizeof *d);
    int n_phys;
    if (vdev_list_physical_devices(NULL, 0, &n_phys) != VDEV_OK)
        return fail(o, "devices");
    /* Why it simulates GPUs: said once it knows it runs on them (no word of
     * them when every GPU is hidden and it refuses). */
    char simulated[256] = "";
    if (n_phys == 1 && !getenv("VDEV_SIM_GPUS")) {
        const char *sim = sc == DEMO_SPLIT ? "1x8GiB" : "3x16GiB";
        snprintf(simulated, sizeof simulated,
                 "No GPU found (%s): running on simulated GPUs, VDEV_SIM_GPUS=%s",
                 vdev_gpu_absence_reason(), sim);
        if (setenv("VDEV_SIM_GPUS", sim, 1) != 0) {
            fprintf(stderr, "%s: cannot set VDEV_SIM_GPUS\n", o->prog);
            return 1;
        }
        vdev_shutdown(); /* forget the devices found so far */
        if (vdev_list_physical_devices(NULL, 0, &n_phys) != VDEV_OK)
            return fail(o, "devices");
    }

    /* What each visible GPU gives: the sum of its logical devices' limits. */
    struct vdev_logical_device *ld;
    int n_ld;
    if (probe(o, n_phys - 1, &ld, &n_ld))
        return 1;
    int phys[3], n_vis = 0, n_gpu = 0, first3_apart = 1;
    uint64_t cap[3] = {0};
    for (int i = 0; i < n_ld; i++) {
        if (ld[i].type != VDEV_DEVICE_GPU)
            continue;
        /* are the first three logical GPUs on three physical ones? */
        for (int j = 1; j < i && n_gpu < 3; j++)
            first3_apart &= ld[j].physical_index != ld[i].physical_index;
        n_gpu++;
        int k = 0;
        while (k < n_vis && phys[k] != ld[i].physical_index)
            k++;
        if (k == n_vis && n_vis < 3)
            phys[n_vis++] = ld[i].physical_index;
        if (k < 3)
            cap[k] += ld[i].limit_bytes;
    }
    free(ld);
    if (n_gpu == 0)
        return demo_no_gpu(o->prog, n_phys - 1);
    if (simulated[0])
        printf("%s\n", simulated);

    /* Choose, and say so. */
    char b1[32], b2[32], b3[32];
    uint64_t lim[3] = {0};
    int split_n = 0; /* logical devices to make of GPU phys[0] (0: keep what is there) */
    if (sc == DEMO_SPLIT) {
        split_n = 2;
        lim[0] = cap[0] >= 6 * GIB ? 4 * GIB : mib_floor(cap[0] / 3 * 2);
        lim[1] = cap[0] >= 6 * GIB ? 2 * GIB : mib_floor(cap[0] / 3);
        printf("Devices: GPU %d (budget %s) split into logical GPUs of %s (model A) and %s "
               "(model B)\n",
               phys[0], vdev_format_bytes(cap[0], b1, sizeof b1),
               vdev_format_bytes(lim[0], b2, sizeof b2), vdev_format_bytes(lim[1], b3, sizeof b3));
    } else if (n_gpu >= 3) {
        printf("Devices: %d %sGPUs, one model on each%s\n", n_gpu,
               first3_apart ? "" : "logical ", n_gpu > 3 ? " of the first three" : "");
    } else if (n_vis == 2) {
        split_n = 2;
        lim[0] = lim[1] = mib_floor(cap[0] / 2);
        lim[2] = cap[1];
        printf("Devices: GPU %d (budget %s) split into two logical GPUs of %s for models 1 "
               "and 2; GPU %d (budget %s) for model 3\n",
               phys[0], vdev_format_bytes(cap[0], b1, sizeof b1),
               vdev_format_bytes(lim[0], b2, sizeof b2), phys[1],
               vdev_format_bytes(cap[1], b3, sizeof b3));
    } else {
        split_n = 3;
        lim[0] = lim[1] = lim[2] = mib_floor(cap[0] / 3);
        printf("Devices: GPU %d (budget %s) split into three logical GPUs of %s, one model on "
               "each\n",
               phys[0], vdev_format_bytes(cap[0], b1, sizeof b1),
               vdev_format_bytes(lim[0], b2, sizeof b2));
    }

    if (split_n) {
        char name[48];
        snprintf(name, sizeof name, "/physical_device:GPU:%d", phys[0]);
        if (vdev_config_set_logical_devices(name, lim, split_n) != VDEV_OK)
            return fail(o, name);
        /* --split shows memory in use against reserved: it grows on demand. */
        if (sc == DEMO_SPLIT && vdev_config_set_memory_growth(name, true) != VDEV_OK)
            return fail(o, name);
    }
    if (vdev_init() != VDEV_OK)
        return fail(o, "start-up");
    struct vdev_logical_device real[8];
    int n_real;
    if (vdev_list_logical_devices(real, 8, &n_real) != VDEV_OK)
        return fail(o, "listing the logical devices");
    d->n = sc == DEMO_SPLIT ? 2 : 3;
    for (int k = 0; k < d->n; k++) {
        if (k + 1 >= n_real || k + 1 >= 8 || real[k + 1].type != VDEV_DEVICE_GPU) {
            fprintf(stderr, "%s: start-up made %d logical GPUs, not %d\n", o->prog, n_real - 1,
                    d->n);
            return 1;
        }
        snprintf(d->name[k], sizeof d->name[k], "%s", real[k + 1].name);
        d->limit_bytes[k] = real[k + 1].limit_bytes;
    }

    /* Enough memory for the models at this batch? Under TensorFlow's rule
     * every model's work lands on GPU:0. */
    uint64_t need = demo_model_bytes(sc, o->batch);
    for (int k = 0; k < d->n; k++) {
        uint64_t want = sc == DEMO_TF_PLACEMENT && !o->vdev_placement && k == 0 ? 3 * need : need;
        if (d->limit_bytes[k] < want) {
            /* At batch 1 there is no smaller batch to give: the GPU is too small. */
            fprintf(stderr,
                    "%s: %s has %s, less than the %s %s at batch %ld%s run on larger GPUs "
                    "(VDEV_SIM_GPUS=%s)\n",
                    o->prog, d->name[k], vdev_format_bytes(d->limit_bytes[k], b1, sizeof b1),
                    vdev_format_bytes(want, b2, sizeof b2),
                    want > need ? "the three models need there" : "its model needs", o->batch,
                    o->batch > 1 ? "; give a smaller --batch, or"
                                 : ", the smallest batch: the GPU is too small;",
                    sc == DEMO_SPLIT ? "1x8GiB" : "3x16GiB");
            return 1;
        }
    }
    return 0;
}
