/* tracefile.c — the trace files' shared rules (tracefile.h): placeholders
 * in the name, the lock that keeps a second process off a file being
 * written, and the fork() guard. The guard is one pthread_atfork handler for
 * the whole process, set up the first time a trace is watched, over a list
 * of the watched traces under its own mutex: before fork() it takes that
 * mutex and then each trace's lock, and in the child it marks each trace
 * forked and empties its stdio buffer, so neither the child's writes nor
 * its exit reach the parent's file. */
#define _GNU_SOURCE
#include "runtime/tracefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

long vdev_tracefile_launch_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v || strlen(v) > 9 || strspn(v, "0123456789") != strlen(v))
            continue;
        return atol(v);
    }
    return -1;
}

/* `spec` with its placeholders expanded into out[cap]. */
static enum vdev_status expand_path(const struct vdev_tracefile_names *n, const char *spec,
                                    char *out, size_t cap)
{
    size_t len = 0;
    for (const char *p = spec; *p; p++) {
        char num[24] = {*p, '\0'};
        if (*p == '%') {
            if (p[1] == 'p')
                snprintf(num, sizeof num, "%ld", (long)getpid());
            else if (p[1] == 'r') {
                long r = vdev_tracefile_launch_rank();
                snprintf(num, sizeof num, "%ld", r < 0 ? 0L : r);
            } else if (p[1] != '%')
                return vdev_error(VDEV_ERR_CONFIG,
                                  "%s\"%s\": \"%.2s\" is not a placeholder "
                                  "(" VDEV_TRACEFILE_PLACEHOLDERS ")",
                                  n->prefix, spec, p);
            p++;
        }
        size_t k = strlen(num);
        if (len + k >= cap)
            return vdev_error(VDEV_ERR_CONFIG, "%s is too long: more than %zu bytes once expanded",
                              n->name, cap - 1);
        memcpy(out + len, num, k + 1);
        len += k;
    }
    return VDEV_OK;
}

/* What the message of a trace in use suggests: spec with ".%r" (launched by
 * MPI) or ".%p" before the extension of its last component, if any. */
static void suggest_path(const char *spec, char *out, size_t cap)
{
    const char *base = strrchr(spec, '/');
    base = base ? base + 1 : spec;
    const char *dot = strrchr(base, '.');
    size_t at = dot && dot > base ? (size_t)(dot - spec) : strlen(spec);
    snprintf(out, cap, "%.*s.%s%s", (int)at, spec,
             vdev_tracefile_launch_rank() >= 0 ? "%r" : "%p", spec + at);
}

/* The lock of a trace file is two one-byte locks past its start: an open
 * file description's lock (F_OFD_SETLK) on byte 0, which excludes every
 * other opening of the file, in this process too (the profiler trace and
 * the allocation trace named alike), and the process's own record lock on
 * byte 1, which only says who holds the file (F_GETLK gives its pid; an
 * OFD lock has none). Where OFD locks are missing, the record lock on byte
 * 0 does the excluding, between processes only. */
enum { LOCK_EXCLUDE = 0, LOCK_OWNER = 1 };

/* Tries the lock on fd; 0, or EAGAIN with the holder's pid in *holder (0:
 * not known, -1: this process), or another errno (no locks here). */
static int lock_trace(int fd, long *holder)
{
    struct flock want = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LOCK_EXCLUDE,
                         .l_len = 1};
    int ofd = 1;
    for (int tries = 0;; tries++) {
        int r = fcntl(fd, ofd ? F_OFD_SETLK : F_SETLK, &want);
        if (r != 0 && ofd && errno == EINVAL) {
            ofd = 0; /* a kernel without OFD locks */
            continue;
        }
        if (r == 0)
            break;
        if (errno != EAGAIN && errno != EACCES)
            return errno;
        struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
                            .l_start = ofd ? LOCK_OWNER : LOCK_EXCLUDE, .l_len = 1};
        int known = fcntl(fd, F_GETLK, &who) == 0;
        struct flock again = want;
        if (tries < 2 && fcntl(fd, ofd ? F_OFD_GETLK : F_GETLK, &again) == 0 &&
            again.l_type == F_UNLCK)
            continue; /* released meanwhile: try again */
        /* a holder without a record lock on byte 1 is this process (a
         * record lock never conflicts with its own process's) */
        *holder = !known ? 0 : who.l_type != F_UNLCK ? (long)who.l_pid : ofd ? -1 : 0;
        return EAGAIN;
    }
    if (ofd) {
        struct flock owner = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LOCK_OWNER,
                              .l_len = 1};
        (void)fcntl(fd, F_SETLK, &owner); /* for the messages only */
    }
    return 0;
}

/* Opens path for writing, locked, then empty. Returns the stream, or NULL
 * with errno set: EAGAIN when another process holds the lock, with its
 * process id in *holder (0: not known), or this process (-1). *was: the
 * file's fstat once locked, before it was emptied (zeroed when unknown). */
static FILE *open_locked(const char *path, long *holder, struct stat *was)
{
    *holder = 0;
    memset(was, 0, sizeof *was);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return NULL;
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno : 0;
    if (!e && S_ISREG(st.st_mode)) {
        int l = lock_trace(fd, holder);
        if (l == EAGAIN)
            e = EAGAIN; /* else no locks here (ENOLCK, EINVAL): written unlocked */
        if (!e && fstat(fd, was) != 0) /* locked: its size is the earlier trace's */
            memset(was, 0, sizeof *was);
        if (!e && ftruncate(fd, 0) != 0)
            e = errno;
    }
    FILE *f = e ? NULL : fdopen(fd, "w");
    if (!f) {
        if (!e)
            e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

enum vdev_status vdev_tracefile_open(const struct vdev_tracefile_names *names, const char *spec,
                                     char *path, size_t cap, FILE **out, int *open_failed,
                                     struct stat *was)
{
    struct stat ignored;
    was = was ? was : &ignored;
    memset(was, 0, sizeof *was);
    *out = NULL;
    *open_failed = 0;
    enum vdev_status st = expand_path(names, spec, path, cap);
    if (st != VDEV_OK)
        return st;
    long holder;
    FILE *f = open_locked(path, &holder, was);
    if (!f && errno == EAGAIN && holder == -1)
        return vdev_error(VDEV_ERR_IO,
                          "%s\"%s\": this process writes it already, as its other trace "
                          "(VDEV_TRACE_FILE and VDEV_ALLOC_TRACE name the same file); give each "
                          "trace its own file",
                          names->prefix, path);
    if (!f && errno == EAGAIN) {
        char who[48] = "another process", fix[4096 + 8];
        if (holder > 0)
            snprintf(who, sizeof who, "process %ld", holder);
        suggest_path(spec, fix, sizeof fix);
        return vdev_error(VDEV_ERR_IO,
                          "%s\"%s\": %s is writing this trace; give each process its own file, "
                          "e.g. %s=%s (" VDEV_TRACEFILE_PLACEHOLDERS ")",
                          names->prefix, path, who, names->var, fix);
    }
    if (!f) {
        *open_failed = 1;
        return VDEV_ERR_IO;
    }
    *out = f;
    return VDEV_OK;
}

/* ---- the fork() guard ---- */

static struct {
    pthread_mutex_t lock; /* guards list; taken before any trace's lock */
    struct vdev_tracefile_fork *list;
} W = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
    pthread_mutex_lock(&W.lock);
    for (struct vdev_tracefile_fork *w = W.list; w; w = w->next)
        pthread_mutex_lock(w->lock);
}

static void fork_parent(void)
{
    for (struct vdev_tracefile_fork *w = W.list; w; w = w->next)
        pthread_mutex_unlock(w->lock);
    pthread_mutex_unlock(&W.lock);
}

/* The child: no thread of the parent is inside a write (each held its
 * trace's lock for it), so the buffer can be emptied here. */
static void fork_child(void)
{
    for (struct vdev_tracefile_fork *w = W.list; w; w = w->next) {
        *w->forked = 1;
        if (*w->f)
            __fpurge(*w->f);
        pthread_mutex_unlock(w->lock);
    }
    pthread_mutex_unlock(&W.lock);
}

static void install_atfork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

void vdev_tracefile_watch(struct vdev_tracefile_fork *w)
{
    pthread_once(&atfork_once, install_atfork);
    pthread_mutex_lock(&W.lock);
    w->next = W.list;
    W.list = w;
    pthread_mutex_unlock(&W.lock);
}

void vdev_tracefile_unwatch(struct vdev_tracefile_fork *w)
{
    pthread_mutex_lock(&W.lock);
    for (struct vdev_tracefile_fork **p = &W.list; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&W.lock);
}

void vdev_tracefile_drop(FILE *f)
{
    if (!f)
        return;
    __fpurge(f);
    fclose(f);
}
