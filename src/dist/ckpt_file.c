/* ckpt_file.c — the file system side of checkpoints: reading a file's header
 * from a path, finding what a save replaces, and creating its temporary file.
 * Every system call and allocation goes through the fault counter of
 * checkpoint.h, so tests can fail each one in turn.
 *
 * Reading stats the path first and refuses anything but a regular file
 * before opening it, so a FIFO or a device is refused at once instead of
 * blocking in open() (a FIFO without a writer) or touching the device; it
 * then opens with O_NONBLOCK and checks the open file again, in case the path
 * changed in between.
 *
 * A save replaces a regular file only: it follows symbolic links (up to 40,
 * as the kernel does) to the file they name, so the link stays and its
 * target is replaced, and it refuses a directory, a device, a FIFO or a
 * socket before writing anything. The temporary file sits beside the target
 * under a short name (".vdev-<pid>-<n>.tmp"), so a target whose name is as
 * long as the file system allows still has room for it. It takes the mode
 * (and, for root, the owner) of the file it replaces; a new file gets 0666
 * less the umask. */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* files past 2 GiB on 32-bit hosts too */
#include "dist/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define Q VDEV_CKPT_QUOTE
#define SYS VDEV_CKPT_SYS

/* ---- reading and writing whole buffers ---- */

int vdev_dist_write_all(int fd, const void *buf, size_t n, long long off) {
    const char *p = buf;
    while (n) {
        if (vdev_dist_fault()) {
            errno = ENOSPC;
            return -1;
        }
        size_t chunk = n < (1u << 30) ? n : (1u << 30);
        ssize_t w = off >= 0 ? pwrite(fd, p, chunk, (off_t)off) : write(fd, p, chunk);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        p += w;
        n -= (size_t)w;
        if (off >= 0)
            off += w;
    }
    return 0;
}

int64_t vdev_dist_read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        if (vdev_dist_fault()) {
            errno = EIO;
            return -1;
        }
        size_t chunk = n - got < (1u << 30) ? n - got : (1u << 30);
        ssize_t r = read(fd, p + got, chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (int64_t)got;
}

/* ---- reading a file's header ---- */

/* What a file that is not regular is, for messages. */
static const char *kind_of(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
                         : "a special file";
}

/* The reason open() or stat() failed: no file is "no checkpoint yet", not damage. */
static enum vdev_status open_error(const char *path) {
    return vdev_dist_ckerr(path, errno == ENOENT ? VDEV_ERR_NOT_FOUND : VDEV_ERR_IO,
                           "cannot open: %s", strerror(errno));
}

enum vdev_status vdev_dist_ckpt_read_header(const char *path, int *fd_out,
                                            struct vdev_checkpoint **out) {
    *fd_out = -1;
    *out = NULL;
    struct stat sb;
    if (SYS(stat(path, &sb)) != 0)
        return open_error(path);
    if (!S_ISREG(sb.st_mode))
        return vdev_dist_ckerr(path, VDEV_ERR_IO, "not a regular file");
    int fd = SYS(open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (fd < 0)
        return open_error(path);
    enum vdev_status st;
    char *text = NULL;
    unsigned char len8[8];
    if (SYS(fstat(fd, &sb)) != 0) {
        st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot stat: %s", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) { /* replaced since the stat above */
        st = vdev_dist_ckerr(path, VDEV_ERR_IO, "not a regular file");
        goto fail;
    }
    if (SYS(fcntl(fd, F_SETFL, 0)) != 0) { /* reads block again (O_NONBLOCK off) */
        st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot clear O_NONBLOCK: %s", strerror(errno));
        goto fail;
    }
    uint64_t size = (uint64_t)sb.st_size;
    int64_t got = vdev_dist_read_all(fd, len8, sizeof len8);
    if (got < 0) {
        st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot read: %s", strerror(errno));
        goto fail;
    }
    if (got < 8) {
        st = vdev_dist_ckloss(path,
                              "the file holds %lld bytes, fewer than the 8 of the header's "
                              "length (truncated?)",
                              (long long)got);
        goto fail;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len8[i];
    if (n > VDEV_CKPT_HEADER_MAX) { /* text, say: its first 8 bytes make a huge number */
        /* unless a header as vdev writes it follows: its length was damaged */
        char head[VDEV_CKPT_HCRC_AT + 9];
        got = vdev_dist_read_all(fd, head, sizeof head);
        if (got > 0 && vdev_dist_ckpt_looks_vdev(head, (size_t)got))
            st = vdev_dist_ckloss(path,
                                  "its first 8 bytes, the header's length, give %llu, past the "
                                  "format's limit of %llu bytes, before a header as vdev writes "
                                  "it (the length was changed)",
                                  (unsigned long long)n, VDEV_CKPT_HEADER_MAX);
        else
            st = vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                 "not a safetensors file: its first 8 bytes, read as the "
                                 "header's length, give %llu, past the format's limit of %llu "
                                 "bytes",
                                 (unsigned long long)n, VDEV_CKPT_HEADER_MAX);
        goto fail;
    }
    if (size < 8 || n > size - 8) { /* size < 8: the file grew since fstat */
        st = vdev_dist_ckloss(path,
                              "the header of %llu bytes runs past the end of the file (%llu "
                              "bytes; truncated?)",
                              (unsigned long long)n, (unsigned long long)size);
        goto fail;
    }
    text = vdev_dist_malloc((size_t)n + 1);
    if (!text) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for a header of %llu bytes",
                             (unsigned long long)n);
        goto fail;
    }
    got = vdev_dist_read_all(fd, text, (size_t)n);
    if (got < 0) {
        st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot read: %s", strerror(errno));
        goto fail;
    }
    if ((uint64_t)got < n) { /* the file shrank after fstat */
        st = vdev_dist_ckloss(path, "the file ends inside its header (truncated?)");
        goto fail;
    }
    text[n] = '\0';
    st = vdev_dist_ckpt_parse(path, text, n, size, out);
    if (st != VDEV_OK)
        goto fail;
    free(text);
    *fd_out = fd;
    return VDEV_OK;
fail:
    free(text);
    close(fd);
    return st;
}

/* ---- the target of a save ---- */

/* A copy of s[0..n), NUL-terminated; NULL without memory. */
static char *copy_n(const char *s, size_t n) {
    char *p = vdev_dist_malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* The folder holding path ("." when it names none); malloc'ed. */
static char *folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        return copy_n(".", 1);
    return copy_n(path, slash == path ? 1 : (size_t)(slash - path));
}

/* What the symbolic link at `link` (whose lstat size is `size`) points to,
 * as a path usable from here: a relative target is relative to the link's
 * folder. NULL with errno set on failure. */
static char *follow(const char *link, off_t size) {
    size_t cap = size > 0 ? (size_t)size + 1 : 256;
    char *t = NULL;
    ssize_t len;
    for (;;) {
        free(t);
        t = vdev_dist_malloc(cap);
        if (!t)
            return NULL;
        len = SYS(readlink(link, t, cap));
        if (len < 0) {
            int e = errno;
            free(t);
            errno = e;
            return NULL;
        }
        if ((size_t)len < cap)
            break;
        cap *= 2; /* the link changed, or its size was not reported */
    }
    t[len] = '\0';
    const char *slash = strrchr(link, '/');
    if (t[0] == '/' || !slash)
        return t;
    size_t dlen = (size_t)(slash - link) + 1;
    char *joined = vdev_dist_malloc(dlen + (size_t)len + 1);
    if (joined) {
        memcpy(joined, link, dlen);
        memcpy(joined + dlen, t, (size_t)len + 1);
    } else {
        errno = ENOMEM;
    }
    free(t);
    return joined;
}

enum vdev_status vdev_dist_ckpt_target(const char *path, struct vdev_ckpt_target *t) {
    memset(t, 0, sizeof *t);
    char *cur = copy_n(path, strlen(path));
    if (!cur)
        return vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for a file name");
    enum vdev_status st = VDEV_OK;
    for (int hops = 0;; hops++) {
        struct stat sb;
        if (SYS(lstat(cur, &sb)) != 0) {
            if (errno == ENOENT) /* a new file (a missing folder fails at creation) */
                break;
            st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot stat '" Q "': %s", cur,
                                 strerror(errno));
            goto fail;
        }
        if (S_ISLNK(sb.st_mode)) {
            if (hops == 40) {
                st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot follow '" Q "': %s", cur,
                                     strerror(ELOOP));
                goto fail;
            }
            char *next = follow(cur, sb.st_size);
            if (!next) {
                st = errno == ENOMEM
                         ? vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for a file name")
                         : vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot follow '" Q "': %s", cur,
                                           strerror(errno));
                goto fail;
            }
            free(cur);
            cur = next;
            continue;
        }
        if (!S_ISREG(sb.st_mode)) {
            st = hops ? vdev_dist_ckerr(path, VDEV_ERR_IO,
                                        "the path links to '" Q "', %s, not a regular file; "
                                        "nothing was written",
                                        cur, kind_of(sb.st_mode))
                      : vdev_dist_ckerr(path, VDEV_ERR_IO,
                                        "the path is %s, not a regular file; nothing was written",
                                        kind_of(sb.st_mode));
            goto fail;
        }
        t->exists = 1;
        t->mode = sb.st_mode & 07777;
        t->uid = sb.st_uid;
        t->gid = sb.st_gid;
        break;
    }
    t->dir = folder_of(cur);
    if (!t->dir) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for a file name");
        goto fail;
    }
    t->path = cur;
    return VDEV_OK;
fail:
    free(cur);
    vdev_dist_ckpt_target_free(t);
    return st;
}

void vdev_dist_ckpt_target_free(struct vdev_ckpt_target *t) {
    free(t->path);
    free(t->dir);
    t->path = t->dir = NULL;
}

/* Numbers temporary files, with the process id, so that concurrent saves
 * never share one. */
static atomic_uint tmp_counter;

enum vdev_status vdev_dist_ckpt_create_temp(const char *path, const struct vdev_ckpt_target *t,
                                            char **tmp_out, int *fd_out) {
    *tmp_out = NULL;
    *fd_out = -1;
    size_t cap = strlen(t->dir) + 48;
    char *tmp = vdev_dist_malloc(cap);
    if (!tmp)
        return vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for a file name");
    /* Replacing a file: only its owner may read the temporary file until it
     * has the old file's mode. */
    mode_t mode = t->exists ? 0600 : 0666;
    int fd = -1;
    for (int tries = 0; fd < 0; tries++) {
        snprintf(tmp, cap, "%s/.vdev-%ld-%u.tmp", t->dir, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1));
        fd = SYS(open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
        if (fd < 0 && (errno != EEXIST || tries == 100)) {
            enum vdev_status st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot create '" Q "': %s",
                                                  tmp, strerror(errno));
            free(tmp);
            return st;
        }
    }
    if (t->exists) {
        /* As root, the owner too (before the mode: chown clears set-id bits). */
        const char *what = "owner";
        int rc = geteuid() == 0 ? SYS(fchown(fd, (uid_t)t->uid, (gid_t)t->gid)) : 0;
        if (rc == 0) {
            what = "mode";
            rc = SYS(fchmod(fd, (mode_t)t->mode));
        }
        if (rc != 0) {
            enum vdev_status st =
                vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot give '" Q "' the %s of '" Q "': %s",
                                tmp, what, t->path, strerror(errno));
            close(fd);
            unlink(tmp);
            free(tmp);
            return st;
        }
    }
    *tmp_out = tmp;
    *fd_out = fd;
    return VDEV_OK;
}
