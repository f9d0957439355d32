/* vdev.h — the public API of vdev, a C11 runtime that runs several models on
 * several GPUs without them stepping on each other.
 *
 * vdev decides where every operation runs and owns every byte of device memory
 * the models use. Before start-up you configure the physical devices (which
 * GPUs are visible, memory growth, logical devices carved out of one GPU with
 * hard limits, a per-process memory fraction); start-up (vdev_init(), or the
 * first query of logical devices) freezes that configuration and creates the
 * logical devices, each with its own allocator.
 *
 * Conventions
 *  - Every fallible call returns enum vdev_status: VDEV_OK (0) or VDEV_ERR_*.
 *    On failure vdev_last_error() gives a message for the calling thread and
 *    nothing the call would have changed has changed.
 *  - Device names follow TensorFlow: "/device:GPU:1", "GPU:1", "gpu:1",
 *    "/gpu:1", "/job:localhost/replica:0/task:0/device:GPU:1", CPU likewise.
 *  - Sizes are in bytes (uint64_t), counts are int.
 *  - All calls are thread-safe unless said otherwise.
 *
 * Example: two models on one 8 GiB card, 4 GiB and 2 GiB
 *
 *     uint64_t limits[2] = { 4ull << 30, 2ull << 30 };
 *     vdev_config_set_logical_devices("GPU:0", limits, 2);
 *     if (vdev_init() != VDEV_OK) { fprintf(stderr, "%s\n", vdev_last_error()); exit(1); }
 *     struct vdev_memory_info mi;
 *     vdev_memory_info("GPU:1", &mi);   // bytes_limit == 2 GiB
 */
#ifndef VDEV_H
#define VDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(VDEV_BUILDING)
#define VDEV_API __attribute__((visibility("default")))
#else
#define VDEV_API
#endif

#define VDEV_VERSION_MAJOR 0
#define VDEV_VERSION_MINOR 1
#define VDEV_VERSION_PATCH 0

/* ---- status codes and errors ------------------------------------------- */

enum vdev_status {
    VDEV_OK = 0,
    VDEV_ERR_INVALID_ARG,         /* misuse: NULL where not allowed, bad value */
    VDEV_ERR_NOT_FOUND,           /* unknown device or object */
    VDEV_ERR_OOM,                 /* device memory exhausted (limit or card) */
    VDEV_ERR_ALREADY_INITIALIZED, /* configuration after start-up */
    VDEV_ERR_CONFIG,              /* configuration that cannot be honoured, bad env var */
    VDEV_ERR_BACKEND,             /* the backend (driver, plugin) failed */
    VDEV_ERR_IO,                  /* a file could not be read or written */
    VDEV_ERR_PARSE,               /* malformed input text (trace, size, list) */
    VDEV_ERR_SHAPE,               /* shapes that do not fit the op */
    VDEV_ERR_PLACEMENT,           /* input on the wrong device in strict placement */
    VDEV_ERR_UNSUPPORTED,         /* valid request this build cannot serve */
    VDEV_ERR_INTERNAL,            /* a bug in vdev */
    VDEV_STATUS_COUNT
};

/* A static name for each code ("VDEV_ERR_OOM"); never NULL. */
VDEV_API const char *vdev_status_str(enum vdev_status s);
/* The message of the calling thread's most recent failure ("" if none). The
 * string stays valid until the next vdev call on this thread. */
VDEV_API const char *vdev_last_error(void);
/* The code that went with vdev_last_error(). */
VDEV_API enum vdev_status vdev_last_status(void);
/* Clears the calling thread's error. */
VDEV_API void vdev_clear_error(void);

/* ---- sizes ------------------------------------------------------------- */

/* Parses "4GiB", "512 MiB", "3GB", "1024", "1.5GiB" (B, KiB/MiB/GiB/TiB are
 * powers of 1024; KB/MB/GB/TB are powers of 1000; K/M/G/T are taken as KiB…).
 * VDEV_ERR_PARSE on anything else, naming the text. */
VDEV_API enum vdev_status vdev_parse_bytes(const char *text, uint64_t *out);
/* Writes "4.00 GiB" (or "512 B") into buf; returns buf. */
VDEV_API char *vdev_format_bytes(uint64_t bytes, char *buf, size_t cap);

/* ---- physical devices (never start the runtime) ------------------------- */

enum vdev_device_type { VDEV_DEVICE_CPU = 0, VDEV_DEVICE_GPU, VDEV_DEVICE_TYPE_COUNT };

struct vdev_physical_device {
    enum vdev_device_type type;
    int index;             /* N in /physical_device:GPU:N */
    char name[64];         /* "/physical_device:GPU:0" */
    char model[96];        /* "Simulated GPU", "NVIDIA H200", the CPU's model */
    char backend[16];      /* "cpu", "sim", "cuda" */
    uint64_t total_bytes;  /* memory of the card (host RAM for the CPU) */
    uint64_t free_bytes;   /* as cuMemGetInfo reports it now */
    int cc_major, cc_minor; /* compute capability (0.0 for CPU) */
};

/* Fills up to `cap` entries of `out` (which may be NULL when cap is 0) and
 * sets *n to the number of physical devices: CPU:0 first, then every GPU,
 * visible or not. Does not start the runtime. Fails with VDEV_ERR_CONFIG when
 * VDEV_SIM_GPUS is malformed. */
VDEV_API enum vdev_status vdev_list_physical_devices(struct vdev_physical_device *out, int cap,
                                                     int *n);
/* Why there are no GPUs, in one line ("" when there are GPUs), e.g.
 * "CUDA plugin: libcuda.so.1 not found". Valid until the next vdev call. */
VDEV_API const char *vdev_gpu_absence_reason(void);

/* ---- configuration before start-up -------------------------------------- *
 * Each call takes a physical device, by name: "/physical_device:GPU:0" or the
 * short forms ("GPU:0", "gpu:0", "/gpu:0"). After start-up a call that would
 * change something fails with VDEV_ERR_ALREADY_INITIALIZED; one that repeats
 * what is in force is a no-op returning VDEV_OK, as in TensorFlow. */

/* Which GPUs are visible, by physical index; n == 0 hides every GPU. Logical
 * GPUs are numbered over the visible GPUs in order. */
VDEV_API enum vdev_status vdev_config_set_visible_devices(const int *gpu_indices, int n);
/* Memory growth for one physical GPU. Unlike TensorFlow, growth may differ
 * between GPUs and may be combined with logical devices (each grows up to its
 * limit). enable=false chooses preallocation. */
VDEV_API enum vdev_status vdev_config_set_memory_growth(const char *physical_device, bool enable);
/* *out: 1 on, 0 off, -1 not set (the default, which is growth). */
VDEV_API enum vdev_status vdev_config_get_memory_growth(const char *physical_device, int *out);
/* Splits one physical GPU into n logical GPUs with memory limits in bytes
 * (each > 0). n == 0 removes the split. The limits' sum must fit the card's
 * budget; that is checked at start-up. */
VDEV_API enum vdev_status vdev_config_set_logical_devices(const char *physical_device,
                                                          const uint64_t *limits_bytes, int n);
/* The per-process memory fraction of a GPU's total memory, in (0, 1]; NULL
 * device sets it for every GPU; fraction 0 removes it. */
VDEV_API enum vdev_status vdev_config_set_memory_fraction(const char *physical_device,
                                                          double fraction);

/* ---- start-up and shutdown --------------------------------------------- */

/* Reads the environment (where code set nothing), checks the configuration,
 * creates the logical devices and their allocators, and freezes the
 * configuration. Calling it again is a no-op. Errors: VDEV_ERR_CONFIG (bad
 * env var, limits beyond a card's budget), VDEV_ERR_OOM (preallocation
 * failed), VDEV_ERR_BACKEND. On failure nothing is started and the call may be
 * retried after fixing the configuration. */
VDEV_API enum vdev_status vdev_init(void);
VDEV_API bool vdev_is_initialized(void);
/* Frees every device's memory and returns to the unconfigured state (for
 * tests and tools). Not thread-safe with other calls in flight. */
VDEV_API void vdev_shutdown(void);

/* ---- logical devices ---------------------------------------------------- */

enum vdev_memory_policy { VDEV_POLICY_GROW = 0, VDEV_POLICY_PREALLOCATE, VDEV_POLICY_COUNT };

struct vdev_logical_device {
    char name[64];            /* "/device:GPU:0" */
    enum vdev_device_type type;
    int index;                /* N in /device:GPU:N */
    int physical_index;       /* the physical GPU it is carved from (0 for CPU) */
    char backend[16];         /* "cpu", "sim", "cuda" */
    enum vdev_memory_policy policy;
    uint64_t limit_bytes;     /* the most its allocator may hold */
};

/* Starts the runtime if needed, then lists the logical devices: CPU:0, then
 * GPU:0..N-1. Same fill convention as vdev_list_physical_devices. */
VDEV_API enum vdev_status vdev_list_logical_devices(struct vdev_logical_device *out, int cap,
                                                    int *n);
/* Canonical name of a device given in any accepted form:
 * "gpu:1" -> "/device:GPU:1". VDEV_ERR_INVALID_ARG for a malformed name,
 * VDEV_ERR_NOT_FOUND for a device that does not exist. Starts the runtime. */
VDEV_API enum vdev_status vdev_device_canonical_name(const char *device, char *out, size_t cap);

struct vdev_memory_info {
    uint64_t bytes_in_use;        /* live blocks, after 256-byte rounding */
    uint64_t peak_bytes_in_use;   /* since start or the last reset */
    uint64_t bytes_reserved;      /* regions held from the backend */
    uint64_t peak_bytes_reserved;
    uint64_t bytes_limit;         /* the most the device may reserve */
    uint64_t largest_free_block;  /* inside the reserved regions */
    uint64_t n_allocs;            /* live allocations */
    uint64_t n_allocs_total;      /* allocations made since start */
    uint64_t n_failed_allocs;     /* allocations that failed with OOM */
    uint64_t n_regions;           /* regions reserved now */
    double fragmentation;         /* (free - largest free) / free, 0 when nothing is free */
};

/* A consistent snapshot of a logical device's memory statistics. */
VDEV_API enum vdev_status vdev_memory_info(const char *device, struct vdev_memory_info *out);
/* Peak in use := in use now, peak reserved := reserved now. */
VDEV_API enum vdev_status vdev_memory_reset_peak(const char *device);
/* Hands every region with no live block back to the backend; *released_bytes
 * (may be NULL) says how much. */
VDEV_API enum vdev_status vdev_memory_release_cached(const char *device, uint64_t *released_bytes);

/* ---- raw device memory --------------------------------------------------- */

/* Allocates `bytes` on a logical device from its allocator. On OOM the
 * message names the size, the device, the bytes in use of the limit and the
 * largest free block. The memory is device memory: only the device reads it. */
VDEV_API enum vdev_status vdev_mem_alloc(const char *device, uint64_t bytes, void **out);
/* Frees what vdev_mem_alloc returned; NULL is a no-op. */
VDEV_API enum vdev_status vdev_mem_free(const char *device, void *ptr);

#ifdef __cplusplus
}
#endif
#endif /* VDEV_H */
