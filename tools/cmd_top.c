/* cmd_top.c — `vdev top`: a live view of a running vdev process, read from
 * its metrics endpoint (VDEV_METRICS_ADDR): per logical device a memory bar
 * (in use, reserved, limit), the peak, OOMs, the op rate and bytes copied.
 *
 *   vdev top [--url http://127.0.0.1:9400] [--interval S] [--once]
 *
 * It speaks just enough HTTP/1.0 to GET the page and reads the Prometheus
 * text format line by line; it links no vdev state of its own. The op rate
 * comes from two samples; --once takes two samples --interval apart, prints
 * one frame and exits (without clearing the screen). When standard output is
 * not a terminal, frames follow one another as plain text, with no escape
 * codes (as `top -b` does), every column at full width; on a terminal each
 * frame is fitted to its width (fit()). */
#define _GNU_SOURCE
#include "cli.h"
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* as many as a vdev process has (a CPU and two logical devices per GPU);
 * more, from another endpoint, are counted and said to be left out */
#define TOP_MAX_DEVS VDEV_MAX_LOGICAL_DEVICES
#define BAR_WIDTH 32
/* an answer must end within this many seconds and be at most this large */
#define TOP_ANSWER_S 10
#define TOP_ANSWER_MAX (64 << 20)

struct top_dev {
    char name[64];
    char backend[16];
    double in_use, peak, reserved, limit, largest_free, allocs, fails, ops, copied_out, copied_in;
};

struct top_sample {
    int n, n_left_out; /* devices shown; samples of devices past TOP_MAX_DEVS */
    struct top_dev dev[TOP_MAX_DEVS];
    double t; /* seconds, monotonic */
};

struct url {
    char host[160], port[8], path[256], text[512];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* http://HOST[:PORT][/PATH]; PATH defaults to /metrics (a bare "/" is the
 * path "/", as typed). 0 on success, -2
 * for a port outside 1..65535, -1 for anything else wrong. */
static int parse_url(const char *s, struct url *u)
{
    memset(u, 0, sizeof *u);
    if (strncmp(s, "http://", 7) != 0)
        return -1;
    const char *h = s + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    char hp[160];
    if (hl == 0 || hl >= sizeof hp)
        return -1;
    memcpy(hp, h, hl);
    hp[hl] = '\0';
    char *colon = hp[0] == '[' ? strstr(hp, "]:") : strrchr(hp, ':');
    if (hp[0] == '[') {
        char *close = strchr(hp, ']');
        if (!close)
            return -1;
        *close = '\0';
        snprintf(u->host, sizeof u->host, "%s", hp + 1);
        if (colon)
            colon++;
    } else {
        if (colon)
            *colon = '\0';
        snprintf(u->host, sizeof u->host, "%s", hp);
    }
    const char *port = colon && colon[1] ? colon + 1 : "80";
    if (strspn(port, "0123456789") != strlen(port) || !u->host[0])
        return -1;
    while (port[0] == '0' && port[1])
        port++;
    if (strlen(port) > 5 || strtol(port, NULL, 10) < 1 || strtol(port, NULL, 10) > 65535)
        return -2;
    snprintf(u->port, sizeof u->port, "%s", port);
    if (slash && strlen(slash) >= sizeof u->path)
        return -1;
    snprintf(u->path, sizeof u->path, "%s", slash ? slash : "/metrics");
    snprintf(u->text, sizeof u->text, "%.*s%s", (int)(7 + hl), s, u->path);
    return 0;
}

/* Whether a sample was read: an endpoint that refuses after that went away. */
static int seen;

/* GETs the page into a malloc'd NUL-terminated body. On failure prints one
 * line and returns NULL. */
static char *fetch(const struct url *u)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int e = getaddrinfo(u->host, u->port, &hints, &ai);
    if (e != 0) {
        fprintf(stderr, "vdev top: %s: %s\n", u->text, gai_strerror(e));
        return NULL;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *p = ai; p && fd < 0; p = p->ai_next) {
        fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0 && seen) {
        fprintf(stderr, "vdev top: %s went away (%s): the watched process ended or stopped "
                        "serving\n",
                u->text, strerror(err));
        return NULL;
    }
    if (fd < 0) {
        fprintf(stderr, "vdev top: cannot connect to %s: %s (is VDEV_METRICS_ADDR set in the "
                        "watched process?)\n",
                u->text, strerror(err));
        return NULL;
    }
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", u->path, u->host);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        fprintf(stderr, "vdev top: %s: sending the request: %s\n", u->text, strerror(errno));
        close(fd);
        return NULL;
    }
    /* The whole answer within TOP_ANSWER_S, and at most TOP_ANSWER_MAX
     * bytes: an endpoint that trickles or streams without end is given up
     * on, not waited for or held in memory. */
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    double deadline = now_s() + TOP_ANSWER_S;
    for (;;) {
        if (!buf) {
            fprintf(stderr, "vdev top: %s: out of memory reading the answer\n", u->text);
            close(fd);
            return NULL;
        }
        double left = deadline - now_s();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)(left * 1000) + 1) <= 0) {
            if (len)
                fprintf(stderr,
                        "vdev top: %s: the answer did not end within %d s (%zu bytes read)\n",
                        u->text, TOP_ANSWER_S, len);
            else
                fprintf(stderr, "vdev top: %s: no answer within %d s\n", u->text, TOP_ANSWER_S);
            free(buf);
            close(fd);
            return NULL;
        }
        if (len + 4096 > cap) {
            if (cap >= TOP_ANSWER_MAX) {
                fprintf(stderr,
                        "vdev top: %s: the answer is over %d MiB, too large for a metrics page\n",
                        u->text, TOP_ANSWER_MAX >> 20);
                free(buf);
                close(fd);
                return NULL;
            }
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
            continue;
        }
        ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    if (len == 0) {
        fprintf(stderr, "vdev top: %s closed the connection without an answer\n", u->text);
        free(buf);
        return NULL;
    }
    int code = 0;
    /* the blank line that ends the headers: CRLF CRLF, or bare LFs */
    char *body = strstr(buf, "\r\n\r\n"), *lf = strstr(buf, "\n\n");
    size_t skip = 4;
    if (lf && (!body || lf < body)) {
        body = lf;
        skip = 2;
    }
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1 || code != 200 || !body) {
        char *eol = strpbrk(buf, "\r\n");
        if (eol)
            *eol = '\0';
        fprintf(stderr, "vdev top: %s answered \"%s\"%s\n", u->text, buf,
                code == 200 ? " and no blank line after the headers" : "");
        free(buf);
        return NULL;
    }
    memmove(buf, body + skip, strlen(body + skip) + 1);
    return buf;
}

/* The value of label `key` in `labels` ('a="x",b="y"', the text between
 * the braces), into out, with the exposition format's escapes undone (\\,
 * \" and \n). 1 when found and whole, else 0. */
static int label(const char *labels, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    const char *p = labels;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *k = p;
        while (*p && *p != '=' && *p != ',')
            p++;
        if (*p != '=' || p[1] != '"')
            return 0; /* not a label list */
        int want = (size_t)(p - k) == kl && !strncmp(k, key, kl);
        size_t n = 0;
        for (p += 2; *p && *p != '"'; p++) {
            char c = *p;
            if (c == '\\' && p[1]) {
                c = *++p;
                if (c == 'n')
                    c = '\n';
            }
            if (want && n + 1 < cap)
                out[n] = c;
            n++;
        }
        if (*p != '"')
            return 0; /* no closing quote */
        p++;
        if (want) {
            if (n >= cap)
                return 0;
            out[n] = '\0';
            return 1;
        }
    }
    return 0;
}

/* The '}' that closes the labels opened at `brace`, past quoted values
 * (which may hold '}' and escaped quotes), or NULL. */
static char *labels_end(char *brace)
{
    int quoted = 0;
    for (char *p = brace + 1; *p; p++) {
        if (quoted && *p == '\\' && p[1])
            p++;
        else if (*p == '"')
            quoted = !quoted;
        else if (!quoted && *p == '}')
            return p;
    }
    return NULL;
}

static struct top_dev *dev_of(struct top_sample *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->dev[i].name, name))
            return &s->dev[i];
    if (s->n == TOP_MAX_DEVS) {
        s->n_left_out++; /* said under the table */
        return NULL;
    }
    struct top_dev *d = &s->dev[s->n++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    return d;
}

/* Reads the samples of text into s. A sample whose value is no number
 * (Prometheus: a float, NaN or [+-]Inf, then an optional timestamp) is an
 * error: -1 after naming the line, 0 otherwise. */
static int parse_metrics(const struct url *u, char *text, struct top_sample *s)
{
    static const struct {
        const char *name;
        size_t off;
    } gauges[] = {
        {"vdev_memory_in_use_bytes", offsetof(struct top_dev, in_use)},
        {"vdev_memory_peak_in_use_bytes", offsetof(struct top_dev, peak)},
        {"vdev_memory_reserved_bytes", offsetof(struct top_dev, reserved)},
        {"vdev_memory_limit_bytes", offsetof(struct top_dev, limit)},
        {"vdev_memory_largest_free_block_bytes", offsetof(struct top_dev, largest_free)},
        {"vdev_allocations_total", offsetof(struct top_dev, allocs)},
        {"vdev_allocation_failures_total", offsetof(struct top_dev, fails)},
        {"vdev_ops_total", offsetof(struct top_dev, ops)}, /* summed over op types */
    };
    s->n = 0;
    s->n_left_out = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char *brace = strchr(line, '{'), *close = brace ? labels_end(brace) : NULL;
        if (!brace || !close)
            continue;
        *brace = '\0';
        *close = '\0';
        const char *name = line, *labels = brace + 1;
        char *end;
        double v = strtod(close + 1, &end);
        if (end == close + 1 || (*end && *end != ' ' && *end != '\t')) {
            *brace = '{';
            *close = '}';
            fprintf(stderr, "vdev top: %s: a sample whose value is not a number: '%s'\n",
                    u->text, line);
            return -1;
        }
        char dn[64], other[64];
        if (!strcmp(name, "vdev_copied_bytes_total")) {
            struct top_dev *d;
            if (label(labels, "from", dn, sizeof dn) && (d = dev_of(s, dn)))
                d->copied_out += v;
            if (label(labels, "to", other, sizeof other) && (d = dev_of(s, other)))
                d->copied_in += v;
            continue;
        }
        if (!label(labels, "device", dn, sizeof dn))
            continue;
        for (size_t g = 0; g < sizeof gauges / sizeof gauges[0]; g++)
            if (!strcmp(name, gauges[g].name)) {
                struct top_dev *d = dev_of(s, dn);
                if (!d)
                    break;
                double *field = (double *)((char *)d + gauges[g].off);
                *field += v;
                if (!d->backend[0])
                    label(labels, "backend", d->backend, sizeof d->backend);
            }
    }
    return 0;
}

/* A served value that cannot be a byte count or a counter: not a number,
 * infinite, negative, or beyond 2^64 (a sample vdev never serves). */
static int bogus(double v) { return !isfinite(v) || v < 0 || v >= 18446744073709551616.0; }

/* Bytes in at most 10 characters ("1023.9 PiB"), "?" for a bogus value. */
static const char *human(double b, char *buf, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bogus(b)) {
        snprintf(buf, cap, "?");
        return buf;
    }
    int i = 0;
    while (b >= 1024 && i < 6) {
        b /= 1024;
        i++;
    }
    snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", b, u[i]);
    return buf;
}

/* A count or a rate in at most `width` characters: as it is ("%.*f"),
 * else with k, M, G, T, P or E; "?" for a bogus value. */
static const char *count(double v, int decimals, int width, char *buf, size_t cap)
{
    static const char sfx[] = "kMGTPE";
    if (bogus(v)) {
        snprintf(buf, cap, "?");
        return buf;
    }
    if (snprintf(buf, cap, "%.*f", decimals, v) <= width)
        return buf;
    for (int i = 0; i < 6; i++) {
        v /= 1000;
        if (snprintf(buf, cap, "%.1f%c", v, sfx[i]) <= width ||
            snprintf(buf, cap, "%.0f%c", v, sfx[i]) <= width)
            return buf;
    }
    snprintf(buf, cap, "?");
    return buf;
}

/* The columns after the memory bar, and the order in which a terminal too
 * narrow for them all drops them: the copies, the peak, the OOMs, then the
 * backend, then the bar shrinks (to 10), then the op rate goes. */
enum { C_IN_USE, C_RESERVED, C_LIMIT, C_PEAK, C_OOMS, C_OPS, C_OUT, C_IN, N_COLS };
static const struct {
    const char *head;
    int width;
} COLS[N_COLS] = {{"in use", 10}, {"reserved", 10}, {"limit", 10},      {"peak", 10},
                  {"OOMs", 5},    {"ops/s", 10},    {"copied out", 10}, {"copied in", 10}};
#define MIN_BAR 10

struct layout {
    int bar, backend, show[N_COLS];
};

static int row_width(const struct layout *l)
{
    int w = 16 + (l->backend ? 9 : 0) + 1 + l->bar + 2;
    for (int c = 0; c < N_COLS; c++)
        w += l->show[c] ? 1 + COLS[c].width : 0;
    return w;
}

/* What fits in `width` columns (0: no limit: everything, as a file gets it). */
static struct layout fit(int width)
{
    struct layout l = {BAR_WIDTH, 1, {1, 1, 1, 1, 1, 1, 1, 1}};
    static const int drop[] = {C_IN, C_OUT, C_PEAK, C_OOMS};
    for (int k = 0; width > 0 && row_width(&l) > width; k++) {
        if (k < 4)
            l.show[drop[k]] = 0;
        else if (l.backend)
            l.backend = 0;
        else if (l.bar > MIN_BAR)
            l.bar = l.bar - (row_width(&l) - width) < MIN_BAR ? MIN_BAR
                                                               : l.bar - (row_width(&l) - width);
        else if (l.show[C_OPS])
            l.show[C_OPS] = 0;
        else
            break; /* as narrow as it goes */
    }
    return l;
}

/* One table line: the device, backend and memory fields, then the columns
 * shown, right-aligned. */
static void line(const struct layout *l, const char *dev, const char *backend, const char *memory,
                 const char *const v[N_COLS])
{
    printf("%-16s ", dev);
    if (l->backend)
        printf("%-8s ", backend);
    printf("%-*s", l->bar + 2, memory);
    for (int c = 0; c < N_COLS; c++)
        if (l->show[c])
            printf(" %*s", COLS[c].width, v[c]);
    printf("\n");
}

/* One frame, fitted to `width` columns (0: no limit). */
static void frame(const struct url *u, const struct top_sample *prev, const struct top_sample *cur,
                  int width)
{
    char clock[16];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(clock, sizeof clock, "%H:%M:%S", &tm);
    static const char legend[] = "(# in use, + reserved, . free up to the limit)";
    int title = printf("vdev top  %s  %s", u->text, clock);
    if (width > 0 && title + 3 + (int)strlen(legend) > width)
        printf("\n%s\n\n", legend);
    else
        printf("   %s\n\n", legend);
    struct layout l = fit(width);
    const char *heads[N_COLS];
    for (int c = 0; c < N_COLS; c++)
        heads[c] = COLS[c].head;
    line(&l, "device", "backend", "memory", heads);
    for (int i = 0; i < cur->n; i++) {
        const struct top_dev *d = &cur->dev[i];
        char bar[BAR_WIDTH + 3];
        int used = 0, res = 0;
        /* A bar needs three good values; else it is all '?'. */
        int unknown = bogus(d->in_use) || bogus(d->reserved) || bogus(d->limit);
        if (!unknown && d->limit > 0) {
            double fu = d->in_use / d->limit * l.bar + 0.5;
            double fr = d->reserved / d->limit * l.bar + 0.5;
            used = fu > l.bar ? l.bar : (int)fu;
            res = fr > l.bar ? l.bar : (int)fr;
        }
        bar[0] = '[';
        for (int k = 0; k < l.bar; k++)
            bar[1 + k] = unknown ? '?' : k < used ? '#' : k < res ? '+' : '.';
        bar[l.bar + 1] = ']';
        bar[l.bar + 2] = '\0';
        double rate = -1; /* none yet */
        for (int j = 0; prev && j < prev->n; j++)
            if (!strcmp(prev->dev[j].name, d->name) && cur->t > prev->t)
                rate = bogus(d->ops) || bogus(prev->dev[j].ops)
                           ? NAN
                           : (d->ops - prev->dev[j].ops) / (cur->t - prev->t);
        char a[24], b[24], c[24], p[24], o[24], in[24], r[24], f[24];
        if (rate < 0 && !isnan(rate))
            snprintf(r, sizeof r, "-"); /* none yet, or the counter went back (a restart) */
        else
            count(rate, 1, 10, r, sizeof r);
        const char *v[N_COLS] = {human(d->in_use, a, sizeof a),
                                 human(d->reserved, b, sizeof b),
                                 human(d->limit, c, sizeof c),
                                 human(d->peak, p, sizeof p),
                                 count(d->fails, 0, 5, f, sizeof f),
                                 r,
                                 human(d->copied_out, o, sizeof o),
                                 human(d->copied_in, in, sizeof in)};
        line(&l, d->name, d->backend[0] ? d->backend : "?", bar, v);
    }
    double total = 0;
    for (int i = 0; i < cur->n; i++)
        total += bogus(cur->dev[i].ops) ? NAN : cur->dev[i].ops;
    char tot[24];
    printf("\n%d device%s, %s ops run in all\n", cur->n, cur->n == 1 ? "" : "s",
           bogus(total) ? "?" : count(total, 0, 20, tot, sizeof tot));
    if (cur->n_left_out)
        printf("(more than %d devices: the rest are not shown)\n", TOP_MAX_DEVS);
    vdev_cli_flush();
}

/* The terminal's width in columns, read at each frame (a window resized
 * between frames gets the next one fitted); 0 when unknown. */
static int term_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 0;
}

static int sample(const struct url *u, struct top_sample *s)
{
    char *body = fetch(u);
    if (!body)
        return -1;
    s->t = now_s();
    int bad = parse_metrics(u, body, s);
    free(body);
    if (bad)
        return -1;
    if (s->n == 0) {
        fprintf(stderr, "vdev top: %s serves no vdev device metrics\n", u->text);
        return -1;
    }
    seen = 1;
    return 0;
}

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int vdev_cmd_top(int argc, char **argv)
{
    const char *url_text = "http://127.0.0.1:9400";
    double interval = 1.0;
    int once = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: vdev top [--url http://127.0.0.1:9400] [--interval S] [--once]\n\n"
                   "A live view of a vdev process that serves metrics (run it with\n"
                   "VDEV_METRICS_ADDR=127.0.0.1:9400): per logical device a memory bar (in use,\n"
                   "reserved, limit), the peak, OOMs, the op rate and bytes copied, refreshed\n"
                   "every --interval seconds, in (0, 3600] (default 1). --once takes two\n"
                   "samples --interval apart, prints one frame and exits. Ctrl-C quits. On a\n"
                   "terminal each frame fits its width (a narrow one drops columns: the\n"
                   "copies, the peak, the OOMs, the backend); when standard output is not a\n"
                   "terminal, the frames are printed one after another as plain text, every\n"
                   "column shown. The URL is http://HOST:PORT[/PATH]; without a PATH it is\n"
                   "/metrics (a bare '/' asks for '/').\n");
            return 0;
        } else if (!strcmp(a, "--once")) {
            once = 1;
        } else if (!strcmp(a, "--url") && i + 1 < argc) {
            url_text = argv[++i];
        } else if (!strcmp(a, "--interval") && i + 1 < argc) {
            char *end;
            interval = strtod(argv[++i], &end);
            /* a number as written, from its first character (strtod would
             * skip leading blanks, which no setting of vdev's takes) */
            if (*end || !(isdigit((unsigned char)argv[i][0]) || argv[i][0] == '.') ||
                !(interval > 0 && interval <= 3600)) {
                fprintf(stderr, "vdev top: --interval needs seconds in (0, 3600], not '%s'\n",
                        argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr,
                    "vdev top: unknown option or missing value '%s' (see 'vdev top --help')\n",
                    a);
            return 2;
        }
    }
    struct url u;
    int pr = parse_url(url_text, &u);
    if (pr == -2) {
        fprintf(stderr, "vdev top: --url '%s': the port must be a number from 1 to 65535\n",
                url_text);
        return 2;
    }
    if (pr != 0) {
        fprintf(stderr, "vdev top: --url '%s': expected http://HOST:PORT[/PATH]\n", url_text);
        return 2;
    }
    /* A terminal gets each frame over the last; anything else (a file, a
     * pipe) gets plain frames one after the other, a blank line between,
     * and no escape codes. */
    int tty = isatty(STDOUT_FILENO);
    static struct top_sample s[2];
    if (sample(&u, &s[0]) != 0)
        return 1;
    for (int k = 1, first = 1;; k ^= 1, first = 0) {
        sleep_s(interval);
        if (sample(&u, &s[k]) != 0)
            return 1;
        if (!once && tty)
            printf("\033[H\033[2J"); /* home, clear */
        else if (!first)
            printf("\n");
        frame(&u, &s[k ^ 1], &s[k], tty ? term_width() : 0);
        if (once || ferror(stdout))
            return 0; /* a write error: main() says so, exit status 1 */
    }
}
