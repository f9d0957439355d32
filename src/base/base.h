/* base.h — what every layer of vdev shares: the thread-local error, logging,
 * asserts that stay on in release builds, byte-size parsing and formatting,
 * and a small mutex wrapper. Private to the library. */
#ifndef VDEV_BASE_H
#define VDEV_BASE_H

#include "vdev.h"

#include <pthread.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define VDEV_PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))
#define VDEV_HIDDEN __attribute__((visibility("hidden")))
#define VDEV_UNUSED(x) ((void)(x))
#define VDEV_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Sets the calling thread's error (code + message) and returns `code`, so a
 * failing path reads `return vdev_error(VDEV_ERR_X, "...", ...)`. Never
 * allocates. */
enum vdev_status vdev_error(enum vdev_status code, const char *fmt, ...) VDEV_PRINTF(2, 3);
/* Marks the current error as the host's (its memory or address space ran out), not the
 * device's: a memory source's VDEV_ERR_OOM then gets advice for the host in the allocator's
 * message. vdev_error_is_host() says whether the current error is so marked; the next
 * vdev_error() or vdev_clear_error() unmarks it. */
void vdev_error_mark_host(void);
int vdev_error_is_host(void);
/* Prefixes the current message with more context: "<prefix>: <old message>". */
void vdev_error_prefix(const char *fmt, ...) VDEV_PRINTF(1, 2);
/* VDEV_OK when x is finite; else VDEV_ERR_INVALID_ARG saying so by name,
 * "<fn>: <what> is NaN, not a finite number" (or inf, -inf), where a range
 * check such as !(x > 0) would print a comparison NaN never failed. */
enum vdev_status vdev_check_finite(const char *fn, const char *what, double x);

/* Logging to stderr: "vdev: warning: ...". Thread-safe (one fprintf per line). */
void vdev_log_warning(const char *fmt, ...) VDEV_PRINTF(1, 2);
void vdev_log_info(const char *fmt, ...) VDEV_PRINTF(1, 2);

/* Aborts with file:line and the failed expression. VDEV_ASSERT stays on in
 * release builds; VDEV_DEBUG_ASSERT only without NDEBUG. */
_Noreturn void vdev_assert_fail(const char *expr, const char *file, int line);
#define VDEV_ASSERT(x) ((x) ? (void)0 : vdev_assert_fail(#x, __FILE__, __LINE__))
#ifdef NDEBUG
#define VDEV_DEBUG_ASSERT(x) ((void)0)
#else
#define VDEV_DEBUG_ASSERT(x) VDEV_ASSERT(x)
#endif

/* A mutex that aborts on the (impossible) failure of pthread calls. */
typedef struct {
    pthread_mutex_t m;
} vdev_mutex_t;
void vdev_mutex_init(vdev_mutex_t *m);
void vdev_mutex_destroy(vdev_mutex_t *m);
void vdev_mutex_lock(vdev_mutex_t *m);
void vdev_mutex_unlock(vdev_mutex_t *m);

/* Host memory (host_mem.c): as malloc, calloc, realloc, strdup and strndup, freed
 * with free(). Every host allocation of the core library goes through these, so that
 * tests can make one fail: vdev_host_fail_at(n) makes the calling thread's n-th next
 * allocation return NULL with errno ENOMEM (n <= 0: none), once;
 * vdev_host_fail_pending() says whether that one is still to come, and
 * vdev_host_fail_left() how many allocations are left before it (a test that sets a
 * countdown too long to end counts its allocations by it). Other threads are never
 * affected. */
void *vdev_malloc(size_t n);
void *vdev_calloc(size_t count, size_t size);
void *vdev_realloc(void *p, size_t n);
char *vdev_strdup(const char *s);
char *vdev_strndup(const char *s, size_t n);
void vdev_host_fail_at(long nth);
int vdev_host_fail_pending(void);
long vdev_host_fail_left(void);
/* The same for the device memory of tensors: vdev_device_fail_at(n) makes the calling
 * thread's n-th next tensor allocation fail as a full device would (VDEV_ERR_OOM);
 * vdev_device_refused() is asked once per allocation by the tensor layer (1: refuse
 * this one). vdev_refusals_armed counts the threads with a countdown set, so that an
 * allocation outside such tests costs one relaxed load. */
void vdev_device_fail_at(long nth);
int vdev_device_fail_pending(void);
long vdev_device_fail_left(void);
int vdev_device_refused_now(void);
#ifndef __cplusplus /* (C11 atomics; base.h is also read by the CUDA sources) */
extern _Atomic int vdev_refusals_armed;
static inline int vdev_device_refused(void)
{
    return __builtin_expect(atomic_load_explicit(&vdev_refusals_armed, memory_order_relaxed), 0) &&
           vdev_device_refused_now();
}
#endif

/* Monotonic clock in nanoseconds. */
uint64_t vdev_now_ns(void);

/* Case-insensitive ASCII comparisons. */
int vdev_strcasecmp(const char *a, const char *b);
int vdev_strncasecmp(const char *a, const char *b, size_t n);

/* Copies at most cap-1 bytes and always terminates (cap > 0). */
void vdev_strlcpy(char *dst, const char *src, size_t cap);

/* FNV-1a over n bytes, continued from h (start from VDEV_FNV1A_START): a
 * digest for checking that processes agree, never for security. */
#define VDEV_FNV1A_START 1469598103934665603ull
uint64_t vdev_fnv1a(uint64_t h, const void *p, size_t n);

#endif /* VDEV_BASE_H */
