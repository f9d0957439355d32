/* test_thread_names.c — the threads vdev starts carry names that say what
 * they are, as top -H, ps -L and debuggers show them: a simulated GPU's own
 * stream "vdev-simG" (GPU G), a worker of the host kernels' pool
 * "vdev-poolN", a mirrored strategy's replica "vdev-replicaN". Read back from
 * /proc/self/task/TID/comm after each kind has started. */
#define _GNU_SOURCE
#include "check.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 if a thread of this process is named `name`. */
static int has_thread(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(comm, sizeof comm, f))
                comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        found = strcmp(comm, name) == 0;
    }
    closedir(d);
    return found;
}

int main(void)
{
    /* one simulated GPU: one stream, so the pool splits large kernels */
    setenv("VDEV_SIM_GPUS", "1x64MiB", 1);
    CHECK_OK(vdev_init());
    CHECK(has_thread("vdev-sim0"));
    struct vdev_thread_info ti;
    CHECK_OK(vdev_thread_info(&ti));
    int64_t shape[] = {1 << 22};
    CHECK_OK(vdev_device_push("CPU:0"));
    vdev_tensor_t *a = vdev_tensor_ones(shape, 1, VDEV_F32);
    CHECK(a != NULL);
    vdev_tensor_t *b = vdev_add(a, a);
    CHECK(b != NULL);
    CHECK_OK(vdev_device_pop());
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    if (ti.kernel_threads > 1) /* one CPU: the pool has no worker to name */
        CHECK(has_thread("vdev-pool1"));
    else
        printf("one CPU: no pool worker to check\n");
    vdev_shutdown();
    /* two: each card's own stream, and a replica thread per GPU */
    setenv("VDEV_SIM_GPUS", "2x64MiB", 1);
    CHECK_OK(vdev_init());
    CHECK(has_thread("vdev-sim0"));
    CHECK(has_thread("vdev-sim1"));
    CHECK(!has_thread("vdev-sim2"));
    vdev_strategy_t *s = NULL;
    CHECK_OK(vdev_mirrored_strategy_new(NULL, 0, &s));
    CHECK(has_thread("vdev-replica0"));
    CHECK(has_thread("vdev-replica1"));
    vdev_strategy_free(s);
    vdev_shutdown();
    return check_done();
}
