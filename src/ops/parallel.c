/* parallel.c — the host kernels' thread pool (see parallel.h).
 *
 * One job at a time: a caller takes the pool with a trylock, publishes the
 * job under the pool's mutex with a new generation number, wakes the
 * workers, and starts on the job itself. A job is cut into chunks (about
 * four per thread for elementwise kernels, multiples of 16 elements; exactly
 * one per thread for matrix products, whose every call packs its operands)
 * that the caller and the workers claim one at a time from a shared counter,
 * so the caller never waits for a worker that has not woken yet: on a
 * machine whose other cores are busy (or a virtual machine whose other CPU
 * is taken), it runs the chunks itself, and waits only for the chunks a
 * worker has claimed. The counter holds the job's generation beside the next
 * chunk, and a claim is a compare-and-swap on both, so a worker that woke for
 * an earlier job cannot claim a chunk of a later one; the caller returns once
 * every chunk is done, so the job's context (on the caller's stack) outlives
 * every use. A worker done with a job watches for the next one for
 * WORKER_WAIT_NS (0.2 ms) before it sleeps: a training step's products and
 * updates come microseconds apart, and a wake-up from sleep (tens of
 * microseconds in a virtual machine) costs about as long as a small
 * product's half (OpenBLAS's own idle threads spin about 2^28 cycles). How
 * many threads a job may use is the thread plan's (threads.h); workers are
 * started when a job first needs them and live as long as the process. Which thread computes which
 * elements changes nothing in the result: every kernel that uses the pool
 * computes each output element on its own. */
#define _GNU_SOURCE
#include "ops/parallel.h"

#include "base/base.h"
#include "ops/threads.h"

#include <stdatomic.h>

#define MAX_WORKERS 63
#define CHUNKS_PER_THREAD 4
#define SPINS 2000        /* the caller's polls for claimed chunks before it sleeps */
#define WORKER_WAIT_NS 200000 /* how long a worker watches for the next job before it sleeps */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static struct {
    pthread_mutex_t busy;       /* held by the caller that owns the pool */
    pthread_mutex_t lock;       /* guards the job's description and the workers' count */
    pthread_cond_t go, done;
    int n_workers;
    uint64_t start_gen[MAX_WORKERS + 1]; /* the generation when worker i started */
    _Atomic uint64_t generation; /* changed under `lock`; read without it while a worker polls */
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
    int64_t n, chunk;
    uint32_t n_chunks;
    int parts;
    _Atomic uint64_t claim;   /* (generation's low 32 bits << 32) | next chunk */
    _Atomic uint32_t n_done;  /* chunks of the current job finished */
} P = {.busy = PTHREAD_MUTEX_INITIALIZER,
       .lock = PTHREAD_MUTEX_INITIALIZER,
       .go = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER};

struct job {
    uint32_t gen;
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
    int64_t n, chunk;
    uint32_t n_chunks;
};

/* Claims and runs chunks of job j until none is left (or a later job has
 * replaced it); returns 1 if this thread finished the job's last chunk. */
static int run_chunks(const struct job *j)
{
    for (;;) {
        uint64_t s = atomic_load_explicit(&P.claim, memory_order_acquire);
        do {
            if ((uint32_t)(s >> 32) != j->gen || (uint32_t)s >= j->n_chunks)
                return 0;
        } while (!atomic_compare_exchange_weak_explicit(&P.claim, &s, s + 1, memory_order_acq_rel,
                                                        memory_order_acquire));
        int64_t lo = (int64_t)(uint32_t)s * j->chunk;
        int64_t hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        j->fn(j->ctx, lo, hi);
        if (atomic_fetch_add_explicit(&P.n_done, 1, memory_order_acq_rel) + 1 == j->n_chunks)
            return 1;
    }
}

static void *worker(void *arg)
{
    int index = (int)(intptr_t)arg; /* 1..n_workers; the caller is thread 0 */
    pthread_mutex_lock(&P.lock);
    uint64_t seen = P.start_gen[index]; /* jobs up to this one are not its own */
    for (;;) {
        if (atomic_load_explicit(&P.generation, memory_order_relaxed) == seen) {
            /* Watch for the next job a while, then sleep. */
            pthread_mutex_unlock(&P.lock);
            uint64_t until = vdev_now_ns() + WORKER_WAIT_NS;
            for (unsigned i = 1; atomic_load_explicit(&P.generation, memory_order_relaxed) == seen;
                 i++) {
                cpu_relax();
                if (i % 64 == 0 && vdev_now_ns() > until)
                    break;
            }
            pthread_mutex_lock(&P.lock);
        }
        while (atomic_load_explicit(&P.generation, memory_order_relaxed) == seen)
            pthread_cond_wait(&P.go, &P.lock);
        seen = atomic_load_explicit(&P.generation, memory_order_relaxed);
        if (index >= P.parts)
            continue;
        struct job j = {(uint32_t)seen, P.fn, P.ctx, P.n, P.chunk, P.n_chunks};
        pthread_mutex_unlock(&P.lock);
        int last = run_chunks(&j);
        pthread_mutex_lock(&P.lock);
        if (last)
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
        /* no job runs: the caller holds busy */
        P.start_gen[P.n_workers + 1] = atomic_load_explicit(&P.generation, memory_order_relaxed);
        pthread_mutex_unlock(&P.lock);
        int ok = pthread_create(&t, &attr, worker, (void *)(intptr_t)(P.n_workers + 1)) == 0;
        pthread_attr_destroy(&attr);
        if (!ok)
            return;
        char name[16]; /* for top -H, ps -L and debuggers (workers live as long as the process) */
        snprintf(name, sizeof name, "vdev-pool%u", (unsigned)(P.n_workers + 1) % 10000u);
        (void)pthread_setname_np(t, name);
        pthread_mutex_lock(&P.lock);
        P.n_workers++;
        pthread_mutex_unlock(&P.lock);
    }
}

/* The whole range on the caller: in one call, or (blocks) chunk by chunk,
 * the same calls the pool would make. */
static void run_alone(int64_t n, int64_t chunk, int blocks,
                      void (*fn)(void *, int64_t, int64_t), void *ctx)
{
    if (!blocks) {
        fn(ctx, 0, n);
        return;
    }
    for (int64_t lo = 0; lo < n; lo += chunk)
        fn(ctx, lo, lo + chunk < n ? lo + chunk : n);
}

/* Runs fn over [0, n) in pieces of `chunk` elements on up to `parts` threads
 * (parts >= 2), or on the caller alone (run_alone) when the pool is busy or
 * no worker can be had. */
static void run_job(int64_t n, int parts, int64_t chunk, int blocks,
                    void (*fn)(void *, int64_t, int64_t), void *ctx)
{
    if (pthread_mutex_trylock(&P.busy) != 0) {
        run_alone(n, chunk, blocks, fn, ctx);
        return;
    }
    start_workers(parts - 1);
    if (parts > 1 + P.n_workers)
        parts = 1 + P.n_workers;
    if (parts < 2) {
        pthread_mutex_unlock(&P.busy);
        run_alone(n, chunk, blocks, fn, ctx);
        return;
    }
    struct job j = {0, fn, ctx, n, chunk, (uint32_t)((n + chunk - 1) / chunk)};
    pthread_mutex_lock(&P.lock);
    P.fn = fn;
    P.ctx = ctx;
    P.n = n;
    P.chunk = chunk;
    P.n_chunks = j.n_chunks;
    P.parts = parts;
    uint64_t gen = atomic_load_explicit(&P.generation, memory_order_relaxed) + 1;
    j.gen = (uint32_t)gen;
    atomic_store_explicit(&P.n_done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.claim, (uint64_t)j.gen << 32, memory_order_release);
    atomic_store_explicit(&P.generation, gen, memory_order_release);
    pthread_cond_broadcast(&P.go);
    pthread_mutex_unlock(&P.lock);

    if (!run_chunks(&j)) {
        /* Workers hold the last chunks: poll a while (a chunk is short), then sleep. */
        int spins = 0;
        while (atomic_load_explicit(&P.n_done, memory_order_acquire) < j.n_chunks &&
               spins++ < SPINS)
            cpu_relax();
        pthread_mutex_lock(&P.lock);
        while (atomic_load_explicit(&P.n_done, memory_order_acquire) < j.n_chunks)
            pthread_cond_wait(&P.done, &P.lock);
        pthread_mutex_unlock(&P.lock);
    }
    pthread_mutex_unlock(&P.busy);
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
    if (parts < 2) {
        fn(ctx, 0, n);
        return;
    }
    int64_t want = (int64_t)parts * CHUNKS_PER_THREAD;
    run_job(n, parts, ((n + want - 1) / want + 15) & ~(int64_t)15, 0, fn, ctx);
}

void vdev_parallel_split(int64_t n, int parts, int64_t grain,
                         void (*fn)(void *, int64_t, int64_t), void *ctx)
{
    if (grain < 1)
        grain = 1;
    if (parts > 1 && n / grain < parts)
        parts = (int)(n / grain);
    if (parts < 2) {
        fn(ctx, 0, n);
        return;
    }
    int64_t chunk = (n + parts - 1) / parts;
    run_job(n, parts, (chunk + grain - 1) / grain * grain, 0, fn, ctx);
}

void vdev_parallel_blocks(int64_t n, int64_t block, int parts,
                          void (*fn)(void *, int64_t, int64_t), void *ctx)
{
    if (block < 1)
        block = 1;
    int64_t nb = (n + block - 1) / block;
    if (parts > nb)
        parts = (int)nb;
    if (parts < 2)
        run_alone(n, block, 1, fn, ctx);
    else
        run_job(n, parts, block, 1, fn, ctx);
}

void vdev_parallel_for(int64_t n, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx)
{
    vdev_parallel_for_min(n, VDEV_PARALLEL_MIN, fn, ctx);
}
