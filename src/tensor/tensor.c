/* tensor.c — tensor creation, reference counting, copies, random numbers and
 * scopes (see tensor.h).
 *
 * Contents are written on the device's stream: fills run as a small host
 * function on host-addressable backends (cpu, sim); random tensors are drawn
 * on the host from a counter-based generator (SplitMix64 of seed and index),
 * so the same seed gives the same numbers on every device, then copied in. */
#define _GNU_SOURCE
#include "tensor/tensor.h"

#include "runtime/observe.h"

#include <math.h>
#include <string.h>

/* ---- shapes ---- */

const char *vdev_dtype_name(enum vdev_dtype dt) { return dt == VDEV_I32 ? "int32" : "float"; }

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

enum vdev_status vdev_shape_check(const int64_t *shape, int ndim)
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
        if (shape[i] && numel > (INT64_MAX / 8) / shape[i])
            return vdev_error(VDEV_ERR_INVALID_ARG, "shape is too large");
        numel *= shape[i];
    }
    return VDEV_OK;
}

int vdev_tensor_valid(const vdev_tensor_t *t)
{
    if (t && t->magic == VDEV_TENSOR_MAGIC)
        return 1;
    vdev_error(VDEV_ERR_INVALID_ARG, t ? "not a live tensor (freed twice, or not a tensor)"
                                       : "tensor is NULL");
    return 0;
}

/* ---- scopes ---- */

#define MAX_SCOPES 64

struct frame {
    vdev_tensor_t **items;
    int n, cap;
};

static _Thread_local struct frame frames[MAX_SCOPES];
static _Thread_local int depth;

static void scope_add(vdev_tensor_t *t)
{
    if (depth == 0)
        return;
    struct frame *f = &frames[depth - 1];
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 64;
        vdev_tensor_t **items = realloc(f->items, (size_t)cap * sizeof *items);
        VDEV_ASSERT(items); /* a scope that cannot track its tensors would leak them */
        f->items = items;
        f->cap = cap;
    }
    f->items[f->n++] = t;
    t->in_scope = 1;
}

void vdev_tensor_scope_add(vdev_tensor_t *t) { scope_add(t); }

/* Removes t from whichever open scope holds it. */
static void scope_remove(vdev_tensor_t *t)
{
    for (int d = depth - 1; d >= 0; d--) {
        struct frame *f = &frames[d];
        for (int i = f->n - 1; i >= 0; i--)
            if (f->items[i] == t) {
                f->items[i] = f->items[--f->n];
                t->in_scope = 0;
                return;
            }
    }
    t->in_scope = 0;
}

VDEV_API void vdev_scope_begin(void)
{
    VDEV_ASSERT(depth < MAX_SCOPES);
    frames[depth].n = 0;
    depth++;
}

VDEV_API void vdev_scope_end(void)
{
    if (depth == 0) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_scope_end without a matching vdev_scope_begin");
        return;
    }
    struct frame *f = &frames[--depth];
    for (int i = 0; i < f->n; i++) {
        vdev_tensor_t *t = f->items[i];
        t->in_scope = 0;
        if (t->kept) {
            t->kept = 0;
            scope_add(t); /* to the enclosing scope, or to the caller at depth 0 */
        } else {
            vdev_tensor_release(t);
        }
    }
    f->n = 0;
    if (depth == 0) {
        /* Keep the outermost frame's buffer for the next scope; free deeper ones. */
        for (int d = 1; d < MAX_SCOPES && frames[d].items; d++) {
            free(frames[d].items);
            frames[d].items = NULL;
            frames[d].cap = 0;
        }
    }
}

VDEV_API vdev_tensor_t *vdev_keep(vdev_tensor_t *t)
{
    if (t && t->magic == VDEV_TENSOR_MAGIC)
        t->kept = 1;
    return t;
}

/* ---- out-of-memory report: which op made each live block ---- */

_Thread_local const char *vdev_tensor_op_tag;

static struct {
    pthread_mutex_t lock;
    const char **tags[VDEV_MAX_LDEVS]; /* per device, by allocator handle */
    uint32_t cap[VDEV_MAX_LDEVS];
    uint32_t generation;
} OT = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void tag_block(const struct vdev_ldev *dev, uint32_t handle, const char *tag)
{
    pthread_mutex_lock(&OT.lock);
    if (OT.generation != vdev_runtime_generation()) { /* a new start-up: forget */
        for (int i = 0; i < VDEV_MAX_LDEVS; i++) {
            free(OT.tags[i]);
            OT.tags[i] = NULL;
            OT.cap[i] = 0;
        }
        OT.generation = vdev_runtime_generation();
    }
    if (handle >= OT.cap[dev->id]) {
        uint32_t cap = OT.cap[dev->id] ? OT.cap[dev->id] : 1024;
        while (cap <= handle)
            cap *= 2;
        const char **t = realloc(OT.tags[dev->id], cap * sizeof *t);
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

/* Called by the allocator's dump with its lock held. */
static const char *tag_of(void *user, uint32_t handle)
{
    const struct vdev_ldev *dev = user;
    const char *t = NULL;
    pthread_mutex_lock(&OT.lock);
    if (OT.generation == vdev_runtime_generation() && handle < OT.cap[dev->id])
        t = OT.tags[dev->id][handle];
    pthread_mutex_unlock(&OT.lock);
    return t;
}

/* ---- life cycle ---- */

struct vdev_ldev *vdev_tensor_creation_device(void)
{
    struct vdev_ldev *d = vdev_placement_scope_device();
    return d ? d : vdev_runtime_default_device();
}

static vdev_tensor_t *tensor_struct(struct vdev_ldev *dev, enum vdev_dtype dtype,
                                    const int64_t *shape, int ndim)
{
    vdev_tensor_t *t = malloc(sizeof *t);
    if (!t) {
        vdev_error(VDEV_ERR_OOM, "out of host memory for a tensor");
        return NULL;
    }
    t->magic = VDEV_TENSOR_MAGIC;
    atomic_init(&t->refs, 1);
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < VDEV_MAX_DIMS; i++)
        t->shape[i] = i < ndim ? shape[i] : 1;
    for (int i = 0; i < ndim; i++)
        t->numel *= shape[i];
    t->bytes = (uint64_t)t->numel * vdev_dtype_size(dtype);
    t->dev = dev;
    t->data = NULL;
    t->base = NULL;
    t->handle = UINT32_MAX;
    t->home = -1;
    atomic_init(&t->xstream, (int16_t)-1);
    t->is_variable = t->requires_grad = t->kept = t->in_scope = 0;
    t->generation = vdev_runtime_generation();
    return t;
}

vdev_tensor_t *vdev_tensor_new(struct vdev_ldev *dev, enum vdev_dtype dtype, const int64_t *shape,
                               int ndim)
{
    if (vdev_shape_check(shape, ndim) != VDEV_OK)
        return NULL;
    if ((unsigned)dtype >= VDEV_DTYPE_COUNT) {
        vdev_error(VDEV_ERR_INVALID_ARG, "unknown dtype %d", (int)dtype);
        return NULL;
    }
    vdev_tensor_t *t = tensor_struct(dev, dtype, shape, ndim);
    if (!t)
        return NULL;
    if (t->bytes) {
        struct vdev_block blk;
        if (vdev_alloc_malloc(dev->alloc, t->bytes, &blk) != VDEV_OK) {
            char sh[96], msg[512];
            const char *detail = strstr(vdev_last_error(), ": ");
            vdev_strlcpy(msg, detail ? detail + 2 : vdev_last_error(), sizeof msg);
            char b[32];
            vdev_error(VDEV_ERR_OOM,
                       "OOM when allocating tensor with shape%s and type %s (%s) on %s: %s",
                       vdev_shape_str(shape, ndim, sh, sizeof sh), vdev_dtype_name(dtype),
                       vdev_format_bytes(t->bytes, b, sizeof b), dev->long_name, msg);
            if (vdev_observe_on())
                vdev_observe_oom(dev, t->bytes);
            if (vdev_runtime_oom_report()) {
                fprintf(stderr, "%s\n", vdev_last_error());
                vdev_alloc_dump(dev->alloc, stderr, tag_of, dev);
            }
            t->magic = 0;
            free(t);
            return NULL;
        }
        t->data = blk.ptr;
        t->handle = blk.handle;
        if (vdev_runtime_oom_report())
            tag_block(dev, blk.handle, vdev_tensor_op_tag ? vdev_tensor_op_tag : "(a tensor)");
        if (vdev_observe_on())
            vdev_observe_memory(dev);
    }
    scope_add(t);
    return t;
}

vdev_tensor_t *vdev_tensor_view(const vdev_tensor_t *src, const int64_t *shape, int ndim)
{
    vdev_tensor_t *t = tensor_struct(src->dev, src->dtype, shape, ndim);
    if (!t)
        return NULL;
    vdev_tensor_t *owner = src->base ? src->base : vdev_tensor_mut(src);
    vdev_tensor_retain(owner);
    t->base = owner;
    t->data = src->data;
    t->home = src->home;
    scope_add(t);
    return t;
}

void vdev_tensor_retain(const vdev_tensor_t *t)
{
    atomic_fetch_add_explicit(&vdev_tensor_mut(t)->refs, 1, memory_order_relaxed);
}

void vdev_tensor_mark_read_by(const vdev_tensor_t *t, const struct vdev_ldev *reader)
{
    const vdev_tensor_t *owner = t->base ? t->base : t;
    if (reader->backend != owner->dev->backend || reader->bdev != owner->dev->bdev)
        atomic_store_explicit(&vdev_tensor_mut(owner)->xstream, (int16_t)reader->id,
                              memory_order_relaxed);
}

void vdev_tensor_release(const vdev_tensor_t *ct)
{
    vdev_tensor_t *t = vdev_tensor_mut(ct);
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    VDEV_ASSERT(t->magic == VDEV_TENSOR_MAGIC);
    if (t->generation != vdev_runtime_generation() || !vdev_is_initialized()) {
        /* The runtime that held its memory has shut down: nothing to give back. */
        if (t->base)
            vdev_tensor_release(t->base);
    } else if (t->base) {
        vdev_tensor_release(t->base);
    } else if (t->handle != UINT32_MAX) {
        int xs = atomic_load_explicit(&t->xstream, memory_order_relaxed);
        struct vdev_ldev *reader = xs >= 0 ? vdev_runtime_device(xs) : NULL;
        void *ev = NULL;
        if (reader && reader->backend == t->dev->backend &&
            reader->backend->ops->event_record(reader->backend->ctx, reader->bdev, &ev) == VDEV_OK)
            vdev_alloc_free_after(t->dev->alloc, t->handle, ev);
        else if (reader) {
            /* Read from another backend's stream: wait for it, then free. */
            vdev_backend_synchronize(reader->backend, reader->bdev);
            vdev_alloc_free(t->dev->alloc, t->handle);
        } else
            vdev_alloc_free(t->dev->alloc, t->handle);
        if (vdev_observe_on())
            vdev_observe_memory(t->dev);
    }
    t->magic = 0;
    free(t);
}

VDEV_API void vdev_tensor_free(vdev_tensor_t *t)
{
    if (!t)
        return;
    if (t->magic != VDEV_TENSOR_MAGIC) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_free: not a live tensor");
        return;
    }
    if (t->in_scope)
        scope_remove(t);
    vdev_tensor_release(t);
}

/* ---- accessors ---- */

VDEV_API int vdev_tensor_ndim(const vdev_tensor_t *t) { return vdev_tensor_valid(t) ? t->ndim : -1; }

VDEV_API int64_t vdev_tensor_dim(const vdev_tensor_t *t, int axis)
{
    if (!vdev_tensor_valid(t))
        return -1;
    if (axis < 0)
        axis += t->ndim;
    if (axis < 0 || axis >= t->ndim) {
        vdev_error(VDEV_ERR_INVALID_ARG, "axis %d is outside a %d-dimensional tensor", axis,
                   t->ndim);
        return -1;
    }
    return t->shape[axis];
}

VDEV_API int64_t vdev_tensor_numel(const vdev_tensor_t *t)
{
    return vdev_tensor_valid(t) ? t->numel : -1;
}

VDEV_API enum vdev_dtype vdev_tensor_dtype(const vdev_tensor_t *t)
{
    return vdev_tensor_valid(t) ? t->dtype : VDEV_DTYPE_COUNT;
}

VDEV_API const char *vdev_tensor_device(const vdev_tensor_t *t)
{
    return vdev_tensor_valid(t) ? t->dev->name : NULL;
}

/* ---- contents ---- */

struct fill_arg {
    void *data;
    int64_t n;
    uint32_t bits;
};

static void fill_fn(void *varg)
{
    const struct fill_arg *a = varg;
    uint32_t *p = a->data;
    for (int64_t i = 0; i < a->n; i++)
        p[i] = a->bits;
}

static uint32_t value_bits(enum vdev_dtype dt, double v)
{
    uint32_t bits;
    if (dt == VDEV_I32) {
        int32_t i = (int32_t)v;
        memcpy(&bits, &i, 4);
    } else {
        float f = (float)v;
        memcpy(&bits, &f, 4);
    }
    return bits;
}

/* Writes `bits` to every element, on the device's stream. */
static enum vdev_status fill_bits(vdev_tensor_t *t, uint32_t bits)
{
    if (!t->numel)
        return VDEV_OK;
    struct vdev_backend *b = t->dev->backend;
    if (b->ops->host_addressable) {
        struct fill_arg a = {t->data, t->numel, bits};
        return vdev_backend_submit_host(b, t->dev->bdev, fill_fn, &a, sizeof a);
    }
    uint32_t *host = malloc(t->bytes);
    if (!host)
        return vdev_error(VDEV_ERR_OOM, "out of host memory filling a tensor");
    for (int64_t i = 0; i < t->numel; i++)
        host[i] = bits;
    enum vdev_status st = b->ops->copy_h2d(b->ctx, t->dev->bdev, t->data, host, t->bytes);
    free(host);
    return st;
}

static vdev_tensor_t *make_filled(const int64_t *shape, int ndim, enum vdev_dtype dt, double v)
{
    if (vdev_init() != VDEV_OK)
        return NULL;
    vdev_tensor_op_tag = "Fill";
    vdev_tensor_t *t = vdev_tensor_new(vdev_tensor_creation_device(), dt, shape, ndim);
    if (!t)
        return NULL;
    if (fill_bits(t, value_bits(dt, v)) != VDEV_OK) {
        vdev_tensor_free(t);
        return NULL;
    }
    return t;
}

VDEV_API vdev_tensor_t *vdev_tensor_zeros(const int64_t *shape, int ndim, enum vdev_dtype dt)
{
    return make_filled(shape, ndim, dt, 0.0);
}

VDEV_API vdev_tensor_t *vdev_tensor_ones(const int64_t *shape, int ndim, enum vdev_dtype dt)
{
    return make_filled(shape, ndim, dt, 1.0);
}

VDEV_API vdev_tensor_t *vdev_tensor_fill(const int64_t *shape, int ndim, enum vdev_dtype dt,
                                         double value)
{
    return make_filled(shape, ndim, dt, value);
}

static enum vdev_status upload(vdev_tensor_t *t, const void *host)
{
    if (!t->bytes)
        return VDEV_OK;
    struct vdev_backend *b = t->dev->backend;
    return b->ops->copy_h2d(b->ctx, t->dev->bdev, t->data, host, t->bytes);
}

VDEV_API vdev_tensor_t *vdev_tensor_from_host(const void *data, const int64_t *shape, int ndim,
                                              enum vdev_dtype dt)
{
    if (vdev_init() != VDEV_OK)
        return NULL;
    if (!data && vdev_shape_check(shape, ndim) == VDEV_OK) {
        int64_t n = 1;
        for (int i = 0; i < ndim; i++)
            n *= shape[i];
        if (n) {
            vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_from_host: data is NULL");
            return NULL;
        }
    }
    vdev_tensor_op_tag = "FromHost";
    vdev_tensor_t *t = vdev_tensor_new(vdev_tensor_creation_device(), dt, shape, ndim);
    if (!t)
        return NULL;
    if (upload(t, data) != VDEV_OK) {
        vdev_tensor_free(t);
        return NULL;
    }
    return t;
}

/* SplitMix64: a counter-based generator, value i of stream `seed`. */
static uint64_t mix64(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i + 1) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): 24 random bits, never 0. */
static double unit(uint64_t seed, uint64_t i)
{
    return ((double)(mix64(seed, i) >> 40) + 0.5) / 16777216.0;
}

static vdev_tensor_t *make_random(const int64_t *shape, int ndim, int normal, float a, float b,
                                  uint64_t seed)
{
    if (vdev_init() != VDEV_OK)
        return NULL;
    vdev_tensor_op_tag = normal ? "RandomNormal" : "RandomUniform";
    vdev_tensor_t *t = vdev_tensor_new(vdev_tensor_creation_device(), VDEV_F32, shape, ndim);
    if (!t || !t->numel)
        return t;
    float *host = malloc(t->bytes);
    if (!host) {
        vdev_tensor_free(t);
        vdev_error(VDEV_ERR_OOM, "out of host memory drawing a random tensor");
        return NULL;
    }
    for (int64_t i = 0; i < t->numel; i++) {
        if (normal) {
            /* Box-Muller on the pair (2k, 2k+1): element i takes cos or sin. */
            uint64_t k = (uint64_t)i / 2;
            double u1 = unit(seed, 2 * k), u2 = unit(seed, 2 * k + 1);
            double r = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
            host[i] = (float)(a + b * r * ((i & 1) ? sin(th) : cos(th)));
        } else {
            host[i] = (float)(a + (b - a) * unit(seed, (uint64_t)i));
        }
    }
    enum vdev_status st = upload(t, host);
    free(host);
    if (st != VDEV_OK) {
        vdev_tensor_free(t);
        return NULL;
    }
    return t;
}

VDEV_API vdev_tensor_t *vdev_tensor_uniform(const int64_t *shape, int ndim, float lo, float hi,
                                            uint64_t seed)
{
    if (!(hi >= lo)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_uniform: hi (%g) < lo (%g)", hi, lo);
        return NULL;
    }
    return make_random(shape, ndim, 0, lo, hi, seed);
}

VDEV_API vdev_tensor_t *vdev_tensor_normal(const int64_t *shape, int ndim, float mean, float stddev,
                                           uint64_t seed)
{
    if (!(stddev >= 0)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_normal: stddev %g < 0", stddev);
        return NULL;
    }
    return make_random(shape, ndim, 1, mean, stddev, seed);
}

VDEV_API enum vdev_status vdev_tensor_to_host(const vdev_tensor_t *t, void *dst, size_t dst_bytes)
{
    if (!vdev_tensor_valid(t))
        return vdev_last_status();
    if (!dst && t->bytes)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_to_host: dst is NULL");
    if (dst_bytes < t->bytes)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_tensor_to_host: %zu bytes of room for a tensor of %llu bytes",
                          dst_bytes, (unsigned long long)t->bytes);
    if (!t->bytes)
        return VDEV_OK;
    struct vdev_backend *b = t->dev->backend;
    return b->ops->copy_d2h(b->ctx, t->dev->bdev, dst, t->data, t->bytes);
}

VDEV_API float vdev_tensor_item(const vdev_tensor_t *t)
{
    float v;
    if (!vdev_tensor_valid(t))
        return NAN;
    if (t->numel != 1 || t->dtype != VDEV_F32) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_item: needs a one-element float tensor");
        return NAN;
    }
    if (vdev_tensor_to_host(t, &v, sizeof v) != VDEV_OK)
        return NAN;
    return v;
}

/* ---- copies ---- */

/* Copies src's contents into dst's memory (same bytes), ordered on both
 * streams. */
static enum vdev_status copy_contents(const vdev_tensor_t *src, vdev_tensor_t *dst)
{
    if (!src->bytes)
        return VDEV_OK;
    struct vdev_ldev *s = src->dev, *d = dst->dev;
    enum vdev_status st;
    if (s->backend == d->backend) {
        st = d->backend->ops->copy_d2d(d->backend->ctx, d->bdev, dst->data, s->bdev, src->data,
                                       src->bytes);
        if (st == VDEV_OK && s->bdev != d->bdev)
            vdev_tensor_mark_read_by(src, d);
    } else if (!s->backend->ops->is_gpu) {
        /* host -> device: work on the CPU is already done */
        st = d->backend->ops->copy_h2d(d->backend->ctx, d->bdev, dst->data, src->data, src->bytes);
    } else if (!d->backend->ops->is_gpu) {
        /* device -> host: the copy waits for the device's stream */
        st = s->backend->ops->copy_d2h(s->backend->ctx, s->bdev, dst->data, src->data, src->bytes);
    } else {
        st = vdev_error(VDEV_ERR_UNSUPPORTED, "no copy path from %s to %s", s->name, d->name);
    }
    return st;
}

vdev_tensor_t *vdev_tensor_copy_to(const vdev_tensor_t *t, struct vdev_ldev *dst)
{
    vdev_tensor_op_tag = "Copy";
    vdev_tensor_t *c = vdev_tensor_new(dst, t->dtype, t->shape, t->ndim);
    if (!c)
        return NULL;
    uint64_t t0 = vdev_observe_on() ? vdev_observe_now() : 0;
    if (copy_contents(t, c) != VDEV_OK) {
        vdev_tensor_free(c);
        return NULL;
    }
    if (t0 && t->dev != dst)
        vdev_observe_copy(t->dev->id, dst->id, t->bytes, t0, vdev_observe_now());
    if (t->dev != dst)
        vdev_placement_record_copy(t->dev, dst, t->bytes);
    return c;
}

VDEV_API vdev_tensor_t *vdev_tensor_to(const vdev_tensor_t *t, const char *device)
{
    if (!t)
        return NULL;
    if (!vdev_tensor_valid(t))
        return NULL;
    struct vdev_ldev *d;
    if (vdev_runtime_find(device, &d) != VDEV_OK)
        return NULL;
    return vdev_tensor_copy_to(t, d);
}

VDEV_API vdev_tensor_t *vdev_variable(vdev_tensor_t *t)
{
    if (!t)
        return NULL;
    if (!vdev_tensor_valid(t))
        return NULL;
    if (t->base) {
        vdev_error(VDEV_ERR_INVALID_ARG, "a view (reshape) cannot become a variable");
        return NULL;
    }
    if (t->in_scope)
        scope_remove(t);
    t->kept = 0;
    t->is_variable = 1;
    t->requires_grad = t->dtype == VDEV_F32;
    t->home = (int16_t)t->dev->id;
    return t;
}

VDEV_API enum vdev_status vdev_assign(vdev_tensor_t *var, const vdev_tensor_t *value)
{
    if (!var || !value)
        return vdev_last_status() != VDEV_OK ? vdev_last_status()
                                             : vdev_error(VDEV_ERR_INVALID_ARG, "NULL tensor");
    if (!vdev_tensor_valid(var) || !vdev_tensor_valid(value))
        return VDEV_ERR_INVALID_ARG;
    char s1[96], s2[96];
    if (var->numel != value->numel || var->ndim != value->ndim || var->dtype != value->dtype ||
        memcmp(var->shape, value->shape, sizeof var->shape) != 0)
        return vdev_error(VDEV_ERR_SHAPE, "vdev_assign: value of shape%s %s into a variable of "
                                          "shape%s %s",
                          vdev_shape_str(value->shape, value->ndim, s1, sizeof s1),
                          vdev_dtype_name(value->dtype),
                          vdev_shape_str(var->shape, var->ndim, s2, sizeof s2),
                          vdev_dtype_name(var->dtype));
    if (value->dev != var->dev)
        vdev_placement_record_copy(value->dev, var->dev, value->bytes);
    return copy_contents(value, var);
}
