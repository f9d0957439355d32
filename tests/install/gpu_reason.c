/* gpu_reason.c — prints the library's version and why vdev found no GPU
 * ("version: 0.1.0" and "reason: CUDA plugin: ..."), so that
 * tests/cli_install.sh can tell which CUDA plugin an installed vdev loaded,
 * through the shared library and through the static one. */
#include "vdev.h"

int main(void)
{
    printf("version: %s\n", vdev_version());
    printf("reason: %s\n", vdev_gpu_absence_reason());
    return 0;
}
