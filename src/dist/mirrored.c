/* mirrored.c — tf.distribute.MirroredStrategy (vdev/distribute.h): making a
 * strategy over logical devices, its persistent replica threads, a run of a
 * step function on every replica, the reduction of per-replica values, the
 * split of a global batch, and the replicas' memory (see strategy.h for how
 * a run goes).
 *
 * A run ends when every replica's function has returned. Its outcome is the
 * first replica whose function failed on its own (a replica that failed only
 * because a collective was aborted under it is "derived" and named only when
 * no other failed); the results replicas handed back are then freed, so a
 * failed run leaves nothing behind. The replicas' results of a good run join
 * the caller's current scope, as any tensor the caller makes would.
 *
 * A multi-worker strategy (multiworker.c) is the same strategy over this
 * process's devices with a hierarchical communicator (coll/hier.h): replica
 * ids and the split of a batch count every worker's replicas, a run ends
 * with every worker agreeing on its outcome, and reduce adds across
 * workers. */
#define _GNU_SOURCE
#include "dist/strategy.h"

#include "coll/hier.h"
#include "runtime/replicas.h"

#include <math.h>
#include <string.h>

static struct vdev_handle_table strategies =
    VDEV_HANDLE_TABLE("strategy", 14, struct vdev_strat *);

static struct vdev_strat *strat_of(const vdev_strategy_t *h, const char *fn)
{
    struct vdev_strat **p = vdev_handle_get(&strategies, h);
    if (!p) {
        vdev_error(VDEV_ERR_INVALID_ARG, h ? "%s: not a live strategy (freed already, or not a "
                                             "strategy)"
                                           : "%s: strategy is NULL",
                   fn);
        return NULL;
    }
    if (vdev_runtime_refuse_forked(fn)) /* the parent's: its threads stayed there */
        return NULL;
    if ((*p)->rgen != vdev_runtime_generation() || !vdev_is_initialized()) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: the strategy belongs to a runtime that was shut "
                                         "down (made before vdev_shutdown)",
                   fn);
        return NULL;
    }
    return *p;
}

/* Pins: a call that runs while another thread frees the strategy (a run,
 * which vdev_strategy_free waits for) holds it pinned, so the free waits for
 * the call to end instead of destroying the strategy under it. The handle
 * dies under pin_lock, so a call either pins before that (and the free waits
 * for it) or finds the handle dead. */
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t unpinned = PTHREAD_COND_INITIALIZER;

/* strat_of, pinned; release with strat_unpin. */
static struct vdev_strat *strat_pin(const vdev_strategy_t *h, const char *fn)
{
    pthread_mutex_lock(&pin_lock);
    struct vdev_strat *s = strat_of(h, fn);
    if (s)
        s->pins++;
    pthread_mutex_unlock(&pin_lock);
    return s;
}

static void strat_unpin(struct vdev_strat *s)
{
    pthread_mutex_lock(&pin_lock);
    if (--s->pins == 0)
        pthread_cond_broadcast(&unpinned);
    pthread_mutex_unlock(&pin_lock);
}

/* ---- the replicas' threads ---- */

/* Runs the current step function on replica r's thread. */
static void run_replica(struct vdev_rep *r)
{
    struct vdev_strat *s = r->s;
    r->st = VDEV_OK;
    r->msg[0] = '\0';
    r->derived = 0;
    r->remote = 0;
    r->result = NULL;
    r->global_batch = 0;
    vdev_clear_error();
    vdev_placement_push_dev(r->dev);
    enum vdev_status st = vdev_scope_begin(); /* a fresh thread: cannot fail */
    if (st == VDEV_OK) {
        atomic_store(&r->active, 1);
        st = s->fn(r->ctx, s->user);
        atomic_store(&r->active, 0);
        if (st != VDEV_OK && ((unsigned)st >= VDEV_STATUS_COUNT))
            st = vdev_error(VDEV_ERR_INVALID_ARG, "the step function returned %d, not a vdev "
                                                  "status",
                            (int)st);
    }
    if (st != VDEV_OK) {
        r->st = st;
        if (vdev_last_status() == st && vdev_last_error()[0])
            vdev_strlcpy(r->msg, vdev_last_error(), sizeof r->msg);
        else
            snprintf(r->msg, sizeof r->msg, "the step function returned %s without a message",
                     vdev_status_str(st));
        /* peers waiting for this replica in a collective fail now */
        s->comm->ops->abort(s->comm->ctx, r->id, st, r->msg);
        if (r->result) {
            vdev_tens_release(r->result);
            r->result = NULL;
        }
    } else if (s->comm->ops->leave) {
        s->comm->ops->leave(s->comm->ctx, r->id);
    }
    vdev_scope_end();
    vdev_placement_pop_dev();
}

static void *replica_main(void *arg)
{
    struct vdev_rep *r = arg;
    struct vdev_strat *s = r->s;
    atomic_store(&r->thread_id, vdev_thread_id());
    uint64_t seen = 0;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->gen == seen && !s->stop)
            pthread_cond_wait(&s->go, &s->lock);
        if (s->stop)
            break;
        seen = s->gen;
        pthread_mutex_unlock(&s->lock);
        run_replica(r);
        pthread_mutex_lock(&s->lock);
        if (++s->n_done == s->n)
            pthread_cond_signal(&s->done);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- making and freeing ---- */

static void strat_destroy(struct vdev_strat *s)
{
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < s->n; i++) {
        if (s->reps[i].started)
            pthread_join(s->reps[i].thread, NULL);
        vdev_rep_unpublish(s->reps[i].ctx);
    }
    vdev_replicas_unregister(s->metrics_id);
    vdev_coll_comm_unpublish(s->comm_handle);
    vdev_coll_comm_free(s->comm);
    pthread_cond_destroy(&s->go);
    pthread_cond_destroy(&s->done);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->run_lock);
    free(s->proportions);
    free(s->reps);
    free(s);
}

int vdev_strat_default_devices(struct vdev_ldev **devs)
{
    int n = 0, total = vdev_runtime_n_devices(), cpus = vdev_runtime_n_cpus();
    int gpus = total - cpus;
    for (int i = 0; i < (gpus ? gpus : cpus) && n < VDEV_MAX_REPLICAS; i++)
        devs[n++] = vdev_runtime_device(gpus ? cpus + i : i);
    return n;
}

VDEV_API enum vdev_status vdev_mirrored_strategy_new(const char *const *devices, int n,
                                                     vdev_strategy_t **out)
{
    const char *fn = "vdev_mirrored_strategy_new";
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (n < 0 || (n > 0 && !devices))
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: devices is %s and n %d", fn,
                          devices ? "set" : "NULL", n);
    if (n > VDEV_MAX_REPLICAS)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: %d devices; a strategy has at most %d "
                                                "replicas",
                          fn, n, VDEV_MAX_REPLICAS);
    enum vdev_status st = vdev_init();
    if (st != VDEV_OK)
        return st;
    struct vdev_ldev *devs[VDEV_MAX_REPLICAS];
    if (!devices) {
        n = vdev_strat_default_devices(devs);
    } else if (n == 0) {
        return vdev_error(VDEV_ERR_INVALID_ARG, "Must specify at least one device.");
    } else {
        for (int i = 0; i < n; i++)
            if ((st = vdev_runtime_find(devices[i], &devs[i])) != VDEV_OK)
                return st;
    }
    struct vdev_coll_comm *comm;
    if ((st = vdev_coll_comm_make(devs, n, &comm)) != VDEV_OK)
        return st;
    return vdev_strat_make(devs, n, comm, out);
}

enum vdev_status vdev_strat_make(struct vdev_ldev *const *devs, int n, struct vdev_coll_comm *comm,
                                 vdev_strategy_t **out)
{
    const char *fn = "vdev_mirrored_strategy_new";
    struct vdev_strat *s = vdev_calloc(1, sizeof *s);
    if (!s || !(s->reps = vdev_calloc((size_t)n, sizeof *s->reps))) {
        free(s);
        vdev_coll_comm_free(comm);
        return vdev_error(VDEV_ERR_OOM, "out of host memory making a strategy");
    }
    s->n = n;
    s->comm = comm;
    s->n_global = comm->n_global;
    s->first = comm->first;
    s->multi = strcmp(comm->ops->name, "mpi") == 0;
    s->rgen = vdev_runtime_generation();
    pthread_mutex_init(&s->run_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->go, NULL);
    pthread_cond_init(&s->done, NULL);
    s->comm_handle = vdev_coll_comm_publish(s->comm);
    if (!s->comm_handle) {
        strat_destroy(s);
        return vdev_last_status();
    }
    for (int i = 0; i < n; i++) {
        struct vdev_rep *r = &s->reps[i];
        r->s = s;
        r->id = i;
        r->gid = s->first + i;
        r->dev = devs[i];
        if (!(r->ctx = vdev_rep_publish(r))) {
            strat_destroy(s);
            return vdev_last_status();
        }
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&s->reps[i].thread, NULL, replica_main, &s->reps[i]) != 0) {
            strat_destroy(s);
            return vdev_error(VDEV_ERR_BACKEND, "%s: cannot start the thread of replica %d", fn,
                              i);
        }
        char name[16]; /* for top -H, ps -L and debuggers */
        snprintf(name, sizeof name, "vdev-replica%u", (unsigned)i % 1000u);
        (void)pthread_setname_np(s->reps[i].thread, name);
        s->reps[i].started = 1;
    }
    uint64_t h;
    struct vdev_strat **slot = vdev_handle_alloc(&strategies, &h);
    if (!slot) {
        strat_destroy(s);
        return VDEV_ERR_OOM;
    }
    *slot = s;
    s->metrics_id = vdev_replicas_register((struct vdev_ldev **)(uintptr_t)devs, n);
    *out = (vdev_strategy_t *)(uintptr_t)h;
    return VDEV_OK;
}

const char *vdev_rep_device_name(const struct vdev_rep *r)
{
    return r->s->multi ? r->dev->long_name : r->dev->name;
}

/* 1 when the calling thread is one of s's replica threads. */
static int on_replica_thread(const struct vdev_strat *s)
{
    for (int i = 0; i < s->n; i++)
        if (atomic_load(&s->reps[i].thread_id) == vdev_thread_id())
            return 1;
    return 0;
}

VDEV_API void vdev_strategy_free(vdev_strategy_t *h)
{
    if (!h)
        return;
    struct vdev_strat **p = vdev_handle_get(&strategies, h);
    if (!p) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_strategy_free: not a live strategy (freed "
                                         "already, or not a strategy)");
        return;
    }
    struct vdev_strat *s = *p;
    if (vdev_runtime_forked_from()) {
        /* a forked child: the replica threads, streams and buffers are the
         * parent's, so the handle only goes (joining threads that are not
         * here would crash) */
        if (vdev_handle_kill(&strategies, p, (uint64_t)(uintptr_t)h))
            vdev_handle_release(&strategies, p);
        return;
    }
    if (on_replica_thread(s)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_strategy_free: called from a step function of "
                                         "the strategy");
        return;
    }
    pthread_mutex_lock(&pin_lock);
    if (!vdev_handle_kill(&strategies, p, (uint64_t)(uintptr_t)h)) {
        pthread_mutex_unlock(&pin_lock);
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_strategy_free: not a live strategy (freed "
                                         "already, or not a strategy)");
        return;
    }
    while (s->pins > 0) /* a run in flight on another thread ends first */
        pthread_cond_wait(&unpinned, &pin_lock);
    pthread_mutex_unlock(&pin_lock);
    vdev_handle_release(&strategies, p);
    strat_destroy(s);
}

VDEV_API int vdev_strategy_num_replicas_in_sync(const vdev_strategy_t *h)
{
    const struct vdev_strat *s = strat_of(h, "vdev_strategy_num_replicas_in_sync");
    return s ? s->n_global : -1;
}

VDEV_API int vdev_strategy_num_local_replicas(const vdev_strategy_t *h)
{
    const struct vdev_strat *s = strat_of(h, "vdev_strategy_num_local_replicas");
    return s ? s->n : -1;
}

VDEV_API const char *vdev_strategy_device(const vdev_strategy_t *h, int replica)
{
    const struct vdev_strat *s = strat_of(h, "vdev_strategy_device");
    if (!s)
        return NULL;
    if (replica < 0 || replica >= s->n) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_strategy_device: replica %d of %d", replica, s->n);
        return NULL;
    }
    return s->reps[replica].dev->name;
}

VDEV_API vdev_comm_t *vdev_strategy_communicator(vdev_strategy_t *h)
{
    struct vdev_strat *s = strat_of(h, "vdev_strategy_communicator");
    return s ? s->comm_handle : NULL;
}

/* ---- the global batch ---- */

/* Replaces the proportions with c (taken over; NULL: even) for the runs
 * that start from now on; the run in flight keeps its copy (run_prop). */
static void set_proportions(struct vdev_strat *s, double *c)
{
    pthread_mutex_lock(&s->lock);
    double *old = s->proportions;
    s->proportions = c;
    pthread_mutex_unlock(&s->lock);
    free(old);
}

static enum vdev_status set_batch_proportions(struct vdev_strat *s, const double *p, int n)
{
    const char *fn = "vdev_strategy_set_batch_proportions";
    /* A run splits every batch as it did when it started: a change from its
     * step function would give replicas overlapping rows. */
    if (on_replica_thread(s))
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: called from a step function of the "
                                                "strategy; a run keeps the split it started "
                                                "with (set the proportions between runs)",
                          fn);
    if (!p && n == 0) {
        set_proportions(s, NULL);
        return VDEV_OK;
    }
    if (!p || n != s->n_global)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: %d proportions for %d replicas", fn,
                          p ? n : 0, s->n_global);
    if (n > VDEV_MAX_REPLICAS)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: proportions for %d replicas; at most %d "
                                                "(an even split has no such limit)",
                          fn, n, VDEV_MAX_REPLICAS);
    for (int i = 0; i < n; i++)
        if (!(p[i] > 0) || !isfinite(p[i]))
            return vdev_error(VDEV_ERR_INVALID_ARG, "%s: proportion %d is %g; each is > 0 and "
                                                    "finite",
                              fn, i, p[i]);
    double *c = vdev_malloc((size_t)n * sizeof *c);
    if (!c)
        return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
    memcpy(c, p, (size_t)n * sizeof *c);
    set_proportions(s, c);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_strategy_set_batch_proportions(vdev_strategy_t *h,
                                                              const double *p, int n)
{
    struct vdev_strat *s = strat_pin(h, "vdev_strategy_set_batch_proportions");
    if (!s)
        return vdev_last_status(); /* invalid, or a forked child */
    enum vdev_status st = set_batch_proportions(s, p, n);
    strat_unpin(s);
    return st;
}

void vdev_strat_split(const struct vdev_strat *s, int r, int64_t B, int64_t *off, int64_t *rows)
{
    int n = s->n_global;
    if (!s->run_uneven) { /* even: the first B mod n replicas get one more row */
        int64_t q = B / n, rem = B % n;
        *off = q * r + (r < rem ? r : rem);
        *rows = q + (r < rem ? 1 : 0);
        return;
    }
    int64_t share[VDEV_MAX_REPLICAS];
    double frac[VDEV_MAX_REPLICAS], sum = 0, top = 0;
    /* Scaled by the largest first: proportions of 1e308 are finite, their
     * sum is not. */
    const double *prop = s->run_prop;
    for (int i = 0; i < n; i++)
        top = prop[i] > top ? prop[i] : top;
    for (int i = 0; i < n; i++)
        sum += prop[i] / top;
    int64_t given = 0;
    for (int i = 0; i < n; i++) {
        double want = (double)B * (prop[i] / top) / sum;
        share[i] = (int64_t)floor(want);
        if (share[i] > B)
            share[i] = B;
        frac[i] = want - (double)share[i];
        given += share[i];
    }
    /* the rows left: one each to the largest remainders, lowest id on a tie */
    while (given < B) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (frac[i] > frac[best])
                best = i;
        share[best]++;
        frac[best] = -1.0;
        given++;
    }
    while (given > B) { /* rounding cannot give more, but stay safe */
        int most = 0;
        for (int i = 1; i < n; i++)
            if (share[i] > share[most])
                most = i;
        share[most]--;
        given--;
    }
    *off = 0;
    for (int i = 0; i < r; i++)
        *off += share[i];
    *rows = share[r];
}

/* ---- runs ---- */

static enum vdev_status strategy_run(struct vdev_strat *s, vdev_replica_fn fn, void *user,
                                     vdev_tensor_t **results)
{
    if (results)
        for (int i = 0; i < s->n; i++)
            results[i] = NULL;
    if (!fn)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_strategy_run: fn is NULL");
    if (on_replica_thread(s))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_strategy_run: called from a step function "
                                                "of the same strategy");
    pthread_mutex_lock(&s->run_lock);
    s->comm->ops->reset(s->comm->ctx); /* every replica thread is idle */
    pthread_mutex_lock(&s->lock);
    s->fn = fn;
    s->user = user;
    /* this run's split: the replica threads read it, never s->proportions */
    s->run_uneven = s->proportions != NULL;
    if (s->proportions)
        memcpy(s->run_prop, s->proportions, (size_t)s->n_global * sizeof *s->run_prop);
    s->n_done = 0;
    s->gen++;
    pthread_cond_broadcast(&s->go);
    while (s->n_done < s->n)
        pthread_cond_wait(&s->done, &s->lock);
    pthread_mutex_unlock(&s->lock);

    const struct vdev_rep *bad = NULL;
    for (int i = 0; i < s->n && !bad; i++)
        if (s->reps[i].st != VDEV_OK && !s->reps[i].derived)
            bad = &s->reps[i];
    for (int i = 0; i < s->n && !bad; i++)
        if (s->reps[i].st != VDEV_OK)
            bad = &s->reps[i];
    enum vdev_status st = VDEV_OK;
    if (bad && bad->remote) /* the message leads with the worker that caused it */
        st = vdev_error(bad->st, "%s", bad->msg);
    else if (bad)
        st = vdev_error(bad->st, "replica %d (%s): %s", bad->gid, vdev_rep_device_name(bad),
                        bad->msg);
    if (s->multi) { /* every worker ends the run with the same outcome */
        char msg[512];
        vdev_strlcpy(msg, bad ? vdev_last_error() : "", sizeof msg);
        st = vdev_coll_hier_finish_run(s->comm, st, bad ? bad->derived : 0, msg);
    }
    if (st != VDEV_OK) {
        for (int i = 0; i < s->n; i++)
            if (s->reps[i].result) {
                vdev_tens_release(s->reps[i].result);
                s->reps[i].result = NULL;
            }
    } else {
        for (int i = 0; i < s->n; i++) {
            struct vdev_tens *t = s->reps[i].result;
            s->reps[i].result = NULL;
            if (!t)
                continue;
            if (results) /* a new creation reference of the caller's scope */
                results[i] = vdev_tens_handle(vdev_tens_publish(t));
            vdev_tens_release(t);
        }
    }
    pthread_mutex_unlock(&s->run_lock);
    return st;
}

VDEV_API enum vdev_status vdev_strategy_run(vdev_strategy_t *h, vdev_replica_fn fn, void *user,
                                            vdev_tensor_t **results)
{
    struct vdev_strat *s = strat_pin(h, "vdev_strategy_run");
    if (!s)
        return vdev_last_status(); /* invalid, or a forked child */
    enum vdev_status st = strategy_run(s, fn, user, results);
    strat_unpin(s);
    return st;
}

/* ---- reduce ---- */

/* The sum (or mean) over this process's replicas, in replica order, on dev:
 * a new tensor of the current scope, NULL on error. Each value is copied to
 * dev first (Identity, the explicit copy), as TensorFlow's strategy moves
 * them itself: so the adds run under any placement policy, strict too. */
static vdev_tensor_t *local_reduce(const struct vdev_strat *s, enum vdev_reduce_op op,
                                   vdev_tensor_t *const *per_replica, struct vdev_ldev *dev)
{
    if (vdev_scope_begin() != VDEV_OK) {
        vdev_scope_end();
        return NULL;
    }
    vdev_placement_push_dev(dev);
    vdev_tensor_t *acc = vdev_identity(per_replica[0]);
    for (int i = 1; i < s->n; i++)
        acc = vdev_add(acc, vdev_identity(per_replica[i]));
    if (op == VDEV_REDUCE_MEAN && s->n_global > 1)
        acc = vdev_div(acc, vdev_tensor_fill(NULL, 0, VDEV_F32, (double)s->n_global));
    vdev_placement_pop_dev();
    vdev_keep(acc);
    vdev_scope_end();
    return acc;
}

/* A multi-worker reduce: each worker's local sum, added across the workers
 * on the host (every worker calls it; a worker's failure fails it on every
 * worker), divided by the replicas for MEAN, on dev. */
static vdev_tensor_t *reduce_across(struct vdev_strat *s, enum vdev_reduce_op op,
                                    vdev_tensor_t *const *per_replica, enum vdev_status status,
                                    struct vdev_ldev *dev)
{
    const char *fn = "vdev_strategy_reduce";
    char why[512] = "";
    vdev_tensor_t *acc = NULL;
    float *h = NULL;
    uint64_t n = 0;
    int64_t shape[VDEV_MAX_DIMS];
    int ndim = 0;
    if (status == VDEV_OK) {
        acc = local_reduce(s, VDEV_REDUCE_SUM, per_replica, dev);
        if (acc && vdev_tensor_dtype(acc) != VDEV_F32) {
            vdev_error(VDEV_ERR_INVALID_ARG, "%s: across workers, values are float tensors", fn);
            vdev_tensor_free(acc);
            acc = NULL;
        }
        if (acc) {
            n = (uint64_t)vdev_tensor_numel(acc);
            ndim = vdev_tensor_ndim(acc);
            for (int d = 0; d < ndim; d++)
                shape[d] = vdev_tensor_dim(acc, d);
            h = vdev_malloc(n ? n * sizeof *h : 1);
            if (!h)
                vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
            else if (vdev_tensor_to_host(acc, h, n * sizeof *h) != VDEV_OK) {
                free(h);
                h = NULL;
            }
        }
        vdev_tensor_free(acc);
        if (!h) {
            status = vdev_last_status();
            n = 0;
        }
    }
    if (status != VDEV_OK)
        vdev_strlcpy(why, vdev_last_error(), sizeof why);
    /* every worker reduces with the same op, values of the same shape */
    enum vdev_status st =
        vdev_coll_hier_host_reduce(s->comm, op, h, shape, ndim, status, why, fn);
    vdev_tensor_t *out = NULL;
    if (st == VDEV_OK) {
        if (op == VDEV_REDUCE_MEAN)
            for (uint64_t i = 0; i < n; i++)
                h[i] /= (float)s->n_global;
        vdev_placement_push_dev(dev);
        out = vdev_tensor_from_host(h, shape, ndim, VDEV_F32);
        vdev_placement_pop_dev();
    }
    free(h);
    return out;
}

VDEV_API vdev_tensor_t *vdev_strategy_reduce(vdev_strategy_t *h, enum vdev_reduce_op op,
                                             vdev_tensor_t *const *per_replica)
{
    const char *fn = "vdev_strategy_reduce";
    struct vdev_strat *s = strat_of(h, fn);
    if (!s)
        return NULL;
    /* TensorFlow reduces to the current device, else the host. */
    struct vdev_ldev *dev = vdev_placement_scope_device();
    if (!dev)
        dev = vdev_runtime_lookup(VDEV_DEVICE_CPU, 0);
    enum vdev_status st = VDEV_OK;
    if ((unsigned)op >= VDEV_REDUCE_OP_COUNT) {
        st = vdev_error(VDEV_ERR_INVALID_ARG, "%s: unknown reduce op %d", fn, (int)op);
    } else if (!per_replica) {
        st = vdev_error(VDEV_ERR_INVALID_ARG, "%s: per_replica is NULL", fn);
    } else {
        const struct vdev_tens *t0 = NULL;
        char s1[96], s2[96];
        for (int i = 0; i < s->n && st == VDEV_OK; i++) {
            const struct vdev_tens *t = vdev_tens_use(per_replica[i], fn);
            if (!t) {
                st = vdev_last_status();
            } else if (!t0) {
                t0 = t;
            } else if (t->ndim != t0->ndim || memcmp(t->shape, t0->shape, sizeof t->shape) ||
                       t->dtype != t0->dtype) {
                st = vdev_error(VDEV_ERR_SHAPE,
                                "%s: replica %d's value is %s of shape%s but replica %d's is %s "
                                "of shape%s",
                                fn, s->first + i, vdev_dtype_name(t->dtype),
                                vdev_shape_str(t->shape, t->ndim, s1, 96), s->first,
                                vdev_dtype_name(t0->dtype),
                                vdev_shape_str(t0->shape, t0->ndim, s2, 96));
            }
        }
    }
    if (s->multi)
        return reduce_across(s, op, per_replica, st, dev);
    return st == VDEV_OK ? local_reduce(s, op, per_replica, dev) : NULL;
}

/* ---- memory ---- */

VDEV_API enum vdev_status vdev_strategy_memory_info(const vdev_strategy_t *h, int replica,
                                                    struct vdev_memory_info *out)
{
    const struct vdev_strat *s = strat_of(h, "vdev_strategy_memory_info");
    if (!s)
        return vdev_last_status(); /* invalid, or a forked child */
    if (replica < 0 || replica >= s->n)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_strategy_memory_info: replica %d of %d",
                          replica, s->n);
    return vdev_memory_info(s->reps[replica].dev->name, out);
}

VDEV_API double vdev_strategy_memory_imbalance(const vdev_strategy_t *h)
{
    const struct vdev_strat *s = strat_of(h, "vdev_strategy_memory_imbalance");
    if (!s)
        return -1.0;
    uint64_t peaks[VDEV_MAX_REPLICAS];
    for (int i = 0; i < s->n; i++) {
        struct vdev_alloc_stats st;
        vdev_alloc_get_stats(s->reps[i].dev->alloc, &st);
        peaks[i] = st.peak_bytes_in_use;
    }
    return vdev_replicas_imbalance(peaks, s->n);
}
