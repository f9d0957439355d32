/* test_torch_alloc.c — libvdev-torch-alloc.so as PyTorch sees it: loaded with
 * dlopen, its two functions called with fake stream handles, against
 * simulated GPUs (one 1 GiB card split into logical GPUs of 64 MiB and
 * 32 MiB, so each has a hard limit).
 *
 * Checks: PyTorch's device index maps to GPU:N by default, through
 * VDEV_TORCH_DEVICES, through vdev_torch_set_device (code wins), and per
 * thread through vdev_torch_push_device; the limit holds (NULL, and vdev's
 * out-of-memory report as the error); vdev's memory info sees the blocks;
 * stream-ordered reuse with test events: a block freed on stream S goes to
 * the next allocation on S at once, never to another stream before its event
 * has passed, and to any stream after; before an out-of-memory failure the
 * allocator waits for pending events; every refused input with its message;
 * and four threads allocating and freeing on their own streams with the
 * blocks' contents checked (run under TSan and ASan); vdev_shutdown()
 * refused while blocks are live, naming how many and where, and the
 * statistics from zero after a restart; a child forked while another thread
 * allocates: every call fails at once with VDEV_ERR_UNSUPPORTED and vdev's
 * advice (each child under alarm(), so a hang fails the test). */
#define _GNU_SOURCE
#include "vdev_torch_alloc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int passed, failed;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (c)                                                                                     \
            passed++;                                                                              \
        else {                                                                                     \
            failed++;                                                                              \
            fprintf(stderr, "%s:%d: FAIL: CHECK(%s)\n", __FILE__, __LINE__, #c);                   \
        }                                                                                          \
    } while (0)
#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (strcmp(a_, b_) == 0)                                                                   \
            passed++;                                                                              \
        else {                                                                                     \
            failed++;                                                                              \
            fprintf(stderr, "%s:%d: FAIL: \"%s\" is not \"%s\"\n", __FILE__, __LINE__, a_, b_);   \
        }                                                                                          \
    } while (0)
#define CHECK_HAS(a, sub)                                                                          \
    do {                                                                                           \
        const char *a_ = (a);                                                                      \
        if (strstr(a_, (sub)))                                                                     \
            passed++;                                                                              \
        else {                                                                                     \
            failed++;                                                                              \
            fprintf(stderr, "%s:%d: FAIL: \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, a_, (sub));  \
        }                                                                                          \
    } while (0)

/* The library's functions and the vdev calls the test needs, from dlsym. */
static struct {
    void *(*malloc_)(ssize_t, int, cudaStream_t);
    void (*free_)(void *, ssize_t, int, cudaStream_t);
    enum vdev_status (*set_device)(int, const char *);
    enum vdev_status (*push)(const char *);
    enum vdev_status (*pop)(void);
    enum vdev_status (*stats)(const char *, struct vdev_torch_stats *);
    enum vdev_status (*set_events)(const struct vdev_torch_events *);
    void (*empty_cache)(void);
    const char *(*last_error)(void);
    enum vdev_status (*reset)(void);
    enum vdev_status (*memory_info)(const char *, struct vdev_memory_info *);
    void (*shutdown)(void);
    const char *(*vdev_error)(void);
    bool (*vdev_running)(void);
} L;

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "test_torch_alloc: %s not found: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    return L.memory_info(dev, &mi) == VDEV_OK ? mi.bytes_in_use : ~0ull;
}

#define MIB (1ull << 20)
#define S1 ((cudaStream_t)(uintptr_t)0x1000)
#define S2 ((cudaStream_t)(uintptr_t)0x2000)

/* ---- test events: passed when the test says so ---- */

struct fake_event {
    atomic_int passed;
    atomic_int queries;
    int auto_after; /* > 0: passed after that many queries */
};
static atomic_int n_recorded, n_waited, n_dropped, auto_after;
static struct fake_event *last_event;

static void *fake_record(void *ctx, cudaStream_t s)
{
    struct fake_event *e = calloc(1, sizeof *e);
    if (!e)
        abort();
    e->auto_after = atomic_load(&auto_after);
    atomic_fetch_add(&n_recorded, 1);
    last_event = e;
    return e;
}
static int fake_done(void *ctx, void *ev)
{
    struct fake_event *e = ev;
    int q = atomic_fetch_add(&e->queries, 1) + 1;
    return atomic_load(&e->passed) || (e->auto_after && q >= e->auto_after);
}
static void fake_wait(void *ctx, void *ev)
{
    atomic_store(&((struct fake_event *)ev)->passed, 1);
    atomic_fetch_add(&n_waited, 1);
}
static void fake_drop(void *ctx, void *ev)
{
    atomic_fetch_add(&n_dropped, 1);
    free(ev);
}
static const struct vdev_torch_events FAKE = {fake_record, fake_done, fake_wait, fake_drop, NULL};

/* ---- cases ---- */

/* VDEV_TORCH_DEVICES maps PyTorch device 0 to GPU:1; other indices go to
 * GPU:N; vdev's statistics see the blocks; the limit holds. */
static void test_mapping_and_limit(void)
{
    void *p = L.malloc_(1000, 0, S1);
    CHECK(p != NULL && (uintptr_t)p % 256 == 0);
    CHECK_STR(L.last_error(), "");
    CHECK(in_use("GPU:1") == 1024);
    CHECK(in_use("GPU:0") == 0);
    void *q = L.malloc_(3000, 1, S1); /* index 1: GPU:1 by default as well */
    CHECK(q != NULL);
    CHECK(in_use("GPU:1") == 1024 + 3072);
    struct vdev_torch_stats st;
    CHECK(L.stats("/device:GPU:1", &st) == VDEV_OK);
    CHECK(st.allocated_bytes == 4000 && st.n_allocs == 2 && st.n_allocs_total == 2);
    CHECK(st.peak_allocated_bytes == 4000 && st.pending_bytes == 0);
    CHECK(L.stats("GPU:0", &st) == VDEV_ERR_NOT_FOUND);
    CHECK_STR(L.last_error(), "vdev_torch_stats: PyTorch has allocated nothing on /device:GPU:0");

    /* GPU:1 has 32 MiB */
    void *big = L.malloc_((ssize_t)(40 * MIB), 0, S1);
    CHECK(big == NULL);
    CHECK_HAS(L.last_error(), "OOM when allocating 40.00 MiB (41943040 bytes) on /device:GPU:1:");
    CHECK_HAS(L.last_error(), "the limit is short by");
    CHECK(L.stats("GPU:1", &st) == VDEV_OK && st.n_failed == 1 && st.n_allocs == 2);
    L.free_(p, 1000, 0, S1);
    L.free_(q, 3000, 1, S1);
    CHECK(in_use("GPU:1") == 0); /* no CUDA driver here: back at once */
    CHECK(L.stats("GPU:1", &st) == VDEV_OK && st.allocated_bytes == 0 && st.n_frees_total == 2);
    CHECK(st.peak_allocated_bytes == 4000);

    /* an index with no vdev device behind it */
    CHECK(L.malloc_(100, 5, S1) == NULL);
    CHECK_HAS(L.last_error(), "No matching devices found for 'GPU:5'");
}

/* Code wins over the environment; a thread's pushed device wins over both
 * for its allocations, and frees go where the block came from. */
static void test_set_device_and_push(void)
{
    CHECK(L.set_device(0, "/gpu:0") == VDEV_OK);
    void *p = L.malloc_(256, 0, S1);
    CHECK(in_use("GPU:0") == 256 && in_use("GPU:1") == 0);
    /* remapping an index with live blocks is refused */
    CHECK(L.set_device(0, "GPU:1") == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_set_device: PyTorch device 0 has 1 live block (1 on "
                              "/device:GPU:0); map it before its first allocation");
    /* a block of index 0 made on another device (pushed) is named there */
    CHECK(L.push("GPU:1") == VDEV_OK);
    void *q = L.malloc_(256, 0, S1);
    CHECK(L.pop() == VDEV_OK);
    CHECK(L.set_device(0, "GPU:1") == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_set_device: PyTorch device 0 has 2 live blocks (1 on "
                              "/device:GPU:1, 1 on /device:GPU:0); map it before its first "
                              "allocation");
    L.free_(q, 256, 0, S1);
    CHECK(L.set_device(0, "GPU:0") == VDEV_OK); /* the same mapping: fine */
    L.free_(p, 256, 0, S1);

    /* an index whose blocks all came through a pushed device is not mapped
     * yet: mapping it is fine */
    CHECK(L.push("GPU:1") == VDEV_OK);
    void *pushed = L.malloc_(256, 3, S1);
    CHECK(pushed != NULL && in_use("GPU:1") == 256);
    CHECK(L.set_device(3, "GPU:0") == VDEV_OK);
    L.free_(pushed, 256, 3, S1);
    CHECK(in_use("GPU:1") == 0);
    p = L.malloc_(512, 0, S1);
    CHECK(in_use("GPU:1") == 512 && in_use("GPU:0") == 0);
    CHECK(L.pop() == VDEV_OK);
    L.free_(p, 512, 0, S1); /* back to GPU:1, where it came from */
    CHECK(in_use("GPU:1") == 0);

    CHECK(L.set_device(64, "GPU:0") == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_set_device: PyTorch device 64 outside 0..63");
    CHECK(L.set_device(-1, "GPU:0") == VDEV_ERR_INVALID_ARG);
    CHECK(L.set_device(2, NULL) == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_set_device: the vdev device is NULL");
    CHECK(L.set_device(2, "GPU:x") == VDEV_ERR_INVALID_ARG);
    CHECK_HAS(L.last_error(), "Failed parsing device name: 'GPU:x'");
    CHECK(L.set_device(2, "GPU:9") == VDEV_ERR_NOT_FOUND);
    CHECK_HAS(L.last_error(), "No matching devices found for 'GPU:9'");
    CHECK(L.set_device(2, "CPU:0") == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "/device:CPU:0 is host memory: PyTorch's CUDA tensors take a vdev "
                              "GPU");
    CHECK(L.push("/cpu:0") == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "/device:CPU:0 is host memory: PyTorch's CUDA tensors take a vdev "
                              "GPU");
    CHECK(L.pop() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_pop_device: no device pushed");
    CHECK(L.push(NULL) == VDEV_ERR_INVALID_ARG);
    CHECK(L.push("GPU:7") == VDEV_ERR_NOT_FOUND);
    for (int i = 0; i < 16; i++)
        CHECK(L.push("GPU:0") == VDEV_OK);
    CHECK(L.push("GPU:0") == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_push_device: nested deeper than 16");
    for (int i = 0; i < 16; i++)
        CHECK(L.pop() == VDEV_OK);
}

/* Bad input to PyTorch's two functions. */
static void test_bad_input(void)
{
    CHECK(L.malloc_(0, 0, S1) == NULL);
    CHECK_STR(L.last_error(), "");
    CHECK(L.malloc_(-5, 0, S1) == NULL);
    CHECK_STR(L.last_error(), "vdev_torch_malloc: negative size -5");
    CHECK(L.malloc_(16, 64, S1) == NULL);
    CHECK_STR(L.last_error(), "vdev_torch_malloc: PyTorch device 64 outside 0..63");
    L.free_(NULL, 0, 0, S1);
    int x;
    L.free_(&x, 4, 0, S1);
    CHECK_HAS(L.last_error(), "is not a block of vdev_torch_malloc");
    struct vdev_torch_stats st;
    void *p = L.malloc_(1, 0, S1);
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.n_bad_frees == 1);
    L.free_(p, 1, 0, S1);
    L.free_(p, 1, 0, S1); /* twice: the second is not a live block */
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.n_bad_frees == 2 && st.n_allocs == 0);
    /* counted on the device PyTorch's index names, not on every device */
    CHECK(L.stats("GPU:1", &st) == VDEV_OK && st.n_bad_frees == 0);
    CHECK(L.stats(NULL, &st) == VDEV_ERR_INVALID_ARG);
    CHECK(L.stats("GPU:x", &st) == VDEV_ERR_INVALID_ARG);
}

/* Stream-ordered reuse with test events. PyTorch device 0 is GPU:0 here. */
static void test_streams(void)
{
    struct vdev_torch_events bad = FAKE;
    bad.wait = NULL;
    CHECK(L.set_events(&bad) == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_set_events: every function is needed");
    CHECK(L.set_events(&FAKE) == VDEV_OK);
    atomic_store(&auto_after, 0);
    void *p = L.malloc_((ssize_t)MIB, 0, S1);
    L.free_(p, (ssize_t)MIB, 0, S1); /* pending on S1 */
    struct vdev_torch_stats st;
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.pending_bytes == MIB && st.allocated_bytes == 0);
    CHECK(in_use("GPU:0") == MIB); /* vdev still counts it */
    CHECK(L.set_events(NULL) == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_set_events: 1 blocks wait for events; call "
                              "vdev_torch_empty_cache first");

    void *q = L.malloc_((ssize_t)MIB, 0, S2); /* another stream: not p */
    CHECK(q != NULL && q != p);
    void *r = L.malloc_((ssize_t)MIB - 100, 0, S1); /* the same stream: p at once */
    CHECK(r == p);
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.n_same_stream_reuses == 1 &&
          st.pending_bytes == 0);
    /* a much smaller request does not take a big pending block */
    L.free_(r, (ssize_t)MIB - 100, 0, S1);
    struct fake_event *ev_p = last_event;
    void *small = L.malloc_(1000, 0, S1);
    CHECK(small != NULL && small != p);
    L.free_(small, 1000, 0, S1);
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.pending_bytes == MIB + 1024);

    /* p's event passes: p is any stream's again (address-ordered first fit
     * hands it out, the lowest free address), while small still waits */
    atomic_store(&ev_p->passed, 1);
    void *s2 = L.malloc_((ssize_t)MIB, 0, S2);
    CHECK(s2 == p);
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.pending_bytes == 1024);
    L.empty_cache(); /* waits for small's event */
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.pending_bytes == 0);
    atomic_store(&auto_after, 1); /* events recorded from now on pass when queried */
    L.free_(s2, (ssize_t)MIB, 0, S2);
    L.free_(q, (ssize_t)MIB, 0, S2);
    void *t = L.malloc_(4096, 0, S1); /* polls: both events pass when queried */
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.pending_bytes == 0);
    L.free_(t, 4096, 0, S1);

    /* Out of memory while blocks wait: the allocator waits for their events
     * and gives them back. GPU:0 has 64 MiB. */
    atomic_store(&auto_after, 0);
    L.empty_cache();
    int waited = atomic_load(&n_waited);
    void *a = L.malloc_((ssize_t)(40 * MIB), 0, S1);
    CHECK(a != NULL);
    L.free_(a, (ssize_t)(40 * MIB), 0, S1); /* pending, event not passed */
    void *b = L.malloc_((ssize_t)(48 * MIB), 0, S2);
    CHECK(b != NULL);
    CHECK(atomic_load(&n_waited) == waited + 1);
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.n_event_waits == 1 && st.pending_bytes == 0);
    L.free_(b, (ssize_t)(48 * MIB), 0, S2);
    L.empty_cache();
    CHECK(in_use("GPU:0") == 0);
    CHECK(L.set_events(NULL) == VDEV_OK);
    CHECK(atomic_load(&n_recorded) == atomic_load(&n_dropped));
}

/* Four threads, each on its own stream and device index, allocate and free
 * blocks of random sizes and check that nobody wrote into theirs. */
#define THREADS 4
#define ITERS 3000
static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    cudaStream_t s = (cudaStream_t)(uintptr_t)(0x10000 * (id + 1));
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
    void *held[16] = {0};
    size_t sz[16] = {0};
    int bad = 0;
    for (int i = 0; i < ITERS; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((rng >> 33) % 16);
        if (held[k]) {
            unsigned char *c = held[k];
            for (size_t j = 0; j < sz[k]; j += 97)
                bad += c[j] != (unsigned char)(id * 16 + k);
            L.free_(held[k], (ssize_t)sz[k], id % 2, s);
            held[k] = NULL;
        } else {
            sz[k] = 1 + (size_t)((rng >> 20) % (256 * 1024));
            held[k] = L.malloc_((ssize_t)sz[k], id % 2, s);
            if (held[k])
                memset(held[k], id * 16 + k, sz[k]);
        }
    }
    for (int k = 0; k < 16; k++)
        if (held[k])
            L.free_(held[k], (ssize_t)sz[k], id % 2, s);
    return (void *)(intptr_t)bad;
}

static void test_threads(void)
{
    CHECK(L.set_events(&FAKE) == VDEV_OK);
    atomic_store(&auto_after, 3); /* each event passes at its third query */
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        CHECK(bad == NULL);
    }
    L.empty_cache();
    struct vdev_torch_stats st;
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.allocated_bytes == 0 && st.n_allocs == 0);
    CHECK(st.pending_bytes == 0 && st.n_same_stream_reuses > 0);
    CHECK(in_use("GPU:0") == 0 && in_use("GPU:1") == 0);
    CHECK(L.set_events(NULL) == VDEV_OK);
    CHECK(atomic_load(&n_recorded) == atomic_load(&n_dropped));
}

/* A malformed VDEV_TORCH_DEVICES fails every allocation, naming itself. */
static void test_bad_env(void)
{
    static const struct {
        const char *value, *msg;
    } cases[] = {
        {"0GPU:1", "VDEV_TORCH_DEVICES=\"0GPU:1\": expected TORCH_INDEX:VDEV_DEVICE in '0GPU:1'"},
        {"0:GPU:1,,1:GPU:0", "empty entry in ''"},
        {"0:GPU:1,", "VDEV_TORCH_DEVICES=\"0:GPU:1,\": empty entry at the end"},
        {"64:GPU:0", "PyTorch device index outside 0..63 in '64:GPU:0'"},
        {"0:", "no vdev device after ':' in '0:'"},
        {"0:GPU:0,0:GPU:1", "PyTorch device index given twice in '0:GPU:1'"},
        {"0:GPU:9", "VDEV_TORCH_DEVICES maps PyTorch device 0 to GPU:9: No matching devices found"},
        {"0:GPU:x", "VDEV_TORCH_DEVICES maps PyTorch device 0 to GPU:x: Failed parsing device name"},
        {"0:CPU:0", "VDEV_TORCH_DEVICES maps PyTorch device 0 to CPU:0: /device:CPU:0 is host "
                    "memory: PyTorch's CUDA tensors take a vdev GPU"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(L.reset() == VDEV_OK);
        setenv("VDEV_TORCH_DEVICES", cases[i].value, 1);
        CHECK(L.malloc_(16, 0, S1) == NULL);
        CHECK_HAS(L.last_error(), cases[i].msg);
    }
    unsetenv("VDEV_TORCH_DEVICES");
    CHECK(L.reset() == VDEV_OK);
    void *p = L.malloc_(16, 0, S1);
    CHECK(p != NULL && in_use("GPU:0") == 256);
    CHECK(L.reset() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(L.last_error(), "vdev_torch_reset: 1 blocks are live and 0 wait for events "
                              "(PyTorch still holds memory, or vdev_torch_empty_cache was not "
                              "called)");
    L.free_(p, 16, 0, S1);
    CHECK(L.reset() == VDEV_OK);
}

/* vdev_shutdown() while PyTorch holds blocks: refused, naming them; after
 * a shutdown that went ahead, the statistics start from zero. */
static void test_shutdown(void)
{
    CHECK(L.push("GPU:1") == VDEV_OK);
    void *a = L.malloc_(1000, 0, S1), *b = L.malloc_(1000, 0, S1);
    CHECK(L.pop() == VDEV_OK);
    void *c = L.malloc_(1000, 0, S1); /* PyTorch's device 0: GPU:0 here */
    CHECK(a && b && c);
    L.shutdown();
    CHECK(L.vdev_running());
    CHECK_STR(L.vdev_error(), "vdev_shutdown: 3 blocks of the PyTorch allocator "
                              "(libvdev-torch-alloc.so) are live (2 on /device:GPU:1, 1 on "
                              "/device:GPU:0): torch tensors over vdev memory; delete them first");
    CHECK(in_use("GPU:1") == 2048); /* nothing was freed */
    L.free_(a, 1000, 0, S1);
    L.free_(b, 1000, 0, S1);
    L.shutdown();
    CHECK(L.vdev_running());
    CHECK_STR(L.vdev_error(), "vdev_shutdown: 1 block of the PyTorch allocator "
                              "(libvdev-torch-alloc.so) is live (1 on /device:GPU:0): torch "
                              "tensors over vdev memory; delete them first");
    L.free_(c, 1000, 0, S1);
    L.shutdown();
    CHECK(!L.vdev_running());
    void *d = L.malloc_(512, 0, S1); /* starts the next runtime */
    struct vdev_torch_stats st;
    CHECK(L.stats("GPU:0", &st) == VDEV_OK && st.n_allocs_total == 1 && st.n_frees_total == 0 &&
          st.allocated_bytes == 512 && st.peak_allocated_bytes == 512 && st.n_bad_frees == 0);
    CHECK(L.stats("GPU:1", &st) == VDEV_OK && st.n_allocs_total == 0);
    L.free_(d, 512, 0, S1);
}

static atomic_int stop_hammer;

static void *hammer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_hammer)) {
        void *p = L.malloc_(4096, 0, S2);
        L.free_(p, 4096, 0, S2);
    }
    return NULL;
}

/* In a child forked from the running runtime: every call is refused at
 * once. Returns the number of failed checks. */
static int forked_child(long parent)
{
    alarm(20); /* a hang ends in SIGALRM */
    passed = failed = 0;
    char want[256];
    snprintf(want, sizeof want, "vdev_torch_malloc: vdev was started in process %ld, from which "
             "this process was forked; a forked child can neither use that runtime", parent);
    CHECK(L.malloc_(4096, 0, S1) == NULL);
    CHECK(strncmp(L.last_error(), want, strlen(want)) == 0);
    CHECK_HAS(L.last_error(), "start vdev after fork() in each process that uses it");
    struct vdev_torch_stats st;
    CHECK(L.stats("GPU:0", &st) == VDEV_ERR_UNSUPPORTED);
    CHECK(strncmp(L.last_error(), "vdev_torch_stats: vdev was started in process", 45) == 0);
    CHECK(L.set_device(0, "GPU:0") == VDEV_ERR_UNSUPPORTED);
    CHECK(L.push("GPU:0") == VDEV_ERR_UNSUPPORTED);
    int x;
    L.free_(&x, 4, 0, S1);
    CHECK(strncmp(L.last_error(), "vdev_torch_free: vdev was started", 33) == 0);
    return failed;
}

static void test_fork(void)
{
    pthread_t th;
    atomic_store(&stop_hammer, 0);
    CHECK(pthread_create(&th, NULL, hammer, NULL) == 0);
    for (int i = 0; i < 20; i++) {
        fflush(stdout);
        long parent = (long)getpid();
        pid_t pid = fork();
        if (pid == 0)
            _exit(forked_child(parent) ? 1 : 0);
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status))
            printf("child %d died of signal %d%s\n", i, WTERMSIG(status),
                   WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    atomic_store(&stop_hammer, 1);
    pthread_join(th, NULL);
}

/* The library unloaded (dlclose) while libvdev stays and runs: its holder
 * goes with it, so the next vdev_shutdown() calls none of its code (it
 * crashed calling the holder's function in the unloaded library). */
static void test_unload(void *h)
{
    Dl_info info;
    CHECK(dladdr(*(void **)&L.shutdown, &info) && info.dli_fname);
    void *vdev = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD); /* keeps libvdev loaded */
    CHECK(vdev != NULL);
    void *p = L.malloc_(1000, 0, S1); /* the runtime runs; the holder is registered */
    CHECK(p != NULL);
    L.free_(p, 1000, 0, S1);
    CHECK(L.reset() == VDEV_OK); /* its tables go; the holder stays registered */
    void (*shutdown)(void) = L.shutdown;
    bool (*running)(void) = L.vdev_running;
    CHECK(running());
    dlclose(h);
    shutdown();
    CHECK(!running());
    if (vdev)
        dlclose(vdev);
}

int main(void)
{
    setenv("VDEV_SIM_GPUS", "1x1GiB", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:64MiB,32MiB", 1);
    setenv("VDEV_TORCH_DEVICES", "0:GPU:1", 1);
    void *h = dlopen(VDEV_TORCH_ALLOC_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "test_torch_alloc: %s\n", dlerror());
        return 1;
    }
    *(void **)&L.malloc_ = sym(h, "vdev_torch_malloc");
    *(void **)&L.free_ = sym(h, "vdev_torch_free");
    *(void **)&L.set_device = sym(h, "vdev_torch_set_device");
    *(void **)&L.push = sym(h, "vdev_torch_push_device");
    *(void **)&L.pop = sym(h, "vdev_torch_pop_device");
    *(void **)&L.stats = sym(h, "vdev_torch_stats");
    *(void **)&L.set_events = sym(h, "vdev_torch_set_events");
    *(void **)&L.empty_cache = sym(h, "vdev_torch_empty_cache");
    *(void **)&L.last_error = sym(h, "vdev_torch_last_error");
    *(void **)&L.reset = sym(h, "vdev_torch_reset");
    *(void **)&L.memory_info = sym(h, "vdev_memory_info"); /* from libvdev.so, its dependency */
    *(void **)&L.shutdown = sym(h, "vdev_shutdown");
    *(void **)&L.vdev_error = sym(h, "vdev_last_error");
    *(void **)&L.vdev_running = sym(h, "vdev_is_initialized");

    test_mapping_and_limit();
    test_set_device_and_push();
    test_bad_input();
    test_streams();
    test_threads();
    test_bad_env();
    test_shutdown();
    test_fork();
    CHECK(L.reset() == VDEV_OK);
    test_unload(h);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
