/* chain3.c — the main job: three models on three GPUs, chained.
 *
 * Model 1 runs on GPU:0, model 2 on GPU:1, model 3 on GPU:2. Model 2 takes
 * model 1's output, model 3 takes model 2's. Each has its own target (from a
 * fixed random "teacher" network), its own loss and its own Adam, and each
 * one's training step runs inside its own device scope, so every byte and
 * every op of it stays on its GPU. The GPUs are chosen from what the machine
 * has (demo.c): three or more GPUs carry one model each, two GPUs are used
 * both, one is split into three logical GPUs sized from its budget, and
 * without a GPU three simulated ones stand in. Run it as `vdev demo` or as
 * this program; --help lists the options. */
#include "demo.h"

#include <string.h>

#define DIE(what) return fprintf(stderr, "%s: %s: %s\n", o.prog, what, vdev_last_error()), 1

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    return vdev_memory_info(dev, &mi) == VDEV_OK ? mi.bytes_in_use : 0;
}

int vdev_example_chain3(int argc, char **argv);
int vdev_example_chain3(int argc, char **argv)
{
    struct demo_opts o;
    int rc = demo_parse(argc, argv, DEMO_CHAIN3, &o);
    if (rc >= 0)
        return rc;
    struct demo_devices devs;
    if (demo_start(&o, DEMO_CHAIN3, &devs))
        return 1;
    if (o.log_placement)
        vdev_set_log_device_placement(true);
    const char *dev[3] = {devs.name[0], devs.name[1], devs.name[2]};
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
    if (vdev_list_logical_devices(ld, 4, &n_ld) != VDEV_OK)
        DIE("listing the logical devices");
    printf("Training 3 chained MLPs (batch %ld, %ld step%s per epoch):\n", o.batch, o.steps,
           o.steps == 1 ? "" : "s");
    for (int k = 0; k < 3 && k + 1 < n_ld && k + 1 < 4; k++) {
        char b[32];
        printf("  model %d on %s: %s GPU %d, limit %s\n", k + 1, ld[k + 1].name,
               strcmp(ld[k + 1].backend, "sim") ? ld[k + 1].backend : "simulated",
               ld[k + 1].physical_index, vdev_format_bytes(devs.limit_bytes[k], b, sizeof b));
    }
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
                /* The previous model's output is copied to this model's GPU
                 * explicitly (not by the copy placement policy), so the step
                 * runs under every policy, strict included. */
                vdev_tensor_t *in_c = NULL, *clean_c = NULL; /* the copies, freed after use */
                if (k && strcmp(dev[k], dev[k - 1]) &&
                    (!(in = in_c = vdev_tensor_to(in, dev[k])) ||
                     !(clean = clean_c = vdev_tensor_to(clean, dev[k]))))
                    DIE("copying the input");
                vdev_device_push(dev[k]);
                vdev_tensor_t *target = vdev_mlp_forward(teacher[k], clean);
                vdev_tensor_free(clean_c); /* as soon as the copy policy's own would go */
                vdev_tape_t *tape = vdev_tape_begin();
                vdev_tensor_t *y = vdev_mlp_forward(model[k], in);
                vdev_tensor_t *loss = vdev_mse(y, target), *grads[6];
                if (vdev_tape_gradient(tape, loss, vars[k], 6, grads) != VDEV_OK)
                    DIE("gradients");
                vdev_tape_end(tape);
                vdev_tensor_free(in_c);
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
    /* one epoch has no first loss to compare with (its ratio would be 1) */
    if (o.epochs == 1)
        printf("Final loss / first loss: one epoch, nothing to compare (--epochs 2 or more)\n");
    for (int k = 0; k < 3 && o.epochs > 1; k++)
        printf("%s model %d %.3f%s", k ? "" : "Final loss / first loss:", k + 1,
               last[k] / first[k], k < 2 ? "," : "\n");
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
