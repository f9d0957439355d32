/* vdev/status.h — what every part of the public API builds on: the standard
 * headers the declarations use (<stdio.h> too, for FILE, as vdev.h has always
 * included it), VDEV_API, the version of the headers and of the library, the
 * status codes every fallible call returns with the calling thread's last
 * error, sizes in bytes written and parsed as text, and a monotonic clock.
 * Part of the public API: vdev.h includes it, and so does every other part;
 * it may be included alone. The build reads the VDEV_VERSION_* macros here
 * (cmake/install.cmake) and checks them against the project's version. */
#ifndef VDEV_VDEV_STATUS_H
#define VDEV_VDEV_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* VDEV_API marks the public functions. The shared library is built with
 * hidden visibility and exports these alone; the declarations carry the same
 * attribute, so a program that hides its own symbols (-fvisibility=hidden,
 * #pragma GCC visibility) still links against them. */
#if defined(__GNUC__)
#define VDEV_API __attribute__((visibility("default")))
#else
#define VDEV_API
#endif

/* The version of the headers. The build checks that it matches the project's
 * version, which also names the shared library (libvdev.so.MAJOR). */
#define VDEV_VERSION_MAJOR 0
#define VDEV_VERSION_MINOR 1
#define VDEV_VERSION_PATCH 0

/* The version of the library in use, "MAJOR.MINOR.PATCH" (static string), so
 * a program can tell the header it was built with from the library it runs
 * with. Cannot fail. */
VDEV_API const char *vdev_version(void);

/* ---- status codes and errors ------------------------------------------- */

enum vdev_status {
    VDEV_OK = 0,
    VDEV_ERR_INVALID_ARG,         /* misuse: NULL where not allowed, bad value */
    VDEV_ERR_NOT_FOUND,           /* unknown device or object */
    VDEV_ERR_OOM,                 /* device memory exhausted (limit or card) */
    VDEV_ERR_ALREADY_INITIALIZED, /* configuration after start-up */
    VDEV_ERR_CONFIG,              /* configuration that cannot be honoured, bad env var */
    VDEV_ERR_BACKEND,             /* the backend (driver, plugin) failed */
    VDEV_ERR_IO,                  /* a file could not be read or written */
    VDEV_ERR_PARSE,               /* malformed input text (trace, size, list) */
    VDEV_ERR_SHAPE,               /* shapes or dtypes that do not fit the op */
    VDEV_ERR_PLACEMENT,           /* input on the wrong device in strict placement */
    VDEV_ERR_UNSUPPORTED,         /* valid request this build cannot serve */
    VDEV_ERR_INTERNAL,            /* a bug in vdev */
    VDEV_STATUS_COUNT
};

/* A static name for each code ("VDEV_ERR_OOM"); "VDEV_ERR_UNKNOWN" for a
 * value that is no code (VDEV_STATUS_COUNT included); never NULL. */
VDEV_API const char *vdev_status_str(enum vdev_status s);
/* The message of the calling thread's most recent failure ("" if none). The
 * string stays valid until the next vdev call on this thread. */
VDEV_API const char *vdev_last_error(void);
/* The code that went with vdev_last_error(). */
VDEV_API enum vdev_status vdev_last_status(void);
/* Clears the calling thread's error. */
VDEV_API void vdev_clear_error(void);
/* With VDEV_OOM_REPORT on: the calling thread's last out-of-memory report,
 * the error message and then the allocator's state, as printed on stderr
 * ("" when this thread has had none, or the variable is off). Valid until
 * this thread's next out-of-memory failure. */
VDEV_API const char *vdev_last_oom_report(void);

/* ---- sizes ------------------------------------------------------------- */

/* Parses "4GiB", "512 MiB", "3GB", "1024", "1.5GiB" (B, KiB/MiB/GiB/TiB are
 * powers of 1024; KB/MB/GB/TB are powers of 1000; K/M/G/T are taken as KiB…).
 * A decimal's fraction of a byte is dropped ("1.1KiB" is 1126 bytes, "0.5" is 0):
 * the settings that need whole bytes (logical devices' limits) check for it
 * themselves and refuse "256.9". VDEV_ERR_PARSE on anything else, naming the
 * text. */
VDEV_API enum vdev_status vdev_parse_bytes(const char *text, uint64_t *out);
/* Writes "4.00 GiB" (or "512 B"; binary units up to EiB, so UINT64_MAX is
 * "16.00 EiB") into buf, truncated to cap - 1 characters and terminated;
 * returns buf. cap 0 or a NULL buf writes nothing. */
VDEV_API char *vdev_format_bytes(uint64_t bytes, char *buf, size_t cap);

/* Seconds on a monotonic clock, for timing steps. */
VDEV_API double vdev_clock_seconds(void);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_STATUS_H */
