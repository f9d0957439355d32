/* strategy.h — private to src/dist/: the mirrored strategy's state, shared by
 * mirrored.c (the strategy: its threads, runs, reduce, memory) and
 * replica.c (what a step function calls through its replica context).
 *
 * Each replica has a persistent host thread. A run publishes the step
 * function under the strategy's lock with a new generation number; every
 * thread runs it once inside a device scope of its replica's device and a
 * tensor scope, records how it ended, and counts itself done. A replica whose
 * function fails aborts the strategy's communicator, so the collectives its
 * peers wait in fail at once; one that finishes tells the communicator it
 * left, so a peer waiting for it in a call it never makes fails at once too.
 * The communicator is reset before every run (every thread is idle then). */
#ifndef VDEV_DIST_STRATEGY_H
#define VDEV_DIST_STRATEGY_H

#include "coll/coll.h"

struct vdev_strat;

/* One replica: its device, its thread, and how its part of the current run
 * went. */
struct vdev_rep {
    struct vdev_strat *s;
    int id;                         /* its rank in the communicator: local index */
    /* The optimizer its vdev_replica_apply_gradients passes, written before
     * that call's first collective and read by the other replicas after it
     * (each replica needs its own: the slots are per replica). */
    _Atomic(uintptr_t) apply_opt;
    int gid;                        /* replica_id_in_sync_group: first + id */
    struct vdev_ldev *dev;
    vdev_replica_context_t *ctx;    /* its public handle */
    pthread_t thread;
    int started;                    /* the thread runs (joined at free) */
    _Atomic uintptr_t thread_id;    /* vdev_thread_id() of the thread */
    _Atomic int active;             /* inside the step function */
    /* this run (written by the replica's thread; read by the caller after
     * the run, under the strategy's lock) */
    enum vdev_status st;
    char msg[512];
    int derived;                    /* failed because another replica did */
    int remote;                     /* ... a replica of another worker, whose message
                                       names it first (no prefix of this replica's) */
    struct vdev_tens *result;       /* vdev_replica_return, out of every scope */
    int64_t global_batch;           /* rows of the last global batch split, 0 none */
};

struct vdev_strat {
    int n;                          /* this process's replicas */
    int n_global, first;            /* replicas of every worker; the global id of reps[0] */
    int multi;                      /* a multi-worker strategy: comm is hierarchical */
    struct vdev_rep *reps;          /* n */
    struct vdev_coll_comm *comm;
    vdev_comm_t *comm_handle;       /* published: vdev_strategy_communicator */
    uint32_t rgen;                  /* runtime generation it was made under */
    int metrics_id;                 /* runtime/replicas.h */
    int pins;                       /* calls under way (mirrored.c's pin_lock) */
    /* The split of the current run: the proportions as they were when it
     * started (run_uneven 0: even), written by the run's caller while every
     * replica thread is idle and read by them during the run, so a later
     * vdev_strategy_set_batch_proportions changes only later runs. */
    int run_uneven;
    double run_prop[VDEV_MAX_REPLICAS];
    pthread_mutex_t run_lock;       /* one run at a time */
    pthread_mutex_t lock;           /* the fields below */
    double *proportions;            /* n_global, or NULL: even (set_batch_proportions) */
    pthread_cond_t go, done;
    uint64_t gen;                   /* runs published */
    int n_done;
    int stop;
    vdev_replica_fn fn;
    void *user;
};

/* The replica behind a context handle for `fn`, usable only on its thread
 * during a run; NULL with VDEV_ERR_INVALID_ARG otherwise (replica.c). */
struct vdev_rep *vdev_rep_of(const vdev_replica_context_t *ctx, const char *fn);
/* A new public handle for a replica's context, and its release. */
vdev_replica_context_t *vdev_rep_publish(struct vdev_rep *r);
void vdev_rep_unpublish(vdev_replica_context_t *h);

/* Rows [*off, *off + *rows) of a global batch of B rows for the replica of
 * global id g, split as the current run's proportions say (on a replica
 * thread during a run). */
void vdev_strat_split(const struct vdev_strat *s, int g, int64_t B, int64_t *off, int64_t *rows);

/* Makes a strategy over n local devices served by comm (taken over: freed
 * with the strategy, or on failure). mirrored.c; multiworker.c passes a
 * hierarchical communicator. */
enum vdev_status vdev_strat_make(struct vdev_ldev *const *devs, int n, struct vdev_coll_comm *comm,
                                 vdev_strategy_t **out);

/* Every logical GPU, else every logical CPU (TensorFlow's
 * all_local_devices), at most VDEV_MAX_REPLICAS, into devs; their number. */
int vdev_strat_default_devices(struct vdev_ldev **devs);

/* The name of replica r in messages: its device's long name for a
 * multi-worker strategy ("/job:worker/replica:0/task:1/device:GPU:0"), else
 * its short name. */
const char *vdev_rep_device_name(const struct vdev_rep *r);

#endif /* VDEV_DIST_STRATEGY_H */
