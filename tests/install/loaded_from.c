/* loaded_from.c — linked into the programs that tests/cli_install.sh builds
 * against an installed vdev: at exit it prints which libvdev file the process
 * mapped ("libvdev: PATH", or "libvdev: none" for a static link), read from
 * /proc/self/maps, so the test sees the library really used, not the one a
 * search path would suggest. */
#include <stdio.h>
#include <string.h>

static void print_libvdev(void) __attribute__((destructor));

static void print_libvdev(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    const char *found = NULL;
    while (f && fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, "/libvdev.so")) {
            path[strcspn(path, "\n")] = '\0';
            found = path;
            break;
        }
    }
    printf("libvdev: %s\n", found ? found : (f ? "none" : "no /proc/self/maps"));
    if (f)
        fclose(f);
}
