/* torch_alloc.c — libvdev-torch-alloc.so: PyTorch's pluggable CUDA allocator
 * served by vdev's logical devices (see vdev_torch_alloc.h).
 *
 * Each vdev logical device that PyTorch allocates from is a "target": its
 * canonical name, its statistics and its pending list. A block lives in one
 * of three places: in vdev's allocator (free), in the live table (PyTorch
 * holds it; an open-addressing hash from address to size, target and
 * PyTorch device), or in its target's pending list (freed on stream S, with
 * an event recorded on S). An allocation on S first takes the smallest
 * pending block of S that fits (at most twice the size asked, so a small
 * tensor does not pin a large block); then every pending block whose event
 * has passed goes back to vdev; then vdev's allocator serves it; and when
 * that fails for lack of memory, the allocator waits for the pending events,
 * gives their blocks back and asks once more.
 *
 * One mutex guards everything: allocations are short (a hash insert, a
 * short list scan, one call into vdev's allocator, which has its own lock).
 * Errors go to a thread-local message, since PyTorch sees only NULL.
 *
 * The library is a holder of vdev memory (vdev_mem_holder_add): while
 * PyTorch holds live blocks, vdev_shutdown() refuses, naming how many and
 * where; when it goes ahead, the pending blocks go back first and the
 * statistics start from zero with the next runtime. fork(): as vdev's own
 * runtime, the library is stopped in a child forked from a process whose
 * runtime runs (the blocks and streams are the parent's): the mutex is taken
 * around fork(), so the child's copy is consistent, and every call there
 * fails at once with VDEV_ERR_UNSUPPORTED and vdev's advice. */
#define _GNU_SOURCE
#include "torch_alloc_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TORCH 64   /* PyTorch device indices 0..63 */
#define MAX_TARGETS 64 /* distinct vdev logical devices */
#define MAX_PUSH 16    /* vdev_torch_push_device depth */
#define ROUND 256u     /* vdev's rounding unit */
#define ENV "VDEV_TORCH_DEVICES"
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct pending {
    void *ptr;
    uint64_t cap;         /* the block's size, 256-rounded */
    cudaStream_t stream;  /* freed on */
    void *event;          /* recorded on stream at the free */
};

struct target {
    char name[64];        /* "/device:GPU:1" */
    struct vdev_torch_stats st;
    struct pending *pend;
    int n_pend, cap_pend;
};

struct live {
    void *ptr;            /* NULL: empty slot */
    uint64_t size, cap;   /* as asked, and the block's size */
    int target, torch;    /* where it came from, PyTorch's device */
};

static struct {
    pthread_mutex_t lock;
    int env_read;             /* VDEV_TORCH_DEVICES parsed (or failed) */
    enum vdev_status env_status;
    char env_error[512];
    char env_name[MAX_TORCH][64]; /* from the environment ("" none) */
    int map[MAX_TORCH];       /* target + 1 once resolved, 0 not yet */
    int n_live_torch[MAX_TORCH];
    struct target targets[MAX_TARGETS];
    int n_targets;
    struct live *table;
    size_t table_cap, n_live; /* cap a power of two, n_live <= cap / 2 */
    struct vdev_torch_events ev;
    int ev_resolved;          /* ev chosen (code, or the default looked up) */
    int running_at_fork;      /* vdev's runtime ran when fork() was called */
    long forked_from;         /* in a child forked from a running runtime: the parent */
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local char err[512];
static _Thread_local enum vdev_status err_code; /* with err: VDEV_OK when err is "" */
static _Thread_local int stack[MAX_PUSH], depth;

/* Sets the thread's message; returns code. */
static enum vdev_status fail(enum vdev_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static enum vdev_status fail(enum vdev_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, sizeof err, fmt, ap);
    va_end(ap);
    err_code = code;
    return code;
}

/* Forgets the thread's last failure (each call begins so). */
static void clear_err(void)
{
    err[0] = '\0';
    err_code = VDEV_OK;
}

VDEV_API const char *vdev_torch_last_error(void) { return err; }

enum vdev_status vdev_torch_last_status(void) { return err_code; }

/* ---- fork() and vdev_shutdown() ---- */

static void fork_prepare(void)
{
    pthread_mutex_lock(&G.lock);
    G.running_at_fork = vdev_is_initialized();
}

static void fork_parent(void) { pthread_mutex_unlock(&G.lock); }

static void fork_child(void)
{
    if (G.running_at_fork && !G.forked_from)
        G.forked_from = (long)getppid();
    pthread_mutex_unlock(&G.lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void watch_fork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* Each call begins here: clears the thread's error; VDEV_ERR_UNSUPPORTED
 * (message set, naming fn) in a child forked from a running runtime, where
 * the text is vdev's own refusal of such a child. */
static enum vdev_status enter(const char *fn)
{
    pthread_once(&fork_once, watch_fork);
    clear_err();
    if (!G.forked_from) /* set in the child before its first call */
        return VDEV_OK;
    static const char prefix[] = "vdev_init: ";
    const char *why = vdev_init() != VDEV_OK ? vdev_last_error() : "";
    if (strncmp(why, prefix, sizeof prefix - 1) == 0)
        why += sizeof prefix - 1;
    else
        why = "vdev was started in the process from which this process was forked";
    return fail(VDEV_ERR_UNSUPPORTED, "%s: %s", fn, why);
}

/* "(2 on /device:GPU:0, 1 on /device:GPU:2)": where the live blocks of
 * PyTorch's device torch (-1: all) are, devices in the order of their first
 * use; lock held. */
static void where_live(int torch, char *buf, size_t cap)
{
    int n[MAX_TARGETS] = {0};
    for (size_t i = 0; i < G.table_cap; i++)
        if (G.table[i].ptr && (torch < 0 || G.table[i].torch == torch))
            n[G.table[i].target]++;
    size_t len = 0;
    buf[0] = '\0';
    for (int t = 0; t < G.n_targets && len < cap; t++)
        if (n[t]) {
            int w = snprintf(buf + len, cap - len, "%s%d on %s", len ? ", " : "(", n[t],
                             G.targets[t].name);
            len += w > 0 ? (size_t)w : 0;
        }
    if (len < cap)
        snprintf(buf + len, cap - len, ")");
}

static int holder_live(void *ctx, char *msg, size_t cap)
{
    (void)ctx;
    pthread_mutex_lock(&G.lock);
    int n = (int)G.n_live;
    if (n) {
        char where[384];
        where_live(-1, where, sizeof where);
        snprintf(msg, cap,
                 "%d block%s of the PyTorch allocator (libvdev-torch-alloc.so) %s live %s: "
                 "torch tensors over vdev memory; delete them first",
                 n, n == 1 ? "" : "s", n == 1 ? "is" : "are", where);
    }
    pthread_mutex_unlock(&G.lock);
    return n;
}

static uint64_t drain(struct target *t);

/* vdev_shutdown() goes ahead: the pending blocks go back while the runtime
 * still runs, and the next runtime's statistics start from zero (the
 * mappings stay: they name devices, not blocks). */
static void holder_forget(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&G.lock);
    for (int i = 0; i < G.n_targets; i++) {
        drain(&G.targets[i]);
        memset(&G.targets[i].st, 0, sizeof G.targets[i].st);
    }
    memset(G.n_live_torch, 0, sizeof G.n_live_torch);
    pthread_mutex_unlock(&G.lock);
}

static pthread_once_t holder_once = PTHREAD_ONCE_INIT;
static const struct vdev_mem_holder holder = {holder_live, holder_forget, NULL};
static _Atomic int holder_added;

static void add_holder(void)
{
    /* cannot fail: the first of at most 8 of its kind */
    if (vdev_mem_holder_add(&holder) == VDEV_OK)
        atomic_store(&holder_added, 1);
}

/* This library's code goes when it is unloaded (dlclose): vdev must not
 * call its holder functions after that. */
__attribute__((destructor)) static void remove_holder(void)
{
    if (atomic_exchange(&holder_added, 0))
        vdev_mem_holder_remove(&holder);
}

/* ---- events: the CUDA driver's, when the process has loaded it ---- */

typedef int (*cu_event_create_fn)(void **ev, unsigned flags);
typedef int (*cu_event_fn)(void *ev);
typedef int (*cu_event_record_fn)(void *ev, cudaStream_t s);
typedef int (*cu_stream_sync_fn)(cudaStream_t s);

static struct {
    cu_event_create_fn create;
    cu_event_record_fn record;
    cu_event_fn query, sync, destroy;
    cu_stream_sync_fn stream_sync;
    void *pool[256];          /* events to record again */
    int n_pool;
} CU;

#define CU_EVENT_DISABLE_TIMING 0x2

static void *cu_record(void *ctx, cudaStream_t s)
{
    void *ev = CU.n_pool ? CU.pool[--CU.n_pool] : NULL;
    if (!ev && CU.create(&ev, CU_EVENT_DISABLE_TIMING) != 0)
        ev = NULL;
    if (ev && CU.record(ev, s) == 0)
        return ev;
    /* No event (no current context?): wait for the stream instead, so the
     * block can go back at once. */
    if (ev)
        CU.destroy(ev);
    CU.stream_sync(s);
    return NULL;
}

/* An error other than "not ready" cannot pass later: taken as passed. */
static int cu_done(void *ctx, void *ev) { return CU.query(ev) != 600 /* CUDA_ERROR_NOT_READY */; }
static void cu_wait(void *ctx, void *ev) { CU.sync(ev); }
static void cu_drop(void *ctx, void *ev)
{
    if (CU.n_pool < (int)ARRAY_LEN(CU.pool))
        CU.pool[CU.n_pool++] = ev;
    else
        CU.destroy(ev);
}

/* The default events: the CUDA driver if it is loaded (never loads it). */
static void resolve_events(void)
{
    if (G.ev_resolved)
        return;
    G.ev_resolved = 1;
    memset(&G.ev, 0, sizeof G.ev);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return;
    /* (ISO C has no cast from dlsym's void * to a function pointer.) */
    *(void **)&CU.create = dlsym(h, "cuEventCreate");
    *(void **)&CU.record = dlsym(h, "cuEventRecord");
    *(void **)&CU.query = dlsym(h, "cuEventQuery");
    *(void **)&CU.sync = dlsym(h, "cuEventSynchronize");
    *(void **)&CU.destroy = dlsym(h, "cuEventDestroy_v2");
    *(void **)&CU.stream_sync = dlsym(h, "cuStreamSynchronize");
    dlclose(h); /* NOLOAD took a reference; the driver stays loaded */
    if (CU.create && CU.record && CU.query && CU.sync && CU.destroy && CU.stream_sync)
        G.ev = (struct vdev_torch_events){cu_record, cu_done, cu_wait, cu_drop, NULL};
}

/* ---- VDEV_TORCH_DEVICES="0:GPU:1,1:/device:GPU:2" ---- */

static void read_env(void)
{
    if (G.env_read)
        return;
    G.env_read = 1;
    G.env_status = VDEV_OK;
    memset(G.env_name, 0, sizeof G.env_name);
    const char *v = getenv(ENV);
    if (!v)
        return;
    const char *p = v;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[96];
        const char *why = NULL;
        char *colon = NULL, *rest = NULL;
        long idx = -1;
        if (len == 0 || len >= sizeof item)
            why = len ? "entry too long" : "empty entry";
        else {
            memcpy(item, p, len);
            item[len] = '\0';
            idx = strtol(item, &colon, 10);
            if (colon == item || *colon != ':')
                why = "expected TORCH_INDEX:VDEV_DEVICE";
            else if (idx < 0 || idx >= MAX_TORCH)
                why = "PyTorch device index outside 0..63";
            else if (!*(rest = colon + 1))
                why = "no vdev device after ':'";
            else if (G.env_name[idx][0])
                why = "PyTorch device index given twice";
        }
        if (why) {
            G.env_status = VDEV_ERR_CONFIG;
            snprintf(G.env_error, sizeof G.env_error, "%s=\"%s\": %s in '%.*s' (expected e.g. "
                     "0:GPU:1,1:GPU:2)", ENV, v, why, (int)(len > 64 ? 64 : len), p);
            return;
        }
        snprintf(G.env_name[idx], sizeof G.env_name[idx], "%s", rest);
        p += len;
        if (*p == ',' && !*++p) {
            G.env_status = VDEV_ERR_CONFIG;
            snprintf(G.env_error, sizeof G.env_error, "%s=\"%s\": empty entry at the end (expected "
                     "e.g. 0:GPU:1,1:GPU:2)", ENV, v);
            return;
        }
    }
}

/* ---- targets ---- */

/* The target of a vdev device name (any accepted form), made on first use;
 * -1 with the message set. Starts vdev's runtime. */
static int target_of(const char *name)
{
    char canon[64];
    if (vdev_device_canonical_name(name, canon, sizeof canon) != VDEV_OK) {
        fail(vdev_last_status(), "%s", vdev_last_error());
        return -1;
    }
    /* PyTorch's CUDA kernels read the blocks: vdev's CPU device hands out
     * pageable host memory, which they cannot (simulated GPUs stand for GPUs) */
    if (strstr(canon, "/device:CPU:")) {
        fail(VDEV_ERR_INVALID_ARG, "%s is host memory: PyTorch's CUDA tensors take a vdev GPU",
             canon);
        return -1;
    }
    for (int i = 0; i < G.n_targets; i++)
        if (strcmp(G.targets[i].name, canon) == 0)
            return i;
    if (G.n_targets == MAX_TARGETS) {
        fail(VDEV_ERR_INVALID_ARG, "more than %d vdev devices under PyTorch", MAX_TARGETS);
        return -1;
    }
    struct target *t = &G.targets[G.n_targets];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", canon);
    return G.n_targets++;
}

/* Where PyTorch's device `torch` allocates for this thread; -1 on failure. */
static int resolve(int torch)
{
    if (depth)
        return stack[depth - 1];
    if (G.map[torch])
        return G.map[torch] - 1;
    char dflt[32];
    snprintf(dflt, sizeof dflt, "GPU:%d", torch);
    int t = target_of(G.env_name[torch][0] ? G.env_name[torch] : dflt);
    if (t >= 0)
        G.map[torch] = t + 1;
    else if (G.env_name[torch][0]) {
        char msg[sizeof err];
        memcpy(msg, err, sizeof msg); /* err is terminated within its size */
        fail(VDEV_ERR_CONFIG, "%s maps PyTorch device %d to %s: %s", ENV, torch,
             G.env_name[torch], msg);
    }
    return t;
}

/* ---- the live table ---- */

static size_t slot_of(const void *ptr, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)ptr >> 8; /* blocks are 256-aligned */
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static struct live *lookup(const void *ptr)
{
    if (!G.table_cap)
        return NULL;
    for (size_t i = slot_of(ptr, G.table_cap);; i = (i + 1) & (G.table_cap - 1)) {
        if (G.table[i].ptr == ptr)
            return &G.table[i];
        if (!G.table[i].ptr)
            return NULL;
    }
}

static void place(struct live *tab, size_t cap, const struct live *e)
{
    size_t i = slot_of(e->ptr, cap);
    while (tab[i].ptr)
        i = (i + 1) & (cap - 1);
    tab[i] = *e;
}

/* Inserts e; VDEV_ERR_OOM when the table cannot grow. */
static enum vdev_status insert(const struct live *e)
{
    if (2 * (G.n_live + 1) > G.table_cap) {
        size_t cap = G.table_cap ? 2 * G.table_cap : 1024;
        struct live *tab = calloc(cap, sizeof *tab);
        if (!tab)
            return fail(VDEV_ERR_OOM, "out of host memory for the table of live blocks");
        for (size_t i = 0; i < G.table_cap; i++)
            if (G.table[i].ptr)
                place(tab, cap, &G.table[i]);
        free(G.table);
        G.table = tab;
        G.table_cap = cap;
    }
    place(G.table, G.table_cap, e);
    G.n_live++;
    return VDEV_OK;
}

/* Removes the entry e points at (backward-shift deletion). */
static void erase(struct live *e)
{
    size_t mask = G.table_cap - 1, i = (size_t)(e - G.table);
    G.table[i].ptr = NULL;
    for (size_t j = (i + 1) & mask; G.table[j].ptr; j = (j + 1) & mask) {
        size_t home = slot_of(G.table[j].ptr, G.table_cap);
        /* Move j back to i when its home is not within (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            G.table[i] = G.table[j];
            G.table[j].ptr = NULL;
            i = j;
        }
    }
    G.n_live--;
}

/* ---- pending blocks ---- */

static void unpend(struct target *t, int i)
{
    t->st.pending_bytes -= t->pend[i].cap;
    t->pend[i] = t->pend[--t->n_pend];
}

/* Gives pending block i back to vdev (its event has passed) and drops it. */
static void give_back(struct target *t, int i)
{
    if (G.ev.drop)
        G.ev.drop(G.ev.ctx, t->pend[i].event);
    vdev_mem_free(t->name, t->pend[i].ptr);
    unpend(t, i);
}

/* Gives back every pending block of t whose event has passed. */
static void poll(struct target *t)
{
    for (int i = t->n_pend - 1; i >= 0; i--)
        if (G.ev.done(G.ev.ctx, t->pend[i].event))
            give_back(t, i);
}

/* Waits for every pending event of t and gives the blocks back; returns how
 * many it waited for. */
static uint64_t drain(struct target *t)
{
    uint64_t n = (uint64_t)t->n_pend;
    for (int i = t->n_pend - 1; i >= 0; i--) {
        G.ev.wait(G.ev.ctx, t->pend[i].event);
        give_back(t, i);
    }
    return n;
}

/* ---- PyTorch's two functions ---- */

VDEV_API void *vdev_torch_malloc(ssize_t size, int device, cudaStream_t stream)
{
    if (enter("vdev_torch_malloc") != VDEV_OK)
        return NULL;
    if (size <= 0) {
        if (size < 0)
            fail(VDEV_ERR_INVALID_ARG, "vdev_torch_malloc: negative size %zd", size);
        return NULL;
    }
    if (device < 0 || device >= MAX_TORCH) {
        fail(VDEV_ERR_INVALID_ARG, "vdev_torch_malloc: PyTorch device %d outside 0..%d", device,
             MAX_TORCH - 1);
        return NULL;
    }
    pthread_once(&holder_once, add_holder);
    pthread_mutex_lock(&G.lock);
    void *ptr = NULL;
    read_env();
    resolve_events();
    if (G.env_status != VDEV_OK) {
        fail(G.env_status, "%s", G.env_error);
        goto out;
    }
    int ti = resolve(device);
    if (ti < 0)
        goto out;
    struct target *t = &G.targets[ti];
    uint64_t cap = ((uint64_t)size + ROUND - 1) / ROUND * ROUND;
    /* A block freed on this stream: ordered after its last use by the stream. */
    int best = -1;
    for (int i = 0; i < t->n_pend; i++)
        if (t->pend[i].stream == stream && t->pend[i].cap >= cap && t->pend[i].cap <= 2 * cap &&
            (best < 0 || t->pend[i].cap < t->pend[best].cap))
            best = i;
    if (best >= 0) {
        struct live e = {t->pend[best].ptr, (uint64_t)size, t->pend[best].cap, ti, device};
        if (insert(&e) != VDEV_OK)
            goto failed;
        ptr = e.ptr;
        if (G.ev.drop)
            G.ev.drop(G.ev.ctx, t->pend[best].event);
        unpend(t, best);
        t->st.n_same_stream_reuses++;
    } else {
        if (t->n_pend)
            poll(t);
        enum vdev_status st = vdev_mem_alloc(t->name, (uint64_t)size, &ptr);
        if (st == VDEV_ERR_OOM && t->n_pend) {
            t->st.n_event_waits += drain(t);
            st = vdev_mem_alloc(t->name, (uint64_t)size, &ptr);
        }
        if (st != VDEV_OK) {
            fail(st, "%s", vdev_last_error());
            goto failed;
        }
        struct live e = {ptr, (uint64_t)size, cap, ti, device};
        if (insert(&e) != VDEV_OK) {
            vdev_mem_free(t->name, ptr);
            ptr = NULL;
            goto failed;
        }
    }
    G.n_live_torch[device]++;
    t->st.allocated_bytes += (uint64_t)size;
    if (t->st.allocated_bytes > t->st.peak_allocated_bytes)
        t->st.peak_allocated_bytes = t->st.allocated_bytes;
    t->st.n_allocs++;
    t->st.n_allocs_total++;
    goto out;
failed:
    t->st.n_failed++;
out:
    pthread_mutex_unlock(&G.lock);
    return ptr;
}

VDEV_API void vdev_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream)
{
    if (!ptr || enter("vdev_torch_free") != VDEV_OK)
        return; /* in a forked child: the parent's block, not the child's to free */
    pthread_mutex_lock(&G.lock);
    struct live *e = lookup(ptr);
    if (!e) {
        /* counted on the device PyTorch names, where it has one */
        int ti = device >= 0 && device < MAX_TORCH && G.map[device] ? G.map[device] - 1
                 : depth                                              ? stack[depth - 1]
                                                                      : -1;
        if (ti >= 0 && ti < G.n_targets)
            G.targets[ti].st.n_bad_frees++;
        fail(VDEV_ERR_INVALID_ARG, "vdev_torch_free: %p is not a block of vdev_torch_malloc", ptr);
        pthread_mutex_unlock(&G.lock);
        return;
    }
    struct live b = *e;
    erase(e);
    struct target *t = &G.targets[b.target];
    G.n_live_torch[b.torch]--;
    t->st.allocated_bytes -= b.size;
    t->st.n_allocs--;
    t->st.n_frees_total++;
    resolve_events();
    void *ev = G.ev.record ? G.ev.record(G.ev.ctx, stream) : NULL;
    if (ev && t->n_pend == t->cap_pend) {
        int cap = t->cap_pend ? 2 * t->cap_pend : 64;
        struct pending *p = realloc(t->pend, (size_t)cap * sizeof *p);
        if (p) {
            t->pend = p;
            t->cap_pend = cap;
        } else { /* no room to remember it: wait for the stream here */
            G.ev.wait(G.ev.ctx, ev);
            G.ev.drop(G.ev.ctx, ev);
            ev = NULL;
        }
    }
    if (ev) {
        t->pend[t->n_pend++] = (struct pending){ptr, b.cap, stream, ev};
        t->st.pending_bytes += b.cap;
        poll(t);
    } else {
        vdev_mem_free(t->name, ptr);
    }
    pthread_mutex_unlock(&G.lock);
}

/* ---- configuration and statistics ---- */

VDEV_API enum vdev_status vdev_torch_set_device(int torch, const char *name)
{
    if (enter("vdev_torch_set_device") != VDEV_OK)
        return err_code;
    if (torch < 0 || torch >= MAX_TORCH)
        return fail(VDEV_ERR_INVALID_ARG, "vdev_torch_set_device: PyTorch device %d outside 0..%d",
                    torch, MAX_TORCH - 1);
    if (!name)
        return fail(VDEV_ERR_INVALID_ARG, "vdev_torch_set_device: the vdev device is NULL");
    pthread_mutex_lock(&G.lock);
    enum vdev_status st = VDEV_OK;
    int t = target_of(name);
    if (t < 0)
        st = err_code; /* target_of's: vdev's, or its own */
    else if (G.map[torch] && G.map[torch] != t + 1 && G.n_live_torch[torch]) {
        char where[384];
        where_live(torch, where, sizeof where);
        st = fail(VDEV_ERR_INVALID_ARG,
                  "vdev_torch_set_device: PyTorch device %d has %d live block%s %s; map it "
                  "before its first allocation",
                  torch, G.n_live_torch[torch], G.n_live_torch[torch] == 1 ? "" : "s", where);
    } else {
        G.map[torch] = t + 1;
    }
    pthread_mutex_unlock(&G.lock);
    return st;
}

VDEV_API enum vdev_status vdev_torch_push_device(const char *name)
{
    if (enter("vdev_torch_push_device") != VDEV_OK)
        return err_code;
    if (!name)
        return fail(VDEV_ERR_INVALID_ARG, "vdev_torch_push_device: the vdev device is NULL");
    if (depth == MAX_PUSH)
        return fail(VDEV_ERR_INVALID_ARG, "vdev_torch_push_device: nested deeper than %d",
                    MAX_PUSH);
    pthread_mutex_lock(&G.lock);
    int t = target_of(name);
    pthread_mutex_unlock(&G.lock);
    if (t < 0)
        return err_code;
    stack[depth++] = t;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_torch_pop_device(void)
{
    clear_err();
    if (!depth)
        return fail(VDEV_ERR_INVALID_ARG, "vdev_torch_pop_device: no device pushed");
    depth--;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_torch_stats(const char *name, struct vdev_torch_stats *out)
{
    if (enter("vdev_torch_stats") != VDEV_OK)
        return err_code;
    if (!name || !out)
        return fail(VDEV_ERR_INVALID_ARG, "vdev_torch_stats: NULL argument");
    char canon[64];
    if (vdev_device_canonical_name(name, canon, sizeof canon) != VDEV_OK)
        return fail(vdev_last_status(), "%s", vdev_last_error());
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&G.lock);
    int i = 0;
    while (i < G.n_targets && strcmp(G.targets[i].name, canon) != 0)
        i++;
    if (i == G.n_targets)
        st = fail(VDEV_ERR_NOT_FOUND, "vdev_torch_stats: PyTorch has allocated nothing on %s",
                  canon);
    else
        *out = G.targets[i].st;
    pthread_mutex_unlock(&G.lock);
    return st;
}

static int n_pending_all(void)
{
    int n = 0;
    for (int i = 0; i < G.n_targets; i++)
        n += G.targets[i].n_pend;
    return n;
}

VDEV_API enum vdev_status vdev_torch_set_events(const struct vdev_torch_events *ev)
{
    if (enter("vdev_torch_set_events") != VDEV_OK)
        return err_code;
    if (ev && (!ev->record || !ev->done || !ev->wait || !ev->drop))
        return fail(VDEV_ERR_INVALID_ARG, "vdev_torch_set_events: every function is needed");
    pthread_mutex_lock(&G.lock);
    enum vdev_status st = VDEV_OK;
    int n = n_pending_all();
    if (n)
        st = fail(VDEV_ERR_INVALID_ARG,
                  "vdev_torch_set_events: %d blocks wait for events; call vdev_torch_empty_cache "
                  "first",
                  n);
    else if (ev) {
        G.ev = *ev;
        G.ev_resolved = 1;
    } else {
        G.ev_resolved = 0;
    }
    pthread_mutex_unlock(&G.lock);
    return st;
}

VDEV_API void vdev_torch_empty_cache(void)
{
    if (enter("vdev_torch_empty_cache") != VDEV_OK)
        return;
    pthread_mutex_lock(&G.lock);
    for (int i = 0; i < G.n_targets; i++)
        drain(&G.targets[i]);
    pthread_mutex_unlock(&G.lock);
}

VDEV_API enum vdev_status vdev_torch_reset(void)
{
    if (enter("vdev_torch_reset") != VDEV_OK)
        return err_code;
    pthread_mutex_lock(&G.lock);
    enum vdev_status st = VDEV_OK;
    int n = n_pending_all();
    if (G.n_live || n)
        st = fail(VDEV_ERR_INVALID_ARG,
                  "vdev_torch_reset: %zu blocks are live and %d wait for events (PyTorch still "
                  "holds memory, or vdev_torch_empty_cache was not called)",
                  G.n_live, n);
    else {
        for (int i = 0; i < G.n_targets; i++)
            free(G.targets[i].pend);
        free(G.table);
        while (CU.n_pool)
            CU.destroy(CU.pool[--CU.n_pool]);
        G.table = NULL;
        G.table_cap = 0;
        G.n_targets = 0;
        G.env_read = 0;
        G.ev_resolved = 0;
        memset(G.map, 0, sizeof G.map);
    }
    pthread_mutex_unlock(&G.lock);
    return st;
}
