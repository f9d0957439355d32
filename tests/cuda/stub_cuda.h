/* stub_cuda.h — the control interface of the stand-in CUDA driver
 * (stub_cuda.c, built as tests/cuda/stub/libcuda.so.1).
 *
 * The stand-in exports the driver functions the CUDA plugin resolves, with
 * device memory backed by host memory, and checks the rules a real driver
 * enforces or leaves undefined: the order and granularity of the virtual
 * memory calls (reserve, create, map, set access, unmap, release, free),
 * contexts, and the ordering of work between streams. Work runs at once, in
 * submission order, but each stream carries a vector clock (joined by event
 * waits, stream and event synchronisation), and every read and write of
 * device memory is checked against earlier accesses from other streams: two
 * accesses to the same bytes, one of them a write, that no chain of events
 * orders, are a race, as they would be on a GPU whose streams run side by
 * side. Each broken rule is a "violation": counted, kept (the first few), and
 * printed to stderr as it happens.
 *
 * A test dlopens the stand-in by its full path before vdev loads the plugin;
 * the plugin's dlopen("libcuda.so.1") then finds it loaded (the dynamic
 * loader matches the soname), and the test reaches these functions with
 * dlsym (struct vdev_stub_api below). */
#ifndef VDEV_STUB_CUDA_H
#define VDEV_STUB_CUDA_H

#include <stddef.h>
#include <stdint.h>

#define VDEV_STUB_MAX_DEVICES 8

struct vdev_stub_config {
    int n_devices;        /* 0..VDEV_STUB_MAX_DEVICES */
    uint64_t total_bytes; /* memory of each device */
    uint64_t granularity; /* of VMM allocations; 0: 2 MiB */
    int driver_version;   /* cuDriverGetVersion, e.g. 13000; 0: 13000 */
    int init_result;      /* what cuInit returns (a CUresult; 0: success) */
    int no_vmm;           /* devices report no virtual memory management */
    int no_peer;          /* devices cannot access each other's memory */
    uint64_t context_bytes; /* device memory a primary context takes while retained */
    int cc;                 /* compute capability, major * 10 + minor; 0: 90 */
};

/* Live objects, for leak checks; bytes_used is physical memory of device
 * `dev` (created handles not yet freed, and cuMemAlloc blocks). */
struct vdev_stub_stats {
    int reservations, handles, mappings, blocks, host_allocs, streams, events;
    uint64_t bytes_used;
    uint64_t violations;
};

/* Resets everything to a new configuration (frees what the last one left). */
typedef void (*vdev_stub_setup_fn)(const struct vdev_stub_config *c);
/* The nth (0: next) call of the driver function `fn` (its name without the
 * _v2 suffix) returns `result` instead of doing anything; once. */
typedef void (*vdev_stub_fail_fn)(const char *fn, int nth, int result);
typedef void (*vdev_stub_stats_fn)(int dev, struct vdev_stub_stats *out);
/* Calls of `fn` since the last setup. */
typedef uint64_t (*vdev_stub_calls_fn)(const char *fn);
/* The i-th kept violation, or NULL. */
typedef const char *(*vdev_stub_violation_fn)(int i);
/* The stream operations since the last mark (or setup), one a line:
 *   "S1 record E4", "S2 wait E4", "S2 copy-peer 4096", "S1 write 4096"...
 * written into buf (cap bytes); returns buf. */
typedef const char *(*vdev_stub_trace_fn)(char *buf, size_t cap);
typedef void (*vdev_stub_trace_mark_fn)(void);
/* The id (S<id> in the trace) of the last stream created on device dev. */
typedef int (*vdev_stub_stream_id_fn)(int dev);
/* The priority stream S<id> was created with (cuStreamCreateWithPriority;
 * 0 for cuStreamCreate), or -100 when there is no such stream. */
typedef int (*vdev_stub_stream_priority_fn)(int id);

struct vdev_stub_api {
    vdev_stub_setup_fn setup;
    vdev_stub_fail_fn fail;
    vdev_stub_stats_fn stats;
    vdev_stub_calls_fn calls;
    vdev_stub_violation_fn violation;
    vdev_stub_trace_fn trace;
    vdev_stub_trace_mark_fn trace_mark;
    vdev_stub_stream_id_fn stream_id;
    vdev_stub_stream_priority_fn stream_priority;
};

/* Stream priorities the stand-in reports (cuCtxGetStreamPriorityRange), as
 * an H100's: least 0, greatest -5. */
#define VDEV_STUB_PRIO_LEAST 0
#define VDEV_STUB_PRIO_GREATEST (-5)

/* ---- for a stand-in library that works on the stand-in's streams ----
 * (stub_nccl.c dlopens libcuda.so.1, which is this library, and looks these
 * up by name.) */

/* Work of a library call on stream hs (any context may be current): reads
 * (write 0) or writes (write 1) the n bytes of device memory at p, to or from
 * host, with the rules and race checks of every stream's work, as the
 * device of hs; `op` names it in violations and in the trace. */
typedef int (*vdev_stub_lib_access_fn)(void *hs, unsigned long long p, size_t n, int write,
                                       void *host, const char *op);
/* The n streams take each other's clocks: a collective finishes on each
 * only once every one of them has taken part. */
typedef void (*vdev_stub_lib_join_fn)(void *const *hs, int n);
/* Device memory a library takes (bytes > 0) or gives back (bytes < 0) on
 * device dev: 0, or CUDA_ERROR_OUT_OF_MEMORY past the capacity. */
typedef int (*vdev_stub_lib_take_fn)(int dev, long long bytes);
/* The device of stream hs, or -1 when hs is no stream. */
typedef int (*vdev_stub_lib_stream_dev_fn)(void *hs);
/* The device of the calling thread's current context, or -1 when none. */
typedef int (*vdev_stub_lib_current_dev_fn)(void);
/* Records a violation found by the library. */
typedef void (*vdev_stub_lib_violation_fn)(const char *msg);

#endif /* VDEV_STUB_CUDA_H */
