/* ps.h — private to the parameter-server strategy (vdev/multiworker.h):
 * its state, the partition of the variables, and the messages, shared by
 * ps.c (making the strategy, the variables, the chief's calls) and
 * ps_serve.c (the servers' and workers' loops, what a step function calls).
 *
 * Processes and messages. Every process of the job is one task: the chief
 * (the coordinator), workers and ps tasks (servers). All messages are MPI
 * point-to-point on the strategy's own communicator, host memory only:
 *   chief  -> worker  PS_RUN    run step (id, argument); id -1: stop
 *   worker -> chief   PS_DONE   how step id went: status, message, value
 *   worker -> server  PS_PULL   the values of the server's shards, for step
 *                               seq (-1: the chief's, once the server has
 *                               applied the first arg steps: those the chief
 *                               knows finished, so a pull after join sees
 *                               every push)
 *   server -> worker  PS_VALUES header (the server's status), then its values
 *   worker -> server  PS_PUSH   header (seq, skip), then the gradients of the
 *                               server's shards (none when skip: the step
 *                               pushes nothing, but the server counts it done)
 *   chief  -> server  PS_INIT   the initial values of its shards
 *   chief  -> all     PS_STOP   stop serving (arg: the steps scheduled; a
 *                               server first counts every one of them, so no
 *                               push is left unreceived)
 * Messages between two processes arrive in the order they were sent (MPI's
 * rule for one sender and one communicator), but nothing orders messages of
 * different senders: a worker's push may reach a server after the chief,
 * told by the worker that the step is done, asks that server for values;
 * hence the counts that PS_PULL and PS_STOP carry. The chief's initial
 * values are received inside add_variables, before any pull can come.
 *
 * Partition: the variables' elements, laid end to end in their order, are
 * cut into num_ps equal runs (server s: [s E / P, (s + 1) E / P)); a server's
 * shards are the pieces of variables inside its run, so every server holds
 * the same bytes within one element. The optimizer is elementwise, so
 * applying it shard by shard is applying it to the variables.
 *
 * Staleness: a server counts the steps whose push it has received, and
 * answers the pull of step seq once every step before seq - max_staleness
 * is counted (at once when max_staleness is -1, or for the chief). */
#ifndef VDEV_DIST_PS_H
#define VDEV_DIST_PS_H

#include "coll/mpi_world.h"
#include "config/config.h"
#include "tensor/tensor.h"

enum { PS_RUN = 31, PS_DONE, PS_PULL, PS_VALUES, PS_PUSH, PS_INIT, PS_STOP };
#define PS_TAG_MAKE 41 /* exchanges of vdev_ps_strategy_new and add_variables */
#define PS_TAG_VARS 42

#define PS_MSG 400

/* A control message (every kind but the data that follows some). */
struct ps_msg {
    int64_t id, arg, seq;       /* step id, its argument, its sequence number */
    int32_t status, flag;       /* a status; PS_PUSH: skip; PS_DONE: pushed */
    int32_t has_value, pad;
    float value;
    char msg[PS_MSG];
};

/* A piece of one variable that one server holds. */
struct ps_shard {
    int var;                    /* the variable's index */
    uint64_t off, count;        /* elements of the variable */
    uint64_t at;                /* where it lies in its server's values, in elements */
};

/* A step as the chief knows it. */
struct ps_step {
    int64_t arg;
    int worker;                 /* worker index running it */
    int done, pushed, has_value;
    enum vdev_status status;
    float value;
    char msg[PS_MSG];
};

struct vdev_ps {
    struct vdev_ps_options o;
    char worker_dev[64], server_dev[64];
    uint32_t rgen;              /* the runtime generation it was made under */
    vdev_mpi_comm_t *mpi;
    int spent;                  /* a wait failed: MPI is spent */
    int me, n_procs;            /* MPI rank and size */
    int job, index;             /* this process's task */
    int chief;                  /* the chief's rank */
    int n_workers, n_ps;
    int *worker_rank, *ps_rank; /* the rank of each worker / server, by index */
    char (*task)[64];           /* each rank's task name */
    /* the variables (after add_variables) */
    int n_vars;
    vdev_tensor_t **vars;       /* the caller's handles */
    int64_t *numel;
    uint64_t total;             /* elements */
    struct ps_shard *shards;    /* every server's, server by server */
    int *first_shard, *n_shards_of; /* per server */
    uint64_t *elems_of;         /* per server */
    void *buf;                  /* room for a header and the largest server's values */
    /* a server */
    vdev_tensor_t **shard_vars; /* its shards, as variables on server_dev */
    vdev_optimizer_t *opt;
    uint64_t updates;           /* pushes applied */
    enum vdev_status failed;    /* a push it could not apply: every pull gets this */
    char fail_msg[PS_MSG];
    int64_t counted;            /* every step below is counted done */
    unsigned char *done_above;  /* steps counted at or above `counted` (a ring of marks) */
    int64_t done_cap;
    int *wait_src;              /* pulls waiting: source, step, steps needed counted */
    int64_t *wait_seq, *wait_need;
    int64_t stop_at;            /* a stop came: serve until this many steps are counted */
    int n_wait, wait_cap;
    /* the chief */
    struct ps_step *steps;
    int64_t n_steps, steps_cap;
    int64_t *busy;              /* per worker: the step it runs, -1 idle */
    int64_t outstanding;
    int64_t first_error;        /* the first step to fail since a join or schedule last
                                   returned an error (-1: none) */
    int64_t done_prefix;        /* steps 0..done_prefix-1 have finished */
    uint64_t pushes;
};

/* The worker's context of a step function. */
struct vdev_ps_worker {
    struct vdev_ps *ps;
    uintptr_t thread;           /* vdev_thread_id() of the step's thread */
    int active;                 /* inside the step function */
    int pushed, has_value;
    float value;
    int64_t seq;
};

/* ---- ps.c ---- */

/* The strategy behind a handle for `fn`, or NULL (VDEV_ERR_INVALID_ARG). */
struct vdev_ps *vdev_ps_of(const vdev_ps_strategy_t *h, const char *fn);
/* A failure of a message: spends MPI for the job, sets the error. */
enum vdev_status vdev_ps_mpi_failed(struct vdev_ps *ps, const char *what);
/* The header plus the values of server s, in ps->buf: bytes. */
uint64_t vdev_ps_msg_bytes(const struct vdev_ps *ps, int s);
/* Copies server s's values (host, in ps->buf after a header) into the
 * tensors vars (the variables' copies: the chief's or a worker's). */
enum vdev_status vdev_ps_scatter(struct vdev_ps *ps, int s, const float *vals);

/* ---- ps_serve.c ---- */

/* Pulls every server's values for step seq into this process's variables
 * (a worker's; the chief's: seq -1, once every server has counted the first
 * `need` steps). */
enum vdev_status vdev_ps_pull_all(struct vdev_ps *ps, int64_t seq, int64_t need);
/* The server's loop, and the worker's. */
enum vdev_status vdev_ps_serve_server(struct vdev_ps *ps);
enum vdev_status vdev_ps_serve_worker(struct vdev_ps *ps, vdev_ps_step_fn fn, void *user);

#endif /* VDEV_DIST_PS_H */
