/* replica.c — what a step function of the mirrored strategy calls through
 * its replica context (vdev/distribute.h): its id and device, its rows of a
 * global batch, TensorFlow's compute_average_loss, and the collectives of a
 * replica context (all-reduce, broadcast, apply_gradients).
 *
 * Every collective here is entered by every replica, even one whose own
 * arguments are bad or that ran out of memory making its copies: it enters
 * with its failure as its status, so every replica fails the same call with
 * the same error instead of waiting for it (coll.h). apply_gradients is the
 * all-or-nothing update: it reduces copies of the gradients, makes the
 * optimizer's slots, and only when every replica says it got that far (a
 * barrier that carries each replica's status) does any replica update its
 * variables, with an update that allocates nothing; when one says it did
 * not, every replica frees the slots this call made, so all optimizers are
 * as they were before the step. */
#define _GNU_SOURCE
#include "dist/strategy.h"

#include "coll/hier.h"
#include "nn/nn.h"

#include <string.h>

static struct vdev_handle_table contexts =
    VDEV_HANDLE_TABLE("replica context", 15, struct vdev_rep *);

vdev_replica_context_t *vdev_rep_publish(struct vdev_rep *r)
{
    uint64_t h;
    struct vdev_rep **p = vdev_handle_alloc(&contexts, &h);
    if (!p)
        return NULL;
    *p = r;
    return (vdev_replica_context_t *)(uintptr_t)h;
}

void vdev_rep_unpublish(vdev_replica_context_t *h)
{
    struct vdev_rep **p = vdev_handle_get(&contexts, h);
    if (p)
        vdev_handle_release(&contexts, p);
}

struct vdev_rep *vdev_rep_of(const vdev_replica_context_t *h, const char *fn)
{
    struct vdev_rep **p = vdev_handle_get(&contexts, h);
    if (!p) {
        vdev_error(VDEV_ERR_INVALID_ARG, h ? "%s: not a live replica context (freed already, or "
                                             "not a replica context)"
                                           : "%s: replica context is NULL",
                   fn);
        return NULL;
    }
    struct vdev_rep *r = *p;
    if (!atomic_load(&r->active) || atomic_load(&r->thread_id) != vdev_thread_id()) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: a replica context is used only inside its step "
                                         "function, on its replica's thread",
                   fn);
        return NULL;
    }
    return r;
}

VDEV_API int vdev_replica_id(const vdev_replica_context_t *ctx)
{
    const struct vdev_rep *r = vdev_rep_of(ctx, "vdev_replica_id");
    return r ? r->gid : -1;
}

VDEV_API int vdev_replica_num_replicas(const vdev_replica_context_t *ctx)
{
    const struct vdev_rep *r = vdev_rep_of(ctx, "vdev_replica_num_replicas");
    return r ? r->s->n_global : -1;
}

VDEV_API const char *vdev_replica_device(const vdev_replica_context_t *ctx)
{
    const struct vdev_rep *r = vdev_rep_of(ctx, "vdev_replica_device");
    return r ? r->dev->name : NULL;
}

VDEV_API enum vdev_status vdev_replica_return(vdev_replica_context_t *ctx, vdev_tensor_t *value)
{
    struct vdev_rep *r = vdev_rep_of(ctx, "vdev_replica_return");
    if (!r)
        return VDEV_ERR_INVALID_ARG;
    struct vdev_tens *t = NULL;
    if (value && !(t = vdev_tens_use(value, "vdev_replica_return")))
        return vdev_last_status();
    /* A reference of the strategy's own: the step's scope may free the
     * handle, the tensor lives on for the caller of the run. */
    if (t)
        vdev_tens_retain(t);
    if (r->result)
        vdev_tens_release(r->result);
    r->result = t;
    return VDEV_OK;
}

/* ---- the batch ---- */

/* Copies the bytes of src from `offset` into dst (on another device or the
 * same), counted as a copy between the devices. */
static enum vdev_status copy_rows(const struct vdev_tens *src, uint64_t offset,
                                  struct vdev_tens *dst)
{
    if (!dst->bytes)
        return VDEV_OK;
    struct vdev_ldev *s = src->dev, *d = dst->dev;
    const char *from = (const char *)src->data + offset;
    enum vdev_status st;
    if (s->backend == d->backend) {
        st = d->backend->ops->copy_d2d(d->backend->ctx, d->bdev, dst->data, s->bdev, from,
                                       dst->bytes);
        if (st == VDEV_OK && s->bdev != d->bdev)
            vdev_tens_mark_read_by(src, d); /* freed after d's stream has read it */
    } else if (!s->backend->ops->is_gpu) {
        st = d->backend->ops->copy_h2d(d->backend->ctx, d->bdev, dst->data, from, dst->bytes);
    } else if (!d->backend->ops->is_gpu) {
        st = s->backend->ops->copy_d2h(s->backend->ctx, s->bdev, dst->data, from, dst->bytes);
    } else {
        st = vdev_error(VDEV_ERR_UNSUPPORTED, "no copy path from %s to %s", s->name, d->name);
    }
    if (st == VDEV_OK)
        vdev_tens_after_read(src, d); /* src exported as host memory: the copy is done */
    if (st == VDEV_OK && s != d)
        vdev_placement_record_copy(s, d, dst->bytes);
    return st;
}

static enum vdev_status collective(struct vdev_rep *r, enum vdev_coll_kind kind,
                                   enum vdev_reduce_op op, int root, struct vdev_tens *const *t,
                                   int n, const char *fn, enum vdev_status status, const char *why);

/* Global replica g's worker, and its name in messages: "worker 1
 * (/job:worker/replica:0/task:1)", or "replica 3 on worker 1 (...)" when
 * `replica` is set. */
static int worker_of(const struct vdev_coll_comm *c, int g)
{
    int w = vdev_coll_hier_n_workers(c) - 1;
    while (w > 0 && g < vdev_coll_hier_first(c, w))
        w--;
    return w;
}

static const char *who(const struct vdev_coll_comm *c, int g, int replica, char *buf, size_t cap)
{
    int k = replica ? snprintf(buf, cap, "replica %d on ", g) : 0;
    if (k < 0 || (size_t)k >= cap)
        return buf;
    vdev_coll_hier_who(c, worker_of(c, g), buf + k, cap - (size_t)k);
    return buf;
}

/* "rows 24-35", "no rows" (from off, rows of them), into buf. */
static const char *rows_str(int64_t off, int64_t rows, char *buf, size_t cap)
{
    if (rows > 0)
        snprintf(buf, cap, "rows %lld-%lld", (long long)off, (long long)(off + rows - 1));
    else
        snprintf(buf, cap, "no rows");
    return buf;
}

/* A multi-worker strategy's check that every replica of every worker passes
 * a global batch of the same rows (vdev/multiworker.h), and that the
 * workers split it the same way (each row goes to one replica: workers
 * whose batch proportions differ would leave rows to none, or give them to
 * two): an all-gather of each replica's row count and of the rows it takes,
 * so every replica reaches the same verdict from the same numbers.
 * status/why: this replica's own failure (its batch unusable), which fails
 * the call on every replica instead. VDEV_OK, or the error
 * (VDEV_ERR_INVALID_ARG for batches of different sizes or splits). */
static enum vdev_status same_batch_everywhere(struct vdev_rep *r, int64_t B,
                                              enum vdev_status status, const char *why)
{
    const char *fn = "vdev_replica_batch";
    struct vdev_coll_comm *c = r->s->comm;
    int n = r->s->n_global;
    /* B, then the offset and count of this replica's rows, each in two
     * 31-bit halves: int32 is the one integer dtype */
    int64_t off = 0, rows = 0;
    if (status == VDEV_OK)
        vdev_strat_split(r->s, r->gid, B, &off, &rows);
    int32_t mine[6] = {(int32_t)(B & 0x7fffffff),   (int32_t)(B >> 31),
                       (int32_t)(off & 0x7fffffff), (int32_t)(off >> 31),
                       (int32_t)(rows & 0x7fffffff), (int32_t)(rows >> 31)},
            *all = NULL;
    vdev_tensor_t *in = NULL, *out = NULL;
    struct vdev_tens *t[2] = {NULL, NULL};
    char msg[512];
    if (status == VDEV_OK) {
        int64_t s_in[1] = {6}, s_out[1] = {6 * (int64_t)n};
        const char *tag = vdev_tensor_op_tag;
        vdev_tensor_op_tag = "ReplicaBatch";
        vdev_placement_push_dev(r->dev);
        in = vdev_tensor_from_host(mine, s_in, 1, VDEV_I32);
        out = in ? vdev_tensor_zeros(s_out, 1, VDEV_I32) : NULL;
        vdev_placement_pop_dev();
        vdev_tensor_op_tag = tag;
        all = out ? vdev_malloc((size_t)n * sizeof mine) : NULL;
        if (!all) {
            status = out ? vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn)
                         : vdev_last_status();
            vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
            why = msg;
        } else {
            t[0] = vdev_tens_peek(in);
            t[1] = vdev_tens_peek(out);
        }
    }
    enum vdev_status st =
        collective(r, VDEV_COLL_ALL_GATHER, VDEV_REDUCE_SUM, 0, t, status ? 0 : 2, fn, status,
                   status ? why : NULL);
    if (st == VDEV_OK)
        st = vdev_tensor_to_host(out, all, (size_t)n * sizeof mine);
#define AT(g, k) (((int64_t)all[6 * (g) + 2 * (k) + 1] << 31) | all[6 * (g) + 2 * (k)])
    if (st == VDEV_OK) {
        int64_t b0 = AT(0, 0);
        for (int g = 1; g < n; g++) {
            int64_t bg = AT(g, 0);
            if (bg == b0)
                continue;
            /* name workers; replicas where the two are on one worker */
            int one = worker_of(c, g) == worker_of(c, 0);
            char a[160], b[160];
            /* replica g (or g's worker) differs: its failure leads the
             * message everywhere; the others' are derived from it */
            if (one ? r->gid != g : worker_of(c, r->gid) != worker_of(c, g))
                r->derived = 1;
            st = vdev_error(VDEV_ERR_INVALID_ARG,
                            "%s: %s passes a global batch of %lld rows but %s one of %lld rows; "
                            "every worker passes the same global batch (each replica takes its "
                            "rows of it)",
                            fn, who(c, 0, one, a, sizeof a), (long long)b0,
                            who(c, g, one, b, sizeof b), (long long)bg);
            break;
        }
    }
    /* Each replica's rows begin where the previous replica's end: a
     * replica whose worker splits the batch another way does not. (Within
     * a worker the split is one, so the pair spans two workers.) */
    for (int g = 1; st == VDEV_OK && g < n; g++) {
        int64_t end = AT(g - 1, 1) + AT(g - 1, 2), og = AT(g, 1), rg = AT(g, 2);
        if (og == end)
            continue;
        char a[160], b[160], ra[48], rb[48];
        if (worker_of(c, r->gid) != worker_of(c, g))
            r->derived = 1;
        int64_t lo = og < end ? og : end, hi = og < end ? end : og;
        st = vdev_error(VDEV_ERR_INVALID_ARG,
                        "%s: %s takes %s of the global batch of %lld rows but %s %s: rows "
                        "%lld-%lld would go to %s; every worker splits the batch the same way "
                        "(the same vdev_strategy_set_batch_proportions on every worker, or "
                        "none)",
                        fn, who(c, g - 1, 1, a, sizeof a),
                        rows_str(AT(g - 1, 1), AT(g - 1, 2), ra, sizeof ra), (long long)AT(0, 0),
                        who(c, g, 1, b, sizeof b), rows_str(og, rg, rb, sizeof rb), (long long)lo,
                        (long long)(hi - 1), og > end ? "no replica" : "two replicas");
    }
#undef AT
    enum vdev_status keep = vdev_last_status();
    vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
    vdev_tensor_free(in);
    vdev_tensor_free(out);
    free(all);
    if (st != VDEV_OK)
        vdev_error(keep, "%s", msg);
    return st;
}

VDEV_API vdev_tensor_t *vdev_replica_batch(vdev_replica_context_t *ctx,
                                           const vdev_tensor_t *global)
{
    const char *fn = "vdev_replica_batch";
    struct vdev_rep *r = vdev_rep_of(ctx, fn);
    if (!r)
        return NULL;
    /* Across workers every replica enters the check of the batch's size,
     * even one whose batch is unusable (with that failure). */
    int across = r->s->multi && vdev_coll_hier_n_workers(r->s->comm) > 1;
    if (!global && !across)
        return NULL; /* an op chain's NULL: its error stays */
    enum vdev_status status = VDEV_OK;
    const struct vdev_tens *g = NULL;
    if (!global)
        status = vdev_last_status() != VDEV_OK
                     ? vdev_last_status()
                     : vdev_error(VDEV_ERR_INVALID_ARG, "%s: the global batch is NULL", fn);
    else if (!(g = vdev_tens_use(global, fn)))
        status = vdev_last_status();
    else if (g->ndim < 1)
        status = vdev_error(VDEV_ERR_INVALID_ARG, "%s: the global batch is 0-dimensional; its "
                                                  "rows run along axis 0",
                            fn);
    if (across) {
        char why[512];
        vdev_strlcpy(why, status ? vdev_last_error() : "", sizeof why);
        status = same_batch_everywhere(r, status ? 0 : g->shape[0], status, why);
    }
    if (status != VDEV_OK)
        return NULL;
    int64_t off, rows, shape[VDEV_MAX_DIMS];
    vdev_strat_split(r->s, r->gid, g->shape[0], &off, &rows);
    memcpy(shape, g->shape, sizeof shape);
    shape[0] = rows;
    uint64_t row_bytes = g->shape[0] ? g->bytes / (uint64_t)g->shape[0] : 0;
    const char *tag = vdev_tensor_op_tag;
    vdev_tensor_op_tag = "ReplicaBatch";
    struct vdev_tens *t = vdev_tens_new(r->dev, g->dtype, shape, g->ndim);
    vdev_tensor_op_tag = tag;
    if (!t)
        return NULL;
    if (copy_rows(g, (uint64_t)off * row_bytes, t) != VDEV_OK) {
        vdev_tens_drop(t);
        return NULL;
    }
    r->global_batch = g->shape[0];
    return vdev_tens_handle(t);
}

VDEV_API vdev_tensor_t *vdev_replica_compute_average_loss(vdev_replica_context_t *ctx,
                                                          const vdev_tensor_t *per_example_loss,
                                                          int64_t global_batch_size)
{
    const char *fn = "vdev_replica_compute_average_loss";
    struct vdev_rep *r = vdev_rep_of(ctx, fn);
    if (!r || !per_example_loss)
        return NULL;
    const struct vdev_tens *l = vdev_tens_use(per_example_loss, fn);
    if (!l)
        return NULL;
    char sh[96];
    if (l->ndim == 0) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "Invalid value passed for `per_example_loss`. Expected a tensor with at least "
                   "rank 1. Received per_example_loss of shape %s with rank 0",
                   vdev_shape_str(l->shape, l->ndim, sh, sizeof sh));
        return NULL;
    }
    if (global_batch_size < 0) {
        vdev_error(VDEV_ERR_INVALID_ARG, "global_batch_size must be positive.");
        return NULL;
    }
    int64_t gbs = global_batch_size ? global_batch_size
                  : r->global_batch ? r->global_batch
                                    : l->shape[0] * r->s->n_global;
    if (gbs == 0) { /* an empty per-replica batch under TensorFlow's default */
        vdev_error(VDEV_ERR_INVALID_ARG, "global_batch_size must be positive.");
        return NULL;
    }
    /* reduce_sum(per_example_loss) / global_batch_size, on this replica */
    return vdev_div(vdev_sum_all(per_example_loss),
                    vdev_tensor_fill(NULL, 0, VDEV_F32, (double)gbs));
}

/* ---- collectives of a replica context ---- */

/* A collective on the replica's tensors for the step function; marks the
 * replica's failure as derived when another replica caused it. A failure the
 * replica brings into the call (status, why: its own, before the collective
 * ran) keeps its own message: the call's prefix ("all-reduce (call 0): rank
 * 2 (...): ") names the culprit to the other replicas, not to itself, and the
 * run names the replica ("replica 2 (/device:GPU:2): OOM when ..."). */
static enum vdev_status collective(struct vdev_rep *r, enum vdev_coll_kind kind,
                                   enum vdev_reduce_op op, int root, struct vdev_tens *const *t,
                                   int n, const char *fn, enum vdev_status status, const char *why)
{
    int origin = -1;
    enum vdev_status st =
        vdev_coll_tensors(r->s->comm, r->id, kind, op, root, t, n, fn, status, why, &origin);
    /* another rank, or another worker (VDEV_COLL_ORIGIN_REMOTE), failed it */
    if (st != VDEV_OK && origin != -1 && origin != r->id)
        r->derived = 1;
    if (st != VDEV_OK && origin == VDEV_COLL_ORIGIN_REMOTE)
        r->remote = 1;
    if (st != VDEV_OK && status != VDEV_OK && origin == r->id && why)
        st = vdev_error(status, "%s", why);
    return st;
}

/* The tensors behind n handles for `fn`; a local failure (status, message in
 * why) for a bad list or a dead handle, or a tensor not on the replica's
 * device when `here` is set. */
static enum vdev_status local_tensors(const struct vdev_rep *r, vdev_tensor_t *const *h, int n,
                                      const char *fn, int here, struct vdev_tens **t, char *why,
                                      size_t cap)
{
    if (n < 0 || (n > 0 && !h)) {
        snprintf(why, cap, "%s: tensors is %s and n %d", fn, h ? "set" : "NULL", n);
        return VDEV_ERR_INVALID_ARG;
    }
    for (int i = 0; i < n; i++) {
        if (!h[i] && vdev_last_status() != VDEV_OK) { /* an op chain's NULL: its error */
            snprintf(why, cap, "tensor #%d: %s", i, vdev_last_error());
            return vdev_last_status();
        }
        if (!(t[i] = vdev_tens_use(h[i], fn))) {
            snprintf(why, cap, "tensor #%d: %s", i, vdev_last_error());
            return VDEV_ERR_INVALID_ARG;
        }
        if (here && t[i]->dev != r->dev) {
            snprintf(why, cap, "%s: tensor #%d is on %s, not on the replica's device %s", fn, i,
                     t[i]->dev->name, r->dev->name);
            return VDEV_ERR_INVALID_ARG;
        }
    }
    return VDEV_OK;
}

/* Copies of in[0..n) on the replica's device (the current device scope),
 * new tensors of the step's scope, into out; a local failure on error (the
 * copies made are freed). */
static enum vdev_status copies_of(struct vdev_tens *const *in, int n, vdev_tensor_t **out,
                                  struct vdev_tens **t, char *why, size_t cap)
{
    for (int i = 0; i < n; i++) {
        out[i] = vdev_identity(vdev_tens_handle(in[i]));
        if (!out[i]) {
            snprintf(why, cap, "%s", vdev_last_error());
            enum vdev_status st = vdev_last_status();
            for (int k = 0; k < i; k++) {
                vdev_tensor_free(out[k]);
                out[k] = NULL;
            }
            return st;
        }
        t[i] = vdev_tens_peek(out[i]);
    }
    return VDEV_OK;
}

/* Room for n tensors: the stack's, or the heap's (a local failure without). */
struct lists {
    struct vdev_tens *in_s[16], *cp_s[16];
    vdev_tensor_t *h_s[16];
    struct vdev_tens **in, **cp;
    vdev_tensor_t **h;
};

static enum vdev_status lists_make(struct lists *l, int n, const char *fn, char *why, size_t cap)
{
    l->in = l->in_s;
    l->cp = l->cp_s;
    l->h = l->h_s;
    if (n <= 16)
        return VDEV_OK;
    l->in = vdev_malloc((size_t)n * sizeof *l->in);
    l->cp = vdev_malloc((size_t)n * sizeof *l->cp);
    l->h = vdev_calloc((size_t)n, sizeof *l->h);
    if (l->in && l->cp && l->h)
        return VDEV_OK;
    snprintf(why, cap, "%s: out of host memory for %d tensors", fn, n);
    return VDEV_ERR_OOM;
}

static void lists_free(struct lists *l)
{
    if (l->in != l->in_s)
        free(l->in);
    if (l->cp != l->cp_s)
        free(l->cp);
    if (l->h != l->h_s)
        free(l->h);
}

VDEV_API enum vdev_status vdev_replica_all_reduce(vdev_replica_context_t *ctx,
                                                  enum vdev_reduce_op op,
                                                  vdev_tensor_t *const *in, int n,
                                                  vdev_tensor_t **out)
{
    const char *fn = "vdev_replica_all_reduce";
    struct vdev_rep *r = vdev_rep_of(ctx, fn);
    if (!r)
        return VDEV_ERR_INVALID_ARG;
    char why[512] = "";
    struct lists l;
    enum vdev_status status = lists_make(&l, n > 0 ? n : 0, fn, why, sizeof why);
    if (status == VDEV_OK && (unsigned)op >= VDEV_REDUCE_OP_COUNT) {
        status = VDEV_ERR_INVALID_ARG;
        snprintf(why, sizeof why, "%s: unknown reduce op %d", fn, (int)op);
    }
    if (status == VDEV_OK && n > 0 && !out) {
        status = VDEV_ERR_INVALID_ARG;
        snprintf(why, sizeof why, "%s: out is NULL", fn);
    }
    if (status == VDEV_OK)
        status = local_tensors(r, in, n, fn, 0, l.in, why, sizeof why);
    if (status == VDEV_OK)
        status = copies_of(l.in, n, l.h, l.cp, why, sizeof why);
    enum vdev_status st = collective(r, VDEV_COLL_ALL_REDUCE, op, 0, l.cp, status ? 0 : n, fn,
                                     status, status ? why : NULL);
    for (int i = 0; out && i < n; i++) {
        if (st != VDEV_OK && status == VDEV_OK)
            vdev_tensor_free(l.h[i]);
        out[i] = st == VDEV_OK ? l.h[i] : NULL;
    }
    lists_free(&l);
    return st;
}

VDEV_API enum vdev_status vdev_replica_broadcast(vdev_replica_context_t *ctx,
                                                 vdev_tensor_t *const *tensors, int n, int root)
{
    const char *fn = "vdev_replica_broadcast";
    struct vdev_rep *r = vdev_rep_of(ctx, fn);
    if (!r)
        return VDEV_ERR_INVALID_ARG;
    char why[512] = "";
    struct lists l;
    enum vdev_status status = lists_make(&l, n > 0 ? n : 0, fn, why, sizeof why);
    if (status == VDEV_OK && (root < 0 || root >= r->s->n_global)) {
        status = VDEV_ERR_INVALID_ARG;
        snprintf(why, sizeof why, "%s: root %d of %d replicas", fn, root, r->s->n_global);
    }
    if (status == VDEV_OK)
        status = local_tensors(r, tensors, n, fn, 1, l.in, why, sizeof why);
    enum vdev_status st = collective(r, VDEV_COLL_BROADCAST, VDEV_REDUCE_SUM, root, l.in,
                                     status ? 0 : n, fn, status, status ? why : NULL);
    lists_free(&l);
    return st;
}

VDEV_API enum vdev_status vdev_replica_apply_gradients(vdev_replica_context_t *ctx,
                                                       vdev_optimizer_t *opt,
                                                       vdev_tensor_t *const *vars,
                                                       vdev_tensor_t *const *grads, int n)
{
    const char *fn = "vdev_replica_apply_gradients";
    struct vdev_rep *r = vdev_rep_of(ctx, fn);
    if (!r)
        return VDEV_ERR_INVALID_ARG;
    char why[512] = "", s1[96], s2[96];
    struct lists l;
    struct vdev_tens *vt_s[16], **vt = vt_s;
    enum vdev_status status = lists_make(&l, n > 0 ? n : 0, fn, why, sizeof why);
    if (status == VDEV_OK && n > 16 && !(vt = vdev_malloc((size_t)n * sizeof *vt))) {
        vt = vt_s;
        status = VDEV_ERR_OOM;
        snprintf(why, sizeof why, "%s: out of host memory for %d tensors", fn, n);
    }
    /* 1. this replica's arguments */
    if (status == VDEV_OK)
        status = local_tensors(r, vars, n, fn, 1, vt, why, sizeof why);
    if (status == VDEV_OK)
        status = local_tensors(r, grads, n, fn, 0, l.in, why, sizeof why);
    for (int i = 0; status == VDEV_OK && i < n; i++) {
        if (!vt[i]->is_variable) {
            status = VDEV_ERR_INVALID_ARG;
            snprintf(why, sizeof why, "%s: tensor #%d is not a variable", fn, i);
        } else if (vt[i]->ndim != l.in[i]->ndim ||
                   memcmp(vt[i]->shape, l.in[i]->shape, sizeof vt[i]->shape) ||
                   l.in[i]->dtype != VDEV_F32) {
            status = VDEV_ERR_SHAPE;
            snprintf(why, sizeof why, "%s: gradient #%d is %s of shape%s for a variable of "
                                      "shape%s",
                     fn, i, vdev_dtype_name(l.in[i]->dtype),
                     vdev_shape_str(l.in[i]->shape, l.in[i]->ndim, s1, sizeof s1),
                     vdev_shape_str(vt[i]->shape, vt[i]->ndim, s2, sizeof s2));
        }
    }
    atomic_store_explicit(&r->apply_opt, (uintptr_t)opt, memory_order_relaxed);
    /* 2. the gradients summed over the replicas, in copies */
    if (status == VDEV_OK)
        status = copies_of(l.in, n, l.h, l.cp, why, sizeof why);
    int have_copies = status == VDEV_OK;
    enum vdev_status st = collective(r, VDEV_COLL_ALL_REDUCE, VDEV_REDUCE_SUM, 0, l.cp,
                                     status ? 0 : n, fn, status, status ? why : NULL);
    /* 3. the optimizer's slots, then every replica's word. Every replica
     * wrote its optimizer before the all-reduce, so each sees the others'
     * now and all reach the same verdict on one shared between replicas. */
    if (st == VDEV_OK) {
        for (int j = 0; j < r->s->n && status == VDEV_OK; j++)
            if (j != r->id &&
                atomic_load_explicit(&r->s->reps[j].apply_opt, memory_order_relaxed) ==
                    (uintptr_t)opt) {
                status = VDEV_ERR_INVALID_ARG;
                snprintf(why, sizeof why,
                         "%s: replicas %d and %d pass the same optimizer; each replica needs "
                         "its own (its slots hold that replica's state)",
                         fn, j < r->id ? j : r->id, j < r->id ? r->id : j);
            }
        int prepared = 0;
        if (status == VDEV_OK)
            prepared = (status = vdev_optimizer_prepare(opt, vars, n)) == VDEV_OK;
        if (status != VDEV_OK && !why[0])
            snprintf(why, sizeof why, "%s", vdev_last_error());
        st = collective(r, VDEV_COLL_BARRIER, VDEV_REDUCE_SUM, 0, NULL, 0, fn, status,
                        status ? why : NULL);
        /* another replica could not make its slots: this one frees those it
         * made (a failed prepare freed its own), so no replica's optimizer
         * keeps anything of the step */
        if (st != VDEV_OK && prepared) {
            enum vdev_status keep = vdev_last_status();
            char msg[512];
            vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
            vdev_optimizer_unprepare(opt);
            vdev_error(keep, "%s", msg);
        }
    }
    /* 4. the update: nothing left to allocate */
    if (st == VDEV_OK) {
        st = vdev_optimizer_apply(opt, vars, l.h, n);
        if (st != VDEV_OK) {
            /* a backend failure after others may have updated: say so everywhere */
            snprintf(why, sizeof why, "the update failed after the replicas agreed to it, so "
                                      "they may differ now: %s",
                     vdev_last_error());
            r->s->comm->ops->abort(r->s->comm->ctx, r->id, st, why);
            vdev_error(st, "%s: %s", fn, why);
        }
    }
    if (have_copies) {
        enum vdev_status keep = vdev_last_status();
        char msg[512];
        vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        for (int i = 0; i < n; i++)
            vdev_tensor_free(l.h[i]);
        if (st != VDEV_OK)
            vdev_error(keep, "%s", msg);
    }
    if (vt != vt_s)
        free(vt);
    lists_free(&l);
    return st;
}
