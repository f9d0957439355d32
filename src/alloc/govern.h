/* govern.h — memory governance between the logical devices of one card:
 * floors, ceilings, priorities, lending, run-time limits.
 *
 * A pool stands for one physical device's budget, shared by the allocators
 * of its logical devices (its members). Each member has a floor (kept aside
 * for it from the start, whether reserved yet or not), a ceiling (its
 * allocator's limit) and a priority. The pool keeps one invariant:
 *
 *     sum over members of max(reserved, floor) <= budget
 *
 * so the floors always fit, and memory above them goes first come to
 * whoever reserves it, up to its ceiling. Governance acts where regions are
 * reserved and released, never per block: an allocator claims every region
 * from the pool before asking its source (vdev_pool_claim) and gives back
 * each one it releases (vdev_pool_unclaim), so a member may reserve at most
 *
 *     budget - sum over the others of max(reserved, floor)
 *
 * When the pool refuses a member (the card's shared memory is taken), the
 * allocator releases its own lock and calls vdev_pool_reclaim(): the other
 * members give back their empty regions above their floors (after their
 * device's queued work is done, waited for with their lock free), those
 * over a lowered ceiling first, then by priority, lowest first (strictly
 * lower ones before equal and higher ones), until the request fits beside
 * the asker's own empty regions; live memory is never taken, and nothing
 * is released when the empty regions cannot make room. The failure message,
 * built there, says whose memory is where and what would help.
 *
 * Locks: the pool's mutex nests inside an allocator's lock (allocator, then
 * pool), never the other way, and no pool call made under an allocator's
 * lock takes another allocator's lock. vdev_pool_reclaim() and
 * vdev_pool_set_limits() take allocators' locks one at a time, and must be
 * called with none held.
 *
 * Example (the runtime, at start-up, for a card split in two):
 *
 *     vdev_pool_t *p;
 *     vdev_pool_new("/physical_device:GPU:0", budget, &p);
 *     int m0, m1;
 *     vdev_pool_add(p, "/device:GPU:0", 4ull << 30, 4ull << 30, VDEV_PRIORITY_CRITICAL, &m0);
 *     vdev_pool_add(p, "/device:GPU:1", 0, budget, VDEV_PRIORITY_LOW, &m1);
 *     cfg.pool = p; cfg.member = m0; vdev_alloc_new(&cfg, &a0); vdev_pool_attach(p, m0, a0);
 *     ...
 *     vdev_pool_set_limits(p, m1, 0, 2ull << 30, NULL);  // any time, any thread
 */
#ifndef VDEV_ALLOC_GOVERN_H
#define VDEV_ALLOC_GOVERN_H

#include "alloc/alloc.h"

#define VDEV_POOL_MAX_MEMBERS 16 /* logical devices of one card */

/* A pool for a card of `budget` bytes (rounded down to 256), named like
 * "/physical_device:GPU:0" in messages. VDEV_ERR_OOM on host OOM. */
enum vdev_status vdev_pool_new(const char *name, uint64_t budget, vdev_pool_t **out);
/* Every member's allocator must be destroyed first. NULL is a no-op. */
void vdev_pool_destroy(vdev_pool_t *p);
/* Adds a member before its allocator exists: floor <= ceiling <= budget, the
 * floors still fitting the budget (VDEV_ERR_CONFIG otherwise, naming the
 * card); *member is its index. */
enum vdev_status vdev_pool_add(vdev_pool_t *p, const char *device, uint64_t floor, uint64_t ceiling,
                               enum vdev_priority priority, int *member);
/* Tells the pool the member's allocator (made with cfg.pool and cfg.member),
 * so it can lend; NULL detaches it (vdev_alloc_destroy does). */
void vdev_pool_attach(vdev_pool_t *p, int member, vdev_alloc_t *a);

/* ---- what allocators call, with their own lock held ---- */

/* Claims between `need` and `want` bytes more for the member: the most the
 * pool allows up to want. Returns the bytes claimed, or 0 (nothing claimed)
 * when fewer than need are left to it. */
uint64_t vdev_pool_claim(vdev_pool_t *p, int member, uint64_t want, uint64_t need);
/* Gives back bytes claimed (a region released, or a claim not used). */
void vdev_pool_unclaim(vdev_pool_t *p, int member, uint64_t bytes);
/* The most the member could hold now: budget - sum over the others of
 * max(reserved, floor). */
uint64_t vdev_pool_max_reserved(vdev_pool_t *p, int member);
/* The member's floor (regions are released for lending only above it). */
uint64_t vdev_pool_floor(vdev_pool_t *p, int member);
/* The bytes the pool has the member holding (equal to its allocator's
 * reserved bytes whenever the allocator's lock is free). */
uint64_t vdev_pool_reserved(vdev_pool_t *p, int member);

/* ---- what the runtime and the allocator call with no allocator lock ---- */

/* Lending, for a member whose request of sz bytes the pool refused, which
 * holds `own` bytes in empty regions it can release itself (its caller
 * collects them next): the other members release their empty regions above
 * their floors until sz - own fits: those holding more than their ceiling
 * (lowered while their memory was live) first, then by priority, lowest
 * first (so strictly lower priorities before equal and higher ones), then
 * most held; regions wholly above a floor first (the smallest that is
 * enough), one that reaches into a floor only when those cannot make room;
 * nothing when all of them could not make room. Then writes into report (cap
 * bytes) whose memory is where and what would help, in the words of the
 * OOM message ("GPU:1 (critical) asked for 1.00 GiB; ... GPU:2 (low) holds
 * 3.00 GiB above its floor, 2.50 GiB of it live; would help: ..."). Calls
 * the pressure callbacks: CARD_FULL for the member (only when `first`: the
 * first try of one request, which may try twice), LENT for each lender, once,
 * with how much less it now claims (what it held above its floor and gave).
 * Returns the bytes the lenders' claims dropped by. */
uint64_t vdev_pool_reclaim(vdev_pool_t *p, int member, uint64_t sz, uint64_t own, int first,
                           char *report, size_t cap);
/* The report of the last vdev_pool_reclaim() on this thread ("" if none). */
const char *vdev_pool_last_report(void);

/* Sets a member's floor and ceiling (see vdev_memory_set_limits in vdev.h:
 * the same rules and errors; ceiling 0 is the budget). *released (may be
 * NULL) gets the bytes of the member's empty regions released because the
 * ceiling went below them, and of its preallocated region when the floor
 * was lowered below it while it was empty (vdev_alloc_repin). A raised floor
 * that others' empty regions must make room for takes it as lending does
 * (vdev_pool_reclaim), releasing nothing when they cannot. */
enum vdev_status vdev_pool_set_limits(vdev_pool_t *p, int member, uint64_t floor, uint64_t ceiling,
                                      uint64_t *released);

/* Pressure calls gathered instead of made, for a caller that holds a lock of
 * its own across several changes (the runtime's vdev_runtime_card_charge):
 * it makes them once that lock is released (callbacks run with no vdev lock
 * held, and may call vdev), each to the member's callback in place then
 * (none: no call). Calls past the capacity are dropped. */
struct vdev_pool_call {
    vdev_pool_t *p;
    int member;
    enum vdev_pressure what;
    uint64_t bytes;
};
struct vdev_pool_calls {
    int n;
    struct vdev_pool_call c[2 * VDEV_POOL_MAX_MEMBERS];
};
/* Makes the gathered calls, in order, and empties c. No lock may be held. */
void vdev_pool_calls_make(struct vdev_pool_calls *c);

/* flags of vdev_pool_set_limits_ex */
#define VDEV_POOL_UNDO 1u /* the change undoes one that lowered the floor */
/* vdev_pool_set_limits with the pressure calls gathered into `calls` (NULL:
 * made before it returns). With VDEV_POOL_UNDO, the change is the rollback
 * of one that lowered the floor (a later step of the caller failed): the
 * preallocated region that change gave up, when still held, is pinned again,
 * else the floor is preallocated again when the device preallocates and its
 * memory is free (vdev_alloc_unrepin); a plain raise keeps the new floor
 * aside and reserves it on demand. */
enum vdev_status vdev_pool_set_limits_ex(vdev_pool_t *p, int member, uint64_t floor,
                                         uint64_t ceiling, unsigned flags, uint64_t *released,
                                         struct vdev_pool_calls *calls);
enum vdev_status vdev_pool_set_priority(vdev_pool_t *p, int member, enum vdev_priority priority);
/* Sets the member's pressure callback (see vdev_memory_set_pressure_callback
 * in vdev/govern.h), then waits until no call of the old one is under way,
 * but those it cannot wait for (alloc_pressure.c). No lock may be held. */
enum vdev_status vdev_pool_set_pressure(vdev_pool_t *p, int member, vdev_pressure_fn fn,
                                        void *user);
/* A snapshot of a member's limits and its card's sharing. */
void vdev_pool_get(vdev_pool_t *p, int member, struct vdev_memory_limits *out);
/* Checks the invariant (and that every attached allocator's reserved bytes
 * are what the pool counts; takes each allocator's lock in turn, so call it
 * with none held). VDEV_OK or VDEV_ERR_INTERNAL with a message. */
enum vdev_status vdev_pool_check(vdev_pool_t *p);

#endif /* VDEV_ALLOC_GOVERN_H */
