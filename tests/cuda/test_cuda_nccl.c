/* test_cuda_nccl.c — vdev's collectives through NCCL in the real CUDA plugin,
 * run against the stand-in driver and the stand-in NCCL (stub/libnccl.so.2,
 * which checks group semantics, streams and the ranks' agreement, and does
 * the arithmetic on the stand-in's memory):
 *  - the plugin loads NCCL at run time and says which one;
 *  - coll_open over distinct GPUs makes one communicator per rank, and what
 *    NCCL takes on each GPU is measured and held; two ranks on one GPU are
 *    refused in vdev's words; the comms are nonblocking, made in one group
 *    and polled until ready; NCCL failing at any step of that (the id, a
 *    rank's init, the group's end, a poll) names the step and leaves
 *    nothing (comms made are aborted, nothing held);
 *    a failing memory measure names the GPU it failed on; a rank whose
 *    context cannot be made current at close has its comm aborted;
 *  - through the public API: a communicator over logical GPUs of distinct
 *    cards is served by NCCL (all-reduce sum and mean, broadcast,
 *    all-gather, the right values on every rank, every call a group on the
 *    ranks' streams), NCCL's buffers come out of the card's budget and go
 *    back; logical devices of one card fall back to the ring;
 *  - a failing rank fails the call on every rank and aborts NCCL's
 *    communicator; the communicator is spent until a reset (the mirrored
 *    strategy's), which makes new NCCL communicators, or says why not;
 *  - a bad argument on one rank fails every rank before NCCL is asked, and
 *    the communicator goes on; NCCL's buffers that do not fit beside what
 *    the card holds leave the ring to serve, the limits unchanged;
 *  - without NCCL (VDEV_NCCL_LIBRARY naming no library), or with one older
 *    than 2.14 (no nonblocking communicators), the ring serves, and the
 *    plugin says why.
 * Kernels do not run on the stand-in, so the ring's own arithmetic is left
 * to the tests on simulated GPUs (test_coll_ring). */
#define _GNU_SOURCE
#include "check.h"
#include "ranks.h"
#include "vdev.h"

#include "backend/backend.h"
#include "backend/cuda/nccl_abi.h"
#include "coll/coll.h"
#include "runtime/runtime.h"
#include "tensor/tensor.h"
#include "nccl_one_rank.h"
#include "stub_client.h"

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define COUNT 1000

/* ---- the plugin's entries ---- */

static void test_backend(void)
{
    stub_setup_nccl(2, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    char line[256];
    CHECK(b.ops->coll_library(b.ctx, line, sizeof line) == 1);
    CHECK_STR(line, "NCCL 2.27.3 (libnccl.so.2)");

    /* two ranks on one GPU: refused before NCCL is asked */
    int q1 = -1;
    uint64_t held1 = 0;
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_HIGH, &q1, &held1));
    int same[2] = {0, q1};
    uint64_t held[2] = {0, 0};
    void *comm = NULL;
    CHECK_STATUS(b.ops->coll_open(b.ctx, same, 2, &comm, held), VDEV_ERR_UNSUPPORTED);
    CHECK_MSG("NCCL needs a GPU of its own for every rank: ranks 0 and 1 are both on CUDA GPU 0");
    CHECK(comm == NULL && N.calls("ncclCommInitRankConfig") == 0);

    /* NCCL failing to make its communicators, at each step: the step named,
     * the comms it made aborted, nothing held, nothing left */
    int qs[2] = {q1, 1};
    static const struct {
        const char *fn;
        int nth, result;
        uint64_t aborts; /* comms made before the failure */
        const char *msg;
    } init_fails[] = {
        {"ncclGetUniqueId", 0, ncclSystemError, 0,
         "NCCL: ncclGetUniqueId over 2 GPUs failed: unhandled system error"},
        {"ncclGroupStart", 0, ncclInternalError, 0,
         "NCCL: ncclGroupStart over 2 GPUs failed: internal error"},
        {"ncclCommInitRankConfig", 0, ncclUnhandledCudaError, 0,
         "NCCL: ncclCommInitRankConfig over 2 GPUs failed: unhandled cuda error"},
        /* rank 0's comm made, rank 1's refused: rank 0's waits for its peer */
        {"ncclCommInitRankConfig", 1, ncclInvalidArgument, 1,
         "NCCL: ncclCommInitRankConfig over 2 GPUs failed: invalid argument"},
        {"ncclGroupEnd", 0, ncclSystemError, 2,
         "NCCL: ncclGroupEnd over 2 GPUs failed: unhandled system error"},
        /* the poll of rank 1's comm (rank 0's reads in progress, then ready) */
        {"ncclCommGetAsyncError", 2, ncclInternalError, 2,
         "NCCL: ncclCommInitRankConfig over 2 GPUs failed: internal error"},
    };
    struct vdev_stub_nccl_stats ns;
    for (size_t i = 0; i < sizeof init_fails / sizeof init_fails[0]; i++) {
        uint64_t aborts0 = N.calls("ncclCommAbort");
        N.fail(init_fails[i].fn, init_fails[i].nth, init_fails[i].result);
        CHECK_STATUS(b.ops->coll_open(b.ctx, qs, 2, &comm, held), VDEV_ERR_BACKEND);
        CHECK_MSG(init_fails[i].msg);
        N.stats(&ns);
        CHECK(ns.comms == 0 && ns.cliques == 0 && comm == NULL);
        CHECK(N.calls("ncclCommAbort") == aborts0 + init_fails[i].aborts);
        CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 0), held1);
        CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 1), 0);
    }
    /* each comm polled until ready: in progress at the first poll */
    uint64_t polls = N.calls("ncclCommGetAsyncError");
    CHECK_OK(b.ops->coll_open(b.ctx, qs, 2, &comm, held));
    CHECK(N.calls("ncclCommGetAsyncError") == polls + 4);
    b.ops->coll_close(b.ctx, comm);
    comm = NULL;

    /* the memory measure failing on rank 1's GPU: that GPU named, NCCL not asked */
    uint64_t inits = N.calls("ncclCommInitRankConfig");
    S.fail("cuMemGetInfo", 1, CUDA_ERROR_UNKNOWN);
    CHECK_STATUS(b.ops->coll_open(b.ctx, qs, 2, &comm, held), VDEV_ERR_BACKEND);
    CHECK_MSG("CUDA GPU 1: cuMemGetInfo failed: CUDA_ERROR_UNKNOWN: unknown error");
    CHECK(comm == NULL && N.calls("ncclCommInitRankConfig") == inits);

    /* a communicator: NCCL's buffers measured on each GPU */
    CHECK_OK(b.ops->coll_open(b.ctx, qs, 2, &comm, held));
    CHECK_EQ_U64(held[0], 64 * MiB);
    CHECK_EQ_U64(held[1], 64 * MiB);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 0), held1 + 64 * MiB);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 1), 64 * MiB);
    N.stats(&ns);
    CHECK(ns.comms == 2 && ns.cliques == 1);
    b.ops->coll_close(b.ctx, comm);
    N.stats(&ns);
    CHECK(ns.comms == 0);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 0), held1);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 1), 0);

    /* closed while rank 0's context cannot be made current (the close's
     * check of the current context fails, then setting it): rank 0's comm
     * is aborted all the same, not left behind */
    CHECK_OK(b.ops->coll_open(b.ctx, qs, 2, &comm, held));
    uint64_t aborts = N.calls("ncclCommAbort");
    S.fail("cuCtxGetCurrent", 1, CUDA_ERROR_UNKNOWN); /* after the entry's own */
    S.fail("cuCtxSetCurrent", 0, CUDA_ERROR_UNKNOWN);
    b.ops->coll_close(b.ctx, comm);
    N.stats(&ns);
    CHECK(ns.comms == 0);
    CHECK(N.calls("ncclCommAbort") == aborts + 1);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 0), held1);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 1), 0);
    b.ops->stream_close(b.ctx, q1);
    vdev_backend_destroy(&b);
    expect_clean("NCCL communicators", 1);
}

/* One rank on one GPU (nccl_one_rank.h, which test_cuda runs on a card). */
static void test_one_rank(void)
{
    stub_setup_nccl(1, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    nccl_one_rank(&b);
    vdev_backend_destroy(&b);
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.comms == 0 && ns.cliques == 0);
    CHECK(N.calls("ncclCommAbort") == 1 && N.calls("ncclCommDestroy") == 2);
    expect_clean("one rank on one GPU", 1);
}

/* ---- through the public API ---- */

static float val(int r, int i) { return (float)((i * 7 + r * 13) % 100 - 50); }

struct job_arg {
    enum vdev_reduce_op op;
    int fail_rank; /* -1: none */
};

static void do_all_reduce(struct rank_job *j)
{
    const struct job_arg *a = j->arg;
    rank_record(j, vdev_comm_all_reduce(j->comm, j->rank, j->t, 1, a->op));
}

static void do_broadcast(struct rank_job *j)
{
    rank_record(j, vdev_comm_broadcast(j->comm, j->rank, j->t, 1, 0));
}

static void do_all_gather(struct rank_job *j)
{
    rank_record(j, vdev_comm_all_gather(j->comm, j->rank, j->t[0], j->t[1]));
}

static vdev_tensor_t *upload(const char *dev, const float *data, int64_t count)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t shape[1] = {count};
    vdev_tensor_t *t = vdev_tensor_from_host(data, shape, 1, VDEV_F32);
    CHECK_OK(vdev_device_pop());
    CHECK(t != NULL);
    return t;
}

/* The ranks' tensors: rank r holds val(r, i). */
static void fill_jobs(struct rank_job *jobs, int n, vdev_comm_t *c, const char *const *devs,
                      void *arg)
{
    static float h[COUNT];
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < COUNT; i++)
            h[i] = val(r, i);
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].rank = r;
        jobs[r].n = n;
        jobs[r].comm = c;
        jobs[r].arg = arg;
        jobs[r].t[0] = upload(devs[r], h, COUNT);
    }
}

static void free_jobs(struct rank_job *jobs, int n)
{
    for (int r = 0; r < n; r++)
        for (int k = 0; k < 4; k++) {
            vdev_tensor_free(jobs[r].t[k]);
            jobs[r].t[k] = NULL;
        }
}

/* Every rank's t[0] holds want(i). */
static void expect_sum(struct rank_job *jobs, int n, int mean)
{
    static float back[COUNT];
    for (int r = 0; r < n; r++) {
        CHECK_OK(vdev_tensor_to_host(jobs[r].t[0], back, sizeof back));
        int bad = 0;
        for (int i = 0; i < COUNT && !bad; i++) {
            float s = 0;
            for (int k = 0; k < n; k++)
                s += val(k, i);
            if (mean)
                s /= (float)n;
            bad = back[i] != s;
        }
        CHECK(!bad);
    }
}

static void test_public(void)
{
    stub_setup_nccl(2, 0, 0);
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    char status[512];
    CHECK(vdev_coll_library_status(status, sizeof status) == 1);
    CHECK_STR(status, "NCCL 2.27.3 (libnccl.so.2) for ranks on distinct physical GPUs, one "
                      "communicator per GPU; vdev's ring for logical devices of one GPU and "
                      "for further communicators");
    struct vdev_memory_limits l0, l1;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l0));
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_comm_t *c = NULL;
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    CHECK_STR(vdev_comm_implementation(c), "nccl");
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.comms == 2);
    /* NCCL's buffers are out of the card's budget while the communicator lives */
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l1));
    CHECK_EQ_U64(l1.ceiling_bytes, l0.ceiling_bytes - 64 * MiB);
    CHECK_EQ_U64(l1.floor_bytes, l0.floor_bytes - 64 * MiB);
    void *big = NULL;
    CHECK_STATUS(vdev_mem_alloc("GPU:0", l0.ceiling_bytes - 32 * MiB, &big), VDEV_ERR_OOM);
    CHECK_MSG("GPU:0");

    struct rank_job jobs[2];
    struct job_arg sum = {VDEV_REDUCE_SUM, -1}, mean = {VDEV_REDUCE_MEAN, -1};
    fill_jobs(jobs, 2, c, devs, &sum);
    run_ranks(2, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    expect_sum(jobs, 2, 0);
    CHECK(N.calls("ncclAllReduce") == 2);
    char last[256];
    CHECK_STR(N.last(last, sizeof last), "allreduce float32 sum count 1000 ranks 2 devices 0,1");
    free_jobs(jobs, 2);

    fill_jobs(jobs, 2, c, devs, &mean);
    run_ranks(2, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    expect_sum(jobs, 2, 1);
    CHECK_STR(N.last(last, sizeof last), "allreduce float32 avg count 1000 ranks 2 devices 0,1");
    free_jobs(jobs, 2);

    /* broadcast from rank 0 (broadcast's root is rank 0 in the public call) */
    fill_jobs(jobs, 2, c, devs, NULL);
    run_ranks(2, do_broadcast, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    float back[COUNT];
    CHECK_OK(vdev_tensor_to_host(jobs[0].t[0], back, sizeof back));
    CHECK_OK(vdev_tensor_to_host(jobs[1].t[0], back, sizeof back));
    CHECK(back[0] == val(0, 0) && back[COUNT - 1] == val(0, COUNT - 1));
    CHECK(N.calls("ncclBroadcast") == 2);
    free_jobs(jobs, 2);

    /* all-gather */
    fill_jobs(jobs, 2, c, devs, NULL);
    for (int r = 0; r < 2; r++) {
        int64_t shape[1] = {2 * COUNT};
        CHECK_OK(vdev_device_push(devs[r]));
        jobs[r].t[1] = vdev_tensor_zeros(shape, 1, VDEV_F32);
        CHECK_OK(vdev_device_pop());
        CHECK(jobs[r].t[1] != NULL);
    }
    run_ranks(2, do_all_gather, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    static float all[2 * COUNT];
    CHECK_OK(vdev_tensor_to_host(jobs[1].t[1], all, sizeof all));
    CHECK(all[0] == val(0, 0) && all[COUNT] == val(1, 0) && all[2 * COUNT - 1] == val(1, COUNT - 1));
    CHECK(N.calls("ncclAllGather") == 2);
    free_jobs(jobs, 2);

    /* a rank's NCCL call failing: every rank fails with the same words,
     * NCCL's communicators are aborted (the other rank's part never waits
     * for ever), and the communicator is spent */
    N.fail("ncclAllReduce", 0, ncclInvalidUsage);
    fill_jobs(jobs, 2, c, devs, &sum);
    run_ranks(2, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_ERR_BACKEND, "NCCL: ncclAllReduce on CUDA GPU ");
    CHECK(strstr(jobs[0].msg, "failed: invalid usage") != NULL);
    CHECK(N.calls("ncclCommAbort") == 2);
    free_jobs(jobs, 2);
    fill_jobs(jobs, 2, c, devs, &sum);
    run_ranks(2, do_all_reduce, jobs);
    for (int r = 0; r < 2; r++)
        CHECK(jobs[r].st != VDEV_OK);
    free_jobs(jobs, 2);
    vdev_comm_free(c);
    N.stats(&ns);
    CHECK(ns.comms == 0);
    /* a new communicator works */
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    CHECK_STR(vdev_comm_implementation(c), "nccl");
    fill_jobs(jobs, 2, c, devs, &sum);
    run_ranks(2, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    expect_sum(jobs, 2, 0);
    CHECK(N.calls("ncclCommInitRankConfig") == 4); /* two opens of two ranks */
    free_jobs(jobs, 2);
    /* ncclGroupEnd failing on a rank: the same, and no rank waits for ever */
    N.fail("ncclGroupEnd", 0, ncclSystemError);
    fill_jobs(jobs, 2, c, devs, &sum);
    run_ranks(2, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_ERR_BACKEND, "NCCL: ncclGroupEnd on CUDA GPU ");
    CHECK(strstr(jobs[0].msg, "failed: unhandled system error") != NULL);
    CHECK(N.calls("ncclCommAbort") == 4);
    free_jobs(jobs, 2);
    vdev_comm_free(c);
    /* a bad argument on one rank: every rank fails before NCCL is asked */
    uint64_t before = N.calls("ncclAllReduce");
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    fill_jobs(jobs, 2, c, devs, &sum);
    vdev_tensor_free(jobs[1].t[0]);
    {
        static float h2[COUNT / 2];
        jobs[1].t[0] = upload(devs[1], h2, COUNT / 2);
    }
    run_ranks(2, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_ERR_INVALID_ARG, "Shape mismatch in the collective instance");
    CHECK(N.calls("ncclAllReduce") == before);
    free_jobs(jobs, 2);
    /* and the communicator still works */
    fill_jobs(jobs, 2, c, devs, &sum);
    run_ranks(2, do_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    expect_sum(jobs, 2, 0);
    free_jobs(jobs, 2);

    vdev_comm_free(c);
    N.stats(&ns);
    CHECK(ns.comms == 0);
    /* NCCL's buffers back in the budget */
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.ceiling_bytes, l0.ceiling_bytes);
    CHECK_EQ_U64(l.floor_bytes, l0.floor_bytes);
    CHECK_OK(vdev_mem_alloc("GPU:0", l0.ceiling_bytes - 32 * MiB, &big));
    CHECK_OK(vdev_mem_free("GPU:0", big));
    /* NCCL's buffers do not fit beside what GPU:0 holds in use: the ring
     * serves, NCCL's communicators are destroyed, the limits unchanged */
    CHECK_OK(vdev_mem_alloc("GPU:0", l0.ceiling_bytes - 32 * MiB, &big));
    uint64_t destroyed = N.calls("ncclCommDestroy");
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    CHECK_STR(vdev_comm_implementation(c), "ring");
    N.stats(&ns);
    CHECK(ns.comms == 0);
    CHECK(N.calls("ncclCommDestroy") == destroyed + 2);
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.ceiling_bytes, l0.ceiling_bytes);
    CHECK_EQ_U64(l.floor_bytes, l0.floor_bytes);
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l));
    CHECK_EQ_U64(l.ceiling_bytes, l0.ceiling_bytes);
    vdev_comm_free(c);
    CHECK_OK(vdev_mem_free("GPU:0", big));
    expect_clean("collectives through NCCL", 0);
    check_fresh(NULL);
    expect_clean("after shutdown", 1);

    /* logical devices of one card: the ring, and NCCL is not asked */
    stub_setup_nccl(1, 0, 0);
    setenv("VDEV_LOGICAL_DEVICES", "0:512MiB,512MiB", 1);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    CHECK_STR(vdev_comm_implementation(c), "ring");
    CHECK(N.calls("ncclCommInitRankConfig") == 0);
    vdev_comm_free(c);
    expect_clean("the ring on one card", 0);
    check_fresh(NULL);
    unsetenv("VDEV_LOGICAL_DEVICES");
    expect_clean("after shutdown", 1);
}

/* ---- a reset after a failure (what the mirrored strategy does) ---- */

struct int_job {
    struct vdev_coll_comm *c;
    int rank;
    vdev_tensor_t *t;
    enum vdev_status st;
    char msg[512];
};

static void *int_rank(void *p)
{
    struct int_job *j = p;
    struct vdev_tens *t = vdev_tens_peek(j->t);
    int origin = -1;
    j->st = vdev_coll_tensors(j->c, j->rank, VDEV_COLL_ALL_REDUCE, VDEV_REDUCE_SUM, 0, &t, 1,
                              "all_reduce", VDEV_OK, NULL, &origin);
    snprintf(j->msg, sizeof j->msg, "%s", j->st == VDEV_OK ? "" : vdev_last_error());
    return NULL;
}

static void run_internal(struct vdev_coll_comm *c, struct int_job *j)
{
    static float h[COUNT];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < COUNT; i++)
            h[i] = val(r, i);
        j[r] = (struct int_job){c, r, NULL, VDEV_OK, ""};
        j[r].t = upload(r ? "GPU:1" : "GPU:0", h, COUNT);
    }
    for (int r = 0; r < 2; r++)
        pthread_create(&th[r], NULL, int_rank, &j[r]);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
}

static void test_reset(void)
{
    stub_setup_nccl(2, 0, 0);
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    struct vdev_ldev *d[2] = {NULL, NULL};
    CHECK_OK(vdev_runtime_find("GPU:0", &d[0]));
    CHECK_OK(vdev_runtime_find("GPU:1", &d[1]));
    struct vdev_memory_limits l0, l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l0));
    struct vdev_coll_comm *c = NULL;
    CHECK_OK(vdev_coll_comm_make(d, 2, &c));
    if (!c)
        return;
    CHECK_STR(c->ops->name, "nccl");
    struct int_job j[2];
    N.fail("ncclAllReduce", 0, ncclInvalidUsage);
    run_internal(c, j);
    for (int r = 0; r < 2; r++) {
        CHECK(j[r].st == VDEV_ERR_BACKEND);
        /* the cause on both ranks, also on the one that found the
         * communicator aborted by the other's failure */
        CHECK(strstr(j[r].msg, "NCCL: ncclAllReduce on CUDA GPU ") != NULL);
        vdev_tensor_free(j[r].t);
    }
    /* spent until a reset, which makes new NCCL communicators */
    run_internal(c, j);
    for (int r = 0; r < 2; r++) {
        CHECK(j[r].st == VDEV_ERR_BACKEND);
        /* still the failure that spent it, until a reset */
        CHECK(strstr(j[r].msg, "NCCL: ncclAllReduce on CUDA GPU ") != NULL);
        vdev_tensor_free(j[r].t);
    }
    CHECK(N.calls("ncclCommInitRankConfig") == 2);
    c->ops->reset(c->ctx);
    CHECK(N.calls("ncclCommInitRankConfig") == 4);
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.comms == 2 && ns.cliques == 1);
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.ceiling_bytes, l0.ceiling_bytes - 64 * MiB); /* charged once, not twice */
    run_internal(c, j);
    static float back[COUNT];
    for (int r = 0; r < 2; r++) {
        CHECK(j[r].st == VDEV_OK);
        CHECK_OK(vdev_tensor_to_host(j[r].t, back, sizeof back));
        CHECK(back[7] == val(0, 7) + val(1, 7));
        vdev_tensor_free(j[r].t);
    }
    /* a reset that cannot make NCCL's communicators: the next call says why */
    N.fail("ncclAllReduce", 0, ncclInvalidUsage);
    run_internal(c, j);
    for (int r = 0; r < 2; r++)
        vdev_tensor_free(j[r].t);
    N.fail("ncclCommInitRankConfig", 0, ncclSystemError);
    c->ops->reset(c->ctx);
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.ceiling_bytes, l0.ceiling_bytes); /* nothing held, nothing charged */
    run_internal(c, j);
    for (int r = 0; r < 2; r++) {
        CHECK(j[r].st == VDEV_ERR_BACKEND);
        CHECK(strstr(j[r].msg, "NCCL: no communicator: NCCL: ncclCommInitRankConfig over 2 GPUs "
                               "failed: "
                               "unhandled system error") != NULL);
        vdev_tensor_free(j[r].t);
    }
    vdev_coll_comm_free(c);
    N.stats(&ns);
    CHECK(ns.comms == 0);
    expect_clean("a reset", 0);
    check_fresh(NULL);
    expect_clean("after shutdown", 1);
}

/* ---- NCCL absent ---- */

static void test_absent(void)
{
    stub_setup(2, 4 * GiB, 13000, 0, 0, 0);
    check_fresh(NULL);
    setenv("VDEV_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    CHECK_OK(vdev_init());
    char status[512];
    CHECK(vdev_coll_library_status(status, sizeof status) == 0);
    CHECK_STR(status, "vdev's ring (NCCL: VDEV_NCCL_LIBRARY: /nonexistent/libnccl.so.2: cannot "
                      "open shared object file: No such file or directory)");
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_comm_t *c = NULL;
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    CHECK_STR(vdev_comm_implementation(c), "ring");
    vdev_comm_free(c);
    check_fresh(NULL);
    unsetenv("VDEV_NCCL_LIBRARY");
    expect_clean("the ring without NCCL", 1);
}

/* NCCL older than 2.14 (no nonblocking communicators): refused, the ring
 * serves. */
static void test_too_old(void)
{
    if (stub_load_nccl() != 0) {
        check_fail(__FILE__, __LINE__, "cannot load the stand-in NCCL %s", VDEV_STUB_NCCL_PATH);
        return;
    }
    stub_setup_nccl(2, 21306, 0);
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    char status[512];
    CHECK(vdev_coll_library_status(status, sizeof status) == 0);
    CHECK_STR(status, "vdev's ring (NCCL: libnccl.so.2 is version 2.13.6; vdev needs 2.14 or "
                      "newer (nonblocking communicators))");
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_comm_t *c = NULL;
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    CHECK_STR(vdev_comm_implementation(c), "ring");
    CHECK(N.calls("ncclCommInitRankConfig") == 0);
    vdev_comm_free(c);
    check_fresh(NULL);
    expect_clean("NCCL too old", 1);
}

/* Runs fn in a child process (the plugin keeps what it found of NCCL for
 * the life of a process); a failed check if the child's checks failed. */
static void in_child(void (*fn)(void), const char *what)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        S.setup(NULL);
        _exit(check_done());
    }
    int wst = 0;
    if (pid > 0 && waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0)
        check_passed++;
    else
        check_fail(__FILE__, __LINE__, "%s: the child process's checks failed", what);
}

int main(void)
{
    check_fresh(NULL);
    if (stub_load() != 0) {
        check_fail(__FILE__, __LINE__, "cannot load the stand-in driver %s", VDEV_STUB_CUDA_PATH);
        return check_done();
    }
    in_child(test_absent, "NCCL absent");
    in_child(test_too_old, "NCCL too old");
    if (stub_load_nccl() != 0) {
        check_fail(__FILE__, __LINE__, "cannot load the stand-in NCCL %s", VDEV_STUB_NCCL_PATH);
        return check_done();
    }
    test_backend();
    test_one_rank();
    test_public();
    test_reset();
    check_fresh(NULL);
    S.setup(NULL);
    return check_done();
}
