/* backend.c — wrappers over the backend tables (they supply the defaults of
 * optional entries: a fill without a fill entry), and the loader of plugins
 * (the CUDA plugin here; the MPI plugin through vdev_plugin_dlopen). A plugin
 * is a separate shared library (libvdev-cuda.so, libvdev-mpi.so) so that
 * the core never links CUDA or MPI: it is looked for in $VDEV_CUDA_PLUGIN (a path),
 * then in the plugin folder of an installed tree, found from the file that
 * holds this code (dladdr), then in the folders of that module's RUNPATH (which
 * in the build tree holds the build folder), then on the loader's search path. */
#define _GNU_SOURCE
#include "backend/backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vdev_backend_destroy(struct vdev_backend *b)
{
    if (b && b->ops) {
        b->ops->destroy(b->ctx);
        b->ops = NULL;
        b->ctx = NULL;
    }
}

int vdev_backend_n_devices(const struct vdev_backend *b) { return b->ops->n_devices(b->ctx); }

enum vdev_status vdev_backend_device_info(const struct vdev_backend *b, int dev,
                                          struct vdev_backend_device_info *out)
{
    if (dev < 0 || dev >= vdev_backend_n_devices(b))
        return vdev_error(VDEV_ERR_NOT_FOUND, "%s backend has no device %d", b->ops->name, dev);
    return b->ops->device_info(b->ctx, dev, out);
}

enum vdev_status vdev_backend_mem_info(const struct vdev_backend *b, int dev, uint64_t *free_bytes,
                                       uint64_t *total_bytes)
{
    if (dev < 0 || dev >= vdev_backend_n_devices(b))
        return vdev_error(VDEV_ERR_NOT_FOUND, "%s backend has no device %d", b->ops->name, dev);
    return b->ops->mem_info(b->ctx, dev, free_bytes, total_bytes);
}

enum vdev_status vdev_backend_submit_host(const struct vdev_backend *b, int dev, vdev_host_fn fn,
                                          const void *arg, size_t arg_bytes)
{
    return b->ops->submit_host(b->ctx, dev, fn, arg, arg_bytes);
}

enum vdev_status vdev_backend_synchronize(const struct vdev_backend *b, int dev)
{
    return b->ops->synchronize(b->ctx, dev);
}

/* ---- fills ---- */

#define FILL_HOST_BYTES (1u << 20) /* host buffer of a fill through copy_h2d */

struct fill_arg {
    uint32_t *dst;
    uint64_t n;
    uint32_t value;
};

static void fill_fn(void *varg)
{
    const struct fill_arg *a = varg;
    for (uint64_t i = 0; i < a->n; i++)
        a->dst[i] = a->value;
}

enum vdev_status vdev_backend_fill(const struct vdev_backend *b, int dev, void *dst,
                                   uint32_t value, uint64_t n_words)
{
    if (!n_words)
        return VDEV_OK;
    if (!dst || (uintptr_t)dst % 4 != 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s backend: fill of %p: not a 4-byte aligned "
                          "device address", b->ops->name, dst);
    if (b->ops->fill)
        return b->ops->fill(b->ctx, dev, dst, value, n_words);
    if (b->ops->host_addressable) {
        struct fill_arg a = {dst, n_words, value};
        return b->ops->submit_host(b->ctx, dev, fill_fn, &a, sizeof a);
    }
    /* Neither: one host buffer of the pattern, copied over and over. */
    uint64_t bytes = n_words * 4;
    size_t cap = bytes < FILL_HOST_BYTES ? (size_t)bytes : FILL_HOST_BYTES;
    uint32_t *host = vdev_malloc(cap);
    if (!host)
        return vdev_error(VDEV_ERR_OOM, "out of host memory filling %llu bytes of device memory",
                          (unsigned long long)bytes);
    for (size_t i = 0; i < cap / 4; i++)
        host[i] = value;
    enum vdev_status st = VDEV_OK;
    for (uint64_t off = 0; st == VDEV_OK && off < bytes; off += cap) {
        uint64_t n = bytes - off < cap ? bytes - off : cap;
        st = b->ops->copy_h2d(b->ctx, dev, (char *)dst + off, host, n);
    }
    free(host);
    return st;
}

/* ---- the CUDA plugin ---- */

/* The plugin folder of an installed tree, relative to the folder of the file
 * that holds this code: from a shared library's folder (P/lib/libvdev.so.0 ->
 * P/lib/vdev) and from a program's folder when the static library is linked
 * into it (P/bin/vdev -> P/lib/vdev). CMake derives both from the install
 * layout; they are relative, so no build or install path is compiled in and
 * an installed tree can be moved. */
#ifndef VDEV_PLUGIN_DIR_FROM_LIB
#define VDEV_PLUGIN_DIR_FROM_LIB "vdev"
#endif
#ifndef VDEV_PLUGIN_DIR_FROM_BIN
#define VDEV_PLUGIN_DIR_FROM_BIN "../lib/vdev"
#endif
#define CUDA_PLUGIN_NAME "libvdev-cuda.so"

static const char plugin_anchor; /* an address inside this file's module, for dladdr */

/* Writes to out (cap bytes) where the plugin lies in an installed tree, seen
 * from the module (shared library or program) that holds this code, and to
 * folder (fcap bytes) the plugin folder, for messages; *module says which
 * module ("libvdev", "the program"). The module's own file is resolved
 * first (realpath): a program that finds libvdev.so.0 through a link in
 * another folder still gets the installed tree's plugins. Returns 1 when the
 * folder exists, 0 when it does not (folder then names where it was looked
 * for, its leading "../" taken off the module's folder) or cannot be told
 * (no answer from dladdr, no /proc/self/exe, a path longer than cap; folder
 * is then ""). */
static int installed_plugin_path(const char *file, char *out, size_t cap, char *folder,
                                 size_t fcap, const char **module)
{
    folder[0] = '\0';
    *module = "libvdev";
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(&plugin_anchor, &info, (void **)&map, RTLD_DL_LINKMAP) || !map || !map->l_name)
        return 0;
    char self[PATH_MAX];
    const char *rel;
    if (map->l_name[0]) { /* a shared library: its file, links resolved */
        const char *name = info.dli_fname && info.dli_fname[0] ? info.dli_fname : map->l_name;
        if (!realpath(name, self))
            return 0;
        rel = VDEV_PLUGIN_DIR_FROM_LIB;
    } else { /* the program itself, where dladdr would only give argv[0] */
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len <= 0)
            return 0;
        self[len] = '\0';
        rel = VDEV_PLUGIN_DIR_FROM_BIN;
        *module = "the program";
    }
    char *slash = strrchr(self, '/');
    const char *dir = ".";
    if (slash) {
        *slash = '\0';
        dir = slash == self ? "/" : self;
    }
    /* The folder, resolved when it exists, so that messages name a plain path. */
    char joined[PATH_MAX], resolved[PATH_MAX];
    int n = snprintf(joined, sizeof joined, "%s/%s", dir, rel);
    if (n <= 0 || (size_t)n >= sizeof joined)
        return 0;
    if (!realpath(joined, resolved)) { /* not there: named without "..", for the message */
        while (!strncmp(rel, "../", 3) && (slash = strrchr(self, '/')) && slash != self) {
            *slash = '\0';
            rel += 3;
        }
        n = snprintf(folder, fcap, "%s/%s", dir, rel);
        if (n <= 0 || (size_t)n >= fcap)
            folder[0] = '\0';
        return 0;
    }
    vdev_strlcpy(folder, resolved, fcap);
    n = snprintf(out, cap, "%s/%s", resolved, file);
    return n > 0 && (size_t)n < cap;
}

/* The first folder of the RUNPATH (or, without one, the RPATH) of the module
 * that holds this code that has `file` in it, written as a path to out (cap
 * bytes); 0 when none has. This is the search dlopen(file) makes by itself,
 * done by hand because a sanitizer's dlopen interceptor makes the loader
 * search the interceptor's own library's paths instead of the caller's (the
 * build tree's binaries find their plugins through RUNPATH). $ORIGIN is
 * expanded; other dynamic-string tokens are left alone. */
static int runpath_plugin_path(const char *file, char *out, size_t cap)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(&plugin_anchor, &info, (void **)&map, RTLD_DL_LINKMAP) || !map || !map->l_ld)
        return 0;
    const char *strtab = NULL;
    long runpath = -1, rpath = -1;
    for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_STRTAB)
            strtab = (const char *)d->d_un.d_ptr; /* relocated by the loader on this platform */
        else if (d->d_tag == DT_RUNPATH)
            runpath = (long)d->d_un.d_val;
        else if (d->d_tag == DT_RPATH)
            rpath = (long)d->d_un.d_val;
    }
    long at = runpath >= 0 ? runpath : rpath;
    if (!strtab || at < 0)
        return 0;
    /* $ORIGIN: the folder of the module. */
    char origin[PATH_MAX] = ".";
    if (map->l_name && map->l_name[0]) {
        vdev_strlcpy(origin, map->l_name, sizeof origin);
    } else {
        ssize_t len = readlink("/proc/self/exe", origin, sizeof origin - 1);
        origin[len > 0 ? len : 0] = '\0';
    }
    char *slash = strrchr(origin, '/');
    if (slash)
        *slash = '\0';
    for (const char *p = strtab + at; *p;) {
        size_t len = strcspn(p, ":");
        char dir[PATH_MAX];
        if (len < sizeof dir) {
            memcpy(dir, p, len);
            dir[len] = '\0';
            const char *rest = NULL;
            if (!strncmp(dir, "$ORIGIN", 7))
                rest = dir + 7;
            else if (!strncmp(dir, "${ORIGIN}", 9))
                rest = dir + 9;
            int n = rest ? snprintf(out, cap, "%s%s/%s", origin, rest, file)
                         : snprintf(out, cap, "%s/%s", dir, file);
            if (n > 0 && (size_t)n < cap && access(out, F_OK) == 0)
                return 1;
        }
        p += len;
        if (*p == ':')
            p++;
    }
    return 0;
}

/* Whether a failed dlopen(name) found a file that did not load (a missing
 * dependency, a bad ELF file) rather than no file at all. */
static int plugin_is_there(const char *name, const char *err)
{
    if (strchr(name, '/'))
        return access(name, F_OK) == 0;
    /* By bare name the loader says "libvdev-cuda.so: cannot open shared object
     * file" when it finds none; any other message is about a file it found. */
    size_t len = strlen(name);
    return strncmp(err, name, len) != 0 || strncmp(err + len, ": cannot open", 13) != 0;
}

enum vdev_status vdev_plugin_dlopen(const char *file, const char *env_var, const char *what,
                                    void **handle, char *reason, size_t cap)
{
    *handle = NULL;
    const char *tries[3];
    char installed[PATH_MAX], in_runpath[PATH_MAX], folder[PATH_MAX] = "";
    const char *module = "libvdev";
    int n = 0;
    const char *env = getenv(env_var);
    if (env && *env) {
        tries[n++] = env; /* an explicit path is the only one tried */
    } else {
        if (installed_plugin_path(file, installed, sizeof installed, folder, sizeof folder,
                                  &module))
            tries[n++] = installed;
        if (runpath_plugin_path(file, in_runpath, sizeof in_runpath))
            tries[n++] = in_runpath;
        tries[n++] = file; /* LD_LIBRARY_PATH, RUNPATH, ld.so.cache */
    }

    void *h = NULL;
    const char *failed = NULL; /* the first plugin found that did not load */
    char failed_err[256] = "";
    for (int i = 0; i < n && !h; i++) {
        h = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            break;
        const char *e = dlerror();
        if (!e)
            e = "unknown error";
        if (!failed && (tries[i] == env || plugin_is_there(tries[i], e))) {
            failed = tries[i];
            vdev_strlcpy(failed_err, e, sizeof failed_err);
        }
    }
    if (!h) {
        if (failed)
            snprintf(reason, cap, "%s: cannot load %s (%s)", what, failed, failed_err);
        else
            snprintf(reason, cap,
                     "%s: %s not built or not found (looked in %s%s%s's RUNPATH and the loader's "
                     "search path; set %s to its path)",
                     what, file, folder, folder[0] ? ", " : "", module, env_var);
        return vdev_error(VDEV_ERR_UNSUPPORTED, "%s", reason);
    }
    *handle = h;
    return VDEV_OK;
}

const char *vdev_plugin_file(void *handle, const char *fallback)
{
    struct link_map *lm = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name)
        return lm->l_name;
    return fallback;
}

enum vdev_status vdev_backend_cuda_new(struct vdev_backend *out, char *reason, size_t cap)
{
    memset(out, 0, sizeof *out);
    void *h;
    enum vdev_status lst =
        vdev_plugin_dlopen(CUDA_PLUGIN_NAME, "VDEV_CUDA_PLUGIN", "CUDA plugin", &h, reason, cap);
    if (lst != VDEV_OK)
        return lst;
    vdev_cuda_plugin_open_fn open_fn;
    *(void **)(&open_fn) = dlsym(h, VDEV_CUDA_PLUGIN_SYMBOL);
    if (!open_fn) {
        snprintf(reason, cap, "CUDA plugin: %s lacks the symbol %s",
                 vdev_plugin_file(h, CUDA_PLUGIN_NAME), VDEV_CUDA_PLUGIN_SYMBOL);
        dlclose(h);
        return vdev_error(VDEV_ERR_BACKEND, "%s", reason);
    }
    enum vdev_status st = open_fn(VDEV_BACKEND_API_VERSION, out, reason, cap, vdev_error);
    if (st != VDEV_OK) {
        /* The plugin stays loaded: its reason string may point into it. */
        memset(out, 0, sizeof *out);
        return vdev_error(st, "%s", reason);
    }
    if (!out->ops || out->ops->api_version != VDEV_BACKEND_API_VERSION) {
        snprintf(reason, cap, "CUDA plugin: API version %d, vdev needs %d",
                 out->ops ? out->ops->api_version : -1, VDEV_BACKEND_API_VERSION);
        memset(out, 0, sizeof *out);
        return vdev_error(VDEV_ERR_BACKEND, "%s", reason);
    }
    return VDEV_OK;
}
