/* test_govern_callback.c — replacing a pressure callback while calls of it
 * are under way (vdev_memory_set_pressure_callback in vdev/govern.h):
 *  1. a callback blocked on another thread: replacing it with NULL returns
 *     only after that call has returned;
 *  2. a callback that replaces itself from inside returns (no deadlock),
 *     and no call reaches it afterwards;
 *  3. two callbacks, running at once on two threads, that replace each
 *     other's: both return;
 *  4. a call gathered for later (the runtime's card charge) goes to the
 *     callback in place when it is made: none after a replacement by NULL,
 *     the new one after a replacement by another;
 *  5. threads making calls while another replaces the callback, switching
 *     between two users and marking the old one dead each time: no call
 *     ever sees a dead user.
 * The pressure here is a ceiling lowered below what a device holds live
 * (VDEV_PRESSURE_CEILING), which calls the callback on the thread that
 * lowered it, each time. Nothing asserts on time: a case that could hang
 * runs on a thread of its own, and the test fails (and ends) when it has
 * not finished after check_wait_flag's bound. */
#define _GNU_SOURCE
#include "check.h"
#include "runtime/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MIB (1ull << 20)

/* Lowers the device's ceiling below its 64 MiB live: one CEILING call. */
static enum vdev_status squeeze(const char *dev)
{
    return vdev_memory_set_limits(dev, 0, 32 * MIB);
}

/* Two logical devices of 512 MiB, each holding 64 MiB live. */
static void fresh_devices(void *held[2])
{
    check_fresh("1x1GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "0", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:..512MiB,..512MiB", 1);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_mem_alloc("GPU:0", 64 * MIB, &held[0]));
    CHECK_OK(vdev_mem_alloc("GPU:1", 64 * MIB, &held[1]));
}

static void free_devices(void *held[2])
{
    CHECK_OK(vdev_mem_free("GPU:0", held[0]));
    CHECK_OK(vdev_mem_free("GPU:1", held[1]));
}

/* Runs fn on a thread of its own; fails the test and ends it when fn has
 * not returned within check_wait_flag's bound (a deadlock). */
static atomic_int case_done;
static void (*case_fn)(void);

static void *case_thread(void *arg)
{
    (void)arg;
    case_fn();
    atomic_store(&case_done, 1);
    return NULL;
}

static void run_bounded(const char *name, void (*fn)(void))
{
    pthread_t t;
    atomic_store(&case_done, 0);
    case_fn = fn;
    if (pthread_create(&t, NULL, case_thread, NULL) != 0) {
        check_fail(__FILE__, __LINE__, "%s: cannot start its thread", name);
        return;
    }
    if (!check_wait_flag(&case_done)) {
        check_fail(__FILE__, __LINE__, "%s: still waiting (deadlock)", name);
        check_done();
        _exit(1);
    }
    pthread_join(t, NULL);
}

/* ---- 1. a blocked call outlives the replacement no more ---- */

static struct {
    atomic_int calls;    /* calls made to block_fn */
    atomic_int release;  /* the first call may return */
    atomic_int returned; /* the first call has returned */
    atomic_int seen;     /* `returned` as the replacer saw it when its call returned */
    atomic_int replaced; /* the replacer's call returned */
} B;

static void block_fn(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)device;
    (void)bytes;
    (void)user;
    if (what != VDEV_PRESSURE_CEILING || atomic_fetch_add(&B.calls, 1) != 0)
        return; /* later calls only count */
    check_wait_flag(&B.release);
    atomic_store(&B.returned, 1);
}

static void *squeezer(void *arg)
{
    (void)arg;
    squeeze("GPU:0"); /* calls block_fn, which blocks */
    return NULL;
}

static void *replacer(void *arg)
{
    (void)arg;
    vdev_memory_set_pressure_callback("GPU:0", NULL, NULL);
    atomic_store(&B.seen, atomic_load(&B.returned));
    atomic_store(&B.replaced, 1);
    return NULL;
}

static void test_replace_waits(void)
{
    void *held[2];
    fresh_devices(held);
    memset(&B, 0, sizeof B);
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", block_fn, NULL));
    pthread_t ts, tr;
    CHECK(pthread_create(&ts, NULL, squeezer, NULL) == 0);
    CHECK(check_wait_flag(&B.calls)); /* the first call is blocked */
    CHECK(pthread_create(&tr, NULL, replacer, NULL) == 0);
    /* Until the replacer has put NULL in place, each squeeze here makes one
     * more (quick) call; the first that makes none says it has. */
    int installed = 0;
    for (int tries = 0; tries < 1000000 && !installed; tries++) {
        int before = atomic_load(&B.calls);
        CHECK_OK(squeeze("GPU:0"));
        installed = atomic_load(&B.calls) == before;
        if (!installed)
            sched_yield();
    }
    CHECK(installed);
    CHECK(!atomic_load(&B.replaced)); /* still waiting for the blocked call */
    atomic_store(&B.release, 1);
    pthread_join(ts, NULL);
    pthread_join(tr, NULL);
    CHECK(atomic_load(&B.replaced) && atomic_load(&B.seen)); /* returned after it */
    int calls = atomic_load(&B.calls);
    CHECK_OK(squeeze("GPU:0"));
    CHECK(atomic_load(&B.calls) == calls); /* none any more */
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 0));
    free_devices(held);
}

/* ---- 2. a callback that replaces itself ---- */

static atomic_int self_calls;

static void self_fn(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)what;
    (void)bytes;
    (void)user;
    atomic_fetch_add(&self_calls, 1);
    vdev_memory_set_pressure_callback(device, NULL, NULL); /* would wait for itself */
}

static void self_case(void)
{
    CHECK_OK(squeeze("GPU:0"));
    CHECK_OK(squeeze("GPU:0"));
}

static void test_replace_self(void)
{
    void *held[2];
    fresh_devices(held);
    atomic_store(&self_calls, 0);
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", self_fn, NULL));
    run_bounded("a callback replacing itself", self_case);
    CHECK(atomic_load(&self_calls) == 1); /* the second squeeze called nothing */
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 0));
    free_devices(held);
}

/* ---- 3. two callbacks replacing each other's, at once ---- */

static atomic_int cross_in[2], cross_out[2];

/* user: its device's index; replaces the other device's callback once both
 * are running. */
static void cross_fn(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)device;
    (void)what;
    (void)bytes;
    int i = (int)(intptr_t)user;
    atomic_store(&cross_in[i], 1);
    check_wait_flag(&cross_in[!i]);
    vdev_memory_set_pressure_callback(i ? "GPU:0" : "GPU:1", NULL, NULL);
    atomic_store(&cross_out[i], 1);
}

static void *cross_squeezer(void *arg)
{
    squeeze(arg);
    return NULL;
}

static void cross_case(void)
{
    pthread_t t[2];
    int ok0 = pthread_create(&t[0], NULL, cross_squeezer, "GPU:0") == 0;
    int ok1 = pthread_create(&t[1], NULL, cross_squeezer, "GPU:1") == 0;
    if (ok0)
        pthread_join(t[0], NULL);
    if (ok1)
        pthread_join(t[1], NULL);
}

static void test_replace_crossed(void)
{
    void *held[2];
    fresh_devices(held);
    for (int i = 0; i < 2; i++) {
        atomic_store(&cross_in[i], 0);
        atomic_store(&cross_out[i], 0);
    }
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", cross_fn, (void *)(intptr_t)0));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", cross_fn, (void *)(intptr_t)1));
    run_bounded("callbacks replacing each other's", cross_case);
    CHECK(atomic_load(&cross_out[0]) && atomic_load(&cross_out[1]));
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 0));
    CHECK_OK(vdev_memory_set_limits("GPU:1", 0, 0));
    free_devices(held);
}

/* ---- 4. gathered calls go to the callback in place when made ---- */

static void count_fn(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)device;
    (void)bytes;
    if (what == VDEV_PRESSURE_CEILING)
        atomic_fetch_add((atomic_int *)user, 1);
}

static void test_gathered_calls(void)
{
    void *held[2];
    fresh_devices(held);
    struct vdev_ldev *d = NULL;
    CHECK_OK(vdev_runtime_find("GPU:0", &d));
    if (!d)
        return;
    atomic_int old_n = 0, new_n = 0;
    struct vdev_pool_calls calls;
    calls.n = 0;
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", count_fn, &old_n));
    CHECK_OK(vdev_pool_set_limits_ex(d->pool, d->member, 0, 32 * MIB, 0, NULL, &calls));
    CHECK(calls.n == 1 && atomic_load(&old_n) == 0); /* gathered, not made */
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", NULL, NULL));
    vdev_pool_calls_make(&calls);
    CHECK(calls.n == 0 && atomic_load(&old_n) == 0); /* nobody's any more */
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", count_fn, &old_n));
    CHECK_OK(vdev_pool_set_limits_ex(d->pool, d->member, 0, 32 * MIB, 0, NULL, &calls));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", count_fn, &new_n));
    vdev_pool_calls_make(&calls);
    CHECK(atomic_load(&old_n) == 0 && atomic_load(&new_n) == 1);
    /* with no callback in place, nothing is gathered */
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", NULL, NULL));
    CHECK_OK(vdev_pool_set_limits_ex(d->pool, d->member, 0, 32 * MIB, 0, NULL, &calls));
    CHECK(calls.n == 0);
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 0));
    free_devices(held);
}

/* ---- 5. the old user, dead once the replacement returns, is never seen ---- */

#define STRESS_THREADS 4
#define STRESS_ROUNDS 400

struct stress_user {
    atomic_int dead;
    atomic_int calls;
};

static struct stress_user users[2];
static atomic_int stress_stop, dead_seen, stress_calls;

static void stress_fn(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)device;
    (void)what;
    (void)bytes;
    struct stress_user *u = user;
    for (int k = 0; k < 8; k++) { /* a call that lasts a little */
        if (atomic_load(&u->dead))
            atomic_fetch_add(&dead_seen, 1);
        sched_yield();
    }
    atomic_fetch_add(&u->calls, 1);
    atomic_fetch_add(&stress_calls, 1);
}

static void *stress_squeezer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stress_stop))
        squeeze("GPU:0");
    return NULL;
}

static void test_replace_under_calls(void)
{
    void *held[2];
    fresh_devices(held);
    atomic_store(&stress_stop, 0);
    atomic_store(&dead_seen, 0);
    atomic_store(&stress_calls, 0);
    for (int k = 0; k < 2; k++) {
        atomic_store(&users[k].dead, k != 0);
        atomic_store(&users[k].calls, 0);
    }
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", stress_fn, &users[0]));
    pthread_t t[STRESS_THREADS];
    int started = 0;
    for (int k = 0; k < STRESS_THREADS; k++)
        started += pthread_create(&t[k], NULL, stress_squeezer, NULL) == 0;
    CHECK(started == STRESS_THREADS);
    CHECK(check_wait_flag(&users[0].calls)); /* the calls are coming */
    for (int r = 0; r < STRESS_ROUNDS; r++) {
        /* a call of the callback in place (if any) first, so that the
         * replacements meet calls under way */
        int since = atomic_load(&stress_calls);
        for (long k = 0; r % 3 != 0 && atomic_load(&stress_calls) == since && k < 100000000; k++)
            sched_yield();
        struct stress_user *old = &users[r & 1], *next = &users[!(r & 1)];
        atomic_store(&next->dead, 0);
        CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", r % 3 == 2 ? NULL : stress_fn, next));
        atomic_store(&old->dead, 1); /* as free(old) would */
    }
    atomic_store(&stress_stop, 1);
    for (int k = 0; k < started; k++)
        pthread_join(t[k], NULL);
    CHECK(atomic_load(&dead_seen) == 0);
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", NULL, NULL));
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 0));
    free_devices(held);
}

int main(void)
{
    test_replace_waits();
    test_replace_self();
    test_replace_crossed();
    test_gathered_calls();
    test_replace_under_calls();
    vdev_shutdown();
    return check_done();
}
