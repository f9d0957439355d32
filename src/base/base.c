/* base.c — thread-local errors, logging, asserts, sizes, small utilities.
 *
 * The error of each thread lives in a fixed thread-local buffer, so reporting
 * an out-of-memory condition never allocates. */
#define _GNU_SOURCE
#include "base/base.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

static _Thread_local char tls_msg[512];
static _Thread_local enum vdev_status tls_code;
static _Thread_local int tls_host; /* the current error is the host's (vdev_error_mark_host) */

static const char *const status_names[VDEV_STATUS_COUNT] = {
    [VDEV_OK] = "VDEV_OK",
    [VDEV_ERR_INVALID_ARG] = "VDEV_ERR_INVALID_ARG",
    [VDEV_ERR_NOT_FOUND] = "VDEV_ERR_NOT_FOUND",
    [VDEV_ERR_OOM] = "VDEV_ERR_OOM",
    [VDEV_ERR_ALREADY_INITIALIZED] = "VDEV_ERR_ALREADY_INITIALIZED",
    [VDEV_ERR_CONFIG] = "VDEV_ERR_CONFIG",
    [VDEV_ERR_BACKEND] = "VDEV_ERR_BACKEND",
    [VDEV_ERR_IO] = "VDEV_ERR_IO",
    [VDEV_ERR_PARSE] = "VDEV_ERR_PARSE",
    [VDEV_ERR_SHAPE] = "VDEV_ERR_SHAPE",
    [VDEV_ERR_PLACEMENT] = "VDEV_ERR_PLACEMENT",
    [VDEV_ERR_UNSUPPORTED] = "VDEV_ERR_UNSUPPORTED",
    [VDEV_ERR_INTERNAL] = "VDEV_ERR_INTERNAL",
};

VDEV_API const char *vdev_status_str(enum vdev_status s)
{
    if ((unsigned)s >= VDEV_STATUS_COUNT)
        return "VDEV_ERR_UNKNOWN";
    return status_names[s];
}

VDEV_API const char *vdev_last_error(void) { return tls_msg; }
VDEV_API enum vdev_status vdev_last_status(void) { return tls_code; }

VDEV_API void vdev_clear_error(void)
{
    tls_msg[0] = '\0';
    tls_code = VDEV_OK;
    tls_host = 0;
}

enum vdev_status vdev_error(enum vdev_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    va_end(ap);
    tls_code = code;
    tls_host = 0;
    return code;
}

void vdev_error_mark_host(void) { tls_host = 1; }

int vdev_error_is_host(void) { return tls_host && tls_code != VDEV_OK; }

void vdev_error_prefix(const char *fmt, ...)
{
    char prefix[256], old[sizeof tls_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tls_msg, sizeof old);
    size_t np = strlen(prefix), no = strlen(old);
    if (np > sizeof tls_msg - 3)
        np = sizeof tls_msg - 3;
    memcpy(tls_msg, prefix, np);
    memcpy(tls_msg + np, ": ", 2);
    if (no > sizeof tls_msg - np - 3)
        no = sizeof tls_msg - np - 3;
    memcpy(tls_msg + np + 2, old, no);
    tls_msg[np + 2 + no] = '\0';
}

static void vlog(const char *level, const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "vdev: %s", level);
    if (n < 0)
        return;
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", line);
}

void vdev_log_warning(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("warning: ", fmt, ap);
    va_end(ap);
}

void vdev_log_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("", fmt, ap);
    va_end(ap);
}

_Noreturn void vdev_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "vdev: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

void vdev_mutex_init(vdev_mutex_t *m) { VDEV_ASSERT(pthread_mutex_init(&m->m, NULL) == 0); }
void vdev_mutex_destroy(vdev_mutex_t *m) { pthread_mutex_destroy(&m->m); }
void vdev_mutex_lock(vdev_mutex_t *m) { VDEV_ASSERT(pthread_mutex_lock(&m->m) == 0); }
void vdev_mutex_unlock(vdev_mutex_t *m) { VDEV_ASSERT(pthread_mutex_unlock(&m->m) == 0); }

uint64_t vdev_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

VDEV_API double vdev_clock_seconds(void) { return (double)vdev_now_ns() * 1e-9; }

int vdev_strncasecmp(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int ca = tolower((unsigned char)a[i]), cb = tolower((unsigned char)b[i]);
        if (ca != cb || ca == 0)
            return ca - cb;
    }
    return 0;
}

int vdev_strcasecmp(const char *a, const char *b) { return vdev_strncasecmp(a, b, (size_t)-1); }

enum vdev_status vdev_check_finite(const char *fn, const char *what, double x)
{
    if (isfinite(x))
        return VDEV_OK;
    return vdev_error(VDEV_ERR_INVALID_ARG, "%s: %s is %s, not a finite number", fn, what,
                      isnan(x) ? "NaN" : x > 0 ? "inf" : "-inf");
}

void vdev_strlcpy(char *dst, const char *src, size_t cap)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

uint64_t vdev_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* ---- sizes ---- */

struct unit {
    const char *name;
    uint64_t mult;
};

/* Longest names first so "KiB" is not read as "K" + "iB". K, M, G and T
 * are KiB, MiB, GiB and TiB, as in "16G". */
static const struct unit units[] = {
    {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
    {"KB", 1000ull},     {"MB", 1000000ull},  {"GB", 1000000000ull}, {"TB", 1000000000000ull},
    {"K", 1ull << 10},   {"M", 1ull << 20},   {"G", 1ull << 30},   {"T", 1ull << 40},
    {"B", 1},
};

/* The grammar: spaces, a whole number or a decimal ("16", "1.5": digits, at
 * most one point with digits on both sides; no sign, exponent or hex),
 * spaces, an optional unit of units[] in any case (but "b" alone, which may
 * mean bits), spaces. */
VDEV_API enum vdev_status vdev_parse_bytes(const char *text, uint64_t *out)
{
    if (!text || !out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_parse_bytes: NULL argument");
    const char *p = text;
    while (*p == ' ')
        p++;
    const char *num = p;
    bool overflow = false;
    uint64_t whole = 0;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        overflow |= whole > (UINT64_MAX - d) / 10;
        whole = whole * 10 + d;
    }
    const char *frac = NULL;
    if (p > num && *p == '.' && isdigit((unsigned char)p[1]))
        for (frac = ++p; isdigit((unsigned char)*p); p++)
            ;
    /* after the number: the end, spaces or a unit's letters ("0x10": hex) */
    if (p == num || (*p && *p != ' ' && !isalpha((unsigned char)*p)) ||
        (p == num + 1 && *num == '0' && (*p == 'x' || *p == 'X')))
        return vdev_error(VDEV_ERR_PARSE, "'%s' is not a size (expected e.g. 4GiB, 512MiB, 3GB)",
                          text);
    if ((*p == 'e' || *p == 'E') &&
        (isdigit((unsigned char)p[1]) ||
         ((p[1] == '+' || p[1] == '-') && isdigit((unsigned char)p[2]))))
        return vdev_error(VDEV_ERR_PARSE,
                          "'%s' is not a size: no exponents (a whole number or a decimal, then "
                          "a unit: e.g. 4GiB, 1.5GiB, 1000MiB)",
                          text);
    const char *end = p;
    while (*end == ' ')
        end++;
    size_t len = strlen(end);
    while (len && end[len - 1] == ' ')
        len--;
    uint64_t mult = 1;
    if (len) {
        const struct unit *u = NULL;
        for (size_t i = 0; i < VDEV_ARRAY_LEN(units) && !u; i++)
            if (strlen(units[i].name) == len && !vdev_strncasecmp(end, units[i].name, len) &&
                (strcmp(units[i].name, "B") || end[0] == 'B'))
                u = &units[i];
        if (!u)
            return vdev_error(VDEV_ERR_PARSE,
                              "'%s' has an unknown unit '%.*s' (use B, KiB, MiB, GiB, TiB, KB, "
                              "MB, GB, TB, K, M, G or T, in any case but 'b')",
                              text, (int)len, end);
        mult = u->mult;
    }
    if (overflow || whole > UINT64_MAX / mult)
        return vdev_error(VDEV_ERR_PARSE, "'%s' is too large", text);
    uint64_t bytes = whole * mult;
    if (frac) {
        /* the fraction's bytes, rounded down: 0.1 at most off in double */
        double f = strtod(frac - 1, NULL) * (double)mult;
        uint64_t extra = (uint64_t)f;
        if (extra > UINT64_MAX - bytes)
            return vdev_error(VDEV_ERR_PARSE, "'%s' is too large", text);
        bytes += extra;
    }
    *out = bytes;
    return VDEV_OK;
}

/* Bytes below 1 KiB as an integer, else two decimals in the largest binary
 * unit that keeps the value below 1024 after rounding (so 2^20 - 1 bytes is
 * "1.00 MiB", not "1024.00 KiB"), up to EiB, which holds every uint64
 * (UINT64_MAX is "16.00 EiB"). snprintf truncates to cap and terminates. */
VDEV_API char *vdev_format_bytes(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (!buf || cap == 0)
        return buf;
    if (bytes < 1024) {
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int i = 0;
    /* 1023.995 and above print as 1024.00: move up a unit instead. */
    while (v >= 1023.995 && i < 6) {
        v /= 1024.0;
        i++;
    }
    snprintf(buf, cap, "%.2f %s", v, names[i]);
    return buf;
}
