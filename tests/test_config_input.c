/* test_config_input.c — configuration input that looks right and is not:
 * logical-device limits written in MiB where bytes are meant, sizes that are
 * not a whole number of bytes, a memory fraction too small to hold anything,
 * and placement policies in any case. Each is refused where it is read, with
 * a message naming the variable (or the call) and the bad part. Runs on
 * simulated GPUs. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

#define EXPECT_ERR(call, code, sub)                                                                \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_MSG(sub);                                                                            \
    } while (0)

/* Start-up must fail with VDEV_ERR_CONFIG and exactly `msg`. */
static void expect_env(int line, const char *sim, const char *var, const char *value,
                       const char *msg)
{
    check_fresh(sim);
    setenv(var, value, 1);
    enum vdev_status st = vdev_init();
    if (st != VDEV_ERR_CONFIG || strcmp(vdev_last_error(), msg) != 0)
        check_fail(__FILE__, line, "%s=\"%s\": %s \"%s\", expected VDEV_ERR_CONFIG \"%s\"", var,
                   value, vdev_status_str(st), vdev_last_error(), msg);
    else
        check_passed++;
    CHECK(!vdev_is_initialized());
}
#define EXPECT_ENV(sim, var, value, msg) expect_env(__LINE__, sim, var, value, msg)

static uint64_t limit_of(const char *dev)
{
    struct vdev_memory_info mi;
    memset(&mi, 0, sizeof mi);
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_limit;
}

/* Limits below 1 MiB are MiB written as bytes: refused with a hint. */
static void test_limits_in_mib(void)
{
    check_fresh("1x16GiB");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){4096, 2048}, 2),
               VDEV_ERR_INVALID_ARG,
               "logical device 0 of GPU:0 has a limit of 4096 bytes, less than 1 MiB: limits "
               "are in bytes (did you mean 4096MiB, i.e. 4096ull << 20?)");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){GiB, MiB - 1}, 2),
               VDEV_ERR_INVALID_ARG,
               "logical device 1 of GPU:0 has a limit of 1048575 bytes, less than 1 MiB");
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){GiB, 0}, 2),
               VDEV_ERR_INVALID_ARG,
               "logical device 1 of GPU:0 has a memory limit of 0 bytes: a limit is at least "
               "1 MiB");
    /* Nothing was recorded; 1 MiB exactly is accepted. */
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){MiB, 4096 * MiB}, 2));
    CHECK_OK(vdev_init());
    CHECK(limit_of("GPU:0") == MiB);
    CHECK(limit_of("GPU:1") == 4 * GiB);

    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:4096,2048",
               "VDEV_LOGICAL_DEVICES=\"0:4096,2048\": limit '4096' for GPU 0 is 4096 bytes, less "
               "than 1 MiB (did you mean 4096MiB?)");
    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:1GiB,512KiB",
               "VDEV_LOGICAL_DEVICES=\"0:1GiB,512KiB\": limit '512KiB' for GPU 0 is 524288 "
               "bytes, less than 1 MiB");
    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:0",
               "VDEV_LOGICAL_DEVICES=\"0:0\": limit '0' for GPU 0 is 0 bytes, less than 1 MiB");
    CHECK(strstr(vdev_last_error(), "required") == NULL); /* a limit was given */
    check_fresh("1x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:1MiB,1048576", 1);
    CHECK_OK(vdev_init());
    CHECK(limit_of("GPU:1") == MiB);
}

/* A size must be a whole number of bytes once its unit is applied. */
static void test_whole_bytes(void)
{
    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:256.9",
               "VDEV_LOGICAL_DEVICES=\"0:256.9\": limit '256.9' for GPU 0 is not a whole number "
               "of bytes (a fraction needs a unit that makes it whole, e.g. 1.5GiB)");
    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:4194304.5",
               "VDEV_LOGICAL_DEVICES=\"0:4194304.5\": limit '4194304.5' for GPU 0 is not a "
               "whole number of bytes (a fraction needs a unit that makes it whole, e.g. "
               "1.5GiB)");
    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:1GiB,1.0000001GiB",
               "VDEV_LOGICAL_DEVICES=\"0:1GiB,1.0000001GiB\": limit '1.0000001GiB' for GPU 0 is "
               "not a whole number of bytes (a fraction needs a unit that makes it whole, e.g. "
               "1.5GiB)");
    /* no exponents: a size is a whole number or a decimal */
    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:1.5e-3GiB",
               "VDEV_LOGICAL_DEVICES=\"0:1.5e-3GiB\": bad limit '1.5e-3GiB' for GPU 0 (a size "
               "such as 4GiB)");
    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:2e6",
               "VDEV_LOGICAL_DEVICES=\"0:2e6\": bad limit '2e6' for GPU 0 (a size such as 4GiB)");
    EXPECT_ENV("1x16GiB", "VDEV_LOGICAL_DEVICES", "0:1.5x",
               "VDEV_LOGICAL_DEVICES=\"0:1.5x\": bad limit '1.5x' for GPU 0 (a size such as "
               "4GiB)");
    /* Fractions that a unit makes whole are fine. */
    check_fresh("1x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:1.5GiB,2.5MiB,0.25GB,1.000000000GiB,2000000,5.0MiB", 1);
    CHECK_OK(vdev_init());
    CHECK(limit_of("GPU:0") == 3 * GiB / 2);
    CHECK(limit_of("GPU:1") == 5 * MiB / 2);
    CHECK(limit_of("GPU:2") == 250000000ull / 256 * 256);
    CHECK(limit_of("GPU:3") == GiB);
    CHECK(limit_of("GPU:4") == 2000000ull / 256 * 256);
    CHECK(limit_of("GPU:5") == 5 * MiB);
}

/* A fraction whose budget is below 1 MiB holds nothing: refused where it is
 * read, naming the smallest useful value. */
static void test_tiny_fraction(void)
{
    EXPECT_ENV("1x16GiB", "VDEV_MEMORY_FRACTION", "0.0000000001",
               "VDEV_MEMORY_FRACTION=\"0.0000000001\" gives /physical_device:GPU:0 a budget of "
               "0 B (0.0000000001 of its 16.00 GiB), less than 1 MiB: the smallest useful "
               "value is 0.000062");
    EXPECT_ENV("1x64GiB,1x8GiB", "TF_GPU_MEMORY_FRACTION", "0.0001",
               "TF_GPU_MEMORY_FRACTION=\"0.0001\" gives /physical_device:GPU:1 a budget of "
               "838.75 KiB (0.0001 of its 8.00 GiB), less than 1 MiB: the smallest useful "
               "value is 0.00013");
    check_fresh("1x16GiB");
    setenv("VDEV_MEMORY_FRACTION", "0.000062", 1);
    CHECK_OK(vdev_init());
    CHECK(limit_of("GPU:0") >= MiB);
    /* The C call is refused at once. */
    check_fresh("2x16GiB");
    EXPECT_ERR(vdev_config_set_memory_fraction("GPU:1", 1e-10), VDEV_ERR_INVALID_ARG,
               "memory fraction 1e-10 gives /physical_device:GPU:1 a budget of 0 B (1e-10 of its "
               "16.00 GiB), less than 1 MiB: the smallest useful value is 0.000062");
    EXPECT_ERR(vdev_config_set_memory_fraction(NULL, 0.00001), VDEV_ERR_INVALID_ARG,
               "/physical_device:GPU:0 a budget of 167.75 KiB");
    CHECK_OK(vdev_init()); /* nothing was recorded */
    CHECK(limit_of("GPU:1") == 16 * GiB - 1536 * MiB);
}

/* Placement policies take any case, as every other value does. */
static void test_policy_case(void)
{
    static const struct {
        const char *value;
        enum vdev_placement_policy p;
    } ok[] = {{"TF", VDEV_PLACEMENT_TF},         {"Tf", VDEV_PLACEMENT_TF},
              {"STRICT", VDEV_PLACEMENT_STRICT}, {"Copy", VDEV_PLACEMENT_COPY},
              {"copy", VDEV_PLACEMENT_COPY},     {"strict", VDEV_PLACEMENT_STRICT}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        check_fresh("1x1GiB");
        setenv("VDEV_PLACEMENT", ok[i].value, 1);
        CHECK_OK(vdev_init());
        CHECK(vdev_get_placement_policy() == ok[i].p);
    }
    EXPECT_ENV("1x1GiB", "VDEV_PLACEMENT", "T F",
               "VDEV_PLACEMENT=\"T F\" is not a placement policy (copy, strict or tf)");
}

int main(void)
{
    test_limits_in_mib();
    test_whole_bytes();
    test_tiny_fraction();
    test_policy_case();
    check_fresh(NULL);
    return check_done();
}
