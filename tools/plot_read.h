/* plot_read.h — what `vdev plot` takes from a profiler trace (VDEV_TRACE_FILE):
 * memory samples per device, ops counted per device and op type, OOMs, the
 * trace's end time. plot_read.c fills it with a streaming JSON parser;
 * cmd_plot.c draws it. Private to the vdev command. */
#ifndef VDEV_PLOT_READ_H
#define VDEV_PLOT_READ_H

#include "config/config.h"

#include <stddef.h>

/* tids 0..128: the ops track of each logical device, as many as a process has */
#define PLOT_MAX_TRACKS VDEV_MAX_LOGICAL_DEVICES
#define PLOT_MAX_OPS 64    /* op types told apart; the rest count as "other" */
/* a device's further op tracks ("/device:CPU:0 (cpu) (2)": ops other threads timed) */
#define PLOT_MORE_TRACKS 4096

struct plot_sample {
    double t;                /* seconds since the trace's start */
    double in_use, reserved; /* bytes, integers from 0 to 2^63 - 1 */
};

struct plot_series {
    char dev[96]; /* "/device:GPU:0" */
    struct plot_sample *s;
    size_t n, cap;
};

struct plot_oom {
    int tid;         /* the device's ops track, -1 when out of range */
    double t, bytes; /* seconds; bytes asked for */
};

struct plot_trace {
    char track[PLOT_MAX_TRACKS][64]; /* device name of each ops track ("" when unnamed) */
    struct plot_series mem[PLOT_MAX_TRACKS];
    int n_mem;
    struct plot_oom *ooms;
    size_t n_oom, cap_oom;
    char op[PLOT_MAX_OPS][96];
    int n_op;
    long count[PLOT_MAX_TRACKS][PLOT_MAX_OPS + 1]; /* last column: types beyond PLOT_MAX_OPS */
    struct {
        long tid;
        int track; /* the ops track of the same device, whose counts it adds to */
    } more[PLOT_MORE_TRACKS];
    int n_more;
    double t_end;                                  /* seconds: the last event's end */
    long n_events;                                 /* whole events read */
    int cut;       /* 1: the file ends before the closing "]" (its writer died) */
    long cut_line; /* when cut: the file's last line */
};

/* Reads the trace at `path`. Returns it (free with plot_trace_free), or NULL
 * with a one-line message in err that names the file and, for bad input, the
 * line. A trace that ends before its closing "]" (the process that wrote it
 * was killed) is read up to its last whole event, and `cut` says so. */
struct plot_trace *plot_trace_read(const char *path, char *err, size_t cap);
void plot_trace_free(struct plot_trace *T); /* NULL is a no-op */

#endif
