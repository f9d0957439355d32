/* dlpack.c — tensors in and out through DLPack, the exchange format of numpy,
 * PyTorch, JAX and CuPy (dlpack/dlpack.h, version 0.6 and later).
 *
 * Export hands out a DLManagedTensor over the tensor's own memory. The
 * structure lives in one allocation together with its shape and strides and a
 * reference to the tensor that owns the memory (a view's base), so the memory
 * stays whatever the caller does with the handle, until the consumer calls
 * the deleter, which drops the reference. Host-readable memory (cpu, sim)
 * goes out as kDLCPU; CUDA memory as kDLCUDA with the card's ordinal. Export
 * waits for the device's stream, so the consumer reads finished contents;
 * while a kDLCPU export of a simulated GPU's memory lives, every later write
 * to that memory by vdev (ops in place, assign, optimizer updates) waits for
 * the stream too (vdev_tens_after_write), as its consumer has no stream to
 * wait on: it reads the memory when it likes; and so does every later read
 * of it queued by vdev (an op's input, a copy's source, a collective's input
 * on any rank's stream: vdev_tens_after_read),
 * as the consumer may write the memory when it likes, and the read must see
 * what it held when the read was issued. The consumer's writes bump no
 * version (tensor.h, "values a tape read"), so while any export lives, an op
 * that a tape records reads a copy of the memory when its gradient reads the
 * value (exec.c, counted in the owner's `exports`).
 *
 * Import makes a CPU:0 tensor. Compact, row-major, 4-byte aligned host memory
 * is wrapped without copying: the tensor owns no block, and its last
 * reference calls the producer's deleter (tensor.c, ext_release), which
 * keeps the producer alive until then. Anything else host-readable is
 * gathered element by element into a new tensor, and the deleter runs at
 * once. Imported memory is the producer's, so it outlives vdev_shutdown().
 *
 * Bool goes neither way: vdev's bool element is a 32-bit word, DLPack's
 * (kDLBool) a byte, so the memory cannot be shared; both directions refuse
 * it and name the cast through int32 instead. */
#define _GNU_SOURCE
#include "tensor/tensor.h"

#include <dlpack/dlpack.h>
#include <string.h>

/* Exports whose deleter has not run (vdev_dlpack_live_exports). */
static _Atomic int live_exports;

/* One export: the structure the consumer holds, and what it points to. */
struct export {
    DLManagedTensor m;               /* first, so &e->m is the export */
    int64_t shape[VDEV_MAX_DIMS];    /* m.dl_tensor.shape points here */
    int64_t strides[VDEV_MAX_DIMS];  /* in elements, row-major */
    struct vdev_tens *owner;         /* the tensor owning the memory; holds a reference */
    int host;                        /* counted in owner->host_exports */
};

/* The address of an export with no elements: DLPack consumers expect a
 * non-NULL, aligned data pointer even then. Never read or written. */
static _Alignas(256) const char no_elements[256];

static void export_deleter(DLManagedTensor *m)
{
    if (!m)
        return;
    struct export *e = m->manager_ctx;
    if (e->host) {
        atomic_fetch_sub(&e->owner->host_exports, 1);
        atomic_fetch_sub(&vdev_tens_host_exports_live, 1);
    }
    atomic_fetch_sub(&e->owner->exports, 1);
    vdev_tens_release(e->owner);
    free(e);
    atomic_fetch_sub(&live_exports, 1);
}

/* DLPack's dtype of a vdev dtype: 1, or 0 for one it cannot share. A bool
 * is a 32-bit word, but DLPack's bool (kDLBool, 8 bits) is a byte: a
 * consumer would read the words' bytes as four bools each, so a bool tensor
 * is not exported (it would take a copy, and DLPack shares memory). */
static int dl_dtype(enum vdev_dtype dt, DLDataType *out)
{
    switch (dt) {
    case VDEV_F32: *out = (DLDataType){kDLFloat, 32, 1}; return 1;
    case VDEV_I32: *out = (DLDataType){kDLInt, 32, 1}; return 1;
    default: return 0;
    }
}

VDEV_API enum vdev_status vdev_tensor_to_dlpack(vdev_tensor_t *h, struct DLManagedTensor **out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_to_dlpack: out is NULL");
    *out = NULL;
    struct vdev_tens *t = vdev_tens_use(h, "vdev_tensor_to_dlpack");
    if (!t)
        return vdev_last_status();
    DLDataType dtype;
    if (t->dtype == VDEV_BOOL)
        return vdev_error(VDEV_ERR_UNSUPPORTED,
                          "vdev_tensor_to_dlpack: a vdev bool tensor holds 32-bit words, which "
                          "DLPack's 8-bit bool cannot share; cast it to int32 first (vdev_cast)");
    if (!dl_dtype(t->dtype, &dtype)) /* a dtype added without its DLPack name */
        return vdev_error(VDEV_ERR_UNSUPPORTED, "vdev_tensor_to_dlpack: DLPack has no %s dtype",
                          vdev_dtype_name(t->dtype));
    struct vdev_ldev *dev = t->dev;
    struct vdev_tens *owner = t->base ? t->base : t;
    struct export *e = vdev_calloc(1, sizeof *e);
    if (!e)
        return vdev_error(VDEV_ERR_OOM, "vdev_tensor_to_dlpack: out of host memory");
    /* The consumer reads the memory as soon as it has it, and may write it:
     * another stream still reading it (a lazy copy) finishes first. Counted
     * first, so a tape's read from now on is of a copy (exec.c). */
    atomic_fetch_add(&owner->exports, 1);
    vdev_tens_before_write(t, NULL);
    enum vdev_status st = vdev_backend_synchronize(dev->backend, dev->bdev);
    if (st != VDEV_OK) {
        atomic_fetch_sub(&owner->exports, 1);
        free(e);
        return st;
    }
    int64_t stride = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        e->shape[i] = t->shape[i];
        e->strides[i] = stride;
        stride *= t->shape[i];
    }
    e->owner = owner;
    vdev_tens_retain(e->owner);
    DLTensor *d = &e->m.dl_tensor;
    d->data = t->data ? t->data : (void *)(uintptr_t)no_elements;
    if (dev->backend->ops->host_addressable) {
        d->device = (DLDevice){kDLCPU, 0};
        e->host = 1;
        atomic_fetch_add(&e->owner->host_exports, 1);
        atomic_fetch_add(&vdev_tens_host_exports_live, 1);
    } else
        d->device = (DLDevice){kDLCUDA, dev->physical};
    d->ndim = t->ndim;
    d->dtype = dtype;
    d->shape = e->shape;
    d->strides = e->strides;
    d->byte_offset = 0;
    e->m.manager_ctx = e;
    e->m.deleter = export_deleter;
    atomic_fetch_add(&live_exports, 1);
    *out = &e->m;
    return VDEV_OK;
}

VDEV_API int vdev_dlpack_live_exports(void) { return atomic_load(&live_exports); }

/* ---- import ---- */

/* DLPack's name of a device type, for messages. */
static const char *device_type_name(int type)
{
    switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    /* DLPack 0.7 and later: after this header's version, so by number */
    case 14: return "kDLOneAPI";
    case 15: return "kDLWebGPU";
    case 16: return "kDLHexagon";
    case 17: return "kDLMAIA";
    default: return "an unknown device type";
    }
}

/* kDLBool, DLPack 0.8's bool (8 bits), after this header's version: by number. */
#define DL_BOOL 6

/* "float64", "int8", "bfloat16", "float32x4", "bool8": a dtype in numpy's
 * words; a code no DLPack version names is "dtype code 9 (8 bits)". */
static char *dtype_str(DLDataType dt, char *buf, size_t cap)
{
    /* kDLBool (6) came in DLPack 0.8, after this header's version */
    static const char *const codes[] = {"int", "uint", "float", "handle", "bfloat", "complex",
                                        "bool"};
    if (dt.code >= VDEV_ARRAY_LEN(codes)) {
        snprintf(buf, cap, "code %u (%u bits, %u lanes)", (unsigned)dt.code, (unsigned)dt.bits,
                 (unsigned)dt.lanes);
        return buf;
    }
    const char *code = codes[dt.code];
    if (dt.lanes == 1)
        snprintf(buf, cap, "%s%u", code, (unsigned)dt.bits);
    else
        snprintf(buf, cap, "%s%ux%u", code, (unsigned)dt.bits, (unsigned)dt.lanes);
    return buf;
}

static void import_release(void *ctx)
{
    DLManagedTensor *m = ctx;
    if (m->deleter)
        m->deleter(m);
}

/* Copies the strided elements of d (4 bytes each, at src) into dst, packed
 * row-major. Strides are in elements and may be negative. */
static void gather(const DLTensor *d, const char *src, char *dst)
{
    int64_t shape[VDEV_MAX_DIMS] = {1, 1, 1, 1}, stride[VDEV_MAX_DIMS] = {0, 0, 0, 0};
    int pad = VDEV_MAX_DIMS - d->ndim;
    for (int i = 0; i < d->ndim; i++) {
        shape[pad + i] = d->shape[i];
        stride[pad + i] = d->strides[i];
    }
    for (int64_t a = 0; a < shape[0]; a++)
        for (int64_t b = 0; b < shape[1]; b++)
            for (int64_t c = 0; c < shape[2]; c++)
                for (int64_t k = 0; k < shape[3]; k++) {
                    int64_t off = a * stride[0] + b * stride[1] + c * stride[2] + k * stride[3];
                    memcpy(dst, src + off * 4, 4);
                    dst += 4;
                }
}

VDEV_API vdev_tensor_t *vdev_tensor_from_dlpack(struct DLManagedTensor *m)
{
    if (vdev_runtime_refuse_forked("vdev_tensor_from_dlpack")) /* no runtime can hold it here */
        return NULL;
    if (!m) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_from_dlpack: the DLPack tensor is NULL");
        return NULL;
    }
    const DLTensor *d = &m->dl_tensor;
    int dt = d->device.device_type;
    if (dt != kDLCPU && dt != kDLCUDAHost && dt != kDLCUDAManaged) {
        vdev_error(VDEV_ERR_UNSUPPORTED,
                   "vdev_tensor_from_dlpack: the memory is on %s (device type %d, device %d), "
                   "which the host cannot read; vdev imports host memory (kDLCPU, kDLCUDAHost, "
                   "kDLCUDAManaged): copy it to the host first",
                   device_type_name(dt), dt, d->device.device_id);
        return NULL;
    }
    enum vdev_dtype dtype;
    if (d->dtype.code == kDLFloat && d->dtype.bits == 32 && d->dtype.lanes == 1)
        dtype = VDEV_F32;
    else if (d->dtype.code == kDLInt && d->dtype.bits == 32 && d->dtype.lanes == 1)
        dtype = VDEV_I32;
    else if (d->dtype.code == DL_BOOL && d->dtype.bits == 8 && d->dtype.lanes == 1) {
        /* bytes: vdev's bool is a 32-bit word, so sharing them is impossible */
        vdev_error(VDEV_ERR_UNSUPPORTED,
                   "vdev_tensor_from_dlpack: dtype bool8; a vdev bool tensor holds 32-bit "
                   "words, which DLPack's 8-bit bool cannot share: cast it to int32 before the "
                   "import (and to bool after it, vdev_cast)");
        return NULL;
    } else {
        /* the producer's cast is the way in: vdev reads no other dtype */
        const char *hint = "";
        if (d->dtype.lanes == 1 && (d->dtype.code == kDLInt || d->dtype.code == kDLUInt))
            hint = ": cast it to int32 before the import";
        else if (d->dtype.lanes == 1 && (d->dtype.code == kDLFloat || d->dtype.code == kDLBfloat))
            hint = ": cast it to float32 before the import";
        char b[48];
        vdev_error(VDEV_ERR_UNSUPPORTED,
                   "vdev_tensor_from_dlpack: dtype %s; vdev tensors are float32 or int32%s",
                   dtype_str(d->dtype, b, sizeof b), hint);
        return NULL;
    }
    if (d->ndim < 0 || d->ndim > VDEV_MAX_DIMS) {
        vdev_error(VDEV_ERR_UNSUPPORTED,
                   "vdev_tensor_from_dlpack: %d dimensions; vdev tensors have 0 to %d", d->ndim,
                   VDEV_MAX_DIMS);
        return NULL;
    }
    if (vdev_shape_check(NULL, d->shape, d->ndim) != VDEV_OK) {
        char msg[400];
        vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_from_dlpack: %s", msg);
        return NULL;
    }
    int64_t numel = vdev_shape_numel(d->shape, d->ndim);
    const char *p = (const char *)d->data + d->byte_offset;
    if (numel && !d->data) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_from_dlpack: data is NULL");
        return NULL;
    }
    /* Compact row-major: strides absent, or each that matters (size > 1) as
     * packed rows would have it. */
    int compact = 1;
    if (d->strides) {
        int64_t want = 1;
        for (int i = d->ndim - 1; i >= 0; i--) {
            if (d->shape[i] > 1 && d->strides[i] != want)
                compact = 0;
            want *= d->shape[i];
        }
    }
    if (vdev_init() != VDEV_OK)
        return NULL;
    struct vdev_ldev *cpu = vdev_runtime_lookup(VDEV_DEVICE_CPU, 0);
    VDEV_ASSERT(cpu && cpu->backend->ops->host_addressable);
    if (!numel || (compact && (uintptr_t)p % 4 == 0)) {
        struct vdev_tens *t = vdev_tens_wrap(cpu, dtype, d->shape, d->ndim, (void *)(uintptr_t)p,
                                             import_release, m);
        if (t)
            t->host_written = 1;
        return vdev_tens_handle(t);
    }
    vdev_tensor_op_tag = "FromDLPack";
    struct vdev_tens *t = vdev_tens_new(cpu, dtype, d->shape, d->ndim);
    if (!t)
        return NULL;
    if (compact)
        memcpy(t->data, p, t->bytes); /* unaligned, else packed */
    else
        gather(d, p, t->data);
    t->host_written = 1;
    import_release(m);
    return vdev_tens_handle(t);
}
