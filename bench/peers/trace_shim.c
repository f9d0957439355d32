/* trace_shim.c — vdev's trace parser (src/alloc/replay.h) for the peer
 * replays in this folder: loads a trace and hands over its events, the
 * blocks left live at its end and its peak, as plain arrays, so a C++
 * replay of another allocator reads exactly what vdev's replay reads. */
#include "alloc/replay.h"

#include <stdlib.h>

struct peer_event {
    unsigned long long bytes; /* 0: a free */
    unsigned slot;
};

int peer_trace_load(const char *path, struct peer_event **evs, unsigned long long *n,
                    unsigned *n_slots, unsigned long long *peak, unsigned **live_end,
                    unsigned *n_live_end);

int peer_trace_load(const char *path, struct peer_event **evs, unsigned long long *n,
                    unsigned *n_slots, unsigned long long *peak, unsigned **live_end,
                    unsigned *n_live_end)
{
    struct vdev_trace *t;
    if (vdev_trace_load(path, &t) != VDEV_OK) {
        fprintf(stderr, "%s\n", vdev_last_error());
        return 1;
    }
    *evs = malloc((t->n_events ? t->n_events : 1) * sizeof **evs);
    *live_end = malloc((t->n_live_at_end + 1) * sizeof **live_end);
    if (!*evs || !*live_end) {
        vdev_trace_free(t);
        return 1;
    }
    for (uint64_t i = 0; i < t->n_events; i++) {
        (*evs)[i].bytes = t->events[i].bytes;
        (*evs)[i].slot = t->events[i].slot;
    }
    for (uint32_t i = 0; i < t->n_live_at_end; i++)
        (*live_end)[i] = t->live_at_end[i];
    *n = t->n_events;
    *n_slots = t->n_slots;
    *peak = t->peak_live_bytes;
    *n_live_end = t->n_live_at_end;
    vdev_trace_free(t);
    return 0;
}
