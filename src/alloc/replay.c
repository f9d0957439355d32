/* replay.c — replaying a loaded trace (trace_load.c loads it; see
 * replay.h). Replay never touches memory: a fake region source hands out
 * increasing addresses. The capacity search runs the trace against one
 * PREALLOCATE region and bisects on its size; the timing loop is the bare
 * sequence of malloc/free calls over the event array, on a thread pinned to
 * the CPU it runs on.
 */
#define _GNU_SOURCE
#include "alloc/replay.h"

#include <math.h>
#include <sched.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* replay */

/* A region source that hands out increasing addresses and no memory: replay
 * only needs addresses to be distinct and aligned, never to be touched. */
struct fake_source {
    uint64_t next; /* next base address, 1 MiB-aligned, starting at 1 TiB */
};

static enum vdev_status fake_reserve(void *ctx, uint64_t bytes, void **base)
{
    struct fake_source *s = ctx;
    uint64_t span = (bytes + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
    if (span < bytes || span > UINT64_MAX - s->next)
        return vdev_error(VDEV_ERR_OOM, "replay: no address space left for %llu bytes",
                          (unsigned long long)bytes);
    *base = (void *)(uintptr_t)s->next;
    s->next += span;
    return VDEV_OK;
}

static void fake_release(void *ctx, void *base, uint64_t bytes)
{
    VDEV_UNUSED(ctx);
    VDEV_UNUSED(base);
    VDEV_UNUSED(bytes);
}

/* VDEV_ERR_OOM for the host running out while replaying t. */
static enum vdev_status host_oom(const struct vdev_trace *t)
{
    return vdev_error(VDEV_ERR_OOM, "replaying %s: host out of memory", t->path);
}

/* A plain allocator (lock, statistics and all) over a fresh fake source. */
static enum vdev_status new_allocator(struct fake_source *src, enum vdev_memory_policy policy,
                                      uint64_t limit, vdev_alloc_t **a)
{
    src->next = 1ull << 40;
    struct vdev_alloc_config cfg = {
        .name = "replay",
        .limit_bytes = limit,
        .policy = policy,
        .source = {.reserve = fake_reserve, .release = fake_release, .ctx = src},
    };
    return vdev_alloc_new(&cfg, a);
}

/* Replays the whole trace once in a new allocator. *fits: no allocation
 * failed (the replay stops at the first failure); the host running out is
 * not a failure to fit but VDEV_ERR_OOM. *peak_reserved, if wanted:
 * the most bytes the allocator held. Blocks left live go with the allocator. */
static enum vdev_status replay_once(const struct vdev_trace *t, enum vdev_memory_policy policy,
                                    uint64_t limit, uint32_t *handles, int *fits,
                                    uint64_t *peak_reserved)
{
    struct fake_source src;
    vdev_alloc_t *a;
    enum vdev_status st = new_allocator(&src, policy, limit, &a);
    if (st != VDEV_OK)
        return st;
    *fits = 1;
    for (uint64_t i = 0; i < t->n_events; i++) {
        const struct vdev_trace_event *e = &t->events[i];
        if (e->bytes) {
            struct vdev_block b;
            if (vdev_alloc_malloc(a, e->bytes, &b) != VDEV_OK) {
                if (vdev_error_is_host()) { /* not the capacity's failure: the replay's */
                    vdev_alloc_destroy(a);
                    return host_oom(t);
                }
                *fits = 0;
                break;
            }
            handles[e->slot] = b.handle;
        } else {
            vdev_alloc_free(a, handles[e->slot]);
        }
    }
    if (peak_reserved) {
        struct vdev_alloc_stats s;
        vdev_alloc_get_stats(a, &s);
        *peak_reserved = s.peak_bytes_reserved;
    }
    vdev_alloc_destroy(a);
    return VDEV_OK;
}

static void progress(const struct vdev_replay_options *o, const char *stage, double done)
{
    if (o->progress)
        o->progress(o->progress_user, stage, done);
}

/* Bisects for the smallest one-region capacity that serves the trace. The
 * peak of live bytes is a lower bound; the upper end grows geometrically from
 * there until a capacity fits. Whether a capacity fits need not be monotonic
 * (placement changes with the region size), so the result is the smallest
 * capacity seen to work, within `precision` of one seen to fail. */
static enum vdev_status min_capacity(const struct vdev_trace *t,
                                     const struct vdev_replay_options *o, uint32_t *handles,
                                     uint64_t *out)
{
    const uint64_t step = VDEV_ALLOC_ALIGN;
    uint64_t lo = t->peak_live_bytes, hi;
    int fits;
    enum vdev_status st;
    progress(o, "capacity", 0.0);
    if ((st = replay_once(t, VDEV_POLICY_PREALLOCATE, lo, handles, &fits, NULL)) != VDEV_OK)
        return st;
    if (fits) {
        *out = lo;
        progress(o, "capacity", 1.0);
        return VDEV_OK;
    }
    /* Invariant: lo fails, hi fits. Widen geometrically until hi fits. */
    uint64_t gap = lo / 64 > step ? (lo / 64) & ~(step - 1) : step;
    for (;;) {
        /* Capacities stay below 2^62, so the timing region (twice the
         * capacity) fits the replay's address space. */
        if (gap >= (1ull << 62) - lo)
            return vdev_error(VDEV_ERR_INTERNAL, "%s: no capacity below 4 EiB serves the trace",
                              t->path);
        hi = lo + gap;
        if ((st = replay_once(t, VDEV_POLICY_PREALLOCATE, hi, handles, &fits, NULL)) != VDEV_OK)
            return st;
        if (fits)
            break;
        lo = hi;
        gap *= 2;
    }
    double prec = o->precision > 0 ? o->precision : 1e-4;
    uint64_t tol = (uint64_t)((double)t->peak_live_bytes * prec);
    if (tol < step)
        tol = step;
    /* Bisection needs about log2((hi - lo) / tol) more runs. */
    double steps = 0, total = log2((double)(hi - lo) / (double)tol);
    while (hi - lo > tol && hi - lo > step) {
        uint64_t mid = (lo + (hi - lo) / 2) & ~(step - 1);
        if (mid <= lo)
            mid = lo + step;
        if ((st = replay_once(t, VDEV_POLICY_PREALLOCATE, mid, handles, &fits, NULL)) != VDEV_OK)
            return st;
        if (fits)
            hi = mid;
        else
            lo = mid;
        steps++;
        progress(o, "capacity", total > steps ? steps / total : 0.99);
    }
    progress(o, "capacity", 1.0);
    *out = hi;
    return VDEV_OK;
}

/* qsort order for the median. */
static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Pins the thread to the CPU it is on, so the timed loop is not migrated
 * (a migration costs cold caches); returns the CPU (or -1) and saves the old
 * mask for the caller to restore. */
static int pin_here(cpu_set_t *old)
{
    if (sched_getaffinity(0, sizeof *old, old) != 0)
        return -1;
    int cpu = sched_getcpu();
    if (cpu < 0)
        return -1;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
}

/* One timing run: `passes` passes of the trace back to back in a fresh
 * allocator; *ns receives the timed nanoseconds. The loop body is all the
 * timed work: read the event, call malloc or free, store the handle. */
static enum vdev_status timing_run(const struct vdev_trace *t, uint64_t cap, uint64_t passes,
                                   uint32_t *handles, uint64_t *ns)
{
    struct fake_source src;
    vdev_alloc_t *a;
    enum vdev_status st = new_allocator(&src, VDEV_POLICY_PREALLOCATE, cap, &a);
    if (st != VDEV_OK)
        return st;
    const struct vdev_trace_event *ev = t->events;
    const uint64_t n = t->n_events;
    /* With nothing live at the end, the whole run is one timed stretch. */
    const uint64_t per_stretch = t->n_live_at_end ? 1 : passes;
    uint64_t total = 0;
    for (uint64_t p = 0; p < passes; p += per_stretch) {
        uint64_t t0 = vdev_now_ns();
        for (uint64_t k = 0; k < per_stretch; k++) {
            for (uint64_t i = 0; i < n; i++) {
                const struct vdev_trace_event *e = &ev[i];
                if (e->bytes) {
                    struct vdev_block b;
                    if (__builtin_expect(vdev_alloc_malloc(a, e->bytes, &b) != VDEV_OK, 0)) {
                        int host = vdev_error_is_host();
                        vdev_alloc_destroy(a);
                        if (host)
                            return host_oom(t);
                        return vdev_error(VDEV_ERR_INTERNAL,
                                          "%s:%u: allocation failed while timing in %llu bytes",
                                          t->path, e->line, (unsigned long long)cap);
                    }
                    handles[e->slot] = b.handle;
                } else {
                    vdev_alloc_free(a, handles[e->slot]);
                }
            }
        }
        total += vdev_now_ns() - t0;
        for (uint32_t k = 0; k < t->n_live_at_end; k++) /* untimed */
            vdev_alloc_free(a, handles[t->live_at_end[k]]);
    }
    vdev_alloc_destroy(a);
    *ns = total;
    return VDEV_OK;
}

/* See replay.h. Order: growth run (peak reserved), capacity search, then the
 * timing runs in twice the minimum capacity, pinned, median taken. */
enum vdev_status vdev_replay_run(const struct vdev_trace *t, const struct vdev_replay_options *opt,
                                 struct vdev_replay_result *out)
{
    if (!t || !out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_replay_run: NULL argument");
    struct vdev_replay_options o = {0};
    if (opt)
        o = *opt;
    memset(out, 0, sizeof *out);
    out->events = t->n_events;
    out->peak_live_bytes = t->peak_live_bytes;
    out->pinned_cpu = -1;
    out->capacity_ratio = 1.0;
    if (t->n_allocs == 0)
        return VDEV_OK;
    uint32_t *handles = vdev_calloc(t->n_slots ? t->n_slots : 1, sizeof *handles);
    if (!handles)
        return host_oom(t);
    enum vdev_status st;
    int fits;
    /* Growth with no limit: how much a growing allocator would reserve (from
     * 2 MiB, doubling as TensorFlow's BFC does). It cannot fail unless the host
     * runs out. */
    st = replay_once(t, VDEV_POLICY_GROW, UINT64_MAX, handles, &fits, &out->peak_reserved_bytes);
    if (st != VDEV_OK)
        goto done;
    if (!fits) {
        st = vdev_error(VDEV_ERR_INTERNAL, "%s: replay failed with no limit", t->path);
        goto done;
    }
    st = min_capacity(t, &o, handles, &out->min_capacity_bytes);
    if (st != VDEV_OK)
        goto done;
    out->capacity_ratio = (double)out->min_capacity_bytes / (double)out->peak_live_bytes;
    if (o.repeats < 0)
        goto done;
    int runs = o.repeats ? o.repeats : 5;
    uint64_t min_events = o.min_events ? o.min_events : 1000000;
    /* Short traces run back to back: enough passes for min_events. */
    uint64_t passes = (min_events + t->n_events - 1) / t->n_events;
    out->passes_per_run = passes;
    out->events_per_run = passes * t->n_events;
    out->timing_capacity_bytes = 2 * out->min_capacity_bytes;
    double *ns = vdev_calloc((size_t)runs, sizeof *ns);
    if (!ns) {
        st = host_oom(t);
        goto done;
    }
    cpu_set_t old;
    int cpu = o.no_pin ? -1 : pin_here(&old);
    out->pinned_cpu = cpu;
    for (int r = 0; r < runs && st == VDEV_OK; r++) {
        progress(&o, "timing", (double)r / runs);
        uint64_t tns = 0;
        st = timing_run(t, out->timing_capacity_bytes, passes, handles, &tns);
        ns[r] = (double)tns / (double)out->events_per_run;
    }
    if (cpu >= 0)
        sched_setaffinity(0, sizeof old, &old);
    if (st == VDEV_OK) {
        progress(&o, "timing", 1.0);
        qsort(ns, (size_t)runs, sizeof *ns, cmp_double);
        out->ns_per_event = runs % 2 ? ns[runs / 2] : (ns[runs / 2 - 1] + ns[runs / 2]) / 2;
        out->ns_per_event_min = ns[0];
        out->ns_per_event_max = ns[runs - 1];
        out->runs = runs;
    }
    free(ns);
done:
    free(handles);
    return st;
}
