/* test_alloc_growth.c — how the allocator takes memory from its device and
 * gives it back, and what it says when it cannot.
 *
 * Over the fake region source of alloc_fake.h: the growth schedule (BFC's:
 * 2 MiB, doubling while the request is larger and for the next region when
 * it did not, capped by the limit, backing off when the device refuses),
 * release_cached and the restart of the schedule after a release, garbage
 * collection of empty regions before an OOM (the 64 MiB device that freed
 * 32 x 2 MiB and then asks for 60 MiB; with and without a sync; when it
 * cannot help; with blocks pending an event; with a source that extends in
 * place), the three kinds of OOM message with only the suggestions that
 * apply, and largest_alloc_size with its reset. Never asserts on time.
 */
#include "alloc_fake.h"

/* ---- targeted tests -------------------------------------------------------- */

/* GROW: nothing up front, 2 MiB first, each region double the last; a big
 * first request gets a power-of-two multiple of 2 MiB; the last region is
 * what the limit leaves; a source that refuses large regions gets asked 0.9x
 * smaller. */
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

    /* A first request above 2 MiB gets the first power-of-two multiple of
     * 2 MiB that holds it (BFC's Extend doubles the region size while the
     * request exceeds it). */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
    CHECK_OK(vdev_alloc_malloc(a, (5 << 20) + 1, &b));
    CHECK_EQ_U64(s.reg[0].bytes, 8 << 20);
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

/* The region size of BFC's Extend: it doubles while the request exceeds it,
 * and doubles for the next region only when it did not double for this one.
 * A large request's region has a tail that serves the small requests after
 * it: 1500 MiB then 1 MiB reserve one 2 GiB region (not 1500 MiB and then
 * 3000 MiB, which took a whole shared card for 1501 MiB in use); 1000 MiB
 * then 1 MiB reserve 1 GiB. After a region that doubled, the next one is the
 * same size; after one that did not, twice it. */
static void test_growth_bfc_schedule(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make(&s, VDEV_POLICY_GROW, 16ull << 30, 0, 0);
    struct vdev_block b[5];
    struct vdev_alloc_stats st;
    CHECK_OK(vdev_alloc_malloc(a, 1500ull << 20, &b[0]));
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &b[1]));
    CHECK_EQ_U64(s.n_reg, 1);
    CHECK_EQ_U64(s.reg[0].bytes, 2048ull << 20);
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_reserved, 2048ull << 20);
    CHECK_EQ_U64(st.bytes_in_use, 1501ull << 20);
    /* 1000 MiB do not fit the 547 MiB tail: a region of 2 GiB again (the
     * size doubled for the first one), then one of 4 GiB (it did not). */
    CHECK_OK(vdev_alloc_malloc(a, 1000ull << 20, &b[2]));
    CHECK_EQ_U64(s.n_reg, 2);
    CHECK_EQ_U64(s.reg[1].bytes, 2048ull << 20);
    CHECK_OK(vdev_alloc_malloc(a, 1100ull << 20, &b[3]));
    CHECK_EQ_U64(s.n_reg, 3);
    CHECK_EQ_U64(s.reg[2].bytes, 4096ull << 20);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);

    fake_init(&s);
    a = make(&s, VDEV_POLICY_GROW, 16ull << 30, 0, 0);
    CHECK_OK(vdev_alloc_malloc(a, 1000ull << 20, &b[0]));
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_reserved, 1024ull << 20);
    CHECK_OK(vdev_alloc_malloc(a, 1 << 20, &b[1]));
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_reserved, 1024ull << 20);
    CHECK_EQ_U64(s.n_reg, 1);
    vdev_alloc_destroy(a);

    /* The limit caps the region (3 GiB: 1500 MiB take 2 GiB, 1 GiB is
     * left); the schedule goes on as BFC's: 600 MiB do not fit the tail and
     * take what the limit leaves. */
    fake_init(&s);
    a = make(&s, VDEV_POLICY_GROW, 3ull << 30, 0, 0);
    CHECK_OK(vdev_alloc_malloc(a, 1500ull << 20, &b[0]));
    CHECK_OK(vdev_alloc_malloc(a, 600ull << 20, &b[1]));
    CHECK_EQ_U64(s.n_reg, 2);
    CHECK_EQ_U64(s.reg[1].bytes, 1024ull << 20);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);
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
    CHECK_EQ_U64(s.reg[6].bytes, 64 << 20); /* 2 MiB doubled to 64 MiB: the limit */
    vdev_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.bytes_reserved, 64 << 20);
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
    CHECK_EQ_U64(s.reg[1].bytes, 32 << 20); /* 2 MiB doubled until it holds 20 MiB */
    vdev_alloc_free(a, big.handle);
    /* It grows in place again afterwards (within its new window). */
    s.window = 64 << 20;
    int extends = s.n_extend;
    CHECK_OK(vdev_alloc_malloc(a, 40 << 20, &big));
    CHECK_EQ_U64(fake_live_regions(&s), 1);
    CHECK(s.n_extend > extends);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
    CHECK_EQ_U64(fake_reserved(&s), 0);
}

/* The kinds of OOM, each with only the suggestions that apply:
 * fragmentation in a preallocated region, the device itself full (the
 * source's message kept), the host unable to map the region (the source's
 * message kept, and no suggestion for the card), and a size that cannot even
 * be rounded. */
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

    /* The host cannot map the region (a simulated GPU's memory): memory held by others on the
     * card would not help, so it is not suggested. */
    fake_init(&s);
    s.max_bytes = 8 << 20;
    s.host_fails = 1;
    a = make(&s, VDEV_POLICY_GROW, 1ull << 30, 0, 0);
    CHECK_STATUS(vdev_alloc_malloc(a, 16 << 20, &z), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 16.00 MiB (16777216 bytes) on /device:GPU:1: 0 B in use of "
              "1.00 GiB limit, largest free block 0 B; fake source: cannot map 16777216 bytes of "
              "host address space (a limit of the host, not of the card); would help: a smaller "
              "batch");
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

int main(void)
{
    test_growth();
    test_growth_bfc_schedule();
    test_release_cached();
    test_release_resets_growth();
    test_garbage_collection();
    test_oom_messages();
    test_largest_alloc();
    return check_done();
}
