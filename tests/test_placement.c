/* test_placement.c — where ops run: device scopes, the rules for unscoped
 * ops, the three policies, gradients on their forward op's device, placement
 * logging, the summary counters and the audit. Runs on three simulated GPUs. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void start(const char *sim, const char *policy)
{
    vdev_shutdown();
    unsetenv("VDEV_PLACEMENT");
    unsetenv("VDEV_LOG_DEVICE_PLACEMENT");
    unsetenv("VDEV_PLACEMENT_REPORT");
    if (sim)
        setenv("VDEV_SIM_GPUS", sim, 1);
    else
        unsetenv("VDEV_SIM_GPUS");
    if (policy)
        setenv("VDEV_PLACEMENT", policy, 1);
    CHECK_OK(vdev_init());
}

static const int64_t S2[2] = {4, 3};

static vdev_tensor_t *on(const char *dev, float v)
{
    vdev_device_push(dev);
    vdev_tensor_t *t = vdev_tensor_fill(S2, 2, VDEV_F32, v);
    vdev_device_pop();
    return t;
}

static void test_scopes(void)
{
    start("3x1GiB", NULL);
    CHECK(vdev_device_current() == NULL);
    vdev_tensor_t *t = vdev_tensor_zeros(S2, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(t), "/device:GPU:0"); /* default device */
    CHECK_OK(vdev_device_push("gpu:1"));
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:1");
    CHECK_OK(vdev_device_push("/job:localhost/replica:0/task:0/device:GPU:2"));
    vdev_tensor_t *u = vdev_relu(t); /* inner scope wins over the input's device */
    CHECK_STR(vdev_tensor_device(u), "/device:GPU:2");
    CHECK_OK(vdev_device_pop());
    vdev_tensor_t *w = vdev_relu(t);
    CHECK_STR(vdev_tensor_device(w), "/device:GPU:1");
    CHECK_OK(vdev_device_pop());
    CHECK_STATUS(vdev_device_pop(), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("without a matching push");
    CHECK_STATUS(vdev_device_push("GPU:3"), VDEV_ERR_NOT_FOUND);
    CHECK_MSG("GPU:3 unknown device");
    CHECK_STATUS(vdev_device_push("TPU:0"), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_device_push("GPU:"), VDEV_ERR_INVALID_ARG);
    /* "" names no device: outside any scope, no constraint (test_placement_scopes) */
    CHECK_OK(vdev_device_push(""));
    CHECK(vdev_device_current() == NULL);
    CHECK_OK(vdev_device_pop());
    CHECK_STATUS(vdev_device_push("/physical_device:GPU:0"), VDEV_ERR_INVALID_ARG);
    CHECK(vdev_device_current() == NULL);
    /* NULL (tf.device(None)) clears the enclosing scopes until its pop */
    CHECK_OK(vdev_device_push("GPU:2"));
    CHECK_OK(vdev_device_push(NULL));
    CHECK(vdev_device_current() == NULL);
    vdev_tensor_t *z = vdev_tensor_zeros(S2, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(z), "/device:GPU:0"); /* the default device */
    vdev_tensor_free(z);
    CHECK_OK(vdev_device_push("GPU")); /* no index: 0, not the cleared scope's 2 */
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:0");
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_pop());
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:2");
    CHECK_OK(vdev_device_pop());
    vdev_tensor_free(t);
    vdev_tensor_free(u);
    vdev_tensor_free(w);
}

/* A scope held across vdev_shutdown() and a start-up with other devices
 * names its device again (by type and index, as TensorFlow resolves a
 * scope's name per op): GPU:0 stays GPU:0, though its slot now holds CPU:1;
 * a device that is gone is an error naming the scope, not an op somewhere
 * else (or, with soft placement, the default device, as a scope pushed now). */
static void test_scope_across_restart(void)
{
    start("2x1GiB", NULL);
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_shutdown();
    setenv("VDEV_LOGICAL_DEVICES", "cpu:2", 1); /* CPU:0, CPU:1, GPU:0, GPU:1 */
    CHECK_OK(vdev_init());
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:0");
    vdev_tensor_t *t = vdev_tensor_ones(S2, 2, VDEV_F32), *u = vdev_relu(t);
    CHECK_STR(vdev_tensor_device(t), "/device:GPU:0");
    CHECK_STR(vdev_tensor_device(u), "/device:GPU:0");
    vdev_tensor_free(t);
    vdev_tensor_free(u);
    CHECK_OK(vdev_device_pop());

    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_shutdown();
    unsetenv("VDEV_LOGICAL_DEVICES");
    setenv("VDEV_SIM_GPUS", "1x1GiB", 1);
    CHECK_OK(vdev_init());
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:1");
    CHECK(vdev_tensor_ones(S2, 2, VDEV_F32) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_NOT_FOUND);
    CHECK_MSG("GPU:1 unknown device");
    CHECK_MSG("(a device scope opened before vdev_shutdown() names it; pop that scope)");
    vdev_clear_error();
    t = on("GPU:0", 1);
    CHECK(vdev_relu(t) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_NOT_FOUND);
    CHECK_MSG("pop that scope");
    vdev_tensor_free(t);
    vdev_config_set_soft_device_placement(true);
    t = vdev_tensor_ones(S2, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(t), "/device:GPU:0");
    vdev_tensor_free(t);
    vdev_config_set_soft_device_placement(false);
    CHECK_OK(vdev_device_pop());
    CHECK(vdev_device_current() == NULL);
}

static void test_unscoped_rules(void)
{
    start("3x1GiB", NULL);
    vdev_tensor_t *a = on("GPU:2", 1), *b = on("GPU:2", 2), *c = on("GPU:1", 3);
    vdev_tensor_t *ab = vdev_add(a, b); /* inputs agree: their device */
    CHECK_STR(vdev_tensor_device(ab), "/device:GPU:2");
    vdev_tensor_t *ac = vdev_add(a, c); /* disagree, no variable: the default device */
    CHECK_STR(vdev_tensor_device(ac), "/device:GPU:0");
    CHECK_EQ_U64(vdev_placement_bytes_copied("GPU:2", "GPU:0"), 48);
    CHECK_EQ_U64(vdev_placement_bytes_copied("GPU:1", "GPU:0"), 48);
    vdev_tensor_t *v = vdev_variable(on("GPU:1", 1));
    vdev_tensor_t *av = vdev_add(a, v); /* disagree: the variable's device */
    CHECK_STR(vdev_tensor_device(av), "/device:GPU:1");
    vdev_tensor_t *r = vdev_relu(av); /* follows its input */
    CHECK_STR(vdev_tensor_device(r), "/device:GPU:1");
    vdev_tensor_t *rc = vdev_add(r, a); /* disagree: r derives from a variable on GPU:1 */
    CHECK_STR(vdev_tensor_device(rc), "/device:GPU:1");
    float host[12];
    CHECK_OK(vdev_tensor_to_host(rc, host, sizeof host));
    CHECK(host[0] == 3.0f && host[11] == 3.0f);
    int n;
    CHECK_OK(vdev_placement_audit(NULL, 0, &n));
    CHECK_EQ_U64(n, 0);
    CHECK_EQ_U64(vdev_placement_op_count("AddV2", "GPU:1"), 2);
    CHECK_EQ_U64(vdev_placement_op_count("AddV2", NULL), 4);
    CHECK_EQ_U64(vdev_placement_op_count(NULL, "GPU:0"), 1);
    vdev_tensor_t *all[] = {a, b, c, ab, ac, v, av, r, rc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vdev_tensor_free(all[i]);

    start(NULL, NULL); /* no GPU: the default device is the CPU */
    vdev_tensor_t *t = vdev_tensor_zeros(S2, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(t), "/device:CPU:0");
    vdev_tensor_free(t);
}

static void test_policies(void)
{
    start("3x1GiB", "strict");
    CHECK(vdev_get_placement_policy() == VDEV_PLACEMENT_STRICT);
    vdev_tensor_t *a = on("GPU:0", 1), *c = on("GPU:1", 3);
    vdev_device_push("GPU:0");
    CHECK(vdev_mul(a, c) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_PLACEMENT);
    CHECK_MSG("cannot compute Mul as input #1 was expected to be on "
              "/job:localhost/replica:0/task:0/device:GPU:0 but is actually on "
              "/job:localhost/replica:0/task:0/device:GPU:1");
    vdev_tensor_t *id = vdev_identity(c); /* the explicit copy is allowed */
    CHECK(id != NULL);
    CHECK_STR(vdev_tensor_device(id), "/device:GPU:0");
    vdev_device_pop();
    vdev_tensor_free(id);
    vdev_tensor_free(c);

    /* tf: unscoped ops go to the default device even when inputs agree elsewhere */
    start("3x1GiB", "tf");
    vdev_tensor_t *x = on("GPU:2", 1), *y = on("GPU:2", 2);
    vdev_tensor_t *z = vdev_add(x, y);
    CHECK_STR(vdev_tensor_device(z), "/device:GPU:0");
    CHECK_EQ_U64(vdev_placement_bytes_copied("GPU:2", "GPU:0"), 96);
    vdev_tensor_free(x);
    vdev_tensor_free(y);
    vdev_tensor_free(z);

    /* bad policy from the environment, an error even where code set the
     * policy (as every malformed variable); code wins over a good one */
    vdev_shutdown();
    setenv("VDEV_PLACEMENT", "loose", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_MSG("VDEV_PLACEMENT=\"loose\" is not a placement policy (copy, strict or tf)");
    CHECK_OK(vdev_set_placement_policy(VDEV_PLACEMENT_COPY));
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    setenv("VDEV_PLACEMENT", "strict", 1);
    CHECK_OK(vdev_init());
    CHECK(vdev_get_placement_policy() == VDEV_PLACEMENT_COPY);
    CHECK_STATUS(vdev_set_placement_policy((enum vdev_placement_policy)7), VDEV_ERR_INVALID_ARG);
    unsetenv("VDEV_PLACEMENT");
    vdev_tensor_free(a); /* made before a shutdown: freeing it must be harmless */
}

/* A small model on `dev`, a loss, and its gradients taken with CPU:0 as the
 * current scope: they must come out on the forward ops' device. */
static void test_gradient_device(void)
{
    start("3x1GiB", NULL);
    int64_t ws[2] = {3, 2};
    vdev_device_push("GPU:1");
    vdev_tensor_t *w = vdev_variable(vdev_tensor_uniform(ws, 2, -1, 1, 5));
    vdev_device_pop();
    vdev_tensor_t *x = on("GPU:0", 0.5f);
    vdev_scope_begin();
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_mean_all(vdev_tanh(vdev_matmul(x, w, false, false)));
    CHECK_STR(vdev_tensor_device(loss), "/device:GPU:1");
    vdev_tensor_t *g = NULL;
    vdev_device_push("CPU:0");
    uint64_t gpu1_before = vdev_placement_op_count(NULL, "GPU:1");
    CHECK_OK(vdev_tape_gradient(tape, loss, &w, 1, &g));
    vdev_device_pop();
    CHECK(vdev_placement_op_count(NULL, "GPU:1") > gpu1_before);
    CHECK_EQ_U64(vdev_placement_op_count(NULL, "CPU:0"), 0);
    CHECK_STR(vdev_tensor_device(g), "/device:GPU:1");
    vdev_tape_end(tape);
    vdev_scope_end();
    vdev_tensor_free(w);
    vdev_tensor_free(x);
}

static void test_log_and_audit(void)
{
    start("3x1GiB", NULL);
    char path[] = "/tmp/vdev-placement-log-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    vdev_set_log_device_placement(true);
    vdev_tensor_t *a = on("GPU:1", 1), *b = on("GPU:1", 2);
    vdev_tensor_t *m = vdev_matmul(a, b, false, true);
    vdev_set_log_device_placement(false);
    vdev_tensor_t *quiet = vdev_relu(m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[512] = {0};
    CHECK(pread(fd, buf, sizeof buf - 1, 0) > 0);
    close(fd);
    unlink(path);
    CHECK_STR(buf, "Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:1\n");

    /* an op that runs away from its variable's device is in the audit */
    vdev_tensor_t *v = vdev_variable(on("GPU:2", 1));
    vdev_device_push("GPU:0");
    vdev_tensor_t *away = vdev_add(a, v);
    vdev_tensor_t *away2 = vdev_relu(away); /* derives from v: also away */
    vdev_device_pop();
    struct vdev_audit_entry e[8];
    int n;
    CHECK_OK(vdev_placement_audit(e, 8, &n));
    CHECK_EQ_U64(n, 2);
    CHECK_STR(e[0].op_type, "AddV2");
    CHECK_STR(e[0].ran_on, "/device:GPU:0");
    CHECK_STR(e[0].home, "/device:GPU:2");
    CHECK_EQ_U64(e[0].count, 1);
    CHECK_EQ_U64(e[0].bytes_copied, 96); /* a from GPU:1 and v from GPU:2 */
    CHECK_STR(e[1].op_type, "Relu");
    CHECK_EQ_U64(e[1].bytes_copied, 0);
    vdev_placement_reset();
    CHECK_OK(vdev_placement_audit(e, 8, &n));
    CHECK_EQ_U64(n, 0);
    CHECK_EQ_U64(vdev_placement_op_count(NULL, NULL), 0);
    vdev_tensor_t *all[] = {a, b, m, quiet, v, away, away2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vdev_tensor_free(all[i]);
    CHECK_STATUS(vdev_placement_audit(NULL, 1, &n), VDEV_ERR_INVALID_ARG);
}

/* The bug report's program: models built in scopes, steps unscoped. Under
 * TensorFlow's rule the audit names ops away from GPU:1; under vdev's, none. */
static int audit_of_bug_program(enum vdev_placement_policy p, uint64_t *gpu1_ops)
{
    vdev_shutdown();
    setenv("VDEV_SIM_GPUS", "2x1GiB", 1);
    vdev_set_placement_policy(p);
    CHECK_OK(vdev_init());
    int64_t sizes[3] = {8, 16, 4};
    vdev_device_push("GPU:1");
    vdev_mlp_t *m = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 3);
    vdev_device_pop();
    vdev_optimizer_t *opt = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
    vdev_tensor_t *vars[4];
    vdev_mlp_variables(m, vars, 4);
    for (int s = 0; s < 3; s++) {
        vdev_scope_begin();
        int64_t xs[2] = {5, 8}, ts[2] = {5, 4};
        vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, 1);
        vdev_tensor_t *t = vdev_tensor_zeros(ts, 2, VDEV_F32);
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *loss = vdev_mse(vdev_mlp_forward(m, x), t), *g[4];
        CHECK_OK(vdev_tape_gradient(tape, loss, vars, 4, g));
        vdev_tape_end(tape);
        CHECK_OK(vdev_optimizer_apply(opt, vars, g, 4));
        vdev_scope_end();
    }
    int n;
    vdev_placement_audit(NULL, 0, &n);
    *gpu1_ops = vdev_placement_op_count(NULL, "GPU:1");
    vdev_mlp_free(m);
    vdev_optimizer_free(opt);
    return n;
}

static void test_bug_program(void)
{
    uint64_t tf_ops, vdev_ops;
    CHECK(audit_of_bug_program(VDEV_PLACEMENT_TF, &tf_ops) > 0);
    CHECK_EQ_U64(audit_of_bug_program(VDEV_PLACEMENT_COPY, &vdev_ops), 0);
    CHECK(vdev_ops > tf_ops); /* under vdev's rule the model's work is on its GPU */
    CHECK(vdev_placement_op_count("MatMul", "GPU:0") == 0);
}

/* Models chained under TensorFlow's rule (every op on GPU:0): the weight
 * gradient dW = x^T.dY of model k reads only model k-1's activation x, yet
 * it belongs to model k (its variables' device), as its forward MatMul does. */
static void test_chained_gradient_audit(void)
{
    vdev_shutdown();
    setenv("VDEV_SIM_GPUS", "3x1GiB", 1);
    vdev_set_placement_policy(VDEV_PLACEMENT_TF);
    CHECK_OK(vdev_init());
    int64_t s[2] = {4, 4};
    const char *dev[3] = {"GPU:0", "GPU:1", "GPU:2"};
    const char *home[3] = {"/device:GPU:0", "/device:GPU:1", "/device:GPU:2"};
    vdev_tensor_t *w[3];
    for (int k = 0; k < 3; k++) {
        vdev_device_push(dev[k]);
        w[k] = vdev_variable(vdev_tensor_ones(s, 2, VDEV_F32));
        vdev_device_pop();
    }
    vdev_scope_begin();
    vdev_tensor_t *in = vdev_tensor_ones(s, 2, VDEV_F32);
    for (int k = 0; k < 3; k++) {
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *y = vdev_matmul(in, w[k], false, false);
        vdev_tensor_t *loss = vdev_mse(y, in), *g = NULL;
        vdev_placement_reset();
        CHECK_OK(vdev_tape_gradient(tape, loss, &w[k], 1, &g));
        vdev_tape_end(tape);
        struct vdev_audit_entry e[8];
        int n, matmul = 0;
        CHECK_OK(vdev_placement_audit(e, 8, &n));
        CHECK_EQ_U64(n, k ? 2 : 0); /* model 1's variables are on GPU:0 */
        for (int i = 0; i < n; i++) {
            CHECK_STR(e[i].ran_on, "/device:GPU:0");
            CHECK_STR(e[i].home, home[k]);
            matmul += !strcmp(e[i].op_type, "MatMul");
        }
        CHECK_EQ_U64(matmul, k ? 1 : 0);
        in = y;
    }
    vdev_scope_end();
    vdev_set_placement_policy(VDEV_PLACEMENT_COPY);
    for (int k = 0; k < 3; k++)
        vdev_tensor_free(w[k]);
}

int main(void)
{
    test_scopes();
    test_scope_across_restart();
    test_unscoped_rules();
    test_policies();
    test_gradient_device();
    test_log_and_audit();
    test_bug_program();
    test_chained_gradient_audit();
    vdev_shutdown();
    return check_done();
}
