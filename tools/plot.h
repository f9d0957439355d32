/* plot.h — pictures of a trace written by vdev (VDEV_TRACE_FILE), as SVG
 * that vdev writes itself: memory per device over time, and ops per device. */
#ifndef VDEV_PLOT_H
#define VDEV_PLOT_H

#include <stddef.h>

enum vdev_plot_kind { VDEV_PLOT_MEMORY, VDEV_PLOT_PLACEMENT };

/* Reads the trace at `trace` and writes the picture to `out` ("-": stdout).
 * Returns 0, or 1 with a one-line message in err (naming the file and line
 * for malformed input). */
int vdev_plot_file(const char *trace, const char *out, enum vdev_plot_kind kind, char *err,
                   size_t cap);

#endif
