/* test_govern_stress.c — governance under contention (run under
 * ThreadSanitizer too, by scripts/test):
 *
 *  1. Floors hold: four threads on two logical devices of one card, random
 *     allocations. The critical device (GPU:0, floor 256 MiB) is driven by
 *     two threads that keep at most 256 one-MiB blocks live between them;
 *     the two threads of GPU:1 (low, no floor) grab whatever they can. Every
 *     allocation of GPU:0 must succeed: its floor is kept aside whatever
 *     GPU:1 does. (All sizes are whole MiB, so every region is too and a
 *     one-MiB block fits any free space: the floor's bytes are all usable.)
 *  2. Lending under contention: GPU:0 now goes above its floor while GPU:1
 *     frees and allocates; only GPU:1's cached memory may move, so GPU:1's
 *     blocks keep their contents (each thread checks its own blocks' first
 *     bytes, written through the simulated GPU's host-visible memory).
 *  3. Limits moved at run time under concurrent allocation: three threads
 *     allocate on GPU:1 while a fourth moves its floor and ceiling up and
 *     down and checks, after every change, that the statistics add up. Every
 *     failure is an OOM of a known kind.
 * Counts are fixed (no timing): each thread runs a set number of steps. */
#define _GNU_SOURCE
#include "check.h"
#include "runtime/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MIB (1ull << 20)
#define STEPS 20000
#define HELD 48

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static _Atomic int a_live;     /* GPU:0's one-MiB blocks live, both threads */
static _Atomic int a_failures; /* GPU:0 allocations that failed within its floor */
static _Atomic int bad_kind;   /* OOMs of an unexpected kind */
static _Atomic int corrupt;    /* GPU:1 blocks whose contents changed */
static char first_bad[512];    /* the first unexpected message (written once) */
static _Atomic int first_bad_set;

static void note_bad(const char *msg)
{
    atomic_fetch_add(&bad_kind, 1);
    if (!atomic_exchange(&first_bad_set, 1))
        snprintf(first_bad, sizeof first_bad, "%s", msg);
}

/* An OOM of a kind governance can give. */
static void check_oom(enum vdev_status st)
{
    const char *m = vdev_last_error();
    if (st == VDEV_ERR_OOM &&
        (strstr(m, "the ceiling was lowered at run time") || strstr(m, "the limit is short by") ||
         strstr(m, "; fragmentation: ") || strstr(m, "left for it")))
        return;
    note_bad(m);
}

struct worker {
    const char *dev;
    int critical;      /* GPU:0: one-MiB blocks within the floor */
    int above_floor;   /* GPU:0 in phase 2: up to 512 MiB */
    uint64_t seed;
};

/* GPU:1's blocks carry a tag in their first 8 bytes (simulated GPU memory
 * is host memory): lending must never take a live block. */
static void tag(void *p, uint64_t v) { memcpy(p, &v, sizeof v); }
static int tagged(const void *p, uint64_t v)
{
    uint64_t got;
    memcpy(&got, p, sizeof got);
    return got == v;
}

static pthread_barrier_t go; /* the workers of a case start together */

static _Atomic int card_full; /* GPU:1 has met the card's limit at least once */

static void *work(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(&go);
    void *held[HELD];
    uint64_t tags[HELD];
    int n = 0;
    uint64_t s = w->seed;
    /* GPU:0 starts once GPU:1 has taken all the card would give it, and
     * every 2000 steps gives all its memory back, so that GPU:1 takes the
     * shared memory again and GPU:0 must find its floor kept. */
    while (w->critical && !atomic_load(&card_full))
        sched_yield();
    for (int step = 0; step < STEPS; step++) {
        if (w->critical && step % 2000 == 1999) {
            while (n > 0) {
                vdev_mem_free(w->dev, held[--n]);
                atomic_fetch_sub(&a_live, 1);
            }
            vdev_memory_release_cached(w->dev, NULL);
        }
        uint64_t r = next_rand(&s);
        int alloc = n == 0 || (n < HELD && r % 3 != 0);
        if (!alloc) {
            int k = (int)(next_rand(&s) % (uint64_t)n);
            if (!w->critical && !tagged(held[k], tags[k]))
                atomic_fetch_add(&corrupt, 1);
            vdev_mem_free(w->dev, held[k]);
            if (w->critical)
                atomic_fetch_sub(&a_live, 1);
            held[k] = held[--n];
            tags[k] = tags[n];
            continue;
        }
        if (w->critical) {
            int limit = w->above_floor ? 512 : 256;
            int live = atomic_load(&a_live);
            do {
                if (live >= limit)
                    break;
            } while (!atomic_compare_exchange_weak(&a_live, &live, live + 1));
            if (live >= limit)
                continue;
            uint64_t bytes = w->above_floor && live >= 256 ? (1 + r % 8) * MIB : MIB;
            enum vdev_status st = vdev_mem_alloc(w->dev, bytes, &held[n]);
            if (st == VDEV_OK) {
                n++;
            } else {
                atomic_fetch_sub(&a_live, 1);
                if (live < 256)
                    atomic_fetch_add(&a_failures, 1);
                else
                    check_oom(st);
            }
        } else {
            uint64_t bytes = (1 + r % 32) * MIB;
            enum vdev_status st = vdev_mem_alloc(w->dev, bytes, &held[n]);
            if (st == VDEV_OK) {
                tags[n] = next_rand(&s);
                tag(held[n], tags[n]);
                n++;
            } else {
                atomic_store(&card_full, 1);
                check_oom(st);
            }
        }
    }
    while (n > 0) {
        n--;
        if (!w->critical && !tagged(held[n], tags[n]))
            atomic_fetch_add(&corrupt, 1);
        vdev_mem_free(w->dev, held[n]);
        if (w->critical)
            atomic_fetch_sub(&a_live, 1);
    }
    return NULL;
}

/* Every allocator's walk and its pool's check; safe while others allocate. */
static int consistent(void)
{
    for (int i = 0; i < vdev_runtime_n_devices(); i++) {
        struct vdev_ldev *d = vdev_runtime_device(i);
        if (vdev_alloc_check(d->alloc) != VDEV_OK || vdev_pool_check(d->pool) != VDEV_OK)
            return 0;
    }
    return 1;
}

static void run_workers(struct worker *w, int n)
{
    pthread_t t[8];
    pthread_barrier_init(&go, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
}

static void start(void)
{
    atomic_store(&card_full, 0);
    check_fresh("1x1GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "0", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:256MiB..@critical,..@low", 1);
    CHECK_OK(vdev_init());
}

static void test_floors_hold(void)
{
    start();
    struct worker w[4] = {{"GPU:0", 1, 0, 1}, {"GPU:0", 1, 0, 2}, {"GPU:1", 0, 0, 3},
                          {"GPU:1", 0, 0, 4}};
    run_workers(w, 4);
    CHECK(atomic_load(&a_failures) == 0);
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.n_failed_allocs, 0);
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK_OK(vdev_memory_info("GPU:1", &mi));
    CHECK(mi.n_failed_allocs > 0); /* GPU:1 did run into the floor */
    CHECK(consistent());
    CHECK(atomic_load(&bad_kind) == 0);
    if (atomic_load(&bad_kind))
        fprintf(stderr, "first unexpected OOM: %s\n", first_bad);
}

static void test_lending_concurrent(void)
{
    start();
    struct worker w[4] = {{"GPU:0", 1, 1, 5}, {"GPU:0", 1, 1, 6}, {"GPU:1", 0, 0, 7},
                          {"GPU:1", 0, 0, 8}};
    run_workers(w, 4);
    CHECK(atomic_load(&a_failures) == 0);
    CHECK(atomic_load(&corrupt) == 0);
    CHECK(consistent());
    CHECK(atomic_load(&bad_kind) == 0);
    if (atomic_load(&bad_kind))
        fprintf(stderr, "first unexpected OOM: %s\n", first_bad);
}

static _Atomic int monitor_bad;

static void *monitor(void *arg)
{
    (void)arg;
    uint64_t s = 99;
    for (int i = 0; i < 400; i++) {
        uint64_t r = next_rand(&s);
        uint64_t ceiling = (64 + r % 449) * MIB, floor = (r >> 20) % 2 ? (r >> 24) % 33 * MIB : 0;
        enum vdev_status st = vdev_memory_set_limits("GPU:1", floor, ceiling);
        /* A floor may not be there to take (the other device holds it). */
        if (st != VDEV_OK && st != VDEV_ERR_OOM)
            atomic_fetch_add(&monitor_bad, 1);
        if (!consistent())
            atomic_fetch_add(&monitor_bad, 1);
    }
    return NULL;
}

static void test_limits_concurrent(void)
{
    start();
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 0)); /* no floor: GPU:1 may take it all */
    struct worker w[3] = {{"GPU:1", 0, 0, 11}, {"GPU:1", 0, 0, 12}, {"GPU:0", 0, 0, 13}};
    pthread_t m;
    CHECK(pthread_create(&m, NULL, monitor, NULL) == 0);
    run_workers(w, 3);
    pthread_join(m, NULL);
    CHECK(atomic_load(&monitor_bad) == 0);
    CHECK(atomic_load(&corrupt) == 0);
    CHECK(atomic_load(&bad_kind) == 0);
    if (atomic_load(&bad_kind))
        fprintf(stderr, "first unexpected OOM: %s\n", first_bad);
    /* Everything freed: a lowered ceiling leaves nothing above it. */
    CHECK_OK(vdev_memory_set_limits("GPU:1", 0, 64 * MIB));
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:1", &mi));
    CHECK(mi.bytes_reserved <= 64 * MIB && mi.bytes_in_use == 0);
    CHECK(consistent());
}

int main(void)
{
    test_floors_hold();
    test_lending_concurrent();
    test_limits_concurrent();
    vdev_shutdown();
    return check_done();
}
