/* threads.h — how many threads vdev's host work uses: OpenBLAS's threads for
 * matrix products, and the pool that splits large elementwise kernels.
 *
 * The plan is made at the first product or pool job of each start-up (and
 * again when the determinism switch changes), from:
 *   cpus     the CPUs the process may use: its affinity mask, capped by the
 *            cgroup CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us over
 *            cpu.cfs_period_us, rounded up) of its own cgroup and those above;
 *   budget   the threads the user allows matrix products: OPENBLAS_NUM_THREADS,
 *            else OMP_NUM_THREADS (its first number), else cpus;
 *   streams  the host threads that may run products at the same time: one
 *            per simulated GPU stream (each logical GPU has its own), one
 *            per logical CPU when the host is split into several (a mirrored
 *            strategy runs a replica on each from a thread of its own); 1
 *            otherwise.
 * The budget is a ceiling: products never use more threads than cpus.
 * OpenBLAS itself always runs single-threaded (threads.c says why). With
 * one stream, vdev splits each product over min(budget, cpus) threads of
 * its pool, each part an OpenBLAS call of its own
 * (vdev_threads_product_parts). With two or more streams a product is not
 * split, and at most min(budget, cpus) products run at the same time (the
 * others are queued, and run by a thread that holds a slot, after its own
 * product, or handed its slot: see threads.c): the budget is divided among
 * the streams, never multiplied by them. Under the determinism switch a
 * product is cut into blocks fixed by its shape alone, each one
 * single-threaded OpenBLAS call whichever thread runs it, so its bits do not
 * depend on any thread count.
 * The pool splits an elementwise kernel into max(1, pool / streams) parts,
 * where pool is OMP_NUM_THREADS, else cpus.
 *
 * Private to src/ops/. */
#ifndef VDEV_OPS_THREADS_H
#define VDEV_OPS_THREADS_H

#include "vdev.h"

#include <stddef.h>

/* What vdev_thread_info reports (vdev.h), plus what the plan was made for. */
struct vdev_thread_plan {
    struct vdev_thread_info info;
    uint64_t key; /* (runtime generation << 1) | deterministic */
};

/* The current plan (made or remade if needed). Needs a started runtime. */
struct vdev_thread_plan vdev_threads_plan(void);

/* Runs every matrix product done by OpenBLAS: brings OpenBLAS's thread
 * count in line with the plan for `deterministic` (the mode the product was
 * submitted under), waiting until no other product runs before changing it,
 * then runs fn(arg) in a slot when products are limited, on this thread or,
 * when every slot is taken, on a thread that holds one (this one sleeps
 * until it is done). fn must not depend on the thread it runs on. */
void vdev_threads_product_run(int deterministic, void (*fn)(void *), void *arg);

/* Parts an elementwise kernel may be split into (1: run it inline). */
int vdev_threads_kernel_parts(void);
/* The threads one product is split over (the plan's blas_threads); read
 * while a product runs (vdev_threads_product_run's fn), when the plan is
 * the one the product was started under. */
int vdev_threads_product_parts(void);

/* ---- the pieces, for tests ---- */

/* The most products that ran at the same time since the last call. */
int vdev_threads_peak_products(void);
/* Products waiting for a slot now. */
int vdev_threads_queued(void);
/* Of those, the ones whose threads sleep (the others poll: product_start). */
int vdev_threads_sleepers(void);

/* A thread count from an environment value: "4" -> 4, "4,2" (OpenMP's list
 * of nesting levels) -> 4; 0 for NULL, empty, malformed or < 1 (OpenBLAS
 * ignores those too). */
int vdev_threads_parse_count(const char *value);
/* The CPU quota of the cgroup named in proc_cgroup (a /proc/self/cgroup
 * file) under cgroup_root (/sys/fs/cgroup), in whole CPUs rounded up, the
 * smallest along the path to the root; 0 when there is none or it cannot
 * be read. */
int vdev_threads_cgroup_cpus(const char *proc_cgroup, const char *cgroup_root);

#endif
