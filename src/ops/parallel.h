/* parallel.h — a small thread pool for host kernels of large elementwise ops.
 *
 * vdev_parallel_for(n, fn, ctx) calls fn(ctx, lo, hi) over [0, n) split into
 * one part per core, the calling thread taking one part. Small ranges, a
 * one-core machine, or a pool already busy (another stream's kernel) run
 * inline on the caller, so it never waits for another kernel's work. */
#ifndef VDEV_PARALLEL_H
#define VDEV_PARALLEL_H

#include <stdint.h>

/* Below this many elements a kernel runs on the calling thread alone. */
#define VDEV_PARALLEL_MIN (1 << 18)

void vdev_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx);

#endif
