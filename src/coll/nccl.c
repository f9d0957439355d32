/* nccl.c — collectives through the backend's own library (NCCL, inside the
 * CUDA plugin) for communicators whose ranks are distinct physical GPUs,
 * and the choice between it and vdev's ring (vdev_coll_nccl_make).
 *
 * The ranks meet exactly as the ring's do, through ring_sync.c: every rank
 * posts its call, one verdict is reached for all (a rank's own failure or a
 * disagreement fails the call everywhere before any data moves), and every
 * rank waits for the others on the way out, so all return the same outcome.
 * Between the two, instead of the ring's schedule, each rank queues its part
 * on its own stream through the backend's coll_run (an NCCL group: one call
 * per buffer). Every rank that got the verdict queues its part at once, so no
 * NCCL kernel waits for a rank that will not come; if a rank's part fails,
 * it aborts the library's communicator (coll_abort: NCCL's kernels of the
 * other ranks stop, and a rank blocked inside NCCL is freed, its call failing
 * with the first failure named), the communicator is spent as the ring's is,
 * and a reset makes a new library communicator.
 *
 * Memory. What the library takes on each rank's GPU (NCCL's buffers,
 * measured by the plugin) is charged to the card's budget
 * (vdev_runtime_card_charge): a communicator that would not fit beside the
 * logical devices' memory is not made, and the ring serves instead.
 *
 * The choice. NCCL serves a communicator of two or more ranks when they are
 * logical GPUs of a backend with a collective library, each on a physical GPU
 * of its own, and the library loads; otherwise the ring does, and the reason
 * is logged once (as TensorFlow warns "NCCL is not supported when using
 * virtual GPUs, fallingback to reduction to one device" (sic)). The plugin
 * also refuses a communicator with a rank on a GPU where another NCCL
 * communicator is open (two, driven from different threads, can deadlock):
 * the ring serves that one too, logged the same way ("NCCL cannot serve this
 * communicator (NCCL: CUDA GPU 0 already has an NCCL communicator, ...)").
 *
 * Shutdown. A library communicator still open when the runtime shuts down
 * goes with the backend (the plugin aborts and frees it); nothing here
 * touches it afterwards (runtime_live), so freeing the communicator later
 * only frees vdev's own state. */
#include "coll/ring.h"

#include <stdio.h>
#include <string.h>

struct nccl {
    struct ring *sync;             /* rendezvous, failures, timeouts (ring_sync.c) */
    const struct vdev_coll_comm *comm;
    struct vdev_backend *b;
    pthread_mutex_t lock;          /* lib, spent (abort may come from any thread) */
    void *lib;                     /* the backend's communicator; NULL: none (why says) */
    int spent;                     /* aborted: made again at the next reset */
    uint64_t *held;                /* n: device memory charged to each rank's card */
    char why[RING_REASON];
    char spent_by[RING_REASON];    /* the failure that spent it: "rank R failed: ..." (lock) */
};

/* Whether the runtime the communicator was made under is still up: after a
 * shutdown its backend is gone, and with it the library's communicators. */
static int runtime_live(const struct nccl *N)
{
    return N->comm->rgen == vdev_runtime_generation() && vdev_is_initialized();
}

/* Gives back the budget charged for N's library communicator. */
static void uncharge(struct nccl *N)
{
    for (int i = 0; i < N->comm->n; i++) {
        if (N->held[i] && runtime_live(N))
            vdev_runtime_card_charge(N->comm->devs[i]->physical, -(int64_t)N->held[i]);
        N->held[i] = 0;
    }
}

/* Makes the library's communicator and charges its memory to the cards. */
static enum vdev_status open_lib(struct nccl *N)
{
    const struct vdev_coll_comm *c = N->comm;
    int qs[VDEV_COLL_MAX_RANKS];
    for (int i = 0; i < c->n; i++)
        qs[i] = c->devs[i]->bdev;
    void *lib = NULL;
    enum vdev_status st = N->b->ops->coll_open(N->b->ctx, qs, c->n, &lib, N->held);
    if (st != VDEV_OK) {
        memset(N->held, 0, (size_t)c->n * sizeof *N->held);
        return st;
    }
    for (int i = 0; i < c->n && st == VDEV_OK; i++) {
        uint64_t h = N->held[i];
        N->held[i] = 0;
        if (h && (st = vdev_runtime_card_charge(c->devs[i]->physical, (int64_t)h)) == VDEV_OK) {
            N->held[i] = h;
        } else if (h) {
            char b1[32];
            vdev_error_prefix("NCCL's buffers (%s on %s) do not fit in its card's budget",
                              vdev_format_bytes(h, b1, sizeof b1), c->devs[i]->name);
        }
    }
    if (st != VDEV_OK) {
        enum vdev_status keep = vdev_last_status();
        char msg[RING_WHY];
        vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        uncharge(N);
        N->b->ops->coll_close(N->b->ctx, lib);
        return vdev_error(keep, "%s", msg);
    }
    N->lib = lib;
    N->spent = 0;
    return VDEV_OK;
}

static void nccl_destroy(void *ctx)
{
    struct nccl *N = ctx;
    if (!N)
        return;
    if (N->lib && runtime_live(N))
        N->b->ops->coll_close(N->b->ctx, N->lib); /* waits for the ranks' streams */
    /* else the backend went with the runtime, and freed N->lib with it */
    N->lib = NULL;
    uncharge(N);
    vdev_ring_destroy(N->sync);
    pthread_mutex_destroy(&N->lock);
    free(N->held);
    free(N);
}

static enum vdev_status nccl_create(const struct vdev_coll_comm *comm, void **ctx)
{
    struct nccl *N = vdev_calloc(1, sizeof *N);
    if (N)
        N->held = vdev_calloc((size_t)comm->n, sizeof *N->held);
    if (!N || !N->held) {
        free(N);
        return vdev_error(VDEV_ERR_OOM, "out of host memory making a communicator");
    }
    N->comm = comm;
    N->b = comm->devs[0]->backend;
    pthread_mutex_init(&N->lock, NULL);
    void *sync = NULL;
    enum vdev_status st = vdev_ring_create(comm, &sync);
    N->sync = sync;
    if (st == VDEV_OK)
        st = open_lib(N);
    if (st != VDEV_OK) {
        nccl_destroy(N);
        return st;
    }
    *ctx = N;
    return VDEV_OK;
}

/* The backend's description of rank's part of call c. */
static enum vdev_status run_lib(struct nccl *N, int rank, const struct vdev_coll_call *c)
{
    void *data[16], **d = data;
    uint64_t count[16], *k = count;
    if (c->n_bufs > 16) {
        d = vdev_malloc((size_t)c->n_bufs * sizeof *d);
        k = vdev_malloc((size_t)c->n_bufs * sizeof *k);
        if (!d || !k) {
            free(d == data ? NULL : d);
            free(k == count ? NULL : k);
            return vdev_error(VDEV_ERR_OOM, "out of host memory for a collective of %d buffers",
                              c->n_bufs);
        }
    }
    for (int i = 0; i < c->n_bufs; i++) {
        d[i] = c->bufs[i].data;
        k[i] = c->bufs[i].count;
    }
    struct vdev_backend_coll bc = {
        .kind = c->kind == VDEV_COLL_ALL_REDUCE  ? VDEV_BACKEND_COLL_ALL_REDUCE
                : c->kind == VDEV_COLL_BROADCAST ? VDEV_BACKEND_COLL_BROADCAST
                                                 : VDEV_BACKEND_COLL_ALL_GATHER,
        .mean = c->op == VDEV_REDUCE_MEAN,
        .root = c->root,
        .n_bufs = c->n_bufs,
        .data = d,
        .count = k};
    char spent_by[RING_REASON] = "";
    pthread_mutex_lock(&N->lock);
    void *lib = N->spent ? NULL : N->lib;
    if (N->spent)
        vdev_strlcpy(spent_by, N->spent_by, sizeof spent_by);
    pthread_mutex_unlock(&N->lock);
    enum vdev_status st;
    if (!lib) {
        /* Another rank's failure spent it: name that failure, the cause. */
        st = spent_by[0] ? vdev_error(VDEV_ERR_BACKEND,
                                      "NCCL: no communicator: it was aborted after %s", spent_by)
                         : vdev_error(VDEV_ERR_BACKEND, "NCCL: no communicator: %s",
                                      N->why[0] ? N->why : "it was aborted");
    } else if ((st = N->b->ops->coll_run(N->b->ctx, lib, rank, &bc)) != VDEV_OK) {
        /* the other ranks' parts would wait for this one for ever */
        char msg[RING_REASON];
        snprintf(msg, sizeof msg, "rank %d failed: ", rank);
        size_t used = strlen(msg);
        vdev_strlcpy(msg + used, vdev_last_error(), sizeof msg - used);
        pthread_mutex_lock(&N->lock);
        int first = !N->spent;
        if (first)
            vdev_strlcpy(N->spent_by, msg, sizeof N->spent_by);
        else
            vdev_strlcpy(spent_by, N->spent_by, sizeof spent_by);
        N->spent = 1;
        pthread_mutex_unlock(&N->lock);
        N->b->ops->coll_abort(N->b->ctx, lib);
        /* Spent already: most likely another rank's failure aborted this
         * rank's call (a rank blocked in NCCL is freed so); name the cause,
         * whichever rank's failure the verdict keeps. */
        if (!first)
            st = vdev_error(st, "%s (after %s)", msg + used, spent_by);
    }
    if (d != data) {
        free(d);
        free(k);
    }
    return st;
}

static enum vdev_status nccl_run(void *ctx, int rank, const struct vdev_coll_call *call,
                                 int *origin)
{
    struct nccl *N = ctx;
    struct ring_slot *s;
    enum vdev_status st = vdev_ring_enter(N->sync, rank, call, &s, origin);
    if (st != VDEV_OK)
        return st;
    if (call->kind != VDEV_COLL_BARRIER && call->n_bufs > 0) {
        st = run_lib(N, rank, call);
        if (st != VDEV_OK)
            *origin = rank;
    }
    return vdev_ring_leave_schedule(N->sync, s, rank, st, origin);
}

static void nccl_abort(void *ctx, int rank, enum vdev_status code, const char *why)
{
    vdev_ring_abort(((struct nccl *)ctx)->sync, rank, code, why);
}

static void nccl_leave(void *ctx, int rank) { vdev_ring_leave(((struct nccl *)ctx)->sync, rank); }

/* No rank is inside a call: a spent library communicator is made again. */
static void nccl_reset(void *ctx)
{
    struct nccl *N = ctx;
    vdev_ring_reset(N->sync);
    if (!N->spent && N->lib)
        return;
    if (N->lib)
        N->b->ops->coll_close(N->b->ctx, N->lib);
    N->lib = NULL;
    uncharge(N);
    N->why[0] = '\0';
    N->spent_by[0] = '\0';
    if (open_lib(N) != VDEV_OK) {
        vdev_strlcpy(N->why, vdev_last_error(), sizeof N->why);
        vdev_clear_error();
    }
}

const struct vdev_coll_ops vdev_coll_nccl_ops = {
    .api_version = VDEV_COLL_API_VERSION,
    .name = "nccl",
    .create = nccl_create,
    .run = nccl_run,
    .abort = nccl_abort,
    .leave = nccl_leave,
    .reset = nccl_reset,
    .destroy = nccl_destroy,
};

/* ---- the choice ---- */

/* Logs a reason once per process (the same reason is not repeated). */
static void log_once(const char *fmt, const char *a, const char *b)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    /* room for a whole reason (RING_WHY) and the words around it */
    static char last[RING_WHY + 256];
    char line[RING_WHY + 256];
    snprintf(line, sizeof line, fmt, a, b);
    pthread_mutex_lock(&lock);
    int fresh = strcmp(line, last) != 0;
    if (fresh)
        vdev_strlcpy(last, line, sizeof last);
    pthread_mutex_unlock(&lock);
    if (fresh)
        vdev_log_warning("%s", line);
}

enum vdev_status vdev_coll_nccl_make(struct vdev_ldev *const *devs, int n,
                                     struct vdev_coll_comm **out)
{
    *out = NULL;
    struct vdev_backend *b = n > 0 ? devs[0]->backend : NULL;
    if (n < 2 || !b || !b->ops->coll_open || devs[0]->type != VDEV_DEVICE_GPU)
        return VDEV_ERR_UNSUPPORTED; /* nothing to say: no library on this backend */
    for (int i = 1; i < n; i++)
        if (devs[i]->backend != b)
            return VDEV_ERR_UNSUPPORTED; /* the ring's own check words it */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (devs[i] != devs[j] && devs[i]->physical == devs[j]->physical) {
                char names[200];
                snprintf(names, sizeof names, "%s and %s share /physical_device:GPU:%d",
                         devs[j]->name, devs[i]->name, devs[i]->physical);
                log_once("NCCL does not serve logical devices of one GPU (%s); collectives "
                         "use vdev's ring%s",
                         names, "");
                return VDEV_ERR_UNSUPPORTED;
            }
    enum vdev_status st = vdev_coll_comm_make_with(&vdev_coll_nccl_ops, devs, n, out);
    if (st == VDEV_OK || st == VDEV_ERR_INVALID_ARG)
        return st; /* a bad list of devices is the caller's error whoever serves it */
    char why[RING_WHY];
    vdev_strlcpy(why, vdev_last_error(), sizeof why);
    log_once("NCCL cannot serve this communicator (%s); collectives use vdev's ring%s", why, "");
    vdev_clear_error();
    return VDEV_ERR_UNSUPPORTED;
}

int vdev_coll_library_status(char *buf, size_t cap)
{
    struct vdev_backend *b = vdev_config_gpu_backend();
    if (!b) {
        snprintf(buf, cap, "vdev's ring (no GPU)");
        return 0;
    }
    if (!b->ops->coll_library) {
        snprintf(buf, cap, "vdev's ring (the %s backend has no collective library%s)",
                 b->ops->name, strcmp(b->ops->name, "sim") ? "" : ": simulated GPUs");
        return 0;
    }
    char line[200];
    int ok = b->ops->coll_library(b->ctx, line, sizeof line);
    if (ok)
        snprintf(buf, cap, "%s for ranks on distinct physical GPUs, one communicator per GPU; "
                           "vdev's ring for logical devices of one GPU and for further "
                           "communicators",
                 line);
    else
        snprintf(buf, cap, "vdev's ring (%s)", line);
    return ok;
}
