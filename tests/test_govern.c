/* test_govern.c — governance between the logical devices of one card:
 * floors, ceilings and priorities from VDEV_LOGICAL_DEVICES and from code
 * (every malformed form rejected with its exact message), floors kept aside
 * with growth and reserved with preallocation, lending of cached memory only,
 * the OOM that says whose memory is where, limits and priorities changed at
 * run time, pressure callbacks, the metrics and the profiler trace. After
 * every change the statistics must add up: each allocator's own check, its
 * card's pool check, and the card's claims as the public calls report them.
 *
 * Cards are simulated with TF_DEVICE_MIN_SYS_MEMORY_IN_MB=0, so a 1 GiB card
 * has a budget of exactly 1 GiB and the figures in messages are round. */
#define _GNU_SOURCE
#include "govern_check.h"
#include "http_client.h"

#include <stdlib.h>
#include <unistd.h>


/* ---- helpers ---- */

/* Everything adds up: every allocator's invariant walk (its reserved bytes
 * equal to what its pool counts), every pool's invariant, and per card the
 * sum of max(reserved, floor) over its devices, from the public calls,
 * equal to the claims get_limits reports and within the budget. */
static void stats_add_up(int line)
{
    int n = vdev_runtime_n_devices();
    for (int i = 0; i < n; i++) {
        struct vdev_ldev *d = vdev_runtime_device(i);
        if (vdev_alloc_check(d->alloc) != VDEV_OK || vdev_pool_check(d->pool) != VDEV_OK)
            check_fail(__FILE__, line, "%s: %s", d->name, vdev_last_error());
        else
            check_passed++;
    }
    for (int i = 0; i < n; i++) {
        struct vdev_ldev *d = vdev_runtime_device(i);
        uint64_t claimed = 0;
        for (int j = 0; j < n; j++) {
            struct vdev_ldev *o = vdev_runtime_device(j);
            if (o->pool != d->pool)
                continue;
            struct vdev_memory_info mi;
            struct vdev_memory_limits ml;
            vdev_memory_info(o->name, &mi);
            vdev_memory_get_limits(o->name, &ml);
            claimed += mi.bytes_reserved > ml.floor_bytes ? mi.bytes_reserved : ml.floor_bytes;
        }
        struct vdev_memory_limits l;
        vdev_memory_get_limits(d->name, &l);
        if (claimed != l.card_claimed_bytes || claimed > l.card_budget_bytes)
            check_fail(__FILE__, line, "%s: claims %llu, the pool says %llu, budget %llu", d->name,
                       (unsigned long long)claimed, (unsigned long long)l.card_claimed_bytes,
                       (unsigned long long)l.card_budget_bytes);
        else
            check_passed++;
    }
}
#define STATS_ADD_UP() stats_add_up(__LINE__)

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_in_use;
}

/* ---- VDEV_LOGICAL_DEVICES ---- */

static void test_env_malformed(void)
{
    static const struct {
        const char *value, *msg;
    } cases[] = {
        {"0:2GiB..1GiB",
         "VDEV_LOGICAL_DEVICES=\"0:2GiB..1GiB\": floor '2GiB' for GPU 0 is above its ceiling "
         "'1GiB'"},
        {"0:4GiB@urgent",
         "VDEV_LOGICAL_DEVICES=\"0:4GiB@urgent\": bad priority 'urgent' for GPU 0 (low, normal, "
         "high or critical)"},
        {"0:4GiB@",
         "VDEV_LOGICAL_DEVICES=\"0:4GiB@\": bad priority '' for GPU 0 (low, normal, high or "
         "critical)"},
        {"0:1GiB@high@low",
         "VDEV_LOGICAL_DEVICES=\"0:1GiB@high@low\": bad priority 'high@low' for GPU 0 (low, "
         "normal, high or critical)"},
        {"0:2GiB...6GiB",
         "VDEV_LOGICAL_DEVICES=\"0:2GiB...6GiB\": bad ceiling '.6GiB' for GPU 0 "
         "(FLOOR..CEILING, e.g. 2GiB..6GiB)"},
        {"0:x..4GiB",
         "VDEV_LOGICAL_DEVICES=\"0:x..4GiB\": bad floor 'x' for GPU 0 (a size such as 4GiB)"},
        {"0:1GiB..y",
         "VDEV_LOGICAL_DEVICES=\"0:1GiB..y\": bad ceiling 'y' for GPU 0 (a size such as 4GiB)"},
        {"0:4096..8GiB",
         "VDEV_LOGICAL_DEVICES=\"0:4096..8GiB\": floor '4096' for GPU 0 is 4096 bytes, less "
         "than 1 MiB (did you mean 4096MiB?)"},
        {"0:1GiB..2048",
         "VDEV_LOGICAL_DEVICES=\"0:1GiB..2048\": ceiling '2048' for GPU 0 is 2048 bytes, less "
         "than 1 MiB (did you mean 2048MiB?)"},
        {"0:1GiB..0",
         "VDEV_LOGICAL_DEVICES=\"0:1GiB..0\": ceiling '0' for GPU 0 is 0 bytes, less than 1 MiB "
         "(leave it out for the card's budget: FLOOR..)"},
        {"0:0.3..1GiB",
         "VDEV_LOGICAL_DEVICES=\"0:0.3..1GiB\": floor '0.3' for GPU 0 is not a whole number of "
         "bytes (a fraction needs a unit that makes it whole, e.g. 1.5GiB)"},
        {"0:@high",
         "VDEV_LOGICAL_DEVICES=\"0:@high\": bad limit '' for GPU 0 (a size such as 4GiB)"},
        {"0:1GiB,..@",
         "VDEV_LOGICAL_DEVICES=\"0:1GiB,..@\": bad priority '' for GPU 0 (low, normal, high or "
         "critical)"},
        {"0:1GiB @ hi gh",
         "VDEV_LOGICAL_DEVICES=\"0:1GiB @ hi gh\": bad priority 'hi gh' for GPU 0 (low, normal, "
         "high or critical)"},
        {"0: 2GiB .. 1GiB ",
         "VDEV_LOGICAL_DEVICES=\"0: 2GiB .. 1GiB \": floor '2GiB' for GPU 0 is above its "
         "ceiling '1GiB'"},
        {"0:2GiB.. .6GiB",
         "VDEV_LOGICAL_DEVICES=\"0:2GiB.. .6GiB\": bad ceiling '.6GiB' for GPU 0 "
         "(FLOOR..CEILING, e.g. 2GiB..6GiB)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fresh_card("1x16GiB");
        setenv("VDEV_LOGICAL_DEVICES", cases[i].value, 1);
        CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG, cases[i].msg);
        CHECK(!vdev_is_initialized());
    }
    /* Start-up: the floors must fit the budget, and so must each ceiling. */
    fresh_card("1x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:10GiB..12GiB,8GiB..", 1);
    CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG,
              "/physical_device:GPU:0: its 2 logical devices' floors sum to 18.00 GiB "
              "(19327352832 bytes), more than the card's budget of 16.00 GiB (17179869184 bytes: "
              "16.00 GiB free less the 0 B driver reserve)");
    fresh_card("1x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB..20GiB", 1);
    CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG,
              "/physical_device:GPU:0: logical device 0's ceiling is 20.00 GiB (21474836480 "
              "bytes), more than the card's budget of 16.00 GiB (17179869184 bytes: 16.00 GiB "
              "free less the 0 B driver reserve)");
    /* Plain limits keep their message. */
    fresh_card("1x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:10GiB,8GiB", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_MSG("its 2 logical devices' limits sum to 18.00 GiB");
}

static void check_env_forms(const char *value)
{
    fresh_card("1x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", value, 1);
    CHECK_OK(vdev_init());
    static const struct {
        const char *dev;
        uint64_t floor, ceiling;
        enum vdev_priority prio;
    } want[] = {
        {"GPU:0", 4 * GIB, 4 * GIB, VDEV_PRIORITY_CRITICAL},
        {"GPU:1", 2 * GIB, 6 * GIB, VDEV_PRIORITY_NORMAL},
        {"GPU:2", 0, 16 * GIB, VDEV_PRIORITY_LOW},
        {"GPU:3", 1 * GIB, 16 * GIB, VDEV_PRIORITY_NORMAL},
        {"GPU:4", 0, 3 * GIB, VDEV_PRIORITY_HIGH},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        struct vdev_memory_limits l;
        CHECK_OK(vdev_memory_get_limits(want[i].dev, &l));
        CHECK_EQ_U64(l.floor_bytes, want[i].floor);
        CHECK_EQ_U64(l.ceiling_bytes, want[i].ceiling);
        CHECK_EQ_U64(l.priority, want[i].prio);
        CHECK_EQ_U64(l.card_budget_bytes, 16 * GIB);
        CHECK_EQ_U64(l.card_floors_bytes, 7 * GIB);
        CHECK_EQ_U64(l.card_claimed_bytes, 7 * GIB); /* growth: floors kept aside, none reserved */
        struct vdev_memory_info mi;
        CHECK_OK(vdev_memory_info(want[i].dev, &mi));
        CHECK_EQ_U64(mi.bytes_limit, want[i].ceiling);
        CHECK_EQ_U64(mi.bytes_reserved, 0);
    }
    /* What is in force reads back resolved: ceilings of the budget, priorities. */
    struct vdev_logical_device_config got[8];
    int n = 0;
    CHECK_OK(vdev_config_get_logical_devices_ex("GPU:0", got, 8, &n));
    CHECK(n == 5);
    CHECK_EQ_U64(got[2].ceiling_bytes, 16 * GIB);
    CHECK_EQ_U64(got[2].priority, VDEV_PRIORITY_LOW);
    CHECK_EQ_U64(got[1].floor_bytes, 2 * GIB);
    uint64_t lim[8];
    CHECK_OK(vdev_config_get_logical_devices("GPU:0", lim, 8, &n));
    CHECK_EQ_U64(lim[1], 6 * GIB);
    STATS_ADD_UP();
}

static void test_env_forms(void)
{
    check_env_forms("0:4GiB@critical,2GiB..6GiB,..@LOW,1GiB..,..3GiB@high");
    /* the same with spaces around each part, its '..' and its '@' */
    check_env_forms(" 0 : 4GiB @ critical , 2GiB .. 6GiB, .. @LOW ,1GiB .. , ..3GiB@ high ");
}

/* ---- from code ---- */

static void test_code_api(void)
{
    fresh_card("1x16GiB");
    struct vdev_logical_device_config bad[2] = {{.floor_bytes = 3 * GIB, .ceiling_bytes = 2 * GIB},
                                                {.ceiling_bytes = GIB}};
    CHECK_ERR(vdev_config_set_logical_devices_ex("GPU:0", bad, 2), VDEV_ERR_INVALID_ARG,
              "logical device 0 of GPU:0 has a floor of 3.00 GiB above its ceiling of 2.00 GiB");
    bad[0] = (struct vdev_logical_device_config){.floor_bytes = 4096};
    CHECK_ERR(vdev_config_set_logical_devices_ex("GPU:0", bad, 2), VDEV_ERR_INVALID_ARG,
              "logical device 0 of GPU:0 has a floor of 4096 bytes, less than 1 MiB: floors are "
              "in bytes (did you mean 4096MiB, i.e. 4096ull << 20?)");
    bad[0] = (struct vdev_logical_device_config){.ceiling_bytes = 512};
    CHECK_ERR(vdev_config_set_logical_devices_ex("GPU:0", bad, 1), VDEV_ERR_INVALID_ARG,
              "logical device 0 of GPU:0 has a ceiling of 512 bytes, less than 1 MiB: ceilings "
              "are in bytes (did you mean 512MiB, i.e. 512ull << 20?)");
    bad[0] = (struct vdev_logical_device_config){.priority = VDEV_PRIORITY_COUNT};
    CHECK_ERR(vdev_config_set_logical_devices_ex("GPU:0", bad, 1), VDEV_ERR_INVALID_ARG,
              "logical device 0 of GPU:0 has priority 5 (low, normal, high or critical)");
    CHECK_ERR(vdev_config_set_logical_devices_ex("GPU:0", NULL, 1), VDEV_ERR_INVALID_ARG,
              "vdev_config_set_logical_devices_ex: bad arguments (devs NULL)");
    CHECK_ERR(vdev_config_set_logical_devices_ex("GPU:0", bad, -1), VDEV_ERR_INVALID_ARG,
              "vdev_config_set_logical_devices_ex: bad arguments (n < 0)");
    struct vdev_logical_device_config cpu[2] = {{.floor_bytes = GIB}, {0}};
    CHECK_ERR(vdev_config_set_logical_devices_ex("CPU:0", cpu, 2), VDEV_ERR_INVALID_ARG,
              "Setting memory limit on CPU virtual devices is currently not supported (logical "
              "device 0 of CPU:0 has a floor of 1073741824 and a ceiling of 0 bytes; pass "
              "zeros)");
    cpu[0] = (struct vdev_logical_device_config){.priority = VDEV_PRIORITY_HIGH};
    CHECK_ERR(vdev_config_set_logical_devices_ex("CPU:0", cpu, 2), VDEV_ERR_INVALID_ARG,
              "Setting experimental_priority on CPU virtual devices is currently not supported "
              "(logical device 0 of CPU:0; set it at run time with vdev_memory_set_priority)");
    /* Nothing was recorded by the failures. */
    int n = -1;
    CHECK_OK(vdev_config_get_logical_devices_ex("GPU:0", NULL, 0, &n));
    CHECK(n == 0);

    /* Code wins over the environment; a ceiling of 0 is the budget. */
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB", 1);
    struct vdev_logical_device_config devs[2] = {
        {.floor_bytes = 4 * GIB, .priority = VDEV_PRIORITY_CRITICAL},
        {.ceiling_bytes = 8 * GIB, .priority = VDEV_PRIORITY_LOW}};
    CHECK_OK(vdev_config_set_logical_devices_ex("GPU:0", devs, 2));
    struct vdev_logical_device_config got[2];
    CHECK_OK(vdev_config_get_logical_devices_ex("GPU:0", got, 2, &n));
    CHECK(n == 2 && got[0].ceiling_bytes == 0 && got[0].floor_bytes == 4 * GIB);
    CHECK_OK(vdev_init());
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK(l.floor_bytes == 4 * GIB && l.ceiling_bytes == 16 * GIB &&
          l.priority == VDEV_PRIORITY_CRITICAL);
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l));
    CHECK(l.floor_bytes == 0 && l.ceiling_bytes == 8 * GIB && l.priority == VDEV_PRIORITY_LOW);
    /* After start-up: the same split is a no-op (its ceiling of 0 is the
     * budget now in force), another one is refused. */
    CHECK_OK(vdev_config_set_logical_devices_ex("GPU:0", devs, 2));
    devs[1].ceiling_bytes = 4 * GIB;
    CHECK_ERR(vdev_config_set_logical_devices_ex("GPU:0", devs, 2), VDEV_ERR_ALREADY_INITIALIZED,
              "Virtual devices cannot be modified after being initialized");
    CHECK_OK(vdev_config_get_logical_devices_ex("GPU:0", got, 2, &n));
    CHECK_EQ_U64(got[0].ceiling_bytes, 16 * GIB);
    STATS_ADD_UP();

    /* A plain limit is a fixed share: its own floor. */
    fresh_card("1x16GiB");
    uint64_t limits[2] = {4 * GIB, 2 * GIB};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 2));
    CHECK_OK(vdev_config_get_logical_devices_ex("GPU:0", got, 2, &n));
    CHECK(got[1].floor_bytes == 2 * GIB && got[1].ceiling_bytes == 2 * GIB &&
          got[1].priority == VDEV_PRIORITY_NORMAL);
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l));
    CHECK(l.floor_bytes == 2 * GIB && l.ceiling_bytes == 2 * GIB);
    CHECK_EQ_U64(l.card_claimed_bytes, 6 * GIB);
    CHECK_STR(vdev_priority_name(VDEV_PRIORITY_CRITICAL), "critical");
    CHECK_STR(vdev_priority_name(VDEV_PRIORITY_DEFAULT), "normal");
    CHECK_STR(vdev_priority_name(VDEV_PRIORITY_COUNT), "?");
    STATS_ADD_UP();
}

/* ---- floors ---- */

/* With growth, a floor is reserved lazily but kept aside from the start. */
static void test_floor_kept_aside(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:256MiB..@critical,..", 1);
    CHECK_OK(vdev_init());
    void *b[16];
    int n = 0;
    while (n < 16 && vdev_mem_alloc("GPU:1", 64 * MIB, &b[n]) == VDEV_OK)
        n++;
    CHECK(n == 12); /* 768 MiB: the rest is GPU:0's floor */
    CHECK_EQ_U64(reserved("GPU:0"), 0);
    CHECK_ERR(vdev_mem_alloc("GPU:1", 64 * MIB, &b[15]), VDEV_ERR_OOM,
              "OOM when allocating 64.00 MiB (67108864 bytes) on /device:GPU:1: 768.00 MiB in "
              "use of 1.00 GiB limit, largest free block 0 B; GPU:1 (normal) asked for 64.00 MiB "
              "and /physical_device:GPU:0 has 0 B left for it: the other devices' floors keep "
              "256.00 MiB aside; would help: lower floors on the other devices, a smaller batch");
    STATS_ADD_UP();
    void *c;
    CHECK_OK(vdev_mem_alloc("GPU:0", 256 * MIB, &c)); /* the floor, whole */
    STATS_ADD_UP();
    CHECK_OK(vdev_mem_free("GPU:0", c));
    for (int i = 0; i < n; i++)
        CHECK_OK(vdev_mem_free("GPU:1", b[i]));
    STATS_ADD_UP();
}

/* Preallocation takes the floor at start-up; memory above it comes on demand
 * and goes back, the floor's region never does. */
static void test_floor_preallocated(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:256MiB..512MiB,..", 1);
    CHECK_OK(vdev_init());
    CHECK_EQ_U64(reserved("GPU:0"), 256 * MIB);
    CHECK_EQ_U64(reserved("GPU:1"), 0); /* no floor: nothing to take */
    STATS_ADD_UP();
    void *a, *b;
    CHECK_OK(vdev_mem_alloc("GPU:0", 256 * MIB, &a));
    CHECK_OK(vdev_mem_alloc("GPU:0", 128 * MIB, &b));
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
    STATS_ADD_UP();
    CHECK_OK(vdev_mem_free("GPU:0", b));
    CHECK_OK(vdev_mem_free("GPU:0", a));
    uint64_t rel = 0;
    CHECK_OK(vdev_memory_release_cached("GPU:0", &rel));
    CHECK_EQ_U64(rel, 256 * MIB);
    CHECK_EQ_U64(reserved("GPU:0"), 256 * MIB);
    STATS_ADD_UP();
}

/* ---- lending ---- */

/* As govern_check.h's events, but the bytes and the device of the last call. */
struct last_calls {
    int n[VDEV_PRESSURE_COUNT];
    uint64_t bytes[VDEV_PRESSURE_COUNT];
    char device[64];
};

static void on_pressure_last(const char *device, enum vdev_pressure what, uint64_t bytes,
                             void *user)
{
    struct last_calls *e = user;
    e->n[what]++;
    e->bytes[what] = bytes;
    snprintf(e->device, sizeof e->device, "%s", device);
}

static vdev_tensor_t *filled(const char *dev, int64_t elems, float v)
{
    vdev_device_push(dev);
    int64_t shape[1] = {elems};
    vdev_tensor_t *t = vdev_tensor_fill(shape, 1, VDEV_F32, v);
    vdev_device_pop();
    return t;
}

static int all_equal(const vdev_tensor_t *t, int64_t elems, float v)
{
    float *h = malloc((size_t)elems * sizeof *h);
    int ok = h && vdev_tensor_to_host(t, h, (size_t)elems * sizeof *h) == VDEV_OK;
    for (int64_t i = 0; ok && i < elems; i++)
        ok = h[i] == v;
    free(h);
    return ok;
}

static void test_lending(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..@critical,..@low", 1);
    CHECK_OK(vdev_init());
    struct last_calls ea = {0}, eb = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure_last, &ea));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure_last, &eb));
    /* GPU:1 (low) fills regions of 64, 64, 128 and 256 MiB with 64 MiB
     * tensors (BFC's schedule: the first holds the request, the second is
     * as large, then doubling), then keeps two of them live, in the first
     * region and in the 128 MiB one; the rest is cached. */
    const int64_t E = 16 * 1024 * 1024; /* 64 MiB of floats */
    vdev_tensor_t *t[8];
    for (int i = 0; i < 8; i++)
        CHECK((t[i] = filled("GPU:1", E, (float)i)) != NULL);
    CHECK_EQ_U64(reserved("GPU:1"), 512 * MIB);
    for (int i = 0; i < 8; i++)
        if (i != 0 && i != 3)
            vdev_tensor_free(t[i]);
    CHECK_EQ_U64(in_use("GPU:1"), 128 * MIB);
    STATS_ADD_UP();
    /* GPU:0 (critical) needs 800 MiB: the card has 512 MiB left; GPU:1's
     * empty regions go (256 MiB, the largest, then 64 MiB, the smallest
     * enough), its live ones stay. GPU:0's region is what the card leaves
     * it of the 1 GiB its schedule asks: 832 MiB. */
    void *a;
    CHECK_OK(vdev_mem_alloc("GPU:0", 800 * MIB, &a));
    CHECK_EQ_U64(reserved("GPU:1"), 192 * MIB);
    CHECK_EQ_U64(reserved("GPU:0"), 832 * MIB);
    CHECK_EQ_U64(in_use("GPU:1"), 128 * MIB);
    CHECK(all_equal(t[0], E, 0.0f) && all_equal(t[3], E, 3.0f));
    CHECK(ea.n[VDEV_PRESSURE_CARD_FULL] == 1 && ea.bytes[VDEV_PRESSURE_CARD_FULL] == 800 * MIB);
    CHECK(eb.n[VDEV_PRESSURE_LENT] == 1 && eb.bytes[VDEV_PRESSURE_LENT] == 320 * MIB);
    CHECK_STR(eb.device, "/device:GPU:1");
    STATS_ADD_UP();
    /* No more to lend: GPU:0's memory above its floor is live or in a
     * region with a live block; GPU:1's OOM says whose memory is where. */
    void *a2;
    CHECK_ERR(vdev_mem_alloc("GPU:1", 200 * MIB, &a2), VDEV_ERR_OOM,
              "OOM when allocating 200.00 MiB (209715200 bytes) on /device:GPU:1: 128.00 MiB in "
              "use of 1.00 GiB limit, largest free block 64.00 MiB; GPU:1 (low) asked for 200.00 "
              "MiB and /physical_device:GPU:0 has 0 B left for it; GPU:0 (critical) holds "
              "832.00 MiB above its floor, 800.00 MiB of it live; would help: freeing memory or "
              "lower ceilings on those devices, a smaller batch");
    CHECK(all_equal(t[0], E, 0.0f) && all_equal(t[3], E, 3.0f));
    STATS_ADD_UP();
    /* An empty region hurts nobody: before GPU:1 (low) fails, GPU:0
     * (critical) gives its cached region back too, and hears LENT. */
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_EQ_U64(reserved("GPU:0"), 832 * MIB);
    void *b;
    CHECK_OK(vdev_mem_alloc("GPU:1", 512 * MIB, &b));
    CHECK_EQ_U64(reserved("GPU:0"), 0);
    CHECK(ea.n[VDEV_PRESSURE_LENT] == 1 && ea.bytes[VDEV_PRESSURE_LENT] == 832 * MIB);
    CHECK(eb.n[VDEV_PRESSURE_CARD_FULL] == 2 && eb.bytes[VDEV_PRESSURE_CARD_FULL] == 512 * MIB);
    CHECK(all_equal(t[0], E, 0.0f) && all_equal(t[3], E, 3.0f));
    STATS_ADD_UP();
    CHECK_ERR(vdev_memory_set_priority("GPU:1", VDEV_PRIORITY_COUNT), VDEV_ERR_INVALID_ARG,
              "/device:GPU:1: priority 5 is not one of low, normal, high, critical");
    CHECK_OK(vdev_mem_free("GPU:1", b));
    vdev_tensor_free(t[0]);
    vdev_tensor_free(t[3]);
    STATS_ADD_UP();
}

/* A ceiling lowered below live memory: as that memory is freed, each
 * region it empties goes back to the card while the device holds more than
 * its ceiling, so a device of any priority finds the memory free (before,
 * it stayed cached until the device's next allocation, or another device
 * ran out and had it lent). A request the card refuses tells its device
 * CARD_FULL once, though it tries twice; one that the others' empty regions
 * cannot make room for releases none of them. A floor raise that live
 * memory blocks releases nobody's cache and tells nobody LENT: it changes
 * nothing. */
static void test_over_ceiling(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..@low,..@low", 1);
    CHECK_OK(vdev_init());
    struct last_calls e0 = {0}, e1 = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure_last, &e0));
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure_last, &e1));
    void *p[8];
    for (int i = 0; i < 8; i++) /* regions of 128, 128, 256 and 512 MiB */
        CHECK_OK(vdev_mem_alloc("GPU:0", 100 * MIB, &p[i]));
    CHECK_EQ_U64(reserved("GPU:0"), 1024 * MIB);
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 256 * MIB)); /* live: nothing to release yet */
    CHECK_OK(vdev_mem_free("GPU:0", p[0])); /* the first 128 MiB region empties and goes */
    CHECK_EQ_U64(reserved("GPU:0"), 896 * MIB);
    for (int i = 1; i < 8; i++)
        CHECK_OK(vdev_mem_free("GPU:0", p[i]));
    CHECK_EQ_U64(reserved("GPU:0"), 0);
    STATS_ADD_UP();
    void *q;
    CHECK_OK(vdev_mem_alloc("GPU:1", 512 * MIB, &q)); /* the card had it free */
    CHECK(e1.n[VDEV_PRESSURE_CARD_FULL] == 0 && e0.n[VDEV_PRESSURE_LENT] == 0);
    STATS_ADD_UP();
    /* GPU:0 no longer over (ceiling raised) holds 384 MiB (regions of 128
     * and 256 MiB): its empty regions would go before GPU:1 fails, but with
     * 8 MiB live in its 128 MiB region only 256 MiB are empty, and 400 MiB
     * cannot fit (128 MiB left): nothing is released, and the OOM says so. */
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 0));
    void *r, *x, *y, *z;
    CHECK_OK(vdev_mem_alloc("GPU:0", 100 * MIB, &x));
    CHECK_OK(vdev_mem_alloc("GPU:0", 200 * MIB, &y));
    CHECK_OK(vdev_mem_free("GPU:0", x));
    CHECK_OK(vdev_mem_free("GPU:0", y));
    CHECK_OK(vdev_mem_alloc("GPU:0", 8 * MIB, &z));
    CHECK_EQ_U64(reserved("GPU:0"), 384 * MIB);
    CHECK_ERR(vdev_mem_alloc("GPU:1", 400 * MIB, &r), VDEV_ERR_OOM,
              "OOM when allocating 400.00 MiB (419430400 bytes) on /device:GPU:1: 512.00 MiB in "
              "use of 1.00 GiB limit, largest free block 0 B; GPU:1 (low) asked for 400.00 MiB "
              "and /physical_device:GPU:0 has 128.00 MiB left for it; GPU:0 (low) holds 384.00 "
              "MiB above its floor, 8.00 MiB of it live; would help: freeing memory or lower "
              "ceilings on those devices, a smaller batch");
    CHECK(e1.n[VDEV_PRESSURE_CARD_FULL] == 1); /* once, not twice */
    CHECK(e0.n[VDEV_PRESSURE_LENT] == 0);
    CHECK_EQ_U64(reserved("GPU:0"), 384 * MIB);
    CHECK_OK(vdev_mem_free("GPU:0", z));
    /* A floor of 900 MiB for GPU:1's neighbour: GPU:1's 512 MiB are live, so
     * no cache release could make room: refused with nothing released. */
    void *c;
    CHECK_OK(vdev_mem_alloc("GPU:1", 16 * MIB, &c));
    CHECK_OK(vdev_mem_free("GPU:1", c));
    uint64_t r1 = reserved("GPU:1");
    CHECK_STATUS(vdev_memory_set_limits("GPU:0", 900 * MIB, 0), VDEV_ERR_OOM);
    CHECK_MSG("cannot raise the floor now");
    CHECK_EQ_U64(reserved("GPU:1"), r1);
    CHECK(e1.n[VDEV_PRESSURE_LENT] == 0);
    STATS_ADD_UP();
    CHECK_OK(vdev_mem_free("GPU:1", q));
}

/* ---- run-time limits ---- */

static void test_runtime_limits(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..", 1);
    CHECK_OK(vdev_init());
    struct last_calls e = {0};
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure_last, &e));
    void *p[4];
    for (int i = 0; i < 4; i++) /* regions of 64, 64 and 128 MiB (two blocks) */
        CHECK_OK(vdev_mem_alloc("GPU:1", 64 * MIB, &p[i]));
    CHECK_EQ_U64(reserved("GPU:1"), 256 * MIB);
    CHECK_OK(vdev_mem_free("GPU:1", p[1]));
    CHECK_OK(vdev_mem_free("GPU:1", p[2]));
    /* Lowered below what is reserved: the empty second 64 MiB region goes;
     * 64 + 128 MiB stay, 128 MiB live, and the ceiling is 128 MiB (128 MiB
     * under the peak in use of 256 MiB). */
    CHECK_OK(vdev_memory_set_limits("GPU:1", 0, 128 * MIB));
    CHECK_EQ_U64(reserved("GPU:1"), 192 * MIB);
    CHECK(e.n[VDEV_PRESSURE_CEILING] == 1 && e.bytes[VDEV_PRESSURE_CEILING] == 128 * MIB);
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l));
    CHECK(l.ceiling_bytes == 128 * MIB && l.ceiling_lowered == 1 && l.available_bytes == 0);
    STATS_ADD_UP();
    /* The free room in the 128 MiB region is not for the taking. */
    void *q;
    CHECK_ERR(vdev_mem_alloc("GPU:1", MIB, &q), VDEV_ERR_OOM,
              "OOM when allocating 1.00 MiB (1048576 bytes) on /device:GPU:1: 128.00 MiB in use "
              "of 128.00 MiB limit, largest free block 64.00 MiB; the limit is short by 1.00 "
              "MiB; would help: a larger limit, a smaller batch");
    /* A request larger than the ceiling itself: the ordinary message, as
     * freeing memory could not help. */
    CHECK_ERR(vdev_mem_alloc("GPU:1", 200 * MIB, &q), VDEV_ERR_OOM,
              "OOM when allocating 200.00 MiB (209715200 bytes) on /device:GPU:1: 128.00 MiB in "
              "use of 128.00 MiB limit, largest free block 64.00 MiB; the limit is short by "
              "200.00 MiB; would help: a larger limit, a smaller batch");
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:1", &mi));
    CHECK_EQ_U64(mi.n_failed_allocs, 2);
    /* Usage falls under it: the 128 MiB region empties and goes back with
     * that free; the next allocation succeeds in a new 64 MiB region (the
     * growth schedule restarts from the 64 MiB region still held, capped by
     * the ceiling). */
    CHECK_OK(vdev_mem_free("GPU:1", p[3]));
    CHECK_EQ_U64(reserved("GPU:1"), 64 * MIB);
    CHECK_OK(vdev_mem_alloc("GPU:1", MIB, &q));
    CHECK_EQ_U64(reserved("GPU:1"), 128 * MIB);
    STATS_ADD_UP();
    /* Raising takes effect at once. */
    CHECK_OK(vdev_memory_set_limits("GPU:1", 0, 512 * MIB));
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l));
    CHECK(l.ceiling_bytes == 512 * MIB && l.ceiling_lowered == 0);
    void *big;
    CHECK_OK(vdev_mem_alloc("GPU:1", 300 * MIB, &big));
    STATS_ADD_UP();

    /* Floors: a new floor needs the memory now. GPU:0 holds 300 MiB live,
     * in a 512 MiB region (GPU:1 holds the other 512 MiB). */
    void *z;
    CHECK_OK(vdev_mem_alloc("GPU:0", 300 * MIB, &z));
    CHECK_ERR(vdev_memory_set_limits("GPU:1", 800 * MIB, 0), VDEV_ERR_OOM,
              "cannot raise the floor now: GPU:1 (normal) asked for a floor of 800.00 MiB and "
              "/physical_device:GPU:0 has 0 B left for it; GPU:0 (normal) holds 512.00 MiB "
              "above its floor, 300.00 MiB of it live; would help: freeing memory or lower "
              "ceilings on those devices, a smaller batch");
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l)); /* nothing changed */
    CHECK(l.floor_bytes == 0 && l.ceiling_bytes == 512 * MIB);
    CHECK_OK(vdev_mem_free("GPU:0", z)); /* cached now: a floor takes it */
    CHECK_OK(vdev_memory_set_limits("GPU:1", 800 * MIB, 0));
    CHECK_EQ_U64(reserved("GPU:0"), 0);
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.available_bytes, 224 * MIB);
    STATS_ADD_UP();
    CHECK_ERR(vdev_memory_set_limits("GPU:0", 300 * MIB, 0), VDEV_ERR_CONFIG,
              "/physical_device:GPU:0: its logical devices' floors would sum to 1.07 GiB, more "
              "than its budget of 1.00 GiB");
    /* no ceiling given: a floor above the budget is the floors' error, not
     * one "above the ceiling" the caller never gave */
    CHECK_ERR(vdev_memory_set_limits("GPU:0", 2 * GIB, 0), VDEV_ERR_CONFIG,
              "/physical_device:GPU:0: its logical devices' floors would sum to 2.78 GiB, more "
              "than its budget of 1.00 GiB");
    CHECK_ERR(vdev_memory_set_limits("GPU:0", 200 * MIB, 100 * MIB), VDEV_ERR_INVALID_ARG,
              "/device:GPU:0: floor 200.00 MiB is above the ceiling 100.00 MiB");
    CHECK_ERR(vdev_memory_set_limits("GPU:0", 0, 2 * GIB), VDEV_ERR_CONFIG,
              "/device:GPU:0: ceiling 2.00 GiB is more than /physical_device:GPU:0's budget of "
              "1.00 GiB");
    CHECK_ERR(vdev_memory_set_limits("GPU:0", 4096, 0), VDEV_ERR_INVALID_ARG,
              "/device:GPU:0: a floor of 4096 bytes is less than 1 MiB: sizes are in bytes (did "
              "you mean 4096MiB, i.e. 4096ull << 20?)");
    CHECK_ERR(vdev_memory_set_limits("GPU:0", 0, 100), VDEV_ERR_INVALID_ARG,
              "/device:GPU:0: a ceiling of 100 bytes is less than 1 MiB: sizes are in bytes (did "
              "you mean 100MiB, i.e. 100ull << 20?)");
    CHECK_ERR(vdev_memory_set_limits("GPU:9", 0, 0), VDEV_ERR_NOT_FOUND,
              "No matching devices found for 'GPU:9': /job:localhost/replica:0/task:0/device:GPU:9 "
              "unknown device (there are 2 logical GPUs)");
    CHECK_ERR(vdev_memory_get_limits("GPU:0", NULL), VDEV_ERR_INVALID_ARG,
              "vdev_memory_get_limits: out is NULL");
    CHECK_STATUS(vdev_memory_get_limits("GPU", &l), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("Failed parsing device name: 'GPU'");
    CHECK_STATUS(vdev_memory_set_priority("GPU:5", VDEV_PRIORITY_LOW), VDEV_ERR_NOT_FOUND);
    CHECK_MSG("No matching devices found for 'GPU:5'");
    CHECK_STATUS(vdev_memory_set_pressure_callback("CPU:3", on_pressure_last, NULL),
                 VDEV_ERR_NOT_FOUND);
    CHECK_MSG("No matching devices found for 'CPU:3'");
    STATS_ADD_UP();
    CHECK_OK(vdev_mem_free("GPU:1", big));
    CHECK_OK(vdev_mem_free("GPU:1", q));
    /* A logical CPU takes limits too (the host's memory is its budget). */
    CHECK_OK(vdev_memory_set_limits("CPU:0", 0, 64 * MIB));
    CHECK_OK(vdev_memory_info("CPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_limit, 64 * MIB);
    STATS_ADD_UP();
}

/* ---- the pool and the allocator, below the runtime ---- */

static enum vdev_status fake_reserve(void *ctx, uint64_t bytes, void **base)
{
    uint64_t *next = ctx;
    *base = (void *)(uintptr_t)*next;
    *next += bytes + (1ull << 20);
    return VDEV_OK;
}

static void fake_release(void *ctx, void *base, uint64_t bytes)
{
    (void)ctx;
    (void)base;
    (void)bytes;
}

static void fake_sync(void *ctx) { (void)ctx; }

static void test_pool_internal(void)
{
    vdev_pool_t *p;
    int m[20];
    CHECK_OK(vdev_pool_new("/physical_device:GPU:9", 64 * MIB, &p));
    CHECK_ERR(vdev_pool_add(p, "/device:GPU:0", 32 * MIB, 16 * MIB, VDEV_PRIORITY_LOW, &m[0]),
              VDEV_ERR_CONFIG,
              "/physical_device:GPU:9: /device:GPU:0's floor 32.00 MiB and ceiling 16.00 MiB do "
              "not fit its budget of 64.00 MiB");
    CHECK_OK(vdev_pool_add(p, "/device:GPU:0", 40 * MIB, 64 * MIB, VDEV_PRIORITY_LOW, &m[0]));
    CHECK_ERR(vdev_pool_add(p, "/device:GPU:1", 30 * MIB, 64 * MIB, VDEV_PRIORITY_LOW, &m[1]),
              VDEV_ERR_CONFIG,
              "/physical_device:GPU:9: its logical devices' floors sum to 70.00 MiB, more than "
              "its budget of 64.00 MiB");
    for (int i = 1; i < 16; i++)
        CHECK_OK(vdev_pool_add(p, "/device:GPU:1", 0, 64 * MIB, VDEV_PRIORITY_DEFAULT, &m[i]));
    CHECK_ERR(vdev_pool_add(p, "/device:GPU:16", 0, 64 * MIB, VDEV_PRIORITY_LOW, &m[16]),
              VDEV_ERR_CONFIG, "/physical_device:GPU:9: more than 16 logical devices");
    /* Claims: member 1 may hold the budget less member 0's floor. */
    CHECK_EQ_U64(vdev_pool_max_reserved(p, m[1]), 24 * MIB);
    CHECK_EQ_U64(vdev_pool_claim(p, m[1], 32 * MIB, 8 * MIB), 24 * MIB);
    CHECK_EQ_U64(vdev_pool_claim(p, m[2], 2 * MIB, 1 * MIB), 0); /* nothing left */
    CHECK_EQ_U64(vdev_pool_claim(p, m[0], 40 * MIB, 40 * MIB), 40 * MIB); /* its floor */
    vdev_pool_unclaim(p, m[0], 40 * MIB);
    vdev_pool_unclaim(p, m[1], 24 * MIB);
    CHECK_OK(vdev_pool_check(p));
    /* A preallocating allocator claims its region first: with the pool's
     * room taken, creation fails and leaves the pool as it was. */
    uint64_t next = 1ull << 40;
    struct vdev_alloc_config cfg = {
        .name = "/device:GPU:2",
        .limit_bytes = 64 * MIB,
        .policy = VDEV_POLICY_PREALLOCATE,
        .source = {.reserve = fake_reserve, .release = fake_release, .sync = fake_sync,
                   .ctx = &next},
        .pool = p,
        .member = m[2],
        .prealloc_bytes = 32 * MIB,
    };
    vdev_alloc_t *a = NULL;
    CHECK_ERR(vdev_alloc_new(&cfg, &a), VDEV_ERR_OOM,
              "preallocating 32.00 MiB on /device:GPU:2: the card's pool has no room");
    CHECK(a == NULL);
    CHECK_EQ_U64(vdev_pool_reserved(p, m[2]), 0);
    cfg.prealloc_bytes = 16 * MIB;
    CHECK_OK(vdev_alloc_new(&cfg, &a));
    vdev_pool_attach(p, m[2], a);
    CHECK_EQ_U64(vdev_pool_reserved(p, m[2]), 16 * MIB);
    CHECK_OK(vdev_alloc_check(a));
    CHECK_OK(vdev_pool_check(p));
    vdev_alloc_destroy(a); /* gives its claim back and detaches */
    CHECK_EQ_U64(vdev_pool_reserved(p, m[2]), 0);
    CHECK_OK(vdev_pool_check(p));
    vdev_pool_destroy(p);
    vdev_pool_destroy(NULL);

    /* An allocator without a pool: its limit moves too. */
    cfg.pool = NULL;
    cfg.policy = VDEV_POLICY_GROW;
    CHECK_OK(vdev_alloc_new(&cfg, &a));
    struct vdev_block b[3];
    for (int i = 0; i < 3; i++) /* regions of 8, 16 and 32 MiB */
        CHECK_OK(vdev_alloc_malloc(a, 8 * MIB << i, &b[i]));
    vdev_alloc_free(a, b[2].handle);
    uint64_t rel = 0;
    CHECK_OK(vdev_alloc_set_limit(a, 16 * MIB, &rel));
    CHECK_EQ_U64(rel, 32 * MIB);
    CHECK_OK(vdev_alloc_check(a));
    struct vdev_block c;
    CHECK_STATUS(vdev_alloc_malloc(a, 256, &c), VDEV_ERR_OOM);
    CHECK_MSG("; the ceiling was lowered at run time: new allocations fail until usage fits "
              "under it (short by 8.00 MiB)");
    CHECK_ERR(vdev_alloc_set_limit(a, 100, NULL), VDEV_ERR_INVALID_ARG,
              "vdev_alloc_set_limit: a limit below 256 bytes");
    CHECK_ERR(vdev_alloc_set_limit(NULL, MIB, NULL), VDEV_ERR_INVALID_ARG,
              "vdev_alloc_set_limit: NULL allocator");
    vdev_alloc_free(a, b[1].handle);
    CHECK_OK(vdev_alloc_malloc(a, 256, &c)); /* usage fits: the 16 MiB region went back */
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_free(a, c.handle);
    vdev_alloc_free(a, b[0].handle);
    CHECK_OK(vdev_alloc_check(a));
    vdev_alloc_destroy(a);
}

/* ---- the trace and the metrics ---- */

static void test_trace_and_metrics(void)
{
    char path[] = "/tmp/vdev_test_govern_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    fresh_card("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:128MiB..@high,..", 1);
    setenv("VDEV_TRACE_FILE", path, 1);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_memory_set_limits("GPU:1", 64 * MIB, 256 * MIB));
    CHECK_OK(vdev_memory_set_priority("GPU:1", VDEV_PRIORITY_LOW));
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0"));
    char *m = http_get(vdev_metrics_port(), "/metrics");
    CHECK(m && strstr(m, "vdev_memory_floor_bytes{device=\"/device:GPU:0\",physical=\"0\","
                         "backend=\"sim\"} 134217728\n"));
    CHECK(m && strstr(m, "vdev_memory_ceiling_bytes{device=\"/device:GPU:1\",physical=\"0\","
                         "backend=\"sim\"} 268435456\n"));
    CHECK(m && strstr(m, "vdev_memory_floor_bytes{device=\"/device:GPU:1\",physical=\"0\","
                         "backend=\"sim\"} 67108864\n"));
    CHECK(m && strstr(m, "vdev_memory_priority{device=\"/device:GPU:0\",physical=\"0\","
                         "backend=\"sim\"} 3\n"));
    CHECK(m && strstr(m, "vdev_memory_card_budget_bytes{device=\"/device:GPU:1\",physical=\"0\","
                         "backend=\"sim\"} 1073741824\n"));
    free(m);
    vdev_shutdown();
    char *t = check_slurp(path);
    CHECK(t && strstr(t, "\"name\":\"limits\",\"cat\":\"govern\",\"ph\":\"i\""));
    CHECK(t && strstr(t, "\"args\":{\"change\":\"limits\",\"floor\":67108864,\"ceiling\":268435456,"
                         "\"priority\":\"normal\"}}"));
    CHECK(t && strstr(t, "\"args\":{\"change\":\"priority\",\"floor\":67108864,\"ceiling\":"
                         "268435456,\"priority\":\"low\"}}"));
    CHECK(t && strstr(t, "{\"name\":\"limits /device:GPU:1\",\"ph\":\"C\""));
    free(t);
    unlink(path);
}

int main(void)
{
    test_env_malformed();
    test_env_forms();
    test_code_api();
    test_floor_kept_aside();
    test_floor_preallocated();
    test_lending();
    test_over_ceiling();
    test_runtime_limits();
    test_trace_and_metrics();
    test_pool_internal();
    vdev_shutdown();
    return check_done();
}
