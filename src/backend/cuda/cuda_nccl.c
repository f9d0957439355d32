/* cuda_nccl.c — collectives of the CUDA plugin through NCCL, for
 * communicators whose ranks are distinct physical GPUs (src/coll/nccl.c
 * drives it through the backend's coll_* entries).
 *
 * Loading. NCCL is never linked: the first use dlopens libnccl.so.2 (the
 * loader's path, which holds the plugin's RUNPATH, the toolkit's library
 * folder; then that folder by full path), or exactly the library
 * VDEV_NCCL_LIBRARY names when it is set, and resolves the functions of
 * nccl_abi.h, under a lock, once per process; a failure is kept and every
 * later use reports it ("NCCL: libnccl.so.2: cannot open shared object file:
 * ..."), and src/coll/ falls back to vdev's ring. NCCL older than 2.14 (no
 * nonblocking communicators) is refused the same way.
 *
 * Communicators. coll_open makes one ncclComm per rank over the ranks' GPUs
 * (every rank in this process, one GPU each: NCCL refuses two ranks on one
 * GPU, and so does coll_open, first, in vdev's words): ncclGetUniqueId,
 * then ncclCommInitRankConfig for each rank with its GPU's context current,
 * in one group, each comm nonblocking (config blocking = 0), polled with
 * ncclCommGetAsyncError until it is no longer ncclInProgress. Nonblocking,
 * so that no NCCL call of a rank's thread ever waits for a peer: see Aborts.
 * What NCCL allocates on each GPU is measured with cuMemGetInfo before and
 * after, with every rank's GPU's memory lock held so that no
 * region of vdev's is mapped meanwhile, and its measure lock (cu_dev
 * measure_lock) held for writing so that no stream takes its scratch or
 * workspace and no kernel is launched there meanwhile (a first launch loads
 * the kernel's code, cuBLAS allocates at its first use): none of that is
 * counted as NCCL's. It is reported as held (the runtime takes it out of
 * the card's budget). What the process's other users of the card (PyTorch,
 * CuPy) take meanwhile is not excluded.
 *
 * That measure holds because NCCL allocates its buffers while the ranks'
 * comms are made: since NCCL 2.22 it connects the ranks, and allocates most
 * of its buffers, at a communicator's first collective instead, unless
 * NCCL_RUNTIME_CONNECT=0. So the plugin's first open sets
 * NCCL_RUNTIME_CONNECT=0 (setenv without overwrite: a value the user set
 * stays), before any NCCL call; NCCL reads it once per process, so a process
 * that used NCCL before vdev keeps what NCCL read then. A user who sets it to
 * 1 gets a warning at the first communicator: what NCCL takes at the first
 * collective is not measured, and not in the cards' budgets (a charge after
 * the fact would come from inside a rank's call, where the memory is taken
 * already and a budget that cannot hold it can only be overrun).
 *
 * One per GPU. NCCL is not safe with communicators of one GPU driven from
 * different threads (NCCL's "Thread Safety": they can deadlock, each one's
 * kernels spinning for peers queued behind the other's). coll_open refuses
 * (VDEV_ERR_UNSUPPORTED, saying which GPU) a communicator with a rank on a
 * GPU where another NCCL communicator is open; src/coll/nccl.c then lets
 * vdev's ring serve it and logs why.
 *
 * The backend keeps its open communicators in a list (cu_ctx colls):
 * cu_destroy aborts and frees those still open, before the streams go, so a
 * runtime shut down with a communicator open leaves no NCCL communicator,
 * buffer or proxy thread behind; src/coll/nccl.c never closes a communicator
 * of a runtime that was shut down (its runtime_live).
 *
 * Calls. coll_run queues one rank's part on the rank's stream (vdev's stream
 * of the logical device) inside ncclGroupStart/ncclGroupEnd, one NCCL call
 * per buffer (an all-reduce of a strategy's gradients is one group), then
 * polls ncclCommGetAsyncError until the group's work is no longer
 * ncclInProgress (enqueued on the stream, or failed); then it records an
 * event on the stream after the collective (the stream's coll_ev; the stream
 * goes on its GPU's list of streams with a collective pending), which
 * cuda_memory.c waits for before it maps or unmaps memory there. All-reduce
 * is ncclFloat32 with ncclSum or ncclAvg; broadcast and all-gather move bytes
 * (ncclUint8), whatever the element type.
 *
 * Aborts. coll_abort ends every rank's NCCL work with ncclCommAbort, so that
 * the streams can be synchronized after a rank failed; the communicator is
 * then spent (src/coll/nccl.c makes a new one at a reset). NCCL's calls on
 * one communicator must never overlap, an abort included, and an abort must
 * not come while a thread has calls on the comm queued in a group it has not
 * ended: the comm would be freed under them. So a rank's thread is aborted
 * only between its polls. While it queues its calls and ends its group
 * (RANK_QUEUING: calls that never wait, the comm being nonblocking)
 * coll_abort waits for it; while it polls (RANK_WAITING: each poll under
 * the lock) coll_abort takes its comm (comms[i] set to NULL under the lock,
 * so that it is aborted exactly once) and aborts it from its own thread,
 * which is what frees a rank whose work waits for a peer that failed before
 * its NCCL call (the watchdog pattern of PyTorch's ProcessGroupNCCL, done as
 * NCCL's fault tolerance asks, with nonblocking communicators). The rank's
 * thread sees its comm taken at its next poll and never touches it again:
 * its call fails ("the communicator was aborted"). A call that the abort
 * overtook after its work was enqueued fails too: the abort stopped its
 * kernels. */
#define _GNU_SOURCE
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/nccl_abi.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NCCL_SONAME "libnccl.so.2"
#define NCCL_MIN_VERSION VDEV_NCCL_VERSION_CODE(2, 14, 0) /* nonblocking communicators */

static struct {
    vdev_ncclGetVersion_fn get_version;
    vdev_ncclGetErrorString_fn error_string;
    vdev_ncclGetUniqueId_fn unique_id;
    vdev_ncclCommInitRankConfig_fn init_rank;
    vdev_ncclCommDestroy_fn destroy;
    vdev_ncclCommAbort_fn abort;
    vdev_ncclCommGetAsyncError_fn async_error;
    vdev_ncclGroupStart_fn group_start;
    vdev_ncclGroupEnd_fn group_end;
    vdev_ncclAllReduce_fn all_reduce;
    vdev_ncclBroadcast_fn broadcast;
    vdev_ncclAllGather_fn all_gather;
} nccl;

static pthread_mutex_t nccl_lock = PTHREAD_MUTEX_INITIALIZER;
static int nccl_state;        /* 0 not tried, 1 loaded, -1 failed */
static char nccl_line[640];   /* "NCCL 2.21.5 (libnccl.so.2)", or why not */
static int env_done;          /* vdev_cu_nccl_env_init ran (nccl_lock) */
static int lazy_warned;       /* the NCCL_RUNTIME_CONNECT warning was given (nccl_lock) */

#define RUNTIME_CONNECT "NCCL_RUNTIME_CONNECT"

void vdev_cu_nccl_env_init(void)
{
    pthread_mutex_lock(&nccl_lock);
    if (!env_done)
        setenv(RUNTIME_CONNECT, "0", 0); /* 0: the user's value, if any, stays */
    env_done = 1;
    pthread_mutex_unlock(&nccl_lock);
}

/* Warns once when the environment makes NCCL connect at the first
 * collective (NCCL_RUNTIME_CONNECT other than 0; NCCL's default when unset,
 * which the plugin's open does not leave). */
static void warn_lazy_connect(void)
{
    const char *v = getenv(RUNTIME_CONNECT);
    if (!v || strtoll(v, NULL, 0) == 0)
        return;
    pthread_mutex_lock(&nccl_lock);
    int first = !lazy_warned;
    lazy_warned = 1;
    pthread_mutex_unlock(&nccl_lock);
    if (first)
        fprintf(stderr,
                "vdev: warning: %s=%s: NCCL connects its ranks, and allocates most of its "
                "buffers, at a communicator's first collective, after vdev measured what it "
                "took; those buffers are not in the cards' budgets (unset it, or set it to 0)\n",
                RUNTIME_CONNECT, v);
}

static int resolve_locked(void *h, const char *name);

/* Loads NCCL once; 1 when usable. nccl_line says which, or why not. */
static int load_nccl(void)
{
    pthread_mutex_lock(&nccl_lock);
    if (nccl_state != 0) {
        int st = nccl_state;
        pthread_mutex_unlock(&nccl_lock);
        return st > 0;
    }
    nccl_state = -1;
    const char *want = getenv("VDEV_NCCL_LIBRARY");
    if (want && *want) {
        /* the user's choice, and nothing else */
        void *h = dlopen(want, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(nccl_line, sizeof nccl_line, "NCCL: VDEV_NCCL_LIBRARY: %s",
                     e ? e : "not found");
            pthread_mutex_unlock(&nccl_lock);
            return 0;
        }
        return resolve_locked(h, want);
    }
    char first[600] = "";
    void *h = vdev_cuda_dlopen_toolkit(NCCL_SONAME, first, sizeof first);
    if (!h) {
        snprintf(nccl_line, sizeof nccl_line, "NCCL: %s", first);
        pthread_mutex_unlock(&nccl_lock);
        return 0;
    }
    return resolve_locked(h, NCCL_SONAME);
}

/* Resolves NCCL's functions from h (loaded as `name`), nccl_lock held, and
 * releases the lock; 1 when usable. */
static int resolve_locked(void *h, const char *name)
{
    struct {
        const char *name;
        void **slot;
    } fns[] = {
        {"ncclGetVersion", (void **)&nccl.get_version},
        {"ncclGetErrorString", (void **)&nccl.error_string},
        {"ncclGetUniqueId", (void **)&nccl.unique_id},
        {"ncclCommInitRankConfig", (void **)&nccl.init_rank},
        {"ncclCommDestroy", (void **)&nccl.destroy},
        {"ncclCommAbort", (void **)&nccl.abort},
        {"ncclCommGetAsyncError", (void **)&nccl.async_error},
        {"ncclGroupStart", (void **)&nccl.group_start},
        {"ncclGroupEnd", (void **)&nccl.group_end},
        {"ncclAllReduce", (void **)&nccl.all_reduce},
        {"ncclBroadcast", (void **)&nccl.broadcast},
        {"ncclAllGather", (void **)&nccl.all_gather},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!(*fns[i].slot = dlsym(h, fns[i].name))) {
            /* h stays loaded: unloading NCCL is not safe */
            snprintf(nccl_line, sizeof nccl_line, "NCCL: %s lacks %s (NCCL too old?)", name,
                     fns[i].name);
            pthread_mutex_unlock(&nccl_lock);
            return 0;
        }
    int v = 0;
    ncclResult_t r = nccl.get_version(&v);
    if (r != ncclSuccess || v < NCCL_MIN_VERSION) {
        if (r != ncclSuccess)
            snprintf(nccl_line, sizeof nccl_line, "NCCL: ncclGetVersion failed: %s",
                     nccl.error_string(r));
        else
            snprintf(nccl_line, sizeof nccl_line,
                     "NCCL: %s is version %d.%d.%d; vdev needs 2.14 or newer (nonblocking "
                     "communicators)",
                     name, v / 10000, v % 10000 / 100, v % 100);
        pthread_mutex_unlock(&nccl_lock);
        return 0;
    }
    snprintf(nccl_line, sizeof nccl_line, "NCCL %d.%d.%d (%s)", v / 10000, v % 10000 / 100,
             v % 100, name);
    nccl_state = 1;
    pthread_mutex_unlock(&nccl_lock);
    return 1;
}

int vdev_cu_coll_library(void *vctx, char *buf, size_t cap)
{
    (void)vctx;
    int ok = load_nccl();
    snprintf(buf, cap, "%s", nccl_line);
    return ok;
}

/* ---- communicators ---- */

struct cu_coll {
    int n;
    ncclComm_t *comms;     /* n; NULL once aborted (lock) */
    struct cu_stream **s;  /* n: each rank's stream (gone at cu_destroy: see dev) */
    struct cu_dev **dev;   /* n: each rank's GPU */
    uint64_t *held;        /* n: device memory NCCL took on each rank's GPU */
    unsigned char *busy;   /* n: where the rank's thread is (RANK_*, lock) */
    pthread_mutex_t lock;
    pthread_cond_t queued; /* a rank's thread left RANK_QUEUING */
    int aborted;
    int counted;           /* counted in its GPUs' nccl_comms */
    struct cu_coll *next;  /* in the backend's list (cu_ctx colls, coll_lock) */
};

/* Where a rank's thread is in coll_run (busy). */
enum {
    RANK_OUT,      /* not in coll_run with its comm */
    RANK_QUEUING,  /* its group's calls and end, which never wait: coll_abort waits for them */
    RANK_WAITING,  /* between polls of its work: coll_abort may take and abort its comm */
};

static void coll_free(struct cu_coll *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->queued);
    free(c->comms);
    free(c->s);
    free(c->dev);
    free(c->held);
    free(c->busy);
    free(c);
}

/* Aborts rank i's comm if it has one left (lock not held): whoever takes
 * it from comms[i] aborts it, so it is aborted once. */
static void abort_rank(struct cu_coll *c, int i)
{
    pthread_mutex_lock(&c->lock);
    ncclComm_t nc = c->comms[i];
    c->comms[i] = NULL;
    pthread_mutex_unlock(&c->lock);
    if (!nc)
        return;
    /* Aborted even when its context cannot be made current: it is off the
     * list, so nobody else would (NCCL selects the comm's device itself). */
    (void)vdev_cu_use_ctx(c->dev[i]);
    nccl.abort(nc); /* ends its queued work, frees the comm and its memory */
}

/* Gives c's GPUs back: the held bytes to their accounting, and their place
 * for another NCCL communicator. */
static void coll_unhold(struct cu_coll *c)
{
    for (int i = 0; i < c->n; i++) {
        struct cu_dev *d = c->dev[i];
        pthread_mutex_lock(&d->mem_lock);
        d->coll_held -= c->held[i];
        d->nccl_comms -= c->counted;
        pthread_mutex_unlock(&d->mem_lock);
        c->held[i] = 0;
    }
    c->counted = 0;
}

/* Takes c off the backend's list. */
static void coll_unlist(struct cu_ctx *cc, struct cu_coll *c)
{
    pthread_mutex_lock(&cc->coll_lock);
    for (struct cu_coll **p = &cc->colls; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    c->next = NULL;
    pthread_mutex_unlock(&cc->coll_lock);
}

/* A pause between two polls of a nonblocking comm: a yield for the first
 * few (work that is enqueued within microseconds), then 20 us. */
static void poll_pause(unsigned *k)
{
    if ((*k)++ < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

/* Polls a comm nobody else holds until it is no longer ncclInProgress: its
 * outcome (ncclCommGetAsyncError's own failure, or the comm's). */
static ncclResult_t poll_ready(ncclComm_t nc)
{
    unsigned k = 0;
    for (;;) {
        ncclResult_t async = ncclSuccess, r = nccl.async_error(nc, &async);
        if (r != ncclSuccess)
            return r;
        if (async != ncclInProgress)
            return async;
        poll_pause(&k);
    }
}

/* Makes c's n comms over its GPUs (c->dev, ranks in order), nonblocking,
 * in one group, and waits until each is ready; on failure aborts those
 * made (c->comms left NULL) and says which call failed: *what, or *cr and
 * *bad_gpu when a context could not be made current. */
static ncclResult_t init_comms(struct cu_coll *c, int n, const char **what, CUresult *cr,
                               int *bad_gpu)
{
    ncclConfig_t cfg = {
        .size = sizeof cfg,
        .magic = VDEV_NCCL_CONFIG_MAGIC,
        .version = VDEV_NCCL_VERSION_CODE(2, 14, 0),
        .blocking = 0,
        .cga_cluster_size = VDEV_NCCL_CONFIG_UNDEF_INT,
        .min_ctas = VDEV_NCCL_CONFIG_UNDEF_INT,
        .max_ctas = VDEV_NCCL_CONFIG_UNDEF_INT,
        .net_name = NULL,
    };
    ncclUniqueId id;
    *what = "ncclGetUniqueId";
    ncclResult_t r = nccl.unique_id(&id);
    if (r == ncclSuccess) {
        *what = "ncclGroupStart";
        r = nccl.group_start();
    }
    if (r != ncclSuccess)
        return r;
    for (int i = 0; i < n && r == ncclSuccess && *cr == CUDA_SUCCESS; i++) {
        /* NCCL takes the rank's GPU from the current context */
        if ((*cr = vdev_cu_use_ctx(c->dev[i])) != CUDA_SUCCESS) {
            *bad_gpu = c->dev[i]->index;
            break;
        }
        *what = "ncclCommInitRankConfig";
        r = nccl.init_rank(&c->comms[i], n, id, i, &cfg);
        if (r == ncclInProgress)
            r = ncclSuccess;
    }
    /* a group once started is always ended */
    ncclResult_t e = nccl.group_end();
    if (r == ncclSuccess && *cr == CUDA_SUCCESS && e != ncclSuccess && e != ncclInProgress) {
        *what = "ncclGroupEnd";
        r = e;
    }
    for (int i = 0; i < n && r == ncclSuccess && *cr == CUDA_SUCCESS; i++) {
        *what = "ncclCommInitRankConfig";
        r = poll_ready(c->comms[i]);
    }
    if (r != ncclSuccess || *cr != CUDA_SUCCESS)
        for (int i = 0; i < n; i++)
            abort_rank(c, i); /* those made; NULL for the others */
    return r;
}

enum vdev_status vdev_cu_coll_open(void *vctx, const int *qs, int n, void **out, uint64_t *held)
{
    *out = NULL;
    if (n < 1)
        return vdev_cu_fail(VDEV_ERR_INVALID_ARG, "NCCL: a communicator of %d ranks", n);
    /* two ranks on one GPU: NCCL's "Duplicate GPU detected", in vdev's words */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (vdev_cu_dev(vctx, qs[i]) == vdev_cu_dev(vctx, qs[j]))
                return vdev_cu_fail(VDEV_ERR_UNSUPPORTED,
                                    "NCCL needs a GPU of its own for every rank: ranks %d and %d "
                                    "are both on CUDA GPU %d",
                                    j, i, vdev_cu_dev(vctx, qs[i])->index);
    if (!load_nccl())
        return vdev_cu_fail(VDEV_ERR_UNSUPPORTED, "%s", nccl_line);
    struct cu_coll *c = calloc(1, sizeof *c);
    if (c) {
        c->comms = calloc((size_t)n, sizeof *c->comms);
        c->s = calloc((size_t)n, sizeof *c->s);
        c->dev = calloc((size_t)n, sizeof *c->dev);
        c->held = calloc((size_t)n, sizeof *c->held);
        c->busy = calloc((size_t)n, 1);
    }
    int *devlist = malloc((size_t)n * sizeof *devlist);
    size_t *before = malloc((size_t)n * sizeof *before);
    if (!c || !c->comms || !c->s || !c->dev || !c->held || !c->busy || !devlist || !before) {
        if (c) {
            free(c->comms);
            free(c->s);
            free(c->dev);
            free(c->held);
            free(c->busy);
        }
        free(c);
        free(devlist);
        free(before);
        return vdev_cu_fail(VDEV_ERR_OOM, "out of host memory making an NCCL communicator");
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->queued, NULL);
    c->n = n;
    warn_lazy_connect();
    /* The ranks' GPUs in index order, so that two opens never lock crosswise. */
    struct cu_ctx *cc = vctx;
    for (int i = 0; i < n; i++) {
        c->s[i] = vdev_cu_q(vctx, qs[i]);
        c->dev[i] = c->s[i]->d;
        devlist[i] = c->dev[i]->index;
    }
    /* Nothing else takes device memory on these GPUs while NCCL's is
     * measured: the allocator's regions wait on mem_lock, streams' buffers
     * and kernel launches (code loading, cuBLAS) on measure_lock. */
    for (int g = 0; g < cc->n; g++)
        for (int i = 0; i < n; i++)
            if (devlist[i] == g)
                pthread_rwlock_wrlock(&cc->devs[g].measure_lock);
    for (int g = 0; g < cc->n; g++)
        for (int i = 0; i < n; i++)
            if (devlist[i] == g)
                pthread_mutex_lock(&cc->devs[g].mem_lock);
    /* A GPU with an NCCL communicator already: none more (see the top). */
    int taken = -1;
    for (int i = 0; i < n && taken < 0; i++)
        if (c->dev[i]->nccl_comms > 0)
            taken = devlist[i];
    CUresult cr = CUDA_SUCCESS;
    ncclResult_t r = ncclSuccess;
    size_t total;
    int bad_gpu = -1; /* the GPU whose call failed, and which call */
    const char *bad_call = "cuMemGetInfo";
    for (int i = 0; i < n && cr == CUDA_SUCCESS && taken < 0; i++) {
        bad_gpu = devlist[i];
        if ((cr = vdev_cu_use_ctx(c->dev[i])) != CUDA_SUCCESS)
            bad_call = "cuCtxSetCurrent";
        else
            cr = vdev_cu.cuMemGetInfo(&before[i], &total);
    }
    const char *failed = "ncclCommInitRankConfig";
    if (cr == CUDA_SUCCESS && taken < 0) {
        r = init_comms(c, n, &failed, &cr, &bad_gpu);
        bad_call = "cuCtxSetCurrent"; /* init_comms's only CUDA call */
    }
    for (int i = 0; i < n && cr == CUDA_SUCCESS && r == ncclSuccess && taken < 0; i++) {
        size_t after = 0;
        struct cu_dev *d = c->dev[i];
        if (vdev_cu_use_ctx(d) == CUDA_SUCCESS &&
            vdev_cu.cuMemGetInfo(&after, &total) == CUDA_SUCCESS && after < before[i])
            c->held[i] = before[i] - after;
        d->coll_held += c->held[i];
        d->nccl_comms++;
        c->counted = 1;
        held[i] = c->held[i];
    }
    for (int g = 0; g < cc->n; g++)
        for (int i = 0; i < n; i++)
            if (devlist[i] == g) {
                pthread_mutex_unlock(&cc->devs[g].mem_lock);
                pthread_rwlock_unlock(&cc->devs[g].measure_lock);
            }
    free(devlist);
    free(before);
    if (taken >= 0) {
        coll_free(c);
        return vdev_cu_fail(VDEV_ERR_UNSUPPORTED,
                            "NCCL: CUDA GPU %d already has an NCCL communicator, and two driven "
                            "from different threads can deadlock (NCCL's thread safety rules); "
                            "vdev makes one per GPU",
                            taken);
    }
    if (cr != CUDA_SUCCESS) {
        coll_free(c);
        return vdev_cu_fail_call(cr, bad_gpu, bad_call);
    }
    if (r != ncclSuccess) {
        coll_free(c);
        return vdev_cu_fail(VDEV_ERR_BACKEND, "NCCL: %s over %d GPUs failed: %s", failed, n,
                            nccl.error_string(r));
    }
    pthread_mutex_lock(&cc->coll_lock);
    c->next = cc->colls;
    cc->colls = c;
    pthread_mutex_unlock(&cc->coll_lock);
    *out = c;
    return VDEV_OK;
}

/* "NCCL: ncclAllReduce on CUDA GPU 1 failed: <NCCL's words>" */
static enum vdev_status nccl_fail(const char *what, const struct cu_stream *s, ncclResult_t r)
{
    return vdev_cu_fail(VDEV_ERR_BACKEND, "NCCL: %s on CUDA GPU %d failed: %s", what, s->d->index,
                        nccl.error_string(r));
}

/* Moves rank's thread to `where` (c->lock held). */
static void rank_at(struct cu_coll *c, int rank, int where)
{
    if (c->busy[rank] == RANK_QUEUING)
        pthread_cond_broadcast(&c->queued);
    c->busy[rank] = (unsigned char)where;
}

/* One rank's part (see coll_run), entered in RANK_QUEUING and left in
 * RANK_OUT (the caller's coll_run sets both). */
static enum vdev_status run_rank(struct cu_coll *c, int rank, ncclComm_t nc,
                                 const struct vdev_backend_coll *call)
{
    struct cu_stream *s = c->s[rank];
    CUresult cr = vdev_cu_use_ctx(s->d);
    if (cr != CUDA_SUCCESS)
        return vdev_cu_fail_call(cr, s->d->index, "cuCtxSetCurrent");
    vdev_nccl_stream_t st = (vdev_nccl_stream_t)s->s;
    const char *what = "ncclGroupStart";
    ncclResult_t r = nccl.group_start();
    if (r != ncclSuccess)
        return nccl_fail(what, s, r);
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < call->n_bufs && first == ncclSuccess; i++) {
        uint64_t count = call->count[i];
        if (call->kind == VDEV_BACKEND_COLL_ALL_REDUCE && count) {
            what = "ncclAllReduce";
            first = nccl.all_reduce(call->data[i], call->data[i], (size_t)count, ncclFloat32,
                                    call->mean ? ncclAvg : ncclSum, nc, st);
        } else if (call->kind == VDEV_BACKEND_COLL_BROADCAST && count) {
            what = "ncclBroadcast";
            first = nccl.broadcast(call->data[i], call->data[i], (size_t)count * 4, ncclUint8,
                                   call->root, nc, st);
        } else if (call->kind == VDEV_BACKEND_COLL_ALL_GATHER && i == 0 && count) {
            what = "ncclAllGather";
            first = nccl.all_gather(call->data[0], call->data[1], (size_t)count * 4, ncclUint8,
                                    nc, st);
        }
        if (first == ncclInProgress) /* a nonblocking comm's call may say so; the poll tells */
            first = ncclSuccess;
    }
    /* A group once started is always ended, even after a failed call in it;
     * the comm being nonblocking, its end never waits (RANK_QUEUING still). */
    r = nccl.group_end();
    /* Then the work is polled until it is enqueued or failed. Each poll is
     * under the lock, and only while nobody took nc; between polls coll_abort
     * may take and abort it (RANK_WAITING; see the top). */
    ncclResult_t async = ncclSuccess, ar = ncclSuccess;
    int taken = 0;
    unsigned k = 0;
    pthread_mutex_lock(&c->lock);
    while (first == ncclSuccess && (r == ncclSuccess || r == ncclInProgress)) {
        taken = c->comms[rank] != nc;
        if (taken || (ar = nccl.async_error(nc, &async)) != ncclSuccess ||
            async != ncclInProgress)
            break;
        rank_at(c, rank, RANK_WAITING);
        pthread_mutex_unlock(&c->lock);
        poll_pause(&k);
        pthread_mutex_lock(&c->lock);
    }
    rank_at(c, rank, RANK_OUT);
    pthread_mutex_unlock(&c->lock);
    if (first != ncclSuccess)
        return nccl_fail(what, s, first);
    if (taken)
        return vdev_cu_fail(VDEV_ERR_BACKEND,
                            "NCCL: ncclGroupEnd on CUDA GPU %d failed: the communicator was "
                            "aborted",
                            s->d->index);
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail("ncclGroupEnd", s, r);
    if (ar != ncclSuccess || async != ncclSuccess)
        return nccl_fail("ncclCommGetAsyncError", s, ar != ncclSuccess ? ar : async);
    /* After the collective on the rank's stream, for cuda_memory.c. */
    struct cu_dev *d = s->d;
    pthread_mutex_lock(&d->mem_lock);
    cr = s->coll_ev ? CUDA_SUCCESS : vdev_cu.cuEventCreate(&s->coll_ev, CU_EVENT_DISABLE_TIMING);
    if (cr == CUDA_SUCCESS)
        cr = vdev_cu.cuEventRecord(s->coll_ev, s->s);
    int listed = 0;
    for (struct cu_stream *o = d->coll_streams; o && !listed; o = o->coll_next)
        listed = o == s;
    if (cr == CUDA_SUCCESS && !listed) {
        s->coll_next = d->coll_streams;
        d->coll_streams = s;
    }
    /* a stream already listed stays so: waiting for a passed event costs nothing */
    s->coll_pending = cr == CUDA_SUCCESS;
    pthread_mutex_unlock(&d->mem_lock);
    if (cr != CUDA_SUCCESS) {
        /* nothing to wait for later: wait now */
        vdev_cu.cuStreamSynchronize(s->s);
    }
    return VDEV_OK;
}

enum vdev_status vdev_cu_coll_run(void *vctx, void *comm, int rank,
                                  const struct vdev_backend_coll *call)
{
    (void)vctx;
    struct cu_coll *c = comm;
    pthread_mutex_lock(&c->lock);
    ncclComm_t nc = c->aborted ? NULL : c->comms[rank];
    if (nc)
        rank_at(c, rank, RANK_QUEUING);
    pthread_mutex_unlock(&c->lock);
    if (!nc)
        return vdev_cu_fail(VDEV_ERR_BACKEND, "NCCL: the communicator was aborted");
    enum vdev_status st = run_rank(c, rank, nc, call);
    pthread_mutex_lock(&c->lock);
    rank_at(c, rank, RANK_OUT); /* run_rank's early returns */
    int aborted = c->aborted;
    pthread_mutex_unlock(&c->lock);
    /* An abort after the rank's ncclGroupEnd stopped its kernels as well:
     * what it queued did not run (coll_abort aborts, or aborted, its comm). */
    if (aborted && st == VDEV_OK)
        return vdev_cu_fail(VDEV_ERR_BACKEND, "NCCL: the communicator was aborted");
    return st;
}

void vdev_cu_coll_abort(void *vctx, void *comm)
{
    (void)vctx;
    struct cu_coll *c = comm;
    pthread_mutex_lock(&c->lock);
    c->aborted = 1; /* no rank's thread starts another call with its comm */
    for (int i = 0; i < c->n; i++) {
        /* A rank queuing its calls is polling soon (those calls and its
         * ncclGroupEnd never wait); it is aborted between polls, or after. */
        while (c->busy[i] == RANK_QUEUING && c->comms[i])
            pthread_cond_wait(&c->queued, &c->lock);
        pthread_mutex_unlock(&c->lock);
        abort_rank(c, i); /* also a rank whose work waits for a peer: this ends it */
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
}

void vdev_cu_coll_close(void *vctx, void *comm)
{
    struct cu_coll *c = comm;
    if (!c)
        return;
    coll_unlist(vctx, c);
    for (int i = 0; i < c->n; i++) {
        if (!c->comms[i])
            continue;
        if (vdev_cu_use_ctx(c->dev[i]) != CUDA_SUCCESS) {
            abort_rank(c, i); /* freed all the same */
            continue;
        }
        vdev_cu.cuStreamSynchronize(c->s[i]->s);
        nccl.destroy(c->comms[i]);
    }
    coll_unhold(c);
    coll_free(c);
}

void vdev_cu_coll_destroy_all(struct cu_ctx *cc)
{
    pthread_mutex_lock(&cc->coll_lock);
    struct cu_coll *list = cc->colls;
    cc->colls = NULL;
    pthread_mutex_unlock(&cc->coll_lock);
    while (list) {
        struct cu_coll *c = list;
        list = c->next;
        /* Aborted, not destroyed: ncclCommAbort does not wait for peers, and
         * its ranks' streams may be gone already (the runtime closes them
         * first), so c->s is not touched; the runtime waited for them. */
        for (int i = 0; i < c->n; i++)
            abort_rank(c, i);
        coll_unhold(c);
        coll_free(c);
    }
}
