/* mpi_plugin.c — libvdev-mpi.so: the MPI transport the core loads at run time
 * (see mpi_api.h for the table and its rules). It is the only file of vdev
 * that includes mpi.h, so the core never links MPI.
 *
 * How the waits are bounded. MPI's blocking calls wait for ever, and the
 * standard gives no way to leave one early. So whatever may wait for a
 * process that died or stopped is non-blocking and polled against a
 * deadline: the exchange of records that precedes every collective of the
 * core (point-to-point MPI_Isend/MPI_Irecv, polled with MPI_Test), and the
 * point-to-point messages of the parameter servers. A poll that finds
 * nothing spins a little, then yields the core, then sleeps 50 us at a time,
 * so an idle process (a server waiting for work) leaves the CPU to the
 * others. The data of a collective then moves with MPI's blocking
 * collectives (MPI_Allreduce, MPI_Bcast, MPI_Allgatherv), whose tuned
 * algorithms are faster than the non-blocking ones in Open MPI 4.1; by then
 * every process has shown it makes the same call, and the core's watchdog
 * bounds the rest.
 *
 * A process that ends cleanly (status 0) says so before MPI_Finalize: one
 * message to every other process on a communicator of its own (the
 * departures'), on which each process keeps a receive posted from start-up.
 * An exchange that still lacks the record of a process that has left (after
 * a second's grace for a record in flight) fails at once, instead of waiting
 * until its deadline for a process that will never make the call.
 *
 * Communicators are duplicates of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so
 * an MPI failure is a code the core turns into a message. A wait whose
 * deadline passes leaves its requests posted: the buffers they name belong
 * to the communicator (never to the caller) and are never freed, since MPI
 * may still write into them; the communicator is spent. */
#define _GNU_SOURCE
#include "mpi/mpi_api.h"

#include <mpi.h>

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct vdev_mpi_comm {
    MPI_Comm comm;
    int rank, size;
    int spent;                  /* a wait was abandoned: requests may still be posted */
    /* the exchange's own buffers and requests (abandoned with the comm) */
    unsigned char *xbuf;        /* (size + 1) records: size received, then ours */
    size_t xcap;                /* bytes of xbuf */
    MPI_Request *req;           /* 2 * size */
    /* the message matched by probe, waiting for recv */
    MPI_Message msg;
    int have_msg;
    uint64_t msg_bytes;
};

/* One MPI call at a time (MPI_THREAD_SERIALIZED): every entry takes this
 * lock around each MPI call, and a poll lets go of it between tests, so
 * another thread's call may run while one waits. MPI_Abort alone ignores it:
 * it must end the job even while another thread is stuck inside MPI. */
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&mpi_lock)
#define UNLOCK() pthread_mutex_unlock(&mpi_lock)

/* MPI initialised here (so finalize is ours to call), and the library's
 * name: written by init, under the lock. */
static int initialised_here;
static char library_name[128];

/* The departures (under the lock): their communicator, the receive kept
 * posted on it, and who has left (world ranks; NULL before init). */
#define TAG_BYE 1
#define BYE_GRACE_NS 1000000000ull /* for a record still in flight */
static MPI_Comm bye_comm = MPI_COMM_NULL;
static MPI_Request bye_req = MPI_REQUEST_NULL;
static int bye_buf, world_rank, world_size;
static unsigned char *departed;

/* ---- helpers ---- */

static enum vdev_status fail(char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum vdev_status fail(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return VDEV_ERR_BACKEND;
}

/* "<call>: <MPI's error string>" for an MPI error code. */
static enum vdev_status mpi_fail(int rc, const char *call, char *why, size_t cap)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", rc);
    return fail(why, cap, "%s failed: %s", call, s);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One step of a poll that found nothing, by how long it has polled. */
static void backoff(uint64_t started, unsigned *spins)
{
    if (++*spins < 64)
        return;
    if (now_ns() - started < 1000000ull) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* The deadline as seconds from now, for messages. */
static double seconds_to(uint64_t deadline, uint64_t started)
{
    return deadline > started ? (double)(deadline - started) / 1e9 : 0.0;
}

/* ---- departures ---- */

/* Posts the receive of the next departure (lock held). */
static int bye_post(void)
{
    return MPI_Irecv(&bye_buf, 1, MPI_INT, MPI_ANY_SOURCE, TAG_BYE, bye_comm, &bye_req);
}

/* The departures' communicator and receive (lock held; collective, as the
 * rest of init is). */
static enum vdev_status departures_start(int rank, int size, char *why, size_t cap)
{
    if (departed)
        return VDEV_OK;
    unsigned char *d = calloc((size_t)size, 1);
    if (!d)
        return fail(why, cap, "out of host memory for %d processes", size);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &bye_comm);
    if (rc != MPI_SUCCESS) {
        free(d);
        return mpi_fail(rc, "MPI_Comm_dup", why, cap);
    }
    MPI_Comm_set_errhandler(bye_comm, MPI_ERRORS_RETURN);
    if ((rc = bye_post()) != MPI_SUCCESS) {
        free(d);
        return mpi_fail(rc, "MPI_Irecv", why, cap);
    }
    departed = d;
    world_rank = rank;
    world_size = size;
    return VDEV_OK;
}

/* Takes in the departures that have come (lock held). */
static void departures_poll(void)
{
    while (bye_req != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Status s;
        if (MPI_Test(&bye_req, &flag, &s) != MPI_SUCCESS || !flag)
            return;
        if (s.MPI_SOURCE >= 0 && s.MPI_SOURCE < world_size)
            departed[s.MPI_SOURCE] = 1;
        if (bye_post() != MPI_SUCCESS)
            bye_req = MPI_REQUEST_NULL;
    }
}

/* Tells every other process that this one leaves, then stops listening
 * (lock held; before MPI_Finalize). The messages are one int each, so they
 * leave at once; a second bounds the wait all the same. */
static void departures_say_goodbye(void)
{
    if (!departed)
        return;
    MPI_Request *r = calloc((size_t)world_size, sizeof *r);
    static const int zero = 0;
    int n = 0;
    for (int p = 0; r && p < world_size; p++)
        if (p != world_rank &&
            MPI_Isend(&zero, 1, MPI_INT, p, TAG_BYE, bye_comm, &r[n]) == MPI_SUCCESS)
            n++;
    uint64_t until = now_ns() + 1000000000ull;
    int all = 0;
    while (n > 0 && MPI_Testall(n, r, &all, MPI_STATUSES_IGNORE) == MPI_SUCCESS && !all &&
           now_ns() < until)
        sched_yield();
    for (int i = 0; i < n && !all; i++)
        if (r[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&r[i]); /* completes in the background */
    free(r);
    if (bye_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&bye_req);
        MPI_Wait(&bye_req, MPI_STATUS_IGNORE);
    }
    free(departed);
    departed = NULL;
}

/* ---- the library ---- */

static const char *library(void) { return library_name; }

static enum vdev_status init_locked(int *rank, int *size, char *why, size_t cap)
{
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (fin)
        return fail(why, cap, "MPI has been finalized in this process; it cannot start again");
    if (!inited) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Init_thread", why, cap);
        initialised_here = 1;
        if (provided < MPI_THREAD_SERIALIZED)
            return fail(why, cap, "MPI_Init_thread gave thread level %d; vdev needs "
                                  "MPI_THREAD_SERIALIZED (%d) or more",
                        provided, MPI_THREAD_SERIALIZED);
    } else {
        int level = 0;
        MPI_Query_thread(&level);
        if (level < MPI_THREAD_SERIALIZED)
            return fail(why, cap, "the program initialised MPI at thread level %d; vdev needs "
                                  "MPI_THREAD_SERIALIZED (%d) or more (MPI_Init_thread)",
                        level, MPI_THREAD_SERIALIZED);
    }
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(v, &len) == MPI_SUCCESS) {
        v[strcspn(v, "\n,")] = '\0';
        size_t k = strlen(v) < sizeof library_name - 1 ? strlen(v) : sizeof library_name - 1;
        memcpy(library_name, v, k);
        library_name[k] = '\0';
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return departures_start(*rank, *size, why, cap);
}

static enum vdev_status init(int *rank, int *size, char *why, size_t cap)
{
    LOCK();
    enum vdev_status st = init_locked(rank, size, why, cap);
    UNLOCK();
    return st;
}

static void finalize(void)
{
    LOCK();
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin)
        departures_say_goodbye();
    if (initialised_here && inited && !fin)
        MPI_Finalize();
    UNLOCK();
}

static void abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

/* ---- communicators ---- */

static enum vdev_status comm_dup(vdev_mpi_comm_t **out, char *why, size_t cap)
{
    *out = NULL;
    vdev_mpi_comm_t *c = calloc(1, sizeof *c);
    if (!c)
        return fail(why, cap, "out of host memory for an MPI communicator");
    LOCK();
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(c->comm, &c->rank);
        MPI_Comm_size(c->comm, &c->size);
    }
    UNLOCK();
    if (rc != MPI_SUCCESS) {
        free(c);
        return mpi_fail(rc, "MPI_Comm_dup", why, cap);
    }
    c->req = calloc(2 * (size_t)c->size, sizeof *c->req);
    if (!c->req) {
        LOCK();
        MPI_Comm_free(&c->comm);
        UNLOCK();
        free(c);
        return fail(why, cap, "out of host memory for an MPI communicator");
    }
    *out = c;
    return VDEV_OK;
}

static void comm_free(vdev_mpi_comm_t *c, int spent)
{
    if (!c || spent || c->spent)
        return; /* MPI may still write into a spent one's buffers: they stay */
    LOCK();
    MPI_Comm_free(&c->comm);
    UNLOCK();
    free(c->xbuf);
    free(c->req);
    free(c);
}

/* Waits for n requests until the deadline; done[i] (may be NULL) says which
 * completed. VDEV_OK when all did. Takes the lock for each test. When
 * from_ranks > 0, requests 0 .. from_ranks - 1 are receives from the world
 * ranks of their index, and the wait fails early when one of those processes
 * has left the job (a second after its departure came). */
static enum vdev_status wait_all(vdev_mpi_comm_t *c, MPI_Request *req, int n, int from_ranks,
                                 uint64_t deadline, const char *what, unsigned char *done,
                                 char *why, size_t cap)
{
    uint64_t started = now_ns(), grace = 0;
    unsigned spins = 0;
    int left = 0, gone = -1;
    for (int i = 0; i < n; i++)
        left += req[i] != MPI_REQUEST_NULL;
    while (left > 0) {
        LOCK();
        for (int i = 0; i < n; i++) {
            if (req[i] == MPI_REQUEST_NULL)
                continue;
            int flag = 0;
            int rc = MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                UNLOCK();
                c->spent = 1;
                return mpi_fail(rc, what, why, cap);
            }
            if (flag) {
                left--;
                if (done)
                    done[i] = 1;
                spins = 0;
            }
        }
        if (from_ranks > 0 && departed) {
            departures_poll();
            gone = -1;
            for (int i = 0; i < from_ranks && gone < 0; i++)
                if (req[i] != MPI_REQUEST_NULL && departed[i])
                    gone = i;
        }
        UNLOCK();
        if (left == 0)
            break;
        if (gone >= 0 && !grace)
            grace = now_ns() + BYE_GRACE_NS;
        if (gone >= 0 && now_ns() >= grace) {
            c->spent = 1;
            return fail(why, cap, "%s: process %d has left the job (its process ended) "
                                  "without making this call",
                        what, gone);
        }
        if (now_ns() >= deadline) {
            c->spent = 1;
            return fail(why, cap, "%s did not complete within %.3g s", what,
                        seconds_to(deadline, started));
        }
        backoff(started, &spins);
    }
    return VDEV_OK;
}

/* ---- the exchange ---- */

static enum vdev_status exchange(vdev_mpi_comm_t *c, int tag, const void *mine, void *all,
                                 size_t bytes, uint64_t deadline, unsigned char *arrived,
                                 char *why, size_t cap)
{
    int n = c->size, me = c->rank;
    memset(arrived, 0, (size_t)n);
    if (bytes > INT_MAX)
        return fail(why, cap, "an exchange of %zu bytes per process (at most %d)", bytes, INT_MAX);
    size_t need = bytes * ((size_t)n + 1);
    if (need > c->xcap) {
        unsigned char *b = realloc(c->xbuf, need);
        if (!b)
            return fail(why, cap, "out of host memory for an exchange of %zu bytes", need);
        c->xbuf = b;
        c->xcap = need;
    }
    unsigned char *done = calloc(2 * (size_t)n, 1);
    if (!done)
        return fail(why, cap, "out of host memory for an exchange");
    unsigned char *own = c->xbuf + bytes * (size_t)n;
    memcpy(own, mine, bytes);
    /* receives first (slots 0..n-1), then sends (n..2n-1) */
    for (int p = 0; p < 2 * n; p++)
        c->req[p] = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    const char *call = "MPI_Irecv";
    LOCK();
    for (int p = 0; p < n && rc == MPI_SUCCESS; p++)
        if (p != me)
            rc = MPI_Irecv(c->xbuf + bytes * (size_t)p, (int)bytes, MPI_BYTE, p, tag, c->comm,
                           &c->req[p]);
    if (rc == MPI_SUCCESS)
        call = "MPI_Isend";
    for (int p = 0; p < n && rc == MPI_SUCCESS; p++)
        if (p != me)
            rc = MPI_Isend(own, (int)bytes, MPI_BYTE, p, tag, c->comm, &c->req[n + p]);
    UNLOCK();
    enum vdev_status st;
    if (rc != MPI_SUCCESS) {
        c->spent = 1; /* some requests are posted: nothing can be undone */
        st = mpi_fail(rc, call, why, cap);
    } else {
        st = wait_all(c, c->req, 2 * n, n, deadline, "the exchange", done, why, cap);
    }
    LOCK();
    for (int p = 0; p < n; p++)
        arrived[p] = p == me || done[p] ? 1 : departed && departed[p] ? 2 : 0;
    UNLOCK();
    free(done);
    if (st != VDEV_OK)
        return st;
    memcpy(all, c->xbuf, bytes * (size_t)n);
    memcpy((unsigned char *)all + bytes * (size_t)me, own, bytes);
    return VDEV_OK;
}

/* ---- blocking collectives ---- */

#define CHUNK (1 << 30) /* elements or bytes per MPI call */

static enum vdev_status allreduce(vdev_mpi_comm_t *c, void *buf, uint64_t count,
                                  enum vdev_mpi_type type, enum vdev_mpi_op op, char *why,
                                  size_t cap)
{
    MPI_Datatype t = type == VDEV_MPI_F32 ? MPI_FLOAT : MPI_INT64_T;
    size_t esz = type == VDEV_MPI_F32 ? 4 : 8;
    MPI_Op o = op == VDEV_MPI_SUM ? MPI_SUM : op == VDEV_MPI_MIN ? MPI_MIN : MPI_MAX;
    for (uint64_t off = 0; off < count; off += CHUNK) {
        uint64_t n = count - off < CHUNK ? count - off : CHUNK;
        LOCK();
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * esz, (int)n, t, o, c->comm);
        UNLOCK();
        if (rc != MPI_SUCCESS) {
            c->spent = 1;
            return mpi_fail(rc, "MPI_Allreduce", why, cap);
        }
    }
    return VDEV_OK;
}

static enum vdev_status bcast(vdev_mpi_comm_t *c, void *buf, uint64_t bytes, int root,
                              char *why, size_t cap)
{
    for (uint64_t off = 0; off < bytes; off += CHUNK) {
        uint64_t n = bytes - off < CHUNK ? bytes - off : CHUNK;
        LOCK();
        int rc = MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, c->comm);
        UNLOCK();
        if (rc != MPI_SUCCESS) {
            c->spent = 1;
            return mpi_fail(rc, "MPI_Bcast", why, cap);
        }
    }
    return VDEV_OK;
}

static enum vdev_status allgatherv(vdev_mpi_comm_t *c, const void *in, void *out,
                                   const uint64_t *bytes, char *why, size_t cap)
{
    int n = c->size;
    uint64_t total = 0, at = 0;
    for (int p = 0; p < n; p++) {
        if (p < c->rank)
            at += bytes[p];
        total += bytes[p];
    }
    /* our own part goes in place first (MPI_IN_PLACE, or the broadcasts) */
    if (bytes[c->rank] && (char *)out + at != (const char *)in)
        memmove((char *)out + at, in, bytes[c->rank]);
    if (total <= INT_MAX) {
        int *counts = malloc(2 * (size_t)n * sizeof *counts);
        if (!counts)
            return fail(why, cap, "out of host memory for an all-gather");
        int *displs = counts + n, d = 0;
        for (int p = 0; p < n; p++) {
            counts[p] = (int)bytes[p];
            displs[p] = d;
            d += counts[p];
        }
        LOCK();
        int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, out, counts, displs, MPI_BYTE,
                                c->comm);
        UNLOCK();
        free(counts);
        if (rc != MPI_SUCCESS) {
            c->spent = 1;
            return mpi_fail(rc, "MPI_Allgatherv", why, cap);
        }
        return VDEV_OK;
    }
    /* more than MPI's int counts: each process broadcasts its part */
    at = 0;
    for (int p = 0; p < n; p++) {
        enum vdev_status st = bcast(c, (char *)out + at, bytes[p], p, why, cap);
        if (st != VDEV_OK)
            return st;
        at += bytes[p];
    }
    return VDEV_OK;
}

/* ---- point to point ---- */

static enum vdev_status p2p_send(vdev_mpi_comm_t *c, const void *buf, uint64_t bytes, int dest,
                                 int tag, uint64_t deadline, char *why, size_t cap)
{
    if (bytes > INT_MAX)
        return fail(why, cap, "a message of %llu bytes (at most %d)", (unsigned long long)bytes,
                    INT_MAX);
    MPI_Request r;
    LOCK();
    int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, dest, tag, c->comm, &r);
    UNLOCK();
    if (rc != MPI_SUCCESS) {
        c->spent = 1;
        return mpi_fail(rc, "MPI_Isend", why, cap);
    }
    char what[64];
    snprintf(what, sizeof what, "a send to process %d", dest);
    return wait_all(c, &r, 1, 0, deadline, what, NULL, why, cap);
}

static enum vdev_status p2p_probe(vdev_mpi_comm_t *c, int src, int tag, uint64_t deadline,
                                  int *src_out, int *tag_out, uint64_t *bytes_out, char *why,
                                  size_t cap)
{
    if (c->have_msg)
        return fail(why, cap, "a probed message has not been received yet");
    uint64_t started = now_ns();
    unsigned spins = 0;
    for (;;) {
        int flag = 0, count = 0;
        MPI_Status s;
        LOCK();
        int rc = MPI_Improbe(src < 0 ? MPI_ANY_SOURCE : src, tag < 0 ? MPI_ANY_TAG : tag,
                             c->comm, &flag, &c->msg, &s);
        if (rc == MPI_SUCCESS && flag)
            MPI_Get_count(&s, MPI_BYTE, &count);
        UNLOCK();
        if (rc != MPI_SUCCESS) {
            c->spent = 1;
            return mpi_fail(rc, "MPI_Improbe", why, cap);
        }
        if (flag) {
            c->have_msg = 1;
            c->msg_bytes = (uint64_t)count;
            *src_out = s.MPI_SOURCE;
            *tag_out = s.MPI_TAG;
            *bytes_out = (uint64_t)count;
            return VDEV_OK;
        }
        if (now_ns() >= deadline) {
            c->spent = 1;
            if (src >= 0)
                return fail(why, cap, "no message from process %d within %.3g s", src,
                            seconds_to(deadline, started));
            return fail(why, cap, "no message within %.3g s", seconds_to(deadline, started));
        }
        backoff(started, &spins);
    }
}

static enum vdev_status p2p_recv(vdev_mpi_comm_t *c, void *buf, uint64_t cap_bytes, char *why,
                                 size_t cap)
{
    if (!c->have_msg)
        return fail(why, cap, "recv without a probed message");
    if (cap_bytes < c->msg_bytes)
        return fail(why, cap, "a message of %llu bytes into a buffer of %llu",
                    (unsigned long long)c->msg_bytes, (unsigned long long)cap_bytes);
    c->have_msg = 0;
    LOCK();
    int rc = MPI_Mrecv(buf, (int)c->msg_bytes, MPI_BYTE, &c->msg, MPI_STATUS_IGNORE);
    UNLOCK();
    if (rc != MPI_SUCCESS) {
        c->spent = 1;
        return mpi_fail(rc, "MPI_Mrecv", why, cap);
    }
    return VDEV_OK;
}

static const struct vdev_mpi_ops OPS = {
    .api_version = VDEV_MPI_API_VERSION,
    .library = library,
    .init = init,
    .finalize = finalize,
    .abort = abort_job,
    .comm_dup = comm_dup,
    .comm_free = comm_free,
    .exchange = exchange,
    .allreduce = allreduce,
    .bcast = bcast,
    .allgatherv = allgatherv,
    .send = p2p_send,
    .probe = p2p_probe,
    .recv = p2p_recv,
};

__attribute__((visibility("default"))) enum vdev_status
vdev_mpi_plugin_open(int api_version, const struct vdev_mpi_ops **out, char *why, size_t cap);

enum vdev_status vdev_mpi_plugin_open(int api_version, const struct vdev_mpi_ops **out,
                                      char *why, size_t cap)
{
    *out = NULL;
    if (api_version != VDEV_MPI_API_VERSION)
        return snprintf(why, cap, "MPI plugin: API version %d asked; this plugin serves %d",
                        api_version, VDEV_MPI_API_VERSION),
               VDEV_ERR_UNSUPPORTED;
    *out = &OPS;
    return VDEV_OK;
}
