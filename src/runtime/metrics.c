/* metrics.c — the Prometheus metrics endpoint (metrics.h, vdev.h).
 *
 * GET /metrics answers in the Prometheus text exposition format 0.0.4; any
 * other path is 404, any other method 405. The listening socket is made here
 * (so a bind failure names its errno and port 0 picks a free port) and handed
 * to libmicrohttpd, which runs one internal polling thread: an idle or slow
 * client never blocks another, a client idle for CONN_TIMEOUT_S seconds is
 * dropped, and a request whose headers overflow CONN_MEMORY bytes is answered
 * with an error by libmicrohttpd itself.
 *
 * Slow clients cannot starve a scrape. Each client address may hold at most
 * CONN_PER_IP connections, of CONN_LIMIT in all (libmicrohttpd refuses the
 * rest at once), and each request has REQUEST_TIMEOUT_S seconds in all, from
 * its connection's start (or the end of the previous request on it) until
 * its answer is sent: libmicrohttpd's own timeout counts only idle time, so
 * a client sending a header line every 2 s would keep its slot for ever. A
 * watchdog thread keeps each connection's deadline (libmicrohttpd tells it
 * of every connection opened and closed, and of every request completed)
 * and shuts down the socket of one past it; libmicrohttpd then sees the
 * socket end and frees the slot. The watchdog holds its lock while it shuts
 * a socket down, and libmicrohttpd reports a connection closed (which takes
 * that lock) before it closes its socket, so the watchdog never touches a
 * socket number that has been closed and reused.
 *
 * A scrape reads relaxed atomic counters (ops per type and device, bytes
 * copied per pair, op-time histograms) and takes one allocator statistics
 * snapshot per device (the allocator's lock is held only to copy them), so
 * serving never stops an op. Op times are recorded only while observation is
 * on: serving holds one vdev_observe_acquire() until it stops.
 *
 * Op names come from the op table (src/ops), the one place that knows them;
 * this file only reads that table. */
#define _GNU_SOURCE
#include "runtime/metrics.h"
#include "runtime/observe.h"
#include "runtime/placement.h"
#include "runtime/replicas.h"
#include "runtime/runtime.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CONN_TIMEOUT_S 5u         /* an idle client is dropped after this */
#define REQUEST_TIMEOUT_S 10u     /* a request, idle or not, is cut after this */
#define CONN_MEMORY (32u * 1024u) /* per connection: request line and headers */
#define CONN_LIMIT 128u           /* connections at once, in all */
#define CONN_PER_IP 16u           /* connections at once from one client address */

/* A connection the watchdog keeps a deadline for. */
struct watched {
    struct MHD_Connection *c;
    int fd;
    ino_t ino;         /* the socket's inode: fd is shut down only while it still names it */
    uint64_t deadline; /* monotonic ns */
    int cut;           /* its socket was shut down */
};

static struct {
    pthread_mutex_t lock; /* guards the fields below up to the watchdog's */
    struct MHD_Daemon *daemon;
    int up;   /* the runtime is up: set at start-up, cleared when vdev_shutdown begins */
    int port; /* bound port, 0 when not serving */
    char addr[128];
    /* the watchdog: its thread runs while the daemon does */
    pthread_mutex_t wlock; /* guards conns, n_conns, wstop; taken inside lock, never around it */
    pthread_cond_t wcond;  /* on CLOCK_MONOTONIC: signalled to stop */
    pthread_t wthread;
    int wstop;
    struct watched conns[CONN_LIMIT];
    int n_conns;
} M = {.lock = PTHREAD_MUTEX_INITIALIZER, .wlock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- addresses ---- */

/* "127.0.0.1:9400", "[::1]:9400", "localhost:9400" (IPv4 loopback); port
 * 0..65535 (0: any free port). Fills ss and its length; 0 on success, -2
 * for a good host with a port of digits above 65535, else -1. No
 * other host name is accepted: nothing is looked up, so the endpoint binds
 * exactly the address given, whatever the resolver says. */
static int parse_addr(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    const char *colon;
    char host[64];
    size_t hn;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':')
            return -1;
        hn = (size_t)(close - text - 1);
        if (hn == 0 || hn >= sizeof host)
            return -1;
        memcpy(host, text + 1, hn);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (!colon)
            return -1;
        hn = (size_t)(colon - text);
        if (hn == 0 || hn >= sizeof host)
            return -1;
        memcpy(host, text, hn);
    }
    host[hn] = '\0';
    const char *p = colon + 1;
    if (!*p)
        return -1;
    long port = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        if (port <= 65535) /* past it, only the digits are checked */
            port = port * 10 + (*p - '0');
    }
    if (!strcmp(host, "localhost"))
        strcpy(host, "127.0.0.1");
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (text[0] != '[' && inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *len = sizeof *v4;
        return port > 65535 ? -2 : 0;
    }
    if (text[0] == '[' && inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof *v6;
        return port > 65535 ? -2 : 0;
    }
    return -1;
}

/* ---- the exposition ---- */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* device="/device:GPU:0",physical="0",backend="sim" (names need no escaping:
 * they are made by the runtime from fixed text and numbers). */
static void dev_labels(FILE *f, const struct vdev_ldev *d)
{
    fprintf(f, "device=\"%s\",physical=\"%d\",backend=\"%s\"", d->name, d->physical,
            d->backend->ops->name);
}

static void write_metrics(FILE *f)
{
    int n = vdev_runtime_n_devices();
    struct vdev_alloc_stats st[VDEV_MAX_LDEVS];
    for (int i = 0; i < n; i++)
        vdev_alloc_get_stats(vdev_runtime_device(i)->alloc, &st[i]);

    static const struct {
        const char *name, *help;
        size_t off;
    } gauges[] = {
        {"vdev_memory_in_use_bytes", "Bytes of live blocks on the logical device (256-byte rounded).",
         offsetof(struct vdev_alloc_stats, bytes_in_use)},
        {"vdev_memory_peak_in_use_bytes", "Most bytes in use since start-up or the last peak reset.",
         offsetof(struct vdev_alloc_stats, peak_bytes_in_use)},
        {"vdev_memory_reserved_bytes", "Bytes of device memory the allocator holds (regions).",
         offsetof(struct vdev_alloc_stats, bytes_reserved)},
        {"vdev_memory_limit_bytes", "The most bytes the logical device may reserve.",
         offsetof(struct vdev_alloc_stats, bytes_limit)},
        {"vdev_memory_largest_free_block_bytes", "Largest free block inside the reserved regions.",
         offsetof(struct vdev_alloc_stats, largest_free_block)},
    };
    for (size_t g = 0; g < VDEV_ARRAY_LEN(gauges); g++) {
        family(f, gauges[g].name, "gauge", gauges[g].help);
        for (int i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)&st[i] + gauges[g].off, sizeof v);
            fprintf(f, "%s{", gauges[g].name);
            dev_labels(f, vdev_runtime_device(i));
            fprintf(f, "} %llu\n", (unsigned long long)v);
        }
    }

    family(f, "vdev_allocations_total", "counter", "Allocations made on the logical device.");
    for (int i = 0; i < n; i++) {
        fprintf(f, "vdev_allocations_total{");
        dev_labels(f, vdev_runtime_device(i));
        fprintf(f, "} %llu\n", (unsigned long long)st[i].n_allocs_total);
    }
    family(f, "vdev_allocation_failures_total", "counter",
           "Allocations that failed for lack of memory (OOM) on the logical device.");
    for (int i = 0; i < n; i++) {
        fprintf(f, "vdev_allocation_failures_total{");
        dev_labels(f, vdev_runtime_device(i));
        fprintf(f, "} %llu\n", (unsigned long long)st[i].n_failed_allocs);
    }

    /* Governance: each device's floor and ceiling, and its card's budget. */
    struct vdev_memory_limits lim[VDEV_MAX_LDEVS];
    for (int i = 0; i < n; i++)
        vdev_pool_get(vdev_runtime_device(i)->pool, vdev_runtime_device(i)->member, &lim[i]);
    static const struct {
        const char *name, *type, *help;
        size_t off;
    } gov[] = {
        {"vdev_memory_floor_bytes", "gauge",
         "Bytes guaranteed to the logical device: its card keeps them aside for it.",
         offsetof(struct vdev_memory_limits, floor_bytes)},
        {"vdev_memory_ceiling_bytes", "gauge",
         "The most bytes the logical device may reserve (its hard limit; may change at run time).",
         offsetof(struct vdev_memory_limits, ceiling_bytes)},
        {"vdev_memory_card_budget_bytes", "gauge",
         "Bytes the logical device's card shares among its logical devices.",
         offsetof(struct vdev_memory_limits, card_budget_bytes)},
        {"vdev_memory_lends_total", "counter",
         "Times the logical device gave empty regions to another device of its card.",
         offsetof(struct vdev_memory_limits, n_lends)},
        {"vdev_memory_lent_bytes_total", "counter",
         "Bytes by which the logical device's claim dropped when it lent.",
         offsetof(struct vdev_memory_limits, lent_bytes)},
        {"vdev_memory_borrowed_bytes_total", "counter",
         "Bytes by which other devices' claims dropped for the logical device.",
         offsetof(struct vdev_memory_limits, borrowed_bytes)},
    };
    for (size_t g = 0; g < VDEV_ARRAY_LEN(gov); g++) {
        family(f, gov[g].name, gov[g].type, gov[g].help);
        for (int i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)&lim[i] + gov[g].off, sizeof v);
            fprintf(f, "%s{", gov[g].name);
            dev_labels(f, vdev_runtime_device(i));
            fprintf(f, "} %llu\n", (unsigned long long)v);
        }
    }
    family(f, "vdev_memory_priority", "gauge",
           "The logical device's priority: 1 low, 2 normal, 3 high, 4 critical.");
    for (int i = 0; i < n; i++) {
        fprintf(f, "vdev_memory_priority{");
        dev_labels(f, vdev_runtime_device(i));
        fprintf(f, "} %d\n", (int)lim[i].priority);
    }

    family(f, "vdev_ops_total", "counter", "Ops run, by logical device and op type.");
    for (int i = 0; i < n; i++) {
        const char *dn = vdev_runtime_device(i)->name;
        for (int t = 0; t < VDEV_MAX_OP_TYPES; t++) {
            const char *op = vdev_placement_op_name(t);
            uint64_t c = op ? vdev_placement_ops_of(t, i) : 0;
            if (c)
                fprintf(f, "vdev_ops_total{device=\"%s\",op=\"%s\"} %llu\n", dn, op,
                        (unsigned long long)c);
        }
    }

    /* only the pairs that copied, as vdev_ops_total lists only the ops that
     * ran: every pair of 129 devices would be 16,512 lines of zeros */
    family(f, "vdev_copied_bytes_total", "counter",
           "Bytes copied from one logical device to another.");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            const char *a = vdev_runtime_device(i)->name, *b = vdev_runtime_device(j)->name;
            uint64_t c = vdev_placement_bytes_copied(a, b);
            if (c)
                fprintf(f, "vdev_copied_bytes_total{from=\"%s\",to=\"%s\"} %llu\n", a, b,
                        (unsigned long long)c);
        }

    family(f, "vdev_op_duration_seconds", "histogram",
           "Time ops took on the logical device, where they ran (recorded while served).");
    for (int i = 0; i < n; i++) {
        const struct vdev_ldev *d = vdev_runtime_device(i);
        struct vdev_op_time_hist h;
        vdev_observe_op_times(i, &h);
        uint64_t cum = 0;
        for (int b = 0; b <= VDEV_OP_TIME_BUCKETS; b++) {
            cum += h.count[b];
            fprintf(f, "vdev_op_duration_seconds_bucket{");
            dev_labels(f, d);
            if (b < VDEV_OP_TIME_BUCKETS)
                fprintf(f, ",le=\"%g\"} %llu\n", vdev_op_time_bounds[b], (unsigned long long)cum);
            else
                fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
        }
        /* _count is the +Inf bucket: the buckets and the total are separate
         * atomics, and the format requires them to agree. */
        fprintf(f, "vdev_op_duration_seconds_sum{");
        dev_labels(f, d);
        fprintf(f, "} %.9f\n", h.sum_seconds);
        fprintf(f, "vdev_op_duration_seconds_count{");
        dev_labels(f, d);
        fprintf(f, "} %llu\n", (unsigned long long)cum);
    }

    /* The devices of strategies, labelled by replica (replicas.c), from the
     * same snapshots as the gauges above. */
    vdev_replicas_write_metrics(f, st, n);
}

void vdev_metrics_write(FILE *f) { write_metrics(f); }

/* ---- HTTP ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
                             char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned code, const char *text)
{
    char *body = vdev_strdup(text);
    if (!body)
        return MHD_NO;
    return reply(c, code, "text/plain; charset=utf-8", body, strlen(body));
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    (void)version;
    (void)upload_data;
    (void)con_cls;
    *upload_data_size = 0; /* a body (of a 405'd request) is read and dropped */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "405 method not allowed: use GET\n");
    if (strcmp(url, "/metrics") != 0)
        return reply_text(c, MHD_HTTP_NOT_FOUND, "404 not found: metrics are at /metrics\n");
    if (!vdev_is_initialized())
        return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "503 vdev is not running\n");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return MHD_NO;
    write_metrics(f);
    if (fclose(f) != 0) {
        free(buf);
        return MHD_NO;
    }
    return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, len);
}

/* ---- the request-time watchdog ---- */

static struct watched *watched_of(struct MHD_Connection *c) /* wlock held */
{
    for (int i = 0; i < M.n_conns; i++)
        if (M.conns[i].c == c)
            return &M.conns[i];
    return NULL;
}

/* libmicrohttpd, on its thread: a connection opened or closed. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    (void)socket_context;
    pthread_mutex_lock(&M.wlock);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct stat st;
        /* CONN_LIMIT bounds the connections, so the table has room; one it
         * cannot watch is still dropped when idle */
        if (ci && M.n_conns < (int)CONN_LIMIT && fstat(ci->connect_fd, &st) == 0) {
            M.conns[M.n_conns++] =
                (struct watched){.c = c,
                                 .fd = ci->connect_fd,
                                 .ino = st.st_ino,
                                 .deadline = mono_ns() + REQUEST_TIMEOUT_S * 1000000000ull};
        }
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct watched *w = watched_of(c);
        if (w)
            *w = M.conns[--M.n_conns];
    }
    pthread_mutex_unlock(&M.wlock);
}

/* libmicrohttpd, on its thread: a request was answered (or failed); the
 * next one on this connection gets a full REQUEST_TIMEOUT_S. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)con_cls;
    (void)toe;
    pthread_mutex_lock(&M.wlock);
    struct watched *w = watched_of(c);
    if (w && !w->cut)
        w->deadline = mono_ns() + REQUEST_TIMEOUT_S * 1000000000ull;
    pthread_mutex_unlock(&M.wlock);
}

/* Shuts down the socket of every connection past its deadline, then sleeps
 * until the next deadline (at most a second: a new connection's deadline is
 * REQUEST_TIMEOUT_S away) or stop. */
static void *watchdog(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&M.wlock);
    while (!M.wstop) {
        uint64_t now = mono_ns(), next = now + 1000000000ull;
        for (int i = 0; i < M.n_conns; i++) {
            struct watched *w = &M.conns[i];
            if (w->cut)
                continue;
            struct stat st;
            if (w->deadline <= now) {
                if (fstat(w->fd, &st) == 0 && st.st_ino == w->ino)
                    shutdown(w->fd, SHUT_RDWR);
                w->cut = 1;
            } else if (w->deadline < next) {
                next = w->deadline;
            }
        }
        struct timespec until = {.tv_sec = (time_t)(next / 1000000000u),
                                 .tv_nsec = (long)(next % 1000000000u)};
        pthread_cond_timedwait(&M.wcond, &M.wlock, &until);
    }
    pthread_mutex_unlock(&M.wlock);
    return NULL;
}

/* M.lock held. 0, or an errno. */
static int watchdog_start(void)
{
    pthread_condattr_t ca;
    int e = pthread_condattr_init(&ca);
    if (e)
        return e;
    if ((e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) == 0)
        e = pthread_cond_init(&M.wcond, &ca);
    pthread_condattr_destroy(&ca);
    if (e)
        return e;
    M.wstop = 0;
    M.n_conns = 0;
    if ((e = pthread_create(&M.wthread, NULL, watchdog, NULL)) != 0)
        pthread_cond_destroy(&M.wcond);
    return e;
}

static void watchdog_stop(void) /* M.lock held */
{
    pthread_mutex_lock(&M.wlock);
    M.wstop = 1;
    pthread_cond_signal(&M.wcond);
    pthread_mutex_unlock(&M.wlock);
    pthread_join(M.wthread, NULL);
    pthread_cond_destroy(&M.wcond);
    M.n_conns = 0;
}

/* ---- start and stop ---- */

/* Starts serving on `addr`; M.lock held. `what` names the source in errors
 * ("VDEV_METRICS_ADDR" or "vdev_metrics_serve"), `bad` is the status for a
 * malformed address. */
static enum vdev_status start_locked(const char *addr, const char *what, enum vdev_status bad)
{
    if (M.daemon)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: a metrics endpoint is already serving on %s (port %d); call "
                          "vdev_metrics_stop() first",
                          what, M.addr, M.port);
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    int pe = strlen(addr) >= sizeof M.addr ? -1 : parse_addr(addr, &ss, &sl);
    if (pe == -2)
        return vdev_error(bad, "%s=\"%s\": port %s is out of range (0-65535)", what, addr,
                          strrchr(addr, ':') + 1);
    if (pe != 0)
        return vdev_error(bad,
                          "%s=\"%s\": expected HOST:PORT with a numeric address or localhost, "
                          "e.g. 127.0.0.1:9400, [::1]:9400 or localhost:9400 (port 0 picks a "
                          "free one)",
                          what, addr);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return vdev_error(VDEV_ERR_IO, "%s=\"%s\": socket: %s", what, addr, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 32) != 0) {
        int e = errno;
        close(fd);
        return vdev_error(bad, "%s=\"%s\": cannot listen there: %s", what, addr, strerror(e));
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    int port = 0;
    if (getsockname(fd, (struct sockaddr *)&got, &gl) == 0)
        port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                               : ((struct sockaddr_in *)&got)->sin_port);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    int e = watchdog_start(); /* first: libmicrohttpd reports connections at once */
    if (e) {
        close(fd);
        return vdev_error(VDEV_ERR_IO, "%s=\"%s\": cannot start the watchdog thread: %s", what,
                          addr, strerror(e));
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_TIMEOUT, CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CONN_MEMORY, MHD_OPTION_CONNECTION_LIMIT, CONN_LIMIT,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, CONN_PER_IP, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!d) { /* the socket is not closed here: whether MHD closed it is not said */
        watchdog_stop();
        return vdev_error(VDEV_ERR_IO, "%s=\"%s\": libmicrohttpd could not start its thread", what,
                          addr);
    }
    M.daemon = d;
    M.port = port;
    snprintf(M.addr, sizeof M.addr, "%s", addr);
    vdev_observe_acquire();
    return VDEV_OK;
}

static void stop_locked(void)
{
    if (!M.daemon)
        return;
    /* Joins the thread (a scrape in flight finishes first) and closes the
     * listening socket too; every connection is reported closed. */
    MHD_stop_daemon(M.daemon);
    watchdog_stop();
    M.daemon = NULL;
    M.port = 0;
    M.addr[0] = '\0';
    vdev_observe_release();
}

enum vdev_status vdev_metrics_init_env(void)
{
    const char *v = getenv("VDEV_METRICS_ADDR");
    pthread_mutex_lock(&M.lock);
    M.up = 1;
    enum vdev_status st = v ? start_locked(v, "VDEV_METRICS_ADDR", VDEV_ERR_CONFIG) : VDEV_OK;
    pthread_mutex_unlock(&M.lock);
    return st;
}

void vdev_metrics_shutdown(void)
{
    pthread_mutex_lock(&M.lock);
    M.up = 0;
    stop_locked();
    pthread_mutex_unlock(&M.lock);
}

VDEV_API enum vdev_status vdev_metrics_serve(const char *addr)
{
    if (!addr)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_metrics_serve: addr is NULL");
    enum vdev_status st = vdev_init();
    if (st != VDEV_OK)
        return st;
    pthread_mutex_lock(&M.lock);
    /* A vdev_shutdown() on another thread may have begun since vdev_init():
     * an endpoint started now would outlive the devices it reads (a scrape
     * would read freed allocators), so the shutdown wins. */
    if (!M.up)
        st = vdev_error(VDEV_ERR_INVALID_ARG,
                        "vdev_metrics_serve: vdev_shutdown() began on another thread; not "
                        "serving (call vdev_metrics_serve again once it has returned)");
    else
        st = start_locked(addr, "vdev_metrics_serve", VDEV_ERR_INVALID_ARG);
    pthread_mutex_unlock(&M.lock);
    return st;
}

VDEV_API void vdev_metrics_stop(void)
{
    pthread_mutex_lock(&M.lock);
    stop_locked();
    pthread_mutex_unlock(&M.lock);
}

VDEV_API int vdev_metrics_port(void)
{
    pthread_mutex_lock(&M.lock);
    int p = M.port;
    pthread_mutex_unlock(&M.lock);
    return p;
}
