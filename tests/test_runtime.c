/* test_runtime.c — logical devices at run time: memory information after
 * allocations and frees, peaks and their reset, handing cached regions back
 * to the card, out-of-memory errors that leave everything as it was, bad
 * frees, start-up that fails half way, and a machine without GPUs. */
#define _GNU_SOURCE
#include "check.h"
#include "config/config.h"
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define RESERVE (1536 * MiB)


#define EXPECT_ERR(call, code, sub)                                                                \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_MSG(sub);                                                                            \
    } while (0)

static struct vdev_memory_info info(const char *dev)
{
    struct vdev_memory_info mi;
    memset(&mi, 0xff, sizeof mi);
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi;
}

static uint64_t phys_free(int gpu)
{
    struct vdev_physical_device pd[8];
    int n = 0;
    CHECK_OK(vdev_list_physical_devices(pd, 8, &n));
    return gpu + 1 < n ? pd[gpu + 1].free_bytes : 0;
}

/* Every field but n_failed_allocs. */
static int same_info(const struct vdev_memory_info *a, const struct vdev_memory_info *b)
{
    return a->bytes_in_use == b->bytes_in_use && a->peak_bytes_in_use == b->peak_bytes_in_use &&
           a->bytes_reserved == b->bytes_reserved &&
           a->peak_bytes_reserved == b->peak_bytes_reserved && a->bytes_limit == b->bytes_limit &&
           a->largest_free_block == b->largest_free_block && a->n_allocs == b->n_allocs &&
           a->n_allocs_total == b->n_allocs_total && a->n_regions == b->n_regions &&
           a->fragmentation == b->fragmentation;
}

static void test_info_grow(void)
{
    check_fresh("1x8GiB");
    struct vdev_memory_info mi = info("GPU:0");
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK_EQ_U64(mi.peak_bytes_in_use, 0);
    CHECK_EQ_U64(mi.bytes_reserved, 0);
    CHECK_EQ_U64(mi.peak_bytes_reserved, 0);
    CHECK_EQ_U64(mi.bytes_limit, 8 * GiB - RESERVE);
    CHECK_EQ_U64(mi.largest_free_block, 0);
    CHECK_EQ_U64(mi.n_allocs, 0);
    CHECK_EQ_U64(mi.n_allocs_total, 0);
    CHECK_EQ_U64(mi.n_failed_allocs, 0);
    CHECK_EQ_U64(mi.n_regions, 0);
    CHECK(mi.fragmentation == 0.0);

    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 1000, &a)); /* 1024 after rounding */
    CHECK(a != NULL && (uintptr_t)a % 256 == 0);
    mi = info("GPU:0");
    CHECK_EQ_U64(mi.bytes_in_use, 1024);
    CHECK_EQ_U64(mi.peak_bytes_in_use, 1024);
    CHECK_EQ_U64(mi.bytes_reserved, 2 * MiB); /* the first region */
    CHECK_EQ_U64(mi.n_regions, 1);
    CHECK_EQ_U64(mi.largest_free_block, 2 * MiB - 1024);
    CHECK_EQ_U64(mi.n_allocs, 1);
    CHECK(mi.fragmentation == 0.0);
    CHECK_EQ_U64(phys_free(0), 8 * GiB - 2 * MiB);

    CHECK_OK(vdev_mem_alloc("GPU:0", 1, &b)); /* 256 */
    CHECK_OK(vdev_mem_alloc("GPU:0", 3 * MiB, &c)); /* a second region, twice the first */
    mi = info("GPU:0");
    CHECK_EQ_U64(mi.bytes_in_use, 1280 + 3 * MiB);
    CHECK_EQ_U64(mi.bytes_reserved, 6 * MiB);
    CHECK_EQ_U64(mi.peak_bytes_reserved, 6 * MiB);
    CHECK_EQ_U64(mi.n_regions, 2);
    CHECK_EQ_U64(mi.largest_free_block, 2 * MiB - 1280);
    CHECK_EQ_U64(mi.n_allocs, 3);
    CHECK_EQ_U64(mi.n_allocs_total, 3);
    uint64_t fr = 6 * MiB - (1280 + 3 * MiB);
    CHECK(mi.fragmentation == (double)(fr - (2 * MiB - 1280)) / (double)fr);
    CHECK_EQ_U64(phys_free(0), 8 * GiB - 6 * MiB);

    CHECK_OK(vdev_mem_free("GPU:0", c));
    mi = info("GPU:0");
    CHECK_EQ_U64(mi.bytes_in_use, 1280);
    CHECK_EQ_U64(mi.peak_bytes_in_use, 1280 + 3 * MiB);
    CHECK_EQ_U64(mi.n_allocs, 2);
    CHECK_EQ_U64(mi.n_allocs_total, 3);
    CHECK_EQ_U64(mi.largest_free_block, 4 * MiB);
    CHECK_EQ_U64(mi.bytes_reserved, 6 * MiB);

    CHECK_OK(vdev_memory_reset_peak("GPU:0"));
    mi = info("GPU:0");
    CHECK_EQ_U64(mi.peak_bytes_in_use, 1280);
    CHECK_EQ_U64(mi.peak_bytes_reserved, 6 * MiB);

    /* Regions still holding blocks stay; empty ones go back to the card. */
    uint64_t rel = 1;
    CHECK_OK(vdev_memory_release_cached("GPU:0", &rel));
    CHECK_EQ_U64(rel, 4 * MiB);
    mi = info("GPU:0");
    CHECK_EQ_U64(mi.bytes_reserved, 2 * MiB);
    CHECK_EQ_U64(mi.n_regions, 1);
    CHECK_EQ_U64(phys_free(0), 8 * GiB - 2 * MiB);
    CHECK_OK(vdev_memory_reset_peak("GPU:0"));
    CHECK_EQ_U64(info("GPU:0").peak_bytes_reserved, 2 * MiB);

    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:0", b));
    mi = info("GPU:0");
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK_EQ_U64(mi.n_allocs, 0);
    CHECK_EQ_U64(mi.bytes_reserved, 2 * MiB); /* cached until asked */
    CHECK_OK(vdev_memory_release_cached("GPU:0", &rel));
    CHECK_EQ_U64(rel, 2 * MiB);
    mi = info("GPU:0");
    CHECK_EQ_U64(mi.bytes_reserved, 0);
    CHECK_EQ_U64(mi.n_regions, 0);
    CHECK_EQ_U64(mi.largest_free_block, 0);
    CHECK_EQ_U64(phys_free(0), 8 * GiB);
    CHECK_OK(vdev_memory_release_cached("GPU:0", &rel));
    CHECK_EQ_U64(rel, 0);
    CHECK_OK(vdev_memory_release_cached("GPU:0", NULL));
    /* And it grows again. */
    CHECK_OK(vdev_mem_alloc("GPU:0", MiB, &a));
    CHECK(info("GPU:0").bytes_reserved >= MiB);
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_EQ_U64(info("GPU:0").n_allocs_total, 4);
}

/* Logical devices of one card have their own allocators and limits. */
static void test_info_split(void)
{
    check_fresh("1x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){GiB, 2 * GiB}, 2));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    void *a = NULL, *b = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:1", GiB, &a));
    struct vdev_memory_info m0 = info("GPU:0"), m1 = info("GPU:1");
    CHECK_EQ_U64(m0.bytes_reserved, GiB);
    CHECK_EQ_U64(m0.bytes_in_use, 0);
    CHECK_EQ_U64(m0.largest_free_block, GiB);
    CHECK_EQ_U64(m1.bytes_reserved, 2 * GiB);
    CHECK_EQ_U64(m1.bytes_in_use, GiB);
    CHECK_EQ_U64(m1.largest_free_block, GiB);
    CHECK_EQ_U64(phys_free(0), 5 * GiB);
    /* A block of GPU:1 is not one of GPU:0. */
    EXPECT_ERR(vdev_mem_free("GPU:0", a), VDEV_ERR_INVALID_ARG, "is not a live block of "
                                                                 "/device:GPU:0");
    CHECK_OK(vdev_mem_alloc("GPU:0", GiB, &b));
    EXPECT_ERR(vdev_mem_alloc("GPU:0", 256, &(void *){NULL}), VDEV_ERR_OOM,
               "on /device:GPU:0: 1.00 GiB in use of 1.00 GiB limit");
    CHECK_OK(vdev_mem_free("GPU:1", a));
    CHECK_OK(vdev_mem_free("GPU:0", b));
}

/* Out of memory: the message names size, device, use, limit and the largest
 * free block, and nothing changes but the failure count. */
static void test_oom(void)
{
    check_fresh("1x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){4 * MiB}, 1));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", MiB, &a));
    CHECK_OK(vdev_mem_alloc("GPU:0", 2 * MiB, &b));
    CHECK_OK(vdev_mem_free("GPU:0", a)); /* free: 1 MiB, then 1 MiB after b */
    struct vdev_memory_info before = info("GPU:0");
    CHECK_EQ_U64(before.largest_free_block, MiB);
    c = (void *)1;
    EXPECT_ERR(vdev_mem_alloc("GPU:0", 3 * MiB / 2, &c), VDEV_ERR_OOM,
               "OOM when allocating 1.50 MiB (1572864 bytes) on /device:GPU:0: 2.00 MiB in use "
               "of 4.00 MiB limit, largest free block 1.00 MiB");
    CHECK(c == NULL);
    struct vdev_memory_info after = info("GPU:0");
    CHECK(same_info(&before, &after));
    CHECK_EQ_U64(after.n_failed_allocs, before.n_failed_allocs + 1);
    /* Retrying smaller works. */
    CHECK_OK(vdev_mem_alloc("GPU:0", MiB, &c));
    CHECK_OK(vdev_mem_free("GPU:0", b));
    CHECK_OK(vdev_mem_free("GPU:0", c));

    /* A growing device at its limit; and a size no card has. */
    check_fresh("1x8GiB");
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){4 * MiB}, 1));
    CHECK_OK(vdev_mem_alloc("GPU:0", 3 * MiB, &a));
    before = info("GPU:0");
    CHECK_EQ_U64(before.bytes_reserved, 4 * MiB); /* 2 MiB doubled to hold 3 MiB */
    uint64_t pf = phys_free(0);
    EXPECT_ERR(vdev_mem_alloc("GPU:0", 2 * MiB, &b), VDEV_ERR_OOM,
               "OOM when allocating 2.00 MiB (2097152 bytes) on /device:GPU:0: 3.00 MiB in use "
               "of 4.00 MiB limit, largest free block 1.00 MiB");
    EXPECT_ERR(vdev_mem_alloc("GPU:0", UINT64_MAX, &b), VDEV_ERR_OOM,
               "(18446744073709551615 bytes) on /device:GPU:0");
    EXPECT_ERR(vdev_mem_alloc("GPU:0", 1ull << 62, &b), VDEV_ERR_OOM,
               "(4611686018427387904 bytes) on /device:GPU:0: 3.00 MiB in use of 4.00 MiB limit");
    after = info("GPU:0");
    CHECK(same_info(&before, &after));
    CHECK_EQ_U64(after.n_failed_allocs, 3);
    CHECK_EQ_U64(phys_free(0), pf);
    CHECK_OK(vdev_mem_alloc("GPU:0", MiB, &b));
    CHECK_EQ_U64(info("GPU:0").bytes_reserved, 4 * MiB);
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:0", b));

    /* Misuse is not an OOM. */
    EXPECT_ERR(vdev_mem_alloc("GPU:0", 0, &a), VDEV_ERR_INVALID_ARG, "size 0");
    EXPECT_ERR(vdev_mem_alloc("GPU:0", 256, NULL), VDEV_ERR_INVALID_ARG, "out is NULL");
    EXPECT_ERR(vdev_memory_info("GPU:0", NULL), VDEV_ERR_INVALID_ARG, "out is NULL");
    CHECK_EQ_U64(info("GPU:0").n_failed_allocs, 3);
}

static void test_bad_free(void)
{
    check_fresh("1x8GiB");
    void *a = NULL, *b = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 4096, &a));
    CHECK_OK(vdev_mem_alloc("GPU:0", 4096, &b));
    char want[128];
    void *mid = (char *)a + 256;
    snprintf(want, sizeof want, "vdev_mem_free: %p is not a live block of /device:GPU:0", mid);
    EXPECT_ERR(vdev_mem_free("GPU:0", mid), VDEV_ERR_INVALID_ARG, want);
    int local;
    EXPECT_ERR(vdev_mem_free("GPU:0", &local), VDEV_ERR_INVALID_ARG, "is not a live block");
    EXPECT_ERR(vdev_mem_free("CPU:0", a), VDEV_ERR_INVALID_ARG,
               "is not a live block of /device:CPU:0");
    CHECK_EQ_U64(info("GPU:0").n_allocs, 2);
    CHECK_OK(vdev_mem_free("GPU:0", a));
    EXPECT_ERR(vdev_mem_free("GPU:0", a), VDEV_ERR_INVALID_ARG, "is not a live block"); /* twice */
    CHECK_OK(vdev_mem_free("GPU:0", NULL));
    CHECK_OK(vdev_mem_free("GPU:0", b));
    struct vdev_memory_info mi = info("GPU:0");
    CHECK_EQ_U64(mi.n_allocs, 0);
    CHECK_EQ_U64(mi.bytes_in_use, 0);
}

static void test_cpu_device(void)
{
    check_fresh("1x1GiB");
    struct vdev_logical_device ld[2];
    int n = 0;
    CHECK_OK(vdev_list_logical_devices(ld, 2, &n));
    CHECK(n == 2);
    struct vdev_physical_device pd[2];
    CHECK_OK(vdev_list_physical_devices(pd, 2, &n));
    CHECK(ld[0].type == VDEV_DEVICE_CPU && ld[0].index == 0 && ld[0].physical_index == 0);
    CHECK_STR(ld[0].name, "/device:CPU:0");
    CHECK_STR(ld[0].backend, "cpu");
    CHECK(ld[0].policy == VDEV_POLICY_GROW);
    CHECK_EQ_U64(ld[0].limit_bytes, pd[0].total_bytes & ~255ull);
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("CPU:0", 100 * KiB, &p));
    memset(p, 1, 100 * KiB); /* host memory */
    struct vdev_memory_info mi = info("/device:CPU:0");
    CHECK_EQ_U64(mi.bytes_in_use, 100 * KiB);
    CHECK_EQ_U64(mi.bytes_limit, pd[0].total_bytes & ~255ull);
    CHECK_OK(vdev_mem_free("cpu:0", p));
    /* The default device is GPU:0 where there is one. */
    CHECK_STR(vdev_runtime_default_device()->name, "/device:GPU:0");
}

/* Start-up that fails half way releases what it took and can be retried. */
static void test_failed_startup(void)
{
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_discover());
    struct vdev_backend *b = vdev_config_gpu_backend();
    void *held = NULL;
    CHECK_OK(b->ops->reserve(b->ctx, 0, 4 * GiB, &held)); /* someone else's 4 GiB */
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 1.0));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){8 * GiB, 6 * GiB}, 2));
    CHECK_STATUS(vdev_init(), VDEV_ERR_OOM);
    CHECK_MSG("/device:GPU:1: cannot preallocate its 6.00 GiB");
    CHECK_MSG("simulated GPU 0: out of memory reserving 6.00 GiB (4.00 GiB free of 16.00 GiB)");
    CHECK(!vdev_is_initialized());
    CHECK(!vdev_config_frozen());
    CHECK_EQ_U64(phys_free(0), 12 * GiB); /* GPU:0's 8 GiB went back */
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){8 * GiB, 4 * GiB}, 2));
    CHECK_OK(vdev_init());
    CHECK_EQ_U64(phys_free(0), 0);
    CHECK_EQ_U64(info("GPU:1").bytes_reserved, 4 * GiB);
    b->ops->release(b->ctx, 0, held, 4 * GiB);
    check_fresh("1x16GiB");
    CHECK_OK(vdev_config_discover());
    b = vdev_config_gpu_backend();
    CHECK_OK(b->ops->reserve(b->ctx, 0, 4 * GiB, &held));
    CHECK_OK(vdev_config_set_memory_fraction("GPU:0", 1.0));
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_STATUS(vdev_init(), VDEV_ERR_OOM);
    b->ops->release(b->ctx, 0, held, 4 * GiB);
    CHECK_OK(vdev_init());
    CHECK_EQ_U64(info("GPU:0").bytes_reserved, 16 * GiB);
}

/* No VDEV_SIM_GPUS and no CUDA plugin: CPU only, and a reason why. */
static void test_no_gpus(void)
{
    check_fresh(NULL);
    setenv("VDEV_CUDA_PLUGIN", "/nonexistent/libvdev-cuda.so", 1);
    const char *reason = vdev_gpu_absence_reason();
    if (reason[0] == '\0') {
        /* A CUDA plugin was found beside the build: this machine has GPUs. */
        struct vdev_physical_device pd[2];
        int n = 0;
        CHECK_OK(vdev_list_physical_devices(pd, 2, &n));
        CHECK(n >= 2);
        CHECK_STR(pd[1].backend, "cuda");
        fprintf(stderr, "test_no_gpus: CUDA GPUs present, the no-GPU case was not run\n");
        return;
    }
    CHECK(strncmp(reason, "CUDA plugin: ", 13) == 0);
    int n = -1;
    struct vdev_physical_device pd[4];
    CHECK_OK(vdev_list_physical_devices(pd, 4, &n));
    CHECK(n == 1);
    CHECK_STR(pd[0].name, "/physical_device:CPU:0");
    CHECK(vdev_config_gpu_backend() == NULL);
    CHECK(vdev_config_n_gpus() == 0);
    EXPECT_ERR(vdev_config_set_memory_growth("GPU:0", true), VDEV_ERR_NOT_FOUND,
               "Unrecognized device: GPU:0 (there are 0 GPUs)");
    CHECK_OK(vdev_config_set_memory_fraction(NULL, 0.5)); /* every GPU: none */
    struct vdev_logical_device ld[4];
    CHECK_OK(vdev_list_logical_devices(ld, 4, &n));
    CHECK(n == 1);
    CHECK_STR(ld[0].name, "/device:CPU:0");
    CHECK_STR(vdev_runtime_default_device()->name, "/device:CPU:0");
    EXPECT_ERR(vdev_memory_info("GPU:0", &(struct vdev_memory_info){0}), VDEV_ERR_NOT_FOUND,
               "/job:localhost/replica:0/task:0/device:GPU:0 unknown device (there are 0 logical "
               "GPUs)");
    char name[64];
    CHECK_OK(vdev_device_canonical_name("cpu:0", name, sizeof name));
    CHECK_STR(name, "/device:CPU:0");
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("CPU:0", 4096, &p));
    CHECK_OK(vdev_mem_free("CPU:0", p));
    /* The reason stays the same after start-up. */
    CHECK(strncmp(vdev_gpu_absence_reason(), "CUDA plugin: ", 13) == 0);
    /* Per-GPU variables name GPUs that do not exist. */
    check_fresh(NULL);
    setenv("VDEV_CUDA_PLUGIN", "/nonexistent/libvdev-cuda.so", 1);
    setenv("VDEV_MEMORY_GROWTH", "0:true", 1);
    if (vdev_gpu_absence_reason()[0])
        EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
                   "VDEV_MEMORY_GROWTH=\"0:true\": there is no GPU 0 (0 GPUs)");
}

/* Shutdown frees every device's memory, live blocks included. */
static void test_shutdown(void)
{
    check_fresh("2x8GiB");
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:1", GiB, &p));
    CHECK_EQ_U64(phys_free(1), 7 * GiB);
    vdev_shutdown();
    CHECK(!vdev_is_initialized());
    CHECK_EQ_U64(phys_free(1), 8 * GiB); /* a fresh discovery */
    vdev_shutdown();
    vdev_shutdown(); /* twice: harmless */
    check_fresh("2x8GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_mem_alloc("GPU:1", GiB, &p));
    CHECK_OK(vdev_mem_alloc("GPU:0", GiB, &p));
}

int main(void)
{
    test_info_grow();
    test_info_split();
    test_oom();
    test_bad_free();
    test_cpu_device();
    test_failed_startup();
    test_no_gpus();
    test_shutdown();
    check_fresh(NULL);
    return check_done();
}
