/* test_logical_cpu.c — the host CPU split into several logical CPUs, as
 * TensorFlow's set_logical_device_configuration(cpu, [LogicalDeviceConfiguration()] * n)
 * does for its multi-device tests: /device:CPU:0..n-1, each with its own
 * allocator over host memory (so each has its own statistics), ops placed on
 * them running on the host, copies between them counted, and every listing
 * and report covering them. From code and from VDEV_LOGICAL_DEVICES ("cpu:4"). */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GiB (1ull << 30)

static const int64_t SHAPE[2] = {64, 64}; /* 16 KiB of f32 */

#define EXPECT_ERR(call, code, sub)                                                                \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_MSG(sub);                                                                            \
    } while (0)

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    memset(&mi, 0, sizeof mi);
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_in_use;
}

/* The logical devices: n_cpu CPUs then n_gpu GPUs, named and numbered. */
static void expect_devices(int line, int n_cpu, int n_gpu)
{
    struct vdev_logical_device ld[32];
    int n = 0;
    enum vdev_status st = vdev_list_logical_devices(ld, 32, &n);
    int ok = st == VDEV_OK && n == n_cpu + n_gpu;
    for (int i = 0; ok && i < n; i++) {
        char want[64];
        int gpu = i >= n_cpu;
        int idx = gpu ? i - n_cpu : i;
        snprintf(want, sizeof want, "/device:%s:%d", gpu ? "GPU" : "CPU", idx);
        ok = !strcmp(ld[i].name, want) && ld[i].index == idx &&
             ld[i].type == (gpu ? VDEV_DEVICE_GPU : VDEV_DEVICE_CPU) &&
             !strcmp(ld[i].backend, gpu ? "sim" : "cpu") && (gpu || ld[i].physical_index == 0) &&
             ld[i].limit_bytes > 0;
    }
    if (ok)
        check_passed++;
    else
        check_fail(__FILE__, line, "expected %d CPUs and %d GPUs, got %d devices (%s)", n_cpu,
                   n_gpu, n, vdev_last_error());
}

static void test_from_code(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 4));
    expect_devices(__LINE__, 4, 2);
    char name[64];
    CHECK_OK(vdev_device_canonical_name("cpu:3", name, sizeof name));
    CHECK_STR(name, "/device:CPU:3");
    EXPECT_ERR(vdev_device_canonical_name("CPU:4", name, sizeof name), VDEV_ERR_NOT_FOUND,
               "/job:localhost/replica:0/task:0/device:CPU:4 unknown device (there are 4 CPU "
               "devices)");
    /* The default device is still GPU:0. */
    vdev_tensor_t *d = vdev_tensor_zeros(SHAPE, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(d), "/device:GPU:0");
    vdev_tensor_free(d);

    /* An op on CPU:1: its memory and its count belong to CPU:1 alone. */
    uint64_t cpu0 = in_use("CPU:0");
    CHECK_OK(vdev_device_push("CPU:1"));
    vdev_tensor_t *a = vdev_tensor_fill(SHAPE, 2, VDEV_F32, -2.0);
    vdev_tensor_t *r = vdev_relu(a);
    CHECK_OK(vdev_device_pop());
    CHECK(a && r);
    CHECK_STR(vdev_tensor_device(r), "/device:CPU:1");
    CHECK_EQ_U64(in_use("CPU:1"), 2 * 64 * 64 * 4);
    CHECK_EQ_U64(in_use("CPU:0"), cpu0);
    CHECK_EQ_U64(in_use("CPU:2"), 0);
    CHECK_EQ_U64(vdev_placement_op_count("Relu", "CPU:1"), 1);
    CHECK_EQ_U64(vdev_placement_op_count("Relu", "CPU:0"), 0);
    CHECK_EQ_U64(vdev_placement_op_count(NULL, "/device:CPU:1"), 1);
    float out[64 * 64];
    CHECK_OK(vdev_tensor_to_host(r, out, sizeof out));
    CHECK(out[0] == 0.0f && out[4095] == 0.0f);
    /* Unscoped, the op follows its input to CPU:1. */
    vdev_tensor_t *n = vdev_mul_scalar(a, -1.0f);
    CHECK_STR(vdev_tensor_device(n), "/device:CPU:1");
    CHECK_OK(vdev_tensor_to_host(n, out, sizeof out));
    CHECK(out[7] == 2.0f);
    /* Copies between logical CPUs are copies, and counted. */
    vdev_tensor_t *c = vdev_tensor_to(r, "CPU:3");
    CHECK_STR(vdev_tensor_device(c), "/device:CPU:3");
    CHECK_EQ_U64(in_use("CPU:3"), 64 * 64 * 4);
    CHECK_EQ_U64(vdev_placement_bytes_copied("CPU:1", "CPU:3"), 64 * 64 * 4);
    vdev_tensor_t *g = vdev_tensor_to(c, "GPU:1");
    CHECK_OK(vdev_tensor_to_host(g, out, sizeof out));
    CHECK(out[100] == 0.0f);
    CHECK_EQ_U64(vdev_placement_bytes_copied("CPU:3", "GPU:1"), 64 * 64 * 4);
    vdev_tensor_free(a);
    vdev_tensor_free(r);
    vdev_tensor_free(n);
    vdev_tensor_free(c);
    vdev_tensor_free(g);
    CHECK_EQ_U64(in_use("CPU:1"), 0);
    CHECK_EQ_U64(in_use("CPU:3"), 0);

    /* The device report has a line per logical CPU. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    vdev_device_report(f);
    vdev_placement_report(f);
    fclose(f);
    CHECK(buf && strstr(buf, "\n/device:CPU:3 ") && strstr(buf, "\n/device:GPU:1 "));
    CHECK(buf && strstr(buf, "/device:CPU:1    -> /device:CPU:3"));
    CHECK(buf && strstr(buf, "Relu                     /device:CPU:1"));
    free(buf);

    /* After start-up: the same split is a no-op, another is refused. */
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 4));
    CHECK_OK(vdev_config_set_logical_devices("/physical_device:CPU:0",
                                             (const uint64_t[]){0, 0, 0, 0}, 4));
    EXPECT_ERR(vdev_config_set_logical_devices("CPU:0", NULL, 2), VDEV_ERR_ALREADY_INITIALIZED,
               "Virtual devices cannot be modified after being initialized");
    EXPECT_ERR(vdev_config_set_logical_devices("CPU:0", NULL, 0), VDEV_ERR_ALREADY_INITIALIZED,
               "Virtual devices cannot be modified after being initialized");
}

static void test_rules(void)
{
    check_fresh("1x1GiB");
    /* TensorFlow's words for a memory limit on a CPU. */
    EXPECT_ERR(vdev_config_set_logical_devices("CPU:0", (const uint64_t[]){0, GiB}, 2),
               VDEV_ERR_INVALID_ARG,
               "Setting memory limit on CPU virtual devices is currently not supported");
    EXPECT_ERR(vdev_config_set_logical_devices("CPU:0", NULL, 17), VDEV_ERR_INVALID_ARG,
               "17 logical devices requested on CPU:0; at most 16 CPUs");
    EXPECT_ERR(vdev_config_set_logical_devices("CPU:1", NULL, 2), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: CPU:1");
    EXPECT_ERR(vdev_config_set_logical_devices("CPU:0", NULL, -1), VDEV_ERR_INVALID_ARG,
               "bad arguments");
    /* Zero limits are no limits; n == 0 and n == 1 leave one CPU. */
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", (const uint64_t[]){0, 0}, 2));
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 0));
    expect_devices(__LINE__, 1, 1);
    check_fresh("1x1GiB");
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 1));
    expect_devices(__LINE__, 1, 1);
    /* 16 CPUs at most; with logical GPUs, 129 logical devices in all. */
    check_fresh("8x1GiB");
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 16));
    uint64_t lim[16];
    for (int i = 0; i < 16; i++)
        lim[i] = 1ull << 20;
    for (int g = 0; g < 8; g++) {
        char dev[16];
        snprintf(dev, sizeof dev, "GPU:%d", g);
        CHECK_OK(vdev_config_set_logical_devices(dev, lim, 16));
    }
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "16 logical CPUs and 128 logical GPUs: more than 129 logical devices in all");
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 1));
    CHECK_OK(vdev_init());
}

/* No GPU: the logical CPUs are all there is; CPU:0 is the default. */
static void test_cpu_only(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_config_set_visible_devices(NULL, 0));
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 3));
    expect_devices(__LINE__, 3, 0);
    vdev_tensor_t *t = vdev_tensor_ones(SHAPE, 2, VDEV_F32);
    CHECK_STR(vdev_tensor_device(t), "/device:CPU:0");
    CHECK_OK(vdev_device_push("/job:localhost/replica:0/task:0/device:CPU:2"));
    vdev_tensor_t *u = vdev_mul_scalar(t, 2.0f);
    CHECK_OK(vdev_device_pop());
    CHECK_STR(vdev_tensor_device(u), "/device:CPU:2");
    CHECK_EQ_U64(vdev_placement_bytes_copied("CPU:0", "CPU:2"), 64 * 64 * 4);
    vdev_tensor_t *s = vdev_sum_all(u);
    CHECK(vdev_tensor_item(s) == 2.0f * 64 * 64);
    CHECK_STR(vdev_tensor_device(s), "/device:CPU:2");
    vdev_tensor_free(s);
    vdev_tensor_free(t);
    vdev_tensor_free(u);
}

/* VDEV_LOGICAL_DEVICES: a "cpu:N" part splits the CPU; code wins. */
static void test_env(void)
{
    check_fresh("2x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "cpu:4;1:1GiB,1GiB", 1);
    expect_devices(__LINE__, 4, 3);
    check_fresh("2x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", " cpu : 4 ; 1:1GiB,1GiB", 1); /* spaces around its parts */
    expect_devices(__LINE__, 4, 3);
    check_fresh("1x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "CPU:2", 1);
    expect_devices(__LINE__, 2, 1);
    check_fresh("1x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "cpu:3", 1);
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 2));
    expect_devices(__LINE__, 2, 1);
    static const struct {
        const char *value, *msg;
    } bad[] = {
        {"cpu:0", "VDEV_LOGICAL_DEVICES=\"cpu:0\": bad CPU count '0' (1 to 16 logical CPUs, "
                  "e.g. cpu:4)"},
        {"cpu:17", "bad CPU count '17' (1 to 16"},
        {"cpu:", "bad CPU count ''"},
        {"cpu:2GiB", "bad CPU count '2GiB'"},
        {"cpu: 2x ", "VDEV_LOGICAL_DEVICES=\"cpu: 2x \": bad CPU count '2x' (1 to 16 logical "
                     "CPUs, e.g. cpu:4)"},
        {"cpu: 1 2", "bad CPU count '1 2'"},
        {"c pu:2", "bad part 'c pu:2'"},
        {"cpu:2,2", "bad CPU count '2,2'"},
        {"cpu:2;cpu:3", "VDEV_LOGICAL_DEVICES=\"cpu:2;cpu:3\": the CPU is given twice"},
        {"cpu2", "bad part 'cpu2'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_fresh("1x4GiB");
        setenv("VDEV_LOGICAL_DEVICES", bad[i].value, 1);
        CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
        CHECK_MSG(bad[i].msg);
    }
}

/* One replica per logical CPU, each driven by its own thread, as the
 * data-parallel strategies run them: every step's ops on its own CPU. */
struct replica {
    char dev[16];   /* "CPU:1" */
    char want[32];  /* "/device:CPU:1" */
    int steps;
    float result;
    int ok;
};

static void *run_replica(void *arg)
{
    struct replica *r = arg;
    r->ok = vdev_device_push(r->dev) == VDEV_OK;
    vdev_tensor_t *w = vdev_variable(vdev_tensor_fill(SHAPE, 2, VDEV_F32, 0.5));
    /* No vdev_scope_begin here: a thread's scope buffer is the tensor
     * layer's to free at thread exit; each tensor is freed by hand. */
    for (int i = 0; r->ok && i < r->steps; i++) {
        vdev_tensor_t *x = vdev_tensor_fill(SHAPE, 2, VDEV_F32, 1.0);
        vdev_tensor_t *m = vdev_matmul(x, w, false, false);
        vdev_tensor_t *a = vdev_relu(m);
        vdev_tensor_t *y = vdev_mean_all(a);
        r->result = vdev_tensor_item(y);
        if (!y || strcmp(vdev_tensor_device(y), r->want) != 0)
            r->ok = 0;
        vdev_tensor_free(x);
        vdev_tensor_free(m);
        vdev_tensor_free(a);
        vdev_tensor_free(y);
    }
    vdev_tensor_free(w);
    if (r->ok)
        r->ok = vdev_device_pop() == VDEV_OK;
    return NULL;
}

static void test_threads(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 4));
    CHECK_OK(vdev_init());
    struct replica r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        snprintf(r[i].dev, sizeof r[i].dev, "CPU:%d", i);
        snprintf(r[i].want, sizeof r[i].want, "/device:CPU:%d", i);
        r[i].steps = 20;
        r[i].result = 0;
        r[i].ok = 0;
        CHECK(pthread_create(&th[i], NULL, run_replica, &r[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK(r[i].ok);
        CHECK(r[i].result == 32.0f); /* 64 × 0.5 */
        char dev[32];
        snprintf(dev, sizeof dev, "/device:CPU:%d", i);
        CHECK_EQ_U64(vdev_placement_op_count("MatMul", dev), 20);
        struct vdev_memory_info mi;
        CHECK_OK(vdev_memory_info(dev, &mi));
        CHECK_EQ_U64(mi.bytes_in_use, 0);
        CHECK(mi.peak_bytes_in_use >= 3 * 64 * 64 * 4);
    }
    CHECK_EQ_U64(vdev_placement_bytes_copied(NULL, NULL), 0);
}

int main(void)
{
    test_from_code();
    test_rules();
    test_cpu_only();
    test_env();
    test_threads();
    check_fresh(NULL);
    return check_done();
}
