/* common.h — what the two examples across processes share: the model (an
 * MLP regression, 8 -> 32 -> 1, ReLU) and a batch of it made on the host
 * from a seed (x uniform in [-1, 1], y = x0 * x1 - 0.5 x2 + 0.25), so every
 * process makes the same batch for the same step; the command line (--help
 * only, which says how to start the job with mpirun) and the report of a
 * failure (vdev's message led by the task's name once, and for a process
 * started alone, without a cluster, how to start the job). Written with the
 * public header alone. */
#ifndef VDEV_EXAMPLES_MPI_COMMON_H
#define VDEV_EXAMPLES_MPI_COMMON_H

#include "vdev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An example: its program path (argv[0]), what it does (the usage's
 * paragraph) and how the README starts its job (processes, cluster file). */
struct ex_job {
    const char *prog, *about, *cluster;
    int np;
};

static inline const char *ex_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static inline void ex_usage(FILE *f, const struct ex_job *j)
{
    fprintf(f,
            "usage: %s\n\n%s\n\nRun it under mpirun, one process per task of the cluster file "
            "(from the\nsource tree):\n\n  mpirun -np %d env VDEV_CLUSTER_CONFIG=%s %s\n",
            ex_base(j->prog), j->about, j->np, j->cluster, j->prog);
}

/* The command line: --help (-h) prints the usage, exit status 0; anything
 * else is refused, status 2. -1: go on. */
static inline int ex_options(int argc, char **argv, const struct ex_job *j)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            ex_usage(stdout, j);
            return 0;
        }
        fprintf(stderr, "%s: unknown option '%s'\n\n", ex_base(j->prog), argv[i]);
        ex_usage(stderr, j);
        return 2;
    }
    return -1;
}

/* A failure of task t (NULL before the task is known), after `what` (NULL:
 * nothing) when it is given: vdev's last message, led by the task's name
 * unless the message names the task already (vdev's messages across
 * processes do); a process started alone (no cluster: a "localhost" task) is
 * told how to start the job. Returns the exit status, 1. */
static inline int ex_fail(const struct ex_job *j, const struct vdev_cluster_task *t,
                          const char *what)
{
    const char *msg = vdev_last_error();
    if (t && !strstr(msg, t->name))
        fprintf(stderr, "%s: ", t->name);
    if (what)
        fprintf(stderr, "%s: ", what);
    fprintf(stderr, "%s\n", msg);
    if (t && !strcmp(t->type, "localhost"))
        fprintf(stderr,
                "%s: started alone, without a cluster; run it under mpirun with "
                "VDEV_CLUSTER_CONFIG:\n  mpirun -np %d env VDEV_CLUSTER_CONFIG=%s %s\n",
                ex_base(j->prog), j->np, j->cluster, j->prog);
    return 1;
}

#define EX_IN 8
#define EX_NV 4 /* W0, b0, W1, b1 */

static const int64_t ex_sizes[3] = {EX_IN, 32, 1};

/* rows x EX_IN inputs and rows x 1 targets on CPU:0 (the caller's, or the
 * enclosing scope's); 0 on success. */
static inline int ex_batch(int64_t rows, uint64_t seed, vdev_tensor_t **x, vdev_tensor_t **y)
{
    float *xs = malloc((size_t)rows * EX_IN * sizeof *xs), *ys = malloc((size_t)rows * sizeof *ys);
    if (!xs || !ys) {
        free(xs);
        free(ys);
        return 1;
    }
    uint64_t z = seed * 2654435761u + 7;
    for (int64_t i = 0; i < rows * EX_IN; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (float)((double)(z >> 11) / 9007199254740992.0 * 2 - 1);
    }
    for (int64_t i = 0; i < rows; i++)
        ys[i] = xs[i * EX_IN] * xs[i * EX_IN + 1] - 0.5f * xs[i * EX_IN + 2] + 0.25f;
    int64_t xshape[2] = {rows, EX_IN}, yshape[2] = {rows, 1};
    vdev_device_push("CPU:0");
    *x = vdev_tensor_from_host(xs, xshape, 2, VDEV_F32);
    *y = vdev_tensor_from_host(ys, yshape, 2, VDEV_F32);
    vdev_device_pop();
    free(xs);
    free(ys);
    return *x && *y ? 0 : 1;
}

/* Per-example squared error of the model on x, y: [rows]. */
static inline vdev_tensor_t *ex_loss_rows(vdev_mlp_t *mlp, const vdev_tensor_t *x,
                                          const vdev_tensor_t *y)
{
    vdev_tensor_t *d = vdev_sub(vdev_mlp_forward(mlp, x), y);
    return vdev_mean(vdev_mul(d, d), 1, false);
}

#endif
