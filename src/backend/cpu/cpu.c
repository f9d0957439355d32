/* cpu.c — the host CPU as a backend: one device, host memory, and a "stream"
 * that runs work inline on the calling thread, so every event has passed as
 * soon as it is recorded. Memory regions are anonymous mappings, so freeing a
 * region hands the pages straight back to the kernel. */
#define _GNU_SOURCE
#include "backend/backend.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct cpu_ctx {
    uint64_t total_bytes;
    char model[96];
};

static int cpu_n_devices(void *ctx) { return 1; }

static enum vdev_status cpu_device_info(void *vctx, int dev, struct vdev_backend_device_info *out)
{
    struct cpu_ctx *ctx = vctx;
    memset(out, 0, sizeof *out);
    vdev_strlcpy(out->model, ctx->model, sizeof out->model);
    out->total_bytes = ctx->total_bytes;
    return VDEV_OK;
}

static enum vdev_status cpu_mem_info(void *vctx, int dev, uint64_t *free_bytes, uint64_t *total)
{
    struct cpu_ctx *ctx = vctx;
    long avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    *total = ctx->total_bytes;
    *free_bytes = (avail > 0 && page > 0) ? (uint64_t)avail * (uint64_t)page : 0;
    return VDEV_OK;
}

static enum vdev_status cpu_reserve(void *ctx, int dev, uint64_t bytes, void **base)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        char b[32];
        return vdev_error(VDEV_ERR_OOM, "CPU:0: cannot map %s of host memory",
                          vdev_format_bytes(bytes, b, sizeof b));
    }
    *base = p;
    return VDEV_OK;
}

static void cpu_release(void *ctx, int dev, void *base, uint64_t bytes) { munmap(base, bytes); }

static enum vdev_status cpu_copy(void *ctx, int dev, void *dst, const void *src, uint64_t bytes)
{
    if (bytes)
        memcpy(dst, src, bytes);
    return VDEV_OK;
}

static enum vdev_status cpu_copy_d2d(void *ctx, int dst_dev, void *dst, int src_dev,
                                     const void *src, uint64_t bytes)
{
    if (bytes)
        memcpy(dst, src, bytes);
    return VDEV_OK;
}

static enum vdev_status cpu_submit(void *ctx, int dev, vdev_host_fn fn, const void *arg,
                                   size_t arg_bytes)
{
    /* Inline: the caller's argument is alive for the whole call. */
    fn((void *)(uintptr_t)arg);
    return VDEV_OK;
}

static enum vdev_status cpu_sync(void *ctx, int dev) { return VDEV_OK; }

/* Work is done when submitted, so an event is a non-NULL token. */
static enum vdev_status cpu_event_record(void *ctx, int dev, void **event)
{
    *event = (void *)(uintptr_t)1;
    return VDEV_OK;
}
static int cpu_event_done(void *ctx, void *event) { return 1; }
static void cpu_event_wait(void *ctx, void *event) {}
static enum vdev_status cpu_stream_wait(void *ctx, int dev, void *event) { return VDEV_OK; }
static void cpu_event_drop(void *ctx, void *event) {}

static void cpu_destroy(void *ctx) { free(ctx); }

static const struct vdev_backend_ops cpu_ops = {
    .api_version = VDEV_BACKEND_API_VERSION,
    .name = "cpu",
    .is_gpu = 0,
    .host_addressable = 1,
    .n_devices = cpu_n_devices,
    .device_info = cpu_device_info,
    .mem_info = cpu_mem_info,
    .reserve = cpu_reserve,
    .release = cpu_release,
    .extend = NULL,
    .copy_h2d = cpu_copy,
    .copy_d2h = cpu_copy,
    .copy_d2d = cpu_copy_d2d,
    .submit_host = cpu_submit,
    .synchronize = cpu_sync,
    .event_record = cpu_event_record,
    .event_done = cpu_event_done,
    .event_wait = cpu_event_wait,
    .stream_wait_event = cpu_stream_wait,
    .event_drop = cpu_event_drop,
    .run_kernel = NULL,
    .destroy = cpu_destroy,
};

/* The CPU's model name from /proc/cpuinfo, or "CPU". */
static void read_cpu_model(char *out, size_t cap)
{
    vdev_strlcpy(out, "CPU", cap);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                colon++;
                while (*colon == ' ' || *colon == '\t')
                    colon++;
                colon[strcspn(colon, "\n")] = '\0';
                vdev_strlcpy(out, colon, cap);
            }
            break;
        }
    }
    fclose(f);
}

enum vdev_status vdev_backend_cpu_new(struct vdev_backend *out)
{
    struct cpu_ctx *ctx = vdev_calloc(1, sizeof *ctx);
    if (!ctx)
        return vdev_error(VDEV_ERR_OOM, "out of host memory creating the cpu backend");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    ctx->total_bytes = (pages > 0 && page > 0) ? (uint64_t)pages * (uint64_t)page : 0;
    read_cpu_model(ctx->model, sizeof ctx->model);
    out->ops = &cpu_ops;
    out->ctx = ctx;
    return VDEV_OK;
}
