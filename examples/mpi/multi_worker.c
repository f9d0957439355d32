/* multi_worker.c — multi-worker mirrored training across MPI processes
 * (README, "Training across processes"): run it with mpirun, one process
 * per task of the cluster file (examples/mpi/cluster.json: a chief and
 * three workers, each with one simulated GPU, worker 0 limited to 512 MiB
 * and worker 1 to 256 MiB).
 *
 * Every process reads its task, makes the strategy over its GPU:0 (the
 * strategy's communicator spans every process: vdev's ring among a
 * process's devices, MPI_Allreduce across processes), builds the model and
 * takes the chief's values, then trains 30 steps on a global batch that
 * every process makes alike; each replica takes its rows. The chief prints
 * the loss. Then every process shows its device's memory limit and tries a
 * 384 MiB tensor: it fits on the chief and on worker 0, and fails on worker
 * 1, with an out-of-memory message that names the task's device. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#define STEPS 30
#define GLOBAL_BATCH 256

struct model {
    vdev_mlp_t *mlp;
    vdev_optimizer_t *sgd;
    vdev_tensor_t *vars[EX_NV];
    vdev_tensor_t *x, *y; /* the global batch, on CPU:0 */
};

static enum vdev_status build(vdev_replica_context_t *ctx, void *u)
{
    struct model *m = u;
    m->mlp = vdev_mlp_new(ex_sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 5);
    m->sgd = vdev_sgd_new(0.1f, 0.9f);
    if (!m->mlp || !m->sgd)
        return vdev_last_status();
    vdev_mlp_variables(m->mlp, m->vars, EX_NV);
    return vdev_replica_broadcast(ctx, m->vars, EX_NV, 0); /* the chief's values */
}

static enum vdev_status step(vdev_replica_context_t *ctx, void *u)
{
    struct model *m = u;
    vdev_tensor_t *x = vdev_replica_batch(ctx, m->x), *y = vdev_replica_batch(ctx, m->y);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_replica_compute_average_loss(ctx, ex_loss_rows(m->mlp, x, y), 0);
    vdev_tensor_t *g[EX_NV];
    enum vdev_status st = loss ? vdev_tape_gradient(tape, loss, m->vars, EX_NV, g)
                               : vdev_last_status();
    vdev_tape_end(tape);
    if (st == VDEV_OK)
        st = vdev_replica_apply_gradients(ctx, m->sgd, m->vars, g, EX_NV);
    return st == VDEV_OK ? vdev_replica_return(ctx, loss) : st;
}

int main(int argc, char **argv)
{
    const struct ex_job job = {
        .prog = argc > 0 && argv[0] ? argv[0] : "example_multi_worker",
        .about = "Multi-worker mirrored training: a chief and three workers, each with one\n"
                 "simulated GPU (worker 0 limited to 512 MiB, worker 1 to 256 MiB), train one\n"
                 "model in sync; then each tries a 384 MiB tensor on its GPU.",
        .cluster = "examples/mpi/cluster.json",
        .np = 4};
    int rc = ex_options(argc, argv, &job);
    if (rc >= 0)
        return rc;
    struct vdev_cluster_task task;
    if (vdev_cluster_task(&task) != VDEV_OK)
        return ex_fail(&job, NULL, NULL);
    const char *gpu[1] = {"GPU:0"};
    vdev_strategy_t *s;
    if (vdev_multi_worker_mirrored_strategy_new(gpu, 1, &s) != VDEV_OK)
        return ex_fail(&job, &task, NULL);
    struct model m = {0};
    if (vdev_strategy_run(s, build, &m, NULL) != VDEV_OK)
        return ex_fail(&job, &task, NULL);
    if (task.is_chief)
        printf("%d workers in sync, %d replicas\n", /* a lone process is one worker */
               vdev_strategy_num_replicas_in_sync(s) / vdev_strategy_num_local_replicas(s),
               vdev_strategy_num_replicas_in_sync(s));
    for (int k = 0; k < STEPS; k++) {
        vdev_tensor_t *losses[1];
        vdev_tensor_free(m.x);
        vdev_tensor_free(m.y);
        if (ex_batch(GLOBAL_BATCH, (uint64_t)k, &m.x, &m.y) != 0 ||
            vdev_strategy_run(s, step, &m, losses) != VDEV_OK) {
            char what[32];
            snprintf(what, sizeof what, "step %d", k);
            return ex_fail(&job, &task, what);
        }
        vdev_tensor_t *loss = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, losses);
        float l = vdev_tensor_item(loss);
        if (task.is_chief && (k % 10 == 0 || k == STEPS - 1))
            printf("step %2d  loss %.4f\n", k, (double)l);
        vdev_tensor_free(loss);
        vdev_tensor_free(losses[0]);
    }
    fflush(stdout);
    /* each process's own limit */
    struct vdev_memory_info mi;
    vdev_strategy_memory_info(s, 0, &mi);
    int64_t shape[1] = {384ll << 18}; /* 384 MiB of floats */
    vdev_device_push("GPU:0");
    vdev_tensor_t *big = vdev_tensor_zeros(shape, 1, VDEV_F32);
    vdev_device_pop();
    printf("%s: limit %.0f MiB; 384 MiB: %s\n", task.name, (double)mi.bytes_limit / 1048576.0,
           big ? "ok" : vdev_last_error());
    vdev_tensor_free(big);
    vdev_tensor_free(m.x);
    vdev_tensor_free(m.y);
    vdev_mlp_free(m.mlp);
    vdev_optimizer_free(m.sgd);
    vdev_strategy_free(s);
    vdev_shutdown();
    return 0;
}
