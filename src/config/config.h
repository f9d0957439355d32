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
#define VDEV_MAX_LOGICAL_CPUS 16
/* Logical devices in all, CPUs and GPUs together. */
#define VDEV_MAX_LOGICAL_DEVICES (1 + VDEV_MAX_GPUS * 2)

/* One logical device of the plan. */
struct vdev_plan_device {
    int physical;                 /* physical GPU index */
    uint64_t limit_bytes;         /* its ceiling */
    uint64_t floor_bytes;         /* guaranteed to it (governance); <= limit_bytes */
    enum vdev_priority priority;  /* LOW..CRITICAL */
    enum vdev_memory_policy policy;
    int is_split;                 /* carved out by a logical-device configuration */
};

struct vdev_plan {
    struct vdev_backend *cpu;     /* the CPU backend */
    struct vdev_backend *gpu;     /* the GPU backend, or NULL */
    uint64_t cpu_limit_bytes;     /* each logical CPU's limit: the host's memory */
    int n_cpus;                   /* logical CPUs, at least 1 (/device:CPU:0..n_cpus-1) */
    int n_devices;                /* logical GPUs */
    struct vdev_plan_device devices[VDEV_MAX_GPUS * 2];
    uint64_t card_budget[VDEV_MAX_GPUS]; /* per physical GPU in use: what its logical
                                            devices share */
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
/* In a child forked from a process whose runtime ran (the runtime's fork
 * handler calls it with that process's id): every change of the frozen
 * configuration then fails as vdev_config_forked_error(fn) does. */
void vdev_config_forked(long parent);
/* VDEV_ERR_UNSUPPORTED "fn: vdev was started in process N, from which this
 * process was forked; ..." with the advice (start vdev after fork(), or
 * spawn); the runtime's refusals in such a child use it too. */
enum vdev_status vdev_config_forked_error(const char *fn);
/* Undoes vdev_config_freeze() when start-up fails after it. */
void vdev_config_unfreeze(void);

/* Parses a boolean env value: true/false in any case, or 1/0. */
enum vdev_status vdev_config_parse_bool(const char *var, const char *value, int *out);

/* Parses a size as vdev_parse_bytes() does ("4GiB", "1.5GiB", "2e6") and
 * refuses one that is not a whole number of bytes once its unit is applied
 * ("256.9", "0.1KiB"). VDEV_OK, or VDEV_ERR_PARSE with *not_whole set to 1
 * when the text is a size but not a whole number of bytes, 0 when it is not
 * a size at all. The caller writes the message. */
enum vdev_status vdev_config_parse_size(const char *text, uint64_t *out, int *not_whole);

/* Parses a comma-separated list of logical devices of one GPU, in the form
 * of VDEV_LOGICAL_DEVICES: each "LIMIT" (floor and ceiling), "FLOOR..CEILING",
 * "..CEILING", "FLOOR.." (ceiling: the card's budget) or "..", optionally
 * followed by "@low", "@normal", "@high" or "@critical". `list` is modified.
 * Errors (VDEV_ERR_CONFIG) read "<var>="<v>": <what is wrong> for GPU <gpu>",
 * naming the bad part. Fills at most VDEV_MAX_LOGICAL_PER_GPU entries. */
enum vdev_status vdev_config_parse_split(const char *var, const char *v, char *list, long gpu,
                                         struct vdev_logical_device_config *out, int *n);

/* ---- determinism (determinism.c) ---- */

/* 1 when ops and collectives must give the same bits run to run. Cheap:
 * one relaxed atomic load, for kernels to call. */
int vdev_deterministic(void);
/* Reads VDEV_DETERMINISTIC where code has not set the switch (vdev_init);
 * VDEV_ERR_CONFIG on a malformed value. */
enum vdev_status vdev_config_determinism_init_env(void);
/* Back to the default (vdev_shutdown). */
void vdev_config_determinism_forget(void);

/* ---- environment variables ---- */

/* One variable vdev reads. */
struct vdev_envvar {
    const char *name;             /* "VDEV_MEMORY_GROWTH" */
    const char *values;           /* what it takes, one line: "true/false (any case), 1/0, ..." */
    const char *description;      /* what it does, one line */
};
/* The table of every environment variable vdev reads, in the order the
 * README lists them (static storage; *n may be NULL). For help texts. */
const struct vdev_envvar *vdev_config_envvars(int *n);

/* ---- device names ---- */

struct vdev_device_name {
    enum vdev_device_type type;
    int index;                    /* -1 when the name has none */
    int has_index;                /* 0 for "GPU", "/gpu", "/device:GPU", "GPU:*" */
    int physical;                 /* "/physical_device:..." */
    int no_device;                /* vdev_parse_scope_name: "" or a job/replica/task alone */
    int logical_form;             /* a "device:" field, or a job, replica or task */
};
/* Parses every form TensorFlow accepts: "/device:GPU:1", "GPU:1", "gpu:1",
 * "/gpu:1", "/job:localhost/replica:0/task:0/device:GPU:1",
 * "/physical_device:GPU:1", and a type without an index ("GPU", "/gpu",
 * "/device:GPU", "GPU:*"; has_index 0), which only device scopes accept.
 * "*" leaves a job, replica or task unspecified. VDEV_ERR_INVALID_ARG with
 * TensorFlow's message for a malformed name (a job name starts with a
 * letter); VDEV_ERR_NOT_FOUND for another job/replica/task. */
enum vdev_status vdev_parse_device_name(const char *text, struct vdev_device_name *out);
/* As vdev_parse_device_name, for a device scope: also takes a name that
 * gives no device ("", or a job, replica or task alone, "/job:localhost"),
 * with no_device set, which tf.device merges into the enclosing scope; its
 * job, replica and task are checked as any name's. */
enum vdev_status vdev_parse_scope_name(const char *text, struct vdev_device_name *out);

/* ---- the cluster (cluster.c) ---- */

/* The jobs of a cluster (TensorFlow's task types); LOCAL: no cluster. */
enum vdev_cluster_job { VDEV_JOB_LOCAL = -1, VDEV_JOB_CHIEF = 0, VDEV_JOB_WORKER, VDEV_JOB_PS,
                        VDEV_JOB_COUNT };

/* What the cluster says of this process. */
struct vdev_cluster_view {
    int job;                      /* enum vdev_cluster_job */
    int index;                    /* its task index in the job */
    int n[VDEV_JOB_COUNT];        /* tasks of each job (0 without a cluster) */
    char name[64];                /* "/job:worker/replica:0/task:1", "/job:localhost/..." */
};

/* Reads VDEV_CLUSTER_CONFIG and TF_CONFIG (discovery, with the
 * configuration's lock held): VDEV_ERR_CONFIG (or IO, NOT_FOUND for a
 * missing file) naming the file, the task and the key of a bad entry. */
enum vdev_status vdev_cluster_load(void);
/* Back to no cluster (vdev_config_reset). */
void vdev_cluster_forget(void);
void vdev_cluster_get(struct vdev_cluster_view *out);
/* "chief", "worker", "ps"; "localhost" for VDEV_JOB_LOCAL. */
const char *vdev_cluster_job_name(int job);
/* getenv(var), or this task's value of it from the cluster file (NULL for a
 * variable that the file's value hides: TF_FORCE_GPU_ALLOW_GROWTH under
 * memory_growth). The configuration reads its variables through this. */
const char *vdev_config_getenv(const char *var);
/* How messages name var: "VDEV_LOGICAL_DEVICES", or
 * "VDEV_CLUSTER_CONFIG=FILE: worker:1: logical_devices" when the value is
 * the cluster file's. Writes into buf and returns it. */
const char *vdev_config_var_label(const char *var, char *buf, size_t cap);

#endif /* VDEV_CONFIG_H */
