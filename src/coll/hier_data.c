/* hier_data.c — the data of a hierarchical call, once every worker has
 * agreed to it (hier.c): the local stages on the ring and, on the leader,
 * the MPI stage between them.
 *
 *   all-reduce: ring all-reduce (SUM) of the local ranks; MPI_Allreduce
 *               (SUM) of the leader's buffers; MEAN divides by n_global on
 *               the leader's host copy; ring broadcast from the leader.
 *   broadcast:  on the root's worker, a ring broadcast from the root's local
 *               rank; MPI_Bcast from that worker's leader; on the other
 *               workers a ring broadcast from the leader (on the root's
 *               worker a barrier, so every rank learns how MPI went).
 *   all-gather: ring all-gather of the local ranks into their slice of the
 *               output; MPI_Allgatherv of the slices; ring broadcast.
 *
 * The MPI stage. MPI reads and writes host memory only (Debian's Open MPI
 * is not CUDA-aware). On backends whose device memory the host can address
 * (sim, cpu) MPI works in place on the leader's buffers, several small ones
 * packed into one host buffer first so that one call carries them; on the
 * others (CUDA) the buffers go through the leader's host buffer with the
 * backend's copies. Before it, every local stream is waited for, so no
 * queued copy still reads or writes the buffers MPI touches; the broadcast
 * that follows is queued after it. Each element of an all-reduce is added
 * in the order the ring's and MPI's algorithms fix (never timing), and
 * every worker's leader divides the same bits, so every rank of every
 * worker gets the same bits. Last, the reductions of the host
 * (vdev_coll_hier_host_reduce: the caller's thread, outside runs). */
#define _GNU_SOURCE
#include "coll/hier_impl.h"

#include <string.h>

#define ESZ 4                         /* bytes per element: f32 and i32 */
#define PACK_ELEMS (256u * 1024u)     /* buffers packed into one call below this */

static enum vdev_status sync_local(struct hier *H)
{
    for (int q = 0; q < H->n; q++) {
        const struct vdev_ldev *d = H->comm->devs[q];
        enum vdev_status st = vdev_backend_synchronize(d->backend, d->bdev);
        if (st != VDEV_OK)
            return st;
    }
    return VDEV_OK;
}

static int host_addressable(const struct hier *H)
{
    return H->comm->devs[0]->backend->ops->host_addressable;
}

/* The leader's host buffer, at least `bytes` long. */
static enum vdev_status host_buffer(struct hier *H, uint64_t bytes)
{
    if (bytes <= H->host_cap)
        return VDEV_OK;
    void *p = vdev_realloc(H->host, bytes);
    if (!p)
        return vdev_error(VDEV_ERR_OOM, "out of host memory for %llu bytes of a collective "
                                        "across workers",
                          (unsigned long long)bytes);
    H->host = p;
    H->host_cap = bytes;
    return VDEV_OK;
}

/* Copies n bytes between the leader's device memory and the host. */
static enum vdev_status to_host(const struct hier *H, void *dst, const void *src, uint64_t n)
{
    const struct vdev_ldev *d = H->comm->devs[0];
    if (!n)
        return VDEV_OK;
    if (host_addressable(H)) {
        memcpy(dst, src, n);
        return VDEV_OK;
    }
    return d->backend->ops->copy_d2h(d->backend->ctx, d->bdev, dst, src, n);
}

static enum vdev_status to_device(const struct hier *H, void *dst, const void *src, uint64_t n)
{
    const struct vdev_ldev *d = H->comm->devs[0];
    if (!n)
        return VDEV_OK;
    if (host_addressable(H)) {
        memcpy(dst, src, n);
        return VDEV_OK;
    }
    return d->backend->ops->copy_h2d(d->backend->ctx, d->bdev, dst, src, n);
}

static void divide(float *x, uint64_t n, float by)
{
    for (uint64_t i = 0; i < n; i++)
        x[i] /= by;
}

/* A failure of the MPI stage: spends the communicator (the local ranks fail
 * at once) and sets the error. */
static enum vdev_status mpi_failed(struct hier *H, const char *what)
{
    char msg[HIER_MSG];
    char me[160];
    snprintf(msg, sizeof msg, "%s on %s: %s", what, vdev_hier_who(H, H->me, me, sizeof me),
             vdev_last_error());
    vdev_hier_spend(H, VDEV_ERR_BACKEND, msg);
    return vdev_error(VDEV_ERR_BACKEND, "%s", msg);
}

/* ---- the MPI stages (leader) ---- */

static enum vdev_status mpi_all_reduce(struct hier *H, const struct vdev_coll_call *c,
                                       const char *cn)
{
    uint64_t total = 0;
    for (int i = 0; i < c->n_bufs; i++)
        total += c->bufs[i].count;
    if (!total)
        return VDEV_OK;
    char what[256];
    snprintf(what, sizeof what, "%s of %llu floats across %d workers", cn,
             (unsigned long long)total, H->n_workers);
    enum vdev_status st = sync_local(H);
    if (st != VDEV_OK)
        return st;
    const float by = (float)H->n_global;
    int mean = c->op == VDEV_REDUCE_MEAN;
    if (host_addressable(H) && (c->n_bufs == 1 || total > PACK_ELEMS)) {
        for (int i = 0; i < c->n_bufs; i++) { /* in place */
            const struct vdev_coll_buf *b = &c->bufs[i];
            if (!b->count)
                continue;
            if (vdev_mpi_allreduce(H->mpi, b->data, b->count, VDEV_MPI_F32, VDEV_MPI_SUM, what) !=
                VDEV_OK)
                return mpi_failed(H, what);
            if (mean)
                divide(b->data, b->count, by);
        }
        return VDEV_OK;
    }
    /* packed into the host buffer */
    if ((st = host_buffer(H, total * ESZ)) != VDEV_OK)
        return st;
    float *h = H->host;
    uint64_t at = 0;
    for (int i = 0; i < c->n_bufs; i++) {
        if ((st = to_host(H, h + at, c->bufs[i].data, c->bufs[i].count * ESZ)) != VDEV_OK)
            return st;
        at += c->bufs[i].count;
    }
    if (vdev_mpi_allreduce(H->mpi, h, total, VDEV_MPI_F32, VDEV_MPI_SUM, what) != VDEV_OK)
        return mpi_failed(H, what);
    if (mean)
        divide(h, total, by);
    at = 0;
    for (int i = 0; i < c->n_bufs; i++) {
        if ((st = to_device(H, c->bufs[i].data, h + at, c->bufs[i].count * ESZ)) != VDEV_OK)
            return st;
        at += c->bufs[i].count;
    }
    return VDEV_OK;
}

static enum vdev_status mpi_broadcast(struct hier *H, const struct vdev_coll_call *c, int owner,
                                      const char *cn)
{
    uint64_t total = 0;
    for (int i = 0; i < c->n_bufs; i++)
        total += c->bufs[i].count;
    if (!total)
        return VDEV_OK;
    char what[256];
    snprintf(what, sizeof what, "%s of %llu elements from worker %d across %d workers", cn,
             (unsigned long long)total, owner, H->n_workers);
    enum vdev_status st = sync_local(H);
    if (st != VDEV_OK)
        return st;
    if (host_addressable(H) && (c->n_bufs == 1 || total > PACK_ELEMS)) {
        for (int i = 0; i < c->n_bufs; i++)
            if (c->bufs[i].count && vdev_mpi_bcast(H->mpi, c->bufs[i].data, c->bufs[i].count * ESZ,
                                                   owner, what) != VDEV_OK)
                return mpi_failed(H, what);
        return VDEV_OK;
    }
    if ((st = host_buffer(H, total * ESZ)) != VDEV_OK)
        return st;
    char *h = H->host;
    uint64_t at = 0;
    for (int i = 0; H->me == owner && i < c->n_bufs; i++) {
        if ((st = to_host(H, h + at, c->bufs[i].data, c->bufs[i].count * ESZ)) != VDEV_OK)
            return st;
        at += c->bufs[i].count * ESZ;
    }
    if (vdev_mpi_bcast(H->mpi, h, total * ESZ, owner, what) != VDEV_OK)
        return mpi_failed(H, what);
    at = 0;
    for (int i = 0; H->me != owner && i < c->n_bufs; i++) {
        if ((st = to_device(H, c->bufs[i].data, h + at, c->bufs[i].count * ESZ)) != VDEV_OK)
            return st;
        at += c->bufs[i].count * ESZ;
    }
    return VDEV_OK;
}

static enum vdev_status mpi_all_gather(struct hier *H, const struct vdev_coll_call *c,
                                       const char *cn)
{
    uint64_t each = c->bufs[0].count * ESZ; /* bytes of one rank's part */
    uint64_t total = each * (uint64_t)H->n_global;
    if (!total)
        return VDEV_OK;
    uint64_t *bytes = vdev_malloc((size_t)H->n_workers * sizeof *bytes);
    if (!bytes)
        return vdev_error(VDEV_ERR_OOM, "out of host memory for an all-gather across workers");
    for (int w = 0; w < H->n_workers; w++)
        bytes[w] = each * (uint64_t)H->count[w];
    char what[256];
    snprintf(what, sizeof what, "%s of %llu bytes across %d workers", cn,
             (unsigned long long)total, H->n_workers);
    uint64_t off = each * (uint64_t)H->first[H->me];
    char *out = c->bufs[1].data;
    enum vdev_status st = sync_local(H);
    if (st == VDEV_OK && host_addressable(H)) {
        if (vdev_mpi_allgatherv(H->mpi, out + off, out, bytes, what) != VDEV_OK)
            st = mpi_failed(H, what);
    } else if (st == VDEV_OK && (st = host_buffer(H, total)) == VDEV_OK &&
               (st = to_host(H, (char *)H->host + off, out + off, bytes[H->me])) == VDEV_OK) {
        if (vdev_mpi_allgatherv(H->mpi, (char *)H->host + off, H->host, bytes, what) != VDEV_OK)
            st = mpi_failed(H, what);
        else
            st = to_device(H, out, H->host, total);
    }
    free(bytes);
    return st;
}

/* ---- a call ---- */

/* The worker holding global rank g. */
static int owner_of(const struct hier *H, int g)
{
    for (int w = 0; w < H->n_workers; w++)
        if (g >= H->first[w] && g < H->first[w] + H->count[w])
            return w;
    return 0;
}

/* Keeps the first failure of a stage (st) and its origin. */
static void keep(enum vdev_status *first, int *origin, enum vdev_status st, int o, char *msg,
                 size_t cap)
{
    if (*first != VDEV_OK || st == VDEV_OK)
        return;
    *first = st;
    *origin = o;
    vdev_strlcpy(msg, vdev_last_error(), cap);
}

enum vdev_status vdev_hier_data(struct hier *H, int rank, const struct vdev_coll_call *call,
                                int *origin)
{
    enum vdev_status st = VDEV_OK;
    int o = -1, lead = rank == 0, many = H->n > 1;
    char msg[HIER_MSG] = "", cn[128];
    pthread_mutex_lock(&H->lock);
    vdev_hier_call_name(call->kind, call->what, H->calls - 1, cn, sizeof cn);
    pthread_mutex_unlock(&H->lock);
    *origin = -1;
    switch (call->kind) {
    case VDEV_COLL_ALL_REDUCE:
        if (many)
            keep(&st, origin, vdev_hier_local(H, rank, VDEV_COLL_ALL_REDUCE, VDEV_REDUCE_SUM, 0,
                                              call->bufs, call->n_bufs, VDEV_OK, NULL, &o),
                 o, msg, sizeof msg);
        if (lead)
            keep(&st, origin, mpi_all_reduce(H, call, cn), -1, msg, sizeof msg);
        if (many)
            keep(&st, origin, vdev_hier_local(H, rank, VDEV_COLL_BROADCAST, VDEV_REDUCE_SUM, 0,
                                              call->bufs, call->n_bufs, VDEV_OK, NULL, &o),
                 o, msg, sizeof msg);
        break;
    case VDEV_COLL_BROADCAST: {
        int owner = owner_of(H, call->root), mine = owner == H->me;
        if (many && mine)
            keep(&st, origin, vdev_hier_local(H, rank, VDEV_COLL_BROADCAST, VDEV_REDUCE_SUM,
                                              call->root - H->first[owner], call->bufs,
                                              call->n_bufs, VDEV_OK, NULL, &o),
                 o, msg, sizeof msg);
        if (lead)
            keep(&st, origin, mpi_broadcast(H, call, owner, cn), -1, msg, sizeof msg);
        if (many)
            keep(&st, origin, vdev_hier_local(H, rank, mine ? VDEV_COLL_BARRIER
                                                            : VDEV_COLL_BROADCAST,
                                              VDEV_REDUCE_SUM, 0, call->bufs,
                                              mine ? 0 : call->n_bufs, VDEV_OK, NULL, &o),
                 o, msg, sizeof msg);
        break;
    }
    case VDEV_COLL_ALL_GATHER: {
        const struct vdev_coll_buf *in = &call->bufs[0], *out = &call->bufs[1];
        struct vdev_coll_buf part[2] = {*in, *out};
        uint64_t c = in->count;
        part[1].data = (char *)out->data + c * ESZ * (uint64_t)H->first[H->me];
        part[1].count = c * (uint64_t)H->n;
        part[1].ndim = 1;
        part[1].shape[0] = (int64_t)part[1].count;
        if (many) {
            keep(&st, origin, vdev_hier_local(H, rank, VDEV_COLL_ALL_GATHER, VDEV_REDUCE_SUM, 0,
                                              part, 2, VDEV_OK, NULL, &o),
                 o, msg, sizeof msg);
        } else if (c) { /* one local rank: its input is its part */
            const struct vdev_ldev *d = H->comm->devs[0];
            keep(&st, origin, d->backend->ops->copy_d2d(d->backend->ctx, d->bdev, part[1].data,
                                                        d->bdev, in->data, c * ESZ),
                 0, msg, sizeof msg);
        }
        if (lead)
            keep(&st, origin, mpi_all_gather(H, call, cn), -1, msg, sizeof msg);
        if (many)
            keep(&st, origin, vdev_hier_local(H, rank, VDEV_COLL_BROADCAST, VDEV_REDUCE_SUM, 0,
                                              &call->bufs[1], 1, VDEV_OK, NULL, &o),
                 o, msg, sizeof msg);
        break;
    }
    default:
        break;
    }
    if (st == VDEV_OK)
        return VDEV_OK;
    /* a spent communicator's error is every local rank's */
    if (vdev_hier_check_spent(H, origin) != VDEV_OK)
        return vdev_last_status();
    return vdev_error(st, "%s", msg);
}

/* ---- reductions of the host ---- */

enum vdev_status vdev_coll_hier_host_reduce(struct vdev_coll_comm *c, enum vdev_reduce_op op,
                                            float *buf, const int64_t *shape, int ndim,
                                            enum vdev_status status, const char *why,
                                            const char *what)
{
    struct hier *H = vdev_hier_of(c);
    if (!H)
        return status == VDEV_OK ? VDEV_OK : vdev_error(status, "%s", why);
    uint64_t n = ndim < 0 ? (uint64_t)shape[0] : 1; /* ndim -1: n = shape[0], unchecked */
    for (int d = 0; d < ndim; d++)
        n *= (uint64_t)shape[d];
    pthread_mutex_lock(&H->lock);
    struct hier_desc *p = &H->posted[0];
    memset(p, 0, sizeof *p);
    p->kind = HIER_KIND_HOST;
    p->op = (int32_t)op;
    p->total = status == VDEV_OK ? n : 0;
    p->n_bufs = 1;
    p->status = (int32_t)status;
    if (status == VDEV_OK && ndim >= 0) { /* the value's dtype and shape, compared */
        p->n_shapes = 1;
        p->shape[0].ndim = ndim;
        p->shape[0].dtype = VDEV_F32;
        for (int d = 0; d < ndim && d < VDEV_MAX_DIMS; d++)
            p->shape[0].dim[d] = shape[d];
        p->digest = vdev_fnv1a(VDEV_FNV1A_START, &p->shape[0], sizeof p->shape[0]);
    }
    vdev_strlcpy(p->what, what, sizeof p->what);
    if (status != VDEV_OK)
        vdev_strlcpy(p->why, why, sizeof p->why);
    pthread_mutex_unlock(&H->lock);
    /* the other local ranks take no part: only rank 0's descriptor counts */
    int go = vdev_hier_agree(H, 1, VDEV_OK, "", -1);
    if (!go) {
        pthread_mutex_lock(&H->lock);
        enum vdev_status st = vdev_error(H->verdict, "%s", H->verdict_msg);
        pthread_mutex_unlock(&H->lock);
        return st;
    }
    char w[160];
    snprintf(w, sizeof w, "%s across %d workers", what, H->n_workers);
    if (vdev_mpi_allreduce(H->mpi, buf, n, VDEV_MPI_F32, VDEV_MPI_SUM, w) != VDEV_OK) {
        char msg[HIER_MSG], me[160];
        snprintf(msg, sizeof msg, "%s on %s: %s", what, vdev_hier_who(H, H->me, me, sizeof me),
                 vdev_last_error());
        vdev_hier_spend(H, VDEV_ERR_BACKEND, msg);
        return vdev_error(VDEV_ERR_BACKEND, "%s", msg);
    }
    return VDEV_OK;
}

enum vdev_status vdev_coll_hier_host_all_reduce(struct vdev_coll_comm *c, float *buf,
                                                uint64_t n, enum vdev_status status,
                                                const char *why, const char *what)
{
    int64_t shape[1] = {(int64_t)n};
    return vdev_coll_hier_host_reduce(c, VDEV_REDUCE_SUM, buf, shape, -1, status, why, what);
}
