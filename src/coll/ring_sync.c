/* ring_sync.c — how the ranks of vdev's ring meet (see ring.h): the state of
 * calls in flight, the rendezvous where every rank posts its part and one
 * verdict is reached for all, the waits for a neighbour's progress and
 * events, and failures.
 *
 * One mutex and one condition variable guard everything; every change is
 * broadcast, and every wait rechecks its own condition, the communicator's
 * failure and a deadline (the communicator's timeout from the start of the
 * wait, on CLOCK_MONOTONIC). A rendezvous is decided by the last rank to
 * arrive, while every other rank still waits in it, so every rank reads the
 * same verdict: the lowest rank's own failure first, then any disagreement
 * between the ranks' descriptors (TensorFlow's "Shape mismatch in the
 * collective instance" for shapes). Failures that strike once data moves
 * (a backend error, an abort, a timeout) spend the communicator: every rank
 * leaves, and a failing rank waits for every stream of the call to finish
 * before it returns, so no queued copy reads a buffer its owner has freed. */
#define _GNU_SOURCE
#include "coll/ring.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

/* ---- life cycle ---- */

static void slot_recycle(struct ring *R, struct ring_slot *s)
{
    /* Events left by a failed call; after a shutdown their backend is gone
     * (and so is what they point to). */
    int live = R->comm->rgen == vdev_runtime_generation() && vdev_is_initialized();
    for (int q = 0; q < R->n; q++) {
        const struct vdev_ldev *d = R->comm->devs[q];
        if (s->ev_phase_set[q] && live)
            d->backend->ops->event_drop(d->backend->ctx, s->ev_phase[q]);
        if (s->ev_end_set[q] && live)
            d->backend->ops->event_drop(d->backend->ctx, s->ev_end[q]);
        s->ev_phase_set[q] = s->ev_end_set[q] = 0;
        s->ev_phase[q] = s->ev_end[q] = NULL;
        free(s->post[q].bufs);
        memset(&s->post[q], 0, sizeof s->post[q]);
        s->posted[q] = 0;
        s->progress[q] = 0;
    }
    s->in_use = 0;
    s->arrived = 0;
    s->verdict_ready = 0;
    s->verdict = VDEV_OK;
    s->verdict_origin = -1;
    s->verdict_msg[0] = '\0';
    s->in_schedule = 0;
    s->failed_call = 0;
}

static void slot_free(struct ring *R, struct ring_slot *s)
{
    /* A slot whose making stopped half way (the host out of memory) has no
     * events or buffers yet, and some of its arrays are missing. */
    if (s->posted && s->post && s->progress && s->ev_phase && s->ev_end && s->ev_phase_set &&
        s->ev_end_set)
        slot_recycle(R, s);
    free(s->posted);
    free(s->post);
    free(s->progress);
    free(s->ev_phase);
    free(s->ev_end);
    free(s->ev_phase_set);
    free(s->ev_end_set);
}

void vdev_ring_destroy(void *ctx)
{
    struct ring *R = ctx;
    if (!R)
        return;
    for (int k = 0; k < 2; k++)
        slot_free(R, &R->slot[k]);
    free(R->next_call);
    free(R->departed);
    pthread_cond_destroy(&R->cond);
    pthread_mutex_destroy(&R->lock);
    free(R);
}

enum vdev_status vdev_ring_create(const struct vdev_coll_comm *comm, void **ctx)
{
    struct ring *R = vdev_calloc(1, sizeof *R);
    if (!R)
        return vdev_error(VDEV_ERR_OOM, "out of host memory making a communicator");
    R->comm = comm;
    R->n = comm->n;
    size_t n = (size_t)comm->n;
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
         pthread_cond_init(&R->cond, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok) {
        free(R);
        return vdev_error(VDEV_ERR_BACKEND, "cannot make the condition variable of a "
                                            "communicator");
    }
    pthread_mutex_init(&R->lock, NULL);
    R->next_call = vdev_calloc(n, sizeof *R->next_call);
    R->departed = vdev_calloc(n, 1);
    ok = R->next_call && R->departed;
    for (int k = 0; k < 2 && ok; k++) {
        struct ring_slot *s = &R->slot[k];
        s->posted = vdev_calloc(n, 1);
        s->post = vdev_calloc(n, sizeof *s->post);
        s->progress = vdev_calloc(n, sizeof *s->progress);
        s->ev_phase = vdev_calloc(n, sizeof *s->ev_phase);
        s->ev_end = vdev_calloc(n, sizeof *s->ev_end);
        s->ev_phase_set = vdev_calloc(n, 1);
        s->ev_end_set = vdev_calloc(n, 1);
        ok = s->posted && s->post && s->progress && s->ev_phase && s->ev_end &&
             s->ev_phase_set && s->ev_end_set;
        if (ok)
            slot_recycle(R, s);
    }
    if (!ok) {
        vdev_ring_destroy(R);
        return vdev_error(VDEV_ERR_OOM, "out of host memory making a communicator of %d ranks",
                          comm->n);
    }
    R->fail_origin = -1;
    *ctx = R;
    return VDEV_OK;
}

void vdev_ring_reset(void *ctx)
{
    struct ring *R = ctx;
    pthread_mutex_lock(&R->lock);
    for (int k = 0; k < 2; k++)
        slot_recycle(R, &R->slot[k]);
    for (int q = 0; q < R->n; q++) {
        R->next_call[q] = 0;
        R->departed[q] = 0;
    }
    R->failed = 0;
    R->fail_code = VDEV_OK;
    R->fail_origin = -1;
    R->fail_msg[0] = '\0';
    pthread_mutex_unlock(&R->lock);
}

/* ---- failures ---- */

const char *vdev_ring_call_name(const struct ring_slot *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s (call %llu)", vdev_coll_kind_name(s->kind),
             (unsigned long long)s->call);
    return buf;
}

/* Spends the communicator (lock held): the first failure wins. */
VDEV_PRINTF(4, 5)
static void fail_locked(struct ring *R, enum vdev_status code, int origin, const char *fmt, ...)
{
    if (R->failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R->fail_msg, sizeof R->fail_msg, fmt, ap);
    va_end(ap);
    R->failed = 1;
    R->fail_code = code;
    R->fail_origin = origin;
    pthread_cond_broadcast(&R->cond);
}

/* The communicator's failure as this thread's error (lock held). */
static enum vdev_status failure(const struct ring *R, int *origin)
{
    *origin = R->fail_origin;
    return vdev_error(R->fail_code, "%s", R->fail_msg);
}

void vdev_ring_abort(void *ctx, int rank, enum vdev_status code, const char *why)
{
    struct ring *R = ctx;
    pthread_mutex_lock(&R->lock);
    fail_locked(R, code, rank,
                "Collective ops is aborted by: rank %d (%s): %s. The error could be from a "
                "previous operation. Free the communicator and make a new one to reset.",
                rank, R->comm->devs[rank]->name, why && *why ? why : vdev_status_str(code));
    pthread_mutex_unlock(&R->lock);
}

void vdev_ring_leave(void *ctx, int rank)
{
    struct ring *R = ctx;
    pthread_mutex_lock(&R->lock);
    R->departed[rank] = 1;
    pthread_cond_broadcast(&R->cond);
    pthread_mutex_unlock(&R->lock);
}

/* ---- waiting ---- */

static struct timespec deadline_in(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec = (time_t)(t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    return ts;
}

static uint64_t timeout_ns(const struct ring *R)
{
    return atomic_load_explicit(&R->comm->timeout_ns, memory_order_relaxed);
}

/* One wait (lock held); 1 when the deadline has passed. */
static int wait_until(struct ring *R, const struct timespec *deadline)
{
    return pthread_cond_timedwait(&R->cond, &R->lock, deadline) == ETIMEDOUT;
}

/* ---- the rendezvous ---- */

/* Copies the descriptor into the slot's post for rank (lock not needed: the
 * post is the rank's own until it is marked posted). */
static void post_fill(struct ring_post *p, const struct vdev_coll_call *c)
{
    p->kind = c->kind;
    p->op = c->op;
    p->root = c->root;
    p->status = c->status;
    vdev_strlcpy(p->why, c->why ? c->why : "", sizeof p->why);
    p->n_bufs = 0;
    p->bufs = NULL;
    p->prefix = NULL;
    if (c->status != VDEV_OK || c->n_bufs <= 0)
        return;
    size_t n = (size_t)c->n_bufs;
    void *mem = vdev_malloc(n * sizeof *p->bufs + (n + 1) * sizeof *p->prefix);
    if (!mem) {
        p->status = VDEV_ERR_OOM;
        snprintf(p->why, sizeof p->why, "out of host memory for a collective of %d buffers",
                 c->n_bufs);
        return;
    }
    p->bufs = mem;
    p->prefix = (uint64_t *)(void *)((char *)mem + n * sizeof *p->bufs);
    memcpy(p->bufs, c->bufs, n * sizeof *p->bufs);
    p->n_bufs = c->n_bufs;
    p->prefix[0] = 0;
    for (size_t i = 0; i < n; i++)
        p->prefix[i + 1] = p->prefix[i] + p->bufs[i].count;
}

static const char *op_name(enum vdev_reduce_op op) { return op == VDEV_REDUCE_MEAN ? "MEAN" : "SUM"; }

static int same_shape(const struct vdev_coll_buf *a, const struct vdev_coll_buf *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

/* The verdict of a call whose ranks have all posted (lock held; run by the
 * last rank to arrive, while the others wait). */
static void decide(struct ring *R, struct ring_slot *s)
{
    char cn[64], s1[96], s2[96];
    const struct ring_post *p0 = &s->post[0];
    s->kind = p0->kind; /* the call is named as rank 0 made it, whoever came first */
    vdev_ring_call_name(s, cn, sizeof cn);
    s->verdict = VDEV_OK;
    s->verdict_origin = -1;
    for (int q = 0; q < R->n; q++) /* a rank's own failure, the lowest rank's first */
        if (s->post[q].status != VDEV_OK) {
            s->verdict = s->post[q].status;
            s->verdict_origin = q;
            snprintf(s->verdict_msg, sizeof s->verdict_msg, "%s: rank %d (%s): %s", cn, q,
                     R->comm->devs[q]->name, s->post[q].why);
            goto done;
        }
    for (int q = 1; q < R->n; q++) {
        const struct ring_post *p = &s->post[q];
        const char *dev = R->comm->devs[q]->name;
        const char *msg = NULL;
        char buf[RING_REASON];
        if (p->kind != p0->kind) {
            snprintf(buf, sizeof buf, "rank %d (%s) called %s but rank 0 called %s", q, dev,
                     vdev_coll_kind_name(p->kind), vdev_coll_kind_name(p0->kind));
            msg = buf;
        } else if (p->kind == VDEV_COLL_ALL_REDUCE && p->op != p0->op) {
            snprintf(buf, sizeof buf, "rank %d (%s) asked for %s but rank 0 for %s", q, dev,
                     op_name(p->op), op_name(p0->op));
            msg = buf;
        } else if (p->kind == VDEV_COLL_BROADCAST && p->root != p0->root) {
            snprintf(buf, sizeof buf, "rank %d (%s) broadcasts from rank %d but rank 0 from "
                                      "rank %d",
                     q, dev, p->root, p0->root);
            msg = buf;
        } else if (p->n_bufs != p0->n_bufs) {
            snprintf(buf, sizeof buf, "rank %d (%s) passed %d tensors but rank 0 passed %d", q,
                     dev, p->n_bufs, p0->n_bufs);
            msg = buf;
        }
        if (msg) {
            s->verdict = VDEV_ERR_INVALID_ARG;
            snprintf(s->verdict_msg, sizeof s->verdict_msg,
                     "%s: %s; every rank must make the same collective calls in the same order",
                     cn, msg);
            goto done;
        }
        /* all-gather: the outputs differ with their inputs; compare the inputs */
        int nb = p->kind == VDEV_COLL_ALL_GATHER ? (p->n_bufs > 0) : p->n_bufs;
        for (int i = 0; i < nb; i++) {
            const struct vdev_coll_buf *a = &p->bufs[i], *b = &p0->bufs[i];
            if (!same_shape(a, b)) {
                s->verdict = VDEV_ERR_INVALID_ARG;
                snprintf(s->verdict_msg, sizeof s->verdict_msg,
                         "Shape mismatch in the collective instance %llu. Op at device %s "
                         "expected shape %s but another member in the group expected shape "
                         "%s. This is likely due to different input shapes at different "
                         "members of the collective op.",
                         (unsigned long long)s->call, R->comm->devs[q]->long_name,
                         vdev_shape_str(a->shape, a->ndim, s1, sizeof s1),
                         vdev_shape_str(b->shape, b->ndim, s2, sizeof s2));
                goto done;
            }
            if (a->dtype != b->dtype) {
                s->verdict = VDEV_ERR_INVALID_ARG;
                snprintf(s->verdict_msg, sizeof s->verdict_msg,
                         "%s: tensor #%d is %s on rank %d (%s) but %s on rank 0", cn, i,
                         vdev_dtype_name(a->dtype), q, dev, vdev_dtype_name(b->dtype));
                goto done;
            }
        }
    }
done:
    s->verdict_ready = 1;
    if (s->verdict == VDEV_OK)
        s->in_schedule = R->n;
}

/* Who has not arrived at slot s, and whether one of them left for good
 * (lock held): returns the first missing rank (-1: none), *gone set when it
 * departed without making this call. */
static int missing_rank(const struct ring *R, const struct ring_slot *s, int *gone)
{
    *gone = 0;
    int first = -1;
    for (int q = 0; q < R->n; q++) {
        if (s->posted[q])
            continue;
        if (R->departed[q] && R->next_call[q] <= s->call) {
            *gone = 1;
            return q;
        }
        if (first < 0)
            first = q;
    }
    return first;
}

enum vdev_status vdev_ring_enter(struct ring *R, int rank, const struct vdev_coll_call *call,
                                 struct ring_slot **slot, int *origin)
{
    *origin = -1;
    *slot = NULL;
    struct ring_post mine;
    post_fill(&mine, call);
    pthread_mutex_lock(&R->lock);
    if (R->failed) {
        enum vdev_status st = failure(R, origin);
        pthread_mutex_unlock(&R->lock);
        free(mine.bufs);
        return st;
    }
    uint64_t k = R->next_call[rank]++;
    struct ring_slot *s = &R->slot[k & 1];
    if (!s->in_use || s->call != k) {
        /* the first rank at call k: the slot's last call (k - 2) is over */
        slot_recycle(R, s);
        s->call = k;
        s->kind = call->kind;
        s->in_use = 1;
    }
    s->post[rank] = mine;
    s->posted[rank] = 1;
    if (++s->arrived == R->n)
        decide(R, s); /* R->failed is 0 here: checked above, under the same lock */
    pthread_cond_broadcast(&R->cond);

    struct timespec dl = deadline_in(timeout_ns(R));
    while (!s->verdict_ready && !R->failed) {
        int gone;
        int q = missing_rank(R, s, &gone);
        char cn[64];
        if (gone) {
            fail_locked(R, VDEV_ERR_INVALID_ARG, q,
                        "%s: rank %d (%s) finished without making this call (it made %llu); "
                        "every rank must make the same collective calls in the same order",
                        vdev_ring_call_name(s, cn, sizeof cn), q, R->comm->devs[q]->name,
                        (unsigned long long)R->next_call[q]);
            break;
        }
        if (wait_until(R, &dl) && !s->verdict_ready && !R->failed) {
            q = missing_rank(R, s, &gone);
            fail_locked(R, VDEV_ERR_BACKEND, q,
                        "Collective has timed out waiting for other workers: %s on rank %d "
                        "(%s) waited %.3g s for rank %d (%s), which did not make this call; "
                        "every rank must make the same collective calls in the same order",
                        vdev_ring_call_name(s, cn, sizeof cn), rank, R->comm->devs[rank]->name,
                        (double)timeout_ns(R) * 1e-9, q, q >= 0 ? R->comm->devs[q]->name : "?");
        }
    }
    enum vdev_status st;
    if (s->verdict_ready && s->verdict == VDEV_OK) {
        /* the verdict came first: the schedule runs (and notices a failure
         * at its next wait) */
        *slot = s;
        st = VDEV_OK;
    } else if (s->verdict_ready) {
        *origin = s->verdict_origin;
        st = vdev_error(s->verdict, "%s", s->verdict_msg);
    } else {
        st = failure(R, origin);
    }
    pthread_mutex_unlock(&R->lock);
    return st;
}

/* ---- progress and events ---- */

enum vdev_status vdev_ring_wait_progress(struct ring *R, struct ring_slot *s, int rank, int q,
                                         uint64_t want, int *origin)
{
    pthread_mutex_lock(&R->lock);
    struct timespec dl = deadline_in(timeout_ns(R));
    while (s->progress[q] < want && !R->failed) {
        if (wait_until(R, &dl) && s->progress[q] < want && !R->failed) {
            char cn[64];
            fail_locked(R, VDEV_ERR_BACKEND, q,
                        "Collective has timed out during execution: %s on rank %d (%s) waited "
                        "%.3g s for rank %d (%s) to go on",
                        vdev_ring_call_name(s, cn, sizeof cn), rank, R->comm->devs[rank]->name,
                        (double)timeout_ns(R) * 1e-9, q, R->comm->devs[q]->name);
        }
    }
    enum vdev_status st = R->failed ? failure(R, origin) : VDEV_OK;
    pthread_mutex_unlock(&R->lock);
    return st;
}

void vdev_ring_publish_progress(struct ring *R, struct ring_slot *s, int rank, uint64_t done)
{
    pthread_mutex_lock(&R->lock);
    s->progress[rank] = done;
    pthread_cond_broadcast(&R->cond);
    pthread_mutex_unlock(&R->lock);
}

enum vdev_status vdev_ring_publish_event(struct ring *R, struct ring_slot *s, int rank, int phase,
                                         int *origin)
{
    const struct vdev_ldev *d = R->comm->devs[rank];
    void *ev = NULL;
    enum vdev_status st = d->backend->ops->event_record(d->backend->ctx, d->bdev, &ev);
    if (st != VDEV_OK) {
        *origin = rank;
        return st;
    }
    pthread_mutex_lock(&R->lock);
    if (phase == 0) {
        s->ev_phase[rank] = ev;
        s->ev_phase_set[rank] = 1;
    } else {
        s->ev_end[rank] = ev;
        s->ev_end_set[rank] = 1;
    }
    pthread_cond_broadcast(&R->cond);
    pthread_mutex_unlock(&R->lock);
    return VDEV_OK;
}

enum vdev_status vdev_ring_follow_event(struct ring *R, struct ring_slot *s, int rank, int q,
                                        int phase, int *origin)
{
    unsigned char *set = phase == 0 ? s->ev_phase_set : s->ev_end_set;
    void **evs = phase == 0 ? s->ev_phase : s->ev_end;
    pthread_mutex_lock(&R->lock);
    struct timespec dl = deadline_in(timeout_ns(R));
    while (!set[q] && !R->failed) {
        if (wait_until(R, &dl) && !set[q] && !R->failed) {
            char cn[64];
            fail_locked(R, VDEV_ERR_BACKEND, q,
                        "Collective has timed out during execution: %s on rank %d (%s) waited "
                        "%.3g s for rank %d (%s) to finish its part",
                        vdev_ring_call_name(s, cn, sizeof cn), rank, R->comm->devs[rank]->name,
                        (double)timeout_ns(R) * 1e-9, q, R->comm->devs[q]->name);
        }
    }
    if (R->failed) {
        enum vdev_status st = failure(R, origin);
        pthread_mutex_unlock(&R->lock);
        return st;
    }
    /* This rank is the event's one reader: it takes it, waits on it (the
     * stream copies what it needs) and drops it. */
    void *ev = evs[q];
    set[q] = 0;
    evs[q] = NULL;
    pthread_mutex_unlock(&R->lock);
    const struct vdev_ldev *d = R->comm->devs[rank], *o = R->comm->devs[q];
    enum vdev_status st = d->backend->ops->stream_wait_event(d->backend->ctx, d->bdev, ev);
    o->backend->ops->event_drop(o->backend->ctx, ev);
    if (st != VDEV_OK)
        *origin = rank;
    return st;
}

enum vdev_status vdev_ring_leave_schedule(struct ring *R, struct ring_slot *s, int rank,
                                          enum vdev_status st, int *origin)
{
    char cn[64];
    pthread_mutex_lock(&R->lock);
    if (st != VDEV_OK && !R->failed) {
        /* this rank's own failure (a backend error): spend the communicator */
        char why[RING_REASON];
        vdev_strlcpy(why, vdev_last_error(), sizeof why);
        fail_locked(R, st, rank, "%s: rank %d (%s): %s", vdev_ring_call_name(s, cn, sizeof cn),
                    rank, R->comm->devs[rank]->name, why);
    }
    /* Every rank waits for every other here, so that all return the same
     * outcome: a rank may finish its part before another fails its own. */
    if (--s->in_schedule == 0)
        s->failed_call = R->failed;
    pthread_cond_broadcast(&R->cond);
    struct timespec dl = deadline_in(timeout_ns(R));
    while (s->in_schedule > 0) {
        if (wait_until(R, &dl) && s->in_schedule > 0) {
            /* a rank stuck in its backend: fail rather than hang */
            fail_locked(R, VDEV_ERR_BACKEND, -1,
                        "Collective has timed out during execution: %s on rank %d (%s) waited "
                        "%.3g s for the other ranks to finish",
                        vdev_ring_call_name(s, cn, sizeof cn), rank, R->comm->devs[rank]->name,
                        (double)timeout_ns(R) * 1e-9);
            break;
        }
    }
    int failed = s->in_schedule > 0 || s->failed_call;
    if (!failed) {
        pthread_mutex_unlock(&R->lock);
        *origin = -1;
        return VDEV_OK;
    }
    pthread_mutex_unlock(&R->lock);
    for (int q = 0; q < R->n; q++) {
        const struct vdev_ldev *d = R->comm->devs[q];
        vdev_backend_synchronize(d->backend, d->bdev);
    }
    /* the communicator's failure (the first one, kept until a reset) */
    pthread_mutex_lock(&R->lock);
    st = failure(R, origin);
    pthread_mutex_unlock(&R->lock);
    return st;
}
