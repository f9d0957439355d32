/* alloc_oom.c — the allocator's out-of-memory message: which kind of failure
 * it is (the limit short, a lowered ceiling, the card's shared memory taken,
 * the physical device full, the host unable to map or hold it, or the free
 * memory too split) and only what would help in that case. Called from the
 * general path (alloc_grow.c's vdev_alloc_make_room and over_limit) with the
 * allocator's lock held; it counts the failure and traces it. */
#include "alloc/alloc_impl.h"
#include "alloc/govern.h"

#include <stdio.h>

/* The free memory a request could have used, as blocks: every free chunk,
 * and the room left under the limit (where growth would put a region) as one
 * more block. With a source that extends in place, that room continues the
 * region's free tail, so the two are one block. O(free chunks). */
static void free_blocks(const struct vdev_alloc *a, uint64_t *total, uint64_t *n,
                        uint64_t *largest)
{
    const struct chunk *ch = a->ch;
    uint64_t room = limit_room(a);
    uint32_t tail = NIL;
    if (room && a->src.extend && a->ext_region != NIL) {
        uint32_t t = a->reg[a->ext_region].first;
        while (ch[t].next != NO_NEIGHBOUR)
            t = ch[t].next;
        if (cstate(&ch[t]) == ST_FREE)
            tail = t;
    }
    *total = room;
    *n = room ? 1 : 0;
    *largest = room + (tail != NIL ? csize(&ch[tail]) : 0);
    for (unsigned b = 0; b < N_BINS; b++)
        for (uint32_t i = ch[b].fnext; i != b; i = ch[i].fnext) {
            uint64_t s = csize(&ch[i]);
            *total += s;
            if (i == tail)
                continue;
            (*n)++;
            if (s > *largest)
                *largest = s;
        }
}

/* The OOM error of the header; counts the failure. Called with the lock.
 * sz: the request after rounding (bytes itself when it cannot be rounded).
 * A quiet allocation's failure is not counted (vdev_alloc_malloc_quiet).
 * Says which kind of failure it is and what would help, only what applies:
 *  - exhaustion (in use + sz > limit): by how much the limit is short, or,
 *    after the limit was lowered at run time, that the ceiling was lowered;
 *  - the card's pool had no shared memory left for this device (governed):
 *    msg, vdev_pool_reclaim()'s report of whose memory is where;
 *  - the source said no below the limit (the physical device is full): its
 *    message, and that memory held by others on it would help;
 *  - the source said no for the host's sake (a simulated GPU's memory it
 *    cannot map): its message, and that it is the host's limit;
 *  - host out of memory: its message;
 *  - otherwise fragmentation: the free memory in how many blocks, the
 *    largest; vdev_memory_release_cached() is suggested only when releasing
 *    empty regions would make room and garbage collection could not do it
 *    (a source without sync).
 * The two kinds that are the host's are marked so (vdev_error_mark_host): a
 * caller can tell them from the device's lack of room. */
enum vdev_status vdev_alloc_fail_oom(struct vdev_alloc *a, uint64_t bytes, uint64_t sz,
                                     enum vdev_alloc_why why, const char *msg)
{
    char b0[32], b1[32], b2[32], b3[32], b4[32], b5[32];
    char tail[512];
    vdev_alloc_count_failed(a);
    if (a->trace)
        vdev_alloc_trace_failed(a->trace, bytes);
    uint64_t room = a->limit > a->in_use ? a->limit - a->in_use : 0;
    if (sz > room) {
        uint64_t over = a->in_use > a->limit ? a->in_use - a->limit : 0;
        uint64_t short_by = sz - room > UINT64_MAX - over ? UINT64_MAX : sz - room + over;
        /* "lowered" only while the memory in use is above the ceiling and
         * freeing memory could help: a request larger than the ceiling
         * itself, or usage that fits under it, is the ordinary short limit */
        if (a->limit_lowered && sz <= a->limit && a->in_use > a->limit)
            snprintf(tail, sizeof tail,
                     "; the ceiling was lowered at run time: new allocations fail until usage "
                     "fits under it (short by %s); would help: freeing memory on this device, a "
                     "smaller batch, a higher ceiling",
                     vdev_format_bytes(short_by, b4, sizeof b4));
        else
            snprintf(tail, sizeof tail,
                     "; the limit is short by %s; would help: a larger limit, a smaller batch",
                     vdev_format_bytes(short_by, b4, sizeof b4));
    } else if (why == WHY_CARD) {
        snprintf(tail, sizeof tail, "; %s",
                 msg && *msg ? msg : "the card's shared memory is taken");
    } else if (why == WHY_SOURCE) {
        snprintf(tail, sizeof tail,
                 "; %s; would help: vdev_memory_release_cached() or memory growth on for the "
                 "other users of the physical device, a smaller batch",
                 msg);
    } else if (why == WHY_SOURCE_HOST) {
        /* memory held on the card would not help: the host's limit */
        snprintf(tail, sizeof tail,
                 "; %s (a limit of the host, not of the card); would help: a smaller batch",
                 msg);
    } else if (why == WHY_HOST) {
        snprintf(tail, sizeof tail, "; %s", msg);
    } else {
        uint64_t total, n, largest;
        free_blocks(a, &total, &n, &largest);
        int release = !a->src.sync &&
                      vdev_alloc_release_makes_room(a, sz, vdev_alloc_empty_bytes(a));
        snprintf(tail, sizeof tail,
                 "; fragmentation: free %s in %llu block%s, largest %s; would help: %sa smaller "
                 "batch, a larger limit",
                 vdev_format_bytes(total, b4, sizeof b4), (unsigned long long)n, n == 1 ? "" : "s",
                 vdev_format_bytes(largest, b5, sizeof b5),
                 release ? "vdev_memory_release_cached(), " : "");
    }
    vdev_error(VDEV_ERR_OOM,
               "OOM when allocating %s (%llu bytes) on %s: %s in use of %s limit, largest free "
               "block %s%s",
               vdev_format_bytes(bytes, b0, sizeof b0), (unsigned long long)bytes, a->name,
               vdev_format_bytes(a->in_use, b1, sizeof b1), vdev_format_bytes(a->limit, b2, sizeof b2),
               vdev_format_bytes(vdev_alloc_largest_free(a), b3, sizeof b3), tail);
    if (sz <= room && (why == WHY_HOST || why == WHY_SOURCE_HOST))
        vdev_error_mark_host(); /* the host said no, not the device */
    return VDEV_ERR_OOM;
}
