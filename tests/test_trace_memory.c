/* test_trace_memory.c — the profiler trace's memory counters follow every
 * change of a device's reserved memory, not only its own allocations and
 * frees: vdev_memory_release_cached, lending (the lender gives regions back
 * for another device of its card, on that device's allocation or on a floor
 * raised for it), and the floor preallocated at start-up (a device that
 * holds only that still gets its counter). After each case the last counter
 * of every device must say what vdev_memory_info says at the end (a device
 * that never held anything has none), and the counters of one device must
 * come in time order, also while several threads allocate, free, lend and
 * release at once.
 *
 * Cards are simulated with no driver reserve, so a 1 GiB card has a budget
 * of exactly 1 GiB. */
#define _GNU_SOURCE
#include "govern_check.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* One memory counter event as the trace has it. */
struct sample {
    double ts;
    long long in_use, reserved;
};

/* The memory counters of device `dev` in trace s, in file order, into out
 * (at most cap); returns how many there are (more than cap: only counted). */
static int samples(const char *s, const char *dev, struct sample *out, int cap)
{
    char key[96];
    snprintf(key, sizeof key, "{\"name\":\"memory %s\",\"ph\":\"C\",\"ts\":", dev);
    int n = 0;
    for (const char *p = s ? strstr(s, key) : NULL; p; p = strstr(p + 1, key), n++) {
        if (n >= cap)
            continue;
        const char *u = strstr(p, "\"in_use\":"), *r = strstr(p, "\"reserved\":");
        out[n].ts = atof(p + strlen(key));
        out[n].in_use = u ? atoll(u + 9) : -1;
        out[n].reserved = r ? atoll(r + 11) : -1;
    }
    return n;
}

#define MAX_SAMPLES 200000
static struct sample S[MAX_SAMPLES];

/* Starts the runtime on a fresh simulated card of `card` split as `split`,
 * writing a trace to a new temporary file named from the template `path`,
 * with `growth` as VDEV_MEMORY_GROWTH (NULL: left unset). 0 when the file
 * cannot be made (the failure is counted). */
static int start(char *path, const char *card, const char *split, const char *growth)
{
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return 0;
    close(fd);
    fresh_card(card);
    setenv("VDEV_LOGICAL_DEVICES", split, 1);
    if (growth)
        setenv("VDEV_MEMORY_GROWTH", growth, 1);
    setenv("VDEV_TRACE_FILE", path, 1);
    CHECK_OK(vdev_init());
    return 1;
}

/* What vdev_memory_info says of the devices at the end, before shutdown. */
struct at_end {
    uint64_t in_use[2], reserved[2];
};

static void take_end(struct at_end *e)
{
    static const char *devs[2] = {"GPU:0", "GPU:1"};
    for (int i = 0; i < 2; i++) {
        struct vdev_memory_info mi;
        CHECK_OK(vdev_memory_info(devs[i], &mi));
        e->in_use[i] = mi.bytes_in_use;
        e->reserved[i] = mi.bytes_reserved;
    }
}

/* Shuts down and reads the trace: every device's counters are in time order
 * and its last one says what vdev_memory_info said at the end; returns the
 * trace (malloc'd) for more checks, or NULL. */
static char *finish(const char *path, const struct at_end *e, int line)
{
    vdev_shutdown();
    char *s = check_slurp(path);
    unlink(path);
    if (!s) {
        check_fail(__FILE__, line, "cannot read the trace");
        return NULL;
    }
    static const char *names[2] = {"/device:GPU:0", "/device:GPU:1"};
    for (int i = 0; i < 2; i++) {
        int n = samples(s, names[i], S, MAX_SAMPLES);
        if (n == 0 && !e->in_use[i] && !e->reserved[i]) {
            check_passed++; /* never held anything: no counter */
            continue;
        }
        if (n < 1 || n > MAX_SAMPLES) {
            check_fail(__FILE__, line, "%s: %d memory counters", names[i], n);
            continue;
        }
        int ordered = 1;
        for (int k = 1; k < n; k++)
            ordered &= S[k].ts >= S[k - 1].ts;
        if (!ordered)
            check_fail(__FILE__, line, "%s: memory counters out of time order", names[i]);
        else if (S[n - 1].in_use != (long long)e->in_use[i] ||
                 S[n - 1].reserved != (long long)e->reserved[i])
            check_fail(__FILE__, line, "%s: the trace ends at %lld in use, %lld reserved; "
                                       "vdev_memory_info says %llu and %llu",
                       names[i], S[n - 1].in_use, S[n - 1].reserved,
                       (unsigned long long)e->in_use[i], (unsigned long long)e->reserved[i]);
        else
            check_passed++;
    }
    return s;
}

/* Does the trace hold a counter of dev with this much reserved? */
static int has_reserved(const char *s, const char *dev, long long reserved)
{
    int n = samples(s, dev, S, MAX_SAMPLES);
    for (int k = 0; k < n && k < MAX_SAMPLES; k++)
        if (S[k].reserved == reserved)
            return 1;
    return 0;
}

/* GPU:0 grows to 512 MiB (regions of 128, 128 and 256 MiB), frees it all
 * and then holds 512 MiB of empty regions. */
static void fill_and_free_gpu0(void)
{
    void *a[4];
    for (int i = 0; i < 4; i++)
        CHECK_OK(vdev_mem_alloc("GPU:0", 100 * MIB, &a[i]));
    for (int i = 0; i < 4; i++)
        CHECK_OK(vdev_mem_free("GPU:0", a[i]));
    CHECK_EQ_U64(reserved("GPU:0"), 512 * MIB);
}

/* vdev_memory_release_cached gives the 512 MiB back: the trace says so. */
static void test_release_cached(void)
{
    char path[] = "/tmp/vdev-test-trace-memory-XXXXXX";
    if (!start(path, "1x1GiB", "0:..,..", NULL))
        return;
    fill_and_free_gpu0();
    uint64_t released = 0;
    CHECK_OK(vdev_memory_release_cached("GPU:0", &released));
    CHECK_EQ_U64(released, 512 * MIB);
    CHECK_EQ_U64(reserved("GPU:0"), 0);
    struct at_end e;
    take_end(&e);
    char *s = finish(path, &e, __LINE__);
    CHECK(has_reserved(s, "/device:GPU:0", (long long)(512 * MIB)));
    free(s);
}

/* GPU:1's allocation of 600 MiB needs GPU:0's empty regions (the card has
 * 512 MiB left): GPU:0 lends, and both counters follow. */
static void test_lending(void)
{
    char path[] = "/tmp/vdev-test-trace-memory-XXXXXX";
    if (!start(path, "1x1GiB", "0:..,..", NULL))
        return;
    fill_and_free_gpu0();
    void *b;
    CHECK_OK(vdev_mem_alloc("GPU:1", 600 * MIB, &b));
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK(l.n_lends == 1 && l.lent_bytes > 0);
    CHECK(reserved("GPU:0") < 512 * MIB);
    struct at_end e;
    take_end(&e);
    CHECK(e.reserved[0] + e.reserved[1] <= GIB);
    char *s = finish(path, &e, __LINE__);
    free(s);
}

/* A floor raised for GPU:1 at run time takes GPU:0's empty regions as
 * lending does: GPU:0's counter follows. */
static void test_floor_raised(void)
{
    char path[] = "/tmp/vdev-test-trace-memory-XXXXXX";
    if (!start(path, "1x1GiB", "0:..,..", NULL))
        return;
    fill_and_free_gpu0();
    CHECK_OK(vdev_memory_set_limits("GPU:1", 600 * MIB, 0));
    CHECK(reserved("GPU:0") <= 424 * MIB);
    struct at_end e;
    take_end(&e);
    char *s = finish(path, &e, __LINE__);
    free(s);
}

/* Without growth each device preallocates its floor at start-up: GPU:1,
 * which never allocates, has its counter (300 MiB reserved, nothing in
 * use), and GPU:0's first counter is its floor before its allocation. */
static void test_preallocated(void)
{
    char path[] = "/tmp/vdev-test-trace-memory-XXXXXX";
    if (!start(path, "1x1GiB", "0:200MiB,300MiB", "false"))
        return;
    void *a;
    CHECK_OK(vdev_mem_alloc("GPU:0", MIB, &a));
    CHECK_EQ_U64(reserved("GPU:1"), 300 * MIB);
    struct at_end e;
    take_end(&e);
    char *s = finish(path, &e, __LINE__);
    CHECK(samples(s, "/device:GPU:0", S, MAX_SAMPLES) >= 2);
    CHECK(S[0].in_use == 0 && S[0].reserved == (long long)(200 * MIB));
    CHECK(samples(s, "/device:GPU:1", S, MAX_SAMPLES) == 1);
    CHECK(S[0].in_use == 0 && S[0].reserved == (long long)(300 * MIB));
    /* the host's device holds nothing at start: no counter for it yet */
    CHECK(samples(s, "/device:CPU:0", S, MAX_SAMPLES) == 0);
    free(s);
}

/* Several threads allocate and free on both devices of a card too small
 * for both (so they run out and lend to each other), one of them releasing the cached
 * memory now and then: each device's counters stay in time order and end
 * where the device does. (Under TSan: the trace's lock nested inside the
 * allocators' shows no inversion.) */
#define THREADS 4
#define ROUNDS 300
static atomic_int failures;

static void *churn(void *arg)
{
    int t = (int)(intptr_t)arg;
    const char *dev = t % 2 ? "GPU:1" : "GPU:0";
    void *held[3] = {NULL, NULL, NULL};
    for (int r = 0; r < ROUNDS; r++) {
        int k = r % 3;
        if (held[k] && vdev_mem_free(dev, held[k]) != VDEV_OK)
            atomic_fetch_add(&failures, 1);
        held[k] = NULL;
        uint64_t sz = (uint64_t)(1 + (r * 7 + t * 13) % 64) * MIB;
        enum vdev_status st = vdev_mem_alloc(dev, sz, &held[k]);
        if (st != VDEV_OK && st != VDEV_ERR_OOM)
            atomic_fetch_add(&failures, 1);
        if (t == 0 && r % 50 == 49 &&
            vdev_memory_release_cached(r % 100 == 49 ? "GPU:1" : "GPU:0", NULL) != VDEV_OK)
            atomic_fetch_add(&failures, 1);
    }
    for (int k = 0; k < 3; k++)
        if (held[k] && vdev_mem_free(dev, held[k]) != VDEV_OK)
            atomic_fetch_add(&failures, 1);
    return NULL;
}

static void test_threads(void)
{
    char path[] = "/tmp/vdev-test-trace-memory-XXXXXX";
    /* a 256 MiB card: two threads per device, each holding up to 3 x 64 MiB */
    if (!start(path, "1x256MiB", "0:..,..", NULL))
        return;
    atomic_store(&failures, 0);
    CHECK(check_run_threads(THREADS, churn) == THREADS);
    CHECK(atomic_load(&failures) == 0);
    struct at_end e;
    take_end(&e);
    CHECK(e.in_use[0] == 0 && e.in_use[1] == 0);
    char *s = finish(path, &e, __LINE__);
    free(s);
}

int main(void)
{
    test_release_cached();
    test_lending();
    test_floor_raised();
    test_preallocated();
    test_threads();
    check_fresh(NULL);
    return check_done();
}
