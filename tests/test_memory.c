/* test_memory.c — memory accounting through the public API, on simulated GPUs.
 *
 * What the allocator tests check against a fake device, checked here end to
 * end through vdev_mem_alloc(), vdev_memory_info(), vdev_memory_reset_peak()
 * and vdev_memory_release_cached() on a logical device: releasing restarts
 * growth at 2 MiB, largest_alloc_size and its reset, the OOM message that
 * names exhaustion or fragmentation with what would help, and the empty
 * regions of a 64 MiB logical device that stand between it and a 60 MiB
 * request, and the VDEV_OOM_REPORT report kept for the thread.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)

static struct vdev_memory_info info(const char *dev)
{
    struct vdev_memory_info mi;
    memset(&mi, 0xff, sizeof mi);
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi;
}

/* "allocate 1 MiB, free, release" forty times: a 2 MiB region every time
 * (it used to double on: 2, 4, 8 MiB ... then the whole card). */
static void test_release_restarts_growth(void)
{
    check_fresh("1x16GiB");
    for (int i = 0; i < 40; i++) {
        void *p = NULL;
        CHECK_OK(vdev_mem_alloc("GPU:0", MiB, &p));
        CHECK_EQ_U64(info("GPU:0").bytes_reserved, 2 * MiB);
        CHECK_OK(vdev_mem_free("GPU:0", p));
        uint64_t released = 0;
        CHECK_OK(vdev_memory_release_cached("GPU:0", &released));
        CHECK_EQ_U64(released, 2 * MiB);
    }
    CHECK_EQ_U64(info("GPU:0").peak_bytes_reserved, 2 * MiB);
}

/* largest_alloc_size: the largest allocation after rounding, on every logical
 * device (CPU too); vdev_memory_reset_peak() sets it to 0 (TensorFlow's
 * ClearStats); a failed allocation does not count. */
static void test_largest_alloc_size(void)
{
    check_fresh("1x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){64 * MiB, 64 * MiB}, 2));
    CHECK_EQ_U64(info("GPU:0").largest_alloc_size, 0);
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 1000, &a));
    CHECK_EQ_U64(info("GPU:0").largest_alloc_size, 1024);
    CHECK_OK(vdev_mem_alloc("GPU:0", 3 * MiB + 1, &b));
    CHECK_OK(vdev_mem_free("GPU:0", b));
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 65 * MiB, &c), VDEV_ERR_OOM);
    struct vdev_memory_info mi = info("GPU:0");
    CHECK_EQ_U64(mi.largest_alloc_size, 3 * MiB + 256);
    CHECK_EQ_U64(info("GPU:1").largest_alloc_size, 0); /* per device */
    CHECK_OK(vdev_memory_reset_peak("GPU:0"));
    mi = info("GPU:0");
    CHECK_EQ_U64(mi.largest_alloc_size, 0);
    CHECK_EQ_U64(mi.peak_bytes_in_use, 1024);
    CHECK_OK(vdev_mem_alloc("GPU:0", 300, &c));
    CHECK_EQ_U64(info("GPU:0").largest_alloc_size, 512);
    CHECK_OK(vdev_mem_alloc("CPU:0", 5000, &b));
    CHECK_EQ_U64(info("CPU:0").largest_alloc_size, 5120);
    CHECK_OK(vdev_mem_free("CPU:0", b));
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:0", c));
}

/* A 64 MiB logical device that allocated and freed 32 x 2 MiB holds six
 * empty regions (2, 4, 8, 16, 32, 2 MiB) and cannot serve 60 MiB from them:
 * the allocator collects them (after waiting for the device's stream) and
 * the request fits, as TensorFlow's BFC garbage collection makes it fit. */
static void test_empty_regions_before_oom(void)
{
    check_fresh("1x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){64 * MiB}, 1));
    void *p[32], *big = NULL;
    for (int i = 0; i < 32; i++)
        CHECK_OK(vdev_mem_alloc("GPU:0", 2 * MiB, &p[i]));
    CHECK_EQ_U64(info("GPU:0").n_regions, 6);
    for (int i = 0; i < 32; i++)
        CHECK_OK(vdev_mem_free("GPU:0", p[i]));
    /* The six empty regions are collected before the OOM, as TensorFlow's BFC
     * does, and one region serves the request. */
    CHECK_OK(vdev_mem_alloc("GPU:0", 60 * MiB, &big));
    struct vdev_memory_info mi = info("GPU:0");
    CHECK_EQ_U64(mi.n_regions, 1);
    CHECK_EQ_U64(mi.bytes_reserved, 64 * MiB); /* 2 MiB doubled to 64: the limit */
    /* Exhaustion: 60 MiB in use, 8 MiB more asked of 64 MiB. */
    void *more = NULL;
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 8 * MiB, &more), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 8.00 MiB (8388608 bytes) on /device:GPU:0: 60.00 MiB in use "
              "of 64.00 MiB limit, largest free block 4.00 MiB; the limit is short by 4.00 MiB; "
              "would help: a larger limit, a smaller batch");
    CHECK_OK(vdev_mem_free("GPU:0", big));
}

/* The tensor layer keeps the TensorFlow-style first part and passes the
 * allocator's diagnosis on. */
static void test_tensor_oom_message(void)
{
    check_fresh("1x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){64 * MiB}, 1));
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *t = vdev_tensor_zeros((const int64_t[]){4096, 8192}, 2, VDEV_F32);
    CHECK(t == NULL);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating tensor with shape[4096,8192] and type float (128.00 MiB) on "
              "/job:localhost/replica:0/task:0/device:GPU:0: 0 B in use of 64.00 MiB limit, "
              "largest free block 0 B; the limit is short by 64.00 MiB; would help: a larger "
              "limit, a smaller batch");
    vdev_device_pop();
}

static void *other_thread_report(void *out)
{
    *(const char **)out = vdev_last_oom_report();
    return NULL;
}

static int starts_with(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* VDEV_OOM_REPORT: the report printed on stderr is also kept for the thread
 * (vdev_last_oom_report), for bindings to hand to the program. */
static void test_oom_report_kept(void)
{
    check_fresh("1x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){64 * MiB}, 1));
    void *h;
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 65 * MiB, &h), VDEV_ERR_OOM);
    CHECK_STR(vdev_last_oom_report(), ""); /* the variable is off */

    check_fresh("1x8GiB");
    setenv("VDEV_OOM_REPORT", "1", 1);
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){64 * MiB}, 1));
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *t = vdev_tensor_zeros((const int64_t[]){4096, 8192}, 2, VDEV_F32);
    CHECK(t == NULL);
    char first[1024];
    snprintf(first, sizeof first, "%s\n", vdev_last_error());
    const char *r = vdev_last_oom_report();
    CHECK(starts_with(first, "OOM when allocating tensor with shape[4096,8192]"));
    CHECK(starts_with(r, first));
    CHECK(strstr(r, "\nAllocator (/device:GPU:0) state: ") != NULL);
    CHECK(strstr(r, "\nLargest free block: ") != NULL);
    const char *other = NULL;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread_report, &other) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(other != NULL && other[0] == '\0'); /* per thread */
    vdev_device_pop();
    /* the next one replaces it */
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 65 * MiB, &h), VDEV_ERR_OOM);
    snprintf(first, sizeof first, "%s\n", vdev_last_error());
    CHECK(!starts_with(first, "OOM when allocating tensor"));
    CHECK(starts_with(vdev_last_oom_report(), first));
}

int main(void)
{
    test_release_restarts_growth();
    test_largest_alloc_size();
    test_empty_regions_before_oom();
    test_tensor_oom_message();
    test_oom_report_kept();
    check_fresh(NULL);
    return check_done();
}
