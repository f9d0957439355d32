/* test_trace_rerun.c — vdev_init() after vdev_shutdown() in one process
 * starts VDEV_TRACE_FILE (and VDEV_ALLOC_TRACE) afresh: the earlier run's
 * events are replaced, and standard error says so in one line naming the
 * file and the bytes lost. No
 * line when nothing of this process's is lost: the earlier trace moved away
 * (renamed: a new file is made), emptied by hand, or another file named for
 * the second run (the first left whole); nor on the first start-up, over a
 * file this process did not write. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One run: start-up, an op on GPU:0, shutdown. What it printed on standard
 * error (malloc'd). */
static char *one_run(void)
{
    check_capture_begin();
    CHECK_OK(vdev_init());
    int64_t sh[1] = {8};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *a = vdev_tensor_uniform(sh, 1, 0, 1, 1);
    CHECK(a != NULL);
    vdev_device_pop();
    vdev_tensor_free(a);
    vdev_shutdown();
    return check_capture_end();
}

static long long size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void test_rerun(void)
{
    char dir[] = "/tmp/vdev_rerun_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], moved[128], other[128];
    snprintf(path, sizeof path, "%s/run.json", dir);
    snprintf(moved, sizeof moved, "%s/moved.json", dir);
    snprintf(other, sizeof other, "%s/other.json", dir);

    /* a file this process did not write: replaced without a word */
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("an older process's trace\n", f);
    fclose(f);
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", path, 1);
    char *err = one_run();
    CHECK_STR(err, "");
    free(err);
    long long first = size_of(path);
    CHECK(first > 100);

    /* the same file again: replaced, said once */
    err = one_run();
    char want[512];
    snprintf(want, sizeof want,
             "vdev: warning: VDEV_TRACE_FILE=\"%s\": replacing this process's trace of an "
             "earlier run (%lld bytes): vdev_init() after vdev_shutdown() starts it afresh; set "
             "VDEV_TRACE_FILE to another file before vdev_init() to keep both\n",
             path, first);
    CHECK_STR(err, want);
    free(err);
    char *s = check_slurp(path);
    CHECK(s && strncmp(s, "[\n", 2) == 0 && strstr(s, "\n]\n") == s + strlen(s) - 3);
    free(s); /* one run's trace: one array, closed once */

    /* renamed away: the next run makes a new file */
    CHECK(rename(path, moved) == 0);
    err = one_run();
    CHECK_STR(err, "");
    free(err);
    /* emptied by hand: nothing to lose */
    CHECK(truncate(path, 0) == 0);
    err = one_run();
    CHECK_STR(err, "");
    free(err);
    /* another file: the first is left whole */
    long long kept = size_of(path);
    setenv("VDEV_TRACE_FILE", other, 1);
    err = one_run();
    CHECK_STR(err, "");
    free(err);
    CHECK(size_of(path) == kept && kept > 100);

    unlink(path);
    unlink(moved);
    unlink(other);
    rmdir(dir);
    check_fresh(NULL);
}

/* The allocation trace, by the same rules: replaced and said; not for a
 * file this process did not write, nor one renamed away. */
static void test_alloc_trace_rerun(void)
{
    char dir[] = "/tmp/vdev_rerun_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], moved[128];
    snprintf(path, sizeof path, "%s/alloc.trace", dir);
    snprintf(moved, sizeof moved, "%s/moved.trace", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("an older process's trace\n", f);
    fclose(f);
    check_fresh("2x1GiB");
    unsetenv("VDEV_TRACE_FILE");
    setenv("VDEV_ALLOC_TRACE", path, 1);
    char *err = one_run();
    CHECK_STR(err, "");
    free(err);
    long long first = size_of(path);
    char *s = check_slurp(path);
    CHECK(s && strncmp(s, "# trace v1 source=vdev", 22) == 0 && strstr(s, "\na 0 "));
    free(s);

    err = one_run();
    char want[512];
    snprintf(want, sizeof want,
             "vdev: warning: VDEV_ALLOC_TRACE=\"%s\": replacing this process's allocation "
             "trace of an earlier run (%lld bytes): vdev_init() after vdev_shutdown() starts it "
             "afresh; set VDEV_ALLOC_TRACE to another file before vdev_init() to keep both\n",
             path, first);
    CHECK_STR(err, want);
    free(err);

    CHECK(rename(path, moved) == 0);
    err = one_run();
    CHECK_STR(err, "");
    free(err);

    unsetenv("VDEV_ALLOC_TRACE");
    unlink(path);
    unlink(moved);
    rmdir(dir);
    check_fresh(NULL);
}

int main(void)
{
    test_rerun();
    test_alloc_trace_rerun();
    return check_done();
}
