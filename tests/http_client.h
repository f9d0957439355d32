/* http_client.h — the tests' HTTP client for vdev's metrics endpoint: a
 * plain socket to 127.0.0.1:port, the request written whole, the reply read
 * until the server closes or 10 s of silence. Shared by test_metrics.c,
 * test_govern.c and test_mirrored.c; test_metrics_load.c, which opens its
 * own sockets, uses its reader. */
#ifndef VDEV_TESTS_HTTP_CLIENT_H
#define VDEV_TESTS_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* A connected socket to 127.0.0.1:port, or -1. */
static inline int http_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads fd until EOF or wait_ms of silence; the malloc'd text
 * (NUL-terminated), or NULL when host memory ran out. */
static inline char *http_read_reply(int fd, int wait_ms)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, wait_ms) <= 0)
            break;
        if (n + 4096 > cap) {
            char *more = realloc(buf, cap * 2);
            if (!more) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
        ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* Sends req (len bytes), reads until EOF or 10 s of silence; returns the
 * malloc'd response (NUL-terminated), or NULL when the connection failed or
 * host memory ran out. */
static inline char *http_exchange(int port, const char *req, size_t len)
{
    int fd = http_connect(port);
    if (fd < 0)
        return NULL;
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the server may close early (huge headers): read what it said */
        off += (size_t)w;
    }
    char *buf = http_read_reply(fd, 10000);
    close(fd);
    return buf;
}

/* GET path; the malloc'd response, or NULL (see http_exchange). */
static inline char *http_get(int port, const char *path)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                     path);
    return http_exchange(port, req, (size_t)n);
}

#endif
