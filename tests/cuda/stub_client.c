/* stub_client.c — see stub_client.h: the helpers of the tests that run the
 * real CUDA plugin against the stand-in driver and the stand-in NCCL. */
#define _GNU_SOURCE
#include "stub_client.h"

#include "check.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

struct vdev_stub_api S;
struct vdev_stub_nccl_api N;
void *stub_handle;

int stub_load(void)
{
    stub_handle = dlopen(VDEV_STUB_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!stub_handle) {
        fprintf(stderr, "dlopen(%s): %s\n", VDEV_STUB_CUDA_PATH, dlerror());
        return -1;
    }
#define GET(field, name)                                                                           \
    if (!(*(void **)&S.field = dlsym(stub_handle, name))) {                                        \
        fprintf(stderr, "the stand-in driver lacks %s\n", name);                                   \
        return -1;                                                                                 \
    }
    GET(setup, "vdev_stub_setup");
    GET(fail, "vdev_stub_fail");
    GET(stats, "vdev_stub_stats");
    GET(calls, "vdev_stub_calls");
    GET(violation, "vdev_stub_violation");
    GET(trace, "vdev_stub_trace");
    GET(trace_mark, "vdev_stub_trace_mark");
    GET(stream_id, "vdev_stub_stream_id");
    GET(stream_priority, "vdev_stub_stream_priority");
#undef GET
    return 0;
}

int stub_load_nccl(void)
{
    void *h = dlopen(VDEV_STUB_NCCL_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen(%s): %s\n", VDEV_STUB_NCCL_PATH, dlerror());
        return -1;
    }
#define GET(field, name)                                                                           \
    if (!(*(void **)&N.field = dlsym(h, name))) {                                                  \
        fprintf(stderr, "the stand-in NCCL lacks %s\n", name);                                     \
        return -1;                                                                                 \
    }
    GET(setup, "vdev_stub_nccl_setup");
    GET(fail, "vdev_stub_nccl_fail");
    GET(calls, "vdev_stub_nccl_calls");
    GET(stats, "vdev_stub_nccl_stats");
    GET(last, "vdev_stub_nccl_last");
#undef GET
    return 0;
}

void stub_setup(int n, uint64_t total, int driver, int init_result, int no_vmm, int no_peer)
{
    struct vdev_stub_config c = {n, total, 0, driver, init_result, no_vmm, no_peer, 0, 0};
    S.setup(&c);
}

void stub_setup_ctx(int n, uint64_t total, uint64_t context_bytes)
{
    struct vdev_stub_config c = {n, total, 0, 0, 0, 0, 0, context_bytes, 0};
    S.setup(&c);
}

void stub_setup_cc(int n, uint64_t total, int cc)
{
    struct vdev_stub_config c = {n, total, 0, 0, 0, 0, 0, 0, cc};
    S.setup(&c);
}

void stub_setup_nccl(int n, int version, unsigned delay_ms)
{
    stub_setup(n, 4ull << 30, 13000, 0, 0, 0);
    struct vdev_stub_nccl_config nc = {version, 64ull << 20, delay_ms};
    N.setup(&nc);
}

void stub_expect_clean_at(const char *file, int line, const char *where, int empty)
{
    struct vdev_stub_stats st;
    S.stats(0, &st);
    if (st.violations) {
        for (int i = 0; S.violation(i); i++)
            fprintf(stderr, "  violation: %s\n", S.violation(i));
        check_fail(file, line, "%s: %llu violation(s) of the driver's rules", where,
                   (unsigned long long)st.violations);
    } else {
        check_passed++;
    }
    if (!empty)
        return;
    if (st.reservations || st.handles || st.mappings || st.blocks || st.host_allocs || st.streams ||
        st.events)
        check_fail(file, line,
                   "%s: left alive: %d reservations, %d handles, %d mappings, %d blocks, %d host "
                   "buffers, %d streams, %d events",
                   where, st.reservations, st.handles, st.mappings, st.blocks, st.host_allocs,
                   st.streams, st.events);
    else
        check_passed++;
}

void stub_open_backend(struct vdev_backend *b)
{
    char reason[256] = "";
    enum vdev_status st = vdev_backend_cuda_new(b, reason, sizeof reason);
    if (st != VDEV_OK)
        check_fail(__FILE__, __LINE__, "the plugin did not open: %s", reason);
}

int stub_trace_has(const char *trace, const char *const *pat, int n_pat)
{
    const char *line = trace;
    int k = 0;
    while (*line && k < n_pat) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[128];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        int ev = -1, consumed = -1;
        char fmt[160];
        snprintf(fmt, sizeof fmt, "%s%%n", pat[k]);
        if (strstr(pat[k], "%d")) {
            if (sscanf(buf, fmt, &ev, &consumed) == 1 && consumed == (int)len)
                k++;
        } else if (!strcmp(buf, pat[k])) {
            k++;
        }
        line = end ? end + 1 : line + len;
    }
    return k == n_pat;
}

int stub_trace_stream(const char *trace, const char *what)
{
    for (const char *line = trace; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[128];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        int id;
        if (buf[0] == 'S' && sscanf(buf, "S%d ", &id) == 1 && strstr(buf, what))
            return id;
        line = end ? end + 1 : line + len;
    }
    return -1;
}
