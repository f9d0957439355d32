/* trace_load.c — trace loading (plain or gzip text through zlib) for
 * replay (replay.h). Loading turns each line into a pre-parsed event {bytes,
 * slot}: IDs are mapped to dense slots through an open-addressing hash of
 * every ID seen (a freed ID stays in the map, so an error can say when it
 * was freed), and a freed slot is reused, so replay keeps its handles in an
 * array as long as the most blocks live at once. Errors name the file and
 * line.
 */
#define _GNU_SOURCE
#include "alloc/replay.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define NIL UINT32_MAX
/* The most bytes a trace may hold live at once (2^61, 2 EiB): the replay's
 * address space (from 1 TiB up) must hold its regions: up to twice the peak
 * while searching the capacity, twice the capacity while timing. */
#define MAX_LIVE (1ull << 61)

/* ------------------------------------------------------------------------ */
/* ID map: id -> slot (NIL once freed) and the line of its last event */

struct id_entry {
    uint64_t id;
    uint32_t slot; /* NIL: freed */
    uint32_t line; /* line of the allocation (live) or of the free */
};

struct id_map {
    struct id_entry *e;
    uint8_t *used;
    size_t cap, n; /* cap is a power of two */
};

/* Fibonacci hashing: IDs are often consecutive, and the multiply spreads them
 * over the table. cap is a power of two. */
static size_t id_hash(uint64_t id, size_t cap)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

/* The entry for id, or the empty place where it would go (linear probing; the
 * table is never more than half full, so probes stay short). */
static size_t id_find(const struct id_map *m, uint64_t id)
{
    size_t i = id_hash(id, m->cap);
    while (m->used[i] && m->e[i].id != id)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* Makes room for one more ID, keeping the load under one half: doubles the
 * table and rehashes every entry. 0 on host OOM (the old table stays). */
static int id_reserve(struct id_map *m)
{
    if (2 * (m->n + 1) <= m->cap)
        return 1;
    size_t cap = m->cap ? m->cap * 2 : 1024;
    struct id_map nm = {vdev_calloc(cap, sizeof *nm.e), vdev_calloc(cap, 1), cap, m->n};
    if (!nm.e || !nm.used) {
        free(nm.e);
        free(nm.used);
        return 0;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i]) {
            size_t j = id_find(&nm, m->e[i].id);
            nm.used[j] = 1;
            nm.e[j] = m->e[i];
        }
    free(m->e);
    free(m->used);
    *m = nm;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* loading */

/* The state of one load; everything but the trace itself is freed at the end. */
struct loader {
    const char *path;
    gzFile f;             /* zlib reads gzip and plain text alike */
    char *buf;            /* decompressed text: lines handed out, then the rest */
    size_t cap;           /* bytes at buf; grown for a line longer than half of it */
    size_t start, end;    /* buf[start, end): read from the file, not yet handed out */
    int eof;              /* the file has no more bytes */
    int read_errno;       /* errno as a failed read left it */
    struct vdev_trace *t; /* what is being built */
    struct id_map ids;    /* every ID seen: live (slot) or freed (NIL) */
    uint32_t *free_slots; /* stack of freed slots, reused before new ones */
    uint32_t n_free_slots;
    uint64_t *slot_bytes; /* requested size of the block in each slot */
    uint32_t cap_slots;
    uint64_t cap_events;
    uint64_t live, live_raw; /* live bytes now: rounded to 256, and as requested */
    int unique_ids;          /* the header says ids=never-reused (vdev's own traces) */
};

/* What read_line() found. */
enum { LINE_EOF = 0, LINE_WHOLE, LINE_NO_NEWLINE, LINE_ERROR, LINE_GZIP_CUT, LINE_OOM };

/* Hands out the next line: *line points into l->buf, *len bytes long without
 * its '\n', and ends with a '\0' put where the '\n' was. The file is read
 * with gzread() in large blocks and split here: gzgets() cannot say where a
 * line that holds a NUL byte ends, and a NUL must be seen, not cut the line
 * short. LINE_WHOLE: a line that ended with '\n'; LINE_NO_NEWLINE: the last
 * line of the file, without one; LINE_EOF; LINE_ERROR: a read error (zlib's
 * error, and l->read_errno); LINE_OOM: no host memory to grow the buffer;
 * LINE_GZIP_CUT: the file ends inside a gzip stream (zlib's Z_BUF_ERROR,
 * "unexpected end of file"), which zlib itself lets pass as a short read. */
static int read_line(struct loader *l, char **line, size_t *len)
{
    size_t scan = l->start; /* the bytes before it hold no '\n' */
    for (;;) {
        char *nl = memchr(l->buf + scan, '\n', l->end - scan);
        if (nl) {
            *line = l->buf + l->start;
            *len = (size_t)(nl - *line);
            *nl = '\0';
            l->start += *len + 1;
            return LINE_WHOLE;
        }
        if (l->eof) {
            if (l->start == l->end)
                return LINE_EOF;
            *line = l->buf + l->start;
            *len = l->end - l->start;
            l->buf[l->end] = '\0'; /* reads leave a byte free for it */
            l->start = l->end;
            return LINE_NO_NEWLINE;
        }
        /* Keep the part of a line read so far at the front, grow the buffer
         * when it fills more than half of it, and read the next block. */
        size_t part = l->end - l->start;
        if (l->start) {
            memmove(l->buf, l->buf + l->start, part);
            l->start = 0;
            l->end = part;
        }
        scan = part;
        if (part > l->cap / 2) {
            char *nb = l->cap <= SIZE_MAX / 2 ? vdev_realloc(l->buf, l->cap * 2) : NULL;
            if (!nb)
                return LINE_OOM;
            l->buf = nb;
            l->cap *= 2;
        }
        size_t room = l->cap - l->end - 1;
        errno = 0;
        int n = gzread(l->f, l->buf + l->end, (unsigned)(room > INT32_MAX ? INT32_MAX : room));
        l->read_errno = errno;
        int err;
        gzerror(l->f, &err);
        if (err == Z_BUF_ERROR)
            return LINE_GZIP_CUT;
        if (n < 0 || err != Z_OK)
            return LINE_ERROR;
        if (n == 0)
            l->eof = 1;
        l->end += (size_t)n;
    }
}

/* Parses a decimal uint64 token: digits only, no sign (strtoull would accept
 * "-5", " 5" and "0x5"). 1: done; 0: not a decimal number; -1: digits that
 * do not fit in 64 bits. */
static int parse_u64(const char *s, uint64_t *v)
{
    if (!*s)
        return 0;
    uint64_t x = 0;
    int overflow = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10)
            overflow = 1;
        x = x * 10 + d;
    }
    if (overflow)
        return -1;
    *v = x;
    return 1;
}

/* A header key: letters, digits, '_', '-' and '.'. The "note=" value of the
 * shared traces holds "Adam(lr=1e-3)" — not a key, so it stays in the note. */
static int is_key(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
            return 0;
    return 1;
}

/* Splits "trace v1 k=v k=v ..." into fields; a token whose part before '='
 * is not a key continues the previous value. 0 on host OOM. */
static int parse_fields(struct vdev_trace *t, const char *text)
{
    const char *p = text;
    size_t cap = 0;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *tok = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        size_t n = (size_t)(p - tok);
        if (!n)
            break;
        const char *eq = memchr(tok, '=', n);
        if (eq && is_key(tok, (size_t)(eq - tok))) {
            if (t->n_fields == cap) {
                cap = cap ? cap * 2 : 16;
                char **nk = vdev_realloc(t->keys, cap * sizeof *nk);
                if (!nk)
                    return 0;
                t->keys = nk;
                char **nv = vdev_realloc(t->values, cap * sizeof *nv);
                if (!nv)
                    return 0;
                t->values = nv;
            }
            t->keys[t->n_fields] = vdev_strndup(tok, (size_t)(eq - tok));
            t->values[t->n_fields] = vdev_strndup(eq + 1, (size_t)(tok + n - eq - 1));
            t->n_fields++;
            if (!t->keys[t->n_fields - 1] || !t->values[t->n_fields - 1])
                return 0;
        } else if (t->n_fields) {
            /* Continuation: append " token" to the last value. */
            char **v = &t->values[t->n_fields - 1];
            size_t old = strlen(*v);
            char *nv = vdev_realloc(*v, old + 1 + n + 1);
            if (!nv)
                return 0;
            nv[old] = ' ';
            memcpy(nv + old + 1, tok, n);
            nv[old + 1 + n] = '\0';
            *v = nv;
        }
    }
    return 1;
}

#define PARSE_ERR(...) (vdev_error(VDEV_ERR_PARSE, __VA_ARGS__))
#define HOST_OOM() (vdev_error(VDEV_ERR_OOM, "loading %s: host out of memory", l->path))

/* Appends one event, doubling the array as needed. */
static enum vdev_status add_event(struct loader *l, uint64_t bytes, uint32_t slot, uint32_t line)
{
    struct vdev_trace *t = l->t;
    if (t->n_events == l->cap_events) {
        uint64_t cap = l->cap_events ? l->cap_events * 2 : 4096;
        struct vdev_trace_event *ne = vdev_realloc(t->events, (size_t)cap * sizeof *ne);
        if (!ne)
            return HOST_OOM();
        t->events = ne;
        l->cap_events = cap;
    }
    t->events[t->n_events].bytes = bytes;
    t->events[t->n_events].slot = slot;
    t->events[t->n_events].line = line;
    t->n_events++;
    return VDEV_OK;
}

/* Parses one event line (s has no comment, no newline and is not blank) and
 * applies it to the ID map: an allocation takes a slot (a freed one first), a
 * free gives its slot back. Counts the live bytes for the peaks. */
static enum vdev_status parse_event(struct loader *l, char *s, uint32_t line)
{
    /* Split on blanks into at most 4 tokens: one more than any valid line
     * has, so an extra field is seen. */
    char *tok[4];
    int n = 0;
    for (char *p = s; *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        if (n == 4)
            break;
        tok[n++] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        if (*p)
            *p++ = '\0';
    }
    const char *path = l->path;
    int is_a = strcmp(tok[0], "a") == 0, is_f = strcmp(tok[0], "f") == 0;
    if (!is_a && !is_f)
        return PARSE_ERR("%s:%u: unknown op '%.32s' (expected 'a ID BYTES' or 'f ID')", path, line,
                         tok[0]);
    if (is_a && n != 3)
        return PARSE_ERR("%s:%u: '%s' line has %s fields (expected 'a ID BYTES')", path, line,
                         tok[0], n < 3 ? "too few" : "too many");
    if (is_f && n != 2)
        return PARSE_ERR("%s:%u: '%s' line has %s fields (expected 'f ID')", path, line, tok[0],
                         n < 2 ? "too few" : "too many");
    uint64_t id, bytes = 0;
    int r;
    if ((r = parse_u64(tok[1], &id)) != 1)
        return PARSE_ERR("%s:%u: ID '%.32s' %s", path, line, tok[1],
                         r ? "does not fit in 64 bits" : "is not a decimal number");
    if (is_a && (r = parse_u64(tok[2], &bytes)) != 1)
        return PARSE_ERR("%s:%u: BYTES '%.32s' %s", path, line, tok[2],
                         r ? "does not fit in 64 bits" : "is not a decimal number");
    if (is_a && (bytes == 0 || bytes > (UINT64_MAX & ~(uint64_t)255)))
        return PARSE_ERR("%s:%u: allocation of %llu bytes (must be 1 .. 2^64-256)", path, line,
                         (unsigned long long)bytes);
    uint64_t rounded = (bytes + 255) & ~(uint64_t)255;
    if (is_a && rounded > MAX_LIVE - l->live) {
        char b[32];
        if (rounded > UINT64_MAX - l->live)
            return PARSE_ERR("%s:%u: live bytes reach more than 2^64, more than the 2^61 bytes "
                             "(2.00 EiB) replay models at once",
                             path, line);
        return PARSE_ERR("%s:%u: live bytes reach %llu (%s), more than the 2^61 bytes (2.00 EiB) "
                         "replay models at once",
                         path, line, (unsigned long long)(l->live + rounded),
                         vdev_format_bytes(l->live + rounded, b, sizeof b));
    }
    /* Look the ID up (reserving room first, so the entry stays put). */
    if (!id_reserve(&l->ids))
        return HOST_OOM();
    size_t i = id_find(&l->ids, id);
    struct id_entry *e = &l->ids.e[i];
    int known = l->ids.used[i];
    struct vdev_trace *t = l->t;
    if (is_a) {
        /* An ID may come back after its free, never while live; in a trace
         * whose header says its IDs are never reused, not at all (two runs
         * written into one file: two processes, or a forked child). */
        if (known && e->slot != NIL)
            return PARSE_ERR("%s:%u: allocation of id %llu, which is live (allocated at line %u)",
                             path, line, (unsigned long long)id, e->line);
        if (known && l->unique_ids)
            return PARSE_ERR("%s:%u: allocation of id %llu, freed at line %u, but the header says "
                             "ids=never-reused: the file holds more than one run (two processes, "
                             "or a forked child, wrote it)",
                             path, line, (unsigned long long)id, e->line);
        uint32_t slot;
        if (l->n_free_slots) {
            slot = l->free_slots[--l->n_free_slots];
        } else {
            if (t->n_slots == l->cap_slots) {
                uint32_t cap = l->cap_slots ? l->cap_slots * 2 : 1024;
                uint32_t *nf = vdev_realloc(l->free_slots, (size_t)cap * sizeof *nf);
                if (!nf)
                    return HOST_OOM();
                l->free_slots = nf;
                uint64_t *nb = vdev_realloc(l->slot_bytes, (size_t)cap * sizeof *nb);
                if (!nb)
                    return HOST_OOM();
                l->slot_bytes = nb;
                l->cap_slots = cap;
            }
            slot = t->n_slots++;
        }
        if (!known) {
            l->ids.used[i] = 1;
            l->ids.n++;
            e->id = id;
        }
        e->slot = slot;
        e->line = line;
        l->slot_bytes[slot] = bytes;
        l->live += rounded;
        l->live_raw += bytes;
        if (l->live > t->peak_live_bytes)
            t->peak_live_bytes = l->live;
        if (l->live_raw > t->peak_live_raw_bytes)
            t->peak_live_raw_bytes = l->live_raw;
        t->n_allocs++;
        return add_event(l, bytes, slot, line);
    }
    /* A free must name a live ID: the shared traces drop the frees of blocks
     * allocated before recording started, so an unknown ID is an error. */
    if (!known)
        return PARSE_ERR("%s:%u: free of unknown id %llu", path, line, (unsigned long long)id);
    if (e->slot == NIL)
        return PARSE_ERR("%s:%u: free of id %llu, which was already freed at line %u", path, line,
                         (unsigned long long)id, e->line);
    uint32_t slot = e->slot;
    e->slot = NIL;
    e->line = line;
    l->free_slots[l->n_free_slots++] = slot;
    uint64_t b = l->slot_bytes[slot];
    l->live -= (b + 255) & ~(uint64_t)255;
    l->live_raw -= b;
    t->n_frees++;
    return add_event(l, 0, slot, line);
}

/* The error of a read that failed (read_line()'s LINE_ERROR), naming the
 * file but no line: zlib reads ahead of the lines handed out. */
static enum vdev_status read_error(struct loader *l)
{
    int err;
    const char *msg = gzerror(l->f, &err);
    if (err == Z_MEM_ERROR)
        return HOST_OOM();
    if (err == Z_ERRNO && l->read_errno == EISDIR)
        return vdev_error(VDEV_ERR_IO, "%s: is a directory", l->path);
    if (err == Z_ERRNO)
        return vdev_error(VDEV_ERR_IO, "%s: read error: %s", l->path,
                          l->read_errno ? strerror(l->read_errno) : "unknown error");
    /* zlib's message starts with the file's name ("<fd:N>" for standard
     * input): drop it, ours does too */
    size_t n = strlen(l->path);
    const char *fd_end = strncmp(msg, "<fd:", 4) == 0 ? strstr(msg, ">: ") : NULL;
    if (strncmp(msg, l->path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        msg += n + 2;
    else if (fd_end)
        msg = fd_end + 3;
    return vdev_error(VDEV_ERR_IO, "%s: read error: %s", l->path, msg);
}

/* Reads the whole file: comments (the first one may carry the header
 * fields), blank lines, events. Then notes the blocks left live at the end. */
static enum vdev_status load(struct loader *l)
{
    struct vdev_trace *t = l->t;
    uint32_t line = 0;
    for (;;) {
        size_t len;
        char *s;
        int r = read_line(l, &s, &len);
        /* zlib decompresses ahead of the lines read, so the line is where
         * the cut was noticed, not where it is: none when it was noticed
         * before the first line. */
        if (r == LINE_GZIP_CUT && line == 0)
            return PARSE_ERR("%s: the gzip stream is cut short (the file ends inside it)",
                             l->path);
        if (r == LINE_GZIP_CUT)
            return PARSE_ERR("%s: the gzip stream is cut short (the file ends inside it; noticed "
                             "after line %u)",
                             l->path, line);
        if (r == LINE_OOM)
            return HOST_OOM();
        if (r == LINE_ERROR)
            return read_error(l);
        if (r == LINE_EOF)
            break;
        line++;
        if (line == UINT32_MAX)
            return PARSE_ERR("%s:%u: too many lines", l->path, line);
        /* A NUL byte has no place in a text trace: a file a crash left
         * NUL-filled, or two lines run together, must not load as a shorter
         * or a different trace (the string functions below would stop at
         * it). */
        size_t text = strlen(s);
        if (text != len)
            return PARSE_ERR("%s:%u: a NUL byte at column %zu", l->path, line, text + 1);
        /* Strip the line end (LF or CRLF) and leading blanks. */
        while (len && s[len - 1] == '\r')
            s[--len] = '\0';
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '#') {
            if (line == 1) {
                const char *h = s + 1;
                while (*h == ' ')
                    h++;
                free(t->header);
                t->header = vdev_strdup(h);
                if (!t->header || (strncmp(h, "trace v1", 8) == 0 && !parse_fields(t, h + 8)))
                    return HOST_OOM();
                const char *ids = vdev_trace_field(t, "ids");
                l->unique_ids = ids && strcmp(ids, "never-reused") == 0;
            } else if (l->unique_ids) {
                /* vdev writes its header once, on line 1 */
                const char *h = s + 1;
                while (*h == ' ')
                    h++;
                if (strncmp(h, "trace v1", 8) == 0 && (h[8] == ' ' || !h[8]))
                    return PARSE_ERR("%s:%u: a second trace header: the file holds more than one "
                                     "run (two processes, or a forked child, wrote it)",
                                     l->path, line);
            }
            continue;
        }
        if (!*s)
            continue;
        /* An event line must end with a newline: without one it may have
         * been cut short mid-number ("a 7 10" cut to "a 7 1"), which reads as
         * a valid but wrong event. vdev ends every line it writes with one,
         * so such a line is the end of a trace whose writer was stopped (a
         * crash, a kill): the whole lines before it stand, and it is dropped,
         * as `vdev plot` draws a profiler trace cut short. */
        if (r == LINE_NO_NEWLINE) {
            t->cut_line = line;
            snprintf(t->cut_text, sizeof t->cut_text, "%s", s);
            break;
        }
        enum vdev_status st = parse_event(l, s, line);
        if (st != VDEV_OK)
            return st;
    }
    /* Blocks never freed: remembered so back-to-back replays can free them. */
    for (size_t i = 0; i < l->ids.cap; i++)
        if (l->ids.used[i] && l->ids.e[i].slot != NIL)
            t->n_live_at_end++;
    if (t->n_live_at_end) {
        t->live_at_end = vdev_malloc((size_t)t->n_live_at_end * sizeof *t->live_at_end);
        if (!t->live_at_end)
            return HOST_OOM();
        uint32_t k = 0;
        for (size_t i = 0; i < l->ids.cap; i++)
            if (l->ids.used[i] && l->ids.e[i].slot != NIL)
                t->live_at_end[k++] = l->ids.e[i].slot;
    }
    t->live_at_end_bytes = l->live;
    return VDEV_OK;
}

const char *vdev_input_name(const char *path)
{
    return strcmp(path, "-") ? path : "(standard input)";
}

struct gzFile_s *vdev_gzopen_input(const char *path, const char **shown)
{
    *shown = vdev_input_name(path);
    errno = 0;
    if (strcmp(path, "-") != 0)
        return gzopen(path, "rb");
    int fd = dup(STDIN_FILENO);
    if (fd < 0)
        return NULL;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

/* Opens the file through zlib, runs load(), and frees the loader's scratch
 * state whatever happened; on failure the half-built trace goes too. */
enum vdev_status vdev_trace_load(const char *path, struct vdev_trace **out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_trace_load: out is NULL");
    *out = NULL;
    if (!path)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_trace_load: path is NULL");
    struct loader l = {.path = vdev_input_name(path), .cap = 1u << 18};
    enum vdev_status st;
    l.t = vdev_calloc(1, sizeof *l.t);
    l.buf = vdev_malloc(l.cap);
    if (!l.t || !l.buf || !(l.t->path = vdev_strdup(l.path)) || !(l.t->header = vdev_strdup(""))) {
        st = vdev_error(VDEV_ERR_OOM, "loading %s: host out of memory", l.path);
        goto done;
    }
    l.f = vdev_gzopen_input(path, &l.path);
    if (!l.f) {
        st = vdev_error(errno == ENOMEM ? VDEV_ERR_OOM : VDEV_ERR_IO, "cannot open %s: %s",
                        l.path, errno ? strerror(errno) : "out of memory");
        goto done;
    }
    gzbuffer(l.f, 1u << 18); /* fewer, larger reads for the 1e6-line traces */
    st = load(&l);
done:
    if (l.f)
        gzclose(l.f);
    free(l.buf);
    free(l.ids.e);
    free(l.ids.used);
    free(l.free_slots);
    free(l.slot_bytes);
    if (st != VDEV_OK) {
        vdev_trace_free(l.t);
        return st;
    }
    *out = l.t;
    return VDEV_OK;
}

void vdev_trace_free(struct vdev_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_fields; i++) {
        free(t->keys[i]);
        free(t->values[i]);
    }
    free(t->keys);
    free(t->values);
    free(t->path);
    free(t->header);
    free(t->events);
    free(t->live_at_end);
    free(t);
}

const char *vdev_trace_field(const struct vdev_trace *t, const char *key)
{
    if (!t || !key)
        return NULL;
    for (size_t i = 0; i < t->n_fields; i++)
        if (strcmp(t->keys[i], key) == 0)
            return t->values[i];
    return NULL;
}
