/* test_trace_threads.c — VDEV_TRACE_FILE with ops timed on several threads:
 * the host's CPU runs each caller's ops on the caller's thread, so threads
 * may time ops of one device at once. The first thread to record an op of a
 * device gets the device's own track; every other thread gets the device's
 * next track ("/device:CPU:0 (cpu) (2)"), so no two events on a track
 * overlap. The threads here run one after the other (the tracks depend on
 * which thread records, not on timing), and a second trace starts over.
 * `vdev plot --placement` counts the ops of every track of a device as the
 * device's (tests/cli_plot.sh). */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define OPS 3

/* Runs OPS Relus on CPU:0; returns how many calls failed (checked by the
 * caller once joined: the checks' counters are not shared across threads). */
static void *run_ops(void *arg)
{
    (void)arg;
    static const int64_t shape[2] = {4, 4};
    intptr_t fails = vdev_device_push("CPU:0") != VDEV_OK;
    for (int i = 0; i < OPS; i++) {
        vdev_tensor_t *a = vdev_tensor_fill(shape, 2, VDEV_F32, 1.0f);
        vdev_tensor_t *b = vdev_relu(a);
        fails += !a || !b;
        vdev_tensor_free(b);
        vdev_tensor_free(a);
    }
    fails += vdev_device_pop() != VDEV_OK;
    return (void *)fails;
}

/* How many Relu events the trace s holds on track tid. */
static int relus_on(const char *s, int tid)
{
    char key[64];
    snprintf(key, sizeof key, "\"pid\":1,\"tid\":%d,", tid);
    int n = 0;
    for (const char *p = strstr(s, "{\"name\":\"Relu\",\"cat\":\"op\""); p;
         p = strstr(p + 1, "{\"name\":\"Relu\",\"cat\":\"op\"")) {
        const char *end = strchr(p, '\n');
        const char *k = strstr(p, key);
        if (k && (!end || k < end))
            n++;
    }
    return n;
}

/* The tid of the track named `name` in trace s, -1 when there is none. */
static int tid_named(const char *s, const char *name)
{
    char key[160];
    snprintf(key, sizeof key, "\"args\":{\"name\":\"%s\"}}", name);
    const char *k = strstr(s, key);
    if (!k)
        return -1;
    const char *line = k;
    while (line > s && line[-1] != '\n')
        line--;
    const char *t = strstr(line, "\"tid\":");
    return t && t < k ? atoi(t + 6) : -1;
}

static void trace_of_three_threads(void)
{
    char path[] = "/tmp/vdev-test-trace-threads-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    check_fresh(NULL);
    setenv("VDEV_TRACE_FILE", path, 1);
    CHECK_OK(vdev_init());
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        void *fails = (void *)1;
        if (pthread_create(&t, NULL, run_ops, NULL) == 0)
            pthread_join(t, &fails);
        CHECK(fails == NULL);
    }
    vdev_shutdown();
    unsetenv("VDEV_TRACE_FILE");
    char *s = check_slurp(path);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ_U64(relus_on(s, 0), OPS); /* the first thread: the device's own track */
        int t2 = tid_named(s, "/device:CPU:0 (cpu) (2)");
        int t3 = tid_named(s, "/device:CPU:0 (cpu) (3)");
        CHECK(t2 > 0 && t3 > 0 && t2 != t3);
        CHECK_EQ_U64(relus_on(s, t2), OPS);
        CHECK_EQ_U64(relus_on(s, t3), OPS);
        CHECK(tid_named(s, "/device:CPU:0 (cpu) (4)") == -1);
        free(s);
    }
    unlink(path);
}

int main(void)
{
    trace_of_three_threads();
    trace_of_three_threads(); /* a new trace: its tracks start over */
    return check_done();
}
