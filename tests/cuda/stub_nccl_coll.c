/* stub_nccl_coll.c — the stand-in NCCL's collectives and groups (what they
 * do and check: stub_nccl.c's opening comment). A rank's collective, queued
 * in its thread's group (a lone one is a group of its own), is handed at the
 * group's end to a work thread of the stand-in's own, as NCCL's async job
 * runs a nonblocking group: the thread posts each call in its clique's slot,
 * waits there for the other ranks (or its own comm's abort), the last rank
 * to post doing the arithmetic for all on the stand-in's memory, and then
 * gives each comm the work's outcome, which ncclCommGetAsyncError reads. */
#define _GNU_SOURCE
#include "stub_nccl_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
 * computing for all. Its work thread holds o->comm (jobs). */
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

static ncclResult_t group_finish(int run);

/* Checks a call and queues it in the thread's group (a lone call is a
 * group of its own). */
static ncclResult_t collective(const char *fn, struct op *o)
{
    pthread_mutex_lock(&lock);
    int ok = comm_ok(o->comm), ready = ok && o->comm->q && !o->comm->stuck;
    int dev = ready ? o->comm->q->devs[o->comm->rank] : -1;
    pthread_mutex_unlock(&lock);
    if (!ok) {
        violation("%s on a communicator that does not exist (%p)", fn, (void *)o->comm);
        return ncclInvalidArgument;
    }
    if (!ready) {
        violation("%s of rank %d on a communicator not ready", fn, o->comm->rank);
        return ncclInvalidUsage;
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
    if (grp.n == MAX_GROUP)
        return ncclInvalidUsage;
    pthread_mutex_lock(&lock);
    ok = comm_ok(o->comm);
    if (ok && o->comm->jobs)
        violation("%s of rank %d while its last work is still in progress (poll it first)", fn,
                  o->comm->rank);
    if (ok)
        o->comm->queued++; /* until its group ends */
    pthread_mutex_unlock(&lock);
    if (!ok) {
        violation("%s on a communicator ended by another thread meanwhile (%p)", fn,
                  (void *)o->comm);
        return ncclInvalidArgument;
    }
    grp.ops[grp.n++] = *o;
    return grp.depth > 0 ? ncclSuccess : group_finish(1);
}

struct job {
    int n;
    struct op ops[];
};

/* j's work ended with r (lock held): each comm gets the outcome and lets go
 * of the work, and aborts waiting for it go on; j is freed. */
static void job_end(struct job *j, ncclResult_t r)
{
    for (int i = 0; i < j->n; i++) {
        struct ncclComm *c = j->ops[i].comm;
        c->async = r;
        c->jobs--;
        comm_put(c);
    }
    pthread_cond_broadcast(&jobs_done);
    free(j);
}

/* A work thread: runs a group's calls in order, then gives each comm the
 * outcome (NCCL's async job for a nonblocking group). */
static void *job_main(void *arg)
{
    struct job *j = arg;
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < j->n && r == ncclSuccess; i++)
        r = run_op(&j->ops[i]);
    pthread_mutex_lock(&lock);
    st.groups++;
    job_end(j, r);
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* The thread's group, ended: its comms made ready, and its calls handed to
 * a work thread (`run`), or all of it dropped. */
static ncclResult_t group_finish(int run)
{
    int n = grp.n, ni = grp.ninit;
    grp.n = grp.ninit = 0;
    struct job *j = run && n ? malloc(sizeof *j + (size_t)n * sizeof j->ops[0]) : NULL;
    pthread_mutex_lock(&lock);
    if (run && n && !j)
        run = 0;
    for (int i = 0; i < ni; i++) {
        struct ncclComm *c = grp.inits[i];
        c->queued--;
        if (!run)
            c->async = ncclSystemError;
    }
    /* the comms of each id, together */
    for (int i = 0; i < ni && run; i++) {
        struct ncclComm *same[MAX_RANKS * 2];
        int k = 0;
        if (!grp.inits[i])
            continue;
        for (int m = i; m < ni; m++)
            if (grp.inits[m] &&
                !memcmp(&grp.inits[m]->id, &grp.inits[i]->id, sizeof(ncclUniqueId))) {
                same[k++] = grp.inits[m];
                if (m != i)
                    grp.inits[m] = NULL;
            }
        make_ready(same, k);
    }
    for (int i = 0; i < n; i++) {
        struct ncclComm *c = grp.ops[i].comm;
        if (run) {
            c->jobs++;
            c->async = ncclInProgress;
        }
        c->queued--;
        comm_put(c);
    }
    pthread_mutex_unlock(&lock);
    if (!run)
        return n && !j ? ncclSystemError : ncclSuccess;
    if (!n)
        return ni ? ncclInProgress : ncclSuccess;
    j->n = n;
    memcpy(j->ops, grp.ops, (size_t)n * sizeof j->ops[0]);
    pthread_t t;
    pthread_attr_t at;
    int e = pthread_attr_init(&at);
    if (!e)
        e = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (!e)
        e = pthread_create(&t, &at, job_main, j);
    pthread_attr_destroy(&at);
    if (e) {
        /* the work cannot start: it fails as one whose thread died would */
        pthread_mutex_lock(&lock);
        job_end(j, ncclSystemError);
        pthread_mutex_unlock(&lock);
        return ncclSystemError;
    }
    return ncclInProgress;
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
    pthread_mutex_lock(&lock);
    unsigned delay = grp.n ? st.cfg.group_end_delay_ms : 0;
    st.ending += delay > 0;
    pthread_mutex_unlock(&lock);
    if (delay) {
        struct timespec ts = {(time_t)(delay / 1000), (long)(delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&lock);
        st.ending--;
        pthread_mutex_unlock(&lock);
    }
    return group_finish(1);
}

