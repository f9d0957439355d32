/* metrics.h — the Prometheus metrics endpoint (vdev_metrics_serve in vdev.h),
 * as the runtime starts and stops it.
 *
 * The server runs on libmicrohttpd's own thread inside the watched process,
 * with a watchdog thread beside it that cuts any request taking more than
 * 10 s in all; a client address holds at most 16 connections, of 128 in all,
 * and an idle connection is dropped after 5 s (metrics.c says why).
 * A scrape reads relaxed atomic counters (ops, bytes copied, op times) and one
 * allocator statistics snapshot per logical device, so it never stops an op. */
#ifndef VDEV_METRICS_H
#define VDEV_METRICS_H

#include "base/base.h"

/* Marks the runtime up (vdev_metrics_serve starts an endpoint only then),
 * reads VDEV_METRICS_ADDR (HOST:PORT) and, when it is set, starts serving
 * (vdev_init, last step, with the runtime's lock held). VDEV_ERR_CONFIG
 * naming the variable for a malformed value or an address it cannot bind. */
enum vdev_status vdev_metrics_init_env(void);
/* Marks the runtime down and stops any server (vdev_shutdown, before the
 * devices go). */
void vdev_metrics_shutdown(void);
/* Writes what GET /metrics answers now (the runtime running) into f, without
 * an endpoint: the text a scrape gets, for tests and tools. */
void vdev_metrics_write(FILE *f);

#endif
