/* readme_example.c — the README's worked example ("A worked example"), copied
 * as it stands, so that tests/cli_install.sh can build it against an
 * installed vdev with pkg-config and with find_package(vdev). */
#include "vdev.h"

int main(void)
{
    /* Before start-up: split GPU 0 into a 4 GiB and a 2 GiB logical GPU that grow on demand. */
    uint64_t limits[2] = {4ull << 30, 2ull << 30};
    vdev_config_set_logical_devices("GPU:0", limits, 2);
    if (vdev_init() != VDEV_OK) {
        fprintf(stderr, "%s\n", vdev_last_error());
        return 1;
    }
    /* A model on GPU:1: its variables live there, so its ops run there. */
    int64_t sizes[3] = {16, 256, 4};
    vdev_device_push("GPU:1");
    vdev_mlp_t *model = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 42);
    vdev_device_pop();

    vdev_scope_begin();                       /* frees the step's temporaries at its end */
    int64_t xs[2] = {64, 16};
    vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, 7);
    vdev_tensor_t *y = vdev_mlp_forward(model, x);   /* runs on GPU:1; x is copied there */
    if (!y)
        fprintf(stderr, "%s\n", vdev_last_error());  /* the first error of the chain */
    vdev_scope_end();

    struct vdev_memory_info mi;
    vdev_memory_info("GPU:1", &mi);           /* in use, peak, reserved, limit, ... */
    vdev_mlp_free(model);
    return 0;
}
