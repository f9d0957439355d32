/* split.c — two models on one GPU, each with a hard memory limit.
 *
 * "I want model A to get 4 GB and model B 2 GB of the same card, and a number
 * that says how much each really uses." One physical GPU (a simulated 8 GiB
 * card where no GPU is present) is split into two logical GPUs of 4 GiB and
 * 2 GiB (2/3 and 1/3 of a card with less than 6 GiB to give; demo.c) that
 * grow on demand up to their limits. Both models train; then model
 * B is given a batch too large for its device. The allocation fails with a
 * clean out-of-memory error, nothing leaks, model B halves its batch until it
 * fits and goes on, and model A's memory and training are never disturbed. */
#include "demo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DIE(what) return fprintf(stderr, "%s: %s: %s\n", o.prog, what, vdev_last_error()), 1

#define HIDDEN 8192 /* the models' hidden layer: 16 -> 8192 -> 4 */
static const int64_t sizes[3] = {16, HIDDEN, 4};

struct model {
    const char *dev;
    vdev_mlp_t *mlp;
    vdev_optimizer_t *adam;
    vdev_tensor_t *vars[4];
};

/* One training step on a batch; the model's classes come from the sign of
 * the first two inputs (a task it can learn). Returns the loss, or NaN with
 * vdev_last_error() set (for instance VDEV_ERR_OOM). */
static float step(struct model *m, int64_t batch, uint64_t seed)
{
    float loss_value = NAN;
    vdev_scope_begin();
    vdev_device_push(m->dev);
    int64_t xs[2] = {batch, 16}, ls[1] = {batch};
    vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, seed);
    int32_t *labels = malloc((size_t)batch * sizeof *labels);
    float *host = malloc((size_t)batch * 16 * sizeof *host);
    if (x && labels && host && vdev_tensor_to_host(x, host, (size_t)batch * 16 * 4) == VDEV_OK) {
        for (int64_t i = 0; i < batch; i++)
            labels[i] = (host[i * 16] > 0) * 2 + (host[i * 16 + 1] > 0);
        vdev_tensor_t *y = vdev_tensor_from_host(labels, ls, 1, VDEV_I32), *grads[4];
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *loss = vdev_softmax_cross_entropy(vdev_mlp_forward(m->mlp, x), y);
        enum vdev_status st = vdev_tape_gradient(tape, loss, m->vars, 4, grads);
        vdev_tape_end(tape); /* before the update: a live tape would keep the old values */
        if (st == VDEV_OK && vdev_optimizer_apply(m->adam, m->vars, grads, 4) == VDEV_OK)
            loss_value = vdev_tensor_item(loss);
    }
    free(labels);
    free(host);
    vdev_device_pop();
    vdev_scope_end(); /* frees everything the step made, failed or not */
    return loss_value;
}

static void show(const char *dev)
{
    struct vdev_memory_info mi;
    char a[32], b[32], c[32];
    vdev_memory_info(dev, &mi);
    printf("  %s: %s in use, peak %s, limit %s\n", dev,
           vdev_format_bytes(mi.bytes_in_use, a, 32), vdev_format_bytes(mi.peak_bytes_in_use, b, 32),
           vdev_format_bytes(mi.bytes_limit, c, 32));
}

int vdev_example_split(int argc, char **argv);
int vdev_example_split(int argc, char **argv)
{
    struct demo_opts o;
    int rc = demo_parse(argc, argv, DEMO_SPLIT, &o);
    if (rc >= 0)
        return rc;
    struct demo_devices devs;
    if (demo_start(&o, DEMO_SPLIT, &devs))
        return 1;
    if (o.log_placement)
        vdev_set_log_device_placement(true);
    struct model ms[2] = {{.dev = devs.name[0]}, {.dev = devs.name[1]}};
    for (int k = 0; k < 2; k++) {
        vdev_device_push(ms[k].dev);
        ms[k].mlp = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, (uint64_t)o.seed + 6 + k);
        vdev_device_pop();
        ms[k].adam = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
        if (!ms[k].mlp || !ms[k].adam)
            DIE("building the models");
        vdev_mlp_variables(ms[k].mlp, ms[k].vars, 4);
    }
    /* The batch too large for model B: its first layer's output alone
     * (batch x 8192 floats) fills B's whole limit. */
    int64_t big = 2 * (int64_t)o.batch;
    while ((uint64_t)big * HIDDEN * sizeof(float) < devs.limit_bytes[1])
        big *= 2;
    char b1[32], b2[32];
    printf("Model A on %s (%s), model B on %s (%s), one physical GPU; batch %ld, and %lld for "
           "model B at step %ld\n",
           ms[0].dev, vdev_format_bytes(devs.limit_bytes[0], b1, sizeof b1), ms[1].dev,
           vdev_format_bytes(devs.limit_bytes[1], b2, sizeof b2), o.batch, (long long)big,
           o.steps / 2);
    int64_t batch_b = o.batch;
    long n_steps = o.epochs * o.steps;
    float first[2] = {0}, last[2] = {0};
    for (long s = 0; s < n_steps; s++) {
        for (int k = 0; k < 2; k++) {
            int64_t batch = k == 1 && s == o.steps / 2 ? big : k == 1 ? batch_b : o.batch;
            uint64_t seed = 100 * (uint64_t)s + (uint64_t)k + 1000003 * (uint64_t)(o.seed - 1);
            float l = step(&ms[k], batch, seed);
            while (l != l && vdev_last_status() == VDEV_ERR_OOM && batch > 1) {
                printf("step %ld, model %c, batch %lld: %s\n", s, 'A' + k, (long long)batch,
                       vdev_last_error());
                batch /= 2;
                printf("  model %c lowers its batch to %lld and goes on\n", 'A' + k,
                       (long long)batch);
                l = step(&ms[k], batch, seed);
            }
            if (l != l)
                DIE("training");
            if (k == 1 && s == o.steps / 2)
                batch_b = batch < o.batch ? batch : o.batch;
            last[k] = l;
            if (s == 0)
                first[k] = l;
        }
        if (s % 10 == 0 || s == n_steps - 1)
            printf("step %3ld  loss  model A %.4f  model B %.4f\n", s, last[0], last[1]);
    }
    printf("Loss: ");
    for (int k = 0; k < 2; k++) {
        /* the direction of the numbers as printed, as the mirrored demo says it */
        char f4[32], l4[32];
        snprintf(f4, sizeof f4, "%.4f", first[k]);
        snprintf(l4, sizeof l4, "%.4f", last[k]);
        printf("%smodel %c ", k ? ", " : "", 'A' + k);
        if (!strcmp(f4, l4))
            printf("stayed at %s", f4);
        else
            printf("%s %s -> %s", last[k] < first[k] ? "fell" : "rose", f4, l4);
    }
    printf("\n");
    show(ms[0].dev);
    show(ms[1].dev);
    for (int k = 0; k < 2; k++) {
        vdev_mlp_free(ms[k].mlp);
        vdev_optimizer_free(ms[k].adam);
    }
    vdev_shutdown(); /* waits for the GPUs' streams and frees their memory */
    return 0;
}

#ifndef VDEV_EXAMPLE_NO_MAIN
int main(int argc, char **argv) { return vdev_example_split(argc, argv); }
#endif
