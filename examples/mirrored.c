/* mirrored.c — one model trained data-parallel on every logical GPU with the
 * mirrored strategy (vdev demo --mirrored).
 *
 * A classifier (an MLP, 32 -> 256 -> 4, Adam) learns which quadrant the
 * first two of its 32 inputs fall in. Each step makes a global batch on the
 * host (CPU:0, so no GPU holds more than another), and the strategy runs the
 * step on every replica at once: each takes its rows, computes the
 * per-example cross-entropy and TensorFlow's compute_average_loss, and
 * apply_gradients sums the gradients over the replicas with vdev's ring
 * before the same Adam update on each. The demo prints the loss (and each
 * replica's loss on its own rows), checks that the replicas are still
 * identical bit for bit, shows each replica's memory and the imbalance
 * figure, then trains the same model from the same start on one GPU with the
 * same global batch and compares the step rates.
 *
 * Written with the public header alone, like the other demo programs; the
 * options are theirs (examples/demo.c parses them and holds its usage), with
 * defaults of its own: one epoch of 200 steps, a global batch of 1024.
 * Without a GPU it simulates four (VDEV_SIM_GPUS=4x16GiB). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "demo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IN 32
#define HIDDEN 256
#define CLASSES 4
#define NV 4 /* W0, b0, W1, b1 */

static const int64_t sizes[3] = {IN, HIDDEN, CLASSES};

struct job {
    int n;                                     /* replicas */
    vdev_mlp_t *mlp[VDEV_MAX_REPLICAS];
    vdev_optimizer_t *adam[VDEV_MAX_REPLICAS];
    vdev_tensor_t *vars[VDEV_MAX_REPLICAS][NV];
    vdev_tensor_t *x, *onehot;                 /* the global batch, on CPU:0 */
    uint64_t seed;
    int want_losses;                           /* read each replica's loss (a sync) */
    float replica_loss[VDEV_MAX_REPLICAS];     /* mean over its own rows */
    int64_t replica_rows[VDEV_MAX_REPLICAS];   /* its rows (0: no mean to show) */
};

#define DIE(what) return fprintf(stderr, "%s: %s: %s\n", o.prog, what, vdev_last_error()), 1

/* Each replica builds the model from the same seed on its own device, then
 * takes replica 0's values, so the replicas start identical. */
static enum vdev_status build(vdev_replica_context_t *ctx, void *u)
{
    struct job *j = u;
    int r = vdev_replica_id(ctx);
    j->mlp[r] = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, j->seed);
    j->adam[r] = vdev_adam_new(0.003f, 0.9f, 0.999f, 1e-7f);
    if (!j->mlp[r] || !j->adam[r])
        return vdev_last_status();
    vdev_mlp_variables(j->mlp[r], j->vars[r], NV);
    return vdev_replica_broadcast(ctx, j->vars[r], NV, 0);
}

/* -sum(onehot * log_softmax(model(x)), axis 1): the loss of each example. */
static vdev_tensor_t *per_example(vdev_mlp_t *mlp, const vdev_tensor_t *x,
                                  const vdev_tensor_t *onehot)
{
    vdev_tensor_t *lp = vdev_log_softmax(vdev_mlp_forward(mlp, x));
    return vdev_mul_scalar(vdev_sum(vdev_mul(onehot, lp), 1, false), -1.0f);
}

/* One step on this replica's rows of the global batch. */
static enum vdev_status step(vdev_replica_context_t *ctx, void *u)
{
    struct job *j = u;
    int r = vdev_replica_id(ctx);
    vdev_tensor_t *x = vdev_replica_batch(ctx, j->x);
    vdev_tensor_t *t = vdev_replica_batch(ctx, j->onehot);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *per = per_example(j->mlp[r], x, t);
    vdev_tensor_t *loss = vdev_replica_compute_average_loss(ctx, per, 0);
    vdev_tensor_t *grads[NV];
    enum vdev_status st =
        loss ? vdev_tape_gradient(tape, loss, j->vars[r], NV, grads) : vdev_last_status();
    vdev_tape_end(tape);
    if (st == VDEV_OK)
        st = vdev_replica_apply_gradients(ctx, j->adam[r], j->vars[r], grads, NV);
    if (st == VDEV_OK && j->want_losses) {
        j->replica_rows[r] = vdev_tensor_dim(per, 0);
        j->replica_loss[r] = j->replica_rows[r] ? vdev_tensor_item(vdev_mean_all(per)) : 0;
    }
    return st == VDEV_OK ? vdev_replica_return(ctx, loss) : st;
}

/* The global batch of step k: x uniform in [-1, 1] and the one-hot quadrant
 * of (x0, x1), made on the host. Returns 0, or 1 (error set). */
static int make_batch(struct job *j, int64_t rows, uint64_t k)
{
    vdev_tensor_free(j->x);
    vdev_tensor_free(j->onehot);
    j->x = j->onehot = NULL;
    float *x = malloc((size_t)rows * IN * sizeof *x);
    float *h = calloc((size_t)rows * CLASSES, sizeof *h);
    int rc = 1;
    if (x && h && vdev_device_push("CPU:0") == VDEV_OK) {
        int64_t xs[2] = {rows, IN}, hs[2] = {rows, CLASSES};
        vdev_tensor_t *u = vdev_tensor_uniform(xs, 2, -1, 1, j->seed * 7919 + k);
        if (u && vdev_tensor_to_host(u, x, (size_t)rows * IN * sizeof *x) == VDEV_OK) {
            for (int64_t i = 0; i < rows; i++)
                h[i * CLASSES + (x[i * IN] > 0) * 2 + (x[i * IN + 1] > 0)] = 1;
            j->x = u;
            j->onehot = vdev_tensor_from_host(h, hs, 2, VDEV_F32);
            rc = !j->onehot;
        } else {
            vdev_tensor_free(u);
        }
        vdev_device_pop();
    }
    free(x);
    free(h);
    return rc;
}

/* The same model and global batch on one device: one step, timed by the
 * caller. Returns the loss, or NaN (error set). */
static float one_device_step(const char *dev, vdev_mlp_t *mlp, vdev_optimizer_t *adam,
                             vdev_tensor_t **vars, struct job *j)
{
    float l = NAN;
    vdev_scope_begin();
    vdev_device_push(dev);
    vdev_tensor_t *x = vdev_identity(j->x), *t = vdev_identity(j->onehot), *grads[NV];
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *per = per_example(mlp, x, t);
    vdev_tensor_t *loss = vdev_div(vdev_sum_all(per), vdev_tensor_fill(NULL, 0, VDEV_F32,
                                                                       (double)vdev_tensor_dim(j->x, 0)));
    enum vdev_status st = vdev_tape_gradient(tape, loss, vars, NV, grads);
    vdev_tape_end(tape); /* before the update: a live tape would keep the old values */
    if (st == VDEV_OK && vdev_optimizer_apply(adam, vars, grads, NV) == VDEV_OK)
        l = vdev_tensor_item(loss);
    vdev_device_pop();
    vdev_scope_end();
    return l;
}

/* 1 when every replica's variables equal replica 0's, bit for bit. */
static int replicas_identical(const struct job *j)
{
    int same = 1;
    for (int v = 0; v < NV && same; v++) {
        size_t bytes = (size_t)vdev_tensor_numel(j->vars[0][v]) * 4;
        float *a = malloc(bytes), *b = malloc(bytes);
        same = a && b && vdev_tensor_to_host(j->vars[0][v], a, bytes) == VDEV_OK;
        for (int r = 1; r < j->n && same; r++)
            same = vdev_tensor_to_host(j->vars[r][v], b, bytes) == VDEV_OK && !memcmp(a, b, bytes);
        free(a);
        free(b);
    }
    return same;
}

int vdev_example_mirrored(int argc, char **argv);
int vdev_example_mirrored(int argc, char **argv)
{
    struct demo_opts o;
    int rc = demo_parse(argc, argv, DEMO_MIRRORED, &o);
    if (rc >= 0)
        return rc;

    int n_phys;
    if (vdev_list_physical_devices(NULL, 0, &n_phys) != VDEV_OK)
        DIE("devices");
    /* Why it simulates GPUs, said once the demo knows it runs on them (read
     * now: the reason is the first start-up's). */
    char simulated[256] = "";
    if (n_phys == 1 && !getenv("VDEV_SIM_GPUS")) {
        const char *sim = demo_simulated_gpus(DEMO_MIRRORED);
        snprintf(simulated, sizeof simulated,
                 "No GPU found (%s): running on simulated GPUs, VDEV_SIM_GPUS=%s",
                 vdev_gpu_absence_reason(), sim);
        if (setenv("VDEV_SIM_GPUS", sim, 1) != 0)
            return fprintf(stderr, "%s: cannot set VDEV_SIM_GPUS\n", o.prog), 1;
        vdev_shutdown(); /* forget the devices found so far */
    }
    vdev_strategy_t *s;
    if (vdev_init() != VDEV_OK)
        DIE("start-up");
    int n_vis;
    if (vdev_config_get_visible_devices(NULL, 0, &n_vis) != VDEV_OK ||
        vdev_list_physical_devices(NULL, 0, &n_phys) != VDEV_OK)
        DIE("visible devices");
    if (n_vis == 0) /* it runs nothing: no word of simulated GPUs */
        return demo_no_gpu(o.prog, n_phys - 1, simulated[0] != '\0');
    if (simulated[0])
        printf("%s\n", simulated);
    demo_say_metrics();
    if (vdev_mirrored_strategy_new(NULL, 0, &s) != VDEV_OK)
        DIE("the strategy");
    if (o.log_placement)
        vdev_set_log_device_placement(true);
    struct job j;
    memset(&j, 0, sizeof j);
    j.n = vdev_strategy_num_replicas_in_sync(s);
    j.seed = (uint64_t)o.seed;
    printf("Replicas: %d, on", j.n);
    for (int r = 0; r < j.n; r++)
        printf(" %s", vdev_strategy_device(s, r));
    /* how the global batch splits: rows per replica, or for a batch
     * smaller than the replicas, which have a row */
    char split[96];
    if (o.batch < j.n)
        snprintf(split, sizeof split, "a row on %ld of the %d replicas, none on the other%s",
                 o.batch, j.n, j.n - o.batch > 1 ? "s" : "");
    else
        snprintf(split, sizeof split, "%ld per replica%s", o.batch / j.n,
                 o.batch % j.n ? ", a row more on some" : "");
    long n_steps = o.epochs * o.steps;
    printf("\nModel: MLP %d-%d-%d, Adam; global batch %ld (%s), %ld step%s\n", IN, HIDDEN,
           CLASSES, o.batch, split, n_steps, n_steps == 1 ? "" : "s");
    if (vdev_strategy_run(s, build, &j, NULL) != VDEV_OK)
        DIE("building the replicas");
    for (int r = 0; r < j.n; r++)
        vdev_memory_reset_peak(vdev_strategy_device(s, r));

    long every = n_steps >= 10 ? n_steps / 10 : 1;
    float first = NAN, last = NAN;
    double t_mirrored = 0;
    for (long k = 0; k < n_steps; k++) {
        if (make_batch(&j, o.batch, (uint64_t)k))
            DIE("making the batch");
        j.want_losses = k % every == 0 || k == n_steps - 1;
        vdev_tensor_t *losses[VDEV_MAX_REPLICAS];
        double t0 = vdev_clock_seconds();
        if (vdev_strategy_run(s, step, &j, losses) != VDEV_OK)
            DIE("training");
        vdev_tensor_t *total = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, losses);
        if (!total) /* vdev_tensor_item(NULL) would be NaN: a loss, not an error */
            DIE("reducing the losses");
        last = vdev_tensor_item(total); /* waits for every replica's step */
        if (!j.want_losses)
            t_mirrored += vdev_clock_seconds() - t0;
        if (k == 0)
            first = last;
        vdev_tensor_free(total);
        for (int r = 0; r < j.n; r++)
            vdev_tensor_free(losses[r]);
        if (j.want_losses) {
            printf("step %4ld  loss %.4f  replicas", k, last);
            for (int r = 0; r < j.n; r++) /* no rows, no mean: "-" */
                if (j.replica_rows[r])
                    printf(" %.4f", j.replica_loss[r]);
                else
                    printf(" -");
            printf("\n");
        }
    }
    /* the direction of the numbers as printed */
    char f4[32], l4[32];
    snprintf(f4, sizeof f4, "%.4f", first);
    snprintf(l4, sizeof l4, "%.4f", last);
    if (!strcmp(f4, l4))
        printf("Loss stayed at %s", f4);
    else
        printf("Loss %s %s -> %s", last < first ? "fell" : "rose", f4, l4);
    printf("; replicas identical bit for bit: %s\n", replicas_identical(&j) ? "yes" : "NO");

    printf("Memory per replica (in use, peak, limit):\n");
    char b1[32], b2[32], b3[32];
    for (int r = 0; r < j.n; r++) {
        struct vdev_memory_info mi;
        if (vdev_strategy_memory_info(s, r, &mi) != VDEV_OK)
            DIE("memory");
        printf("  replica %d  %-14s %10s %10s %10s\n", r, vdev_strategy_device(s, r),
               vdev_format_bytes(mi.bytes_in_use, b1, 32),
               vdev_format_bytes(mi.peak_bytes_in_use, b2, 32),
               vdev_format_bytes(mi.bytes_limit, b3, 32));
    }
    printf("Memory imbalance (largest peak / smallest): %.3f\n",
           vdev_strategy_memory_imbalance(s));

    /* The same model, from the same start, on one GPU with the same batch. */
    const char *one = vdev_strategy_device(s, 0);
    vdev_device_push(one);
    vdev_mlp_t *mlp = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, j.seed);
    vdev_device_pop();
    vdev_optimizer_t *adam = vdev_adam_new(0.003f, 0.9f, 0.999f, 1e-7f);
    vdev_tensor_t *vars[NV];
    if (!mlp || !adam || vdev_mlp_variables(mlp, vars, NV) != NV)
        DIE("the one-device model");
    double t_one = 0;
    long timed = 0;
    float one_last = NAN;
    for (long k = 0; k < n_steps; k++) {
        if (make_batch(&j, o.batch, (uint64_t)k))
            DIE("making the batch");
        double t0 = vdev_clock_seconds();
        one_last = one_device_step(one, mlp, adam, vars, &j);
        if (one_last != one_last)
            DIE("training on one device");
        if (!(k % every == 0 || k == n_steps - 1)) {
            t_one += vdev_clock_seconds() - t0;
            timed++;
        }
    }
    /* the rate leaves out the steps that print their losses: under 20
     * steps every step does, and there is none to time */
    if (timed > 0 && t_mirrored > 0 && t_one > 0)
        printf("Step rate: %d replicas %.1f steps/s (%.0f examples/s); one GPU, same global batch, "
               "%.1f steps/s: %.2fx\n",
               j.n, timed / t_mirrored, timed / t_mirrored * (double)o.batch, timed / t_one,
               t_one / t_mirrored);
    else if (timed == 0)
        printf("Step rate: not measured: only the steps that print no losses are timed, and "
               "under 20 steps every step prints them\n");
    printf("One GPU after %ld steps: loss %.4f (mirrored: %.4f)\n", n_steps, one_last, last);
    vdev_mlp_free(mlp);
    vdev_optimizer_free(adam);
    for (int r = 0; r < j.n; r++) {
        vdev_mlp_free(j.mlp[r]);
        vdev_optimizer_free(j.adam[r]);
    }
    vdev_tensor_free(j.x);
    vdev_tensor_free(j.onehot);
    vdev_strategy_free(s);
    vdev_shutdown();
    return 0;
}

#ifndef VDEV_EXAMPLE_NO_MAIN
int main(int argc, char **argv) { return vdev_example_mirrored(argc, argv); }
#endif
