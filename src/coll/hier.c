/* hier.c — the hierarchical communicator (hier.h): making one across the
 * MPI processes of a job, the agreement that precedes every call, the end
 * of a strategy's run, and the operations table (vdev_coll_hier_ops).
 *
 * The agreement. Every local rank posts its descriptor (kind, op, root,
 * dtypes and shapes, or its own failure) and meets the others on the ring;
 * the leader (local rank 0) checks them as the ring checks its ranks (the
 * lowest rank's own failure first, then any difference, in TensorFlow's
 * words for shapes), then exchanges one record with every other worker and
 * decides for all from the same records: the lowest worker's failure first
 * (every worker's message reads "worker W (<task>): ..."), then a worker
 * that finished its run without making the call, then any difference
 * between the workers' calls. The local ranks meet once more and read the
 * verdict. A record that does not come by the deadline names the worker
 * that did not make the call, and spends the communicator.
 *
 * The end of a run: workers whose step is over exchange HIER_DONE records
 * with the others until every worker's is, so that a worker still in a
 * call learns that this one will not make it (its call fails at once), and
 * every worker ends the run with the same outcome. Reductions of the host
 * (vdev_coll_hier_host_reduce) are hier_data.c's. */
#define _GNU_SOURCE
#include "coll/hier_impl.h"

#include <string.h>

/* The collective's kind: "all-gather", "all-reduce of the host". */
static const char *kind_name(int kind)
{
    return kind == HIER_KIND_HOST ? "all-reduce of the host"
                                  : vdev_coll_kind_name((enum vdev_coll_kind)kind);
}

const char *vdev_hier_call_name(int kind, const char *what, uint64_t call, char *buf,
                                size_t cap)
{
    if (what && what[0])
        snprintf(buf, cap, "%s (%s, call %llu)", what, kind_name(kind),
                 (unsigned long long)call);
    else
        snprintf(buf, cap, "%s (call %llu)", kind_name(kind), (unsigned long long)call);
    return buf;
}

const char *vdev_hier_who(const struct hier *H, int w, char *buf, size_t cap)
{
    char own[64];
    snprintf(own, sizeof own, "/job:worker/replica:0/task:%d", w);
    if (!H->task[w][0]) /* its start-up failed before it knew its task */
        snprintf(buf, cap, "process %d", w);
    else
        snprintf(buf, cap, "%s %d (%s)", strcmp(H->task[w], own) ? "process" : "worker", w,
                 H->task[w]);
    return buf;
}

void vdev_hier_desc_fill(struct hier_desc *d, const struct vdev_coll_call *c)
{
    memset(d, 0, sizeof *d);
    d->kind = (int32_t)c->kind;
    d->op = (int32_t)c->op;
    d->root = c->root;
    d->n_bufs = c->n_bufs;
    d->status = (int32_t)c->status;
    vdev_strlcpy(d->what, c->what ? c->what : "", sizeof d->what);
    if (c->status != VDEV_OK) {
        vdev_strlcpy(d->why, c->why ? c->why : vdev_status_str(c->status), sizeof d->why);
        d->n_bufs = 0;
        return;
    }
    /* all-gather: the outputs differ with the ranks; compare the inputs */
    int nb = c->kind == VDEV_COLL_ALL_GATHER ? (c->n_bufs > 0) : c->n_bufs;
    uint64_t h = VDEV_FNV1A_START;
    for (int i = 0; i < nb; i++) {
        const struct vdev_coll_buf *b = &c->bufs[i];
        struct hier_shape s;
        memset(&s, 0, sizeof s);
        s.ndim = b->ndim;
        s.dtype = (int32_t)b->dtype;
        for (int k = 0; k < b->ndim && k < VDEV_MAX_DIMS; k++)
            s.dim[k] = b->shape[k];
        h = vdev_fnv1a(h, &s, sizeof s);
        d->total += b->count;
        if (d->n_shapes < HIER_SHAPES)
            d->shape[d->n_shapes++] = s;
    }
    d->digest = h;
}

/* ---- spending ---- */

void vdev_hier_spend(struct hier *H, enum vdev_status code, const char *msg)
{
    pthread_mutex_lock(&H->lock);
    int first = !H->spent;
    if (first) {
        H->spent = 1;
        H->spent_code = code;
        vdev_strlcpy(H->spent_msg, msg, sizeof H->spent_msg);
    }
    pthread_mutex_unlock(&H->lock);
    if (!first)
        return;
    vdev_mpi_world_fail(msg);
    if (H->n > 1 && H->local) /* local ranks waiting for the leader fail at once */
        H->local->ops->abort(H->local->ctx, 0, code, msg);
}

enum vdev_status vdev_hier_check_spent(struct hier *H, int *origin)
{
    pthread_mutex_lock(&H->lock);
    enum vdev_status st = VDEV_OK;
    if (H->spent)
        st = vdev_error(H->spent_code, "%s", H->spent_msg);
    pthread_mutex_unlock(&H->lock);
    if (st != VDEV_OK && origin)
        *origin = -1;
    return st;
}

enum vdev_status vdev_hier_local(struct hier *H, int rank, enum vdev_coll_kind kind,
                                 enum vdev_reduce_op op, int root,
                                 const struct vdev_coll_buf *bufs, int n_bufs,
                                 enum vdev_status status, const char *why, int *origin)
{
    /* the ring waits longer than the MPI stages it waits behind */
    atomic_store(&H->local->timeout_ns, 3 * atomic_load(&H->comm->timeout_ns));
    struct vdev_coll_call c = {.kind = kind,
                               .op = op,
                               .root = root,
                               .bufs = bufs,
                               .n_bufs = status == VDEV_OK ? n_bufs : 0,
                               .what = "collective",
                               .status = status,
                               .why = why};
    return H->local->ops->run(H->local->ctx, rank, &c, origin);
}

/* ---- verdicts ---- */

/* TensorFlow's name of a reduction op: "SUM", "MEAN". */
static const char *op_name(int op)
{
    return op == VDEV_REDUCE_SUM ? "SUM" : op == VDEV_REDUCE_MEAN ? "MEAN" : "?";
}

static int same_call(const struct hier_desc *a, const struct hier_desc *b)
{
    return a->kind == b->kind && a->op == b->op && a->root == b->root && a->n_bufs == b->n_bufs;
}

/* The shape of a buffer, "[8,16]", into buf. */
static const char *shape_str(const struct hier_shape *s, char *buf, size_t cap)
{
    return vdev_shape_str(s->dim, s->ndim, buf, cap);
}

/* The first differing shape of b against a, into the TensorFlow message
 * (sb/sa), at the device or worker `where`. Returns 0 when the shapes a
 * record carries agree (the difference lies past them). */
static int shape_diff(const struct hier_desc *b, const struct hier_desc *a, char *sb, char *sa,
                      size_t cap)
{
    for (int i = 0; i < a->n_shapes && i < b->n_shapes; i++)
        if (memcmp(&a->shape[i], &b->shape[i], sizeof a->shape[i])) {
            shape_str(&b->shape[i], sb, cap);
            shape_str(&a->shape[i], sa, cap);
            return 1;
        }
    return 0;
}

/* A call as a mismatch names it: "vdev_replica_batch (all-gather, 2 tensors,
 * root 0)", "vdev_replica_all_reduce (all-reduce, SUM, 1 tensor, root 0)"
 * (reductions name their op, TensorFlow's ReduceOp), into buf. */
static const char *desc_str(const struct hier_desc *d, char *buf, size_t cap)
{
    const char *kind = d->kind == HIER_KIND_HOST ? "a reduction of the host"
                                                 : vdev_coll_kind_name(d->kind);
    char op[16] = "";
    if (d->kind == HIER_KIND_HOST || d->kind == VDEV_COLL_ALL_REDUCE)
        snprintf(op, sizeof op, "%s, ", op_name(d->op));
    const char *ts = d->n_bufs == 1 ? "" : "s";
    if (d->what[0])
        snprintf(buf, cap, "%s (%s, %s%d tensor%s, root %d)", d->what, kind, op, d->n_bufs, ts,
                 d->root);
    else
        snprintf(buf, cap, "%s (%s%d tensor%s, root %d)", kind, op, d->n_bufs, ts, d->root);
    return buf;
}

/* The local verdict from the local ranks' descriptors (leader, after the
 * first meeting): VDEV_OK, or the failure with its message and origin. */
static enum vdev_status local_verdict(struct hier *H, int n, const struct hier_desc *p,
                                      uint64_t call, char *msg, size_t cap, int *origin)
{
    char cn[128], s1[96], s2[96];
    vdev_hier_call_name(p[0].kind, p[0].what, call, cn, sizeof cn);
    struct vdev_ldev **devs = H->comm->devs;
    *origin = -1;
    for (int q = 0; q < n; q++)
        if (p[q].status != VDEV_OK) {
            *origin = q;
            if (p[q].kind == HIER_KIND_HOST) /* the caller's thread, not a rank */
                snprintf(msg, cap, "%s", p[q].why);
            else
                snprintf(msg, cap, "%s: its replica %d (%s): %s", cn, H->first[H->me] + q,
                         devs[q]->long_name, p[q].why);
            return (enum vdev_status)p[q].status;
        }
    for (int q = 1; q < n; q++) {
        if (!same_call(&p[q], &p[0])) {
            char cq[160], c0[160];
            snprintf(msg, cap, "%s: its replica %d (%s) called %s but its replica %d called %s; "
                               "every replica must make the same collective calls in the same "
                               "order",
                     cn, H->first[H->me] + q, devs[q]->long_name, desc_str(&p[q], cq, sizeof cq),
                     H->first[H->me], desc_str(&p[0], c0, sizeof c0));
            return VDEV_ERR_INVALID_ARG;
        }
        if (p[q].digest != p[0].digest || p[q].total != p[0].total) {
            if (!shape_diff(&p[q], &p[0], s1, s2, sizeof s1)) {
                snprintf(s1, sizeof s1, "(%llu elements)", (unsigned long long)p[q].total);
                snprintf(s2, sizeof s2, "(%llu elements)", (unsigned long long)p[0].total);
            }
            snprintf(msg, cap,
                     "Shape mismatch in the collective instance %llu. Op at device %s expected "
                     "shape %s but another member in the group expected shape %s. This is "
                     "likely due to different input shapes at different members of the "
                     "collective op.",
                     (unsigned long long)call, devs[q]->long_name, s1, s2);
            return VDEV_ERR_INVALID_ARG;
        }
    }
    return VDEV_OK;
}

/* A difference between two workers' reductions of the host
 * (vdev_strategy_reduce): their ops, or their values' dtypes and shapes
 * (as one process words them: the value of each worker's first replica).
 * 0 when the two agree, or carry no shapes (the older message applies). */
static int host_diff(const struct hier *H, int w, int w0, char *msg, size_t cap,
                     enum vdev_status *code)
{
    const struct hier_desc *b = &H->records[w].d, *a = &H->records[w0].d;
    char nb[160], na[160], sb[96], sa[96];
    if (b->op != a->op) {
        snprintf(msg, cap, "%s: %s reduces with %s but %s with %s; every worker reduces with the "
                           "same op",
                 a->what, vdev_hier_who(H, w, nb, sizeof nb), op_name(b->op),
                 vdev_hier_who(H, w0, na, sizeof na), op_name(a->op));
        *code = VDEV_ERR_INVALID_ARG;
        return 1;
    }
    if (!a->n_shapes || !b->n_shapes || !memcmp(&a->shape[0], &b->shape[0], sizeof a->shape[0]))
        return 0;
    snprintf(msg, cap, "%s: replica %d's value is %s of shape%s but replica %d's is %s of shape%s "
                       "(replica %d is on %s, replica %d on %s)",
             a->what, H->first[w], vdev_dtype_name((enum vdev_dtype)b->shape[0].dtype),
             shape_str(&b->shape[0], sb, sizeof sb), H->first[w0],
             vdev_dtype_name((enum vdev_dtype)a->shape[0].dtype),
             shape_str(&a->shape[0], sa, sizeof sa), H->first[w],
             vdev_hier_who(H, w, nb, sizeof nb), H->first[w0], vdev_hier_who(H, w0, na, sizeof na));
    *code = VDEV_ERR_SHAPE;
    return 1;
}

/* The verdict of an exchange of HIER_CALL records (every worker reaches the
 * same one from the same records); *origin: this worker's local origin for
 * its own failure, VDEV_COLL_ORIGIN_REMOTE for another's, -1 for none. */
static enum vdev_status global_verdict(struct hier *H, int local_origin, char *msg, size_t cap,
                                       int *origin)
{
    const struct hier_record *R = H->records;
    char cn[128], s1[96], s2[96], nw[160], n0[160];
    *origin = -1;
    for (int w = 0; w < H->n_workers; w++)
        if (R[w].state == HIER_CALL && R[w].d.status != VDEV_OK) {
            *origin = w == H->me ? local_origin : VDEV_COLL_ORIGIN_REMOTE;
            snprintf(msg, cap, "%s: %s", vdev_hier_who(H, w, nw, sizeof nw), R[w].d.why);
            return (enum vdev_status)R[w].d.status;
        }
    int w0 = -1; /* the first worker in a call: the one others are compared with */
    for (int w = 0; w < H->n_workers && w0 < 0; w++)
        if (R[w].state == HIER_CALL)
            w0 = w;
    vdev_hier_call_name(R[w0].d.kind, R[w0].d.what, R[w0].call, cn, sizeof cn);
    vdev_hier_who(H, w0, n0, sizeof n0);
    /* A verdict that names one worker as the one that differs is that
     * worker's own failure, and derived on every other: the end of the run
     * (vdev_coll_hier_finish_run) then leads every worker's message with it. */
    for (int w = 0; w < H->n_workers; w++) {
        if (R[w].state != HIER_DONE)
            continue;
        *origin = VDEV_COLL_ORIGIN_REMOTE;
        vdev_hier_who(H, w, nw, sizeof nw);
        if (R[w].d.status != VDEV_OK) {
            snprintf(msg, cap, "Collective ops is aborted by: %s: %s", nw, R[w].d.why);
            return (enum vdev_status)R[w].d.status;
        }
        snprintf(msg, cap, "%s finished its step without making %s, which %s made; every "
                           "worker must make the same collective calls in the same order",
                 nw, cn, n0);
        return VDEV_ERR_INVALID_ARG;
    }
    const struct hier_desc *a = &R[w0].d;
    for (int w = 0; w < H->n_workers; w++) {
        const struct hier_desc *b = &R[w].d;
        vdev_hier_who(H, w, nw, sizeof nw);
        enum vdev_status code;
        if (b->kind == HIER_KIND_HOST && a->kind == HIER_KIND_HOST &&
            host_diff(H, w, w0, msg, cap, &code)) {
            *origin = w == H->me ? -1 : VDEV_COLL_ORIGIN_REMOTE;
            return code;
        }
        if (!same_call(b, a)) {
            *origin = w == H->me ? -1 : VDEV_COLL_ORIGIN_REMOTE;
            char cb[160], ca[160];
            snprintf(msg, cap, "%s: %s called %s but %s called %s; every worker must make the "
                               "same collective calls in the same order",
                     cn, nw, desc_str(b, cb, sizeof cb), n0, desc_str(a, ca, sizeof ca));
            return VDEV_ERR_INVALID_ARG;
        }
        if (b->digest != a->digest || b->total != a->total) {
            *origin = w == H->me ? -1 : VDEV_COLL_ORIGIN_REMOTE;
            if (!shape_diff(b, a, s1, s2, sizeof s1)) {
                snprintf(s1, sizeof s1, "(%llu elements)", (unsigned long long)b->total);
                snprintf(s2, sizeof s2, "(%llu elements)", (unsigned long long)a->total);
            }
            snprintf(msg, cap,
                     "Shape mismatch in the collective instance %llu. Op at %s expected shape %s "
                     "but another member in the group expected shape %s. This is likely due to "
                     "different input shapes at different members of the collective op.",
                     (unsigned long long)R[w0].call, nw, s1, s2);
            return VDEV_ERR_INVALID_ARG;
        }
    }
    return VDEV_OK;
}

/* The exchange of this worker's record; on failure the communicator is
 * spent and the error (naming the workers that did not come) is set. */
static enum vdev_status exchange(struct hier *H, int tag, const struct hier_record *mine,
                                 const char *what)
{
    uint64_t t = atomic_load(&H->comm->timeout_ns);
    enum vdev_status st = vdev_mpi_exchange(H->mpi, tag, mine, H->records, sizeof *mine,
                                            vdev_now_ns() + t, H->arrived);
    if (st == VDEV_OK)
        return VDEV_OK;
    char msg[HIER_MSG], who[384] = "", gone[384] = "", me[160], nw[160];
    size_t k = 0, kg = 0;
    int missing = 0, left = 0;
    for (int w = 0; w < H->n_workers; w++)
        if (H->arrived[w] == 2 && kg < sizeof gone - 1)
            kg += (size_t)snprintf(gone + kg, sizeof gone - kg, "%s%s", left++ ? ", " : "",
                                   vdev_hier_who(H, w, nw, sizeof nw));
        else if (!H->arrived[w] && k < sizeof who - 1)
            k += (size_t)snprintf(who + k, sizeof who - k, "%s%s", missing++ ? ", " : "",
                                  vdev_hier_who(H, w, nw, sizeof nw));
    vdev_hier_who(H, H->me, me, sizeof me);
    if (left)
        snprintf(msg, sizeof msg,
                 "Collective failed: %s on %s waits for %s, which ended %s process%s cleanly "
                 "(exit status 0) without making this call (did %s run fewer steps than the "
                 "others?)",
                 what, me, gone, left > 1 ? "their" : "its", left > 1 ? "es" : "",
                 left > 1 ? "they" : "it");
    else if (missing)
        snprintf(msg, sizeof msg,
                 "Collective has timed out waiting for other workers: %s on %s waited %g s "
                 "(VDEV_MPI_TIMEOUT) for %s, which did not make this call (stopped, died, or "
                 "making other calls)",
                 what, me, (double)t / 1e9, who);
    else
        snprintf(msg, sizeof msg, "%s on %s: %s", what, me, vdev_last_error());
    vdev_hier_spend(H, VDEV_ERR_BACKEND, msg);
    return vdev_error(VDEV_ERR_BACKEND, "%s", msg);
}

int vdev_hier_agree(struct hier *H, int n_local, enum vdev_status local, const char *local_msg,
                    int local_origin)
{
    struct hier_record rec;
    memset(&rec, 0, sizeof rec);
    rec.state = HIER_CALL;
    pthread_mutex_lock(&H->lock);
    uint64_t call = H->calls++;
    rec.d = H->posted[0];
    enum vdev_status st = VDEV_OK;
    char msg[HIER_MSG];
    int origin = local_origin;
    if (local != VDEV_OK) {
        st = local;
        vdev_strlcpy(msg, local_msg, sizeof msg);
    } else {
        st = local_verdict(H, n_local, H->posted, call, msg, sizeof msg, &origin);
    }
    pthread_mutex_unlock(&H->lock);
    rec.call = call;
    if (st != VDEV_OK) {
        rec.d.status = (int32_t)st;
        vdev_strlcpy(rec.d.why, msg, sizeof rec.d.why);
    }
    vdev_strlcpy(rec.task, H->task[H->me], sizeof rec.task);
    char cn[128];
    vdev_hier_call_name(rec.d.kind, rec.d.what, call, cn, sizeof cn);
    enum vdev_status v;
    if (vdev_hier_check_spent(H, NULL) != VDEV_OK || exchange(H, HIER_TAG_CALL, &rec, cn) !=
                                                           VDEV_OK) {
        v = vdev_last_status();
        vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        origin = -1;
    } else {
        v = global_verdict(H, origin, msg, sizeof msg, &origin);
    }
    pthread_mutex_lock(&H->lock);
    H->verdict = v;
    H->verdict_origin = origin;
    vdev_strlcpy(H->verdict_msg, v == VDEV_OK ? "" : msg, sizeof H->verdict_msg);
    pthread_mutex_unlock(&H->lock);
    return v == VDEV_OK;
}

/* ---- the operations ---- */

static enum vdev_status hier_create(const struct vdev_coll_comm *comm, void **ctx)
{
    (void)comm;
    *ctx = NULL;
    return vdev_error(VDEV_ERR_INTERNAL, "a hierarchical communicator is made by "
                                         "vdev_coll_hier_make");
}

static enum vdev_status hier_run(void *ctx, int rank, const struct vdev_coll_call *call,
                                 int *origin)
{
    struct hier *H = ctx;
    *origin = -1;
    pthread_mutex_lock(&H->lock);
    vdev_hier_desc_fill(&H->posted[rank], call);
    pthread_mutex_unlock(&H->lock);
    /* 1. the local ranks meet */
    enum vdev_status st = VDEV_OK;
    int o = -1;
    char msg[HIER_MSG] = "";
    if (H->n > 1) {
        st = vdev_hier_local(H, rank, VDEV_COLL_BARRIER, VDEV_REDUCE_SUM, 0, NULL, 0, VDEV_OK,
                             NULL, &o);
        if (st != VDEV_OK)
            vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
    }
    /* 2. the leader agrees with the other workers */
    int go = 1;
    if (rank == 0)
        go = vdev_hier_agree(H, H->n, st, msg, o);
    /* 3. the local ranks learn the verdict */
    if (H->n > 1) {
        int o3 = -1;
        enum vdev_status st3 = vdev_hier_local(H, rank, VDEV_COLL_BARRIER, VDEV_REDUCE_SUM, 0,
                                               NULL, 0, VDEV_OK, NULL, &o3);
        if (st3 != VDEV_OK) {
            /* the ring is spent: a local failure. The leader still moves
             * the data across workers when the verdict let it. */
            char m3[HIER_MSG];
            vdev_strlcpy(m3, vdev_last_error(), sizeof m3);
            if (rank == 0 && go)
                vdev_hier_data(H, rank, call, &o);
            *origin = o3;
            return vdev_error(st3, "%s", m3);
        }
    }
    pthread_mutex_lock(&H->lock);
    enum vdev_status v = H->verdict;
    int vo = H->verdict_origin;
    vdev_strlcpy(msg, H->verdict_msg, sizeof msg);
    pthread_mutex_unlock(&H->lock);
    if (v != VDEV_OK) {
        *origin = vo;
        return vdev_error(v, "%s", msg);
    }
    if (call->kind == VDEV_COLL_BARRIER)
        return VDEV_OK;
    /* 4. the data */
    return vdev_hier_data(H, rank, call, origin);
}

static void hier_abort(void *ctx, int rank, enum vdev_status code, const char *why)
{
    struct hier *H = ctx;
    H->local->ops->abort(H->local->ctx, rank, code, why);
}

static void hier_leave(void *ctx, int rank)
{
    struct hier *H = ctx;
    if (H->local->ops->leave)
        H->local->ops->leave(H->local->ctx, rank);
}

static void hier_reset(void *ctx)
{
    struct hier *H = ctx;
    H->local->ops->reset(H->local->ctx);
    pthread_mutex_lock(&H->lock);
    if (H->spent) /* the ring stays failed with the communicator's failure */
        H->local->ops->abort(H->local->ctx, 0, H->spent_code, H->spent_msg);
    pthread_mutex_unlock(&H->lock);
}

static void hier_free(struct hier *H)
{
    if (!H)
        return;
    vdev_coll_comm_free(H->local);
    vdev_mpi_comm_free(H->mpi, H->spent);
    free(H->first);
    free(H->count);
    free(H->task);
    free(H->records);
    free(H->arrived);
    free(H->posted);
    free(H->host);
    pthread_mutex_destroy(&H->lock);
    free(H);
}

static void hier_destroy(void *ctx) { hier_free(ctx); }

static const struct vdev_coll_ops hier_ops = {
    .api_version = VDEV_COLL_API_VERSION,
    .name = "mpi",
    .create = hier_create,
    .run = hier_run,
    .abort = hier_abort,
    .leave = hier_leave,
    .reset = hier_reset,
    .destroy = hier_destroy,
};

/* ---- making one ---- */

enum vdev_status vdev_coll_hier_make(struct vdev_ldev *const *devs, int n, const char *task,
                                     int n_tasks, const char *cluster, enum vdev_status status,
                                     const char *why, struct vdev_coll_comm **out)
{
    *out = NULL;
    char mywhy[HIER_MSG];
    struct vdev_coll_comm *local = NULL;
    if (status == VDEV_OK && vdev_coll_comm_make_with(&vdev_coll_ring_ops, devs, n, &local) !=
                                 VDEV_OK) {
        status = vdev_last_status();
        vdev_strlcpy(mywhy, vdev_last_error(), sizeof mywhy);
        why = mywhy;
    }
    enum vdev_status st = vdev_mpi_world_start();
    struct hier *H = vdev_calloc(1, sizeof *H);
    struct vdev_coll_comm *c = vdev_calloc(1, sizeof *c);
    struct vdev_ldev **d = vdev_calloc((size_t)(n > 0 ? n : 1), sizeof *d);
    if (st == VDEV_OK && (!H || !c || !d))
        st = vdev_error(VDEV_ERR_OOM, "out of host memory making a communicator across workers");
    if (st != VDEV_OK) { /* nothing to tell the others with: MPI is not there */
        vdev_coll_comm_free(local);
        free(H);
        free(c);
        free(d);
        return st;
    }
    pthread_mutex_init(&H->lock, NULL);
    H->local = local;
    H->comm = c;
    H->n = n;
    st = vdev_mpi_comm_new(&H->mpi);
    if (st == VDEV_OK) {
        H->n_workers = vdev_mpi_world_size();
        H->me = vdev_mpi_world_rank();
        size_t W = (size_t)H->n_workers;
        H->first = vdev_calloc(W, sizeof *H->first);
        H->count = vdev_calloc(W, sizeof *H->count);
        H->task = vdev_calloc(W, sizeof *H->task);
        H->records = vdev_calloc(W, sizeof *H->records);
        H->arrived = vdev_calloc(W, 1);
        H->posted = vdev_calloc((size_t)(n > 0 ? n : 1), sizeof *H->posted);
        if (!H->first || !H->count || !H->task || !H->records || !H->arrived || !H->posted)
            st = vdev_error(VDEV_ERR_OOM, "out of host memory making a communicator across "
                                          "workers");
    }
    if (st != VDEV_OK) {
        hier_free(H);
        free(c);
        free(d);
        return st;
    }
    for (int w = 0; w < H->n_workers; w++)
        snprintf(H->task[w], HIER_TASK, "rank %d", w);
    vdev_strlcpy(H->task[H->me], task ? task : "", HIER_TASK);
    /* every worker's local ranks, name and status */
    struct hier_record rec;
    memset(&rec, 0, sizeof rec);
    rec.state = HIER_MAKE;
    rec.n_local = n;
    rec.d.status = (int32_t)status;
    if (status != VDEV_OK)
        vdev_strlcpy(rec.d.why, why ? why : vdev_status_str(status), sizeof rec.d.why);
    vdev_strlcpy(rec.task, H->task[H->me], sizeof rec.task);
    vdev_strlcpy(rec.cluster, cluster ? cluster : "", sizeof rec.cluster);
    atomic_init(&c->timeout_ns, vdev_mpi_timeout_ns());
    st = exchange(H, HIER_TAG_MAKE, &rec, "making a communicator across workers");
    for (int w = 0; st == VDEV_OK && w < H->n_workers; w++)
        vdev_strlcpy(H->task[w], H->records[w].task, HIER_TASK);
    char nw[160], n0[160];
    for (int w = 0; st == VDEV_OK && w < H->n_workers; w++)
        if (H->records[w].d.status != VDEV_OK)
            st = vdev_error((enum vdev_status)H->records[w].d.status, "%s: %s",
                            vdev_hier_who(H, w, nw, sizeof nw), H->records[w].d.why);
    /* Every process must read the same cluster: two that disagree (one told
     * of a chief, the other not) would each take the roles of its own. */
    for (int w = 1; st == VDEV_OK && w < H->n_workers; w++)
        if (strcmp(H->records[w].cluster, H->records[0].cluster))
            st = vdev_error(VDEV_ERR_CONFIG,
                            "%s reads %s but %s %s; give every process the "
                            "same cluster (TF_CONFIG's \"cluster\", or VDEV_CLUSTER_CONFIG)",
                            vdev_hier_who(H, w, nw, sizeof nw), H->records[w].cluster,
                            vdev_hier_who(H, 0, n0, sizeof n0), H->records[0].cluster);
    /* Every process has every task's name now, so every process reaches the
     * same verdict on these two: one process per task, each task once (two
     * processes given the same TF_CONFIG would both be the chief). */
    if (st == VDEV_OK && n_tasks > 0 && H->n_workers != n_tasks)
        st = vdev_error(VDEV_ERR_CONFIG,
                        "the job has %d process%s, the cluster %d task%s; launch one process "
                        "per task",
                        H->n_workers, H->n_workers == 1 ? "" : "es", n_tasks,
                        n_tasks == 1 ? "" : "s");
    /* Replica 0 (a broadcast's root 0, whose values are the chief's in
     * TensorFlow) is rank 0's: the chief must be that process. */
    for (int w = 1; st == VDEV_OK && w < H->n_workers; w++)
        if (!strncmp(H->task[w], "/job:chief/", 11))
            st = vdev_error(VDEV_ERR_CONFIG,
                            "the chief (%s) is MPI rank %d; replica 0, whose values a "
                            "broadcast from root 0 gives every replica, is rank 0's: launch the "
                            "chief as rank 0 (first in the TF_CONFIG order, or give no task: "
                            "rank 0 is then the chief)",
                            H->task[w], w);
    for (int w = 1; st == VDEV_OK && w < H->n_workers; w++)
        for (int v = 0; v < w; v++)
            if (!strcmp(H->task[v], H->task[w])) {
                st = vdev_error(VDEV_ERR_CONFIG,
                                "two processes are %s (ranks %d and %d); give each process its "
                                "own task (TF_CONFIG's \"task\", or none: rank r is the r-th "
                                "task)",
                                H->task[w], v, w);
                break;
            }
    /* Without a chief task, worker 0 is the chief (TensorFlow's rule), so it
     * must be rank 0 for the same reason. */
    int has_chief = 0;
    for (int w = 0; w < H->n_workers; w++)
        has_chief |= !strncmp(H->task[w], "/job:chief/", 11);
    for (int w = 1; st == VDEV_OK && !has_chief && w < H->n_workers; w++)
        if (!strcmp(H->task[w], "/job:worker/replica:0/task:0"))
            st = vdev_error(VDEV_ERR_CONFIG,
                            "worker 0 (%s), the chief of a cluster without a chief task, is MPI "
                            "rank %d; replica 0, whose values a broadcast from root 0 gives every "
                            "replica, is rank 0's: launch worker 0 as rank 0 (first in the "
                            "TF_CONFIG order, or give no task: rank 0 is then worker 0)",
                            H->task[w], w);
    if (st != VDEV_OK) {
        hier_free(H);
        free(c);
        free(d);
        return st;
    }
    int g = 0;
    for (int w = 0; w < H->n_workers; w++) {
        H->first[w] = g;
        H->count[w] = H->records[w].n_local;
        g += H->count[w];
    }
    H->n_global = g;
    memcpy(d, devs, (size_t)n * sizeof *d);
    c->ops = &hier_ops;
    c->ctx = H;
    c->n = n;
    c->n_global = g;
    c->first = H->first[H->me];
    c->devs = d;
    c->rgen = vdev_runtime_generation();
    *out = c;
    return VDEV_OK;
}

/* ---- queries ---- */

struct hier *vdev_hier_of(const struct vdev_coll_comm *c)
{
    return c && c->ops == &hier_ops ? c->ctx : NULL;
}

int vdev_coll_hier_n_workers(const struct vdev_coll_comm *c)
{
    struct hier *H = vdev_hier_of(c);
    return H ? H->n_workers : 1;
}

int vdev_coll_hier_worker(const struct vdev_coll_comm *c)
{
    struct hier *H = vdev_hier_of(c);
    return H ? H->me : 0;
}

int vdev_coll_hier_first(const struct vdev_coll_comm *c, int w)
{
    struct hier *H = vdev_hier_of(c);
    return H ? H->first[w] : 0;
}

int vdev_coll_hier_count(const struct vdev_coll_comm *c, int w)
{
    struct hier *H = vdev_hier_of(c);
    return H ? H->count[w] : c->n;
}

const char *vdev_coll_hier_task(const struct vdev_coll_comm *c, int w)
{
    struct hier *H = vdev_hier_of(c);
    return H ? H->task[w] : "";
}

const char *vdev_coll_hier_who(const struct vdev_coll_comm *c, int w, char *buf, size_t cap)
{
    struct hier *H = vdev_hier_of(c);
    if (!H)
        snprintf(buf, cap, "worker %d", w);
    return H ? vdev_hier_who(H, w, buf, cap) : buf;
}

/* ---- the end of a run ---- */

enum vdev_status vdev_coll_hier_finish_run(struct vdev_coll_comm *c, enum vdev_status st,
                                           int derived, const char *msg)
{
    struct hier *H = vdev_hier_of(c);
    if (!H)
        return st == VDEV_OK ? VDEV_OK : vdev_error(st, "%s", msg);
    struct hier_record rec;
    memset(&rec, 0, sizeof rec);
    rec.state = HIER_DONE;
    rec.derived = derived;
    rec.d.status = (int32_t)st;
    if (st != VDEV_OK)
        vdev_strlcpy(rec.d.why, msg, sizeof rec.d.why);
    vdev_strlcpy(rec.task, H->task[H->me], sizeof rec.task);
    for (;;) {
        if (vdev_hier_check_spent(H, NULL) != VDEV_OK)
            return vdev_last_status();
        pthread_mutex_lock(&H->lock);
        rec.call = H->calls;
        pthread_mutex_unlock(&H->lock);
        if (exchange(H, HIER_TAG_CALL, &rec, "the end of a step") != VDEV_OK)
            return vdev_last_status();
        int all_done = 1;
        for (int w = 0; w < H->n_workers; w++)
            all_done &= H->records[w].state == HIER_DONE;
        if (all_done)
            break;
    }
    for (int pass = 0; pass < 2; pass++) /* own failures first, then derived ones */
        for (int w = 0; w < H->n_workers; w++) {
            const struct hier_record *r = &H->records[w];
            if (r->d.status != VDEV_OK && (pass == 1 || !r->derived))
                return vdev_error((enum vdev_status)r->d.status, "%s", r->d.why);
        }
    return VDEV_OK;
}
