/* vdev/placement.h — where ops run and what that cost: device scopes
 * (tf.device), the placement policy, placement logging, the counts of ops and
 * bytes copied per device with the audit of ops run away from their
 * variables, the reports, the Prometheus metrics endpoint and the profiler
 * trace's path. Part of the public API: vdev.h includes it, and it may be
 * included alone (it includes the parts it builds on). */
#ifndef VDEV_VDEV_PLACEMENT_H
#define VDEV_VDEV_PLACEMENT_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== placement ===========================================================
 *
 * vdev_device_push("GPU:1") ... vdev_device_pop(): a thread-local stack of
 * device scopes; an op runs on the innermost scope's device. An unscoped op
 * runs on the device of its inputs when they agree; when they disagree, on
 * the device of the variables its inputs derive from (a variable input's
 * first), else on the default device (VDEV_PLACEMENT=tf: always the default device,
 * TensorFlow's rule). Gradients run on the device of their forward op. */

/* Opens a device scope, as tf.device: any accepted name, and a type without
 * an index ("GPU", "/gpu", "/device:GPU", "GPU:*"), which takes the
 * enclosing scope's index, else 0. VDEV_ERR_INVALID_ARG for a malformed name,
 * VDEV_ERR_NOT_FOUND "<name> unknown device" for a device that does not
 * exist (unless soft placement is on), VDEV_ERR_INVALID_ARG past 64 deep.
 * An empty name or a job, replica or task alone ("/job:localhost") keeps the
 * enclosing scope's device; outside any scope it adds no constraint
 * (vdev_device_current() stays NULL). NULL opens a scope of no device
 * whatever encloses it, as tf.device(None): its ops are placed as unscoped
 * ops, vdev_device_current() is NULL in it, a name without an index there
 * takes index 0, and the enclosing scopes are in force again after its pop.
 * A scope that soft placement sent to
 * the default device for a missing one fails its next op once soft
 * placement is off, as TensorFlow resolves a scope per op. */
VDEV_API enum vdev_status vdev_device_push(const char *device);
/* Closes the innermost device scope; VDEV_ERR_INVALID_ARG without one
 * ("vdev_device_pop without a matching push"). */
VDEV_API enum vdev_status vdev_device_pop(void);
/* The innermost device scope's name in TensorFlow's form (context.device_name):
 * "/job:localhost/replica:0/task:0/device:GPU:1", the device the scope named
 * (under soft placement, not where its ops run); NULL outside any scope.
 * Valid until the scope is popped. */
VDEV_API const char *vdev_device_current(void);

enum vdev_placement_policy {
    VDEV_PLACEMENT_COPY = 0, /* an input on another device is copied, and counted (default) */
    VDEV_PLACEMENT_STRICT,   /* that is an error naming the op, the input and both devices */
    VDEV_PLACEMENT_TF,       /* unscoped ops go to the default device, as TensorFlow does */
    VDEV_PLACEMENT_POLICY_COUNT
};
/* Code wins over VDEV_PLACEMENT (copy|strict|tf), read at start-up (and by
 * the getter before it, as vdev_config_get_soft_device_placement: a
 * malformed value reads as VDEV_PLACEMENT_COPY, with start-up's error).
 * Another value is VDEV_ERR_INVALID_ARG ("unknown placement policy 7"). */
VDEV_API enum vdev_status vdev_set_placement_policy(enum vdev_placement_policy p);
VDEV_API enum vdev_placement_policy vdev_get_placement_policy(void);
/* One line per op executed on stderr, in TensorFlow's form:
 * "Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:1".
 * Also VDEV_LOG_DEVICE_PLACEMENT=1. */
VDEV_API void vdev_set_log_device_placement(bool enable);
/* Whether placement logging is on (tf.debugging.get_log_device_placement);
 * before start-up, whether it will be (code's, else the variable's). */
VDEV_API bool vdev_get_log_device_placement(void);

/* Ops run of one type (NULL: all) on one device (NULL: all). */
VDEV_API uint64_t vdev_placement_op_count(const char *op_type, const char *device);
/* Bytes copied from one device to another (NULL: any). */
VDEV_API uint64_t vdev_placement_bytes_copied(const char *from_device, const char *to_device);

/* An audit entry: ops of one type that ran on `ran_on` while the variables
 * they derive from live on `home`. */
struct vdev_audit_entry {
    char op_type[32];
    char ran_on[64];          /* "/device:GPU:0" */
    char home[64];            /* where the variables live */
    uint64_t count;
    uint64_t bytes_copied;    /* bytes copied to bring their inputs there */
};
/* Fills up to cap entries, sets *n to the number of entries. */
VDEV_API enum vdev_status vdev_placement_audit(struct vdev_audit_entry *out, int cap, int *n);
/* Prints the summary (ops per type and device, bytes copied per pair) and
 * the audit. Also at exit with VDEV_PLACEMENT_REPORT=1. */
VDEV_API void vdev_placement_report(FILE *f);
/* Forgets the counts and the audit; the metrics endpoint's counters built on
 * them (vdev_ops_total, vdev_copied_bytes_total) drop to 0 with them, which
 * Prometheus reads as a counter reset. */
VDEV_API void vdev_placement_reset(void);
/* Prints one line per logical device: ops run, bytes in use, peak in use,
 * reserved, limit, and bytes copied in from and out to other devices. */
VDEV_API void vdev_device_report(FILE *f);

/* ---- metrics endpoint ------------------------------------------------------ *
 * Serves the Prometheus text format (0.0.4) on GET /metrics over HTTP, from a
 * thread of its own inside this process: per logical device memory in use,
 * peak, reserved, limit and largest free block (gauges), allocations and
 * OOMs, ops per type, bytes copied per pair (counters), and an op-time
 * histogram. A scrape never stops an op. Also VDEV_METRICS_ADDR=HOST:PORT,
 * read at start-up. One endpoint at a time; vdev_shutdown() stops it. */

/* Starts serving on addr, "127.0.0.1:9400" or "[::1]:9400" (numeric, bound
 * as given; "localhost" is 127.0.0.1; port 0 picks a free port, see
 * vdev_metrics_port). Starts the
 * runtime. VDEV_ERR_INVALID_ARG for a malformed address, an address that
 * cannot be bound, an endpoint already serving, or a vdev_shutdown() begun on
 * another thread meanwhile (the shutdown wins: nothing serves). */
VDEV_API enum vdev_status vdev_metrics_serve(const char *addr);
/* Stops serving (a scrape in flight finishes first); no-op when not serving. */
VDEV_API void vdev_metrics_stop(void);
/* The port being served, 0 when not serving. */
VDEV_API int vdev_metrics_port(void);
/* The profiler trace (VDEV_TRACE_FILE, read at start-up) this process is
 * writing, or wrote last, with its placeholders (%p, %r, %%) expanded,
 * copied with its NUL into out[cap]; "" when it has written none. VDEV_ERR_INVALID_ARG for out
 * NULL or too small (the message says how many bytes it needs). */
VDEV_API enum vdev_status vdev_trace_path(char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_PLACEMENT_H */
