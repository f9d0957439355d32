/* test_alloc_stress.c — four threads hammer three allocators at once.
 *
 * Each thread allocates and frees at random on randomly chosen allocators
 * (sizes 1 byte to 4 MiB, log-uniform), now and then frees after an event,
 * looks a block up by address or reads the statistics, and checks that each
 * new block overlaps none of its own live blocks in that allocator. The
 * allocators are GROW allocators whose regions come from per-allocator fake
 * sources, so regions are added (and released) while other threads allocate.
 * At the end every allocator must be back to zero live bytes and pass
 * vdev_alloc_check(). Meant to be run under ThreadSanitizer as well
 * (-fsanitize=thread); the CHECK counters are only touched by the main
 * thread, the workers count their own errors.
 */
#include "alloc/alloc.h"
#include "check.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define N_THREADS 4
#define N_ALLOCS 3
#define MAX_LIVE 48
#ifndef STRESS_OPS
#define STRESS_OPS 200000
#endif

/* A region source per allocator; the allocator calls it under its own lock. */
struct source {
    uint64_t next;
    uint64_t reserved;
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
static atomic_int errors;

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
            struct vdev_block b;
            if (vdev_alloc_malloc(allocs[a], bytes ? bytes : 1, &b) != VDEV_OK) {
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
                if (r % 100 > 97)
                    vdev_alloc_release_cached(allocs[x.a]);
            }
        }
    }
    while (n)
        vdev_alloc_free(allocs[live[n - 1].a], live[n - 1].handle), n--;
    return NULL;
}

int main(void)
{
    for (int i = 0; i < N_ALLOCS; i++) {
        sources[i].next = (uint64_t)(i + 1) << 44;
        struct vdev_alloc_config cfg = {
            .name = "/device:GPU:0",
            .limit_bytes = 1ull << 34,
            .policy = VDEV_POLICY_GROW,
            .source = {.reserve = src_reserve,
                       .release = src_release,
                       .event_done = ev_done,
                       .event_wait = ev_wait,
                       .event_drop = ev_drop,
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
    return check_done();
}
