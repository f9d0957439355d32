/* multiworker.c — tf.distribute.MultiWorkerMirroredStrategy
 * (vdev/multiworker.h): the mirrored strategy of mirrored.c over this
 * worker's devices, with a communicator that spans every worker of the job
 * (coll/hier.h) instead of the ring alone.
 *
 * Making one is collective: each worker checks its own arguments and
 * devices, then every worker takes part in making the communicator with its
 * status, so a worker's bad argument fails the call on every worker (with
 * its name) instead of leaving the others waiting for it. Roles come from
 * the cluster (config/cluster.c): every task must be a chief or a worker. */
#define _GNU_SOURCE
#include "dist/strategy.h"

#include "coll/hier.h"

#include <string.h>

VDEV_API enum vdev_status vdev_multi_worker_mirrored_strategy_new(const char *const *devices,
                                                                  int n, vdev_strategy_t **out)
{
    const char *fn = "vdev_multi_worker_mirrored_strategy_new";
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    enum vdev_status status = VDEV_OK;
    char why[512] = "";
    struct vdev_ldev *devs[VDEV_MAX_REPLICAS];
    int n_devs = 0;
    struct vdev_cluster_view cv;
    vdev_cluster_get(&cv);
    if (n < 0 || (n > 0 && !devices)) {
        status = vdev_error(VDEV_ERR_INVALID_ARG, "%s: devices is %s and n %d", fn,
                            devices ? "set" : "NULL", n);
    } else if (n > VDEV_MAX_REPLICAS) {
        status = vdev_error(VDEV_ERR_INVALID_ARG, "%s: %d devices; a worker has at most %d "
                                                  "replicas",
                            fn, n, VDEV_MAX_REPLICAS);
    } else if ((status = vdev_init()) != VDEV_OK) {
        /* The task as start-up read it, unless start-up failed before (a
         * malformed cluster file): then messages name the process alone. */
        vdev_cluster_get(&cv);
        if (cv.job == VDEV_JOB_LOCAL)
            cv.name[0] = '\0';
    } else {
        vdev_cluster_get(&cv); /* start-up read the cluster */
        if (cv.n[VDEV_JOB_PS] > 0) {
            status = vdev_error(VDEV_ERR_CONFIG,
                                "%s: the cluster has %d ps task%s; a multi-worker mirrored "
                                "strategy runs on chief and worker tasks alone (ps tasks are "
                                "for vdev_ps_strategy_new)",
                                fn, cv.n[VDEV_JOB_PS], cv.n[VDEV_JOB_PS] == 1 ? "" : "s");
        } else if (!devices) {
            n_devs = vdev_strat_default_devices(devs);
        } else if (n == 0) {
            status = vdev_error(VDEV_ERR_INVALID_ARG, "Must specify at least one device.");
        } else {
            for (int i = 0; i < n && status == VDEV_OK; i++)
                status = vdev_runtime_find(devices[i], &devs[i]);
            n_devs = n;
        }
    }
    if (status != VDEV_OK) {
        vdev_strlcpy(why, vdev_last_error(), sizeof why);
        n_devs = 0;
    }
    struct vdev_coll_comm *comm;
    /* With a cluster, one process per chief and worker task (ps tasks were
     * refused above); without one, every process of the launch is a worker. */
    int n_tasks = cv.n[VDEV_JOB_CHIEF] + cv.n[VDEV_JOB_WORKER];
    /* The cluster as every process must read it: "a cluster of 1 chief task
     * and 2 worker tasks" (compared across the processes, named in the
     * error). */
    char cluster[96] = "a cluster of ";
    size_t k0 = strlen(cluster), k = k0;
    for (int j = 0; j < VDEV_JOB_COUNT; j++)
        if (cv.n[j] > 0 && k < sizeof cluster)
            k += (size_t)snprintf(cluster + k, sizeof cluster - k, "%s%d %s task%s",
                                  k > k0 ? " and " : "", cv.n[j], vdev_cluster_job_name(j),
                                  cv.n[j] == 1 ? "" : "s");
    if (k == k0)
        vdev_strlcpy(cluster, "no cluster", sizeof cluster);
    enum vdev_status st =
        vdev_coll_hier_make(devs, n_devs, cv.name, n_tasks, cluster, status, why, &comm);
    if (st != VDEV_OK)
        return st;
    return vdev_strat_make(devs, n_devs, comm, out);
}
