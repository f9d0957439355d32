/* test_alloc_trace_file.c — VDEV_ALLOC_TRACE's file follows the rules of
 * VDEV_TRACE_FILE's (src/runtime/tracefile.c): the placeholders %p, %r and
 * %% expanded, a bad one or a name too long once expanded refused with the
 * exact message; the file locked while a process writes it, so a second
 * process given the same file is refused with the message that names the
 * writer and suggests a file of its own (%p alone, %r under MPI), and the
 * first one's trace stays whole; and a child forked from the writing process
 * writes nothing to it, neither its own events nor, at its exit, the bytes
 * its copy of the stdio buffer holds, whether it ends with exit() or after
 * vdev_shutdown(). A process that ends without closing its trace (_exit, a
 * crash, a signal) leaves whole lines, and with vdev_alloc_trace_flush_all
 * first, every line. Each trace is checked line by line after its header.
 * Run as `test_alloc_trace_file --start`, it starts vdev, prints the status
 * and the message, and exits (the second process of the lock test). */
#define _GNU_SOURCE
#include "alloc/alloc.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* what the messages say of the placeholders, as it goes in a printf format */
#define PLACEHOLDERS "(%%p: the process id, %%r: the MPI rank, %%%%: a %%)"

static char dir[] = "/tmp/vdev-test-alloc-trace-XXXXXX";

/* The trace at path is one header of process `pid` and then exactly `body`. */
static void check_trace(int line, const char *path, long pid, const char *body)
{
    char *s = check_slurp(path), head[96];
    snprintf(head, sizeof head, "# trace v1 source=vdev pid=%ld start=", pid);
    const char *nl = s ? strchr(s, '\n') : NULL;
    if (!s || strncmp(s, head, strlen(head)) != 0 || !nl || strcmp(nl + 1, body) != 0)
        check_fail(__FILE__, line, "%s: expected a header of pid %ld and then\n%s---\ngot\n%s---",
                   path, pid, body, s ? s : "(no file)");
    else
        check_passed++;
    free(s);
}

static void alloc_free(size_t bytes)
{
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", bytes, &p));
    CHECK_OK(vdev_mem_free("GPU:0", p));
}

static void test_placeholders(void)
{
    char spec[128], want[128];
    check_fresh("1x1GiB");
    snprintf(spec, sizeof spec, "%s/at.%%p.%%r.%%%%.trace", dir);
    setenv("VDEV_ALLOC_TRACE", spec, 1);
    setenv("PMI_RANK", "3", 1);
    CHECK_OK(vdev_init());
    alloc_free(1000);
    vdev_shutdown();
    snprintf(want, sizeof want, "%s/at.%ld.3.%%.trace", dir, (long)getpid());
    check_trace(__LINE__, want, (long)getpid(), "a 0 1000\nf 0\n");
    CHECK(access(spec, F_OK) != 0); /* no file of the name as given */
    CHECK(unlink(want) == 0);
    /* %r is 0 for a process started alone */
    unsetenv("PMI_RANK");
    CHECK_OK(vdev_init());
    vdev_shutdown();
    snprintf(want, sizeof want, "%s/at.%ld.0.%%.trace", dir, (long)getpid());
    check_trace(__LINE__, want, (long)getpid(), "");
    CHECK(unlink(want) == 0);

    /* a bad placeholder, and a trailing %: refused, nothing created */
    char msg[512];
    snprintf(spec, sizeof spec, "%s/at.%%q.trace", dir);
    setenv("VDEV_ALLOC_TRACE", spec, 1);
    snprintf(msg, sizeof msg,
             "VDEV_ALLOC_TRACE: allocation trace \"%s\": \"%%q\" is not a placeholder "
             PLACEHOLDERS, spec);
    CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG, msg);
    CHECK(!vdev_is_initialized());
    CHECK(access(spec, F_OK) != 0);
    snprintf(spec, sizeof spec, "%s/at.trace%%", dir);
    setenv("VDEV_ALLOC_TRACE", spec, 1);
    snprintf(msg, sizeof msg,
             "VDEV_ALLOC_TRACE: allocation trace \"%s\": \"%%\" is not a placeholder " PLACEHOLDERS,
             spec);
    CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG, msg);
    /* too long once expanded: 500 ranks of 9 digits */
    static char name[1100];
    memcpy(name, "/tmp/", 6);
    for (int i = 0; i < 500; i++)
        strcat(name, "%r");
    setenv("VDEV_ALLOC_TRACE", name, 1);
    setenv("PMI_RANK", "123456789", 1);
    CHECK_ERR(vdev_init(), VDEV_ERR_CONFIG,
              "VDEV_ALLOC_TRACE: the allocation trace's name is too long: more than 4095 bytes "
              "once expanded");
    unsetenv("PMI_RANK");
    unsetenv("VDEV_ALLOC_TRACE");
}

/* The second process of the lock test. */
static int start_only(void)
{
    enum vdev_status st = vdev_init();
    printf("%s\n%s\n", vdev_status_str(st), st == VDEV_OK ? "" : vdev_last_error());
    vdev_shutdown();
    return 0;
}

/* Runs `test_alloc_trace_file --start` in the environment as it is: what it
 * printed in out[cap]; returns its exit status (-1: it did not run or exit). */
static int run_second(char *out, size_t cap)
{
    int p[2];
    out[0] = '\0';
    if (pipe(p) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl("/proc/self/exe", "test_alloc_trace_file", "--start", (char *)NULL);
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
    char path[128], out[1024], want[1024];
    snprintf(path, sizeof path, "%s/run.trace", dir);
    check_fresh("1x1GiB");
    setenv("VDEV_ALLOC_TRACE", path, 1);
    CHECK_OK(vdev_init());
    alloc_free(1000);
    /* a second process given the same file is refused, and says by whom
     * and what to do */
    CHECK(run_second(out, sizeof out) == 0);
    snprintf(want, sizeof want,
             "VDEV_ERR_IO\nVDEV_ALLOC_TRACE: allocation trace \"%s\": process %ld is writing this "
             "trace; give each process its own file, e.g. VDEV_ALLOC_TRACE=%s/run.%%p.trace "
             PLACEHOLDERS "\n",
             path, (long)getpid(), dir);
    CHECK_STR(out, want);
    /* launched by MPI, it suggests the rank */
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    CHECK(run_second(out, sizeof out) == 0);
    snprintf(want, sizeof want,
             "VDEV_ERR_IO\nVDEV_ALLOC_TRACE: allocation trace \"%s\": process %ld is writing this "
             "trace; give each process its own file, e.g. VDEV_ALLOC_TRACE=%s/run.%%r.trace "
             PLACEHOLDERS "\n",
             path, (long)getpid(), dir);
    CHECK_STR(out, want);
    unsetenv("OMPI_COMM_WORLD_RANK");
    alloc_free(2000);
    vdev_shutdown();
    /* the first trace is whole, the work after the refusals included */
    check_trace(__LINE__, path, (long)getpid(), "a 0 1000\nf 0\na 1 2000\nf 1\n");
    /* the file is free again once the first process is done with it */
    CHECK(run_second(out, sizeof out) == 0);
    CHECK_STR(out, "VDEV_OK\n\n");
    CHECK(unlink(path) == 0);
    unsetenv("VDEV_ALLOC_TRACE");
}

/* The profiler trace and the allocation trace named alike in one process:
 * start-up refuses the second (they would write into each other), and the
 * file is free once start-up has failed. */
static void test_same_file(void)
{
    char path[128], want[512];
    snprintf(path, sizeof path, "%s/both.trace", dir);
    check_fresh("1x1GiB");
    setenv("VDEV_ALLOC_TRACE", path, 1);
    setenv("VDEV_TRACE_FILE", path, 1);
    snprintf(want, sizeof want,
             "VDEV_TRACE_FILE=\"%s\": this process writes it already, as its other trace "
             "(VDEV_TRACE_FILE and VDEV_ALLOC_TRACE name the same file); give each trace its "
             "own file",
             path);
    CHECK_ERR(vdev_init(), VDEV_ERR_IO, want);
    CHECK(!vdev_is_initialized());
    unsetenv("VDEV_TRACE_FILE");
    CHECK_OK(vdev_init());
    alloc_free(500);
    vdev_shutdown();
    check_trace(__LINE__, path, (long)getpid(), "a 0 500\nf 0\n");
    CHECK(unlink(path) == 0);
    unsetenv("VDEV_ALLOC_TRACE");
}

/* Forks a child that runs `child` and ends with exit(0); waits for it. */
static void in_child(void (*child)(void))
{
    fflush(stdout); /* the test's own output, not the trace's buffer */
    pid_t pid = fork();
    if (pid == 0) {
        child();
        exit(0);
    }
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void child_allocates(void)
{
    void *p = NULL;
    if (vdev_mem_alloc("CPU:0", 3000, &p) == VDEV_OK)
        vdev_mem_free("CPU:0", p);
}

static void child_shuts_down(void) { vdev_shutdown(); }

/* The children are refused vdev (test_fork.c); what matters here is that
 * neither their calls nor their exits write to the parent's trace. */
static void test_forked_child(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/fork.trace", dir);
    check_fresh(NULL);
    setenv("VDEV_ALLOC_TRACE", path, 1);
    CHECK_OK(vdev_init());
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vdev_mem_alloc("CPU:0", 1000, &a));
    CHECK_OK(vdev_mem_alloc("CPU:0", 2000, &b));
    CHECK_OK(vdev_mem_free("CPU:0", a));
    /* the header and three events are in this process's stdio buffer: the
     * children's exits must not write them again, nor anything of theirs */
    in_child(child_allocates);
    in_child(child_shuts_down); /* frees b at shutdown, closes the trace */
    CHECK_OK(vdev_mem_alloc("CPU:0", 4000, &c));
    CHECK_OK(vdev_mem_free("CPU:0", b));
    CHECK_OK(vdev_mem_free("CPU:0", c));
    vdev_shutdown();
    check_trace(__LINE__, path, (long)getpid(), "a 0 1000\na 1 2000\nf 0\na 2 4000\nf 1\nf 2\n");
    CHECK(unlink(path) == 0);
    unsetenv("VDEV_ALLOC_TRACE");
}

/* A child that starts vdev with its own trace, makes `n` allocations and
 * frees, writes its lines (vdev_alloc_trace_flush_all) if `flush`, and ends
 * with _exit(), as a crash or a signal ends a process: nothing is closed. */
static void cut_child(const char *path, int n, int flush)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("VDEV_ALLOC_TRACE", path, 1);
        if (vdev_init() != VDEV_OK)
            _exit(3);
        for (int i = 0; i < n; i++) {
            void *p = NULL;
            if (vdev_mem_alloc("CPU:0", 256, &p) != VDEV_OK || vdev_mem_free("CPU:0", p))
                _exit(4);
        }
        if (flush)
            vdev_alloc_trace_flush_all();
        _exit(0);
    }
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The trace of a process that ended without closing it holds whole lines,
 * every one of them after vdev_alloc_trace_flush_all. */
static void test_cut_short(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/cut.trace", dir);
    check_fresh(NULL);
    for (int flush = 0; flush <= 1; flush++) {
        cut_child(path, 3000, flush);
        char *s = check_slurp(path);
        size_t len = s ? strlen(s) : 0;
        CHECK(len > 0 && s[len - 1] == '\n');
        if (len && s[len - 1] != '\n')
            fprintf(stderr, "  the trace ends mid-line: '...%s'\n", s + (len > 20 ? len - 20 : 0));
        size_t lines = 0;
        for (size_t i = 0; i < len; i++)
            lines += s[i] == '\n';
        if (flush)
            CHECK_EQ_U64(lines, 1 + 2 * 3000); /* the header and every event */
        else
            CHECK(lines > 1000); /* the lines the full buffers wrote */
        free(s);
        CHECK(unlink(path) == 0);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--start") == 0)
        return start_only();
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_placeholders();
    test_lock();
    test_same_file();
    test_forked_child();
    test_cut_short();
    rmdir(dir);
    return check_done();
}
