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
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* VDEV_API marks the public functions. The shared library is built with
 * hidden visibility and exports these alone; the declarations carry the same
 * attribute, so a program that hides its own symbols (-fvisibility=hidden,
 * #pragma GCC visibility) still links against them. */
#if defined(__GNUC__)
#define VDEV_API __attribute__((visibility("default")))
#else
#define VDEV_API
#endif

/* The version of this header. The build checks that it matches the project's
 * version, which also names the shared library (libvdev.so.MAJOR). */
#define VDEV_VERSION_MAJOR 0
#define VDEV_VERSION_MINOR 1
#define VDEV_VERSION_PATCH 0

/* The version of the library in use, "MAJOR.MINOR.PATCH" (static string), so
 * a program can tell the header it was built with from the library it runs
 * with. Cannot fail. */
VDEV_API const char *vdev_version(void);

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
    VDEV_ERR_SHAPE,               /* shapes or dtypes that do not fit the op */
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
/* With VDEV_OOM_REPORT on: the calling thread's last out-of-memory report,
 * the error message and then the allocator's state, as printed on stderr
 * ("" when this thread has had none, or the variable is off). Valid until
 * this thread's next out-of-memory failure. */
VDEV_API const char *vdev_last_oom_report(void);

/* ---- sizes ------------------------------------------------------------- */

/* Parses "4GiB", "512 MiB", "3GB", "1024", "1.5GiB" (B, KiB/MiB/GiB/TiB are
 * powers of 1024; KB/MB/GB/TB are powers of 1000; K/M/G/T are taken as KiB…).
 * VDEV_ERR_PARSE on anything else, naming the text. */
VDEV_API enum vdev_status vdev_parse_bytes(const char *text, uint64_t *out);
/* Writes "4.00 GiB" (or "512 B"; binary units up to EiB, so UINT64_MAX is
 * "16.00 EiB") into buf, truncated to cap - 1 characters and terminated;
 * returns buf. cap 0 or a NULL buf writes nothing. */
VDEV_API char *vdev_format_bytes(uint64_t bytes, char *buf, size_t cap);

/* Seconds on a monotonic clock, for timing steps. */
VDEV_API double vdev_clock_seconds(void);

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
 * short forms ("GPU:0", "gpu:0", "/gpu:0"). A logical name ("/device:GPU:0",
 * the long form) is VDEV_ERR_INVALID_ARG ("'/device:GPU:0' is a logical
 * device; configuration takes a physical device such as
 * /physical_device:GPU:0"): with a split or VDEV_VISIBLE_DEVICES it need not
 * be the physical GPU of that number. After start-up a call that would
 * change something fails with VDEV_ERR_ALREADY_INITIALIZED; one that repeats
 * what is in force is a no-op returning VDEV_OK, as in TensorFlow. */

/* Which GPUs are visible, by physical index; n == 0 hides every GPU. As
 * tf.config.set_visible_devices, logical GPUs are numbered over the visible
 * GPUs in physical order whatever the order of the list ({2, 0}: GPU:0 is
 * physical GPU 0); VDEV_VISIBLE_DEVICES instead numbers them in the order it
 * lists them, as CUDA_VISIBLE_DEVICES does (which simulated GPUs do not
 * read). A repeated index is
 * VDEV_ERR_INVALID_ARG ("contained a duplicate entry"); after start-up the
 * list is compared as given. */
VDEV_API enum vdev_status vdev_config_set_visible_devices(const int *gpu_indices, int n);
/* The visible GPUs as given (by code, else VDEV_VISIBLE_DEVICES, else every
 * GPU in order): what is in force after start-up, what start-up would put in
 * force before it (the environment is read and checked: VDEV_ERR_CONFIG when
 * malformed). Fills up to cap entries (gpu_indices may be NULL when cap is
 * 0) and sets *n to their number. tf.config.get_visible_devices. */
VDEV_API enum vdev_status vdev_config_get_visible_devices(int *gpu_indices, int cap, int *n);
/* Memory growth for one physical GPU. Unlike TensorFlow, growth may differ
 * between GPUs and may be combined with logical devices (each grows up to its
 * limit). enable=false chooses preallocation. */
VDEV_API enum vdev_status vdev_config_set_memory_growth(const char *physical_device, bool enable);
/* What code set: *out 1 on, 0 off, -1 not set (the default, which is growth,
 * unless VDEV_MEMORY_GROWTH or TF_FORCE_GPU_ALLOW_GROWTH says otherwise), as
 * tf.config.experimental.get_memory_growth returns what was set; a repeat of
 * the value in force after start-up counts as set. */
VDEV_API enum vdev_status vdev_config_get_memory_growth(const char *physical_device, int *out);
/* Splits a physical device into n logical devices; n == 0 removes the split
 * (one device with the default budget), VDEV_LOGICAL_DEVICES's included.
 *  - A GPU: n logical GPUs with memory limits in bytes, each at least 1 MiB
 *    (TensorFlow's limits are in MiB: a limit below 1 MiB is refused with a
 *    hint, "did you mean 4096MiB"). The limits' sum must fit the card's
 *    budget; that is checked at start-up.
 *  - "CPU:0": n logical CPUs, /device:CPU:0..n-1 (at most 16), each with its
 *    own allocator over host memory and its own statistics; ops placed on
 *    them run on the host. limits must be NULL or all 0 ("Setting memory
 *    limit on CPU virtual devices is currently not supported", as in
 *    TensorFlow). Also VDEV_LOGICAL_DEVICES="cpu:4". */
VDEV_API enum vdev_status vdev_config_set_logical_devices(const char *physical_device,
                                                          const uint64_t *limits_bytes, int n);
/* The logical-device split of a physical device (code, else
 * VDEV_LOGICAL_DEVICES): *n logical devices (0: not split), their limits in
 * limits_bytes[0..min(n, cap)) (0 for CPUs). In force after start-up, what
 * start-up would put in force before it (run-time changes of a ceiling are
 * read with vdev_memory_get_limits). tf.config.get_logical_device_configuration. */
VDEV_API enum vdev_status vdev_config_get_logical_devices(const char *physical_device,
                                                          uint64_t *limits_bytes, int cap, int *n);
/* Floors, ceilings and priorities per logical device, from code and at run
 * time (vdev_config_set_logical_devices_ex, vdev_memory_set_limits, ...):
 * vdev/govern.h, included at the end of this header. */
/* The per-process memory fraction of a GPU's total memory, in (0, 1]; NULL
 * device sets it for every GPU; fraction 0 removes it, VDEV_MEMORY_FRACTION's
 * and TF_GPU_MEMORY_FRACTION's included. A fraction that gives
 * a GPU a budget below 1 MiB is VDEV_ERR_INVALID_ARG naming the smallest
 * useful value. */
VDEV_API enum vdev_status vdev_config_set_memory_fraction(const char *physical_device,
                                                          double fraction);
/* Soft placement (tf.config.set_soft_device_placement): a device scope
 * naming a device that does not exist ("GPU:42") sends its ops to the device
 * TensorFlow picks — GPU:0, or CPU:0 where there is no GPU — and vdev warns
 * once on stderr per such name. Off by default, unlike TensorFlow's eager
 * mode: a silent fallback is how models end up on the wrong device.
 * Malformed names and other jobs stay errors. May change at any time; code
 * wins over VDEV_SOFT_DEVICE_PLACEMENT (read at start-up). Before start-up
 * the getter reports what start-up will put in force: code's setting, else
 * the variable's; a malformed variable reads as off and leaves start-up's
 * error as vdev_last_error() (vdev_last_status() VDEV_ERR_CONFIG). The same
 * holds for the getters of determinism, placement logging and the placement
 * policy. */
VDEV_API void vdev_config_set_soft_device_placement(bool enable);
VDEV_API bool vdev_config_get_soft_device_placement(void);

/* Determinism (tf.config.experimental.enable_op_determinism): when on, every
 * op and collective gives the same bits run to run, on every backend, however
 * many threads run host kernels; ops that could otherwise split their work by
 * the number of threads, or add in the order threads finish, take a fixed-order
 * path. Off by default. May change at any time (ops already submitted keep
 * the mode they were submitted with); code wins over VDEV_DETERMINISTIC=1
 * (read at start-up, and by the getter before it, as soft placement's);
 * vdev_shutdown() turns it off. Collectives
 * (vdev/distribute.h) are deterministic whether it is on or not. */
VDEV_API void vdev_config_set_deterministic(bool enable);
VDEV_API bool vdev_config_get_deterministic(void);
/* What the switch constrains in the host kernels (cpu backend, simulated
 * GPUs): only MatMul. OpenBLAS's sgemm gives different bits with different
 * thread counts (0.3.21: most elements of a 1000x1000x1000 product differ
 * between 1 and 2 threads), so under the switch every product runs with one
 * OpenBLAS thread, whatever OPENBLAS_NUM_THREADS says; a product takes the
 * mode it was submitted in. Its cost is the products' lost parallelism: at
 * most the speed-up OpenBLAS gets from its threads (up to 2x on the 2-core
 * development machine; BENCHMARKS.md gives the MLP 1024-4096-4096-10 step
 * with and without the switch), more on a machine with more cores; with two
 * or more streams the products are single-threaded anyway and nothing is
 * lost. Every other host kernel already gives
 * the same bits whatever the thread count: elementwise kernels (which the
 * pool splits by element; each element is computed alone), and reductions
 * and losses (Sum, Mean, MeanSquaredError, the softmax cross-entropy, the
 * bias gradient), which run on one thread in a fixed order. Gradients that
 * reach a tensor from several ops are added in the tape's order. The same
 * bits means: same machine, same OpenBLAS and OPENBLAS_CORETYPE (which
 * choose the kernels), same inputs and seeds. */

/* ---- threads ----------------------------------------------------------------
 * What vdev does with the CPU's threads. Matrix products run in OpenBLAS;
 * the user's OPENBLAS_NUM_THREADS (else OMP_NUM_THREADS, else the CPUs the
 * process may use) is a budget that vdev divides among the streams that run
 * products at the same time, never a multiplier:
 *  - one stream (the cpu backend, or one simulated GPU not split): each
 *    product runs with the whole budget;
 *  - two or more (simulated GPUs and the logical GPUs of a split one, each a
 *    stream with a thread of its own, or logical CPUs that replicas drive
 *    from threads of their own): OpenBLAS
 *    runs single-threaded and at most `budget` products run at the same
 *    time, the others wait their turn. OpenBLAS's thread count is one number
 *    for the whole process (openblas_set_num_threads is global), so it
 *    cannot be split per stream: on a machine with many more cores than
 *    streams, each stream's products use one core each.
 * vdev sets OpenBLAS's thread count itself, at the first product after each
 * start-up (and again when the determinism switch changes, see above): a
 * program that calls OpenBLAS directly while vdev runs gets that count too.
 * Large elementwise kernels (Adam, ReLU, ...) are split over vdev's own pool
 * of threads: OMP_NUM_THREADS, else the CPUs the process may use, divided
 * among the streams. "The CPUs the process may use" is its affinity mask
 * (taskset), capped by the CPU quota of its cgroup (cgroup v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us, rounded up), as a container's limit
 * sets it. */
struct vdev_thread_info {
    int cpus;                /* CPUs the process may use: affinity mask, cgroup quota */
    int cgroup_cpus;         /* the cgroup CPU quota in whole CPUs, rounded up; 0: none */
    int blas_budget;         /* threads for products: OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, cpus */
    int streams;             /* host threads that may run products at the same time */
    int blas_threads;        /* threads one product is split over (vdev's pool; OpenBLAS
                                itself always runs single-threaded): at most cpus */
    int concurrent_products; /* products that may run at the same time (at most
                                cpus); 0: no limit */
    int kernel_threads;      /* threads a large elementwise kernel is split over */
    bool deterministic;      /* the plan was made under the determinism switch */
};
/* The plan vdev follows now (starts the runtime). VDEV_ERR_INVALID_ARG when
 * out is NULL. Thread-safe. */
VDEV_API enum vdev_status vdev_thread_info(struct vdev_thread_info *out);

/* tf.config.experimental.get_device_details: the card's name and compute
 * capability; empty ("" and 0.0) for the CPU, as TensorFlow's empty dict. */
struct vdev_device_details {
    char device_name[96];  /* "NVIDIA H200", "Simulated GPU" */
    int cc_major, cc_minor; /* compute_capability */
};
/* Does not start the runtime. VDEV_ERR_NOT_FOUND "Unrecognized device". */
VDEV_API enum vdev_status vdev_device_details(const char *physical_device,
                                              struct vdev_device_details *out);

/* ---- start-up and shutdown --------------------------------------------- */

/* Reads the environment (where code set nothing), checks the configuration,
 * creates the logical devices and their allocators, and freezes the
 * configuration. Calling it again is a no-op. Errors: VDEV_ERR_CONFIG (bad
 * env var, limits beyond a card's budget), VDEV_ERR_OOM (preallocation
 * failed), VDEV_ERR_BACKEND. On failure nothing is started and the call may be
 * retried after fixing the configuration. In a child that fork() made from a
 * process whose runtime had started, it and every use of a tensor fail with
 * VDEV_ERR_UNSUPPORTED (the runtime's threads stayed in the parent): start
 * vdev after fork(), or spawn the child instead. */
VDEV_API enum vdev_status vdev_init(void);
VDEV_API bool vdev_is_initialized(void);
/* Frees every device's memory and returns to the unconfigured state (for
 * tests and tools). Not thread-safe with other calls in flight. In a forked
 * child of a started runtime it returns at once, giving nothing back. */
VDEV_API void vdev_shutdown(void);

/* ---- logical devices ---------------------------------------------------- */

enum vdev_memory_policy { VDEV_POLICY_GROW = 0, VDEV_POLICY_PREALLOCATE, VDEV_POLICY_COUNT };

struct vdev_logical_device {
    char name[64];            /* "/device:GPU:0" */
    enum vdev_device_type type;
    int index;                /* N in /device:GPU:N */
    int physical_index;       /* the physical GPU it is carved from (0 for CPUs) */
    char backend[16];         /* "cpu", "sim", "cuda" */
    enum vdev_memory_policy policy;
    uint64_t limit_bytes;     /* the most its allocator may hold */
};

/* Starts the runtime if needed, then lists the logical devices: the logical
 * CPUs (CPU:0, or CPU:0..n-1 when the host is split), then GPU:0..N-1. Same
 * fill convention as vdev_list_physical_devices. */
VDEV_API enum vdev_status vdev_list_logical_devices(struct vdev_logical_device *out, int cap,
                                                    int *n);
/* Canonical name of a device given in any accepted form:
 * "gpu:1" -> "/device:GPU:1". Starts the runtime. Like every call below that
 * takes a logical device, as TensorFlow's memory queries: VDEV_ERR_INVALID_ARG
 * "Failed parsing device name: ..." for a malformed name or one without an
 * index ("GPU"), VDEV_ERR_NOT_FOUND "No matching devices found for ..." for a
 * device that does not exist. out holds cap bytes; a name that does not fit
 * (with its NUL) is VDEV_ERR_INVALID_ARG ("needs 14 bytes, out holds 4") and
 * out is left empty; 64 bytes hold any name. */
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
    uint64_t n_failed_allocs;     /* allocations that failed with OOM (not the copy a tape
                                     would keep of a tensor written in place, which the write
                                     does without) */
    uint64_t n_regions;           /* regions reserved now */
    double fragmentation;         /* (free - largest free) / free, 0 when nothing is free */
    uint64_t largest_alloc_size;  /* largest single allocation (after 256-byte rounding) since
                                     start or the last reset, as TensorFlow's AllocatorStats */
};

/* A consistent snapshot of a logical device's memory statistics. */
VDEV_API enum vdev_status vdev_memory_info(const char *device, struct vdev_memory_info *out);
/* Peak in use := in use now, peak reserved := reserved now,
 * largest_alloc_size := 0 (TensorFlow's reset_memory_stats). */
VDEV_API enum vdev_status vdev_memory_reset_peak(const char *device);
/* Waits for the device's queued work, then hands every region with no live
 * block back to the backend (growth mode); *released_bytes (may be NULL) says
 * how much. Growth then starts over: the next region is 2 MiB (or twice the
 * largest region still held), not twice the regions released. */
VDEV_API enum vdev_status vdev_memory_release_cached(const char *device, uint64_t *released_bytes);

/* ---- raw device memory --------------------------------------------------- */

/* Allocates `bytes` on a logical device from its allocator. On OOM the
 * message names the size, the device, the bytes in use of the limit and the
 * largest free block, then the kind of failure and what would help: "the
 * limit is short by <size>" (in use + request > limit), "fragmentation: free
 * <size> in <n> blocks, largest <size>", or the backend's own message when
 * the physical device is full; live memory is untouched. The memory is
 * device memory: only the device reads it. */
VDEV_API enum vdev_status vdev_mem_alloc(const char *device, uint64_t bytes, void **out);
/* Frees what vdev_mem_alloc returned; NULL is a no-op. */
VDEV_API enum vdev_status vdev_mem_free(const char *device, void *ptr);


/* ==== tensors =============================================================
 *
 * f32 and i32 tensors of 0 to 4 dimensions, row-major and contiguous, living
 * on one logical device and taking their memory from its allocator. A call
 * that makes a tensor returns NULL on failure, and every op given a NULL input
 * returns NULL without touching the error, so a chain of ops needs one check
 * at its end and vdev_last_error() names the first failure.
 *
 * Ownership: a tensor made inside vdev_scope_begin()/vdev_scope_end() belongs
 * to the scope and is freed at its end unless passed to vdev_keep(); outside
 * any scope it is the caller's, freed with vdev_tensor_free(). Variables
 * (vdev_variable) are never freed by scopes.
 *
 * Where a new tensor lives: the innermost device scope (vdev_device_push), or
 * the default device (GPU:0, or CPU:0 where there is no GPU).
 *
 * Handles: vdev_tensor_t * (and vdev_tape_t *, vdev_dense_t *, vdev_mlp_t *,
 * vdev_optimizer_t *) are opaque checked handles, not addresses: never
 * dereference one. vdev checks every handle it is given, without touching
 * freed memory: a tensor already freed (by vdev_tensor_free or its scope's
 * end), a handle of another kind, or any other value gives
 * VDEV_ERR_INVALID_ARG ("not a live tensor (freed already, or not a
 * tensor)"), and a handle is never reused for a later tensor (the same slot
 * gets a new generation; the 32-bit counter would need 2^31 reuses of one slot
 * to come round). A tensor made before vdev_shutdown() owns no memory after
 * it: using it is VDEV_ERR_INVALID_ARG ("... belongs to a runtime that was
 * shut down"), even after a new vdev_init(); vdev_tensor_free() on it just
 * releases the handle. Looking a handle up takes no lock. At most 16777216
 * tensors (and as many objects of each other kind) live at once; beyond,
 * making one fails with VDEV_ERR_OOM. */

typedef struct vdev_tensor vdev_tensor_t;

enum vdev_dtype { VDEV_F32 = 0, VDEV_I32, VDEV_DTYPE_COUNT };
#define VDEV_MAX_DIMS 4

VDEV_API vdev_tensor_t *vdev_tensor_zeros(const int64_t *shape, int ndim, enum vdev_dtype dtype);
VDEV_API vdev_tensor_t *vdev_tensor_ones(const int64_t *shape, int ndim, enum vdev_dtype dtype);
/* Every element = value: rounded to float for f32; for i32 truncated toward
 * zero, and VDEV_ERR_INVALID_ARG naming the value when it is NaN, infinite or
 * outside [-2147483648, 2147483647] after truncation. */
VDEV_API vdev_tensor_t *vdev_tensor_fill(const int64_t *shape, int ndim, enum vdev_dtype dtype,
                                         double value);
/* Copies numel elements from host memory. */
VDEV_API vdev_tensor_t *vdev_tensor_from_host(const void *data, const int64_t *shape, int ndim,
                                              enum vdev_dtype dtype);
/* f32 random tensors from a counter-based generator: the same seed gives the
 * same numbers on every device and backend. The arguments must be finite
 * (VDEV_ERR_INVALID_ARG naming one that is NaN or infinite: "vdev_tensor_uniform:
 * lo is NaN, not a finite number"), with hi >= lo and stddev >= 0. */
VDEV_API vdev_tensor_t *vdev_tensor_uniform(const int64_t *shape, int ndim, float lo, float hi,
                                            uint64_t seed);
VDEV_API vdev_tensor_t *vdev_tensor_normal(const int64_t *shape, int ndim, float mean, float stddev,
                                           uint64_t seed);
/* Copies the tensor to host memory (dst_bytes must be at least numel * 4);
 * waits for the work that makes it. */
VDEV_API enum vdev_status vdev_tensor_to_host(const vdev_tensor_t *t, void *dst, size_t dst_bytes);
/* The value of a one-element f32 tensor, NaN on error. */
VDEV_API float vdev_tensor_item(const vdev_tensor_t *t);
/* A copy on another logical device (any accepted name). A recording tape
 * differentiates through it (the gradient goes back to t's device), as
 * TensorFlow's copies between devices; it is a copy, not an op: counted in
 * the bytes copied, not logged as an op. */
VDEV_API vdev_tensor_t *vdev_tensor_to(const vdev_tensor_t *t, const char *device);
/* A copy on the placement device (TensorFlow's tf.identity). */
VDEV_API vdev_tensor_t *vdev_identity(const vdev_tensor_t *t);
/* A copy on t's device that no tape differentiates through: gradients stop
 * there (TensorFlow's tf.stop_gradient). */
VDEV_API vdev_tensor_t *vdev_stop_gradient(const vdev_tensor_t *t);
/* Releases the caller's tensor; NULL is a no-op. A dead handle (freed twice)
 * is VDEV_ERR_INVALID_ARG and frees nothing, whatever tensor now uses the
 * memory it had. A tensor held by a scope of another thread can be freed only
 * by that thread (VDEV_ERR_INVALID_ARG otherwise). Of two threads freeing one
 * tensor at once, one frees it and the other gets the error. */
VDEV_API void vdev_tensor_free(vdev_tensor_t *t);

VDEV_API int vdev_tensor_ndim(const vdev_tensor_t *t);
/* Size of one axis (negative counts from the end); -1 and VDEV_ERR_INVALID_ARG
 * naming the axis as given when there is no such axis. */
VDEV_API int64_t vdev_tensor_dim(const vdev_tensor_t *t, int axis);
VDEV_API int64_t vdev_tensor_numel(const vdev_tensor_t *t);
VDEV_API enum vdev_dtype vdev_tensor_dtype(const vdev_tensor_t *t);
/* "/device:GPU:1"; valid as long as the runtime runs. */
VDEV_API const char *vdev_tensor_device(const vdev_tensor_t *t);

/* Makes t a variable: a tensor that the tape differentiates against and the
 * optimizers update in place. Takes t out of any scope; the caller frees it
 * with vdev_tensor_free. Returns t (NULL in, NULL out). */
VDEV_API vdev_tensor_t *vdev_variable(vdev_tensor_t *t);
/* Copies value into the variable in place (shapes must match). Any tensor
 * may be assigned; a live tape that read it keeps the value it read. A value
 * on another device is copied and counted under every placement policy
 * (checkpoint restore and mirrored variables rely on it); Python's
 * Variable.assign refuses it under strict, as TensorFlow's explicit policy. */
VDEV_API enum vdev_status vdev_assign(vdev_tensor_t *var, const vdev_tensor_t *value);

/* ---- scopes that free temporaries ----
 * Scopes are per thread and nest up to 64 deep. They never allocate: a scope
 * cannot fail for want of memory. A thread that exits with scopes open has
 * them closed (their tensors freed) as vdev_scope_end would. */

/* Opens a scope. VDEV_ERR_INVALID_ARG beyond 64 nested scopes ("tensor scopes
 * nested deeper than 64"), like vdev_device_push. Pairing stays simple: every
 * begin, failed or not, takes its vdev_scope_end; the end of a failed begin
 * does nothing (it does not close the enclosing scope), and while a failed
 * begin's end is pending, further begins fail too. */
VDEV_API enum vdev_status vdev_scope_begin(void);
/* Frees every tensor made since the matching begin except those kept; kept
 * tensors pass to the enclosing scope, or to the caller outside any scope.
 * Without a matching begin: VDEV_ERR_INVALID_ARG, nothing freed. */
VDEV_API void vdev_scope_end(void);
/* Marks t to survive the current scope's end; returns t (NULL, with
 * VDEV_ERR_INVALID_ARG, for a dead handle or a tensor of another thread's
 * scope). */
VDEV_API vdev_tensor_t *vdev_keep(vdev_tensor_t *t);

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
 * (vdev_device_current() stays NULL). A scope that soft placement sent to
 * the default device for a missing one fails its next op once soft
 * placement is off, as TensorFlow resolves a scope per op. */
VDEV_API enum vdev_status vdev_device_push(const char *device);
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
 * malformed value reads as VDEV_PLACEMENT_COPY, with start-up's error). */
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
 * as given; port 0 picks a free port, see vdev_metrics_port). Starts the
 * runtime. VDEV_ERR_INVALID_ARG for a malformed address, an address that
 * cannot be bound, or an endpoint already serving. */
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

/* ==== ops =================================================================
 * Each returns a new tensor, or NULL (see above). A shape mismatch is
 * VDEV_ERR_SHAPE naming both shapes. */

VDEV_API vdev_tensor_t *vdev_matmul(const vdev_tensor_t *a, const vdev_tensor_t *b, bool trans_a,
                                    bool trans_b);
/* Elementwise, broadcasting by numpy's (and TensorFlow's) rule: the output
 * has the larger rank, each dimension 1 on one side takes the other's
 * ([5] + [1,5] is [1,5]; [3,1] * [1,4] is [3,4]), and each input's gradient is
 * summed back to its own shape. On a CUDA GPU only the same shape, a row
 * over the last axis and a one-element tensor run for now (another form is
 * VDEV_ERR_UNSUPPORTED there). */
VDEV_API vdev_tensor_t *vdev_add(const vdev_tensor_t *a, const vdev_tensor_t *b);
VDEV_API vdev_tensor_t *vdev_sub(const vdev_tensor_t *a, const vdev_tensor_t *b);
VDEV_API vdev_tensor_t *vdev_mul(const vdev_tensor_t *a, const vdev_tensor_t *b);
VDEV_API vdev_tensor_t *vdev_div(const vdev_tensor_t *a, const vdev_tensor_t *b);
VDEV_API vdev_tensor_t *vdev_add_scalar(const vdev_tensor_t *a, float s);
VDEV_API vdev_tensor_t *vdev_mul_scalar(const vdev_tensor_t *a, float s);
VDEV_API vdev_tensor_t *vdev_pow_scalar(const vdev_tensor_t *a, float p);
/* std::sqrt elementwise (TensorFlow's Sqrt): sqrt(-0) = -0, below 0 NaN. */
VDEV_API vdev_tensor_t *vdev_sqrt(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_relu(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_tanh(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_sigmoid(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_exp(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_log(const vdev_tensor_t *a);
/* Over the last axis. */
VDEV_API vdev_tensor_t *vdev_softmax(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_log_softmax(const vdev_tensor_t *a);
/* Over one axis (negative from the end), keeping it as size 1 if keepdims. */
VDEV_API vdev_tensor_t *vdev_sum(const vdev_tensor_t *a, int axis, bool keepdims);
VDEV_API vdev_tensor_t *vdev_mean(const vdev_tensor_t *a, int axis, bool keepdims);
/* Over all elements: a 0-dimensional tensor. */
VDEV_API vdev_tensor_t *vdev_sum_all(const vdev_tensor_t *a);
VDEV_API vdev_tensor_t *vdev_mean_all(const vdev_tensor_t *a);
/* Same elements, new shape; one dimension may be -1. */
VDEV_API vdev_tensor_t *vdev_reshape(const vdev_tensor_t *a, const int64_t *shape, int ndim);
VDEV_API vdev_tensor_t *vdev_transpose(const vdev_tensor_t *a); /* 2-D */
/* mean((pred - target)^2), a 0-dimensional tensor; 0 for an empty batch
 * (no rows: Keras's divide_no_nan). */
VDEV_API vdev_tensor_t *vdev_mse(const vdev_tensor_t *pred, const vdev_tensor_t *target);
/* mean over rows of -log softmax(logits)[label] (0 for N = 0, as Keras);
 * logits [N, C] f32, labels [N] i32 in [0, C). A label outside [0, C) is VDEV_ERR_INVALID_ARG with
 * TensorFlow's words ("Received a label value of 7 which is outside the valid
 * range of [0, 7).  Label values: ...") when the labels live on the CPU or a
 * simulated GPU, whose memory the host reads (labels that an op made there
 * are read after their device's stream has finished them); on a CUDA GPU,
 * as on TensorFlow's GPUs, the labels are not read back and the loss (and
 * the gradient of the bad rows) is NaN. */
VDEV_API vdev_tensor_t *vdev_softmax_cross_entropy(const vdev_tensor_t *logits,
                                                   const vdev_tensor_t *labels);
/* Index of the largest element over the last axis, i32. */
VDEV_API vdev_tensor_t *vdev_argmax(const vdev_tensor_t *a);

/* ==== autograd ============================================================
 *
 *     vdev_tape_t *tape = vdev_tape_begin();
 *     vdev_tensor_t *loss = ...ops on variables...;
 *     vdev_tensor_t *grads[2];
 *     vdev_tape_gradient(tape, loss, vars, 2, grads);
 *     vdev_tape_end(tape);
 *
 * The tape records the ops of the calling thread while it is active. Tapes are
 * checked handles: a tape ended already is VDEV_ERR_INVALID_ARG for every
 * call, another thread may neither end a tape nor ask it for gradients while
 * it records (VDEV_ERR_INVALID_ARG), a thread that exits stops its tape's
 * recording (the tape keeps its records, and the device memory of the
 * tensors they hold, until vdev_tape_end: end it before the thread exits, or
 * hand its handle on), and a tape begun before vdev_shutdown() can only be
 * ended. */

typedef struct vdev_tape vdev_tape_t;
/* Starts recording; NULL if a tape is already recording on this thread. */
VDEV_API vdev_tape_t *vdev_tape_begin(void);
/* Gradients of a float loss with respect to each variable (zeros for a
 * variable the loss does not depend on); a loss of several elements stands
 * for their sum, as in TensorFlow. Each gradient op runs on the device
 * of its forward op; a variable's gradient is handed back on the variable's
 * own device (copied there if its forward ops ran elsewhere). The gradients
 * belong to the current scope and must be treated as read-only (one may share
 * memory with another). Stops the recording; the tape can answer further
 * calls, for other losses, until vdev_tape_end. So that a later call sees
 * the values the ops read, the first write to a value the tape read, where
 * the op's gradient reads it (vdev_assign, vdev_optimizer_apply), saves a
 * copy of it while the tape lives: end the tape before updating the
 * variables, as above. */
VDEV_API enum vdev_status vdev_tape_gradient(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                             vdev_tensor_t *const *vars, int n_vars,
                                             vdev_tensor_t **grads);
/* What a variable the loss does not reach gets (TensorFlow's
 * UnconnectedGradients): zeros of its shape, or NULL (TensorFlow's None). */
enum vdev_unconnected { VDEV_UNCONNECTED_ZERO = 0, VDEV_UNCONNECTED_NONE = 1 };
/* vdev_tape_gradient, choosing what an unconnected variable gets; with
 * VDEV_UNCONNECTED_NONE a NULL gradient on success means "not reached", and
 * every other gradient is set. Another value of `unconnected` is
 * VDEV_ERR_INVALID_ARG. */
VDEV_API enum vdev_status vdev_tape_gradient_ex(vdev_tape_t *tape, const vdev_tensor_t *loss,
                                                vdev_tensor_t *const *vars, int n_vars,
                                                vdev_tensor_t **grads,
                                                enum vdev_unconnected unconnected);
/* Stops recording (if still) and frees the tape. NULL is a no-op; a tape
 * ended already is VDEV_ERR_INVALID_ARG. */
VDEV_API void vdev_tape_end(vdev_tape_t *tape);

/* ==== nn ==================================================================
 * Layers, models and optimizers are checked handles, as tensors are: a freed
 * one, a NULL one or one of another kind is VDEV_ERR_INVALID_ARG naming it. */

enum vdev_activation { VDEV_ACT_NONE = 0, VDEV_ACT_RELU, VDEV_ACT_TANH, VDEV_ACT_SIGMOID,
                       VDEV_ACT_COUNT };

typedef struct vdev_dense vdev_dense_t;
/* y = act(x W + b), W [in, out] Glorot-uniform from seed, b zeros; made on the
 * current device scope. */
VDEV_API vdev_dense_t *vdev_dense_new(int64_t in, int64_t out, enum vdev_activation act,
                                      uint64_t seed);
VDEV_API vdev_tensor_t *vdev_dense_forward(vdev_dense_t *layer, const vdev_tensor_t *x);
VDEV_API void vdev_dense_free(vdev_dense_t *layer);

typedef struct vdev_mlp vdev_mlp_t;
/* Layers sizes[0] -> sizes[1] -> ... -> sizes[n_sizes-1]; `hidden` after each
 * layer but the last, `output` after the last. */
VDEV_API vdev_mlp_t *vdev_mlp_new(const int64_t *sizes, int n_sizes, enum vdev_activation hidden,
                                  enum vdev_activation output, uint64_t seed);
VDEV_API vdev_tensor_t *vdev_mlp_forward(vdev_mlp_t *m, const vdev_tensor_t *x);
/* The variables (W0, b0, W1, b1, ...); returns their number (fills at most
 * cap; out may be NULL only when cap is 0, to ask the number). -1 with
 * VDEV_ERR_INVALID_ARG for a bad model, a negative cap, or out NULL with
 * cap > 0. The tensors stay the model's: vdev_mlp_free frees them. */
VDEV_API int vdev_mlp_variables(const vdev_mlp_t *m, vdev_tensor_t **out, int cap);
VDEV_API void vdev_mlp_free(vdev_mlp_t *m);

typedef struct vdev_optimizer vdev_optimizer_t;
/* SGD with a learning rate >= 0 and momentum in [0, 1], as Keras's (momentum
 * 0 for plain SGD). */
VDEV_API vdev_optimizer_t *vdev_sgd_new(float learning_rate, float momentum);
/* Adam; TensorFlow's defaults are 0.001, 0.9, 0.999, 1e-7. */
VDEV_API vdev_optimizer_t *vdev_adam_new(float learning_rate, float beta1, float beta2,
                                         float epsilon);
/* Updates each variable in place on its own device. */
VDEV_API enum vdev_status vdev_optimizer_apply(vdev_optimizer_t *opt, vdev_tensor_t *const *vars,
                                               vdev_tensor_t *const *grads, int n);
/* The optimizer's state for variable var, to save in a checkpoint and load
 * back (training then goes on bit for bit as if it had never stopped): its
 * slots, as variables on var's device, made (zeros) if they do not exist yet —
 * Adam: "m" then "v"; SGD with momentum: "momentum" (Keras's names); SGD
 * without momentum keeps none (a velocity handle kept from an earlier call
 * holds zeros while momentum is 0). Returns their number, filling at most cap of
 * out (and of names, unless NULL); -1 with VDEV_ERR_INVALID_ARG for a bad
 * optimizer or variable, a negative cap or out NULL with cap > 0, or the error
 * of making a slot (VDEV_ERR_OOM). The tensors stay the optimizer's. */
VDEV_API int vdev_optimizer_slots(vdev_optimizer_t *opt, vdev_tensor_t *var, vdev_tensor_t **out,
                                  const char **names, int cap);
/* Updates applied so far (Keras's `iterations`; Adam's bias correction
 * counts from it): save it beside the slots and set it on restore. */
VDEV_API enum vdev_status vdev_optimizer_get_iterations(const vdev_optimizer_t *opt,
                                                        int64_t *out);
VDEV_API enum vdev_status vdev_optimizer_set_iterations(vdev_optimizer_t *opt, int64_t n);
VDEV_API void vdev_optimizer_free(vdev_optimizer_t *opt);

/* ==== DLPack: sharing tensors with other frameworks ========================
 *
 * DLPack (dlpack/dlpack.h, version 0.6 and later) is the exchange format of
 * numpy (np.from_dlpack), PyTorch (torch.utils.dlpack), JAX and CuPy: a
 * DLManagedTensor describes memory (address, device, dtype, shape, strides)
 * and carries a deleter that its consumer calls once it is done with it.
 * vdev shares memory without copying wherever it can:
 *
 *   - export: a tensor on the CPU or a simulated GPU, whose memory the host
 *     reads, goes out as host memory (kDLCPU, device_id 0); a tensor on a
 *     CUDA GPU as kDLCUDA with the CUDA ordinal of its card. Either way the
 *     consumer sees the tensor's own memory, not a copy;
 *   - import: host memory (kDLCPU, and the host-readable kDLCUDAHost and
 *     kDLCUDAManaged) becomes a tensor on CPU:0 over the producer's memory
 *     when it is compact, row-major and 4-byte aligned; strided memory is
 *     copied into a new CPU:0 tensor.
 *
 * Only f32 (kDLFloat, 32 bits, 1 lane) and i32 (kDLInt, 32, 1) tensors of 0
 * to 4 dimensions are exchanged. Include dlpack/dlpack.h to read the
 * structure; this header only names it. */

struct DLManagedTensor; /* dlpack/dlpack.h */

/* Exports t through DLPack without copying: *out describes t's memory (its
 * shape, and its strides in elements, are always given) and keeps t's memory
 * alive, whatever happens to the handle t, until the consumer calls
 * (*out)->deleter(*out) exactly once, from any thread. Waits for the work that
 * makes t, so the consumer may read it at once (on a CUDA GPU: once the
 * device's stream has finished it). The memory is vdev's: vdev_shutdown()
 * frees it whatever exports are alive, so consumers must be done with it
 * before (vdev_dlpack_live_exports() counts them). Writes through the export
 * are writes to the tensor; while it lives, an op that a tape records reads
 * a copy of the tensor, so gradients see the value read. Memory the host can
 * read (cpu, simulated GPUs)
 * goes out as kDLCPU, and while such an export lives, vdev's own writes to
 * it (ops in place, vdev_assign, optimizer updates) finish before the call
 * returns. Errors (*out NULL): VDEV_ERR_INVALID_ARG (out
 * NULL, a dead handle, a runtime shut down), VDEV_ERR_OOM (host memory for the
 * description), or the backend's error from waiting for the device. */
VDEV_API enum vdev_status vdev_tensor_to_dlpack(vdev_tensor_t *t, struct DLManagedTensor **out);

/* Imports a DLPack tensor as a new tensor on CPU:0 (in the current scope, as
 * any new tensor). On success vdev owns `m` and calls m->deleter(m) exactly
 * once: when the tensor's last reference goes when it shares m's memory
 * (zero copy: compact, row-major, 4-byte aligned host memory), at once when
 * it copied the elements (strided or unaligned memory), also after
 * vdev_shutdown(), since the memory is the producer's. On failure (NULL) m
 * is still the caller's, untouched. Errors: VDEV_ERR_INVALID_ARG (m NULL,
 * data NULL with elements, a negative dimension), VDEV_ERR_UNSUPPORTED
 * naming what: memory the host cannot read ("kDLCUDA"...), a dtype other
 * than float32 and int32 ("float64"), more than 4 dimensions; VDEV_ERR_OOM. */
VDEV_API vdev_tensor_t *vdev_tensor_from_dlpack(struct DLManagedTensor *m);

/* The number of exports (vdev_tensor_to_dlpack) whose deleter has not run. */
VDEV_API int vdev_dlpack_live_exports(void);

#ifdef __cplusplus
}
#endif

/* ==== checkpoints =========================================================
 * vdev_checkpoint_save / _load / _metadata / _open: named tensors in one
 * safetensors file, written atomically, in vdev/checkpoint.h. */
#include "vdev/checkpoint.h"

#include "vdev/govern.h" /* floors, ceilings, priorities, limits at run time */

#include "vdev/nn.h" /* optimizers' hyperparameters changed between updates */

/* ==== data parallel: collectives and the mirrored strategy ================
 * Communicators (vdev_comm_*: all-reduce, broadcast, all-gather, barrier over
 * logical devices) and tf.distribute.MirroredStrategy (vdev_strategy_*,
 * vdev_replica_*), in vdev/distribute.h, part of this header. */
#include "vdev/distribute.h"

/* ==== across processes: the cluster, multi-worker and parameter servers ===
 * vdev_cluster_task, vdev_multi_worker_mirrored_strategy_new and the
 * parameter-server strategy (vdev_ps_*), over MPI, in vdev/multiworker.h. */
#include "vdev/multiworker.h"

#endif /* VDEV_H */
