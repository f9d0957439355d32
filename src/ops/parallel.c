/* parallel.c — the host kernels' thread pool (see parallel.h).
 *
 * One job at a time: a caller takes the pool with a trylock, publishes the
 * job under the pool's mutex with a new generation number, and runs part 0
 * itself; each worker runs the part matching its index and counts down. The
 * caller waits for the count to reach zero before returning, so the job's
 * context (on the caller's stack) outlives every use. How many parts a job
 * gets is the thread plan's (threads.h: OMP_NUM_THREADS or the CPUs the
 * process may use, divided among the streams); workers are started when a
 * job first needs them and live as long as the process. Which elements each
 * part gets changes nothing in the result: every kernel that uses the pool
 * computes each output element on its own. */
#define _GNU_SOURCE
#include "ops/parallel.h"

#include "base/base.h"
#include "ops/threads.h"

#define MAX_WORKERS 63

static struct {
    pthread_mutex_t busy;       /* held by the caller that owns the pool */
    pthread_mutex_t lock;       /* guards everything below */
    pthread_cond_t go, done;
    int n_workers;
    uint64_t start_gen[MAX_WORKERS + 1]; /* the generation when worker i started */
    uint64_t generation;
    int remaining;
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
    int64_t n;
    int parts;
} P = {.busy = PTHREAD_MUTEX_INITIALIZER,
       .lock = PTHREAD_MUTEX_INITIALIZER,
       .go = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER};

static void part_range(int64_t n, int parts, int k, int64_t *lo, int64_t *hi)
{
    /* parts of equal size, rounded to 16 elements so vector loops stay whole */
    int64_t per = ((n + parts - 1) / parts + 15) & ~(int64_t)15;
    *lo = per * k < n ? per * k : n;
    *hi = per * (k + 1) < n ? per * (k + 1) : n;
}

static void *worker(void *arg)
{
    int index = (int)(intptr_t)arg; /* 1..n_workers; the caller is part 0 */
    pthread_mutex_lock(&P.lock);
    uint64_t seen = P.start_gen[index]; /* jobs up to this one are not its own */
    for (;;) {
        while (P.generation == seen)
            pthread_cond_wait(&P.go, &P.lock);
        seen = P.generation;
        if (index >= P.parts)
            continue;
        void (*fn)(void *, int64_t, int64_t) = P.fn;
        void *ctx = P.ctx;
        int64_t lo, hi;
        part_range(P.n, P.parts, index, &lo, &hi);
        pthread_mutex_unlock(&P.lock);
        if (lo < hi)
            fn(ctx, lo, hi);
        pthread_mutex_lock(&P.lock);
        if (--P.remaining == 0)
            pthread_cond_signal(&P.done);
    }
    return NULL;
}

/* Starts workers up to `want` (the caller holds `busy`); fewer when the
 * system refuses threads, the caller then runs the rest. */
static void start_workers(int want)
{
    if (want > MAX_WORKERS)
        want = MAX_WORKERS;
    while (P.n_workers < want) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&P.lock);
        P.start_gen[P.n_workers + 1] = P.generation; /* no job runs: the caller holds busy */
        pthread_mutex_unlock(&P.lock);
        int ok = pthread_create(&t, &attr, worker, (void *)(intptr_t)(P.n_workers + 1)) == 0;
        pthread_attr_destroy(&attr);
        if (!ok)
            return;
        pthread_mutex_lock(&P.lock);
        P.n_workers++;
        pthread_mutex_unlock(&P.lock);
    }
}

void vdev_parallel_for_min(int64_t n, int64_t min_part, void (*fn)(void *, int64_t, int64_t),
                           void *ctx)
{
    if (min_part < 1)
        min_part = 1;
    if (n < 2 * min_part) {
        fn(ctx, 0, n);
        return;
    }
    int parts = vdev_threads_kernel_parts();
    if (n / parts < min_part)
        parts = (int)(n / min_part);
    if (parts < 2 || pthread_mutex_trylock(&P.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    start_workers(parts - 1);
    if (parts > 1 + P.n_workers)
        parts = 1 + P.n_workers;
    if (parts < 2) {
        pthread_mutex_unlock(&P.busy);
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&P.lock);
    P.fn = fn;
    P.ctx = ctx;
    P.n = n;
    P.parts = parts;
    P.remaining = parts - 1;
    P.generation++;
    pthread_cond_broadcast(&P.go);
    pthread_mutex_unlock(&P.lock);

    int64_t lo, hi;
    part_range(n, parts, 0, &lo, &hi);
    fn(ctx, lo, hi);

    pthread_mutex_lock(&P.lock);
    while (P.remaining > 0)
        pthread_cond_wait(&P.done, &P.lock);
    pthread_mutex_unlock(&P.lock);
    pthread_mutex_unlock(&P.busy);
}

void vdev_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx)
{
    vdev_parallel_for_min(n, VDEV_PARALLEL_MIN, fn, ctx);
}
