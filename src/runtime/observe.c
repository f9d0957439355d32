/* observe.c — op-time histograms and the Chrome trace writer (observe.h).
 *
 * The histogram is a set of relaxed atomic counters per device, so a scrape
 * reads it without stopping anything. The trace is one buffered FILE guarded
 * by a mutex: each event is formatted on the stack and written in one call.
 * Each thread that times ops of a device has a track of its own (op_tid).
 *
 * The trace file's name may hold placeholders, expanded at start-up: %p (the
 * process id), %r (the MPI rank, from the launcher's environment as in
 * src/config/cluster.c; 0 for a process started alone) and %%. A regular
 * file is opened without truncating it, locked with fcntl's write lock (held
 * until it is closed, released by the kernel if the process dies), and only
 * then emptied: a second process given the same file fails start-up with
 * VDEV_ERR_IO, naming the process that writes it and how to give each
 * process its own file, and leaves the first one's trace as it was. A child
 * forked from the writing process writes nothing to its parent's trace.
 * Each start-up empties the file again; where that replaces this process's
 * own earlier trace (the same file, not empty) standard error says so.
 * (The placeholders, the lock and the fork guard are tracefile.c's, shared
 * with the allocation trace, VDEV_ALLOC_TRACE.)
 *
 * Every write to the trace is checked, and so are the flush and the close at
 * shutdown (a full disk often shows only there, when stdio's buffer goes
 * out). The first failure is reported once on standard error, as it
 * happens, and the trace is written no further; vdev_shutdown() then leaves
 * VDEV_ERR_IO and the same message in vdev_last_error(). */
#define _GNU_SOURCE
#include "runtime/observe.h"
#include "runtime/tracefile.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const double vdev_op_time_bounds[VDEV_OP_TIME_BUCKETS] = {
    1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1e-3, 4e-3, 16e-3, 64e-3, 256e-3, 1.0, 4.0};

/* Copy tracks: tids from 1000 up (a device's op track is its id), in the
 * order they were first needed; at most COPY_TRACKS_MAX in a trace. */
#define COPY_TID_BASE 1000
#define COPY_TRACKS_MAX 4096
/* Track order (thread_sort_index): device by device, its op track first,
 * then the tracks of the copies it sent. */
#define SORT_STRIDE (1 << 20)

_Atomic int vdev_observe_flag;
static _Atomic int consumers;
static _Atomic int tracing; /* a trace file is open (read without the lock) */

static struct {
    _Atomic uint64_t count[VDEV_OP_TIME_BUCKETS + 1];
    _Atomic uint64_t total;
    _Atomic uint64_t sum_ns;
} H[VDEV_MAX_LDEVS];

static struct {
    pthread_mutex_t lock;
    FILE *f;
    int atexit_done;
    int werr;       /* errno of the first failed write (0: none); nothing is written after it */
    int forked;     /* this is a child forked from the process writing the trace: not ours */
    char path[PATH_MAX]; /* the file written (VDEV_TRACE_FILE expanded), for messages */
    dev_t last_dev;      /* the regular file this process's last trace went to: a new */
    ino_t last_ino;      /* start-up that empties it again says so (both 0: none) */
    /* fork(): lock is held across it, so the child's copy is consistent, and
     * the child knows the trace is its parent's (it writes nothing to it,
     * not even at exit, where stdio would flush the parent's buffered
     * events): tracefile.c's guard, watching this trace from its first
     * start on */
    struct vdev_tracefile_fork fork;
} T = {.lock = PTHREAD_MUTEX_INITIALIZER, .fork = {&T.lock, &T.f, &T.forked, NULL}};

VDEV_API enum vdev_status vdev_trace_path(char *out, size_t cap)
{
    if (!out || cap == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_trace_path: out is NULL or cap is 0");
    pthread_mutex_lock(&T.lock);
    const char *p = T.forked ? "" : T.path; /* kept after the trace is closed */
    size_t need = strlen(p) + 1;
    if (need <= cap)
        memcpy(out, p, need);
    pthread_mutex_unlock(&T.lock);
    if (need > cap)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_trace_path: needs %zu bytes, out holds %zu",
                          need, cap);
    return VDEV_OK;
}

#define REPLACED_FMT                                                                        \
    "VDEV_TRACE_FILE=\"%s\": replacing this process's trace of an earlier run (%lld bytes): " \
    "vdev_init() after vdev_shutdown() starts it afresh; set VDEV_TRACE_FILE to another "    \
    "file before vdev_init() to keep both"
#define WRITE_FAILED_FMT "VDEV_TRACE_FILE=\"%s\": write failed: %s (the trace is incomplete)"

/* A write to the trace failed with errno e: said once, on standard error;
 * the trace is written no further. T.lock held. */
static void write_failed_locked(int e)
{
    if (T.werr)
        return;
    T.werr = e ? e : EIO;
    vdev_log_warning(WRITE_FAILED_FMT, T.path, strerror(T.werr));
}

/* The trace can be written to. T.lock held. */
static int writable_locked(void) { return T.f && !T.werr && !T.forked; }

/* fprintf to the trace, checked. T.lock held. */
static void put_locked(const char *fmt, ...) VDEV_PRINTF(1, 2);
static void put_locked(const char *fmt, ...)
{
    if (!writable_locked())
        return;
    va_list ap;
    va_start(ap, fmt);
    errno = 0;
    int n = vfprintf(T.f, fmt, ap);
    int e = errno;
    va_end(ap);
    if (n < 0)
        write_failed_locked(e);
}

uint64_t vdev_observe_now(void) { return vdev_now_ns(); }

void vdev_observe_acquire(void)
{
    if (atomic_fetch_add(&consumers, 1) == 0)
        atomic_store(&vdev_observe_flag, 1);
}

void vdev_observe_release(void)
{
    if (atomic_fetch_sub(&consumers, 1) == 1)
        atomic_store(&vdev_observe_flag, 0);
}

/* Op events go to a buffer of the thread that records them and reach the
 * file a buffer at a time (and at shutdown, or when the thread ends), so a
 * stream's worker does not take the trace's lock for every op. Every event a
 * thread records for a track stays in order; a track's ops are recorded by
 * one thread (its stream, or the caller on the CPU). Copies, recorded by any
 * thread, go straight to the file (vdev_observe_copy). */
#define TBUF_BYTES (64 * 1024)

struct tbuf {
    /* data and len: its thread appends under it, and a flush (T.lock held
     * first) takes it too, so a flush at exit, while streams of a program
     * that skipped vdev_shutdown still run, never reads a half-written
     * event. Uncontended but for those flushes. */
    pthread_mutex_t lock;
    char *data;
    size_t len;
    struct tbuf *next; /* in all_bufs, guarded by T.lock */
};

static _Thread_local struct tbuf *my_buf;
static struct tbuf *all_bufs;
static pthread_key_t buf_key;
static pthread_once_t buf_key_once = PTHREAD_ONCE_INIT;

/* Writes b's events to the trace; T.lock held. */
static void tbuf_flush_locked(struct tbuf *b)
{
    pthread_mutex_lock(&b->lock);
    if (writable_locked() && b->len) {
        errno = 0;
        if (fwrite(b->data, 1, b->len, T.f) != b->len)
            write_failed_locked(errno);
    }
    b->len = 0;
    pthread_mutex_unlock(&b->lock);
}

/* A thread ends: its events go to the file, its buffer away. */
static void tbuf_destroy(void *v)
{
    struct tbuf *b = v;
    pthread_mutex_lock(&T.lock);
    tbuf_flush_locked(b);
    for (struct tbuf **p = &all_bufs; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    pthread_mutex_unlock(&T.lock);
    pthread_mutex_destroy(&b->lock);
    free(b->data);
    free(b);
}

static void make_key(void) { pthread_key_create(&buf_key, tbuf_destroy); }

static struct tbuf *tbuf_get(void)
{
    if (my_buf)
        return my_buf;
    pthread_once(&buf_key_once, make_key);
    struct tbuf *b = vdev_calloc(1, sizeof *b);
    if (!b || !(b->data = vdev_malloc(TBUF_BYTES))) {
        free(b);
        return NULL;
    }
    pthread_mutex_init(&b->lock, NULL);
    pthread_mutex_lock(&T.lock);
    b->next = all_bufs;
    all_bufs = b;
    pthread_mutex_unlock(&T.lock);
    pthread_setspecific(buf_key, b);
    my_buf = b;
    return b;
}

/* Records one event ("," before it: the header's first event has none). */
static void emit(const char *json)
{
    size_t n = strlen(json);
    struct tbuf *b = tbuf_get();
    if (!b || n + 2 > TBUF_BYTES) { /* no buffer: straight to the file */
        pthread_mutex_lock(&T.lock);
        put_locked(",\n%s", json);
        pthread_mutex_unlock(&T.lock);
        return;
    }
    pthread_mutex_lock(&b->lock);
    if (b->len + n + 2 > TBUF_BYTES) {
        pthread_mutex_unlock(&b->lock); /* T.lock comes first */
        pthread_mutex_lock(&T.lock);
        tbuf_flush_locked(b);
        pthread_mutex_unlock(&T.lock);
        pthread_mutex_lock(&b->lock);
    }
    if (b->len + n + 2 <= TBUF_BYTES) { /* a flush at exit may have come between */
        b->data[b->len++] = ',';
        b->data[b->len++] = '\n';
        memcpy(b->data + b->len, json, n);
        b->len += n;
    }
    pthread_mutex_unlock(&b->lock);
}

static _Atomic uint64_t t_zero; /* ns at start-up: the trace's zero */

static double us(uint64_t ns)
{
    uint64_t z = atomic_load_explicit(&t_zero, memory_order_relaxed);
    return ns >= z ? (double)(ns - z) / 1000.0 : 0.0;
}

/* Small formatters for the op events (names are short static strings). */
static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* nanoseconds as microseconds with three decimals: "12.345" */
static char *put_us(char *p, uint64_t ns)
{
    p = put_u64(p, ns / 1000);
    *p++ = '.';
    uint64_t f = ns % 1000;
    *p++ = (char)('0' + f / 100);
    *p++ = (char)('0' + f / 10 % 10);
    *p++ = (char)('0' + f % 10);
    return p;
}

/* Op tracks. A device's ops are timed on the thread that runs them: a GPU's
 * stream, or each caller for the host's CPUs, so several threads may time
 * ops of one CPU device at once. The first thread to record an op of a
 * device gets the device's own track (tid = its id); any other thread gets
 * the device's next track ("/device:CPU:0 (cpu) (2)"), one per thread, made
 * when first needed: a thread's ops never overlap, so neither do a track's,
 * as trace viewers need. At most OP_TRACKS_MAX extra tracks in a trace;
 * past them a thread shares the device's own track. */
#define OP_TID_BASE (COPY_TID_BASE + COPY_TRACKS_MAX)
#define OP_TRACKS_MAX 4096
static _Atomic uint64_t op_owner[VDEV_MAX_LDEVS]; /* the thread of its own track (0: none) */
static _Atomic uint64_t thread_tokens;             /* threads numbered from 1 */
static _Atomic uint32_t trace_gen;                 /* counts traces opened: tracks reset */
static int ot_n;                                   /* extra tracks made; T.lock */
static int ot_lanes[VDEV_MAX_LDEVS];               /* each device's extra tracks; T.lock */
static _Thread_local uint64_t my_token;
static _Thread_local struct {
    uint32_t gen; /* the trace they are for (0: none) */
    int tid;
} my_track[VDEV_MAX_LDEVS];

/* The track of this thread's ops on device dev_id in the open trace. */
static int op_tid(int dev_id)
{
    uint32_t gen = atomic_load_explicit(&trace_gen, memory_order_acquire);
    if (my_track[dev_id].gen == gen)
        return my_track[dev_id].tid;
    if (!my_token)
        my_token = atomic_fetch_add(&thread_tokens, 1) + 1;
    uint64_t none = 0;
    int tid = dev_id;
    if (!atomic_compare_exchange_strong(&op_owner[dev_id], &none, my_token) &&
        none != my_token) {
        const struct vdev_ldev *d = vdev_runtime_device(dev_id);
        pthread_mutex_lock(&T.lock);
        if (d && ot_n < OP_TRACKS_MAX) {
            tid = OP_TID_BASE + ot_n++;
            int lane = ++ot_lanes[dev_id];
            put_locked(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                       "\"args\":{\"name\":\"%s (%s) (%d)\"}}"
                       ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                       "\"args\":{\"sort_index\":%d}}",
                       tid, d->name, d->backend->ops->name, lane + 1, tid,
                       dev_id * SORT_STRIDE + 1 + VDEV_MAX_LDEVS * COPY_TRACKS_MAX + lane);
        }
        pthread_mutex_unlock(&T.lock);
    }
    my_track[dev_id].gen = gen;
    my_track[dev_id].tid = tid;
    return tid;
}

void vdev_observe_op(int op_type, const char *name, int dev_id, uint64_t t0, uint64_t t1)
{
    if (dev_id < 0 || dev_id >= VDEV_MAX_LDEVS)
        return;
    uint64_t ns = t1 > t0 ? t1 - t0 : 0;
    double s = (double)ns * 1e-9;
    int b = 0;
    while (b < VDEV_OP_TIME_BUCKETS && s > vdev_op_time_bounds[b])
        b++;
    atomic_fetch_add_explicit(&H[dev_id].count[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&H[dev_id].total, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&H[dev_id].sum_ns, ns, memory_order_relaxed);
    if (!atomic_load_explicit(&tracing, memory_order_relaxed))
        return;
    /* Formatted by hand, straight into the thread's buffer: this runs on the
     * stream's thread for every op, and snprintf was most of its cost. */
    uint64_t z = atomic_load_explicit(&t_zero, memory_order_relaxed);
    uint64_t ts = t0 > z ? t0 - z : 0;
    char line[256], *p = line;
    p = put_str(p, "{\"name\":\"");
    p = put_str(p, name);
    p = put_str(p, "\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":");
    p = put_us(p, ts);
    p = put_str(p, ",\"dur\":");
    p = put_us(p, ns);
    p = put_str(p, ",\"pid\":1,\"tid\":");
    p = put_u64(p, (uint64_t)op_tid(dev_id));
    p = put_str(p, ",\"args\":{\"op_type\":");
    p = put_u64(p, (uint64_t)op_type);
    p = put_str(p, "}}");
    *p = '\0';
    emit(line);
}

/* Copy tracks. A copy is timed on the thread that issued it, and several
 * threads may copy at once, between any devices: one track per pair of
 * devices ("copies /device:GPU:0 -> /device:GPU:1"), and a copy that starts
 * before the last one on each of its pair's tracks ended goes to the pair's
 * next track ("... (2)"), made when first needed. Each track's copies are
 * written under T.lock in the order they were placed on it, which is their
 * order in time, and none starts before the one before it ended: events on
 * one track never overlap, as trace viewers need. Sorted under the source
 * device's op track, by destination. All guarded by T.lock. */
struct copy_track {
    uint64_t end_ns;     /* when its last copy ended */
    uint16_t next;       /* the pair's next track, as an index + 1 (0: none) */
};
static struct copy_track CT[COPY_TRACKS_MAX];
static uint16_t ct_first[VDEV_MAX_LDEVS][VDEV_MAX_LDEVS]; /* index + 1 of a pair's first track */
static int ct_n;                                          /* tracks made */
static int ct_full_said;                                  /* the warning of a full table */

#define COPY_FULL_FMT                                                                              \
    "VDEV_TRACE_FILE=\"%s\": all %d copy tracks are taken; copies that overlap every track of "   \
    "their pair of devices are left out of the trace"

/* The track (index) of a copy of pair (from, to) from t0 to t1, made and
 * named when needed; -1 when the table is full (said once). T.lock held. */
static int copy_track_locked(const struct vdev_ldev *f, const struct vdev_ldev *t, uint64_t t0,
                             uint64_t t1)
{
    uint16_t *link = &ct_first[f->id][t->id];
    int lane = 0;
    for (; *link; link = &CT[*link - 1].next, lane++) {
        struct copy_track *c = &CT[*link - 1];
        if (t0 >= c->end_ns) {
            c->end_ns = t1;
            return *link - 1;
        }
    }
    if (ct_n == COPY_TRACKS_MAX) {
        if (!ct_full_said)
            vdev_log_warning(COPY_FULL_FMT, T.path, COPY_TRACKS_MAX);
        ct_full_said = 1;
        return -1;
    }
    int i = ct_n++;
    CT[i] = (struct copy_track){.end_ns = t1};
    *link = (uint16_t)(i + 1);
    char nth[16] = "";
    if (lane)
        snprintf(nth, sizeof nth, " (%d)", lane + 1);
    put_locked(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
               "\"args\":{\"name\":\"copies %s -> %s%s\"}}"
               ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
               "\"args\":{\"sort_index\":%d}}",
               COPY_TID_BASE + i, f->name, t->name, nth, COPY_TID_BASE + i,
               f->id * SORT_STRIDE + 1 + t->id * COPY_TRACKS_MAX + lane);
    return i;
}

void vdev_observe_copy(int from_id, int to_id, uint64_t bytes, uint64_t t0, uint64_t t1)
{
    if (!atomic_load_explicit(&tracing, memory_order_relaxed))
        return;
    struct vdev_ldev *f = vdev_runtime_device(from_id), *t = vdev_runtime_device(to_id);
    if (!f || !t)
        return;
    uint64_t z = atomic_load_explicit(&t_zero, memory_order_relaxed);
    if (t0 < z)
        t0 = z;
    if (t1 < t0)
        t1 = t0;
    char ts[32], dur[32];
    *put_us(ts, t0 - z) = '\0';
    *put_us(dur, t1 - t0) = '\0';
    pthread_mutex_lock(&T.lock);
    int i = writable_locked() ? copy_track_locked(f, t, t0, t1) : -1;
    if (i >= 0)
        put_locked(",\n{\"name\":\"Copy\",\"cat\":\"copy\",\"ph\":\"X\",\"ts\":%s,\"dur\":%s,"
                   "\"pid\":1,\"tid\":%d,\"args\":{\"from\":\"%s\",\"to\":\"%s\",\"bytes\":%llu}}",
                   ts, dur, COPY_TID_BASE + i, f->name, t->name, (unsigned long long)bytes);
    pthread_mutex_unlock(&T.lock);
}

/* Counter and instant events take their time and values under the lock, so
 * each device's counter series is in time order with consistent values even
 * when several threads allocate on it. A memory sample is taken under the
 * device's allocator lock too, the trace's lock nested inside it
 * (vdev_alloc_usage_call): the allocator tells its watcher of every change
 * of its reserved bytes with its lock held (vdev_alloc_watch), whichever
 * device or call made it (release_cached, lending to another device of the
 * card, a floor or ceiling changed, garbage collection before an OOM), so
 * the trace's lock can never be held while an allocator's is taken. */
#define MEM_SAMPLE_NS 100000 /* 100 us */

struct mem_sample {
    int seen;
    uint64_t last_ns, high, reserved;
    /* The newest sample skipped (within MEM_SAMPLE_NS), written when the
     * trace ends, so that the picture ends at the memory then in use. */
    int skipped;
    uint64_t skip_ns, skip_in_use, skip_reserved;
    char name[64];
};
static struct mem_sample M[VDEV_MAX_LDEVS]; /* guarded by T.lock */

/* One memory counter event of device `id` (its name), T.lock held. */
static void put_memory_locked(const char *name, int id, uint64_t ns, uint64_t in_use,
                              uint64_t reserved)
{
    put_locked(",\n{\"name\":\"memory %s\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":1,\"tid\":%d,"
               "\"args\":{\"in_use\":%llu,\"reserved\":%llu}}",
               name, us(ns), id, (unsigned long long)in_use, (unsigned long long)reserved);
}

/* The memory of device `user` (a struct vdev_ldev) now, its allocator's lock
 * held (vdev_alloc_usage_fn). */
static void memory_sample(void *user, uint64_t in_use, uint64_t reserved)
{
    const struct vdev_ldev *dev = user;
    if (!atomic_load_explicit(&tracing, memory_order_relaxed))
        return;
    pthread_mutex_lock(&T.lock);
    if (writable_locked()) {
        /* A sample at most every MEM_SAMPLE_NS per device, but always at a
         * new high of memory in use and when reserved memory changes, so the
         * picture keeps every peak and region while the trace stays small. */
        uint64_t now = vdev_now_ns();
        struct mem_sample *m = &M[dev->id];
        if (m->seen && now - m->last_ns < MEM_SAMPLE_NS && in_use <= m->high &&
            reserved == m->reserved) {
            m->skipped = 1;
            m->skip_ns = now;
            m->skip_in_use = in_use;
            m->skip_reserved = reserved;
            pthread_mutex_unlock(&T.lock);
            return;
        }
        if (!m->seen)
            vdev_strlcpy(m->name, dev->name, sizeof m->name);
        m->seen = 1;
        m->skipped = 0;
        m->last_ns = now;
        if (in_use > m->high)
            m->high = in_use;
        m->reserved = reserved;
        put_memory_locked(dev->name, dev->id, now, in_use, reserved);
    }
    pthread_mutex_unlock(&T.lock);
}

/* The memory a device holds when the trace starts (its preallocated floor):
 * a first sample, for the devices that hold some. */
static void memory_at_start(void *user, uint64_t in_use, uint64_t reserved)
{
    if (in_use || reserved)
        memory_sample(user, in_use, reserved);
}

void vdev_observe_memory(const struct vdev_ldev *dev)
{
    if (!atomic_load_explicit(&tracing, memory_order_relaxed))
        return;
    /* memory_sample only reads the device */
    vdev_alloc_usage_call(dev->alloc, memory_sample, (void *)(uintptr_t)dev);
}

void vdev_observe_oom(const struct vdev_ldev *dev, uint64_t bytes)
{
    if (!atomic_load_explicit(&tracing, memory_order_relaxed))
        return;
    pthread_mutex_lock(&T.lock);
    if (writable_locked()) {
        put_locked(",\n{\"name\":\"OOM\",\"cat\":\"oom\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,"
                   "\"pid\":1,\"tid\":%d,\"args\":{\"bytes\":%llu}}",
                   us(vdev_now_ns()), dev->id, (unsigned long long)bytes);
    }
    pthread_mutex_unlock(&T.lock);
}

void vdev_observe_limits(const struct vdev_ldev *dev, uint64_t floor, uint64_t ceiling,
                         const char *priority, const char *what)
{
    if (!atomic_load_explicit(&tracing, memory_order_relaxed))
        return;
    pthread_mutex_lock(&T.lock);
    if (writable_locked()) {
        double ts = us(vdev_now_ns());
        put_locked(",\n{\"name\":\"limits\",\"cat\":\"govern\",\"ph\":\"i\",\"s\":\"t\","
                   "\"ts\":%.3f,\"pid\":1,\"tid\":%d,\"args\":{\"change\":\"%s\",\"floor\":%llu,"
                   "\"ceiling\":%llu,\"priority\":\"%s\"}}"
                   ",\n{\"name\":\"limits %s\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"floor\":%llu,\"ceiling\":%llu}}",
                   ts, dev->id, what, (unsigned long long)floor, (unsigned long long)ceiling,
                   priority, dev->name, ts, dev->id, (unsigned long long)floor,
                   (unsigned long long)ceiling);
    }
    pthread_mutex_unlock(&T.lock);
}

void vdev_observe_op_times(int dev_id, struct vdev_op_time_hist *out)
{
    memset(out, 0, sizeof *out);
    if (dev_id < 0 || dev_id >= VDEV_MAX_LDEVS)
        return;
    for (int b = 0; b <= VDEV_OP_TIME_BUCKETS; b++)
        out->count[b] = atomic_load_explicit(&H[dev_id].count[b], memory_order_relaxed);
    out->total = atomic_load_explicit(&H[dev_id].total, memory_order_relaxed);
    out->sum_seconds = (double)atomic_load_explicit(&H[dev_id].sum_ns, memory_order_relaxed) * 1e-9;
}

static void close_at_exit(void) { vdev_observe_shutdown(); }

/* The trace is watched for good from its first start: a child forked after
 * it closed is not its writer either. */
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;
static void watch_trace(void) { vdev_tracefile_watch(&T.fork); }

enum vdev_status vdev_observe_init(void)
{
    for (int d = 0; d < VDEV_MAX_LDEVS; d++) {
        for (int b = 0; b <= VDEV_OP_TIME_BUCKETS; b++)
            atomic_store_explicit(&H[d].count[b], 0, memory_order_relaxed);
        atomic_store_explicit(&H[d].total, 0, memory_order_relaxed);
        atomic_store_explicit(&H[d].sum_ns, 0, memory_order_relaxed);
    }
    const char *spec = getenv("VDEV_TRACE_FILE");
    if (!spec)
        return VDEV_OK;
    if (!*spec)
        return vdev_error(VDEV_ERR_CONFIG, "VDEV_TRACE_FILE is empty (expected a file path)");
    static const struct vdev_tracefile_names names = {"VDEV_TRACE_FILE", "VDEV_TRACE_FILE=",
                                                         "VDEV_TRACE_FILE"};
    char path[sizeof T.path];
    FILE *f;
    int open_failed;
    struct stat was;
    enum vdev_status st =
        vdev_tracefile_open(&names, spec, path, sizeof path, &f, &open_failed, &was);
    if (open_failed)
        return vdev_error(VDEV_ERR_IO, "VDEV_TRACE_FILE=\"%s\": cannot open for writing: %s", path,
                          strerror(errno));
    if (st != VDEV_OK)
        return st;
    pthread_once(&watch_once, watch_trace);
    pthread_mutex_lock(&T.lock);
    /* vdev_init() after vdev_shutdown() starts the trace afresh: an earlier
     * run's events in the same file (not a forked parent's) are gone, said once */
    int is_reg = S_ISREG(was.st_mode);
    if (is_reg && !T.forked && was.st_size > 0 && (T.last_dev || T.last_ino) &&
        was.st_dev == T.last_dev && was.st_ino == T.last_ino)
        vdev_log_warning(REPLACED_FMT, path, (long long)was.st_size);
    T.last_dev = is_reg ? was.st_dev : 0;
    T.last_ino = is_reg ? was.st_ino : 0;
    T.f = f;
    T.werr = 0;
    T.forked = 0;
    vdev_strlcpy(T.path, path, sizeof T.path);
    memset(M, 0, sizeof M);
    memset(ct_first, 0, sizeof ct_first);
    ct_n = 0;
    for (int i = 0; i < VDEV_MAX_LDEVS; i++)
        atomic_store(&op_owner[i], 0);
    memset(ot_lanes, 0, sizeof ot_lanes);
    ot_n = 0;
    atomic_fetch_add_explicit(&trace_gen, 1, memory_order_release);
    ct_full_said = 0;
    atomic_store(&t_zero, vdev_now_ns());
    put_locked(
        "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"vdev\"}}");
    /* name each device's op track; its copies' tracks sort under it */
    for (int i = 0; i < vdev_runtime_n_devices(); i++) {
        struct vdev_ldev *d = vdev_runtime_device(i);
        put_locked(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s (%s)\"}}"
                   ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"sort_index\":%d}}",
                   i, d->name, d->backend->ops->name, i, i * SORT_STRIDE);
    }
    if (!T.atexit_done) {
        atexit(close_at_exit);
        T.atexit_done = 1;
    }
    atomic_store(&tracing, 1);
    pthread_mutex_unlock(&T.lock);
    /* Every change of a device's reserved memory is sampled from here on,
     * whoever makes it; what start-up preallocated is the first sample. */
    for (int i = 0; i < vdev_runtime_n_devices(); i++) {
        struct vdev_ldev *d = vdev_runtime_device(i);
        if (!d->alloc)
            continue;
        vdev_alloc_watch(d->alloc, memory_sample, d);
        vdev_alloc_usage_call(d->alloc, memory_at_start, d);
    }
    vdev_observe_acquire();
    return VDEV_OK;
}

void vdev_observe_shutdown(void)
{
    pthread_mutex_lock(&T.lock);
    /* the streams are idle here (teardown waited for them): their buffers
     * too; a forked child's copies of them are its parent's */
    for (struct tbuf *b = all_bufs; b && !T.forked; b = b->next)
        tbuf_flush_locked(b);
    /* the last memory of each device, where its newest sample was skipped */
    for (int i = 0; i < VDEV_MAX_LDEVS; i++)
        if (M[i].seen && M[i].skipped && writable_locked()) {
            put_memory_locked(M[i].name, i, M[i].skip_ns, M[i].skip_in_use, M[i].skip_reserved);
            M[i].skipped = 0;
        }
    FILE *f = T.f;
    atomic_store(&tracing, 0);
    int werr = 0;
    char path[sizeof T.path];
    if (f && T.forked) {
        /* the parent's file: its buffered events dropped, closed unwritten */
        vdev_tracefile_drop(f);
        f = NULL;
        vdev_observe_release();
    } else if (f) {
        put_locked("\n]\n");
        /* stdio keeps what did not fit its buffer: the flush and the close
         * write it, and may be the first to fail */
        errno = 0;
        if (writable_locked() && (fflush(f) != 0 || ferror(f)))
            write_failed_locked(errno);
        errno = 0;
        if (fclose(f) != 0)
            write_failed_locked(errno);
        werr = T.werr;
        memcpy(path, T.path, sizeof path);
    }
    T.f = NULL;
    T.werr = 0;
    pthread_mutex_unlock(&T.lock);
    if (f)
        vdev_observe_release();
    if (werr)
        vdev_error(VDEV_ERR_IO, WRITE_FAILED_FMT, path, strerror(werr));
}
