/* hier.h — the hierarchical communicator: collectives across MPI processes
 * ("workers"), each with its own local ranks (logical devices), served
 * behind the collective interface of coll.h (implementation name "mpi").
 *
 * The ranks of such a communicator are this process's local devices, as for
 * the ring (a rank's thread makes its calls); together the processes hold
 * n_global ranks, worker w's local rank i being global rank first[w] + i.
 * A call:
 *   1. every local rank posts its descriptor and meets the others (a ring
 *      barrier); local rank 0, the leader, checks them against each other;
 *   2. the leader exchanges one record with every other worker (what it
 *      calls, with which shapes, or why it fails), by point-to-point
 *      messages polled against VDEV_MPI_TIMEOUT: a worker that does not come
 *      is named in the error. Every worker reaches the same verdict from the
 *      same records;
 *   3. the local ranks meet again and read the verdict;
 *   4. the data, when the verdict is good: all-reduce = a ring all-reduce
 *      among the local ranks, MPI_Allreduce of the leader's buffers across
 *      workers (in place when the host can read device memory, as on
 *      simulated GPUs and CPUs, else through a host buffer: Open MPI is not
 *      CUDA-aware), then a ring broadcast from the leader; broadcast and
 *      all-gather likewise; barrier is steps 1-3 alone.
 * The leader takes part in the MPI stage whenever the verdict is good, even
 * when its local ranks failed since, so that the workers' MPI calls stay
 * matched; a failure there is reported by the next exchange (a strategy's
 * end of run, vdev_coll_hier_finish_run).
 *
 * Failures across workers: a worker's own failure before the data (a bad
 * tensor, an aborted local rank) fails the call on every worker, the message
 * naming the worker; a worker that does not come within the timeout fails
 * the call everywhere else ("... worker 2 (/job:worker/replica:0/task:2)
 * did not make this call within 3 s ..."); an MPI failure, or a deadline
 * that passes, spends the communicator for good (and MPI for the job:
 * mpi_world.h), unlike a ring's, which a reset revives. */
#ifndef VDEV_COLL_HIER_H
#define VDEV_COLL_HIER_H

#include "coll/coll.h"

/* The origin (coll.h's *origin) of a failure that came from another worker. */
#define VDEV_COLL_ORIGIN_REMOTE (-2)

/* Makes a communicator over this process's devs (n of them) joined with the
 * same call of every other MPI process of the job (collective: every process
 * calls it, in the same order, with its own devices). status/why: this
 * process's own failure so far (VDEV_OK: none), which fails the call on
 * every process ("<task>: <why>"). task: this process's name in messages,
 * "/job:worker/replica:0/task:1". n_tasks: the tasks the cluster names (0:
 * no cluster); cluster: the cluster as messages name it ("1 chief and 2
 * worker tasks", "no cluster"), the same on every process. Processes that
 * read different clusters, a job of another number of processes, or two
 * processes with the same task fail on every process (VDEV_ERR_CONFIG).
 * Starts MPI (mpi_world.h). On success *out is the caller's
 * (vdev_coll_comm_free); its n is the local ranks, n_global and first are
 * set. */
enum vdev_status vdev_coll_hier_make(struct vdev_ldev *const *devs, int n, const char *task,
                                     int n_tasks, const char *cluster, enum vdev_status status,
                                     const char *why, struct vdev_coll_comm **out);

/* The workers of a hierarchical communicator: their number, and worker w's
 * first global rank, number of local ranks and task name. */
int vdev_coll_hier_n_workers(const struct vdev_coll_comm *c);
int vdev_coll_hier_worker(const struct vdev_coll_comm *c); /* this process's index */
int vdev_coll_hier_first(const struct vdev_coll_comm *c, int w);
int vdev_coll_hier_count(const struct vdev_coll_comm *c, int w);
const char *vdev_coll_hier_task(const struct vdev_coll_comm *c, int w);
/* Worker w as messages name it: "worker 1 (/job:worker/replica:0/task:1)",
 * or "process 0 (/job:chief/replica:0/task:0)" where MPI rank w is not worker
 * task w (a cluster with a chief). Into buf. */
const char *vdev_coll_hier_who(const struct vdev_coll_comm *c, int w, char *buf, size_t cap);

/* The end of a run of a strategy, on the thread that ran it, once every
 * local rank's step has returned: every worker says how its run went
 * (status, message; derived: it failed only because another worker did),
 * and all return the same outcome: the lowest worker's own failure, else
 * the lowest worker's derived one, else VDEV_OK. Exchanges go on until
 * every worker has finished its run, so a worker still in a collective
 * learns that this one will not come. The message is set on failure. */
enum vdev_status vdev_coll_hier_finish_run(struct vdev_coll_comm *c, enum vdev_status st,
                                           int derived, const char *msg);

/* An all-reduce (sum) of n host floats across the workers, in place, for
 * the caller's thread outside runs (vdev_strategy_reduce): every worker
 * calls it with the same n. status/why: this worker's own failure, which
 * fails the call on every worker (buf unused then). Errors as a
 * collective's. */
enum vdev_status vdev_coll_hier_host_all_reduce(struct vdev_coll_comm *c, float *buf,
                                                uint64_t n, enum vdev_status status,
                                                const char *why, const char *what);
/* The same with the op and the value's shape (ndim dims; float), which
 * every worker must share: another op (VDEV_ERR_INVALID_ARG) or another
 * shape (VDEV_ERR_SHAPE, worded as one process words replicas' values that
 * differ) fails the call on every worker. The sum is made whatever op (the
 * caller divides for MEAN). ndim -1: shape[0] elements, the shape and op
 * unchecked (vdev_coll_hier_host_all_reduce). */
enum vdev_status vdev_coll_hier_host_reduce(struct vdev_coll_comm *c, enum vdev_reduce_op op,
                                            float *buf, const int64_t *shape, int ndim,
                                            enum vdev_status status, const char *why,
                                            const char *what);

#endif /* VDEV_COLL_HIER_H */
