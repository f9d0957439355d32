/* trace.c — the allocation trace writer behind VDEV_ALLOC_TRACE=FILE.
 *
 * The format is the one `vdev replay` reads (DESIGN.md, "Memory"): text, one
 * event a line, '#' lines are comments. "a ID BYTES" allocates BYTES (as
 * requested, before rounding), "f ID" frees. The first line is
 * "# trace v1 source=vdev pid=N start=YYYY-mm-ddTHH:MM:SSZ ids=never-reused",
 * whose key=value fields replay keeps.
 *
 * One trace can be shared by every allocator of the process, so IDs come from
 * an atomic counter in the trace and each line is written under the trace's
 * own mutex with one fprintf; stdio buffers the lines and close flushes them.
 *
 * The file is one process's, as the profiler trace's is (VDEV_TRACE_FILE;
 * the rules are src/runtime/tracefile.c's): the name's placeholders (%p the
 * process id, %r the MPI rank, %% a %) are expanded when it is opened, the
 * file is locked while it is written, so a second process given the same
 * file is refused (naming the writer and how to give each process its own
 * file) and leaves the first one's trace whole, and a child forked from the
 * writing process writes nothing to it: neither its own events nor, at its
 * exit, the lines its copy of the stdio buffer holds.
 */
#define _GNU_SOURCE
#include "alloc/alloc.h"
#include "runtime/tracefile.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct vdev_alloc_trace {
    vdev_mutex_t mu; /* guards f and forked */
    FILE *f;
    int forked; /* this is a child forked from the writer: the trace is not its own */
    struct vdev_tracefile_fork fork;
    atomic_uint_fast64_t next_id; /* the ID of the next allocation */
    char path[PATH_MAX];          /* the file written (placeholders expanded), for messages */
};

enum vdev_status vdev_alloc_trace_open(const char *path, vdev_alloc_trace_t **out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_trace_open: out is NULL");
    *out = NULL;
    if (!path || !path[0])
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_trace_open: no path");
    struct vdev_alloc_trace *t = calloc(1, sizeof *t);
    if (!t)
        return vdev_error(VDEV_ERR_OOM, "vdev_alloc_trace_open: host out of memory");
    /* the runtime puts "VDEV_ALLOC_TRACE: " before these messages */
    static const struct vdev_tracefile_names names = {"VDEV_ALLOC_TRACE", "allocation trace ",
                                                      "the allocation trace's name"};
    int open_failed;
    enum vdev_status st = vdev_tracefile_open(&names, path, t->path, sizeof t->path, &t->f,
                                              &open_failed);
    if (open_failed)
        st = vdev_error(VDEV_ERR_IO, "cannot write allocation trace %s: %s", t->path,
                        strerror(errno));
    if (st != VDEV_OK) {
        free(t);
        return st;
    }
    vdev_mutex_init(&t->mu);
    atomic_init(&t->next_id, 0);
    /* watched before its first line: a child forked from here on holds
     * nothing of it that its exit would write */
    t->fork = (struct vdev_tracefile_fork){.lock = &t->mu.m, .f = &t->f, .forked = &t->forked};
    vdev_tracefile_watch(&t->fork);
    char when[32] = "unknown";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    vdev_mutex_lock(&t->mu);
    fprintf(t->f, "# trace v1 source=vdev pid=%ld start=%s ids=never-reused\n", (long)getpid(),
            when);
    vdev_mutex_unlock(&t->mu);
    *out = t;
    return VDEV_OK;
}

void vdev_alloc_trace_close(vdev_alloc_trace_t *t)
{
    if (!t)
        return;
    vdev_tracefile_unwatch(&t->fork);
    if (t->forked)
        vdev_tracefile_drop(t->f); /* the parent's: closed unwritten */
    else if (fclose(t->f) != 0)
        vdev_log_warning("VDEV_ALLOC_TRACE=\"%s\": write failed: %s (the trace is incomplete)",
                         t->path, strerror(errno));
    vdev_mutex_destroy(&t->mu);
    free(t);
}

uint64_t vdev_alloc_trace_alloc(vdev_alloc_trace_t *t, uint64_t bytes)
{
    uint64_t id = atomic_fetch_add_explicit(&t->next_id, 1, memory_order_relaxed);
    vdev_mutex_lock(&t->mu);
    if (!t->forked)
        fprintf(t->f, "a %llu %llu\n", (unsigned long long)id, (unsigned long long)bytes);
    vdev_mutex_unlock(&t->mu);
    return id;
}

void vdev_alloc_trace_free(vdev_alloc_trace_t *t, uint64_t id)
{
    vdev_mutex_lock(&t->mu);
    if (!t->forked)
        fprintf(t->f, "f %llu\n", (unsigned long long)id);
    vdev_mutex_unlock(&t->mu);
}

void vdev_alloc_trace_failed(vdev_alloc_trace_t *t, uint64_t bytes)
{
    vdev_mutex_lock(&t->mu);
    if (!t->forked)
        fprintf(t->f, "# oom %llu\n", (unsigned long long)bytes);
    vdev_mutex_unlock(&t->mu);
}
