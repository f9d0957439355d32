/* plot_read.c — reads a profiler trace written by vdev (VDEV_TRACE_FILE) for
 * `vdev plot` (plot_read.h).
 *
 * The parser is yajl's (Debian: libyajl-dev), a streaming, callback-driven
 * JSON parser: traces run to hundreds of megabytes, and yajl reads them in
 * 64 KiB pieces in constant memory, where cJSON and jansson build the whole
 * document as a tree first (several times the file's size). Each event is
 * taken as its closing "}" arrives; only the samples drawn are kept.
 *
 * The file is read through zlib, so a trace may be plain or gzip-compressed
 * (run.json.gz), as for `vdev replay` and `vdev fit`; a gzip stream cut short
 * is an error (a plain file cut short is drawn, see below).
 *
 * The text is fed to the parser one line at a time, so every callback knows
 * its line and every error names it. vdev writes one event per line inside
 * one JSON array; the reader checks that layout (an event ends on the line
 * where it starts), so a broken event is reported at its own line rather
 * than where the parser stumbles next.
 *
 * Numbers arrive as text and are checked before use: any number that is not
 * a finite double (1e400, -1e400) is an error, and so is a value outside its
 * field's range: times ("ts", "dur") are microseconds from 0 to 9.2e15 (2^63
 * ns, the range of a signed 64-bit nanosecond clock), "tid" is an integer
 * from 0 to 2^31 - 1, byte counts ("in_use", "reserved", "bytes") are
 * integers from 0 to 2^63 - 1. So nothing drawn can overflow or loop.
 *
 * A trace whose writer was killed (SIGKILL, SIGTERM, SIGINT) ends somewhere
 * inside its array, perhaps mid-event or mid-number, since vdev writes whole
 * buffers. Such a file is a prefix of a valid trace: the reader takes every
 * event up to the last whole one and says the trace was cut. Only the last
 * line may be cut: a line that ends (newline) inside an event is malformed. */
#define _GNU_SOURCE
#include "plot_read.h"

#include "alloc/replay.h" /* vdev_gzopen_input */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#define MAX_TIME_US 9.2e15  /* 2^63 ns is 9.22e15 us */
#define MAX_NUMBER_CHARS 63 /* longer number literals are refused */
#define READ_CHUNK (64 * 1024)

/* keys of an event, and of its "args" */
enum key { K_OTHER, K_NAME, K_PH, K_TS, K_DUR, K_TID, K_ARGS };
enum arg { A_OTHER, A_NAME, A_IN_USE, A_RESERVED, A_BYTES };

/* The fields of the event being read (vdev's keys; others are skipped). */
struct event {
    char ph[8], name[96], arg_name[64];
    double ts, dur, in_use, reserved, bytes;
    long tid; /* -1: none */
};

struct reader {
    struct plot_trace *T;
    const char *path;
    char *err;
    size_t cap;
    long line;        /* 1-based line being fed */
    int depth;        /* 0: outside, 1: in the array, 2: in an event, 3+: inside its values */
    int began;        /* saw the array's "[" */
    int ended;        /* saw its "]" */
    int failed;       /* a callback wrote err */
    enum key key;     /* the key of the value coming at depth 2 */
    enum arg arg;     /* the key of the value coming at depth 3 inside "args" */
    int in_args;      /* the map at depth 3 is the event's "args" */
    char keyname[24]; /* the last key seen, for messages */
    struct event ev;
};

static void seterr(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void seterr(struct reader *r, const char *fmt, ...)
{
    int n = snprintf(r->err, r->cap, "%s:%ld: ", r->path, r->line);
    if (n < 0 || (size_t)n >= r->cap)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->cap - (size_t)n, fmt, ap);
    va_end(ap);
    r->failed = 1;
}

static const char *const MALFORMED = "malformed event (expected one JSON object per line)";

/* Copies a string value into out (cap bytes), cut at a UTF-8 character
 * boundary so the picture stays valid text. */
static void copy_str(char *out, size_t cap, const unsigned char *s, size_t n)
{
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && (s[n] & 0xC0) == 0x80) /* s[n] continues a character: drop it */
            n--;
    }
    memcpy(out, s, n);
    out[n] = '\0';
}

/* ---- what one whole event adds to the trace ---- */

static struct plot_series *series_of(struct plot_trace *T, const char *dev)
{
    for (int i = 0; i < T->n_mem; i++)
        if (!strcmp(T->mem[i].dev, dev))
            return &T->mem[i];
    if (T->n_mem == PLOT_MAX_TRACKS)
        return NULL;
    struct plot_series *s = &T->mem[T->n_mem++];
    snprintf(s->dev, sizeof s->dev, "%s", dev);
    return s;
}

static int op_index(struct plot_trace *T, const char *name)
{
    for (int i = 0; i < T->n_op; i++)
        if (!strcmp(T->op[i], name))
            return i;
    if (T->n_op == PLOT_MAX_OPS)
        return PLOT_MAX_OPS;
    snprintf(T->op[T->n_op], sizeof T->op[0], "%s", name);
    return T->n_op++;
}

/* Grows an array of `size`-byte items to hold one more; 0, or -1 (no memory). */
static int grow(void **items, size_t n, size_t *cap, size_t size, size_t first)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : first;
    if (nc > SIZE_MAX / size)
        return -1;
    void *p = realloc(*items, nc * size);
    if (!p)
        return -1;
    *items = p;
    *cap = nc;
    return 0;
}

/* Returns 0, or -1 when out of memory. */
static int take_event(struct plot_trace *T, const struct event *e)
{
    int track = e->tid >= 0 && e->tid < PLOT_MAX_TRACKS ? (int)e->tid : -1;
    if (!strcmp(e->ph, "M")) {
        if (!strcmp(e->name, "thread_name") && track >= 0 && e->arg_name[0]) {
            char dev[64];
            snprintf(dev, sizeof dev, "%s", e->arg_name);
            char *sp = strchr(dev, ' '); /* "/device:GPU:0 (sim)" */
            if (sp)
                *sp = '\0';
            snprintf(T->track[track], sizeof T->track[0], "%s", dev);
        } else if (!strcmp(e->name, "thread_name") && e->tid >= 0 && e->arg_name[0] &&
                   T->n_more < PLOT_MORE_TRACKS) {
            /* a device's further op track, named after it: its ops count as its own */
            size_t n = strcspn(e->arg_name, " ");
            for (int i = 0; i < PLOT_MAX_TRACKS; i++)
                if (T->track[i][0] && strlen(T->track[i]) == n &&
                    !strncmp(T->track[i], e->arg_name, n)) {
                    T->more[T->n_more].tid = e->tid;
                    T->more[T->n_more++].track = i;
                    break;
                }
        }
        return 0;
    }
    double t = e->ts * 1e-6; /* both bounded: the sum stays finite */
    if (t > T->t_end)
        T->t_end = t;
    if (!strcmp(e->ph, "X")) {
        if (t + e->dur * 1e-6 > T->t_end)
            T->t_end = t + e->dur * 1e-6;
        for (int i = 0; track < 0 && e->tid >= 0 && i < T->n_more; i++)
            if (T->more[i].tid == e->tid)
                track = T->more[i].track;
        if (track >= 0 && strcmp(e->name, "Copy"))
            T->count[track][op_index(T, e->name)]++;
    } else if (!strcmp(e->ph, "C") && !strncmp(e->name, "memory ", 7)) {
        struct plot_series *s = series_of(T, e->name + 7);
        if (!s)
            return 0;
        if (grow((void **)&s->s, s->n, &s->cap, sizeof *s->s, 256) != 0)
            return -1;
        s->s[s->n++] = (struct plot_sample){.t = t, .in_use = e->in_use, .reserved = e->reserved};
    } else if (!strcmp(e->ph, "i") && !strcmp(e->name, "OOM")) {
        if (grow((void **)&T->ooms, T->n_oom, &T->cap_oom, sizeof *T->ooms, 16) != 0)
            return -1;
        T->ooms[T->n_oom++] = (struct plot_oom){.tid = track, .t = t, .bytes = e->bytes};
    }
    return 0;
}

/* ---- parser callbacks: each returns 1 to go on, 0 to stop ---- */

/* A value (or the start of one) arrives at the current depth. Values at the
 * top must be the array; in the array, events. */
static int value_ok(struct reader *r, int is_map)
{
    if (r->depth == 0) { /* a value other than the array ("[" calls on_start_array) */
        seterr(r, "not a vdev trace (expected \"[\" to open it)");
        return 0;
    }
    if (r->depth == 1 && !is_map) {
        seterr(r, "%s", MALFORMED);
        return 0;
    }
    return 1;
}

static int on_null(void *ctx)
{
    struct reader *r = ctx;
    return value_ok(r, 0);
}

static int on_boolean(void *ctx, int b)
{
    (void)b;
    return on_null(ctx);
}

/* A byte count: an integer from 0 to INT64_MAX. Digits alone are read
 * exactly; other forms (1e3, 5.0) by value. */
static int byte_count(const char *s, double d, double *out)
{
    if (strspn(s, "0123456789") == strlen(s)) {
        errno = 0;
        long long v = strtoll(s, NULL, 10);
        if (errno == ERANGE)
            return -1;
        *out = (double)v;
        return 0;
    }
    if (d < 0 || d >= 9223372036854775808.0 || d != floor(d))
        return -1;
    *out = d == 0 ? 0 : d; /* -0 as 0 */
    return 0;
}

static int on_number(void *ctx, const char *s, size_t n)
{
    struct reader *r = ctx;
    if (!value_ok(r, 0))
        return 0;
    char buf[MAX_NUMBER_CHARS + 1];
    if (n > MAX_NUMBER_CHARS) {
        seterr(r, "a number of %zu characters (at most %d are read): %.20s...", n, MAX_NUMBER_CHARS,
               s);
        return 0;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    double d = strtod(buf, NULL);
    if (!isfinite(d)) {
        if (r->depth >= 2)
            seterr(r, "\"%s\" is %s: out of range (not a finite double)", r->keyname, buf);
        else
            seterr(r, "number %s is out of range (not a finite double)", buf);
        return 0;
    }
    struct event *e = &r->ev;
    if (r->depth == 2) {
        if (r->key == K_TS || r->key == K_DUR) {
            if (!(d >= 0 && d <= MAX_TIME_US)) {
                seterr(r, "\"%s\" must be microseconds from 0 to %g (2^63 ns), not %s",
                       r->key == K_TS ? "ts" : "dur", MAX_TIME_US, buf);
                return 0;
            }
            *(r->key == K_TS ? &e->ts : &e->dur) = d;
        } else if (r->key == K_TID) {
            if (!(d >= 0 && d <= INT32_MAX && d == floor(d))) {
                seterr(r, "\"tid\" must be an integer from 0 to %d, not %s", INT32_MAX, buf);
                return 0;
            }
            e->tid = (long)d;
        }
    } else if (r->depth == 3 && r->in_args && r->arg >= A_IN_USE) {
        static const char *const names[] = {
            [A_IN_USE] = "in_use", [A_RESERVED] = "reserved", [A_BYTES] = "bytes"};
        double *dst = r->arg == A_IN_USE     ? &e->in_use
                      : r->arg == A_RESERVED ? &e->reserved
                                             : &e->bytes;
        if (byte_count(buf, d, dst) != 0) {
            seterr(r, "\"%s\" must be a byte count, an integer from 0 to %lld, not %s",
                   names[r->arg], (long long)INT64_MAX, buf);
            return 0;
        }
    }
    return 1;
}

static int on_string(void *ctx, const unsigned char *s, size_t n)
{
    struct reader *r = ctx;
    if (!value_ok(r, 0))
        return 0;
    struct event *e = &r->ev;
    if (r->depth == 2 && r->key == K_NAME)
        copy_str(e->name, sizeof e->name, s, n);
    else if (r->depth == 2 && r->key == K_PH)
        copy_str(e->ph, sizeof e->ph, s, n);
    else if (r->depth == 3 && r->in_args && r->arg == A_NAME)
        copy_str(e->arg_name, sizeof e->arg_name, s, n);
    return 1;
}

static int key_is(const unsigned char *s, size_t n, const char *k)
{
    return n == strlen(k) && !memcmp(s, k, n);
}

static int on_map_key(void *ctx, const unsigned char *s, size_t n)
{
    struct reader *r = ctx;
    copy_str(r->keyname, sizeof r->keyname, s, n);
    if (r->depth == 2) {
        r->key = key_is(s, n, "name")   ? K_NAME
                 : key_is(s, n, "ph")   ? K_PH
                 : key_is(s, n, "ts")   ? K_TS
                 : key_is(s, n, "dur")  ? K_DUR
                 : key_is(s, n, "tid")  ? K_TID
                 : key_is(s, n, "args") ? K_ARGS
                                        : K_OTHER;
    } else if (r->depth == 3 && r->in_args) {
        r->arg = key_is(s, n, "name")       ? A_NAME
                 : key_is(s, n, "in_use")   ? A_IN_USE
                 : key_is(s, n, "reserved") ? A_RESERVED
                 : key_is(s, n, "bytes")    ? A_BYTES
                                            : A_OTHER;
    }
    return 1;
}

static int on_start_map(void *ctx)
{
    struct reader *r = ctx;
    if (!value_ok(r, 1))
        return 0;
    if (r->depth == 1) {
        memset(&r->ev, 0, sizeof r->ev);
        r->ev.tid = -1;
        r->key = K_OTHER;
    }
    if (r->depth == 2) {
        r->in_args = r->key == K_ARGS;
        r->arg = A_OTHER;
    }
    r->depth++;
    return 1;
}

static int on_end_map(void *ctx)
{
    struct reader *r = ctx;
    r->depth--;
    if (r->depth == 2)
        r->in_args = 0;
    if (r->depth == 1) {
        if (take_event(r->T, &r->ev) != 0) {
            seterr(r, "out of memory");
            return 0;
        }
        r->T->n_events++;
    }
    return 1;
}

static int on_start_array(void *ctx)
{
    struct reader *r = ctx;
    if (r->depth == 0) {
        r->began = 1;
    } else if (r->depth == 1) {
        seterr(r, "%s", MALFORMED);
        return 0;
    }
    if (r->depth == 2)
        r->in_args = 0;
    r->depth++;
    return 1;
}

static int on_end_array(void *ctx)
{
    struct reader *r = ctx;
    r->depth--;
    if (r->depth == 0)
        r->ended = 1;
    if (r->depth == 2)
        r->in_args = 0;
    return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number, /* as text: integer and double callbacks are not used */
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

/* The parser's own complaint, on one line (freed by the caller). */
static void parser_error(struct reader *r, yajl_handle h)
{
    unsigned char *m = yajl_get_error(h, 0, NULL, 0);
    char msg[160] = "";
    if (m) {
        snprintf(msg, sizeof msg, "%s", (const char *)m);
        yajl_free_error(h, m);
    }
    msg[strcspn(msg, "\r\n")] = '\0';
    if (r->ended)
        seterr(r, "text after the closing \"]\"");
    else if (!r->began)
        seterr(r, "not a vdev trace (expected \"[\" to open it): %s", msg);
    else
        seterr(r, "%s: %s", MALFORMED, msg);
}

void plot_trace_free(struct plot_trace *T)
{
    if (!T)
        return;
    for (int i = 0; i < T->n_mem; i++)
        free(T->mem[i].s);
    free(T->ooms);
    free(T);
}

/* Whether the text that opens a file (n bytes) opens an allocation trace
 * (VDEV_ALLOC_TRACE): its "# trace v1" header, or an event line, "a ID ..."
 * or "f ID", neither of which a JSON trace can start with. */
static int alloc_trace(const unsigned char *b, size_t n)
{
    size_t i = 0;
    while (i < n && strchr(" \t\r\n", b[i]) && b[i])
        i++;
    if (n - i >= 10 && !memcmp(b + i, "# trace v1", 10))
        return 1;
    return n - i >= 3 && (b[i] == 'a' || b[i] == 'f') && b[i + 1] == ' ' && isdigit(b[i + 2]);
}

struct plot_trace *plot_trace_read(const char *path, char *err, size_t cap)
{
    /* reads gzip and plain text alike; "-" is standard input, named so from here on */
    gzFile f = vdev_gzopen_input(path, &path);
    if (!f) {
        snprintf(err, cap, "%s: cannot open: %s", path,
                 errno ? strerror(errno) : "out of memory");
        return NULL;
    }
    gzbuffer(f, 1u << 18);
    struct reader r = {.path = path, .err = err, .cap = cap, .line = 1};
    unsigned char *buf = malloc(READ_CHUNK);
    r.T = calloc(1, sizeof *r.T);
    yajl_handle h = r.T && buf ? yajl_alloc(&callbacks, NULL, &r) : NULL;
    if (!h) {
        snprintf(err, cap, "out of memory reading %s", path);
        goto fail;
    }
    int any = 0;     /* saw text other than white space */
    int ends_nl = 1; /* the last byte read is a newline */
    int got;
    while ((got = gzread(f, buf, READ_CHUNK)) > 0) {
        size_t n = (size_t)got;
        if (!any && alloc_trace(buf, n)) {
            snprintf(err, cap,
                     "%s: this is an allocation trace (VDEV_ALLOC_TRACE): use vdev replay or "
                     "vdev fit on it",
                     path);
            goto fail;
        }
        for (size_t off = 0; off < n;) {
            unsigned char *nl = memchr(buf + off, '\n', n - off);
            size_t seg = nl ? (size_t)(nl - (buf + off)) + 1 : n - off;
            for (size_t i = off; i < off + seg && !any; i++)
                any = !strchr(" \t\r\n", buf[i]);
            if (yajl_parse(h, buf + off, seg) != yajl_status_ok) {
                if (!r.failed)
                    parser_error(&r, h);
                goto fail;
            }
            off += seg;
            ends_nl = nl != NULL;
            if (nl) {
                if (r.depth >= 2) { /* an event goes on past its line */
                    seterr(&r, "%s", MALFORMED);
                    goto fail;
                }
                r.line++;
            }
        }
    }
    int zerr = Z_OK;
    const char *zmsg = gzerror(f, &zerr);
    if (zerr == Z_BUF_ERROR) { /* zlib: "unexpected end of file" */
        snprintf(err, cap, "%s: the gzip stream is cut short (the file ends inside it)", path);
        goto fail;
    }
    if (got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
        /* zlib's message starts with the file's name ("<fd:N>" for standard
         * input): drop it, ours does too */
        size_t n = strlen(path);
        const char *fd_end = strncmp(zmsg, "<fd:", 4) == 0 ? strstr(zmsg, ">: ") : NULL;
        if (zerr != Z_ERRNO && strncmp(zmsg, path, n) == 0 && zmsg[n] == ':' && zmsg[n + 1] == ' ')
            zmsg += n + 2;
        else if (zerr != Z_ERRNO && fd_end)
            zmsg = fd_end + 3;
        snprintf(err, cap, "%s: read error: %s", path, zerr == Z_ERRNO ? strerror(errno) : zmsg);
        goto fail;
    }
    if (ends_nl && r.line > 1)
        r.line--; /* the last line, not the empty one after it */
    if (!any) {
        snprintf(err, cap, "%s: empty file, not a vdev trace", path);
        goto fail;
    }
    if (yajl_complete_parse(h) != yajl_status_ok) {
        if (r.failed)
            goto fail;
        if (!r.began) {
            parser_error(&r, h);
            goto fail;
        }
        /* A prefix of a trace: every byte before the end parsed, so the file
         * was cut (a partial last event, or no "]"); its whole events stand. */
        r.T->cut = 1;
        r.T->cut_line = r.line;
    }
    yajl_free(h);
    free(buf);
    gzclose(f);
    return r.T;
fail:
    if (h)
        yajl_free(h);
    free(buf);
    plot_trace_free(r.T);
    gzclose(f);
    return NULL;
}
