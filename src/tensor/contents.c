/* contents.c — what goes into a tensor and what comes out: fills, copies
 * from and to host memory, and random tensors.
 *
 * Contents are written on the device's stream: fills run as a small host
 * function on host-addressable backends (cpu, sim) and as an upload
 * elsewhere; random tensors are drawn on the host from a counter-based
 * generator (SplitMix64 of seed and index), so the same seed gives the same
 * numbers on every device, then copied in. A tensor whose contents were
 * copied from the host (synchronously) is marked host_written, so a check
 * that must read it on the host (the labels of a cross-entropy) need not
 * wait for its device's stream. */
#define _GNU_SOURCE
#include "tensor/tensor.h"

#include <math.h>
#include <string.h>

/* ---- fills ---- */

/* The bits of v as an element of dt; v must be valid for dt (i32: finite and
 * within range after truncation, see vdev_tensor_fill). A bool is the word 1
 * where v is nonzero (NaN included, as a cast to bool), else 0. */
static uint32_t value_bits(enum vdev_dtype dt, double v)
{
    uint32_t bits;
    if (dt == VDEV_BOOL) {
        bits = v != 0.0; /* NaN compares unequal to 0: 1 */
    } else if (dt == VDEV_I32) {
        int32_t i = (int32_t)v;
        memcpy(&bits, &i, 4);
    } else {
        float f = (float)v;
        memcpy(&bits, &f, 4);
    }
    return bits;
}

/* Writes `bits` to every element, on the device's stream (the backend's own
 * fill where it has one: cuMemsetD32Async on CUDA; a host loop on cpu and sim). */
static enum vdev_status fill_bits(struct vdev_tens *t, uint32_t bits)
{
    return vdev_backend_fill(t->dev->backend, t->dev->bdev, t->data, bits, (uint64_t)t->numel);
}

struct vdev_tens *vdev_tens_filled(struct vdev_ldev *dev, enum vdev_dtype dt,
                                   const int64_t *shape, int ndim, double v)
{
    vdev_tensor_op_tag = "Fill";
    struct vdev_tens *t = vdev_tens_new(dev, dt, shape, ndim);
    if (!t)
        return NULL;
    if (fill_bits(t, value_bits(dt, v)) != VDEV_OK) {
        vdev_tens_drop(t);
        return NULL;
    }
    return t;
}

static vdev_tensor_t *make_filled(const char *fn, const int64_t *shape, int ndim,
                                  enum vdev_dtype dt, double v)
{
    if (vdev_init() != VDEV_OK || vdev_shape_check(fn, shape, ndim) != VDEV_OK)
        return NULL;
    return vdev_tens_handle(vdev_tens_filled(vdev_tens_creation_device(), dt, shape, ndim, v));
}

VDEV_API vdev_tensor_t *vdev_tensor_zeros(const int64_t *shape, int ndim, enum vdev_dtype dt)
{
    return make_filled("vdev_tensor_zeros", shape, ndim, dt, 0.0);
}

VDEV_API vdev_tensor_t *vdev_tensor_ones(const int64_t *shape, int ndim, enum vdev_dtype dt)
{
    return make_filled("vdev_tensor_ones", shape, ndim, dt, 1.0);
}

VDEV_API vdev_tensor_t *vdev_tensor_fill(const int64_t *shape, int ndim, enum vdev_dtype dt,
                                         double value)
{
    /* C leaves the conversion of NaN, an infinity or a value beyond int32
     * undefined: refuse them rather than fill with whatever the CPU makes. */
    if (dt == VDEV_I32 && !(value > -2147483649.0 && value < 2147483648.0)) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "vdev_tensor_fill: %g is not an int32 value (an int32 tensor takes finite "
                   "values in [-2147483648, 2147483647], truncated toward zero)",
                   value);
        return NULL;
    }
    return make_filled("vdev_tensor_fill", shape, ndim, dt, value);
}

/* ---- from and to host memory ---- */

static enum vdev_status upload(struct vdev_tens *t, const void *host)
{
    if (!t->bytes)
        return VDEV_OK;
    struct vdev_backend *b = t->dev->backend;
    return b->ops->copy_h2d(b->ctx, t->dev->bdev, t->data, host, t->bytes);
}

/* A bool tensor's words from the host must each be 0 or 1 (what every op
 * that reads a bool relies on): VDEV_ERR_INVALID_ARG naming the first that
 * is not. */
static enum vdev_status check_bools(const void *data, int64_t numel)
{
    const unsigned char *p = data;
    for (int64_t i = 0; i < numel; i++) {
        uint32_t w;
        memcpy(&w, p + 4 * i, 4); /* the caller's memory need not be aligned */
        if (w > 1)
            return vdev_error(VDEV_ERR_INVALID_ARG,
                              "vdev_tensor_from_host: element %lld of a bool tensor is %lld, "
                              "not 0 or 1",
                              (long long)i, (long long)(int32_t)w);
    }
    return VDEV_OK;
}

VDEV_API vdev_tensor_t *vdev_tensor_from_host(const void *data, const int64_t *shape, int ndim,
                                              enum vdev_dtype dt)
{
    if (vdev_init() != VDEV_OK)
        return NULL;
    if (vdev_shape_check("vdev_tensor_from_host", shape, ndim) != VDEV_OK)
        return NULL;
    if (!data) {
        if (vdev_shape_numel(shape, ndim)) {
            vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_from_host: data is NULL");
            return NULL;
        }
    }
    if (dt == VDEV_BOOL && check_bools(data, vdev_shape_numel(shape, ndim)) != VDEV_OK)
        return NULL; /* before the tensor is made: nothing to take back */
    vdev_tensor_op_tag = "FromHost";
    struct vdev_tens *t = vdev_tens_new(vdev_tens_creation_device(), dt, shape, ndim);
    if (!t)
        return NULL;
    if (upload(t, data) != VDEV_OK) {
        vdev_tens_drop(t);
        return NULL;
    }
    t->host_written = 1; /* copy_h2d returns once the copy is done */
    return vdev_tens_handle(t);
}

VDEV_API enum vdev_status vdev_tensor_to_host(const vdev_tensor_t *h, void *dst, size_t dst_bytes)
{
    /* held: a racing free cannot let another tensor's values be read */
    struct vdev_tens *t = vdev_tens_hold(h, "vdev_tensor_to_host");
    if (!t)
        return vdev_last_status();
    enum vdev_status st = VDEV_OK;
    if (!dst && t->bytes) {
        st = vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_to_host: dst is NULL");
    } else if (dst_bytes < t->bytes) {
        st = vdev_error(VDEV_ERR_INVALID_ARG,
                        "vdev_tensor_to_host: %zu bytes of room for a tensor of %llu bytes",
                        dst_bytes, (unsigned long long)t->bytes);
    } else if (t->bytes) {
        struct vdev_backend *b = t->dev->backend;
        st = b->ops->copy_d2h(b->ctx, t->dev->bdev, dst, t->data, t->bytes);
    }
    vdev_tens_release(t);
    return st;
}

VDEV_API float vdev_tensor_item(const vdev_tensor_t *h)
{
    float v;
    const struct vdev_tens *t = vdev_tens_use(h, "vdev_tensor_item");
    if (!t)
        return NAN;
    if (t->numel != 1 || t->dtype != VDEV_F32) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_item: needs a one-element float tensor");
        return NAN;
    }
    if (vdev_tensor_to_host(h, &v, sizeof v) != VDEV_OK)
        return NAN;
    return v;
}

/* ---- random tensors ---- */

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
    if (vdev_init() != VDEV_OK ||
        vdev_shape_check(normal ? "vdev_tensor_normal" : "vdev_tensor_uniform", shape, ndim) !=
            VDEV_OK)
        return NULL;
    vdev_tensor_op_tag = normal ? "RandomNormal" : "RandomUniform";
    /* The draws' host buffer first: the host saying no then leaves no trace on
     * the device (no block taken and given back, in its statistics or its
     * allocation trace). */
    int64_t numel = vdev_shape_numel(shape, ndim);
    float *host = numel ? vdev_malloc((size_t)numel * sizeof *host) : NULL;
    if (numel && !host) {
        vdev_error(VDEV_ERR_OOM, "out of host memory drawing a random tensor");
        return NULL;
    }
    struct vdev_tens *t = vdev_tens_new(vdev_tens_creation_device(), VDEV_F32, shape, ndim);
    if (!t || !t->numel) {
        free(host);
        return vdev_tens_handle(t);
    }
    /* hi - lo in float, as always (the draws stay bit for bit what they were),
     * but in double when that overflows (bounds near +-FLT_MAX): then every
     * draw is still finite and within the bounds. */
    float span_f = b - a;
    double span = isinf(span_f) ? (double)b - (double)a : (double)span_f;
    for (int64_t i = 0; i < t->numel; i++) {
        if (normal) {
            /* Box-Muller on the pair (2k, 2k+1): element i takes cos or sin. */
            uint64_t k = (uint64_t)i / 2;
            double u1 = unit(seed, 2 * k), u2 = unit(seed, 2 * k + 1);
            double r = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
            host[i] = (float)(a + b * r * ((i & 1) ? sin(th) : cos(th)));
        } else {
            host[i] = (float)(a + span * unit(seed, (uint64_t)i));
        }
    }
    enum vdev_status st = upload(t, host);
    free(host);
    if (st != VDEV_OK) {
        vdev_tens_drop(t);
        return NULL;
    }
    t->host_written = 1;
    return vdev_tens_handle(t);
}

VDEV_API vdev_tensor_t *vdev_tensor_uniform(const int64_t *shape, int ndim, float lo, float hi,
                                            uint64_t seed)
{
    /* finite bounds: lo + (hi - lo) u is NaN or infinite otherwise (TensorFlow
     * gives those NaNs silently); a NaN is named, not compared */
    if (vdev_check_finite("vdev_tensor_uniform", "lo", lo) != VDEV_OK ||
        vdev_check_finite("vdev_tensor_uniform", "hi", hi) != VDEV_OK)
        return NULL;
    if (!(hi >= lo)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_uniform: hi (%g) < lo (%g)", hi, lo);
        return NULL;
    }
    return make_random(shape, ndim, 0, lo, hi, seed);
}

VDEV_API vdev_tensor_t *vdev_tensor_normal(const int64_t *shape, int ndim, float mean, float stddev,
                                           uint64_t seed)
{
    if (vdev_check_finite("vdev_tensor_normal", "mean", mean) != VDEV_OK ||
        vdev_check_finite("vdev_tensor_normal", "stddev", stddev) != VDEV_OK)
        return NULL;
    if (!(stddev >= 0)) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_tensor_normal: stddev %g < 0", stddev);
        return NULL;
    }
    return make_random(shape, ndim, 1, mean, stddev, seed);
}
