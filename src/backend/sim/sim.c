/* sim.c — simulated GPUs for machines without one, and for every test.
 *
 * VDEV_SIM_GPUS="3x16GiB" (or "2x80GiB,1x24GiB") makes that many physical
 * GPUs. Each one:
 *  - enforces its capacity exactly: reserving past it fails with VDEV_ERR_OOM,
 *    as cuMemCreate/cuMemAlloc fail on a full card;
 *  - reports free and total memory as cuMemGetInfo does;
 *  - backs its memory with anonymous MAP_NORESERVE mappings, so a 80 GiB card
 *    costs nothing until its pages are touched;
 *  - runs the work submitted to it on worker threads, each a stream: the
 *    card's own stream, and one more for every stream_open (the runtime opens
 *    one per logical device, so the logical devices of one card run side by
 *    side, drawing on the card's one capacity). Each stream runs its work in
 *    submission order. Work on three GPUs therefore really runs side by side,
 *    and a missing synchronisation shows up here first.
 *
 * A stream is a ring of fixed-size slots guarded by one mutex; the worker
 * runs each item without the lock held. Sequence numbers make events cheap:
 * an event is (stream, number of items submitted when recorded), and it has
 * passed once the stream has completed that many items. The worker spins
 * briefly before sleeping, so a busy stream hands work over without a futex
 * round trip. A copy between two streams runs on the destination's stream
 * after everything submitted to the source's so far, and the source's stream
 * then waits for the copy, so a later write to the source cannot land before
 * the copy has read it (the CUDA plugin orders its copies the same way). The
 * lazy copy (copy_d2d_lazy) leaves that wait out: the runtime uses it for
 * tensors it can order the later writes of itself (tensor.c, copy_contents).
 * A thread waiting for a stream is woken when what it waits for is done,
 * not on every item.
 *
 * Priorities. A stream's worker moves its nice value by its priority, itself,
 * when it starts (on Linux the nice value is a thread's, inherited from the
 * thread that opened the stream): low +10, normal unchanged, high -5 and critical -10 where the
 * process may lower nice values (root, or RLIMIT_NICE), else unchanged. Any
 * process may raise its own nice values, so a card split into a critical and
 * two low devices gives the critical device's worker the larger share of the
 * cores without privileges. The card's own stream is handed out only for a
 * normal priority, so its worker keeps the process's nice value.
 */
#define _GNU_SOURCE
#include "backend/backend.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SIM_MAX_GPUS 64
#define SIM_MAX_QUEUES 256       /* streams: the cards' own ones, then the opened ones */
#define SIM_RING 1024            /* slots per stream */
#define SIM_ARG_BYTES VDEV_HOST_ARG_MAX /* inline argument bytes per slot */
#define SIM_SPIN_ITERS 20000     /* polls before the worker sleeps */

struct sim_slot {
    vdev_host_fn fn;
    _Alignas(16) unsigned char arg[SIM_ARG_BYTES];
};

struct sim_card {
    int index;
    uint64_t capacity;
    uint64_t reserved;           /* guarded by mem_lock */
    pthread_mutex_t mem_lock;
    int own_taken;               /* its own stream is handed out (ctx lock) */
};

struct sim_stream {
    struct sim_card *card;
    int q;                       /* its index in the table */
    int nice_delta;              /* asked of the worker when it starts */

    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full, progress;
    struct sim_slot *ring;
    _Atomic uint64_t submitted;  /* items written (head) */
    _Atomic uint64_t completed;  /* items finished (tail) */
    int sleeping;                /* worker waits on not_empty (under lock) */
    int waiters;                 /* threads waiting on progress (under lock) */
    int full_waiters;            /* submitters waiting on not_full (under lock) */
    uint64_t wake_at;            /* the lowest count a progress waiter waits for
                                    (UINT64_MAX: none; under lock) */
    atomic_int stop;             /* set under lock; the worker's spin also reads it */
};

struct sim_ctx {
    int n;                       /* cards */
    struct sim_card *cards;
    pthread_mutex_t lock;        /* free slots of qs, own_taken */
    /* 0..n-1: the cards' own streams, for the life of the backend; n..: the
     * opened ones. A slot is written only by stream_open and stream_close,
     * which the runtime calls when no other thread uses that stream. */
    struct sim_stream *qs[SIM_MAX_QUEUES];
};

struct sim_event {
    struct sim_stream *s;
    uint64_t seq;
};

/* ---- the stream ---- */

/* The nice value of a priority: low +10, normal 0, high -5, critical -10. */
static int nice_delta(int priority)
{
    return priority == VDEV_PRIORITY_LOW        ? 10
           : priority == VDEV_PRIORITY_HIGH     ? -5
           : priority == VDEV_PRIORITY_CRITICAL ? -10
                                                : 0;
}

static void *sim_worker(void *varg);

static void *sim_worker_main(void *varg)
{
    struct sim_stream *g = varg;
    if (g->nice_delta) {
        /* Linux: the nice value of this thread alone. A raise below the
         * process's (a negative delta) needs privileges; without them the
         * worker keeps the nice value it inherited. */
        pid_t tid = (pid_t)syscall(SYS_gettid);
        errno = 0;
        int now = getpriority(PRIO_PROCESS, (id_t)tid);
        if (errno == 0)
            (void)setpriority(PRIO_PROCESS, (id_t)tid, now + g->nice_delta);
    }
    return sim_worker(g);
}

static void *sim_worker(void *vgpu)
{
    struct sim_stream *g = vgpu;
    for (;;) {
        uint64_t tail = atomic_load_explicit(&g->completed, memory_order_relaxed);
        /* Spin a little for new work before taking the lock to sleep. */
        for (int i = 0; i < SIM_SPIN_ITERS; i++) {
            if (atomic_load_explicit(&g->submitted, memory_order_acquire) != tail)
                break;
            /* stopping: no need to spin on (each yield may give the CPU away
             * for a time slice, and vdev_shutdown waits for this thread) */
            if (atomic_load_explicit(&g->stop, memory_order_relaxed))
                break;
            if ((i & 63) == 63)
                sched_yield();
        }
        pthread_mutex_lock(&g->lock);
        while (atomic_load_explicit(&g->submitted, memory_order_acquire) == tail && !g->stop) {
            g->sleeping = 1;
            pthread_cond_wait(&g->not_empty, &g->lock);
            g->sleeping = 0;
        }
        if (atomic_load_explicit(&g->submitted, memory_order_acquire) == tail && g->stop) {
            pthread_mutex_unlock(&g->lock);
            return NULL;
        }
        pthread_mutex_unlock(&g->lock);

        struct sim_slot *s = &g->ring[tail % SIM_RING];
        s->fn(s->arg);

        pthread_mutex_lock(&g->lock);
        atomic_store_explicit(&g->completed, tail + 1, memory_order_release);
        /* Waiters are woken when the first of them is due, not on every
         * item: a thread waiting for the end of a long queue (a read-back,
         * another stream's copy) would otherwise wake, take this lock and
         * sleep again once per item, costing the busy cores a context switch
         * each time. Those still not due go back to sleep and say again
         * what they wait for. */
        if (g->waiters && tail + 1 >= g->wake_at) {
            g->wake_at = UINT64_MAX;
            pthread_cond_broadcast(&g->progress);
        }
        if (g->full_waiters)
            pthread_cond_signal(&g->not_full);
        pthread_mutex_unlock(&g->lock);
    }
}

static enum vdev_status sim_submit_gpu(struct sim_stream *g, vdev_host_fn fn, const void *arg,
                                       size_t arg_bytes, uint64_t *seq_out)
{
    if (arg_bytes > SIM_ARG_BYTES)
        return vdev_error(VDEV_ERR_INTERNAL, "sim: work item argument of %zu bytes exceeds %d",
                          arg_bytes, SIM_ARG_BYTES);
    pthread_mutex_lock(&g->lock);
    /* The head is read again after every wait: other submitters may have
     * taken the slot that freed up while this one slept. */
    uint64_t head;
    while ((head = atomic_load_explicit(&g->submitted, memory_order_relaxed)) -
               atomic_load_explicit(&g->completed, memory_order_acquire) >=
           SIM_RING) {
        g->full_waiters++;
        pthread_cond_wait(&g->not_full, &g->lock);
        g->full_waiters--;
    }
    struct sim_slot *s = &g->ring[head % SIM_RING];
    s->fn = fn;
    if (arg_bytes)
        memcpy(s->arg, arg, arg_bytes);
    atomic_store_explicit(&g->submitted, head + 1, memory_order_release);
    if (g->sleeping)
        pthread_cond_signal(&g->not_empty);
    pthread_mutex_unlock(&g->lock);
    if (seq_out)
        *seq_out = head + 1;
    return VDEV_OK;
}

static void sim_wait_seq(struct sim_stream *g, uint64_t seq)
{
    if (atomic_load_explicit(&g->completed, memory_order_acquire) >= seq)
        return;
    pthread_mutex_lock(&g->lock);
    g->waiters++;
    while (atomic_load_explicit(&g->completed, memory_order_acquire) < seq) {
        if (seq < g->wake_at)
            g->wake_at = seq;
        pthread_cond_wait(&g->progress, &g->lock);
    }
    g->waiters--;
    pthread_mutex_unlock(&g->lock);
}

/* Frees a stream whose worker is not running (never started, or joined). */
static void stream_release(struct sim_stream *g)
{
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->not_empty);
    pthread_cond_destroy(&g->not_full);
    pthread_cond_destroy(&g->progress);
    free(g->ring);
    free(g);
}

/* Stops a stream's worker (after the work queued on it) and frees it. */
static void stream_free(struct sim_stream *g)
{
    pthread_mutex_lock(&g->lock);
    g->stop = 1;
    pthread_cond_signal(&g->not_empty);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->worker, NULL);
    stream_release(g);
}

/* A stream on `card` whose worker takes `delta` on its nice value, or NULL
 * (error set). */
static struct sim_stream *stream_new(struct sim_card *card, int q, int delta)
{
    struct sim_stream *g = vdev_calloc(1, sizeof *g);
    if (g)
        g->ring = vdev_calloc(SIM_RING, sizeof *g->ring);
    if (!g || !g->ring) {
        free(g);
        vdev_error(VDEV_ERR_OOM, "out of host memory making a stream of simulated GPU %d",
                   card->index);
        return NULL;
    }
    g->card = card;
    g->q = q;
    g->nice_delta = delta;
    g->wake_at = UINT64_MAX;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->not_empty, NULL);
    pthread_cond_init(&g->not_full, NULL);
    pthread_cond_init(&g->progress, NULL);
    if (pthread_create(&g->worker, NULL, sim_worker_main, g) != 0) {
        stream_release(g);
        vdev_error(VDEV_ERR_BACKEND, "cannot start a stream of simulated GPU %d", card->index);
        return NULL;
    }
    /* Named for top -H, ps -L and debuggers: GPU 2's own stream "vdev-sim2", a
     * stream opened on it later (queue 70 of the table) "vdev-sim2-q70". */
    char name[16];
    if (q == card->index)
        snprintf(name, sizeof name, "vdev-sim%u", (unsigned)q % 100u);
    else
        snprintf(name, sizeof name, "vdev-sim%u-q%u", (unsigned)card->index % 100u,
                 (unsigned)q % 1000u);
    (void)pthread_setname_np(g->worker, name);
    return g;
}

/* ---- devices ---- */

static struct sim_stream *gpu_of(void *vctx, int q)
{
    struct sim_ctx *ctx = vctx;
    VDEV_ASSERT(q >= 0 && q < SIM_MAX_QUEUES && ctx->qs[q]);
    return ctx->qs[q];
}

static struct sim_card *card_of(void *vctx, int q) { return gpu_of(vctx, q)->card; }

static int sim_n_devices(void *vctx) { return ((struct sim_ctx *)vctx)->n; }

static enum vdev_status sim_device_info(void *vctx, int dev, struct vdev_backend_device_info *out)
{
    struct sim_card *g = card_of(vctx, dev);
    memset(out, 0, sizeof *out);
    vdev_strlcpy(out->model, "Simulated GPU", sizeof out->model);
    out->total_bytes = g->capacity;
    out->cc_major = 8;
    out->cc_minor = 0;
    return VDEV_OK;
}

static enum vdev_status sim_mem_info(void *vctx, int dev, uint64_t *free_bytes, uint64_t *total)
{
    struct sim_card *g = card_of(vctx, dev);
    pthread_mutex_lock(&g->mem_lock);
    *free_bytes = g->capacity - g->reserved;
    pthread_mutex_unlock(&g->mem_lock);
    *total = g->capacity;
    return VDEV_OK;
}

static enum vdev_status sim_reserve(void *vctx, int dev, uint64_t bytes, void **base)
{
    struct sim_card *g = card_of(vctx, dev);
    char b1[32], b2[32];
    pthread_mutex_lock(&g->mem_lock);
    if (bytes > g->capacity - g->reserved) {
        uint64_t free_bytes = g->capacity - g->reserved;
        pthread_mutex_unlock(&g->mem_lock);
        return vdev_error(VDEV_ERR_OOM,
                          "simulated GPU %d: out of memory reserving %s (%s free of %s)", g->index,
                          vdev_format_bytes(bytes, b1, sizeof b1),
                          vdev_format_bytes(free_bytes, b2, sizeof b2),
                          vdev_format_bytes(g->capacity, (char[32]){0}, 32));
    }
    g->reserved += bytes;
    pthread_mutex_unlock(&g->mem_lock);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        pthread_mutex_lock(&g->mem_lock);
        g->reserved -= bytes;
        pthread_mutex_unlock(&g->mem_lock);
        vdev_error(VDEV_ERR_OOM, "simulated GPU %d: cannot map %s of host address space",
                   g->index, vdev_format_bytes(bytes, b1, sizeof b1));
        vdev_error_mark_host(); /* the host's limit, not the card's */
        return VDEV_ERR_OOM;
    }
    *base = p;
    return VDEV_OK;
}

static void sim_release(void *vctx, int dev, void *base, uint64_t bytes)
{
    struct sim_card *g = card_of(vctx, dev);
    munmap(base, bytes);
    pthread_mutex_lock(&g->mem_lock);
    VDEV_ASSERT(g->reserved >= bytes);
    g->reserved -= bytes;
    pthread_mutex_unlock(&g->mem_lock);
}

/* ---- copies ---- */

struct copy_arg {
    void *dst;
    const void *src;
    uint64_t bytes;
    struct sim_stream *wait_gpu; /* d2d: the source stream to wait for first */
    uint64_t wait_seq;
};

static void copy_fn(void *varg)
{
    struct copy_arg *a = varg;
    if (a->wait_gpu)
        sim_wait_seq(a->wait_gpu, a->wait_seq);
    if (a->bytes)
        memcpy(a->dst, a->src, a->bytes);
}

struct wait_arg {
    struct sim_stream *gpu;
    uint64_t seq;
};

static void wait_fn(void *varg)
{
    struct wait_arg *a = varg;
    sim_wait_seq(a->gpu, a->seq);
}

/* h2d and d2h: ordered on the stream, and complete on return. */
static enum vdev_status sim_copy_sync(void *vctx, int dev, void *dst, const void *src,
                                      uint64_t bytes)
{
    struct sim_stream *g = gpu_of(vctx, dev);
    struct copy_arg a = {dst, src, bytes, NULL, 0};
    uint64_t seq;
    enum vdev_status st = sim_submit_gpu(g, copy_fn, &a, sizeof a, &seq);
    if (st != VDEV_OK)
        return st;
    sim_wait_seq(g, seq);
    return VDEV_OK;
}

/* d2d: on the destination's stream, after everything submitted so far to the
 * source's stream; unless lazy, the source's stream then waits for the copy.
 * Returns at once. */
static enum vdev_status copy_d2d(void *vctx, int dst_dev, void *dst, int src_dev,
                                 const void *src, uint64_t bytes, int lazy, uint64_t after)
{
    struct sim_stream *gd = gpu_of(vctx, dst_dev), *gs = gpu_of(vctx, src_dev);
    struct copy_arg a = {dst, src, bytes, NULL, 0};
    if (gs != gd) {
        a.wait_gpu = gs;
        a.wait_seq = atomic_load_explicit(&gs->submitted, memory_order_acquire);
        if (after < a.wait_seq)
            a.wait_seq = after;
    }
    uint64_t seq;
    enum vdev_status st = sim_submit_gpu(gd, copy_fn, &a, sizeof a, &seq);
    if (st != VDEV_OK || gs == gd || lazy)
        return st;
    struct wait_arg w = {gd, seq};
    st = sim_submit_gpu(gs, wait_fn, &w, sizeof w, NULL);
    if (st != VDEV_OK)
        sim_wait_seq(gd, seq); /* no hazard left behind */
    return st;
}

static enum vdev_status sim_copy_d2d(void *vctx, int dst_dev, void *dst, int src_dev,
                                     const void *src, uint64_t bytes)
{
    return copy_d2d(vctx, dst_dev, dst, src_dev, src, bytes, 0, UINT64_MAX);
}

static enum vdev_status sim_copy_d2d_lazy(void *vctx, int dst_dev, void *dst, int src_dev,
                                          const void *src, uint64_t bytes, uint64_t after)
{
    return copy_d2d(vctx, dst_dev, dst, src_dev, src, bytes, 1, after);
}

/* The items submitted to the stream so far (an event's sequence number). */
static uint64_t sim_stream_position(void *vctx, int dev)
{
    return atomic_load_explicit(&gpu_of(vctx, dev)->submitted, memory_order_acquire);
}

/* ---- streams and events ---- */

static enum vdev_status sim_submit(void *vctx, int dev, vdev_host_fn fn, const void *arg,
                                   size_t arg_bytes)
{
    return sim_submit_gpu(gpu_of(vctx, dev), fn, arg, arg_bytes, NULL);
}

static enum vdev_status sim_sync(void *vctx, int dev)
{
    struct sim_stream *g = gpu_of(vctx, dev);
    sim_wait_seq(g, atomic_load_explicit(&g->submitted, memory_order_acquire));
    return VDEV_OK;
}

static enum vdev_status sim_event_record(void *vctx, int dev, void **event)
{
    struct sim_stream *g = gpu_of(vctx, dev);
    struct sim_event *e = vdev_malloc(sizeof *e);
    if (!e)
        return vdev_error(VDEV_ERR_OOM, "out of host memory recording an event");
    e->s = g;
    e->seq = atomic_load_explicit(&g->submitted, memory_order_acquire);
    *event = e;
    return VDEV_OK;
}

static int sim_event_done(void *vctx, void *event)
{
    (void)vctx;
    struct sim_event *e = event;
    return atomic_load_explicit(&e->s->completed, memory_order_acquire) >= e->seq;
}

static void sim_event_wait(void *vctx, void *event)
{
    (void)vctx;
    struct sim_event *e = event;
    sim_wait_seq(e->s, e->seq);
}

static enum vdev_status sim_stream_wait(void *vctx, int dev, void *event)
{
    struct sim_event *e = event;
    struct sim_stream *g = gpu_of(vctx, dev);
    if (e->s == g || sim_event_done(vctx, event))
        return VDEV_OK;
    struct wait_arg a = {e->s, e->seq};
    return sim_submit_gpu(g, wait_fn, &a, sizeof a, NULL);
}

static void sim_event_drop(void *vctx, void *event)
{
    (void)vctx;
    free(event);
}

/* Another stream on card `dev`: the card's own one when it is free and the
 * priority normal, else a new worker. */
static enum vdev_status sim_stream_open(void *vctx, int dev, int priority, int *q,
                                        uint64_t *held)
{
    struct sim_ctx *ctx = vctx;
    if (dev < 0 || dev >= ctx->n)
        return vdev_error(VDEV_ERR_NOT_FOUND, "sim backend has no device %d", dev);
    struct sim_card *card = &ctx->cards[dev];
    int delta = nice_delta(priority);
    *held = 0;
    pthread_mutex_lock(&ctx->lock);
    if (!delta && !card->own_taken) {
        card->own_taken = 1;
        pthread_mutex_unlock(&ctx->lock);
        *q = dev;
        return VDEV_OK;
    }
    int slot = ctx->n;
    while (slot < SIM_MAX_QUEUES && ctx->qs[slot])
        slot++;
    if (slot == SIM_MAX_QUEUES) {
        pthread_mutex_unlock(&ctx->lock);
        return vdev_error(VDEV_ERR_UNSUPPORTED, "sim backend: more than %d streams",
                          SIM_MAX_QUEUES);
    }
    struct sim_stream *g = stream_new(card, slot, delta);
    if (g)
        ctx->qs[slot] = g;
    pthread_mutex_unlock(&ctx->lock);
    if (!g)
        return vdev_last_status();
    *q = slot;
    return VDEV_OK;
}

static void sim_stream_close(void *vctx, int q)
{
    struct sim_ctx *ctx = vctx;
    struct sim_stream *g = gpu_of(vctx, q);
    sim_sync(vctx, q);
    pthread_mutex_lock(&ctx->lock);
    if (q < ctx->n) {
        g->card->own_taken = 0;
        g = NULL;
    } else {
        ctx->qs[q] = NULL;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (g)
        stream_free(g);
}

/* ---- life cycle ---- */

static void sim_destroy(void *vctx)
{
    struct sim_ctx *ctx = vctx;
    for (int q = 0; q < SIM_MAX_QUEUES; q++)
        if (ctx->qs[q])
            stream_free(ctx->qs[q]);
    for (int i = 0; i < ctx->n; i++)
        pthread_mutex_destroy(&ctx->cards[i].mem_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx->cards);
    free(ctx);
}

static const struct vdev_backend_ops sim_ops = {
    .api_version = VDEV_BACKEND_API_VERSION,
    .name = "sim",
    .is_gpu = 1,
    .host_addressable = 1,
    .n_devices = sim_n_devices,
    .device_info = sim_device_info,
    .mem_info = sim_mem_info,
    .reserve = sim_reserve,
    .release = sim_release,
    .extend = NULL,
    .copy_h2d = sim_copy_sync,
    .copy_d2h = sim_copy_sync,
    .copy_d2d = sim_copy_d2d,
    .copy_d2d_lazy = sim_copy_d2d_lazy,
    .stream_position = sim_stream_position,
    .submit_host = sim_submit,
    .synchronize = sim_sync,
    .event_record = sim_event_record,
    .event_done = sim_event_done,
    .event_wait = sim_event_wait,
    .stream_wait_event = sim_stream_wait,
    .event_drop = sim_event_drop,
    .run_kernel = NULL,
    .destroy = sim_destroy,
    .stream_open = sim_stream_open,
    .stream_close = sim_stream_close,
    .held_bytes = NULL, /* streams hold no device memory */
};

/* ---- the spec: "3x16GiB", "2x80GiB,1x24GiB", "16GiB" ---- */

#define SPEC_HELP "expected COUNTxSIZE[,COUNTxSIZE...], e.g. 3x16GiB or 2x80GiB,1x24GiB"

static enum vdev_status parse_spec(const char *spec, const char *var, uint64_t *caps, int *n_out)
{
    int n = 0;
    if (!spec[strspn(spec, " ")])
        return vdev_error(VDEV_ERR_CONFIG, "%s is empty (%s)", var, SPEC_HELP);
    const char *p = spec;
    while (*p) {
        char part[128];
        /* a part without the spaces around it ("3x16GiB, 1x8GiB") */
        size_t skip = strspn(p, " ");
        size_t len = strcspn(p + skip, ",");
        while (len && p[skip + len - 1] == ' ')
            len--;
        if (len == 0)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": empty part at offset %d (%s)", var,
                              spec, (int)(p - spec), SPEC_HELP);
        if (len >= sizeof part)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": part '%.*s...' is too long (%s)", var,
                              spec, 24, p + skip, SPEC_HELP);
        memcpy(part, p + skip, len);
        part[len] = '\0';
        p += skip + strcspn(p + skip, ",");
        /* count: digits, spaces, then 'x' (no sign, which strtol would take) */
        long count = 1;
        const char *size_txt = part;
        const char *x = strpbrk(part, "xX");
        if (x) {
            char *end;
            count = strtol(part, &end, 10);
            while (end < x && *end == ' ')
                end++;
            if (end != x || !isdigit((unsigned char)part[0]) || count < 1 ||
                count > SIM_MAX_GPUS)
                return vdev_error(VDEV_ERR_CONFIG,
                                  "%s=\"%s\": bad count in '%s' (a whole number 1..%d before "
                                  "'x'; %s)",
                                  var, spec, part, SIM_MAX_GPUS, SPEC_HELP);
            size_txt = x + 1 + strspn(x + 1, " ");
        }
        uint64_t cap;
        if (vdev_parse_bytes(size_txt, &cap) != VDEV_OK) {
            /* vdev_parse_bytes's words for a size beyond 64 bits */
            if (strstr(vdev_last_error(), "' is too large"))
                return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": size in '%s' is too large", var,
                                  spec, part);
            /* an unknown unit (one word: "EiB") or an exponent: the size
             * parser's reason says more */
            const char *why = vdev_last_error(), *unit = strstr(why, "' has an unknown unit '");
            if ((unit && !memchr(unit + 23, ' ', strcspn(unit + 23, "'"))) ||
                strstr(why, ": no exponents")) {
                char reason[256];
                vdev_strlcpy(reason, why, sizeof reason);
                return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": bad size in '%s': %s", var, spec,
                                  part, reason);
            }
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": bad size in '%s' (%s)", var, spec,
                              part, SPEC_HELP);
        }
        if (cap < (1ull << 20)) {
            /* A bare number is bytes: "3x16" most likely meant 16 GiB, "3x0.5" 0.5 GiB. */
            const char *tail = size_txt + strspn(size_txt, "0123456789.");
            int bare = tail[strspn(tail, " ")] == '\0' && strpbrk(size_txt, "123456789");
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": size in '%s' is below the smallest card of 1 MiB%s%s%s",
                              var, spec, part, bare ? " (a size without a unit is bytes: " : "",
                              bare ? size_txt : "", bare ? "GiB for gibibytes)" : "");
        }
        if (n + count > SIM_MAX_GPUS)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": more than %d simulated GPUs", var,
                              spec, SIM_MAX_GPUS);
        for (long i = 0; i < count; i++)
            caps[n++] = cap & ~(uint64_t)255;
        if (*p == ',') {
            p++;
            if (!p[strspn(p, " ")])
                return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": trailing ',' (%s)", var, spec,
                                  SPEC_HELP);
        }
    }
    *n_out = n;
    return VDEV_OK;
}

enum vdev_status vdev_backend_sim_check(const char *spec, const char *var)
{
    uint64_t caps[SIM_MAX_GPUS];
    int n = 0;
    return parse_spec(spec, var, caps, &n);
}

enum vdev_status vdev_backend_sim_new(const char *spec, const char *var, struct vdev_backend *out)
{
    uint64_t caps[SIM_MAX_GPUS];
    int n = 0;
    enum vdev_status st = parse_spec(spec, var, caps, &n);
    if (st != VDEV_OK)
        return st;
    struct sim_ctx *ctx = vdev_calloc(1, sizeof *ctx);
    if (ctx)
        ctx->cards = vdev_calloc((size_t)n, sizeof *ctx->cards);
    if (!ctx || !ctx->cards) {
        free(ctx);
        return vdev_error(VDEV_ERR_OOM, "out of host memory creating simulated GPUs");
    }
    pthread_mutex_init(&ctx->lock, NULL);
    for (int i = 0; i < n; i++) {
        struct sim_card *c = &ctx->cards[i];
        c->index = i;
        c->capacity = caps[i];
        pthread_mutex_init(&c->mem_lock, NULL);
        ctx->n = i + 1;
        if (!(ctx->qs[i] = stream_new(c, i, 0))) {
            /* stream_new's error, which names the GPU and says what failed */
            char msg[256];
            st = vdev_last_status();
            vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
            sim_destroy(ctx);
            return vdev_error(st, "%s", msg);
        }
    }
    out->ops = &sim_ops;
    out->ctx = ctx;
    return VDEV_OK;
}
