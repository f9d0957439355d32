/* coll.h — the collective interface: what every implementation of
 * collectives serves (vdev's ring in ring.c; MPI across processes and NCCL
 * across physical CUDA GPUs plug in behind the same table), and the
 * communicator the layers above hold.
 *
 * A communicator is a list of ranks, each a logical device. The strategy
 * (src/dist/) and the public vdev_comm_* calls (comm.c) reach an
 * implementation only through struct vdev_coll_ops, so an implementation can
 * be swapped without touching them.
 *
 * ---- The contract every implementation keeps --------------------------------
 *
 * Threads. Each rank has its own host thread, and only that thread makes the
 * rank's calls. Every rank makes the same calls in the same order (the k-th
 * call of rank 0 goes with the k-th call of every other rank), concurrently.
 * A call returns on a rank once every rank's part is done or queued (so that
 * every rank knows the call's outcome); it never waits for a rank's later
 * calls, nor for the devices' streams. `abort` and `leave` may come from any
 * thread; `reset`, `set_timeout` and `destroy` only when no rank is inside a
 * call.
 *
 * Buffers. Buffers are device memory of the rank's own device, owned by the
 * caller, who keeps them until the call has returned and frees them through
 * the allocator (whose frees are stream-ordered, so work the call queued on
 * the rank's stream still finds them). An implementation keeps no pointer to
 * a buffer after the call. Staging memory
 * an implementation needs is taken from each rank's own device (the rank's
 * allocator, through a tensor), never from one device for all, and given back
 * before the call returns (stream-ordered). The descriptor (struct
 * vdev_coll_call) and its arrays are the caller's; an implementation copies
 * what other ranks must read.
 *
 * Stream order. The data a call reads is what the rank's stream holds after
 * the work queued on it before the call; the results are in place for work
 * queued on the rank's stream after the call returns (the implementation
 * makes each rank's stream wait, with events, for any other stream that
 * still reads or writes that rank's buffers). Host code that reads a result
 * waits for the stream as it would for an op (vdev_tensor_to_host does).
 * So waiting for the rank's stream after the call waits for every read and
 * write of the rank's buffers: vdev_coll_tensors does, for a tensor exported
 * as host memory (dlpack.c), whose consumer has no stream to wait on.
 *
 * Errors. Every rank of a call returns the same code and message.
 *  - Before any data moves: a rank passes its own failure in call->status and
 *    call->why (a tensor it could not use, no memory for staging); the ranks'
 *    descriptors are compared (kind, op, root, dtype, shapes). Any failure or
 *    mismatch fails this call on every rank, the lowest failing rank's reason
 *    first, and changes no buffer; the communicator stays usable.
 *  - While data moves (a backend error), on abort, or on a timeout: the
 *    communicator fails for good (each later call fails at once with the same
 *    code and message until `reset`), the buffers of the call hold unspecified
 *    values, and no rank returns before the streams of the call have stopped
 *    touching its buffers.
 *  - Waits are bounded: a rank that waits longer than the timeout (seconds in
 *    struct vdev_coll_comm, read when a call starts) for another rank fails
 *    the communicator with VDEV_ERR_BACKEND, saying whom it waited for.
 *  - `leave` tells the implementation that a rank will make no more calls
 *    (its step ended); a rank waiting for it in a call it never made fails at
 *    once instead of after the timeout.
 *
 * Determinism. The result of a reduction depends only on the inputs, the
 * number of ranks and the buffers' sizes: never on timing. Every rank gets
 * the same bits.
 *
 * Implementations. NCCL (inside the CUDA plugin, nccl.c here) serves a
 * communicator whose ranks are distinct physical CUDA GPUs: one ncclComm per
 * rank from ncclCommInitAll, each call a group call on the rank's own stream
 * (vdev_coll_comm_make picks it there; logical devices of one card stay on
 * the ring). MPI across processes serves the local ranks of its process: the
 * strategy's ranks are still its local replicas, and the implementation
 * reduces among them (the ring), across processes (MPI_Allreduce on a host
 * buffer: Debian's Open MPI is not CUDA-aware), then broadcasts locally; the
 * pre-data check of the contract becomes an MPI_Allreduce of the ranks'
 * statuses, and a timeout or a dead process fails every local rank as above.
 * Either is a struct vdev_coll_ops handed to vdev_coll_comm_make_with; the
 * strategy does not change.
 *
 * Example (what vdev_coll_tensors does for the public all-reduce):
 *
 *     struct vdev_coll_call c = {.kind = VDEV_COLL_ALL_REDUCE, .op = VDEV_REDUCE_SUM,
 *                                .bufs = bufs, .n_bufs = n};
 *     int origin;
 *     enum vdev_status st = comm->ops->run(comm->ctx, rank, &c, &origin);
 */
#ifndef VDEV_COLL_H
#define VDEV_COLL_H

#include "tensor/tensor.h"

#include <stdatomic.h>

#define VDEV_COLL_API_VERSION 1
/* The most ranks of one communicator. */
#define VDEV_COLL_MAX_RANKS VDEV_MAX_LDEVS

enum vdev_coll_kind {
    VDEV_COLL_ALL_REDUCE = 0, /* bufs in place; op; f32 */
    VDEV_COLL_BROADCAST,      /* bufs in place; root's values everywhere */
    VDEV_COLL_ALL_GATHER,     /* bufs[0] in (count c), bufs[1] out (count n_ranks * c) */
    VDEV_COLL_BARRIER,        /* no buffers; with a status: every rank's verdict (an "agree") */
    VDEV_COLL_KIND_COUNT
};

/* One buffer: device memory on the rank's device, and the shape it had, for
 * messages and for comparing ranks (a flat buffer is [count]). */
struct vdev_coll_buf {
    void *data;                     /* NULL when count is 0 */
    uint64_t count;                 /* elements (4 bytes each) */
    enum vdev_dtype dtype;
    int ndim;
    int64_t shape[VDEV_MAX_DIMS];
};

/* A call, as one rank makes it. */
struct vdev_coll_call {
    enum vdev_coll_kind kind;
    enum vdev_reduce_op op;         /* all-reduce */
    int root;                       /* broadcast */
    const struct vdev_coll_buf *bufs;
    int n_bufs;
    const char *what;               /* the caller's name, for messages: "vdev_comm_all_reduce" */
    /* The rank's own failure before the call (VDEV_OK: none): every rank
     * fails this call with it. why: one line, copied. */
    enum vdev_status status;
    const char *why;
};

struct vdev_coll_comm;

struct vdev_coll_ops {
    int api_version;                /* VDEV_COLL_API_VERSION */
    const char *name;               /* "ring", "nccl", "mpi" */
    /* Makes the implementation's state for comm (ranks, devices and timeout
     * set; comm outlives the state). */
    enum vdev_status (*create)(const struct vdev_coll_comm *comm, void **ctx);
    /* A collective (see the contract). *origin: the rank whose failure the
     * call failed with (its own or another's), -1 when it succeeded or no
     * rank is to blame (a timeout names the rank waited for). */
    enum vdev_status (*run)(void *ctx, int rank, const struct vdev_coll_call *call, int *origin);
    /* Fails every call in flight and every later one, on every rank. */
    void (*abort)(void *ctx, int rank, enum vdev_status code, const char *why);
    /* (optional) default: a missing rank is found by the timeout. */
    void (*leave)(void *ctx, int rank);
    /* Forgets a failure and every rank's call count: the next call of each
     * rank is call 0 again. No rank inside a call. */
    void (*reset)(void *ctx);
    void (*destroy)(void *ctx);
};

/* A communicator: the implementation and the ranks' devices. */
struct vdev_coll_comm {
    const struct vdev_coll_ops *ops;
    void *ctx;
    int n;                          /* ranks (this process's) */
    /* Ranks across every process of the communicator, and the global rank of
     * local rank 0 (n and 0 for one process; hier.h for several). Broadcast
     * roots are global ranks; an all-gather's output holds n_global parts. */
    int n_global, first;
    struct vdev_ldev **devs;        /* n devices, rank order */
    _Atomic uint64_t timeout_ns;    /* how long a rank waits for another */
    uint32_t rgen;                  /* the runtime generation it was made under */
};

/* vdev's ring (ring.c), and the backend's own library (nccl.c: NCCL). */
extern const struct vdev_coll_ops vdev_coll_ring_ops;
extern const struct vdev_coll_ops vdev_coll_nccl_ops;

/* Checks the devices (non-empty, distinct, one backend: the messages of
 * vdev_comm_new) and makes a communicator over them with the implementation
 * that serves them: NCCL when every rank is a logical GPU on a physical GPU
 * of its own, on a backend with a collective library that loads (and whose
 * buffers fit the cards' budgets), else the ring, saying why once in the
 * log. *out is the caller's, freed with vdev_coll_comm_free. */
enum vdev_status vdev_coll_comm_make(struct vdev_ldev *const *devs, int n,
                                     struct vdev_coll_comm **out);
/* The same with a given implementation (a plugin's table; its api_version
 * must be VDEV_COLL_API_VERSION, else VDEV_ERR_UNSUPPORTED). */
enum vdev_status vdev_coll_comm_make_with(const struct vdev_coll_ops *ops,
                                          struct vdev_ldev *const *devs, int n,
                                          struct vdev_coll_comm **out);
void vdev_coll_comm_free(struct vdev_coll_comm *c);
/* NCCL's part of that choice (nccl.c): VDEV_OK with *out when NCCL serves
 * devs; VDEV_ERR_INVALID_ARG for a bad list of devices; else
 * VDEV_ERR_UNSUPPORTED, no error set, the reason logged once where there is
 * one to give (logical devices of one GPU, no library, no room, a GPU that
 * has an NCCL communicator already). */
enum vdev_status vdev_coll_nccl_make(struct vdev_ldev *const *devs, int n,
                                     struct vdev_coll_comm **out);
/* One line on the collectives of the GPU backend, for `vdev devices`:
 * "NCCL 2.21.5 (libnccl.so.2) for ranks on distinct physical GPUs, one
 * communicator per GPU; vdev's ring for logical devices of one GPU and for
 * further communicators", or "vdev's ring (why not NCCL)".
 * Returns 1 when NCCL can serve. Loads the library. */
int vdev_coll_library_status(char *buf, size_t cap);

/* A public handle for a communicator that something else owns (a
 * strategy's): vdev_comm_free refuses it; vdev_coll_comm_unpublish kills it
 * before the owner frees the communicator. NULL with VDEV_ERR_OOM. */
vdev_comm_t *vdev_coll_comm_publish(struct vdev_coll_comm *c);
void vdev_coll_comm_unpublish(vdev_comm_t *h);

/* Runs a collective for rank on tensors (live tensors of this runtime, or
 * NULL entries when `status` says why): fills the buffers, checks each
 * tensor is on the rank's device (and f32 for an all-reduce; same dtype for
 * the rest), passes a local failure on to every rank, and brackets the
 * writes of the tensors it writes (all of an all-reduce, a broadcast's but
 * the root's, an all-gather's out) with vdev_tens_write_begin and _end, the
 * end whether the call succeeds or fails, even on another rank's failure
 * (none begins on a local one), and waits for the rank's stream after the
 * call when a tensor it read or wrote is exported as host memory
 * (vdev_tens_after_read, _after_write). status/why: a failure of the
 * caller's to pass on to every rank instead of running (VDEV_OK: none). For
 * all-gather, tensors[0] is in and tensors[1] out (n 2). */
enum vdev_status vdev_coll_tensors(struct vdev_coll_comm *c, int rank, enum vdev_coll_kind kind,
                                   enum vdev_reduce_op op, int root,
                                   struct vdev_tens *const *tensors, int n, const char *what,
                                   enum vdev_status status, const char *why, int *origin);

/* A kind's name in messages: "all-reduce", "broadcast", "all-gather", "barrier". */
const char *vdev_coll_kind_name(enum vdev_coll_kind k);

#endif /* VDEV_COLL_H */
