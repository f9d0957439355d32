/* test_tape_coll.c — collectives write their tensors in place as any write
 * does (vdev_tens_write_begin, then _end once the call returned), on the
 * ring over simulated GPUs and over logical CPUs; white box (the static
 * library's internals), one host thread per rank:
 *  - each rank's tape reads its variable, an all-reduce writes it, and the
 *    gradient is 2 v as Mul read it; the value kept goes with the tape;
 *  - another thread's tape reads rank 0's variable while the all-reduce is
 *    under way (rank 0's call has begun its write and not queued it: the
 *    ring's run hands off to the reader): Mul and its record read a copy,
 *    so the gradient is of the value Mul read (before: the read was counted
 *    at the version written, and the gradient used the reduced values,
 *    22 44 66 88);
 *  - a call that fails on another rank's bad input, and one that fails
 *    while data moves (an injected copy failure), still end the writes they
 *    began: the tape that read the variable before gets the value it read,
 *    and the next write and the next tape read of it go on as usual (no
 *    copy for a write still under way); a call that fails on the rank's own
 *    bad input begins no write (before: the version moved and a value was
 *    saved for nothing);
 *  - a broadcast's root and an all-gather's input are read, not written:
 *    their versions stay, and a tape that read them keeps no copy. */
#define _GNU_SOURCE
#include "coll/coll.h"
#include "coll/ring.h"
#include "ranks.h"
#include "runtime/runtime.h"

#include <semaphore.h>

static const float OLD[4] = {1, 2, 3, 4}, NEW[4] = {10, 20, 30, 40};
static const float SUM[4] = {11, 22, 33, 44};
static const float SQUARES[4] = {1, 4, 9, 16}, TWICE_OLD[4] = {2, 4, 6, 8};
static const float TWICE_NEW[4] = {20, 40, 60, 80};

static char devname[2][32];

static void set_devices(const char *prefix)
{
    if (!strcmp(prefix, "CPU")) {
        check_fresh(NULL);
        CHECK_OK(vdev_config_set_logical_devices("CPU:0", NULL, 2));
    } else {
        check_fresh("2x1GiB");
    }
    for (int r = 0; r < 2; r++)
        snprintf(devname[r], sizeof devname[r], "%s:%d", prefix, r);
}

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    return vdev_memory_info(dev, &mi) == VDEV_OK ? mi.bytes_in_use : UINT64_MAX;
}

/* A tensor of 4 elements on dev; a variable when var is set. */
static vdev_tensor_t *on(const char *dev, const float *v, int var)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t s[1] = {4};
    vdev_tensor_t *t = vdev_tensor_from_host(v, s, 1, VDEV_F32);
    if (var)
        t = vdev_variable(t);
    CHECK_OK(vdev_device_pop());
    CHECK(t != NULL);
    return t;
}

static int equals(const vdev_tensor_t *t, const float *want)
{
    float got[4];
    return vdev_tensor_numel(t) == 4 && vdev_tensor_to_host(t, got, sizeof got) == VDEV_OK &&
           memcmp(got, want, sizeof got) == 0;
}

static struct vdev_tens *tens(const vdev_tensor_t *h) { return vdev_tens_peek(h); }

static int writing(const vdev_tensor_t *h)
{
    return atomic_load(&tens(h)->writing);
}

/* ---- a tape on each rank, then an all-reduce, then the gradient ---- */

/* What a rank's own checks need besides its call's status. */
struct rank_out {
    enum vdev_status grad_st;
};

static void tape_then_all_reduce(struct rank_job *j)
{
    struct rank_out *o = j->arg;
    o[j->rank].grad_st = -1;
    if (vdev_device_push(devname[j->rank]) != VDEV_OK)
        return;
    vdev_tape_t *tape = vdev_tape_begin();
    j->t[1] = vdev_mul(j->t[0], j->t[0]);
    j->t[2] = vdev_sum_all(j->t[1]);
    rank_record(j, vdev_comm_all_reduce(j->comm, j->rank, &j->t[0], 1, VDEV_REDUCE_SUM));
    o[j->rank].grad_st = vdev_tape_gradient(tape, j->t[2], &j->t[0], 1, &j->t[3]);
    vdev_tape_end(tape);
    vdev_device_pop();
}

static void kept(const char *prefix)
{
    set_devices(prefix);
    const char *names[2] = {devname[0], devname[1]};
    vdev_comm_t *comm = NULL;
    CHECK_OK(vdev_comm_new(names, 2, &comm));
    struct rank_out out[2];
    struct rank_job jobs[2];
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < 2; r++) {
        jobs[r] = (struct rank_job){.rank = r, .n = 2, .comm = comm, .arg = out};
        jobs[r].t[0] = on(devname[r], r ? NEW : OLD, 1);
    }
    run_ranks(2, tape_then_all_reduce, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    for (int r = 0; r < 2; r++) {
        CHECK(out[r].grad_st == VDEV_OK);
        CHECK(equals(jobs[r].t[0], SUM));
        CHECK(equals(jobs[r].t[3], r ? TWICE_NEW : TWICE_OLD)); /* v as Mul read it */
        CHECK(writing(jobs[r].t[0]) == 0);
        CHECK(vdev_tens_version(tens(jobs[r].t[0])) == 1);
        for (int k = 1; k < 4; k++)
            vdev_tensor_free(jobs[r].t[k]);
        CHECK_EQ_U64(in_use(devname[r]), 256); /* the value kept went with the tape */
        vdev_tensor_free(jobs[r].t[0]);
    }
    vdev_comm_free(comm);
}

/* ---- another thread's tape reads while the all-reduce is under way ---- */

static sem_t go, done, grad_go;
static _Atomic int armed;
static vdev_tensor_t *rvar, *rsq, *rg;
static uint64_t r_before, r_after;
static _Atomic int r_status;

static enum vdev_status run_after_read(void *ctx, int rank, const struct vdev_coll_call *call,
                                       int *origin)
{
    if (rank == 0 && atomic_exchange(&armed, 0)) {
        sem_post(&go);
        sem_wait(&done);
    }
    return vdev_coll_ring_ops.run(ctx, rank, call, origin);
}

static void *reader(void *unused)
{
    (void)unused;
    sem_wait(&go);
    int st = vdev_device_push(devname[0]);
    vdev_tape_t *tape = vdev_tape_begin();
    r_before = in_use(devname[0]);
    rsq = vdev_mul(rvar, rvar);
    vdev_tensor_t *l = vdev_sum_all(rsq);
    r_after = in_use(devname[0]);
    sem_post(&done);
    sem_wait(&grad_go); /* the all-reduce has returned on every rank */
    st |= (int)vdev_tape_gradient(tape, l, &rvar, 1, &rg);
    vdev_tape_end(tape);
    vdev_tensor_free(l);
    st |= (int)vdev_device_pop();
    atomic_store(&r_status, st);
    return NULL;
}

static void do_all_reduce(struct rank_job *j)
{
    rank_record(j, vdev_comm_all_reduce(j->comm, j->rank, &j->t[0], 1, VDEV_REDUCE_SUM));
}

/* A communicator of the ring whose rank 0 hands off before its run. */
static struct vdev_coll_comm *handing_off(void)
{
    static struct vdev_coll_ops ops;
    ops = vdev_coll_ring_ops;
    ops.run = run_after_read;
    struct vdev_ldev *devs[2];
    for (int r = 0; r < 2; r++)
        CHECK_OK(vdev_runtime_find(devname[r], &devs[r]));
    struct vdev_coll_comm *c = NULL;
    CHECK_OK(vdev_coll_comm_make_with(&ops, devs, 2, &c));
    return c;
}

static void read_during(const char *prefix)
{
    set_devices(prefix);
    struct vdev_coll_comm *c = handing_off();
    vdev_comm_t *comm = vdev_coll_comm_publish(c);
    CHECK(comm != NULL);
    struct rank_job jobs[2];
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < 2; r++) {
        jobs[r] = (struct rank_job){.rank = r, .n = 2, .comm = comm};
        jobs[r].t[0] = on(devname[r], r ? NEW : OLD, 1);
    }
    rvar = jobs[0].t[0];
    sem_init(&go, 0, 0);
    sem_init(&done, 0, 0);
    sem_init(&grad_go, 0, 0);
    atomic_store(&r_status, -1);
    atomic_store(&armed, 1);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, reader, NULL) == 0);
    run_ranks(2, do_all_reduce, jobs);
    if (atomic_load(&armed)) { /* no hand-off came: a failure, and free the reader */
        CHECK(!"the all-reduce did not hand off");
        sem_post(&go);
        sem_wait(&done);
    }
    sem_post(&grad_go);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    CHECK(atomic_load(&r_status) == VDEV_OK);
    CHECK_EQ_U64(r_after - r_before, 3 * 256); /* the copy, v*v, the sum */
    CHECK(equals(rsq, SQUARES));               /* Mul read v before the all-reduce */
    CHECK(equals(rg, TWICE_OLD));              /* and so did its gradient */
    CHECK(equals(jobs[0].t[0], SUM));
    CHECK(equals(jobs[1].t[0], SUM));
    CHECK(writing(jobs[0].t[0]) == 0);
    vdev_tensor_free(rg);
    vdev_tensor_free(rsq);
    CHECK_EQ_U64(in_use(devname[0]), 256); /* the copy went with the tape */
    for (int r = 0; r < 2; r++)
        vdev_tensor_free(jobs[r].t[0]);
    vdev_coll_comm_unpublish(comm);
    vdev_coll_comm_free(c);
}

/* ---- failed calls end the writes they began ---- */

static void do_pair(struct rank_job *j)
{
    int n = j->t[1] ? 2 : 1;
    rank_record(j, vdev_comm_all_reduce(j->comm, j->rank, j->t, n, VDEV_REDUCE_SUM));
}

/* v (read by a tape, written by a failed call) takes the next write and
 * tape read as usual, and the tape's gradient is of the value it read. */
static void still_usable(vdev_tensor_t *v, vdev_tape_t *tape, vdev_tensor_t *l)
{
    CHECK(writing(v) == 0);
    vdev_tensor_t *nv = on(devname[0], NEW, 0), *g = NULL;
    CHECK_OK(vdev_assign(v, nv));
    CHECK(equals(v, NEW));
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    CHECK(equals(g, TWICE_OLD));
    vdev_tensor_free(g);
    vdev_tape_t *t2 = vdev_tape_begin();
    uint64_t before = in_use(devname[0]);
    vdev_tensor_t *sq = vdev_mul(v, v);
    CHECK_EQ_U64(in_use(devname[0]) - before, 256); /* v*v alone: no copy of v */
    vdev_tape_end(t2);
    vdev_tensor_free(sq);
    vdev_tensor_free(nv);
}

static void failures(const char *prefix)
{
    set_devices(prefix);
    const char *names[2] = {devname[0], devname[1]};
    char msg[512];
    for (int k = 0; k < 3; k++) {
        vdev_comm_t *comm = NULL;
        CHECK_OK(vdev_comm_new(names, 2, &comm));
        struct rank_job jobs[2];
        memset(jobs, 0, sizeof jobs);
        for (int r = 0; r < 2; r++)
            jobs[r] = (struct rank_job){.rank = r, .n = 2, .comm = comm};
        jobs[0].t[0] = on(devname[0], OLD, 1);
        jobs[1].t[0] = on(devname[k == 0 ? 0 : 1], NEW, 1); /* k 0: on rank 0's device */
        if (k == 2) { /* rank 0's own second tensor is int32 */
            int64_t s[1] = {4};
            CHECK_OK(vdev_device_push(devname[0]));
            jobs[0].t[1] = vdev_tensor_fill(s, 1, VDEV_I32, 1.0);
            CHECK_OK(vdev_device_pop());
            jobs[1].t[1] = on(devname[1], NEW, 0);
        }
        CHECK_OK(vdev_device_push(devname[0]));
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *sq = vdev_mul(jobs[0].t[0], jobs[0].t[0]), *l = vdev_sum_all(sq);
        uint64_t before = in_use(devname[0]);
        if (k == 1)
            vdev_coll_ring_fail_copy(1, 1);
        run_ranks(2, do_pair, jobs);
        vdev_coll_ring_fail_copy(0, 0);
        if (k == 0) {
            snprintf(msg, sizeof msg, "all-reduce (call 0): rank 1 (/device:%s): "
                     "vdev_comm_all_reduce: tensor #0 is on /device:%s, not on the rank's "
                     "device /device:%s", devname[1], devname[0], devname[1]);
            CHECK_RANKS(jobs, 2, VDEV_ERR_INVALID_ARG, msg);
            CHECK(equals(jobs[0].t[0], OLD)); /* nothing moved */
            CHECK(vdev_tens_version(tens(jobs[0].t[0])) == 1); /* rank 0 began its write */
        } else if (k == 1) {
            snprintf(msg, sizeof msg, "all-reduce (call 0): rank 1 (/device:%s): /device:%s: "
                     "injected failure of a device-to-device copy", devname[1], devname[1]);
            CHECK_RANKS(jobs, 2, VDEV_ERR_BACKEND, msg);
            CHECK(vdev_tens_version(tens(jobs[0].t[0])) == 1);
        } else {
            snprintf(msg, sizeof msg, "all-reduce (call 0): rank 0 (/device:%s): "
                     "vdev_comm_all_reduce: tensor #1 is int32; all-reduce takes float tensors",
                     devname[0]);
            CHECK_RANKS(jobs, 2, VDEV_ERR_INVALID_ARG, msg);
            CHECK(vdev_tens_version(tens(jobs[0].t[0])) == 0); /* no write begun */
            CHECK_EQ_U64(in_use(devname[0]), before);        /* and no value kept */
        }
        CHECK_STR(jobs[0].msg, msg);
        CHECK(writing(jobs[1].t[0]) == 0);
        still_usable(jobs[0].t[0], tape, l);
        vdev_tape_end(tape);
        vdev_tensor_free(l);
        vdev_tensor_free(sq);
        CHECK_OK(vdev_device_pop());
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < 2; i++)
                vdev_tensor_free(jobs[r].t[i]);
        vdev_comm_free(comm);
        CHECK_EQ_U64(in_use(devname[0]), 0);
    }
}

/* ---- what a collective only reads ---- */

static void do_broadcast(struct rank_job *j)
{
    rank_record(j, vdev_comm_broadcast(j->comm, j->rank, &j->t[0], 1, 0));
}

static void do_gather(struct rank_job *j)
{
    rank_record(j, vdev_comm_all_gather(j->comm, j->rank, j->t[0], j->t[1]));
}

static void read_only(const char *prefix)
{
    set_devices(prefix);
    const char *names[2] = {devname[0], devname[1]};
    vdev_comm_t *comm = NULL;
    CHECK_OK(vdev_comm_new(names, 2, &comm));
    struct rank_job jobs[2];
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < 2; r++) {
        jobs[r] = (struct rank_job){.rank = r, .n = 2, .comm = comm};
        jobs[r].t[0] = on(devname[r], r ? NEW : OLD, 1);
    }
    CHECK_OK(vdev_device_push(devname[0]));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *sq = vdev_mul(jobs[0].t[0], jobs[0].t[0]);
    uint64_t before = in_use(devname[0]);
    run_ranks(2, do_broadcast, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    CHECK(equals(jobs[1].t[0], OLD));
    CHECK(vdev_tens_version(tens(jobs[0].t[0])) == 0); /* the root's is read */
    CHECK(vdev_tens_version(tens(jobs[1].t[0])) == 1);
    CHECK_EQ_U64(in_use(devname[0]), before); /* no copy kept of the root's */
    int64_t s8[1] = {8};
    for (int r = 0; r < 2; r++) {
        CHECK_OK(vdev_device_push(devname[r]));
        jobs[r].t[1] = vdev_variable(vdev_tensor_fill(s8, 1, VDEV_F32, 0.0));
        CHECK_OK(vdev_device_pop());
        CHECK(jobs[r].t[1] != NULL);
    }
    uint64_t in_ver = vdev_tens_version(tens(jobs[1].t[0]));
    run_ranks(2, do_gather, jobs);
    CHECK_RANKS(jobs, 2, VDEV_OK, NULL);
    CHECK(vdev_tens_version(tens(jobs[0].t[0])) == 0); /* the input is read */
    CHECK(vdev_tens_version(tens(jobs[1].t[0])) == in_ver);
    CHECK(vdev_tens_version(tens(jobs[0].t[1])) == 1);
    CHECK(vdev_tens_version(tens(jobs[1].t[1])) == 1);
    CHECK_EQ_U64(in_use(devname[0]), before + 256); /* the output alone */
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 2; i++)
            CHECK(writing(jobs[r].t[i]) == 0);
    vdev_tape_end(tape);
    vdev_tensor_free(sq);
    CHECK_OK(vdev_device_pop());
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 2; i++)
            vdev_tensor_free(jobs[r].t[i]);
    vdev_comm_free(comm);
}

int main(void)
{
    kept("GPU");
    kept("CPU");
    read_during("GPU");
    read_during("CPU");
    failures("GPU");
    failures("CPU");
    read_only("GPU");
    read_only("CPU");
    vdev_shutdown();
    return check_done();
}
