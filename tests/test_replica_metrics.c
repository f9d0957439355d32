/* test_replica_metrics.c — a scrape's replica families (replicas.c) show the
 * allocator statistics the scrape took once per device, the ones its
 * vdev_memory_* gauges show, and read no statistics of their own: a peak
 * reset between two snapshots would otherwise let one scrape show a
 * replica's peak below its bytes in use. The snapshots handed in here hold
 * values no allocator has (in use 3000 over a peak of 5000, ...), so each
 * line must carry exactly them; a device past the snapshots is left out.
 * No timing: the race itself is not provoked, the single source is checked. */
#define _GNU_SOURCE
#include "check.h"
#include "runtime/replicas.h"

#include <stdlib.h>
#include <string.h>

/* What vdev_replicas_write_metrics writes for the n_st snapshots st
 * (malloc'd). */
static char *written(const struct vdev_alloc_stats *st, int n_st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    vdev_replicas_write_metrics(f, st, n_st);
    CHECK(fclose(f) == 0);
    return buf;
}

static void test_one_snapshot(void)
{
    check_fresh("3x1GiB");
    CHECK_OK(vdev_init());
    struct vdev_ldev *devs[2];
    int g0 = -1;
    for (int i = 0; i < vdev_runtime_n_devices(); i++)
        if (!strcmp(vdev_runtime_device(i)->name, "/device:GPU:0"))
            g0 = i;
    CHECK(g0 >= 0 && g0 + 2 <= vdev_runtime_n_devices());
    devs[0] = vdev_runtime_device(g0);
    devs[1] = vdev_runtime_device(g0 + 1);
    CHECK_STR(devs[1]->name, "/device:GPU:1");
    int id = vdev_replicas_register(devs, 2);
    CHECK(id > 0);

    /* a real 4 KiB block on GPU:0: the snapshots below, not it, are shown */
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 4096, &p));
    struct vdev_alloc_stats st[VDEV_MAX_LDEVS];
    memset(st, 0, sizeof st);
    st[g0].bytes_in_use = 3000;
    st[g0].peak_bytes_in_use = 5000;
    st[g0 + 1].bytes_in_use = 1000;
    st[g0 + 1].peak_bytes_in_use = 2000;
    char *out = written(st, vdev_runtime_n_devices());
    char want[1024];
    snprintf(want, sizeof want,
             "vdev_replica_memory_in_use_bytes{strategy=\"%d\",replica=\"0\","
             "device=\"/device:GPU:0\"} 3000\n"
             "vdev_replica_memory_in_use_bytes{strategy=\"%d\",replica=\"1\","
             "device=\"/device:GPU:1\"} 1000\n",
             id, id);
    CHECK(strstr(out, want) != NULL);
    snprintf(want, sizeof want,
             "vdev_replica_memory_peak_in_use_bytes{strategy=\"%d\",replica=\"0\","
             "device=\"/device:GPU:0\"} 5000\n"
             "vdev_replica_memory_peak_in_use_bytes{strategy=\"%d\",replica=\"1\","
             "device=\"/device:GPU:1\"} 2000\n",
             id, id);
    CHECK(strstr(out, want) != NULL);
    snprintf(want, sizeof want, "vdev_strategy_memory_imbalance{strategy=\"%d\"} 2.500000\n", id);
    CHECK(strstr(out, want) != NULL);
    free(out);

    /* GPU:1 past the snapshots: its lines are left out, its peak counts 0 */
    out = written(st, g0 + 1);
    CHECK(strstr(out, "device=\"/device:GPU:0\"} 3000\n") != NULL);
    CHECK(strstr(out, "/device:GPU:1") == NULL);
    snprintf(want, sizeof want, "vdev_strategy_memory_imbalance{strategy=\"%d\"} +Inf\n", id);
    CHECK(strstr(out, want) != NULL);
    free(out);

    vdev_replicas_unregister(id);
    CHECK_OK(vdev_mem_free("GPU:0", p));
    vdev_shutdown();
}

int main(void)
{
    test_one_snapshot();
    return check_done();
}
