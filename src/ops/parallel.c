/* parallel.c — the host kernels' thread pool (see parallel.h).
 *
 * One job at a time: a caller takes the pool with a trylock, publishes the
 * job under the pool's mutex with a new generation number, and runs part 0
 * itself; each worker runs the part matching its index and counts down. The
 * caller waits for the count to reach zero before returning, so the job's
 * context (on the caller's stack) outlives every use. Workers are started on
 * first use and live as long as the process. */
#define _GNU_SOURCE
#include "ops/parallel.h"

#include "base/base.h"

#include <unistd.h>

#define MAX_WORKERS 15

static struct {
    pthread_once_t once;
    pthread_mutex_t busy;       /* held by the caller that owns the pool */
    pthread_mutex_t lock;       /* guards everything below */
    pthread_cond_t go, done;
    int n_workers;
    uint64_t generation;
    int remaining;
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
    int64_t n;
    int parts;
} P = {.once = PTHREAD_ONCE_INIT,
       .busy = PTHREAD_MUTEX_INITIALIZER,
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
    uint64_t seen = 0;
    pthread_mutex_lock(&P.lock);
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

static void start_pool(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cores > 1 ? (int)cores - 1 : 0;
    if (n > MAX_WORKERS)
        n = MAX_WORKERS;
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int ok = pthread_create(&t, &attr, worker, (void *)(intptr_t)(i + 1)) == 0;
        pthread_attr_destroy(&attr);
        if (!ok)
            break; /* fewer workers: the caller runs the rest */
        P.n_workers = i + 1;
    }
}

void vdev_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx)
{
    if (n < 2 * VDEV_PARALLEL_MIN) {
        fn(ctx, 0, n);
        return;
    }
    pthread_once(&P.once, start_pool);
    if (P.n_workers == 0 || pthread_mutex_trylock(&P.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    int parts = 1 + P.n_workers;
    if (n / parts < VDEV_PARALLEL_MIN)
        parts = (int)(n / VDEV_PARALLEL_MIN);
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
