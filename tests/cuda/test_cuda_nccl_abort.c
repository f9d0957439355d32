/* test_cuda_nccl_abort.c — coll_abort against a rank whose NCCL work waits
 * for a peer, with the real CUDA plugin on the stand-in driver and the
 * stand-in NCCL, whose comms are nonblocking and whose work's waits end, as
 * NCCL's do, only when the waiting rank's own communicator is aborted (a
 * peer's abort does not free it; else a violation after 60 s):
 *  - a rank polling its work, which waits for a peer that failed before its
 *    NCCL call (its ncclGroupStart failed), is freed by coll_abort from the
 *    failing rank's thread: its call fails ("ncclGroupEnd on CUDA GPU 0
 *    failed: the communicator was aborted"), every rank's comm is aborted
 *    exactly once (a second abort of one is a violation of the stand-in),
 *    its thread never touches the comm again (a poll after the abort is one
 *    too), and later calls fail at once;
 *  - an abort that comes while a rank is inside its ncclGroupEnd, its calls
 *    still queued there (the stand-in holds it there), waits for that end:
 *    aborting a comm under calls queued in a group not yet ended, or while
 *    a thread polls it, is a violation of the stand-in;
 *  - after that, coll_close, or the backend's destroy with the communicator
 *    left open, frees everything and aborts nothing twice (ASan, the
 *    stand-in's counts);
 *  - through the public API, the first or the second rank to reach NCCL
 *    failing before its NCCL call fails both ranks' calls with the failing
 *    rank's words, and no rank waits for ever. */
#define _GNU_SOURCE
#include "check.h"
#include "ranks.h"
#include "vdev.h"

#include "backend/backend.h"
#include "backend/cuda/nccl_abi.h"
#include "stub_client.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define COUNT 256

/* One rank's part of an all-reduce straight through the backend's table. */
struct coll_job {
    struct vdev_backend *b;
    void *comm;
    int rank;
    void *buf;
    enum vdev_status st;
    char msg[512];
    atomic_int done;
};

static void *coll_rank(void *p)
{
    struct coll_job *j = p;
    void *data[1] = {j->buf};
    uint64_t count[1] = {COUNT};
    struct vdev_backend_coll call = {.kind = VDEV_BACKEND_COLL_ALL_REDUCE,
                                     .n_bufs = 1,
                                     .data = data,
                                     .count = count};
    j->st = j->b->ops->coll_run(j->b->ctx, j->comm, j->rank, &call);
    snprintf(j->msg, sizeof j->msg, "%s", j->st == VDEV_OK ? "" : vdev_last_error());
    atomic_store(&j->done, 1);
    return NULL;
}

static void job_init(struct coll_job *j, struct vdev_backend *b, void *comm, int rank, void *buf)
{
    j->b = b;
    j->comm = comm;
    j->rank = rank;
    j->buf = buf;
    j->st = VDEV_ERR_INTERNAL;
    j->msg[0] = '\0';
    atomic_init(&j->done, 0);
}

/* Waits until the stand-in has `n` ranks waiting inside a collective, or
 * j's call has returned (then it did not wait there: a check fails later). */
static void wait_blocked(int n, struct coll_job *j)
{
    struct timespec ms = {0, 1000000};
    struct vdev_stub_nccl_stats ns;
    for (N.stats(&ns); ns.waiting < n && !atomic_load(&j->done); N.stats(&ns))
        nanosleep(&ms, NULL);
}

/* ---- through the backend ---- */

/* Two GPUs through the backend's table: a stream and a buffer on each, an
 * NCCL communicator over the two streams. */
struct pair {
    struct vdev_backend b;
    int q[2];
    void *bufs[2];
    void *comm;
};

/* Opens p on fresh stand-ins (stub_setup_nccl's delay_ms); 0 when it did. */
static int pair_open(struct pair *p, unsigned delay_ms)
{
    stub_setup_nccl(2, 0, delay_ms);
    memset(p, 0, sizeof *p);
    stub_open_backend(&p->b);
    if (!p->b.ops)
        return -1;
    uint64_t h = 0, held[2];
    for (int g = 0; g < 2; g++) {
        CHECK_OK(p->b.ops->stream_open(p->b.ctx, g, VDEV_PRIORITY_HIGH, &p->q[g], &h));
        CHECK_OK(p->b.ops->reserve(p->b.ctx, p->q[g], 2 * MiB, &p->bufs[g]));
    }
    CHECK_OK(p->b.ops->coll_open(p->b.ctx, p->q, 2, &p->comm, held));
    return 0;
}

/* Gives back p's buffers and streams (the communicator is the caller's). */
static void pair_close(struct pair *p)
{
    for (int g = 0; g < 2; g++) {
        p->b.ops->release(p->b.ctx, p->q[g], p->bufs[g], 2 * MiB);
        p->b.ops->stream_close(p->b.ctx, p->q[g]);
    }
}

/* Rank 0's work waits for rank 1; rank 1 fails at its ncclGroupStart and
 * aborts, as src/coll/nccl.c does; then the communicator is closed, or left
 * for the backend's destroy when !close. */
static void blocked_rank(int close)
{
    struct pair p;
    if (pair_open(&p, 0) != 0)
        return;
    struct vdev_backend *b = &p.b;
    void **bufs = p.bufs, *comm = p.comm;
    /* it works first */
    struct coll_job j[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        job_init(&j[r], b, comm, r, bufs[r]);
        pthread_create(&th[r], NULL, coll_rank, &j[r]);
    }
    for (int r = 0; r < 2; r++) {
        pthread_join(th[r], NULL);
        CHECK_STATUS(j[r].st, VDEV_OK);
    }
    /* rank 0's work in NCCL, waiting for rank 1, rank 0 polling it */
    job_init(&j[0], b, comm, 0, bufs[0]);
    pthread_create(&th[0], NULL, coll_rank, &j[0]);
    wait_blocked(1, &j[0]);
    CHECK(!atomic_load(&j[0].done));
    /* its thread is not blocked in NCCL: it polls (within 10 s) */
    struct timespec ms = {0, 1000000};
    uint64_t polled = N.calls("ncclCommGetAsyncError");
    for (int i = 0; i < 10000 && N.calls("ncclCommGetAsyncError") < polled + 2; i++)
        nanosleep(&ms, NULL);
    CHECK(N.calls("ncclCommGetAsyncError") >= polled + 2);
    /* rank 1 fails before its NCCL call, and aborts */
    N.fail("ncclGroupStart", 0, ncclSystemError);
    job_init(&j[1], b, comm, 1, bufs[1]);
    coll_rank(&j[1]);
    CHECK_STATUS(j[1].st, VDEV_ERR_BACKEND);
    CHECK_STR(j[1].msg, "NCCL: ncclGroupStart on CUDA GPU 1 failed: unhandled system error");
    CHECK(N.calls("ncclCommAbort") == 0);
    b->ops->coll_abort(b->ctx, comm);
    pthread_join(th[0], NULL);
    /* rank 0 freed, failing with the abort's words; each comm aborted once */
    CHECK_STATUS(j[0].st, VDEV_ERR_BACKEND);
    CHECK_STR(j[0].msg, "NCCL: ncclGroupEnd on CUDA GPU 0 failed: the communicator was aborted");
    CHECK(N.calls("ncclCommAbort") == 2);
    uint64_t polls = N.calls("ncclCommGetAsyncError");
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.comms == 0 && ns.cliques == 0 && ns.waiting == 0);
    /* another abort has nothing left to abort; a later call fails at once */
    b->ops->coll_abort(b->ctx, comm);
    CHECK(N.calls("ncclCommAbort") == 2);
    uint64_t starts = N.calls("ncclGroupStart");
    for (int r = 0; r < 2; r++) {
        job_init(&j[r], b, comm, r, bufs[r]);
        coll_rank(&j[r]);
        CHECK_STATUS(j[r].st, VDEV_ERR_BACKEND);
        CHECK_STR(j[r].msg, "NCCL: the communicator was aborted");
    }
    CHECK(N.calls("ncclGroupStart") == starts);
    CHECK(N.calls("ncclCommGetAsyncError") == polls); /* none after the abort */
    if (close)
        b->ops->coll_close(b->ctx, comm);
    pair_close(&p);
    vdev_backend_destroy(&p.b); /* with comm still open when !close */
    CHECK(N.calls("ncclCommAbort") == 2 && N.calls("ncclCommDestroy") == 0);
    struct vdev_stub_stats s;
    for (int g = 0; g < 2; g++) {
        S.stats(g, &s);
        CHECK_EQ_U64(s.bytes_used, 0); /* NCCL's buffers given back */
    }
    expect_clean(close ? "a blocked rank aborted, then closed"
                       : "a blocked rank aborted, left open",
                 1);
}

static void test_blocked_closed(void) { blocked_rank(1); }

static void test_blocked_left_open(void) { blocked_rank(0); }

/* coll_abort while rank 0 is inside its ncclGroupEnd with its call still
 * queued (held there for 300 ms by the stand-in): the abort waits for that
 * end, then aborts both comms; rank 0's call fails with the abort's words. */
static void test_abort_while_ending(void)
{
    struct pair p;
    if (pair_open(&p, 300) != 0)
        return;
    struct vdev_backend *b = &p.b;
    struct coll_job j[2];
    pthread_t th;
    job_init(&j[0], b, p.comm, 0, p.bufs[0]);
    pthread_create(&th, NULL, coll_rank, &j[0]);
    struct timespec ms = {0, 1000000};
    struct vdev_stub_nccl_stats ns;
    /* until rank 0 is held, or is past it (then its work waits for rank 1:
     * the window was missed, which fails the check rather than hanging) */
    for (N.stats(&ns); ns.ending < 1 && ns.waiting < 1 && !atomic_load(&j[0].done);
         N.stats(&ns))
        nanosleep(&ms, NULL);
    CHECK(ns.ending == 1); /* rank 0 in its ncclGroupEnd, its call queued */
    N.fail("ncclGroupStart", 0, ncclSystemError);
    job_init(&j[1], b, p.comm, 1, p.bufs[1]);
    coll_rank(&j[1]);
    CHECK_STR(j[1].msg, "NCCL: ncclGroupStart on CUDA GPU 1 failed: unhandled system error");
    b->ops->coll_abort(b->ctx, p.comm);
    pthread_join(th, NULL);
    CHECK_STATUS(j[0].st, VDEV_ERR_BACKEND);
    CHECK_STR(j[0].msg, "NCCL: ncclGroupEnd on CUDA GPU 0 failed: the communicator was aborted");
    CHECK(N.calls("ncclCommAbort") == 2);
    N.stats(&ns);
    CHECK(ns.comms == 0 && ns.waiting == 0 && ns.ending == 0);
    b->ops->coll_close(b->ctx, p.comm);
    pair_close(&p);
    vdev_backend_destroy(b);
    expect_clean("an abort while a rank ends its group", 1);
}

/* ---- through the public API ---- */

static void do_all_reduce(struct rank_job *j)
{
    rank_record(j, vdev_comm_all_reduce(j->comm, j->rank, j->t, 1, VDEV_REDUCE_SUM));
}

/* An all-reduce on GPU:0 and GPU:1 where the nth ncclGroupStart fails. */
static void public_failure(vdev_comm_t *c, int nth)
{
    static const float h[COUNT];
    const char *devs[2] = {"GPU:0", "GPU:1"};
    struct rank_job jobs[2];
    int64_t shape[1] = {COUNT};
    for (int r = 0; r < 2; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].rank = r;
        jobs[r].n = 2;
        jobs[r].comm = c;
        CHECK_OK(vdev_device_push(devs[r]));
        jobs[r].t[0] = vdev_tensor_from_host(h, shape, 1, VDEV_F32);
        CHECK_OK(vdev_device_pop());
    }
    uint64_t aborts = N.calls("ncclCommAbort");
    N.fail("ncclGroupStart", nth, ncclSystemError);
    run_ranks(2, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_ERR_BACKEND, "NCCL: ncclGroupStart on CUDA GPU ");
    CHECK(strstr(jobs[0].msg, "failed: unhandled system error") != NULL);
    CHECK(N.calls("ncclCommAbort") == aborts + 2);
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.waiting == 0);
    for (int r = 0; r < 2; r++)
        vdev_tensor_free(jobs[r].t[0]);
}

static void test_public(void)
{
    stub_setup_nccl(2, 0, 0);
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    const char *devs[2] = {"GPU:0", "GPU:1"};
    for (int nth = 0; nth < 2; nth++) {
        vdev_comm_t *c = NULL;
        CHECK_OK(vdev_comm_new(devs, 2, &c));
        CHECK_STR(vdev_comm_implementation(c), "nccl");
        public_failure(c, nth);
        vdev_comm_free(c);
    }
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.comms == 0 && ns.cliques == 0);
    expect_clean("a rank failing before NCCL (public)", 0);
    check_fresh(NULL);
    expect_clean("after shutdown", 1);
}

int main(void)
{
    check_fresh(NULL);
    if (stub_load() != 0 || stub_load_nccl() != 0) {
        check_fail(__FILE__, __LINE__, "cannot load the stand-in driver or NCCL");
        return check_done();
    }
    test_blocked_closed();
    test_blocked_left_open();
    test_abort_while_ending();
    test_public();
    check_fresh(NULL);
    S.setup(NULL);
    return check_done();
}
