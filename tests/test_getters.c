/* test_getters.c — the getters TensorFlow has: visible devices, memory
 * growth, logical-device configuration, placement logging and device details
 * (tf.config.get_visible_devices, experimental.get_memory_growth,
 * get_logical_device_configuration, debugging.get_log_device_placement,
 * experimental.get_device_details). Before start-up they report what start-up
 * would put in force (code, else environment), after it what is in force. */
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

/* The visible list must be want[0..n). */
static void expect_visible(int line, const int *want, int n)
{
    int got[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, k = -1;
    enum vdev_status st = vdev_config_get_visible_devices(got, 8, &k);
    int ok = st == VDEV_OK && k == n;
    for (int i = 0; ok && i < n; i++)
        ok = got[i] == want[i];
    if (ok)
        check_passed++;
    else
        check_fail(__FILE__, line, "visible: %s, %d GPUs (%d %d %d ...)", vdev_status_str(st), k,
                   got[0], got[1], got[2]);
}
#define EXPECT_VISIBLE(...)                                                                        \
    do {                                                                                           \
        const int v_[] = {__VA_ARGS__};                                                            \
        expect_visible(__LINE__, v_, (int)(sizeof v_ / sizeof v_[0]));                            \
    } while (0)

static void test_visible(void)
{
    check_fresh("3x1GiB");
    EXPECT_VISIBLE(0, 1, 2);
    CHECK(!vdev_is_initialized());
    CHECK_OK(vdev_config_set_visible_devices((const int[]){2, 0}, 2));
    EXPECT_VISIBLE(2, 0); /* as given; numbered in physical order */
    CHECK_OK(vdev_init());
    EXPECT_VISIBLE(2, 0);
    /* A smaller buffer: *n still says how many. */
    int one = -1, n = 0;
    CHECK_OK(vdev_config_get_visible_devices(&one, 1, &n));
    CHECK(one == 2 && n == 2);
    CHECK_OK(vdev_config_get_visible_devices(NULL, 0, &n));
    CHECK(n == 2);
    EXPECT_ERR(vdev_config_get_visible_devices(NULL, 1, &n), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    EXPECT_ERR(vdev_config_get_visible_devices(&one, 1, NULL), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    EXPECT_ERR(vdev_config_get_visible_devices(&one, -1, &n), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    /* From the environment, and checked as start-up would. */
    check_fresh("3x1GiB");
    setenv("VDEV_VISIBLE_DEVICES", "1,2", 1);
    EXPECT_VISIBLE(1, 2);
    CHECK_OK(vdev_config_set_visible_devices((const int[]){0}, 1));
    EXPECT_VISIBLE(0);
    check_fresh("3x1GiB");
    setenv("VDEV_VISIBLE_DEVICES", "", 1);
    n = -1;
    CHECK_OK(vdev_config_get_visible_devices(NULL, 0, &n));
    CHECK(n == 0);
    setenv("VDEV_VISIBLE_DEVICES", "1,1", 1);
    n = -1;
    EXPECT_ERR(vdev_config_get_visible_devices(NULL, 0, &n), VDEV_ERR_CONFIG,
               "VDEV_VISIBLE_DEVICES contained a duplicate entry: 1,1");
    CHECK(n == -1);
    CHECK(!vdev_is_initialized());
}

static void test_growth(void)
{
    check_fresh("2x1GiB");
    int g = 7;
    CHECK_OK(vdev_config_get_memory_growth("GPU:1", &g));
    CHECK(g == -1);
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", false));
    CHECK_OK(vdev_config_get_memory_growth("/physical_device:GPU:1", &g));
    CHECK(g == 0);
}

static void test_logical(void)
{
    check_fresh("2x8GiB");
    uint64_t lim[4] = {9, 9, 9, 9};
    int n = -1;
    CHECK_OK(vdev_config_get_logical_devices("GPU:0", lim, 4, &n));
    CHECK(n == 0 && lim[0] == 9);
    CHECK_OK(vdev_config_get_logical_devices("CPU:0", lim, 4, &n));
    CHECK(n == 0);
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){GiB, 2 * GiB}, 2));
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 3));
    CHECK_OK(vdev_config_get_logical_devices("gpu:1", lim, 4, &n));
    CHECK(n == 2 && lim[0] == GiB && lim[1] == 2 * GiB && lim[2] == 9);
    CHECK_OK(vdev_config_get_logical_devices("/physical_device:CPU:0", lim, 4, &n));
    CHECK(n == 3 && lim[0] == 0 && lim[1] == 0 && lim[2] == 0 && lim[3] == 9);
    lim[0] = 5;
    CHECK_OK(vdev_config_get_logical_devices("GPU:1", NULL, 0, &n));
    CHECK(n == 2);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_config_get_logical_devices("GPU:1", lim, 1, &n));
    CHECK(n == 2 && lim[0] == GiB && lim[1] == 0);
    EXPECT_ERR(vdev_config_get_logical_devices("GPU:2", lim, 4, &n), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: GPU:2");
    EXPECT_ERR(vdev_config_get_logical_devices("GPU:0", NULL, 1, &n), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    EXPECT_ERR(vdev_config_get_logical_devices("GPU:0", lim, 1, NULL), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    /* From the environment; code wins per device. */
    check_fresh("2x8GiB");
    setenv("VDEV_LOGICAL_DEVICES", "cpu:2;0:1GiB,512MiB;1:3GiB", 1);
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){GiB}, 1));
    CHECK_OK(vdev_config_get_logical_devices("GPU:0", lim, 4, &n));
    CHECK(n == 2 && lim[0] == GiB && lim[1] == 512 * MiB);
    CHECK_OK(vdev_config_get_logical_devices("GPU:1", lim, 4, &n));
    CHECK(n == 1 && lim[0] == GiB);
    CHECK_OK(vdev_config_get_logical_devices("CPU:0", lim, 4, &n));
    CHECK(n == 2);
    setenv("VDEV_LOGICAL_DEVICES", "0:4096", 1);
    EXPECT_ERR(vdev_config_get_logical_devices("GPU:0", lim, 4, &n), VDEV_ERR_CONFIG,
               "did you mean 4096MiB?");
}

static void test_log_placement(void)
{
    check_fresh("1x1GiB");
    CHECK(!vdev_get_log_device_placement());
    vdev_set_log_device_placement(true);
    CHECK(vdev_get_log_device_placement());
    vdev_set_log_device_placement(false);
    CHECK(!vdev_get_log_device_placement());
    check_fresh("1x1GiB");
    setenv("VDEV_LOG_DEVICE_PLACEMENT", "1", 1);
    CHECK(vdev_get_log_device_placement()); /* before start-up: what it will be */
    CHECK_OK(vdev_init());
    CHECK(vdev_get_log_device_placement());
    /* Shut down, the environment applies again at the next start-up. */
    vdev_shutdown();
    CHECK(vdev_get_log_device_placement());
    unsetenv("VDEV_LOG_DEVICE_PLACEMENT");
    CHECK(!vdev_get_log_device_placement());
}

static void test_details(void)
{
    check_fresh("2x1GiB");
    struct vdev_device_details d;
    memset(&d, 0x5a, sizeof d);
    CHECK_OK(vdev_device_details("/physical_device:GPU:1", &d));
    CHECK_STR(d.device_name, "Simulated GPU");
    CHECK(d.cc_major == 8 && d.cc_minor == 0);
    memset(&d, 0x5a, sizeof d);
    CHECK_OK(vdev_device_details("CPU:0", &d));
    CHECK_STR(d.device_name, "");
    CHECK(d.cc_major == 0 && d.cc_minor == 0);
    memset(&d, 0x5a, sizeof d);
    EXPECT_ERR(vdev_device_details("GPU:2", &d), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: GPU:2 (there are 2 GPUs)");
    CHECK(d.cc_major == 0x5a5a5a5a); /* untouched on failure */
    EXPECT_ERR(vdev_device_details("GPU:0", NULL), VDEV_ERR_INVALID_ARG, "out is NULL");
    EXPECT_ERR(vdev_device_details(NULL, &d), VDEV_ERR_INVALID_ARG, "physical device name is NULL");
    CHECK(!vdev_is_initialized());
}

int main(void)
{
    test_visible();
    test_growth();
    test_logical();
    test_log_placement();
    test_details();
    check_fresh(NULL);
    return check_done();
}
