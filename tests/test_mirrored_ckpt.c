/* test_mirrored_ckpt.c — a mirrored model round-trips through a checkpoint:
 * train on three replicas, save replica 0's variables (the replicas are
 * identical), make a new strategy and a model from another seed, restore the
 * file into every replica (one entry into several tensors), and the loss on
 * a fixed batch is the same bits on the same number of replicas, and the
 * same within rounding on two. Training then goes on identically on every
 * replica. */
#define _GNU_SOURCE
#include "mirrored_model.h"

#include <unistd.h>

static const char *const devs[3] = {"GPU:0", "GPU:1", "GPU:2"};
static const char *const names[MM_NV] = {"dense0/w", "dense0/b", "dense1/w", "dense1/b"};

/* The loss of the current model on m's batch (no update). */
static float eval(vdev_strategy_t *s, struct mm *m)
{
    vdev_tensor_t *losses[MM_MAX_REPLICAS];
    m->no_update = 1;
    CHECK_OK(vdev_strategy_run(s, mm_step, m, losses));
    m->no_update = 0;
    vdev_tensor_t *t = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, losses);
    float l = vdev_tensor_item(t);
    vdev_tensor_free(t);
    for (int r = 0; r < vdev_strategy_num_replicas_in_sync(s); r++)
        vdev_tensor_free(losses[r]);
    return l;
}

/* Restores the file into every replica of a fresh model. */
static void restore(const char *path, vdev_strategy_t *s, struct mm *m)
{
    int n = vdev_strategy_num_replicas_in_sync(s);
    const char *nm[MM_MAX_REPLICAS * MM_NV];
    vdev_tensor_t *t[MM_MAX_REPLICAS * MM_NV];
    for (int r = 0; r < n; r++)
        for (int i = 0; i < MM_NV; i++) {
            nm[r * MM_NV + i] = names[i];
            t[r * MM_NV + i] = m->vars[r][i];
        }
    CHECK_OK(vdev_checkpoint_load(path, nm, t, n * MM_NV));
}

int main(void)
{
    char dir[] = "/tmp/vdev_mirrored_ckpt_XXXXXX", path[96];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);

    check_fresh("3x1GiB");
    vdev_config_set_deterministic(true);
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 3, &s));
    struct mm m = {.seed = 21, .lr = 0.2f};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    for (int k = 0; k < 10; k++) {
        mm_batch(&m, 48, (uint64_t)k);
        CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    }
    mm_batch(&m, 48, 99);
    float l1 = eval(s, &m);
    const char *meta[2] = {"step", "10"};
    CHECK_OK(vdev_checkpoint_save(path, names, m.vars[0], MM_NV, meta, 1));
    float saved[MM_PARAMS];
    mm_read(m.vars[0], saved);
    mm_free(&m, 3);
    vdev_strategy_free(s);

    /* a new strategy, a model from another seed, restored */
    CHECK_OK(vdev_mirrored_strategy_new(devs, 3, &s));
    struct mm m2 = {.seed = 77, .lr = 0.2f};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m2, NULL));
    mm_batch(&m2, 48, 99);
    float before = eval(s, &m2);
    CHECK(before != l1);
    restore(path, s, &m2);
    for (int r = 0; r < 3; r++) {
        float got[MM_PARAMS];
        mm_read(m2.vars[r], got);
        CHECK(memcmp(got, saved, sizeof got) == 0);
    }
    float l2 = eval(s, &m2);
    CHECK(l2 == l1); /* the same bits */
    char buf[16];
    CHECK_OK(vdev_checkpoint_metadata(path, "step", buf, sizeof buf));
    CHECK_STR(buf, "10");
    /* and training goes on with the replicas identical */
    CHECK_OK(vdev_strategy_run(s, mm_step, &m2, NULL));
    float a[MM_PARAMS], b[MM_PARAMS];
    mm_read(m2.vars[0], a);
    for (int r = 1; r < 3; r++) {
        mm_read(m2.vars[r], b);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    mm_free(&m2, 3);
    vdev_strategy_free(s);

    /* restored on two replicas: the same loss within rounding */
    CHECK_OK(vdev_mirrored_strategy_new(devs, 2, &s));
    struct mm m3 = {.seed = 5, .lr = 0.2f};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m3, NULL));
    restore(path, s, &m3);
    mm_batch(&m3, 48, 99);
    float l3 = eval(s, &m3);
    CHECK(fabsf(l3 - l1) <= 1e-6f * fabsf(l1) + 1e-7f);
    mm_free(&m3, 2);
    vdev_strategy_free(s);

    unlink(path);
    rmdir(dir);
    vdev_shutdown();
    return check_done();
}
