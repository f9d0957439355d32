/* test_config.c — sizes, the configuration calls and their rules, and start-up
 * budgets, with the exact status and message of each failure (the
 * environment variables are in test_config_env.c). Runs on simulated GPUs
 * (compute capability 8.0: a 1536 MiB driver reserve, 225 MiB under 2 GiB
 * free). */
#define _GNU_SOURCE
#include "config_want.h"

#include <math.h>
#include <unistd.h>

static const char *const ALREADY = "Physical devices cannot be modified after being initialized";

/* ---- 1. sizes ---- */

static void test_parse_bytes(void)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } ok[] = {
        {"0", 0},
        {"1024", 1024},
        {"512B", 512},
        {"4KiB", 4 * KiB},
        {"4MiB", 4 * MiB},
        {"4GiB", 4 * GiB},
        {"2TiB", 2ull << 40},
        {"3KB", 3000},
        {"3MB", 3000000},
        {"3GB", 3000000000ull},
        {"2TB", 2000000000000ull},
        {"4K", 4 * KiB},
        {"4M", 4 * MiB},
        {"4G", 4 * GiB},
        {"1T", 1ull << 40},
        {"1.5GiB", 3 * GiB / 2},
        {"0.5KiB", 512},
        {"0.25MiB", 256 * KiB},
        {"512 MiB", 512 * MiB},
        {"  7", 7},
        {"4GiB ", 4 * GiB}, /* spaces around the number and the unit, as before it */
        {" 16 GiB  ", 16 * GiB},
        {"4gib", 4 * GiB},
        {"4g", 4 * GiB},
        {"2kb", 2000},
        {"0.1KiB", 102}, /* a fraction of a byte is rounded down */
        {"0001.50MiB", 3 * MiB / 2},
        {"16777215TiB", 16777215ull << 40},
        {"18446744073709551615", UINT64_MAX},
        {"18446744073709551615B", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 1;
        CHECK_OK(vdev_parse_bytes(ok[i].text, &v));
        if (v != ok[i].bytes)
            check_fail(__FILE__, __LINE__, "'%s' parsed as %llu, expected %llu", ok[i].text,
                       (unsigned long long)v, (unsigned long long)ok[i].bytes);
        else
            check_passed++;
    }
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"", "'' is not a size (expected e.g. 4GiB, 512MiB, 3GB)"},
        {"abc", "'abc' is not a size"},
        {"GiB", "'GiB' is not a size"},
        {"-1", "'-1' is not a size"},
        {"-1GiB", "'-1GiB' is not a size"},
        {".5GiB", "'.5GiB' is not a size"},
        {"0x10", "'0x10' is not a size"},
        {"0x10MiB", "'0x10MiB' is not a size"},
        {"1e400", "'1e400' is not a size: no exponents (a whole number or a decimal, then a "
                  "unit: e.g. 4GiB, 1.5GiB, 1000MiB)"},
        {"1e3MiB", "'1e3MiB' is not a size: no exponents"},
        {"2E+3", "'2E+3' is not a size: no exponents"},
        {"1.5e-3GiB", "'1.5e-3GiB' is not a size: no exponents"},
        {"4.GiB", "'4.GiB' is not a size (expected e.g. 4GiB, 512MiB, 3GB)"},
        {"1.5.5GiB", "'1.5.5GiB' is not a size (expected"},
        {"4,5GiB", "'4,5GiB' is not a size (expected"},
        {"4XiB", "'4XiB' has an unknown unit 'XiB' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB, "
                 "K, M, G or T, in any case but 'b')"},
        {"4b", "'4b' has an unknown unit 'b'"},
        {"4e", "'4e' has an unknown unit 'e'"},
        {"4 GiB extra ", "'4 GiB extra ' has an unknown unit 'GiB extra'"},
        {"4EiB", "has an unknown unit 'EiB'"},
        {"18446744073709551616", "'18446744073709551616' is too large"},
        {"17179869184GiB", "'17179869184GiB' is too large"},
        {"16777216TiB", "'16777216TiB' is too large"},
        {"16777216.5TiB", "'16777216.5TiB' is too large"},
        {"99999999999999999999999", "is too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 12345;
        EXPECT_ERR(vdev_parse_bytes(bad[i].text, &v), VDEV_ERR_PARSE, bad[i].msg);
        CHECK_EQ_U64(v, 12345);
    }
    uint64_t v;
    EXPECT_ERR(vdev_parse_bytes(NULL, &v), VDEV_ERR_INVALID_ARG, "NULL");
    EXPECT_ERR(vdev_parse_bytes("1", NULL), VDEV_ERR_INVALID_ARG, "NULL");
    CHECK_STR(vdev_status_str(VDEV_ERR_PARSE), "VDEV_ERR_PARSE");
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    vdev_clear_error();
    CHECK_STR(vdev_last_error(), "");
    CHECK(vdev_last_status() == VDEV_OK);
}

static void test_format_bytes(void)
{
    char b[32];
    CHECK_STR(vdev_format_bytes(0, b, sizeof b), "0 B");
    CHECK_STR(vdev_format_bytes(512, b, sizeof b), "512 B");
    CHECK_STR(vdev_format_bytes(1023, b, sizeof b), "1023 B");
    CHECK_STR(vdev_format_bytes(1024, b, sizeof b), "1.00 KiB");
    CHECK_STR(vdev_format_bytes(1536, b, sizeof b), "1.50 KiB");
    CHECK_STR(vdev_format_bytes(4 * GiB, b, sizeof b), "4.00 GiB");
    CHECK_STR(vdev_format_bytes(RESERVE, b, sizeof b), "1.50 GiB");
    CHECK_STR(vdev_format_bytes(225 * MiB, b, sizeof b), "225.00 MiB");
    CHECK_STR(vdev_format_bytes(3ull << 40, b, sizeof b), "3.00 TiB");
    CHECK_STR(vdev_format_bytes(UINT64_MAX, b, sizeof b), "16.00 EiB");
    char small[4];
    CHECK(vdev_format_bytes(4 * GiB, small, sizeof small) == small);
    CHECK_STR(small, "4.0");
    CHECK(vdev_format_bytes(1, NULL, 0) == NULL);
    /* What it prints, parse reads back. */
    uint64_t v = 0;
    CHECK_OK(vdev_parse_bytes("4.00 GiB", &v));
    CHECK_EQ_U64(v, 4 * GiB);
}

/* ---- 4. configuration rules ---- */

static void test_unknown_and_cpu(void)
{
    check_fresh("3x16GiB");
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:3", true), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: GPU:3 (there are 3 GPUs)");
    EXPECT_ERR(vdev_config_set_memory_growth("/physical_device:GPU:7", true), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: /physical_device:GPU:7");
    EXPECT_ERR(vdev_config_set_memory_growth("banana", true), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: banana");
    EXPECT_ERR(vdev_config_set_memory_growth("CPU:1", true), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: CPU:1");
    EXPECT_ERR(vdev_config_set_memory_growth(NULL, true), VDEV_ERR_INVALID_ARG,
               "physical device name is NULL");
    EXPECT_ERR(vdev_config_set_memory_growth("/physical_device:CPU:0", true),
               VDEV_ERR_INVALID_ARG,
               "Cannot set memory growth on non-GPU and non-Pluggable devices");
    EXPECT_ERR(vdev_config_set_memory_growth("cpu:0", false), VDEV_ERR_INVALID_ARG,
               "Cannot set memory growth on non-GPU and non-Pluggable devices");
    int g = 5;
    EXPECT_ERR(vdev_config_get_memory_growth("CPU:0", &g), VDEV_ERR_INVALID_ARG,
               "non-GPU");
    EXPECT_ERR(vdev_config_get_memory_growth("GPU:0", NULL), VDEV_ERR_INVALID_ARG, "NULL");
    EXPECT_ERR(vdev_config_get_memory_growth("GPU:9", &g), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: GPU:9");
    CHECK(g == 5);
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:3", (const uint64_t[]){GiB}, 1),
               VDEV_ERR_NOT_FOUND, "Unrecognized device: GPU:3");
    EXPECT_ERR(vdev_config_set_logical_devices("CPU:0", (const uint64_t[]){GiB}, 1),
               VDEV_ERR_INVALID_ARG,
               "Setting memory limit on CPU virtual devices is currently not supported");
    EXPECT_ERR(vdev_config_set_memory_fraction("GPU:3", 0.5), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: GPU:3");
    EXPECT_ERR(vdev_config_set_memory_fraction("CPU:0", 0.5), VDEV_ERR_INVALID_ARG,
               "Cannot set a memory fraction on non-GPU devices");
    /* Nothing above changed anything, nor started the runtime. */
    CHECK(!vdev_is_initialized());
    EXPECT_GPUS({0, 16 * GiB - RESERVE, GROW}, {1, 16 * GiB - RESERVE, GROW},
                {2, 16 * GiB - RESERVE, GROW});
}

static void test_growth_get_set(void)
{
    check_fresh("2x16GiB");
    int g = 7;
    CHECK_OK(vdev_config_get_memory_growth("GPU:0", &g));
    CHECK(g == -1);
    CHECK_OK(vdev_config_set_memory_growth("/physical_device:GPU:0", false));
    CHECK_OK(vdev_config_get_memory_growth("gpu:0", &g));
    CHECK(g == 0);
    CHECK_OK(vdev_config_set_memory_growth("/gpu:0", true));
    CHECK_OK(vdev_config_get_memory_growth("GPU:0", &g));
    CHECK(g == 1);
    CHECK_OK(vdev_config_get_memory_growth("GPU:1", &g));
    CHECK(g == -1);
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", false));
    EXPECT_GPUS({0, 16 * GiB - RESERVE, GROW}, {1, 16 * GiB - RESERVE, PRE});
    /* The preallocated card's memory is gone from the physical device. */
    CHECK_EQ_U64(phys_free(0), 16 * GiB);
    CHECK_EQ_U64(phys_free(1), RESERVE);
}

/* Growth on GPU 0, fixed logical devices on GPU 1 (TensorFlow refuses). */
static void test_mixed_mode(void)
{
    check_fresh("2x16GiB");
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", true));
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", false));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){4 * GiB, 2 * GiB}, 2));
    CHECK_OK(vdev_init());
    EXPECT_GPUS({0, 16 * GiB - RESERVE, GROW}, {1, 4 * GiB, PRE}, {1, 2 * GiB, PRE});
    CHECK_EQ_U64(phys_free(1), 10 * GiB);
    CHECK_EQ_U64(phys_free(0), 16 * GiB);

    /* Growth only on GPU 0, GPU 1 left at its default: fine too. */
    check_fresh("2x16GiB");
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    EXPECT_GPUS({0, 16 * GiB - RESERVE, PRE}, {1, 16 * GiB - RESERVE, GROW});
}

/* Growth and logical devices on one GPU: devices that grow within limits. */
static void test_growth_with_logical(void)
{
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", true));
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){3 * GiB, GiB}, 2));
    EXPECT_GPUS({0, 3 * GiB, GROW}, {0, GiB, GROW});
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 3 * GiB, &a));
    EXPECT_ERR(vdev_mem_alloc("GPU:0", 256, &b), VDEV_ERR_OOM,
               "OOM when allocating 256 B (256 bytes) on /device:GPU:0: 3.00 GiB in use of "
               "3.00 GiB limit, largest free block 0 B");
    CHECK(b == NULL);
    CHECK_OK(vdev_mem_alloc("GPU:1", GiB, &c));
    EXPECT_ERR(vdev_mem_alloc("GPU:1", 1, &b), VDEV_ERR_OOM, "on /device:GPU:1");
    CHECK_EQ_U64(phys_free(0), 12 * GiB);
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:1", c));
    CHECK_OK(vdev_memory_release_cached("GPU:0", NULL));
    CHECK_OK(vdev_memory_release_cached("GPU:1", NULL));
    CHECK_EQ_U64(phys_free(0), 16 * GiB);

    /* Growth set after the split, and growth off: both preallocate. */
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){3 * GiB, GiB}, 2));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    EXPECT_GPUS({0, 3 * GiB, PRE}, {0, GiB, PRE});
    CHECK_EQ_U64(phys_free(0), 12 * GiB);
}

static void test_numbering(void)
{
    check_fresh("2x16GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){4 * GiB, 2 * GiB}, 2));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){3 * GiB}, 1));
    EXPECT_GPUS({0, 4 * GiB, GROW}, {0, 2 * GiB, GROW}, {1, 3 * GiB, GROW});
    char name[64];
    CHECK_OK(vdev_device_canonical_name("gpu:2", name, sizeof name));
    CHECK_STR(name, "/device:GPU:2");
    EXPECT_ERR(vdev_device_canonical_name("GPU:3", name, sizeof name), VDEV_ERR_NOT_FOUND,
               "/job:localhost/replica:0/task:0/device:GPU:3 unknown device (there are 3 "
               "logical GPUs)");

    /* A split in the middle shifts the numbers after it. */
    check_fresh("3x16GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){GiB, GiB, GiB}, 3));
    EXPECT_GPUS({0, 16 * GiB - RESERVE, GROW}, {1, GiB, GROW}, {1, GiB, GROW}, {1, GiB, GROW},
                {2, 16 * GiB - RESERVE, GROW});

    /* n == 0 removes a split; limits are rounded down to 256 bytes. */
    check_fresh("2x16GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){GiB}, 1));
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", NULL, 0));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1",
                                             (const uint64_t[]){GiB + 300, MiB + 1000}, 2));
    EXPECT_GPUS({0, 16 * GiB - RESERVE, GROW}, {1, GiB + 256, GROW}, {1, MiB + 768, GROW});

    /* Visible GPUs from code: numbered in physical order whatever the order
     * of the list, as tf.config.set_visible_devices (test_tfnames.c). */
    check_fresh("3x16GiB");
    CHECK_OK(vdev_config_set_visible_devices((const int[]){2, 0}, 2));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){GiB}, 1)); /* hidden */
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){GiB, 2 * GiB}, 2));
    EXPECT_GPUS({0, GiB, GROW}, {0, 2 * GiB, GROW}, {2, 16 * GiB - RESERVE, GROW});

    /* At most 128 logical GPUs in all. */
    check_fresh("9x1GiB");
    uint64_t lim[16];
    for (int i = 0; i < 16; i++)
        lim[i] = MiB;
    for (int g = 0; g < 9; g++) {
        char dev[16];
        snprintf(dev, sizeof dev, "GPU:%d", g);
        CHECK_OK(vdev_config_set_logical_devices(dev, lim, 16));
    }
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "/physical_device:GPU:8: more than 128 logical GPUs in all");
    CHECK(!vdev_is_initialized());
    CHECK_OK(vdev_config_set_visible_devices((const int[]){0, 1, 2, 3, 4, 5, 6, 7}, 8));
    CHECK_OK(vdev_init());
    int n = 0;
    struct vdev_logical_device ld[130];
    CHECK_OK(vdev_list_logical_devices(ld, 130, &n));
    CHECK(n == 1 + 128);
    CHECK_STR(ld[128].name, "/device:GPU:127");
    CHECK(ld[128].physical_index == 7);
}

static void test_logical_errors(void)
{
    check_fresh("1x8GiB");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){GiB, 0}, 2),
               VDEV_ERR_INVALID_ARG,
               "logical device 1 of GPU:0 has a memory limit of 0 bytes: a limit is at least "
               "1 MiB");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){255}, 1),
               VDEV_ERR_INVALID_ARG, "has a limit of 255 bytes");
    uint64_t lim[17];
    for (int i = 0; i < 17; i++)
        lim[i] = MiB;
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", lim, 17), VDEV_ERR_INVALID_ARG,
               "17 logical devices requested on GPU:0; at most 16 per GPU");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", NULL, 1), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", lim, -1), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", lim, 16));
    EXPECT_GPUS({0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW},
                {0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW},
                {0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW}, {0, MiB, GROW},
                {0, MiB, GROW});
}

/* Limits beyond the card's budget fail at start-up, and can be fixed. */
static void test_budget_exceeded(void)
{
    check_fresh("2x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){4 * GiB, 3 * GiB}, 2));
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "/physical_device:GPU:1: its 2 logical devices' limits sum to 7.00 GiB "
               "(7516192768 bytes), more than the card's budget of 6.50 GiB (6979321856 bytes: "
               "8.00 GiB free less the 1.50 GiB driver reserve)");
    CHECK(!vdev_is_initialized());
    CHECK(!vdev_config_frozen());
    /* Same answer from an implicit start-up. */
    int n = -1;
    EXPECT_ERR(vdev_list_logical_devices(NULL, 0, &n), VDEV_ERR_CONFIG, "sum to 7.00 GiB");
    CHECK(n == -1);
    char name[64];
    EXPECT_ERR(vdev_device_canonical_name("GPU:0", name, sizeof name), VDEV_ERR_CONFIG,
               "sum to 7.00 GiB");
    /* Nothing was reserved on the way. */
    CHECK_EQ_U64(phys_free(0), 8 * GiB);
    CHECK_EQ_U64(phys_free(1), 8 * GiB);
    /* Still configurable: fix it and start. The exact budget fits. */
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", false));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1",
                                             (const uint64_t[]){4 * GiB, 5 * GiB / 2}, 2));
    CHECK_OK(vdev_init());
    EXPECT_GPUS({0, 8 * GiB - RESERVE, GROW}, {1, 4 * GiB, PRE}, {1, 5 * GiB / 2, PRE});
    CHECK_EQ_U64(phys_free(1), RESERVE);

    /* One byte-block over. */
    check_fresh("1x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0",
                                             (const uint64_t[]){4 * GiB, 5 * GiB / 2 + 256}, 2));
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG, "(6979322112 bytes), more than the card's budget "
                                             "of 6.50 GiB (6979321856 bytes");
    /* the two read the same rounded: the message says by how much */
    CHECK_MSG("1.50 GiB driver reserve), over it by 256 B");
    /* Limits whose sum overflows 64 bits. */
    CHECK_OK(vdev_config_set_logical_devices(
        "GPU:0", (const uint64_t[]){UINT64_MAX - 255, UINT64_MAX - 255, GiB}, 3));
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG, "/physical_device:GPU:0: its 3 logical devices' "
                                             "limits sum to more than 16.00 EiB (2^64 - 1 "
                                             "bytes), more than the card's budget");
    CHECK(!vdev_is_initialized());
}

/* Budget = free - MinSystemMemory, as TensorFlow computes it for cc 8.0. */
static void test_budget_reserve(void)
{
    static const struct {
        const char *sim;
        uint64_t limit;
    } cases[] = {
        {"1x16GiB", 16 * GiB - RESERVE},
        {"1x80GiB", 80 * GiB - RESERVE},
        {"1x4GiB", 4 * GiB - RESERVE},
        {"1x2GiB", 2 * GiB - RESERVE},           /* 2 GiB free is not "under 2 GiB" */
        {"1x2047MiB", 2047 * MiB - 225 * MiB},   /* under 2 GiB: 225 MiB */
        {"1x1GiB", GiB - 225 * MiB},
        {"1x226MiB", MiB},
        {"1x225MiB", 225 * MiB},                 /* reserve >= free: the whole card */
        {"1x1MiB", MiB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_fresh(cases[i].sim);
        CHECK_EQ_U64(limit_of("GPU:0"), cases[i].limit);
        struct vdev_logical_device ld[2];
        int n = 0;
        CHECK_OK(vdev_list_logical_devices(ld, 2, &n));
        CHECK(n == 2 && ld[1].limit_bytes == cases[i].limit);
    }

    /* The budget is of free memory: memory already taken does not count. */
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_discover());
    struct vdev_backend *b = vdev_config_gpu_backend();
    void *p = NULL;
    CHECK_OK(b->ops->reserve(b->ctx, 0, 4 * GiB, &p));
    CHECK_EQ_U64(limit_of("GPU:0"), 12 * GiB - RESERVE);
    b->ops->release(b->ctx, 0, p, 4 * GiB);

    /* TF_DEVICE_MIN_SYS_MEMORY_IN_MB replaces the reserve. */
    check_fresh("1x16GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "100", 1);
    CHECK_EQ_U64(limit_of("GPU:0"), 16 * GiB - 100 * MiB);
    check_fresh("1x16GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "0", 1);
    CHECK_EQ_U64(limit_of("GPU:0"), 16 * GiB);
    check_fresh("1x1GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "1023", 1);
    CHECK_EQ_U64(limit_of("GPU:0"), MiB);
    /* ... and overrides a fraction, as in TensorFlow. */
    check_fresh("1x16GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "2048", 1);
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 0.5));
    CHECK_EQ_U64(limit_of("GPU:0"), 14 * GiB);
    /* A reserve that leaves nothing cannot be honoured. */
    check_fresh("2x16GiB,1x1GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "1024", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"1024\" reserves 1.00 GiB, which leaves nothing "
               "of the 1.00 GiB free on /physical_device:GPU:2");
    /* ... unless that card is hidden. */
    CHECK_OK(vdev_config_set_visible_devices((const int[]){0, 1}, 2));
    EXPECT_GPUS({0, 15 * GiB, GROW}, {1, 15 * GiB, GROW});
    /* With logical devices, the message says where the budget comes from. */
    check_fresh("1x16GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "8192", 1);
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){9 * GiB}, 1));
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "more than the card's budget of 8.00 GiB (8589934592 bytes: 16.00 GiB free less "
               "the 8.00 GiB driver reserve)");
}

/* A fraction is of the card's total memory, rounded down to 256 bytes. */
static void test_fraction(void)
{
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_set_memory_fraction(NULL, 0.5));
    CHECK_EQ_U64(limit_of("GPU:0"), 8 * GiB);
    check_fresh("1x10GiB");
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 0.3));
    CHECK_EQ_U64(limit_of("GPU:0"), 3221225472ull);
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 0.7)); /* 12025908428.8 */
    CHECK_EQ_U64(limit_of("GPU:0"), 12025908224ull);
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 1.0)); /* all of it: no reserve */
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_EQ_U64(limit_of("GPU:0"), 16 * GiB);
    CHECK_EQ_U64(phys_free(0), 0);
    /* Of total, not of free. */
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_discover());
    struct vdev_backend *b = vdev_config_gpu_backend();
    void *p = NULL;
    CHECK_OK(b->ops->reserve(b->ctx, 0, 4 * GiB, &p));
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 0.5));
    CHECK_EQ_U64(limit_of("GPU:0"), 8 * GiB);
    b->ops->release(b->ctx, 0, p, 4 * GiB);
    /* Per GPU; NULL sets every GPU; 0 removes it. */
    check_fresh("3x16GiB");
    CHECK_OK(vdev_config_set_memory_fraction(NULL, 0.25));
    CHECK_OK(vdev_config_set_memory_fraction("GPU:1", 0.5));
    CHECK_OK(vdev_config_set_memory_fraction("GPU:2", 0));
    EXPECT_GPUS({0, 4 * GiB, GROW}, {1, 8 * GiB, GROW}, {2, 16 * GiB - RESERVE, GROW});
    /* With logical devices, it is their budget. */
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 0.5));
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){4 * GiB, 4 * GiB}, 2));
    EXPECT_GPUS({0, 4 * GiB, GROW}, {0, 4 * GiB, GROW});
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 0.5));
    CHECK_OK(vdev_config_set_logical_devices("GPU:0",
                                             (const uint64_t[]){4 * GiB, 4 * GiB + 256}, 2));
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "/physical_device:GPU:0: its 2 logical devices' limits sum to 8.00 GiB "
               "(8589934848 bytes), more than the card's budget of 8.00 GiB (8589934592 bytes: "
               "0.5 of its 16.00 GiB total)");
    /* Outside (0, 1]. */
    check_fresh("1x16GiB");
    static const double bad[] = {-0.1, 1.5, 1.0000001, -0.0000001};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_ERR(vdev_config_set_memory_fraction("GPU:0", bad[i]), VDEV_ERR_INVALID_ARG,
                   "is outside (0, 1] (0 removes it)");
    EXPECT_ERR(vdev_config_set_memory_fraction("GPU:0", 1.5), VDEV_ERR_INVALID_ARG,
               "memory fraction 1.5 is outside (0, 1]");
    /* The value as given, not rounded into the range by %g. */
    EXPECT_ERR(vdev_config_set_memory_fraction("GPU:0", 1.0000001), VDEV_ERR_INVALID_ARG,
               "memory fraction 1.0000001 is outside (0, 1] (0 removes it)");
    EXPECT_ERR(vdev_config_set_memory_fraction("GPU:0", -0.0000001), VDEV_ERR_INVALID_ARG,
               "memory fraction -1e-07 is outside (0, 1] (0 removes it)");
    /* NaN without printf's sign ("-nan"), whatever its sign bit. */
    static const double nans[2] = {NAN, -NAN};
    for (int i = 0; i < 2; i++) {
        CHECK_STATUS(vdev_config_set_memory_fraction("GPU:0", nans[i]), VDEV_ERR_INVALID_ARG);
        CHECK_STR(vdev_last_error(),
                  "memory fraction nan (not a number) is outside (0, 1] (0 removes it)");
    }
    EXPECT_ERR(vdev_config_set_memory_fraction(NULL, INFINITY), VDEV_ERR_INVALID_ARG, "outside");
    CHECK_EQ_U64(limit_of("GPU:0"), 16 * GiB - RESERVE);
}

/* After start-up: changes fail, repeating what is in force is a no-op. */
static void test_after_startup(void)
{
    check_fresh("2x16GiB");
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", false));
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 0.5));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){GiB, 2 * GiB}, 2));
    CHECK_OK(vdev_config_set_visible_devices((const int[]){0, 1}, 2));
    CHECK_OK(vdev_init());
    CHECK(vdev_is_initialized());
    CHECK(vdev_config_frozen());
    CHECK_OK(vdev_init()); /* again: a no-op */

    EXPECT_ERR(vdev_config_set_memory_growth("GPU:1", true), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY);
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:0", false), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY);
    EXPECT_ERR(vdev_config_set_memory_fraction("GPU:0", 0.25), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY);
    EXPECT_ERR(vdev_config_set_memory_fraction("GPU:0", 0), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY);
    EXPECT_ERR(vdev_config_set_memory_fraction(NULL, 0.5), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY);
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){GiB}, 1),
               VDEV_ERR_ALREADY_INITIALIZED,
               "Virtual devices cannot be modified after being initialized");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){GiB}, 1),
               VDEV_ERR_ALREADY_INITIALIZED,
               "Virtual devices cannot be modified after being initialized");
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){1}, 1),
               VDEV_ERR_ALREADY_INITIALIZED,
               "Visible devices cannot be modified after being initialized");
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){1, 0}, 2),
               VDEV_ERR_ALREADY_INITIALIZED, "Visible devices cannot be modified");
    EXPECT_ERR(vdev_config_set_visible_devices(NULL, 0), VDEV_ERR_ALREADY_INITIALIZED,
               "Visible devices cannot be modified");

    /* The values in force, repeated. */
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", false));
    /* Growth that code never set: refused even when it names what is in
     * force, as TensorFlow compares with what code set (None). */
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:0", true), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY);
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 0.5));
    CHECK_OK(vdev_config_set_memory_fraction("GPU:1", 0));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){GiB, 2 * GiB}, 2));
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", NULL, 0));
    CHECK_OK(vdev_config_set_visible_devices((const int[]){0, 1}, 2));
    /* Errors that do not depend on start-up keep their own codes. */
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:5", true), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: GPU:5");
    EXPECT_ERR(vdev_config_set_memory_growth("CPU:0", true), VDEV_ERR_INVALID_ARG,
               "non-GPU and non-Pluggable");
    /* Nothing changed. */
    EXPECT_GPUS({0, 8 * GiB, GROW}, {1, GiB, PRE}, {1, 2 * GiB, PRE});
    int g = 9;
    CHECK_OK(vdev_config_get_memory_growth("GPU:1", &g));
    CHECK(g == 0);

    /* Values in force that came from the environment. */
    check_fresh("3x16GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_MEMORY_FRACTION", "0.25", 1);
    setenv("VDEV_LOGICAL_DEVICES", "1:1GiB", 1);
    setenv("VDEV_VISIBLE_DEVICES", "1,2", 1);
    CHECK_OK(vdev_init());
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:0", false), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY); /* growth is TensorFlow's exception: only what code set repeats */
    CHECK_OK(vdev_config_set_memory_fraction(NULL, 0.25));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){GiB}, 1));
    CHECK_OK(vdev_config_set_visible_devices((const int[]){1, 2}, 2));
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:0", true), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY);
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){0, 1, 2}, 3),
               VDEV_ERR_ALREADY_INITIALIZED, "Visible devices cannot be modified");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:1", NULL, 0), VDEV_ERR_ALREADY_INITIALIZED,
               "Virtual devices cannot be modified");
    EXPECT_GPUS({1, GiB, PRE}, {2, 4 * GiB, PRE});
    /* Default visibility is every GPU in order. */
    check_fresh("2x16GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_config_set_visible_devices((const int[]){0, 1}, 2));
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){0}, 1),
               VDEV_ERR_ALREADY_INITIALIZED, "Visible devices cannot be modified");
}

/* Listing logical devices starts the runtime; listing physical ones does not. */
static void test_implicit_startup(void)
{
    check_fresh("1x16GiB");
    int n = 0;
    CHECK_OK(vdev_list_physical_devices(NULL, 0, &n));
    CHECK(!vdev_is_initialized());
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_list_logical_devices(NULL, 0, &n));
    CHECK(n == 2);
    CHECK(vdev_is_initialized());
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:0", true), VDEV_ERR_ALREADY_INITIALIZED,
               ALREADY);
    EXPECT_ERR(vdev_list_logical_devices(NULL, 1, &n), VDEV_ERR_INVALID_ARG, "bad arguments");
    EXPECT_ERR(vdev_list_logical_devices(NULL, 0, NULL), VDEV_ERR_INVALID_ARG, "bad arguments");

    check_fresh("1x16GiB");
    char name[64];
    CHECK_OK(vdev_device_canonical_name("GPU:0", name, sizeof name));
    CHECK(vdev_is_initialized());
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){GiB}, 1),
               VDEV_ERR_ALREADY_INITIALIZED, "Virtual devices cannot be modified");

    check_fresh("1x16GiB");
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK(vdev_is_initialized());
    /* A shutdown returns to the unconfigured state. */
    vdev_shutdown();
    CHECK(!vdev_is_initialized());
    CHECK(!vdev_config_frozen());
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    int g = 0;
    CHECK_OK(vdev_config_get_memory_growth("GPU:0", &g));
    CHECK(g == 0);
    vdev_shutdown();
    CHECK_OK(vdev_config_get_memory_growth("GPU:0", &g));
    CHECK(g == -1);
}

/* Preallocate reserves the whole limit at start-up; grow reserves nothing. */
static void test_policies(void)
{
    check_fresh("2x16GiB");
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_init());
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_reserved, 16 * GiB - RESERVE);
    CHECK_EQ_U64(mi.peak_bytes_reserved, 16 * GiB - RESERVE);
    CHECK_EQ_U64(mi.largest_free_block, 16 * GiB - RESERVE);
    CHECK_EQ_U64(mi.n_regions, 1);
    CHECK_OK(vdev_memory_info("GPU:1", &mi));
    CHECK_EQ_U64(mi.bytes_reserved, 0);
    CHECK_EQ_U64(mi.n_regions, 0);
    CHECK_EQ_U64(mi.bytes_limit, 16 * GiB - RESERVE);
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:1", 1000, &p));
    CHECK_OK(vdev_memory_info("GPU:1", &mi));
    CHECK_EQ_U64(mi.bytes_reserved, 2 * MiB); /* the first region */
    CHECK_EQ_U64(mi.bytes_in_use, 1024);
    CHECK_OK(vdev_mem_free("GPU:1", p));
    /* release_cached keeps a preallocated device whole. */
    uint64_t rel = 1;
    CHECK_OK(vdev_memory_release_cached("GPU:0", &rel));
    CHECK_EQ_U64(rel, 0);
    CHECK_EQ_U64(phys_free(0), RESERVE);
    CHECK_OK(vdev_memory_release_cached("GPU:1", &rel));
    CHECK_EQ_U64(rel, 2 * MiB);
}

static void test_visible(void)
{
    check_fresh("3x16GiB");
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){0, 0}, 2), VDEV_ERR_INVALID_ARG,
               "the visible devices contained a duplicate entry: 0,0 (GPU 0)");
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){3}, 1), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: /physical_device:GPU:3");
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){-1}, 1), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: /physical_device:GPU:-1");
    EXPECT_ERR(vdev_config_set_visible_devices(NULL, 1), VDEV_ERR_INVALID_ARG, "bad arguments");
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){0}, -1), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    CHECK_OK(vdev_config_set_visible_devices((const int[]){1}, 1));
    EXPECT_GPUS({1, 16 * GiB - RESERVE, GROW});
    /* Physical devices still list every GPU. */
    int n = 0;
    CHECK_OK(vdev_list_physical_devices(NULL, 0, &n));
    CHECK(n == 4);
    /* None visible: CPU only. */
    check_fresh("3x16GiB");
    CHECK_OK(vdev_config_set_visible_devices(NULL, 0));
    EXPECT_NO_GPUS();
    EXPECT_ERR(vdev_mem_alloc("GPU:0", 256, &(void *){NULL}), VDEV_ERR_NOT_FOUND,
               "/job:localhost/replica:0/task:0/device:GPU:0 unknown device (there are 0 "
               "logical GPUs)");
}

int main(void)
{
    test_parse_bytes();
    test_format_bytes();
    test_unknown_and_cpu();
    test_growth_get_set();
    test_mixed_mode();
    test_growth_with_logical();
    test_numbering();
    test_logical_errors();
    test_budget_exceeded();
    test_budget_reserve();
    test_fraction();
    test_after_startup();
    test_implicit_startup();
    test_policies();
    test_visible();
    check_fresh(NULL);
    return check_done();
}
