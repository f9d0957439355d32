/* test_lazy_copy.c — a copy of a tensor to another GPU does not hold the
 * source's stream until it has run (tensor.c, copy_contents: a chain of
 * models on several GPUs keeps every stream busy); instead every later
 * write to the source waits for the copy, and the source's memory is reused
 * only after it.
 *
 * Each case holds the destination's stream (a host function waiting on a
 * gate), so the copy is queued but cannot run, then writes the source in
 * one of the ways a tensor is written in place: vdev_assign, an all-reduce,
 * a DLPack export written through its pointer; the source is also freed and
 * a new tensor of its size written at once (it must not get the memory yet),
 * also after a plain copy to a third GPU has followed the lazy one. After the gate opens, the copy
 * must hold the source's values from before the write. Also: the source's
 * stream runs ahead while the copy waits (work queued on it after the copy
 * finishes before the gate opens), a lazy copy waits for the op that wrote
 * its source but not for what that stream queued after it, and a variable,
 * which is written in place every step, still takes the plain copy that
 * holds its stream.
 * Nothing asserts on time: where the test needs to know that something did
 * not happen, it waits for it with a generous timeout and checks what it saw. */
#define _GNU_SOURCE
#include "check.h"
#include "runtime/runtime.h"
#include "tensor/tensor.h"
#include "vdev/distribute.h"

#include <dlpack/dlpack.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

enum { N = 4096 };

/* A stream held by a host function until the gate opens. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
    atomic_int entered;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void gate_fn(void *arg)
{
    (void)arg;
    atomic_store(&gate.entered, 1);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 120; /* never forever, even when the test fails */
    pthread_mutex_lock(&gate.lock);
    while (!gate.open && pthread_cond_timedwait(&gate.cond, &gate.lock, &dl) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&gate.lock);
}

static void hold(const char *device)
{
    struct vdev_ldev *d = NULL;
    CHECK_OK(vdev_runtime_find(device, &d));
    if (!d)
        return;
    pthread_mutex_lock(&gate.lock);
    gate.open = 0;
    atomic_store(&gate.entered, 0);
    pthread_mutex_unlock(&gate.lock);
    char unused = 0;
    CHECK_OK(vdev_backend_submit_host(d->backend, d->bdev, gate_fn, &unused, sizeof unused));
    CHECK(check_wait_flag(&gate.entered));
}

static void release(void)
{
    pthread_mutex_lock(&gate.lock);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
}

static float host[N];

/* A tensor of N floats on `device`: base, base + 1, ... */
static vdev_tensor_t *ramp(const char *device, float base)
{
    for (int i = 0; i < N; i++)
        host[i] = base + (float)i;
    int64_t shape[1] = {N};
    vdev_device_push(device);
    vdev_tensor_t *t = vdev_tensor_from_host(host, shape, 1, VDEV_F32);
    vdev_device_pop();
    CHECK(t != NULL);
    return t;
}

/* Whether t holds base, base + 1, ... */
static int is_ramp(const vdev_tensor_t *t, float base)
{
    memset(host, 0, sizeof host);
    if (vdev_tensor_to_host(t, host, sizeof host) != VDEV_OK)
        return 0;
    for (int i = 0; i < N; i++)
        if (host[i] != base + (float)i)
            return 0;
    return 1;
}

/* The copy of src to GPU:1 (queued behind the held stream). */
static vdev_tensor_t *copy_to_gpu1(const vdev_tensor_t *src)
{
    vdev_device_push("GPU:1");
    vdev_tensor_t *c = vdev_identity(src);
    vdev_device_pop();
    CHECK(c != NULL);
    return c;
}

static void by_assign(void)
{
    vdev_scope_begin();
    vdev_tensor_t *a = ramp("GPU:0", 1), *z = ramp("GPU:0", 100);
    hold("GPU:1");
    vdev_tensor_t *c = copy_to_gpu1(a);
    CHECK_OK(vdev_assign(a, z)); /* queued on GPU:0: waits for GPU:1's copy */
    release();
    CHECK(is_ramp(c, 1));
    CHECK(is_ramp(a, 100));
    vdev_scope_end();
}

/* A thread that runs fn(arg) and raises `done`. */
struct job {
    void (*fn)(struct job *);
    vdev_tensor_t *t;
    vdev_comm_t *comm;
    int rank;
    enum vdev_status st;
    float first; /* what fn saw */
    atomic_int done;
};

static void *job_main(void *arg)
{
    struct job *j = arg;
    j->fn(j);
    atomic_store(&j->done, 1);
    return NULL;
}

/* Exports t and writes 7 through the exported pointer (sim memory is the
 * host's), as another framework holding it may. */
static void export_and_write(struct job *j)
{
    struct DLManagedTensor *m = NULL;
    j->st = vdev_tensor_to_dlpack(j->t, &m);
    if (j->st != VDEV_OK)
        return;
    float *p = m->dl_tensor.data;
    for (int i = 0; i < N; i++)
        p[i] = 7;
    m->deleter(m);
}

static void by_dlpack(void)
{
    vdev_scope_begin();
    vdev_tensor_t *a = ramp("GPU:0", 1);
    hold("GPU:1");
    vdev_tensor_t *c = copy_to_gpu1(a);
    struct job j = {.fn = export_and_write, .t = a};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, job_main, &j) == 0);
    check_sleep_ms(300); /* room to go wrong: the export must wait for GPU:1 */
    CHECK(!atomic_load(&j.done));
    release();
    pthread_join(th, NULL);
    CHECK_OK(j.st);
    CHECK(is_ramp(c, 1));
    vdev_scope_end();
}

static void all_reduce_rank(struct job *j)
{
    j->st = vdev_comm_all_reduce(j->comm, j->rank, &j->t, 1, VDEV_REDUCE_SUM);
}

static void by_all_reduce(void)
{
    vdev_scope_begin();
    const char *devs[2] = {"GPU:0", "GPU:2"};
    vdev_comm_t *comm = NULL;
    CHECK_OK(vdev_comm_new(devs, 2, &comm));
    vdev_tensor_t *a = ramp("GPU:0", 1), *b = ramp("GPU:2", 1);
    hold("GPU:1");
    vdev_tensor_t *c = copy_to_gpu1(a);
    struct job j[2] = {{.fn = all_reduce_rank, .t = a, .comm = comm, .rank = 0},
                       {.fn = all_reduce_rank, .t = b, .comm = comm, .rank = 1}};
    pthread_t th[2];
    for (int r = 0; r < 2; r++)
        CHECK(pthread_create(&th[r], NULL, job_main, &j[r]) == 0);
    check_sleep_ms(300); /* room for the all-reduce to be queued on GPU:0 */
    release();
    for (int r = 0; r < 2; r++) {
        pthread_join(th[r], NULL);
        CHECK_OK(j[r].st);
    }
    CHECK(is_ramp(c, 1));
    memset(host, 0, sizeof host);
    CHECK_OK(vdev_tensor_to_host(a, host, sizeof host));
    CHECK(host[0] == 2.0f && host[N - 1] == 2.0f * (float)N);
    vdev_comm_free(comm);
    vdev_scope_end();
}

/* The source is freed while the copy waits; a new tensor of its size on
 * GPU:0, written at once from the host, must not take its memory yet. With
 * third_reader, a plain copy to GPU:2 follows the lazy one first (it
 * replaces the lazy reader as the last reader the tensor remembers): the
 * memory must still wait for the lazy copy. */
static void by_reuse(int third_reader)
{
    vdev_scope_begin();
    vdev_tensor_t *a = ramp("GPU:0", 1);
    hold("GPU:1");
    vdev_tensor_t *c = copy_to_gpu1(a);
    if (third_reader) {
        vdev_device_push("GPU:2");
        vdev_tensor_t *c2 = vdev_identity(a);
        vdev_device_pop();
        CHECK(c2 != NULL && is_ramp(c2, 1));
    }
    vdev_tensor_free(a);
    vdev_tensor_t *n = ramp("GPU:0", 500);
    release();
    CHECK(is_ramp(c, 1));
    CHECK(is_ramp(n, 500));
    vdev_scope_end();
}

static float job_buf[N];

static void read_first(struct job *j)
{
    j->st = vdev_tensor_to_host(j->t, job_buf, sizeof job_buf);
    j->first = job_buf[0];
}

/* Reads t on a thread while the gate holds a stream. finishes 1: the read
 * must end while the gate is closed; 0: it must not (given 300 ms to go
 * wrong). Then opens the gate and returns the first element read. */
static float read_under_gate(vdev_tensor_t *t, int finishes)
{
    struct job j = {.fn = read_first, .t = t, .first = -1};
    pthread_t th;
    int started = pthread_create(&th, NULL, job_main, &j) == 0;
    CHECK(started);
    if (finishes) {
        CHECK(check_wait_flag(&j.done));
    } else {
        check_sleep_ms(300);
        CHECK(!atomic_load(&j.done));
    }
    release();
    if (!started)
        return -1;
    pthread_join(th, NULL);
    CHECK_OK(j.st);
    return j.first;
}

static float first_of(const vdev_tensor_t *t)
{
    CHECK_OK(vdev_tensor_to_host(t, host, sizeof host));
    return host[0];
}

/* The source's stream runs ahead of a lazy copy: an op queued on GPU:0
 * after it finishes while the copy still waits. A variable takes the plain
 * copy: GPU:0 waits for it. */
static void runs_ahead(int variable)
{
    vdev_scope_begin();
    vdev_tensor_t *a = ramp("GPU:0", 1);
    if (variable)
        a = vdev_variable(a);
    CHECK(a != NULL);
    hold("GPU:1");
    vdev_tensor_t *c = copy_to_gpu1(a);
    vdev_device_push("GPU:0");
    vdev_tensor_t *y = vdev_add(a, a);
    vdev_device_pop();
    CHECK(y != NULL);
    CHECK(read_under_gate(y, !variable) == 2.0f);
    CHECK(is_ramp(c, 1));
    CHECK(first_of(y) == 2.0f);
    vdev_scope_end();
}

/* A lazy copy waits for the op that wrote its source, not for what its
 * stream queued after that op: with GPU:0 held after y was made, y's copy
 * runs; with GPU:0 held before, it waits for the op. */
static void after_its_producer(int held_before)
{
    vdev_scope_begin();
    vdev_tensor_t *a = ramp("GPU:0", 1);
    CHECK(is_ramp(a, 1));
    if (held_before)
        hold("GPU:0");
    vdev_device_push("GPU:0");
    vdev_tensor_t *y = vdev_add(a, a);
    vdev_device_pop();
    CHECK(y != NULL);
    if (!held_before)
        hold("GPU:0");
    vdev_tensor_t *c = copy_to_gpu1(y);
    CHECK(read_under_gate(c, !held_before) == 2.0f);
    vdev_scope_end();
}

/* A tensor written after the op that made it (vdev_assign, queued behind a
 * held GPU:0): its copy waits for that write too. */
static void after_a_write(void)
{
    vdev_scope_begin();
    vdev_tensor_t *a = ramp("GPU:0", 1), *z = ramp("GPU:0", 100);
    vdev_device_push("GPU:0");
    vdev_tensor_t *y = vdev_add(a, a);
    vdev_device_pop();
    CHECK(y != NULL && is_ramp(z, 100));
    hold("GPU:0");
    CHECK_OK(vdev_assign(y, z));
    vdev_tensor_t *c = copy_to_gpu1(y);
    CHECK(read_under_gate(c, 0) == 100.0f);
    CHECK(is_ramp(c, 100));
    vdev_scope_end();
}

int main(void)
{
    check_fresh("3x1GiB");
    by_assign();
    by_dlpack();
    by_all_reduce();
    by_reuse(0);
    by_reuse(1);
    runs_ahead(0);
    runs_ahead(1);
    after_its_producer(0);
    after_its_producer(1);
    after_a_write();
    check_fresh(NULL);
    return check_done();
}
