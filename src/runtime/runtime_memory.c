/* runtime_memory.c — the memory of the logical devices at run time: the
 * queries and raw blocks of the public API (vdev_memory_info,
 * vdev_mem_alloc and friends), the governance calls (vdev_memory_set_limits,
 * the priority, the pressure callback), each going to its device's member of
 * its card's pool (src/alloc/govern.h), and the collective library's share
 * of a card's budget. A card with one logical device, on a backend whose own
 * library can run collectives (NCCL), gets one more member at start-up
 * (vdev_runtime_lib_add): the library's buffers, a floor set when a
 * communicator takes them (vdev_runtime_card_charge), so they too come out
 * of the card's budget; the card's logical device makes room for it, and
 * gets back what it gave once the last communicator is gone. The device
 * table itself, built and torn down in runtime.c, is immutable while the
 * runtime runs, so nothing here locks it. Holders of raw blocks that vdev
 * cannot see (vdev_mem_holder_add: PyTorch's allocator) are asked before a
 * shutdown whether their blocks are live, and told when it goes ahead. */
#include "runtime/observe.h"

#include <pthread.h>
#include <string.h>

/* ---- out-of-memory report: what made each live block ---- */
static struct {
    pthread_mutex_t lock;
    const char **tags[VDEV_MAX_LDEVS]; /* per device, by allocator handle */
    uint32_t cap[VDEV_MAX_LDEVS];
    uint32_t generation;
} OT = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Frees every device's tags; OT.lock held. */
static void tags_free_locked(void)
{
    for (int i = 0; i < VDEV_MAX_LDEVS; i++) {
        free(OT.tags[i]);
        OT.tags[i] = NULL;
        OT.cap[i] = 0;
    }
}

void vdev_runtime_tag_block(const struct vdev_ldev *dev, uint32_t handle, const char *tag)
{
    pthread_mutex_lock(&OT.lock);
    if (OT.generation != vdev_runtime_generation()) { /* a new start-up: forget */
        tags_free_locked();
        OT.generation = vdev_runtime_generation();
    }
    if (handle >= OT.cap[dev->id]) {
        uint32_t cap = OT.cap[dev->id] ? OT.cap[dev->id] : 1024;
        while (cap <= handle)
            cap *= 2;
        const char **t = vdev_realloc(OT.tags[dev->id], cap * sizeof *t);
        if (!t) { /* the report loses a tag, nothing else */
            pthread_mutex_unlock(&OT.lock);
            return;
        }
        memset(t + OT.cap[dev->id], 0, (cap - OT.cap[dev->id]) * sizeof *t);
        OT.tags[dev->id] = t;
        OT.cap[dev->id] = cap;
    }
    OT.tags[dev->id][handle] = tag;
    pthread_mutex_unlock(&OT.lock);
}

void vdev_runtime_tags_forget(void)
{
    pthread_mutex_lock(&OT.lock);
    tags_free_locked();
    pthread_mutex_unlock(&OT.lock);
}

/* Called by the allocator's dump with its lock held. */
const char *vdev_runtime_block_tag(void *user, uint32_t handle)
{
    const struct vdev_ldev *dev = user;
    const char *t = NULL;
    pthread_mutex_lock(&OT.lock);
    if (OT.generation == vdev_runtime_generation() && handle < OT.cap[dev->id])
        t = OT.tags[dev->id][handle];
    pthread_mutex_unlock(&OT.lock);
    return t;
}

/* The collective library's member of each card (runtime.c adds them). */
static struct {
    vdev_pool_t *pool[VDEV_MAX_GPUS];  /* the card's pool, where it has the member */
    int member[VDEV_MAX_GPUS];         /* the library's member of the pool, or -1 */
    uint64_t bytes[VDEV_MAX_GPUS];     /* its floor: what communicators hold */
    uint64_t cut_floor[VDEV_MAX_GPUS]; /* taken off the card's logical device's floor */
    uint64_t cut_ceil[VDEV_MAX_GPUS];  /* and off its ceiling, for the library */
    pthread_mutex_t lock;              /* bytes, cut_* */
} Lib = {.lock = PTHREAD_MUTEX_INITIALIZER};

void vdev_runtime_lib_forget(void)
{
    for (int g = 0; g < VDEV_MAX_GPUS; g++) {
        Lib.pool[g] = NULL;
        Lib.member[g] = -1;
        Lib.bytes[g] = 0;
        Lib.cut_floor[g] = Lib.cut_ceil[g] = 0;
    }
}

enum vdev_status vdev_runtime_lib_add(int gpu, vdev_pool_t *pool)
{
    enum vdev_status st = vdev_pool_add(pool, "collective library buffers", 0, 0,
                                        VDEV_PRIORITY_NORMAL, &Lib.member[gpu]);
    if (st == VDEV_OK)
        Lib.pool[gpu] = pool;
    return st;
}

/* The pool member of the one logical device of card gpu, or -1. */
static int sole_member(int gpu)
{
    for (int i = vdev_runtime_n_cpus(); i < vdev_runtime_n_devices(); i++) {
        const struct vdev_ldev *d = vdev_runtime_device(i);
        if (d->type == VDEV_DEVICE_GPU && d->physical == gpu)
            return d->member;
    }
    return -1;
}

enum vdev_status vdev_runtime_card_charge(int gpu, int64_t delta)
{
    if (gpu < 0 || gpu >= VDEV_MAX_GPUS || !Lib.pool[gpu] || Lib.member[gpu] < 0)
        return vdev_error(VDEV_ERR_UNSUPPORTED, "/physical_device:GPU:%d: no share of its budget "
                                                "for a collective library (it has more than one "
                                                "logical device)",
                          gpu);
    /* The pressure callbacks these changes call are made once Lib.lock is
     * released: one may create or destroy a communicator (charge again). */
    struct vdev_pool_calls calls;
    calls.n = 0;
    pthread_mutex_lock(&Lib.lock);
    uint64_t now = Lib.bytes[gpu];
    uint64_t want = delta < 0 && (uint64_t)-delta > now ? 0 : now + (uint64_t)delta;
    want = (want + 255) & ~(uint64_t)255;
    vdev_pool_t *p = Lib.pool[gpu];
    int dev = sole_member(gpu), lib = Lib.member[gpu];
    struct vdev_memory_limits d, l;
    vdev_pool_get(p, dev, &d);
    vdev_pool_get(p, lib, &l);
    enum vdev_status st = VDEV_OK;
    if (want > now) {
        /* The card's logical device (alone on it, its floor often the whole
         * budget) makes room: its floor and ceiling come down to what the
         * library leaves; refused while it holds more than that in use. */
        uint64_t room = want < d.card_budget_bytes ? d.card_budget_bytes - want : 0;
        uint64_t floor = d.floor_bytes < room ? d.floor_bytes : room;
        uint64_t ceil = d.ceiling_bytes < room ? d.ceiling_bytes : room;
        st = vdev_pool_set_limits_ex(p, dev, floor, ceil, 0, NULL, &calls);
        if (st == VDEV_OK) {
            st = vdev_pool_set_limits_ex(p, lib, want, want, 0, NULL, &calls);
            if (st != VDEV_OK) {
                /* Undone as it was: a preallocated region that lowering the
                 * floor gave up is pinned (or preallocated) again. */
                enum vdev_status keep = vdev_last_status();
                char msg[512];
                vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
                vdev_pool_set_limits_ex(p, dev, d.floor_bytes, d.ceiling_bytes, VDEV_POOL_UNDO,
                                        NULL, &calls);
                vdev_error(keep, "%s", msg);
            }
        }
        if (st == VDEV_OK) {
            Lib.cut_floor[gpu] += d.floor_bytes - floor;
            Lib.cut_ceil[gpu] += d.ceiling_bytes - ceil;
        }
    } else if (want < now) {
        st = vdev_pool_set_limits_ex(p, lib, want,
                                     want > l.ceiling_bytes ? want : l.ceiling_bytes, 0, NULL,
                                     &calls);
        if (st == VDEV_OK && want == 0) {
            /* the library's share back to the device */
            uint64_t ceil = d.ceiling_bytes + Lib.cut_ceil[gpu];
            uint64_t floor = d.floor_bytes + Lib.cut_floor[gpu];
            if (ceil > d.card_budget_bytes)
                ceil = d.card_budget_bytes;
            if (floor > ceil)
                floor = ceil;
            if (vdev_pool_set_limits_ex(p, lib, 0, 0, 0, NULL, &calls) == VDEV_OK &&
                vdev_pool_set_limits_ex(p, dev, floor, ceil, 0, NULL, &calls) == VDEV_OK)
                Lib.cut_floor[gpu] = Lib.cut_ceil[gpu] = 0;
            else
                vdev_clear_error();
        }
    }
    if (st == VDEV_OK)
        Lib.bytes[gpu] = want;
    pthread_mutex_unlock(&Lib.lock);
    if (calls.n) {
        /* a callback may leave an error of its own: the charge's stays */
        char msg[512];
        vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        vdev_pool_calls_make(&calls);
        if (st != VDEV_OK)
            vdev_error(st, "%s", msg);
    }
    return st;
}

/* ---- queries and raw blocks ---- */

/* vdev_runtime_find for the call fn: in a forked child, the fork error
 * naming fn (not vdev_init, which the look-up would start). */
static enum vdev_status find_for(const char *fn, const char *device, struct vdev_ldev **d)
{
    if (vdev_runtime_forked_from())
        return vdev_runtime_forked_error(fn);
    return vdev_runtime_find(device, d);
}

VDEV_API enum vdev_status vdev_memory_info(const char *device, struct vdev_memory_info *out)
{
    struct vdev_ldev *d = NULL;
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_memory_info: out is NULL");
    enum vdev_status st = find_for("vdev_memory_info", device, &d);
    if (st != VDEV_OK)
        return st;
    struct vdev_alloc_stats s;
    vdev_alloc_get_stats(d->alloc, &s);
    memset(out, 0, sizeof *out);
    out->bytes_in_use = s.bytes_in_use;
    out->peak_bytes_in_use = s.peak_bytes_in_use;
    out->bytes_reserved = s.bytes_reserved;
    out->peak_bytes_reserved = s.peak_bytes_reserved;
    out->bytes_limit = s.bytes_limit;
    out->largest_free_block = s.largest_free_block;
    out->n_allocs = s.n_allocs;
    out->n_allocs_total = s.n_allocs_total;
    out->n_failed_allocs = s.n_failed_allocs;
    out->n_regions = s.n_regions;
    out->fragmentation = s.fragmentation;
    out->largest_alloc_size = s.largest_alloc_size;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_memory_reset_peak(const char *device)
{
    struct vdev_ldev *d = NULL;
    enum vdev_status st = find_for("vdev_memory_reset_peak", device, &d);
    if (st != VDEV_OK)
        return st;
    vdev_alloc_reset_peak(d->alloc);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_memory_release_cached(const char *device, uint64_t *released)
{
    struct vdev_ldev *d = NULL;
    enum vdev_status st = find_for("vdev_memory_release_cached", device, &d);
    if (st != VDEV_OK)
        return st;
    /* Work still queued may use blocks freed from the host: let it finish. */
    vdev_backend_synchronize(d->backend, d->bdev);
    vdev_alloc_flush_pending(d->alloc);
    uint64_t r = vdev_alloc_release_cached(d->alloc);
    if (released)
        *released = r;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_mem_alloc(const char *device, uint64_t bytes, void **out)
{
    struct vdev_ldev *d = NULL;
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mem_alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mem_alloc: size 0");
    enum vdev_status st = find_for("vdev_mem_alloc", device, &d);
    if (st != VDEV_OK)
        return st;
    struct vdev_block blk;
    if (vdev_device_refused()) /* a test's refusal (base/host_mem.c) */
        st = vdev_error(VDEV_ERR_OOM, "OOM when allocating %llu bytes on %s: refused for a test "
                                      "(vdev_device_fail_at)",
                        (unsigned long long)bytes, d->name);
    else
        st = vdev_alloc_malloc(d->alloc, bytes, &blk);
    if (st != VDEV_OK) {
        if (st == VDEV_ERR_OOM) /* traced and reported as a tensor's is */
            vdev_runtime_oom_seen(d, bytes, vdev_runtime_block_tag, d);
        return st;
    }
    /* (a freed tensor's tag would stay on its handle otherwise) */
    vdev_runtime_tag_block(d, blk.handle, "vdev_mem_alloc");
    *out = blk.ptr;
    if (vdev_observe_on())
        vdev_observe_memory(d);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_mem_free(const char *device, void *ptr)
{
    struct vdev_ldev *d = NULL;
    if (!ptr)
        return VDEV_OK;
    enum vdev_status st = find_for("vdev_mem_free", device, &d);
    if (st != VDEV_OK)
        return st;
    uint32_t h;
    if ((st = vdev_alloc_lookup(d->alloc, ptr, &h)) != VDEV_OK)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mem_free: %p is not a live block of %s", ptr,
                          d->name);
    vdev_alloc_free(d->alloc, h);
    if (vdev_observe_on())
        vdev_observe_memory(d);
    return VDEV_OK;
}

/* ---- governance at run time ---- */

VDEV_API enum vdev_status vdev_memory_get_limits(const char *device, struct vdev_memory_limits *out)
{
    struct vdev_ldev *d = NULL;
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_memory_get_limits: out is NULL");
    enum vdev_status st = find_for("vdev_memory_get_limits", device, &d);
    if (st != VDEV_OK)
        return st;
    vdev_pool_get(d->pool, d->member, out);
    return VDEV_OK;
}

/* A floor or ceiling other than 0 is at least 1 MiB (TensorFlow takes MiB:
 * 4096 meant as 4 GiB would be 4 KiB here). */
static enum vdev_status check_limit(const struct vdev_ldev *d, const char *what, uint64_t bytes)
{
    if (bytes == 0 || bytes >= (1ull << 20))
        return VDEV_OK;
    return vdev_error(VDEV_ERR_INVALID_ARG,
                      "%s: a %s of %llu bytes is less than 1 MiB: sizes are in bytes (did you "
                      "mean %lluMiB, i.e. %lluull << 20?)",
                      d->name, what, (unsigned long long)bytes, (unsigned long long)bytes,
                      (unsigned long long)bytes);
}

/* The profiler trace's record of a device's limits (after a change). */
static void trace_limits(const struct vdev_ldev *d, const char *why)
{
    struct vdev_memory_limits l;
    vdev_pool_get(d->pool, d->member, &l);
    vdev_observe_limits(d, l.floor_bytes, l.ceiling_bytes, vdev_priority_name(l.priority), why);
}

VDEV_API enum vdev_status vdev_memory_set_limits(const char *device, uint64_t floor_bytes,
                                                 uint64_t ceiling_bytes)
{
    struct vdev_ldev *d = NULL;
    enum vdev_status st = find_for("vdev_memory_set_limits", device, &d);
    if (st != VDEV_OK)
        return st;
    if ((st = check_limit(d, "floor", floor_bytes)) != VDEV_OK ||
        (st = check_limit(d, "ceiling", ceiling_bytes)) != VDEV_OK)
        return st;
    if ((st = vdev_pool_set_limits(d->pool, d->member, floor_bytes, ceiling_bytes, NULL)) !=
        VDEV_OK)
        return st;
    trace_limits(d, "limits");
    vdev_observe_memory(d);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_memory_set_priority(const char *device, enum vdev_priority priority)
{
    struct vdev_ldev *d = NULL;
    enum vdev_status st = find_for("vdev_memory_set_priority", device, &d);
    if (st != VDEV_OK)
        return st;
    if ((st = vdev_pool_set_priority(d->pool, d->member, priority)) != VDEV_OK) {
        vdev_error_prefix("%s", d->name);
        return st;
    }
    trace_limits(d, "priority");
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_memory_set_pressure_callback(const char *device, vdev_pressure_fn fn,
                                                            void *user)
{
    struct vdev_ldev *d = NULL;
    enum vdev_status st = find_for("vdev_memory_set_pressure_callback", device, &d);
    if (st != VDEV_OK)
        return st;
    return vdev_pool_set_pressure(d->pool, d->member, fn, user);
}

/* ---- holders of raw blocks (vdev_mem_holder_add) ----
 *
 * A removal waits only for the calls of the holder it removes that are
 * under way on other threads, never for calls of other holders: a thread
 * inside one holder's function may remove another holder, and a removal
 * made while holding a lock that some other holder's function takes (the
 * dynamic loader's, in a library's destructor) does not wait on that
 * function. When even that wait would never end — the call it waits for is
 * on a thread that is itself waiting, directly or through others, for a
 * call of a holder this thread is inside (two threads inside A and B, each
 * removing the other) — the removal does not wait and says so. */

#define MAX_HOLDERS 8
#define MAX_WAIT_DEPTH 64 /* threads followed when looking for a wait back */

/* A thread's calls of holders' functions, on its stack from holders_begin
 * to holders_end, listed in MH.calls (one per nesting: a holder's function
 * may ask the holders again). */
struct holder_call {
    struct vdev_mem_holder in;    /* the holder whose function runs now (when in_set) */
    struct vdev_mem_holder waits; /* the holder this thread removes, waiting (when waiting) */
    int in_set, waiting;
    uintptr_t thread;             /* the calling thread: the address of its my_call */
    struct holder_call *outer;    /* the call of this thread it was made inside */
    struct holder_call *next;     /* MH.calls */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t idle;  /* signalled when a call of a holder's function ends */
    struct vdev_mem_holder h[MAX_HOLDERS];
    int n;
    struct holder_call *calls; /* every thread's, innermost first per thread */
} MH = {.lock = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};
static _Thread_local struct holder_call *my_call; /* this thread's innermost */

static int same_holder(const struct vdev_mem_holder *a, const struct vdev_mem_holder *b)
{
    return a->live == b->live && a->forget == b->forget && a->ctx == b->ctx;
}

/* The index of the holder with h's functions and ctx, or MH.n; with MH.lock. */
static int find_holder(const struct vdev_mem_holder *h)
{
    int i = 0;
    while (i < MH.n && !same_holder(&MH.h[i], h))
        i++;
    return i;
}

/* Whether a thread other than me is in a function of h; with MH.lock. */
static int called_elsewhere(const struct vdev_mem_holder *h, uintptr_t me)
{
    for (const struct holder_call *c = MH.calls; c; c = c->next)
        if (c->thread != me && c->in_set && same_holder(&c->in, h))
            return 1;
    return 0;
}

/* Whether waiting for the calls of h on threads other than me would wait
 * for thread me: a thread in such a call waits in a removal for a holder
 * that me is inside, or for one whose callers wait so, and on; with
 * MH.lock. At depth 0 me's own calls of h are not waited for. */
static int waits_for_me(const struct vdev_mem_holder *h, uintptr_t me, int depth)
{
    for (const struct holder_call *c = MH.calls; c; c = c->next) {
        if (!c->in_set || !same_holder(&c->in, h))
            continue;
        if (c->thread == me) {
            if (depth > 0)
                return 1;
            continue;
        }
        for (const struct holder_call *w = MH.calls; w && depth < MAX_WAIT_DEPTH; w = w->next)
            if (w->thread == c->thread && w->waiting && waits_for_me(&w->waits, me, depth + 1))
                return 1;
    }
    return 0;
}

VDEV_API enum vdev_status vdev_mem_holder_add(const struct vdev_mem_holder *h)
{
    if (!h || !h->live || !h->forget)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_mem_holder_add: the holder or one of its functions is NULL");
    enum vdev_status st = VDEV_OK;
    pthread_mutex_lock(&MH.lock);
    int i = find_holder(h);
    if (i == MH.n) {
        if (MH.n == MAX_HOLDERS)
            st = vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mem_holder_add: more than %d holders",
                            MAX_HOLDERS);
        else
            MH.h[MH.n++] = *h;
    }
    pthread_mutex_unlock(&MH.lock);
    return st;
}

VDEV_API enum vdev_status vdev_mem_holder_remove(const struct vdev_mem_holder *h)
{
    if (!h)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_mem_holder_remove: the holder is NULL");
    struct vdev_mem_holder gone = *h;
    uintptr_t me = (uintptr_t)&my_call;
    pthread_mutex_lock(&MH.lock);
    int i = find_holder(&gone);
    int found = i < MH.n, cycle = 0;
    if (found) {
        memmove(&MH.h[i], &MH.h[i + 1], (size_t)(MH.n - i - 1) * sizeof MH.h[0]);
        MH.n--;
        /* Its code may go once this returns: its calls under way on other
         * threads end first (no new one starts: callers check the list
         * before each call); this thread's own, from inside one of them,
         * cannot, nor one that waits for this thread. */
        cycle = waits_for_me(&gone, me, 0);
        if (!cycle) {
            if (my_call) {
                my_call->waits = gone;
                my_call->waiting = 1;
            }
            while (called_elsewhere(&gone, me))
                pthread_cond_wait(&MH.idle, &MH.lock);
            if (my_call)
                my_call->waiting = 0;
        }
    }
    pthread_mutex_unlock(&MH.lock);
    if (!found)
        return vdev_error(VDEV_ERR_NOT_FOUND,
                          "vdev_mem_holder_remove: no such holder (not added, or removed already)");
    if (cycle)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_mem_holder_remove: removed, but not waited for: a call of it runs "
                          "on another thread that waits for this thread (it is removing a holder "
                          "whose function this thread is in), so that call may still run after "
                          "this returns");
    return VDEV_OK;
}

/* The holders, copied: they are called without MH.lock, since they take
 * their own locks and may call into vdev (forget frees pending blocks, a
 * function may remove a holder). c, on the caller's stack, records which
 * holder this thread is calling (holder_enter) until holders_end. */
static int holders_begin(struct holder_call *c, struct vdev_mem_holder h[MAX_HOLDERS])
{
    memset(c, 0, sizeof *c);
    c->thread = (uintptr_t)&my_call;
    c->outer = my_call;
    pthread_mutex_lock(&MH.lock);
    int n = MH.n;
    memcpy(h, MH.h, sizeof MH.h);
    c->next = MH.calls;
    MH.calls = c;
    my_call = c;
    pthread_mutex_unlock(&MH.lock);
    return n;
}

/* Before calling a function of h: 1 when h is still there (recorded as
 * called until holder_leave), 0 when it was removed meanwhile (not to be
 * called: its code may be gone). */
static int holder_enter(struct holder_call *c, const struct vdev_mem_holder *h)
{
    pthread_mutex_lock(&MH.lock);
    int there = find_holder(h) < MH.n;
    if (there) {
        c->in = *h;
        c->in_set = 1;
    }
    pthread_mutex_unlock(&MH.lock);
    return there;
}

static void holder_leave(struct holder_call *c)
{
    pthread_mutex_lock(&MH.lock);
    c->in_set = 0;
    pthread_cond_broadcast(&MH.idle);
    pthread_mutex_unlock(&MH.lock);
}

static void holders_end(struct holder_call *c)
{
    pthread_mutex_lock(&MH.lock);
    struct holder_call **p = &MH.calls;
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    my_call = c->outer;
    pthread_mutex_unlock(&MH.lock);
}

VDEV_API int vdev_mem_holders_live(char *msg, size_t cap)
{
    struct vdev_mem_holder h[MAX_HOLDERS];
    struct holder_call c;
    int n = holders_begin(&c, h), live = 0;
    char buf[480];
    if (cap && msg)
        msg[0] = '\0';
    for (int i = 0; i < n && !live; i++) {
        if (!holder_enter(&c, &h[i]))
            continue;
        buf[0] = '\0';
        live = h[i].live(h[i].ctx, buf, sizeof buf);
        holder_leave(&c);
        if (live && cap && msg)
            vdev_strlcpy(msg, buf, cap);
    }
    holders_end(&c);
    return live;
}

enum vdev_status vdev_runtime_holders_release(void)
{
    char msg[480];
    if (vdev_mem_holders_live(msg, sizeof msg))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_shutdown: %s", msg);
    struct vdev_mem_holder h[MAX_HOLDERS];
    struct holder_call c;
    int n = holders_begin(&c, h);
    for (int i = 0; i < n; i++)
        if (holder_enter(&c, &h[i])) {
            h[i].forget(h[i].ctx);
            holder_leave(&c);
        }
    holders_end(&c);
    return VDEV_OK;
}
