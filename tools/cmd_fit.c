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
 * memory of the card at once (the sum of the peaks), and a model's own
 * allocator sees its own events in its own order under any interleaving, so
 * its fragmentation does not depend on the rule: only the card's sharing
 * does, and this order is the worst case for it. Blocks live before a trace
 * was recorded (its pre_live_blocks and pre_live_bytes fields) are allocated
 * first, as that many equal blocks. A model that runs out of memory stops
 * there and keeps what it holds.
 *
 * The environment is set aside: every variable vdev reads but the driver
 * reserve, which is vdev's (TF_DEVICE_MIN_SYS_MEMORY_IN_MB if set, else
 * TensorFlow's for the card's compute capability). */
#define _GNU_SOURCE
#include "cli.h"

#include "alloc/replay.h"
#include "config/config.h"
#include "runtime/runtime.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define MAX_MODELS VDEV_MAX_LOGICAL_PER_GPU

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

struct model {
    const char *path;
    struct vdev_trace *t;
    uint64_t cut;                          /* events before the cut: up to the first peak */
    uint32_t n_pre;                        /* blocks live before recording */
    uint64_t pre_bytes;                    /* each of them */
    struct vdev_logical_device_config cfg; /* as asked (ceiling 0: the card's budget) */
};

/* What one replay found for one model. */
struct outcome {
    int fits;
    uint32_t failed_line;  /* the trace's line of the failed event; 0: a pre-live block */
    char error[512];
    uint64_t peak_in_use, peak_reserved;
};

struct fit {
    int n;
    struct model m[MAX_MODELS];
    uint64_t card;  /* total bytes */
    char label[96];
    int growth;
    uint64_t budget; /* of the card, as start-up computed it */
    /* The card is of compute capability 7 and the user set no reserve, so
     * each run sets TensorFlow's (MinSystemMemory) for its card's size. */
    int cc7_reserve;
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
            "At most %d traces (one logical device each, as on one card).\n\n"
            "  --card SIZE|GPU  the card: a size (24GiB, 1.4GiB: rounded down to whole bytes,\n"
            "                   as VDEV_SIM_GPUS does) or a GPU: h200, h100, a100-80gb,\n"
            "                   a100-40gb, l40s, a10, l4, t4, rtx5090, rtx4090, rtx3090\n"
            "  --split LIST     the logical devices, one per trace, as VDEV_LOGICAL_DEVICES\n"
            "                   writes them for GPU 0 (a '0:' prefix is allowed, no other GPU):\n"
            "                   16GiB,8GiB or 4GiB@critical,2GiB..6GiB,..@low\n"
            "                   (default: each trace shares the whole card, '..')\n"
            "  --preallocate    growth off for the run (default: growth on)\n"
            "  --json           one JSON object instead of the table\n"
            "  --no-search      skip the smallest limits and the smallest cards\n\n"
            "Interleaving: peak-aligned round-robin (every model at its peak at the same\n"
            "moment: the most live memory the models can demand of the card together).\n"
            "Environment: fit reads TF_DEVICE_MIN_SYS_MEMORY_IN_MB (the driver reserve) and\n"
            "sets aside every other variable vdev reads, set or not, well-formed or not:\n"
            "device settings (VDEV_SIM_GPUS, visible devices, fractions, splits, growth),\n"
            "VDEV_CLUSTER_CONFIG and TF_CONFIG, placement, determinism, traces, metrics.\n"
            "It names on stderr the device settings and cluster file it set aside.\n"
            "Exit status: 0 when every model fits, 1 when one does not or on an error\n"
            "(an unreadable or empty trace, a write error), 2 on a usage error.\n",
            MAX_MODELS);
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
    vdev_cli_trace_pre_live(t, &m->n_pre, &m->pre_bytes);
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
                            struct outcome *out, uint64_t *budget)
{
    vdev_shutdown();
    char sim[48];
    snprintf(sim, sizeof sim, "1x%llu", (unsigned long long)card);
    setenv("VDEV_SIM_GPUS", sim, 1);
    if (f->cc7_reserve) /* a simulated card's free memory is all of it */
        setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", card < (2ull << 30) ? "225" : "1050", 1);
    enum vdev_status st;
    if ((st = vdev_config_set_memory_growth("GPU:0", growth)) != VDEV_OK ||
        (st = vdev_config_set_logical_devices_ex("GPU:0", cfg, f->n)) != VDEV_OK ||
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
    for (int phase = 0; phase < 3; phase++)
        for (int busy = 1; busy;) {
            busy = 0;
            for (int i = 0; i < f->n; i++)
                busy |= step(&f->m[i], &c[i], &out[i], phase);
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

static int all_fit(const struct outcome *o, int n)
{
    for (int i = 0; i < n; i++)
        if (!o[i].fits)
            return 0;
    return 1;
}

/* ---- searches ---- */

/* The smallest ceiling (to 1 MiB) with which model i fits, everything else
 * as given; 0 when it does not fit even with the card's whole budget. */
static uint64_t smallest_limit(const struct fit *f, int i, const struct outcome *first)
{
    struct vdev_logical_device_config cfg[MAX_MODELS];
    struct outcome o[MAX_MODELS];
    uint64_t budget;
    for (int k = 0; k < f->n; k++)
        cfg[k] = f->m[k].cfg;
    uint64_t hi = cfg[i].ceiling_bytes ? cfg[i].ceiling_bytes : f->budget;
    if (!first[i].fits) {
        hi = f->budget;
        cfg[i].ceiling_bytes = hi;
        if (run(f, f->card, cfg, f->growth, o, &budget) != VDEV_OK || !o[i].fits)
            return 0;
    }
    /* Below its peak in use (so far) it cannot fit. */
    uint64_t lo = first[i].peak_in_use > 256 ? first[i].peak_in_use - 256 : 0;
    while (hi - lo > MIB) {
        uint64_t mid = (lo + (hi - lo) / 2) & ~(uint64_t)255;
        if (mid < MIB)
            mid = MIB;
        cfg[i].ceiling_bytes = mid;
        cfg[i].floor_bytes = f->m[i].cfg.floor_bytes < mid ? f->m[i].cfg.floor_bytes : mid;
        if (run(f, f->card, cfg, f->growth, o, &budget) == VDEV_OK && o[i].fits)
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
    enum vdev_status st = run(f, card, cfg, growth, o, &budget);
    *started = st == VDEV_OK;
    return st == VDEV_OK && all_fit(o, f->n);
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
 * do not hold the traces). `from` is a size known too small. The driver
 * reserve (TensorFlow's MinSystemMemory) steps up at 2 GiB of free memory,
 * so a card just under 2 GiB may hold more than one just over it; the
 * budget grows with the card on either side of the step, so each side is
 * searched apart, the smaller side first. */
static uint64_t smallest_card(const struct fit *f, const struct vdev_logical_device_config *cfg,
                              int growth, uint64_t from)
{
    const uint64_t step = 2ull << 30;
    int started;
    uint64_t lo = from < MIB ? MIB : from & ~(MIB - 1);
    if (lo < step - MIB && fits_on(f, step - MIB, cfg, growth, &started))
        return fits_on(f, lo, cfg, growth, &started) ? lo
                                                      : bisect_card(f, cfg, growth, lo, step - MIB);
    if (lo < step) {
        if (fits_on(f, step, cfg, growth, &started))
            return step;
        lo = step;
    }
    uint64_t hi = lo * 2;
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

/* ---- output ---- */

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static const char *basename_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

struct report {
    struct outcome o[MAX_MODELS];
    uint64_t smallest[MAX_MODELS]; /* 0: none */
    int searched;
    uint64_t card_grow, card_pre;
    uint64_t pre_cap[MAX_MODELS]; /* preallocation: each model's one-region limit */
};

static void print_json(const struct fit *f, const struct report *r)
{
    printf("{\"card\": {\"name\": ");
    json_str(f->label);
    printf(", \"total_bytes\": %llu, \"budget_bytes\": %llu}, \"policy\": \"%s\", "
           "\"interleaving\": \"peak-aligned round-robin\", \"all_fit\": %s, \"models\": [",
           (unsigned long long)f->card, (unsigned long long)f->budget,
           f->growth ? "growth" : "preallocate", all_fit(r->o, f->n) ? "true" : "false");
    for (int i = 0; i < f->n; i++) {
        const struct model *m = &f->m[i];
        const struct outcome *o = &r->o[i];
        uint64_t ceiling = m->cfg.ceiling_bytes ? m->cfg.ceiling_bytes : f->budget;
        printf("%s\n  {\"trace\": ", i ? "," : "");
        json_str(m->path);
        printf(", \"device\": \"/device:GPU:%d\", \"floor_bytes\": %llu, \"ceiling_bytes\": %llu, "
               "\"priority\": \"%s\", \"fits\": %s, \"failed_at_line\": ",
               i, (unsigned long long)m->cfg.floor_bytes, (unsigned long long)ceiling,
               vdev_priority_name(m->cfg.priority), o->fits ? "true" : "false");
        if (o->fits)
            printf("null, \"error\": null");
        else {
            printf("%u, \"error\": ", o->failed_line);
            json_str(o->error);
        }
        printf(", \"peak_in_use_bytes\": %llu, \"peak_reserved_bytes\": %llu",
               (unsigned long long)o->peak_in_use, (unsigned long long)o->peak_reserved);
        if (r->searched && r->smallest[i])
            printf(", \"smallest_limit_bytes\": %llu, \"margin_bytes\": %lld}",
                   (unsigned long long)r->smallest[i],
                   (long long)ceiling - (long long)r->smallest[i]);
        else
            printf(", \"smallest_limit_bytes\": null, \"margin_bytes\": null}");
    }
    printf("\n], \"min_card_bytes\": ");
    if (r->searched) {
        printf("{\"growth\": %llu, \"preallocate\": %llu, \"preallocate_limits_bytes\": [",
               (unsigned long long)r->card_grow, (unsigned long long)r->card_pre);
        for (int i = 0; i < f->n; i++)
            printf("%s%llu", i ? ", " : "", (unsigned long long)r->pre_cap[i]);
        printf("]}}\n");
    } else
        printf("null}\n");
}

static void print_table(const struct fit *f, const struct report *r)
{
    char b1[32], b2[32], b3[32], b4[32], b6[32];
    printf("card      %s: %s, budget %s (simulated, one logical device per trace), %s\n",
           f->label, vdev_format_bytes(f->card, b1, sizeof b1),
           vdev_format_bytes(f->budget, b2, sizeof b2), f->growth ? "growth" : "preallocation");
    printf("order     peak-aligned round-robin: every model at its peak at the same moment\n\n");
    printf("%-7s %-22s %-10s %-10s %-8s %-5s %-11s %-13s %-14s %s\n", "device", "trace", "floor",
           "ceiling", "priority", "fits", "peak in use", "peak reserved", "smallest limit",
           "margin");
    for (int i = 0; i < f->n; i++) {
        const struct model *m = &f->m[i];
        const struct outcome *o = &r->o[i];
        uint64_t ceiling = m->cfg.ceiling_bytes ? m->cfg.ceiling_bytes : f->budget;
        char dev[16], margin[48] = "-", small[32] = "-";
        snprintf(dev, sizeof dev, "GPU:%d", i);
        if (r->searched && r->smallest[i]) {
            vdev_format_bytes(r->smallest[i], small, sizeof small);
            if (ceiling >= r->smallest[i])
                vdev_format_bytes(ceiling - r->smallest[i], margin, sizeof margin);
            else
                snprintf(margin, sizeof margin, "short by %s",
                         vdev_format_bytes(r->smallest[i] - ceiling, b6, sizeof b6));
        } else if (r->searched) {
            snprintf(small, sizeof small, "none");
        }
        printf("%-7s %-22.22s %-10s %-10s %-8s %-5s %-11s %-13s %-14s %s\n", dev,
               basename_of(m->path), vdev_format_bytes(m->cfg.floor_bytes, b1, sizeof b1),
               vdev_format_bytes(ceiling, b2, sizeof b2), vdev_priority_name(m->cfg.priority),
               o->fits ? "yes" : "no", vdev_format_bytes(o->peak_in_use, b3, sizeof b3),
               vdev_format_bytes(o->peak_reserved, b4, sizeof b4), small, margin);
    }
    for (int i = 0; i < f->n; i++)
        if (!r->o[i].fits) {
            if (r->o[i].failed_line)
                printf("\nGPU:%d fails at line %u of %s: %s\n", i, r->o[i].failed_line,
                       f->m[i].path, r->o[i].error);
            else
                printf("\nGPU:%d fails before its trace, allocating its %u blocks live before "
                       "recording: %s\n",
                       i, f->m[i].n_pre, r->o[i].error);
        }
    if (r->searched) {
        /* Whole MiB, as --card takes them, and the split the preallocation
         * answer assumes, as --split takes it. */
        char g[64] = "none", pa[64] = "none";
        if (r->card_grow)
            snprintf(g, sizeof g, "%lluMiB (%s)", (unsigned long long)(r->card_grow / MIB),
                     vdev_format_bytes(r->card_grow, b1, sizeof b1));
        if (r->card_pre)
            snprintf(pa, sizeof pa, "%lluMiB (%s)", (unsigned long long)(r->card_pre / MIB),
                     vdev_format_bytes(r->card_pre, b2, sizeof b2));
        printf("\nsmallest card for these traces side by side: growth %s, preallocation %s", g, pa);
        if (r->card_grow && r->card_pre && r->card_grow != r->card_pre)
            printf("; %s needs %lluMiB more\n",
                   r->card_grow > r->card_pre ? "growth" : "preallocation",
                   (unsigned long long)((r->card_grow > r->card_pre ? r->card_grow - r->card_pre
                                                                    : r->card_pre - r->card_grow) /
                                        MIB));
        else
            printf("\n");
        if (r->card_pre) {
            printf("preallocation: each model's device preallocated to the smallest region it "
                   "fits in: --preallocate --split ");
            for (int i = 0; i < f->n; i++)
                printf("%s%lluMiB", i ? "," : "", (unsigned long long)(r->pre_cap[i] / MIB));
            printf("\n");
        }
    }
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
    return cc == 7 && !getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
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
            *(a[2] == 'c' ? &card : &split) = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vdev fit: unknown option '%s' (see 'vdev fit --help')\n", a);
            return 2;
        } else if (n == MAX_MODELS) {
            fprintf(stderr, "vdev fit: more than %d traces\n", MAX_MODELS);
            return 2;
        } else {
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
        f.m[i].path = paths[i];
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
    char err[256];
    for (int i = 0; i < n; i++) {
        if (vdev_trace_load(paths[i], &f.m[i].t) != VDEV_OK) {
            fprintf(stderr, "vdev fit: %s\n", vdev_last_error());
            goto done;
        }
        vdev_cli_trace_cut_note("vdev fit", f.m[i].t);
        if (f.m[i].t->n_allocs == 0) { /* an empty file, or comments only */
            fprintf(stderr, "vdev fit: %s: no allocation events, nothing to fit\n", paths[i]);
            goto done;
        }
        if (prepare(&f.m[i], err, sizeof err) != 0) {
            fprintf(stderr, "vdev fit: %s\n", err);
            goto done;
        }
    }
    f.cc7_reserve = clean_env(cc);
    struct vdev_logical_device_config cfg[MAX_MODELS];
    for (int i = 0; i < n; i++)
        cfg[i] = f.m[i].cfg;
    if (run(&f, f.card, cfg, f.growth, r.o, &f.budget) != VDEV_OK) {
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
        print_json(&f, &r);
    else
        print_table(&f, &r);
    rc = all_fit(r.o, n) ? 0 : 1;
done:
    for (int i = 0; i < n; i++)
        vdev_trace_free(f.m[i].t);
    return rc;
}
