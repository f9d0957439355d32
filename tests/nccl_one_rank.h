/* nccl_one_rank.h — the CUDA plugin's NCCL path on one GPU: a communicator
 * of one rank, which NCCL makes on a single card, so that a machine with one
 * GPU proves what two ranks need more cards for. Shared by test_cuda (a real
 * card and the NCCL of the CUDA toolkit) and tests/cuda/test_cuda_nccl (the
 * stand-in driver and NCCL), through the backend's table:
 *  - NCCL loads (coll_library says which one);
 *  - coll_open makes the nonblocking communicator (ncclGetUniqueId,
 *    ncclCommInitRankConfig, polled until ready) and what NCCL took on the
 *    GPU is held, then given back at coll_close;
 *  - all-reduce (sum and mean), broadcast and all-gather of one rank leave
 *    the data as it was (the identity), read back exactly;
 *  - coll_abort, then a call fails ("NCCL: the communicator was aborted")
 *    and coll_close frees what is left; a new communicator works after it.
 * Include after check.h and backend/backend.h. */
#ifndef VDEV_TEST_NCCL_ONE_RANK_H
#define VDEV_TEST_NCCL_ONE_RANK_H

#include <string.h>

#define ONE_RANK_COUNT 4099 /* not a multiple of any vector width */

/* One call of one rank over buf (and out, for all-gather). */
static enum vdev_status one_rank_run(struct vdev_backend *b, void *comm,
                                     enum vdev_backend_coll_kind kind, int mean, void *buf,
                                     void *out)
{
    void *data[2] = {buf, out};
    uint64_t count[2] = {ONE_RANK_COUNT, ONE_RANK_COUNT};
    struct vdev_backend_coll call = {.kind = kind,
                                     .mean = mean,
                                     .n_bufs = kind == VDEV_BACKEND_COLL_ALL_GATHER ? 2 : 1,
                                     .data = data,
                                     .count = count};
    return b->ops->coll_run(b->ctx, comm, 0, &call);
}

/* Runs the checks above on GPU 0 of backend b. */
static void nccl_one_rank(struct vdev_backend *b)
{
    char line[256] = "";
    int loaded = b->ops->coll_library(b->ctx, line, sizeof line);
    printf("collective library: %s\n", line);
    CHECK(loaded == 1);
    if (loaded != 1)
        return;
    int q = -1;
    uint64_t h = 0, held[1] = {0};
    void *buf = NULL, *out = NULL, *comm = NULL;
    const uint64_t bytes = ONE_RANK_COUNT * sizeof(float);
    CHECK_OK(b->ops->stream_open(b->ctx, 0, VDEV_PRIORITY_HIGH, &q, &h));
    CHECK_OK(b->ops->reserve(b->ctx, q, 2u << 20, &buf));
    if (!buf)
        return;
    out = (char *)buf + (1u << 20);
    static float x[ONE_RANK_COUNT], back[ONE_RANK_COUNT];
    for (int i = 0; i < ONE_RANK_COUNT; i++)
        x[i] = (float)(i % 97) * 0.25f - 11.0f;
    CHECK_OK(b->ops->copy_h2d(b->ctx, q, buf, x, bytes));
    uint64_t before = b->ops->held_bytes(b->ctx, q);
    CHECK_OK(b->ops->coll_open(b->ctx, &q, 1, &comm, held));
    if (!comm)
        return;
    printf("NCCL's memory for one rank: %llu bytes\n", (unsigned long long)held[0]);
    CHECK_EQ_U64(b->ops->held_bytes(b->ctx, q), before + held[0]);
    static const struct {
        enum vdev_backend_coll_kind kind;
        int mean;
    } calls[] = {{VDEV_BACKEND_COLL_ALL_REDUCE, 0},
                 {VDEV_BACKEND_COLL_ALL_REDUCE, 1},
                 {VDEV_BACKEND_COLL_BROADCAST, 0},
                 {VDEV_BACKEND_COLL_ALL_GATHER, 0}};
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        CHECK_OK(one_rank_run(b, comm, calls[c].kind, calls[c].mean, buf, out));
        void *res = calls[c].kind == VDEV_BACKEND_COLL_ALL_GATHER ? out : buf;
        memset(back, 0, sizeof back);
        CHECK_OK(b->ops->copy_d2h(b->ctx, q, back, res, bytes));
        CHECK(memcmp(back, x, bytes) == 0);
    }
    b->ops->coll_close(b->ctx, comm);
    CHECK_EQ_U64(b->ops->held_bytes(b->ctx, q), before);
    /* aborted: the next call fails, the close frees the rest */
    comm = NULL;
    CHECK_OK(b->ops->coll_open(b->ctx, &q, 1, &comm, held));
    if (comm) {
        b->ops->coll_abort(b->ctx, comm);
        CHECK_STATUS(one_rank_run(b, comm, VDEV_BACKEND_COLL_ALL_REDUCE, 0, buf, out),
                     VDEV_ERR_BACKEND);
        CHECK_MSG("NCCL: the communicator was aborted");
        b->ops->coll_close(b->ctx, comm);
        CHECK_EQ_U64(b->ops->held_bytes(b->ctx, q), before);
    }
    /* and a new one works */
    comm = NULL;
    CHECK_OK(b->ops->coll_open(b->ctx, &q, 1, &comm, held));
    if (comm) {
        CHECK_OK(one_rank_run(b, comm, VDEV_BACKEND_COLL_ALL_REDUCE, 0, buf, out));
        b->ops->coll_close(b->ctx, comm);
    }
    CHECK_OK(b->ops->copy_d2h(b->ctx, q, back, buf, bytes));
    CHECK(memcmp(back, x, bytes) == 0);
    CHECK_EQ_U64(b->ops->held_bytes(b->ctx, q), before);
    b->ops->release(b->ctx, q, buf, 2u << 20);
    b->ops->stream_close(b->ctx, q);
}

#endif /* VDEV_TEST_NCCL_ONE_RANK_H */
