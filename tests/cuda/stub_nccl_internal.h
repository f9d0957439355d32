/* stub_nccl_internal.h — what the two files of the stand-in NCCL share
 * (stub_nccl.c: the driver's functions, communicators, control;
 * stub_nccl_coll.c: collectives and groups): its types, its state under one
 * lock, and the helpers each file gives the other. Not for tests: they use
 * stub_nccl.h. */
#ifndef VDEV_STUB_NCCL_INTERNAL_H
#define VDEV_STUB_NCCL_INTERNAL_H

#include "stub_cuda.h"
#include "stub_nccl.h"

#include "backend/cuda/nccl_abi.h"

#include <pthread.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_RANKS 8
#define MAX_GROUP 64
#define WAIT_S 60
#define COMM_MAGIC 0x4e43434cu

/* NCCL's functions, as the plugin declares them (nccl_abi.h's types). */
EXPORT ncclResult_t ncclGetVersion(int *version);
EXPORT const char *ncclGetErrorString(ncclResult_t r);
EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t *config);
EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c);
EXPORT ncclResult_t ncclCommAbort(ncclComm_t c);
EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e);
EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                  vdev_nccl_stream_t stream);
EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t type, int root, ncclComm_t c,
                                  vdev_nccl_stream_t stream);
EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t type, ncclComm_t c, vdev_nccl_stream_t stream);
EXPORT ncclResult_t ncclGroupStart(void);
EXPORT ncclResult_t ncclGroupEnd(void);

/* The stand-in driver's functions for libraries (driver_ok fills it). */
struct stub_nccl_drv {
    vdev_stub_lib_access_fn access;
    vdev_stub_lib_join_fn join;
    vdev_stub_lib_take_fn take;
    vdev_stub_lib_stream_dev_fn stream_dev;
    vdev_stub_lib_violation_fn violation;
    vdev_stub_lib_current_dev_fn current_dev;
};

enum kind { ALLREDUCE, BROADCAST, ALLGATHER };
extern const char *const kind_name[];

struct op {
    enum kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t red;
    int root;
    void *stream;
    struct ncclComm *comm;
};

struct slot {
    uint64_t seq;              /* the call it serves */
    int posted, left;
    int done;
    ncclResult_t result;
    struct op ops[MAX_RANKS];
};

struct clique {
    int n, alive, aborted;
    int devs[MAX_RANKS];
    struct slot slot[2];
    pthread_cond_t cond;
};

struct ncclComm {
    unsigned magic;
    struct clique *q;          /* NULL until its group's end made it ready */
    int rank, nranks, dev;
    ncclUniqueId id;
    uint64_t seq;              /* its next collective */
    int connected;             /* its buffers are taken (when ready, or its first collective) */
    int aborted;               /* its abort flag: its waits end (ncclCommAbort) */
    int queued;                /* its calls in threads' groups not yet ended */
    int jobs;                  /* its calls handed to work threads, not yet done */
    int polling;               /* threads inside ncclCommGetAsyncError with it */
    int init_polls;            /* polls that still read ncclInProgress after it was made ready */
    int stuck;                 /* its init waits for peers that never came */
    ncclResult_t async;        /* the outcome of its last work */
};

struct stub_nccl_state {
    struct vdev_stub_nccl_config cfg;
    int comms, cliques;
    int waiting;               /* ranks inside a collective, waiting */
    int ending;                /* threads sleeping in ncclGroupEnd (group_end_delay_ms) */
    uint64_t collectives, groups;
    struct {
        char name[32];
        uint64_t n;
    } callc[32];
    struct {
        char name[32];
        int skip, result, live;
    } faults[8];
    char last[160];
};

struct stub_nccl_group {
    int depth;
    int n, ninit;
    struct op ops[MAX_GROUP];
    struct ncclComm *inits[MAX_RANKS * 2];
};


/* The state (stub_nccl.c), all under `lock` but the thread's own group. */
extern struct stub_nccl_drv drv;
extern pthread_mutex_t lock;
extern struct stub_nccl_state st;
extern _Thread_local struct stub_nccl_group grp; /* the calling thread's group */
extern pthread_cond_t jobs_done;                 /* a work thread ended */

/* stub_nccl.c */
int driver_ok(void);
void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int enter(const char *fn, ncclResult_t *r);
size_t type_size(ncclDataType_t t);
int comm_ok(struct ncclComm *c);
void comm_put(struct ncclComm *c);
void make_ready(struct ncclComm **cs, int n);

#define ENTER(name)                                                                                \
    ncclResult_t r_;                                                                               \
    pthread_mutex_lock(&lock);                                                                     \
    if (enter(name, &r_)) {                                                                        \
        pthread_mutex_unlock(&lock);                                                               \
        return r_;                                                                                 \
    }                                                                                              \
    pthread_mutex_unlock(&lock)

#endif /* VDEV_STUB_NCCL_INTERNAL_H */
