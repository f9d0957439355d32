/* test_mirrored.c — the mirrored strategy trains as one device would, and
 * keeps its replicas identical:
 *  - one SGD step on 1, 2, 3 and 4 replicas (simulated GPUs) equals one step
 *    on the whole batch on one device: bit for bit on 1 replica; within
 *    1e-6 (absolute, on parameters of about 0.5) on 2 to 4, whose gradients
 *    are sums in another order (each replica sums its own rows, then the
 *    ring adds the replicas' sums), which no switch can make bit-equal;
 *  - under the determinism switch, replicas stay bit-identical over 100
 *    steps, and two runs give the same bits;
 *  - a batch split in given proportions (and evenly when B mod n != 0) gives
 *    the rows the documentation says and still equals the one-device step;
 *  - memory: replica 0 holds no more than any other, the imbalance figure is
 *    1, and the metrics endpoint labels the replicas' devices;
 *  - logical CPUs (the default when there is no GPU), as TensorFlow's
 *    strategy tests use them;
 *  - the API's errors, in TensorFlow's words where it has them. */
#define _GNU_SOURCE
#include "http_client.h"
#include "mirrored_model.h"

#include <unistd.h>

#define EXPECT_ERR(call, code, sub)                                                                \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_MSG(sub);                                                                            \
    } while (0)

static const char *const gpu_names[4] = {"GPU:0", "GPU:1", "GPU:2", "GPU:3"};
static const char *const cpu_names[4] = {"CPU:0", "CPU:1", "CPU:2", "CPU:3"};

/* One mirrored step against one step on `single` with the whole batch of B
 * rows. Returns the largest difference of a parameter. */
static double one_step_vs_single(const char *const *devs, int n, const char *single, int64_t B,
                                 const double *proportions, float *loss_diff)
{
    vdev_strategy_t *s = NULL;
    CHECK_OK(vdev_mirrored_strategy_new(devs, n, &s));
    if (proportions)
        CHECK_OK(vdev_strategy_set_batch_proportions(s, proportions, n));
    struct mm m = {.seed = 7, .lr = 0.5f};
    mm_batch(&m, B, 3);
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    vdev_tensor_t *losses[MM_MAX_REPLICAS];
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, losses));
    vdev_tensor_t *total = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, losses);
    CHECK(total != NULL);
    CHECK_STR(vdev_tensor_device(total), "/device:CPU:0"); /* TensorFlow's: the host */
    float mirrored_loss = vdev_tensor_item(total);

    vdev_mlp_t *mlp = NULL;
    vdev_optimizer_t *opt = NULL;
    vdev_tensor_t *vars[MM_NV];
    float single_loss = mm_single_step(single, &m, &mlp, &opt, vars);
    float a[MM_PARAMS], b[MM_PARAMS];
    mm_read(vars, b);
    double worst = 0;
    for (int r = 0; r < n; r++) {
        mm_read(m.vars[r], a);
        double d = mm_max_diff(a, b);
        worst = d > worst ? d : worst;
    }
    *loss_diff = fabsf(mirrored_loss - single_loss);
    for (int r = 0; r < n; r++)
        vdev_tensor_free(losses[r]);
    vdev_tensor_free(total);
    vdev_mlp_free(mlp);
    vdev_optimizer_free(opt);
    mm_free(&m, n);
    vdev_strategy_free(s);
    return worst;
}

static void test_equals_one_device(void)
{
    check_fresh("4x1GiB");
    vdev_config_set_deterministic(true);
    float ld;
    double d = one_step_vs_single(gpu_names, 1, "GPU:0", 13, NULL, &ld);
    CHECK(d == 0 && ld == 0); /* one replica: the same ops, the same bits */
    for (int n = 2; n <= 4; n++) {
        d = one_step_vs_single(gpu_names, n, "GPU:0", 13, NULL, &ld);
        if (!(d <= 1e-6 && ld <= 1e-6))
            check_fail(__FILE__, __LINE__, "%d replicas: parameters differ by %g, loss by %g", n,
                       d, (double)ld);
        else
            check_passed++;
    }
}

/* Unequal proportions: rows 2, 4, 6 of 12; and the rounding rule. */
static void test_proportions(void)
{
    check_fresh("3x1GiB");
    vdev_config_set_deterministic(true);
    const double p[3] = {1, 2, 3};
    float ld;
    double d = one_step_vs_single(gpu_names, 3, "GPU:0", 12, p, &ld);
    CHECK(d <= 1e-6 && ld <= 1e-6);

    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(gpu_names, 3, &s));
    struct mm m = {.seed = 1, .lr = 0.1f};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    mm_batch(&m, 12, 1);
    CHECK_OK(vdev_strategy_set_batch_proportions(s, p, 3));
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    CHECK(m.rows[0] == 2 && m.rows[1] == 4 && m.rows[2] == 6);
    mm_batch(&m, 10, 1); /* 1.67, 3.33, 5: floors 1, 3, 5; the row left to replica 0 */
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    CHECK(m.rows[0] == 2 && m.rows[1] == 3 && m.rows[2] == 5);
    CHECK_OK(vdev_strategy_set_batch_proportions(s, NULL, 0)); /* even again */
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    CHECK(m.rows[0] == 4 && m.rows[1] == 3 && m.rows[2] == 3);
    mm_batch(&m, 2, 1); /* fewer rows than replicas: one gets none */
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    CHECK(m.rows[0] == 1 && m.rows[1] == 1 && m.rows[2] == 0);
    /* Proportions whose sum is not finite split as their ratios do (1:1:1,
     * 1:1:2), and so do tiny ones. */
    const double huge[3] = {1e308, 1e308, 1e308}, tiny[3] = {1e-300, 1e-300, 2e-300};
    mm_batch(&m, 12, 1);
    CHECK_OK(vdev_strategy_set_batch_proportions(s, huge, 3));
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    CHECK(m.rows[0] == 4 && m.rows[1] == 4 && m.rows[2] == 4);
    const double huge2[3] = {5e307, 5e307, 1e308};
    CHECK_OK(vdev_strategy_set_batch_proportions(s, huge2, 3));
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    CHECK(m.rows[0] == 3 && m.rows[1] == 3 && m.rows[2] == 6);
    CHECK_OK(vdev_strategy_set_batch_proportions(s, tiny, 3));
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    CHECK(m.rows[0] == 3 && m.rows[1] == 3 && m.rows[2] == 6);
    /* One optimizer passed by two replicas: refused on every replica before
     * any variable moves (its slots would mix the replicas' states). */
    vdev_optimizer_t *own1 = m.opt[1];
    m.opt[1] = m.opt[0];
    float before[MM_PARAMS], after[MM_PARAMS];
    mm_read(m.vars[2], before);
    CHECK_STATUS(vdev_strategy_run(s, mm_step, &m, NULL), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_replica_apply_gradients: replicas 0 and 1 pass the same optimizer; each "
              "replica needs its own (its slots hold that replica's state)");
    mm_read(m.vars[2], after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    m.opt[1] = own1;
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    const double bad[3] = {1, 0, 1}, inf[3] = {1, INFINITY, 1};
    EXPECT_ERR(vdev_strategy_set_batch_proportions(s, bad, 3), VDEV_ERR_INVALID_ARG,
               "vdev_strategy_set_batch_proportions: proportion 1 is 0; each is > 0 and finite");
    EXPECT_ERR(vdev_strategy_set_batch_proportions(s, inf, 3), VDEV_ERR_INVALID_ARG,
               "proportion 1 is inf");
    EXPECT_ERR(vdev_strategy_set_batch_proportions(s, p, 2), VDEV_ERR_INVALID_ARG,
               "vdev_strategy_set_batch_proportions: 2 proportions for 3 replicas");
    mm_free(&m, 3);
    vdev_strategy_free(s);
}

/* Trains `steps` steps on n replicas; every replica's parameters into
 * out[n][MM_PARAMS]; the first and last losses. */
static void train(int n, int steps, float *out, float *first, float *last)
{
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(gpu_names, n, &s));
    struct mm m = {.seed = 11, .lr = 0.2f, .adam = 0};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    for (int k = 0; k < steps; k++) {
        mm_batch(&m, 30, (uint64_t)k % 5);
        vdev_tensor_t *losses[MM_MAX_REPLICAS];
        CHECK_OK(vdev_strategy_run(s, mm_step, &m, losses));
        vdev_tensor_t *t = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, losses);
        float l = vdev_tensor_item(t);
        if (k == 0)
            *first = l;
        *last = l;
        vdev_tensor_free(t);
        for (int r = 0; r < n; r++)
            vdev_tensor_free(losses[r]);
    }
    for (int r = 0; r < n; r++)
        mm_read(m.vars[r], out + (size_t)r * MM_PARAMS);
    mm_free(&m, n);
    vdev_strategy_free(s);
}

static void test_identical_and_deterministic(void)
{
    check_fresh("3x1GiB");
    vdev_config_set_deterministic(true);
    static float a[3 * MM_PARAMS], b[3 * MM_PARAMS];
    float f1, l1, f2, l2;
    train(3, 100, a, &f1, &l1);
    for (int r = 1; r < 3; r++) /* replicas stay bit-identical */
        CHECK(memcmp(a, a + r * MM_PARAMS, MM_PARAMS * 4) == 0);
    CHECK(l1 < 0.5f * f1); /* and it learns */
    train(3, 100, b, &f2, &l2);
    CHECK(memcmp(a, b, sizeof a) == 0); /* two runs, the same bits */
    CHECK(f1 == f2 && l1 == l2);
}

/* Replica 0 holds no more than any other: the global batch stays on the host
 * and every replica's staging is its own. */
static void test_memory_balance(void)
{
    check_fresh("4x1GiB");
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(gpu_names, 4, &s));
    struct mm m = {.seed = 5, .lr = 0.1f, .adam = 1};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    for (int r = 0; r < 4; r++)
        CHECK_OK(vdev_memory_reset_peak(gpu_names[r]));
    for (int k = 0; k < 5; k++) {
        mm_batch(&m, 64, (uint64_t)k);
        CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    }
    struct vdev_memory_info mi[4];
    for (int r = 0; r < 4; r++)
        CHECK_OK(vdev_strategy_memory_info(s, r, &mi[r]));
    for (int r = 1; r < 4; r++) {
        CHECK(mi[0].peak_bytes_in_use <= mi[r].peak_bytes_in_use);
        CHECK(mi[0].bytes_in_use <= mi[r].bytes_in_use);
    }
    CHECK(mi[0].peak_bytes_in_use > 0);
    double x = vdev_strategy_memory_imbalance(s);
    CHECK(x >= 1.0 && x <= 1.05);
    CHECK(vdev_placement_bytes_copied("GPU:0", NULL) == 0); /* nothing gathered from GPU:0 */
    EXPECT_ERR(vdev_strategy_memory_info(s, 4, &mi[0]), VDEV_ERR_INVALID_ARG,
               "vdev_strategy_memory_info: replica 4 of 4");
    mm_free(&m, 4);
    vdev_strategy_free(s);
}

static void test_metrics(void)
{
    check_fresh("3x1GiB");
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(NULL, 0, &s)); /* every GPU */
    CHECK(vdev_strategy_num_replicas_in_sync(s) == 3);
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0"));
    char *got = http_get(vdev_metrics_port(), "/metrics");
    CHECK(got != NULL);
    const char *body = got ? got : "";
    for (int r = 0; r < 3; r++) {
        char want[128];
        snprintf(want, sizeof want, ",replica=\"%d\",device=\"/device:GPU:%d\"} 1\n", r, r);
        CHECK(strstr(body, want) != NULL);
    }
    CHECK(strstr(body, "# TYPE vdev_replica_memory_peak_in_use_bytes gauge") != NULL);
    CHECK(strstr(body, "# TYPE vdev_strategy_memory_imbalance gauge") != NULL);
    CHECK(strstr(body, "} 1.000000\n") != NULL); /* nothing allocated yet: balanced */
    vdev_strategy_free(s);
    free(got);
    got = http_get(vdev_metrics_port(), "/metrics"); /* freed: no longer reported */
    CHECK(got != NULL);
    body = got ? got : "";
    CHECK(strstr(body, "vdev_replica_info") == NULL);
    CHECK(strstr(body, "vdev_memory_in_use_bytes") != NULL);
    free(got);
    vdev_metrics_stop();
}

/* Logical CPUs: the default devices without a GPU, and a step there equals
 * one on CPU:0 alone. */
static void test_logical_cpus(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 3));
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(NULL, 0, &s));
    CHECK(vdev_strategy_num_replicas_in_sync(s) == 3);
    CHECK_STR(vdev_strategy_device(s, 2), "/device:CPU:2");
    vdev_strategy_free(s);
    float ld;
    double d = one_step_vs_single(cpu_names, 1, "CPU:0", 9, NULL, &ld);
    CHECK(d == 0 && ld == 0);
    d = one_step_vs_single(cpu_names + 1, 3 - 1, "CPU:0", 9, NULL, &ld);
    CHECK(d <= 1e-6 && ld <= 1e-6);
    check_fresh(NULL); /* one CPU, no GPU: one replica on CPU:0 */
    CHECK_OK(vdev_mirrored_strategy_new(NULL, 0, &s));
    CHECK(vdev_strategy_num_replicas_in_sync(s) == 1);
    CHECK_STR(vdev_strategy_device(s, 0), "/device:CPU:0");
    vdev_strategy_free(s);
}

/* ---- errors ---- */

static enum vdev_status fail_on_1(vdev_replica_context_t *ctx, void *u)
{
    (void)u;
    if (vdev_replica_id(ctx) == 1)
        return vdev_replica_compute_average_loss(ctx, vdev_tensor_fill(NULL, 0, VDEV_F32, 1), 0)
                   ? VDEV_OK
                   : vdev_last_status();
    return VDEV_OK;
}

static enum vdev_status one_less_call(vdev_replica_context_t *ctx, void *u)
{
    (void)u;
    int64_t shape[1] = {4};
    vdev_tensor_t *t = vdev_tensor_ones(shape, 1, VDEV_F32), *o;
    enum vdev_status st = vdev_replica_all_reduce(ctx, VDEV_REDUCE_SUM, &t, 1, &o);
    if (st == VDEV_OK && vdev_replica_id(ctx) != 1) /* replica 1 skips the second */
        st = vdev_replica_all_reduce(ctx, VDEV_REDUCE_MEAN, &t, 1, &o);
    return st;
}

/* One slot per replica: replicas run on their own threads at once. */
static vdev_replica_context_t *leaked[2];
static enum vdev_status keep_ctx(vdev_replica_context_t *ctx, void *u)
{
    (void)u;
    int r = vdev_replica_id(ctx);
    if (r >= 0 && r < 2)
        leaked[r] = ctx;
    return VDEV_OK;
}

static enum vdev_status nested_run(vdev_replica_context_t *ctx, void *u)
{
    (void)ctx;
    return vdev_strategy_run(u, keep_ctx, NULL, NULL);
}

/* What each replica of loss_checks saw (one slot per replica's thread). */
static float seen_default[2], seen_16[2];
static int seen_negative_ok[2];

static enum vdev_status loss_checks(vdev_replica_context_t *ctx, void *u)
{
    (void)u;
    int r = vdev_replica_id(ctx);
    int64_t shape[1] = {4};
    vdev_tensor_t *per = vdev_tensor_fill(shape, 1, VDEV_F32, 2.0);
    vdev_tensor_t *l0 = vdev_replica_compute_average_loss(ctx, per, 0); /* 4 rows x 2 replicas */
    vdev_tensor_t *l1 = vdev_replica_compute_average_loss(ctx, per, 16);
    seen_default[r] = vdev_tensor_item(l0);
    seen_16[r] = vdev_tensor_item(l1);
    seen_negative_ok[r] = !vdev_replica_compute_average_loss(ctx, per, -1) &&
                          vdev_last_status() == VDEV_ERR_INVALID_ARG &&
                          !strcmp(vdev_last_error(), "global_batch_size must be positive.");
    return vdev_replica_return(ctx, l0);
}

static void test_errors(void)
{
    check_fresh("2x1GiB");
    vdev_strategy_t *s = (vdev_strategy_t *)1;
    EXPECT_ERR(vdev_mirrored_strategy_new(gpu_names, 2, NULL), VDEV_ERR_INVALID_ARG,
               "vdev_mirrored_strategy_new: out is NULL");
    EXPECT_ERR(vdev_mirrored_strategy_new(gpu_names, 0, &s), VDEV_ERR_INVALID_ARG,
               "Must specify at least one device.");
    CHECK(s == NULL);
    const char *dup[3] = {"GPU:1", "GPU:0", "/device:GPU:1"};
    EXPECT_ERR(vdev_mirrored_strategy_new(dup, 3, &s), VDEV_ERR_INVALID_ARG,
               "No duplicates allowed in `devices` argument: "
               "('/job:localhost/replica:0/task:0/device:GPU:1', "
               "'/job:localhost/replica:0/task:0/device:GPU:0', "
               "'/job:localhost/replica:0/task:0/device:GPU:1')");
    const char *missing[1] = {"GPU:5"};
    EXPECT_ERR(vdev_mirrored_strategy_new(missing, 1, &s), VDEV_ERR_NOT_FOUND,
               "No matching devices found for 'GPU:5'");
    const char *bad[1] = {"GPU:x"};
    EXPECT_ERR(vdev_mirrored_strategy_new(bad, 1, &s), VDEV_ERR_INVALID_ARG,
               "Failed parsing device name: 'GPU:x'");
    EXPECT_ERR(vdev_mirrored_strategy_new(gpu_names, VDEV_MAX_REPLICAS + 1, &s),
               VDEV_ERR_INVALID_ARG, "a strategy has at most 64 replicas");

    CHECK_OK(vdev_mirrored_strategy_new(gpu_names, 2, &s));
    EXPECT_ERR(vdev_strategy_run(s, NULL, NULL, NULL), VDEV_ERR_INVALID_ARG,
               "vdev_strategy_run: fn is NULL");
    /* a failure on one replica: its code, its message, no results */
    vdev_tensor_t *res[2] = {(vdev_tensor_t *)1, (vdev_tensor_t *)1};
    EXPECT_ERR(vdev_strategy_run(s, fail_on_1, NULL, res), VDEV_ERR_INVALID_ARG,
               "replica 1 (/device:GPU:1): Invalid value passed for `per_example_loss`. Expected "
               "a tensor with at least rank 1. Received per_example_loss of shape [] with rank "
               "0");
    CHECK(res[0] == NULL && res[1] == NULL);
    /* a replica that makes one collective call less: its peer fails at once */
    EXPECT_ERR(vdev_strategy_run(s, one_less_call, NULL, NULL), VDEV_ERR_INVALID_ARG,
               "all-reduce (call 1): rank 1 (/device:GPU:1) finished without making this call (it "
               "made 1); every rank must make the same collective calls in the same order");
    /* the next run starts clean */
    CHECK_OK(vdev_strategy_run(s, loss_checks, NULL, res));
    for (int r = 0; r < 2; r++) /* sum / (4 x 2), sum / 16, and the refusal */
        CHECK(seen_default[r] == 1.0f && seen_16[r] == 0.5f && seen_negative_ok[r]);
    CHECK(res[0] && res[1] && vdev_tensor_item(res[1]) == 1.0f);
    vdev_tensor_t *mean = vdev_strategy_reduce(s, VDEV_REDUCE_MEAN, res);
    CHECK(mean && vdev_tensor_item(mean) == 1.0f);
    vdev_tensor_free(mean);
    vdev_tensor_t *other = vdev_tensor_zeros((int64_t[1]){3}, 1, VDEV_F32), *mixed[2] = {res[0], other};
    CHECK(vdev_strategy_reduce(s, VDEV_REDUCE_SUM, mixed) == NULL);
    CHECK_MSG("vdev_strategy_reduce: replica 1's value is float of shape[3] but replica 0's is "
              "float of shape[]");
    CHECK(vdev_strategy_reduce(s, (enum vdev_reduce_op)5, res) == NULL);
    CHECK_MSG("vdev_strategy_reduce: unknown reduce op 5");
    vdev_tensor_free(other);
    vdev_tensor_free(res[0]);
    vdev_tensor_free(res[1]);
    /* a context outside its step; a run from inside a step */
    CHECK_OK(vdev_strategy_run(s, keep_ctx, NULL, NULL));
    CHECK(vdev_replica_id(leaked[0]) == -1 && vdev_replica_id(leaked[1]) == -1);
    CHECK_MSG("vdev_replica_id: a replica context is used only inside its step function, on its "
              "replica's thread");
    EXPECT_ERR(vdev_strategy_run(s, nested_run, s, NULL), VDEV_ERR_INVALID_ARG,
               "replica 0 (/device:GPU:0): vdev_strategy_run: called from a step function of the "
               "same strategy");
    /* the strategy's communicator is its own */
    vdev_comm_t *c = vdev_strategy_communicator(s);
    CHECK(vdev_comm_size(c) == 2);
    vdev_comm_free(c);
    CHECK_MSG("vdev_comm_free: the communicator belongs to a strategy; vdev_strategy_free frees it");
    CHECK(vdev_comm_size(c) == 2);
    vdev_strategy_free(s);
    CHECK(vdev_comm_size(c) == -1);
    CHECK(vdev_strategy_num_replicas_in_sync(s) == -1);
    CHECK_MSG("vdev_strategy_num_replicas_in_sync: not a live strategy (freed already, or not a "
              "strategy)");
    CHECK(vdev_replica_id(leaked[0]) == -1 && vdev_replica_id(leaked[1]) == -1);
    CHECK_MSG("vdev_replica_id: not a live replica context");
    vdev_strategy_free(s);
    CHECK_MSG("vdev_strategy_free: not a live strategy");
    /* made before a shutdown: refused after it, still freed */
    CHECK_OK(vdev_mirrored_strategy_new(gpu_names, 2, &s));
    vdev_shutdown();
    CHECK_OK(vdev_init());
    EXPECT_ERR(vdev_strategy_run(s, keep_ctx, NULL, NULL), VDEV_ERR_INVALID_ARG,
               "vdev_strategy_run: the strategy belongs to a runtime that was shut down");
    vdev_strategy_free(s);
}

int main(void)
{
    test_equals_one_device();
    test_proportions();
    test_identical_and_deterministic();
    test_memory_balance();
    test_metrics();
    test_logical_cpus();
    test_errors();
    vdev_shutdown();
    return check_done();
}
