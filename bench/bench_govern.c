/* bench_govern.c — what governance costs, and how fast a lowered ceiling
 * gives memory back.
 *
 * 1. Bookkeeping on the allocation path. Each trace is replayed against a
 *    growing allocator over a fake region source (addresses, no memory), the
 *    same allocator twice: alone ("plain"), and as a member of a card's pool
 *    with a floor of half the trace's peak beside a second member with a
 *    floor of its own ("governed"). Between passes the live blocks are freed
 *    and every region released (untimed), so each pass grows again and the
 *    timed malloc calls go through the pool's claims as a fresh run would
 *    (the worst case for governance); then again with the regions kept;
 *    a run replays back to back until at least 1,000,000 events have run
 *    on each, their passes alternating (so both meet the same disturbances),
 *    pinned to one CPU. Medians of N runs, and the median of the per-run
 *    differences.
 * 2. Ceiling change to memory released: on a simulated card, a logical
 *    device grows to a given size in its usual doubling regions, frees every
 *    block, and vdev_memory_set_limits() lowers its ceiling to 64 MiB; the
 *    call returns once the regions are back with the card (it waits for the
 *    device's queued work, then releases), so its duration is the time from
 *    the change to the memory released. Median of N.
 *
 * usage: bench_govern [--runs N] [TRACE...]   (default: the traces of data/traces
 *        and ../shared/traces/synthetic.trace.gz when present; run from the
 *        repository root) */
#define _GNU_SOURCE
#include "alloc/govern.h"
#include "alloc/replay.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* ---- a fake region source: increasing addresses, nothing touched ---- */

struct fake {
    uint64_t next;
};

static enum vdev_status fake_reserve(void *ctx, uint64_t bytes, void **base)
{
    struct fake *f = ctx;
    *base = (void *)(uintptr_t)f->next;
    f->next += (bytes + (1ull << 21)) & ~((1ull << 21) - 1);
    return VDEV_OK;
}

static void fake_release(void *ctx, void *base, uint64_t bytes)
{
    (void)ctx;
    (void)base;
    (void)bytes;
}

static void fake_sync(void *ctx) { (void)ctx; }

/* ---- 1. the allocation path ---- */

/* One timed pass of the trace; returns its ns. Untimed after it: the blocks
 * left live are freed and every region released, so the next pass grows
 * (and, governed, claims) again. */
static int regrow = 1; /* release every region after each pass (else keep them) */

static uint64_t timed_pass(const struct vdev_trace *t, vdev_alloc_t *a, uint32_t *h)
{
    uint64_t t0 = vdev_now_ns();
    for (uint64_t i = 0; i < t->n_events; i++) {
        const struct vdev_trace_event *e = &t->events[i];
        if (e->bytes) {
            struct vdev_block b;
            if (vdev_alloc_malloc(a, e->bytes, &b) != VDEV_OK) {
                fprintf(stderr, "bench_govern: %s\n", vdev_last_error());
                exit(1);
            }
            h[e->slot] = b.handle;
        } else {
            vdev_alloc_free(a, h[e->slot]);
        }
    }
    uint64_t ns = vdev_now_ns() - t0;
    for (uint32_t k = 0; k < t->n_live_at_end; k++)
        vdev_alloc_free(a, h[t->live_at_end[k]]);
    if (regrow)
        vdev_alloc_release_cached(a);
    return ns;
}

/* One run: passes alternate between the two allocators (so both see the
 * same disturbances) until each has replayed min_events; ns per event of
 * each. */
static void paired_run(const struct vdev_trace *t, vdev_alloc_t *plain, vdev_alloc_t *gov,
                       uint32_t *h, uint64_t min_events, double *ns_plain, double *ns_gov)
{
    uint64_t done = 0, np = 0, ng = 0;
    for (int k = 0; done < min_events; k++) {
        /* which goes first alternates too */
        if (k % 2) {
            np += timed_pass(t, plain, h);
            ng += timed_pass(t, gov, h);
        } else {
            ng += timed_pass(t, gov, h);
            np += timed_pass(t, plain, h);
        }
        done += t->n_events;
    }
    *ns_plain = (double)np / (double)done;
    *ns_gov = (double)ng / (double)done;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void bench_path(const char *path, int runs)
{
    struct vdev_trace *t;
    if (vdev_trace_load(path, &t) != VDEV_OK) {
        fprintf(stderr, "bench_govern: %s\n", vdev_last_error());
        exit(1);
    }
    uint32_t *h = calloc(t->n_slots + 1, sizeof *h);
    struct fake src = {1ull << 40};
    struct vdev_alloc_config cfg = {
        .name = "/device:GPU:0",
        .limit_bytes = 1ull << 50,
        .policy = VDEV_POLICY_GROW,
        .source = {.reserve = fake_reserve, .release = fake_release, .sync = fake_sync,
                   .ctx = &src},
    };
    vdev_alloc_t *plain, *gov;
    vdev_pool_t *pool;
    int m0, m1;
    if (!h || vdev_alloc_new(&cfg, &plain) != VDEV_OK ||
        vdev_pool_new("/physical_device:GPU:0", 1ull << 50, &pool) != VDEV_OK ||
        vdev_pool_add(pool, "/device:GPU:0", t->peak_live_bytes / 2, 1ull << 50,
                      VDEV_PRIORITY_CRITICAL, &m0) != VDEV_OK ||
        vdev_pool_add(pool, "/device:GPU:1", GIB, 1ull << 50, VDEV_PRIORITY_LOW, &m1) != VDEV_OK) {
        fprintf(stderr, "bench_govern: %s\n", vdev_last_error());
        exit(1);
    }
    cfg.pool = pool;
    cfg.member = m0;
    if (vdev_alloc_new(&cfg, &gov) != VDEV_OK) {
        fprintf(stderr, "bench_govern: %s\n", vdev_last_error());
        exit(1);
    }
    vdev_pool_attach(pool, m0, gov);
    double p[64], g[64], d[64];
    paired_run(t, plain, gov, h, t->n_events, &p[0], &g[0]); /* warm both */
    for (int r = 0; r < runs; r++) {
        paired_run(t, plain, gov, h, 1000000, &p[r], &g[r]);
        d[r] = 100.0 * (g[r] - p[r]) / p[r];
    }
    qsort(p, (size_t)runs, sizeof *p, cmp_double);
    qsort(g, (size_t)runs, sizeof *g, cmp_double);
    qsort(d, (size_t)runs, sizeof *d, cmp_double);
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    printf("| %s | %llu | %.1f (%.1f–%.1f) | %.1f (%.1f–%.1f) "
           "| %+.1f%% (%+.1f%%…%+.1f%%) |\n",
           name, (unsigned long long)t->n_events, p[runs / 2], p[0], p[runs - 1], g[runs / 2],
           g[0], g[runs - 1], d[runs / 2], d[0], d[runs - 1]);
    vdev_alloc_destroy(plain);
    vdev_alloc_destroy(gov);
    vdev_pool_destroy(pool);
    vdev_trace_free(t);
    free(h);
}

/* ---- 2. ceiling change to memory released ---- */

static void bench_release(uint64_t grow_to, int runs)
{
    setenv("VDEV_SIM_GPUS", "1x64GiB", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..", 1);
    if (vdev_init() != VDEV_OK) {
        fprintf(stderr, "bench_govern: %s\n", vdev_last_error());
        exit(1);
    }
    double us[64];
    uint64_t regions = 0, released = 0;
    for (int r = 0; r < runs; r++) {
        if (vdev_memory_set_limits("GPU:0", 0, 0) != VDEV_OK)
            exit(1);
        enum { N = 4096 };
        static void *p[N];
        int n = 0;
        struct vdev_memory_info mi = {0};
        while (n < N && mi.bytes_reserved < grow_to &&
               vdev_mem_alloc("GPU:0", 16 * MIB, &p[n]) == VDEV_OK) {
            n++;
            vdev_memory_info("GPU:0", &mi);
        }
        regions = mi.n_regions;
        for (int k = 0; k < n; k++)
            vdev_mem_free("GPU:0", p[k]);
        uint64_t before = mi.bytes_reserved;
        double t0 = vdev_clock_seconds();
        vdev_memory_set_limits("GPU:0", 0, 64 * MIB);
        us[r] = (vdev_clock_seconds() - t0) * 1e6;
        vdev_memory_info("GPU:0", &mi);
        released = before - mi.bytes_reserved;
    }
    qsort(us, (size_t)runs, sizeof *us, cmp_double);
    char b[32];
    printf("| %s in %llu regions | %.1f (%.1f–%.1f) |\n",
           vdev_format_bytes(released, b, sizeof b), (unsigned long long)regions, us[runs / 2], us[0], us[runs - 1]);
    vdev_shutdown();
}

int main(int argc, char **argv)
{
    int runs = 7;
    const char *paths[16];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = atoi(argv[++i]);
            if (runs < 1 || runs > 64)
                runs = 7;
        } else if (n < 16) {
            paths[n++] = argv[i];
        }
    }
    if (!n) {
        paths[n++] = "data/traces/mlp.trace";
        paths[n++] = "data/traces/transformer.trace";
        if (access("../shared/traces/synthetic.trace.gz", R_OK) == 0)
            paths[n++] = "../shared/traces/synthetic.trace.gz";
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    sched_setaffinity(0, sizeof set, &set);
    printf("Allocation path, ns/event (median of %d runs, min–max), regions released between "
           "passes so every pass grows through the pool:\n\n",
           runs);
    printf("| trace | events | plain | governed (floors set) | difference, per run (min…max) "
           "|\n");
    printf("|---|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++)
        bench_path(paths[i], runs);
    printf("\nThe same with the regions kept between passes (the steady state of a training "
           "loop):\n\n");
    printf("| trace | events | plain | governed (floors set) | difference, per run (min…max) "
           "|\n");
    printf("|---|---:|---:|---:|---:|\n");
    regrow = 0;
    for (int i = 0; i < n; i++)
        bench_path(paths[i], runs);
    printf("\nCeiling lowered to 64 MiB on a simulated card, every block freed: duration of "
           "vdev_memory_set_limits(), µs (median of %d, min–max):\n\n",
           runs);
    printf("| memory released | µs |\n|---|---:|\n");
    bench_release(256 * MIB, runs);
    bench_release(2 * GIB, runs);
    bench_release(32 * GIB, runs);
    return 0;
}
