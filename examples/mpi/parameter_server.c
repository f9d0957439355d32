/* parameter_server.c — parameter-server training across MPI processes
 * (README, "Training across processes"): run it with mpirun, one process per
 * task of examples/mpi/ps_cluster.json (a chief, two workers with a
 * simulated GPU each, two ps tasks on their CPUs).
 *
 * Every process makes the strategy and the model and hands its variables to
 * the strategy: the chief's values are the initial ones, the ps tasks keep
 * the variables (each half of the bytes), the workers' copies receive the
 * pulls. The chief then schedules 200 steps (TensorFlow's
 * ClusterCoordinator.schedule), each on the next idle worker: the worker
 * pulls the current values, computes the gradients of its batch on its GPU
 * and pushes them to the servers that own them, which apply SGD as pushes
 * arrive (asynchronously). The chief joins, prints the losses the steps
 * returned and each server's share; workers and servers serve until the
 * chief frees the strategy. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#define STEPS 200
#define BATCH 64

struct model {
    vdev_mlp_t *mlp;
    vdev_tensor_t *vars[EX_NV];
};

static enum vdev_status step_fn(vdev_ps_worker_t *w, int64_t step, void *u)
{
    struct model *m = u;
    vdev_tensor_t *x, *y;
    if (ex_batch(BATCH, (uint64_t)step, &x, &y) != 0)
        return vdev_last_status();
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_div(vdev_sum_all(ex_loss_rows(m->mlp, vdev_identity(x),
                                                             vdev_identity(y))),
                                   vdev_tensor_fill(NULL, 0, VDEV_F32, BATCH));
    vdev_tensor_t *g[EX_NV];
    enum vdev_status st = loss ? vdev_tape_gradient(tape, loss, m->vars, EX_NV, g)
                               : vdev_last_status();
    vdev_tape_end(tape);
    if (st == VDEV_OK)
        st = vdev_ps_worker_push(w, g, EX_NV);
    if (st == VDEV_OK)
        st = vdev_ps_worker_return(w, vdev_tensor_item(loss));
    return st; /* x, y and the rest belong to the step's scope */
}

int main(int argc, char **argv)
{
    const struct ex_job job = {
        .prog = argc > 0 && argv[0] ? argv[0] : "example_parameter_server",
        .about = "Parameter-server training: a chief schedules 200 steps on two workers (a\n"
                 "simulated GPU each), which push their gradients to two ps tasks that hold\n"
                 "the variables and apply SGD as the pushes arrive.",
        .cluster = "examples/mpi/ps_cluster.json",
        .np = 5};
    int rc = ex_options(argc, argv, &job);
    if (rc >= 0)
        return rc;
    struct vdev_cluster_task task;
    if (vdev_cluster_task(&task) != VDEV_OK)
        return ex_fail(&job, NULL, NULL);
    struct vdev_ps_options o = {.optimizer = VDEV_PS_SGD, .learning_rate = 0.1f,
                                .momentum = 0.5f, .max_staleness = -1};
    vdev_ps_strategy_t *s;
    if (vdev_ps_strategy_new(&o, &s) != VDEV_OK)
        return ex_fail(&job, &task, NULL);
    struct model m;
    m.mlp = vdev_mlp_new(ex_sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 5);
    if (!m.mlp)
        return ex_fail(&job, &task, NULL);
    vdev_mlp_variables(m.mlp, m.vars, EX_NV);
    rc = 0;
    if (vdev_ps_strategy_add_variables(s, m.vars, EX_NV) != VDEV_OK) {
        rc = 1;
    } else if (task.is_chief) {
        int64_t ids[STEPS];
        for (int k = 0; k < STEPS && rc == 0; k++)
            rc = vdev_ps_schedule(s, k, &ids[k]) != VDEV_OK;
        if (rc == 0)
            rc = vdev_ps_join(s) != VDEV_OK;
        for (int k = 0; k < STEPS && rc == 0; k += 50) {
            float a = 0, l;
            for (int i = k; i < k + 50 && rc == 0; i++) {
                rc = vdev_ps_fetch(s, ids[i], &l) != VDEV_OK;
                a += l / 50;
            }
            printf("steps %3d-%3d  mean loss %.4f\n", k, k + 49, (double)a);
        }
        for (int i = 0; i < task.num_ps && rc == 0; i++) {
            struct vdev_ps_shard_info info;
            rc = vdev_ps_shard_info(s, i, &info) != VDEV_OK;
            printf("ps:%d holds %llu bytes in %d shards\n", i, (unsigned long long)info.bytes,
                   info.n_shards);
        }
        printf("balance (largest share / smallest) %.4f\n", vdev_ps_balance(s));
    } else {
        rc = vdev_ps_strategy_serve(s, step_fn, &m) != VDEV_OK;
    }
    if (rc)
        ex_fail(&job, &task, NULL);
    vdev_ps_strategy_free(s);
    vdev_mlp_free(m.mlp);
    vdev_shutdown();
    return rc;
}
