/* bench_hostmem.c — vdev's own host memory: what its bookkeeping costs per
 * live block, whether anything grows with the bytes it manages, and what the
 * demo's process holds beyond its libraries and its tensors.
 *
 *   allocator   an allocator managing an 80 GiB card (one preallocated region
 *               from a source that hands out addresses, no memory) with
 *               100,000 live blocks, after churn that leaves free chunks
 *               between them (sizes log-uniform 256 B .. 128 KiB, a random half
 *               freed and allocated again, three times): the bookkeeping
 *               bytes (vdev_alloc_host_bytes: the allocator, its chunk
 *               records, regions, queues) per live block and per GiB managed;
 *               the same blocks on an 8 GiB card, and 10,000 blocks, show
 *               what the bytes follow;
 *   tensor      host bytes of one tensor's record (its handle-table slot);
 *   demo        the chain3 demo's training (three MLPs 32-64-64-16,
 *               16-64-64-16, 16-64-64-8 with teachers, batch 64, Adam, 500
 *               steps) on three simulated 16 GiB GPUs, in this process: its
 *               peak RSS less the RSS before vdev started (libraries loaded,
 *               OpenBLAS warmed up by one product) and less the device memory
 *               the tensors touched (resident pages of the simulated GPUs'
 *               regions, counted with mincore).
 * Usage: bench_hostmem [--md FILE] */
#define _GNU_SOURCE
#include "alloc/alloc.h"
#include "runtime/runtime.h"
#include "tensor/tensor.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the allocator's bookkeeping ---- */

static uint64_t next_base = 1ull << 44;
static enum vdev_status src_reserve(void *ctx, uint64_t bytes, void **base)
{
    *base = (void *)(uintptr_t)next_base;
    next_base += bytes + (1ull << 30);
    return VDEV_OK;
}
static void src_release(void *ctx, void *base, uint64_t bytes) {}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void bench_fail(void)
{
    fprintf(stderr, "bench_hostmem: %s\n", vdev_last_error());
    exit(1);
}

struct book {
    uint64_t host_bytes, live, chunks;
};

static struct book bookkeeping(uint64_t card_bytes, uint32_t n_live)
{
    struct vdev_alloc_config cfg = {.name = "card",
                                    .limit_bytes = card_bytes,
                                    .policy = VDEV_POLICY_PREALLOCATE,
                                    .source = {.reserve = src_reserve, .release = src_release}};
    vdev_alloc_t *a;
    if (vdev_alloc_new(&cfg, &a) != VDEV_OK) {
        fprintf(stderr, "bench_hostmem: %s\n", vdev_last_error());
        exit(1);
    }
    uint32_t *h = malloc(n_live * sizeof *h);
    if (!h)
        exit(1);
    rng = 0x9E3779B97F4A7C15ull;
    const double lo = log(256.0), hi = log(131072.0);
    for (uint32_t i = 0; i < n_live; i++) {
        struct vdev_block b;
        uint64_t bytes = (uint64_t)exp(lo + (hi - lo) * (double)(next_rand() >> 11) / 9007199254740992.0);
        if (vdev_alloc_malloc(a, bytes, &b) != VDEV_OK)
            bench_fail();
        h[i] = b.handle;
    }
    for (int round = 0; round < 3; round++) {
        for (uint32_t i = 0; i < n_live; i++)
            if (next_rand() & 1) {
                vdev_alloc_free(a, h[i]);
                h[i] = UINT32_MAX;
            }
        for (uint32_t i = 0; i < n_live; i++)
            if (h[i] == UINT32_MAX) {
                struct vdev_block b;
                uint64_t bytes = (uint64_t)exp(lo + (hi - lo) * (double)(next_rand() >> 11) /
                                                        9007199254740992.0);
                if (vdev_alloc_malloc(a, bytes, &b) != VDEV_OK)
                    bench_fail();
                h[i] = b.handle;
            }
    }
    struct vdev_alloc_stats st;
    vdev_alloc_get_stats(a, &st);
    struct book bk = {vdev_alloc_host_bytes(a), st.n_allocs, st.n_chunks};
    free(h);
    vdev_alloc_destroy(a);
    return bk;
}

/* ---- resident memory ---- */

static uint64_t status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = strtoull(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static void add_resident(void *user, void *base, uint64_t bytes, int used)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = (size_t)((bytes + (uint64_t)page - 1) / (uint64_t)page);
    unsigned char *vec = malloc(pages);
    if (vec && mincore(base, (size_t)bytes, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            *(uint64_t *)user += (vec[i] & 1) ? (uint64_t)page : 0;
    free(vec);
}

/* The demo's training, as examples/chain3.c runs it. */
static void demo_training(int steps)
{
    const char *dev[3] = {"GPU:0", "GPU:1", "GPU:2"};
    int64_t dims[3][4] = {{32, 64, 64, 16}, {16, 64, 64, 16}, {16, 64, 64, 8}};
    vdev_mlp_t *teacher[3], *model[3];
    vdev_optimizer_t *adam[3];
    vdev_tensor_t *vars[3][6];
    for (int k = 0; k < 3; k++) {
        vdev_device_push(dev[k]);
        teacher[k] = vdev_mlp_new(dims[k], 4, VDEV_ACT_TANH, VDEV_ACT_TANH, 100 + (uint64_t)k);
        model[k] = vdev_mlp_new(dims[k], 4, VDEV_ACT_RELU, VDEV_ACT_NONE, (uint64_t)k);
        vdev_device_pop();
        adam[k] = vdev_adam_new(0.003f, 0.9f, 0.999f, 1e-7f);
        vdev_mlp_variables(model[k], vars[k], 6);
    }
    for (int s = 0; s < steps; s++) {
        vdev_scope_begin();
        int64_t xs[2] = {64, 32};
        vdev_device_push(dev[0]);
        vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, (uint64_t)s);
        vdev_device_pop();
        vdev_tensor_t *in = x, *clean = x;
        for (int k = 0; k < 3; k++) {
            vdev_device_push(dev[k]);
            vdev_tensor_t *target = vdev_mlp_forward(teacher[k], clean);
            vdev_tape_t *tape = vdev_tape_begin();
            vdev_tensor_t *y = vdev_mlp_forward(model[k], in), *g[6];
            enum vdev_status st = vdev_tape_gradient(tape, vdev_mse(y, target), vars[k], 6, g);
            vdev_tape_end(tape); /* before the update: a live tape keeps the old values */
            if (st != VDEV_OK || vdev_optimizer_apply(adam[k], vars[k], g, 6) != VDEV_OK) {
                fprintf(stderr, "bench_hostmem: %s\n", vdev_last_error());
                exit(1);
            }
            vdev_device_pop();
            in = y;
            clean = target;
        }
        vdev_scope_end();
    }
    vdev_scope_begin();
    for (int k = 0; k < 3; k++)
        vdev_tensor_item(vdev_sum_all(vars[k][5])); /* the streams are done */
    vdev_scope_end();
    for (int k = 0; k < 3; k++) {
        vdev_mlp_free(teacher[k]);
        vdev_mlp_free(model[k]);
        vdev_optimizer_free(adam[k]);
    }
}

int main(int argc, char **argv)
{
    const char *md = argc == 3 && !strcmp(argv[1], "--md") ? argv[2] : NULL;
    /* The demo first (before the allocator runs make the heap grow). */
    float x[64 * 64] = {0}, y[64 * 64];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, x, 64, x, 64, 0.0f, y,
                64);
    uint64_t rss0 = status_kib("VmRSS");
    setenv("VDEV_SIM_GPUS", "3x16GiB", 1);
    if (vdev_init() != VDEV_OK) {
        fprintf(stderr, "bench_hostmem: %s\n", vdev_last_error());
        return 1;
    }
    uint64_t rss_init = status_kib("VmRSS");
    demo_training(500);
    uint64_t touched = 0;
    for (int i = 0; i < vdev_runtime_n_devices(); i++)
        vdev_alloc_for_each_region(vdev_runtime_device(i)->alloc, add_resident, &touched);
    uint64_t hwm = status_kib("VmHWM");
    uint64_t alloc_books = 0;
    for (int i = 0; i < vdev_runtime_n_devices(); i++)
        alloc_books += vdev_alloc_host_bytes(vdev_runtime_device(i)->alloc);
    vdev_shutdown();
    double own_mib = ((double)hwm - (double)rss0) / 1024.0 - (double)touched / 1048576.0;
    printf("demo: RSS before start-up %.2f MiB, after %.2f MiB, peak %.2f MiB; tensors touched "
           "%.2f MiB; vdev's own: %.2f MiB (allocators' bookkeeping %.1f KiB)\n",
           rss0 / 1024.0, rss_init / 1024.0, hwm / 1024.0, touched / 1048576.0, own_mib,
           alloc_books / 1024.0);

    struct book b80 = bookkeeping(80ull << 30, 100000), b8 = bookkeeping(8ull << 30, 100000);
    struct book b80s = bookkeeping(80ull << 30, 10000);
    printf("allocator, 80 GiB card, %llu live blocks in %llu chunks: %llu bytes of bookkeeping, "
           "%.1f per live block, %.0f per GiB managed\n",
           (unsigned long long)b80.live, (unsigned long long)b80.chunks,
           (unsigned long long)b80.host_bytes, (double)b80.host_bytes / (double)b80.live,
           (double)b80.host_bytes / 80.0);
    printf("allocator, 8 GiB card, same blocks: %llu bytes (%.1f per live block)\n",
           (unsigned long long)b8.host_bytes, (double)b8.host_bytes / (double)b8.live);
    printf("allocator, 80 GiB card, %llu live blocks: %llu bytes (%.1f per live block)\n",
           (unsigned long long)b80s.live, (unsigned long long)b80s.host_bytes,
           (double)b80s.host_bytes / (double)b80s.live);
    printf("tensor record (handle-table slot): %u bytes\n", vdev_tens_table.slot_bytes);
    if (md) {
        FILE *f = fopen(md, "w");
        if (!f) {
            perror(md);
            return 1;
        }
        fprintf(f, "| figure | result | target |\n|---|---|---|\n");
        fprintf(f, "| allocator bookkeeping, 80 GiB card, %llu live blocks (%llu chunks with the free ones) | %llu bytes: %.1f bytes per live block, %.0f bytes per GiB managed | < 64 bytes per live block |\n",
                (unsigned long long)b80.live, (unsigned long long)b80.chunks,
                (unsigned long long)b80.host_bytes, (double)b80.host_bytes / (double)b80.live,
                (double)b80.host_bytes / 80.0);
        fprintf(f, "| the same blocks on an 8 GiB card | %llu bytes (%.1f per live block): the bytes managed do not count | nothing proportional to bytes managed |\n",
                (unsigned long long)b8.host_bytes, (double)b8.host_bytes / (double)b8.live);
        fprintf(f, "| 10,000 live blocks on the 80 GiB card | %llu bytes (%.1f per live block) | |\n",
                (unsigned long long)b80s.host_bytes, (double)b80s.host_bytes / (double)b80s.live);
        fprintf(f, "| one tensor's record (its handle-table slot, beside its block's chunk record) | %u bytes | |\n",
                vdev_tens_table.slot_bytes);
        fprintf(f, "| chain3 demo's training (500 steps, 3 simulated GPUs): peak RSS less RSS before start-up less tensor pages touched | %.2f MiB (peak RSS %.2f MiB, before start-up %.2f MiB, tensors %.2f MiB; allocators' bookkeeping %.1f KiB of it) | |\n",
                own_mib, hwm / 1024.0, rss0 / 1024.0, touched / 1048576.0, alloc_books / 1024.0);
        fclose(f);
    }
    return 0;
}
