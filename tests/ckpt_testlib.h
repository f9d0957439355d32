/* ckpt_testlib.h — what the checkpoint tests share: EXPECT (a call's status
 * and exact message), the test's scratch folder `dir` (ckpt_dir_make at the
 * start of main, ckpt_dir_clear to empty or remove it) and P(name), a path
 * in it, freed by free_paths() at the end;
 * and files by hand: slurp (read one whole), spill (write one), forge (a
 * safetensors file from a header and data). Included by one test file each
 * (the definitions are static; the file helpers inline, as not every test
 * uses them). */
#ifndef VDEV_CKPT_TESTLIB_H
#define VDEV_CKPT_TESTLIB_H

#include "check.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Removes what a test left in dir (files, and folders it emptied), and,
 * with `and_dir`, dir itself. */
static inline void ckpt_dir_clear(int and_dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            const char *p = P(e->d_name);
            if (unlink(p) != 0)
                rmdir(p);
        }
    if (d)
        closedir(d);
    if (and_dir)
        rmdir(dir);
}

/* The file's bytes (malloc'ed, *len set) and a NUL after them, so that
 * strstr stops there; NULL if it cannot be read. */
static inline unsigned char *slurp(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Writes len bytes to path, replacing it. */
static inline void spill(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(bytes, 1, len, f) == len);
        fclose(f);
    }
}

/* A file: the 8-byte length `n` (the header's length when n is -1), the
 * header, then `data_len` bytes of data (0x11, 0x22, ... when data is NULL). */
static inline void forge(const char *path, long long n, const char *header, size_t hlen,
                         const void *data, size_t data_len)
{
    size_t len = 8 + hlen + data_len;
    unsigned char *b = malloc(len);
    CHECK(b != NULL);
    if (!b)
        return;
    uint64_t v = n == -1 ? (uint64_t)hlen : (uint64_t)n;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    memcpy(b + 8, header, hlen);
    for (size_t i = 0; i < data_len; i++)
        b[8 + hlen + i] = data ? ((const unsigned char *)data)[i] : (unsigned char)(0x11 * (i + 1));
    spill(path, b, len);
    free(b);
}

#endif
