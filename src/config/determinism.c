/* determinism.c — the switch that asks every op and collective for the same
 * bits run to run (vdev_config_set_deterministic, VDEV_DETERMINISTIC), as
 * TensorFlow's tf.config.experimental.enable_op_determinism does.
 *
 * The switch itself is one atomic flag that code may set at any time; the
 * environment variable is read at start-up and applies only where code has
 * not spoken. Kernels and collectives that could otherwise give different
 * bits (work split by the number of threads, reductions in the order threads
 * finish) read vdev_deterministic() and take their fixed-order path; vdev.h
 * lists which ops that constrains and what it costs. vdev_shutdown() returns
 * the switch to its default (off, unless the environment says otherwise at
 * the next start-up). */
#include "config/config.h"

#include <stdatomic.h>
#include <stdlib.h>

static _Atomic int deterministic;
static _Atomic int set_by_code;

VDEV_API void vdev_config_set_deterministic(bool enable)
{
    atomic_store(&deterministic, enable ? 1 : 0);
    atomic_store(&set_by_code, 1);
}

/* What VDEV_DETERMINISTIC says: *out 0 or 1, 0 where it is unset. */
static enum vdev_status from_env(int *out)
{
    const char *v = getenv("VDEV_DETERMINISTIC");
    *out = 0;
    return v ? vdev_config_parse_bool("VDEV_DETERMINISTIC", v, out) : VDEV_OK;
}

/* After start-up the switch in force; before it, the one start-up would
 * put in force: code's, else the environment's. A malformed variable reads
 * as off, with start-up's error left as the calling thread's last error (as
 * vdev_config_get_visible_devices fails with it). */
VDEV_API bool vdev_config_get_deterministic(void)
{
    if (vdev_is_initialized() || atomic_load(&set_by_code))
        return atomic_load(&deterministic) != 0;
    int b;
    return from_env(&b) == VDEV_OK && b;
}

int vdev_deterministic(void) { return atomic_load_explicit(&deterministic, memory_order_relaxed); }

enum vdev_status vdev_config_determinism_init_env(void)
{
    int b;
    enum vdev_status st = from_env(&b);
    if (st != VDEV_OK)
        return st;
    if (!atomic_load(&set_by_code)) /* off where unset, whatever a failed start-up left */
        atomic_store(&deterministic, b);
    return VDEV_OK;
}

void vdev_config_determinism_forget(void)
{
    atomic_store(&deterministic, 0);
    atomic_store(&set_by_code, 0);
}
