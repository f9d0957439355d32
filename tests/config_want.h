/* config_want.h — what the configuration tests share: the logical GPUs that
 * start-up must make (EXPECT_GPUS), expected errors, and memory queries.
 * Included by the test_config*.c files only. */
#ifndef VDEV_TEST_CONFIG_WANT_H
#define VDEV_TEST_CONFIG_WANT_H

#include "check.h"
#include "config/config.h"

#include <stdlib.h>
#include <string.h>

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define RESERVE (1536 * MiB)

/* ---- what start-up made ---- */

struct want {
    int physical;
    uint64_t limit;
    enum vdev_memory_policy policy;
};

/* Checks the logical GPUs (after CPU:0) against w[0..n), and that a
 * preallocating device holds its whole limit and a growing one nothing. */
static inline void expect_gpus(int line, const struct want *w, int n)
{
    struct vdev_logical_device ld[40];
    int got = -1;
    enum vdev_status st = vdev_list_logical_devices(ld, 40, &got);
    if (st != VDEV_OK) {
        check_fail(__FILE__, line, "vdev_list_logical_devices: %s (%s)", vdev_status_str(st),
                   vdev_last_error());
        return;
    }
    if (got != 1 + n) {
        check_fail(__FILE__, line, "%d logical devices, expected %d", got, 1 + n);
        return;
    }
    int ok = ld[0].type == VDEV_DEVICE_CPU && !strcmp(ld[0].name, "/device:CPU:0") &&
             !strcmp(ld[0].backend, "cpu");
    for (int i = 0; i < n; i++) {
        const struct vdev_logical_device *d = &ld[1 + i];
        char name[64];
        snprintf(name, sizeof name, "/device:GPU:%d", i);
        struct vdev_memory_info mi;
        int good = d->type == VDEV_DEVICE_GPU && d->index == i && !strcmp(d->name, name) &&
                   d->physical_index == w[i].physical && d->limit_bytes == w[i].limit &&
                   d->policy == w[i].policy && !strcmp(d->backend, "sim") &&
                   vdev_memory_info(name, &mi) == VDEV_OK && mi.bytes_limit == w[i].limit &&
                   mi.bytes_in_use == 0 &&
                   mi.bytes_reserved ==
                       (w[i].policy == VDEV_POLICY_PREALLOCATE ? w[i].limit : 0);
        if (!good)
            check_fail(__FILE__, line,
                       "%s: physical %d limit %llu policy %d (expected %d %llu %d), reserved "
                       "%llu",
                       d->name, d->physical_index, (unsigned long long)d->limit_bytes,
                       (int)d->policy, w[i].physical, (unsigned long long)w[i].limit,
                       (int)w[i].policy, (unsigned long long)mi.bytes_reserved);
        ok &= good;
    }
    if (ok)
        check_passed++;
    else
        check_fail(__FILE__, line, "logical devices differ (see above)");
}
#define EXPECT_GPUS(...)                                                                           \
    do {                                                                                           \
        const struct want w_[] = {__VA_ARGS__};                                                    \
        expect_gpus(__LINE__, w_, (int)(sizeof w_ / sizeof w_[0]));                                \
    } while (0)
#define EXPECT_NO_GPUS() expect_gpus(__LINE__, NULL, 0)

#define GROW VDEV_POLICY_GROW
#define PRE VDEV_POLICY_PREALLOCATE

/* A call that must fail with `code` and a message containing `sub`. */
#define EXPECT_ERR(call, code, sub)                                                                \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_MSG(sub);                                                                            \
    } while (0)

static inline uint64_t limit_of(const char *dev)
{
    struct vdev_memory_info mi;
    memset(&mi, 0, sizeof mi);
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_limit;
}

static inline uint64_t phys_free(int gpu)
{
    struct vdev_physical_device pd[8];
    int n = 0;
    CHECK_OK(vdev_list_physical_devices(pd, 8, &n));
    return gpu + 1 < n ? pd[gpu + 1].free_bytes : 0;
}

#endif
