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
 */
#define _GNU_SOURCE
#include "alloc/alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct vdev_alloc_trace {
    vdev_mutex_t mu;          /* guards f */
    FILE *f;
    atomic_uint_fast64_t next_id; /* the ID of the next allocation */
    char path[];                  /* for the message of a failed write */
};

enum vdev_status vdev_alloc_trace_open(const char *path, vdev_alloc_trace_t **out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_trace_open: out is NULL");
    *out = NULL;
    if (!path || !path[0])
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_trace_open: no path");
    size_t len = strlen(path) + 1;
    struct vdev_alloc_trace *t = calloc(1, sizeof *t + len);
    if (!t)
        return vdev_error(VDEV_ERR_OOM, "vdev_alloc_trace_open: host out of memory");
    t->f = fopen(path, "w");
    if (!t->f) {
        int e = errno;
        free(t);
        return vdev_error(VDEV_ERR_IO, "cannot write allocation trace %s: %s", path, strerror(e));
    }
    memcpy(t->path, path, len);
    vdev_mutex_init(&t->mu);
    atomic_init(&t->next_id, 0);
    char when[32] = "unknown";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(t->f, "# trace v1 source=vdev pid=%ld start=%s ids=never-reused\n", (long)getpid(),
            when);
    *out = t;
    return VDEV_OK;
}

void vdev_alloc_trace_close(vdev_alloc_trace_t *t)
{
    if (!t)
        return;
    if (fclose(t->f) != 0)
        vdev_log_warning("VDEV_ALLOC_TRACE=\"%s\": write failed: %s (the trace is incomplete)",
                         t->path, strerror(errno));
    vdev_mutex_destroy(&t->mu);
    free(t);
}

uint64_t vdev_alloc_trace_alloc(vdev_alloc_trace_t *t, uint64_t bytes)
{
    uint64_t id = atomic_fetch_add_explicit(&t->next_id, 1, memory_order_relaxed);
    vdev_mutex_lock(&t->mu);
    fprintf(t->f, "a %llu %llu\n", (unsigned long long)id, (unsigned long long)bytes);
    vdev_mutex_unlock(&t->mu);
    return id;
}

void vdev_alloc_trace_free(vdev_alloc_trace_t *t, uint64_t id)
{
    vdev_mutex_lock(&t->mu);
    fprintf(t->f, "f %llu\n", (unsigned long long)id);
    vdev_mutex_unlock(&t->mu);
}

void vdev_alloc_trace_failed(vdev_alloc_trace_t *t, uint64_t bytes)
{
    vdev_mutex_lock(&t->mu);
    fprintf(t->f, "# oom %llu\n", (unsigned long long)bytes);
    vdev_mutex_unlock(&t->mu);
}
