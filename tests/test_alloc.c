/* test_alloc.c — the device-memory allocator against a reference model.
 *
 * A fake region source hands out addresses (no memory) and records every
 * region, so the test knows what is reserved. The model keeps the live blocks
 * as an address-sorted interval list (both in alloc_fake.h). The property
 * test makes random allocations (1 byte to 1 GiB, log-uniform), frees and now
 * and then a release_cached, with several seeds, both policies and several
 * limits, and after every step checks: no two live blocks overlap, every
 * block is 256-aligned and inside a reserved region, the statistics add up,
 * vdev_alloc_check() passes, every new region stays within the growth
 * schedule, and a failed allocation left the allocator exactly as it was
 * with the exact OOM message (exhaustion or fragmentation, worked out from
 * the model). Then targeted tests: stream-ordered frees, fault injection on
 * the Nth reserve, a source that extends in place, lookup, host memory for a
 * 141 GB limit, and argument checks. Growth, release, garbage collection and
 * the OOM messages have their own file, test_alloc_growth.c. The placement
 * test replays random-order and last-in-first-out workloads against the
 * documented policy, worked out from the model; the long-bins test does so
 * where bins are long enough to be kept in trees (alloc_tree.c). Never
 * asserts on time.
 */
#include "alloc_fake.h"

#include "alloc/alloc_impl.h" /* the tree bits, read by test_long_bins */

/* ---- the property test ----------------------------------------------------- */

/* One property run: `steps` random allocations (55%) and frees of random
 * live blocks (now and then a release_cached), the full check after each,
 * then everything freed. A new region is never larger than 2 MiB or twice
 * the largest region held before, whatever was released (growth restarts
 * after a release instead of doubling on from released regions), or twice
 * the request (BFC's Extend doubles the region size while the request
 * exceeds it, from where the schedule stands). */
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
                if (bound < 2 * sz)
                    bound = 2 * sz;
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

/* ---- placement policy ------------------------------------------------------- */

/* One allocation checked against ref_place: the same address, or OOM when
 * nothing fits. */
static void placed_alloc(vdev_alloc_t *a, struct model *m, uint64_t base, uint64_t end,
                         uint64_t bytes)
{
    uint64_t sz = (bytes + 255) / 256 * 256, want = ref_place(m, base, end, sz);
    struct vdev_block blk;
    enum vdev_status st = vdev_alloc_malloc(a, bytes, &blk);
    if (want == UINT64_MAX) {
        CHECK_STATUS(st, VDEV_ERR_OOM);
        return;
    }
    CHECK_OK(st);
    if (st != VDEV_OK)
        return;
    CHECK_EQ_U64((uintptr_t)blk.ptr, want);
    model_add(m, (struct mblock){(uintptr_t)blk.ptr, sz, blk.handle});
}

/* Every placement is the policy's (the lowest-addressed chunk of the
 * request's octave that fits, else the lowest of the next non-empty octave),
 * under random-order frees (bins of many chunks, kept in no order) and under
 * a last-in-first-out pattern (bins of one or two). */
static void test_placement_policy(void)
{
    struct fake_source s;
    fake_init(&s);
    const uint64_t limit = 1ull << 30;
    vdev_alloc_t *a = make(&s, VDEV_POLICY_PREALLOCATE, limit, 0, 0);
    if (!a)
        return;
    uint64_t base = s.reg[0].base, end = base + s.reg[0].bytes;
    struct model m = {0};
    uint64_t rng = 12345;
    for (int step = 0; step < 20000; step++) {
        if (m.n == 0 || rng_unit(&rng) < 0.5) {
            uint64_t bytes = (uint64_t)exp(rng_unit(&rng) * log(16.0 * 1048576.0));
            placed_alloc(a, &m, base, end, bytes ? bytes : 1);
        } else {
            vdev_alloc_free(a, model_take(&m, (int)(rng_next(&rng) % (uint64_t)m.n)).handle);
        }
    }
    CHECK_OK(vdev_alloc_check(a));
    while (m.n)
        vdev_alloc_free(a, model_take(&m, m.n - 1).handle);
    /* Last in, first out: eight blocks, freed in reverse, many times. */
    for (int round = 0; round < 400; round++) {
        for (int k = 0; k < 8; k++)
            placed_alloc(a, &m, base, end, (uint64_t)(k + 1) * 100000);
        while (m.n) {
            /* the most recent allocation: the highest address here */
            vdev_alloc_free(a, model_take(&m, m.n - 1).handle);
        }
    }
    CHECK_OK(vdev_alloc_check(a));
    free(m.b);
    vdev_alloc_destroy(a);
}

/* Long bins: thousands of holes of one size class (4 to 7 units, bin 2),
 * so that malloc's scans give the bin a tree (alloc_tree.c). Every placement
 * still follows the policy (ref_place) through the tree's insertions and
 * removals, splits that leave a smaller chunk in the bin, merges that grow a
 * chunk in its place, the tree's drop when the bin runs short and its
 * rebuilding; the invariant check, which walks the tree, runs every 200
 * steps. Sizes of 1 to 20 units mix in the bins around it. */
static void test_long_bins(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_PREALLOCATE, 64ull << 20, 0, 0);
    if (!a)
        return;
    uint64_t base = s.reg[0].base, end = base + s.reg[0].bytes;
    struct model m = {0};
    uint64_t rng = 777;
    int built = 0, dropped = 0, in_tree = 0; /* bin 2's tree made, dropped; mallocs it served */
    int had = 0;
    for (int round = 0; round < 2; round++) {
        /* 4000 blocks of bin 2, every other one freed: 2000 holes there. */
        for (int i = 0; i < 4000; i++)
            placed_alloc(a, &m, base, end, (4 + rng_next(&rng) % 4) * 256);
        for (int i = m.n - 1; i >= 0; i -= 2)
            vdev_alloc_free(a, model_take(&m, i).handle);
        for (int step = 0; step < 6000; step++) {
            uint64_t units = 1 + rng_next(&rng) % 20;
            if (rng_unit(&rng) < 0.6)
                units = 4 + rng_next(&rng) % 4;
            if (m.n == 0 || rng_unit(&rng) < 0.5) {
                in_tree += (int)((a->tmap >> 2) & 1) && units >= 4 && units < 8;
                placed_alloc(a, &m, base, end, units * 256 - rng_next(&rng) % 256);
            } else {
                vdev_alloc_free(a, model_take(&m, (int)(rng_next(&rng) % (uint64_t)m.n)).handle);
            }
            int has = (int)((a->tmap >> 2) & 1);
            built += has && !had;
            dropped += had && !has;
            had = has;
            if (step % 200 == 0)
                CHECK_OK(vdev_alloc_check(a));
        }
        /* Everything freed in random order: the holes merge, the bin runs short. */
        while (m.n) {
            vdev_alloc_free(a, model_take(&m, (int)(rng_next(&rng) % (uint64_t)m.n)).handle);
            int has = (int)((a->tmap >> 2) & 1);
            dropped += had && !has;
            had = has;
        }
        CHECK_OK(vdev_alloc_check(a));
        CHECK(!had);
    }
    /* Made and dropped in each round, and it served thousands of mallocs. */
    CHECK(built >= 2);
    CHECK(dropped >= 2);
    CHECK(in_tree > 1000);
    printf("long bins: bin 2's tree made %d times, dropped %d, served %d mallocs\n", built,
           dropped, in_tree);
    free(m.b);
    vdev_alloc_destroy(a);
}

int main(void)
{
    test_arguments();
    test_free_after();
    test_fault_injection();
    test_extend();
    test_lookup();
    test_host_memory();
    test_property();
    test_placement_policy();
    test_long_bins();
    return check_done();
}
