/* test_mirrored_proportions.c — vdev_strategy_set_batch_proportions and the
 * runs it races with: a run splits every batch with the proportions it
 * started with, so the replicas' rows always add up to the batch, once each:
 *  - from a step function of the strategy the call is refused, with the
 *    message of the other calls a step function may not make, and changes
 *    nothing (the rows of that run and of the next are the old split's);
 *  - from another thread during a run it applies from the next run, not to
 *    the replicas still taking their rows;
 *  - a thread that keeps changing the proportions while runs go on never
 *    gives a run overlapping or missing rows (and, under the sanitizers,
 *    no read of freed proportions). */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static const char *const gpus[2] = {"GPU:0", "GPU:1"};

#define B 12 /* rows of the global batch: row i holds the value i */

struct job {
    vdev_strategy_t *s;
    vdev_tensor_t *x;                  /* [B] on CPU:0 */
    int call_in_step;                  /* replica 1 calls set_batch_proportions */
    _Atomic int in_run, set_done;      /* the other thread's handshake */
    int wait_for_set;                  /* replicas wait for set_done before their rows */
    /* what each replica saw (read by the main thread after the run) */
    int64_t first[2], rows[2];
    int mixed[2];                      /* its rows were not consecutive values */
    enum vdev_status set_st;
    char set_msg[512];
};

/* The replica's rows: the first value and how many; mixed when they are
 * not first, first+1, ... */
static enum vdev_status take_rows(vdev_replica_context_t *ctx, struct job *j)
{
    int r = vdev_replica_id(ctx);
    vdev_tensor_t *x = vdev_replica_batch(ctx, j->x);
    if (!x)
        return vdev_last_status();
    float h[B];
    int64_t n = vdev_tensor_dim(x, 0);
    enum vdev_status st = vdev_tensor_to_host(x, h, (size_t)n * sizeof *h);
    if (st != VDEV_OK)
        return st;
    j->rows[r] = n;
    j->first[r] = n ? (int64_t)h[0] : -1;
    j->mixed[r] = 0;
    for (int64_t i = 1; i < n; i++)
        j->mixed[r] |= h[i] != h[0] + (float)i;
    return VDEV_OK;
}

static enum vdev_status step(vdev_replica_context_t *ctx, void *u)
{
    struct job *j = u;
    int r = vdev_replica_id(ctx);
    if (j->call_in_step && r == 1) {
        const double p[2] = {1, 3};
        j->set_st = vdev_strategy_set_batch_proportions(j->s, p, 2);
        snprintf(j->set_msg, sizeof j->set_msg, "%s", vdev_last_error());
        /* and back to even: refused alike */
        if (vdev_strategy_set_batch_proportions(j->s, NULL, 0) != VDEV_ERR_INVALID_ARG)
            j->set_st = VDEV_OK;
        vdev_clear_error();
    }
    if (j->wait_for_set) {
        if (r == 0)
            atomic_store(&j->in_run, 1);
        check_wait_flag(&j->set_done);
    }
    return take_rows(ctx, j);
}

static void make_batch(struct job *j)
{
    float v[B];
    for (int i = 0; i < B; i++)
        v[i] = (float)i;
    int64_t shape[1] = {B};
    CHECK_OK(vdev_device_push("CPU:0"));
    j->x = vdev_tensor_from_host(v, shape, 1, VDEV_F32);
    CHECK_OK(vdev_device_pop());
    CHECK(j->x != NULL);
}

/* The run's rows: replica 0's then replica 1's, together the batch once. */
static void check_split(const struct job *j, int64_t rows0, int line)
{
    int good = j->rows[0] == rows0 && j->rows[1] == B - rows0 && !j->mixed[0] && !j->mixed[1] &&
               (rows0 == 0 || j->first[0] == 0) && (rows0 == B || j->first[1] == rows0);
    if (good)
        check_passed++;
    else
        check_fail(__FILE__, line,
                   "rows: replica 0 %lld from %lld%s, replica 1 %lld from %lld%s; expected %lld "
                   "and %lld",
                   (long long)j->rows[0], (long long)j->first[0], j->mixed[0] ? " (mixed)" : "",
                   (long long)j->rows[1], (long long)j->first[1], j->mixed[1] ? " (mixed)" : "",
                   (long long)rows0, (long long)(B - rows0));
}

static void test_refused_in_step(void)
{
    check_fresh("2x1GiB");
    struct job j = {0};
    CHECK_OK(vdev_mirrored_strategy_new(gpus, 2, &j.s));
    make_batch(&j);
    j.call_in_step = 1;
    CHECK_OK(vdev_strategy_run(j.s, step, &j, NULL));
    CHECK(j.set_st == VDEV_ERR_INVALID_ARG);
    CHECK_STR(j.set_msg, "vdev_strategy_set_batch_proportions: called from a step function of "
                         "the strategy; a run keeps the split it started with (set the "
                         "proportions between runs)");
    check_split(&j, 6, __LINE__); /* even, in this run */
    j.call_in_step = 0;
    CHECK_OK(vdev_strategy_run(j.s, step, &j, NULL));
    check_split(&j, 6, __LINE__); /* and in the next: nothing changed */
    /* between runs it applies */
    const double p[2] = {1, 3};
    CHECK_OK(vdev_strategy_set_batch_proportions(j.s, p, 2));
    CHECK_OK(vdev_strategy_run(j.s, step, &j, NULL));
    check_split(&j, 3, __LINE__);
    /* the other refusals keep their messages */
    CHECK_STATUS(vdev_strategy_set_batch_proportions(j.s, p, 3), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_strategy_set_batch_proportions: 3 proportions for 2 "
                                 "replicas");
    const double bad[2] = {1, 0};
    CHECK_STATUS(vdev_strategy_set_batch_proportions(j.s, bad, 2), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_strategy_set_batch_proportions: proportion 1 is 0; each "
                                 "is > 0 and finite");
    CHECK_STATUS(vdev_strategy_set_batch_proportions(NULL, p, 2), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_strategy_set_batch_proportions: strategy is NULL");
    vdev_tensor_free(j.x);
    vdev_strategy_free(j.s);
}

/* ---- from another thread ---- */

static struct job *other_job;

static void *set_during_run(void *arg)
{
    (void)arg;
    struct job *j = other_job;
    if (check_wait_flag(&j->in_run)) {
        const double p[2] = {1, 3};
        j->set_st = vdev_strategy_set_batch_proportions(j->s, p, 2);
    }
    atomic_store(&j->set_done, 1);
    return NULL;
}

static void test_from_another_thread(void)
{
    check_fresh("2x1GiB");
    struct job j = {0};
    CHECK_OK(vdev_mirrored_strategy_new(gpus, 2, &j.s));
    make_batch(&j);
    j.wait_for_set = 1;
    j.set_st = VDEV_ERR_BACKEND; /* until the thread calls */
    other_job = &j;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, set_during_run, NULL) == 0);
    enum vdev_status st = vdev_strategy_run(j.s, step, &j, NULL);
    pthread_join(t, NULL);
    CHECK_OK(st);
    CHECK(j.set_st == VDEV_OK);  /* accepted... */
    check_split(&j, 6, __LINE__); /* ...but this run keeps the even split */
    j.wait_for_set = 0;
    CHECK_OK(vdev_strategy_run(j.s, step, &j, NULL));
    check_split(&j, 3, __LINE__); /* the next one takes it */
    vdev_tensor_free(j.x);
    vdev_strategy_free(j.s);
}

/* ---- a thread that keeps changing them ---- */

static _Atomic int stop_flipping;
static _Atomic int flips;

static void *flip(void *arg)
{
    (void)arg;
    const double p[2] = {1, 3}, q[2] = {5, 1};
    for (int i = 0; !atomic_load(&stop_flipping); i++) {
        vdev_strategy_set_batch_proportions(other_job->s, i % 3 == 0 ? NULL : i % 3 == 1 ? p : q,
                                            i % 3 == 0 ? 0 : 2);
        atomic_fetch_add(&flips, 1);
    }
    return NULL;
}

static void test_flipping(void)
{
    check_fresh("2x1GiB");
    struct job j = {0};
    CHECK_OK(vdev_mirrored_strategy_new(gpus, 2, &j.s));
    make_batch(&j);
    other_job = &j;
    atomic_store(&stop_flipping, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, flip, NULL) == 0);
    int bad = 0, runs = 0;
    for (; runs < 300 && !bad; runs++) {
        if (vdev_strategy_run(j.s, step, &j, NULL) != VDEV_OK) {
            bad = 1;
            break;
        }
        /* even 6+6, 1:3 gives 3+9, 5:1 gives 10+2: whole splits only */
        int64_t r0 = j.rows[0];
        bad = !((r0 == 6 || r0 == 3 || r0 == 10) && j.rows[1] == B - r0 && !j.mixed[0] &&
                !j.mixed[1] && j.first[0] == 0 && j.first[1] == r0);
    }
    atomic_store(&stop_flipping, 1);
    pthread_join(t, NULL);
    if (bad)
        check_fail(__FILE__, __LINE__, "run %d: rows %lld from %lld and %lld from %lld (%s)",
                   runs, (long long)j.rows[0], (long long)j.first[0], (long long)j.rows[1],
                   (long long)j.first[1], vdev_last_error());
    else
        check_passed++;
    CHECK(atomic_load(&flips) > 0);
    vdev_tensor_free(j.x);
    vdev_strategy_free(j.s);
}

int main(void)
{
    test_refused_in_step();
    test_from_another_thread();
    test_flipping();
    vdev_shutdown();
    return check_done();
}
