/* test_trace.c — VDEV_TRACE_FILE: configuration errors (empty, unwritable,
 * a bad placeholder, too long), the placeholders %p, %r and %% expanded, a
 * file locked while a process writes it (another process refused with the
 * message that names the writer, the first trace untouched), a child forked
 * from the writing process that leaves the trace alone, a trace that is
 * complete JSON after vdev_shutdown, with the device tracks named, op and
 * copy events and memory counters, copies on tracks of their device pair
 * where events never overlap without nesting (copies that overlap in time
 * on tracks of their own, concurrent copies from several threads, the table
 * of copy tracks full), and write failures (a full disk: /dev/full) reported
 * once on standard error and by vdev_shutdown in vdev_last_error, whether
 * they show during the run or only at the final flush and close. The file's
 * content is checked by looking for its parts; tests/cli_trace.sh parses it
 * fully. Run as `test_trace --start`, it starts vdev, prints the status and
 * the message, and exits (the second process of the lock test). */
#define _GNU_SOURCE
#include "check.h"

#include "runtime/observe.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_errors(void)
{
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", "", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_MSG("VDEV_TRACE_FILE");
    CHECK(!vdev_is_initialized());
    setenv("VDEV_TRACE_FILE", "/nonexistent-dir/vdev/run.json", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_IO);
    CHECK_MSG("/nonexistent-dir/vdev/run.json");
    CHECK(!vdev_is_initialized());
    unsetenv("VDEV_TRACE_FILE"); /* the configuration can be fixed and retried */
    CHECK_OK(vdev_init());
    vdev_shutdown();
}

/* The in_use of the last memory counter of `dev` in trace s (-1: none). */
static long long last_in_use(const char *s, const char *dev)
{
    char key[96];
    snprintf(key, sizeof key, "\"name\":\"memory %s\",\"ph\":\"C\"", dev);
    const char *last = NULL;
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key))
        last = p;
    const char *v = last ? strstr(last, "\"in_use\":") : NULL;
    return v ? atoll(v + 9) : -1;
}

/* Starts a fresh runtime (simulated GPUs `sim`, or the CPU alone for NULL)
 * tracing to a new temporary file named from the template `path`; 0 when
 * that file cannot be made (the failure is counted). */
static int trace_start(char *path, const char *sim)
{
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return 0;
    close(fd);
    check_fresh(sim);
    setenv("VDEV_TRACE_FILE", path, 1);
    CHECK_OK(vdev_init());
    return 1;
}

/* Some ops and a copy, so the trace has events before and after the second
 * process comes. */
static void some_work(void)
{
    static const int64_t shape[2] = {8, 8};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *a = vdev_tensor_fill(shape, 2, VDEV_F32, 1.0f);
    vdev_tensor_t *b = vdev_relu(a);
    CHECK_OK(vdev_device_pop());
    vdev_tensor_t *c = vdev_tensor_to(b, "GPU:1");
    CHECK(a && b && c);
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_tensor_free(c);
}

static void test_trace_written(void)
{
    char path[] = "/tmp/vdev-test-trace-XXXXXX";
    if (!trace_start(path, "2x1GiB"))
        return;
    some_work();
    /* vdev_mem_alloc's out-of-memory failure is an OOM event too */
    void *big = NULL;
    CHECK_STATUS(vdev_mem_alloc("GPU:1", 4ull << 30, &big), VDEV_ERR_OOM);
    vdev_shutdown();
    char *s = check_slurp(path);
    CHECK(s != NULL);
    if (s) {
        size_t n = strlen(s);
        CHECK(n > 4 && s[0] == '[' && strcmp(s + n - 3, "\n]\n") == 0);
        CHECK(strstr(s, "\"args\":{\"name\":\"/device:GPU:0 (sim)\"}") != NULL);
        CHECK(strstr(s, "\"args\":{\"name\":\"/device:GPU:1 (sim)\"}") != NULL);
        CHECK(strstr(s, "{\"name\":\"Relu\",\"cat\":\"op\",\"ph\":\"X\"") != NULL);
        CHECK(strstr(s, "\"name\":\"Copy\"") != NULL);
        CHECK(strstr(s, "\"from\":\"/device:GPU:0\",\"to\":\"/device:GPU:1\"") != NULL);
        CHECK(strstr(s, "\"name\":\"memory /device:GPU:0\",\"ph\":\"C\"") != NULL);
        CHECK(strstr(s, "\"name\":\"memory /device:GPU:1\",\"ph\":\"C\"") != NULL);
        /* every tensor freed: the pictures end at nothing in use (a sample
         * skipped for coming soon after another is written at the end) */
        CHECK(last_in_use(s, "/device:GPU:0") == 0);
        CHECK(strstr(s, "{\"name\":\"OOM\",\"cat\":\"oom\",\"ph\":\"i\"") != NULL);
        CHECK(last_in_use(s, "/device:GPU:1") == 0);
        CHECK(strstr(s, ",\n]") == NULL && strstr(s, "[,") == NULL);
        free(s);
    }
    /* after shutdown nothing more is written, and a new start-up starts a new trace */
    unsetenv("VDEV_TRACE_FILE");
    CHECK_OK(vdev_init());
    vdev_shutdown();
    s = check_slurp(path);
    CHECK(s && strcmp(s + strlen(s) - 3, "\n]\n") == 0);
    free(s);
    unlink(path);
}

/* Standard error goes to a temporary file between capture_begin and
 * capture_end, which returns what was written (malloc'd). */
static int saved_fd = -1;
static char cap_path[] = "/tmp/vdev-test-stderr-XXXXXX";

static void capture_begin(void)
{
    int fd = mkstemp(cap_path);
    CHECK(fd >= 0);
    fflush(stderr);
    saved_fd = dup(2);
    CHECK(saved_fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
}

static char *capture_read(void)
{
    fflush(stderr);
    return check_slurp(cap_path);
}

static char *capture_end(void)
{
    char *s = capture_read();
    dup2(saved_fd, 2);
    close(saved_fd);
    unlink(cap_path);
    strcpy(cap_path, "/tmp/vdev-test-stderr-XXXXXX");
    return s;
}

static const char FULL_MSG[] =
    "VDEV_TRACE_FILE=\"/dev/full\": write failed: No space left on device (the trace is "
    "incomplete)";

/* A short run: everything fits stdio's buffer, so only the flush and the
 * close at shutdown meet the full disk. */
static void test_full_at_close(void)
{
    if (access("/dev/full", W_OK) != 0) {
        printf("skipped: /dev/full is not writable here\n");
        return;
    }
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", "/dev/full", 1);
    CHECK_OK(vdev_init());
    static const int64_t shape[1] = {4};
    vdev_tensor_t *a = vdev_tensor_fill(shape, 1, VDEV_F32, 1.0f);
    CHECK(a != NULL);
    vdev_tensor_free(a);
    capture_begin();
    vdev_shutdown();
    char *err = capture_end();
    CHECK(vdev_last_status() == VDEV_ERR_IO);
    CHECK_STR(vdev_last_error(), FULL_MSG);
    char want[512];
    snprintf(want, sizeof want, "vdev: warning: %s\n", FULL_MSG);
    CHECK_STR(err, want);
    free(err);
    /* a new start-up with a good trace is not haunted by the old failure */
    char path[] = "/tmp/vdev-test-trace-XXXXXX";
    trace_start(path, "2x1GiB");
    capture_begin();
    vdev_shutdown();
    err = capture_end();
    CHECK_STR(err, "");
    CHECK(vdev_last_status() != VDEV_ERR_IO);
    free(err);
    char *s = check_slurp(path);
    CHECK(s && strlen(s) > 3 && strcmp(s + strlen(s) - 3, "\n]\n") == 0);
    free(s);
    unlink(path);
}

/* A longer run: the stream threads' buffers and the memory counters reach
 * the file while ops run, so the failure shows (once) before shutdown, and
 * shutdown reports it again in vdev_last_error, not on standard error. */
static void test_full_during_run(void)
{
    if (access("/dev/full", W_OK) != 0)
        return;
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", "/dev/full", 1);
    CHECK_OK(vdev_init());
    capture_begin();
    static const int64_t shape[2] = {4, 4};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *a = vdev_tensor_fill(shape, 2, VDEV_F32, 1.0f);
    for (int i = 0; i < 4000 && a; i++) { /* ~150 bytes of trace per op: 600 KB */
        vdev_tensor_t *b = vdev_relu(a);
        vdev_tensor_free(a);
        a = b;
    }
    CHECK(a != NULL);
    float host[16];
    CHECK_OK(vdev_tensor_to_host(a, host, sizeof host)); /* waits for the stream */
    CHECK_OK(vdev_device_pop());
    vdev_tensor_free(a);
    char *during = capture_read();
    char want[512];
    snprintf(want, sizeof want, "vdev: warning: %s\n", FULL_MSG);
    CHECK_STR(during, want);
    free(during);
    vdev_shutdown();
    char *err = capture_end();
    CHECK_STR(err, want); /* still one line */
    free(err);
    CHECK(vdev_last_status() == VDEV_ERR_IO);
    CHECK_STR(vdev_last_error(), FULL_MSG);
    check_fresh(NULL);
}

/* ---- the file's name, and the lock ---- */

/* A trace at `path` that is whole: "[", its events, "\n]\n", once. */
static int trace_whole(const char *path)
{
    char *s = check_slurp(path);
    size_t n = s ? strlen(s) : 0;
    int ok = n > 4 && s[0] == '[' && !strstr(s + 1, "\n[") && strstr(s, "\n]") == s + n - 3 &&
             strcmp(s + n - 3, "\n]\n") == 0;
    free(s);
    return ok;
}

/* How many times `what` is in s. */
static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s ? strstr(s, what) : NULL; p; p = strstr(p + 1, what))
        n++;
    return n;
}

static void test_placeholders(void)
{
    char want[256];
    check_fresh("1x1GiB");
    /* %p: this process; %%: a percent sign */
    setenv("VDEV_TRACE_FILE", "/tmp/vdev-test-trace-%p-100%%.json", 1);
    CHECK_OK(vdev_init());
    snprintf(want, sizeof want, "/tmp/vdev-test-trace-%ld-100%%.json", (long)getpid());
    /* vdev_trace_path: the file written, while it is written and after */
    char got[256], tiny[8];
    CHECK_OK(vdev_trace_path(got, sizeof got));
    CHECK_STR(got, want);
    CHECK_STATUS(vdev_trace_path(NULL, 8), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_trace_path: out is NULL or cap is 0");
    CHECK_STATUS(vdev_trace_path(tiny, sizeof tiny), VDEV_ERR_INVALID_ARG);
    char need[96];
    snprintf(need, sizeof need, "vdev_trace_path: needs %zu bytes, out holds 8", strlen(want) + 1);
    CHECK_STR(vdev_last_error(), need);
    vdev_shutdown();
    CHECK_OK(vdev_trace_path(got, sizeof got));
    CHECK_STR(got, want);
    CHECK(trace_whole(want));
    CHECK(unlink(want) == 0);
    /* %r: the first of OMPI_COMM_WORLD_RANK, PMIX_RANK and PMI_RANK that is
     * a number; 0 for a process that no launcher started */
    static const struct {
        const char *ompi, *pmix, *pmi;
        int rank;
    } cases[] = {{"7", "8", "9", 7}, {NULL, "8", "9", 8}, {"x", "", "9", 9}, {NULL, NULL, NULL, 0}};
    setenv("VDEV_TRACE_FILE", "/tmp/vdev-test-trace-%p.rank%r.json", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *vals[3] = {cases[i].ompi, cases[i].pmix, cases[i].pmi};
        static const char *const vars[3] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
        for (int v = 0; v < 3; v++)
            if (vals[v])
                setenv(vars[v], vals[v], 1);
            else
                unsetenv(vars[v]);
        CHECK_OK(vdev_init());
        vdev_shutdown();
        snprintf(want, sizeof want, "/tmp/vdev-test-trace-%ld.rank%d.json", (long)getpid(),
                 cases[i].rank);
        CHECK(trace_whole(want));
        CHECK(unlink(want) == 0);
        for (int v = 0; v < 3; v++)
            unsetenv(vars[v]);
    }
}

static void test_bad_names(void)
{
    check_fresh("1x1GiB");
    setenv("VDEV_TRACE_FILE", "/tmp/vdev-test-trace-%q.json", 1);
    CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG,
              "VDEV_TRACE_FILE=\"/tmp/vdev-test-trace-%q.json\": \"%q\" is not a placeholder "
              "(%p: the process id, %r: the MPI rank, %%: a %)");
    CHECK(!vdev_is_initialized());
    CHECK(access("/tmp/vdev-test-trace-%q.json", F_OK) != 0);
    setenv("VDEV_TRACE_FILE", "/tmp/vdev-test-trace.json%", 1);
    CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG,
              "VDEV_TRACE_FILE=\"/tmp/vdev-test-trace.json%\": \"%\" is not a placeholder "
              "(%p: the process id, %r: the MPI rank, %%: a %)");
    /* 4095 bytes once expanded is a name (too long for the file system);
     * one more is too long */
    static char name[4100];
    memcpy(name, "/tmp/", 5);
    memset(name + 5, 'a', 4090);
    name[4095] = '\0';
    setenv("VDEV_TRACE_FILE", name, 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_IO); /* "cannot open for writing", cut short */
    CHECK_MSG("VDEV_TRACE_FILE=\"/tmp/aaaa");
    strcpy(name + 4093, "%p");
    setenv("VDEV_TRACE_FILE", name, 1);
    CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG,
              "VDEV_TRACE_FILE is too long: more than 4095 bytes once expanded");
    CHECK(!vdev_is_initialized());
    unsetenv("VDEV_TRACE_FILE");
}

/* The second process of the lock test: starts vdev, prints the status and
 * the message. */
static int start_only(void)
{
    enum vdev_status st = vdev_init();
    printf("%s\n%s\n", vdev_status_str(st), st == VDEV_OK ? "" : vdev_last_error());
    vdev_shutdown();
    return 0;
}

/* Runs `test_trace --start` in the environment as it is: what it printed in
 * out[cap]; returns its exit status (-1: it did not run or exit). */
static int run_second(char *out, size_t cap)
{
    int p[2];
    out[0] = '\0';
    if (pipe(p) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl("/proc/self/exe", "test_trace", "--start", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t k;
    while (pid > 0 && n < cap - 1 && (k = read(p[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = '\0';
    close(p[0]);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_lock(void)
{
    char dir[] = "/tmp/vdev-test-trace-XXXXXX", path[64], out[1024], want[1024];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/run.json", dir);
    check_fresh("2x1GiB");
    setenv("VDEV_TRACE_FILE", path, 1);
    CHECK_OK(vdev_init());
    some_work();
    /* a second process given the same file is refused, and says by whom
     * and what to do */
    CHECK(run_second(out, sizeof out) == 0);
    snprintf(want, sizeof want,
             "VDEV_ERR_IO\nVDEV_TRACE_FILE=\"%s\": process %ld is writing this trace; give each "
             "process its own file, e.g. VDEV_TRACE_FILE=%s/run.%%p.json (%%p: the process id, "
             "%%r: the MPI rank, %%%%: a %%)\n",
             path, (long)getpid(), dir);
    CHECK_STR(out, want);
    /* launched by MPI, it suggests the rank */
    setenv("PMI_RANK", "1", 1);
    CHECK(run_second(out, sizeof out) == 0);
    snprintf(want, sizeof want,
             "VDEV_ERR_IO\nVDEV_TRACE_FILE=\"%s\": process %ld is writing this trace; give each "
             "process its own file, e.g. VDEV_TRACE_FILE=%s/run.%%r.json (%%p: the process id, "
             "%%r: the MPI rank, %%%%: a %%)\n",
             path, (long)getpid(), dir);
    CHECK_STR(out, want);
    unsetenv("PMI_RANK");
    some_work();
    vdev_shutdown();
    /* the first trace is whole, with the work done after the refusal */
    char *s = check_slurp(path);
    CHECK(trace_whole(path));
    CHECK(count(s, "{\"name\":\"Relu\"") == 2);
    free(s);
    /* the file is free again once the first process is done with it */
    CHECK(run_second(out, sizeof out) == 0);
    CHECK_STR(out, "VDEV_OK\n\n");
    CHECK(trace_whole(path));
    CHECK(unlink(path) == 0 && rmdir(dir) == 0);
}

/* A child forked from the process writing the trace, which ends through
 * exit() (so vdev's handler at exit runs in it too), writes nothing to it:
 * not its copy of the buffered events, not an end of its own. */
static void test_forked_child(void)
{
    char path[] = "/tmp/vdev-test-trace-XXXXXX";
    trace_start(path, NULL); /* the CPU alone: no stream threads at the fork */
    static const int64_t shape[2] = {8, 8};
    vdev_tensor_t *a = vdev_tensor_fill(shape, 2, VDEV_F32, 1.0f);
    vdev_tensor_t *b = vdev_relu(a);
    CHECK(a && b);
    vdev_tensor_free(b);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        exit(0);
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    b = vdev_relu(a);
    CHECK(b != NULL);
    vdev_tensor_free(b);
    vdev_tensor_free(a);
    vdev_shutdown();
    CHECK(trace_whole(path));
    char *s = check_slurp(path);
    CHECK(count(s, "{\"name\":\"Relu\"") == 2);
    free(s);
    unlink(path);
}

/* ---- copy tracks ---- */

/* The complete events of a trace (one per line): track, start, length. */
struct xev {
    long tid;
    uint64_t ts, dur; /* ns */
    const char *line;
};

/* "12.345" (us) as ns. */
static uint64_t parse_us(const char *p)
{
    char *end;
    uint64_t v = strtoull(p, &end, 10) * 1000;
    if (*end == '.')
        for (int k = 0, m = 100; k < 3 && end[1 + k] >= '0' && end[1 + k] <= '9'; k++, m /= 10)
            v += (uint64_t)(end[1 + k] - '0') * (uint64_t)m;
    return v;
}

static int xev_cmp(const void *a, const void *b)
{
    const struct xev *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->dur > y->dur ? -1 : x->dur < y->dur; /* the longer first: it holds the other */
}

/* The name of track `tid` in trace s, in out[cap] ("" when unnamed). */
static void track_name(const char *s, long tid, char *out, size_t cap)
{
    char key[96];
    snprintf(key, sizeof key, "\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%ld,"
                              "\"args\":{\"name\":\"", tid);
    const char *p = strstr(s, key);
    size_t n = p ? strcspn(p + strlen(key), "\"") : 0;
    snprintf(out, cap, "%.*s", (int)n, p ? p + strlen(key) : "");
}

/* Checks every track of trace s: no two complete events on it overlap
 * unless one holds the other; every copy is on a track of its pair,
 * "copies FROM -> TO" or "copies FROM -> TO (N)". Returns the number of
 * copies. */
#define NAMED_TIDS 8192
static int check_tracks(const char *s)
{
    static char names[NAMED_TIDS][128]; /* by tid */
    memset(names, 0, sizeof names);
    size_t n = 0, cap = 1024;
    struct xev *ev = malloc(cap * sizeof *ev);
    CHECK(ev != NULL);
    int copies = 0, bad_track = 0, overlaps = 0;
    /* one event a line: the names first (a copy's track is named before it) */
    char line[1024];
    for (const char *l = s, *at; ev && l && *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        snprintf(line, sizeof line, "%.*s", (int)len, l);
        at = l;
        l = eol ? eol + 1 : NULL;
        const char *tid = strstr(line, "\"tid\":");
        long t = tid ? atol(tid + 6) : -1;
        const char *nm = strstr(line, "\"args\":{\"name\":\"");
        if (strstr(line, "\"name\":\"thread_name\"") && nm && t >= 0 && t < NAMED_TIDS)
            snprintf(names[t], sizeof names[t], "%.*s", (int)strcspn(nm + 16, "\""), nm + 16);
        if (!strstr(line, "\"ph\":\"X\""))
            continue;
        if (n == cap) {
            struct xev *bigger = realloc(ev, (cap *= 2) * sizeof *ev);
            CHECK(bigger != NULL);
            if (!bigger)
                break;
            ev = bigger;
        }
        const char *ts = strstr(line, "\"ts\":"), *dur = strstr(line, "\"dur\":");
        CHECK(ts && dur && tid);
        if (!ts || !dur || !tid)
            continue;
        ev[n++] = (struct xev){t, parse_us(ts + 5), parse_us(dur + 6), at};
        if (strstr(line, "\"cat\":\"copy\"")) {
            copies++;
            char from[64] = "", to[64] = "", want[160];
            const char *f = strstr(line, "\"from\":\""), *o = strstr(line, "\"to\":\"");
            if (f)
                snprintf(from, sizeof from, "%.*s", (int)strcspn(f + 8, "\""), f + 8);
            if (o)
                snprintf(to, sizeof to, "%.*s", (int)strcspn(o + 6, "\""), o + 6);
            const char *name = t >= 0 && t < NAMED_TIDS ? names[t] : "";
            int k = snprintf(want, sizeof want, "copies %s -> %s", from, to);
            if ((strncmp(name, want, (size_t)k) != 0 || (name[k] && name[k] != ' ')) &&
                !bad_track++)
                printf("copy %s -> %s on track %ld, \"%s\"\n", from, to, t, name);
        }
    }
    CHECK(bad_track == 0);
    if (ev)
        qsort(ev, n, sizeof *ev, xev_cmp);
    /* per track: the events that hold the current one, innermost last */
    uint64_t ends[64];
    int depth = 0;
    for (size_t i = 0; ev && i < n; i++) {
        if (i == 0 || ev[i].tid != ev[i - 1].tid)
            depth = 0;
        while (depth && ends[depth - 1] <= ev[i].ts)
            depth--;
        uint64_t end = ev[i].ts + ev[i].dur;
        if (depth && end > ends[depth - 1]) {
            if (!overlaps++)
                printf("track %ld: %.80s overlaps an event ending at %llu ns\n", ev[i].tid,
                       ev[i].line, (unsigned long long)ends[depth - 1]);
            continue;
        }
        if (depth < 64)
            ends[depth++] = end;
    }
    CHECK(overlaps == 0);
    free(ev);
    return copies;
}

/* Copies recorded with times of their own: tracks per pair, and a copy that
 * overlaps its pair's copies on a track of its own. */
static void test_copy_tracks(void)
{
    char path[] = "/tmp/vdev-test-trace-XXXXXX";
    trace_start(path, "3x1GiB");
    int g0 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 0)->id;
    int g1 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 1)->id;
    int g2 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 2)->id;
    uint64_t t = vdev_observe_now();
    static const struct {
        int from, to;
        uint64_t t0, t1;
        long tid; /* where it goes */
    } C[] = {
        {0, 1, 1000, 3000, 1000}, /* GPU:0 -> GPU:1 */
        {2, 1, 2000, 4000, 1001}, /* at the same time into GPU:1: a pair of its own */
        {0, 1, 2500, 3500, 1002}, /* GPU:0 -> GPU:1 again, overlapping the first */
        {0, 1, 3000, 5000, 1000}, /* after the first: its track */
        {0, 1, 3200, 3300, 1003}, /* overlaps both tracks of the pair: a third */
        {1, 0, 3200, 3300, 1004}, /* the other way */
        {0, 1, 5000, 6000, 1000},
    };
    const int id[3] = {g0, g1, g2};
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++)
        vdev_observe_copy(id[C[i].from], id[C[i].to], 4096, t + C[i].t0, t + C[i].t1);
    vdev_shutdown();
    char *s = check_slurp(path);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK(trace_whole(path));
    static const char *const names[] = {
        "copies /device:GPU:0 -> /device:GPU:1", "copies /device:GPU:2 -> /device:GPU:1",
        "copies /device:GPU:0 -> /device:GPU:1 (2)", "copies /device:GPU:0 -> /device:GPU:1 (3)",
        "copies /device:GPU:1 -> /device:GPU:0"};
    char name[256];
    for (int k = 0; k < 5; k++) {
        track_name(s, 1000 + k, name, sizeof name);
        CHECK_STR(name, names[k]);
    }
    track_name(s, 1005, name, sizeof name);
    CHECK_STR(name, "");
    /* the copies in the order recorded, each on its track */
    const char *p = s;
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        p = p ? strstr(p, "{\"name\":\"Copy\"") : NULL;
        char want[32];
        snprintf(want, sizeof want, "\"tid\":%ld,", C[i].tid);
        const char *eol = p ? strchr(p, '\n') : NULL;
        const char *at = p ? strstr(p, want) : NULL;
        CHECK(at && (!eol || at < eol));
        if (p)
            p++;
    }
    CHECK(check_tracks(s) == (int)(sizeof C / sizeof C[0]));
    /* a device's op track sorts first, then the copies it sent, by destination */
    char want[128];
    snprintf(want, sizeof want, "\"tid\":%d,\"args\":{\"sort_index\":%d}", g0, g0 << 20);
    CHECK(strstr(s, want) != NULL);
    snprintf(want, sizeof want, "\"tid\":1000,\"args\":{\"sort_index\":%d}",
             (g0 << 20) + 1 + g1 * 4096);
    CHECK(strstr(s, want) != NULL);
    snprintf(want, sizeof want, "\"tid\":1003,\"args\":{\"sort_index\":%d}",
             (g0 << 20) + 1 + g1 * 4096 + 2);
    CHECK(strstr(s, want) != NULL);
    free(s);
    unlink(path);
}

/* Every copy track taken: a copy that fits none is left out, said once. */
static void test_copy_tracks_full(void)
{
    char path[] = "/tmp/vdev-test-trace-XXXXXX";
    trace_start(path, "2x1GiB");
    int g0 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 0)->id;
    int g1 = vdev_runtime_lookup(VDEV_DEVICE_GPU, 1)->id;
    uint64_t t = vdev_observe_now();
    for (int i = 0; i < 4096; i++) /* all at once: a track each */
        vdev_observe_copy(g0, g1, 1, t + 1000 + (uint64_t)i, t + 100000);
    capture_begin();
    vdev_observe_copy(g0, g1, 1, t + 5000, t + 6000);    /* fits none: left out */
    vdev_observe_copy(g1, g0, 1, t + 5000, t + 6000);    /* a new pair: no track left */
    vdev_observe_copy(g0, g1, 1, t + 100000, t + 100001); /* fits the first track */
    char *err = capture_end();
    char want[512];
    snprintf(want, sizeof want,
             "vdev: warning: VDEV_TRACE_FILE=\"%s\": all 4096 copy tracks are taken; copies that "
             "overlap every track of their pair of devices are left out of the trace\n",
             path);
    CHECK_STR(err, want);
    free(err);
    vdev_shutdown();
    CHECK(vdev_last_status() != VDEV_ERR_IO); /* the trace is whole */
    char *s = check_slurp(path);
    CHECK(s != NULL);
    if (s) {
        CHECK(trace_whole(path));
        CHECK(check_tracks(s) == 4097);
        char name[64];
        track_name(s, 1000 + 4095, name, sizeof name);
        CHECK_STR(name, "copies /device:GPU:0 -> /device:GPU:1 (4096)");
        track_name(s, 1000 + 4096, name, sizeof name);
        CHECK_STR(name, "");
        free(s);
    }
    unlink(path);
}

/* Copies between several pairs of devices from several threads at once,
 * two threads on each pair; copies to and from the host take their time on
 * the thread that asks, so they overlap. */
#define COPY_THREADS 8
#define COPIES_EACH 100
static vdev_tensor_t *copy_src[COPY_THREADS];
static _Atomic int copy_fails;

static void *copier(void *arg)
{
    int i = (int)(intptr_t)arg;
    static const char *const to[4] = {"GPU:0", "GPU:1", "CPU:0", "GPU:2"};
    for (int k = 0; k < COPIES_EACH; k++) {
        vdev_tensor_t *c = vdev_tensor_to(copy_src[i], to[i % 4]);
        if (!c)
            atomic_fetch_add(&copy_fails, 1);
        vdev_tensor_free(c);
    }
    return NULL;
}

static void test_concurrent_copies(void)
{
    char path[] = "/tmp/vdev-test-trace-XXXXXX";
    trace_start(path, "3x1GiB");
    static const char *const from[4] = {"CPU:0", "CPU:0", "GPU:1", "GPU:0"};
    static const int64_t shape[2] = {256, 1024}; /* 1 MiB */
    for (int i = 0; i < COPY_THREADS; i++) {
        CHECK_OK(vdev_device_push(from[i % 4]));
        copy_src[i] = vdev_tensor_fill(shape, 2, VDEV_F32, (float)i);
        CHECK_OK(vdev_device_pop());
        CHECK(copy_src[i] != NULL);
    }
    CHECK(check_run_threads(COPY_THREADS, copier) == COPY_THREADS);
    CHECK(atomic_load(&copy_fails) == 0);
    for (int i = 0; i < COPY_THREADS; i++)
        vdev_tensor_free(copy_src[i]);
    vdev_shutdown();
    char *s = check_slurp(path);
    CHECK(s != NULL);
    if (s) {
        CHECK(trace_whole(path));
        CHECK(check_tracks(s) == COPY_THREADS * COPIES_EACH);
        /* 4 pairs; more tracks where copies overlapped (not asserted: timing) */
        printf("concurrent copies: %d copy tracks\n", count(s, "\"args\":{\"name\":\"copies "));
        free(s);
    }
    unlink(path);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--start") == 0)
        return start_only();
    test_errors();
    test_placeholders();
    test_bad_names();
    test_lock();
    test_forked_child();
    test_trace_written();
    test_copy_tracks();
    test_copy_tracks_full();
    test_concurrent_copies();
    test_full_at_close();
    test_full_during_run();
    return check_done();
}
