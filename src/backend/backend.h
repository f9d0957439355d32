/* backend.h — the interface every kind of physical device implements.
 *
 * A backend is a table of function pointers plus a context (as ggml's backend
 * interface): it enumerates its physical devices, reserves and releases
 * regions of device memory, copies between host and device and between
 * devices, runs work on a device's stream (its in-order queue), records and
 * waits on events, and optionally runs ops from its own kernel table. Nothing
 * above src/backend/ knows which backend it talks to: layers above go through
 * the vdev_backend_* wrappers in backend.c.
 *
 * Backends: "cpu" (host memory, work runs on the calling thread), "sim"
 * (simulated GPUs from VDEV_SIM_GPUS, each stream with its own worker
 * thread), and "cuda" (a plugin loaded with dlopen; see src/backend/cuda/).
 *
 * Devices and streams. Entries take a device index `dev`: 0..n_devices-1 are
 * the physical devices, each with its own stream. A backend with stream_open
 * hands out more streams, each with an index of its own (n_devices and up)
 * that every entry accepts in place of a device index: entries about memory
 * (reserve, release, extend, mem_info) act on the stream's physical device,
 * entries about work (copies, fills, host functions, kernels, events,
 * synchronize) on the stream. The runtime gives each logical device a stream
 * of its own this way, so logical devices of one card run side by side.
 */
#ifndef VDEV_BACKEND_H
#define VDEV_BACKEND_H

#include "base/base.h"

#include <stdint.h>

/* 3: the optional fill entry (the table's layout changed).
 * 4: streams per logical device (stream_open, stream_close), the device
 *    memory a backend holds itself (held_bytes), collectives through the
 *    backend's own library (coll_*).
 * 5: kernel arguments carry j[4] (StridedSlice's strides), host arguments
 *    up to 576 bytes. */
#define VDEV_BACKEND_API_VERSION 5
/* Most bytes of argument a host function may be given (submit_host). */
#define VDEV_HOST_ARG_MAX 576

struct vdev_backend_device_info {
    char model[96];          /* "Simulated GPU", "NVIDIA H200" */
    uint64_t total_bytes;
    int cc_major, cc_minor;  /* compute capability; sim reports 8.0 */
};

/* A unit of host work on a stream: fn(arg) runs on the stream after all work
 * submitted before it. `arg` points to `arg_bytes` bytes that the backend
 * copies at submission, so the caller's copy may die at once. */
typedef void (*vdev_host_fn)(void *arg);

/* Kernel arguments for ops (filled by src/ops/, read by kernels). Device
 * pointers are addresses in the device's memory. */
#define VDEV_KERNEL_MAX_IN 4
#define VDEV_KERNEL_MAX_OUT 4
struct vdev_kernel_args {
    int op;                                   /* enum vdev_op of src/ops/ */
    int n_in, n_out;
    const void *in[VDEV_KERNEL_MAX_IN];
    void *out[VDEV_KERNEL_MAX_OUT];
    int in_ndim[VDEV_KERNEL_MAX_IN];
    int64_t in_shape[VDEV_KERNEL_MAX_IN][VDEV_MAX_DIMS];
    int in_dtype[VDEV_KERNEL_MAX_IN];
    int out_ndim[VDEV_KERNEL_MAX_OUT];
    int64_t out_shape[VDEV_KERNEL_MAX_OUT][VDEV_MAX_DIMS];
    int out_dtype[VDEV_KERNEL_MAX_OUT];
    double f[4];                              /* op parameters: scalars, eps, ... */
    int64_t i[4];                             /* op parameters: axis, transpose flags, ... */
    int64_t j[4];                             /* more: StridedSlice's strides */
};

/* One rank's part of a collective through the backend's own library
 * (coll_run). Buffers are device memory of the rank's stream's device, 4-byte
 * elements; every rank of a call passes the same kind, mean, root, n_bufs and
 * counts (the caller has checked). */
enum vdev_backend_coll_kind {
    VDEV_BACKEND_COLL_ALL_REDUCE = 0, /* f32, in place; a sum, or the mean */
    VDEV_BACKEND_COLL_BROADCAST,      /* in place: root's bytes everywhere */
    VDEV_BACKEND_COLL_ALL_GATHER      /* data[0] (count[0]) into data[1] (n_ranks x count[0]) */
};
struct vdev_backend_coll {
    enum vdev_backend_coll_kind kind;
    int mean;                  /* all-reduce: divide by the number of ranks */
    int root;                  /* broadcast */
    int n_bufs;                /* all-gather: 2 (in, out) */
    void *const *data;         /* n_bufs device addresses (NULL where the count is 0) */
    const uint64_t *count;     /* n_bufs element counts */
};

struct vdev_backend_ops {
    int api_version;           /* VDEV_BACKEND_API_VERSION */
    const char *name;          /* "cpu", "sim", "cuda" */
    int is_gpu;                /* devices are GPUs (1) or the host CPU (0) */
    int host_addressable;      /* device memory can be read by host code (cpu, sim) */

    /* Devices. */
    int (*n_devices)(void *ctx);
    enum vdev_status (*device_info)(void *ctx, int dev, struct vdev_backend_device_info *out);
    /* Free and total memory of the device now, as cuMemGetInfo reports it. */
    enum vdev_status (*mem_info)(void *ctx, int dev, uint64_t *free_bytes, uint64_t *total_bytes);

    /* Memory regions. reserve fails with VDEV_ERR_OOM past the capacity. */
    enum vdev_status (*reserve)(void *ctx, int dev, uint64_t bytes, void **base);
    void (*release)(void *ctx, int dev, void *base, uint64_t bytes);
    /* (optional) grow a region in place; default: not supported. */
    enum vdev_status (*extend)(void *ctx, int dev, void *base, uint64_t old_bytes,
                               uint64_t new_bytes);

    /* Copies, ordered on the stream of `dev` (for d2d: the destination's stream,
     * after an event from the source stream). h2d and d2h return when the copy
     * is complete (the host buffer may be reused at once). */
    enum vdev_status (*copy_h2d)(void *ctx, int dev, void *dst, const void *src, uint64_t bytes);
    enum vdev_status (*copy_d2h)(void *ctx, int dev, void *dst, const void *src, uint64_t bytes);
    enum vdev_status (*copy_d2d)(void *ctx, int dst_dev, void *dst, int src_dev, const void *src,
                                 uint64_t bytes);
    /* (optional) Writes n_words copies of the 32-bit word `value` from dst
     * (4-byte aligned) on the stream of `dev`, after the work queued before
     * it; may return before it is done. default (NULL): vdev_backend_fill
     * writes the words from the host (see there). */
    enum vdev_status (*fill)(void *ctx, int dev, void *dst, uint32_t value, uint64_t n_words);

    /* Streams. submit_host: run fn(arg copy) on the device's stream (cpu: at
     * once, inline). synchronize: wait until the stream is empty. */
    enum vdev_status (*submit_host)(void *ctx, int dev, vdev_host_fn fn, const void *arg,
                                    size_t arg_bytes);
    enum vdev_status (*synchronize)(void *ctx, int dev);

    /* Events: record a point on a stream; query/wait; make a stream wait. */
    enum vdev_status (*event_record)(void *ctx, int dev, void **event);
    int (*event_done)(void *ctx, void *event);
    void (*event_wait)(void *ctx, void *event);
    enum vdev_status (*stream_wait_event)(void *ctx, int dev, void *event);
    void (*event_drop)(void *ctx, void *event);

    /* (optional) Runs an op from the backend's own kernel table on the
     * device's stream. VDEV_ERR_UNSUPPORTED for an op it has no kernel for.
     * default (NULL): ops run their host reference kernel through
     * submit_host, which needs host_addressable. */
    enum vdev_status (*run_kernel)(void *ctx, int dev, const struct vdev_kernel_args *args);

    /* Releases the backend and its context. */
    void (*destroy)(void *ctx);

    /* ---- (optional, API 4) ---- */

    /* Streams beyond each device's own (see the top of this file).
     * stream_open gives a stream on physical device `dev` with `priority` (an
     * enum vdev_priority, LOW..CRITICAL; what a backend makes of it is its
     * own: sim.c, cuda_stream.c) in *q; *held_bytes gets the device memory
     * the stream took for itself (scratch, library workspaces), which the
     * card's budget must leave out. The device's own stream (index dev) is
     * handed out once for a normal priority, while no other open holds it.
     * stream_close waits for the stream, then closes it (the device's own
     * stream stays, free for the next open). default (NULL): every logical
     * device of a card works on the card's own stream. */
    enum vdev_status (*stream_open)(void *ctx, int dev, int priority, int *q,
                                    uint64_t *held_bytes);
    void (*stream_close)(void *ctx, int q);
    /* Device memory of `dev` the backend holds outside the regions it handed
     * out: its streams' scratch buffers and workspaces, a collective
     * library's buffers. default (NULL): none. */
    uint64_t (*held_bytes)(void *ctx, int dev);

    /* Collectives through the backend's own library across distinct
     * physical devices (CUDA: NCCL), for src/coll/nccl.c.
     * coll_library: 1 when the library can serve, 0 when not; buf (cap
     * bytes) gets one line either way ("NCCL 2.21.5 (libnccl.so.2)", or why
     * not). Loads the library on first use; thread-safe.
     * coll_open: a communicator of n ranks, rank i working on stream qs[i];
     * held[i] gets the device memory the library took on rank i's device.
     * VDEV_ERR_UNSUPPORTED (message set) when it cannot serve them: no
     * library, two ranks on one physical device, a device that already has
     * a communicator of the library.
     * coll_run: queues rank's part of a call on its stream and returns; every
     * rank makes its part of each call, each from its own thread, in the same
     * order. On failure the other ranks' parts may never finish: coll_abort.
     * coll_abort: ends every rank's queued work of the communicator for good
     * (its streams can then be synchronized); any thread.
     * coll_close: frees the communicator (no call in flight). */
    int (*coll_library)(void *ctx, char *buf, size_t cap);
    enum vdev_status (*coll_open)(void *ctx, const int *qs, int n, void **comm, uint64_t *held);
    enum vdev_status (*coll_run)(void *ctx, void *comm, int rank,
                                 const struct vdev_backend_coll *call);
    void (*coll_abort)(void *ctx, void *comm);
    void (*coll_close)(void *ctx, void *comm);

    /* Optional (NULL: the runtime uses copy_d2d). A d2d copy like copy_d2d,
     * on the destination's stream after the source stream's work up to
     * position `after` (a stream_position of the source's stream; UINT64_MAX:
     * all of it so far; a backend without positions waits for all of it),
     * except that the source's stream is not made to wait for the copy: the
     * caller orders every later write to the source itself (the runtime
     * makes a writer's stream wait for the reader first, and frees the
     * source after the reader's stream; see tensor.c, copy_contents). */
    enum vdev_status (*copy_d2d_lazy)(void *ctx, int dst_dev, void *dst, int src_dev,
                                      const void *src, uint64_t bytes, uint64_t after);
    /* Optional: how much work has been queued on the stream of `dev` so far,
     * a number that only grows; work queued by the time it is read is within
     * that position. */
    uint64_t (*stream_position)(void *ctx, int dev);
};

/* A backend instance. */
struct vdev_backend {
    const struct vdev_backend_ops *ops;
    void *ctx;
};

/* ---- creating backends ---- */

/* The host CPU: one device. */
enum vdev_status vdev_backend_cpu_new(struct vdev_backend *out);
/* Simulated GPUs from a spec such as "3x16GiB" or "2x80GiB,1x24GiB".
 * VDEV_ERR_CONFIG naming `var` and the bad part when the spec is malformed. */
enum vdev_status vdev_backend_sim_new(const char *spec, const char *var, struct vdev_backend *out);
/* Checks such a spec without making the GPUs (the same errors). */
enum vdev_status vdev_backend_sim_check(const char *spec, const char *var);
/* The CUDA plugin, when it can be loaded and finds GPUs. On failure *out is
 * empty and `reason` (cap bytes) says why in one line. */
enum vdev_status vdev_backend_cuda_new(struct vdev_backend *out, char *reason, size_t cap);
/* Loads a plugin (dlopen, RTLD_NOW | RTLD_LOCAL): the path in $env_var when it
 * is set (the only one tried then), else `file` in the plugin folder of an
 * installed tree, in the folders of this module's RUNPATH, and on the
 * loader's search path. VDEV_ERR_UNSUPPORTED when none loads, with reason
 * (cap bytes) "<what>: cannot load PATH (dlerror)" for a file found that did
 * not load, else "<what>: FILE not built or not found". *handle is the
 * caller's (closed only while nothing of the plugin is in use). */
enum vdev_status vdev_plugin_dlopen(const char *file, const char *env_var, const char *what,
                                    void **handle, char *reason, size_t cap);
/* The file a loaded plugin came from (the loader's name for it, as the path
 * tried), or `fallback` when the loader does not say: for messages. */
const char *vdev_plugin_file(void *handle, const char *fallback);
void vdev_backend_destroy(struct vdev_backend *b);

/* ---- wrappers: argument checks, defaults, error messages ---- */

int vdev_backend_n_devices(const struct vdev_backend *b);
enum vdev_status vdev_backend_device_info(const struct vdev_backend *b, int dev,
                                          struct vdev_backend_device_info *out);
enum vdev_status vdev_backend_mem_info(const struct vdev_backend *b, int dev, uint64_t *free_bytes,
                                       uint64_t *total_bytes);
enum vdev_status vdev_backend_submit_host(const struct vdev_backend *b, int dev, vdev_host_fn fn,
                                          const void *arg, size_t arg_bytes);
enum vdev_status vdev_backend_synchronize(const struct vdev_backend *b, int dev);
/* Writes n_words copies of `value` from dst (4-byte aligned) on the stream of
 * `dev`, ordered after the work queued before it. Through the backend's fill
 * entry when it has one (CUDA: cuMemsetD32Async, nothing crosses PCIe);
 * else, when host code can address the device's memory, as a host function
 * on the stream; else by copy_h2d from a host buffer of at most 1 MiB filled
 * once and reused (complete on return). n_words 0 does nothing.
 * VDEV_ERR_INVALID_ARG for a NULL or unaligned dst; VDEV_ERR_OOM without host
 * memory for the buffer; else what the backend returns. */
enum vdev_status vdev_backend_fill(const struct vdev_backend *b, int dev, void *dst,
                                   uint32_t value, uint64_t n_words);

/* The CUDA plugin's single exported symbol returns its table (see cuda/). */
#define VDEV_CUDA_PLUGIN_SYMBOL "vdev_cuda_plugin_open"
/* The core's error setter, handed to the plugin so that its messages reach
 * vdev_last_error() (the plugin cannot link the core). */
typedef enum vdev_status (*vdev_error_fn)(enum vdev_status code, const char *fmt, ...);
typedef enum vdev_status (*vdev_cuda_plugin_open_fn)(int api_version, struct vdev_backend *out,
                                                    char *reason, size_t cap,
                                                    vdev_error_fn set_error);

#endif /* VDEV_BACKEND_H */
