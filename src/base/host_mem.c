/* host_mem.c — the core library's one door to host memory: vdev_malloc, vdev_calloc,
 * vdev_realloc and vdev_strdup behave as the C library's (their memory goes back with
 * free()), and every allocation of the core goes through them (the CUDA and MPI plugins,
 * libraries of their own, keep the C library's), so that a test can make
 * the n-th allocation of its own thread fail (vdev_host_fail_at) and check, one n after
 * another, that each such failure is reported and leaves nothing lost or inconsistent.
 * The countdown is thread-local: a test fails its own thread's allocations, never those of
 * a stream thread it does not control, and production code pays one thread-local test of
 * a zero a call. A second countdown does the same for the device memory of tensors
 * (vdev_device_fail_at, asked by tensor.c before the allocator), so that a test can
 * refuse every device allocation of a scenario in turn as well. */
#define _GNU_SOURCE
#include "base/base.h"

#include <errno.h>
#include <string.h>

static _Thread_local long tls_fail_in; /* 0: never; n > 0: the n-th next allocation fails */
static _Thread_local long tls_seen;    /* allocations asked for on this thread, counted */

/* 1 when this call is the one to fail, with errno ENOMEM as the C library's
 * would leave it (callers that tell no memory from other failures by errno). */
static int refuse(void)
{
    tls_seen++;
    if (__builtin_expect(tls_fail_in == 0, 1) || --tls_fail_in != 0)
        return 0;
    errno = ENOMEM;
    return 1;
}

void *vdev_malloc(size_t n)
{
    return refuse() ? NULL : malloc(n);
}

void *vdev_calloc(size_t count, size_t size)
{
    return refuse() ? NULL : calloc(count, size);
}

void *vdev_realloc(void *p, size_t n)
{
    return refuse() ? NULL : realloc(p, n);
}

char *vdev_strdup(const char *s)
{
    return vdev_strndup(s, strlen(s));
}

char *vdev_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = vdev_malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

/* ---- device refusals (the same for tensors' device memory) ---- */

static _Thread_local long tls_dev_fail_in;
static _Thread_local long tls_dev_seen;

int vdev_device_refused(void)
{
    tls_dev_seen++;
    if (__builtin_expect(tls_dev_fail_in == 0, 1) || --tls_dev_fail_in != 0)
        return 0;
    return 1;
}

void vdev_device_fail_at(long nth)
{
    tls_dev_fail_in = nth > 0 ? nth : 0;
}

long vdev_device_allocs(void)
{
    return tls_dev_seen;
}

int vdev_device_fail_pending(void)
{
    return tls_dev_fail_in != 0;
}

/* ---- host refusals ---- */

void vdev_host_fail_at(long nth)
{
    tls_fail_in = nth > 0 ? nth : 0;
}

long vdev_host_allocs(void)
{
    return tls_seen;
}

int vdev_host_fail_pending(void)
{
    return tls_fail_in != 0;
}
