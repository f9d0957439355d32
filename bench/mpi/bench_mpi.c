/* bench_mpi.c — what training across processes costs, one copy per MPI
 * process (run by bench/mpi/run.sh under mpirun; every process one
 * simulated GPU):
 *
 *   allreduce  vdev's all-reduce across processes (sum, the path a
 *              multi-worker mirrored step takes: vdev_replica_all_reduce on
 *              the replica's GPU:0, through the hierarchical communicator:
 *              the exchange of descriptors, then MPI_Allreduce of the
 *              buffer) against a plain MPI_Allreduce (in place, MPI_SUM,
 *              floats) of the same bytes on a host buffer, in the same run,
 *              for 4 MiB and 64 MiB per process, timed on the same clock in
 *              alternating batches (so that both see the same load of the
 *              machine); bytes per second of one process's buffer
 *              ("algorithm bandwidth"), the median of 9 batches of
 *              back-to-back calls after 2 warm-ups;
 *   mirrored   examples per second of a multi-worker mirrored training step
 *              (MLP 256-1024-1024-10, SGD, 128 rows per process), the
 *              median of 9 steps after 2 warm-ups;
 *   ps         examples per second of parameter-server training of the same
 *              model on the same processes (the cluster file names a chief,
 *              ps tasks and workers; 128 rows per step, asynchronous): the
 *              chief schedules steps and joins; steps over wall time, after
 *              4 warm-up steps.
 * The program initialises MPI itself (MPI_THREAD_SERIALIZED), as a program
 * that uses MPI of its own would; vdev then uses that MPI. Process 0 (the
 * chief for ps) prints one line "bench_mpi KEY VALUE" per figure.
 * Usage: bench_mpi allreduce|mirrored|ps [--quick] */
#define _POSIX_C_SOURCE 200809L
#include "vdev.h"

#include "../bench_stats.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define NV 6
#define ROWS 128

static int quick, me, np;
static const int64_t sizes[4] = {256, 1024, 1024, 10};

static void die(const char *what)
{
    fprintf(stderr, "bench_mpi (process %d): %s: %s\n", me, what, vdev_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* ---- all-reduce ---- */

#define BATCHES 9

/* The all-reduce of n floats both ways, batch by batch in turn (so that
 * both see the same load of the machine): vdev's on GPU:0 through the
 * strategy's communicator (its one local rank, called from this thread),
 * and plain MPI_Allreduce on a host buffer. Seconds per call, the median of
 * BATCHES batches of iters calls each, after 2 warm-ups of each. */
static void allreduce_pair(vdev_comm_t *comm, int64_t n, int iters, double *vdev_s,
                           double *mpi_s)
{
    int64_t shape[1] = {n};
    vdev_device_push("GPU:0");
    vdev_tensor_t *t = vdev_tensor_zeros(shape, 1, VDEV_F32);
    vdev_device_pop();
    float *buf = calloc((size_t)n, sizeof *buf);
    if (!t || !buf)
        die("buffers");
    double v[BATCHES], p[BATCHES];
    for (int k = 0; k < 2; k++) {
        if (vdev_comm_all_reduce(comm, 0, &t, 1, VDEV_REDUCE_SUM) != VDEV_OK)
            die("all-reduce");
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int b = 0; b < BATCHES; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = vdev_clock_seconds();
        for (int k = 0; k < iters; k++)
            if (vdev_comm_all_reduce(comm, 0, &t, 1, VDEV_REDUCE_SUM) != VDEV_OK)
                die("all-reduce");
        (void)vdev_tensor_item(t); /* the device's work has ended too */
        v[b] = (vdev_clock_seconds() - t0) / iters;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = vdev_clock_seconds();
        for (int k = 0; k < iters; k++)
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        p[b] = (vdev_clock_seconds() - t0) / iters;
    }
    vdev_tensor_free(t);
    free(buf);
    *vdev_s = bench_median(v, BATCHES);
    *mpi_s = bench_median(p, BATCHES);
}

static void bench_allreduce(void)
{
    vdev_strategy_t *s;
    const char *dev[1] = {"GPU:0"};
    if (vdev_multi_worker_mirrored_strategy_new(dev, 1, &s) != VDEV_OK)
        die("strategy");
    vdev_comm_t *comm = vdev_strategy_communicator(s);
    const int64_t mib[2] = {4, 64};
    for (int i = 0; i < 2; i++) {
        int64_t n = mib[i] * 262144;
        int iters = quick ? 2 : (mib[i] == 4 ? 10 : 2);
        double bytes = (double)n * 4, v, p;
        allreduce_pair(comm, n, iters, &v, &p);
        if (me == 0)
            printf("bench_mpi allreduce_%lldMiB vdev_GBps %.3f mpi_GBps %.3f ratio %.2f\n",
                   (long long)mib[i], bytes / v / 1e9, bytes / p / 1e9, p / v);
    }
    vdev_strategy_free(s);
}

/* ---- training: mirrored ---- */

struct model {
    vdev_mlp_t *mlp;
    vdev_optimizer_t *sgd;
    vdev_tensor_t *vars[NV];
    vdev_tensor_t *x, *y;
};

static vdev_tensor_t *loss_rows(vdev_mlp_t *mlp, const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    vdev_tensor_t *d = vdev_sub(vdev_mlp_forward(mlp, x), y);
    return vdev_mean(vdev_mul(d, d), 1, false);
}

static enum vdev_status mw_build(vdev_replica_context_t *ctx, void *u)
{
    struct model *m = u;
    m->mlp = vdev_mlp_new(sizes, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    m->sgd = vdev_sgd_new(0.01f, 0);
    if (!m->mlp || !m->sgd)
        return vdev_last_status();
    vdev_mlp_variables(m->mlp, m->vars, NV);
    return vdev_replica_broadcast(ctx, m->vars, NV, 0);
}

static enum vdev_status mw_step(vdev_replica_context_t *ctx, void *u)
{
    struct model *m = u;
    vdev_tensor_t *x = vdev_replica_batch(ctx, m->x), *y = vdev_replica_batch(ctx, m->y);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_replica_compute_average_loss(ctx, loss_rows(m->mlp, x, y), 0);
    vdev_tensor_t *g[NV];
    enum vdev_status st =
        loss ? vdev_tape_gradient(tape, loss, m->vars, NV, g) : vdev_last_status();
    vdev_tape_end(tape);
    if (st == VDEV_OK)
        st = vdev_replica_apply_gradients(ctx, m->sgd, m->vars, g, NV);
    return st;
}

static void make_batch(struct model *m, int64_t rows, uint64_t seed)
{
    int64_t xs[2] = {rows, sizes[0]}, ys[2] = {rows, sizes[3]};
    vdev_device_push("CPU:0");
    m->x = vdev_tensor_uniform(xs, 2, -1, 1, seed);
    m->y = vdev_tensor_uniform(ys, 2, -1, 1, seed + 1);
    vdev_device_pop();
    if (!m->x || !m->y)
        die("batch");
}

static void free_model(struct model *m)
{
    vdev_mlp_free(m->mlp);
    vdev_optimizer_free(m->sgd);
    vdev_tensor_free(m->x);
    vdev_tensor_free(m->y);
}

static void bench_mirrored(void)
{
    vdev_strategy_t *s;
    const char *dev[1] = {"GPU:0"};
    struct model m;
    memset(&m, 0, sizeof m);
    if (vdev_multi_worker_mirrored_strategy_new(dev, 1, &s) != VDEV_OK)
        die("strategy");
    if (vdev_strategy_run(s, mw_build, &m, NULL) != VDEV_OK)
        die("build");
    make_batch(&m, (int64_t)ROWS * np, 3); /* the global batch */
    int reps = quick ? 3 : 9;
    double t[16];
    for (int k = -2; k < reps; k++) {
        double t0 = vdev_clock_seconds();
        if (vdev_strategy_run(s, mw_step, &m, NULL) != VDEV_OK)
            die("step");
        (void)vdev_tensor_item(m.vars[0]); /* the update has landed */
        if (k >= 0)
            t[k] = vdev_clock_seconds() - t0;
    }
    double step = bench_median(t, reps);
    if (me == 0)
        printf("bench_mpi mirrored_step_ms %.2f\nbench_mpi mirrored_examples_per_s %.0f\n",
               step * 1e3, ROWS * np / step);
    free_model(&m);
    vdev_strategy_free(s);
}

/* ---- training: parameter servers ---- */

static enum vdev_status ps_step(vdev_ps_worker_t *w, int64_t step, void *u)
{
    struct model *m = u;
    (void)step;
    vdev_tensor_t *x = vdev_identity(m->x), *y = vdev_identity(m->y);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_div(vdev_sum_all(loss_rows(m->mlp, x, y)),
                                   vdev_tensor_fill(NULL, 0, VDEV_F32, (double)ROWS));
    vdev_tensor_t *g[NV];
    enum vdev_status st =
        loss ? vdev_tape_gradient(tape, loss, m->vars, NV, g) : vdev_last_status();
    vdev_tape_end(tape);
    return st == VDEV_OK ? vdev_ps_worker_push(w, g, NV) : st;
}

static void bench_ps(void)
{
    struct vdev_cluster_task task;
    if (vdev_cluster_task(&task) != VDEV_OK)
        die("cluster");
    struct vdev_ps_options o = {.optimizer = VDEV_PS_SGD, .learning_rate = 0.01f,
                                .max_staleness = -1};
    vdev_ps_strategy_t *s;
    if (vdev_ps_strategy_new(&o, &s) != VDEV_OK)
        die("strategy");
    struct model m;
    memset(&m, 0, sizeof m);
    m.mlp = vdev_mlp_new(sizes, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    if (!m.mlp)
        die("model");
    vdev_mlp_variables(m.mlp, m.vars, NV);
    make_batch(&m, ROWS, 3 + (uint64_t)me);
    if (vdev_ps_strategy_add_variables(s, m.vars, NV) != VDEV_OK)
        die("variables");
    if (!strcmp(task.type, "chief")) {
        int64_t id;
        int steps = quick ? 8 : 40;
        for (int k = 0; k < 4; k++)
            if (vdev_ps_schedule(s, k, &id) != VDEV_OK)
                die("schedule");
        if (vdev_ps_join(s) != VDEV_OK)
            die("join");
        double t0 = vdev_clock_seconds();
        for (int k = 0; k < steps; k++)
            if (vdev_ps_schedule(s, k, &id) != VDEV_OK)
                die("schedule");
        if (vdev_ps_join(s) != VDEV_OK)
            die("join");
        double sec = vdev_clock_seconds() - t0;
        printf("bench_mpi ps_workers %d\nbench_mpi ps_servers %d\nbench_mpi ps_steps_per_s %.2f\n"
               "bench_mpi ps_examples_per_s %.0f\nbench_mpi ps_balance %.4f\n",
               task.num_workers, task.num_ps, steps / sec, steps * ROWS / sec,
               vdev_ps_balance(s));
        for (int i = 0; i < task.num_ps; i++) {
            struct vdev_ps_shard_info info;
            if (vdev_ps_shard_info(s, i, &info) != VDEV_OK)
                die("shard info");
            printf("bench_mpi ps_server_%d_bytes %llu\n", i, (unsigned long long)info.bytes);
        }
    } else if (vdev_ps_strategy_serve(s, ps_step, &m) != VDEV_OK) {
        die("serve");
    }
    vdev_ps_strategy_free(s);
    free_model(&m);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    quick = argc > 2 && !strcmp(argv[2], "--quick");
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return fprintf(stderr, "bench_mpi: MPI_Init_thread failed\n"), 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (!strcmp(what, "allreduce"))
        bench_allreduce();
    else if (!strcmp(what, "mirrored"))
        bench_mirrored();
    else if (!strcmp(what, "ps"))
        bench_ps();
    else
        fprintf(stderr, "usage: bench_mpi allreduce|mirrored|ps [--quick]\n");
    fflush(stdout);
    vdev_shutdown();
    MPI_Finalize();
    return 0;
}
