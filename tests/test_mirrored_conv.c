/* test_mirrored_conv.c — a small convolutional net (conv2d 3x3 SAME + bias,
 * ReLU, 2x2 max or average pool, flatten, dense, per-example softmax
 * cross-entropy, TensorFlow's compute_average_loss) under the mirrored
 * strategy, with the determinism switch on:
 *  - on 1, 2 and 4 simulated GPUs, with even and uneven batches and a batch
 *    smaller than the replicas (a replica with no rows), the replicas stay
 *    bit-identical and equal one device's training on the whole batch: bit
 *    for bit on one replica, within 1e-6 on more (README, "Determinism");
 *  - a replica whose device is too small for the convolution's output fails
 *    the step on every replica with its own out-of-memory message, no
 *    replica's variables or optimizer state change, and a smaller batch
 *    then trains on both, identical;
 *  - a checkpoint of replica 0's variables, Adam's slots and its iteration
 *    count, saved mid-training, restored into a new strategy's model made
 *    from another seed, goes on with the losses of an uninterrupted run bit
 *    for bit, and on four replicas within 1e-6. */
#define _GNU_SOURCE
#include "test_mirrored_conv_net.h"

#include <math.h>
#include <unistd.h>

static const char *const gpus[MAXR] = {"GPU:0", "GPU:1", "GPU:2", "GPU:3"};
static const char *const names[NV] = {"conv/kernel", "conv/bias", "dense/kernel", "dense/bias"};

/* Trains `steps` steps; losses[k] (if set) gets each step's global loss. */
static void train(vdev_strategy_t *s, struct net *n, int steps, float *losses)
{
    int nr = vdev_strategy_num_replicas_in_sync(s);
    for (int k = 0; k < steps; k++) {
        vdev_tensor_t *per[MAXR];
        CHECK_OK(vdev_strategy_run(s, step, n, per));
        vdev_tensor_t *l = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, per);
        CHECK(l != NULL);
        if (losses)
            losses[k] = vdev_tensor_item(l);
        vdev_tensor_free(l);
        for (int r = 0; r < nr; r++)
            vdev_tensor_free(per[r]);
    }
}

static void free_net(struct net *n, int nr)
{
    for (int r = 0; r < nr; r++) {
        for (int i = 0; i < NV; i++)
            vdev_tensor_free(n->vars[r][i]);
        vdev_optimizer_free(n->opt[r]);
    }
    vdev_tensor_free(n->x);
    vdev_tensor_free(n->y);
    memset(n, 0, sizeof *n);
}

/* The same steps on GPU:0 with the whole batch: sum of the per-example
 * losses over the batch, as compute_average_loss on one replica. */
static void one_device(const struct net *n, int steps, float *out)
{
    vdev_tensor_t *v[NV];
    vdev_device_push("GPU:0");
    CHECK_OK(make_vars(v, n->seed));
    vdev_optimizer_t *opt = make_opt(n);
    CHECK(opt != NULL);
    double rows = (double)vdev_tensor_dim(n->x, 0);
    for (int k = 0; k < steps; k++) {
        CHECK_OK(vdev_scope_begin());
        vdev_tensor_t *x = vdev_tensor_to(n->x, "GPU:0"), *y = vdev_tensor_to(n->y, "GPU:0");
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *loss = vdev_div(vdev_sum_all(per_example(n, v, x, y)),
                                       vdev_tensor_fill(NULL, 0, VDEV_F32, rows));
        vdev_tensor_t *g[NV];
        CHECK_OK(loss ? vdev_tape_gradient(tape, loss, v, NV, g) : vdev_last_status());
        vdev_tape_end(tape);
        CHECK_OK(vdev_optimizer_apply(opt, v, g, NV));
        vdev_scope_end();
    }
    read_vars(v, out);
    for (int i = 0; i < NV; i++)
        vdev_tensor_free(v[i]);
    vdev_optimizer_free(opt);
    vdev_device_pop();
}

static void against_one_device(int nr, int64_t rows, int adam, int avg_pool)
{
    check_fresh("4x256MiB");
    vdev_config_set_deterministic(true);
    struct net n = {.seed = 42, .adam = adam, .avg_pool = avg_pool};
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(gpus, nr, &s));
    CHECK_OK(vdev_strategy_run(s, build, &n, NULL));
    make_batch(&n, rows, 7);
    float losses[6];
    train(s, &n, 6, losses);
    CHECK(losses[5] < losses[0]);
    static float got[MAXR][NPARAM], ref[NPARAM];
    for (int r = 0; r < nr; r++) {
        read_vars(n.vars[r], got[r]);
        CHECK(memcmp(got[r], got[0], sizeof got[0]) == 0);
    }
    one_device(&n, 6, ref);
    double worst = 0;
    for (int i = 0; i < NPARAM; i++)
        worst = fmax(worst, fabs((double)got[0][i] - ref[i]));
    if (nr == 1)
        CHECK(memcmp(got[0], ref, sizeof ref) == 0);
    else
        CHECK(worst <= 1e-6);
    if (worst > (nr == 1 ? 0 : 1e-6))
        printf("%d replicas, %lld rows: differs from one device by %g\n", nr, (long long)rows,
               worst);
    free_net(&n, nr);
    vdev_strategy_free(s);
}

static void oom_on_one_replica(void)
{
    check_fresh("2x256MiB");
    vdev_config_set_deterministic(true);
    uint64_t small = 2 << 20; /* GPU:1 holds 2 MiB: a conv output of 2 MiB does not fit */
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", &small, 1));
    struct net n = {.seed = 3, .adam = 1};
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(gpus, 2, &s));
    CHECK_OK(vdev_strategy_run(s, build, &n, NULL));
    make_batch(&n, 64, 1);
    train(s, &n, 1, NULL); /* Adam's slots exist, its count is 1 */
    static float before[2][NPARAM], after[NPARAM];
    for (int r = 0; r < 2; r++)
        read_vars(n.vars[r], before[r]);
    make_batch(&n, 4096, 2); /* 2048 rows a replica: [2048,8,8,4] is 2 MiB */
    vdev_tensor_t *per[2] = {NULL, NULL};
    CHECK_STATUS(vdev_strategy_run(s, step, &n, per), VDEV_ERR_OOM);
    CHECK_MSG("replica 1 (/device:GPU:1): OOM when allocating tensor with shape[2048,8,8,4] "
              "and type float (2.00 MiB) on /job:localhost/replica:0/task:0/device:GPU:1: ");
    CHECK(per[0] == NULL && per[1] == NULL);
    for (int r = 0; r < 2; r++) {
        read_vars(n.vars[r], after);
        CHECK(memcmp(after, before[r], sizeof after) == 0);
        int64_t it = -1;
        CHECK_OK(vdev_optimizer_get_iterations(n.opt[r], &it));
        CHECK(it == 1);
    }
    /* what the failed step made is gone: in use is the model and the slots */
    struct vdev_memory_info m0, m1;
    CHECK_OK(vdev_strategy_memory_info(s, 0, &m0));
    CHECK_OK(vdev_strategy_memory_info(s, 1, &m1));
    CHECK(m0.bytes_in_use == m1.bytes_in_use);
    make_batch(&n, 64, 3);
    train(s, &n, 3, NULL);
    float a[NPARAM], b[NPARAM];
    read_vars(n.vars[0], a);
    read_vars(n.vars[1], b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, before[0], sizeof a) != 0);
    free_net(&n, 2);
    vdev_strategy_free(s);
}

/* Saves replica 0's variables, Adam's slots and the count to path. */
static void save(const char *path, struct net *n)
{
    const char *nm[3 * NV + 1];
    vdev_tensor_t *t[3 * NV + 1];
    char buf[3 * NV][48];
    int k = 0;
    for (int i = 0; i < NV; i++) {
        vdev_tensor_t *slot[2];
        const char *sn[2];
        CHECK(vdev_optimizer_slots(n->opt[0], n->vars[0][i], slot, sn, 2) == 2);
        nm[k] = names[i];
        t[k++] = n->vars[0][i];
        for (int j = 0; j < 2; j++) {
            snprintf(buf[k], sizeof buf[k], "%s/adam_%s", names[i], sn[j]);
            nm[k] = buf[k];
            t[k++] = slot[j];
        }
    }
    int64_t it;
    CHECK_OK(vdev_optimizer_get_iterations(n->opt[0], &it));
    int32_t it32 = (int32_t)it;
    vdev_device_push("CPU:0");
    t[k] = vdev_tensor_from_host(&it32, NULL, 0, VDEV_I32);
    vdev_device_pop();
    nm[k++] = "optimizer/iterations";
    CHECK_OK(vdev_checkpoint_save(path, nm, t, k, NULL, 0));
    vdev_tensor_free(t[k - 1]);
}

/* Restores path into every replica of n (one entry into several tensors). */
static void restore(const char *path, vdev_strategy_t *s, struct net *n)
{
    int nr = vdev_strategy_num_replicas_in_sync(s);
    const char *nm[MAXR * 3 * NV];
    vdev_tensor_t *t[MAXR * 3 * NV];
    static char buf[MAXR * 3 * NV][48];
    int k = 0;
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < NV; i++) {
            vdev_tensor_t *slot[2];
            const char *sn[2];
            CHECK(vdev_optimizer_slots(n->opt[r], n->vars[r][i], slot, sn, 2) == 2);
            nm[k] = names[i];
            t[k++] = n->vars[r][i];
            for (int j = 0; j < 2; j++) {
                snprintf(buf[k], sizeof buf[k], "%s/adam_%s", names[i], sn[j]);
                nm[k] = buf[k];
                t[k++] = slot[j];
            }
        }
    CHECK_OK(vdev_checkpoint_load(path, nm, t, k));
    int32_t it = -1;
    vdev_tensor_t *count = vdev_tensor_zeros(NULL, 0, VDEV_I32);
    const char *cn = "optimizer/iterations";
    CHECK_OK(vdev_checkpoint_load(path, &cn, &count, 1));
    CHECK_OK(vdev_tensor_to_host(count, &it, sizeof it));
    vdev_tensor_free(count);
    for (int r = 0; r < nr; r++)
        CHECK_OK(vdev_optimizer_set_iterations(n->opt[r], it));
}

static void resume(void)
{
    char dir[] = "/tmp/vdev_mirrored_conv_XXXXXX", path[96];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/cnn.safetensors", dir);
    float whole[6], later[3];
    vdev_strategy_t *s;
    for (int run = 0; run < 4; run++) {
        /* 0: six steps on two replicas; 1: three, saved; 2: restored on two
         * replicas into a model of another seed; 3: on four */
        int nr = run == 3 ? 4 : 2;
        check_fresh("4x256MiB");
        vdev_config_set_deterministic(true);
        struct net n = {.seed = run >= 2 ? 99 : 42, .adam = 1};
        CHECK_OK(vdev_mirrored_strategy_new(gpus, nr, &s));
        CHECK_OK(vdev_strategy_run(s, build, &n, NULL));
        make_batch(&n, 16, 5);
        if (run == 0) {
            train(s, &n, 6, whole);
        } else if (run == 1) {
            float first[3];
            train(s, &n, 3, first);
            CHECK(memcmp(first, whole, sizeof first) == 0);
            save(path, &n);
        } else {
            restore(path, s, &n);
            train(s, &n, 3, later);
            for (int k = 0; k < 3; k++)
                CHECK(run == 2 ? later[k] == whole[3 + k]
                               : fabsf(later[k] - whole[3 + k]) <= 1e-6f);
            static float a[NPARAM], b[NPARAM];
            read_vars(n.vars[0], a);
            for (int r = 1; r < nr; r++) {
                read_vars(n.vars[r], b);
                CHECK(memcmp(a, b, sizeof a) == 0);
            }
        }
        free_net(&n, nr);
        vdev_strategy_free(s);
    }
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    against_one_device(1, 16, 0, 0);
    against_one_device(2, 16, 0, 0);
    against_one_device(4, 16, 1, 0);
    against_one_device(4, 13, 0, 1); /* 4, 3, 3, 3 rows */
    against_one_device(4, 3, 1, 1);  /* replica 3 has no rows */
    oom_on_one_replica();
    resume();
    vdev_shutdown();
    return check_done();
}
