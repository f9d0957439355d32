/* plot.h — pictures of a trace written by vdev (VDEV_TRACE_FILE), as SVG
 * that vdev writes itself: memory per device over time, and ops per device. */
#ifndef VDEV_PLOT_H
#define VDEV_PLOT_H

#include <stddef.h>

enum vdev_plot_kind { VDEV_PLOT_MEMORY, VDEV_PLOT_PLACEMENT };

/* What was read of a trace. */
struct vdev_plot_info {
    long n_events; /* whole events read (metadata included) */
    int cut;       /* 1: the file ends before its closing "]" (its writer was killed) */
    long cut_line; /* when cut: the file's last line */
};

/* Reads the trace at `trace` and writes the picture to `out` ("-": stdout).
 * Returns 0, or 1 with a one-line message in err (naming the file and line
 * for malformed input, the file for a write error; a write error on stdout
 * is left to the caller, which checks stdout as tools/vdev.c does). A trace
 * cut short is drawn up to its last whole event; info (may be NULL) says how
 * much was read and whether it was cut. */
int vdev_plot_trace(const char *trace, const char *out, enum vdev_plot_kind kind,
                    struct vdev_plot_info *info, char *err, size_t cap);
/* vdev_plot_trace without the info. */
int vdev_plot_file(const char *trace, const char *out, enum vdev_plot_kind kind, char *err,
                   size_t cap);

#endif
