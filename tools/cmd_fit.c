/* cmd_fit.c — `vdev fit`: will these models fit this card, before they run.
 *
 * Given allocation traces (VDEV_ALLOC_TRACE format, one per model), a card
 * (a size, or a GPU name with a known size) and a split (floors, ceilings and
 * priorities, as VDEV_LOGICAL_DEVICES writes them), it starts vdev on one
 * simulated card of that size, each model on its own logical device, and
 * replays the traces together through the real allocators and the card's
 * governance (floors, ceilings, lending, garbage collection), as a run on
 * that card would allocate. For each model it reports whether it fits (and
 * where it would fail), its peak in use, its peak reserved, the smallest
 * ceiling that would fit (bisection to 1 MiB, everything else as given) and
 * the margin; then the smallest card that holds the traces side by side, in
 * growth mode (each model on a device that shares the whole card) and with
 * preallocation (each model's device preallocated to the smallest region it
 * fits in, rounded up to whole MiB), and which of the two needs more: whole
 * MiB, printed as --card takes them, with the split the preallocation answer
 * assumes printed as --split takes it, so that either can be run again.
 *
 * Interleaving: peak-aligned round-robin. Each trace is cut after the event
 * at which its live bytes first reach their peak; the first parts run
 * round-robin, one event of each trace in turn (a trace that has reached
 * its cut waits), so that every model stands at its peak at the same moment,
 * then the second parts run round-robin. No interleaving demands more live
 * memory of the card at once (the sum of the peaks). But a growing region is
 * cut to what the card has left, so a model's regions depend on what the
 * others hold when it grows: a model that starts first may grow regions
 * that leave too little for another's one large request. So every order of
 * the models' starts is run too (each model, with its pre-live blocks, up
 * to its peak before the next starts, then the second parts round-robin):
 * all orders up to ALL_ORDERS_UP_TO models, above it each model first and
 * each last; a model fits only when it fits in all of them, and the searches
 * check all of them. Blocks live before a trace
 * was recorded (its pre_live_blocks and pre_live_bytes fields) are allocated
 * first, as that many equal blocks. A model that runs out of memory stops
 * there and keeps what it holds.
 *
 * The environment is set aside: every variable vdev reads but the driver
 * reserve, which is vdev's (TF_DEVICE_MIN_SYS_MEMORY_IN_MB if set, else
 * TensorFlow's for the card's compute capability). */
#define _GNU_SOURCE
#include "fit.h"

#include "alloc/replay.h"
#include "runtime/runtime.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Cards by name: the total memory nvidia-smi reports, in MiB. */
static const struct {
    const char *name; /* as matched: lower case, no spaces, '-' or '_' */
    const char *label;
    uint64_t mib;
    int cc_major;
} known[] = {
    {"h200", "NVIDIA H200", 143771, 9},         {"h100", "NVIDIA H100 80GB", 81559, 9},
    {"a10080gb", "NVIDIA A100 80GB", 81920, 8}, {"a10040gb", "NVIDIA A100 40GB", 40960, 8},
    {"l40s", "NVIDIA L40S", 46068, 8},          {"a10", "NVIDIA A10", 23028, 8},
    {"l4", "NVIDIA L4", 23034, 8},              {"t4", "NVIDIA T4", 15360, 7},
    {"rtx5090", "GeForce RTX 5090", 32607, 12}, {"rtx4090", "GeForce RTX 4090", 24564, 8},
    {"rtx3090", "GeForce RTX 3090", 24576, 8},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vdev fit --card SIZE|GPU [--split LIST] [--preallocate] [--json]\n"
            "                [--no-search] TRACE...\n\n"
            "Replays allocation traces (one per model, VDEV_ALLOC_TRACE format) together on a\n"
            "simulated card, each model on its own logical device, through vdev's allocator\n"
            "and the card's floors, ceilings and priorities, and says for each model whether\n"
            "it fits, its peak, the smallest ceiling that fits and the margin; then the\n"
            "smallest card for the traces side by side, with growth and with preallocation\n"
            "(in whole MiB, as --card takes it; preallocation with the --split it assumes).\n"
            "At most %d traces (one logical device each, as on one card); one TRACE may\n"
            "be '-', standard input.\n\n"
            "  --card SIZE|GPU  the card: a size (24GiB, 1.4GiB: rounded down to whole bytes,\n"
            "                   as VDEV_SIM_GPUS does) or a GPU: h200, h100, a100-80gb,\n"
            "                   a100-40gb, l40s, a10, l4, t4, rtx5090, rtx4090, rtx3090\n"
            "  --split LIST     the logical devices, one per trace, as VDEV_LOGICAL_DEVICES\n"
            "                   writes them for GPU 0 (a '0:' prefix is allowed, no other GPU):\n"
            "                   16GiB,8GiB or 4GiB@critical,2GiB..6GiB,..@low\n"
            "                   (default: each trace shares the whole card, '..')\n"
            "  --preallocate    growth off for the run (default: growth on): each device\n"
            "                   preallocates its floor (one trace without --split: the\n"
            "                   whole budget); a device without a floor is refused, as it\n"
            "                   would grow\n"
            "  --json           one JSON object instead of the table\n"
            "  --no-search      skip the smallest limits and the smallest cards\n\n"
            "Interleaving: peak-aligned round-robin (every model at its peak at the same\n"
            "moment: the most live memory the models can demand of the card together),\n"
            "then every order of the models' starts (each up to its peak before the next\n"
            "starts; over %d models each model first and each last): a growing region is\n"
            "cut to what the card has left, so what fits depends on who starts first. A\n"
            "model fits only when it fits in every order; the searches check them all.\n"
            "Environment: fit reads TF_DEVICE_MIN_SYS_MEMORY_IN_MB (the driver reserve) and\n"
            "sets aside every other variable vdev reads, set or not, well-formed or not:\n"
            "device settings (VDEV_SIM_GPUS, visible devices, fractions, splits, growth),\n"
            "VDEV_CLUSTER_CONFIG and TF_CONFIG, placement, determinism, traces, metrics.\n"
            "It names on stderr the device settings and cluster file it set aside.\n"
            "Exit status: 0 when every model fits, 1 when one does not or on an error\n"
            "(an unreadable or empty trace, a write error), 2 on a usage error.\n",
            MAX_MODELS, ALL_ORDERS_UP_TO);
}

/* ---- the card ---- */

static int parse_card(const char *text, uint64_t *bytes, int *cc, char *label, size_t cap)
{
    char norm[64];
    size_t k = 0;
    for (const char *c = text; *c && k + 1 < sizeof norm; c++)
        if (!strchr(" -_", *c))
            norm[k++] = (char)tolower((unsigned char)*c);
    norm[k] = '\0';
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(norm, known[i].name)) {
            *bytes = known[i].mib * MIB;
            *cc = known[i].cc_major;
            snprintf(label, cap, "%s", known[i].label);
            return 0;
        }
    /* A card's size, as VDEV_SIM_GPUS reads it: a fraction of a byte
     * ("1.40GiB") is rounded down, and the simulated card to 256 bytes.
     * (Limits, which --split gives, must be whole numbers of bytes.) */
    if (vdev_parse_bytes(text, bytes) != VDEV_OK || *bytes < MIB) {
        vdev_clear_error();
        return -1;
    }
    *bytes &= ~(uint64_t)255;
    *cc = 0;
    snprintf(label, cap, "%s", text);
    return 0;
}

/* ---- the traces ---- */

/* The cut (events up to the first peak of live bytes) and the pre-live
 * blocks of a loaded trace. */
static int prepare(struct model *m, char *err, size_t cap)
{
    const struct vdev_trace *t = m->t;
    uint64_t *size = calloc(t->n_slots ? t->n_slots : 1, sizeof *size);
    if (!size) {
        snprintf(err, cap, "out of host memory");
        return -1;
    }
    uint64_t live = 0;
    m->cut = 0;
    for (uint64_t i = 0; i < t->n_events; i++) {
        const struct vdev_trace_event *e = &t->events[i];
        if (e->bytes) {
            size[e->slot] = (e->bytes + 255) & ~(uint64_t)255;
            live += size[e->slot];
        } else {
            live -= size[e->slot];
        }
        if (live == t->peak_live_bytes && !m->cut)
            m->cut = i + 1;
    }
    free(size);
    if (vdev_cli_trace_pre_live(t, &m->n_pre, &m->pre_bytes) != VDEV_OK) {
        snprintf(err, cap, "%s", vdev_last_error());
        return -1;
    }
    return 0;
}

/* ---- one replay ---- */

struct cursor {
    struct vdev_ldev *d;
    uint32_t *handle; /* per slot */
    uint32_t *pre;    /* the pre-live blocks */
    uint64_t next;    /* next event */
    uint32_t pre_done;
    int failed;
};

/* One step of model i in the given phase (0: pre-live, 1: to the cut, 2: to
 * the end); 0 when it has nothing more to do in that phase. */
static int step(const struct model *m, struct cursor *c, struct outcome *o, int phase)
{
    if (c->failed)
        return 0;
    struct vdev_block b;
    if (phase == 0) {
        if (c->pre_done == m->n_pre)
            return 0;
        if (vdev_alloc_malloc(c->d->alloc, m->pre_bytes, &b) != VDEV_OK) {
            c->failed = 1;
            o->failed_line = 0;
            snprintf(o->error, sizeof o->error, "%s", vdev_last_error());
            return 0;
        }
        c->pre[c->pre_done++] = b.handle;
        return 1;
    }
    uint64_t end = phase == 1 ? m->cut : m->t->n_events;
    if (c->next >= end)
        return 0;
    const struct vdev_trace_event *e = &m->t->events[c->next];
    if (e->bytes) {
        if (vdev_alloc_malloc(c->d->alloc, e->bytes, &b) != VDEV_OK) {
            c->failed = 1;
            o->failed_line = e->line;
            snprintf(o->error, sizeof o->error, "%s", vdev_last_error());
            return 0;
        }
        c->handle[e->slot] = b.handle;
    } else {
        vdev_alloc_free(c->d->alloc, c->handle[e->slot]);
    }
    c->next++;
    return 1;
}

/* Starts vdev on one simulated card of `card` bytes split as cfg (growth or
 * not), replays every trace, fills out[] and shuts down. VDEV_OK, or the
 * start-up's error (message set). *budget gets the card's budget. */
static enum vdev_status run(const struct fit *f, uint64_t card,
                            const struct vdev_logical_device_config *cfg, int growth,
                            const int *perm, struct outcome *out, uint64_t *budget)
{
    vdev_shutdown();
    char sim[48];
    snprintf(sim, sizeof sim, "1x%llu", (unsigned long long)card);
    setenv("VDEV_SIM_GPUS", sim, 1);
    /* A simulated card's free memory is all of it. Under 2 GiB TensorFlow's
     * reserve is 225 MiB whatever the compute capability, as vdev's own for a
     * simulated card, which leaves it unsubtracted on a card of 225 MiB or
     * less (the whole card is the budget): set only the 1050 MiB above. */
    if (f->cc7_reserve && card >= (2ull << 30))
        setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "1050", 1);
    else if (f->cc7_reserve)
        unsetenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
    enum vdev_status st;
    struct vdev_logical_device_config one = cfg[0];
    one.floor_bytes = one.ceiling_bytes;
    int n_log = f->whole && !cfg[0].ceiling_bytes ? 0 : f->n; /* 0: the card unsplit */
    if ((st = vdev_config_set_memory_growth("GPU:0", growth)) != VDEV_OK ||
        (n_log && (st = vdev_config_set_logical_devices_ex("GPU:0", f->whole ? &one : cfg,
                                                           n_log)) != VDEV_OK) ||
        (st = vdev_init()) != VDEV_OK) {
        vdev_shutdown();
        return st;
    }
    struct cursor c[MAX_MODELS];
    memset(c, 0, sizeof c);
    for (int i = 0; i < f->n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].fits = 1;
        c[i].d = vdev_runtime_lookup(VDEV_DEVICE_GPU, i);
        if (!c[i].d) { /* the configuration fit set did not apply */
            st = vdev_error(VDEV_ERR_INTERNAL,
                            "the simulated card has no /device:GPU:%d after start-up (the "
                            "split did not apply)",
                            i);
            goto out;
        }
        c[i].handle = calloc(f->m[i].t->n_slots ? f->m[i].t->n_slots : 1, sizeof(uint32_t));
        c[i].pre = calloc(f->m[i].n_pre ? f->m[i].n_pre : 1, sizeof(uint32_t));
        if (!c[i].handle || !c[i].pre) {
            st = vdev_error(VDEV_ERR_OOM, "vdev fit: out of host memory");
            goto out;
        }
    }
    struct vdev_memory_limits l;
    vdev_memory_get_limits("GPU:0", &l);
    *budget = l.card_budget_bytes;
    if (perm) /* in start order, each up to its peak before the next starts */
        for (int k = 0; k < f->n; k++)
            for (int phase = 0; phase < 2; phase++)
                while (step(&f->m[perm[k]], &c[perm[k]], &out[perm[k]], phase))
                    ;
    for (int phase = perm ? 2 : 0; phase < 3; phase++)
        for (int busy = 1; busy;) {
            busy = 0;
            for (int k = 0; k < f->n; k++) {
                int i = perm ? perm[k] : k;
                busy |= step(&f->m[i], &c[i], &out[i], phase);
            }
        }
    for (int i = 0; i < f->n; i++) {
        struct vdev_alloc_stats s;
        vdev_alloc_get_stats(c[i].d->alloc, &s);
        out[i].fits = !c[i].failed;
        out[i].peak_in_use = s.peak_bytes_in_use;
        out[i].peak_reserved = s.peak_bytes_reserved;
    }
out:
    for (int i = 0; i < f->n; i++) {
        free(c[i].handle);
        free(c[i].pre);
    }
    vdev_shutdown();
    return st;
}

/* ---- start orders ---- */

static int count_orders(int n)
{
    if (n < 2)
        return 0; /* one model: the round robin is its only order */
    if (n > ALL_ORDERS_UP_TO)
        return 2 * n;
    int k = 1;
    for (int i = 2; i <= n; i++)
        k *= i;
    return k;
}

/* Whether the run went as wanted: every model fits (want < 0), or model want. */
static int went(const struct outcome *o, int n, int want)
{
    return want < 0 ? vdev_fit_all_fit(o, n) : o[want].fits;
}

/* The peak-aligned round robin, then every start order (f->n_orders), until
 * one fails: out gets that run's outcomes (else the round robin's) and
 * *bad_order its index (-1: none, or the round robin failed). VDEV_OK or
 * the start-up's error. */
static enum vdev_status run_all(const struct fit *f, uint64_t card,
                                const struct vdev_logical_device_config *cfg, int growth,
                                int want, struct outcome *out, uint64_t *budget, int *bad_order)
{
    *bad_order = -1;
    enum vdev_status st = run(f, card, cfg, growth, NULL, out, budget);
    if (st != VDEV_OK || !went(out, f->n, want))
        return st;
    struct outcome o[MAX_MODELS];
    int perm[MAX_MODELS];
    uint64_t b;
    for (int k = 0; k < f->n_orders; k++) {
        vdev_fit_order_of(f->n, k, perm);
        if ((st = run(f, card, cfg, growth, perm, o, &b)) != VDEV_OK)
            return st;
        if (!went(o, f->n, want)) {
            memcpy(out, o, (size_t)f->n * sizeof *o);
            *bad_order = k;
            return VDEV_OK;
        }
    }
    return VDEV_OK;
}

/* ---- searches ---- */

/* The smallest ceiling, a whole number of MiB (as --split takes it), with
 * which model i fits in every order, everything else as given; its ceiling
 * (the card's budget when it has none) when no whole MiB below it does; 0
 * when it does not fit even with the card's whole budget. */
static uint64_t smallest_limit(const struct fit *f, int i, const struct outcome *first)
{
    struct vdev_logical_device_config cfg[MAX_MODELS];
    struct outcome o[MAX_MODELS];
    uint64_t budget;
    int bad;
    for (int k = 0; k < f->n; k++)
        cfg[k] = f->m[k].cfg;
    uint64_t hi = cfg[i].ceiling_bytes ? cfg[i].ceiling_bytes : f->budget;
    if (!first[i].fits) {
        hi = f->budget;
        cfg[i].ceiling_bytes = hi;
        if (run_all(f, f->card, cfg, f->growth, i, o, &budget, &bad) != VDEV_OK || !o[i].fits)
            return 0;
    }
    /* Below its peak in use it cannot fit: lo, a whole MiB under it, fails. */
    uint64_t need = first[i].peak_in_use;
    uint64_t lo = (need ? need - 1 : 0) / MIB * MIB;
    while (hi > lo + MIB) {
        uint64_t mid = lo + (((hi - lo) / 2) & ~(MIB - 1));
        if (mid == lo)
            mid = lo + MIB;
        cfg[i].ceiling_bytes = mid;
        cfg[i].floor_bytes = f->m[i].cfg.floor_bytes < mid ? f->m[i].cfg.floor_bytes : mid;
        if (run_all(f, f->card, cfg, f->growth, i, o, &budget, &bad) == VDEV_OK && o[i].fits)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* Whether every model fits on a card of `card` bytes split as cfg; *started
 * says whether start-up succeeded (the split fits the card's budget). */
static int fits_on(const struct fit *f, uint64_t card, const struct vdev_logical_device_config *cfg,
                   int growth, int *started)
{
    struct outcome o[MAX_MODELS];
    uint64_t budget;
    int bad;
    enum vdev_status st = run_all(f, card, cfg, growth, -1, o, &budget, &bad);
    *started = st == VDEV_OK;
    return st == VDEV_OK && vdev_fit_all_fit(o, f->n);
}

/* The smallest card in (lo, hi] (lo known too small, hi known to fit; both
 * whole MiB), to 1 MiB: a whole number of MiB, which --card takes as it is
 * printed. */
static uint64_t bisect_card(const struct fit *f, const struct vdev_logical_device_config *cfg,
                            int growth, uint64_t lo, uint64_t hi)
{
    int started;
    while (hi - lo > MIB) {
        uint64_t mid = (lo + (hi - lo) / 2) & ~(MIB - 1);
        if (fits_on(f, mid, cfg, growth, &started))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* The smallest card (whole MiB) on which cfg fits every model; 0 if none up
 * to 2^46 bytes does (or, without growth, when the fixed limits themselves
 * do not hold the traces). `from` is the least a card can be: the peaks
 * live together, as each range's lowest card may be all budget. The budget is
 * not monotone in the card's size: the driver reserve (TensorFlow's
 * MinSystemMemory, 225 MiB under 2 GiB free) is left aside only when the
 * card is larger than it (a card of 225 MiB or less is all budget, one of
 * 226 MiB has 1 MiB), and it steps up at 2 GiB, so a card just under 2 GiB
 * may hold more than one just over it. The budget grows with the card
 * within each of the three ranges, so each is searched apart, the smallest
 * first. */
static uint64_t smallest_card(const struct fit *f, const struct vdev_logical_device_config *cfg,
                              int growth, uint64_t from)
{
    const uint64_t top[2] = {225 * MIB, (2ull << 30) - MIB}; /* of the bounded ranges */
    int started;
    /* a whole MiB under `from` (a card of `from` bytes may be all budget) */
    uint64_t lo = (from ? from - 1 : 0) & ~(MIB - 1), below = 0; /* a range starts above below */
    for (int k = 0; k < 2; k++) {
        /* the top of a range fits when anything in it does */
        if (lo < top[k] && fits_on(f, top[k], cfg, growth, &started))
            return bisect_card(f, cfg, growth, lo > below ? lo : below, top[k]);
        below = top[k];
    }
    lo = lo > below ? lo : below;
    uint64_t hi = lo + MIB > (2ull << 30) ? lo * 2 : 2ull << 30;
    for (;;) {
        if (fits_on(f, hi, cfg, growth, &started))
            break;
        if ((started && !growth) || hi > (1ull << 45))
            return 0;
        lo = hi;
        hi *= 2;
    }
    return bisect_card(f, cfg, growth, lo, hi);
}

/* ---- the command ---- */

/* Sets the environment aside: the run is on the simulated card alone, so of
 * the variables vdev reads (the library's table) fit keeps only the driver
 * reserve, TF_DEVICE_MIN_SYS_MEMORY_IN_MB, and checks it at start-up; every
 * other one is unset, whatever its value, so that none changes the answer
 * (a cluster file's sim_gpus would replace the card) and none that the
 * answer does not depend on stops the run (VDEV_PLACEMENT, TF_CONFIG). The
 * device settings the user had set (those a user may take fit to follow)
 * are named in one note on stderr. 1: the card's reserve is for run() to set
 * (compute capability 7). */
static int clean_env(int cc)
{
    static const char *const device[] = {
        "VDEV_SIM_GPUS",          "VDEV_VISIBLE_DEVICES",      "VDEV_LOGICAL_DEVICES",
        "VDEV_MEMORY_GROWTH",     "TF_FORCE_GPU_ALLOW_GROWTH", "VDEV_MEMORY_FRACTION",
        "TF_GPU_MEMORY_FRACTION", "VDEV_CLUSTER_CONFIG"};
    char note[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < sizeof device / sizeof device[0]; i++)
        if (getenv(device[i]) && len < sizeof note)
            len += (size_t)snprintf(note + len, sizeof note - len, "%s%s", len ? ", " : "",
                                    device[i]);
    if (len)
        fprintf(stderr, "vdev fit: note: set aside %s: fit simulates --card's card, split as "
                        "--split says (see 'vdev fit --help')\n",
                note);
    int n;
    const struct vdev_envvar *env = vdev_config_envvars(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(env[i].name, "TF_DEVICE_MIN_SYS_MEMORY_IN_MB") != 0)
            unsetenv(env[i].name);
    /* TensorFlow's reserve for compute capability 7 (simulated cards are
     * 8): set per card by run(), as it steps at 2 GiB free. */
    const char *own = getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB"); /* empty: unset, as TF */
    return cc == 7 && !(own && *own);
}

int vdev_cmd_fit(int argc, char **argv)
{
    static struct fit f;
    static struct report r;
    memset(&f, 0, sizeof f);
    memset(&r, 0, sizeof r);
    f.growth = 1;
    int json = 0, search = 1, cc = 0, rc = 1;
    const char *card = NULL, *split = NULL;
    const char *paths[MAX_MODELS + 1];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--no-search")) {
            search = 0;
        } else if (!strcmp(a, "--preallocate")) {
            f.growth = 0;
        } else if (!strcmp(a, "--card") || !strcmp(a, "--split")) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "vdev fit: %s needs a value (see 'vdev fit --help')\n", a);
                return 2;
            }
            const char **to = a[2] == 'c' ? &card : &split;
            if (*to) {
                fprintf(stderr, "vdev fit: %s given twice ('%s' and '%s'): give one\n", a, *to,
                        argv[i + 1]);
                return 2;
            }
            *to = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vdev fit: unknown option '%s' (see 'vdev fit --help')\n", a);
            return 2;
        } else if (n == MAX_MODELS) {
            fprintf(stderr, "vdev fit: more than %d traces\n", MAX_MODELS);
            return 2;
        } else {
            for (int k = 0; k < n && !strcmp(a, "-"); k++)
                if (!strcmp(paths[k], "-")) {
                    fprintf(stderr, "vdev fit: '-' (standard input) given twice: it can be read "
                                    "once; give the other traces as files\n");
                    return 2;
                }
            paths[n++] = a;
        }
    }
    if (!card || !n) {
        fprintf(stderr, "vdev fit: %s (see 'vdev fit --help')\n",
                !card ? "no card given (--card 24GiB or --card h100)" : "no trace given");
        return 2;
    }
    if (parse_card(card, &f.card, &cc, f.label, sizeof f.label) != 0) {
        fprintf(stderr, "vdev fit: --card '%s' is neither a size of 1 MiB or more (24GiB) nor a "
                        "known GPU (h200, h100, a100-80gb, a100-40gb, l40s, a10, l4, t4, rtx5090, "
                        "rtx4090, rtx3090)\n",
                card);
        return 2;
    }
    f.n = n;
    for (int i = 0; i < n; i++) {
        f.m[i].path = vdev_input_name(paths[i]);
        f.m[i].cfg.priority = VDEV_PRIORITY_NORMAL;
    }
    if (split) {
        char buf[1024];
        int k = 0;
        struct vdev_logical_device_config cfg[VDEV_MAX_LOGICAL_PER_GPU];
        /* a VDEV_LOGICAL_DEVICES entry as written, "0:16GiB,8GiB": the card
         * is the one simulated GPU, GPU 0, so no other GPU may be named */
        const char *list = split;
        size_t digits = strspn(list, "0123456789");
        if (strchr(list, ';')) {
            fprintf(stderr, "vdev fit: --split '%s' lists more than one GPU: fit simulates one "
                            "card (write its logical devices alone, e.g. 16GiB,8GiB)\n",
                    split);
            return 2;
        }
        if (digits && list[digits] == ':') {
            if (strspn(list, "0") != digits) {
                fprintf(stderr, "vdev fit: --split '%s' names GPU %.*s: fit simulates one card, "
                                "GPU 0 (write '0:%s' or '%s')\n",
                        split, (int)digits, list, list + digits + 1, list + digits + 1);
                return 2;
            }
            list += digits + 1;
        }
        snprintf(buf, sizeof buf, "%s", list);
        if (vdev_config_parse_split("--split", list, buf, 0, cfg, &k) != VDEV_OK) {
            fprintf(stderr, "vdev fit: %s\n", vdev_last_error());
            return 2;
        }
        if (k != n) {
            fprintf(stderr, "vdev fit: --split gives %d logical device%s for %d trace%s (one "
                            "each)\n",
                    k, k == 1 ? "" : "s", n, n == 1 ? "" : "s");
            return 2;
        }
        for (int i = 0; i < n; i++)
            f.m[i].cfg = cfg[i];
    }
    /* A run with growth off preallocates a logical device's floor; one with
     * no floor ('..', or no --split) grows even so. */
    f.whole = !split && n == 1 && !f.growth;
    for (int i = 0; i < n && !f.growth && !f.whole; i++)
        if (!f.m[i].cfg.floor_bytes) {
            fprintf(stderr, "vdev fit: --preallocate: GPU:%d has no floor (%s), so it would "
                            "grow, as in a run with growth off; give each trace a floor or a "
                            "limit in --split (e.g. --split 8GiB,4GiB)\n",
                    i, split ? "'..' in --split" : "no --split for several traces");
            return 2;
        }
    char err[640];
    for (int i = 0; i < n; i++) {
        if (vdev_trace_load(paths[i], &f.m[i].t) != VDEV_OK) {
            fprintf(stderr, "vdev fit: %s\n", vdev_last_error());
            goto done;
        }
        vdev_cli_trace_cut_note("vdev fit", f.m[i].t);
        if (f.m[i].t->n_allocs == 0) { /* an empty file, or comments only */
            fprintf(stderr, "vdev fit: %s: no allocation events, nothing to fit\n", f.m[i].path);
            goto done;
        }
        if (prepare(&f.m[i], err, sizeof err) != 0) {
            fprintf(stderr, "vdev fit: %s\n", err);
            goto done;
        }
    }
    const char *own_reserve = getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
    f.user_reserve = own_reserve && *own_reserve; /* empty: unset, as in TensorFlow */
    f.cc7_reserve = clean_env(cc);
    f.n_orders = count_orders(n);
    struct vdev_logical_device_config cfg[MAX_MODELS];
    for (int i = 0; i < n; i++)
        cfg[i] = f.m[i].cfg;
    if (run_all(&f, f.card, cfg, f.growth, -1, r.o, &f.budget, &r.bad_order) != VDEV_OK) {
        fprintf(stderr, "vdev fit: %s\n", vdev_last_error());
        goto done;
    }
    if (search) {
        r.searched = 1;
        for (int i = 0; i < n; i++)
            r.smallest[i] = smallest_limit(&f, i, r.o);
        /* Growth: every model shares the whole card. Preallocation: each its
         * smallest one-region capacity with its pre-live blocks, as `vdev
         * replay` measures it ("with pre-live bytes"). */
        struct vdev_logical_device_config shared[MAX_MODELS], pre[MAX_MODELS];
        uint64_t sum_peaks = 0, sum_caps = 0;
        for (int i = 0; i < n; i++) {
            shared[i] = (struct vdev_logical_device_config){0};
            sum_peaks += f.m[i].t->peak_live_bytes + (uint64_t)f.m[i].n_pre * f.m[i].pre_bytes;
            uint64_t cap = 0;
            if (vdev_cli_min_capacity_with_pre_live(f.m[i].t, &cap) != VDEV_OK)
                cap = (uint64_t)f.m[i].n_pre * ((f.m[i].pre_bytes + 255) & ~(uint64_t)255);
            /* whole MiB (a larger region holds what a smaller one does), so
             * the split it assumes prints as --split takes it */
            cap = (cap + MIB - 1) & ~(MIB - 1);
            cap = cap < MIB ? MIB : cap;
            pre[i] = (struct vdev_logical_device_config){.floor_bytes = cap, .ceiling_bytes = cap};
            r.pre_cap[i] = cap;
            sum_caps += cap;
        }
        r.card_grow = smallest_card(&f, shared, 1, sum_peaks);
        r.card_pre = smallest_card(&f, pre, 0, sum_caps);
    }
    if (json)
        vdev_fit_print_json(&f, &r);
    else
        vdev_fit_print_table(&f, &r);
    rc = vdev_fit_all_fit(r.o, n) ? 0 : 1;
done:
    for (int i = 0; i < n; i++)
        vdev_trace_free(f.m[i].t);
    return rc;
}
