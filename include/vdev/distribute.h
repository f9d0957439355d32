/* vdev/distribute.h — data parallel training on one machine: collectives over
 * a set of logical devices, and the mirrored strategy (TensorFlow's
 * tf.distribute.MirroredStrategy) built on them. Part of the public API:
 * vdev.h includes it, and it may be included alone (it includes the parts it
 * builds on).
 *
 * Collectives. A communicator is a list of logical devices, its ranks (rank i
 * is devices[i]). Each rank is driven by a host thread of its own, and every
 * rank makes the same collective calls in the same order, as NCCL and MPI
 * ranks do: an all-reduce returns once every rank's part of the work is
 * queued on its device's stream (the host does not wait for the streams), so
 * the result is ready for the next op on the rank's device and is read back
 * with vdev_tensor_to_host like any tensor.
 * vdev's own implementation is a ring (reduce-scatter, then all-gather) over
 * the backend's device-to-device copies, cut into slices so that one rank
 * copies a slice while its neighbour reduces the previous one. It works on
 * simulated GPUs, on logical devices of one card (which NCCL refuses), on
 * logical CPUs and on CUDA GPUs; its staging buffer (at most 1 MiB) is taken
 * on every rank's own device, so no device holds more than another.
 *
 * Determinism: collectives are deterministic whatever the determinism switch
 * says. Each element of an all-reduce is summed in an order fixed by the
 * number of ranks and the element's position (never by timing), so two runs
 * give the same bits and every rank gets the same bits. The order is the
 * ring's, not 0 + 1 + ... + n-1: for n >= 3 the sum can differ in the last
 * bit from a sum in rank order. MEAN divides the sum by n (as TensorFlow's
 * collective all-reduce does), once, before the result is sent around.
 *
 * Failures. A call that fails on one rank fails on every rank, never hangs:
 *  - a problem a rank finds before any data moves (a bad tensor, no memory
 *    for its staging buffer, shapes that differ between ranks) fails that
 *    call on every rank with the same code and message, and changes no
 *    tensor; the communicator stays usable;
 *  - vdev_comm_abort(), a failure while data moves (a backend error) or a
 *    timeout fails the call on every rank and every later call at once
 *    (the communicator is spent: free it and make another); tensors the
 *    failed call was writing hold unspecified values;
 *  - a rank that waits longer than the communicator's timeout (default
 *    VDEV_COMM_DEFAULT_TIMEOUT_S) for another rank fails with
 *    VDEV_ERR_BACKEND, "Collective has timed out waiting for other workers"
 *    naming the call and the rank it waited for.
 * Handles: a communicator is a checked handle; one made before
 * vdev_shutdown() is refused after it. Free a communicator only when no rank
 * is inside a call.
 *
 * Example: every rank's thread runs
 *
 *     vdev_tensor_t *t = ...;   // on the rank's own device, same shape on every rank
 *     if (vdev_comm_all_reduce(comm, rank, &t, 1, VDEV_REDUCE_SUM) != VDEV_OK)
 *         fprintf(stderr, "%s\n", vdev_last_error());   // the same on every rank
 */
#ifndef VDEV_VDEV_DISTRIBUTE_H
#define VDEV_VDEV_DISTRIBUTE_H

#include "devices.h"
#include "nn.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== collectives ========================================================= */

typedef struct vdev_comm vdev_comm_t;

/* tf.distribute.ReduceOp. */
enum vdev_reduce_op { VDEV_REDUCE_SUM = 0, VDEV_REDUCE_MEAN, VDEV_REDUCE_OP_COUNT };

/* Seconds a rank waits for another before the call fails. */
#define VDEV_COMM_DEFAULT_TIMEOUT_S 300.0

/* A communicator over n logical devices (any accepted names; rank i is
 * devices[i]). Starts the runtime. The devices must be distinct (TensorFlow's
 * "No duplicates allowed in `devices` argument: (...)", VDEV_ERR_INVALID_ARG)
 * and served by one backend (a mix of CPUs and GPUs is
 * VDEV_ERR_UNSUPPORTED). VDEV_ERR_INVALID_ARG for n < 1 or NULL arguments
 * ("Must specify at least one device." for n == 0), the errors of device
 * names (VDEV_ERR_NOT_FOUND for a device that does not exist), VDEV_ERR_OOM.
 * *out is NULL on failure. */
VDEV_API enum vdev_status vdev_comm_new(const char *const *devices, int n, vdev_comm_t **out);
/* NULL is a no-op; a dead handle is VDEV_ERR_INVALID_ARG. No rank may be
 * inside a call. */
VDEV_API void vdev_comm_free(vdev_comm_t *comm);
/* The number of ranks, -1 (VDEV_ERR_INVALID_ARG) for a bad handle. */
VDEV_API int vdev_comm_size(const vdev_comm_t *comm);
/* Rank's device, "/device:GPU:1"; NULL (VDEV_ERR_INVALID_ARG) for a bad
 * handle or rank. Valid while the communicator lives. */
VDEV_API const char *vdev_comm_device(const vdev_comm_t *comm, int rank);
/* The implementation serving it: "nccl" (every rank on a CUDA GPU of its
 * own, and NCCL loads) or "ring" (vdev's own, everything else). Static
 * string; NULL for a bad handle. */
VDEV_API const char *vdev_comm_implementation(const vdev_comm_t *comm);
/* How long a rank waits for another (seconds, > 0 and at most 1e9); applies
 * to calls that start after it. VDEV_ERR_INVALID_ARG otherwise (a bad
 * handle; NaN, infinite or out of range: "vdev_comm_set_timeout: 0 seconds
 * (a timeout is > 0 and at most 1e9)"). */
VDEV_API enum vdev_status vdev_comm_set_timeout(vdev_comm_t *comm, double seconds);

/* Every rank passes n tensors of the same shapes, in the same order, f32, on
 * its own device; afterwards each holds, on every rank, the elementwise sum
 * (or mean) of that tensor over the ranks. In place. n may be 0. Errors
 * (every rank gets the same code and message): VDEV_ERR_INVALID_ARG (a bad
 * handle, rank, op or tensor, a tensor not on the rank's device or not f32;
 * "Shape mismatch in the collective instance K. Op at device D expected
 * shape S but another member in the group expected shape S0. ..." as
 * TensorFlow says it, or ranks that passed different counts or ops),
 * VDEV_ERR_OOM (staging memory on some rank: the message names it), and
 * those listed above. */
VDEV_API enum vdev_status vdev_comm_all_reduce(vdev_comm_t *comm, int rank,
                                               vdev_tensor_t *const *tensors, int n,
                                               enum vdev_reduce_op op);
/* Every rank passes n tensors of the same shapes and dtypes (any: f32, i32 or bool) on
 * its own device; afterwards every rank's tensors hold root's values. The
 * copies run in a chain from root, slice by slice. Errors as above. */
VDEV_API enum vdev_status vdev_comm_broadcast(vdev_comm_t *comm, int rank,
                                              vdev_tensor_t *const *tensors, int n, int root);
/* Every rank passes `in` (same shape and dtype on every rank) and `out`
 * whose number of elements is n_ranks times in's, all on its own device;
 * afterwards every rank's out holds rank 0's in, then rank 1's, ... (in
 * row-major order, so an out of shape [n_ranks * rows, cols] stacks them
 * along axis 0, as TensorFlow's all_gather). Errors as above. */
VDEV_API enum vdev_status vdev_comm_all_gather(vdev_comm_t *comm, int rank, const vdev_tensor_t *in,
                                               vdev_tensor_t *out);
/* Returns once every rank has called it (host threads only: it does not wait
 * for the devices' streams). */
VDEV_API enum vdev_status vdev_comm_barrier(vdev_comm_t *comm, int rank);
/* Rank gives up (code: what went wrong, not VDEV_OK; reason: one line, may
 * be NULL): every call in flight on the communicator and every later one
 * fails at once on every rank with `code` and "Collective ops is aborted by:
 * rank R (<device>): <reason>" (TensorFlow's words). For a rank thread that
 * fails before it reaches a collective its peers wait in. */
VDEV_API enum vdev_status vdev_comm_abort(vdev_comm_t *comm, int rank, enum vdev_status code,
                                          const char *reason);

/* ==== the mirrored strategy ===============================================
 *
 * tf.distribute.MirroredStrategy: one replica of the model on each of a list
 * of logical devices. A step runs on every replica at once, each on a host
 * thread of its own (persistent threads, made with the strategy), with that
 * replica's slice of the global batch; the gradients are summed across
 * replicas and every replica applies the same update, so the replicas stay
 * bit-identical.
 *
 * The C form of TensorFlow's custom training loop:
 *
 *     TensorFlow                                  vdev
 *     strategy = tf.distribute.MirroredStrategy()  vdev_mirrored_strategy_new(NULL, 0, &s)
 *     with strategy.scope(): model = ...           vdev_strategy_run(s, build, m, NULL):
 *                                                  each replica builds its copy from the
 *                                                  same seed, then vdev_replica_broadcast
 *     strategy.run(step_fn, args=(x, y))           vdev_strategy_run(s, step, m, losses)
 *     (distributed dataset: the replica's rows)    vdev_replica_batch(ctx, x)
 *     tf.nn.compute_average_loss(per_example)      vdev_replica_compute_average_loss
 *     optimizer.apply_gradients(zip(g, v))         vdev_replica_apply_gradients
 *     strategy.reduce(ReduceOp.SUM, losses, None)  vdev_strategy_reduce(s, VDEV_REDUCE_SUM,
 *                                                  losses)
 *
 * What a step function may do: anything a thread may do with its own tensors
 * (ops, a tape, scopes). It runs inside a device scope of its replica's
 * device and a tensor scope that the strategy closes after it returns, so its
 * temporaries are freed; what it hands to vdev_replica_return survives.
 * Every replica must make the same vdev_replica_* collective calls in the
 * same order. Each replica keeps its own model and its own optimizer (an
 * optimizer counts its steps; one shared by replicas would count each step
 * n times and be updated from n threads at once).
 *
 * Failures: when a step function fails on one replica (returns an error, for
 * instance VDEV_ERR_OOM from an op), the collectives the others wait in fail
 * at once, every replica's step ends, and vdev_strategy_run returns that
 * replica's code with "replica R (<device>): <its message>". Updates are
 * all or nothing: vdev_replica_apply_gradients applies nothing on any
 * replica unless every replica got as far as the update (gradients reduced,
 * the optimizer's slots made), so after a failed step every replica's
 * variables are as they were and the step can be retried, for instance with
 * a smaller batch.
 *
 * Memory: nothing is parked on the first device. Gradients are reduced by
 * the ring on every replica's own device, a global batch on the host is
 * copied slice by slice to each replica, and vdev_strategy_reduce puts its
 * result on the caller's device scope, else on CPU:0 (as TensorFlow's
 * reduce). vdev_strategy_memory_imbalance() compares the replicas' peaks,
 * and the metrics endpoint labels the devices of every strategy (see
 * README, "Data parallel training").
 *
 * Threads: a strategy is used from one thread at a time (runs from several
 * threads are serialised); a replica context only inside its step function,
 * on its replica's thread. Free strategies before vdev_shutdown(). */

typedef struct vdev_strategy vdev_strategy_t;
typedef struct vdev_replica_context vdev_replica_context_t;

/* A step function: runs once per replica, on that replica's thread. Returns
 * VDEV_OK or the code of what failed (with vdev_last_error() set). */
typedef enum vdev_status (*vdev_replica_fn)(vdev_replica_context_t *ctx, void *user);

/* The most replicas a strategy has. */
#define VDEV_MAX_REPLICAS 64

/* A mirrored strategy over n logical devices (any accepted names), or, with
 * devices NULL and n 0, over every logical GPU, else every logical CPU (as
 * TensorFlow's default). Starts the runtime and the replicas' threads.
 * Errors: as vdev_comm_new's (TensorFlow's words for an empty or repeated
 * list), VDEV_ERR_INVALID_ARG beyond VDEV_MAX_REPLICAS, VDEV_ERR_OOM, or
 * VDEV_ERR_BACKEND when a thread cannot be started. */
VDEV_API enum vdev_status vdev_mirrored_strategy_new(const char *const *devices, int n,
                                                     vdev_strategy_t **out);
/* Stops the threads. NULL is a no-op. Not from a step function. Called while
 * another thread is in vdev_strategy_run or vdev_strategy_set_batch_proportions
 * on s, it waits for that call to end; later calls on s are refused
 * (VDEV_ERR_INVALID_ARG, "...: not a live strategy (freed already, or not a
 * strategy)"). Other calls on s must not overlap its free. */
VDEV_API void vdev_strategy_free(vdev_strategy_t *s);
/* strategy.num_replicas_in_sync; -1 for a bad handle. */
VDEV_API int vdev_strategy_num_replicas_in_sync(const vdev_strategy_t *s);
/* The device of a replica, "/device:GPU:1"; NULL for a bad handle or index. */
VDEV_API const char *vdev_strategy_device(const vdev_strategy_t *s, int replica);
/* The communicator the replicas use (rank = replica id), owned by the
 * strategy: for vdev_comm_set_timeout, or collectives of one's own inside a
 * step function. NULL for a bad handle. Every run starts with it reset, so a
 * vdev_comm_abort on it (from a step function or another thread) fails only
 * the collectives of the run in flight that have not finished, one made
 * between runs is forgotten, and the next run goes on: the abort message's
 * "Free the communicator and make a new one" is not needed (nor allowed:
 * vdev_strategy_free frees it). */
VDEV_API vdev_comm_t *vdev_strategy_communicator(vdev_strategy_t *s);

/* Splits later global batches in these proportions (one per replica, > 0,
 * finite) instead of evenly: for devices of unequal speed or memory.
 * proportions NULL (n 0) goes back to even. A batch of B rows gives replica r
 * floor(B p_r / sum p) rows, and the rows left over go one each to the
 * replicas with the largest remainders (the lowest id first on a tie), so
 * every replica's share is fixed by B alone. A run splits every batch with
 * the proportions it started with: a call from another thread during a run
 * applies from the next run; a call from a step function of the strategy is
 * refused (VDEV_ERR_INVALID_ARG, "vdev_strategy_set_batch_proportions:
 * called from a step function of the strategy; ..."), as are a bad handle,
 * n other than num_replicas_in_sync, and a proportion <= 0 or not finite. */
VDEV_API enum vdev_status vdev_strategy_set_batch_proportions(vdev_strategy_t *s,
                                                              const double *proportions, int n);

/* Runs fn(ctx, user) on every replica at once and waits for all of them.
 * results: NULL, or an array of num_replicas_in_sync tensors that receives
 * what each replica handed to vdev_replica_return (NULL where it handed
 * nothing): they belong to the caller's current scope (the caller's, outside
 * any scope). On failure every results[i] is NULL and the first replica
 * whose function failed (not one that failed only because another did)
 * gives the code and the message "replica R (<device>): ...". */
VDEV_API enum vdev_status vdev_strategy_run(vdev_strategy_t *s, vdev_replica_fn fn, void *user,
                                            vdev_tensor_t **results);

/* strategy.reduce(op, per_replica, axis=None): the elementwise sum (or mean)
 * of num_replicas_in_sync tensors of one shape, one per replica, added in
 * replica order, on the caller's innermost device scope, else CPU:0. A new
 * tensor of the current scope; NULL on error (VDEV_ERR_SHAPE when shapes
 * differ). */
VDEV_API vdev_tensor_t *vdev_strategy_reduce(vdev_strategy_t *s, enum vdev_reduce_op op,
                                             vdev_tensor_t *const *per_replica);

/* vdev_memory_info of a replica's device. */
VDEV_API enum vdev_status vdev_strategy_memory_info(const vdev_strategy_t *s, int replica,
                                                    struct vdev_memory_info *out);
/* The largest peak in use among the replicas' devices over the smallest
 * (1.0: balanced; 1.0 when every peak is 0; infinity when only some are 0);
 * -1 (VDEV_ERR_INVALID_ARG) for a bad handle. Peaks count since start-up or
 * vdev_memory_reset_peak. */
VDEV_API double vdev_strategy_memory_imbalance(const vdev_strategy_t *s);

/* ---- inside a step function: the replica context ----
 * Each call checks that ctx is live and used on its replica's thread during a
 * run (VDEV_ERR_INVALID_ARG otherwise). */

/* replica_id_in_sync_group, 0..n-1 (-1 on error). */
VDEV_API int vdev_replica_id(const vdev_replica_context_t *ctx);
/* num_replicas_in_sync (-1 on error). */
VDEV_API int vdev_replica_num_replicas(const vdev_replica_context_t *ctx);
/* The replica's device, "/device:GPU:1" (NULL on error). */
VDEV_API const char *vdev_replica_device(const vdev_replica_context_t *ctx);

/* This replica's rows of a global batch (a tensor of at least one dimension,
 * rows along axis 0, on any device; the host, CPU:0, keeps the devices
 * balanced), copied to the replica's device: a new tensor of the step's
 * scope. The rows are split evenly (the first B mod n replicas get one more)
 * or in the proportions the run started with, in replica order. Remembers
 * B for vdev_replica_compute_average_loss. NULL on error. Across several
 * workers it is a collective that checks every worker passes a batch of the
 * same rows (vdev/multiworker.h). */
VDEV_API vdev_tensor_t *vdev_replica_batch(vdev_replica_context_t *ctx,
                                           const vdev_tensor_t *global);

/* tf.nn.compute_average_loss: sum(per_example_loss) / global_batch_size, a
 * 0-dimensional tensor on the replica's device; its gradients, summed over
 * the replicas, are those of the mean loss over the global batch.
 * per_example_loss has at least one dimension (else VDEV_ERR_INVALID_ARG,
 * "Invalid value passed for `per_example_loss`. Expected a tensor with at
 * least rank 1. ..."). global_batch_size 0: the rows of the last global batch
 * this replica split in this run (vdev_replica_batch), else TensorFlow's
 * default, per_example_loss's first dimension times num_replicas_in_sync;
 * negative, or 0 resolved to 0 (an empty batch, as TensorFlow's
 * assert_positive refuses it): VDEV_ERR_INVALID_ARG "global_batch_size must
 * be positive.". */
VDEV_API vdev_tensor_t *vdev_replica_compute_average_loss(vdev_replica_context_t *ctx,
                                                          const vdev_tensor_t *per_example_loss,
                                                          int64_t global_batch_size);

/* ReplicaContext.all_reduce: out[i] = in[i] summed (or averaged) over the
 * replicas, new tensors of the step's scope on the replica's device (in[i]
 * is left as it is, so tape gradients, which may share memory, can be
 * given). Every replica passes the same shapes. On error every out[i] is
 * NULL, on every replica. */
VDEV_API enum vdev_status vdev_replica_all_reduce(vdev_replica_context_t *ctx,
                                                  enum vdev_reduce_op op,
                                                  vdev_tensor_t *const *in, int n,
                                                  vdev_tensor_t **out);
/* Copies root replica's tensors over every replica's, in place: makes the
 * replicas' variables identical after building them (tensors on each
 * replica's own device, same shapes and order on every replica). */
VDEV_API enum vdev_status vdev_replica_broadcast(vdev_replica_context_t *ctx,
                                                 vdev_tensor_t *const *tensors, int n, int root);
/* optimizer.apply_gradients in replica context: sums grads[i] over the
 * replicas (all-reduce on copies, so the gradients are not written), makes
 * the optimizer's slots, checks with every replica that each got this far,
 * then updates vars[i] in place. vars must be this replica's variables, on
 * its device; opt this replica's own optimizer (one passed by two replicas
 * of this process is VDEV_ERR_INVALID_ARG on every replica, "replicas 0 and
 * 1 pass the same optimizer; ..."). When any replica fails
 * before the update, no replica updates anything (every replica returns the
 * same code and message). The update itself cannot run out of memory. */
VDEV_API enum vdev_status vdev_replica_apply_gradients(vdev_replica_context_t *ctx,
                                                       vdev_optimizer_t *opt,
                                                       vdev_tensor_t *const *vars,
                                                       vdev_tensor_t *const *grads, int n);
/* The replica's value for the caller of vdev_strategy_run (its results[i]):
 * any live tensor, usually one the step made; it outlives the step's scope
 * (a variable, or a tensor whose handle lives on, comes back as a view of
 * it). A second call replaces the first value; NULL clears it. If the run
 * fails, the value is let go. */
VDEV_API enum vdev_status vdev_replica_return(vdev_replica_context_t *ctx, vdev_tensor_t *value);

#ifdef __cplusplus
}
#endif
#endif /* VDEV_VDEV_DISTRIBUTE_H */
