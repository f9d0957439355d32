/* test_stress_strategy.c — a mirrored strategy freed on one thread while
 * another thread runs steps on it in a loop (and sets its batch proportions):
 * the free waits for the call under way and every later call is refused with
 * the dead handle's message. Before, a run that had looked the strategy up
 * just before the free took the run lock after the free had checked it, so
 * the free destroyed the strategy under the run (the run then waited forever
 * on a destroyed condition variable, or read freed memory). */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#define ROUNDS 60

static vdev_strategy_t *_Atomic current; /* the strategy of this round, NULL between rounds */
static atomic_int started, quit, bad_errors;
static atomic_long steps;

static enum vdev_status step(vdev_replica_context_t *ctx, void *user)
{
    (void)ctx, (void)user;
    atomic_fetch_add(&steps, 1);
    return VDEV_OK;
}

/* A call on a strategy that may be freed by now: it succeeds, or is refused
 * as a dead handle. */
static void check_dead_or_ok(enum vdev_status st, const char *fn)
{
    if (st == VDEV_OK)
        return;
    char want[128];
    snprintf(want, sizeof want, "%s: not a live strategy (freed already, or not a strategy)", fn);
    if (st != VDEV_ERR_INVALID_ARG || strcmp(vdev_last_error(), want) != 0) {
        fprintf(stderr, "%s: %d %s\n", fn, (int)st, vdev_last_error());
        atomic_fetch_add(&bad_errors, 1);
    }
}

/* Runs steps on whatever strategy is current, without pause. */
static void *runner(void *arg)
{
    (void)arg;
    while (!atomic_load(&quit)) {
        vdev_strategy_t *s = atomic_load(&current);
        if (!s) {
            sched_yield();
            continue;
        }
        atomic_store(&started, 1);
        check_dead_or_ok(vdev_strategy_run(s, step, NULL, NULL), "vdev_strategy_run");
    }
    return NULL;
}

/* Sets the proportions of the current strategy, without pause. */
static void *proportioner(void *arg)
{
    (void)arg;
    static const double p[2] = {1.0, 3.0};
    while (!atomic_load(&quit)) {
        vdev_strategy_t *s = atomic_load(&current);
        if (s)
            check_dead_or_ok(vdev_strategy_set_batch_proportions(s, p, 2),
                             "vdev_strategy_set_batch_proportions");
        else
            sched_yield();
    }
    return NULL;
}

static void free_during_runs(void)
{
    check_fresh("3x16GiB");
    CHECK_OK(vdev_init());
    static const char *const devs[2] = {"GPU:0", "GPU:1"};
    pthread_t t[2];
    CHECK(pthread_create(&t[0], NULL, runner, NULL) == 0);
    CHECK(pthread_create(&t[1], NULL, proportioner, NULL) == 0);
    for (int r = 0; r < ROUNDS; r++) {
        vdev_strategy_t *s = NULL;
        CHECK_OK(vdev_mirrored_strategy_new(devs, 2, &s));
        atomic_store(&started, 0);
        atomic_store(&current, s);
        while (!atomic_load(&started))
            sched_yield();
        for (int k = 0; k < r % 5; k++)
            sched_yield();
        vdev_strategy_free(s); /* waits for the run under way, if any */
        atomic_store(&current, NULL);
        CHECK_ERR(vdev_strategy_run(s, step, NULL, NULL), VDEV_ERR_INVALID_ARG,
                  "vdev_strategy_run: not a live strategy (freed already, or not a strategy)");
    }
    atomic_store(&quit, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&bad_errors) == 0);
    CHECK(atomic_load(&steps) > 0);
    vdev_shutdown();
}

int main(void)
{
    free_during_runs();
    return check_done();
}
