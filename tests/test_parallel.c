/* test_parallel.c — the host kernels' thread pool (src/ops/parallel.c):
 *
 *  - every element of [0, n) is given to exactly one call, in ranges that
 *    start at multiples of 16 and end at n, for sizes around the chunk and
 *    split thresholds (0, 1, 15, 2 min - 1, 2 min, odd sizes; an empty range
 *    only for n = 0);
 *  - the caller does not wait for a stalled worker: with a worker held
 *    inside its chunk until the caller has covered everything else, the job
 *    ends, and the worker's chunk is at most a quarter of the job (work is
 *    claimed chunk by chunk; with fixed halves a stalled worker would hold
 *    back half of it);
 *  - a worker does take part: the caller's first chunk waits until a worker
 *    has started one;
 *  - several threads submitting jobs at once (the pool taken: the others run
 *    inline), and thousands of small jobs back to back (a worker late for one
 *    job must not claim a chunk of the next): every element once, every job.
 * The pool is sized by OMP_NUM_THREADS (threads.h), set here. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MAX_N 200000

struct cover {
    _Atomic unsigned char *hits; /* times each element was given out */
    _Atomic int bad_range;       /* a range out of bounds or misaligned */
    _Atomic int calls;
    int64_t n;
};

static void cover_fn(void *vctx, int64_t lo, int64_t hi)
{
    struct cover *c = vctx;
    atomic_fetch_add(&c->calls, 1);
    if (lo < 0 || hi > c->n || (lo >= hi && c->n > 0) || lo % 16 != 0) {
        atomic_store(&c->bad_range, 1);
        return;
    }
    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
}

/* Runs one job over n elements with parts of at least min_part; 1 when every
 * element was given out exactly once in good ranges. */
static int cover_once(int64_t n, int64_t min_part, int *calls)
{
    struct cover c = {.n = n};
    void *mem = calloc((size_t)(n ? n : 1), sizeof *c.hits);
    if (!mem)
        return 0;
    c.hits = mem;
    vdev_parallel_for_min(n, min_part, cover_fn, &c);
    int ok = !atomic_load(&c.bad_range);
    for (int64_t i = 0; i < n; i++)
        ok &= atomic_load(&c.hits[i]) == 1;
    if (calls)
        *calls = atomic_load(&c.calls);
    free(mem);
    return ok;
}

static void test_cover(void)
{
    const int64_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 1000, 4097, 65536, 1000003 % MAX_N};
    const int64_t mins[] = {1, 16, 100, 1 << 15};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t m = 0; m < sizeof mins / sizeof *mins; m++) {
            int calls = 0;
            int ok = cover_once(sizes[s], mins[m], &calls);
            if (!ok)
                check_fail(__FILE__, __LINE__, "n %lld, min_part %lld: not every element once",
                           (long long)sizes[s], (long long)mins[m]);
            CHECK(ok);
            /* Below twice the minimum the caller runs the range in one call. */
            if (sizes[s] > 0 && sizes[s] < 2 * mins[m])
                CHECK(calls == 1);
        }
    /* A range large enough to split is split (more than one call). */
    int calls = 0;
    CHECK(cover_once(100000, 16, &calls));
    CHECK(calls > 1);
    /* The one-argument form: below VDEV_PARALLEL_MIN twice over, one call. */
    struct cover c = {.n = 1000};
    void *mem = calloc(1000, sizeof *c.hits);
    CHECK(mem != NULL);
    if (mem) {
        c.hits = mem;
        vdev_parallel_for(1000, cover_fn, &c);
        CHECK(atomic_load(&c.calls) == 1);
        free(mem);
    }
}

/* ---- the caller covers what a held worker leaves ---- */

struct held {
    pthread_t caller;
    int64_t n;
    _Atomic int64_t by_caller; /* elements the caller has run */
    _Atomic int worker_started, worker_ranges, caller_waited;
    _Atomic int worker_saw_rest; /* the held worker saw the caller cover the rest */
    _Atomic int64_t worker_len;  /* the held worker's range */
};

static int held_wait(const _Atomic int *flag)
{
    return check_wait_flag(flag);
}

static void held_fn(void *vctx, int64_t lo, int64_t hi)
{
    struct held *h = vctx;
    if (pthread_equal(pthread_self(), h->caller)) {
        /* The caller's first chunk waits until a worker is inside one. */
        if (!atomic_exchange(&h->caller_waited, 1))
            CHECK(held_wait(&h->worker_started));
        atomic_fetch_add(&h->by_caller, hi - lo);
        return;
    }
    atomic_fetch_add(&h->worker_ranges, 1);
    if (atomic_exchange(&h->worker_started, 1))
        return; /* a second worker range (not expected: the first is held) */
    atomic_store(&h->worker_len, hi - lo);
    /* Held until the caller has run everything outside this range. */
    for (int i = 0; i < 120000; i++) { /* 120 s: only a hang reaches it */
        if (atomic_load(&h->by_caller) == h->n - (hi - lo)) {
            atomic_store(&h->worker_saw_rest, 1);
            return;
        }
        check_sleep_ms(1);
    }
}

static void test_caller_covers_rest(void)
{
    struct held h = {.caller = pthread_self(), .n = 4096};
    vdev_parallel_for_min(h.n, 16, held_fn, &h);
    CHECK(atomic_load(&h.worker_started) == 1);
    CHECK(atomic_load(&h.worker_ranges) == 1);
    CHECK(atomic_load(&h.worker_saw_rest) == 1);
    /* A stalled worker holds back at most a quarter of the job. */
    CHECK(atomic_load(&h.worker_len) > 0 && atomic_load(&h.worker_len) <= h.n / 4);
}

/* ---- several submitters, many jobs ---- */

static _Atomic int submit_failed;

static void *submitter(void *arg)
{
    int64_t base = (int64_t)(intptr_t)arg + 1;
    for (int j = 0; j < 300; j++) {
        int64_t n = 16 + (base * 7919 + (int64_t)j * 104729) % 20000;
        if (!cover_once(n, 16, NULL))
            atomic_store(&submit_failed, 1);
    }
    return NULL;
}

static void test_concurrent_submitters(void)
{
    CHECK(check_run_threads(4, submitter) == 4);
    CHECK(!atomic_load(&submit_failed));
}

static void test_many_small_jobs(void)
{
    int ok = 1;
    for (int j = 0; j < 3000 && ok; j++)
        ok = cover_once(32 + j % 97, 16, NULL);
    CHECK(ok);
}

int main(void)
{
    check_fresh(NULL);
    setenv("OMP_NUM_THREADS", "2", 1); /* one worker beside the caller */
    CHECK_OK(vdev_init());
    test_cover();
    test_caller_covers_rest();
    test_many_small_jobs();
    test_concurrent_submitters();

    /* Four threads in the pool: the same coverage. */
    check_fresh(NULL);
    setenv("OMP_NUM_THREADS", "4", 1);
    CHECK_OK(vdev_init());
    test_cover();
    test_many_small_jobs();
    vdev_shutdown();
    return check_done();
}
