/* test_coll_errors.c — collectives fail together, with exact codes and
 * messages, and never hang: bad communicators and ranks; a rank's own bad
 * argument, which fails the call on every rank and leaves the communicator
 * usable; disagreements between ranks (TensorFlow's shape mismatch message);
 * no memory for the staging buffer on one rank (every tensor unchanged, and
 * the call works once memory is freed); a backend failure while data moves
 * (injected into one rank's copies), an abort, and a timeout, which spend
 * the communicator; no host memory for a communicator's handle. */
#define _GNU_SOURCE
#include "ranks.h"

#include "base/handles.h"
#include "coll/ring.h"

#include <math.h>

#define EXPECT_ERR(call, code, sub)                                                                \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_MSG(sub);                                                                            \
    } while (0)

static const char *const gpus[4] = {"GPU:0", "GPU:1", "GPU:2", "GPU:3"};

static vdev_tensor_t *on(const char *dev, int64_t count, float value, enum vdev_dtype dt)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t shape[1] = {count};
    vdev_tensor_t *t = vdev_tensor_fill(shape, 1, dt, value);
    CHECK_OK(vdev_device_pop());
    CHECK(t != NULL);
    return t;
}

/* Every element of t equals v. */
static void test_new(void)
{
    check_fresh("2x1GiB");
    vdev_comm_t *c = (vdev_comm_t *)1;
    EXPECT_ERR(vdev_comm_new(gpus, 2, NULL), VDEV_ERR_INVALID_ARG, "vdev_comm_new: out is NULL");
    EXPECT_ERR(vdev_comm_new(gpus, 0, &c), VDEV_ERR_INVALID_ARG,
               "Must specify at least one device.");
    CHECK(c == NULL);
    EXPECT_ERR(vdev_comm_new(NULL, 2, &c), VDEV_ERR_INVALID_ARG,
               "vdev_comm_new: devices is NULL and n 2");
    const char *dup[2] = {"GPU:0", "/gpu:0"};
    EXPECT_ERR(vdev_comm_new(dup, 2, &c), VDEV_ERR_INVALID_ARG,
               "No duplicates allowed in `devices` argument: "
               "('/job:localhost/replica:0/task:0/device:GPU:0', "
               "'/job:localhost/replica:0/task:0/device:GPU:0')");
    const char *missing[2] = {"GPU:0", "GPU:9"};
    EXPECT_ERR(vdev_comm_new(missing, 2, &c), VDEV_ERR_NOT_FOUND,
               "No matching devices found for 'GPU:9'");
    const char *mixed[2] = {"CPU:0", "GPU:0"};
    EXPECT_ERR(vdev_comm_new(mixed, 2, &c), VDEV_ERR_UNSUPPORTED,
               "collectives need devices of one backend: /device:CPU:0 is on the cpu backend, "
               "/device:GPU:0 on the sim backend");
    CHECK(c == NULL);

    CHECK_OK(vdev_comm_new(gpus, 2, &c));
    CHECK(vdev_comm_size(c) == 2);
    CHECK(vdev_comm_device(c, 2) == NULL);
    CHECK_MSG("vdev_comm_device: rank 2 of a communicator of 2 ranks");
    EXPECT_ERR(vdev_comm_set_timeout(c, 0), VDEV_ERR_INVALID_ARG,
               "vdev_comm_set_timeout: 0 seconds (a timeout is > 0 and at most 1e9)");
    EXPECT_ERR(vdev_comm_set_timeout(c, NAN), VDEV_ERR_INVALID_ARG, "vdev_comm_set_timeout: nan");
    EXPECT_ERR(vdev_comm_set_timeout(c, INFINITY), VDEV_ERR_INVALID_ARG,
               "vdev_comm_set_timeout: inf");
    EXPECT_ERR(vdev_comm_abort(c, 0, VDEV_OK, "x"), VDEV_ERR_INVALID_ARG,
               "vdev_comm_abort: code 0 is not an error");
    vdev_tensor_t *t = on("GPU:0", 4, 1, VDEV_F32);
    EXPECT_ERR(vdev_comm_all_reduce(c, 2, &t, 1, VDEV_REDUCE_SUM), VDEV_ERR_INVALID_ARG,
               "vdev_comm_all_reduce: rank 2 of a communicator of 2 ranks");
    EXPECT_ERR(vdev_comm_barrier(c, -1), VDEV_ERR_INVALID_ARG,
               "vdev_comm_barrier: rank -1 of a communicator of 2 ranks");
    vdev_comm_free(c);
    CHECK(vdev_comm_size(c) == -1);
    CHECK_MSG("vdev_comm_size: not a live communicator (freed already, or not a communicator)");
    vdev_comm_free(c);
    CHECK_MSG("vdev_comm_free: not a live communicator");
    CHECK(vdev_comm_size(NULL) == -1);
    CHECK_MSG("vdev_comm_size: communicator is NULL");
    CHECK(vdev_comm_implementation((vdev_comm_t *)t) == NULL); /* a tensor's handle */
    CHECK_MSG("vdev_comm_implementation: not a live communicator");
    EXPECT_ERR(vdev_comm_all_reduce(c, 0, &t, 1, VDEV_REDUCE_SUM), VDEV_ERR_INVALID_ARG,
               "vdev_comm_all_reduce: not a live communicator");
    vdev_tensor_free(t);

    /* made before a shutdown: refused after it, and still freed */
    CHECK_OK(vdev_comm_new(gpus, 2, &c));
    vdev_shutdown();
    CHECK_OK(vdev_init());
    CHECK(vdev_comm_size(c) == -1);
    CHECK_MSG("vdev_comm_size: the communicator belongs to a runtime that was shut down");
    vdev_comm_free(c);
}

/* ---- calls where one rank's arguments are bad ---- */

enum call_kind { AR_SUM, AR_MEAN, AR_BAD_OP, BCAST, BCAST_BAD_ROOT, GATHER, BARRIER };

struct plan {
    enum call_kind kind[RANKS_MAX];   /* per rank */
    int n_tensors[RANKS_MAX];
};

static void do_plan(struct rank_job *j)
{
    const struct plan *p = j->arg;
    enum vdev_status st;
    switch (p->kind[j->rank]) {
    case AR_SUM:
    case AR_MEAN:
    case AR_BAD_OP:
        st = vdev_comm_all_reduce(j->comm, j->rank, j->t, p->n_tensors[j->rank],
                                  p->kind[j->rank] == AR_SUM    ? VDEV_REDUCE_SUM
                                  : p->kind[j->rank] == AR_MEAN ? VDEV_REDUCE_MEAN
                                                                : (enum vdev_reduce_op)7);
        break;
    case BCAST:
    case BCAST_BAD_ROOT:
        st = vdev_comm_broadcast(j->comm, j->rank, j->t, p->n_tensors[j->rank],
                                 p->kind[j->rank] == BCAST ? 0 : 5);
        break;
    case GATHER:
        st = vdev_comm_all_gather(j->comm, j->rank, j->t[0], j->t[1]);
        break;
    default:
        st = vdev_comm_barrier(j->comm, j->rank);
    }
    rank_record(j, st);
}

/* Runs the plan on 2 ranks; checks every rank got `code` and `msg`. */
static void plan_case(int line, vdev_comm_t *comm, struct plan *p, struct rank_job *jobs,
                      enum vdev_status code, const char *msg)
{
    for (int r = 0; r < 2; r++) {
        jobs[r].rank = r;
        jobs[r].n = 2;
        jobs[r].comm = comm;
        jobs[r].arg = p;
    }
    run_ranks(2, do_plan, jobs);
    int before = check_failed;
    CHECK_RANKS(jobs, 2, code, msg);
    if (check_failed != before)
        fprintf(stderr, "  (the case at line %d)\n", line);
}

static void test_local_failures(void)
{
    check_fresh("2x1GiB");
    vdev_comm_t *comm;
    CHECK_OK(vdev_comm_new(gpus, 2, &comm));
    struct rank_job jobs[2];
    struct plan p = {{AR_SUM, AR_SUM}, {1, 1}};

    /* rank 1's tensor is on GPU:0 */
    jobs[0].t[0] = on("GPU:0", 8, 1, VDEV_F32);
    jobs[1].t[0] = on("GPU:0", 8, 2, VDEV_F32);
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-reduce (call 0): rank 1 (/device:GPU:1): vdev_comm_all_reduce: tensor #0 is on "
              "/device:GPU:0, not on the rank's device /device:GPU:1");
    CHECK(check_all_equal(jobs[0].t[0], 1)); /* nothing moved */
    CHECK(check_all_equal(jobs[1].t[0], 2));
    vdev_tensor_free(jobs[1].t[0]);

    /* the communicator is still usable */
    jobs[1].t[0] = on("GPU:1", 8, 2, VDEV_F32);
    plan_case(__LINE__, comm, &p, jobs, VDEV_OK, NULL);
    CHECK(check_all_equal(jobs[0].t[0], 3));
    CHECK(check_all_equal(jobs[1].t[0], 3));

    /* a freed tensor on rank 0 (the call numbers go on) */
    vdev_tensor_t *keep = jobs[0].t[0];
    jobs[0].t[0] = on("GPU:0", 8, 1, VDEV_F32);
    vdev_tensor_free(jobs[0].t[0]);
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-reduce (call 2): rank 0 (/device:GPU:0): tensor #0: vdev_comm_all_reduce: not "
              "a live tensor (freed already, or not a tensor)");
    jobs[0].t[0] = keep;

    /* int32 tensors cannot be summed */
    vdev_tensor_t *i0 = on("GPU:0", 8, 1, VDEV_I32), *i1 = on("GPU:1", 8, 1, VDEV_I32);
    vdev_tensor_t *f0 = jobs[0].t[0], *f1 = jobs[1].t[0];
    jobs[0].t[0] = i0;
    jobs[1].t[0] = i1;
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-reduce (call 3): rank 0 (/device:GPU:0): vdev_comm_all_reduce: tensor #0 is "
              "int32; all-reduce takes float tensors");
    /* but they can be broadcast */
    p.kind[0] = p.kind[1] = BCAST;
    plan_case(__LINE__, comm, &p, jobs, VDEV_OK, NULL);
    jobs[0].t[0] = f0;
    jobs[1].t[0] = f1;

    /* a bad op or root on one rank */
    p.kind[0] = AR_SUM;
    p.kind[1] = AR_BAD_OP;
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-reduce (call 5): rank 1 (/device:GPU:1): vdev_comm_all_reduce: unknown reduce "
              "op 7");
    p.kind[0] = BCAST_BAD_ROOT;
    p.kind[1] = BCAST_BAD_ROOT;
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "broadcast (call 6): rank 0 (/device:GPU:0): vdev_comm_broadcast: root 5 of a "
              "communicator of 2 ranks");
    /* a NULL list with tensors asked for */
    p.kind[0] = p.kind[1] = AR_SUM;
    vdev_tensor_t *saved = jobs[1].t[0];
    jobs[1].t[0] = NULL;
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-reduce (call 7): rank 1 (/device:GPU:1): tensor #0: vdev_comm_all_reduce: "
              "tensor is NULL");
    jobs[1].t[0] = saved;

    /* disagreements between the ranks */
    vdev_tensor_t *four = on("GPU:1", 4, 0, VDEV_F32);
    jobs[1].t[0] = four;
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "Shape mismatch in the collective instance 8. Op at device "
              "/job:localhost/replica:0/task:0/device:GPU:1 expected shape [4] but another member "
              "in the group expected shape [8]. This is likely due to different input shapes at "
              "different members of the collective op.");
    jobs[1].t[0] = saved;
    vdev_tensor_free(four);
    p.n_tensors[1] = 0;
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-reduce (call 9): rank 1 (/device:GPU:1) passed 0 tensors but rank 0 passed 1; "
              "every rank must make the same collective calls in the same order");
    p.n_tensors[1] = 1;
    p.kind[1] = AR_MEAN;
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-reduce (call 10): rank 1 (/device:GPU:1) asked for MEAN but rank 0 for SUM");
    p.kind[1] = BARRIER;
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-reduce (call 11): rank 1 (/device:GPU:1) called barrier but rank 0 called "
              "all-reduce; every rank must make the same collective calls in the same order");
    CHECK(check_all_equal(jobs[0].t[0], 3)); /* none of them moved anything */
    CHECK(check_all_equal(jobs[1].t[0], 3));

    /* all-gather: out must hold every rank's in */
    p.kind[0] = p.kind[1] = GATHER;
    vdev_tensor_t *in0 = jobs[0].t[0], *in1 = jobs[1].t[0];
    jobs[0].t[1] = on("GPU:0", 16, 0, VDEV_F32);
    jobs[1].t[1] = on("GPU:1", 15, 0, VDEV_F32);
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_INVALID_ARG,
              "all-gather (call 12): rank 1 (/device:GPU:1): vdev_comm_all_gather: out has 15 "
              "elements; gathering 8 elements from 2 ranks needs 16");
    vdev_tensor_free(jobs[1].t[1]);
    jobs[1].t[1] = on("GPU:1", 16, 0, VDEV_F32);
    plan_case(__LINE__, comm, &p, jobs, VDEV_OK, NULL);
    CHECK(check_all_equal(jobs[1].t[1], 3));
    for (int r = 0; r < 2; r++)
        vdev_tensor_free(jobs[r].t[1]);
    vdev_tensor_free(in0);
    vdev_tensor_free(in1);
    vdev_tensor_free(i0);
    vdev_tensor_free(i1);
    vdev_comm_free(comm);
}

/* No memory for the staging buffer on rank 1: every rank fails with the
 * out-of-memory error, nothing moved, and the call works once there is room. */
static void test_staging_oom(void)
{
    check_fresh("1x4GiB");
    uint64_t limits[2] = {64ull << 20, 64ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 2));
    vdev_comm_t *comm;
    CHECK_OK(vdev_comm_new(gpus, 2, &comm));
    struct rank_job jobs[2];
    struct plan p = {{AR_SUM, AR_SUM}, {1, 1}};
    jobs[0].t[0] = on("GPU:0", 2 << 20, 1, VDEV_F32); /* 8 MiB: segments of 4 MiB */
    jobs[1].t[0] = on("GPU:1", 2 << 20, 2, VDEV_F32);
    /* fill GPU:1 with 256 KiB blocks until nothing more fits */
    void *blocks[512];
    int nb = 0;
    while (nb < 512 && vdev_mem_alloc("GPU:1", 256 << 10, &blocks[nb]) == VDEV_OK)
        nb++;
    CHECK(nb > 100 && nb < 512);
    plan_case(__LINE__, comm, &p, jobs, VDEV_ERR_OOM,
              "all-reduce (call 0): rank 1 (/device:GPU:1): OOM when allocating tensor with "
              "shape[262144] and type float (1.00 MiB) on "
              "/job:localhost/replica:0/task:0/device:GPU:1");
    CHECK(check_all_equal(jobs[0].t[0], 1));
    CHECK(check_all_equal(jobs[1].t[0], 2));
    struct vdev_memory_info m0, m1;
    CHECK_OK(vdev_memory_info("GPU:0", &m0));
    CHECK_EQ_U64(m0.bytes_in_use, 8u << 20); /* rank 0's staging was given back */
    /* room again: the same call succeeds */
    for (int k = 0; k < 8; k++)
        CHECK_OK(vdev_mem_free("GPU:1", blocks[--nb]));
    plan_case(__LINE__, comm, &p, jobs, VDEV_OK, NULL);
    CHECK(check_all_equal(jobs[0].t[0], 3));
    CHECK(check_all_equal(jobs[1].t[0], 3));
    CHECK_OK(vdev_memory_info("GPU:1", &m1));
    CHECK_EQ_U64(m1.bytes_in_use, (8u << 20) + (uint64_t)nb * (256 << 10));
    while (nb)
        CHECK_OK(vdev_mem_free("GPU:1", blocks[--nb]));
    vdev_tensor_free(jobs[0].t[0]);
    vdev_tensor_free(jobs[1].t[0]);
    vdev_comm_free(comm);
}

/* ---- failures that spend the communicator ---- */

static void do_abort_or_reduce(struct rank_job *j)
{
    if (j->rank == 1) {
        rank_record(j, vdev_comm_abort(j->comm, 1, VDEV_ERR_OOM, "out of memory in my step"));
        /* and every later call fails at once, on this rank too */
        rank_record(j, vdev_comm_barrier(j->comm, 1));
        return;
    }
    rank_record(j, vdev_comm_all_reduce(j->comm, 0, j->t, 1, VDEV_REDUCE_SUM));
}

static void test_abort(void)
{
    check_fresh("2x1GiB");
    vdev_comm_t *comm;
    CHECK_OK(vdev_comm_new(gpus, 2, &comm));
    struct rank_job jobs[2] = {{.rank = 0, .comm = comm}, {.rank = 1, .comm = comm}};
    jobs[0].t[0] = on("GPU:0", 8, 1, VDEV_F32);
    run_ranks(2, do_abort_or_reduce, jobs);
    const char *msg = "Collective ops is aborted by: rank 1 (/device:GPU:1): out of memory in my "
                      "step. The error could be from a previous operation. Free the communicator "
                      "and make a new one to reset.";
    CHECK_RANKS(jobs, 2, VDEV_ERR_OOM, msg);
    EXPECT_ERR(vdev_comm_barrier(comm, 0), VDEV_ERR_OOM, msg);
    vdev_tensor_free(jobs[0].t[0]);
    vdev_comm_free(comm);
}

static void do_reduce_alone(struct rank_job *j)
{
    if (j->rank == 0)
        rank_record(j, vdev_comm_all_reduce(j->comm, 0, j->t, 1, VDEV_REDUCE_SUM));
}

static void test_timeout(void)
{
    check_fresh("2x1GiB");
    vdev_comm_t *comm;
    CHECK_OK(vdev_comm_new(gpus, 2, &comm));
    CHECK_OK(vdev_comm_set_timeout(comm, 0.25));
    struct rank_job jobs[2] = {{.rank = 0, .comm = comm}, {.rank = 1, .comm = comm}};
    jobs[0].t[0] = on("GPU:0", 8, 1, VDEV_F32);
    run_ranks(2, do_reduce_alone, jobs); /* rank 1 never comes */
    const char *msg = "Collective has timed out waiting for other workers: all-reduce (call 0) on "
                      "rank 0 (/device:GPU:0) waited 0.25 s for rank 1 (/device:GPU:1), which did "
                      "not make this call; every rank must make the same collective calls in the "
                      "same order";
    CHECK_RANKS(jobs, 1, VDEV_ERR_BACKEND, msg);
    /* spent: rank 1's late call fails at once with the same error */
    EXPECT_ERR(vdev_comm_barrier(comm, 1), VDEV_ERR_BACKEND, msg);
    CHECK(check_all_equal(jobs[0].t[0], 1));
    vdev_tensor_free(jobs[0].t[0]);
    vdev_comm_free(comm);
}

/* A copy that fails on rank 1 in the middle of a call: every rank fails with
 * that error (none hangs), and every later call fails at once. Also a rank
 * that finished its own part before rank 1 failed (the broadcast's root,
 * which depends on no one, with the failure at rank 1's last copy): it must
 * not return VDEV_OK while the others fail; repeated, since whether it
 * finishes first is a matter of timing. */
static void do_kind(struct rank_job *j)
{
    int kind = *(int *)j->arg;
    if (kind == 0)
        rank_record(j, vdev_comm_all_reduce(j->comm, j->rank, j->t, 1, VDEV_REDUCE_MEAN));
    else if (kind == 1)
        rank_record(j, vdev_comm_broadcast(j->comm, j->rank, j->t, 1, 2));
    else
        rank_record(j, vdev_comm_all_gather(j->comm, j->rank, j->t[0], j->t[1]));
}

static void test_backend_failure(void)
{
    static const char *const what[3] = {"all-reduce", "broadcast", "all-gather"};
    for (int k = 0; k < 3 * 6; k++) {
        int kind = k % 3, nth = k < 3 ? 3 : kind == 1 ? 4 : 3; /* the broadcast's 4 slices */
        check_fresh("3x1GiB");
        vdev_comm_t *comm;
        CHECK_OK(vdev_comm_new(gpus, 3, &comm));
        struct rank_job jobs[3];
        const int64_t count = 3 * 262144 + 7; /* several slices */
        for (int r = 0; r < 3; r++) {
            jobs[r] = (struct rank_job){.rank = r, .n = 3, .comm = comm, .arg = &kind};
            jobs[r].t[0] = on(gpus[r], count, (float)r, VDEV_F32);
            jobs[r].t[1] = on(gpus[r], 3 * count, 0, VDEV_F32);
        }
        vdev_coll_ring_fail_copy(1, nth);
        run_ranks(3, do_kind, jobs);
        vdev_coll_ring_fail_copy(0, 0);
        char msg[256];
        snprintf(msg, sizeof msg, "%s (call 0): rank 1 (/device:GPU:1): /device:GPU:1: injected "
                                  "failure of a device-to-device copy",
                 what[kind]);
        CHECK_RANKS(jobs, 3, VDEV_ERR_BACKEND, msg);
        EXPECT_ERR(vdev_comm_barrier(comm, 0), VDEV_ERR_BACKEND, msg);
        for (int r = 0; r < 3; r++) {
            vdev_tensor_free(jobs[r].t[0]);
            vdev_tensor_free(jobs[r].t[1]);
        }
        vdev_comm_free(comm);
    }
}

/* No host memory for the handle of the first communicator of the process:
 * VDEV_ERR_OOM, nothing left behind. Runs first: the table has no segment. */
static void test_no_handle(void)
{
    check_fresh("2x1GiB");
    vdev_comm_t *c = (vdev_comm_t *)1;
    vdev_handles_fail_segment(1);
    EXPECT_ERR(vdev_comm_new(gpus, 2, &c), VDEV_ERR_OOM,
               "out of host memory for 1024 more communicator handles");
    vdev_handles_fail_segment(0);
    CHECK(c == NULL);
    CHECK_OK(vdev_comm_new(gpus, 2, &c));
    vdev_comm_free(c);
}

/* A plugin's table of another API version is refused. */
static void test_wrong_version(void)
{
    check_fresh("2x1GiB");
    struct vdev_ldev *d[2];
    CHECK_OK(vdev_runtime_find("GPU:0", &d[0]));
    CHECK_OK(vdev_runtime_find("GPU:1", &d[1]));
    struct vdev_coll_ops ops = vdev_coll_ring_ops;
    ops.api_version = VDEV_COLL_API_VERSION + 1;
    struct vdev_coll_comm *c = (struct vdev_coll_comm *)1;
    EXPECT_ERR(vdev_coll_comm_make_with(&ops, d, 2, &c), VDEV_ERR_UNSUPPORTED,
               "a collectives implementation of API version 2; vdev needs 1");
    CHECK(c == NULL);
    CHECK_OK(vdev_coll_comm_make_with(&vdev_coll_ring_ops, d, 2, &c));
    vdev_coll_comm_free(c);
}

int main(void)
{
    test_no_handle();
    test_wrong_version();
    test_new();
    test_local_failures();
    test_staging_oom();
    test_backend_failure();
    test_abort();
    test_timeout();
    vdev_shutdown();
    return check_done();
}
