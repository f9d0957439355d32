/* parallel.h — a small thread pool for host kernels of large elementwise ops.
 *
 * vdev_parallel_for(n, fn, ctx) calls fn(ctx, lo, hi) over [0, n) split into
 * as many parts as the thread plan allows (threads.h), the calling thread
 * taking one part. Small ranges, a plan of one thread, or a pool already busy
 * (another stream's kernel) run inline on the caller, so it never waits for
 * another kernel's work. Parts start at multiples of 16 elements. */
#ifndef VDEV_PARALLEL_H
#define VDEV_PARALLEL_H

#include <stdint.h>

/* Below this many elements a kernel runs on the calling thread alone. */
#define VDEV_PARALLEL_MIN (1 << 18)

void vdev_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx);
/* The same with parts of at least min_part elements: kernels that do much
 * per element (Adam reads and writes 28 bytes of each) pay for a thread
 * sooner. */
void vdev_parallel_for_min(int64_t n, int64_t min_part,
                           void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx);
/* [0, n) in at most `parts` pieces, each a multiple of `grain` elements but
 * the last (fewer when n is small), one per thread: for work whose every
 * call has a fixed cost, such as a matrix product (each call packs its
 * operands). The caller runs a piece and any a worker has not claimed; a
 * busy pool or parts < 2 runs everything on the caller. */
void vdev_parallel_split(int64_t n, int parts, int64_t grain,
                         void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx);
/* [0, n) in blocks of exactly `block` elements (the last shorter), one call
 * per block whoever runs it, on up to `parts` threads: the calls do not
 * depend on the thread count or on the pool being free (the determinism
 * switch's products). */
void vdev_parallel_blocks(int64_t n, int64_t block, int parts,
                          void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx);

#endif
