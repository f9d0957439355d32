/* bench_mirrored.c — what data parallelism costs and gives on simulated GPUs.
 *
 *   step       a training step of an MLP 256-1024-1024-10 (1.3 M parameters,
 *              per-example mean squared error, SGD) with a global batch of
 *              512 rows made on the host: ms per step with the mirrored
 *              strategy on 1, 2, 3 and 4 simulated GPUs, against the same
 *              step on one GPU (the whole batch, no strategy); after the
 *              steps, the memory imbalance (largest peak in use among the
 *              replicas over the smallest);
 *   allreduce  vdev's ring all-reduce (sum) of 4 MiB and 64 MiB per rank on
 *              2, 3 and 4 simulated GPUs, in bytes per second of one rank's
 *              buffer (NCCL's "algorithm bandwidth"), against a plain
 *              reduction of the same bytes with memcpy on one thread (copy
 *              the first buffer, add the others into it, copy the sum back
 *              into every buffer: what a reduction parked on one device
 *              does).
 * Each figure is the median of several timed repetitions after a warm-up.
 * Usage: bench_mirrored [--quick] [--md FILE]  (FILE gets a markdown section) */
#define _POSIX_C_SOURCE 200809L
#include "vdev.h"

#include "bench_args.h"
#include "bench_stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 4
#define NV 6

static int quick;
static const int64_t sizes[4] = {256, 1024, 1024, 10};
static const char *const gpus[MAXR] = {"GPU:0", "GPU:1", "GPU:2", "GPU:3"};

static void die(const char *what)
{
    fprintf(stderr, "bench_mirrored: %s: %s\n", what, vdev_last_error());
    exit(1);
}

/* ---- training steps ---- */

struct model {
    vdev_mlp_t *mlp[MAXR];
    vdev_optimizer_t *sgd[MAXR];
    vdev_tensor_t *vars[MAXR][NV];
    vdev_tensor_t *x, *y; /* the global batch, on CPU:0 */
};

static vdev_tensor_t *loss_rows(vdev_mlp_t *mlp, const vdev_tensor_t *x, const vdev_tensor_t *y)
{
    vdev_tensor_t *d = vdev_sub(vdev_mlp_forward(mlp, x), y);
    return vdev_mean(vdev_mul(d, d), 1, false);
}

static enum vdev_status build(vdev_replica_context_t *ctx, void *u)
{
    struct model *m = u;
    int r = vdev_replica_id(ctx);
    m->mlp[r] = vdev_mlp_new(sizes, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    m->sgd[r] = vdev_sgd_new(0.01f, 0);
    if (!m->mlp[r] || !m->sgd[r])
        return vdev_last_status();
    vdev_mlp_variables(m->mlp[r], m->vars[r], NV);
    return vdev_replica_broadcast(ctx, m->vars[r], NV, 0);
}

static enum vdev_status step(vdev_replica_context_t *ctx, void *u)
{
    struct model *m = u;
    int r = vdev_replica_id(ctx);
    vdev_tensor_t *x = vdev_replica_batch(ctx, m->x), *y = vdev_replica_batch(ctx, m->y);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_replica_compute_average_loss(ctx, loss_rows(m->mlp[r], x, y), 0);
    vdev_tensor_t *g[NV];
    enum vdev_status st = loss ? vdev_tape_gradient(tape, loss, m->vars[r], NV, g) : vdev_last_status();
    vdev_tape_end(tape);
    if (st == VDEV_OK)
        st = vdev_replica_apply_gradients(ctx, m->sgd[r], m->vars[r], g, NV);
    return st == VDEV_OK ? vdev_replica_return(ctx, loss) : st;
}

static void make_batch(struct model *m, int64_t rows)
{
    int64_t xs[2] = {rows, sizes[0]}, ys[2] = {rows, sizes[3]};
    vdev_device_push("CPU:0");
    m->x = vdev_tensor_uniform(xs, 2, -1, 1, 3);
    m->y = vdev_tensor_uniform(ys, 2, -1, 1, 4);
    vdev_device_pop();
    if (!m->x || !m->y)
        die("batch");
}

/* ms per mirrored step on n GPUs; the imbalance after the steps. */
static double bench_mirrored_step(int n, int64_t batch, double *imbalance)
{
    vdev_strategy_t *s;
    struct model m;
    memset(&m, 0, sizeof m);
    if (vdev_mirrored_strategy_new(gpus, n, &s) != VDEV_OK)
        die("strategy");
    if (vdev_strategy_run(s, build, &m, NULL) != VDEV_OK)
        die("build");
    for (int r = 0; r < n; r++) /* peaks of this run only (GPU:0 ran other work before) */
        vdev_memory_reset_peak(gpus[r]);
    make_batch(&m, batch);
    int reps = quick ? 3 : 9;
    double t[16];
    for (int k = -2; k < reps; k++) {
        vdev_tensor_t *losses[MAXR];
        double t0 = vdev_clock_seconds();
        if (vdev_strategy_run(s, step, &m, losses) != VDEV_OK)
            die("step");
        vdev_tensor_t *l = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, losses);
        (void)vdev_tensor_item(l); /* every replica's step has finished */
        if (k >= 0)
            t[k] = (vdev_clock_seconds() - t0) * 1e3;
        vdev_tensor_free(l);
        for (int r = 0; r < n; r++)
            vdev_tensor_free(losses[r]);
    }
    *imbalance = vdev_strategy_memory_imbalance(s);
    for (int r = 0; r < n; r++) {
        vdev_mlp_free(m.mlp[r]);
        vdev_optimizer_free(m.sgd[r]);
    }
    vdev_tensor_free(m.x);
    vdev_tensor_free(m.y);
    vdev_strategy_free(s);
    return bench_median(t, reps);
}

/* ms per step of the same model and batch on GPU:0 alone. */
static double bench_single_step(int64_t batch)
{
    struct model m;
    memset(&m, 0, sizeof m);
    vdev_device_push("GPU:0");
    m.mlp[0] = vdev_mlp_new(sizes, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    vdev_device_pop();
    m.sgd[0] = vdev_sgd_new(0.01f, 0);
    if (!m.mlp[0] || !m.sgd[0])
        die("model");
    vdev_mlp_variables(m.mlp[0], m.vars[0], NV);
    make_batch(&m, batch);
    int reps = quick ? 3 : 9;
    double t[16];
    for (int k = -2; k < reps; k++) {
        double t0 = vdev_clock_seconds();
        vdev_scope_begin();
        vdev_device_push("GPU:0");
        vdev_tensor_t *x = vdev_identity(m.x), *y = vdev_identity(m.y), *g[NV];
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *loss = vdev_div(vdev_sum_all(loss_rows(m.mlp[0], x, y)),
                                       vdev_tensor_fill(NULL, 0, VDEV_F32, (double)batch));
        enum vdev_status st = vdev_tape_gradient(tape, loss, m.vars[0], NV, g);
        vdev_tape_end(tape); /* before the update: a live tape would keep the old values */
        if (st != VDEV_OK || vdev_optimizer_apply(m.sgd[0], m.vars[0], g, NV) != VDEV_OK)
            die("one-device step");
        (void)vdev_tensor_item(loss);
        vdev_device_pop();
        vdev_scope_end();
        if (k >= 0)
            t[k] = (vdev_clock_seconds() - t0) * 1e3;
    }
    vdev_mlp_free(m.mlp[0]);
    vdev_optimizer_free(m.sgd[0]);
    vdev_tensor_free(m.x);
    vdev_tensor_free(m.y);
    return bench_median(t, reps);
}

/* ---- all-reduce ---- */

struct rank {
    vdev_comm_t *comm;
    int rank, iters;
    vdev_tensor_t *t, *tiny;
    double seconds; /* rank 0: the timed loop */
};

static void *rank_loop(void *v)
{
    struct rank *k = v;
    float one;
    vdev_comm_barrier(k->comm, k->rank);
    double t0 = vdev_clock_seconds();
    for (int i = 0; i < k->iters; i++) {
        if (vdev_comm_all_reduce(k->comm, k->rank, &k->t, 1, VDEV_REDUCE_SUM) != VDEV_OK)
            die("all-reduce");
        /* a copy ordered after the all-reduce on this GPU's stream: it is done */
        vdev_tensor_to_host(k->tiny, &one, sizeof one);
    }
    vdev_comm_barrier(k->comm, k->rank);
    k->seconds = vdev_clock_seconds() - t0;
    return NULL;
}

/* Seconds per ring all-reduce of `bytes` per rank on n GPUs. */
static double bench_ring(int n, size_t bytes)
{
    vdev_comm_t *comm;
    if (vdev_comm_new(gpus, n, &comm) != VDEV_OK)
        die("communicator");
    struct rank rk[MAXR];
    pthread_t th[MAXR];
    int64_t shape[1] = {(int64_t)(bytes / 4)}, one[1] = {1};
    int iters = quick ? 2 : bytes > (16u << 20) ? 5 : 40;
    for (int r = 0; r < n; r++) {
        vdev_device_push(gpus[r]);
        rk[r] = (struct rank){comm, r, 1, vdev_tensor_fill(shape, 1, VDEV_F32, 1.0),
                              vdev_tensor_zeros(one, 1, VDEV_F32), 0};
        vdev_device_pop();
        if (!rk[r].t || !rk[r].tiny)
            die("tensors");
    }
    for (int r = 0; r < n; r++) /* warm-up: the pages of every buffer touched */
        pthread_create(&th[r], NULL, rank_loop, &rk[r]);
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    double t[5];
    int reps = quick ? 1 : 5;
    for (int k = 0; k < reps; k++) {
        for (int r = 0; r < n; r++) {
            rk[r].iters = iters;
            pthread_create(&th[r], NULL, rank_loop, &rk[r]);
        }
        for (int r = 0; r < n; r++)
            pthread_join(th[r], NULL);
        t[k] = rk[0].seconds / iters;
    }
    for (int r = 0; r < n; r++) {
        vdev_tensor_free(rk[r].t);
        vdev_tensor_free(rk[r].tiny);
    }
    vdev_comm_free(comm);
    return bench_median(t, reps);
}

/* Seconds per plain reduction of n host buffers of `bytes` each, one thread. */
static double bench_memcpy(int n, size_t bytes)
{
    size_t count = bytes / 4;
    float *buf[MAXR], *sum = malloc(bytes);
    for (int r = 0; r < n; r++) {
        buf[r] = malloc(bytes);
        if (!buf[r])
            die("host memory");
        for (size_t i = 0; i < count; i++)
            buf[r][i] = 1.0f;
    }
    if (!sum)
        die("host memory");
    int iters = quick ? 2 : bytes > (16u << 20) ? 5 : 40, reps = quick ? 1 : 5;
    double t[5];
    for (int k = -1; k < reps; k++) {
        double t0 = vdev_clock_seconds();
        for (int it = 0; it < iters; it++) {
            memcpy(sum, buf[0], bytes);
            for (int r = 1; r < n; r++)
                for (size_t i = 0; i < count; i++)
                    sum[i] += buf[r][i];
            for (int r = 0; r < n; r++)
                memcpy(buf[r], sum, bytes);
        }
        if (k >= 0)
            t[k] = (vdev_clock_seconds() - t0) / iters;
    }
    for (int r = 0; r < n; r++)
        free(buf[r]);
    free(sum);
    return bench_median(t, reps);
}

int main(int argc, char **argv)
{
    struct bench_args args;
    if (bench_args_parse(argc, argv, "bench_mirrored", 0, &args))
        return 2;
    quick = args.quick;
    const char *md = args.md;
    setenv("VDEV_SIM_GPUS", "4x16GiB", 1);
    if (vdev_init() != VDEV_OK)
        die("start-up");
    const int64_t batch = 512;
    char out[8192];
    size_t k = 0;
    k += (size_t)snprintf(out + k, sizeof out - k,
                          "| figure | 1 GPU | 2 GPUs | 3 GPUs | 4 GPUs |\n|---|---:|---:|---:|---:|\n");
    double single = bench_single_step(batch), ms[MAXR], imb[MAXR];
    for (int n = 1; n <= MAXR; n++) {
        ms[n - 1] = bench_mirrored_step(n, batch, &imb[n - 1]);
        fprintf(stderr, "mirrored step, %d GPUs: %.1f ms (one GPU without a strategy: %.1f ms), "
                        "imbalance %.3f\n",
                n, ms[n - 1], single, imb[n - 1]);
    }
    k += (size_t)snprintf(out + k, sizeof out - k,
                          "| mirrored step, MLP 256-1024-1024-10, global batch %lld (ms) |",
                          (long long)batch);
    for (int n = 0; n < MAXR; n++)
        k += (size_t)snprintf(out + k, sizeof out - k, " %.1f |", ms[n]);
    k += (size_t)snprintf(out + k, sizeof out - k,
                          "\n| the same step on one GPU, no strategy (ms) | %.1f | %.1f | %.1f | "
                          "%.1f |\n| speed-up over one GPU |",
                          single, single, single, single);
    for (int n = 0; n < MAXR; n++)
        k += (size_t)snprintf(out + k, sizeof out - k, " %.2fx |", single / ms[n]);
    k += (size_t)snprintf(out + k, sizeof out - k, "\n| memory imbalance (target <= 1.05) |");
    for (int n = 0; n < MAXR; n++)
        k += (size_t)snprintf(out + k, sizeof out - k, " %.3f |", imb[n]);
    static const size_t mib[2] = {4, 64};
    for (int s = 0; s < 2; s++) {
        size_t bytes = mib[s] << 20;
        double ring[MAXR] = {0}, plain[MAXR] = {0};
        for (int n = 2; n <= MAXR; n++) {
            ring[n - 1] = bench_ring(n, bytes);
            plain[n - 1] = bench_memcpy(n, bytes);
            fprintf(stderr, "all-reduce %zu MiB, %d GPUs: ring %.2f ms (%.2f GB/s), memcpy %.2f "
                            "ms (%.2f GB/s)\n",
                    mib[s], n, ring[n - 1] * 1e3, (double)bytes / ring[n - 1] / 1e9,
                    plain[n - 1] * 1e3, (double)bytes / plain[n - 1] / 1e9);
        }
        k += (size_t)snprintf(out + k, sizeof out - k,
                              "\n| ring all-reduce, %zu MiB per rank (GB/s) | |", mib[s]);
        for (int n = 2; n <= MAXR; n++)
            k += (size_t)snprintf(out + k, sizeof out - k, " %.2f |",
                                  (double)bytes / ring[n - 1] / 1e9);
        k += (size_t)snprintf(out + k, sizeof out - k,
                              "\n| memcpy reduction, one thread, %zu MiB (GB/s) | |", mib[s]);
        for (int n = 2; n <= MAXR; n++)
            k += (size_t)snprintf(out + k, sizeof out - k, " %.2f |",
                                  (double)bytes / plain[n - 1] / 1e9);
        k += (size_t)snprintf(out + k, sizeof out - k, "\n| ring / memcpy, %zu MiB | |", mib[s]);
        for (int n = 2; n <= MAXR; n++)
            k += (size_t)snprintf(out + k, sizeof out - k, " %.2fx |", plain[n - 1] / ring[n - 1]);
    }
    k += (size_t)snprintf(out + k, sizeof out - k, "\n");
    fputs(out, stdout);
    if (md) {
        FILE *f = fopen(md, "w");
        if (!f || fputs(out, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "bench_mirrored: cannot write %s\n", md);
            return 1;
        }
    }
    vdev_shutdown();
    return 0;
}
