/* replicas.c — the table of strategies' replica devices (replicas.h), and
 * the metrics it gives the Prometheus endpoint.
 *
 * A fixed table of VDEV_REPLICAS_MAX_GROUPS entries under one mutex: a
 * strategy takes an entry when it is made and gives it back when it is
 * freed, and a scrape copies the entries it reports while holding the lock,
 * then writes them with the allocator statistics the scrape took once per
 * device (each a snapshot under the allocator's own lock), so a scrape never
 * waits for a step and every family shows the same moment of each device. */
#include "runtime/replicas.h"

#include <math.h>
#include <string.h>

struct group {
    int id;                          /* 0: free */
    uint32_t rgen;                   /* the runtime generation it was made under */
    int n;
    int dev_ids[VDEV_REPLICAS_MAX];
};

static struct {
    pthread_mutex_t lock;
    int next_id;
    struct group g[VDEV_REPLICAS_MAX_GROUPS];
} T = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

int vdev_replicas_register(struct vdev_ldev *const *devs, int n)
{
    if (n < 1 || n > VDEV_REPLICAS_MAX)
        return 0;
    int id = 0;
    pthread_mutex_lock(&T.lock);
    for (int k = 0; k < VDEV_REPLICAS_MAX_GROUPS; k++)
        if (!T.g[k].id) {
            struct group *g = &T.g[k];
            g->id = id = T.next_id++;
            g->rgen = vdev_runtime_generation();
            g->n = n;
            for (int i = 0; i < n; i++)
                g->dev_ids[i] = devs[i]->id;
            break;
        }
    pthread_mutex_unlock(&T.lock);
    return id;
}

void vdev_replicas_unregister(int id)
{
    if (!id)
        return;
    pthread_mutex_lock(&T.lock);
    for (int k = 0; k < VDEV_REPLICAS_MAX_GROUPS; k++)
        if (T.g[k].id == id)
            T.g[k].id = 0;
    pthread_mutex_unlock(&T.lock);
}

double vdev_replicas_imbalance(const uint64_t *peaks, int n)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < n; i++) {
        lo = peaks[i] < lo ? peaks[i] : lo;
        hi = peaks[i] > hi ? peaks[i] : hi;
    }
    if (n < 1 || hi == 0)
        return 1.0;
    return lo == 0 ? INFINITY : (double)hi / (double)lo;
}

static void family(FILE *f, const char *name, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

void vdev_replicas_write_metrics(FILE *f, const struct vdev_alloc_stats *st, int n_st)
{
    struct group live[VDEV_REPLICAS_MAX_GROUPS]; /* copied under the lock (17 KiB) */
    int n = 0;
    pthread_mutex_lock(&T.lock);
    for (int k = 0; k < VDEV_REPLICAS_MAX_GROUPS; k++)
        if (T.g[k].id && T.g[k].rgen == vdev_runtime_generation())
            live[n++] = T.g[k];
    pthread_mutex_unlock(&T.lock);
    if (n == 0)
        return;
    static const char *const names[3] = {"vdev_replica_info", "vdev_replica_memory_in_use_bytes",
                                         "vdev_replica_memory_peak_in_use_bytes"};
    static const char *const helps[3] = {
        "A logical device that holds a replica of a strategy (1 for each).",
        "Bytes in use on the logical device of a strategy's replica.",
        "Most bytes in use on the logical device of a strategy's replica since start-up or the "
        "last peak reset."};
    for (int m = 0; m < 3; m++) {
        family(f, names[m], helps[m]);
        for (int k = 0; k < n; k++)
            for (int i = 0; i < live[k].n; i++) {
                int id = live[k].dev_ids[i];
                const struct vdev_ldev *d = vdev_runtime_device(id);
                if (!d || id >= n_st)
                    continue;
                uint64_t v = m == 0 ? 1 : m == 1 ? st[id].bytes_in_use : st[id].peak_bytes_in_use;
                fprintf(f, "%s{strategy=\"%d\",replica=\"%d\",device=\"%s\"} %llu\n", names[m],
                        live[k].id, i, d->name, (unsigned long long)v);
            }
    }
    family(f, "vdev_strategy_memory_imbalance",
           "Largest peak in use among a strategy's replicas over the smallest (1 is balanced).");
    for (int k = 0; k < n; k++) {
        uint64_t peaks[VDEV_REPLICAS_MAX];
        for (int i = 0; i < live[k].n; i++) {
            int id = live[k].dev_ids[i];
            peaks[i] = vdev_runtime_device(id) && id < n_st ? st[id].peak_bytes_in_use : 0;
        }
        double x = vdev_replicas_imbalance(peaks, live[k].n);
        if (isinf(x))
            fprintf(f, "vdev_strategy_memory_imbalance{strategy=\"%d\"} +Inf\n", live[k].id);
        else
            fprintf(f, "vdev_strategy_memory_imbalance{strategy=\"%d\"} %.6f\n", live[k].id, x);
    }
}
