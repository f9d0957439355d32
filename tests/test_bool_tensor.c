/* test_bool_tensor.c — the bool dtype outside the ops: a bool element is one
 * 32-bit word holding 0 or 1. Fills (nonzero, NaN included, is 1), the round
 * trip through host memory and between devices, from_host refusing a word
 * other than 0 or 1 (exact message, no tensor made, no memory kept), the
 * dtype's name in messages, vdev_tensor_item refusing it as it refuses
 * int32, DLPack refusing it both ways (DLPack's bool is a byte), checkpoints
 * saving it as the format's "BOOL" (one byte an element) and restoring it
 * (small, 0-dimensional, empty and 4-D tensors) on the cpu backend and on
 * simulated GPUs, the dtype mismatches, a BOOL byte other than 0 or 1 in
 * another program's file and in one vdev wrote (checksums recomputed), and
 * collectives refusing to sum it while broadcasting it. */
#define _GNU_SOURCE
#include "check.h"
#include "ckpt_testlib.h"
#include "dist/checkpoint.h"
#include "tensor/tensor.h"

#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_in_use;
}

/* Every word of bool tensor t equals want[i] (want NULL: every word is v). */
static int words_are(const vdev_tensor_t *t, const uint32_t *want, uint32_t v)
{
    int64_t n = vdev_tensor_numel(t);
    uint32_t got[64];
    if (n < 0 || n > 64 || vdev_tensor_to_host(t, got, sizeof got) != VDEV_OK)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != (want ? want[i] : v))
            return 0;
    return 1;
}

/* ---- fills, host memory, copies ---- */

static void test_fills(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t s[2] = {3, 4};
    vdev_tensor_t *z = vdev_tensor_zeros(s, 2, VDEV_BOOL);
    vdev_tensor_t *o = vdev_tensor_ones(s, 2, VDEV_BOOL);
    CHECK(z && o && vdev_tensor_dtype(z) == VDEV_BOOL && vdev_tensor_numel(o) == 12);
    CHECK(words_are(z, NULL, 0) && words_are(o, NULL, 1));
    /* nonzero is true, NaN and infinities included (a cast to bool) */
    const double vals[] = {0.0, -0.0, 1.0, -2.5, 0.25, 1e-300, 4e9, NAN, INFINITY, -INFINITY};
    const uint32_t want[] = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        vdev_tensor_t *f = vdev_tensor_fill(s, 2, VDEV_BOOL, vals[k]);
        CHECK(f != NULL && words_are(f, NULL, want[k]));
        vdev_tensor_free(f);
    }
    vdev_tensor_t *f0 = vdev_tensor_fill(NULL, 0, VDEV_BOOL, -7.0); /* 0-dimensional */
    CHECK(f0 && vdev_tensor_ndim(f0) == 0 && words_are(f0, NULL, 1));
    /* item takes a float tensor, as for int32 */
    CHECK(isnan(vdev_tensor_item(f0)));
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_item: needs a one-element float tensor");
    vdev_tensor_free(f0);
    vdev_tensor_free(z);
    vdev_tensor_free(o);
    CHECK_OK(vdev_device_pop());
}

/* from_host and to_host, copies to every device and back, identity. */
static void test_host_round_trip(const char *const *devs, int n)
{
    const uint32_t h[6] = {0, 1, 1, 0, 1, 0};
    int64_t s[2] = {2, 3};
    for (int a = 0; a < n; a++) {
        CHECK_OK(vdev_device_push(devs[a]));
        vdev_tensor_t *t = vdev_tensor_from_host(h, s, 2, VDEV_BOOL);
        CHECK(t && vdev_tensor_dtype(t) == VDEV_BOOL && words_are(t, h, 0));
        uint32_t back[6];
        CHECK_OK(vdev_tensor_to_host(t, back, sizeof back));
        CHECK(memcmp(back, h, sizeof h) == 0);
        for (int b = 0; b < n; b++) {
            vdev_tensor_t *c = vdev_tensor_to(t, devs[b]);
            CHECK(c && vdev_tensor_dtype(c) == VDEV_BOOL && words_are(c, h, 0));
            vdev_tensor_t *home = vdev_tensor_to(c, devs[a]);
            CHECK(home && words_are(home, h, 0));
            vdev_tensor_free(home);
            vdev_tensor_free(c);
        }
        vdev_tensor_t *id = vdev_identity(t);
        CHECK(id && vdev_tensor_dtype(id) == VDEV_BOOL && words_are(id, h, 0));
        /* unaligned host memory is read word by word */
        unsigned char raw[4 * 6 + 1];
        memcpy(raw + 1, h, sizeof h);
        vdev_tensor_t *u = vdev_tensor_from_host(raw + 1, s, 2, VDEV_BOOL);
        CHECK(u && words_are(u, h, 0));
        /* an empty bool tensor needs no data */
        int64_t e[1] = {0};
        vdev_tensor_t *em = vdev_tensor_from_host(NULL, e, 1, VDEV_BOOL);
        CHECK(em && vdev_tensor_numel(em) == 0);
        vdev_tensor_free(em);
        vdev_tensor_free(u);
        vdev_tensor_free(id);
        vdev_tensor_free(t);
        CHECK_OK(vdev_device_pop());
    }
}

/* A word other than 0 or 1: refused, the first one named, nothing made. */
static void test_from_host_refused(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    uint64_t before = in_use(dev);
    const int32_t bad[6] = {0, 1, 0, 7, 9, 1};
    int64_t s[1] = {6};
    vdev_clear_error();
    CHECK(vdev_tensor_from_host(bad, s, 1, VDEV_BOOL) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_from_host: element 3 of a bool tensor is 7, not 0 or 1");
    const int32_t neg[1] = {-1};
    CHECK(vdev_tensor_from_host(neg, NULL, 0, VDEV_BOOL) == NULL);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_from_host: element 0 of a bool tensor is -1, not 0 or 1");
    const int32_t big[2] = {1, INT32_MIN};
    int64_t s2[1] = {2};
    CHECK(vdev_tensor_from_host(big, s2, 1, VDEV_BOOL) == NULL);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_from_host: element 1 of a bool tensor is -2147483648, not 0 or 1");
    CHECK(in_use(dev) == before); /* no tensor made, no block kept */
    /* the same words are fine as int32 */
    vdev_tensor_t *i = vdev_tensor_from_host(bad, s, 1, VDEV_I32);
    CHECK(i != NULL && vdev_tensor_dtype(i) == VDEV_I32);
    vdev_tensor_free(i);
    CHECK_OK(vdev_device_pop());
}

/* The dtype's name: "bool", in the library's messages too. */
static void test_names(const char *dev)
{
    CHECK_STR(vdev_dtype_name(VDEV_BOOL), "bool");
    CHECK_STR(vdev_dtype_name(VDEV_I32), "int32");
    CHECK_STR(vdev_dtype_name(VDEV_F32), "float");
    CHECK_OK(vdev_device_push(dev));
    int64_t s[1] = {2};
    vdev_tensor_t *v = vdev_variable(vdev_tensor_zeros(s, 1, VDEV_F32));
    vdev_tensor_t *b = vdev_tensor_ones(s, 1, VDEV_BOOL);
    CHECK_STATUS(vdev_assign(v, b), VDEV_ERR_SHAPE);
    CHECK_STR(vdev_last_error(),
              "vdev_assign: value of shape[2] bool into a variable of shape[2] float");
    /* a bool variable takes a bool value (and is never differentiated) */
    vdev_tensor_t *bv = vdev_variable(vdev_tensor_zeros(s, 1, VDEV_BOOL));
    CHECK_OK(vdev_assign(bv, b));
    CHECK(words_are(bv, NULL, 1));
    vdev_tensor_free(bv);
    vdev_tensor_free(b);
    vdev_tensor_free(v);
    CHECK_OK(vdev_device_pop());
}

/* ---- DLPack ---- */

static int deleted;
static void count_delete(DLManagedTensor *m)
{
    VDEV_UNUSED(m);
    deleted++;
}

static void test_dlpack(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    int64_t s[1] = {3};
    vdev_tensor_t *b = vdev_tensor_ones(s, 1, VDEV_BOOL);
    DLManagedTensor *m = (DLManagedTensor *)1;
    CHECK_STATUS(vdev_tensor_to_dlpack(b, &m), VDEV_ERR_UNSUPPORTED);
    CHECK(m == NULL && vdev_dlpack_live_exports() == 0);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_to_dlpack: a vdev bool tensor holds 32-bit words, which DLPack's "
              "8-bit bool cannot share; cast it to int32 first (vdev_cast)");
    vdev_tensor_free(b);
    CHECK_OK(vdev_device_pop());

    /* a kDLBool capsule (DLPack 0.8: code 6, 8 bits) */
    unsigned char bytes[3] = {1, 0, 1};
    int64_t shape[1] = {3};
    DLManagedTensor in;
    memset(&in, 0, sizeof in);
    in.dl_tensor.data = bytes;
    in.dl_tensor.device = (DLDevice){kDLCPU, 0};
    in.dl_tensor.ndim = 1;
    in.dl_tensor.dtype = (DLDataType){6, 8, 1};
    in.dl_tensor.shape = shape;
    in.deleter = count_delete;
    deleted = 0;
    CHECK(vdev_tensor_from_dlpack(&in) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_UNSUPPORTED);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_from_dlpack: dtype bool8; a vdev bool tensor holds 32-bit words, "
              "which DLPack's 8-bit bool cannot share: cast it to int32 before the import (and "
              "to bool after it, vdev_cast)");
    CHECK(deleted == 0 && bytes[0] == 1 && bytes[1] == 0 && bytes[2] == 1); /* untouched */
}

/* ---- checkpoints ---- */

static const uint32_t mask_v[15] = {1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0};
static const int64_t s_mask[2] = {3, 5}, s_none[2] = {2, 0};

/* Saves a bool [3,5] variable, a 0-dimensional bool, an empty bool and an
 * f32 from `from`, checks the file's bytes, and restores them into fresh
 * tensors on `to`. */
static void test_checkpoint_round_trip(const char *from, const char *to)
{
    const char *path = P("bools.safetensors");
    CHECK_OK(vdev_device_push(from));
    float w[2] = {1.5f, -2.0f};
    uint32_t one = 1;
    int64_t s_w[1] = {2};
    vdev_tensor_t *t[4] = {
        vdev_variable(vdev_tensor_from_host(mask_v, s_mask, 2, VDEV_BOOL)),
        vdev_tensor_from_host(&one, NULL, 0, VDEV_BOOL),
        vdev_tensor_zeros(s_none, 2, VDEV_BOOL),
        vdev_tensor_from_host(w, s_w, 1, VDEV_F32),
    };
    CHECK_OK(vdev_device_pop());
    const char *names[4] = {"mask", "flag", "none", "w"};
    const char *meta[2] = {"step", "3"};
    CHECK_OK(vdev_checkpoint_save(path, names, t, 4, meta, 1));

    /* the header: BOOL, one byte an element; the data: 0s and 1s */
    vdev_checkpoint_t *ck;
    CHECK_OK(vdev_checkpoint_open(path, &ck));
    CHECK(vdev_checkpoint_n_entries(ck) == 4);
    struct vdev_checkpoint_entry e;
    CHECK_OK(vdev_checkpoint_entry(ck, 0, &e));
    CHECK_STR(e.name, "mask");
    CHECK_STR(e.dtype_name, "BOOL");
    CHECK(e.dtype == VDEV_BOOL && e.ndim == 2 && e.shape[0] == 3 && e.shape[1] == 5 &&
          e.offset_bytes == 0 && e.size_bytes == 15);
    CHECK_OK(vdev_checkpoint_entry(ck, 1, &e));
    CHECK(e.dtype == VDEV_BOOL && e.ndim == 0 && e.offset_bytes == 15 && e.size_bytes == 1);
    CHECK_OK(vdev_checkpoint_entry(ck, 2, &e)); /* empty: at 16, as "w" (sorted by name) */
    CHECK_OK(vdev_checkpoint_entry(ck, 3, &e));
    CHECK(e.offset_bytes == 16 && e.size_bytes == 8);
    vdev_checkpoint_close(ck);
    size_t len;
    unsigned char *file = slurp(path, &len);
    CHECK(file != NULL && len > 8 + 24);
    if (file) {
        CHECK(strstr((char *)file + 8, "\"mask\":{\"dtype\":\"BOOL\",\"shape\":[3,5],"
                                       "\"data_offsets\":[0,15]}") != NULL);
        const unsigned char *data = file + len - 24;
        for (int i = 0; i < 15; i++)
            CHECK(data[i] == mask_v[i]);
        CHECK(data[15] == 1 && memcmp(data + 16, w, 8) == 0);
    }
    free(file);

    /* restored into tensors on `to` */
    CHECK_OK(vdev_device_push(to));
    vdev_tensor_t *u[4] = {
        vdev_variable(vdev_tensor_zeros(s_mask, 2, VDEV_BOOL)),
        vdev_tensor_zeros(NULL, 0, VDEV_BOOL),
        vdev_tensor_zeros(s_none, 2, VDEV_BOOL),
        vdev_tensor_zeros(s_w, 1, VDEV_F32),
    };
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_checkpoint_load(path, names, u, 4));
    CHECK(words_are(u[0], mask_v, 0) && words_are(u[1], NULL, 1));
    float wb[2];
    CHECK_OK(vdev_tensor_to_host(u[3], wb, sizeof wb));
    CHECK(wb[0] == 1.5f && wb[1] == -2.0f);

    /* dtypes that differ: the existing mismatch error, tensors unchanged */
    CHECK_OK(vdev_device_push(to));
    vdev_tensor_t *f = vdev_tensor_zeros(s_mask, 2, VDEV_F32);
    vdev_tensor_t *bw = vdev_tensor_zeros(s_w, 1, VDEV_BOOL);
    vdev_tensor_t *iw = vdev_tensor_zeros(s_mask, 2, VDEV_I32);
    CHECK_OK(vdev_device_pop());
    const char *n_mask[1] = {"mask"}, *n_w[1] = {"w"};
    EXPECT(vdev_checkpoint_load(path, n_mask, &f, 1), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'mask' is BOOL [3, 5] in the file, but tensors[0] is F32 "
           "[3, 5]",
           path);
    EXPECT(vdev_checkpoint_load(path, n_mask, &iw, 1), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'mask' is BOOL [3, 5] in the file, but tensors[0] is I32 "
           "[3, 5]",
           path);
    EXPECT(vdev_checkpoint_load(path, n_w, &bw, 1), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'w' is F32 [2] in the file, but tensors[0] is BOOL [2]", path);
    CHECK(check_all_equal(f, 0.0f) && words_are(bw, NULL, 0));
    vdev_tensor_free(f);
    vdev_tensor_free(bw);
    vdev_tensor_free(iw);
    for (int i = 0; i < 4; i++) {
        vdev_tensor_free(t[i]);
        vdev_tensor_free(u[i]);
    }
    ckpt_dir_clear(0);
}

/* A 4-D bool of 2^18 elements (a quarter MiB in the file, a MiB as words):
 * its bytes staged whole, unpacked in place, back bit for bit. */
static void test_checkpoint_large(const char *from, const char *to)
{
    const char *path = P("large.safetensors");
    const int64_t s[4] = {8, 16, 32, 64};
    const int64_t n = 8 * 16 * 32 * 64;
    uint32_t *h = malloc((size_t)n * 4), *back = malloc((size_t)n * 4);
    CHECK(h && back);
    if (!h || !back) {
        free(h);
        free(back);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        h[i] = (uint32_t)((i * 2654435761u) >> 7) & 1u;
    CHECK_OK(vdev_device_push(from));
    vdev_tensor_t *t = vdev_tensor_from_host(h, s, 4, VDEV_BOOL);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push(to));
    vdev_tensor_t *u = vdev_tensor_zeros(s, 4, VDEV_BOOL);
    CHECK_OK(vdev_device_pop());
    const char *names[1] = {"big"};
    CHECK_OK(vdev_checkpoint_save(path, names, &t, 1, NULL, 0));
    vdev_checkpoint_t *ck;
    struct vdev_checkpoint_entry e;
    CHECK_OK(vdev_checkpoint_open(path, &ck));
    CHECK_OK(vdev_checkpoint_entry(ck, 0, &e));
    CHECK(e.dtype == VDEV_BOOL && e.ndim == 4 && e.size_bytes == (uint64_t)n);
    vdev_checkpoint_close(ck);
    CHECK_OK(vdev_checkpoint_load(path, names, &u, 1));
    CHECK_OK(vdev_tensor_to_host(u, back, (size_t)n * 4));
    CHECK(memcmp(back, h, (size_t)n * 4) == 0);
    vdev_tensor_free(t);
    vdev_tensor_free(u);
    free(h);
    free(back);
    ckpt_dir_clear(0);
}

/* A BOOL byte that is neither 0 nor 1: in another program's file (no CRC) a
 * format error, in one vdev wrote (CRCs that match) damage; either way the
 * tensor is unchanged, and an entry not asked for is not judged. */
static void test_checkpoint_bad_bool(const char *dev)
{
    const char *path = P("other.safetensors");
    const char *hdr = "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]},"
                      "\"k\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[4,6]}}";
    const unsigned char bad[6] = {0, 1, 7, 1, 1, 0};
    forge(path, -1, hdr, strlen(hdr), bad, sizeof bad);
    CHECK_OK(vdev_device_push(dev));
    int64_t s4[1] = {4}, s2[1] = {2};
    vdev_tensor_t *m = vdev_tensor_ones(s4, 1, VDEV_BOOL), *k = vdev_tensor_zeros(s2, 1, VDEV_BOOL);
    CHECK_OK(vdev_device_pop());
    const char *n_m[1] = {"m"}, *n_k[1] = {"k"};
    EXPECT(vdev_checkpoint_load(path, n_m, &m, 1), VDEV_ERR_PARSE,
           "checkpoint '%s': entry 'm' is BOOL, but its element 2 is 7, not 0 or 1", path);
    CHECK(words_are(m, NULL, 1));
    const uint32_t k_want[2] = {1, 0};
    CHECK_OK(vdev_checkpoint_load(path, n_k, &k, 1)); /* m is read, not judged */
    CHECK(words_are(k, k_want, 0));
    const unsigned char good[6] = {1, 0, 0, 1, 0, 1};
    forge(path, -1, hdr, strlen(hdr), good, sizeof good);
    const uint32_t m_want[4] = {1, 0, 0, 1};
    CHECK_OK(vdev_checkpoint_load(path, n_m, &m, 1)); /* another program's BOOL loads */
    CHECK(words_are(m, m_want, 0));

    /* vdev's own file: a flipped byte is a checksum mismatch ... */
    const char *mine = P("mine.safetensors");
    CHECK_OK(vdev_checkpoint_save(mine, n_m, &m, 1, NULL, 0));
    size_t len;
    unsigned char *f = slurp(mine, &len);
    CHECK(f != NULL && len >= 8 + 4);
    if (f) {
        uint64_t hlen = 0;
        for (int i = 0; i < 8; i++)
            hlen |= (uint64_t)f[i] << (8 * i);
        unsigned char *data = f + 8 + hlen;
        data[1] = 7;
        spill(mine, f, len);
        CHECK_STATUS(vdev_checkpoint_load(mine, n_m, &m, 1), VDEV_ERR_IO);
        CHECK_MSG("' is damaged: checksum mismatch: the data's CRC-32 is ");
        CHECK(words_are(m, m_want, 0));
        /* ... and with both checksums recomputed, the byte itself is damage */
        uint32_t crc = (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), data, 4);
        vdev_dist_ckpt_seal_header((char *)f + 8, (size_t)hlen, crc);
        spill(mine, f, len);
        EXPECT(vdev_checkpoint_load(mine, n_m, &m, 1), VDEV_ERR_IO,
               "checkpoint '%s' is damaged: entry 'm' is BOOL, but its element 1 is 7, not 0 "
               "or 1",
               mine);
        CHECK(words_are(m, m_want, 0));
        CHECK_OK(vdev_checkpoint_load(mine, NULL, NULL, 0)); /* not asked for: not judged */
    }
    free(f);
    vdev_tensor_free(m);
    vdev_tensor_free(k);
    ckpt_dir_clear(0);
}

/* ---- collectives: a bool is broadcast, never summed ---- */

static vdev_comm_t *comm;
static vdev_tensor_t *rank_t[2];
static enum vdev_status rank_st[2];
static char rank_msg[2][512];

static void *broadcast_rank(void *arg)
{
    int r = (int)(intptr_t)arg;
    rank_st[r] = vdev_comm_broadcast(comm, r, &rank_t[r], 1, 0);
    vdev_strlcpy(rank_msg[r], vdev_last_error(), sizeof rank_msg[r]);
    return NULL;
}

static void *all_reduce_rank(void *arg)
{
    int r = (int)(intptr_t)arg;
    rank_st[r] = vdev_comm_all_reduce(comm, r, &rank_t[r], 1, VDEV_REDUCE_SUM);
    vdev_strlcpy(rank_msg[r], vdev_last_error(), sizeof rank_msg[r]);
    return NULL;
}

static void test_collectives(void)
{
    const char *devs[2] = {"GPU:0", "GPU:1"};
    CHECK_OK(vdev_comm_new(devs, 2, &comm));
    int64_t s[1] = {4};
    const uint32_t h[4] = {1, 0, 1, 1};
    CHECK_OK(vdev_device_push("GPU:0"));
    rank_t[0] = vdev_tensor_from_host(h, s, 1, VDEV_BOOL);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("GPU:1"));
    rank_t[1] = vdev_tensor_zeros(s, 1, VDEV_BOOL);
    CHECK_OK(vdev_device_pop());
    CHECK(check_run_threads(2, all_reduce_rank) == 2);
    for (int r = 0; r < 2; r++) {
        CHECK(rank_st[r] == VDEV_ERR_INVALID_ARG);
        CHECK(strstr(rank_msg[r], "vdev_comm_all_reduce: tensor #0 is bool; all-reduce takes "
                                  "float tensors") != NULL);
    }
    CHECK(words_are(rank_t[0], h, 0) && words_are(rank_t[1], NULL, 0)); /* nothing moved */
    CHECK(check_run_threads(2, broadcast_rank) == 2);
    CHECK(rank_st[0] == VDEV_OK && rank_st[1] == VDEV_OK);
    CHECK(words_are(rank_t[1], h, 0));
    vdev_tensor_free(rank_t[0]);
    vdev_tensor_free(rank_t[1]);
    vdev_comm_free(comm);
}

int main(void)
{
    if (ckpt_dir_make() != 0)
        return 1;
    /* the cpu backend alone */
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    const char *cpu[1] = {"CPU:0"};
    test_fills("CPU:0");
    test_host_round_trip(cpu, 1);
    test_from_host_refused("CPU:0");
    test_names("CPU:0");
    test_dlpack("CPU:0");
    test_checkpoint_round_trip("CPU:0", "CPU:0");
    test_checkpoint_large("CPU:0", "CPU:0");
    test_checkpoint_bad_bool("CPU:0");
    CHECK_EQ_U64(in_use("CPU:0"), 0);

    /* simulated GPUs */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    const char *all[3] = {"CPU:0", "GPU:0", "GPU:1"};
    test_fills("GPU:0");
    test_host_round_trip(all, 3);
    test_from_host_refused("GPU:1");
    test_names("GPU:1");
    test_dlpack("GPU:0");
    test_checkpoint_round_trip("GPU:0", "GPU:1");
    test_checkpoint_round_trip("GPU:1", "CPU:0");
    test_checkpoint_large("GPU:1", "GPU:0");
    test_checkpoint_bad_bool("GPU:1");
    test_collectives();
    for (int k = 0; k < 3; k++)
        CHECK_EQ_U64(in_use(all[k]), 0);

    vdev_shutdown();
    ckpt_dir_clear(1);
    free_paths();
    return check_done();
}
