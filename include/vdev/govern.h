/* vdev/govern.h — memory governance: floors, ceilings and priorities of the
 * logical devices of one card, set before start-up and changed at run time.
 * Part of the public API: vdev.h includes it, and it may be included alone
 * (it includes the parts it builds on). Same conventions as vdev.h: every
 * fallible call returns enum vdev_status and leaves a message in
 * vdev_last_error(); sizes in bytes; every call is thread-safe.
 *
 * Example: a critical model keeps 4 GiB of a card, two others share the rest
 *
 *     struct vdev_logical_device_config devs[3] = {
 *         {.floor_bytes = 4ull << 30, .priority = VDEV_PRIORITY_CRITICAL},
 *         {.priority = VDEV_PRIORITY_LOW}, {.priority = VDEV_PRIORITY_LOW}};
 *     vdev_config_set_logical_devices_ex("GPU:0", devs, 3);   // before start-up
 *     vdev_init();
 *     ...
 *     vdev_memory_set_limits("GPU:2", 0, 2ull << 30);        // any time later
 */
#ifndef VDEV_VDEV_GOVERN_H
#define VDEV_VDEV_GOVERN_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- governance: floors, ceilings and priorities ----
 * Each logical device of a card has a floor (memory guaranteed to it: the
 * card keeps it aside, and no other logical device of the card can take it),
 * a ceiling (its hard limit) and a priority. The floors of a card must fit
 * its budget; the ceilings may sum to more: the memory above the floors is
 * shared, first come, each device up to its ceiling. When a device needs
 * shared memory and the card has none left, vdev releases other devices'
 * cached memory (empty regions above their floors) before it fails: of
 * devices over a lowered ceiling first, then of lower priority (lowest
 * first), then, as an empty region hurts nobody, of any priority; live
 * memory is never taken, and nothing is released for a request that their
 * empty regions cannot make room for. A plain limit
 * (vdev_config_set_logical_devices) is a floor and a ceiling of that size:
 * a fixed share. With growth on, a device reserves its floor lazily, but
 * the card keeps it aside from the start; with preallocation the floor is
 * reserved at start-up and memory above it is taken on demand. All three
 * can change at run time (vdev_memory_set_limits, vdev_memory_set_priority). */
enum vdev_priority {
    VDEV_PRIORITY_DEFAULT = 0, /* in a configuration: normal */
    VDEV_PRIORITY_LOW,
    VDEV_PRIORITY_NORMAL,
    VDEV_PRIORITY_HIGH,
    VDEV_PRIORITY_CRITICAL,
    VDEV_PRIORITY_COUNT
};
/* "low", "normal", "high", "critical" ("normal" for DEFAULT), or "?" for a
 * value out of range. Static strings. */
VDEV_API const char *vdev_priority_name(enum vdev_priority p);

struct vdev_logical_device_config {
    uint64_t floor_bytes;        /* guaranteed; 0: none, else at least 1 MiB */
    uint64_t ceiling_bytes;      /* hard limit, at least 1 MiB; 0: the card's budget */
    enum vdev_priority priority; /* DEFAULT (0): normal */
};
/* Splits a physical GPU into n logical GPUs, each with a floor, a ceiling and
 * a priority (the text form is VDEV_LOGICAL_DEVICES's: "2GiB..6GiB@high").
 * Checks as vdev_config_set_logical_devices, and: a floor above its ceiling
 * or a priority out of range is VDEV_ERR_INVALID_ARG naming the logical
 * device. At start-up the floors must fit the card's budget, and so must
 * each ceiling (VDEV_ERR_CONFIG naming the card, its budget and the sum);
 * the ceilings together may exceed it. n == 0 removes the split. A
 * "CPU:0" takes floors and ceilings of 0 only (as many logical CPUs). */
VDEV_API enum vdev_status vdev_config_set_logical_devices_ex(
    const char *physical_device, const struct vdev_logical_device_config *devs, int n);
/* The split with floors, ceilings and priorities, as
 * vdev_config_get_logical_devices reports limits (a plain limit reads as
 * floor == ceiling; before start-up a ceiling of 0 stands for the card's
 * budget, after it the budget itself; priorities read back resolved, never
 * DEFAULT). This is the configuration start-up put in force; changes made
 * at run time (vdev_memory_set_limits, vdev_memory_set_priority) are read
 * with vdev_memory_get_limits. */
VDEV_API enum vdev_status vdev_config_get_logical_devices_ex(
    const char *physical_device, struct vdev_logical_device_config *devs, int cap, int *n);

/* ---- governance at run time ----------------------------------------------- */

struct vdev_memory_limits {
    uint64_t floor_bytes;        /* guaranteed to the device */
    uint64_t ceiling_bytes;      /* the most it may reserve (vdev_memory_info's bytes_limit) */
    enum vdev_priority priority;
    int ceiling_lowered;         /* 1 after a run-time change lowered the ceiling, until one
                                    raises it */
    uint64_t card_budget_bytes;  /* the budget its card shares among its logical devices */
    uint64_t card_floors_bytes;  /* the floors of the card's logical devices, summed */
    uint64_t card_claimed_bytes; /* what they hold or keep aside: the sum of max(reserved, floor) */
    uint64_t available_bytes;    /* how much more this device may reserve now: up to its ceiling,
                                    and what the card leaves it (0 when it holds more than that),
                                    counting an empty preallocated region it would give up */
    /* Lending since start-up (counters, never reset): two devices whose needs above their
     * floors take turns lend to each other again and again, each time after the other's
     * queued work; floors that cover each one's steady need stop it. */
    uint64_t n_lends;            /* times this device gave empty regions to another */
    uint64_t lent_bytes;         /* by how much its claim dropped when it did, summed */
    uint64_t borrowed_bytes;     /* by how much the others' claims dropped for this device */
};
/* A consistent snapshot of a logical device's floor, ceiling, priority and
 * its card's sharing. Errors as vdev_memory_info. Thread-safe. */
VDEV_API enum vdev_status vdev_memory_get_limits(const char *device,
                                                 struct vdev_memory_limits *out);
/* Sets a logical device's floor and ceiling, at any time, from any thread
 * (ceiling 0: the card's budget). Raising takes effect at once. Lowering the
 * ceiling below what the device has reserved waits for the device's queued
 * work and releases its empty regions until it fits; live memory is never
 * taken: while the memory in use stays above the ceiling, every new
 * allocation on the device fails with VDEV_ERR_OOM saying that the ceiling
 * was lowered; meanwhile a free that empties a region gives it back to the
 * card (after the device's queued work) while the device holds more than
 * its ceiling.
 * Logical CPUs take limits here too (the host's memory is their budget),
 * though start-up gives them none, as TensorFlow's. With preallocation
 * (growth off) the region reserved at start-up holds the floor: a floor
 * lowered below it (a ceiling lowered below it lowers the floor too)
 * releases it at once when it is empty, and preallocates the new floor, if
 * any, in its place as far as the new ceiling allows (the rest is reserved
 * on demand); when it is in use, it becomes an ordinary region,
 * released once emptied (above the ceiling, by the free that empties it);
 * a request that does not fit beside an empty preallocated region replaces
 * it (the floor is then reserved on demand); a raised floor is
 * kept aside and reserved on demand. Raising the floor takes the memory it
 * needs from what the card has unclaimed, else from the empty regions other
 * devices hold above their floors. Errors, nothing changed: VDEV_ERR_INVALID_ARG (a floor above
 * the ceiling, a floor or ceiling below 1 MiB other than 0), VDEV_ERR_CONFIG
 * (a ceiling above the card's budget, or floors that would no longer fit it:
 * the message names the card, its budget and the floors' sum), VDEV_ERR_OOM
 * (the new floor fits the budget but other devices hold that memory live:
 * the message says whose memory is where), and vdev_memory_info's errors for
 * the name. Recorded in the profiler trace (VDEV_TRACE_FILE) and exported
 * by the metrics endpoint. */
VDEV_API enum vdev_status vdev_memory_set_limits(const char *device, uint64_t floor_bytes,
                                                 uint64_t ceiling_bytes);
/* Sets a logical device's priority (DEFAULT: normal), at any time. A device
 * the card cannot serve takes cached memory from the other devices of its
 * card, of strictly lower priority first (lowest first), then of equal or
 * higher priority; live memory is shared first come. */
VDEV_API enum vdev_status vdev_memory_set_priority(const char *device,
                                                   enum vdev_priority priority);

/* Memory pressure on a logical device, told to its callback. */
enum vdev_pressure {
    VDEV_PRESSURE_CARD_FULL = 0, /* it asked the card for `bytes` of shared memory and there was
                                    none left: vdev now tries lending; the allocation may fail */
    VDEV_PRESSURE_LENT,          /* another device of its card, which the card could not serve
                                    otherwise, took `bytes` of its cached memory (empty regions
                                    above its floor; `bytes` is how much less it now claims:
                                    what it held above its floor and gave) */
    VDEV_PRESSURE_CEILING,       /* its ceiling was set below what it holds, or below its peak
                                    in use since start-up or the last peak reset (`bytes`: by
                                    how much) */
    VDEV_PRESSURE_COUNT
};
typedef void (*vdev_pressure_fn)(const char *device, enum vdev_pressure what, uint64_t bytes,
                                 void *user);
/* Calls fn (NULL: none) on pressure, so a model can shrink its batch before
 * its allocations fail. fn runs on the thread that met the pressure (an
 * allocating thread, or the one that lowered the ceiling) with no vdev lock
 * held; it may call vdev, and should be quick. A pressure on the same
 * device that fn's own calls meet (fn lowering its device's ceiling, or
 * allocating on it) is not told to fn again while it runs on that thread.
 * `device` is the device's "/device:GPU:1" name. Each call is made with the fn and user in place
 * when it starts. When this returns, no call made with the old fn and user
 * is still running (it waits for those under way on other threads), so the
 * old `user` may be freed; except, as waiting for them would never end, a
 * call on the calling thread itself (this called from inside the callback:
 * that call goes on once this returns) and one whose thread is itself in
 * this function from inside it (callbacks that replace callbacks on two
 * threads). So a callback that replaces itself must leave freeing its own
 * `user` until it returns, and this must not be called holding a lock the
 * callback takes. */
VDEV_API enum vdev_status vdev_memory_set_pressure_callback(const char *device, vdev_pressure_fn fn,
                                                            void *user);

#ifdef __cplusplus
}
#endif
#endif /* VDEV_VDEV_GOVERN_H */
