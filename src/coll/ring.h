/* ring.h — private to src/coll/: the state of vdev's ring implementation,
 * shared by its two halves: ring_sync.c (calls, rendezvous, waits between
 * ranks, failures, events) and ring.c (the schedules that move the data).
 *
 * Every rank's thread enters a call through ring_run (ring.c): it checks and
 * posts its descriptor (ring_enter), waits for every rank's post and the
 * verdict (ring_enter again), then runs the call's schedule. Ranks order
 * their work through two kinds of host-side signals, both under the ring's
 * one mutex: a progress counter per rank (slices queued on its stream so
 * far: a neighbour copies a slice only once it is queued) and events
 * published per rank (a rank's stream waits on its neighbour's stream before
 * it overwrites what the neighbour reads). Copies capture the source stream
 * when they are queued (backend.h), so a copy queued after its producer's
 * progress was published reads the produced data. */
#ifndef VDEV_COLL_RING_H
#define VDEV_COLL_RING_H

#include "coll/coll.h"

#define RING_SLICE_BYTES (1u << 20) /* the unit of pipelining; also the staging size */
#define RING_WHY 512                /* bytes of a message */
#define RING_REASON 320             /* bytes of a reason inside a message */

/* A rank's part of a call, copied at its entry so that other ranks may read
 * it until everyone has left the call. */
struct ring_post {
    enum vdev_coll_kind kind;
    enum vdev_reduce_op op;
    int root;
    int n_bufs;
    struct vdev_coll_buf *bufs; /* n_bufs (owned) */
    uint64_t *prefix;           /* n_bufs + 1 flat offsets, in elements (owned with bufs) */
    enum vdev_status status;
    char why[RING_REASON];
};

/* One call in flight. Two calls can be: a rank that finished call k may enter
 * k + 1 while another still finishes k, never k + 2 (k + 1's rendezvous needs
 * everyone out of k), so the slots alternate. */
struct ring_slot {
    uint64_t call;              /* the call it serves */
    enum vdev_coll_kind kind;   /* as rank 0 called it (the first to arrive, until all have) */
    int in_use;
    int arrived;                /* ranks posted */
    unsigned char *posted;      /* n */
    struct ring_post *post;     /* n */
    int verdict_ready;
    enum vdev_status verdict;
    int verdict_origin;
    char verdict_msg[RING_WHY];
    int in_schedule;            /* ranks running the schedule (set to n by the verdict) */
    int failed_call;            /* the communicator had failed when the last rank left the
                                   schedule: the call's outcome, the same for every rank */
    uint64_t *progress;         /* n: slices each rank has queued */
    void **ev_phase;            /* n: after its reduce-scatter (NULL: not yet) */
    void **ev_end;              /* n: after everything it queued */
    unsigned char *ev_phase_set, *ev_end_set;
};

struct ring {
    const struct vdev_coll_comm *comm;
    int n;
    pthread_mutex_t lock;
    pthread_cond_t cond;        /* on CLOCK_MONOTONIC; broadcast on every change */
    uint64_t *next_call;        /* n: calls each rank has entered */
    unsigned char *departed;    /* n: ranks that left (ops->leave) */
    struct ring_slot slot[2];
    int failed;                 /* the communicator is spent (until reset) */
    enum vdev_status fail_code;
    int fail_origin;
    char fail_msg[RING_WHY];
};

/* ---- ring_sync.c ---- */

enum vdev_status vdev_ring_create(const struct vdev_coll_comm *comm, void **ctx);
void vdev_ring_destroy(void *ctx);
void vdev_ring_reset(void *ctx);
void vdev_ring_abort(void *ctx, int rank, enum vdev_status code, const char *why);
void vdev_ring_leave(void *ctx, int rank);

/* Posts rank's call (copying the descriptor) and waits for every rank and
 * the verdict. VDEV_OK: *slot is the call's slot and the schedule may run
 * (in_schedule counts this rank). Else the call failed on every rank (error
 * set, *origin the rank to blame), and the rank has nothing to undo. */
enum vdev_status vdev_ring_enter(struct ring *R, int rank, const struct vdev_coll_call *call,
                                 struct ring_slot **slot, int *origin);

/* Waits until rank `q`'s progress in s reaches `want`. Lock not held. */
enum vdev_status vdev_ring_wait_progress(struct ring *R, struct ring_slot *s, int rank, int q,
                                         uint64_t want, int *origin);
/* Publishes rank's progress. Lock not held. */
void vdev_ring_publish_progress(struct ring *R, struct ring_slot *s, int rank, uint64_t done);
/* Records an event on rank's stream after what it queued and publishes it as
 * its end-of-phase (phase 0) or end (phase 1) event. */
enum vdev_status vdev_ring_publish_event(struct ring *R, struct ring_slot *s, int rank, int phase,
                                         int *origin);
/* Waits until rank q has published its phase event and makes rank's stream
 * wait on it. */
enum vdev_status vdev_ring_follow_event(struct ring *R, struct ring_slot *s, int rank, int q,
                                        int phase, int *origin);
/* Leaves the schedule and waits until every rank has: a rank's own failure
 * (st != VDEV_OK, error set) first marks the communicator failed (unless it
 * is already). The call failed when the communicator had failed by the time
 * the last rank left (the outcome every rank returns); then every rank waits
 * for the streams of every rank to finish, so nothing touches its buffers
 * afterwards, and returns the communicator's error. */
enum vdev_status vdev_ring_leave_schedule(struct ring *R, struct ring_slot *s, int rank,
                                          enum vdev_status st, int *origin);

/* Test hook (fault injection): the nth device-to-device copy (1: the next)
 * that rank `rank` queues in a collective fails as a backend error would
 * (VDEV_ERR_BACKEND), on any communicator; nth 0 disarms. Thread-safe. */
void vdev_coll_ring_fail_copy(int rank, int nth);

/* "<kind> (call K)" of a slot, into buf. */
const char *vdev_ring_call_name(const struct ring_slot *s, char *buf, size_t cap);

#endif /* VDEV_COLL_RING_H */
