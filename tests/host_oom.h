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
#include "vdev.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
    /* and the message says it: memory, or the OOM a device reports */
    const char *msg = vdev_last_error();
    int says = strstr(msg, "memory") || strstr(msg, "OOM when allocating");
    if (!armed || refusal_pending() || vdev_last_status() != VDEV_ERR_OOM || !says) {
        CHECK(armed && !refusal_pending());
        CHECK_STATUS(vdev_last_status(), VDEV_ERR_OOM);
        CHECK(says);
        fprintf(stderr, "  %s failed: %s\n", what, msg);
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

static inline uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = mix(h, c[i]);
    return h;
}

static inline uint64_t mix_str(uint64_t h, const char *s) { return mix_bytes(h, s, strlen(s) + 1); }

/* The bits of n tensors (each of at most 512 elements), read back. */
static inline uint64_t tensors_digest(uint64_t h, vdev_tensor_t *const *t, int n)
{
    for (int i = 0; i < n; i++) {
        float v[512];
        size_t bytes = (size_t)vdev_tensor_numel(t[i]) * 4;
        CHECK(bytes <= sizeof v);
        if (bytes > sizeof v)
            return h;
        RETRY_OK(vdev_tensor_to_host(t[i], v, bytes));
        h = mix(mix_bytes(h, v, bytes), bytes);
    }
    return h;
}

/* One update of m by o on batch k (8 rows drawn from seeds 100 + k and 200 + k, MSE,
 * a tape): the digest with the loss's bits mixed in. */
static inline uint64_t train(uint64_t h, vdev_mlp_t *m, vdev_optimizer_t *o,
                             const int64_t *sizes, int n_sizes, int k)
{
    vdev_tensor_t *vars[16], *grads[16], *x, *y, *pred, *loss;
    int nv = vdev_mlp_variables(m, vars, 16);
    CHECK(nv == 2 * (n_sizes - 1));
    const int64_t xs[2] = {8, sizes[0]}, ys[2] = {8, sizes[n_sizes - 1]};
    RETRY_PTR(x, vdev_tensor_uniform(xs, 2, -1, 1, 100 + (uint64_t)k));
    RETRY_PTR(y, vdev_tensor_uniform(ys, 2, -1, 1, 200 + (uint64_t)k));
    vdev_tape_t *tape;
    RETRY_PTR(tape, vdev_tape_begin());
    RETRY_PTR(pred, vdev_mlp_forward(m, x));
    RETRY_PTR(loss, vdev_mse(pred, y));
    RETRY_OK(vdev_tape_gradient(tape, loss, vars, nv, grads));
    vdev_tape_end(tape);
    RETRY_OK(vdev_optimizer_apply(o, vars, grads, nv));
    h = tensors_digest(h, &loss, 1);
    for (int i = 0; i < nv; i++)
        vdev_tensor_free(grads[i]);
    vdev_tensor_free(x);
    vdev_tensor_free(y);
    vdev_tensor_free(pred);
    vdev_tensor_free(loss);
    return h;
}

#endif /* VDEV_TEST_HOST_OOM_H */
