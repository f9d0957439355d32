/* cmd_plot.c — `vdev plot TRACE -o memory.svg`: pictures of a profiler trace
 * written by vdev (VDEV_TRACE_FILE), drawn as SVG by hand.
 *
 *   vdev plot run.json -o memory.svg               memory in use (solid) and
 *       reserved (dashed) per device over time, peaks and OOMs marked
 *   vdev plot --placement run.json -o placement.svg  ops per device, stacked
 *       by op type
 *
 * plot_read.c reads the trace (a streaming JSON parser; every number checked
 * against its field's range, bad input named by its line); a trace cut short
 * by a killed process is drawn up to its last whole event, with a note on
 * standard error. Every axis loop here counts ticks, so no data can make it
 * run on. */
#define _GNU_SOURCE
#include "cli.h"
#include "plot.h"
#include "plot_read.h"
#include "alloc/replay.h" /* vdev_input_name */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_TRACKS PLOT_MAX_TRACKS
#define MAX_OPS PLOT_MAX_OPS
#define MAX_TICKS 100 /* a bound on every axis loop, whatever the data */

static void seterr(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* ---- SVG ---- */

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                      "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#aec7e8"};
#define N_COLORS (sizeof palette / sizeof palette[0])

#define W 960
#define H 540  /* the least height: a taller legend makes the picture taller */
#define ML 90  /* margins: left, right, top, bottom */
#define MR 230
#define MT 50
#define MB 60
#define PH (H - MT - MB) /* the plot area's height, whatever the picture's */
#define LEGEND_ROW 20   /* a legend entry's height */

/* The picture's height: H, or more where the legend (n_rows entries from
 * MT + 10, then `tail` pixels more) would run past it, so every entry lies
 * inside the picture (a trace may hold 129 devices). */
static int picture_height(int n_rows, int tail)
{
    int bottom = MT + 10 + n_rows * LEGEND_ROW + tail + 16; /* 16: below the last baseline */
    return bottom > H ? bottom : H;
}

static void esc(FILE *o, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", o);
        else if (*s == '>')
            fputs("&gt;", o);
        else if (*s == '&')
            fputs("&amp;", o);
        else if (*s == '"')
            fputs("&quot;", o);
        else if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n')
            fputc('?', o); /* control characters are not allowed in XML 1.0 */
        else
            fputc(*s, o);
    }
}

/* "1.5 GiB", "512 KiB", "0 B" (the reader bounds byte counts by 2^63, so
 * the number before the unit stays below 2^23 TiB) */
static void fmt_bytes(double b, char *out, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    if (!(b < 1e15)) /* not from a checked trace: no cast, no long text */
        snprintf(out, cap, "%.3g %s", b, unit[u]);
    else if (b == floor(b))
        snprintf(out, cap, "%lld %s", (long long)b, unit[u]);
    else
        snprintf(out, cap, "%.2f %s", b, unit[u]);
    /* trim trailing zeros: "1.50 GiB" -> "1.5 GiB" */
    char *dot = strchr(out, '.');
    char *sp = dot ? strchr(dot, ' ') : NULL;
    if (sp && !strpbrk(out, "e")) {
        char *z = sp - 1;
        while (z > dot && *z == '0')
            z--;
        if (z == dot)
            z--;
        memmove(z + 1, sp, strlen(sp) + 1);
    }
}

/* A tick step of 1, 2 or 5 times a power of ten, giving at most ~8 ticks
 * (range: positive and finite). */
static double nice_step(double range, int ticks)
{
    double raw = range / ticks, p = 1;
    if (!(raw >= 1e-12 && raw <= 1e300))
        return range > 0 && isfinite(range) ? range : 1;
    while (p * 10 <= raw)
        p *= 10;
    while (p > raw)
        p /= 10;
    if (raw <= p)
        return p;
    if (raw <= 2 * p)
        return 2 * p;
    if (raw <= 5 * p)
        return 5 * p;
    return 10 * p;
}

/* A step for bytes: a power of two giving at most `ticks` ticks. */
static double byte_step(double range, int ticks)
{
    double s = 1;
    for (int i = 0; i < 1100 && s * ticks < range; i++)
        s *= 2;
    return s;
}

static void svg_open(FILE *o, const char *title, int height)
{
    fprintf(o,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"28\" font-size=\"16\" font-weight=\"bold\">",
            W, height, W, height, ML);
    esc(o, title);
    fputs("</text>\n", o);
}

static void axes(FILE *o, double xmax, double ymax, int bytes, const char *xlabel,
                 const char *ylabel)
{
    int pw = W - ML - MR, ph = PH;
    fprintf(o, "<g stroke=\"#ddd\" stroke-width=\"1\">\n");
    double ys = bytes ? byte_step(ymax, 6) : nice_step(ymax, 6);
    for (int i = 0; i <= MAX_TICKS && i * ys <= ymax * 1.0001; i++) {
        double y = i * ys;
        fprintf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", ML,
                MT + ph - y / ymax * ph, ML + pw, MT + ph - y / ymax * ph);
    }
    fprintf(o, "</g>\n<g font-size=\"11\" fill=\"#333\">\n");
    for (int i = 0; i <= MAX_TICKS && i * ys <= ymax * 1.0001; i++) {
        double y = i * ys;
        char b[32];
        if (bytes)
            fmt_bytes(y, b, sizeof b);
        else
            snprintf(b, sizeof b, "%g", y);
        fprintf(o, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", ML - 6,
                MT + ph - y / ymax * ph + 4, b);
    }
    if (xmax > 0) {
        double xs = nice_step(xmax, 8);
        for (int i = 0; i <= MAX_TICKS && i * xs <= xmax * 1.0001; i++) {
            double x = i * xs;
            fprintf(o,
                    "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>"
                    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                    ML + x / xmax * pw, MT + ph, ML + x / xmax * pw, MT + ph + 5,
                    ML + x / xmax * pw, MT + ph + 18, x);
        }
    }
    fprintf(o,
            "</g>\n<g stroke=\"#333\" stroke-width=\"1\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
            "y2=\"%d\"/><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/></g>\n",
            ML, MT, ML, MT + ph, ML, MT + ph, ML + pw, MT + ph);
    fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", ML + pw / 2,
            MT + ph + MB - 18, xlabel);
    fprintf(o,
            "<text x=\"18\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 18 %d)\">%s"
            "</text>\n",
            MT + ph / 2, MT + ph / 2, ylabel);
}

static int plot_memory(const struct plot_trace *T, FILE *o, const char *title)
{
    int pw = W - ML - MR, ph = PH;
    double xmax = T->t_end > 1e-9 ? T->t_end : 1, ymax = 0; /* seconds */
    for (int d = 0; d < T->n_mem; d++)
        for (size_t i = 0; i < T->mem[d].n; i++) {
            if (T->mem[d].s[i].reserved > ymax)
                ymax = T->mem[d].s[i].reserved;
            if (T->mem[d].s[i].in_use > ymax)
                ymax = T->mem[d].s[i].in_use;
        }
    /* the smallest multiple of a power-of-two step that fits the data */
    double top = ymax > 0 ? ymax : 1024, st = byte_step(top, 6);
    ymax = st;
    for (int i = 0; i < MAX_TICKS && ymax < top * 1.05; i++)
        ymax += st;
    /* the legend: a row per device, a gap of 10, then the four keys (the
     * last baseline 64 below the gap) */
    svg_open(o, title, picture_height(T->n_mem, 10 + 64));
    axes(o, xmax, ymax, 1, "time (s)", "memory");
#define X(t) (ML + (t) / xmax * pw)
#define Y(b) (MT + ph - (b) / ymax * ph)
    for (int d = 0; d < T->n_mem; d++) {
        const struct plot_series *s = &T->mem[d];
        const char *c = palette[d % N_COLORS];
        for (int k = 0; k < 2; k++) { /* reserved (dashed) under in use (solid) */
            fprintf(o,
                    "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s "
                    "stroke-linejoin=\"round\" points=\"",
                    c, k ? "1.8" : "1.4", k ? "" : " stroke-dasharray=\"6 4\"");
            double prev = 0;
            fprintf(o, "%.1f,%.1f", X(0.0), Y(0.0));
            for (size_t i = 0; i < s->n; i++) {
                double v = k ? s->s[i].in_use : s->s[i].reserved;
                fprintf(o, " %.1f,%.1f %.1f,%.1f", X(s->s[i].t), Y(prev), X(s->s[i].t), Y(v));
                prev = v;
            }
            fprintf(o, " %.1f,%.1f\"/>\n", X(xmax), Y(prev));
        }
    }
    /* peaks */
    for (int d = 0; d < T->n_mem; d++) {
        const struct plot_series *s = &T->mem[d];
        if (!s->n)
            continue;
        size_t pk = 0;
        for (size_t i = 1; i < s->n; i++)
            if (s->s[i].in_use > s->s[pk].in_use)
                pk = i;
        char b[32];
        fmt_bytes(s->s[pk].in_use, b, sizeof b);
        double x = X(s->s[pk].t), y = Y(s->s[pk].in_use);
        int right = x > ML + pw * 0.8;
        fprintf(o,
                "<g class=\"peak\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"white\" "
                "stroke=\"%s\" stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" "
                "text-anchor=\"%s\" font-size=\"11\">peak %s</text></g>\n",
                x, y, palette[d % N_COLORS], right ? x - 7 : x + 7, y - 6, palette[d % N_COLORS],
                right ? "end" : "start", b);
    }
    /* OOMs: on the device's in-use line at that time */
    for (size_t i = 0; i < T->n_oom; i++) {
        const struct plot_oom *m = &T->ooms[i];
        const char *dev = m->tid >= 0 ? T->track[m->tid] : "";
        double y = 0;
        for (int d = 0; d < T->n_mem; d++)
            if (!strcmp(T->mem[d].dev, dev))
                for (size_t j = 0; j < T->mem[d].n && T->mem[d].s[j].t <= m->t; j++)
                    y = T->mem[d].s[j].in_use;
        char b[32];
        fmt_bytes(m->bytes, b, sizeof b);
        double x = X(m->t), yy = Y(y);
        fputs("<g class=\"oom\"><title>OOM on ", o);
        esc(o, dev);
        fprintf(o,
                " at %.3f s: %s requested</title><path d=\"M%.1f,%.1f l-6,-10 h12 z\" "
                "fill=\"#d62728\" stroke=\"#d62728\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d62728\" font-size=\"11\" "
                "text-anchor=\"middle\">OOM %s</text></g>\n",
                m->t, b, x, yy, x, yy - 14 - 12.0 * (double)(i % 3), b);
    }
    /* legend */
    int lx = W - MR + 20, ly = MT + 10;
    fprintf(o, "<g font-size=\"12\">\n");
    for (int d = 0; d < T->n_mem; d++, ly += LEGEND_ROW) {
        fprintf(o,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
                "<text x=\"%d\" y=\"%d\">",
                lx, ly, lx + 24, ly, palette[d % N_COLORS], lx + 30, ly + 4);
        esc(o, T->mem[d].dev);
        fputs("</text>\n", o);
    }
    ly += 10;
    fprintf(o,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555\" stroke-width=\"1.8\"/>"
            "<text x=\"%d\" y=\"%d\">in use</text>\n"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555\" stroke-width=\"1.4\" "
            "stroke-dasharray=\"6 4\"/><text x=\"%d\" y=\"%d\">reserved</text>\n"
            "<circle cx=\"%d\" cy=\"%d\" r=\"4\" fill=\"white\" stroke=\"#555\" "
            "stroke-width=\"2\"/><text x=\"%d\" y=\"%d\">peak in use</text>\n"
            "<path d=\"M%d,%d l-6,-10 h12 z\" fill=\"#d62728\"/><text x=\"%d\" y=\"%d\">"
            "out of memory</text>\n</g>\n",
            lx, ly, lx + 24, ly, lx + 30, ly + 4, lx, ly + 20, lx + 24, ly + 20, lx + 30, ly + 24,
            lx + 12, ly + 40, lx + 30, ly + 44, lx + 12, ly + 65, lx + 30, ly + 64);
    if (!T->n_mem)
        fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no memory events in the "
                   "trace</text>\n", ML + pw / 2, MT + ph / 2);
    fputs("</svg>\n", o);
#undef X
#undef Y
    return 0;
}

static int plot_placement(const struct plot_trace *T, FILE *o, const char *title)
{
    int pw = W - ML - MR, ph = PH;
    /* op types by total count, largest first; the legend shows the top ones */
    int order[MAX_OPS + 1], n = T->n_op;
    long tot[MAX_OPS + 1] = {0};
    for (int k = 0; k <= MAX_OPS; k++)
        for (int d = 0; d < MAX_TRACKS; d++)
            tot[k] += T->count[d][k];
    for (int k = 0; k < n; k++)
        order[k] = k;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && tot[order[j]] > tot[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int shown = n < (int)N_COLORS - 1 ? n : (int)N_COLORS - 1; /* the rest: "other" */
    int devs[MAX_TRACKS], nd = 0;
    double ymax = 0;
    for (int d = 0; d < MAX_TRACKS; d++) {
        long sum = 0;
        for (int k = 0; k <= MAX_OPS; k++)
            sum += T->count[d][k];
        if (T->track[d][0] && (sum || strstr(T->track[d], ":GPU:")))
            devs[nd++] = d;
        if (sum > ymax)
            ymax = sum;
    }
    double st = nice_step(ymax > 0 ? ymax : 1, 6);
    double top = st;
    for (int i = 0; i < MAX_TICKS && top < ymax * 1.02; i++)
        top += st;
    svg_open(o, title, picture_height(shown + 1, 0)); /* a row per op type shown, "other" */
    axes(o, 0, top, 0, "device", "ops");
    double slot = nd ? (double)pw / nd : pw, bw = slot * 0.6;
    for (int i = 0; i < nd; i++) {
        int d = devs[i];
        double x = ML + slot * i + (slot - bw) / 2, base = 0;
        long sum = 0;
        for (int r = 0; r <= n; r++) {
            long c;
            const char *col, *nm;
            if (r < shown) {
                c = T->count[d][order[r]];
                col = palette[r];
                nm = T->op[order[r]];
            } else if (r == n) {
                c = T->count[d][MAX_OPS];
                for (int q = shown; q < n; q++)
                    c += T->count[d][order[q]];
                col = palette[N_COLORS - 1];
                nm = "other";
            } else {
                continue;
            }
            if (!c)
                continue;
            double h = c / top * ph;
            fprintf(o,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                    "stroke=\"white\" stroke-width=\"0.5\"><title>",
                    x, MT + ph - (base + c) / top * ph, bw, h, col);
            esc(o, nm);
            fprintf(o, ": %ld</title></rect>\n", c);
            base += c;
            sum += c;
        }
        fprintf(o, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">", x + bw / 2,
                MT + ph + 18);
        esc(o, T->track[d]);
        fprintf(o, "</text>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                   "font-size=\"11\">%ld</text>\n",
                x + bw / 2, MT + ph - (double)sum / top * ph - 5, sum);
    }
    int lx = W - MR + 20, ly = MT + 10;
    fprintf(o, "<g font-size=\"12\">\n");
    for (int r = 0; r < shown; r++, ly += LEGEND_ROW) {
        fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%d\" "
                   "y=\"%d\">",
                lx, ly - 7, palette[r], lx + 22, ly + 4);
        esc(o, T->op[order[r]]);
        fprintf(o, " (%ld)</text>\n", tot[order[r]]);
    }
    if (n > shown || tot[MAX_OPS])
        fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%d\" "
                   "y=\"%d\">other op types</text>\n",
                lx, ly - 7, palette[N_COLORS - 1], lx + 22, ly + 4);
    fputs("</g>\n", o);
    if (!nd)
        fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no ops in the trace</text>\n",
                ML + pw / 2, MT + ph / 2);
    fputs("</svg>\n", o);
    return 0;
}

/* Where a picture goes. A regular file, or a new one, is written whole or
 * not at all: the picture goes to a temporary file beside it (same folder,
 * so the rename stays on one file system), which replaces it only once all
 * of it is written, with the old file's permissions (a new one's: 0666 less
 * the umask, as fopen would); on a failure the temporary is removed and the
 * old file is left as it was. Anything else (standard output, a device, a
 * FIFO, a symbolic link) is written in place, as given. */
struct out_file {
    FILE *f;
    char tmp[4200]; /* the temporary file; "" when written in place */
    int existed;    /* out was there before (a regular file) */
};

/* The temporary file being written, or NULL: a signal that ends the process
 * meanwhile (Ctrl-C, SIGTERM, a closed terminal) removes it first, so no
 * '.FILE.XXXXXX' is left beside FILE. Only signals whose action is the
 * default are caught, for the time of the write; a program's own handler
 * (vdev demo's) is left alone. */
static _Atomic(const char *) pending_tmp;
/* 1 while the temporary file is being made and named (out_open): the end
 * signals are blocked on that thread then, but a signal sent to the process
 * may be taken by another of its threads (OpenBLAS starts its own when the
 * library loads), whose handler waits for the name before it looks. */
static atomic_int making_tmp;
static const int end_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_END_SIGNALS (int)(sizeof end_signals / sizeof end_signals[0])

static void on_end_signal(int sig)
{
    while (atomic_load(&making_tmp))
        ; /* a few instructions and one system call away: the file's naming */
    const char *tmp = atomic_load(&pending_tmp);
    if (tmp)
        unlink(tmp); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Catches the end signals left to their default; caught[k] says which. */
static void catch_end_signals(int caught[N_END_SIGNALS])
{
    struct sigaction sa = {.sa_handler = on_end_signal}, cur;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < N_END_SIGNALS; k++)
        caught[k] = sigaction(end_signals[k], NULL, &cur) == 0 && cur.sa_handler == SIG_DFL &&
                    sigaction(end_signals[k], &sa, NULL) == 0;
}

static void release_end_signals(const int caught[N_END_SIGNALS])
{
    for (int k = 0; k < N_END_SIGNALS; k++)
        if (caught[k])
            signal(end_signals[k], SIG_DFL);
}

static int out_open(struct out_file *o, const char *out, char *err, size_t cap)
{
    o->tmp[0] = '\0';
    o->existed = 0;
    if (!strcmp(out, "-")) {
        o->f = stdout;
        return 0;
    }
    struct stat st;
    int there = lstat(out, &st) == 0;
    if (there && !S_ISREG(st.st_mode)) {
        o->f = fopen(out, "w");
        if (!o->f)
            seterr(err, cap, "%s: cannot open for writing: %s", out, strerror(errno));
        return o->f ? 0 : 1;
    }
    const char *slash = strrchr(out, '/');
    int dir_len = slash ? (int)(slash - out) + 1 : 0; /* with its '/' */
    if (snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.XXXXXX", dir_len, out,
                 slash ? slash + 1 : out) >= (int)sizeof o->tmp) {
        o->tmp[0] = '\0';
        seterr(err, cap, "%s: cannot open for writing: %s", out, strerror(ENAMETOOLONG));
        return 1;
    }
    /* no end signal between the file's making and its naming in pending_tmp */
    sigset_t ends, old_mask;
    sigemptyset(&ends);
    for (int k = 0; k < N_END_SIGNALS; k++)
        sigaddset(&ends, end_signals[k]);
    pthread_sigmask(SIG_BLOCK, &ends, &old_mask);
    atomic_store(&making_tmp, 1);
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    int made_errno = errno;
    if (fd >= 0)
        atomic_store(&pending_tmp, o->tmp);
    atomic_store(&making_tmp, 0);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    errno = made_errno;
    if (fd < 0) {
        seterr(err, cap, "%s: cannot open for writing: %s", out, strerror(errno));
        o->tmp[0] = '\0';
        return 1;
    }
    mode_t mode;
    if (there) {
        mode = st.st_mode & 07777;
        o->existed = 1;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    o->f = fchmod(fd, mode) == 0 ? fdopen(fd, "w") : NULL;
    if (!o->f) {
        seterr(err, cap, "%s: cannot open for writing: %s", out, strerror(errno));
        close(fd);
        unlink(o->tmp);
        atomic_store(&pending_tmp, NULL);
        o->tmp[0] = '\0';
        return 1;
    }
    return 0;
}

/* Finishes the picture: 0, or 1 with the message in err. */
static int out_close(struct out_file *o, const char *out, char *err, size_t cap)
{
    /* Standard output is checked by main() before the command exits, as for
     * every command (tools/vdev.c); a file is checked here. */
    if (o->f == stdout)
        return 0;
    int e = vdev_cli_write_error(o->f);
    errno = 0;
    if (fclose(o->f) != 0 && !e)
        e = errno ? errno : -1;
    if (!e && o->tmp[0] && rename(o->tmp, out) != 0) {
        seterr(err, cap, "%s: cannot replace it with %s: %s", out, o->tmp, strerror(errno));
        unlink(o->tmp);
        atomic_store(&pending_tmp, NULL);
        return 1;
    }
    if (!e) {
        atomic_store(&pending_tmp, NULL); /* after the rename: a signal between finds none */
        return 0;
    }
    if (o->tmp[0])
        unlink(o->tmp);
    atomic_store(&pending_tmp, NULL);
    char left[4300] = "";
    if (o->existed)
        snprintf(left, sizeof left, " (%s is left as it was)", out);
    if (e > 0)
        seterr(err, cap, "%s: write error: %s%s", out, strerror(e), left);
    else
        seterr(err, cap, "%s: write error%s", out, left);
    return 1;
}

int vdev_plot_trace(const char *trace, const char *out, enum vdev_plot_kind kind,
                    struct vdev_plot_info *info, char *err, size_t cap)
{
    struct plot_trace *T = plot_trace_read(trace, err, cap);
    if (!T)
        return 1;
    if (info)
        *info = (struct vdev_plot_info){
            .n_events = T->n_events, .cut = T->cut, .cut_line = T->cut_line};
    struct out_file o;
    int caught[N_END_SIGNALS];
    catch_end_signals(caught);
    if (out_open(&o, out, err, cap) != 0) {
        release_end_signals(caught);
        plot_trace_free(T);
        return 1;
    }
    const char *base = strrchr(trace, '/');
    base = !strcmp(trace, "-") ? vdev_input_name(trace) : base ? base + 1 : trace;
    char title[256];
    snprintf(title, sizeof title, "%s per device: %s",
             kind == VDEV_PLOT_MEMORY ? "Memory" : "Ops", base);
    if (kind == VDEV_PLOT_MEMORY)
        plot_memory(T, o.f, title);
    else
        plot_placement(T, o.f, title);
    plot_trace_free(T);
    int rc = out_close(&o, out, err, cap);
    release_end_signals(caught);
    return rc;
}

int vdev_plot_file(const char *trace, const char *out, enum vdev_plot_kind kind, char *err,
                   size_t cap)
{
    return vdev_plot_trace(trace, out, kind, NULL, err, cap);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: vdev plot [--memory | --placement] TRACE [-o|--output FILE.svg]\n\n"
               "Draws a profiler trace written by vdev (VDEV_TRACE_FILE=run.json; plain or\n"
               "gzip-compressed; TRACE '-' reads standard input) as SVG (the last of\n"
               "--memory and --placement given wins):\n"
               "  --memory      memory in use (solid) and reserved (dashed) per device over\n"
               "                time, each device's peak and every out-of-memory failure\n"
               "                marked (the default)\n"
               "  --placement   ops per device, stacked by op type\n"
               "  -o, --output FILE\n"
               "                where to write the picture ('-' or none: standard output);\n"
               "                it replaces FILE only once written whole, so a failed write\n"
               "                leaves FILE as it was\n\n"
               "The picture is 960x540 pixels, taller where its legend (a row per device)\n"
               "needs it. A trace cut short (its process was killed) is drawn up to its\n"
               "last whole event, with a note on standard error.\n\n"
               "Exit status: 0 done, 1 unreadable or malformed trace, 2 usage error.\n");
}

int vdev_cmd_plot(int argc, char **argv)
{
    const char *in = NULL, *out = "-";
    enum vdev_plot_kind kind = VDEV_PLOT_MEMORY;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--placement")) {
            kind = VDEV_PLOT_PLACEMENT;
        } else if (!strcmp(a, "--memory")) {
            kind = VDEV_PLOT_MEMORY;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vdev plot: %s needs a file name (see 'vdev plot --help')\n", a);
                return 2;
            }
            out = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vdev plot: unknown option '%s' (see 'vdev plot --help')\n", a);
            return 2;
        } else if (in) {
            fprintf(stderr, "vdev plot: more than one trace given ('%s', '%s')\n", in, a);
            return 2;
        } else {
            in = a;
        }
    }
    if (!in) {
        fprintf(stderr, "vdev plot: no trace given (see 'vdev plot --help')\n");
        return 2;
    }
    char err[512];
    struct vdev_plot_info info;
    if (vdev_plot_trace(in, out, kind, &info, err, sizeof err) != 0) {
        fprintf(stderr, "vdev plot: %s\n", err);
        return 1;
    }
    if (info.cut)
        fprintf(stderr,
                "vdev plot: note: %s:%ld: the trace ends here, without its closing \"]\" (the "
                "process that wrote it did not finish): drew its %ld whole event%s\n",
                vdev_input_name(in), info.cut_line, info.n_events,
                info.n_events == 1 ? "" : "s");
    return 0;
}
