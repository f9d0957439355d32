/* test_ckpt_save_freed.c — vdev_checkpoint_save whose tensor is freed by
 * another thread after the arguments were checked (the caller's race):
 *  - freed at a fixed point (a test hook runs between the checks and the
 *    layout of the entries): VDEV_ERR_INVALID_ARG naming the tensor, the old
 *    checkpoint in place byte for byte, no temporary file left (the freed
 *    tensor's size was read as -1, 2^64 - 4 bytes, and the save failed with
 *    "no host memory for a tensor of 18446744073709551612 bytes");
 *  - freed by a real thread while saves run: every failure is
 *    VDEV_ERR_INVALID_ARG naming that tensor, never out of memory;
 *  - a save whose host allocations fail in turn says what it could not
 *    allocate in plain words: "1 entry", and no buffer of 0 bytes for
 *    tensors that are all empty. */
#define _GNU_SOURCE
#include "ckpt_testlib.h"
#include "dist/checkpoint.h"

#include <pthread.h>
#include <stdatomic.h>

static int n_files(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static vdev_tensor_t *vec(int64_t n, float v)
{
    int64_t shape[1] = {n};
    return vdev_tensor_fill(shape, 1, VDEV_F32, v);
}

static void free_it(void *arg) { vdev_tensor_free(*(vdev_tensor_t **)arg); }

static void test_freed_after_checks(void)
{
    const char *path = P("a.safetensors");
    const char *names[3] = {"a", "b", "c"};
    for (int victim = 0; victim < 3; victim++) {
        vdev_tensor_t *t[3] = {vec(4, 1), vec(3, 2), vec(2, 3)};
        CHECK_OK(vdev_checkpoint_save(path, names, t, 3, NULL, 0));
        size_t old_len;
        unsigned char *old = slurp(path, &old_len);
        vdev_dist_checkpoint_save_hook(free_it, &t[victim]);
        enum vdev_status st = vdev_checkpoint_save(path, names, t, 3, NULL, 0);
        vdev_dist_checkpoint_save_hook(NULL, NULL);
        EXPECT(st, VDEV_ERR_INVALID_ARG,
               "checkpoint '%s': tensors[%d] ('%s') is not a live tensor (freed by another thread "
               "during the save)",
               path, victim, names[victim]);
        size_t len;
        unsigned char *now = slurp(path, &len);
        CHECK(old && now && len == old_len && memcmp(old, now, len) == 0);
        CHECK(n_files() == 1); /* no temporary file */
        free(old);
        free(now);
        for (int i = 0; i < 3; i++)
            if (i != victim)
                vdev_tensor_free(t[i]);
    }
}

/* ---- a real thread frees the last tensor while the save runs ---- */

#define N_RACE 2000

struct race {
    vdev_tensor_t *victim;
    atomic_int go;
};

static void *free_when_told(void *arg)
{
    struct race *r = arg;
    while (!atomic_load(&r->go))
        ;
    vdev_tensor_free(r->victim);
    return NULL;
}

static void test_freed_by_thread(void)
{
    static vdev_tensor_t *t[N_RACE];
    static char buf[N_RACE][16];
    static const char *names[N_RACE];
    for (int i = 0; i < N_RACE; i++) {
        snprintf(buf[i], sizeof buf[i], "t%d", i);
        names[i] = buf[i];
        if (i < N_RACE - 1)
            t[i] = vec(2, (float)i);
    }
    const char *path = P("race.safetensors");
    char live[600], layout[700], copy[600];
    snprintf(live, sizeof live, "checkpoint '%s': tensors[%d] ('t%d') is not a live tensor", path,
             N_RACE - 1, N_RACE - 1);
    snprintf(layout, sizeof layout, "%s (freed by another thread during the save)", live);
    snprintf(copy, sizeof copy, "checkpoint '%s': copying tensors[%d] ('t%d') to the host: ",
             path, N_RACE - 1, N_RACE - 1);
    int bad = 0, failed = 0;
    for (int round = 0; round < 40; round++) {
        struct race r = {.victim = vec(2, -1)};
        t[N_RACE - 1] = r.victim;
        pthread_t th;
        CHECK(pthread_create(&th, NULL, free_when_told, &r) == 0);
        atomic_store(&r.go, 1);
        enum vdev_status st = vdev_checkpoint_save(path, names, t, N_RACE, NULL, 0);
        pthread_join(th, NULL);
        if (st == VDEV_OK)
            continue;
        failed++;
        const char *msg = vdev_last_error();
        int known = !strcmp(msg, live) || !strcmp(msg, layout) ||
                    !strncmp(msg, copy, strlen(copy));
        if (st != VDEV_ERR_INVALID_ARG || !known) {
            if (bad++ < 3)
                printf("unexpected: %s: %s\n", vdev_status_str(st), msg);
        }
    }
    printf("%d of 40 saves met the free\n", failed);
    CHECK(bad == 0);
    for (int i = 0; i < N_RACE - 1; i++)
        vdev_tensor_free(t[i]);
}

/* ---- what a save that cannot allocate says ---- */

static void test_alloc_words(void)
{
    const char *path = P("w.safetensors");
    const char *one[1] = {"e"};
    int64_t shape[2] = {2, 0};
    vdev_tensor_t *e = vdev_tensor_zeros(shape, 2, VDEV_F32);
    char entry[600];
    snprintf(entry, sizeof entry, "checkpoint '%s': no host memory for 1 entry", path);
    int seen_entry = 0, odd = 0;
    for (int k = 1; k < 100; k++) {
        vdev_dist_checkpoint_fail_at(k);
        enum vdev_status st = vdev_checkpoint_save(path, one, &e, 1, NULL, 0);
        vdev_dist_checkpoint_fail_at(0);
        if (st == VDEV_OK)
            break;
        seen_entry += !strcmp(vdev_last_error(), entry);
        odd += strstr(vdev_last_error(), " 0 bytes") != NULL ||
               strstr(vdev_last_error(), "1 entries") != NULL;
    }
    CHECK(seen_entry == 1);
    CHECK(odd == 0);
    vdev_tensor_free(e);
}

int main(void)
{
    if (ckpt_dir_make() != 0)
        return 1;
    check_fresh("1x1GiB");
    test_freed_after_checks();
    ckpt_dir_clear(0);
    test_freed_by_thread();
    ckpt_dir_clear(0);
    test_alloc_words();
    vdev_shutdown();
    ckpt_dir_clear(1);
    free_paths();
    return check_done();
}
