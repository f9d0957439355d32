/* cmd_devices.c — `vdev devices`: the physical devices, where GPUs come from
 * (or why there are none), and the logical devices start-up makes of them,
 * with each one's policy, limit and memory in use. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char *policy_name(enum vdev_memory_policy p)
{
    return p == VDEV_POLICY_PREALLOCATE ? "preallocate" : "grow";
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static int fail(const char *what)
{
    fprintf(stderr, "vdev devices: %s%s%s\n", what, *what ? ": " : "", vdev_last_error());
    return 1;
}

int vdev_cmd_devices(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: vdev devices [--json]\n\n"
                   "Lists the physical devices (backend, model, total and free memory), says\n"
                   "where the GPUs come from or why there are none, then starts the runtime\n"
                   "with the configuration of the environment and lists the logical devices\n"
                   "(policy, limit, memory reserved and in use).\n\n"
                   "  --json   one JSON object: {\"gpu_backend\", \"no_gpu_reason\",\n"
                   "           \"physical\": [...], \"logical\": [...]}\n");
            return 0;
        } else {
            fprintf(stderr, "vdev devices: unknown option '%s' (see 'vdev devices --help')\n",
                    argv[i]);
            return 2;
        }
    }
    struct vdev_physical_device phys[130];
    int n_phys;
    if (vdev_list_physical_devices(phys, 130, &n_phys) != VDEV_OK)
        return fail("");
    const char *reason = vdev_gpu_absence_reason();
    char reason_copy[256];
    snprintf(reason_copy, sizeof reason_copy, "%s", reason);
    const char *gpu_backend = n_phys > 1 ? phys[1].backend : "none";

    struct vdev_logical_device logi[130];
    int n_log;
    if (vdev_list_logical_devices(logi, 130, &n_log) != VDEV_OK)
        return fail("start-up failed");
    struct vdev_memory_info mi[130];
    for (int i = 0; i < n_log && i < 130; i++)
        if (vdev_memory_info(logi[i].name, &mi[i]) != VDEV_OK)
            return fail(logi[i].name);
    /* Again after start-up, so FREE shows what preallocation took. */
    if (vdev_list_physical_devices(phys, 130, &n_phys) != VDEV_OK)
        return fail("");

    if (json) {
        printf("{\"gpu_backend\": ");
        json_str(gpu_backend);
        printf(", \"no_gpu_reason\": ");
        json_str(reason_copy);
        printf(", \"physical\": [");
        for (int i = 0; i < n_phys; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(phys[i].name);
            printf(", \"backend\": ");
            json_str(phys[i].backend);
            printf(", \"model\": ");
            json_str(phys[i].model);
            printf(", \"total_bytes\": %llu, \"free_bytes\": %llu}",
                   (unsigned long long)phys[i].total_bytes, (unsigned long long)phys[i].free_bytes);
        }
        printf("], \"logical\": [");
        for (int i = 0; i < n_log; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(logi[i].name);
            printf(", \"physical_index\": %d, \"backend\": ", logi[i].physical_index);
            json_str(logi[i].backend);
            printf(", \"policy\": \"%s\", \"limit_bytes\": %llu, \"reserved_bytes\": %llu, "
                   "\"in_use_bytes\": %llu}",
                   policy_name(logi[i].policy), (unsigned long long)logi[i].limit_bytes,
                   (unsigned long long)mi[i].bytes_reserved, (unsigned long long)mi[i].bytes_in_use);
        }
        printf("]}\n");
        return 0;
    }

    char b1[32], b2[32], b3[32], b4[32];
    if (n_phys > 1)
        printf("GPUs: %d from the %s backend%s\n", n_phys - 1, gpu_backend,
               strcmp(gpu_backend, "sim") == 0 ? " (simulated GPUs from VDEV_SIM_GPUS)" : "");
    else
        printf("GPUs: none (%s); ops run on the CPU\n", reason_copy);
    printf("\nPhysical devices\n");
    printf("  %-24s %-7s %-28s %12s %12s\n", "NAME", "BACKEND", "MODEL", "TOTAL", "FREE");
    for (int i = 0; i < n_phys; i++)
        printf("  %-24s %-7s %-28.28s %12s %12s\n", phys[i].name, phys[i].backend, phys[i].model,
               vdev_format_bytes(phys[i].total_bytes, b1, sizeof b1),
               vdev_format_bytes(phys[i].free_bytes, b2, sizeof b2));
    printf("\nLogical devices\n");
    printf("  %-16s %-10s %-7s %-12s %12s %12s %12s\n", "NAME", "PHYSICAL", "BACKEND", "POLICY",
           "LIMIT", "RESERVED", "IN USE");
    for (int i = 0; i < n_log; i++) {
        char phys_name[32];
        snprintf(phys_name, sizeof phys_name, "%s:%d",
                 logi[i].type == VDEV_DEVICE_GPU ? "GPU" : "CPU", logi[i].physical_index);
        printf("  %-16s %-10s %-7s %-12s %12s %12s %12s\n", logi[i].name, phys_name,
               logi[i].backend, policy_name(logi[i].policy),
               vdev_format_bytes(logi[i].limit_bytes, b1, sizeof b1),
               vdev_format_bytes(mi[i].bytes_reserved, b3, sizeof b3),
               vdev_format_bytes(mi[i].bytes_in_use, b4, sizeof b4));
    }
    return 0;
}
