/* ckpt_testlib.h — what the checkpoint tests share: EXPECT (a call's status
 * and exact message), the test's scratch folder `dir` (ckpt_dir_make at the
 * start of main) and P(name), a path in it, freed by free_paths() at the end.
 * Included by one test file each (the definitions are static). */
#ifndef VDEV_CKPT_TESTLIB_H
#define VDEV_CKPT_TESTLIB_H

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The call returns `code` and the message is exactly the formatted text. */
#define EXPECT(call, code, ...)                                                                    \
    do {                                                                                           \
        enum vdev_status ex_ = (call);                                                             \
        char want_[2048];                                                                          \
        snprintf(want_, sizeof want_, __VA_ARGS__);                                                \
        CHECK_STATUS(ex_, code);                                                                   \
        CHECK_STR(vdev_last_error(), want_);                                                       \
    } while (0)

static char dir[256];

/* Paths handed out by P(), freed at the end. */
static char **paths;
static size_t n_paths;

/* dir/name, valid until free_paths(). */
static const char *P(const char *name)
{
    char **grown = realloc(paths, (n_paths + 1) * sizeof *paths);
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (!grown || !p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    paths = grown;
    snprintf(p, len, "%s/%s", dir, name);
    return paths[n_paths++] = p;
}

static void free_paths(void)
{
    for (size_t i = 0; i < n_paths; i++)
        free(paths[i]);
    free(paths);
}

/* Makes the scratch folder under $TMPDIR (else /tmp); 0, or -1 with perror. */
static int ckpt_dir_make(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vdev-ckpt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

#endif
