/* replicas.h — which logical devices hold the replicas of a strategy, for
 * the metrics endpoint (a `replica` label) and the memory imbalance figure.
 *
 * A strategy (src/dist/, above this layer) registers its devices when it is
 * made and unregisters them when it is freed; the endpoint reads the table
 * under its lock. Registrations remember the runtime generation, so a
 * strategy that outlived vdev_shutdown() is never reported against the
 * devices of a later start-up. */
#ifndef VDEV_RUNTIME_REPLICAS_H
#define VDEV_RUNTIME_REPLICAS_H

#include "runtime/runtime.h"

#include <stdio.h>

/* The most strategies reported at once (more run, unreported). */
#define VDEV_REPLICAS_MAX_GROUPS 64
#define VDEV_REPLICAS_MAX 64

/* Registers a strategy's n replicas (devs in replica order); returns its id
 * (1, 2, ... in order of making, the `strategy` label), or 0 when the table
 * is full (its metrics are then left out). Thread-safe. */
int vdev_replicas_register(struct vdev_ldev *const *devs, int n);
/* Forgets id (0 is a no-op). Thread-safe. */
void vdev_replicas_unregister(int id);
/* Largest peak over the smallest: 1 when all are 0, infinity when only some
 * are. */
double vdev_replicas_imbalance(const uint64_t *peaks, int n);
/* Writes the families vdev_replica_info, vdev_replica_memory_in_use_bytes,
 * vdev_replica_memory_peak_in_use_bytes and vdev_strategy_memory_imbalance
 * (nothing when no strategy is registered). For metrics.c. Every byte count
 * comes from st[device id], the scrape's one snapshot of each of its n_st
 * devices (a device at or past n_st is left out), so in use, peak and
 * imbalance agree with each other and with vdev_memory_* in one scrape: a
 * peak reset between two snapshots could show a peak below the bytes in use. */
void vdev_replicas_write_metrics(FILE *f, const struct vdev_alloc_stats *st, int n_st);

#endif /* VDEV_RUNTIME_REPLICAS_H */
