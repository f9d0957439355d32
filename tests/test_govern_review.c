/* test_govern_review.c — lending and run-time limits, case by case, as the
 * review of the "lending from any priority" change found them wrong:
 *  1. the asker's own empty regions count: the others need only make room
 *     for the rest (before, a false OOM with nothing released);
 *  2. a floor lowered with preallocation is preallocated again only as far
 *     as the lowered ceiling allows (before, above it);
 *  3. a lender's allocator stays free while its stream is waited for: its
 *     own malloc goes on while a host function holds the stream;
 *  4. a lender gives the smallest empty region that is enough, of those
 *     wholly above its floor, one reaching into its floor only when nothing
 *     else makes room, and LENT says how much less it claims;
 *  5. a floor raise that fails anyway releases nobody's cache;
 *  6. the pinned region is unpinned only when the floor is lowered below
 *     what was preallocated (a source that extends in place grows it);
 *  7. pressure calls gathered for a caller holding its own lock, and a
 *     rollback that pins the preallocated region again (the runtime's
 *     vdev_runtime_card_charge, which needs CUDA, uses both);
 *  8. an empty preallocated region counts as room in a floor raise's
 *     report as in an allocation's (before, the floor's said 0 B left).
 * Cards are simulated with TF_DEVICE_MIN_SYS_MEMORY_IN_MB=0, so the figures
 * are round. Nothing asserts on time: where the test needs to know that
 * something happened, it waits for it with check_wait_flag. */
#define _GNU_SOURCE
#include "govern_check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* 1. GPU:0 and GPU:1 each hold 1 GiB live and 1 GiB empty on a 4 GiB card;
 * GPU:0 asks 1.5 GiB: its own empty GiB and GPU:1's make room together. */
static void test_own_regions_count(void)
{
    fresh_card("1x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..2GiB,..2GiB", 1);
    CHECK_OK(vdev_init());
    struct events e0 = {0}, e1 = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure, &e0));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure, &e1));
    void *a[2], *b[2], *c;
    for (int i = 0; i < 2; i++) /* two 1 GiB regions each */
        CHECK_OK(vdev_mem_alloc("GPU:0", GIB, &a[i]));
    for (int i = 0; i < 2; i++)
        CHECK_OK(vdev_mem_alloc("GPU:1", GIB, &b[i]));
    CHECK_OK(vdev_mem_free("GPU:0", a[1]));
    CHECK_OK(vdev_mem_free("GPU:1", b[1]));
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 0)); /* ceiling: the budget */
    CHECK_OK(vdev_mem_alloc("GPU:0", 1536 * MIB, &c));
    CHECK_EQ_U64(reserved("GPU:1"), GIB);
    CHECK_EQ_U64(reserved("GPU:0"), 3 * GIB); /* its live GiB and a new 2 GiB region */
    CHECK(e1.n[VDEV_PRESSURE_LENT] == 1 && e1.bytes[VDEV_PRESSURE_LENT] == GIB);
    CHECK(e0.n[VDEV_PRESSURE_CARD_FULL] == 1 && e0.bytes[VDEV_PRESSURE_CARD_FULL] == 1536 * MIB);
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:0", c));
    CHECK_OK(vdev_mem_free("GPU:0", a[0]));
    CHECK_OK(vdev_mem_free("GPU:1", b[0]));
    INVARIANTS_HOLD();
}

/* 2. Preallocated 2 GiB (empty) and a 1 GiB region above it (live); floor
 * and ceiling go to 1 GiB and 1.5 GiB: the new floor is preallocated only
 * up to the ceiling (512 MiB), the rest kept aside and reserved on demand. */
static void test_repin_under_ceiling(void)
{
    fresh_card("1x4GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:2GiB..3GiB,..@low", 1);
    CHECK_OK(vdev_init());
    void *big, *grown, *again;
    CHECK_OK(vdev_mem_alloc("GPU:0", 2 * GIB, &big)); /* the whole pinned region */
    CHECK_OK(vdev_mem_alloc("GPU:0", GIB, &grown));   /* a region above the floor */
    CHECK_OK(vdev_mem_free("GPU:0", big));
    CHECK_OK(vdev_memory_set_limits("GPU:0", GIB, 1536 * MIB));
    CHECK_EQ_U64(reserved("GPU:0"), 1536 * MIB);
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.card_claimed_bytes, 1536 * MIB);
    INVARIANTS_HOLD();
    /* Freed and released: the pinned 512 MiB stay, and the floor's other
     * 512 MiB come on demand. */
    CHECK_OK(vdev_mem_free("GPU:0", grown));
    uint64_t rel = 0;
    CHECK_OK(vdev_memory_release_cached("GPU:0", &rel));
    CHECK_EQ_U64(rel, GIB);
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    CHECK_OK(vdev_mem_alloc("GPU:0", GIB, &again));
    CHECK_OK(vdev_mem_free("GPU:0", again));
    INVARIANTS_HOLD();
}

/* 3. A host function holds the lender's stream; the lender's regions are
 * parked (counted as pending) while its stream is waited for, and its own
 * allocations go on meanwhile. */
static atomic_int gate_entered, gate_open, parked, lender_done, asker_done, stop_probe;
static enum vdev_status asker_status;
static vdev_alloc_t *lender_alloc;

static void gate_fn(void *arg)
{
    (void)arg;
    atomic_store(&gate_entered, 1);
    check_wait_flag(&gate_open); /* at most about 20 s, even when the test fails */
}

static void *asker(void *arg)
{
    void **out = arg;
    asker_status = vdev_mem_alloc("GPU:1", 866 * MIB, out); /* 100 MiB of GPU:0's cache */
    atomic_store(&asker_done, 1);
    return NULL;
}

/* Waits until the lender's regions are parked, then allocates and frees on
 * the lender. Before the fix, the lender's lock was held across the wait:
 * the statistics call itself stalled until the stream ran. */
static void *probe(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_probe)) {
        struct vdev_alloc_stats st;
        vdev_alloc_get_stats(lender_alloc, &st);
        if (st.bytes_pending == 256 * MIB) {
            atomic_store(&parked, 1);
            break;
        }
        sched_yield();
    }
    void *p;
    if (vdev_mem_alloc("GPU:0", MIB, &p) == VDEV_OK && vdev_mem_free("GPU:0", p) == VDEV_OK)
        atomic_store(&lender_done, 1);
    return NULL;
}

static void test_lend_without_lock(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..@critical,..@low", 1);
    CHECK_OK(vdev_init());
    struct vdev_ldev *d0 = NULL;
    CHECK_OK(vdev_runtime_find("GPU:0", &d0));
    if (!d0)
        return;
    lender_alloc = d0->alloc;
    void *hold, *big, *u = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", MIB, &hold)); /* a 2 MiB region, half free */
    CHECK_OK(vdev_mem_alloc("GPU:0", 256 * MIB, &big));
    CHECK_OK(vdev_mem_free("GPU:0", big)); /* a 256 MiB empty region */
    CHECK_EQ_U64(reserved("GPU:0"), 258 * MIB);
    atomic_store(&gate_entered, 0);
    atomic_store(&gate_open, 0);
    char unused = 0;
    CHECK_OK(vdev_backend_submit_host(d0->backend, d0->bdev, gate_fn, &unused, sizeof unused));
    CHECK(check_wait_flag(&gate_entered));
    pthread_t ta, tp;
    CHECK(pthread_create(&ta, NULL, asker, &u) == 0);
    CHECK(pthread_create(&tp, NULL, probe, NULL) == 0);
    CHECK(check_wait_flag(&parked));
    CHECK(check_wait_flag(&lender_done));
    CHECK(!atomic_load(&asker_done)); /* still waiting for GPU:0's stream */
    atomic_store(&stop_probe, 1);
    atomic_store(&gate_open, 1);
    pthread_join(ta, NULL);
    pthread_join(tp, NULL);
    CHECK_STATUS(asker_status, VDEV_OK);
    CHECK_EQ_U64(reserved("GPU:0"), 2 * MIB);
    INVARIANTS_HOLD();
    if (asker_status == VDEV_OK)
        CHECK_OK(vdev_mem_free("GPU:1", u));
    CHECK_OK(vdev_mem_free("GPU:0", hold));
    INVARIANTS_HOLD();
}

/* 4. GPU:0 (floor 1 GiB) holds regions of 256 MiB (empty), 512 MiB (live)
 * and 1 GiB (empty): 768 MiB above its floor. GPU:1 asks 256 MiB twice. */
static void test_lend_above_floor(void)
{
    fresh_card("1x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB..,..", 1);
    CHECK_OK(vdev_init());
    struct events e0 = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure, &e0));
    void *a, *b, *c, *rest, *x, *y, *f;
    CHECK_OK(vdev_mem_alloc("GPU:0", 256 * MIB, &a)); /* regions of 256, 512, 1024 MiB */
    CHECK_OK(vdev_mem_alloc("GPU:0", 512 * MIB, &b));
    CHECK_OK(vdev_mem_alloc("GPU:0", GIB, &c));
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:0", c));
    CHECK_EQ_U64(reserved("GPU:0"), 1792 * MIB);
    CHECK_OK(vdev_mem_alloc("GPU:1", 2304 * MIB, &rest)); /* the rest of the card */
    /* The 256 MiB region is enough and lies above the floor: it goes (the
     * largest, 1 GiB, went before: half of it inside the floor). */
    CHECK_OK(vdev_mem_alloc("GPU:1", 256 * MIB, &x));
    CHECK_EQ_U64(reserved("GPU:0"), 1536 * MIB);
    CHECK(e0.n[VDEV_PRESSURE_LENT] == 1 && e0.bytes[VDEV_PRESSURE_LENT] == 256 * MIB);
    INVARIANTS_HOLD();
    /* Only the 1 GiB region is left, and it reaches into the floor: it goes,
     * as nothing else makes room, and GPU:0 is told it gave the 512 MiB it
     * held above its floor (before: 1 GiB). The card keeps its floor aside. */
    CHECK_OK(vdev_mem_alloc("GPU:1", 256 * MIB, &y));
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    CHECK(e0.n[VDEV_PRESSURE_LENT] == 2 && e0.bytes[VDEV_PRESSURE_LENT] == 768 * MIB);
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.available_bytes, 512 * MIB); /* GPU:1 grew into the rest: 3 GiB */
    CHECK_OK(vdev_mem_alloc("GPU:0", 512 * MIB, &f)); /* its floor, reserved again */
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:0", f));
    CHECK_OK(vdev_mem_free("GPU:0", b));
    CHECK_OK(vdev_mem_free("GPU:1", x));
    CHECK_OK(vdev_mem_free("GPU:1", y));
    CHECK_OK(vdev_mem_free("GPU:1", rest));
    INVARIANTS_HOLD();
}

/* 5. GPU:1 (floor 1 GiB) holds 1 GiB empty and 256 MiB live: only 256 MiB
 * of it is above its floor. A floor raise 512 MiB short releases nothing;
 * one 256 MiB short takes those 256 MiB. */
static void test_floor_raise_releases_nothing(void)
{
    fresh_card("1x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..,1GiB..,..", 1);
    CHECK_OK(vdev_init());
    struct events e1 = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure, &e1));
    void *b0, *b1, *a, *c;
    CHECK_OK(vdev_mem_alloc("GPU:1", 256 * MIB, &b0));
    CHECK_OK(vdev_mem_alloc("GPU:1", GIB, &b1));
    CHECK_OK(vdev_mem_free("GPU:1", b1));
    CHECK_OK(vdev_mem_alloc("GPU:0", GIB, &a));
    CHECK_OK(vdev_mem_alloc("GPU:2", 1792 * MIB, &c)); /* the card is full */
    CHECK_ERR(vdev_memory_set_limits("GPU:0", 1536 * MIB, 0), VDEV_ERR_OOM,
              "cannot raise the floor now: GPU:0 (normal) asked for a floor of 1.50 GiB and "
              "/physical_device:GPU:0 has 0 B left for it; GPU:2 (normal) holds 1.75 GiB above "
              "its floor, all of it live; GPU:1 (normal) holds 256.00 MiB above its floor, none "
              "of it live; would help: freeing memory or lower ceilings on those devices, a "
              "smaller batch");
    CHECK_EQ_U64(reserved("GPU:1"), 1280 * MIB);
    CHECK_EQ_U64(e1.n[VDEV_PRESSURE_LENT], 0);
    INVARIANTS_HOLD();
    CHECK_OK(vdev_memory_set_limits("GPU:0", 1280 * MIB, 0));
    CHECK_EQ_U64(reserved("GPU:1"), 256 * MIB);
    CHECK(e1.n[VDEV_PRESSURE_LENT] == 1 && e1.bytes[VDEV_PRESSURE_LENT] == 256 * MIB);
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:1", b0));
    CHECK_OK(vdev_mem_free("GPU:2", c));
    INVARIANTS_HOLD();
}

/* ---- pool-level cases: a source that extends in place (CUDA's) ---- */

struct fake {
    uint64_t next; /* the next region's address: 1 GiB apart, room to extend */
    int syncs;
};

static enum vdev_status fake_reserve(void *ctx, uint64_t bytes, void **base)
{
    struct fake *f = ctx;
    (void)bytes;
    *base = (void *)(uintptr_t)f->next;
    f->next += GIB;
    return VDEV_OK;
}

static void fake_release(void *ctx, void *base, uint64_t bytes)
{
    (void)ctx;
    (void)base;
    (void)bytes;
}

static enum vdev_status fake_extend(void *ctx, void *base, uint64_t old_bytes, uint64_t new_bytes)
{
    (void)ctx;
    (void)base;
    (void)old_bytes;
    return new_bytes <= GIB ? VDEV_OK : vdev_error(VDEV_ERR_OOM, "fake: no room");
}

static void fake_sync(void *ctx)
{
    struct fake *f = ctx;
    f->syncs++;
}

static vdev_alloc_t *prealloc_member(vdev_pool_t *p, int m, struct fake *f, uint64_t floor,
                                     int extend)
{
    struct vdev_alloc_config cfg = {
        .name = "/device:GPU:0",
        .limit_bytes = 64 * MIB,
        .policy = VDEV_POLICY_PREALLOCATE,
        .source = {.reserve = fake_reserve, .release = fake_release,
                   .extend = extend ? fake_extend : NULL, .sync = fake_sync, .ctx = f},
        .pool = p,
        .member = m,
        .prealloc_bytes = floor,
    };
    vdev_alloc_t *a = NULL;
    CHECK_OK(vdev_alloc_new(&cfg, &a));
    if (a)
        vdev_pool_attach(p, m, a);
    return a;
}

/* 6. The pinned region grows in place past the floor; a change of the
 * ceiling alone leaves it pinned, a floor lowered below what was
 * preallocated unpins (and, empty, releases) it. */
static void test_repin_only_lowered(void)
{
    vdev_pool_t *p;
    int m;
    struct fake f = {.next = 1ull << 40};
    CHECK_OK(vdev_pool_new("/physical_device:GPU:9", 64 * MIB, &p));
    CHECK_OK(vdev_pool_add(p, "/device:GPU:0", 16 * MIB, 64 * MIB, VDEV_PRIORITY_NORMAL, &m));
    vdev_alloc_t *a = prealloc_member(p, m, &f, 16 * MIB, 1);
    if (!a)
        return;
    struct vdev_block b[2];
    CHECK_OK(vdev_alloc_malloc(a, 16 * MIB, &b[0]));
    CHECK_OK(vdev_alloc_malloc(a, 8 * MIB, &b[1])); /* extends the pinned region to 32 MiB */
    CHECK_EQ_U64(vdev_pool_reserved(p, m), 32 * MIB);
    uint64_t rel = 1;
    CHECK_OK(vdev_pool_set_limits(p, m, 16 * MIB, 48 * MIB, &rel));
    CHECK_EQ_U64(rel, 0);
    vdev_alloc_free(a, b[0].handle);
    vdev_alloc_free(a, b[1].handle);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 0); /* still pinned */
    CHECK_EQ_U64(vdev_pool_reserved(p, m), 32 * MIB);
    CHECK_OK(vdev_alloc_check(a));
    CHECK_OK(vdev_pool_check(p));
    /* The floor lowered below the 16 MiB preallocated: released, and the
     * new floor preallocated in its place. */
    CHECK_OK(vdev_pool_set_limits(p, m, 8 * MIB, 48 * MIB, &rel));
    CHECK_EQ_U64(rel, 32 * MIB);
    CHECK_EQ_U64(vdev_pool_reserved(p, m), 8 * MIB);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 0);
    CHECK_OK(vdev_alloc_check(a));
    CHECK_OK(vdev_pool_check(p));
    vdev_alloc_destroy(a);
    vdev_pool_destroy(p);
}

/* 7. The charge of a collective library, as vdev_runtime_card_charge makes
 * it: the device's floor and ceiling come down, the library's floor up; the
 * latter fails (the device's memory is live), and the device's limits go
 * back with VDEV_POOL_UNDO: its preallocated region is pinned again. The
 * pressure calls wait in `calls` until the caller makes them. */
static void test_calls_and_undo(void)
{
    vdev_pool_t *p;
    int dev, lib;
    struct fake f = {.next = 1ull << 40};
    CHECK_OK(vdev_pool_new("/physical_device:GPU:9", 64 * MIB, &p));
    CHECK_OK(vdev_pool_add(p, "/device:GPU:0", 32 * MIB, 64 * MIB, VDEV_PRIORITY_NORMAL, &dev));
    CHECK_OK(vdev_pool_add(p, "collective library buffers", 0, 0, VDEV_PRIORITY_NORMAL, &lib));
    vdev_alloc_t *a = prealloc_member(p, dev, &f, 32 * MIB, 0);
    if (!a)
        return;
    struct events e = {0};
    CHECK_OK(vdev_pool_set_pressure(p, dev, on_pressure, &e));
    struct vdev_block b;
    CHECK_OK(vdev_alloc_malloc(a, 8 * MIB, &b)); /* in the pinned region */
    struct vdev_pool_calls calls;
    calls.n = 0;
    CHECK_OK(vdev_pool_set_limits_ex(p, dev, 16 * MIB, 16 * MIB, 0, NULL, &calls));
    CHECK(calls.n == 1 && e.n[VDEV_PRESSURE_CEILING] == 0); /* gathered, not made */
    CHECK_STATUS(vdev_pool_set_limits_ex(p, lib, 48 * MIB, 48 * MIB, 0, NULL, &calls),
                 VDEV_ERR_OOM);
    CHECK_OK(vdev_pool_set_limits_ex(p, dev, 32 * MIB, 64 * MIB, VDEV_POOL_UNDO, NULL, &calls));
    vdev_pool_calls_make(&calls);
    CHECK(calls.n == 0 && e.n[VDEV_PRESSURE_CEILING] == 1 &&
          e.bytes[VDEV_PRESSURE_CEILING] == 16 * MIB);
    vdev_alloc_free(a, b.handle);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 0); /* pinned again */
    CHECK_EQ_U64(vdev_pool_reserved(p, dev), 32 * MIB);
    CHECK_OK(vdev_alloc_check(a));
    CHECK_OK(vdev_pool_check(p));
    /* Lowered while empty: released and 16 MiB preallocated instead; the
     * rollback preallocates the 32 MiB floor again. */
    CHECK_OK(vdev_pool_set_limits_ex(p, dev, 16 * MIB, 16 * MIB, 0, NULL, &calls));
    CHECK_EQ_U64(vdev_pool_reserved(p, dev), 16 * MIB);
    CHECK_OK(vdev_pool_set_limits_ex(p, dev, 32 * MIB, 64 * MIB, VDEV_POOL_UNDO, NULL, &calls));
    CHECK_EQ_U64(vdev_pool_reserved(p, dev), 32 * MIB);
    CHECK_EQ_U64(vdev_alloc_release_cached(a), 0);
    CHECK_OK(vdev_alloc_check(a));
    CHECK_OK(vdev_pool_check(p));
    /* A plain raise keeps the floor aside and reserves it on demand. */
    CHECK_OK(vdev_pool_set_limits(p, dev, 16 * MIB, 16 * MIB, NULL));
    CHECK_OK(vdev_pool_set_limits(p, dev, 32 * MIB, 64 * MIB, NULL));
    CHECK_EQ_U64(vdev_pool_reserved(p, dev), 16 * MIB);
    CHECK_OK(vdev_pool_check(p));
    vdev_pool_calls_make(&calls);
    vdev_alloc_destroy(a);
    vdev_pool_destroy(p);
}

/* 8. Preallocation: GPU:0's 512 MiB floor is reserved and empty, GPU:1
 * holds 3 GiB live (its ceiling), 512 MiB of the 4 GiB card are unclaimed. A 2 GiB floor
 * and a 2 GiB allocation are refused with the same figure, 1 GiB (the empty
 * region and the unclaimed memory), and it is exact: a 1 GiB floor is kept,
 * then a 1 GiB allocation fits. */
static void test_floor_report_counts_prealloc(void)
{
    fresh_card("1x4GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:512MiB..@critical,..3GiB@low", 1);
    CHECK_OK(vdev_init());
    void *b, *a;
    CHECK_OK(vdev_mem_alloc("GPU:1", 3 * GIB, &b));
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    const char *rest = "; GPU:1 (low) holds 3.00 GiB above its floor, all of it live; would "
                       "help: freeing memory on those devices, a smaller batch";
    char want[512];
    snprintf(want, sizeof want,
             "cannot raise the floor now: GPU:0 (critical) asked for a floor of 2.00 GiB and "
             "/physical_device:GPU:0 has 1.00 GiB left for it%s", rest);
    CHECK_ERR(vdev_memory_set_limits("GPU:0", 2 * GIB, 0), VDEV_ERR_OOM, want);
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 2 * GIB, &a), VDEV_ERR_OOM);
    snprintf(want, sizeof want,
             "GPU:0 (critical) asked for 2.00 GiB and /physical_device:GPU:0 has 1.00 GiB left "
             "for it%s", rest);
    CHECK_MSG(want);
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    CHECK_OK(vdev_memory_set_limits("GPU:0", GIB, 0));
    CHECK_OK(vdev_mem_alloc("GPU:0", GIB, &a));
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:1", b));
    INVARIANTS_HOLD();
}

int main(void)
{
    test_own_regions_count();
    test_repin_under_ceiling();
    test_lend_without_lock();
    test_lend_above_floor();
    test_floor_raise_releases_nothing();
    test_repin_only_lowered();
    test_calls_and_undo();
    test_floor_report_counts_prealloc();
    vdev_shutdown();
    return check_done();
}
