/* test_envvars.c — misspelt variables: start-up warns once on stderr for each
 * VDEV_* variable vdev does not read, and for each TF_* variable close to one
 * it reads, naming the closest known variable; TensorFlow's GPU allocator
 * variables get one warning each saying what vdev has instead; variables it
 * reads, and TensorFlow's others not near them, pass in silence. Also the table of
 * every variable vdev reads, whose VDEV_SIM_GPUS examples are each a value of their own.
 * Stderr is captured around start-up. */
#define _GNU_SOURCE
#include "check.h"
#include "config/config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs vdev_init() with stderr sent to a file; returns what it wrote
 * (malloc'd, "" when nothing) and the status in *st. */
static char *init_capturing(enum vdev_status *st)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    if (!tmp || saved < 0 || dup2(fileno(tmp), 2) < 0) {
        *st = VDEV_ERR_IO;
        return strdup("(capture failed)");
    }
    *st = vdev_init();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(tmp);
    char *buf = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    if (buf && n > 0) {
        rewind(tmp);
        if (fread(buf, 1, (size_t)n, tmp) != (size_t)n)
            buf[0] = '\0';
    }
    fclose(tmp);
    return buf;
}

static void expect_stderr(int line, const char *want)
{
    enum vdev_status st;
    char *got = init_capturing(&st);
    if (st != VDEV_OK || !got || strcmp(got, want) != 0)
        check_fail(__FILE__, line, "start-up %s (%s) wrote \"%s\", expected \"%s\"",
                   vdev_status_str(st), vdev_last_error(), got ? got : "(null)", want);
    else
        check_passed++;
    free(got);
}
#define EXPECT_STDERR(want) expect_stderr(__LINE__, want)

static void test_misspelt(void)
{
    check_fresh("1x1GiB");
    setenv("VDEV_MEMORY_GROWT", "false", 1);
    EXPECT_STDERR("vdev: warning: VDEV_MEMORY_GROWT is set but vdev reads no such variable, so "
                  "it is ignored; did you mean VDEV_MEMORY_GROWTH?\n");
    /* Ignored indeed: growth is still the default. */
    struct vdev_logical_device ld[2];
    int n = 0;
    CHECK_OK(vdev_list_logical_devices(ld, 2, &n));
    CHECK(n == 2 && ld[1].policy == VDEV_POLICY_GROW);
    /* Once: a second vdev_init() is a no-op and says nothing. */
    EXPECT_STDERR("");

    check_fresh("1x1GiB");
    setenv("TF_FORCE_GPU_ALLOW_GROWHT", "true", 1);
    setenv("VDEV_VISIBLE_DEVICE", "0", 1);
    setenv("VDEV_LOG_DEVICE_PLACMENT", "1", 1);
    enum vdev_status st;
    char *got = init_capturing(&st);
    CHECK_OK(st);
    CHECK(got && strstr(got, "vdev: warning: TF_FORCE_GPU_ALLOW_GROWHT is set but vdev reads no "
                             "such variable, so it is ignored; did you mean "
                             "TF_FORCE_GPU_ALLOW_GROWTH?\n"));
    CHECK(got && strstr(got, "VDEV_VISIBLE_DEVICE is set but vdev reads no such variable, so it "
                             "is ignored; did you mean VDEV_VISIBLE_DEVICES?\n"));
    CHECK(got && strstr(got, "VDEV_LOG_DEVICE_PLACMENT is set but vdev reads no such variable, "
                             "so it is ignored; did you mean VDEV_LOG_DEVICE_PLACEMENT?\n"));
    int lines = 0;
    for (const char *p = got; p && *p; p++)
        lines += *p == '\n';
    CHECK(lines == 3);
    free(got);

    /* Any VDEV_* vdev does not read: the closest name, however far. */
    check_fresh("1x1GiB");
    setenv("VDEV_BANANA", "1", 1);
    got = init_capturing(&st);
    CHECK_OK(st);
    const char *pre = "vdev: warning: VDEV_BANANA is set but vdev reads no such variable, so it "
                      "is ignored; did you mean VDEV_";
    CHECK(got && !strncmp(got, pre, strlen(pre)));
    free(got);
    /* Case matters to getenv: a lower-case name is not read either. */
    check_fresh("1x1GiB");
    setenv("VDEV_memory_growth", "true", 1);
    EXPECT_STDERR("vdev: warning: VDEV_memory_growth is set but vdev reads no such variable, so "
                  "it is ignored; did you mean VDEV_MEMORY_GROWTH?\n");
    check_fresh("1x1GiB");
    setenv("TF_GPU_MEMORY_FRACTON", "0.5", 1);
    EXPECT_STDERR("vdev: warning: TF_GPU_MEMORY_FRACTON is set but vdev reads no such variable, "
                  "so it is ignored; did you mean TF_GPU_MEMORY_FRACTION?\n");
}

static void test_silent(void)
{
    /* Variables vdev reads, and TensorFlow's own that are nowhere near. */
    check_fresh("1x1GiB");
    setenv("VDEV_MEMORY_GROWTH", "true", 1);
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "true", 1);
    setenv("VDEV_PLACEMENT", "copy", 1);
    setenv("VDEV_SOFT_DEVICE_PLACEMENT", "0", 1);
    setenv("TF_CPP_MIN_LOG_LEVEL", "2", 1);
    setenv("TF_ENABLE_ONEDNN_OPTS", "0", 1);
    setenv("TF_CONFIG", "{}", 1);
    EXPECT_STDERR("");
}

/* TensorFlow's GPU allocator variables are about vdev's memory: each gets one
 * warning saying that it is not read and what vdev has instead. */
static void test_tf_allocator(void)
{
    check_fresh("1x1GiB");
    setenv("TF_GPU_ALLOCATOR", "cuda_malloc_async", 1);
    EXPECT_STDERR("vdev: warning: TF_GPU_ALLOCATOR is set but vdev does not read it "
                  "(TensorFlow's allocator setting): vdev has one allocator of its own\n");
    check_fresh("1x1GiB");
    setenv("TF_ENABLE_GPU_GARBAGE_COLLECTION", "false", 1);
    EXPECT_STDERR("vdev: warning: TF_ENABLE_GPU_GARBAGE_COLLECTION is set but vdev does not read "
                  "it (TensorFlow's allocator setting): vdev always gives empty regions back "
                  "before an out-of-memory error, and vdev_memory_release_cached() on request\n");
    check_fresh("1x1GiB");
    setenv("TF_GPU_HOST_MEM_LIMIT_IN_MB", "1024", 1);
    setenv("TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC", "1", 1);
    setenv("TF_DETERMINISTIC_ALLOCATOR", "1", 1);
    setenv("TF_BFC_MEMORY_DUMP", "1", 1);
    enum vdev_status st;
    char *got = init_capturing(&st);
    CHECK_OK(st);
    static const char *const names[] = {"TF_GPU_HOST_MEM_LIMIT_IN_MB",
                                        "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC",
                                        "TF_DETERMINISTIC_ALLOCATOR", "TF_BFC_MEMORY_DUMP"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "vdev: warning: %s is set but vdev does not read it",
                 names[i]);
        CHECK(got && strstr(got, want));
    }
    int lines = 0;
    for (const char *p = got; p && *p; p++)
        lines += *p == '\n';
    CHECK(lines == 4);
    free(got);
}

/* The table: every variable vdev reads, each with a description. */
static void test_table(void)
{
    int n = 0;
    const struct vdev_envvar *t = vdev_config_envvars(&n);
    CHECK(t != NULL && n >= 17);
    static const char *const read[] = {
        "VDEV_SIM_GPUS",          "VDEV_VISIBLE_DEVICES",       "VDEV_MEMORY_GROWTH",
        "VDEV_MEMORY_FRACTION",   "VDEV_LOGICAL_DEVICES",       "VDEV_PLACEMENT",
        "VDEV_LOG_DEVICE_PLACEMENT", "VDEV_SOFT_DEVICE_PLACEMENT", "VDEV_PLACEMENT_REPORT",
        "VDEV_OOM_REPORT",        "VDEV_ALLOC_TRACE",           "VDEV_TRACE_FILE",
        "VDEV_METRICS_ADDR",      "VDEV_CUDA_PLUGIN",           "TF_FORCE_GPU_ALLOW_GROWTH",
        "TF_GPU_MEMORY_FRACTION", "TF_DEVICE_MIN_SYS_MEMORY_IN_MB"};
    for (size_t i = 0; i < sizeof read / sizeof read[0]; i++) {
        int found = 0;
        for (int j = 0; j < n; j++)
            found += !strcmp(t[j].name, read[i]);
        if (found == 1)
            check_passed++;
        else
            check_fail(__FILE__, __LINE__, "%s is in the table %d times", read[i], found);
    }
    for (int j = 0; j < n; j++) {
        CHECK(t[j].values && t[j].values[0]);
        CHECK(t[j].description && strlen(t[j].description) > 10);
        CHECK(!strchr(t[j].description, '\n'));
    }
    CHECK(vdev_config_envvars(NULL) == t);
}

/* VDEV_SIM_GPUS's examples in `vdev --help`: each one, pasted as it stands, is a value of its
 * own ("3x16GiB, 2x80GiB,1x24GiB, 16GiB" read as one value is 7 GPUs, now that spaces
 * around a part are taken). */
static void test_sim_examples(void)
{
    int n = 0;
    const struct vdev_envvar *t = vdev_config_envvars(&n);
    const char *values = NULL;
    for (int j = 0; j < n; j++)
        if (!strcmp(t[j].name, "VDEV_SIM_GPUS"))
            values = t[j].values;
    CHECK(values != NULL);
    if (!values)
        return;
    CHECK_STR(values, "3x16GiB, or 2x80GiB,1x24GiB, or 16GiB");
    static const int want[] = {3, 3, 1};
    int k = 0;
    for (const char *p = values; *p && k < 3; k++) {
        size_t len = strstr(p, ", or ") ? (size_t)(strstr(p, ", or ") - p) : strlen(p);
        char example[64];
        snprintf(example, sizeof example, "%.*s", (int)len, p);
        check_fresh(example);
        int got = 0;
        CHECK_OK(vdev_list_physical_devices(NULL, 0, &got));
        if (got == 1 + want[k])
            check_passed++;
        else
            check_fail(__FILE__, __LINE__, "VDEV_SIM_GPUS=\"%s\" is %d GPUs, expected %d",
                       example, got - 1, want[k]);
        p += len + (p[len] ? 5 : 0);
    }
    CHECK(k == 3);
}

int main(void)
{
    test_misspelt();
    test_silent();
    test_tf_allocator();
    test_table();
    test_sim_examples();
    check_fresh(NULL);
    return check_done();
}
