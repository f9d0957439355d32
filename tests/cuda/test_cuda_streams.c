/* test_cuda_streams.c — a stream per logical device in the real CUDA plugin
 * (libvdev-cuda.so), run against the stand-in driver (stub/libcuda.so.1):
 *  - stream_open maps vdev's priorities to CUDA stream priorities within
 *    cuCtxGetStreamPriorityRange (critical the greatest, high half-way,
 *    normal and low CUDA's default), hands the GPU's own stream out once for
 *    a normal priority, and reports what each stream holds (scratch buffer
 *    and cuBLAS workspace); failures leave nothing behind;
 *  - the runtime gives each logical GPU of a split card its own stream with
 *    its priority, and their work lands on distinct streams;
 *  - a copy between two logical devices of one card is ordered both ways
 *    (the destination's stream waits for the source's writes, the source's
 *    later writes wait for the copy), checked in the stand-in's trace and by
 *    its race checks;
 *  - the whole budget: what the context and the streams take comes out of
 *    the card's budget, so a logical device's limit is memory its tensors
 *    really get (the stand-in's contexts take memory, as real ones do). */
#define _GNU_SOURCE
#include "check.h"
#include "vdev.h"

#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "ops/op_ids.h"
#include "stub_client.h"

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define STREAM_BYTES ((uint64_t)VDEV_CUDA_SCRATCH_BYTES + VDEV_CUDA_WORKSPACE_BYTES(9))

/* ---- stream_open and priorities ---- */

static void test_priorities(void)
{
    stub_setup(1, 4 * GiB, 13000, 0, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    CHECK(b.ops->stream_open != NULL && b.ops->stream_close != NULL);
    int own = S.stream_id(0);
    CHECK(S.stream_priority(own) == VDEV_STUB_PRIO_LEAST);
    struct vdev_stub_stats st;
    S.stats(0, &st);
    CHECK_EQ_U64(st.bytes_used, 0); /* the own stream takes its memory when handed out */

    int q[5];
    uint64_t held[5];
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_CRITICAL, &q[0], &held[0]));
    CHECK(q[0] >= 1);
    CHECK(S.stream_priority(S.stream_id(0)) == VDEV_STUB_PRIO_GREATEST);
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_HIGH, &q[1], &held[1]));
    CHECK(S.stream_priority(S.stream_id(0)) == -3); /* half-way from 0 to -5 */
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_NORMAL, &q[2], &held[2]));
    CHECK(q[2] == 0); /* the GPU's own stream */
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_NORMAL, &q[3], &held[3]));
    CHECK(q[3] >= 1 && q[3] != q[0] && q[3] != q[1]);
    CHECK(S.stream_priority(S.stream_id(0)) == VDEV_STUB_PRIO_LEAST);
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_LOW, &q[4], &held[4]));
    CHECK(S.stream_priority(S.stream_id(0)) == VDEV_STUB_PRIO_LEAST); /* no lower one */
    for (int i = 0; i < 5; i++)
        CHECK_EQ_U64(held[i], STREAM_BYTES);
    S.stats(0, &st);
    CHECK_EQ_U64(st.bytes_used, 5 * STREAM_BYTES);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 0), 5 * STREAM_BYTES);
    CHECK(st.streams == 5);

    /* a failing stream leaves nothing behind */
    S.fail("cuStreamCreateWithPriority", 0, CUDA_ERROR_OUT_OF_MEMORY);
    int bad = -1;
    uint64_t bad_held = 7;
    CHECK_STATUS(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_CRITICAL, &bad, &bad_held),
                 VDEV_ERR_OOM);
    CHECK_MSG("CUDA GPU 0: cuStreamCreateWithPriority failed: CUDA_ERROR_OUT_OF_MEMORY");
    S.fail("cuMemAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY); /* the workspace, after the scratch */
    CHECK_STATUS(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_HIGH, &bad, &bad_held),
                 VDEV_ERR_OOM);
    CHECK_MSG("CUDA GPU 0: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY");
    S.stats(0, &st);
    CHECK(st.streams == 5);
    CHECK_EQ_U64(st.bytes_used, 5 * STREAM_BYTES);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 0), 5 * STREAM_BYTES);
    CHECK_STATUS(b.ops->stream_open(b.ctx, 3, VDEV_PRIORITY_HIGH, &bad, &bad_held),
                 VDEV_ERR_NOT_FOUND);
    CHECK_MSG("cuda backend has no device 3");

    for (int i = 0; i < 5; i++)
        b.ops->stream_close(b.ctx, q[i]);
    S.stats(0, &st);
    CHECK(st.streams == 1); /* the GPU's own, without its memory */
    CHECK_EQ_U64(st.bytes_used, 0);
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 0), 0);
    /* handed out again */
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_NORMAL, &q[0], &held[0]));
    CHECK(q[0] == 0 && held[0] == STREAM_BYTES);
    b.ops->stream_close(b.ctx, q[0]);
    /* equipped by a raw kernel (an empty product: nothing launched) before it
     * is handed out: stream_open reports what it holds, not what it took */
    struct vdev_kernel_args ka;
    memset(&ka, 0, sizeof ka);
    ka.op = VDEV_OP_MATMUL;
    ka.n_in = 2;
    ka.n_out = 1;
    ka.in_ndim[0] = ka.in_ndim[1] = ka.out_ndim[0] = 2;
    CHECK_OK(b.ops->run_kernel(b.ctx, 0, &ka));
    CHECK_EQ_U64(b.ops->held_bytes(b.ctx, 0), STREAM_BYTES);
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_NORMAL, &q[0], &held[0]));
    CHECK(q[0] == 0);
    CHECK_EQ_U64(held[0], STREAM_BYTES);
    b.ops->stream_close(b.ctx, q[0]);
    vdev_backend_destroy(&b);
    expect_clean("streams and priorities", 1);
}

/* ---- copies between logical devices of one card ---- */

static void test_sibling_copy(void)
{
    stub_setup(1, 4 * GiB, 13000, 0, 0, 0);
    struct vdev_backend b;
    stub_open_backend(&b);
    if (!b.ops)
        return;
    int qa = -1, qb = -1;
    uint64_t held;
    int sb = S.stream_id(0); /* the GPU's own stream: the low-priority device gets it */
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_CRITICAL, &qa, &held));
    int sa = S.stream_id(0);
    CHECK_OK(b.ops->stream_open(b.ctx, 0, VDEV_PRIORITY_LOW, &qb, &held));
    CHECK(qb == 0 && sa != sb);
    void *src = NULL, *dst = NULL;
    CHECK_OK(b.ops->reserve(b.ctx, qa, 2 * MiB, &src));
    CHECK_OK(b.ops->reserve(b.ctx, qb, 2 * MiB, &dst));
    uint32_t *h = malloc(MiB), *back = malloc(MiB);
    for (uint32_t i = 0; i < MiB / 4; i++)
        h[i] = i * 2654435761u;
    CHECK_OK(b.ops->copy_h2d(b.ctx, qa, src, h, MiB));
    S.trace_mark();
    CHECK_OK(b.ops->copy_d2d(b.ctx, qb, dst, qa, src, MiB));
    CHECK_OK(b.ops->fill(b.ctx, qa, src, 7, MiB / 4)); /* after the copy read it */
    char tr[4096], l[5][64];
    S.trace(tr, sizeof tr);
    snprintf(l[0], sizeof l[0], "S%d record E%%d", sa);
    snprintf(l[1], sizeof l[1], "S%d copy %llu", sb, MiB);
    snprintf(l[2], sizeof l[2], "S%d record E%%d", sb);
    snprintf(l[3], sizeof l[3], "S%d wait E%%d", sa);
    snprintf(l[4], sizeof l[4], "S%d memset %llu", sa, MiB);
    const char *pat[] = {l[0], l[1], l[2], l[3], l[4]};
    if (!stub_trace_has(tr, pat, 5))
        check_fail(__FILE__, __LINE__, "a copy between sibling streams is not ordered:\n%s", tr);
    else
        check_passed++;
    expect_clean("a copy between logical devices of one card", 0);
    CHECK_OK(b.ops->copy_d2h(b.ctx, qb, back, dst, MiB));
    CHECK(memcmp(h, back, MiB) == 0);
    CHECK_OK(b.ops->copy_d2h(b.ctx, qa, back, src, 4));
    CHECK(back[0] == 7);
    free(h);
    free(back);
    b.ops->release(b.ctx, qa, src, 2 * MiB);
    b.ops->release(b.ctx, qb, dst, 2 * MiB);
    b.ops->stream_close(b.ctx, qa);
    b.ops->stream_close(b.ctx, qb);
    vdev_backend_destroy(&b);
    expect_clean("sibling copies", 1);
}

/* ---- the runtime: a stream per logical GPU ---- */

static void test_runtime(void)
{
    stub_setup(1, 4 * GiB, 13000, 0, 0, 0);
    check_fresh(NULL);
    setenv("VDEV_LOGICAL_DEVICES", "0:512MiB@critical,512MiB,512MiB@low", 1);
    CHECK_OK(vdev_init());
    struct vdev_stub_stats st;
    S.stats(0, &st);
    CHECK(st.streams == 3); /* the card's own (GPU:1's), GPU:0's and GPU:2's */
    CHECK_EQ_U64(st.bytes_used, 3 * STREAM_BYTES);
    /* each device's first copy lands on its own stream */
    int64_t shape[1] = {1024};
    float h[1024];
    for (int i = 0; i < 1024; i++)
        h[i] = (float)i;
    int ids[3];
    for (int g = 0; g < 3; g++) {
        char name[16];
        snprintf(name, sizeof name, "GPU:%d", g);
        S.trace_mark();
        CHECK_OK(vdev_device_push(name));
        vdev_tensor_t *t = vdev_tensor_from_host(h, shape, 1, VDEV_F32);
        CHECK_OK(vdev_device_pop());
        CHECK(t != NULL);
        char tr[4096];
        S.trace(tr, sizeof tr);
        ids[g] = stub_trace_stream(tr, " h2d ");
        vdev_tensor_free(t);
    }
    CHECK(ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0);
    CHECK(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
    CHECK(S.stream_priority(ids[0]) == VDEV_STUB_PRIO_GREATEST);
    CHECK(S.stream_priority(ids[1]) == VDEV_STUB_PRIO_LEAST);
    CHECK(S.stream_priority(ids[2]) == VDEV_STUB_PRIO_LEAST);
    expect_clean("three logical GPUs at work", 0);
    check_fresh(NULL);
    expect_clean("after shutdown", 1);
}

/* ---- the whole budget ---- */

static void test_whole_budget(void)
{
    /* A context of 500 MiB; the whole card asked for. Without counting the
     * context and the stream's memory, the limit would be 4 GiB, more than
     * the card can give, and an allocation within the limit would fail in
     * the driver. */
    stub_setup_ctx(1, 4 * GiB, 500 * MiB);
    check_fresh(NULL);
    setenv("VDEV_MEMORY_FRACTION", "1.0", 1);
    CHECK_OK(vdev_init());
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    uint64_t room = 4 * GiB - 500 * MiB - STREAM_BYTES;
    CHECK(l.ceiling_bytes <= room);
    CHECK(l.ceiling_bytes + MiB > room);
    /* the whole limit really is there */
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", l.ceiling_bytes & ~(uint64_t)(2 * MiB - 1), &p));
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info("GPU:0", &mi));
    struct vdev_stub_stats st;
    S.stats(0, &st);
    /* what the driver reports in use (nvidia-smi's figure) is the context,
     * the stream and what vdev reserved, to the byte */
    CHECK_EQ_U64(st.bytes_used, 500 * MiB + STREAM_BYTES + mi.bytes_reserved);
    CHECK_OK(vdev_mem_free("GPU:0", p));
    CHECK_OK(vdev_memory_release_cached("GPU:0", NULL));
    S.stats(0, &st);
    CHECK_EQ_U64(st.bytes_used, 500 * MiB + STREAM_BYTES);
    check_fresh(NULL);
    unsetenv("VDEV_MEMORY_FRACTION");

    /* a context so large that the stream does not fit: start-up fails and says why */
    stub_setup_ctx(1, 4 * GiB, 4 * GiB - 16 * MiB);
    check_fresh(NULL);
    setenv("VDEV_MEMORY_FRACTION", "1.0", 1);
    CHECK(vdev_init() != VDEV_OK);
    CHECK_MSG("/device:GPU:0: cannot open its stream");
    CHECK_MSG("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY");
    check_fresh(NULL);
    unsetenv("VDEV_MEMORY_FRACTION");
    expect_clean("the whole budget", 1);
}

int main(void)
{
    check_fresh(NULL);
    if (stub_load() != 0) {
        check_fail(__FILE__, __LINE__, "cannot load the stand-in driver %s", VDEV_STUB_CUDA_PATH);
        return check_done();
    }
    test_priorities();
    test_sibling_copy();
    test_runtime();
    test_whole_budget();
    check_fresh(NULL);
    S.setup(NULL);
    return check_done();
}
