/* test_stress_pressure.c — a pressure callback that calls back into vdev on
 * its own device: it reads the device's stats, releases cached memory and
 * sets the device's ceiling again. The pressure that its own call meets is
 * not told to it again: before, each vdev_memory_set_limits inside the
 * callback met the CEILING pressure anew and called the callback inside
 * itself, without end, until the stack overflowed. */
#define _GNU_SOURCE
#include "check.h"

#include <stdatomic.h>

#define MIB (1ull << 20)

static atomic_int calls;
static enum vdev_status inner_info, inner_release, inner_limits;

static void on_pressure(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)bytes, (void)user;
    if (atomic_fetch_add(&calls, 1) > 0 || what != VDEV_PRESSURE_CEILING)
        return; /* only the first call acts: the checks below count the calls */
    struct vdev_memory_info mi;
    uint64_t released = 0;
    inner_info = vdev_memory_info(device, &mi);
    inner_release = vdev_memory_release_cached(device, &released);
    inner_limits = vdev_memory_set_limits(device, 0, 8 * MIB); /* the same ceiling again */
}

static void callback_sets_own_ceiling(void)
{
    check_fresh("1x64MiB");
    CHECK_OK(vdev_init());
    static const int64_t mib[1] = {1 << 18};
    vdev_tensor_t *held[16];
    CHECK_OK(vdev_device_push("GPU:0"));
    for (int i = 0; i < 16; i++)
        CHECK((held[i] = vdev_tensor_fill(mib, 1, VDEV_F32, 0.0)) != NULL);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure, NULL));
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 8 * MIB)); /* below the 16 MiB it holds */
    CHECK(atomic_load(&calls) == 1);
    CHECK(inner_info == VDEV_OK);
    CHECK(inner_release == VDEV_OK);
    CHECK(inner_limits == VDEV_OK);
    struct vdev_memory_limits lim;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &lim));
    CHECK_EQ_U64(lim.ceiling_bytes, 8 * MIB);
    /* a later pressure, outside the callback, is told as before */
    CHECK_OK(vdev_memory_set_limits("GPU:0", 0, 4 * MIB));
    CHECK(atomic_load(&calls) == 2);
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", NULL, NULL));
    for (int i = 0; i < 16; i++)
        vdev_tensor_free(held[i]);
    vdev_shutdown();
}

int main(void)
{
    callback_sets_own_ceiling();
    return check_done();
}
