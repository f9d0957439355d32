/* test_checkpoint.c — checkpoints that work: the round trip of f32 and i32
 * tensors (0-dimensional, empty, 4-D, special float values) between the CPU
 * and two simulated GPUs, the exact bytes of the file, the header read back
 * (entries and metadata), a name restored into several replicas, every
 * argument error of save and load with its exact message, mismatched names,
 * dtypes and shapes (tensors unchanged), and a training job that stops,
 * restarts from its checkpoint and ends with the same loss, bit for bit, as
 * one that never stopped. Saves and loads from several threads at once, to
 * their own files and to one shared file.
 *
 * Damaged files and failures half-way through a save are in
 * test_checkpoint_corrupt.c; numpy reading vdev's files in
 * test_checkpoint_numpy.c. */
#define _GNU_SOURCE
#include "ckpt_testlib.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Files in dir, "." and ".." aside. */
static int n_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

/* A tensor on dev with the given contents. */
static vdev_tensor_t *make(const char *dev, const void *data, const int64_t *shape, int ndim,
                           enum vdev_dtype dt) {
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *t = vdev_tensor_from_host(data, shape, ndim, dt);
    vdev_device_pop();
    CHECK(t != NULL);
    return t;
}

/* A tensor on dev whose every element has the bit pattern 0x44444444
 * (785.0625f as f32), to see that a failed load leaves it alone. */
static vdev_tensor_t *sentinel(const char *dev, const int64_t *shape, int ndim,
                               enum vdev_dtype dt) {
    uint32_t v[64];
    for (int i = 0; i < 64; i++)
        v[i] = 0x44444444u;
    return make(dev, v, shape, ndim, dt);
}

/* t holds exactly these bytes. */
static int holds(const vdev_tensor_t *t, const void *want, size_t n) {
    unsigned char got[512];
    if (n > sizeof got || (size_t)vdev_tensor_numel(t) * 4 != n ||
        vdev_tensor_to_host(t, got, sizeof got) != VDEV_OK)
        return 0;
    return memcmp(got, want, n) == 0;
}

static int is_sentinel(const vdev_tensor_t *t) {
    uint32_t v[64];
    for (int i = 0; i < 64; i++)
        v[i] = 0x44444444u;
    return holds(t, v, (size_t)vdev_tensor_numel(t) * 4);
}

/* ---- the round trip ---- */

/* Seven tensors on three devices; names with a slash, quotes, a backslash,
 * non-ASCII letters and a tab (escaped in JSON). */
#define N_RT 7
static const char *rt_names[N_RT] = {"dense0/w", "labels",
                                     "scalar",   "optimizer/iterations",
                                     "empty",    "conv/w \"4-D\" \\ \xc3\xbcml\taut",
                                     "empty_i32"};
static uint32_t a_bits[6] = {0x3fc00000u /* 1.5 */,
                             0x80000000u /* -0 */,
                             0x00000001u /* denormal */,
                             0x7f800000u /* inf */,
                             0x7fc00001u /* NaN with a payload */,
                             0xc0e00000u /* -7 */};
static int32_t b_vals[4] = {INT32_MIN, -1, 0, INT32_MAX};
static float c_val = 42.5f;
static int32_t d_val = -9;
static float f_vals[12];

static void make_rt(vdev_tensor_t **t) {
    int64_t sa[2] = {2, 3}, sb[1] = {4}, se[2] = {0, 3}, sf[4] = {2, 1, 3, 2}, sg[2] = {3, 0};
    for (int i = 0; i < 12; i++)
        f_vals[i] = (float)i * 0.5f - 2.0f;
    t[0] = make("CPU:0", a_bits, sa, 2, VDEV_F32);
    t[1] = make("GPU:0", b_vals, sb, 1, VDEV_I32);
    t[2] = make("GPU:1", &c_val, NULL, 0, VDEV_F32);
    t[3] = make("GPU:0", &d_val, NULL, 0, VDEV_I32);
    t[4] = make("GPU:1", NULL, se, 2, VDEV_F32);
    t[5] = make("GPU:1", f_vals, sf, 4, VDEV_F32);
    t[6] = make("CPU:0", NULL, sg, 2, VDEV_I32);
}

static void test_round_trip(void) {
    check_fresh("2x1GiB");
    vdev_tensor_t *t[N_RT], *u[N_RT];
    make_rt(t);
    const char *meta[] = {"step", "1200", "note", "line 1\nline \"2\" \xc3\xbc"};
    const char *path = P("rt.safetensors");
    CHECK_OK(vdev_checkpoint_save(path, rt_names, t, N_RT, meta, 2));
    CHECK(n_files() == 1); /* no temporary file left */

    /* The bytes: header length, JSON starting with '{', padded with spaces to
     * 8 bytes, then the data in the entries' order, little-endian. */
    size_t len;
    unsigned char *f = slurp(path, &len);
    CHECK(f != NULL);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | f[i];
    CHECK(n % 8 == 0 && f[8] == '{');
    size_t end = 8 + n;
    while (end > 8 && f[end - 1] == ' ')
        end--;
    CHECK(f[end - 1] == '}' && 8 + n - end < 8);
    unsigned char want[96];
    size_t at = 0;
    memcpy(want + at, a_bits, 24), at += 24;
    memcpy(want + at, b_vals, 16), at += 16;
    memcpy(want + at, &c_val, 4), at += 4;
    memcpy(want + at, &d_val, 4), at += 4;
    memcpy(want + at, f_vals, 48), at += 48;
    CHECK_EQ_U64(len, 8 + n + 96);
    CHECK(memcmp(f + 8 + n, want, 96) == 0);
    free(f);

    /* Restored into zeroed tensors on other devices, bit for bit. */
    int64_t sa[2] = {2, 3}, sb[1] = {4}, se[2] = {0, 3}, sf[4] = {2, 1, 3, 2}, sg[2] = {3, 0};
    u[0] = sentinel("GPU:1", sa, 2, VDEV_F32);
    u[1] = sentinel("CPU:0", sb, 1, VDEV_I32);
    u[2] = sentinel("GPU:0", NULL, 0, VDEV_F32);
    u[3] = sentinel("GPU:1", NULL, 0, VDEV_I32);
    u[4] = sentinel("CPU:0", se, 2, VDEV_F32);
    u[5] = sentinel("GPU:0", sf, 4, VDEV_F32);
    u[6] = sentinel("GPU:1", sg, 2, VDEV_I32);
    CHECK_OK(vdev_checkpoint_load(path, rt_names, u, N_RT));
    CHECK(holds(u[0], a_bits, 24) && holds(u[1], b_vals, 16) && holds(u[2], &c_val, 4) &&
          holds(u[3], &d_val, 4) && holds(u[5], f_vals, 48));
    CHECK(vdev_tensor_numel(u[4]) == 0 && vdev_tensor_numel(u[6]) == 0);

    /* One entry into two replicas, a subset, and n == 0 (verifies the file). */
    vdev_tensor_t *r[3] = {sentinel("GPU:0", NULL, 0, VDEV_F32),
                           sentinel("GPU:1", NULL, 0, VDEV_F32),
                           sentinel("GPU:0", sb, 1, VDEV_I32)};
    const char *rn[3] = {"scalar", "scalar", "labels"};
    CHECK_OK(vdev_checkpoint_load(path, rn, r, 3));
    CHECK(holds(r[0], &c_val, 4) && holds(r[1], &c_val, 4) && holds(r[2], b_vals, 16));
    CHECK_OK(vdev_checkpoint_load(path, NULL, NULL, 0));

    /* The header, read back without loading. */
    vdev_checkpoint_t *ck = NULL;
    CHECK_OK(vdev_checkpoint_open(path, &ck));
    CHECK(vdev_checkpoint_n_entries(ck) == N_RT);
    static const int ndims[N_RT] = {2, 1, 0, 0, 2, 4, 2};
    static const uint64_t sizes[N_RT] = {24, 16, 4, 4, 0, 48, 0};
    /* In the order of their data: an empty entry before a full one at its offset. */
    static const int order[N_RT] = {0, 1, 2, 3, 4, 5, 6};
    static const uint64_t order_offs[N_RT] = {0, 24, 40, 44, 48, 48, 96};
    for (int k = 0; k < N_RT; k++) {
        struct vdev_checkpoint_entry e;
        CHECK_OK(vdev_checkpoint_entry(ck, k, &e));
        int i = order[k];
        CHECK_STR(e.name, rt_names[i]);
        CHECK_STR(e.dtype_name, vdev_tensor_dtype(t[i]) == VDEV_I32 ? "I32" : "F32");
        CHECK(e.dtype == vdev_tensor_dtype(t[i]));
        CHECK(e.ndim == ndims[i]);
        for (int d = 0; d < e.ndim; d++)
            CHECK(e.shape[d] == vdev_tensor_dim(t[i], d));
        CHECK_EQ_U64(e.offset_bytes, order_offs[k]);
        CHECK_EQ_U64(e.size_bytes, sizes[i]);
    }
    CHECK(vdev_checkpoint_n_metadata(ck) == 5);
    const char *k0, *v0;
    static const char *keys[5] = {"vdev.format", "vdev.crc32", "vdev.header_crc32", "step",
                                  "note"};
    for (int i = 0; i < 5; i++) {
        CHECK_OK(vdev_checkpoint_metadata_at(ck, i, &k0, &v0));
        CHECK_STR(k0, keys[i]);
    }
    CHECK_OK(vdev_checkpoint_metadata_at(ck, 1, &k0, &v0));
    char crc[16];
    snprintf(crc, sizeof crc, "%08lx", crc32(0L, want, 96));
    CHECK_STR(v0, crc);
    CHECK_OK(vdev_checkpoint_metadata_at(ck, 4, &k0, &v0));
    CHECK_STR(v0, meta[3]);
    struct vdev_checkpoint_entry e;
    EXPECT(vdev_checkpoint_entry(ck, N_RT, &e), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_entry: index 7 is outside 0..6");
    EXPECT(vdev_checkpoint_entry(ck, -1, &e), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_entry: index -1 is outside 0..6");
    EXPECT(vdev_checkpoint_entry(NULL, 0, &e), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_entry: checkpoint is NULL");
    EXPECT(vdev_checkpoint_entry(ck, 0, NULL), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_entry: out is NULL");
    EXPECT(vdev_checkpoint_metadata_at(ck, 5, &k0, &v0), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_metadata_at: index 5 is outside 0..4");
    EXPECT(vdev_checkpoint_metadata_at(ck, 0, NULL, &v0), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_metadata_at: key is NULL");
    CHECK(vdev_checkpoint_n_entries(NULL) == -1 && vdev_checkpoint_n_metadata(NULL) == -1);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    vdev_checkpoint_close(ck);
    vdev_checkpoint_close(NULL);
    EXPECT(vdev_checkpoint_open(path, NULL), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_open: out is NULL");
    ck = (vdev_checkpoint_t *)1;
    EXPECT(vdev_checkpoint_open(NULL, &ck), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_open: path is NULL");
    CHECK(ck == NULL);

    /* Metadata by key. */
    char buf[64];
    CHECK_OK(vdev_checkpoint_metadata(path, "step", buf, sizeof buf));
    CHECK_STR(buf, "1200");
    CHECK_OK(vdev_checkpoint_metadata(path, "note", buf, sizeof buf));
    CHECK_STR(buf, meta[3]);
    CHECK_OK(vdev_checkpoint_metadata(path, "step", buf, 5));
    memcpy(buf, "xxxx", 5);
    EXPECT(vdev_checkpoint_metadata(path, "step", buf, 4), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': the value of 'step' needs 5 bytes, buf holds 4", path);
    CHECK_STR(buf, "xxxx");
    EXPECT(vdev_checkpoint_metadata(path, "epoch", buf, sizeof buf), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': no metadata key 'epoch'", path);
    EXPECT(vdev_checkpoint_metadata(NULL, "step", buf, sizeof buf), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_metadata: path is NULL");
    EXPECT(vdev_checkpoint_metadata(path, NULL, buf, sizeof buf), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_metadata: key is NULL");
    EXPECT(vdev_checkpoint_metadata(path, "step", NULL, 8), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_metadata: buf is NULL");

    /* Saving again replaces the file; still one file in the folder. */
    CHECK_OK(vdev_checkpoint_save(path, rn + 1, r + 1, 2, NULL, 0));
    CHECK(n_files() == 1);
    CHECK_OK(vdev_checkpoint_open(path, &ck));
    CHECK(vdev_checkpoint_n_entries(ck) == 2 && vdev_checkpoint_n_metadata(ck) == 3);
    vdev_checkpoint_close(ck);

    for (int i = 0; i < N_RT; i++) {
        vdev_tensor_free(t[i]);
        vdev_tensor_free(u[i]);
    }
    for (int i = 0; i < 3; i++)
        vdev_tensor_free(r[i]);
    ckpt_dir_clear(0);
}

/* Fills in "vdev.header_crc32" of a header vdev writes (n bytes): the
 * CRC-32 of all n bytes, with its own 8 digits as "00000000". */
static void seal(char *h, size_t n) {
    char *at = strstr(h, "\"vdev.header_crc32\":\"") + 21;
    char hex[9];
    snprintf(hex, sizeof hex, "%08lx", crc32(0L, (const unsigned char *)h, (uInt)n));
    memcpy(at, hex, 8);
}

/* The header of a small file, byte for byte. */
static void test_exact_header(void) {
    check_fresh(NULL);
    float w[2] = {1.0f, -2.0f};
    int64_t s[1] = {2};
    vdev_tensor_t *t = make("CPU:0", w, s, 1, VDEV_F32);
    const char *names[1] = {"w"};
    const char *meta[2] = {"step", "7"};
    const char *path = P("small.safetensors");
    CHECK_OK(vdev_checkpoint_save(path, names, &t, 1, meta, 1));
    char want[256];
    int n = snprintf(want, sizeof want,
                     "{\"__metadata__\":{\"vdev.format\":\"1\",\"vdev.crc32\":\"%08lx\","
                     "\"vdev.header_crc32\":\"00000000\","
                     "\"step\":\"7\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
                     "\"data_offsets\":[0,8]}}",
                     crc32(0L, (const unsigned char *)w, 8));
    while (n % 8)
        want[n++] = ' ';
    want[n] = '\0';
    seal(want, (size_t)n);
    size_t len;
    unsigned char *f = slurp(path, &len);
    CHECK(f && len == 8 + (size_t)n + 8);
    CHECK(f && f[0] == n && !f[1] && !f[2] && !f[3] && !f[4] && !f[5] && !f[6] && !f[7]);
    CHECK(f && memcmp(f + 8, want, (size_t)n) == 0);
    CHECK(f && memcmp(f + 8 + n, w, 8) == 0);
    free(f);

    /* No tensors at all: a valid file with only metadata. */
    CHECK_OK(vdev_checkpoint_save(path, NULL, NULL, 0, NULL, 0));
    f = slurp(path, &len);
    char empty[128] = "{\"__metadata__\":{\"vdev.format\":\"1\",\"vdev.crc32\":\"00000000\","
                      "\"vdev.header_crc32\":\"00000000\"}}     ";
    seal(empty, 96);
    CHECK(f && len == 8 + 96 && f[0] == 96 && memcmp(f + 8, empty, 96) == 0);
    free(f);
    CHECK_OK(vdev_checkpoint_load(path, NULL, NULL, 0));
    vdev_tensor_free(t);
    ckpt_dir_clear(0);
}

/* ---- save's argument errors: each names the entry, and writes nothing ---- */

static void test_save_errors(void) {
    check_fresh(NULL);
    float v[2] = {1, 2};
    int64_t s[1] = {2};
    vdev_tensor_t *t[3] = {make("CPU:0", v, s, 1, VDEV_F32), make("CPU:0", v, s, 1, VDEV_F32),
                           make("CPU:0", v, s, 1, VDEV_F32)};
    const char *path = P("args.safetensors");
    const char *ok3[3] = {"a", "b", "c"};
    const char *meta[4] = {"step", "1", "epoch", "2"};

    EXPECT(vdev_checkpoint_save(NULL, ok3, t, 3, NULL, 0), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_save: path is NULL");
    EXPECT(vdev_checkpoint_save("", ok3, t, 3, NULL, 0), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_save: path is empty");
    EXPECT(vdev_checkpoint_save(path, ok3, t, -1, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': n = -1, n_metadata = 0: counts cannot be negative", path);
    EXPECT(vdev_checkpoint_save(path, ok3, t, 1, meta, -2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': n = 1, n_metadata = -2: counts cannot be negative", path);
    EXPECT(vdev_checkpoint_save(path, NULL, t, 3, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': names is NULL", path);
    EXPECT(vdev_checkpoint_save(path, ok3, NULL, 3, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': tensors is NULL", path);
    EXPECT(vdev_checkpoint_save(path, ok3, t, 3, NULL, 1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': metadata is NULL", path);

    const char *null1[3] = {"a", NULL, "c"};
    EXPECT(vdev_checkpoint_save(path, null1, t, 3, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': names[1] is NULL", path);
    const char *empty2[3] = {"a", "b", ""};
    EXPECT(vdev_checkpoint_save(path, empty2, t, 3, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': names[2] is empty", path);
    char longname[VDEV_CHECKPOINT_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *long0[1] = {longname};
    EXPECT(vdev_checkpoint_save(path, long0, t, 1, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': names[0] '%.40s...' is 1025 bytes long, more than 1024", path,
           longname);
    static const char *bad_utf8[] = {"\xff",     "a\xc0\xaf",        "\xed\xa0\x80",
                                     "\xe2\x82", "\xf4\x90\x80\x80", "\x80"};
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof *bad_utf8; i++) {
        const char *bu[2] = {"ok", bad_utf8[i]};
        EXPECT(vdev_checkpoint_save(path, bu, t, 2, NULL, 0), VDEV_ERR_INVALID_ARG,
               "checkpoint '%s': names[1] is not valid UTF-8", path);
    }
    const char *reserved[1] = {"__metadata__"};
    EXPECT(vdev_checkpoint_save(path, reserved, t, 1, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': names[0] is '__metadata__', which the format reserves", path);
    const char *dup[3] = {"w", "b", "w"};
    EXPECT(vdev_checkpoint_save(path, dup, t, 3, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': the name 'w' is given twice", path);

    vdev_tensor_t *tn[3] = {t[0], NULL, t[2]};
    EXPECT(vdev_checkpoint_save(path, ok3, tn, 3, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': tensors[1] ('b') is NULL", path);
    /* Not a tensor at all: zeroed memory has no tensor's magic number. */
    static uint64_t fake[512];
    vdev_tensor_t *tf[2] = {t[0], (vdev_tensor_t *)(void *)fake};
    EXPECT(vdev_checkpoint_save(path, ok3, tf, 2, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': tensors[1] ('b') is not a live tensor", path);

    const char *m_empty[2] = {"", "x"};
    EXPECT(vdev_checkpoint_save(path, ok3, t, 3, m_empty, 1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': metadata[0] is empty", path);
    const char *m_null_key[4] = {"step", "1", NULL, "x"};
    EXPECT(vdev_checkpoint_save(path, ok3, t, 3, m_null_key, 2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': metadata[2] is NULL", path);
    const char *m_vdev[2] = {"vdev.crc32", "0"};
    EXPECT(vdev_checkpoint_save(path, ok3, t, 3, m_vdev, 1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': metadata key 'vdev.crc32' starts with \"vdev.\", which vdev "
           "reserves",
           path);
    const char *m_null[2] = {"step", NULL};
    EXPECT(vdev_checkpoint_save(path, ok3, t, 3, m_null, 1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': metadata[1], the value of 'step', is NULL", path);
    const char *m_utf8[4] = {"step", "1", "loss", "\xfe"};
    EXPECT(vdev_checkpoint_save(path, ok3, t, 3, m_utf8, 2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': metadata[3], the value of 'loss', is not valid UTF-8", path);
    const char *m_dup[6] = {"step", "1", "epoch", "2", "step", "3"};
    EXPECT(vdev_checkpoint_save(path, ok3, t, 3, m_dup, 3), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': the metadata key 'step' is given twice", path);
    /* A header past the format's 100,000,000 bytes. */
    char *huge = malloc(100000001);
    CHECK(huge != NULL);
    memset(huge, 'v', 100000000);
    huge[100000000] = '\0';
    const char *m_huge[2] = {"blob", huge};
    EXPECT(vdev_checkpoint_save(path, ok3, t, 3, m_huge, 1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': the header would be larger than the format's limit of 100000000 "
           "bytes (too many or too long names and metadata)",
           path);
    free(huge);
    CHECK(n_files() == 0); /* none of them wrote anything */

    /* A name of exactly the limit is fine, and a metadata value may be empty. */
    longname[VDEV_CHECKPOINT_NAME_MAX] = '\0';
    const char *m_ok[2] = {"empty", ""};
    CHECK_OK(vdev_checkpoint_save(path, long0, t, 1, m_ok, 1));
    char buf[8] = "x";
    CHECK_OK(vdev_checkpoint_metadata(path, "empty", buf, sizeof buf));
    CHECK_STR(buf, "");

    /* A folder that does not exist; a target that is a folder. */
    char missing[400];
    snprintf(missing, sizeof missing, "%s/no-such-folder/x.safetensors", dir);
    CHECK_STATUS(vdev_checkpoint_save(missing, ok3, t, 3, meta, 2), VDEV_ERR_IO);
    char want[1024];
    snprintf(want, sizeof want, "checkpoint '%s': cannot create '%s/no-such-folder/.vdev-%ld-",
             missing, dir, (long)getpid());
    CHECK(strncmp(vdev_last_error(), want, strlen(want)) == 0);
    CHECK_MSG(".tmp': No such file or directory");
    const char *folder = P("a-folder");
    CHECK(mkdir(folder, 0755) == 0);
    EXPECT(vdev_checkpoint_save(folder, ok3, t, 3, meta, 2), VDEV_ERR_IO,
           "checkpoint '%s': the path is a directory, not a regular file; nothing was written",
           folder);
    CHECK(n_files() == 2); /* the folder and args.safetensors: no temporary file */

    for (int i = 0; i < 3; i++)
        vdev_tensor_free(t[i]);
    ckpt_dir_clear(0);
}

/* ---- load's argument errors and mismatches: tensors unchanged ---- */

static void test_load_errors(void) {
    check_fresh("2x1GiB");
    vdev_tensor_t *t[N_RT];
    make_rt(t);
    const char *path = P("mm.safetensors");
    CHECK_OK(vdev_checkpoint_save(path, rt_names, t, N_RT, NULL, 0));
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s4[1] = {4}, s1[1] = {1};
    vdev_tensor_t *a = sentinel("GPU:0", s23, 2, VDEV_F32);
    vdev_tensor_t *b = sentinel("GPU:1", s4, 1, VDEV_I32);

    const char *n2[2] = {"dense0/w", "nope"};
    vdev_tensor_t *t2[2] = {a, b};
    EXPECT(vdev_checkpoint_load(path, n2, t2, 2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': no entry 'nope' (asked for by names[1]; the file has 7 entries)",
           path);
    CHECK(is_sentinel(a) && is_sentinel(b));

    vdev_tensor_t *w32 = sentinel("GPU:1", s32, 2, VDEV_F32);
    const char *nw[2] = {"labels", "dense0/w"};
    vdev_tensor_t *tw[2] = {b, w32};
    EXPECT(vdev_checkpoint_load(path, nw, tw, 2), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'dense0/w' is F32 [2, 3] in the file, but tensors[1] is F32 "
           "[3, 2]",
           path);
    CHECK(is_sentinel(b) && is_sentinel(w32));

    vdev_tensor_t *lf = sentinel("CPU:0", s4, 1, VDEV_F32);
    const char *nl[1] = {"labels"};
    EXPECT(vdev_checkpoint_load(path, nl, &lf, 1), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'labels' is I32 [4] in the file, but tensors[0] is F32 [4]",
           path);
    CHECK(is_sentinel(lf));

    vdev_tensor_t *one = sentinel("GPU:0", s1, 1, VDEV_F32);
    const char *ns[1] = {"scalar"};
    EXPECT(vdev_checkpoint_load(path, ns, &one, 1), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'scalar' is F32 [] in the file, but tensors[0] is F32 [1]",
           path);
    CHECK(is_sentinel(one));

    const char *twice[2] = {"dense0/w", "labels"};
    vdev_tensor_t *same[2] = {a, a};
    EXPECT(vdev_checkpoint_load(path, twice, same, 2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': tensors[0] and tensors[1] are one tensor under two names, "
           "'dense0/w' and 'labels'",
           path);
    CHECK(is_sentinel(a));

    EXPECT(vdev_checkpoint_load(NULL, n2, t2, 2), VDEV_ERR_INVALID_ARG,
           "vdev_checkpoint_load: path is NULL");
    EXPECT(vdev_checkpoint_load(path, n2, t2, -1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': n = -1 cannot be negative", path);
    EXPECT(vdev_checkpoint_load(path, NULL, t2, 2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': names is NULL", path);
    EXPECT(vdev_checkpoint_load(path, n2, NULL, 2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': tensors is NULL", path);
    const char *nn[2] = {"dense0/w", NULL};
    EXPECT(vdev_checkpoint_load(path, nn, t2, 2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': names[1] is NULL", path);
    vdev_tensor_t *tnull[2] = {a, NULL};
    EXPECT(vdev_checkpoint_load(path, n2, tnull, 2), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': tensors[1] ('nope') is NULL", path);
    const char *missing = P("missing.safetensors");
    EXPECT(vdev_checkpoint_load(missing, n2, t2, 1), VDEV_ERR_NOT_FOUND,
           "checkpoint '%s': cannot open: No such file or directory", missing);
    char buf[8];
    EXPECT(vdev_checkpoint_metadata(missing, "step", buf, sizeof buf), VDEV_ERR_NOT_FOUND,
           "checkpoint '%s': cannot open: No such file or directory", missing);
    vdev_checkpoint_t *ck;
    EXPECT(vdev_checkpoint_open(missing, &ck), VDEV_ERR_NOT_FOUND,
           "checkpoint '%s': cannot open: No such file or directory", missing);
    /* A file that cannot be read for another reason is VDEV_ERR_IO. */
    char under_file[600];
    snprintf(under_file, sizeof under_file, "%s/x", path);
    EXPECT(vdev_checkpoint_load(under_file, n2, t2, 1), VDEV_ERR_IO,
           "checkpoint '%s': cannot open: Not a directory", under_file);
    CHECK(mkdir(P("folder"), 0755) == 0);
    EXPECT(vdev_checkpoint_load(P("folder"), n2, t2, 1), VDEV_ERR_IO,
           "checkpoint '%s': not a regular file", P("folder"));
    CHECK(is_sentinel(a) && is_sentinel(b));

    /* No room left for the staging device scope. */
    int pushed = 0;
    while (vdev_device_push("CPU:0") == VDEV_OK)
        pushed++;
    char why[256];
    snprintf(why, sizeof why, "%s", vdev_last_error());
    EXPECT(vdev_checkpoint_load(path, n2, t2, 1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': staging on CPU:0: %s", path, why);
    CHECK(strstr(why, "device scopes nested deeper than") == why);
    while (pushed--)
        vdev_device_pop();
    CHECK(is_sentinel(a));

    vdev_tensor_t *all[] = {a, b, w32, lf, one};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        vdev_tensor_free(all[i]);
    for (int i = 0; i < N_RT; i++)
        vdev_tensor_free(t[i]);
    ckpt_dir_clear(0);
}

/* ---- stop, restart, resume ---- */

/* Trains a 4-8-2 MLP with SGD on GPU:0 from `from` up to step `to` (exclusive),
 * saving at `save_at` (if in range), and returns the last step's loss. The
 * batch of step s depends only on s, so a resumed run sees the same data. */
static float train(vdev_mlp_t *m, int from, int to, int save_at, const char *path) {
    static const char *names[4] = {"dense0/w", "dense0/b", "dense1/w", "dense1/b"};
    vdev_tensor_t *vars[4];
    CHECK(vdev_mlp_variables(m, vars, 4) == 4);
    vdev_optimizer_t *sgd = vdev_sgd_new(0.05f, 0.0f);
    float loss_value = NAN;
    CHECK_OK(vdev_device_push("GPU:0"));
    for (int s = from; s < to; s++) {
        vdev_scope_begin();
        int64_t xs[2] = {16, 4};
        vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, 1000 + (uint64_t)s);
        vdev_tensor_t *y = vdev_tanh(
            vdev_matmul(x, vdev_tensor_uniform((int64_t[]){4, 2}, 2, -1, 1, 7), false, false));
        vdev_tape_t *tape = vdev_tape_begin();
        vdev_tensor_t *loss = vdev_mse(vdev_mlp_forward(m, x), y), *g[4];
        CHECK_OK(vdev_tape_gradient(tape, loss, vars, 4, g));
        vdev_tape_end(tape);
        CHECK_OK(vdev_optimizer_apply(sgd, vars, g, 4));
        loss_value = vdev_tensor_item(loss);
        vdev_scope_end();
        if (s + 1 == save_at) {
            char step[16];
            snprintf(step, sizeof step, "%d", s + 1);
            const char *meta[2] = {"step", step};
            CHECK_OK(vdev_checkpoint_save(path, names, vars, 4, meta, 1));
        }
    }
    vdev_device_pop();
    vdev_optimizer_free(sgd);
    return loss_value;
}

static void test_resume(void) {
    const char *path = P("job.safetensors");
    int64_t sizes[3] = {4, 8, 2};

    /* One job that never stops. */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_mlp_t *m = vdev_mlp_new(sizes, 3, VDEV_ACT_TANH, VDEV_ACT_NONE, 11);
    vdev_device_pop();
    float straight = train(m, 0, 30, -1, NULL);
    vdev_mlp_free(m);

    /* One that saves at step 20, runs on, and dies at step 25 ... */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    m = vdev_mlp_new(sizes, 3, VDEV_ACT_TANH, VDEV_ACT_NONE, 11);
    vdev_device_pop();
    train(m, 0, 25, 20, path);
    vdev_mlp_free(m);

    /* ... and a new process (a fresh runtime, a model with other initial
     * values) that resumes from the checkpoint's step. */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    m = vdev_mlp_new(sizes, 3, VDEV_ACT_TANH, VDEV_ACT_NONE, 99);
    vdev_device_pop();
    char step[16];
    CHECK_OK(vdev_checkpoint_metadata(path, "step", step, sizeof step));
    CHECK_STR(step, "20");
    static const char *names[4] = {"dense0/w", "dense0/b", "dense1/w", "dense1/b"};
    vdev_tensor_t *vars[4];
    vdev_mlp_variables(m, vars, 4);
    CHECK_OK(vdev_checkpoint_load(path, names, vars, 4));
    float resumed = train(m, atoi(step), 30, -1, NULL);
    vdev_mlp_free(m);
    CHECK(!isnan(straight) && memcmp(&straight, &resumed, sizeof straight) == 0);
    if (memcmp(&straight, &resumed, sizeof straight) != 0)
        fprintf(stderr, "loss at step 30: %.9g straight, %.9g resumed\n", straight, resumed);
    ckpt_dir_clear(0);
}

/* ---- several threads at once ---- */

#define N_JOBS 4
#define ROUNDS 10

struct job {
    const char *path;
    vdev_tensor_t *src[2]; /* saved */
    vdev_tensor_t *dst[2]; /* loaded into, on the other GPU */
    int failures;          /* counted here, checked on the main thread */
};

static const char *job_names[2] = {"w", "step"};

static void *job_run(void *arg) {
    struct job *j = arg;
    for (int r = 0; r < ROUNDS; r++) {
        const char *meta[2] = {"round", r % 2 ? "odd" : "even"};
        j->failures += vdev_checkpoint_save(j->path, job_names, j->src, 2, meta, 1) != VDEV_OK;
        j->failures += vdev_checkpoint_load(j->path, job_names, j->dst, 2) != VDEV_OK;
    }
    return NULL;
}

static void test_threads(void) {
    check_fresh("2x1GiB");
    static char job_files[N_JOBS][64];
    struct job jobs[N_JOBS];
    int64_t s[2] = {32, 16};
    for (int k = 0; k < N_JOBS; k++) {
        /* Jobs 0 and 1 share a file; 2 and 3 have their own. */
        snprintf(job_files[k], sizeof job_files[k], "job%d.safetensors", k < 2 ? 0 : k);
        jobs[k].path = P(job_files[k]);
        jobs[k].failures = 0;
        CHECK_OK(vdev_device_push(k % 2 ? "GPU:1" : "GPU:0"));
        jobs[k].src[0] = vdev_tensor_uniform(s, 2, -1, 1, 100 + (uint64_t)k);
        int32_t step = k;
        jobs[k].src[1] = vdev_tensor_from_host(&step, NULL, 0, VDEV_I32);
        vdev_device_pop();
        CHECK_OK(vdev_device_push(k % 2 ? "GPU:0" : "GPU:1"));
        jobs[k].dst[0] = vdev_tensor_zeros(s, 2, VDEV_F32);
        jobs[k].dst[1] = vdev_tensor_zeros(NULL, 0, VDEV_I32);
        vdev_device_pop();
    }
    /* The shared file's first version, so that no load finds it missing. */
    CHECK_OK(vdev_checkpoint_save(jobs[0].path, job_names, jobs[0].src, 2, NULL, 0));
    pthread_t th[N_JOBS];
    for (int k = 0; k < N_JOBS; k++)
        CHECK(pthread_create(&th[k], NULL, job_run, &jobs[k]) == 0);
    for (int k = 0; k < N_JOBS; k++)
        CHECK(pthread_join(th[k], NULL) == 0);
    for (int k = 0; k < N_JOBS; k++) {
        CHECK(jobs[k].failures == 0);
        float a[512], b[512];
        int32_t step;
        CHECK_OK(vdev_tensor_to_host(jobs[k].dst[0], a, sizeof a));
        CHECK_OK(vdev_tensor_to_host(jobs[k].dst[1], &step, sizeof step));
        /* Own files hold the job's tensors; the shared one either job's, whole. */
        int from = k < 2 ? step : k;
        CHECK(from >= 0 && from < N_JOBS && (k >= 2 ? step == k : step < 2));
        CHECK_OK(vdev_tensor_to_host(jobs[from].src[0], b, sizeof b));
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    CHECK(n_files() == 3); /* job0, job2, job3: no temporary file */
    for (int k = 0; k < N_JOBS; k++)
        for (int i = 0; i < 2; i++) {
            vdev_tensor_free(jobs[k].src[i]);
            vdev_tensor_free(jobs[k].dst[i]);
        }
    ckpt_dir_clear(0);
}

/* A tensor made before vdev_shutdown is named as such, not as dead, by save
 * and load alike. */
static void test_after_shutdown(void) {
    check_fresh(NULL);
    float v[2] = {1, 2};
    int64_t s[1] = {2};
    vdev_tensor_t *old = make("CPU:0", v, s, 1, VDEV_F32);
    const char *path = P("old.safetensors"), *names[1] = {"w"};
    CHECK_OK(vdev_checkpoint_save(path, names, &old, 1, NULL, 0));
    vdev_shutdown();
    CHECK_OK(vdev_init());
    EXPECT(vdev_checkpoint_save(path, names, &old, 1, NULL, 0), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': tensors[0] ('w') belongs to a runtime that was shut down (made "
           "before vdev_shutdown)",
           path);
    EXPECT(vdev_checkpoint_load(path, names, &old, 1), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': tensors[0] ('w') belongs to a runtime that was shut down (made "
           "before vdev_shutdown)",
           path);
}

int main(void) {
    if (ckpt_dir_make() != 0)
        return 1;
    test_round_trip();
    test_exact_header();
    test_save_errors();
    test_load_errors();
    test_resume();
    test_threads();
    test_after_shutdown();
    vdev_shutdown();
    ckpt_dir_clear(1);
    free_paths();
    return check_done();
}
