/* internal.h — what the files of the configuration layer share, and nothing
 * outside it includes: the one state struct (guarded by its mutex), the
 * configuration that code and environment resolve to, and the environment
 * parsers.
 *
 * config.c owns the state and the calls of vdev_config_*; env.c parses each
 * variable; plan.c merges code and environment (code wins) and turns the
 * result into the start-up plan; envvars.c holds the table of every variable
 * vdev reads and warns about look-alikes. */
#ifndef VDEV_CONFIG_INTERNAL_H
#define VDEV_CONFIG_INTERNAL_H

#include "config/config.h"

/* What is asked of one physical GPU. */
struct vdev_gpu_cfg {
    int growth;                   /* -1 unset, 0 off, 1 on */
    int n_logical;                /* 0: not split */
    uint64_t limits[VDEV_MAX_LOGICAL_PER_GPU]; /* ceilings; 0: the card's budget */
    uint64_t floors[VDEV_MAX_LOGICAL_PER_GPU]; /* a plain limit is its own floor */
    enum vdev_priority prios[VDEV_MAX_LOGICAL_PER_GPU]; /* never DEFAULT */
    double fraction;              /* 0: none */
    /* Code's settings only: code set the split (n_logical 0 included: no
     * split) or the fraction (0 included: none), which the environment then
     * does not override. */
    int split_set;
    int fraction_set;
};

struct vdev_config_state {
    pthread_mutex_t lock;
    int discovered;
    int frozen;
    struct vdev_backend cpu;
    struct vdev_backend gpu;      /* ops NULL when there are no GPUs */
    int n_gpus;
    char absence[256];
    /* What code asked for. */
    struct vdev_gpu_cfg gpus[VDEV_MAX_GPUS];
    int visible_set;
    int n_visible;
    int visible[VDEV_MAX_GPUS];   /* as given */
    int n_cpus;                   /* logical CPUs asked for (0: not split) */
    int cpus_set;                 /* code set n_cpus */
    /* What start-up put in force, from code, environment and defaults (valid
     * while frozen): a later call that repeats it is a no-op, as TensorFlow
     * allows, even where the value came from the environment. growth is 0 or
     * 1 here; fraction 0 means none; n_cpus is at least 1. */
    struct vdev_gpu_cfg eff[VDEV_MAX_GPUS];
    int eff_n_visible;
    int eff_visible[VDEV_MAX_GPUS];
    int eff_n_cpus;
    uint64_t eff_budget[VDEV_MAX_GPUS]; /* each visible GPU's budget (ceilings of 0 mean it) */
};

/* The layer's state. Every field is read and written with `lock` held,
 * except the backends and n_gpus, which discovery sets once. */
struct vdev_config_state *vdev_config_state(void);

/* The configuration code and environment resolve to, before budgets. */
struct vdev_config_resolved {
    struct vdev_gpu_cfg gpu[VDEV_MAX_GPUS]; /* growth 0/1, fraction, split */
    int n_visible;
    int visible[VDEV_MAX_GPUS];   /* as given (code or VDEV_VISIBLE_DEVICES) */
    int order[VDEV_MAX_GPUS];     /* the visible GPUs in the order they are numbered */
    int n_cpus;                   /* >= 1 */
    int min_sys_set;              /* TF_DEVICE_MIN_SYS_MEMORY_IN_MB is set */
    uint64_t min_sys;             /* its value in bytes */
    int split_from_env[VDEV_MAX_GPUS]; /* the GPU's split is VDEV_LOGICAL_DEVICES's */
    /* What code's settings override (start-up warns, as TensorFlow does when
     * TF_FORCE_GPU_ALLOW_GROWTH overrides code): the environment's growth per
     * GPU (-1: none), its fraction (when env_fraction_set) and whether it
     * splits the GPU. */
    int env_growth[VDEV_MAX_GPUS];
    int env_fraction_set;
    double env_fraction;
    int env_split[VDEV_MAX_GPUS];
};
/* Reads the environment (every variable validated, even where code
 * overrides it) and merges it with what code asked for. Lock held. */
enum vdev_status vdev_config_resolve_locked(struct vdev_config_resolved *r);

/* ---- environment parsers (env.c); each names the variable on error ---- */

/* VDEV_MEMORY_GROWTH: growth[i] = 0/1 for each GPU it names, -1 elsewhere. */
enum vdev_status vdev_env_growth(const char *var, const char *v, int n_gpus,
                                 int growth[VDEV_MAX_GPUS]);
/* VDEV_MEMORY_FRACTION and its alias: a decimal in [0, 1] (0: no fraction). */
enum vdev_status vdev_env_fraction(const char *var, const char *v, double *out);
/* VDEV_LOGICAL_DEVICES: per GPU floors, ceilings and priorities into cfg[]
 * (set[] marks the GPUs it names), and "cpu:N" into *n_cpus (0 when absent). */
enum vdev_status vdev_env_logical(const char *var, const char *v, int n_gpus,
                                  struct vdev_gpu_cfg *cfg, int set[VDEV_MAX_GPUS], int *n_cpus);
/* VDEV_VISIBLE_DEVICES: GPU indices in the order given. */
enum vdev_status vdev_env_visible(const char *var, const char *v, int n_gpus, int *vis,
                                  int *n_out);
/* TF_DEVICE_MIN_SYS_MEMORY_IN_MB: *set 0 when unset. */
enum vdev_status vdev_env_min_sys(uint64_t *out, int *set);

/* A GPU's budget under a fraction: total × fraction, rounded down to 256. */
uint64_t vdev_config_fraction_budget(uint64_t total, double fraction);
/* The smallest fraction of `total` whose budget is 1 MiB, rounded up to two
 * significant digits and written as a plain decimal ("0.000062"). */
void vdev_config_min_fraction(uint64_t total, char *out, size_t cap);

/* Start-up's warnings about misspelt variables (envvars.c). */
void vdev_config_warn_unknown_env(void);

#endif /* VDEV_CONFIG_INTERNAL_H */
