/* test_streams.c — a stream per logical device: the logical devices of one
 * card run side by side on simulated GPUs.
 *
 * Checked: each logical GPU gets its own stream (its bdev), the first normal
 * device of a card the card's own one; work blocked on one logical device's
 * stream does not hold up a sibling of the same card (a host function waits
 * on a condition while the sibling's ops run and its result is read); a copy
 * between two streams of one card is ordered both ways (the source's later
 * write waits for the copy); priorities move the stream workers' nice
 * values; streams are closed at shutdown and when start-up fails; the
 * errors of stream_open. Nothing asserts on time: where the test needs to
 * know that something did not happen, it waits for it with a generous
 * timeout and checks what it saw. */
#define _GNU_SOURCE
#include "check.h"
#include "stream_gate.h"
#include "config/config.h"
#include "runtime/runtime.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MiB (1ull << 20)

/* Threads of this process now. */
static int n_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Whether the process comes to have want threads within 60 s: a joined
 * thread can still be listed in /proc/self/task for a moment after
 * pthread_join returns (the kernel wakes the joiner before it removes the
 * task), longer on a loaded machine. */
static int threads_become(int want)
{
    for (int i = 0; i < 60000 && n_threads() != want; i++)
        check_sleep_ms(1);
    return n_threads() == want;
}

/* ---- which stream each logical device gets ---- */

static void test_stream_per_device(void)
{
    check_fresh("2x8GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB,1GiB@low,1GiB;1:..@critical", 1);
    CHECK_OK(vdev_config_discover()); /* the backend, with each card's own stream */
    int before = n_threads();
    CHECK_OK(vdev_init());
    struct vdev_ldev *g0 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 0);
    struct vdev_ldev *g1 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 1);
    struct vdev_ldev *g2 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 2);
    struct vdev_ldev *g3 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 3);
    CHECK(g0 && g1 && g2 && g3);
    if (g0 && g1 && g2 && g3) {
        /* card 0's own stream for its first normal device; new ones for the rest */
        CHECK(g0->bdev == 0 && g0->own_stream);
        CHECK(g1->bdev >= 2 && g2->bdev >= 2 && g1->bdev != g2->bdev);
        CHECK(g1->physical == 0 && g2->physical == 0);
        /* card 1's only device is critical: a stream of its own, not the card's */
        CHECK(g3->physical == 1 && g3->bdev >= 2 && g3->bdev != g1->bdev &&
              g3->bdev != g2->bdev);
    }
    /* three streams opened beside the two cards' own ones */
    CHECK(n_threads() == before + 3);
    vdev_shutdown();
    CHECK(threads_become(before - 2)); /* the backend and its own streams went too */

    /* a start-up that fails after the streams were opened closes them */
    check_fresh("1x4GiB");
    CHECK_OK(vdev_config_discover());
    before = n_threads();
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB@high,1GiB@low", 1);
    setenv("VDEV_PLACEMENT", "sideways", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_MSG("VDEV_PLACEMENT");
    CHECK(threads_become(before));
    unsetenv("VDEV_PLACEMENT");
    CHECK_OK(vdev_init());
    CHECK(n_threads() == before + 2);
    check_fresh(NULL);
}

/* ---- a blocked logical device does not hold up its sibling ---- */

struct sibling {
    atomic_int done;
    enum vdev_status st;
    float got[4];
};

static void *sibling_work(void *arg)
{
    struct sibling *s = arg;
    const float v[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    vdev_device_push("GPU:1");
    vdev_tensor_t *x = vdev_tensor_from_host(v, shape, 1, VDEV_F32);
    vdev_tensor_t *y = vdev_add(x, x);
    s->st = y ? vdev_tensor_to_host(y, s->got, sizeof s->got) : vdev_last_status();
    vdev_tensor_free(y);
    vdev_tensor_free(x);
    vdev_device_pop();
    atomic_store(&s->done, 1);
    return NULL;
}

static void test_sibling_runs(void)
{
    check_fresh("1x4GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB,1GiB", 1);
    CHECK_OK(vdev_init());
    struct vdev_ldev *g0 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 0);
    CHECK(g0 != NULL);
    if (!g0)
        return;
    gate_close();
    gate_block(g0->backend, g0->bdev); /* GPU:0's stream is busy until the gate opens */
    struct sibling s = {0};
    pthread_t t;
    pthread_create(&t, NULL, sibling_work, &s);
    /* GPU:1's op and its read-back finish while GPU:0 is still held */
    int finished = check_wait_flag(&s.done);
    if (!finished)
        check_fail(__FILE__, __LINE__,
                   "GPU:1's work did not finish while GPU:0's stream was held: the logical "
                   "devices of one card share a stream");
    else
        check_passed++;
    gate_open();
    pthread_join(t, NULL);
    CHECK_OK(s.st);
    CHECK(s.got[0] == 2 && s.got[1] == 4 && s.got[2] == 6 && s.got[3] == 8);
    CHECK_OK(vdev_backend_synchronize(g0->backend, g0->bdev));
    check_fresh(NULL);
}

/* ---- copies between two streams of one card, ordered both ways ---- */

static void test_copy_both_ways(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_config_discover());
    struct vdev_backend *b = vdev_config_gpu_backend();
    CHECK(b && b->ops->stream_open && b->ops->stream_close);
    if (!b || !b->ops->stream_open)
        return;
    int qa = -1, qb = -1;
    uint64_t held = 1;
    CHECK_OK(b->ops->stream_open(b->ctx, 0, VDEV_PRIORITY_NORMAL, &qa, &held));
    CHECK(qa == 0 && held == 0); /* the card's own stream */
    CHECK_OK(b->ops->stream_open(b->ctx, 0, VDEV_PRIORITY_NORMAL, &qb, &held));
    CHECK(qb >= 1 && held == 0);
    void *src = NULL, *dst = NULL;
    CHECK_OK(b->ops->reserve(b->ctx, qa, MiB, &src));
    CHECK_OK(b->ops->reserve(b->ctx, qb, MiB, &dst));
    uint32_t *h = malloc(MiB);
    for (uint32_t i = 0; i < MiB / 4; i++)
        h[i] = i;
    CHECK_OK(b->ops->copy_h2d(b->ctx, qa, src, h, MiB));
    /* the destination's stream is held: the copy waits there */
    gate_close();
    gate_block(b, qb);
    CHECK_OK(b->ops->copy_d2d(b->ctx, qb, dst, qa, src, MiB));
    /* the source's stream writes its buffer next: after the copy has read it */
    CHECK_OK(vdev_backend_fill(b, qa, src, 7, MiB / 4));
    gate_open();
    CHECK_OK(vdev_backend_synchronize(b, qa));
    CHECK_OK(vdev_backend_synchronize(b, qb));
    memset(h, 0xff, MiB);
    CHECK_OK(b->ops->copy_d2h(b->ctx, qb, h, dst, MiB));
    int ok = 1;
    for (uint32_t i = 0; i < MiB / 4 && ok; i++)
        ok = h[i] == i;
    if (!ok)
        check_fail(__FILE__, __LINE__, "the copy read what the source's stream wrote after it");
    else
        check_passed++;
    CHECK_OK(b->ops->copy_d2h(b->ctx, qa, h, src, 4));
    CHECK(h[0] == 7);
    /* events of one stream do not make another wait; of another they do */
    void *ev = NULL;
    CHECK_OK(b->ops->event_record(b->ctx, qa, &ev));
    CHECK_OK(b->ops->stream_wait_event(b->ctx, qb, ev));
    CHECK_OK(b->ops->stream_wait_event(b->ctx, qa, ev));
    CHECK_OK(vdev_backend_synchronize(b, qb));
    CHECK(b->ops->event_done(b->ctx, ev));
    b->ops->event_drop(b->ctx, ev);
    /* memory of both streams is the card's */
    uint64_t fr, total;
    CHECK_OK(b->ops->mem_info(b->ctx, qb, &fr, &total));
    CHECK_EQ_U64(total - fr, 2 * MiB);
    b->ops->release(b->ctx, qa, src, MiB);
    b->ops->release(b->ctx, qb, dst, MiB);
    CHECK_OK(b->ops->mem_info(b->ctx, 0, &fr, &total));
    CHECK_EQ_U64(fr, total);
    b->ops->stream_close(b->ctx, qb);
    b->ops->stream_close(b->ctx, qa);
    /* the card's own stream is free again, and the slot of qb too */
    int q = -1;
    CHECK_OK(b->ops->stream_open(b->ctx, 0, VDEV_PRIORITY_NORMAL, &q, &held));
    CHECK(q == 0);
    int q2 = -1;
    CHECK_OK(b->ops->stream_open(b->ctx, 0, VDEV_PRIORITY_NORMAL, &q2, &held));
    CHECK(q2 == qb);
    b->ops->stream_close(b->ctx, q2);
    b->ops->stream_close(b->ctx, q);
    free(h);
    check_fresh(NULL);
}

/* ---- priorities: the workers' nice values ---- */

static int nice_seen[3];

struct nice_arg {
    int *out;
};

static void nice_fn(void *arg)
{
    const struct nice_arg *a = arg;
    errno = 0;
    *a->out = getpriority(PRIO_PROCESS, 0); /* Linux: this thread's */
}

static void test_priorities(void)
{
    check_fresh("1x8GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB@critical,1GiB@low,1GiB", 1);
    errno = 0;
    int base = getpriority(PRIO_PROCESS, 0);
    CHECK_OK(vdev_init());
    for (int i = 0; i < 3; i++) {
        struct vdev_ldev *d = vdev_runtime_lookup(VDEV_DEVICE_GPU, i);
        CHECK(d != NULL);
        if (!d)
            return;
        struct nice_arg a = {&nice_seen[i]};
        CHECK_OK(vdev_backend_submit_host(d->backend, d->bdev, nice_fn, &a, sizeof a));
        CHECK_OK(vdev_backend_synchronize(d->backend, d->bdev));
    }
    int low = base + 10 > 19 ? 19 : base + 10;
    CHECK(nice_seen[1] == low);  /* low: raised, which needs no privilege */
    CHECK(nice_seen[2] == base); /* normal: the card's own stream, untouched */
    /* critical: lowered where the process may, else unchanged */
    int crit = base - 10 < -20 ? -20 : base - 10;
    CHECK(nice_seen[0] == crit || nice_seen[0] == base);
    printf("nice values: critical %d, low %d, normal %d (the process: %d)\n", nice_seen[0],
           nice_seen[1], nice_seen[2], base);
    check_fresh(NULL);
}

/* ---- stream_open's errors ---- */

static void test_open_errors(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_config_discover());
    struct vdev_backend *b = vdev_config_gpu_backend();
    if (!b)
        return;
    int q = -1;
    uint64_t held;
    CHECK_STATUS(b->ops->stream_open(b->ctx, 1, VDEV_PRIORITY_NORMAL, &q, &held),
                 VDEV_ERR_NOT_FOUND);
    CHECK_STR(vdev_last_error(), "sim backend has no device 1");
    CHECK_STATUS(b->ops->stream_open(b->ctx, -1, VDEV_PRIORITY_NORMAL, &q, &held),
                 VDEV_ERR_NOT_FOUND);
    /* the table of streams fills up */
    int qs[300], n = 0;
    enum vdev_status st = VDEV_OK;
    while (n < 300 && (st = b->ops->stream_open(b->ctx, 0, VDEV_PRIORITY_NORMAL, &qs[n],
                                                &held)) == VDEV_OK)
        n++;
    CHECK(n == 256); /* the card's own stream, and 255 more */
    CHECK(st == VDEV_ERR_UNSUPPORTED);
    CHECK_STR(vdev_last_error(), "sim backend: more than 256 streams");
    for (int i = n - 1; i >= 0; i--)
        b->ops->stream_close(b->ctx, qs[i]);
    CHECK_OK(b->ops->stream_open(b->ctx, 0, VDEV_PRIORITY_LOW, &q, &held));
    CHECK(q == 1);
    b->ops->stream_close(b->ctx, q);
    check_fresh(NULL);
}

int main(void)
{
    test_stream_per_device();
    test_sibling_runs();
    test_copy_both_ways();
    test_priorities();
    test_open_errors();
    return check_done();
}
