/* test_backend_fill.c — vdev_backend_fill (src/backend/backend.c), the
 * wrapper over the backends' optional fill entry, on each of its paths:
 *  - a backend without the entry whose memory the host can address (sim,
 *    cpu): the words are written by a host function on the device's stream;
 *  - one whose memory the host cannot address and that has no entry (a
 *    table made here from sim's, with copy_h2d counted and made to fail on
 *    demand): copies of one host buffer of at most 1 MiB, and a failing copy
 *    is the fill's error;
 *  - one with the entry: the entry, and nothing else;
 *  - n_words 0 does nothing; an unaligned or NULL address is
 *    VDEV_ERR_INVALID_ARG with a message.
 * (The CUDA plugin's entry, cuMemsetD32Async, is checked in
 * tests/cuda/test_cuda_stub.c and on a GPU in test_cuda.c.) */
#include "check.h"
#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)

static int all_words(const uint32_t *w, uint64_t n, uint32_t v)
{
    for (uint64_t i = 0; i < n; i++)
        if (w[i] != v)
            return 0;
    return 1;
}

static void test_host_addressable(struct vdev_backend *b)
{
    void *base = NULL;
    CHECK_OK(b->ops->reserve(b->ctx, 0, 2 * MiB, &base));
    if (!base)
        return;
    uint32_t *w = base;
    memset(w, 0, 2 * MiB);
    CHECK(b->ops->fill == NULL);
    CHECK_OK(vdev_backend_fill(b, 0, w + 1, 0x3f800000u, 1000));
    CHECK_OK(vdev_backend_synchronize(b, 0));
    CHECK(w[0] == 0 && all_words(w + 1, 1000, 0x3f800000u) && w[1001] == 0);
    CHECK_OK(vdev_backend_fill(b, 0, w, 9, 0));
    CHECK_OK(vdev_backend_synchronize(b, 0));
    CHECK(w[0] == 0);
    CHECK_STATUS(vdev_backend_fill(b, 0, (char *)base + 1, 9, 4), VDEV_ERR_INVALID_ARG);
    CHECK_MSG(" backend: fill of ");
    CHECK_MSG(": not a 4-byte aligned device address");
    CHECK_STATUS(vdev_backend_fill(b, 0, NULL, 9, 4), VDEV_ERR_INVALID_ARG);
    b->ops->release(b->ctx, 0, base, 2 * MiB);
}

/* A sim table whose memory "the host cannot address": fills go through
 * copy_h2d, which counts its calls and fails the nth when asked. */
static struct vdev_backend_ops opaque_ops;
static const struct vdev_backend_ops *sim_ops;
static int h2d_calls, h2d_fail_at = -1;
static uint64_t h2d_max_bytes;

static enum vdev_status counted_h2d(void *ctx, int dev, void *dst, const void *src, uint64_t n)
{
    if (h2d_calls++ == h2d_fail_at)
        return vdev_error(VDEV_ERR_BACKEND, "test: copy_h2d number %d fails", h2d_fail_at);
    if (n > h2d_max_bytes)
        h2d_max_bytes = n;
    return sim_ops->copy_h2d(ctx, dev, dst, src, n);
}

static void test_through_copies(struct vdev_backend *sim)
{
    sim_ops = sim->ops;
    opaque_ops = *sim->ops;
    opaque_ops.host_addressable = 0;
    opaque_ops.fill = NULL;
    opaque_ops.copy_h2d = counted_h2d;
    struct vdev_backend b = {&opaque_ops, sim->ctx};
    void *base = NULL;
    CHECK_OK(b.ops->reserve(b.ctx, 0, 4 * MiB, &base));
    if (!base)
        return;
    uint32_t *w = base;
    memset(w, 0, 4 * MiB);
    uint64_t n = (3 * MiB + 12) / 4;
    CHECK_OK(vdev_backend_fill(&b, 0, w + 2, 0xdeadbeefu, n));
    CHECK(h2d_calls == 4);            /* 1 MiB, 1 MiB, 1 MiB, 12 bytes */
    CHECK_EQ_U64(h2d_max_bytes, MiB); /* never more host memory than that */
    CHECK(w[1] == 0 && all_words(w + 2, n, 0xdeadbeefu) && w[2 + n] == 0);
    /* a small fill: one copy of just its bytes */
    h2d_calls = 0;
    h2d_max_bytes = 0;
    CHECK_OK(vdev_backend_fill(&b, 0, w, 5, 3));
    CHECK(h2d_calls == 1);
    CHECK_EQ_U64(h2d_max_bytes, 12);
    CHECK(all_words(w, 3, 5) && w[3] == 0xdeadbeefu);
    /* the second copy fails: so does the fill, with the copy's error */
    h2d_calls = 0;
    h2d_fail_at = 1;
    CHECK_STATUS(vdev_backend_fill(&b, 0, w, 7, 2 * MiB / 4 + 1), VDEV_ERR_BACKEND);
    CHECK_STR(vdev_last_error(), "test: copy_h2d number 1 fails");
    CHECK(h2d_calls == 2);
    h2d_fail_at = -1;
    b.ops->release(b.ctx, 0, base, 4 * MiB);
}

/* A table with a fill entry: vdev_backend_fill hands over, and nothing else. */
static int fill_calls;
static enum vdev_status own_fill(void *ctx, int dev, void *dst, uint32_t v, uint64_t n)
{
    fill_calls++;
    return vdev_error(VDEV_ERR_UNSUPPORTED, "test: fill of %llu words of %#x on %d",
                      (unsigned long long)n, v, dev);
}

static void test_entry(struct vdev_backend *sim)
{
    struct vdev_backend_ops ops = *sim->ops;
    ops.fill = own_fill;
    ops.copy_h2d = counted_h2d;
    sim_ops = sim->ops;
    struct vdev_backend b = {&ops, sim->ctx};
    uint32_t word = 0;
    h2d_calls = 0;
    CHECK_STATUS(vdev_backend_fill(&b, 0, &word, 0x10, 6), VDEV_ERR_UNSUPPORTED);
    CHECK_STR(vdev_last_error(), "test: fill of 6 words of 0x10 on 0");
    CHECK(fill_calls == 1 && h2d_calls == 0);
    CHECK_OK(vdev_backend_fill(&b, 0, &word, 0x10, 0));
    CHECK(fill_calls == 1);
}

int main(void)
{
    check_fresh(NULL);
    struct vdev_backend sim, cpu;
    CHECK_OK(vdev_backend_sim_new("1x1GiB", "VDEV_SIM_GPUS", &sim));
    CHECK_OK(vdev_backend_cpu_new(&cpu));
    if (sim.ops && cpu.ops) {
        test_host_addressable(&sim);
        test_host_addressable(&cpu);
        test_through_copies(&sim);
        test_entry(&sim);
    }
    vdev_backend_destroy(&sim);
    vdev_backend_destroy(&cpu);
    return check_done();
}
