/* stub_nccl.h — the control interface of the stand-in NCCL (stub_nccl.c,
 * built as tests/cuda/stub/libnccl.so.2).
 *
 * The stand-in exports the NCCL functions the CUDA plugin resolves
 * (src/backend/cuda/nccl_abi.h) and works on the stand-in driver's memory
 * and streams (stub_cuda.h's vdev_stub_lib_* functions). Its communicators
 * are nonblocking (ncclCommInitRankConfig with blocking = 0, every rank of
 * an id in one group; a blocking config is a violation), each made ready at
 * its group's end and read ncclInProgress at its first poll; each takes
 * buffer_bytes of its GPU's memory (cuMemGetInfo shows it) when NCCL 2.22+
 * would: when made ready with NCCL_RUNTIME_CONNECT=0, else at its first
 * collective (NCCL's default). A group's collectives run on a thread of the
 * stand-in's own (ncclGroupEnd returns ncclInProgress; the comms read
 * ncclInProgress until the work ends): a collective reads every rank's
 * buffers and writes the results, as work on each rank's stream, checked for
 * races like any other stream work, once every rank has made its part (the
 * work waits until then, as NCCL's kernels finish only when every rank's
 * has run, or until its own communicator is aborted: ncclCommAbort sets the
 * flag its waits poll and waits for the work to stop; a peer's abort does
 * not end it); the streams of a collective take each other's clocks. Group
 * semantics are checked (calls inside ncclGroupStart/ncclGroupEnd are handed
 * over at ncclGroupEnd; an End without a Start is an error), so are the
 * ranks' calls against each other (the same kind, count, type, operation and
 * root on every rank), the streams (a stream of the communicator's own GPU),
 * the devices (no GPU twice in one communicator) and the overlap of calls
 * on one comm (an abort or destroy under calls queued in a group not yet
 * ended, or during another thread's poll; a new call while the last work is
 * in progress). A broken rule is a violation of the stand-in driver
 * (vdev_stub_stats, vdev_stub_violation). */
#ifndef VDEV_STUB_NCCL_H
#define VDEV_STUB_NCCL_H

#include <stddef.h>
#include <stdint.h>

struct vdev_stub_nccl_config {
    int version;            /* ncclGetVersion; 0: 22703 (2.27.3) */
    uint64_t buffer_bytes;  /* device memory each communicator takes on its GPU */
    unsigned group_end_delay_ms; /* an outermost ncclGroupEnd with calls queued sleeps this
                                  * long first, its calls still queued (a thread caught there) */
};

struct vdev_stub_nccl_stats {
    int comms;              /* communicators alive */
    int cliques;            /* cliques (the comms of one id, made ready) alive */
    int waiting;            /* ranks inside a collective now, waiting for peers (or an abort) */
    int ending;             /* threads in group_end_delay_ms's sleep now */
    uint64_t collectives;   /* collectives completed (one per buffer and call) */
    uint64_t groups;        /* ncclGroupEnd calls that ran at least one collective */
};

/* Resets the stand-in to a configuration (what the last one left is freed,
 * counts and faults cleared). */
typedef void (*vdev_stub_nccl_setup_fn)(const struct vdev_stub_nccl_config *c);
/* The nth (0: next) call of `fn` returns `result` (an ncclResult_t) instead
 * of doing anything; once. */
typedef void (*vdev_stub_nccl_fail_fn)(const char *fn, int nth, int result);
/* Calls of `fn` since the last setup. */
typedef uint64_t (*vdev_stub_nccl_calls_fn)(const char *fn);
typedef void (*vdev_stub_nccl_stats_fn)(struct vdev_stub_nccl_stats *out);
/* The last collective completed, as "allreduce float32 avg count 1024 ranks 2
 * devices 0,1", into buf (cap bytes); returns buf ("" before any). */
typedef const char *(*vdev_stub_nccl_last_fn)(char *buf, size_t cap);

struct vdev_stub_nccl_api {
    vdev_stub_nccl_setup_fn setup;
    vdev_stub_nccl_fail_fn fail;
    vdev_stub_nccl_calls_fn calls;
    vdev_stub_nccl_stats_fn stats;
    vdev_stub_nccl_last_fn last;
};

#endif /* VDEV_STUB_NCCL_H */
