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
 * ..."), and src/coll/ falls back to vdev's ring. NCCL older than 2.10 (no
 * ncclAvg) is refused the same way.
 *
 * Communicators. coll_open makes one ncclComm per rank with ncclCommInitAll
 * over the ranks' GPUs (every rank in this process, one GPU each: NCCL
 * refuses two ranks on one GPU, and so does coll_open, first, in vdev's
 * words). What NCCL allocates on each GPU is measured with cuMemGetInfo
 * before and after, with every rank's GPU's memory lock held so that no
 * region of vdev's is mapped meanwhile, and its measure lock (cu_dev
 * measure_lock) held for writing so that no stream takes its scratch or
 * workspace and no kernel is launched there meanwhile (a first launch loads
 * the kernel's code, cuBLAS allocates at its first use): none of that is
 * counted as NCCL's. It is reported as held (the runtime takes it out of
 * the card's budget). What the process's other users of the card (PyTorch,
 * CuPy) take meanwhile is not excluded.
 *
 * That measure holds because NCCL allocates its buffers inside
 * ncclCommInitAll: since NCCL 2.22 it connects the ranks, and allocates most
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
 * per buffer (an all-reduce of a strategy's gradients is one group), and
 * checks ncclCommGetAsyncError; then it records an event on the stream after
 * the collective (the stream's coll_ev; the stream goes on its GPU's list of
 * streams with a collective pending), which cuda_memory.c waits for before
 * it maps or unmaps memory there. All-reduce is ncclFloat32 with ncclSum or
 * ncclAvg; broadcast and all-gather move bytes (ncclUint8), whatever the
 * element type.
 *
 * Aborts. coll_abort ends every rank's NCCL work with ncclCommAbort, so that
 * the streams can be synchronized after a rank failed; the communicator is
 * then spent (src/coll/nccl.c makes a new one at a reset). It aborts the
 * ranks whose threads are inside ncclGroupEnd too, from its own thread: a
 * rank blocked there (waiting for a peer that failed before its NCCL call,
 * on the host when NCCL connects lazily) is freed only by its comm's abort
 * flag, which ncclCommAbort sets and NCCL's waits poll (the watchdog pattern
 * of PyTorch's ProcessGroupNCCL). Each comm is taken (comms[i] set to NULL)
 * under the lock by whoever aborts it, so it is aborted exactly once, and a
 * rank's thread never touches its comm again once it is taken: its call
 * fails ("the communicator was aborted"). A rank's thread is not aborted
 * while it queues its calls (ncclGroupStart and the calls up to
 * ncclGroupEnd, ncclCommGetAsyncError after it): NCCL's communicators are
 * not safe for concurrent calls there, and those steps never wait, so
 * coll_abort waits for them to end. A call that the abort overtook after its
 * ncclGroupEnd fails too: the abort stopped its kernels. */
#define _GNU_SOURCE
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/nccl_abi.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_SONAME "libnccl.so.2"
#define NCCL_MIN_VERSION VDEV_NCCL_VERSION_CODE(2, 10, 0) /* ncclAvg */

static struct {
    vdev_ncclGetVersion_fn get_version;
    vdev_ncclGetErrorString_fn error_string;
    vdev_ncclCommInitAll_fn init_all;
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
        {"ncclCommInitAll", (void **)&nccl.init_all},
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
                     "NCCL: %s is version %d.%d.%d; vdev needs 2.10 or newer (ncclAvg)",
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
    RANK_QUEUING,  /* calls on its comm that never wait: coll_abort waits for them */
    RANK_WAITING,  /* inside ncclGroupEnd: coll_abort aborts its comm from its own thread */
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
    if (cr == CUDA_SUCCESS && taken < 0)
        r = nccl.init_all(c->comms, n, devlist);
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
        return vdev_cu_fail(VDEV_ERR_BACKEND, "NCCL: ncclCommInitAll over %d GPUs failed: %s", n,
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
    }
    /* A group once started is always ended, even after a failed call in it;
     * while it waits there, coll_abort may abort nc (see the top). */
    pthread_mutex_lock(&c->lock);
    rank_at(c, rank, RANK_WAITING);
    pthread_mutex_unlock(&c->lock);
    r = nccl.group_end();
    /* nc is touched again only if nobody took it, and under the lock, so
     * that no abort comes meanwhile (ncclCommGetAsyncError never waits). */
    ncclResult_t async = ncclSuccess, ar = ncclSuccess;
    pthread_mutex_lock(&c->lock);
    int taken = c->comms[rank] != nc;
    if (!taken && first == ncclSuccess && r == ncclSuccess)
        ar = nccl.async_error(nc, &async);
    rank_at(c, rank, RANK_OUT);
    pthread_mutex_unlock(&c->lock);
    if (first != ncclSuccess)
        return nccl_fail(what, s, first);
    if (taken)
        return vdev_cu_fail(VDEV_ERR_BACKEND,
                            "NCCL: ncclGroupEnd on CUDA GPU %d failed: the communicator was "
                            "aborted",
                            s->d->index);
    if (r != ncclSuccess)
        return nccl_fail("ncclGroupEnd", s, r);
    if (ar != ncclSuccess || (async != ncclSuccess && async != ncclInProgress))
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
        /* A rank queuing its calls is at ncclGroupEnd soon (those calls
         * never wait); it is aborted there, or after, never before. */
        while (c->busy[i] == RANK_QUEUING && c->comms[i])
            pthread_cond_wait(&c->queued, &c->lock);
        pthread_mutex_unlock(&c->lock);
        abort_rank(c, i); /* also a rank blocked in ncclGroupEnd: this frees it */
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
