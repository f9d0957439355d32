/* check.c — counters and reporting for check.h, the fresh start every
 * configuration test needs, capturing standard error, and reading a whole
 * file. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int check_passed, check_failed;

void check_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: FAIL: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    check_failed++;
}

int check_done(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

void check_fresh(const char *sim)
{
    vdev_shutdown();
    /* unsetenv changes environ: look again from the start after each one */
    for (;;) {
        char name[256] = "";
        for (char **e = environ; *e; e++)
            if (!strncmp(*e, "VDEV_", 5) || !strncmp(*e, "TF_", 3)) {
                size_t n = strcspn(*e, "=");
                if (n < sizeof name) {
                    memcpy(name, *e, n);
                    name[n] = '\0';
                }
                break;
            }
        if (!name[0])
            break;
        unsetenv(name);
    }
    if (sim)
        setenv("VDEV_SIM_GPUS", sim, 1);
    vdev_clear_error();
}

void check_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int check_wait_flag(const void *vflag)
{
    atomic_int *flag = (atomic_int *)(uintptr_t)vflag;
    for (int i = 0; i < 120000 && !atomic_load(flag); i++)
        check_sleep_ms(1);
    return atomic_load(flag);
}

int check_run_threads(int n, void *(*fn)(void *))
{
    pthread_t t[CHECK_MAX_THREADS];
    int started = 0;
    while (started < n && started < CHECK_MAX_THREADS &&
           pthread_create(&t[started], NULL, fn, (void *)(intptr_t)started) == 0)
        started++;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    return started;
}

static FILE *cap_file;
static int cap_saved = -1;

void check_capture_begin(void)
{
    fflush(stderr);
    cap_file = tmpfile();
    cap_saved = dup(2);
    if (cap_file && cap_saved >= 0)
        dup2(fileno(cap_file), 2);
}

char *check_capture_end(void)
{
    fflush(stderr);
    if (cap_saved >= 0) {
        dup2(cap_saved, 2);
        close(cap_saved);
        cap_saved = -1;
    }
    if (!cap_file)
        return strdup("(capture failed)");
    long n = ftell(cap_file);
    char *buf = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    if (buf && n > 0) {
        rewind(cap_file);
        if (fread(buf, 1, (size_t)n, cap_file) != (size_t)n)
            buf[0] = '\0';
    }
    fclose(cap_file);
    cap_file = NULL;
    return buf ? buf : strdup("");
}

int check_all_equal(const vdev_tensor_t *t, float v)
{
    int64_t n = vdev_tensor_numel(t);
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    int ok = n >= 0 && h && vdev_tensor_to_host(t, h, (size_t)n * sizeof *h) == VDEV_OK;
    for (int64_t i = 0; ok && i < n; i++)
        ok = h[i] == v;
    free(h);
    return ok;
}

char *check_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *bigger = realloc(buf, cap *= 2);
        if (!bigger)
            free(buf);
        buf = bigger;
    }
    if (buf)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

int check_fill_device(const char *dev, void **blocks, int cap)
{
    int n = 0;
    for (uint64_t size = 1u << 20; size >= 256; size /= 4)
        while (n < cap && vdev_mem_alloc(dev, size, &blocks[n]) == VDEV_OK)
            n++;
    return n;
}

void check_own_product(const char *device, int n)
{
    static float h[64 * 64];
    if (n < 1 || n > 64) {
        check_fail(__FILE__, __LINE__, "check_own_product: n is %d, not 1 to 64", n);
        return;
    }
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push(device));
    int64_t shape[2] = {n, n};
    vdev_tensor_t *a = vdev_tensor_fill(shape, 2, VDEV_F32, 1.0);
    vdev_tensor_t *c = vdev_matmul(a, a, false, false);
    CHECK(c != NULL);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_tensor_to_host(c, h, (size_t)n * (size_t)n * sizeof h[0]));
    int all = 1;
    for (int i = 0; i < n * n; i++)
        all &= h[i] == (float)n;
    CHECK(all);
    vdev_tensor_free(c);
    vdev_tensor_free(a);
    vdev_shutdown();
}

int check_child_status(int status)
{
    if (WIFSIGNALED(status)) {
        printf("child died of signal %d%s\n", WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
        return -1;
    }
    return WEXITSTATUS(status);
}
