/* version.c — vdev_version(): the library's version as a string, made from
 * the VDEV_VERSION_* macros of vdev.h (vdev/status.h) when the library is
 * compiled, so that the header a program was built with can be told from the
 * library it runs with (the build checks that the macros match the project's
 * version). */
#include "vdev.h"

#define VDEV_STR_(x) #x
#define VDEV_STR(x) VDEV_STR_(x)

VDEV_API const char *vdev_version(void)
{
    return VDEV_STR(VDEV_VERSION_MAJOR) "." VDEV_STR(VDEV_VERSION_MINOR) "." VDEV_STR(
        VDEV_VERSION_PATCH);
}
