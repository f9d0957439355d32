/* test_mirrored_oom.c — a step that fails on one replica changes nothing on
 * any replica, and can be retried:
 *  - out of memory in the forward pass on the smallest of three logical GPUs
 *    (the others wait in the gradients' all-reduce and fail at once): every
 *    replica's variables are bit for bit as before, nothing leaks, and the
 *    same step with a smaller global batch succeeds;
 *  - out of memory on one replica while apply_gradients copies its
 *    gradients (the all-reduce fails on every replica);
 *  - a replica that cannot make its optimizer's slots (its optimizer was
 *    freed; Adam's slots do not fit its device): the replicas agree before
 *    any update, so none updates, and none keeps a slot made for the step
 *    (a retry gives what a step that never failed gives);
 *  - a replica's own failure is reported in its own words ("replica 2
 *    (/device:GPU:2): OOM when ..."), the others' name it in the collective
 *    that carried it ("barrier (call 1): rank 2 (/device:GPU:2): ...");
 *  - a backend failure while the gradients move (injected into one replica's
 *    copies): no replica updates, and the next step works (the strategy
 *    resets its communicator);
 *  - no host memory for the handles a strategy makes: VDEV_ERR_OOM, and
 *    nothing left behind (threads, communicator). */
#define _GNU_SOURCE
#include "mirrored_model.h"

#include "base/handles.h"
#include "coll/ring.h"

static const char *const devs[3] = {"GPU:0", "GPU:1", "GPU:2"};

/* Every replica's parameters, flat, into out[3][MM_PARAMS]. */
static void read_all(struct mm *m, float *out)
{
    for (int r = 0; r < 3; r++)
        mm_read(m->vars[r], out + r * MM_PARAMS);
}

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_in_use;
}

/* ---- a victim replica fills its device just before apply_gradients ---- */

struct victim {
    struct mm *m;
    int replica;                 /* the one that fills its device */
    int free_optimizer;          /* frees its optimizer instead */
    uint64_t room;               /* bytes it leaves free, in one piece (0: none) */
};

#define MAX_BLOCKS 1024

static enum vdev_status step_with_victim(vdev_replica_context_t *ctx, void *u)
{
    struct victim *v = u;
    struct mm *m = v->m;
    int r = vdev_replica_id(ctx);
    vdev_tensor_t *x = vdev_replica_batch(ctx, m->x), *y = vdev_replica_batch(ctx, m->y);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss =
        vdev_replica_compute_average_loss(ctx, mm_per_example(m->mlp[r], x, y), 0);
    vdev_tensor_t *grads[MM_NV];
    enum vdev_status st = loss ? vdev_tape_gradient(tape, loss, m->vars[r], MM_NV, grads)
                               : vdev_last_status();
    vdev_tape_end(tape);
    if (st != VDEV_OK)
        return st;
    void *blocks[MAX_BLOCKS];
    int nb = 0;
    if (r == v->replica && v->free_optimizer) {
        vdev_optimizer_free(m->opt[r]);
    } else if (r == v->replica) {
        void *room = NULL;
        if (v->room && vdev_mem_alloc(vdev_replica_device(ctx), v->room, &room) != VDEV_OK)
            return vdev_last_status();
        nb = check_fill_device(vdev_replica_device(ctx), blocks, MAX_BLOCKS);
        if (room)
            vdev_mem_free(vdev_replica_device(ctx), room);
    }
    st = vdev_replica_apply_gradients(ctx, m->opt[r], m->vars[r], grads, MM_NV);
    while (nb)
        vdev_mem_free(vdev_replica_device(ctx), blocks[--nb]);
    return st;
}

/* A good step after a failed one: it works, and the replicas agree. */
static void good_step(vdev_strategy_t *s, struct mm *m, const float *before)
{
    mm_batch(m, 30, 9);
    CHECK_OK(vdev_strategy_run(s, mm_step, m, NULL));
    float after[3 * MM_PARAMS];
    read_all(m, after);
    CHECK(memcmp(after, before, MM_PARAMS * 4) != 0); /* it learned */
    CHECK(memcmp(after, after + MM_PARAMS, MM_PARAMS * 4) == 0);
    CHECK(memcmp(after, after + 2 * MM_PARAMS, MM_PARAMS * 4) == 0);
}

static void test_oom_in_forward(void)
{
    check_fresh("1x8GiB");
    uint64_t limits[3] = {64ull << 20, 64ull << 20, 8ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 3));
    vdev_config_set_deterministic(true);
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 3, &s));
    struct mm m = {.seed = 3, .lr = 0.1f, .adam = 1};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    mm_batch(&m, 30, 1);
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL)); /* Adam's slots exist now */
    float before[3 * MM_PARAMS], after[3 * MM_PARAMS];
    read_all(&m, before);
    uint64_t used[3];
    for (int r = 0; r < 3; r++)
        used[r] = in_use(devs[r]);

    /* 120000 rows: 40000 a replica, about 10 MiB of activations each */
    mm_batch(&m, 120000, 2);
    CHECK_STATUS(vdev_strategy_run(s, mm_step, &m, NULL), VDEV_ERR_OOM);
    CHECK_MSG("replica 2 (/device:GPU:2): OOM when allocating tensor with shape[40000,");
    CHECK_MSG("on /job:localhost/replica:0/task:0/device:GPU:2");
    read_all(&m, after);
    CHECK(memcmp(before, after, sizeof before) == 0); /* no replica changed */
    for (int r = 0; r < 3; r++)
        CHECK_EQ_U64(in_use(devs[r]), used[r]);       /* nothing leaked */

    /* retried smaller, it works */
    mm_batch(&m, 12000, 2);
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    read_all(&m, after);
    CHECK(memcmp(before, after, MM_PARAMS * 4) != 0);
    CHECK(memcmp(after, after + MM_PARAMS, MM_PARAMS * 4) == 0);
    CHECK(memcmp(after, after + 2 * MM_PARAMS, MM_PARAMS * 4) == 0);
    mm_free(&m, 3);
    vdev_strategy_free(s);
}

/* Three logical GPUs of 16 MiB on one card. */
static void small_devices(void)
{
    check_fresh("1x4GiB");
    uint64_t limits[3] = {16ull << 20, 16ull << 20, 16ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 3));
}

static void test_oom_in_apply(void)
{
    small_devices();
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 3, &s));
    struct mm m = {.seed = 4, .lr = 0.1f};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    mm_batch(&m, 30, 1);
    float before[3 * MM_PARAMS], after[3 * MM_PARAMS];
    read_all(&m, before);
    struct victim v = {&m, 1, 0, 0};
    CHECK_STATUS(vdev_strategy_run(s, step_with_victim, &v, NULL), VDEV_ERR_OOM);
    CHECK_MSG("replica 1 (/device:GPU:1): OOM when allocating tensor with shape[8,16] and type "
              "float");
    read_all(&m, after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    good_step(s, &m, before);
    mm_free(&m, 3);
    vdev_strategy_free(s);
}

static void test_no_slots_on_one(void)
{
    small_devices();
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 3, &s));
    struct mm m = {.seed = 4, .lr = 0.1f, .adam = 1};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    mm_batch(&m, 30, 1);
    float before[3 * MM_PARAMS], after[3 * MM_PARAMS];
    read_all(&m, before);
    struct victim v = {&m, 2, 1, 0};
    CHECK_STATUS(vdev_strategy_run(s, step_with_victim, &v, NULL), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("replica 2 (/device:GPU:2): vdev_optimizer_prepare: not a live optimizer");
    read_all(&m, after);
    CHECK(memcmp(before, after, sizeof before) == 0); /* replicas 0 and 1 did not update */
    m.opt[2] = vdev_adam_new(m.lr, 0.9f, 0.999f, 1e-7f);
    good_step(s, &m, before);
    mm_free(&m, 3);
    vdev_strategy_free(s);
}

/* Every slot of replica r's optimizer (m then v of each variable), flat,
 * into out[2 * MM_PARAMS]. */
static void read_slots(struct mm *m, int r, float *out)
{
    size_t off = 0;
    for (int i = 0; i < MM_NV; i++) {
        vdev_tensor_t *sl[2];
        CHECK(vdev_optimizer_slots(m->opt[r], m->vars[r][i], sl, NULL, 2) == 2);
        size_t n = (size_t)vdev_tensor_numel(m->vars[r][i]);
        for (int k = 0; k < 2; k++, off += n)
            CHECK_OK(vdev_tensor_to_host(sl[k], out + off, n * 4));
    }
}

/* Replica 2's device has room for the gradients' copies (1280 bytes) and
 * four of Adam's eight slots (W0's and b0's), not for the fifth (W1's m,
 * [16,4]): replicas 0 and 1 made all of theirs. The step fails everywhere and no
 * optimizer keeps a slot of it (every device's bytes in use are as before
 * the step, replica 2's included); the same step retried with the memory
 * back gives bit for bit what a step that never failed gives: variables,
 * slots and iteration count. */
static void test_slots_all_or_nothing(void)
{
    small_devices();
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 3, &s));
    struct mm m = {.seed = 5, .lr = 0.1f, .adam = 1}, ref = {.seed = 5, .lr = 0.1f, .adam = 1};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    mm_batch(&m, 30, 1);
    float before[3 * MM_PARAMS], after[3 * MM_PARAMS];
    read_all(&m, before);
    uint64_t used[3];
    for (int r = 0; r < 3; r++)
        used[r] = in_use(devs[r]);
    struct victim v = {&m, 2, 0, 1280 + 2 * 512 + 2 * 256};
    CHECK_STATUS(vdev_strategy_run(s, step_with_victim, &v, NULL), VDEV_ERR_OOM);
    CHECK_MSG("replica 2 (/device:GPU:2): OOM when allocating tensor with shape[16,4] and type "
              "float");
    read_all(&m, after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    for (int r = 0; r < 3; r++)
        CHECK_EQ_U64(in_use(devs[r]), used[r]); /* no replica kept a slot */

    /* retried, and the reference: the same model's first step, never failed */
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, NULL));
    CHECK_OK(vdev_strategy_run(s, mm_build, &ref, NULL));
    mm_batch(&ref, 30, 1);
    CHECK_OK(vdev_strategy_run(s, mm_step, &ref, NULL));
    float want[3 * MM_PARAMS];
    read_all(&m, after);
    read_all(&ref, want);
    CHECK(memcmp(after, before, MM_PARAMS * 4) != 0);
    CHECK(memcmp(after, want, sizeof want) == 0);
    static float got_s[2 * MM_PARAMS], want_s[2 * MM_PARAMS];
    for (int r = 0; r < 3; r++) {
        int64_t it = -1;
        CHECK_OK(vdev_optimizer_get_iterations(m.opt[r], &it));
        CHECK(it == 1);
        read_slots(&m, r, got_s);
        read_slots(&ref, r, want_s);
        CHECK(memcmp(got_s, want_s, sizeof got_s) == 0);
    }
    mm_free(&ref, 3);
    mm_free(&m, 3);
    vdev_strategy_free(s);
}

/* ---- Adam's slots do not fit on the smallest replica's device ---- */

#define BIG_N (512 * 1024) /* 2 MiB of float32 */

struct big {
    vdev_tensor_t *var[3];
    vdev_optimizer_t *opt[3];
    char msg[3][512]; /* each replica's error from apply_gradients */
};

static enum vdev_status big_build(vdev_replica_context_t *ctx, void *u)
{
    struct big *b = u;
    int r = vdev_replica_id(ctx);
    int64_t shape[1] = {BIG_N};
    b->var[r] = vdev_variable(vdev_tensor_zeros(shape, 1, VDEV_F32));
    b->opt[r] = vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f);
    return b->var[r] && b->opt[r] ? VDEV_OK : vdev_last_status();
}

static enum vdev_status big_step(vdev_replica_context_t *ctx, void *u)
{
    struct big *b = u;
    int r = vdev_replica_id(ctx);
    int64_t shape[1] = {BIG_N};
    vdev_tensor_t *g = vdev_tensor_ones(shape, 1, VDEV_F32);
    if (!g)
        return vdev_last_status();
    enum vdev_status st = vdev_replica_apply_gradients(ctx, b->opt[r], &b->var[r], &g, 1);
    snprintf(b->msg[r], sizeof b->msg[r], "%s", st ? vdev_last_error() : "");
    vdev_tensor_free(g);
    return st;
}

/* The variable, its gradient and the gradient's copy (6 MiB) fit replica 2's
 * 8 MiB; Adam's two slots (4 MiB more) do not. Its own failure is reported
 * as it is, without the barrier that carried it to the others (the README's
 * "replica 2 (/device:GPU:2): OOM when ..."); the others' errors name it in
 * the barrier; every replica fails the step and none updates. */
static void test_slots_oom(void)
{
    check_fresh("1x4GiB");
    uint64_t limits[3] = {64ull << 20, 64ull << 20, 8ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 3));
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 3, &s));
    struct big b;
    memset(&b, 0, sizeof b);
    CHECK_OK(vdev_strategy_run(s, big_build, &b, NULL));
    CHECK_STATUS(vdev_strategy_run(s, big_step, &b, NULL), VDEV_ERR_OOM);
    const char *own = "OOM when allocating tensor with shape[524288] and type float (2.00 MiB) on "
                      "/job:localhost/replica:0/task:0/device:GPU:2: 8.00 MiB in use of 8.00 MiB "
                      "limit, largest free block 0 B; the limit is short by 2.00 MiB; would help: "
                      "a larger limit, a smaller batch";
    char want[640];
    snprintf(want, sizeof want, "replica 2 (/device:GPU:2): %s", own);
    CHECK_STR(vdev_last_error(), want);
    CHECK_STR(b.msg[2], own);
    snprintf(want, sizeof want, "barrier (call 1): rank 2 (/device:GPU:2): %s", own);
    CHECK_STR(b.msg[0], want); /* the others name the replica that failed */
    CHECK_STR(b.msg[1], want);
    static float v[BIG_N];
    for (int r = 0; r < 3; r++) {
        CHECK_OK(vdev_tensor_to_host(b.var[r], v, sizeof v));
        CHECK(v[0] == 0.0f && v[BIG_N - 1] == 0.0f); /* no replica updated */
    }
    for (int r = 0; r < 3; r++) {
        vdev_optimizer_free(b.opt[r]);
        vdev_tensor_free(b.var[r]);
    }
    vdev_strategy_free(s);
}

static void test_backend_failure(void)
{
    check_fresh("3x1GiB");
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 3, &s));
    struct mm m = {.seed = 6, .lr = 0.1f};
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    mm_batch(&m, 30, 1);
    float before[3 * MM_PARAMS], after[3 * MM_PARAMS];
    read_all(&m, before);
    vdev_coll_ring_fail_copy(2, 1);
    CHECK_STATUS(vdev_strategy_run(s, mm_step, &m, NULL), VDEV_ERR_BACKEND);
    vdev_coll_ring_fail_copy(0, 0);
    CHECK_MSG("replica 2 (/device:GPU:2): all-reduce (call 0): rank 2 (/device:GPU:2): "
              "/device:GPU:2: injected failure of a device-to-device copy");
    read_all(&m, after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    good_step(s, &m, before);
    mm_free(&m, 3);
    vdev_strategy_free(s);
}

/* The first strategy of the process: each handle table it uses makes its
 * first segment, which the test makes fail in turn. */
static void test_no_handles(void)
{
    check_fresh("2x1GiB");
    static const char *const what[3] = {"communicator", "replica context", "strategy"};
    /* the nth new segment fails: the communicator's (the first), then the
     * replica contexts' (after the communicator's, now made), then the
     * strategy's (after the replica contexts') */
    static const int nth[3] = {1, 2, 2};
    for (int k = 0; k < 3; k++) {
        vdev_strategy_t *s = (vdev_strategy_t *)1;
        vdev_handles_fail_segment(nth[k]);
        CHECK_STATUS(vdev_mirrored_strategy_new(devs, 2, &s), VDEV_ERR_OOM);
        vdev_handles_fail_segment(0);
        char msg[96];
        snprintf(msg, sizeof msg, "out of host memory for 1024 more %s handles", what[k]);
        CHECK_MSG(msg);
        CHECK(s == NULL);
    }
    vdev_strategy_t *s;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 2, &s));
    vdev_strategy_free(s);
}

int main(void)
{
    test_no_handles();
    test_oom_in_forward();
    test_oom_in_apply();
    test_no_slots_on_one();
    test_slots_all_or_nothing();
    test_slots_oom();
    test_backend_failure();
    vdev_shutdown();
    return check_done();
}
