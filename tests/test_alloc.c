/* test_alloc.c — the device-memory allocator against a reference model.
 *
 * A fake region source hands out addresses (no memory) and records every
 * region, so the test knows what is reserved. The model keeps the live blocks
 * as an address-sorted interval list. The property test makes random
 * allocations (1 byte to 1 GiB, log-uniform) and frees with several seeds,
 * both policies and several limits, and after every step checks: no two live
 * blocks overlap, every block is 256-aligned and inside a reserved region, the
 * statistics add up, vdev_alloc_check() passes, and a failed allocation left
 * the allocator exactly as it was with the exact OOM message. Then targeted
 * tests: region growth, release_cached, stream-ordered frees, fault injection
 * on the Nth reserve, a source that extends in place, lookup, host memory for
 * a 141 GB limit, and argument checks. Never asserts on time.
 */
#include "alloc/alloc.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- a fake region source ------------------------------------------------ */

#define MAX_REGIONS 256

struct fake_region {
    uint64_t base, bytes;
    int live;
};

struct fake_source {
    struct fake_region reg[MAX_REGIONS];
    int n_reg;
    uint64_t next;       /* next base address */
    uint64_t window;     /* address space kept after each base (room for extend) */
    int n_reserve_calls; /* reserve calls so far, failed ones included */
    int fail_call;       /* fail this reserve call (0-based), -1: never */
    uint64_t max_bytes;  /* fail reserves larger than this ("device full"), 0: no cap */
    int n_release, n_extend;
    int no_sync;         /* make() gives the allocator no sync (no garbage collection) */
    int n_sync;          /* sync calls */
    int n_release_at_sync; /* n_release when sync was last called */
};

static void fake_init(struct fake_source *s)
{
    memset(s, 0, sizeof *s);
    s->next = 1ull << 40;
    s->window = 1ull << 20;
    s->fail_call = -1;
}

static uint64_t fake_reserved(const struct fake_source *s)
{
    uint64_t r = 0;
    for (int i = 0; i < s->n_reg; i++)
        if (s->reg[i].live)
            r += s->reg[i].bytes;
    return r;
}

static int fake_live_regions(const struct fake_source *s)
{
    int n = 0;
    for (int i = 0; i < s->n_reg; i++)
        n += s->reg[i].live;
    return n;
}

static enum vdev_status fake_reserve(void *ctx, uint64_t bytes, void **base)
{
    struct fake_source *s = ctx;
    int call = s->n_reserve_calls++;
    if (call == s->fail_call || (s->max_bytes && bytes > s->max_bytes))
        return vdev_error(VDEV_ERR_OOM, "fake device out of memory (reserve call %d)", call);
    if (s->n_reg == MAX_REGIONS)
        return vdev_error(VDEV_ERR_BACKEND, "fake source: too many regions");
    if (bytes % 256)
        return vdev_error(VDEV_ERR_INTERNAL, "fake source: %llu is not a multiple of 256",
                          (unsigned long long)bytes);
    struct fake_region *r = &s->reg[s->n_reg++];
    r->base = s->next;
    r->bytes = bytes;
    r->live = 1;
    /* Leave a gap so regions are never contiguous. */
    s->next += (bytes > s->window ? bytes : s->window) + (1ull << 20);
    *base = (void *)(uintptr_t)r->base;
    return VDEV_OK;
}

static void fake_release(void *ctx, void *base, uint64_t bytes)
{
    struct fake_source *s = ctx;
    s->n_release++;
    for (int i = 0; i < s->n_reg; i++)
        if (s->reg[i].live && s->reg[i].base == (uintptr_t)base) {
            CHECK_EQ_U64(s->reg[i].bytes, bytes);
            s->reg[i].live = 0;
            return;
        }
    CHECK(!"release of an unknown region");
}

static enum vdev_status fake_extend(void *ctx, void *base, uint64_t old_bytes, uint64_t new_bytes)
{
    struct fake_source *s = ctx;
    s->n_extend++;
    for (int i = 0; i < s->n_reg; i++)
        if (s->reg[i].live && s->reg[i].base == (uintptr_t)base) {
            CHECK_EQ_U64(s->reg[i].bytes, old_bytes);
            if (new_bytes > s->window || (s->max_bytes && new_bytes > s->max_bytes))
                return vdev_error(VDEV_ERR_OOM, "fake device cannot extend to %llu",
                                  (unsigned long long)new_bytes);
            s->reg[i].bytes = new_bytes;
            return VDEV_OK;
        }
    return vdev_error(VDEV_ERR_INTERNAL, "extend of an unknown region");
}

static void fake_sync(void *ctx)
{
    struct fake_source *s = ctx;
    s->n_sync++;
    s->n_release_at_sync = s->n_release;
}

/* Fake stream events: done once `done` is set; the allocator drops each once.
 * released_before_wait: regions the source had released when it was waited for. */
struct fake_event {
    int done, waited, dropped, released_before_wait;
};

static int ev_done(void *ctx, void *e) { return ((struct fake_event *)e)->done; }
static void ev_wait(void *ctx, void *e)
{
    ((struct fake_event *)e)->done = 1;
    ((struct fake_event *)e)->waited++;
    ((struct fake_event *)e)->released_before_wait = ((struct fake_source *)ctx)->n_release;
}
static void ev_drop(void *ctx, void *e) { ((struct fake_event *)e)->dropped++; }

/* An allocator named /device:GPU:1 over source s, with or without extend and
 * events; with sync (so garbage collection) unless s->no_sync. */
static vdev_alloc_t *make(struct fake_source *s, enum vdev_memory_policy policy, uint64_t limit,
                          int with_extend, int with_events)
{
    struct vdev_alloc_config cfg = {
        .name = "/device:GPU:1",
        .limit_bytes = limit,
        .policy = policy,
        .source = {.reserve = fake_reserve,
                   .release = fake_release,
                   .extend = with_extend ? fake_extend : NULL,
                   .event_done = with_events ? ev_done : NULL,
                   .event_wait = with_events ? ev_wait : NULL,
                   .event_drop = with_events ? ev_drop : NULL,
                   .sync = s->no_sync ? NULL : fake_sync,
                   .ctx = s},
    };
    vdev_alloc_t *a = NULL;
    CHECK_OK(vdev_alloc_new(&cfg, &a));
    return a;
}

/* ---- the model ------------------------------------------------------------- */

struct mblock {
    uint64_t addr, size; /* size after rounding */
    uint32_t handle;
};

struct model {
    struct mblock *b; /* sorted by address */
    int n, cap;
};

/* Inserts a block in address order (insertion sort: the lists are short). */
static void model_add(struct model *m, struct mblock x)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->b = realloc(m->b, (size_t)m->cap * sizeof *m->b);
        if (!m->b)
            abort();
    }
    int i = m->n;
    while (i > 0 && m->b[i - 1].addr > x.addr) {
        m->b[i] = m->b[i - 1];
        i--;
    }
    m->b[i] = x;
    m->n++;
}

static struct mblock model_take(struct model *m, int i)
{
    struct mblock x = m->b[i];
    memmove(&m->b[i], &m->b[i + 1], (size_t)(m->n - i - 1) * sizeof *m->b);
    m->n--;
    return x;
}

/* xorshift64*: a small deterministic generator per test run. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

/* 1 byte .. 1 GiB, log-uniform. */
static uint64_t rng_size(uint64_t *s)
{
    uint64_t b = (uint64_t)exp(rng_unit(s) * log(1073741824.0));
    return b ? b : 1;
}

/* ---- the checks after every step ------------------------------------------ */

static int inside_region(const struct fake_source *s, uint64_t addr, uint64_t size)
{
    for (int i = 0; i < s->n_reg; i++)
        if (s->reg[i].live && addr >= s->reg[i].base &&
            addr + size <= s->reg[i].base + s->reg[i].bytes)
            return 1;
    return 0;
}

/* Returns the number of failed checks, so a broken run stops early. */
static int check_state(vdev_alloc_t *a, const struct fake_source *s, const struct model *m,
                       uint64_t limit)
{
    int before = check_failed;
    CHECK_OK(vdev_alloc_check(a));
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    uint64_t in_use = 0;
    for (int i = 0; i < m->n; i++) {
        const struct mblock *x = &m->b[i];
        in_use += x->size;
        CHECK(x->addr % 256 == 0 && x->size % 256 == 0);
        CHECK(inside_region(s, x->addr, x->size));
        if (i > 0)
            CHECK(m->b[i - 1].addr + m->b[i - 1].size <= x->addr); /* no overlap */
    }
    CHECK_EQ_U64(st.bytes_in_use, in_use);
    CHECK_EQ_U64(st.n_allocs, m->n);
    CHECK_EQ_U64(st.bytes_reserved, fake_reserved(s));
    CHECK_EQ_U64(st.n_regions, fake_live_regions(s));
    CHECK(st.bytes_reserved <= limit);
    CHECK(st.peak_bytes_in_use >= st.bytes_in_use);
    CHECK(st.peak_bytes_reserved >= st.bytes_reserved);
    CHECK_EQ_U64(st.bytes_free, st.bytes_reserved - st.bytes_in_use - st.bytes_pending);
    CHECK(st.largest_free_block <= st.bytes_free);
    double frag = st.bytes_free ? (double)(st.bytes_free - st.largest_free_block) /
                                      (double)st.bytes_free
                                : 0.0;
    CHECK(fabs(st.fragmentation - frag) < 1e-12);
    CHECK_EQ_U64(st.n_allocs_total - st.n_frees_total, st.n_allocs);
    if (m->n) {
        const struct mblock *x = &m->b[m->n / 2];
        CHECK_EQ_U64(vdev_alloc_block_size(a, x->handle), x->size);
    }
    return check_failed - before;
}

/* The exact OOM message of the header for a request of `bytes` that failed
 * in the state `st` (taken before the call), worked out here from the model's
 * live blocks and the source's regions: exhaustion when in use + the request
 * exceed the limit, else fragmentation, the free blocks being the gaps
 * between live blocks in each region plus, as one more block, the room left
 * under the limit. The property test's sources never fail and have sync, so
 * garbage collection made room whenever it could, and
 * vdev_memory_release_cached() is never among the suggestions. */
static void expected_oom(char *buf, size_t cap, uint64_t bytes, const struct vdev_alloc_stats *st,
                         const struct fake_source *s, const struct model *m)
{
    char b0[32], b1[32], b2[32], b3[32], b4[32], b5[32];
    int n = snprintf(buf, cap,
                     "OOM when allocating %s (%llu bytes) on /device:GPU:1: %s in use of %s limit, "
                     "largest free block %s",
                     vdev_format_bytes(bytes, b0, sizeof b0), (unsigned long long)bytes,
                     vdev_format_bytes(st->bytes_in_use, b1, sizeof b1),
                     vdev_format_bytes(st->bytes_limit, b2, sizeof b2),
                     vdev_format_bytes(st->largest_free_block, b3, sizeof b3));
    uint64_t sz = (bytes + 255) / 256 * 256, room_in_limit = st->bytes_limit - st->bytes_in_use;
    if (sz > room_in_limit) {
        snprintf(buf + n, cap - (size_t)n,
                 "; the limit is short by %s; would help: a larger limit, a smaller batch",
                 vdev_format_bytes(sz - room_in_limit, b4, sizeof b4));
        return;
    }
    uint64_t total = 0, largest = 0, n_blocks = 0;
    for (int r = 0; r < s->n_reg; r++) {
        if (!s->reg[r].live)
            continue;
        uint64_t at = s->reg[r].base, end = at + s->reg[r].bytes;
        for (int i = 0; i <= m->n; i++) {
            uint64_t next = i < m->n ? m->b[i].addr : end;
            if (next < at || next > end)
                continue; /* a block of another region */
            if (next > at) {
                total += next - at;
                largest = next - at > largest ? next - at : largest;
                n_blocks++;
            }
            if (i < m->n)
                at = m->b[i].addr + m->b[i].size;
        }
    }
    uint64_t room = st->bytes_limit - st->bytes_reserved;
    if (room) {
        total += room;
        largest = room > largest ? room : largest;
        n_blocks++;
    }
    snprintf(buf + n, cap - (size_t)n,
             "; fragmentation: free %s in %llu block%s, largest %s; would help: a smaller batch, "
             "a larger limit",
             vdev_format_bytes(total, b4, sizeof b4), (unsigned long long)n_blocks,
             n_blocks == 1 ? "" : "s", vdev_format_bytes(largest, b5, sizeof b5));
}

/* The largest region the source holds now. */
static uint64_t fake_largest_region(const struct fake_source *s)
{
    uint64_t l = 0;
    for (int i = 0; i < s->n_reg; i++)
        if (s->reg[i].live && s->reg[i].bytes > l)
            l = s->reg[i].bytes;
    return l;
}

static int stats_equal_but_failed(const struct vdev_alloc_stats *x,
                                  const struct vdev_alloc_stats *y)
{
    struct vdev_alloc_stats p = *x, q = *y;
    p.n_failed_allocs = q.n_failed_allocs = 0;
    return memcmp(&p, &q, sizeof p) == 0;
}

struct region_list {
    uint64_t base[MAX_REGIONS], bytes[MAX_REGIONS];
    int used[MAX_REGIONS], n;
};

static void collect_region(void *user, void *base, uint64_t bytes, int used)
{
    struct region_list *l = user;
    if (l->n < MAX_REGIONS) {
        l->base[l->n] = (uintptr_t)base;
        l->bytes[l->n] = bytes;
        l->used[l->n] = used;
        l->n++;
    }
}

/* ---- the property test ----------------------------------------------------- */

/* One property run: `steps` random allocations (55%) and frees of random
 * live blocks (now and then a release_cached), the full check after each,
 * then everything freed. A new region is never larger than the request, 2 MiB
 * or twice the largest region held before, whatever was released: growth
 * restarts after a release instead of doubling on from released regions. */
static void property_run(uint64_t seed, enum vdev_memory_policy policy, uint64_t limit, int steps)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, policy, limit, 0, 0);
    if (!a)
        return;
    struct model m = {0};
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    int n_oom = 0;
    for (int step = 0; step < steps; step++) {
        if (m.n == 0 || rng_unit(&rng) < 0.55) {
            uint64_t bytes = rng_size(&rng);
            struct vdev_alloc_stats before, after;
            vdev_alloc_get_stats(a, &before);
            int calls = s.n_reserve_calls, regions = s.n_reg;
            uint64_t held = fake_largest_region(&s);
            struct vdev_block blk;
            enum vdev_status st = vdev_alloc_malloc(a, bytes, &blk);
            if (st == VDEV_OK) {
                uint64_t sz = (bytes + 255) / 256 * 256, bound = 2 * held;
                if (bound < (2u << 20))
                    bound = 2u << 20;
                if (bound < sz)
                    bound = sz;
                for (int r = regions; r < s.n_reg; r++)
                    CHECK(s.reg[r].bytes <= bound);
                model_add(&m, (struct mblock){(uintptr_t)blk.ptr, sz, blk.handle});
            } else {
                /* OOM: nothing changed but the failure count; exact message. */
                n_oom++;
                CHECK_STATUS(st, VDEV_ERR_OOM);
                vdev_alloc_get_stats(a, &after);
                CHECK(stats_equal_but_failed(&before, &after));
                CHECK_EQ_U64(after.n_failed_allocs, before.n_failed_allocs + 1);
                CHECK_EQ_U64(s.n_reg, regions);
                CHECK(s.n_reserve_calls == calls);
                char want[512];
                expected_oom(want, sizeof want, bytes, &before, &s, &m);
                CHECK_STR(vdev_last_error(), want);
            }
        } else {
            int i = (int)(rng_next(&rng) % (uint64_t)m.n);
            struct mblock x = model_take(&m, i);
            vdev_alloc_free(a, x.handle);
            if (rng_unit(&rng) < 0.02)
                vdev_alloc_release_cached(a);
        }
        if (check_state(a, &s, &m, limit)) {
            fprintf(stderr, "  (seed %llu, policy %d, limit %llu, step %d)\n",
                    (unsigned long long)seed, (int)policy, (unsigned long long)limit, step);
            break;
        }
    }
    /* Free everything: every region is one free chunk again. */
    while (m.n)
        vdev_alloc_free(a, model_take(&m, m.n - 1).handle);
    check_state(a, &s, &m, limit);
    struct region_list rl = {.n = 0};
    vdev_alloc_for_each_region(a, collect_region, &rl);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(rl.n, st.n_regions);
    uint64_t largest = 0;
    for (int i = 0; i < rl.n; i++) {
        CHECK(!rl.used[i]);
        largest = rl.bytes[i] > largest ? rl.bytes[i] : largest;
    }
    CHECK_EQ_U64(st.n_chunks, st.n_regions);
    CHECK_EQ_U64(st.largest_free_block, largest);
    CHECK_EQ_U64(st.bytes_free, st.bytes_reserved);
    CHECK_EQ_U64(st.bytes_in_use, 0);
    if (policy == VDEV_POLICY_PREALLOCATE)
        CHECK_EQ_U64(st.bytes_reserved, limit & ~255ull);
    /* Small limits must have seen failures, so the OOM path was exercised. */
    if (limit <= (256ull << 20))
        CHECK(n_oom > 0);
    free(m.b);
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);
}

/* Seeds x policies x limits: a small limit (many OOMs), about 1 GiB (not a
 * multiple of 256) and 16 GiB. */
static void test_property(void)
{
    const uint64_t limits[] = {64ull << 20, (1ull << 30) + 12345, 16ull << 30};
    for (uint64_t seed = 1; seed <= 6; seed++)
        for (int p = 0; p < VDEV_POLICY_COUNT; p++)
            for (size_t l = 0; l < VDEV_ARRAY_LEN(limits); l++)
                property_run(seed, (enum vdev_memory_policy)p, limits[l], 4000);
}

/* ---- targeted tests -------------------------------------------------------- */

/* GROW: nothing up front, 2 MiB first, each region double the last; a big
 * first request gets its own size; the last region is what the limit leaves;
 * a source that refuses large regions gets asked 0.9x smaller. */
static void test_growth(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
    CHECK_EQ_U64(s.n_reg, 0); /* GROW reserves nothing up front */
    struct vdev_block b;
    /* 1 MiB blocks: regions of 2, 4, 8, ... MiB, each double the last. */
    for (int i = 0; i < 60; i++)
        CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &b));
    CHECK(s.n_reg >= 5);
    CHECK_EQ_U64(s.reg[0].bytes, 2ull << 20);
    for (int i = 1; i < s.n_reg; i++)
        CHECK_EQ_U64(s.reg[i].bytes, 2 * s.reg[i - 1].bytes);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);

    /* A first request above 2 MiB gets a region of its own size. */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
    CHECK_OK(vdev_alloc_malloc(a, (5 << 20) + 1, &b));
    CHECK_EQ_U64(s.reg[0].bytes, (5 << 20) + 256);
    vdev_alloc_destroy(a);

    /* Growth stops at the limit: the last region is what is left of it. */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_GROW, 3 << 20, 0, 0);
    CHECK_OK(vdev_alloc_malloc(a, 1000, &b));
    CHECK_EQ_U64(s.reg[0].bytes, 2 << 20);
    CHECK_OK(vdev_alloc_malloc(a, (2 << 20) - 1024, &b)); /* fills the first region */
    CHECK_EQ_U64(s.n_reg, 1);
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &b));
    CHECK_EQ_U64(s.n_reg, 2);
    CHECK_EQ_U64(s.reg[1].bytes, 1 << 20);
    CHECK_STATUS(vdev_alloc_malloc(a, 256, &b), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(), "OOM when allocating 256 B (256 bytes) on /device:GPU:1: 3.00 MiB "
                                 "in use of 3.00 MiB limit, largest free block 0 B; the limit is "
                                 "short by 256 B; would help: a larger limit, a smaller batch");
    vdev_alloc_destroy(a);

    /* A limit below 2 MiB caps the first region. */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_GROW, 1 << 20, 0, 0);
    CHECK_OK(vdev_alloc_malloc(a, 1000, &b));
    CHECK_EQ_U64(s.reg[0].bytes, 1 << 20);
    vdev_alloc_destroy(a);

    /* The source answers OOM above 24 MiB: growth backs off by 0.9x. */
    fake_init(&s);
    s.max_bytes = 24 << 20;
    a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
    for (int i = 0; i < 40; i++)
        CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &b));
    for (int i = 0; i < s.n_reg; i++)
        CHECK(s.reg[i].bytes <= (24u << 20));
    CHECK(s.n_reg >= 5);
    CHECK_STATUS(vdev_alloc_malloc(a, 25 << 20, &b), VDEV_ERR_OOM);
    CHECK_MSG("; fake device out of memory");
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
}

/* release_cached gives back exactly the regions without live blocks, the
 * source sees them released, and the allocator grows again afterwards. */
static void test_release_cached(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
    struct vdev_block b[8];
    for (int i = 0; i < 8; i++)
        CHECK_OK(vdev_alloc_malloc(a, 3 << 20, &b[i]));
    int regions = s.n_reg;
    CHECK(regions >= 3);
    /* Keep one block: its region stays, every other region goes. */
    for (int i = 1; i < 8; i++)
        vdev_alloc_free(a, b[i].handle);
    uint64_t before = fake_reserved(&s);
    uint64_t released = vdev_alloc_release_cached(a);
    CHECK(released > 0);
    CHECK_EQ_U64(fake_reserved(&s), before - released);
    CHECK_EQ_U64(fake_live_regions(&s), 1);
    CHECK(inside_region(&s, (uintptr_t)b[0].ptr, 3 << 20));
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_free(a, b[0].handle);
    CHECK(vdev_alloc_release_cached(a) > 0);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_reserved, 0);
    CHECK_EQ_U64(st.n_regions, 0);
    CHECK_EQ_U64(st.n_chunks, 0);
    CHECK_EQ_U64(fake_reserved(&s), 0);
    /* It still allocates afterwards (and grows again). */
    CHECK_OK(vdev_alloc_malloc(a, 100, &b[0]));
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);

    /* PREALLOCATE keeps its region. */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_PREALLOCATE, 64 << 20, 0, 0);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 0);
    CHECK_EQ_U64(fake_reserved(&s), 64 << 20);
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);
}

/* Releasing restarts the growth schedule: "allocate 1 MiB, free, release"
 * forty times reserves a 2 MiB region every time (it used to double on from
 * the released regions: 2, 4, 8 MiB ... then the whole limit). With a region
 * still held, growth restarts from twice that region. A source that extends
 * in place starts a fresh region at 2 MiB after its region was released. */
static void test_release_resets_growth(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_GROW, 16ull << 30, 0, 0);
    struct vdev_block b, keep;
    for (int i = 0; i < 40; i++) {
        CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &b));
        CHECK_EQ_U64(s.reg[s.n_reg - 1].bytes, 2 << 20);
        vdev_alloc_free(a, b.handle);
        CHECK_EQ_U64(vdev_alloc_release_cached(a), 2 << 20);
    }
    CHECK_EQ_U64(s.n_reg, 40);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.peak_bytes_reserved, 2 << 20);
    /* A 2 MiB region stays held: each new region is twice it, 4 MiB. */
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &keep));
    for (int i = 0; i < 10; i++) {
        CHECK_OK(vdev_alloc_malloc(a, 3 << 20, &b));
        CHECK_EQ_U64(s.reg[s.n_reg - 1].bytes, 4 << 20);
        vdev_alloc_free(a, b.handle);
        CHECK_EQ_U64(vdev_alloc_release_cached(a), 4 << 20);
    }
    vdev_alloc_free(a, keep.handle);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);

    /* Extending in place: the region doubles to 16 MiB, then after its
     * release the next one starts at 2 MiB again. */
    fake_init(&s);
    s.window = 1ull << 30;
    a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 1, 0);
    struct vdev_block blk[16];
    for (int i = 0; i < 16; i++)
        CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &blk[i]));
    CHECK_EQ_U64(s.reg[0].bytes, 16 << 20);
    for (int i = 0; i < 16; i++)
        vdev_alloc_free(a, blk[i].handle);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 16 << 20);
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &b));
    CHECK_EQ_U64(s.n_reg, 2);
    CHECK_EQ_U64(s.reg[1].bytes, 2 << 20);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);
}

/* 32 x 2 MiB on a 64 MiB growing device (regions of 2, 4, 8, 16, 32 and 2
 * MiB), all freed. */
static vdev_alloc_t *fill_64(struct fake_source *s, int with_extend, int with_events,
                             struct vdev_block b[32])
{
    vdev_alloc_t *a = make(s, VDEV_POLICY_GROW, 64 << 20, with_extend, with_events);
    for (int i = 0; i < 32; i++)
        CHECK_OK(vdev_alloc_malloc(a, 2 << 20, &b[i]));
    return a;
}

/* Garbage collection before OOM (TensorFlow's BFC does it too): empty
 * regions go back to the device, after one sync, and the request is retried
 * in one new region; only when that can make room; never a region whose
 * blocks wait for an event (malloc waits for the events first). Without a
 * sync in the source there is no collection, and the message says that
 * vdev_memory_release_cached() would help. */
static void test_garbage_collection(void)
{
    struct fake_source s;
    struct vdev_block b[32], big;
    struct vdev_alloc_stats st, before, after;

    /* The case of the issue: 60 MiB after 32 x 2 MiB were freed. */
    fake_init(&s);
    vdev_alloc_t *a = fill_64(&s, 0, 0, b);
    CHECK_EQ_U64(s.n_reg, 6);
    for (int i = 0; i < 32; i++)
        vdev_alloc_free(a, b[i].handle);
    CHECK_OK(vdev_alloc_malloc(a, 60 << 20, &big));
    CHECK_EQ_U64(s.n_sync, 1);
    CHECK_EQ_U64(s.n_release_at_sync, 0); /* synced before the first release */
    CHECK_EQ_U64(s.n_release, 6);
    CHECK_EQ_U64(s.n_reg, 7);
    CHECK_EQ_U64(s.reg[6].bytes, 60 << 20);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_reserved, 60 << 20);
    CHECK_EQ_U64(st.n_regions, 1);
    CHECK_EQ_U64(st.bytes_in_use, 60 << 20);
    CHECK_EQ_U64(st.n_failed_allocs, 0);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);

    /* The same without a sync: no collection, fragmentation named, and
     * vdev_memory_release_cached() among what would help; after it the
     * request fits. */
    fake_init(&s);
    s.no_sync = 1;
    a = fill_64(&s, 0, 0, b);
    for (int i = 0; i < 32; i++)
        vdev_alloc_free(a, b[i].handle);
    vdev_alloc_get_stats(a, &before);
    CHECK_STATUS(vdev_alloc_malloc(a, 60 << 20, &big), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 60.00 MiB (62914560 bytes) on /device:GPU:1: 0 B in use of "
              "64.00 MiB limit, largest free block 32.00 MiB; fragmentation: free 64.00 MiB in 6 "
              "blocks, largest 32.00 MiB; would help: vdev_memory_release_cached(), a smaller "
              "batch, a larger limit");
    vdev_alloc_get_stats(a, &after);
    CHECK(stats_equal_but_failed(&before, &after));
    CHECK_EQ_U64(s.n_release, 0);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 64 << 20);
    CHECK_OK(vdev_alloc_malloc(a, 60 << 20, &big));
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);

    /* Collection that cannot make room does not run: blocks kept in the 2 and
     * 4 MiB regions leave 58 MiB of empty regions, short of 60 MiB. The state
     * is as before, nothing was synced or released. */
    fake_init(&s);
    a = fill_64(&s, 0, 0, b);
    for (int i = 2; i < 32; i++)
        vdev_alloc_free(a, b[i].handle);
    vdev_alloc_get_stats(a, &before);
    CHECK_STATUS(vdev_alloc_malloc(a, 60 << 20, &big), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 60.00 MiB (62914560 bytes) on /device:GPU:1: 4.00 MiB in use "
              "of 64.00 MiB limit, largest free block 32.00 MiB; fragmentation: free 60.00 MiB in "
              "5 blocks, largest 32.00 MiB; would help: a smaller batch, a larger limit");
    vdev_alloc_get_stats(a, &after);
    CHECK(stats_equal_but_failed(&before, &after));
    CHECK_EQ_U64(s.n_sync, 0);
    CHECK_EQ_U64(s.n_release, 0);
    /* 58 MiB fit: the four empty regions go, the kept blocks stay. */
    CHECK_OK(vdev_alloc_malloc(a, 58 << 20, &big));
    CHECK_EQ_U64(s.n_release, 4);
    CHECK_EQ_U64(fake_live_regions(&s), 3);
    CHECK(inside_region(&s, (uintptr_t)b[0].ptr, 2 << 20));
    CHECK(inside_region(&s, (uintptr_t)b[1].ptr, 2 << 20));
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);

    /* Exhaustion: 2 MiB in use and 63 MiB asked of 64 MiB. */
    fake_init(&s);
    a = fill_64(&s, 0, 0, b);
    for (int i = 1; i < 32; i++)
        vdev_alloc_free(a, b[i].handle);
    CHECK_STATUS(vdev_alloc_malloc(a, 63 << 20, &big), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 63.00 MiB (66060288 bytes) on /device:GPU:1: 2.00 MiB in use "
              "of 64.00 MiB limit, largest free block 32.00 MiB; the limit is short by 1.00 MiB; "
              "would help: a larger limit, a smaller batch");
    CHECK_EQ_U64(s.n_sync, 0);
    CHECK_EQ_U64(s.n_release, 0);
    vdev_alloc_destroy(a);

    /* Blocks freed after events: malloc waits for every event before the
     * collection releases a region (so none is released while its block may
     * still be in use on another stream). */
    fake_init(&s);
    a = fill_64(&s, 0, 1, b);
    struct fake_event ev[32];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < 32; i++)
        vdev_alloc_free_after(a, b[i].handle, &ev[i]);
    CHECK_OK(vdev_alloc_malloc(a, 60 << 20, &big));
    for (int i = 0; i < 32; i++)
        CHECK(ev[i].waited == 1 && ev[i].dropped == 1 && ev[i].released_before_wait == 0);
    CHECK_EQ_U64(s.n_release, 6);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    /* release_cached skips a region whose block still waits for its event. */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_GROW, 64 << 20, 0, 1);
    struct fake_event e1 = {0};
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &big));
    vdev_alloc_free_after(a, big.handle, &e1);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 0);
    CHECK_EQ_U64(fake_live_regions(&s), 1);
    CHECK_EQ_U64(e1.waited, 0);
    vdev_alloc_flush_pending(a);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 2 << 20);
    vdev_alloc_destroy(a);

    /* A source that extends in place (CUDA's one virtual range per device):
     * the region cannot grow past its 8 MiB window, so the empty region is
     * released and a new one reserved for the request. */
    fake_init(&s);
    s.window = 8 << 20;
    a = make(&s, VDEV_POLICY_GROW, 64 << 20, 1, 0);
    for (int i = 0; i < 8; i++)
        CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &b[i]));
    CHECK_EQ_U64(s.n_reg, 1);
    CHECK_EQ_U64(s.reg[0].bytes, 8 << 20);
    for (int i = 0; i < 8; i++)
        vdev_alloc_free(a, b[i].handle);
    CHECK_OK(vdev_alloc_malloc(a, 20 << 20, &big));
    CHECK_EQ_U64(s.n_sync, 1);
    CHECK_EQ_U64(s.n_release, 1);
    CHECK_EQ_U64(fake_live_regions(&s), 1);
    CHECK_EQ_U64(s.reg[1].bytes, 20 << 20);
    vdev_alloc_free(a, big.handle);
    /* It grows in place again afterwards (within its new window). */
    s.window = 64 << 20;
    CHECK_OK(vdev_alloc_malloc(a, 30 << 20, &big));
    CHECK_EQ_U64(fake_live_regions(&s), 1);
    CHECK(s.n_extend > 0);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);
}

/* The three kinds of OOM, each with only the suggestions that apply:
 * fragmentation in a preallocated region, the device itself full (the
 * source's message kept), and a size that cannot even be rounded. */
static void test_oom_messages(void)
{
    struct fake_source s;
    struct vdev_block x, y, z;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_PREALLOCATE, 4 << 20, 0, 0);
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &x));
    CHECK_OK(vdev_alloc_malloc(a, 2 << 20, &y));
    vdev_alloc_free(a, x.handle);
    CHECK_STATUS(vdev_alloc_malloc(a, 3 << 19, &z), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 1.50 MiB (1572864 bytes) on /device:GPU:1: 2.00 MiB in use of "
              "4.00 MiB limit, largest free block 1.00 MiB; fragmentation: free 2.00 MiB in 2 "
              "blocks, largest 1.00 MiB; would help: a smaller batch, a larger limit");
    CHECK_STATUS(vdev_alloc_malloc(a, 3 << 20, &z), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 3.00 MiB (3145728 bytes) on /device:GPU:1: 2.00 MiB in use of "
              "4.00 MiB limit, largest free block 1.00 MiB; the limit is short by 1.00 MiB; would "
              "help: a larger limit, a smaller batch");
    vdev_alloc_destroy(a);

    /* The device is full below the limit: not this device's limit nor its
     * fragmentation, so the help is memory held by others on the card. */
    fake_init(&s);
    s.max_bytes = 8 << 20;
    a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
    CHECK_STATUS(vdev_alloc_malloc(a, 16 << 20, &z), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 16.00 MiB (16777216 bytes) on /device:GPU:1: 0 B in use of "
              "1.00 GiB limit, largest free block 0 B; fake device out of memory (reserve call "
              "0); would help: vdev_memory_release_cached() or memory growth on for the other "
              "users of the physical device, a smaller batch");
    CHECK_EQ_U64(s.n_sync, 0);
    vdev_alloc_destroy(a);

    /* Beyond rounding: exhaustion, short by all but the room under the limit. */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_GROW, 1 << 20, 0, 0);
    CHECK_STATUS(vdev_alloc_malloc(a, UINT64_MAX, &z), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 16.00 EiB (18446744073709551615 bytes) on /device:GPU:1: 0 B in "
              "use of 1.00 MiB limit, largest free block 0 B; the limit is short by 16.00 EiB; "
              "would help: a larger limit, a smaller batch");
    vdev_alloc_destroy(a);
}

/* largest_alloc_size: the largest block (after rounding) handed out since
 * creation or the last reset_peak, which sets it to 0 as TensorFlow's
 * ClearStats does; failed allocations do not count. */
static void test_largest_alloc(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_GROW, 64 << 20, 0, 0);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.largest_alloc_size, 0);
    struct vdev_block x, y, z;
    CHECK_OK(vdev_alloc_malloc(a, 1000, &x));
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.largest_alloc_size, 1024);
    CHECK_OK(vdev_alloc_malloc(a, (3 << 20) + 1, &y)); /* through growth (the slow path) */
    CHECK_OK(vdev_alloc_malloc(a, 5000, &z));           /* the fast path */
    vdev_alloc_free(a, y.handle);
    vdev_alloc_free(a, z.handle);
    CHECK_STATUS(vdev_alloc_malloc(a, 100 << 20, &z), VDEV_ERR_OOM);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.largest_alloc_size, (3 << 20) + 256);
    vdev_alloc_reset_peak(a);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.largest_alloc_size, 0);
    CHECK_EQ_U64(st.peak_bytes_in_use, 1024);
    CHECK_OK(vdev_alloc_malloc(a, 1, &z));
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.largest_alloc_size, 256);
    vdev_alloc_destroy(a);
}

/* Whether two blocks share a byte. */
static int overlaps(struct vdev_block x, uint64_t xs, struct vdev_block y, uint64_t ys)
{
    uint64_t a = (uintptr_t)x.ptr, b = (uintptr_t)y.ptr;
    return a < b + ys && b < a + xs;
}

/* Stream-ordered frees: a pending block is not reused until its event has
 * passed; malloc polls, waits before failing, and drops each event once;
 * flush_pending and destroy handle what is left. */
static void test_free_after(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_PREALLOCATE, 4 << 20, 0, 1);
    struct fake_event e1 = {0}, e2 = {0};
    struct vdev_block x, y, z;
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &x));
    vdev_alloc_free_after(a, x.handle, &e1);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_pending, 1 << 20);
    CHECK_EQ_U64(st.bytes_in_use, 0);
    CHECK_EQ_U64(st.n_allocs, 0);
    CHECK_EQ_U64(st.bytes_free, 3 << 20);
    CHECK_OK(vdev_alloc_check(a));
    /* Not passed yet: the block is not reused. */
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &y));
    CHECK(!overlaps(x, 1 << 20, y, 1 << 20));
    CHECK_EQ_U64(e1.dropped, 0);
    /* Passed: the next malloc frees it first, and it is reused. */
    e1.done = 1;
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &z));
    CHECK_EQ_U64(e1.dropped, 1);
    CHECK_EQ_U64(e1.waited, 0);
    CHECK(z.ptr == x.ptr); /* lowest address first */
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_pending, 0);
    CHECK_OK(vdev_alloc_check(a));
    /* Full device: a malloc that would fail waits for the pending event. */
    struct vdev_block w;
    CHECK_OK(vdev_alloc_malloc(a, 2 << 20, &w));
    vdev_alloc_free_after(a, w.handle, &e2);
    CHECK_OK(vdev_alloc_malloc(a, 2 << 20, &w));
    CHECK_EQ_U64(e2.waited, 1);
    CHECK_EQ_U64(e2.dropped, 1);
    /* flush_pending waits for everything. */
    struct fake_event e3 = {0}, e4 = {0};
    vdev_alloc_free_after(a, y.handle, &e3);
    vdev_alloc_free_after(a, z.handle, &e4);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_pending, 2 << 20);
    vdev_alloc_flush_pending(a);
    CHECK(e3.waited == 1 && e4.waited == 1 && e3.dropped == 1 && e4.dropped == 1);
    vdev_alloc_free(a, w.handle);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_pending, 0);
    CHECK_EQ_U64(st.bytes_in_use, 0);
    CHECK_EQ_U64(st.largest_free_block, 4 << 20);
    CHECK_OK(vdev_alloc_check(a));
    /* Destroy drops events still pending. */
    struct fake_event e5 = {0};
    CHECK_OK(vdev_alloc_malloc(a, 256, &x));
    vdev_alloc_free_after(a, x.handle, &e5);
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(e5.dropped, 1);

    /* A source without events: free_after frees at once (and drops nothing). */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_PREALLOCATE, 1 << 20, 0, 0);
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &x));
    vdev_alloc_free_after(a, x.handle, &e1);
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &x));
    vdev_alloc_destroy(a);
}

/* Fails the Nth reserve, N = 0, 1, ... until the whole script succeeds; each
 * failure must leave the status, the message and the statistics right. */
static void test_fault_injection(void)
{
    static const uint64_t script[] = {1000, 3 << 20, 100, 9 << 20, 1 << 20, 40 << 20, 5000};
    int completed = 0;
    for (int n = 0; n < 40 && !completed; n++) {
        struct fake_source s;
        fake_init(&s);
        s.fail_call = n;
        vdev_alloc_t *a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
        struct vdev_block b[VDEV_ARRAY_LEN(script)];
        size_t done = 0;
        int failed = 0;
        for (size_t i = 0; i < VDEV_ARRAY_LEN(script); i++) {
            struct vdev_alloc_stats before, after;
            vdev_alloc_get_stats(a, &before);
            enum vdev_status st = vdev_alloc_malloc(a, script[i], &b[done]);
            if (st == VDEV_OK) {
                done++;
                continue;
            }
            failed++;
            CHECK_STATUS(st, VDEV_ERR_OOM);
            CHECK_MSG("OOM when allocating ");
            CHECK_MSG("on /device:GPU:1: ");
            CHECK_MSG("fake device out of memory");
            vdev_alloc_get_stats(a, &after);
            CHECK(stats_equal_but_failed(&before, &after));
        }
        CHECK_OK(vdev_alloc_check(a));
        for (size_t i = 0; i < done; i++)
            vdev_alloc_free(a, b[i].handle);
        vdev_alloc_release_cached(a);
        struct vdev_alloc_stats st;
        vdev_alloc_get_stats(a, &st);
        CHECK_EQ_U64(st.bytes_in_use, 0);
        CHECK_EQ_U64(st.n_allocs, 0);
        CHECK_EQ_U64(st.bytes_reserved, 0);
        CHECK_EQ_U64(st.n_failed_allocs, failed);
        vdev_alloc_destroy(a);
        CHECK_EQ_U64(fake_reserved(&s), 0);
        completed = failed == 0;
    }
    CHECK(completed);

    /* PREALLOCATE: the only reserve fails, so does vdev_alloc_new. */
    struct fake_source s;
    fake_init(&s);
    s.fail_call = 0;
    struct vdev_alloc_config cfg = {
        .name = "/device:GPU:1",
        .limit_bytes = 1 << 30,
        .policy = VDEV_POLICY_PREALLOCATE,
        .source = {.reserve = fake_reserve, .release = fake_release, .ctx = &s},
    };
    vdev_alloc_t *a = (vdev_alloc_t *)&s;
    CHECK_STATUS(vdev_alloc_new(&cfg, &a), VDEV_ERR_OOM);
    CHECK(a == NULL);
    CHECK_MSG("preallocating 1.00 GiB on /device:GPU:1: fake device out of memory");
    CHECK_EQ_U64(fake_reserved(&s), 0);
}

/* A source that extends in place: one region throughout, random traffic
 * checked as in the property test, the free tail merging with the growth. */
static void test_extend(void)
{
    struct fake_source s;
    fake_init(&s);
    s.window = 1ull << 30; /* room to extend the region up to 1 GiB */
    vdev_alloc_t *a = make(&s, VDEV_POLICY_GROW, 512 << 20, 1, 0);
    struct model m = {0};
    uint64_t rng = 77;
    for (int step = 0; step < 3000; step++) {
        if (m.n == 0 || rng_unit(&rng) < 0.55) {
            uint64_t bytes = (rng_size(&rng) >> 6) + 1; /* up to 16 MiB */
            struct vdev_block b;
            if (vdev_alloc_malloc(a, bytes, &b) == VDEV_OK)
                model_add(&m, (struct mblock){(uintptr_t)b.ptr, (bytes + 255) / 256 * 256,
                                              b.handle});
        } else {
            vdev_alloc_free(a, model_take(&m, (int)(rng_next(&rng) % (uint64_t)m.n)).handle);
        }
        if (check_state(a, &s, &m, 512 << 20))
            break;
    }
    CHECK_EQ_U64(s.n_reg, 1); /* one region, grown in place */
    CHECK(s.n_extend > 0);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.n_regions, 1);
    while (m.n)
        vdev_alloc_free(a, model_take(&m, 0).handle);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.n_chunks, 1);
    CHECK_EQ_U64(st.largest_free_block, st.bytes_reserved);
    /* A free tail merges with the extension: a block as large as the tail
     * plus the rest of the limit fits in one region. */
    struct vdev_block b;
    CHECK_OK(vdev_alloc_malloc(a, (512 << 20) - 256, &b));
    CHECK_EQ_U64(s.n_reg, 1);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_free(a, b.handle);
    /* Releasing the region, then growing again, starts a new one. */
    CHECK(vdev_alloc_release_cached(a) > 0);
    CHECK_OK(vdev_alloc_malloc(a, 1000, &b));
    CHECK_EQ_U64(fake_live_regions(&s), 1);
    CHECK_OK(vdev_alloc_check(a));
    free(m.b);
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);
}

/* Lookup by address: found for every live block, not for an inner pointer
 * or a freed block, and still right after the table was built and then kept
 * up to date by malloc and free. */
static void test_lookup(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
    struct vdev_block b[300];
    for (int i = 0; i < 300; i++)
        CHECK_OK(vdev_alloc_malloc(a, (uint64_t)(i % 17 + 1) * 1000, &b[i]));
    uint32_t h = 0;
    for (int i = 0; i < 300; i += 7) {
        CHECK_OK(vdev_alloc_lookup(a, b[i].ptr, &h));
        CHECK_EQ_U64(h, b[i].handle);
    }
    CHECK_STATUS(vdev_alloc_lookup(a, (char *)b[5].ptr + 256, &h), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("no live block starts at");
    /* The table is kept up to date from here on. */
    for (int i = 0; i < 300; i += 2)
        vdev_alloc_free(a, b[i].handle);
    CHECK_OK(vdev_alloc_check(a));
    for (int i = 0; i < 300; i += 2)
        CHECK_OK(vdev_alloc_malloc(a, 512, &b[i]));
    for (int i = 0; i < 300; i++) {
        CHECK_OK(vdev_alloc_lookup(a, b[i].ptr, &h));
        CHECK_EQ_U64(h, b[i].handle);
    }
    vdev_alloc_free(a, b[1].handle);
    CHECK_STATUS(vdev_alloc_lookup(a, b[1].ptr, &h), VDEV_ERR_INVALID_ARG);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
}

static void test_host_memory(void)
{
    /* 141 GB preallocated: bookkeeping costs kilobytes, not O(bytes). */
    struct fake_source s;
    fake_init(&s);
    const uint64_t limit = 141000000000ull;
    vdev_alloc_t *a = make(&s, VDEV_POLICY_PREALLOCATE, limit, 0, 0);
    uint64_t host = vdev_alloc_host_bytes(a);
    CHECK(host < 16 * 1024);
    struct vdev_block b[1000];
    for (int i = 0; i < 1000; i++)
        CHECK_OK(vdev_alloc_malloc(a, 100ull << 20, &b[i]));
    /* About 1000 chunks: the records grow with the chunks (32 bytes each). */
    uint64_t host2 = vdev_alloc_host_bytes(a);
    CHECK(host2 < 16 * 1024 + 2048 * 40);
    for (int i = 0; i < 1000; i++)
        vdev_alloc_free(a, b[i].handle);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.n_chunks, 1);
    CHECK_EQ_U64(st.bytes_reserved, limit & ~255ull);
    printf("host bookkeeping for a 141 GB limit: %llu bytes empty, %llu after 1000 blocks\n",
           (unsigned long long)host, (unsigned long long)host2);
    vdev_alloc_destroy(a);
}

/* Misuse returns VDEV_ERR_INVALID_ARG; sizes beyond the limit (or beyond
 * rounding) fail with the exact OOM message; reset_peak. */
static void test_arguments(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = NULL;
    CHECK_STATUS(vdev_alloc_new(NULL, &a), VDEV_ERR_INVALID_ARG);
    struct vdev_alloc_config cfg = {.name = "/device:GPU:1",
                                    .limit_bytes = 255,
                                    .source = {.reserve = fake_reserve,
                                               .release = fake_release,
                                               .ctx = &s}};
    CHECK_STATUS(vdev_alloc_new(&cfg, &a), VDEV_ERR_INVALID_ARG);
    cfg.limit_bytes = 1 << 20;
    cfg.policy = VDEV_POLICY_COUNT;
    CHECK_STATUS(vdev_alloc_new(&cfg, &a), VDEV_ERR_INVALID_ARG);
    cfg.policy = VDEV_POLICY_GROW;
    cfg.source.release = NULL;
    CHECK_STATUS(vdev_alloc_new(&cfg, &a), VDEV_ERR_INVALID_ARG);
    vdev_alloc_destroy(NULL);
    a = make(&s, VDEV_POLICY_GROW, 1 << 20, 0, 0);
    struct vdev_block b;
    CHECK_STATUS(vdev_alloc_malloc(a, 0, &b), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_alloc_malloc(a, 1, NULL), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_alloc_malloc(NULL, 1, &b), VDEV_ERR_INVALID_ARG);
    /* Sizes that cannot even be rounded fail as OOM, with the message. */
    CHECK_STATUS(vdev_alloc_malloc(a, UINT64_MAX, &b), VDEV_ERR_OOM);
    CHECK_MSG("OOM when allocating 16.00 EiB (18446744073709551615 bytes)");
    CHECK_STATUS(vdev_alloc_malloc(a, 4ull << 30, &b), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(), "OOM when allocating 4.00 GiB (4294967296 bytes) on "
                                 "/device:GPU:1: 0 B in use of 1.00 MiB limit, largest free "
                                 "block 0 B; the limit is short by 4.00 GiB; would help: a larger "
                                 "limit, a smaller batch");
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.n_failed_allocs, 2);
    CHECK_EQ_U64(st.bytes_reserved, 0);
    /* reset_peak */
    CHECK_OK(vdev_alloc_malloc(a, 1000, &b));
    vdev_alloc_free(a, b.handle);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.peak_bytes_in_use, 1024);
    vdev_alloc_reset_peak(a);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.peak_bytes_in_use, 0);
    CHECK_EQ_U64(st.peak_bytes_reserved, st.bytes_reserved);
    vdev_alloc_destroy(a);
}

int main(void)
{
    test_arguments();
    test_growth();
    test_release_cached();
    test_release_resets_growth();
    test_garbage_collection();
    test_oom_messages();
    test_largest_alloc();
    test_free_after();
    test_fault_injection();
    test_extend();
    test_lookup();
    test_host_memory();
    test_property();
    return check_done();
}
