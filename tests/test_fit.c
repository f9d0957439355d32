/* test_fit.c — `vdev fit` agrees with an actual run of the same traces on
 * simulated devices of that size.
 *
 * The actual run is written here, apart from the command: it starts vdev on
 * VDEV_SIM_GPUS=1x<card> with the same split, allocates each trace's blocks
 * live before recording, then replays the traces through the public calls
 * (vdev_mem_alloc, vdev_mem_free) in the order the command documents —
 * peak-aligned round-robin: every trace up to the event at which its live
 * bytes first peak, one event of each in turn, then the rest likewise — and
 * reads each device's statistics with vdev_memory_info. The command runs as
 * a separate process (its --json output); its answers must equal the run's:
 * which models fit, where one fails and with what message, peaks in use and
 * reserved. Its smallest limits and cards must fit when run, and a little
 * less must not. When a start order fails (each model up to its peak
 * before the next starts), the command's answer is that run's. */
#define _GNU_SOURCE
#include "check.h"
#include "alloc/replay.h"

#include <stdlib.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define MAXM 4

static const char *traces[2] = {VDEV_DATA_DIR "/traces/mlp.trace",
                                VDEV_DATA_DIR "/traces/transformer.trace"};
/* The start order of the actual run: NULL, the peak-aligned round robin;
 * else each model in this order up to its peak before the next starts. */
static const int *start_order;

/* What one model did in a run. */
struct got {
    int fits;
    unsigned failed_line; /* 0: a block live before recording */
    char error[512];
    uint64_t peak_in_use, peak_reserved, smallest;
    int has_smallest;
};

/* ---- the actual run ---- */

struct replay {
    struct vdev_trace *t;
    uint64_t cut, next;
    uint32_t n_pre, pre_done;
    uint64_t pre_bytes;
    void **ptr;  /* per slot */
    void **pre;
    char dev[16];
    int failed;
};

static int actual_step(struct replay *r, struct got *g, int phase)
{
    if (r->failed)
        return 0;
    if (phase == 0) {
        if (r->pre_done == r->n_pre)
            return 0;
        if (vdev_mem_alloc(r->dev, r->pre_bytes, &r->pre[r->pre_done]) != VDEV_OK)
            goto fail;
        r->pre_done++;
        return 1;
    }
    uint64_t end = phase == 1 ? r->cut : r->t->n_events;
    if (r->next >= end)
        return 0;
    const struct vdev_trace_event *e = &r->t->events[r->next];
    if (e->bytes) {
        if (vdev_mem_alloc(r->dev, e->bytes, &r->ptr[e->slot]) != VDEV_OK)
            goto fail;
    } else {
        CHECK_OK(vdev_mem_free(r->dev, r->ptr[e->slot]));
    }
    r->next++;
    return 1;
fail:
    r->failed = 1;
    g->fits = 0;
    g->failed_line = phase == 0 ? 0 : (unsigned)r->t->events[r->next].line;
    snprintf(g->error, sizeof g->error, "%s", vdev_last_error());
    return 0;
}

/* Runs the traces on a card of `card` bytes split as `split` (the
 * VDEV_LOGICAL_DEVICES list for GPU 0), growth on or off. Returns 0 when
 * start-up failed. */
static int actual(uint64_t card, const char *split, int growth, int n, struct got *g)
{
    char sim[48], env[512];
    snprintf(sim, sizeof sim, "1x%llu", (unsigned long long)card);
    check_fresh(sim);
    snprintf(env, sizeof env, "0:%s", split);
    setenv("VDEV_LOGICAL_DEVICES", env, 1);
    setenv("VDEV_MEMORY_GROWTH", growth ? "true" : "false", 1);
    if (vdev_init() != VDEV_OK)
        return 0;
    struct replay r[MAXM];
    memset(r, 0, sizeof r);
    for (int i = 0; i < n; i++) {
        memset(&g[i], 0, sizeof g[i]);
        g[i].fits = 1;
        CHECK_OK(vdev_trace_load(traces[i], &r[i].t));
        snprintf(r[i].dev, sizeof r[i].dev, "GPU:%d", i);
        r[i].ptr = calloc(r[i].t->n_slots + 1, sizeof(void *));
        const char *nb = vdev_trace_field(r[i].t, "pre_live_blocks");
        const char *bb = vdev_trace_field(r[i].t, "pre_live_bytes");
        r[i].n_pre = nb ? (uint32_t)strtoul(nb, NULL, 10) : 0;
        uint64_t total = bb ? strtoull(bb, NULL, 10) : 0;
        r[i].pre_bytes = r[i].n_pre ? (total + r[i].n_pre - 1) / r[i].n_pre : 0;
        r[i].pre = calloc(r[i].n_pre + 1, sizeof(void *));
        /* the cut: just after the first event at the peak of live bytes */
        uint64_t *size = calloc(r[i].t->n_slots + 1, sizeof *size), live = 0;
        for (uint64_t k = 0; k < r[i].t->n_events && !r[i].cut; k++) {
            const struct vdev_trace_event *e = &r[i].t->events[k];
            if (e->bytes)
                live += size[e->slot] = (e->bytes + 255) / 256 * 256;
            else
                live -= size[e->slot];
            if (live == r[i].t->peak_live_bytes)
                r[i].cut = k + 1;
        }
        free(size);
    }
    if (start_order)
        for (int k = 0; k < n; k++)
            for (int phase = 0; phase < 2; phase++)
                while (actual_step(&r[start_order[k]], &g[start_order[k]], phase))
                    ;
    for (int phase = start_order ? 2 : 0; phase < 3; phase++)
        for (int busy = 1; busy;) {
            busy = 0;
            for (int k = 0; k < n; k++) {
                int i = start_order ? start_order[k] : k;
                busy |= actual_step(&r[i], &g[i], phase);
            }
        }
    for (int i = 0; i < n; i++) {
        struct vdev_memory_info mi;
        CHECK_OK(vdev_memory_info(r[i].dev, &mi));
        g[i].peak_in_use = mi.peak_bytes_in_use;
        g[i].peak_reserved = mi.peak_bytes_reserved;
        vdev_trace_free(r[i].t);
        free(r[i].ptr);
        free(r[i].pre);
    }
    vdev_shutdown();
    return 1;
}

/* ---- the command ---- */

/* The number after `key` at or after *p, advancing *p past it; -1 for null. */
static long long field(const char **p, const char *key)
{
    const char *at = *p ? strstr(*p, key) : NULL;
    if (!at) {
        *p = NULL;
        return -2;
    }
    at += strlen(key);
    *p = at;
    if (!strncmp(at, "null", 4))
        return -1;
    if (!strncmp(at, "true", 4))
        return 1;
    if (!strncmp(at, "false", 5))
        return 0;
    return strtoll(at, NULL, 10);
}

/* A JSON string value after `key` into out (the command escapes only '"',
 * '\\' and control characters). */
static void field_str(const char *p, const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    const char *at = p ? strstr(p, key) : NULL;
    if (!at || at[strlen(key)] != '"')
        return;
    at += strlen(key) + 1;
    size_t k = 0;
    for (; *at && *at != '"' && k + 1 < cap; at++)
        out[k++] = *at == '\\' ? *++at : *at;
    out[k] = '\0';
}

/* Runs `vdev fit --json` and reads its answers; returns the exit status.
 * card_grow, card_pre and pre_caps (the preallocated limits) may be NULL. */
static int command(const char *args, int n, struct got *g, uint64_t *card_grow, uint64_t *card_pre,
                   uint64_t *pre_caps)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "env -u VDEV_SIM_GPUS %s/vdev fit --json %s %s %s", VDEV_BINARY_DIR,
             args, traces[0], n > 1 ? traces[1] : "");
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL);
    static char out[1 << 16];
    size_t len = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[len] = '\0';
    int rc = f ? pclose(f) : -1;
    const char *p = out;
    for (int i = 0; i < n; i++) {
        memset(&g[i], 0, sizeof g[i]);
        g[i].fits = (int)field(&p, "\"fits\": ");
        long long line = field(&p, "\"failed_at_line\": ");
        g[i].failed_line = line < 0 ? 0 : (unsigned)line;
        field_str(p, "\"error\": ", g[i].error, sizeof g[i].error);
        g[i].peak_in_use = (uint64_t)field(&p, "\"peak_in_use_bytes\": ");
        g[i].peak_reserved = (uint64_t)field(&p, "\"peak_reserved_bytes\": ");
        long long s = field(&p, "\"smallest_limit_bytes\": ");
        g[i].has_smallest = s > 0;
        g[i].smallest = s > 0 ? (uint64_t)s : 0;
    }
    if (card_grow) {
        *card_grow = (uint64_t)field(&p, "\"growth\": ");
        *card_pre = (uint64_t)field(&p, "\"preallocate\": ");
        const char *q = p ? strstr(p, "\"preallocate_limits_bytes\": [") : NULL;
        for (int i = 0; q && i < n; i++) {
            q = strpbrk(q, "0123456789");
            char *end = NULL;
            pre_caps[i] = q ? strtoull(q, &end, 10) : 0;
            q = end;
        }
    }
    CHECK(p != NULL);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void same(const struct got *fit, const struct got *run, int n)
{
    for (int i = 0; i < n; i++) {
        CHECK(fit[i].fits == run[i].fits);
        CHECK_EQ_U64(fit[i].failed_line, run[i].failed_line);
        CHECK_STR(fit[i].error, run[i].error);
        CHECK_EQ_U64(fit[i].peak_in_use, run[i].peak_in_use);
        CHECK_EQ_U64(fit[i].peak_reserved, run[i].peak_reserved);
    }
}

int main(void)
{
    struct got fit[MAXM], run[MAXM];
    uint64_t grow = 0, pre = 0, caps[MAXM] = {0};
    char split[256];

    /* 1. Both fit on a 4 GiB card sharing it, growth on. */
    CHECK(command("--card 4GiB", 2, fit, &grow, &pre, caps) == 0);
    CHECK(actual(4ull << 30, "..,..", 1, 2, run));
    CHECK(fit[0].fits && fit[1].fits);
    same(fit, run, 2);
    /* Its smallest limit for each holds in a run; a little less does not. */
    for (int i = 0; i < 2; i++) {
        CHECK(fit[i].has_smallest);
        char lim[64];
        snprintf(lim, sizeof lim, "..%llu", (unsigned long long)fit[i].smallest);
        snprintf(split, sizeof split, "%s,%s", i == 0 ? lim : "..", i == 1 ? lim : "..");
        CHECK(actual(4ull << 30, split, 1, 2, run) && run[i].fits);
        snprintf(lim, sizeof lim, "..%llu", (unsigned long long)(fit[i].smallest - 8 * MIB));
        snprintf(split, sizeof split, "%s,%s", i == 0 ? lim : "..", i == 1 ? lim : "..");
        CHECK(actual(4ull << 30, split, 1, 2, run) && !run[i].fits);
    }
    /* Its smallest cards hold the traces side by side; 16 MiB less does not. */
    CHECK(grow > 0 && pre > 0);
    CHECK(actual(grow, "..,..", 1, 2, run) && run[0].fits && run[1].fits);
    CHECK(actual(grow - 16 * MIB, "..,..", 1, 2, run) && !(run[0].fits && run[1].fits));
    /* Preallocation: each device preallocated to the limit the command gave
     * it; 16 MiB less of card and the limits no longer fit its budget. */
    snprintf(split, sizeof split, "%llu,%llu", (unsigned long long)caps[0],
             (unsigned long long)caps[1]);
    CHECK(actual(pre, split, 0, 2, run) && run[0].fits && run[1].fits);
    CHECK(!actual(pre - 16 * MIB, split, 0, 2, run));
    CHECK(pre < grow); /* these two traces: growth's doubling overshoots */

    /* 2. A 2 GiB card (512 MiB of budget): the second model fails on its
     * blocks live before recording, and the first, whose regions follow
     * BFC's schedule (power-of-two multiples of 2 MiB), fails at line 50. */
    CHECK(command("--card 2GiB --no-search", 2, fit, NULL, NULL, NULL) == 1);
    CHECK(actual(2ull << 30, "..,..", 1, 2, run));
    CHECK(!fit[0].fits && fit[0].failed_line == 50);
    CHECK(!fit[1].fits && fit[1].failed_line == 0);
    same(fit, run, 2);

    /* 3. A ceiling too low for the first model: it fails mid-trace, at the
     * same line with the same message. */
    CHECK(command("--card 4GiB --split ..400MiB,.. --no-search", 2, fit, NULL, NULL, NULL) == 1);
    CHECK(actual(4ull << 30, "..400MiB,..", 1, 2, run));
    CHECK(!fit[0].fits && fit[0].failed_line > 0 && fit[1].fits);
    same(fit, run, 2);

    /* 4. Preallocation with floors and a priority. */
    CHECK(command("--card 4GiB --preallocate --split 600MiB@critical,200MiB..1GiB --no-search", 2,
                  fit, NULL, NULL, NULL) == 0);
    CHECK(actual(4ull << 30, "600MiB@critical,200MiB..1GiB", 0, 2, run));
    same(fit, run, 2);

    /* 5. The order of the starts: B's regions (2, 4, 8, 16 MiB) grown first
     * leave 57 MiB of an 87 MiB card for A's 64 MiB, which fits in the round
     * robin and with A first. The command says no, names the order B, A,
     * and reports that run; a run in that order fails as it says. */
    static const int b_first[2] = {1, 0};
    char a_path[64], b_path[64];
    snprintf(a_path, sizeof a_path, "/tmp/test_fit_a.%d.trace", (int)getpid());
    snprintf(b_path, sizeof b_path, "/tmp/test_fit_b.%d.trace", (int)getpid());
    FILE *fa = fopen(a_path, "w"), *fb = fopen(b_path, "w");
    CHECK(fa && fb);
    if (fa && fb) {
        fprintf(fa, "# trace v1 ids=never-reused\na 0 %llu\n", 64 * MIB);
        fprintf(fb, "# trace v1 ids=never-reused\na 0 %llu\na 1 %llu\na 2 %llu\na 3 %llu\n",
                MIB, 3 * MIB, 5 * MIB, 9 * MIB);
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    traces[0] = a_path;
    traces[1] = b_path;
    CHECK(command("--card 87MiB --no-search", 2, fit, NULL, NULL, NULL) == 1);
    CHECK(!fit[0].fits && fit[0].failed_line == 2 && fit[1].fits);
    start_order = NULL;
    CHECK(actual(87 * MIB, "..,..", 1, 2, run) && run[0].fits && run[1].fits);
    start_order = b_first;
    CHECK(actual(87 * MIB, "..,..", 1, 2, run) && !run[0].fits);
    same(fit, run, 2);
    unlink(a_path);
    unlink(b_path);
    vdev_shutdown();
    return check_done();
}
