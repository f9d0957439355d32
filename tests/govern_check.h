/* govern_check.h — what the tests of one card shared by several logical
 * devices (the governance tests) need again and again: a fresh simulated
 * card without the driver's reserve (so the figures are round), a device's
 * reserved bytes, the pressure calls a device got, and every allocator's
 * and every pool's invariant walk after each step. */
#ifndef VDEV_TESTS_GOVERN_CHECK_H
#define VDEV_TESTS_GOVERN_CHECK_H

#include "check.h"
#include "runtime/runtime.h"

#include <stdlib.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* A fresh start on one simulated card of `card` with no driver reserve. */
static inline void fresh_card(const char *card)
{
    check_fresh(card);
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "0", 1);
}

static inline uint64_t reserved(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_reserved;
}

/* The pressure calls a device got: vdev_memory_set_pressure_callback(dev,
 * on_pressure, &events). */
struct events {
    int n[VDEV_PRESSURE_COUNT];
    uint64_t bytes[VDEV_PRESSURE_COUNT]; /* summed */
};

static inline void on_pressure(const char *device, enum vdev_pressure what, uint64_t bytes,
                               void *user)
{
    (void)device;
    struct events *e = user;
    e->n[what]++;
    e->bytes[what] += bytes;
}

/* Every allocator's invariant walk and every pool's invariant. */
static inline void invariants_hold(int line)
{
    for (int i = 0; i < vdev_runtime_n_devices(); i++) {
        struct vdev_ldev *d = vdev_runtime_device(i);
        if (vdev_alloc_check(d->alloc) != VDEV_OK || vdev_pool_check(d->pool) != VDEV_OK)
            check_fail(__FILE__, line, "%s: %s", d->name, vdev_last_error());
        else
            check_passed++;
    }
}
#define INVARIANTS_HOLD() invariants_hold(__LINE__)

#endif
