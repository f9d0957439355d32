/* test_checkpoint_files.c — checkpoints and the file system: what a save may
 * replace and what a read may open.
 *
 * A save refuses, before writing anything, a path that is a directory or a
 * FIFO, or a symbolic link to a character device (/dev/null) or a directory,
 * and a chain of links that loops; it follows a link (relative, absolute, a
 * chain, one to a file that does not exist yet) to the file it names and
 * replaces that file, leaving the link a link. The new file keeps the old
 * one's permission bits (and, as root, its owner and group); a new file gets
 * 0666 less the umask. A file name of 255 bytes (the usual file system limit)
 * saves, as the temporary file's name is short. Each system call and
 * allocation of a save through a link fails in turn, leaving the link, the
 * old target and no temporary file; so does each system call of opening a
 * file for reading.
 *
 * A read (load, open, metadata) of a FIFO is refused at once, without opening
 * it: a helper thread watches for a reader (a write-only non-blocking open
 * succeeds only while one has it open). vdev_checkpoint_metadata tells "no
 * file" (VDEV_ERR_NOT_FOUND) from "no such key" (VDEV_ERR_INVALID_ARG), so the
 * resume recipe of vdev/checkpoint.h stops on a checkpoint without "step"
 * instead of starting over and replacing it. Every message is checked
 * whole. */
#define _GNU_SOURCE
#include "ckpt_testlib.h"
#include "dist/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Entries in folder d, "." and ".." aside. */
static int n_in(const char *d) {
    DIR *h = opendir(d);
    int n = 0;
    for (struct dirent *e; h && (e = readdir(h));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (h)
        closedir(h);
    return n;
}

/* Removes everything in folder d (one level of sub-folders). */
static void empty_folder(const char *d) {
    DIR *h = opendir(d);
    for (struct dirent *e; h && (e = readdir(h));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            empty_folder(p);
            rmdir(p);
        } else {
            unlink(p);
        }
    }
    if (h)
        closedir(h);
}

static vdev_tensor_t *vec2(float a, float b) {
    float v[2] = {a, b};
    int64_t s[1] = {2};
    vdev_tensor_t *t = vdev_tensor_from_host(v, s, 1, VDEV_F32);
    CHECK(t != NULL);
    return t;
}

/* The file at path is a checkpoint whose "w" holds {a, b}. */
static int holds(const char *path, float a, float b) {
    vdev_tensor_t *t = vec2(0, 0);
    const char *nw[1] = {"w"};
    float v[2] = {0, 0};
    int ok = vdev_checkpoint_load(path, nw, &t, 1) == VDEV_OK &&
             vdev_tensor_to_host(t, v, sizeof v) == VDEV_OK && v[0] == a && v[1] == b;
    vdev_tensor_free(t);
    return ok;
}

static int is_link(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode);
}

static const char *nw[1] = {"w"};

static int ends_with(const char *s, const char *end) {
    size_t n = strlen(s), k = strlen(end);
    return n >= k && !strcmp(s + n - k, end);
}

/* ---- what a save replaces ---- */

static void test_refused(void) {
    vdev_tensor_t *t = vec2(1, 2);
    const char *fifo = P("fifo"), *folder = P("folder");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(mkdir(folder, 0755) == 0);
    EXPECT(vdev_checkpoint_save(fifo, nw, &t, 1, NULL, 0), VDEV_ERR_IO,
           "checkpoint '%s': the path is a FIFO, not a regular file; nothing was written", fifo);
    EXPECT(vdev_checkpoint_save(folder, nw, &t, 1, NULL, 0), VDEV_ERR_IO,
           "checkpoint '%s': the path is a directory, not a regular file; nothing was written",
           folder);
    /* Links: to a character device (as root, the old code replaced the
     * link; saving to the device itself would replace the device), to a
     * folder, and a loop. */
    const char *to_null = P("to-null"), *to_folder = P("to-folder");
    const char *loop_a = P("loop-a"), *loop_b = P("loop-b");
    CHECK(symlink("/dev/null", to_null) == 0);
    CHECK(symlink("folder", to_folder) == 0);
    CHECK(symlink("loop-b", loop_a) == 0 && symlink("loop-a", loop_b) == 0);
    EXPECT(vdev_checkpoint_save(to_null, nw, &t, 1, NULL, 0), VDEV_ERR_IO,
           "checkpoint '%s': the path links to '/dev/null', a character device, not a regular "
           "file; nothing was written",
           to_null);
    EXPECT(vdev_checkpoint_save(to_folder, nw, &t, 1, NULL, 0), VDEV_ERR_IO,
           "checkpoint '%s': the path links to '%s', a directory, not a regular file; nothing "
           "was written",
           to_folder, folder);
    EXPECT(vdev_checkpoint_save(loop_a, nw, &t, 1, NULL, 0), VDEV_ERR_IO,
           "checkpoint '%s': cannot follow '%s': Too many levels of symbolic links", loop_a,
           loop_a);
    /* A path through a file, as if it were a folder. */
    const char *plain = P("plain"), *under = P("plain/x");
    CHECK(close(open(plain, O_WRONLY | O_CREAT | O_EXCL, 0644)) == 0);
    EXPECT(vdev_checkpoint_save(under, nw, &t, 1, NULL, 0), VDEV_ERR_IO,
           "checkpoint '%s': cannot stat '%s': Not a directory", under, under);

    /* All still what they were; no temporary file anywhere. */
    struct stat sb;
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK(is_link(to_null) && is_link(to_folder) && is_link(loop_a));
    CHECK(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
    CHECK(n_in(folder) == 0);
    CHECK(n_in(dir) == 7);
    vdev_tensor_free(t);
    empty_folder(dir);
}

static void test_links_followed(void) {
    vdev_tensor_t *t1 = vec2(1, 2), *t2 = vec2(3, 4);
    const char *sub = P("sub"), *target = P("sub/ckpt.safetensors");
    CHECK(mkdir(sub, 0755) == 0);
    CHECK_OK(vdev_checkpoint_save(target, nw, &t1, 1, NULL, 0));
    /* A relative link in another folder, an absolute one, a chain of both. */
    const char *rel = P("rel"), *abs_link = P("abs"), *chain = P("chain");
    CHECK(symlink("sub/ckpt.safetensors", rel) == 0);
    CHECK(symlink(target, abs_link) == 0);
    CHECK(symlink("rel", chain) == 0);
    const char *links[3] = {rel, abs_link, chain};
    for (int i = 0; i < 3; i++) {
        vdev_tensor_t *t = i % 2 ? t1 : t2;
        CHECK_OK(vdev_checkpoint_save(links[i], nw, &t, 1, NULL, 0));
        CHECK(is_link(rel) && is_link(abs_link) && is_link(chain));
        CHECK(i % 2 ? holds(target, 1, 2) : holds(target, 3, 4));
        CHECK(n_in(sub) == 1 && n_in(dir) == 4); /* no temporary file left */
    }
    /* A link to a file that does not exist yet creates it. */
    const char *dangling = P("dangling"), *later = P("sub/later.safetensors");
    CHECK(symlink("sub/later.safetensors", dangling) == 0);
    CHECK_OK(vdev_checkpoint_save(dangling, nw, &t2, 1, NULL, 0));
    CHECK(is_link(dangling) && holds(later, 3, 4) && holds(dangling, 3, 4));
    vdev_tensor_free(t1);
    vdev_tensor_free(t2);
    empty_folder(dir);
}

/* ---- the new file's mode and owner ---- */

static unsigned mode_of(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (unsigned)(sb.st_mode & 07777) : 0xffffu;
}

static void test_mode_kept(void) {
    vdev_tensor_t *t = vec2(1, 2);
    const char *path = P("mode.safetensors");
    mode_t was = umask(022);
    CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, NULL, 0));
    CHECK(mode_of(path) == 0644);
    static const unsigned modes[] = {0600, 0640, 0604, 0444};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        CHECK(chmod(path, modes[i]) == 0);
        CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, NULL, 0));
        CHECK_EQ_U64(mode_of(path), modes[i]);
    }
    CHECK(unlink(path) == 0);
    umask(077);
    CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, NULL, 0));
    CHECK(mode_of(path) == 0600);
    umask(was);
    /* As root, the owner and group too. */
    if (geteuid() == 0) {
        CHECK(chown(path, 12345, 23456) == 0);
        CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, NULL, 0));
        struct stat sb;
        CHECK(stat(path, &sb) == 0 && sb.st_uid == 12345 && sb.st_gid == 23456);
    } else {
        printf("not root: the owner is not checked\n");
    }
    CHECK(n_in(dir) == 1);
    vdev_tensor_free(t);
    empty_folder(dir);
}

/* A file name of 255 bytes: the temporary file's name is short. */
static void test_long_name(void) {
    vdev_tensor_t *t = vec2(5, 6);
    char name[256];
    memset(name, 'n', 255);
    name[255] = '\0';
    const char *path = P(name);
    CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, NULL, 0));
    CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, NULL, 0));
    CHECK(holds(path, 5, 6) && n_in(dir) == 1);
    vdev_tensor_free(t);
    empty_folder(dir);
}

/* Each system call and allocation of a save through a link fails in turn:
 * the link and the old target stay, and no temporary file is left. */
static void test_link_faults(void) {
    vdev_tensor_t *t1 = vec2(1, 2), *t2 = vec2(3, 4);
    const char *target = P("t.safetensors"), *link = P("l");
    CHECK_OK(vdev_checkpoint_save(target, nw, &t1, 1, NULL, 0));
    CHECK(chmod(target, 0600) == 0);
    CHECK(symlink("t.safetensors", link) == 0);
    /* The messages of the new steps, whole; the temporary file's name
     * between a prefix and a suffix. */
    char eio[600], follow[600], oom[600], synced[600], tmp_at[600];
    char mode_end[600], owner_end[600], rename_end[600];
    snprintf(eio, sizeof eio, "checkpoint '%s': cannot stat '%s': Input/output error", link, link);
    snprintf(follow, sizeof follow, "checkpoint '%s': cannot follow '%s': Input/output error",
             link, link);
    snprintf(oom, sizeof oom, "checkpoint '%s': no host memory for a file name", link);
    snprintf(synced, sizeof synced,
             "checkpoint '%s': the new checkpoint is in place, but its folder '%s' could not be "
             "synced: Input/output error",
             link, dir);
    snprintf(tmp_at, sizeof tmp_at, "checkpoint '%s': cannot give '%s/.vdev-%ld-", link, dir,
             (long)getpid());
    snprintf(mode_end, sizeof mode_end, ".tmp' the mode of '%s': Input/output error", target);
    snprintf(owner_end, sizeof owner_end, ".tmp' the owner of '%s': Input/output error", target);
    snprintf(rename_end, sizeof rename_end, ".tmp' over '%s': Input/output error", target);
    int n_fail = 0, seen_follow = 0, seen_mode = 0, seen_owner = 0, seen_stat = 0;
    int seen_oom = 0, seen_synced = 0, seen_rename = 0;
    for (int k = 1; k < 200; k++) {
        vdev_dist_checkpoint_fail_at(k);
        enum vdev_status st = vdev_checkpoint_save(link, nw, &t2, 1, NULL, 0);
        vdev_dist_checkpoint_fail_at(0);
        CHECK(is_link(link));
        if (st == VDEV_OK)
            break;
        n_fail++;
        const char *msg = vdev_last_error();
        int give = !strncmp(msg, tmp_at, strlen(tmp_at));
        seen_stat += !strcmp(msg, eio);
        seen_follow += !strcmp(msg, follow);
        seen_oom += !strcmp(msg, oom);
        seen_synced += !strcmp(msg, synced);
        seen_mode += give && ends_with(msg, mode_end);
        seen_owner += give && ends_with(msg, owner_end);
        seen_rename += !strncmp(msg, "checkpoint '", 12) && strstr(msg, "': cannot rename '") &&
                       ends_with(msg, rename_end);
        if (!strcmp(msg, synced)) {
            CHECK(holds(target, 3, 4));
            CHECK_OK(vdev_checkpoint_save(target, nw, &t1, 1, NULL, 0));
        } else {
            CHECK(st == VDEV_ERR_IO || st == VDEV_ERR_BACKEND ||
                  (st == VDEV_ERR_OOM && strstr(msg, "no host memory")));
            CHECK(holds(target, 1, 2));
        }
        CHECK(n_in(dir) == 2);
    }
    CHECK(holds(target, 3, 4) && mode_of(target) == 0600);
    CHECK(n_fail >= 10 && seen_stat == 1 && seen_follow == 1 && seen_mode == 1);
    CHECK(seen_oom >= 3 && seen_synced == 2 && seen_rename == 1);
    CHECK(seen_owner == (geteuid() == 0));
    printf("save through a link: %d failures\n", n_fail);
    vdev_tensor_free(t1);
    vdev_tensor_free(t2);
    empty_folder(dir);
}

/* ---- reads ---- */

/* Opens the FIFO for writing, without blocking, until told to stop: that
 * succeeds only while a reader has the FIFO open. */
struct watch {
    const char *fifo;
    atomic_int stop, opened;
};

static void *watch_run(void *arg) {
    struct watch *w = arg;
    while (!atomic_load(&w->stop)) {
        int fd = open(w->fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            atomic_store(&w->opened, 1);
            close(fd);
        } else {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
    return NULL;
}

static void test_read_fifo(void) {
    const char *fifo = P("fifo.safetensors");
    CHECK(mkfifo(fifo, 0600) == 0);
    struct watch w = {.fifo = fifo};
    atomic_init(&w.stop, 0);
    atomic_init(&w.opened, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, watch_run, &w) == 0);
    vdev_tensor_t *t = vec2(0, 0);
    vdev_checkpoint_t *ck = (vdev_checkpoint_t *)1;
    char buf[8];
    EXPECT(vdev_checkpoint_load(fifo, nw, &t, 1), VDEV_ERR_IO,
           "checkpoint '%s': not a regular file", fifo);
    EXPECT(vdev_checkpoint_open(fifo, &ck), VDEV_ERR_IO, "checkpoint '%s': not a regular file",
           fifo);
    CHECK(ck == NULL);
    EXPECT(vdev_checkpoint_metadata(fifo, "step", buf, sizeof buf), VDEV_ERR_IO,
           "checkpoint '%s': not a regular file", fifo);
    EXPECT(vdev_checkpoint_load("/dev/null", nw, &t, 1), VDEV_ERR_IO,
           "checkpoint '/dev/null': not a regular file");
    atomic_store(&w.stop, 1);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(atomic_load(&w.opened) == 0); /* never opened: a reader would block there */
    vdev_tensor_free(t);
    empty_folder(dir);
}

/* Each system call of opening a file for reading fails in turn, each with
 * its message. */
static void test_read_faults(void) {
    vdev_tensor_t *t = vec2(1, 2);
    const char *path = P("r.safetensors");
    CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, NULL, 0));
    static const char *want[4] = {"cannot open", "cannot open", "cannot stat",
                                  "cannot clear O_NONBLOCK"};
    for (int k = 1; k <= 4; k++) {
        vdev_checkpoint_t *ck = NULL;
        vdev_dist_checkpoint_fail_at(k);
        enum vdev_status st = vdev_checkpoint_open(path, &ck);
        vdev_dist_checkpoint_fail_at(0);
        CHECK_STATUS(st, VDEV_ERR_IO);
        char msg[600];
        snprintf(msg, sizeof msg, "checkpoint '%s': %s: Input/output error", path, want[k - 1]);
        CHECK_STR(vdev_last_error(), msg);
        CHECK(ck == NULL);
    }
    vdev_tensor_free(t);
    empty_folder(dir);
}

/* The resume recipe of vdev/checkpoint.h: the step to start from, or -1
 * where the recipe stops the job (it calls die()). */
static long recipe_start(const char *ckpt, vdev_tensor_t **vars) {
    const char *names[1] = {"w"};
    long step = 0;
    char buf[32];
    enum vdev_status st = vdev_checkpoint_metadata(ckpt, "step", buf, sizeof buf);
    if (st == VDEV_OK) {
        if (vdev_checkpoint_load(ckpt, names, vars, 1) != VDEV_OK)
            return -1;
        step = strtol(buf, NULL, 10);
    } else if (st != VDEV_ERR_NOT_FOUND) {
        return -1;
    }
    return step;
}

static void test_missing_file_or_key(void) {
    vdev_tensor_t *t = vec2(7, 8);
    const char *path = P("resume.safetensors"), *none = P("none.safetensors");
    char buf[8];
    /* No file: NOT_FOUND, the one code for it, from all three reads. */
    EXPECT(vdev_checkpoint_metadata(none, "step", buf, sizeof buf), VDEV_ERR_NOT_FOUND,
           "checkpoint '%s': cannot open: No such file or directory", none);
    EXPECT(vdev_checkpoint_load(none, nw, &t, 1), VDEV_ERR_NOT_FOUND,
           "checkpoint '%s': cannot open: No such file or directory", none);
    CHECK(recipe_start(none, &t) == 0); /* no checkpoint yet: start at 0 */
    /* A good checkpoint without "step", or without an entry asked for. */
    CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, NULL, 0));
    EXPECT(vdev_checkpoint_metadata(path, "step", buf, sizeof buf), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': no metadata key 'step'", path);
    CHECK(recipe_start(path, &t) == -1); /* stops; does not start over */
    const char *nb[1] = {"b"};
    EXPECT(vdev_checkpoint_load(path, nb, &t, 1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': no entry 'b' (asked for by names[0]; the file has 1 entries)", path);
    const char *meta[2] = {"step", "40"};
    CHECK_OK(vdev_checkpoint_save(path, nw, &t, 1, meta, 1));
    CHECK(recipe_start(path, &t) == 40);
    vdev_tensor_free(t);
    empty_folder(dir);
}

int main(void) {
    if (ckpt_dir_make() != 0)
        return 1;
    check_fresh(NULL);
    test_refused();
    test_links_followed();
    test_mode_kept();
    test_long_name();
    test_link_faults();
    test_read_fifo();
    test_read_faults();
    test_missing_file_or_key();
    vdev_shutdown();
    empty_folder(dir);
    rmdir(dir);
    free_paths();
    return check_done();
}
