/* bench_cuda.cu — what vdev costs on a real GPU, against CUDA alone.
 *
 *   matmul     vdev_matmul of two 8192x8192 f32 tensors on GPU:0 (output
 *              tensor made and freed each time), against cublasSgemm called
 *              directly on buffers of the same shapes, with the same
 *              arguments, on a stream of its own. Each timing is one product
 *              between two stream synchronisations; vdev and cuBLAS take turns
 *              so clocks and temperature treat them alike; the median of the
 *              repetitions is reported, in TFLOP/s (2 n^3 flops a product).
 *              Target: vdev >= 0.97x cuBLAS.
 *   dispatch   a one-element add on GPU:0, output tensor included, in us per
 *              op and ops/s: n ops queued back to back, then a
 *              synchronisation, divided by n (the GPU keeps up with the host
 *              or the host waits for it: either way the time is what a long
 *              run of tiny ops costs). Target: < 5 us.
 *   reduce     vdev_sum of a [65536, 4096] f32 tensor over axis 0 (a bias
 *              gradient), over axis 1 and over everything, in GB/s of bytes
 *              read, beside a device-to-device copy of the same bytes.
 *   fill       1 GiB through vdev_backend_fill (cuMemsetD32Async), and the
 *              same through a host buffer and copy_h2d (what filling costs
 *              without a fill entry).
 *   alloc      the allocation traces (../shared/traces, or --traces DIR):
 *              (1) vdev_replay_run as on the CPU (an address-only region
 *              source: the allocator alone), and (2) the same events replayed
 *              against the CUDA backend's real regions with growth in place
 *              (cuMemAddressReserve + cuMemCreate/cuMemMap as the region
 *              grows): the first pass pays for the growth, the later passes
 *              run on the grown region.
 * The demo's step time is in the output of `vdev demo`.
 *
 * Built only with the CUDA toolkit (src/backend/cuda/CMakeLists.txt), as
 * nvcc compiles .cu files as C++; the project's internal headers are C11, so
 * they are included with C linkage and the one C11-only keyword they use
 * (_Noreturn) spelled the C++ way.
 * Usage: bench_cuda [--quick] [--reps N] [--traces DIR] [--md FILE] */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define _Noreturn [[noreturn]]
extern "C" {
#include "alloc/replay.h"
#include "backend/backend.h"
#include "config/config.h"
#include "vdev.h"
}
#undef _Noreturn

#include "bench_stats.h"

static int quick;

static void die(const char *what)
{
    fprintf(stderr, "bench_cuda: %s: %s\n", what, vdev_last_error());
    exit(1);
}

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_cuda: %s: %s\n", #call, cudaGetErrorString(e_));                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define BLAS_OK(call)                                                                              \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "bench_cuda: %s: %s\n", #call, cublasGetStatusString(s_));             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The markdown table, printed at the end and optionally written to a file. */
static char table[16384];
static size_t table_len;

static void row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void row(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(table + table_len, sizeof table - table_len, fmt, ap);
    va_end(ap);
    if (n > 0 && table_len + (size_t)n < sizeof table)
        table_len += (size_t)n;
}

static struct vdev_backend *gpu_backend(void)
{
    struct vdev_backend *b = vdev_config_gpu_backend();
    if (!b || strcmp(b->ops->name, "cuda") != 0) {
        fprintf(stderr, "bench_cuda: no CUDA GPU: %s\n", vdev_gpu_absence_reason());
        exit(77);
    }
    return b;
}

static void sync_gpu0(void)
{
    if (vdev_backend_synchronize(gpu_backend(), 0) != VDEV_OK)
        die("synchronize");
}

/* ---- matmul ---- */

static void bench_matmul(int reps)
{
    const int64_t n = quick ? 4096 : 8192;
    const double flops = 2.0 * (double)n * (double)n * (double)n;
    int64_t shape[2] = {n, n};

    /* vdev: tensors on GPU:0 */
    if (vdev_device_push("GPU:0") != VDEV_OK)
        die("GPU:0");
    vdev_tensor_t *a = vdev_tensor_uniform(shape, 2, -1, 1, 1);
    vdev_tensor_t *b = vdev_tensor_uniform(shape, 2, -1, 1, 2);
    vdev_device_pop();
    if (!a || !b)
        die("matmul operands");

    /* cuBLAS alone: the same shapes and call */
    size_t bytes = (size_t)(n * n) * sizeof(float);
    float *da, *db, *dc;
    CUDA_OK(cudaMalloc(&da, bytes));
    CUDA_OK(cudaMalloc(&db, bytes));
    CUDA_OK(cudaMalloc(&dc, bytes));
    float *h = (float *)malloc(bytes);
    for (int64_t i = 0; i < n * n; i++)
        h[i] = (float)((double)((i * 2654435761u) % 2000u) / 1000.0 - 1.0);
    CUDA_OK(cudaMemcpy(da, h, bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(db, h, bytes, cudaMemcpyHostToDevice));
    free(h);
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cublasHandle_t hb;
    BLAS_OK(cublasCreate(&hb));
    BLAS_OK(cublasSetStream(hb, s));
    const float one = 1.0f, zero = 0.0f;

    double tv[64], tc[64];
    if (reps > 64)
        reps = 64;
    for (int r = -2; r < reps; r++) { /* two warm-up rounds */
        sync_gpu0();
        double t0 = vdev_clock_seconds();
        vdev_tensor_t *c = vdev_matmul(a, b, false, false);
        if (!c)
            die("vdev_matmul");
        sync_gpu0();
        double t1 = vdev_clock_seconds();
        vdev_tensor_free(c);

        CUDA_OK(cudaStreamSynchronize(s));
        double t2 = vdev_clock_seconds();
        BLAS_OK(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &one, db,
                            (int)n, da, (int)n, &zero, dc, (int)n));
        CUDA_OK(cudaStreamSynchronize(s));
        double t3 = vdev_clock_seconds();
        if (r >= 0) {
            tv[r] = t1 - t0;
            tc[r] = t3 - t2;
        }
    }
    double mv = bench_median(tv, reps), mc = bench_median(tc, reps);
    double fv = flops / mv / 1e12, fc = flops / mc / 1e12;
    printf("matmul %lldx%lld f32: vdev %.2f TFLOP/s (%.2f ms), cublasSgemm %.2f TFLOP/s "
           "(%.2f ms), ratio %.3f\n",
           (long long)n, (long long)n, fv, mv * 1e3, fc, mc * 1e3, fv / fc);
    row("| matmul %lldx%lld f32, vdev_matmul on GPU:0 | %.2f TFLOP/s (%.2f ms) | |\n",
        (long long)n, (long long)n, fv, mv * 1e3);
    row("| matmul %lldx%lld f32, cublasSgemm alone | %.2f TFLOP/s (%.2f ms) | |\n", (long long)n,
        (long long)n, fc, mc * 1e3);
    row("| matmul ratio vdev / cuBLAS | %.3f | >= 0.97 %s |\n", fv / fc,
        fv / fc >= 0.97 ? "(met)" : "(MISSED)");
    cublasDestroy(hb);
    cudaStreamDestroy(s);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    vdev_tensor_free(a);
    vdev_tensor_free(b);
}

/* ---- dispatch ---- */

static void bench_dispatch(void)
{
    int64_t one[1] = {1};
    if (vdev_device_push("GPU:0") != VDEV_OK)
        die("GPU:0");
    vdev_tensor_t *a = vdev_tensor_fill(one, 1, VDEV_F32, 1.0);
    vdev_tensor_t *b = vdev_tensor_fill(one, 1, VDEV_F32, 2.0);
    vdev_device_pop();
    if (!a || !b)
        die("dispatch operands");
    int n = quick ? 20000 : 100000, reps = 5;
    double t[5];
    for (int r = -1; r < reps; r++) {
        sync_gpu0();
        double t0 = vdev_clock_seconds();
        for (int i = 0; i < n; i++) {
            vdev_tensor_t *c = vdev_add(a, b);
            if (!c)
                die("vdev_add");
            vdev_tensor_free(c);
        }
        sync_gpu0();
        if (r >= 0)
            t[r] = (vdev_clock_seconds() - t0) / n;
    }
    float v = vdev_tensor_item(a);
    double m = bench_median(t, reps);
    printf("dispatch: one-element add on GPU:0: %.2f us/op, %.0f ops/s (check %g)\n", m * 1e6,
           1.0 / m, (double)v);
    row("| dispatch, 1-element add on GPU:0 | %.2f us/op (%.0f ops/s) | < 5 us %s |\n", m * 1e6,
        1.0 / m, m < 5e-6 ? "(met)" : "(MISSED)");
    vdev_tensor_free(a);
    vdev_tensor_free(b);
}

/* ---- reductions and fills ---- */

/* Bandwidth of the reductions of a [rows, 4096] f32 tensor (a bias gradient
 * is its sum over axis 0), in GB/s of bytes read, against a device-to-device
 * copy of the same bytes (GB/s of bytes read and written): the memory system's
 * own speed. */
static void bench_reduce(int reps)
{
    const int64_t rows = quick ? 16384 : 65536, cols = 4096;
    const double bytes = (double)(rows * cols) * 4.0;
    int64_t shape[2] = {rows, cols};
    if (vdev_device_push("GPU:0") != VDEV_OK)
        die("GPU:0");
    vdev_tensor_t *x = vdev_tensor_uniform(shape, 2, -1, 1, 3);
    vdev_device_pop();
    if (!x)
        die("reduction operand");
    static const struct {
        const char *what;
        int axis; /* -1: everything */
    } cases[] = {{"sum over axis 0 (bias gradient)", 0},
                 {"sum over axis 1 (row sums)", 1},
                 {"sum of everything", -1}};
    double t[64];
    if (reps > 64)
        reps = 64;
    for (int c = 0; c < 3; c++) {
        for (int r = -1; r < reps; r++) {
            sync_gpu0();
            double t0 = vdev_clock_seconds();
            vdev_tensor_t *y = cases[c].axis < 0 ? vdev_sum_all(x) : vdev_sum(x, cases[c].axis, 0);
            if (!y)
                die("vdev_sum");
            sync_gpu0();
            if (r >= 0)
                t[r] = vdev_clock_seconds() - t0;
            vdev_tensor_free(y);
        }
        double m = bench_median(t, reps);
        printf("reduce [%lld,%lld] %s: %.3f ms, %.0f GB/s read\n", (long long)rows,
               (long long)cols, cases[c].what, m * 1e3, bytes / m / 1e9);
        row("| reduce [%lld,%lld], %s | %.0f GB/s (%.3f ms) | |\n", (long long)rows,
            (long long)cols, cases[c].what, bytes / m / 1e9, m * 1e3);
    }
    vdev_tensor_free(x);
    float *da, *db;
    CUDA_OK(cudaMalloc(&da, (size_t)bytes));
    CUDA_OK(cudaMalloc(&db, (size_t)bytes));
    CUDA_OK(cudaMemset(da, 0, (size_t)bytes));
    for (int r = -1; r < reps; r++) {
        CUDA_OK(cudaDeviceSynchronize());
        double t0 = vdev_clock_seconds();
        CUDA_OK(cudaMemcpy(db, da, (size_t)bytes, cudaMemcpyDeviceToDevice));
        CUDA_OK(cudaDeviceSynchronize());
        if (r >= 0)
            t[r] = vdev_clock_seconds() - t0;
    }
    double m = bench_median(t, reps);
    printf("copy of the same bytes, device to device: %.0f GB/s read + written\n",
           2 * bytes / m / 1e9);
    row("| device-to-device copy of the same bytes (reference) | %.0f GB/s read + written | |\n",
        2 * bytes / m / 1e9);
    cudaFree(da);
    cudaFree(db);
}

/* Filling 1 GiB of device memory: the backend's fill (cuMemsetD32Async on
 * the stream) against a host buffer copied over, the way a tensor is filled
 * without a fill entry. */
static void bench_fill(int reps)
{
    struct vdev_backend *b = gpu_backend();
    const uint64_t bytes = quick ? (256ull << 20) : (1ull << 30);
    void *base = NULL;
    if (b->ops->reserve(b->ctx, 0, bytes, &base) != VDEV_OK)
        die("fill region");
    double t[64];
    if (reps > 64)
        reps = 64;
    for (int r = -1; r < reps; r++) {
        sync_gpu0();
        double t0 = vdev_clock_seconds();
        if (vdev_backend_fill(b, 0, base, 0x3f800000u, bytes / 4) != VDEV_OK)
            die("vdev_backend_fill");
        sync_gpu0();
        if (r >= 0)
            t[r] = vdev_clock_seconds() - t0;
    }
    double mf = bench_median(t, reps);
    uint32_t *h = (uint32_t *)malloc(bytes);
    if (!h)
        die("host buffer");
    for (int r = -1; r < reps; r++) {
        sync_gpu0();
        double t0 = vdev_clock_seconds();
        for (uint64_t i = 0; i < bytes / 4; i++)
            h[i] = 0x3f800000u;
        if (b->ops->copy_h2d(b->ctx, 0, base, h, bytes) != VDEV_OK)
            die("copy_h2d");
        if (r >= 0)
            t[r] = vdev_clock_seconds() - t0;
    }
    double mh = bench_median(t, reps);
    free(h);
    b->ops->release(b->ctx, 0, base, bytes);
    printf("fill %llu MiB: backend fill %.3f ms (%.0f GB/s), host buffer + copy %.3f ms "
           "(%.1f GB/s)\n",
           (unsigned long long)(bytes >> 20), mf * 1e3, bytes / mf / 1e9, mh * 1e3,
           bytes / mh / 1e9);
    row("| fill %llu MiB, vdev_backend_fill (cuMemsetD32Async) | %.0f GB/s (%.3f ms) | |\n",
        (unsigned long long)(bytes >> 20), bytes / mf / 1e9, mf * 1e3);
    row("| fill %llu MiB, host buffer + copy_h2d (no fill entry) | %.1f GB/s (%.3f ms) | |\n",
        (unsigned long long)(bytes >> 20), bytes / mh / 1e9, mh * 1e3);
}

/* ---- allocation traces ---- */

struct dev_src {
    struct vdev_backend *b;
    int dev;
    int n_reserve, n_extend, n_release;
};

static enum vdev_status ds_reserve(void *ctx, uint64_t bytes, void **base)
{
    struct dev_src *s = (struct dev_src *)ctx;
    s->n_reserve++;
    return s->b->ops->reserve(s->b->ctx, s->dev, bytes, base);
}

static void ds_release(void *ctx, void *base, uint64_t bytes)
{
    struct dev_src *s = (struct dev_src *)ctx;
    s->n_release++;
    s->b->ops->release(s->b->ctx, s->dev, base, bytes);
}

static enum vdev_status ds_extend(void *ctx, void *base, uint64_t old_bytes, uint64_t new_bytes)
{
    struct dev_src *s = (struct dev_src *)ctx;
    s->n_extend++;
    return s->b->ops->extend(s->b->ctx, s->dev, base, old_bytes, new_bytes);
}

/* One pass over the events; returns ns per event (-1 on failure). */
static double replay_pass(vdev_alloc_t *al, const struct vdev_trace *t, uint32_t *handles,
                          unsigned char *live)
{
    double t0 = vdev_clock_seconds();
    for (uint64_t i = 0; i < t->n_events; i++) {
        const struct vdev_trace_event *e = &t->events[i];
        if (e->bytes) {
            struct vdev_block blk;
            if (vdev_alloc_malloc(al, e->bytes, &blk) != VDEV_OK) {
                fprintf(stderr, "bench_cuda: %s:%u: %s\n", t->path, e->line, vdev_last_error());
                return -1;
            }
            handles[e->slot] = blk.handle;
            live[e->slot] = 1;
        } else {
            vdev_alloc_free(al, handles[e->slot]);
            live[e->slot] = 0;
        }
    }
    double ns = (vdev_clock_seconds() - t0) * 1e9 / (double)(t->n_events ? t->n_events : 1);
    for (uint32_t s = 0; s < t->n_slots; s++) /* untimed: blocks left live */
        if (live[s]) {
            vdev_alloc_free(al, handles[s]);
            live[s] = 0;
        }
    return ns;
}

static void bench_trace(const char *path)
{
    struct vdev_trace *t;
    if (vdev_trace_load(path, &t) != VDEV_OK) {
        fprintf(stderr, "bench_cuda: %s\n", vdev_last_error());
        return;
    }
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;

    /* (1) the allocator alone, as `vdev replay` measures it */
    struct vdev_replay_options o;
    memset(&o, 0, sizeof o);
    o.repeats = quick ? 3 : 5;
    o.min_events = quick ? 200000 : 1000000;
    struct vdev_replay_result r;
    if (vdev_replay_run(t, &o, &r) == VDEV_OK) {
        printf("alloc %s: %llu events, %.1f ns/event (address-only source)\n", name,
               (unsigned long long)r.events, r.ns_per_event);
        row("| alloc %s, allocator alone (vdev_replay_run) | %.1f ns/event | %llu events |\n", name,
            r.ns_per_event, (unsigned long long)r.events);
    } else {
        fprintf(stderr, "bench_cuda: replay %s: %s\n", name, vdev_last_error());
    }

    /* (2) real device regions, growing in place */
    struct vdev_backend *b = gpu_backend();
    struct dev_src src = {b, 0, 0, 0, 0};
    struct vdev_alloc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.name = "bench GPU:0";
    uint64_t limit = t->peak_live_bytes * 4 + (64ull << 20);
    cfg.limit_bytes = limit;
    cfg.policy = VDEV_POLICY_GROW;
    cfg.source.reserve = ds_reserve;
    cfg.source.release = ds_release;
    cfg.source.extend = b->ops->extend ? ds_extend : NULL;
    cfg.source.ctx = &src;
    vdev_alloc_t *al;
    if (vdev_alloc_new(&cfg, &al) != VDEV_OK) {
        fprintf(stderr, "bench_cuda: allocator: %s\n", vdev_last_error());
        vdev_trace_free(t);
        return;
    }
    uint32_t *handles = (uint32_t *)calloc(t->n_slots + 1, sizeof *handles);
    unsigned char *live = (unsigned char *)calloc(t->n_slots + 1, 1);
    double first = replay_pass(al, t, handles, live);
    double steady[5];
    int passes = quick ? 2 : 3;
    for (int p = 0; p < passes; p++)
        steady[p] = replay_pass(al, t, handles, live);
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(al, &st);
    double ms = bench_median(steady, passes);
    printf("alloc %s on GPU:0 with growth: first pass %.1f ns/event (%d reserve, %d extend), "
           "later passes %.1f ns/event; reserved %.1f MiB in %llu region(s)\n",
           name, first, src.n_reserve, src.n_extend, ms, (double)st.bytes_reserved / 1048576.0,
           (unsigned long long)st.n_regions);
    row("| alloc %s, real GPU regions, first pass (grows: %d reserve + %d extend) | %.1f ns/event "
        "| |\n", name, src.n_reserve, src.n_extend, first);
    row("| alloc %s, real GPU regions, grown | %.1f ns/event | reserved %.1f MiB, %llu region(s) "
        "|\n", name, ms, (double)st.bytes_reserved / 1048576.0, (unsigned long long)st.n_regions);
    vdev_alloc_destroy(al);
    free(handles);
    free(live);
    vdev_trace_free(t);
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void bench_alloc(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        printf("alloc: no traces in %s (skipped)\n", dir);
        row("| alloc | skipped: no traces in %s | |\n", dir);
        return;
    }
    char paths[32][1024];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 32) {
        const char *nm = e->d_name;
        size_t l = strlen(nm);
        if ((l > 6 && !strcmp(nm + l - 6, ".trace")) || (l > 9 && !strcmp(nm + l - 9, ".trace.gz")))
            snprintf(paths[n++], sizeof paths[0], "%s/%s", dir, nm);
    }
    closedir(d);
    qsort(paths, (size_t)n, sizeof paths[0], cmp_path);
    for (int i = 0; i < n; i++)
        bench_trace(paths[i]);
}

int main(int argc, char **argv)
{
    const char *traces = VDEV_SHARED_DIR "/traces", *md = NULL;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--traces") && i + 1 < argc)
            traces = argv[++i];
        else if (!strcmp(argv[i], "--md") && i + 1 < argc)
            md = argv[++i];
        else {
            fprintf(stderr, "usage: bench_cuda [--quick] [--reps N] [--traces DIR] [--md FILE]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    unsetenv("VDEV_SIM_GPUS");
    if (vdev_init() != VDEV_OK)
        die("start-up");
    struct vdev_backend *b = gpu_backend();
    struct vdev_backend_device_info info;
    if (vdev_backend_device_info(b, 0, &info) != VDEV_OK)
        die("device info");
    printf("GPU 0: %s, %.1f GiB, compute capability %d.%d\n", info.model,
           (double)info.total_bytes / (1 << 30), info.cc_major, info.cc_minor);
    row("## CUDA backend on %s\n\n| benchmark | result | target / note |\n|---|---|---|\n",
        info.model);

    bench_matmul(reps);
    bench_dispatch();
    bench_reduce(reps);
    bench_fill(reps);
    bench_alloc(traces);

    printf("\n%s", table);
    if (md) {
        FILE *f = fopen(md, "w");
        if (f) {
            fputs(table, f);
            fclose(f);
        }
    }
    vdev_shutdown();
    return 0;
}
