/* config.h — what the user asks for before start-up, and the plan it becomes.
 *
 * The configuration layer discovers the physical devices (creating the
 * backends: the host CPU, and either simulated GPUs from VDEV_SIM_GPUS or the
 * GPUs of the CUDA plugin), records the calls of vdev_config_*, and at
 * start-up merges them with the environment into a plan: for every visible
 * GPU, its logical devices with their limits and policy. Code wins over the
 * environment where both speak; a malformed variable is an error that names
 * it. Once the runtime has started, the configuration is frozen.
 */
#ifndef VDEV_CONFIG_H
#define VDEV_CONFIG_H

#include "backend/backend.h"

#define VDEV_MAX_GPUS 64
#define VDEV_MAX_LOGICAL_PER_GPU 16

/* One logical device of the plan. */
struct vdev_plan_device {
    int physical;                 /* physical GPU index */
    uint64_t limit_bytes;
    enum vdev_memory_policy policy;
    int is_split;                 /* carved out by a logical-device configuration */
};

struct vdev_plan {
    struct vdev_backend *cpu;     /* the CPU backend (device 0) */
    struct vdev_backend *gpu;     /* the GPU backend, or NULL */
    uint64_t cpu_limit_bytes;
    int n_devices;                /* logical GPUs */
    struct vdev_plan_device devices[VDEV_MAX_GPUS * 2];
    char alloc_trace_path[1024];  /* VDEV_ALLOC_TRACE, "" if unset */
};

/* Discovers physical devices once (thread-safe); VDEV_ERR_CONFIG for a
 * malformed VDEV_SIM_GPUS. Failure is not cached: fix the variable and retry. */
enum vdev_status vdev_config_discover(void);
/* Number of physical GPUs (after discovery), and the backend serving them. */
int vdev_config_n_gpus(void);
struct vdev_backend *vdev_config_gpu_backend(void);
struct vdev_backend *vdev_config_cpu_backend(void);

/* Budget of a physical GPU: free memory less the driver reserve, as
 * TensorFlow computes it (see reference §2), or total × fraction; rounded
 * down to 256 bytes. TF_DEVICE_MIN_SYS_MEMORY_IN_MB replaces the reserve and
 * overrides the fraction; VDEV_ERR_CONFIG when it is malformed or leaves
 * nothing of the free memory (TensorFlow ignores such a value). */
enum vdev_status vdev_config_gpu_budget(int gpu, double fraction, uint64_t *budget,
                                        uint64_t *free_bytes, uint64_t *reserve);

/* Builds the plan from code and environment and freezes the configuration.
 * Called by vdev_init() with the runtime's lock held. */
enum vdev_status vdev_config_freeze(struct vdev_plan *plan);
/* Back to the unconfigured, undiscovered state (vdev_shutdown). */
void vdev_config_reset(void);
int vdev_config_frozen(void);
/* Undoes vdev_config_freeze() when start-up fails after it. */
void vdev_config_unfreeze(void);

/* Parses a boolean env value: true/false in any case, or 1/0. */
enum vdev_status vdev_config_parse_bool(const char *var, const char *value, int *out);

/* ---- device names ---- */

struct vdev_device_name {
    enum vdev_device_type type;
    int index;
    int physical;                 /* "/physical_device:..." */
};
/* Parses every form TensorFlow accepts: "/device:GPU:1", "GPU:1", "gpu:1",
 * "/gpu:1", "/job:localhost/replica:0/task:0/device:GPU:1", and
 * "/physical_device:GPU:1". VDEV_ERR_INVALID_ARG with TensorFlow's message
 * for a malformed name; VDEV_ERR_NOT_FOUND for another job/replica/task. */
enum vdev_status vdev_parse_device_name(const char *text, struct vdev_device_name *out);

#endif /* VDEV_CONFIG_H */
