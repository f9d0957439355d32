/* test_metrics_load.c — the metrics endpoint under hostile load, over plain
 * sockets on loopback (127.0.0.x addresses stand for distinct clients):
 *  - 64 clients from 64 addresses that each send one header line every 2 s
 *    (never idle long enough for the idle timeout) do not starve a scrape,
 *    and each of them is cut by the server before its trickle ends;
 *  - one address gets at most its share of connections: the ones past it
 *    are refused first, while the others still hold;
 *  - a flood of 200 connections at once leaves the server answering.
 * Waits are bounded (a failure fails, it never blocks); nothing asserts on
 * how fast the server is, only on what happens before a generous end. */
#define _GNU_SOURCE
#include "check.h"
#include "http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define N_TRICKLE 64
#define TRICKLE_EVERY_S 2
#define TRICKLE_FOR_S 120 /* well past the server's 10 s bound, on a loaded machine too */
#define PER_IP 16        /* the server's connections per client address */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A connection to 127.0.0.1:port from the loopback address `from` (host
 * order, e.g. 0x7f000005 for 127.0.0.5); -1 on failure. */
static int connect_from(int port, uint32_t from)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in me = {.sin_family = AF_INET};
    me.sin_addr.s_addr = htonl(from);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    return send(fd, s, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static int status_of(const char *resp)
{
    int code = 0;
    if (!resp || sscanf(resp, "HTTP/1.%*d %d", &code) != 1)
        return 0;
    return code;
}

/* A whole scrape from 127.0.0.1: the status (0: refused or no answer). */
static int scrape(int port)
{
    int fd = connect_from(port, 0x7f000001);
    if (fd < 0)
        return 0;
    int code = 0;
    if (send_all(fd, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n") ==
        0) {
        char *r = http_read_reply(fd, 10000);
        code = status_of(r);
        free(r);
    }
    close(fd);
    return code;
}

/* Whether the server has closed fd (EOF or reset), without waiting. */
static int closed_by_server(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    char tmp[256];
    ssize_t k = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* The trickling clients, run by a thread of their own so that a scrape
 * waiting for its answer never pauses them. */
static struct {
    int fd[N_TRICKLE];
    int cut[N_TRICKLE];
    _Atomic int n_cut;
    _Atomic int done; /* the trickle has ended (all cut, or TRICKLE_FOR_S passed) */
    double took;      /* seconds until every client was cut */
} TR;

static void *trickle(void *arg)
{
    (void)arg;
    double start = now_s(), next = start;
    int line = 0;
    while (now_s() - start < TRICKLE_FOR_S && TR.n_cut < N_TRICKLE) {
        if (now_s() >= next) { /* one header line each, every 2 s */
            char hdr[64];
            snprintf(hdr, sizeof hdr, "X-Trickle-%d: x\r\n", line++);
            for (int i = 0; i < N_TRICKLE; i++)
                if (TR.fd[i] >= 0 && !TR.cut[i])
                    (void)send_all(TR.fd[i], hdr);
            next += TRICKLE_EVERY_S;
        }
        for (int i = 0; i < N_TRICKLE; i++)
            if (TR.fd[i] >= 0 && !TR.cut[i] && closed_by_server(TR.fd[i])) {
                TR.cut[i] = 1;
                TR.n_cut++;
            }
        struct timespec nap = {.tv_nsec = 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    TR.took = now_s() - start;
    TR.done = 1;
    return NULL;
}

static void test_trickle(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0"));
    int port = vdev_metrics_port();
    CHECK(port > 0);
    int open_n = 0;
    for (int i = 0; i < N_TRICKLE; i++) { /* from 127.0.0.10 ... 127.0.0.73 */
        TR.fd[i] = connect_from(port, 0x7f00000a + (uint32_t)i);
        CHECK(TR.fd[i] >= 0);
        if (TR.fd[i] >= 0 && send_all(TR.fd[i], "GET /metrics HTTP/1.1\r\n") == 0)
            open_n++;
    }
    CHECK(open_n == N_TRICKLE);
    pthread_t th;
    double start = now_s();
    CHECK(pthread_create(&th, NULL, trickle, NULL) == 0);
    int scraped = 0;
    while (!TR.done && !scraped) {
        scraped = scrape(port) == 200 && !TR.done;
        if (scraped)
            printf("scraped %.1f s into the trickle\n", now_s() - start);
    }
    pthread_join(th, NULL);
    CHECK(scraped);               /* a scrape got through while they trickled */
    CHECK(TR.n_cut == N_TRICKLE); /* and the server cut every one of them */
    printf("%d of %d trickling clients cut by the server within %.1f s\n", TR.n_cut, N_TRICKLE,
           TR.took);
    for (int i = 0; i < N_TRICKLE; i++)
        if (TR.fd[i] >= 0)
            close(TR.fd[i]);
    CHECK(scrape(port) == 200);
    vdev_metrics_stop();
}

/* PER_IP + 4 connections from one address, each holding a half request and
 * sending a byte a second: the first PER_IP are kept, the last 4 refused, so
 * the first 4 connections to end are the last 4 opened; a scrape from
 * another address gets through meanwhile. */
static void test_per_address(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0"));
    int port = vdev_metrics_port();
    enum { N = PER_IP + 4 };
    int fd[N], ended[N] = {0}, order[N], n_ended = 0;
    for (int i = 0; i < N; i++) {
        fd[i] = connect_from(port, 0x7f000005); /* 127.0.0.5 */
        CHECK(fd[i] >= 0);
        if (fd[i] >= 0)
            (void)send_all(fd[i], "GET /metr");
    }
    double start = now_s(), next = start;
    while (n_ended < 4 && now_s() - start < 30) {
        for (int i = 0; i < N; i++)
            if (fd[i] >= 0 && !ended[i] && closed_by_server(fd[i])) {
                ended[i] = 1;
                order[n_ended++] = i;
            }
        if (now_s() >= next) {
            for (int i = 0; i < N; i++)
                if (fd[i] >= 0 && !ended[i])
                    (void)send_all(fd[i], "i");
            next += 1;
        }
        struct timespec nap = {.tv_nsec = 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    CHECK(n_ended >= 4);
    for (int k = 0; k < n_ended && k < 4; k++)
        CHECK(order[k] >= PER_IP); /* refused: opened after the first PER_IP */
    CHECK(scrape(port) == 200);    /* 127.0.0.1 has its own share */
    for (int i = 0; i < N; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    vdev_metrics_stop();
}

/* 200 connections from 200 addresses, all open at once, then a request on
 * each: every one is answered or refused (none hangs), some are served,
 * and the server answers a scrape afterwards. */
static void test_flood(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0"));
    int port = vdev_metrics_port();
    enum { N = 200 };
    int fd[N];
    for (int i = 0; i < N; i++) /* 127.0.1.1 ... 127.0.1.200 */
        fd[i] = connect_from(port, 0x7f000101 + (uint32_t)i);
    int served = 0, refused = 0, other = 0;
    for (int i = 0; i < N; i++)
        if (fd[i] >= 0)
            (void)send_all(fd[i], "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    for (int i = 0; i < N; i++) {
        if (fd[i] < 0) {
            refused++;
            continue;
        }
        char *r = http_read_reply(fd[i], 30000);
        int code = status_of(r);
        if (code == 200)
            served++;
        else if (r && !r[0])
            refused++;
        else
            other++;
        free(r);
        close(fd[i]);
    }
    printf("flood of %d: %d served, %d refused, %d other\n", N, served, refused, other);
    CHECK(served + refused == N);
    CHECK(served >= 1);
    CHECK(scrape(port) == 200);
    vdev_metrics_stop();
    check_fresh(NULL);
}

int main(void)
{
    test_trickle();
    test_per_address();
    test_flood();
    return check_done();
}
