/* test_ckpt_restore.c — a load that fails leaves every destination tensor as
 * it was, wherever it fails: in the restore itself (each copy of the restore
 * made to fail in turn, the copy of a tensor's value aside and the copy of
 * the checkpoint's value into it: the tensors restored before the failure
 * are put back, and the error is the failure's own), and before it, on a
 * file whose last entry is bad (another shape, damaged data) or whose third
 * of five entries has another shape than its tensor; and when another thread
 * frees the last tensor while the others are restored. A value that cannot
 * be put back is named in the error. The destinations live on two
 * simulated GPUs; an entry loaded into two tensors is freed once both have
 * it. */
#define _GNU_SOURCE
#include "ckpt_testlib.h"
#include "dist/checkpoint.h"

#include <stdlib.h>
#include <string.h>

#define N_T 5
#define MAX_EL 12
static const char *names[N_T] = {"l0/w", "l0/b", "l1/w", "l1/b", "step"};
static const int64_t shapes[N_T][2] = {{3, 4}, {4, 0}, {4, 2}, {2, 0}, {0, 0}};
static const int ndims[N_T] = {2, 1, 2, 1, 0};
static const enum vdev_dtype dts[N_T] = {VDEV_F32, VDEV_F32, VDEV_F32, VDEV_F32, VDEV_I32};

static int64_t numel(int i) {
    int64_t n = 1;
    for (int d = 0; d < ndims[i]; d++)
        n *= shapes[i][d];
    return n;
}

/* The value of element k of tensor i: the checkpoint's (base 1) or the
 * destinations' before the load (base 100), as 32-bit patterns. */
static uint32_t value(int base, int i, int64_t k) {
    if (dts[i] == VDEV_I32)
        return (uint32_t)(base * 1000 + i);
    float f = (float)base + (float)i + (float)k / 16.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Tensors of every name, filled from `base`, on GPU:0 (even i) and GPU:1. */
static void make(int base, vdev_tensor_t **t) {
    for (int i = 0; i < N_T; i++) {
        uint32_t v[MAX_EL];
        for (int64_t k = 0; k < numel(i); k++)
            v[k] = value(base, i, k);
        CHECK_OK(vdev_device_push(i % 2 ? "GPU:1" : "GPU:0"));
        t[i] = vdev_tensor_from_host(v, shapes[i], ndims[i], dts[i]);
        CHECK(t[i] != NULL);
        CHECK_OK(vdev_device_pop());
    }
}

/* Whether every tensor holds the values of `base`. */
static int holds(vdev_tensor_t *const *t, int base) {
    for (int i = 0; i < N_T; i++) {
        uint32_t v[MAX_EL];
        if (vdev_tensor_to_host(t[i], v, (size_t)numel(i) * 4) != VDEV_OK)
            return 0;
        for (int64_t k = 0; k < numel(i); k++)
            if (v[k] != value(base, i, k))
                return 0;
    }
    return 1;
}

/* Puts the destinations back to their values before a load. */
static void reset(vdev_tensor_t *const *u) {
    vdev_tensor_t *fresh[N_T];
    make(100, fresh);
    for (int i = 0; i < N_T; i++) {
        CHECK_OK(vdev_assign(u[i], fresh[i]));
        vdev_tensor_free(fresh[i]);
    }
}

/* Copy k of the restore fails, k = 1, 2, ...: copy 2i+1 puts tensors[i]'s
 * value aside, copy 2i+2 writes the checkpoint's into it. Every failure
 * leaves all five tensors as they were (those restored before it put back),
 * with the failure's own message; with no failure left, the load restores
 * them all. */
static void test_restore_faults(const char *path, vdev_tensor_t *const *u) {
    int n_fail = 0;
    for (int k = 1; k <= 2 * N_T + 1; k++) {
        vdev_dist_checkpoint_fail_restore(k);
        enum vdev_status st = vdev_checkpoint_load(path, names, u, N_T);
        vdev_dist_checkpoint_fail_restore(0);
        if (k == 2 * N_T + 1) {
            CHECK_OK(st);
            CHECK(holds(u, 1));
            break;
        }
        n_fail++;
        int i = (k - 1) / 2;
        if (k % 2)
            EXPECT(st, VDEV_ERR_BACKEND,
                   "checkpoint '%s': copying tensors[%d] ('%s') aside before restoring it: copy "
                   "failed (injected fault)",
                   path, i, names[i]);
        else
            EXPECT(st, VDEV_ERR_BACKEND,
                   "checkpoint '%s': restoring tensors[%d] ('%s'): copy failed (injected fault)",
                   path, i, names[i]);
        CHECK(holds(u, 100));
    }
    CHECK(n_fail == 2 * N_T);
    reset(u);
}

static void free_it(void *arg) { vdev_tensor_free(*(vdev_tensor_t **)arg); }

/* Another thread frees the last tensor while the first four are restored
 * (a hook frees it before copy 9, the copy of its value aside, or copy 10,
 * the checkpoint's into it): the load fails naming it, and the four others
 * hold their old values again. */
static void test_freed_during_restore(const char *path) {
    for (int at = 9; at <= 10; at++) {
        vdev_tensor_t *u[N_T];
        make(100, u);
        vdev_dist_checkpoint_restore_hook(at, free_it, &u[4]);
        enum vdev_status st = vdev_checkpoint_load(path, names, u, N_T);
        vdev_dist_checkpoint_restore_hook(0, NULL, NULL);
        EXPECT(st, VDEV_ERR_INVALID_ARG,
               "checkpoint '%s': %s tensors[4] ('step')%s: vdev_assign: not a live tensor "
               "(freed already, or not a tensor)",
               path, at == 9 ? "copying" : "restoring",
               at == 9 ? " aside before restoring it" : "");
        for (int i = 0; i < N_T - 1; i++) {
            uint32_t v[MAX_EL];
            CHECK_OK(vdev_tensor_to_host(u[i], v, (size_t)numel(i) * 4));
            int same = 1;
            for (int64_t k = 0; k < numel(i); k++)
                same &= v[k] == value(100, i, k);
            CHECK(same);
            vdev_tensor_free(u[i]);
        }
    }
}

static void arm_one_fault(void *arg)
{
    (void)arg;
    vdev_dist_checkpoint_fail_restore(1);
}

/* Writing tensors[2] fails (copy 6), and so does putting tensors[1] back
 * (copy 8 of the restore, the second put-back): the error says both, and
 * which tensor kept the checkpoint's value; the others are as they were. */
static void test_put_back_fails(const char *path) {
    vdev_tensor_t *u[N_T];
    make(100, u);
    vdev_dist_checkpoint_fail_restore(6);
    vdev_dist_checkpoint_restore_hook(8, arm_one_fault, NULL);
    enum vdev_status st = vdev_checkpoint_load(path, names, u, N_T);
    vdev_dist_checkpoint_restore_hook(0, NULL, NULL);
    vdev_dist_checkpoint_fail_restore(0);
    EXPECT(st, VDEV_ERR_BACKEND,
           "checkpoint '%s': restoring tensors[2] ('l1/w'): copy failed (injected fault); and "
           "putting tensors[1] ('l0/b') back failed too, so it may hold part of the "
           "checkpoint's value: copy failed (injected fault)",
           path);
    for (int i = 0; i < N_T; i++) {
        uint32_t v[MAX_EL];
        CHECK_OK(vdev_tensor_to_host(u[i], v, (size_t)numel(i) * 4));
        int same = 1;
        for (int64_t k = 0; k < numel(i); k++)
            same &= v[k] == value(i == 1 ? 1 : 100, i, k);
        CHECK(same);
        vdev_tensor_free(u[i]);
    }
}

/* One entry into two tensors: both get it. */
static void test_one_entry_twice(const char *path) {
    vdev_tensor_t *a[N_T], *b[N_T];
    make(100, a);
    make(100, b);
    const char *twice[2] = {"l1/w", "l1/w"};
    vdev_tensor_t *dst[2] = {a[2], b[2]};
    CHECK_OK(vdev_checkpoint_load(path, twice, dst, 2));
    float x[8], y[8];
    CHECK_OK(vdev_tensor_to_host(a[2], x, sizeof x));
    CHECK_OK(vdev_tensor_to_host(b[2], y, sizeof y));
    uint32_t want = value(1, 2, 7);
    CHECK(memcmp(&x[7], &want, 4) == 0 && memcmp(x, y, sizeof x) == 0);
    for (int i = 0; i < N_T; i++) {
        vdev_tensor_free(a[i]);
        vdev_tensor_free(b[i]);
    }
}

/* Files whose last entry (or third of five) is bad: the load fails before
 * any tensor changes. */
static void test_bad_entries(vdev_tensor_t *const *t, vdev_tensor_t *const *u) {
    const char *path = P("last.safetensors");
    /* the last entry, "step", is [2] in the file; tensors[4] is a scalar */
    int64_t two[1] = {2};
    int32_t steps[2] = {5, 6};
    CHECK_OK(vdev_device_push("CPU:0"));
    vdev_tensor_t *wide = vdev_tensor_from_host(steps, two, 1, VDEV_I32);
    CHECK_OK(vdev_device_pop());
    vdev_tensor_t *src[N_T] = {t[0], t[1], t[2], t[3], wide};
    CHECK_OK(vdev_checkpoint_save(path, names, src, N_T, NULL, 0));
    EXPECT(vdev_checkpoint_load(path, names, u, N_T), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'step' is I32 [2] in the file, but tensors[4] is I32 []",
           path);
    CHECK(holds(u, 100));

    /* the third entry, "l1/w", is [8] in the file; tensors[2] is [4, 2] */
    int64_t eight[1] = {8};
    vdev_tensor_t *flat = vdev_reshape(t[2], eight, 1);
    CHECK(flat != NULL);
    vdev_tensor_t *src3[N_T] = {t[0], t[1], flat, t[3], t[4]};
    CHECK_OK(vdev_checkpoint_save(path, names, src3, N_T, NULL, 0));
    EXPECT(vdev_checkpoint_load(path, names, u, N_T), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'l1/w' is F32 [8] in the file, but tensors[2] is F32 [4, 2]",
           path);
    CHECK(holds(u, 100));

    /* the last entry's data damaged: its last byte flipped */
    CHECK_OK(vdev_checkpoint_save(path, names, t, N_T, NULL, 0));
    size_t len;
    unsigned char *f = slurp(path, &len);
    CHECK(f != NULL);
    if (f) {
        f[len - 1] ^= 0x01;
        spill(path, f, len);
        free(f);
    }
    CHECK_STATUS(vdev_checkpoint_load(path, names, u, N_T), VDEV_ERR_IO);
    CHECK_MSG("' is damaged: checksum mismatch: the data's CRC-32 is ");
    CHECK(holds(u, 100));
    vdev_tensor_free(wide);
    vdev_tensor_free(flat);
}

int main(void) {
    if (ckpt_dir_make() != 0)
        return 1;
    check_fresh("2x1GiB");
    vdev_tensor_t *t[N_T], *u[N_T];
    make(1, t);
    make(100, u);
    const char *path = P("ckpt.safetensors");
    CHECK_OK(vdev_checkpoint_save(path, names, t, N_T, NULL, 0));
    test_restore_faults(path, u);
    test_freed_during_restore(path);
    test_put_back_fails(path);
    test_one_entry_twice(path);
    test_bad_entries(t, u);
    for (int i = 0; i < N_T; i++) {
        vdev_tensor_free(t[i]);
        vdev_tensor_free(u[i]);
    }
    vdev_shutdown();
    ckpt_dir_clear(1);
    free_paths();
    return check_done();
}
