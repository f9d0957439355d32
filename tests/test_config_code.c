/* test_config_code.c — code over the environment and physical names: a split
 * removed in code (n == 0) or a fraction removed in code (0) undoes what
 * VDEV_LOGICAL_DEVICES and VDEV_MEMORY_FRACTION say, as a visible-device list
 * does; the configuration calls refuse a logical name (/device:GPU:0), which
 * need not be the physical GPU of that number; a repeat of the growth in force
 * after start-up reads back from the getter. Runs on simulated GPUs (compute
 * capability 8.0: a 1536 MiB driver reserve, 225 MiB under 2 GiB free). */
#define _GNU_SOURCE
#include "config_want.h"

/* The exact last error. */
#define CHECK_LAST(msg) CHECK_STR(vdev_last_error(), msg)

/* Logical devices of a physical device as the getter reports them. */
static int split_count(const char *phys)
{
    int n = -1;
    CHECK_OK(vdev_config_get_logical_devices(phys, NULL, 0, &n));
    return n;
}

static int n_logical_cpus(void)
{
    struct vdev_logical_device ld[40];
    int n = 0, cpus = 0;
    CHECK_OK(vdev_list_logical_devices(ld, 40, &n));
    for (int i = 0; i < n && i < 40; i++)
        cpus += ld[i].type == VDEV_DEVICE_CPU;
    return cpus;
}

/* A GPU split by VDEV_LOGICAL_DEVICES, unsplit by code. */
static void test_split_removed_in_code(void)
{
    check_fresh("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:100MiB,200MiB", 1);
    CHECK(split_count("GPU:0") == 2);
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", NULL, 0));
    CHECK(split_count("GPU:0") == 0); /* the getter says what start-up will do */
    EXPECT_GPUS({0, GiB - 225 * MiB, GROW});
    /* In force now: repeating it is a no-op, another split is refused. */
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", NULL, 0));
    EXPECT_ERR(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){100 * MiB}, 1),
               VDEV_ERR_ALREADY_INITIALIZED,
               "Virtual devices cannot be modified after being initialized");

    /* The _ex form, and only the GPU named: the other keeps the variable's. */
    check_fresh("2x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:100MiB,200MiB;1:300MiB", 1);
    CHECK_OK(vdev_config_set_logical_devices_ex("/physical_device:GPU:0", NULL, 0));
    EXPECT_GPUS({0, GiB - 225 * MiB, GROW}, {1, 300 * MiB, GROW});

    /* A malformed variable is still an error, even where code overrides it. */
    check_fresh("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:", 1);
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", NULL, 0));
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_MSG("VDEV_LOGICAL_DEVICES=\"0:\"");
}

/* The host split by VDEV_LOGICAL_DEVICES=cpu:3, unsplit by code. */
static void test_cpus_unsplit_in_code(void)
{
    check_fresh("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "cpu:3", 1);
    CHECK(split_count("CPU:0") == 3);
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 0));
    CHECK(split_count("CPU:0") == 0);
    CHECK(n_logical_cpus() == 1);
    check_fresh("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "cpu:3", 1);
    CHECK_OK(vdev_config_set_logical_devices_ex("/physical_device:CPU:0", NULL, 0));
    CHECK(n_logical_cpus() == 1);
    /* Without code, the variable's split. */
    check_fresh("1x1GiB");
    setenv("VDEV_LOGICAL_DEVICES", "cpu:3", 1);
    CHECK(n_logical_cpus() == 3);
}

/* VDEV_MEMORY_FRACTION (and its alias) removed in code, for every GPU or one. */
static void test_fraction_removed_in_code(void)
{
    check_fresh("1x4GiB");
    setenv("VDEV_MEMORY_FRACTION", "0.5", 1);
    CHECK_OK(vdev_config_set_memory_fraction(NULL, 0));
    EXPECT_GPUS({0, 4 * GiB - RESERVE, GROW});
    CHECK_OK(vdev_config_set_memory_fraction(NULL, 0)); /* in force: a no-op */
    EXPECT_ERR(vdev_config_set_memory_fraction(NULL, 0.5), VDEV_ERR_ALREADY_INITIALIZED,
               "Physical devices cannot be modified after being initialized");

    check_fresh("2x4GiB");
    setenv("TF_GPU_MEMORY_FRACTION", "0.5", 1);
    CHECK_OK(vdev_config_set_memory_fraction("GPU:1", 0));
    EXPECT_GPUS({0, 2 * GiB, GROW}, {1, 4 * GiB - RESERVE, GROW});

    /* Without code, the variable's fraction. */
    check_fresh("1x4GiB");
    setenv("VDEV_MEMORY_FRACTION", "0.5", 1);
    EXPECT_GPUS({0, 2 * GiB, GROW});
}

/* Every call that takes a physical device refuses a logical name. */
static void test_logical_names_refused(void)
{
    static const struct {
        const char *name, *msg;
    } bad[] = {
        {"/device:GPU:0", "'/device:GPU:0' is a logical device; configuration takes a physical "
                          "device such as /physical_device:GPU:0"},
        {"device:GPU:1", "'device:GPU:1' is a logical device; configuration takes a physical "
                         "device such as /physical_device:GPU:1"},
        {"/job:localhost/replica:0/task:0/device:GPU:1",
         "'/job:localhost/replica:0/task:0/device:GPU:1' is a logical device; configuration "
         "takes a physical device such as /physical_device:GPU:1"},
        {"/job:localhost/gpu:0", "'/job:localhost/gpu:0' is a logical device; configuration "
                                 "takes a physical device such as /physical_device:GPU:0"},
        {"/task:0/GPU:1", "'/task:0/GPU:1' is a logical device; configuration takes a physical "
                          "device such as /physical_device:GPU:1"},
        {"/device:CPU:0", "'/device:CPU:0' is a logical device; configuration takes a physical "
                          "device such as /physical_device:CPU:0"},
    };
    check_fresh("2x1GiB");
    setenv("VDEV_VISIBLE_DEVICES", "1", 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *name = bad[i].name;
        int g;
        uint64_t lim[4];
        struct vdev_logical_device_config cfg[2] = {{0}};
        struct vdev_device_details d;
        CHECK_STATUS(vdev_config_set_memory_growth(name, false), VDEV_ERR_INVALID_ARG);
        CHECK_LAST(bad[i].msg);
        CHECK_STATUS(vdev_config_get_memory_growth(name, &g), VDEV_ERR_INVALID_ARG);
        CHECK_LAST(bad[i].msg);
        CHECK_STATUS(vdev_config_set_memory_fraction(name, 0.5), VDEV_ERR_INVALID_ARG);
        CHECK_LAST(bad[i].msg);
        CHECK_STATUS(vdev_config_set_logical_devices(name, NULL, 0), VDEV_ERR_INVALID_ARG);
        CHECK_LAST(bad[i].msg);
        CHECK_STATUS(vdev_config_set_logical_devices_ex(name, cfg, 1), VDEV_ERR_INVALID_ARG);
        CHECK_LAST(bad[i].msg);
        CHECK_STATUS(vdev_config_get_logical_devices(name, lim, 4, &g), VDEV_ERR_INVALID_ARG);
        CHECK_LAST(bad[i].msg);
        CHECK_STATUS(vdev_config_get_logical_devices_ex(name, cfg, 2, &g), VDEV_ERR_INVALID_ARG);
        CHECK_LAST(bad[i].msg);
        CHECK_STATUS(vdev_device_details(name, &d), VDEV_ERR_INVALID_ARG);
        CHECK_LAST(bad[i].msg);
    }
    /* Nothing was configured: the visible GPU (physical 1) grows, unfractioned. */
    EXPECT_GPUS({1, GiB - 225 * MiB, GROW});
    /* The physical and short forms still name physical devices. */
    static const char *const good[] = {"/physical_device:GPU:1", "physical_device:GPU:1",
                                       "GPU:1", "gpu:1", "/gpu:1", "/GPU:1"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int g = 9;
        CHECK_OK(vdev_config_get_memory_growth(good[i], &g));
        CHECK(g == -1);
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) /* unset: refused, as in TF */
        EXPECT_ERR(vdev_config_set_memory_growth(good[i], true), VDEV_ERR_ALREADY_INITIALIZED,
                   "Physical devices cannot be modified after being initialized");
    CHECK_OK(vdev_config_set_logical_devices("/physical_device:CPU:0", NULL, 0));
    CHECK_OK(vdev_config_set_logical_devices("cpu:0", NULL, 0));
}

/* After start-up, as TensorFlow (which compares with what code set, None
 * when unset): a repeat of what code set is accepted; growth never set is
 * refused, even when the call names the growth in force, and still reads
 * back as unset. */
static void test_growth_repeat_reads_back(void)
{
    check_fresh("2x1GiB");
    int g = 9;
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", true));
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_config_get_memory_growth("GPU:0", &g));
    CHECK(g == -1);
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:0", true), VDEV_ERR_ALREADY_INITIALIZED,
               "Physical devices cannot be modified after being initialized");
    CHECK_OK(vdev_config_get_memory_growth("GPU:0", &g));
    CHECK(g == -1);
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", true));
    CHECK_OK(vdev_config_get_memory_growth("GPU:1", &g));
    CHECK(g == 1);
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:1", false), VDEV_ERR_ALREADY_INITIALIZED,
               "Physical devices cannot be modified after being initialized");
    CHECK_OK(vdev_config_get_memory_growth("GPU:1", &g));
    CHECK(g == 1);
    /* Preallocation from the environment, repeated in code: refused too. */
    check_fresh("1x1GiB");
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    CHECK_OK(vdev_init());
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:0", false), VDEV_ERR_ALREADY_INITIALIZED,
               "Physical devices cannot be modified after being initialized");
    CHECK_OK(vdev_config_get_memory_growth("GPU:0", &g));
    CHECK(g == -1);
}

int main(void)
{
    test_split_removed_in_code();
    test_cpus_unsplit_in_code();
    test_fraction_removed_in_code();
    test_logical_names_refused();
    test_growth_repeat_reads_back();
    check_fresh(NULL);
    return check_done();
}
