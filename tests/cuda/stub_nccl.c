/* stub_nccl.c — a stand-in for NCCL (libnccl.so.2), so that the CUDA
 * plugin's collectives run, and are checked, on machines without a GPU.
 * What it does and checks: stub_nccl.h. This file holds the driver's
 * functions, the communicators and the control interface; the collectives
 * and groups are in stub_nccl_coll.c (stub_nccl_internal.h between them).
 *
 * How. The functions have the prototypes of nccl_abi.h (the plugin's own
 * declarations of NCCL's interface). Device memory and streams are the
 * stand-in driver's, reached through its vdev_stub_lib_* functions, looked
 * up with dlsym in libcuda.so.1 (the stand-in, already loaded under that
 * name when the test runs).
 *
 * Communicators are nonblocking, as NCCL's are with config blocking = 0,
 * the only kind the stand-in makes (a blocking config is a violation: the
 * plugin aborts safely only with nonblocking ones). ncclCommInitRankConfig
 * gives its comm at once; the comms of one ncclGetUniqueId id are made
 * ready at the ncclGroupEnd of the group that holds them all (every rank
 * of an id in one group, on distinct GPUs: each rank's GPU is the current
 * context's), whose end returns ncclInProgress, and each comm reads
 * ncclInProgress at its first ncclCommGetAsyncError. A comm whose peers are
 * not all in its group is never ready (its init waits for them, as NCCL's
 * does) until it is aborted.
 *
 * A clique (the comms of one id) has two slots of calls in flight, used by
 * turns as the ring of src/coll/ does: a rank's k-th collective waits in
 * slot k % 2 until every rank has posted its k-th, the last to post does
 * the arithmetic for all, and the slot is free for call k + 2 once every
 * rank has left it. A wait lasts at most 60 s (a violation: a rank never
 * came). Calls are kept per thread, as NCCL keeps them, and handed at the
 * outermost ncclGroupEnd to a thread of the stand-in's own (NCCL's async
 * job), which runs them in order; ncclGroupEnd returns ncclInProgress, and
 * the comms read ncclInProgress until that work ends, then its outcome. A
 * lone collective is a group of one. ncclCommAbort sets its comm's abort
 * flag, which the comm's waits poll, waits for the comm's work to end, and
 * frees it: a rank waiting for a peer that never comes is freed by the
 * abort of its own comm only (a peer's abort does not free it: NCCL's
 * kernels would spin on). Calls on one comm must not overlap: aborting or
 * destroying a comm that has calls queued in some thread's group, not yet
 * ended, or while another thread is in ncclCommGetAsyncError with it (a
 * poll lets others run in the middle), is a violation, and so is
 * destroying one whose work is in progress. A comm's buffers are taken as
 * NCCL 2.22+ takes them: when its clique is made ready if
 * NCCL_RUNTIME_CONNECT is 0, else (NCCL's default, 1) at the comm's first
 * collective, when the ranks connect (read at every clique; NCCL reads it
 * once per process). */
#define _GNU_SOURCE
#include "stub_nccl_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the stand-in driver's functions for libraries ---- */

struct stub_nccl_drv drv;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* 0 when the stand-in driver's functions are there. */
int driver_ok(void)
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
    *(void **)&drv.current_dev = dlsym(h, "vdev_stub_lib_current_dev");
    dlclose(h);
    if (!drv.access || !drv.join || !drv.take || !drv.stream_dev || !drv.violation ||
        !drv.current_dev) {
        drv.access = NULL;
        return -1;
    }
    return 0;
}

void violation(const char *fmt, ...)
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

const char *const kind_name[] = {"allreduce", "broadcast", "allgather"};
struct stub_nccl_state st;
_Thread_local struct stub_nccl_group grp;
pthread_cond_t jobs_done = PTHREAD_COND_INITIALIZER;
static uint64_t next_id; /* ncclGetUniqueId (lock) */

/* Counts the call; 1 when a fault makes it return *r now (lock held). */
int enter(const char *fn, ncclResult_t *r)
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

size_t type_size(ncclDataType_t t)
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

/* A comm that exists (made, not ended); ready ones have c->q. */
int comm_ok(struct ncclComm *c) { return c && c->magic == COMM_MAGIC; }
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

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    ENTER("ncclGetUniqueId");
    if (!id)
        return ncclInvalidArgument;
    memset(id, 0, sizeof *id);
    pthread_mutex_lock(&lock);
    uint64_t k = ++next_id;
    pthread_mutex_unlock(&lock);
    snprintf(id->internal, sizeof id->internal, "stub-nccl-id-%d-%llu", (int)getpid(),
             (unsigned long long)k);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t *config)
{
    ENTER("ncclCommInitRankConfig");
    if (driver_ok() != 0) {
        fprintf(stderr, "stub NCCL: the stand-in driver is not loaded\n");
        return ncclUnhandledCudaError;
    }
    if (!comm || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    if (!config || config->magic != VDEV_NCCL_CONFIG_MAGIC ||
        config->version < (unsigned)VDEV_NCCL_VERSION_CODE(2, 14, 0) ||
        config->size < sizeof *config) {
        violation("ncclCommInitRankConfig of rank %d with a config not laid out as "
                  "NCCL_CONFIG_INITIALIZER's (2.14 or later)",
                  rank);
        return ncclInvalidArgument;
    }
    if (config->blocking != 0) {
        violation("ncclCommInitRankConfig of rank %d with blocking %d: a blocking communicator "
                  "cannot be aborted safely from another thread (the plugin must make them "
                  "nonblocking)",
                  rank, config->blocking);
        return ncclInvalidUsage;
    }
    if (grp.depth == 0) {
        violation("ncclCommInitRankConfig outside a group: the stand-in makes the ranks of a "
                  "process ready together at their group's end");
        return ncclInvalidUsage;
    }
    if (grp.ninit == (int)(sizeof grp.inits / sizeof grp.inits[0]))
        return ncclInvalidUsage;
    int dev = drv.current_dev();
    if (dev < 0) {
        violation("ncclCommInitRankConfig of rank %d with no current context", rank);
        return ncclUnhandledCudaError;
    }
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    *c = (struct ncclComm){.magic = COMM_MAGIC, .rank = rank, .nranks = nranks, .dev = dev,
                           .id = id, .queued = 1, .async = ncclInProgress};
    pthread_mutex_lock(&lock);
    st.comms++;
    pthread_mutex_unlock(&lock);
    grp.inits[grp.ninit++] = c;
    *comm = c;
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
    if (q && --q->alive == 0) {
        pthread_cond_destroy(&q->cond);
        free(q);
        st.cliques--;
    }
}

/* Whether anything still holds c (lock held). */
static int comm_held(const struct ncclComm *c) { return c->queued || c->jobs || c->polling; }

/* Ends comm c (lock held): freed now, or by the last call that holds it
 * (comm_put), whose use of it is then an error (magic gone). */
static void comm_end(struct ncclComm *c)
{
    c->magic = 0;
    if (!comm_held(c))
        comm_drop(c);
}

/* Drops c if it was ended and nothing holds it any more (lock held). */
void comm_put(struct ncclComm *c)
{
    if (c->magic != COMM_MAGIC && !comm_held(c))
        comm_drop(c);
}

/* Makes ready the comms of one id that a group ended (lock held): a
 * clique when all its ranks are there, on distinct GPUs, its buffers taken
 * if NCCL connects eagerly; else each comm stays not ready (stuck), or,
 * for a GPU twice or memory refused, fails. */
void make_ready(struct ncclComm **cs, int n)
{
    int nranks = cs[0]->nranks;
    int have[MAX_RANKS] = {0}, complete = n == nranks;
    for (int i = 0; i < n; i++) {
        if (cs[i]->nranks != nranks || have[cs[i]->rank]++)
            complete = 0;
        for (int j = 0; j < i; j++)
            if (cs[i]->dev == cs[j]->dev) {
                violation("ncclCommInitRankConfig with GPU %d twice (NCCL: Duplicate GPU "
                          "detected)",
                          cs[i]->dev);
                for (int k = 0; k < n; k++)
                    cs[k]->async = ncclInvalidUsage;
                return;
            }
    }
    if (!complete) {
        for (int i = 0; i < n; i++)
            cs[i]->stuck = 1;
        return;
    }
    const char *rc = getenv("NCCL_RUNTIME_CONNECT");
    int eager = rc && strtoll(rc, NULL, 0) == 0;
    int took = 0;
    for (; took < n && eager; took++)
        if (drv.take(cs[took]->dev, (long long)st.cfg.buffer_bytes) != 0)
            break;
    struct clique *q = eager && took < n ? NULL : calloc(1, sizeof *q);
    if (!q) {
        for (int i = 0; i < took; i++)
            drv.take(cs[i]->dev, -(long long)st.cfg.buffer_bytes);
        for (int i = 0; i < n; i++)
            cs[i]->async = eager && took < n ? ncclUnhandledCudaError : ncclSystemError;
        return;
    }
    q->n = n;
    q->alive = n;
    pthread_cond_init(&q->cond, NULL);
    q->slot[0].seq = 0;
    q->slot[1].seq = 1;
    for (int i = 0; i < n; i++) {
        struct ncclComm *c = cs[i];
        q->devs[c->rank] = c->dev;
        c->q = q;
        c->connected = eager;
        c->init_polls = 1; /* NCCL may still be at work at the first poll */
        c->async = ncclSuccess;
    }
    st.cliques++;
}

/* A violation when c has calls queued in a group not yet ended, or a
 * thread polling it (lock held). */
static void check_not_held(const char *fn, const struct ncclComm *c)
{
    if (c->queued)
        violation("%s of rank %d while a thread has %d call(s) on it queued in a group not yet "
                  "ended",
                  fn, c->rank, c->queued);
    if (c->polling)
        violation("%s of rank %d while another thread is in ncclCommGetAsyncError with it", fn,
                  c->rank);
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
    for (int k = 0; k < 2 && q; k++)
        if (q->slot[k].posted && !q->slot[k].done && !q->aborted)
            violation("ncclCommDestroy of rank %d while call %llu of its clique is in flight",
                      c->rank, (unsigned long long)q->slot[k].seq);
    check_not_held("ncclCommDestroy", c);
    if (c->jobs)
        violation("ncclCommDestroy of rank %d while its work is in progress", c->rank);
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
    check_not_held("ncclCommAbort", c);
    c->aborted = 1;
    if (c->q) {
        c->q->aborted = 1;
        pthread_cond_broadcast(&c->q->cond); /* its waits see the flag */
    }
    while (c->jobs) /* its work stops, as NCCL's abort waits for its kernels */
        pthread_cond_wait(&jobs_done, &lock);
    comm_end(c);
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e)
{
    ENTER("ncclCommGetAsyncError");
    pthread_mutex_lock(&lock);
    int ok = comm_ok(c);
    if (ok)
        c->polling++;
    pthread_mutex_unlock(&lock);
    if (!ok) {
        violation("ncclCommGetAsyncError of a communicator that does not exist (%p)", (void *)c);
        return ncclInvalidArgument;
    }
    sched_yield(); /* others run meanwhile: an overlapping call shows */
    pthread_mutex_lock(&lock);
    if (c->jobs || c->stuck || (c->async == ncclInProgress && !c->q))
        *e = ncclInProgress;
    else if (c->init_polls > 0 && c->init_polls--)
        *e = ncclInProgress;
    else if (c->q && c->q->aborted)
        *e = ncclRemoteError;
    else
        *e = c->async;
    c->polling--;
    comm_put(c);
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
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
    out->ending = st.ending;
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
