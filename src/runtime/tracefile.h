/* tracefile.h — what the two trace files of a process share: the profiler
 * trace (VDEV_TRACE_FILE, observe.c) and the allocation trace
 * (VDEV_ALLOC_TRACE, src/alloc/trace.c). A trace file is one process's: its
 * name may hold placeholders (%p the process id, %r the MPI rank, %% a %),
 * expanded at start-up; the file is locked while it is written, so a second
 * process given the same file is refused with a message that names the
 * writer and how to give each process its own file; and a child forked from
 * the writing process writes nothing to it, not even the buffered bytes that
 * stdio would flush at the child's exit. */
#ifndef VDEV_RUNTIME_TRACEFILE_H
#define VDEV_RUNTIME_TRACEFILE_H

#include "base/base.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

/* What the messages say of the placeholders (a printf format: %% doubled). */
#define VDEV_TRACEFILE_PLACEHOLDERS "%%p: the process id, %%r: the MPI rank, %%%%: a %%"

/* How the messages of one kind of trace file name it. */
struct vdev_tracefile_names {
    const char *var;    /* the variable, for the suggested fix: "VDEV_TRACE_FILE" */
    const char *prefix; /* put before the quoted file name: "VDEV_TRACE_FILE=" */
    const char *name;   /* what is too long, when it is: "VDEV_TRACE_FILE" */
};

/* The MPI rank the launcher gave this process (OMPI_COMM_WORLD_RANK,
 * PMIX_RANK or PMI_RANK, the first that is a number), or -1. */
long vdev_tracefile_launch_rank(void);

/* Opens the trace file `spec` names: its placeholders expanded into
 * path[cap] (what the messages of later failures name), then the file opened
 * without emptying it, locked (an open file description's lock, which
 * excludes this process's other trace too, and a record lock that names the
 * holder; held until it is closed, released by the kernel if the process
 * dies) and only then emptied. A file system without locks gets the file unlocked.
 * Failures: VDEV_ERR_CONFIG for a bad placeholder ("PREFIX\"SPEC\": \"%q\"
 * is not a placeholder (...)") or a name too long once expanded ("NAME is
 * too long: ..."); VDEV_ERR_IO with "PREFIX\"PATH\": process N is writing this
 * trace; give each process its own file, e.g. VAR=..." when another process
 * holds the lock, "PREFIX\"PATH\": this process writes it already, as its
 * other trace (...)" when this process does. Any other failure to open
 * returns VDEV_ERR_IO with errno set and no message, *open_failed set: the
 * caller says it its own way.
 * `was` (NULL: not wanted) gets the file's fstat from before it was emptied
 * (its st_size what an earlier trace left there; st_mode 0 when the file
 * could not be opened). */
enum vdev_status vdev_tracefile_open(const struct vdev_tracefile_names *names, const char *spec,
                                     char *path, size_t cap, FILE **out, int *open_failed,
                                     struct stat *was);

/* A trace file known to fork(). While it is watched, `lock` is held across
 * fork() (so the child's copy of the stream is consistent) and, in the
 * child, *forked is set and the stream *f (if any) loses its buffered bytes:
 * the child's exit has nothing of its parent's to flush. The owner writes
 * nothing where *forked is set, and closes with vdev_tracefile_drop. */
struct vdev_tracefile_fork {
    pthread_mutex_t *lock; /* guards *f and *forked */
    FILE **f;
    int *forked;
    struct vdev_tracefile_fork *next; /* the watched ones; guarded by the list's own lock */
};

/* Starts and stops watching w. Neither may be called with w->lock held. */
void vdev_tracefile_watch(struct vdev_tracefile_fork *w);
void vdev_tracefile_unwatch(struct vdev_tracefile_fork *w);

/* Closes a forked child's copy of its parent's trace without writing to it. */
void vdev_tracefile_drop(FILE *f);

#endif
