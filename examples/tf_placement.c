/* tf_placement.c — the bug report, reproduced: "I bound three models to GPU
 * 0, 1 and 2, but only GPU 0's memory grows."
 *
 * The program is written as the user wrote it: device scopes only around
 * building the models; the training step (forward, loss, gradients, update)
 * runs outside any scope. Under TensorFlow's placement rule (the default
 * here, --vdev-placement to switch it off) every unscoped op lands on the
 * default device, GPU:0, and the placement audit names every op that ran
 * away from its model's GPU. Under vdev's own rule (the copy policy, set in
 * code whatever VDEV_PLACEMENT says) the same program runs each model on its
 * own GPU, because an unscoped op follows its variables. */
#include "demo.h"

#define DIE(what) return fprintf(stderr, "%s: %s: %s\n", o.prog, what, vdev_last_error()), 1

int vdev_example_tf_placement(int argc, char **argv);
int vdev_example_tf_placement(int argc, char **argv)
{
    struct demo_opts o;
    int rc = demo_parse(argc, argv, DEMO_TF_PLACEMENT, &o);
    if (rc >= 0)
        return rc;
    struct demo_devices devs;
    if (demo_start(&o, DEMO_TF_PLACEMENT, &devs))
        return 1;
    /* Either rule is set in code, which wins over VDEV_PLACEMENT, so the
     * rule printed is the one in force; vdev's is the copy policy (the
     * models are chained: each takes the previous one's output from its
     * GPU). */
    int tf_rule = !o.vdev_placement;
    if (vdev_set_placement_policy(tf_rule ? VDEV_PLACEMENT_TF : VDEV_PLACEMENT_COPY) != VDEV_OK)
        DIE("placement policy");
    if (o.log_placement)
        vdev_set_log_device_placement(true);
    printf("Placement rule: %s\n", tf_rule ? "TensorFlow's (unscoped ops go to GPU:0)"
                                           : "vdev's (unscoped ops follow their variables)");

    const char *dev[3] = {devs.name[0], devs.name[1], devs.name[2]};
    for (int k = 0; k < 3; k++) {
        char b[32];
        printf("  model %d built on %s (limit %s)\n", k + 1, dev[k],
               vdev_format_bytes(devs.limit_bytes[k], b, sizeof b));
    }
    int64_t dims[4] = {32, 64, 64, 32};
    vdev_mlp_t *model[3];
    vdev_optimizer_t *adam[3];
    vdev_tensor_t *vars[3][6];
    for (int k = 0; k < 3; k++) {
        vdev_device_push(dev[k]); /* "with tf.device(...): model = build()" */
        model[k] = vdev_mlp_new(dims, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, (uint64_t)o.seed + k);
        vdev_device_pop();
        adam[k] = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
        if (!model[k] || !adam[k])
            DIE("building the models");
        vdev_mlp_variables(model[k], vars[k], 6);
    }
    /* The training step, outside any device scope, as in the report. */
    for (long e = 0; e < o.epochs; e++) {
        float last[3] = {0};
        for (long s = 0; s < o.steps; s++) {
            vdev_scope_begin();
            int64_t xs[2] = {o.batch, dims[0]};
            uint64_t seed = 1000 * (uint64_t)o.seed + (uint64_t)(e * o.steps + s);
            vdev_tensor_t *in = vdev_tensor_uniform(xs, 2, -1, 1, seed);
            vdev_tensor_t *target = vdev_tanh(in);
            for (int k = 0; k < 3; k++) {
                vdev_tape_t *tape = vdev_tape_begin();
                vdev_tensor_t *y = vdev_mlp_forward(model[k], in);
                vdev_tensor_t *loss = vdev_mse(y, target), *grads[6];
                if (vdev_tape_gradient(tape, loss, vars[k], 6, grads) != VDEV_OK)
                    DIE("gradients");
                vdev_tape_end(tape);
                if (vdev_optimizer_apply(adam[k], vars[k], grads, 6) != VDEV_OK)
                    DIE("update");
                if (s == o.steps - 1)
                    last[k] = vdev_tensor_item(loss);
                in = y;
            }
            vdev_scope_end();
        }
        printf("epoch %ld/%ld  loss  model 1 %.5f  model 2 %.5f  model 3 %.5f\n", e + 1,
               o.epochs, last[0], last[1], last[2]);
    }
    printf("\nWhere the work ran after %ld steps:\n", o.epochs * o.steps);
    vdev_device_report(stdout);
    struct vdev_audit_entry audit[64];
    int n_audit;
    vdev_placement_audit(audit, 64, &n_audit);
    printf("\nPlacement audit: %d kind%s of op ran away from their model's GPU\n", n_audit,
           n_audit == 1 ? "" : "s");
    for (int i = 0; i < n_audit && i < 64; i++)
        printf("  %6llu x %-28s ran on %s, variables on %s, %llu bytes copied there\n",
               (unsigned long long)audit[i].count, audit[i].op_type, audit[i].ran_on,
               audit[i].home, (unsigned long long)audit[i].bytes_copied);
    for (int k = 0; k < 3; k++) {
        vdev_mlp_free(model[k]);
        vdev_optimizer_free(adam[k]);
    }
    vdev_shutdown(); /* waits for the GPUs' streams and frees their memory */
    return 0;
}

#ifndef VDEV_EXAMPLE_NO_MAIN
int main(int argc, char **argv) { return vdev_example_tf_placement(argc, argv); }
#endif
