/* ranks.h — a helper for tests of collectives: runs one host thread per rank
 * (as NCCL and MPI ranks run) and collects what each rank's call returned,
 * its message, and whatever the rank's function wrote into its job, so that
 * the main thread checks everything afterwards (the CHECK counters are not
 * thread-safe). */
#ifndef VDEV_TESTS_RANKS_H
#define VDEV_TESTS_RANKS_H

#include "check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RANKS_MAX 16

struct rank_job {
    int rank, n;
    vdev_comm_t *comm;
    void *arg;                 /* the test's own data */
    vdev_tensor_t *t[4];       /* the rank's tensors */
    enum vdev_status st;       /* what the rank's call returned */
    char msg[512];             /* vdev_last_error() after it */
};

typedef void (*rank_fn)(struct rank_job *job);

struct rank_thread {
    rank_fn fn;
    struct rank_job *job;
};

static void *rank_main(void *v)
{
    struct rank_thread *t = v;
    t->fn(t->job);
    return NULL;
}

/* Runs fn(&jobs[r]) on n threads at once and waits for them. */
static inline void run_ranks(int n, rank_fn fn, struct rank_job *jobs)
{
    pthread_t th[RANKS_MAX];
    struct rank_thread rt[RANKS_MAX];
    for (int r = 0; r < n; r++) {
        rt[r].fn = fn;
        rt[r].job = &jobs[r];
        if (pthread_create(&th[r], NULL, rank_main, &rt[r]) != 0) {
            fprintf(stderr, "cannot start a thread\n");
            exit(1);
        }
    }
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
}

/* Records a call's status and message in the job. */
static inline void rank_record(struct rank_job *j, enum vdev_status st)
{
    j->st = st;
    snprintf(j->msg, sizeof j->msg, "%s", st == VDEV_OK ? "" : vdev_last_error());
}

/* Every rank returned `code`, with a message containing `sub` (NULL: any),
 * and the same message on every rank. */
#define CHECK_RANKS(jobs, n, code, sub) check_ranks(__FILE__, __LINE__, (jobs), (n), (code), (sub))

static inline void check_ranks(const char *file, int line, const struct rank_job *jobs, int n,
                               enum vdev_status code, const char *sub)
{
    for (int r = 0; r < n; r++) {
        if (jobs[r].st != code)
            check_fail(file, line, "rank %d returned %s, expected %s (%s)", r,
                       vdev_status_str(jobs[r].st), vdev_status_str(code), jobs[r].msg);
        else if (sub && !strstr(jobs[r].msg, sub))
            check_fail(file, line, "rank %d: message \"%s\" lacks \"%s\"", r, jobs[r].msg, sub);
        else if (strcmp(jobs[r].msg, jobs[0].msg) != 0)
            check_fail(file, line, "rank %d says \"%s\", rank 0 \"%s\"", r, jobs[r].msg,
                       jobs[0].msg);
        else
            check_passed++;
    }
}

#endif
