/* hier_impl.h — private to the hierarchical communicator (hier.h): its
 * state, shared by hier.c (making it, the agreement of every call, the end
 * of a run) and hier_data.c (the calls themselves: the local stages on the
 * ring, the MPI stage between them).
 *
 * Records go over MPI as raw bytes: every process of a job runs the same
 * build, so the layout agrees; each is zeroed before it is filled, so no
 * padding byte is left unset. */
#ifndef VDEV_COLL_HIER_IMPL_H
#define VDEV_COLL_HIER_IMPL_H

#include "coll/hier.h"
#include "coll/mpi_world.h"

#define HIER_WHY 512   /* bytes of a reason a record carries */
#define HIER_MSG 1024  /* bytes of a message made of reasons */
#define HIER_TASK 96   /* bytes of a task's name */
#define HIER_SHAPES 6  /* buffers whose shapes a record carries for messages */
#define HIER_WHAT 48   /* bytes of the name of the API call behind a collective */

/* The tags of the communicator's messages. */
#define HIER_TAG_MAKE 11
#define HIER_TAG_CALL 12

/* What a worker is doing when it exchanges a record. */
enum { HIER_MAKE = 1, HIER_CALL, HIER_DONE };
/* The kind of a call of the caller's thread (vdev_coll_hier_host_all_reduce). */
#define HIER_KIND_HOST VDEV_COLL_KIND_COUNT

struct hier_shape {
    int32_t ndim, dtype;
    int64_t dim[VDEV_MAX_DIMS];
};

/* A call as one local rank or one worker makes it. */
struct hier_desc {
    int32_t kind, op, root, n_bufs;
    int32_t status, n_shapes;
    uint64_t total;                 /* elements of the compared buffers */
    uint64_t digest;                /* of their dtypes and shapes */
    struct hier_shape shape[HIER_SHAPES];
    char what[HIER_WHAT];           /* the API call: "vdev_replica_batch" ("" unknown) */
    char why[HIER_WHY];             /* status != VDEV_OK: why */
};

/* One worker's part of an exchange. */
struct hier_record {
    int32_t state;                  /* HIER_MAKE, HIER_CALL, HIER_DONE */
    int32_t derived;                /* HIER_DONE: the run failed only because another did */
    int32_t n_local;                /* HIER_MAKE: its local ranks */
    int32_t pad;
    uint64_t call;                  /* its calls so far */
    struct hier_desc d;
    char task[HIER_TASK];
    char cluster[HIER_TASK];        /* HIER_MAKE: the cluster it reads, as messages name it */
};

struct hier {
    struct vdev_coll_comm *comm;    /* the communicator it serves */
    struct vdev_coll_comm *local;   /* the ring over the same devices */
    vdev_mpi_comm_t *mpi;
    int n;                          /* local ranks */
    int me, n_workers, n_global;
    int *first, *count;             /* n_workers each */
    char (*task)[HIER_TASK];        /* n_workers */
    struct hier_record *records;    /* n_workers: the last exchange's */
    unsigned char *arrived;         /* n_workers */
    void *host;                     /* the leader's host buffer for MPI */
    uint64_t host_cap;
    pthread_mutex_t lock;           /* the fields below */
    struct hier_desc *posted;       /* n: each local rank's current call */
    uint64_t calls;                 /* calls the leader has agreed on */
    enum vdev_status verdict;       /* the current call's, set by the leader */
    int verdict_origin;
    char verdict_msg[HIER_MSG];
    int spent;                      /* MPI failed or a deadline passed: for good */
    enum vdev_status spent_code;
    char spent_msg[HIER_MSG];
};

/* The call as messages name it, into buf: the API call the program made
 * with the collective behind it, "vdev_replica_batch (all-gather, call K)",
 * or "<kind> (call K)" when what is NULL or "". */
const char *vdev_hier_call_name(int kind, const char *what, uint64_t call, char *buf,
                                size_t cap);
/* Worker w as messages name it, into buf: "worker 1
 * (/job:worker/replica:0/task:1)" when w is worker task w, else "process 0
 * (/job:chief/replica:0/task:0)" (in a cluster with a chief, MPI rank w is
 * not worker task w). */
const char *vdev_hier_who(const struct hier *H, int w, char *buf, size_t cap);
/* The descriptor of a call (zeroed first). */
void vdev_hier_desc_fill(struct hier_desc *d, const struct vdev_coll_call *c);

/* The leader's agreement on the current call, after the local ranks have
 * met (local: how that went, with its message and origin): checks the
 * descriptors of local ranks 0..n_local-1, exchanges records with the other workers and sets the
 * verdict. Returns 1 when the data may move (the verdict is good). */
int vdev_hier_agree(struct hier *H, int n_local, enum vdev_status local, const char *local_msg,
                    int local_origin);
/* The hierarchical communicator behind c, NULL for another kind. */
struct hier *vdev_hier_of(const struct vdev_coll_comm *c);
/* Spends the communicator (and MPI for the job) with code and message, and
 * fails the local ranks' ring calls at once. Idempotent. */
void vdev_hier_spend(struct hier *H, enum vdev_status code, const char *msg);
/* VDEV_OK, or the spent communicator's error (origin -1). */
enum vdev_status vdev_hier_check_spent(struct hier *H, int *origin);

/* A call of the local ring for rank (status/why: its own failure). */
enum vdev_status vdev_hier_local(struct hier *H, int rank, enum vdev_coll_kind kind,
                                 enum vdev_reduce_op op, int root,
                                 const struct vdev_coll_buf *bufs, int n_bufs,
                                 enum vdev_status status, const char *why, int *origin);

/* ---- hier_data.c ---- */

/* The call on rank after a good verdict: the local and MPI stages. */
enum vdev_status vdev_hier_data(struct hier *H, int rank, const struct vdev_coll_call *call,
                                int *origin);

#endif /* VDEV_COLL_HIER_IMPL_H */
