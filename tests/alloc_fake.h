/* alloc_fake.h — what the allocator tests share: a fake region source, fake
 * stream events, a reference model of the live blocks, and the checks made
 * after every step.
 *
 * The fake source hands out addresses (no memory), with a gap after each
 * region so no two are contiguous, records every region, can fail the Nth
 * reserve or any reserve above a size ("device full"), can extend a region
 * in place within a window (CUDA's one virtual range), and counts syncs and
 * releases. The model keeps the live blocks as an address-sorted interval
 * list, from which the tests work out statistics and the exact OOM message
 * independently of the allocator, and where the placement policy puts a block
 * in one region (ref_place). Everything is static inline, so each test file
 * uses what it needs.
 */
#ifndef VDEV_TEST_ALLOC_FAKE_H
#define VDEV_TEST_ALLOC_FAKE_H

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
    int host_fails;      /* the failures above are the host's (vdev_error_mark_host) */
    int n_release, n_extend;
    int no_sync;         /* make() gives the allocator no sync (no garbage collection) */
    int n_sync;          /* sync calls */
    int n_release_at_sync; /* n_release when sync was last called */
};

static inline void fake_init(struct fake_source *s)
{
    memset(s, 0, sizeof *s);
    s->next = 1ull << 40;
    s->window = 1ull << 20;
    s->fail_call = -1;
}

static inline uint64_t fake_reserved(const struct fake_source *s)
{
    uint64_t r = 0;
    for (int i = 0; i < s->n_reg; i++)
        if (s->reg[i].live)
            r += s->reg[i].bytes;
    return r;
}

static inline int fake_live_regions(const struct fake_source *s)
{
    int n = 0;
    for (int i = 0; i < s->n_reg; i++)
        n += s->reg[i].live;
    return n;
}

static inline enum vdev_status fake_reserve(void *ctx, uint64_t bytes, void **base)
{
    struct fake_source *s = ctx;
    int call = s->n_reserve_calls++;
    if ((call == s->fail_call || (s->max_bytes && bytes > s->max_bytes)) && s->host_fails) {
        vdev_error(VDEV_ERR_OOM, "fake source: cannot map %llu bytes of host address space",
                   (unsigned long long)bytes);
        vdev_error_mark_host();
        return VDEV_ERR_OOM;
    }
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

static inline void fake_release(void *ctx, void *base, uint64_t bytes)
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

static inline enum vdev_status fake_extend(void *ctx, void *base, uint64_t old_bytes, uint64_t new_bytes)
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

static inline void fake_sync(void *ctx)
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

static inline int ev_done(void *ctx, void *e) { return ((struct fake_event *)e)->done; }
static inline void ev_wait(void *ctx, void *e)
{
    ((struct fake_event *)e)->done = 1;
    ((struct fake_event *)e)->waited++;
    ((struct fake_event *)e)->released_before_wait = ((struct fake_source *)ctx)->n_release;
}
static inline void ev_drop(void *ctx, void *e) { ((struct fake_event *)e)->dropped++; }

/* An allocator named /device:GPU:1 over source s, with or without extend and
 * events; with sync (so garbage collection) unless s->no_sync. */
static inline vdev_alloc_t *make(struct fake_source *s, enum vdev_memory_policy policy, uint64_t limit,
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
static inline void model_add(struct model *m, struct mblock x)
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

static inline struct mblock model_take(struct model *m, int i)
{
    struct mblock x = m->b[i];
    memmove(&m->b[i], &m->b[i + 1], (size_t)(m->n - i - 1) * sizeof *m->b);
    m->n--;
    return x;
}

/* xorshift64*: a small deterministic generator per test run. */
static inline uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static inline double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

/* 1 byte .. 1 GiB, log-uniform. */
static inline uint64_t rng_size(uint64_t *s)
{
    uint64_t b = (uint64_t)exp(rng_unit(s) * log(1073741824.0));
    return b ? b : 1;
}

/* ---- the placement policy --------------------------------------------------- */

static inline unsigned ref_bin(uint64_t bytes) { return 63u - (unsigned)__builtin_clzll(bytes >> 8); }

/* Where the policy (alloc.c) puts sz bytes in the one region [base, end), the
 * live blocks being m's: the lowest-addressed gap of sz's own bin that fits,
 * else the lowest-addressed gap of the next bin that has gaps; UINT64_MAX
 * when no gap fits. */
static inline uint64_t ref_place(const struct model *m, uint64_t base, uint64_t end, uint64_t sz)
{
    unsigned b = ref_bin(sz), next_bin = UINT32_MAX;
    uint64_t next_addr = UINT64_MAX, at = base;
    for (int i = 0; i <= m->n; i++) {
        uint64_t gap_end = i < m->n ? m->b[i].addr : end;
        if (gap_end > at) {
            uint64_t g = gap_end - at;
            unsigned gb = ref_bin(g);
            if (gb == b && g >= sz)
                return at;
            if (gb > b && gb < next_bin) {
                next_bin = gb;
                next_addr = at;
            }
        }
        if (i < m->n)
            at = m->b[i].addr + m->b[i].size;
    }
    return next_addr;
}

/* ---- the checks after every step ------------------------------------------ */

static inline int inside_region(const struct fake_source *s, uint64_t addr, uint64_t size)
{
    for (int i = 0; i < s->n_reg; i++)
        if (s->reg[i].live && addr >= s->reg[i].base &&
            addr + size <= s->reg[i].base + s->reg[i].bytes)
            return 1;
    return 0;
}

/* Returns the number of failed checks, so a broken run stops early. */
static inline int check_state(vdev_alloc_t *a, const struct fake_source *s, const struct model *m,
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
static inline void expected_oom(char *buf, size_t cap, uint64_t bytes, const struct vdev_alloc_stats *st,
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
static inline uint64_t fake_largest_region(const struct fake_source *s)
{
    uint64_t l = 0;
    for (int i = 0; i < s->n_reg; i++)
        if (s->reg[i].live && s->reg[i].bytes > l)
            l = s->reg[i].bytes;
    return l;
}

static inline int stats_equal_but_failed(const struct vdev_alloc_stats *x,
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

static inline void collect_region(void *user, void *base, uint64_t bytes, int used)
{
    struct region_list *l = user;
    if (l->n < MAX_REGIONS) {
        l->base[l->n] = (uintptr_t)base;
        l->bytes[l->n] = bytes;
        l->used[l->n] = used;
        l->n++;
    }
}

#endif /* VDEV_TEST_ALLOC_FAKE_H */
