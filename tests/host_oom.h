/* host_oom.h — what the tests of refusals share (test_host_oom*.c): a sweep that runs
 * a scenario once for each of its host allocations in turn refused (through the
 * library's one door to host memory, src/base/host_mem.c), then once with none refused,
 * and checks that every run ends with the same digest, then does the same with each
 * allocation of its tensors' device memory refused as a full device would; and RETRY_OK / RETRY_PTR, which
 * make a call, and when it fails check that the refusal came in it and was reported as
 * VDEV_ERR_OOM, then make it again, which must succeed. A scenario makes its calls
 * through them, returns a digest of what it computed (bits, placements, bytes written),
 * and frees everything it made; the sanitizer build's leak check reports what a failed
 * path left. Everything is static, so each test file uses what it needs. */
#ifndef VDEV_TEST_HOST_OOM_H
#define VDEV_TEST_HOST_OOM_H

#include "base/base.h"
#include "check.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

static int armed;    /* a refusal is set and has not come yet, before the call */
static long refused; /* calls that failed for it, in this run */
static long run_n;   /* the allocation refused in this run; 0: none */
static int on_device; /* what this sweep refuses: 0 host memory, 1 tensors' device memory */

static inline void refuse_at(long n)
{
    if (on_device)
        vdev_device_fail_at(n);
    else
        vdev_host_fail_at(n);
}
static inline int refusal_pending(void)
{
    return on_device ? vdev_device_fail_pending() : vdev_host_fail_pending();
}
static inline long left(void)
{
    return on_device ? vdev_device_fail_left() : vdev_host_fail_left();
}

static inline void before_call(void) { armed = refusal_pending(); }

/* A call failed: it must be the refusal's doing, reported as such. */
static inline void failed_call(const char *what)
{
    refused++;
    if (!armed || refusal_pending() || vdev_last_status() != VDEV_ERR_OOM) {
        CHECK(armed && !refusal_pending());
        CHECK_STATUS(vdev_last_status(), VDEV_ERR_OOM);
        fprintf(stderr, "  %s failed: %s\n", what, vdev_last_error());
    }
}

/* A call returning a status / a pointer: on failure, checked and made again. */
#define RETRY_OK(call)                                                                             \
    do {                                                                                           \
        before_call();                                                                             \
        if ((call) != VDEV_OK) {                                                                   \
            failed_call(#call);                                                                    \
            CHECK_OK(call);                                                                        \
        }                                                                                          \
    } while (0)
#define RETRY_PTR(var, call)                                                                       \
    do {                                                                                           \
        before_call();                                                                             \
        if (!((var) = (call))) {                                                                   \
            failed_call(#call);                                                                    \
            CHECK(((var) = (call)) != NULL);                                                       \
        }                                                                                          \
    } while (0)

/* One kind of refusal: runs scenario() for n = 1, 2, ... until a run no longer
 * reaches its n-th allocation, then once with nothing refused (n = 0); every run's
 * digest must be the last one's. The refusing runs come first so that what the
 * library makes once per process is refused too. */
static inline void sweep_kind(const char *name, uint64_t (*scenario)(void), int device)
{
    const char *kind = device ? "device" : "host";
    uint64_t got[4096];
    long runs = 0, failures = 0;
    on_device = device;
    for (long n = 1; n <= (long)VDEV_ARRAY_LEN(got); n++) {
        int bad = check_failed;
        refused = 0;
        run_n = n;
        refuse_at(n);
        got[runs] = scenario();
        int reached = !refusal_pending();
        refuse_at(0);
        if (!reached)
            break;
        runs++;
        failures += refused;
        if (check_failed != bad) {
            fprintf(stderr, "  (%s, %s allocation %ld refused)\n", name, kind, n);
            return;
        }
    }
    /* the run without a refusal, counted by a countdown too long to end */
    refused = 0;
    run_n = 0;
    refuse_at(LONG_MAX);
    uint64_t want = scenario();
    long made = LONG_MAX - left();
    refuse_at(0);
    for (long i = 0; i < runs; i++)
        if (got[i] != want) {
            CHECK_EQ_U64(got[i], want);
            fprintf(stderr, "  (%s, %s allocation %ld refused)\n", name, kind, i + 1);
            break;
        }
    CHECK(runs < (long)VDEV_ARRAY_LEN(got));
    if (device && made == 0 && runs == 0) {
        printf("%s: no device allocations\n", name);
        return;
    }
    /* Every allocation was refused in its turn, and most refusals failed a call. */
    CHECK(runs >= made && made > 0);
    CHECK(failures > 0);
    printf("%s: %ld %s allocations; each refused in turn, %ld runs, %ld calls failed and "
           "succeeded again\n",
           name, made, kind, runs, failures);
}

/* Both kinds: every host allocation of the scenario refused in turn, then every
 * device allocation of its tensors. */
static inline void sweep(const char *name, uint64_t (*scenario)(void))
{
    sweep_kind(name, scenario, 0);
    sweep_kind(name, scenario, 1);
    on_device = 0;
}

static inline uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001B3ull; }

#endif /* VDEV_TEST_HOST_OOM_H */
