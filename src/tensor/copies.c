/* copies.c — a tensor's contents copied to another tensor, on one device or
 * between devices (device to device, lazily where the source's stream need
 * not wait; host to device; device to host), and the two calls built on it:
 * vdev_variable, which makes a tensor a variable, and vdev_assign, which
 * writes a value into one in place (see tensor.h). */
#define _GNU_SOURCE
#include "tensor/tensor.h"

#include "runtime/observe.h"

#include <string.h>

/* Whether a copy of src to d's stream may be lazy: the source's stream is
 * then not held until the copy has run (so it can run ahead: a chain of
 * models on several GPUs keeps every stream busy). Every later write to the
 * source waits for the reader instead (vdev_tens_before_write), and its
 * block is freed after the reader's stream (free_block). Only one lazy
 * reader is remembered, so a second reader on another device, a variable
 * (written in place every step) and memory another framework owns take
 * the plain copy, whose source stream waits. */
static int copy_may_be_lazy(const struct vdev_tens *src, const struct vdev_ldev *d)
{
    struct vdev_tens *owner = vdev_tens_mut(src->base ? src->base : src);
    if (!d->backend->ops->copy_d2d_lazy || owner->is_variable || owner->ext_release)
        return 0;
    int16_t none = -1;
    return atomic_compare_exchange_strong_explicit(&owner->lazy_reader, &none, (int16_t)d->id,
                                                   memory_order_acq_rel, memory_order_acquire) ||
           none == d->id;
}

enum vdev_status vdev_tens_copy_contents(const struct vdev_tens *src, struct vdev_tens *dst,
                                         int fresh)
{
    if (!src->bytes)
        return VDEV_OK;
    struct vdev_ldev *s = src->dev, *d = dst->dev;
    enum vdev_status st;
    if (!fresh)
        vdev_tens_write_begin(dst, d); /* vdev_assign ends it */
    if (s->backend == d->backend && s->bdev != d->bdev && copy_may_be_lazy(src, d)) {
        /* after the op that wrote src, not after all its stream's work */
        const struct vdev_tens *owner = src->base ? src->base : src;
        uint64_t after = atomic_load_explicit(&owner->produced_at, memory_order_acquire);
        st = d->backend->ops->copy_d2d_lazy(d->backend->ctx, d->bdev, dst->data, s->bdev,
                                            src->data, src->bytes, after);
        if (st == VDEV_OK)
            vdev_tens_mark_read_by(src, d);
    } else if (s->backend == d->backend) {
        st = d->backend->ops->copy_d2d(d->backend->ctx, d->bdev, dst->data, s->bdev, src->data,
                                       src->bytes);
        if (st == VDEV_OK && s->bdev != d->bdev)
            vdev_tens_mark_read_by(src, d);
    } else if (!s->backend->ops->is_gpu) {
        /* host -> device: work on the CPU is already done */
        st = d->backend->ops->copy_h2d(d->backend->ctx, d->bdev, dst->data, src->data, src->bytes);
    } else if (!d->backend->ops->is_gpu) {
        /* device -> host: the copy waits for the device's stream */
        st = s->backend->ops->copy_d2h(s->backend->ctx, s->bdev, dst->data, src->data, src->bytes);
    } else {
        st = vdev_error(VDEV_ERR_UNSUPPORTED, "no copy path from %s to %s", s->name, d->name);
    }
    if (st == VDEV_OK)
        vdev_tens_after_read(src, d);
    return st;
}

struct vdev_tens *vdev_tens_copy_to(const struct vdev_tens *t, struct vdev_ldev *dst)
{
    vdev_tensor_op_tag = "Copy";
    struct vdev_tens *c = vdev_tens_new(dst, t->dtype, t->shape, t->ndim);
    if (!c)
        return NULL;
    uint64_t t0 = vdev_observe_on() ? vdev_observe_now() : 0;
    if (vdev_tens_copy_contents(t, c, 1) != VDEV_OK) {
        vdev_tens_drop(c);
        return NULL;
    }
    if (t0 && t->dev != dst)
        vdev_observe_copy(t->dev->id, dst->id, t->bytes, t0, vdev_observe_now());
    if (t->dev != dst)
        vdev_placement_record_copy(t->dev, dst, t->bytes);
    return c;
}

VDEV_API vdev_tensor_t *vdev_variable(vdev_tensor_t *h)
{
    if (!h)
        return NULL;
    struct vdev_tens *t = vdev_tens_use(h, "vdev_variable");
    if (!t)
        return NULL;
    if (t->base) {
        vdev_error(VDEV_ERR_INVALID_ARG, "a view (reshape) cannot become a variable");
        return NULL;
    }
    if (vdev_tens_scope_take(t, "vdev_variable") != VDEV_OK)
        return NULL;
    t->kept = 0;
    t->is_variable = 1;
    t->requires_grad = t->dtype == VDEV_F32;
    t->home = (int16_t)t->dev->id;
    return h;
}

VDEV_API enum vdev_status vdev_assign(vdev_tensor_t *hvar, const vdev_tensor_t *hvalue)
{
    if (!hvar || !hvalue)
        return vdev_last_status() != VDEV_OK ? vdev_last_status()
                                             : vdev_error(VDEV_ERR_INVALID_ARG, "NULL tensor");
    /* held: a racing free of either cannot send the copy elsewhere */
    struct vdev_tens *var = vdev_tens_hold(hvar, "vdev_assign");
    struct vdev_tens *value = var ? vdev_tens_hold(hvalue, "vdev_assign") : NULL;
    if (!var || !value) {
        enum vdev_status st = vdev_last_status();
        if (var)
            vdev_tens_release(var);
        return st;
    }
    char s1[96], s2[96];
    enum vdev_status st;
    if (var->numel != value->numel || var->ndim != value->ndim || var->dtype != value->dtype ||
        memcmp(var->shape, value->shape, sizeof var->shape) != 0) {
        st = vdev_error(VDEV_ERR_SHAPE, "vdev_assign: value of shape%s %s into a variable of "
                                        "shape%s %s",
                        vdev_shape_str(value->shape, value->ndim, s1, sizeof s1),
                        vdev_dtype_name(value->dtype),
                        vdev_shape_str(var->shape, var->ndim, s2, sizeof s2),
                        vdev_dtype_name(var->dtype));
    } else {
        if (value->dev != var->dev)
            vdev_placement_record_copy(value->dev, var->dev, value->bytes);
        var->host_written = 0;
        st = vdev_tens_copy_contents(value, var, 0);
        if (value->bytes)
            vdev_tens_write_end(var); /* begun by vdev_tens_copy_contents */
    }
    vdev_tens_release(value);
    vdev_tens_release(var);
    return st;
}
