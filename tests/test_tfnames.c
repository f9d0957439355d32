/* test_tfnames.c — where vdev mirrors TensorFlow's device names and numbering:
 * visible GPUs numbered in physical order (tf.config.set_visible_devices) or
 * in the order listed (the VDEV_VISIBLE_DEVICES list, as visible_device_list
 * and CUDA_VISIBLE_DEVICES), device scopes without an index, the name a scope
 * reports, TensorFlow's words for malformed names in memory queries and for a
 * bad visible-device list, and job names that must start with a letter. Runs
 * on simulated GPUs. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define GiB (1ull << 30)

static const int64_t SHAPE[2] = {2, 3};

#define EXPECT_ERR(call, code, sub)                                                                \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_MSG(sub);                                                                            \
    } while (0)

/* The physical GPU behind each logical GPU, in order; n is their number. */
static void expect_physical(int line, const int *phys, int n)
{
    struct vdev_logical_device ld[16];
    int got = 0;
    enum vdev_status st = vdev_list_logical_devices(ld, 16, &got);
    int ok = st == VDEV_OK && got == 1 + n;
    for (int i = 0; ok && i < n; i++)
        ok = ld[1 + i].type == VDEV_DEVICE_GPU && ld[1 + i].index == i &&
             ld[1 + i].physical_index == phys[i];
    if (ok) {
        check_passed++;
        return;
    }
    check_fail(__FILE__, line, "logical GPUs differ (%s, %d devices)", vdev_last_error(), got);
    for (int i = 1; i < got && i < 16; i++)
        fprintf(stderr, "  %s on physical GPU %d\n", ld[i].name, ld[i].physical_index);
}
#define EXPECT_PHYSICAL(...)                                                                       \
    do {                                                                                           \
        const int p_[] = {__VA_ARGS__};                                                            \
        expect_physical(__LINE__, p_, (int)(sizeof p_ / sizeof p_[0]));                            \
    } while (0)

/* tf.config.set_visible_devices([gpu2, gpu0]) numbers the visible GPUs in
 * physical order (context.py _compute_gpu_options walks the physical list). */
static void test_visible_order(void)
{
    check_fresh("3x16GiB");
    CHECK_OK(vdev_config_set_visible_devices((const int[]){2, 0}, 2));
    EXPECT_PHYSICAL(0, 2);
    /* Logical devices of each GPU follow it. */
    check_fresh("3x16GiB");
    CHECK_OK(vdev_config_set_visible_devices((const int[]){2, 1}, 2));
    CHECK_OK(vdev_config_set_logical_devices("GPU:2", (const uint64_t[]){GiB, GiB}, 2));
    EXPECT_PHYSICAL(1, 2, 2);
    /* After start-up the list is compared as given, as TensorFlow compares. */
    CHECK_OK(vdev_config_set_visible_devices((const int[]){2, 1}, 2));
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){1, 2}, 2),
               VDEV_ERR_ALREADY_INITIALIZED,
               "Visible devices cannot be modified after being initialized");
    /* The environment variable keeps its order, as visible_device_list and
     * CUDA_VISIBLE_DEVICES do ("2,0": GPU:0 is physical GPU 2). */
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "2,0", 1);
    EXPECT_PHYSICAL(2, 0);
}

/* A scope may name a type without an index (tf.device('GPU')): the index
 * comes from the enclosing scope, else 0, as DeviceSpec.make_merged_spec does. */
static void test_scope_without_index(void)
{
    check_fresh("3x1GiB");
    static const char *const gpu0[] = {"GPU", "gpu", "/gpu", "/GPU", "/device:GPU",
                                       "GPU:*", "/device:GPU:*", "/gpu:*",
                                       "/job:localhost/replica:0/task:0/device:GPU"};
    for (size_t i = 0; i < sizeof gpu0 / sizeof gpu0[0]; i++) {
        CHECK_OK(vdev_device_push(gpu0[i]));
        CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:0");
        vdev_tensor_t *t = vdev_tensor_zeros(SHAPE, 2, VDEV_F32);
        CHECK_STR(vdev_tensor_device(t), "/device:GPU:0");
        vdev_tensor_free(t);
        CHECK_OK(vdev_device_pop());
    }
    CHECK_OK(vdev_device_push("CPU"));
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:CPU:0");
    vdev_tensor_t *c = vdev_tensor_zeros(SHAPE, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(c), "/device:CPU:0");
    vdev_tensor_free(c);
    /* Inside GPU:2, "GPU" keeps the index 2. */
    CHECK_OK(vdev_device_push("GPU:2"));
    CHECK_OK(vdev_device_push("gpu"));
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:2");
    vdev_tensor_t *t = vdev_tensor_ones(SHAPE, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(t), "/device:GPU:2");
    vdev_tensor_free(t);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_pop());
    CHECK(vdev_device_current() == NULL);
    /* An index the enclosing scope gives that the type lacks: unknown device. */
    CHECK_OK(vdev_device_push("GPU:1"));
    EXPECT_ERR(vdev_device_push("CPU"), VDEV_ERR_NOT_FOUND,
               "/job:localhost/replica:0/task:0/device:CPU:1 unknown device (there is 1 CPU "
               "device)");
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:1");
    CHECK_OK(vdev_device_pop());
    /* Still malformed: an empty index, a type vdev lacks, two types. */
    EXPECT_ERR(vdev_device_push("GPU:"), VDEV_ERR_INVALID_ARG, "Bad device index ''");
    EXPECT_ERR(vdev_device_push("TPU"), VDEV_ERR_INVALID_ARG,
               "Unknown device type 'TPU' in the device spec: 'TPU' (vdev has CPU and GPU "
               "devices)");
    EXPECT_ERR(vdev_device_push("/gpu/cpu"), VDEV_ERR_INVALID_ARG,
               "Multiple device types are not allowed");
    EXPECT_ERR(vdev_device_push("/physical_device:GPU"), VDEV_ERR_INVALID_ARG,
               "is a physical device");
    CHECK(vdev_device_current() == NULL);
}

/* Memory queries need an index, with TensorFlow's words (tfe_wrapper.cc
 * GetMatchedDevice) for a name that does not parse. */
static void test_memory_query_words(void)
{
    check_fresh("2x1GiB");
    struct vdev_memory_info mi;
    static const char *const no_index[] = {"GPU", "CPU", "/device:GPU", "GPU:*"};
    for (size_t i = 0; i < sizeof no_index / sizeof no_index[0]; i++) {
        char want[256];
        snprintf(want, sizeof want,
                 "Failed parsing device name: '%s'. Note a valid device string should at least "
                 "contain a device type and a device index, like \"GPU:0\".",
                 no_index[i]);
        CHECK_STATUS(vdev_memory_info(no_index[i], &mi), VDEV_ERR_INVALID_ARG);
        CHECK_STR(vdev_last_error(), want);
    }
    EXPECT_ERR(vdev_memory_info("GPU:1x", &mi), VDEV_ERR_INVALID_ARG,
               "Failed parsing device name: 'GPU:1x': Bad device index '1x'");
    EXPECT_ERR(vdev_memory_info("GPU:CPU", &mi), VDEV_ERR_INVALID_ARG,
               "Failed parsing device name: 'GPU:CPU'");
    EXPECT_ERR(vdev_memory_reset_peak("banana"), VDEV_ERR_INVALID_ARG,
               "Failed parsing device name: 'banana': Unknown attribute 'banana'");
    EXPECT_ERR(vdev_memory_release_cached("", NULL), VDEV_ERR_INVALID_ARG,
               "Failed parsing device name: ''");
    void *p = NULL;
    EXPECT_ERR(vdev_mem_alloc("gpu", 256, &p), VDEV_ERR_INVALID_ARG,
               "Failed parsing device name: 'gpu'");
    CHECK(p == NULL);
    /* A name that parses but matches nothing: "No matching devices found". */
    EXPECT_ERR(vdev_memory_info("GPU:5", &mi), VDEV_ERR_NOT_FOUND,
               "No matching devices found for 'GPU:5': /job:localhost/replica:0/task:0/"
               "device:GPU:5 unknown device (there are 2 logical GPUs)");
    /* A device scope keeps tf.device's words. */
    EXPECT_ERR(vdev_device_push("GPU:5"), VDEV_ERR_NOT_FOUND,
               "/job:localhost/replica:0/task:0/device:GPU:5 unknown device (there are 2 "
               "logical GPUs)");
    CHECK(strstr(vdev_last_error(), "No matching") == NULL);
}

/* VDEV_VISIBLE_DEVICES errors in ParseVisibleDeviceList's words. */
static void test_visible_list_words(void)
{
    static const struct {
        const char *value, *msg;
    } bad[] = {
        {"0,abc", "VDEV_VISIBLE_DEVICES=\"0,abc\": Could not parse entry in "
                  "'VDEV_VISIBLE_DEVICES': 'abc'. VDEV_VISIBLE_DEVICES = 0,abc (expected GPU "
                  "indices such as 0,2; empty or -1 hides every GPU)"},
        {"x", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': 'x'."},
        {"0,,1", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': ''."},
        {"0,", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': ''."},
        {"-1,1", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '-1'."},
        {"1, x", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': ' x'."},
        {"1;2", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '1;2'."},
        {"7", "VDEV_VISIBLE_DEVICES=\"7\": 'VDEV_VISIBLE_DEVICES' listed an invalid Device id "
              "'7' but visible device count is 3"},
        {"0,99999999999", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '99999999999'."},
        {"1,1", "VDEV_VISIBLE_DEVICES=\"1,1\": VDEV_VISIBLE_DEVICES contained a duplicate "
                "entry: 1,1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_fresh("3x1GiB");
        setenv("VDEV_VISIBLE_DEVICES", bad[i].value, 1);
        CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
        CHECK_MSG(bad[i].msg);
    }
    /* The C call: a repeated index in the same words. */
    check_fresh("3x1GiB");
    EXPECT_ERR(vdev_config_set_visible_devices((const int[]){1, 0, 1}, 3), VDEV_ERR_INVALID_ARG,
               "the visible devices contained a duplicate entry: 1,0,1");
}

/* A job name starts with a letter (DeviceNameUtils IsJobName): otherwise the
 * name is malformed, not a device of another job. */
static void test_job_names(void)
{
    check_fresh("1x1GiB");
    char out[64];
    static const char *const bad[] = {"/job:123/replica:0/task:0/device:GPU:0",
                                      "/job:_x/device:GPU:0", "/job:a-b/device:GPU:0",
                                      "/job:local host/device:GPU:0", "/job:1localhost/gpu:0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[160];
        snprintf(want, sizeof want,
                 "Unknown attribute 'job' is encountered while parsing the device spec: '%s'. "
                 "(a job name starts with a letter, then letters, digits or '_')",
                 bad[i]);
        CHECK_STATUS(vdev_device_canonical_name(bad[i], out, sizeof out), VDEV_ERR_INVALID_ARG);
        CHECK_MSG(want);
        CHECK_STATUS(vdev_device_push(bad[i]), VDEV_ERR_INVALID_ARG);
        CHECK_MSG(want);
    }
    /* Well-formed jobs other than localhost are not here. */
    CHECK_STATUS(vdev_device_canonical_name("/job:worker_1/replica:0/task:0/device:GPU:0", out,
                                            sizeof out),
                 VDEV_ERR_NOT_FOUND);
    CHECK_MSG("only /job:localhost/replica:0/task:0 is local");
    CHECK_STATUS(vdev_device_canonical_name("/job:W2/device:GPU:0", out, sizeof out),
                 VDEV_ERR_NOT_FOUND);
    /* "*" leaves a field unspecified. */
    CHECK_OK(vdev_device_canonical_name("/job:*/replica:*/task:*/device:GPU:0", out, sizeof out));
    CHECK_STR(out, "/device:GPU:0");
}

int main(void)
{
    test_visible_order();
    test_scope_without_index();
    test_memory_query_words();
    test_visible_list_words();
    test_job_names();
    check_fresh(NULL);
    return check_done();
}
