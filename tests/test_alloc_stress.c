/* test_alloc_stress.c — four threads hammer three allocators at once.
 *
 * Each thread allocates and frees at random on randomly chosen allocators
 * (sizes 1 byte to 4 MiB, log-uniform), now and then frees after an event,
 * looks a block up by address or reads the statistics, and checks that each
 * new block overlaps none of its own live blocks in that allocator. The
 * allocators are GROW allocators whose regions come from per-allocator fake
 * sources, so regions are added (and released) while other threads allocate.
 * The last allocator has a 24 MiB limit and now and then gets a request of
 * 6 to 16 MiB, so it runs out: a thread that gets OOM there frees its blocks
 * there and retries, and garbage collection releases empty regions (after a
 * sync, counted) while other threads allocate; its only failures must be OOM
 * with the standard message. At the end every allocator must be back to zero live bytes and pass
 * vdev_alloc_check(). Then the long bins: the four threads fill one allocator with blocks
 * of one octave and free every other one, so that bin holds thousands of holes and is
 * kept in a tree (alloc_tree.c), and go on allocating and freeing there at once, with
 * every unit of the region marked by the thread that holds it, so a block given to two
 * threads is seen. Meant to be run under ThreadSanitizer as well
 * (-fsanitize=thread); the CHECK counters are only touched by the main
 * thread, the workers count their own errors.
 */
#include "alloc/alloc.h"
#include "alloc/alloc_impl.h" /* tmap: whether a bin has its tree */
#include "check.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N_THREADS 4
#define N_ALLOCS 4 /* the last one small: OOM and garbage collection */
#define SMALL_LIMIT (24u << 20)
#define MAX_LIVE 48
#ifndef STRESS_OPS
#define STRESS_OPS 200000
#endif

/* A region source per allocator; the allocator calls it under its own lock. */
struct source {
    uint64_t next;
    uint64_t reserved;
    uint64_t n_sync, n_release; /* touched under the allocator's lock only */
};

static enum vdev_status src_reserve(void *ctx, uint64_t bytes, void **base)
{
    struct source *s = ctx;
    *base = (void *)(uintptr_t)s->next;
    s->next += bytes + (1u << 20);
    s->reserved += bytes;
    return VDEV_OK;
}

static void src_release(void *ctx, void *base, uint64_t bytes)
{
    struct source *s = ctx;
    s->reserved -= bytes;
    s->n_release++;
}

/* vdev_alloc_release_cached() waits for the device too (with the lock held,
 * on the calling thread): those waits are not collections and are not counted. */
static _Thread_local int releasing_cached;
static void src_sync(void *ctx)
{
    if (!releasing_cached)
        ((struct source *)ctx)->n_sync++;
}

/* Events are counters that pass after a few polls; thread-safe because only
 * the allocator that owns them (under its lock) touches them. */
struct event {
    int polls_left;
};

static int ev_done(void *ctx, void *e) { return --((struct event *)e)->polls_left <= 0; }
static void ev_wait(void *ctx, void *e) { ((struct event *)e)->polls_left = 0; }
static void ev_drop(void *ctx, void *e) { free(e); }

static vdev_alloc_t *allocs[N_ALLOCS];
static struct source sources[N_ALLOCS];
static atomic_int errors, n_oom;

struct live {
    int a;
    uint32_t handle;
    uint64_t addr, size;
};

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void fail(const char *what)
{
    fprintf(stderr, "stress: %s\n", what);
    atomic_fetch_add(&errors, 1);
}

static void *worker(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 7;
    struct live live[MAX_LIVE];
    int n = 0;
    for (int op = 0; op < STRESS_OPS; op++) {
        uint64_t r = rng_next(&rng);
        if (n < MAX_LIVE && (n == 0 || r % 100 < 52)) {
            int a = (int)(rng_next(&rng) % N_ALLOCS);
            double u = (double)(rng_next(&rng) >> 11) / 9007199254740992.0;
            uint64_t bytes = (uint64_t)exp(u * log(4194304.0));
            if (a == N_ALLOCS - 1 && r % 8 == 0) /* now and then larger than most regions */
                bytes = (6u << 20) + rng_next(&rng) % (10u << 20);
            struct vdev_block b;
            enum vdev_status st = vdev_alloc_malloc(allocs[a], bytes ? bytes : 1, &b);
            if (st == VDEV_ERR_OOM && a == N_ALLOCS - 1 &&
                !strncmp(vdev_last_error(), "OOM when allocating ", 20) &&
                (strstr(vdev_last_error(), "; the limit is short by ") ||
                 strstr(vdev_last_error(), "; fragmentation: free "))) {
                /* Out of the small allocator: end this thread's phase there
                 * (free its blocks, leaving empty regions behind) and retry,
                 * which may collect them while other threads allocate. */
                atomic_fetch_add(&n_oom, 1);
                for (int i = 0; i < n;)
                    if (live[i].a == a) {
                        vdev_alloc_free(allocs[a], live[i].handle);
                        live[i] = live[--n];
                    } else {
                        i++;
                    }
                st = vdev_alloc_malloc(allocs[a], bytes ? bytes : 1, &b);
                if (st == VDEV_ERR_OOM && !strncmp(vdev_last_error(), "OOM when allocating ", 20))
                    continue;
            }
            if (st != VDEV_OK) {
                fail(vdev_last_error());
                continue;
            }
            uint64_t addr = (uintptr_t)b.ptr, size = vdev_alloc_block_size(allocs[a], b.handle);
            if (addr % 256 || size < bytes)
                fail("misaligned or short block");
            for (int i = 0; i < n; i++)
                if (live[i].a == a && addr < live[i].addr + live[i].size &&
                    live[i].addr < addr + size)
                    fail("two live blocks overlap");
            live[n++] = (struct live){a, b.handle, addr, size};
        } else {
            int i = (int)(rng_next(&rng) % (uint64_t)n);
            struct live x = live[i];
            live[i] = live[--n];
            if (r % 100 < 60) {
                vdev_alloc_free(allocs[x.a], x.handle);
            } else if (r % 100 < 70) {
                struct event *e = malloc(sizeof *e);
                if (!e) {
                    vdev_alloc_free(allocs[x.a], x.handle);
                    continue;
                }
                e->polls_left = (int)(rng_next(&rng) % 4);
                vdev_alloc_free_after(allocs[x.a], x.handle, e);
            } else if (r % 100 < 85) {
                uint32_t h;
                if (vdev_alloc_lookup(allocs[x.a], (void *)(uintptr_t)x.addr, &h) != VDEV_OK ||
                    h != x.handle)
                    fail("lookup did not find a live block");
                vdev_alloc_free(allocs[x.a], x.handle);
            } else {
                struct vdev_alloc_stats st;
                vdev_alloc_get_stats(allocs[x.a], &st);
                if (st.bytes_in_use > st.bytes_reserved)
                    fail("in use above reserved");
                vdev_alloc_free(allocs[x.a], x.handle);
                if (r % 100 > 97) {
                    releasing_cached = 1;
                    vdev_alloc_release_cached(allocs[x.a]);
                    releasing_cached = 0;
                }
            }
        }
    }
    while (n)
        vdev_alloc_free(allocs[live[n - 1].a], live[n - 1].handle), n--;
    return NULL;
}

/* ---- long bins, from four threads ---- */

#define LB_LIMIT (64u << 20)
#define LB_UNITS (LB_LIMIT / 256)
#define LB_LIVE 1200

static vdev_alloc_t *lb;
static uint64_t lb_base;
static atomic_uchar lb_owner[LB_UNITS]; /* 0 free, else the holding thread's number */

struct lb_thread {
    int id, phase;
    uint64_t rng;
    struct live live[LB_LIVE];
    int n;
};

static void lb_take(struct lb_thread *t, uint64_t bytes)
{
    struct vdev_block b;
    if (vdev_alloc_malloc(lb, bytes, &b) != VDEV_OK) {
        fail(vdev_last_error());
        return;
    }
    uint64_t addr = (uintptr_t)b.ptr, size = vdev_alloc_block_size(lb, b.handle);
    if (addr < lb_base || addr + size > lb_base + LB_LIMIT || addr % 256 || size < bytes) {
        fail("a long-bins block outside the region, misaligned or short");
        return;
    }
    for (uint64_t u = (addr - lb_base) / 256; u < (addr - lb_base + size) / 256; u++) {
        unsigned char none = 0;
        if (!atomic_compare_exchange_strong(&lb_owner[u], &none, (unsigned char)t->id)) {
            fail("a block given to two threads at once");
            break;
        }
    }
    t->live[t->n++] = (struct live){0, b.handle, addr, size};
}

static void lb_give(struct lb_thread *t, int i)
{
    struct live x = t->live[i];
    t->live[i] = t->live[--t->n];
    for (uint64_t u = (x.addr - lb_base) / 256; u < (x.addr - lb_base + x.size) / 256; u++)
        atomic_store(&lb_owner[u], 0);
    vdev_alloc_free(lb, x.handle);
}

/* Phase 0: 1,000 blocks of 1-1.75 KiB, every other one freed, and 200 more of
 * that octave (which a long scan then a tree serves). Phase 1: 20,000 random
 * mallocs and frees, most in that octave; then everything freed. */
static void *lb_worker(void *arg)
{
    struct lb_thread *t = arg;
    if (t->phase == 0) {
        for (int i = 0; i < 1000; i++)
            lb_take(t, (4 + rng_next(&t->rng) % 4) * 256);
        for (int i = t->n - 1; i >= 0; i -= 2)
            lb_give(t, i);
        for (int i = 0; i < 200; i++)
            lb_take(t, (4 + rng_next(&t->rng) % 4) * 256 - rng_next(&t->rng) % 256);
        return NULL;
    }
    for (int op = 0; op < 20000; op++) {
        uint64_t r = rng_next(&t->rng);
        if (t->n < LB_LIVE && (t->n == 0 || r % 100 < 50)) {
            uint64_t units = r % 10 < 7 ? 4 + rng_next(&t->rng) % 4 : 1 + rng_next(&t->rng) % 24;
            lb_take(t, units * 256 - rng_next(&t->rng) % 256);
        } else {
            lb_give(t, (int)(rng_next(&t->rng) % (uint64_t)t->n));
        }
    }
    while (t->n)
        lb_give(t, t->n - 1);
    return NULL;
}

static void long_bins(void)
{
    static struct source src = {.next = 7ull << 44};
    struct vdev_alloc_config cfg = {
        .name = "/device:GPU:0",
        .limit_bytes = LB_LIMIT,
        .policy = VDEV_POLICY_PREALLOCATE,
        .source = {.reserve = src_reserve, .release = src_release, .sync = src_sync, .ctx = &src},
    };
    CHECK_OK(vdev_alloc_new(&cfg, &lb));
    if (!lb)
        return;
    lb_base = 7ull << 44;
    static struct lb_thread ts[N_THREADS];
    pthread_t th[N_THREADS];
    int trees = 0;
    for (int phase = 0; phase < 2; phase++) {
        for (int t = 0; t < N_THREADS; t++) {
            ts[t].id = t + 1;
            ts[t].phase = phase;
            if (phase == 0)
                ts[t].rng = (uint64_t)(t + 1) * 0x2545F4914F6CDD1Dull;
            CHECK(pthread_create(&th[t], NULL, lb_worker, &ts[t]) == 0);
        }
        for (int t = 0; t < N_THREADS; t++)
            CHECK(pthread_join(th[t], NULL) == 0);
        if (phase == 0)
            trees = (int)((lb->tmap >> 2) & 1); /* the threads have ended: no lock needed */
        CHECK_OK(vdev_alloc_check(lb));
    }
    CHECK(trees); /* the octave's bin was kept in a tree while the threads shared it */
    CHECK_EQ_U64(atomic_load(&errors), 0);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(lb, &st);
    CHECK_EQ_U64(st.bytes_in_use, 0);
    CHECK_EQ_U64(st.n_chunks, 1);
    printf("long bins: the octave's tree %s after the holes; %llu allocations in all\n",
           trees ? "made" : "not made", (unsigned long long)st.n_allocs_total);
    vdev_alloc_destroy(lb);
}

int main(void)
{
    for (int i = 0; i < N_ALLOCS; i++) {
        sources[i].next = (uint64_t)(i + 1) << 44;
        struct vdev_alloc_config cfg = {
            .name = "/device:GPU:0",
            .limit_bytes = i == N_ALLOCS - 1 ? SMALL_LIMIT : 1ull << 34,
            .policy = VDEV_POLICY_GROW,
            .source = {.reserve = src_reserve,
                       .release = src_release,
                       .event_done = ev_done,
                       .event_wait = ev_wait,
                       .event_drop = ev_drop,
                       .sync = src_sync,
                       .ctx = &sources[i]},
        };
        CHECK_OK(vdev_alloc_new(&cfg, &allocs[i]));
    }
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)(t + 1)) == 0);
    for (int t = 0; t < N_THREADS; t++)
        CHECK(pthread_join(th[t], NULL) == 0);
    CHECK_EQ_U64(atomic_load(&errors), 0);
    /* The small allocator ran out, and collected (the others never did). */
    printf("small allocator: %d OOM, %llu collections, %llu regions released\n",
           atomic_load(&n_oom), (unsigned long long)sources[N_ALLOCS - 1].n_sync,
           (unsigned long long)sources[N_ALLOCS - 1].n_release);
    CHECK(atomic_load(&n_oom) > 0);
    CHECK(sources[N_ALLOCS - 1].n_sync > 0);
    for (int i = 0; i < N_ALLOCS - 1; i++)
        CHECK_EQ_U64(sources[i].n_sync, 0);
    for (int i = 0; i < N_ALLOCS; i++) {
        vdev_alloc_flush_pending(allocs[i]);
        CHECK_OK(vdev_alloc_check(allocs[i]));
        struct vdev_alloc_stats st;
        vdev_alloc_get_stats(allocs[i], &st);
        CHECK_EQ_U64(st.bytes_in_use, 0);
        CHECK_EQ_U64(st.n_allocs, 0);
        CHECK_EQ_U64(st.bytes_pending, 0);
        CHECK_EQ_U64(st.n_chunks, st.n_regions);
        CHECK_EQ_U64(st.bytes_reserved, sources[i].reserved);
        CHECK(st.n_allocs_total > 1000);
        vdev_alloc_release_cached(allocs[i]);
        CHECK_EQ_U64(sources[i].reserved, 0);
        vdev_alloc_destroy(allocs[i]);
    }
    long_bins();
    return check_done();
}
