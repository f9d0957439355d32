/* stub_nccl.c — a stand-in for NCCL (libnccl.so.2), so that the CUDA
 * plugin's collectives run, and are checked, on machines without a GPU.
 * What it does and checks: stub_nccl.h.
 *
 * How. The functions have the prototypes of nccl_abi.h (the plugin's own
 * declarations of NCCL's interface). Device memory and streams are the
 * stand-in driver's, reached through its vdev_stub_lib_* functions, looked
 * up with dlsym in libcuda.so.1 (the stand-in, already loaded under that
 * name when the test runs). A clique (one ncclCommInitAll) has two slots of
 * calls in flight, used by turns as the ring of src/coll/ does: a rank's
 * k-th collective waits in slot k % 2 until every rank has posted its k-th,
 * the last to post does the arithmetic for all, and the slot is free for
 * call k + 2 once every rank has left it. A wait lasts at most 60 s (a
 * violation: a rank never came). ncclCommAbort sets its communicator's
 * abort flag, which the communicator's waits poll, as NCCL's blocked waits
 * do: a rank waiting for a peer that never comes is freed by the abort of
 * its own communicator only (a peer's abort does not free it: NCCL's
 * kernels would spin on). Group calls are kept per thread, as NCCL keeps
 * them, and run in order at the outermost ncclGroupEnd. A communicator
 * aborted or destroyed while another thread is inside ncclGroupEnd (or a
 * lone collective) with it is freed when that call leaves, which then
 * returns an error; aborting or destroying one that has calls queued in
 * some thread's group, not yet ended, is a violation (NCCL's calls on a
 * communicator must not overlap there). A communicator's buffers are
 * taken as NCCL 2.22+ takes them: at ncclCommInitAll when
 * NCCL_RUNTIME_CONNECT is 0, else (NCCL's default, 1) at the communicator's
 * first collective, when the ranks connect (read at every ncclCommInitAll;
 * NCCL reads it once per process). */
#define _GNU_SOURCE
#include "stub_cuda.h"
#include "stub_nccl.h"

#include "backend/cuda/nccl_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_RANKS 8
#define MAX_GROUP 64
#define WAIT_S 60
#define COMM_MAGIC 0x4e43434cu

/* NCCL's functions, as the plugin declares them (nccl_abi.h's types). */
EXPORT ncclResult_t ncclGetVersion(int *version);
EXPORT const char *ncclGetErrorString(ncclResult_t r);
EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c);
EXPORT ncclResult_t ncclCommAbort(ncclComm_t c);
EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e);
EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                  vdev_nccl_stream_t stream);
EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t type, int root, ncclComm_t c,
                                  vdev_nccl_stream_t stream);
EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t type, ncclComm_t c, vdev_nccl_stream_t stream);
EXPORT ncclResult_t ncclGroupStart(void);
EXPORT ncclResult_t ncclGroupEnd(void);

/* ---- the stand-in driver's functions for libraries ---- */

static struct {
    vdev_stub_lib_access_fn access;
    vdev_stub_lib_join_fn join;
    vdev_stub_lib_take_fn take;
    vdev_stub_lib_stream_dev_fn stream_dev;
    vdev_stub_lib_violation_fn violation;
} drv;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* 0 when the stand-in driver's functions are there. */
static int driver_ok(void)
{
    if (drv.access)
        return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return -1;
    *(void **)&drv.access = dlsym(h, "vdev_stub_lib_access");
    *(void **)&drv.join = dlsym(h, "vdev_stub_lib_join");
    *(void **)&drv.take = dlsym(h, "vdev_stub_lib_take");
    *(void **)&drv.stream_dev = dlsym(h, "vdev_stub_lib_stream_dev");
    *(void **)&drv.violation = dlsym(h, "vdev_stub_lib_violation");
    dlclose(h);
    if (!drv.access || !drv.join || !drv.take || !drv.stream_dev || !drv.violation) {
        drv.access = NULL;
        return -1;
    }
    return 0;
}

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(msg, sizeof msg, "stub NCCL: ");
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (driver_ok() == 0)
        drv.violation(msg);
    else
        fprintf(stderr, "%s\n", msg);
}

/* ---- state ---- */

enum kind { ALLREDUCE, BROADCAST, ALLGATHER };
static const char *const kind_name[] = {"allreduce", "broadcast", "allgather"};

struct op {
    enum kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t red;
    int root;
    void *stream;
    struct ncclComm *comm;
};

struct slot {
    uint64_t seq;              /* the call it serves */
    int posted, left;
    int done;
    ncclResult_t result;
    struct op ops[MAX_RANKS];
};

struct clique {
    int n, alive, aborted;
    int devs[MAX_RANKS];
    struct slot slot[2];
    pthread_cond_t cond;
};

struct ncclComm {
    unsigned magic;
    struct clique *q;
    int rank;
    uint64_t seq;              /* its next collective */
    int connected;             /* its buffers are taken (at init, or its first collective) */
    int aborted;               /* its abort flag: its waits end (ncclCommAbort) */
    int queued;                /* its calls in threads' groups not yet ended */
    int inside;                /* its calls running (ncclGroupEnd, a lone collective) */
};

static struct {
    struct vdev_stub_nccl_config cfg;
    int comms, cliques;
    int waiting;               /* ranks inside a collective, waiting */
    uint64_t collectives, groups;
    struct {
        char name[32];
        uint64_t n;
    } callc[32];
    struct {
        char name[32];
        int skip, result, live;
    } faults[8];
    char last[160];
} st;

static _Thread_local struct {
    int depth;
    int n;
    struct op ops[MAX_GROUP];
} grp;

/* Counts the call; 1 when a fault makes it return *r now (lock held). */
static int enter(const char *fn, ncclResult_t *r)
{
    int i = 0;
    int cap = (int)(sizeof st.callc / sizeof st.callc[0]);
    while (i < cap && st.callc[i].name[0] && strcmp(st.callc[i].name, fn))
        i++;
    if (i < cap) {
        snprintf(st.callc[i].name, sizeof st.callc[i].name, "%s", fn);
        st.callc[i].n++;
    }
    for (int f = 0; f < (int)(sizeof st.faults / sizeof st.faults[0]); f++)
        if (st.faults[f].live && !strcmp(st.faults[f].name, fn) && st.faults[f].skip-- == 0) {
            st.faults[f].live = 0;
            *r = (ncclResult_t)st.faults[f].result;
            return 1;
        }
    return 0;
}

#define ENTER(name)                                                                                \
    ncclResult_t r_;                                                                               \
    pthread_mutex_lock(&lock);                                                                     \
    if (enter(name, &r_)) {                                                                        \
        pthread_mutex_unlock(&lock);                                                               \
        return r_;                                                                                 \
    }                                                                                              \
    pthread_mutex_unlock(&lock)

static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    }
    return 0;
}

static int comm_ok(struct ncclComm *c) { return c && c->magic == COMM_MAGIC && c->q; }

/* ---- the version, errors ---- */

EXPORT ncclResult_t ncclGetVersion(int *version)
{
    ENTER("ncclGetVersion");
    *version = st.cfg.version ? st.cfg.version : VDEV_NCCL_VERSION_CODE(2, 27, 3);
    return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}

/* ---- communicators ---- */

EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    ENTER("ncclCommInitAll");
    if (driver_ok() != 0) {
        fprintf(stderr, "stub NCCL: the stand-in driver is not loaded\n");
        return ncclUnhandledCudaError;
    }
    if (!comms || ndev < 1 || ndev > MAX_RANKS || !devlist)
        return ncclInvalidArgument;
    for (int i = 0; i < ndev; i++)
        for (int j = 0; j < i; j++)
            if (devlist[i] == devlist[j]) {
                violation("ncclCommInitAll with GPU %d twice (NCCL: Duplicate GPU detected)",
                          devlist[i]);
                return ncclInvalidUsage;
            }
    pthread_mutex_lock(&lock);
    uint64_t bytes = st.cfg.buffer_bytes;
    pthread_mutex_unlock(&lock);
    const char *rc = getenv("NCCL_RUNTIME_CONNECT");
    int eager = rc && strtoll(rc, NULL, 0) == 0;
    int took = 0;
    for (; took < ndev && eager; took++) {
        int r = drv.take(devlist[took], (long long)bytes);
        if (r != 0)
            break;
    }
    if (eager && took < ndev) {
        for (int i = 0; i < took; i++)
            drv.take(devlist[i], -(long long)bytes);
        return ncclUnhandledCudaError;
    }
    struct clique *q = calloc(1, sizeof *q);
    if (!q)
        return ncclSystemError;
    q->n = ndev;
    q->alive = ndev;
    pthread_cond_init(&q->cond, NULL);
    q->slot[0].seq = 0;
    q->slot[1].seq = 1;
    for (int i = 0; i < ndev; i++) {
        q->devs[i] = devlist[i];
        struct ncclComm *c = calloc(1, sizeof *c);
        if (!c) {
            for (int j = 0; j < i; j++)
                free(comms[j]);
            pthread_cond_destroy(&q->cond);
            free(q);
            for (int j = 0; j < ndev && eager; j++)
                drv.take(devlist[j], -(long long)bytes);
            return ncclSystemError;
        }
        *c = (struct ncclComm){.magic = COMM_MAGIC, .q = q, .rank = i, .connected = eager};
        comms[i] = c;
    }
    pthread_mutex_lock(&lock);
    st.comms += ndev;
    st.cliques++;
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

/* Frees comm c (lock held); its clique goes with its last comm. */
static void comm_drop(struct ncclComm *c)
{
    struct clique *q = c->q;
    if (c->connected)
        drv.take(q->devs[c->rank], -(long long)st.cfg.buffer_bytes);
    c->magic = 0;
    c->q = NULL;
    free(c);
    st.comms--;
    if (--q->alive == 0) {
        pthread_cond_destroy(&q->cond);
        free(q);
        st.cliques--;
    }
}

/* Ends comm c (lock held): freed now, or by the last call that holds it
 * (comm_put), whose use of it is then an error (magic gone). */
static void comm_end(struct ncclComm *c)
{
    c->magic = 0;
    if (!c->queued && !c->inside)
        comm_drop(c);
}

/* A call lets go of comm c (lock held): one of its queued calls, or one
 * running; the comm goes if it was ended meanwhile. */
static void comm_put(struct ncclComm *c, int queued)
{
    if (queued)
        c->queued--;
    else
        c->inside--;
    if (c->magic != COMM_MAGIC && !c->queued && !c->inside)
        comm_drop(c);
}

/* A violation when c has calls queued in a group not yet ended (lock held). */
static void check_not_queued(const char *fn, const struct ncclComm *c)
{
    if (c->queued)
        violation("%s of rank %d while a thread has %d call(s) on it queued in a group not yet "
                  "ended",
                  fn, c->rank, c->queued);
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    ENTER("ncclCommDestroy");
    pthread_mutex_lock(&lock);
    if (!comm_ok(c)) {
        pthread_mutex_unlock(&lock);
        violation("ncclCommDestroy of a communicator that does not exist (%p)", (void *)c);
        return ncclInvalidArgument;
    }
    struct clique *q = c->q;
    for (int k = 0; k < 2; k++)
        if (q->slot[k].posted && !q->slot[k].done && !q->aborted)
            violation("ncclCommDestroy of rank %d while call %llu of its clique is in flight",
                      c->rank, (unsigned long long)q->slot[k].seq);
    check_not_queued("ncclCommDestroy", c);
    if (c->inside)
        violation("ncclCommDestroy of rank %d while another thread is inside a call with it",
                  c->rank);
    comm_end(c);
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t c)
{
    ENTER("ncclCommAbort");
    pthread_mutex_lock(&lock);
    if (!comm_ok(c)) {
        pthread_mutex_unlock(&lock);
        violation("ncclCommAbort of a communicator that does not exist (%p)", (void *)c);
        return ncclInvalidArgument;
    }
    check_not_queued("ncclCommAbort", c);
    c->aborted = 1;
    c->q->aborted = 1;
    pthread_cond_broadcast(&c->q->cond); /* its waits see the flag */
    comm_end(c);
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e)
{
    ENTER("ncclCommGetAsyncError");
    pthread_mutex_lock(&lock);
    int ok = comm_ok(c);
    *e = ok && c->q->aborted ? ncclRemoteError : ncclSuccess;
    pthread_mutex_unlock(&lock);
    if (!ok) {
        violation("ncclCommGetAsyncError of a communicator that does not exist (%p)", (void *)c);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* ---- collectives ---- */

/* Does collective s (every rank posted; lock held): reads every rank's
 * input, writes every rank's output, each on the rank's stream. */
static ncclResult_t compute(struct clique *q, struct slot *s)
{
    const struct op *o0 = &s->ops[0];
    int n = q->n;
    size_t es = type_size(o0->type), bytes = o0->count * es;
    size_t out_bytes = o0->kind == ALLGATHER ? bytes * (size_t)n : bytes;
    char *in[MAX_RANKS] = {0}, *out = malloc(out_bytes ? out_bytes : 1);
    ncclResult_t r = out ? ncclSuccess : ncclSystemError;
    for (int i = 0; i < n && r == ncclSuccess; i++) {
        if (o0->kind == BROADCAST && i != o0->root)
            continue;
        in[i] = malloc(bytes ? bytes : 1);
        if (!in[i])
            r = ncclSystemError;
        else if (bytes && drv.access(s->ops[i].stream, (unsigned long long)(uintptr_t)s->ops[i].send,
                                     bytes, 0, in[i], "nccl-in") != 0)
            r = ncclUnhandledCudaError;
    }
    if (r == ncclSuccess) {
        if (o0->kind == ALLREDUCE) {
            /* float32: a sum in rank order; the mean as NCCL's ncclAvg does it
             * for floats, each input multiplied by 1/n first */
            float *o = (float *)out, scale = (float)(1.0 / n);
            for (size_t e = 0; e < o0->count; e++) {
                float acc = 0;
                for (int i = 0; i < n; i++) {
                    float x = ((const float *)in[i])[e];
                    acc += o0->red == ncclAvg ? x * scale : x;
                }
                o[e] = acc;
            }
        } else if (o0->kind == BROADCAST) {
            memcpy(out, in[o0->root], bytes);
        } else {
            for (int i = 0; i < n; i++)
                memcpy(out + (size_t)i * bytes, in[i], bytes);
        }
        void *streams[MAX_RANKS];
        for (int i = 0; i < n; i++) {
            streams[i] = s->ops[i].stream;
            if (out_bytes && drv.access(s->ops[i].stream,
                                        (unsigned long long)(uintptr_t)s->ops[i].recv, out_bytes,
                                        1, out, "nccl-out") != 0)
                r = ncclUnhandledCudaError;
        }
        drv.join(streams, n);
        st.collectives++;
        int len = snprintf(st.last, sizeof st.last, "%s %s%s count %zu ranks %d devices",
                           kind_name[o0->kind],
                           o0->type == ncclFloat32 ? "float32" : o0->type == ncclUint8 ? "uint8"
                                                                                       : "other",
                           o0->kind != ALLREDUCE ? ""
                           : o0->red == ncclAvg  ? " avg"
                           : o0->red == ncclSum  ? " sum"
                                                 : " other",
                           o0->count, n);
        for (int i = 0; i < n && len > 0 && (size_t)len < sizeof st.last; i++)
            len += snprintf(st.last + len, sizeof st.last - (size_t)len, "%s%d", i ? "," : " ",
                            q->devs[i]);
    }
    for (int i = 0; i < n; i++)
        free(in[i]);
    free(out);
    return r;
}

/* Whether two ranks' calls agree. */
static int same_call(const struct op *a, const struct op *b)
{
    return a->kind == b->kind && a->count == b->count && a->type == b->type &&
           (a->kind != ALLREDUCE || a->red == b->red) && (a->kind != BROADCAST || a->root == b->root);
}

/* Runs one rank's collective: posts it, waits for the others, the last one
 * computing for all. The caller holds o->comm (inside). */
static ncclResult_t run_op(const struct op *o)
{
    struct ncclComm *c = o->comm;
    pthread_mutex_lock(&lock);
    if (!comm_ok(c)) {
        /* aborted or destroyed by another thread since the call began */
        pthread_mutex_unlock(&lock);
        return c->aborted ? ncclRemoteError : ncclInvalidArgument;
    }
    struct clique *q = c->q;
    if (!c->connected) {
        /* the first collective connects the rank: its buffers now */
        if (drv.take(q->devs[c->rank], (long long)st.cfg.buffer_bytes) != 0) {
            pthread_mutex_unlock(&lock);
            return ncclUnhandledCudaError;
        }
        c->connected = 1;
    }
    uint64_t seq = c->seq++;
    struct slot *s = &q->slot[seq % 2];
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += WAIT_S;
    int timed_out = 0;
    st.waiting++;
    /* the slot is free for this call once every rank left call seq - 2 */
    while (s->seq != seq && !c->aborted && !timed_out)
        timed_out = pthread_cond_timedwait(&q->cond, &lock, &dl) == ETIMEDOUT;
    ncclResult_t r = ncclSuccess;
    if (c->aborted || timed_out) {
        r = c->aborted ? ncclRemoteError : ncclSystemError;
    } else {
        s->ops[c->rank] = *o;
        if (++s->posted == q->n) {
            for (int i = 1; i < q->n; i++)
                if (!same_call(&s->ops[0], &s->ops[i]))
                    violation("call %llu: rank %d's %s of %zu does not match rank 0's %s of %zu",
                              (unsigned long long)seq, i, kind_name[s->ops[i].kind],
                              s->ops[i].count, kind_name[s->ops[0].kind], s->ops[0].count);
            s->result = compute(q, s);
            s->done = 1;
            pthread_cond_broadcast(&q->cond);
        }
        /* only this comm's own abort ends the wait: a peer's does not */
        while (!s->done && !c->aborted && !timed_out)
            timed_out = pthread_cond_timedwait(&q->cond, &lock, &dl) == ETIMEDOUT;
        r = s->done ? s->result : c->aborted ? ncclRemoteError : ncclSystemError;
        if (timed_out && !s->done)
            violation("rank %d (GPU %d) waited %d s for the other ranks of call %llu", c->rank,
                      q->devs[c->rank], WAIT_S, (unsigned long long)seq);
        if (++s->left == q->n) {
            /* every rank has its outcome: the slot serves call seq + 2 */
            memset(s->ops, 0, sizeof s->ops);
            s->posted = s->left = s->done = 0;
            s->seq = seq + 2;
            pthread_cond_broadcast(&q->cond);
        }
    }
    st.waiting--;
    pthread_mutex_unlock(&lock);
    return r;
}

/* Checks a call and queues it in the thread's group, or runs it alone. */
static ncclResult_t collective(const char *fn, struct op *o)
{
    pthread_mutex_lock(&lock);
    int ok = comm_ok(o->comm);
    int dev = ok ? o->comm->q->devs[o->comm->rank] : -1;
    pthread_mutex_unlock(&lock);
    if (!ok) {
        violation("%s on a communicator that does not exist (%p)", fn, (void *)o->comm);
        return ncclInvalidArgument;
    }
    int sdev = drv.stream_dev(o->stream);
    if (sdev != dev) {
        violation("%s of rank %d (GPU %d) on %s", fn, o->comm->rank, dev,
                  sdev < 0 ? "a stream that does not exist" : "a stream of another GPU");
        return ncclInvalidArgument;
    }
    if (!type_size(o->type) || (o->count && (!o->send || !o->recv)))
        return ncclInvalidArgument;
    if (o->kind == ALLREDUCE && o->type != ncclFloat32) {
        violation("%s of a type other than float32: the stand-in adds only floats", fn);
        return ncclInvalidArgument;
    }
    if (grp.depth > 0 && grp.n == MAX_GROUP)
        return ncclInvalidUsage;
    pthread_mutex_lock(&lock);
    ok = comm_ok(o->comm);
    if (ok && grp.depth > 0)
        o->comm->queued++; /* until its group ends */
    else if (ok)
        o->comm->inside++;
    pthread_mutex_unlock(&lock);
    if (!ok) {
        violation("%s on a communicator ended by another thread meanwhile (%p)", fn,
                  (void *)o->comm);
        return ncclInvalidArgument;
    }
    if (grp.depth > 0) {
        grp.ops[grp.n++] = *o;
        return ncclSuccess;
    }
    ncclResult_t r = run_op(o);
    pthread_mutex_lock(&lock);
    comm_put(o->comm, 0);
    pthread_mutex_unlock(&lock);
    return r;
}

/* The thread's group, ended: its calls' comms let go of as queued, and,
 * when `run`, run in order (each held while the group runs). */
static ncclResult_t group_finish(int run)
{
    int n = grp.n;
    grp.n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n; i++) {
        if (run)
            grp.ops[i].comm->inside++;
        comm_put(grp.ops[i].comm, 1);
    }
    pthread_mutex_unlock(&lock);
    if (!run)
        return ncclSuccess;
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < n && r == ncclSuccess; i++)
        r = run_op(&grp.ops[i]);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n; i++)
        comm_put(grp.ops[i].comm, 0);
    if (n)
        st.groups++;
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                  vdev_nccl_stream_t stream)
{
    ENTER("ncclAllReduce");
    struct op o = {ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, stream, comm};
    return collective("ncclAllReduce", &o);
}

EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  vdev_nccl_stream_t stream)
{
    ENTER("ncclBroadcast");
    struct op o = {BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, stream, comm};
    return collective("ncclBroadcast", &o);
}

EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t datatype, ncclComm_t comm,
                                  vdev_nccl_stream_t stream)
{
    ENTER("ncclAllGather");
    struct op o = {ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, stream, comm};
    return collective("ncclAllGather", &o);
}

EXPORT ncclResult_t ncclGroupStart(void)
{
    ENTER("ncclGroupStart");
    grp.depth++;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGroupEnd(void)
{
    ncclResult_t r_;
    pthread_mutex_lock(&lock);
    int fault = enter("ncclGroupEnd", &r_);
    pthread_mutex_unlock(&lock);
    if (fault) {
        /* an injected failure still ends the group, and drops its calls */
        if (grp.depth > 0 && --grp.depth == 0)
            group_finish(0);
        return r_;
    }
    if (grp.depth == 0) {
        violation("ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--grp.depth > 0)
        return ncclSuccess;
    return group_finish(1);
}

/* ---- control (stub_nccl.h) ---- */

EXPORT void vdev_stub_nccl_setup(const struct vdev_stub_nccl_config *c);
EXPORT void vdev_stub_nccl_setup(const struct vdev_stub_nccl_config *c)
{
    pthread_mutex_lock(&lock);
    memset(&st, 0, sizeof st);
    if (c)
        st.cfg = *c;
    pthread_mutex_unlock(&lock);
}

EXPORT void vdev_stub_nccl_fail(const char *fn, int nth, int result);
EXPORT void vdev_stub_nccl_fail(const char *fn, int nth, int result)
{
    pthread_mutex_lock(&lock);
    for (int f = 0; f < (int)(sizeof st.faults / sizeof st.faults[0]); f++)
        if (!st.faults[f].live) {
            snprintf(st.faults[f].name, sizeof st.faults[f].name, "%s", fn);
            st.faults[f].skip = nth;
            st.faults[f].result = result;
            st.faults[f].live = 1;
            break;
        }
    pthread_mutex_unlock(&lock);
}

EXPORT uint64_t vdev_stub_nccl_calls(const char *fn);
EXPORT uint64_t vdev_stub_nccl_calls(const char *fn)
{
    uint64_t n = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < sizeof st.callc / sizeof st.callc[0] && st.callc[i].name[0]; i++)
        if (!strcmp(st.callc[i].name, fn))
            n = st.callc[i].n;
    pthread_mutex_unlock(&lock);
    return n;
}

EXPORT void vdev_stub_nccl_stats(struct vdev_stub_nccl_stats *out);
EXPORT void vdev_stub_nccl_stats(struct vdev_stub_nccl_stats *out)
{
    pthread_mutex_lock(&lock);
    out->comms = st.comms;
    out->cliques = st.cliques;
    out->waiting = st.waiting;
    out->collectives = st.collectives;
    out->groups = st.groups;
    pthread_mutex_unlock(&lock);
}

EXPORT const char *vdev_stub_nccl_last(char *buf, size_t cap);
EXPORT const char *vdev_stub_nccl_last(char *buf, size_t cap)
{
    pthread_mutex_lock(&lock);
    snprintf(buf, cap, "%s", st.last);
    pthread_mutex_unlock(&lock);
    return buf;
}
