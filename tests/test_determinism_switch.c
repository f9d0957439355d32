/* test_determinism_switch.c — the determinism switch: default off, code sets
 * it at any time, VDEV_DETERMINISTIC is read at start-up where code has not
 * spoken, a malformed value is an error naming the variable, and shutdown
 * turns it off. (What the switch does to ops and collectives is tested with
 * them.) */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <stdlib.h>

int main(void)
{
    check_fresh("1x1GiB");
    CHECK(!vdev_config_get_deterministic());
    CHECK_OK(vdev_init());
    CHECK(!vdev_config_get_deterministic());
    vdev_config_set_deterministic(true); /* after start-up too */
    CHECK(vdev_config_get_deterministic());
    vdev_shutdown();
    CHECK(!vdev_config_get_deterministic());

    check_fresh("1x1GiB");
    setenv("VDEV_DETERMINISTIC", "1", 1);
    CHECK_OK(vdev_init());
    CHECK(vdev_config_get_deterministic());

    check_fresh("1x1GiB");
    setenv("VDEV_DETERMINISTIC", "true", 1);
    vdev_config_set_deterministic(false); /* code wins */
    CHECK_OK(vdev_init());
    CHECK(!vdev_config_get_deterministic());

    check_fresh("1x1GiB");
    setenv("VDEV_DETERMINISTIC", "yes please", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_MSG("VDEV_DETERMINISTIC");
    CHECK(!vdev_is_initialized());

    check_fresh(NULL);
    return check_done();
}
