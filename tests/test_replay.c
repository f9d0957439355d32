/* test_replay.c — trace loading, replay, and the trace writer.
 *
 * Replays each trace of the repository (VDEV_DATA_DIR/traces) and a synthetic
 * trace of a million events written here (gzip, made as the benchmarks'
 * synthetic.trace.gz was made) once, with fewer events per timing run and a
 * coarser capacity search so it stays quick, and checks what must hold
 * whatever the machine: the event count (counted here independently), a
 * positive peak, a minimum capacity at or above the peak. Then malformed traces, written to a
 * temporary folder, must fail with VDEV_ERR_PARSE naming the file and line; a
 * gzip copy written with zlib must read exactly as the plain file; a trace
 * written by two allocators through vdev_alloc_trace_open() must read back
 * and replay; a NUL byte, a folder and a corrupt gzip stream fail with
 * their exact messages. Never asserts on time.
 */
#define _GNU_SOURCE
#include "alloc/replay.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>

static char tmpdir[256];

static void tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

/* Events counted without the library: lines that are neither comments nor blank. */
static uint64_t count_events(const char *path)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return 0;
    static char line[1 << 16];
    uint64_t n = 0;
    while (gzgets(f, line, sizeof line))
        if (line[0] == 'a' || line[0] == 'f')
            n++;
    gzclose(f);
    return n;
}

static void progress(void *user, const char *stage, double done)
{
    int *calls = user;
    (*calls)++;
    CHECK(done >= 0.0 && done <= 1.0);
    CHECK(!strcmp(stage, "capacity") || !strcmp(stage, "timing"));
}

/* One trace: loads, replays once and checks what holds on any machine. */
static void test_trace_file(const char *path, const char *name, uint64_t min_events)
{
    struct vdev_trace *t = NULL;
    CHECK_OK(vdev_trace_load(path, &t));
    if (!t)
        return;
    CHECK_EQ_U64(t->n_events, count_events(path));
    CHECK_EQ_U64(t->n_allocs + t->n_frees, t->n_events);
    CHECK(t->peak_live_bytes > 0);
    CHECK(t->peak_live_raw_bytes <= t->peak_live_bytes);
    int calls = 0;
    struct vdev_replay_options o = {.repeats = 1,
                                    .min_events = min_events,
                                    .precision = 0.005,
                                    .progress = progress,
                                    .progress_user = &calls};
    struct vdev_replay_result r;
    CHECK_OK(vdev_replay_run(t, &o, &r));
    CHECK_EQ_U64(r.events, t->n_events);
    CHECK_EQ_U64(r.peak_live_bytes, t->peak_live_bytes);
    CHECK(r.min_capacity_bytes >= r.peak_live_bytes);
    CHECK(r.capacity_ratio >= 1.0);
    CHECK(r.peak_reserved_bytes >= r.peak_live_bytes);
    CHECK(r.ns_per_event > 0);
    CHECK(r.runs == 1);
    CHECK(r.events_per_run >= min_events && r.events_per_run >= t->n_events);
    CHECK(r.timing_capacity_bytes == 2 * r.min_capacity_bytes);
    CHECK(calls >= 2);
    printf("%-20s %8llu events, %.1f ns/event, capacity ratio %.4f (to 0.5%%)\n", name,
           (unsigned long long)r.events, r.ns_per_event, r.capacity_ratio);
    vdev_trace_free(t);
}

/* One trace of the repository's data/traces. */
static void test_shared(const char *name, uint64_t min_events)
{
    char path[512];
    snprintf(path, sizeof path, "%s/traces/%s", VDEV_DATA_DIR, name);
    test_trace_file(path, name, min_events);
}

/* Writes a synthetic trace as synthetic.trace.gz was made (it is 4 MB, kept
 * outside the repository): n events, sizes log-uniform from 256 B to 64 MiB
 * rounded to 256 B, a live set that random-walks between 0 and 2 GiB, frees
 * of a random live block, ids never reused. Returns the peak of live bytes. */
static uint64_t write_synthetic(const char *path, uint64_t n)
{
    gzFile f = gzopen(path, "wb1");
    uint64_t *live_id = malloc(n * sizeof *live_id), *live_bytes = malloc(n * sizeof *live_bytes);
    CHECK(f && live_id && live_bytes);
    if (!f || !live_id || !live_bytes) {
        if (f)
            gzclose(f);
        free(live_id);
        free(live_bytes);
        return 0;
    }
    gzprintf(f, "# synthetic: %llu events, sizes log-uniform 256 B..64 MiB rounded to 256 B, "
                "live set random walk 0..2 GiB, random-order frees\n",
             (unsigned long long)n);
    uint64_t rng = 0x9E3779B97F4A7C15ull, n_live = 0, live = 0, peak = 0, next_id = 1;
    for (uint64_t e = 0; e < n; e++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; /* xorshift64 */
        double u = (double)(rng >> 11) / 9007199254740992.0;
        uint64_t bytes = ((uint64_t)(256.0 * pow(262144.0, u)) + 255) / 256 * 256;
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int alloc = n_live == 0 || ((rng >> 32) & 1);
        if (alloc && live + bytes > (2ull << 30))
            alloc = 0;
        if (alloc) {
            live_id[n_live] = next_id;
            live_bytes[n_live++] = bytes;
            gzprintf(f, "a %llu %llu\n", (unsigned long long)next_id++, (unsigned long long)bytes);
            live += bytes;
            peak = live > peak ? live : peak;
        } else {
            uint64_t k = (rng >> 33) % n_live;
            gzprintf(f, "f %llu\n", (unsigned long long)live_id[k]);
            live -= live_bytes[k];
            live_id[k] = live_id[--n_live];
            live_bytes[k] = live_bytes[n_live];
        }
    }
    CHECK(gzclose(f) == Z_OK);
    free(live_id);
    free(live_bytes);
    return peak;
}

/* The synthetic trace, written here, replays like the others. */
static void test_synthetic(void)
{
    char path[512];
    tmp_path(path, sizeof path, "synthetic.trace.gz");
    uint64_t peak = write_synthetic(path, 1000000);
    CHECK(peak > (1ull << 30) && peak <= (2ull << 30));
    struct vdev_trace *t = NULL;
    CHECK_OK(vdev_trace_load(path, &t));
    if (t) {
        CHECK_EQ_U64(t->n_events, 1000000);
        CHECK_EQ_U64(t->peak_live_bytes, peak);
        vdev_trace_free(t);
    }
    test_trace_file(path, "synthetic.trace.gz", 100000);
}

/* The header fields of mlp.trace, including a note with spaces and '='. */
static void test_header(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/traces/mlp.trace", VDEV_DATA_DIR);
    struct vdev_trace *t = NULL;
    CHECK_OK(vdev_trace_load(path, &t));
    if (!t)
        return;
    CHECK_STR(vdev_trace_field(t, "model"), "mlp");
    CHECK_STR(vdev_trace_field(t, "steps"), "3");
    CHECK_STR(vdev_trace_field(t, "step_starts"), "0,62,124");
    const char *note = vdev_trace_field(t, "note");
    CHECK(note && strstr(note, "Linear(1024,4096)-ReLU") && strstr(note, "left unfreed"));
    CHECK(vdev_trace_field(t, "nothing") == NULL);
    CHECK(strncmp(t->header, "trace v1 model=mlp", 18) == 0);
    vdev_trace_free(t);
}

/* A malformed trace must fail with the file and line in the message. */
static void expect_parse_error(const char *text, int line, const char *what)
{
    char path[512], want[600];
    tmp_path(path, sizeof path, "bad.trace");
    write_file(path, text);
    struct vdev_trace *t = (struct vdev_trace *)&t;
    CHECK_STATUS(vdev_trace_load(path, &t), VDEV_ERR_PARSE);
    CHECK(t == NULL);
    snprintf(want, sizeof want, "%s:%d: ", path, line);
    CHECK(strncmp(vdev_last_error(), want, strlen(want)) == 0);
    CHECK_MSG(what);
    if (strncmp(vdev_last_error(), want, strlen(want)) != 0)
        fprintf(stderr, "  expected \"%s...\", got \"%s\"\n", want, vdev_last_error());
}

/* A trace whose writer was stopped mid-line (a crash, a kill): its whole
 * lines load, and its last line, without a newline, is dropped and named. */
static void test_cut_last_line(void)
{
    static const struct {
        const char *text, *cut;
        unsigned line, events;
    } cases[] = {
        {"a 1 100\nf 1\na 7 1", "a 7 1", 3, 2},
        {"a 1 100\nf 1\na 7 1\r", "a 7 1", 3, 2},
        {"# trace v1 source=vdev\na 1 100\na", "a", 3, 1},
        {"a 1 100\nf", "f", 2, 1},
        {"a 5 1000\nf 5\n", "", 0, 2}, /* whole */
        {"a 5 1000\nf 5\n# the end, no newline", "", 0, 2},
    };
    char path[512];
    tmp_path(path, sizeof path, "cut.trace");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].text);
        struct vdev_trace *t = NULL;
        CHECK_OK(vdev_trace_load(path, &t));
        if (!t)
            continue;
        CHECK_EQ_U64(t->cut_line, cases[i].line);
        CHECK_STR(t->cut_text, cases[i].cut);
        CHECK_EQ_U64(t->n_events, cases[i].events);
        vdev_trace_free(t);
    }
    unlink(path);
}

/* Every kind of malformed line, and files that cannot be read. */
static void test_malformed(void)
{
    expect_parse_error("a 1 100\nx 2\n", 2, "unknown op 'x'");
    expect_parse_error("a 1\n", 1, "too few fields");
    expect_parse_error("a 1 100 5\n", 1, "too many fields");
    expect_parse_error("a 1 2\nf\n", 2, "too few fields");
    expect_parse_error("a 1 2\nf 1 2\n", 2, "too many fields");
    expect_parse_error("a one 100\n", 1, "ID 'one' is not a decimal number");
    expect_parse_error("a 1 -5\n", 1, "BYTES '-5' is not a decimal number");
    expect_parse_error("a 1 12x\n", 1, "BYTES '12x' is not a decimal number");
    /* Sizes and IDs beyond 64 bits, and live bytes beyond what replay models. */
    expect_parse_error("a 1 99999999999999999999999\n", 1,
                       "BYTES '99999999999999999999999' does not fit in 64 bits");
    expect_parse_error("a 1 18446744073709551616\n", 1,
                       "BYTES '18446744073709551616' does not fit in 64 bits");
    expect_parse_error("a 18446744073709551616 5\n", 1,
                       "ID '18446744073709551616' does not fit in 64 bits");
    expect_parse_error("a 1 18446744073709551615\n", 1,
                       "allocation of 18446744073709551615 bytes (must be 1 .. 2^64-256)");
    expect_parse_error("a 1 2305843009213693952\na 2 1\n", 2,
                       "live bytes reach 2305843009213694208 (2.00 EiB), more than the 2^61 "
                       "bytes (2.00 EiB) replay models at once");
    expect_parse_error("a 1 18446744073709551360\n", 1,
                       "live bytes reach 18446744073709551360 (16.00 EiB)");
    expect_parse_error("a 1 9223372036854775808\na 2 9223372036854775808\n", 1,
                       "live bytes reach 9223372036854775808 (8.00 EiB)");
    expect_parse_error("a 1 0\n", 1, "allocation of 0 bytes");
    expect_parse_error("# c\n\na 1 100\n# mid\nf 7\n", 5, "free of unknown id 7");
    expect_parse_error("a 1 100\nf 1\nf 1\n", 3, "free of id 1, which was already freed at line 2");
    expect_parse_error("a 1 100\na 1 200\n", 2, "allocation of id 1, which is live (allocated at "
                                                 "line 1)");
    expect_parse_error("a 1 100\r\nA 2 5\r\n", 2, "unknown op 'A'");
    /* vdev's own traces never reuse an ID and have one header: an ID that
     * comes back, or a second header, means two runs in one file */
    const char *own = "# trace v1 source=vdev pid=7 start=2026-12-04T00:00:00Z ids=never-reused\n";
    char two[512];
    snprintf(two, sizeof two, "%sa 0 256\na 1 512\nf 0\na 0 256\n", own);
    expect_parse_error(two, 5, "allocation of id 0, freed at line 4, but the header says "
                               "ids=never-reused: the file holds more than one run (two "
                               "processes, or a forked child, wrote it)");
    snprintf(two, sizeof two, "%sa 0 256\nf 0\n%sa 5 256\n", own, own);
    expect_parse_error(two, 4, "a second trace header: the file holds more than one run (two "
                               "processes, or a forked child, wrote it)");
    /* A last event line without its newline may be cut short ("a 7 10" cut
     * to "a 7 1"): dropped, whether or not it was, and the trace says so
     * (test_cut_last_line). A NUL byte is still an error (test_nul_and_read_errors). */

    /* Missing file: an I/O error naming it. */
    struct vdev_trace *t;
    char path[512];
    tmp_path(path, sizeof path, "missing.trace");
    CHECK_STATUS(vdev_trace_load(path, &t), VDEV_ERR_IO);
    CHECK_MSG("missing.trace");
    CHECK_STATUS(vdev_trace_load(NULL, &t), VDEV_ERR_INVALID_ARG);
}

static void test_well_formed(void)
{
    /* Comments and blank lines anywhere, CRLF, tabs, reused IDs, a block left
     * live at the end. */
    char path[512];
    tmp_path(path, sizeof path, "ok.trace");
    write_file(path, "# trace v1 model=tiny steps=2 note=a b c\n"
                     "a 5 1000\r\n"
                     "\n"
                     "# a comment\n"
                     "a\t6 3000\n"
                     "f 5\n"
                     "  a 5 10\n"
                     "f 5\n"
                     "# end\n");
    struct vdev_trace *t = NULL;
    CHECK_OK(vdev_trace_load(path, &t));
    if (!t)
        return;
    CHECK_EQ_U64(t->n_events, 5);
    CHECK_EQ_U64(t->n_allocs, 3);
    CHECK_EQ_U64(t->n_slots, 2);
    CHECK_EQ_U64(t->peak_live_bytes, 1024 + 3072);
    CHECK_EQ_U64(t->peak_live_raw_bytes, 4000);
    CHECK_EQ_U64(t->n_live_at_end, 1);
    CHECK_EQ_U64(t->live_at_end_bytes, 3072);
    CHECK_EQ_U64(t->events[0].line, 2);
    CHECK_STR(vdev_trace_field(t, "note"), "a b c");
    CHECK_STR(vdev_trace_field(t, "model"), "tiny");
    /* Back-to-back passes free the block left live after each pass. */
    struct vdev_replay_options o = {.repeats = 3, .min_events = 10000, .no_pin = 1};
    struct vdev_replay_result r;
    CHECK_OK(vdev_replay_run(t, &o, &r));
    CHECK_EQ_U64(r.passes_per_run, 2000);
    CHECK_EQ_U64(r.min_capacity_bytes, 4096);
    CHECK(r.capacity_ratio == 1.0);
    CHECK(r.ns_per_event_min <= r.ns_per_event && r.ns_per_event <= r.ns_per_event_max);
    CHECK_EQ_U64(r.pinned_cpu, -1);
    vdev_trace_free(t);

    /* A last line without a newline is fine when it is a comment or blank. */
    write_file(path, "a 5 1000\nf 5\n# the end, no newline");
    CHECK_OK(vdev_trace_load(path, &t));
    CHECK_EQ_U64(t->n_events, 2);
    vdev_trace_free(t);
    write_file(path, "a 5 1000\nf 5\n   ");
    CHECK_OK(vdev_trace_load(path, &t));
    CHECK_EQ_U64(t->n_events, 2);
    vdev_trace_free(t);
    /* Live bytes just below the bound load and replay (capacity search and
     * timing region included) without overflow. */
    write_file(path, "a 1 2305843009213693952\nf 1\na 2 2305843009213693952\n");
    CHECK_OK(vdev_trace_load(path, &t));
    CHECK_EQ_U64(t->peak_live_bytes, 2305843009213693952ull);
    struct vdev_replay_options o2 = {.repeats = 1, .min_events = 10, .no_pin = 1};
    CHECK_OK(vdev_replay_run(t, &o2, &r));
    CHECK_EQ_U64(r.min_capacity_bytes, 2305843009213693952ull);
    CHECK_EQ_U64(r.timing_capacity_bytes, 2 * 2305843009213693952ull);
    vdev_trace_free(t);

    /* A trace with no events. */
    write_file(path, "# nothing here\n");
    CHECK_OK(vdev_trace_load(path, &t));
    CHECK_EQ_U64(t->n_events, 0);
    CHECK_OK(vdev_replay_run(t, NULL, &r));
    CHECK_EQ_U64(r.events, 0);
    CHECK_EQ_U64(r.min_capacity_bytes, 0);
    vdev_trace_free(t);
}

/* transformer.trace compressed here with zlib reads back event for event. */
static void test_gzip(void)
{
    char src[512], gz[512];
    snprintf(src, sizeof src, "%s/traces/transformer.trace", VDEV_DATA_DIR);
    tmp_path(gz, sizeof gz, "transformer.trace.gz");
    FILE *in = fopen(src, "r");
    gzFile out = gzopen(gz, "wb");
    CHECK(in && out);
    if (!in || !out)
        return;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CHECK(gzwrite(out, buf, (unsigned)n) == (int)n);
    fclose(in);
    CHECK(gzclose(out) == Z_OK);
    struct vdev_trace *p = NULL, *z = NULL;
    CHECK_OK(vdev_trace_load(src, &p));
    CHECK_OK(vdev_trace_load(gz, &z));
    if (!p || !z)
        return;
    CHECK_EQ_U64(p->n_events, z->n_events);
    CHECK(memcmp(p->events, z->events, (size_t)p->n_events * sizeof *p->events) == 0);
    CHECK_EQ_U64(p->peak_live_bytes, z->peak_live_bytes);
    CHECK_STR(p->header, z->header);
    CHECK_EQ_U64(p->n_fields, z->n_fields);
    vdev_trace_free(p);
    vdev_trace_free(z);

    /* A gzip file cut short (here at a line end inside the stream, so every
     * line read is whole) is rejected, not read as a shorter trace. */
    char cut[512];
    tmp_path(cut, sizeof cut, "cut.trace.gz");
    FILE *f = fopen(gz, "rb");
    FILE *g = fopen(cut, "wb");
    CHECK(f && g);
    if (!f || !g)
        return;
    struct stat sb;
    CHECK(stat(gz, &sb) == 0);
    for (long i = 0; i < (long)sb.st_size / 2; i++)
        fputc(fgetc(f), g);
    fclose(f);
    fclose(g);
    struct vdev_trace *c = (struct vdev_trace *)&c;
    CHECK_STATUS(vdev_trace_load(cut, &c), VDEV_ERR_PARSE);
    CHECK(c == NULL);
    char want[600];
    snprintf(want, sizeof want, "%s: the gzip stream is cut short", cut);
    CHECK_MSG(want);
    /* Only the 8-byte trailer missing: zlib, reading ahead, notices before
     * the first line is handed out, so no line is named. */
    f = fopen(gz, "rb");
    g = fopen(cut, "wb");
    CHECK(f && g);
    if (!f || !g)
        return;
    for (long i = 0; i < (long)sb.st_size - 8; i++)
        fputc(fgetc(f), g);
    fclose(f);
    fclose(g);
    CHECK_STATUS(vdev_trace_load(cut, &c), VDEV_ERR_PARSE);
    snprintf(want, sizeof want, "%s: the gzip stream is cut short (the file ends inside it)", cut);
    CHECK_STR(vdev_last_error(), want);
    unlink(cut);

    /* A gzip trace whose last event line has no newline: as for plain text. */
    gzFile w = gzopen(cut, "wb");
    CHECK(w != NULL);
    if (!w)
        return;
    gzputs(w, "a 1 100\nf 1\na 7 1");
    CHECK(gzclose(w) == Z_OK);
    CHECK_OK(vdev_trace_load(cut, &c));
    if (c) {
        CHECK_EQ_U64(c->cut_line, 3);
        CHECK_STR(c->cut_text, "a 7 1");
        CHECK_EQ_U64(c->n_events, 2);
    }
    vdev_trace_free(c);
    unlink(cut);
}

/* Writes n bytes (NULs included) to path. */
static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* Loading path fails with status st and exactly the message "path" + tail. */
static void expect_load_error(const char *path, enum vdev_status st, const char *tail)
{
    char want[700];
    struct vdev_trace *t = (struct vdev_trace *)&t;
    snprintf(want, sizeof want, "%s%s", path, tail);
    CHECK_STATUS(vdev_trace_load(path, &t), st);
    CHECK(t == NULL);
    CHECK_STR(vdev_last_error(), want);
}

/* A NUL byte anywhere is a parse error naming its line and column, not a
 * line cut short (events lost, two lines run together, a NUL-filled tail
 * read as the end); plain or gzip, at a line start, inside a line, in a
 * comment, on a last line without a newline, and past a long line that
 * grows the buffer. A folder and a corrupt gzip stream name the file once,
 * with no line. */
static void test_nul_and_read_errors(void)
{
    char path[512], gz[512];
    tmp_path(path, sizeof path, "nul.trace");
    tmp_path(gz, sizeof gz, "nul.trace.gz");
    static const struct {
        const char *text;
        size_t n;
        const char *tail;
    } cases[] = {
#define NUL_CASE(s, tail) {s, sizeof s - 1, tail}
        NUL_CASE("a 1 1024\n\0a 2 999999\nf 1\n", ":2: a NUL byte at column 1"),
        NUL_CASE("a 1 10\00024\nf 1\n", ":1: a NUL byte at column 7"),
        NUL_CASE("a 1 1024\nf 1\n\0\0\0\0\n", ":3: a NUL byte at column 1"),
        NUL_CASE("a 1 1024\nf 1\n\0\0\0\0", ":3: a NUL byte at column 1"),
        NUL_CASE("# trace v1 model=x\0y\na 1 5\n", ":1: a NUL byte at column 19"),
        NUL_CASE("a 1 5\n# c\n  f 1\0\n", ":3: a NUL byte at column 6"),
#undef NUL_CASE
    };
    for (size_t i = 0; i < VDEV_ARRAY_LEN(cases); i++) {
        write_bytes(path, cases[i].text, cases[i].n);
        expect_load_error(path, VDEV_ERR_PARSE, cases[i].tail);
        gzFile w = gzopen(gz, "wb");
        CHECK(w != NULL);
        if (!w)
            return;
        CHECK(gzwrite(w, cases[i].text, (unsigned)cases[i].n) == (int)cases[i].n);
        CHECK(gzclose(w) == Z_OK);
        expect_load_error(gz, VDEV_ERR_PARSE, cases[i].tail);
    }
    /* A comment line of 1 MiB (longer than the read buffer), then events
     * and a NUL: the line count and the text around the long line hold. */
    size_t big = 1u << 20, n = 0;
    char *text = malloc(big + 64);
    CHECK(text != NULL);
    if (!text)
        return;
    memcpy(text, "a 1 5\n#", 7);
    memset(text + 7, 'x', big);
    n = 7 + big;
    memcpy(text + n, "\nf 1\na 2 7\n", 11);
    n += 11;
    write_bytes(path, text, n);
    struct vdev_trace *t = NULL;
    CHECK_OK(vdev_trace_load(path, &t));
    if (t) {
        CHECK_EQ_U64(t->n_events, 3);
        CHECK_EQ_U64(t->events[2].line, 4);
        CHECK_EQ_U64(t->peak_live_raw_bytes, 7);
    }
    vdev_trace_free(t);
    memcpy(text + n, "f \0002\n", 5);
    write_bytes(path, text, n + 5);
    expect_load_error(path, VDEV_ERR_PARSE, ":5: a NUL byte at column 3");
    free(text);
    unlink(path);
    unlink(gz);

    /* A folder: no line, and no "read error". */
    tmp_path(path, sizeof path, "adir");
    CHECK(mkdir(path, 0700) == 0);
    expect_load_error(path, VDEV_ERR_IO, ": is a directory");
    rmdir(path);
    /* A gzip stream whose stored block has a bad length: zlib's reason, the
     * file named once. */
    static const unsigned char bad[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x01,
                                        0x05, 0x00, 0x00, 0x00, 'a', ' ', '1', '\n'};
    write_bytes(gz, bad, sizeof bad);
    expect_load_error(gz, VDEV_ERR_IO, ": read error: invalid stored block lengths");
    unlink(gz);
}

/* A region source for the trace-writer test. */
static enum vdev_status src_reserve(void *ctx, uint64_t bytes, void **base)
{
    uint64_t *next = ctx;
    *base = (void *)(uintptr_t)*next;
    *next += bytes + (1u << 20);
    return VDEV_OK;
}
static void src_release(void *ctx, void *base, uint64_t bytes) {}

/* Two allocators write one trace (GROW and PREALLOCATE, an OOM, a free_after,
 * lookups alongside); it reads back with the right counts and replays. */
static void test_trace_writer(void)
{
    char path[512];
    tmp_path(path, sizeof path, "written.trace");
    vdev_alloc_trace_t *tr = NULL;
    CHECK_OK(vdev_alloc_trace_open(path, &tr));
    uint64_t next = 1ull << 40;
    vdev_alloc_t *a[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        struct vdev_alloc_config cfg = {
            .name = i ? "/device:GPU:1" : "/device:GPU:0",
            .limit_bytes = 64 << 20,
            .policy = i ? VDEV_POLICY_PREALLOCATE : VDEV_POLICY_GROW,
            .source = {.reserve = src_reserve, .release = src_release, .ctx = &next},
            .trace = tr,
        };
        CHECK_OK(vdev_alloc_new(&cfg, &a[i]));
    }
    if (!a[0] || !a[1])
        return;
    struct vdev_block b[40];
    for (int i = 0; i < 40; i++)
        CHECK_OK(vdev_alloc_malloc(a[i % 2], (uint64_t)(i + 1) * 1000, &b[i]));
    CHECK_STATUS(vdev_alloc_malloc(a[0], 1ull << 30, &b[0]), VDEV_ERR_OOM); /* a comment */
    for (int i = 0; i < 40; i += 2)
        vdev_alloc_free(a[i % 2], b[i].handle);
    vdev_alloc_free_after(a[1], b[1].handle, NULL); /* no events: frees at once */
    uint32_t h;
    CHECK_OK(vdev_alloc_lookup(a[1], b[3].ptr, &h)); /* the lookup table alongside tracing */
    CHECK_OK(vdev_alloc_check(a[0]));
    CHECK_OK(vdev_alloc_check(a[1]));
    vdev_alloc_destroy(a[0]);
    vdev_alloc_destroy(a[1]);
    vdev_alloc_trace_close(tr);
    vdev_alloc_trace_close(NULL);

    struct vdev_trace *t = NULL;
    CHECK_OK(vdev_trace_load(path, &t));
    if (!t)
        return;
    CHECK_EQ_U64(t->n_allocs, 40);
    CHECK_EQ_U64(t->n_frees, 21);
    CHECK_EQ_U64(t->n_live_at_end, 19);
    CHECK_STR(vdev_trace_field(t, "source"), "vdev");
    CHECK_EQ_U64(t->events[0].bytes, 1000); /* requested bytes, not rounded */
    uint64_t want = 0;
    for (int i = 0; i < 40; i++)
        want += ((uint64_t)(i + 1) * 1000 + 255) / 256 * 256;
    CHECK_EQ_U64(t->peak_live_bytes, want);
    struct vdev_replay_options o = {.repeats = 1, .min_events = 1000, .no_pin = 1};
    struct vdev_replay_result r;
    CHECK_OK(vdev_replay_run(t, &o, &r));
    CHECK(r.capacity_ratio >= 1.0);
    vdev_trace_free(t);

    /* The OOM was written as a comment. */
    FILE *f = fopen(path, "r");
    char line[256];
    int oom = 0;
    while (f && fgets(line, sizeof line, f))
        oom += strncmp(line, "# oom 1073741824", 16) == 0;
    if (f)
        fclose(f);
    CHECK_EQ_U64(oom, 1);

    CHECK_STATUS(vdev_alloc_trace_open("/nonexistent-dir/x.trace", &tr), VDEV_ERR_IO);
    CHECK(tr == NULL);
    CHECK_MSG("/nonexistent-dir/x.trace");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/vdev-test-replay-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_header();
    test_malformed();
    test_cut_last_line();
    test_well_formed();
    test_gzip();
    test_nul_and_read_errors();
    test_trace_writer();
    test_shared("mlp.trace", 100000);
    test_shared("transformer.trace", 100000);
    test_synthetic();
    /* Clean up the temporary folder. */
    const char *names[] = {"bad.trace", "ok.trace", "transformer.trace.gz", "written.trace",
                           "synthetic.trace.gz"};
    for (size_t i = 0; i < VDEV_ARRAY_LEN(names); i++) {
        char p[512];
        tmp_path(p, sizeof p, names[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return check_done();
}
