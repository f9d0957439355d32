/* test_cuda_nccl_life.c — the life of the CUDA plugin's NCCL communicators,
 * against the stand-in driver and the stand-in NCCL (which, as NCCL 2.22+
 * does, takes a communicator's buffers at its first collective unless
 * NCCL_RUNTIME_CONNECT=0):
 *  - the plugin's open sets NCCL_RUNTIME_CONNECT=0, so NCCL's buffers exist
 *    when coll_open measures them; a value the user set stays, and 1 gets a
 *    warning (what NCCL takes later is not measured);
 *  - one NCCL communicator per GPU: a second one with a rank on a GPU that
 *    has one is refused in the backend, and through the public API the ring
 *    serves it, the reason logged; once the first is freed, NCCL serves again;
 *  - the event after each collective is the stream's own: a map on the GPU
 *    waits for it once, and a stream closed with a collective pending leaves
 *    nothing behind for the next map to wait on;
 *  - communicators left open when the backend goes (vdev_shutdown, or
 *    vdev_backend_destroy) are aborted and freed with it, and freeing the
 *    communicator afterwards is harmless (no leak, no use after free: ASan).
 * Tests that read the environment or the log run in a child process each:
 * the plugin sets the variable, and the log says a reason, once per process. */
#define _GNU_SOURCE
#include "check.h"
#include "ranks.h"
#include "vdev.h"

#include "backend/backend.h"
#include "backend/cuda/nccl_abi.h"
#include "coll/coll.h"
#include "stub_client.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define COUNT 256

/* ---- helpers ---- */

/* One rank's part of an all-reduce straight through the backend's table. */
struct coll_job {
    struct vdev_backend *b;
    void *comm;
    int rank;
    void *buf;
    enum vdev_status st;
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
    return NULL;
}

/* An all-reduce of bufs[0] and bufs[1] on comm's two ranks; 1 when both
 * ranks' parts were queued. */
static int all_reduce2(struct vdev_backend *b, void *comm, void *const *bufs)
{
    struct coll_job j[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        j[r] = (struct coll_job){b, comm, r, bufs[r], VDEV_ERR_INTERNAL};
        pthread_create(&th[r], NULL, coll_rank, &j[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    return j[0].st == VDEV_OK && j[1].st == VDEV_OK;
}

static void do_all_reduce(struct rank_job *j)
{
    rank_record(j, vdev_comm_all_reduce(j->comm, j->rank, j->t, 1, VDEV_REDUCE_SUM));
}

/* An all-reduce through the public API on GPU:0 and GPU:1; 1 when it worked. */
static int public_all_reduce(vdev_comm_t *c)
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
    run_ranks(2, do_all_reduce, jobs);
    int ok = jobs[0].st == VDEV_OK && jobs[1].st == VDEV_OK;
    for (int r = 0; r < 2; r++)
        vdev_tensor_free(jobs[r].t[0]);
    return ok;
}

/* ---- NCCL_RUNTIME_CONNECT (child processes) ---- */

/* Unset: the plugin's open sets it to 0, so NCCL's buffers are there when
 * coll_open measures them. */
static void test_env_default(void)
{
    unsetenv("NCCL_RUNTIME_CONNECT");
    stub_setup_nccl(2, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    const char *v = getenv("NCCL_RUNTIME_CONNECT");
    CHECK(v != NULL && !strcmp(v, "0"));
    int qs[2] = {0, 1};
    uint64_t held[2] = {0, 0};
    void *comm = NULL;
    check_capture_begin();
    CHECK_OK(b.ops->coll_open(b.ctx, qs, 2, &comm, held));
    char *err = check_capture_end();
    CHECK_STR(err, ""); /* no warning */
    free(err);
    CHECK_EQ_U64(held[0], 64 * MiB);
    CHECK_EQ_U64(held[1], 64 * MiB);
    b.ops->coll_close(b.ctx, comm);
    vdev_backend_destroy(&b);
    expect_clean("NCCL_RUNTIME_CONNECT unset", 1);
}

/* Set by the user: kept. 1 is warned about: NCCL takes its buffers at the
 * first collective, after coll_open measured nothing. */
static void test_env_user(void)
{
    setenv("NCCL_RUNTIME_CONNECT", "1", 1);
    stub_setup_nccl(2, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    const char *v = getenv("NCCL_RUNTIME_CONNECT");
    CHECK(v != NULL && !strcmp(v, "1"));
    int qs[2] = {0, 1};
    uint64_t held[2] = {1, 1};
    void *comm = NULL;
    check_capture_begin();
    CHECK_OK(b.ops->coll_open(b.ctx, qs, 2, &comm, held));
    char *err = check_capture_end();
    CHECK(strstr(err, "vdev: warning: NCCL_RUNTIME_CONNECT=1: NCCL connects its ranks") != NULL);
    CHECK(strstr(err, "not in the cards' budgets (unset it, or set it to 0)") != NULL);
    free(err);
    CHECK_EQ_U64(held[0], 0); /* the limitation the warning states */
    struct vdev_stub_stats s0;
    S.stats(0, &s0);
    void *bufs[2] = {NULL, NULL};
    CHECK_OK(b.ops->reserve(b.ctx, 0, 2 * MiB, &bufs[0]));
    CHECK_OK(b.ops->reserve(b.ctx, 1, 2 * MiB, &bufs[1]));
    CHECK(all_reduce2(&b, comm, bufs));
    struct vdev_stub_stats s1;
    S.stats(0, &s1);
    CHECK_EQ_U64(s1.bytes_used, s0.bytes_used + 2 * MiB + 64 * MiB); /* taken at the call */
    /* a second communicator warns no more (and waits for the first's close) */
    b.ops->coll_close(b.ctx, comm);
    check_capture_begin();
    CHECK_OK(b.ops->coll_open(b.ctx, qs, 2, &comm, held));
    err = check_capture_end();
    CHECK_STR(err, "");
    free(err);
    b.ops->coll_close(b.ctx, comm);
    for (int i = 0; i < 2; i++)
        b.ops->release(b.ctx, i, bufs[i], 2 * MiB);
    vdev_backend_destroy(&b);
    expect_clean("NCCL_RUNTIME_CONNECT=1", 1);

    /* 0 set by the user stays 0, and says nothing */
    setenv("NCCL_RUNTIME_CONNECT", "0", 1);
    stub_open_backend(&b);
    if (!b.ops)
        return;
    CHECK_STR(getenv("NCCL_RUNTIME_CONNECT"), "0");
    vdev_backend_destroy(&b);
}

/* ---- one NCCL communicator per GPU ---- */

static void test_one_per_gpu_backend(void)
{
    stub_setup_nccl(2, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    int q[2] = {-1, -1};
    uint64_t h = 0;
    for (int g = 0; g < 2; g++)
        CHECK_OK(b.ops->stream_open(b.ctx, g, VDEV_PRIORITY_HIGH, &q[g], &h));
    int first[2] = {0, 1};
    uint64_t held[2];
    void *a = NULL, *c = NULL;
    CHECK_OK(b.ops->coll_open(b.ctx, first, 2, &a, held));
    /* other streams of the same GPUs: refused before NCCL is asked */
    CHECK_STATUS(b.ops->coll_open(b.ctx, q, 2, &c, held), VDEV_ERR_UNSUPPORTED);
    CHECK_MSG("NCCL: CUDA GPU 0 already has an NCCL communicator, and two driven from "
              "different threads can deadlock");
    CHECK(c == NULL && N.calls("ncclCommInitRankConfig") == 2);
    /* a communicator of one rank on GPU 1 alone: the same */
    CHECK_STATUS(b.ops->coll_open(b.ctx, &q[1], 1, &c, held), VDEV_ERR_UNSUPPORTED);
    CHECK_MSG("NCCL: CUDA GPU 1 already has an NCCL communicator");
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 1), h + 64 * MiB); /* nothing more held */
    /* once the first is closed, the GPUs take another */
    b.ops->coll_close(b.ctx, a);
    CHECK_OK(b.ops->coll_open(b.ctx, q, 2, &c, held));
    b.ops->coll_close(b.ctx, c);
    for (int g = 0; g < 2; g++)
        b.ops->stream_close(b.ctx, q[g]);
    vdev_backend_destroy(&b);
    expect_clean("one NCCL communicator per GPU", 1);
}

/* Through the public API (a child: the reason is logged once per process). */
static void test_one_per_gpu_public(void)
{
    stub_setup_nccl(2, 0, 0);
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_comm_t *c1 = NULL, *c2 = NULL, *c3 = NULL;
    CHECK_OK(vdev_comm_new(devs, 2, &c1));
    CHECK_STR(vdev_comm_implementation(c1), "nccl");
    check_capture_begin();
    CHECK_OK(vdev_comm_new(devs, 2, &c2));
    char *err = check_capture_end();
    CHECK_STR(vdev_comm_implementation(c2), "ring");
    CHECK(strstr(err, "NCCL cannot serve this communicator (NCCL: CUDA GPU 0 already has an "
                      "NCCL communicator") != NULL);
    CHECK(strstr(err, "); collectives use vdev's ring") != NULL);
    free(err);
    char status[512];
    CHECK(vdev_coll_library_status(status, sizeof status) == 1);
    CHECK_STR(status, "NCCL 2.27.3 (libnccl.so.2) for ranks on distinct physical GPUs, one "
                      "communicator per GPU; vdev's ring for logical devices of one GPU and "
                      "for further communicators");
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.comms == 2 && ns.cliques == 1);
    /* the first still works */
    CHECK(public_all_reduce(c1));
    vdev_comm_free(c2);
    vdev_comm_free(c1);
    /* its GPUs free again: NCCL serves the next */
    CHECK_OK(vdev_comm_new(devs, 2, &c3));
    CHECK_STR(vdev_comm_implementation(c3), "nccl");
    vdev_comm_free(c3);
    N.stats(&ns);
    CHECK(ns.comms == 0);
    expect_clean("one NCCL communicator per GPU (public)", 0);
    check_fresh(NULL);
    expect_clean("after shutdown", 1);
}

/* ---- the event after a collective is its stream's ---- */

static void test_stream_events(void)
{
    stub_setup_nccl(2, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    int q[2] = {-1, -1};
    uint64_t h = 0, held[2];
    for (int g = 0; g < 2; g++)
        CHECK_OK(b.ops->stream_open(b.ctx, g, VDEV_PRIORITY_HIGH, &q[g], &h));
    void *bufs[2] = {NULL, NULL}, *x = NULL, *y = NULL, *comm = NULL;
    for (int g = 0; g < 2; g++)
        CHECK_OK(b.ops->reserve(b.ctx, q[g], 2 * MiB, &bufs[g]));
    CHECK_OK(b.ops->coll_open(b.ctx, q, 2, &comm, held));
    CHECK(all_reduce2(&b, comm, bufs));
    /* a map on GPU 0 (through its own stream) waits for the collective on
     * the opened stream, once */
    uint64_t waits = S.calls("cuEventSynchronize");
    CHECK_OK(b.ops->reserve(b.ctx, 0, 2 * MiB, &x));
    CHECK(S.calls("cuEventSynchronize") == waits + 1);
    CHECK_OK(b.ops->reserve(b.ctx, 0, 2 * MiB, &y));
    CHECK(S.calls("cuEventSynchronize") == waits + 1);
    /* a collective pending, then its stream goes: nothing left to wait on */
    CHECK(all_reduce2(&b, comm, bufs));
    b.ops->coll_close(b.ctx, comm);
    b.ops->stream_close(b.ctx, q[0]);
    waits = S.calls("cuEventSynchronize");
    b.ops->release(b.ctx, 0, bufs[0], 2 * MiB); /* an unmap on GPU 0 */
    CHECK(S.calls("cuEventSynchronize") == waits);
    b.ops->release(b.ctx, 0, x, 2 * MiB);
    b.ops->release(b.ctx, 0, y, 2 * MiB);
    b.ops->release(b.ctx, q[1], bufs[1], 2 * MiB);
    b.ops->stream_close(b.ctx, q[1]);
    vdev_backend_destroy(&b);
    expect_clean("events after collectives", 1);
}

/* ---- communicators left open when the backend goes ---- */

static void test_left_open_backend(void)
{
    stub_setup_nccl(2, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    int qs[2] = {0, 1};
    uint64_t held[2];
    void *comm = NULL;
    CHECK_OK(b.ops->coll_open(b.ctx, qs, 2, &comm, held));
    uint64_t aborts = N.calls("ncclCommAbort");
    vdev_backend_destroy(&b); /* comm never closed */
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.comms == 0 && ns.cliques == 0);
    CHECK(N.calls("ncclCommAbort") == aborts + 2);
    struct vdev_stub_stats s;
    for (int g = 0; g < 2; g++) {
        S.stats(g, &s);
        CHECK_EQ_U64(s.bytes_used, 0); /* NCCL's buffers given back */
    }
    expect_clean("a communicator left open at destroy", 1);
}

static void test_left_open_shutdown(void)
{
    stub_setup_nccl(2, 0, 0);
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_comm_t *c = NULL;
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    CHECK_STR(vdev_comm_implementation(c), "nccl");
    CHECK(public_all_reduce(c));
    vdev_shutdown(); /* with c open */
    struct vdev_stub_nccl_stats ns;
    N.stats(&ns);
    CHECK(ns.comms == 0 && ns.cliques == 0);
    struct vdev_stub_stats s;
    S.stats(0, &s);
    CHECK_EQ_U64(s.bytes_used, 0);
    expect_clean("a communicator left open at shutdown", 1);
    /* freeing it now touches nothing of the backend that went */
    uint64_t destroys = N.calls("ncclCommDestroy"), aborts = N.calls("ncclCommAbort");
    vdev_comm_free(c);
    CHECK(N.calls("ncclCommDestroy") == destroys && N.calls("ncclCommAbort") == aborts);
    expect_clean("freed after shutdown", 1);
    /* and the next runtime's communicator is NCCL's again */
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_comm_new(devs, 2, &c));
    CHECK_STR(vdev_comm_implementation(c), "nccl");
    CHECK(public_all_reduce(c));
    vdev_comm_free(c);
    check_fresh(NULL);
    expect_clean("the next runtime", 1);
}

/* Runs fn in a child process; a failed check if the child's checks failed. */
static void in_child(void (*fn)(void), const char *what)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        check_passed = check_failed = 0; /* the child's own count */
        fn();
        S.setup(NULL);
        int rc = check_done();
        fflush(stdout);
        _exit(rc);
    }
    int wst = 0;
    if (pid > 0 && waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0)
        check_passed++;
    else
        check_fail(__FILE__, __LINE__, "%s: the child process's checks failed (wait status %#x)",
                   what, wst);
}

int main(void)
{
    check_fresh(NULL);
    if (stub_load() != 0 || stub_load_nccl() != 0) {
        check_fail(__FILE__, __LINE__, "cannot load the stand-in driver or NCCL");
        return check_done();
    }
    /* before this process opens the plugin (which sets the variable) */
    in_child(test_env_default, "NCCL_RUNTIME_CONNECT unset");
    in_child(test_env_user, "NCCL_RUNTIME_CONNECT set");
    in_child(test_one_per_gpu_public, "one NCCL communicator per GPU (public)");
    test_one_per_gpu_backend();
    test_stream_events();
    test_left_open_backend();
    test_left_open_shutdown();
    check_fresh(NULL);
    S.setup(NULL);
    return check_done();
}
