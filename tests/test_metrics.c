/* test_metrics.c — the Prometheus endpoint: values equal what the API
 * reports, the text format holds (promtool where installed), 404/405, huge
 * headers, malformed requests and idle clients leave the server answering,
 * VDEV_METRICS_ADDR at start-up, a serve racing vdev_shutdown() refused. Talks
 * HTTP over a plain socket. */
#define _GNU_SOURCE
#include "check.h"
#include "http_client.h"
#include "runtime/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int status_of(const char *resp)
{
    int code = 0;
    if (!resp || sscanf(resp, "HTTP/1.%*d %d", &code) != 1)
        return 0;
    return code;
}

static const char *body_of(const char *resp)
{
    const char *b = resp ? strstr(resp, "\r\n\r\n") : NULL;
    return b ? b + 4 : "";
}

/* The value of the sample whose line starts with `series` followed by a space
 * (exact name and labels); -1 when absent. */
static double sample(const char *body, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = body; p && *p;) {
        if (!strncmp(p, series, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

static double dev_sample(const char *body, const char *metric, int gpu)
{
    char s[256];
    snprintf(s, sizeof s, "%s{device=\"/device:GPU:%d\",physical=\"%d\",backend=\"sim\"}", metric,
             gpu, gpu);
    return sample(body, s);
}

static void test_values(void)
{
    check_fresh("3x1GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0"));
    int port = vdev_metrics_port();
    CHECK(port > 0);
    CHECK_STATUS(vdev_metrics_serve("127.0.0.1:0"), VDEV_ERR_INVALID_ARG); /* one at a time */
    CHECK_MSG("already serving");

    /* ops and memory on GPU:0 and GPU:1, a copy between them, an OOM on GPU:2 */
    int64_t sh[2] = {64, 64};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *a = vdev_tensor_uniform(sh, 2, -1, 1, 1);
    vdev_tensor_t *b = vdev_matmul(a, a, false, false);
    vdev_tensor_t *c = vdev_relu(b);
    CHECK_OK(vdev_device_pop());
    vdev_tensor_t *d = vdev_tensor_to(c, "GPU:1");
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *e = vdev_matmul(d, d, false, true);
    CHECK_OK(vdev_device_pop());
    CHECK(e != NULL);
    vdev_scope_begin();
    float sum = vdev_tensor_item(vdev_sum_all(e)); /* waits for the streams */
    vdev_scope_end();
    CHECK(sum == sum);
    void *big = NULL;
    CHECK_STATUS(vdev_mem_alloc("GPU:2", 4ull << 30, &big), VDEV_ERR_OOM);

    char *r = http_get(port, "/metrics");
    CHECK_EQ_U64(status_of(r), 200);
    CHECK(r && strstr(r, "text/plain; version=0.0.4"));
    const char *body = body_of(r);
    for (int g = 0; g < 3; g++) {
        char dn[32];
        snprintf(dn, sizeof dn, "GPU:%d", g);
        struct vdev_memory_info mi;
        CHECK_OK(vdev_memory_info(dn, &mi));
        CHECK_EQ_U64(dev_sample(body, "vdev_memory_in_use_bytes", g), mi.bytes_in_use);
        CHECK_EQ_U64(dev_sample(body, "vdev_memory_peak_in_use_bytes", g), mi.peak_bytes_in_use);
        CHECK_EQ_U64(dev_sample(body, "vdev_memory_reserved_bytes", g), mi.bytes_reserved);
        CHECK_EQ_U64(dev_sample(body, "vdev_memory_limit_bytes", g), mi.bytes_limit);
        CHECK_EQ_U64(dev_sample(body, "vdev_memory_largest_free_block_bytes", g),
                     mi.largest_free_block);
        CHECK_EQ_U64(dev_sample(body, "vdev_allocations_total", g), mi.n_allocs_total);
        CHECK_EQ_U64(dev_sample(body, "vdev_allocation_failures_total", g), mi.n_failed_allocs);
    }
    CHECK_EQ_U64(dev_sample(body, "vdev_allocation_failures_total", 2), 1);
    CHECK(dev_sample(body, "vdev_memory_in_use_bytes", 0) > 0);
    CHECK_EQ_U64(sample(body, "vdev_ops_total{device=\"/device:GPU:0\",op=\"MatMul\"}"),
                 vdev_placement_op_count("MatMul", "GPU:0"));
    CHECK_EQ_U64(sample(body, "vdev_ops_total{device=\"/device:GPU:1\",op=\"MatMul\"}"),
                 vdev_placement_op_count("MatMul", "GPU:1"));
    CHECK_EQ_U64(sample(body, "vdev_ops_total{device=\"/device:GPU:0\",op=\"Relu\"}"),
                 vdev_placement_op_count("Relu", "GPU:0"));
    CHECK(vdev_placement_op_count("MatMul", "GPU:0") >= 1);
    CHECK_EQ_U64(
        sample(body, "vdev_copied_bytes_total{from=\"/device:GPU:0\",to=\"/device:GPU:1\"}"),
        vdev_placement_bytes_copied("GPU:0", "GPU:1"));
    CHECK(vdev_placement_bytes_copied("GPU:0", "GPU:1") >= 64 * 64 * 4);
    /* a pair that copied nothing has no line (n devices would give n(n-1)) */
    CHECK_EQ_U64(vdev_placement_bytes_copied("GPU:1", "CPU:0"), 0);
    CHECK(!strstr(body, "vdev_copied_bytes_total{from=\"/device:GPU:1\",to=\"/device:CPU:0\"}"));
    /* the histogram: ops were timed while served; cumulative; +Inf == _count */
    const char *lab = "device=\"/device:GPU:0\",physical=\"0\",backend=\"sim\"";
    char s[256];
    snprintf(s, sizeof s, "vdev_op_duration_seconds_count{%s}", lab);
    double count = sample(body, s);
    CHECK(count >= 2);
    snprintf(s, sizeof s, "vdev_op_duration_seconds_bucket{%s,le=\"+Inf\"}", lab);
    CHECK(sample(body, s) == count);
    snprintf(s, sizeof s, "vdev_op_duration_seconds_bucket{%s,le=\"0.001\"}", lab);
    double b1 = sample(body, s);
    snprintf(s, sizeof s, "vdev_op_duration_seconds_bucket{%s,le=\"4\"}", lab);
    double b2 = sample(body, s);
    CHECK(b1 >= 0 && b1 <= b2 && b2 <= count);
    CHECK(strstr(body, "# TYPE vdev_op_duration_seconds histogram\n") != NULL);
    CHECK(strstr(body, "# TYPE vdev_ops_total counter\n") != NULL);
    CHECK(strstr(body, "# HELP vdev_memory_in_use_bytes ") != NULL);

    /* promtool's linter, where installed */
    if (system("command -v promtool >/dev/null 2>&1") == 0) {
        char path[] = "/tmp/vdev_metrics_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        if (fd >= 0) {
            FILE *f = fdopen(fd, "w");
            fputs(body, f);
            fclose(f);
            char cmd[256];
            snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
            int rc = system(cmd);
            CHECK(rc == 0);
            unlink(path);
        }
    } else {
        printf("skipped: promtool check metrics (promtool is not installed; Debian: apt-get "
               "install prometheus)\n");
    }
    free(r);

    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_tensor_free(c);
    vdev_tensor_free(d);
    vdev_tensor_free(e);
    vdev_metrics_stop();
    CHECK_EQ_U64(vdev_metrics_port(), 0);
    vdev_metrics_stop(); /* no-op */
}

static void test_robustness(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0")); /* starts the runtime itself */
    int port = vdev_metrics_port();
    CHECK(port > 0);

    char *r = http_get(port, "/nope");
    CHECK_EQ_U64(status_of(r), 404);
    free(r);
    const char post[] = "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                        "Connection: close\r\n\r\nabc";
    r = http_exchange(port, post, sizeof post - 1);
    CHECK_EQ_U64(status_of(r), 405);
    CHECK(r && strstr(r, "Allow: GET"));
    free(r);

    /* an idle client: connected, half a request line, then nothing */
    int idle = http_connect(port);
    CHECK(idle >= 0);
    CHECK(send(idle, "GET /met", 8, MSG_NOSIGNAL) == 8);

    /* a 100 KB header: libmicrohttpd refuses it (or drops the connection) */
    size_t big = 100 * 1024;
    char *req = malloc(big + 256);
    int n = sprintf(req, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 4);
    r = http_exchange(port, req, (size_t)n + big + 4);
    int code = status_of(r);
    CHECK(code == 0 || (code >= 400 && code < 500)); /* 0: closed without a word */
    printf("100 KB header answered with %d\n", code);
    free(r);
    free(req);

    /* a malformed request */
    const char junk[] = "\x01\x02 not http at all\r\n\r\n";
    r = http_exchange(port, junk, sizeof junk - 1);
    code = status_of(r);
    CHECK(code == 0 || (code >= 400 && code < 500));
    free(r);

    /* still answering, with the idle client still connected */
    r = http_get(port, "/metrics");
    CHECK_EQ_U64(status_of(r), 200);
    CHECK(r && strstr(r, "vdev_memory_limit_bytes{device=\"/device:GPU:1\""));
    free(r);

    /* the idle client is dropped (the server's timeout is 5 s; give it 120,
     * which only a hang reaches, on a loaded machine too) */
    int dropped = 0;
    for (int i = 0; i < 120 && !dropped; i++) {
        struct pollfd p = {.fd = idle, .events = POLLIN};
        if (poll(&p, 1, 1000) > 0) {
            char tmp[512];
            ssize_t k = recv(idle, tmp, sizeof tmp, 0);
            dropped = k <= 0; /* EOF (an error reply, if any, comes before it) */
        }
    }
    CHECK(dropped);
    close(idle);
    r = http_get(port, "/metrics");
    CHECK_EQ_U64(status_of(r), 200);
    free(r);
    vdev_shutdown(); /* stops the endpoint */
    CHECK_EQ_U64(vdev_metrics_port(), 0);
}

static void test_env_and_errors(void)
{
    check_fresh("2x1GiB");
    setenv("VDEV_METRICS_ADDR", "nonsense", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_MSG("VDEV_METRICS_ADDR");
    CHECK(!vdev_is_initialized());
    const char *bad[] = {"127.0.0.1", "127.0.0.1:", "127.0.0.1:70000", ":9400", "[::1:9400",
                         "127.0.0.1:94x0", "example.com:9400"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("VDEV_METRICS_ADDR", bad[i], 1);
        CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
        CHECK_MSG("VDEV_METRICS_ADDR");
    }
    setenv("VDEV_METRICS_ADDR", "127.0.0.1:0", 1);
    CHECK_OK(vdev_init());
    int port = vdev_metrics_port();
    CHECK(port > 0);
    char *r = http_get(port, "/metrics");
    CHECK_EQ_U64(status_of(r), 200);
    free(r);

    /* a port in use: the C call says so */
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    vdev_metrics_stop();
    int holder = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(holder, (struct sockaddr *)&a, sizeof a) == 0 && listen(holder, 1) == 0);
    socklen_t sl = sizeof a;
    getsockname(holder, (struct sockaddr *)&a, &sl);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(a.sin_port));
    CHECK_STATUS(vdev_metrics_serve(addr), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("cannot listen");
    close(holder);
    CHECK_STATUS(vdev_metrics_serve("localhost:x"), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_metrics_serve(NULL), VDEV_ERR_INVALID_ARG);
    /* IPv6 loopback where the machine has it */
    if (vdev_metrics_serve("[::1]:0") == VDEV_OK) {
        CHECK(vdev_metrics_port() > 0);
        vdev_metrics_stop();
    } else {
        printf("skipped: [::1] (%s)\n", vdev_last_error());
    }
    check_fresh(NULL);
}

/* vdev_metrics_serve racing vdev_shutdown on another thread: the shutdown's
 * first step (vdev_metrics_shutdown, while the devices are still there) has
 * run when the serve takes the endpoint's lock. Serving then would leave an
 * endpoint over freed devices; the serve is refused and nothing listens. */
static void test_serve_during_shutdown(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    vdev_metrics_shutdown(); /* what vdev_shutdown() does first */
    CHECK_STATUS(vdev_metrics_serve("127.0.0.1:0"), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_metrics_serve: vdev_shutdown() began on another thread; not serving (call "
              "vdev_metrics_serve again once it has returned)");
    CHECK_EQ_U64(vdev_metrics_port(), 0);
    vdev_shutdown();
    CHECK_OK(vdev_metrics_serve("127.0.0.1:0")); /* after it: starts vdev again and serves */
    CHECK(vdev_is_initialized() && vdev_metrics_port() > 0);
    vdev_shutdown();
    CHECK_EQ_U64(vdev_metrics_port(), 0);
}

int main(void)
{
    test_values();
    test_robustness();
    test_env_and_errors();
    test_serve_during_shutdown();
    return check_done();
}
