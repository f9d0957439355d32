/* vdev/config.h — the physical devices and the configuration made before
 * start-up, then start-up and shutdown: which GPUs are visible, memory
 * growth, logical devices carved out of a card, the per-process memory
 * fraction, soft placement, determinism, how vdev uses the CPU's threads, the
 * details of a card, vdev_init and vdev_shutdown. The floors, ceilings and
 * priorities of logical devices are in vdev/govern.h. Part of the public API:
 * vdev.h includes it, and it may be included alone (it includes the parts it
 * builds on). */
#ifndef VDEV_VDEV_CONFIG_H
#define VDEV_VDEV_CONFIG_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * what is in force is a no-op returning VDEV_OK, as in TensorFlow (memory
 * growth, as TensorFlow: only a repeat of what code set is a no-op; growth
 * never set by code is refused after start-up even when it names the growth
 * in force). */

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
 * tf.config.experimental.get_memory_growth returns what was set. */
VDEV_API enum vdev_status vdev_config_get_memory_growth(const char *physical_device, int *out);
/* Splits a physical device into n logical devices; n == 0 removes the split
 * (one device with the default budget), VDEV_LOGICAL_DEVICES's included.
 *  - A GPU: n logical GPUs with memory limits in bytes, each at least 1 MiB
 *    (TensorFlow's limits are in MiB: a limit below 1 MiB is refused with a
 *    hint, "did you mean 4096MiB"). The limits' sum must fit the card's
 *    budget; that is checked at start-up. At most 16 per GPU
 *    (VDEV_ERR_INVALID_ARG, "64 logical devices requested on GPU:0; at most
 *    16 per GPU"), and at most 128 logical GPUs in all, a GPU left whole
 *    counting as one (checked at start-up, VDEV_ERR_CONFIG
 *    "/physical_device:GPU:8: more than 128 logical GPUs in all"; 129
 *    logical devices in all with the logical CPUs).
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
 * vdev/govern.h. */
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
 * vdev_shutdown() forgets code's setting: the next start-up puts
 * VDEV_DETERMINISTIC's value in force (off where unset). Collectives
 * (vdev/distribute.h) are deterministic whether it is on or not. */
VDEV_API void vdev_config_set_deterministic(bool enable);
VDEV_API bool vdev_config_get_deterministic(void);
/* What the switch constrains in the host kernels (cpu backend, simulated
 * GPUs): only matrix products (MatMul's, and those of Conv2D and its two
 * gradient ops, which go through MatMul's kernel). OpenBLAS's sgemm gives
 * different bits with different thread counts (0.3.21: most elements of a
 * 1000x1000x1000 product differ between 1 and 2 threads), and a block's bits
 * may depend on the block's size, so under the switch a product is cut into
 * blocks fixed by its shape
 * alone (one per 2^24 multiply-adds, at most 16), each one single-threaded
 * OpenBLAS call whichever of vdev's threads runs it: the same calls, so the
 * same bits, whatever OPENBLAS_NUM_THREADS says or how many streams run; a
 * product takes the mode it was submitted in. The budget's threads still
 * share the blocks (BENCHMARKS.md: the MLP 1024-4096-4096-10 step takes
 * 1.02x as long with the switch as without it). The bits differ from those
 * of the same product without the switch. Every other host kernel already
 * gives the same bits whatever the thread count: elementwise kernels (which the
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
 * failed), VDEV_ERR_BACKEND, VDEV_ERR_IO (VDEV_TRACE_FILE cannot be opened
 * for writing: "VDEV_TRACE_FILE=\"<path>\": cannot open for writing: <reason>";
 * or VDEV_METRICS_ADDR's endpoint cannot be started). On failure nothing is
 * started and the call may be retried after fixing the configuration. In a
 * child that fork() made from a process whose runtime had started, it and
 * every use of a tensor fail with VDEV_ERR_UNSUPPORTED (the runtime's
 * threads stayed in the parent): start vdev after fork(), or spawn the child
 * instead. */
VDEV_API enum vdev_status vdev_init(void);
/* Whether the runtime runs: started (vdev_init, or a call that starts it)
 * and not shut down since. Starts nothing. */
VDEV_API bool vdev_is_initialized(void);
/* Frees every device's memory and returns to the unconfigured state (for
 * tests and tools). Not thread-safe with other calls in flight. In a forked
 * child of a started runtime it returns at once, giving nothing back. While
 * a holder of vdev memory (vdev_mem_holder_add: PyTorch's allocator) has
 * live blocks it refuses: nothing changes, and vdev_last_error() says
 * VDEV_ERR_INVALID_ARG "vdev_shutdown: N blocks of ... are live ...". */
VDEV_API void vdev_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_CONFIG_H */
