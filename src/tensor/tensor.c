/* tensor.c — tensor handles, creation, reference counting, views, the values
 * a tape read, and the accessors (see tensor.h; copies between devices and
 * variables are in copies.c).
 *
 * Every tensor struct lives in a slot of the tensor handle table, so the
 * struct of a freed tensor is never returned to the system: a stale handle
 * is refused by its generation, and a library pointer kept past the last
 * reference would still point into table memory (a bug, but not a wild
 * write). The public handle dies when the creation reference is dropped; the
 * slot goes back to the table when the last reference goes. */
#define _GNU_SOURCE
#include "tensor/tensor.h"

#include "runtime/observe.h"

#include <string.h>

struct vdev_handle_table vdev_tens_table = VDEV_HANDLE_TABLE("tensor", 1, struct vdev_tens);

/* ---- shapes ---- */

const char *vdev_dtype_name(enum vdev_dtype dt)
{
    switch (dt) {
    case VDEV_F32: return "float";
    case VDEV_I32: return "int32";
    case VDEV_BOOL: return "bool";
    default: return "unknown";
    }
}

char *vdev_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

enum vdev_status vdev_shape_too_large(const char *fn, const int64_t *shape, int ndim)
{
    char sh[96];
    return vdev_error(VDEV_ERR_INVALID_ARG, "%s%sshape %s is too large (2^60 elements or more)",
                      fn ? fn : "", fn ? ": " : "", vdev_shape_str(shape, ndim, sh, sizeof sh));
}

enum vdev_status vdev_shape_check(const char *fn, const int64_t *shape, int ndim)
{
    if (ndim < 0 || ndim > VDEV_MAX_DIMS)
        return vdev_error(VDEV_ERR_INVALID_ARG, "tensors have 0 to %d dimensions, not %d",
                          VDEV_MAX_DIMS, ndim);
    if (ndim > 0 && !shape)
        return vdev_error(VDEV_ERR_INVALID_ARG, "shape is NULL");
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return vdev_error(VDEV_ERR_INVALID_ARG, "dimension %d is negative (%lld)", i,
                              (long long)shape[i]);
        if (shape[i] && numel > VDEV_MAX_NUMEL / shape[i])
            return vdev_shape_too_large(fn, shape, ndim);
        numel *= shape[i];
    }
    return VDEV_OK;
}

/* ---- handles ---- */

#define NOT_LIVE "not a live tensor (freed already, or not a tensor)"
#define SHUT_DOWN "the tensor belongs to a runtime that was shut down (made before vdev_shutdown)"

struct vdev_tens *vdev_tens_use(const vdev_tensor_t *h, const char *fn)
{
    struct vdev_tens *t = vdev_tens_peek(h);
    if (t && vdev_tens_current(t))
        return t;
    if (t && vdev_runtime_forked_from()) {
        vdev_runtime_forked_error(fn);
        return NULL;
    }
    vdev_error(VDEV_ERR_INVALID_ARG, "%s: %s", fn, !h ? "tensor is NULL" : !t ? NOT_LIVE : SHUT_DOWN);
    return NULL;
}

void vdev_tens_input_error(const vdev_tensor_t *h, const char *op, int k)
{
    if (vdev_tens_peek(h) && vdev_runtime_forked_from()) {
        char fn[96];
        snprintf(fn, sizeof fn, "%s: input #%d", op, k);
        vdev_runtime_forked_error(fn);
        return;
    }
    vdev_error(VDEV_ERR_INVALID_ARG, "%s: input #%d: %s", op, k,
               vdev_tens_peek(h) ? SHUT_DOWN : NOT_LIVE);
}

/* ---- out-of-memory report: which op made each live block ---- */

_Thread_local const char *vdev_tensor_op_tag;

/* ---- life cycle ---- */

struct vdev_ldev *vdev_tens_creation_device(void)
{
    struct vdev_ldev *d = vdev_placement_scope_device();
    return d || vdev_placement_scope_failed() ? d : vdev_runtime_default_device();
}

/* A struct in a fresh slot, one (creation) reference, a live handle, no
 * memory, in no scope. */
static struct vdev_tens *tens_struct(struct vdev_ldev *dev, enum vdev_dtype dtype,
                                     const int64_t *shape, int ndim)
{
    uint64_t h;
    struct vdev_tens *t = vdev_handle_alloc(&vdev_tens_table, &h);
    if (!t)
        return NULL;
    t->handle = h;
    /* an atomic store: vdev_tens_hold may read refs of a slot being reused */
    atomic_store_explicit(&t->refs, 1, memory_order_relaxed);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < VDEV_MAX_DIMS; i++)
        t->shape[i] = i < ndim ? shape[i] : 1;
    t->numel = vdev_shape_numel(shape, ndim);
    t->bytes = (uint64_t)t->numel * vdev_dtype_size(dtype);
    t->dev = dev;
    t->data = NULL;
    t->base = NULL;
    t->ext_release = NULL;
    t->ext_ctx = NULL;
    t->block = UINT32_MAX;
    t->rgen = vdev_runtime_generation();
    t->home = -1;
    atomic_init(&t->xstream, (int16_t)-1);
    atomic_init(&t->lazy_reader, (int16_t)-1);
    atomic_init(&t->produced_at, UINT64_MAX);
    atomic_init(&t->host_exports, 0);
    atomic_init(&t->version, (uint64_t)0);
    t->tape_readers = 0;
    t->snaps = NULL;
    t->next_snap = NULL;
    atomic_init(&t->exports, 0);
    atomic_init(&t->writing, 0);
    t->is_variable = t->requires_grad = t->kept = t->host_written = 0;
    /* atomic: vdev_tensor_free reads it through a handle that may be stale */
    atomic_store_explicit(&t->owner, (uint8_t)0, memory_order_relaxed);
    atomic_init(&t->scope_thread, (uintptr_t)0);
    t->scope_depth = -1;
    t->scope_prev = t->scope_next = NULL;
    return t;
}

/* A test's refusal of a tensor's device memory (vdev_device_fail_at): the
 * error a full device gives. Out of the way of the path that allocates. */
static __attribute__((cold, noinline)) enum vdev_status refused(const struct vdev_ldev *dev)
{
    return vdev_error(VDEV_ERR_OOM, "%s: refused for a test (vdev_device_fail_at)", dev->name);
}

/* vdev_tens_new; quiet: out of memory is no OOM event (report, trace) and
 * no failed allocation in the device's statistics (n_failed_allocs counts
 * the program's own), as for a copy that a write goes on without
 * (save_value). */
static struct vdev_tens *tens_new(struct vdev_ldev *dev, enum vdev_dtype dtype,
                                  const int64_t *shape, int ndim, int quiet)
{
    if (!dev)
        return NULL; /* the caller's error: a scope names no device (vdev_tens_creation_device) */
    /* the op making it (exec.c); the public creators check first, naming
     * themselves */
    if (vdev_shape_check(vdev_tensor_op_tag, shape, ndim) != VDEV_OK)
        return NULL;
    if ((unsigned)dtype >= VDEV_DTYPE_COUNT) {
        vdev_error(VDEV_ERR_INVALID_ARG, "unknown dtype %d", (int)dtype);
        return NULL;
    }
    struct vdev_tens *t = tens_struct(dev, dtype, shape, ndim);
    if (!t)
        return NULL;
    if (t->bytes) {
        struct vdev_block blk;
        enum vdev_status st;
        if (!quiet && vdev_device_refused()) /* a test's refusal (base/host_mem.c) */
            st = refused(dev);
        else
            st = quiet ? vdev_alloc_malloc_quiet(dev->alloc, t->bytes, &blk)
                       : vdev_alloc_malloc(dev->alloc, t->bytes, &blk);
        if (st != VDEV_OK) {
            if (quiet) {
                vdev_handle_release(&vdev_tens_table, t);
                return NULL;
            }
            char sh[96], msg[512];
            const char *detail = strstr(vdev_last_error(), ": ");
            vdev_strlcpy(msg, detail ? detail + 2 : vdev_last_error(), sizeof msg);
            char b[32];
            vdev_error(VDEV_ERR_OOM,
                       "OOM when allocating tensor with shape%s and type %s (%s) on %s: %s",
                       vdev_shape_str(shape, ndim, sh, sizeof sh), vdev_dtype_name(dtype),
                       vdev_format_bytes(t->bytes, b, sizeof b), dev->long_name, msg);
            vdev_runtime_oom_seen(dev, t->bytes, vdev_runtime_block_tag, dev);
            vdev_handle_release(&vdev_tens_table, t);
            return NULL;
        }
        t->data = blk.ptr;
        t->block = blk.handle;
        if (vdev_runtime_oom_report())
            vdev_runtime_tag_block(dev, blk.handle,
                                   vdev_tensor_op_tag ? vdev_tensor_op_tag : "(a tensor)");
        if (vdev_observe_on())
            vdev_observe_memory(dev);
    }
    vdev_tens_scope_add(t);
    return t;
}

struct vdev_tens *vdev_tens_new(struct vdev_ldev *dev, enum vdev_dtype dtype,
                                const int64_t *shape, int ndim)
{
    return tens_new(dev, dtype, shape, ndim, 0);
}

struct vdev_tens *vdev_tens_wrap(struct vdev_ldev *dev, enum vdev_dtype dtype,
                                 const int64_t *shape, int ndim, void *data,
                                 void (*release)(void *ctx), void *ctx)
{
    struct vdev_tens *t = tens_struct(dev, dtype, shape, ndim);
    if (!t)
        return NULL;
    t->data = t->bytes ? data : NULL;
    t->ext_release = release;
    t->ext_ctx = ctx;
    vdev_tens_scope_add(t);
    return t;
}

struct vdev_tens *vdev_tens_view(const struct vdev_tens *src, const int64_t *shape, int ndim)
{
    struct vdev_tens *t = tens_struct(src->dev, src->dtype, shape, ndim);
    if (!t)
        return NULL;
    struct vdev_tens *owner = src->base ? src->base : vdev_tens_mut(src);
    vdev_tens_retain(owner);
    t->base = owner;
    t->data = src->data;
    t->home = src->home;
    t->rgen = src->rgen;
    vdev_tens_scope_add(t);
    return t;
}

void vdev_tens_retain(const struct vdev_tens *t)
{
    atomic_fetch_add_explicit(&vdev_tens_mut(t)->refs, 1, memory_order_relaxed);
}

struct vdev_tens *vdev_tens_hold(const vdev_tensor_t *h, const char *fn)
{
    for (;;) {
        /* nothing of the tensor is read before the reference but its count:
         * another thread may be making a new tensor in a slot just freed */
        struct vdev_tens *t = vdev_tens_peek(h);
        if (!t)
            return vdev_tens_use(h, fn); /* NULL, with the error for h */
        int r = atomic_load_explicit(&t->refs, memory_order_relaxed);
        while (r > 0 && !atomic_compare_exchange_weak_explicit(&t->refs, &r, r + 1,
                                                               memory_order_acquire,
                                                               memory_order_relaxed))
            ;
        if (r > 0 && vdev_handle_still(t, h)) {
            if (vdev_tens_use(h, fn) == t) /* the runtime's checks, now safely */
                return t;
            vdev_tens_release(t);
            return NULL;
        }
        /* the slot was freed (and maybe taken) between the lookup and the
         * count: give a reference taken on the new tensor back; the handle
         * is dead, which the next round reports */
        if (r > 0)
            vdev_tens_release(t);
    }
}

void vdev_tens_mark_read_by(const struct vdev_tens *t, const struct vdev_ldev *reader)
{
    const struct vdev_tens *owner = t->base ? t->base : t;
    if (reader->backend != owner->dev->backend || reader->bdev != owner->dev->bdev)
        atomic_store_explicit(&vdev_tens_mut(owner)->xstream, (int16_t)reader->id,
                              memory_order_relaxed);
}

static void new_version(struct vdev_tens *owner, const struct vdev_ldev *writer, int begin);

static void before_write(const struct vdev_tens *t, const struct vdev_ldev *writer, int begin)
{
    struct vdev_tens *owner = vdev_tens_mut(t->base ? t->base : t);
    new_version(owner, writer, begin);
    /* who writes it next is not the op that made it: copies wait for all */
    atomic_store_explicit(&owner->produced_at, UINT64_MAX, memory_order_release);
    int xs = atomic_exchange_explicit(&owner->lazy_reader, (int16_t)-1, memory_order_acq_rel);
    struct vdev_ldev *reader = xs >= 0 ? vdev_runtime_device(xs) : NULL;
    if (!reader)
        return;
    const struct vdev_backend_ops *ops = reader->backend->ops;
    void *ev = NULL;
    if (writer && writer->backend == reader->backend && ops->stream_wait_event &&
        ops->event_record(reader->backend->ctx, reader->bdev, &ev) == VDEV_OK) {
        if (ops->stream_wait_event(reader->backend->ctx, writer->bdev, ev) != VDEV_OK)
            vdev_backend_synchronize(reader->backend, reader->bdev);
        ops->event_drop(reader->backend->ctx, ev);
    } else {
        vdev_backend_synchronize(reader->backend, reader->bdev);
    }
}

void vdev_tens_before_write(const struct vdev_tens *t, const struct vdev_ldev *writer)
{
    before_write(t, writer, 0);
}

void vdev_tens_write_begin(const struct vdev_tens *t, const struct vdev_ldev *writer)
{
    before_write(t, writer, 1);
}

void vdev_tens_write_end(const struct vdev_tens *t)
{
    const struct vdev_tens *owner = t->base ? t->base : t;
    atomic_fetch_sub_explicit(&vdev_tens_mut(owner)->writing, 1, memory_order_release);
    vdev_tens_after_write(t);
}

void vdev_tens_after_write(const struct vdev_tens *t)
{
    vdev_tens_after_read(t, t->dev); /* the same wait: the write is queued on t's stream */
}

_Atomic int vdev_tens_host_exports_live;

void vdev_tens_after_read_exported(const struct vdev_tens *t, const struct vdev_ldev *reader)
{
    const struct vdev_tens *owner = t->base ? t->base : t;
    if (atomic_load_explicit(&owner->host_exports, memory_order_acquire) > 0)
        vdev_backend_synchronize(reader->backend, reader->bdev);
}

/* Gives t's block back to its allocator, ordered after every stream that
 * read it. A plain copy made t's own stream wait for it, so the block's
 * next user, on that stream, comes after it; a lazy copy did not, so when
 * there is a lazy reader, the free waits for that one (a plain copy to a
 * third device may have replaced it in xstream since). */
static void free_block(struct vdev_tens *t)
{
    int xs = atomic_load_explicit(&t->lazy_reader, memory_order_acquire);
    if (xs < 0)
        xs = atomic_load_explicit(&t->xstream, memory_order_relaxed);
    struct vdev_ldev *reader = xs >= 0 ? vdev_runtime_device(xs) : NULL;
    void *ev = NULL;
    if (reader && reader->backend == t->dev->backend &&
        reader->backend->ops->event_record(reader->backend->ctx, reader->bdev, &ev) == VDEV_OK)
        vdev_alloc_free_after(t->dev->alloc, t->block, ev);
    else if (reader) {
        /* Read from another backend's stream: wait for it, then free. */
        vdev_backend_synchronize(reader->backend, reader->bdev);
        vdev_alloc_free(t->dev->alloc, t->block);
    } else
        vdev_alloc_free(t->dev->alloc, t->block);
    if (vdev_observe_on())
        vdev_observe_memory(t->dev);
}

/* ---- values a tape read (tensor.h) ---- */

/* A version of an owner that live tape records read, and was written since. */
struct vdev_snap {
    uint64_t version;
    int readers;             /* the live records that read it */
    struct vdev_tens *value; /* saved before the write (the library's reference);
                                NULL: could not be kept */
    struct vdev_snap *next;
};

/* The tape locks: an owner's version, tape_readers and snaps change under
 * the lock its address picks (one of 64), which no one holds while taking
 * another. A writer holds it while it queues the copy of the value it saves
 * (allocation, no OOM report), never while it waits for a stream. */
#define TL PTHREAD_MUTEX_INITIALIZER
#define TL8 TL, TL, TL, TL, TL, TL, TL, TL
static pthread_mutex_t tape_locks[64] = {TL8, TL8, TL8, TL8, TL8, TL8, TL8, TL8};
#undef TL8
#undef TL

static pthread_mutex_t *tape_lock(const struct vdev_tens *owner)
{
    uint64_t h = (uint64_t)((uintptr_t)owner >> 4) * 0x9e3779b97f4a7c15ull;
    return &tape_locks[h >> 58];
}

static struct vdev_tens *owner_of(const struct vdev_tens *t)
{
    return vdev_tens_mut(t->base ? t->base : t);
}

static void free_snaps(struct vdev_snap *s)
{
    while (s) {
        struct vdev_snap *next = s->next;
        if (s->value)
            vdev_tens_release(s->value);
        free(s);
        s = next;
    }
}

int vdev_tens_tape_read(const struct vdev_tens *t, int n, uint64_t *version)
{
    struct vdev_tens *o = owner_of(t);
    pthread_mutex_t *l = tape_lock(o);
    struct vdev_snap *fresh = NULL; /* the entry a write will need, made unlocked */
    int counted;
    for (;;) {
        pthread_mutex_lock(l);
        counted = !atomic_load_explicit(&o->writing, memory_order_acquire) &&
                  !atomic_load_explicit(&o->exports, memory_order_acquire);
        if (!counted || o->next_snap || fresh)
            break;
        pthread_mutex_unlock(l);
        if (!(fresh = vdev_malloc(sizeof *fresh))) {
            vdev_error(VDEV_ERR_OOM, "out of host memory recording a read for a tape");
            return -1;
        }
    }
    if (counted) {
        *version = atomic_load_explicit(&o->version, memory_order_relaxed);
        o->tape_readers += n;
        if (!o->next_snap) {
            o->next_snap = fresh;
            fresh = NULL;
        }
    }
    pthread_mutex_unlock(l);
    free(fresh);
    return counted;
}

void vdev_tens_tape_unread(const struct vdev_tens *t, uint64_t version)
{
    struct vdev_tens *o = owner_of(t);
    struct vdev_snap *gone = NULL;
    pthread_mutex_t *l = tape_lock(o);
    pthread_mutex_lock(l);
    if (atomic_load_explicit(&o->version, memory_order_relaxed) == version) {
        o->tape_readers--;
    } else { /* an earlier version's entry (none when it could not be made) */
        for (struct vdev_snap **p = &o->snaps; *p; p = &(*p)->next)
            if ((*p)->version == version) {
                if (--(*p)->readers == 0) {
                    gone = *p;
                    *p = gone->next;
                    gone->next = NULL;
                }
                break;
            }
    }
    pthread_mutex_unlock(l);
    free_snaps(gone);
}

/* A copy of o on its own stream, queued now, or NULL: out of memory is no
 * error of the write that needs it, so the thread's error stays as it was
 * and no OOM event is raised (the gradient that needs the value says so). */
static struct vdev_tens *save_value(const struct vdev_tens *o)
{
    char msg[512];
    enum vdev_status code = vdev_last_status();
    vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
    vdev_tensor_op_tag = "SavedForTape";
    struct vdev_tens *c = tens_new(o->dev, o->dtype, o->shape, o->ndim, 1);
    if (c && vdev_tens_copy_contents(o, c, 1) != VDEV_OK) {
        vdev_tens_drop(c);
        c = NULL;
    }
    if (c)
        vdev_tens_disown(c);
    vdev_error(code, "%s", msg);
    return c;
}

/* Before a write to owner (see vdev_tens_before_write): the next version;
 * the value first when live records read this one. A writer other than
 * owner's stream (the host, another stream) waits for that copy. begin: the
 * write is under way until vdev_tens_write_end. */
static void new_version(struct vdev_tens *o, const struct vdev_ldev *writer, int begin)
{
    pthread_mutex_t *l = tape_lock(o);
    pthread_mutex_lock(l);
    if (begin)
        atomic_fetch_add_explicit(&o->writing, 1, memory_order_relaxed);
    uint64_t v = atomic_load_explicit(&o->version, memory_order_relaxed);
    int wait = 0;
    if (o->tape_readers > 0) {
        /* made with the first read of this version: a write never fails for it */
        struct vdev_snap *s = o->next_snap;
        o->next_snap = NULL;
        s->version = v;
        s->readers = o->tape_readers;
        s->value = save_value(o);
        s->next = o->snaps;
        o->snaps = s;
        wait = s->value && (!writer || writer->backend != o->dev->backend ||
                            writer->bdev != o->dev->bdev);
        o->tape_readers = 0;
    }
    atomic_store_explicit(&o->version, v + 1, memory_order_seq_cst);
    pthread_mutex_unlock(l);
    if (wait)
        vdev_backend_synchronize(o->dev->backend, o->dev->bdev);
}

const struct vdev_tens *vdev_tens_value_at(const struct vdev_tens *t, uint64_t version,
                                           const char *op)
{
    struct vdev_tens *o = owner_of(t);
    if (atomic_load_explicit(&o->version, memory_order_seq_cst) == version)
        return t;
    const struct vdev_tens *value = NULL;
    pthread_mutex_t *l = tape_lock(o);
    pthread_mutex_lock(l);
    for (const struct vdev_snap *s = o->snaps; s; s = s->next)
        if (s->version == version) {
            value = s->value;
            break;
        }
    pthread_mutex_unlock(l);
    if (value) /* kept by the caller's record; a view's value has the view's shape */
        return t->base ? vdev_tens_view(value, t->shape, t->ndim) : value;
    char sh[96];
    vdev_error(VDEV_ERR_OOM,
               "%s read a %s of shape%s on %s that was written before the gradient was asked "
               "for, and its value then could not be kept (out of memory); end the tape or take "
               "the gradients before updating the %s",
               op, o->is_variable ? "variable" : "tensor",
               vdev_shape_str(t->shape, t->ndim, sh, sizeof sh), o->dev->long_name,
               o->is_variable ? "variable" : "tensor");
    return NULL;
}

/* The values a tape read that t still keeps (none while records hold t; freed
 * all the same) and the entry made for its next write (tens_struct sets it
 * again). Out of the way of the release of a tensor no tape read. */
static __attribute__((cold, noinline)) void drop_tape_entries(struct vdev_tens *t)
{
    free_snaps(t->snaps);
    t->snaps = NULL;
    free(t->next_snap);
    t->next_snap = NULL;
}

void vdev_tens_release(const struct vdev_tens *ct)
{
    struct vdev_tens *t = vdev_tens_mut(ct);
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    VDEV_DEBUG_ASSERT(!atomic_load_explicit(&t->scope_thread, memory_order_relaxed));
    if (__builtin_expect(t->snaps || t->next_snap, 0))
        drop_tape_entries(t);
    if (t->base)
        vdev_tens_release(t->base);
    else if (t->ext_release)
        t->ext_release(t->ext_ctx); /* another framework's memory, runtime or not */
    else if (t->block != UINT32_MAX && vdev_tens_current(t))
        free_block(t);
    /* else: the runtime that held its memory has shut down; nothing to give back */
    vdev_handle_release(&vdev_tens_table, t);
}

void vdev_tens_drop(struct vdev_tens *t)
{
    if (atomic_load_explicit(&t->scope_thread, memory_order_relaxed))
        vdev_tens_scope_unlink(t);
    if (vdev_handle_kill(&vdev_tens_table, t, t->handle))
        vdev_tens_release(t);
}

void vdev_tens_disown(struct vdev_tens *t)
{
    if (atomic_load_explicit(&t->scope_thread, memory_order_relaxed))
        vdev_tens_scope_unlink(t);
    t->kept = 0;
    vdev_handle_kill(&vdev_tens_table, t, t->handle);
}

struct vdev_tens *vdev_tens_publish(struct vdev_tens *t)
{
    if (vdev_tens_peek(vdev_tens_handle(t)) == t)
        return vdev_tens_view(t, t->shape, t->ndim); /* its handle stands for another owner */
    vdev_tens_retain(t);
    t->handle = vdev_handle_revive(&vdev_tens_table, t);
    t->kept = 0;
    vdev_tens_scope_add(t);
    return t;
}

void vdev_tens_set_owner(vdev_tensor_t *h, enum vdev_tens_owner owner)
{
    struct vdev_tens *t = vdev_tens_peek(h);
    if (t)
        atomic_store_explicit(&t->owner, (uint8_t)owner, memory_order_relaxed);
}

/* vdev_tensor_free; owned: the owner's own free (vdev_tens_free_owned). */
static void tensor_free(vdev_tensor_t *h, int owned)
{
    if (!h)
        return;
    struct vdev_tens *t = vdev_tens_peek(h);
    if (!t) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_free: " NOT_LIVE);
        return;
    }
    /* The slot may be reused meanwhile by another thread (h stale): the owner
     * read is then the new tensor's, so h is checked again before it is said. */
    uint8_t by = atomic_load_explicit(&t->owner, memory_order_relaxed);
    if (by && !owned) {
        if (vdev_tens_peek(h) != t) {
            vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_free: " NOT_LIVE);
            return;
        }
        int opt = by == VDEV_TENS_OWNER_OPTIMIZER;
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "vdev_tensor_free: the tensor is %s (%s); it is freed with its %s (%s)",
                   opt ? "an optimizer's slot" : "a model's variable",
                   opt ? "vdev_optimizer_slots" : "vdev_mlp_variables",
                   opt ? "optimizer" : "model", opt ? "vdev_optimizer_free" : "vdev_mlp_free");
        return;
    }
    uintptr_t owner = atomic_load_explicit(&t->scope_thread, memory_order_relaxed);
    if (owner && owner != vdev_thread_id()) {
        vdev_tens_foreign_scope("vdev_tensor_free");
        return;
    }
    /* Of two threads freeing one tensor, only the one that kills the handle
     * goes on. */
    if (!vdev_handle_kill(&vdev_tens_table, t, (uint64_t)(uintptr_t)h)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_free: " NOT_LIVE);
        return;
    }
    if (owner)
        vdev_tens_scope_unlink(t);
    vdev_tens_release(t);
}

VDEV_API void vdev_tensor_free(vdev_tensor_t *h) { tensor_free(h, 0); }

void vdev_tens_free_owned(vdev_tensor_t *h) { tensor_free(h, 1); }

/* ---- accessors ---- */

VDEV_API int vdev_tensor_ndim(const vdev_tensor_t *h)
{
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_tensor_ndim");
    return t ? t->ndim : -1;
}

VDEV_API int64_t vdev_tensor_dim(const vdev_tensor_t *h, int axis)
{
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_tensor_dim");
    if (!t)
        return -1;
    int a = axis < 0 ? axis + t->ndim : axis;
    if (a < 0 || a >= t->ndim) {
        if (t->ndim == 0)
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "vdev_tensor_dim: axis %d is outside a 0-dimensional tensor (it has no "
                       "axes)",
                       axis);
        else
            vdev_error(VDEV_ERR_INVALID_ARG,
                       "vdev_tensor_dim: axis %d is outside a %d-dimensional tensor (axes %d to "
                       "%d)",
                       axis, t->ndim, -t->ndim, t->ndim - 1);
        return -1;
    }
    return t->shape[a];
}

VDEV_API int64_t vdev_tensor_numel(const vdev_tensor_t *h)
{
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_tensor_numel");
    return t ? t->numel : -1;
}

VDEV_API enum vdev_dtype vdev_tensor_dtype(const vdev_tensor_t *h)
{
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_tensor_dtype");
    return t ? t->dtype : VDEV_DTYPE_COUNT;
}

VDEV_API const char *vdev_tensor_device(const vdev_tensor_t *h)
{
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_tensor_device");
    return t ? t->dev->name : NULL;
}
