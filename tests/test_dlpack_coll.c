/* test_dlpack_coll.c — collectives on memory exported through DLPack as host
 * memory (a simulated GPU's tensor): the consumer has no stream to wait on,
 * so when a collective returns, every read of the exported memory that it
 * queued on a stream is done (the consumer may write the memory at once, and
 * the read must see what it held when the call was made), and so is every
 * write (the consumer may read it at once).
 *
 * Each case holds one simulated GPU's stream with a gate (a host function
 * that waits until the test opens it), so the collective's copies on that
 * stream are still queued when the ranks' calls have queued their parts.
 * The rank whose tensor is exported writes (or reads) the exported memory as
 * soon as its call returns; the test opens the gate once that happened, or
 * after a short wait when the call is still waiting for the stream (as it
 * must). A call that returned before its reads were done would let the
 * consumer's write into the copy; the results say so. Nothing asserts on
 * time: the wait only decides how long the test gives a wrong call to show
 * itself.
 *
 * Cases: a broadcast's root (read only), an all-gather's in (read only), an
 * all-reduce's tensor (read, then written), a broadcast's receiver (written:
 * the consumer reads it at once), and a replica's rows of an exported global
 * batch (vdev_replica_batch, a copy on the replica's stream). */
#define _GNU_SOURCE
#include "check.h"
#include "stream_gate.h"
#include "runtime/runtime.h"

#include <dlpack/dlpack.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* ---- the gate (stream_gate.h) on a logical device ---- */

/* Holds the stream of logical device `name` until gate_open(). */
static void gate_hold(const char *name)
{
    gate_close();
    struct vdev_ldev *d = NULL;
    CHECK_OK(vdev_runtime_find(name, &d));
    if (d)
        gate_block(d->backend, d->bdev);
}

/* Opens the gate once *flag is set, or after about 300 ms: a call that
 * waits for the held stream (as it should) is let go then; one that does
 * not has set the flag long before. */
static void gate_open_after(atomic_int *flag)
{
    for (int i = 0; i < 300 && !atomic_load(flag); i++)
        check_sleep_ms(1);
    gate_open();
}

/* ---- ranks ---- */

enum kind { ALL_REDUCE, BROADCAST, ALL_GATHER };
enum act { ACT_NONE, ACT_WRITE, ACT_READ }; /* the consumer, after the call */

struct rank {
    vdev_comm_t *comm;
    int rank;
    enum kind kind;
    vdev_tensor_t *t[2];           /* the tensor (all-gather: in, out) */
    enum act act;
    volatile float *mem;           /* the exported memory (act != ACT_NONE) */
    float seen[4];                 /* ACT_READ: what the consumer read */
    enum vdev_status st;
    atomic_int done;               /* the call returned and the consumer acted */
};

static void *rank_main(void *arg)
{
    struct rank *r = arg;
    switch (r->kind) {
    case ALL_REDUCE:
        r->st = vdev_comm_all_reduce(r->comm, r->rank, r->t, 1, VDEV_REDUCE_SUM);
        break;
    case BROADCAST:
        r->st = vdev_comm_broadcast(r->comm, r->rank, r->t, 1, 0);
        break;
    default:
        r->st = vdev_comm_all_gather(r->comm, r->rank, r->t[0], r->t[1]);
        break;
    }
    for (int i = 0; i < 4; i++) {
        if (r->act == ACT_WRITE)
            r->mem[i] = 100;
        else if (r->act == ACT_READ)
            r->seen[i] = r->mem[i];
    }
    atomic_store(&r->done, 1);
    return NULL;
}

static vdev_tensor_t *on(const char *dev, const float *h, int64_t n)
{
    int64_t shape[1] = {n};
    vdev_device_push(dev);
    vdev_tensor_t *t = vdev_tensor_from_host(h, shape, 1, VDEV_F32);
    vdev_device_pop();
    return t;
}

static int same(const float *a, const float *b, int n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* Runs `kind` on GPU:0 and GPU:1 with GPU:`held`'s stream held, rank `who`'s
 * tensor #`which` exported and acted on by `act` after its call. */
static void run_case(enum kind kind, int held, int who, int which, enum act act,
                     struct rank *rk, vdev_comm_t *comm)
{
    DLManagedTensor *m = NULL;
    CHECK_OK(vdev_tensor_to_dlpack(rk[who].t[which], &m));
    if (!m)
        return;
    for (int q = 0; q < 2; q++) {
        rk[q].comm = comm;
        rk[q].rank = q;
        rk[q].kind = kind;
        rk[q].act = q == who ? act : ACT_NONE;
        rk[q].mem = q == who ? m->dl_tensor.data : NULL;
        atomic_store(&rk[q].done, 0);
    }
    gate_hold(held ? "GPU:1" : "GPU:0");
    pthread_t th[2];
    for (int q = 0; q < 2; q++)
        pthread_create(&th[q], NULL, rank_main, &rk[q]);
    gate_open_after(&rk[who].done);
    for (int q = 0; q < 2; q++)
        pthread_join(th[q], NULL);
    CHECK_OK(rk[0].st);
    CHECK_OK(rk[1].st);
    m->deleter(m);
}

static void get(vdev_tensor_t *t, float *h, size_t bytes)
{
    CHECK_OK(vdev_tensor_to_host(t, h, bytes));
}

static void test_collectives(void)
{
    check_fresh("2x1GiB");
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_comm_t *comm = NULL;
    CHECK_OK(vdev_comm_new(devs, 2, &comm));
    if (!comm)
        return;
    const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, z[8] = {0};
    const float hundred[4] = {100, 100, 100, 100};
    float got[8];
    struct rank rk[2];
    memset(rk, 0, sizeof rk);

    /* A broadcast's root, exported: rank 1's stream copies it, and the
     * consumer writes it as soon as the root's call returns. */
    rk[0].t[0] = on("GPU:0", a, 4);
    rk[1].t[0] = on("GPU:1", z, 4);
    run_case(BROADCAST, 1, 0, 0, ACT_WRITE, rk, comm);
    get(rk[1].t[0], got, 4 * sizeof *got);
    if (!same(got, a, 4))
        check_fail(__FILE__, __LINE__, "broadcast: rank 1 got %g %g %g %g, not 1 2 3 4: the "
                   "root's call returned before the copy read its exported memory",
                   got[0], got[1], got[2], got[3]);
    else
        check_passed++;
    get(rk[0].t[0], got, 4 * sizeof *got);
    CHECK(same(got, hundred, 4)); /* the consumer's write stands */
    vdev_tensor_free(rk[0].t[0]);
    vdev_tensor_free(rk[1].t[0]);

    /* An all-gather's in, exported: its own stream copies it into out (and
     * rank 1's copies that on). */
    rk[0].t[0] = on("GPU:0", a, 4);
    rk[1].t[0] = on("GPU:1", b, 4);
    rk[0].t[1] = on("GPU:0", z, 8);
    rk[1].t[1] = on("GPU:1", z, 8);
    run_case(ALL_GATHER, 0, 0, 0, ACT_WRITE, rk, comm);
    const float ab[8] = {1, 2, 3, 4, 10, 20, 30, 40};
    for (int q = 0; q < 2; q++) {
        get(rk[q].t[1], got, 8 * sizeof *got);
        if (!same(got, ab, 8))
            check_fail(__FILE__, __LINE__, "all-gather: rank %d's out starts %g %g, not 1 2: "
                       "rank 0's call returned before the copy read its exported in",
                       q, got[0], got[1]);
        else
            check_passed++;
    }
    for (int q = 0; q < 2; q++)
        for (int k = 0; k < 2; k++)
            vdev_tensor_free(rk[q].t[k]);
    rk[0].t[1] = rk[1].t[1] = NULL;

    /* An all-reduce's tensor, exported: read by rank 1's stream, then
     * written with the sum; the consumer's write after the call stands. */
    rk[0].t[0] = on("GPU:0", a, 4);
    rk[1].t[0] = on("GPU:1", b, 4);
    run_case(ALL_REDUCE, 1, 0, 0, ACT_WRITE, rk, comm);
    const float sum[4] = {11, 22, 33, 44};
    get(rk[1].t[0], got, 4 * sizeof *got);
    CHECK(same(got, sum, 4));
    get(rk[0].t[0], got, 4 * sizeof *got);
    CHECK(same(got, hundred, 4));
    vdev_tensor_free(rk[0].t[0]);
    vdev_tensor_free(rk[1].t[0]);

    /* A broadcast's receiver, exported: written on its own stream; the
     * consumer reads it as soon as the call returns. */
    rk[0].t[0] = on("GPU:0", a, 4);
    rk[1].t[0] = on("GPU:1", z, 4);
    run_case(BROADCAST, 1, 1, 0, ACT_READ, rk, comm);
    CHECK(same(rk[1].seen, a, 4));
    vdev_tensor_free(rk[0].t[0]);
    vdev_tensor_free(rk[1].t[0]);

    vdev_comm_free(comm);
    check_fresh(NULL);
}

/* ---- a replica's rows of an exported global batch ---- */

struct batch_run {
    vdev_tensor_t *global;
    volatile float *mem;           /* the global batch's exported memory */
    atomic_int done;               /* replica 1 has its rows and wrote them */
};

static enum vdev_status batch_step(vdev_replica_context_t *ctx, void *user)
{
    struct batch_run *b = user;
    vdev_tensor_t *rows = vdev_replica_batch(ctx, b->global);
    if (!rows)
        return vdev_last_status();
    if (vdev_replica_id(ctx) == 1) {
        for (int i = 2; i < 4; i++) /* its rows, which only its copy reads */
            b->mem[i] = 100;
        atomic_store(&b->done, 1);
    }
    return vdev_replica_return(ctx, rows);
}

struct runner {
    vdev_strategy_t *s;
    struct batch_run *b;
    vdev_tensor_t *results[2];
    enum vdev_status st;
};

static void *run_main(void *arg)
{
    struct runner *r = arg;
    r->st = vdev_strategy_run(r->s, batch_step, r->b, r->results);
    return NULL;
}

static void test_replica_batch(void)
{
    check_fresh("2x1GiB");
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_strategy_t *s = NULL;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 2, &s));
    if (!s)
        return;
    const float a[4] = {1, 2, 3, 4};
    struct batch_run b = {.global = on("GPU:0", a, 4)};
    DLManagedTensor *m = NULL;
    CHECK_OK(vdev_tensor_to_dlpack(b.global, &m));
    if (!m)
        return;
    b.mem = m->dl_tensor.data;
    atomic_store(&b.done, 0);
    struct runner r = {.s = s, .b = &b};
    gate_hold("GPU:1"); /* replica 1's copy of its rows waits on it */
    pthread_t th;
    pthread_create(&th, NULL, run_main, &r);
    gate_open_after(&b.done);
    pthread_join(th, NULL);
    CHECK_OK(r.st);
    float got[2] = {0};
    if (r.results[1])
        get(r.results[1], got, sizeof got);
    if (got[0] != 3 || got[1] != 4)
        check_fail(__FILE__, __LINE__, "replica 1's rows are %g %g, not 3 4: the batch "
                   "returned before its copy read the exported global batch", got[0], got[1]);
    else
        check_passed++;
    m->deleter(m);
    for (int q = 0; q < 2; q++)
        vdev_tensor_free(r.results[q]);
    vdev_tensor_free(b.global);
    vdev_strategy_free(s);
    check_fresh(NULL);
}

int main(void)
{
    test_collectives();
    test_replica_batch();
    return check_done();
}
