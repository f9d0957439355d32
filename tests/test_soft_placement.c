/* test_soft_placement.c — soft device placement, an option off by default:
 * a scope naming a device that does not exist fails (vdev's default), or with
 * vdev_config_set_soft_device_placement(true) / VDEV_SOFT_DEVICE_PLACEMENT=1
 * sends its ops where TensorFlow's eager soft placement does (GPU:0, else
 * CPU:0) and warns once per missing device on stderr. Stderr is captured
 * around the pushes. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int64_t SHAPE[2] = {2, 2};

#define EXPECT_ERR(call, code, sub)                                                                \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_MSG(sub);                                                                            \
    } while (0)

static void test_default_off(void)
{
    check_fresh("3x1GiB");
    CHECK(!vdev_config_get_soft_device_placement());
    EXPECT_ERR(vdev_device_push("GPU:42"), VDEV_ERR_NOT_FOUND,
               "/job:localhost/replica:0/task:0/device:GPU:42 unknown device (there are 3 "
               "logical GPUs)");
    CHECK(vdev_device_current() == NULL);
}

static void test_soft_on(void)
{
    check_fresh("3x1GiB");
    vdev_config_set_soft_device_placement(true);
    CHECK(vdev_config_get_soft_device_placement());
    check_capture_begin();
    enum vdev_status st = vdev_device_push("GPU:42");
    vdev_tensor_t *a = vdev_tensor_ones(SHAPE, 2, VDEV_F32);
    vdev_tensor_t *r = vdev_relu(a);
    char *err = check_capture_end();
    CHECK_OK(st);
    /* The scope reports the device it named; its ops ran on GPU:0. */
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:42");
    CHECK_STR(vdev_tensor_device(a), "/device:GPU:0");
    CHECK_STR(vdev_tensor_device(r), "/device:GPU:0");
    CHECK_EQ_U64(vdev_placement_op_count("Relu", "GPU:0"), 1);
    CHECK_STR(err, "vdev: warning: soft device placement: /job:localhost/replica:0/task:0/"
                   "device:GPU:42 does not exist; ops placed there run on "
                   "/job:localhost/replica:0/task:0/device:GPU:0\n");
    free(err);
    CHECK_OK(vdev_device_pop());
    /* Once per device: the same name again says nothing; another one warns. */
    check_capture_begin();
    CHECK_OK(vdev_device_push("/device:GPU:42"));
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("gpu:43"));
    CHECK_OK(vdev_device_pop());
    err = check_capture_end();
    CHECK_STR(err, "vdev: warning: soft device placement: /job:localhost/replica:0/task:0/"
                   "device:GPU:43 does not exist; ops placed there run on "
                   "/job:localhost/replica:0/task:0/device:GPU:0\n");
    free(err);
    /* A missing CPU goes to GPU:0 too: the type is dropped, as TensorFlow's
     * eager placement drops it, and GPUs come first in its priority order. */
    check_capture_begin();
    CHECK_OK(vdev_device_push("CPU:7"));
    vdev_tensor_t *c = vdev_tensor_zeros(SHAPE, 2, VDEV_F32);
    err = check_capture_end();
    CHECK_STR(vdev_tensor_device(c), "/device:GPU:0");
    CHECK(err && strstr(err, "device:CPU:7 does not exist; ops placed there run on "
                             "/job:localhost/replica:0/task:0/device:GPU:0\n"));
    free(err);
    /* Inside it, "CPU" takes its index 7: missing too, so GPU:0 again. */
    CHECK_OK(vdev_device_push("CPU"));
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:CPU:7");
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_pop());
    /* Devices that exist are used as named. */
    CHECK_OK(vdev_device_push("GPU:2"));
    CHECK_STR(vdev_device_current(), "/job:localhost/replica:0/task:0/device:GPU:2");
    vdev_tensor_t *g = vdev_tensor_zeros(SHAPE, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(g), "/device:GPU:2");
    CHECK_OK(vdev_device_pop());
    /* Malformed names and other jobs stay errors. */
    EXPECT_ERR(vdev_device_push("GPU:x"), VDEV_ERR_INVALID_ARG, "Bad device index 'x'");
    EXPECT_ERR(vdev_device_push("/job:worker/device:GPU:0"), VDEV_ERR_NOT_FOUND,
               "only /job:localhost/replica:0/task:0 is local");
    /* Memory queries are not scopes: a missing device is still missing. */
    struct vdev_memory_info mi;
    EXPECT_ERR(vdev_memory_info("GPU:42", &mi), VDEV_ERR_NOT_FOUND,
               "No matching devices found for 'GPU:42'");
    /* It may be turned off at any time. */
    vdev_config_set_soft_device_placement(false);
    EXPECT_ERR(vdev_device_push("GPU:42"), VDEV_ERR_NOT_FOUND, "GPU:42 unknown device");
    vdev_tensor_free(a);
    vdev_tensor_free(r);
    vdev_tensor_free(c);
    vdev_tensor_free(g);
    /* A shutdown returns to the default, and forgets the warnings given. */
    vdev_shutdown();
    CHECK(!vdev_config_get_soft_device_placement());
}

/* Without a GPU, the fallback is CPU:0. */
static void test_no_gpu(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_config_set_visible_devices(NULL, 0));
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 2));
    vdev_config_set_soft_device_placement(true);
    check_capture_begin();
    enum vdev_status st = vdev_device_push("GPU:0");
    vdev_tensor_t *t = vdev_tensor_zeros(SHAPE, 2, VDEV_F32);
    char *err = check_capture_end();
    CHECK_OK(st);
    CHECK_STR(vdev_tensor_device(t), "/device:CPU:0");
    CHECK_STR(err, "vdev: warning: soft device placement: /job:localhost/replica:0/task:0/"
                   "device:GPU:0 does not exist; ops placed there run on "
                   "/job:localhost/replica:0/task:0/device:CPU:0\n");
    free(err);
    CHECK_OK(vdev_device_pop());
    check_capture_begin();
    CHECK_OK(vdev_device_push("CPU:1")); /* exists: no warning */
    vdev_tensor_t *u = vdev_tensor_zeros(SHAPE, 2, VDEV_F32);
    err = check_capture_end();
    CHECK_STR(err, "");
    free(err);
    CHECK_STR(vdev_tensor_device(u), "/device:CPU:1");
    CHECK_OK(vdev_device_pop());
    vdev_tensor_free(t);
    vdev_tensor_free(u);
}

static void test_env(void)
{
    check_fresh("1x1GiB");
    setenv("VDEV_SOFT_DEVICE_PLACEMENT", "1", 1);
    CHECK_OK(vdev_init());
    CHECK(vdev_config_get_soft_device_placement());
    check_capture_begin();
    enum vdev_status st = vdev_device_push("GPU:5");
    char *err = check_capture_end();
    CHECK_OK(st);
    CHECK(err && strstr(err, "device:GPU:5 does not exist"));
    free(err);
    CHECK_OK(vdev_device_pop());
    /* Code wins. */
    check_fresh("1x1GiB");
    setenv("VDEV_SOFT_DEVICE_PLACEMENT", "true", 1);
    vdev_config_set_soft_device_placement(false);
    CHECK_OK(vdev_init());
    CHECK(!vdev_config_get_soft_device_placement());
    EXPECT_ERR(vdev_device_push("GPU:5"), VDEV_ERR_NOT_FOUND, "GPU:5 unknown device");
    /* Malformed: an error at start-up that names the variable. */
    check_fresh("1x1GiB");
    setenv("VDEV_SOFT_DEVICE_PLACEMENT", "soft", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "VDEV_SOFT_DEVICE_PLACEMENT=\"soft\" could not be parsed: valid values are true "
               "or false (any case), 1 or 0");
    CHECK(!vdev_is_initialized());
}

int main(void)
{
    test_default_off();
    test_soft_on();
    test_no_gpu();
    test_env();
    check_fresh(NULL);
    return check_done();
}
