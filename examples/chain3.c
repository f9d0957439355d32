/* chain3.c — the main job: three models on three GPUs, chained.
 *
 * Model 1 runs on GPU:0, model 2 on GPU:1, model 3 on GPU:2. Model 2 takes
 * model 1's output, model 3 takes model 2's. Each has its own target (from a
 * fixed random "teacher" network), its own loss and its own Adam, and each
 * one's training step runs inside its own device scope, so every byte and
 * every op of it stays on its GPU. Where no GPU is present it runs on three
 * simulated GPUs; on one real GPU, on three logical GPUs carved out of it.
 * Run it as `vdev demo` or as this program; --help lists the options. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "vdev.h"

#include <stdlib.h>
#include <string.h>

#define DIE(what) return fprintf(stderr, "demo: %s: %s\n", what, vdev_last_error()), 1

struct opts {
    long epochs, steps, batch, seed;
    int log_placement;
};

/* Returns -1 to go on, else the exit status. */
static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.epochs = 5, .steps = 100, .batch = 64, .seed = 1};
    const char *names[4] = {"--epochs", "--steps", "--batch", "--seed"};
    long *vals[4] = {&o->epochs, &o->steps, &o->batch, &o->seed};
    for (int i = 1; i < argc; i++) {
        int k = 0;
        while (k < 4 && strcmp(argv[i], names[k]))
            k++;
        if (k < 4 && i + 1 < argc && atol(argv[i + 1]) > 0) {
            *vals[k] = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--log-placement")) {
            o->log_placement = 1;
        } else {
            printf("usage: vdev demo [--epochs N] [--steps N] [--batch N] [--seed N] "
                   "[--log-placement]\n\nTrains three chained MLPs, one per GPU, and prints "
                   "each model's loss per epoch\nand what every device ran, holds and copied.\n");
            return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
        }
    }
    return -1;
}

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    return vdev_memory_info(dev, &mi) == VDEV_OK ? mi.bytes_in_use : 0;
}

/* Three GPUs: real ones, three logical GPUs on one real GPU, or simulated. */
static int setup_devices(void)
{
    int n;
    if (vdev_list_physical_devices(NULL, 0, &n) != VDEV_OK)
        DIE("devices");
    if (n - 1 == 0 && !getenv("VDEV_SIM_GPUS")) {
        printf("No GPU found (%s): using three simulated GPUs.\n", vdev_gpu_absence_reason());
        setenv("VDEV_SIM_GPUS", "3x16GiB", 1);
        vdev_shutdown(); /* forget the devices found so far */
    } else if (n - 1 < 3) {
        uint64_t lim[3] = {4ull << 30, 4ull << 30, 4ull << 30};
        if (vdev_config_set_logical_devices("GPU:0", lim, 3) != VDEV_OK)
            DIE("splitting GPU:0 into three logical GPUs");
    }
    if (vdev_init() != VDEV_OK)
        DIE("start-up");
    return 0;
}

int vdev_example_chain3(int argc, char **argv);
int vdev_example_chain3(int argc, char **argv)
{
    struct opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (setup_devices())
        return 1;
    vdev_set_log_device_placement(o.log_placement);
    const char *dev[3] = {"GPU:0", "GPU:1", "GPU:2"};
    int64_t dims[3][4] = {{32, 64, 64, 16}, {16, 64, 64, 16}, {16, 64, 64, 8}};
    vdev_mlp_t *teacher[3], *model[3];
    vdev_optimizer_t *adam[3];
    vdev_tensor_t *vars[3][6], *loss_sum[3];
    int64_t scalar[1] = {1};
    for (int k = 0; k < 3; k++) { /* each model lives on its own GPU */
        vdev_device_push(dev[k]);
        teacher[k] = vdev_mlp_new(dims[k], 4, VDEV_ACT_TANH, VDEV_ACT_TANH, o.seed + 100 + k);
        model[k] = vdev_mlp_new(dims[k], 4, VDEV_ACT_RELU, VDEV_ACT_NONE, o.seed + k);
        loss_sum[k] = vdev_variable(vdev_tensor_zeros(scalar, 1, VDEV_F32));
        vdev_device_pop();
        adam[k] = vdev_adam_new(0.003f, 0.9f, 0.999f, 1e-7f);
        if (!teacher[k] || !model[k] || !loss_sum[k] || !adam[k])
            DIE("building the models");
        vdev_mlp_variables(model[k], vars[k], 6);
    }
    struct vdev_logical_device ld[4];
    int n_ld;
    vdev_list_logical_devices(ld, 4, &n_ld);
    printf("Training 3 chained MLPs (batch %ld, %ld steps per epoch):\n", o.batch, o.steps);
    for (int k = 0; k < 3 && k + 1 < n_ld; k++)
        printf("  model %d on %s: %s GPU %d\n", k + 1, ld[k + 1].name,
               strcmp(ld[k + 1].backend, "sim") ? ld[k + 1].backend : "simulated",
               ld[k + 1].physical_index);
    double first[3] = {0}, last[3] = {0};
    uint64_t in_use_step1[3] = {0}; /* memory after step 1, to compare with the end */
    for (int e = 0; e < o.epochs; e++) {
        double t0 = vdev_clock_seconds();
        for (int s = 0; s < o.steps; s++) {
            vdev_scope_begin(); /* frees every temporary of the step at its end */
            int64_t xs[2] = {o.batch, dims[0][0]};
            vdev_device_push(dev[0]);
            uint64_t seed = (uint64_t)(o.seed * 7919 + e * o.steps + s); /* a new batch */
            vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, seed);
            vdev_device_pop();
            vdev_tensor_t *in = x, *clean = x; /* model k's input, and the teacher's */
            for (int k = 0; k < 3; k++) {
                vdev_device_push(dev[k]);
                vdev_tensor_t *target = vdev_mlp_forward(teacher[k], clean);
                vdev_tape_t *tape = vdev_tape_begin();
                vdev_tensor_t *y = vdev_mlp_forward(model[k], in);
                vdev_tensor_t *loss = vdev_mse(y, target), *grads[6];
                if (vdev_tape_gradient(tape, loss, vars[k], 6, grads) != VDEV_OK)
                    DIE("gradients");
                vdev_tape_end(tape);
                if (vdev_optimizer_apply(adam[k], vars[k], grads, 6) != VDEV_OK ||
                    vdev_assign(loss_sum[k], vdev_add(loss_sum[k], loss)) != VDEV_OK)
                    DIE("update");
                vdev_device_pop();
                in = y;
                clean = target;
            }
            vdev_scope_end();
            for (int k = 0; k < 3 && e == 0 && s == 0; k++)
                in_use_step1[k] = in_use(dev[k]);
        }
        double dt = vdev_clock_seconds() - t0;
        printf("epoch %d/%ld  loss", e + 1, o.epochs);
        for (int k = 0; k < 3; k++) {
            last[k] = vdev_tensor_item(loss_sum[k]) / o.steps;
            if (e == 0)
                first[k] = last[k];
            printf("  model %d %.5f", k + 1, last[k]);
            vdev_scope_begin();
            vdev_assign(loss_sum[k], vdev_mul_scalar(loss_sum[k], 0.0f));
            vdev_scope_end();
        }
        printf("  (%.1f steps/s)\n", o.steps / dt);
    }
    printf("Final loss / first loss:");
    for (int k = 0; k < 3; k++)
        printf(" model %d %.3f%s", k + 1, last[k] / first[k], k < 2 ? "," : "\n");
    int steady = 1;
    for (int k = 0; k < 3; k++) {
        steady &= in_use(dev[k]) == in_use_step1[k];
        printf("%s in use after step 1: %llu bytes, after step %ld: %llu bytes\n", dev[k],
               (unsigned long long)in_use_step1[k], o.epochs * o.steps,
               (unsigned long long)in_use(dev[k]));
    }
    printf("Memory per step: %s\n\n", steady ? "steady (nothing leaks)" : "GREW (a leak)");
    vdev_device_report(stdout);
    vdev_placement_report(stdout);
    for (int k = 0; k < 3; k++) {
        vdev_mlp_free(teacher[k]);
        vdev_mlp_free(model[k]);
        vdev_optimizer_free(adam[k]);
        vdev_tensor_free(loss_sum[k]);
    }
    vdev_shutdown(); /* waits for the GPUs' streams and frees their memory */
    return 0;
}

#ifndef VDEV_EXAMPLE_NO_MAIN
int main(int argc, char **argv) { return vdev_example_chain3(argc, argv); }
#endif
