/* observe.h — what the runtime records for people watching it: op times per
 * device (a histogram, for the metrics endpoint), and a profiler trace in the
 * Chrome trace event format (VDEV_TRACE_FILE=run.json), which opens in
 * Perfetto and chrome://tracing.
 *
 * Recording costs two clock reads per op, and only while observation is on
 * (vdev_observe_on(): a metrics endpoint is serving or a trace is being
 * written); the dispatcher checks one relaxed atomic otherwise.
 *
 * Trace layout: one process ("vdev"), one track (tid) per logical device
 * named after it; every op is a complete event ("ph":"X") on the track of
 * the device it ran on, timed where it ran (on a simulated GPU's stream
 * thread, or inline on the CPU); a copy between devices is a complete event
 * on the track of its pair of devices ("copies /device:GPU:0 ->
 * /device:GPU:1", tids from 1000 up, shown under the source device's op
 * track), timed on the thread that issued it, and a copy that overlaps the
 * last one on each of its pair's tracks (threads copying at once) goes to
 * the pair's next track ("... (2)"), so no two events on a track overlap;
 * memory in use and reserved per device are counter events ("ph":"C"),
 * sampled at most every 100 us but at every new high and every change of
 * reserved memory, whatever made it (the device's own allocations, release
 * of cached regions, lending to another device of its card, a limit
 * changed), and once at start-up for a device that holds preallocated
 * memory then; an out-of-memory
 * failure is an instant event ("ph":"i"), and so is each run-time change of
 * a device's floor, ceiling or priority ("limits", with a "limits <device>"
 * counter beside it). Timestamps are microseconds since start-up. */
#ifndef VDEV_OBSERVE_H
#define VDEV_OBSERVE_H

#include "runtime/runtime.h"

#include <stdatomic.h>

/* Bucket upper bounds of the op-time histogram, in seconds (+Inf implied). */
#define VDEV_OP_TIME_BUCKETS 12
extern const double vdev_op_time_bounds[VDEV_OP_TIME_BUCKETS];

struct vdev_op_time_hist {
    uint64_t count[VDEV_OP_TIME_BUCKETS + 1]; /* per bucket (not cumulative); last: +Inf */
    uint64_t total;
    double sum_seconds;
};

extern _Atomic int vdev_observe_flag;
static inline int vdev_observe_on(void)
{
    return atomic_load_explicit(&vdev_observe_flag, memory_order_relaxed);
}

/* Turns observation on for a consumer (metrics server, trace); counted, so
 * it stays on while any consumer needs it. */
void vdev_observe_acquire(void);
void vdev_observe_release(void);

/* Reads VDEV_TRACE_FILE, expands its placeholders (%p: the process id,
 * %r: the MPI rank, %%) and opens the trace, locked against other processes
 * (vdev_init): VDEV_ERR_CONFIG for an empty name, a bad placeholder or a
 * name too long; VDEV_ERR_IO when the file cannot be opened or another
 * process is writing it. */
enum vdev_status vdev_observe_init(void);
/* Closes the trace, writing its end (vdev_shutdown, and at exit). */
void vdev_observe_shutdown(void);

/* Monotonic nanoseconds (the trace's clock). */
uint64_t vdev_observe_now(void);

/* An op of type `op_type` (name: a static string) ran on device `dev_id`
 * from t0 to t1 (ns). Thread-safe; called on the thread that ran it. */
void vdev_observe_op(int op_type, const char *name, int dev_id, uint64_t t0, uint64_t t1);
/* A copy of `bytes` from one device to another, from t0 to t1. */
void vdev_observe_copy(int from_id, int to_id, uint64_t bytes, uint64_t t0, uint64_t t1);
/* Memory of a device after an allocation or free (trace counter events).
 * Changes of its reserved memory need no call: its allocator reports them
 * (vdev_alloc_watch, set up by vdev_observe_init). */
void vdev_observe_memory(const struct vdev_ldev *dev);
/* An out-of-memory failure on a device (an instant event in the trace). */
void vdev_observe_oom(const struct vdev_ldev *dev, uint64_t bytes);
/* A device's floor, ceiling or priority changed at run time (`what`:
 * "limits" or "priority"): an instant event "limits" on its track with the
 * new values, and a counter "limits <device>" (floor, ceiling) that draws
 * them over time. */
void vdev_observe_limits(const struct vdev_ldev *dev, uint64_t floor, uint64_t ceiling,
                         const char *priority, const char *what);

/* A snapshot of a device's op-time histogram. */
void vdev_observe_op_times(int dev_id, struct vdev_op_time_hist *out);

#endif
