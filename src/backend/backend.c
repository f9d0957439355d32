/* backend.c — wrappers over the backend tables (they supply the defaults of
 * optional entries: a fill without a fill entry), and the loader of the CUDA
 * plugin. The plugin is a separate shared library (libvdev-cuda.so) so that
 * the core never links CUDA: it is looked for in $VDEV_CUDA_PLUGIN (a path),
 * then beside the build, then on the loader's search path. */
#define _GNU_SOURCE
#include "backend/backend.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vdev_backend_destroy(struct vdev_backend *b)
{
    if (b && b->ops) {
        b->ops->destroy(b->ctx);
        b->ops = NULL;
        b->ctx = NULL;
    }
}

int vdev_backend_n_devices(const struct vdev_backend *b) { return b->ops->n_devices(b->ctx); }

enum vdev_status vdev_backend_device_info(const struct vdev_backend *b, int dev,
                                          struct vdev_backend_device_info *out)
{
    if (dev < 0 || dev >= vdev_backend_n_devices(b))
        return vdev_error(VDEV_ERR_NOT_FOUND, "%s backend has no device %d", b->ops->name, dev);
    return b->ops->device_info(b->ctx, dev, out);
}

enum vdev_status vdev_backend_mem_info(const struct vdev_backend *b, int dev, uint64_t *free_bytes,
                                       uint64_t *total_bytes)
{
    if (dev < 0 || dev >= vdev_backend_n_devices(b))
        return vdev_error(VDEV_ERR_NOT_FOUND, "%s backend has no device %d", b->ops->name, dev);
    return b->ops->mem_info(b->ctx, dev, free_bytes, total_bytes);
}

enum vdev_status vdev_backend_submit_host(const struct vdev_backend *b, int dev, vdev_host_fn fn,
                                          const void *arg, size_t arg_bytes)
{
    return b->ops->submit_host(b->ctx, dev, fn, arg, arg_bytes);
}

enum vdev_status vdev_backend_synchronize(const struct vdev_backend *b, int dev)
{
    return b->ops->synchronize(b->ctx, dev);
}

/* ---- fills ---- */

#define FILL_HOST_BYTES (1u << 20) /* host buffer of a fill through copy_h2d */

struct fill_arg {
    uint32_t *dst;
    uint64_t n;
    uint32_t value;
};

static void fill_fn(void *varg)
{
    const struct fill_arg *a = varg;
    for (uint64_t i = 0; i < a->n; i++)
        a->dst[i] = a->value;
}

enum vdev_status vdev_backend_fill(const struct vdev_backend *b, int dev, void *dst,
                                   uint32_t value, uint64_t n_words)
{
    if (!n_words)
        return VDEV_OK;
    if (!dst || (uintptr_t)dst % 4 != 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s backend: fill of %p: not a 4-byte aligned "
                          "device address", b->ops->name, dst);
    if (b->ops->fill)
        return b->ops->fill(b->ctx, dev, dst, value, n_words);
    if (b->ops->host_addressable) {
        struct fill_arg a = {dst, n_words, value};
        return b->ops->submit_host(b->ctx, dev, fill_fn, &a, sizeof a);
    }
    /* Neither: one host buffer of the pattern, copied over and over. */
    uint64_t bytes = n_words * 4;
    size_t cap = bytes < FILL_HOST_BYTES ? (size_t)bytes : FILL_HOST_BYTES;
    uint32_t *host = malloc(cap);
    if (!host)
        return vdev_error(VDEV_ERR_OOM, "out of host memory filling %llu bytes of device memory",
                          (unsigned long long)bytes);
    for (size_t i = 0; i < cap / 4; i++)
        host[i] = value;
    enum vdev_status st = VDEV_OK;
    for (uint64_t off = 0; st == VDEV_OK && off < bytes; off += cap) {
        uint64_t n = bytes - off < cap ? bytes - off : cap;
        st = b->ops->copy_h2d(b->ctx, dev, (char *)dst + off, host, n);
    }
    free(host);
    return st;
}

/* ---- the CUDA plugin ---- */

#ifndef VDEV_PLUGIN_DIR
#define VDEV_PLUGIN_DIR "."
#endif
#define CUDA_PLUGIN_NAME "libvdev-cuda.so"

enum vdev_status vdev_backend_cuda_new(struct vdev_backend *out, char *reason, size_t cap)
{
    memset(out, 0, sizeof *out);
    const char *tries[3];
    char beside[1024];
    int n = 0;
    const char *env = getenv("VDEV_CUDA_PLUGIN");
    if (env && *env) {
        tries[n++] = env; /* an explicit path is the only one tried */
    } else {
        snprintf(beside, sizeof beside, "%s/%s", VDEV_PLUGIN_DIR, CUDA_PLUGIN_NAME);
        tries[n++] = beside;
        tries[n++] = CUDA_PLUGIN_NAME;
    }

    void *h = NULL;
    char first_err[256] = "";
    for (int i = 0; i < n && !h; i++) {
        h = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        if (!h && !first_err[0]) {
            const char *e = dlerror();
            vdev_strlcpy(first_err, e ? e : "unknown error", sizeof first_err);
        }
    }
    if (!h) {
        if (env && *env)
            snprintf(reason, cap, "CUDA plugin: cannot load %s (%s)", env, first_err);
        else if (access(beside, F_OK) == 0)
            snprintf(reason, cap, "CUDA plugin: cannot load %s (%s)", beside, first_err);
        else
            snprintf(reason, cap, "CUDA plugin: %s not built or not found", CUDA_PLUGIN_NAME);
        return vdev_error(VDEV_ERR_UNSUPPORTED, "%s", reason);
    }
    vdev_cuda_plugin_open_fn open_fn;
    *(void **)(&open_fn) = dlsym(h, VDEV_CUDA_PLUGIN_SYMBOL);
    if (!open_fn) {
        snprintf(reason, cap, "CUDA plugin: %s lacks the symbol %s", CUDA_PLUGIN_NAME,
                 VDEV_CUDA_PLUGIN_SYMBOL);
        dlclose(h);
        return vdev_error(VDEV_ERR_BACKEND, "%s", reason);
    }
    enum vdev_status st = open_fn(VDEV_BACKEND_API_VERSION, out, reason, cap, vdev_error);
    if (st != VDEV_OK) {
        /* The plugin stays loaded: its reason string may point into it. */
        memset(out, 0, sizeof *out);
        return vdev_error(st, "%s", reason);
    }
    if (!out->ops || out->ops->api_version != VDEV_BACKEND_API_VERSION) {
        snprintf(reason, cap, "CUDA plugin: API version %d, vdev needs %d",
                 out->ops ? out->ops->api_version : -1, VDEV_BACKEND_API_VERSION);
        memset(out, 0, sizeof *out);
        return vdev_error(VDEV_ERR_BACKEND, "%s", reason);
    }
    return VDEV_OK;
}
