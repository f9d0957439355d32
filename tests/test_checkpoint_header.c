/* test_checkpoint_header.c — the header's version and its own checksum: an
 * edited value is refused by load, open and metadata alike; files of earlier
 * vdev versions (no header checksum) still load; a file of a newer
 * "vdev.format" is refused for its version, whether or not this vdev could
 * check it, while a damaged "1" is refused as damage; a damaged name of the
 * key "vdev.header_crc32" is refused as damage, not read as an older file
 * without the key; damage that breaks the JSON, a CRC digit, or the length
 * field (smaller, longer, past the limit) is data loss too. Each with its
 * exact code and message. */
#define _GNU_SOURCE
#include "ckpt_testlib.h"
#include "dist/checkpoint.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* The header's own CRC: an edited value is refused by load, open and
 * metadata alike; files without it (as vdev wrote them before it existed)
 * still load. */
static void test_header_crc(void) {
    const char *path = P("hcrc.safetensors");
    float x[2] = {1.5f, -2.0f};
    int64_t s2[1] = {2};
    vdev_tensor_t *t = vdev_tensor_from_host(x, s2, 1, VDEV_F32);
    const char *nx[1] = {"x"}, *meta[2] = {"step", "7"};
    CHECK_OK(vdev_checkpoint_save(path, nx, &t, 1, meta, 1));
    size_t len;
    unsigned char *f = slurp(path, &len);
    CHECK(f != NULL);
    size_t n = f[0]; /* under 256 */
    char *step = strstr((char *)f + 8, "\"step\":\"7\"");
    CHECK(step != NULL);
    char was[9];
    memcpy(was, (char *)f + 8 + VDEV_CKPT_HCRC_AT, 8);
    was[8] = '\0';
    step[8] = '9';
    spill(path, f, len);
    memcpy(f + 8 + VDEV_CKPT_HCRC_AT, "00000000", 8);
    unsigned long got = crc32(0L, f + 8, (uInt)n);
    char want[400];
    snprintf(want, sizeof want,
             "checkpoint '%s' is damaged: header checksum mismatch: the header's CRC-32 is "
             "%08lx, vdev.header_crc32 says %s",
             path, got, was);
    char buf[8] = "x";
    CHECK_STATUS(vdev_checkpoint_metadata(path, "step", buf, sizeof buf), VDEV_ERR_IO);
    CHECK_STR(vdev_last_error(), want);
    CHECK_STR(buf, "x");
    vdev_checkpoint_t *ck = (vdev_checkpoint_t *)1;
    CHECK_STATUS(vdev_checkpoint_open(path, &ck), VDEV_ERR_IO);
    CHECK_STR(vdev_last_error(), want);
    CHECK(ck == NULL);
    CHECK_STATUS(vdev_checkpoint_load(path, nx, &t, 1), VDEV_ERR_IO);
    CHECK_STR(vdev_last_error(), want);
    free(f);

    /* A file as earlier versions wrote it: the data's CRC only. */
    char old[256];
    int k = snprintf(old, sizeof old,
                     "{\"__metadata__\":{\"vdev.format\":\"1\",\"vdev.crc32\":\"%08lx\","
                     "\"step\":\"7\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
                     "\"data_offsets\":[0,8]}}",
                     crc32(0L, (const unsigned char *)x, 8));
    while (k % 8)
        old[k++] = ' ';
    forge(path, -1, old, (size_t)k, x, 8);
    vdev_tensor_t *y = vdev_tensor_zeros(s2, 1, VDEV_F32);
    CHECK_OK(vdev_checkpoint_load(path, nx, &y, 1));
    float yv[2];
    CHECK_OK(vdev_tensor_to_host(y, yv, sizeof yv));
    CHECK(yv[0] == 1.5f && yv[1] == -2.0f);
    CHECK_OK(vdev_checkpoint_metadata(path, "step", buf, sizeof buf));
    CHECK_STR(buf, "7");
    vdev_tensor_free(y);
    vdev_tensor_free(t);
}

/* The vdev checkpoint at path rewritten with "vdev.format" fmt, its header's
 * CRC made right for the new bytes when `seal` (as a newer vdev keeping this
 * layout would write it), else left as it was (a damaged "1"). *got: the CRC
 * of the new header (its digits as zeros); was: its digits as written. */
static void reformat(const char *path, const char *fmt, int seal, unsigned long *got, char *was) {
    size_t len, k = strlen("{\"__metadata__\":{\"vdev.format\":\""), fl = strlen(fmt);
    unsigned char *f = slurp(path, &len);
    CHECK(f != NULL && memcmp(f + 8 + k, "1\"", 2) == 0);
    size_t n = f[0] | (size_t)f[1] << 8, hn = n - 1 + fl; /* under 65536 */
    char *h = calloc(1, hn + 1);
    memcpy(h, f + 8, k);
    memcpy(h + k, fmt, fl);
    memcpy(h + k + fl, f + 8 + k + 1, n - k - 1);
    size_t at = (size_t)(strstr(h, "\"vdev.header_crc32\":\"") - h) + 21;
    memcpy(was, h + at, 8);
    was[8] = '\0';
    memcpy(h + at, "00000000", 8);
    *got = crc32(0L, (const unsigned char *)h, (uInt)hn);
    char hex[9];
    snprintf(hex, sizeof hex, "%08lx", *got);
    memcpy(h + at, seal ? hex : was, 8);
    if (seal)
        memcpy(was, hex, 9);
    forge(path, -1, h, hn, f + 8 + n, len - 8 - n);
    free(h);
    free(f);
}

/* The checkpoint at path is refused alike by load (into t, as "x"), open and
 * metadata: code, and exactly the message want. */
static void refused_alike(const char *path, vdev_tensor_t *t, enum vdev_status code,
                          const char *want) {
    const char *nx[1] = {"x"};
    char buf[8];
    EXPECT(vdev_checkpoint_load(path, nx, &t, 1), code, "%s", want);
    vdev_checkpoint_t *ck = (vdev_checkpoint_t *)1;
    EXPECT(vdev_checkpoint_open(path, &ck), code, "%s", want);
    CHECK(ck == NULL);
    EXPECT(vdev_checkpoint_metadata(path, "step", buf, sizeof buf), code, "%s", want);
}

/* Finds the saved metadata "step":"7" in a file's bytes f and, with edit,
 * makes it "step":"9". */
static void bump_step(unsigned char *f, int edit) {
    char *step = strstr((char *)f + 8, "\"step\":\"7\"");
    CHECK(step != NULL);
    if (step && edit)
        step[8] = '9';
}

/* A newer format with this layout and a right CRC is refused for its version
 * (as one without the CRC keys), by load, open and metadata alike; so is one
 * whose CRC sits elsewhere or that is damaged (this vdev cannot judge another
 * format). A damaged "1" is damage: the CRC matches with "1" put back. */
static void test_newer_format(void) {
    const char *path = P("v2.safetensors");
    float x[2] = {1.5f, -2.0f};
    int64_t s2[1] = {2};
    vdev_tensor_t *t = vdev_tensor_from_host(x, s2, 1, VDEV_F32);
    const char *nx[1] = {"x"}, *meta[2] = {"step", "7"};
    static const char *const fmts[] = {"2", "10", "1.1"};
    unsigned long got;
    char was[9];
    for (size_t i = 0; i < 3; i++) {
        CHECK_OK(vdev_checkpoint_save(path, nx, &t, 1, meta, 1));
        reformat(path, fmts[i], 1, &got, was);
        for (int edit = 0; edit < 2; edit++) { /* then with a changed step too */
            char want[512];
            snprintf(want, sizeof want,
                     "checkpoint '%s': vdev.format is \"%s\"; this vdev reads format 1", path,
                     fmts[i]);
            refused_alike(path, t, VDEV_ERR_UNSUPPORTED, want);
            if (edit)
                break;
            size_t len;
            unsigned char *f = slurp(path, &len);
            bump_step(f, 1);
            spill(path, f, len);
            free(f);
        }
    }
    /* The CRC key in another place: a newer layout, not damage. */
    const char *moved = "{\"__metadata__\":{\"vdev.format\":\"2\",\"vdev.crc32\":\"00000000\","
                        "\"step\":\"7\",\"vdev.header_crc32\":\"00000000\"}}";
    forge(path, -1, moved, strlen(moved), NULL, 0);
    EXPECT(vdev_checkpoint_load(path, NULL, NULL, 0), VDEV_ERR_UNSUPPORTED,
           "checkpoint '%s': vdev.format is \"2\"; this vdev reads format 1", path);
    /* A damaged "1" (the CRC left as saved). */
    for (int c = 0; c < 2; c++) {
        CHECK_OK(vdev_checkpoint_save(path, nx, &t, 1, meta, 1));
        reformat(path, c ? "3" : "0", 0, &got, was);
        EXPECT(vdev_checkpoint_load(path, nx, &t, 1), VDEV_ERR_IO,
               "checkpoint '%s' is damaged: header checksum mismatch: the header's CRC-32 is "
               "%08lx, vdev.header_crc32 says %s",
               path, got, was);
    }
    vdev_tensor_free(t);
}

/* The name of the key "vdev.header_crc32" damaged, alone or with the step
 * edited too: refused as damage, not read as a file without a header CRC.
 * A file of an older vdev whose first key of the caller's sits in that
 * place, as long, with 8 hex digits too, still loads. */
static void test_hcrc_key(void) {
    const char *path = P("key.safetensors");
    float x[2] = {1.5f, -2.0f};
    int64_t s2[1] = {2};
    vdev_tensor_t *t = vdev_tensor_from_host(x, s2, 1, VDEV_F32);
    const char *nx[1] = {"x"}, *meta[2] = {"step", "7"};
    static const char *const keys[] = {"wdev.header_crc32", "vdev.header_crc22",
                                       "vdev_header_crc32", "Vdev-header_crd33"};
    for (size_t i = 0; i < 4; i++)
        for (int edit = 0; edit < 2; edit++) {
            CHECK_OK(vdev_checkpoint_save(path, nx, &t, 1, meta, 1));
            size_t len;
            unsigned char *f = slurp(path, &len);
            CHECK(f != NULL && len > 8 + VDEV_CKPT_HCRC_AT);
            memcpy(f + 8 + VDEV_CKPT_HCRC_AT - 20, keys[i], 17);
            bump_step(f, edit);
            spill(path, f, len);
            free(f);
            char want[512];
            snprintf(want, sizeof want,
                     "checkpoint '%s' is damaged: the key where vdev writes vdev.header_crc32 "
                     "reads \"%s\"",
                     path, keys[i]);
            refused_alike(path, t, VDEV_ERR_IO, want);
        }
    /* Older files: a key of the caller's in that place, 17 bytes with a hex
     * value (5 bytes off the name, or as far as any), or shorter. */
    static const char *const older[] = {"Xdev_Header-Crc32", "commit_sha_prefix", "step"};
    for (size_t i = 0; i < 3; i++) {
        char old[256];
        int k = snprintf(old, sizeof old,
                         "{\"__metadata__\":{\"vdev.format\":\"1\",\"vdev.crc32\":\"%08lx\","
                         "\"%s\":\"0badf00d\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
                         "\"data_offsets\":[0,8]}}",
                         crc32(0L, (const unsigned char *)x, 8), older[i]);
        forge(path, -1, old, (size_t)k, x, 8);
        vdev_tensor_t *y = vdev_tensor_zeros(s2, 1, VDEV_F32);
        CHECK_OK(vdev_checkpoint_load(path, nx, &y, 1));
        float yv[2];
        CHECK_OK(vdev_tensor_to_host(y, yv, sizeof yv));
        CHECK(yv[0] == 1.5f && yv[1] == -2.0f);
        char val[16];
        CHECK_OK(vdev_checkpoint_metadata(path, older[i], val, sizeof val));
        CHECK_STR(val, "0badf00d");
        vdev_tensor_free(y);
    }
    vdev_tensor_free(t);
}

/* Damage that used to read as "not a safetensors file" is data loss, each
 * with its exact message: a quote of vdev's start flipped (the JSON would
 * not parse), a digit of the header's CRC made upper case, a length made
 * smaller so the header ends inside vdev's start, a length made huge before
 * a header as vdev writes it, and a length made longer so the header takes
 * in data bytes (a NUL). A file of another program with a huge length stays
 * "not a safetensors file". */
static void test_raw_damage(void) {
    const char *path = P("raw.safetensors");
    float x[2] = {1.5f, -2.0f};
    int64_t s2[1] = {2};
    vdev_tensor_t *t = vdev_tensor_from_host(x, s2, 1, VDEV_F32);
    const char *nx[1] = {"x"};
    CHECK_OK(vdev_checkpoint_save(path, nx, &t, 1, NULL, 0));
    size_t len;
    unsigned char *f = slurp(path, &len), *g = malloc(len);
    CHECK(f != NULL && g != NULL);
    if (!f || !g)
        return;
    size_t n = f[0], first = VDEV_CKPT_HCRC_AT + 9; /* n is under 256 */
    CHECK(n > first && n % 8 == 0);
    const char *damaged = "checkpoint '%s' is damaged: ";
    char want[512];
    int at = snprintf(want, sizeof want, damaged, path);

    memcpy(g, f, len);
    g[8 + 1] ^= 1; /* the quote that opens "__metadata__" */
    spill(path, g, len);
    snprintf(want + at, sizeof want - (size_t)at,
             "the header does not start as vdev writes it: 1 byte of its first %zu differs (the "
             "header was changed)",
             first);
    EXPECT(vdev_checkpoint_load(path, nx, &t, 1), VDEV_ERR_IO, "%s", want);

    memcpy(g, f, len);
    for (size_t i = 0; i < 8; i++) /* a digit a..f of the header's CRC upper case */
        if (g[8 + VDEV_CKPT_HCRC_AT + i] >= 'a') {
            g[8 + VDEV_CKPT_HCRC_AT + i] ^= 0x20;
            break;
        }
    if (memcmp(g, f, len) != 0) {
        spill(path, g, len);
        snprintf(want + at, sizeof want - (size_t)at,
                 "vdev.header_crc32 is not 8 lowercase hex digits (the header was changed)");
        EXPECT(vdev_checkpoint_load(path, nx, &t, 1), VDEV_ERR_IO, "%s", want);
    }

    memcpy(g, f, len);
    g[0] = 40; /* a length inside vdev's start */
    spill(path, g, len);
    snprintf(want + at, sizeof want - (size_t)at,
             "the header's length, 40 bytes, ends inside the %zu bytes vdev writes first (the "
             "length was changed, or the header cut short)",
             first);
    EXPECT(vdev_checkpoint_open(path, &(vdev_checkpoint_t *){NULL}), VDEV_ERR_IO, "%s", want);

    memcpy(g, f, len);
    g[6] = 1; /* 2^48 + n */
    spill(path, g, len);
    snprintf(want + at, sizeof want - (size_t)at,
             "its first 8 bytes, the header's length, give %llu, past the format's limit of "
             "100000000 bytes, before a header as vdev writes it (the length was changed)",
             (1ull << 48) + n);
    EXPECT(vdev_checkpoint_load(path, nx, &t, 1), VDEV_ERR_IO, "%s", want);

    memcpy(g, f, len);
    g[0] = (unsigned char)(n + 8); /* the data's first bytes, 1.5f: 00 00 c0 3f */
    spill(path, g, len);
    memcpy(g + 8 + VDEV_CKPT_HCRC_AT, "00000000", 8);
    unsigned long crc = crc32(0L, g + 8, (uInt)(n + 8));
    char was[9];
    memcpy(was, f + 8 + VDEV_CKPT_HCRC_AT, 8);
    was[8] = '\0';
    snprintf(want + at, sizeof want - (size_t)at,
             "header checksum mismatch: the header's CRC-32 is %08lx, vdev.header_crc32 says %s",
             crc, was);
    EXPECT(vdev_checkpoint_load(path, nx, &t, 1), VDEV_ERR_IO, "%s", want);

    /* another program's file (no vdev start) with a huge length */
    memcpy(g, f, len);
    g[6] = 1;
    memcpy(g + 8, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 53);
    spill(path, g, len);
    EXPECT(vdev_checkpoint_load(path, nx, &t, 1), VDEV_ERR_PARSE,
           "checkpoint '%s': not a safetensors file: its first 8 bytes, read as the header's "
           "length, give %llu, past the format's limit of 100000000 bytes",
           path, (1ull << 48) + n);
    free(g);
    free(f);
    vdev_tensor_free(t);
}

int main(void) {
    if (ckpt_dir_make() != 0)
        return 1;
    check_fresh("2x1GiB");
    test_header_crc();
    test_newer_format();
    test_hcrc_key();
    test_raw_damage();
    vdev_shutdown();
    ckpt_dir_clear(1);
    free_paths();
    return check_done();
}
