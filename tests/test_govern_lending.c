/* test_govern_lending.c — what a card does with cached memory before an
 * allocation fails, and with a preallocated region whose floor is lowered:
 *  - empty regions of any device, whatever the two priorities, are released
 *    before an OOM (lower priorities first), each lender told LENT and the
 *    asker CARD_FULL once; nothing is released for a request they cannot
 *    make room for;
 *  - the OOM's advice follows the facts: "freeing memory" only when some of
 *    the holders' memory is live, "lower ceilings" only when such a holder
 *    can still grow, and free space in regions still in use said as such;
 *  - preallocation (growth off): a floor lowered below the preallocated
 *    region releases it when it is empty (and preallocates the new floor),
 *    else unpins it so that it goes, or is lent, once freed;
 *  - the lending counters (vdev_memory_get_limits) of two devices that lend
 *    to each other turn by turn, and a floor that stops it.
 * Cards are simulated with TF_DEVICE_MIN_SYS_MEMORY_IN_MB=0, so the figures
 * in messages are round. */
#define _GNU_SOURCE
#include "govern_check.h"
#include "http_client.h"

#include <stdlib.h>

/* The probe's case: two devices of equal priority; the first one's growth
 * took the budget for its tensors and freed them; the second one gets the
 * memory (before, an OOM on an idle card that advised freeing memory). */
static void test_equal_priority(void)
{
    fresh_card("1x2560MiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..", 1);
    CHECK_OK(vdev_init());
    struct events e0 = {0}, e1 = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure, &e0));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure, &e1));
    void *a, *b;
    CHECK_OK(vdev_mem_alloc("GPU:0", GIB, &a));
    CHECK_OK(vdev_mem_alloc("GPU:0", 1536 * MIB, &b));
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:0", b));
    CHECK_EQ_U64(reserved("GPU:0"), 2560 * MIB); /* growth took the whole budget */
    void *c;
    CHECK_OK(vdev_mem_alloc("GPU:1", 512 * MIB, &c));
    uint64_t r0 = reserved("GPU:0");
    CHECK(r0 < 2560 * MIB && r0 <= 2048 * MIB);
    CHECK(e0.n[VDEV_PRESSURE_LENT] >= 1 && e0.bytes[VDEV_PRESSURE_LENT] == 2560 * MIB - r0);
    CHECK(e1.n[VDEV_PRESSURE_CARD_FULL] == 1 && e1.bytes[VDEV_PRESSURE_CARD_FULL] == 512 * MIB);
    CHECK(e0.n[VDEV_PRESSURE_CARD_FULL] == 0 && e1.n[VDEV_PRESSURE_LENT] == 0);
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:1", c));
    INVARIANTS_HOLD();
}

/* A holder of higher priority than the asker gives its empty regions too,
 * after those of lower priority, and never below its floor. */
static void test_higher_priority_holder(void)
{
    fresh_card("1x8GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:4GiB@critical,2GiB..6GiB,..@low", 1);
    CHECK_OK(vdev_init());
    struct events e1 = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure, &e1));
    void *p[4];
    for (int i = 0; i < 4; i++) /* 4 GiB on GPU:1: its floor and 2 GiB above it */
        CHECK_OK(vdev_mem_alloc("GPU:1", GIB, &p[i]));
    for (int i = 0; i < 4; i++)
        CHECK_OK(vdev_mem_free("GPU:1", p[i]));
    uint64_t r1 = reserved("GPU:1");
    CHECK(r1 > 2 * GIB);
    void *q;
    CHECK_OK(vdev_mem_alloc("GPU:2", 2 * GIB, &q)); /* GPU:2 (low) asks a normal device */
    CHECK(reserved("GPU:1") < r1);
    CHECK(e1.n[VDEV_PRESSURE_LENT] >= 1 && e1.bytes[VDEV_PRESSURE_LENT] == r1 - reserved("GPU:1"));
    /* GPU:1's floor is still its own: it gets its 2 GiB back at once. */
    void *f;
    CHECK_OK(vdev_mem_alloc("GPU:1", 2 * GIB, &f));
    CHECK_OK(vdev_mem_free("GPU:1", f));
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:2", q));
    INVARIANTS_HOLD();
}

/* The OOM's advice. (a) A holder whose memory above its floor is not live
 * but sits in regions that hold its live blocks: nothing could be released,
 * and freeing memory is not advised. (b) A holder over a lowered ceiling
 * with live memory: freeing memory, not lower ceilings; once freed, what it
 * held goes to the asker. */
static void test_advice(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:256MiB..,..", 1);
    CHECK_OK(vdev_init());
    void *p[5];
    for (int i = 0; i < 5; i++) /* regions of 64, 64, 128 (two blocks) and 256 MiB */
        CHECK_OK(vdev_mem_alloc("GPU:0", 64 * MIB, &p[i]));
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    CHECK_OK(vdev_mem_free("GPU:0", p[2])); /* a block live in each region: 256 MiB */
    void *q;
    CHECK_ERR(vdev_mem_alloc("GPU:1", 600 * MIB, &q), VDEV_ERR_OOM,
              "OOM when allocating 600.00 MiB (629145600 bytes) on /device:GPU:1: 0 B in use of "
              "1.00 GiB limit, largest free block 0 B; GPU:1 (normal) asked for 600.00 MiB and "
              "/physical_device:GPU:0 has 512.00 MiB left for it; GPU:0 (normal) holds 256.00 "
              "MiB above its floor, none of it live; none of it can be released (free, but in "
              "regions still in use); would help: a smaller batch");
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    INVARIANTS_HOLD();
    for (int i = 0; i < 5; i++)
        if (i != 2)
            CHECK_OK(vdev_mem_free("GPU:0", p[i]));
    /* All empty now: GPU:1 is 88 MiB short (512 MiB left), so the smallest
     * region that is enough goes, 128 MiB, of those wholly above GPU:0's
     * floor (256 MiB of 512 MiB), not the largest. */
    CHECK_OK(vdev_mem_alloc("GPU:1", 600 * MIB, &q));
    CHECK_EQ_U64(reserved("GPU:0"), 384 * MIB);
    CHECK_OK(vdev_mem_free("GPU:1", q));
    INVARIANTS_HOLD();

    fresh_card("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..", 1);
    CHECK_OK(vdev_init());
    void *big;
    CHECK_OK(vdev_mem_alloc("GPU:0", 600 * MIB, &big));
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 256 * MIB)); /* live: stays */
    CHECK_ERR(vdev_mem_alloc("GPU:1", 600 * MIB, &q), VDEV_ERR_OOM,
              "OOM when allocating 600.00 MiB (629145600 bytes) on /device:GPU:1: 0 B in use of "
              "1.00 GiB limit, largest free block 0 B; GPU:1 (normal) asked for 600.00 MiB and "
              "/physical_device:GPU:0 has 0 B left for it; GPU:0 (normal) holds 1.00 GiB above "
              "its floor, 600.00 MiB of it live; would help: freeing memory on those devices, a "
              "smaller batch");
    CHECK_OK(vdev_mem_free("GPU:0", big));
    CHECK_OK(vdev_mem_alloc("GPU:1", 600 * MIB, &q));
    CHECK_EQ_U64(reserved("GPU:0"), 0);
    CHECK_OK(vdev_mem_free("GPU:1", q));
    INVARIANTS_HOLD();
}

/* Preallocation: the probe's case. GPU:0's floor and ceiling go from 2 GiB
 * to none and 256 MiB while its preallocated region is empty: the region
 * goes back to the card (before, it stayed reserved, and GPU:1 ran out). */
static void test_prealloc_released(void)
{
    fresh_card("1x2560MiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:2GiB,..@low", 1);
    CHECK_OK(vdev_init());
    CHECK_EQ_U64(reserved("GPU:0"), 2 * GIB);
    void *u;
    CHECK_STATUS(vdev_mem_alloc("GPU:1", GIB, &u), VDEV_ERR_OOM);
    CHECK_MSG("GPU:1 (low) asked for 1.00 GiB and /physical_device:GPU:0 has 512.00 MiB left "
              "for it: the other devices' floors keep 2.00 GiB aside");
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 256 * MIB));
    CHECK_EQ_U64(reserved("GPU:0"), 0);
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK(l.floor_bytes == 0 && l.ceiling_bytes == 256 * MIB && l.card_claimed_bytes == 0);
    CHECK_OK(vdev_mem_alloc("GPU:1", GIB, &u));
    INVARIANTS_HOLD();
    /* GPU:0 grows on demand now, up to its ceiling, and gives back. */
    void *v;
    CHECK_OK(vdev_mem_alloc("GPU:0", 200 * MIB, &v));
    CHECK_OK(vdev_mem_free("GPU:0", v));
    uint64_t rel = 0;
    CHECK_OK(vdev_memory_release_cached("GPU:0", &rel));
    CHECK(rel > 0 && reserved("GPU:0") == 0);
    CHECK_OK(vdev_mem_free("GPU:1", u));
    INVARIANTS_HOLD();

    /* A plain limit lowered to another plain limit: the new floor is
     * preallocated in place of the old region, and stays. */
    fresh_card("1x2560MiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:2GiB,..@low", 1);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_memory_set_limits("GPU:0", 512 * MIB, 512 * MIB));
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    CHECK_OK(vdev_memory_release_cached("GPU:0", &rel));
    CHECK_EQ_U64(rel, 0);
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    CHECK_OK(vdev_mem_alloc("GPU:0", 512 * MIB, &v)); /* the whole of it, in one block */
    CHECK_OK(vdev_mem_alloc("GPU:1", 2 * GIB, &u));  /* the rest of the card */
    CHECK_OK(vdev_mem_free("GPU:0", v));
    CHECK_OK(vdev_mem_free("GPU:1", u));
    /* A floor raised back: kept aside by the card, reserved on demand. */
    CHECK_OK(vdev_memory_set_limits("GPU:0", GIB, GIB));
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.card_claimed_bytes, GIB);
    INVARIANTS_HOLD();
}

/* Preallocation, the region in use when the floor and ceiling go down: it
 * stays while its block is live (and the OOM does not advise lowering the
 * ceiling again), then goes back to the card when the free empties it (it is
 * above the ceiling), so another device finds the memory without lending. */
static void test_prealloc_in_use(void)
{
    fresh_card("1x2560MiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:2GiB,..@low", 1);
    CHECK_OK(vdev_init());
    struct events e0 = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure, &e0));
    void *a, *u;
    CHECK_OK(vdev_mem_alloc("GPU:0", 100 * MIB, &a));
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 256 * MIB));
    CHECK_EQ_U64(reserved("GPU:0"), 2 * GIB);
    CHECK(e0.n[VDEV_PRESSURE_CEILING] == 1 && e0.bytes[VDEV_PRESSURE_CEILING] == 1792 * MIB);
    CHECK_ERR(vdev_mem_alloc("GPU:1", GIB, &u), VDEV_ERR_OOM,
              "OOM when allocating 1.00 GiB (1073741824 bytes) on /device:GPU:1: 0 B in use of "
              "2.50 GiB limit, largest free block 0 B; GPU:1 (low) asked for 1.00 GiB and "
              "/physical_device:GPU:0 has 512.00 MiB left for it; GPU:0 (normal) holds 2.00 GiB "
              "above its floor, 100.00 MiB of it live; would help: freeing memory on those "
              "devices, a smaller batch");
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_EQ_U64(reserved("GPU:0"), 0); /* given back: above GPU:0's ceiling */
    CHECK_OK(vdev_mem_alloc("GPU:1", GIB, &u));
    CHECK(e0.n[VDEV_PRESSURE_LENT] == 0);
    CHECK_OK(vdev_mem_free("GPU:1", u));
    INVARIANTS_HOLD();
}

static struct vdev_memory_limits limits(const char *dev)
{
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits(dev, &l));
    return l;
}

/* Two devices whose needs take turns and together exceed the card lend to
 * each other at every turn: the counters show it (each lend once, the bytes
 * as LENT told them, one's borrowing the other's lending). A floor on one
 * stops it: what lies within a floor is never lent, and the other's request
 * fails without anything released or counted. */
static void test_turns_counted(void)
{
    fresh_card("1x2560MiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..", 1);
    CHECK_OK(vdev_init());
    struct events e[2] = {{{0}, {0}}, {{0}, {0}}};
    const char *dev[2] = {"GPU:0", "GPU:1"};
    for (int d = 0; d < 2; d++)
        CHECK_OK(vdev_memory_set_pressure_callback(dev[d], on_pressure, &e[d]));
    for (int turn = 0; turn < 6; turn++) { /* GPU:0, GPU:1, GPU:0, ... 1.5 GiB each */
        void *p;
        CHECK_OK(vdev_mem_alloc(dev[turn % 2], 1536 * MIB, &p));
        CHECK_OK(vdev_mem_free(dev[turn % 2], p));
        INVARIANTS_HOLD();
    }
    struct vdev_memory_limits l0 = limits("GPU:0"), l1 = limits("GPU:1");
    /* GPU:0 lent on turns 1, 3 and 5, GPU:1 on turns 2 and 4. */
    CHECK_EQ_U64(l0.n_lends, 3);
    CHECK_EQ_U64(l1.n_lends, 2);
    CHECK(e[0].n[VDEV_PRESSURE_LENT] == 3 && e[1].n[VDEV_PRESSURE_LENT] == 2);
    CHECK_EQ_U64(l0.lent_bytes, e[0].bytes[VDEV_PRESSURE_LENT]);
    CHECK_EQ_U64(l1.lent_bytes, e[1].bytes[VDEV_PRESSURE_LENT]);
    CHECK(l0.lent_bytes >= 3 * 1024 * MIB && l1.lent_bytes >= 2 * 1024 * MIB);
    CHECK_EQ_U64(l0.borrowed_bytes, l1.lent_bytes);
    CHECK_EQ_U64(l1.borrowed_bytes, l0.lent_bytes);
    /* The same counters as Prometheus counters. */
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0"));
    char *m = http_get(vdev_metrics_port(), "/metrics");
    char want[160];
    CHECK(m && strstr(m, "# TYPE vdev_memory_lends_total counter\n"));
    CHECK(m && strstr(m, "vdev_memory_lends_total{device=\"/device:GPU:0\",physical=\"0\","
                         "backend=\"sim\"} 3\n"));
    snprintf(want, sizeof want, "vdev_memory_lent_bytes_total{device=\"/device:GPU:1\","
             "physical=\"0\",backend=\"sim\"} %llu\n", (unsigned long long)l1.lent_bytes);
    CHECK(m && strstr(m, want));
    snprintf(want, sizeof want, "vdev_memory_borrowed_bytes_total{device=\"/device:GPU:0\","
             "physical=\"0\",backend=\"sim\"} %llu\n", (unsigned long long)l0.borrowed_bytes);
    CHECK(m && strstr(m, want));
    free(m);
    /* GPU:1 holds its 2 GiB region (empty: 1.5 GiB doubled to 2 GiB) after
     * the last turn; a floor keeps it. */
    CHECK_OK(vdev_memory_set_limits("GPU:1", 2048 * MIB, 0));
    void *p;
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 1536 * MIB, &p), VDEV_ERR_OOM);
    CHECK_MSG("has 512.00 MiB left for it: the other devices' floors keep 2.00 GiB aside");
    CHECK_EQ_U64(reserved("GPU:1"), 2048 * MIB);
    struct vdev_memory_limits m0 = limits("GPU:0"), m1 = limits("GPU:1");
    CHECK_EQ_U64(m1.n_lends, l1.n_lends);
    CHECK_EQ_U64(m1.lent_bytes, l1.lent_bytes);
    CHECK_EQ_U64(m0.borrowed_bytes, l0.borrowed_bytes);
    CHECK_OK(vdev_mem_alloc("GPU:0", 512 * MIB, &p)); /* what the card has left still goes */
    CHECK_OK(vdev_mem_free("GPU:0", p));
    INVARIANTS_HOLD();
}

/* A pressure callback (on the thread that allocates) frees an input of the
 * op whose output met the pressure: the op holds no reference to it, so it
 * must not return a result (it may have read whatever took the input's
 * slot) but fail, saying so. Stands for another thread's free racing an op. */
static vdev_tensor_t *to_free;

static void free_on_pressure(const char *device, enum vdev_pressure what, uint64_t bytes,
                             void *user)
{
    (void)device, (void)bytes, (void)user;
    if (what == VDEV_PRESSURE_CARD_FULL && to_free) {
        vdev_tensor_free(to_free);
        to_free = NULL;
    }
}

static void test_input_freed_during_op(void)
{
    fresh_card("1x2560MiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..", 1);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:1"));
    int64_t sa[2] = {8192, 1}, sb[2] = {1, 8192};
    vdev_tensor_t *a = vdev_tensor_fill(sa, 2, VDEV_F32, 1), *b = vdev_tensor_fill(sb, 2,
                                                                                 VDEV_F32, 2);
    void *p[2];
    for (int i = 0; i < 2; i++) /* GPU:0's growth takes the rest of the card */
        CHECK_OK(vdev_mem_alloc("GPU:0", i ? 1534 * MIB : GIB, &p[i])); /* GPU:1 has 2 MiB */
    for (int i = 0; i < 2; i++)
        CHECK_OK(vdev_mem_free("GPU:0", p[i]));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", free_on_pressure, NULL));
    to_free = a;
    vdev_clear_error();
    CHECK(vdev_add(a, b) == NULL); /* its 256 MiB output needs GPU:0's cache */
    CHECK(to_free == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_MSG("AddV2: input #0 was freed by another thread while the op used it");
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", NULL, NULL));
    vdev_tensor_free(b);
    CHECK_OK(vdev_device_pop());
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:1", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0); /* the output was dropped, a and b freed */
    INVARIANTS_HOLD();
}

/* A device that holds an empty region of its own, short of what the card
 * leaves it: its own region goes and the others lend the rest, together
 * (before, the request failed blaming fragmentation, though the card was
 * idle). Where the card truly has no room, the OOM is the card's. */
static void test_own_region_and_lending(void)
{
    fresh_card("1x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..2GiB", 1);
    CHECK_OK(vdev_init());
    struct events e0 = {0}, e1 = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure, &e0));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure, &e1));
    void *a, *b, *c;
    CHECK_OK(vdev_mem_alloc("GPU:1", GIB, &a));
    CHECK_OK(vdev_mem_free("GPU:1", a)); /* GPU:1 keeps an empty 1 GiB region */
    CHECK_OK(vdev_mem_alloc("GPU:0", 3 * GIB, &b));
    CHECK_OK(vdev_mem_free("GPU:0", b)); /* GPU:0 keeps the rest of the card, empty */
    CHECK_OK(vdev_mem_alloc("GPU:1", GIB + 100 * MIB, &c));
    CHECK_EQ_U64(reserved("GPU:1"), 2 * GIB); /* 2 MiB doubled to hold it: its ceiling */
    CHECK_EQ_U64(reserved("GPU:0"), 0);
    CHECK(e1.n[VDEV_PRESSURE_CARD_FULL] == 1 && e0.n[VDEV_PRESSURE_LENT] == 1);
    CHECK_EQ_U64(e0.bytes[VDEV_PRESSURE_LENT], 3 * GIB);
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:1", c));

    /* With priorities and floors, the asker's ceiling the card's budget. */
    fresh_card("1x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:512MiB..@critical,512MiB..@low", 1);
    CHECK_OK(vdev_init());
    memset(&e0, 0, sizeof e0);
    memset(&e1, 0, sizeof e1);
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure, &e0));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure, &e1));
    void *d, *f, *g;
    CHECK_OK(vdev_mem_alloc("GPU:0", 3 * GIB, &d));
    CHECK_OK(vdev_mem_free("GPU:0", d));
    CHECK_OK(vdev_mem_alloc("GPU:1", 2 * GIB, &f)); /* GPU:0 lends */
    CHECK_OK(vdev_mem_alloc("GPU:0", GIB, &g));
    CHECK_OK(vdev_mem_free("GPU:0", g)); /* GPU:0: an empty 1 GiB region */
    CHECK(e0.n[VDEV_PRESSURE_CARD_FULL] == 0 && e1.n[VDEV_PRESSURE_LENT] == 0);
    /* GPU:1's memory is live: the card has 1 GiB beside GPU:0's region. */
    CHECK_ERR(vdev_mem_alloc("GPU:0", 3 * GIB, &d), VDEV_ERR_OOM,
              "OOM when allocating 3.00 GiB (3221225472 bytes) on /device:GPU:0: 0 B in use of "
              "4.00 GiB limit, largest free block 1.00 GiB; GPU:0 (critical) asked for 3.00 GiB "
              "and /physical_device:GPU:0 has 2.00 GiB left for it; GPU:1 (low) holds 1.50 GiB "
              "above its floor, all of it live; would help: freeing memory or lower ceilings on "
              "those devices, a smaller batch");
    CHECK(e0.n[VDEV_PRESSURE_CARD_FULL] == 1 && e1.n[VDEV_PRESSURE_LENT] == 0);
    CHECK_EQ_U64(reserved("GPU:0"), GIB); /* nothing released for a request that failed */
    CHECK_OK(vdev_mem_free("GPU:1", f)); /* now cached: its region reaches into its floor */
    CHECK_OK(vdev_mem_alloc("GPU:0", 3 * GIB, &d));
    CHECK(e0.n[VDEV_PRESSURE_CARD_FULL] == 2 && e1.n[VDEV_PRESSURE_LENT] == 1);
    CHECK_EQ_U64(e1.bytes[VDEV_PRESSURE_LENT], GIB + 512 * MIB);
    /* 4 GiB asked (2 MiB doubled to hold 3 GiB), what the floor leaves */
    CHECK_EQ_U64(reserved("GPU:0"), 3 * GIB + 512 * MIB);
    CHECK_EQ_U64(reserved("GPU:1"), 0);
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:0", d));
}

/* Preallocation with a floor below the ceiling: one allocation of the whole
 * ceiling on a device whose preallocated region holds nothing replaces that
 * region (before, an OOM blamed fragmentation: the floor's region stayed
 * beside the rest); the floor stays kept aside by the card. A region in use
 * stays, and the limit is then what is short. */
static void test_prealloc_replaced(void)
{
    fresh_card("1x8GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB..4GiB,2GiB", 1);
    CHECK_OK(vdev_init());
    CHECK_EQ_U64(reserved("GPU:0"), GIB);
    void *a, *b;
    CHECK_OK(vdev_mem_alloc("GPU:0", 4 * GIB, &a));
    CHECK_EQ_U64(reserved("GPU:0"), 4 * GIB);
    CHECK_OK(vdev_mem_free("GPU:0", a));
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK(l.floor_bytes == GIB && l.card_floors_bytes == 3 * GIB);
    INVARIANTS_HOLD();

    fresh_card("1x8GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB..4GiB,2GiB", 1);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_mem_alloc("GPU:0", MIB, &b)); /* in the preallocated region */
    CHECK_ERR(vdev_mem_alloc("GPU:0", 4 * GIB - 512 * MIB, &a), VDEV_ERR_OOM,
              "OOM when allocating 3.50 GiB (3758096384 bytes) on /device:GPU:0: 1.00 MiB in use "
              "of 4.00 GiB limit, largest free block 1023.00 MiB; fragmentation: free 4.00 GiB "
              "in 2 blocks, largest 3.00 GiB; would help: a smaller batch, a larger limit");
    CHECK_OK(vdev_mem_free("GPU:0", b));
    CHECK_OK(vdev_mem_alloc("GPU:0", 4 * GIB - 512 * MIB, &a)); /* empty again: replaced */
    CHECK_OK(vdev_mem_free("GPU:0", a));
    INVARIANTS_HOLD();
}

/* The same when the card, not the ceiling, is short: GPU:1's empty 100 MiB
 * floor region and the 324 MiB the card has left make room for 400 MiB
 * (before, the region stayed and the OOM said 324 MiB were left, though
 * growth served the same request). The room is counted where the device's
 * room is said: available_bytes, and the OOM's "left for it". */
static void test_prealloc_replaced_card_short(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:300MiB..600MiB@critical,100MiB..800MiB@low", 1);
    CHECK_OK(vdev_init());
    void *a, *b;
    CHECK_OK(vdev_mem_alloc("GPU:0", 600 * MIB, &a));
    CHECK_EQ_U64(reserved("GPU:1"), 100 * MIB);
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l));
    CHECK_EQ_U64(l.available_bytes, 424 * MIB);
    CHECK_ERR(vdev_mem_alloc("GPU:1", 500 * MIB, &b), VDEV_ERR_OOM,
              "OOM when allocating 500.00 MiB (524288000 bytes) on /device:GPU:1: 0 B in use of "
              "800.00 MiB limit, largest free block 100.00 MiB; GPU:1 (low) asked for 500.00 MiB "
              "and /physical_device:GPU:0 has 424.00 MiB left for it; GPU:0 (critical) holds "
              "300.00 MiB above its floor, all of it live; would help: freeing memory on those "
              "devices, a smaller batch");
    CHECK_EQ_U64(reserved("GPU:1"), 100 * MIB); /* nothing released for a failed request */
    CHECK_OK(vdev_mem_alloc("GPU:1", 400 * MIB, &b));
    CHECK_EQ_U64(reserved("GPU:1"), 424 * MIB);
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l));
    CHECK(l.floor_bytes == 100 * MIB && l.available_bytes == 0);
    INVARIANTS_HOLD();
    CHECK_OK(vdev_mem_free("GPU:1", b));
    CHECK_OK(vdev_mem_free("GPU:0", a));
    INVARIANTS_HOLD();
}

/* The report's "of it live" counts the live bytes above the floor: with
 * preallocation, those outside the floor's region. GPU:0 holds 200 MiB in
 * its 300 MiB floor region and 200 MiB in a second 300 MiB region: 200 MiB
 * of the 300 MiB above its floor are live (before, in use less the floor:
 * 100 MiB). */
static void test_report_live_above_floor(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:300MiB..600MiB@critical,100MiB..800MiB@low", 1);
    CHECK_OK(vdev_init());
    void *a, *b, *c;
    CHECK_OK(vdev_mem_alloc("GPU:0", 200 * MIB, &a));
    CHECK_OK(vdev_mem_alloc("GPU:0", 200 * MIB, &b));
    CHECK_EQ_U64(reserved("GPU:0"), 600 * MIB);
    CHECK_ERR(vdev_mem_alloc("GPU:1", 500 * MIB, &c), VDEV_ERR_OOM,
              "OOM when allocating 500.00 MiB (524288000 bytes) on /device:GPU:1: 0 B in use of "
              "800.00 MiB limit, largest free block 100.00 MiB; GPU:1 (low) asked for 500.00 MiB "
              "and /physical_device:GPU:0 has 424.00 MiB left for it; GPU:0 (critical) holds "
              "300.00 MiB above its floor, 200.00 MiB of it live; would help: freeing memory on "
              "those devices, a smaller batch");
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:0", b));
    INVARIANTS_HOLD();
}

int main(void)
{
    test_own_region_and_lending();
    test_prealloc_replaced();
    test_prealloc_replaced_card_short();
    test_report_live_above_floor();
    test_turns_counted();
    test_input_freed_during_op();
    test_equal_priority();
    test_higher_priority_holder();
    test_advice();
    test_prealloc_released();
    test_prealloc_in_use();
    vdev_shutdown();
    return check_done();
}
