/* cmd_replay.c — `vdev replay TRACE`: replays an allocation trace (plain or
 * gzip) against the allocator and reports what it costs and how tightly it
 * packs, measured exactly as bench/bench_alloc measures (src/alloc/replay.h):
 * ns per event pinned to one CPU (median of the runs, short traces replayed
 * back to back up to 1,000,000 events), peak live bytes, peak reserved bytes
 * in growth mode, and the smallest one-region capacity that serves the whole
 * trace (bisection to 0.01% of the peak, fine enough to tell 1.003 from
 * 1.006) with its ratio to the peak live bytes. A last event line without
 * its newline (a writer stopped mid-line) is dropped with a note; a trace
 * that cannot be read whole otherwise (a gzip stream cut short, a NUL byte,
 * a size beyond 64 bits) is an error naming the file and line; one without a
 * single allocation (an empty file) is an error naming the file. Blocks the
 * header says were live before the trace (pre_live_blocks, pre_live_bytes:
 * a model's weights) are not in the measures above; the smallest capacity
 * with them allocated first, as `vdev fit` allocates them, is given too. */
#include "cli.h"

#include "alloc/replay.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void progress(void *user, const char *stage, double done)
{
    const char *path = user;
    fprintf(stderr, "\rvdev replay: %s: %s %3.0f%%", path, stage, done * 100.0);
    if (done >= 1.0)
        fputc('\n', stderr);
    fflush(stderr);
}

void vdev_cli_trace_cut_note(const char *tool, const struct vdev_trace *t)
{
    if (t->cut_line)
        fprintf(stderr,
                "%s: note: %s:%u: the last line '%s' is cut short (no newline): dropped; "
                "%llu event%s read\n",
                tool, t->path, t->cut_line, t->cut_text, (unsigned long long)t->n_events,
                t->n_events == 1 ? "" : "s");
}

/* A header field's value as a whole number: digits alone, at most max. */
static enum vdev_status pre_live_number(const struct vdev_trace *t, const char *key,
                                        const char *text, uint64_t max, const char *what,
                                        uint64_t *out)
{
    uint64_t v = 0;
    int ok = text[0] != '\0';
    for (const char *c = text; ok && *c; c++) {
        ok = *c >= '0' && *c <= '9' && v <= (max - (uint64_t)(*c - '0')) / 10;
        if (ok)
            v = v * 10 + (uint64_t)(*c - '0');
    }
    if (!ok)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s:1: %s=\"%s\" is not %s", t->path, key, text,
                          what);
    *out = v;
    return VDEV_OK;
}

enum vdev_status vdev_cli_trace_pre_live(const struct vdev_trace *t, uint32_t *n_blocks,
                                         uint64_t *each_bytes)
{
    const char *nb = vdev_trace_field(t, "pre_live_blocks");
    const char *bb = vdev_trace_field(t, "pre_live_bytes");
    *n_blocks = 0;
    *each_bytes = 0;
    if (!nb && !bb)
        return VDEV_OK;
    if (!nb || !bb)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s:1: %s is given without %s (the header gives both, or neither)",
                          t->path, nb ? "pre_live_blocks" : "pre_live_bytes",
                          nb ? "pre_live_bytes" : "pre_live_blocks");
    uint64_t n = 0, b = 0;
    enum vdev_status st;
    if ((st = pre_live_number(t, "pre_live_blocks", nb, VDEV_CLI_MAX_PRE_LIVE_BLOCKS,
                              "a whole number of blocks from 0 to 1000000", &n)) != VDEV_OK ||
        (st = pre_live_number(t, "pre_live_bytes", bb, UINT64_MAX >> 3,
                              "a whole number of bytes (at most 2^61)", &b)) != VDEV_OK)
        return st;
    if ((n == 0) != (b == 0))
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s:1: pre_live_blocks=%s with pre_live_bytes=%s (both are 0, or "
                          "neither)",
                          t->path, nb, bb);
    *n_blocks = (uint32_t)n;
    *each_bytes = n ? (b + n - 1) / n : 0;
    return VDEV_OK;
}

enum vdev_status vdev_cli_min_capacity_with_pre_live(const struct vdev_trace *t, uint64_t *out)
{
    uint32_t n;
    uint64_t each;
    enum vdev_status pst = vdev_cli_trace_pre_live(t, &n, &each);
    if (pst != VDEV_OK)
        return pst;
    struct vdev_replay_options o;
    memset(&o, 0, sizeof o);
    o.repeats = -1; /* the capacity only */
    struct vdev_replay_result r;
    if (n == 0) { /* no pre-live blocks: t's own */
        enum vdev_status st = vdev_replay_run(t, &o, &r);
        if (st == VDEV_OK)
            *out = r.min_capacity_bytes;
        return st;
    }
    /* t's events after n allocations of their own slots, never freed */
    struct vdev_trace w = *t;
    w.n_events = t->n_events + n;
    w.n_allocs = t->n_allocs + n;
    w.n_slots = t->n_slots + n;
    w.peak_live_bytes = t->peak_live_bytes + (uint64_t)n * ((each + 255) & ~(uint64_t)255);
    w.events = malloc((w.n_events ? w.n_events : 1) * sizeof *w.events);
    if (!w.events)
        return vdev_error(VDEV_ERR_OOM, "replaying %s: host out of memory", t->path);
    for (uint32_t i = 0; i < n; i++)
        w.events[i] = (struct vdev_trace_event){.bytes = each, .slot = t->n_slots + i};
    if (t->n_events)
        memcpy(w.events + n, t->events, t->n_events * sizeof *w.events);
    enum vdev_status st = vdev_replay_run(&w, &o, &r);
    free(w.events);
    if (st == VDEV_OK)
        *out = r.min_capacity_bytes;
    return st;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: vdev replay [--json] [--repeats N] [--quiet] TRACE\n\n"
               "Replays an allocation trace (text, plain or gzip: 'a ID BYTES' allocates,\n"
               "'f ID' frees, '#' starts a comment; every event line ends with a newline:\n"
               "a last line without one, as a killed process leaves it, is dropped with a\n"
               "note; TRACE '-' reads standard input) against vdev's allocator and prints:\n"
               "  events               events in the trace\n"
               "  ns per event         median of N timed runs (default 5), pinned to one CPU,\n"
               "                       a short trace replayed back to back to 1,000,000 events\n"
               "  peak live bytes      most bytes live at once (sizes rounded to 256)\n"
               "  peak reserved bytes  most bytes reserved from the device in growth mode\n"
               "  min capacity bytes   smallest single preallocated region that serves the\n"
               "                       whole trace without one failed allocation (to 0.01%%)\n"
               "  capacity ratio       min capacity / peak live\n"
               "and, when the trace's header says how many bytes were live before it\n"
               "(pre_live_blocks, pre_live_bytes: a model's weights; both or neither, at most\n"
               "1000000 blocks, else an error naming the line), those bytes and\n"
               "  with pre-live bytes  the min capacity with those blocks allocated first,\n"
               "                       as `vdev fit` allocates them\n\n"
               "  --json        one JSON object with the keys events, ns_per_event,\n"
               "                peak_live_bytes, peak_reserved_bytes, min_capacity_bytes,\n"
               "                capacity_ratio, runs, events_per_run, pinned_cpu,\n"
               "                pre_live_bytes, min_capacity_with_pre_live_bytes (0 and\n"
               "                min_capacity_bytes without pre-live bytes)\n"
               "  --repeats N   timed runs (median reported), 1..101\n"
               "  --quiet       no progress on stderr\n");
}

int vdev_cmd_replay(int argc, char **argv)
{
    int json = 0, quiet = 0, repeats = 5;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--repeats")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vdev replay: --repeats needs a number from 1 to 101\n");
                return 2;
            }
            /* digits alone: strtol would skip leading blanks and a sign */
            char *end = NULL;
            long n = strtol(argv[i + 1], &end, 10);
            if (!isdigit((unsigned char)argv[i + 1][0]) || *end || n < 1 || n > 101) {
                fprintf(stderr, "vdev replay: --repeats takes a whole number from 1 to 101, not "
                                "'%s'\n",
                        argv[i + 1]);
                return 2;
            }
            repeats = (int)n;
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vdev replay: unknown option '%s' (see 'vdev replay --help')\n", a);
            return 2;
        } else if (path) {
            fprintf(stderr, "vdev replay: one trace at a time ('%s' and '%s')\n", path, a);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "vdev replay: no trace given (see 'vdev replay --help')\n");
        return 2;
    }
    struct vdev_trace *t;
    if (vdev_trace_load(path, &t) != VDEV_OK) {
        fprintf(stderr, "vdev replay: %s\n", vdev_last_error());
        return 1;
    }
    vdev_cli_trace_cut_note("vdev replay", t);
    if (t->n_allocs == 0) { /* an empty file, or comments only (as `vdev plot` refuses it) */
        fprintf(stderr, "vdev replay: %s: no allocation events, nothing to replay\n", t->path);
        vdev_trace_free(t);
        return 1;
    }
    struct vdev_replay_options o;
    memset(&o, 0, sizeof o);
    o.repeats = repeats;
    if (!quiet && !json && isatty(2)) {
        o.progress = progress;
        o.progress_user = (void *)(uintptr_t)t->path;
    }
    struct vdev_replay_result r;
    uint32_t n_pre;
    uint64_t pre_each, pre_bytes = 0, with_pre;
    /* a malformed header is an error before any replay */
    enum vdev_status st = vdev_cli_trace_pre_live(t, &n_pre, &pre_each);
    if (st == VDEV_OK)
        st = vdev_replay_run(t, &o, &r);
    with_pre = st == VDEV_OK ? r.min_capacity_bytes : 0;
    if (st == VDEV_OK && n_pre) {
        pre_bytes = strtoull(vdev_trace_field(t, "pre_live_bytes"), NULL, 10);
        st = vdev_cli_min_capacity_with_pre_live(t, &with_pre);
    }
    vdev_trace_free(t);
    if (st != VDEV_OK) {
        fprintf(stderr, "vdev replay: %s\n", vdev_last_error());
        return 1;
    }
    if (json) {
        printf("{\"events\": %llu, \"ns_per_event\": %.3f, \"peak_live_bytes\": %llu, "
               "\"peak_reserved_bytes\": %llu, \"min_capacity_bytes\": %llu, "
               "\"capacity_ratio\": %.5f, \"runs\": %d, \"events_per_run\": %llu, "
               "\"pinned_cpu\": %d, \"pre_live_bytes\": %llu, "
               "\"min_capacity_with_pre_live_bytes\": %llu}\n",
               (unsigned long long)r.events, r.ns_per_event,
               (unsigned long long)r.peak_live_bytes, (unsigned long long)r.peak_reserved_bytes,
               (unsigned long long)r.min_capacity_bytes, r.capacity_ratio, r.runs,
               (unsigned long long)r.events_per_run, r.pinned_cpu,
               (unsigned long long)pre_bytes, (unsigned long long)with_pre);
        return 0;
    }
    char b1[32], b2[32], b3[32];
    printf("trace                %s\n", vdev_input_name(path));
    printf("events               %llu\n", (unsigned long long)r.events);
    printf("ns per event         %.1f (%s%d run%s of %llu events, %s)\n", r.ns_per_event,
           r.runs == 1 ? "" : "median of ", r.runs, r.runs == 1 ? "" : "s",
           (unsigned long long)r.events_per_run,
           r.pinned_cpu >= 0 ? "pinned" : "not pinned");
    printf("peak live bytes      %llu (%s)\n", (unsigned long long)r.peak_live_bytes,
           vdev_format_bytes(r.peak_live_bytes, b1, sizeof b1));
    printf("peak reserved bytes  %llu (%s, growth mode)\n",
           (unsigned long long)r.peak_reserved_bytes,
           vdev_format_bytes(r.peak_reserved_bytes, b2, sizeof b2));
    printf("min capacity bytes   %llu (%s)\n", (unsigned long long)r.min_capacity_bytes,
           vdev_format_bytes(r.min_capacity_bytes, b3, sizeof b3));
    printf("capacity ratio       %.4f\n", r.capacity_ratio);
    if (n_pre) {
        printf("pre-live bytes       %llu (%s in %u blocks live before the trace, not in it)\n",
               (unsigned long long)pre_bytes, vdev_format_bytes(pre_bytes, b1, sizeof b1),
               n_pre);
        printf("with pre-live bytes  %llu (%s: min capacity with those blocks allocated "
               "first)\n",
               (unsigned long long)with_pre, vdev_format_bytes(with_pre, b2, sizeof b2));
    }
    return 0;
}
