/* test_checkpoint_corrupt.c — checkpoints that are damaged, hostile or
 * interrupted: a file cut at every offset, a flipped data byte (checksum),
 * single-bit flips anywhere in the header (the header's own checksum), some
 * forty malformed headers and files that are not safetensors at all (each
 * with its exact code and message), files written by other programs (no
 * checksum, other dtypes, any key order, offsets that are not multiples of
 * the element size), and saves that fail half-way, by a
 * file-size limit (RLIMIT_FSIZE: a real EFBIG from write) and by failing each
 * system call and allocation in turn. A failed load leaves every tensor as it
 * was; a failed save leaves the old checkpoint in place, byte for byte, and
 * no temporary file. */
#define _GNU_SOURCE
#include "ckpt_testlib.h"
#include "dist/checkpoint.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

static int n_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

/* ---- the checkpoint the damage is done to ---- */

#define N_T 4
static const char *names[N_T] = {"w", "b", "steps", "empty"};
static const int64_t s_w[2] = {3, 4}, s_b[1] = {4}, s_e[2] = {2, 0};
static float w_vals[12], b_vals[4];
static int32_t steps_val = 1234;
static uint64_t ends[N_T] = {48, 64, 68, 68}; /* data_offsets' ends, in header order */

static void make_tensors(vdev_tensor_t **t) {
    for (int i = 0; i < 12; i++)
        w_vals[i] = (float)i / 3.0f - 1.0f;
    for (int i = 0; i < 4; i++)
        b_vals[i] = (float)i * 0.25f;
    CHECK_OK(vdev_device_push("GPU:0"));
    t[0] = vdev_tensor_from_host(w_vals, s_w, 2, VDEV_F32);
    t[2] = vdev_tensor_from_host(&steps_val, NULL, 0, VDEV_I32);
    vdev_device_pop();
    CHECK_OK(vdev_device_push("GPU:1"));
    t[1] = vdev_tensor_from_host(b_vals, s_b, 1, VDEV_F32);
    t[3] = vdev_tensor_zeros(s_e, 2, VDEV_F32);
    vdev_device_pop();
}

/* Targets for a load, every element 0x44444444. */
static void make_sentinels(vdev_tensor_t **u) {
    static const int64_t *shapes[N_T] = {s_w, s_b, NULL, s_e};
    static const int ndims[N_T] = {2, 1, 0, 2};
    static const enum vdev_dtype dts[N_T] = {VDEV_F32, VDEV_F32, VDEV_I32, VDEV_F32};
    uint32_t v[16];
    for (int i = 0; i < 16; i++)
        v[i] = 0x44444444u;
    CHECK_OK(vdev_device_push("GPU:1"));
    for (int i = 0; i < N_T; i++)
        u[i] = vdev_tensor_from_host(v, shapes[i], ndims[i], dts[i]);
    vdev_device_pop();
}

static int untouched(vdev_tensor_t *const *u) {
    for (int i = 0; i < N_T; i++) {
        uint32_t v[16];
        int64_t n = vdev_tensor_numel(u[i]);
        if (vdev_tensor_to_host(u[i], v, sizeof v) != VDEV_OK)
            return 0;
        for (int64_t k = 0; k < n; k++)
            if (v[k] != 0x44444444u)
                return 0;
    }
    return 1;
}

static int restored(vdev_tensor_t *const *u) {
    float w[12], b[4];
    int32_t s;
    return vdev_tensor_to_host(u[0], w, sizeof w) == VDEV_OK &&
           vdev_tensor_to_host(u[1], b, sizeof b) == VDEV_OK &&
           vdev_tensor_to_host(u[2], &s, sizeof s) == VDEV_OK && !memcmp(w, w_vals, sizeof w) &&
           !memcmp(b, b_vals, sizeof b) && s == steps_val;
}

/* ---- truncation, checksum, bit flips ---- */

static void test_truncation(vdev_tensor_t *const *t, vdev_tensor_t *const *u) {
    const char *good = P("good.safetensors"), *cut = P("cut.safetensors");
    const char *meta[2] = {"step", "40"};
    CHECK_OK(vdev_checkpoint_save(good, names, t, N_T, meta, 1));
    size_t len;
    unsigned char *f = slurp(good, &len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | f[i];
    CHECK_EQ_U64(len, 8 + n + 68);
    char want[600];
    for (size_t cut_at = 0; cut_at < len; cut_at++) {
        spill(cut, f, cut_at);
        if (cut_at < 8) {
            snprintf(want, sizeof want,
                     "checkpoint '%s' is damaged: the file holds %zu bytes, fewer than the 8 of "
                     "the header's length (truncated?)",
                     cut, cut_at);
        } else if (cut_at < 8 + n) {
            snprintf(want, sizeof want,
                     "checkpoint '%s' is damaged: the header of %llu bytes runs past the end of "
                     "the file (%zu bytes; truncated?)",
                     cut, (unsigned long long)n, cut_at);
        } else {
            uint64_t have = cut_at - 8 - n;
            int k = 0;
            while (ends[k] <= have)
                k++;
            snprintf(want, sizeof want,
                     "checkpoint '%s' is damaged: entry '%s' ends at byte %llu of the data, but "
                     "the file holds %llu bytes of data (truncated?)",
                     cut, names[k], (unsigned long long)ends[k], (unsigned long long)have);
        }
        CHECK_STATUS(vdev_checkpoint_load(cut, names, u, N_T), VDEV_ERR_IO);
        CHECK_STR(vdev_last_error(), want);
        vdev_checkpoint_t *ck = (vdev_checkpoint_t *)1;
        CHECK_STATUS(vdev_checkpoint_open(cut, &ck), VDEV_ERR_IO);
        CHECK(ck == NULL);
        CHECK_STR(vdev_last_error(), want);
        char buf[16];
        CHECK_STATUS(vdev_checkpoint_metadata(cut, "step", buf, sizeof buf), VDEV_ERR_IO);
    }
    CHECK(untouched(u));

    /* One byte too many: a file vdev wrote with bytes appended is damaged. */
    unsigned char *g = malloc(len + 1);
    memcpy(g, f, len);
    g[len] = 0;
    spill(cut, g, len + 1);
    EXPECT(vdev_checkpoint_load(cut, names, u, N_T), VDEV_ERR_IO,
           "checkpoint '%s' is damaged: 1 byte of data after the last entry", cut);
    CHECK(untouched(u));

    /* Every data byte flipped in turn: the checksum catches each. */
    for (size_t i = 8 + n; i < len; i++) {
        memcpy(g, f, len);
        g[i] ^= 0x20;
        spill(cut, g, len);
        unsigned long crc = crc32(0L, g + 8 + n, (uInt)(len - 8 - n));
        unsigned long was = crc32(0L, f + 8 + n, (uInt)(len - 8 - n));
        EXPECT(vdev_checkpoint_load(cut, names, u, N_T), VDEV_ERR_IO,
               "checkpoint '%s' is damaged: checksum mismatch: the data's CRC-32 is %08lx, the "
               "header says %08lx",
               cut, crc, was);
    }
    CHECK(untouched(u));

    /* Single-bit flips anywhere in the length or the header: each one is
     * refused as data loss (the header's own CRC, checked on the raw bytes
     * before they are parsed), whatever else it breaks (a quote, the UTF-8, a
     * NUL taken in from the data by a longer length), never as "not a
     * safetensors file"; a flip in the name of the CRC's own key too
     * (test_checkpoint_header.c). Nothing crashes, nothing leaks. */
    int failed = 0, passed = 0, lost_not = 0;
    for (size_t i = 0; i < 8 + n; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(g, f, len);
            g[i] ^= (unsigned char)(1u << bit);
            spill(cut, g, len);
            vdev_tensor_t *v[N_T];
            make_sentinels(v);
            enum vdev_status st = vdev_checkpoint_load(cut, names, v, N_T);
            if (st == VDEV_OK) {
                passed++;
                CHECK(restored(v));
            } else {
                failed++;
                CHECK(untouched(v));
                CHECK(strncmp(vdev_last_error(), "checkpoint '", 12) == 0);
                if (st != VDEV_ERR_IO || !strstr(vdev_last_error(), VDEV_CKPT_DAMAGED)) {
                    lost_not++;
                    fprintf(stderr, "byte %zu bit %d: %s: %s\n", i, bit, vdev_status_str(st),
                            vdev_last_error());
                }
            }
            for (int k = 0; k < N_T; k++)
                vdev_tensor_free(v[k]);
        }
    CHECK(failed == (int)(8 * (8 + n)) && passed == 0);
    CHECK(lost_not == 0);
    printf("header bit flips: %d refused, %d harmless\n", failed, passed);
    free(g);
    free(f);
}

/* ---- malformed headers ---- */

struct bad {
    const char *header;
    size_t data_len;
    enum vdev_status code;
    const char *msg;
};

/* clang-format off */
static const struct bad BAD[] = {
    {"", 0, VDEV_ERR_PARSE, "the header is empty"},
    {" {}", 0, VDEV_ERR_PARSE, "the header does not start with '{'"},
    {"{\"a\":", 0, VDEV_ERR_PARSE, "the header is not valid JSON: parse error: premature EOF"},
    {"{} x", 0, VDEV_ERR_PARSE, "the header is not valid JSON: parse error: trailing garbage"},
    {"{\"a\":NaN}", 0, VDEV_ERR_PARSE, "the header is not valid JSON: lexical error: invalid char in json text."},
    {"{/* c */}", 0, VDEV_ERR_PARSE, "the header is not valid JSON: a comment at offset 1"},
    {"{\"\xff\":1}", 0, VDEV_ERR_PARSE, "the header is not valid UTF-8"},
    {"{\"a\":1}", 0, VDEV_ERR_PARSE, "entry 'a' is not a JSON object"},
    {"{\"a\":{\"shape\":[],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a' has no \"dtype\""},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a' has no \"shape\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}", 4, VDEV_ERR_PARSE, "entry 'a' has no \"data_offsets\""},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a' has \"dtype\" twice"},
    {"{\"a\":{\"dtype\":5,\"shape\":[],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': dtype is not a string"},
    {"{\"a\":{\"dtype\":\"F33\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': unknown dtype \"F33\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape is not an array"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape holds -1, not a size"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-0],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape holds -0, not a size"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape holds 1.5, not a size"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape holds 1e0, not a size"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e999],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape holds 1e999, not a size"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape holds 99999999999999999999, not a size"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape holds a string, not a size"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': shape holds true, false or null, not a size"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4,8]}}", 8, VDEV_ERR_PARSE, "entry 'a': data_offsets is not an array of two numbers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":{}}}", 4, VDEV_ERR_PARSE, "entry 'a': data_offsets is not an array of two numbers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4.0]}}", 4, VDEV_ERR_PARSE, "entry 'a': data_offsets holds 4.0, not an offset"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[[0],4]}}", 4, VDEV_ERR_PARSE, "entry 'a': data_offsets holds an array, not an offset"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,0]}}", 4, VDEV_ERR_PARSE, "entry 'a': data_offsets [4, 0] end before they begin"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[250000000000],\"data_offsets\":[0,1000000000000]}}", 4, VDEV_ERR_IO, "entry 'a' ends at byte 1000000000000 of the data, but the file holds 4 bytes of data (truncated?)"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': data_offsets [0, 4] hold 4 bytes, but its shape and dtype F32 need 8"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]}}", 4, VDEV_ERR_PARSE, "entry 'a': data_offsets [0, 4] hold 4 bytes, but its shape and dtype F32 need more than 18446744073709551615"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, VDEV_ERR_PARSE, "entries 'a' and 'b' overlap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, VDEV_ERR_PARSE, "a gap of 4 bytes in the data before entry 'b'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, VDEV_ERR_PARSE, "a gap of 4 bytes in the data before entry 'a'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, VDEV_ERR_PARSE, "4 bytes of data after the last entry"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, VDEV_ERR_PARSE, "entry 'a' appears twice"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, VDEV_ERR_PARSE, "key '__metadata__' appears twice"},
    {"{\"__metadata__\":[]}", 0, VDEV_ERR_PARSE, "__metadata__ is not a JSON object"},
    {"{\"__metadata__\":{\"step\":3}}", 0, VDEV_ERR_PARSE, "metadata value of 'step' is not a string"},
    {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, VDEV_ERR_PARSE, "metadata key 'k' appears twice"},
    {"{\"__metadata__\":{\"vdev.format\":\"2\",\"vdev.crc32\":\"00000000\"}}", 0, VDEV_ERR_UNSUPPORTED, "vdev.format is \"2\"; this vdev reads format 1"},
    {"{\"__metadata__\":{\"vdev.format\":\"1\"}}", 0, VDEV_ERR_PARSE, "vdev.format is set but vdev.crc32 is missing"},
    {"{\"__metadata__\":{\"vdev.format\":\"1\",\"vdev.crc32\":\"DEADBEEF\"}}", 0, VDEV_ERR_PARSE, "vdev.crc32 is \"DEADBEEF\", not 8 lowercase hex digits"},
    {"{\"__metadata__\":{\"vdev.format\":\"1\",\"vdev.crc32\":\"0\"}}", 0, VDEV_ERR_PARSE, "vdev.crc32 is \"0\", not 8 lowercase hex digits"},
    {"{\"__metadata__\":{\"vdev.crc32\":\"1234567\"}}", 0, VDEV_ERR_PARSE, "vdev.crc32 is \"1234567\", not 8 lowercase hex digits"},
    {"{\"__metadata__\":{\"vdev.header_crc32\":\"0000000g\"}}", 0, VDEV_ERR_PARSE, "vdev.header_crc32 is \"0000000g\", not 8 lowercase hex digits"},
    {"{\"__metadata__\":{\"step\":\"7\",\"vdev.header_crc32\":\"00000000\"}}", 0, VDEV_ERR_IO, "vdev.header_crc32 is not at the start of the header, where vdev writes it (the header was changed)"},
    {"{\"__metadata__\":{\"vdev.format\":\"1\",\"vdev.crc32\":\"00000000\",\"vdev.header_crc32\":\"00000000\"}}", 0, VDEV_ERR_IO, "header checksum mismatch: the header's CRC-32 is 01abd9bd, vdev.header_crc32 says 00000000"},
};
/* clang-format on */

static void test_bad_headers(vdev_tensor_t *const *u) {
    const char *bad = P("bad.safetensors");
    char want[600];
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        forge(bad, -1, BAD[i].header, strlen(BAD[i].header), NULL, BAD[i].data_len);
        if (BAD[i].code == VDEV_ERR_IO) /* damage: every such message has this form */
            snprintf(want, sizeof want, "checkpoint '%s' is damaged: %s", bad, BAD[i].msg);
        else
            snprintf(want, sizeof want, "checkpoint '%s': %s", bad, BAD[i].msg);
        CHECK_STATUS(vdev_checkpoint_load(bad, names, u, N_T), BAD[i].code);
        CHECK_STR(vdev_last_error(), want);
        vdev_checkpoint_t *ck;
        CHECK_STATUS(vdev_checkpoint_open(bad, &ck), BAD[i].code);
        CHECK_STR(vdev_last_error(), want);
    }

    /* A NUL byte, nesting past the limit, and header lengths past the format's limit. */
    forge(bad, -1, "{\"a\"\0:1}", 8, NULL, 0);
    EXPECT(vdev_checkpoint_load(bad, NULL, NULL, 0), VDEV_ERR_PARSE,
           "checkpoint '%s': the header holds a NUL byte at offset 4", bad);
    char deep[200] = "{\"a\":";
    for (int i = 0; i < VDEV_CKPT_MAX_DEPTH; i++)
        strcat(deep, "[");
    forge(bad, -1, deep, strlen(deep), NULL, 0);
    EXPECT(vdev_checkpoint_load(bad, NULL, NULL, 0), VDEV_ERR_PARSE,
           "checkpoint '%s': the header nests deeper than 64 levels", bad);
    forge(bad, 100000001, "{}", 2, NULL, 0);
    EXPECT(vdev_checkpoint_load(bad, NULL, NULL, 0), VDEV_ERR_PARSE,
           "checkpoint '%s': not a safetensors file: its first 8 bytes, read as the header's "
           "length, give 100000001, past the format's limit of 100000000 bytes",
           bad);
    forge(bad, -2 /* 2^64 - 2 */, "{}", 2, NULL, 0);
    EXPECT(vdev_checkpoint_load(bad, NULL, NULL, 0), VDEV_ERR_PARSE,
           "checkpoint '%s': not a safetensors file: its first 8 bytes, read as the header's "
           "length, give 18446744073709551614, past the format's limit of 100000000 bytes",
           bad);
    /* A text file, as /etc/passwd: "root:x:0" read as a little-endian number. */
    const char *passwd = "root:x:0:0:root:/root:/bin/bash\n";
    spill(bad, passwd, strlen(passwd));
    EXPECT(vdev_checkpoint_load(bad, NULL, NULL, 0), VDEV_ERR_PARSE,
           "checkpoint '%s': not a safetensors file: its first 8 bytes, read as the header's "
           "length, give 3475222254926655346, past the format's limit of 100000000 bytes",
           bad);
    char buf[8];
    EXPECT(vdev_checkpoint_metadata(bad, "step", buf, sizeof buf), VDEV_ERR_PARSE,
           "checkpoint '%s': not a safetensors file: its first 8 bytes, read as the header's "
           "length, give 3475222254926655346, past the format's limit of 100000000 bytes",
           bad);
    CHECK(untouched(u));
}

/* Files from other writers: no checksum, other dtypes, any order, unknown fields. */
static void test_foreign(void) {
    const char *path = P("foreign.safetensors");
    /* The safetensors reference implementation's own example (a 60-byte header). */
    const char *ref = "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    int32_t four[4] = {5, -6, 7, -8};
    forge(path, -1, ref, strlen(ref), four, 16);
    int64_t s22[2] = {2, 2};
    vdev_tensor_t *t = vdev_tensor_zeros(s22, 2, VDEV_I32);
    const char *nt[1] = {"test"};
    CHECK_OK(vdev_checkpoint_load(path, nt, &t, 1));
    int32_t got[4];
    CHECK_OK(vdev_tensor_to_host(t, got, sizeof got));
    CHECK(memcmp(got, four, 16) == 0);
    vdev_tensor_free(t);

    /* Metadata last, white space, an unknown field, an F16 entry beside F32 ones. */
    const char *mixed =
        "{ \"h\" : {\"shape\":[2], \"dtype\":\"F16\", \"data_offsets\":[8,12]},\n"
        "  \"x\": {\"data_offsets\":[0,8],\"dtype\":\"F32\",\"shape\":[2],\"note\":[1,{}]},\n"
        "  \"__metadata__\": {\"format\": \"pt\"} }";
    float x[3] = {1.25f, -3.5f, 0.0f}; /* x, then two F16 halves in the last 4 bytes */
    forge(path, -1, mixed, strlen(mixed), x, 12);
    vdev_checkpoint_t *ck;
    CHECK_OK(vdev_checkpoint_open(path, &ck));
    struct vdev_checkpoint_entry e;
    CHECK(vdev_checkpoint_n_entries(ck) == 2);
    CHECK_OK(vdev_checkpoint_entry(ck, 1, &e));
    CHECK_STR(e.name, "h");
    CHECK_STR(e.dtype_name, "F16");
    CHECK(e.dtype == VDEV_DTYPE_COUNT && e.ndim == 1 && e.shape[0] == 2 && e.offset_bytes == 8 &&
          e.size_bytes == 4);
    CHECK(vdev_checkpoint_n_metadata(ck) == 1);
    vdev_checkpoint_close(ck);
    int64_t s2[1] = {2};
    vdev_tensor_t *y = vdev_tensor_zeros(s2, 1, VDEV_F32);
    const char *nx[1] = {"x"}, *nh[1] = {"h"};
    CHECK_OK(vdev_checkpoint_load(path, nx, &y, 1));
    float yv[2];
    CHECK_OK(vdev_tensor_to_host(y, yv, sizeof yv));
    CHECK(yv[0] == 1.25f && yv[1] == -3.5f);
    EXPECT(vdev_checkpoint_load(path, nh, &y, 1), VDEV_ERR_SHAPE,
           "checkpoint '%s': entry 'h' is F16 [2] in the file, but tensors[0] is F32 [2]", path);
    char buf[8];
    EXPECT(vdev_checkpoint_metadata(path, "vdev.crc32", buf, sizeof buf), VDEV_ERR_INVALID_ARG,
           "checkpoint '%s': no metadata key 'vdev.crc32'", path);

    /* Offsets that are not multiples of the element size, as other writers
     * leave them: F32 and I32 entries after a 10-byte F16 one. */
    const char *odd = "{\"h\":{\"dtype\":\"F16\",\"shape\":[5],\"data_offsets\":[0,10]},"
                      "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[10,18]},"
                      "\"i\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[18,22]}}";
    unsigned char odd_data[22] = {0};
    int32_t i_val = -77;
    memcpy(odd_data + 10, x, 8);
    memcpy(odd_data + 18, &i_val, 4);
    forge(path, -1, odd, strlen(odd), odd_data, sizeof odd_data);
    vdev_tensor_t *iv = vdev_tensor_zeros(NULL, 0, VDEV_I32);
    const char *nxi[2] = {"x", "i"};
    vdev_tensor_t *txi[2] = {y, iv};
    CHECK_OK(vdev_checkpoint_load(path, nxi, txi, 2));
    int32_t i_got = 0;
    memset(yv, 0, sizeof yv);
    CHECK_OK(vdev_tensor_to_host(y, yv, sizeof yv));
    CHECK_OK(vdev_tensor_to_host(iv, &i_got, sizeof i_got));
    CHECK(yv[0] == 1.25f && yv[1] == -3.5f && i_got == -77);
    vdev_tensor_free(iv);

    /* A damaged "vdev.format" key does not turn the checksum off. */
    const char *dmg = "{\"__metadata__\":{\"vdev.formaT\":\"1\",\"vdev.crc32\":\"00000000\"},"
                      "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    forge(path, -1, dmg, strlen(dmg), x, 8);
    EXPECT(vdev_checkpoint_load(path, nx, &y, 1), VDEV_ERR_IO,
           "checkpoint '%s' is damaged: checksum mismatch: the data's CRC-32 is %08lx, the "
           "header says 00000000",
           path, crc32(0L, (const unsigned char *)x, 8));
    vdev_tensor_free(y);
}

/* ---- saves that fail half-way ---- */

/* The target holds exactly `want` and the folder holds nothing else. */
static int intact(const char *path, const unsigned char *want, size_t want_len, int n_others) {
    size_t len;
    unsigned char *f = slurp(path, &len);
    int ok = f && len == want_len && memcmp(f, want, len) == 0 && n_files() == 1 + n_others;
    free(f);
    return ok;
}

/* A file-size limit makes write() fail with EFBIG partway through the
 * temporary file, as a full disk would: the old checkpoint stays. */
static void test_size_limit(vdev_tensor_t *const *t) {
    ckpt_dir_clear(0);
    const char *path = P("ckpt.safetensors");
    const char *m1[2] = {"step", "1"}, *m2[2] = {"step", "2"};
    CHECK_OK(vdev_checkpoint_save(path, names, t, 2, m1, 1)); /* the old one: w and b */
    size_t old_len;
    unsigned char *old = slurp(path, &old_len);
    struct rlimit saved;
    CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    static const rlim_t limits[] = {1, 7, 8, 100, 150, 200};
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) {
        struct rlimit lim = {limits[i], saved.rlim_max};
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        enum vdev_status st = vdev_checkpoint_save(path, names, t, N_T, m2, 1);
        CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
        CHECK_STATUS(st, VDEV_ERR_IO);
        char want[600];
        snprintf(want, sizeof want, "checkpoint '%s': cannot write '%s/.vdev-%ld-", path, dir,
                 (long)getpid());
        CHECK(strncmp(vdev_last_error(), want, strlen(want)) == 0);
        CHECK_MSG(".tmp': File too large");
        CHECK(intact(path, old, old_len, 0));
    }
    signal(SIGXFSZ, was);
    char buf[8];
    CHECK_OK(vdev_checkpoint_metadata(path, "step", buf, sizeof buf));
    CHECK_STR(buf, "1");
    CHECK_OK(
        vdev_checkpoint_save(path, names, t, N_T, m2, 1)); /* and without the limit, it works */
    CHECK_OK(vdev_checkpoint_metadata(path, "step", buf, sizeof buf));
    CHECK_STR(buf, "2");
    free(old);
}

/* Each system call and allocation of a save fails in turn (N = 1, 2, ...
 * until the save succeeds): every failure leaves the old file in place,
 * except a failure after the rename, which leaves the new one, complete. */
static void test_save_faults(vdev_tensor_t *const *t) {
    ckpt_dir_clear(0);
    const char *path = P("ckpt.safetensors"), *fresh = P("fresh.safetensors");
    const char *m1[2] = {"step", "1"}, *m2[2] = {"step", "2"};
    CHECK_OK(vdev_checkpoint_save(fresh, names, t, N_T, m2, 1)); /* the new one, for comparing */
    size_t new_len, old_len;
    unsigned char *nw = slurp(fresh, &new_len);
    unlink(fresh);
    CHECK_OK(vdev_checkpoint_save(path, names, t, 2, m1, 1));
    unsigned char *old = slurp(path, &old_len);
    int n_fail = 0, n_after_rename = 0, n_oom = 0, n_copy = 0;
    for (int k = 1; k < 1000; k++) {
        vdev_dist_checkpoint_fail_at(k);
        enum vdev_status st = vdev_checkpoint_save(path, names, t, N_T, m2, 1);
        int pending = vdev_dist_checkpoint_fault_pending();
        vdev_dist_checkpoint_fail_at(0);
        if (st == VDEV_OK) {
            CHECK(pending); /* it succeeded because the fault came after its last call */
            CHECK(intact(path, nw, new_len, 0));
            break;
        }
        n_fail++;
        char prefix[600];
        snprintf(prefix, sizeof prefix, "checkpoint '%s': ", path);
        CHECK(strncmp(vdev_last_error(), prefix, strlen(prefix)) == 0);
        if (st == VDEV_ERR_OOM) {
            n_oom++;
            CHECK(intact(path, old, old_len, 0));
        } else if (st == VDEV_ERR_BACKEND) { /* copying a tensor off its GPU */
            n_copy++;
            CHECK_MSG("': copying tensors[");
            CHECK_MSG("to the host: copy failed (injected fault)");
            CHECK(intact(path, old, old_len, 0));
        } else if (strstr(vdev_last_error(), "the new checkpoint is in place")) {
            CHECK_STATUS(st, VDEV_ERR_IO);
            CHECK_MSG("could not be synced: ");
            n_after_rename++;
            CHECK(intact(path, nw, new_len, 0));
            spill(path, old, old_len); /* start the next round from the old one */
        } else {
            CHECK_STATUS(st, VDEV_ERR_IO);
            CHECK(intact(path, old, old_len, 0));
        }
    }
    /* lstat, open, fchmod, 2+4 writes, pwrite, fsync, close, rename fail
     * before the rename; opening and syncing the folder after it. */
    CHECK(n_fail >= 13 && n_after_rename == 2 && n_oom >= 4 && n_copy == 3);
    printf("save faults: %d failures (%d allocations, %d copies, %d after the rename)\n", n_fail,
           n_oom, n_copy, n_after_rename);
    free(nw);
    free(old);
}

/* Each system call and allocation of a load, open and metadata read fails in
 * turn: every failure is clean and leaves the tensors unchanged. */
static void test_load_faults(vdev_tensor_t *const *t, vdev_tensor_t *const *u) {
    ckpt_dir_clear(0);
    const char *path = P("ckpt.safetensors");
    const char *m[2] = {"step", "3"};
    CHECK_OK(vdev_checkpoint_save(path, names, t, N_T, m, 1));
    for (int what = 0; what < 3; what++) {
        int n_fail = 0;
        for (int k = 1; k < 1000; k++) {
            vdev_dist_checkpoint_fail_at(k);
            enum vdev_status st;
            vdev_checkpoint_t *ck = NULL;
            char buf[8];
            if (what == 0)
                st = vdev_checkpoint_load(path, names, u, N_T);
            else if (what == 1)
                st = vdev_checkpoint_open(path, &ck);
            else
                st = vdev_checkpoint_metadata(path, "step", buf, sizeof buf);
            int pending = vdev_dist_checkpoint_fault_pending();
            vdev_dist_checkpoint_fail_at(0);
            if (st == VDEV_OK) {
                CHECK(pending);
                vdev_checkpoint_close(ck);
                break;
            }
            n_fail++;
            CHECK(st == VDEV_ERR_IO || st == VDEV_ERR_OOM);
            CHECK(strstr(vdev_last_error(), "checkpoint '") == vdev_last_error());
            /* A failed read is not damage: only damage has the marker. */
            CHECK(strstr(vdev_last_error(), VDEV_CKPT_DAMAGED) == NULL);
            CHECK(ck == NULL);
            if (what == 0)
                CHECK(untouched(u));
        }
        /* load: stat, open, fstat, fcntl, 2 reads, 3 parse allocations, 4
         * more, 4 reads */
        CHECK(n_fail >= (what == 0 ? 14 : 9));
        printf("%s faults: %d failures\n",
               what == 0   ? "load"
               : what == 1 ? "open"
                           : "metadata",
               n_fail);
    }
    CHECK_OK(vdev_checkpoint_load(path, names, u, N_T));
    CHECK(restored(u));
}

int main(void) {
    if (ckpt_dir_make() != 0)
        return 1;
    check_fresh("2x1GiB");
    vdev_tensor_t *t[N_T], *u[N_T];
    make_tensors(t);
    make_sentinels(u);
    test_truncation(t, u);
    test_bad_headers(u);
    test_foreign();
    test_size_limit(t);
    test_save_faults(t);
    test_load_faults(t, u);
    for (int i = 0; i < N_T; i++) {
        vdev_tensor_free(t[i]);
        vdev_tensor_free(u[i]);
    }
    vdev_shutdown();
    ckpt_dir_clear(1);
    free_paths();
    return check_done();
}
