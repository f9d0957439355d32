/* test_trace.c — VDEV_TRACE_FILE: configuration errors (empty, unwritable),
 * a trace that is complete JSON after vdev_shutdown, with the device tracks
 * named, op and copy events and memory counters, and write failures (a full
 * disk: /dev/full) reported once on standard error and by vdev_shutdown in
 * vdev_last_error, whether they show during the run or only at the final
 * flush and close. The file's content is checked by looking for its parts;
 * tests/cli_trace.sh parses it fully. */
#define _GNU_SOURCE
#include "check.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

static void test_errors(void)
{
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", "", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_MSG("VDEV_TRACE_FILE");
    CHECK(!vdev_is_initialized());
    setenv("VDEV_TRACE_FILE", "/nonexistent-dir/vdev/run.json", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_IO);
    CHECK_MSG("/nonexistent-dir/vdev/run.json");
    CHECK(!vdev_is_initialized());
    unsetenv("VDEV_TRACE_FILE"); /* the configuration can be fixed and retried */
    CHECK_OK(vdev_init());
    vdev_shutdown();
}

/* The in_use of the last memory counter of `dev` in trace s (-1: none). */
static long long last_in_use(const char *s, const char *dev)
{
    char key[96];
    snprintf(key, sizeof key, "\"name\":\"memory %s\",\"ph\":\"C\"", dev);
    const char *last = NULL;
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key))
        last = p;
    const char *v = last ? strstr(last, "\"in_use\":") : NULL;
    return v ? atoll(v + 9) : -1;
}

static void test_trace_written(void)
{
    char path[] = "/tmp/vdev-test-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", path, 1);
    CHECK_OK(vdev_init());
    static const int64_t shape[2] = {8, 8};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *a = vdev_tensor_fill(shape, 2, VDEV_F32, 1.0f);
    vdev_tensor_t *b = vdev_relu(a);
    CHECK_OK(vdev_device_pop());
    vdev_tensor_t *c = vdev_tensor_to(b, "GPU:1");
    CHECK(a && b && c);
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_tensor_free(c);
    /* vdev_mem_alloc's out-of-memory failure is an OOM event too */
    void *big = NULL;
    CHECK_STATUS(vdev_mem_alloc("GPU:1", 4ull << 30, &big), VDEV_ERR_OOM);
    vdev_shutdown();
    char *s = slurp(path);
    CHECK(s != NULL);
    if (s) {
        size_t n = strlen(s);
        CHECK(n > 4 && s[0] == '[' && strcmp(s + n - 3, "\n]\n") == 0);
        CHECK(strstr(s, "\"args\":{\"name\":\"/device:GPU:0 (sim)\"}") != NULL);
        CHECK(strstr(s, "\"args\":{\"name\":\"/device:GPU:1 (sim)\"}") != NULL);
        CHECK(strstr(s, "{\"name\":\"Relu\",\"cat\":\"op\",\"ph\":\"X\"") != NULL);
        CHECK(strstr(s, "\"name\":\"Copy\"") != NULL);
        CHECK(strstr(s, "\"from\":\"/device:GPU:0\",\"to\":\"/device:GPU:1\"") != NULL);
        CHECK(strstr(s, "\"name\":\"memory /device:GPU:0\",\"ph\":\"C\"") != NULL);
        CHECK(strstr(s, "\"name\":\"memory /device:GPU:1\",\"ph\":\"C\"") != NULL);
        /* every tensor freed: the pictures end at nothing in use (a sample
         * skipped for coming soon after another is written at the end) */
        CHECK(last_in_use(s, "/device:GPU:0") == 0);
        CHECK(strstr(s, "{\"name\":\"OOM\",\"cat\":\"oom\",\"ph\":\"i\"") != NULL);
        CHECK(last_in_use(s, "/device:GPU:1") == 0);
        CHECK(strstr(s, ",\n]") == NULL && strstr(s, "[,") == NULL);
        free(s);
    }
    /* after shutdown nothing more is written, and a new start-up starts a new trace */
    unsetenv("VDEV_TRACE_FILE");
    CHECK_OK(vdev_init());
    vdev_shutdown();
    s = slurp(path);
    CHECK(s && strcmp(s + strlen(s) - 3, "\n]\n") == 0);
    free(s);
    unlink(path);
}

/* Standard error goes to a temporary file between capture_begin and
 * capture_end, which returns what was written (malloc'd). */
static int saved_fd = -1;
static char cap_path[] = "/tmp/vdev-test-stderr-XXXXXX";

static void capture_begin(void)
{
    int fd = mkstemp(cap_path);
    CHECK(fd >= 0);
    fflush(stderr);
    saved_fd = dup(2);
    CHECK(saved_fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
}

static char *capture_read(void)
{
    fflush(stderr);
    return slurp(cap_path);
}

static char *capture_end(void)
{
    char *s = capture_read();
    dup2(saved_fd, 2);
    close(saved_fd);
    unlink(cap_path);
    strcpy(cap_path, "/tmp/vdev-test-stderr-XXXXXX");
    return s;
}

static const char FULL_MSG[] =
    "VDEV_TRACE_FILE=\"/dev/full\": write failed: No space left on device (the trace is "
    "incomplete)";

/* A short run: everything fits stdio's buffer, so only the flush and the
 * close at shutdown meet the full disk. */
static void test_full_at_close(void)
{
    if (access("/dev/full", W_OK) != 0) {
        printf("skipped: /dev/full is not writable here\n");
        return;
    }
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", "/dev/full", 1);
    CHECK_OK(vdev_init());
    static const int64_t shape[1] = {4};
    vdev_tensor_t *a = vdev_tensor_fill(shape, 1, VDEV_F32, 1.0f);
    CHECK(a != NULL);
    vdev_tensor_free(a);
    capture_begin();
    vdev_shutdown();
    char *err = capture_end();
    CHECK(vdev_last_status() == VDEV_ERR_IO);
    CHECK_STR(vdev_last_error(), FULL_MSG);
    char want[512];
    snprintf(want, sizeof want, "vdev: warning: %s\n", FULL_MSG);
    CHECK_STR(err, want);
    free(err);
    /* a new start-up with a good trace is not haunted by the old failure */
    char path[] = "/tmp/vdev-test-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", path, 1);
    CHECK_OK(vdev_init());
    capture_begin();
    vdev_shutdown();
    err = capture_end();
    CHECK_STR(err, "");
    CHECK(vdev_last_status() != VDEV_ERR_IO);
    free(err);
    char *s = slurp(path);
    CHECK(s && strlen(s) > 3 && strcmp(s + strlen(s) - 3, "\n]\n") == 0);
    free(s);
    unlink(path);
}

/* A longer run: the stream threads' buffers and the memory counters reach
 * the file while ops run, so the failure shows (once) before shutdown, and
 * shutdown reports it again in vdev_last_error, not on standard error. */
static void test_full_during_run(void)
{
    if (access("/dev/full", W_OK) != 0)
        return;
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", "/dev/full", 1);
    CHECK_OK(vdev_init());
    capture_begin();
    static const int64_t shape[2] = {4, 4};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *a = vdev_tensor_fill(shape, 2, VDEV_F32, 1.0f);
    for (int i = 0; i < 4000 && a; i++) { /* ~150 bytes of trace per op: 600 KB */
        vdev_tensor_t *b = vdev_relu(a);
        vdev_tensor_free(a);
        a = b;
    }
    CHECK(a != NULL);
    float host[16];
    CHECK_OK(vdev_tensor_to_host(a, host, sizeof host)); /* waits for the stream */
    CHECK_OK(vdev_device_pop());
    vdev_tensor_free(a);
    char *during = capture_read();
    char want[512];
    snprintf(want, sizeof want, "vdev: warning: %s\n", FULL_MSG);
    CHECK_STR(during, want);
    free(during);
    vdev_shutdown();
    char *err = capture_end();
    CHECK_STR(err, want); /* still one line */
    free(err);
    CHECK(vdev_last_status() == VDEV_ERR_IO);
    CHECK_STR(vdev_last_error(), FULL_MSG);
    check_fresh(NULL);
}

int main(void)
{
    test_errors();
    test_trace_written();
    test_full_at_close();
    test_full_during_run();
    return check_done();
}
