/* host_mem.c — the core library's one door to host memory: vdev_malloc, vdev_calloc,
 * vdev_realloc and vdev_strdup behave as the C library's (their memory goes back with
 * free()), and every allocation of the core goes through them (the CUDA and MPI plugins,
 * libraries of their own, keep the C library's), so that a test can make the n-th
 * allocation of its own thread fail (vdev_host_fail_at) and check, one n after another,
 * that each such failure is reported and leaves nothing lost or inconsistent. A second
 * countdown does the same for the device memory of tensors (vdev_device_fail_at, asked
 * by tensor.c and vdev_mem_alloc before the allocator).
 *
 * The countdowns are thread-local: a test fails its own thread's allocations, never
 * those of a stream thread it does not control. Production code pays one relaxed load
 * of a process-wide count of the threads that have a countdown set (zero outside such
 * tests) per allocation; only while it is not zero does an allocation look at its
 * thread's countdowns. */
#define _GNU_SOURCE
#include "base/base.h"

#include <errno.h>
#include <string.h>

/* on a cache line of its own: read by every allocation, written only by tests */
_Alignas(64) _Atomic int vdev_refusals_armed;
static _Thread_local long tls_host_left, tls_dev_left; /* 0: none; n: the n-th next fails */

static void countdown_set(long *left, long nth)
{
    long old = *left;
    *left = nth > 0 ? nth : 0;
    if (!old && *left)
        atomic_fetch_add(&vdev_refusals_armed, 1);
    else if (old && !*left)
        atomic_fetch_sub(&vdev_refusals_armed, 1);
}

/* 1 when this allocation is the one to fail (the countdown then ends). */
static int countdown_fires(long *left)
{
    if (*left == 0 || --*left != 0)
        return 0;
    atomic_fetch_sub(&vdev_refusals_armed, 1);
    return 1;
}

/* 1 when this call is the one to fail, with errno ENOMEM as the C library's
 * would leave it (callers that tell no memory from other failures by errno). */
static int refuse(void)
{
    if (__builtin_expect(!atomic_load_explicit(&vdev_refusals_armed, memory_order_relaxed), 1) ||
        !countdown_fires(&tls_host_left))
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

void vdev_host_fail_at(long nth) { countdown_set(&tls_host_left, nth); }
int vdev_host_fail_pending(void) { return tls_host_left != 0; }
long vdev_host_fail_left(void) { return tls_host_left; }

int vdev_device_refused_now(void) { return countdown_fires(&tls_dev_left); }
void vdev_device_fail_at(long nth) { countdown_set(&tls_dev_left, nth); }
int vdev_device_fail_pending(void) { return tls_dev_left != 0; }
long vdev_device_fail_left(void) { return tls_dev_left; }
