/* trace.c — the allocation trace writer behind VDEV_ALLOC_TRACE=FILE.
 *
 * The format is the one `vdev replay` reads (DESIGN.md, "Memory"): text, one
 * event a line, '#' lines are comments. "a ID BYTES" allocates BYTES (as
 * requested, before rounding), "f ID" frees. The first line is
 * "# trace v1 source=vdev pid=N start=YYYY-mm-ddTHH:MM:SSZ ids=never-reused",
 * whose key=value fields replay keeps.
 *
 * One trace can be shared by every allocator of the process, so IDs come from
 * an atomic counter in the trace and each line is formatted under the trace's
 * own mutex into the trace's buffer, which goes to the file (unbuffered
 * stdio: one write) only as whole lines, when the next line would not fit
 * and at close: a run that ends without closing it (a crash, abort(), a
 * signal) leaves a trace of whole lines. vdev_alloc_trace_flush_all writes
 * every open trace's buffer: at exit, and in `vdev demo` when interrupted.
 *
 * The file is one process's, as the profiler trace's is (VDEV_TRACE_FILE;
 * the rules are src/runtime/tracefile.c's): the name's placeholders (%p the
 * process id, %r the MPI rank, %% a %) are expanded when it is opened, the
 * file is locked while it is written, so a second process given the same
 * file is refused (naming the writer and how to give each process its own
 * file) and leaves the first one's trace whole, and a child forked from the
 * writing process writes nothing to it: neither its own events nor, at its
 * exit, the lines its copy of the stdio buffer holds. Each start-up empties
 * the file again; where that replaces this process's own earlier trace (the
 * same file, not empty) standard error says so, as for VDEV_TRACE_FILE.
 */
#define _GNU_SOURCE
#include "alloc/alloc.h"
#include "runtime/tracefile.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct vdev_alloc_trace {
    vdev_mutex_t mu; /* guards f and forked */
    FILE *f;
    int forked; /* this is a child forked from the writer: the trace is not its own */
    struct vdev_tracefile_fork fork;
    atomic_uint_fast64_t next_id; /* the ID of the next allocation */
    char path[PATH_MAX];          /* the file written (placeholders expanded), for messages */
    struct vdev_alloc_trace *next; /* the open traces (flush_all); guarded by open_lock */
    size_t n;                      /* bytes in buf: whole lines */
    char buf[16384];
};

/* The traces open in the process, for vdev_alloc_trace_flush_all. Taken
 * before a trace's own mutex. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vdev_alloc_trace *open_list;
static int exit_hook; /* vdev_alloc_trace_flush_all runs at exit; guarded by open_lock */
/* The regular file this process's last trace went to (all 0: none), so that
 * a start-up that empties it again says so; guarded by open_lock. */
static dev_t last_dev;
static ino_t last_ino;
static pid_t last_pid;

/* Writes t's whole lines to its file. Under t->mu, not forked. */
static void put_buffer(struct vdev_alloc_trace *t)
{
    if (t->n && fwrite(t->buf, 1, t->n, t->f) != t->n)
        clearerr(t->f); /* close reports it: the stream's error flag is lost by then */
    t->n = 0;
}

/* Appends one line (a record, '\n' included, len bytes) to t's buffer,
 * writing the buffer first where the line would not fit. Under t->mu. */
static void put_line(struct vdev_alloc_trace *t, const char *line, int len)
{
    if (t->forked || len <= 0 || (size_t)len >= 64)
        return; /* the caller's line[64] holds any record whole */
    if (t->n + (size_t)len > sizeof t->buf)
        put_buffer(t);
    memcpy(t->buf + t->n, line, (size_t)len);
    t->n += (size_t)len;
}

enum vdev_status vdev_alloc_trace_open(const char *path, vdev_alloc_trace_t **out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_trace_open: out is NULL");
    *out = NULL;
    if (!path || !path[0])
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_alloc_trace_open: no path");
    struct vdev_alloc_trace *t = vdev_calloc(1, sizeof *t);
    if (!t)
        return vdev_error(VDEV_ERR_OOM, "vdev_alloc_trace_open: host out of memory");
    /* the runtime puts "VDEV_ALLOC_TRACE: " before these messages */
    static const struct vdev_tracefile_names names = {"VDEV_ALLOC_TRACE", "allocation trace ",
                                                      "the allocation trace's name"};
    int open_failed;
    struct stat was;
    enum vdev_status st = vdev_tracefile_open(&names, path, t->path, sizeof t->path, &t->f,
                                              &open_failed, &was);
    if (open_failed)
        st = vdev_error(VDEV_ERR_IO, "cannot write allocation trace %s: %s", t->path,
                        strerror(errno));
    if (st != VDEV_OK) {
        free(t);
        return st;
    }
    setvbuf(t->f, NULL, _IONBF, 0); /* the trace's own buffer holds whole lines */
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
    t->n = (size_t)snprintf(t->buf, sizeof t->buf,
                            "# trace v1 source=vdev pid=%ld start=%s ids=never-reused\n",
                            (long)getpid(), when);
    vdev_mutex_unlock(&t->mu);
    pthread_mutex_lock(&open_lock);
    /* vdev_init() after vdev_shutdown() starts the trace afresh: an earlier
     * run's events in the same file (this process's, not a parent's) are
     * gone, said once */
    int is_reg = S_ISREG(was.st_mode);
    if (is_reg && was.st_size > 0 && last_pid == getpid() && was.st_dev == last_dev &&
        was.st_ino == last_ino)
        vdev_log_warning("VDEV_ALLOC_TRACE=\"%s\": replacing this process's allocation trace "
                         "of an earlier run (%lld bytes): vdev_init() after vdev_shutdown() "
                         "starts it afresh; set VDEV_ALLOC_TRACE to another file before "
                         "vdev_init() to keep both",
                         t->path, (long long)was.st_size);
    last_dev = is_reg ? was.st_dev : 0;
    last_ino = is_reg ? was.st_ino : 0;
    last_pid = is_reg ? getpid() : 0;
    t->next = open_list;
    open_list = t;
    /* a process that exits without closing it (no vdev_shutdown) still
     * writes its lines, as stdio's buffer was written at exit */
    if (!exit_hook && atexit(vdev_alloc_trace_flush_all) == 0)
        exit_hook = 1;
    pthread_mutex_unlock(&open_lock);
    *out = t;
    return VDEV_OK;
}

void vdev_alloc_trace_flush_all(void)
{
    pthread_mutex_lock(&open_lock);
    for (struct vdev_alloc_trace *t = open_list; t; t = t->next) {
        vdev_mutex_lock(&t->mu);
        if (!t->forked)
            put_buffer(t);
        vdev_mutex_unlock(&t->mu);
    }
    pthread_mutex_unlock(&open_lock);
}

void vdev_alloc_trace_close(vdev_alloc_trace_t *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&open_lock);
    struct vdev_alloc_trace **p = &open_list;
    while (*p && *p != t)
        p = &(*p)->next;
    if (*p)
        *p = t->next;
    pthread_mutex_unlock(&open_lock);
    vdev_tracefile_unwatch(&t->fork);
    if (!t->forked) {
        int failed = t->n && fwrite(t->buf, 1, t->n, t->f) != t->n;
        failed |= ferror(t->f);
        failed = fclose(t->f) != 0 || failed;
        if (failed)
            vdev_log_warning("VDEV_ALLOC_TRACE=\"%s\": write failed: %s (the trace is "
                             "incomplete)",
                             t->path, strerror(errno));
    } else {
        vdev_tracefile_drop(t->f); /* the parent's: closed unwritten */
    }
    vdev_mutex_destroy(&t->mu);
    free(t);
}

uint64_t vdev_alloc_trace_alloc(vdev_alloc_trace_t *t, uint64_t bytes)
{
    uint64_t id = atomic_fetch_add_explicit(&t->next_id, 1, memory_order_relaxed);
    char line[64];
    int len = snprintf(line, sizeof line, "a %llu %llu\n", (unsigned long long)id,
                       (unsigned long long)bytes);
    vdev_mutex_lock(&t->mu);
    put_line(t, line, len);
    vdev_mutex_unlock(&t->mu);
    return id;
}

void vdev_alloc_trace_free(vdev_alloc_trace_t *t, uint64_t id)
{
    char line[64];
    int len = snprintf(line, sizeof line, "f %llu\n", (unsigned long long)id);
    vdev_mutex_lock(&t->mu);
    put_line(t, line, len);
    vdev_mutex_unlock(&t->mu);
}

void vdev_alloc_trace_failed(vdev_alloc_trace_t *t, uint64_t bytes)
{
    char line[64];
    int len = snprintf(line, sizeof line, "# oom %llu\n", (unsigned long long)bytes);
    vdev_mutex_lock(&t->mu);
    put_line(t, line, len);
    vdev_mutex_unlock(&t->mu);
}
