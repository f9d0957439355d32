/* stub_nccl.h — the control interface of the stand-in NCCL (stub_nccl.c,
 * built as tests/cuda/stub/libnccl.so.2).
 *
 * The stand-in exports the NCCL functions the CUDA plugin resolves
 * (src/backend/cuda/nccl_abi.h) and works on the stand-in driver's memory
 * and streams (stub_cuda.h's vdev_stub_lib_* functions): ncclCommInitAll
 * makes one communicator per GPU of a clique, each of which takes
 * buffer_bytes of its GPU's memory (cuMemGetInfo shows it) when NCCL 2.22+
 * would: at ncclCommInitAll with NCCL_RUNTIME_CONNECT=0, else at its first
 * collective (NCCL's default); a collective reads every rank's
 * buffers and writes the results, as work on each rank's stream, checked for
 * races like any other stream work, once every rank has made its part (a
 * rank's call blocks until then: the collective runs when its last rank
 * comes, as NCCL's kernels finish only when every rank's has run, or its
 * own communicator is aborted: ncclCommAbort sets the flag its waits poll,
 * from any thread, as NCCL's does; a peer's abort does not end it); the
 * streams of a collective take each other's clocks. Group semantics are
 * checked (calls inside ncclGroupStart/ncclGroupEnd run at ncclGroupEnd; an
 * End without a Start is an error), so are the ranks' calls against each
 * other (the same kind, count, type, operation and root on every rank), the
 * streams (a stream of the communicator's own GPU) and the devices (no GPU
 * twice in ncclCommInitAll). A broken rule is a violation of the stand-in
 * driver (vdev_stub_stats, vdev_stub_violation). */
#ifndef VDEV_STUB_NCCL_H
#define VDEV_STUB_NCCL_H

#include <stddef.h>
#include <stdint.h>

struct vdev_stub_nccl_config {
    int version;            /* ncclGetVersion; 0: 22703 (2.27.3) */
    uint64_t buffer_bytes;  /* device memory each communicator takes on its GPU */
};

struct vdev_stub_nccl_stats {
    int comms;              /* communicators alive */
    int cliques;            /* ncclCommInitAll cliques alive */
    int waiting;            /* ranks inside a collective now, waiting for peers (or an abort) */
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
