/* test_devnames.c — device names in every form TensorFlow accepts, the
 * malformed ones with TensorFlow's messages where they apply, valid names of
 * devices that do not exist, and physical names where a logical device is
 * wanted. Runs on three simulated GPUs. */
#define _GNU_SOURCE
#include "check.h"
#include "config/config.h"

#include <stdlib.h>
#include <string.h>


static void expect_canonical(int line, const char *name, const char *want)
{
    char out[64] = "";
    enum vdev_status st = vdev_device_canonical_name(name, out, sizeof out);
    if (st != VDEV_OK || strcmp(out, want) != 0)
        check_fail(__FILE__, line, "'%s' -> %s '%s' (%s), expected '%s'", name,
                   vdev_status_str(st), out, vdev_last_error(), want);
    else
        check_passed++;
}

static void expect_bad(int line, const char *name, enum vdev_status code, const char *msg)
{
    char out[64] = "untouched";
    enum vdev_status st = vdev_device_canonical_name(name, out, sizeof out);
    if (st != code || !strstr(vdev_last_error(), msg))
        check_fail(__FILE__, line, "'%s' -> %s \"%s\", expected %s \"%s\"", name ? name : "NULL",
                   vdev_status_str(st), vdev_last_error(), vdev_status_str(code), msg);
    else
        check_passed++;
    CHECK_STR(out, "untouched");
}

static void test_accepted(void)
{
    check_fresh("3x1GiB");
    static const char *const gpu1[] = {
        "/device:GPU:1",
        "GPU:1",
        "gpu:1",
        "Gpu:1",
        "/gpu:1",
        "/GPU:1",
        "device:GPU:1",
        "/device:gpu:1",
        "/job:localhost/replica:0/task:0/device:GPU:1",
        "/job:localhost/replica:0/task:0/gpu:1",
        "/job:localhost/replica:0/task:0/GPU:1",
        "/job:localhost/device:GPU:1",
        "/replica:0/task:0/device:GPU:1",
        "/task:0/device:GPU:1",
        "job:localhost/device:GPU:1",
        "/device:GPU:1/",
        "//device:GPU:1",
        "GPU:1/job:localhost",
        "/gpu:01", /* leading zeros: TensorFlow's parsers take them */
        "/device:GPU:001",
        "/replica:00/task:0/device:GPU:1",
    };
    for (size_t i = 0; i < sizeof gpu1 / sizeof gpu1[0]; i++)
        expect_canonical(__LINE__, gpu1[i], "/device:GPU:1");
    static const char *const cpu0[] = {
        "/device:CPU:0",
        "CPU:0",
        "cpu:0",
        "/cpu:0",
        "/CPU:0",
        "device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/cpu:0",
    };
    for (size_t i = 0; i < sizeof cpu0 / sizeof cpu0[0]; i++)
        expect_canonical(__LINE__, cpu0[i], "/device:CPU:0");
    expect_canonical(__LINE__, "gpu:0", "/device:GPU:0");
    expect_canonical(__LINE__, "/job:localhost/replica:0/task:0/device:GPU:2", "/device:GPU:2");
    /* The canonical name is accepted everywhere a name is. */
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("/job:localhost/replica:0/task:0/device:GPU:2", &mi));
    CHECK_OK(vdev_memory_reset_peak("gpu:2"));
    CHECK_OK(vdev_memory_release_cached("/gpu:2", NULL));
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("/GPU:1", 4096, &p));
    CHECK_OK(vdev_mem_free("/job:localhost/replica:0/task:0/device:GPU:1", p));
    CHECK_OK(vdev_memory_info("cpu:0", &mi));
}

static void test_garbage(void)
{
    check_fresh("3x1GiB");
    static const struct {
        const char *name, *msg;
    } bad[] = {
        {"", "'' is not a device name (expected e.g. /device:GPU:0, GPU:0 or CPU:0)"},
        {"GPU", "Failed parsing device name: 'GPU'. Note a valid device string should at least "
                "contain a device type and a device index, like \"GPU:0\"."},
        {"cpu", "Failed parsing device name: 'cpu'. Note"},
        {"/gpu", "Failed parsing device name: '/gpu'. Note"},
        {"TPU", "Unknown device type 'TPU' in the device spec: 'TPU'"},
        {"GPU:", "Bad device index '' in the device spec: 'GPU:' (expected a whole number such "
                 "as 0 or 1)"},
        {"GPU:-1", "Bad device index '-1' in the device spec: 'GPU:-1'"},
        {"GPU:1x", "Bad device index '1x' in the device spec: 'GPU:1x'"},
        {"GPU: 1", "Bad device index ' 1' in the device spec: 'GPU: 1'"},
        {"GPU:+1", "Bad device index '+1'"},
        {"GPU:*", "Failed parsing device name: 'GPU:*'. Note"},
        {"GPU:99999999999", "Bad device index '99999999999'"},
        {"/device:GPU:", "Bad device index ''"},
        {"TPU:0", "Unknown device type 'TPU' in the device spec: 'TPU:0' (vdev has CPU and GPU "
                  "devices)"},
        {"/device:TPU:0", "Unknown device type 'TPU' in the device spec: '/device:TPU:0'"},
        {"/device:XLA_GPU:0", "Unknown device type 'XLA_GPU'"},
        {"xla_gpu:0", "Unknown device type 'xla_gpu'"},
        {"/device:banana:0", "Unknown device type 'banana'"},
        {"/device:GPU:1/device:CPU:0", "Multiple device types are not allowed while parsing the "
                                       "device spec: /device:GPU:1/device:CPU:0."},
        {"GPU:1/GPU:1", "Multiple device types are not allowed while parsing the device spec: "
                        "GPU:1/GPU:1."},
        {"/cpu:0/gpu:0", "Multiple device types are not allowed"},
        {"/job:localhost/foo:1/device:GPU:0",
         "Unknown attribute 'foo' is encountered while parsing the device spec: "
         "'/job:localhost/foo:1/device:GPU:0'."},
        {"banana", "Unknown attribute 'banana' is encountered while parsing the device spec: "
                   "'banana'."},
        {"gpu:1:2", "Unknown attribute 'gpu' is encountered while parsing the device spec: "
                    "'gpu:1:2'."},
        {"/device:GPU:1:2", "Unknown attribute 'device' is encountered while parsing the device "
                            "spec: '/device:GPU:1:2'."},
        {"/device:GPU", "Failed parsing device name: '/device:GPU'. Note"},
        {"/replica:x/device:GPU:0", "Unknown attribute 'replica'"},
        {"/task:-1/device:GPU:0", "Unknown attribute 'task'"},
        {"/job:/device:GPU:0", "Unknown attribute 'job' is encountered while parsing the "
                               "device spec: '/job:/device:GPU:0'. (a job name starts with a "
                               "letter"},
        {" GPU:0", "Unknown attribute ' GPU'"},
        {"//", "'//' names no device (expected e.g. /device:GPU:0, GPU:0 or CPU:0)"},
        {"/", "'/' names no device"},
        {"/job:localhost/replica:0/task:0", "names no device"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_bad(__LINE__, bad[i].name, VDEV_ERR_INVALID_ARG, bad[i].msg);
    char longname[400];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    expect_bad(__LINE__, longname, VDEV_ERR_INVALID_ARG, "'(overlong)' is not a device name");
    expect_bad(__LINE__, NULL, VDEV_ERR_INVALID_ARG, "device name is NULL");
    /* The same errors from every call that takes a logical device. */
    struct vdev_memory_info mi;
    CHECK_STATUS(vdev_memory_info("GPU:1x", &mi), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("Bad device index '1x'");
    CHECK_STATUS(vdev_memory_reset_peak("TPU:0"), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("Unknown device type 'TPU'");
    CHECK_STATUS(vdev_memory_release_cached("/", NULL), VDEV_ERR_INVALID_ARG);
    void *p = (void *)1;
    CHECK_STATUS(vdev_mem_alloc("gpu:1:2", 256, &p), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("Unknown attribute 'gpu'");
    CHECK(p == NULL);
    CHECK_STATUS(vdev_mem_free("GPU", (void *)64), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("Failed parsing device name: 'GPU'. Note");
    char out[64];
    CHECK_STATUS(vdev_device_canonical_name("GPU:0", NULL, 10), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_device_canonical_name("GPU:0", out, 0), VDEV_ERR_INVALID_ARG);
    /* too small for the name: refused, out left empty, never a cut name */
    CHECK_STATUS(vdev_device_canonical_name("gpu:0", out, 4), VDEV_ERR_INVALID_ARG);
    CHECK(strcmp(vdev_last_error(), "vdev_device_canonical_name: \"/device:GPU:0\" needs 14 "
                                    "bytes, out holds 4") == 0);
    CHECK(out[0] == 0);
    CHECK_STATUS(vdev_device_canonical_name("gpu:0", out, 13), VDEV_ERR_INVALID_ARG);
    CHECK_OK(vdev_device_canonical_name("gpu:0", out, 14));
    CHECK(strcmp(out, "/device:GPU:0") == 0);
}

/* A malformed name is refused before the runtime starts. */
static void test_garbage_before_startup(void)
{
    check_fresh("3x1GiB");
    char out[64];
    CHECK_STATUS(vdev_device_canonical_name("GPU:x", out, sizeof out), VDEV_ERR_INVALID_ARG);
    CHECK(!vdev_is_initialized());
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false)); /* still configurable */
}

static void test_missing(void)
{
    check_fresh("3x1GiB");
    static const struct {
        const char *name, *msg;
    } missing[] = {
        {"GPU:7", "/job:localhost/replica:0/task:0/device:GPU:7 unknown device (there are 3 "
                  "logical GPUs)"},
        {"/device:GPU:3", "/job:localhost/replica:0/task:0/device:GPU:3 unknown device"},
        {"gpu:1000000", "device:GPU:1000000 unknown device"},
        {"CPU:1", "/job:localhost/replica:0/task:0/device:CPU:1 unknown device (there is 1 CPU "
                  "device)"},
        {"/job:worker/replica:0/task:0/device:GPU:0",
         "/job:worker/replica:0/task:0/device:GPU:0 unknown device: only "
         "/job:localhost/replica:0/task:0 is local"},
        {"/job:localhost/replica:1/task:0/device:GPU:0", "unknown device"},
        {"/job:localhost/replica:0/task:3/device:GPU:0", "unknown device"},
        {"/task:1/cpu:0", "unknown device"},
    };
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++)
        expect_bad(__LINE__, missing[i].name, VDEV_ERR_NOT_FOUND, missing[i].msg);
    struct vdev_memory_info mi;
    CHECK_STATUS(vdev_memory_info("GPU:3", &mi), VDEV_ERR_NOT_FOUND);
    CHECK_MSG("device:GPU:3 unknown device");
    void *p = NULL;
    CHECK_STATUS(vdev_mem_alloc("GPU:3", 256, &p), VDEV_ERR_NOT_FOUND);
    CHECK_MSG("device:GPU:3 unknown device");

    /* Logical numbering decides what exists: two split GPUs make GPU:3. */
    check_fresh("2x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){1ull << 30, 1ull << 30},
                                             2));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){1ull << 30, 1ull << 30},
                                             2));
    expect_canonical(__LINE__, "GPU:3", "/device:GPU:3");
    expect_bad(__LINE__, "GPU:4", VDEV_ERR_NOT_FOUND,
               "/job:localhost/replica:0/task:0/device:GPU:4 unknown device (there are 4 logical "
               "GPUs)");
    /* One logical GPU: "there is 1 logical GPU". */
    check_fresh("1x8GiB");
    expect_bad(__LINE__, "GPU:1", VDEV_ERR_NOT_FOUND,
               "device:GPU:1 unknown device (there is 1 logical GPU)");
}

/* Physical names: accepted by configuration, refused by logical queries. */
static void test_physical(void)
{
    check_fresh("3x1GiB");
    struct vdev_device_name dn;
    CHECK_OK(vdev_parse_device_name("/physical_device:GPU:2", &dn));
    CHECK(dn.type == VDEV_DEVICE_GPU && dn.index == 2 && dn.physical == 1);
    CHECK_OK(vdev_parse_device_name("/physical_device:CPU:0", &dn));
    CHECK(dn.type == VDEV_DEVICE_CPU && dn.index == 0 && dn.physical == 1);
    CHECK_OK(vdev_parse_device_name("/job:localhost/replica:0/task:0/device:GPU:1", &dn));
    CHECK(dn.type == VDEV_DEVICE_GPU && dn.index == 1 && dn.physical == 0);
    CHECK_OK(vdev_parse_device_name("cpu:0", &dn));
    CHECK(dn.type == VDEV_DEVICE_CPU && dn.index == 0 && dn.physical == 0);
    CHECK_OK(vdev_parse_device_name("/physical_device:GPU", &dn)); /* no index: has_index 0 */
    CHECK(dn.type == VDEV_DEVICE_GPU && !dn.has_index && dn.index == -1 && dn.physical == 1);
    CHECK_OK(vdev_parse_device_name("GPU:3", &dn));
    CHECK(dn.has_index && dn.index == 3);
    CHECK_STATUS(vdev_config_set_memory_growth("/physical_device:GPU", true), VDEV_ERR_NOT_FOUND);
    CHECK_MSG("Unrecognized device: /physical_device:GPU");
    CHECK_STATUS(vdev_parse_device_name("/physical_device:TPU:0", &dn), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("Unknown device type 'TPU'");
    CHECK(!vdev_is_initialized()); /* parsing alone starts nothing */

    /* Every configuration call takes the physical forms and the short ones. */
    CHECK_OK(vdev_config_set_memory_growth("/physical_device:GPU:0", false));
    CHECK_OK(vdev_config_set_memory_growth("gpu:1", false));
    CHECK_OK(vdev_config_set_memory_growth("/GPU:2", false));
    int g = 9;
    CHECK_OK(vdev_config_get_memory_growth("/physical_device:GPU:2", &g));
    CHECK(g == 0);
    CHECK_OK(vdev_config_set_memory_fraction("/physical_device:GPU:1", 0.5));
    CHECK_OK(vdev_config_set_logical_devices("/physical_device:GPU:2",
                                             (const uint64_t[]){1ull << 20}, 1));
    CHECK_STATUS(vdev_config_set_memory_growth("/physical_device:GPU:3", true),
                 VDEV_ERR_NOT_FOUND);
    CHECK_MSG("Unrecognized device: /physical_device:GPU:3");

    static const char *const phys[] = {"/physical_device:GPU:0", "/physical_device:CPU:0",
                                       "physical_device:GPU:1"};
    for (size_t i = 0; i < sizeof phys / sizeof phys[0]; i++) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "'%s' is a physical device; ops and memory queries take a logical device such "
                 "as /device:GPU:0",
                 phys[i]);
        expect_bad(__LINE__, phys[i], VDEV_ERR_INVALID_ARG, msg);
        struct vdev_memory_info mi;
        CHECK_STATUS(vdev_memory_info(phys[i], &mi), VDEV_ERR_INVALID_ARG);
        CHECK_MSG("is a physical device");
        void *p = NULL;
        CHECK_STATUS(vdev_mem_alloc(phys[i], 256, &p), VDEV_ERR_INVALID_ARG);
        CHECK_STATUS(vdev_memory_reset_peak(phys[i]), VDEV_ERR_INVALID_ARG);
        CHECK_STATUS(vdev_memory_release_cached(phys[i], NULL), VDEV_ERR_INVALID_ARG);
    }
}

int main(void)
{
    test_accepted();
    test_garbage();
    test_garbage_before_startup();
    test_missing();
    test_physical();
    check_fresh(NULL);
    return check_done();
}
