/* check.h — the test harness: CHECK macros that print file:line and go on,
 * and a summary line "N passed, N failed" at exit. */
#ifndef VDEV_CHECK_H
#define VDEV_CHECK_H

#include "vdev.h"

#include <stdio.h>
#include <string.h>

extern int check_passed, check_failed;
void check_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Starts a case over: shuts vdev down, removes every VDEV_* and TF_*
 * variable from the environment, sets VDEV_SIM_GPUS to sim (NULL leaves it
 * unset), and clears the thread's error. */
void check_fresh(const char *sim);
/* Starts vdev, squares an n x n matrix of ones (n <= 64) on `device` and
 * checks every element is n, frees and shuts down: a process's own runtime
 * works (a forked child's, after its parent's was refused). */
void check_own_product(const char *device, int n);
/* A forked child's wait status as its exit status (its failed checks), or
 * -1, printed, when a signal ended it (SIGALRM: it hung). */
int check_child_status(int status);
/* Prints the summary and returns the exit status (0 when nothing failed). */
int check_done(void);
/* Sleeps ms milliseconds. */
void check_sleep_ms(int ms);
/* Waits until *flag (an atomic int) is nonzero, for at most about 120 s (a
 * bound that only a hang reaches, on a loaded machine too); returns the
 * flag. Tests that need to know that something happened wait with it, never
 * asserting on how long it took. */
int check_wait_flag(const void *flag);
/* Runs fn on n threads at once (at most CHECK_MAX_THREADS), thread i given
 * (void *)(intptr_t)i, and joins them; returns how many started (a test
 * checks it is n). The threads must not use the CHECK macros: the counters
 * are the main thread's. */
#define CHECK_MAX_THREADS 16
int check_run_threads(int n, void *(*fn)(void *));
/* Standard error goes into a temporary file between check_capture_begin() and
 * check_capture_end(), which returns what was written (malloc'd; "" for nothing).
 * One capture at a time. */
void check_capture_begin(void);
char *check_capture_end(void);
/* The whole file at path, NUL-terminated (malloc'd), or NULL when it cannot be
 * read or memory runs out. */
char *check_slurp(const char *path);
/* Whether every element of float tensor t equals v, read back to the host (0
 * when it cannot be read). */
int check_all_equal(const vdev_tensor_t *t, float v);
/* Takes every free byte of device dev (vdev_mem_alloc) in blocks of 1 MiB
 * down to 256 B, at most cap of them into blocks[]; returns how many. */
int check_fill_device(const char *dev, void **blocks, int cap);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond)                                                                                  \
            check_passed++;                                                                        \
        else                                                                                       \
            check_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                                    \
    } while (0)

/* A vdev call that must return `code`. */
#define CHECK_STATUS(call, code)                                                                   \
    do {                                                                                           \
        enum vdev_status st_ = (call);                                                             \
        if (st_ == (code))                                                                         \
            check_passed++;                                                                        \
        else                                                                                       \
            check_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)", #call,              \
                       vdev_status_str(st_), vdev_status_str(code), vdev_last_error());            \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, VDEV_OK)

/* The last error message must contain `sub`. */
#define CHECK_MSG(sub)                                                                             \
    do {                                                                                           \
        if (strstr(vdev_last_error(), (sub)))                                                      \
            check_passed++;                                                                        \
        else                                                                                       \
            check_fail(__FILE__, __LINE__, "message \"%s\" lacks \"%s\"", vdev_last_error(),      \
                       (sub));                                                                     \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);             \
        if (a_ == b_)                                                                              \
            check_passed++;                                                                        \
        else                                                                                       \
            check_fail(__FILE__, __LINE__, "%s == %llu, expected %s == %llu", #a, a_, #b, b_);     \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (a_ && b_ && strcmp(a_, b_) == 0)                                                       \
            check_passed++;                                                                        \
        else                                                                                       \
            check_fail(__FILE__, __LINE__, "%s is \"%s\", expected \"%s\"", #a,                 \
                       a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                    \
    } while (0)

/* call (a call returning a handle or pointer) fails: NULL, with exactly
 * status and message msg as the last error. */
#define CHECK_FAILS(call, status, msg)                                                             \
    do {                                                                                           \
        CHECK(!(call));                                                                            \
        CHECK_STATUS(vdev_last_status(), status);                                                  \
        CHECK_STR(vdev_last_error(), msg);                                                         \
    } while (0)

/* Nothing left in use on device dev: the test's tensors, tapes and scopes
 * gave every byte back. */
#define CHECK_NO_LEAK(dev)                                                                         \
    do {                                                                                           \
        struct vdev_memory_info mi_;                                                               \
        CHECK_OK(vdev_memory_info((dev), &mi_));                                                   \
        CHECK_EQ_U64(mi_.bytes_in_use, 0);                                                         \
    } while (0)

/* A vdev call that must return `code` with exactly the message `msg`. */
#define CHECK_ERR(call, code, msg)                                                                 \
    do {                                                                                           \
        CHECK_STATUS(call, code);                                                                  \
        CHECK_STR(vdev_last_error(), msg);                                                         \
    } while (0)

#endif
