/* ops_rng.h — the random numbers of the op tests: a xorshift generator of
 * their own, independent of the library, so the inputs are the same on every
 * machine and every run. Each test that includes it has its own state. */
#ifndef VDEV_TESTS_OPS_RNG_H
#define VDEV_TESTS_OPS_RNG_H

#include <stdint.h>

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* Uniform in [lo, hi), from the top 53 bits. */
static float rng_uniform(float lo, float hi)
{
    double u = (double)(rng_next() >> 11) / 9007199254740992.0;
    return (float)(lo + (hi - lo) * u);
}

#endif
