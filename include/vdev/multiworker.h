/* vdev/multiworker.h — training across processes: the cluster a process
 * belongs to, TensorFlow's MultiWorkerMirroredStrategy and
 * ParameterServerStrategy over MPI. Part of the public API: vdev.h includes
 * it, and it may be included alone (it includes the parts it builds on).
 *
 * Processes ("tasks") are MPI processes launched by mpirun; vdev loads its
 * MPI plugin (libvdev-mpi.so, built where CMake finds MPI) on first use, so
 * the library itself never links MPI and runs where there is none (the
 * calls below then fail with VDEV_ERR_UNSUPPORTED "MPI plugin: ...").
 *
 * The cluster. VDEV_CLUSTER_CONFIG=FILE names a JSON file that gives each
 * task its device configuration before start-up, in the syntax of the
 * environment variables, and the cluster's jobs (TensorFlow's ClusterSpec):
 *
 *     {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]},
 *      "default": {"memory_growth": "true"},
 *      "tasks": {"worker:0": {"logical_devices": "0:2GiB"},
 *                "worker:1": {"logical_devices": "0:1GiB"}}}
 *
 * Keys of an entry: visible_devices, memory_growth, logical_devices (floors,
 * ceilings and priorities included), memory_fraction, sim_gpus; each
 * replaces its variable (VDEV_VISIBLE_DEVICES, ...) for that task. TF_CONFIG
 * ({"cluster": ..., "task": {"type": "worker", "index": 1}}) is read for the
 * roles. Without TF_CONFIG's task, the process at MPI rank r is the r-th
 * task counting the chief, then the workers, then the ps tasks; without a
 * cluster every process of the launch is a worker. Every process checks
 * every entry before start-up, so a malformed one fails start-up on every
 * process with the same message, naming the task and the key. A process's
 * devices are named after its task ("/job:worker/replica:0/task:1/device:GPU:0"),
 * in out-of-memory messages too.
 *
 * Waiting. A process that waits for another (in a collective, for a
 * parameter server's answer) gives up after VDEV_MPI_TIMEOUT seconds
 * (default 300) with an error naming whom it waited for. Not covered: MPI's
 * start-up (MPI_Init_thread, in the first strategy across processes), which
 * waits for every process of the launch with no deadline (MPI offers none):
 * a process slow to make its strategy keeps the others waiting there (bound
 * it with mpirun's --timeout). A process that dies
 * ends the job at once (mpirun ends the others). After a failure across
 * processes MPI cannot go on: the job ends when the process exits (vdev
 * calls MPI_Abort then), so a program prints the error and exits. */
#ifndef VDEV_VDEV_MULTIWORKER_H
#define VDEV_VDEV_MULTIWORKER_H

#include "distribute.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== the cluster ========================================================= */

/* This process's task (TensorFlow's cluster_resolver.task_type / task_id). */
struct vdev_cluster_task {
    char type[16];             /* "chief", "worker", "ps"; "localhost" without a cluster */
    int index;                 /* its index among the tasks of its type */
    char name[64];             /* "/job:worker/replica:0/task:1" */
    int num_chief, num_workers, num_ps; /* tasks of each type (0 without a cluster) */
    bool is_chief;             /* the chief; worker 0 when there is none; a lone process */
};

/* Reads the cluster (VDEV_CLUSTER_CONFIG, TF_CONFIG, the launcher's rank)
 * without starting the runtime. VDEV_ERR_CONFIG (VDEV_ERR_NOT_FOUND or
 * VDEV_ERR_IO for the file itself) with the message of a malformed entry. */
VDEV_API enum vdev_status vdev_cluster_task(struct vdev_cluster_task *out);

/* ==== multi-worker mirrored training ======================================
 *
 * tf.distribute.MultiWorkerMirroredStrategy: every worker (each process of
 * the job, chief included; no ps tasks) holds replicas on its own logical
 * devices, and every replica of every worker runs each step on its rows of
 * the global batch. The strategy is a mirrored strategy (vdev/distribute.h)
 * whose communicator spans the workers: an all-reduce adds the gradients of
 * a worker's replicas on its devices (vdev's ring), then across workers
 * (MPI_Allreduce of host memory: Open MPI is not CUDA-aware), then hands the
 * sum to every local replica; every replica then applies the same update.
 *
 * Every worker calls the same functions in the same order: making the
 * strategy, vdev_strategy_run (each run ends with every worker agreeing on
 * how it went: a replica's failure on one worker fails the run on all, with
 * that replica's message), vdev_strategy_reduce (across workers).
 *  - vdev_replica_id is the global id (worker w's replicas follow worker
 *    w-1's); vdev_strategy_num_replicas_in_sync counts every worker's;
 *    vdev_replica_batch takes the replica's rows of the global batch (every
 *    worker passes the same global batch); compute_average_loss divides by
 *    the global batch. With several workers vdev_replica_batch is a
 *    collective (every replica calls it as often, in the same order as its
 *    other collectives): the replicas compare the batch's rows, and
 *    batches of different sizes fail it on every replica of every worker,
 *    VDEV_ERR_INVALID_ARG "vdev_replica_batch: worker 0 (<task>) passes a
 *    global batch of 64 rows but worker 1 (<task>) one of 50 rows; every
 *    worker passes the same global batch ..." (a replica's unusable batch,
 *    a NULL or 0-d one, fails it on every replica too, with its message);
 *    so do batch proportions that differ between workers (rows would go to
 *    no replica or to two: "... rows 24-31 would go to no replica ...");
 *  - collectives compare op, dtypes and shapes across workers as across
 *    replicas; vdev_strategy_reduce refuses another op, or values of
 *    another shape (VDEV_ERR_SHAPE, as in one process: "replica 2's value is
 *    float of shape[3,2] but replica 0's is float of shape[2,3] (...)");
 *  - vdev_replica_broadcast(ctx, vars, n, 0) makes every replica of every
 *    worker hold replica 0's values (the chief's, as TensorFlow);
 *  - vdev_strategy_run's results, vdev_strategy_device and the memory calls
 *    take this worker's replicas, 0..vdev_strategy_num_local_replicas - 1.
 * Results equal a mirrored strategy's over as many devices in one process,
 * on the same global batch: the same bits where the sums are added in the
 * same order (two workers of one replica each), else within float rounding
 * (README, "Multi-worker training").
 *
 * Checkpoints: the chief saves (vdev_cluster_task's is_chief), every worker
 * restores the file, then broadcasts replica 0's values as after building. */

/* A multi-worker mirrored strategy over this worker's n logical devices (or
 * devices NULL, n 0: every logical GPU, else CPU:0). Collective: every
 * process of the job calls it. Starts MPI (through the plugin) and the
 * runtime. A worker's own error (a device it does not have) fails the call
 * on every worker, "worker 1 (/job:worker/replica:0/task:1): ..."; a cluster
 * with ps tasks is VDEV_ERR_CONFIG, and so, on every process, are a job
 * whose number of processes is not the cluster's number of tasks ("the job
 * has 2 processes, the cluster 4 tasks; launch one process per task") and
 * two processes that are the same task (given the same TF_CONFIG: "two
 * processes are /job:worker/replica:0/task:0 (ranks 0 and 1); ..."), and a
 * chief that is not MPI rank 0 (replica 0, a broadcast's root, is rank 0's;
 * it must be the chief's, as in TensorFlow). Otherwise the errors of
 * vdev_mirrored_strategy_new, and VDEV_ERR_UNSUPPORTED without the MPI
 * plugin. */
VDEV_API enum vdev_status vdev_multi_worker_mirrored_strategy_new(const char *const *devices,
                                                                  int n, vdev_strategy_t **out);
/* This worker's replicas (num_replicas_in_sync for a one-process mirrored
 * strategy); -1 for a bad handle. */
VDEV_API int vdev_strategy_num_local_replicas(const vdev_strategy_t *s);

/* ==== parameter servers ===================================================
 *
 * tf.distribute.ParameterServerStrategy with its ClusterCoordinator: tasks
 * of type ps hold the variables, partitioned by bytes across the servers so
 * that each carries an equal share of the updates; workers run the step
 * functions the chief schedules, each on its own device: pull the
 * variables' current values, compute gradients, push them to the servers
 * that own them; every server applies the optimizer to its shards as pushes
 * arrive (asynchronously), optionally bounding staleness. All messages are
 * MPI point-to-point.
 *
 *     TensorFlow                                   vdev (every process runs the program)
 *     ParameterServerStrategy(cluster_resolver)     vdev_ps_strategy_new(&opts, &s)
 *     with strategy.scope(): model = ...            vdev_ps_strategy_add_variables(s, vars, n)
 *     coordinator = ClusterCoordinator(strategy)    (the chief; vdev_cluster_task)
 *     server.join() on workers and ps               vdev_ps_strategy_serve(s, step_fn, arg)
 *     coordinator.schedule(step_fn, args=(k,))      vdev_ps_schedule(s, k, &remote)
 *     coordinator.join()                            vdev_ps_join(s)
 *     remote_value.fetch()                          vdev_ps_fetch(s, remote, &loss)
 *     optimizer.apply_gradients in step_fn          vdev_ps_worker_push(w, grads, n)
 *
 * Staleness: with max_staleness k >= 0 the step scheduled k-th waits, before
 * it pulls, until every step scheduled before k - max_staleness has been
 * applied on every server; 0 makes the steps apply one after the other as
 * scheduled (the same result as one process training on the same batches).
 * -1 leaves it unbounded (asynchronous training). Above 0, or unbounded, the
 * servers apply pushes in the order they arrive, so two runs may differ in
 * their bits: the determinism switch (vdev/config.h) does not cover it. */

typedef struct vdev_ps_strategy vdev_ps_strategy_t;
typedef struct vdev_ps_worker vdev_ps_worker_t;

enum vdev_ps_optimizer { VDEV_PS_SGD = 0, VDEV_PS_ADAM, VDEV_PS_OPTIMIZER_COUNT };

struct vdev_ps_options {
    enum vdev_ps_optimizer optimizer; /* what the servers apply */
    float learning_rate;
    float momentum;                   /* SGD */
    float beta1, beta2, epsilon;      /* Adam; all 0: TensorFlow's 0.9, 0.999, 1e-7 */
    int max_staleness;                /* -1 unbounded, else >= 0 (see above) */
    const char *worker_device;        /* a worker's device; NULL: GPU:0, else CPU:0 */
    const char *server_device;        /* where a server keeps its shards; NULL: CPU:0 */
};

/* How the variables are spread over one server. */
struct vdev_ps_shard_info {
    uint64_t bytes;                   /* of variables it holds */
    int n_shards;                     /* pieces of variables it holds */
    uint64_t updates;                 /* pushes applied so far (known on the server, and on
                                         the chief after vdev_ps_join) */
};

/* A step function: runs on a worker, with the variables' current values in
 * the worker's copies (those given to add_variables), for the step
 * argument the chief scheduled. It computes gradients and calls
 * vdev_ps_worker_push once, optionally vdev_ps_worker_return. */
typedef enum vdev_status (*vdev_ps_step_fn)(vdev_ps_worker_t *w, int64_t step, void *user);

/* Collective: every process of the job (one chief, at least one worker and
 * one ps task in the cluster) calls it. VDEV_ERR_INVALID_ARG for bad
 * options; VDEV_ERR_CONFIG for a cluster without those tasks, and on every
 * process for processes that read different clusters, another number of
 * processes than tasks, or two processes given one task; the errors of the
 * MPI plugin. Free with vdev_ps_strategy_free (every process). */
VDEV_API enum vdev_status vdev_ps_strategy_new(const struct vdev_ps_options *opts,
                                               vdev_ps_strategy_t **out);
/* On the chief, tells every worker and server to stop serving; then frees.
 * NULL is a no-op. */
VDEV_API void vdev_ps_strategy_free(vdev_ps_strategy_t *s);
/* Collective: the model's variables, the same shapes in the same order on
 * every process (each process builds the model; the chief's values are the
 * initial ones). The strategy keeps the handles: the chief's and the
 * workers' tensors receive values on pulls (vdev_ps_pull, each step), and
 * must live until vdev_ps_strategy_free. Partitions them over the servers:
 * each variable's bytes are cut so that every server holds the same share
 * within 4 bytes. Once per strategy. */
VDEV_API enum vdev_status vdev_ps_strategy_add_variables(vdev_ps_strategy_t *s,
                                                         vdev_tensor_t *const *vars, int n);
/* Workers and servers: serves until the chief frees the strategy (VDEV_OK),
 * or a failure. fn runs the steps on a worker (servers ignore it). */
VDEV_API enum vdev_status vdev_ps_strategy_serve(vdev_ps_strategy_t *s, vdev_ps_step_fn fn,
                                                 void *user);

/* Chief: schedules a step with this argument on the next idle worker and
 * returns at once with its id (a RemoteValue's). Blocks while every worker
 * is busy, until one is free. A step that failed since a join or schedule
 * last returned an error makes it return that error instead, scheduling
 * nothing (*id -1), and clears the errors collected so far (TensorFlow's
 * ClusterCoordinator.schedule). */
VDEV_API enum vdev_status vdev_ps_schedule(vdev_ps_strategy_t *s, int64_t step, int64_t *id);
/* Chief: waits until every scheduled step has finished. The first step to
 * fail since a join or schedule last returned an error makes join return
 * that error ("step 12 on worker 1 (/job:worker/replica:0/task:1): ..."),
 * once every other step has ended, and clears the errors collected so far
 * (TensorFlow's ClusterCoordinator.join). */
VDEV_API enum vdev_status vdev_ps_join(vdev_ps_strategy_t *s);
/* Chief: the value a finished step returned (vdev_ps_worker_return; NaN
 * when it returned none). VDEV_ERR_NOT_FOUND for an id not scheduled or not
 * finished. */
VDEV_API enum vdev_status vdev_ps_fetch(vdev_ps_strategy_t *s, int64_t id, float *value);
/* Chief: copies the servers' current values into its own variables, once
 * every server has applied the steps the chief has seen finish (after
 * vdev_ps_join: every step scheduled). */
VDEV_API enum vdev_status vdev_ps_pull(vdev_ps_strategy_t *s);
/* Any process after add_variables: server i's share (0..num_ps-1). */
VDEV_API enum vdev_status vdev_ps_shard_info(const vdev_ps_strategy_t *s, int server,
                                             struct vdev_ps_shard_info *out);
/* The largest server's bytes over the smallest's (1.0: even); -1 on error. */
VDEV_API double vdev_ps_balance(const vdev_ps_strategy_t *s);

/* ---- in a step function ---- */

/* The gradients of the variables (the same order and shapes), on any
 * device: sent to the servers that own them, which apply the optimizer. */
VDEV_API enum vdev_status vdev_ps_worker_push(vdev_ps_worker_t *w, vdev_tensor_t *const *grads,
                                              int n);
/* The step's value for the chief's vdev_ps_fetch (a loss). */
VDEV_API enum vdev_status vdev_ps_worker_return(vdev_ps_worker_t *w, float value);
/* This worker's index among the workers (-1 on error). */
VDEV_API int vdev_ps_worker_index(const vdev_ps_worker_t *w);

#ifdef __cplusplus
}
#endif
#endif /* VDEV_VDEV_MULTIWORKER_H */
