/* ckpt_hcrc.c — a checkpoint header's own CRC ("vdev.header_crc32"): sealing
 * a header that vdev builds, and checking one read from a file.
 *
 * vdev writes the start of its header at fixed places: VDEV_CKPT_HEAD1 (with
 * the format's value), the data's CRC, VDEV_CKPT_HEAD2, then the header's
 * CRC, computed over every byte with its own 8 digits read as "00000000". A
 * reader finds that CRC in the raw bytes and checks it before anything else
 * looks at them, so damage to a header vdev wrote, wherever it falls (a
 * quote, a UTF-8 lead byte, a digit, a length grown so the header takes in
 * data bytes), is data loss ("is damaged"), never a parse error. A header
 * that does not start exactly so is still vdev's, damaged, when its first
 * bytes differ from that start in at most HEAD_SLIP places (a flipped quote
 * or letter), when it is that start cut short (a length field made smaller),
 * or when the key in the CRC's place is its name damaged. Headers of other
 * programs, and of vdev before the header CRC, start otherwise and are read
 * without it. A header of a newer "vdev.format" in this layout is refused
 * here only when its CRC matches with "1" put back (a format-1 file whose
 * "1" was damaged); otherwise parse_metadata refuses its version, since this
 * vdev cannot know a newer format's rules. After parsing, a header whose
 * metadata holds vdev.header_crc32 anywhere else is refused as changed. */
#include "dist/checkpoint.h"

#include <string.h>
#include <zlib.h>

/* 1 when s is 8 lowercase hex digits, their value in *out. */
int vdev_dist_parse_hex8(const char *s, uint32_t *out)
{
    uint32_t x = 0;
    int ok = strlen(s) == 8;
    for (int i = 0; ok && i < 8; i++) {
        char c = s[i];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        ok = h >= 0;
        x = x << 4 | (uint32_t)(h & 15);
    }
    *out = x;
    return ok;
}

/* The CRC-32 of a header's n bytes, its own CRC's 8 digits (at `at`) read as
 * "00000000" and, when fmt is not NULL, the format's value (the fmt_len bytes
 * after VDEV_CKPT_HEAD_FMT) read as fmt. */
static uint32_t header_crc(const char *text, size_t n, size_t at, const char *fmt,
                           size_t fmt_len)
{
    const size_t fmt_at = sizeof VDEV_CKPT_HEAD_FMT - 1;
    uLong c = crc32_z(0L, Z_NULL, 0);
    size_t from = 0;
    if (fmt) {
        c = crc32_z(c, (const Bytef *)text, fmt_at);
        c = crc32_z(c, (const Bytef *)fmt, strlen(fmt));
        from = fmt_at + fmt_len;
    }
    c = crc32_z(c, (const Bytef *)text + from, at - from);
    c = crc32_z(c, (const Bytef *)"00000000", 8);
    c = crc32_z(c, (const Bytef *)text + at + 8, n - at - 8);
    return (uint32_t)(c & 0xffffffffu);
}

/* Where the header's own CRC is when the header starts as vdev writes it
 * (VDEV_CKPT_HEAD1 and HEAD2, with the format's value fmt in HEAD1): the
 * offset of its 8 digits, or 0 when the header does not start that way. */
static size_t hcrc_place(const char *text, uint64_t n, const char *fmt)
{
    const size_t fmt_at = sizeof VDEV_CKPT_HEAD_FMT - 1, flen = strlen(fmt);
    const size_t crc_at = fmt_at + flen + sizeof VDEV_CKPT_HEAD_CRC - 1;
    const size_t at = crc_at + 8 + sizeof VDEV_CKPT_HEAD2 - 1;
    if (n < at + 9 || memcmp(text, VDEV_CKPT_HEAD_FMT, fmt_at) != 0 ||
        memcmp(text + fmt_at, fmt, flen) != 0 ||
        memcmp(text + fmt_at + flen, VDEV_CKPT_HEAD_CRC, sizeof VDEV_CKPT_HEAD_CRC - 1) != 0 ||
        memcmp(text + crc_at + 8, VDEV_CKPT_HEAD2, sizeof VDEV_CKPT_HEAD2 - 1) != 0 ||
        text[at + 8] != '"')
        return 0;
    return at;
}

/* How many of the 17 bytes of "vdev.header_crc32" may differ in a key found
 * in its place before that key counts as it, damaged (check_hcrc_key). */
#define HCRC_KEY_SLIP 4

/* A header without "vdev.header_crc32" is one written before it existed
 * (vdev's two other keys first, then the caller's) or another program's,
 * read without a header CRC; unless, after vdev's two keys as vdev writes
 * them, the third key is in the very place of vdev.header_crc32, as long, with
 * 8 lowercase hex digits for its value, and differs from that name in at most
 * HCRC_KEY_SLIP bytes. That is vdev.header_crc32 with a damaged name (a
 * caller's key never starts with "vdev.", and none is that close), refused as
 * damage instead of turning the header's checksum off. */
static enum vdev_status check_hcrc_key(const char *path, const char *text, uint64_t n)
{
    const size_t len = sizeof VDEV_CKPT_HCRC_KEY - 1, key_at = VDEV_CKPT_CRC_AT + 8 + 3;
    _Static_assert(VDEV_CKPT_CRC_AT + 8 + 3 + sizeof VDEV_CKPT_HCRC_KEY - 1 + 3 ==
                       VDEV_CKPT_HCRC_AT,
                   "the key sits between the data's CRC and the header's");
    char digits[9];
    uint32_t unused;
    if (n < VDEV_CKPT_HCRC_AT + 9 || memcmp(text, VDEV_CKPT_HEAD1, VDEV_CKPT_CRC_AT) != 0 ||
        memcmp(text + key_at - 3, "\",\"", 3) != 0 ||
        memcmp(text + key_at + len, "\":\"", 3) != 0 || text[VDEV_CKPT_HCRC_AT + 8] != '"')
        return VDEV_OK;
    memcpy(digits, text + VDEV_CKPT_HCRC_AT, 8);
    digits[8] = '\0';
    if (!vdev_dist_parse_hex8(digits, &unused))
        return VDEV_OK;
    int differ = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[key_at + i];
        if (c == '"' || c == '\\') /* another key: shorter, or holding an escape */
            return VDEV_OK;
        differ += c != VDEV_CKPT_HCRC_KEY[i];
    }
    if (differ > HCRC_KEY_SLIP)
        return VDEV_OK;
    return vdev_dist_ckloss(path,
                            "the key where vdev writes " VDEV_CKPT_HCRC_KEY " reads \"%.*s\"",
                            (int)len, text + key_at);
}


/* ---- before parsing: the raw bytes ---- */

/* How many of a header's first bytes may differ from the start vdev writes
 * (format "1") for it to count as that start, damaged. */
#define HEAD_SLIP 4
/* The start vdev writes, '#' for each hex digit of the two CRCs. */
static const char head_tmpl[] = VDEV_CKPT_HEAD1 "########" VDEV_CKPT_HEAD2 "########\"";
/* The fewest bytes that name vdev: a shorter start proves nothing. */
#define HEAD_NAMES_VDEV (sizeof "{\"__metadata__\":{\"vdev." - 1)
_Static_assert(sizeof head_tmpl - 1 == VDEV_CKPT_HCRC_AT + 9, "the template ends with the CRC");

/* How many of text's first min(n, template) bytes (*m of them) differ from
 * the start vdev writes: a digit's place differs when it holds no lowercase
 * hex digit. */
static size_t head_diff(const char *text, uint64_t n, size_t *m)
{
    const size_t len = sizeof head_tmpl - 1;
    size_t d = 0;
    *m = n < len ? (size_t)n : len;
    for (size_t i = 0; i < *m; i++) {
        char c = text[i];
        if (head_tmpl[i] == '#')
            d += !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
        else
            d += c != head_tmpl[i];
    }
    return d;
}

int vdev_dist_ckpt_looks_vdev(const char *head, size_t n)
{
    size_t m;
    return n >= HEAD_NAMES_VDEV && head_diff(head, n, &m) <= HEAD_SLIP;
}

/* The header's CRC (its field at `at`) against want: a mismatch is data
 * loss for a header of this format (ours), and for one of another format
 * whose CRC matches with this format's "1" (fmt_len bytes) put back (a
 * damaged "1"); another format's mismatch passes (its version is refused). */
static enum vdev_status compare_hcrc(const char *path, const char *text, uint64_t n, size_t at,
                                     uint32_t want, int ours, size_t fmt_len)
{
    uint32_t got = header_crc(text, (size_t)n, at, NULL, 0);
    if (got != want && (ours || header_crc(text, (size_t)n, at, VDEV_CKPT_FORMAT, fmt_len) ==
                                    want))
        return vdev_dist_ckloss(path,
                                "header checksum mismatch: the header's CRC-32 is %08lx, "
                                "vdev.header_crc32 says %08lx",
                                (unsigned long)got, (unsigned long)want);
    return VDEV_OK;
}

/* The value of "vdev.format" when the header starts with VDEV_CKPT_HEAD_FMT
 * and the value, up to its closing quote, is a version: 1 to 32 letters,
 * digits, '.', '-' or '_' (a damaged quote makes it run on, past a ','), in
 * fmt; 0 when there is none. */
static int head_format(const char *text, uint64_t n, char fmt[33])
{
    const size_t at = sizeof VDEV_CKPT_HEAD_FMT - 1;
    if (n < at || memcmp(text, VDEV_CKPT_HEAD_FMT, at) != 0)
        return 0;
    for (size_t i = 0; i <= 32 && at + i < n; i++) {
        char c = text[at + i];
        if (c == '"' && i) {
            memcpy(fmt, text + at, i);
            fmt[i] = '\0';
            return 1;
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '.' || c == '-' || c == '_'))
            return 0;
    }
    return 0;
}

enum vdev_status vdev_dist_ckpt_check_raw_hcrc(const char *path, const char *text, uint64_t n,
                                               int *verified)
{
    *verified = 0;
    char fmt[33];
    int has_fmt = head_format(text, n, fmt);
    /* vdev's layout, with a format's value, or with one byte in place of the
     * "1" that is no version (a damaged "1": 0x11, say) */
    const size_t fmt_at = sizeof VDEV_CKPT_HEAD_FMT - 1;
    char one[2] = {n > fmt_at ? text[fmt_at] : '"', '\0'};
    const char *as = has_fmt ? fmt : one;
    size_t at = has_fmt || (one[0] != '"' && one[0] != '\0') ? hcrc_place(text, n, as) : 0;
    if (at) {
        int ours = strcmp(as, VDEV_CKPT_FORMAT) == 0;
        char digits[9];
        uint32_t want;
        memcpy(digits, text + at, 8);
        digits[8] = '\0';
        if (!vdev_dist_parse_hex8(digits, &want))
            return ours ? vdev_dist_ckloss(path, "vdev.header_crc32 is not 8 lowercase hex "
                                                 "digits (the header was changed)")
                        : VDEV_OK; /* a newer format: its version is refused */
        enum vdev_status st = compare_hcrc(path, text, n, at, want, ours, strlen(as));
        *verified = st == VDEV_OK;
        return st;
    }
    if (has_fmt && strcmp(fmt, VDEV_CKPT_FORMAT) != 0)
        return VDEV_OK; /* a newer format's layout: its version is refused */
    enum vdev_status st = check_hcrc_key(path, text, n);
    if (st != VDEV_OK)
        return st;
    size_t m, d = head_diff(text, n, &m);
    if (m == sizeof head_tmpl - 1 && d >= 1 && d <= HEAD_SLIP)
        return vdev_dist_ckloss(path,
                                "the header does not start as vdev writes it: %zu byte%s of its "
                                "first %zu differ%s (the header was changed)",
                                d, d == 1 ? "" : "s", m, d == 1 ? "s" : "");
    if (m < sizeof head_tmpl - 1 && m >= HEAD_NAMES_VDEV && d == 0)
        return vdev_dist_ckloss(path,
                                "the header's length, %llu bytes, ends inside the %zu bytes vdev "
                                "writes first (the length was changed, or the header cut short)",
                                (unsigned long long)n, sizeof head_tmpl - 1);
    return VDEV_OK;
}

/* ---- after parsing ---- */

/* The value of `key` in object v, NULL if none (the first, if repeated). */
static yajl_val member(yajl_val v, const char *key)
{
    for (size_t k = 0; YAJL_IS_OBJECT(v) && k < v->u.object.len; k++)
        if (!strcmp(v->u.object.keys[k], key))
            return v->u.object.values[k];
    return NULL;
}

/* The header's own CRC, when it has one (see the file comment). A file of
 * another "vdev.format" (a newer vdev's) is judged only where it keeps this
 * layout and CRC: when its CRC sits elsewhere or does not match, it passes
 * here and parse_metadata refuses its version, since this vdev cannot know a
 * newer format's rules. The exception is a format-1 file whose "1" was
 * damaged: its CRC matches with "1" put back, and it is refused as damaged. */
enum vdev_status vdev_dist_ckpt_check_hcrc(const char *path, yajl_val root, const char *text,
                                           uint64_t n)
{
    yajl_val meta = member(root, "__metadata__");
    yajl_val v = member(meta, VDEV_CKPT_HCRC_KEY), f = member(meta, "vdev.format");
    if (!v) /* an older file, another program's, or a damaged key name */
        return check_hcrc_key(path, text, n);
    if (!YAJL_IS_STRING(v)) /* parse_metadata says so */
        return VDEV_OK;
    uint32_t want;
    if (!vdev_dist_parse_hex8(v->u.string, &want))
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "vdev.header_crc32 is \"%.20s\", not 8 lowercase hex digits",
                               v->u.string);
    const char *fmt = YAJL_IS_STRING(f) ? f->u.string : VDEV_CKPT_FORMAT;
    int ours = strcmp(fmt, VDEV_CKPT_FORMAT) == 0;
    size_t at = hcrc_place(text, n, fmt);
    if (at == 0 || memcmp(text + at, v->u.string, 8) != 0)
        return ours ? vdev_dist_ckloss(path, "vdev.header_crc32 is not at the start of the "
                                             "header, where vdev writes it (the header was "
                                             "changed)")
                    : VDEV_OK;
    return compare_hcrc(path, text, n, at, want, ours, strlen(fmt));
}


/* ---- sealing ---- */

void vdev_dist_ckpt_seal_header(char *header, size_t n, uint32_t data_crc)
{
    char hex[9];
    snprintf(hex, sizeof hex, "%08lx", (unsigned long)data_crc);
    memcpy(header + VDEV_CKPT_CRC_AT, hex, 8);
    snprintf(hex, sizeof hex, "%08lx",
             (unsigned long)header_crc(header, n, VDEV_CKPT_HCRC_AT, NULL, 0));
    memcpy(header + VDEV_CKPT_HCRC_AT, hex, 8);
}
