/* fake_plugin.c — a stand-in for the CUDA plugin, built by
 * tests/cli_install.sh into the plugin folder of an installed vdev: its entry
 * point declines with the reason "CUDA plugin: test plugin at PATH", PATH
 * being where the loader found it, which shows where vdev looked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include "vdev.h"

static const char anchor;

__attribute__((visibility("default"))) enum vdev_status
vdev_cuda_plugin_open(int api_version, void *out, char *reason, size_t cap, void *set_error);

enum vdev_status vdev_cuda_plugin_open(int api_version, void *out, char *reason, size_t cap,
                                       void *set_error)
{
    (void)api_version, (void)out, (void)set_error;
    Dl_info info;
    char path[PATH_MAX] = "(unknown)";
    if (dladdr(&anchor, &info) && info.dli_fname && !realpath(info.dli_fname, path))
        snprintf(path, sizeof path, "%s", info.dli_fname);
    snprintf(reason, cap, "CUDA plugin: test plugin at %s", path);
    return VDEV_ERR_BACKEND;
}
