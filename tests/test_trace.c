/* test_trace.c — VDEV_TRACE_FILE: configuration errors (empty, unwritable),
 * and a trace that is complete JSON after vdev_shutdown, with the device
 * tracks named, op and copy events and memory counters. The file's content is
 * checked by looking for its parts; tests/cli_trace.sh parses it fully. */
#define _GNU_SOURCE
#include "check.h"

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

int main(void)
{
    test_errors();
    test_trace_written();
    return check_done();
}
