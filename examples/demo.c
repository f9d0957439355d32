/* demo.c — what the demo programs share (see demo.h): their options and
 * usage (an example program's own, and `vdev demo`'s, from the same text),
 * and the devices the three-model ones run on, sized from what the machine
 * has.
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

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* ---- options and usage ---- */

/* Each scenario: its switch under `vdev demo`, its defaults, the GPUs it
 * simulates where there is none, and what it runs (printed beside its switch
 * in `vdev demo --help` and under an example program's own usage). */
static const struct scenario {
    const char *flag; /* "" for vdev demo's default */
    long def[4];      /* --epochs, --steps, --batch, --seed */
    const char *sim;  /* VDEV_SIM_GPUS without a GPU */
    const char *about;
} scenarios[DEMO_SCENARIO_COUNT] = {
    [DEMO_CHAIN3] = {"", {5, 100, 64, 1}, "3x16GiB",
                     "three chained MLPs, one per GPU, each trained inside its own device scope; "
                     "prints each model's loss per epoch and what every device ran, holds and "
                     "copied"},
    [DEMO_TF_PLACEMENT] = {"--tf-placement", {1, 50, 64, 1}, "3x16GiB",
                           "the bug report's program (device scopes only around building the "
                           "models) under TensorFlow's placement rule: GPU:0 carries everything "
                           "and the placement audit names what ran away; --vdev-placement runs "
                           "it under vdev's rule instead"},
    [DEMO_SPLIT] = {"--split", {1, 60, 256, 1}, "1x8GiB",
                    "one GPU split into two logical GPUs with hard limits (4 GiB and 2 GiB where "
                    "the card has room); model B is given a batch too large for its GPU, lowers "
                    "it after the out-of-memory error and goes on, while model A is untouched"},
    [DEMO_MIRRORED] = {"--mirrored", {1, 200, 1024, 1}, "4x16GiB",
                       "one model trained data-parallel on every logical GPU (the mirrored "
                       "strategy: a replica on each, the global batch split among them, "
                       "gradients summed by vdev's ring all-reduce); prints the loss of every "
                       "replica, their memory and imbalance, and the step rate against the same "
                       "model and batch on one GPU"},
};

/* The options every scenario takes: the numbers, then --log-placement. */
static const struct {
    const char *name, *what;
    long lo, hi;
} num_opts[4] = {{"--epochs", "epochs", 1, 1000000},
                 {"--steps", "training steps per epoch", 1, 1000000},
                 {"--batch", "examples per step", 1, 1L << 20},
                 {"--seed", "seed of the data and the weights", 0, 1000000000}};
static const char log_what[] = "print the device of every op (VDEV_LOG_DEVICE_PLACEMENT=1)";
static const char opts_usage[] = "[--epochs N] [--steps N] [--batch N] [--seed N] "
                                 "[--log-placement]";

/* Where the three-model scenarios run (chain3, tf_placement). */
static const char devices_text[] =
    "Devices: three or more GPUs carry one model each; two GPUs: the first is split into two "
    "logical GPUs; one GPU is split into three, each sized from the card's budget (its free "
    "memory less the driver reserve; see 'vdev devices') once the split's streams have "
    "their memory, less 64 MiB left to a real GPU's driver.";

/* `vdev demo --priority` (examples/priority.c, which has no demo_parse). */
static const char priority_text[] =
    "one GPU split three ways: a critical model with a floor keeps its share while two "
    "secondary models grow and shrink in the rest; a monitor thread moves their ceilings, they "
    "halve their batch on an out-of-memory error or on memory pressure (--steps N: their "
    "training steps, from 10 to 100000, default 40)";

#define COLS 80 /* the width of the usage */
#define DESC 20 /* the column descriptions start at */

/* Prints `lead`, then `text` after it, broken at spaces (not within
 * brackets: "[--steps N]" stays whole) so that no line passes COLS columns;
 * every further line starts with `hang` spaces. */
static void wrap(FILE *f, const char *lead, int hang, const char *text)
{
    int col = fprintf(f, "%s", lead), first = 1;
    for (const char *p = text; *p;) {
        const char *e = p;
        for (int depth = 0; *e && (*e != ' ' || depth); e++)
            depth += (*e == '[') - (*e == ']');
        int len = (int)(e - p);
        if (!first && col + 1 + len > COLS)
            col = fprintf(f, "\n%*s", hang, "") - 1;
        else if (!first)
            col += fprintf(f, " ");
        col += fprintf(f, "%.*s", len, p);
        first = 0;
        p = *e ? e + 1 : e;
    }
    fputc('\n', f);
}

/* One option: its name in the first columns, what it does from DESC on. */
static void option(FILE *f, const char *name, const char *what)
{
    char lead[48];
    snprintf(lead, sizeof lead, "  %-*s", DESC - 2, name);
    wrap(f, lead, DESC, what);
}

/* Appends to out (cap bytes, always terminated). */
__attribute__((format(printf, 3, 4))) static void add(char *out, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(out);
    va_list ap;
    va_start(ap, fmt);
    if (n < cap)
        vsnprintf(out + n, cap - n, fmt, ap);
    va_end(ap);
}

/* What option k does under `vdev demo` (the first three scenarios): its
 * default, then the scenarios whose default differs ("epochs (default 5; 1
 * with --tf-placement or --split)"). */
static void vdev_option(FILE *f, int k)
{
    char name[32], what[256] = "";
    long def = scenarios[DEMO_CHAIN3].def[k];
    add(what, sizeof what, "%s (default %ld", num_opts[k].what, def);
    int said[DEMO_MIRRORED] = {0};
    const char *sep = "; ";
    for (int s = DEMO_CHAIN3 + 1; s < DEMO_MIRRORED; s++) {
        if (said[s] || scenarios[s].def[k] == def)
            continue;
        add(what, sizeof what, "%s%ld with %s", sep, scenarios[s].def[k], scenarios[s].flag);
        for (int t = s + 1; t < DEMO_MIRRORED; t++)
            if (scenarios[t].def[k] == scenarios[s].def[k]) {
                add(what, sizeof what, " or %s", scenarios[t].flag);
                said[t] = 1;
            }
        sep = ", ";
    }
    add(what, sizeof what, ")");
    snprintf(name, sizeof name, "%s N", num_opts[k].name);
    option(f, name, what);
}

void demo_usage(FILE *f)
{
    const struct scenario *mir = &scenarios[DEMO_MIRRORED];
    char text[512];
    wrap(f, "usage: vdev demo ", 17,
         "[--tf-placement [--vdev-placement] | --split] [--epochs N] [--steps N] [--batch N] "
         "[--seed N] [--log-placement] [--report DIR]");
    fprintf(f, "\nScenarios, on the GPUs there are (simulated ones where there are none):\n");
    for (int s = DEMO_CHAIN3; s < DEMO_MIRRORED; s++)
        option(f, s == DEMO_CHAIN3 ? "(default)" : scenarios[s].flag, scenarios[s].about);
    fprintf(f, "\nOptions (the scenarios above):\n");
    for (int k = 0; k < 4; k++)
        vdev_option(f, k);
    option(f, "--log-placement", log_what);
    option(f, "--report DIR",
           "also write the run's profiler trace to DIR/run.json (unless VDEV_TRACE_FILE is set) "
           "and draw DIR/memory.svg and DIR/placement.svg from it (see 'vdev plot')");
    fputc('\n', f);
    wrap(f, "", 0, devices_text);
    snprintf(text, sizeof text,
             "Without a GPU the demo runs on simulated ones (VDEV_SIM_GPUS=%s; %s with %s).",
             scenarios[DEMO_CHAIN3].sim, scenarios[DEMO_SPLIT].sim, scenarios[DEMO_SPLIT].flag);
    wrap(f, "", 0, text);
    fprintf(f, "\n  vdev demo --priority [--steps N] [--report DIR]\n");
    wrap(f, "                    ", DESC, priority_text);
    fprintf(f, "\nData parallel:\n");
    snprintf(text, sizeof text, "%s [--report DIR]", opts_usage);
    wrap(f, "  vdev demo --mirrored ", 23, text);
    snprintf(text, sizeof text,
             "%s (defaults: %ld epoch%s of %ld steps, a global batch of %ld; without a GPU, "
             "VDEV_SIM_GPUS=%s)",
             mir->about, mir->def[0], mir->def[0] == 1 ? "" : "s", mir->def[1], mir->def[2],
             mir->sim);
    wrap(f, "                    ", DESC, text);
}

/* An example program's usage: the options it takes (the scenario switches
 * and --report DIR are the vdev command's), with its own defaults. */
static void program_usage(FILE *f, const char *prog, enum demo_scenario sc)
{
    const struct scenario *s = &scenarios[sc];
    char lead[96], text[160];
    snprintf(lead, sizeof lead, "usage: %s ", prog);
    snprintf(text, sizeof text, "%s%s", sc == DEMO_TF_PLACEMENT ? "[--vdev-placement] " : "",
             opts_usage);
    wrap(f, lead, (int)strlen(lead), text);
    fprintf(f, "\nWhat it runs, on the GPUs there are (simulated ones where there are none):\n");
    wrap(f, "  ", 2, s->about);
    fprintf(f, "\nOptions:\n");
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s N", num_opts[k].name);
        snprintf(text, sizeof text, "%s (default %ld)", num_opts[k].what, s->def[k]);
        option(f, name, text);
    }
    option(f, "--log-placement", log_what);
    fputc('\n', f);
    if (sc == DEMO_CHAIN3 || sc == DEMO_TF_PLACEMENT)
        wrap(f, "", 0, devices_text);
    fprintf(f, "Without a GPU it runs on simulated ones (VDEV_SIM_GPUS=%s).\n", s->sim);
    fprintf(f, "The vdev command runs the same program: see 'vdev demo --help'.\n");
}

const char *demo_simulated_gpus(enum demo_scenario sc) { return scenarios[sc].sim; }

/* The usage of the program running: `vdev demo`'s under the vdev command. */
static void usage(FILE *f, const struct demo_opts *o, enum demo_scenario sc)
{
    if (o->under_vdev)
        demo_usage(f);
    else
        program_usage(f, o->prog, sc);
}

__attribute__((format(printf, 3, 4))) static int usage_error(const struct demo_opts *o,
                                                              enum demo_scenario sc,
                                                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", o->prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    usage(stderr, o, sc);
    return 2;
}

int demo_parse(int argc, char **argv, enum demo_scenario sc, struct demo_opts *o)
{
    memset(o, 0, sizeof *o);
    const char *a0 = argc > 0 && argv[0] ? argv[0] : "demo";
    const char *base = strrchr(a0, '/') ? strrchr(a0, '/') + 1 : a0;
    o->under_vdev = !strcmp(base, "demo");
    snprintf(o->prog, sizeof o->prog, "%s", o->under_vdev ? "vdev demo" : base);
    long *vals[4] = {&o->epochs, &o->steps, &o->batch, &o->seed};
    for (int k = 0; k < 4; k++)
        *vals[k] = scenarios[sc].def[k];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int k = 0;
        while (k < 4 && strcmp(a, num_opts[k].name))
            k++;
        if (k < 4) {
            if (i + 1 >= argc)
                return usage_error(o, sc, "%s needs a number", a);
            char *end;
            errno = 0;
            long v = strtol(argv[i + 1], &end, 10);
            /* digits alone: strtol would skip leading blanks and a sign */
            if (!isdigit((unsigned char)argv[i + 1][0]) || *end || errno || v < num_opts[k].lo ||
                v > num_opts[k].hi)
                return usage_error(o, sc, "%s takes a whole number from %ld to %ld, not '%s'", a,
                                   num_opts[k].lo, num_opts[k].hi, argv[i + 1]);
            *vals[k] = v;
            i++;
        } else if (!strcmp(a, "--log-placement")) {
            o->log_placement = 1;
        } else if (!strcmp(a, "--vdev-placement") && sc == DEMO_TF_PLACEMENT) {
            o->vdev_placement = 1;
        } else if (!strcmp(a, "--vdev-placement") && o->under_vdev) {
            return usage_error(o, sc, "--vdev-placement goes with --tf-placement");
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, o, sc);
            return 0;
        } else {
            return usage_error(o, sc, "unknown option '%s'", a);
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
 * probe must do none of that, and the real start-up does it all. The last
 * one is hidden only from a probe of a split (probe()). */
static const char *const observers[] = {"VDEV_TRACE_FILE",       "VDEV_ALLOC_TRACE",
                                        "VDEV_METRICS_ADDR",     "VDEV_PLACEMENT_REPORT",
                                        "VDEV_LOG_DEVICE_PLACEMENT", "VDEV_OOM_REPORT",
                                        "VDEV_LOGICAL_DEVICES"};
#define N_OBSERVERS (sizeof observers / sizeof observers[0])

/* Starts the runtime with growth on every GPU and the observers hidden, and
 * returns its logical devices in *out (the caller frees it); the runtime is
 * shut down again. With split_n > 0, GPU split_phys is split into split_n
 * logical devices of 1 MiB first, and *split_budget gets the budget they
 * share: start-up takes each logical device's stream memory (on CUDA a
 * scratch buffer and a cuBLAS workspace) out of the card's budget before the
 * limits, so a card split n ways has less to share than the one logical
 * device of the first probe reports. Returns 0, or 1 after printing why. */
static int probe(const struct demo_opts *o, int n_gpus, int split_phys, int split_n,
                 uint64_t *split_budget, struct vdev_logical_device **out, int *n)
{
    char *saved[N_OBSERVERS] = {0};
    int rc = 1;
    *out = NULL;
    for (size_t i = 0; i < N_OBSERVERS; i++) {
        /* With a split, the demo's own replaces the environment's on that GPU
         * (the real start-up warns of it once; the probe must not warn too). */
        if (split_n == 0 && !strcmp(observers[i], "VDEV_LOGICAL_DEVICES"))
            continue;
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
    if (split_n > 0) {
        char name[48];
        uint64_t tiny[3] = {MIB, MIB, MIB};
        snprintf(name, sizeof name, "/physical_device:GPU:%d", split_phys);
        if (split_n > 3 || vdev_config_set_logical_devices(name, tiny, split_n) != VDEV_OK) {
            fail(o, name);
            vdev_shutdown();
            goto restore;
        }
    }
    if (vdev_init() != VDEV_OK) {
        fail(o, "start-up");
        vdev_shutdown(); /* forgets the growth (and the split) set above */
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
    for (int i = 0; rc == 0 && split_n > 0; i++) {
        struct vdev_memory_limits l;
        if (i == *n) {
            fprintf(stderr, "%s: GPU %d has no logical device after its split\n", o->prog,
                    split_phys);
            rc = 1;
        } else if ((*out)[i].type == VDEV_DEVICE_GPU && (*out)[i].physical_index == split_phys) {
            if (vdev_memory_get_limits((*out)[i].name, &l) != VDEV_OK)
                rc = fail(o, (*out)[i].name);
            else
                *split_budget = l.card_budget_bytes;
            break;
        }
    }
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

/* What model k of scenario sc would have on the GPUs it simulates
 * (scenarios[sc].sim, "NxSIZE"): a whole GPU each, or for --split the
 * logical GPU demo_start makes of one (0 when the text does not parse). */
static uint64_t sim_room(enum demo_scenario sc, int k)
{
    const char *x = strchr(scenarios[sc].sim, 'x');
    uint64_t size = 0;
    if (!x || vdev_parse_bytes(x + 1, &size) != VDEV_OK)
        return 0;
    if (sc != DEMO_SPLIT)
        return size;
    if (size >= 6 * GIB)
        return k == 0 ? 4 * GIB : 2 * GIB;
    return k == 0 ? mib_floor(size / 3 * 2) : mib_floor(size / 3);
}

/* What a split of one card leaves to the driver (demo_start). */
#define DRIVER_MARGIN (64 * MIB)

/* *has: whether GPU phys runs under a driver with memory of its own (any
 * backend but simulated GPUs, which have none and keep their budget whole).
 * Returns 0, or 1 after printing why. */
static int has_driver(const struct demo_opts *o, int n_phys, int phys, int *has)
{
    struct vdev_physical_device *pd = calloc((size_t)n_phys, sizeof *pd);
    int n = 0;
    *has = 0;
    if (!pd) {
        fprintf(stderr, "%s: out of host memory\n", o->prog);
        return 1;
    }
    if (vdev_list_physical_devices(pd, n_phys, &n) != VDEV_OK) {
        free(pd);
        return fail(o, "devices");
    }
    for (int i = 0; i < n && i < n_phys; i++)
        if (pd[i].type == VDEV_DEVICE_GPU && pd[i].index == phys)
            *has = strcmp(pd[i].backend, "sim") != 0;
    free(pd);
    return 0;
}

int demo_no_gpu(const char *prog, int n_gpus, int made)
{
    const char *vis = getenv("VDEV_VISIBLE_DEVICES");
    const char *s = n_gpus == 1 ? "" : "s";
    char what[96];
    if (made) /* there is no GPU: these are the demo's stand-ins */
        snprintf(what, sizeof what, "the %d simulated GPU%s the demo would make", n_gpus, s);
    else if (getenv("VDEV_SIM_GPUS"))
        snprintf(what, sizeof what, "the %d simulated GPU%s of VDEV_SIM_GPUS", n_gpus, s);
    else
        snprintf(what, sizeof what, "the %d GPU%s there %s", n_gpus, s,
                 n_gpus == 1 ? "is" : "are");
    fprintf(stderr,
            "%s: no GPU is visible (VDEV_VISIBLE_DEVICES=\"%s\" hides %s); "
            "the demo needs at least one GPU, real or simulated\n",
            prog, vis ? vis : "", what);
    return 1;
}

void demo_say_metrics(void)
{
    int port = vdev_metrics_port();
    const char *addr = getenv("VDEV_METRICS_ADDR");
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (port <= 0 || !colon)
        return;
    /* the host as given (localhost is served on 127.0.0.1), the port bound */
    int n = (int)(colon - addr);
    if (n == 9 && !strncmp(addr, "localhost", 9))
        printf("Metrics: http://127.0.0.1:%d/metrics\n", port);
    else
        printf("Metrics: http://%.*s:%d/metrics\n", n, addr, port);
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
        const char *sim = scenarios[sc].sim;
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
    if (probe(o, n_phys - 1, -1, 0, NULL, &ld, &n_ld))
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
        return demo_no_gpu(o->prog, n_phys - 1, simulated[0] != '\0');
    if (simulated[0])
        printf("%s\n", simulated);

    /* Choose, and say so. split_n: logical devices to make of GPU phys[0]
     * (0: keep what is there), sized from the budget they will share. */
    int split_n = sc == DEMO_SPLIT ? 2 : n_gpu >= 3 ? 0 : n_vis == 2 ? 2 : 3;
    /* room: what the split hands out, the budget less a margin for a real
     * driver, whose own memory grows after the probe (on an H200 the budget
     * of the next start-up was 2 MiB lower, one granule of code or stream
     * state loaded at first use, and the split asked for the probe's budget
     * to the MiB was refused); simulated GPUs keep their budget whole */
    uint64_t room = cap[0];
    int has = 0;
    if (split_n) {
        uint64_t shared = 0;
        if (probe(o, n_phys - 1, phys[0], split_n, &shared, &ld, &n_ld))
            return 1;
        free(ld);
        /* The card's budget as split: less than the first probe's by the
         * split's stream memory, and the whole card where the environment
         * had split it (the demo's split replaces that one) */
        cap[0] = room = shared;
        if (has_driver(o, n_phys, phys[0], &has) != 0)
            return 1;
        if (has)
            room = cap[0] - (cap[0] / 2 < DRIVER_MARGIN ? cap[0] / 2 : DRIVER_MARGIN);
    }
    char b1[32], b2[32], b3[32];
    uint64_t lim[3] = {0};
    if (sc == DEMO_SPLIT) {
        lim[0] = room >= 6 * GIB ? 4 * GIB : mib_floor(room / 3 * 2);
        lim[1] = room >= 6 * GIB ? 2 * GIB : mib_floor(room / 3);
        printf("Devices: GPU %d (budget %s) split into logical GPUs of %s (model A) and %s "
               "(model B)\n",
               phys[0], vdev_format_bytes(cap[0], b1, sizeof b1),
               vdev_format_bytes(lim[0], b2, sizeof b2), vdev_format_bytes(lim[1], b3, sizeof b3));
    } else if (n_gpu >= 3) {
        printf("Devices: %d %sGPUs, one model on each%s\n", n_gpu,
               first3_apart ? "" : "logical ", n_gpu > 3 ? " of the first three" : "");
    } else if (n_vis == 2) {
        lim[0] = lim[1] = mib_floor(room / 2);
        lim[2] = cap[1];
        printf("Devices: GPU %d (budget %s) split into two logical GPUs of %s for models 1 "
               "and 2; GPU %d (budget %s) for model 3\n",
               phys[0], vdev_format_bytes(cap[0], b1, sizeof b1),
               vdev_format_bytes(lim[0], b2, sizeof b2), phys[1],
               vdev_format_bytes(cap[1], b3, sizeof b3));
    } else {
        lim[0] = lim[1] = lim[2] = mib_floor(room / 3);
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
    demo_say_metrics();
    struct vdev_logical_device real[8];
    int n_real;
    if (vdev_list_logical_devices(real, 8, &n_real) != VDEV_OK)
        return fail(o, "listing the logical devices");
    int n_models = sc == DEMO_SPLIT ? 2 : 3; /* d->name has room for 3 */
    d->n = n_models;
    for (int k = 0; k < n_models && k < 3; k++) {
        if (k + 1 >= n_real || k + 1 >= 8 || real[k + 1].type != VDEV_DEVICE_GPU) {
            fprintf(stderr, "%s: start-up made %d logical GPUs, not %d\n", o->prog, n_real - 1,
                    d->n);
            return 1;
        }
        snprintf(d->name[k], sizeof d->name[k], "%s", real[k + 1].name);
        d->limit_bytes[k] = real[k + 1].limit_bytes;
    }

    /* Enough memory for the models at this batch? Under TensorFlow's rule
     * every model's work lands on GPU:0. Larger GPUs are advised only where
     * the scenario's simulated ones would hold the model: --split's logical
     * GPUs stop growing at 4 GiB and 2 GiB, so past that only a smaller batch
     * helps. */
    uint64_t need = demo_model_bytes(sc, o->batch);
    for (int k = 0; k < d->n; k++) {
        uint64_t want = sc == DEMO_TF_PLACEMENT && !o->vdev_placement && k == 0 ? 3 * need : need;
        if (d->limit_bytes[k] < want) {
            int larger = sim_room(sc, k) >= want;
            char advice[160];
            if (larger)
                snprintf(advice, sizeof advice, "%s run on larger GPUs (VDEV_SIM_GPUS=%s)",
                         o->batch > 1 ? "; give a smaller --batch, or"
                                      : ", the smallest batch: the GPU is too small;",
                         scenarios[sc].sim);
            else if (o->batch > 1)
                snprintf(advice, sizeof advice, "; give a smaller --batch%s",
                         sc == DEMO_SPLIT ? " (--split's logical GPUs are 4 GiB and 2 GiB at most)"
                                          : "");
            else
                snprintf(advice, sizeof advice, ", the smallest batch: the GPU is too small");
            fprintf(stderr, "%s: %s has %s, less than the %s %s at batch %ld%s\n", o->prog,
                    d->name[k], vdev_format_bytes(d->limit_bytes[k], b1, sizeof b1),
                    vdev_format_bytes(want, b2, sizeof b2),
                    want > need ? "the three models need there" : "its model needs", o->batch,
                    advice);
            return 1;
        }
    }
    return 0;
}
