/* test_host_oom_dist.c — the host refusing memory, at every allocation in turn, in the
 * trace reader and the replay, the runtime's allocation trace and the mirrored strategy.
 *
 * Each scenario runs once for each of its host allocations refused in turn, then once
 * with none refused (tests/host_oom.h): a call that fails must say VDEV_ERR_OOM, only
 * when the refusal came in it, the same call again must succeed, and the run must end
 * as the run without a refusal did, to the bit. The scenarios: reading a training trace
 * (plain and gzip, header fields and all) and replaying it for its capacities, where a
 * refusal must never pass for the device's lack of room (a smaller capacity found, or a
 * larger one); and a mirrored strategy over two simulated GPUs from the calling thread
 * (start-up, the replicas' runs, a reduce, the per-replica memory, the free), with the
 * runtime's allocation trace written and read back. The replicas' own threads are never
 * refused (the refusals are the calling thread's). */
#define _GNU_SOURCE
#include "host_oom.h"

#include "alloc/replay.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "vdev/distribute.h"

static char gz_path[96];

/* ---- a trace, read and replayed ------------------------------------------ */

static uint64_t trace_digest(const struct vdev_trace *t)
{
    uint64_t h = mix(t->n_events, t->n_allocs);
    h = mix(h, t->n_frees);
    h = mix(h, t->n_slots);
    h = mix(h, t->peak_live_bytes);
    h = mix(h, t->n_live_at_end);
    h = mix(h, t->n_fields);
    for (size_t i = 0; i < t->n_fields; i++) {
        for (const char *c = t->keys[i]; *c; c++)
            h = mix(h, (unsigned char)*c);
        for (const char *c = t->values[i]; *c; c++)
            h = mix(h, (unsigned char)*c);
    }
    for (uint64_t i = 0; i < t->n_events; i++)
        h = mix(mix(h, t->events[i].bytes), t->events[i].slot);
    return h;
}

static uint64_t replayed(const char *path)
{
    struct vdev_trace *t = NULL;
    RETRY_OK(vdev_trace_load(path, &t));
    if (!t)
        return 0;
    uint64_t h = trace_digest(t);
    struct vdev_replay_options opt = {.repeats = -1};
    struct vdev_replay_result r;
    RETRY_OK(vdev_replay_run(t, &opt, &r));
    h = mix(h, r.peak_reserved_bytes);
    h = mix(h, r.min_capacity_bytes);
    h = mix(h, r.peak_live_bytes);
    vdev_trace_free(t);
    return h;
}

static uint64_t trace_and_replay(void)
{
    return mix(replayed(VDEV_DATA_DIR "/traces/mlp.trace"), replayed(gz_path));
}

/* ---- a mirrored strategy ------------------------------------------------- */

/* Each replica: its rows of the batch, their sum, all-reduced, returned. */
static enum vdev_status step(vdev_replica_context_t *ctx, void *user)
{
    vdev_tensor_t *batch = user;
    vdev_tensor_t *mine = vdev_replica_batch(ctx, batch);
    if (!mine)
        return vdev_last_status();
    vdev_tensor_t *s = vdev_sum_all(mine);
    vdev_tensor_free(mine);
    if (!s)
        return vdev_last_status();
    vdev_tensor_t *all = NULL;
    enum vdev_status st = vdev_replica_all_reduce(ctx, VDEV_REDUCE_SUM, &s, 1, &all);
    if (st == VDEV_OK)
        st = vdev_replica_return(ctx, all);
    vdev_tensor_free(s);
    vdev_tensor_free(all);
    return st;
}

static uint64_t mirrored(void)
{
    check_fresh("2x64MiB");
    static int runs; /* a file of its own each run (one file again is warned of) */
    char path[96];
    snprintf(path, sizeof path, "/tmp/vdev-host-oom-dist-%d-%d.trace", (int)getpid(), runs++);
    setenv("VDEV_ALLOC_TRACE", path, 1);
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_strategy_t *s = NULL;
    RETRY_OK(vdev_mirrored_strategy_new(devs, 2, &s));
    const int64_t shape[2] = {6, 4};
    vdev_tensor_t *batch;
    RETRY_PTR(batch, vdev_tensor_uniform(shape, 2, -1, 1, 5));
    uint64_t h = 0;
    for (int run = 0; s && batch && run < 3; run++) {
        vdev_tensor_t *res[2] = {NULL, NULL};
        RETRY_OK(vdev_strategy_run(s, step, batch, res));
        vdev_tensor_t *sum;
        RETRY_PTR(sum, vdev_strategy_reduce(s, VDEV_REDUCE_MEAN, res));
        float v = 0;
        RETRY_OK(vdev_tensor_to_host(sum, &v, sizeof v));
        uint32_t bits;
        memcpy(&bits, &v, 4);
        h = mix(h, bits);
        vdev_tensor_free(sum);
        vdev_tensor_free(res[0]);
        vdev_tensor_free(res[1]);
    }
    for (int r = 0; s && r < 2; r++) {
        struct vdev_memory_info mi;
        RETRY_OK(vdev_strategy_memory_info(s, r, &mi));
        h = mix(h, mi.bytes_in_use);
    }
    vdev_tensor_free(batch);
    vdev_strategy_free(s);
    vdev_shutdown();
    unsetenv("VDEV_ALLOC_TRACE");
    /* The trace the runtime wrote, read back: whole, and nothing left live. (A call
     * that failed after taking device memory gave it back, so the counts of
     * allocations may differ from the run without a refusal; what is live may not.) */
    struct vdev_trace *t = NULL;
    RETRY_OK(vdev_trace_load(path, &t));
    if (t) {
        CHECK(t->n_allocs > 0);
        CHECK_EQ_U64(t->n_allocs, t->n_frees);
        h = mix(h, t->n_live_at_end);
        h = mix(h, t->cut_line);
    }
    vdev_trace_free(t);
    unlink(path);
    return h;
}

int main(void)
{
    /* The MLP trace again, gzip-compressed, so the reader's zlib path is swept too. */
    snprintf(gz_path, sizeof gz_path, "/tmp/vdev-host-oom-dist-%d.trace.gz", (int)getpid());
    FILE *in = fopen(VDEV_DATA_DIR "/traces/mlp.trace", "rb");
    gzFile out = gzopen(gz_path, "wb");
    CHECK(in && out);
    char buf[4096];
    for (size_t n; in && out && (n = fread(buf, 1, sizeof buf, in)) > 0;)
        CHECK(gzwrite(out, buf, (unsigned)n) == (int)n);
    if (in)
        fclose(in);
    if (out)
        gzclose(out);
    sweep("trace read and replayed", trace_and_replay);
    sweep("mirrored strategy, allocation trace", mirrored);
    unlink(gz_path);
    return check_done();
}
