/* replay.h — loading allocation traces and replaying them against the
 * allocator (`vdev replay`, bench/bench_alloc.c).
 *
 * Trace format (DESIGN.md, "Memory"): text, plain or gzip-compressed, one
 * event a line. "a ID BYTES" allocates BYTES (> 0) under the name ID, "f ID"
 * frees it; IDs are decimal uint64 and may be reused once freed. Lines that
 * start with '#' are comments, anywhere; blank lines are ignored. A first
 * line "# trace v1 key=value key=value ..." carries fields, which are kept as
 * strings (a value runs until the next " key=" whose key is an identifier, so
 * "note=..." may contain spaces).
 *
 * Rules: a free of an ID that is not live (never allocated, or already freed)
 * and an allocation of an ID that is live are errors, as are an unknown op, a
 * missing or extra field, a number that is not a decimal uint64 (digits that
 * do not fit in 64 bits: "does not fit in 64 bits"), a zero-byte allocation,
 * and more than 2^61 bytes (2 EiB, sizes rounded to 256) live at once, the
 * most replay's address space models. Every event line ends with a newline:
 * a last event line without one may have been cut short mid-number (a trace
 * of a killed process: "a 7 10" cut to "a 7 1" reads as a valid event), and
 * nothing in the line tells a cut line from a whole one, so it is an error
 * that says to add the newline if the line is whole; a last comment or blank
 * line without one is fine. A gzip file that ends inside its stream is an
 * error too ("the gzip stream is cut short"), not a shorter trace. Blocks still live at the end are allowed (the shared
 * traces leave them: "blocks live at end left unfreed"); they count toward
 * the peak and stay live until the replay ends. Blocks that were live before
 * recording started ("pre_live_*" fields) are not in the trace and not
 * replayed: their frees were dropped by the recorder, so no event names them.
 *
 * Example:
 *
 *     struct vdev_trace *t;
 *     if (vdev_trace_load("mlp.trace", &t) != VDEV_OK) { puts(vdev_last_error()); return 1; }
 *     struct vdev_replay_options o = {0};   // defaults: 5 runs, 1e6 events a run
 *     struct vdev_replay_result r;
 *     if (vdev_replay_run(t, &o, &r) == VDEV_OK)
 *         printf("%.1f ns/event, capacity ratio %.4f\n", r.ns_per_event, r.capacity_ratio);
 *     vdev_trace_free(t);
 */
#ifndef VDEV_ALLOC_REPLAY_H
#define VDEV_ALLOC_REPLAY_H

#include "alloc/alloc.h"

#include <stddef.h>
#include <stdint.h>

/* One event; `slot` is a dense index standing for the ID (slots are reused
 * once freed, so there are as many as blocks live at once). */
struct vdev_trace_event {
    uint64_t bytes; /* requested bytes of an allocation; 0 for a free */
    uint32_t slot;
    uint32_t line;  /* line in the file, for messages */
};

struct vdev_trace {
    char *path;
    char *header;  /* the first line if it is a comment, without "# " ("" if none) */
    size_t n_fields;
    char **keys, **values; /* the header's key=value fields, in order */
    struct vdev_trace_event *events;
    uint64_t n_events, n_allocs, n_frees;
    uint32_t n_slots;             /* most blocks live at once */
    uint64_t peak_live_bytes;     /* most live bytes at once, each block rounded up to 256 */
    uint64_t peak_live_raw_bytes; /* the same with sizes as requested */
    uint32_t *live_at_end;        /* slots still live after the last event */
    uint32_t n_live_at_end;
    uint64_t live_at_end_bytes;   /* their sizes, rounded up to 256 */
    /* The last line when it is an event without its newline (the writer was
     * stopped mid-line: a crash, a kill), dropped as it may be cut short
     * ("a 7 10" cut to "a 7 1"): its number (0: none) and its first 40
     * characters, for the note the tools print. */
    uint32_t cut_line;
    char cut_text[41];
};

/* Reads a trace, plain or gzip-compressed (zlib detects which), from the
 * file at path, or from standard input when path is "-" (messages then name
 * it "(standard input)", as does the trace's path); a last event
 * line without its newline is dropped (cut_line says so). VDEV_OK: *out
 * is yours, free it with vdev_trace_free(). VDEV_ERR_IO when the file cannot
 * be read, VDEV_ERR_PARSE for a malformed line with the message
 * "<path>:<line>: <what is wrong>", VDEV_ERR_OOM when the host runs out. */
enum vdev_status vdev_trace_load(const char *path, struct vdev_trace **out);
void vdev_trace_free(struct vdev_trace *t); /* NULL is a no-op */
/* The name of an input for messages: path, or "(standard input)" for "-". */
const char *vdev_input_name(const char *path);
/* Opens path for reading through zlib (gzip or plain text alike), "-"
 * meaning standard input (a duplicate of its descriptor, so closing the
 * result leaves the process's own open). *shown is vdev_input_name(path). NULL with errno set when it cannot be opened
 * (errno 0: zlib's own allocation failed). The tools' readers share it. */
struct gzFile_s *vdev_gzopen_input(const char *path, const char **shown);

/* The value of a header field, or NULL. */
const char *vdev_trace_field(const struct vdev_trace *t, const char *key);

/* Zero fields take the defaults. */
struct vdev_replay_options {
    int repeats;           /* timing runs, the median is reported; 0: 5; < 0: no timing */
    uint64_t min_events;   /* events per timing run at least (the trace is replayed back to
                              back); 0: 1,000,000 */
    double precision;      /* relative precision of min_capacity_bytes; 0: 1e-4 */
    int no_pin;            /* nonzero: do not pin the thread to its CPU while timing */
    /* (optional) progress for long work: stage is "capacity" or "timing",
     * done goes from 0 to 1 within a stage. Called from the calling thread. */
    void (*progress)(void *user, const char *stage, double done);
    void *progress_user;
};

struct vdev_replay_result {
    uint64_t events;              /* events in the trace */
    double ns_per_event;          /* median over the runs of (timed ns / events replayed) */
    uint64_t peak_live_bytes;     /* most bytes live at once, each block rounded to 256 */
    uint64_t peak_reserved_bytes; /* VDEV_POLICY_GROW, no limit: most bytes reserved */
    uint64_t min_capacity_bytes;  /* smallest one-region PREALLOCATE capacity that serves the
                                     whole trace without a failed allocation (found by
                                     bisection to `precision`; a capacity that was seen to work) */
    double capacity_ratio;        /* min_capacity_bytes / peak_live_bytes (1 if nothing is
                                     allocated) */
    /* details of the timing */
    uint64_t events_per_run;      /* passes_per_run * events */
    uint64_t passes_per_run;
    uint64_t timing_capacity_bytes; /* the region the timing runs use: 2 x min capacity */
    double ns_per_event_min, ns_per_event_max; /* over the runs */
    int runs;                     /* timing runs done (0: timing skipped) */
    int pinned_cpu;               /* the CPU the timing ran on, -1 if not pinned */
};

/* Replays the trace against the allocator with a region source that hands out
 * addresses without memory (nothing is touched):
 *  - peak_reserved_bytes from one run with VDEV_POLICY_GROW and no limit;
 *  - min_capacity_bytes by bisection over one-region PREALLOCATE runs,
 *    starting from peak_live_bytes (a lower bound);
 *  - ns_per_event: each run replays the pre-parsed events back to back until
 *    at least min_events have run, in one PREALLOCATE region of twice the
 *    minimum capacity, with the thread pinned to the CPU it is on. Only the
 *    loop of vdev_alloc_malloc()/vdev_alloc_free() calls is timed (lock
 *    included); blocks left live at the end of a pass are freed untimed
 *    before the next pass.
 * VDEV_ERR_INVALID_ARG for bad arguments, VDEV_ERR_OOM when the host runs out,
 * VDEV_ERR_INTERNAL if an allocation fails where it must not. */
enum vdev_status vdev_replay_run(const struct vdev_trace *t, const struct vdev_replay_options *opt,
                                 struct vdev_replay_result *out);

#endif /* VDEV_ALLOC_REPLAY_H */
