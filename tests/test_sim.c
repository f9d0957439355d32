/* test_sim.c — simulated GPUs: VDEV_SIM_GPUS, the physical device list, the
 * capacity of a card, memory that costs nothing until touched, and streams:
 * one worker thread per GPU running its work in submission order, events,
 * and copies ordered after the work before them.
 *
 * Nothing here asserts on time: where a test needs two threads to meet, one
 * waits for a flag with a generous timeout, and the check is on what it saw. */
#define _GNU_SOURCE
#include "check.h"
#include "config/config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static struct vdev_backend *sim_backend(void)
{
    CHECK_OK(vdev_config_discover());
    struct vdev_backend *b = vdev_config_gpu_backend();
    CHECK(b != NULL);
    if (b)
        CHECK_STR(b->ops->name, "sim");
    return b;
}

static uint64_t phys_free(int gpu)
{
    struct vdev_physical_device pd[8];
    int n = 0;
    CHECK_OK(vdev_list_physical_devices(pd, 8, &n));
    CHECK(gpu + 1 < n);
    return gpu + 1 < n ? pd[gpu + 1].free_bytes : 0;
}

/* ---- VDEV_SIM_GPUS ---- */

static void check_physical(const char *spec, int n_gpus, const uint64_t *caps)
{
    check_fresh(spec);
    struct vdev_physical_device pd[70];
    int n = -1;
    CHECK_OK(vdev_list_physical_devices(pd, 70, &n));
    CHECK(n == 1 + n_gpus);
    if (n != 1 + n_gpus)
        return;
    CHECK(pd[0].type == VDEV_DEVICE_CPU);
    CHECK(pd[0].index == 0);
    CHECK_STR(pd[0].name, "/physical_device:CPU:0");
    CHECK_STR(pd[0].backend, "cpu");
    CHECK(pd[0].total_bytes > 0);
    for (int i = 0; i < n_gpus; i++) {
        const struct vdev_physical_device *d = &pd[1 + i];
        char want[64];
        snprintf(want, sizeof want, "/physical_device:GPU:%d", i);
        CHECK(d->type == VDEV_DEVICE_GPU);
        CHECK(d->index == i);
        CHECK_STR(d->name, want);
        CHECK_STR(d->backend, "sim");
        CHECK_STR(d->model, "Simulated GPU");
        CHECK_EQ_U64(d->total_bytes, caps[i]);
        CHECK_EQ_U64(d->free_bytes, caps[i]);
        CHECK(d->cc_major == 8 && d->cc_minor == 0);
    }
    CHECK_STR(vdev_gpu_absence_reason(), "");
    /* Listing physical devices does not start the runtime. */
    CHECK(!vdev_is_initialized());
}

static void test_spec_valid(void)
{
    check_physical("3x16GiB", 3, (const uint64_t[]){16 * GiB, 16 * GiB, 16 * GiB});
    check_physical("2x80GiB,1x24GiB", 3, (const uint64_t[]){80 * GiB, 80 * GiB, 24 * GiB});
    check_physical("16GiB", 1, (const uint64_t[]){16 * GiB});
    check_physical("1x1MiB", 1, (const uint64_t[]){MiB});
    check_physical("2X1GiB", 2, (const uint64_t[]){GiB, GiB});
    check_physical("1x1.5GiB,8GB", 2, (const uint64_t[]){3 * GiB / 2, 8000000000ull & ~255ull});
    uint64_t caps[64];
    for (int i = 0; i < 64; i++)
        caps[i] = i < 63 ? MiB : 2 * MiB;
    check_physical("63x1MiB,2MiB", 64, caps);
    /* Spaces around a part, the count, the 'x' and the size, as VDEV_VISIBLE_DEVICES takes
     * "0, 2". */
    check_physical("2x80GiB, 1x24GiB", 3, (const uint64_t[]){80 * GiB, 80 * GiB, 24 * GiB});
    check_physical(" 2x1GiB", 2, (const uint64_t[]){GiB, GiB});
    check_physical("  2 x 1 GiB ,  1MiB  ", 3, (const uint64_t[]){GiB, GiB, MiB});

    /* The fill convention: cap 0 counts, a short array gets the first ones. */
    check_fresh("3x16GiB");
    int n = -1;
    CHECK_OK(vdev_list_physical_devices(NULL, 0, &n));
    CHECK(n == 4);
    struct vdev_physical_device pd[2];
    memset(pd, 0, sizeof pd);
    CHECK_OK(vdev_list_physical_devices(pd, 2, &n));
    CHECK(n == 4);
    CHECK_STR(pd[1].name, "/physical_device:GPU:0");
    CHECK_STATUS(vdev_list_physical_devices(pd, 2, NULL), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_list_physical_devices(NULL, 2, &n), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_list_physical_devices(pd, -1, &n), VDEV_ERR_INVALID_ARG);
}

static void test_spec_malformed(void)
{
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"", "VDEV_SIM_GPUS is empty"},
        {"x16GiB", "VDEV_SIM_GPUS=\"x16GiB\": bad count in 'x16GiB'"},
        {"0x16GiB", "VDEV_SIM_GPUS=\"0x16GiB\": bad count in '0x16GiB'"},
        {"3x", "VDEV_SIM_GPUS=\"3x\": bad size in '3x'"},
        {"3x16Gib?", "VDEV_SIM_GPUS=\"3x16Gib?\": bad size in '3x16Gib?'"},
        {"3y16GiB", "VDEV_SIM_GPUS=\"3y16GiB\": bad size in '3y16GiB'"},
        {"3x16GiB,", "VDEV_SIM_GPUS=\"3x16GiB,\": trailing ','"},
        {"3x16GiB, ", "VDEV_SIM_GPUS=\"3x16GiB, \": trailing ','"},
        {"   ", "VDEV_SIM_GPUS is empty"},
        {"1x1GiB, ,1x1GiB", "VDEV_SIM_GPUS=\"1x1GiB, ,1x1GiB\": empty part at offset 7"},
        {",3x16GiB", "VDEV_SIM_GPUS=\",3x16GiB\": empty part"},
        {"1x1GiB,,1x1GiB", "VDEV_SIM_GPUS=\"1x1GiB,,1x1GiB\": empty part"},
        {"65x1GiB", "VDEV_SIM_GPUS=\"65x1GiB\": bad count in '65x1GiB' (a whole number 1..64"},
        {"3x512KiB", "VDEV_SIM_GPUS=\"3x512KiB\": size in '3x512KiB' is below the smallest "
                     "card of 1 MiB"},
        {"60x1GiB,5x1GiB", "VDEV_SIM_GPUS=\"60x1GiB,5x1GiB\": more than 64 simulated GPUs"},
        {"-1x1GiB", "bad count in '-1x1GiB'"},
        {"+2x1GiB", "bad count in '+2x1GiB'"},
        {"2 2x1GiB", "bad count in '2 2x1GiB'"},
        {"1x16EiB", "VDEV_SIM_GPUS=\"1x16EiB\": bad size in '1x16EiB': '16EiB' has an unknown "
                    "unit 'EiB' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB, K, M, G or T, in "
                    "any case but 'b')"},
        {"2x-1GiB", "bad size in '2x-1GiB'"},
        {"1x1x1GiB", "bad size in '1x1x1GiB'"},
        {"2x0x10MiB", "bad size in '2x0x10MiB'"},
        {"2x99999999999TiB", "VDEV_SIM_GPUS=\"2x99999999999TiB\": size in '2x99999999999TiB' is "
                             "too large"},
        {"99999999999999999999", "size in '99999999999999999999' is too large"},
        {"3x1e3MiB", "VDEV_SIM_GPUS=\"3x1e3MiB\": bad size in '3x1e3MiB': '1e3MiB' is not a "
                     "size: no exponents (a whole number or a decimal"},
        {"2x1GiB 1x1GiB", "VDEV_SIM_GPUS=\"2x1GiB 1x1GiB\": bad size in '2x1GiB 1x1GiB' "
                          "(expected COUNTxSIZE"},
        {"0", "size in '0' is below the smallest card of 1 MiB"},
        {"3x16", "VDEV_SIM_GPUS=\"3x16\": size in '3x16' is below the smallest card of 1 MiB (a "
                 "size without a unit is bytes: 16GiB for gibibytes)"},
        {"3x0.5", "VDEV_SIM_GPUS=\"3x0.5\": size in '3x0.5' is below the smallest card of 1 MiB "
                  "(a size without a unit is bytes: 0.5GiB for gibibytes)"},
        {"3x 16", "VDEV_SIM_GPUS=\"3x 16\": size in '3x 16' is below the smallest card of 1 MiB "
                  "(a size without a unit is bytes: 16GiB for gibibytes)"},
        {"banana", "bad size in 'banana'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_fresh(bad[i].spec);
        struct vdev_physical_device pd[8];
        int n = -1;
        CHECK_STATUS(vdev_list_physical_devices(pd, 8, &n), VDEV_ERR_CONFIG);
        CHECK_MSG(bad[i].msg);
        CHECK(n == -1);
        /* Every entry point that needs the devices says the same. */
        CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
        CHECK_MSG(bad[i].msg);
        CHECK(!vdev_is_initialized());
        CHECK_STATUS(vdev_config_set_memory_growth("GPU:0", true), VDEV_ERR_CONFIG);
        CHECK_MSG(bad[i].msg);
        CHECK_STATUS(vdev_memory_info("GPU:0", &(struct vdev_memory_info){0}), VDEV_ERR_CONFIG);
        CHECK_MSG(bad[i].msg);
        CHECK(strstr(vdev_gpu_absence_reason(), bad[i].msg) != NULL);
    }
    /* The failure is not remembered: fix the variable and try again. */
    check_fresh("3x");
    int n = -1;
    CHECK_STATUS(vdev_list_physical_devices(NULL, 0, &n), VDEV_ERR_CONFIG);
    setenv("VDEV_SIM_GPUS", "3x1GiB", 1);
    CHECK_OK(vdev_list_physical_devices(NULL, 0, &n));
    CHECK(n == 4);
    CHECK_OK(vdev_init());
    CHECK(vdev_is_initialized());
}

/* ---- capacity ---- */

static void test_capacity_backend(void)
{
    check_fresh("1x1MiB,1x2MiB");
    struct vdev_backend *b = sim_backend();
    if (!b)
        return;
    CHECK(vdev_backend_n_devices(b) == 2);
    struct vdev_backend_device_info info;
    CHECK_OK(vdev_backend_device_info(b, 1, &info));
    CHECK_EQ_U64(info.total_bytes, 2 * MiB);
    CHECK_STR(info.model, "Simulated GPU");
    CHECK_STATUS(vdev_backend_device_info(b, 2, &info), VDEV_ERR_NOT_FOUND);
    CHECK_MSG("sim backend has no device 2");
    uint64_t fr = 1, tot = 0;
    CHECK_STATUS(vdev_backend_mem_info(b, -1, &fr, &tot), VDEV_ERR_NOT_FOUND);

    void *p1 = NULL, *p2 = NULL, *p3 = NULL;
    /* The whole card, and not a byte more. */
    CHECK_STATUS(b->ops->reserve(b->ctx, 0, MiB + 256, &p1), VDEV_ERR_OOM);
    CHECK_MSG("simulated GPU 0: out of memory reserving 1.00 MiB (1.00 MiB free of 1.00 MiB)");
    CHECK_OK(b->ops->reserve(b->ctx, 0, MiB, &p1));
    CHECK(p1 != NULL && (uintptr_t)p1 % 256 == 0);
    CHECK_OK(vdev_backend_mem_info(b, 0, &fr, &tot));
    CHECK_EQ_U64(fr, 0);
    CHECK_EQ_U64(tot, MiB);
    CHECK_EQ_U64(phys_free(0), 0);
    CHECK_EQ_U64(phys_free(1), 2 * MiB);
    CHECK_STATUS(b->ops->reserve(b->ctx, 0, 256, &p2), VDEV_ERR_OOM);
    CHECK_MSG("simulated GPU 0: out of memory reserving 256 B (0 B free of 1.00 MiB)");
    /* Host-addressable memory: the simulated card's bytes are real. */
    memset(p1, 0xAB, MiB);
    CHECK(((unsigned char *)p1)[MiB - 1] == 0xAB);
    b->ops->release(b->ctx, 0, p1, MiB);
    CHECK_EQ_U64(phys_free(0), MiB);

    /* Two pieces that fill it exactly. */
    CHECK_OK(b->ops->reserve(b->ctx, 0, MiB - 256, &p1));
    CHECK_EQ_U64(phys_free(0), 256);
    CHECK_OK(b->ops->reserve(b->ctx, 0, 256, &p2));
    CHECK_EQ_U64(phys_free(0), 0);
    CHECK_STATUS(b->ops->reserve(b->ctx, 0, 256, &p3), VDEV_ERR_OOM);
    /* The other card is untouched. */
    CHECK_OK(b->ops->reserve(b->ctx, 1, 2 * MiB, &p3));
    CHECK_EQ_U64(phys_free(1), 0);
    b->ops->release(b->ctx, 1, p3, 2 * MiB);
    b->ops->release(b->ctx, 0, p2, 256);
    b->ops->release(b->ctx, 0, p1, MiB - 256);
    CHECK_EQ_U64(phys_free(0), MiB);
    CHECK_EQ_U64(phys_free(1), 2 * MiB);
}

/* A logical device that holds almost the whole card leaves exactly the rest. */
static void test_capacity_runtime(void)
{
    check_fresh("1x8GiB,1x8GiB");
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "0", 1);
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){8 * GiB - MiB}, 1));
    CHECK_OK(vdev_init());
    CHECK_EQ_U64(phys_free(0), MiB);
    CHECK_EQ_U64(phys_free(1), 8 * GiB); /* grows: nothing reserved yet */
    struct vdev_backend *b = vdev_config_gpu_backend();
    void *p = NULL, *q = NULL;
    CHECK_STATUS(b->ops->reserve(b->ctx, 0, MiB + 256, &p), VDEV_ERR_OOM);
    CHECK_OK(b->ops->reserve(b->ctx, 0, MiB, &p));
    CHECK_STATUS(b->ops->reserve(b->ctx, 0, 256, &q), VDEV_ERR_OOM);
    b->ops->release(b->ctx, 0, p, MiB);

    /* GPU:1 grows: allocate 1 GiB blocks until the card is full. */
    int ok = 0;
    void *blocks[16];
    enum vdev_status st = VDEV_OK;
    while (ok < 16 && (st = vdev_mem_alloc("GPU:1", GiB, &blocks[ok])) == VDEV_OK)
        ok++;
    CHECK(ok == 8);
    CHECK(st == VDEV_ERR_OOM);
    CHECK_MSG("OOM when allocating 1.00 GiB (1073741824 bytes) on /device:GPU:1");
    CHECK_EQ_U64(phys_free(1), 0);
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:1", &mi));
    CHECK_EQ_U64(mi.bytes_reserved, 8 * GiB);
    CHECK_EQ_U64(mi.bytes_in_use, 8 * GiB);
    CHECK_EQ_U64(mi.bytes_limit, 8 * GiB);
    for (int i = 0; i < ok; i++)
        CHECK_OK(vdev_mem_free("GPU:1", blocks[i]));
    uint64_t released = 0;
    CHECK_OK(vdev_memory_release_cached("GPU:1", &released));
    CHECK_EQ_U64(released, 8 * GiB);
    CHECK_EQ_U64(phys_free(1), 8 * GiB);
}

/* A card larger than the host can map: its failure is the host's, said so, with no
 * suggestion that other users of the card free memory. */
static void test_host_address_space(void)
{
    check_fresh("1x1000TiB");
    CHECK_OK(vdev_init());
    void *p = NULL;
    enum vdev_status st = vdev_mem_alloc("GPU:0", 200 * 1024 * GiB, &p);
    if (st == VDEV_OK) { /* a host with more than 200 TiB of address space */
        fprintf(stderr, "test_host_address_space: the host mapped 200 TiB, case not run\n");
        CHECK_OK(vdev_mem_free("GPU:0", p));
        return;
    }
    CHECK(st == VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(),
              "OOM when allocating 200.00 TiB (219902325555200 bytes) on /device:GPU:0: 0 B in "
              "use of 1000.00 TiB limit, largest free block 0 B; simulated GPU 0: cannot map "
              "200.00 TiB of host address space (a limit of the host, not of the card); would "
              "help: a smaller batch");
}

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &res) != 2)
        res = 0;
    fclose(f);
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* An 80 GiB card with 64 GiB preallocated costs nothing until touched. */
static void test_noreserve(void)
{
    /* Strict overcommit (mode 2) ignores MAP_NORESERVE: nothing to show there. */
    FILE *oc = fopen("/proc/sys/vm/overcommit_memory", "r");
    int mode = 0;
    if (oc) {
        if (fscanf(oc, "%d", &mode) != 1)
            mode = 0;
        fclose(oc);
    }
    if (mode == 2) {
        fprintf(stderr, "test_noreserve: vm.overcommit_memory is 2, case not run\n");
        return;
    }
    check_fresh("1x80GiB");
    uint64_t rss0 = rss_bytes();
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){64 * GiB}, 1));
    CHECK_OK(vdev_init());
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_reserved, 64 * GiB);
    CHECK_EQ_U64(mi.bytes_limit, 64 * GiB);
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK_EQ_U64(phys_free(0), 16 * GiB);
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 64 * GiB, &p));
    CHECK(p != NULL);
    struct vdev_backend *b = vdev_config_gpu_backend();
    if (p && b) {
        /* Its last bytes are there, and only the pages touched cost memory. */
        const char msg[8] = "lastpg!";
        char back[8] = "";
        char *end = (char *)p + 64 * GiB - sizeof msg;
        CHECK_OK(b->ops->copy_h2d(b->ctx, 0, end, msg, sizeof msg));
        CHECK_OK(b->ops->copy_d2h(b->ctx, 0, back, end, sizeof back));
        CHECK(memcmp(msg, back, sizeof msg) == 0);
    }
    uint64_t rss1 = rss_bytes();
    CHECK(rss1 < rss0 + 256 * MiB);
    CHECK_OK(vdev_mem_free("GPU:0", p));
    vdev_shutdown();
    CHECK(rss_bytes() < rss0 + 256 * MiB);
}

/* ---- streams ---- */

#define LOG_CAP 8192
struct stream_log {
    int n;
    int val[LOG_CAP];
    pthread_t thread[LOG_CAP];
};
static struct stream_log logs[4]; /* written only by the GPU's worker */

struct item {
    int gpu, val;
};

static void append_fn(void *arg)
{
    const struct item *it = arg;
    struct stream_log *l = &logs[it->gpu];
    if (l->n < LOG_CAP) {
        l->val[l->n] = it->val;
        l->thread[l->n] = pthread_self();
    }
    l->n++;
}

static void submit_item(struct vdev_backend *b, int gpu, int val)
{
    struct item it = {gpu, val};
    CHECK_OK(vdev_backend_submit_host(b, gpu, append_fn, &it, sizeof it));
}

static atomic_int gate, passed, flag, seen, x_val, y_val;

static void wait_gate_fn(void *arg)
{
    check_wait_flag(&gate);
    append_fn(arg);
}

static void open_gate_fn(void *arg) { atomic_store(&gate, 1); }

static void test_stream_order(void)
{
    check_fresh("3x1GiB");
    struct vdev_backend *b = sim_backend();
    if (!b)
        return;
    memset(logs, 0, sizeof logs);
    for (int i = 0; i < 600; i++)
        submit_item(b, i % 3, i);
    for (int g = 0; g < 3; g++)
        CHECK_OK(vdev_backend_synchronize(b, g));
    for (int g = 0; g < 3; g++) {
        CHECK(logs[g].n == 200);
        int in_order = 1, one_thread = 1;
        for (int k = 0; k < 200; k++) {
            in_order &= logs[g].val[k] == 3 * k + g;
            one_thread &= pthread_equal(logs[g].thread[k], logs[g].thread[0]) != 0;
        }
        CHECK(in_order);
        CHECK(one_thread);
        CHECK(!pthread_equal(logs[g].thread[0], pthread_self()));
    }
    CHECK(!pthread_equal(logs[0].thread[0], logs[1].thread[0]));
    CHECK(!pthread_equal(logs[0].thread[0], logs[2].thread[0]));
    CHECK(!pthread_equal(logs[1].thread[0], logs[2].thread[0]));

    /* The argument is copied at submission. */
    memset(logs, 0, sizeof logs);
    struct item it = {0, 7};
    CHECK_OK(vdev_backend_submit_host(b, 0, append_fn, &it, sizeof it));
    it.val = 8;
    CHECK_OK(vdev_backend_synchronize(b, 0));
    CHECK(logs[0].n == 1 && logs[0].val[0] == 7);
    static char big[4096];
    CHECK_STATUS(vdev_backend_submit_host(b, 0, append_fn, big, sizeof big), VDEV_ERR_INTERNAL);
    char want[64];
    snprintf(want, sizeof want, "argument of %zu bytes exceeds %d", sizeof big, VDEV_HOST_ARG_MAX);
    CHECK_MSG(want);

    /* Work still queued at shutdown runs before the GPU goes away. */
    memset(logs, 0, sizeof logs);
    atomic_store(&gate, 0);
    struct item first = {1, -1};
    CHECK_OK(vdev_backend_submit_host(b, 1, wait_gate_fn, &first, sizeof first));
    for (int i = 0; i < 100; i++)
        submit_item(b, 1, i);
    CHECK_OK(vdev_backend_submit_host(b, 2, open_gate_fn, NULL, 0));
    vdev_shutdown();
    CHECK(logs[1].n == 101);
    CHECK(logs[1].val[0] == -1 && logs[1].val[100] == 99);
}

/* More work than the ring holds, submitted while the stream is blocked. */
static void *open_gate_after_1000(void *arg)
{
    atomic_int *count = arg;
    for (int i = 0; i < 120000 && atomic_load(count) < 1000; i++) /* 120 s: a hang */
        check_sleep_ms(1);
    atomic_store(&passed, atomic_load(count) >= 1000);
    atomic_store(&gate, 1);
    return NULL;
}

static void test_stream_ring(void)
{
    check_fresh("1x1GiB");
    struct vdev_backend *b = sim_backend();
    if (!b)
        return;
    memset(logs, 0, sizeof logs);
    atomic_store(&gate, 0);
    atomic_store(&passed, 0);
    static atomic_int count;
    atomic_store(&count, 0);
    struct item first = {0, -1};
    CHECK_OK(vdev_backend_submit_host(b, 0, wait_gate_fn, &first, sizeof first));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, open_gate_after_1000, &count) == 0);
    for (int i = 0; i < 5000; i++) {
        submit_item(b, 0, i);
        atomic_fetch_add(&count, 1);
    }
    pthread_join(th, NULL);
    CHECK(atomic_load(&passed));
    CHECK_OK(vdev_backend_synchronize(b, 0));
    CHECK(logs[0].n == 5001);
    int in_order = logs[0].val[0] == -1;
    for (int k = 1; k < 5001; k++)
        in_order &= logs[0].val[k] == k - 1;
    CHECK(in_order);
}

/* Several threads submitting to one GPU: each thread's items stay in order. */
struct submitter {
    struct vdev_backend *b;
    int id;
    int failed;
};

static void *submit_many(void *arg)
{
    struct submitter *s = arg;
    for (int i = 0; i < 1000; i++) {
        struct item it = {0, s->id * 100000 + i};
        if (vdev_backend_submit_host(s->b, 0, append_fn, &it, sizeof it) != VDEV_OK)
            s->failed++;
    }
    return NULL;
}

static void test_stream_threads(void)
{
    check_fresh("2x1GiB");
    struct vdev_backend *b = sim_backend();
    if (!b)
        return;
    memset(logs, 0, sizeof logs);
    pthread_t th[4];
    struct submitter s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = (struct submitter){b, i, 0};
        CHECK(pthread_create(&th[i], NULL, submit_many, &s[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(s[i].failed == 0);
    }
    CHECK_OK(vdev_backend_synchronize(b, 0));
    CHECK(logs[0].n == 4000);
    int next[4] = {0, 0, 0, 0}, ok = 1;
    for (int k = 0; k < logs[0].n && k < LOG_CAP; k++) {
        int t = logs[0].val[k] / 100000, i = logs[0].val[k] % 100000;
        ok &= t >= 0 && t < 4 && i == next[t];
        if (t >= 0 && t < 4)
            next[t]++;
    }
    CHECK(ok);
    CHECK(next[0] == 1000 && next[3] == 1000);
}

/* Two GPUs run side by side: an item on GPU 0 sees a flag that an item
 * submitted later to GPU 1 sets while the first still runs. */
static void wait_flag_fn(void *arg) { atomic_store(&seen, check_wait_flag(&flag)); }
static void set_flag_fn(void *arg) { atomic_store(&flag, 1); }

static void test_stream_concurrent(void)
{
    check_fresh("2x1GiB");
    struct vdev_backend *b = sim_backend();
    if (!b)
        return;
    atomic_store(&flag, 0);
    atomic_store(&seen, 0);
    CHECK_OK(vdev_backend_submit_host(b, 0, wait_flag_fn, NULL, 0));
    CHECK_OK(vdev_backend_submit_host(b, 1, set_flag_fn, NULL, 0));
    CHECK_OK(vdev_backend_synchronize(b, 0));
    CHECK_OK(vdev_backend_synchronize(b, 1));
    CHECK(atomic_load(&seen) == 1);
    /* And the other way round. */
    atomic_store(&flag, 0);
    atomic_store(&seen, 0);
    CHECK_OK(vdev_backend_submit_host(b, 1, wait_flag_fn, NULL, 0));
    CHECK_OK(vdev_backend_submit_host(b, 0, set_flag_fn, NULL, 0));
    CHECK_OK(vdev_backend_synchronize(b, 1));
    CHECK(atomic_load(&seen) == 1);
}

/* ---- events ---- */

static void gated_write_fn(void *arg)
{
    check_wait_flag(&gate);
    atomic_store(&x_val, 42);
}

static void read_x_fn(void *arg) { atomic_store(&y_val, atomic_load(&x_val)); }

static void test_events(void)
{
    check_fresh("3x1GiB");
    struct vdev_backend *b = sim_backend();
    if (!b)
        return;
    const struct vdev_backend_ops *o = b->ops;
    atomic_store(&gate, 0);
    atomic_store(&x_val, 0);
    atomic_store(&y_val, -1);
    CHECK_OK(vdev_backend_submit_host(b, 0, gated_write_fn, NULL, 0));
    void *e = NULL;
    CHECK_OK(o->event_record(b->ctx, 0, &e));
    CHECK(e != NULL);
    CHECK(!o->event_done(b->ctx, e)); /* the gated item cannot have finished */
    CHECK_OK(o->stream_wait_event(b->ctx, 1, e));
    CHECK_OK(vdev_backend_submit_host(b, 1, read_x_fn, NULL, 0));
    CHECK(atomic_load(&y_val) == -1); /* GPU 1 waits for the event */
    /* A stream waiting on its own event, and an event on an idle stream. */
    CHECK_OK(o->stream_wait_event(b->ctx, 0, e));
    void *idle = NULL;
    CHECK_OK(o->event_record(b->ctx, 2, &idle));
    CHECK(o->event_done(b->ctx, idle));
    o->event_wait(b->ctx, idle);
    o->event_drop(b->ctx, idle);
    atomic_store(&gate, 1);
    CHECK_OK(vdev_backend_synchronize(b, 1));
    CHECK(atomic_load(&y_val) == 42);
    o->event_wait(b->ctx, e);
    CHECK(o->event_done(b->ctx, e));
    o->event_drop(b->ctx, e);
    /* A stream waiting on an event that has passed needs no work. */
    CHECK_OK(o->event_record(b->ctx, 0, &e));
    CHECK_OK(vdev_backend_synchronize(b, 0));
    CHECK(o->event_done(b->ctx, e));
    CHECK_OK(o->stream_wait_event(b->ctx, 2, e));
    o->event_drop(b->ctx, e);
}

/* ---- copies ---- */

struct fill_arg {
    unsigned char *p;
    size_t n;
    int value;
};

static void gated_fill_fn(void *arg)
{
    const struct fill_arg *a = arg;
    check_wait_flag(&gate);
    memset(a->p, a->value, a->n);
}

static void *open_gate_when_passed(void *arg)
{
    int ok = check_wait_flag(&passed);
    atomic_store(&seen, ok);
    atomic_store(&gate, 1);
    return NULL;
}

static int all_bytes(const unsigned char *p, size_t n, int v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

static void test_copies(void)
{
    check_fresh("3x1GiB");
    struct vdev_backend *b = sim_backend();
    if (!b)
        return;
    const struct vdev_backend_ops *o = b->ops;
    enum { N = 64 * 1024 };
    static unsigned char host[N];
    void *src = NULL, *dst = NULL, *dst0 = NULL;
    CHECK_OK(o->reserve(b->ctx, 0, N, &src));
    CHECK_OK(o->reserve(b->ctx, 1, N, &dst));
    CHECK_OK(o->reserve(b->ctx, 0, N, &dst0));
    if (!src || !dst || !dst0)
        return;

    /* h2d and d2h are complete when they return. */
    memset(host, 0x11, N);
    CHECK_OK(o->copy_h2d(b->ctx, 0, src, host, N));
    CHECK(all_bytes(src, N, 0x11));
    memset(host, 0, N);
    CHECK_OK(o->copy_h2d(b->ctx, 1, dst, host, N));
    CHECK_OK(o->copy_d2h(b->ctx, 0, host, src, N));
    CHECK(all_bytes(host, N, 0x11));

    /* d2h waits for the work before it on the stream: a gated fill that an
     * item on another GPU opens. */
    atomic_store(&gate, 0);
    struct fill_arg fa = {src, N, 0x22};
    CHECK_OK(vdev_backend_submit_host(b, 0, gated_fill_fn, &fa, sizeof fa));
    CHECK_OK(vdev_backend_submit_host(b, 2, open_gate_fn, NULL, 0));
    CHECK_OK(o->copy_d2h(b->ctx, 0, host, src, N));
    CHECK(all_bytes(host, N, 0x22));

    /* d2d returns at once and copies after the source stream's earlier work. */
    atomic_store(&gate, 0);
    atomic_store(&passed, 0);
    atomic_store(&seen, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, open_gate_when_passed, NULL) == 0);
    fa.value = 0x5A;
    CHECK_OK(vdev_backend_submit_host(b, 0, gated_fill_fn, &fa, sizeof fa));
    CHECK_OK(o->copy_d2d(b->ctx, 1, dst, 0, src, N));
    CHECK_OK(o->copy_d2d(b->ctx, 0, dst0, 0, src, N)); /* same GPU: stream order */
    atomic_store(&passed, 1);
    pthread_join(th, NULL);
    CHECK(atomic_load(&seen) == 1); /* neither copy waited for the source */
    CHECK_OK(vdev_backend_synchronize(b, 1));
    CHECK_OK(o->copy_d2h(b->ctx, 1, host, dst, N));
    CHECK(all_bytes(host, N, 0x5A));
    CHECK_OK(o->copy_d2h(b->ctx, 0, host, dst0, N));
    CHECK(all_bytes(host, N, 0x5A));
    CHECK_OK(o->copy_d2d(b->ctx, 1, dst, 0, src, 0)); /* zero bytes */
    CHECK_OK(vdev_backend_synchronize(b, 1));
    o->release(b->ctx, 0, src, N);
    o->release(b->ctx, 1, dst, N);
    o->release(b->ctx, 0, dst0, N);
}

/* The CPU backend runs work inline and its events have always passed. */
static void test_cpu_backend(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_config_discover());
    struct vdev_backend *c = vdev_config_cpu_backend();
    CHECK_STR(c->ops->name, "cpu");
    CHECK(vdev_backend_n_devices(c) == 1);
    memset(logs, 0, sizeof logs);
    struct item it = {3, 5};
    CHECK_OK(vdev_backend_submit_host(c, 0, append_fn, &it, sizeof it));
    CHECK(logs[3].n == 1 && logs[3].val[0] == 5);
    CHECK(pthread_equal(logs[3].thread[0], pthread_self()));
    void *e = NULL;
    CHECK_OK(c->ops->event_record(c->ctx, 0, &e));
    CHECK(c->ops->event_done(c->ctx, e));
    c->ops->event_drop(c->ctx, e);
    uint64_t fr = 0, tot = 0;
    CHECK_OK(vdev_backend_mem_info(c, 0, &fr, &tot));
    CHECK(tot > 0 && fr <= tot);
    void *p = NULL;
    CHECK_OK(c->ops->reserve(c->ctx, 0, MiB, &p));
    CHECK(p && (uintptr_t)p % 256 == 0);
    c->ops->release(c->ctx, 0, p, MiB);
}

int main(void)
{
    test_spec_valid();
    test_spec_malformed();
    test_capacity_backend();
    test_capacity_runtime();
    test_noreserve();
    test_host_address_space();
    test_stream_order();
    test_stream_ring();
    test_stream_threads();
    test_stream_concurrent();
    test_events();
    test_copies();
    test_cpu_backend();
    check_fresh(NULL);
    return check_done();
}
